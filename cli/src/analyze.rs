//! Pure analysis: dumps plus a configuration in, findings out. Grouping of live blocks by stack,
//! hiding of internal frames, the split of live blocks into leaks and blocks held by caches,
//! teardown errors set apart from real ones, suppressions and size filters, the gate's verdict,
//! and `diff`.
//!
//! No I/O and no formatting of output here (reporters do that), and nothing may panic on a
//! dump that `cudaleak-format` accepted. Findings own their strings so a dump can be dropped
//! as soon as it is analysed: memory stays bounded by the largest single dump.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::load::schema as format;
use format::{EventType, Kind, Name};

use crate::caches::{self, CacheRule};
use crate::callsite::Callsite;
use crate::suppressions::Rule;

/// One frame as reporters show it. Its names are shared with the dump and every other view
/// of the same name (cut to [`MAX_NAME_BYTES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameView {
    pub function: Option<Name>,
    pub file: Option<Name>,
    pub line: Option<u32>,
    /// Full path of the module, as in the dump.
    pub module: Option<Name>,
    pub offset: Option<u64>,
    pub ip: u64,
    /// A Python function's frame (the dump's `kind: python`).
    pub python: bool,
    /// Inside the CUDA runtime/driver, the shim or start-up code (shown only with
    /// `--show-internal`).
    pub internal: bool,
}

impl FrameView {
    /// A frame of the program's own code: a source line outside the CUDA libraries and the
    /// installed Python packages and standard library.
    pub fn is_own(&self) -> bool {
        !self.internal
            && self.line.is_some()
            && self.file.as_deref().is_some_and(|file| {
                !(file.contains("/site-packages/")
                    || file.contains("/dist-packages/")
                    || file.starts_with('<')
                    || is_python_stdlib(file))
            })
    }

    /// The module's file name (`leak_error_path` for `/home/dev/leak_error_path`).
    pub fn module_name(&self) -> Option<&str> {
        self.module.as_deref().map(basename)
    }

    /// The module's file name; for a Python frame, its script's (`train.py`).
    pub fn module_or_script(&self) -> Option<&str> {
        match (self.python, &self.file) {
            (true, Some(file)) => Some(basename(file)),
            _ => self.module_name(),
        }
    }
}

pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A stack as shown: user frames (or all frames with `--show-internal`), cut to `--frames`.
/// Made once per stack; every group, callsite and event from that stack shares its frames.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StackView {
    pub frames: Arc<[FrameView]>,
    /// Internal frames left out.
    pub hidden: usize,
    /// Visible frames left out by `--frames`.
    pub omitted: usize,
    /// Runs of frames folded into one line each (without `--native`: native runs in stacks with
    /// Python frames, the toolkit's header templates in others), in stack order.
    pub folded: Vec<Folded>,
    /// The frame a one-line listing names (index into `frames`): the first, or for memory a
    /// cache or library handle holds, the program's own call into it.
    pub entry: usize,
}

impl StackView {
    /// The frame a one-line listing names ([`StackView::entry`]).
    pub fn where_frame(&self) -> Option<&FrameView> {
        self.frames.get(self.entry).or_else(|| self.frames.first())
    }
}

/// Native frames (and Python frames of installed packages) next to the program's Python frames,
/// shown as one line: `… 18 frames in libtorch_cpu.so, torch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The index in `frames` of the frame the run stood before (`frames.len()`: after the last).
    pub at: usize,
    pub frames: usize,
    /// The run's modules (file names) and Python packages, innermost first, each once.
    pub modules: Vec<String>,
}

