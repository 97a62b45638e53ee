//! Which process this is, and which copy of the shim: two facts every recording call depends
//! on, settled here so that a hook pays one load for them.
//!
//! **One recorder per process.** Copies of the shim loaded into one process (two paths in
//! LD_PRELOAD, `LD_PRELOAD=/other/copy.so cudaleak run …`, a copy a library dlopens) would each
//! record the program's calls and each write a dump: one leak reported twice. The constructor
//! finds the loaded objects that define `cudaleak_shim_v1` (or, older than it,
//! `cudaleak_set_recording`) in the loader's list; the first in load order, whose exported
//! wrappers the program binds to first, records. Every other copy is passive: it builds no
//! state, registers no handler, writes no dump, and its hooks pass every call straight through
//! (its "real" function may be the recorder's wrapper, or the recorder's real function may be
//! its wrapper: one record either way). Identity is the loader's object, never a symbol's
//! address: the address of an exported function, taken inside a shared library, is whatever the
//! first definition in the process is, so every copy would see the recorder's.
//!
//! **A child made without fork().** `_Fork()`, `syscall(SYS_fork)` and a `clone` without
//! CLONE_VM run no atfork handler, so the child would carry on with its parent's table as its
//! own. One private page is mapped MADV_WIPEONFORK (the kernel gives every such child a zeroed
//! copy) and holds LIVE while this is the process the state belongs to. Every recording call,
//! the exit dump and a fork look at it (one load); a child that finds it zeroed does what the
//! fork handlers would have done (`lifecycle::adopt_raw_child`). Where the kernel lacks
//! MADV_WIPEONFORK (before 4.14), the pid is compared at exit and before a fork instead.
//!
//! Must never: allocate, lock or make a system call in [`settle`] or [`current`] (the hot path
//! and the signal handler).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::config::Config;
use crate::{lifecycle, real, state, stdio};

const UNDECIDED: u8 = 0;
const RECORDER: u8 = 1;
const PASSIVE: u8 = 2;
static ROLE: AtomicU8 = AtomicU8::new(UNDECIDED);
/// The other copies the constructor found, for the line [`touched`] prints.
static COPIES: OnceLock<Copies> = OnceLock::new();

/// The marker's values: zero is what a child made by any kind of fork reads.
const WIPED: u32 = 0;
const LIVE: u32 = 1;
/// A thread of a child made without fork() is resetting the state.
const ADOPTING: u32 = 2;
/// The marker until the constructor maps its page, and for good where that fails.
static UNWIPED: AtomicU32 = AtomicU32::new(LIVE);
static MARK: AtomicPtr<AtomicU32> = AtomicPtr::new(&UNWIPED as *const AtomicU32 as *mut _);
/// The pid of the process the state belongs to.
static PID: AtomicU32 = AtomicU32::new(0);
/// The configuration warnings and the copies have been reported (once per process).
static ANNOUNCED: AtomicBool = AtomicBool::new(false);

struct Copies {
    own: String,
    /// Where the other copies are loaded.
    bases: Vec<usize>,
    /// Copies that pass every call through to this one.
    passive: Vec<String>,
    /// Copies older than the agreement, loaded after this one: they record on their own.
    older: Vec<String>,
}

/// Decides, once, whether this copy records. Called first thing by the constructor.
pub fn decide() -> bool {
    let own = decide as *const () as *const c_void;
    let copies = real::shim_copies(own, &[c"cudaleak_shim_v1", c"cudaleak_set_recording"]);
    // An older copy before this one records (it knows of no agreement); so does the first copy
    // that knows of it.
    let records = copies.first().is_none_or(|c| c.own);
    ROLE.store(if records { RECORDER } else { PASSIVE }, Ordering::Release);
    if records {
        let others = copies.iter().filter(|c| !c.own);
        let (passive, older) = others.partition::<Vec<_>, _>(|c| c.marker == 0);
        let _ = COPIES.set(Copies {
            own: copies.first().map(|c| c.path.clone()).unwrap_or_default(),
            bases: copies.iter().filter(|c| !c.own).map(|c| c.base).collect(),
            passive: passive.into_iter().map(|c| c.path.clone()).collect(),
            older: older.into_iter().map(|c| c.path.clone()).collect(),
        });
    }
    records
}

/// Whether `p` lies in another copy of the shim (in the recording copy, which knows them).
pub fn in_other_copy(p: *const c_void) -> bool {
    COPIES.get().is_some_and(|c| {
        !c.bases.is_empty() && real::object_base(p).is_some_and(|b| c.bases.contains(&b))
    })
}

/// Whether another copy of the shim records this process, and this one only passes calls on.
#[inline]
pub fn passive() -> bool {
    ROLE.load(Ordering::Relaxed) == PASSIVE
}

