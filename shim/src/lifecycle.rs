//! Process lifecycle: the exit dump, snapshots, terminating signals and fork. The constructor
//! (`constructor.rs`) and `cudaleak attach` start it; the dump (`dump.rs`) is below it and is
//! handed the state; nothing here reaches a hook, `attach` or the constructor.
//!
//! The exit handler is registered first thing ([`install_handlers`], from the constructor), so it
//! runs after every handler the program and the CUDA runtime register later (static destructors'
//! frees are seen). No signal handler is installed then: a disposition the program could observe
//! before it has set up its own would change what it does (CPython keeps the default SIGINT only
//! where it finds it). Signal handlers, the worker and the late exit handler that marks teardown
//! are installed at the first recorded allocation ([`arm`]).
//!
//! Signal handlers never dump themselves (a dump allocates and locks): they post a request in a
//! futex word the worker sleeps on and wait on another for it to finish, using only
//! async-signal-safe calls. The worker's dump never waits for the interrupted thread: a thread
//! holding a lock of the shim defers the signal until it lets go ([`crate::critical`]), the dump
//! allocates from the shim's own heap, not `malloc` ([`crate::alloc`]), and names no frames (no
//! loader lock). The shim keeps no file descriptor open: a program that closes every descriptor
//! and reuses the numbers cannot have its data read or written by us. Programs that never use
//! CUDA get no handler and no thread.

use std::ffi::c_int;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU8, Ordering};
use std::time::Instant;

use crate::dump::{self, Moment};
use crate::lock::{futex_wait, futex_wake};
use crate::{critical, guard, process, state};

/// Signals that end a program by default and after which a dump is written.
const TERMINATING: [c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGABRT];
/// How long a terminating signal waits for a dump that makes no progress before the program ends
/// without it. A dump in progress reports progress as it goes ([`dump::progress`]), so a large one
/// is waited for; one stuck (a bug: nothing it waits for can be held by the interrupted thread)
/// costs this long, not a supervisor's whole grace period.
const STALLED_DUMP_MS: u64 = 2_000;
/// The longest a terminating signal waits for its dump, progressing or not.
const SIGNAL_DUMP_LIMIT_MS: u64 = 60_000;

const WORKER_NONE: u8 = 0;
const WORKER_STARTING: u8 = 1;
const WORKER_RUNNING: u8 = 2;
static WORKER: AtomicU8 = AtomicU8::new(WORKER_NONE);
/// 1 once the worker thread has started up (see `start_worker`).
static WORKER_READY: AtomicU32 = AtomicU32::new(0);
/// Requests for the worker (bits), the futex word it sleeps on.
static REQUESTS: AtomicU32 = AtomicU32::new(0);
/// Set to 1 by the worker when the signal's dump is written (or given up), the futex word the
/// signal handler sleeps on.
static DONE: AtomicU32 = AtomicU32::new(0);
/// The terminating signal whose dump the worker is asked for.
static FATAL_SIGNAL: AtomicI32 = AtomicI32::new(0);
static HANDLING_FATAL: AtomicBool = AtomicBool::new(false);
/// SIGUSR1 arrived before the worker existed.
static SNAPSHOT_PENDING: AtomicBool = AtomicBool::new(false);

const REQUEST_SNAPSHOT: u32 = 1;
const REQUEST_FATAL: u32 = 2;
/// `cudaleak attach` detaches: the worker ends.
const REQUEST_STOP: u32 = 4;
/// The table's ring is half full: fold it, so the program's threads need not.
const REQUEST_FOLD: u32 = 8;

/// How a child made without fork() takes the state over ([`adopt_raw_child`]), for
/// `process::init`.
pub fn adoption() -> process::Adoption {
    process::Adoption {
        adopt: adopt_raw_child,
        stop: state::stop,
    }
}

/// The exit dump's handler, then the fork handlers: registered by the constructor.
pub fn install_handlers() {
    // SAFETY: at_exit is an extern "C" fn with no arguments that never unwinds.
    unsafe { libc::atexit(at_exit) };
    install_fork_handlers();
}

