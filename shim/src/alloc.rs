//! The shim's own heap: every allocation the shim's Rust code makes comes from here, never from
//! the C library's `malloc`.
//!
//! Why: the shim runs inside a program that may be interrupted anywhere, `malloc` included. A
//! terminating signal's dump is written by the worker thread while the interrupted thread waits;
//! had that dump allocated through `malloc`, an arena lock the interrupted thread held (or a
//! thread recording under one of our locks was waiting for) would have stalled it for good
//! (seen: SIGTERM with the main thread in `malloc`, 5 of 5 runs stalled 10 s and lost the dump).
//! Our heap's lock is one of the shim's own ([`crate::lock`]), so holding it is a critical
//! section: the signal waits until it is released ([`crate::critical`]).
//!
//! Small blocks come from talc (a general-purpose allocator over spans this file maps) behind one
//! lock, which the shim's allocation rate never contends: hooks allocate only when they meet a new
//! stack or the table grows). Blocks of [`LARGE`] bytes or more are mappings of their own,
//! returned to the system when freed, so a dump of a million blocks does not leave its 100 MB
//! of scratch space behind, nor the table's hash maps the arrays they outgrew. Spans given to
//! talc are kept for the life of the process.
//!
//! Must never call `malloc`, panic, or take any lock but its own.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::{self, NonNull};

use talc::{OomHandler, Span, Talc};

use crate::lock::Mutex;

/// Allocations this large or larger are mappings of their own. 32 KiB: a shard's hash map of
/// live blocks outgrows arrays of 1 024 buckets and up as the table grows, and talc kept every
/// such array it freed (at 256 KiB, a million live blocks held 105 bytes each; at 32 KiB, 97).
const LARGE: usize = 32 << 10;
/// The smallest span given to talc at a time; later ones grow with the heap.
const SPAN_MIN: usize = 1 << 20;
const SPAN_MAX: usize = 32 << 20;
const PAGE: usize = 4096;

/// Spans remembered per heap: enough for a heap of many GiB of small blocks (spans grow to
/// [`SPAN_MAX`]); only a heap that had to be replaced in a child made without fork() needs them.
const MAX_SPANS: usize = 512;

/// Maps a new span when talc runs out: at least the request, at least [`SPAN_MIN`], and as much
/// again as the heap already has (up to [`SPAN_MAX`]), so a growing heap maps few spans.
pub struct MapOnOom {
    mapped: usize,
    spans: [(usize, usize); MAX_SPANS],
    count: usize,
}

impl MapOnOom {
    const fn new() -> MapOnOom {
        MapOnOom {
            mapped: 0,
            spans: [(0, 0); MAX_SPANS],
            count: 0,
        }
    }

    /// Whether `p` lies in a span of this heap.
    fn contains(&self, p: *mut u8) -> bool {
        let p = p as usize;
        self.spans[..self.count]
            .iter()
            .any(|&(base, size)| p >= base && p < base + size)
    }
}

impl OomHandler for MapOnOom {
    fn handle_oom(talc: &mut Talc<Self>, layout: Layout) -> Result<(), ()> {
        // Room for talc's own tags and the alignment padding beside the request.
        let want = layout.size() + layout.align() + 64;
        let grow = talc.oom_handler.mapped.clamp(SPAN_MIN, SPAN_MAX);
        let size = round_up(want.max(grow), PAGE);
        let base = map(size).ok_or(())?;
        let h = &mut talc.oom_handler;
        h.mapped += size;
        if h.count < MAX_SPANS {
            h.spans[h.count] = (base.as_ptr() as usize, size);
            h.count += 1;
        }
        // SAFETY: the span is a fresh private mapping of `size` bytes that nothing else uses.
        unsafe { talc.claim(Span::from_base_size(base.as_ptr(), size)) }.map(|_| ())
    }
}

struct Small {
    talc: Talc<MapOnOom>,
    /// This heap replaced one a child made without fork() could not use ([`Heap::reset_in_raw_child`]):
    /// a block of the old one is never freed into this one.
    replaced: bool,
}

impl Small {
    const fn new(replaced: bool) -> Small {
        Small {
            talc: Talc::new(MapOnOom::new()),
            replaced,
        }
    }

    /// Whether `p` came from a heap this one replaced: then it is left alone (leaked).
    fn foreign(&self, p: *mut u8) -> bool {
        self.replaced && !self.talc.oom_handler.contains(p)
    }
}

pub struct Heap {
    small: Mutex<Small>,
}

impl Heap {
    pub const fn new() -> Heap {
        Heap {
            small: Mutex::new(Small::new(false)),
        }
    }

