//! Names taken from a dump, as every room uses them: a path's file name, and how long a name
//! may be before it is cut. Imported by the analysis and the callsite alike, so neither needs
//! the other for them.

/// Longest program-supplied name kept (function, file, module, exe, each argv word): a longer
/// one is cut to this many bytes plus `…[N more bytes]` in every format, so a hostile 100 MB
/// name is not copied into every group, callsite and line of output.
pub const MAX_NAME_BYTES: usize = 64 << 10;

/// The file name of a path (`leak_error_path` for `/home/dev/leak_error_path`).
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `s`, or its first [`MAX_NAME_BYTES`] (on a character boundary) and a note of the rest.
pub fn cut(s: &str) -> String {
    if s.len() <= MAX_NAME_BYTES {
        return s.to_string();
    }
    let mut end = MAX_NAME_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes]", &s[..end], s.len() - end)
}
