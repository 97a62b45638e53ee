//! Where a report goes: standard output, or `-o FILE` written atomically — into a temporary
//! file in FILE's directory, renamed over FILE only once the whole report is written, so a
//! reader never sees half a report and a failed run leaves FILE as it was.
//!
//! Owns the decision whether colour is wanted on that stream (anstream's rules: a terminal,
//! `NO_COLOR`, `CLICOLOR`/`CLICOLOR_FORCE`, `TERM=dumb`). It must never open FILE itself: a
//! FIFO or device planted there is refused, never opened (opening a FIFO blocks until a reader
//! comes).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anstream::stream::RawStream;
use tempfile::NamedTempFile;

/// Whether `-o PATH` means standard output: `-`, as for most tools.
pub fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// An I/O error's text without the path tempfile wraps around it (the temporary file's) and
/// without the "(os error N)" tail.
fn plain(e: &io::Error) -> String {
    let inner = e
        .get_ref()
        .and_then(|x| std::error::Error::source(x))
        .and_then(|s| s.downcast_ref::<io::Error>())
        .unwrap_or(e);
    let s = inner.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// An open destination; [`Output::finish`] completes it.
pub enum Output {
    Stdout(BufWriter<io::StdoutLock<'static>>),
    File {
        w: BufWriter<NamedTempFile>,
        path: PathBuf,
    },
}

/// Whether anstream's rules allow colour on `raw` when the user asked for `auto`.
fn auto_color(raw: &impl RawStream) -> bool {
    anstream::AutoStream::choice(raw) != anstream::ColorChoice::Never
}

impl Output {
    /// Opens `path` (or standard output, for none or `-`); also whether `--color auto` means
    /// colour there.
    pub fn open(path: Option<&Path>) -> Result<(Output, bool), String> {
        let Some(p) = path.filter(|p| !is_stdout(p)) else {
            let color = auto_color(&io::stdout());
            return Ok((Output::Stdout(BufWriter::new(io::stdout().lock())), color));
        };
        // A symlink to a regular file is written through: the file is replaced, not the link.
        let target = match std::fs::metadata(p) {
            Ok(m) if m.is_file() => std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()),
            Ok(m) => {
                return Err(format!(
                    "{}: is {}, not a regular file; -o writes a regular file (a temporary file \
                     renamed into place), so leave -o out to write to standard output",
                    p.display(),
                    crate::input::what_it_is(m.file_type())
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => p.to_path_buf(),
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".cudaleak-report.")
            .tempfile_in(&dir)
            // tempfile's error names the temporary file; the user named `p`.
            .map_err(|e| format!("{}: cannot create: {}", p.display(), plain(&e)))?;
        let color = auto_color(tmp.as_file());
        Ok((
            Output::File {
                w: BufWriter::new(tmp),
                path: target,
            },
            color,
        ))
    }

    /// Flushes and, for a file, renames it into place (mode 0644, or the mode of the file it
    /// replaces). On error the temporary file is removed and FILE is untouched.
    pub fn finish(self) -> io::Result<()> {
        match self {
            Output::Stdout(mut w) => w.flush(),
            Output::File { w, path } => {
                let tmp = w.into_inner().map_err(io::IntoInnerError::into_error)?;
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&path).map_or(0o644, |m| m.permissions().mode());
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
                tmp.as_file().sync_all()?;
                tmp.persist(&path).map(drop).map_err(|e| e.error)
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Stdout(w) => w.write(buf),
            Output::File { w, .. } => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(w) => w.flush(),
            Output::File { w, .. } => w.flush(),
        }
    }
}
