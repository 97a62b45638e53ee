//! The point of record: exported driver memory functions (for programs linked with -lcuda),
//! the same wrappers handed out through `dlsym` and `cuGetProcAddress`, and the
//! `cuGetProcAddress` wrappers that swap the runtime's function pointers for ours.
//!
//! Signatures follow cuda.h (declared here by hand: CUdeviceptr is u64, CUresult is int).
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use super::enter;
use super::recorder::enter_unlabelled;
use super::{keeping_errno, CuResult, Slot, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS};
use crate::api::Api;
use crate::{process, real, record};

type DevPtr = u64;
type Stream = *mut c_void;

/// One wrapped driver function: its ELF name, the base name and version `cuGetProcAddress`
/// is asked for, and where the real function is kept.
pub struct DriverHook {
    pub slot: Slot,
    base: &'static [u8],
    /// The lowest cudaVersion for which `base` resolves to this versioned function.
    since: c_int,
    /// Whether this is the per-thread-default-stream variant (flags bit 2).
    ptsz: bool,
    /// The driver's exported pointer for `slot.name`, once looked up (NOT_EXPORTED if absent).
    exported: AtomicPtr<c_void>,
}

const NOT_EXPORTED: *mut c_void = ptr::dangling_mut::<c_void>();
/// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
const PER_THREAD_STREAM: u64 = 2;

const fn cstr(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(c) => c,
        Err(_) => panic!("hook names are NUL-terminated literals"),
    }
}

macro_rules! driver_hooks {
    ($($name:ident: $base:literal since $since:literal $(, $ptsz:ident)?;)*) => {
        /// Index of each hook in [`HOOKS`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        #[repr(usize)]
        pub enum H { $($name,)* }

        pub static HOOKS: [DriverHook; [$(stringify!($name)),*].len()] = [$(
            DriverHook {
                slot: Slot::new(cstr(concat!(stringify!($name), "\0").as_bytes())),
                base: $base.as_bytes(),
                since: $since,
                ptsz: driver_hooks!(@ptsz $($ptsz)?),
                exported: AtomicPtr::new(ptr::null_mut()),
            },
        )*];

        /// Our wrapper for hook `i`.
        pub fn wrapper(i: usize) -> *mut c_void {
            let all: [*mut c_void; HOOKS.len()] = [$($name as *mut c_void,)*];
            all[i]
        }
    };
    (@ptsz ptsz) => { true };
    (@ptsz) => { false };
}

driver_hooks! {
    cuGetProcAddress: "cuGetProcAddress" since 11030;
    cuGetProcAddress_v2: "cuGetProcAddress" since 12000;
    cuMemAlloc_v2: "cuMemAlloc" since 3020;
    cuMemAllocPitch_v2: "cuMemAllocPitch" since 3020;
    cuMemFree_v2: "cuMemFree" since 3020;
    cuMemAllocManaged: "cuMemAllocManaged" since 6000;
    cuMemAllocHost_v2: "cuMemAllocHost" since 3020;
    cuMemHostAlloc: "cuMemHostAlloc" since 2020;
    cuMemFreeHost: "cuMemFreeHost" since 2000;
    cuMemAllocAsync: "cuMemAllocAsync" since 11020;
    cuMemAllocAsync_ptsz: "cuMemAllocAsync" since 11020, ptsz;
    cuMemFreeAsync: "cuMemFreeAsync" since 11020;
    cuMemFreeAsync_ptsz: "cuMemFreeAsync" since 11020, ptsz;
    cuMemAllocFromPoolAsync: "cuMemAllocFromPoolAsync" since 11020;
    cuMemAllocFromPoolAsync_ptsz: "cuMemAllocFromPoolAsync" since 11020, ptsz;
    cuMemCreate: "cuMemCreate" since 10020;
    cuMemRelease: "cuMemRelease" since 10020;
    cuArrayCreate_v2: "cuArrayCreate" since 3020;
    cuArray3DCreate_v2: "cuArray3DCreate" since 3020;
    cuArrayDestroy: "cuArrayDestroy" since 2000;
    cuGraphAddMemAllocNode: "cuGraphAddMemAllocNode" since 11040;
    cuGraphInstantiateWithFlags: "cuGraphInstantiateWithFlags" since 11040;
    cuGraphInstantiateWithParams: "cuGraphInstantiateWithParams" since 12000;
    cuGraphLaunch: "cuGraphLaunch" since 10000;
    cuGraphLaunch_ptsz: "cuGraphLaunch" since 10000, ptsz;
    cuGraphExecDestroy: "cuGraphExecDestroy" since 10000;
    // Registered host memory, IPC and virtual memory (issue 12). The _v2 functions have the
    // same C signature as the first ones; both are exported, so both are wrapped.
    cuMemHostRegister: "cuMemHostRegister" since 4000;
    cuMemHostRegister_v2: "cuMemHostRegister" since 6050;
    cuMemHostUnregister: "cuMemHostUnregister" since 4000;
    cuIpcOpenMemHandle: "cuIpcOpenMemHandle" since 4010;
    cuIpcOpenMemHandle_v2: "cuIpcOpenMemHandle" since 11000;
    cuIpcCloseMemHandle: "cuIpcCloseMemHandle" since 4010;
    cuMemPoolImportPointer: "cuMemPoolImportPointer" since 11020;
    cuMemAddressReserve: "cuMemAddressReserve" since 10020;
    cuMemAddressFree: "cuMemAddressFree" since 10020;
    cuMemMap: "cuMemMap" since 10020;
    cuMemUnmap: "cuMemUnmap" since 10020;
}

