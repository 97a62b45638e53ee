//! A forked child is its own recorded process: its own dump, a table that starts empty at the
//! fork, and `forked_from` naming the parent.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, files_in, read_dump, summary, Expect, Scenario};

#[test]
fn forked_child_writes_its_own_dump_with_an_empty_start() {
    let run = Scenario::new("fork_child").run_shim();
    run.assert_exit(0)
        .assert_stdout("child done\nparent done\n");
    let files = files_in(run.dir.path());
    assert_eq!(files.len(), 2, "one dump per process: {files:?}");
    let dumps: Vec<_> = files.iter().map(|p| read_dump(p)).collect();
    let parent = dumps
        .iter()
        .find(|d| d.process.pid == run.pid)
        .expect("the parent's dump");
    let child = dumps
        .iter()
        .find(|d| d.process.pid != run.pid)
        .expect("the child's dump");
    let child_path = run
        .dir
        .path()
        .join(format!("cudaleak.{}.json", child.process.pid));
    assert!(files.contains(&child_path), "{files:?}");

    assert_eq!(parent.process.forked_from, None);
    assert_eq!(parent.summary, summary(1, 0, 0, 0, 0, 1, 1111, 1111, 1111));
    assert_live(
        parent,
        "fork_child",
        &[Expect {
            size: 1111,
            api: "cuMemAlloc_v2",
            kind: Kind::Device,
            function: "parent_alloc",
            marker: "parent_alloc",
        }],
    );

    assert_eq!(child.process.forked_from, Some(run.pid));
    assert_eq!(child.process.ppid, run.pid);
    // The inherited block was not in the child's table: its free is untracked.
    assert_eq!(child.summary, summary(1, 0, 1, 0, 0, 1, 2222, 2222, 2222));
    assert_live(
        child,
        "fork_child",
        &[Expect {
            size: 2222,
            api: "cuMemAlloc_v2",
            kind: Kind::Device,
            function: "child_alloc",
            marker: "child_alloc",
        }],
    );
}

/// The dumps of a raw_fork run: the parent's, then the child's.
fn parent_and_child(run: &cudaleak_tests::Run) -> (cudaleak_format::Dump, cudaleak_format::Dump) {
    let files = files_in(run.dir.path());
    assert_eq!(
        files.len(),
        2,
        "one dump per process: {files:?}\n{}",
        run.stderr
    );
    let mut dumps: Vec<_> = files.iter().map(|p| read_dump(p)).collect();
    dumps.sort_by_key(|d| d.process.pid != run.pid);
    let child = dumps.pop().expect("two dumps");
    let parent = dumps.pop().expect("two dumps");
    assert_eq!(parent.process.pid, run.pid);
    assert_ne!(child.process.pid, run.pid);
    (parent, child)
}

#[test]
fn a_child_made_without_fork_starts_with_an_empty_table() {
    // _Fork() and a raw clone run no atfork handler: the child finds out at its first call.
    for how in ["_Fork", "clone"] {
        let run = Scenario::new("raw_fork").arg(how).run_shim();
        run.assert_exit(0)
            .assert_stdout("child done\nparent done\n");
        let (parent, child) = parent_and_child(&run);
        assert_eq!(parent.process.forked_from, None, "{how}");
        assert_eq!(parent.summary, summary(1, 0, 0, 0, 0, 1, 1111, 1111, 1111));
        assert_eq!(child.process.forked_from, Some(run.pid), "{how}");
        assert_eq!(child.process.recording_stopped, None, "{how}");
        // The inherited block was not in the child's table: its free is untracked.
        assert_eq!(
            child.summary,
            summary(1, 0, 1, 0, 0, 1, 2222, 2222, 2222),
            "{how}"
        );
        assert_live(
            &child,
            "raw_fork",
            &[Expect {
                size: 2222,
                api: "cuMemAlloc_v2",
                kind: Kind::Device,
                function: "child_alloc",
                marker: "child_alloc",
            }],
        );
    }
}

#[test]
fn a_child_made_without_fork_that_never_calls_cuda_dumps_nothing_of_its_parent() {
    // Found at exit: the child's dump is empty, not a copy of its parent's.
    for how in ["_Fork", "clone"] {
        let run = Scenario::new("raw_fork").arg(how).arg("quiet").run_shim();
        run.assert_exit(0)
            .assert_stdout("child done\nparent done\n");
        let (parent, child) = parent_and_child(&run);
        assert_eq!(parent.summary, summary(1, 0, 0, 0, 0, 1, 1111, 1111, 1111));
        assert_eq!(child.process.forked_from, Some(run.pid), "{how}");
        assert!(child.summary.is_empty(), "{how}: {:?}", child.summary);
        assert!(child.live.is_empty(), "{how}");
        // Only the parent's exit line: the child used no CUDA memory.
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{how}: {}", run.stderr);
        assert!(
            lines[0].contains(&format!("cudaleak.{}.json", run.pid)),
            "{lines:?}"
        );
    }
}

/// A fork while the shim looks a hook's real function up (a thread's first call of
/// cuMemAllocManaged) and that lookup waits for the loader's lock, held by another thread's
/// dlopen: the child runs (glibc's fork() re-initialises that lock in it; the shim holds none of
/// its own there), and the parent's call completes.
#[test]
fn a_fork_while_the_shim_waits_for_the_loaders_lock_gives_a_child_that_runs() {
    let run = Scenario::new("fork_loader")
        .arg(cudaleak_tests::SLOW_INIT_LIB)
        .run_shim();
    run.assert_exit(0).assert_stdout("child ok\n");
}
