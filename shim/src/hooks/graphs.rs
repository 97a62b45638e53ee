//! CUDA graphs: allocation nodes (made explicitly, or by a stream-ordered allocation in stream
//! capture: `pools`), instantiation (where the shim asks the driver what launches of the
//! executable will allocate and free), launches (where that memory becomes live), and the end of
//! an executable. The bookkeeping is `crate::graphs`'s; this file only asks and tells.

use std::ffi::{c_int, c_void};
use std::ptr;

use super::driver::{current_device, DevPtr};
use super::{keeping_errno, read, recording, unlabelled, CuResult, Helper, CUDA_SUCCESS};
use crate::api::Api;
use crate::graphs::ExecMemory;
use crate::record;

pub type Graph = *mut c_void;
pub type GraphNode = *mut c_void;
pub type GraphExec = *mut c_void;

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

static GRAPH_GET_NODES: Helper<
    unsafe extern "C" fn(Graph, *mut GraphNode, *mut usize) -> CuResult,
> = Helper::new(c"cuGraphGetNodes");
static NODE_GET_TYPE: Helper<unsafe extern "C" fn(GraphNode, *mut c_int) -> CuResult> =
    Helper::new(c"cuGraphNodeGetType");
static ALLOC_NODE_PARAMS: Helper<
    unsafe extern "C" fn(GraphNode, *mut MemAllocNodeParams) -> CuResult,
> = Helper::new(c"cuGraphMemAllocNodeGetParams");
static FREE_NODE_PARAMS: Helper<unsafe extern "C" fn(GraphNode, *mut DevPtr) -> CuResult> =
    Helper::new(c"cuGraphMemFreeNodeGetParams");

/// The memory nodes of `graph`, asked of the driver (top-level nodes: memory nodes cannot sit
/// in child graphs). None if the driver lacks a function it takes.
fn graph_memory(graph: Graph) -> Option<ExecMemory> {
    let get_nodes = GRAPH_GET_NODES.get()?;
    let get_type = NODE_GET_TYPE.get()?;
    let alloc_params = ALLOC_NODE_PARAMS.get()?;
    let free_params = FREE_NODE_PARAMS.get()?;
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
    Some(ExecMemory::from_nodes(allocs, frees))
}

/// `cuGraphAddMemAllocNode`: remembers where the node's memory will be.
///
/// # Safety
/// `params` is the caller's: null, or valid for reads once `call` has succeeded.
pub unsafe fn add_alloc_node(
    call: impl FnOnce() -> CuResult,
    api: Api,
    params: *mut MemAllocNodeParams,
) -> CuResult {
    recording(api, call, |rec, call| {
        let rc = call();
        if rc == CUDA_SUCCESS {
            // SAFETY: the call succeeded, so params points at parameters with dptr filled in.
            if let Some(p) = unsafe { params.as_ref() } {
                rec.graph_node_added(p.dptr);
            }
        }
        rc
    })
}

/// `cuGraphInstantiateWithFlags` / `WithParams`: after a successful instantiation, learns what
/// launches of the executable allocate and free. The guard is taken only after the call: the
/// instantiation itself is forwarded as if unhooked.
///
/// # Safety
/// `exec` is the caller's: null, or valid for reads once `call` has succeeded.
pub unsafe fn instantiate(
    call: impl FnOnce() -> CuResult,
    exec: *mut GraphExec,
    graph: Graph,
) -> CuResult {
    let rc = call();
    if rc != CUDA_SUCCESS {
        return rc;
    }
    unlabelled(|rec| {
        // SAFETY: the call succeeded and wrote *exec (if exec is not null).
        if let Some(exec) = unsafe { read(exec as *const u64) } {
            rec.graph_instantiated(exec, || graph_memory(graph));
        }
    });
    rc
}

/// `cuGraphLaunch(_ptsz)`: the memory of the executable's allocation nodes becomes live.
///
/// # Safety
/// None beyond the hook's: `exec` is a value, never dereferenced.
pub unsafe fn launch(call: impl FnOnce() -> CuResult, api: Api, exec: GraphExec) -> CuResult {
    recording(api, call, |rec, call| {
        let rc = call();
        if rc == CUDA_SUCCESS {
            rec.graph_launched(exec as u64, current_device);
        }
        rc
    })
}

/// `cuGraphExecDestroy`: forgets what the executable's launches do. Takes no guard, as before
/// the hooks had one way in: it only drops an entry, captures no stack, calls no CUDA.
///
/// # Safety
/// None beyond the hook's: `exec` is a value, never dereferenced.
pub unsafe fn exec_destroy(call: impl FnOnce() -> CuResult, exec: GraphExec) -> CuResult {
    let rc = call();
    if rc == CUDA_SUCCESS {
        keeping_errno(|| record::graph_exec_destroyed(exec as u64));
    }
    rc
}
