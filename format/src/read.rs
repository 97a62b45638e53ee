//! Reading a dump: one streaming parser, errors with positions, the version looked at first.

use std::fmt;
use std::io::{self, Read};

use serde::Deserialize;

use super::*;

/// Why a dump could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// Not JSON, truncated, or not the v1 shape; `line` and `column` are 1-based.
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A well-formed dump of another schema version, or not a cudaleak dump at all.
    Version(Option<u64>),
    /// A `"cudaleak_dump"` field that is not a number: its JSON text (e.g. `"1"`).
    VersionNotANumber(String),
    /// Well-formed, but fields contradict each other.
    Inconsistent(String),
    /// Nothing but white space, or nothing at all.
    Empty,
    /// Not JSON at all (a binary file, text): the first byte that is not white space cannot
    /// start a JSON value.
    NotJson {
        line: usize,
        column: usize,
        byte: u8,
    },
    /// JSON (or the start of it) of another kind than an object: `"an array"`, `"a number"`, …
    NotAnObject(&'static str),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Syntax {
                line,
                column,
                message,
            } => write!(f, "{line}:{column}: {message}"),
            ReadError::Version(Some(v)) => write!(
                f,
                "dump schema version {v} is not supported (this cudaleak reads versions {MIN_SCHEMA_VERSION} to {SCHEMA_VERSION})"
            ),
            ReadError::Version(None) => {
                write!(f, "not a cudaleak dump (no \"cudaleak_dump\" version field)")
            }
            ReadError::VersionNotANumber(json) => write!(
                f,
                "the \"cudaleak_dump\" version field is {json}, not a number (this cudaleak reads \
                 versions {MIN_SCHEMA_VERSION} to {SCHEMA_VERSION}, written as numbers)"
            ),
            ReadError::Inconsistent(m) => write!(f, "inconsistent dump: {m}"),
            ReadError::Empty => write!(f, "the file is empty; a cudaleak dump is a JSON object"),
            ReadError::NotJson { line, column, byte } => write!(
                f,
                "{line}:{column}: not JSON (it starts with byte 0x{byte:02x}{}); a cudaleak dump is a JSON object",
                if byte.is_ascii_graphic() {
                    format!(", {:?}", char::from(*byte))
                } else {
                    String::new()
                }
            ),
            ReadError::NotAnObject(what) => write!(
                f,
                "not a cudaleak dump: the file holds {what}, and a cudaleak dump is a JSON object"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// A list read at its size: the elements are collected in a growing list, then moved into one
/// of exactly their number. A stack's few frames grew to room for four; shrunk afterwards, each
/// left a piece of its allocation behind, and with every frame distinct those pieces were a
/// tenth of the dump as read.
pub(crate) fn exact_vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Exact<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Exact<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut grown = Vec::new();
            while let Some(e) = seq.next_element()? {
                grown.push(e);
            }
            if grown.len() == grown.capacity() {
                return Ok(grown);
            }
            let mut exact = Vec::with_capacity(grown.len());
            exact.append(&mut grown);
            Ok(exact)
        }
    }
    d.deserialize_seq(Exact(std::marker::PhantomData))
}

/// Parses and validates a dump from bytes.
pub fn from_slice(bytes: &[u8]) -> Result<Dump, ReadError> {
    parse(bytes, || Some(bytes))
}

/// Reads and validates a dump file, streaming.
pub fn read_file(path: &std::path::Path) -> Result<Dump, ReadError> {
    let open = || std::fs::File::open(path).map(|f| io::BufReader::with_capacity(1 << 16, f));
    parse(open()?, || open().ok())
}

/// Parses and validates a dump streamed from `input`, with its names interned: what the CLI
/// analyses. `reopen` gives the input again from its start, for a second streaming pass that
/// names the version of a dump whose shape does not fit; an I/O error of `input` is
/// [`ReadError::Io`], without a position.
pub fn from_reader<R: Read, R2: Read>(
    input: R,
    reopen: impl FnOnce() -> Option<R2>,
) -> Result<Dump<Name>, ReadError> {
    let mut dump = interning(|| parse(input, reopen))?;
    // serde grows each list by doubling; give back the slack of the many small ones.
    for s in &mut dump.stacks {
        s.frames.shrink_to_fit();
        s.python.shrink_to_fit();
    }
    dump.stacks.shrink_to_fit();
    dump.live.shrink_to_fit();
    dump.events.shrink_to_fit();
    Ok(dump)
}