    /// Takes the heap's lock and keeps it (before fork; see `State::lock_all`).
    pub fn lock(&self) {
        std::mem::forget(self.small.lock());
    }

    /// Releases what [`Heap::lock`] took.
    ///
    /// # Safety
    /// Only after `lock`, on the thread that called it (or its forked copy).
    pub unsafe fn unlock(&self) {
        // SAFETY: per the contract, the lock is held by a forgotten guard.
        unsafe { self.small.force_unlock() };
    }

    /// In a child made without fork(), where no fork handler took the lock first: if a thread of
    /// the parent held it at that instant, it stays held for good and what it guards may be
    /// half-updated. The child then gets a new, empty heap; the old one's spans are left as they
    /// are (its blocks are never freed, only leaked). Returns whether that happened.
    pub fn reset_in_raw_child(&self) -> bool {
        if self.small.try_lock().is_some() {
            return false;
        }
        // The release below counts as leaving a critical section: one this thread never entered.
        crate::critical::enter();
        // SAFETY: its holder does not exist in this process; the word is ours to reset.
        unsafe { self.small.force_unlock() };
        // The old state is overwritten, never dropped: talc has no destructor to run anyway.
        *self.small.lock() = Small::new(true);
        true
    }
}

impl Default for Heap {
    fn default() -> Heap {
        Heap::new()
    }
}

fn is_large(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= PAGE
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

fn map(size: usize) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        None
    } else {
        NonNull::new(p.cast())
    }
}

