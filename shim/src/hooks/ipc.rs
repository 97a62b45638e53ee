//! Memory another process allocated, opened here: IPC handles (`cuIpcOpenMemHandle(_v2)`;
//! `cuIpcCloseMemHandle` is a plain free) and pointers imported from another process's pool
//! (`cuMemPoolImportPointer`, freed like device memory). The call that opens it gives no size:
//! the driver is asked for it.

use std::ffi::c_char;

use super::driver::{current_device, DevPtr};
use super::{keeping_errno, read, recording, CuResult, Helper, CUDA_SUCCESS};
use crate::api::Api;

/// CUipcMemHandle (and cudaIpcMemHandle_t): 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcMemHandle {
    reserved: [c_char; 64],
}

static GET_ADDRESS_RANGE: Helper<
    unsafe extern "C" fn(*mut DevPtr, *mut usize, DevPtr) -> CuResult,
> = Helper::new(c"cuMemGetAddressRange_v2");

/// The size of the allocation holding `dptr`, as the driver tells it; 0 if it will not.
/// Opened and imported memory has no size in the call that makes it.
fn allocation_size(dptr: DevPtr) -> u64 {
    let Some(f) = GET_ADDRESS_RANGE.get_retrying() else {
        return 0;
    };
    let (mut base, mut size): (DevPtr, usize) = (0, 0);
    // SAFETY: f is the driver's cuMemGetAddressRange_v2; both out-parameters are valid.
    match unsafe { f(&mut base, &mut size, dptr) } {
        CUDA_SUCCESS => size as u64,
        _ => 0,
    }
}

/// The body of calls that write an address of memory allocated elsewhere to `out`: forward,
/// then record it with the size the driver gives for it.
///
/// # Safety
/// `out` is the caller's out-parameter: null, or valid for reads once `call` has succeeded.
#[inline]
pub unsafe fn open(call: impl FnOnce() -> CuResult, api: Api, out: *mut DevPtr) -> CuResult {
    recording(api, call, |rec, call| {
        let stack = rec.stack();
        let rc = call();
        // SAFETY: out is null or valid for reads once the call has succeeded (this function's
        // contract), and the closure runs only then: below, and in the recorder.
        let opened = || unsafe { read(out) };
        let size = if rc == CUDA_SUCCESS {
            keeping_errno(|| opened().map_or(0, allocation_size))
        } else {
            0
        };
        rec.allocated(rc, opened, size, current_device, stack);
        rc
    })
}