impl H {
    fn hook(self) -> &'static DriverHook {
        &HOOKS[self as usize]
    }
}

/// The real function of hook `h` as type `F`, or `None` if the driver does not have it.
///
/// # Safety
/// `F` must be the function-pointer type of hook `h`'s C signature.
#[inline]
unsafe fn real_fn<F: Copy>(h: H) -> Option<F> {
    let p = h.hook().slot.get(wrapper(h as usize), real::driver);
    if p.is_null() {
        None
    } else {
        // SAFETY: p is the driver's function named by the hook, whose type the caller gives.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

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
/// — else the base-name + version + flags rule.
fn hook_for_proc(name: &[u8], p: *mut c_void, version: c_int, flags: u64) -> Option<usize> {
    let candidates = || HOOKS.iter().enumerate().filter(|(_, h)| h.base == name);
    if let Some((i, _)) = candidates().find(|(i, _)| exported_pointer(*i) == p) {
        return Some(i);
    }
    if let Some(i) = (0..HOOKS.len()).find(|&i| exported_pointer(i) == p) {
        return Some(i);
    }
    let ptsz = flags & PER_THREAD_STREAM != 0;
    candidates()
        .filter(|(_, h)| version >= h.since && h.ptsz == ptsz)
        .max_by_key(|(_, h)| h.since)
        .map(|(i, _)| i)
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

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CuResult {
    type F = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CuResult;
    // SAFETY: F is cuGetProcAddress's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuGetProcAddress) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments are the caller's, passed through unchanged.
    let rc = unsafe { real(symbol, pfn, cuda_version, flags) };
    if rc == CUDA_SUCCESS && !process::passive() {
        // SAFETY: the real call succeeded with these arguments.
        keeping_errno(|| unsafe { swap_proc(symbol, pfn, cuda_version, flags) });
    }
    rc
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CuResult {
    type F =
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CuResult;
    // SAFETY: F is cuGetProcAddress_v2's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuGetProcAddress_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments are the caller's, passed through unchanged.
    let rc = unsafe { real(symbol, pfn, cuda_version, flags, status) };
    if rc == CUDA_SUCCESS && !process::passive() {
        // SAFETY: the real call succeeded with these arguments.
        keeping_errno(|| unsafe { swap_proc(symbol, pfn, cuda_version, flags) });
    }
    rc
}

static CTX_GET_DEVICE: Slot = Slot::new(c"cuCtxGetDevice");
static DEVICE_GET_COUNT: Slot = Slot::new(c"cuDeviceGetCount");
/// Devices the process sees: 0 not asked yet, -1 unknown (the driver would not say).
static DEVICE_COUNT: AtomicI32 = AtomicI32::new(0);

/// The current context's device ordinal, if there is one. With a single visible device that is
/// 0 without asking the driver: one call less per allocation in the common case.
fn current_device() -> Option<i32> {
    if device_count() == 1 {
        return Some(0);
    }
    type F = unsafe extern "C" fn(*mut c_int) -> CuResult;
    let p = CTX_GET_DEVICE.get_helper(real::driver);
    if p.is_null() {
        return None;
    }
    // SAFETY: p is the driver's cuCtxGetDevice.
    let f = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
    let mut device: c_int = -1;
    // SAFETY: device is a valid out-parameter.
    (unsafe { f(&mut device) } == CUDA_SUCCESS).then_some(device)
}

/// How many devices the process sees, asked once (the count cannot change in a process).
fn device_count() -> i32 {
    let known = DEVICE_COUNT.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    type F = unsafe extern "C" fn(*mut c_int) -> CuResult;
    let p = DEVICE_GET_COUNT.get_helper(real::driver);
    let mut count: c_int = 0;
    // SAFETY: p is the driver's cuDeviceGetCount; count is a valid out-parameter.
    let ok = !p.is_null()
        && unsafe { std::mem::transmute::<*mut c_void, F>(p)(&mut count) } == CUDA_SUCCESS
        && count > 0;
    let count = if ok { count } else { -1 };
    DEVICE_COUNT.store(count, Ordering::Relaxed);
    count
}

/// Reads an out-parameter the real call filled in.
///
/// # Safety
/// `p` is null or valid for reads.
#[inline]
unsafe fn read(p: *const u64) -> Option<u64> {
    // SAFETY: per the function's contract.
    (!p.is_null()).then(|| unsafe { *p })
}

/// The body shared by allocations that write one address or handle to `out` and whose size is
/// known before the call: forward, then record the block or the failure.
///
/// # Safety
/// `out` is the caller's out-parameter: null, or valid for reads once `real` has succeeded.
#[inline]
unsafe fn alloc_with(
    api: Api,
    out: *const u64,
    size: u64,
    device: impl FnOnce() -> Option<i32>,
    real: impl FnOnce() -> CuResult,
) -> CuResult {
    let Some(rec) = enter(api) else {
        return real();
    };
    let rc = real();
    // SAFETY: per the function's contract; read only after success.
    rec.allocated(rc, || unsafe { read(out) }, size, device);
    rc
}

/// The body shared by every free: forget, forward, settle.
#[inline]
fn free_with(api: Api, addr: u64, real: impl FnOnce() -> CuResult) -> CuResult {
    if addr == 0 {
        return real(); // cuMemFree(0) and friends: nothing to record.
    }
    let Some(rec) = enter(api) else {
        return real();
    };
    let taken = rec.free_started(addr);
    let rc = real();
    rec.free_finished(addr, taken, rc);
    rc
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut DevPtr, bytesize: usize) -> CuResult {
    type F = unsafe extern "C" fn(*mut DevPtr, usize) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemAlloc_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuMemAlloc_v2,
            dptr,
            bytesize as u64,
            current_device,
            || real(dptr, bytesize),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemAllocPitch_v2(
    dptr: *mut DevPtr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    element_size: c_uint,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut DevPtr, *mut usize, usize, usize, c_uint) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemAllocPitch_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    let Some(rec) = enter(Api::cuMemAllocPitch_v2) else {
        // SAFETY: arguments are the caller's, passed through unchanged.
        return unsafe { real(dptr, pitch, width, height, element_size) };
    };
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(dptr, pitch, width, height, element_size) };
    // *pitch is the driver's only once the call succeeded: before that it may be uninitialised.
    let pitch = if rc == CUDA_SUCCESS {
        // SAFETY: the call succeeded, so pitch (if not null) holds the pitch it wrote.
        unsafe { read(pitch as *const u64) }
    } else {
        None
    };
    let size = match pitch {
        Some(p) => p.saturating_mul(height as u64),
        None => (width as u64).saturating_mul(height as u64),
    };
    // SAFETY: the recorder reads the address only after success, when dptr holds it.
    rec.allocated(rc, || unsafe { read(dptr) }, size, current_device);
    rc
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemFree_v2(dptr: DevPtr) -> CuResult {
    type F = unsafe extern "C" fn(DevPtr) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemFree_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuMemFree_v2, dptr, || unsafe { real(dptr) })
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemAllocManaged(
    dptr: *mut DevPtr,
    bytesize: usize,
    flags: c_uint,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut DevPtr, usize, c_uint) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemAllocManaged) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuMemAllocManaged,
            dptr,
            bytesize as u64,
            current_device,
            || real(dptr, bytesize, flags),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) -> CuResult {
    type F = unsafe extern "C" fn(*mut *mut c_void, usize) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemAllocHost_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuMemAllocHost_v2,
            pp as *const u64,
            bytesize as u64,
            || None,
            || real(pp, bytesize),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemHostAlloc) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuMemHostAlloc,
            pp as *const u64,
            bytesize as u64,
            || None,
            || real(pp, bytesize, flags),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CuResult {
    type F = unsafe extern "C" fn(*mut c_void) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemFreeHost) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuMemFreeHost, p as u64, || unsafe { real(p) })
}