/// `/usr/lib/python3.12/…`, `/opt/venv/lib/python3.12/…` (site-packages are told apart before).
fn is_python_stdlib(file: &str) -> bool {
    file.contains("/lib/")
        && file.split('/').any(|part| {
            part.strip_prefix("python3.")
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// The package of a Python frame in installed code — `torch` for
/// `…/site-packages/torch/nn/modules/linear.py`, the file name for the standard library or a
/// frozen module — or `None` for the program's own scripts.
fn python_library(f: &format::Frame) -> Option<&str> {
    let file = f.file.as_deref()?;
    for dir in ["/site-packages/", "/dist-packages/"] {
        if let Some((_, rest)) = file.split_once(dir) {
            return Some(rest.split('/').next().unwrap_or(rest));
        }
    }
    let stdlib = file.contains("/lib/python3.") || file.starts_with("<frozen ");
    stdlib.then(|| basename(file))
}

/// The header library of the CUDA toolkit a frame's code comes from — `thrust`, `cub` or
/// `libcu++` (CCCL's template code, instantiated in the program's own binary) — by its source
/// file where the dump names one, else by its function's namespace.
fn header_library(f: &format::Frame) -> Option<&'static str> {
    const BY_DIR: [(&str, &str); 4] = [
        ("/thrust/", "thrust"),
        ("/cub/", "cub"),
        ("/cuda/std/", "libcu++"),
        ("/libcudacxx/", "libcu++"),
    ];
    if let Some(file) = f.file.as_deref() {
        let in_include = file.contains("/include/") || file.contains("/cccl/");
        return BY_DIR
            .iter()
            .find(|(dir, _)| in_include && file.contains(dir))
            .map(|&(_, lib)| lib);
    }
    let name = f.function.as_deref()?;
    // Demangled names may start with a return type: `void thrust::…` (a space before any
    // template or parameter list).
    let head = name.find(['(', '<']).unwrap_or(name.len());
    let name = name[..head]
        .find(' ')
        .map_or(name, |space| &name[space + 1..]);
    [
        ("thrust::", "thrust"),
        ("cub::", "cub"),
        ("cuda::std::", "libcu++"),
    ]
    .iter()
    .find(|(ns, _)| name.starts_with(ns))
    .map(|&(_, lib)| lib)
}

/// In a stack without Python frames, folds each run of the toolkit's header-library frames
/// (thrust, CUB, libcu++: nine frames of templates above a `thrust::device_vector` the program
/// made) into one line, when a frame of the program's own is left to show first.
fn fold_header_templates(all: &[format::Frame], frames: &[usize]) -> (Vec<usize>, Vec<Folded>) {
    let lib = |i: usize| header_library(&all[i]);
    if frames.iter().all(|&i| lib(i).is_some()) || !frames.iter().any(|&i| lib(i).is_some()) {
        return (frames.to_vec(), Vec::new());
    }
    let (mut kept, mut folded): (Vec<usize>, Vec<Folded>) = (Vec::new(), Vec::new());
    let mut run: Option<Folded> = None;
    for &i in frames {
        let Some(name) = lib(i) else {
            folded.extend(run.take());
            kept.push(i);
            continue;
        };
        let r = run.get_or_insert_with(|| Folded {
            at: kept.len(),
            frames: 0,
            modules: Vec::new(),
        });
        r.frames += 1;
        if !r.modules.iter().any(|m| m == name) {
            r.modules.push(name.to_string());
        }
    }
    folded.extend(run);
    (kept, folded)
}

/// Folds the runs of native frames of `frames` (indices into `all`) when any is a Python frame —
/// and with them the Python frames of installed packages and the standard library, when a
/// Python frame of the program's own is left: the frames kept, and the folded runs.
fn fold_native(all: &[format::Frame], frames: &[usize]) -> (Vec<usize>, Vec<Folded>) {
    let python = |i: &usize| all[*i].is_python();
    let own = |i: &usize| python(i) && python_library(&all[*i]).is_none();
    if !frames.iter().any(python) {
        return fold_header_templates(all, frames);
    }
    let keep_libraries = !frames.iter().any(own);
    let (mut kept, mut folded): (Vec<usize>, Vec<Folded>) = (Vec::new(), Vec::new());
    let mut run: Option<Folded> = None;
    for &i in frames {
        let f = &all[i];
        if own(&i) || (keep_libraries && f.is_python()) {
            folded.extend(run.take());
            kept.push(i);
            continue;
        }
        let r = run.get_or_insert_with(|| Folded {
            at: kept.len(),
            frames: 0,
            modules: Vec::new(),
        });
        r.frames += 1;
        let module = if f.is_python() {
            python_library(f)
        } else {
            f.module.as_deref().map(basename)
        };
        if let Some(m) = module {
            if !r.modules.iter().any(|x| x == m) {
                r.modules.push(cut(m));
            }
        }
    }
    folded.extend(run);
    (kept, folded)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub groups: u64,
    pub allocations: u64,
    pub bytes: u64,
}

impl Counts {
    pub fn add(&mut self, other: Counts) {
        self.groups += other.groups;
        self.allocations += other.allocations;
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// The total of some groups.
pub fn sum_groups<'a>(groups: impl IntoIterator<Item = &'a LeakGroup>) -> Counts {
    let mut c = Counts::default();
    for g in groups {
        c.add(group_counts(g));
    }
    c
}

/// Live blocks allocated from one callsite with one API, kind and device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakGroup {
    pub api: String,
    pub kind: Kind,
    pub device: Option<i32>,
    /// The records' sizes: for `reserved` and `mapped`, the address range.
    pub bytes: u64,
    /// Bytes of memory the records keep allocated (`LiveRecord::held`): what totals add up, so
    /// memory reached through a reservation, a mapping and a physical allocation counts once.
    pub held: u64,
    pub allocations: u64,
    pub stack: StackView,
    /// The callsite's identity across processes and dumps: API plus the frames a user sees.
    pub callsite: Callsite,
    /// The cache that holds these blocks (an index into [`Findings::caches`]); `None` for a leak.
    pub held_by: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedGroup {
    pub callsite: Callsite,
    pub api: String,
    pub count: u64,
    /// Sum of the requested sizes that are known.
    pub bytes: u64,
    /// Distinct return codes, ascending.
    pub errors: Vec<i64>,
    pub stack: StackView,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFreeGroup {
    /// Where the free was called.
    pub callsite: Callsite,
    pub kind: EventType,
    pub api: String,
    pub count: u64,
    /// The first address freed this way.
    pub address: Option<u64>,
    pub stack: StackView,
    /// Where the block was allocated (double frees whose allocation the shim saw).
    pub alloc_stack: Option<StackView>,
}

/// Failed allocations and frees that failed because the CUDA runtime or driver was shutting
/// down: notes, not errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownGroup {
    pub callsite: Callsite,
    /// `FailedAllocation`, `DoubleFree` or `InvalidFree`, as the shim recorded the call.
    pub kind: EventType,
    pub api: String,
    pub count: u64,
    /// Distinct return codes, ascending.
    pub errors: Vec<i64>,
    /// Calls made after the program had begun to exit.
    pub during_exit: u64,
    pub stack: StackView,
}

/// Whether a failed call failed because CUDA was shutting down: error 4
/// (cudaErrorCudartUnloading / CUDA_ERROR_DEINITIALIZED) always; 3 (cudaErrorInitializationError
/// / CUDA_ERROR_NOT_INITIALIZED) and 201 (cudaErrorDeviceUninitialized /
/// CUDA_ERROR_INVALID_CONTEXT) only when the call was made after the program had begun to exit.
pub fn is_teardown(e: &format::Event) -> bool {
    match e.error {
        Some(4) => true,
        Some(3) | Some(201) => e.during_exit,
        _ => false,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    /// Live blocks by API (the dump lists only what is live at the end).
    pub by_api: Vec<(String, Counts)>,
    /// Live blocks by the module of their first user frame.
    pub by_module: Vec<(String, Counts)>,
    /// Callsites with the most live bytes, before filters.
    pub top_callsites: Vec<LeakGroup>,
}

/// How many callsites the stats list.
pub const STATS_TOP: usize = 10;

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessFindings {
    pub source: PathBuf,
    pub process: format::Process,
    pub summary: format::Summary,
    /// Leak groups left after filters, largest first, cut to `--top`.
    pub leaks: Vec<LeakGroup>,
    /// Everything left after filters (not cut by `--top`).
    pub leaked: Counts,
    /// Per suppression rule, in file order.
    pub suppressed: Vec<Counts>,
    pub below_min_bytes: Counts,
    pub failed: Vec<FailedGroup>,
    pub bad_frees: Vec<BadFreeGroup>,
    /// Live managed-memory groups (before filters): a performance risk, whether leaked or not.
    pub managed: Vec<LeakGroup>,
    /// Groups held by a cache or library handle, largest first, cut to `--top`.
    pub cached: Vec<LeakGroup>,
    /// Everything held by caches (not cut by `--top`).
    pub cached_total: Counts,
    /// Per cache rule, parallel to [`Config::caches`].
    pub cached_per_rule: Vec<Counts>,
    /// Double and invalid frees that were not teardown.
    pub double_frees: u64,
    pub invalid_frees: u64,
    /// Failed calls that failed because CUDA was shutting down, in order of first occurrence.
    pub teardown: Vec<TeardownGroup>,
    pub teardown_failed_allocations: u64,
    pub teardown_bad_frees: u64,
    pub stats: Stats,
    /// Pools that kept taking memory until the dump (see [`pools_still_growing`]).
    pub pools_growing: Vec<PoolGrowth>,
    /// What the script held when the Python interpreter began to shut down, for dumps that
    /// say when (schema 4): information, not a verdict.
    pub script_end: Option<ScriptEnd>,
}

/// What a Python program still held when its interpreter began to shut down: what the script
/// ended with, apart from what teardown freed afterwards (a list of tensors kept every step is
/// here, whatever the exit dump shows).
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptEnd {
    /// Milliseconds from the process's start to that moment.
    pub after_ms: u64,
    /// Everything held then (caches and library handles included).
    pub held: Counts,
    /// The [`SCRIPT_END_TOP`] callsites that held the most bytes and the
    /// [`SCRIPT_END_NUMEROUS`] that held the most blocks, largest first.
    pub top: Vec<CallsiteLive>,
}

/// Callsites a report names under "When the script ended": by bytes, and by blocks.
pub const SCRIPT_END_TOP: usize = 3;
pub const SCRIPT_END_NUMEROUS: usize = 2;

/// A pool (a cache rule with a `grows` note) whose blocks live in the dump were taken all
/// through the run rather than at its start: what a program that keeps a tensor every step
/// leaves in one exit dump, where the tensors themselves are already gone or hidden in the
/// pool's segments. A hint, not a verdict: `run --growth` finds what keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolGrowth {
    /// Index into [`Findings::caches`].
    pub rule: usize,
    /// Bytes the pool's blocks hold, and those of them taken in the second half of the run.
    pub held: u64,
    pub second_half: u64,
    /// Of the run's ten tenths, in how many the pool took a block that is still there.
    pub tenths: u32,
}

/// The least a pool must show to count as still growing: blocks, tenths of the run that took
/// some, the share of its bytes taken in the second half, and a run long enough for the coarse
/// clock (a few ms) and a program's warm-up to be told apart from growth.
const GROWING_MIN_BLOCKS: u64 = 8;
const GROWING_MIN_TENTHS: u32 = 4;
const GROWING_MIN_SECOND_HALF: f64 = 0.25;
const GROWING_MIN_SPAN_MS: u64 = 2_000;

/// The run is measured from its oldest live block (for a framework, its model or first
/// segment) to the dump. A correct training loop fills its pool in its first steps (one or two
/// tenths: the H200 runs of PyTorch, BERT and torchrun); a loop that keeps a tensor every step
/// keeps adding segments (`torch_keep`: 6 tenths, 71 % in the second half).
fn pools_still_growing(
    dump: &format::Dump,
    stacks: &mut Stacks<'_>,
    caches: &[CacheRule],
    per_rule: &[Counts],
) -> Vec<PoolGrowth> {
    // Most dumps hold no pool with enough blocks: no second pass over their records.
    let eligible = caches
        .iter()
        .zip(per_rule)
        .any(|(c, n)| c.grows.is_some() && n.allocations >= GROWING_MIN_BLOCKS);
    if !eligible {
        return Vec::new();
    }
    let end = dump
        .process
        .end_unix_ms
        .saturating_sub(dump.process.start_unix_ms);
    let Some(start) = dump.live.iter().map(|r| r.time_ms).min() else {
        return Vec::new();
    };
    let span = end.saturating_sub(start);
    if span < GROWING_MIN_SPAN_MS {
        return Vec::new();
    }
    #[derive(Default, Clone, Copy)]
    struct Acc {
        blocks: u64,
        held: u64,
        second_half: u64,
        tenths: u16,
    }
    let mut per_rule = vec![Acc::default(); caches.len()];
    for r in &dump.live {
        let Some(rule) = stacks.get(r.stack, &r.api).held_by else {
            continue;
        };
        if caches.get(rule).is_none_or(|c| c.grows.is_none()) {
            continue;
        }
        let at = r.time_ms.saturating_sub(start).min(span);
        let a = &mut per_rule[rule];
        a.blocks += 1;
        a.held = a.held.saturating_add(r.held());
        if at * 2 > span {
            a.second_half = a.second_half.saturating_add(r.held());
        }
        a.tenths |= 1 << (at * 10 / span).min(9);
    }
    per_rule
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.blocks >= GROWING_MIN_BLOCKS
                && a.tenths.count_ones() >= GROWING_MIN_TENTHS
                && a.second_half as f64 >= a.held as f64 * GROWING_MIN_SECOND_HALF
        })
        .map(|(rule, a)| PoolGrowth {
            rule,
            held: a.held,
            second_half: a.second_half,
            tenths: a.tenths.count_ones(),
        })
        .collect()
}

impl ProcessFindings {
    /// Double and invalid frees that were not teardown; the summary counter also covers events
    /// the shim had to drop.
    pub fn bad_free_count(&self) -> u64 {
        self.summary
            .invalid_frees
            .saturating_sub(self.teardown_bad_frees)
            .max(self.double_frees + self.invalid_frees)
    }
    /// Failed allocations that were not teardown (the counter covers dropped events too).
    pub fn failed_allocation_count(&self) -> u64 {
        self.summary
            .failed_allocations
            .saturating_sub(self.teardown_failed_allocations)
    }
    pub fn leaks_not_shown(&self) -> u64 {
        self.leaked.groups.saturating_sub(self.leaks.len() as u64)
    }
    pub fn cached_not_shown(&self) -> u64 {
        self.cached_total
            .groups
            .saturating_sub(self.cached.len() as u64)
    }
    /// The process made no CUDA allocation and no failed call: nothing to report on it.
    pub fn is_quiet(&self) -> bool {
        self.summary.is_empty()
            && self.failed.is_empty()
            && self.bad_frees.is_empty()
            && self.teardown.is_empty()
            && self.process.recording_stopped.is_none()
    }
}

/// A process left out of the report because it made no CUDA allocation (`cudaleak run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuietProcess {
    pub pid: u32,
    pub exe: String,
    pub source: PathBuf,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub processes: u64,
    pub leaked: Counts,
    /// Distinct callsites across processes (a forked worker's callsite counts once).
    pub callsites: u64,
    pub suppressed: Counts,
    pub below_min_bytes: Counts,
    pub failed_allocations: u64,
    pub double_frees: u64,
    pub invalid_frees: u64,
    pub bad_frees: u64,
    pub managed: Counts,
    /// Live blocks held by caches and library handles.
    pub cached: Counts,
    /// Failed calls set apart as teardown.
    pub teardown: u64,
    /// Processes left out because they made no CUDA allocation.
    pub quiet_processes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Leaks remain after filters (whatever the gate does with them).
    pub leaks: bool,
    /// Leaks remain but are within `--max-leaked-bytes`.
    pub tolerated: bool,
    pub fails_on_leaks: bool,
    /// `--fail-on strict` and blocks held by caches are part of what fails the gate.
    pub fails_on_cached: bool,
    pub fails_on_errors: bool,
    /// 0, or the gate's exit code.
    pub exit_code: u8,
}

/// How a program that `cudaleak run` ran ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramStatus {
    Code(u8),
    Signal(i32),
}

impl ProgramStatus {
    /// The status a shell reports: the code, or 128 + the signal number.
    pub fn shell(self) -> u8 {
        match self {
            ProgramStatus::Code(c) => c,
            ProgramStatus::Signal(n) => (128 + n).clamp(0, 255) as u8,
        }
    }

    /// `exited with status 3`, `was killed by SIGTERM`.
    pub fn how(self) -> String {
        match self {
            ProgramStatus::Code(c) => format!("exited with status {c}"),
            ProgramStatus::Signal(n) => match signal_name(n) {
                Some(name) => format!("was killed by {name}"),
                None => format!("was killed by signal {n}"),
            },
        }
    }
}

/// The name of a standard Linux signal.
pub fn signal_name(n: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(n - 1)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
}

#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    /// Set by `cudaleak run` when the program failed: its status is then the command's, whatever
    /// the gate says.
    pub program: Option<ProgramStatus>,
    pub processes: Vec<ProcessFindings>,
    /// Leaks merged by callsite across processes, largest first, cut to `--top`.
    pub callsites: Vec<CallsiteTotal>,
    pub rules: Vec<Rule>,
    /// The cache rules in use (`cache:` lines, then the built-in ones); `held_by` indexes here.
    pub caches: Vec<CacheRule>,
    /// Blocks held per cache rule over all processes, parallel to `caches`.
    pub cached_per_rule: Vec<Counts>,
    /// Processes left out because they made no CUDA allocation, by pid.
    pub quiet: Vec<QuietProcess>,
    pub min_bytes: u64,
    pub gate: Gate,
    pub totals: Totals,
    pub verdict: Verdict,
}

impl Findings {
    /// What the command returns: a failed program's status (`run`), else the gate's.
    pub fn exit_status(&self) -> u8 {
        self.program
            .map_or(self.verdict.exit_code, ProgramStatus::shell)
    }
}

/// One callsite's leaks summed over every process that has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallsiteTotal {
    pub callsite: Callsite,
    pub api: String,
    pub stack: StackView,
    pub bytes: u64,
    pub allocations: u64,
    pub processes: u64,
}

/// Everything `analyze_process` needs besides the dump.
#[derive(Debug, Clone)]
pub struct Config {
    pub view: View,
    /// `leak:` suppressions.
    pub rules: Vec<Rule>,
    /// Cache rules, in the order they are tried ([`caches::rules`]).
    pub caches: Vec<CacheRule>,
    pub min_bytes: u64,
    pub gate: Gate,
    /// Leave processes that made no CUDA allocation out of the report (`cudaleak run`).
    pub hide_quiet: bool,
}

/// Exit status when leaks (or bad frees) remain after filters: LeakSanitizer's convention.
pub const DEFAULT_EXIT_CODE: u8 = 23;

