//! The names of every CUDA function the shim records under (generated from the rows of
//! `hook_list.rs`; the name a record carries is the row of the format crate's table,
//! `cudaleak_format::api::RECORDED`, which a test holds to the list) and what each one does to
//! the table.
#![forbid(unsafe_code)]

use cudaleak_format::api::{Recorded, RECORDED};
use cudaleak_format::Kind;

/// What a call does, so a runtime label can be matched to the driver call it leads to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    AllocDevice,
    AllocPitch,
    AllocManaged,
    AllocHost,
    AllocAsync,
    AllocFromPool,
    AllocArray,
    AllocPhysical,
    FreeDevice,
    FreeAsync,
    FreeHost,
    FreeArray,
    FreePhysical,
    /// A graph launch: the memory of its allocation nodes becomes live.
    AllocGraph,
    /// A graph's allocation node is made (explicitly, or by an allocation in stream capture):
    /// where its memory is asked for, not yet an allocation.
    GraphNode,
    // Issue 12: memory the program borrows or maps rather than allocates.
    Register,
    Unregister,
    IpcOpen,
    IpcClose,
    /// `cuMemPoolImportPointer`: another process's pool memory, freed like device memory.
    ImportPointer,
    Reserve,
    AddressFree,
    Map,
    Unmap,
}

/// Address spaces that frees look up: a device pointer and a host pointer or an opaque
/// handle may have the same numeric value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Space {
    Device,
    Host,
    Array,
    Physical,
    Registered,
    Ipc,
    Reserved,
    Mapped,
}

impl Op {
    pub fn space(self) -> Space {
        match self {
            Op::AllocDevice
            | Op::AllocPitch
            | Op::AllocManaged
            | Op::AllocAsync
            | Op::AllocFromPool
            | Op::FreeDevice
            | Op::FreeAsync
            | Op::AllocGraph
            | Op::GraphNode => Space::Device,
            Op::AllocHost | Op::FreeHost => Space::Host,
            Op::AllocArray | Op::FreeArray => Space::Array,
            Op::AllocPhysical | Op::FreePhysical => Space::Physical,
            Op::Register | Op::Unregister => Space::Registered,
            Op::IpcOpen | Op::IpcClose => Space::Ipc,
            Op::ImportPointer => Space::Device,
            Op::Reserve | Op::AddressFree => Space::Reserved,
            Op::Map | Op::Unmap => Space::Mapped,
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Op::AllocDevice | Op::AllocPitch | Op::FreeDevice => Kind::Device,
            Op::AllocManaged => Kind::Managed,
            Op::AllocHost | Op::FreeHost => Kind::Host,
            Op::AllocAsync | Op::AllocFromPool | Op::FreeAsync => Kind::Async,
            Op::AllocArray | Op::FreeArray => Kind::Array,
            Op::AllocPhysical | Op::FreePhysical => Kind::Physical,
            Op::AllocGraph | Op::GraphNode => Kind::Graph,
            Op::Register | Op::Unregister => Kind::Registered,
            Op::IpcOpen | Op::IpcClose | Op::ImportPointer => Kind::Ipc,
            Op::Reserve | Op::AddressFree => Kind::Reserved,
            Op::Map | Op::Unmap => Kind::Mapped,
        }
    }
}

/// Generates [`Api`] from the rows of `hook_list.rs`: the recorded driver functions, then the
/// runtime forwards, in the order of the list (the format crate's table of operations follows it).
macro_rules! apis {
    (
        driver { $(
            $name:ident $place:tt $op:ident fn $params:tt => $module:ident::$body:ident $args:tt;
        )* }
        unlabelled { $($unlabelled:tt)* }
        runtime { $(
            $rname:ident $rop:ident fn $rparams:tt => $returned:ident $rargs:tt;
        )* }
        libraries { $($libraries:tt)* }
    ) => {
        /// Every wrapped function, by the name programs call it.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(u8)]
        pub enum Api { $($name,)* $($rname,)* }

        impl Api {
            /// Every name, in the order of their discriminants.
            pub const ALL: &'static [Api] = &[$(Api::$name,)* $(Api::$rname,)*];

            /// The name a record carries: this function's row of the format crate's table.
            pub fn name(self) -> &'static str {
                self.recorded().name
            }

            /// This function's row of the format crate's table ([`RECORDED`]), which lists
            /// the functions in the order of [`Api`].
            pub fn recorded(self) -> &'static Recorded {
                &RECORDED[self as usize]
            }

            /// The name the hook list gives it (its row's name, as the tests check).
            #[cfg(test)]
            fn hooked_name(self) -> &'static str {
                match self {
                    $(Api::$name => stringify!($name),)*
                    $(Api::$rname => stringify!($rname),)*
                }
            }

            /// Where the hook list puts it.
            #[cfg(test)]
            fn hooked_layer(self) -> cudaleak_format::api::Layer {
                match self {
                    $(Api::$name => cudaleak_format::api::Layer::Driver,)*
                    $(Api::$rname => cudaleak_format::api::Layer::Runtime,)*
                }
            }

            pub fn op(self) -> Op {
                match self {
                    $(Api::$name => Op::$op,)*
                    $(Api::$rname => Op::$rop,)*
                }
            }

            /// The name whose discriminant (`api as u8`) is `i` (the pending ring keeps names so).
            pub fn from_index(i: u8) -> Api {
                Api::ALL.get(usize::from(i)).copied().unwrap_or(Api::cuMemAlloc_v2)
            }
        }

        // A row of the hook list without its row in the format crate's table (or one more row
        // there) is a build error; a name that differs, or the order, fails the test below.
        const _: () = assert!(
            RECORDED.len() == Api::ALL.len(),
            "each row of hook_list.rs needs its row in cudaleak_format::api::RECORDED, in order"
        );
    };
}

