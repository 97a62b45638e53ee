//! What the frameworks of a Python process say they hold: PyTorch's, JAX's and CuPy's own
//! counts, handed in by the Python bootstrap `cudaleak run` puts on `PYTHONPATH`
//! (`python/cudaleak/_bootstrap.py`) through [`cudaleak_framework_counters`], and at the
//! script's end the live blocks a framework's own record named ([`cudaleak_framework_end`]).
//! Every dump carries them (`format::Frameworks`); a snapshot starts the next interval of each
//! count's floor, as it does the stacks'.
//!
//! Lock-free: the reader is the dump (the worker, or a thread in a signal's dump) and the
//! writer a Python thread that may be stopped anywhere, so nothing here waits for anyone. A
//! count's slot is claimed once, by compare-and-swap of its key, and its numbers are separate
//! atomics: a dump taken while a read is being handed in may pair this read's bytes with the
//! previous one's blocks, which the floors, a least over many reads, do not notice.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use cudaleak_format as format;

/// The frameworks a count may name, by their `framework` field.
const FRAMEWORKS: [&str; 3] = ["torch", "jax", "cupy"];
/// The allocators behind a count (`backend`; the empty string for none).
const BACKENDS: [&str; 6] = ["", "native", "cudaMallocAsync", "bfc", "platform", "pool"];
/// Counts kept at once: a framework, backend and device each.
const SLOTS: usize = 32;
/// A number the bootstrap does not know.
const UNKNOWN: u64 = u64::MAX;

struct Slot {
    /// 0 while free; else `(framework + 1) << 40 | backend << 32 | device as u32`.
    key: AtomicU64,
    bytes: AtomicU64,
    floor_bytes: AtomicU64,
    blocks: AtomicU64,
    floor_blocks: AtomicU64,
    active_bytes: AtomicU64,
    reserved_bytes: AtomicU64,
    samples: AtomicU64,
    unix_ms: AtomicU64,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            key: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            floor_bytes: AtomicU64::new(UNKNOWN),
            blocks: AtomicU64::new(UNKNOWN),
            floor_blocks: AtomicU64::new(UNKNOWN),
            active_bytes: AtomicU64::new(UNKNOWN),
            reserved_bytes: AtomicU64::new(UNKNOWN),
            samples: AtomicU64::new(0),
            unix_ms: AtomicU64::new(0),
        }
    }
}

static COUNTS: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// When the bootstrap stopped reading (0: not yet).
static ENDED_MS: AtomicU64 = AtomicU64::new(0);
/// The records handed in at the end: set once, never freed (a dump may be reading them).
static RECORDS: AtomicPtr<Vec<format::FrameworkRecord>> = AtomicPtr::new(std::ptr::null_mut());

fn key(framework: &str, backend: &str, device: i32) -> Option<u64> {
    let f = FRAMEWORKS.iter().position(|&n| n == framework)? as u64;
    let b = BACKENDS.iter().position(|&n| n == backend)? as u64;
    (device >= 0).then_some(((f + 1) << 40) | (b << 32) | u64::from(device as u32))
}

/// The slot of `key`, claimed now if it has none; `None` when every slot is taken.
fn slot(key: u64) -> Option<&'static Slot> {
    for s in &COUNTS {
        match s
            .key
            .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(s),
            Err(k) if k == key => return Some(s),
            Err(_) => {}
        }
    }
    None
}

/// One read of one framework's count. Ignored once the bootstrap has ended.
pub fn count(framework: &str, backend: &str, device: i32, values: [u64; 4]) -> Result<(), c_int> {
    let k = key(framework, backend, device).ok_or(libc::EINVAL)?;
    if ENDED_MS.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let s = slot(k).ok_or(libc::ENOSPC)?;
    let [bytes, blocks, active, reserved] = values;
    if bytes == UNKNOWN {
        return Err(libc::EINVAL);
    }
    s.bytes.store(bytes, Ordering::Relaxed);
    s.blocks.store(blocks, Ordering::Relaxed);
    s.active_bytes.store(active, Ordering::Relaxed);
    s.reserved_bytes.store(reserved, Ordering::Relaxed);
    if s.floor_bytes.fetch_min(bytes, Ordering::AcqRel) > bytes {
        s.floor_blocks.store(blocks, Ordering::Relaxed);
    }
    s.samples.fetch_add(1, Ordering::Relaxed);
    s.unix_ms.store(crate::clock::unix_ms(), Ordering::Release);
    Ok(())
}

