//! The only place that resolves real functions: the real `dlsym` (bootstrapped with `dlvsym`,
//! because our exported `dlsym` shadows libc's), the CUDA driver's handle, and lookups of the
//! functions our hooks forward to.
//!
//! Everything here must work before the shim is initialised and must never allocate on the
//! `dlsym` path: Rust's std and other libraries' constructors call `dlsym` before we are ready.

use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

pub const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

static REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
static DRIVER_HANDLE: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

/// libc's own `dlsym`. `None` only if glibc offers neither symbol version, in which case the
/// shim cannot work and passes everything through.
pub fn dlsym_fn() -> Option<DlsymFn> {
    let mut p = REAL_DLSYM.load(Ordering::Acquire);
    if p.is_null() {
        for version in [c"GLIBC_2.2.5", c"GLIBC_2.34", c"GLIBC_2.17"] {
            // SAFETY: dlvsym is not interposed by us; both strings are NUL-terminated literals.
            p = unsafe { libc::dlvsym(RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
            if !p.is_null() {
                break;
            }
        }
        if p.is_null() {
            return None;
        }
        REAL_DLSYM.store(p, Ordering::Release);
    }
    // SAFETY: p is libc's dlsym, whose signature is DlsymFn.
    Some(unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(p) })
}

/// libc's `dlsym` as an address, null if unknown: for the `dlsym` interposer's tail call.
/// Never allocates, locks or panics.
#[cfg(target_arch = "x86_64")]
pub extern "C" fn dlsym_address() -> *mut c_void {
    dlsym_fn().map_or(ptr::null_mut(), |f| f as *mut c_void)
}

/// `dlsym(handle, name)` through libc's real function.
pub fn lookup(handle: *mut c_void, name: &CStr) -> *mut c_void {
    match dlsym_fn() {
        // SAFETY: name is NUL-terminated; handle is a handle or pseudo-handle from the caller.
        Some(f) => unsafe { f(handle, name.as_ptr()) },
        None => ptr::null_mut(),
    }
}

/// The next definition of `name` after this library in the global search order.
pub fn next(name: &CStr) -> *mut c_void {
    lookup(RTLD_NEXT, name)
}

/// Remembers the handle a program used to look up the driver's entry point.
pub fn note_driver_handle(handle: *mut c_void) {
    if !handle.is_null() && handle != RTLD_NEXT {
        let _ = DRIVER_HANDLE.compare_exchange(
            ptr::null_mut(),
            handle,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

/// A handle on the CUDA driver once something has loaded it: the one the runtime used, or
/// the already-loaded `libcuda.so.1` (never loads it ourselves).
pub fn driver_handle() -> *mut c_void {
    let h = DRIVER_HANDLE.load(Ordering::Acquire);
    if !h.is_null() {
        return h;
    }
    // SAFETY: RTLD_NOLOAD only returns a handle to an object that is already loaded.
    let h = unsafe {
        libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        )
    };
    note_driver_handle(h);
    DRIVER_HANDLE.load(Ordering::Acquire)
}

/// A driver function by its exported (versioned) ELF name: the global scope first (programs
/// linked with -lcuda), then the driver's own handle (runtimes that dlopen it locally). Where
/// the next definition is a passive copy's wrapper (another copy of the shim loaded after this
/// one), the driver's own function is preferred: the program's own lookups (dlsym,
/// cuGetProcAddress) find that one, and the wrappers handed out in its place must forward to it.
pub fn driver(name: &CStr) -> *mut c_void {
    let p = next(name);
    if !p.is_null() && !crate::process::in_other_copy(p) {
        return p;
    }
    let h = driver_handle();
    if h.is_null() {
        return p; // null, or the copy's wrapper: it passes calls through
    }
    let found = lookup(h, name);
    if found.is_null() {
        p
    } else {
        found
    }
}

/// A CUDA runtime function: the global scope first, then an already-loaded libcudart by its
/// soname (frameworks load it with RTLD_LOCAL, where RTLD_NEXT cannot see it).
pub fn runtime(name: &CStr) -> *mut c_void {
    let p = next(name);
    if !p.is_null() {
        return p;
    }
    for soname in [
        c"libcudart.so.13",
        c"libcudart.so.12",
        c"libcudart.so.11.0",
        c"libcudart.so",
    ] {
        // SAFETY: RTLD_NOLOAD never loads anything; the handle is kept for the process's life.
        let h = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            let p = lookup(h, name);
            if !p.is_null() {
                return p;
            }
        }
    }
    ptr::null_mut()
}

/// A function of one of NVIDIA's libraries (cuBLAS, cuFFT …): the global scope first, then the
/// library already loaded under one of its `sonames` (frameworks load them with RTLD_LOCAL).
pub fn library(name: &CStr, sonames: &[&CStr]) -> *mut c_void {
    let p = next(name);
    if !p.is_null() {
        return p;
    }
    for soname in sonames {
        // SAFETY: RTLD_NOLOAD never loads anything; the handle is kept for the process's life.
        let h = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            let p = lookup(h, name);
            if !p.is_null() {
                return p;
            }
        }
    }
    ptr::null_mut()
}
