//! The sentences of a report, each written once: the summary lines and verdicts, the notes and
//! the advice, and every sentence more than one format writes. Where a sentence holds program
//! text, a format passes in the pieces already laid out its own way (escaped, in bold, in code),
//! or, for a group's line, its [`Markup`] that lays them out; then it lays the sentence out (a
//! line, a heading, a table cell). The words the sentences are made of (sizes, counts, frames,
//! names) are in `mod.rs`.
//!
//! Nothing here escapes or decides anything: what a piece needs is its format's business (plain
//! [`Markup`] only cleans program text, as every format does), what is shown was settled in
//! `analyze`.

use cudaleak_format::{self as format, EventType};

use super::{clean, counts_text, error_text, folded_text, frame_text_short, plural, signed_human};
use super::{gate_reasons, group_what, human_bytes, human_duration, own_frame, placement};
use crate::analyze::{basename, PoolGrowth, QuietProcess, ScriptEnd};
use crate::analyze::{
    sum_groups, Counts, DiffFindings, Findings, Folded, LeakGroup, ProcessFindings, StackView,
};
use crate::growth::{GrowthFindings, GrowthRow, HeldBy, LeftOut, LeftOutWhy, Series, RULE_TEXT};

/// What a process's section says when nothing leaked.
pub const NO_LEAKS: &str = "No leaks.";

/// What a series' section says when no callsite grew.
pub const NO_GROWTH: &str = "No callsite grew.";

/// Where a stack has no frame to show.
pub const NO_FRAMES: &str = "(no frames)";

/// The head of what caches and library handles hold.
pub const CACHED_TITLE: &str = "Held by caches and library handles";

/// The head of the calls that failed at teardown.
pub const TEARDOWN_TITLE: &str = "Teardown notes (not errors)";

/// How a format lays out the pieces of a sentence it takes from here: a size, words of ours,
/// program text. The defaults are plain text (SARIF's messages, suppression files).
pub trait Markup {
    /// A group's size: [`human_bytes`] unless the format shows bytes exactly or in bold.
    fn size(&self, bytes: u64) -> String {
        human_bytes(bytes)
    }
    /// Words of ours (what a group holds, where it lives), escaped where the format must.
    fn words(&self, s: &str) -> String {
        s.to_string()
    }
    /// Program text (an API's name): made safe to show ([`clean`]), escaped, set as code.
    fn code(&self, s: &str) -> String {
        clean(s).into_owned()
    }
}

/// Plain text: [`Markup`]'s defaults.
pub struct Plain;

impl Markup for Plain {}

/// What a group's line says it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Its allocations, and the library handles never destroyed that own them
    /// ([`super::group_what`]).
    Handles,
    /// Its allocations only.
    Allocations,
}

/// `4.00 MiB in 3 allocations via cudaMalloc (device 0)`: a leak, cache or managed group's line,
/// its pieces laid out by `m`.
pub fn group_text(g: &LeakGroup, holds: Holds, m: &dyn Markup) -> String {
    let what = match holds {
        Holds::Handles => group_what(g),
        Holds::Allocations => plural(g.allocations, "allocation", "allocations"),
    };
    group_line(
        &m.size(g.bytes),
        &m.words(&what),
        &m.code(&g.api),
        &m.words(&placement(g.kind, g.device)),
    )
}

/// [`group_text`]'s sentence, from its pieces laid out.
fn group_line(size: &str, what: &str, api: &str, placement: &str) -> String {
    format!("{size} in {what} via {api} {placement}")
}

/// A process's counters and bytes, as `--stats` and the HTML page state them: the figures are
/// written once here, in the order and words each format has always used (the text report's two
/// lines name each figure first, Markdown's sentence counts first, the HTML page puts the leaked
/// total first). None holds program text, so no format escapes them.
pub struct StatsText {
    /// `allocations 5, frees 2, failed allocations 0, bad frees 1, untracked frees 0` (text).
    pub calls: String,
    /// `bytes allocated 8.00 MiB, peak live 6.00 MiB, live at end 4.00 MiB in 3 blocks` (text).
    pub bytes: String,
    /// `5 allocations, 2 frees, 0 failed, 1 bad frees; 8.00 MiB allocated, peak live 6.00 MiB,
    /// live at end 4.00 MiB.` (Markdown, after its bold `Statistics:`).
    pub sentence: String,
    /// `Leaked: 4.00 MiB in 3 allocations from 2 callsites; peak live 6.00 MiB during the run;
    /// live at end 4.00 MiB.` (HTML, each process's first line).
    pub leaked: String,
}

