//! The findings model: what the analysis hands to reporters (per-process findings, groups of
//! live blocks and of failed calls, totals, the verdict) and the configuration it takes (view,
//! gate). Types and their small accessors only: no analysis here, and no I/O or formatting.

use std::path::PathBuf;

use crate::load::schema as format;
use format::{EventType, Kind};

use crate::caches::CacheRule;
use crate::callsite::Callsite;
use crate::suppressions::Rule;

use super::{CallsiteLive, HandleCount, ProgramStatus, StackView};

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

/// Counts add memory held, never address ranges: a leaked reservation adds no bytes.
pub(super) fn group_counts(g: &LeakGroup) -> Counts {
    Counts {
        groups: 1,
        allocations: g.allocations,
        bytes: g.held,
    }
}

/// Live blocks allocated from one callsite with one API, kind and device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakGroup {
    /// Shared with the dump's records (cut to `MAX_NAME_BYTES`).
    pub api: format::Name,
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
    /// Library handles never destroyed that this group stands for (their create call is the
    /// stack; the blocks are those the library allocated for them), or `None` for blocks.
    pub handles: Option<Box<HandleCount>>,
    /// The framework (`torch`, `jax`, `cupy`) whose own record named these blocks, kept inside
    /// its pool where the driver does not see them (a window's report, `--since`); `None` for
    /// blocks the shim recorded.
    pub framework: Option<String>,
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
    /// Library handles among those leaks (never destroyed, see `handles`).
    pub leaked_handles: u64,
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
    /// Pools that kept taking memory until the dump (see
    /// [`pools_still_growing`](super::pools::pools_still_growing)).
    pub pools_growing: Vec<PoolGrowth>,
    /// What the script held when the Python interpreter began to shut down, for dumps that
    /// say when (schema 4): information, not a verdict.
    pub script_end: Option<ScriptEnd>,
    /// The process `cudaleak attach` came to (`format::Dump::attached_to`).
    pub attached_to: bool,
    /// Why a framework's own record named no blocks (its `note`), per framework, in a window's
    /// report (`Config::framework_records`).
    pub record_notes: Vec<RecordNote>,
}

/// A framework's record that could not be turned on or read: its `note`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordNote {
    /// `torch`, `jax` or `cupy`.
    pub framework: String,
    pub note: String,
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
    /// Never the process `cudaleak attach` came to (`format::Dump::attached_to`).
    pub fn is_quiet(&self) -> bool {
        !self.attached_to
            && self.summary.is_empty()
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
    /// Library handles among the leaks.
    pub leaked_handles: u64,
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
    pub api: format::Name,
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
    /// Cache rules, in the order they are tried ([`caches::rules`](crate::caches::rules)).
    pub caches: Vec<CacheRule>,
    pub min_bytes: u64,
    pub gate: Gate,
    /// Leave processes that made no CUDA allocation out of the report (`cudaleak run`).
    pub hide_quiet: bool,
    /// The program emptied its pools before the dump (`report --pools-emptied`): what a cache
    /// with an `empty` line still holds is kept by the program's objects, and leaked.
    pub pools_emptied: bool,
    /// The report is of a window (`report --since`): the groups of the frameworks' own records
    /// (`frameworks.records`, blocks kept inside a pool the driver saw taken before the window)
    /// are leak groups of it. Off, the records are the growth verdict's alone.
    pub framework_records: bool,
}

/// Exit status when leaks (or bad frees) remain after filters: LeakSanitizer's convention.
pub const DEFAULT_EXIT_CODE: u8 = 23;

/// How findings are computed and laid out, in every format; shared by `report`, `run` and
/// (partly) `diff`. The default is the plain view: every leak and frame shown (caches one line
/// each in text and Markdown), paths as the dump has them. Colour is no part of it: only the
/// text reporter paints, and it is told so when it is made ([`crate::report::reporter`]).
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