macro_rules! alloc_async {
    ($name:ident) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            dptr: *mut DevPtr,
            bytesize: usize,
            stream: Stream,
        ) -> CuResult {
            type F = unsafe extern "C" fn(*mut DevPtr, usize, Stream) -> CuResult;
            // SAFETY: F is the hook's signature.
            let Some(real) = (unsafe { real_fn::<F>(H::$name) }) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
            unsafe {
                alloc_stream_ordered(Api::$name, dptr, bytesize as u64, stream, || {
                    real(dptr, bytesize, stream)
                })
            }
        }
    };
}

macro_rules! alloc_from_pool {
    ($name:ident) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            dptr: *mut DevPtr,
            bytesize: usize,
            pool: *mut c_void,
            stream: Stream,
        ) -> CuResult {
            type F = unsafe extern "C" fn(*mut DevPtr, usize, *mut c_void, Stream) -> CuResult;
            // SAFETY: F is the hook's signature.
            let Some(real) = (unsafe { real_fn::<F>(H::$name) }) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
            unsafe {
                alloc_stream_ordered(Api::$name, dptr, bytesize as u64, stream, || {
                    real(dptr, bytesize, pool, stream)
                })
            }
        }
    };
}

macro_rules! free_async {
    ($name:ident) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(dptr: DevPtr, stream: Stream) -> CuResult {
            type F = unsafe extern "C" fn(DevPtr, Stream) -> CuResult;
            // SAFETY: F is the hook's signature.
            let Some(real) = (unsafe { real_fn::<F>(H::$name) }) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            // SAFETY: passed through unchanged.
            free_stream_ordered(Api::$name, dptr, stream, || unsafe { real(dptr, stream) })
        }
    };
}

