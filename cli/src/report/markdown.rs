//! The Markdown report: for pull-request comments and CI job summaries (GitHub-flavoured).
//!
//! Every name taken from a program (functions, files, modules, APIs, command lines) goes through
//! `escape`, so a `|` cannot break a table and `<script>` stays text.

use std::io::{self, Write};

use super::wording::{
    address_text, bad_free_label, cache_callsites_text, cached_text, coarse_pools_text,
    diff_grew_text, errors_text, exit_line, framework_kept_text, group_noun, group_text,
    growth_gate_reason, growth_summary_line, kept_text, left_out_text, no_groups_text,
    not_shown_text, one_dump_text, pool_growth_text, quiet_line, record_group_text,
    record_groups_rest_text, record_note_text, recording_stopped_text, script_end_line,
    script_end_text, series_line, series_text, skipped_rest_text, stats_text, steps_text,
    summary_line, suspect_rule_text, teardown_text, unjudged_text, Holds, Markup, CACHED_TITLE,
    FAILED_ADVICE, MANAGED_ADVICE, NAMED_SKIPPED, NO_FRAMES, NO_GROWTH, RECORD_GROUPS_SHOWN,
};
use super::{cached_by_rule, growth_api, own_frame, signed_human};
use super::{
    cached_totals, folded_text, frame_text_under, human_bytes, plural, process_label,
    suppressed_per_rule, Reporter,
};
use super::{point_label, rate_text};
use crate::analyze::View;
use crate::analyze::{DiffFindings, Findings, LeakGroup, StackView};
use crate::growth::GrowthFindings;

pub struct Markdown;

/// Makes program-supplied text inert in Markdown and in GitHub's HTML sanitiser.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' | '\t' => out.push(' '),
            // `[` and `]` escaped means no link or image can form, so `(`, `)` and `!` may stay.
            '\\' | '`' | '*' | '_' | '|' | '[' | ']' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// One row of a group table: `| FIRST | bytes | allocations | api | where |`.
fn group_row(w: &mut dyn Write, first: &str, g: &LeakGroup, root: Option<&str>) -> io::Result<()> {
    writeln!(
        w,
        "| {first} | {} | {} | {} | {} |",
        human_bytes(g.bytes),
        g.allocations,
        escape(&g.api),
        first_frame(&g.stack, root)
    )
}

/// `… 3 more leak groups not shown (--top).` after a table cut by `--top`; nothing when none was.
fn not_shown(w: &mut dyn Write, n: u64, one: &str, many: &str) -> io::Result<()> {
    if n > 0 {
        writeln!(w)?;
        writeln!(w, "… {}.", not_shown_text(n, (one, many), "--top"))?;
    }
    Ok(())
}

fn first_frame(s: &StackView, root: Option<&str>) -> String {
    s.where_frame()
        .map_or_else(|| NO_FRAMES.into(), |f| escape(&frame_text_under(f, root)))
}

fn stack(w: &mut dyn Write, s: &StackView, root: Option<&str>) -> io::Result<()> {
    for (i, f) in s.frames.iter().enumerate() {
        for r in s.folded.iter().filter(|r| r.at == i) {
            writeln!(w, "1. {}", escape(&folded_text(r)))?;
        }
        writeln!(w, "1. {}", escape(&frame_text_under(f, root)))?;
    }
    for r in s.folded.iter().filter(|r| r.at == s.frames.len()) {
        writeln!(w, "1. {}", escape(&folded_text(r)))?;
    }
    if s.omitted > 0 {
        writeln!(
            w,
            "1. … {}",
            plural(s.omitted as u64, "more frame", "more frames")
        )?;
    }
    Ok(())
}

/// Below a framework count's stack: its record's further groups, or why it names no line.
fn framework_groups(
    w: &mut dyn Write,
    f: &crate::growth::FrameworkGrowth,
    root: Option<&str>,
) -> io::Result<()> {
    if let Some(n) = &f.note {
        writeln!(w)?;
        writeln!(w, "Note: {}.", escape(n))?;
    }
    let rest = f.groups.len().saturating_sub(1 + RECORD_GROUPS_SHOWN);
    if f.groups.len() > 1 {
        writeln!(w)?;
    }
    for g in f.groups.iter().skip(1).take(RECORD_GROUPS_SHOWN) {
        let at = own_frame(&g.stack)
            .or(g.stack.where_frame())
            .map_or(NO_FRAMES.into(), |f| escape(&frame_text_under(f, root)));
        writeln!(w, "- {}", record_group_text(g.bytes, g.blocks, &at))?;
    }
    if rest > 0 {
        writeln!(w, "- {}", record_groups_rest_text(rest as u64))?;
    }
    Ok(())
}