/// [`StatsText`] of process `p`.
pub fn stats_text(p: &ProcessFindings) -> StatsText {
    let s = &p.summary;
    let (allocated, peak, live) = (
        human_bytes(s.bytes_allocated),
        human_bytes(s.peak_live_bytes),
        human_bytes(s.live_bytes),
    );
    StatsText {
        calls: format!(
            "allocations {}, frees {}, failed allocations {}, bad frees {}, untracked frees {}",
            s.allocations,
            s.frees,
            s.failed_allocations,
            p.bad_free_count(),
            s.untracked_frees
        ),
        bytes: format!(
            "bytes allocated {allocated}, peak live {peak}, live at end {live} in {}",
            plural(s.live_allocations, "block", "blocks")
        ),
        sentence: format!(
            "{} allocations, {} frees, {} failed, {} bad frees; {allocated} allocated, peak live \
             {peak}, live at end {live}.",
            s.allocations,
            s.frees,
            s.failed_allocations,
            p.bad_free_count()
        ),
        leaked: format!(
            "Leaked: {} from {}; peak live {peak} during the run; live at end {live}.",
            counts_text(p.leaked),
            plural(p.leaked.groups, "callsite", "callsites")
        ),
    }
}

/// A stack's innermost frame the user sees, for one-line listings (long C++ names shortened;
/// the stack itself has the whole name).
pub fn where_text(s: &StackView, root: Option<&str>) -> String {
    s.where_frame()
        .map_or(NO_FRAMES.into(), |f| frame_text_short(f, root))
}

/// `   … 18 frames in libtorch_cpu.so (--native)`: a run of frames folded in a stack.
pub fn folded_line(r: &Folded) -> String {
    format!("   {} (--native)", folded_text(r))
}

/// `3 more frames (--frames)`: what a stack's listing left out.
pub fn more_frames_text(n: u64) -> String {
    format!("{} (--frames)", plural(n, "more frame", "more frames"))
}

/// `3 more leak groups not shown (--top 5)`.
pub fn not_shown_text(n: u64, what: (&str, &str), why: &str) -> String {
    format!("{} not shown ({why})", plural(n, what.0, what.1))
}

/// ` (3 times)` after a call made more than once; nothing for once.
pub fn times_text(n: u64) -> String {
    if n > 1 {
        format!(" ({n} times)")
    } else {
        String::new()
    }
}

/// `2 (cudaErrorMemoryAllocation), 999`: the codes a call returned.
pub fn errors_text(api: &str, codes: &[i64]) -> String {
    let codes: Vec<String> = codes.iter().map(|&c| error_text(api, c)).collect();
    codes.join(", ")
}

/// `Double free`, `Invalid free`.
pub fn bad_free_label(kind: EventType) -> &'static str {
    if kind == EventType::DoubleFree {
        "Double free"
    } else {
        "Invalid free"
    }
}

/// What a bad free freed, after the call: `of memory that was already freed`.
pub fn bad_free_what(kind: EventType) -> &'static str {
    if kind == EventType::DoubleFree {
        "of memory that was already freed"
    } else {
        "of an address that was never allocated"
    }
}

/// The address a bad free passed (`0x7f3a00000000`), or nothing when the dump does not say.
pub fn address_text(address: Option<u64>) -> String {
    address.map_or(String::new(), |a| format!("{a:#x}"))
}

/// `the shim stopped recording early (WHY); this dump is partial`.
pub fn recording_stopped_text(why: &str) -> String {
    format!("the shim stopped recording early ({why}); this dump is partial")
}

/// `3 events were not stored (the event list was full); the counts include them`.
pub fn dropped_events_text(n: u64) -> String {
    format!(
        "{} not stored (the event list was full); the counts include them",
        plural(n, "event was", "events were")
    )
}

