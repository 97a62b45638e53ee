//! The walk of one thread's Python frames, and how its reads are made cheap: a per-thread [`Plan`]
//! of what the last capture read, read again in one system call; frames through a window; the
//! code objects of a batch of frames in one scattered read. Every read of the interpreter's
//! memory here goes through [`Reader`], which ends in [`memory`] (fallible) or, for this thread's
//! own live stack, a direct copy. What it must never do: dereference an interpreter pointer.

use std::cell::RefCell;

use super::layout::{self, FirstFrame, Instr, Layout};
use super::memory::{self, Fields};
use super::watch::generation;
use super::{
    code_index, plausible, CodeKey, PyFrame, Registry, Runtime, Seen, BATCH, CODE_BUF, PLAN_BYTES,
    PLAN_RANGES, TSTATE_BUF, WINDOW,
};

/// The ranges the last capture of this thread read, read again all at once, in one system call,
/// when the next capture starts: an allocation loop meets the same thread state, frames and code
/// objects each time, and then every read of the walk is served from this copy. Only *where* to
/// read is remembered; what is read is fresh, read during this capture. A range not in the plan
/// is read on its own, and the plan learns it for the next capture.
pub(super) struct Plan {
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
    pub(super) fn new() -> Box<Plan> {
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
    pub(super) fn prefetch(&mut self) {
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
    pub(super) fn finish(&mut self) {
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
pub(super) struct Reader<'a> {
    pub(super) plan: Option<&'a mut Plan>,
    /// Plain loads instead of system calls, for a thread whose structures no other thread can
    /// free while it is inside the hook (see `capture`). Every read here is of a structure's
    /// exact span (a frame's window never starts below its own page), so a plain load touches
    /// only memory the structure itself occupies.
    pub(super) direct: bool,
}

impl Reader<'_> {
    /// Whether `[addr, addr + len)` is a range a structure can have, for [`Reader::direct`]
    /// (not null, small or past the user half): garbage ends the walk.
    fn direct_range(addr: usize, len: usize) -> bool {
        super::plausible(addr, 1) && addr.checked_add(len).is_some_and(|end| end < 1usize << 47)
    }

    /// A plain copy of `out.len()` bytes at `addr`, for [`Reader::direct`]; false for an address
    /// no structure can have.
    fn copy_direct(addr: usize, out: &mut [u8]) -> bool {
        if !Self::direct_range(addr, out.len()) {
            return false;
        }
        // SAFETY: `direct` is only set where the interpreter's structures of this thread stay
        // allocated for the capture (its own thread, the thread that would finalize, outside
        // finalization), and every read is within one structure's span.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
        true
    }

    /// For [`Reader::direct`]: the structure at `[addr, addr + len)` read in place, with plain
    /// loads and nothing copied; `None` for an address no structure can have.
    fn in_place(&self, addr: usize, len: usize) -> Option<Fields<'static>> {
        debug_assert!(self.direct);
        // SAFETY: as in `copy_direct`: a direct reader's structures stay allocated for the
        // capture, and each range is one structure's span.
        Self::direct_range(addr, len).then(|| unsafe { Fields::direct(addr, len) })
    }

    fn read_into(&mut self, addr: usize, out: &mut [u8]) -> bool {
        if self.direct {
            return Self::copy_direct(addr, out);
        }
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
        debug_assert!(!self.direct, "a direct reader reads in place");
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
    /// This thread's [`Plan`], made at its first capture ([`new_plan`]) and dropped at its end by
    /// [`PLAN_END`] (no drop glue: see [`crate::thread::ExitKey`]).
    pub(super) static PLAN: std::mem::ManuallyDrop<RefCell<Option<Box<Plan>>>> =
        const { std::mem::ManuallyDrop::new(RefCell::new(None)) };
}

/// Drops a thread's [`Plan`] at its end.
pub(super) static PLAN_END: crate::thread::ExitKey = crate::thread::ExitKey::new(drop_plan_at_exit);

extern "C" fn drop_plan_at_exit(_: *mut std::ffi::c_void) {
    crate::thread::drop_at_exit(&PLAN);
}

/// This thread's new [`Plan`], its end made known to [`drop_plan_at_exit`].
pub(super) fn new_plan() -> Box<Plan> {
    PLAN_END.arm();
    Plan::new()
}

/// A frame as the walk first reads it; its code object is read with its batch's.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
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
        Some(Fields::new(&self.buf[at..at + span]))
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
        for (j, &code) in want[..m].iter().enumerate() {
            let f = Fields::new(&buf[j * len..(j + 1) * len]);
            self.insert(Self::header(rt, code, valid[j].then_some(&f)));
        }
    }

    /// What the walk needs of the code object at `code`, from `f`, its fields from `OB_TYPE`
    /// on (`None`: it could not be read).
    fn header(rt: &Runtime, code: usize, f: Option<&Fields>) -> CodeHeader {
        let Some(f) = f else {
            return CodeHeader {
                addr: code,
                ..CodeHeader::default()
            };
        };
        let firsttraceable = rt.layout.code.firsttraceable;
        CodeHeader {
            addr: code,
            valid: f.get::<usize>(0) == Some(rt.code_type),
            key: code_key(rt, code, f),
            firsttraceable: firsttraceable
                .and_then(|o| f.get(o - layout::OB_TYPE))
                .unwrap_or(0),
        }
    }
}

/// The walk itself: `tstate` is this thread's `PyThreadState` as the interpreter gave it (perhaps
/// freed since: every read is fallible).
pub(super) fn walk(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    reader: &mut Reader,
    tstate: usize,
    out: &mut [usize],
) -> usize {
    let l = &rt.layout;
    let mut copy: [u8; TSTATE_BUF];
    let t = if reader.direct {
        let Some(t) = reader.in_place(tstate, rt.tstate_span) else {
            return 0;
        };
        t
    } else {
        copy = [0u8; TSTATE_BUF];
        let t = &mut copy[..rt.tstate_span];
        if !reader.read_into(tstate, t) {
            return 0;
        }
        Fields::new(t)
    };
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
    let Some(frame) = first else { return 0 };
    // Read before any frame is (watch.rs).
    let freed = generation(t.get::<usize>(layout::TSTATE_INTERP).unwrap_or(0));
    if reader.direct {
        walk_in_place(rt, registry, seen, reader, frame, freed, out)
    } else {
        walk_batched(rt, registry, seen, reader, frame, freed, out)
    }
}

/// The most frames a walk filling `out` reads: bounded even if the chain were a cycle (skipped
/// frames count too).
fn budget(out: &[usize]) -> usize {
    out.len() * 4 + 16
}