/// How findings are computed and shown; shared by `report`, `run` and (partly) `diff`.
/// The default is the plain view: every leak and frame shown (caches one line each in text and
/// Markdown), no colour, paths as the dump has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub top: Option<usize>,
    pub frames: Option<usize>,
    pub stats: bool,
    pub show_internal: bool,
    /// Show every frame of a stack with Python frames (by default each run of native frames, and
    /// of Python frames of installed packages, next to the program's Python frames is folded
    /// into one line).
    pub native: bool,
    /// List each cache's callsites in text and Markdown (`--show-cached`), not one line per cache.
    pub show_cached: bool,
    pub color: bool,
    /// Absolute source paths under this directory are written relative to it in SARIF
    /// (`uriBaseId` SRCROOT); `run`/`report`/`diff` set it to the current directory.
    pub source_root: Option<String>,
}

/// The gate: what fails and with which status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub exit_code: u8,
    pub fail_on_leaks: bool,
    pub fail_on_errors: bool,
    /// Blocks held by caches and library handles count as leaked (`--fail-on strict`).
    pub count_cached: bool,
    /// Applies to what is counted as leaked (with `count_cached`, cached blocks too).
    pub max_leaked_bytes: u64,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            exit_code: DEFAULT_EXIT_CODE,
            fail_on_leaks: true,
            fail_on_errors: true,
            count_cached: false,
            max_leaked_bytes: 0,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Internal frames

/// Modules of the CUDA runtime and driver, the NVIDIA helpers they load, and the shim.
fn is_internal_module(module: &str) -> bool {
    let m = basename(module);
    [
        "libcudart",
        "libcuda.",
        "libcudaleak",
        "libnvidia-",
        "libcudadebugger",
    ]
    .iter()
    .any(|p| m.starts_with(p))
}

/// Functions of a statically linked cudart (and the shim's own Rust code, should it show).
fn is_internal_function(f: &str) -> bool {
    [
        "cudart::",
        "__cudart",
        "libcudart_static",
        "cudaleak::",
        "cudaleak_shim::",
    ]
    .iter()
    .any(|p| f.starts_with(p))
}

/// C start-up and thread entry code below `main` or a thread's start routine.
fn is_startup_function(f: &str) -> bool {
    matches!(
        f,
        "_start"
            | "__libc_start_main"
            | "__libc_start_main_impl"
            | "__libc_start_call_main"
            | "start_thread"
            | "clone"
            | "clone3"
            | "__clone"
            | "__clone3"
    )
}

/// The function name without template arguments or parameters: `cudaMalloc<float>(float**, …)`
/// → `cudaMalloc`.
fn base_name(f: &str) -> &str {
    let end = f.find(['(', '<']).unwrap_or(f.len());
    f[..end].trim()
}

/// A CUDA allocation/free API entry point (the header already names the API; in a binary with a
/// static cudart, or for the `cudaMalloc<T>` template of cuda_runtime.h, it is a frame in the
/// user's own executable).
fn is_api_entry(f: &str, api: &str) -> bool {
    let b = base_name(f);
    if b.is_empty() {
        return false;
    }
    let strip = |s: &'static str| b.strip_suffix(s);
    let core = strip("_v2").or_else(|| strip("_ptsz")).unwrap_or(b);
    b == api
        || core == api
        || api.strip_suffix("_v2") == Some(core)
        || b.starts_with("cuMem")
        || b.starts_with("cuArray")
        || matches!(
            core,
            "cudaMalloc"
                | "cudaMallocManaged"
                | "cudaMallocHost"
                | "cudaHostAlloc"
                | "cudaMallocPitch"
                | "cudaMalloc3D"
                | "cudaMallocArray"
                | "cudaMalloc3DArray"
                | "cudaMallocMipmappedArray"
                | "cudaMallocAsync"
                | "cudaMallocFromPoolAsync"
                | "cudaFree"
                | "cudaFreeHost"
                | "cudaFreeArray"
                | "cudaFreeMipmappedArray"
                | "cudaFreeAsync"
        )
}

fn frame_is_internal(f: &format::Frame) -> bool {
    f.module.as_deref().is_some_and(is_internal_module)
        || f.function
            .as_deref()
            .is_some_and(|n| is_internal_function(n) || is_startup_function(n))
}

/// A frame of the C library that its symbol table does not name: start-up and thread entry
/// code on distributions whose libc carries no local symbols (Ubuntu's `__libc_start_call_main`).
fn is_unnamed_libc(f: &format::Frame) -> bool {
    f.function.is_none()
        && f.module
            .as_deref()
            .is_some_and(|m| basename(m).starts_with("libc.so"))
}

/// Indices of the frames a user sees: internal frames anywhere are dropped, and so are API
/// entry frames at the innermost end, everything below `main`, and unnamed C library frames at
/// the outermost end. If nothing is left, every frame is shown.
pub fn visible_frames(frames: &[format::Frame], api: &str, show_internal: bool) -> Vec<usize> {
    if show_internal {
        return (0..frames.len()).collect();
    }
    let mut out: Vec<usize> = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        if frame_is_internal(f) {
            continue;
        }
        let leading = out.is_empty();
        if leading && !f.is_python() && f.function.as_deref().is_some_and(|n| is_api_entry(n, api))
        {
            continue;
        }
        out.push(i);
        if f.function.as_deref() == Some("main") && !f.is_python() {
            break; // what calls main is the C start-up code
        }
    }
    while out.len() > 1 && out.last().is_some_and(|&i| is_unnamed_libc(&frames[i])) {
        out.pop();
    }
    if out.is_empty() {
        return (0..frames.len()).collect();
    }
    out
}

/// Longest program-supplied name kept (function, file, module, exe, each argv word): a longer
/// one is cut to this many bytes plus `…[N more bytes]` in every format, so a hostile 100 MB
/// name is not copied into every group, callsite and line of output.
pub const MAX_NAME_BYTES: usize = 64 << 10;

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

/// The process, with its names cut to [`MAX_NAME_BYTES`] and at most 4096 argv words.
pub fn process_view(p: &format::Process) -> format::Process {
    let mut argv: Vec<String> = p.argv.iter().take(4096).map(|a| cut(a)).collect();
    if p.argv.len() > 4096 {
        argv.push(format!("…[{} more arguments]", p.argv.len() - 4096));
    }
    format::Process {
        exe: cut(&p.exe),
        argv,
        signal: p.signal.as_deref().map(cut),
        recording_stopped: p.recording_stopped.as_deref().map(cut),
        pid: p.pid,
        ppid: p.ppid,
        rank: p.rank,
        start_unix_ms: p.start_unix_ms,
        end_unix_ms: p.end_unix_ms,
        end: p.end,
        snapshot: p.snapshot,
        forked_from: p.forked_from,
    }
}

/// `cut` for a name from the dump: itself (shared) when short enough.
fn cut_name(s: &Name) -> Name {
    if s.len() <= MAX_NAME_BYTES {
        s.clone()
    } else {
        cut(s).into()
    }
}

fn frame_view(f: &format::Frame, internal: bool) -> FrameView {
    FrameView {
        internal,
        function: f.function.as_ref().map(cut_name),
        file: f.file.as_ref().map(cut_name),
        line: f.line,
        module: f.module.as_ref().map(cut_name),
        offset: f.offset.map(|h| h.0),
        ip: f.ip.0,
        python: f.is_python(),
    }
}

/// A stack prepared once per (stack index, API): its callsite, what is shown, and the cache
/// that holds what it allocated. The callsite is kept once, for the API it was prepared for, and
/// shared by the groups made from it.
struct Prepared {
    callsite: Callsite,
    view: StackView,
    held_by: Option<usize>,
}

impl Prepared {
    /// The callsite of `api` at this stack.
    fn callsite(&self, api: &str) -> Callsite {
        self.callsite.with_api(api)
    }
}

fn prepare(stack: &format::Stack, api: &str, view: &View, caches: &[CacheRule]) -> Prepared {
    // The allocating end: past the runtime's, driver's and API entry frames, whatever is shown.
    let start = leading_entries(&stack.frames, api, false);
    let held_by = caches::classify(caches, &stack.frames, start);
    let idx = visible_frames(&stack.frames, api, view.show_internal);
    // With --show-internal every frame is shown; remember which ones a user would have seen.
    // The callsite is of those alone, whatever is shown.
    let user_idx = if view.show_internal {
        visible_frames(&stack.frames, api, false)
    } else {
        idx.clone()
    };
    let mut user = vec![!view.show_internal; stack.frames.len()];
    if view.show_internal {
        for &i in &user_idx {
            user[i] = true;
        }
    }
    let callsite = Callsite::new(api, &stack.frames, &user_idx);
    let (idx, folded) = if view.native {
        (idx, Vec::new())
    } else {
        fold_native(&stack.frames, &idx)
    };
    let limit = view.frames.unwrap_or(usize::MAX);
    let shown: Vec<FrameView> = idx
        .iter()
        .take(limit)
        .map(|&i| frame_view(&stack.frames[i], !user[i]))
        .collect();
    let folded_frames: usize = folded.iter().map(|r| r.frames).sum();
    // A run after the last frame `--frames` shows is cut with the frames after it.
    let cut_off = shown.len() < idx.len();
    let (folded, cut_runs): (Vec<Folded>, Vec<Folded>) = folded
        .into_iter()
        .partition(|r| r.at < shown.len() || (r.at == shown.len() && !cut_off));
    let cut_frames: usize = cut_runs.iter().map(|r| r.frames).sum();
    // Memory a library holds is named at the program's call into the library (its frames stay
    // in the stack): `handle_request at svc.cpp:9`, not `libcublas.so.13+0x5b45ee`.
    let entry = held_by
        .and_then(|_| shown.iter().position(FrameView::is_own))
        .unwrap_or(0);
    Prepared {
        callsite,
        view: StackView {
            omitted: idx.len() - shown.len() + cut_frames,
            hidden: stack.frames.len() - idx.len() - folded_frames,
            frames: shown.into(),
            folded,
            entry,
        },
        held_by,
    }
}

/// Caches `prepare` for one dump per (stack index, how many leading frames the API hides). The
/// API matters only through that count, so a dump with many distinct API names over one big
/// stack cannot multiply the work or the memory.
struct Stacks<'a> {
    dump: &'a format::Dump,
    view: &'a View,
    caches: &'a [CacheRule],
    cache: HashMap<(usize, usize), Prepared>,
}

/// How many frames at the innermost end `visible_frames` drops as API entries for `api`
/// (counting the internal frames among them).
fn leading_entries(frames: &[format::Frame], api: &str, show_internal: bool) -> usize {
    if show_internal {
        return 0;
    }
    frames
        .iter()
        .take_while(|f| {
            frame_is_internal(f) || f.function.as_deref().is_some_and(|n| is_api_entry(n, api))
        })
        .count()
}

impl<'a> Stacks<'a> {
    fn new(dump: &'a format::Dump, view: &'a View, caches: &'a [CacheRule]) -> Self {
        Stacks {
            dump,
            view,
            caches,
            cache: HashMap::new(),
        }
    }
    fn get(&mut self, stack: usize, api: &str) -> &Prepared {
        let (dump, view, caches) = (self.dump, self.view, self.caches);
        // Indices were validated by cudaleak-format; an empty stack stands in regardless.
        static EMPTY: format::Stack = format::Stack {
            frames: Vec::new(),
            python: Vec::new(),
        };
        let s = dump.stacks.get(stack).unwrap_or(&EMPTY);
        // What is shown and which cache holds the blocks depend on the API only through this
        // count (with --show-internal nothing shown depends on it at all).
        let lead = leading_entries(&s.frames, api, false);
        self.cache
            .entry((stack, lead))
            .or_insert_with(|| prepare(s, api, view, caches))
    }
}

