//! The JSON report: a stable, versioned document for programs (`"cudaleak_report": 1`).
//! Every field is documented in docs/report-format.md; a change of meaning bumps the version.
//!
//! Field order is fixed by these structs; nothing here may drop or rename a field silently.

use std::io::{self, Write};

use serde::Serialize;

use super::{
    cached_totals, coarse_pools_text, error_name, gate_reasons, suppressed_per_rule, Reporter,
    VERSION,
};
use crate::analyze::View;
use crate::analyze::{
    signal_name, Counts, DiffFindings, DiffSide, Findings, FrameView, LeakGroup, ProgramStatus,
    StackView,
};
use crate::growth::{GrowthFindings, RULE_TEXT};

pub struct Json;

/// The version of this document's shape.
pub const REPORT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

const TOOL: Tool = Tool {
    name: "cudaleak",
    version: VERSION,
};

#[derive(Serialize)]
#[serde(untagged)]
enum Frame<'a> {
    Frame {
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<&'static str>,
        function: Option<&'a str>,
        file: Option<&'a str>,
        line: Option<u32>,
        module: Option<&'a str>,
        offset: Option<String>,
    },
    /// A run of frames folded next to the program's Python frames (without `--native`).
    Folded {
        folded_frames: usize,
        modules: &'a [String],
    },
}

/// A stack's frames, written straight from the findings as the document is written (never a
/// copy of every frame of every group); runs of folded frames sit where they were folded.
struct Frames<'a>(&'a StackView);

impl Serialize for Frames<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        s.collect_seq(
            v.frames
                .iter()
                .enumerate()
                .flat_map(|(i, f)| folded_at(v, i).chain(std::iter::once(frame(f))))
                .chain(folded_at(v, v.frames.len())),
        )
    }
}

fn frames(s: &StackView) -> Frames<'_> {
    Frames(s)
}

fn folded_at(s: &StackView, at: usize) -> impl Iterator<Item = Frame<'_>> {
    s.folded
        .iter()
        .filter(move |r| r.at == at)
        .map(|r| Frame::Folded {
            folded_frames: r.frames,
            modules: &r.modules,
        })
}

fn frame(f: &FrameView) -> Frame<'_> {
    Frame::Frame {
        kind: f.python.then_some("python"),
        function: f.function.as_deref(),
        file: f.file.as_deref(),
        line: f.line,
        module: f.module.as_deref(),
        offset: f.offset.map(|o| format!("{o:#x}")),
    }
}

#[derive(Serialize)]
struct Group<'a> {
    process: u32,
    bytes: u64,
    allocations: u64,
    api: &'a str,
    kind: &'static str,
    device: Option<i32>,
    frames: Frames<'a>,
    hidden_frames: usize,
    omitted_frames: usize,
    /// The id of the cache that holds the blocks (cached groups only).
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<&'a str>,
    /// Library handles never destroyed that the group stands for (their create call is the
    /// stack).
    #[serde(skip_serializing_if = "Option::is_none")]
    handles: Option<Handles<'a>>,
}

#[derive(Serialize)]
struct Handles<'a> {
    library: &'a str,
    count: u64,
}

fn group<'a>(f: &'a Findings, pid: u32, g: &'a LeakGroup) -> Group<'a> {
    Group {
        cache: g
            .held_by
            .and_then(|i| f.caches.get(i))
            .map(|r| r.id.as_str()),
        process: pid,
        bytes: g.bytes,
        allocations: g.allocations,
        api: &g.api,
        kind: g.kind.as_str(),
        device: g.device,
        frames: frames(&g.stack),
        hidden_frames: g.stack.hidden,
        omitted_frames: g.stack.omitted,
        handles: g.handles.as_ref().map(|h| Handles {
            library: &h.library,
            count: h.count,
        }),
    }
}

#[derive(Serialize)]
struct Callsite<'a> {
    api: &'a str,
    bytes: u64,
    allocations: u64,
    processes: u64,
    frames: Frames<'a>,
}

#[derive(Serialize)]
struct ErrorCode {
    code: i64,
    name: Option<&'static str>,
}

