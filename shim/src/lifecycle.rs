//! Process lifecycle: the constructor that sets the shim up before `main`, and the exit
//! handler that writes the dump.
//!
//! The constructor reads the environment and registers the exit handler; it calls nothing
//! that is hooked. The exit handler is registered first, so it runs after every handler the
//! program and the CUDA runtime register later (static destructors' frees are seen).

use std::io::Write;

use crate::config::Config;
use crate::{dump, real, stack, state};

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn constructor() {
    let _ = std::panic::catch_unwind(|| {
        let config = Config::from_env();
        for w in &config.warnings {
            let _ = writeln!(std::io::stderr(), "cudaleak: {w}");
        }
        if real::dlsym_fn().is_none() {
            let _ = writeln!(
                std::io::stderr(),
                "cudaleak: cannot find the C library's dlsym; passing everything through, recording nothing"
            );
            return;
        }
        stack::init_own_range();
        let disabled = config.disabled;
        state::init(config);
        if !disabled {
            // SAFETY: at_exit is an extern "C" fn with no arguments that never unwinds.
            unsafe { libc::atexit(at_exit) };
        }
    });
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(s) = state::get() {
            dump::at_exit(s);
        }
    });
}
