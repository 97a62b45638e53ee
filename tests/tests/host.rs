//! The shim never changes what the program does: a dead stderr reader does not kill it, Python
//! keeps its own Ctrl-C handler, and a program started with its standard descriptors closed
//! neither finds the shim's pipe there nor has the shim's line written into a file of its own.

use std::process::Stdio;

use cudaleak_format::End;
use cudaleak_tests::{Scenario, NULLCUDA_DIR};

/// A pipe whose reader is already closed: any write to the other end raises SIGPIPE / EPIPE.
fn dead_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("create a pipe");
    drop(reader);
    Stdio::from(writer)
}

#[test]
fn a_dead_stderr_reader_does_not_kill_the_program_at_exit() {
    let run = Scenario::new("host_stdio")
        .arg("quiet")
        .run_shim_with(Stdio::piped(), dead_pipe());
    // Without the shim: status 0 and "done", flushed by exit after every exit handler.
    run.assert_exit(0).assert_stdout("done\n");
    let dump = run.dump();
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(dump.summary.live_allocations, 1);
}

#[test]
fn a_program_started_without_stdin_and_stderr_keeps_its_writes_and_the_exit_dump() {
    // The program's own write to fd 2 ("fs") must not reach the shim: with the shim's wake pipe
    // on fds 0 and 2 it read as a fatal-signal request and a snapshot request.
    let run = Scenario::new("host_stdio")
        .arg("stderr")
        .arg("fs")
        .closed(0)
        .closed(2)
        .run_shim_with(Stdio::piped(), Stdio::null());
    run.assert_exit(0).assert_stdout("done\n");
    let dump = run.dump();
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(dump.process.signal, None);
    assert_eq!(dump.summary.live_allocations, 1);
}

#[test]
fn without_stdout_and_stderr_the_program_still_gets_its_exit_dump() {
    let run = Scenario::new("host_stdio")
        .arg("stderr")
        .arg("ffff")
        .closed(1)
        .closed(2)
        .run_shim_with(Stdio::null(), Stdio::null());
    run.assert_exit(0);
    assert_eq!(run.dump().process.end, End::Exit);
}

#[test]
fn the_exit_line_never_goes_into_a_file_the_program_opened_on_fd_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    // No worker (so no pipe) to take fd 2 first: the program's file gets it.
    let run = Scenario::new("host_stdio")
        .arg("open")
        .arg(file.to_str().unwrap())
        .env("CUDALEAK_SIGNAL", "0")
        .closed(2)
        .run_shim_with(Stdio::piped(), Stdio::null());
    run.assert_exit(0).assert_stdout("done\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data\n");
    assert_eq!(run.dump().summary.live_allocations, 1);
}

/// The interpreter itself, not a launcher script (pyenv's `python3` is one, and would leave a
/// dump of its own per process it starts).
fn python() -> std::path::PathBuf {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for this test");
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// CPython installs `default_int_handler` for SIGINT only where it finds the default
/// disposition; under the shim it must still find it, and Ctrl-C must raise KeyboardInterrupt.
#[test]
fn python_keeps_keyboard_interrupt_after_cuda_calls() {
    let script = format!(
        r#"
import ctypes, os, signal
rt = ctypes.CDLL("{NULLCUDA_DIR}/libcudart.so.13")
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), 4096) == 0
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
try:
    os.kill(os.getpid(), signal.SIGINT)
    import time; time.sleep(5)
    print("no interrupt")
except KeyboardInterrupt:
    print("interrupted")
finally:
    print("finally")
"#
    );
    let run = Scenario::program(&python())
        .arg("-c")
        .arg(&script)
        .run_shim();
    run.assert_exit(0)
        .assert_stdout("True\ninterrupted\nfinally\n");
    let dump = run.dump();
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(dump.summary.live_allocations, 1);
}

/// A test suite run as a background job inherits SIGINT ignored; the harness gives each scenario
/// the default back, so CPython still installs its KeyboardInterrupt handler.
#[test]
fn python_interrupt_test_passes_when_the_test_runner_ignores_sigint() {
    cudaleak_tests::assert_passes_with_ignored(
        "INT,QUIT",
        "python_keeps_keyboard_interrupt_after_cuda_calls",
    );
}
