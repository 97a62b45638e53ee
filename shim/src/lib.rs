//! libcudaleak: loaded with LD_PRELOAD into unmodified CUDA programs, it sees every device,
//! managed, host, async, array and physical allocation and free at the driver level, records
//! each live block with the stack that allocated it, and writes a JSON dump at exit.
//!
//! Capture (this crate) → persist (`cudaleak-format`) → analyse (the `cudaleak` CLI).
//! A thread running CPython also gets its Python frames (`python/`, which reads the interpreter's
//! structures by per-version layouts and never takes its locks or changes its objects).
//! Nothing here may panic across FFI, change a return code or errno, or call CUDA on its own.

// In unit tests nothing is exported (see hooks/) and the constructor is not registered, so the
// code only the dynamic linker reaches looks dead.
#![cfg_attr(test, allow(dead_code))]
// Every unsafe block says why it is sound, in a `// SAFETY:` comment above it: the shim runs
// inside other people's programs, where an unsound block is their crash.
#![warn(clippy::undocumented_unsafe_blocks)]

// Each module uses only the layers below it (docs/architecture.md draws them; `make test` runs
// scripts/module-cycles.py, which fails on a cycle among these modules).
mod alloc;
mod api;
mod attach;
mod clock;
mod config;
mod constructor;
mod critical;
mod dump;
#[cfg(test)]
mod exports_test;
mod frameworks;
mod graphs;
mod guard;
mod handles;
mod hash;
mod hint;
mod hook_list;
mod hooks;
mod lifecycle;
mod limits;
mod lock;
mod modules;
mod objects;
mod probe;
mod process;
mod python;
mod real;
mod record;
mod reply;
mod stack;
mod state;
mod stdio;
mod table;
mod thread;