/// The walk of a direct reader: each frame and code object read in place, one after another.
/// A frame that reads as the frame at the same step of this thread's last walk did (its fields,
/// and its code object's [`CodeKey`]) gives what that one gave, from the thread's [`Memo`]: an
/// allocation loop's stack is the same walk after walk, and its frames then cost a few loads
/// each, not the code object's checks and the registry's lookup.
fn walk_in_place(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    reader: &mut Reader,
    frame: usize,
    freed: u64,
    out: &mut [usize],
) -> usize {
    let mut walk = |memo: &mut Memo| walk_memo(rt, registry, seen, reader, frame, freed, out, memo);
    let mut n = None;
    let _ = MEMO.try_with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            n = Some(walk(&mut m));
        }
    });
    // Without the thread's memo (its thread-local storage gone, or in use by a signal handler's
    // capture under this one): an empty one, for this walk only.
    n.unwrap_or_else(|| {
        let mut empty = Memo::EMPTY;
        walk(&mut empty)
    })
}

#[allow(clippy::too_many_arguments)]
fn walk_memo(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    reader: &mut Reader,
    mut frame: usize,
    freed: u64,
    out: &mut [usize],
    memo: &mut Memo,
) -> usize {
    let trusted = memo.begin(freed);
    let mut budget = budget(out);
    let (mut step, mut n) = (0, 0);
    if let Some(hot) = &rt.hot {
        match memo.replay(hot, trusted, frame, out, &mut budget) {
            Replayed::Ended(k) => return k,
            Replayed::Stopped {
                steps,
                frame: at,
                n: k,
            } => {
                (step, frame, n) = (steps, at, k);
            }
        }
    }
    // The loop's own first test, before a call that sets the loop up: a replay that took
    // every frame ends the walk here.
    if n == out.len() || budget == 0 || !plausible(frame, 8) {
        return n;
    }
    let walk = Walk {
        step,
        frame,
        n,
        budget,
        freed,
        trusted,
    };
    walk_steps(rt, registry, seen, reader, out, memo, walk)
}

/// Where [`walk_steps`] starts: the step, its frame, the frames given so far and the budget
/// left, and what the walk began with.
struct Walk {
    step: usize,
    frame: usize,
    n: usize,
    budget: usize,
    freed: u64,
    trusted: bool,
}

/// [`walk_memo`]'s frames from `walk.step` on, one at a time: each compared with its memo step,
/// and decoded where it differs.
#[inline(never)]
fn walk_steps(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    reader: &mut Reader,
    out: &mut [usize],
    memo: &mut Memo,
    walk: Walk,
) -> usize {
    let Walk {
        mut step,
        mut frame,
        mut n,
        mut budget,
        freed,
        trusted,
    } = walk;
    let code_len = rt.code_end - layout::OB_TYPE;
    while n < out.len() && budget > 0 && plausible(frame, 8) {
        budget -= 1;
        let Some(f) = reader.in_place(frame, rt.frame_span) else {
            break;
        };
        let l = &rt.layout;
        let sig = Sig::read(l, &f);
        let next = f.get::<usize>(l.frame.back).unwrap_or(0);
        // The key of the code object the frame names (none for an entry frame, whose read code
        // word is 0, or one no structure can have), and the remembered step's outcome if this
        // frame reads as its frame did with the same key: no decoding of the frame again.
        let key = || {
            let code = sig.code & !l.frame.code_tag_bits;
            code.checked_add(layout::OB_TYPE)
                .and_then(|a| reader.in_place(a, code_len))
                .map(|f| code_key(rt, code, &f))
        };
        let outcome = match memo.get(step, &sig, trusted, key) {
            Some(outcome) => outcome,
            None => {
                let (r, _) = raw_frame(l, &f);
                let code = (!r.entry).then(|| {
                    r.code
                        .checked_add(layout::OB_TYPE)
                        .and_then(|a| reader.in_place(a, code_len))
                });
                let key = match &code {
                    Some(Some(f)) => Some(code_key(rt, r.code, f)),
                    Some(None) => break, // a code object no structure can have
                    None => None,
                };
                let header = code.map(|f| CodeHeaders::header(rt, r.code, f.as_ref()));
                let outcome = outcome_of(rt, registry, seen, &r, header.as_ref(), freed);
                memo.put(step, sig, key.as_ref(), outcome);
                if let (true, Some(at)) = (PREFETCH, memo.at.get_mut(step)) {
                    *at = frame;
                }
                outcome
            }
        };
        if !apply(outcome, out, &mut n) {
            break;
        }
        step += 1;
        frame = next;
    }
    n
}

/// The walk of a reader through system calls: frames through a window, and the code objects of
/// up to [`BATCH`] frames in one read.
fn walk_batched(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    reader: &mut Reader,
    mut frame: usize,
    freed: u64,
    out: &mut [usize],
) -> usize {
    let mut budget = budget(out);
    let mut window = Window::new(&rt.layout, rt.frame_span);
    let mut codes = CodeHeaders::new();
    let mut n = 0;
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
            let (r, next) = raw_frame(&rt.layout, &f);
            python += usize::from(!r.entry);
            batch[k] = r;
            k += 1;
            frame = next;
        }
        codes.fetch(rt, reader, &batch[..k]);
        for r in &batch[..k] {
            let code = if r.entry { None } else { codes.get(r.code) };
            if !apply(outcome_of(rt, registry, seen, r, code, freed), out, &mut n) {
                return n;
            }
        }
        if !more || n == out.len() {
            return n;
        }
    }
}

/// A frame's fields, and the next (older) frame's address.
fn raw_frame(l: &Layout, f: &Fields) -> (RawFrame, usize) {
    let next = f.get::<usize>(l.frame.back).unwrap_or(0);
    let owner = l.frame.owner.and_then(|o| f.get::<u8>(o));
    let entry = matches!((owner, l.frame.owned_by_cstack), (Some(o), Some(e)) if o >= e);
    if entry {
        let r = RawFrame {
            entry,
            ..RawFrame::default()
        };
        return (r, next);
    }
    let r = RawFrame {
        entry,
        code: f.get::<usize>(l.frame.code).unwrap_or(0) & !l.frame.code_tag_bits,
        instr: match l.frame.instr {
            Instr::LastiBytes(o) | Instr::LastiUnits(o) => i64::from(f.get::<i32>(o).unwrap_or(-1)),
            Instr::Pointer(o) => f.get::<usize>(o).unwrap_or(0) as i64,
        },
        owner,
        ends_eval: match l.frame.is_entry {
            Some(o) => f.get::<u8>(o).unwrap_or(0) != 0,
            None => l.frame.owner.is_none(), // 3.9, 3.10: one run per frame
        },
    };
    (r, next)
}

/// What a frame adds to a capture.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A Python frame, packed ([`PyFrame::pack`]).
    Frame(usize),
    /// The frame before it (the newer one) ends a run of the evaluation loop: an entry frame, or
    /// an incomplete frame that ends one.
    EndsRun,
    /// Nothing: a frame not yet started.
    Nothing,
    /// The walk ends here: a code object that cannot be read or named.
    End,
}

