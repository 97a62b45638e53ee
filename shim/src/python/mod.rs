//! The Python stack of the allocating thread, read from CPython's own structures — a guest's
//! house, entered read-only: no lock of the interpreter is taken (not the GIL: `ctypes.CDLL` and
//! PyTorch release it before reaching us), no reference count changes, nothing in the interpreter
//! is called that allocates, caches or mutates. Only this thread's frame chain is read, which
//! cannot change while the thread is inside the hook.
//!
//! **Every read of the interpreter's memory can fail without faulting** ([`memory`]: a
//! `process_vm_readv` of this process). A thread state can be freed under a thread that is inside
//! a hook — `Py_FinalizeEx` deletes the daemon threads' states while their thread-local pointers
//! still name them — so no pointer taken from the interpreter is ever dereferenced directly: a
//! freed or unmapped structure ends the walk, not the host. Reads are batched: the thread state
//! once, frames through a window of up to 2 KiB (a thread's frames lie next to each other on its
//! data stack), the code objects of up to eight frames in one system call, remembered for the
//! rest of the capture; and each thread's [`Plan`] reads everything its last capture read in one
//! system call when the next starts, so a capture in an allocation loop costs one. The C-stack
//! frames of 3.11+ are on the calling thread's own live stack and are copied directly.
//!
//! The thread state comes from `PyGILState_GetThisThreadState()` (a thread-local read, set for
//! every thread Python knows, whether it holds the GIL or not), after `Py_IsInitialized()` and
//! `Py_IsFinalizing()` (`_Py_IsFinalizing()` before 3.13): a runtime that has begun to finalize
//! is not read at all. A thread state freed between that check and the reads is what the
//! fallible reads are for. These functions and the version are looked up once, lazily, with
//! `dlsym(RTLD_DEFAULT)`: a program without Python pays one failed lookup. The layout is the
//! hand-written table of the version (layout.rs), overridden on 3.13+ by the offsets the
//! interpreter publishes for tools (`_PyRuntime.debug_offsets`, debug_offsets.rs). Every object
//! is checked for its type (`PyCode_Type`, `PyUnicode_Type`, `PyBytes_Type`) before its fields
//! are used, and walks are bounded.
//!
//! A code object's names and line table are copied once, when a capture first meets it (the
//! [`Registry`]); a capture itself records (code, instruction offset) pairs and the line is
//! decoded from the copy at dump time.

pub mod debug_offsets;
pub mod layout;
mod linetable;
pub mod memory;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::lock::Mutex;
use cudaleak_format::{Frame, FrameKind, Hex};

use crate::real;
use layout::{FirstFrame, Instr, Layout, LineFormat};
use memory::Fields;

/// The deepest Python stack `CUDALEAK_PY_DEPTH` may ask for.
pub const MAX_DEPTH: usize = 256;
/// Longest name or file name copied, in characters.
const MAX_NAME_CHARS: usize = 4096;
/// Largest line table copied.
const MAX_LINETABLE: usize = 1 << 20;
/// The interpreter's frame-evaluation function: where Python frames stand in a native stack.
pub const EVAL_FRAME_FUNCTION: &str = "_PyEval_EvalFrameDefault";

/// The most of a thread state, a frame and a code object header a capture copies; a layout whose
/// fields lie further gets no Python frames.
const TSTATE_BUF: usize = 256;
const FRAME_BUF: usize = 128;
const CODE_BUF: usize = 256;
/// Frames read at once through [`Window`]: from the frame down to its page's start, this much at
/// most (a caller's frame lies below its callee's on the data stack, 3.11+; 3.9's and 3.10's
/// frames are objects of their own, read one at a time).
const WINDOW: usize = 2048;
/// Frames whose code objects are read in one system call.
const BATCH: usize = 8;
/// What a thread's [`Plan`] holds: ranges, and bytes in all.
const PLAN_RANGES: usize = memory::MAX_SCATTER;
const PLAN_BYTES: usize = 8192;

/// What was found in the process, once.
struct Runtime {
    layout: Layout,
    is_initialized: unsafe extern "C" fn() -> c_int,
    /// `Py_IsFinalizing` (3.13+) or `_Py_IsFinalizing` (3.9–3.12), where exported.
    is_finalizing: Option<unsafe extern "C" fn() -> c_int>,
    this_thread_state: unsafe extern "C" fn() -> *mut c_void,
    code_type: usize,
    unicode_type: usize,
    bytes_type: usize,
    /// Bytes of a thread state and of a frame copied: up to the last field read.
    tstate_span: usize,
    frame_span: usize,
    /// The part of a code object copied: `[code + OB_TYPE, code + code_end)`.
    code_end: usize,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static RESOLVED: AtomicU8 = AtomicU8::new(UNRESOLVED);
const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const DONE: u8 = 2;

/// The interpreter, if the process has one of a known version. Never blocks: a thread that
/// arrives while another resolves goes without Python frames this once.
fn runtime() -> Option<&'static Runtime> {
    match RESOLVED.load(Ordering::Acquire) {
        DONE => RUNTIME.get(),
        UNRESOLVED => {
            if RESOLVED
                .compare_exchange(UNRESOLVED, RESOLVING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return None;
            }
            if let Some(r) = resolve() {
                let _ = RUNTIME.set(r);
            }
            RESOLVED.store(DONE, Ordering::Release);
            RUNTIME.get()
        }
        _ => None,
    }
}

/// Whether the process runs a CPython this module knows (resolved at the first call).
pub fn present() -> bool {
    runtime().is_some()
}

