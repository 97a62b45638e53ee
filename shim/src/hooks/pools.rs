//! Stream-ordered allocation (`cuMemAllocAsync`, `cuMemAllocFromPoolAsync`, `cuMemFreeAsync`
//! and their `_ptsz` variants): recorded like device memory, except in a stream capture, where
//! the call only adds a node to the graph being captured.

use std::ffi::c_int;

use super::driver::{current_device, DevPtr, Stream};
use super::{keeping_errno, memory, read, recording, CuResult, Helper, CUDA_SUCCESS};
use crate::api::Api;
use crate::probe::{self, Part};

type IsCapturing = unsafe extern "C" fn(Stream, *mut c_int) -> CuResult;
static IS_CAPTURING: Helper<IsCapturing> = Helper::new(c"cuStreamIsCapturing");
static IS_CAPTURING_PTSZ: Helper<IsCapturing> = Helper::new(c"cuStreamIsCapturing_ptsz");
/// CU_STREAM_CAPTURE_STATUS_NONE.
const CAPTURE_NONE: c_int = 0;

/// Whether `stream` is being captured into a graph: then a stream-ordered allocation or free
/// only adds a node to the graph. The `_ptsz` functions name the per-thread default stream
/// with a null stream, so they ask through `cuStreamIsCapturing_ptsz`.
fn capturing(stream: Stream, api: Api) -> bool {
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