#[derive(Serialize)]
struct Failed<'a> {
    process: u32,
    api: &'a str,
    count: u64,
    bytes: u64,
    errors: Vec<ErrorCode>,
    frames: Frames<'a>,
}

#[derive(Serialize)]
struct Teardown<'a> {
    process: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    api: &'a str,
    count: u64,
    during_exit: u64,
    errors: Vec<ErrorCode>,
    frames: Frames<'a>,
}

#[derive(Serialize)]
struct CacheDoc<'a> {
    id: &'a str,
    name: &'a str,
    release: &'a str,
    rule: String,
    builtin: bool,
    groups: u64,
    allocations: u64,
    bytes: u64,
}

#[derive(Serialize)]
struct QuietDoc<'a> {
    pid: u32,
    exe: &'a str,
    source: String,
}

#[derive(Serialize)]
struct BadFree<'a> {
    process: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    api: &'a str,
    count: u64,
    address: Option<String>,
    frames: Frames<'a>,
    alloc_frames: Option<Frames<'a>>,
}

#[derive(Serialize)]
struct Tally<'a> {
    name: &'a str,
    bytes: u64,
    allocations: u64,
}

#[derive(Serialize)]
struct Stats<'a> {
    by_api: Vec<Tally<'a>>,
    by_module: Vec<Tally<'a>>,
    top_callsites: Vec<Group<'a>>,
}

#[derive(Serialize)]
struct Process<'a> {
    pid: u32,
    ppid: u32,
    exe: &'a str,
    argv: &'a [String],
    rank: Option<i64>,
    end: &'static str,
    signal: Option<&'a str>,
    snapshot: Option<u64>,
    recording_stopped: Option<&'a str>,
    source: String,
    counters: &'a cudaleak_format::Summary,
    leaked_bytes: u64,
    leaked_allocations: u64,
    leaked_handles: u64,
    leak_groups: u64,
    leak_groups_not_shown: u64,
    cached_bytes: u64,
    cached_allocations: u64,
    cached_groups: u64,
    cached_groups_not_shown: u64,
    teardown: u64,
    stats: Stats<'a>,
    pools_growing: Vec<PoolGrowing<'a>>,
    /// What the script held when Python began to shut down; null when the dump does not say.
    script_end: Option<ScriptEndDoc<'a>>,
}

#[derive(Serialize)]
struct ScriptEndDoc<'a> {
    after_ms: u64,
    held_bytes: u64,
    held_allocations: u64,
    /// The callsites that held the most, largest first.
    callsites: Vec<ScriptEndCallsite<'a>>,
}

#[derive(Serialize)]
struct ScriptEndCallsite<'a> {
    api: &'a str,
    bytes: u64,
    allocations: u64,
    held_by: Option<&'a str>,
    frames: Frames<'a>,
}

/// A pool still taking memory at the end of the run (`analyze::PoolGrowth`).
#[derive(Serialize)]
struct PoolGrowing<'a> {
    cache: &'a str,
    held_bytes: u64,
    second_half_bytes: u64,
    tenths: u32,
}

#[derive(Serialize)]
struct CountsDoc {
    groups: u64,
    allocations: u64,
    bytes: u64,
}

impl From<Counts> for CountsDoc {
    fn from(c: Counts) -> Self {
        CountsDoc {
            groups: c.groups,
            allocations: c.allocations,
            bytes: c.bytes,
        }
    }
}

#[derive(Serialize)]
struct RuleDoc<'a> {
    rule: String,
    pattern: &'a str,
    file: String,
    line: usize,
    groups: u64,
    allocations: u64,
    bytes: u64,
}

#[derive(Serialize)]
struct Suppressed<'a> {
    rules: Vec<RuleDoc<'a>>,
    min_bytes: u64,
    below_min_bytes: CountsDoc,
}

#[derive(Serialize)]
struct Summary {
    processes: u64,
    leaked_bytes: u64,
    leaked_allocations: u64,
    leaked_handles: u64,
    callsites: u64,
    suppressed_bytes: u64,
    suppressed_allocations: u64,
    below_min_bytes_bytes: u64,
    below_min_bytes_allocations: u64,
    failed_allocations: u64,
    double_frees: u64,
    invalid_frees: u64,
    bad_frees: u64,
    managed_bytes: u64,
    managed_allocations: u64,
    cached_bytes: u64,
    cached_allocations: u64,
    teardown: u64,
    quiet_processes: u64,
}

