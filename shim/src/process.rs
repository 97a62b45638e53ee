//! Which process this is, and which copy of the shim: two facts every recording call depends
//! on, settled here so that a hook pays one load for them.
//!
//! **One recorder per process.** Copies of the shim loaded into one process (two paths in
//! LD_PRELOAD, `LD_PRELOAD=/other/copy.so cudaleak run …`, a copy a library dlopens) would each
//! record the program's calls and each write a dump: one leak reported twice. Every copy carries
//! an ELF note ([`MARK_NOTE`]); the constructor lists the loaded objects that carry it, in the
//! loader's order (`dl_iterate_phdr`: the order objects were loaded in, which is also the order
//! the global scope binds symbols in), and the first one records. Every other copy is passive:
//! it builds no state, registers no handler, writes no dump, hands out none of its wrappers, and
//! its hooks pass every call straight through (its "real" function may be the recorder's
//! wrapper, or the recorder's real function its wrapper: one record either way). Each copy
//! decides alone, from the same list, so copies of different versions agree as long as they
//! carry the note; a version that changes the agreement takes a new note type and keeps
//! answering this one. Identity is never a symbol's address (inside a shared library, the
//! address of an exported function is the first definition in the process, so every copy would
//! see the recorder's) nor a `dlsym` on another object (one loaded as a dependency has no search
//! list yet; opening it to make one runs its constructors early). Not covered: a call that
//! reaches a passive copy's wrapper without passing the recorder's (a program that looks the
//! function up in that copy's own handle) is forwarded unrecorded, and a copy dlopened with
//! RTLD_LOCAL before any other records while the program binds to a later global one.
//!
//! **A child made without fork().** `_Fork()`, `syscall(SYS_fork)` and a `clone` without
//! CLONE_VM run no atfork handler, so the child would carry on with its parent's table as its
//! own. One private page is mapped MADV_WIPEONFORK (the kernel gives every such child a zeroed
//! copy) and holds LIVE while this is the process the state belongs to. Every recording call,
//! the exit dump and a fork look at it (one load); a child that finds it zeroed does what the
//! fork handlers would have done (`lifecycle::adopt_raw_child`, handed in by [`init`] as an
//! [`Adoption`]: the state and the lifecycle sit above this module, which only calls back into
//! them). Where the kernel lacks MADV_WIPEONFORK (before 4.14), the pid is compared at exit and
//! before a fork instead.
//!
//! Must never: allocate, lock or make a system call in [`settle`] or [`current`] (the hot path
//! and the signal handler); use a module above it (the state, the lifecycle, the hooks).

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::config::Config;
use crate::stdio;

/// The note every copy of the shim carries: owner `cudaleak`, type [`MARK_TYPE`], and as its
/// description the version of the agreement (1). In a section of its own, which the linker puts
/// in a PT_NOTE segment that `dl_iterate_phdr` shows.
#[repr(C, align(4))]
struct MarkNote {
    namesz: u32,
    descsz: u32,
    kind: u32,
    name: [u8; 12],
    desc: u32,
}

const MARK_NAME: &[u8] = b"cudaleak\0";
const MARK_TYPE: u32 = 0x0c1d_1ea4;

#[cfg_attr(not(test), used)]
#[unsafe(link_section = ".note.cudaleak")]
static MARK_NOTE: MarkNote = MarkNote {
    namesz: MARK_NAME.len() as u32,
    descsz: 4,
    kind: MARK_TYPE,
    name: *b"cudaleak\0\0\0\0",
    desc: 1,
};

const UNDECIDED: u8 = 0;
const RECORDER: u8 = 1;
const PASSIVE: u8 = 2;
static ROLE: AtomicU8 = AtomicU8::new(UNDECIDED);
/// The other copies the recorder's constructor found.
static COPIES: OnceLock<Copies> = OnceLock::new();

/// What a child made without fork() does to take the state over, from the layers above this
/// one: handed to [`init`].
pub struct Adoption {
    /// Does what the fork handlers would have done (`lifecycle::adopt_raw_child`).
    pub adopt: fn(),
    /// Stops recording for good, saying why (`state::stop`).
    pub stop: fn(&str),
}

static ADOPTION: OnceLock<Adoption> = OnceLock::new();

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
/// The configuration warnings and the copies have been reported: once per program, so a forked
/// child whose parent said them already does not say them again.
static ANNOUNCED: AtomicBool = AtomicBool::new(false);

