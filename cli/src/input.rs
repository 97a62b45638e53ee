//! Opening a file the user or a dump names (a dump, a suppression file, a module to name frames
//! from) without ever blocking, and saying in words what a file that is not a regular file is.
//!
//! A leaf: `load` (dumps), `symbols` (modules' files) and `suppressions` open through it, so none
//! of them imports another for it. It must never read or interpret what it opens.

use std::fs::{File, FileType, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file could not be opened as an input.
#[derive(Debug)]
pub enum OpenError {
    Io(io::Error),
    /// Not a regular file: what it is instead ([`what_it_is`]).
    NotAFile(&'static str),
}

/// Opens an input for reading without ever blocking: `O_NONBLOCK` (a FIFO with no writer would
/// otherwise block the open), then `fstat` on what was opened, which must be a regular file.
/// On a regular file `O_NONBLOCK` changes nothing.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), OpenError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(OpenError::Io)?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::NotAFile(what_it_is(meta.file_type())));
    }
    Ok((file, meta))
}

/// What a file that is not a regular file is, in words.
pub fn what_it_is(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}
