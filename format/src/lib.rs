//! The cudaleak dump schema, versions 1 to 5: the one definition of what the shim writes and the
//! CLI reads. Field-by-field documentation lives in `docs/dump-format.md`; keep the two in step.
//!
//! This crate holds types, the version constant, reading (`read`: with positions in errors),
//! writing (`write`: whole, or streamed record by record), consistency checks, how a byte count is written (`size`: shared by the shim's exit line
//! and the CLI's reports), and which values `api` takes and which runtime call leads to which
//! driver call (`api`: the shim writes driver names, the reader relabels them once a stack has
//! names). It is also the one home of the other names both sides share: which frames are
//! internal (`frames`), the shim's file and exported function names (`exports`) and the
//! `CUDALEAK_*` variables (`env`). It must never depend on the shim or the CLI, and never panic
//! on input.
//!
//! There is one reader: a streaming parse, never the whole file in memory. The types are generic
//! in how names (function, file, module, API) are held: `String` by default, as the shim builds
//! and writes them; [`from_reader`] reads them as interned [`Name`]s, so a dump in memory is a
//! fraction of its size on disk however many frames repeat a name.
#![forbid(unsafe_code)]

use std::fmt;

pub mod api;
pub mod env;
pub mod exports;
pub mod frames;
mod name;
mod read;
mod size;
mod write;
pub use name::{interning, Name};
pub use read::{from_reader, from_slice, read_file, ReadError};
pub use size::{human_bytes, human_bytes_exact, parse_size};
pub use write::{write, write_streamed, DumpParts};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The newest value of the top-level `cudaleak_dump` field: version 2 is version 1 plus the
/// optional `kind` of a frame (Python frames); version 3 adds the module table (`modules`), dumps
/// whose native frames are not named yet (`unnamed`), and the Python runs of such a dump's stacks
/// (`stacks[].python`), which the reader splices in once the native frames have names; version 4
/// adds each stack's floor since the previous snapshot (`floors`) and the moment the Python
/// interpreter began to shut down (`finalizing`); version 5 adds the library handles (cuBLAS,
/// cuDNN, cuFFT plans, …) still live, and the blocks each one owns (`handles`); version 6 adds
/// what the frameworks in a Python process (PyTorch, JAX, CuPy) said they hold (`frameworks`).
pub const SCHEMA_VERSION: u32 = 6;
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
    frameworks: bool,
) -> u32 {
    if frameworks {
        return 6;
    }
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
    /// Version 6: what the frameworks of a Python process said they hold, as the shim's Python
    /// bootstrap read them (`cudaleak run`); absent where nothing was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frameworks: Option<Frameworks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shim: Option<ShimInfo>,
}

/// What the frameworks of a Python process said they hold (version 6): their own counts, read
/// by the bootstrap `cudaleak run` puts on `PYTHONPATH`, and at the end the live blocks a
/// framework's own allocation record named (PyTorch's `_record_memory_history`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frameworks {
    /// One entry per framework, backend and device, in the order they were first read.
    pub counters: Vec<FrameworkCounter>,
    /// When the bootstrap stopped reading (the script's end, Python's `atexit`): the counters
    /// are then what the script held as it ended, before the interpreter's teardown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix_ms: Option<u64>,
    /// The framework's own record of the live blocks made since growth was seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<FrameworkRecord>,
}

