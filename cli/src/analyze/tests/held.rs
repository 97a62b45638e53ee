//! Unit tests of what caches and library handles hold: blocks held, not leaked, and named at
//! the program's call; pools still growing; `cache:` lines; handles leaked per create site.
use super::*;

#[test]
fn cache_and_handle_blocks_are_held_not_leaked_and_do_not_fail_the_gate() {
    let f = framework();
    let p = &f.processes[0];
    let held: Vec<(&str, u64, u64)> = p
        .cached
        .iter()
        .map(|g| {
            (
                f.caches[g.held_by.unwrap()].id.as_str(),
                g.bytes,
                g.allocations,
            )
        })
        .collect();
    assert_eq!(
        held,
        [("cublas", 64 << 20, 1), ("pytorch-native", 22 << 20, 2)]
    );
    assert_eq!(p.cached_total.bytes, 86 << 20);
    assert_eq!(f.totals.cached.allocations, 3);
    let per_rule: Vec<(&str, u64)> = f
        .caches
        .iter()
        .zip(&f.cached_per_rule)
        .filter(|(_, c)| c.allocations > 0)
        .map(|(r, c)| (r.id.as_str(), c.bytes))
        .collect();
    assert_eq!(
        per_rule,
        [("pytorch-native", 22 << 20), ("cublas", 64 << 20)]
    );
    // The extension's own cudaMalloc is a leak although alloc_block is above it.
    assert_eq!(p.leaks.len(), 1);
    assert_eq!(
        functions(&p.leaks[0].stack)[..2],
        [
            "my_ext::scratch(unsigned long)",
            "my_ext::on_alloc_hook(void*)"
        ]
    );
    assert_eq!(p.leaks[0].held_by, None);
    assert_eq!(f.verdict.exit_code, 23);
    assert!(f.verdict.fails_on_leaks && !f.verdict.fails_on_cached);
}

#[test]
fn a_library_s_block_is_named_at_the_program_s_call_into_the_library() {
    // framework.json's cuBLAS workspace (stack 1), made from a C++ service's request
    // handler instead of PyTorch: the row names handle_request, the stack keeps libcublas.
    let mut d = fixture("framework.json");
    let frames = &mut d.stacks[1].frames;
    frames[3] = Frame {
        function: Some("handle_request(Request const&)".into()),
        file: Some("svc.cpp".into()),
        line: Some(9),
        ..frames[3].clone()
    };
    let f = one(&d, &cfg());
    let g = f.processes[0]
        .cached
        .iter()
        .find(|g| f.caches[g.held_by.unwrap()].id == "cublas")
        .unwrap();
    let at = g.stack.where_frame().unwrap();
    assert_eq!(
        at.function.as_deref(),
        Some("handle_request(Request const&)")
    );
    assert_eq!(
        functions(&g.stack)[0],
        "?",
        "libcublas stays at the top of the stack"
    );
    // A leak (no cache holds it) is named at its first frame, as always.
    let leak = &f.processes[0].leaks[0];
    assert_eq!(leak.stack.entry, 0);
}

/// framework.json with `n` 2 MiB caching-allocator segments (stack 0) and as many cuBLAS
/// workspaces (stack 1, a handle: no `grows` note), taken at `at(i)` ms, in a run of
/// `span_ms`.
fn pool_taken_at(n: u64, span_ms: u64, at: impl Fn(u64) -> u64) -> format::Dump {
    let mut d = fixture("framework.json");
    let template = d.live[0].clone();
    d.live.clear();
    for i in 0..n {
        for stack in [0, 1] {
            d.live.push(LiveRecord {
                size: 2 << 20,
                time_ms: at(i),
                seq: 2 * i + stack as u64,
                stack,
                ..template.clone()
            });
        }
    }
    d.summary.live_allocations = d.live.len() as u64;
    d.summary.live_bytes = d.live.iter().map(LiveRecord::held).sum();
    d.process.end_unix_ms = d.process.start_unix_ms + span_ms;
    d.validate().unwrap();
    d
}