/// The first rule (in file order) matching any frame of the stack: function, file or module
/// (the module's full path or its file name).
fn suppressing_rule(rules: &[Rule], stack: &format::Stack) -> Option<usize> {
    rules.iter().position(|r| {
        stack.frames.iter().any(|f| {
            f.function.as_deref().is_some_and(|n| r.matches(n))
                || f.file.as_deref().is_some_and(|n| r.matches(n))
                || f.module
                    .as_deref()
                    .is_some_and(|m| r.matches(m) || r.matches(basename(m)))
        })
    })
}

/// Sort order of leak groups: most bytes, then most blocks, then callsite for stability.
fn by_size(a: &LeakGroup, b: &LeakGroup) -> std::cmp::Ordering {
    b.held
        .cmp(&a.held)
        .then(b.bytes.cmp(&a.bytes))
        .then(b.allocations.cmp(&a.allocations))
        .then_with(|| a.callsite.cmp(&b.callsite))
        .then(a.kind.cmp(&b.kind))
        .then(a.device.cmp(&b.device))
}

struct GroupAcc {
    group: LeakGroup,
    stacks: Vec<usize>,
}

/// Groups live records by API, kind, device, visible stack and the cache that holds them.
fn group_live<'a>(dump: &'a format::Dump, stacks: &mut Stacks<'a>) -> Vec<GroupAcc> {
    type Key = (Callsite, Option<usize>, Kind, Option<i32>);
    let mut index: HashMap<Key, usize> = HashMap::new();
    // Records of one stack index, API, kind and device share a group: found without hashing the
    // callsite (a whole stack's worth of frames) for every record.
    let mut fast: HashMap<(usize, &'a str, Kind, Option<i32>), usize> = HashMap::new();
    let mut groups: Vec<GroupAcc> = Vec::new();
    for r in &dump.live {
        if let Some(&slot) = fast.get(&(r.stack, r.api.as_str(), r.kind, r.device)) {
            let acc = &mut groups[slot];
            acc.group.bytes = acc.group.bytes.saturating_add(r.size);
            acc.group.held = acc.group.held.saturating_add(r.held());
            acc.group.allocations += 1;
            continue;
        }
        let p = stacks.get(r.stack, &r.api);
        let callsite = p.callsite(&r.api);
        let slot = *index
            .entry((callsite.clone(), p.held_by, r.kind, r.device))
            .or_insert_with(|| {
                groups.push(GroupAcc {
                    group: LeakGroup {
                        api: cut(&r.api),
                        kind: r.kind,
                        device: r.device,
                        bytes: 0,
                        held: 0,
                        allocations: 0,
                        stack: p.view.clone(),
                        callsite,
                        held_by: p.held_by,
                    },
                    stacks: Vec::new(),
                });
                groups.len() - 1
            });
        fast.insert((r.stack, r.api.as_str(), r.kind, r.device), slot);
        let acc = &mut groups[slot];
        acc.group.bytes = acc.group.bytes.saturating_add(r.size);
        acc.group.held = acc.group.held.saturating_add(r.held());
        acc.group.allocations += 1;
        if !acc.stacks.contains(&r.stack) && acc.stacks.len() < 64 {
            acc.stacks.push(r.stack);
        }
    }
    groups
}

/// Counts add memory held, never address ranges: a leaked reservation adds no bytes.
fn group_counts(g: &LeakGroup) -> Counts {
    Counts {
        groups: 1,
        allocations: g.allocations,
        bytes: g.held,
    }
}

fn tally(map: &mut BTreeMap<String, Counts>, key: &str, g: &LeakGroup) {
    let c = map.entry(key.to_string()).or_default();
    c.add(Counts {
        groups: 0,
        ..group_counts(g)
    });
}

fn sorted_tally(map: BTreeMap<String, Counts>) -> Vec<(String, Counts)> {
    let mut v: Vec<_> = map.into_iter().collect();
    v.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Analyses one dump.
pub fn analyze_process(dump: &format::Dump, source: &Path, cfg: &Config) -> ProcessFindings {
    let mut stacks = Stacks::new(dump, &cfg.view, &cfg.caches);
    let mut groups = group_live(dump, &mut stacks);
    groups.sort_by(|a, b| by_size(&a.group, &b.group));

    // Stats and managed memory look at every live group, before filters.
    let mut by_api = BTreeMap::new();
    let mut by_module = BTreeMap::new();
    for acc in &groups {
        let g = &acc.group;
        tally(&mut by_api, &g.api, g);
        let module = g
            .stack
            .frames
            .first()
            .and_then(FrameView::module_or_script)
            .unwrap_or("(unknown module)");
        tally(&mut by_module, module, g);
    }
    let stats = Stats {
        by_api: sorted_tally(by_api),
        by_module: sorted_tally(by_module),
        top_callsites: groups
            .iter()
            .take(STATS_TOP)
            .map(|a| a.group.clone())
            .collect(),
    };
    let managed: Vec<LeakGroup> = groups
        .iter()
        .filter(|a| a.group.kind == Kind::Managed)
        .map(|a| a.group.clone())
        .collect();

    let mut suppressed = vec![Counts::default(); cfg.rules.len()];
    let mut below_min_bytes = Counts::default();
    let mut kept: Vec<LeakGroup> = Vec::new();
    let mut cached: Vec<LeakGroup> = Vec::new();
    let mut cached_per_rule = vec![Counts::default(); cfg.caches.len()];
    for acc in groups {
        // Held by a cache: never a leak, so neither suppressions nor --min-bytes apply.
        if let Some(c) = acc.group.held_by {
            if let Some(n) = cached_per_rule.get_mut(c) {
                n.add(group_counts(&acc.group));
            }
            cached.push(acc.group);
            continue;
        }
        let rule = acc
            .stacks
            .iter()
            .filter_map(|&s| dump.stacks.get(s))
            .find_map(|s| suppressing_rule(&cfg.rules, s));
        if let Some(r) = rule {
            suppressed[r].add(group_counts(&acc.group));
        } else if acc.group.bytes < cfg.min_bytes {
            below_min_bytes.add(group_counts(&acc.group));
        } else {
            kept.push(acc.group);
        }
    }
    let leaked = sum_groups(&kept);
    let cached_total = sum_groups(&cached);

    let (failed, bad_frees, teardown) = group_events(dump, &mut stacks);
    let pools_growing = pools_still_growing(dump, &mut stacks, &cfg.caches, &cached_per_rule);
    let script_end = script_end(dump, cfg);
    let count = |t: EventType| {
        dump.events
            .iter()
            .filter(|e| e.kind == t && !is_teardown(e))
            .count() as u64
    };
    let teardown_count = |bad: bool| {
        dump.events
            .iter()
            .filter(|e| is_teardown(e) && (e.kind != EventType::FailedAllocation) == bad)
            .count() as u64
    };

    ProcessFindings {
        source: source.to_path_buf(),
        process: process_view(&dump.process),
        summary: dump.summary.clone(),
        leaks: kept,
        leaked,
        suppressed,
        below_min_bytes,
        failed,
        bad_frees,
        managed,
        cached,
        cached_total,
        cached_per_rule,
        double_frees: count(EventType::DoubleFree),
        invalid_frees: count(EventType::InvalidFree),
        teardown,
        teardown_failed_allocations: teardown_count(false),
        teardown_bad_frees: teardown_count(true),
        stats,
        pools_growing,
        script_end,
    }
}

/// What the script held when Python began to shut down (`finalizing.held`).
fn script_end(dump: &format::Dump, cfg: &Config) -> Option<ScriptEnd> {
    let f = dump.finalizing.as_ref()?;
    let held = held_at_finalizing(dump, &cfg.view, &cfg.rules, &cfg.caches)?;
    let total = held.iter().fold(Counts::default(), |mut a, c| {
        a.add(c.live);
        a
    });
    // The largest, and the most numerous (a list that keeps a small tensor every step holds
    // few bytes in many blocks).
    let mut order: Vec<usize> = (0..held.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((held[i].live.allocations, held[i].live.bytes)));
    let numerous: Vec<usize> = order.iter().copied().take(SCRIPT_END_NUMEROUS).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((held[i].live.bytes, held[i].live.allocations)));
    let mut pick: Vec<usize> = order.iter().copied().take(SCRIPT_END_TOP).collect();
    for i in numerous {
        if !pick.contains(&i) {
            pick.push(i);
        }
    }
    pick.sort_by_key(|&i| std::cmp::Reverse((held[i].live.bytes, held[i].live.allocations)));
    let mut slots: Vec<Option<CallsiteLive>> = held.into_iter().map(Some).collect();
    Some(ScriptEnd {
        after_ms: f.unix_ms.saturating_sub(dump.process.start_unix_ms),
        held: total,
        top: pick.iter().filter_map(|&i| slots[i].take()).collect(),
    })
}

/// Adds `code` to a sorted list of at most 16 distinct codes.
fn add_code(codes: &mut Vec<i64>, code: Option<i64>) {
    if let Some(code) = code {
        if let Err(at) = codes.binary_search(&code) {
            if codes.len() < 16 {
                codes.insert(at, code);
            }
        }
    }
}

/// Groups failed allocations by (API, stack), bad frees by (type, API, free stack, alloc
/// stack) and teardown failures by (type, API, stack), in order of first occurrence.
fn group_events<'a>(
    dump: &'a format::Dump,
    stacks: &mut Stacks<'a>,
) -> (Vec<FailedGroup>, Vec<BadFreeGroup>, Vec<TeardownGroup>) {
    let mut failed: Vec<FailedGroup> = Vec::new();
    let mut failed_index: HashMap<Callsite, usize> = HashMap::new();
    let mut bad: Vec<BadFreeGroup> = Vec::new();
    let mut bad_index: HashMap<(EventType, Callsite, Option<Callsite>), usize> = HashMap::new();
    let mut teardown: Vec<TeardownGroup> = Vec::new();
    let mut teardown_index: HashMap<(EventType, Callsite), usize> = HashMap::new();
    for e in &dump.events {
        let p = stacks.get(e.stack, &e.api);
        let (key, view) = (p.callsite(&e.api), p.view.clone());
        if is_teardown(e) {
            let slot = *teardown_index
                .entry((e.kind, key.clone()))
                .or_insert_with(|| {
                    teardown.push(TeardownGroup {
                        callsite: key,
                        kind: e.kind,
                        api: cut(&e.api),
                        count: 0,
                        errors: Vec::new(),
                        during_exit: 0,
                        stack: view,
                    });
                    teardown.len() - 1
                });
            let g = &mut teardown[slot];
            g.count += 1;
            g.during_exit += u64::from(e.during_exit);
            add_code(&mut g.errors, e.error);
            continue;
        }
        match e.kind {
            EventType::FailedAllocation => {
                let slot = *failed_index.entry(key.clone()).or_insert_with(|| {
                    failed.push(FailedGroup {
                        callsite: key,
                        api: cut(&e.api),
                        count: 0,
                        bytes: 0,
                        errors: Vec::new(),
                        stack: view,
                    });
                    failed.len() - 1
                });
                let g = &mut failed[slot];
                g.count += 1;
                g.bytes = g.bytes.saturating_add(e.size.unwrap_or(0));
                add_code(&mut g.errors, e.error);
            }
            EventType::DoubleFree | EventType::InvalidFree => {
                let alloc = e.alloc_stack.map(|s| {
                    let p = stacks.get(s, &e.api);
                    (p.callsite(&e.api), p.view.clone())
                });
                let full_key = (e.kind, key.clone(), alloc.as_ref().map(|a| a.0.clone()));
                let slot = *bad_index.entry(full_key).or_insert_with(|| {
                    bad.push(BadFreeGroup {
                        callsite: key,
                        kind: e.kind,
                        api: cut(&e.api),
                        count: 0,
                        address: e.address.map(|a| a.0),
                        stack: view,
                        alloc_stack: alloc.map(|a| a.1),
                    });
                    bad.len() - 1
                });
                bad[slot].count += 1;
            }
        }
    }
    (failed, bad, teardown)
}

