//! The HTML report: one self-contained page (inline CSS, inline SVG, a small inline script; no
//! network, no fonts, nothing to fetch) to open from disk or attach to a CI run. It shows the
//! summary and the gate's verdict, the leak groups and other findings with their stacks in
//! `<details>`, a flame graph (icicle) of live bytes at exit by stack, and — when the inputs hold
//! a snapshot series — a timeline of live memory stacked by the top callsites with the growth
//! suspects marked, and a flame graph of each callsite's peak.
//!
//! Everything essential reads without JavaScript: `<title>` elements give hover text, `<details>`
//! folds. The script only adds click-to-zoom on flame graphs and highlighting across a timeline.
//! Every string from a dump is escaped (C++ names carry `<`, `>`, `&`). The output depends only
//! on the findings — no clock, no randomness — so it can be pinned by tests. What is embedded is
//! capped (groups per section, frames per stack, flame-graph nodes, timeline points), with counts
//! of what is not shown, so a page stays in the tens or hundreds of KiB.
//!
//! Like every reporter it never decides anything (what leaked, what is a suspect and the gate
//! were settled in `analyze` and `growth`), and it must not panic on any findings.
//!
//! Its rooms: `page.rs` (the skeleton, escaping, stacks and groups), `style.css` and `script.js`
//! (embedded whole), `timeline.rs`, `flame_graph.rs`, `leaks.rs` (the exit report's sections),
//! `growth.rs` (the series' callsites) and `diff.rs`; here, the page's order, its verdict and
//! its totals.

mod diff;
mod flame_graph;
mod growth;
mod leaks;
mod page;
mod timeline;

use std::fmt::Write as _;
use std::io::{self, Write};

pub use page::esc;
use page::{esc_text, Page};

use crate::analyze::{DiffFindings, Findings, View};
use crate::growth::GrowthFindings;
use crate::report::wording::{
    cached_text, gate_failed_text, growth_gate_reason, growth_summary_line, summary_line,
    teardown_text, tolerated_text,
};
use crate::report::{self, counts_text, gate_reasons, human_bytes, plural, Reporter};

pub struct Html;

/// Groups listed per section and process when `--top` asks for no fewer.
pub const MAX_GROUPS: usize = 50;
/// Frames listed per stack when `--frames` asks for no fewer.
pub const MAX_FRAMES: usize = 48;
/// Processes given a section of their own.
pub const MAX_PROCESSES: usize = 32;
/// Callsites drawn as bands of their own in a timeline; the rest are one band.
pub const TIMELINE_CALLSITES: usize = 8;
/// Dumps drawn per timeline; a longer series is sampled evenly (first, last and every peak kept).
pub const TIMELINE_POINTS: usize = 300;
/// Flame-graph nodes drawn; narrower nodes go first.
pub const FLAME_NODES: usize = 1500;

/// Which verdict the command's exit status is: the exit report's gate, or `--growth`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gatekeeper {
    Report,
    Growth,
}

/// The verdict of the exit report: `Gate failed (leaks): exit status 23.` or why it passed.
fn report_verdict(f: &Findings) -> (bool, String) {
    let reasons = gate_reasons(f);
    if !reasons.is_empty() && f.verdict.exit_code != 0 {
        return (
            true,
            format!(
                "{}.",
                gate_failed_text(&reasons.join(" and "), f.verdict.exit_code)
            ),
        );
    }
    let why = if f.verdict.tolerated {
        format!(" (the {})", tolerated_text(f))
    } else if f.gate.exit_code == 0 && (f.verdict.leaks || f.totals.bad_frees > 0) {
        " (--exit-code 0: the gate is off)".into()
    } else {
        String::new()
    };
    (false, format!("Gate passed: exit status 0{why}."))
}

fn growth_verdict(g: &GrowthFindings) -> (bool, String) {
    if g.exit_code != 0 {
        return (
            true,
            format!("{}.", gate_failed_text(&growth_gate_reason(g), g.exit_code)),
        );
    }
    let why = if g.tolerated {
        format!(
            " (the suspects' growth {} is within --max-leaked-bytes {})",
            human_bytes(g.suspect_growth_bytes),
            human_bytes(g.max_growth_bytes)
        )
    } else {
        String::new()
    };
    (false, format!("Gate passed: exit status 0{why}."))
}

