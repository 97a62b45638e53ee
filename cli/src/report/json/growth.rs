//! The document of `report --growth` (`"cudaleak_growth": 1`): per process its dumps and the
//! callsites that grew, with the evidence the suspect rule weighed; the skipped processes, the
//! suppressions and the gate.

use serde::Serialize;

use super::{frames, Frames, Tool, REPORT_VERSION, TOOL};
use crate::analyze::Counts;
use crate::growth::{FrameworkGrowth, GrowthFindings, Point, RULE_TEXT};
use crate::report::wording::{coarse_pools_text, left_out_text, unjudged_text};

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
    /// A framework's own count (not a driver callsite); null for a callsite.
    framework: Option<FrameworkDoc<'a>>,
}

#[derive(Serialize)]
struct FrameworkDoc<'a> {
    name: &'a str,
    backend: Option<&'a str>,
    device: i32,
    /// Why no line is named, and what to do; null when the largest group names one.
    note: Option<&'a str>,
    /// The live blocks the framework's own record saw made, per Python stack, largest first.
    groups: Vec<RecordGroupDoc<'a>>,
}

#[derive(Serialize)]
struct RecordGroupDoc<'a> {
    blocks: u64,
    bytes: u64,
    frames: Frames<'a>,
    hidden_frames: usize,
    omitted_frames: usize,
}

fn framework_doc(f: &FrameworkGrowth) -> FrameworkDoc<'_> {
    FrameworkDoc {
        name: &f.framework,
        backend: f.backend.as_deref(),
        device: f.device,
        note: f.note.as_deref(),
        groups: f
            .groups
            .iter()
            .map(|g| RecordGroupDoc {
                blocks: g.blocks,
                bytes: g.bytes,
                frames: frames(&g.stack),
                hidden_frames: g.stack.hidden,
                omitted_frames: g.stack.omitted,
            })
            .collect(),
    }
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
    /// Dumps of the process the series leaves out (not in `dumps`), and why in words.
    left_out: Vec<PointDoc>,
    left_out_note: Option<String>,
    /// Whether the rules could judge the series (two dumps at least); else why not, in words.
    judged: bool,
    unjudged_note: Option<String>,
    callsites: Vec<GrowthRowDoc<'a>>,
}

fn point_doc(p: &Point) -> PointDoc {
    PointDoc {
        source: p.source.display().to_string(),
        end: p.end.as_str(),
        snapshot: p.snapshot,
        signal: p.signal.clone(),
        end_unix_ms: p.end_unix_ms,
        live_bytes: p.live.bytes,
        live_allocations: p.live.allocations,
    }
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
pub(super) struct GrowthDoc<'a> {
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

/// The document of `cudaleak report --growth --format json`.
pub(super) fn document(g: &GrowthFindings) -> GrowthDoc<'_> {
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
                dumps: s.points.iter().map(point_doc).collect(),
                suspects: s.suspects,
                suspect_growth_bytes: s.suspect_growth_bytes,
                suspects_not_shown: s.suspects_not_shown,
                coarse_pools: s.coarse_pools.iter().map(|h| h.id.as_str()).collect(),
                coarse_pools_note: coarse_pools_text(&s.coarse_pools),
                left_out: s
                    .left_out
                    .iter()
                    .flat_map(|l| &l.points)
                    .map(point_doc)
                    .collect(),
                left_out_note: s.left_out.as_ref().map(|l| {
                    let names: Vec<String> = l
                        .points
                        .iter()
                        .map(|p| p.source.display().to_string())
                        .collect();
                    left_out_text(l, &names)
                }),
                judged: s.judged(),
                unjudged_note: (!s.judged()).then(|| unjudged_text(s)),
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
                        framework: r.framework.as_deref().map(framework_doc),
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
