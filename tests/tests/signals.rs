//! Dumps of a process that is still running or is ended by a signal: SIGTERM leaves a dump with
//! `end: signal` and the process still dies of SIGTERM; SIGUSR1 writes a numbered snapshot and
//! the program runs on.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use cudaleak_format::{End, Kind};
use cudaleak_tests::{
    assert_live, files_in, kill, read_dump, summary, wait_for_exit, wait_until, Expect, Scenario,
};

const FIRST: Expect = Expect {
    size: 3000,
    api: "cuMemAlloc_v2",
    kind: Kind::Device,
    function: "alloc_first",
    marker: "first",
};
const SECOND: Expect = Expect {
    size: 5000,
    api: "cuMemAlloc_v2",
    kind: Kind::Device,
    function: "alloc_second",
    marker: "second",
};

fn wait_for_file(path: &Path) {
    let what = format!("{} to appear", path.display());
    wait_until(Duration::from_secs(20), &what, || path.exists());
}

#[test]
fn sigterm_writes_a_signal_dump_and_still_kills() {
    let mut sp = Scenario::new("wait_signal").spawn_shim();
    let mut child = sp.child.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    kill("TERM", sp.pid);
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(15),
        "the program dies of SIGTERM as it would without the shim: {status}"
    );
    let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert_eq!(files_in(sp.dir.path()), vec![path.clone()]);
    let dump = read_dump(&path);
    assert_eq!(dump.process.end, End::Signal);
    assert_eq!(dump.process.signal.as_deref(), Some("SIGTERM"));
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 3000, 3000, 3000));
    assert_live(&dump, "wait_signal", &[FIRST]);
}

#[test]
fn sigusr1_writes_a_snapshot_and_the_program_runs_on() {
    let mut sp = Scenario::new("wait_signal").spawn_shim();
    let mut child = sp.child.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");

    kill("USR1", sp.pid);
    let snapshot = sp
        .dir
        .path()
        .join(format!("cudaleak.{}.snapshot-1.json", sp.pid));
    wait_for_file(&snapshot);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "done\n");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");

    let final_dump = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    let mut expected = vec![final_dump.clone(), snapshot.clone()];
    expected.sort();
    assert_eq!(files_in(sp.dir.path()), expected);

    let snap = read_dump(&snapshot);
    assert_eq!(snap.process.end, End::Snapshot);
    assert_eq!(snap.process.snapshot, Some(1));
    assert_eq!(snap.summary, summary(1, 0, 0, 0, 0, 1, 3000, 3000, 3000));
    assert_live(&snap, "wait_signal", &[FIRST]);

    let last = read_dump(&final_dump);
    assert_eq!(last.process.end, End::Exit);
    assert_eq!(last.summary, summary(2, 0, 0, 0, 0, 2, 8000, 8000, 8000));
    assert_live(&last, "wait_signal", &[FIRST, SECOND]);
}

/// Waits for the child, killing it and failing if it has not ended within 30 s.
fn wait_or_fail(child: &mut std::process::Child) -> std::process::ExitStatus {
    wait_for_exit(child, Duration::from_secs(30), "the program")
}

/// Starts `sp`'s program, reads its first line (must be `first`), and returns the child with
/// stdout still open.
fn started(
    sp: &mut cudaleak_tests::Spawned,
    first: &str,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = sp.child.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, first);
    (child, out)
}

fn rest_of(out: &mut BufReader<std::process::ChildStdout>) -> String {
    let mut rest = String::new();
    std::io::Read::read_to_string(out, &mut rest).unwrap();
    rest
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).unwrap();
    }
    err
}

/// wait_signal, sent `signal` while it waits: a dump with end=signal naming it, then death by
/// that signal (number `number`).
fn default_action_signal_dumps_and_kills(signal: &str, number: i32) {
    let mut sp = Scenario::new("wait_signal").spawn_shim();
    let (mut child, _out) = started(&mut sp, "ready\n");
    kill(signal, sp.pid);
    let status = wait_or_fail(&mut child);
    let stderr = stderr_of(&mut child);
    assert_eq!(
        status.signal(),
        Some(number),
        "dies of SIG{signal} as without the shim: {status}\nstderr:\n{stderr}"
    );
    let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert_eq!(files_in(sp.dir.path()), vec![path.clone()], "{stderr}");
    let dump = read_dump(&path);
    assert_eq!(dump.process.end, End::Signal);
    let name = format!("SIG{signal}");
    assert_eq!(dump.process.signal.as_deref(), Some(name.as_str()));
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 3000, 3000, 3000));
    assert_live(&dump, "wait_signal", &[FIRST]);
}

#[test]
fn sigint_writes_a_signal_dump_and_still_kills() {
    default_action_signal_dumps_and_kills("INT", 2);
}

#[test]
fn sighup_writes_a_signal_dump_and_still_kills() {
    default_action_signal_dumps_and_kills("HUP", 1);
}

