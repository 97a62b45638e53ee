//! `cuGetProcAddress` and the per-name `dlsym` path: which hook a program's lookup of a driver
//! function is for, and handing out that hook in place of the driver's function. Exact names
//! only (never a prefix: `cudnn*` and `cublas*` start with "cu" too), and the real lookup is
//! always the program's own, made first.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use super::driver::{wrapper, H, HOOKS};
use super::{keeping_errno, CuResult, CUDA_SUCCESS};
use crate::{process, real, stdio};

const NOT_EXPORTED: *mut c_void = ptr::dangling_mut::<c_void>();
/// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
const PER_THREAD_STREAM: u64 = 2;

/// Index of the hook `name` names exactly, for the per-name `dlsym` path.
pub fn by_elf_name(name: &[u8]) -> Option<usize> {
    if !name.starts_with(b"cu") {
        return None;
    }
    HOOKS.iter().position(|h| h.slot.name.to_bytes() == name)
}

/// If the program's lookup found `p` for hook `i`, the pointer to give it instead: ours.
pub fn substitute(i: usize, p: *mut c_void) -> *mut c_void {
    if HOOKS[i].slot.offer(p, wrapper(i)) {
        wrapper(i)
    } else {
        p
    }
}

fn exported_pointer(i: usize) -> *mut c_void {
    let hook = &HOOKS[i];
    let p = hook.exported.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    let h = real::driver_handle();
    if h.is_null() {
        return NOT_EXPORTED;
    }
    let mut found = real::lookup(h, hook.slot.name);
    if found.is_null() {
        found = NOT_EXPORTED;
    }
    hook.exported.store(found, Ordering::Release);
    found
}

/// Which hook a successful `cuGetProcAddress(symbol, cudaVersion, flags) = p` is for:
/// the function whose exported pointer `p` is — first among those of that base name, then
/// among all (since CUDA 12 the base name `cuGraphInstantiate` is `cuGraphInstantiateWithFlags`)
/// — else the base-name + version + flags rule, unless the driver exports `p` under a name no
/// hook has (a form newer than this table, say `cuMemAlloc_v3`: its arguments are unknown, so
/// no hook may stand in for it): then none, said once on stderr. (A form older than every hook,
/// like the 32-bit `cuMemAlloc` of cudaVersion 2000, matches no rule and passes silently.)
fn hook_for_proc(name: &[u8], p: *mut c_void, version: c_int, flags: u64) -> Option<usize> {
    // Since CUDA 12 the base name `cuGraphInstantiate` is the WithFlags ABI (cuda.h's macro and
    // the driver's answer); below 12000 it is the error-node ABI of cuGraphInstantiate(_v2).
    let name: &[u8] = if name == b"cuGraphInstantiate" && version >= 12000 {
        b"cuGraphInstantiateWithFlags"
    } else {
        name
    };
    let candidates = || HOOKS.iter().enumerate().filter(|(_, h)| h.base == name);
    if let Some((i, _)) = candidates().find(|(i, _)| exported_pointer(*i) == p) {
        return Some(i);
    }
    if let Some(i) = (0..HOOKS.len()).find(|&i| exported_pointer(i) == p) {
        return Some(i);
    }
    let ptsz = flags & PER_THREAD_STREAM != 0;
    let (i, _) = candidates()
        .filter(|(_, h)| version >= h.since && h.ptsz == ptsz)
        .max_by_key(|(_, h)| h.since)?;
    if let Some(form) = unknown_form(name, p) {
        if name.starts_with(b"cuStreamBeginCapture") || name.starts_with(b"cuStreamEndCapture") {
            // Captures may now begin or end unseen: stream-ordered calls ask the driver again.
            super::pools::captures_unknown();
        }
        warn_unknown_form(i, name, version, form);
        return None;
    }
    Some(i)
}

