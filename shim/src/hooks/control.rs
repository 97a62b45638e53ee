//! The shim's functions of its own, for programs that know about it (benchmarks, test
//! harnesses such as the pytest plugin): pause and resume recording, mark a moment and count
//! what was allocated since and is still live, a peak window, a dump on request. Looked up
//! with `dlsym(RTLD_DEFAULT, "cudaleak_…")`, so a program still runs without the shim.
//! docs/dump-format.md ("The shim's control functions") documents them.

use std::ffi::{c_char, c_int, CStr};
use std::path::Path;

use cudaleak_format as format;

use crate::reply::{answer, fail};
use crate::{dump, state};

/// `on == 0` pauses recording, anything else resumes it. Returns 1 if the shim was recording
/// before the call, else 0. While paused, allocations and frees are passed through unseen: a
/// block allocated before a pause and freed during it stays listed as live.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_set_recording(on: c_int) -> c_int {
    c_int::from(state::set_paused(on == 0))
}

/// The sequence number of the last call recorded so far (0 when the shim does not record): a
/// block allocated after this call has a larger one. A test harness marks a test's start with
/// it, then asks what the test left ([`cudaleak_live_since`], `cudaleak report --since`).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_mark() -> u64 {
    state::shield(|| state::get().map_or(0, |s| s.table.seq_now())).unwrap_or(0)
}

/// Counts the live blocks allocated after `mark` and the bytes they hold into `out[0]` and
/// `out[1]`. Returns 0, or -1 when the shim does not record or `out` is null.
///
/// # Safety
/// `out`, when not null, points to two writable `u64`s.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cudaleak_live_since(mark: u64, out: *mut u64) -> c_int {
    let Some(Some(c)) = state::shield(|| state::get().map(|s| s.table.live_after(mark))) else {
        return -1;
    };
    if out.is_null() {
        return -1;
    }
    // SAFETY: the caller gives two writable u64s at `out` (the function's contract).
    unsafe {
        out.write(c.blocks);
        out.add(1).write(c.bytes);
    }
    0
}

/// Starts a new peak window at the bytes live now; [`cudaleak_peak_bytes`] then reads the most
/// live at once since. The peak a dump reports stays the whole process's.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_restart_peak() {
    let _ = state::shield(|| {
        if let Some(s) = state::get() {
            s.table.restart_peak();
        }
    });
}

/// The most bytes live at once since the last [`cudaleak_restart_peak`] (or since the start).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_peak_bytes() -> u64 {
    state::shield(|| state::get().map_or(0, |s| s.table.window_peak())).unwrap_or(0)
}

/// Writes a dump of the table as it is now to `path` (a NUL-terminated file name; through a
/// temporary file renamed into place, and to `NAME.1.json` … if the name is taken), without
/// starting a new interval of the snapshot series. Returns 0, or -1 with errno set: `EINVAL`
/// for a null or non-UTF-8 path, `ENOTSUP` when this copy of the shim keeps no table (another
/// copy records the process), else the error of the write.
///
/// # Safety
/// `path`, when not null, is a NUL-terminated string.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cudaleak_dump(path: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { cudaleak_dump_records(path, std::ptr::null()) }
}

/// [`cudaleak_dump`], with `records` (null, or JSON text: an array of the framework records
/// docs/dump-format.md describes) as this dump's `frameworks.records`: the live blocks a
/// framework's own record named in the caller's window (the Python API, the pytest plugin),
/// which `cudaleak report --since` lists as leaks. Returns 0, or -1 with errno set as
/// [`cudaleak_dump`] does, and `EINVAL` for records it cannot read.
///
/// # Safety
/// `path`, when not null, and `records`, when not null, are NUL-terminated strings.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cudaleak_dump_records(
    path: *const c_char,
    records: *const c_char,
) -> c_int {
    // SAFETY: per the contract, each is null or NUL-terminated.
    let (path, records) = match (unsafe { utf8(path) }, unsafe { utf8(records) }) {
        (Ok(Some(path)), Ok(records)) => (path, records),
        _ => return fail(libc::EINVAL),
    };
    let written = state::shield(|| {
        let records = match records {
            Some(text) => {
                Some(format::FrameworkRecord::list_from_json(text).map_err(|_| libc::EINVAL)?)
            }
            None => None,
        };
        let s = state::get().ok_or(libc::ENOTSUP)?;
        dump::write_requested(s, Path::new(path), records)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    });
    answer(written.map(|w| w.map(|_| 0)))
}

/// Writes the next dump of the snapshot series now, as the schedule would
/// (`cudaleak.<pid>.snapshot-<n>.json` in the output directory), starting the next interval
/// of every floor. Returns its number `n` (1 for the first), or -1 with errno set: `ENOTSUP`
/// when this copy of the shim keeps no table, `ECANCELED` when it was not written (the final
/// dump has begun, or the write failed: the shim said why on stderr).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_snapshot() -> c_int {
    let written = state::shield(|| {
        let s = state::get().ok_or(libc::ENOTSUP)?;
        dump::write(s, dump::Moment::Snapshot).ok_or(libc::ECANCELED)
    });
    answer(written.map(|w| w.map(|n| c_int::try_from(n).unwrap_or(c_int::MAX))))
}

/// A C string as UTF-8 (`None` for a null pointer), or `EINVAL`.
///
/// # Safety
/// `p`, when not null, is a NUL-terminated string.
unsafe fn utf8<'a>(p: *const c_char) -> Result<Option<&'a str>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: per the contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map(Some).map_err(|_| libc::EINVAL)
}
