//! The exit report's section: per process, the leak groups, bad frees, failed allocations,
//! managed memory, teardown notes, what the script held when it ended and what caches hold;
//! then the suppressions used.

use std::fmt::Write as _;

use super::page::{esc, esc_text, Page};
use super::MAX_PROCESSES;
use crate::analyze::{BadFreeGroup, Findings, LeakGroup};
use crate::report::wording::{
    address_text, bad_free_label, bad_free_what, cached_text, dropped_events_text, errors_text,
    framework_kept_text, group_noun, group_text, managed_text, no_groups_text, pool_growth_text,
    record_note_text, recording_stopped_text, script_end_line, script_end_text, stats_text,
    teardown_text, times_text, Holds, CACHED_TITLE, FAILED_ADVICE, MANAGED_ADVICE, TEARDOWN_TITLE,
};
use crate::report::{cached_by_rule, counts_text, human_bytes, process_label, suppressed_per_rule};
use cudaleak_format::EventType;

pub(super) fn section(p: &mut Page, f: &Findings) {
    p.s.push_str("<section id=\"leaks\">\n<h2>Leaks</h2>\n");
    for pf in f.processes.iter().take(MAX_PROCESSES) {
        let _ = writeln!(p.s, "<h3>{}</h3>", esc_text(&process_label(&pf.process)));
        if let Some(why) = &pf.process.recording_stopped {
            let _ = writeln!(
                p.s,
                "<p class=\"warn-text\">warning: {}</p>",
                recording_stopped_text(&esc(why))
            );
        }
        if pf.summary.dropped_events > 0 {
            let _ = writeln!(
                p.s,
                "<p class=\"warn-text\">warning: {}</p>",
                dropped_events_text(pf.summary.dropped_events)
            );
        }
        for n in &pf.record_notes {
            let _ = writeln!(
                p.s,
                "<p class=\"note\"><b>note:</b> {}</p>",
                esc_text(&record_note_text(&n.framework, &n.note))
            );
        }
        let _ = writeln!(p.s, "<p>{}</p>", stats_text(pf).leaked);
        if pf.leaked.groups == 0 {
            let _ = writeln!(p.s, "<p class=\"ok\">{}</p>", no_groups_text(pf));
        }
        let total = pf.leaked.groups;
        let shown = pf.leaks.len().min(p.groups);
        for (i, g) in pf.leaks.iter().take(shown).enumerate() {
            let head = format!(
                "<span class=\"fail-text\">{} {} of {total}:</span> {}",
                group_noun(pf),
                i + 1,
                leak_head(g)
            );
            p.group(&head, &g.stack, i == 0);
        }
        p.not_shown(
            (total as usize).saturating_sub(shown),
            ("more leak group", "more leak groups"),
            "--top; the HTML report lists at most 50",
        );
        bad_frees(p, &pf.bad_frees);
        failed(p, pf);
        managed(p, &pf.managed);
        teardown(p, pf);
        script_end(p, pf, f);
        cached(p, pf, f);
    }
    p.not_shown(
        f.processes.len().saturating_sub(MAX_PROCESSES),
        ("more process", "more processes"),
        "the HTML report shows the first 32 by pid; the text report has all",
    );
    if !f.rules.is_empty() {
        p.s.push_str("<h3>Suppressions used</h3>\n<table><tr><th>Rule</th><th>Where</th><th>Suppressed</th></tr>\n");
        let per_rule = suppressed_per_rule(f);
        for (r, c) in f.rules.iter().zip(per_rule) {
            let _ = writeln!(
                p.s,
                "<tr><td><code>leak:{}</code></td><td>{}:{}</td><td class=\"num\">{}</td></tr>",
                esc(&r.pattern),
                esc(&r.file.display().to_string()),
                r.line,
                counts_text(c)
            );
        }
        p.s.push_str("</table>\n");
    }
    p.s.push_str("</section>\n");
}

fn bad_frees(p: &mut Page, groups: &[BadFreeGroup]) {
    for kind in [EventType::DoubleFree, EventType::InvalidFree] {
        let of_kind: Vec<&BadFreeGroup> = groups.iter().filter(|g| g.kind == kind).collect();
        let (label, what) = (bad_free_label(kind), bad_free_what(kind));
        for (i, g) in of_kind.iter().take(p.groups).enumerate() {
            let _ = writeln!(
                p.s,
                "<details open><summary><span class=\"fail-text\">{label} {} of {}:</span> \
                 <code>{}({})</code> {what}{}</summary>",
                i + 1,
                of_kind.len(),
                esc(&g.api),
                address_text(g.address),
                times_text(g.count)
            );
            p.stack(&g.stack);
            if let Some(a) = &g.alloc_stack {
                p.s.push_str("<p class=\"note\">&nbsp;allocated at:</p>\n");
                p.stack(a);
            }
            p.s.push_str("</details>\n");
        }
        p.not_shown(
            of_kind.len().saturating_sub(p.groups),
            ("more group", "more groups"),
            "the HTML report lists at most 50",
        );
    }
}

