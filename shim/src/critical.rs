//! Critical sections and deferred signals: a thread that holds any of the shim's locks never runs
//! the terminating-signal path. The signal is remembered and raised again on this thread the
//! moment it lets go of its last lock.
//!
//! Why: the signal path waits for the worker to write a dump, and that dump takes the shim's
//! locks (table shards, interners, the heap, the dump lock). Had the interrupted thread held one
//! of them, the worker would have waited for a thread that waits for the worker (seen: a 10 s
//! stall and no dump for SIGTERM during a `cuMemFree` loop, or during the exit dump).
//!
//! One const-initialised word of this thread, read and written by the thread itself and by its
//! signal handler (which runs on it, between two of its instructions): no allocation, no lock;
//! compiler fences keep the order the handler relies on.
//! Must never allocate or panic: [`crate::lock`] and the heap call it.

use std::ffi::c_int;
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

thread_local! {
    /// Low 32 bits: locks of the shim this thread holds or is waiting for. High 32 bits: a
    /// terminating signal that arrived while it held one. One word, so that taking and releasing
    /// a lock costs one thread-local access each, and changed only by single read-modify-write
    /// instructions, which a signal cannot cut in half.
    static STATE: AtomicU64 = const { AtomicU64::new(0) };
}

const HELD: u64 = 0xffff_ffff;

/// Before taking a lock: counted before the lock is ours, so a signal arriving between the
/// acquiring instruction and the count cannot find the lock held and the count at 0.
#[inline]
pub fn enter() {
    STATE.with(|s| s.fetch_add(1, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
}

/// After releasing a lock. The last one out raises a signal deferred meanwhile, now that the
/// handler can wait for the worker without waiting for this thread.
#[inline]
pub fn leave() {
    compiler_fence(Ordering::SeqCst);
    STATE.with(|s| {
        let before = s.fetch_sub(1, Ordering::Relaxed);
        if before & HELD == 1 && before >> 32 != 0 {
            // A signal arriving from here on finds the count at 0 and is handled at once.
            let sig = (s.swap(0, Ordering::Relaxed) >> 32) as c_int;
            if sig != 0 {
                // SAFETY: raise has no preconditions; the handler runs before it returns.
                unsafe { libc::raise(sig) };
            }
        }
    });
}

/// In a signal handler: if this thread is inside a critical section, remembers `sig` for
/// [`leave`] and returns true; the handler must then return at once.
#[inline]
pub fn defer(sig: c_int) -> bool {
    compiler_fence(Ordering::SeqCst);
    STATE.with(|s| {
        let now = s.load(Ordering::Relaxed);
        if now & HELD == 0 {
            return false;
        }
        // The thread is stopped in this handler: nothing else changes the word meanwhile.
        s.store(
            (now & HELD) | (u64::from(sig as u32) << 32),
            Ordering::Relaxed,
        );
        true
    })
}

/// Whether this thread holds (or waits for) a lock of the shim.
#[cfg(test)]
pub fn inside() -> bool {
    STATE.with(|s| s.load(Ordering::Relaxed) & HELD != 0)
}

#[cfg(test)]
fn deferred() -> c_int {
    STATE.with(|s| (s.load(Ordering::Relaxed) >> 32) as c_int)
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
