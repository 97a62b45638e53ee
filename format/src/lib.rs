//! The cudaleak dump schema, versions 1 to 5: the one definition of what the shim writes and the
//! CLI reads. Field-by-field documentation lives in `docs/dump-format.md`; keep the two in step.
//!
//! This crate holds types, the version constant, reading (with positions in errors),
//! consistency checks, how a byte count is written (`size`: shared by the shim's exit line
//! and the CLI's reports), and which values `api` takes and which runtime call leads to which
//! driver call (`api`: the shim writes driver names, the reader relabels them once a stack has
//! names). It must never depend on the shim or the CLI, and never panic on input.
//!
//! There is one reader: a streaming parse, never the whole file in memory. The types are generic
//! in how names (function, file, module, API) are held: `String` by default, as the shim builds
//! and writes them; [`from_reader`] reads them as interned [`Name`]s, so a dump in memory is a
//! fraction of its size on disk however many frames repeat a name.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, Read};

pub mod api;
mod name;
mod size;
pub use name::{interning, Name};
pub use size::{human_bytes, human_bytes_exact};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The newest value of the top-level `cudaleak_dump` field: version 2 is version 1 plus the
/// optional `kind` of a frame (Python frames); version 3 adds the module table (`modules`), dumps
/// whose native frames are not named yet (`unnamed`), and the Python runs of such a dump's stacks
/// (`stacks[].python`), which the reader splices in once the native frames have names; version 4
/// adds each stack's floor since the previous snapshot (`floors`) and the moment the Python
/// interpreter began to shut down (`finalizing`); version 5 adds the library handles (cuBLAS,
/// cuDNN, cuFFT plans, …) still live, and the blocks each one owns (`handles`).
pub const SCHEMA_VERSION: u32 = 5;
/// The oldest version this crate still reads.
pub const MIN_SCHEMA_VERSION: u32 = 1;

/// Whether a dump of version `v` can be read.
pub fn is_supported_version(v: u64) -> bool {
    (u64::from(MIN_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&v)
}

/// The version a dump should carry: the lowest that describes it, so that readers which know
/// only version 1 keep reading dumps without Python frames or a module table.
pub fn version_for<S>(
    stacks: &[Stack<S>],
    modules: &[Module],
    unnamed: bool,
    floors: bool,
    handles: bool,
) -> u32 {
    if handles {
        return 5;
    }
    if floors {
        return 4;
    }
    if unnamed || !modules.is_empty() || stacks.iter().any(|s| !s.python.is_empty()) {
        return 3;
    }
    let python = stacks
        .iter()
        .any(|s| s.frames.iter().any(|f| f.kind.is_some()));
    if python {
        2
    } else {
        MIN_SCHEMA_VERSION
    }
}

/// A whole dump: one process at one moment (exit, a signal, or a snapshot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dump<S = String> {
    pub cudaleak_dump: u32,
    pub process: Process,
    pub summary: Summary,
    /// Version 3: true when the native frames carry addresses only (`ip`, `module`, `offset`)
    /// and their names are still to be read from the modules' files; written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unnamed: bool,
    /// Version 3: the modules the native frames lie in, each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<Module>,
    pub stacks: Vec<Stack<S>>,
    pub live: Vec<LiveRecord<S>>,
    pub events: Vec<Event<S>>,
    /// Version 4: the stacks whose floor — the fewest blocks and bytes they held at any moment
    /// since the previous snapshot of the process (since its start, for the first) — lies below
    /// what they hold in this dump. A stack not listed held at least what it holds now all
    /// through the interval. Absent when the dump's writer recorded no floors (versions 1 to 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floors: Option<Vec<StackCounts>>,
    /// Version 4: the Python interpreter began to shut down before this dump was written.
    // A default by path: a plain `default` would bound `S: Default`.
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub finalizing: Option<Finalizing<S>>,
    /// Version 5: the library handles the program created and had not destroyed when the dump
    /// was written, and destroyed ones whose blocks are still live.
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    pub handles: Vec<Handle<S>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shim: Option<ShimInfo>,
}

/// A handle of a library that allocates GPU memory for it (a cuBLAS handle, a cuFFT plan, a
/// NCCL communicator …): made by one call of `create`, the blocks the library allocated for it
/// owned by it until it is destroyed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handle<S = String> {
    /// Which library: `cublas`, `cublasLt`, `cudnn`, `cufft`, `curand`, `cusparse`, `cusolver`
    /// or `nccl`.
    pub library: S,
    /// The function that made it, e.g. `cublasCreate_v2` or `cufftPlan1d`.
    pub create: S,
    /// The handle's value as the library returned it (a pointer, or a cuFFT plan's number).
    pub handle: Hex,
    /// Kernel thread id of the creating thread.
    pub thread: u64,
    /// The current device when it was made, when known.
    pub device: Option<i32>,
    /// Sequence number of the create call (shared with allocations and frees).
    pub seq: u64,
    /// Milliseconds since the shim started.
    pub time_ms: u64,
    /// Index into `Dump::stacks`: the program's call of `create`.
    pub stack: usize,
    /// The `seq` of each live record the library allocated for this handle: while it was being
    /// made, or during a call that names it (a cuFFT plan's `cufftMakePlan*`, a cuRAND
    /// generator's `curandGenerate*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<u64>,
    /// True for a handle the program destroyed whose blocks the library did not free.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroyed: bool,
}

