//! The text report: LeakSanitizer-like, for people at a terminal and in CI logs. Colour only
//! when made with it (`Text::color`); the last line is always `SUMMARY: …`.
//!
//! Writes nothing but the report; never decides what is shown (that is `analyze`'s job).

use std::io::{self, Write};

use super::wording::{
    address_text, bad_free_label, bad_free_what, cache_callsites_text, cached_gate_text,
    cached_text, coarse_pools_text, diff_side_text, diff_summary_line, dropped_events_text,
    errors_text, exit_line, folded_line, framework_kept_text, gate_failed_text, group_noun,
    group_text, growth_gate_reason, growth_summary_line, held_by_text, kept_in_emptied_text,
    kept_text, left_out_text, managed_text, more_frames_text, no_groups_text, not_shown_text,
    one_dump_text, pool_growth_text, quiet_line, record_group_text, record_groups_rest_text,
    record_note_text, recording_stopped_text, script_end_line, script_end_text, series_line,
    series_text, skipped_rest_text, stats_text, steps_text, summary_line, suspect_rule_text,
    teardown_text, times_text, tolerated_text, trend_label, unjudged_text, where_text, Holds,
    Markup, CACHED_TITLE, FAILED_ADVICE, MANAGED_ADVICE, NAMED_SKIPPED, NO_FRAMES,
    RECORD_GROUPS_SHOWN, TEARDOWN_TITLE,
};
use super::{
    cached_by_rule, cached_totals, change_text, change_text_paren, clean, counts_text,
    frame_text_short, growth_api, human_bytes, human_bytes_exact, own_frame, plural, point_label,
    process_label, rate_text, signed_human, suppressed_per_rule, Reporter,
};
use crate::analyze::View;
use crate::analyze::{
    sum_groups, BadFreeGroup, Counts, DiffFindings, Findings, LeakGroup, ProcessFindings, StackView,
};
use crate::growth::{GrowthFindings, GrowthRow, Series};
use cudaleak_format::EventType;

pub struct Text {
    /// Paint with ANSI colours (`--color`, decided where the output is opened).
    pub color: bool,
}

#[derive(Clone, Copy)]
enum Style {
    Red,
    Yellow,
    Bold,
    Dim,
    Green,
}

struct Out<'a> {
    w: &'a mut dyn Write,
    color: bool,
    root: Option<&'a str>,
    /// `--show-cached`: each cache's callsites, not one line per cache.
    show_cached: bool,
}

impl Out<'_> {
    fn paint(&self, s: &str, style: Style) -> String {
        if !self.color {
            return s.to_string();
        }
        use anstyle::AnsiColor;
        let style = match style {
            Style::Red => AnsiColor::Red.on_default().bold(),
            Style::Yellow => AnsiColor::Yellow.on_default().bold(),
            Style::Bold => anstyle::Style::new().bold(),
            Style::Dim => anstyle::Style::new().dimmed(),
            Style::Green => AnsiColor::Green.on_default().bold(),
        };
        format!("{style}{s}{style:#}")
    }

    /// A stack's innermost visible frame, for one-line listings.
    fn where_text(&self, s: &StackView) -> String {
        where_text(s, self.root)
    }

    fn folded(&mut self, s: &StackView, at: usize, indent: &str) -> io::Result<()> {
        for r in s.folded.iter().filter(|r| r.at == at) {
            let line = self.paint(&folded_line(r), Style::Dim);
            writeln!(self.w, "{indent}{line}")?;
        }
        Ok(())
    }

    /// The first `cap` lines of [`Out::stack`]; what is left is counted on one line.
    fn stack_top(&mut self, s: &StackView, indent: &str, cap: usize) -> io::Result<()> {
        if s.frames.len() <= cap {
            return self.stack(s, indent);
        }
        for (i, f) in s.frames.iter().take(cap).enumerate() {
            self.folded(s, i, indent)?;
            writeln!(self.w, "{indent}#{i} {}", frame_text_short(f, self.root))?;
        }
        let folded: usize = s
            .folded
            .iter()
            .filter(|r| r.at >= cap)
            .map(|r| r.frames)
            .sum();
        let left = s.frames.len() - cap + s.omitted + folded;
        let more = self.paint(
            &format!("... {}", more_frames_text(left as u64)),
            Style::Dim,
        );
        writeln!(self.w, "{indent}{more}")
    }

    fn stack(&mut self, s: &StackView, indent: &str) -> io::Result<()> {
        for (i, f) in s.frames.iter().enumerate() {
            self.folded(s, i, indent)?;
            writeln!(self.w, "{indent}#{i} {}", frame_text_short(f, self.root))?;
        }
        self.folded(s, s.frames.len(), indent)?;
        if s.omitted > 0 {
            let more = self.paint(
                &format!("... {}", more_frames_text(s.omitted as u64)),
                Style::Dim,
            );
            writeln!(self.w, "{indent}{more}")?;
        }
        Ok(())
    }
}

