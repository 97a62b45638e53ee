//! End-to-end tests of dead standard streams: a reader that goes away (`| head`), a closed
//! stdout or stderr; the binary never panics, says nothing more, and keeps its exit status.

mod common;

use std::path::PathBuf;
use std::process::Stdio;

use common::{copy_dump, fx, run_env, RunEnv};

#[test]
fn broken_pipe_is_not_an_error() {
    // `cudaleak report … | head -c1`: the reader goes away early.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args([
            "report",
            "--stats",
            &fx("multi"),
            &fx("error_path.json"),
            &fx("managed.json"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(23));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn dead_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Which standard streams `dead` connects to a dead pipe.
#[derive(Clone, Copy, PartialEq)]
enum Dead {
    Stdout,
    Stderr,
    Both,
}

/// The binary with `args`, nothing on stdin, the `dead` streams connected to a dead pipe and
/// the others captured: (exit code, stdout, stderr).
fn dead(d: Dead, args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"));
    c.env_remove("CUDALEAK_SHIM")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if d != Dead::Stderr {
        c.stdout(dead_pipe());
    }
    if d != Dead::Stdout {
        c.stderr(dead_pipe());
    }
    let out = c.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(Into::into).collect()
}

fn dead_code(d: Dead, args: &[std::ffi::OsString]) -> Option<i32> {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    dead(d, &args).0
}

#[test]
fn a_dead_stderr_never_panics_and_keeps_the_exit_status() {
    // Before: 101, a panic in eprintln!.
    let e = Dead::Stderr;
    assert_eq!(dead_code(e, &os(&["report", "/nonexistent.json"])), Some(2));
    let leaky = fx("leak_loop.json");
    assert_eq!(dead_code(e, &os(&["report", "--growth", &leaky])), Some(2));
    let args = os(&["report", &leaky]);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (code, stdout, _) = dead(e, &args);
    assert_eq!(code, Some(23));
    assert!(stdout.contains("SUMMARY: 40.00 KiB leaked"), "{stdout}");
    // Usage errors print through clap.
    assert_eq!(dead_code(e, &os(&["report", "--no-such-flag"])), Some(2));
}

#[test]
fn run_with_a_dead_stderr_still_runs_the_program_and_returns_its_status() {
    let env = run_env();
    // The stand-in shim must really preload: ld.so's warning about an empty file would go to the
    // dead stderr and SIGPIPE would kill the program before it starts. Any harmless library does.
    let shim = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .expect("no libm.so.6 to stand in for the shim");
    let env = RunEnv { shim, ..env };
    let marker = env.dir.path().join("ran");
    let run = |d: Dead, tail: &str| {
        let script = format!(
            "touch '{}'; {}; {tail}",
            marker.display(),
            copy_dump("leak_loop.json")
        );
        let _ = std::fs::remove_file(&marker);
        let mut args = os(&["run", "--shim"]);
        args.extend([
            env.shim.clone().into(),
            "--out".into(),
            env.out.clone().into(),
        ]);
        args.extend(os(&["--", "sh", "-c", &script]));
        let code = dead_code(d, &args);
        assert!(marker.exists(), "the program did not run");
        code
    };
    // Before: a panic at "dumps of this run go to …", and the program never ran.
    assert_eq!(run(Dead::Stderr, "exit 0"), Some(23));
    assert_eq!(run(Dead::Stderr, "exit 7"), Some(7));
    // Both streams dead: the report is dropped quietly, the gate still decides.
    assert_eq!(run(Dead::Both, "exit 0"), Some(23));
    assert_eq!(run(Dead::Both, "exit 5"), Some(5));
    // A program that cannot be started: 127, with nothing said.
    let mut args = os(&["run", "--shim"]);
    args.extend([
        env.shim.clone().into(),
        "--out".into(),
        env.out.clone().into(),
    ]);
    args.extend(os(&["--", "/nonexistent/program"]));
    assert_eq!(dead_code(Dead::Stderr, &args), Some(127));
}

#[test]
fn a_dead_stdout_ends_the_report_quietly_with_the_gate_status() {
    for (dump, code) in [("leak_loop.json", 23), ("clean.json", 0)] {
        for format in ["text", "json", "markdown", "sarif"] {
            let args = os(&["report", "--format", format, &fx(dump)]);
            let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            let (got, _, stderr) = dead(Dead::Stdout, &args);
            assert_eq!((got, stderr.as_str()), (Some(code), ""), "{format} {dump}");
        }
    }
    let leaky = fx("leak_loop.json");
    assert_eq!(dead_code(Dead::Both, &os(&["report", &leaky])), Some(23));
    let growth = os(&["report", "--growth", &fx("growth")]);
    assert_eq!(dead_code(Dead::Both, &growth), Some(23));
    let diff = os(&["diff", "--fail-on-growth", &leaky, &leaky]);
    assert_eq!(dead_code(Dead::Stdout, &diff), Some(0));
}