/// Blocks and bytes (bytes held, as `summary.live_bytes` counts them) of one stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackCounts {
    /// Index into `stacks`.
    pub stack: usize,
    pub allocations: u64,
    pub bytes: u64,
}

/// What one stack held, and the call that made its blocks (as a live record's `api`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Held<S = String> {
    pub stack: usize,
    pub api: S,
    pub allocations: u64,
    pub bytes: u64,
}

/// The moment the Python interpreter began to shut down (`Py_FinalizeEx` set its finalizing
/// flag; seen at the first free after it): what the script still held when it ended, apart
/// from what the interpreter's teardown freed afterwards.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finalizing<S = String> {
    pub unix_ms: u64,
    /// The sequence number then: live records with a larger `seq` were allocated by teardown.
    pub seq: u64,
    /// Every stack that held memory then, and what it held.
    pub held: Vec<Held<S>>,
    /// The stacks whose floor since the previous snapshot, up to that moment, lay below what
    /// they held then (as `Dump::floors`).
    pub floors: Vec<StackCounts>,
}

/// Why the dump was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// Normal process exit (`exit()` or return from `main`).
    Exit,
    /// A fatal signal; `Process::signal` names it.
    Signal,
    /// A snapshot of a still-running process; `Process::snapshot` numbers it.
    Snapshot,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            End::Exit => "exit",
            End::Signal => "signal",
            End::Snapshot => "snapshot",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub exe: String,
    pub argv: Vec<String>,
    /// MPI/launcher rank from RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK.
    pub rank: Option<i64>,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    pub end: End,
    /// Signal name (`"SIGTERM"`) when `end` is `signal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Snapshot sequence number (1, 2, …) when `end` is `snapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
    /// The parent's pid when this process was forked from a recorded one (its table started
    /// empty at the fork).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<u32>,
    /// Set when the shim stopped recording early (an internal failure); the dump is then partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_stopped: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// Successful allocation calls.
    pub allocations: u64,
    /// Successful frees of a tracked block.
    pub frees: u64,
    /// Successful frees of an address the shim never saw allocated (a coverage hole).
    pub untracked_frees: u64,
    pub failed_allocations: u64,
    /// Failed frees of an address that was not live (double and invalid frees together).
    pub invalid_frees: u64,
    pub live_allocations: u64,
    pub live_bytes: u64,
    pub peak_live_bytes: u64,
    /// Sum of the sizes of all successful allocations.
    pub bytes_allocated: u64,
    /// Events not stored because the event list was full (they are still counted above).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_events: u64,
}

impl Summary {
    /// No CUDA call was recorded: no allocation (made or failed), no free (good or bad), nothing
    /// live. The summary of a process that never used CUDA memory: a shell, a compiler, a tool
    /// a CUDA program runs.
    pub fn is_empty(&self) -> bool {
        self.allocations == 0
            && self.frees == 0
            && self.untracked_frees == 0
            && self.failed_allocations == 0
            && self.invalid_frees == 0
            && self.live_allocations == 0
    }
}

