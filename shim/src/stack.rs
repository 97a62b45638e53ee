//! Capture of return addresses at an allocation, with the shim's own frames left out, and
//! interning, so each distinct stack is stored once and records carry a 4-byte id.
//!
//! Capture must not take any lock another thread could hold while calling into us.

use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::hash::StackHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::config::Unwind;
use crate::limits::{MAX_DEPTH, MAX_PY_DEPTH};
use crate::lock::{ForkLock, ForkLocked, Mutex};

/// Index of an interned stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

impl StackId {
    /// Whether this id names a stack with Python frames (interned by [`with_python`]).
    pub fn has_python(self) -> bool {
        self.0 & PYTHON_BIT != 0
    }
}

/// Marks ids of stacks with Python frames. Native ids stay below it: the interner's ids are
/// `index << 4 | shard`, far from 2^31 for any real number of distinct stacks.
const PYTHON_BIT: u32 = 1 << 31;

/// The id of a native stack together with the Python frames `capture` writes (at most `depth`):
/// since CPython 3.11 a Python-to-Python call adds no native frame, so two Python call paths can
/// share one native stack (and one walk cache answer); the Python frames are part of the
/// identity. `native` itself when there are none.
pub fn with_python(
    mixed: &Interner,
    native: StackId,
    depth: usize,
    capture: impl FnOnce(&mut [usize]) -> usize,
) -> StackId {
    // A buffer sized for the usual depth, so most captures do not clear 2 KiB of stack.
    if depth < RECENT_WORDS {
        let mut key = [0usize; RECENT_WORDS];
        intern_python(mixed, native, &mut key[..=depth], capture)
    } else {
        let mut key = [0usize; 1 + MAX_PY_DEPTH];
        let depth = depth.min(MAX_PY_DEPTH);
        intern_python(mixed, native, &mut key[..=depth], capture)
    }
}

fn intern_python(
    mixed: &Interner,
    native: StackId,
    key: &mut [usize],
    capture: impl FnOnce(&mut [usize]) -> usize,
) -> StackId {
    let n = capture(&mut key[1..]);
    if n == 0 {
        return native;
    }
    key[0] = native.0 as usize;
    let key = &key[..=n];
    // A loop allocating from one line asks for the same key again and again: the thread's last
    // few answers are checked before the shared interner (ids never change once given).
    let recent = RECENT
        .try_with(|r| {
            let r = r.try_borrow().ok()?;
            r.iter()
                .find(|e| usize::from(e.len) == key.len() && e.words[..key.len()] == *key)
                .map(|e| e.id)
        })
        .ok()
        .flatten();
    if let Some(id) = recent {
        return StackId(id);
    }
    let id = mixed.intern(key).0 | PYTHON_BIT;
    if key.len() <= RECENT_WORDS {
        let _ = RECENT.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                let slot = r.iter().position(|e| e.len == 0).unwrap_or_else(|| {
                    r.rotate_right(1);
                    0
                });
                let e = &mut r[slot];
                e.len = key.len() as u8;
                e.words[..key.len()].copy_from_slice(key);
                e.id = id;
            }
        });
    }
    StackId(id)
}

/// Words of a remembered key: a native id and up to 32 Python frames.
const RECENT_WORDS: usize = 33;

#[derive(Clone, Copy)]
struct Recent {
    len: u8,
    words: [usize; RECENT_WORDS],
    id: u32,
}

const NO_RECENT: Recent = Recent {
    len: 0,
    words: [0; RECENT_WORDS],
    id: 0,
};

thread_local! {
    /// This thread's last stacks with Python frames. Plain `Copy` data: no destructor.
    static RECENT: std::cell::RefCell<[Recent; 4]> = const { std::cell::RefCell::new([NO_RECENT; 4]) };
}

/// The native stack id and the Python frames of an id made by [`with_python`].
pub fn split_python(mixed: &Interner, id: StackId) -> Option<(StackId, Box<[usize]>)> {
    let key = mixed.get(StackId(id.0 & !PYTHON_BIT))?;
    let (&native, python) = key.split_first()?;
    Some((StackId(native as u32), python.into()))
}

