//! The one table of the CUDA functions the shim records ([`RECORDED`]): each one's name (the
//! value a record's `api` takes), whether the program calls it in the runtime or the driver, what
//! it does (allocates, frees, plans) and the shim's operation and memory kind for it. The shim's
//! hook list (`shim/src/hook_list.rs`) makes its `Api` names in the same order, and a test of the
//! shim fails when the two disagree; the CLI knows the runtime entries of a stack from here
//! ([`is_runtime_entry`]), and names a driver record by the runtime function found in its stack
//! ([`called_as`]) once the stack has names. Nothing here reads or writes a dump.

use crate::Kind;

/// Where a recorded function lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The driver (`cu…`): what the shim hooks, and what a record is named by when no runtime
    /// function above it labels it.
    Driver,
    /// An entry of the runtime the program calls (`cuda…`): its forward labels the driver call
    /// it reaches; with a static runtime it is a frame of the program's own executable.
    Runtime,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Driver => "driver",
            Layer::Runtime => "runtime",
        }
    }
}

/// What a recorded call does to the live blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Makes a block live (memory, a registration, an opened handle, a range or a mapping).
    Allocates,
    /// Ends a block made by an `Allocates` call of the same kind.
    Frees,
    /// Says where memory will be made, without making it (a graph's allocation node).
    Plans,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Allocates => "allocates",
            Role::Frees => "frees",
            Role::Plans => "plans",
        }
    }
}

/// One recorded function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// The name the program calls and a record carries as its `api`.
    pub name: &'static str,
    pub layer: Layer,
    pub role: Role,
    /// The shim's `Op`, by name: a runtime label and a driver call of the same operation are
    /// the same call.
    pub operation: &'static str,
    /// The kind of memory its blocks are.
    pub kind: Kind,
}

const fn driver(name: &'static str, role: Role, operation: &'static str, kind: Kind) -> Recorded {
    Recorded {
        name,
        layer: Layer::Driver,
        role,
        operation,
        kind,
    }
}

const fn runtime(name: &'static str, role: Role, operation: &'static str, kind: Kind) -> Recorded {
    Recorded {
        name,
        layer: Layer::Runtime,
        role,
        operation,
        kind,
    }
}

use Kind::{
    Array, Async, Device, Graph, Host, Ipc, Managed, Mapped, Physical, Registered, Reserved,
};
use Role::{Allocates, Frees, Plans};

/// Every function the shim records, in the order of the shim's `Api` (the driver functions,
/// then the runtime forwards, as `shim/src/hook_list.rs` lists them).
pub const RECORDED: &[Recorded] = &[
    driver("cuMemAlloc_v2", Allocates, "AllocDevice", Device),
    driver("cuMemAllocPitch_v2", Allocates, "AllocPitch", Device),
    driver("cuMemFree_v2", Frees, "FreeDevice", Device),
    driver("cuMemAllocManaged", Allocates, "AllocManaged", Managed),
    driver("cuMemAllocHost_v2", Allocates, "AllocHost", Host),
    driver("cuMemHostAlloc", Allocates, "AllocHost", Host),
    driver("cuMemFreeHost", Frees, "FreeHost", Host),
    driver("cuMemAllocAsync", Allocates, "AllocAsync", Async),
    driver("cuMemAllocAsync_ptsz", Allocates, "AllocAsync", Async),
    driver("cuMemFreeAsync", Frees, "FreeAsync", Async),
    driver("cuMemFreeAsync_ptsz", Frees, "FreeAsync", Async),
    driver("cuMemAllocFromPoolAsync", Allocates, "AllocFromPool", Async),
    driver(
        "cuMemAllocFromPoolAsync_ptsz",
        Allocates,
        "AllocFromPool",
        Async,
    ),
    driver("cuMemCreate", Allocates, "AllocPhysical", Physical),
    driver("cuMemRelease", Frees, "FreePhysical", Physical),
    driver("cuArrayCreate_v2", Allocates, "AllocArray", Array),
    driver("cuArray3DCreate_v2", Allocates, "AllocArray", Array),
    driver("cuArrayDestroy", Frees, "FreeArray", Array),
    driver("cuGraphLaunch", Allocates, "AllocGraph", Graph),
    driver("cuGraphLaunch_ptsz", Allocates, "AllocGraph", Graph),
    driver("cuGraphAddMemAllocNode", Plans, "GraphNode", Graph),
    driver("cuMemHostRegister", Allocates, "Register", Registered),
    driver("cuMemHostRegister_v2", Allocates, "Register", Registered),
    driver("cuMemHostUnregister", Frees, "Unregister", Registered),
    driver("cuIpcOpenMemHandle", Allocates, "IpcOpen", Ipc),
    driver("cuIpcOpenMemHandle_v2", Allocates, "IpcOpen", Ipc),
    driver("cuIpcCloseMemHandle", Frees, "IpcClose", Ipc),
    driver("cuMemPoolImportPointer", Allocates, "ImportPointer", Ipc),
    driver("cuMemAddressReserve", Allocates, "Reserve", Reserved),
    driver("cuMemAddressFree", Frees, "AddressFree", Reserved),
    driver("cuMemMap", Allocates, "Map", Mapped),
    driver("cuMemUnmap", Frees, "Unmap", Mapped),
    runtime("cudaMalloc", Allocates, "AllocDevice", Device),
    runtime("cudaMallocManaged", Allocates, "AllocManaged", Managed),
    runtime("cudaFree", Frees, "FreeDevice", Device),
    runtime("cudaMallocHost", Allocates, "AllocHost", Host),
    runtime("cudaHostAlloc", Allocates, "AllocHost", Host),
    runtime("cudaFreeHost", Frees, "FreeHost", Host),
    runtime("cudaMallocPitch", Allocates, "AllocPitch", Device),
    runtime("cudaMalloc3D", Allocates, "AllocPitch", Device),
    runtime("cudaMallocAsync", Allocates, "AllocAsync", Async),
    runtime("cudaMallocAsync_ptsz", Allocates, "AllocAsync", Async),
    runtime("cudaFreeAsync", Frees, "FreeAsync", Async),
    runtime("cudaFreeAsync_ptsz", Frees, "FreeAsync", Async),
    runtime("cudaMallocFromPoolAsync", Allocates, "AllocFromPool", Async),
    runtime(
        "cudaMallocFromPoolAsync_ptsz",
        Allocates,
        "AllocFromPool",
        Async,
    ),
    runtime("cudaMallocArray", Allocates, "AllocArray", Array),
    runtime("cudaFreeArray", Frees, "FreeArray", Array),
    runtime("cudaHostRegister", Allocates, "Register", Registered),
    runtime("cudaHostUnregister", Frees, "Unregister", Registered),
    runtime("cudaIpcOpenMemHandle", Allocates, "IpcOpen", Ipc),
    runtime("cudaIpcCloseMemHandle", Frees, "IpcClose", Ipc),
    runtime("cudaMemPoolImportPointer", Allocates, "ImportPointer", Ipc),
];

