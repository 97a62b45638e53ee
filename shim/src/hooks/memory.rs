//! Device, managed, pitched and host memory, and registered host memory: the bodies of their
//! hooks, and the two bodies most other kinds share (an allocation that writes one address or
//! handle, and a free). Each body forwards the call once, records around it, and returns the
//! real result unchanged.

use std::ffi::c_void;

use super::driver::{current_device, DevPtr};
use super::{read, recording, CuResult, CUDA_SUCCESS};
use crate::api::Api;
use crate::probe::{self, Part};

/// The body shared by allocations that write one address or handle to `out` and whose size is
/// known before the call: forward, then record the block or the failure.
///
/// # Safety
/// `out` is the caller's out-parameter: null, or valid for reads once `call` has succeeded.
#[inline]
pub unsafe fn alloc(
    call: impl FnOnce() -> CuResult,
    api: Api,
    out: *const u64,
    size: u64,
    device: impl FnOnce() -> Option<i32>,
) -> CuResult {
    recording(api, call, |rec, call| {
        probe::time(Part::Alloc, || {
            let stack = rec.stack();
            let rc = probe::time(Part::Driver, call);
            // SAFETY: out is null or valid for reads once the call has succeeded (this
            // function's contract), and the recorder runs the closure only after success.
            rec.allocated(rc, || unsafe { read(out) }, size, device, stack);
            rc
        })
    })
}

/// The body shared by every free: forget, forward, settle.
///
/// # Safety
/// None beyond the hook's: `addr` is a value, never dereferenced.
#[inline]
pub unsafe fn free(call: impl FnOnce() -> CuResult, api: Api, addr: u64) -> CuResult {
    if addr == 0 {
        return call(); // cuMemFree(0) and friends: nothing to record.
    }
    recording(api, call, |rec, call| {
        probe::time(Part::Free, || {
            let taken = rec.free_started(addr);
            let rc = probe::time(Part::Driver, call);
            rec.free_finished(addr, taken, rc);
            rc
        })
    })
}

/// `cuMemAllocPitch_v2`: the block is `*pitch` bytes by `height` rows, as the driver padded it.
///
/// # Safety
/// `dptr` and `pitch` are the caller's out-parameters: null, or valid for reads once `call` has
/// succeeded.
pub unsafe fn alloc_pitch(
    call: impl FnOnce() -> CuResult,
    api: Api,
    dptr: *mut DevPtr,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> CuResult {
    recording(api, call, |rec, call| {
        let stack = rec.stack();
        let rc = call();
        // *pitch is the driver's only once the call succeeded: before that it may be
        // uninitialised.
        let pitch = if rc == CUDA_SUCCESS {
            // SAFETY: the call succeeded, so pitch (if not null) holds the pitch it wrote.
            unsafe { read(pitch as *const u64) }
        } else {
            None
        };
        let size = match pitch {
            Some(p) => p.saturating_mul(height as u64),
            None => (width as u64).saturating_mul(height as u64),
        };
        // SAFETY: the recorder reads the address only after success, when dptr holds it.
        rec.allocated(rc, || unsafe { read(dptr) }, size, current_device, stack);
        rc
    })
}

/// `cuMemHostRegister(_v2)`: the program's own memory at `p`, pinned; recorded at `p` itself.
///
/// # Safety
/// None beyond the hook's: `p` is a value, never dereferenced.
pub unsafe fn host_register(
    call: impl FnOnce() -> CuResult,
    api: Api,
    p: *mut c_void,
    bytesize: u64,
) -> CuResult {
    let addr = p as u64;
    // SAFETY: `addr` is a local, valid for reads.
    unsafe { alloc(call, api, &addr, bytesize, || None) }
}
