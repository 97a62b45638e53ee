//! `cudaleak attach` never harms the program it attaches to (issue 39): a thread stopped inside
//! malloc is never made to call dlopen (ten attaches to a malloc-bound loop, none killed; a
//! second thread in malloc, no hang), libraries coming and going during the patch fault nothing
//! and leave no pointer replaced after detach, a stopped program is refused and runs on, the
//! borrowed thread's errno is put back, and no thread at a safe point within the bound is a
//! refusal with nothing changed. Programs of the null runtime (scenario `attach_harm`).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use cudaleak_tests::{attach_command, kill, wait_for_exit, Scenario, CHURN_LIB};

/// A started `attach_harm` in `mode`, past its "ready".
struct Target {
    pid: u32,
    child: Child,
    stdout: BufReader<std::process::ChildStdout>,
}

fn start(mode: &str, extra: &[&str]) -> Target {
    let s = extra
        .iter()
        .fold(Scenario::new("attach_harm").arg(mode), |s, a| s.arg(a));
    let (spawned, child, stdout) = s.spawn_ready();
    // Let the loop reach its steady state.
    std::thread::sleep(Duration::from_millis(100));
    Target {
        pid: spawned.pid,
        child,
        stdout,
    }
}

impl Target {
    /// Writes one byte to the program's stdin; the line it prints in answer.
    fn answer(&mut self, byte: u8) -> String {
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(&[byte]).expect("write a byte");
        stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("read the program's line");
        line
    }

    /// Tells the loops to end; the program's exit status, the rest of its stdout and its stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        kill("USR2", self.pid);
        let mut out = String::new();
        let _ = self.stdout.read_to_string(&mut out);
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (self.child.wait().expect("wait"), out, err)
    }
}

/// `cudaleak attach OPTIONS PID`, failing the test if it takes more than a minute (a hang).
fn attach(pid: u32, out: &Path, options: &[&str]) -> Output {
    let mut child = attach_command(pid, out, options)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cudaleak attach");
    wait_for_exit(
        &mut child,
        Duration::from_secs(60),
        "cudaleak attach (a hang?)",
    );
    child.wait_with_output().expect("attach's output")
}

/// A refusal left nothing under `--out`.
fn assert_nothing_under(out: &Path) {
    let left: Vec<_> = std::fs::read_dir(out)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left under --out: {left:?}");
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Attaches `times` times for a moment each; every attach must load and detach.
fn attach_repeatedly(t: &Target, times: usize) {
    let out = tempfile::tempdir().expect("a temporary directory");
    for i in 0..times {
        let o = attach(t.pid, out.path(), &["--for", "200ms"]);
        let err = stderr_of(&o);
        assert!(
            err.contains("attached in") && err.contains("detached in"),
            "attach {} of {times} did not attach and detach (exit {:?}):\n{err}",
            i + 1,
            o.status.code()
        );
    }
}

/// The program ran on and ended as it would have: exit 0, every replaced pointer put back.
fn assert_unharmed(t: Target, what: &str) {
    let (status, out, err) = t.finish();
    assert_eq!(
        (status.code(), status.signal()),
        (Some(0), None),
        "{what}: the program was harmed:\n{out}{err}"
    );
    assert!(out.contains("done\nslot: driver\n"), "{what}: {out}{err}");
}

#[test]
fn ten_attaches_to_a_malloc_bound_loop_harm_none() {
    let t = start("malloc", &[]);
    attach_repeatedly(&t, 10);
    assert_unharmed(t, "malloc loop");
}

#[test]
fn a_second_thread_in_malloc_does_not_hang_the_attach() {
    let t = start("malloc2", &[]);
    attach_repeatedly(&t, 5);
    assert_unharmed(t, "two malloc loops");
}

#[test]
fn libraries_coming_and_going_fault_nothing_and_leave_no_pointer_replaced() {
    let t = start("dlopen", &[CHURN_LIB]);
    attach_repeatedly(&t, 10);
    assert_unharmed(t, "dlopen/dlclose loop");
}

#[test]
fn the_borrowed_thread_finds_its_errno_as_it_left_it() {
    let mut t = start("read", &[]);
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(t.pid, out.path(), &["--for", "200ms"]);
    let err = stderr_of(&o);
    assert!(err.contains("detached in"), "{err}");
    assert_eq!(
        t.answer(b'x'),
        "read 1 byte; errno after successful read: 0\n"
    );
    assert_unharmed(t, "read");
}

#[test]
fn a_stopped_program_is_refused_and_runs_on_when_continued() {
    let t = start("malloc", &[]);
    kill("STOP", t.pid);
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(t.pid, out.path(), &["--for", "200ms"]);
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("it is stopped") && err.contains(&format!("kill -CONT {}", t.pid)),
        "{err}"
    );
    assert_nothing_under(out.path());
    kill("CONT", t.pid);
    assert_unharmed(t, "stopped, refused, continued");
}

#[test]
fn no_thread_at_a_safe_point_in_time_is_a_refusal_with_nothing_changed() {
    // Waiting in read(), but called from inside the C library's stdio (getchar holds the
    // stream's lock): never a point where dlopen is safe.
    let mut t = start("stdio", &[]);
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(t.pid, out.path(), &["--safe-point-wait", "300ms"]);
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no thread of it came to a point where it is safe to borrow in 0.3 s")
            && err.contains(&format!("thread {}: inside libc", t.pid))
            && err.contains("nothing was changed"),
        "{err}"
    );
    assert_nothing_under(out.path());
    assert_eq!(t.answer(b'y'), "got y\n");
    assert_unharmed(t, "refused at no safe point");
}