/// Why a call failed at teardown, after what it returned.
pub const SHUTTING_DOWN: &str = "because the CUDA runtime or driver was shutting down";

/// `3 calls failed because the CUDA runtime or driver was shutting down`.
pub fn teardown_text(n: u64) -> String {
    format!("{} failed {SHUTTING_DOWN}", plural(n, "call", "calls"))
}

/// `8.00 MiB in 2 allocations live from 1 callsite`: a process's managed memory.
pub fn managed_text(groups: &[LeakGroup]) -> String {
    format!(
        "{} live from {}",
        counts_text(sum_groups(groups)),
        plural(groups.len() as u64, "callsite", "callsites")
    )
}

/// `86.00 MiB in 120 allocations; not leaks, not counted by the gate (…)`: what caches and
/// library handles hold, and what the gate makes of it.
pub fn cached_text(total: Counts, f: &Findings) -> String {
    format!("{}; {}", counts_text(total), cached_gate_text(f))
}

/// `held by PyTorch's caching allocator [torch]`, then `: NOTE` (what growth of it means) where
/// the format gives one.
pub fn held_by_text(name: &str, id: &str, note: Option<&str>) -> String {
    let mut s = format!("held by {name} [{id}]");
    if let Some(n) = note {
        s.push_str(": ");
        s.push_str(n);
    }
    s
}

/// Under a leak that a pool still holds after the program emptied it (`report
/// --pools-emptied`): `still held by PyTorch CUDA caching allocator (native backend)
/// [pytorch-native] with its pools emptied (torch.cuda.empty_cache()): an object made here is
/// kept`.
pub fn kept_in_emptied_text(name: &str, id: &str, empty: &str) -> String {
    format!(
        "still {} with its pools emptied ({empty}): an object made here is kept",
        held_by_text(name, id, None)
    )
}

/// `326.55 MiB in 151 allocations via cudaMalloc at train.py:12`: a callsite that held memory
/// when the script ended (its API and place as the format lays them out).
pub fn script_end_line(held: Counts, api: &str, at: &str) -> String {
    format!("{} via {api} at {at}", counts_text(held))
}

/// The part of the verdict that names why the gate failed: `Gate failed (leaks)`.
pub fn gate_failed(reason: &str) -> String {
    format!("Gate failed ({reason})")
}

/// `Gate failed (leaks): exit status 23`.
pub fn gate_failed_text(reason: &str, exit_code: u8) -> String {
    format!("{}: exit status {exit_code}", gate_failed(reason))
}

/// `leaked 1.00 MiB are within --max-leaked-bytes 2.00 MiB`: why leaks did not fail the gate
/// (after `the`).
pub fn tolerated_text(f: &Findings) -> String {
    format!(
        "leaked {} are within --max-leaked-bytes {}",
        human_bytes(f.totals.leaked.bytes),
        human_bytes(f.gate.max_leaked_bytes)
    )
}

/// Where the growth rule is written in full.
pub const RULE_DOC: &str = "docs/report-format.md, \"The growth rule\"";

/// Columns the rule paragraph is broken at: two lines, not one of 600 characters (issue 44).
const RULE_WIDTH: usize = 120;

/// `Suspect rule: ….` ([`RULE_TEXT`]) and where it is written in full, broken into lines of
/// at most [`RULE_WIDTH`] columns at spaces (a format that joins lines sees one paragraph).
pub fn suspect_rule_text() -> String {
    let whole = format!("Suspect rule: {RULE_TEXT}. Full rule: {RULE_DOC}.");
    let mut out = String::with_capacity(whole.len());
    let mut line = 0;
    for word in whole.split(' ') {
        let width = word.chars().count();
        if line > 0 && line + 1 + width > RULE_WIDTH {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += width;
    }
    out
}

/// `6 dumps over 5m 30s (snapshot 1 → exit); live 1.00 MiB → 4.00 MiB`: a series' span, from
/// the labels of its dumps and its live memory at each end as the format writes them.
pub fn series_line(s: &Series, labels: &str, first: &str, last: &str) -> String {
    format!(
        "{} over {} ({labels}); live {first} → {last}",
        plural(s.points.len() as u64, "dump", "dumps"),
        human_duration(s.span_ms)
    )
}

/// `pid 4711: ./app (exited) has only one dump (cudaleak.4711.json): nothing to compare`; the
/// dump's name where the format gives it.
pub fn one_dump_text(process: &str, source: Option<&str>) -> String {
    match source {
        Some(s) => format!("{process} has only one dump ({s}): nothing to compare"),
        None => format!("{process} has only one dump: nothing to compare"),
    }
}

/// `Grew`, `Shrank`, `Unchanged`: a diff row by its trend.
pub fn trend_label(trend: i8) -> &'static str {
    match trend {
        1 => "Grew",
        -1 => "Shrank",
        _ => "Unchanged",
    }
}