/// Markdown: every piece escaped.
struct Escaped;

impl Markup for Escaped {
    fn words(&self, s: &str) -> String {
        escape(s)
    }
    fn code(&self, s: &str) -> String {
        escape(s)
    }
}

fn group_head(g: &LeakGroup) -> String {
    group_text(g, Holds::Handles, &Escaped)
}

impl Reporter for Markdown {
    fn report(&self, f: &Findings, view: &View, w: &mut dyn Write) -> io::Result<()> {
        let root = view.source_root.as_deref();
        // The text report's last line, lower case after the mark.
        let lower = |line: String| {
            let mut c = line.chars();
            c.next().map_or(String::new(), |first| {
                escape(&format!("{}{}", first.to_lowercase(), c.as_str()))
            })
        };
        let gate = match exit_line(f) {
            Some(line) if f.verdict.exit_code != 0 => format!("❌ {}", lower(line)),
            Some(line) => format!("⚠️ gate passed; {}", lower(line)),
            None => "✅ gate passed".to_string(),
        };
        writeln!(
            w,
            "### cudaleak: {}",
            escape(summary_line(f).trim_start_matches("SUMMARY: "))
        )?;
        writeln!(w)?;
        writeln!(w, "{gate}")?;
        for p in &f.processes {
            writeln!(w)?;
            writeln!(w, "#### {}", escape(&process_label(&p.process)))?;
            writeln!(w)?;
            if let Some(why) = &p.process.recording_stopped {
                writeln!(
                    w,
                    "> **Warning:** {}.",
                    recording_stopped_text(&escape(why))
                )?;
                writeln!(w)?;
            }
            for n in &p.record_notes {
                writeln!(
                    w,
                    "> **Note:** {}.",
                    escape(&record_note_text(&n.framework, &n.note))
                )?;
                writeln!(w)?;
            }
            if p.leaks.is_empty() {
                writeln!(w, "{}", no_groups_text(p))?;
            } else {
                writeln!(w, "| # | Leaked | Allocations | API | Where |")?;
                writeln!(w, "|--:|--:|--:|---|---|")?;
                for (i, g) in p.leaks.iter().enumerate() {
                    group_row(w, &(i + 1).to_string(), g, root)?;
                }
                not_shown(
                    w,
                    p.leaks_not_shown(),
                    "more leak group",
                    "more leak groups",
                )?;
                writeln!(w)?;
                writeln!(w, "<details><summary>Stacks</summary>")?;
                for (i, g) in p.leaks.iter().enumerate() {
                    writeln!(w)?;
                    writeln!(
                        w,
                        "**{} {} of {}:** {}",
                        group_noun(p),
                        i + 1,
                        p.leaked.groups,
                        group_head(g)
                    )?;
                    writeln!(w)?;
                    if let Some(id) = &g.framework {
                        writeln!(w, "Note: {}.", escape(&framework_kept_text(id)))?;
                        writeln!(w)?;
                    }
                    stack(w, &g.stack, root)?;
                }
                writeln!(w)?;
                writeln!(w, "</details>")?;
            }
            for g in &p.bad_frees {
                writeln!(w)?;
                writeln!(
                    w,
                    "**{}:** {}({}), {}",
                    bad_free_label(g.kind),
                    escape(&g.api),
                    address_text(g.address),
                    plural(g.count, "time", "times")
                )?;
                writeln!(w)?;
                stack(w, &g.stack, root)?;
                if let Some(a) = &g.alloc_stack {
                    writeln!(w)?;
                    writeln!(w, "allocated at:")?;
                    writeln!(w)?;
                    stack(w, a, root)?;
                }
            }
            if !p.failed.is_empty() {
                writeln!(w)?;
                writeln!(w, "**Failed allocations** — {FAILED_ADVICE}")?;
                writeln!(w)?;
                writeln!(w, "| API | Times | Requested | Returned | Where |")?;
                writeln!(w, "|---|--:|--:|---|---|")?;
                for g in &p.failed {
                    writeln!(
                        w,
                        "| {} | {} | {} | {} | {} |",
                        escape(&g.api),
                        g.count,
                        human_bytes(g.bytes),
                        escape(&errors_text(&g.api, &g.errors)),
                        first_frame(&g.stack, root)
                    )?;
                }
            }
            if !p.teardown.is_empty() {
                let n: u64 = p.teardown.iter().map(|g| g.count).sum();
                writeln!(w)?;
                writeln!(w, "**Teardown notes** (not errors) — {}.", teardown_text(n))?;
                writeln!(w)?;
                writeln!(w, "| API | Times | Returned | After exit began | Where |")?;
                writeln!(w, "|---|--:|---|--:|---|")?;
                for g in &p.teardown {
                    writeln!(
                        w,
                        "| {} | {} | {} | {} | {} |",
                        escape(&g.api),
                        g.count,
                        escape(&errors_text(&g.api, &g.errors)),
                        g.during_exit,
                        first_frame(&g.stack, root)
                    )?;
                }
            }
            if let Some(e) = p.script_end.as_ref().filter(|e| e.held.allocations > 0) {
                writeln!(w)?;
                writeln!(w, "{}:", escape(&script_end_text(e)))?;
                writeln!(w)?;
                for c in &e.top {
                    let cache = c
                        .held_by
                        .and_then(|i| f.caches.get(i))
                        .map_or(String::new(), |r| format!(" `{}`", escape(&r.id)));
                    writeln!(
                        w,
                        "- {}{cache}",
                        script_end_line(c.live, &escape(&c.api), &first_frame(&c.stack, root))
                    )?;
                }
            }
            if !p.cached.is_empty() {
                writeln!(w)?;
                writeln!(
                    w,
                    "**{CACHED_TITLE}** — {}.",
                    escape(&cached_text(p.cached_total, f))
                )?;
                writeln!(w)?;
                if view.show_cached {
                    writeln!(w, "| Held by | Bytes | Allocations | API | Where |")?;
                    writeln!(w, "|---|--:|--:|---|---|")?;
                    for g in &p.cached {
                        let by = g
                            .held_by
                            .and_then(|i| f.caches.get(i))
                            .map_or(String::new(), |r| escape(&r.id));
                        group_row(w, &by, g, root)?;
                    }
                    not_shown(w, p.cached_not_shown(), "more group", "more groups")?;
                } else {
                    writeln!(w, "| Held by | Bytes | Allocations | Callsites |")?;
                    writeln!(w, "|---|--:|--:|---|")?;
                    for (rule, total, groups) in cached_by_rule(p) {
                        let Some(r) = f.caches.get(rule) else {
                            continue;
                        };
                        writeln!(
                            w,
                            "| `{}` | {} | {} | {} |",
                            escape(&r.id),
                            human_bytes(total.bytes),
                            total.allocations,
                            escape(&cache_callsites_text(&groups, root))
                        )?;
                    }
                }
                for g in &p.pools_growing {
                    if let Some(r) = f.caches.get(g.rule) {
                        writeln!(w)?;
                        writeln!(
                            w,
                            "**`{}`** {}",
                            escape(&r.id),
                            escape(&pool_growth_text(g, p.process.end))
                        )?;
                    }
                }
            }
            if !p.managed.is_empty() {
                writeln!(w)?;
                writeln!(w, "**Managed memory** — {MANAGED_ADVICE}")?;
                writeln!(w)?;
                writeln!(w, "| Live | Allocations | API | Where |")?;
                writeln!(w, "|--:|--:|---|---|")?;
                for g in &p.managed {
                    writeln!(
                        w,
                        "| {} | {} | {} | {} |",
                        human_bytes(g.bytes),
                        g.allocations,
                        escape(&g.api),
                        first_frame(&g.stack, root)
                    )?;
                }
            }
            if view.stats {
                writeln!(w)?;
                writeln!(w, "**Statistics:** {}", stats_text(p).sentence)?;
                writeln!(w)?;
                writeln!(
                    w,
                    "| Live at end by module (first user frame) | Bytes | Blocks |"
                )?;
                writeln!(w, "|---|--:|--:|")?;
                for (name, c) in &p.stats.by_module {
                    writeln!(
                        w,
                        "| {} | {} | {} |",
                        escape(name),
                        human_bytes(c.bytes),
                        c.allocations
                    )?;
                }
                writeln!(w)?;
                writeln!(w, "| Live at end by API | Bytes | Blocks |")?;
                writeln!(w, "|---|--:|--:|")?;
                for (name, c) in &p.stats.by_api {
                    writeln!(
                        w,
                        "| {} | {} | {} |",
                        escape(name),
                        human_bytes(c.bytes),
                        c.allocations
                    )?;
                }
            }
        }
        if f.processes.len() > 1 && !f.callsites.is_empty() {
            writeln!(w)?;
            writeln!(w, "#### All processes")?;
            writeln!(w)?;
            writeln!(w, "| Leaked | Allocations | Processes | API | Where |")?;
            writeln!(w, "|--:|--:|--:|---|---|")?;
            for c in &f.callsites {
                writeln!(
                    w,
                    "| {} | {} | {} | {} | {} |",
                    human_bytes(c.bytes),
                    c.allocations,
                    c.processes,
                    escape(&c.api),
                    first_frame(&c.stack, root)
                )?;
            }
        }
        let held = cached_totals(f);
        if !held.is_empty() {
            writeln!(w)?;
            writeln!(w, "| Cache | Held | Allocations | What releases it |")?;
            writeln!(w, "|---|--:|--:|---|")?;
            for (i, c) in held {
                let Some(r) = f.caches.get(i) else { continue };
                writeln!(
                    w,
                    "| {} ({}) | {} | {} | {} |",
                    escape(&r.name),
                    escape(&r.id),
                    human_bytes(c.bytes),
                    c.allocations,
                    escape(&r.release)
                )?;
            }
        }
        let quiet = quiet_line(f);
        if !quiet.is_empty() {
            writeln!(w)?;
            writeln!(w, "{}.", escape(&quiet))?;
        }
        if !f.rules.is_empty() {
            writeln!(w)?;
            writeln!(w, "| Suppression | Allocations | Bytes |")?;
            writeln!(w, "|---|--:|--:|")?;
            for (r, c) in f.rules.iter().zip(suppressed_per_rule(f)) {
                writeln!(
                    w,
                    "| {} | {} | {} |",
                    escape(&r.text()),
                    c.allocations,
                    human_bytes(c.bytes)
                )?;
            }
        }
        Ok(())
    }