/// The bootstrap stopped reading: the counts stay as they are now. `records` (JSON: an array
/// of `format::FrameworkRecord`) go into every dump from then on; they may come with the end or
/// in a second call after it (reading a framework's record can take seconds, and the counts
/// must stop at the script's end, not after that read). The end counts once, the records too.
pub fn end(records: Option<&str>) -> Result<(), c_int> {
    let records: Vec<format::FrameworkRecord> = match records {
        Some(text) => format::FrameworkRecord::list_from_json(text).map_err(|_| libc::EINVAL)?,
        None => Vec::new(),
    };
    let first = ENDED_MS
        .compare_exchange(
            0,
            crate::clock::unix_ms().max(1),
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok();
    if records.is_empty() {
        return if first { Ok(()) } else { Err(libc::EEXIST) };
    }
    let p = Box::into_raw(Box::new(records));
    if RECORDS
        .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // SAFETY: `p` was made by Box::into_raw just above and was never shared.
        drop(unsafe { Box::from_raw(p) });
        return Err(libc::EEXIST);
    }
    Ok(())
}

/// What a dump lists; `None` when nothing was handed in. `snapshot`: this dump starts the
/// next interval, so each count's floor starts again at its last read.
pub fn read(snapshot: bool) -> Option<format::Frameworks> {
    let known = |v: u64| (v != UNKNOWN).then_some(v);
    let mut counters = Vec::new();
    for s in &COUNTS {
        let k = s.key.load(Ordering::Acquire);
        if k == 0 {
            break; // slots are claimed in order
        }
        let unix_ms = s.unix_ms.load(Ordering::Acquire);
        let bytes = s.bytes.load(Ordering::Relaxed);
        let floor = s.floor_bytes.load(Ordering::Relaxed).min(bytes);
        counters.push(format::FrameworkCounter {
            framework: FRAMEWORKS[((k >> 40) - 1) as usize].to_string(),
            backend: Some(BACKENDS[((k >> 32) & 0xff) as usize])
                .filter(|b| !b.is_empty())
                .map(str::to_string),
            device: (k & 0xffff_ffff) as u32 as i32,
            bytes,
            floor_bytes: floor,
            blocks: known(s.blocks.load(Ordering::Relaxed)),
            floor_blocks: known(s.floor_blocks.load(Ordering::Relaxed)),
            active_bytes: known(s.active_bytes.load(Ordering::Relaxed)),
            reserved_bytes: known(s.reserved_bytes.load(Ordering::Relaxed)),
            samples: s.samples.load(Ordering::Relaxed),
            unix_ms,
        });
        if snapshot && ENDED_MS.load(Ordering::Acquire) == 0 {
            s.floor_bytes.store(bytes, Ordering::Relaxed);
            s.floor_blocks
                .store(s.blocks.load(Ordering::Relaxed), Ordering::Relaxed);
            s.samples.store(0, Ordering::Relaxed);
        }
    }
    let ended = ENDED_MS.load(Ordering::Acquire);
    let records = RECORDS.load(Ordering::Acquire);
    // SAFETY: RECORDS is null or a Box leaked by `end`, stored once and never freed.
    let records = unsafe { records.as_ref() }.cloned().unwrap_or_default();
    if counters.is_empty() && ended == 0 && records.is_empty() {
        return None;
    }
    Some(format::Frameworks {
        counters,
        ended_unix_ms: (ended != 0).then_some(ended),
        records,
    })
}

/// A forked child starts with none of its parent's counts (its bootstrap reads its own).
pub fn reset_for_child() {
    for s in &COUNTS {
        s.key.store(0, Ordering::Relaxed);
        s.floor_bytes.store(UNKNOWN, Ordering::Relaxed);
        s.samples.store(0, Ordering::Relaxed);
    }
    ENDED_MS.store(0, Ordering::Relaxed);
    // The parent's records are left where they are, unread (the parent may still read them
    // through its own copy of this pointer; here it is simply forgotten).
    RECORDS.store(std::ptr::null_mut(), Ordering::Relaxed);
}

fn text<'a>(p: *const c_char) -> Option<&'a str> {
    // SAFETY: the callers' contracts: `p` is null or a NUL-terminated string.
    (!p.is_null())
        .then(|| unsafe { CStr::from_ptr(p) }.to_str().ok())
        .flatten()
}

/// One read of a framework's own count: `framework` is `torch`, `jax` or `cupy`; `backend`
/// (null for none) `native`, `cudaMallocAsync`, `bfc`, `platform` or `pool`; `values` holds `n`
/// numbers (the rest are unknown): bytes its live objects hold, its live blocks, active bytes,
/// reserved bytes, `UINT64_MAX` for one it does not know. Returns 0, or -1 with errno set:
/// `ENOTSUP` when this copy of the shim does not record, `EINVAL` for a name it does not know
/// or no bytes, `ENOSPC` when 32 counts are kept already.
///
/// # Safety
/// `framework` and `backend`, when not null, are NUL-terminated strings; `values` points to `n`
/// readable `u64`s.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cudaleak_framework_counters(
    framework: *const c_char,
    backend: *const c_char,
    device: c_int,
    values: *const u64,
    n: c_int,
) -> c_int {
    let r = crate::state::shield(|| {
        crate::state::get().ok_or(libc::ENOTSUP)?;
        let framework = text(framework).ok_or(libc::EINVAL)?;
        let backend = if backend.is_null() {
            ""
        } else {
            text(backend).ok_or(libc::EINVAL)?
        };
        if values.is_null() || n < 1 {
            return Err(libc::EINVAL);
        }
        let mut v = [UNKNOWN; 4];
        for (i, slot) in v.iter_mut().enumerate().take(n as usize) {
            // SAFETY: `values` holds `n` readable u64s (the function's contract), i < n.
            *slot = unsafe { values.add(i).read_unaligned() };
        }
        count(framework, backend, device, v)
    });
    crate::reply::answer(r.map(|r| r.map(|()| 0)))
}

