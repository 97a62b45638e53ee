//! Virtual memory management: physical allocations (`cuMemCreate`; `cuMemRelease` is a plain
//! free), and their mappings into reserved address space (`cuMemMap`, `cuMemUnmap`; the
//! reservation itself is a plain allocation of no device).

use std::ffi::{c_int, c_void};

use super::driver::DevPtr;
use super::{memory, recording, CuResult};
use crate::api::Api;

/// The head of CUmemAllocationProp: type, requested handle types, then CUmemLocation.
#[repr(C)]
struct AllocationPropHead {
    kind: c_int,
    handle_types: c_int,
    location_type: c_int,
    location_id: c_int,
}

/// CU_MEM_LOCATION_TYPE_DEVICE.
const LOCATION_DEVICE: c_int = 1;

/// `cuMemCreate`: a physical allocation, on the device its properties name.
///
/// # Safety
/// `handle` is null or valid for reads once `call` has succeeded; `prop` is what the caller
/// passed, read only after the driver accepted it.
pub unsafe fn create(
    call: impl FnOnce() -> CuResult,
    api: Api,
    handle: *mut u64,
    size: u64,
    prop: *const c_void,
) -> CuResult {
    let device = || {
        // SAFETY: the real call accepted prop, so it points at a CUmemAllocationProp.
        let head = unsafe { (prop as *const AllocationPropHead).as_ref() }?;
        (head.location_type == LOCATION_DEVICE).then_some(head.location_id)
    };
    // SAFETY: handle is the caller's out-parameter, null or valid for reads once the call has
    // succeeded (this function's contract), which is all memory::alloc asks of `out`.
    unsafe { memory::alloc(call, api, handle, size, device) }
}

/// `cuMemMap` of physical allocation `handle` over `size` bytes at `dptr`.
///
/// # Safety
/// None beyond the hook's: every argument is a value.
pub unsafe fn map(
    call: impl FnOnce() -> CuResult,
    api: Api,
    dptr: DevPtr,
    size: u64,
    handle: u64,
) -> CuResult {
    recording(api, call, |rec, call| {
        let rc = call();
        rec.mapped(rc, dptr, size, handle);
        rc
    })
}

/// `cuMemUnmap`: unmaps every mapping that starts in `dptr..dptr + size`.
///
/// # Safety
/// None beyond the hook's: every argument is a value.
pub unsafe fn unmap(
    call: impl FnOnce() -> CuResult,
    api: Api,
    dptr: DevPtr,
    size: u64,
) -> CuResult {
    recording(api, call, |rec, call| {
        let taken = rec.unmap_started(dptr, size);
        let rc = call();
        rec.unmap_finished(dptr, taken, rc);
        rc
    })
}
