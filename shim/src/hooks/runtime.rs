//! Exported CUDA runtime names (`cudaMalloc` …): thin forwards to the real runtime whose only
//! job is to label the record the driver wrapper below makes, so a report says `cudaMalloc`
//! rather than `cuMemAlloc_v2`. One allocation is one record: these never record a success, and
//! a failure only as the runtime returns it (the driver wrapper leaves failures to them).
//!
//! Only programs that link the shared runtime reach these; static-runtime programs are seen
//! through the driver route alone.
#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use super::driver::IpcMemHandle;
use super::recorder::forward;
use super::{Slot, CUDA_ERROR_INITIALIZATION_ERROR};
use crate::api::Api;
use crate::real;

type Stream = *mut c_void;

/// cudaExtent.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Extent {
    width: usize,
    height: usize,
    depth: usize,
}

/// Forwards an allocation; records a failure only if it never reached the driver.
macro_rules! runtime_alloc {
    ($name:ident($($arg:ident: $ty:ty),*) size = $size:expr) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            type F = unsafe extern "C" fn($($ty),*) -> c_int;
            static SLOT: Slot = Slot::new(cstr_of!($name));
            let p = SLOT.get($name as *mut c_void, real::runtime);
            if p.is_null() {
                return CUDA_ERROR_INITIALIZATION_ERROR;
            }
            // SAFETY: p is the runtime's function of this name and signature.
            let real = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
            let call = forward(Api::$name);
            // SAFETY: arguments are the caller's, passed through unchanged.
            let rc = unsafe { real($($arg),*) };
            call.allocation_returned(rc, $size as u64);
            rc
        }
    };
}

/// Forwards a free; a free refused because the runtime is unloading still counts as freed.
macro_rules! runtime_free {
    ($name:ident($ptr:ident: $pty:ty $(, $arg:ident: $ty:ty)*)) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($ptr: $pty $(, $arg: $ty)*) -> c_int {
            type F = unsafe extern "C" fn($pty $(, $ty)*) -> c_int;
            static SLOT: Slot = Slot::new(cstr_of!($name));
            let p = SLOT.get($name as *mut c_void, real::runtime);
            if p.is_null() {
                return CUDA_ERROR_INITIALIZATION_ERROR;
            }
            // SAFETY: p is the runtime's function of this name and signature.
            let real = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
            let call = forward(Api::$name);
            // SAFETY: arguments are the caller's, passed through unchanged.
            let rc = unsafe { real($ptr $(, $arg)*) };
            call.free_returned(rc, $ptr as *mut c_void);
            rc
        }
    };
}

macro_rules! cstr_of {
    ($name:ident) => {
        match std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("NUL-terminated literal"),
        }
    };
}

runtime_alloc!(cudaMalloc(dev_ptr: *mut *mut c_void, size: usize) size = size);
runtime_alloc!(cudaMallocManaged(dev_ptr: *mut *mut c_void, size: usize, flags: c_uint) size = size);
runtime_alloc!(cudaMallocHost(ptr: *mut *mut c_void, size: usize) size = size);
runtime_alloc!(cudaHostAlloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) size = size);
runtime_alloc!(cudaMallocPitch(dev_ptr: *mut *mut c_void, pitch: *mut usize, width: usize, height: usize)
    size = width.saturating_mul(height));
runtime_alloc!(cudaMalloc3D(pitched: *mut c_void, extent: Extent)
    size = extent.width.saturating_mul(extent.height).saturating_mul(extent.depth));
runtime_alloc!(cudaMallocAsync(dev_ptr: *mut *mut c_void, size: usize, stream: Stream) size = size);
runtime_alloc!(cudaMallocAsync_ptsz(dev_ptr: *mut *mut c_void, size: usize, stream: Stream) size = size);
runtime_alloc!(cudaMallocFromPoolAsync(dev_ptr: *mut *mut c_void, size: usize, pool: *mut c_void, stream: Stream)
    size = size);
runtime_alloc!(cudaMallocFromPoolAsync_ptsz(dev_ptr: *mut *mut c_void, size: usize, pool: *mut c_void, stream: Stream)
    size = size);
runtime_alloc!(cudaMallocArray(array: *mut *mut c_void, desc: *const c_void, width: usize, height: usize, flags: c_uint)
    size = width.saturating_mul(height.max(1)));

runtime_free!(cudaFree(dev_ptr: *mut c_void));
runtime_free!(cudaFreeHost(ptr: *mut c_void));
runtime_free!(cudaFreeAsync(dev_ptr: *mut c_void, stream: Stream));
runtime_free!(cudaFreeAsync_ptsz(dev_ptr: *mut c_void, stream: Stream));
runtime_free!(cudaFreeArray(array: *mut c_void));

// Registered host memory and IPC (issue 12).
runtime_alloc!(cudaHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) size = size);
runtime_alloc!(cudaIpcOpenMemHandle(dev_ptr: *mut *mut c_void, handle: IpcMemHandle, flags: c_uint)
    size = 0);
runtime_alloc!(cudaMemPoolImportPointer(ptr: *mut *mut c_void, pool: *mut c_void, data: *mut c_void)
    size = 0);
runtime_free!(cudaHostUnregister(ptr: *mut c_void));
runtime_free!(cudaIpcCloseMemHandle(dev_ptr: *mut c_void));
