//! The `dlsym` interposer: how the CUDA runtime (static or shared) finds the driver. It asks
//! for `cuGetProcAddress_v2` by name; we hand back our wrapper, which hands back ours for
//! every memory function. Exact names only; everything else is looked up with the caller's
//! own handle and returned untouched.
//!
//! This runs before the shim is initialised (Rust's std and other libraries call dlsym from
//! their constructors): it must never allocate, lock or panic.

use std::ffi::{c_char, c_void, CStr};

use super::driver;
use crate::{process, real};

/// x86-64: read the caller's return address before any prologue, so RTLD_NEXT lookups can be
/// made on the caller's behalf, then continue in Rust.
#[cfg(all(not(test), target_arch = "x86_64"))]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!("mov rdx, [rsp]", "jmp {target}", target = sym dlsym_from);
}

/// Other architectures: the caller is unknown, RTLD_NEXT is searched from this library.
#[cfg(all(not(test), not(target_arch = "x86_64")))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // SAFETY: arguments are the caller's, passed through.
    unsafe { dlsym_from(handle, symbol, std::ptr::null()) }
}

/// `dlsym(handle, symbol)` as called from `caller`.
///
/// # Safety
/// The arguments are what a C caller passed to dlsym.
pub unsafe extern "C" fn dlsym_from(
    handle: *mut c_void,
    symbol: *const c_char,
    caller: *const c_void,
) -> *mut c_void {
    let Some(real_dlsym) = real::dlsym_fn() else {
        return std::ptr::null_mut();
    };
    let p = if handle == real::RTLD_NEXT && !caller.is_null() {
        real::next_after(caller, symbol)
    } else {
        // SAFETY: arguments are the caller's, passed through.
        unsafe { real_dlsym(handle, symbol) }
    };
    // A passive copy (another one records) hands out what the loader found, never its wrappers.
    if p.is_null() || symbol.is_null() || process::passive() {
        return p;
    }
    // SAFETY: dlsym found a definition, so symbol is a valid C string.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let Some(i) = driver::by_elf_name(name) else {
        return p;
    };
    if i == driver::H::cuGetProcAddress_v2 as usize || i == driver::H::cuGetProcAddress as usize {
        real::note_driver_handle(handle);
    }
    driver::substitute(i, p)
}