#[derive(Serialize)]
struct Gate {
    failed: bool,
    exit_code: u8,
    reasons: Vec<&'static str>,
    fail_on_leaks: bool,
    fail_on_errors: bool,
    count_cached: bool,
    max_leaked_bytes: u64,
    tolerated: bool,
    /// What the command returns: `exit_code`, or under `run` a failed program's status.
    exit_status: u8,
    /// `run` only, when the program failed: `{status, signal}`.
    program: Option<ProgramDoc>,
}

#[derive(Serialize)]
struct ProgramDoc {
    status: u8,
    signal: Option<String>,
}

#[derive(Serialize)]
struct Doc<'a> {
    cudaleak_report: u32,
    tool: Tool,
    processes: Vec<Process<'a>>,
    leaks: Vec<Group<'a>>,
    callsites: Vec<Callsite<'a>>,
    failed_allocations: Vec<Failed<'a>>,
    bad_frees: Vec<BadFree<'a>>,
    managed: Vec<Group<'a>>,
    cached: Vec<Group<'a>>,
    caches: Vec<CacheDoc<'a>>,
    teardown: Vec<Teardown<'a>>,
    quiet_processes: Vec<QuietDoc<'a>>,
    suppressed: Suppressed<'a>,
    summary: Summary,
    gate: Gate,
}

fn tallies(rows: &[(String, Counts)]) -> Vec<Tally<'_>> {
    rows.iter()
        .map(|(name, c)| Tally {
            name,
            bytes: c.bytes,
            allocations: c.allocations,
        })
        .collect()
}