/// `make test` under `nohup` inherits SIGHUP ignored; the harness gives each scenario the
/// default back, so the test above still sees the program die of SIGHUP.
#[test]
fn sighup_test_passes_when_the_test_runner_ignores_sighup() {
    cudaleak_tests::assert_passes_with_ignored(
        "HUP,INT,QUIT",
        "sighup_writes_a_signal_dump_and_still_kills",
    );
}

#[test]
fn abort_writes_a_sigabrt_dump_and_still_dies_of_sigabrt() {
    let mut sp = Scenario::new("abort_default").spawn_shim();
    let (mut child, mut out) = started(&mut sp, "aborting\n");
    let status = wait_or_fail(&mut child);
    let stderr = stderr_of(&mut child);
    assert_eq!(rest_of(&mut out), "");
    assert_eq!(
        status.signal(),
        Some(6),
        "dies of SIGABRT as without the shim: {status}\nstderr:\n{stderr}"
    );
    let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert_eq!(files_in(sp.dir.path()), vec![path.clone()], "{stderr}");
    let dump = read_dump(&path);
    assert_eq!(dump.process.end, End::Signal);
    assert_eq!(dump.process.signal.as_deref(), Some("SIGABRT"));
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 6000, 6000, 6000));
    assert_live(
        &dump,
        "abort_default",
        &[Expect {
            size: 6000,
            api: "cuMemAlloc_v2",
            kind: Kind::Device,
            function: "alloc_block",
            marker: "abort_alloc",
        }],
    );
}

const HANDLERS_BLOCK: Expect = Expect {
    size: 7000,
    api: "cuMemAlloc_v2",
    kind: Kind::Device,
    function: "alloc_block",
    marker: "handlers_alloc",
};

#[test]
fn the_programs_own_sigterm_handler_runs_and_its_exit_writes_the_exit_dump() {
    let mut sp = Scenario::new("own_handlers").spawn_shim();
    let (mut child, mut out) = started(&mut sp, "ready\n");
    kill("TERM", sp.pid);
    let status = wait_or_fail(&mut child);
    let stderr = stderr_of(&mut child);
    assert_eq!(rest_of(&mut out), "handled\n", "the program's handler ran");
    assert_eq!(
        status.code(),
        Some(3),
        "the handler's exit(3) decides: {status}\nstderr:\n{stderr}"
    );
    let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert_eq!(files_in(sp.dir.path()), vec![path.clone()], "{stderr}");
    let dump = read_dump(&path);
    assert_eq!(
        dump.process.end,
        End::Exit,
        "exit() in the handler: an exit dump"
    );
    assert_eq!(dump.process.signal, None);
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 7000, 7000, 7000));
    assert_live(&dump, "own_handlers", &[HANDLERS_BLOCK]);
}

#[test]
fn the_programs_own_sigusr1_handler_runs_and_no_snapshot_is_written() {
    let mut sp = Scenario::new("own_handlers").spawn_shim();
    let (mut child, mut out) = started(&mut sp, "ready\n");
    kill("USR1", sp.pid);
    let status = wait_or_fail(&mut child);
    let stderr = stderr_of(&mut child);
    assert_eq!(
        rest_of(&mut out),
        "usr1\ndone\n",
        "the program's handler ran"
    );
    assert_eq!(status.code(), Some(0), "{status}\nstderr:\n{stderr}");
    let path = sp.dir.path().join(format!("cudaleak.{}.json", sp.pid));
    assert_eq!(
        files_in(sp.dir.path()),
        vec![path.clone()],
        "the exit dump and no snapshot\nstderr:\n{stderr}"
    );
    let dump = read_dump(&path);
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(dump.summary, summary(1, 0, 0, 0, 0, 1, 7000, 7000, 7000));
    assert_live(&dump, "own_handlers", &[HANDLERS_BLOCK]);
}

/// With CUDALEAK_SIGNAL=0, `signal` (number `number`) has its default action untouched: the
/// program dies of it and nothing is written.
fn signal_off_leaves_the_default_action(signal: &str, number: i32) {
    let mut sp = Scenario::new("wait_signal")
        .env("CUDALEAK_SIGNAL", "0")
        .spawn_shim();
    let (mut child, _out) = started(&mut sp, "ready\n");
    kill(signal, sp.pid);
    let status = wait_or_fail(&mut child);
    let stderr = stderr_of(&mut child);
    assert_eq!(
        status.signal(),
        Some(number),
        "dies of SIG{signal}: {status}\nstderr:\n{stderr}"
    );
    // Waited for, the process is gone with all its threads (a snapshot thread too): what it
    // wrote is all it will ever write.
    let names: Vec<String> = std::fs::read_dir(sp.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.is_empty(),
        "CUDALEAK_SIGNAL=0: nothing written at SIG{signal}, found {names:?}\nstderr:\n{stderr}"
    );
}

#[test]
fn signal_off_sigterm_kills_without_a_dump() {
    signal_off_leaves_the_default_action("TERM", 15);
}

#[test]
fn signal_off_sigusr1_kills_without_a_snapshot() {
    signal_off_leaves_the_default_action("USR1", 10);
}
