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
mod walk;
pub mod watch;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::lock::{ForkLock, ForkLocked, Mutex};
use cudaleak_format::{Frame, FrameKind, Hex};

use crate::real;
use layout::{FirstFrame, Instr, Layout, LineFormat};
use memory::Fields;
use walk::{Plan, Reader, PLAN};

/// The key that drops a thread's read plan at its end, made now ([`crate::thread::ExitKey`]).
pub fn make_plan_key() {
    let _ = walk::PLAN_END.make();
}

/// Longest name or file name copied, in characters.
const MAX_NAME_CHARS: usize = 4096;
/// Largest line table copied.
const MAX_LINETABLE: usize = 1 << 20;

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
    /// The frame and code object fields a walk replays its memo with.
    hot: Option<walk::Hot>,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static RESOLVED: AtomicU8 = AtomicU8::new(UNRESOLVED);
const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const DONE: u8 = 2;

/// The interpreter, if the process has one of a known version. Never blocks: a thread that
/// arrives while another resolves goes without Python frames this once. Asked at every
/// allocation and free: once resolved, two loads, inlined.
#[inline]
fn runtime() -> Option<&'static Runtime> {
    match RESOLVED.load(Ordering::Acquire) {
        DONE => RUNTIME.get(),
        _ => resolving(),
    }
}

/// [`runtime`] before it was resolved: resolves it, unless another thread does.
#[cold]
#[inline(never)]
fn resolving() -> Option<&'static Runtime> {
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
#[inline]
pub fn present() -> bool {
    runtime().is_some()
}

/// Whether the interpreter has begun to shut down: `Py_FinalizeEx` set its finalizing flag
/// (after the `atexit` callbacks; it clears `Py_IsInitialized` at the same moment, so that is
/// not asked). False in a process without a known Python.
#[inline]
pub fn finalizing() -> bool {
    let Some(rt) = runtime() else { return false };
    let Some(finalizing) = rt.is_finalizing else {
        return false;
    };
    // SAFETY: an argument-less read of the interpreter's static `_PyRuntime`, as in `capture`.
    unsafe { finalizing() != 0 }
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
        hot: walk::Hot::of(&layout, frame_span, code_end),
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
pub(crate) struct Codes {
    /// The code object last met at each address, and its index in `codes`. One live code object
    /// has an address at a time: a key that differs is another object, copied anew, and a code
    /// object the watcher saw freed (watch.rs) is forgotten here, so the next one made at its
    /// address is copied even if its key reads the same.
    ids: HashMap<usize, (CodeKey, u32)>,
    codes: Vec<Code>,
}

/// Every code object a capture has met, by index; shared by all threads.
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Codes>,
}

const SEEN_SLOTS: usize = 64;

/// A code object this thread met, its registry index, and the count of freed code objects
/// ([`watch::generation`]) when it was met: while the count is watched, a slot met at another
/// count is asked of the registry again, which forgot every freed one.
#[derive(Clone, Copy, Default)]
struct Seen {
    key: CodeKey,
    index: u32,
    freed: u64,
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
    freed: 0,
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
    // The process's main thread is the one that finalizes the interpreter (`Py_RunMain`, and the
    // embedders that follow the rules): outside finalization (checked above) no other thread
    // frees its thread state, frames or running code objects, so it reads with plain loads.
    // Every other thread — a daemon thread can have its state freed under it by `Py_FinalizeEx`
    // — reads through `process_vm_readv`, which fails instead of faulting. (On the H200 such a
    // call costs 1.7 µs in a PyTorch process: per tensor, under `--exact-pools`, that was most
    // of the shim's cost.)
    let direct = crate::thread::with(crate::guard::thread_id) == crate::process::owner();
    let mut with_plan = |plan: Option<&mut Plan>| {
        let mut none: [Seen; 0] = [];
        let mut reader = Reader { plan, direct };
        if let Some(plan) = reader.plan.as_deref_mut() {
            plan.prefetch();
        }
        let n = SEEN
            .try_with(|seen| {
                let mut guard = seen.try_borrow_mut().ok();
                let seen = guard.as_deref_mut().map_or(&mut none[..], |s| &mut s[..]);
                walk::walk(rt, registry, seen, &mut reader, tstate, out)
            })
            .unwrap_or(0);
        if let Some(plan) = reader.plan {
            plan.finish();
        }
        n
    };
    if direct {
        // A direct reader reads in place: the thread's plan of ranges is not asked for (nor made).
        return with_plan(None);
    }
    let mut n = None;
    let _ = PLAN.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            n = Some(with_plan(Some(p.get_or_insert_with(walk::new_plan))));
        }
    });
    match n {
        Some(n) => n,
        None => with_plan(None),
    }
}
/// The registry index of the code object `key` names, copying its names and line table the
/// first time. `freed` is the walk's count of freed code objects ([`watch::generation`]; 0 when
/// not watched).
fn code_index(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    key: &CodeKey,
    freed: u64,
) -> Option<u32> {
    let code = key.code;
    let slot = (code >> 4 ^ code >> 10) % SEEN_SLOTS;
    if let Some(s) = seen.get(slot) {
        if s.key == *key && s.freed == freed {
            return Some(s.index);
        }
    }
    let index = {
        let mut codes = registry.inner.lock();
        match codes.ids.get(&code) {
            Some(&(k, i)) if k == *key => i,
            _ => {
                let copy = copy_code(rt, key)?;
                let i = u32::try_from(codes.codes.len()).ok()?;
                codes.codes.push(copy);
                codes.ids.insert(code, (*key, i));
                i
            }
        }
    };
    if let Some(s) = seen.get_mut(slot) {
        *s = Seen {
            key: *key,
            index,
            freed,
        };
    }
    Some(index)
}

impl Registry {
    /// The code object at `code` was freed (the watcher, watch.rs): the next one met there is
    /// copied anew.
    pub(crate) fn forget(&self, code: usize) {
        self.inner.lock().ids.remove(&code);
    }

    /// Every code object met so far is copied anew when next met (the frames captured keep their
    /// copies).
    pub(crate) fn forget_all(&self) {
        self.inner.lock().ids.clear();
    }
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
    let h = Fields::new(&h);
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
    let h = Fields::new(&h);
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
}

impl ForkLocked for Registry {
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock)) {
        f(&self.inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