fn symbol(name: &CStr) -> usize {
    let p = real::lookup(std::ptr::null_mut(), name);
    if p.is_null() {
        // SAFETY: dlerror only reads and clears this thread's error message: ours, not the
        // program's, is what a later dlerror() would otherwise see.
        unsafe { libc::dlerror() };
    }
    p as usize
}

/// The interpreter's `major.minor`: `Py_Version` (3.11+), else the text `Py_GetVersion()` makes.
fn version() -> Option<(u32, u32)> {
    let hex = symbol(c"Py_Version");
    if hex != 0 {
        // Py_Version is a `const unsigned long` (3.11+).
        return Some(layout::from_hex_version(memory::read::<u64>(hex)?));
    }
    let get = symbol(c"Py_GetVersion");
    if get == 0 {
        return None;
    }
    // SAFETY: `const char *Py_GetVersion(void)` formats constants into a static buffer and
    // returns it; it neither allocates nor needs the GIL.
    let text = unsafe {
        let f: unsafe extern "C" fn() -> *const c_char = std::mem::transmute(get);
        f() as usize
    };
    let mut buf = [0u8; 16];
    memory::read_into(text, &mut buf).then_some(())?;
    layout::parse_version(&buf)
}

/// How much of a thread state, a frame and a code object `l` needs copied, if each fits.
fn spans(l: &Layout) -> Option<(usize, usize, usize)> {
    let tstate = match l.first_frame {
        FirstFrame::Direct(o) => o,
        FirstFrame::ThroughCFrame { cframe, .. } => cframe,
    }
    .max(l.tstate_thread_id)
        + 8;
    let instr = match l.frame.instr {
        Instr::LastiBytes(o) | Instr::LastiUnits(o) => o + 4,
        Instr::Pointer(o) => o + 8,
    };
    let frame = [
        l.frame.back + 8,
        l.frame.code + 8,
        instr,
        l.frame.owner.map_or(0, |o| o + 1),
        l.frame.is_entry.map_or(0, |o| o + 1),
    ]
    .into_iter()
    .max()?;
    let c = &l.code;
    let code = [
        layout::OB_TYPE + 8,
        c.filename + 8,
        c.name + 8,
        c.linetable + 8,
        c.firstlineno + 4,
        c.firsttraceable.map_or(0, |o| o + 4),
    ]
    .into_iter()
    .max()?;
    (tstate <= TSTATE_BUF && frame <= FRAME_BUF && code - layout::OB_TYPE <= CODE_BUF)
        .then_some((tstate, frame, code))
}

/// The version's table, with what the interpreter publishes of its own layout (3.13+) in place
/// of the table's numbers where both exist.
fn layout_of(version: (u32, u32)) -> Option<Layout> {
    let table = layout::for_version(version.0, version.1)?;
    if !debug_offsets::known(version.0, version.1) {
        return Some(*table);
    }
    let runtime = symbol(c"_PyRuntime");
    let mut bytes = [0u8; debug_offsets::READ];
    let published = (runtime != 0 && memory::read_into(runtime, &mut bytes))
        .then(|| debug_offsets::layout(&bytes, table))
        .flatten()
        .filter(|l| spans(l).is_some());
    Some(published.unwrap_or(*table))
}

fn resolve() -> Option<Runtime> {
    let is_initialized = symbol(c"Py_IsInitialized");
    if is_initialized == 0 {
        return None; // no Python in this process: the one failed lookup
    }
    if let Err(errno) = memory::available() {
        let why = match errno {
            0 => "a read of its own memory came back short".to_string(),
            e => std::io::Error::from_raw_os_error(e).to_string(),
        };
        crate::stdio::say(&format!(
            "cudaleak: process_vm_readv cannot read this process's memory ({why}): Python frames \
             are not recorded, native stacks are\n"
        ));
        return None;
    }
    let this_thread_state = symbol(c"PyGILState_GetThisThreadState");
    let code_type = symbol(c"PyCode_Type");
    let unicode_type = symbol(c"PyUnicode_Type");
    let bytes_type = symbol(c"PyBytes_Type");
    if this_thread_state == 0 || code_type == 0 || unicode_type == 0 || bytes_type == 0 {
        return None;
    }
    let layout = layout_of(version()?)?;
    let (tstate_span, frame_span, code_end) = spans(&layout)?;
    let is_finalizing = match symbol(c"Py_IsFinalizing") {
        0 => symbol(c"_Py_IsFinalizing"),
        f => f,
    };
    // SAFETY: the interpreter's exported functions of these signatures: `int (void)` and
    // `PyThreadState *(void)`.
    let (is_initialized, is_finalizing, this_thread_state) = unsafe {
        (
            std::mem::transmute::<usize, unsafe extern "C" fn() -> c_int>(is_initialized),
            (is_finalizing != 0).then(|| {
                std::mem::transmute::<usize, unsafe extern "C" fn() -> c_int>(is_finalizing)
            }),
            std::mem::transmute::<usize, unsafe extern "C" fn() -> *mut c_void>(this_thread_state),
        )
    };
    Some(Runtime {
        layout,
        is_initialized,
        is_finalizing,
        this_thread_state,
        code_type,
        unicode_type,
        bytes_type,
        tstate_span,
        frame_span,
        code_end,
    })
}

/// A pointer worth a read: not null, not in the first page, aligned, in user space. Not a
/// promise that it can be read: [`memory`] decides that.
fn plausible(p: usize, align: usize) -> bool {
    p >= 4096 && p.is_multiple_of(align) && p < (1usize << 47)
}