/// The row of `name`, if the shim records it.
pub fn recorded(name: &str) -> Option<&'static Recorded> {
    RECORDED.iter().find(|r| r.name == name)
}

/// Whether `name` (a function's base name, without template arguments or parameters) is a
/// runtime entry the shim records: `cudaMalloc`, `cudaHostRegister`, `cudaMallocAsync_ptsz`.
pub fn is_runtime_entry(name: &str) -> bool {
    recorded(name).is_some_and(|r| r.layer == Layer::Runtime)
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
    let op = recorded(api)
        .filter(|r| r.layer == Layer::Driver)?
        .operation;
    functions.into_iter().take(LOOK).flatten().find_map(|f| {
        recorded(f)
            .filter(|r| r.layer == Layer::Runtime && r.operation == op)
            .map(|r| r.name)
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

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn each_name_is_listed_once_and_each_runtime_entry_reaches_a_driver_call() {
        for (i, r) in RECORDED.iter().enumerate() {
            assert!(
                RECORDED[..i].iter().all(|o| o.name != r.name),
                "{} twice",
                r.name
            );
            let prefix = match r.layer {
                Layer::Driver => "cu",
                Layer::Runtime => "cuda",
            };
            assert!(r.name.starts_with(prefix), "{}", r.name);
            if r.layer == Layer::Runtime {
                let reached = RECORDED
                    .iter()
                    .find(|d| d.layer == Layer::Driver && d.operation == r.operation);
                let d = reached.unwrap_or_else(|| panic!("{} reaches no driver call", r.name));
                assert_eq!((d.role, d.kind), (r.role, r.kind), "{}", r.name);
            }
        }
        // The driver functions come first, as the shim's `Api` has them.
        let first_runtime = RECORDED.iter().position(|r| r.layer == Layer::Runtime);
        assert!(RECORDED[first_runtime.unwrap()..]
            .iter()
            .all(|r| r.layer == Layer::Runtime));
    }

    #[test]
    fn runtime_entries_are_the_recorded_cuda_functions() {
        for name in [
            "cudaMalloc",
            "cudaHostRegister",
            "cudaIpcOpenMemHandle",
            "cudaMallocAsync_ptsz",
        ] {
            assert!(is_runtime_entry(name), "{name}");
        }
        for name in [
            "cuMemAlloc_v2",
            "cudaMalloc3DArray",
            "cudaFreeMipmappedArray",
            "main",
            "",
        ] {
            assert!(!is_runtime_entry(name), "{name}");
        }
    }
}
