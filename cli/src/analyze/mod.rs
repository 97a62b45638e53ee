//! Pure analysis: dumps plus a configuration in, findings out. This room owns the findings model,
//! the grouping of live blocks by callsite, the split into leaks and blocks held by caches,
//! teardown errors set apart from real ones, suppressions and size filters, and the gate's
//! verdict. Its other rooms: `frames` (what a user sees of a stack), `diff` (per-callsite counts
//! of a dump, and `diff`), `status` (how a program ended), `handles` (which library handles
//! were leaked).
//!
//! No I/O and no formatting of output here (reporters do that), and nothing may panic on a
//! dump that `cudaleak-format` accepted. Findings own their strings so a dump can be dropped
//! as soon as it is analysed: memory stays bounded by the largest single dump.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::load::schema as format;
use format::{EventType, Kind};

use crate::caches::{self, CacheRule};
use crate::callsite::Callsite;
use crate::suppressions::Rule;

mod diff;
mod frames;
mod handles;
mod status;

pub use diff::*;
pub use frames::*;
pub use handles::HandleCount;
pub use status::*;

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
    /// Library handles never destroyed that this group stands for (their create call is the
    /// stack; the blocks are those the library allocated for them), or `None` for blocks.
    pub handles: Option<HandleCount>,
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

/// Groups live records by API, kind, device, visible stack and the cache that holds them; the
/// blocks of leaked handles are left to their handles' groups, and blocks a destroyed handle
/// left behind are never held by a cache.
fn group_live<'a>(
    dump: &'a format::Dump,
    stacks: &mut Stacks<'a>,
    judged: &handles::Judged,
) -> Vec<GroupAcc> {
    type Key = (Callsite, Option<usize>, Kind, Option<i32>);
    let mut index: HashMap<Key, usize> = HashMap::new();
    // Records of one stack index, API, kind and device share a group: found without hashing the
    // callsite (a whole stack's worth of frames) for every record.
    type Fast<'a> = (usize, &'a str, Kind, Option<i32>, bool, Option<usize>);
    let mut fast: HashMap<Fast<'a>, usize> = HashMap::new();
    let mut groups: Vec<GroupAcc> = Vec::new();
    for r in &dump.live {
        if judged.in_groups.contains(&r.seq) {
            continue;
        }
        // What the handles say of the block: left behind by a destroyed one (a leak), or held
        // by a live one (that library's cache rule).
        let left_behind = judged.left_behind.contains(&r.seq);
        let owner_rule = judged.held.get(&r.seq).copied();
        let fast_key = (
            r.stack,
            r.api.as_str(),
            r.kind,
            r.device,
            left_behind,
            owner_rule,
        );
        if let Some(&slot) = fast.get(&fast_key) {
            let acc = &mut groups[slot];
            acc.group.bytes = acc.group.bytes.saturating_add(r.size);
            acc.group.held = acc.group.held.saturating_add(r.held());
            acc.group.allocations += 1;
            continue;
        }
        let p = stacks.get(r.stack, &r.api);
        let callsite = p.callsite(&r.api);
        let held_by = if left_behind {
            None
        } else {
            p.held_by.or(owner_rule)
        };
        let slot = *index
            .entry((callsite.clone(), held_by, r.kind, r.device))
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
                        held_by,
                        handles: None,
                    },
                    stacks: Vec::new(),
                });
                groups.len() - 1
            });
        fast.insert(fast_key, slot);
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
    let mut judged = handles::judge(dump, &mut stacks);
    let mut groups = group_live(dump, &mut stacks, &judged);
    groups.append(&mut judged.groups);
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
    let leaked_handles = kept
        .iter()
        .filter_map(|g| g.handles.as_ref())
        .map(|h| h.count)
        .sum();
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
        leaked_handles,
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
        t.leaked_handles += p.leaked_handles;
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

    // A group of handles that own no memory (cuSPARSE's) is a leak too.
    let leaks = t.leaked.groups > 0;
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

#[cfg(test)]
mod tests;
