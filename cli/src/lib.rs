//! The `cudaleak` command's logic as a library: argument definitions, loading, analysis and
//! the four report formats. `main.rs` only dispatches; the fuzz target (`fuzz/`) and the stable
//! smoke test (`tests/fuzz_smoke.rs`) call `fuzz_target::render_all` here.
//!
//! Nothing in this crate may panic on any input a user or a program can supply.
// `unsafe` only in attach/ptrace.rs, which calls ptrace for `cudaleak attach`, and mapped.rs,
// which maps a module's file to read its symbol table.
#![deny(unsafe_code)]

pub mod analyze;
pub mod args;
pub mod attach;
pub mod bootstrap;
pub mod caches;
pub mod callsite;
pub mod commands;
pub mod env_names;
pub mod frame;
pub mod fuzz_target;
pub mod growth;
pub mod hash;
pub mod input;
pub mod load;
mod mapped;
pub mod message;
pub mod names;
pub mod output;
pub mod report;
pub mod run;
pub mod suppressions;
pub mod symbols;

/// A dump from `tests/fixtures` (or a path under it), read as the CLI reads dumps, for unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> load::schema::Dump {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    load::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}