fn failed(p: &mut Page, pf: &crate::analyze::ProcessFindings) {
    if pf.failed.is_empty() {
        return;
    }
    let _ = writeln!(
        p.s,
        "<h4>Failed allocations: {}</h4>\n<p class=\"note\">{}</p>",
        pf.failed_allocation_count(),
        esc_text(FAILED_ADVICE)
    );
    for (i, g) in pf.failed.iter().take(p.groups).enumerate() {
        let head = format!(
            "<span class=\"warn-text\">Failed allocation {} of {}:</span> <code>{}</code> of {} returned {}{}",
            i + 1,
            pf.failed.len(),
            esc(&g.api),
            human_bytes(g.bytes),
            esc_text(&errors_text(&g.api, &g.errors)),
            times_text(g.count)
        );
        p.group(&head, &g.stack, false);
    }
    p.not_shown(
        pf.failed.len().saturating_sub(p.groups),
        ("more group", "more groups"),
        "the HTML report lists at most 50",
    );
}

fn managed(p: &mut Page, groups: &[LeakGroup]) {
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        p.s,
        "<h4>Managed memory: {}</h4>\n<p class=\"note\">{}</p>",
        managed_text(groups),
        esc_text(MANAGED_ADVICE)
    );
    for g in groups.iter().take(p.groups) {
        p.group(&leak_head(g), &g.stack, false);
    }
    p.not_shown(
        groups.len().saturating_sub(p.groups),
        ("more callsite", "more callsites"),
        "the HTML report lists at most 50",
    );
}

fn teardown(p: &mut Page, pf: &crate::analyze::ProcessFindings) {
    if pf.teardown.is_empty() {
        return;
    }
    let n: u64 = pf.teardown.iter().map(|g| g.count).sum();
    let _ = writeln!(p.s, "<h4>{TEARDOWN_TITLE}: {}</h4>", teardown_text(n));
    for g in pf.teardown.iter().take(p.groups) {
        let head = format!(
            "<code>{}</code> returned {}{}",
            esc(&g.api),
            esc_text(&errors_text(&g.api, &g.errors)),
            times_text(g.count)
        );
        p.group(&head, &g.stack, false);
    }
}

/// What the script held when Python began to shut down (dumps that say when).
fn script_end(p: &mut Page, pf: &crate::analyze::ProcessFindings, f: &Findings) {
    let Some(e) = pf.script_end.as_ref().filter(|e| e.held.allocations > 0) else {
        return;
    };
    let _ = writeln!(
        p.s,
        "<p class=\"note\">{}:</p>\n<ul>",
        esc_text(&script_end_text(e))
    );
    for c in &e.top {
        let cache = c
            .held_by
            .and_then(|i| f.caches.get(i))
            .map_or(String::new(), |r| format!(" [{}]", esc(&r.id)));
        let api = format!("<code>{}</code>", esc(&c.api));
        let at = esc_text(&p.where_text(&c.stack));
        let _ = writeln!(
            p.s,
            "<li>{}{cache}</li>",
            script_end_line(c.live, &api, &at)
        );
    }
    p.s.push_str("</ul>\n");
}

fn cached(p: &mut Page, pf: &crate::analyze::ProcessFindings, f: &Findings) {
    if pf.cached_total.allocations == 0 {
        return;
    }
    let _ = writeln!(
        p.s,
        "<h4>{CACHED_TITLE}: {}</h4>",
        esc_text(&cached_text(pf.cached_total, f))
    );
    for (rule, total, groups) in cached_by_rule(pf) {
        let Some(r) = f.caches.get(rule) else {
            continue;
        };
        let _ = writeln!(
            p.s,
            "<p><b>{}</b> [<code>{}</code>]: {}<br><span class=\"note\">release: {}</span></p>",
            esc(&r.name),
            esc(&r.id),
            counts_text(total),
            esc(&r.release)
        );
        if let Some(g) = pf.pools_growing.iter().find(|g| g.rule == rule) {
            let _ = writeln!(
                p.s,
                "<p class=\"note\"><b>note:</b> {}</p>",
                esc_text(&pool_growth_text(g, pf.process.end))
            );
        }
        for g in groups.iter().take(p.groups) {
            p.group(&leak_head(g), &g.stack, false);
        }
    }
    p.not_shown(
        pf.cached_not_shown() as usize,
        ("more cached group", "more cached groups"),
        "--top",
    );
}

fn leak_head(g: &LeakGroup) -> String {
    let mut head = group_text(g, Holds::Handles, &super::Html);
    if let Some(id) = &g.framework {
        let _ = write!(
            head,
            " <span class=\"note\">({})</span>",
            esc_text(&framework_kept_text(id))
        );
    }
    head
}