/// The name the driver exports `p` under, when it is a form of `base` that no hook has: `base`
/// itself or `base` with a `_vN`/`_ptsz`/`_ptds` suffix the table does not list.
fn unknown_form(base: &[u8], p: *mut c_void) -> Option<&'static CStr> {
    // SAFETY: Dl_info is plain data (pointers and integers), valid when zeroed.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; info is a valid out-parameter.
    if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_sname.is_null() {
        return None;
    }
    // SAFETY: dli_sname points into the string table of a loaded module (the driver), which
    // stays mapped: libcuda.so.1 is never unloaded while the runtime holds its functions.
    let found: &'static CStr = unsafe { CStr::from_ptr(info.dli_sname) };
    let bytes = found.to_bytes();
    if HOOKS.iter().any(|h| h.slot.name.to_bytes() == bytes) {
        return None;
    }
    let suffix = bytes.strip_prefix(base)?;
    let suffix = suffix
        .strip_suffix(b"_ptsz")
        .or_else(|| suffix.strip_suffix(b"_ptds"))
        .unwrap_or(suffix);
    let versioned = suffix
        .strip_prefix(b"_v")
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit));
    (suffix.is_empty() || versioned).then_some(found)
}

/// One bit per hook: whether its base name's unknown form was said already.
static SAID_UNKNOWN: [AtomicU64; HOOKS.len().div_ceil(64)] =
    [const { AtomicU64::new(0) }; HOOKS.len().div_ceil(64)];

#[cold]
fn warn_unknown_form(hook: usize, base: &[u8], version: c_int, form: &CStr) {
    let bit = 1u64 << (hook % 64);
    if SAID_UNKNOWN[hook / 64].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
        return;
    }
    stdio::say(&format!(
        "cudaleak: warning: the CUDA runtime asked the driver for {} (CUDA {}.{}) and was given \
         {}, a form this cudaleak does not know: its calls are passed through and NOT recorded; \
         a newer cudaleak knows it\n",
        String::from_utf8_lossy(base),
        version / 1000,
        version % 1000 / 10,
        form.to_string_lossy(),
    ));
}

/// After the real `cuGetProcAddress` succeeded: hand out our wrapper where we have one.
///
/// # Safety
/// `symbol` is NUL-terminated or null; `pfn` is null or points at the filled-in pointer.
unsafe fn swap_proc(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
    if symbol.is_null() || pfn.is_null() {
        return;
    }
    // SAFETY: the real call succeeded, so *pfn is initialised; symbol is a C string.
    let (name, p) = unsafe { (CStr::from_ptr(symbol).to_bytes(), *pfn) };
    if p.is_null() || !name.starts_with(b"cu") {
        return;
    }
    let i = if name == b"cuGetProcAddress" {
        // The runtime asks for the lookup function itself; keep it going through us.
        Some(if version < 12000 {
            H::cuGetProcAddress
        } else {
            H::cuGetProcAddress_v2
        } as usize)
    } else {
        hook_for_proc(name, p, version, flags)
    };
    if let Some(i) = i {
        // SAFETY: pfn is valid for writes (the real call just wrote it).
        unsafe { *pfn = substitute(i, p) };
    }
}