static IS_CAPTURING: Slot = Slot::new(c"cuStreamIsCapturing");
static IS_CAPTURING_PTSZ: Slot = Slot::new(c"cuStreamIsCapturing_ptsz");
/// CU_STREAM_CAPTURE_STATUS_NONE.
const CAPTURE_NONE: c_int = 0;

/// Whether `stream` is being captured into a graph: then a stream-ordered allocation or free
/// only adds a node to the graph. The `_ptsz` functions name the per-thread default stream
/// with a null stream, so they ask through `cuStreamIsCapturing_ptsz`.
fn capturing(stream: Stream, api: Api) -> bool {
    let slot = if api.name().ends_with("_ptsz") {
        &IS_CAPTURING_PTSZ
    } else {
        &IS_CAPTURING
    };
    type F = unsafe extern "C" fn(Stream, *mut c_int) -> CuResult;
    let p = slot.get_helper(real::driver);
    if p.is_null() {
        return false;
    }
    let mut status = CAPTURE_NONE;
    // SAFETY: p is the driver's cuStreamIsCapturing(_ptsz); status is a valid out-parameter.
    let rc = unsafe { std::mem::transmute::<*mut c_void, F>(p)(stream, &mut status) };
    rc == CUDA_SUCCESS && status != CAPTURE_NONE
}

/// [`alloc_with`] for stream-ordered allocations: in a stream capture the call made a graph
/// allocation node (its memory comes at launch), so it is remembered as one, not recorded.
///
/// # Safety
/// As for [`alloc_with`].
#[inline]
unsafe fn alloc_stream_ordered(
    api: Api,
    out: *const u64,
    size: u64,
    stream: Stream,
    real: impl FnOnce() -> CuResult,
) -> CuResult {
    let Some(rec) = enter(api) else {
        return real();
    };
    let rc = real();
    if rc == CUDA_SUCCESS && keeping_errno(|| capturing(stream, api)) {
        // SAFETY: the call succeeded, so out (if not null) holds the node's address.
        if let Some(addr) = unsafe { read(out) } {
            rec.graph_node_added(addr);
        }
    } else {
        // SAFETY: per the function's contract; read only after success.
        rec.allocated(rc, || unsafe { read(out) }, size, current_device);
    }
    rc
}