/// One Python frame of a capture: the code's index in the [`Registry`], the instruction's byte
/// offset (negative: not started), and whether it is the outermost frame of one run of the
/// evaluation loop (one native `_PyEval_EvalFrameDefault` frame), packed into a word so that a
/// stack with Python frames interns as a plain slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyFrame {
    pub code: u32,
    pub offset: i32,
    pub ends_eval: bool,
}

impl PyFrame {
    pub fn pack(self) -> usize {
        (self.code as usize) << 32
            | ((self.offset as u32 as usize) & 0x7fff_ffff) << 1
            | usize::from(self.ends_eval)
    }
    pub fn unpack(w: usize) -> PyFrame {
        let raw = ((w >> 1) & 0x7fff_ffff) as u32;
        // Sign-extend the 31-bit offset.
        let offset = ((raw << 1) as i32) >> 1;
        PyFrame {
            code: (w >> 32) as u32,
            offset,
            ends_eval: w & 1 == 1,
        }
    }
}

/// What identifies a code object while it lives, and tells a new one at a reused address apart:
/// its address, its name objects, its line table object and its first line.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
struct CodeKey {
    code: usize,
    filename: usize,
    name: usize,
    linetable: usize,
    first_line: i32,
}

/// A code object's names and line table, copied when first met.
struct Code {
    filename: String,
    function: String,
    first_line: i32,
    format: LineFormat,
    table: Box<[u8]>,
}

#[derive(Default)]
struct Codes {
    ids: HashMap<CodeKey, u32>,
    codes: Vec<Code>,
}

/// Every code object a capture has met, by index; shared by all threads.
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Codes>,
}

const SEEN_SLOTS: usize = 64;

/// A code object this thread met, and its registry index.
#[derive(Clone, Copy, Default)]
struct Seen {
    key: CodeKey,
    index: u32,
}

const NOT_SEEN: Seen = Seen {
    key: CodeKey {
        code: 0,
        filename: 0,
        name: 0,
        linetable: 0,
        first_line: 0,
    },
    index: 0,
};

thread_local! {
    /// The code objects this thread met last, so a capture takes the registry's lock only for a
    /// code object it has not seen lately. Plain `Copy` data: no destructor to register.
    static SEEN: RefCell<[Seen; SEEN_SLOTS]> = const { RefCell::new([NOT_SEEN; SEEN_SLOTS]) };
}

/// Writes the calling thread's Python frames, innermost first, into `out` (at most `out.len()`)
/// and returns how many. 0 when the process has no (known) Python, the interpreter is not
/// running or is finalizing, or this thread has no thread state.
pub fn capture(registry: &Registry, out: &mut [usize]) -> usize {
    if out.is_empty() {
        return 0;
    }
    let Some(rt) = runtime() else { return 0 };
    // SAFETY: argument-less reads of the interpreter's static globals and this thread's TLS:
    // Py_IsInitialized reads `_PyRuntime.initialized`, (_)Py_IsFinalizing `_PyRuntime._finalizing`;
    // PyGILState_GetThisThreadState reads the gilstate thread-local key (valid while the runtime
    // is initialised, hence the order). None of them allocates, locks or needs the GIL.
    let tstate = unsafe {
        if (rt.is_initialized)() == 0 {
            return 0;
        }
        if let Some(finalizing) = rt.is_finalizing {
            if finalizing() != 0 {
                return 0;
            }
        }
        (rt.this_thread_state)() as usize
    };
    if !plausible(tstate, 8) {
        return 0;
    }
    let mut with_plan = |plan: Option<&mut Plan>| {
        let mut none: [Seen; 0] = [];
        let mut reader = Reader { plan };
        if let Some(plan) = reader.plan.as_deref_mut() {
            plan.prefetch();
        }
        let n = SEEN
            .try_with(|seen| {
                let mut guard = seen.try_borrow_mut().ok();
                let seen = guard.as_deref_mut().map_or(&mut none[..], |s| &mut s[..]);
                walk(rt, registry, seen, &mut reader, tstate, out)
            })
            .unwrap_or(0);
        if let Some(plan) = reader.plan {
            plan.finish();
        }
        n
    };
    let mut n = None;
    let _ = PLAN.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            n = Some(with_plan(Some(p.get_or_insert_with(Plan::new))));
        }
    });
    match n {
        Some(n) => n,
        None => with_plan(None),
    }
}

/// The ranges the last capture of this thread read, read again all at once, in one system call,
/// when the next capture starts: an allocation loop meets the same thread state, frames and code
/// objects each time, and then every read of the walk is served from this copy. Only *where* to
/// read is remembered; what is read is fresh, read during this capture. A range not in the plan
/// is read on its own, and the plan learns it for the next capture.
struct Plan {
    /// This thread's stack: from a local of the walk's up to its top, it is this thread's own
    /// and live, and is copied without a system call (the C-stack frames of 3.11+: `_PyCFrame`,
    /// the entry frame of each evaluation-loop run) — when the walk runs on it, not on a signal
    /// stack or a fiber's, where the addresses between could be anything.
    stack: std::ops::Range<usize>,
    ranges: [(usize, usize); PLAN_RANGES],
    n: usize,
    /// Where each range's copy starts in `buf`; `usize::MAX` where it could not be read.
    at: [usize; PLAN_RANGES],
    buf: [u8; PLAN_BYTES],
    /// The ranges this capture asked for, the next capture's plan.
    next: [(usize, usize); PLAN_RANGES],
    next_n: usize,
    next_bytes: usize,
}