/// About the shim that wrote the dump: for judging its cost, not the program's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimInfo {
    /// The shim's version (its crate version).
    pub version: String,
    /// Stack captures that walked the stack with the unwinder.
    pub stack_walks: u64,
    /// Stack captures answered by the walk cache (the stack proven unchanged since a walk);
    /// counted per thread in batches of 256, so a running thread's last few may be missing.
    pub stack_reuses: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An executable or shared library mapped in the process (version 3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Module {
    /// Its path, as the process mapped it (`frames[].module` names it so).
    pub path: String,
    /// Its load bias: what was added to the addresses in the file (`frames[].offset` is
    /// `ip - base`).
    pub base: Hex,
    /// The GNU build-id of the image mapped (its `NT_GNU_BUILD_ID` note), lower-case hex; absent
    /// when the ELF has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stack<S = String> {
    /// Innermost frame first: `frames[0]` is the code that called the CUDA function.
    pub frames: Vec<Frame<S>>,
    /// Version 3, in an `unnamed` dump: the Python frames, not yet placed among the native ones,
    /// as runs of the evaluation loop (innermost first; each run is the Python frames one native
    /// `_PyEval_EvalFrameDefault` frame executed). The reader splices them into `frames` once
    /// the native frames have names; written only when there are some.
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<Vec<Frame<S>>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frame<S = String> {
    /// What runs in this frame: absent for native code (every frame of a version 1 dump),
    /// `python` for a Python function (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FrameKind>,
    /// The return address as captured; `0x0` for a Python frame, which has none.
    pub ip: Hex,
    /// Path of the module (executable or shared library) holding `ip`.
    pub module: Option<S>,
    /// `ip` in the module's own address space (ip minus load bias), as `addr2line -e module` takes it;
    /// for a Python frame, the byte offset of the instruction in its code object's bytecode.
    pub offset: Option<Hex>,
    /// Demangled function name.
    pub function: Option<S>,
    pub file: Option<S>,
    pub line: Option<u32>,
}

/// What runs in a frame other than native code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// A CPython frame: `function` is the code object's qualified name (`Model.train_step`; the
    /// plain name before Python 3.11), `file` its `co_filename`, `line` the executing line.
    Python,
}

impl<S> Frame<S> {
    pub fn is_python(&self) -> bool {
        self.kind == Some(FrameKind::Python)
    }
}

/// What kind of memory a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Device,
    Managed,
    Host,
    Async,
    Array,
    Physical,
    /// Made by a CUDA graph's memory allocation node when the graph was launched.
    Graph,
    /// Host memory the program page-locked with `cuMemHostRegister`.
    Registered,
    /// Another process's memory opened through IPC.
    Ipc,
    /// A virtual address range reserved with `cuMemAddressReserve`.
    Reserved,
    /// A mapping of physical memory into a reserved range (`cuMemMap`).
    Mapped,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Device => "device",
            Kind::Managed => "managed",
            Kind::Host => "host",
            Kind::Async => "async",
            Kind::Array => "array",
            Kind::Physical => "physical",
            Kind::Graph => "graph",
            Kind::Registered => "registered",
            Kind::Ipc => "ipc",
            Kind::Reserved => "reserved",
            Kind::Mapped => "mapped",
        }
    }
}

/// One block still live when the dump was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveRecord<S = String> {
    /// Device or host address; the handle for `array` and `physical`.
    pub address: Hex,
    /// Bytes (pitch × height for pitched allocations); the range for `reserved` and `mapped`.
    pub size: u64,
    /// Bytes of memory the record keeps allocated, written only when that is not `size`:
    /// 0 for `reserved` (address space), and for `mapped` 0 while the physical allocation it
    /// maps is live, that allocation's size once the program released it. See [`LiveRecord::held`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_held: Option<u64>,
    /// The call the program made, e.g. `cudaMalloc` or `cuMemAlloc_v2`.
    pub api: S,
    pub kind: Kind,
    /// Device ordinal, when known.
    pub device: Option<i32>,
    /// Kernel thread id of the allocating thread.
    pub thread: u64,
    /// Global sequence number of the call (allocations and frees share one counter).
    pub seq: u64,
    /// Milliseconds since the shim started.
    pub time_ms: u64,
    /// Index into `Dump::stacks`.
    pub stack: usize,
}

impl<S> LiveRecord<S> {
    /// Bytes of memory this record keeps allocated: what `summary.live_bytes` adds up, so that
    /// memory reached through several records (a physical allocation and its mappings) is
    /// counted once.
    pub fn held(&self) -> u64 {
        self.bytes_held.unwrap_or(self.size)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// An allocation call failed; `error` is its return code, `size` the requested bytes.
    FailedAllocation,
    /// A free of an address that was freed before failed; `alloc_stack` is where it was allocated.
    DoubleFree,
    /// A free of an address never allocated failed.
    InvalidFree,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::FailedAllocation => "failed_allocation",
            EventType::DoubleFree => "double_free",
            EventType::InvalidFree => "invalid_free",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event<S = String> {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub api: S,
    pub address: Option<Hex>,
    pub size: Option<u64>,
    /// The CUDA return code of the failed call.
    pub error: Option<i64>,
    pub seq: u64,
    /// Index into `Dump::stacks`: where the failing call was made.
    pub stack: usize,
    /// Index into `Dump::stacks`: where the block was allocated (double frees).
    pub alloc_stack: Option<usize>,
    /// The call was made after the program had begun to exit (the shim's late exit handler had
    /// run), when runtimes and drivers tear down. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub during_exit: bool,
}

/// A 64-bit value written as a `"0x…"` string (JSON numbers lose precision past 2^53).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hex(pub u64);

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // A stack buffer: "0x" + 16 digits.
        let mut buf = [0u8; 18];
        s.serialize_str(hex_str(self.0, &mut buf))
    }
}

/// Formats `v` as `0x…` into `buf` without allocating.
pub fn hex_str(mut v: u64, buf: &mut [u8; 18]) -> &str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = DIGITS[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    buf[i - 2] = b'0';
    buf[i - 1] = b'x';
    std::str::from_utf8(&buf[i - 2..]).unwrap_or("0x0")
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct HexVisitor;
        impl Visitor<'_> for HexVisitor {
            type Value = Hex;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a hexadecimal string such as \"0x7f00\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Hex, E> {
                parse_hex(v).map(Hex).ok_or_else(|| {
                    E::invalid_value(
                        de::Unexpected::Str(v),
                        &"a string \"0x\" + 1 to 16 hex digits",
                    )
                })
            }
        }
        d.deserialize_str(HexVisitor)
    }
}

