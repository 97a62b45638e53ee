//! The Python stack of the allocating thread, read from CPython's own structures — a guest's
//! house, entered read-only: no lock of the interpreter is taken (not the GIL: `ctypes.CDLL` and
//! PyTorch release it before reaching us), no reference count changes, nothing in the interpreter
//! is called that allocates, caches or mutates. Only this thread's frame chain is read, which
//! cannot change while the thread is inside the hook.
//!
//! The thread state comes from `PyGILState_GetThisThreadState()` (a thread-local read, set for
//! every thread Python knows, whether it holds the GIL or not), after `Py_IsInitialized()`; both,
//! and the version, are looked up once, lazily, with `dlsym(RTLD_DEFAULT)`: a program without
//! Python pays one failed lookup. Every pointer is checked for plausibility and every object for
//! its type (`PyCode_Type`, `PyUnicode_Type`, `PyBytes_Type`) before it is followed, and walks are
//! bounded, so a thread state that is half built or torn down ends the walk instead of the host.
//!
//! A code object's names and line table are copied once, when a capture first meets it (the
//! [`Registry`]); a capture itself records (code, instruction offset) pairs and the line is
//! decoded from the copy at dump time.

pub mod layout;
mod linetable;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::lock::Mutex;
use cudaleak_format::{Frame, FrameKind, Hex};

use crate::real;
use layout::{FirstFrame, Instr, Layout, LineFormat};

/// The deepest Python stack `CUDALEAK_PY_DEPTH` may ask for.
pub const MAX_DEPTH: usize = 256;
/// Longest name or file name copied, in characters.
const MAX_NAME_CHARS: usize = 4096;
/// Largest line table copied.
const MAX_LINETABLE: usize = 1 << 20;

