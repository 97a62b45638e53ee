//! Critical sections and deferred signals: a thread that holds any of the shim's locks never runs
//! the terminating-signal path. The signal is remembered and raised again on this thread the
//! moment it lets go of its last lock.
//!
//! Why: the signal path waits for the worker to write a dump, and that dump takes the shim's
//! locks (table shards, interners, the heap, the dump lock). Had the interrupted thread held one
//! of them, the worker would have waited for a thread that waits for the worker (seen: a 10 s
//! stall and no dump for SIGTERM during a `cuMemFree` loop, or during the exit dump).
//!
//! Only const-initialised `Cell`s of this thread, read and written by the thread itself and by
//! its signal handler (which runs on it, between two of its instructions): no allocation, no
//! lock, no atomic read-modify-write; compiler fences keep the order the handler relies on.
//! Must never allocate or panic: [`crate::lock`] and the heap call it.

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{compiler_fence, Ordering};

thread_local! {
    /// Locks of the shim this thread holds or is waiting for.
    static HELD: Cell<u32> = const { Cell::new(0) };
    /// A terminating signal that arrived while `HELD` was not 0.
    static DEFERRED: Cell<c_int> = const { Cell::new(0) };
}

/// Before taking a lock: counted before the lock is ours, so a signal arriving between the
/// acquiring instruction and the count cannot find the lock held and the count at 0.
#[inline]
pub fn enter() {
    HELD.with(|h| h.set(h.get() + 1));
    compiler_fence(Ordering::SeqCst);
}

/// After releasing a lock. The last one out raises a signal deferred meanwhile, now that the
/// handler can wait for the worker without waiting for this thread.
#[inline]
pub fn leave() {
    compiler_fence(Ordering::SeqCst);
    let left = HELD.with(|h| {
        let n = h.get().saturating_sub(1);
        h.set(n);
        n
    });
    compiler_fence(Ordering::SeqCst);
    if left == 0 {
        let sig = DEFERRED.with(|d| d.replace(0));
        if sig != 0 {
            // SAFETY: raise has no preconditions; the handler runs before it returns.
            unsafe { libc::raise(sig) };
        }
    }
}

/// In a signal handler: if this thread is inside a critical section, remembers `sig` for
/// [`leave`] and returns true; the handler must then return at once.
#[inline]
pub fn defer(sig: c_int) -> bool {
    compiler_fence(Ordering::SeqCst);
    if HELD.with(Cell::get) == 0 {
        return false;
    }
    DEFERRED.with(|d| d.set(sig));
    compiler_fence(Ordering::SeqCst);
    true
}

/// Whether this thread holds (or waits for) a lock of the shim.
#[cfg(test)]
pub fn inside() -> bool {
    HELD.with(Cell::get) > 0
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
            assert_eq!(
                DEFERRED.with(Cell::get),
                libc::SIGWINCH,
                "kept while a lock is held"
            );
            leave();
            assert!(!inside());
            assert_eq!(
                DEFERRED.with(Cell::get),
                0,
                "raised and cleared by the last leave"
            );
        })
        .join()
        .unwrap();
    }
}