impl Plan {
    fn new() -> Box<Plan> {
        Box::new(Plan {
            stack: crate::stack::thread_stack(),
            ranges: [(0, 0); PLAN_RANGES],
            n: 0,
            at: [usize::MAX; PLAN_RANGES],
            buf: [0; PLAN_BYTES],
            next: [(0, 0); PLAN_RANGES],
            next_n: 0,
            next_bytes: 0,
        })
    }

    /// Reads every range of the plan, in one system call.
    fn prefetch(&mut self) {
        let whole = memory::read_scattered(&self.ranges[..self.n], &mut self.buf);
        let mut offset = 0;
        for (i, &(_, len)) in self.ranges[..self.n].iter().enumerate() {
            self.at[i] = if i < whole { offset } else { usize::MAX };
            offset += len;
        }
        self.next_n = 0;
        self.next_bytes = 0;
    }

    /// The copy of `[addr, addr + len)` if one range of the plan holds it.
    fn get(&self, addr: usize, len: usize) -> Option<&[u8]> {
        let end = addr.checked_add(len)?;
        self.ranges[..self.n]
            .iter()
            .zip(&self.at)
            .find(|((a, l), &at)| at != usize::MAX && *a <= addr && end <= a + l)
            .map(|((a, _), &at)| &self.buf[at + (addr - a)..at + (end - a)])
    }

    /// Remembers a range this capture needed.
    fn note(&mut self, addr: usize, len: usize) {
        if self.next_n < PLAN_RANGES
            && self.next_bytes + len <= PLAN_BYTES
            && !self.next[..self.next_n].contains(&(addr, len))
        {
            self.next[self.next_n] = (addr, len);
            self.next_n += 1;
            self.next_bytes += len;
        }
    }

    /// The ranges this capture needed become the next capture's plan, those that overlap or
    /// nearly touch merged into one (the bytes between lie on a page one of them touches, so the
    /// merged read fails only where one of them would).
    fn finish(&mut self) {
        const GAP: usize = 256;
        let next = &mut self.next[..self.next_n];
        next.sort_unstable();
        let mut n = 0;
        let mut bytes = 0;
        for &(addr, len) in next.iter() {
            if n > 0 {
                let (a, l) = self.ranges[n - 1];
                let end = (addr + len).max(a + l);
                if addr <= a + l + GAP && bytes - l + (end - a) <= PLAN_BYTES {
                    bytes += (end - a) - l;
                    self.ranges[n - 1] = (a, end - a);
                    continue;
                }
            }
            if bytes + len <= PLAN_BYTES {
                self.ranges[n] = (addr, len);
                bytes += len;
                n += 1;
            }
        }
        self.n = n;
    }
}

/// Every read of a walk: from this thread's [`Plan`] where it holds the range, else with a
/// system call of its own. Without a plan (its thread-local storage gone), every read is its own.
struct Reader<'a> {
    plan: Option<&'a mut Plan>,
}

impl Reader<'_> {
    fn read_into(&mut self, addr: usize, out: &mut [u8]) -> bool {
        if let Some(stack) = self.plan.as_deref().map(|p| p.stack.clone()) {
            let here = 0u8;
            let live = std::ptr::addr_of!(here) as usize;
            if stack.contains(&live)
                && addr >= live
                && addr
                    .checked_add(out.len())
                    .is_some_and(|end| end <= stack.end)
            {
                // SAFETY: [addr, addr + len) lies between a local of this function and the top
                // of this thread's stack: the frames of this thread's callers, mapped while it
                // runs, written by no other thread.
                unsafe {
                    std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len())
                };
                return true;
            }
        }
        if let Some(plan) = self.plan.as_deref_mut() {
            plan.note(addr, out.len());
            if let Some(copy) = plan.get(addr, out.len()) {
                out.copy_from_slice(copy);
                return true;
            }
        }
        memory::read_into(addr, out)
    }

    fn read<T: memory::Plain>(&mut self, addr: usize) -> Option<T> {
        let mut buf = [0u8; 8];
        let buf = &mut buf[..std::mem::size_of::<T>()];
        self.read_into(addr, buf).then(|| T::from_bytes(buf))
    }

    /// Reads `ranges` into `out` one after another, as [`memory::read_scattered`], but every
    /// range: `valid[i]` says whether range `i` was read whole.
    fn read_all(&mut self, ranges: &[(usize, usize)], out: &mut [u8], valid: &mut [bool]) {
        let mut missing = [(0usize, 0usize, 0usize); BATCH]; // (index, addr, len)
        let mut m = 0;
        let mut offset = 0;
        for (i, &(addr, len)) in ranges.iter().enumerate() {
            let copy = self.plan.as_deref_mut().and_then(|plan| {
                plan.note(addr, len);
                plan.get(addr, len)
            });
            match copy {
                Some(copy) => {
                    out[offset..offset + len].copy_from_slice(copy);
                    valid[i] = true;
                }
                None if m < BATCH => {
                    missing[m] = (i, addr, len);
                    m += 1;
                }
                None => {}
            }
            offset += len;
        }
        // One system call for what the plan did not hold (more only past a range that fails:
        // the kernel stops there). Each range's copy goes to its own place in `out`.
        let mut want = [(0usize, 0usize); BATCH];
        for (w, &(_, addr, len)) in want.iter_mut().zip(&missing[..m]) {
            *w = (addr, len);
        }
        let total: usize = want[..m].iter().map(|&(_, len)| len).sum();
        let mut tmp = [0u8; BATCH * CODE_BUF];
        if total > tmp.len() {
            return;
        }
        let mut j = 0;
        while j < m {
            let from: usize = want[..j].iter().map(|&(_, len)| len).sum();
            let whole = memory::read_scattered(&want[j..m], &mut tmp[from..total]);
            let mut at = from;
            for &(i, _, len) in &missing[j..j + whole] {
                let dest: usize = ranges[..i].iter().map(|&(_, l)| l).sum();
                out[dest..dest + len].copy_from_slice(&tmp[at..at + len]);
                valid[i] = true;
                at += len;
            }
            j += whole + 1; // the one after those read is the one that failed
        }
    }
}

