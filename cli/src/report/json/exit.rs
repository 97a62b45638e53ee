//! The exit report's document (`"cudaleak_report": 1`): processes, leak groups, callsites,
//! failed allocations, bad frees, managed and cached memory, teardown notes, suppressions, the
//! summary and the gate. Field order is the order of these structs.

use serde::{Serialize, Serializer};

use super::{frames, Frames, Tool, REPORT_VERSION, TOOL};
use crate::analyze::{signal_name, Counts, Findings, LeakGroup, ProcessFindings, ProgramStatus};
use crate::report::wording::{framework_kept_text, record_note_text};
use crate::report::{cached_totals, error_name, gate_reasons, suppressed_per_rule};

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
    /// The framework whose own record named the blocks (a window's report, `--since`).
    #[serde(skip_serializing_if = "Option::is_none")]
    framework: Option<&'a str>,
    /// Where the blocks are and who named them, in words (with `framework`).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Serialize)]
struct RecordNoteDoc<'a> {
    framework: &'a str,
    note: &'a str,
    text: String,
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
        framework: g.framework.as_deref(),
        note: g.framework.as_deref().map(framework_kept_text),
    }
}

/// One kind of leak group of every process, in process order, each group serialized as it is
/// written: the document never holds a row per group (on 100 000 groups, a tenth of the
/// report's peak).
struct Groups<'a>(&'a Findings, fn(&ProcessFindings) -> &[LeakGroup]);

impl Serialize for Groups<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Groups(f, of) = *self;
        s.collect_seq(
            f.processes
                .iter()
                .flat_map(|p| of(p).iter().map(move |g| group(f, p.process.pid, g))),
        )
    }
}

/// The callsites merged over processes, serialized as they are written.
struct Callsites<'a>(&'a Findings);

impl Serialize for Callsites<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.callsites.iter().map(|c| Callsite {
            api: &c.api,
            bytes: c.bytes,
            allocations: c.allocations,
            processes: c.processes,
            frames: frames(&c.stack),
        }))
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
    /// Why a framework's own record could not be read (a window's report, `--since`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    record_notes: Vec<RecordNoteDoc<'a>>,
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
pub(super) struct Doc<'a> {
    cudaleak_report: u32,
    tool: Tool,
    processes: Vec<Process<'a>>,
    leaks: Groups<'a>,
    callsites: Callsites<'a>,
    failed_allocations: Vec<Failed<'a>>,
    bad_frees: Vec<BadFree<'a>>,
    managed: Groups<'a>,
    cached: Groups<'a>,
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

/// The document of `cudaleak report --format json`.
pub(super) fn document(f: &Findings) -> Doc<'_> {
    let mut doc = Doc {
        cudaleak_report: REPORT_VERSION,
        tool: TOOL,
        processes: Vec::new(),
        leaks: Groups(f, |p| &p.leaks),
        callsites: Callsites(f),
        failed_allocations: Vec::new(),
        bad_frees: Vec::new(),
        managed: Groups(f, |p| &p.managed),
        cached: Groups(f, |p| &p.cached),
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
            record_notes: p
                .record_notes
                .iter()
                .map(|n| RecordNoteDoc {
                    framework: &n.framework,
                    note: &n.note,
                    text: record_note_text(&n.framework, &n.note),
                })
                .collect(),
        });
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
