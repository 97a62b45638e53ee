//! What runs when the library is loaded: the constructor. The top of the shim beside the hooks
//! and `attach`: it decides whether this copy records and starts everything below it.
//!
//! It reads the environment and registers the exit handler first (`lifecycle::install_handlers`),
//! so that handler runs after every handler the program and the CUDA runtime register later. It
//! calls nothing that is hooked and installs no signal handler (`lifecycle` says why).
//!
//! Must never panic into the loader, nor start anything in a copy loaded by `cudaleak attach`
//! (which starts from `cudaleak_attach`) or in a copy another one records for.

use crate::config::Config;
use crate::{attach, lifecycle, process, real, stack, state, stdio};

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn constructor() {
    let _ = std::panic::catch_unwind(|| {
        stdio::init();
        if real::dlsym_fn().is_none() {
            stdio::say("cudaleak: cannot find the C library's dlsym; passing everything through, recording nothing\n");
            return;
        }
        // Loaded into a running process by `cudaleak attach`: `cudaleak_attach` starts it,
        // with the configuration the CLI passes (the program's environment is not ours).
        if attach::injected() {
            return;
        }
        // Another copy of the shim records this process: this one stays out of the way. Its
        // warnings, like the configuration's, wait for the first recorded call (`process`).
        if !process::decide() {
            return;
        }
        let config = Config::from_env();
        process::init(lifecycle::adoption());
        stack::init_own_range();
        // The keys that drop a thread's walk cache and read plan at its end, made before the
        // program has threads that could fork meanwhile (`thread::ExitKey`).
        let _ = stack::CACHE_END.make();
        crate::python::make_plan_key();
        let disabled = config.disabled;
        state::init(config);
        if disabled {
            return;
        }
        lifecycle::install_handlers();
    });
}
