//! CUDA graph memory: an allocation node's memory is live from each launch until it is freed
//! (in the graph, by a free node, or by cuMemFree/cuMemFreeAsync), with the stack where the
//! node was added or captured; a stream capture's allocations and frees are nodes, not calls
//! that allocate or free; a graph never launched allocates nothing. Every route the shim has.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, Expect, Scenario};

const MIB: u64 = 1 << 20;

fn check(route: &str) {
    let plain = Scenario::new("graph_mem")
        .arg(route)
        .arg("leak")
        .run_plain();
    plain
        .assert_exit(0)
        .assert_stdout(&format!("route={route} leaked 2\n"));

    let run = Scenario::new("graph_mem").arg(route).arg("leak").run_shim();
    run.assert_exit(0)
        .assert_stdout(&format!("route={route} leaked 2\n"));
    let dump = run.dump();
    assert!(dump.events.is_empty(), "{route}: {:#?}", dump.events);
    // A: two launches (one freed), B: three launches freed in-graph (nothing recorded), C: one
    // launch, D: the 5 MiB block, E: nothing.
    assert_eq!(
        dump.summary.allocations,
        2 + 1 + 1,
        "{route}: {:#?}",
        dump.summary
    );
    assert_eq!(dump.summary.frees, 1 + 1, "{route}: {:#?}", dump.summary);
    assert_eq!(dump.summary.live_bytes, 4 * MIB, "{route}");
    assert_live(
        &dump,
        "graph_mem",
        &[
            Expect {
                size: MIB,
                api: "cuGraphLaunch",
                kind: Kind::Graph,
                function: "add_alloc_node",
                marker: "alloc_node",
            },
            Expect {
                size: 3 * MIB,
                api: "cuGraphLaunch",
                kind: Kind::Graph,
                function: "captured_alloc",
                marker: "captured_alloc",
            },
        ],
    );

    let clean = Scenario::new("graph_mem")
        .arg(route)
        .arg("clean")
        .run_shim();
    clean
        .assert_exit(0)
        .assert_stdout(&format!("route={route} clean\n"));
    let dump = clean.dump();
    assert!(dump.live.is_empty(), "{route}: {:#?}", dump.live);
    assert!(dump.events.is_empty(), "{route}: {:#?}", dump.events);
    assert_eq!(dump.summary.allocations, dump.summary.frees, "{route}");
}

#[test]
fn graph_memory_through_exported_symbols() {
    check("export");
}

#[test]
fn graph_memory_through_get_proc_address() {
    check("getproc");
}

#[test]
fn graph_memory_through_dlsym() {
    check("dlsym");
}
