//! Programs linked against the shared runtime (nvcc -cudart shared style): every runtime
//! allocation function is recorded once, labelled with the runtime name, at the caller's line.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, assert_site, live_of_size, summary, Expect, Scenario};

const RUNTIME_EACH: &[Expect] = &[
    Expect {
        size: 1000,
        api: "cudaMalloc",
        kind: Kind::Device,
        function: "alloc_cudaMalloc",
        marker: "cudaMalloc",
    },
    Expect {
        size: 2000,
        api: "cudaMallocManaged",
        kind: Kind::Managed,
        function: "alloc_cudaMallocManaged",
        marker: "cudaMallocManaged",
    },
    Expect {
        size: 3000,
        api: "cudaMallocHost",
        kind: Kind::Host,
        function: "alloc_cudaMallocHost",
        marker: "cudaMallocHost",
    },
    Expect {
        size: 4000,
        api: "cudaHostAlloc",
        kind: Kind::Host,
        function: "alloc_cudaHostAlloc",
        marker: "cudaHostAlloc",
    },
    // pitch 512 × height 10
    Expect {
        size: 5120,
        api: "cudaMallocPitch",
        kind: Kind::Device,
        function: "alloc_cudaMallocPitch",
        marker: "cudaMallocPitch",
    },
    // pitch 512 × height 5 × depth 3
    Expect {
        size: 7680,
        api: "cudaMalloc3D",
        kind: Kind::Device,
        function: "alloc_cudaMalloc3D",
        marker: "cudaMalloc3D",
    },
    Expect {
        size: 6000,
        api: "cudaMallocAsync",
        kind: Kind::Async,
        function: "alloc_cudaMallocAsync",
        marker: "cudaMallocAsync",
    },
    Expect {
        size: 7000,
        api: "cudaMallocAsync_ptsz",
        kind: Kind::Async,
        function: "alloc_cudaMallocAsync_ptsz",
        marker: "cudaMallocAsync_ptsz",
    },
    Expect {
        size: 8000,
        api: "cudaMallocFromPoolAsync",
        kind: Kind::Async,
        function: "alloc_cudaMallocFromPoolAsync",
        marker: "cudaMallocFromPoolAsync",
    },
    Expect {
        size: 9000,
        api: "cudaMallocFromPoolAsync_ptsz",
        kind: Kind::Async,
        function: "alloc_cudaMallocFromPoolAsync_ptsz",
        marker: "cudaMallocFromPoolAsync_ptsz",
    },
    // 64 × 16 texels of float4
    Expect {
        size: 16384,
        api: "cudaMallocArray",
        kind: Kind::Array,
        function: "alloc_cudaMallocArray",
        marker: "cudaMallocArray",
    },
];

fn total(e: &[Expect]) -> u64 {
    e.iter().map(|e| e.size).sum()
}

#[test]
fn every_runtime_allocation_is_one_labelled_record_at_its_call() {
    let run = Scenario::new("runtime_each").arg("leak").run_shim();
    run.assert_exit(0)
        .assert_stdout("pitch=512 pitch3d=512\nleaked 11\n");
    let dump = run.dump();
    let t = total(RUNTIME_EACH);
    assert_eq!(dump.summary, summary(11, 0, 0, 0, 0, 11, t, t, t));
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert_live(&dump, "runtime_each", RUNTIME_EACH);
}

#[test]
fn every_runtime_free_function_forgets_its_block() {
    let run = Scenario::new("runtime_each").arg("free").run_shim();
    run.assert_exit(0)
        .assert_stdout("pitch=512 pitch3d=512\nfreed 11\n");
    let dump = run.dump();
    let t = total(RUNTIME_EACH);
    // Everything was allocated before the first free: the peak is the sum.
    assert_eq!(dump.summary, summary(11, 11, 0, 0, 0, 0, 0, t, t));
    assert!(dump.live.is_empty());
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
}

#[test]
fn runtime_and_driver_calls_are_never_counted_twice() {
    let run = Scenario::new("mixed_paths").run_shim();
    run.assert_exit(0)
        .assert_stdout("entry point status=0\nallocated 4, freed 1\n");
    let dump = run.dump();
    // cudaFree(0) counts nothing; 111 + 222 + 444 stay live, 333 was freed before 444
    // came, so the peak is the final 777.
    assert_eq!(dump.summary, summary(4, 1, 0, 0, 0, 3, 777, 777, 1110));
    assert_live(
        &dump,
        "mixed_paths",
        &[
            Expect {
                size: 111,
                api: "cudaMalloc",
                kind: Kind::Device,
                function: "via_runtime",
                marker: "runtime",
            },
            // A driver call right after runtime calls keeps its own name.
            Expect {
                size: 222,
                api: "cuMemAlloc_v2",
                kind: Kind::Device,
                function: "via_entry_point",
                marker: "entry_point",
            },
            Expect {
                size: 444,
                api: "cuMemAlloc_v2",
                kind: Kind::Device,
                function: "via_dlsym",
                marker: "dlsym",
            },
        ],
    );
}

#[test]
fn nvcc_generated_host_code_runs_and_its_leak_is_found() {
    let run = Scenario::new("nvcc_style").run_shim();
    run.assert_exit(0)
        .assert_stdout("kernel launched, no error\n");
    let dump = run.dump();
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 1024, 1024, 1024));
    let r = live_of_size(&dump, 1024);
    assert_eq!(r.api, "cudaMalloc");
    assert_eq!(r.kind, Kind::Device);
    assert_site(&dump, r.stack, "nvcc_style", "alloc_buffer", "nvcc_alloc");
}

/// nvcc's default build links the runtime statically: no runtime symbol to interpose, so the
/// record is the driver call — named by the runtime entry function in its stack.
#[test]
fn a_static_runtime_record_is_named_by_the_runtime_function_in_its_stack() {
    let run = Scenario::new("static_runtime").run_shim();
    run.assert_exit(0);
    let dump = run.dump();
    let named: Vec<(u64, &str, Option<&str>)> = dump
        .live
        .iter()
        .map(|r| {
            let frames = &dump.stacks[r.stack].frames;
            (r.size, r.api.as_str(), frames[0].function.as_deref())
        })
        .collect();
    assert_eq!(
        named,
        vec![
            (1000, "cudaMalloc", Some("cudaMalloc")),
            (2000, "cudaMallocHost", Some("cudaMallocHost")),
            (3000, "cuMemAlloc_v2", Some("via_driver")),
        ]
    );
    let line = cudaleak_tests::marker_line("static_runtime", "static_malloc");
    let caller = &dump.stacks[dump.live[0].stack].frames[1];
    assert_eq!(
        (caller.function.as_deref(), caller.line),
        (Some("via_runtime"), Some(line))
    );
}
