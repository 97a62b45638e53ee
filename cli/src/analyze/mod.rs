//! Pure analysis: dumps plus a configuration in, findings out. This room analyses one dump
//! (`analyze_process`: groups split into leaks and blocks held by caches, teardown errors set
//! apart from real ones, suppressions and size filters, stats) and combines processes into the
//! gate's verdict (`finish`). Its other rooms: `model` (the findings and the configuration),
//! `group` (stacks prepared once, grouping by callsite), `pools` (pools still growing, what the
//! script held at its end), `frames` (what a user sees of a stack), `diff` (per-callsite counts
//! of a dump, and `diff`), `status` (how a program ended), `handles` (which library handles
//! were leaked).
//!
//! No I/O and no formatting of output here (reporters do that), and nothing may panic on a
//! dump that `cudaleak-format` accepted. Findings own their strings so a dump can be dropped
//! as soon as it is analysed: memory stays bounded by the largest single dump.

use std::collections::BTreeMap;
use std::path::Path;

use crate::load::schema as format;
use format::{EventType, Kind};

use crate::suppressions::Rule;

mod diff;
mod frames;
mod group;
mod handles;
mod model;
mod pools;
mod status;

pub use diff::*;
pub use frames::*;
pub use handles::HandleCount;
pub use model::*;
pub use status::*;

use group::{
    group_events, group_live, group_records, merge_callsites, sort_groups, GroupAcc, Stacks,
};
pub use group::{prepare_frames, record_frames};
use pools::{pools_still_growing, script_end};

/// The first rule (in file order) matching any frame of the stack: function, file or module
/// (the module's full path or its file name).
fn suppressing_rule(rules: &[Rule], frames: &[format::Frame]) -> Option<usize> {
    rules.iter().position(|r| {
        frames.iter().any(|f| {
            f.function.as_deref().is_some_and(|n| r.matches(n))
                || f.file.as_deref().is_some_and(|n| r.matches(n))
                || f.module
                    .as_deref()
                    .is_some_and(|m| r.matches(m) || r.matches(basename(m)))
        })
    })
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

/// Keeps only what was allocated after sequence number `seq` (`report --since`): live records,
/// failed calls and bad frees of the window, and the handles made in it or owning a block of
/// it. The summary's live counts follow.
pub fn keep_after(dump: &mut format::Dump, seq: u64) {
    dump.live.retain(|r| r.seq > seq);
    dump.events.retain(|e| e.seq > seq);
    dump.handles
        .retain(|h| h.seq > seq || h.blocks.iter().any(|&b| b > seq));
    dump.summary.live_allocations = dump.live.len() as u64;
    dump.summary.live_bytes = dump.live.iter().map(|r| r.held()).sum();
}

/// Analyses one dump, which it consumes: its stack table goes to the analysis, which drops a
/// stack's frames once it holds them as the views it shows ([`Stacks::owning`]).
pub fn analyze_process(mut dump: format::Dump, source: &Path, cfg: &Config) -> ProcessFindings {
    let table = std::mem::take(&mut dump.stacks);
    let dump = &dump;
    let mut stacks = Stacks::owning(table, &cfg.view, &cfg.caches);
    let mut judged = handles::judge(dump, &mut stacks);
    let mut groups = group_live(dump, &mut stacks, &judged);
    groups.append(&mut judged.groups);
    sort_groups(&mut groups);

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
            .and_then(|f| f.module_or_script())
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

    // A window's report: what the frameworks' records named is leaked too (after the stats and
    // managed memory, which are the driver's view).
    let mut record_notes = Vec::new();
    if cfg.framework_records {
        let (mut records, notes) = group_records(dump, &cfg.view);
        record_notes = notes;
        groups.append(&mut records);
        sort_groups(&mut groups);
    }

    let mut suppressed = vec![Counts::default(); cfg.rules.len()];
    let mut below_min_bytes = Counts::default();
    let mut cached: Vec<LeakGroup> = Vec::new();
    let mut cached_per_rule = vec![Counts::default(); cfg.caches.len()];
    // The leaks kept are collected from the groups' own allocation (std reuses it for a
    // `filter_map` over `into_iter` of a larger type), so the groups and the leaks made of them
    // are never held side by side: on 100 000 distinct callsites, both were the peak.
    let mut kept: Vec<LeakGroup> = groups
        .into_iter()
        .filter_map(|acc| {
            // Held by a cache: never a leak, so neither suppressions nor --min-bytes apply.
            // Unless the program emptied its pools: then what a pool still holds, its objects
            // keep.
            let kept_in_emptied = cfg.pools_emptied
                && acc
                    .group
                    .held_by
                    .and_then(|c| cfg.caches.get(c))
                    .is_some_and(|r| r.empty.is_some());
            if let (Some(c), false) = (acc.group.held_by, kept_in_emptied) {
                if let Some(n) = cached_per_rule.get_mut(c) {
                    n.add(group_counts(&acc.group));
                }
                cached.push(acc.group);
                return None;
            }
            let rule = match &acc.record {
                Some(record) => suppressing_rule(&cfg.rules, &record.frames),
                // Without rules, no stack's frames are read back.
                None if cfg.rules.is_empty() => None,
                None => acc
                    .stacks
                    .iter()
                    .find_map(|s| suppressing_rule(&cfg.rules, &stacks.frames(s))),
            };
            if let Some(r) = rule {
                suppressed[r].add(group_counts(&acc.group));
            } else if acc.group.bytes < cfg.min_bytes {
                below_min_bytes.add(group_counts(&acc.group));
            } else {
                return Some(acc.group);
            }
            None
        })
        .collect();
    // The groups' allocation is larger than the leaks kept in it need: give the rest back.
    kept.shrink_to_fit();
    let leaked = sum_groups(&kept);
    let leaked_handles = kept
        .iter()
        .filter_map(|g| g.handles.as_ref())
        .map(|h| h.count)
        .sum();
    let cached_total = sum_groups(&cached);

    let (failed, bad_frees, teardown) = group_events(dump, &mut stacks);
    let pools_growing = pools_still_growing(dump, &mut stacks, &cfg.caches, &cached_per_rule);
    let script_end = script_end(dump, &mut stacks, cfg);
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
        attached_to: dump.attached_to(),
        record_notes,
    }
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