fn document(f: &Findings) -> Doc<'_> {
    let mut doc = Doc {
        cudaleak_report: REPORT_VERSION,
        tool: TOOL,
        processes: Vec::new(),
        leaks: Vec::new(),
        callsites: f
            .callsites
            .iter()
            .map(|c| Callsite {
                api: &c.api,
                bytes: c.bytes,
                allocations: c.allocations,
                processes: c.processes,
                frames: frames(&c.stack),
            })
            .collect(),
        failed_allocations: Vec::new(),
        bad_frees: Vec::new(),
        managed: Vec::new(),
        cached: Vec::new(),
        caches: cached_totals(f)
            .into_iter()
            .filter_map(|(i, c)| {
                let r = f.caches.get(i)?;
                Some(CacheDoc {
                    id: &r.id,
                    name: &r.name,
                    release: &r.release,
                    rule: r.location(),
                    builtin: r.is_builtin(),
                    groups: c.groups,
                    allocations: c.allocations,
                    bytes: c.bytes,
                })
            })
            .collect(),
        teardown: Vec::new(),
        quiet_processes: f
            .quiet
            .iter()
            .map(|q| QuietDoc {
                pid: q.pid,
                exe: &q.exe,
                source: q.source.display().to_string(),
            })
            .collect(),
        suppressed: Suppressed {
            rules: f
                .rules
                .iter()
                .zip(suppressed_per_rule(f))
                .map(|(r, c)| RuleDoc {
                    rule: r.text(),
                    pattern: &r.pattern,
                    file: r.file.display().to_string(),
                    line: r.line,
                    groups: c.groups,
                    allocations: c.allocations,
                    bytes: c.bytes,
                })
                .collect(),
            min_bytes: f.min_bytes,
            below_min_bytes: f.totals.below_min_bytes.into(),
        },
        summary: Summary {
            processes: f.totals.processes,
            leaked_bytes: f.totals.leaked.bytes,
            leaked_allocations: f.totals.leaked.allocations,
            leaked_handles: f.totals.leaked_handles,
            callsites: f.totals.callsites,
            suppressed_bytes: f.totals.suppressed.bytes,
            suppressed_allocations: f.totals.suppressed.allocations,
            below_min_bytes_bytes: f.totals.below_min_bytes.bytes,
            below_min_bytes_allocations: f.totals.below_min_bytes.allocations,
            failed_allocations: f.totals.failed_allocations,
            double_frees: f.totals.double_frees,
            invalid_frees: f.totals.invalid_frees,
            bad_frees: f.totals.bad_frees,
            managed_bytes: f.totals.managed.bytes,
            managed_allocations: f.totals.managed.allocations,
            cached_bytes: f.totals.cached.bytes,
            cached_allocations: f.totals.cached.allocations,
            teardown: f.totals.teardown,
            quiet_processes: f.totals.quiet_processes,
        },
        gate: Gate {
            failed: f.verdict.exit_code != 0,
            exit_code: f.verdict.exit_code,
            reasons: gate_reasons(f),
            fail_on_leaks: f.gate.fail_on_leaks,
            fail_on_errors: f.gate.fail_on_errors,
            count_cached: f.gate.count_cached,
            max_leaked_bytes: f.gate.max_leaked_bytes,
            tolerated: f.verdict.tolerated,
            exit_status: f.exit_status(),
            program: f.program.map(|p| ProgramDoc {
                status: p.shell(),
                signal: match p {
                    ProgramStatus::Signal(n) => {
                        Some(signal_name(n).map_or_else(|| format!("signal {n}"), str::to_string))
                    }
                    ProgramStatus::Code(_) => None,
                },
            }),
        },
    };
    for p in &f.processes {
        let pid = p.process.pid;
        doc.processes.push(Process {
            pid,
            ppid: p.process.ppid,
            exe: &p.process.exe,
            argv: &p.process.argv,
            rank: p.process.rank,
            end: p.process.end.as_str(),
            signal: p.process.signal.as_deref(),
            snapshot: p.process.snapshot,
            recording_stopped: p.process.recording_stopped.as_deref(),
            source: p.source.display().to_string(),
            counters: &p.summary,
            leaked_bytes: p.leaked.bytes,
            leaked_allocations: p.leaked.allocations,
            leaked_handles: p.leaked_handles,
            leak_groups: p.leaked.groups,
            leak_groups_not_shown: p.leaks_not_shown(),
            cached_bytes: p.cached_total.bytes,
            cached_allocations: p.cached_total.allocations,
            cached_groups: p.cached_total.groups,
            cached_groups_not_shown: p.cached_not_shown(),
            teardown: p.teardown.iter().map(|g| g.count).sum(),
            stats: Stats {
                by_api: tallies(&p.stats.by_api),
                by_module: tallies(&p.stats.by_module),
                top_callsites: p
                    .stats
                    .top_callsites
                    .iter()
                    .map(|g| group(f, pid, g))
                    .collect(),
            },
            pools_growing: p
                .pools_growing
                .iter()
                .filter_map(|g| {
                    Some(PoolGrowing {
                        cache: &f.caches.get(g.rule)?.id,
                        held_bytes: g.held,
                        second_half_bytes: g.second_half,
                        tenths: g.tenths,
                    })
                })
                .collect(),
            script_end: p.script_end.as_ref().map(|e| ScriptEndDoc {
                after_ms: e.after_ms,
                held_bytes: e.held.bytes,
                held_allocations: e.held.allocations,
                callsites: e
                    .top
                    .iter()
                    .map(|c| ScriptEndCallsite {
                        api: &c.api,
                        bytes: c.live.bytes,
                        allocations: c.live.allocations,
                        held_by: c
                            .held_by
                            .and_then(|i| f.caches.get(i))
                            .map(|r| r.id.as_str()),
                        frames: frames(&c.stack),
                    })
                    .collect(),
            }),
        });
        doc.leaks.extend(p.leaks.iter().map(|g| group(f, pid, g)));
        doc.managed
            .extend(p.managed.iter().map(|g| group(f, pid, g)));
        doc.cached.extend(p.cached.iter().map(|g| group(f, pid, g)));
        doc.teardown.extend(p.teardown.iter().map(|g| {
            Teardown {
                process: pid,
                kind: g.kind.as_str(),
                api: &g.api,
                count: g.count,
                during_exit: g.during_exit,
                errors: g
                    .errors
                    .iter()
                    .map(|&code| ErrorCode {
                        code,
                        name: error_name(&g.api, code),
                    })
                    .collect(),
                frames: frames(&g.stack),
            }
        }));
        doc.failed_allocations.extend(p.failed.iter().map(|g| {
            Failed {
                process: pid,
                api: &g.api,
                count: g.count,
                bytes: g.bytes,
                errors: g
                    .errors
                    .iter()
                    .map(|&code| ErrorCode {
                        code,
                        name: error_name(&g.api, code),
                    })
                    .collect(),
                frames: frames(&g.stack),
            }
        }));
        doc.bad_frees.extend(p.bad_frees.iter().map(|g| BadFree {
            process: pid,
            kind: g.kind.as_str(),
            api: &g.api,
            count: g.count,
            address: g.address.map(|a| format!("{a:#x}")),
            frames: frames(&g.stack),
            alloc_frames: g.alloc_stack.as_ref().map(frames),
        }));
    }
    doc
}

