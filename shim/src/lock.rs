//! What threads share safely: the shim's one mutex (a futex word and nothing else, behind
//! `lock_api`'s guards), the fork steps on the list of them each part of the state keeps
//! ([`ForkLocked`]), and cache-line padding for data every thread writes.
//!
//! Why not `parking_lot`: its waiters queue in one process-wide table, each bucket behind a lock
//! of its own. A thread forking while another is parked there (or halfway into parking) leaves
//! the child a table with a dead thread's entry or a bucket locked for good, and unlocking one of
//! our mutexes in the child then walks that table. This lock keeps all of its state in its own
//! word, so a forked child only has to release it (see `lifecycle`'s fork handlers).
//!
//! Holding one of these locks is a critical section ([`crate::critical`]): a terminating signal
//! that arrives meanwhile waits until the thread has let go of its last lock, so the signal path
//! never waits for a lock the interrupted thread holds.
//!
//! Must never allocate, panic or touch any global state (the heap itself is behind this lock).

use std::sync::atomic::{AtomicU32, Ordering};

/// A mutex guarding `T`: `lock()`, `force_unlock()` and the guards are `lock_api`'s.
pub type Mutex<T> = lock_api::Mutex<RawLock, T>;
/// What [`Mutex`]'s `lock()` returns.
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawLock, T>;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
/// Locked, and some thread may be asleep in `futex_wait` on the word.
const CONTENDED: u32 = 2;
/// Loads before a waiter sleeps: the shim's critical sections are a few hundred nanoseconds.
const SPINS: u32 = 100;

pub struct RawLock {
    state: AtomicU32,
}

// SAFETY: the lock is exclusive: `lock` and `try_lock` succeed only by moving the word from
// UNLOCKED with acquire ordering, and `unlock` puts it back with release ordering.
unsafe impl lock_api::RawMutex for RawLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawLock = RawLock {
        state: AtomicU32::new(UNLOCKED),
    };
    type GuardMarker = lock_api::GuardNoSend;

    #[inline]
    fn lock(&self) {
        crate::critical::enter();
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        crate::critical::enter();
        let taken = self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if !taken {
            crate::critical::leave();
        }
        taken
    }

    #[inline]
    unsafe fn unlock(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            futex_wake(&self.state, 1);
        }
        crate::critical::leave();
    }
}

impl RawLock {
    #[cold]
    fn lock_contended(&self) {
        let mut state = self.spin();
        if state == UNLOCKED {
            match self.state.compare_exchange(
                UNLOCKED,
                LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(s) => state = s,
            }
        }
        loop {
            // Marked contended before sleeping, so the holder's unlock wakes someone.
            if state != CONTENDED && self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                return;
            }
            futex_wait(&self.state, CONTENDED, None);
            state = self.spin();
        }
    }

    /// Waits a little for a holder that is running; returns the word once it is not LOCKED.
    fn spin(&self) -> u32 {
        let mut spins = SPINS;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state != LOCKED || spins == 0 {
                return state;
            }
            std::hint::spin_loop();
            spins -= 1;
        }
    }
}

/// Sleeps while `word` holds `expected`, at most `ms` milliseconds (`None`: no limit). Returns
/// early on a wake-up, a signal, or a word that has already changed: the caller looks again.
/// Async-signal-safe (the signal path waits on a word with it). errno may change: every hook
/// restores it after recording, and the signal handler restores it before returning.
pub fn futex_wait(word: &AtomicU32, expected: u32, ms: Option<u64>) {
    let ts = ms.map(|ms| libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    });
    // SAFETY: FUTEX_WAIT reads the word (a valid, aligned u32); ts is null or a valid relative
    // timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts.as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec),
        );
    }
}

/// Wakes up to `n` threads sleeping on `word`. Async-signal-safe.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE only wakes threads sleeping on this word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

/// In a child process made without fork() (no fork handler took and released the locks), where
/// no thread can be inside the shim: makes `m` usable again if a thread of the parent held it at
/// the fork. That thread does not exist here, so the lock would stay held for good; what it
/// guarded may be half-updated (a map in the middle of growing), so it is replaced by
/// `T::default()` and the old value is leaked, never dropped (dropping it could free memory
/// twice). Returns whether the lock was held.
pub fn reclaim<T: Default>(m: &Mutex<T>) -> bool {
    reset(m, false)
}

/// One of the shim's mutexes as the fork steps see it, whatever it guards: taken before fork
/// and released on both sides after, or reclaimed or abandoned in a child made without fork().
pub(crate) trait ForkLock {
    /// Takes the lock and keeps it (before fork). Pair with [`ForkLock::release`].
    fn hold(&self);

    /// Releases what [`ForkLock::hold`] took.
    ///
    /// # Safety
    /// Only after `hold`, on the thread that called it (or its forked copy).
    unsafe fn release(&self);

    /// [`reclaim`]: true if the lock was held.
    fn reclaim(&self) -> bool;

    /// [`abandon`]: true if the lock was held.
    fn abandon(&self) -> bool;
}

impl<T: Default> ForkLock for Mutex<T> {
    fn hold(&self) {
        std::mem::forget(self.lock());
    }

    unsafe fn release(&self) {
        // SAFETY: per the contract, the lock is held and its guard was forgotten.
        unsafe { self.force_unlock() };
    }

