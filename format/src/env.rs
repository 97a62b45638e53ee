//! The `CUDALEAK_*` environment variables, by name: what the shim reads at start-up, what the
//! CLI sets for a program or reads itself, and what the Python package reads (each one's meaning
//! is in README.md, "Environment variables"). The shim, the CLI and, through `cudaleak env
//! --names`, the Python package take the names from here. Nothing here reads the environment.

/// Declares each variable's constant and [`ALL`], the list `cudaleak env --names` prints.
macro_rules! variables {
    ($( $(#[doc = $doc:literal])* $konst:ident = $name:literal; )*) => {
        $( $(#[doc = $doc])* pub const $konst: &str = $name; )*
        /// Every variable, in the order above.
        pub const ALL: &[&str] = &[$($konst),*];
    };
}

variables! {
    /// Where the shim writes its dumps: a path template (`%p` is the pid), or a directory.
    OUTPUT = "CUDALEAK_OUTPUT";
    /// Native frames recorded per stack.
    DEPTH = "CUDALEAK_DEPTH";
    /// Python frames recorded per stack (`0`: none).
    PY_DEPTH = "CUDALEAK_PY_DEPTH";
    /// `1`: no line from the shim on stderr at exit.
    QUIET = "CUDALEAK_QUIET";
    /// `1`: the shim forwards every call, records nothing and writes no dump.
    DISABLE = "CUDALEAK_DISABLE";
    /// Seconds between snapshot dumps, or `auto`.
    SNAPSHOT_INTERVAL = "CUDALEAK_SNAPSHOT_INTERVAL";
    /// `fast` (reuse a stack walk proven the same) or `precise`.
    UNWIND = "CUDALEAK_UNWIND";
    /// `0`: the shim leaves SIGUSR1 and the terminating signals alone.
    SIGNAL = "CUDALEAK_SIGNAL";
    /// The shim library `cudaleak run`, `env` and `attach` use (else the one beside the CLI).
    SHIM = "CUDALEAK_SHIM";
    /// The `cudaleak` command the Python package runs (else the installed one).
    CLI = "CUDALEAK_CLI";
    /// `0`: no Python bootstrap on the program's `PYTHONPATH`, no frameworks' counts read.
    FRAMEWORKS = "CUDALEAK_FRAMEWORKS";
    /// Milliseconds between the bootstrap's reads of the frameworks' own counts.
    FRAMEWORK_INTERVAL_MS = "CUDALEAK_FRAMEWORK_INTERVAL_MS";
    /// The window (milliseconds) whose least PyTorch count must keep rising before PyTorch's
    /// own allocation record is turned on.
    FRAMEWORK_WINDOW_MS = "CUDALEAK_FRAMEWORK_WINDOW_MS";
    /// Set (not `0`): the Python bootstrap says on stderr what went wrong.
    DEBUG = "CUDALEAK_DEBUG";
    /// Set by the pytest plugin in the pytest it starts again under the shim.
    PYTEST_REEXEC = "CUDALEAK_PYTEST_REEXEC";
}

/// The variable's key in `cudaleak env --names`: `output` for `CUDALEAK_OUTPUT`.
pub fn key(name: &str) -> String {
    name.strip_prefix("CUDALEAK_")
        .unwrap_or(name)
        .to_ascii_lowercase()
}
