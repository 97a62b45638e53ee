//! CUDA arrays (`cuArrayCreate_v2`, `cuArray3DCreate_v2`; `cuArrayDestroy` is a plain free):
//! opaque handles whose size is worked out from their descriptor.

use std::ffi::{c_int, c_uint, c_void};

use super::driver::current_device;
use super::{memory, CuResult};
use crate::api::Api;

/// CUDA_ARRAY_DESCRIPTOR.
#[repr(C)]
pub struct ArrayDescriptor {
    width: usize,
    height: usize,
    format: c_int,
    channels: c_uint,
}

/// CUDA_ARRAY3D_DESCRIPTOR.
#[repr(C)]
pub struct Array3dDescriptor {
    width: usize,
    height: usize,
    depth: usize,
    format: c_int,
    channels: c_uint,
    flags: c_uint,
}

/// Bytes per channel of a CUarray_format; 1 for formats we do not know.
fn format_bytes(format: c_int) -> u64 {
    match format {
        0x01 | 0x08 => 1,        // (UN)SIGNED_INT8
        0x02 | 0x09 | 0x10 => 2, // (UN)SIGNED_INT16, HALF
        0x03 | 0x0a | 0x20 => 4, // (UN)SIGNED_INT32, FLOAT
        _ => 1,
    }
}

fn array_bytes(width: usize, height: usize, depth: usize, format: c_int, channels: c_uint) -> u64 {
    [width, height.max(1), depth.max(1)].iter().fold(
        format_bytes(format) * u64::from(channels.max(1)),
        |acc, &d| acc.saturating_mul(d as u64),
    )
}

/// `cuArrayCreate_v2`.
///
/// # Safety
/// `desc` is null or the caller's valid descriptor; `array` is null or valid for reads once
/// `call` has succeeded.
pub unsafe fn create(
    call: impl FnOnce() -> CuResult,
    api: Api,
    array: *mut *mut c_void,
    desc: *const ArrayDescriptor,
) -> CuResult {
    // SAFETY: desc is the caller's descriptor, null or valid.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| {
        array_bytes(d.width, d.height, 1, d.format, d.channels)
    });
    // SAFETY: array is the caller's out-parameter, null or valid for reads once the call has
    // succeeded (this function's contract), which is all memory::alloc asks of `out`.
    unsafe { memory::alloc(call, api, array as *const u64, size, current_device) }
}

/// `cuArray3DCreate_v2`.
///
/// # Safety
/// As for [`create`].
pub unsafe fn create_3d(
    call: impl FnOnce() -> CuResult,
    api: Api,
    array: *mut *mut c_void,
    desc: *const Array3dDescriptor,
) -> CuResult {
    // SAFETY: desc is the caller's descriptor, null or valid.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| {
        array_bytes(d.width, d.height, d.depth, d.format, d.channels)
    });
    // SAFETY: array is the caller's out-parameter, null or valid for reads once the call has
    // succeeded (this function's contract), which is all memory::alloc asks of `out`.
    unsafe { memory::alloc(call, api, array as *const u64, size, current_device) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_sizes_count_channels_and_format() {
        assert_eq!(array_bytes(64, 32, 0, 0x20, 4), 64 * 32 * 16);
        assert_eq!(array_bytes(100, 0, 0, 0x01, 1), 100);
        assert_eq!(array_bytes(8, 8, 8, 0x10, 2), 8 * 8 * 8 * 4);
    }
}