const SHARD_BITS: u32 = 4;
const SHARDS: usize = 1 << SHARD_BITS;

/// Captures that walked, and captures the cache answered (for the dump's summary).
pub static WALKS: AtomicU64 = AtomicU64::new(0);
pub static REUSES: AtomicU64 = AtomicU64::new(0);

static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_END: AtomicUsize = AtomicUsize::new(0);

/// Finds the address range of this library's loaded segments, so capture can skip its frames.
pub fn init_own_range() {
    let own = find_own_range();
    OWN_START.store(own.start, Ordering::Relaxed);
    OWN_END.store(own.end, Ordering::Relaxed);
}

/// The address range of the loaded segments of the module holding this function (the shim),
/// or an empty range if the loader does not list it.
fn find_own_range() -> Range<usize> {
    let target = find_own_range as *const () as usize;
    let mut found = 0..0;
    crate::objects::each(|o| {
        let span = o.span();
        let hit = span.contains(&target);
        if hit {
            found = span;
        }
        hit
    });
    found
}

/// What [`init_own_range`] found (empty before it ran).
fn own_range() -> Range<usize> {
    OWN_START.load(Ordering::Relaxed)..OWN_END.load(Ordering::Relaxed)
}

/// The return addresses a walk read, with the stack slot each was read from: from the first
/// frame outside the shim on, including any of the shim's frames further out (a runtime forward).
#[derive(Clone, Copy)]
struct Checks {
    n: usize,
    slot: [usize; MAX_CHECKS],
    value: [usize; MAX_CHECKS],
}

const MAX_CHECKS: usize = CACHED_DEPTH + 8;

/// Writes up to `depth` return addresses of the caller's stack into `buf`, innermost first,
/// leaving out the unwinder's and the shim's frames; returns how many. With `checks`, also
/// records where each return address was read, and says whether the walk can be cached (every
/// slot verified to hold its address).
///
/// A frame of the shim's further out than the first foreign one is a runtime forward
/// (`cudaMalloc`): the frames collected so far are the CUDA runtime's own, between the forward
/// and the driver, and are dropped, so the stack starts at the program's call. With
/// [`Through::Forward`] the walk does not stop at `depth` before it has passed such a frame.
/// With [`Through::Library`] (an allocation a library makes inside its create call, which the
/// shim forwards) the library's frames are kept and the shim's are only left out.
fn walk(
    depth: usize,
    through: Through,
    buf: &mut [usize; MAX_DEPTH],
    checks: Option<&mut Checks>,
) -> (usize, bool) {
    walk_in(own_range(), depth, through, buf, checks)
}

/// [`walk`], with `own` as the shim's code.
fn walk_in(
    own_code: Range<usize>,
    depth: usize,
    through: Through,
    buf: &mut [usize; MAX_DEPTH],
    mut checks: Option<&mut Checks>,
) -> (usize, bool) {
    let depth = depth.min(MAX_DEPTH);
    let mut n = 0;
    let mut seen_own = false;
    let mut collecting = false;
    let mut passed_forward = through != Through::Forward;
    let mut cacheable = checks.is_some() && depth <= CACHED_DEPTH;
    // SAFETY: libgcc's _Unwind_Backtrace, which this uses on Linux, is thread-safe; the
    // unsynchronised variant avoids the crate's global lock, which a nested call would hit.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as usize;
            let own = own_code.contains(&ip);
            collecting |= seen_own && !own && ip != 0;
            seen_own |= own;
            // libgcc reports each return address with the CFA of the frame it returns from:
            // the address was read from just below that CFA.
            let cfa = frame.sp() as usize;
            if collecting && ip != 0 {
                if let Some(c) = checks.as_deref_mut() {
                    if c.n < MAX_CHECKS && cfa >= 8 {
                        let slot = cfa - 8;
                        c.slot[c.n] = slot;
                        c.value[c.n] = ip;
                        c.n += 1;
                        // The unwinder just read this return address from that slot of this
                        // thread's live stack.
                        cacheable &= (slot as *const usize).read() == ip;
                    } else {
                        cacheable = false;
                    }
                }
                if own {
                    if through != Through::Library {
                        n = 0;
                    }
                    passed_forward = true;
                } else if n < MAX_DEPTH {
                    buf[n] = ip;
                    n += 1;
                }
            }
            n < depth || (!passed_forward && n < MAX_DEPTH)
        });
    }
    (n.min(depth), cacheable && n > 0)
}