fn parse_hex(v: &str) -> Option<u64> {
    let digits = v.strip_prefix("0x")?;
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

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

/// Writes a dump as compact JSON followed by a newline.
pub fn write<S: Serialize, W: io::Write>(dump: &Dump<S>, mut w: W) -> io::Result<()> {
    serde_json::to_writer(&mut w, dump)?;
    w.write_all(b"\n")
}

/// Everything of a dump but its live records, for [`write_streamed`].
pub struct DumpParts<'a, S = String> {
    pub cudaleak_dump: u32,
    pub process: &'a Process,
    pub summary: &'a Summary,
    pub unnamed: bool,
    pub modules: &'a [Module],
    pub stacks: &'a [Stack<S>],
    pub events: &'a [Event<S>],
    pub floors: Option<&'a [StackCounts]>,
    pub finalizing: Option<&'a Finalizing<S>>,
    pub handles: &'a [Handle<S>],
    pub shim: Option<&'a ShimInfo>,
}

/// Writes a dump whose live records are made one at a time as they are written, so a writer
/// with millions of them never holds them all (the shim at exit). The bytes are exactly those
/// [`write`] writes for the same [`Dump`] (a test holds the two to it): the parts go through
/// serde, the live records are laid out here, field for field as `LiveRecord` derives them —
/// serde's per-field escaping was most of a million-record dump's writing time.
pub fn write_streamed<'r, S, L, W>(parts: &DumpParts<'_, S>, live: L, mut w: W) -> io::Result<()>
where
    S: Serialize,
    L: IntoIterator<Item = LiveRecord<&'r str>>,
    W: io::Write,
{
    let p = parts;
    let mut num = itoa::Buffer::new();
    w.write_all(b"{\"cudaleak_dump\":")?;
    w.write_all(num.format(p.cudaleak_dump).as_bytes())?;
    w.write_all(b",\"process\":")?;
    serde_json::to_writer(&mut w, p.process)?;
    w.write_all(b",\"summary\":")?;
    serde_json::to_writer(&mut w, p.summary)?;
    if p.unnamed {
        w.write_all(b",\"unnamed\":true")?;
    }
    if !p.modules.is_empty() {
        w.write_all(b",\"modules\":")?;
        serde_json::to_writer(&mut w, p.modules)?;
    }
    w.write_all(b",\"stacks\":")?;
    serde_json::to_writer(&mut w, p.stacks)?;
    w.write_all(b",\"live\":[")?;
    let mut rec = Vec::with_capacity(256);
    for (i, r) in live.into_iter().enumerate() {
        rec.clear();
        if i > 0 {
            rec.push(b',');
        }
        live_record(&mut rec, &r, &mut num)?;
        w.write_all(&rec)?;
    }
    w.write_all(b"],\"events\":")?;
    serde_json::to_writer(&mut w, p.events)?;
    if let Some(floors) = p.floors {
        w.write_all(b",\"floors\":")?;
        serde_json::to_writer(&mut w, floors)?;
    }
    if let Some(f) = p.finalizing {
        w.write_all(b",\"finalizing\":")?;
        serde_json::to_writer(&mut w, f)?;
    }
    if !p.handles.is_empty() {
        w.write_all(b",\"handles\":")?;
        serde_json::to_writer(&mut w, p.handles)?;
    }
    if let Some(shim) = p.shim {
        w.write_all(b",\"shim\":")?;
        serde_json::to_writer(&mut w, shim)?;
    }
    w.write_all(b"}\n")
}