thread_local! {
    /// This thread's [`Plan`], made at its first capture.
    static PLAN: RefCell<Option<Box<Plan>>> = const { RefCell::new(None) };
}

/// A frame as the walk first reads it; its code object is read with its batch's.
#[derive(Clone, Copy, Default)]
struct RawFrame {
    /// The entry frame of an evaluation-loop run (3.12+), not a Python frame.
    entry: bool,
    code: usize,
    /// `f_lasti`, or the instruction pointer (3.11+).
    instr: i64,
    owner: Option<u8>,
    ends_eval: bool,
}

/// Frames copied a window at a time: a thread's frames lie next to each other on its data stack
/// (3.11+), so one read usually serves several.
struct Window {
    base: usize,
    len: usize,
    /// [`WINDOW`] where frames share a data stack, else one frame's span.
    size: usize,
    buf: [u8; WINDOW],
}

impl Window {
    fn new(l: &Layout, frame_span: usize) -> Window {
        Window {
            base: 0,
            len: 0,
            size: if l.frame.owner.is_some() {
                WINDOW
            } else {
                frame_span
            },
            buf: [0; WINDOW],
        }
    }

    /// The `span` bytes at `addr`, copied from the window, which is read anew (from `addr` down
    /// to its page's start, at most [`WINDOW`] bytes) when they are not in it.
    fn get(&mut self, reader: &mut Reader, addr: usize, span: usize) -> Option<Fields<'_>> {
        let end = addr.checked_add(span)?;
        if addr < self.base || end > self.base + self.len {
            // Never below addr's own page: a page below may be unmapped, and the read would fail
            // for a frame that can be read.
            let start = (addr & !4095).max(end.saturating_sub(self.size));
            if !reader.read_into(start, &mut self.buf[..end - start]) {
                self.len = 0;
                return None;
            }
            (self.base, self.len) = (start, end - start);
        }
        let at = addr - self.base;
        Some(Fields(&self.buf[at..at + span]))
    }
}

/// What the walk needs of a code object, read once per capture.
#[derive(Clone, Copy, Default)]
struct CodeHeader {
    addr: usize,
    /// Read, and of `PyCode_Type`.
    valid: bool,
    key: CodeKey,
    firsttraceable: i32,
}

/// The code objects this capture has read: a recursion, or frames of one function in two
/// batches, read its code object once.
struct CodeHeaders {
    items: [CodeHeader; 2 * BATCH],
    len: usize,
    next: usize,
}

impl CodeHeaders {
    fn new() -> CodeHeaders {
        CodeHeaders {
            items: [CodeHeader::default(); 2 * BATCH],
            len: 0,
            next: 0,
        }
    }

    fn get(&self, code: usize) -> Option<&CodeHeader> {
        self.items[..self.len].iter().find(|h| h.addr == code)
    }

    fn insert(&mut self, h: CodeHeader) {
        self.items[self.next] = h;
        self.next = (self.next + 1) % self.items.len();
        self.len = (self.len + 1).min(self.items.len());
    }

    /// Reads the code objects of `frames` not read yet, in one system call (more only where one
    /// cannot be read: the kernel stops at it).
    fn fetch(&mut self, rt: &Runtime, reader: &mut Reader, frames: &[RawFrame]) {
        let mut want = [0usize; BATCH];
        let mut m = 0;
        for f in frames.iter().filter(|f| !f.entry) {
            if m < BATCH && self.get(f.code).is_none() && !want[..m].contains(&f.code) {
                want[m] = f.code;
                m += 1;
            }
        }
        let start = layout::OB_TYPE;
        let len = rt.code_end - start;
        let mut ranges = [(0usize, 0usize); BATCH];
        for (r, &code) in ranges.iter_mut().zip(&want[..m]) {
            *r = (code + start, len);
        }
        let mut buf = [0u8; BATCH * CODE_BUF];
        let mut valid = [false; BATCH];
        reader.read_all(&ranges[..m], &mut buf[..m * len], &mut valid[..m]);
        let c = &rt.layout.code;
        for (j, &code) in want[..m].iter().enumerate() {
            let f = Fields(&buf[j * len..(j + 1) * len]);
            let at = |o: usize| o - start;
            let key = CodeKey {
                code,
                filename: f.get(at(c.filename)).unwrap_or(0),
                name: f.get(at(c.name)).unwrap_or(0),
                linetable: f.get(at(c.linetable)).unwrap_or(0),
                first_line: f.get(at(c.firstlineno)).unwrap_or(0),
            };
            self.insert(CodeHeader {
                addr: code,
                valid: valid[j] && f.get::<usize>(0) == Some(rt.code_type),
                key,
                firsttraceable: c.firsttraceable.and_then(|o| f.get(at(o))).unwrap_or(0),
            });
        }
    }
}