struct Copies {
    own: String,
    /// The other copies: their paths, and the address ranges they are loaded at.
    others: Vec<(String, usize, usize)>,
}

/// Up to this many copies are told apart; more are an accident of a larger kind.
const MAX_COPIES: usize = 16;

/// One loaded object that carries the mark.
#[derive(Clone, Copy)]
struct Found {
    name: *const c_char,
    lo: usize,
    hi: usize,
    own: bool,
}

struct Walk {
    own: usize,
    n: usize,
    found: [Found; MAX_COPIES],
}

/// Decides, once, whether this copy records. Called first thing by the constructor.
pub fn decide() -> bool {
    let mut walk = Walk {
        own: decide as *const () as usize,
        n: 0,
        found: [Found {
            name: std::ptr::null(),
            lo: 0,
            hi: 0,
            own: false,
        }; MAX_COPIES],
    };
    crate::objects::each(|o| {
        visit(&mut walk, o);
        false
    });
    let found = &walk.found[..walk.n];
    // Not found at all (no PT_NOTE seen): record, as a lone copy would.
    let records = found.first().is_none_or(|f| f.own);
    ROLE.store(if records { RECORDER } else { PASSIVE }, Ordering::Release);
    if records {
        // SAFETY: each name is the loader's l_name of an object that is still loaded (this
        // constructor runs while it is being loaded or before main), NUL-terminated.
        let path = |f: &Found| unsafe {
            if f.name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(f.name).to_string_lossy().into_owned()
            }
        };
        let _ = COPIES.set(Copies {
            own: found.first().map(path).unwrap_or_default(),
            others: found
                .iter()
                .filter(|f| !f.own)
                .map(|f| (path(f), f.lo, f.hi))
                .collect(),
        });
    }
    records
}

/// Notes `o` if it carries the mark. Runs under the loader's lock (`objects::each`): no
/// allocation, no call into the loader.
fn visit(walk: &mut Walk, o: &crate::objects::Object) {
    if walk.n == MAX_COPIES {
        return;
    }
    let marked = o.phdrs.iter().any(|p| {
        if p.p_type != libc::PT_NOTE {
            return false;
        }
        // SAFETY: each PT_NOTE segment lies in the object's mapped memory, loaded for as long
        // as the visit lasts.
        let notes = unsafe {
            std::slice::from_raw_parts(
                (o.base + p.p_vaddr as usize) as *const u8,
                p.p_memsz as usize,
            )
        };
        carries_mark(notes, p.p_align.max(4) as usize)
    });
    if !marked {
        return;
    }
    let span = o.span();
    walk.found[walk.n] = Found {
        name: o.name,
        lo: span.start,
        hi: span.end,
        own: span.contains(&walk.own),
    };
    walk.n += 1;
}

/// Whether a PT_NOTE segment's notes (laid out for the segment's `align`, 4 or 8) include the
/// mark.
fn carries_mark(mut notes: &[u8], align: usize) -> bool {
    let pad = |n: usize| n.div_ceil(align) * align;
    let word = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (
            word(notes, 0) as usize,
            word(notes, 4) as usize,
            word(notes, 8),
        );
        let name_end = 12 + namesz;
        // As glibc's ELF_NOTE_NEXT_OFFSET: the header and name padded together, then the
        // description.
        let next = pad(pad(name_end) + descsz);
        if name_end > notes.len() {
            return false;
        }
        if kind == MARK_TYPE && &notes[12..name_end] == MARK_NAME {
            return true;
        }
        if next > notes.len() {
            return false;
        }
        notes = &notes[next..];
    }
    false
}

/// Whether `p` lies in another copy of the shim (in the recording copy, which knows them).
pub fn in_other_copy(p: *const c_void) -> bool {
    let p = p as usize;
    COPIES
        .get()
        .is_some_and(|c| c.others.iter().any(|&(_, lo, hi)| (lo..hi).contains(&p)))
}

/// Whether another copy of the shim records this process, and this one only passes calls on.
#[inline]
pub fn passive() -> bool {
    ROLE.load(Ordering::Relaxed) == PASSIVE
}