#[derive(Serialize)]
struct DiffSideDoc<'a> {
    source: String,
    pid: u32,
    exe: &'a str,
    end: &'static str,
    snapshot: Option<u64>,
    live_bytes: u64,
    live_allocations: u64,
}

fn side(s: &DiffSide) -> DiffSideDoc<'_> {
    DiffSideDoc {
        source: s.source.display().to_string(),
        pid: s.process.pid,
        exe: &s.process.exe,
        end: s.process.end.as_str(),
        snapshot: s.process.snapshot,
        live_bytes: s.live.bytes,
        live_allocations: s.live.allocations,
    }
}

#[derive(Serialize)]
struct DiffRowDoc<'a> {
    trend: &'static str,
    api: &'a str,
    old_bytes: u64,
    old_allocations: u64,
    new_bytes: u64,
    new_allocations: u64,
    delta_bytes: i128,
    delta_allocations: i128,
    frames: Frames<'a>,
}

#[derive(Serialize)]
struct DiffDoc<'a> {
    cudaleak_diff: u32,
    tool: Tool,
    old: DiffSideDoc<'a>,
    new: DiffSideDoc<'a>,
    callsites: Vec<DiffRowDoc<'a>>,
    callsites_not_shown: u64,
    grew: u64,
    shrank: u64,
    unchanged: u64,
    delta_bytes: i128,
}

#[derive(Serialize)]
struct PointDoc {
    source: String,
    end: &'static str,
    snapshot: Option<u64>,
    signal: Option<String>,
    end_unix_ms: u64,
    live_bytes: u64,
    live_allocations: u64,
}

#[derive(Serialize)]
struct LiveDoc {
    bytes: u64,
    allocations: u64,
}

#[derive(Serialize)]
struct GrowthRowDoc<'a> {
    suspect: bool,
    /// Why a callsite that grew is not a suspect; null for suspects.
    not_suspect: Option<&'static str>,
    api: &'a str,
    /// The cache or library handle that holds what the callsite allocated (its rule id).
    held_by: Option<&'a str>,
    /// What growth of that cache means, where the rule says.
    held_by_note: Option<&'a str>,
    first_bytes: u64,
    last_bytes: u64,
    first_allocations: u64,
    last_allocations: u64,
    growth_bytes: i128,
    growth_allocations: i128,
    /// Index in `series` of the peak the growth is measured to.
    peak: usize,
    /// Bytes freed between the peak and the last dump.
    released_bytes: u64,
    bytes_per_hour: Option<f64>,
    intervals: u64,
    grew_intervals: u64,
    shrank_intervals: u64,
    series: Vec<LiveDoc>,
    /// What it kept through the interval ending at each dump (its floor).
    floors: Vec<LiveDoc>,
    /// The rule for long series: what it judged and measured; null for a short series.
    evidence: Option<EvidenceDoc>,
    frames: Frames<'a>,
    hidden_frames: usize,
    omitted_frames: usize,
}