/// The bootstrap stopped reading (the script's end): the counts stay as last read, and
/// `records` (null, or JSON text: an array of the framework records docs/dump-format.md
/// describes) go into every later dump. A first call may end without records and a second
/// bring them. Returns 0, or -1 with errno set: `ENOTSUP` when this copy of the shim does not
/// record, `EINVAL` for text it cannot read, `EEXIST` for an end or records given already.
///
/// # Safety
/// `records`, when not null, is a NUL-terminated string.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cudaleak_framework_end(records: *const c_char) -> c_int {
    let r = crate::state::shield(|| {
        crate::state::get().ok_or(libc::ENOTSUP)?;
        let text = if records.is_null() {
            None
        } else {
            Some(text(records).ok_or(libc::EINVAL)?)
        };
        end(text)
    });
    crate::reply::answer(r.map(|r| r.map(|()| 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The statics are the process's: one test walks through every step in order.
    #[test]
    fn counts_keep_floors_per_interval_and_freeze_at_the_end() {
        assert_eq!(read(false), None);
        assert_eq!(count("tensorflow", "", 0, [1, 0, 0, 0]), Err(libc::EINVAL));
        assert_eq!(count("torch", "odd", 0, [1, 0, 0, 0]), Err(libc::EINVAL));
        assert_eq!(
            count("torch", "native", -1, [1, 0, 0, 0]),
            Err(libc::EINVAL)
        );
        let u = UNKNOWN;
        count("torch", "native", 0, [4096, 4, 8192, 2 << 20]).unwrap();
        count("torch", "native", 0, [1024, 1, 8192, 2 << 20]).unwrap();
        count("torch", "native", 0, [3072, 3, 8192, 2 << 20]).unwrap();
        count("jax", "bfc", 1, [100, u, u, u]).unwrap();
        let f = read(true).unwrap();
        assert_eq!(f.counters.len(), 2);
        let t = &f.counters[0];
        assert_eq!(
            (t.framework.as_str(), t.backend.as_deref()),
            ("torch", Some("native"))
        );
        assert_eq!((t.device, t.bytes, t.floor_bytes), (0, 3072, 1024));
        assert_eq!((t.blocks, t.floor_blocks), (Some(3), Some(1)));
        assert_eq!(
            (t.active_bytes, t.reserved_bytes, t.samples),
            (Some(8192), Some(2 << 20), 3)
        );
        let j = &f.counters[1];
        assert_eq!((j.framework.as_str(), j.device, j.blocks), ("jax", 1, None));
        // The snapshot started a new interval: the floor starts at the last read.
        let t = &read(false).unwrap().counters[0];
        assert_eq!(
            (t.floor_bytes, t.floor_blocks, t.samples),
            (3072, Some(3), 0)
        );
        count("torch", "native", 0, [5000, 5, u, u]).unwrap();
        assert_eq!(read(false).unwrap().counters[0].floor_bytes, 3072);

        assert_eq!(end(Some("not json")), Err(libc::EINVAL));
        let record = r#"[{"framework":"torch","since_unix_ms":1,"unix_ms":2,
            "groups":[{"blocks":2,"bytes":1024,"frames":[{"kind":"python","ip":"0x0",
            "module":null,"offset":null,"function":"main","file":"a.py","line":3}]}]}]"#;
        // The end first, the records after it (as the bootstrap hands them), each once.
        end(None).unwrap();
        assert_eq!(end(None), Err(libc::EEXIST));
        end(Some(record)).unwrap();
        assert_eq!(end(Some(record)), Err(libc::EEXIST));
        // Frozen: later reads are ignored, snapshots no longer move the floors.
        count("torch", "native", 0, [9999, 9, u, u]).unwrap();
        let f = read(true).unwrap();
        assert_eq!(
            (f.counters[0].bytes, f.counters[0].floor_bytes),
            (5000, 3072)
        );
        assert!(f.ended_unix_ms.is_some());
        assert_eq!(f.records[0].groups[0].frames[0].line, Some(3));

        reset_for_child();
        assert_eq!(read(false), None);
    }
}
