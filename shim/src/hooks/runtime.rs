//! Exported CUDA runtime names (`cudaMalloc` …): thin forwards to the real runtime whose only
//! job is to label the record the driver wrapper below makes, so a report says `cudaMalloc`
//! rather than `cuMemAlloc_v2`. One allocation is one record: these never record a success, and
//! a failure only as the runtime returns it (the driver wrapper leaves failures to them).
//!
//! Only programs that link the shared runtime reach these; static-runtime programs are seen
//! through the driver route alone.
#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use super::ipc::IpcMemHandle;
use super::recorder::forward;
use super::{Slot, CUDA_ERROR_INITIALIZATION_ERROR};
use crate::api::Api;
use crate::hook_list::hooked;
use crate::real;

type Stream = *mut c_void;

/// cudaExtent.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Extent {
    pub width: usize,
    pub height: usize,
    pub depth: usize,
}

/// Generates one forward per runtime row of `hook_list.rs`: look up the runtime's function (its
/// type from the row), call it under the row's label, and tell the [`Forward`] what it returned
/// (`allocation` with the size asked for, or `free` with the pointer).
///
/// [`Forward`]: super::recorder::Forward
macro_rules! runtime_forwards {
    (
        driver { $($driver:tt)* }
        unlabelled { $($unlabelled:tt)* }
        runtime { $(
            $name:ident $op:ident fn($($arg:ident: $ty:ty),*) => $returned:ident($($rarg:expr),*);
        )* }
        libraries { $($libraries:tt)* }
    ) => { $(
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            type Real = unsafe extern "C" fn($($ty),*) -> c_int;
            static SLOT: Slot = Slot::new(super::cstr(concat!(stringify!($name), "\0").as_bytes()));
            let p = SLOT.get($name as *mut c_void, real::runtime);
            if p.is_null() {
                return CUDA_ERROR_INITIALIZATION_ERROR;
            }
            // SAFETY: p is the runtime's function of the name in this forward's row of
            // hook_list.rs (never this forward: `Slot::get`), and Real is the C type that same
            // row gives it.
            let real = unsafe { std::mem::transmute::<*mut c_void, Real>(p) };
            crate::thread::with(|t| {
                let call = forward(t, Api::$name);
                // SAFETY: the arguments are the caller's, passed to the real function unchanged.
                let rc = unsafe { real($($arg),*) };
                call.$returned(rc $(, $rarg)*);
                rc
            })
        }
    )* };
}

hooked!(runtime_forwards);
