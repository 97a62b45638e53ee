//! The shim's clocks: a cheap monotonic one for records, the wall clock for dumps.
//!
//! Must never make a system call on the hot path (see [`coarse_ms`]).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds on the coarse monotonic clock (a few ms of resolution): read from the vDSO
/// without touching the clock source, so it stays cheap where `CLOCK_MONOTONIC` is a system
/// call (some virtual machines). Enough for a record's `time_ms`.
pub fn coarse_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// Milliseconds since the Unix epoch (a dump's start and end).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
