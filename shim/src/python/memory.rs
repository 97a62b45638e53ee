//! Reads of the interpreter's memory that fail instead of faulting: the one door through which
//! `python/` looks at CPython's structures. Each read copies with `process_vm_readv` on this
//! process (as py-spy reads another's): an address that is unmapped, freed back to the kernel or
//! not readable gives `None` (the kernel answers EFAULT or a short count), never SIGSEGV. What it
//! must never do: dereference an interpreter pointer directly, or retry a read that failed.
//!
//! Why a system call and not a check: a thread state freed by `Py_FinalizeEx` while its thread is
//! inside a hook, a data-stack chunk unmapped, a frame of a thread torn down — any check of the
//! address (range, alignment, `mincore`) is stale by the time the pointer is followed; only a read
//! that the kernel performs and may fail closes the race.
//!
//! Where `process_vm_readv` is unavailable (ENOSYS on kernels without it, EPERM under seccomp
//! profiles that deny it) the first probe says so and [`available`] stays false: the caller then
//! records native stacks only and says so once. A fallback that reads anyway (a SIGSEGV handler,
//! or a pipe `write` of the range, which needs descriptors of the host's kept alive across fork
//! and `close_range`) would be either unsafe or a second mechanism to get right; native stacks are
//! still a correct report.
//!
//! Cost: one system call per read — 0.4 µs plus 0.18 µs per page touched on the H200 machine,
//! 1.7 µs plus 0.65 µs on the 2-core CI VM (2026-12-03) — so callers read a whole structure at
//! once and batch independent reads ([`read_scattered`]).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering};

/// `process_vm_readv` not yet tried / works / does not.
const UNKNOWN: u8 = 0;
const WORKS: u8 = 1;
const UNAVAILABLE: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// At most this many ranges go to one system call.
pub const MAX_SCATTER: usize = 32;

/// Whether reads can be made at all; probed once. `Err` carries the reason (an errno) the first
/// time the probe failed, for the one line the caller writes.
pub fn available() -> Result<(), i32> {
    match STATE.load(Ordering::Acquire) {
        WORKS => Ok(()),
        UNAVAILABLE => Err(0),
        _ => {
            let probe: u64 = 0x7079_7468_6f6e_2121;
            let mut out = [0u8; 8];
            let r = raw(&mut [(&probe as *const u64 as usize, &mut out[..])]);
            if r == Ok(8) && u64::from_ne_bytes(out) == probe {
                STATE.store(WORKS, Ordering::Release);
                Ok(())
            } else {
                STATE.store(UNAVAILABLE, Ordering::Release);
                Err(r.err().unwrap_or(0))
            }
        }
    }
}

/// Copies `buf.len()` bytes from `addr` into `buf`; `false` if any of them cannot be read.
pub fn read_into(addr: usize, buf: &mut [u8]) -> bool {
    if buf.is_empty() {
        return true;
    }
    let len = buf.len();
    STATE.load(Ordering::Relaxed) == WORKS && raw(&mut [(addr, buf)]) == Ok(len)
}

/// A plain value at `addr`, or `None` if it cannot be read.
pub fn read<T: Plain>(addr: usize) -> Option<T> {
    let mut buf = [0u8; 16];
    let buf = &mut buf[..std::mem::size_of::<T>()];
    read_into(addr, buf).then(|| T::from_bytes(buf))
}

/// Reads `ranges` (address, length) one after another into `out`, in one system call (at most
/// [`MAX_SCATTER`] ranges, and as many as `out` holds), and returns how many of them, from the
/// first, were read whole: the kernel stops at the first range it cannot read.
pub fn read_scattered(ranges: &[(usize, usize)], out: &mut [u8]) -> usize {
    if STATE.load(Ordering::Relaxed) != WORKS {
        return 0;
    }
    let mut bufs: [(usize, &mut [u8]); MAX_SCATTER] = Default::default();
    let mut rest = out;
    let mut n = 0;
    for &(addr, len) in ranges.iter().take(MAX_SCATTER) {
        if len > rest.len() {
            break;
        }
        let (buf, tail) = rest.split_at_mut(len);
        bufs[n] = (addr, buf);
        rest = tail;
        n += 1;
    }
    let Ok(mut got) = raw(&mut bufs[..n]) else {
        return 0;
    };
    let mut whole = 0;
    for (_, buf) in &bufs[..n] {
        if got < buf.len() {
            break;
        }
        got -= buf.len();
        whole += 1;
    }
    whole
}

/// One `process_vm_readv` of this process: bytes copied, or the errno. errno is restored.
fn raw(ranges: &mut [(usize, &mut [u8])]) -> Result<usize, i32> {
    let n = ranges.len().min(MAX_SCATTER);
    let mut local = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_SCATTER];
    let mut remote = local;
    for (i, (addr, buf)) in ranges.iter_mut().take(n).enumerate() {
        local[i] = libc::iovec {
            iov_base: buf.as_mut_ptr().cast::<c_void>(),
            iov_len: buf.len(),
        };
        remote[i] = libc::iovec {
            iov_base: *addr as *mut c_void,
            iov_len: buf.len(),
        };
    }
    // Any thread id of this process names its memory; this thread's is cached (and forgotten in
    // a forked child), which saves a getpid per read.
    let tid = crate::thread::with(crate::guard::thread_id) as libc::pid_t;
    // SAFETY: the local iovecs describe buffers this function holds exclusively for the call; the
    // remote ones are only read by the kernel, which checks them and fails instead of faulting.
    // errno is the program's: saved and restored around the call.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        let r = libc::process_vm_readv(tid, local.as_ptr(), n as _, remote.as_ptr(), n as _, 0);
        let err = *errno;
        *errno = saved;
        if r < 0 {
            Err(err)
        } else {
            Ok(r as usize)
        }
    }
}