/// What lies between the program's call and the hook that records: how [`walk`] treats a frame
/// of the shim further out than the first foreign one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Through {
    /// Nothing: the program called the driver hook.
    Direct,
    /// A runtime forward and the CUDA runtime: its frames are dropped.
    Forward,
    /// A library's call the shim forwards (`hooks::libraries`) and the library: its frames kept.
    Library,
}

impl Through {
    fn of(through_forward: bool) -> Through {
        if through_forward {
            Through::Forward
        } else {
            Through::Direct
        }
    }
}

/// The interned stack of an allocation a library makes inside a call the shim forwards (a
/// handle's create): the library's frames, then the program's. Walked every time (rare calls).
pub fn capture_in_library(interner: &Interner, depth: usize) -> StackId {
    walk_interned(interner, depth, Through::Library)
}

/// A walk, interned. Out of line: its 2 KiB buffer stays off the frame of a capture the walk
/// cache answers.
#[inline(never)]
fn walk_interned(interner: &Interner, depth: usize, through: Through) -> StackId {
    WALKS.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0usize; MAX_DEPTH];
    let n = walk(depth, through, &mut buf, None).0;
    interner.intern(&buf[..n])
}

/// Stacks deeper than this are never cached.
const CACHED_DEPTH: usize = 64;
const CACHE_SETS: usize = 16;
const CACHE_WAYS: usize = 4;

/// One walk remembered: the stack pointer it started from, where each return address was and
/// what it was, and the interned id. A later capture from the same stack pointer whose slots
/// all hold the same addresses has the same stack: its frames are where they were, and the
/// unwinder would read exactly these values again.
///
/// Laid out for the check a hit makes among cold caches: the header and the first addresses
/// share the entry's first line, and the slots follow as 32-bit offsets above the stack
/// pointer (a shallow stack's check reads three lines of the entry, not five).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    sp: usize,
    id: StackId,
    n: u16,
    key: u8,
    values: [usize; MAX_CHECKS],
    offsets: [u32; MAX_CHECKS],
}

impl Entry {
    /// The entry of a walk from `sp` whose slots are `checks`; `None` if a slot is not above
    /// `sp` by less than 4 GiB (never on a thread's own stack).
    fn new(sp: usize, key: u8, checks: &Checks, id: StackId) -> Option<Entry> {
        let mut entry = Entry {
            sp,
            id,
            n: checks.n as u16,
            key,
            values: checks.value,
            offsets: [0; MAX_CHECKS],
        };
        for (offset, &slot) in entry.offsets.iter_mut().zip(&checks.slot[..checks.n]) {
            *offset = u32::try_from(slot.checked_sub(sp)?).ok()?;
        }
        Some(entry)
    }
}

/// A small per-thread set-associative cache of walks, for allocation loops.
struct WalkCache {
    /// This thread's stack bounds: cached slots are only ever read inside them.
    stack: std::ops::Range<usize>,
    /// Hits, added to [`REUSES`] 256 at a time (and the rest when the thread ends).
    reuses: u64,
    /// Grown as walks are made: a thread that allocates from two places holds two entries
    /// (about 1.2 KiB each), not the whole cache.
    sets: [Vec<Entry>; CACHE_SETS],
    next_way: [u8; CACHE_SETS],
    /// Walks from one stack pointer and hook whose return addresses sit in the same slots (the
    /// frames have the same sizes) but differ: a loop calling many allocation sites in turn, more
    /// than a set's ways hold. Asked when the sets miss.
    shapes: Vec<Shape>,
    next_shape: usize,
}