crate::hook_list::hooked!(apis);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hooked_function_has_its_row_in_the_format_crates_table_and_every_row_is_hooked() {
        // The CLI knows the runtime entries of a stack and names a driver record by the runtime
        // entry in its stack through that table; a record carries its row's name.
        let hooked: Vec<&str> = Api::ALL.iter().map(|a| a.hooked_name()).collect();
        let table: Vec<&str> = RECORDED.iter().map(|r| r.name).collect();
        let unlisted: Vec<&&str> = hooked.iter().filter(|n| !table.contains(n)).collect();
        assert!(
            unlisted.is_empty(),
            "hooked, not in format's table: {unlisted:?}"
        );
        let unhooked: Vec<&&str> = table.iter().filter(|n| !hooked.contains(n)).collect();
        assert!(
            unhooked.is_empty(),
            "in format's table, hooked nowhere: {unhooked:?}"
        );
        assert_eq!(
            hooked, table,
            "format's table is not in the order of the hook list"
        );
        for api in Api::ALL {
            let row = api.recorded();
            assert_eq!(api.name(), api.hooked_name());
            assert_eq!(row.operation, format!("{:?}", api.op()), "{}", row.name);
            assert_eq!(row.kind, api.op().kind(), "{}", row.name);
            assert_eq!(row.layer, api.hooked_layer(), "{}", row.name);
        }
    }

    #[test]
    fn index_round_trips_for_every_api() {
        for (i, api) in Api::ALL.iter().enumerate() {
            assert_eq!(Api::from_index(i as u8), *api);
            assert_eq!(*api as u8 as usize, i);
        }
    }

    #[test]
    fn runtime_labels_match_the_driver_call_they_reach() {
        assert_eq!(Api::cudaMalloc.op(), Api::cuMemAlloc_v2.op());
        assert_eq!(Api::cudaMallocHost.op(), Api::cuMemHostAlloc.op());
        assert_eq!(Api::cudaMalloc3D.op(), Api::cuMemAllocPitch_v2.op());
        assert_eq!(Api::cudaMallocArray.op(), Api::cuArray3DCreate_v2.op());
        assert_ne!(Api::cudaMalloc.op(), Api::cuMemAllocManaged.op());
        assert_eq!(
            Api::cudaFreeAsync.op().space(),
            Api::cudaMalloc.op().space()
        );
    }

    #[test]
    fn borrowed_and_mapped_memory_has_its_own_spaces_and_kinds() {
        // A registered pointer is not a cuMemAllocHost block: cuMemFreeHost must not match it.
        assert_ne!(
            Api::cuMemHostRegister_v2.op().space(),
            Api::cuMemFreeHost.op().space()
        );
        assert_eq!(Api::cuMemHostRegister.op().kind(), Kind::Registered);
        assert_eq!(Api::cudaHostRegister.op(), Api::cuMemHostRegister_v2.op());
        assert_eq!(Api::cudaHostUnregister.op(), Api::cuMemHostUnregister.op());
        assert_ne!(Api::cuIpcOpenMemHandle_v2.op().space(), Space::Device);
        assert_eq!(
            Api::cudaIpcOpenMemHandle.op(),
            Api::cuIpcOpenMemHandle_v2.op()
        );
        assert_eq!(
            Api::cudaIpcCloseMemHandle.op(),
            Api::cuIpcCloseMemHandle.op()
        );
        // An imported pool pointer is freed with cuMemFree/cuMemFreeAsync, yet is IPC memory.
        assert_eq!(Api::cuMemPoolImportPointer.op().space(), Space::Device);
        assert_eq!(Api::cuMemPoolImportPointer.op().kind(), Kind::Ipc);
        assert_eq!(
            Api::cudaMemPoolImportPointer.op(),
            Api::cuMemPoolImportPointer.op()
        );
        assert_eq!(Api::cuMemAddressReserve.op().kind(), Kind::Reserved);
        assert_eq!(Api::cuMemMap.op().kind(), Kind::Mapped);
        assert_eq!(Api::cuMemUnmap.op().space(), Space::Mapped);
    }
}