/// Values that any bit pattern makes valid, read from interpreter memory.
pub trait Plain: Copy {
    fn from_bytes(b: &[u8]) -> Self;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            fn from_bytes(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(a)
            }
        }
    )*};
}
plain!(u8, u16, u32, u64, usize, i32, i64, isize);

/// A range of interpreter memory, for reading fields at offsets into it: a copy of it, or (for a
/// reader that may load from it directly) the range itself.
pub struct Fields<'a> {
    start: *const u8,
    len: usize,
    _copy: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> Fields<'a> {
    /// Fields of a copy.
    pub fn new(copy: &'a [u8]) -> Fields<'a> {
        Fields {
            start: copy.as_ptr(),
            len: copy.len(),
            _copy: std::marker::PhantomData,
        }
    }

    /// Fields read straight from `[addr, addr + len)`, with plain loads and no copy.
    ///
    /// # Safety
    /// The range must stay mapped and readable while the result is used, and hold one structure
    /// that no other thread frees meanwhile (python/walk.rs: `Reader::direct`).
    pub unsafe fn direct(addr: usize, len: usize) -> Fields<'a> {
        Fields {
            start: addr as *const u8,
            len,
            _copy: std::marker::PhantomData,
        }
    }

    /// The value at byte `offset` of the range (`None` past its end).
    pub fn get<T: Plain>(&self, offset: usize) -> Option<T> {
        let end = offset.checked_add(std::mem::size_of::<T>())?;
        if end > self.len {
            return None;
        }
        // SAFETY: inside the range, which `new` borrows or `direct`'s caller vouches for; `T`
        // is valid for any bits and read unaligned.
        Some(unsafe { std::ptr::read_unaligned(self.start.add(offset).cast::<T>()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> usize {
        // SAFETY: sysconf has no preconditions.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
    }

    /// Two pages, the second made unreadable (`PROT_NONE`) or unmapped.
    fn two_pages(unmap_second: bool) -> usize {
        let p = page();
        // SAFETY: a fresh anonymous mapping; its second page is then protected or unmapped.
        unsafe {
            let m = libc::mmap(
                std::ptr::null_mut(),
                2 * p,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            let m = m as usize;
            std::ptr::write_bytes(m as *mut u8, 0xab, p);
            let r = if unmap_second {
                libc::munmap((m + p) as *mut c_void, p)
            } else {
                libc::mprotect((m + p) as *mut c_void, p, libc::PROT_NONE)
            };
            assert_eq!(r, 0);
            m
        }
    }

    #[test]
    fn reads_of_unmapped_or_unreadable_memory_fail_instead_of_faulting() {
        assert_eq!(available(), Ok(()), "process_vm_readv works here");
        for unmap in [false, true] {
            let m = two_pages(unmap);
            let bad = m + page();
            assert_eq!(read::<u64>(bad), None, "unmap: {unmap}");
            assert_eq!(read::<u8>(bad + 100), None, "unmap: {unmap}");
            // A range that starts readable and runs into the bad page fails whole.
            let mut buf = [0u8; 64];
            assert!(!read_into(bad - 32, &mut buf), "unmap: {unmap}");
            // The readable page still reads.
            assert_eq!(read::<u64>(bad - 8), Some(0xabab_abab_abab_abab));
            // SAFETY: unmapping what two_pages mapped.
            unsafe { libc::munmap(m as *mut c_void, 2 * page()) };
        }
        assert_eq!(read::<u64>(0), None, "null");
        assert_eq!(read::<u64>(usize::MAX - 3), None, "wraps around");
        assert_eq!(read::<u64>(1 << 62), None, "not a user address");
    }

    #[test]
    fn scattered_reads_count_the_ranges_read_whole_until_the_first_that_fails() {
        assert_eq!(available(), Ok(()));
        let m = two_pages(true);
        let values: [u64; 3] = [1, 2, 3];
        let base = values.as_ptr() as usize;
        let mut out = [0u8; 32];
        let ranges = [(base, 8), (base + 8, 8), (m + page(), 8), (base + 16, 8)];
        assert_eq!(read_scattered(&ranges, &mut out), 2);
        assert_eq!(Fields::new(&out).get::<u64>(0), Some(1));
        assert_eq!(Fields::new(&out).get::<u64>(8), Some(2));
        assert_eq!(read_scattered(&[(base + 16, 8), (base, 4)], &mut out), 2);
        assert_eq!(Fields::new(&out).get::<u64>(0), Some(3));
        assert_eq!(
            read_scattered(&[(base, 16), (base, 8)], &mut out[..20]),
            1,
            "out is short"
        );
        // SAFETY: unmapping what two_pages mapped (its second page is already gone).
        unsafe { libc::munmap(m as *mut c_void, page()) };
    }

    #[test]
    fn errno_is_left_as_it_was() {
        assert_eq!(available(), Ok(()));
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = 1234 };
        assert_eq!(read::<u64>(8), None);
        // SAFETY: this thread's errno, valid for reads.
        assert_eq!(unsafe { *libc::__errno_location() }, 1234);
    }

    #[test]
    fn fields_are_read_inside_the_copy_only() {
        let bytes = 0x1122_3344_5566_7788u64.to_ne_bytes();
        let c = Fields::new(&bytes);
        assert_eq!(c.get::<u32>(4), Some(0x1122_3344));
        assert_eq!(c.get::<u64>(1), None);
        assert_eq!(c.get::<u8>(usize::MAX), None);
    }
}