/// The text report's sizes are exact: `4.00 MiB (4194304 B)`.
struct Exact;

impl Markup for Exact {
    fn size(&self, bytes: u64) -> String {
        human_bytes_exact(bytes)
    }
}

fn leak_header(g: &LeakGroup) -> String {
    group_text(g, Holds::Handles, &Exact)
}

fn bad_free_header(g: &BadFreeGroup) -> String {
    format!(
        "{}({}) {}{}",
        clean(&g.api),
        address_text(g.address),
        bad_free_what(g.kind),
        times_text(g.count)
    )
}

fn process_section(
    o: &mut Out<'_>,
    p: &ProcessFindings,
    f: &Findings,
    view: &View,
) -> io::Result<()> {
    writeln!(
        o.w,
        "{}",
        o.paint(&format!("== {} ==", process_label(&p.process)), Style::Bold)
    )?;
    if let Some(why) = &p.process.recording_stopped {
        let w = o.paint("warning:", Style::Yellow);
        writeln!(o.w, "{w} {}", recording_stopped_text(&clean(why)))?;
    }
    if p.summary.dropped_events > 0 {
        let w = o.paint("warning:", Style::Yellow);
        writeln!(o.w, "{w} {}", dropped_events_text(p.summary.dropped_events))?;
    }
    for n in &p.record_notes {
        writeln!(
            o.w,
            "note: {}",
            record_note_text(&clean(&n.framework), &clean(&n.note))
        )?;
    }
    // Attached (by `cudaleak attach`, or in process by the Python API), the shim knows only
    // what came after: frees of blocks made before are expected, and say nothing.
    if p.summary.untracked_frees > 0 && !p.attached_to {
        writeln!(
            o.w,
            "note: {} of addresses the shim never saw allocated (allocations made before it loaded, or through a path it does not intercept)",
            plural(p.summary.untracked_frees, "free", "frees")
        )?;
    }
    writeln!(o.w)?;

    let total = p.leaked.groups;
    if total == 0 {
        writeln!(o.w, "{}", o.paint(no_groups_text(p), Style::Green))?;
        writeln!(o.w)?;
    }
    for (i, g) in p.leaks.iter().enumerate() {
        let head = o.paint(
            &format!("{} {} of {total}:", group_noun(p), i + 1),
            Style::Red,
        );
        writeln!(o.w, "{head} {}", leak_header(g))?;
        if let Some(id) = &g.framework {
            writeln!(o.w, "    note: {}", framework_kept_text(&clean(id)))?;
        }
        if let Some(r) = g.held_by.and_then(|c| f.caches.get(c)) {
            let empty = r.empty.as_deref().unwrap_or("");
            writeln!(
                o.w,
                "    note: {}",
                kept_in_emptied_text(&clean(&r.name), &clean(&r.id), empty)
            )?;
        }
        o.stack(&g.stack, "    ")?;
        writeln!(o.w)?;
    }
    if p.leaks_not_shown() > 0 {
        let shown = sum_groups(&p.leaks);
        let rest = Counts {
            groups: 0,
            allocations: p.leaked.allocations - shown.allocations,
            bytes: p.leaked.bytes - shown.bytes,
        };
        let why = format!("{}; --top {}", counts_text(rest), view.top.unwrap_or(0));
        writeln!(
            o.w,
            "... {}",
            not_shown_text(
                p.leaks_not_shown(),
                ("more leak group", "more leak groups"),
                &why
            )
        )?;
        writeln!(o.w)?;
    }

    for kind in [EventType::DoubleFree, EventType::InvalidFree] {
        let groups: Vec<&BadFreeGroup> = p.bad_frees.iter().filter(|g| g.kind == kind).collect();
        let label = bad_free_label(kind);
        for (i, g) in groups.iter().enumerate() {
            let head = o.paint(
                &format!("{label} {} of {}:", i + 1, groups.len()),
                Style::Red,
            );
            writeln!(o.w, "{head} {}", bad_free_header(g))?;
            o.stack(&g.stack, "    ")?;
            if let Some(a) = &g.alloc_stack {
                writeln!(o.w, "  allocated at:")?;
                o.stack(a, "    ")?;
            }
            writeln!(o.w)?;
        }
    }

    for (i, g) in p.failed.iter().enumerate() {
        let head = o.paint(
            &format!("Failed allocation {} of {}:", i + 1, p.failed.len()),
            Style::Yellow,
        );
        let size = if g.bytes > 0 {
            format!(" of {}", human_bytes(g.bytes / g.count.max(1)))
        } else {
            String::new()
        };
        let returned = if g.errors.is_empty() {
            "failed".to_string()
        } else {
            format!("returned {}", errors_text(&g.api, &g.errors))
        };
        writeln!(
            o.w,
            "{head} {}{size} {returned}{}",
            clean(&g.api),
            times_text(g.count)
        )?;
        o.stack(&g.stack, "    ")?;
        writeln!(o.w)?;
    }
    if !p.failed.is_empty() {
        writeln!(o.w, "  {FAILED_ADVICE}")?;
        writeln!(o.w)?;
    }

    if !p.teardown.is_empty() {
        let n: u64 = p.teardown.iter().map(|g| g.count).sum();
        writeln!(
            o.w,
            "{} {}:",
            o.paint(&format!("{TEARDOWN_TITLE}:"), Style::Dim),
            teardown_text(n)
        )?;
        for g in &p.teardown {
            let when = if g.during_exit == g.count {
                ", after exit began"
            } else if g.during_exit > 0 {
                ", partly after exit began"
            } else {
                ""
            };
            writeln!(
                o.w,
                "  {} returned {}{}{when}, at {}",
                clean(&g.api),
                errors_text(&g.api, &g.errors),
                times_text(g.count),
                o.where_text(&g.stack)
            )?;
        }
        writeln!(o.w)?;
    }

    if !p.managed.is_empty() {
        let head = o.paint("Managed memory:", Style::Yellow);
        writeln!(o.w, "{head} {}", managed_text(&p.managed))?;
        writeln!(o.w, "  {MANAGED_ADVICE}")?;
        for (i, g) in p.managed.iter().enumerate() {
            writeln!(
                o.w,
                "  Managed {} of {}: {}",
                i + 1,
                p.managed.len(),
                leak_header(g)
            )?;
            o.stack(&g.stack, "    ")?;
        }
        writeln!(o.w)?;
    }

    if let Some(e) = p.script_end.as_ref().filter(|e| e.held.allocations > 0) {
        writeln!(o.w, "{}:", clean(&script_end_text(e)))?;
        for c in &e.top {
            let cache = c
                .held_by
                .and_then(|i| f.caches.get(i))
                .map_or(String::new(), |r| format!(" [{}]", clean(&r.id)));
            writeln!(
                o.w,
                "  {}{cache}",
                script_end_line(c.live, &clean(&c.api), &o.where_text(&c.stack))
            )?;
        }
        writeln!(o.w)?;
    }

    if !p.cached.is_empty() {
        let head = o.paint(&format!("{CACHED_TITLE}:"), Style::Bold);
        writeln!(o.w, "{head} {}", cached_text(p.cached_total, f))?;
        for (rule, total, groups) in cached_by_rule(p) {
            let Some(r) = f.caches.get(rule) else {
                continue;
            };
            if !o.show_cached {
                writeln!(
                    o.w,
                    "  {} [{}]: {} {}",
                    clean(&r.name),
                    clean(&r.id),
                    counts_text(total),
                    clean(&cache_callsites_text(&groups, o.root))
                )?;
                if let Some(g) = p.pools_growing.iter().find(|g| g.rule == rule) {
                    let head = o.paint("note:", Style::Bold);
                    writeln!(o.w, "    {head} {}", pool_growth_text(g, p.process.end))?;
                }
                continue;
            }
            writeln!(
                o.w,
                "  {} [{}]: {}",
                clean(&r.name),
                clean(&r.id),
                counts_text(total)
            )?;
            writeln!(o.w, "    release: {}", clean(&r.release))?;
            if let Some(g) = p.pools_growing.iter().find(|g| g.rule == rule) {
                let head = o.paint("note:", Style::Bold);
                writeln!(o.w, "    {head} {}", pool_growth_text(g, p.process.end))?;
            }
            for g in groups {
                writeln!(o.w, "    {} at {}", leak_header(g), o.where_text(&g.stack))?;
            }
        }
        if !o.show_cached {
            writeln!(
                o.w,
                "  (--show-cached lists each callsite and what would release the memory)"
            )?;
        } else if p.cached_not_shown() > 0 {
            let why = format!("--top {}", view.top.unwrap_or(0));
            writeln!(
                o.w,
                "  ... {}",
                not_shown_text(p.cached_not_shown(), ("more group", "more groups"), &why)
            )?;
        }
        writeln!(o.w)?;
    }

    if view.stats {
        stats(o, p)?;
    }
    if f.processes.len() > 1 {
        writeln!(
            o.w,
            "pid {}: {} leaked in {} from {}",
            p.process.pid,
            human_bytes(p.leaked.bytes),
            plural(p.leaked.allocations, "allocation", "allocations"),
            plural(p.leaked.groups, "callsite", "callsites"),
        )?;
        writeln!(o.w)?;
    }
    Ok(())
}

