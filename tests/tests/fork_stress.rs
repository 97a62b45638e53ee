//! Forks while other threads are inside the shim (issue 13, item 9): 8 threads allocate and free
//! without pause, a snapshot is written every 50 ms, and the main thread forks again and again.
//! Every child must finish (no lock inherited held, no waiter of the parent's in the way) and
//! write a dump with exactly its own records; the parent must finish too. A deadlock fails the
//! test after a deadline instead of hanging CI: the program kills a child that has not ended
//! within 20 s, and this test kills the program after 120 s.

use std::io::Read;
use std::process::ExitStatus;
use std::time::Duration;

use cudaleak_format::{End, Kind};
use cudaleak_tests::{assert_site, files_in, read_dump, wait_for_exit, Scenario};

const FORKS: u64 = 40;
const DEADLINE: Duration = Duration::from_secs(120);

#[test]
fn forks_under_contention_give_children_that_finish_with_their_own_records() {
    forks_under_contention("fast");
}

/// Every allocation walks the stack: forks land while threads are inside the unwinder (and the
/// dynamic linker's lists of loaded objects it reads).
#[test]
fn forks_while_threads_unwind_give_children_that_finish_with_their_own_records() {
    forks_under_contention("precise");
}

/// Children made by _Fork(): no fork handler takes the shim's locks first, so some are held for
/// good by threads the child does not have. Each child must still finish and dump nothing of its
/// parent's; one whose fork found a lock held says it recorded nothing.
#[test]
fn raw_forks_under_contention_give_children_that_finish_with_nothing_of_their_parent() {
    let mut sp = Scenario::new("fork_stress")
        .arg(&FORKS.to_string())
        .arg("raw")
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.05")
        .spawn_shim();
    let (status, stdout, stderr) = finish(&mut sp);
    assert_eq!(
        status.code(),
        Some(0),
        "{status} (95: a child deadlocked)\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(stdout, format!("forks {FORKS} children_ok {FORKS}\n"));
    let finals: Vec<_> = files_in(sp.dir.path())
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains(".snapshot-"))
        .collect();
    assert_eq!(
        finals.len() as u64,
        FORKS + 1,
        "{finals:?}\nstderr:\n{stderr}"
    );
    let mut stopped = 0;
    for path in &finals {
        let dump = read_dump(path);
        if dump.process.pid == sp.pid {
            continue;
        }
        assert_eq!(dump.process.forked_from, Some(sp.pid), "{}", path.display());
        assert!(
            dump.summary.is_empty(),
            "{}: {:?}",
            path.display(),
            dump.summary
        );
        assert!(
            dump.live.is_empty() && dump.events.is_empty(),
            "{}",
            path.display()
        );
        if let Some(why) = &dump.process.recording_stopped {
            assert!(why.starts_with("forked without fork()"), "{why}");
            stopped += 1;
        }
    }
    eprintln!("{stopped} of {FORKS} children found a lock of the shim held at the fork");
}

/// Waits for the program (killing it after [`DEADLINE`]) and reads its output.
fn finish(sp: &mut cudaleak_tests::Spawned) -> (ExitStatus, String, String) {
    let mut child = sp.child.take().expect("a child");
    drop(child.stdin.take());
    let status = wait_for_exit(&mut child, DEADLINE, "fork_stress (a deadlock?)");
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stdout, stderr)
}

fn forks_under_contention(unwind: &str) {
    let mut sp = Scenario::new("fork_stress")
        .arg(&FORKS.to_string())
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.05")
        .env("CUDALEAK_UNWIND", unwind)
        .spawn_shim();
    let (status, stdout, stderr) = finish(&mut sp);
    assert_eq!(
        status.code(),
        Some(0),
        "{status} (95: a child deadlocked)\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(stdout, format!("forks {FORKS} children_ok {FORKS}\n"));

    let parent = sp.pid;
    let finals: Vec<_> = files_in(sp.dir.path())
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains(".snapshot-"))
        .collect();
    assert_eq!(
        finals.len() as u64,
        FORKS + 1,
        "one exit dump per process: {finals:?}\nstderr:\n{stderr}"
    );
    let mut children = 0;
    for path in &finals {
        let dump = read_dump(path);
        assert_eq!(dump.process.end, End::Exit, "{}", path.display());
        assert_eq!(dump.process.recording_stopped, None, "{}", path.display());
        let s = &dump.summary;
        assert_eq!(
            s.allocations - s.frees,
            s.live_allocations,
            "{}: {s:?}",
            path.display()
        );
        if dump.process.pid == parent {
            assert_eq!(dump.process.forked_from, None);
            let kept: Vec<_> = dump.live.iter().filter(|r| r.size == 1111).collect();
            assert_eq!(kept.len(), 1, "the parent's kept block: {:#?}", dump.live);
            assert_site(
                &dump,
                kept[0].stack,
                "fork_stress",
                "parent_keep",
                "fork_parent_keep",
            );
            continue;
        }
        children += 1;
        // The child's own calls, nothing of its parent's: two allocations, one free, one
        // block live (the threads that were allocating did not survive the fork).
        assert_eq!(dump.process.forked_from, Some(parent), "{}", path.display());
        assert_eq!(
            (s.allocations, s.frees, s.untracked_frees, s.invalid_frees),
            (2, 1, 0, 0),
            "{}: {s:?}",
            path.display()
        );
        assert_eq!(
            (s.live_allocations, s.live_bytes, s.peak_live_bytes),
            (1, 4444, 7777),
            "{}: {s:?}",
            path.display()
        );
        let r = &dump.live[0];
        assert_eq!((r.size, r.kind), (4444, Kind::Device), "{r:?}");
        assert_site(
            &dump,
            r.stack,
            "fork_stress",
            "child_work",
            "fork_child_keep",
        );
        assert!(
            dump.events.is_empty(),
            "{}: {:#?}",
            path.display(),
            dump.events
        );
    }
    assert_eq!(children, FORKS);
}
