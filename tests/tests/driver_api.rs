//! Programs that call the driver: linked with -lcuda, or reaching it the way a static cudart or
//! a framework does (dlopen + cuGetProcAddress_v2 base-name lookups, v1 cuGetProcAddress, or
//! one dlsym per versioned name). Every wrapped function is recorded once under its ELF name.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, summary, Expect, Scenario};

const DRIVER_EACH: &[Expect] = &[
    Expect {
        size: 1100,
        api: "cuMemAlloc_v2",
        kind: Kind::Device,
        function: "alloc_cuMemAlloc_v2",
        marker: "cuMemAlloc_v2",
    },
    // pitch 512 × height 7
    Expect {
        size: 3584,
        api: "cuMemAllocPitch_v2",
        kind: Kind::Device,
        function: "alloc_cuMemAllocPitch_v2",
        marker: "cuMemAllocPitch_v2",
    },
    Expect {
        size: 2100,
        api: "cuMemAllocManaged",
        kind: Kind::Managed,
        function: "alloc_cuMemAllocManaged",
        marker: "cuMemAllocManaged",
    },
    Expect {
        size: 3100,
        api: "cuMemAllocHost_v2",
        kind: Kind::Host,
        function: "alloc_cuMemAllocHost_v2",
        marker: "cuMemAllocHost_v2",
    },
    Expect {
        size: 4100,
        api: "cuMemHostAlloc",
        kind: Kind::Host,
        function: "alloc_cuMemHostAlloc",
        marker: "cuMemHostAlloc",
    },
    Expect {
        size: 5100,
        api: "cuMemAllocAsync",
        kind: Kind::Async,
        function: "alloc_cuMemAllocAsync",
        marker: "cuMemAllocAsync",
    },
    Expect {
        size: 5200,
        api: "cuMemAllocAsync_ptsz",
        kind: Kind::Async,
        function: "alloc_cuMemAllocAsync_ptsz",
        marker: "cuMemAllocAsync_ptsz",
    },
    Expect {
        size: 6100,
        api: "cuMemAllocFromPoolAsync",
        kind: Kind::Async,
        function: "alloc_cuMemAllocFromPoolAsync",
        marker: "cuMemAllocFromPoolAsync",
    },
    Expect {
        size: 6200,
        api: "cuMemAllocFromPoolAsync_ptsz",
        kind: Kind::Async,
        function: "alloc_cuMemAllocFromPoolAsync_ptsz",
        marker: "cuMemAllocFromPoolAsync_ptsz",
    },
    Expect {
        size: 2097152,
        api: "cuMemCreate",
        kind: Kind::Physical,
        function: "alloc_cuMemCreate",
        marker: "cuMemCreate",
    },
    // 32 × 8 × 1 channel × 4 bytes (float)
    Expect {
        size: 1024,
        api: "cuArrayCreate_v2",
        kind: Kind::Array,
        function: "alloc_cuArrayCreate_v2",
        marker: "cuArrayCreate_v2",
    },
    // 16 × 4 × 2 × 2 channels × 2 bytes (uint16)
    Expect {
        size: 512,
        api: "cuArray3DCreate_v2",
        kind: Kind::Array,
        function: "alloc_cuArray3DCreate_v2",
        marker: "cuArray3DCreate_v2",
    },
];

fn total() -> u64 {
    DRIVER_EACH.iter().map(|e| e.size).sum()
}

fn leak(name: &str, args: &[&str], stdout: &str) {
    let mut s = Scenario::new(name);
    for a in args {
        s = s.arg(a);
    }
    let run = s.run_shim();
    run.assert_exit(0).assert_stdout(stdout);
    let dump = run.dump();
    let t = total();
    assert_eq!(dump.summary, summary(12, 0, 0, 0, 0, 12, t, t, t));
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert_live(&dump, name, DRIVER_EACH);
}

fn free(name: &str, args: &[&str], stdout: &str) {
    let mut s = Scenario::new(name);
    for a in args {
        s = s.arg(a);
    }
    let run = s.run_shim();
    run.assert_exit(0).assert_stdout(stdout);
    let dump = run.dump();
    let t = total();
    assert_eq!(dump.summary, summary(12, 12, 0, 0, 0, 0, 0, t, t));
    assert!(dump.live.is_empty(), "{:#?}", dump.live);
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
}