/// `live 1.00 MiB → 2.50 MiB (+1.50 MiB); 2 callsites grew`: the head of a diff.
pub fn diff_grew_text(d: &DiffFindings) -> String {
    let delta = i128::from(d.new.live.bytes) - i128::from(d.old.live.bytes);
    format!(
        "live {} → {} ({}); {} grew",
        human_bytes(d.old.live.bytes),
        human_bytes(d.new.live.bytes),
        signed_human(delta),
        plural(d.grew, "callsite", "callsites")
    )
}

/// `old.json — pid 3001: ./app (snapshot 1, still running), 4.00 MiB in 2 allocations live`:
/// one side of a diff, from the dump's name and the process as the format writes them.
pub fn diff_side_text(source: &str, process: &str, live: Counts) -> String {
    format!("{source} — {process}, {} live", counts_text(live))
}

/// What a process without leak groups shows: [`NO_LEAKS`], or for a process `cudaleak attach`
/// left running, that nothing it allocated while attached is still live.
pub fn no_groups_text(p: &ProcessFindings) -> &'static str {
    if p.process.end == format::End::Detach {
        "Nothing allocated while attached is still live."
    } else {
        NO_LEAKS
    }
}

/// `Leak` before a group's number: `Live` for a process `cudaleak attach` left running, whose
/// blocks are those allocated while attached and still live, not known to be leaked.
pub fn group_noun(p: &ProcessFindings) -> &'static str {
    if p.process.end == format::End::Detach {
        "Live"
    } else {
        "Leak"
    }
}

/// Under a leak group a framework's own record named (a window's report, `--since`): `kept in
/// PyTorch's caching allocator, out of the driver's sight; PyTorch's own record named these
/// blocks`. A framework the CLI does not know is named by its id.
pub fn framework_kept_text(id: &str) -> String {
    match crate::growth::framework(id) {
        Some(f) => format!(
            "kept in {}, out of the driver's sight; {}'s own record named these blocks",
            f.pool_name, f.title
        ),
        None => format!(
            "kept in {id}'s pool, out of the driver's sight; its own record named these blocks"
        ),
    }
}

/// `PyTorch's own record: NOTE`: why a framework's record could not be turned on or read (or
/// its frames), in a window's report.
pub fn record_note_text(id: &str, note: &str) -> String {
    let title = crate::growth::framework(id).map_or(id, |f| f.title);
    format!("{title}'s own record: {note}")
}

/// `SUMMARY: 1.06 MiB leaked in 12 allocations from 3 callsites (1 process)`, then
/// `; 86.00 MiB held by caches` when caches hold anything. Processes that all still run after
/// `cudaleak attach` left them: `… still live in …` (their blocks are not known to be leaked).
pub fn summary_line(f: &Findings) -> String {
    let t = &f.totals;
    let handles = match t.leaked_handles {
        0 => String::new(),
        n => format!(" and {}", plural(n, "library handle", "library handles")),
    };
    let detached = !f.processes.is_empty()
        && f.processes
            .iter()
            .all(|p| p.process.end == format::End::Detach);
    let mut s = format!(
        "SUMMARY: {} {} in {}{handles} from {} ({})",
        human_bytes(t.leaked.bytes),
        if detached { "still live" } else { "leaked" },
        plural(t.leaked.allocations, "allocation", "allocations"),
        plural(t.callsites, "callsite", "callsites"),
        plural(t.processes, "process", "processes"),
    );
    if t.cached.allocations > 0 {
        s.push_str(&format!("; {} held by caches", human_bytes(t.cached.bytes)));
    }
    s
}