/// The fork handlers: registered by the constructor ([`install_handlers`]), or by
/// `cudaleak_attach` (whose exit dump is not an `atexit` handler: `attach::at_unload`).
pub fn install_fork_handlers() {
    // SAFETY: the three handlers are extern "C" fns that never unwind.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        )
    };
}

/// The exit dump (and, for `cudaleak attach`, from the library's finaliser).
pub extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        process::settle_slow();
        if let Some(s) = state::get() {
            dump::write(s, Moment::Exit);
        }
    });
}

/// Installs our handler for SIGUSR1 and the terminating signals, where the program's
/// disposition is still the default. A handler the program installs later replaces ours.
fn install_signal_handlers() {
    for sig in TERMINATING.into_iter().chain([libc::SIGUSR1]) {
        // SAFETY: sigaction with a null new action only reads the current one.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Runs in signal context: only async-signal-safe calls, no allocation, no locks.
extern "C" fn on_signal(sig: c_int) {
    // SAFETY: __errno_location is async-signal-safe; errno is restored before returning.
    let errno = unsafe { *libc::__errno_location() };
    if sig == libc::SIGUSR1 {
        if !wake(REQUEST_SNAPSHOT) {
            SNAPSHOT_PENDING.store(true, Ordering::Relaxed);
        }
    } else if critical::defer(sig) {
        // This thread holds a lock the dump needs: the signal is raised again when it lets go.
    } else {
        if !HANDLING_FATAL.swap(true, Ordering::AcqRel) {
            FATAL_SIGNAL.store(sig, Ordering::Release);
            if wake(REQUEST_FATAL) {
                wait_done();
            }
        }
        // End the way the program would have without us: default action, signal re-raised.
        // It stays blocked until this handler returns, then terminates the process.
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    // SAFETY: __errno_location returns this thread's errno slot, valid for writes.
    unsafe { *libc::__errno_location() = errno };
}

/// Posts a request to the worker. False when there is no worker to hear it (also in a child
/// made without fork(), not yet adopted: the worker is the parent's).
fn wake(request: u32) -> bool {
    if !process::current() || WORKER.load(Ordering::Acquire) != WORKER_RUNNING {
        return false;
    }
    REQUESTS.fetch_or(request, Ordering::AcqRel);
    futex_wake(&REQUESTS, i32::MAX);
    true
}

/// Asks the worker to fold the table's ring (`Table::fold`); without a worker, the threads that
/// find the ring full fold it.
pub fn fold_soon() {
    wake(REQUEST_FOLD);
}

/// Waits for the worker's signal dump while it makes progress: at most [`STALLED_DUMP_MS`]
/// without any, at most [`SIGNAL_DUMP_LIMIT_MS`] in all.
fn wait_done() {
    let mut seen = dump::progress();
    let (mut still, mut total) = (0u64, 0u64);
    const SLICE_MS: u64 = 20;
    while DONE.load(Ordering::Acquire) == 0 {
        if still >= STALLED_DUMP_MS || total >= SIGNAL_DUMP_LIMIT_MS {
            return;
        }
        futex_wait(&DONE, 0, Some(SLICE_MS));
        total += SLICE_MS;
        let now = dump::progress();
        if now == seen {
            still += SLICE_MS;
        } else {
            (seen, still) = (now, 0);
        }
    }
}

/// Undoes [`arm`] for `cudaleak attach`'s detach: the worker ends, and each signal whose
/// handler is still ours gets its default disposition back (one the program installed since
/// is left alone). The exit handlers stay registered: the final dump written, they do nothing.
pub fn disarm() {
    if WORKER
        .compare_exchange(
            WORKER_RUNNING,
            WORKER_NONE,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
    {
        REQUESTS.fetch_or(REQUEST_STOP, Ordering::AcqRel);
        futex_wake(&REQUESTS, i32::MAX);
    }
    for sig in TERMINATING.into_iter().chain([libc::SIGUSR1]) {
        // SAFETY: sigaction reads the current action into a valid buffer; SIG_DFL is restored
        // only where that action is this shim's handler.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == on_signal as *const () as usize
            {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// Arms again after [`disarm`] (a second `cudaleak attach`): the worker restarts, the signal
/// handlers are installed again where the disposition is the default.
pub fn rearm(s: &'static state::State) {
    REQUESTS.store(0, Ordering::Release);
    ARMED.store(false, Ordering::Release);
    allocation_recorded(s);
}

/// Called at each recorded allocation. The first one arms the shim: the late exit handler, the
/// signal handlers (where the disposition is still the default: by now a program or runtime that
/// installs its own, such as CPython's SIGINT handler, has done so) and the worker.
#[inline]
pub fn allocation_recorded(s: &'static state::State) {
    if !ARMED.load(Ordering::Relaxed) && !ARMED.swap(true, Ordering::AcqRel) {
        arm(s);
    }
}

fn arm(s: &'static state::State) {
    // Registered after the CUDA runtime's and the frameworks' own exit handlers (they register
    // theirs when they load or initialise, before the first allocation returns), so it runs
    // before theirs: from then on, failures are teardown's.
    // SAFETY: mark_exiting is an extern "C" fn with no arguments that never unwinds.
    unsafe { libc::atexit(mark_exiting) };
    if s.config.signals {
        install_signal_handlers();
    }
    if s.config.snapshot_interval.is_some() || s.config.signals {
        WORKER.store(WORKER_STARTING, Ordering::Release);
        start_worker(s);
    }
}

/// The first allocation has been recorded and [`arm`] has run (in this process: a forked child
/// arms again).
static ARMED: AtomicBool = AtomicBool::new(false);
static EXITING: AtomicBool = AtomicBool::new(false);

extern "C" fn mark_exiting() {
    EXITING.store(true, Ordering::Release);
}

/// True once the program has begun to exit, with the CUDA runtime and the frameworks still to
/// tear down (their exit handlers run after this point).
pub fn exiting() -> bool {
    EXITING.load(Ordering::Acquire)
}

fn start_worker(s: &'static state::State) {
    // The worker must never run a handler: one that ran on it would wait for the dump the
    // worker itself is meant to write (seen as a flaky test: SIGHUP right after the first
    // allocation, no dump after the wait). So it starts with every signal blocked, inherited
    // from this thread's mask for the moment of the spawn, rather than blocking them itself once
    // it runs.
    // SAFETY: sigset_t is plain data, for which all-zero is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigfillset and pthread_sigmask on valid local sets, for this thread only; its old
    // mask is restored below, once the worker is spawned.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
    }
    let spawned = std::thread::Builder::new()
        .name("cudaleak".into())
        .spawn(move || worker(s));
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    // A new thread's start-up allocates through the C library (its thread-local destructors are
    // registered with calloc): the worker counts as running only once that is over, so a signal
    // can never leave it waiting for an arena lock the interrupted thread holds.
    while spawned.is_ok() && WORKER_READY.load(Ordering::Acquire) == 0 {
        futex_wait(&WORKER_READY, 0, Some(10));
    }
    if spawned.is_ok() {
        WORKER.store(WORKER_RUNNING, Ordering::Release);
        if SNAPSHOT_PENDING.swap(false, Ordering::AcqRel) {
            wake(REQUEST_SNAPSHOT);
        }
    }
    // Else WORKER stays STARTING: no second try, no worker; signals end the program at once.
}

/// The worker: periodic snapshots, SIGUSR1 snapshots, dumps for terminating signals, folds of
/// the table's ring.
fn worker(s: &'static state::State) {
    // Process-directed signals go to the program's threads, whose handlers wait for us: this
    // thread started with all of them blocked (`start_worker`).
    // The thread-local state the dump's code uses, set up now, while no signal is waiting on us.
    let _ = std::thread::current();
    WORKER_READY.store(1, Ordering::Release);
    futex_wake(&WORKER_READY, i32::MAX);
    let schedule = s.config.snapshot_interval;
    let mut timed = 0u64;
    let mut next = schedule.map(|i| Instant::now() + i.interval(timed));
    loop {
        if REQUESTS.load(Ordering::Acquire) == 0 {
            let timeout = next.map(|t| {
                t.saturating_duration_since(Instant::now())
                    .as_millis()
                    .min(u128::from(u32::MAX)) as u64
            });
            futex_wait(&REQUESTS, 0, timeout);
        }
        let requests = REQUESTS.swap(0, Ordering::AcqRel);
        if requests & REQUEST_STOP != 0 {
            return;
        }
        let mut snapshot = requests & REQUEST_SNAPSHOT != 0;
        if let (Some(t), Some(i)) = (next, schedule) {
            if Instant::now() >= t {
                snapshot = true;
                timed += 1;
                next = Some(Instant::now() + i.interval(timed));
            }
        }
        if requests & REQUEST_FATAL != 0 {
            let sig = FATAL_SIGNAL.load(Ordering::Acquire);
            let _ =
                std::panic::catch_unwind(AssertUnwindSafe(|| dump::write(s, Moment::Signal(sig))));
            DONE.store(1, Ordering::Release);
            futex_wake(&DONE, i32::MAX);
            return;
        }
        if requests & REQUEST_FOLD != 0 {
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| s.table.fold()));
        }
        if snapshot {
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| dump::write(s, Moment::Snapshot)));
        }
    }
}

// Fork: the child must start with an empty table, and no lock may be inherited held. Every
// lock of the state is taken before the fork and released on both sides after it.

extern "C" fn before_fork() {
    process::settle_slow();
    if let Some(s) = state::get() {
        s.lock_all();
    }
    crate::alloc::lock_for_fork();
}

extern "C" fn after_fork_parent() {
    // SAFETY: before_fork took the heap's lock on this thread.
    unsafe { crate::alloc::unlock_after_fork() };
    if let Some(s) = state::get() {
        // SAFETY: before_fork took every lock on this thread.
        unsafe { s.unlock_all() };
    }
}

extern "C" fn after_fork_child() {
    // SAFETY: before_fork took the heap's lock; the child is a copy of the forking thread.
    unsafe { crate::alloc::unlock_after_fork() };
    if let Some(s) = state::get() {
        // SAFETY: before_fork took every lock; the child is a copy of the forking thread.
        unsafe { s.unlock_all() };
        s.reset_for_child(process::owner());
    }
    crate::frameworks::reset_for_child();
    guard::forget_thread_id();
    // The worker thread did not survive the fork.
    REQUESTS.store(0, Ordering::Release);
    DONE.store(0, Ordering::Release);
    WORKER_READY.store(0, Ordering::Release);
    WORKER.store(WORKER_NONE, Ordering::Release);
    HANDLING_FATAL.store(false, Ordering::Release);
    ARMED.store(false, Ordering::Release);
    EXITING.store(false, Ordering::Release);
    process::claim();
}

/// A child made without fork() (`_Fork`, `syscall(SYS_fork)`, a raw `clone`), met at its first
/// call into the shim or at exit (`process::settle`): no fork handler ran, so this does what
/// they do. A lock that a thread of the parent held at the fork is still held here, by a thread
/// this process does not have. No thread of the child can be inside the shim's state now (every
/// way in passes `process::settle`, which lets none through until this is done), so each such
/// lock word is reset (`State::reclaim_locks`). The parent's table is left behind whole, unread
/// and unfreed; where what the child keeps (the interned stacks) was being changed, it may be
/// half-updated, so it is dropped unread and the child records nothing (its dump says why).
pub fn adopt_raw_child() {
    // First the heap, which everything after this allocates from.
    crate::alloc::reset_in_raw_child();
    if let Some(s) = state::get() {
        if s.reclaim_locks() {
            state::stop(
                "forked without fork() (a raw clone or _Fork) while another thread was recording; \
                 the child recorded nothing",
            );
        }
        // As before_fork would have left them, for after_fork_child to release.
        s.lock_all();
    }
    crate::alloc::lock_for_fork();
    after_fork_child();
}
