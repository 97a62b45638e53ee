//! Critical sections and deferred signals: a thread that holds any of the shim's locks never runs
//! the terminating-signal path. The signal is remembered and raised again on this thread the
//! moment it lets go of its last lock.
//!
//! Why: the signal path waits for the worker to write a dump, and that dump takes the shim's
//! locks (table shards, interners, the heap, the dump lock). Had the interrupted thread held one
//! of them, the worker would have waited for a thread that waits for the worker (seen: a 10 s
//! stall and no dump for SIGTERM during a `cuMemFree` loop, or during the exit dump).
//!
//! Two words of this thread's block ([`crate::thread`]): the count of the shim's locks the thread
//! holds or waits for, which only the thread itself writes, and the signal deferred meanwhile,
//! which only its signal handler writes (the handler runs on the thread, between two of its
//! instructions) and the thread clears once its count is back at 0, when no handler defers any
//! more. Each word having one writer at a time, plain loads and stores do: no locked
//! instruction (a section cost four of them an allocation and free before), no allocation, no
//! lock; compiler fences keep the order the handler relies on.
//! Must never allocate or panic: [`crate::lock`] and the heap call it.

use std::ffi::c_int;
use std::sync::atomic::{compiler_fence, Ordering::Relaxed, Ordering::SeqCst};

use crate::thread::{self, Thread};

/// Before taking a lock: counted before the lock is ours, so a signal arriving between the
/// acquiring instruction and the count cannot find the lock held and the count at 0.
#[inline]
pub fn enter() {
    thread::with(enter_in);
}

/// [`enter`] for a caller that has its thread's block at hand.
#[inline]
pub fn enter_in(t: &Thread) {
    // A signal between the load and the store sees the count without this lock, not yet taken.
    t.locks
        .store(t.locks.load(Relaxed).wrapping_add(1), Relaxed);
    compiler_fence(SeqCst);
}

/// After releasing a lock. The last one out raises a signal deferred meanwhile, now that the
/// handler can wait for the worker without waiting for this thread.
#[inline]
pub fn leave() {
    thread::with(leave_in);
}

/// [`leave`] for a caller that has its thread's block at hand.
#[inline]
pub fn leave_in(t: &Thread) {
    compiler_fence(SeqCst);
    // A signal between the load and the store sees this lock, already released, still counted:
    // it is deferred, and raised just below.
    let left = t.locks.load(Relaxed).wrapping_sub(1);
    t.locks.store(left, Relaxed);
    compiler_fence(SeqCst);
    if left == 0 && t.deferred.load(Relaxed) != 0 {
        raise_deferred(t);
    }
}

#[cold]
fn raise_deferred(t: &Thread) {
    // The count is 0: a signal arriving from here on is handled at once, never deferred, so
    // nothing writes the word between this load and the store.
    let sig = t.deferred.load(Relaxed);
    t.deferred.store(0, Relaxed);
    compiler_fence(SeqCst);
    // SAFETY: raise has no preconditions; the handler runs before it returns.
    unsafe { libc::raise(sig) };
}

/// In a signal handler: if this thread is inside a critical section, remembers `sig` for
/// [`leave`] and returns true; the handler must then return at once.
#[inline]
pub fn defer(sig: c_int) -> bool {
    compiler_fence(SeqCst);
    thread::with(|t| {
        if t.locks.load(Relaxed) == 0 {
            return false;
        }
        // The thread is stopped in this handler: it changes neither word meanwhile.
        t.deferred.store(sig, Relaxed);
        compiler_fence(SeqCst);
        true
    })
}

/// Whether this thread holds (or waits for) a lock of the shim.
#[cfg(test)]
pub fn inside() -> bool {
    thread::with(|t| t.locks.load(Relaxed) != 0)
}

#[cfg(test)]
fn deferred() -> c_int {
    thread::with(|t| t.deferred.load(Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_sections_defer_until_the_last_one_is_left() {
        std::thread::spawn(|| {
            assert!(
                !defer(libc::SIGTERM),
                "outside a section nothing is deferred"
            );
            enter();
            enter();
            assert!(inside());
            // SIGWINCH: harmless if raised (ignored by default), so the test can watch it be
            // delivered on leaving rather than kill the test binary.
            assert!(defer(libc::SIGWINCH));
            leave();
            assert!(inside());
            assert_eq!(deferred(), libc::SIGWINCH, "kept while a lock is held");
            leave();
            assert!(!inside());
            assert_eq!(deferred(), 0, "raised and cleared by the last leave");
        })
        .join()
        .unwrap();
    }
}
