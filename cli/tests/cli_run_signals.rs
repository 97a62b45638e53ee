//! End-to-end tests of the signals `cudaleak run` passes on: SIGTERM always, SIGUSR1 only to a
//! program that catches it (the shim's snapshot trigger), with the report still written.

mod common;

use std::io::Read;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{copy_dump, dir_file, run_env, wait_until, RunEnv};

#[test]
fn run_forwards_sigterm_to_the_program() {
    let env = run_env();
    let script = format!(
        "{}; touch \"${{CUDALEAK_OUTPUT}}{STARTED}\"; exec sleep 30",
        copy_dump("leak_loop.json")
    );
    let start = Instant::now();
    let child = spawn_run_and_wait(&env, &script);
    kill("-TERM", child.id());
    let out = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "SIGTERM was not forwarded"
    );
    // sleep died of SIGTERM: 128 + 15 wins over the leak gate, and the report still ran.
    assert_eq!(out.status.code(), Some(143));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 40.00 KiB leaked"));
}

/// The file a test's script touches in the run directory once it runs (after writing its dump,
/// where it writes one first): `cudaleak run` itself may have put other files there before the
/// program started.
const STARTED: &str = "started";

/// `cudaleak run` of `sh -c SCRIPT` in the background, once the script has touched [`STARTED`]
/// (it is running by then) and `cudaleak` waits for it (it passes signals on from then).
fn spawn_run_and_wait(env: &RunEnv, script: &str) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .arg("run")
        .arg("--shim")
        .arg(&env.shim)
        .arg("--out")
        .arg(&env.out)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(20), "the program to start", || {
        env.run_dirs().iter().any(|d| d.join(STARTED).exists())
    });
    wait_until(
        Duration::from_secs(20),
        "cudaleak to wait for the program",
        || waits_for_its_program(child.id()),
    );
    child
}

/// Whether `cudaleak` (`pid`) waits for its program: its main thread is in `wait4`, which it
/// enters only once it holds the program's pid, the one signals are passed on to.
fn waits_for_its_program(pid: u32) -> bool {
    let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    syscall
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        == Some(libc::SYS_wait4)
}

fn kill(sig: &str, pid: u32) {
    let sent = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn run_forwards_sigusr1_to_a_program_that_catches_it() {
    let env = run_env();
    // The program's SIGUSR1 handler (the shim's, once armed) writes a snapshot; here the trap
    // writes the dump and ends the script.
    let marker = dir_file(&env, "usr1");
    // Bounded, so that a cudaleak killed by SIGUSR1 leaves no endless orphan behind.
    let script = format!(
        "trap 'touch {}; {}; exit 0' USR1; touch \"${{CUDALEAK_OUTPUT}}{STARTED}\"; \
         i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        marker.display(),
        copy_dump("leak_loop.json")
    );
    let child = spawn_run_and_wait(&env, &script);
    kill("-USR1", child.id());
    let out = child.wait_with_output().unwrap();
    assert!(marker.exists(), "SIGUSR1 was not forwarded");
    // cudaleak survived it (not 128 + 10) and reported the dump the program wrote.
    assert_eq!(out.status.code(), Some(23));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 40.00 KiB leaked"));
}

#[test]
fn run_keeps_sigusr1_from_a_program_without_a_handler_and_says_so() {
    let env = run_env();
    let script = format!(
        "{}; touch \"${{CUDALEAK_OUTPUT}}{STARTED}\"; exec sleep 10",
        copy_dump("leak_loop.json")
    );
    let mut child = spawn_run_and_wait(&env, &script);
    // cudaleak's stderr as it comes, to see it decide before the next signal is sent.
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let reader = {
        let stderr = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                stderr
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    const KEPT: &str = "cudaleak: SIGUSR1 not passed on: the program (pid ";
    kill("-USR1", child.id());
    wait_until(Duration::from_secs(20), "cudaleak to keep SIGUSR1", || {
        stderr.lock().unwrap().contains(KEPT)
    });
    // Still running: end it with SIGTERM, which is forwarded.
    kill("-TERM", child.id());
    let out = child.wait_with_output().unwrap();
    reader.join().unwrap();
    assert_eq!(out.status.code(), Some(143), "{out:?}");
    let stderr = stderr.lock().unwrap();
    assert!(stderr.contains(KEPT), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 40.00 KiB leaked"));
}