    fn growth(&self, g: &GrowthFindings, view: &View, w: &mut dyn Write) -> io::Result<()> {
        let root = view.source_root.as_deref();
        writeln!(
            w,
            "### cudaleak growth: {}",
            escape(growth_summary_line(g).trim_start_matches("SUMMARY: "))
        )?;
        writeln!(w)?;
        if g.exit_code != 0 {
            writeln!(
                w,
                "❌ gate failed ({}), exit status {}",
                growth_gate_reason(g),
                g.exit_code
            )?;
        } else {
            writeln!(w, "✅ gate passed")?;
        }
        writeln!(w)?;
        writeln!(w, "{}", suspect_rule_text())?;
        for s in &g.series {
            writeln!(w)?;
            writeln!(w, "#### {}", escape(&process_label(&s.process)))?;
            writeln!(w)?;
            if let Some(l) = &s.left_out {
                let names: Vec<String> = l
                    .points
                    .iter()
                    .map(|p| format!("`{}`", escape(&p.source.display().to_string())))
                    .collect();
                writeln!(w, "Note: {}.", left_out_text(l, &names))?;
                writeln!(w)?;
            }
            if !s.judged() {
                writeln!(w, "**{}.**", unjudged_text(s))?;
                continue;
            }
            let first = s.points[0].live.bytes;
            let last = s.points[s.points.len() - 1].live.bytes;
            let labels = format!(
                "{} … {}",
                escape(&point_label(&s.points[0])),
                escape(&point_label(&s.points[s.points.len() - 1]))
            );
            writeln!(
                w,
                "{}.",
                series_line(s, &labels, &human_bytes(first), &human_bytes(last))
            )?;
            writeln!(w)?;
            if s.rows.is_empty() {
                writeln!(w, "{NO_GROWTH}")?;
                continue;
            }
            writeln!(
                w,
                "| # | Suspect | Growth | Blocks | Per hour | Intervals | API | Where |"
            )?;
            writeln!(w, "|--:|---|--:|--:|--:|---|---|---|")?;
            for (i, r) in s.rows.iter().enumerate() {
                let mut verdict = match r.not_suspect {
                    None => "**yes**".to_string(),
                    Some(n) => format!("no: {}", n.as_str()),
                };
                if let Some(h) = &r.held_by {
                    verdict.push_str(&format!(" (held by `{}`)", h.id));
                }
                writeln!(
                    w,
                    "| {} | {verdict} | {} | {:+} | {} | {} | {} | {} |",
                    i + 1,
                    signed_human(r.growth_bytes()),
                    r.growth_blocks(),
                    rate_text(r.bytes_per_hour),
                    steps_text(r),
                    escape(&growth_api(r)),
                    first_frame(&r.stack, root)
                )?;
            }
            not_shown(w, s.suspects_not_shown, "more suspect", "more suspects")?;
            if let Some(note) = coarse_pools_text(&s.coarse_pools) {
                writeln!(w)?;
                writeln!(w, "Note: {}.", escape(&note))?;
            }
            writeln!(w)?;
            writeln!(
                w,
                "<details><summary>Stacks and live bytes per dump</summary>"
            )?;
            for (i, r) in s.rows.iter().enumerate() {
                writeln!(w)?;
                writeln!(
                    w,
                    "**{}.** {} via {}; live: {}",
                    i + 1,
                    signed_human(r.growth_bytes()),
                    escape(&growth_api(r)),
                    series_text(r)
                )?;
                if let Some(k) = kept_text(r) {
                    writeln!(w)?;
                    writeln!(w, "kept: {}", escape(&k))?;
                }
                writeln!(w)?;
                stack(w, &r.stack, root)?;
                if let Some(f) = &r.framework {
                    framework_groups(w, f, root)?;
                }
            }
            writeln!(w)?;
            writeln!(w, "</details>")?;
        }
        if !g.skipped.is_empty() {
            writeln!(w)?;
            for s in g.skipped.iter().take(NAMED_SKIPPED) {
                writeln!(
                    w,
                    "Note: {}.",
                    one_dump_text(&escape(&process_label(&s.process)), None)
                )?;
            }
            if let Some(rest) = skipped_rest_text(g.skipped.len()) {
                writeln!(w, "Note: {}.", escape(&rest))?;
            }
        }
        Ok(())
    }