/// [`free_with`] for stream-ordered frees: in a stream capture the call made a graph free node,
/// which frees the block when the graph is launched.
#[inline]
fn free_stream_ordered(
    api: Api,
    addr: u64,
    stream: Stream,
    real: impl FnOnce() -> CuResult,
) -> CuResult {
    if addr != 0 && keeping_errno(|| capturing(stream, api)) {
        return real();
    }
    free_with(api, addr, real)
}

alloc_async!(cuMemAllocAsync);
alloc_async!(cuMemAllocAsync_ptsz);
alloc_from_pool!(cuMemAllocFromPoolAsync);
alloc_from_pool!(cuMemAllocFromPoolAsync_ptsz);
free_async!(cuMemFreeAsync);
free_async!(cuMemFreeAsync_ptsz);

/// The head of CUmemAllocationProp: type, requested handle types, then CUmemLocation.
#[repr(C)]
struct AllocationPropHead {
    kind: c_int,
    handle_types: c_int,
    location_type: c_int,
    location_id: c_int,
}

/// CU_MEM_LOCATION_TYPE_DEVICE.
const LOCATION_DEVICE: c_int = 1;

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut u64,
    size: usize,
    prop: *const c_void,
    flags: u64,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut u64, usize, *const c_void, u64) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemCreate) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    let device = || {
        // SAFETY: the real call accepted prop, so it points at a CUmemAllocationProp.
        let head = unsafe { (prop as *const AllocationPropHead).as_ref() }?;
        (head.location_type == LOCATION_DEVICE).then_some(head.location_id)
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(Api::cuMemCreate, handle, size as u64, device, || {
            real(handle, size, prop, flags)
        })
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemRelease(handle: u64) -> CuResult {
    type F = unsafe extern "C" fn(u64) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemRelease) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuMemRelease, handle, || unsafe { real(handle) })
}

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

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuArrayCreate_v2(
    array: *mut *mut c_void,
    desc: *const ArrayDescriptor,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut *mut c_void, *const ArrayDescriptor) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuArrayCreate_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: desc is the caller's descriptor, null or valid.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| {
        array_bytes(d.width, d.height, 1, d.format, d.channels)
    });
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuArrayCreate_v2,
            array as *const u64,
            size,
            current_device,
            || real(array, desc),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuArray3DCreate_v2(
    array: *mut *mut c_void,
    desc: *const Array3dDescriptor,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut *mut c_void, *const Array3dDescriptor) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuArray3DCreate_v2) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: desc is the caller's descriptor, null or valid.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| {
        array_bytes(d.width, d.height, d.depth, d.format, d.channels)
    });
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuArray3DCreate_v2,
            array as *const u64,
            size,
            current_device,
            || real(array, desc),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuArrayDestroy(array: *mut c_void) -> CuResult {
    type F = unsafe extern "C" fn(*mut c_void) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuArrayDestroy) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuArrayDestroy, array as u64, || unsafe { real(array) })
}

type Graph = *mut c_void;
type GraphNode = *mut c_void;
type GraphExec = *mut c_void;

/// CUDA_MEM_ALLOC_NODE_PARAMS (v1 and v2 share it): CUmemPoolProps (88 bytes), the access
/// descriptors, then the size asked for and the address the driver returns.
#[repr(C)]
pub struct MemAllocNodeParams {
    pool_props: [u64; 11],
    access_descs: *const c_void,
    access_desc_count: usize,
    bytesize: usize,
    dptr: DevPtr,
}

/// CU_GRAPH_NODE_TYPE_MEM_ALLOC and _MEM_FREE.
const NODE_MEM_ALLOC: c_int = 10;
const NODE_MEM_FREE: c_int = 11;

static GRAPH_GET_NODES: Slot = Slot::new(c"cuGraphGetNodes");
static NODE_GET_TYPE: Slot = Slot::new(c"cuGraphNodeGetType");
static ALLOC_NODE_PARAMS: Slot = Slot::new(c"cuGraphMemAllocNodeGetParams");
static FREE_NODE_PARAMS: Slot = Slot::new(c"cuGraphMemFreeNodeGetParams");