    fn reclaim(&self) -> bool {
        reclaim(self)
    }

    fn abandon(&self) -> bool {
        abandon(self)
    }
}

/// A part of the state that forks must hold (the table, the stack interners, the Python code
/// objects, the graphs, the library handles, the dump lock): it lists its mutexes once, in
/// [`ForkLocked::each_lock`], and lock, unlock, reclaim and abandon all walk that list, in its
/// order (`State::lock_all` takes the parts in the order of its own list).
pub(crate) trait ForkLocked {
    /// Calls `f` on every mutex of the part, in the order a fork takes them.
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock));

    /// Takes every lock and keeps it (before fork). Pair with [`ForkLocked::unlock_all`].
    fn lock_all(&self) {
        self.each_lock(&mut |m| m.hold());
    }

    /// Releases what [`ForkLocked::lock_all`] took.
    ///
    /// # Safety
    /// Only after `lock_all`, on the thread that called it (or its forked copy).
    unsafe fn unlock_all(&self) {
        // SAFETY: per the contract, `lock_all` holds every lock of the list.
        self.each_lock(&mut |m| unsafe { m.release() });
    }

    /// [`reclaim`] for every lock (a child made without fork()); true if any was held.
    fn reclaim_all(&self) -> bool {
        let mut held = false;
        self.each_lock(&mut |m| held |= m.reclaim());
        held
    }

    /// [`abandon`] for every lock (a child made without fork()), then [`ForkLocked::abandoned`];
    /// true if any lock was held.
    fn abandon_all(&self) -> bool {
        let mut held = false;
        self.each_lock(&mut |m| held |= m.abandon());
        self.abandoned();
        held
    }

    /// What the part does once its locks are abandoned (the table empties its ring too).
    fn abandoned(&self) {}
}

/// A part that is one value behind one mutex (the dump lock).
impl<T: Default> ForkLocked for Mutex<T> {
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock)) {
        f(self);
    }
}

/// [`reclaim`], and what `m` guarded is replaced (and leaked) even where the lock was free: in
/// such a child, memory the parent's threads allocated is never freed, since a free may wait for
/// the lock of their malloc arena, which one of them may have held at the fork (glibc's `_Fork`
/// resets none; seen as a child hanging in `free` at exit).
pub fn abandon<T: Default>(m: &Mutex<T>) -> bool {
    reset(m, true)
}

fn reset<T: Default>(m: &Mutex<T>, always: bool) -> bool {
    let held = match m.try_lock() {
        Some(mut guard) => {
            if always {
                std::mem::forget(std::mem::take(&mut *guard));
            }
            return false;
        }
        None => true,
    };
    // The release counts as this thread leaving a critical section (`critical::leave`): one it
    // never entered, so the entry is counted first.
    crate::critical::enter();
    // SAFETY: its holder, a thread of the parent, does not exist in this process and will never
    // release it; the word is ours to reset (`unlock` stores UNLOCKED, and wakes no one: no
    // thread of this process waits on it).
    unsafe { m.force_unlock() };
    std::mem::forget(std::mem::take(&mut *m.lock()));
    held
}

/// `T` alone on its cache lines (two: adjacent-line prefetch pairs them), so threads writing
/// it do not slow down threads reading whatever would otherwise sit beside it.
#[derive(Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_threads_count_exactly_under_one_lock() {
        let m: Mutex<u64> = Mutex::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        *m.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*m.lock(), 160_000);
    }

    #[test]
    fn a_waiter_sleeps_on_the_futex_and_the_unlock_wakes_it() {
        // The holder keeps the lock far longer than the spin, so the waiter must mark the word
        // CONTENDED and sleep in futex_wait; only the holder's futex_wake lets it in.
        let m: Mutex<u32> = Mutex::new(0);
        let held = m.lock();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                *m.lock() += 1;
            });
            let start = std::time::Instant::now();
            // SAFETY: only reads the lock's word; the lock itself is not touched.
            let word = unsafe { &m.raw().state };
            while word.load(Ordering::Relaxed) != CONTENDED {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(10),
                    "the waiter never marked the lock contended"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(
                !waiter.is_finished(),
                "the waiter got in while the lock was held"
            );
            drop(held);
            waiter.join().unwrap();
        });
        assert_eq!(*m.lock(), 1);
        // SAFETY: as above, a read of the word.
        let word = unsafe { &m.raw().state };
        assert_eq!(word.load(Ordering::Relaxed), UNLOCKED);
    }

    #[test]
    fn reclaiming_a_lock_held_for_good_leaves_it_free_and_empty() {
        let m: Mutex<Vec<u32>> = Mutex::new(vec![1, 2]);
        assert!(!reclaim(&m), "a free lock is left as it is");
        assert_eq!(*m.lock(), [1, 2]);
        std::mem::forget(m.lock());
        assert!(reclaim(&m));
        assert!(m.lock().is_empty());
    }

    #[test]
    fn a_forgotten_guard_is_released_by_force_unlock() {
        let m: Mutex<u32> = Mutex::new(1);
        std::mem::forget(m.lock());
        assert!(m.try_lock().is_none());
        // SAFETY: the lock is held by the guard forgotten above.
        unsafe { m.force_unlock() };
        assert_eq!(*m.try_lock().expect("released"), 1);
    }
}
