//! Finding and reading dumps: which files a PATH stands for, and errors that name the file and,
//! for bad JSON, the line and column in it.
//!
//! The schema and its checks belong to the `cudaleak-format` crate; this module streams a file
//! into it (never more than [`MAX_DUMP_BYTES`], never the whole file in memory besides the
//! parsed dump), hands an unnamed dump to `symbols` to be named, never interprets a dump's
//! contents, and never panics on any input.
//!
//! Inputs are regular files only, opened without blocking: a FIFO, device or socket (which a
//! program under test could plant as `cudaleak.<pid>.json`) would make the gate wait forever or
//! read without end. A named one is refused; in a directory scan it is skipped with a warning.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use cudaleak_format as format;

use crate::input::{self, what_it_is, OpenError};

/// The dump schema as the CLI holds it: `cudaleak_format`'s types with names interned
/// (`cudaleak_format::from_reader`), so frames that repeat a name share it. Analysis code
/// imports this module as `format`.
pub mod schema {
    pub use cudaleak_format::*;
    pub type Dump = cudaleak_format::Dump<Name>;
    pub type Stack = cudaleak_format::Stack<Name>;
    pub type Frame = cudaleak_format::Frame<Name>;
    pub type LiveRecord = cudaleak_format::LiveRecord<Name>;
    pub type Event = cudaleak_format::Event<Name>;
}

/// Dumps larger than this (4 GiB) are refused rather than read; so is a file that reads on past
/// it whatever its size says (one still being written, a `/proc` file). A dump of ten million live blocks is about 1.7 GB.
pub const MAX_DUMP_BYTES: u64 = 4 << 30;

/// Why an input could not be used; `Display` starts with the file name.
#[derive(Debug)]
pub struct LoadError {
    pub path: PathBuf,
    pub kind: LoadErrorKind,
}

