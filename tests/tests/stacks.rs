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
