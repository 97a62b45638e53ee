//! The shim's names as the other side calls them: the library's file names and the functions it
//! exports for the CLI (`cudaleak attach` injects and calls them), the Python package (through
//! ctypes) and programs that know about cudaleak. The shim's functions are Rust functions named
//! so (`#[no_mangle]`); a test of the shim holds this list to them. Nothing here loads anything.

/// The shim library as it is built and installed.
pub const SHIM_NAME: &str = "libcudaleak.so";

/// The file name the shim is loaded under to be attached (a link to [`SHIM_NAME`]): its
/// constructor then waits for [`ATTACH`] instead of starting from the environment.
pub const ATTACH_NAME: &str = "libcudaleak-attach.so";

/// Declares each exported function's constant and [`ALL`], the list `cudaleak env --names`
/// prints.
macro_rules! exports {
    ($( $(#[doc = $doc:literal])* $konst:ident = $name:literal; )*) => {
        $( $(#[doc = $doc])* pub const $konst: &str = $name; )*
        /// Every exported function, in the order above.
        pub const ALL: &[&str] = &[$($konst),*];
    };
}

exports! {
    /// `int cudaleak_set_recording(int on)`: pause or resume recording.
    SET_RECORDING = "cudaleak_set_recording";
    /// `uint64_t cudaleak_mark(void)`: the sequence number of the last recorded call.
    MARK = "cudaleak_mark";
    /// `int cudaleak_live_since(uint64_t mark, uint64_t out[2])`: blocks and bytes made since.
    LIVE_SINCE = "cudaleak_live_since";
    /// `void cudaleak_restart_peak(void)`: start a new peak window.
    RESTART_PEAK = "cudaleak_restart_peak";
    /// `uint64_t cudaleak_peak_bytes(void)`: the most live bytes since the window began.
    PEAK_BYTES = "cudaleak_peak_bytes";
    /// `int cudaleak_dump(const char *path)`: write a dump now.
    DUMP = "cudaleak_dump";
    /// `int cudaleak_dump_records(const char *path, const char *records)`: a dump with a
    /// framework's own record.
    DUMP_RECORDS = "cudaleak_dump_records";
    /// `int cudaleak_snapshot(void)`: the next snapshot of the series now.
    SNAPSHOT = "cudaleak_snapshot";
    /// `int cudaleak_framework_counters(const char *framework, const char *backend, int device,
    /// const uint64_t *values, int n)`: what a framework says it holds.
    FRAMEWORK_COUNTERS = "cudaleak_framework_counters";
    /// `int cudaleak_framework_end(const char *records)`: the bootstrap's last word.
    FRAMEWORK_END = "cudaleak_framework_end";
    /// `int cudaleak_code_event(int event, void *code)`: the code watcher the bootstrap adds
    /// (`PyCode_AddWatcher`, CPython 3.12+).
    CODE_EVENT = "cudaleak_code_event";
    /// `int cudaleak_code_watched(void *interp)`: the interpreter whose code objects it watches.
    CODE_WATCHED = "cudaleak_code_watched";
    /// `int cudaleak_attach(const char *config)`: start recording a running process.
    ATTACH = "cudaleak_attach";
    /// `int cudaleak_attach_refresh(void)`: hook the modules loaded since attach.
    ATTACH_REFRESH = "cudaleak_attach_refresh";
    /// `int cudaleak_detach(void)`: the last dump, the pointers put back.
    DETACH = "cudaleak_detach";
}

/// The function's key in `cudaleak env --names`: `attach_refresh` for `cudaleak_attach_refresh`.
pub fn key(name: &str) -> &str {
    name.strip_prefix("cudaleak_").unwrap_or(name)
}
