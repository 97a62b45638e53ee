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
