//! Stack capture: CUDALEAK_DEPTH frames of the program's own code, innermost first, without
//! the shim's frames.

use cudaleak_tests::{assert_site, first_frame, marker_line, summary, Scenario};

fn deep(depth: Option<&str>) -> cudaleak_format::Dump {
    let mut s = Scenario::new("deep_stack");
    if let Some(d) = depth {
        s = s.env("CUDALEAK_DEPTH", d);
    }
    let run = s.run_shim();
    run.assert_exit(0).assert_stdout("depth 50\n");
    let dump = run.dump();
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 4242, 4242, 4242));
    dump
}

fn assert_recursion(dump: &cudaleak_format::Dump, frames: usize) {
    let r = &dump.live[0];
    assert_eq!(r.api, "cuMemAlloc_v2");
    let stack = &dump.stacks[r.stack];
    assert_eq!(
        stack.frames.len(),
        frames,
        "CUDALEAK_DEPTH frames: {:#?}",
        stack.frames
    );
    assert_site(dump, r.stack, "deep_stack", "allocate", "deep_alloc");
    // frames[1] is recurse(0) calling allocate(): not a marked line, but the right function.
    assert_eq!(stack.frames[1].function.as_deref(), Some("recurse"));
    let line = marker_line("deep_stack", "recurse");
    for (i, f) in stack.frames.iter().enumerate().skip(2) {
        assert_eq!(f.function.as_deref(), Some("recurse"), "frame {i}: {f:?}");
        assert_eq!(f.line, Some(line), "frame {i}: {f:?}");
    }
    let top = first_frame(dump, r.stack);
    assert!(
        top.offset.is_some(),
        "frames carry their module offset: {top:?}"
    );
}

#[test]
fn default_depth_is_32_frames() {
    let dump = deep(None);
    assert_recursion(&dump, 32);
}

#[test]
fn cudaleak_depth_limits_the_frames() {
    let dump = deep(Some("5"));
    assert_recursion(&dump, 5);
}

/// The walk cache reuses a stack only when every return address is where it was: chains that
/// differ in one frame at the same stack depth, alternating, must each keep their own stack.
fn assert_chains_told_apart(unwind: &str) {
    let run = Scenario::new("walk_cache")
        .env("CUDALEAK_UNWIND", unwind)
        .run_shim();
    run.assert_exit(0).assert_stdout("200 blocks\n");
    let dump = run.dump();
    assert_eq!(dump.summary.live_allocations, 200);
    let expected = [
        (256, "near_a", "near_a"),
        (512, "near_b", "near_b"),
        (1024, "far_a", "far_a"),
        (2048, "far_b", "far_b"),
    ];
    for (size, function, marker) in expected {
        let records: Vec<_> = dump.live.iter().filter(|r| r.size == size).collect();
        assert_eq!(records.len(), 50, "{size}-byte blocks");
        let line = marker_line("walk_cache", marker);
        for r in records {
            let frames = &dump.stacks[r.stack].frames;
            assert_site(&dump, r.stack, "walk_cache", "allocate", "walk_alloc");
            let caller = frames
                .iter()
                .find(|f| f.function.as_deref() == Some(function))
                .unwrap_or_else(|| panic!("{size} B, seq {}: no {function} in {frames:#?}", r.seq));
            assert_eq!(
                caller.line,
                Some(line),
                "{size} B, seq {}: {caller:?}",
                r.seq
            );
            let wrong = ["near_a", "near_b", "far_a", "far_b"]
                .into_iter()
                .filter(|w| *w != function)
                .find(|w| frames.iter().any(|f| f.function.as_deref() == Some(w)));
            assert_eq!(wrong, None, "{size} B, seq {}: {frames:#?}", r.seq);
        }
    }
}

#[test]
fn walk_cache_tells_apart_chains_that_differ_in_one_frame() {
    assert_chains_told_apart("fast");
}

#[test]
fn precise_unwinding_gives_the_same_stacks() {
    assert_chains_told_apart("precise");
}

/// A loop calling more sites in turn than a set of the walk cache holds: each site is walked
/// once, every later allocation reuses its walk, and each keeps its own stack.
#[test]
fn many_sites_called_in_turn_are_walked_once_each_and_told_apart() {
    let run = Scenario::new("walk_cache_sites").run_shim();
    run.assert_exit(0).assert_stdout("240 blocks\n");
    let dump = run.dump();
    assert_eq!(dump.summary.live_allocations, 240);
    for n in 0..12u64 {
        let records: Vec<_> = dump
            .live
            .iter()
            .filter(|r| r.size == 100 * (n + 1))
            .collect();
        assert_eq!(records.len(), 20, "site_{n}");
        for r in records {
            assert_site(
                &dump,
                r.stack,
                "walk_cache_sites",
                &format!("site_{n}"),
                &format!("site_{n}"),
            );
        }
    }
    let shim = dump.shim.as_ref().expect("the shim's counters");
    assert_eq!(shim.stack_walks, 12, "{shim:?}");
}
