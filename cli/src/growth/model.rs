//! What `report --growth` finds, as the reporters read it: the points of a series, each
//! callsite's row and why it is or is not a suspect, the series of a process, what was left out
//! and why, and the findings with their gate.
//!
//! Plain data: built in `mod.rs`, judged in `rules.rs`; nothing here reads a dump or decides.

use std::path::PathBuf;

use super::{FrameworkGrowth, Stats};
use crate::analyze::{Counts, StackView};
use crate::callsite::Callsite;
use crate::load::schema as format;
use format::Name;

/// One dump of a series, in series order.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub source: PathBuf,
    pub end: format::End,
    pub snapshot: Option<u64>,
    pub signal: Option<String>,
    pub end_unix_ms: u64,
    pub live: Counts,
    /// The dump records each stack's floor since the previous snapshot (schema 4).
    pub floors: bool,
}

impl Point {
    /// Which of two dumps is the newer (the process's header, the frameworks' records): final
    /// dumps last, else the later, then the higher snapshot number.
    pub(super) fn newer(&self) -> (bool, u64, u64) {
        (
            self.end != format::End::Snapshot,
            self.end_unix_ms,
            self.snapshot.unwrap_or(0),
        )
    }
}

/// Why a callsite that grew overall is not a suspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSuspect {
    /// It grew early and then stayed level or fell (a warm-up, a cache filled once).
    LevelledOff,
    /// It fell in more than a quarter of the intervals: it follows the workload.
    Fluctuates,
    /// It rose in only one interval of three or more: one jump is not a trend.
    OneStep,
    /// It grew by fewer bytes than `--min-bytes`.
    BelowMinBytes,
    /// It peaked in the first half of the series and was released: it followed a phase of
    /// the program, not the run.
    Released,
    /// What it kept grew by two blocks or fewer: a tensor or two held a little longer is not
    /// a trend (the rule for long series).
    FewBlocks,
    /// What it kept between dumps did not rise steadily (the trend test; long series).
    NoTrend,
    /// It reached new highs less and less often, as a cache that warms up does (the record
    /// test; long series).
    Settled,
    /// A framework's own count whose growth the suspects allocated each at its own line (not
    /// held in a pool's segments) account for, at least half of it: they name the lines.
    ExplainedByCallsites,
    /// Held by the pool of a framework whose own count is a suspect: that count is this growth.
    InFrameworkCount,
}

impl NotSuspect {
    pub fn as_str(self) -> &'static str {
        match self {
            NotSuspect::LevelledOff => "levelled off in the second half",
            NotSuspect::Fluctuates => "fell in more than a quarter of the intervals",
            NotSuspect::OneStep => "rose in only one interval",
            NotSuspect::BelowMinBytes => "grew less than --min-bytes",
            NotSuspect::Released => "peaked in the first half and was released",
            NotSuspect::FewBlocks => "kept at most two blocks more",
            NotSuspect::NoTrend => "what it kept did not rise steadily",
            NotSuspect::Settled => "its new highs became rare, as a warming cache's do",
            NotSuspect::ExplainedByCallsites => {
                "the suspects above, each object its own allocation, account for it"
            }
            NotSuspect::InFrameworkCount => "the framework's count above is this growth",
        }
    }

    /// The growth is another row's: a framework's count and its pool's driver calls are one
    /// growth, seen twice.
    pub fn counted_elsewhere(self) -> bool {
        matches!(
            self,
            NotSuspect::ExplainedByCallsites | NotSuspect::InFrameworkCount
        )
    }
}

/// One callsite across a series.
#[derive(Debug, Clone, PartialEq)]
pub struct GrowthRow {
    pub callsite: Callsite,
    pub api: Name,
    pub stack: StackView,
    /// Live blocks in each dump of the series (zero where the callsite had none).
    pub series: Vec<Counts>,
    /// What it kept through the interval that ends at each dump (the dump's floors; its live
    /// blocks where the dump records none).
    pub floors: Vec<Counts>,
    /// The statistical evidence, for a series long enough to judge by it (`MIN_JUDGED`).
    pub evidence: Option<Box<Evidence>>,
    pub grew_intervals: u64,
    pub shrank_intervals: u64,
    /// Index in `series` of the peak the growth is measured to (its last maximum).
    pub peak: usize,
    /// Bytes per hour from the first dump to the peak (`None` when they share a timestamp).
    pub bytes_per_hour: Option<f64>,
    /// `None` for a suspect.
    pub not_suspect: Option<NotSuspect>,
    /// The cache or library handle that holds what this callsite allocated; for a framework's
    /// count, the framework's objects.
    pub held_by: Option<Box<HeldBy>>,
    /// A framework's own count (schema 6), not a driver callsite: which count, and where its
    /// record saw the blocks made.
    pub framework: Option<Box<FrameworkGrowth>>,
}

/// What the rule for long series measured (docs/report-format.md, "The growth rule").
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// What it kept at each judged point, in order: the floor of each interval after the first
    /// (or live blocks, for dumps without floors), ending where the script did.
    pub kept: Vec<Counts>,
    /// The judged series ends when the Python interpreter began to shut down.
    pub ends_at_finalizing: bool,
    pub stats: Stats,
}

