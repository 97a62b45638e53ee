//! Bounded waits: for a condition a test can observe (a file, a line, a directory), or for a
//! child process to end. Every wait has a limit and, past it, panics naming what it waited for,
//! so a hang fails the test instead of CI's job, and the message says which step hung.
//!
//! It must never stand in for ordering: a test waits for what it can see, not for a while.

use std::io::Read;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The first pause between two polls; it doubles up to [`MAX_POLL`], so a condition that holds
/// at once is seen within microseconds and a long wait does not spin.
const FIRST_POLL: Duration = Duration::from_micros(100);
const MAX_POLL: Duration = Duration::from_millis(20);

/// Polls `found` until it gives a value, for at most `timeout`; past it, panics with "waited
/// {timeout} for {what}".
pub fn wait_for<T>(timeout: Duration, what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    let mut pause = FIRST_POLL;
    loop {
        if let Some(v) = found() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "waited {timeout:?} for {what}, in vain"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// Polls `cond` until it holds, for at most `timeout`; past it, panics naming `what`.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    wait_for(timeout, what, || cond().then_some(()))
}

/// Waits for `child` to end, for at most `timeout`; past it, kills it and panics naming `what`
/// (with its stderr, when that is a pipe not yet taken).
pub fn wait_for_exit(child: &mut Child, timeout: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    let mut pause = FIRST_POLL;
    loop {
        if let Some(status) = child.try_wait().expect("poll a child") {
            return status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            panic!("{what}: still running after {timeout:?}, killed\nstderr:\n{stderr}");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}