/// The report's verdict line, without a full stop: what the command returns and why —
/// `Gate failed (leaks): exit status 23`, or under `run` when the program failed, its status
/// (`Gate failed (leaks); the program was killed by SIGTERM: exit status 143, the program's`).
/// `None` when the gate passes and the program (if any) succeeded.
pub fn exit_line(f: &Findings) -> Option<String> {
    let reasons = gate_reasons(f);
    let failed = (!reasons.is_empty() && f.verdict.exit_code != 0)
        .then(|| format!("Gate failed ({})", reasons.join(" and ")));
    match (failed, f.program) {
        (None, None) => None,
        (Some(gate), None) => Some(format!("{gate}: exit status {}", f.verdict.exit_code)),
        (gate, Some(p)) => Some(format!(
            "{}he program {}: exit status {}, the program's",
            gate.map_or("T".to_string(), |g| format!("{g}; t")),
            p.how(),
            p.shell()
        )),
    }
}

/// `SUMMARY: …; Gate failed (leaks): exit status 23; report written to report.html`: what
/// stderr says when the report went to a file, so a terminal or a CI log still shows the
/// verdict (`gate`: the verdict line, when there is one).
pub fn written_line(summary: &str, gate: Option<&str>, path: &str) -> String {
    match gate {
        Some(g) => format!("{summary}; {g}; report written to {path}"),
        None => format!("{summary}; report written to {path}"),
    }
}

/// What the cached-memory sections say about the gate.
pub fn cached_gate_text(f: &Findings) -> &'static str {
    if f.gate.count_cached {
        "counted as leaked by the gate (--fail-on strict)"
    } else {
        "not leaks, not counted by the gate (--fail-on strict counts them)"
    }
}

/// What a pool still growing when the dump was written means (text, Markdown and HTML say it
/// the same way).
pub fn pool_growth_text(g: &PoolGrowth, end: format::End) -> String {
    let when = match end {
        format::End::Exit => "at exit",
        format::End::Signal => "when the program was killed",
        format::End::Snapshot => "at this snapshot",
        format::End::Detach => "at detach",
    };
    format!(
        "still growing {when}: {} of its {} was taken in the second half of the run, in {} of \
         its 10 tenths. A pool that grows to the end holds what the program keeps (a tensor \
         every step); `cudaleak run --growth` finds what grows (with --exact-pools, the line \
         that keeps it).",
        human_bytes(g.second_half),
        human_bytes(g.held),
        g.tenths
    )
}

/// One cache's line when its callsites are not listed (`--show-cached` lists them): `from 11
/// callsites; top line of yours: Generator.forward at main.py:158`.
pub fn cache_callsites_text(groups: &[&LeakGroup], root: Option<&str>) -> String {
    let mut s = format!(
        "from {}",
        plural(groups.len() as u64, "callsite", "callsites")
    );
    if let Some(f) = groups.iter().find_map(|g| own_frame(&g.stack)) {
        s.push_str(&format!(
            "; top line of yours: {}",
            frame_text_short(f, root)
        ));
    }
    s
}

/// The head of the "script ended" note: `When the script ended (Python began to shut down
/// 14.2 s after the start) it held 326.55 MiB in 151 allocations; the largest and the most
/// numerous (teardown freed what the exit dump no longer holds)`.
pub fn script_end_text(e: &ScriptEnd) -> String {
    format!(
        "When the script ended (Python began to shut down {} after the start) it held {}; \
         the largest and the most numerous (teardown freed what the exit dump no longer holds)",
        human_duration(e.after_ms),
        counts_text(e.held)
    )
}

/// `ptxas (11), nvlink (2)`: the quiet processes by program name, most first.
pub fn quiet_programs(quiet: &[QuietProcess]) -> String {
    let mut names: Vec<(String, u64)> = Vec::new();
    for q in quiet {
        let name = clean(basename(&q.exe)).into_owned();
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 += 1,
            None => names.push((name, 1)),
        }
    }
    names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let shown: Vec<String> = names
        .iter()
        .take(8)
        .map(|(n, c)| format!("{n} ({c})"))
        .collect();
    let mut s = shown.join(", ");
    if names.len() > 8 {
        s.push_str(&format!(", {} more programs", names.len() - 8));
    }
    s
}

