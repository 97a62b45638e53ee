//! The one owner of global state and its lifecycle: created once by the constructor, read by
//! every hook through [`recording`], stopped for good if recording ever fails.
#![deny(unsafe_code)]

use std::borrow::Cow;
use std::ffi::OsString;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::config::Config;
use crate::graphs::Graphs;
use crate::lock::ForkLocked;
use crate::stack::Interner;
use crate::table::Table;

pub struct State {
    pub config: Config,
    pub table: Table,
    pub stacks: Interner,
    /// Stacks with Python frames: `[native stack id, Python frames…]` (see `stack::with_python`).
    pub mixed: Interner,
    /// The Python code objects captures met.
    pub python: crate::python::Registry,
    pub graphs: Graphs,
    /// Library handles and the blocks they own.
    pub handles: crate::handles::Handles,
    /// `clock::coarse_ms()` when the shim started.
    pub start_ms: u64,
    pub start_unix_ms: AtomicU64,
    /// Snapshots written so far.
    pub snapshots: AtomicU64,
    /// The parent's pid in a forked child, else 0.
    pub forked_from: AtomicU32,
    /// Why recording stopped early, if it did.
    pub stopped: OnceLock<String>,
    /// Held while a dump is written, so a snapshot and the final dump never overlap; true once
    /// the final dump (exit or signal) has begun: no snapshot starts after it, so none can be cut
    /// off half-written by the process ending.
    pub dumping: crate::lock::Mutex<bool>,
    /// What `cudaleak attach` did, for the dumps (nothing under LD_PRELOAD).
    pub attached: Attached,
}

/// What `cudaleak attach` did, as the dumps say it: written by `attach`, read by `dump`.
#[derive(Default)]
pub struct Attached {
    /// When the latest attach began; 0 when the shim was not attached.
    pub unix_ms: AtomicU64,
    /// Pointers the attach replaced: import slots, and entries of the runtime's driver tables.
    pub import_slots: AtomicU64,
    pub table_slots: AtomicU64,
    /// The dump directory of an attach after the first (the state's configuration is the
    /// first's).
    pub output: std::sync::Mutex<Option<OsString>>,
}

impl Attached {
    /// What the dump says about the attach, once attached.
    pub fn info(&self) -> Option<cudaleak_format::AttachInfo> {
        let unix_ms = self.unix_ms.load(Ordering::Relaxed);
        if unix_ms == 0 {
            return None;
        }
        Some(cudaleak_format::AttachInfo {
            route: "pointers".into(),
            unix_ms,
            import_slots: self.import_slots.load(Ordering::Relaxed),
            table_slots: self.table_slots.load(Ordering::Relaxed),
        })
    }

    /// The configuration dumps are written under: the state's, with the dump directory of the
    /// latest attach when that is not the first.
    pub fn config<'c>(&self, state: &'c Config) -> Cow<'c, Config> {
        match self.output.lock().ok().and_then(|o| o.clone()) {
            Some(output) => Cow::Owned(Config {
                output: Some(output),
                ..state.clone()
            }),
            None => Cow::Borrowed(state),
        }
    }
}

/// What a child made without fork() does with a part of the state, whose lock a thread of the
/// parent may have held at the fork ([`State::reclaim_locks`]).
#[derive(Clone, Copy)]
enum InRawChild {
    /// Its locks reclaimed; one found held is no loss (the dump lock guards one flag, which the
    /// child resets: the parent's worker holds it for a whole snapshot).
    Reset,
    /// Left behind whole, unread and unfreed (the table: the child starts with none of it).
    LeftBehind,
    /// Its locks reclaimed; one found held means what the child keeps of it was dropped unread.
    Kept,
}

static STATE: OnceLock<State> = OnceLock::new();
/// OFF until initialised, and for good once stopped or disabled; ON and PAUSED switch back and
/// forth through [`set_paused`].
static RECORDING: AtomicU8 = AtomicU8::new(OFF);
const OFF: u8 = 0;
const ON: u8 = 1;
const PAUSED: u8 = 2;

/// Builds the state from the environment. Called once, from the constructor.
pub fn init(config: Config) -> &'static State {
    let enabled = !config.disabled;
    let state = STATE.get_or_init(|| State {
        config,
        table: Table::default(),
        stacks: Interner::default(),
        mixed: Interner::default(),
        python: crate::python::Registry::default(),
        graphs: Graphs::default(),
        handles: crate::handles::Handles::default(),
        start_ms: crate::clock::coarse_ms(),
        start_unix_ms: AtomicU64::new(crate::clock::unix_ms()),
        snapshots: AtomicU64::new(0),
        forked_from: AtomicU32::new(0),
        stopped: OnceLock::new(),
        dumping: crate::lock::Mutex::new(false),
        attached: Attached::default(),
    });
    crate::python::watch::forget_in(&state.python);
    RECORDING.store(if enabled { ON } else { OFF }, Ordering::Release);
    state
}

