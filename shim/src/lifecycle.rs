//! Process lifecycle: the constructor, the exit dump, snapshots, terminating signals and fork.
//!
//! The constructor reads the environment and registers the exit handler first, so it runs after
//! every handler the program and the CUDA runtime register later (static destructors' frees are
//! seen). It calls nothing that is hooked and installs no signal handler: a disposition the
//! program could observe before it has set up its own would change what it does (CPython keeps
//! the default SIGINT only where it finds it). Signal handlers, the worker and the late exit
//! handler that marks teardown are installed at the first recorded allocation ([`arm`]).
//!
//! Signal handlers never dump themselves (a dump allocates and locks): they wake the worker
//! thread through a pipe and wait on another for it to finish, using only async-signal-safe
//! calls. Programs that never use CUDA get no handler, no thread and no file descriptors.

use std::ffi::c_int;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::time::Instant;

use crate::config::Config;
use crate::dump::{self, Moment};
use crate::{guard, process, real, stack, state, stdio};

/// Signals that end a program by default and after which a dump is written.
const TERMINATING: [c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGABRT];
/// How long a terminating signal waits for its dump before the program ends anyway.
const SIGNAL_DUMP_TIMEOUT_MS: c_int = 10_000;

const WORKER_NONE: u8 = 0;
const WORKER_STARTING: u8 = 1;
const WORKER_RUNNING: u8 = 2;
static WORKER: AtomicU8 = AtomicU8::new(WORKER_NONE);
/// The worker's wake-up pipe (write end, read end) and the signal handler's "done" pipe.
static WAKE_W: AtomicI32 = AtomicI32::new(-1);
static WAKE_R: AtomicI32 = AtomicI32::new(-1);
static DONE_W: AtomicI32 = AtomicI32::new(-1);
static DONE_R: AtomicI32 = AtomicI32::new(-1);
/// The terminating signal whose dump the worker is asked for.
static FATAL_SIGNAL: AtomicI32 = AtomicI32::new(0);
static HANDLING_FATAL: AtomicBool = AtomicBool::new(false);
/// SIGUSR1 arrived before the worker existed.
static SNAPSHOT_PENDING: AtomicBool = AtomicBool::new(false);

const REQUEST_SNAPSHOT: u8 = b's';
const REQUEST_FATAL: u8 = b'f';

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn constructor() {
    let _ = std::panic::catch_unwind(|| {
        stdio::init();
        if real::dlsym_fn().is_none() {
            stdio::say("cudaleak: cannot find the C library's dlsym; passing everything through, recording nothing\n");
            return;
        }
        // Another copy of the shim records this process: this one stays out of the way. Its
        // warnings, like the configuration's, wait for the first recorded call (`process`).
        if !process::decide() {
            return;
        }
        let config = Config::from_env();
        process::init();
        stack::init_own_range();
        let disabled = config.disabled;
        state::init(config);
        if disabled {
            return;
        }
        // SAFETY: at_exit is an extern "C" fn with no arguments that never unwinds.
        unsafe { libc::atexit(at_exit) };
        // SAFETY: the three handlers are extern "C" fns that never unwind.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_parent),
                Some(after_fork_child),
            )
        };
    });
}