/// The one parser: streaming, then the version and consistency checks.
fn parse<S, R: Read, R2: Read>(
    input: R,
    reopen: impl FnOnce() -> Option<R2>,
) -> Result<Dump<S>, ReadError>
where
    S: for<'de> Deserialize<'de>,
{
    let mut sniff = Sniff::new(input);
    let parsed = {
        // serde_json takes its input a byte at a time through `io::Bytes`, which reads straight
        // from the buffer only when the reader is a `BufReader` itself (not a `&mut` one, nor
        // one inside another reader): a buffer of our own, outermost, keeps that fast path
        // whatever `R` is; the sniffer under it sees the input in buffer-sized reads.
        let mut de = serde_json::Deserializer::from_reader(io::BufReader::with_capacity(
            1 << 16,
            &mut sniff,
        ));
        Dump::<S>::deserialize(&mut de).and_then(|d| de.end().map(|()| d))
    };
    match parsed {
        Ok(dump) => {
            if !is_supported_version(dump.cudaleak_dump.into()) {
                return Err(ReadError::Version(Some(dump.cudaleak_dump.into())));
            }
            dump.validate().map_err(ReadError::Inconsistent)?;
            Ok(dump)
        }
        Err(e) if e.is_io() => Err(ReadError::Io(io::Error::other(strip_position(&e)))),
        Err(e) => {
            // Say what the input is when it is not a JSON object at all.
            match sniff.first {
                None => return Err(ReadError::Empty),
                Some((b'{', ..)) => {}
                Some((byte, line, column)) => {
                    return Err(match json_kind(byte) {
                        Some(what) => ReadError::NotAnObject(what),
                        None => ReadError::NotJson { line, column, byte },
                    })
                }
            }
            // A dump of another version usually fails on its shape first: say "version" then.
            if !e.is_syntax() && !e.is_eof() {
                match reopen().and_then(peek_version) {
                    Some(Peeked::Number(v)) if is_supported_version(v) => {}
                    Some(Peeked::Number(v)) => return Err(ReadError::Version(Some(v))),
                    Some(Peeked::Missing) => return Err(ReadError::Version(None)),
                    Some(Peeked::Other(json)) => return Err(ReadError::VersionNotANumber(json)),
                    None => {}
                }
            }
            Err(ReadError::Syntax {
                line: e.line(),
                column: e.column(),
                message: if e.is_eof() {
                    truncated(&e)
                } else {
                    strip_position(&e)
                },
            })
        }
    }
}

/// Passes a reader through, noting its first byte that is not JSON white space and where it is
/// (1-based line and column), so a parse error can say what the input is.
struct Sniff<R> {
    inner: R,
    first: Option<(u8, usize, usize)>,
    line: usize,
    column: usize,
}

impl<R> Sniff<R> {
    fn new(inner: R) -> Self {
        Sniff {
            inner,
            first: None,
            line: 1,
            column: 0,
        }
    }
}

impl<R: Read> Read for Sniff<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.first.is_none() {
            for &b in &buf[..n] {
                match b {
                    b'\n' => (self.line, self.column) = (self.line + 1, 0),
                    b' ' | b'\t' | b'\r' => self.column += 1,
                    _ => {
                        self.first = Some((b, self.line, self.column + 1));
                        break;
                    }
                }
            }
        }
        Ok(n)
    }
}

/// What a JSON value starting with `b` is, in words; `None` if no JSON value starts so.
fn json_kind(b: u8) -> Option<&'static str> {
    Some(match b {
        b'{' => "an object",
        b'[' => "an array",
        b'"' => "a string",
        b'-' | b'0'..=b'9' => "a number",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        _ => return None,
    })
}

/// `Some(version)` of a JSON object, `Some(None)` for an object without the field, `None` if
/// the input is not a JSON object at all. Streams, keeping nothing but the version.
fn peek_version(input: impl Read) -> Option<Peeked> {
    #[derive(Deserialize)]
    struct Peek {
        cudaleak_dump: Option<NumberOrOther>,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrOther {
        Number(u64),
        Other(serde_json::Value),
    }
    serde_json::from_reader::<_, Peek>(input)
        .ok()
        .map(|p| match p.cudaleak_dump {
            Some(NumberOrOther::Number(v)) => Peeked::Number(v),
            Some(NumberOrOther::Other(v)) => {
                let mut json = v.to_string();
                if json.len() > 40 {
                    json = format!("{}…", json.chars().take(40).collect::<String>());
                }
                Peeked::Other(json)
            }
            None => Peeked::Missing,
        })
}

/// What the `"cudaleak_dump"` field of a dump that did not parse holds.
enum Peeked {
    Missing,
    Number(u64),
    /// Its JSON text: a string, a negative or fractional number, …
    Other(String),
}

/// serde_json's "EOF while parsing a string" said as what it means for a file: it ends early.
fn truncated(e: &serde_json::Error) -> String {
    let msg = strip_position(e);
    let inside = msg.strip_prefix("EOF while parsing ").unwrap_or("a value");
    format!("the file ends early, inside {inside}: it is truncated")
}

/// serde_json appends " at line L column C"; we report the position ourselves.
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