fn stats(o: &mut Out<'_>, p: &ProcessFindings) -> io::Result<()> {
    let words = stats_text(p);
    writeln!(o.w, "{}", o.paint("Statistics:", Style::Bold))?;
    writeln!(o.w, "  {}", words.calls)?;
    writeln!(o.w, "  {}", words.bytes)?;
    let table = |o: &mut Out<'_>, title: &str, rows: &[(String, Counts)]| -> io::Result<()> {
        writeln!(o.w, "  {title}:")?;
        if rows.is_empty() {
            writeln!(o.w, "    (nothing live)")?;
        }
        for (name, c) in rows {
            writeln!(
                o.w,
                "    {name:<28} {:>12} in {}",
                human_bytes(c.bytes),
                plural(c.allocations, "block", "blocks")
            )?;
        }
        Ok(())
    };
    table(o, "live at end by API", &p.stats.by_api)?;
    table(
        o,
        "live at end by module (of the first user frame)",
        &p.stats.by_module,
    )?;
    writeln!(
        o.w,
        "  top callsites by live bytes (the dump keeps only blocks still live, not freed ones):"
    )?;
    if p.stats.top_callsites.is_empty() {
        writeln!(o.w, "    (nothing live)")?;
    }
    for g in &p.stats.top_callsites {
        let at = o.where_text(&g.stack);
        writeln!(
            o.w,
            "    {:>12} in {:<14} {} via {}",
            human_bytes(g.bytes),
            plural(g.allocations, "block", "blocks"),
            at,
            clean(&g.api)
        )?;
    }
    writeln!(o.w)
}

