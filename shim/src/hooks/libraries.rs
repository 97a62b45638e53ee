//! The handle lifecycles of NVIDIA's libraries (cuBLAS, cuBLASLt, cuDNN, cuFFT, cuRAND,
//! cuSPARSE, cuSOLVER, NCCL): exported forwards, one per `libraries` row of `hook_list.rs`,
//! that note each handle made and destroyed ([`crate::handles`]) and mark the library's calls
//! during which the blocks the driver hooks record belong to a handle.
//!
//! A forward records nothing of its own beyond the handle: the blocks come from the driver hooks
//! below it, which need no guard held here. Only programs (and frameworks) that call these
//! functions through the dynamic linker reach them: a library linked statically, or looked up
//! with `dlsym` on its own handle, is seen through its blocks alone.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use super::driver::current_device;
use super::{keeping_errno, Slot};
use crate::guard::{self, Guard, OwnerScope};
use crate::handles::Library;
use crate::hook_list::hooked;
use crate::thread::{self, Thread};
use crate::{real, record, state};

/// An opaque handle (cublasHandle_t, cudnnHandle_t, curandGenerator_t, ncclComm_t …).
pub type Handle = *mut c_void;

/// ncclUniqueId, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NcclUniqueId {
    pub internal: [c_char; 128],
}

/// A handle as a value: a pointer, or a cuFFT plan's number.
pub trait HandleValue: Copy {
    fn value(self) -> u64;
}

impl HandleValue for Handle {
    fn value(self) -> u64 {
        self as u64
    }
}

impl HandleValue for c_int {
    fn value(self) -> u64 {
        u64::from(self as u32)
    }
}

/// Where a create call writes the new handle.
pub trait HandleOut: Copy {
    /// The handle written there.
    ///
    /// # Safety
    /// `self` is null or valid for reads (the create call succeeded).
    unsafe fn written(self) -> Option<u64>;
}

impl<T: HandleValue> HandleOut for *mut T {
    unsafe fn written(self) -> Option<u64> {
        // SAFETY: self is not null here, so valid for reads by the function's contract.
        (!self.is_null()).then(|| unsafe { *self }.value())
    }
}

/// A create call: the handle it makes is noted with the program's stack, and the blocks the
/// library allocates meanwhile on this thread are that handle's. A create the library makes
/// inside another (`cusolverDnCreate` makes a cuBLAS handle) is part of the outer one.
///
/// # Safety
/// `out` is the caller's out-parameter: null, or valid for reads once `call` has succeeded.
pub unsafe fn create(
    call: impl FnOnce() -> c_int,
    library: Library,
    name: &'static str,
    out: impl HandleOut,
) -> c_int {
    thread::with(|t| {
        if guard::owner(t).is_some() {
            return call();
        }
        let Some(token) = creating(t, library, name) else {
            return call();
        };
        let scope = OwnerScope::set(t, token);
        let rc = call();
        drop(scope);
        let value = if rc == 0 {
            // SAFETY: out is null or valid for reads once the call has succeeded (this
            // function's contract), and it is read only after success.
            unsafe { out.written() }
        } else {
            None
        };
        if let Some(s) = state::get() {
            // The device after the call: a library's first create may be what set up the
            // context.
            keeping_errno(|| record::handle_created(s, token, value, current_device));
        }
        rc
    })
}

/// Notes a create call about to begin; `None` when it must only be forwarded (another hook of
/// this thread runs, or the shim is not recording). The guard is held for the stack walk only:
/// the driver hooks the create call reaches must record.
fn creating(t: &Thread, library: Library, name: &'static str) -> Option<u64> {
    let _guard = Guard::enter(t)?;
    let s = state::recording()?;
    keeping_errno(|| record::handle_creating(s, t, library, name))
}

/// A destroy call: the handle is forgotten once the library has destroyed it, unless blocks it
/// owned are still live. It stops being found by its value before the call, so a handle another
/// thread makes meanwhile may be given the same value.
///
/// # Safety
/// None beyond the hook's: the handle is a value, never dereferenced.
pub unsafe fn destroy(
    call: impl FnOnce() -> c_int,
    library: Library,
    _name: &'static str,
    handle: impl HandleValue,
) -> c_int {
    // The guard only tells whether this copy of the shim records this call.
    let s = thread::with(|t| Guard::enter(t).and_then(|_guard| state::recording()));
    let token =
        s.and_then(|s| keeping_errno(|| record::handle_destroying(s, library, handle.value())));
    let rc = call();
    if let (Some(s), Some(token)) = (s, token) {
        keeping_errno(|| record::handle_destroyed(s, token, rc));
    }
    rc
}

/// A call that names a handle and may allocate for it (a plan's work area, a generator's
/// state): the blocks the library allocates meanwhile on this thread are that handle's.
///
/// # Safety
/// None beyond the hook's: the handle is a value, never dereferenced.
pub unsafe fn using(
    call: impl FnOnce() -> c_int,
    library: Library,
    _name: &'static str,
    handle: impl HandleValue,
) -> c_int {
    thread::with(|t| {
        if guard::owner(t).is_some() {
            return call();
        }
        let token = state::recording().and_then(|s| {
            keeping_errno(|| state::shield(|| s.handles.token_of(library, handle.value())))
                .flatten()
        });
        let Some(token) = token else {
            return call();
        };
        let _scope = OwnerScope::set(t, token);
        call()
    })
}

/// Generates one forward per `libraries` row of `hook_list.rs`: look up the library's function
/// (its type from the row), and hand the call of it to the row's role.
macro_rules! library_forwards {
    (
        driver { $($driver:tt)* }
        unlabelled { $($unlabelled:tt)* }
        runtime { $($runtime:tt)* }
        libraries { $(
            $library:ident: $name:ident $role:ident fn($($arg:ident: $ty:ty),*) => $handle:ident;
        )* }
    ) => { $(
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            type Real = unsafe extern "C" fn($($ty),*) -> c_int;
            static SLOT: Slot = Slot::new(super::cstr(concat!(stringify!($name), "\0").as_bytes()));
            fn resolve(name: &CStr) -> *mut c_void {
                real::library(name, Library::$library.sonames())
            }
            let p = SLOT.get($name as *mut c_void, resolve);
            if p.is_null() {
                return Library::$library.not_found();
            }
            // SAFETY: p is the library's function of the name in this forward's row of
            // hook_list.rs (never this forward: `Slot::get`), and Real is the C type that same
            // row gives it.
            let real = unsafe { std::mem::transmute::<*mut c_void, Real>(p) };
            // SAFETY: the arguments are the caller's, passed to the real function unchanged.
            let call = || unsafe { real($($arg),*) };
            // SAFETY: the role gets what the C caller passed, under the contract of the function
            // it called; it forwards the call once and reads the new handle only after success.
            unsafe { $role(call, Library::$library, stringify!($name), $handle) }
        }
    )* };
}

hooked!(library_forwards);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_read_as_values_without_sign_extension() {
        assert_eq!((-1 as c_int).value(), 0xffff_ffff);
        let mut plan: c_int = 7;
        // SAFETY: a valid pointer to a live local.
        assert_eq!(unsafe { (&mut plan as *mut c_int).written() }, Some(7));
        let null: *mut Handle = std::ptr::null_mut();
        // SAFETY: null is allowed by the contract.
        assert_eq!(unsafe { null.written() }, None);
    }
}