/// Sums leak groups by callsite over all processes.
fn merge_callsites(processes: &[ProcessFindings]) -> Vec<CallsiteTotal> {
    let mut index: HashMap<&Callsite, (usize, usize)> = HashMap::new();
    let mut out: Vec<CallsiteTotal> = Vec::new();
    for (pi, p) in processes.iter().enumerate() {
        for g in &p.leaks {
            let slot = index.entry(&g.callsite).or_insert_with(|| {
                out.push(CallsiteTotal {
                    callsite: g.callsite.clone(),
                    api: g.api.clone(),
                    stack: g.stack.clone(),
                    bytes: 0,
                    allocations: 0,
                    processes: 0,
                });
                (out.len() - 1, usize::MAX)
            });
            let c = &mut out[slot.0];
            c.bytes = c.bytes.saturating_add(g.bytes);
            c.allocations += g.allocations;
            if slot.1 != pi {
                slot.1 = pi;
                c.processes += 1;
            }
        }
    }
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.allocations.cmp(&a.allocations))
            .then(b.processes.cmp(&a.processes))
    });
    out
}

/// Combines per-process findings (sorted by pid) and decides the gate.
pub fn finish(mut processes: Vec<ProcessFindings>, cfg: &Config) -> Findings {
    processes.sort_by(|a, b| {
        a.process
            .pid
            .cmp(&b.process.pid)
            .then_with(|| a.source.cmp(&b.source))
    });
    let mut t = Totals::default();
    let mut quiet = Vec::new();
    if cfg.hide_quiet {
        processes.retain(|p| {
            if !p.is_quiet() {
                return true;
            }
            quiet.push(QuietProcess {
                pid: p.process.pid,
                exe: p.process.exe.clone(),
                source: p.source.clone(),
            });
            false
        });
    }
    t.processes = processes.len() as u64;
    t.quiet_processes = quiet.len() as u64;
    let mut callsites = merge_callsites(&processes);
    t.callsites = callsites.len() as u64;
    let top = cfg.view.top.unwrap_or(usize::MAX);
    callsites.truncate(top);
    for p in &mut processes {
        p.leaks.truncate(top);
        p.cached.truncate(top);
    }
    let mut cached_per_rule = vec![Counts::default(); cfg.caches.len()];
    for p in &processes {
        t.leaked.add(p.leaked);
        for c in &p.suppressed {
            t.suppressed.add(*c);
        }
        t.below_min_bytes.add(p.below_min_bytes);
        t.failed_allocations += p.failed_allocation_count();
        t.double_frees += p.double_frees;
        t.invalid_frees += p.invalid_frees;
        t.bad_frees += p.bad_free_count();
        t.managed.add(sum_groups(&p.managed));
        t.cached.add(p.cached_total);
        t.teardown += p.teardown.iter().map(|g| g.count).sum::<u64>();
        for (all, c) in cached_per_rule.iter_mut().zip(&p.cached_per_rule) {
            all.add(*c);
        }
    }

    let leaks = t.leaked.allocations > 0;
    // What the gate counts as leaked: leaks, and with --fail-on strict what caches hold.
    let count_cached = cfg.gate.count_cached && t.cached.allocations > 0;
    let counted_bytes = if count_cached {
        t.leaked.bytes.saturating_add(t.cached.bytes)
    } else {
        t.leaked.bytes
    };
    let counted = leaks || count_cached;
    // A tolerance is of bytes: with none, a leak that holds no memory (a reservation) still fails.
    let tolerated =
        counted && cfg.gate.max_leaked_bytes > 0 && counted_bytes <= cfg.gate.max_leaked_bytes;
    let fails_on_leaks = cfg.gate.fail_on_leaks && counted && !tolerated;
    let fails_on_cached = fails_on_leaks && count_cached;
    let fails_on_errors = cfg.gate.fail_on_errors && t.bad_frees > 0;
    let exit_code = if fails_on_leaks || fails_on_errors {
        cfg.gate.exit_code
    } else {
        0
    };
    Findings {
        program: None,
        processes,
        callsites,
        rules: cfg.rules.clone(),
        caches: cfg.caches.clone(),
        cached_per_rule,
        quiet,
        min_bytes: cfg.min_bytes,
        gate: cfg.gate,
        totals: t,
        verdict: Verdict {
            leaks,
            tolerated,
            fails_on_leaks,
            fails_on_cached,
            fails_on_errors,
            exit_code,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// diff

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    pub callsite: Callsite,
    pub api: String,
    pub stack: StackView,
    pub old: Counts,
    pub new: Counts,
}

impl DiffRow {
    pub fn delta_bytes(&self) -> i128 {
        i128::from(self.new.bytes) - i128::from(self.old.bytes)
    }
    pub fn delta_blocks(&self) -> i128 {
        i128::from(self.new.allocations) - i128::from(self.old.allocations)
    }
    /// 1 grew, 0 unchanged, -1 shrank (by bytes, then by blocks).
    pub fn trend(&self) -> i8 {
        match self.delta_bytes().signum() {
            0 => self.delta_blocks().signum() as i8,
            s => s as i8,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffSide {
    pub source: PathBuf,
    pub process: format::Process,
    pub live: Counts,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffFindings {
    pub old: DiffSide,
    pub new: DiffSide,
    /// Growing first (largest growth first), then unchanged, then shrinking; cut to `--top`.
    pub rows: Vec<DiffRow>,
    pub grew: u64,
    pub shrank: u64,
    pub unchanged: u64,
    pub rows_not_shown: u64,
}

fn side_counts(dump: &format::Dump) -> Counts {
    Counts {
        groups: 0,
        allocations: dump.live.len() as u64,
        bytes: dump.summary.live_bytes,
    }
}

/// One callsite's live blocks in one dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallsiteLive {
    /// Equal for the same code in any dump of any run.
    pub key: Callsite,
    pub api: String,
    pub stack: StackView,
    pub live: Counts,
    /// The least it held since the previous snapshot (the dump's `floors`; `live` where the dump
    /// has none): what it kept through the interval, not a block in flight at the dump's instant.
    pub floor: Counts,
    /// The cache rule (index into the `caches` passed) that holds what this callsite allocated.
    pub held_by: Option<usize>,
}

/// Live blocks of one dump summed per callsite (API plus visible frames, never addresses or
/// stack indices), in order of first appearance: what `diff` and `report --growth` compare.
/// Blocks whose stack matches a suppression rule are counted per rule instead.
pub fn live_by_callsite(
    dump: &format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
) -> (Vec<CallsiteLive>, Vec<Counts>) {
    let records = dump
        .live
        .iter()
        .map(|r| (r.stack, r.api.as_str(), 1, r.held()));
    by_callsite(
        dump,
        records,
        dump.floors.as_deref().unwrap_or(&[]),
        view,
        rules,
        caches,
    )
}

/// What each callsite held when the Python interpreter began to shut down (`finalizing.held`),
/// with its floor since the previous snapshot; `None` when the dump does not say.
pub fn held_at_finalizing(
    dump: &format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
) -> Option<Vec<CallsiteLive>> {
    let f = dump.finalizing.as_ref()?;
    let held = f
        .held
        .iter()
        .map(|h| (h.stack, h.api.as_str(), h.allocations, h.bytes));
    Some(by_callsite(dump, held, &f.floors, view, rules, caches).0)
}

/// Sums (stack, API, blocks, bytes) per callsite, with each stack's floor (where `floors` names
/// none, its floor is what it holds) taken off the callsite its stack went to first.
fn by_callsite<'d>(
    dump: &'d format::Dump,
    held: impl Iterator<Item = (usize, &'d str, u64, u64)>,
    floors: &[format::StackCounts],
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
) -> (Vec<CallsiteLive>, Vec<Counts>) {
    let mut out: Vec<CallsiteLive> = Vec::new();
    let mut suppressed = vec![Counts::default(); rules.len()];
    let mut index: HashMap<Callsite, usize> = HashMap::new();
    // Whether a stack index is suppressed, and by which rule: computed once per stack.
    let mut rule_of: HashMap<usize, Option<usize>> = HashMap::new();
    // Records of one stack index and API share a callsite: found without building its key.
    let mut fast: HashMap<(usize, &str), usize> = HashMap::new();
    // Per stack: the callsite it went to first, and what it holds in all.
    let mut by_stack: HashMap<usize, (usize, u64, u64)> = HashMap::new();
    let mut stacks = Stacks::new(dump, view, caches);
    for (stack, api, blocks, bytes) in held {
        if !rules.is_empty() {
            let rule = *rule_of.entry(stack).or_insert_with(|| {
                dump.stacks
                    .get(stack)
                    .and_then(|s| suppressing_rule(rules, s))
            });
            if let Some(i) = rule {
                suppressed[i].add(Counts {
                    groups: 0,
                    allocations: blocks,
                    bytes,
                });
                continue;
            }
        }
        let slot = match fast.get(&(stack, api)) {
            Some(&slot) => slot,
            None => {
                let p = stacks.get(stack, api);
                let key = p.callsite(api);
                let slot = match index.get(&key) {
                    Some(&i) => i,
                    None => {
                        out.push(CallsiteLive {
                            key: key.clone(),
                            api: cut(api),
                            stack: p.view.clone(),
                            live: Counts {
                                groups: 1,
                                ..Counts::default()
                            },
                            floor: Counts::default(),
                            held_by: p.held_by,
                        });
                        index.insert(key, out.len() - 1);
                        out.len() - 1
                    }
                };
                fast.insert((stack, api), slot);
                slot
            }
        };
        let c = &mut out[slot].live;
        c.allocations += blocks;
        c.bytes = c.bytes.saturating_add(bytes);
        let s = by_stack.entry(stack).or_insert((slot, 0, 0));
        s.1 += blocks;
        s.2 = s.2.saturating_add(bytes);
    }
    for c in &mut out {
        c.floor = Counts {
            groups: 0,
            ..c.live
        };
    }
    for f in floors {
        // A floor of a stack with nothing left (all freed since) or one suppressed: no row.
        let Some(&(slot, blocks, bytes)) = by_stack.get(&f.stack) else {
            continue;
        };
        let c = &mut out[slot].floor;
        c.allocations = c
            .allocations
            .saturating_sub(blocks.saturating_sub(f.allocations));
        c.bytes = c.bytes.saturating_sub(bytes.saturating_sub(f.bytes));
    }
    (out, suppressed)
}

/// Per-callsite live bytes in two dumps. Callsites are matched by API and visible frames, so
/// dumps of two runs (different addresses, different stack indices) compare too.
pub fn diff(
    old: &format::Dump,
    old_source: &Path,
    new: &format::Dump,
    new_source: &Path,
    view: &View,
) -> DiffFindings {
    diff_of(
        diff_input(old, old_source, view),
        diff_input(new, new_source, view),
        view,
    )
}

/// What `diff` needs of one dump: taken before the next dump is read, so a diff holds one dump
/// in memory at a time.
pub struct DiffInput {
    side: DiffSide,
    callsites: Vec<CallsiteLive>,
}

pub fn diff_input(dump: &format::Dump, source: &Path, view: &View) -> DiffInput {
    DiffInput {
        side: DiffSide {
            source: source.to_path_buf(),
            process: process_view(&dump.process),
            live: side_counts(dump),
        },
        callsites: live_by_callsite(dump, view, &[], &[]).0,
    }
}

/// `diff` of two dumps' inputs.
pub fn diff_of(old: DiffInput, new: DiffInput, view: &View) -> DiffFindings {
    let mut rows: Vec<DiffRow> = Vec::new();
    let mut index: HashMap<Callsite, usize> = HashMap::new();
    for (callsites, is_new) in [(old.callsites, false), (new.callsites, true)] {
        for c in callsites {
            let slot = *index.entry(c.key.clone()).or_insert_with(|| {
                rows.push(DiffRow {
                    callsite: c.key,
                    api: c.api,
                    stack: c.stack,
                    old: Counts::default(),
                    new: Counts::default(),
                });
                rows.len() - 1
            });
            let row = &mut rows[slot];
            if is_new {
                row.new = c.live;
            } else {
                row.old = c.live;
            }
        }
    }
    drop(index);
    rows.sort_by(|a, b| {
        b.trend()
            .cmp(&a.trend())
            .then(b.delta_bytes().abs().cmp(&a.delta_bytes().abs()))
            .then(b.delta_blocks().abs().cmp(&a.delta_blocks().abs()))
            .then(b.new.bytes.cmp(&a.new.bytes))
            .then_with(|| a.api.cmp(&b.api))
    });
    let count = |t: i8| rows.iter().filter(|r| r.trend() == t).count() as u64;
    let (grew, unchanged, shrank) = (count(1), count(0), count(-1));
    let total = rows.len();
    rows.truncate(view.top.unwrap_or(usize::MAX));
    DiffFindings {
        old: old.side,
        new: new.side,
        rows_not_shown: (total - rows.len()) as u64,
        rows,
        grew,
        shrank,
        unchanged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suppressions::Rule;
    use format::{Frame, Hex, LiveRecord, Stack};

    use crate::fixture;

    fn view() -> View {
        View::default()
    }

    fn cfg() -> Config {
        Config {
            view: view(),
            rules: Vec::new(),
            caches: caches::builtin().unwrap(),
            min_bytes: 0,
            gate: Gate::default(),
            hide_quiet: false,
        }
    }

    fn one(dump: &format::Dump, cfg: &Config) -> Findings {
        finish(vec![analyze_process(dump, Path::new("d.json"), cfg)], cfg)
    }

    fn functions(s: &StackView) -> Vec<&str> {
        s.frames
            .iter()
            .map(|f| f.function.as_deref().unwrap_or("?"))
            .collect()
    }

    fn frame(function: &str, module: &str) -> Frame {
        Frame {
            kind: None,
            ip: Hex(0x1000),
            module: Some(module.into()),
            offset: Some(Hex(0x10)),
            function: Some(function.into()),
            file: Some("app.cu".into()),
            line: Some(7),
        }
    }

    fn unnamed_libc() -> Frame {
        Frame {
            function: None,
            file: None,
            line: None,
            ..frame("", "/usr/lib/x86_64-linux-gnu/libc.so.6")
        }
    }

    #[test]
    fn nothing_below_main_and_no_unnamed_libc_entry_frames_are_shown() {
        // Ubuntu's libc names neither __libc_start_call_main nor start_thread.
        let frames = [
            frame("process_data(float*)", "/bin/app"),
            frame("main", "/bin/app"),
            unnamed_libc(),
            frame("__libc_start_main", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            frame("_start", "/bin/app"),
        ];
        assert_eq!(visible_frames(&frames, "cudaMalloc", false), [0, 1]);
        let thread = [
            frame("worker(void*)", "/bin/app"),
            unnamed_libc(),
            unnamed_libc(),
        ];
        assert_eq!(visible_frames(&thread, "cudaMalloc", false), [0]);
        assert_eq!(visible_frames(&thread, "cudaMalloc", true), [0, 1, 2]);
        // A stack of nothing but unnamed libc frames is still shown.
        assert_eq!(visible_frames(&[unnamed_libc()], "cudaMalloc", false), [0]);
    }

    #[test]
    fn thrust_template_frames_fold_so_the_program_s_frame_comes_first() {
        let inc = |f: &str, file: &str| Frame {
            file: Some(file.into()),
            ..frame(f, "/bin/app")
        };
        let frames = [
            inc(
                "thrust::cuda_cub::malloc<thrust::cuda_cub::tag>(…)",
                "/usr/local/cuda/include/thrust/system/cuda/detail/malloc_and_free.h",
            ),
            inc(
                "thrust::detail::vector_base<float, thrust::device_allocator<float> >::vector_base(unsigned long)",
                "/usr/local/cuda/targets/x86_64-linux/include/thrust/detail/vector_base.inl",
            ),
            // No source file: known by its namespace, past the return type.
            Frame {
                file: None,
                line: None,
                ..frame("void cub::DeviceReduce::Sum<float*>(…)", "/bin/app")
            },
            inc("make_scratch(int)", "svc.cu"),
            inc("main", "svc.cu"),
        ];
        let idx: Vec<usize> = (0..frames.len()).collect();
        let (kept, folded) = fold_native(&frames, &idx);
        assert_eq!(kept, [3, 4]);
        let unnamed_file = |f: &str| Frame {
            file: None,
            ..frame(f, "/bin/app")
        };
        assert_eq!(
            header_library(&unnamed_file(
                "thrust::detail::vector_base<float, thrust::device_allocator<float> >::vector_base(unsigned long)"
            )),
            Some("thrust")
        );
        assert_eq!(
            header_library(&unnamed_file("scale(thrust::device_vector<float>&, float)")),
            None
        );
        assert_eq!(
            folded,
            [Folded {
                at: 0,
                frames: 3,
                modules: vec!["thrust".into(), "cub".into()],
            }]
        );
        // All of it thrust's (the program's frames unnamed or cut): nothing is folded.
        assert_eq!(fold_native(&frames[..2], &[0, 1]), (vec![0, 1], Vec::new()));
        // A program's own function whose name only mentions thrust is not folded.
        let own = [inc("scale(thrust::device_vector<float>&)", "svc.cu")];
        assert_eq!(fold_native(&own, &[0]), (vec![0], Vec::new()));
    }

    fn record(size: u64, stack: usize, device: Option<i32>) -> LiveRecord {
        LiveRecord {
            address: Hex(0x7f00),
            size,
            bytes_held: None,
            api: "cudaMalloc".into(),
            kind: Kind::Device,
            device,
            thread: 1,
            seq: 1,
            time_ms: 0,
            stack,
        }
    }

    /// A dump whose `live` and `stacks` are given; the summary is made consistent.
    fn dump_of(stacks: Vec<Vec<Frame>>, live: Vec<LiveRecord>) -> format::Dump {
        let mut d = fixture("clean.json");
        d.summary.live_allocations = live.len() as u64;
        d.summary.live_bytes = live.iter().map(LiveRecord::held).sum();
        d.stacks = stacks
            .into_iter()
            .map(|frames| Stack {
                frames,
                python: Vec::new(),
            })
            .collect();
        d.live = live;
        d.validate().unwrap();
        d
    }

    #[test]
    fn loop_leak_is_one_group_of_ten_blocks() {
        let f = one(&fixture("leak_loop.json"), &cfg());
        let p = &f.processes[0];
        assert_eq!(p.leaks.len(), 1);
        let g = &p.leaks[0];
        assert_eq!((g.allocations, g.bytes), (10, 40960));
        assert_eq!(g.api, "cudaMalloc");
        assert_eq!(g.device, Some(0));
        assert_eq!(functions(&g.stack), ["loop_alloc(int)", "main"]);
        assert_eq!(g.stack.hidden, 5);
        assert_eq!(f.totals.callsites, 1);
        assert_eq!(f.verdict.exit_code, 23);
    }

    #[test]
    fn reserved_and_mapped_ranges_are_shown_but_memory_is_totalled_once() {
        let mib = 1 << 20;
        let rec = |size, held, api: &str, kind, stack| LiveRecord {
            bytes_held: held,
            api: api.into(),
            kind,
            ..record(size, stack, Some(0))
        };
        let d = dump_of(
            vec![
                vec![frame("reserve_pool()", "/bin/app")],
                vec![frame("create_chunk()", "/bin/app")],
                vec![frame("map_chunk()", "/bin/app")],
                vec![frame("map_released_chunk()", "/bin/app")],
            ],
            vec![
                rec(64 * mib, Some(0), "cuMemAddressReserve", Kind::Reserved, 0),
                rec(2 * mib, None, "cuMemCreate", Kind::Physical, 1),
                rec(2 * mib, Some(0), "cuMemMap", Kind::Mapped, 2),
                // Its physical allocation was released: the mapping holds the memory now.
                rec(4 * mib, Some(4 * mib), "cuMemMap", Kind::Mapped, 3),
            ],
        );
        let f = one(&d, &cfg());
        let p = &f.processes[0];
        let groups: Vec<(&str, u64, u64)> = p
            .leaks
            .iter()
            .map(|g| (g.kind.as_str(), g.bytes, g.held))
            .collect();
        assert_eq!(
            groups,
            [
                ("mapped", 4 * mib, 4 * mib),
                ("physical", 2 * mib, 2 * mib),
                ("reserved", 64 * mib, 0),
                ("mapped", 2 * mib, 0),
            ]
        );
        assert_eq!(f.totals.leaked.allocations, 4);
        assert_eq!(f.totals.leaked.bytes, 6 * mib);
        assert_eq!(f.totals.leaked.bytes, d.summary.live_bytes);

        // A leaked reservation alone holds no memory, and still fails the gate.
        let reservation_only = dump_of(
            vec![vec![frame("reserve_pool()", "/bin/app")]],
            vec![rec(
                64 * mib,
                Some(0),
                "cuMemAddressReserve",
                Kind::Reserved,
                0,
            )],
        );
        let f = one(&reservation_only, &cfg());
        assert_eq!(f.totals.leaked.bytes, 0);
        assert_eq!(f.verdict.exit_code, 23);
    }

    #[test]
    fn runtime_driver_and_startup_frames_are_hidden_unless_asked() {
        let mut c = cfg();
        c.view.show_internal = true;
        let f = one(&fixture("leak_loop.json"), &c);
        let s = &f.processes[0].leaks[0].stack;
        assert_eq!(s.frames.len(), 7);
        assert_eq!(s.hidden, 0);
        let internal: Vec<bool> = s.frames.iter().map(|f| f.internal).collect();
        assert_eq!(internal, [true, true, false, false, true, true, true]);
    }

    #[test]
    fn static_cudart_internals_and_api_entry_in_the_executable_are_hidden() {
        let f = one(&fixture("error_path.json"), &cfg());
        let p = &f.processes[0];
        assert_eq!(p.leaks.len(), 3);
        assert_eq!(
            functions(&p.leaks[0].stack),
            ["process_data(float*)", "main"]
        );
        assert_eq!(p.leaks[0].bytes, 1 << 20);
        // Largest first.
        assert!(p.leaks.windows(2).all(|w| w[0].bytes >= w[1].bytes));
        assert_eq!(p.leaks[2].api, "cudaMallocHost");
        assert_eq!(p.leaks[2].kind, Kind::Host);
        assert_eq!(f.totals.leaked.allocations, 12);
        assert_eq!(f.totals.leaked.bytes, (1 << 20) + 40960 + 20480);
        assert_eq!(f.totals.callsites, 3);
    }

    #[test]
    fn api_entry_is_hidden_only_at_the_innermost_end_and_user_wrappers_stay() {
        let exe = "/bin/app";
        let frames = vec![
            frame("cudaMalloc<float>(float**, unsigned long)", exe),
            frame("cudaMallocChecked(void**, unsigned long)", exe),
            frame("cudaFree", exe),
            frame("main", exe),
        ];
        let idx = visible_frames(&frames, "cuMemAlloc_v2", false);
        assert_eq!(idx, [1, 2, 3]);
    }

    #[test]
    fn a_stack_of_only_internal_frames_is_shown_whole() {
        let f = one(&fixture("unsymbolized.json"), &cfg());
        let g = f.processes[0]
            .leaks
            .iter()
            .find(|g| g.api == "cuMemAlloc_v2")
            .unwrap();
        assert_eq!(g.stack.frames.len(), 2);
        assert_eq!(g.stack.hidden, 0);
    }

    #[test]
    fn stacks_that_differ_only_in_hidden_frames_share_a_group_but_devices_split() {
        let user = |inner: &str| {
            vec![
                frame(inner, "/usr/lib/libcudart.so.12"),
                frame("work()", "/bin/app"),
                frame("main", "/bin/app"),
            ]
        };
        let d = dump_of(
            vec![user("cudart::a()"), user("cudart::b()")],
            vec![
                record(100, 0, Some(0)),
                record(200, 1, Some(0)),
                record(300, 1, Some(1)),
            ],
        );
        let f = one(&d, &cfg());
        let leaks = &f.processes[0].leaks;
        assert_eq!(leaks.len(), 2);
        assert_eq!(
            (leaks[0].device, leaks[0].bytes, leaks[0].allocations),
            (Some(0), 300, 2)
        );
        assert_eq!((leaks[1].device, leaks[1].bytes), (Some(1), 300));
        // Two groups, but one callsite.
        assert_eq!(f.totals.callsites, 1);
    }

    #[test]
    fn frames_limit_cuts_the_display_not_the_grouping() {
        let d = dump_of(
            vec![
                vec![frame("leaf()", "/bin/app"), frame("a()", "/bin/app")],
                vec![frame("leaf()", "/bin/app"), frame("b()", "/bin/app")],
            ],
            vec![record(10, 0, None), record(20, 1, None)],
        );
        let mut c = cfg();
        c.view.frames = Some(1);
        let f = one(&d, &c);
        let leaks = &f.processes[0].leaks;
        assert_eq!(leaks.len(), 2);
        assert_eq!(leaks[0].stack.frames.len(), 1);
        assert_eq!(leaks[0].stack.omitted, 1);
    }

    #[test]
    fn top_limits_groups_shown_but_not_totals() {
        let mut c = cfg();
        c.view.top = Some(1);
        let f = one(&fixture("error_path.json"), &c);
        let p = &f.processes[0];
        assert_eq!(p.leaks.len(), 1);
        assert_eq!(p.leaks_not_shown(), 2);
        assert_eq!(f.totals.leaked.allocations, 12);
        assert_eq!(f.totals.callsites, 3);
    }

    #[test]
    fn suppressions_match_function_file_or_module_and_count_per_rule() {
        let rule = |p: &str, line| Rule::new(p, Path::new("s.supp"), line);
        let mut c = cfg();
        c.rules = vec![
            rule("scratch_buffers", 1),
            rule("^leak_error_path$", 2), // the module's file name: matches every group left
            rule("never_matches", 3),
        ];
        let f = one(&fixture("error_path.json"), &c);
        let p = &f.processes[0];
        assert!(p.leaks.is_empty());
        assert_eq!(
            p.suppressed[0],
            Counts {
                groups: 1,
                allocations: 10,
                bytes: 40960
            }
        );
        assert_eq!(p.suppressed[1].groups, 2);
        assert_eq!(p.suppressed[1].allocations, 2);
        assert_eq!(p.suppressed[2], Counts::default());
        assert_eq!(f.verdict.exit_code, 0);

        c.rules = vec![rule("leak_error_path.cu", 1)];
        let f = one(&fixture("error_path.json"), &c);
        assert_eq!(f.totals.suppressed.allocations, 12);
        // Internal frames count for matching too (as in LSan): libcudart's own frames.
        c.rules = vec![rule("libcudart.so", 1)];
        let f = one(&fixture("leak_loop.json"), &c);
        assert_eq!(f.totals.suppressed.allocations, 10);
        assert_eq!(f.verdict.exit_code, 0);
    }

    #[test]
    fn min_bytes_drops_small_groups_and_counts_them() {
        let mut c = cfg();
        c.min_bytes = 40960;
        let f = one(&fixture("error_path.json"), &c);
        let p = &f.processes[0];
        assert_eq!(p.leaks.len(), 2);
        assert_eq!(
            p.below_min_bytes,
            Counts {
                groups: 1,
                allocations: 1,
                bytes: 20480
            }
        );
        assert_eq!(f.totals.callsites, 2);
    }

    #[test]
    fn gate_follows_fail_on_exit_code_and_tolerance() {
        let leaky = fixture("leak_loop.json");
        let bad_frees = fixture("double_free.json");
        let mut c = cfg();
        assert_eq!(one(&leaky, &c).verdict.exit_code, 23);
        assert_eq!(one(&bad_frees, &c).verdict.exit_code, 23);

        c.gate.fail_on_errors = false;
        assert_eq!(one(&bad_frees, &c).verdict.exit_code, 0);
        assert_eq!(one(&leaky, &c).verdict.exit_code, 23);

        c.gate = Gate {
            fail_on_leaks: false,
            ..Gate::default()
        };
        assert_eq!(one(&leaky, &c).verdict.exit_code, 0);
        assert_eq!(one(&bad_frees, &c).verdict.exit_code, 23);

        c.gate = Gate {
            exit_code: 7,
            ..Gate::default()
        };
        assert_eq!(one(&leaky, &c).verdict.exit_code, 7);
        c.gate.exit_code = 0;
        assert_eq!(one(&leaky, &c).verdict.exit_code, 0);

        c.gate = Gate {
            max_leaked_bytes: 40960,
            ..Gate::default()
        };
        let v = one(&leaky, &c).verdict;
        assert!(v.tolerated && !v.fails_on_leaks);
        assert_eq!(v.exit_code, 0);
        c.gate.max_leaked_bytes = 40959;
        assert_eq!(one(&leaky, &c).verdict.exit_code, 23);
    }

    #[test]
    fn failed_allocations_are_reported_but_do_not_fail_the_gate() {
        let f = one(&fixture("failed_alloc.json"), &cfg());
        let p = &f.processes[0];
        assert_eq!(p.failed.len(), 1);
        assert_eq!(p.failed[0].errors, [2]);
        assert_eq!(p.failed[0].bytes, 64 << 30);
        assert_eq!(
            functions(&p.failed[0].stack),
            ["allocate_everything()", "main"]
        );
        assert_eq!(f.totals.failed_allocations, 1);
        assert_eq!(f.verdict.exit_code, 0);
    }

    #[test]
    fn double_free_keeps_both_stacks_and_invalid_free_its_own() {
        let f = one(&fixture("double_free.json"), &cfg());
        let p = &f.processes[0];
        assert_eq!(p.bad_frees.len(), 2);
        let df = &p.bad_frees[0];
        assert_eq!(df.kind, EventType::DoubleFree);
        assert_eq!(df.address, Some(0x7f50_0000_0000));
        assert_eq!(functions(&df.stack), ["cleanup(float*)", "main"]);
        assert_eq!(
            functions(df.alloc_stack.as_ref().unwrap()),
            ["make_buffer()", "main"]
        );
        assert_eq!(p.bad_frees[1].kind, EventType::InvalidFree);
        assert!(p.bad_frees[1].alloc_stack.is_none());
        assert_eq!(
            (
                f.totals.double_frees,
                f.totals.invalid_frees,
                f.totals.bad_frees
            ),
            (1, 1, 2)
        );
    }

    #[test]
    fn managed_memory_is_listed_as_its_own_section() {
        let f = one(&fixture("managed.json"), &cfg());
        let p = &f.processes[0];
        assert_eq!(p.managed.len(), 1);
        assert_eq!(p.managed[0].bytes, 16 << 20);
        assert_eq!(p.managed[0].allocations, 2);
        assert_eq!(f.totals.managed.bytes, 16 << 20);
        // Suppressing the leak does not hide the risk.
        let mut c = cfg();
        c.rules = vec![Rule::new("init_data", Path::new("s"), 1)];
        let f = one(&fixture("managed.json"), &c);
        assert!(f.processes[0].leaks.is_empty());
        assert_eq!(f.processes[0].managed.len(), 1);
    }

    #[test]
    fn stats_tally_live_blocks_by_api_and_module() {
        let f = one(&fixture("error_path.json"), &cfg());
        let s = &f.processes[0].stats;
        assert_eq!(s.by_api[0].0, "cudaMalloc");
        assert_eq!(s.by_api[0].1.allocations, 11);
        assert_eq!(s.by_api[1].0, "cudaMallocHost");
        assert_eq!(s.by_module.len(), 1);
        assert_eq!(s.by_module[0].0, "leak_error_path");
        assert_eq!(s.by_module[0].1.bytes, (1 << 20) + 40960 + 20480);
        assert_eq!(s.top_callsites.len(), 3);
    }

    #[test]
    fn processes_are_sorted_by_pid_and_shared_callsites_count_once() {
        let c = cfg();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/multi");
        let a = crate::load::read(&dir.join("cudaleak.2002.json")).unwrap();
        let b = crate::load::read(&dir.join("cudaleak.2001.json")).unwrap();
        let f = finish(
            vec![
                analyze_process(&a, Path::new("a"), &c),
                analyze_process(&b, Path::new("b"), &c),
            ],
            &c,
        );
        let pids: Vec<u32> = f.processes.iter().map(|p| p.process.pid).collect();
        assert_eq!(pids, [2001, 2002]);
        assert_eq!(f.totals.processes, 2);
        assert_eq!(f.totals.leaked.allocations, 3);
        assert_eq!(f.totals.callsites, 2);
        // The shared callsite is merged over both processes, largest first.
        assert_eq!(f.callsites.len(), 2);
        let shared = &f.callsites[0];
        assert_eq!(functions(&shared.stack)[0], "worker_init()");
        assert_eq!(
            (shared.bytes, shared.allocations, shared.processes),
            (2 << 20, 2, 2)
        );
        assert_eq!(f.callsites[1].processes, 1);
    }

    fn framework() -> Findings {
        one(&fixture("framework.json"), &cfg())
    }

    #[test]
    fn cache_and_handle_blocks_are_held_not_leaked_and_do_not_fail_the_gate() {
        let f = framework();
        let p = &f.processes[0];
        let held: Vec<(&str, u64, u64)> = p
            .cached
            .iter()
            .map(|g| {
                (
                    f.caches[g.held_by.unwrap()].id.as_str(),
                    g.bytes,
                    g.allocations,
                )
            })
            .collect();
        assert_eq!(
            held,
            [("cublas", 64 << 20, 1), ("pytorch-native", 22 << 20, 2)]
        );
        assert_eq!(p.cached_total.bytes, 86 << 20);
        assert_eq!(f.totals.cached.allocations, 3);
        let per_rule: Vec<(&str, u64)> = f
            .caches
            .iter()
            .zip(&f.cached_per_rule)
            .filter(|(_, c)| c.allocations > 0)
            .map(|(r, c)| (r.id.as_str(), c.bytes))
            .collect();
        assert_eq!(
            per_rule,
            [("pytorch-native", 22 << 20), ("cublas", 64 << 20)]
        );
        // The extension's own cudaMalloc is a leak although alloc_block is above it.
        assert_eq!(p.leaks.len(), 1);
        assert_eq!(
            functions(&p.leaks[0].stack)[..2],
            [
                "my_ext::scratch(unsigned long)",
                "my_ext::on_alloc_hook(void*)"
            ]
        );
        assert_eq!(p.leaks[0].held_by, None);
        assert_eq!(f.verdict.exit_code, 23);
        assert!(f.verdict.fails_on_leaks && !f.verdict.fails_on_cached);
    }

    #[test]
    fn a_library_s_block_is_named_at_the_program_s_call_into_the_library() {
        // framework.json's cuBLAS workspace (stack 1), made from a C++ service's request
        // handler instead of PyTorch: the row names handle_request, the stack keeps libcublas.
        let mut d = fixture("framework.json");
        let frames = &mut d.stacks[1].frames;
        frames[3] = Frame {
            function: Some("handle_request(Request const&)".into()),
            file: Some("svc.cpp".into()),
            line: Some(9),
            ..frames[3].clone()
        };
        let f = one(&d, &cfg());
        let g = f.processes[0]
            .cached
            .iter()
            .find(|g| f.caches[g.held_by.unwrap()].id == "cublas")
            .unwrap();
        let at = g.stack.where_frame().unwrap();
        assert_eq!(
            at.function.as_deref(),
            Some("handle_request(Request const&)")
        );
        assert_eq!(
            functions(&g.stack)[0],
            "?",
            "libcublas stays at the top of the stack"
        );
        // A leak (no cache holds it) is named at its first frame, as always.
        let leak = &f.processes[0].leaks[0];
        assert_eq!(leak.stack.entry, 0);
    }

    /// framework.json with `n` 2 MiB caching-allocator segments (stack 0) and as many cuBLAS
    /// workspaces (stack 1, a handle: no `grows` note), taken at `at(i)` ms, in a run of
    /// `span_ms`.
    fn pool_taken_at(n: u64, span_ms: u64, at: impl Fn(u64) -> u64) -> format::Dump {
        let mut d = fixture("framework.json");
        let template = d.live[0].clone();
        d.live.clear();
        for i in 0..n {
            for stack in [0, 1] {
                d.live.push(LiveRecord {
                    size: 2 << 20,
                    time_ms: at(i),
                    seq: 2 * i + stack as u64,
                    stack,
                    ..template.clone()
                });
            }
        }
        d.summary.live_allocations = d.live.len() as u64;
        d.summary.live_bytes = d.live.iter().map(LiveRecord::held).sum();
        d.process.end_unix_ms = d.process.start_unix_ms + span_ms;
        d.validate().unwrap();
        d
    }

    #[test]
    fn a_pool_that_took_blocks_all_through_the_run_is_still_growing() {
        let c = cfg();
        let native = c.caches.iter().position(|r| r.id == "pytorch-native");
        // Ten segments, one every second of a 10 s run: every tenth, half in the second half.
        let p = analyze_process(&pool_taken_at(10, 10_000, |i| i * 1000), Path::new("d"), &c);
        assert_eq!(
            p.pools_growing,
            [PoolGrowth {
                rule: native.unwrap(),
                held: 20 << 20,
                second_half: 8 << 20,
                tenths: 10,
            }]
        );
        // The same segments taken in the run's first second: warm-up, not growth.
        let p = analyze_process(&pool_taken_at(10, 10_000, |i| i * 100), Path::new("d"), &c);
        assert!(p.pools_growing.is_empty());
        // Too few blocks, or a run too short to tell.
        let p = analyze_process(&pool_taken_at(7, 10_000, |i| i * 1400), Path::new("d"), &c);
        assert!(p.pools_growing.is_empty());
        let p = analyze_process(&pool_taken_at(10, 1_900, |i| i * 190), Path::new("d"), &c);
        assert!(p.pools_growing.is_empty());
        // Only the last tenth: too few tenths although most bytes are late.
        let p = analyze_process(
            &pool_taken_at(10, 10_000, |i| if i == 0 { 0 } else { 9_500 }),
            Path::new("d"),
            &c,
        );
        assert!(p.pools_growing.is_empty());
    }

    #[test]
    fn without_the_user_leak_the_gate_passes_and_strict_counts_what_caches_hold() {
        let mut d = fixture("framework.json");
        d.live.retain(|r| r.stack != 2);
        d.summary.live_allocations = d.live.len() as u64;
        d.summary.live_bytes = d.live.iter().map(|r| r.size).sum();
        let f = one(&d, &cfg());
        assert_eq!(f.totals.leaked, Counts::default());
        assert_eq!(f.verdict.exit_code, 0);
        let mut c = cfg();
        c.gate.count_cached = true;
        let f = one(&d, &c);
        assert!(f.verdict.fails_on_cached && f.verdict.fails_on_leaks);
        assert_eq!(f.verdict.exit_code, 23);
        // --max-leaked-bytes applies to what strict counts.
        c.gate.max_leaked_bytes = 86 << 20;
        assert_eq!(one(&d, &c).verdict.exit_code, 0);
        // Suppressions never apply to what caches hold.
        let mut c = cfg();
        c.rules = vec![Rule::new("libc10_cuda", Path::new("s"), 1)];
        let f = one(&d, &c);
        assert_eq!(f.totals.suppressed, Counts::default());
        assert_eq!(f.totals.cached.allocations, 3);
    }

    #[test]
    fn a_cache_line_holds_the_user_s_own_pool_and_comes_before_the_builtin_rules() {
        use crate::suppressions::RuleKind;
        let mut c = cfg();
        c.caches = caches::rules(&[Rule::with_kind(
            RuleKind::Cache,
            "my_ext::scratch",
            Path::new("ci.supp"),
            3,
        )])
        .unwrap();
        let f = one(&fixture("framework.json"), &c);
        let p = &f.processes[0];
        assert!(p.leaks.is_empty());
        assert_eq!(f.caches[0].id, "cache:my_ext::scratch");
        assert_eq!(f.cached_per_rule[0].bytes, 4096);
        assert_eq!(f.verdict.exit_code, 0);
        // Anchored: a pattern that matches only a frame higher up holds nothing.
        c.caches = caches::rules(&[Rule::with_kind(
            RuleKind::Cache,
            "on_alloc_hook",
            Path::new("ci.supp"),
            3,
        )])
        .unwrap();
        let f = one(&fixture("framework.json"), &c);
        assert_eq!(f.cached_per_rule[0], Counts::default());
        assert_eq!(f.processes[0].leaks.len(), 1);
    }

    #[test]
    fn teardown_failures_are_notes_not_failed_allocations_or_bad_frees() {
        let f = framework();
        let p = &f.processes[0];
        assert_eq!(p.failed.len(), 1);
        assert_eq!(p.failed[0].errors, [2]);
        assert!(p.bad_frees.is_empty());
        let notes: Vec<(EventType, &str, &[i64], u64)> = p
            .teardown
            .iter()
            .map(|g| (g.kind, g.api.as_str(), g.errors.as_slice(), g.during_exit))
            .collect();
        assert_eq!(
            notes,
            [
                (
                    EventType::FailedAllocation,
                    "cudaMallocAsync",
                    &[201][..],
                    1
                ),
                (EventType::InvalidFree, "cudaFree", &[4][..], 1)
            ]
        );
        assert_eq!(
            (
                f.totals.failed_allocations,
                f.totals.bad_frees,
                f.totals.teardown
            ),
            (1, 0, 2)
        );
        // No bad free fails the gate: only the extension's leak does.
        let mut c = cfg();
        c.gate.fail_on_leaks = false;
        assert_eq!(one(&fixture("framework.json"), &c).verdict.exit_code, 0);
    }

    #[test]
    fn error_201_or_3_before_exit_began_is_a_real_failure_but_4_never_is() {
        let e = |error, during_exit| format::Event {
            kind: EventType::FailedAllocation,
            api: "cudaMalloc".into(),
            address: None,
            size: Some(1),
            error: Some(error),
            seq: 1,
            stack: 0,
            alloc_stack: None,
            during_exit,
        };
        assert!(is_teardown(&e(4, false)) && is_teardown(&e(4, true)));
        assert!(!is_teardown(&e(201, false)) && is_teardown(&e(201, true)));
        assert!(!is_teardown(&e(3, false)) && is_teardown(&e(3, true)));
        assert!(!is_teardown(&e(2, true)));
        let mut d = fixture("framework.json");
        for ev in &mut d.events {
            ev.during_exit = false;
        }
        let f = one(&d, &cfg());
        let p = &f.processes[0];
        assert_eq!(p.failed.len(), 2, "201 before exit is a failed allocation");
        assert_eq!(p.teardown.len(), 1, "4 is teardown whenever it comes");
        assert_eq!(f.totals.failed_allocations, 2);
    }

    #[test]
    fn quiet_processes_are_left_out_only_when_asked_and_counted() {
        let mut c = cfg();
        let f = finish(
            vec![
                analyze_process(&fixture("quiet.json"), Path::new("q"), &c),
                analyze_process(&fixture("leak_loop.json"), Path::new("l"), &c),
            ],
            &c,
        );
        assert_eq!(f.processes.len(), 2);
        assert!(f.quiet.is_empty());
        c.hide_quiet = true;
        let f = finish(
            vec![
                analyze_process(&fixture("quiet.json"), Path::new("q"), &c),
                analyze_process(&fixture("clean.json"), Path::new("c"), &c),
                analyze_process(&fixture("failed_alloc.json"), Path::new("f"), &c),
            ],
            &c,
        );
        // clean.json allocated (and freed); failed_alloc.json has a failed call: both shown.
        let pids: Vec<u32> = f.processes.iter().map(|p| p.process.pid).collect();
        assert_eq!(pids, [7007, 8008]);
        assert_eq!(f.quiet.len(), 1);
        assert_eq!(f.quiet[0].pid, 10011);
        assert_eq!((f.totals.processes, f.totals.quiet_processes), (2, 1));
    }

    #[test]
    fn diff_matches_callsites_across_stack_indices_and_puts_growth_first() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshots");
        let old = crate::load::read(&dir.join("cudaleak.3001.snapshot-1.json")).unwrap();
        let new = crate::load::read(&dir.join("cudaleak.3001.snapshot-2.json")).unwrap();
        let d = diff(&old, Path::new("o"), &new, Path::new("n"), &view());
        assert_eq!(d.rows.len(), 3);
        assert_eq!((d.grew, d.unchanged, d.shrank), (1, 1, 1));
        let first = &d.rows[0];
        assert_eq!(functions(&first.stack)[0], "handle_request(int)");
        assert_eq!((first.old.allocations, first.new.allocations), (2, 6));
        assert_eq!(first.delta_bytes(), 4 * 4096);
        assert_eq!(d.rows[1].trend(), 0);
        assert_eq!(d.rows[2].delta_bytes(), -3 * 65536);

        let mut v = view();
        v.top = Some(1);
        let d = diff(&old, Path::new("o"), &new, Path::new("n"), &v);
        assert_eq!((d.rows.len(), d.rows_not_shown, d.grew), (1, 2, 1));
    }
}