fn footer(o: &mut Out<'_>, f: &Findings) -> io::Result<()> {
    if f.processes.len() > 1 {
        writeln!(
            o.w,
            "{}",
            o.paint(
                &format!(
                    "== total: {} ==",
                    plural(f.totals.processes, "process", "processes")
                ),
                Style::Bold
            )
        )?;
        if !f.callsites.is_empty() {
            writeln!(o.w, "Leaks by callsite, all processes:")?;
            for c in &f.callsites {
                let at = o.where_text(&c.stack);
                writeln!(
                    o.w,
                    "  {:>12} in {} ({}) via {}: {at}",
                    human_bytes(c.bytes),
                    plural(c.allocations, "allocation", "allocations"),
                    plural(c.processes, "process", "processes"),
                    clean(&c.api)
                )?;
            }
            writeln!(o.w)?;
        }
    }
    let per_rule = suppressed_per_rule(f);
    suppressions_table(o, "Suppressions used:", &f.rules, &per_rule)?;
    let b = f.totals.below_min_bytes;
    if b.groups > 0 {
        writeln!(
            o.w,
            "Ignored by --min-bytes {}: {} ({})",
            human_bytes(f.min_bytes),
            plural(b.groups, "leak group", "leak groups"),
            counts_text(b)
        )?;
    }
    let t = &f.totals;
    let mut errors = Vec::new();
    if t.double_frees > 0 {
        errors.push(plural(t.double_frees, "double free", "double frees"));
    }
    if t.invalid_frees > 0 {
        errors.push(plural(t.invalid_frees, "invalid free", "invalid frees"));
    }
    let other = t.bad_frees.saturating_sub(t.double_frees + t.invalid_frees);
    if other > 0 {
        errors.push(plural(other, "bad free not stored", "bad frees not stored"));
    }
    if t.failed_allocations > 0 {
        errors.push(plural(
            t.failed_allocations,
            "failed allocation",
            "failed allocations",
        ));
    }
    if !errors.is_empty() {
        writeln!(o.w, "Errors: {}", errors.join(", "))?;
    }
    if t.teardown > 0 {
        writeln!(o.w, "{TEARDOWN_TITLE}: {}.", teardown_text(t.teardown))?;
    }
    let held = cached_totals(f);
    if !held.is_empty() {
        let parts: Vec<String> = held
            .iter()
            .filter_map(|(i, c)| {
                f.caches
                    .get(*i)
                    .map(|r| format!("{} {}", clean(&r.id), human_bytes(c.bytes)))
            })
            .collect();
        writeln!(
            o.w,
            "Held by caches: {} ({}); {}.",
            counts_text(t.cached),
            parts.join(", "),
            cached_gate_text(f)
        )?;
    }
    let quiet = quiet_line(f);
    if !quiet.is_empty() {
        writeln!(o.w, "{quiet}.")?;
    }
    if f.verdict.tolerated {
        writeln!(o.w, "The {}: not failing for leaks.", tolerated_text(f))?;
    }
    if let Some(line) = exit_line(f) {
        writeln!(o.w, "{line}.")?;
    }
    let line = summary_line(f);
    let style = if t.leaked.groups > 0 {
        Style::Red
    } else {
        Style::Bold
    };
    writeln!(o.w, "{}", o.paint(&line, style))
}

