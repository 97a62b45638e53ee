//! Unit tests of the analysis: frames a user sees, grouping, filters, the gate, teardown, diff
//! (what caches and library handles hold: `held`).
use super::*;
use crate::caches;
use crate::suppressions::Rule;
use format::{Frame, Hex, LiveRecord, Stack};

use crate::fixture;

mod held;

fn view() -> View {
    View::default()
}

fn cfg() -> Config {
    Config {
        view: view(),
        rules: Vec::new(),
        caches: caches::builtin().unwrap(),
        min_bytes: 0,
        gate: Gate::default(),
        hide_quiet: false,
        pools_emptied: false,
        framework_records: false,
    }
}

fn one(dump: &format::Dump, cfg: &Config) -> Findings {
    finish(
        vec![analyze_process(dump.clone(), Path::new("d.json"), cfg)],
        cfg,
    )
}

fn functions(s: &StackView) -> Vec<&str> {
    s.frames
        .iter()
        .map(|f| f.function.as_deref().unwrap_or("?"))
        .collect()
}

fn frame(function: &str, module: &str) -> Frame {
    Frame {
        kind: None,
        ip: Hex(0x1000),
        module: Some(module.into()),
        offset: Some(Hex(0x10)),
        function: Some(function.into()),
        file: Some("app.cu".into()),
        line: Some(7),
    }
}

fn unnamed_libc() -> Frame {
    Frame {
        function: None,
        file: None,
        line: None,
        ..frame("", "/usr/lib/x86_64-linux-gnu/libc.so.6")
    }
}

