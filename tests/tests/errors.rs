//! What goes wrong, recorded and passed through: failed allocations, invalid and double frees,
//! frees of nothing, and the return codes, errno and out-params the program sees.

use cudaleak_format::{EventType, Hex, Kind};
use cudaleak_tests::{assert_live, assert_site, summary, Expect, Scenario};

#[test]
fn failed_allocations_are_events_with_code_and_requested_size() {
    let run = Scenario::new("failed_alloc")
        .env("NULLCUDA_MEM_LIMIT", "1048576")
        .run_shim();
    // The program ignores the errors and carries on; codes and errno are the driver's.
    run.assert_exit(0).assert_stdout(
        "cudaMalloc rc=2 errno=12 p=(nil)\ncuMemAlloc_v2 rc=2 errno=12 d=0\nlast error=2\n",
    );
    let dump = run.dump();
    assert_eq!(dump.summary, summary(1, 0, 0, 2, 0, 1, 4096, 4096, 4096));
    assert_eq!(dump.events.len(), 2, "{:#?}", dump.events);
    let (a, b) = (&dump.events[0], &dump.events[1]);
    assert!(a.seq < b.seq, "events in call order: {:#?}", dump.events);
    for (e, api, size) in [
        (a, "cudaMalloc", 1_048_577),
        (b, "cuMemAlloc_v2", 2_097_152),
    ] {
        assert_eq!(e.kind, EventType::FailedAllocation, "{e:?}");
        assert_eq!(e.api, api, "{e:?}");
        assert_eq!(e.size, Some(size), "{e:?}");
        assert_eq!(e.error, Some(2), "{e:?}");
        assert_eq!(e.alloc_stack, None, "{e:?}");
    }
    // Stacks last, so that every other expectation has been checked when one fails.
    for (e, function, marker) in [
        (a, "fail_runtime", "fail_runtime"),
        (b, "fail_driver", "fail_driver"),
    ] {
        assert_site(&dump, e.stack, "failed_alloc", function, marker);
    }
    assert_live(
        &dump,
        "failed_alloc",
        &[Expect {
            size: 4096,
            api: "cudaMalloc",
            kind: Kind::Device,
            function: "succeed",
            marker: "succeed",
        }],
    );
}

#[test]
fn invalid_and_double_frees_are_events_and_null_frees_are_nothing() {
    let run = Scenario::new("bad_free").run_shim();
    // The driver's rejection (1, errno EINVAL) reaches the program unchanged.
    run.assert_exit(0).assert_stdout(
        "cudaFree(0x1000) rc=1 errno=22\ncuMemFree_v2(0x2000) rc=1 errno=22\n\
         second cudaFree rc=1 errno=22\ncudaFree(NULL) rc=0\ncuMemFree_v2(0) rc=0\n",
    );
    let dump = run.dump();
    // cudaFree(0) at start-up, cudaFree(NULL) and cuMemFree_v2(0) count nothing.
    assert_eq!(dump.summary, summary(1, 1, 0, 0, 3, 0, 0, 512, 512));
    assert!(dump.live.is_empty(), "{:#?}", dump.live);
    assert_eq!(dump.events.len(), 3, "{:#?}", dump.events);
    let (inv_rt, inv_drv, double) = (&dump.events[0], &dump.events[1], &dump.events[2]);

    assert_eq!(inv_rt.kind, EventType::InvalidFree, "{inv_rt:?}");
    assert_eq!(inv_rt.api, "cudaFree");
    assert_eq!(inv_rt.address, Some(Hex(0x1000)));
    assert_eq!(inv_rt.error, Some(1));
    assert_eq!(inv_rt.alloc_stack, None);

    assert_eq!(inv_drv.kind, EventType::InvalidFree, "{inv_drv:?}");
    assert_eq!(inv_drv.api, "cuMemFree_v2");
    assert_eq!(inv_drv.address, Some(Hex(0x2000)));
    assert_eq!(inv_drv.error, Some(1));
    assert_eq!(inv_drv.alloc_stack, None);

    assert_eq!(double.kind, EventType::DoubleFree, "{double:?}");
    assert_eq!(double.api, "cudaFree");
    assert!(double.address.is_some_and(|a| a.0 != 0), "{double:?}");
    assert_eq!(double.error, Some(1));
    // Stacks last, so that every other expectation has been checked when one fails.
    assert_site(
        &dump,
        inv_drv.stack,
        "bad_free",
        "free_never_allocated_driver",
        "invalid_driver",
    );
    assert_site(
        &dump,
        inv_rt.stack,
        "bad_free",
        "free_never_allocated_runtime",
        "invalid_runtime",
    );
    assert_site(
        &dump,
        double.stack,
        "bad_free",
        "free_second_time",
        "double_free",
    );
    let alloc_stack = double
        .alloc_stack
        .expect("a double free names its allocation");
    assert_site(
        &dump,
        alloc_stack,
        "bad_free",
        "alloc_then_free_twice_site",
        "double_alloc",
    );
}

#[test]
fn errno_out_params_and_return_codes_pass_through_on_success() {
    let run = Scenario::new("passthrough").run_shim();
    run.assert_exit(0).assert_stdout(
        "cudaMalloc rc=0 errno=4242 nonnull=1\ncudaMallocPitch rc=0 errno=4343 pitch=1024\n\
         cudaFree rc=0 errno=4444\ncudaFree rc=0 errno=4545\n",
    );
    let dump = run.dump();
    // 4096 + pitch 1024 × 3 rows
    assert_eq!(dump.summary, summary(2, 2, 0, 0, 0, 0, 0, 7168, 7168));
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
}

#[test]
fn a_failure_after_exit_began_is_marked_during_exit_and_one_before_is_not() {
    let run = Scenario::new("teardown_fail")
        .env("NULLCUDA_MEM_LIMIT", "1048576")
        .run_shim();
    run.assert_exit(0)
        .assert_stdout("running rc=2\nteardown rc=2\n");
    let dump = run.dump();
    let seen: Vec<(Option<u64>, bool)> = dump
        .events
        .iter()
        .map(|e| (e.size, e.during_exit))
        .collect();
    assert_eq!(
        seen,
        vec![(Some(2_097_152), false), (Some(3_145_728), true)]
    );
}

#[test]
fn a_driver_refusal_the_runtime_recovers_from_is_not_a_failed_allocation() {
    // The null runtime binds a context and retries when the driver answers 201 on a new thread,
    // as the real one does: the program is told success each time.
    let run = Scenario::new("async_new_thread")
        .env("NULLCUDA_ASYNC_NEEDS_CONTEXT", "1")
        .run_shim();
    run.assert_exit(0).assert_stdout("main rc=0\nthread rc=0\n");
    let dump = run.dump();
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert_eq!(dump.summary.failed_allocations, 0);
    let mut live: Vec<(&str, u64)> = dump.live.iter().map(|r| (r.api.as_str(), r.size)).collect();
    live.sort();
    assert_eq!(live, [("cudaMallocAsync", 4096), ("cudaMallocAsync", 8192)]);
}