/// The memory nodes of `graph`, asked of the driver (top-level nodes: memory nodes cannot sit
/// in child graphs). None if the driver lacks a function it takes.
fn graph_memory(graph: Graph) -> Option<crate::graphs::ExecMemory> {
    type GetNodes = unsafe extern "C" fn(Graph, *mut GraphNode, *mut usize) -> CuResult;
    type GetType = unsafe extern "C" fn(GraphNode, *mut c_int) -> CuResult;
    type AllocParams = unsafe extern "C" fn(GraphNode, *mut MemAllocNodeParams) -> CuResult;
    type FreeParams = unsafe extern "C" fn(GraphNode, *mut DevPtr) -> CuResult;
    let resolve = |slot: &Slot| {
        let p = slot.get_helper(real::driver);
        (!p.is_null()).then_some(p)
    };
    // SAFETY: each pointer is the driver's function of that name, whose cuda.h type is given.
    let (get_nodes, get_type, alloc_params, free_params) = unsafe {
        (
            std::mem::transmute::<*mut c_void, GetNodes>(resolve(&GRAPH_GET_NODES)?),
            std::mem::transmute::<*mut c_void, GetType>(resolve(&NODE_GET_TYPE)?),
            std::mem::transmute::<*mut c_void, AllocParams>(resolve(&ALLOC_NODE_PARAMS)?),
            std::mem::transmute::<*mut c_void, FreeParams>(resolve(&FREE_NODE_PARAMS)?),
        )
    };
    let mut count = 0usize;
    // SAFETY: a null array asks for the count only.
    if unsafe { get_nodes(graph, ptr::null_mut(), &mut count) } != CUDA_SUCCESS {
        return None;
    }
    let mut nodes = vec![ptr::null_mut(); count];
    // SAFETY: nodes has room for count handles.
    if unsafe { get_nodes(graph, nodes.as_mut_ptr(), &mut count) } != CUDA_SUCCESS {
        return None;
    }
    let (mut allocs, mut frees) = (Vec::new(), Vec::new());
    for &node in nodes.iter().take(count) {
        let mut kind: c_int = -1;
        // SAFETY: node came from the driver; kind is a valid out-parameter.
        if unsafe { get_type(node, &mut kind) } != CUDA_SUCCESS {
            continue;
        }
        if kind == NODE_MEM_ALLOC {
            // SAFETY: all-zero is a valid MemAllocNodeParams (integers and a null pointer).
            let mut params: MemAllocNodeParams = unsafe { std::mem::zeroed() };
            // SAFETY: node is an allocation node; params is a valid out-parameter.
            if unsafe { alloc_params(node, &mut params) } == CUDA_SUCCESS {
                allocs.push((params.dptr, params.bytesize as u64));
            }
        } else if kind == NODE_MEM_FREE {
            let mut dptr: DevPtr = 0;
            // SAFETY: node is a free node; dptr is a valid out-parameter.
            if unsafe { free_params(node, &mut dptr) } == CUDA_SUCCESS {
                frees.push(dptr);
            }
        }
    }
    Some(crate::graphs::ExecMemory::from_nodes(allocs, frees))
}

/// After a successful instantiation: learn what launches of the executable allocate and free.
/// The guard is taken only now: the instantiation itself is forwarded as if unhooked.
///
/// # Safety
/// `exec` is null or points at the executable handle the real call wrote.
unsafe fn instantiated(exec: *mut GraphExec, graph: Graph) {
    let Some(rec) = enter_unlabelled() else {
        return;
    };
    // SAFETY: per the contract.
    let Some(exec) = (unsafe { read(exec as *const u64) }) else {
        return;
    };
    rec.graph_instantiated(exec, || graph_memory(graph));
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuGraphAddMemAllocNode(
    node: *mut GraphNode,
    graph: Graph,
    dependencies: *const GraphNode,
    dependency_count: usize,
    params: *mut MemAllocNodeParams,
) -> CuResult {
    type F = unsafe extern "C" fn(
        *mut GraphNode,
        Graph,
        *const GraphNode,
        usize,
        *mut MemAllocNodeParams,
    ) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuGraphAddMemAllocNode) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    let Some(rec) = enter(Api::cuGraphAddMemAllocNode) else {
        // SAFETY: arguments are the caller's, passed through unchanged.
        return unsafe { real(node, graph, dependencies, dependency_count, params) };
    };
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(node, graph, dependencies, dependency_count, params) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the call succeeded, so params points at parameters with dptr filled in.
        if let Some(p) = unsafe { params.as_ref() } {
            rec.graph_node_added(p.dptr);
        }
    }
    rc
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuGraphInstantiateWithFlags(
    exec: *mut GraphExec,
    graph: Graph,
    flags: u64,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut GraphExec, Graph, u64) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuGraphInstantiateWithFlags) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(exec, graph, flags) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the call succeeded and wrote *exec.
        unsafe { instantiated(exec, graph) };
    }
    rc
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuGraphInstantiateWithParams(
    exec: *mut GraphExec,
    graph: Graph,
    params: *mut c_void,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut GraphExec, Graph, *mut c_void) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuGraphInstantiateWithParams) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(exec, graph, params) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the call succeeded and wrote *exec.
        unsafe { instantiated(exec, graph) };
    }
    rc
}