/// What was found in the process, once.
struct Runtime {
    layout: &'static Layout,
    is_initialized: unsafe extern "C" fn() -> c_int,
    this_thread_state: unsafe extern "C" fn() -> *mut c_void,
    code_type: usize,
    unicode_type: usize,
    bytes_type: usize,
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

fn resolve() -> Option<Runtime> {
    let is_initialized = symbol(c"Py_IsInitialized");
    if is_initialized == 0 {
        return None; // no Python in this process: the one failed lookup
    }
    let this_thread_state = symbol(c"PyGILState_GetThisThreadState");
    let code_type = symbol(c"PyCode_Type");
    let unicode_type = symbol(c"PyUnicode_Type");
    let bytes_type = symbol(c"PyBytes_Type");
    if this_thread_state == 0 || code_type == 0 || unicode_type == 0 || bytes_type == 0 {
        return None;
    }
    let hex = symbol(c"Py_Version");
    let version = if hex != 0 {
        // SAFETY: Py_Version is a `const unsigned long` (3.11+).
        layout::from_hex_version(unsafe { (hex as *const u64).read() })
    } else {
        let get = symbol(c"Py_GetVersion");
        if get == 0 {
            return None;
        }
        // SAFETY: `const char *Py_GetVersion(void)` formats constants into a static buffer and
        // returns it; it neither allocates nor needs the GIL.
        let text = unsafe {
            let f: unsafe extern "C" fn() -> *const c_char = std::mem::transmute(get);
            let s = f();
            if s.is_null() {
                return None;
            }
            CStr::from_ptr(s)
        };
        layout::parse_version(text.to_bytes())?
    };
    let layout = layout::for_version(version.0, version.1)?;
    // SAFETY: both are the interpreter's exported functions of these signatures.
    let (is_initialized, this_thread_state) = unsafe {
        (
            std::mem::transmute::<usize, unsafe extern "C" fn() -> c_int>(is_initialized),
            std::mem::transmute::<usize, unsafe extern "C" fn() -> *mut c_void>(this_thread_state),
        )
    };
    Some(Runtime {
        layout,
        is_initialized,
        this_thread_state,
        code_type,
        unicode_type,
        bytes_type,
    })
}

/// A pointer that may be followed: not null, not in the first page, aligned.
fn plausible(p: usize, align: usize) -> bool {
    p >= 4096 && p.is_multiple_of(align) && p < (1usize << 47)
}

/// # Safety
/// `addr` must be readable for `size_of::<T>()` bytes.
unsafe fn read<T: Copy>(addr: usize) -> T {
    // SAFETY: per the contract.
    unsafe { std::ptr::read_unaligned(addr as *const T) }
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
/// running, or this thread has no thread state.
pub fn capture(registry: &Registry, out: &mut [usize]) -> usize {
    if out.is_empty() {
        return 0;
    }
    let Some(rt) = runtime() else { return 0 };
    // SAFETY: both are argument-less reads of the interpreter's globals and this thread's TLS:
    // Py_IsInitialized reads `_PyRuntime.initialized`; PyGILState_GetThisThreadState reads the
    // gilstate thread-local key (valid while the runtime is initialised, hence the order).
    let tstate = unsafe {
        if (rt.is_initialized)() == 0 {
            return 0;
        }
        (rt.this_thread_state)() as usize
    };
    if !plausible(tstate, 8) {
        return 0;
    }
    let mut none: [Seen; 0] = [];
    SEEN.try_with(|seen| {
        let mut guard = seen.try_borrow_mut().ok();
        let seen = guard.as_deref_mut().map_or(&mut none[..], |s| &mut s[..]);
        // SAFETY: tstate is the live PyThreadState the interpreter keeps for this thread; the
        // walk reads only that thread's frames, which this thread alone changes, and it is
        // here. Each pointer is checked before it is followed.
        unsafe { walk(rt, registry, seen, tstate, out) }
    })
    .unwrap_or(0)
}

/// # Safety
/// `tstate` must be this thread's live `PyThreadState` of the interpreter `rt` describes.
unsafe fn walk(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    tstate: usize,
    out: &mut [usize],
) -> usize {
    let l = rt.layout;
    // SAFETY (whole function): reads at fixed offsets of objects whose addresses were checked
    // and whose types were checked where CPython gives them one, per the contract.
    unsafe {
        // The thread state belongs to this thread, not to a thread that died before it.
        if read::<libc::c_ulong>(tstate + l.tstate_thread_id) != libc::pthread_self() {
            return 0;
        }
        let mut frame = match l.first_frame {
            FirstFrame::Direct(o) => read::<usize>(tstate + o),
            FirstFrame::ThroughCFrame {
                cframe,
                current_frame,
            } => {
                let c = read::<usize>(tstate + cframe);
                if !plausible(c, 8) {
                    return 0;
                }
                read::<usize>(c + current_frame)
            }
        };
        let mut n = 0;
        // Bounded even if the chain were a cycle: skipped frames count too.
        let mut budget = out.len() * 4 + 16;
        while n < out.len() && budget > 0 && plausible(frame, 8) {
            budget -= 1;
            let next = read::<usize>(frame + l.frame.back);
            let owner = l.frame.owner.map(|o| read::<u8>(frame + o));
            let not_python = match (owner, l.frame.owned_by_cstack) {
                (Some(owner), Some(entry)) => owner >= entry,
                _ => false,
            };
            if not_python {
                // The entry frame of an evaluation-loop run: the frames before it were that run's.
                if n > 0 {
                    out[n - 1] |= 1;
                }
                frame = next;
                continue;
            }
            let ends_eval = match l.frame.is_entry {
                Some(o) => read::<u8>(frame + o) != 0,
                None => l.frame.owner.is_none(), // 3.9, 3.10: one run per frame
            };
            let code = read::<usize>(frame + l.frame.code) & !l.frame.code_tag_bits;
            if !plausible(code, 8) || read::<usize>(code + layout::OB_TYPE) != rt.code_type {
                break;
            }
            let Some(offset) = instruction_offset(rt, frame, code) else {
                break;
            };
            let incomplete = match (l.code.firsttraceable, owner) {
                (Some(ft), Some(owner)) => {
                    owner != l.frame.owned_by_generator
                        && offset < 2 * i64::from(read::<i32>(code + ft))
                }
                _ => false,
            };
            if incomplete {
                if ends_eval && n > 0 {
                    out[n - 1] |= 1;
                }
                frame = next;
                continue;
            }
            let Some(index) = code_index(rt, registry, seen, code) else {
                break;
            };
            out[n] = PyFrame {
                code: index,
                offset: offset.clamp(-1, i64::from(i32::MAX >> 1)) as i32,
                ends_eval,
            }
            .pack();
            n += 1;
            frame = next;
        }
        n
    }
}

/// The byte offset in the code's bytecode of the instruction `frame` executes (as
/// `PyFrame_GetLineNumber` computes it), or `None` if it points outside the code.
///
/// # Safety
/// `frame` and `code` must be a live frame of this thread and its (type-checked) code object.
unsafe fn instruction_offset(rt: &Runtime, frame: usize, code: usize) -> Option<i64> {
    let l = rt.layout;
    // SAFETY: per the contract.
    unsafe {
        match l.frame.instr {
            Instr::LastiBytes(o) => Some(i64::from(read::<c_int>(frame + o))),
            Instr::LastiUnits(o) => {
                let lasti = i64::from(read::<c_int>(frame + o));
                Some(if lasti < 0 { lasti } else { lasti * 2 })
            }
            Instr::Pointer(o) => {
                let start = code + l.code.code_adaptive?;
                let p = read::<usize>(frame + o) as i64;
                let offset = p - start as i64;
                // 2 MiB of bytecode is far beyond any real function; a larger value is garbage.
                (-2..1 << 21).contains(&offset).then_some(offset)
            }
        }
    }
}

/// The registry index of `code`, copying its names and line table the first time.
///
/// # Safety
/// `code` must be a live, type-checked code object.
unsafe fn code_index(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    code: usize,
) -> Option<u32> {
    let c = &rt.layout.code;
    // SAFETY: fields of a live code object, per the contract.
    let key = unsafe {
        CodeKey {
            code,
            filename: read::<usize>(code + c.filename),
            name: read::<usize>(code + c.name),
            linetable: read::<usize>(code + c.linetable),
            first_line: read::<c_int>(code + c.firstlineno),
        }
    };
    let slot = (code >> 4 ^ code >> 10) % SEEN_SLOTS;
    if let Some(s) = seen.get(slot) {
        if s.key == key {
            return Some(s.index);
        }
    }
    let index = {
        let mut codes = registry.inner.lock();
        match codes.ids.get(&key) {
            Some(&i) => i,
            None => {
                // SAFETY: the key's objects belong to the live code object.
                let copy = unsafe { copy_code(rt, &key) }?;
                let i = u32::try_from(codes.codes.len()).ok()?;
                codes.codes.push(copy);
                codes.ids.insert(key, i);
                i
            }
        }
    };
    if let Some(s) = seen.get_mut(slot) {
        *s = Seen { key, index };
    }
    Some(index)
}

/// # Safety
/// The key's pointers must be the fields of a live code object.
unsafe fn copy_code(rt: &Runtime, key: &CodeKey) -> Option<Code> {
    // SAFETY: per the contract; each object's type is checked before its contents are read.
    unsafe {
        Some(Code {
            filename: read_str(rt, key.filename)?,
            function: read_str(rt, key.name)?,
            first_line: key.first_line,
            format: rt.layout.code.line_format,
            table: read_bytes(rt, key.linetable).unwrap_or_default(),
        })
    }
}

/// A `str` object's text, read from its compact representation (every string a code object
/// holds is compact); `None` for anything else.
///
/// # Safety
/// `p` must be null or a live Python object.
unsafe fn read_str(rt: &Runtime, p: usize) -> Option<String> {
    let l = rt.layout;
    // SAFETY: per the contract; the type is checked before the string's fields are read.
    unsafe {
        if !plausible(p, 8) || read::<usize>(p + layout::OB_TYPE) != rt.unicode_type {
            return None;
        }
        let len = read::<isize>(p + layout::UNICODE_LENGTH);
        let state = read::<u32>(p + layout::UNICODE_STATE);
        let (kind, compact, ascii) = ((state >> 2) & 7, state >> 5 & 1 == 1, state >> 6 & 1 == 1);
        if !compact || len < 0 {
            return None;
        }
        let shown = (len as usize).min(MAX_NAME_CHARS);
        let mut s = if ascii {
            let bytes = std::slice::from_raw_parts((p + l.unicode_ascii_data) as *const u8, shown);
            String::from_utf8_lossy(bytes).into_owned()
        } else {
            let data = p + l.unicode_compact_data;
            let units = (0..shown).map(|i| match kind {
                1 => u32::from(read::<u8>(data + i)),
                2 => u32::from(read::<u16>(data + 2 * i)),
                _ => read::<u32>(data + 4 * i),
            });
            if !matches!(kind, 1 | 2 | 4) {
                return None;
            }
            units
                .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect()
        };
        if shown < len as usize {
            s.push('…');
        }
        Some(s)
    }
}

/// A `bytes` object's contents.
///
/// # Safety
/// `p` must be null or a live Python object.
unsafe fn read_bytes(rt: &Runtime, p: usize) -> Option<Box<[u8]>> {
    // SAFETY: per the contract; the type is checked before the contents are read.
    unsafe {
        if !plausible(p, 8) || read::<usize>(p + layout::OB_TYPE) != rt.bytes_type {
            return None;
        }
        let size = read::<isize>(p + layout::OB_SIZE);
        if !(0..=MAX_LINETABLE as isize).contains(&size) {
            return None;
        }
        let data = (p + layout::BYTES_SVAL) as *const u8;
        Some(std::slice::from_raw_parts(data, size as usize).into())
    }
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

    /// `lock::reclaim` for its lock (a child made without fork()); true if it was held.
    pub fn reclaim_lock(&self) -> bool {
        crate::lock::reclaim(&self.inner)
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
