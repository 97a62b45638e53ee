//! The shim's one function of its own, for programs that know about it (benchmarks, test
//! harnesses): pause and resume recording. Looked up with `dlsym(RTLD_DEFAULT,
//! "cudaleak_set_recording")`, so a program still runs without the shim.

use std::ffi::c_int;

use crate::state;

/// `on == 0` pauses recording, anything else resumes it. Returns 1 if the shim was recording
/// before the call, else 0. While paused, allocations and frees are passed through unseen: a
/// block allocated before a pause and freed during it stays listed as live.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_set_recording(on: c_int) -> c_int {
    c_int::from(state::set_paused(on == 0))
}
