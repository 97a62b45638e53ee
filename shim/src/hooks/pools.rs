//! Stream-ordered allocation (`cuMemAllocAsync`, `cuMemAllocFromPoolAsync`, `cuMemFreeAsync`
//! and their `_ptsz` variants): recorded like device memory, except in a stream capture, where
//! the call only adds a node to the graph being captured.
//!
//! Whether a stream is being captured is asked of the driver (`cuStreamIsCapturing`) only while
//! a capture may be under way somewhere in the process: the hooks of `cuStreamBeginCapture` and
//! `cuStreamEndCapture` (every form) count the captures begun and not ended. Outside captures,
//! the usual case (PyTorch's `--exact-pools` allocator makes a call per tensor), a stream-ordered
//! allocation and its free then cost no driver call of ours. The count never undercounts: it is
//! raised before the capture begins, lowered only after a capture surely ended, and a shim
//! attached to a running program, which cannot know what captures began before it, always asks,
//! as does one whose runtime was handed a form of those functions it has no hook for (proc.rs).

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use super::driver::{current_device, DevPtr, Stream};
use super::{keeping_errno, memory, read, recording, CuResult, Helper, CUDA_SUCCESS};
use crate::api::Api;
use crate::probe::{self, Part};

type IsCapturing = unsafe extern "C" fn(Stream, *mut c_int) -> CuResult;
static IS_CAPTURING: Helper<IsCapturing> = Helper::new(c"cuStreamIsCapturing");
static IS_CAPTURING_PTSZ: Helper<IsCapturing> = Helper::new(c"cuStreamIsCapturing_ptsz");
/// CU_STREAM_CAPTURE_STATUS_NONE.
const CAPTURE_NONE: c_int = 0;

/// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: `cuStreamEndCapture` ended a capture that had been
/// invalidated.
const CAPTURE_INVALIDATED: CuResult = 901;

/// Stream captures begun and not surely ended, in the whole process (plus [`UNKNOWN`] in a shim
/// attached to a running program).
static CAPTURES: AtomicU64 = AtomicU64::new(0);
/// Added to [`CAPTURES`] for good where captures may have begun unseen.
const UNKNOWN: u64 = 1 << 40;

/// Captures may have begun that the hooks did not see (the shim was attached to a running
/// program, or a runtime was handed a form of beginning or ending one that no hook has): every
/// stream-ordered call asks the driver from now on.
pub fn captures_unknown() {
    CAPTURES.fetch_add(UNKNOWN, Ordering::SeqCst);
}

/// `cuStreamBeginCapture` and `cuStreamBeginCaptureToGraph`, every form: counted before the
/// real call (an allocation on the stream after it must see the count), uncounted if it failed.
///
/// # Safety
/// None beyond the hook's.
pub unsafe fn begin_capture(call: impl FnOnce() -> CuResult) -> CuResult {
    CAPTURES.fetch_add(1, Ordering::SeqCst);
    let rc = call();
    if rc != CUDA_SUCCESS {
        CAPTURES.fetch_sub(1, Ordering::SeqCst);
    }
    rc
}

/// `cuStreamEndCapture(_ptsz)`: uncounted when the capture surely ended (it succeeded, or ended
/// an invalidated capture). Any other error leaves the count as it was: a capture still under way
/// (called from the wrong thread, say) must keep being asked about, and one counted too many
/// costs only the driver calls this count saves.
///
/// # Safety
/// None beyond the hook's.
pub unsafe fn end_capture(call: impl FnOnce() -> CuResult) -> CuResult {
    let rc = call();
    if rc == CUDA_SUCCESS || rc == CAPTURE_INVALIDATED {
        // Never below zero: an end whose begin came before this shim (a child made without
        // fork, whose parent's count it does not have) lowers nothing.
        let _ = CAPTURES.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }
    rc
}

/// Whether `stream` is being captured into a graph: then a stream-ordered allocation or free
/// only adds a node to the graph. The `_ptsz` functions name the per-thread default stream
/// with a null stream, so they ask through `cuStreamIsCapturing_ptsz`. No capture under way in
/// the process ([`CAPTURES`]): no.
fn capturing(stream: Stream, api: Api) -> bool {
    if CAPTURES.load(Ordering::SeqCst) == 0 {
        return false;
    }
    let helper = if api.name().ends_with("_ptsz") {
        &IS_CAPTURING_PTSZ
    } else {
        &IS_CAPTURING
    };
    let Some(f) = helper.get() else {
        return false;
    };
    let mut status = CAPTURE_NONE;
    // SAFETY: f is the driver's cuStreamIsCapturing(_ptsz); status is a valid out-parameter.
    let rc = unsafe { f(stream, &mut status) };
    rc == CUDA_SUCCESS && status != CAPTURE_NONE
}

/// [`memory::alloc`] for stream-ordered allocations: in a stream capture the call made a graph
/// allocation node (its memory comes at launch), so it is remembered as one, not recorded.
///
/// # Safety
/// As for [`memory::alloc`].
#[inline]
pub unsafe fn alloc(
    call: impl FnOnce() -> CuResult,
    api: Api,
    out: *mut DevPtr,
    size: u64,
    stream: Stream,
) -> CuResult {
    recording(api, call, |rec, call| {
        probe::time(Part::Alloc, || {
            let stack = rec.stack();
            let rc = probe::time(Part::Driver, call);
            if rc == CUDA_SUCCESS && keeping_errno(|| capturing(stream, api)) {
                // SAFETY: the call succeeded, so out (if not null) holds the node's address.
                if let Some(addr) = unsafe { read(out) } {
                    rec.graph_node_added(addr);
                }
            } else {
                // SAFETY: out is null or valid for reads once the call has succeeded (this
                // function's contract), and the recorder runs the closure only after success.
                rec.allocated(rc, || unsafe { read(out) }, size, current_device, stack);
            }
            rc
        })
    })
}

/// [`memory::free`] for stream-ordered frees: in a stream capture the call made a graph free
/// node, which frees the block when the graph is launched.
///
/// # Safety
/// None beyond the hook's: `addr` is a value, never dereferenced.
#[inline]
pub unsafe fn free(
    call: impl FnOnce() -> CuResult,
    api: Api,
    addr: DevPtr,
    stream: Stream,
) -> CuResult {
    if addr != 0 && keeping_errno(|| capturing(stream, api)) {
        return call();
    }
    // SAFETY: memory::free asks nothing of its arguments: addr is a value.
    unsafe { memory::free(call, api, addr) }
}