#[derive(Serialize)]
struct EvidenceDoc {
    kept: Vec<LiveDoc>,
    ends_at_finalizing: bool,
    rose: u64,
    fell: u64,
    late: u64,
    late_highs: u64,
    expected_late_highs: f64,
    p_highs: f64,
    p_trend: f64,
    alpha: f64,
}

fn live_docs(c: &[Counts]) -> Vec<LiveDoc> {
    c.iter()
        .map(|c| LiveDoc {
            bytes: c.bytes,
            allocations: c.allocations,
        })
        .collect()
}

#[derive(Serialize)]
struct SeriesDoc<'a> {
    pid: u32,
    ppid: u32,
    exe: &'a str,
    argv: &'a [String],
    rank: Option<i64>,
    forked_from: Option<u32>,
    start_unix_ms: u64,
    span_ms: u64,
    dumps: Vec<PointDoc>,
    suspects: u64,
    suspect_growth_bytes: u64,
    suspects_not_shown: u64,
    /// Pools whose blocks are segments, holding blocks here with no suspect among them: growth
    /// below their granularity does not show (`coarse_pools_note` says so in words).
    coarse_pools: Vec<&'a str>,
    coarse_pools_note: Option<String>,
    callsites: Vec<GrowthRowDoc<'a>>,
}

#[derive(Serialize)]
struct SkippedDoc<'a> {
    pid: u32,
    exe: &'a str,
    source: String,
}

#[derive(Serialize)]
struct GrowthGateDoc {
    failed: bool,
    exit_code: u8,
    max_leaked_bytes: u64,
    tolerated: bool,
    /// Under `run --growth`: nothing grew, but the exit report failed the gate.
    at_exit: Option<AtExitDoc>,
}

#[derive(Serialize)]
struct AtExitDoc {
    reasons: Vec<&'static str>,
    leaked_bytes: u64,
    leaked_allocations: u64,
}

#[derive(Serialize)]
struct GrowthDoc<'a> {
    cudaleak_growth: u32,
    tool: Tool,
    rule: &'static str,
    min_bytes: u64,
    processes: Vec<SeriesDoc<'a>>,
    skipped: Vec<SkippedDoc<'a>>,
    suppressed: Vec<RuleCountDoc>,
    suspects: u64,
    suspect_growth_bytes: u64,
    gate: GrowthGateDoc,
}

#[derive(Serialize)]
struct RuleCountDoc {
    rule: String,
    file: String,
    line: usize,
    allocations: u64,
    bytes: u64,
}