    fn diff(&self, d: &DiffFindings, view: &View, w: &mut dyn Write) -> io::Result<()> {
        let root = view.source_root.as_deref();
        writeln!(w, "### cudaleak diff: {}", diff_grew_text(d))?;
        writeln!(w)?;
        writeln!(w, "| Δ bytes | Δ blocks | Old | New | API | Where |")?;
        writeln!(w, "|--:|--:|--:|--:|---|---|")?;
        for r in &d.rows {
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} |",
                match r.delta_bytes() {
                    0 => "0 B".to_string(),
                    d => signed_human(d),
                },
                match r.delta_blocks() {
                    0 => "0".to_string(),
                    d => format!("{d:+}"),
                },
                human_bytes(r.old.bytes),
                human_bytes(r.new.bytes),
                escape(&r.api),
                first_frame(&r.stack, root)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn program_names_cannot_break_tables_or_inject_html() {
        assert_eq!(escape("a|b"), "a\\|b");
        assert_eq!(escape("process_data(float*)"), "process\\_data(float\\*)");
        assert_eq!(escape("[x](javascript:y)"), "\\[x\\](javascript:y)");
        assert_eq!(escape("`x`"), "\\`x\\`");
        assert_eq!(escape("<script>"), "&lt;script&gt;");
        assert_eq!(escape("std::vector<int>"), "std::vector&lt;int&gt;");
        assert_eq!(escape("a\nb"), "a b");
    }
}