macro_rules! graph_launch {
    ($name:ident) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(exec: GraphExec, stream: Stream) -> CuResult {
            type F = unsafe extern "C" fn(GraphExec, Stream) -> CuResult;
            // SAFETY: F is the hook's signature.
            let Some(real) = (unsafe { real_fn::<F>(H::$name) }) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            let Some(rec) = enter(Api::$name) else {
                // SAFETY: passed through unchanged.
                return unsafe { real(exec, stream) };
            };
            // SAFETY: passed through unchanged.
            let rc = unsafe { real(exec, stream) };
            if rc == CUDA_SUCCESS {
                rec.graph_launched(exec as u64, current_device);
            }
            rc
        }
    };
}

graph_launch!(cuGraphLaunch);
graph_launch!(cuGraphLaunch_ptsz);

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuGraphExecDestroy(exec: GraphExec) -> CuResult {
    type F = unsafe extern "C" fn(GraphExec) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuGraphExecDestroy) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(exec) };
    if rc == CUDA_SUCCESS {
        keeping_errno(|| record::graph_exec_destroyed(exec as u64));
    }
    rc
}

// ---- Registered host memory, IPC and virtual memory (issue 12) ----

/// CUipcMemHandle (and cudaIpcMemHandle_t): 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcMemHandle {
    reserved: [c_char; 64],
}

static GET_ADDRESS_RANGE: Slot = Slot::new(c"cuMemGetAddressRange_v2");

/// The size of the allocation holding `dptr`, as the driver tells it; 0 if it will not.
/// Opened and imported memory has no size in the call that makes it.
fn allocation_size(dptr: DevPtr) -> u64 {
    type F = unsafe extern "C" fn(*mut DevPtr, *mut usize, DevPtr) -> CuResult;
    let p = GET_ADDRESS_RANGE.get(ptr::null_mut(), real::driver);
    if p.is_null() {
        return 0;
    }
    // SAFETY: p is the driver's cuMemGetAddressRange_v2.
    let f = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
    let (mut base, mut size): (DevPtr, usize) = (0, 0);
    // SAFETY: both out-parameters are valid.
    match unsafe { f(&mut base, &mut size, dptr) } {
        CUDA_SUCCESS => size as u64,
        _ => 0,
    }
}

/// The body shared by calls that write an address of memory allocated elsewhere (IPC) to
/// `out`: forward, then record it with the size the driver gives for it.
///
/// # Safety
/// `out` is the caller's out-parameter: null, or valid for reads once `real` has succeeded.
#[inline]
unsafe fn open_with(api: Api, out: *const u64, real: impl FnOnce() -> CuResult) -> CuResult {
    let Some(rec) = enter(api) else {
        return real();
    };
    let rc = real();
    // SAFETY: per the function's contract; read only after success.
    let opened = || unsafe { read(out) };
    let size = if rc == CUDA_SUCCESS {
        keeping_errno(|| opened().map_or(0, allocation_size))
    } else {
        0
    };
    rec.allocated(rc, opened, size, current_device);
    rc
}

macro_rules! host_register {
    ($name:ident) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(p: *mut c_void, bytesize: usize, flags: c_uint) -> CuResult {
            type F = unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CuResult;
            // SAFETY: F is the hook's signature.
            let Some(real) = (unsafe { real_fn::<F>(H::$name) }) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            let addr = p as u64;
            // SAFETY: arguments pass through unchanged; `addr` is a local.
            unsafe {
                alloc_with(
                    Api::$name,
                    &addr,
                    bytesize as u64,
                    || None,
                    || real(p, bytesize, flags),
                )
            }
        }
    };
}