/// The walk itself: `tstate` is this thread's `PyThreadState` as the interpreter gave it (perhaps
/// freed since: every read is fallible).
fn walk(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    reader: &mut Reader,
    tstate: usize,
    out: &mut [usize],
) -> usize {
    let l = &rt.layout;
    let mut t = [0u8; TSTATE_BUF];
    let t = &mut t[..rt.tstate_span];
    if !reader.read_into(tstate, t) {
        return 0;
    }
    let t = Fields(t);
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    // The thread state belongs to this thread, not to a thread that died before it.
    if t.get::<libc::c_ulong>(l.tstate_thread_id) != Some(me) {
        return 0;
    }
    let first = match l.first_frame {
        FirstFrame::Direct(o) => t.get::<usize>(o),
        FirstFrame::ThroughCFrame {
            cframe,
            current_frame,
        } => t
            .get::<usize>(cframe)
            .filter(|&c| plausible(c, 8))
            .and_then(|c| reader.read::<usize>(c + current_frame)),
    };
    let Some(mut frame) = first else { return 0 };
    let mut window = Window::new(l, rt.frame_span);
    let mut codes = CodeHeaders::new();
    let mut n = 0;
    // Bounded even if the chain were a cycle: skipped frames count too.
    let mut budget = out.len() * 4 + 16;
    let mut batch = [RawFrame::default(); BATCH];
    loop {
        // Up to BATCH frames, no more Python ones than `out` has room for.
        let (mut k, mut python) = (0, 0);
        let mut more = true;
        while k < BATCH && python < out.len() - n {
            if budget == 0 || !plausible(frame, 8) {
                more = false;
                break;
            }
            budget -= 1;
            let Some(f) = window.get(reader, frame, rt.frame_span) else {
                more = false;
                break;
            };
            let next = f.get::<usize>(l.frame.back).unwrap_or(0);
            let owner = l.frame.owner.and_then(|o| f.get::<u8>(o));
            let entry = matches!((owner, l.frame.owned_by_cstack), (Some(o), Some(e)) if o >= e);
            batch[k] = if entry {
                RawFrame {
                    entry,
                    ..RawFrame::default()
                }
            } else {
                python += 1;
                RawFrame {
                    entry,
                    code: f.get::<usize>(l.frame.code).unwrap_or(0) & !l.frame.code_tag_bits,
                    instr: match l.frame.instr {
                        Instr::LastiBytes(o) | Instr::LastiUnits(o) => {
                            i64::from(f.get::<i32>(o).unwrap_or(-1))
                        }
                        Instr::Pointer(o) => f.get::<usize>(o).unwrap_or(0) as i64,
                    },
                    owner,
                    ends_eval: match l.frame.is_entry {
                        Some(o) => f.get::<u8>(o).unwrap_or(0) != 0,
                        None => l.frame.owner.is_none(), // 3.9, 3.10: one run per frame
                    },
                }
            };
            k += 1;
            frame = next;
        }
        codes.fetch(rt, reader, &batch[..k]);
        for r in &batch[..k] {
            if r.entry {
                // The entry frame of an evaluation-loop run: the frames before it were that run's.
                if n > 0 {
                    out[n - 1] |= 1;
                }
                continue;
            }
            let Some(code) = codes
                .get(r.code)
                .filter(|c| c.valid && plausible(c.addr, 8))
            else {
                return n;
            };
            let Some(offset) = instruction_offset(l, r, code.addr) else {
                return n;
            };
            let incomplete = match (l.code.firsttraceable, r.owner) {
                (Some(_), Some(owner)) => {
                    owner != l.frame.owned_by_generator
                        && offset < 2 * i64::from(code.firsttraceable)
                }
                _ => false,
            };
            if incomplete {
                if r.ends_eval && n > 0 {
                    out[n - 1] |= 1;
                }
                continue;
            }
            let Some(index) = code_index(rt, registry, seen, &code.key) else {
                return n;
            };
            out[n] = PyFrame {
                code: index,
                offset: offset.clamp(-1, i64::from(i32::MAX >> 1)) as i32,
                ends_eval: r.ends_eval,
            }
            .pack();
            n += 1;
        }
        if !more || n == out.len() {
            return n;
        }
    }
}

/// The byte offset in the code's bytecode of the instruction `frame` executes (as
/// `PyFrame_GetLineNumber` computes it), or `None` if it points outside the code.
fn instruction_offset(l: &Layout, frame: &RawFrame, code: usize) -> Option<i64> {
    match l.frame.instr {
        Instr::LastiBytes(_) => Some(frame.instr),
        Instr::LastiUnits(_) => Some(if frame.instr < 0 {
            frame.instr
        } else {
            frame.instr * 2
        }),
        Instr::Pointer(_) => {
            let start = code + l.code.code_adaptive?;
            let offset = frame.instr.wrapping_sub(start as i64);
            // 2 MiB of bytecode is far beyond any real function; a larger value is garbage.
            (-2..1 << 21).contains(&offset).then_some(offset)
        }
    }
}

/// The registry index of the code object `key` names, copying its names and line table the
/// first time.
fn code_index(rt: &Runtime, registry: &Registry, seen: &mut [Seen], key: &CodeKey) -> Option<u32> {
    let code = key.code;
    let slot = (code >> 4 ^ code >> 10) % SEEN_SLOTS;
    if let Some(s) = seen.get(slot) {
        if s.key == *key {
            return Some(s.index);
        }
    }
    let index = {
        let mut codes = registry.inner.lock();
        match codes.ids.get(key) {
            Some(&i) => i,
            None => {
                let copy = copy_code(rt, key)?;
                let i = u32::try_from(codes.codes.len()).ok()?;
                codes.codes.push(copy);
                codes.ids.insert(*key, i);
                i
            }
        }
    };
    if let Some(s) = seen.get_mut(slot) {
        *s = Seen { key: *key, index };
    }
    Some(index)
}