/// The state, while the shim is recording (in a child made without fork(), once the child has
/// adopted it: `process::settle`).
#[inline]
pub fn recording() -> Option<&'static State> {
    if RECORDING.load(Ordering::Acquire) == ON && crate::process::settle() {
        STATE.get()
    } else {
        None
    }
}

/// The state, recording or not (dumps are still written after recording stopped).
pub fn get() -> Option<&'static State> {
    STATE.get()
}

/// Runs `f`, and if it panics, stops recording instead of letting the panic reach the host.
pub fn shield<R>(f: impl FnOnce() -> R) -> Option<R> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(_) => {
            stop("an internal error (panic) in the shim; later calls were not recorded");
            None
        }
    }
}

/// Stops recording for the rest of the process; the dump will say why.
pub fn stop(reason: &str) {
    RECORDING.store(OFF, Ordering::Release);
    if let Some(s) = STATE.get() {
        let _ = s.stopped.set(reason.to_string());
    }
}

/// Pauses or resumes recording; never turns on a shim that is off (stopped, disabled, not yet
/// initialised). Returns whether it was recording before.
pub fn set_paused(paused: bool) -> bool {
    let (from, to) = if paused { (ON, PAUSED) } else { (PAUSED, ON) };
    match RECORDING.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire) {
        Ok(previous) | Err(previous) => previous == ON,
    }
}

impl State {
    /// Every part of the state a fork holds, in the order it takes them, and what a child made
    /// without fork() does with each ([`State::reclaim_locks`]). The dump lock first: a dump
    /// holds it while it takes the table's locks.
    fn fork_parts(&self) -> [(&dyn ForkLocked, InRawChild); 7] {
        [
            (&self.dumping, InRawChild::Reset),
            (&self.table, InRawChild::LeftBehind),
            (&self.stacks, InRawChild::Kept),
            (&self.mixed, InRawChild::Kept),
            (&self.python, InRawChild::Kept),
            (&self.graphs, InRawChild::Kept),
            (&self.handles, InRawChild::Kept),
        ]
    }

    /// Takes every lock of the state and keeps it (before fork).
    pub fn lock_all(&self) {
        for (part, _) in self.fork_parts() {
            part.lock_all();
        }
    }

    /// Releases what [`State::lock_all`] took.
    ///
    /// # Safety
    /// Only after `lock_all`, on the thread that called it (or its forked copy).
    #[allow(unsafe_code)]
    pub unsafe fn unlock_all(&self) {
        for (part, _) in self.fork_parts() {
            // SAFETY: per the contract, `lock_all` took every lock of every part.
            unsafe { part.unlock_all() };
        }
    }

    /// In a child made without fork(), where no thread can be inside the state: makes every
    /// lock usable again (see `lock::reclaim`) and leaves the parent's table behind, unfreed
    /// (`lock::abandon`). True if a lock of what the child keeps (interned stacks, Python code
    /// objects, graphs, handles) was held at the fork, by a thread of the parent: then what it
    /// guarded was dropped unread, and ids the child's threads cached may name nothing.
    pub fn reclaim_locks(&self) -> bool {
        let mut lost = false;
        for (part, then) in self.fork_parts() {
            match then {
                InRawChild::Reset => {
                    part.reclaim_all();
                }
                InRawChild::LeftBehind => {
                    part.abandon_all();
                }
                InRawChild::Kept => lost |= part.reclaim_all(),
            }
        }
        lost
    }

    /// In a forked child of `parent`: an empty table, a new start, the parent remembered.
    pub fn reset_for_child(&self, parent: u32) {
        *self.dumping.lock() = false;
        self.table.clear();
        self.handles.clear();
        self.snapshots.store(0, Ordering::Relaxed);
        self.start_unix_ms
            .store(crate::clock::unix_ms(), Ordering::Relaxed);
        self.forked_from.store(parent, Ordering::Relaxed);
    }

    /// One sequence for allocations, frees and events, so their order can be told apart (kept
    /// by the table, beside the counters every call updates).
    pub fn next_seq(&self) -> u64 {
        self.table.next_seq()
    }

    pub fn elapsed_ms(&self) -> u32 {
        let ms = crate::clock::coarse_ms().saturating_sub(self.start_ms);
        ms.min(u64::from(u32::MAX)) as u32
    }
}
