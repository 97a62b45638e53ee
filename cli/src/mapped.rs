//! A module's file mapped into memory for reading its symbol table (`symbols::symbols_at`).
//! Read through `object::ReadCache` instead, every symbol's name is a seek and a read of its
//! own: 250 000 system calls and 280 ms to name 30 addresses in PyTorch's libraries.
// The one `unsafe` here is the mapping itself.
#![allow(unsafe_code)]

use std::fs::File;

/// `file` mapped read-only (private), or None where it cannot be.
pub fn map(file: &File) -> Option<memmap2::Mmap> {
    // SAFETY: a read-only private mapping of a regular file (`input::open_regular` opened it),
    // as addr2line maps the modules that have debug information. Another program truncating
    // the file while it is read could fault the reader, as it could for addr2line.
    unsafe { memmap2::Mmap::map(file) }.ok()
}