#[test]
fn nothing_below_main_and_no_unnamed_libc_entry_frames_are_shown() {
    // Ubuntu's libc names neither __libc_start_call_main nor start_thread.
    let frames = [
        frame("process_data(float*)", "/bin/app"),
        frame("main", "/bin/app"),
        unnamed_libc(),
        frame("__libc_start_main", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        frame("_start", "/bin/app"),
    ];
    assert_eq!(visible_frames(&frames, "cudaMalloc", false), [0, 1]);
    let thread = [
        frame("worker(void*)", "/bin/app"),
        unnamed_libc(),
        unnamed_libc(),
    ];
    assert_eq!(visible_frames(&thread, "cudaMalloc", false), [0]);
    assert_eq!(visible_frames(&thread, "cudaMalloc", true), [0, 1, 2]);
    // A stack of nothing but unnamed libc frames is still shown.
    assert_eq!(visible_frames(&[unnamed_libc()], "cudaMalloc", false), [0]);
}

#[test]
fn thrust_template_frames_fold_so_the_program_s_frame_comes_first() {
    let inc = |f: &str, file: &str| Frame {
        file: Some(file.into()),
        ..frame(f, "/bin/app")
    };
    let frames = [
        inc(
            "thrust::cuda_cub::malloc<thrust::cuda_cub::tag>(…)",
            "/usr/local/cuda/include/thrust/system/cuda/detail/malloc_and_free.h",
        ),
        inc(
            "thrust::detail::vector_base<float, thrust::device_allocator<float> >::vector_base(unsigned long)",
            "/usr/local/cuda/targets/x86_64-linux/include/thrust/detail/vector_base.inl",
        ),
        // No source file: known by its namespace, past the return type.
        Frame {
            file: None,
            line: None,
            ..frame("void cub::DeviceReduce::Sum<float*>(…)", "/bin/app")
        },
        inc("make_scratch(int)", "svc.cu"),
        inc("main", "svc.cu"),
    ];
    let idx: Vec<usize> = (0..frames.len()).collect();
    let (kept, folded) = fold_native(&frames, &idx);
    assert_eq!(kept, [3, 4]);
    let unnamed_file = |f: &str| Frame {
        file: None,
        ..frame(f, "/bin/app")
    };
    assert_eq!(
        header_library(&unnamed_file(
            "thrust::detail::vector_base<float, thrust::device_allocator<float> >::vector_base(unsigned long)"
        )),
        Some("thrust")
    );
    assert_eq!(
        header_library(&unnamed_file("scale(thrust::device_vector<float>&, float)")),
        None
    );
    assert_eq!(
        folded,
        [Folded {
            at: 0,
            frames: 3,
            modules: vec!["thrust".into(), "cub".into()],
        }]
    );
    // All of it thrust's (the program's frames unnamed or cut): nothing is folded.
    assert_eq!(fold_native(&frames[..2], &[0, 1]), (vec![0, 1], Vec::new()));
    // A program's own function whose name only mentions thrust is not folded.
    let own = [inc("scale(thrust::device_vector<float>&)", "svc.cu")];
    assert_eq!(fold_native(&own, &[0]), (vec![0], Vec::new()));
}

fn record(size: u64, stack: usize, device: Option<i32>) -> LiveRecord {
    LiveRecord {
        address: Hex(0x7f00),
        size,
        bytes_held: None,
        api: "cudaMalloc".into(),
        kind: Kind::Device,
        device,
        thread: 1,
        seq: 1,
        time_ms: 0,
        stack,
    }
}

/// A dump whose `live` and `stacks` are given; the summary is made consistent.
fn dump_of(stacks: Vec<Vec<Frame>>, live: Vec<LiveRecord>) -> format::Dump {
    let mut d = fixture("clean.json");
    d.summary.live_allocations = live.len() as u64;
    d.summary.live_bytes = live.iter().map(LiveRecord::held).sum();
    d.stacks = stacks
        .into_iter()
        .map(|frames| Stack {
            frames,
            python: Vec::new(),
        })
        .collect();
    d.live = live;
    d.validate().unwrap();
    d
}

#[test]
fn loop_leak_is_one_group_of_ten_blocks() {
    let f = one(&fixture("leak_loop.json"), &cfg());
    let p = &f.processes[0];
    assert_eq!(p.leaks.len(), 1);
    let g = &p.leaks[0];
    assert_eq!((g.allocations, g.bytes), (10, 40960));
    assert_eq!(g.api, "cudaMalloc");
    assert_eq!(g.device, Some(0));
    assert_eq!(functions(&g.stack), ["loop_alloc(int)", "main"]);
    assert_eq!(g.stack.hidden, 5);
    assert_eq!(f.totals.callsites, 1);
    assert_eq!(f.verdict.exit_code, 23);
}

#[test]
fn reserved_and_mapped_ranges_are_shown_but_memory_is_totalled_once() {
    let mib = 1 << 20;
    let rec = |size, held, api: &str, kind, stack| LiveRecord {
        bytes_held: held,
        api: api.into(),
        kind,
        ..record(size, stack, Some(0))
    };
    let d = dump_of(
        vec![
            vec![frame("reserve_pool()", "/bin/app")],
            vec![frame("create_chunk()", "/bin/app")],
            vec![frame("map_chunk()", "/bin/app")],
            vec![frame("map_released_chunk()", "/bin/app")],
        ],
        vec![
            rec(64 * mib, Some(0), "cuMemAddressReserve", Kind::Reserved, 0),
            rec(2 * mib, None, "cuMemCreate", Kind::Physical, 1),
            rec(2 * mib, Some(0), "cuMemMap", Kind::Mapped, 2),
            // Its physical allocation was released: the mapping holds the memory now.
            rec(4 * mib, Some(4 * mib), "cuMemMap", Kind::Mapped, 3),
        ],
    );
    let f = one(&d, &cfg());
    let p = &f.processes[0];
    let groups: Vec<(&str, u64, u64)> = p
        .leaks
        .iter()
        .map(|g| (g.kind.as_str(), g.bytes, g.held))
        .collect();
    assert_eq!(
        groups,
        [
            ("mapped", 4 * mib, 4 * mib),
            ("physical", 2 * mib, 2 * mib),
            ("reserved", 64 * mib, 0),
            ("mapped", 2 * mib, 0),
        ]
    );
    assert_eq!(f.totals.leaked.allocations, 4);
    assert_eq!(f.totals.leaked.bytes, 6 * mib);
    assert_eq!(f.totals.leaked.bytes, d.summary.live_bytes);

    // A leaked reservation alone holds no memory, and still fails the gate.
    let reservation_only = dump_of(
        vec![vec![frame("reserve_pool()", "/bin/app")]],
        vec![rec(
            64 * mib,
            Some(0),
            "cuMemAddressReserve",
            Kind::Reserved,
            0,
        )],
    );
    let f = one(&reservation_only, &cfg());
    assert_eq!(f.totals.leaked.bytes, 0);
    assert_eq!(f.verdict.exit_code, 23);
}

#[test]
fn runtime_driver_and_startup_frames_are_hidden_unless_asked() {
    let mut c = cfg();
    c.view.show_internal = true;
    let f = one(&fixture("leak_loop.json"), &c);
    let s = &f.processes[0].leaks[0].stack;
    assert_eq!(s.frames.len(), 7);
    assert_eq!(s.hidden, 0);
    let internal: Vec<bool> = s.frames.iter().map(|f| f.internal).collect();
    assert_eq!(internal, [true, true, false, false, true, true, true]);
}

#[test]
fn static_cudart_internals_and_api_entry_in_the_executable_are_hidden() {
    let f = one(&fixture("error_path.json"), &cfg());
    let p = &f.processes[0];
    assert_eq!(p.leaks.len(), 3);
    assert_eq!(
        functions(&p.leaks[0].stack),
        ["process_data(float*)", "main"]
    );
    assert_eq!(p.leaks[0].bytes, 1 << 20);
    // Largest first.
    assert!(p.leaks.windows(2).all(|w| w[0].bytes >= w[1].bytes));
    assert_eq!(p.leaks[2].api, "cudaMallocHost");
    assert_eq!(p.leaks[2].kind, Kind::Host);
    assert_eq!(f.totals.leaked.allocations, 12);
    assert_eq!(f.totals.leaked.bytes, (1 << 20) + 40960 + 20480);
    assert_eq!(f.totals.callsites, 3);
}

#[test]
fn api_entry_is_hidden_only_at_the_innermost_end_and_user_wrappers_stay() {
    let exe = "/bin/app";
    let frames = vec![
        frame("cudaMalloc<float>(float**, unsigned long)", exe),
        frame("cudaMallocChecked(void**, unsigned long)", exe),
        frame("cudaFree", exe),
        frame("main", exe),
    ];
    let idx = visible_frames(&frames, "cuMemAlloc_v2", false);
    assert_eq!(idx, [1, 2, 3]);
}

#[test]
fn a_stack_of_only_internal_frames_is_shown_whole() {
    let f = one(&fixture("unsymbolized.json"), &cfg());
    let g = f.processes[0]
        .leaks
        .iter()
        .find(|g| g.api == "cuMemAlloc_v2")
        .unwrap();
    assert_eq!(g.stack.frames.len(), 2);
    assert_eq!(g.stack.hidden, 0);
}

#[test]
fn stacks_that_differ_only_in_hidden_frames_share_a_group_but_devices_split() {
    let user = |inner: &str| {
        vec![
            frame(inner, "/usr/lib/libcudart.so.12"),
            frame("work()", "/bin/app"),
            frame("main", "/bin/app"),
        ]
    };
    let d = dump_of(
        vec![user("cudart::a()"), user("cudart::b()")],
        vec![
            record(100, 0, Some(0)),
            record(200, 1, Some(0)),
            record(300, 1, Some(1)),
        ],
    );
    let f = one(&d, &cfg());
    let leaks = &f.processes[0].leaks;
    assert_eq!(leaks.len(), 2);
    assert_eq!(
        (leaks[0].device, leaks[0].bytes, leaks[0].allocations),
        (Some(0), 300, 2)
    );
    assert_eq!((leaks[1].device, leaks[1].bytes), (Some(1), 300));
    // Two groups, but one callsite.
    assert_eq!(f.totals.callsites, 1);
}

#[test]
fn frames_limit_cuts_the_display_not_the_grouping() {
    let d = dump_of(
        vec![
            vec![frame("leaf()", "/bin/app"), frame("a()", "/bin/app")],
            vec![frame("leaf()", "/bin/app"), frame("b()", "/bin/app")],
        ],
        vec![record(10, 0, None), record(20, 1, None)],
    );
    let mut c = cfg();
    c.view.frames = Some(1);
    let f = one(&d, &c);
    let leaks = &f.processes[0].leaks;
    assert_eq!(leaks.len(), 2);
    assert_eq!(leaks[0].stack.frames.len(), 1);
    assert_eq!(leaks[0].stack.omitted, 1);
}

#[test]
fn top_limits_groups_shown_but_not_totals() {
    let mut c = cfg();
    c.view.top = Some(1);
    let f = one(&fixture("error_path.json"), &c);
    let p = &f.processes[0];
    assert_eq!(p.leaks.len(), 1);
    assert_eq!(p.leaks_not_shown(), 2);
    assert_eq!(f.totals.leaked.allocations, 12);
    assert_eq!(f.totals.callsites, 3);
}

#[test]
fn suppressions_match_function_file_or_module_and_count_per_rule() {
    let rule = |p: &str, line| Rule::new(p, Path::new("s.supp"), line);
    let mut c = cfg();
    c.rules = vec![
        rule("scratch_buffers", 1),
        rule("^leak_error_path$", 2), // the module's file name: matches every group left
        rule("never_matches", 3),
    ];
    let f = one(&fixture("error_path.json"), &c);
    let p = &f.processes[0];
    assert!(p.leaks.is_empty());
    assert_eq!(
        p.suppressed[0],
        Counts {
            groups: 1,
            allocations: 10,
            bytes: 40960
        }
    );
    assert_eq!(p.suppressed[1].groups, 2);
    assert_eq!(p.suppressed[1].allocations, 2);
    assert_eq!(p.suppressed[2], Counts::default());
    assert_eq!(f.verdict.exit_code, 0);

    c.rules = vec![rule("leak_error_path.cu", 1)];
    let f = one(&fixture("error_path.json"), &c);
    assert_eq!(f.totals.suppressed.allocations, 12);
    // Internal frames count for matching too (as in LSan): libcudart's own frames.
    c.rules = vec![rule("libcudart.so", 1)];
    let f = one(&fixture("leak_loop.json"), &c);
    assert_eq!(f.totals.suppressed.allocations, 10);
    assert_eq!(f.verdict.exit_code, 0);
}

#[test]
fn min_bytes_drops_small_groups_and_counts_them() {
    let mut c = cfg();
    c.min_bytes = 40960;
    let f = one(&fixture("error_path.json"), &c);
    let p = &f.processes[0];
    assert_eq!(p.leaks.len(), 2);
    assert_eq!(
        p.below_min_bytes,
        Counts {
            groups: 1,
            allocations: 1,
            bytes: 20480
        }
    );
    assert_eq!(f.totals.callsites, 2);
}

#[test]
fn gate_follows_fail_on_exit_code_and_tolerance() {
    let leaky = fixture("leak_loop.json");
    let bad_frees = fixture("double_free.json");
    let mut c = cfg();
    assert_eq!(one(&leaky, &c).verdict.exit_code, 23);
    assert_eq!(one(&bad_frees, &c).verdict.exit_code, 23);

    c.gate.fail_on_errors = false;
    assert_eq!(one(&bad_frees, &c).verdict.exit_code, 0);
    assert_eq!(one(&leaky, &c).verdict.exit_code, 23);

    c.gate = Gate {
        fail_on_leaks: false,
        ..Gate::default()
    };
    assert_eq!(one(&leaky, &c).verdict.exit_code, 0);
    assert_eq!(one(&bad_frees, &c).verdict.exit_code, 23);

    c.gate = Gate {
        exit_code: 7,
        ..Gate::default()
    };
    assert_eq!(one(&leaky, &c).verdict.exit_code, 7);
    c.gate.exit_code = 0;
    assert_eq!(one(&leaky, &c).verdict.exit_code, 0);

    c.gate = Gate {
        max_leaked_bytes: 40960,
        ..Gate::default()
    };
    let v = one(&leaky, &c).verdict;
    assert!(v.tolerated && !v.fails_on_leaks);
    assert_eq!(v.exit_code, 0);
    c.gate.max_leaked_bytes = 40959;
    assert_eq!(one(&leaky, &c).verdict.exit_code, 23);
}

#[test]
fn failed_allocations_are_reported_but_do_not_fail_the_gate() {
    let f = one(&fixture("failed_alloc.json"), &cfg());
    let p = &f.processes[0];
    assert_eq!(p.failed.len(), 1);
    assert_eq!(p.failed[0].errors, [2]);
    assert_eq!(p.failed[0].bytes, 64 << 30);
    assert_eq!(
        functions(&p.failed[0].stack),
        ["allocate_everything()", "main"]
    );
    assert_eq!(f.totals.failed_allocations, 1);
    assert_eq!(f.verdict.exit_code, 0);
}

#[test]
fn double_free_keeps_both_stacks_and_invalid_free_its_own() {
    let f = one(&fixture("double_free.json"), &cfg());
    let p = &f.processes[0];
    assert_eq!(p.bad_frees.len(), 2);
    let df = &p.bad_frees[0];
    assert_eq!(df.kind, EventType::DoubleFree);
    assert_eq!(df.address, Some(0x7f50_0000_0000));
    assert_eq!(functions(&df.stack), ["cleanup(float*)", "main"]);
    assert_eq!(
        functions(df.alloc_stack.as_ref().unwrap()),
        ["make_buffer()", "main"]
    );
    assert_eq!(p.bad_frees[1].kind, EventType::InvalidFree);
    assert!(p.bad_frees[1].alloc_stack.is_none());
    assert_eq!(
        (
            f.totals.double_frees,
            f.totals.invalid_frees,
            f.totals.bad_frees
        ),
        (1, 1, 2)
    );
}

#[test]
fn managed_memory_is_listed_as_its_own_section() {
    let f = one(&fixture("managed.json"), &cfg());
    let p = &f.processes[0];
    assert_eq!(p.managed.len(), 1);
    assert_eq!(p.managed[0].bytes, 16 << 20);
    assert_eq!(p.managed[0].allocations, 2);
    assert_eq!(f.totals.managed.bytes, 16 << 20);
    // Suppressing the leak does not hide the risk.
    let mut c = cfg();
    c.rules = vec![Rule::new("init_data", Path::new("s"), 1)];
    let f = one(&fixture("managed.json"), &c);
    assert!(f.processes[0].leaks.is_empty());
    assert_eq!(f.processes[0].managed.len(), 1);
}

#[test]
fn stats_tally_live_blocks_by_api_and_module() {
    let f = one(&fixture("error_path.json"), &cfg());
    let s = &f.processes[0].stats;
    assert_eq!(s.by_api[0].0, "cudaMalloc");
    assert_eq!(s.by_api[0].1.allocations, 11);
    assert_eq!(s.by_api[1].0, "cudaMallocHost");
    assert_eq!(s.by_module.len(), 1);
    assert_eq!(s.by_module[0].0, "leak_error_path");
    assert_eq!(s.by_module[0].1.bytes, (1 << 20) + 40960 + 20480);
    assert_eq!(s.top_callsites.len(), 3);
}

#[test]
fn processes_are_sorted_by_pid_and_shared_callsites_count_once() {
    let c = cfg();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/multi");
    let a = crate::load::read(&dir.join("cudaleak.2002.json")).unwrap();
    let b = crate::load::read(&dir.join("cudaleak.2001.json")).unwrap();
    let f = finish(
        vec![
            analyze_process(a.clone(), Path::new("a"), &c),
            analyze_process(b.clone(), Path::new("b"), &c),
        ],
        &c,
    );
    let pids: Vec<u32> = f.processes.iter().map(|p| p.process.pid).collect();
    assert_eq!(pids, [2001, 2002]);
    assert_eq!(f.totals.processes, 2);
    assert_eq!(f.totals.leaked.allocations, 3);
    assert_eq!(f.totals.callsites, 2);
    // The shared callsite is merged over both processes, largest first.
    assert_eq!(f.callsites.len(), 2);
    let shared = &f.callsites[0];
    assert_eq!(functions(&shared.stack)[0], "worker_init()");
    assert_eq!(
        (shared.bytes, shared.allocations, shared.processes),
        (2 << 20, 2, 2)
    );
    assert_eq!(f.callsites[1].processes, 1);
}

fn framework() -> Findings {
    one(&fixture("framework.json"), &cfg())
}

#[test]
fn teardown_failures_are_notes_not_failed_allocations_or_bad_frees() {
    let f = framework();
    let p = &f.processes[0];
    assert_eq!(p.failed.len(), 1);
    assert_eq!(p.failed[0].errors, [2]);
    assert!(p.bad_frees.is_empty());
    let notes: Vec<(EventType, &str, &[i64], u64)> = p
        .teardown
        .iter()
        .map(|g| (g.kind, g.api.as_str(), g.errors.as_slice(), g.during_exit))
        .collect();
    assert_eq!(
        notes,
        [
            (
                EventType::FailedAllocation,
                "cudaMallocAsync",
                &[201][..],
                1
            ),
            (EventType::InvalidFree, "cudaFree", &[4][..], 1)
        ]
    );
    assert_eq!(
        (
            f.totals.failed_allocations,
            f.totals.bad_frees,
            f.totals.teardown
        ),
        (1, 0, 2)
    );
    // No bad free fails the gate: only the extension's leak does.
    let mut c = cfg();
    c.gate.fail_on_leaks = false;
    assert_eq!(one(&fixture("framework.json"), &c).verdict.exit_code, 0);
}

#[test]
fn error_201_or_3_before_exit_began_is_a_real_failure_but_4_never_is() {
    let e = |error, during_exit| format::Event {
        kind: EventType::FailedAllocation,
        api: "cudaMalloc".into(),
        address: None,
        size: Some(1),
        error: Some(error),
        seq: 1,
        stack: 0,
        alloc_stack: None,
        during_exit,
    };
    assert!(is_teardown(&e(4, false)) && is_teardown(&e(4, true)));
    assert!(!is_teardown(&e(201, false)) && is_teardown(&e(201, true)));
    assert!(!is_teardown(&e(3, false)) && is_teardown(&e(3, true)));
    assert!(!is_teardown(&e(2, true)));
    let mut d = fixture("framework.json");
    for ev in &mut d.events {
        ev.during_exit = false;
    }
    let f = one(&d, &cfg());
    let p = &f.processes[0];
    assert_eq!(p.failed.len(), 2, "201 before exit is a failed allocation");
    assert_eq!(p.teardown.len(), 1, "4 is teardown whenever it comes");
    assert_eq!(f.totals.failed_allocations, 2);
}

#[test]
fn quiet_processes_are_left_out_only_when_asked_and_counted() {
    let mut c = cfg();
    let f = finish(
        vec![
            analyze_process(fixture("quiet.json"), Path::new("q"), &c),
            analyze_process(fixture("leak_loop.json"), Path::new("l"), &c),
        ],
        &c,
    );
    assert_eq!(f.processes.len(), 2);
    assert!(f.quiet.is_empty());
    c.hide_quiet = true;
    let f = finish(
        vec![
            analyze_process(fixture("quiet.json"), Path::new("q"), &c),
            analyze_process(fixture("clean.json"), Path::new("c"), &c),
            analyze_process(fixture("failed_alloc.json"), Path::new("f"), &c),
        ],
        &c,
    );
    // clean.json allocated (and freed); failed_alloc.json has a failed call: both shown.
    let pids: Vec<u32> = f.processes.iter().map(|p| p.process.pid).collect();
    assert_eq!(pids, [7007, 8008]);
    assert_eq!(f.quiet.len(), 1);
    assert_eq!(f.quiet[0].pid, 10011);
    assert_eq!((f.totals.processes, f.totals.quiet_processes), (2, 1));
}

#[test]
fn diff_matches_callsites_across_stack_indices_and_puts_growth_first() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshots");
    let old = crate::load::read(&dir.join("cudaleak.3001.snapshot-1.json")).unwrap();
    let new = crate::load::read(&dir.join("cudaleak.3001.snapshot-2.json")).unwrap();
    let d = diff(&old, Path::new("o"), &new, Path::new("n"), &view());
    assert_eq!(d.rows.len(), 3);
    assert_eq!((d.grew, d.unchanged, d.shrank), (1, 1, 1));
    let first = &d.rows[0];
    assert_eq!(functions(&first.stack)[0], "handle_request(int)");
    assert_eq!((first.old.allocations, first.new.allocations), (2, 6));
    assert_eq!(first.delta_bytes(), 4 * 4096);
    assert_eq!(d.rows[1].trend(), 0);
    assert_eq!(d.rows[2].delta_bytes(), -3 * 65536);

    let mut v = view();
    v.top = Some(1);
    let d = diff(&old, Path::new("o"), &new, Path::new("n"), &v);
    assert_eq!((d.rows.len(), d.rows_not_shown, d.grew), (1, 2, 1));
}