/// What frame `r`, whose code object is `code` (None for an entry frame), adds to a capture.
fn outcome_of(
    rt: &Runtime,
    registry: &Registry,
    seen: &mut [Seen],
    r: &RawFrame,
    code: Option<&CodeHeader>,
    freed: u64,
) -> Outcome {
    let l = &rt.layout;
    if r.entry {
        // The entry frame of an evaluation-loop run: the frames before it were that run's.
        return Outcome::EndsRun;
    }
    let Some(code) = code.filter(|c| c.valid && plausible(c.addr, 8)) else {
        return Outcome::End;
    };
    let Some(offset) = instruction_offset(l, r, code.addr) else {
        return Outcome::End;
    };
    let incomplete = match (l.code.firsttraceable, r.owner) {
        (Some(_), Some(owner)) => {
            owner != l.frame.owned_by_generator && offset < 2 * i64::from(code.firsttraceable)
        }
        _ => false,
    };
    if incomplete {
        return if r.ends_eval {
            Outcome::EndsRun
        } else {
            Outcome::Nothing
        };
    }
    let Some(index) = code_index(rt, registry, seen, &code.key, freed) else {
        return Outcome::End;
    };
    let frame = PyFrame {
        code: index,
        offset: offset.clamp(-1, i64::from(i32::MAX >> 1)) as i32,
        ends_eval: r.ends_eval,
    };
    Outcome::Frame(frame.pack())
}

/// Adds `outcome` to `out[..n]`; false where the walk ends.
fn apply(outcome: Outcome, out: &mut [usize], n: &mut usize) -> bool {
    match outcome {
        Outcome::Frame(word) => {
            out[*n] = word;
            *n += 1;
        }
        Outcome::EndsRun if *n > 0 => out[*n - 1] |= 1,
        Outcome::EndsRun | Outcome::Nothing => {}
        Outcome::End => return false,
    }
    true
}

/// The key of the code object at `code`, from its fields `f` (from `OB_TYPE` on).
fn code_key(rt: &Runtime, code: usize, f: &Fields) -> CodeKey {
    let c = &rt.layout.code;
    let at = |o: usize| o - layout::OB_TYPE;
    CodeKey {
        code,
        filename: f.get(at(c.filename)).unwrap_or(0),
        name: f.get(at(c.name)).unwrap_or(0),
        linetable: f.get(at(c.linetable)).unwrap_or(0),
        first_line: f.get(at(c.firstlineno)).unwrap_or(0),
    }
}

/// Steps of a walk a thread's [`Memo`] remembers.
const MEMO_STEPS: usize = 64;

/// What each step of a thread's last direct walk read and gave. A step whose frame reads the
/// same (the words [`raw_frame`] decodes, compared undecoded: [`Sig`]) and whose code object has
/// the same [`CodeKey`] gives the same outcome: the key is what the registry and [`Seen`] already
/// tell code objects apart by (a code object freed and another made at its address has other
/// name, file or line-table objects). A step is kept in five words, its key as a hash of the four
/// that are not the address (the address is kept whole), so that a walk's memo spans few cache
/// lines: on the GPU machine a capture finds them cold after the driver's call. A step that is
/// remembered costs its frame's and its key's loads and their comparison; only a step that is
/// not is decoded.
#[derive(Clone, Copy)]
pub(super) struct Memo {
    len: usize,
    /// The count of freed code objects ([`generation`]) when the walks that read or put
    /// every step below `len` began; 0 when no count was watched.
    freed: u64,
    steps: [MemoStep; MEMO_STEPS],
    /// Where each step's frame was in the walk that last read or replayed it, kept only in a
    /// build with `--cfg cudaleak_prefetch` ([`PREFETCH`]), whose replay prefetches them.
    at: [usize; MEMO_STEPS],
}

/// Whether a replay first asks for its memo's lines and for the frames where its steps' frames
/// last were, all at once, before it follows the chain of frames one dependent load after
/// another (`RUSTFLAGS='--cfg cudaleak_prefetch'`, `scripts/build-ablations.sh DIR prefetch`).
/// An experiment for the GPU machine, where a capture finds the frames cold after the driver's
/// call (about 20 ns a frame, docs/performance.md): not in the shipped build until it is
/// measured there. A prefetch is a hint, which cannot fault and changes no result.
const PREFETCH: bool = cfg!(cudaleak_prefetch);

/// A frame's words that [`raw_frame`] decodes, as read: the code object's word (tag bits and
/// all), the instruction word, and the owner and entry bytes. An entry frame (3.12+), which has
/// no code object the walk reads, keeps only its bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Sig {
    code: usize,
    instr: u64,
    /// The owner byte, and the entry byte above it (0 where the layout has none).
    bytes: u16,
}