impl Reporter for Text {
    fn report(&self, f: &Findings, view: &View, w: &mut dyn Write) -> io::Result<()> {
        let mut o = Out {
            w,
            color: self.color,
            root: view.source_root.as_deref(),
            show_cached: view.show_cached,
        };
        for p in &f.processes {
            process_section(&mut o, p, f, view)?;
        }
        footer(&mut o, f)
    }

    fn growth(&self, g: &GrowthFindings, view: &View, w: &mut dyn Write) -> io::Result<()> {
        let mut o = Out {
            w,
            color: self.color,
            root: view.source_root.as_deref(),
            show_cached: view.show_cached,
        };
        // Without --frames, a pool's suspect shows only the top of its stack (the allocation
        // that found the pool full says little about what keeps the memory).
        let pool_frames = view.frames.is_none().then_some(POOL_SUSPECT_FRAMES);
        for s in &g.series {
            growth_series(&mut o, s, pool_frames)?;
        }
        growth_footer(&mut o, g)
    }

    fn diff(&self, d: &DiffFindings, view: &View, w: &mut dyn Write) -> io::Result<()> {
        let mut o = Out {
            w,
            color: self.color,
            root: view.source_root.as_deref(),
            show_cached: view.show_cached,
        };
        writeln!(o.w, "{}", o.paint("== cudaleak diff ==", Style::Bold))?;
        for (name, side) in [("old", &d.old), ("new", &d.new)] {
            let source = clean(&side.source.display().to_string()).into_owned();
            writeln!(
                o.w,
                "{name}: {}",
                diff_side_text(&source, &process_label(&side.process), side.live)
            )?;
        }
        if d.old.process.exe != d.new.process.exe {
            let w = o.paint("warning:", Style::Yellow);
            writeln!(o.w, "{w} the two dumps come from different programs")?;
        }
        writeln!(o.w)?;
        let total = d.rows.len() as u64 + d.rows_not_shown;
        for (i, r) in d.rows.iter().enumerate() {
            let style = match r.trend() {
                1 => Style::Red,
                -1 => Style::Green,
                _ => Style::Dim,
            };
            let label = trend_label(r.trend());
            let head = o.paint(&format!("{label} {} of {total}:", i + 1), style);
            let blocks = |c: Counts| {
                format!(
                    "{} in {}",
                    human_bytes(c.bytes),
                    plural(c.allocations, "block", "blocks")
                )
            };
            if r.trend() == 0 {
                writeln!(
                    o.w,
                    "{head} {} via {} in both dumps",
                    blocks(r.new),
                    clean(&r.api)
                )?;
            } else {
                writeln!(
                    o.w,
                    "{head} {} via {} ({} → {})",
                    change_text(r.delta_bytes(), r.delta_blocks()),
                    clean(&r.api),
                    blocks(r.old),
                    blocks(r.new)
                )?;
            }
            o.stack(&r.stack, "    ")?;
            writeln!(o.w)?;
        }
        if d.rows_not_shown > 0 {
            writeln!(
                o.w,
                "... {}",
                not_shown_text(
                    d.rows_not_shown,
                    ("more callsite", "more callsites"),
                    "--top"
                )
            )?;
            writeln!(o.w)?;
        }
        writeln!(o.w, "{}", o.paint(&diff_summary_line(d), Style::Bold))
    }
}