#[test]
fn linked_with_lcuda_every_driver_allocation_is_recorded() {
    leak("driver_each", &["leak"], "pitch=512\nleaked 12\n");
}

#[test]
fn linked_with_lcuda_every_driver_free_is_recorded() {
    free("driver_each", &["free"], "pitch=512\nfreed 12\n");
}

#[test]
fn static_cudart_route_through_get_proc_address_v2_is_recorded() {
    leak(
        "driver_pointers",
        &["getproc", "leak"],
        "route=getproc pitch=512\nleaked 12\n",
    );
    free(
        "driver_pointers",
        &["getproc", "free"],
        "route=getproc pitch=512\nfreed 12\n",
    );
}

#[test]
fn v1_get_proc_address_from_a_v2_lookup_is_recorded() {
    leak(
        "driver_pointers",
        &["getproc1", "leak"],
        "route=getproc1 pitch=512\nleaked 12\n",
    );
    free(
        "driver_pointers",
        &["getproc1", "free"],
        "route=getproc1 pitch=512\nfreed 12\n",
    );
}

#[test]
fn cuda_11_route_through_dlsym_of_v1_get_proc_address_is_recorded() {
    leak(
        "driver_pointers",
        &["cuda11", "leak"],
        "route=cuda11 pitch=512\nleaked 12\n",
    );
    free(
        "driver_pointers",
        &["cuda11", "free"],
        "route=cuda11 pitch=512\nfreed 12\n",
    );
}

#[test]
fn rtld_deepbind_driver_is_still_reached_through_get_proc_address() {
    leak(
        "driver_pointers",
        &["deepbind", "leak"],
        "route=deepbind pitch=512\nleaked 12\n",
    );
    free(
        "driver_pointers",
        &["deepbind", "free"],
        "route=deepbind pitch=512\nfreed 12\n",
    );
}

#[test]
fn old_per_name_dlsym_route_is_recorded() {
    leak(
        "driver_pointers",
        &["dlsym", "leak"],
        "route=dlsym pitch=512\nleaked 12\n",
    );
    free(
        "driver_pointers",
        &["dlsym", "free"],
        "route=dlsym pitch=512\nfreed 12\n",
    );
}

#[test]
fn v1_cu_mem_alloc_is_left_alone_and_its_free_is_untracked() {
    let run = Scenario::new("v1_alloc").run_shim();
    // The 32-bit ABI still works under the shim: the blocks are real and below 4 GiB.
    run.assert_exit(0)
        .assert_stdout("v1 blocks below 4 GiB: 1\ncuMemFree_v2 of a v1 block: rc=0\n");
    let dump = run.dump();
    assert_eq!(dump.summary, summary(1, 0, 1, 0, 0, 1, 100, 100, 100));
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert_live(
        &dump,
        "v1_alloc",
        &[Expect {
            size: 100,
            api: "cuMemAlloc_v2",
            kind: Kind::Device,
            function: "alloc_tracked",
            marker: "tracked",
        }],
    );
}

#[test]
fn a_form_the_table_does_not_know_passes_through_and_is_said_once() {
    let run = Scenario::new("unknown_form").run_shim();
    // The driver's own function was handed out (no v2 hook stood in for another argument
    // list), and it worked.
    run.assert_exit(0)
        .assert_stdout("handed out the driver's own cuMemAlloc_v3: 1\n");
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("a form this cudaleak does not know"))
        .collect();
    assert_eq!(
        said,
        ["cudaleak: warning: the CUDA runtime asked the driver for cuMemAlloc (CUDA 99.0) and was \
          given cuMemAlloc_v3, a form this cudaleak does not know: its calls are passed through \
          and NOT recorded; a newer cudaleak knows it"],
        "stderr:\n{}",
        run.stderr
    );
    let dump = run.dump();
    assert_live(
        &dump,
        "unknown_form",
        &[Expect {
            size: 4000,
            api: "cuMemAlloc_v2",
            kind: Kind::Device,
            function: "alloc_known",
            marker: "known",
        }],
    );
}