// SAFETY: small blocks are talc's (sound behind its lock); a large block is a mapping of exactly
// round_up(size, PAGE) bytes, page-aligned (which satisfies any alignment up to PAGE, the only
// ones routed there), unmapped or remapped with the same length computed from the layout.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            return map(round_up(layout.size(), PAGE)).map_or(ptr::null_mut(), NonNull::as_ptr);
        }
        // SAFETY: per GlobalAlloc's contract (layout.size() is not 0).
        unsafe { self.small.lock().talc.malloc(layout) }.map_or(ptr::null_mut(), NonNull::as_ptr)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            // Anonymous mappings are zero-filled.
            // SAFETY: as alloc.
            return unsafe { self.alloc(layout) };
        }
        // SAFETY: as alloc; the block is layout.size() bytes.
        unsafe {
            let p = self.alloc(layout);
            if !p.is_null() {
                ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if is_large(layout) {
            // SAFETY: p is a mapping made by alloc for this layout.
            unsafe { libc::munmap(p.cast(), round_up(layout.size(), PAGE)) };
            return;
        }
        let mut small = self.small.lock();
        if small.foreign(p) {
            return;
        }
        // SAFETY: per GlobalAlloc's contract, p is a live small block of this layout.
        unsafe { small.talc.free(NonNull::new_unchecked(p), layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: per GlobalAlloc's contract, the new layout is valid.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_large(layout), is_large(new_layout)) {
            (true, true) => {
                // SAFETY: p is a mapping of the old length; the kernel moves it if it must.
                let q = unsafe {
                    libc::mremap(
                        p.cast(),
                        round_up(layout.size(), PAGE),
                        round_up(new_size, PAGE),
                        libc::MREMAP_MAYMOVE,
                    )
                };
                if q == libc::MAP_FAILED {
                    ptr::null_mut()
                } else {
                    q.cast()
                }
            }
            // SAFETY: per GlobalAlloc's contract, p is a live small block of `layout`.
            (false, false) if !self.small.lock().foreign(p) => unsafe {
                let p = NonNull::new_unchecked(p);
                let mut small = self.small.lock();
                match new_size.cmp(&layout.size()) {
                    std::cmp::Ordering::Greater => small
                        .talc
                        .grow(p, layout, new_size)
                        .map_or(ptr::null_mut(), NonNull::as_ptr),
                    std::cmp::Ordering::Less => {
                        small.talc.shrink(p, layout, new_size);
                        p.as_ptr()
                    }
                    std::cmp::Ordering::Equal => p.as_ptr(),
                }
            },
            _ => {
                // Across the line between the two kinds, or out of a replaced heap: a new block,
                // the bytes, the old one freed (or, from a replaced heap, left).
                // SAFETY: new_layout is valid; both blocks are live for the copy.
                unsafe {
                    let q = self.alloc(new_layout);
                    if !q.is_null() {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                    q
                }
            }
        }
    }
}

/// The shim's heap, for the whole cdylib (not for unit tests, which test a `Heap` of their own
/// beside the test harness's allocator).
#[cfg(not(test))]
#[global_allocator]
pub static HEAP: Heap = Heap::new();

/// Before fork: takes the heap's lock, so the child cannot inherit it held by a thread that does
/// not exist there. Taken last, after every other lock of the shim.
pub fn lock_for_fork() {
    #[cfg(not(test))]
    HEAP.lock();
}

/// After fork, on both sides, before anything of the shim allocates again.
///
/// # Safety
/// Only after [`lock_for_fork`], on the thread that called it (or its forked copy).
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract.
    #[cfg(not(test))]
    unsafe {
        HEAP.unlock()
    };
}

/// In a child made without fork(): see [`Heap::reset_in_raw_child`]. Returns whether the heap
/// had to be replaced.
pub fn reset_in_raw_child() -> bool {
    #[cfg(not(test))]
    return HEAP.reset_in_raw_child();
    #[cfg(test)]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_blocks_keep_their_bytes_through_every_realloc() {
        let heap = Heap::new();
        // SAFETY: every block is used within its layout and freed with it.
        unsafe {
            let mut layout = Layout::from_size_align(24, 8).unwrap();
            let mut p = heap.alloc(layout);
            assert!(!p.is_null());
            for i in 0..24 {
                *p.add(i) = i as u8;
            }
            // small -> small -> large -> larger -> small
            for new_size in [1000, 300 << 10, 3 << 20, 100] {
                p = heap.realloc(p, layout, new_size);
                assert!(!p.is_null());
                layout = Layout::from_size_align(new_size, 8).unwrap();
                for i in 0..24 {
                    assert_eq!(*p.add(i), i as u8, "byte {i} after realloc to {new_size}");
                }
                *p.add(new_size - 1) = 0xaa;
            }
            heap.dealloc(p, layout);
        }
    }

    #[test]
    fn a_heap_replaced_after_a_raw_fork_leaves_old_blocks_alone_and_serves_new_ones() {
        let heap = Heap::new();
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: blocks are used within their layouts; the old one is handed back after the
        // reset, which must leave it alone rather than free it into the new heap.
        unsafe {
            let old = heap.alloc(small);
            *old = 7;
            assert!(
                !heap.reset_in_raw_child(),
                "a free lock: nothing to replace"
            );
            // A lock held by a thread that is gone (as a parent's thread in a raw child).
            std::mem::forget(heap.small.lock());
            assert!(heap.reset_in_raw_child());
            heap.dealloc(old, small);
            assert_eq!(*old, 7, "the old heap's block was not reused");
            let grown = heap.alloc(small);
            *grown = 9;
            let grown = heap.realloc(grown, small, 4000);
            assert_eq!(*grown, 9);
            let moved = heap.realloc(old, small, 200);
            assert_eq!(*moved, 7, "a realloc out of the old heap copies");
            heap.dealloc(moved, Layout::from_size_align(200, 8).unwrap());
            heap.dealloc(grown, Layout::from_size_align(4000, 8).unwrap());
        }
    }

    #[test]
    fn large_zeroed_blocks_are_zero_and_page_aligned() {
        let heap = Heap::new();
        let layout = Layout::from_size_align(LARGE + 1, 64).unwrap();
        // SAFETY: the block is read within its layout and freed with it.
        unsafe {
            let p = heap.alloc_zeroed(layout);
            assert_eq!(p as usize % PAGE, 0);
            assert!((0..layout.size()).all(|i| *p.add(i) == 0));
            heap.dealloc(p, layout);
        }
    }

    #[test]
    fn many_threads_allocate_and_free_without_losing_blocks() {
        let heap = Heap::new();
        std::thread::scope(|s| {
            for t in 0..8usize {
                let heap = &heap;
                s.spawn(move || {
                    let layout = Layout::from_size_align(48, 16).unwrap();
                    let mut blocks = Vec::new();
                    for i in 0..5_000usize {
                        // SAFETY: blocks are written within their layout and freed with it.
                        unsafe {
                            let p = heap.alloc(layout);
                            assert!(!p.is_null());
                            *(p as *mut usize) = t * 1_000_000 + i;
                            blocks.push(p);
                        }
                    }
                    for (i, p) in blocks.into_iter().enumerate() {
                        // SAFETY: p is a live 48-byte block of this layout, written above; it is
                        // read and then freed with the layout it was allocated with.
                        unsafe {
                            assert_eq!(*(p as *mut usize), t * 1_000_000 + i);
                            heap.dealloc(p, layout);
                        }
                    }
                });
            }
        });
    }
}
