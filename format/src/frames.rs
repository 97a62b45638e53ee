//! Which frames of a stack are the tools' and the libraries' own rather than the program's: the
//! rules the CLI hides frames by (and prints in `cudaleak env --names`), as data and the
//! functions that apply them. The shim leaves its own frames out in-process by its code range;
//! these are the names by which a reader tells the rest apart once a stack has names. Nothing
//! here reads a dump or allocates.

use crate::api;

/// File-name prefixes of the modules of the CUDA runtime and driver, the NVIDIA helpers they
/// load, and the shim.
pub const INTERNAL_MODULE_PREFIXES: &[&str] = &[
    "libcudart",
    "libcuda.",
    "libcudaleak",
    "libnvidia-",
    "libcudadebugger",
];

/// Function-name prefixes of a statically linked cudart and of the shim's own Rust code.
pub const INTERNAL_FUNCTION_PREFIXES: &[&str] = &[
    "cudart::",
    "__cudart",
    "libcudart_static",
    "cudaleak::",
    "cudaleak_shim::",
];

/// C start-up and thread entry code below `main` or a thread's start routine.
pub const STARTUP_FUNCTIONS: &[&str] = &[
    "_start",
    "__libc_start_main",
    "__libc_start_main_impl",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
];

/// Function-name prefixes of the driver's memory functions: at the innermost end of a stack,
/// an entry into the driver, whichever of them the record is named by.
pub const DRIVER_ENTRY_PREFIXES: &[&str] = &["cuMem", "cuArray"];

/// Whether `module` (a path or a file name) is the CUDA runtime, the driver, an NVIDIA helper
/// they load, or the shim.
pub fn is_internal_module(module: &str) -> bool {
    let name = module.rsplit('/').next().unwrap_or(module);
    INTERNAL_MODULE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether `function` is code of a statically linked cudart or of the shim.
pub fn is_internal_function(function: &str) -> bool {
    INTERNAL_FUNCTION_PREFIXES
        .iter()
        .any(|p| function.starts_with(p))
}

/// Whether `function` is C start-up or thread entry code.
pub fn is_startup_function(function: &str) -> bool {
    STARTUP_FUNCTIONS.contains(&function)
}

/// The function name without template arguments or parameters: `cudaMalloc<float>(float**, …)`
/// → `cudaMalloc`.
pub fn base_name(function: &str) -> &str {
    let end = function.find(['(', '<']).unwrap_or(function.len());
    function[..end].trim()
}

/// Whether `function` is the entry of the CUDA call that made a record named `api`: the
/// record's own function (with or without `_v2`/`_ptsz`), a driver memory function
/// ([`DRIVER_ENTRY_PREFIXES`]), or a runtime entry the shim records ([`api::RECORDED`]). The
/// header already names the API; with a static cudart, or for the `cudaMalloc<T>` template of
/// cuda_runtime.h, the entry is a frame in the program's own executable.
pub fn is_api_entry(function: &str, api: &str) -> bool {
    let b = base_name(function);
    if b.is_empty() {
        return false;
    }
    let strip = |s: &'static str| b.strip_suffix(s);
    let core = strip("_v2").or_else(|| strip("_ptsz")).unwrap_or(b);
    b == api
        || core == api
        || api.strip_suffix("_v2") == Some(core)
        || DRIVER_ENTRY_PREFIXES.iter().any(|p| b.starts_with(p))
        || api::is_runtime_entry(core)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_entries_are_the_recorded_runtime_functions_and_the_driver_s_memory_functions() {
        for f in [
            "cudaMalloc",
            "cudaMalloc<float>(float**, unsigned long)",
            "cudaFree",
            "cudaMallocAsync_ptsz",
            "cudaHostRegister",
            "cudaIpcOpenMemHandle",
            "cudaMemPoolImportPointer",
            "cuMemAlloc_v2",
            "cuArrayCreate_v2",
        ] {
            assert!(is_api_entry(f, "cuMemAlloc_v2"), "{f}");
        }
        // Not hooked, so no record is named by them: a frame of the program like any other.
        for f in [
            "cudaMalloc3DArray",
            "cudaMallocMipmappedArray",
            "cudaFreeMipmappedArray",
            "cudaMallocChecked(void**, unsigned long)",
            "main",
            "",
        ] {
            assert!(!is_api_entry(f, "cuMemAlloc_v2"), "{f}");
        }
        // The record's own function, whatever it is.
        assert!(is_api_entry("cuGraphLaunch_ptsz", "cuGraphLaunch"));
        assert!(is_api_entry("cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"));
    }

    #[test]
    fn internal_modules_and_functions() {
        assert!(is_internal_module("/usr/lib/libcudart.so.12"));
        assert!(is_internal_module("libcuda.so.1"));
        assert!(is_internal_module("/opt/lib/libcudaleak-attach.so"));
        assert!(!is_internal_module("/usr/lib/libcudnn.so.9"));
        assert!(!is_internal_module("/bin/app"));
        assert!(is_internal_function("cudart::cudaApiMalloc"));
        assert!(!is_internal_function("cudaMalloc"));
        assert!(is_startup_function("__libc_start_call_main"));
        assert!(!is_startup_function("main"));
    }
}