/// Maps the marker page and remembers the pid, and how a child made without fork() adopts the
/// state. Called by the recording copy's constructor (or `cudaleak_attach`).
pub fn init(adoption: Adoption) {
    let _ = ADOPTION.set(adoption);
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
            // Runs inside a hook: a panic must not unwind into the program, nor leave the
            // other threads waiting for an adoption that never ends. (`init` set the adoption
            // before the marker could be wiped: without one there is nothing to wait for.)
            let Some(a) = ADOPTION.get() else {
                mark.store(LIVE, Ordering::Release);
                return true;
            };
            if std::panic::catch_unwind(a.adopt).is_err() {
                (a.stop)(
                    "an internal error (panic) while a child made without fork() took over the \
                     state",
                );
                mark.store(LIVE, Ordering::Release);
            }
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
            if let Some(a) = ADOPTION.get() {
                (a.stop)(
                    "a child made without fork() on a kernel without MADV_WIPEONFORK, found only \
                     at exit: its own blocks could not be told from its parent's, so none are \
                     listed",
                );
            }
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
    mark().store(LIVE, Ordering::Release);
}

/// The process made a call the dump counts. The first one prints, once per process (a forked
/// child only if its parent had not), what the shim has to say about its setup: problems with
/// the CUDALEAK_* variables and other copies of the shim. A process that never uses CUDA (a
/// shell the program runs) says nothing.
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
    let n = c.others.len();
    if n == 0 {
        return String::new();
    }
    let paths: Vec<&str> = c.others.iter().map(|(p, _, _)| p.as_str()).collect();
    format!(
        "cudaleak: {} copies of the shim are loaded; this one records ({}), {} every call through ({})\n",
        n + 1,
        c.own,
        if n == 1 { "the other passes" } else { "the others pass" },
        paths.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copies(others: &[&str]) -> Copies {
        Copies {
            own: "/a/libcudaleak.so".into(),
            others: others.iter().map(|s| (s.to_string(), 0, 0)).collect(),
        }
    }

    #[test]
    fn the_copies_line_names_every_copy() {
        assert_eq!(copies_line(&copies(&[])), "");
        assert_eq!(
            copies_line(&copies(&["/b/libcudaleak.so"])),
            "cudaleak: 2 copies of the shim are loaded; this one records (/a/libcudaleak.so), \
             the other passes every call through (/b/libcudaleak.so)\n"
        );
        assert_eq!(
            copies_line(&copies(&["/b/x.so", "/c/y.so"])),
            "cudaleak: 3 copies of the shim are loaded; this one records (/a/libcudaleak.so), \
             the others pass every call through (/b/x.so, /c/y.so)\n"
        );
    }

    fn note(name: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
        let pad = |v: &mut Vec<u8>| v.resize(v.len().div_ceil(align) * align, 0);
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(kind.to_ne_bytes());
        v.extend(name);
        pad(&mut v);
        v.extend(desc);
        pad(&mut v);
        v
    }

    #[test]
    fn the_mark_is_found_among_other_notes_and_nowhere_else() {
        let build_id = note(b"GNU\0", 3, &[0xab; 20], 4);
        let mark = note(MARK_NAME, MARK_TYPE, &1u32.to_ne_bytes(), 4);
        assert!(carries_mark(&[build_id.clone(), mark.clone()].concat(), 4));
        assert!(carries_mark(&mark, 4));
        assert!(!carries_mark(&build_id, 4));
        assert!(
            !carries_mark(&note(MARK_NAME, 1, &[], 4), 4),
            "another type"
        );
        assert!(!carries_mark(&note(b"cudaleek\0", MARK_TYPE, &[], 4), 4));
        assert!(!carries_mark(&mark[..14], 4), "cut short");
        let property = note(b"GNU\0", 5, &[0; 12], 8);
        let mark8 = note(MARK_NAME, MARK_TYPE, &[1, 0, 0, 0], 8);
        assert!(carries_mark(&[property, mark8].concat(), 8));
        // What the compiler laid out is what is looked for.
        // SAFETY: MARK_NOTE is a plain repr(C) value of that many bytes.
        let ours = unsafe {
            std::slice::from_raw_parts(
                (&MARK_NOTE as *const MarkNote).cast::<u8>(),
                std::mem::size_of::<MarkNote>(),
            )
        };
        assert_eq!(ours, &mark[..]);
    }
}
