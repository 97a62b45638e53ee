//! Dumps of a process that is still running or is ended by a signal: SIGTERM leaves a dump with
//! `end: signal` and the process still dies of SIGTERM; SIGUSR1 writes a numbered snapshot and
//! the program runs on.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cudaleak_format::{End, Kind};
use cudaleak_tests::{assert_live, files_in, read_dump, summary, Expect, Scenario};

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

fn kill(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

fn wait_for_file(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} did not appear",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