/// Maps the marker page and remembers the pid. Called by the recording copy's constructor.
pub fn init() {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
    // SAFETY: a fresh private anonymous page, never unmapped once published; MADV_WIPEONFORK
    // changes only what a child sees of it.
    unsafe {
        let len = 4096;
        let page = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if page == libc::MAP_FAILED {
            return;
        }
        if libc::madvise(page, len, libc::MADV_WIPEONFORK) != 0 {
            libc::munmap(page, len);
            return;
        }
        let mark = page.cast::<AtomicU32>();
        (*mark).store(LIVE, Ordering::Release);
        MARK.store(mark, Ordering::Release);
    }
}

fn mark() -> &'static AtomicU32 {
    // SAFETY: MARK points at UNWIPED or at the page `init` mapped for good.
    unsafe { &*MARK.load(Ordering::Relaxed) }
}

/// True when the state belongs to this process; in a child made without fork(), the first
/// call adopts the state for the child first (one thread does; calls on others meanwhile are
/// not recorded: false).
#[inline]
pub fn settle() -> bool {
    let mark = mark();
    mark.load(Ordering::Acquire) == LIVE || adopt(mark)
}

#[cold]
fn adopt(mark: &AtomicU32) -> bool {
    match mark.compare_exchange(WIPED, ADOPTING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            lifecycle::adopt_raw_child();
            true
        }
        Err(now) => now == LIVE,
    }
}

/// [`settle`] for the exit dump and a fork: waits for an adoption under way on another thread,
/// and where the marker cannot tell (no MADV_WIPEONFORK), compares the pid.
pub fn settle_slow() {
    let mark = mark();
    if std::ptr::eq(mark, &UNWIPED) && PID.load(Ordering::Relaxed) != 0 {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u32;
        if pid != PID.load(Ordering::Relaxed)
            && mark
                .compare_exchange(LIVE, WIPED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            state::stop(
                "a child made without fork() on a kernel without MADV_WIPEONFORK, found only at \
                 exit: its own blocks could not be told from its parent's, so none are listed",
            );
        }
    }
    while !settle() {
        std::thread::yield_now();
    }
}

/// Whether the state belongs to this process, without adopting it: for the signal handler.
pub fn current() -> bool {
    mark().load(Ordering::Acquire) == LIVE
}

/// The pid of the process whose state this is: in a new child, before [`claim`], its parent.
pub fn owner() -> u32 {
    PID.load(Ordering::Relaxed)
}

/// In a new child, once its state is reset: the state is this process's from now on.
pub fn claim() {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
    ANNOUNCED.store(false, Ordering::Relaxed);
    mark().store(LIVE, Ordering::Release);
}

/// The process made a call the dump counts. The first one prints, once per process, what the
/// shim has to say about its setup: problems with the CUDALEAK_* variables and other copies of
/// the shim. A process that never uses CUDA (a shell the program runs) says nothing.
#[inline]
pub fn touched(config: &Config) {
    if !ANNOUNCED.load(Ordering::Relaxed) && !ANNOUNCED.swap(true, Ordering::AcqRel) {
        announce(config);
    }
}

#[cold]
fn announce(config: &Config) {
    let mut text = String::new();
    for w in &config.warnings {
        text.push_str(&format!("cudaleak: {w}\n"));
    }
    if let Some(copies) = COPIES.get() {
        text.push_str(&copies_line(copies));
    }
    if !text.is_empty() {
        stdio::say(&text);
    }
}

fn copies_line(c: &Copies) -> String {
    let mut text = String::new();
    let n = c.passive.len();
    if n > 0 {
        let others = if n == 1 {
            "the other passes"
        } else {
            "the others pass"
        };
        text.push_str(&format!(
            "cudaleak: {} copies of the shim are loaded; this one records ({}), {others} every call through ({})\n",
            n + 1,
            c.own,
            c.passive.join(", ")
        ));
    }
    for path in &c.older {
        text.push_str(&format!(
            "cudaleak: an older copy of the shim is loaded too ({path}) and records on its own: its dump repeats what this one ({}) records\n",
            c.own
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copies(passive: &[&str], older: &[&str]) -> Copies {
        Copies {
            own: "/a/libcudaleak.so".into(),
            bases: Vec::new(),
            passive: passive.iter().map(|s| s.to_string()).collect(),
            older: older.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_copies_line_names_every_copy() {
        assert_eq!(copies_line(&copies(&[], &[])), "");
        assert_eq!(
            copies_line(&copies(&["/b/libcudaleak.so"], &[])),
            "cudaleak: 2 copies of the shim are loaded; this one records (/a/libcudaleak.so), \
             the other passes every call through (/b/libcudaleak.so)\n"
        );
        assert_eq!(
            copies_line(&copies(&["/b/x.so", "/c/y.so"], &["/d/old.so"])),
            "cudaleak: 3 copies of the shim are loaded; this one records (/a/libcudaleak.so), \
             the others pass every call through (/b/x.so, /c/y.so)\n\
             cudaleak: an older copy of the shim is loaded too (/d/old.so) and records on its \
             own: its dump repeats what this one (/a/libcudaleak.so) records\n"
        );
    }
}
