//! The point of record: the exported driver hooks (for programs linked with -lcuda), the same
//! hooks handed out through `dlsym` and `cuGetProcAddress`, and the hook table they are found
//! by — all generated from the rows of `hook_list.rs`. Each hook resolves its real function,
//! typed by its row, and hands the call to its body in the file of its kind of memory (memory,
//! pools, vmm, arrays, graphs, ipc, proc). The bodies shared by most hooks live here.
//!
//! Signatures follow cuda.h (declared here by hand: CUdeviceptr is u64, CUresult is int).
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use super::arrays::{self, Array3dDescriptor, ArrayDescriptor};
use super::graphs::{self, Graph, GraphExec, GraphNode, MemAllocNodeParams};
use super::ipc::{self, IpcMemHandle};
use super::{memory, pools, proc, vmm};
use super::{CuResult, Helper, Slot, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS};
use crate::api::Api;
use crate::hook_list::hooked;
use crate::real;

pub type DevPtr = u64;
pub type Stream = *mut c_void;

/// One hooked driver function: its ELF name, the base name and version `cuGetProcAddress`
/// is asked for, and where the real function is kept.
pub struct DriverHook {
    pub slot: Slot,
    pub base: &'static [u8],
    /// The lowest cudaVersion for which `base` resolves to this versioned function.
    pub since: c_int,
    /// Whether this is the per-thread-default-stream variant (flags bit 2).
    pub ptsz: bool,
    /// The driver's exported pointer for `slot.name`, once looked up (NOT_EXPORTED if absent).
    pub exported: AtomicPtr<c_void>,
}

impl DriverHook {
    const fn new(name: &'static [u8], base: &'static str, since: c_int, ptsz: bool) -> Self {
        DriverHook {
            slot: Slot::new(super::cstr(name)),
            base: base.as_bytes(),
            since,
            ptsz,
            exported: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

/// Generates, from the rows of `hook_list.rs`, the index [`H`], the table [`HOOKS`], the
/// [`wrapper`]s, and one exported hook per driver row: look up the real function (its type from
/// the row), and hand the call of it to the row's body.
macro_rules! driver_hooks {
    (
        driver { $(
            $name:ident ($base:literal $since:literal $($ptsz:ident)?) $op:ident
            fn($($arg:ident: $ty:ty),*) => $module:ident::$body:ident($($barg:expr),*);
        )* }
        unlabelled { $(
            $uname:ident ($ubase:literal $usince:literal $($uptsz:ident)?)
            fn($($uarg:ident: $uty:ty),*) => $umodule:ident::$ubody:ident($($ubarg:expr),*);
        )* }
        runtime { $($runtime:tt)* }
        libraries { $($libraries:tt)* }
    ) => {
        /// Index of each hook in [`HOOKS`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        #[repr(usize)]
        pub enum H { $($name,)* $($uname,)* }

        pub static HOOKS: [DriverHook; [$(stringify!($name),)* $(stringify!($uname),)*].len()] = [
            $(DriverHook::new(
                concat!(stringify!($name), "\0").as_bytes(),
                $base,
                $since,
                driver_hooks!(@ptsz $($ptsz)?),
            ),)*
            $(DriverHook::new(
                concat!(stringify!($uname), "\0").as_bytes(),
                $ubase,
                $usince,
                driver_hooks!(@ptsz $($uptsz)?),
            ),)*
        ];

        /// Our hook for table entry `i`.
        pub fn wrapper(i: usize) -> *mut c_void {
            let all: [*mut c_void; HOOKS.len()] = [
                $($name as *mut c_void,)*
                $($uname as *mut c_void,)*
            ];
            all[i]
        }

        $(driver_hooks!(@hook $name($($arg: $ty),*) => $module::$body(Api::$name $(, $barg)*));)*
        $(driver_hooks!(@hook $uname($($uarg: $uty),*) => $umodule::$ubody($($ubarg),*));)*
    };
    (@hook $name:ident($($arg:ident: $ty:ty),*) => $module:ident::$body:ident($($barg:expr),*)) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CuResult {
            type Real = unsafe extern "C" fn($($ty),*) -> CuResult;
            let p = HOOKS[H::$name as usize].slot.get($name as *mut c_void, real::driver);
            if p.is_null() {
                return CUDA_ERROR_NOT_INITIALIZED;
            }
            // SAFETY: p is the driver's function of the name in this hook's row of hook_list.rs
            // (never this hook: `Slot::get`), and Real is the C type that same row gives it.
            let real = unsafe { std::mem::transmute::<*mut c_void, Real>(p) };
            // SAFETY: the arguments are the caller's, passed to the real function unchanged.
            let call = || unsafe { real($($arg),*) };
            // SAFETY: the body gets what the C caller passed, under the contract of the function
            // it called; it forwards the call once and reads out-parameters only after success.
            unsafe { $module::$body(call $(, $barg)*) }
        }
    };
    (@ptsz ptsz) => { true };
    (@ptsz) => { false };
}

hooked!(driver_hooks);

/// Devices the process sees: 0 not asked yet, -1 unknown (the driver would not say).
static DEVICE_COUNT: AtomicI32 = AtomicI32::new(0);
static CTX_GET_DEVICE: Helper<unsafe extern "C" fn(*mut c_int) -> CuResult> =
    Helper::new(c"cuCtxGetDevice");
static DEVICE_GET_COUNT: Helper<unsafe extern "C" fn(*mut c_int) -> CuResult> =
    Helper::new(c"cuDeviceGetCount");

/// The current context's device ordinal, if there is one. With a single visible device that is
/// 0 without asking the driver: one call less per allocation in the common case (one load,
/// inlined into the hook).
#[inline]
pub fn current_device() -> Option<i32> {
    if DEVICE_COUNT.load(Ordering::Relaxed) == 1 {
        return Some(0);
    }
    asked_device()
}

/// [`current_device`] where the count is not known to be 1: asks for the count first, then the
/// driver for the current context's device.
#[inline(never)]
fn asked_device() -> Option<i32> {
    if device_count() == 1 {
        return Some(0);
    }
    let f = CTX_GET_DEVICE.get()?;
    let mut device: c_int = -1;
    // SAFETY: f is the driver's cuCtxGetDevice; device is a valid out-parameter.
    (unsafe { f(&mut device) } == CUDA_SUCCESS).then_some(device)
}

/// For memory of no device (host memory, address space).
pub fn no_device() -> Option<i32> {
    None
}

/// How many devices the process sees, asked once (the count cannot change in a process).
fn device_count() -> i32 {
    let known = DEVICE_COUNT.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let mut count: c_int = 0;
    let Some(f) = DEVICE_GET_COUNT.get() else {
        DEVICE_COUNT.store(-1, Ordering::Relaxed);
        return -1;
    };
    // SAFETY: f is the driver's cuDeviceGetCount; count is a valid out-parameter.
    let rc = unsafe { f(&mut count) };
    if rc == CUDA_ERROR_NOT_INITIALIZED {
        return -1; // asked before cuInit: ask again later
    }
    let count = if rc == CUDA_SUCCESS && count > 0 {
        count
    } else {
        -1
    };
    DEVICE_COUNT.store(count, Ordering::Relaxed);
    count
}