/// Frames shown of a growth suspect held by a pool (a cache rule with `grows`) without --frames.
const POOL_SUSPECT_FRAMES: usize = 3;

fn growth_series(o: &mut Out<'_>, s: &Series, pool_frames: Option<usize>) -> io::Result<()> {
    writeln!(
        o.w,
        "{}",
        o.paint(&format!("== {} ==", process_label(&s.process)), Style::Bold)
    )?;
    if let Some(l) = &s.left_out {
        let names: Vec<String> = l
            .points
            .iter()
            .map(|p| clean(&p.source.display().to_string()).into_owned())
            .collect();
        writeln!(o.w, "note: {}.", left_out_text(l, &names))?;
    }
    if !s.judged() {
        writeln!(
            o.w,
            "{}",
            o.paint(&format!("{}.", unjudged_text(s)), Style::Yellow)
        )?;
        writeln!(o.w)?;
        return Ok(());
    }
    let labels: Vec<String> = s.points.iter().map(point_label).collect();
    let labels = if labels.len() <= 6 {
        labels.join(", ")
    } else {
        format!(
            "{}, …, {}",
            labels[..3].join(", "),
            labels[labels.len() - 2..].join(", ")
        )
    };
    let (first, last) = (s.points[0].live, s.points[s.points.len() - 1].live);
    writeln!(
        o.w,
        "{}",
        series_line(s, &labels, &counts_text(first), &counts_text(last))
    )?;
    writeln!(o.w)?;
    if s.suspects == 0 {
        writeln!(o.w, "{}", o.paint("No growth suspects.", Style::Green))?;
        writeln!(o.w)?;
    }
    let mut shown = 0;
    for r in s.rows.iter().filter(|r| r.is_suspect()) {
        shown += 1;
        let head = o.paint(&format!("Suspect {shown} of {}:", s.suspects), Style::Red);
        writeln!(
            o.w,
            "{head} {} via {}, {}, {}",
            change_text_paren(r.growth_bytes(), r.growth_blocks()),
            clean(&growth_api(r)),
            rate_text(r.bytes_per_hour),
            steps_text(r)
        )?;
        writeln!(o.w, "    live: {}", series_text(r))?;
        if let Some(k) = kept_text(r) {
            writeln!(o.w, "    kept: {k}")?;
        }
        if let Some(h) = &r.held_by {
            let held = held_by_text(&h.name, &h.id, h.grows.as_deref());
            writeln!(o.w, "    {held}")?;
        }
        // A framework's count shows where its record saw the blocks made, whole.
        let pool = r.framework.is_none() && r.held_by.as_ref().is_some_and(|h| h.grows.is_some());
        match pool_frames.filter(|_| pool) {
            Some(cap) => o.stack_top(&r.stack, "    ", cap)?,
            None => o.stack(&r.stack, "    ")?,
        }
        if let Some(f) = &r.framework {
            for g in f.groups.iter().skip(1).take(RECORD_GROUPS_SHOWN) {
                let at = own_frame(&g.stack)
                    .or(g.stack.where_frame())
                    .map_or(NO_FRAMES.into(), |f| frame_text_short(f, o.root));
                writeln!(o.w, "    {}", record_group_text(g.bytes, g.blocks, &at))?;
            }
            let rest = f.groups.len().saturating_sub(1 + RECORD_GROUPS_SHOWN);
            if rest > 0 {
                let more = o.paint(&record_groups_rest_text(rest as u64), Style::Dim);
                writeln!(o.w, "    {more}")?;
            }
        }
        writeln!(o.w)?;
    }
    if s.suspects_not_shown > 0 {
        writeln!(
            o.w,
            "... {}",
            not_shown_text(
                s.suspects_not_shown,
                ("more suspect", "more suspects"),
                "--top"
            )
        )?;
        writeln!(o.w)?;
    }
    let others: Vec<&GrowthRow> = s.rows.iter().filter(|r| !r.is_suspect()).collect();
    if !others.is_empty() {
        writeln!(o.w, "Grew, but not like a leak:")?;
        for r in others {
            // A framework's count without a line of its record is named by its count alone.
            let mut at = match r.framework.is_some() && r.stack.frames.is_empty() {
                true => String::new(),
                false => format!(" at {}", o.where_text(&r.stack)),
            };
            if let Some(h) = &r.held_by {
                at.push_str(&format!(" [{}]", h.id));
            }
            writeln!(
                o.w,
                "  {} via {}{at}: {} ({})",
                signed_human(r.growth_bytes()),
                clean(&growth_api(r)),
                r.not_suspect.map_or("", |n| n.as_str()),
                steps_text(r)
            )?;
        }
        writeln!(o.w)?;
    }
    if let Some(note) = coarse_pools_text(&s.coarse_pools) {
        writeln!(o.w, "note: {}.", clean(&note))?;
        writeln!(o.w)?;
    }
    Ok(())
}

