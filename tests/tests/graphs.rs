//! CUDA graph memory: an allocation node's memory is live from each launch until it is freed
//! (in the graph, by a free node, or by cuMemFree/cuMemFreeAsync), with the stack where the
//! node was added or captured; a stream capture's allocations and frees are nodes, not calls
//! that allocate or free; a graph never launched allocates nothing. Every route the shim has.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, Expect, Scenario};

const MIB: u64 = 1 << 20;

fn check(route: &str) {
    check_form(route, "flags");
}

/// `form`: how the graphs are instantiated (graph_mem.c): every form a runtime asks for must
/// let the shim learn what an executable's launches allocate.
fn check_form(route: &str, form: &str) {
    let plain = Scenario::new("graph_mem")
        .arg(route)
        .arg("leak")
        .arg(form)
        .run_plain();
    plain
        .assert_exit(0)
        .assert_stdout(&format!("route={route} leaked 2\n"));

    let run = Scenario::new("graph_mem")
        .arg(route)
        .arg("leak")
        .arg(form)
        .run_shim();
    run.assert_exit(0)
        .assert_stdout(&format!("route={route} leaked 2\n"));
    let dump = run.dump();
    assert!(dump.events.is_empty(), "{route} {form}: {:#?}", dump.events);
    // A: two launches (one freed), B: three launches freed in-graph (nothing recorded), C: one
    // launch, D: the 5 MiB block, E: nothing.
    assert_eq!(
        dump.summary.allocations,
        2 + 1 + 1,
        "{route} {form}: {:#?}",
        dump.summary
    );
    assert_eq!(
        dump.summary.frees,
        1 + 1,
        "{route} {form}: {:#?}",
        dump.summary
    );
    assert_eq!(dump.summary.live_bytes, 4 * MIB, "{route} {form}");
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
        .arg(form)
        .run_shim();
    clean
        .assert_exit(0)
        .assert_stdout(&format!("route={route} clean\n"));
    let dump = clean.dump();
    assert!(dump.live.is_empty(), "{route} {form}: {:#?}", dump.live);
    assert!(dump.events.is_empty(), "{route} {form}: {:#?}", dump.events);
    assert_eq!(
        dump.summary.allocations, dump.summary.frees,
        "{route} {form}"
    );
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

#[test]
fn graphs_instantiated_the_cuda_11_way_are_learnt() {
    // cuGraphInstantiate_v2 (base name at 11000: an 11.x runtime's cudaGraphInstantiate) and
    // cuGraphInstantiate (10000), through each route.
    for route in ["export", "getproc", "dlsym"] {
        check_form(route, "v2");
        check_form(route, "v1");
    }
}

#[test]
fn graphs_instantiated_with_params_per_thread_are_learnt() {
    for route in ["export", "getproc", "dlsym"] {
        check_form(route, "params_ptsz");
    }
}

/// The number in the null driver's "capture queries N" line (NULLCUDA_REPORT_CAPTURE_QUERIES).
fn capture_queries(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("nullcuda: capture queries "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no capture query count in:\n{stderr}"))
}

/// A stream-ordered allocation or free asks the driver whether its stream is being captured
/// only while a capture may be under way (hooks/pools.rs): outside one, PyTorch's stream-ordered
/// allocator pays no driver call of ours per tensor; inside one, the answer still decides.
#[test]
fn stream_ordered_calls_ask_about_captures_only_while_one_may_be_under_way() {
    // driver_each: every allocating driver function once, the stream-ordered ones among them,
    // all freed; no capture.
    let run = Scenario::new("driver_each")
        .arg("free")
        .env("NULLCUDA_REPORT_CAPTURE_QUERIES", "1")
        .run_shim();
    run.assert_exit(0);
    assert_eq!(
        capture_queries(&run.stderr),
        0,
        "no capture: {}",
        run.stderr
    );
    let dump = run.dump();
    assert!(
        dump.summary.allocations == 12 && dump.summary.frees == 12,
        "the stream-ordered blocks recorded and freed: {:#?}",
        dump.summary
    );

    // graph_mem's capture: its allocations and frees are asked about (and are nodes, not
    // blocks: check_form above).
    let run = Scenario::new("graph_mem")
        .arg("export")
        .arg("leak")
        .arg("flags")
        .env("NULLCUDA_REPORT_CAPTURE_QUERIES", "1")
        .run_shim();
    run.assert_exit(0);
    assert!(capture_queries(&run.stderr) > 0, "{}", run.stderr);
}

/// A form of `cuStreamBeginCapture` the shim has no hook for (a driver newer than it): captures
/// could begin unseen, so stream-ordered calls ask the driver again, rather than record a
/// captured allocation as a block.
#[test]
fn an_unknown_form_of_beginning_a_capture_makes_stream_ordered_calls_ask_again() {
    let run = Scenario::new("unknown_capture_form")
        .env("NULLCUDA_REPORT_CAPTURE_QUERIES", "1")
        .run_shim();
    run.assert_exit(0)
        .assert_stdout("async pair after an unknown capture form\n");
    assert!(
        run.stderr
            .contains("given cuStreamBeginCapture_v3, a form this cudaleak does not know"),
        "{}",
        run.stderr
    );
    assert_eq!(capture_queries(&run.stderr), 2, "{}", run.stderr);
}