impl Sig {
    #[inline]
    fn read(l: &Layout, f: &Fields) -> Sig {
        let owner = l.frame.owner.and_then(|o| f.get::<u8>(o)).unwrap_or(0);
        let is_entry = l.frame.is_entry.and_then(|o| f.get::<u8>(o)).unwrap_or(0);
        let bytes = u16::from(owner) | u16::from(is_entry) << 8;
        if matches!(l.frame.owned_by_cstack, Some(e) if l.frame.owner.is_some() && owner >= e) {
            return Sig {
                bytes,
                ..Sig::default()
            };
        }
        Sig {
            code: f.get::<usize>(l.frame.code).unwrap_or(0),
            instr: match l.frame.instr {
                Instr::LastiBytes(o) | Instr::LastiUnits(o) => {
                    u64::from(f.get::<u32>(o).unwrap_or(u32::MAX))
                }
                Instr::Pointer(o) => f.get::<usize>(o).unwrap_or(0) as u64,
            },
            bytes,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct MemoStep {
    code: usize,
    instr: u64,
    /// The hash of the code object's key ([`key_hash`], never 0); 0 for a frame without one.
    key: u64,
    /// [`Sig::bytes`] in bits 0-15, the outcome's kind in bits 16-17.
    flags: u32,
    word: usize,
}

impl MemoStep {
    const EMPTY: MemoStep = MemoStep {
        code: 0,
        instr: 0,
        key: 0,
        flags: 0,
        word: 0,
    };

    /// Whether the step's frame had a code object, whose key must match too.
    #[inline]
    fn has_code(&self) -> bool {
        self.key != 0
    }

    /// Whether `key` is the step's code object's key.
    #[inline]
    fn same_code(&self, key: &CodeKey) -> bool {
        self.key == key_hash(key)
    }

    #[inline]
    fn outcome(&self) -> Outcome {
        Outcome::unpack(self.flags >> 16, self.word)
    }
}

/// A hash of the parts of a code object's key other than its address.
fn key_hash(k: &CodeKey) -> u64 {
    let mut h = 0u64;
    for w in [
        k.filename,
        k.name,
        k.linetable,
        k.first_line as u32 as usize,
    ] {
        h = (h ^ w as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    h | 1 // never 0, the key of a step without a code object
}

impl Outcome {
    /// The outcome as a kind (bits 16-17 of [`MemoStep::flags`]) and a word.
    fn pack(self) -> (u32, usize) {
        match self {
            Outcome::Frame(w) => (0, w),
            Outcome::EndsRun => (1, 0),
            Outcome::Nothing => (2, 0),
            Outcome::End => (3, 0),
        }
    }

    fn unpack(kind: u32, word: usize) -> Outcome {
        match kind {
            0 => Outcome::Frame(word),
            1 => Outcome::EndsRun,
            2 => Outcome::Nothing,
            _ => Outcome::End,
        }
    }
}

impl Memo {
    const EMPTY: Memo = Memo {
        len: 0,
        freed: 0,
        steps: [MemoStep::EMPTY; MEMO_STEPS],
        at: [0; MEMO_STEPS],
    };

    /// Begins a walk at `freed`, the count of freed code objects ([`generation`]), and says
    /// whether it trusts the steps' code objects: the count is watched, and no code object was
    /// freed since the steps were read, so the object a frame names at a step's address is the
    /// one the step read, whose key need not be read again (watch.rs). Once the watched count
    /// has moved, no step is known to name a live object (a new one at a freed one's address can
    /// have its key), so all are forgotten and the walk reads every frame anew. Unwatched (0),
    /// each step is compared with its code object's key as before.
    #[inline]
    fn begin(&mut self, freed: u64) -> bool {
        if self.freed != freed {
            if freed != 0 {
                self.len = 0;
            }
            self.freed = freed;
        }
        freed != 0
    }

    /// The steps a walk takes from its memo, from the first frame on, while each frame reads as
    /// its step's did (and, unless the walk is `trusted` ([`Memo::begin`]), its code object's key
    /// hashes as the step's, as [`Memo::get`] compares them): what [`walk_steps`] gives for those
    /// frames, under its bounds (`out`'s room, the budget, a plausible frame's address), in a
    /// loop that does nothing else: a frame is its few plain loads and their comparison, in a
    /// copy of the loop made for the layout's shape (the instruction's width, which of the owner
    /// and entry bytes it has). Where a frame reads otherwise, or the memo ends, the walk goes on
    /// from that step in [`walk_steps`].
    fn replay(
        &mut self,
        hot: &Hot,
        trusted: bool,
        frame: usize,
        out: &mut [usize],
        budget: &mut usize,
    ) -> Replayed {
        type Replay = fn(&mut Memo, &Hot, bool, usize, &mut [usize], &mut usize) -> Replayed;
        let replay: Replay = match (hot.wide, hot.owner.is_some(), hot.is_entry.is_some()) {
            (true, true, false) => Memo::replay_as::<true, true, false>, // 3.12+
            (true, true, true) => Memo::replay_as::<true, true, true>,   // 3.11
            (false, false, false) => Memo::replay_as::<false, false, false>, // 3.9, 3.10
            // No known layout has another shape ([`Hot::of`] makes none for it).
            _ => {
                return Replayed::Stopped {
                    steps: 0,
                    frame,
                    n: 0,
                }
            }
        };
        replay(self, hot, trusted, frame, out, budget)
    }

    /// [`Memo::replay`] for a layout whose instruction is a pointer (`WIDE`) or an `int`, with
    /// or without an owner and an entry byte.
    #[inline(never)]
    fn replay_as<const WIDE: bool, const OWNER: bool, const ENTRY: bool>(
        &mut self,
        hot: &Hot,
        trusted: bool,
        mut frame: usize,
        out: &mut [usize],
        budget: &mut usize,
    ) -> Replayed {
        let len = self.len.min(MEMO_STEPS).min(*budget);
        let steps = &self.steps[..len];
        let ats = &mut self.at[..len];
        if PREFETCH {
            let (start, bytes) = (steps.as_ptr() as usize, std::mem::size_of_val(steps));
            for line in (start & !63..start + bytes).step_by(64) {
                prefetch(line);
            }
            for &at in ats.iter() {
                // A frame's fields span at most two lines: its first and its last byte's.
                prefetch(at);
                prefetch(at.wrapping_add(hot.span - 1));
            }
        }
        let mut n = 0;
        for (step, s) in steps.iter().enumerate() {
            // plausible(frame, 8), and the frame's span below the user half (Reader::in_place).
            if frame.wrapping_sub(4096) >= hot.below || frame & 7 != 0 {
                return Replayed::stopped(step, frame, n, budget);
            }
            let p = frame as *const u8;
            // SAFETY: as [`Reader::in_place`]: a replay is a direct reader's walk, whose frames
            // stay allocated for the capture; the frame's span is a range a structure can have
            // (checked above), every offset read lies inside it ([`Hot::of`]), and the values
            // are plain integers, read unaligned.
            let (bytes, code, instr, back) = unsafe {
                let owner: u8 = if OWNER {
                    p.add(hot.owner.unwrap_or(0)).read()
                } else {
                    0
                };
                let entry: u8 = if ENTRY {
                    p.add(hot.is_entry.unwrap_or(0)).read()
                } else {
                    0
                };
                let code = p.add(hot.code).cast::<usize>().read_unaligned();
                let instr = if WIDE {
                    p.add(hot.instr).cast::<usize>().read_unaligned() as u64
                } else {
                    u64::from(p.add(hot.instr).cast::<u32>().read_unaligned())
                };
                let back = p.add(hot.back).cast::<usize>().read_unaligned();
                (u16::from(owner) | u16::from(entry) << 8, code, instr, back)
            };
            // A step with a code word was a frame with a code object; one without, an entry
            // frame, whose bytes alone tell it (as [`Sig::read`]).
            if s.flags as u16 != bytes || (s.code != 0 && (s.code != code || s.instr != instr)) {
                return Replayed::stopped(step, frame, n, budget);
            }
            // Untrusted, a code object at the step's address may be another one: its key tells.
            if s.code != 0 && !trusted && hot.key_hash(code) != Some(s.key) {
                return Replayed::stopped(step, frame, n, budget);
            }
            if PREFETCH {
                ats[step] = frame;
            }
            match s.flags >> 16 {
                0 => {
                    out[n] = s.word;
                    n += 1;
                    if n == out.len() {
                        return Replayed::stopped(step + 1, back, n, budget);
                    }
                }
                1 if n > 0 => out[n - 1] |= 1,
                1 | 2 => {}
                _ => return Replayed::Ended(n),
            }
            frame = back;
        }
        Replayed::stopped(steps.len(), frame, n, budget)
    }

    /// Remembers that the frame read as `sig`, with the code object of key `key` (None: an
    /// entry frame), gave `outcome` at `step`.
    fn put(&mut self, step: usize, sig: Sig, key: Option<&CodeKey>, outcome: Outcome) {
        if let Some(s) = self.steps.get_mut(step) {
            let (kind, word) = outcome.pack();
            *s = MemoStep {
                code: sig.code,
                instr: sig.instr,
                key: key.map_or(0, key_hash),
                flags: u32::from(sig.bytes) | kind << 16,
                word,
            };
            self.len = self.len.max(step + 1);
        }
    }

    /// The outcome remembered at `step` for a frame read as `sig` whose code object has the key
    /// `key()` (None: none read), if its frame read the same and had the same code object.
    /// `key` is asked only of a frame that reads the same, and not at all when `trusted` (no
    /// code object freed since the step was read: the frame's code word names the same object):
    /// the code object is not read for nothing.
    #[inline]
    fn get(
        &self,
        step: usize,
        sig: &Sig,
        trusted: bool,
        key: impl FnOnce() -> Option<CodeKey>,
    ) -> Option<Outcome> {
        let s = self.steps.get(step).filter(|_| step < self.len)?;
        if s.code != sig.code || s.instr != sig.instr || s.flags as u16 != sig.bytes {
            return None;
        }
        if trusted {
            return Some(s.outcome());
        }
        let same = match key() {
            Some(key) => s.has_code() && s.same_code(&key),
            None => !s.has_code(),
        };
        same.then(|| s.outcome())
    }
}

/// A frame's fields that [`Memo::replay`] reads, as offsets checked to lie inside the frame's
/// span, which plain loads then read. Made once, with the [`Runtime`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Hot {
    /// A frame's address less 4096 is below this where the frame can be there.
    below: usize,
    /// The bytes of a frame the walk reads.
    span: usize,
    back: usize,
    code: usize,
    instr: usize,
    /// The instruction is a pointer (a word), not `f_lasti` (an `int`).
    wide: bool,
    owner: Option<usize>,
    is_entry: Option<usize>,
    /// The code object's: the tag bits of a frame's code word, and where its key's fields lie
    /// from `code + OB_TYPE` on, all inside the `code_len` bytes a walk reads there (below
    /// which a code object's address less 4096 lies, `code_below`).
    code_tag_bits: usize,
    code_below: usize,
    filename: usize,
    name: usize,
    linetable: usize,
    firstlineno: usize,
}

impl Hot {
    /// The fields of frames laid out as `layout`, of which a walk reads `span` bytes, and of
    /// code objects, of which it reads up to `code_end` (`None` if a field lies past them, or
    /// for a layout of a shape [`Memo::replay`] has no loop for: an instruction pointer with an
    /// owner byte, and an entry byte or not; or neither with an `int`).
    pub(super) fn of(layout: &Layout, span: usize, code_end: usize) -> Option<Hot> {
        let l = &layout.frame;
        let c = &layout.code;
        let code_len = code_end.checked_sub(layout::OB_TYPE)?;
        let at = |o: usize| o.checked_sub(layout::OB_TYPE);
        let (filename, name, linetable, firstlineno) = (
            at(c.filename)?,
            at(c.name)?,
            at(c.linetable)?,
            at(c.firstlineno)?,
        );
        let in_code = |o: usize, size: usize| o.checked_add(size).is_some_and(|e| e <= code_len);
        let code_fits = in_code(filename, 8)
            && in_code(name, 8)
            && in_code(linetable, 8)
            && in_code(firstlineno, 4);
        let (instr, wide) = match l.instr {
            Instr::LastiBytes(o) | Instr::LastiUnits(o) => (o, false),
            Instr::Pointer(o) => (o, true),
        };
        let word = std::mem::size_of::<usize>();
        let within = |o: usize, size: usize| o.checked_add(size).is_some_and(|e| e <= span);
        let fits = within(l.back, word)
            && within(l.code, word)
            && within(instr, if wide { word } else { 4 })
            && l.owner.is_none_or(|o| within(o, 1))
            && l.is_entry.is_none_or(|o| within(o, 1));
        let shaped = matches!(
            (wide, l.owner.is_some(), l.is_entry.is_some()),
            (true, true, _) | (false, false, false)
        );
        let below = (1usize << 47).checked_sub(span.checked_add(4096)?)?;
        let code_below = (1usize << 47).checked_sub(code_len.checked_add(4096)?)?;
        (fits && shaped && code_fits).then_some(Hot {
            below,
            span,
            back: l.back,
            code: l.code,
            instr,
            wide,
            owner: l.owner,
            is_entry: l.is_entry,
            code_tag_bits: l.code_tag_bits,
            code_below,
            filename,
            name,
            linetable,
            firstlineno,
        })
    }

    /// The hash of the key ([`key_hash`]) of the code object a frame's code word `word` names,
    /// read as the walk's `key` does (`None` where it reads none: an address no structure can
    /// have).
    ///
    /// An untrusted replay's frames are a direct reader's, whose running code objects stay
    /// allocated for the capture (a live frame holds its code object).
    #[inline]
    fn key_hash(&self, word: usize) -> Option<u64> {
        let code = word & !self.code_tag_bits;
        let at = code.checked_add(layout::OB_TYPE)?;
        // plausible(at, 1), and the code's span below the user half (Reader::in_place).
        if at.wrapping_sub(4096) >= self.code_below {
            return None;
        }
        let p = at as *const u8;
        // SAFETY: as [`Reader::in_place`]: the range is one a structure can have (checked
        // above), the code object of a direct reader's live frame stays allocated for the
        // capture, and every offset read lies inside the span a walk reads ([`Hot::of`]).
        let key = unsafe {
            CodeKey {
                code,
                filename: p.add(self.filename).cast::<usize>().read_unaligned(),
                name: p.add(self.name).cast::<usize>().read_unaligned(),
                linetable: p.add(self.linetable).cast::<usize>().read_unaligned(),
                first_line: p.add(self.firstlineno).cast::<i32>().read_unaligned(),
            }
        };
        Some(key_hash(&key))
    }
}

/// Asks the processor to bring the cache line of `p` into its caches: a hint, which never
/// faults whatever the address.
#[inline(always)]
fn prefetch(p: usize) {
    // SAFETY: a prefetch reads nothing the program sees and cannot fault.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How [`Memo::replay`] left a walk.
enum Replayed {
    /// The walk ended at a step (its outcome [`Outcome::End`]) with `out[..n]` filled.
    Ended(usize),
    /// The walk goes on at `frame`, the frame of step `steps`, with `out[..n]` filled.
    Stopped {
        steps: usize,
        frame: usize,
        n: usize,
    },
}

impl Replayed {
    /// Stopped after `steps` steps, each of which spent one of `budget`.
    #[inline]
    fn stopped(steps: usize, frame: usize, n: usize, budget: &mut usize) -> Replayed {
        *budget -= steps;
        Replayed::Stopped { steps, frame, n }
    }
}

thread_local! {
    /// This thread's [`Memo`]. Plain `Copy` data: no destructor to register.
    static MEMO: RefCell<Memo> = const { RefCell::new(Memo::EMPTY) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

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
            direct: false,
            plan: Some(&mut plan),
        };
        assert_eq!(reader.read::<u64>(pages + 4096), Some(42));
        assert_eq!(reader.read::<u64>(pages + 8), None);
        // SAFETY: unmapping what this test mapped.
        unsafe { libc::munmap(pages as *mut c_void, 8192) };
    }

    /// A frame as the memo reads it, and its code object's key.
    fn a_frame() -> (Sig, CodeKey) {
        let sig = Sig {
            code: 0x7000_1000,
            instr: 0x7000_10c4,
            bytes: 0,
        };
        let key = CodeKey {
            code: 0x7000_1000,
            filename: 0x7100_0000,
            name: 0x7100_0040,
            linetable: 0x7100_0080,
            first_line: 12,
        };
        (sig, key)
    }

    #[test]
    fn a_memo_step_answers_only_a_frame_and_code_object_that_read_the_same() {
        let (sig, key) = a_frame();
        let sig = Sig {
            bytes: 0x0100, // owner 0, entry byte 1
            ..sig
        };
        let word = PyFrame {
            code: 3,
            offset: 0xc4,
            ends_eval: true,
        }
        .pack();
        let mut memo = Memo::EMPTY;
        assert!(
            memo.get(0, &sig, false, || Some(key)).is_none(),
            "nothing remembered yet"
        );
        memo.put(0, sig, Some(&key), Outcome::Frame(word));
        let entry = Sig {
            bytes: 3, // owned by the C stack (3.12)
            ..Sig::default()
        };
        memo.put(1, entry, None, Outcome::EndsRun);
        assert!(memo.get(0, &sig, false, || Some(key)) == Some(Outcome::Frame(word)));
        assert!(memo.get(1, &entry, false, || None) == Some(Outcome::EndsRun));
        assert!(
            memo.get(2, &sig, false, || Some(key)).is_none(),
            "another step"
        );
        assert!(
            memo.get(1, &sig, false, || Some(key)).is_none(),
            "another frame at that step"
        );
        for changed in [
            Sig {
                instr: sig.instr + 2,
                ..sig
            },
            Sig {
                code: sig.code + 16,
                ..sig
            },
            Sig {
                code: sig.code | 1, // a tag bit
                ..sig
            },
            Sig {
                bytes: sig.bytes | 1, // another owner
                ..sig
            },
            Sig {
                bytes: sig.bytes & 0xff, // no longer the entry of an evaluation-loop run
                ..sig
            },
        ] {
            assert!(memo.get(0, &changed, false, || Some(key)).is_none());
        }
        // A code object at the same address that is another one: other names or line table.
        for other in [
            CodeKey {
                name: key.name + 8,
                ..key
            },
            CodeKey {
                filename: key.filename + 8,
                ..key
            },
            CodeKey {
                linetable: key.linetable + 8,
                ..key
            },
            CodeKey {
                first_line: 13,
                ..key
            },
        ] {
            assert!(memo.get(0, &sig, false, || Some(other)).is_none());
        }
        assert!(
            memo.get(0, &sig, false, || None).is_none(),
            "no code object read"
        );
        assert!(
            memo.get(1, &entry, false, || Some(key)).is_none(),
            "a code object where there was none"
        );
    }

    #[test]
    fn a_memo_trusts_its_steps_code_objects_only_while_none_was_freed() {
        let (sig, key) = a_frame();
        let not_read = || -> Option<CodeKey> { panic!("a trusted step's key was read") };
        let mut memo = Memo::EMPTY;
        // Unwatched: every step is compared with its key.
        assert!(!memo.begin(0));
        for step in 0..3 {
            memo.put(step, sig, Some(&key), Outcome::Frame(step));
        }
        assert!(memo.get(1, &sig, false, || Some(key)) == Some(Outcome::Frame(1)));
        // Watched from now on: the steps read before are forgotten.
        assert!(memo.begin(5));
        assert!(
            memo.get(0, &sig, true, not_read).is_none(),
            "read before the watch"
        );
        for step in 0..3 {
            memo.put(step, sig, Some(&key), Outcome::Frame(step));
        }
        // No code object freed since: the steps are trusted, their keys not read.
        assert!(memo.begin(5));
        assert!(memo.get(2, &sig, true, not_read) == Some(Outcome::Frame(2)));
        let moved = Sig {
            instr: sig.instr + 2,
            ..sig
        };
        assert!(
            memo.get(0, &moved, true, not_read).is_none(),
            "the frame moved on"
        );
        // One freed: every step is forgotten, whatever its key reads.
        assert!(memo.begin(6));
        for step in 0..3 {
            assert!(memo.get(step, &sig, true, not_read).is_none());
            assert!(memo.get(step, &sig, false, || Some(key)).is_none());
        }
    }

    #[test]
    fn a_frame_reads_as_its_words_and_an_entry_frame_as_its_bytes_alone() {
        let l = layout::for_version(3, 12).expect("3.12's layout");
        let (Some(owner), Some(cstack)) = (l.frame.owner, l.frame.owned_by_cstack) else {
            panic!("3.12 frames have owners");
        };
        let mut frame = [0u8; crate::python::FRAME_BUF];
        frame[l.frame.code..l.frame.code + 8].copy_from_slice(&0x7000_1001usize.to_ne_bytes());
        let Instr::Pointer(instr) = l.frame.instr else {
            panic!("3.12 frames hold an instruction pointer");
        };
        frame[instr..instr + 8].copy_from_slice(&0x7000_10c4usize.to_ne_bytes());
        let sig = Sig::read(l, &Fields::new(&frame));
        assert_eq!(
            (sig.code, sig.instr, sig.bytes),
            (0x7000_1001, 0x7000_10c4, 0)
        );
        frame[owner] = cstack;
        let entry = Sig::read(l, &Fields::new(&frame));
        assert_eq!(
            (entry.code, entry.instr, entry.bytes),
            (0, 0, u16::from(cstack)),
            "an entry frame's other words are not its own"
        );
    }

    /// Frames laid out as `l` in one buffer, each `back` word naming the next: a code object
    /// each (its code word `0x7000_1000 + 0x100 * i`), but where `entries` says (owned by the C
    /// stack). The buffer, and each frame's address.
    fn frames(l: &Layout, n: usize, entries: &[usize]) -> (Vec<u64>, Vec<usize>) {
        let stride = FRAME_WORDS * 8;
        let mut buf = vec![0u64; FRAME_WORDS * n];
        let base = buf.as_mut_ptr() as usize;
        let at: Vec<usize> = (0..n).map(|i| base + i * stride).collect();
        for i in 0..n {
            let f = &mut bytemuck_words(&mut buf)[i * stride..(i + 1) * stride];
            let put = |f: &mut [u8], o: usize, v: &[u8]| f[o..o + v.len()].copy_from_slice(v);
            let next = at.get(i + 1).copied().unwrap_or(0);
            put(f, l.frame.back, &next.to_ne_bytes());
            if entries.contains(&i) {
                let (Some(owner), Some(cstack)) = (l.frame.owner, l.frame.owned_by_cstack) else {
                    panic!("entry frames need owners");
                };
                f[owner] = cstack;
                continue;
            }
            put(f, l.frame.code, &(0x7000_1000 + 0x100 * i).to_ne_bytes());
            match l.frame.instr {
                Instr::Pointer(o) => put(f, o, &(0x7000_1040 + 0x100 * i).to_ne_bytes()),
                Instr::LastiBytes(o) | Instr::LastiUnits(o) => {
                    put(f, o, &(8 * i as u32).to_ne_bytes())
                }
            }
        }
        (buf, at)
    }

    const FRAME_WORDS: usize = crate::python::FRAME_BUF / 8;

    /// Flips `bits` of the byte at `addr`, inside a test's frame buffer.
    fn flip(addr: usize, bits: u8) {
        // SAFETY: the callers' addresses lie inside their live frame buffers.
        unsafe { *(addr as *mut u8) ^= bits };
    }

    fn bytemuck_words(buf: &mut [u64]) -> &mut [u8] {
        // SAFETY: the same memory as bytes; u8 has no alignment and every bit pattern is valid.
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) }
    }

    /// What the memo remembers of `frames` as the walk of [`walk_memo`] would put it: each
    /// frame read as its `Sig`, a frame's outcome `Frame(100 + step)`, an entry frame's
    /// `EndsRun`.
    fn remembered(l: &Layout, span: usize, at: &[usize]) -> Memo {
        let mut memo = Memo::EMPTY;
        assert!(memo.begin(1), "watched");
        for (step, &a) in at.iter().enumerate() {
            // SAFETY: the test's own frames, each `span` bytes inside the buffer.
            let sig = Sig::read(l, &unsafe { Fields::direct(a, span) });
            let (outcome, key) = if sig.code == 0 {
                (Outcome::EndsRun, None)
            } else {
                let (_, key) = a_frame();
                (Outcome::Frame(100 + step), Some(key))
            };
            memo.put(step, sig, key.as_ref(), outcome);
        }
        memo
    }

    /// Six frames of CPython `major.minor`'s layout in a buffer ([`frames`]), the fourth an entry
    /// frame where the layout has them, with what a replay reads them by.
    struct Chain {
        l: &'static Layout,
        span: usize,
        hot: Hot,
        entries: &'static [usize],
        _frames: Vec<u64>,
        at: Vec<usize>,
    }

    fn chain(major: u32, minor: u32) -> Chain {
        let l = layout::for_version(major, minor).expect("a known layout");
        let (_, span, code_end) = crate::python::spans(l).expect("spans");
        let hot = Hot::of(l, span, code_end).expect("every field inside the spans");
        let entries: &[usize] = if l.frame.owned_by_cstack.is_some() {
            &[3]
        } else {
            &[]
        };
        let (frames, at) = frames(l, 6, entries);
        Chain {
            l,
            span,
            hot,
            entries,
            _frames: frames,
            at,
        }
    }

    const VERSIONS: [(u32, u32); 7] =
        [(3, 9), (3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15)];

    #[test]
    fn a_replay_gives_what_its_memo_remembers_until_a_frame_reads_otherwise() {
        for (major, minor) in VERSIONS {
            let c = chain(major, minor);
            let (l, span, hot, entries, at) = (c.l, c.span, c.hot, c.entries, &c.at);
            let memo = remembered(l, span, at);
            let version = format!("{major}.{minor}");
            let replay = |memo: &Memo, frame: usize, room: usize, budget: usize| {
                let mut out = vec![0usize; room];
                let mut budget = budget;
                let r = { *memo }.replay(&hot, true, frame, &mut out, &mut budget);
                (r, out, budget)
            };
            // Every frame as remembered: every step's outcome, the walk on at the chain's end.
            let (r, out, budget) = replay(&memo, at[0], 8, 100);
            let words: Vec<usize> = if entries.is_empty() {
                (100..106).chain([0, 0]).collect()
            } else {
                // The entry frame at step 3 marks the frame before it as ending a run.
                vec![100, 101, 102 | 1, 104, 105, 0, 0, 0]
            };
            assert_eq!(out, words, "{version}");
            let n = 6 - entries.len();
            assert!(
                matches!(r, Replayed::Stopped { steps: 6, frame: 0, n: k } if k == n),
                "{version}"
            );
            assert_eq!(budget, 94, "{version}: a step is one of the budget");
            // A frame that moved on (its instruction) stops the replay at its step, there.
            let instr = match l.frame.instr {
                Instr::Pointer(o) | Instr::LastiBytes(o) | Instr::LastiUnits(o) => o,
            };
            flip(at[4] + instr, 2);
            let (r, _, budget) = replay(&memo, at[0], 8, 100);
            assert!(
                matches!(r, Replayed::Stopped { steps: 4, frame, n: k } if frame == at[4] && k == 4 - entries.len()),
                "{version}"
            );
            assert_eq!(budget, 96, "{version}");
            flip(at[4] + instr, 2);
            // So does another code object's word at a frame.
            flip(at[1] + l.frame.code, 0x10);
            let (r, _, _) = replay(&memo, at[0], 8, 100);
            assert!(
                matches!(r, Replayed::Stopped { steps: 1, frame, n: 1 } if frame == at[1]),
                "{version}"
            );
            flip(at[1] + l.frame.code, 0x10);
            if let (Some(owner), false) = (l.frame.owner, entries.is_empty()) {
                // An entry frame is told by its bytes alone: its other words are not its own.
                flip(at[3] + l.frame.code, 0x55);
                let (r, _, _) = replay(&memo, at[0], 8, 100);
                assert!(matches!(r, Replayed::Stopped { steps: 6, .. }), "{version}");
                // Another owner at a step stops it.
                flip(at[2] + owner, 1);
                let (r, _, _) = replay(&memo, at[0], 8, 100);
                assert!(matches!(r, Replayed::Stopped { steps: 2, .. }), "{version}");
                flip(at[2] + owner, 1);
            }
            // Bounded as the walk's loop: by `out`'s room, by the budget, by a frame that cannot
            // be one; and ended by a step that ended the walk.
            let (r, out, _) = replay(&memo, at[0], 2, 100);
            assert_eq!(out, [100, 101], "{version}");
            assert!(
                matches!(r, Replayed::Stopped { steps: 2, frame, n: 2 } if frame == at[2]),
                "{version}"
            );
            let (r, _, budget) = replay(&memo, at[0], 8, 3);
            assert!(
                matches!(r, Replayed::Stopped { steps: 3, frame, .. } if frame == at[3]),
                "{version}"
            );
            assert_eq!(budget, 0, "{version}");
            // A misaligned frame is none, even where its words read as a step remembers them.
            let odd = at[0] + 4;
            let mut misread = Memo::EMPTY;
            misread.begin(1);
            // SAFETY: inside the test's frame buffer (its first frame's span, and 4 bytes more).
            let sig = Sig::read(l, &unsafe { Fields::direct(odd, span) });
            misread.put(0, sig, Some(&a_frame().1), Outcome::Frame(7));
            let (r, _, _) = replay(&misread, odd, 8, 100);
            assert!(matches!(r, Replayed::Stopped { steps: 0, .. }), "{version}");
            for implausible in [0, 8, 1 << 47] {
                let (r, _, budget) = replay(&memo, implausible, 8, 100);
                assert!(
                    matches!(r, Replayed::Stopped { steps: 0, n: 0, .. }),
                    "{version}"
                );
                assert_eq!(budget, 100);
            }
            let mut ended = memo;
            // SAFETY: the test's own frame.
            let sig = Sig::read(l, &unsafe { Fields::direct(at[1], span) });
            ended.put(1, sig, Some(&a_frame().1), Outcome::End);
            let (r, out, _) = replay(&ended, at[0], 8, 100);
            assert!(matches!(r, Replayed::Ended(1)), "{version}");
            assert_eq!(out[..1], [100]);
        }
    }

    /// Writes `value`'s bytes at `addr`, inside a test's buffer.
    fn put_bytes(addr: usize, value: &[u8]) {
        // SAFETY: the callers' addresses lie inside their live buffers, with room for `value`.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), addr as *mut u8, value.len()) };
    }

    #[test]
    fn an_untrusted_replay_compares_each_code_objects_key_as_the_walk_does() {
        for (major, minor) in VERSIONS {
            let ch = chain(major, minor);
            let (l, span, hot, entries, at) = (ch.l, ch.span, ch.hot, ch.entries, &ch.at);
            // A code object of each frame's own, its key's fields written where the layout
            // has them; each frame's code word names it.
            let stride = crate::python::CODE_BUF.next_multiple_of(64);
            let codes = vec![0u64; stride * 6 / 8];
            let code_at = |i: usize| codes.as_ptr() as usize + i * stride;
            let c = &l.code;
            let key_of = |i: usize| CodeKey {
                code: code_at(i),
                filename: 0x7100_0000 + 0x100 * i,
                name: 0x7200_0000 + 0x100 * i,
                linetable: 0x7300_0000 + 0x100 * i,
                first_line: 10 + i as i32,
            };
            let write = |k: &CodeKey| {
                put_bytes(k.code + c.filename, &k.filename.to_ne_bytes());
                put_bytes(k.code + c.name, &k.name.to_ne_bytes());
                put_bytes(k.code + c.linetable, &k.linetable.to_ne_bytes());
                put_bytes(k.code + c.firstlineno, &k.first_line.to_ne_bytes());
            };
            let mut memo = Memo::EMPTY;
            assert!(!memo.begin(0), "unwatched");
            for (i, &frame) in at.iter().enumerate() {
                let key = (!entries.contains(&i)).then(|| key_of(i));
                if let Some(k) = &key {
                    put_bytes(frame + l.frame.code, &k.code.to_ne_bytes());
                    write(k);
                }
                // SAFETY: the test's own frame, `span` bytes inside its buffer.
                let sig = Sig::read(l, &unsafe { Fields::direct(frame, span) });
                memo.put(i, sig, key.as_ref(), Outcome::Frame(100 + i));
            }
            let version = format!("{major}.{minor}");
            let replay = |trusted: bool| {
                let mut out = [0usize; 8];
                let mut budget = 100;
                { memo }.replay(&hot, trusted, at[0], &mut out, &mut budget)
            };
            assert!(
                matches!(
                    replay(false),
                    Replayed::Stopped {
                        steps: 6,
                        frame: 0,
                        ..
                    }
                ),
                "{version}: every key as remembered"
            );
            // Another code object at a step's address (another name, file name, line table or
            // first line): the untrusted replay stops at that step; a trusted one reads no key.
            for (i, other) in [
                (
                    2,
                    CodeKey {
                        name: 0x7400_0000,
                        ..key_of(2)
                    },
                ),
                (
                    1,
                    CodeKey {
                        filename: 0x7400_0000,
                        ..key_of(1)
                    },
                ),
                (
                    4,
                    CodeKey {
                        linetable: 0x7400_0000,
                        ..key_of(4)
                    },
                ),
                (
                    0,
                    CodeKey {
                        first_line: 99,
                        ..key_of(0)
                    },
                ),
            ] {
                write(&other);
                assert!(
                    matches!(replay(false), Replayed::Stopped { steps, frame, .. } if steps == i && frame == at[i]),
                    "{version}: step {i}"
                );
                assert!(
                    matches!(replay(true), Replayed::Stopped { steps: 6, .. }),
                    "{version}"
                );
                write(&key_of(i));
            }
            assert!(
                matches!(replay(false), Replayed::Stopped { steps: 6, .. }),
                "{version}"
            );
            // A code word no code object can have (its key read as none): untrusted, the step
            // does not match; trusted, the word alone is compared.
            let mut odd = memo;
            put_bytes(at[1] + l.frame.code, &0x10usize.to_ne_bytes());
            // SAFETY: the test's own frame.
            let sig = Sig::read(l, &unsafe { Fields::direct(at[1], span) });
            odd.put(1, sig, Some(&key_of(1)), Outcome::Frame(101));
            let (mut out, mut budget) = ([0usize; 8], 100);
            let r = { odd }.replay(&hot, false, at[0], &mut out, &mut budget);
            assert!(matches!(r, Replayed::Stopped { steps: 1, .. }), "{version}");
            let r = { odd }.replay(&hot, true, at[0], &mut out, &mut budget);
            assert!(matches!(r, Replayed::Stopped { steps: 6, .. }), "{version}");
            drop(codes);
        }
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
            direct: false,
            plan: Some(&mut plan),
        };
        assert_eq!(reader.read::<u64>(here.as_ptr() as usize + 8), Some(8));
        assert!(
            plan.next[..plan.next_n].is_empty(),
            "nothing noted for the next capture's system call"
        );
    }
}