/// One framework's count on one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkCounter {
    /// `torch`, `jax` or `cupy`.
    pub framework: String,
    /// The allocator behind the count: `native` or `cudaMallocAsync` (PyTorch), `bfc` or
    /// `platform` (JAX), `pool` (CuPy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub device: i32,
    /// The bytes its live objects hold at the last read: PyTorch's
    /// `allocated_bytes.all.current`, JAX's `bytes_in_use`, CuPy's pool `used_bytes()`.
    pub bytes: u64,
    /// The fewest bytes read since the previous snapshot (since the first read, for the
    /// first): what the framework kept through the interval.
    pub floor_bytes: u64,
    /// Its live blocks at the last read (PyTorch's `allocation.all.current`), where it counts
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
    /// The blocks at the read that gave `floor_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_blocks: Option<u64>,
    /// PyTorch's `active_bytes.all.current` (allocated, plus freed blocks a stream still uses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_bytes: Option<u64>,
    /// What the framework took from the driver for its pool (PyTorch's `reserved_bytes`, JAX's
    /// `bytes_limit` of a preallocated pool, CuPy's `total_bytes()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// Reads since the previous snapshot.
    pub samples: u64,
    /// Milliseconds since the epoch of the last read.
    pub unix_ms: u64,
}

/// The live blocks a framework's own allocation record named, grouped by the Python frames
/// that allocated them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkRecord {
    pub framework: String,
    /// When the record was turned on: blocks made before it carry no frames and are not listed.
    pub since_unix_ms: u64,
    /// When the live blocks were read.
    pub unix_ms: u64,
    /// Largest first.
    #[serde(default)]
    pub groups: Vec<FrameworkGroup>,
    /// Why the record could not be turned on or read, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl FrameworkRecord {
    /// Records as the shim's `cudaleak_framework_end` takes them: a JSON array.
    pub fn list_from_json(text: &str) -> Result<Vec<FrameworkRecord>, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }
}

/// Live blocks made at one Python stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkGroup {
    pub blocks: u64,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    /// Python frames (`kind: python`, `ip` 0), innermost first.
    pub frames: Vec<Frame>,
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
    /// The last dump of a process that `cudaleak attach` recorded for a while and left running
    /// (`ShimInfo::attach` says when recording began).
    Detach,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            End::Exit => "exit",
            End::Signal => "signal",
            End::Snapshot => "snapshot",
            End::Detach => "detach",
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
    /// Present when the shim was loaded into the running process by `cudaleak attach`, not
    /// preloaded: recording began then, and blocks allocated before are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachInfo>,
}

/// How `cudaleak attach` came between a running program and the driver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachInfo {
    /// The route: `pointers` (the driver's functions replaced where the program keeps pointers
    /// to them: import slots and the runtimes' driver tables).
    pub route: String,
    /// When recording began, ms since 1970.
    pub unix_ms: u64,
    /// Import (GOT) slots replaced: driver, runtime and `dlsym` imports of the loaded modules.
    pub import_slots: u64,
    /// Other pointers to the driver's functions replaced in the modules' data (the runtimes'
    /// driver tables).
    pub table_slots: u64,
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
    #[serde(deserialize_with = "read::exact_vec")]
    #[serde(bound(deserialize = "S: Deserialize<'de>"))]
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

impl<S> Dump<S> {
    /// The dump of a process that made no CUDA call the shim records (a shell, a compiler, a
    /// tool the program started): nothing counted, no event, recording not stopped. Never the
    /// process `cudaleak attach` came to ([`Dump::attached_to`]).
    pub fn is_quiet(&self) -> bool {
        self.summary.is_empty()
            && self.events.is_empty()
            && self.process.recording_stopped.is_none()
            && !self.attached_to()
    }

    /// The process `cudaleak attach` loaded the shim into (not a child it forked later): it
    /// made CUDA calls before (attach needs the driver loaded), and its counts begin at attach,
    /// so a program whose pools were already warm counts nothing, and that is its verdict, not
    /// a process to leave out.
    pub fn attached_to(&self) -> bool {
        self.shim.as_ref().is_some_and(|s| s.attach.is_some()) && self.process.forked_from.is_none()
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

/// "are only 3 stacks", "is only 1 stack", "are no stacks": the end of a dangling-index message.
fn only_stacks(n: usize) -> String {
    match n {
        0 => "are no stacks".into(),
        1 => "is only 1 stack".into(),
        n => format!("are only {n} stacks"),
    }
}

#[cfg(test)]
mod tests;