fn copy_code(rt: &Runtime, key: &CodeKey) -> Option<Code> {
    Some(Code {
        filename: read_str(rt, key.filename)?,
        function: read_str(rt, key.name)?,
        first_line: key.first_line,
        format: rt.layout.code.line_format,
        table: read_bytes(rt, key.linetable).unwrap_or_default(),
    })
}

/// `len` bytes at `addr`, or `None` if any cannot be read.
fn read_vec(addr: usize, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; len];
    memory::read_into(addr, &mut v).then_some(v)
}

/// A `str` object's text, read from its compact representation (every string a code object
/// holds is compact); `None` for anything else, or what cannot be read.
fn read_str(rt: &Runtime, p: usize) -> Option<String> {
    let l = &rt.layout;
    if !plausible(p, 8) {
        return None;
    }
    // ob_type, length and state, in one read.
    let start = layout::OB_TYPE;
    let mut h = [0u8; layout::UNICODE_STATE + 4 - layout::OB_TYPE];
    memory::read_into(p + start, &mut h).then_some(())?;
    let h = Fields(&h);
    if h.get::<usize>(0)? != rt.unicode_type {
        return None;
    }
    let len = h.get::<isize>(layout::UNICODE_LENGTH - start)?;
    let state = h.get::<u32>(layout::UNICODE_STATE - start)?;
    let (kind, compact, ascii) = ((state >> 2) & 7, state >> 5 & 1 == 1, state >> 6 & 1 == 1);
    if !compact || len < 0 {
        return None;
    }
    let shown = (len as usize).min(MAX_NAME_CHARS);
    let mut s = if ascii {
        String::from_utf8_lossy(&read_vec(p + l.unicode_ascii_data, shown)?).into_owned()
    } else {
        let unit = match kind {
            1 | 2 | 4 => kind as usize,
            _ => return None,
        };
        let data = read_vec(p + l.unicode_compact_data, shown * unit)?;
        data.chunks_exact(unit)
            .map(|c| match unit {
                1 => u32::from(c[0]),
                2 => u32::from(u16::from_ne_bytes([c[0], c[1]])),
                _ => u32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
            })
            .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    };
    if shown < len as usize {
        s.push('…');
    }
    Some(s)
}

/// A `bytes` object's contents.
fn read_bytes(rt: &Runtime, p: usize) -> Option<Box<[u8]>> {
    if !plausible(p, 8) {
        return None;
    }
    let start = layout::OB_TYPE;
    let mut h = [0u8; layout::OB_SIZE + 8 - layout::OB_TYPE];
    memory::read_into(p + start, &mut h).then_some(())?;
    let h = Fields(&h);
    if h.get::<usize>(0)? != rt.bytes_type {
        return None;
    }
    let size = h.get::<isize>(layout::OB_SIZE - start)?;
    if !(0..=MAX_LINETABLE as isize).contains(&size) {
        return None;
    }
    Some(read_vec(p + layout::BYTES_SVAL, size as usize)?.into_boxed_slice())
}

impl Registry {
    /// The dump's frame for a captured Python frame.
    pub fn frame(&self, f: PyFrame) -> Frame {
        let codes = self.inner.lock();
        let code = codes.codes.get(f.code as usize);
        Frame {
            kind: Some(FrameKind::Python),
            ip: Hex(0),
            module: None,
            offset: u64::try_from(f.offset).ok().map(Hex),
            function: code.map(|c| c.function.clone()),
            file: code.map(|c| c.filename.clone()),
            line: code.and_then(|c| {
                let line =
                    linetable::line_of(c.format, &c.table, c.first_line, i64::from(f.offset))?;
                u32::try_from(line).ok()
            }),
        }
    }

    /// Takes the lock and keeps it (before fork). Pair with [`Registry::unlock`].
    pub fn lock(&self) {
        std::mem::forget(self.inner.lock());
    }

    /// Releases what [`Registry::lock`] took.
    ///
    /// # Safety
    /// The lock must be held by a [`Registry::lock`] call.
    pub unsafe fn unlock(&self) {
        // SAFETY: per the contract.
        unsafe { self.inner.force_unlock() };
    }
}