#[test]
fn a_pool_that_took_blocks_all_through_the_run_is_still_growing() {
    let c = cfg();
    let native = c.caches.iter().position(|r| r.id == "pytorch-native");
    // Ten segments, one every second of a 10 s run: every tenth, half in the second half.
    let p = analyze_process(pool_taken_at(10, 10_000, |i| i * 1000), Path::new("d"), &c);
    assert_eq!(
        p.pools_growing,
        [PoolGrowth {
            rule: native.unwrap(),
            held: 20 << 20,
            second_half: 8 << 20,
            tenths: 10,
        }]
    );
    // The same segments taken in the run's first second: warm-up, not growth.
    let p = analyze_process(pool_taken_at(10, 10_000, |i| i * 100), Path::new("d"), &c);
    assert!(p.pools_growing.is_empty());
    // Too few blocks, or a run too short to tell.
    let p = analyze_process(pool_taken_at(7, 10_000, |i| i * 1400), Path::new("d"), &c);
    assert!(p.pools_growing.is_empty());
    let p = analyze_process(pool_taken_at(10, 1_900, |i| i * 190), Path::new("d"), &c);
    assert!(p.pools_growing.is_empty());
    // Only the last tenth: too few tenths although most bytes are late.
    let p = analyze_process(
        pool_taken_at(10, 10_000, |i| if i == 0 { 0 } else { 9_500 }),
        Path::new("d"),
        &c,
    );
    assert!(p.pools_growing.is_empty());
}

#[test]
fn without_the_user_leak_the_gate_passes_and_strict_counts_what_caches_hold() {
    let mut d = fixture("framework.json");
    d.live.retain(|r| r.stack != 2);
    d.summary.live_allocations = d.live.len() as u64;
    d.summary.live_bytes = d.live.iter().map(|r| r.size).sum();
    let f = one(&d, &cfg());
    assert_eq!(f.totals.leaked, Counts::default());
    assert_eq!(f.verdict.exit_code, 0);
    let mut c = cfg();
    c.gate.count_cached = true;
    let f = one(&d, &c);
    assert!(f.verdict.fails_on_cached && f.verdict.fails_on_leaks);
    assert_eq!(f.verdict.exit_code, 23);
    // --max-leaked-bytes applies to what strict counts.
    c.gate.max_leaked_bytes = 86 << 20;
    assert_eq!(one(&d, &c).verdict.exit_code, 0);
    // Suppressions never apply to what caches hold.
    let mut c = cfg();
    c.rules = vec![Rule::new("libc10_cuda", Path::new("s"), 1)];
    let f = one(&d, &c);
    assert_eq!(f.totals.suppressed, Counts::default());
    assert_eq!(f.totals.cached.allocations, 3);
}

#[test]
fn a_cache_line_holds_the_user_s_own_pool_and_comes_before_the_builtin_rules() {
    use crate::suppressions::RuleKind;
    let mut c = cfg();
    c.caches = caches::rules(&[Rule::with_kind(
        RuleKind::Cache,
        "my_ext::scratch",
        Path::new("ci.supp"),
        3,
    )])
    .unwrap();
    let f = one(&fixture("framework.json"), &c);
    let p = &f.processes[0];
    assert!(p.leaks.is_empty());
    assert_eq!(f.caches[0].id, "cache:my_ext::scratch");
    assert_eq!(f.cached_per_rule[0].bytes, 4096);
    assert_eq!(f.verdict.exit_code, 0);
    // Anchored: a pattern that matches only a frame higher up holds nothing.
    c.caches = caches::rules(&[Rule::with_kind(
        RuleKind::Cache,
        "on_alloc_hook",
        Path::new("ci.supp"),
        3,
    )])
    .unwrap();
    let f = one(&fixture("framework.json"), &c);
    assert_eq!(f.cached_per_rule[0], Counts::default());
    assert_eq!(f.processes[0].leaks.len(), 1);
}

/// A library handle of `library` made by the call at `stack` on `thread`, owning blocks `seqs`.
fn handle(library: &str, stack: usize, thread: u64, seqs: &[u64]) -> format::Handle<format::Name> {
    format::Handle {
        library: library.into(),
        create: "cublasCreate_v2".into(),
        handle: Hex(0x5000 + thread * 0x100 + seqs.first().copied().unwrap_or(0)),
        thread,
        device: Some(0),
        seq: 0,
        time_ms: 0,
        stack,
        blocks: seqs.to_vec(),
        destroyed: false,
    }
}