/// Every walk remembered from one stack pointer and hook with the same slots, by the return
/// addresses found in them. The same proof as an [`Entry`]'s: the same stack pointer, slots
/// holding the same addresses, so the same frames.
struct Shape {
    sp: usize,
    key: u8,
    slots: Box<[usize]>,
    ids: HashMap<Box<[usize]>, StackId, BuildHasherDefault<StackHasher>>,
}

/// Shapes kept per thread, and walks per shape (about 200 bytes each at 22 frames): a bound
/// on the memory (at most about 1.6 MiB a thread at 22 frames, 5 MiB at 64), not a size a loop
/// is expected to reach.
const MAX_SHAPES: usize = 4;
const MAX_SHAPE_WALKS: usize = 2048;

impl WalkCache {
    fn new() -> WalkCache {
        WalkCache {
            stack: thread_stack(),
            reuses: 0,
            sets: Default::default(),
            next_way: [0; CACHE_SETS],
            shapes: Vec::new(),
            next_shape: 0,
        }
    }

    fn lookup_shape(&self, sp: usize, key: u8) -> Option<StackId> {
        let shape = self.shapes.iter().find(|s| s.sp == sp && s.key == key)?;
        let mut values = [0usize; MAX_CHECKS];
        for (v, &slot) in values.iter_mut().zip(shape.slots.iter()) {
            // SAFETY: as in `lookup`: the slots were checked to lie in this thread's stack when
            // the shape was made, above the stack pointer they were recorded from, which is the
            // current one.
            *v = unsafe { (slot as *const usize).read_volatile() };
        }
        shape.ids.get(&values[..shape.slots.len()]).copied()
    }

    /// Remembers a walk in its shape (called after [`WalkCache::insert`] accepted it).
    fn insert_shape(&mut self, sp: usize, key: u8, checks: &Checks, id: StackId) {
        let slots = &checks.slot[..checks.n];
        let values = &checks.value[..checks.n];
        let i = match self.shapes.iter().position(|s| s.sp == sp && s.key == key) {
            Some(i) => i,
            None if self.shapes.len() < MAX_SHAPES => {
                self.shapes.push(Shape {
                    sp,
                    key,
                    slots: slots.into(),
                    ids: HashMap::default(),
                });
                self.shapes.len() - 1
            }
            None => {
                let i = self.next_shape % MAX_SHAPES;
                self.next_shape = self.next_shape.wrapping_add(1);
                self.shapes[i].sp = sp;
                self.shapes[i].key = key;
                self.shapes[i].ids.clear();
                i
            }
        };
        let shape = &mut self.shapes[i];
        if *shape.slots != *slots {
            // Frames of other sizes from here: the shape starts again.
            shape.slots = slots.into();
            shape.ids.clear();
        }
        if shape.ids.len() >= MAX_SHAPE_WALKS {
            shape.ids.clear();
        }
        shape.ids.insert(values.into(), id);
    }

    fn set_of(sp: usize, key: u8) -> usize {
        ((sp >> 4) ^ usize::from(key)).wrapping_mul(0x9e37_79b9) >> 8 & (CACHE_SETS - 1)
    }

    fn lookup(&self, sp: usize, key: u8) -> Option<StackId> {
        let set = &self.sets[Self::set_of(sp, key)];
        set.iter().find_map(|e| {
            if e.sp != sp || e.key != key {
                return None;
            }
            let n = usize::from(e.n);
            let same = e.offsets[..n]
                .iter()
                .zip(&e.values[..n])
                .all(|(&offset, &ip)| {
                    let slot = sp + offset as usize;
                    // SAFETY: slot lies inside this thread's stack (`insert` keeps no entry
                    // with a slot outside it, and a thread's stack does not move) and above the
                    // current stack pointer, which equals the one it was recorded from.
                    (unsafe { (slot as *const usize).read_volatile() }) == ip
                });
            same.then_some(e.id)
        })
    }