/// The page: the exit report (`exit`), the series (`series`), or both; `gate` says which verdict
/// is this command's exit status.
fn page(
    exit: Option<&Findings>,
    series: Option<&GrowthFindings>,
    gate: Gatekeeper,
    view: &View,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut p = Page::new(view);
    let summary = match (gate, exit, series) {
        (Gatekeeper::Growth, _, Some(g)) => growth_summary_line(g),
        (_, Some(f), _) => summary_line(f),
        (_, None, Some(g)) => growth_summary_line(g),
        (_, None, None) => "SUMMARY: no dumps".into(),
    };
    p.head(&format!(
        "cudaleak: {}",
        summary.trim_start_matches("SUMMARY: ")
    ));
    p.s.push_str("<header>\n<h1>cudaleak report</h1>\n");
    let verdict = match (gate, exit, series) {
        (Gatekeeper::Growth, _, Some(g)) => Some(growth_verdict(g)),
        (_, Some(f), _) => Some(report_verdict(f)),
        (_, None, Some(g)) => Some(growth_verdict(g)),
        _ => None,
    };
    if let Some((failed, text)) = verdict {
        let _ = writeln!(
            p.s,
            "<p class=\"verdict {}\" id=\"verdict\">{}</p>",
            if failed { "fail" } else { "pass" },
            esc_text(&text)
        );
    }
    let _ = writeln!(p.s, "<p class=\"summary\">{}</p>", esc_text(&summary));
    totals_table(&mut p, exit, series);
    p.s.push_str("<nav>");
    if series.is_some() {
        p.s.push_str("<a href=\"#timeline\">Timeline</a>");
    }
    p.s.push_str("<a href=\"#flame\">Flame graphs</a>");
    if exit.is_some() {
        p.s.push_str("<a href=\"#leaks\">Leaks</a>");
    }
    if series.is_some() {
        p.s.push_str("<a href=\"#growth\">Growth</a>");
    }
    p.s.push_str("</nav>\n</header>\n");

    if let Some(g) = series {
        timeline::section(&mut p, g, gate);
    }
    flame_graph::section(&mut p, exit, series);
    if let Some(f) = exit {
        leaks::section(&mut p, f);
    }
    if let Some(g) = series {
        growth::section(&mut p, g);
    }
    let mut inputs: Vec<String> = Vec::new();
    if let Some(f) = exit {
        inputs.extend(f.processes.iter().map(|p| p.source.display().to_string()));
    }
    if let Some(g) = series {
        for s in &g.series {
            inputs.extend(s.points.iter().map(|p| p.source.display().to_string()));
        }
    }
    inputs.sort();
    inputs.dedup();
    p.tail(&inputs);
    out.write_all(p.s.as_bytes())
}

fn totals_table(p: &mut Page, exit: Option<&Findings>, series: Option<&GrowthFindings>) {
    p.s.push_str("<table class=\"totals\">\n");
    let mut row = |k: &str, v: String, class: &str| {
        let _ = writeln!(p.s, "<tr><th>{k}</th><td class=\"{class}\">{v}</td></tr>");
    };
    if let Some(f) = exit {
        let t = &f.totals;
        let class = |bad: bool| if bad { "fail-text" } else { "" };
        row(
            "Leaked",
            format!(
                "{} from {} ({})",
                counts_text(t.leaked),
                plural(t.callsites, "callsite", "callsites"),
                plural(t.processes, "process", "processes")
            ),
            class(t.leaked.groups > 0),
        );
        row(
            "Held by caches",
            esc_text(&cached_text(t.cached, f)),
            class(f.verdict.fails_on_cached),
        );
        row(
            "Failed allocations",
            format!(
                "{} (reported, not counted by the gate)",
                t.failed_allocations
            ),
            if t.failed_allocations > 0 {
                "warn-text"
            } else {
                ""
            },
        );
        row(
            "Bad frees",
            format!(
                "{} ({}, {})",
                t.bad_frees,
                plural(t.double_frees, "double free", "double frees"),
                plural(t.invalid_frees, "invalid free", "invalid frees")
            ),
            class(t.bad_frees > 0),
        );
        row(
            "Managed memory",
            format!("{} live", counts_text(t.managed)),
            if t.managed.allocations > 0 {
                "warn-text"
            } else {
                ""
            },
        );
        if t.teardown > 0 {
            row(
                "Teardown notes",
                format!("{} (not errors)", teardown_text(t.teardown)),
                "",
            );
        }
        if t.suppressed.allocations > 0 {
            row("Suppressed", counts_text(t.suppressed), "");
        }
        if t.below_min_bytes.allocations > 0 {
            row("Below --min-bytes", counts_text(t.below_min_bytes), "");
        }
    }
    if let Some(g) = series {
        let dumps: usize = g.series.iter().map(|s| s.points.len()).sum();
        row(
            "Growth suspects",
            format!(
                "{} (+{}) over {} of {}",
                g.suspects,
                human_bytes(g.suspect_growth_bytes),
                plural(dumps as u64, "dump", "dumps"),
                plural(g.series.len() as u64, "process", "processes")
            ),
            if g.suspects > 0 { "fail-text" } else { "" },
        );
    }
    p.s.push_str("</table>\n");
}

impl Reporter for Html {
    fn report(&self, f: &Findings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        page(Some(f), None, Gatekeeper::Report, view, out)
    }

    fn diff(&self, d: &DiffFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        diff::page(d, view, out)
    }

    fn growth(&self, g: &GrowthFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        page(None, Some(g), Gatekeeper::Growth, view, out)
    }

    fn shows_both(&self) -> bool {
        true
    }

    fn page(&self, both: report::Page<'_>, view: &View, out: &mut dyn Write) -> io::Result<()> {
        match both {
            report::Page::Report { exit, series } => {
                page(Some(exit), series, Gatekeeper::Report, view, out)
            }
            report::Page::Growth { series, exit } => {
                page(exit, Some(series), Gatekeeper::Growth, view, out)
            }
        }
    }
}

/// `num` for the snapshot tests next door.
#[cfg(test)]
pub(crate) fn tests_num(v: f64) -> String {
    page::num(v)
}