#[derive(Debug)]
pub enum LoadErrorKind {
    Io(io::Error),
    /// The file's size, or `None` for a stream that went past the limit.
    TooLarge(Option<u64>),
    NoDumps,
    /// Not a regular file: what it is instead.
    NotAFile(&'static str),
    Read(format::ReadError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            LoadErrorKind::Io(e) => write!(f, "{p}: {}", io_message(e)),
            LoadErrorKind::TooLarge(Some(n)) => write!(
                f,
                "{p}: the file is {n} bytes; cudaleak reads dumps of at most {MAX_DUMP_BYTES} bytes (4 GiB)"
            ),
            LoadErrorKind::TooLarge(None) => write!(
                f,
                "{p}: more than {MAX_DUMP_BYTES} bytes (4 GiB) and still going; cudaleak reads dumps of at most that"
            ),
            LoadErrorKind::NotAFile(what) => write!(
                f,
                "{p}: is {what}, not a regular file; cudaleak reads dumps only from regular files"
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
        format::ReadError::Syntax { .. } | format::ReadError::NotJson { .. } => "",
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
        if !regular_or_unknown(&path) {
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

/// Every dump in a directory, snapshots included (`report --growth`), sorted by file name.
fn all_dumps_in_dir(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, LoadErrorKind::Io(e)))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(dir, LoadErrorKind::Io(e)))?;
        let path = entry.path();
        if entry.file_name().to_str().and_then(classify).is_some() && regular_or_unknown(&path) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Whether a dump found in a directory scan may be read: a regular file (through a symlink or
/// not). Anything else is skipped with a warning; a name that cannot be inspected is kept, so
/// reading it reports why.
fn regular_or_unknown(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => true,
        Ok(m) => {
            crate::say!(
                "skipping {}: it is {}, not a regular file",
                path.display(),
                what_it_is(m.file_type())
            );
            false
        }
        Err(_) => true,
    }
}

/// [`input::open_regular`], its error naming the file as every load error does.
pub fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), LoadError> {
    input::open_regular(path).map_err(|e| {
        err(
            path,
            match e {
                OpenError::Io(e) => LoadErrorKind::Io(e),
                OpenError::NotAFile(what) => LoadErrorKind::NotAFile(what),
            },
        )
    })
}

/// Expands PATHs (files or directories) into dump files. A named file is used whatever its name.
/// `allow_empty_dirs` lets `run` explain a missing dump itself.
pub fn expand(paths: &[PathBuf], allow_empty_dirs: bool) -> Result<Vec<PathBuf>, LoadError> {
    expand_with(paths, allow_empty_dirs, dumps_in_dir, true)
}

/// `expand` for `report --growth`: a directory stands for all its dumps, snapshots included.
pub fn expand_series(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    expand_with(paths, false, all_dumps_in_dir, true)
}

/// `expand_series` (`series`) or `expand` over PATHs already expanded once and named on stderr:
/// the same resolution without a second note (the HTML page reads both the exit dumps and the
/// series).
pub fn expand_again(paths: &[PathBuf], series: bool) -> Result<Vec<PathBuf>, LoadError> {
    let in_dir = if series {
        all_dumps_in_dir
    } else {
        dumps_in_dir
    };
    expand_with(paths, false, in_dir, false)
}

fn expand_with(
    paths: &[PathBuf],
    allow_empty_dirs: bool,
    in_dir: fn(&Path) -> Result<Vec<PathBuf>, LoadError>,
    note: bool,
) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| err(p, LoadErrorKind::Io(e)))?;
        if meta.is_dir() {
            let mut found = in_dir(p)?;
            if found.is_empty() {
                // `cudaleak run --out DIR` makes DIR/run-<time>-<pid>/: stand for the latest.
                if let Some(run) = latest_run_dir(p) {
                    if note {
                        crate::say!(
                            "{} holds no dumps; reading its latest run, {}",
                            p.display(),
                            run.display()
                        );
                    }
                    found = in_dir(&run)?;
                }
            }
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

/// The newest `run-<unix seconds>-<pid>` subdirectory `cudaleak run` made in `dir`, if any.
fn latest_run_dir(dir: &Path) -> Option<PathBuf> {
    let runs = std::fs::read_dir(dir).ok()?.filter_map(|e| {
        let e = e.ok()?;
        let name = e.file_name().into_string().ok()?;
        let mut parts = name.strip_prefix("run-")?.splitn(2, '-');
        let secs: u64 = parts.next()?.parse().ok()?;
        let pid: u32 = parts.next()?.parse().ok()?;
        e.file_type()
            .ok()?
            .is_dir()
            .then(|| ((secs, pid), e.path()))
    });
    runs.max_by_key(|(key, _)| *key).map(|(_, path)| path)
}

/// Reads and validates one dump: at most [`MAX_DUMP_BYTES`], streamed into the format crate's
/// reader, names interned; an unnamed dump (what the shim writes) gets its names from the
/// modules' files ([`crate::symbols`]).
pub fn read(path: &Path) -> Result<schema::Dump, LoadError> {
    read_limited(path, MAX_DUMP_BYTES)
}

/// Counts what passes through, so a parse that ran into the limit reads "too large", not
/// "truncated".
struct Counted<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

type Limited = BufReader<Counted<io::Take<File>>>;

fn open_limited(path: &Path, limit: u64) -> Result<Limited, LoadError> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(err(path, LoadErrorKind::TooLarge(Some(meta.len()))));
    }
    // One byte past the limit tells a file that reads on from one that ends there.
    let counted = Counted {
        inner: file.take(limit.saturating_add(1)),
        n: 0,
    };
    Ok(BufReader::with_capacity(1 << 16, counted))
}

/// `read` with another limit (tests use a small one).
pub fn read_limited(path: &Path, limit: u64) -> Result<schema::Dump, LoadError> {
    let mut dump = read_as_written(path, limit)?;
    crate::symbols::name(&mut dump);
    Ok(dump)
}