    fn insert(&mut self, sp: usize, key: u8, checks: &Checks, id: StackId) {
        if !self.stack.contains(&sp)
            || !checks.slot[..checks.n]
                .iter()
                .all(|s| self.stack.contains(s))
        {
            return;
        }
        let Some(entry) = Entry::new(sp, key, checks, id) else {
            return;
        };
        self.insert_shape(sp, key, checks, id);
        let set = Self::set_of(sp, key);
        let ways = &mut self.sets[set];
        if ways.len() < CACHE_WAYS {
            ways.push(entry);
        } else {
            let way = usize::from(self.next_way[set]) % CACHE_WAYS;
            self.next_way[set] = self.next_way[set].wrapping_add(1);
            ways[way] = entry;
        }
    }
}

impl Drop for WalkCache {
    fn drop(&mut self) {
        REUSES.fetch_add(self.reuses % 256, Ordering::Relaxed);
    }
}

/// The current thread's stack as [low, high), or an empty range if unknown.
pub fn thread_stack() -> std::ops::Range<usize> {
    // SAFETY: attr is initialised by pthread_getattr_np before use and destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0..0;
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            addr as usize..addr as usize + size
        } else {
            0..0
        }
    }
}

thread_local! {
    /// This thread's walk cache, dropped at the thread's end by [`CACHE_END`] (no drop glue: see
    /// [`crate::thread::ExitKey`]; a child made by `_Fork()` while a thread made its first
    /// allocation hung in `exit()`, about one run of `fork_stress 40 raw` in a hundred).
    static CACHE: std::mem::ManuallyDrop<std::cell::RefCell<Option<WalkCache>>> =
        const { std::mem::ManuallyDrop::new(std::cell::RefCell::new(None)) };
}

/// Drops a thread's walk cache at its end.
pub static CACHE_END: crate::thread::ExitKey = crate::thread::ExitKey::new(drop_cache_at_exit);

/// A thread that made a walk cache ends: its cache is dropped (its hits counted in [`REUSES`]).
extern "C" fn drop_cache_at_exit(_: *mut c_void) {
    crate::thread::drop_at_exit(&CACHE);
}

/// This thread's new walk cache, its end made known to [`drop_cache_at_exit`].
fn new_cache() -> WalkCache {
    CACHE_END.arm();
    WalkCache::new()
}

/// The interned stack of the caller. `key` tells apart call paths through the shim (the API),
/// whose own frames differ.
#[inline(never)]
pub fn capture_interned(
    interner: &Interner,
    depth: usize,
    key: u8,
    through_forward: bool,
    mode: Unwind,
) -> StackId {
    if mode == Unwind::Cached && cfg!(target_arch = "x86_64") {
        if let Some(id) = capture_cached(interner, depth, key, through_forward) {
            return id;
        }
    }
    walk_interned(interner, depth, Through::of(through_forward))
}

/// The walk cache's answer, walking (and remembering the walk) on a miss. `None` when this
/// thread's cache cannot be used (its thread-local storage is being torn down).
fn capture_cached(
    interner: &Interner,
    depth: usize,
    key: u8,
    through_forward: bool,
) -> Option<StackId> {
    let key = key | u8::from(through_forward) << 7;
    let sp = stack_pointer();
    CACHE
        .try_with(|w| {
            let mut w = w.try_borrow_mut().ok()?;
            let cache = w.get_or_insert_with(new_cache);
            if let Some(id) = cache
                .lookup(sp, key)
                .or_else(|| cache.lookup_shape(sp, key))
            {
                cache.reuses += 1;
                if cache.reuses % 256 == 0 {
                    REUSES.fetch_add(256, Ordering::Relaxed);
                }
                return Some(id);
            }
            Some(walk_and_remember(
                cache,
                interner,
                depth,
                key,
                through_forward,
                sp,
            ))
        })
        .ok()
        .flatten()
}