fn growth_doc(g: &GrowthFindings) -> GrowthDoc<'_> {
    GrowthDoc {
        cudaleak_growth: REPORT_VERSION,
        tool: TOOL,
        rule: RULE_TEXT,
        min_bytes: g.min_bytes,
        processes: g
            .series
            .iter()
            .map(|s| SeriesDoc {
                pid: s.process.pid,
                ppid: s.process.ppid,
                exe: &s.process.exe,
                argv: &s.process.argv,
                rank: s.process.rank,
                forked_from: s.process.forked_from,
                start_unix_ms: s.process.start_unix_ms,
                span_ms: s.span_ms,
                dumps: s
                    .points
                    .iter()
                    .map(|p| PointDoc {
                        source: p.source.display().to_string(),
                        end: p.end.as_str(),
                        snapshot: p.snapshot,
                        signal: p.signal.clone(),
                        end_unix_ms: p.end_unix_ms,
                        live_bytes: p.live.bytes,
                        live_allocations: p.live.allocations,
                    })
                    .collect(),
                suspects: s.suspects,
                suspect_growth_bytes: s.suspect_growth_bytes,
                suspects_not_shown: s.suspects_not_shown,
                coarse_pools: s.coarse_pools.iter().map(|h| h.id.as_str()).collect(),
                coarse_pools_note: coarse_pools_text(&s.coarse_pools),
                callsites: s
                    .rows
                    .iter()
                    .map(|r| GrowthRowDoc {
                        suspect: r.is_suspect(),
                        not_suspect: r.not_suspect.map(|n| n.as_str()),
                        api: &r.api,
                        held_by: r.held_by.as_ref().map(|h| h.id.as_str()),
                        held_by_note: r.held_by.as_ref().and_then(|h| h.grows.as_deref()),
                        first_bytes: r.first().bytes,
                        last_bytes: r.last().bytes,
                        first_allocations: r.first().allocations,
                        last_allocations: r.last().allocations,
                        growth_bytes: r.growth_bytes(),
                        growth_allocations: r.growth_blocks(),
                        peak: r.peak,
                        released_bytes: r.released_bytes(),
                        // JSON has no infinity: an absurd rate is written as null.
                        bytes_per_hour: r.bytes_per_hour.filter(|x| x.is_finite()).map(f64::round),
                        intervals: r.intervals(),
                        grew_intervals: r.grew_intervals,
                        shrank_intervals: r.shrank_intervals,
                        series: live_docs(&r.series),
                        floors: live_docs(&r.floors),
                        evidence: r.evidence.as_ref().map(|e| EvidenceDoc {
                            kept: live_docs(&e.kept),
                            ends_at_finalizing: e.ends_at_finalizing,
                            rose: e.stats.rose,
                            fell: e.stats.fell,
                            late: e.stats.late,
                            late_highs: e.stats.late_highs,
                            expected_late_highs: e.stats.expected_late_highs,
                            p_highs: e.stats.p_highs,
                            p_trend: e.stats.p_trend,
                            alpha: e.stats.alpha,
                        }),
                        frames: frames(&r.stack),
                        hidden_frames: r.stack.hidden,
                        omitted_frames: r.stack.omitted,
                    })
                    .collect(),
            })
            .collect(),
        skipped: g
            .skipped
            .iter()
            .map(|s| SkippedDoc {
                pid: s.process.pid,
                exe: &s.process.exe,
                source: s.source.display().to_string(),
            })
            .collect(),
        suppressed: g
            .rules
            .iter()
            .zip(&g.suppressed)
            .map(|(r, c)| RuleCountDoc {
                rule: r.text(),
                file: r.file.display().to_string(),
                line: r.line,
                allocations: c.allocations,
                bytes: c.bytes,
            })
            .collect(),
        suspects: g.suspects,
        suspect_growth_bytes: g.suspect_growth_bytes,
        gate: GrowthGateDoc {
            failed: g.exit_code != 0,
            exit_code: g.exit_code,
            max_leaked_bytes: g.max_growth_bytes,
            tolerated: g.tolerated,
            at_exit: g.at_exit.as_ref().map(|a| AtExitDoc {
                reasons: a.reasons.clone(),
                leaked_bytes: a.leaked.bytes,
                leaked_allocations: a.leaked.allocations,
            }),
        },
    }
}

fn write_doc<T: Serialize>(doc: &T, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, doc).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

impl Reporter for Json {
    fn report(&self, f: &Findings, _view: &View, out: &mut dyn Write) -> io::Result<()> {
        write_doc(&document(f), out)
    }

    fn growth(&self, g: &GrowthFindings, _view: &View, out: &mut dyn Write) -> io::Result<()> {
        write_doc(&growth_doc(g), out)
    }

    fn diff(&self, d: &DiffFindings, _view: &View, out: &mut dyn Write) -> io::Result<()> {
        let doc = DiffDoc {
            cudaleak_diff: REPORT_VERSION,
            tool: TOOL,
            old: side(&d.old),
            new: side(&d.new),
            callsites: d
                .rows
                .iter()
                .map(|r| DiffRowDoc {
                    trend: match r.trend() {
                        1 => "grew",
                        -1 => "shrank",
                        _ => "unchanged",
                    },
                    api: &r.api,
                    old_bytes: r.old.bytes,
                    old_allocations: r.old.allocations,
                    new_bytes: r.new.bytes,
                    new_allocations: r.new.allocations,
                    delta_bytes: r.delta_bytes(),
                    delta_allocations: r.delta_blocks(),
                    frames: frames(&r.stack),
                })
                .collect(),
            callsites_not_shown: d.rows_not_shown,
            grew: d.grew,
            shrank: d.shrank,
            unchanged: d.unchanged,
            delta_bytes: i128::from(d.new.live.bytes) - i128::from(d.old.live.bytes),
        };
        write_doc(&doc, out)
    }
}