host_register!(cuMemHostRegister);
host_register!(cuMemHostRegister_v2);

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CuResult {
    type F = unsafe extern "C" fn(*mut c_void) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemHostUnregister) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuMemHostUnregister, p as u64, || unsafe { real(p) })
}

macro_rules! ipc_open {
    ($name:ident) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            dptr: *mut DevPtr,
            handle: IpcMemHandle,
            flags: c_uint,
        ) -> CuResult {
            type F = unsafe extern "C" fn(*mut DevPtr, IpcMemHandle, c_uint) -> CuResult;
            // SAFETY: F is the hook's signature.
            let Some(real) = (unsafe { real_fn::<F>(H::$name) }) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
            unsafe { open_with(Api::$name, dptr, || real(dptr, handle, flags)) }
        }
    };
}

ipc_open!(cuIpcOpenMemHandle);
ipc_open!(cuIpcOpenMemHandle_v2);

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuIpcCloseMemHandle(dptr: DevPtr) -> CuResult {
    type F = unsafe extern "C" fn(DevPtr) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuIpcCloseMemHandle) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuIpcCloseMemHandle, dptr, || unsafe { real(dptr) })
}

/// Recorded in the device space: the program frees it with cuMemFree or cuMemFreeAsync.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemPoolImportPointer(
    dptr: *mut DevPtr,
    pool: *mut c_void,
    share_data: *mut c_void,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut DevPtr, *mut c_void, *mut c_void) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemPoolImportPointer) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        open_with(Api::cuMemPoolImportPointer, dptr, || {
            real(dptr, pool, share_data)
        })
    }
}

/// Address space, no memory: recorded with its size, counted in no byte total.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemAddressReserve(
    dptr: *mut DevPtr,
    size: usize,
    alignment: usize,
    addr: DevPtr,
    flags: u64,
) -> CuResult {
    type F = unsafe extern "C" fn(*mut DevPtr, usize, usize, DevPtr, u64) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemAddressReserve) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: arguments pass through unchanged; the out-parameter is read after success.
    unsafe {
        alloc_with(
            Api::cuMemAddressReserve,
            dptr,
            size as u64,
            || None,
            || real(dptr, size, alignment, addr, flags),
        )
    }
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemAddressFree(dptr: DevPtr, size: usize) -> CuResult {
    type F = unsafe extern "C" fn(DevPtr, usize) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemAddressFree) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: passed through unchanged.
    free_with(Api::cuMemAddressFree, dptr, || unsafe { real(dptr, size) })
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemMap(
    dptr: DevPtr,
    size: usize,
    offset: usize,
    handle: u64,
    flags: u64,
) -> CuResult {
    type F = unsafe extern "C" fn(DevPtr, usize, usize, u64, u64) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemMap) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    let Some(rec) = enter(Api::cuMemMap) else {
        // SAFETY: arguments are the caller's, passed through unchanged.
        return unsafe { real(dptr, size, offset, handle, flags) };
    };
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(dptr, size, offset, handle, flags) };
    rec.mapped(rc, dptr, size as u64, handle);
    rc
}

/// Unmaps every mapping that starts in `dptr..dptr + size`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cuMemUnmap(dptr: DevPtr, size: usize) -> CuResult {
    type F = unsafe extern "C" fn(DevPtr, usize) -> CuResult;
    // SAFETY: F is the hook's signature.
    let Some(real) = (unsafe { real_fn::<F>(H::cuMemUnmap) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    let Some(rec) = enter(Api::cuMemUnmap) else {
        // SAFETY: arguments are the caller's, passed through unchanged.
        return unsafe { real(dptr, size) };
    };
    let taken = rec.unmap_started(dptr, size as u64);
    // SAFETY: passed through unchanged.
    let rc = unsafe { real(dptr, size) };
    rec.unmap_finished(dptr, taken, rc);
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

    #[test]
    fn array_sizes_count_channels_and_format() {
        assert_eq!(array_bytes(64, 32, 0, 0x20, 4), 64 * 32 * 16);
        assert_eq!(array_bytes(100, 0, 0, 0x01, 1), 100);
        assert_eq!(array_bytes(8, 8, 8, 0x10, 2), 8 * 8 * 8 * 4);
    }
}