/// One live record as serde_json writes a `LiveRecord` (compact, fields in declaration order,
/// `bytes_held` only when present).
fn live_record(out: &mut Vec<u8>, r: &LiveRecord<&str>, num: &mut itoa::Buffer) -> io::Result<()> {
    let mut hex = [0u8; 18];
    out.extend_from_slice(b"{\"address\":\"");
    out.extend_from_slice(hex_str(r.address.0, &mut hex).as_bytes());
    out.extend_from_slice(b"\",\"size\":");
    out.extend_from_slice(num.format(r.size).as_bytes());
    if let Some(h) = r.bytes_held {
        out.extend_from_slice(b",\"bytes_held\":");
        out.extend_from_slice(num.format(h).as_bytes());
    }
    out.extend_from_slice(b",\"api\":");
    // Function names need no escaping; anything else goes through serde_json's.
    if r.api
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        out.push(b'"');
        out.extend_from_slice(r.api.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, r.api)?;
    }
    out.extend_from_slice(b",\"kind\":\"");
    out.extend_from_slice(r.kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"device\":");
    match r.device {
        Some(d) => out.extend_from_slice(num.format(d).as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"thread\":");
    out.extend_from_slice(num.format(r.thread).as_bytes());
    out.extend_from_slice(b",\"seq\":");
    out.extend_from_slice(num.format(r.seq).as_bytes());
    out.extend_from_slice(b",\"time_ms\":");
    out.extend_from_slice(num.format(r.time_ms).as_bytes());
    out.extend_from_slice(b",\"stack\":");
    out.extend_from_slice(num.format(r.stack).as_bytes());
    out.push(b'}');
    Ok(())
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

/// "are only 3 stacks", "is only 1 stack", "are no stacks": the end of a dangling-index message.
fn only_stacks(n: usize) -> String {
    match n {
        0 => "are no stacks".into(),
        1 => "is only 1 stack".into(),
        n => format!("are only {n} stacks"),
    }
}

impl<S> Dump<S> {
    /// The dump of a process that made no CUDA call the shim records (a shell, a compiler, a
    /// tool the program started): nothing counted, no event, recording not stopped.
    pub fn is_quiet(&self) -> bool {
        self.summary.is_empty()
            && self.events.is_empty()
            && self.process.recording_stopped.is_none()
    }

    /// Checks what the types cannot: every stack index points at a stack, the summary agrees
    /// with the live list.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.stacks.len();
        for (i, r) in self.live.iter().enumerate() {
            if r.stack >= n {
                return Err(format!(
                    "live[{i}].stack is {} but there {}",
                    r.stack,
                    only_stacks(n)
                ));
            }
        }
        for (i, e) in self.events.iter().enumerate() {
            if e.stack >= n {
                return Err(format!(
                    "events[{i}].stack is {} but there {}",
                    e.stack,
                    only_stacks(n)
                ));
            }
            if let Some(a) = e.alloc_stack {
                if a >= n {
                    return Err(format!(
                        "events[{i}].alloc_stack is {a} but there {}",
                        only_stacks(n)
                    ));
                }
            }
        }
        let floors = self.floors.iter().flatten().map(|c| ("floors", c.stack));
        let fin = self.finalizing.iter().flat_map(|f| {
            f.held
                .iter()
                .map(|c| ("finalizing.held", c.stack))
                .chain(f.floors.iter().map(|c| ("finalizing.floors", c.stack)))
        });
        for (field, stack) in floors.chain(fin) {
            if stack >= n {
                return Err(format!(
                    "{field} names stack {stack} but there {}",
                    only_stacks(n)
                ));
            }
        }
        for (i, h) in self.handles.iter().enumerate() {
            if h.stack >= n {
                return Err(format!(
                    "handles[{i}].stack is {} but there {}",
                    h.stack,
                    only_stacks(n)
                ));
            }
        }
        let s = &self.summary;
        if s.live_allocations != self.live.len() as u64 {
            return Err(format!(
                "summary.live_allocations is {} but \"live\" holds {} records",
                s.live_allocations,
                self.live.len()
            ));
        }
        let bytes = self
            .live
            .iter()
            .try_fold(0u64, |acc, r| acc.checked_add(r.held()))
            .ok_or("the sizes in \"live\" overflow 64 bits")?;
        if s.live_bytes != bytes {
            return Err(format!(
                "summary.live_bytes is {} but the records in \"live\" hold {bytes}",
                s.live_bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_dump_is_byte_for_byte_the_written_one() {
        for mut dump in [
            sample(),
            unnamed_sample(),
            from_slice(include_bytes!("../tests/v1-sample.json")).unwrap(),
        ] {
            // The fields written only sometimes, and a name that needs escaping.
            dump.live.push(LiveRecord {
                bytes_held: Some(0),
                device: None,
                api: "odd \"api\"\n".into(),
                kind: Kind::Reserved,
                ..dump.live[0].clone()
            });
            dump.handles.push(Handle {
                library: "cublas".into(),
                create: "cublasCreate_v2".into(),
                handle: Hex(0x5000),
                thread: 7,
                device: Some(0),
                seq: 3,
                time_ms: 1,
                stack: 0,
                blocks: vec![dump.live[0].seq],
                destroyed: false,
            });
            for shim in [None, Some(ShimInfo::default())] {
                dump.shim = shim;
                let mut whole = Vec::new();
                write(&dump, &mut whole).unwrap();
                let parts = DumpParts {
                    cudaleak_dump: dump.cudaleak_dump,
                    process: &dump.process,
                    summary: &dump.summary,
                    unnamed: dump.unnamed,
                    modules: &dump.modules,
                    stacks: &dump.stacks,
                    events: &dump.events,
                    floors: dump.floors.as_deref(),
                    finalizing: dump.finalizing.as_ref(),
                    handles: &dump.handles,
                    shim: dump.shim.as_ref(),
                };
                let live = dump.live.iter().map(|r| LiveRecord {
                    address: r.address,
                    size: r.size,
                    bytes_held: r.bytes_held,
                    api: r.api.as_str(),
                    kind: r.kind,
                    device: r.device,
                    thread: r.thread,
                    seq: r.seq,
                    time_ms: r.time_ms,
                    stack: r.stack,
                });
                let mut streamed = Vec::new();
                write_streamed(&parts, live, &mut streamed).unwrap();
                assert!(!dump.live.is_empty());
                assert_eq!(String::from_utf8(streamed), String::from_utf8(whole));
            }
        }
    }

    fn sample() -> Dump {
        Dump {
            cudaleak_dump: SCHEMA_VERSION,
            process: Process {
                pid: 4711,
                ppid: 1,
                exe: "/bin/app".into(),
                argv: vec!["app".into(), "--n".into()],
                rank: Some(3),
                start_unix_ms: 1_700_000_000_000,
                end_unix_ms: 1_700_000_000_250,
                end: End::Exit,
                signal: None,
                snapshot: None,
                forked_from: None,
                recording_stopped: None,
            },
            summary: Summary {
                allocations: 2,
                frees: 1,
                live_allocations: 1,
                live_bytes: 4096,
                peak_live_bytes: 8192,
                bytes_allocated: 8192,
                ..Summary::default()
            },
            unnamed: false,
            modules: Vec::new(),
            stacks: vec![Stack {
                frames: vec![Frame {
                    kind: None,
                    ip: Hex(0x55aa_0000_1234),
                    module: Some("/bin/app".into()),
                    offset: Some(Hex(0x1234)),
                    function: Some("process_data(float*)".into()),
                    file: Some("app.cu".into()),
                    line: Some(18),
                }],
                python: Vec::new(),
            }],
            live: vec![LiveRecord {
                address: Hex(0x7f00_0000_0000),
                size: 4096,
                bytes_held: None,
                api: "cudaMalloc".into(),
                kind: Kind::Device,
                device: Some(0),
                thread: 4711,
                seq: 1,
                time_ms: 12,
                stack: 0,
            }],
            events: vec![Event {
                kind: EventType::DoubleFree,
                api: "cudaFree".into(),
                address: Some(Hex(0x7f00_0000_1000)),
                size: None,
                error: Some(1),
                seq: 3,
                stack: 0,
                alloc_stack: Some(0),
                during_exit: false,
            }],
            floors: Some(vec![StackCounts {
                stack: 0,
                allocations: 0,
                bytes: 0,
            }]),
            finalizing: Some(Finalizing {
                unix_ms: 1_700_000_000_500,
                seq: 2,
                held: vec![Held {
                    stack: 0,
                    api: "cudaMalloc".into(),
                    allocations: 2,
                    bytes: 2048,
                }],
                floors: Vec::new(),
            }),
            handles: Vec::new(),
            shim: Some(ShimInfo {
                version: "0.1.0".into(),
                stack_walks: 3,
                stack_reuses: 1,
            }),
        }
    }

    /// What the shim writes since version 3: addresses, modules and unspliced Python runs.
    fn unnamed_sample() -> Dump {
        let mut d = sample();
        d.unnamed = true;
        d.modules = vec![Module {
            path: "/bin/app".into(),
            base: Hex(0x55aa_0000_0000),
            build_id: Some("8d3f0c2a".into()),
        }];
        let f = &mut d.stacks[0].frames[0];
        (f.function, f.file, f.line) = (None, None, None);
        d.stacks[0].python = vec![vec![Frame {
            kind: Some(FrameKind::Python),
            ip: Hex(0),
            module: None,
            offset: Some(Hex(0x1c)),
            function: Some("step".into()),
            file: Some("/work/train.py".into()),
            line: Some(8),
        }]];
        d.cudaleak_dump = version_for(&d.stacks, &d.modules, d.unnamed, false, false);
        d
    }

    #[test]
    fn an_unnamed_dump_is_version_3_and_round_trips() {
        let d = unnamed_sample();
        assert_eq!(d.cudaleak_dump, 3);
        let mut out = Vec::new();
        write(&d, &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains(r#""unnamed":true,"modules":[{"path":"/bin/app","base":"0x55aa00000000","build_id":"8d3f0c2a"}]"#),
            "{text}"
        );
        assert!(text.contains(r#""frames":[{"ip":"0x55aa00001234","module":"/bin/app","offset":"0x1234","function":null,"file":null,"line":null}],"python":[[{"kind":"python""#), "{text}");
        assert_eq!(from_slice(&out).unwrap(), d);
        // A named dump writes neither field.
        let mut named = Vec::new();
        write(&sample(), &mut named).unwrap();
        let named = String::from_utf8(named).unwrap();
        assert!(
            !named.contains("unnamed") && !named.contains("modules") && !named.contains("python")
        );
    }

    #[test]
    fn round_trip_preserves_every_field() {
        let d = sample();
        let mut out = Vec::new();
        write(&d, &mut out).unwrap();
        assert_eq!(from_slice(&out).unwrap(), d);
    }

    #[test]
    fn the_compact_reader_reads_the_same_dump_with_names_shared() {
        let mut d = sample();
        d.stacks.push(d.stacks[0].clone());
        d.live.push(LiveRecord {
            stack: 1,
            ..d.live[0].clone()
        });
        d.summary.live_allocations = 2;
        d.summary.live_bytes = 8192;
        let mut bytes = Vec::new();
        write(&d, &mut bytes).unwrap();
        let c = from_reader(&bytes[..], || Some(&bytes[..])).unwrap();
        let mut again = Vec::new();
        write(&c, &mut again).unwrap();
        assert_eq!(again, bytes);
        let f = |s: usize| c.stacks[s].frames[0].function.clone().unwrap();
        assert_eq!(f(0), "process_data(float*)");
        // One allocation per distinct name, however many frames carry it.
        assert!(std::ptr::eq(f(0).as_ptr(), f(1).as_ptr()));
        assert!(std::ptr::eq(c.live[0].api.as_ptr(), c.live[1].api.as_ptr()));
        // Errors are the same as from_slice's.
        let cut = &bytes[..bytes.len() / 2];
        assert!(matches!(
            from_reader(cut, || Some(cut)),
            Err(ReadError::Syntax { line: 1, .. })
        ));
    }

    #[test]
    fn empty_binary_and_non_object_inputs_say_what_they_are() {
        assert!(matches!(from_slice(b""), Err(ReadError::Empty)));
        assert!(matches!(from_slice(b" \n\t "), Err(ReadError::Empty)));
        let e = from_slice(b"\x7fELF\x02\x01").unwrap_err();
        assert!(matches!(
            e,
            ReadError::NotJson {
                line: 1,
                column: 1,
                byte: 0x7f
            }
        ));
        assert_eq!(
            e.to_string(),
            "1:1: not JSON (it starts with byte 0x7f); a cudaleak dump is a JSON object"
        );
        let e = from_slice(b"\n  # notes").unwrap_err();
        assert_eq!(
            e.to_string(),
            "2:3: not JSON (it starts with byte 0x23, '#'); a cudaleak dump is a JSON object"
        );
        assert_eq!(
            from_slice(b"[1,2]").unwrap_err().to_string(),
            "not a cudaleak dump: the file holds an array, and a cudaleak dump is a JSON object"
        );
        assert!(matches!(
            from_slice(b"2\n"),
            Err(ReadError::NotAnObject("a number"))
        ));
        // An object keeps the reader's own errors.
        assert!(matches!(from_slice(b"{}"), Err(ReadError::Version(None))));
        assert!(matches!(
            from_slice(b"{\"cudaleak_dump\""),
            Err(ReadError::Syntax { .. })
        ));
    }

    #[test]
    fn hex_is_a_string_with_0x_prefix() {
        let mut buf = [0u8; 18];
        assert_eq!(hex_str(0, &mut buf), "0x0");
        assert_eq!(hex_str(u64::MAX, &mut buf), "0xffffffffffffffff");
        assert_eq!(serde_json::to_string(&Hex(0xabc)).unwrap(), "\"0xabc\"");
        assert!(serde_json::from_str::<Hex>("\"abc\"").is_err());
        assert!(serde_json::from_str::<Hex>("\"0x\"").is_err());
        assert!(serde_json::from_str::<Hex>("\"0x1ffffffffffffffff\"").is_err());
        assert!(serde_json::from_str::<Hex>("4096").is_err());
    }

    #[test]
    fn checked_in_v1_dump_keeps_parsing() {
        let d = from_slice(include_bytes!("../tests/v1-sample.json")).unwrap();
        assert_eq!(d.live.len(), 2);
        assert_eq!(d.live[0].api, "cudaMalloc");
        assert_eq!(
            d.stacks[d.live[0].stack].frames[0].function.as_deref(),
            Some("process_data(float*)")
        );
    }

    #[test]
    fn python_frames_round_trip_and_make_the_dump_version_2() {
        let mut d = sample();
        assert_eq!(
            version_for(&d.stacks, &d.modules, d.unnamed, false, false),
            1,
            "no Python frame: version 1"
        );
        d.stacks[0].frames.push(Frame {
            kind: Some(FrameKind::Python),
            ip: Hex(0),
            module: None,
            offset: Some(Hex(0x1c)),
            function: Some("Trainer.train_step".into()),
            file: Some("/work/train.py".into()),
            line: Some(8),
        });
        d.cudaleak_dump = version_for(&d.stacks, &d.modules, d.unnamed, false, false);
        assert_eq!(d.cudaleak_dump, 2);
        let mut out = Vec::new();
        write(&d, &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains(r#"{"kind":"python","ip":"0x0","module":null,"offset":"0x1c","function":"Trainer.train_step","file":"/work/train.py","line":8}"#),
            "{text}"
        );
        assert!(
            !text.contains(r#"{"kind":null"#),
            "native frames carry no kind"
        );
        assert_eq!(from_slice(&out).unwrap(), d);
        // A version 1 dump is read as before.
        let mut v1 = sample();
        v1.cudaleak_dump = 1;
        let bytes = serde_json::to_vec(&v1).unwrap();
        assert_eq!(from_slice(&bytes).unwrap(), v1);
    }

    #[test]
    fn truncated_input_reports_line_and_column() {
        let mut out = Vec::new();
        write(&sample(), &mut out).unwrap();
        match from_slice(&out[..out.len() / 2]) {
            Err(ReadError::Syntax {
                line,
                column,
                message,
            }) => {
                assert_eq!(line, 1);
                assert!(column > 1);
                assert!(
                    message.starts_with("the file ends early, inside ")
                        && message.ends_with(": it is truncated"),
                    "{message}"
                );
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn other_versions_are_refused_by_name() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v["cudaleak_dump"] = (SCHEMA_VERSION + 1).into();
        let bytes = serde_json::to_vec(&v).unwrap();
        assert!(matches!(
            from_slice(&bytes),
            Err(ReadError::Version(Some(v))) if v == u64::from(SCHEMA_VERSION) + 1
        ));
        v.as_object_mut()
            .unwrap()
            .insert("new_field".into(), 1.into());
        let bytes = serde_json::to_vec(&v).unwrap();
        assert!(matches!(
            from_slice(&bytes),
            Err(ReadError::Version(Some(v))) if v == u64::from(SCHEMA_VERSION) + 1
        ));
        assert!(matches!(
            from_slice(b"{\"hello\": 1}"),
            Err(ReadError::Version(None))
        ));
    }

    #[test]
    fn a_version_field_of_another_type_is_named_not_called_missing() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v["cudaleak_dump"] = "1".into();
        let bytes = serde_json::to_vec(&v).unwrap();
        let e = from_slice(&bytes).unwrap_err();
        assert!(
            matches!(&e, ReadError::VersionNotANumber(j) if j == "\"1\""),
            "{e:?}"
        );
        assert!(e
            .to_string()
            .starts_with("the \"cudaleak_dump\" version field is \"1\", not a number"));
    }

    #[test]
    fn dangling_stack_index_is_inconsistent() {
        let mut d = sample();
        d.live[0].stack = 5;
        let bytes = serde_json::to_vec(&d).unwrap();
        match from_slice(&bytes) {
            Err(ReadError::Inconsistent(m)) => assert!(m.contains("live[0].stack"), "{m}"),
            other => panic!("expected inconsistency, got {other:?}"),
        }
    }

    #[test]
    fn a_dangling_index_message_counts_stacks_in_the_right_number() {
        assert_eq!(only_stacks(0), "are no stacks");
        assert_eq!(only_stacks(1), "is only 1 stack");
        assert_eq!(only_stacks(2), "are only 2 stacks");
        let mut d = sample();
        d.stacks.truncate(1);
        d.live[0].stack = 1;
        let bytes = serde_json::to_vec(&d).unwrap();
        match from_slice(&bytes) {
            Err(ReadError::Inconsistent(m)) => {
                assert_eq!(m, "live[0].stack is 1 but there is only 1 stack")
            }
            other => panic!("expected inconsistency, got {other:?}"),
        }
    }

    #[test]
    fn negative_size_is_a_syntax_error() {
        let text = serde_json::to_string(&sample())
            .unwrap()
            .replace("\"size\":4096", "\"size\":-4096");
        assert!(matches!(
            from_slice(text.as_bytes()),
            Err(ReadError::Syntax { .. })
        ));
    }

    #[test]
    fn summary_must_match_live_list() {
        let mut d = sample();
        d.summary.live_bytes = 1;
        let bytes = serde_json::to_vec(&d).unwrap();
        assert!(matches!(
            from_slice(&bytes),
            Err(ReadError::Inconsistent(_))
        ));
    }

    #[test]
    fn live_bytes_count_what_records_hold_not_their_ranges() {
        let mut d = sample();
        let mut reserved = d.live[0].clone();
        reserved.kind = Kind::Reserved;
        reserved.size = 1 << 30;
        reserved.bytes_held = Some(0);
        d.live.push(reserved);
        d.summary.live_allocations = 2;
        let bytes = serde_json::to_vec(&d).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains(r#""size":1073741824,"bytes_held":0,"#));
        assert_eq!(from_slice(&bytes).unwrap(), d, "live_bytes stays 4096");
        d.summary.live_bytes += 1 << 30;
        let bytes = serde_json::to_vec(&d).unwrap();
        assert!(matches!(
            from_slice(&bytes),
            Err(ReadError::Inconsistent(_))
        ));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(from_slice(text.as_bytes()).is_err());
    }
}
