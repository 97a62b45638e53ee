//! The shim's functions of its own: pause and resume recording, for programs that know about it
//! (benchmarks, test harnesses), looked up with `dlsym(RTLD_DEFAULT, "cudaleak_set_recording")`
//! so a program still runs without the shim; and the mark by which copies of the shim loaded
//! into one process find each other (`process`).

use std::ffi::{c_char, c_int};

use crate::state;

/// `on == 0` pauses recording, anything else resumes it. Returns 1 if the shim was recording
/// before the call, else 0. While paused, allocations and frees are passed through unseen: a
/// block allocated before a pause and freed during it stays listed as live.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_set_recording(on: c_int) -> c_int {
    c_int::from(state::set_paused(on == 0))
}

/// The mark of a copy of the shim, version 1 of the agreement between copies: of all the loaded
/// objects that define this name (or, older than it, `cudaleak_set_recording`), the first in
/// load order records and the others pass every call through (`process`). A later version that
/// changes the agreement exports `cudaleak_shim_v2` as well, and keeps this one. Returns this
/// copy's version, NUL-terminated.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_shim_v1() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
