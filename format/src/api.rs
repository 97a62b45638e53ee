//! The values of a record's `api`, and which runtime function leads to which driver call: what a
//! reader needs to name a driver record by the runtime function found in its stack
//! ([`called_as`]) once the stack has names. The shim's `Api` list is the source; its tests hold
//! this table to it. Nothing here reads or writes a dump.

/// Every function the shim records, by name, with what it does (the shim's `Op`, by name): a
/// runtime label and a driver call of the same operation are the same call.
pub const OPERATIONS: &[(&str, &str)] = &[
    ("cuMemAlloc_v2", "AllocDevice"),
    ("cuMemAllocPitch_v2", "AllocPitch"),
    ("cuMemFree_v2", "FreeDevice"),
    ("cuMemAllocManaged", "AllocManaged"),
    ("cuMemAllocHost_v2", "AllocHost"),
    ("cuMemHostAlloc", "AllocHost"),
    ("cuMemFreeHost", "FreeHost"),
    ("cuMemAllocAsync", "AllocAsync"),
    ("cuMemAllocAsync_ptsz", "AllocAsync"),
    ("cuMemFreeAsync", "FreeAsync"),
    ("cuMemFreeAsync_ptsz", "FreeAsync"),
    ("cuMemAllocFromPoolAsync", "AllocFromPool"),
    ("cuMemAllocFromPoolAsync_ptsz", "AllocFromPool"),
    ("cuMemCreate", "AllocPhysical"),
    ("cuMemRelease", "FreePhysical"),
    ("cuArrayCreate_v2", "AllocArray"),
    ("cuArray3DCreate_v2", "AllocArray"),
    ("cuArrayDestroy", "FreeArray"),
    ("cuGraphLaunch", "AllocGraph"),
    ("cuGraphLaunch_ptsz", "AllocGraph"),
    ("cuGraphAddMemAllocNode", "GraphNode"),
    ("cuMemHostRegister", "Register"),
    ("cuMemHostRegister_v2", "Register"),
    ("cuMemHostUnregister", "Unregister"),
    ("cuIpcOpenMemHandle", "IpcOpen"),
    ("cuIpcOpenMemHandle_v2", "IpcOpen"),
    ("cuIpcCloseMemHandle", "IpcClose"),
    ("cuMemPoolImportPointer", "ImportPointer"),
    ("cuMemAddressReserve", "Reserve"),
    ("cuMemAddressFree", "AddressFree"),
    ("cuMemMap", "Map"),
    ("cuMemUnmap", "Unmap"),
    ("cudaMalloc", "AllocDevice"),
    ("cudaMallocManaged", "AllocManaged"),
    ("cudaFree", "FreeDevice"),
    ("cudaMallocHost", "AllocHost"),
    ("cudaHostAlloc", "AllocHost"),
    ("cudaFreeHost", "FreeHost"),
    ("cudaMallocPitch", "AllocPitch"),
    ("cudaMalloc3D", "AllocPitch"),
    ("cudaMallocAsync", "AllocAsync"),
    ("cudaMallocAsync_ptsz", "AllocAsync"),
    ("cudaFreeAsync", "FreeAsync"),
    ("cudaFreeAsync_ptsz", "FreeAsync"),
    ("cudaMallocFromPoolAsync", "AllocFromPool"),
    ("cudaMallocFromPoolAsync_ptsz", "AllocFromPool"),
    ("cudaMallocArray", "AllocArray"),
    ("cudaFreeArray", "FreeArray"),
    ("cudaHostRegister", "Register"),
    ("cudaHostUnregister", "Unregister"),
    ("cudaIpcOpenMemHandle", "IpcOpen"),
    ("cudaIpcCloseMemHandle", "IpcClose"),
    ("cudaMemPoolImportPointer", "ImportPointer"),
];

fn operation(name: &str) -> Option<&'static str> {
    OPERATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, op)| op)
}

/// How many frames, innermost first, [`called_as`] looks at.
pub const LOOK: usize = 12;

/// The runtime function a driver record was reached through, named by the first frame of its
/// stack (innermost first) that is a runtime entry doing the same thing: a statically linked
/// runtime has no exported symbol to label the record as the shared one does, but a binary that
/// is not stripped still names `cudaMalloc` in the stack. Only driver records (`cu…`) are
/// relabelled, only by an exact function name, within the first [`LOOK`] frames; `None` keeps
/// the record's own name.
pub fn called_as<'a>(
    api: &str,
    functions: impl IntoIterator<Item = Option<&'a str>>,
) -> Option<&'static str> {
    if api.starts_with("cuda") {
        return None;
    }
    let op = operation(api)?;
    functions.into_iter().take(LOOK).flatten().find_map(|f| {
        OPERATIONS
            .iter()
            .find(|&&(n, o)| n == f && n.starts_with("cuda") && o == op)
            .map(|&(n, _)| n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_runtime_entry_in_the_stack_names_the_driver_record() {
        let frames = [
            None,
            Some("cudart::cudaApiMalloc"),
            Some("cudaMalloc"),
            Some("main"),
        ];
        assert_eq!(called_as("cuMemAlloc_v2", frames), Some("cudaMalloc"));
        let host = [Some("cudaHostAlloc"), Some("cudaMallocHost")];
        assert_eq!(called_as("cuMemHostAlloc", host), Some("cudaHostAlloc"));
        // A runtime name of another operation, or none, leaves the driver name.
        assert_eq!(
            called_as("cuMemAlloc_v2", [Some("cudaFree"), Some("main")]),
            None
        );
        assert_eq!(called_as("cuMemAlloc_v2", [None, None]), None);
        // Already a runtime label: kept.
        assert_eq!(called_as("cudaMalloc", [Some("cudaMallocManaged")]), None);
        // Only the first frames count: a cudaMalloc far up the stack is not this call.
        let far: Vec<Option<&str>> = std::iter::repeat_n(Some("f"), LOOK)
            .chain([Some("cudaMalloc")])
            .collect();
        assert_eq!(called_as("cuMemAlloc_v2", far), None);
        // A name this table does not know is kept.
        assert_eq!(called_as("cuSomethingNew", [Some("cudaMalloc")]), None);
    }
}