/// `11 processes made no CUDA allocation and are not shown: ptxas (11)`; empty without any.
pub fn quiet_line(f: &Findings) -> String {
    if f.quiet.is_empty() {
        return String::new();
    }
    format!(
        "{} no CUDA allocation and {} not shown: {}",
        plural(f.quiet.len() as u64, "process made", "processes made"),
        if f.quiet.len() == 1 { "is" } else { "are" },
        quiet_programs(&f.quiet)
    )
}

/// The advice attached to managed memory (seed §3.3).
pub const MANAGED_ADVICE: &str =
    "Managed (unified) memory is a migration and capacity risk: pages \
move between host and GPU on demand (slow, and page-fault storms when several streams touch them), \
and host memory backs them when the GPU is oversubscribed. If only the GPU touches this memory, \
prefer device memory (cudaMalloc) plus explicit cudaMemcpy.";

/// The advice attached to failed allocations (seed: check every allocation).
pub const FAILED_ADVICE: &str = "Check the result of every allocation: after a failure the \
pointer is not set, and code that goes on uses garbage.";

/// The help attached to teardown notes.
pub const TEARDOWN_NOTE_HELP: &str = "At exit the CUDA runtime and driver tear down; calls made \
then fail with cudaErrorCudartUnloading / CUDA_ERROR_DEINITIALIZED (4), or after exit began with \
cudaErrorDeviceUninitialized / CUDA_ERROR_INVALID_CONTEXT (201) or CUDA_ERROR_NOT_INITIALIZED (3). \
The memory is reclaimed with the context; nothing to fix.";

/// `SUMMARY: 2 growth suspects (+1.50 MiB) in 1 process (9 dumps)`, then `; 2.00 MiB in 4
/// allocations leaked at exit` under `run --growth`.
pub fn growth_summary_line(g: &GrowthFindings) -> String {
    let dumps: usize = g.series.iter().map(|s| s.points.len()).sum();
    let mut s = format!(
        "SUMMARY: {} (+{}) in {} ({})",
        plural(g.suspects, "growth suspect", "growth suspects"),
        human_bytes(g.suspect_growth_bytes),
        plural(g.series.len() as u64, "process", "processes"),
        plural(dumps as u64, "dump", "dumps"),
    );
    if let Some(a) = &g.at_exit {
        s.push_str(&format!("; {} leaked at exit", counts_text(a.leaked)));
    }
    let unjudged = g.series.iter().filter(|s| !s.judged()).count() as u64;
    if unjudged > 0 {
        s.push_str(&format!(
            "; {} not be judged",
            plural(unjudged, "process could", "processes could")
        ));
    }
    s
}

/// Why a growth report's gate failed: `growth`, or under `run --growth` the exit report's
/// reasons (`leaks at exit`).
pub fn growth_gate_reason(g: &GrowthFindings) -> String {
    match &g.at_exit {
        Some(a) => format!("{} at exit", a.reasons.join(" and ")),
        None => "growth".into(),
    }
}

/// Why the rule decided as it did, in a few words. Long series (the rule on what was kept):
/// `kept more in 12 of 13 intervals, new highs in 6 of the last 7 against 0.9 for a warming
/// cache`,
/// with `, less in 1` when it fell. Short series: `rose in 8 of 8 intervals` (and `, fell in
/// 1`; `, then 2.00 MiB released` when memory was freed after the peak).
pub fn steps_text(r: &GrowthRow) -> String {
    if let Some(e) = &r.evidence {
        let st = &e.stats;
        let mut s = format!(
            "kept more in {} of {}",
            st.rose,
            plural(r.intervals(), "interval", "intervals")
        );
        if st.fell > 0 {
            s.push_str(&format!(", less in {}", st.fell));
        }
        s.push_str(&format!(
            ", new highs in {} of the last {} against {:.1} for a warming cache",
            st.late_highs, st.late, st.expected_late_highs
        ));
        return s;
    }
    let mut s = format!(
        "rose in {} of {}",
        r.grew_intervals,
        plural(r.intervals(), "interval", "intervals")
    );
    if r.shrank_intervals > 0 {
        s.push_str(&format!(", fell in {}", r.shrank_intervals));
    }
    if r.released_bytes() > 0 {
        s.push_str(&format!(
            " up to its peak, then {} released",
            human_bytes(r.released_bytes())
        ));
    }
    s
}

