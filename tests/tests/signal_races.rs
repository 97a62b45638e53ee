//! Terminating signals that land in the middle of something (issue 21): the program dies of the
//! signal at once, as it would without the shim, and leaves a complete dump — whether the
//! interrupted thread held one of the shim's locks, the C library's malloc arena, or the loader
//! lock, or was writing the exit dump. And the shim keeps no descriptor a program can close and
//! reuse: its pipe data is its own.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use cudaleak_format::End;
use cudaleak_tests::{files_in, kill, read_dump, wait_for_exit, wait_until, Scenario};

/// Far above what a dump of these programs takes, far below the 10 s the stall used to last.
const DEADLINE: Duration = Duration::from_secs(5);

fn read_line(out: &mut impl BufRead) -> String {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line
}

/// Waits for `child` at most [`DEADLINE`]; a child still running then is killed and reported.
fn wait_bounded(child: &mut Child, what: &str) -> (ExitStatus, Duration) {
    let start = Instant::now();
    let what = format!("{what} after SIGTERM (the signal path stalled?)");
    let status = wait_for_exit(child, DEADLINE, &what);
    (status, start.elapsed())
}

/// Runs `signal_races MODE` `rounds` times, each time sending SIGTERM a little later into the
/// loop, and checks each run dies of it within the deadline with a signal dump holding the
/// 3000-byte block.
fn sigterm_mid(mode: &str, env: &[(&str, &str)], rounds: u32) {
    let mut slowest = Duration::ZERO;
    for round in 0..rounds {
        let mut scenario = Scenario::new("signal_races").arg(mode);
        for (k, v) in env {
            scenario = scenario.env(k, v);
        }
        let mut sp = scenario.spawn_shim();
        let mut child = sp.child.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        assert_eq!(read_line(&mut out), "ready\n", "{mode}");
        std::thread::sleep(Duration::from_millis(u64::from(round % 7) * 3));
        let start = Instant::now();
        kill("TERM", sp.pid);
        let (status, _) = wait_bounded(&mut child, &format!("{mode}, round {round}"));
        let took = start.elapsed();
        slowest = slowest.max(took);
        assert_eq!(status.signal(), Some(15), "{mode}, round {round}: {status}");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
        assert_eq!(
            files_in(sp.dir.path()),
            vec![path.clone()],
            "{mode}, round {round}, dead {took:?} after SIGTERM; stderr: {stderr}"
        );
        let dump = read_dump(&path);
        assert_eq!(dump.process.end, End::Signal, "{mode}, round {round}");
        assert!(
            dump.live.iter().any(|l| l.size == 3000),
            "{mode}, round {round}: the kept block is in the dump: {:?}",
            dump.summary
        );
    }
    eprintln!("{mode}: {rounds} rounds, slowest death {slowest:?} after SIGTERM");
}

#[test]
fn sigterm_while_the_shim_holds_its_table_locks_ends_the_program_with_a_dump() {
    sigterm_mid("alloc_loop", &[], 20);
}

#[test]
fn sigterm_while_the_program_is_in_malloc_ends_it_with_a_dump() {
    // One arena for every thread: a dump that used malloc would wait on the interrupted one.
    sigterm_mid("malloc_loop", &[("MALLOC_ARENA_MAX", "1")], 10);
}

#[test]
fn sigterm_inside_dl_iterate_phdr_ends_the_program_with_a_dump() {
    sigterm_mid("phdr_loop", &[], 10);
}

#[test]
fn sigterm_during_the_exit_dump_lets_it_finish_then_kills() {
    const BLOCKS: u64 = 200_000;
    let mut sp = Scenario::new("signal_races")
        .arg("exit")
        .arg(&BLOCKS.to_string())
        .spawn_shim();
    let mut child = sp.child.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(read_line(&mut out), "exiting\n");
    // The dump's temporary file appears when the exit dump has begun: the signal lands inside it.
    let tmp = sp.dir.path().join(format!(".cudaleak.{}.tmp", sp.pid));
    wait_until(DEADLINE, "the exit dump to begin", || tmp.exists());
    kill("TERM", sp.pid);
    let (status, took) = wait_bounded(&mut child, "exit dump");
    eprintln!("SIGTERM during a {BLOCKS}-block exit dump: dead {took:?} later ({status})");
    assert_eq!(status.signal(), Some(15), "{status}");
    let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert_eq!(files_in(sp.dir.path()), vec![path.clone()]);
    let dump = read_dump(&path);
    assert_eq!(dump.process.end, End::Exit, "the exit dump, whole");
    assert_eq!(dump.summary.live_allocations, BLOCKS + 1);
    assert_eq!(dump.live.len() as u64, BLOCKS + 1);
}

#[test]
fn a_program_that_closes_and_reuses_descriptors_keeps_its_pipe_data() {
    let file_dir = tempfile::tempdir().unwrap();
    let file = file_dir.path().join("program.log");
    let mut sp = Scenario::new("signal_races")
        .arg("fd_reuse")
        .arg(file.to_str().unwrap())
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.05")
        .spawn_shim();
    let mut child = sp.child.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(read_line(&mut out), "ready\n");
    let snapshots = || {
        files_in(sp.dir.path())
            .iter()
            .filter(|f| f.to_string_lossy().contains(".snapshot-"))
            .count()
    };
    let before = snapshots();
    kill("USR1", sp.pid);
    // A snapshot written while the program waits for its line, its descriptors closed and reused.
    wait_until(DEADLINE, "a snapshot after SIGUSR1", || {
        snapshots() > before
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    assert_eq!(read_line(&mut out), "pipe gave back 4800 of 4800 bytes\n");
    let (status, _) = wait_bounded(&mut child, "fd_reuse");
    assert_eq!(status.code(), Some(0), "{status}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "program\nend\n",
        "nothing of the shim's in the program's file"
    );
    let dumps = files_in(sp.dir.path());
    let exit = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert!(dumps.contains(&exit), "{dumps:?}");
    assert_eq!(read_dump(&exit).process.end, End::Exit);
    // Snapshots come from the schedule and SIGUSR1 only, not from bytes in the program's pipe
    // (4800 of them once made as many requests): a handful in the program's ~0.5 s.
    let snapshots = dumps.len() - 1;
    assert!((1..=40).contains(&snapshots), "{snapshots} snapshots");
}