/// A cache rule as a growth row names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBy {
    pub id: String,
    pub name: String,
    /// What the growth of this cache means (the rule's `grows`).
    pub grows: Option<String>,
    /// Its blocks are a pool's segments (the rule's `blocks = segments`).
    pub segments: bool,
}

impl HeldBy {
    pub(super) fn of(c: &crate::caches::CacheRule) -> Self {
        HeldBy {
            id: c.id.clone(),
            name: c.name.clone(),
            grows: c.grows.clone(),
            segments: c.segments,
        }
    }
}

impl GrowthRow {
    pub fn first(&self) -> Counts {
        self.series.first().copied().unwrap_or_default()
    }
    /// Where the growth is measured from: the first dump (short series) or what it kept at
    /// the first judged point.
    pub fn from(&self) -> Counts {
        match &self.evidence {
            Some(e) => e.kept.first().copied().unwrap_or_default(),
            None => self.first(),
        }
    }
    pub fn last(&self) -> Counts {
        self.series.last().copied().unwrap_or_default()
    }
    /// Intervals judged: up to the peak (short series), or between the judged points.
    pub fn intervals(&self) -> u64 {
        match &self.evidence {
            Some(e) => e.kept.len().saturating_sub(1) as u64,
            None => self.peak as u64,
        }
    }
    /// Where the growth is measured to: the peak (short series) or the last judged point.
    pub fn at_peak(&self) -> Counts {
        match &self.evidence {
            Some(e) => e.kept.last().copied().unwrap_or_default(),
            None => self.series.get(self.peak).copied().unwrap_or_default(),
        }
    }
    /// Growth from the first dump to the peak, or between the first and last judged points.
    pub fn growth_bytes(&self) -> i128 {
        i128::from(self.at_peak().bytes) - i128::from(self.from().bytes)
    }
    pub fn growth_blocks(&self) -> i128 {
        i128::from(self.at_peak().allocations) - i128::from(self.from().allocations)
    }
    /// Bytes freed between the peak and the last dump (the program's teardown, often).
    pub fn released_bytes(&self) -> u64 {
        let peak = self.series.get(self.peak).copied().unwrap_or_default();
        peak.bytes.saturating_sub(self.last().bytes)
    }
    pub fn is_suspect(&self) -> bool {
        self.not_suspect.is_none()
    }
    /// Its growth is another row's (`NotSuspect::counted_elsewhere`): left out of sums.
    pub fn counted_elsewhere(&self) -> bool {
        self.not_suspect.is_some_and(NotSuspect::counted_elsewhere)
    }
}

/// The series of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The process as its last dump describes it.
    pub process: format::Process,
    pub points: Vec<Point>,
    /// Milliseconds from the first dump to the last.
    pub span_ms: u64,
    /// Suspects (largest growth first, cut to `--top`), then callsites that grew but are not
    /// suspects (largest growth first). Callsites that did not grow are left out.
    pub rows: Vec<GrowthRow>,
    /// Suspects of this process, before `--top`.
    pub suspects: u64,
    /// Sum of the suspects' growth in bytes, before `--top`.
    pub suspect_growth_bytes: u64,
    pub suspects_not_shown: u64,
    /// Pools whose blocks are segments (`blocks = segments`) that held blocks of this process
    /// while none of their callsites is a suspect: growth smaller than a segment, or than the
    /// room a pool took ahead, does not show in them.
    pub coarse_pools: Vec<HeldBy>,
    /// Dumps of the process left out of the series, and why.
    pub left_out: Option<LeftOut>,
}

impl Series {
    /// Whether the rules could judge it: two dumps at least once the left-out ones are gone.
    pub fn judged(&self) -> bool {
        self.points.len() >= 2
    }
}

/// Dumps of a process that its series leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftOut {
    pub points: Vec<Point>,
    pub why: LeftOutWhy,
    /// The dump schema of the process's newest dump.
    pub schema: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftOutWhy {
    /// A Python program's exit dump from a shim that recorded no moment of interpreter
    /// shutdown (schema 3 or older, no `finalizing`, no floors): it was written after teardown
    /// freed what the script held, so it may read as released.
    PythonTeardown,
}

/// A process with a single dump: nothing to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub process: format::Process,
    pub source: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GrowthFindings {
    /// Processes with at least two dumps, by pid.
    pub series: Vec<Series>,
    pub skipped: Vec<Skipped>,
    pub rules: Vec<crate::suppressions::Rule>,
    /// Per rule: blocks it suppressed, summed over every dump read.
    pub suppressed: Vec<Counts>,
    pub min_bytes: u64,
    pub max_growth_bytes: u64,
    pub suspects: u64,
    pub suspect_growth_bytes: u64,
    /// Suspects exist but their growth is within `--max-leaked-bytes`.
    pub tolerated: bool,
    /// 0, or the gate's exit code.
    pub exit_code: u8,
    /// Under `run --growth`, when nothing grew but the exit report fails the gate: its reasons
    /// and what it leaked; `exit_code` is then the exit report's. `None` elsewhere.
    pub at_exit: Option<AtExit>,
}

/// Why the exit report of a `run --growth` failed the gate, for the growth report's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtExit {
    /// `leaks`, `bad frees`, … as `report::gate_reasons` words them.
    pub reasons: Vec<&'static str>,
    pub leaked: Counts,
}

/// Why a growth report cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooFewDumps(pub String);