/// What each suppression rule matched, one line per rule (nothing without rules).
fn suppressions_table(
    o: &mut Out<'_>,
    title: &str,
    rules: &[crate::suppressions::Rule],
    counts: &[crate::analyze::Counts],
) -> io::Result<()> {
    if rules.is_empty() {
        return Ok(());
    }
    writeln!(o.w, "{title}")?;
    writeln!(o.w, "  {:>11} {:>12}  rule", "allocations", "bytes")?;
    for (r, c) in rules.iter().zip(counts) {
        writeln!(
            o.w,
            "  {:>11} {:>12}  {} ({}:{})",
            c.allocations,
            human_bytes(c.bytes),
            clean(&r.text()),
            clean(&r.file.display().to_string()),
            r.line
        )?;
    }
    writeln!(o.w)
}

fn growth_footer(o: &mut Out<'_>, g: &GrowthFindings) -> io::Result<()> {
    for s in g.skipped.iter().take(NAMED_SKIPPED) {
        let source = clean(&s.source.display().to_string()).into_owned();
        writeln!(
            o.w,
            "note: {}",
            one_dump_text(&process_label(&s.process), Some(&source))
        )?;
    }
    if let Some(rest) = skipped_rest_text(g.skipped.len()) {
        writeln!(o.w, "note: {rest}")?;
    }
    if !g.skipped.is_empty() {
        writeln!(o.w)?;
    }
    suppressions_table(
        o,
        "Suppressions used (blocks summed over every dump):",
        &g.rules,
        &g.suppressed,
    )?;
    writeln!(o.w, "{}", suspect_rule_text())?;
    if g.tolerated {
        writeln!(
            o.w,
            "The suspects' growth of {} is within --max-leaked-bytes {}: not failing.",
            human_bytes(g.suspect_growth_bytes),
            human_bytes(g.max_growth_bytes)
        )?;
    }
    if g.exit_code != 0 {
        writeln!(
            o.w,
            "{}.",
            gate_failed_text(&growth_gate_reason(g), g.exit_code)
        )?;
    }
    let style = if g.suspects > 0 {
        Style::Red
    } else {
        Style::Bold
    };
    writeln!(o.w, "{}", o.paint(&growth_summary_line(g), style))
}
