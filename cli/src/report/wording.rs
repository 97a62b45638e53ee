//! The sentences of a report that more than one format writes, each written once. A format
//! passes in the pieces that hold program text already laid out its own way (escaped, in bold,
//! in code), and lays the sentence out (a line, a heading, a table cell); the words the
//! sentences are made of (sizes, counts, frames, names) are in `mod.rs`.
//!
//! Nothing here escapes or decides anything: what a piece needs is its format's business, what
//! is shown was settled in `analyze`.

use cudaleak_format::EventType;

use super::{counts_text, error_text, folded_text, frame_text_short, plural, signed_human};
use super::{human_bytes, human_duration};
use crate::analyze::{sum_groups, Counts, DiffFindings, Findings, Folded, LeakGroup, StackView};
use crate::growth::{Series, RULE_TEXT};

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

/// `4.00 MiB in 3 allocations via cudaMalloc (device 0)`: a leak, cache or managed group, from
/// its size, what it holds ([`super::group_what`]), its API and [`super::placement`].
pub fn group_line(size: &str, what: &str, api: &str, placement: &str) -> String {
    format!("{size} in {what} via {api} {placement}")
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
    format!("{}; {}", counts_text(total), super::cached_gate_text(f))
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

/// `Suspect rule: …` ([`RULE_TEXT`]).
pub fn suspect_rule_text() -> String {
    format!("Suspect rule: {RULE_TEXT}")
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