extern "C" fn at_exit() {
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
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Sends a request byte to the worker. False when there is no worker to hear it.
fn wake(request: u8) -> bool {
    let fd = WAKE_W.load(Ordering::Acquire);
    // In a child made without fork(), not yet adopted, the pipe is still the parent's.
    if !process::current() || fd < 0 || WORKER.load(Ordering::Acquire) != WORKER_RUNNING {
        return false;
    }
    // SAFETY: write on a non-blocking pipe is async-signal-safe.
    unsafe { libc::write(fd, (&request as *const u8).cast(), 1) == 1 }
}

fn wait_done() {
    let fd = DONE_R.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll is async-signal-safe; pfd is a valid single-element array.
    unsafe { libc::poll(&mut pfd, 1, SIGNAL_DUMP_TIMEOUT_MS) };
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

fn pipe() -> Option<(c_int, c_int)> {
    let mut fds = [-1; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return None;
    }
    // A program started with fd 0, 1 or 2 closed must not find our pipe there.
    let (r, w) = (stdio::above_stdio(fds[0]), stdio::above_stdio(fds[1]));
    if r < 0 || w < 0 {
        for fd in [r, w].into_iter().filter(|&fd| fd >= 0) {
            // SAFETY: closing a descriptor we created and nobody else knows.
            unsafe { libc::close(fd) };
        }
        return None;
    }
    Some((r, w))
}

fn start_worker(s: &'static state::State) {
    let (Some((wake_r, wake_w)), Some((done_r, done_w))) = (pipe(), pipe()) else {
        return; // WORKER stays STARTING: no second try, no worker.
    };
    WAKE_R.store(wake_r, Ordering::Release);
    WAKE_W.store(wake_w, Ordering::Release);
    DONE_R.store(done_r, Ordering::Release);
    DONE_W.store(done_w, Ordering::Release);
    // The worker must never run a handler: one that ran on it would wait for the dump the
    // worker itself is meant to write (seen as a flaky test: SIGHUP right after the first
    // allocation, no dump after the 10 s wait). So it starts with every signal blocked, inherited
    // from this thread's mask for the moment of the spawn, rather than blocking them itself once
    // it runs.
    // SAFETY: sigfillset and pthread_sigmask on this thread, its old mask restored below.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
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
    if spawned.is_ok() {
        WORKER.store(WORKER_RUNNING, Ordering::Release);
        if SNAPSHOT_PENDING.swap(false, Ordering::AcqRel) {
            wake(REQUEST_SNAPSHOT);
        }
    }
}

/// The worker: periodic snapshots, SIGUSR1 snapshots, dumps for terminating signals.
fn worker(s: &'static state::State) {
    // Process-directed signals go to the program's threads, whose handlers wait for us: this
    // thread started with all of them blocked (`start_worker`).
    let schedule = s.config.snapshot_interval;
    let mut timed = 0u64;
    let mut next = schedule.map(|i| Instant::now() + i.interval(timed));
    loop {
        let timeout = next.map_or(-1, |t| {
            t.saturating_duration_since(Instant::now())
                .as_millis()
                .min(i32::MAX as u128) as c_int
        });
        let mut pfd = libc::pollfd {
            fd: WAKE_R.load(Ordering::Acquire),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid single-element array.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout) };
        if n > 0 && pfd.revents & (libc::POLLNVAL | libc::POLLERR | libc::POLLHUP) != 0 {
            // The program closed our descriptors: keep the periodic snapshots only.
            match schedule {
                Some(i) => std::thread::sleep(i.interval(timed)),
                None => return,
            }
        }
        let mut snapshot = false;
        let mut fatal = false;
        if n > 0 && pfd.revents & libc::POLLIN != 0 {
            let mut buf = [0u8; 64];
            // SAFETY: buf is valid for 64 bytes; the pipe is non-blocking.
            let got = unsafe { libc::read(pfd.fd, buf.as_mut_ptr().cast(), buf.len()) };
            for &b in &buf[..got.max(0) as usize] {
                snapshot |= b == REQUEST_SNAPSHOT;
                fatal |= b == REQUEST_FATAL;
            }
        }
        if let (Some(t), Some(i)) = (next, schedule) {
            if Instant::now() >= t {
                snapshot = true;
                timed += 1;
                next = Some(Instant::now() + i.interval(timed));
            }
        }
        if fatal {
            let sig = FATAL_SIGNAL.load(Ordering::Acquire);
            let _ =
                std::panic::catch_unwind(AssertUnwindSafe(|| dump::write(s, Moment::Signal(sig))));
            let done = [1u8];
            // SAFETY: done is valid for one byte.
            unsafe { libc::write(DONE_W.load(Ordering::Acquire), done.as_ptr().cast(), 1) };
            return;
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
}

extern "C" fn after_fork_parent() {
    if let Some(s) = state::get() {
        // SAFETY: before_fork took every lock on this thread.
        unsafe { s.unlock_all() };
    }
}

extern "C" fn after_fork_child() {
    if let Some(s) = state::get() {
        // SAFETY: before_fork took every lock; the child is a copy of the forking thread.
        unsafe { s.unlock_all() };
        s.reset_for_child(process::owner());
    }
    guard::forget_thread_id();
    // The worker thread did not survive the fork; its descriptors are the parent's.
    for fd in [&WAKE_R, &WAKE_W, &DONE_R, &DONE_W] {
        let old = fd.swap(-1, Ordering::AcqRel);
        if old >= 0 {
            // SAFETY: closing the child's copy of a descriptor we created.
            unsafe { libc::close(old) };
        }
    }
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
    after_fork_child();
}