/// Live bytes at each dump: all of them up to 12, else the first six and the last five.
pub fn series_text(r: &GrowthRow) -> String {
    bytes_list(&r.series)
}

/// Bytes of each point: all of them up to 12, else the first six and the last five.
fn bytes_list(points: &[Counts]) -> String {
    let v: Vec<String> = points.iter().map(|c| human_bytes(c.bytes)).collect();
    if v.len() <= 12 {
        return v.join(", ");
    }
    format!("{}, …, {}", v[..6].join(", "), v[v.len() - 5..].join(", "))
}

/// What a row kept at each judged point (long series only), shortened like [`series_text`],
/// and `(until Python began to shut down)` when the series ends there (a framework's count:
/// `(until the script ended)`, its last read).
pub fn kept_text(r: &GrowthRow) -> Option<String> {
    let e = r.evidence.as_ref()?;
    let mut s = bytes_list(&e.kept);
    if e.ends_at_finalizing {
        s.push_str(match r.framework {
            Some(_) => " (until the script ended)",
            None => " (until Python began to shut down)",
        });
    }
    Some(s)
}

/// Further groups of a framework's record listed under its row's stack; the rest are counted.
pub const RECORD_GROUPS_SHOWN: usize = 3;

/// `also 1.50 MiB in 12 blocks made at eval_step at train.py:40`: a further group of live
/// blocks a framework's record named, at its first frame of the program's own (as the format
/// lays it out).
pub fn record_group_text(bytes: u64, blocks: u64, at: &str) -> String {
    format!(
        "also {} in {} made at {at}",
        human_bytes(bytes),
        plural(blocks, "block", "blocks")
    )
}

/// `… 4 more stacks in its record`: the groups of a framework's record not listed.
pub fn record_groups_rest_text(n: u64) -> String {
    format!("… {} in its record", plural(n, "more stack", "more stacks"))
}

/// Why a series leaves some of its process's dumps out, from their names as the format writes
/// them: `the exit dump (cudaleak.2878.json) is left out: …`.
pub fn left_out_text(l: &LeftOut, names: &[String]) -> String {
    let what = match l.points.len() {
        1 => format!("the exit dump ({}) is", names.join(", ")),
        _ => format!("the exit dumps ({}) are", names.join(", ")),
    };
    match l.why {
        LeftOutWhy::PythonTeardown => format!(
            "{what} left out: the shim that wrote this Python program's dumps (schema {}) did not \
             record when the interpreter began to shut down, so an exit dump, written after \
             teardown freed what the script held, may read as released; the series is its \
             snapshots",
            l.schema
        ),
    }
}

/// What a series that has fewer than two dumps left says instead of a verdict.
pub fn unjudged_text(s: &Series) -> String {
    let left = match s.points.len() {
        0 => "no snapshot is left".to_string(),
        n => format!(
            "only {} left",
            plural(n as u64, "snapshot is", "snapshots are")
        ),
    };
    format!(
        "Cannot be judged: with the exit dump left out, {left}, and growth needs two dumps; \
         take snapshots more often (CUDALEAK_SNAPSHOT_INTERVAL=SECONDS) or record it again with \
         a newer shim (`cudaleak run --growth`)"
    )
}

/// Processes with one dump named in a growth report's notes; the rest are counted (a JAX run
/// starts a hundred ptxas processes, each dumped once).
pub const NAMED_SKIPPED: usize = 5;

/// The note on the processes beyond [`NAMED_SKIPPED`], if any.
pub fn skipped_rest_text(skipped: usize) -> Option<String> {
    (skipped > NAMED_SKIPPED).then(|| {
        format!(
            "… and {} with one dump each (the JSON report lists them all)",
            plural(
                (skipped - NAMED_SKIPPED) as u64,
                "more process",
                "more processes"
            )
        )
    })
}