/// Stacks: 0 the program's create call, 1 a framework's (PyTorch's), 2 a block the library
/// allocated (libcublas below the program's call). Blocks 1..=4: 64 MiB each at stack 2.
fn handles_dump(handles: Vec<format::Handle<format::Name>>) -> format::Dump {
    let mut blocks = Vec::new();
    for seq in 1..=4 {
        blocks.push(LiveRecord {
            address: Hex(0x7f00_0000 + seq * 0x1000_0000),
            seq,
            ..record(64 << 20, 2, Some(0))
        });
    }
    let mut d = dump_of(
        vec![
            vec![frame("handle_request(int)", "/srv/svc")],
            vec![frame(
                "at::cuda::getCurrentCUDABlasHandle()",
                "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
            )],
            vec![
                frame("cublasCreate_v2", "/usr/local/cuda/lib64/libcublas.so.13"),
                frame("handle_request(int)", "/srv/svc"),
            ],
        ],
        blocks,
    );
    d.handles = handles;
    d.validate().unwrap();
    d
}

#[test]
fn a_create_site_that_leaves_two_handles_on_one_thread_leaks_them_all() {
    let d = handles_dump(vec![
        handle("cublas", 0, 7, &[1, 2]),
        handle("cublas", 0, 7, &[3]),
        handle("cublas", 0, 8, &[4]),
    ]);
    let f = one(&d, &cfg());
    let p = &f.processes[0];
    assert_eq!(p.leaks.len(), 1, "{:#?}", p.leaks);
    let g = &p.leaks[0];
    assert_eq!(
        g.handles,
        Some(Box::new(HandleCount {
            library: "cublas".into(),
            count: 3
        }))
    );
    assert_eq!((g.allocations, g.bytes), (4, 4 * (64 << 20)));
    assert_eq!(g.api, "cublasCreate_v2");
    assert_eq!(functions(&g.stack), ["handle_request(int)"]);
    assert!(
        p.cached.is_empty(),
        "its blocks are the leak's, not the cache's"
    );
    assert_eq!((f.totals.leaked_handles, f.verdict.exit_code), (3, 23));
}

#[test]
fn one_handle_per_thread_and_a_frameworks_handles_are_held() {
    let per_thread = handles_dump(vec![
        handle("cublas", 0, 7, &[1]),
        handle("cublas", 0, 8, &[2]),
    ]);
    // PyTorch's handles: however many one thread has (a plan cache), they are the framework's.
    let framework = handles_dump(vec![
        handle("cublas", 1, 7, &[1]),
        handle("cublas", 1, 7, &[2]),
    ]);
    for d in [per_thread, framework] {
        let f = one(&d, &cfg());
        let p = &f.processes[0];
        assert!(p.leaks.is_empty(), "{:#?}", p.leaks);
        assert_eq!(p.cached_total.allocations, 4);
        assert_eq!(f.verdict.exit_code, 0);
    }
}

#[test]
fn blocks_a_destroyed_handle_left_are_leaks_and_a_handle_without_blocks_still_counts() {
    let mut left = handle("cublas", 0, 7, &[1]);
    left.destroyed = true;
    let d = handles_dump(vec![
        left,
        handle("cusparse", 0, 7, &[]),
        handle("cusparse", 0, 7, &[]),
    ]);
    let f = one(&d, &cfg());
    let p = &f.processes[0];
    let mut leaks: Vec<(Option<u64>, u64)> = p
        .leaks
        .iter()
        .map(|g| (g.handles.as_ref().map(|h| h.count), g.allocations))
        .collect();
    leaks.sort();
    // The block cuBLAS left after its destroy, and the two cuSPARSE handles (no memory).
    assert_eq!(leaks, [(None, 1), (Some(2), 0)]);
    assert_eq!(p.cached_total.allocations, 3);
    assert_eq!(f.verdict.exit_code, 23);
}