/// The stack the dump shows: the Python frames stand where the interpreter evaluated them.
///
/// Each native `_PyEval_EvalFrameDefault` frame, innermost first, is replaced by the Python
/// frames of one run of the evaluation loop (from 3.11 one run executes several Python frames:
/// a Python-to-Python call adds no native frame). The outermost evaluation frame present also
/// takes the runs left over (the native stack was cut by `CUDALEAK_DEPTH`); evaluation frames
/// left over (a run whose frames were not recorded) are dropped; a native stack without any
/// (not symbolised, or cut before the interpreter) gets the Python frames at its outer end.
pub fn splice(native: Vec<Frame>, python: &[(PyFrame, Frame)]) -> Vec<Frame> {
    let mut runs: Vec<&[(PyFrame, Frame)]> = python
        .split_inclusive(|(p, _)| p.ends_eval)
        .filter(|r| !r.is_empty())
        .collect();
    let evals: Vec<usize> = native
        .iter()
        .enumerate()
        .filter(|(_, f)| f.function.as_deref() == Some(EVAL_FRAME_FUNCTION))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::with_capacity(native.len() + python.len());
    let Some(&last_eval) = evals.last() else {
        out.extend(native);
        out.extend(python.iter().map(|(_, f)| f.clone()));
        return out;
    };
    for (i, f) in native.into_iter().enumerate() {
        if !evals.contains(&i) {
            out.push(f);
            continue;
        }
        let take = if i == last_eval {
            runs.len()
        } else {
            runs.len().min(1)
        };
        for run in runs.drain(..take) {
            out.extend(run.iter().map(|(_, f)| f.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_merges_ranges_that_nearly_touch_and_serves_reads_inside_them() {
        let mut plan = Plan::new();
        for (addr, len) in [
            (0x5000, 64),
            (0x1000, 16),
            (0x1010, 32),
            (0x1100, 8),
            (0x9000, 8),
        ] {
            plan.note(addr, len);
        }
        plan.note(0x1000, 16); // noted twice, planned once
        plan.finish();
        assert_eq!(
            &plan.ranges[..plan.n],
            &[(0x1000, 0x108), (0x5000, 64), (0x9000, 8)]
        );
        // Read: this test's own data, then two pages of which the first cannot be read.
        let data: Vec<u64> = (0..128).collect();
        let base = data.as_ptr() as usize;
        // SAFETY: a fresh anonymous mapping; its first page is made unreadable, its second
        // written; both unmapped at the end.
        let pages = unsafe {
            let m = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            assert_eq!(libc::mprotect(m, 4096, libc::PROT_NONE), 0);
            *(m as *mut u64).add(512) = 42;
            m as usize
        };
        assert!(base < pages, "the heap lies below the mappings");
        let mut plan = Plan::new();
        plan.note(pages + 4096, 8);
        plan.note(base, 64);
        plan.note(pages, 8);
        plan.note(base + 512, 8);
        plan.finish();
        assert_eq!(memory::available(), Ok(()));
        plan.prefetch();
        let word = |plan: &Plan, at: usize| {
            plan.get(at, 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        };
        assert_eq!(word(&plan, base + 8), Some(1));
        assert_eq!(word(&plan, base + 512), Some(64));
        assert_eq!(word(&plan, base + 60), None, "runs past its range");
        assert_eq!(word(&plan, pages), None, "unreadable");
        // In address order the unreadable page came first: the kernel stopped there, and the
        // page after it was not read.
        assert_eq!(word(&plan, pages + 4096), None);
        // A reader still reads it, on its own.
        let mut reader = Reader {
            plan: Some(&mut plan),
        };
        assert_eq!(reader.read::<u64>(pages + 4096), Some(42));
        assert_eq!(reader.read::<u64>(pages + 8), None);
        // SAFETY: unmapping what this test mapped.
        unsafe { libc::munmap(pages as *mut c_void, 8192) };
    }

    #[test]
    fn a_reader_copies_this_threads_live_stack_without_a_system_call() {
        let mut plan = Plan::new();
        assert!(
            plan.stack.start < plan.stack.end,
            "this thread's stack is known"
        );
        let here = [7u64, 8, 9];
        let mut reader = Reader {
            plan: Some(&mut plan),
        };
        assert_eq!(reader.read::<u64>(here.as_ptr() as usize + 8), Some(8));
        assert!(
            plan.next[..plan.next_n].is_empty(),
            "nothing noted for the next capture's system call"
        );
    }

    #[test]
    fn frames_pack_into_one_word_and_back() {
        for f in [
            PyFrame {
                code: 7,
                offset: 0x1c,
                ends_eval: true,
            },
            PyFrame {
                code: u32::MAX,
                offset: -1,
                ends_eval: false,
            },
            PyFrame {
                code: 0,
                offset: (1 << 30) - 1,
                ends_eval: true,
            },
        ] {
            assert_eq!(PyFrame::unpack(f.pack()), f);
        }
    }

    fn native(name: &str) -> Frame {
        Frame {
            function: Some(name.into()),
            ..Frame::default()
        }
    }

    fn py(name: &str, ends_eval: bool) -> (PyFrame, Frame) {
        let f = Frame {
            kind: Some(FrameKind::Python),
            function: Some(name.into()),
            ..Frame::default()
        };
        (
            PyFrame {
                code: 0,
                offset: 0,
                ends_eval,
            },
            f,
        )
    }

    fn names(frames: &[Frame]) -> Vec<&str> {
        frames
            .iter()
            .map(|f| f.function.as_deref().unwrap_or("?"))
            .collect()
    }

    #[test]
    fn each_eval_frame_takes_one_run_of_python_frames() {
        let stack = vec![
            native("ffi_call"),
            native(EVAL_FRAME_FUNCTION),
            native("PyObject_Vectorcall"),
            native(EVAL_FRAME_FUNCTION),
            native("main"),
        ];
        let python = [
            py("inner", false),
            py("middle", true),
            py("callback", false),
            py("<module>", true),
        ];
        assert_eq!(
            names(&splice(stack, &python)),
            [
                "ffi_call",
                "inner",
                "middle",
                "PyObject_Vectorcall",
                "callback",
                "<module>",
                "main"
            ]
        );
    }

    #[test]
    fn the_outermost_eval_frame_takes_the_runs_left_and_extra_eval_frames_go() {
        let stack = vec![native("ffi_call"), native(EVAL_FRAME_FUNCTION)];
        let python = [py("a", true), py("b", true), py("c", true)];
        assert_eq!(names(&splice(stack, &python)), ["ffi_call", "a", "b", "c"]);
        let stack = vec![
            native(EVAL_FRAME_FUNCTION),
            native("x"),
            native(EVAL_FRAME_FUNCTION),
        ];
        assert_eq!(names(&splice(stack, &[py("a", true)])), ["a", "x"]);
    }

    #[test]
    fn without_an_eval_frame_python_frames_go_at_the_outer_end() {
        let stack = vec![native("at::empty"), native("at::_ops::call")];
        assert_eq!(
            names(&splice(stack, &[py("step", false)])),
            ["at::empty", "at::_ops::call", "step"]
        );
    }
}