/// Reads and validates one dump as it was written: an unnamed dump stays unnamed
/// (`cudaleak symbolize`).
pub fn read_as_written(path: &Path, limit: u64) -> Result<schema::Dump, LoadError> {
    let mut input = open_limited(path, limit)?;
    let parsed = format::from_reader(&mut input, || open_limited(path, limit).ok());
    if input.get_ref().n > limit {
        return Err(err(path, LoadErrorKind::TooLarge(None)));
    }
    parsed.map_err(|e| match e {
        format::ReadError::Io(e) => err(path, LoadErrorKind::Io(e)),
        e => err(path, LoadErrorKind::Read(e)),
    })
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
    fn a_run_output_directory_stands_for_its_latest_run() {
        let out = tempfile::tempdir().unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/leak_loop.json");
        for (run, pid) in [("run-1796220000-17", 101), ("run-1796229999-5", 202)] {
            std::fs::create_dir(out.path().join(run)).unwrap();
            std::fs::copy(
                &fixture,
                out.path().join(run).join(format!("cudaleak.{pid}.json")),
            )
            .unwrap();
        }
        std::fs::create_dir(out.path().join("run-x-1")).unwrap();
        let found = expand(&[out.path().to_path_buf()], false).unwrap();
        assert_eq!(
            found,
            [out.path()
                .join("run-1796229999-5")
                .join("cudaleak.202.json")]
        );
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
    fn a_file_that_reads_on_past_its_size_and_the_limit_is_too_large_not_truncated() {
        // /proc files are regular files of size 0 whose reads go on: the stat check passes,
        // the limit on reading stops them.
        let e = read_limited(Path::new("/proc/self/maps"), 10).unwrap_err();
        assert!(matches!(e.kind, LoadErrorKind::TooLarge(None)), "{e}");
        assert!(e.to_string().contains("and still going"), "{e}");
        // A regular file over the limit is refused by its size, before reading.
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; 2000]).unwrap();
        let e = read_limited(&big, 1000).unwrap_err();
        assert!(matches!(e.kind, LoadErrorKind::TooLarge(Some(2000))), "{e}");
    }

    fn mkfifo(path: &Path) -> bool {
        let made = std::process::Command::new("mkfifo").arg(path).status();
        made.is_ok_and(|s| s.success())
    }

    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("cudaleak.1.json");
        assert!(mkfifo(&fifo), "mkfifo failed");
        let t = std::time::Instant::now();
        let e = read(&fifo).unwrap_err();
        assert!(matches!(e.kind, LoadErrorKind::NotAFile(_)), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: is a FIFO (named pipe), not a regular file; cudaleak reads dumps only from regular files",
                fifo.display()
            )
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        let e = read(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("is a character device"), "{e}");
    }

    #[test]
    fn a_directory_scan_skips_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(mkfifo(&dir.path().join("cudaleak.1.json")), "mkfifo failed");
        assert!(mkfifo(&dir.path().join("cudaleak.2.snapshot-1.json")));
        std::fs::create_dir(dir.path().join("cudaleak.3.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("cudaleak.4.json")).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clean.json");
        std::fs::copy(&fixture, dir.path().join("cudaleak.5.json")).unwrap();
        std::os::unix::fs::symlink(&fixture, dir.path().join("cudaleak.6.json")).unwrap();
        let names = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let d = dir.path().to_path_buf();
        assert_eq!(
            names(expand(std::slice::from_ref(&d), false).unwrap()),
            ["cudaleak.5.json", "cudaleak.6.json"]
        );
        assert_eq!(
            names(expand_series(&[d]).unwrap()),
            ["cudaleak.5.json", "cudaleak.6.json"]
        );
    }

    #[test]
    fn missing_file_names_the_file_without_os_error_noise() {
        let e = read(Path::new("/nonexistent/cudaleak.1.json"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "/nonexistent/cudaleak.1.json: No such file or directory");
    }
}
