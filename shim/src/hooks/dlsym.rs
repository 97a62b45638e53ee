//! The `dlsym` interposer: how the CUDA runtime (static or shared) finds the driver. It asks
//! for `cuGetProcAddress_v2` by name; we hand back our wrapper, which hands back ours for
//! every memory function. Exact names only; everything else is looked up with the caller's
//! own handle and returned untouched.
//!
//! This runs before the shim is initialised (Rust's std and other libraries call dlsym from
//! their constructors): it must never allocate, lock or panic.

use std::ffi::{c_char, c_void, CStr};

use super::{driver, proc};
use crate::{process, real};

/// x86-64: `dlsym(RTLD_NEXT, …)` must search after the *caller's* object, and glibc's dlsym
/// finds the caller by its return address. So an RTLD_NEXT lookup jumps straight into glibc's
/// `dlsym` (a tail call: the return address on the stack is still the caller's), once that
/// function is known; every other lookup continues in Rust. Nothing needs substituting on that
/// path: an interposer that looks up a driver function after itself gets what follows it in load
/// order, which is our wrapper when we follow it and the driver when we come first (and then the
/// program's calls reach us before it).
///
/// (Searching the loader's list from the caller's `link_map` with `dlsym(lm, …)` crashed: an
/// object loaded at start-up, a preloaded library among them, has no search list of its own.)
#[cfg(all(not(test), target_arch = "x86_64"))]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmp rdi, -1",
        "jne 2f",
        // Keep the arguments, align the stack (8 mod 16 at entry), ask for glibc's dlsym.
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {real}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "jmp {rust}",
        real = sym real::dlsym_address,
        rust = sym dlsym_rust,
    );
}

/// Other architectures: the caller is unknown, RTLD_NEXT is searched from this library.
#[cfg(all(not(test), not(target_arch = "x86_64")))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // SAFETY: handle and symbol are what the C caller passed to dlsym: dlsym_rust's contract.
    unsafe { dlsym_rust(handle, symbol) }
}

/// `dlsym(handle, symbol)` through glibc's, our wrapper handed out for a driver function we hook.
///
/// # Safety
/// The arguments are what a C caller passed to dlsym.
pub unsafe extern "C" fn dlsym_rust(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let Some(real_dlsym) = real::dlsym_fn() else {
        return std::ptr::null_mut();
    };
    // SAFETY: real_dlsym is libc's dlsym, given exactly what the C caller gave ours.
    let p = unsafe { real_dlsym(handle, symbol) };
    // A passive copy (another one records) hands out what the loader found, never its wrappers.
    if p.is_null() || symbol.is_null() || process::passive() {
        return p;
    }
    // SAFETY: dlsym found a definition, so symbol is a valid C string.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let Some(i) = proc::by_elf_name(name) else {
        return p;
    };
    if i == driver::H::cuGetProcAddress_v2 as usize || i == driver::H::cuGetProcAddress as usize {
        real::note_driver_handle(handle);
    }
    proc::substitute(i, p)
}
