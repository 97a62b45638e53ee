//! The shim's calls into the dynamic loader (`dlsym`, `dlopen(RTLD_NOLOAD)`, `dladdr`,
//! `dl_iterate_phdr`) and `fork()`. Each such call holds one of the loader's locks for a moment,
//! and a child forked in that moment inherits the lock held by a thread it does not have: its
//! `exit()` (`_dl_fini` takes `dl_load_lock`) or its next lookup then waits forever. The shim
//! makes such calls on the program's threads, at a hook's first call (its real function looked
//! up) and at the first recorded allocation (the interpreter's symbols), so a program that forks
//! while another thread makes its first CUDA call could get a child that never ends.
//!
//! The fork handler closes a gate ([`close_for_fork`]): it waits until no call of the shim's is
//! inside the loader, and a call that comes while the gate is closed waits until the fork is
//! done ([`open_after_fork`]). A two-sided handshake on sequentially consistent atomics: either
//! the call sees the gate closed, or the fork handler sees the call in flight. Both waits are
//! bounded, so no order of events can deadlock (a fork from a signal handler on a thread inside
//! the loader, say): past its bound a wait gives up and the call, or the fork, goes ahead as it
//! would without the gate. A child made without `fork()` (`_Fork`, a raw `clone`) runs no
//! handler, and is not covered: README, the `fork()` row.
//!
//! A leaf: nothing here allocates, locks or uses the rest of the shim, and every path runs
//! before the shim is initialised too.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};

/// The shim's calls inside the loader now.
static IN_FLIGHT: AtomicU32 = AtomicU32::new(0);
/// A fork is being made: new calls wait.
static FORKING: AtomicBool = AtomicBool::new(false);

/// How long a call waits for a fork to be done: a fork copies the process's page tables, which
/// takes long in a large process, and the call goes ahead after this.
const CALL_WAITS_MS: u64 = 1000;
/// How long a fork waits for the calls in flight: each takes microseconds, unless it waits for
/// the loader's lock behind another thread's `dlopen`, which the gate does not hold back anyway.
const FORK_WAITS_MS: u64 = 100;

/// Runs `f`, a call into the loader, outside any fork.
pub fn call<T>(f: impl FnOnce() -> T) -> T {
    enter();
    let r = f();
    IN_FLIGHT.fetch_sub(1, SeqCst);
    r
}

fn enter() {
    let mut since = None;
    loop {
        if !FORKING.load(SeqCst) {
            IN_FLIGHT.fetch_add(1, SeqCst);
            if !FORKING.load(SeqCst) {
                return;
            }
            IN_FLIGHT.fetch_sub(1, SeqCst);
        }
        if waited(&mut since, CALL_WAITS_MS) {
            IN_FLIGHT.fetch_add(1, SeqCst);
            return;
        }
        std::thread::yield_now();
    }
}

/// Before a fork: new calls wait, and the ones in flight are waited for.
pub fn close_for_fork() {
    FORKING.store(true, SeqCst);
    let mut since = None;
    while IN_FLIGHT.load(SeqCst) != 0 && !waited(&mut since, FORK_WAITS_MS) {
        std::thread::yield_now();
    }
}

/// After a fork, in the parent or in the child (where no other thread is left, so no call is
/// in flight); also in a child made without fork(), which ran no handler.
pub fn open_after_fork(child: bool) {
    if child {
        IN_FLIGHT.store(0, SeqCst);
    }
    FORKING.store(false, SeqCst);
}

/// Whether `limit_ms` have passed since the first call with `since` (which it sets).
fn waited(since: &mut Option<u64>, limit_ms: u64) -> bool {
    let now = now_ms();
    now.saturating_sub(*since.get_or_insert(now)) >= limit_ms
}

/// The monotonic clock's coarse milliseconds (as `clock::coarse_ms`; a leaf uses no other).
fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU8;
    use std::sync::Arc;

    /// The tests share the gate's statics: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_fork_waits_for_a_call_in_flight_and_a_call_waits_for_the_fork() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // 1: the call is inside; 3: it is about to leave; 2: the fork's gate closed.
        let step = Arc::new(AtomicU8::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let caller = {
            let (step, release) = (step.clone(), release.clone());
            std::thread::spawn(move || {
                call(|| {
                    step.store(1, SeqCst);
                    while !release.load(SeqCst) {
                        std::thread::yield_now();
                    }
                    step.store(3, SeqCst); // still inside
                });
            })
        };
        while step.load(SeqCst) != 1 {
            std::thread::yield_now();
        }
        let forker = {
            let step = step.clone();
            std::thread::spawn(move || {
                close_for_fork();
                // The call in flight had left before the gate reported closed.
                let seen = step.load(SeqCst);
                step.store(2, SeqCst);
                seen
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(
            step.load(SeqCst),
            1,
            "the fork waits while the call is inside"
        );
        release.store(true, SeqCst);
        assert_eq!(
            forker.join().unwrap(),
            3,
            "the fork went on once the call left"
        );
        caller.join().unwrap();
        // Closed: a new call waits until the fork is done.
        let entered = Arc::new(AtomicBool::new(false));
        let late = {
            let entered = entered.clone();
            std::thread::spawn(move || call(|| entered.store(true, SeqCst)))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!entered.load(SeqCst), "no call while the fork is made");
        open_after_fork(false);
        late.join().unwrap();
        assert!(entered.load(SeqCst));
    }

    #[test]
    fn every_wait_ends_at_its_bound() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // A call that never leaves (a fork from a signal handler on its thread, say).
        enter();
        let start = now_ms();
        close_for_fork();
        assert!(now_ms() - start >= FORK_WAITS_MS, "waited for the call");
        // And a call while the gate stays closed goes ahead after its bound.
        let start = now_ms();
        call(|| ());
        assert!(now_ms() - start >= CALL_WAITS_MS);
        IN_FLIGHT.fetch_sub(1, SeqCst);
        open_after_fork(false);
    }
}
