//! `cudaleak env --names`: the names the shim, the CLI and the Python package share, as the
//! format crate holds them, in one JSON document for the package (which reads it once per
//! process instead of keeping its own copy). Only lays the format crate's lists out; decides
//! no name.

use cudaleak_format::{api, env, exports, frames};
use serde_json::{json, Map, Value};

/// The document: `variables` and `exports` by key (`output` → `CUDALEAK_OUTPUT`, `attach` →
/// `cudaleak_attach`), the shim's file names, the internal-frame rules, and every recorded API.
pub fn document() -> Value {
    let variables: Map<String, Value> = env::ALL
        .iter()
        .map(|&name| (env::key(name), name.into()))
        .collect();
    let functions: Map<String, Value> = exports::ALL
        .iter()
        .map(|&name| (exports::key(name).to_string(), name.into()))
        .collect();
    let runtime_entries: Vec<&str> = api::RECORDED
        .iter()
        .filter(|r| r.layer == api::Layer::Runtime)
        .map(|r| r.name)
        .collect();
    let apis: Vec<Value> = api::RECORDED
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "layer": r.layer.as_str(),
                "role": r.role.as_str(),
                "operation": r.operation,
                "kind": r.kind.as_str(),
            })
        })
        .collect();
    json!({
        "variables": variables,
        "exports": functions,
        "libraries": {
            "shim": exports::SHIM_NAME,
            "attach": exports::ATTACH_NAME,
        },
        "internal_frames": {
            "module_prefixes": frames::INTERNAL_MODULE_PREFIXES,
            "function_prefixes": frames::INTERNAL_FUNCTION_PREFIXES,
            "startup_functions": frames::STARTUP_FUNCTIONS,
            "driver_entry_prefixes": frames::DRIVER_ENTRY_PREFIXES,
            "runtime_entries": runtime_entries,
        },
        "apis": apis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_names_what_the_package_reads() {
        let d = document();
        assert_eq!(d["variables"]["output"], "CUDALEAK_OUTPUT");
        assert_eq!(d["variables"]["pytest_reexec"], "CUDALEAK_PYTEST_REEXEC");
        assert_eq!(d["exports"]["attach_refresh"], "cudaleak_attach_refresh");
        assert_eq!(d["exports"]["dump_records"], "cudaleak_dump_records");
        assert_eq!(d["libraries"]["attach"], "libcudaleak-attach.so");
        let entries = d["internal_frames"]["runtime_entries"].as_array().unwrap();
        assert!(entries.iter().any(|e| e == "cudaHostRegister"));
        assert_eq!(d["apis"][0]["name"], "cuMemAlloc_v2");
        assert_eq!(d["apis"][0]["role"], "allocates");
    }
}