/// The note for pools whose blocks are segments and that show no suspect: growth inside a
/// segment does not reach the driver (issue 22; docs/report-format.md).
pub fn coarse_pools_text(pools: &[HeldBy]) -> Option<String> {
    if pools.is_empty() {
        return None;
    }
    let names: Vec<String> = pools
        .iter()
        .map(|h| format!("{} [{}]", h.name, h.id))
        .collect();
    Some(format!(
        "{} held blocks as segments shared by many objects: growth smaller than a segment, or \
         than the room the pool took ahead, does not show (below the pool's granularity); to \
         see each object's growth turn the pool off (PyTorch, JAX: run with --exact-pools; \
         others: `cudaleak report --list-caches`)",
        names.join(", ")
    ))
}

/// `SUMMARY: live 1.00 MiB → 2.50 MiB (+1.50 MiB); 2 callsites grew, 0 shrank, 5 unchanged`.
pub fn diff_summary_line(d: &DiffFindings) -> String {
    format!(
        "SUMMARY: {}, {} shrank, {} unchanged",
        diff_grew_text(d),
        d.shrank,
        d.unchanged
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_pool_is_described_at_the_moment_of_its_dump() {
        let g = PoolGrowth {
            rule: 0,
            held: 8 << 20,
            second_half: 3 << 20,
            tenths: 5,
        };
        let exit = pool_growth_text(&g, format::End::Exit);
        assert!(
            exit.starts_with(
                "still growing at exit: 3.00 MiB of its 8.00 MiB was taken in the second half \
                 of the run, in 5 of its 10 tenths."
            ),
            "{exit}"
        );
        assert!(pool_growth_text(&g, format::End::Snapshot)
            .starts_with("still growing at this snapshot: "));
        assert!(pool_growth_text(&g, format::End::Signal)
            .starts_with("still growing when the program was killed: "));
    }

    #[test]
    fn counts_in_sentences_say_once_and_many_apart() {
        assert_eq!(times_text(1), "", "a call made once has no count");
        assert_eq!(times_text(3), " (3 times)");
        assert_eq!(
            teardown_text(1),
            "1 call failed because the CUDA runtime or driver was shutting down"
        );
        assert_eq!(
            not_shown_text(2, ("more group", "more groups"), "--top 1"),
            "2 more groups not shown (--top 1)"
        );
        assert_eq!(more_frames_text(1), "1 more frame (--frames)");
        assert_eq!(
            dropped_events_text(1),
            "1 event was not stored (the event list was full); the counts include them"
        );
    }

    #[test]
    fn sentences_keep_the_pieces_a_format_laid_out() {
        assert_eq!(
            group_line(
                "<b>4.00 MiB</b>",
                "2 allocations",
                "<code>cudaMalloc</code>",
                "(device 0)"
            ),
            "<b>4.00 MiB</b> in 2 allocations via <code>cudaMalloc</code> (device 0)"
        );
        assert_eq!(
            one_dump_text("pid 7: ./a (exited)", None),
            "pid 7: ./a (exited) has only one dump: nothing to compare"
        );
        assert_eq!(
            held_by_text("a pool", "pool", Some("grows")),
            "held by a pool [pool]: grows"
        );
        assert_eq!(
            bad_free_what(EventType::InvalidFree),
            "of an address that was never allocated"
        );
        assert_eq!(address_text(Some(0x1234)), "0x1234");
        assert_eq!(address_text(None), "");
    }

    /// Issue 44: the paragraph after every growth report was one line of 600 characters and
    /// said "rise in at least two" where an attach's two dumps make a suspect of one rise.
    #[test]
    fn suspect_rule_paragraph_is_two_short_lines_that_agree_with_the_short_rule() {
        let text = suspect_rule_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() <= 2, "{text}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= RULE_WIDTH),
            "{text}"
        );
        assert!(text.ends_with("Full rule: docs/report-format.md, \"The growth rule\"."));
        // Two dumps: one interval, one rise, a suspect; the words must allow it.
        assert_eq!(crate::growth::judge(&[0, 4096]), Some((1, Ok(()))));
        assert!(text.contains("(1 if 1 interval led to the peak)"), "{text}");
        // Three dumps with two intervals up to the peak and one rise: not a suspect.
        assert!(crate::growth::judge(&[0, 0, 4096]).is_some_and(|(_, v)| v.is_err()));
        assert!(text.contains("2+ rises"), "{text}");
    }
}