/// A walk the cache did not answer, interned and remembered under `sp` and `key`. Out of line:
/// only a walk needs the buffers (3 KiB, and more to clear), so a hit neither clears them nor
/// has them on its frame.
#[inline(never)]
fn walk_and_remember(
    cache: &mut WalkCache,
    interner: &Interner,
    depth: usize,
    key: u8,
    through_forward: bool,
    sp: usize,
) -> StackId {
    WALKS.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0usize; MAX_DEPTH];
    let mut checks = Checks {
        n: 0,
        slot: [0; MAX_CHECKS],
        value: [0; MAX_CHECKS],
    };
    let (n, cacheable) = walk(
        depth,
        Through::of(through_forward),
        &mut buf,
        Some(&mut checks),
    );
    let id = interner.intern(&buf[..n]);
    if cacheable {
        cache.insert(sp, key, &checks, id);
    }
    id
}

#[inline(always)]
fn stack_pointer() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let sp: usize;
        // SAFETY: reads the stack pointer register; no memory is touched.
        unsafe {
            std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        sp
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

#[derive(Default)]
struct InternShard {
    ids: HashMap<Box<[usize]>, u32, BuildHasherDefault<StackHasher>>,
    stacks: Vec<Box<[usize]>>,
}

/// Identical stacks share one id. Ids encode their shard in the low bits.
#[derive(Default)]
pub struct Interner {
    shards: [Mutex<InternShard>; SHARDS],
}

impl Interner {
    pub fn intern(&self, ips: &[usize]) -> StackId {
        let mut h = StackHasher::default();
        for &ip in ips {
            h.write_usize(ip);
        }
        let shard_index = (h.finish() >> (64 - SHARD_BITS)) as usize;
        let mut shard = self.shards[shard_index].lock();
        if let Some(&local) = shard.ids.get(ips) {
            return StackId(local << SHARD_BITS | shard_index as u32);
        }
        let local = shard.stacks.len() as u32;
        let owned: Box<[usize]> = ips.into();
        shard.stacks.push(owned.clone());
        shard.ids.insert(owned, local);
        StackId(local << SHARD_BITS | shard_index as u32)
    }

    /// The addresses of an interned stack.
    pub fn get(&self, id: StackId) -> Option<Box<[usize]>> {
        let shard = self.shards[(id.0 as usize) & (SHARDS - 1)].lock();
        shard.stacks.get((id.0 >> SHARD_BITS) as usize).cloned()
    }
}

impl ForkLocked for Interner {
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock)) {
        for shard in &self.shards {
            f(shard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_stacks_share_an_id_and_different_ones_do_not() {
        let i = Interner::default();
        let a = i.intern(&[1, 2, 3]);
        let b = i.intern(&[1, 2, 4]);
        assert_eq!(i.intern(&[1, 2, 3]), a);
        assert_ne!(a, b);
        assert_eq!(&*i.get(a).unwrap(), &[1, 2, 3]);
        assert_eq!(&*i.get(b).unwrap(), &[1, 2, 4]);
        assert_eq!(i.get(StackId(9999 << SHARD_BITS)), None);
    }

    #[test]
    fn many_stacks_keep_their_addresses() {
        let i = Interner::default();
        let ids: Vec<_> = (0..5000usize).map(|n| i.intern(&[n, n * 7, 42])).collect();
        for (n, id) in ids.into_iter().enumerate() {
            assert_eq!(&*i.get(id).unwrap(), &[n, n * 7, 42]);
        }
    }

    #[test]
    fn capture_skips_own_frames_and_stops_at_depth() {
        // Without an own range nothing is "after the shim", so nothing is taken. (The range is
        // passed in, not the global one: no test depends on another having set it.)
        let mut buf = [0usize; MAX_DEPTH];
        assert_eq!(walk_in(0..0, 8, Through::Direct, &mut buf, None).0, 0);
        // In a test binary "own" is the whole test executable: what remains are libc's
        // thread-start frames outside it.
        let own = find_own_range();
        let n = walk_in(own.clone(), 1, Through::Direct, &mut buf, None).0;
        assert_eq!(n, 1);
        assert!(!own.contains(&buf[0]));
        assert!(own.contains(&(capture_skips_own_frames_and_stops_at_depth as *const () as usize)));
    }
}