#[test]
fn a_cuda_library_built_with_line_tables_is_not_the_programs_own_code() {
    let mut nccl = frame("ncclCuMemAlloc", "/opt/venv/nvidia/nccl/lib/libnccl.so.2");
    nccl.file = Some("/dvs/p4/build/sw/gpgpu/nccl/src/include/alloc.h".into());
    assert!(!frame_view(&nccl, false).is_own());
    let own = frame("handle_request(int)", "/srv/svc");
    assert!(frame_view(&own, false).is_own());
}

#[test]
fn a_host_register_or_ipc_open_entry_is_folded_like_cuda_malloc() {
    // With a static cudart the runtime entry is a frame of the program: hidden as the entry of
    // the recorded call, as cudaMalloc's is (these two were missing from the CLI's own list).
    let exe = "/bin/app";
    for (entry, api) in [
        ("cudaMalloc", "cuMemAlloc_v2"),
        ("cudaHostRegister", "cuMemHostRegister_v2"),
        ("cudaIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"),
        ("cudaMemPoolImportPointer", "cuMemPoolImportPointer"),
    ] {
        let frames = vec![
            frame("cudart::cudaApiEntry(void**)", exe),
            frame(entry, exe),
            frame("pin_buffers(void*)", exe),
            frame("main", exe),
        ];
        assert_eq!(visible_frames(&frames, api, false), [2, 3], "{entry}");
        let live = LiveRecord {
            api: api.into(),
            ..record(4096, 0, Some(0))
        };
        let dump = dump_of(vec![frames], vec![live]);
        let f = one(&dump, &cfg());
        let stack = &f.processes[0].leaks[0].stack;
        assert_eq!(functions(stack), ["pin_buffers(void*)", "main"], "{entry}");
        assert_eq!(stack.hidden, 2, "{entry}");
    }
    // A runtime function the shim does not hook stays the program's frame.
    let frames = vec![frame("cudaMalloc3DArray", exe), frame("main", exe)];
    assert_eq!(visible_frames(&frames, "cuArray3DCreate_v2", false), [0, 1]);
}
