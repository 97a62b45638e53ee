//! Finding and reading dumps: which files a PATH stands for, and errors that name the file and,
//! for bad JSON, the line and column in it.
//!
//! The schema and its checks belong to the `cudaleak-format` crate; this module streams a file
//! into it (never more than [`MAX_DUMP_BYTES`], never the whole file in memory besides the
//! parsed dump), never interprets a dump's contents, and never panics on any input.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use cudaleak_format as format;
use serde::de::IgnoredAny;
use serde::Deserialize;

/// Dumps larger than this (4 GiB) are refused rather than read; so is a stream (a pipe,
/// `/dev/zero`) that goes on past it. A dump of ten million live blocks is about 1.7 GB.
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

/// Every dump in a directory, snapshots included (`report --growth`), sorted by file name.
fn all_dumps_in_dir(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, LoadErrorKind::Io(e)))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(dir, LoadErrorKind::Io(e)))?;
        let path = entry.path();
        if entry.file_name().to_str().and_then(classify).is_some() && !path.is_dir() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Expands PATHs (files or directories) into dump files. A named file is used whatever its name.
/// `allow_empty_dirs` lets `run` explain a missing dump itself.
pub fn expand(paths: &[PathBuf], allow_empty_dirs: bool) -> Result<Vec<PathBuf>, LoadError> {
    expand_with(paths, allow_empty_dirs, dumps_in_dir)
}

/// `expand` for `report --growth`: a directory stands for all its dumps, snapshots included.
pub fn expand_series(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    expand_with(paths, false, all_dumps_in_dir)
}

fn expand_with(
    paths: &[PathBuf],
    allow_empty_dirs: bool,
    in_dir: fn(&Path) -> Result<Vec<PathBuf>, LoadError>,
) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| err(p, LoadErrorKind::Io(e)))?;
        if meta.is_dir() {
            let mut found = in_dir(p)?;
            if found.is_empty() {
                // `cudaleak run --out DIR` makes DIR/run-<time>-<pid>/: stand for the latest.
                if let Some(run) = latest_run_dir(p) {
                    eprintln!(
                        "cudaleak: {} holds no dumps; reading its latest run, {}",
                        p.display(),
                        run.display()
                    );
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

/// Reads and validates one dump: at most [`MAX_DUMP_BYTES`], streamed into the parser.
pub fn read(path: &Path) -> Result<format::Dump, LoadError> {
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
    let file = File::open(path).map_err(|e| err(path, LoadErrorKind::Io(e)))?;
    let meta = file
        .metadata()
        .map_err(|e| err(path, LoadErrorKind::Io(e)))?;
    if meta.is_dir() {
        return Err(err(
            path,
            LoadErrorKind::Io(io::Error::other("is a directory, not a dump")),
        ));
    }
    if meta.is_file() && meta.len() > limit {
        return Err(err(path, LoadErrorKind::TooLarge(Some(meta.len()))));
    }
    // One byte past the limit tells a stream that goes on from one that ends there.
    let counted = Counted {
        inner: file.take(limit.saturating_add(1)),
        n: 0,
    };
    Ok(BufReader::with_capacity(1 << 16, counted))
}

/// `read` with another limit (tests use a small one).
pub fn read_limited(path: &Path, limit: u64) -> Result<format::Dump, LoadError> {
    let mut input = open_limited(path, limit)?;
    let parsed = parse(&mut input, || open_limited(path, limit).ok());
    if input.get_ref().n > limit {
        return Err(err(path, LoadErrorKind::TooLarge(None)));
    }
    parsed.map_err(|e| match e {
        format::ReadError::Io(e) => err(path, LoadErrorKind::Io(e)),
        e => err(path, LoadErrorKind::Read(e)),
    })
}

/// Parses and validates a dump streamed from `input`, with the same verdicts as
/// `cudaleak_format::from_slice`; `reopen` gives the input again from its start, for a second
/// streaming pass that names the version of a dump whose shape does not fit.
pub fn parse<R: Read, S: Read>(
    input: R,
    reopen: impl FnOnce() -> Option<S>,
) -> Result<format::Dump, format::ReadError> {
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(input);
        format::Dump::deserialize(&mut de).and_then(|d| de.end().map(|()| d))
    };
    match parsed {
        Ok(dump) => {
            if !format::is_supported_version(dump.cudaleak_dump.into()) {
                return Err(format::ReadError::Version(Some(dump.cudaleak_dump.into())));
            }
            dump.validate().map_err(format::ReadError::Inconsistent)?;
            Ok(dump)
        }
        Err(e) if e.is_io() => Err(format::ReadError::Io(io::Error::other(strip_position(&e)))),
        Err(e) => {
            // A dump of another version usually fails on its shape first: say "version" then.
            if !e.is_syntax() && !e.is_eof() {
                if let Some(v) = reopen().and_then(peek_version) {
                    if !v.is_some_and(format::is_supported_version) {
                        return Err(format::ReadError::Version(v));
                    }
                }
            }
            Err(format::ReadError::Syntax {
                line: e.line(),
                column: e.column(),
                message: strip_position(&e),
            })
        }
    }
}

/// `Some(version)` of a JSON object, `Some(None)` for an object without the field, `None` if
/// the input is not a JSON object. Streams, keeping nothing but the version.
fn peek_version(input: impl Read) -> Option<Option<u64>> {
    #[derive(Deserialize)]
    struct Peek {
        cudaleak_dump: Option<NumberOrOther>,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrOther {
        Number(u64),
        Other(IgnoredAny),
    }
    let p: Peek = serde_json::from_reader(input).ok()?;
    Some(match p.cudaleak_dump {
        Some(NumberOrOther::Number(v)) => Some(v),
        _ => None,
    })
}

/// serde_json appends " at line L column C"; the position is reported as file:line:col.
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
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
    fn a_stream_that_goes_on_past_the_limit_is_too_large_not_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("stream.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: nothing to test
        }
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                let _ = f.write_all(b"{\"cudaleak_dump\": 1, \"process\": {\"exe\": \"");
                // An endless name; the reader stops after its limit and closes the pipe.
                while f.write_all(&[b'A'; 4096]).is_ok() {}
            })
        };
        let e = read_limited(&fifo, 100_000).unwrap_err();
        assert!(matches!(e.kind, LoadErrorKind::TooLarge(None)), "{e}");
        assert!(e.to_string().contains("and still going"), "{e}");
        drop(e);
        writer.join().unwrap();
        // A regular file over the limit is refused by its size, before reading.
        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; 2000]).unwrap();
        let e = read_limited(&big, 1000).unwrap_err();
        assert!(matches!(e.kind, LoadErrorKind::TooLarge(Some(2000))), "{e}");
    }

    #[test]
    fn missing_file_names_the_file_without_os_error_noise() {
        let e = read(Path::new("/nonexistent/cudaleak.1.json"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "/nonexistent/cudaleak.1.json: No such file or directory");
    }
}
