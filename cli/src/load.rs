//! Finding and reading dumps: which files a PATH stands for, and errors that name the file and,
//! for bad JSON, the line and column in it.
//!
//! Parsing and validation belong to the `cudaleak-format` crate; this module never interprets a
//! dump's contents beyond its process id, and never panics on any input.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use cudaleak_format as format;

/// Dumps larger than this are refused rather than read into memory.
pub const MAX_DUMP_BYTES: u64 = 1 << 30;

/// Why an input could not be used; `Display` starts with the file name.
#[derive(Debug)]
pub struct LoadError {
    pub path: PathBuf,
    pub kind: LoadErrorKind,
}

#[derive(Debug)]
pub enum LoadErrorKind {
    Io(io::Error),
    TooLarge(u64),
    NoDumps,
    Read(format::ReadError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            LoadErrorKind::Io(e) => write!(f, "{p}: {}", io_message(e)),
            LoadErrorKind::TooLarge(n) => write!(
                f,
                "{p}: the file is {n} bytes; cudaleak reads dumps of at most {MAX_DUMP_BYTES} bytes"
            ),
            LoadErrorKind::NoDumps => write!(
                f,
                "{p}: no cudaleak dumps (cudaleak.<pid>.json) in this directory"
            ),
            LoadErrorKind::Read(format::ReadError::Io(e)) => write!(f, "{p}: {}", io_message(e)),
            // `ReadError` shows syntax errors as "line:column: message", which gives
            // file:line:col; serde's `name` quoting reads better as "name".
            LoadErrorKind::Read(e) => {
                write!(f, "{p}:{}{}", sep(e), e.to_string().replace('`', "\""))
            }
        }
    }
}

fn sep(e: &format::ReadError) -> &'static str {
    match e {
        format::ReadError::Syntax { .. } => "",
        _ => " ",
    }
}

/// `io::Error`'s text without the "(os error 2)" tail a user has no use for.
fn io_message(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

impl std::error::Error for LoadError {}

fn err(path: &Path, kind: LoadErrorKind) -> LoadError {
    LoadError {
        path: path.to_path_buf(),
        kind,
    }
}

/// What a file name inside a dump directory says about it.
#[derive(Debug, PartialEq, Eq)]
enum DumpName {
    /// `cudaleak.<pid>.json`, written at exit or on a fatal signal.
    Final(Option<u32>),
    /// `cudaleak.<pid>.snapshot-<n>.json`, written while the process ran.
    Snapshot(u32, u64),
}

fn classify(name: &str) -> Option<DumpName> {
    let middle = name.strip_prefix("cudaleak.")?.strip_suffix(".json")?;
    if middle.is_empty() {
        return None;
    }
    if let Some((pid, snap)) = middle.split_once(".snapshot-") {
        if let (Ok(pid), Ok(n)) = (pid.parse(), snap.parse()) {
            return Some(DumpName::Snapshot(pid, n));
        }
    }
    Some(DumpName::Final(middle.parse().ok()))
}

/// The dump files a directory stands for: every final dump, plus, for each process that left
/// only snapshots, its latest snapshot. Sorted by file name.
fn dumps_in_dir(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut finals: Vec<(Option<u32>, PathBuf)> = Vec::new();
    let mut latest_snapshot: BTreeMap<u32, (u64, PathBuf)> = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, LoadErrorKind::Io(e)))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(dir, LoadErrorKind::Io(e)))?;
        let name = entry.file_name();
        let Some(kind) = name.to_str().and_then(classify) else {
            continue;
        };
        let path = entry.path();
        if path.is_dir() {
            continue;
        }
        match kind {
            DumpName::Final(pid) => finals.push((pid, path)),
            DumpName::Snapshot(pid, n) => {
                let slot = latest_snapshot.entry(pid).or_insert((n, path.clone()));
                if n >= slot.0 {
                    *slot = (n, path);
                }
            }
        }
    }
    let mut out: Vec<PathBuf> = latest_snapshot
        .into_iter()
        .filter(|(pid, _)| !finals.iter().any(|(p, _)| *p == Some(*pid)))
        .map(|(_, (_, path))| path)
        .collect();
    out.extend(finals.into_iter().map(|(_, p)| p));
    out.sort();
    Ok(out)
}

/// Expands PATHs (files or directories) into dump files. A named file is used whatever its name.
/// `allow_empty_dirs` lets `run` explain a missing dump itself.
pub fn expand(paths: &[PathBuf], allow_empty_dirs: bool) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| err(p, LoadErrorKind::Io(e)))?;
        if meta.is_dir() {
            let found = dumps_in_dir(p)?;
            if found.is_empty() && !allow_empty_dirs {
                return Err(err(p, LoadErrorKind::NoDumps));
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Reads and validates one dump.
pub fn read(path: &Path) -> Result<format::Dump, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| err(path, LoadErrorKind::Io(e)))?;
    if meta.len() > MAX_DUMP_BYTES {
        return Err(err(path, LoadErrorKind::TooLarge(meta.len())));
    }
    format::read_file(path).map_err(|e| err(path, LoadErrorKind::Read(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_classified_as_final_or_snapshot() {
        assert_eq!(
            classify("cudaleak.4711.json"),
            Some(DumpName::Final(Some(4711)))
        );
        assert_eq!(
            classify("cudaleak.4711.snapshot-3.json"),
            Some(DumpName::Snapshot(4711, 3))
        );
        assert_eq!(classify("cudaleak.x.json"), Some(DumpName::Final(None)));
        assert_eq!(classify("cudaleak.json"), None);
        assert_eq!(classify("cudaleak.4711.json.tmp.1"), None);
        assert_eq!(classify("other.4711.json"), None);
    }

    #[test]
    fn directory_prefers_final_dumps_and_falls_back_to_latest_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "cudaleak.10.json",
            "cudaleak.10.snapshot-1.json",
            "cudaleak.20.snapshot-1.json",
            "cudaleak.20.snapshot-12.json",
            "cudaleak.20.snapshot-2.json",
            "notes.txt",
            "cudaleak.30.json.tmp.99",
        ] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
        }
        let got: Vec<String> = dumps_in_dir(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, ["cudaleak.10.json", "cudaleak.20.snapshot-12.json"]);
    }

    #[test]
    fn empty_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = expand(&[dir.path().to_path_buf()], false).unwrap_err();
        assert!(e.to_string().contains("no cudaleak dumps"), "{e}");
        assert!(expand(&[dir.path().to_path_buf()], true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn syntax_errors_read_as_file_line_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.4711.json");
        std::fs::write(&p, "{\n  \"cudaleak_dump\": 1,\n  oops").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:3:3: ", p.display())), "{e}");
    }

    #[test]
    fn missing_file_names_the_file_without_os_error_noise() {
        let e = read(Path::new("/nonexistent/cudaleak.1.json"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "/nonexistent/cudaleak.1.json: No such file or directory");
    }
}
