//! The exported functions a CUDA program ends up calling instead of the real ones.
//!
//! Every hooked function is one row of `hook_list.rs`; `driver.rs` and `runtime.rs` generate the
//! hooks from those rows, and the body of each driver hook lives in the file of its kind of
//! memory (`memory`, `pools`, `vmm`, `arrays`, `graphs`, `ipc`; `proc` for the lookups).
//!
//! A hook is a few lines: [`recording`] (the guard, and a recorder that keeps errno and shields
//! the program from a panic), call the real function, record, return the real result unchanged.
//! No I/O, no formatting, no symbol lookup beyond the first call, no lock held across the real
//! call.

pub mod arrays;
pub mod control;
pub mod dlsym;
pub mod driver;
pub mod graphs;
pub mod ipc;
pub mod libraries;
pub mod memory;
pub mod pools;
pub mod proc;
pub mod recorder;
pub mod runtime;
pub mod vmm;

pub use recorder::{recording, unlabelled};

use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Driver API return code (CUresult).
pub type CuResult = c_int;
pub const CUDA_SUCCESS: CuResult = 0;
/// CUDA_ERROR_NOT_INITIALIZED: returned when the real driver function cannot be found.
pub const CUDA_ERROR_NOT_INITIALIZED: CuResult = 3;
/// cudaErrorInitializationError: returned when the real runtime function cannot be found.
pub const CUDA_ERROR_INITIALIZATION_ERROR: c_int = 3;
/// cudaErrorCudartUnloading: the runtime refuses calls during its teardown.
pub const CUDA_ERROR_CUDART_UNLOADING: c_int = 4;

/// A hook's name as a C string, from the literal `concat!(name, "\0")` its row makes: checked
/// when the hook tables are built (a const), never at a call.
pub const fn cstr(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(c) => c,
        Err(_) => panic!("hook names are NUL-terminated literals"),
    }
}

/// Marks a helper function the driver does not have ([`Slot::get_helper`]).
const MISSING: *mut c_void = ptr::dangling_mut::<c_void>();

/// Where a hook finds the function it forwards to.
pub struct Slot {
    pub name: &'static CStr,
    real: AtomicPtr<c_void>,
}

impl Slot {
    pub const fn new(name: &'static CStr) -> Slot {
        Slot {
            name,
            real: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The real function, resolving it with `resolve` the first time. Never our own `wrapper`.
    pub fn get(&self, wrapper: *mut c_void, resolve: fn(&CStr) -> *mut c_void) -> *mut c_void {
        let p = self.real.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        let p = resolve(self.name);
        if p.is_null() || p == wrapper {
            return ptr::null_mut();
        }
        match self
            .real
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => p,
            Err(current) => current,
        }
    }

    /// A driver function the shim calls for itself (`cuCtxGetDevice`, …), from inside a hook,
    /// when the driver is loaded: looked up once, and a function the driver lacks is remembered
    /// as missing rather than looked up again at every allocation. Null when missing.
    pub fn get_helper(&self, resolve: fn(&CStr) -> *mut c_void) -> *mut c_void {
        let p = self.real.load(Ordering::Acquire);
        if p == MISSING {
            return ptr::null_mut();
        }
        if !p.is_null() {
            return p;
        }
        let found = resolve(self.name);
        let value = if found.is_null() { MISSING } else { found };
        let _ =
            self.real
                .compare_exchange(ptr::null_mut(), value, Ordering::AcqRel, Ordering::Acquire);
        found
    }

    /// Offers `p` (found by the program's own lookup) as the real function. True when the slot
    /// now forwards to `p`, so handing out `wrapper` in its place is safe.
    pub fn offer(&self, p: *mut c_void, wrapper: *mut c_void) -> bool {
        if p.is_null() {
            return false;
        }
        if p == wrapper {
            return true;
        }
        match self
            .real
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(current) => current == p,
        }
    }
}

/// A driver function the shim calls for itself (`cuCtxGetDevice`, …), declared with its C type
/// `F` beside its name, so the one cast from the looked-up address has its type from there.
pub struct Helper<F> {
    slot: Slot,
    _type: PhantomData<F>,
}

impl<F: Copy> Helper<F> {
    /// `F` must be the `unsafe extern "C" fn` type of the driver function `name` (cuda.h).
    pub const fn new(name: &'static CStr) -> Helper<F> {
        Helper {
            slot: Slot::new(name),
            _type: PhantomData,
        }
    }

    /// The function, looked up once ([`Slot::get_helper`]); `None` if the driver lacks it.
    pub fn get(&self) -> Option<F> {
        Self::typed(self.slot.get_helper(crate::real::driver))
    }

    /// The function, looked up again at every call until found ([`Slot::get`]).
    pub fn get_retrying(&self) -> Option<F> {
        Self::typed(self.slot.get(ptr::null_mut(), crate::real::driver))
    }

    fn typed(p: *mut c_void) -> Option<F> {
        const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: p is the driver's function of the name this helper was declared with, and F is
        // the function-pointer type declared with it (the same size as a pointer, checked above).
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

/// Reads an out-parameter the real call filled in.
///
/// # Safety
/// `p` is null or valid for reads.
#[inline]
pub unsafe fn read(p: *const u64) -> Option<u64> {
    // SAFETY: p is not null here, so valid for reads by the function's contract.
    (!p.is_null()).then(|| unsafe { *p })
}

/// Runs `f` and puts errno back as it was: recording must not change what the program sees.
#[inline]
pub fn keeping_errno<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: __errno_location always returns this thread's valid errno slot.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: slot is this thread's errno, valid for reads for the thread's life.
    let saved = unsafe { *slot };
    let r = f();
    // SAFETY: slot is this thread's errno, valid for writes for the thread's life.
    unsafe { *slot = saved };
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static LOOKUPS: AtomicUsize = AtomicUsize::new(0);

    fn absent(_: &CStr) -> *mut c_void {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
        ptr::null_mut()
    }

    #[test]
    fn a_helper_the_driver_lacks_is_looked_up_once() {
        let slot = Slot::new(c"cuCtxGetDevice");
        for _ in 0..5 {
            assert!(slot.get_helper(absent).is_null());
        }
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), 1);
    }
}
