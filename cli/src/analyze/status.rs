//! How a program `cudaleak run` ran ended, in the words a report uses: its exit status, or the
//! signal that killed it (standard Linux signal names).

/// How a program that `cudaleak run` ran ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramStatus {
    Code(u8),
    Signal(i32),
}

impl ProgramStatus {
    /// The status a shell reports: the code, or 128 + the signal number.
    pub fn shell(self) -> u8 {
        match self {
            ProgramStatus::Code(c) => c,
            ProgramStatus::Signal(n) => (128 + n).clamp(0, 255) as u8,
        }
    }

    /// `exited with status 3`, `was killed by SIGTERM`.
    pub fn how(self) -> String {
        match self {
            ProgramStatus::Code(c) => format!("exited with status {c}"),
            ProgramStatus::Signal(n) => match signal_name(n) {
                Some(name) => format!("was killed by {name}"),
                None => format!("was killed by signal {n}"),
            },
        }
    }
}

/// The name of a standard Linux signal.
pub fn signal_name(n: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(n - 1)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
}
