//! Messages to the user on standard error, `cudaleak: …` one per line.
//!
//! Owns every write to stderr. A write that fails (stderr closed, or a pipe whose reader has
//! gone) is dropped: a message must never panic, never change an exit status, and never keep
//! `run` from running the program.

use std::fmt;
use std::io::{self, Write};

/// Writes `cudaleak: <args>` and a newline to stderr, ignoring any failure.
pub fn say(args: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "cudaleak: {args}");
}

/// `say!("…", args)`: [`say`] with `format!` syntax, in place of `eprintln!` (which panics when
/// stderr is a broken pipe).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::message::say(format_args!($($arg)*))
    };
}