/// `cuGetProcAddress(_v2)`: forwards, then hands out our hook for a function we hook.
///
/// # Safety
/// The arguments are what the C caller passed to `cuGetProcAddress(_v2)`.
pub unsafe fn get_proc_address(
    call: impl FnOnce() -> CuResult,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CuResult {
    let rc = call();
    if rc == CUDA_SUCCESS && !process::passive() {
        // SAFETY: the real call succeeded, so symbol is the caller's C string (or null) and pfn null
        // or the pointer it filled in: swap_proc's contract.
        keeping_errno(|| unsafe { swap_proc(symbol, pfn, cuda_version, flags) });
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_names_are_matched_exactly() {
        assert_eq!(
            by_elf_name(b"cuMemAlloc_v2"),
            Some(H::cuMemAlloc_v2 as usize)
        );
        assert_eq!(
            by_elf_name(b"cuMemAllocAsync_ptsz"),
            Some(H::cuMemAllocAsync_ptsz as usize)
        );
        assert_eq!(by_elf_name(b"cuMemAlloc"), None, "v1 has another ABI");
        assert_eq!(by_elf_name(b"cuMemAlloc_v2x"), None);
        assert_eq!(by_elf_name(b"cudnnCreate"), None);
    }

    #[test]
    fn base_name_version_and_flags_pick_the_versioned_function() {
        let p = 0x1234 as *mut c_void; // matches no exported pointer (no driver loaded)
        assert_eq!(
            hook_for_proc(b"cuMemAlloc", p, 3020, 0),
            Some(H::cuMemAlloc_v2 as usize)
        );
        assert_eq!(
            hook_for_proc(b"cuMemAlloc", p, 2000, 0),
            None,
            "v1: 32-bit ABI"
        );
        assert_eq!(
            hook_for_proc(b"cuMemAllocAsync", p, 11020, PER_THREAD_STREAM),
            Some(H::cuMemAllocAsync_ptsz as usize)
        );
        assert_eq!(
            hook_for_proc(b"cuMemAllocAsync", p, 11020, 1),
            Some(H::cuMemAllocAsync as usize)
        );
        assert_eq!(
            hook_for_proc(b"cuMemFreeHost", p, 2000, 0),
            Some(H::cuMemFreeHost as usize)
        );
        assert_eq!(hook_for_proc(b"cuMemcpy", p, 3020, 0), None);
    }

    #[test]
    fn second_versions_are_picked_from_their_cuda_version_on() {
        let p = 0x1234 as *mut c_void;
        let pick = |name: &[u8], v| hook_for_proc(name, p, v, 0);
        assert_eq!(
            pick(b"cuMemHostRegister", 6000),
            Some(H::cuMemHostRegister as usize)
        );
        assert_eq!(
            pick(b"cuMemHostRegister", 6050),
            Some(H::cuMemHostRegister_v2 as usize)
        );
        assert_eq!(
            pick(b"cuIpcOpenMemHandle", 10020),
            Some(H::cuIpcOpenMemHandle as usize)
        );
        assert_eq!(
            pick(b"cuIpcOpenMemHandle", 12000),
            Some(H::cuIpcOpenMemHandle_v2 as usize)
        );
        assert_eq!(pick(b"cuMemPoolImportPointer", 11010), None);
        assert_eq!(pick(b"cuMemMap", 10020), Some(H::cuMemMap as usize));
        assert_eq!(pick(b"cuMemAddressReserve", 10010), None);
    }

    #[test]
    fn graph_instantiation_is_hooked_in_every_form_a_runtime_asks_for() {
        let p = 0x1234 as *mut c_void;
        let pick = |name: &[u8], v, flags| hook_for_proc(name, p, v, flags);
        assert_eq!(
            pick(b"cuGraphInstantiate", 10000, 0),
            Some(H::cuGraphInstantiate as usize)
        );
        assert_eq!(
            pick(b"cuGraphInstantiate", 11080, 0),
            Some(H::cuGraphInstantiate_v2 as usize)
        );
        // Since CUDA 12 the base name is the WithFlags ABI, never the error-node one.
        assert_eq!(
            pick(b"cuGraphInstantiate", 12000, 0),
            Some(H::cuGraphInstantiateWithFlags as usize)
        );
        assert_eq!(
            pick(b"cuGraphInstantiate", 13050, 0),
            Some(H::cuGraphInstantiateWithFlags as usize)
        );
        assert_eq!(
            pick(b"cuGraphInstantiateWithParams", 12000, PER_THREAD_STREAM),
            Some(H::cuGraphInstantiateWithParams_ptsz as usize)
        );
        assert_eq!(
            pick(b"cuGraphInstantiateWithParams", 12000, 0),
            Some(H::cuGraphInstantiateWithParams as usize)
        );
    }

    #[test]
    fn offering_our_own_wrapper_never_makes_it_the_real_function() {
        let i = H::cuMemRelease as usize;
        let ours = wrapper(i);
        assert!(HOOKS[i].slot.offer(ours, ours));
        assert_eq!(substitute(i, ours), ours);
        let real = 0x5000 as *mut c_void;
        assert_eq!(substitute(i, real), ours);
        let other = 0x6000 as *mut c_void;
        assert_eq!(
            substitute(i, other),
            other,
            "a second, different driver is left alone"
        );
    }
}
