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

use crate::report::group_what;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::flame::{self, Class, Node, Weighted};
use super::{
    cached_by_rule, cached_gate_text, clean, coarse_pools_text, counts_text, diff_summary_line,
    error_text, folded_text, frame_text_short, gate_reasons, growth_gate_reason,
    growth_summary_line, human_bytes, human_duration, placement, plural, point_label,
    pool_growth_text, process_label, rate_text, short_function, signed_human, steps_text,
    summary_line, Reporter, FAILED_ADVICE, MANAGED_ADVICE, TEARDOWN_TEXT, VERSION,
};
use super::{script_end_text, skipped_rest_text, NAMED_SKIPPED};
use crate::analyze::View;
use crate::analyze::{BadFreeGroup, DiffFindings, Findings, FrameView, LeakGroup, StackView};
use crate::growth::{GrowthFindings, GrowthRow, Series, RULE_TEXT};
use cudaleak_format::EventType;

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

const FLAME_WIDTH: f64 = 1200.0;
const FLAME_ROW: f64 = 17.0;
/// A node narrower than this many pixels (of FLAME_WIDTH) is not drawn.
const FLAME_MIN_PX: f64 = 0.6;

/// Which verdict the command's exit status is: the exit report's gate, or `--growth`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gatekeeper {
    Report,
    Growth,
}

/// Program text made safe for HTML text and attribute values: control characters written
/// visibly (as in text reports), then `&`, `<`, `>`, `"` and `'` as entities.
pub fn esc(s: &str) -> String {
    let c = clean(s);
    let mut out = String::with_capacity(c.len() + 8);
    for ch in c.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

/// Text the report wrote itself (already cleaned where it holds program names): escaped only.
fn esc_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `1.5`, `12`, `0.25`: short, fixed coordinates (no `-0`, no exponent).
fn num(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" || s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A stable small hash of a label, for colours.
fn hash(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

const STYLE: &str = r#"
:root{--fg:#1d2230;--muted:#5b6475;--line:#d8dce4;--bg:#fff;--panel:#f6f7f9;--bad:#b3261e;--ok:#1f7a3a;--warn:#8a5a00}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1280px;padding:16px 24px 48px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:22px;margin:4px 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
code,.mono,.stack{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.verdict{font-size:16px;font-weight:600;padding:8px 12px;border-radius:6px;display:inline-block}
.verdict.fail{background:#fde8e6;color:var(--bad)}.verdict.pass{background:#e5f4ea;color:var(--ok)}
.summary{font-family:ui-monospace,monospace;font-size:13px;margin:8px 0}
table{border-collapse:collapse;margin:6px 0}table.legend-table{width:100%}td code{word-break:break-all}td,th{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}th{background:var(--panel)}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
nav a{margin-right:14px}
details{border:1px solid var(--line);border-radius:5px;margin:5px 0;background:var(--bg)}
details>summary{cursor:pointer;padding:5px 9px;background:var(--panel)}
details[open]>summary{border-bottom:1px solid var(--line)}
.stack{list-style:none;margin:0;padding:6px 10px}.stack li{white-space:pre-wrap;word-break:break-all}
.stack .n{color:var(--muted);display:inline-block;min-width:2.6em}
.stack .fold,.stack .more,.note,.muted{color:var(--muted)}
.stack .py .fn{color:#1b6e3a}.badge{font-size:10px;border:1px solid currentColor;border-radius:3px;padding:0 3px;margin-right:4px;vertical-align:1px}
.py .badge{color:#1b6e3a}.suspect-badge{color:var(--bad);font-weight:600}
.fail-text{color:var(--bad)}.warn-text{color:var(--warn)}.ok{color:var(--ok)}
svg{display:block;max-width:100%;height:auto;background:#fff}
svg text{font-family:ui-monospace,Menlo,Consolas,monospace}
svg.flame g.node{cursor:pointer}svg.flame rect{stroke:#fff;stroke-width:.5}svg.flame text{font-size:11px;fill:#111;pointer-events:none}
svg.timeline .band{stroke:#fff;stroke-width:.5}svg.timeline .band.suspect{stroke:#b3261e;stroke-width:2}
svg.timeline .band.dim{opacity:.25}svg.timeline .axis{stroke:#888;stroke-width:1}svg.timeline text{font-size:11px;fill:#444}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:4px}
tr.legend{cursor:pointer}tr.legend.hl{background:#fff5d6}
footer{margin-top:32px;color:var(--muted);font-size:12px}
"#;

/// Click a flame-graph node to zoom into it (the root zooms out); hover or click a timeline's
/// legend row to pick out its band. The page reads the same without it.
const SCRIPT: &str = r#"
(function () {
  'use strict';
  var W = 1200;
  function fit(g, x, w) {
    var r = g.querySelector('rect'), t = g.querySelector('text');
    r.setAttribute('x', x.toFixed(2));
    r.setAttribute('width', Math.max(w - 0.5, 0).toFixed(2));
    if (!t) { return; }
    var label = g.getAttribute('data-label') || '';
    var n = Math.floor((w - 6) / 6.6);
    t.setAttribute('x', (x + 3).toFixed(2));
    t.textContent = n < 3 ? '' : (label.length > n ? label.slice(0, n - 1) + '\u2026' : label);
  }
  function zoom(svg, target) {
    var x0 = +target.getAttribute('data-x'), w0 = +target.getAttribute('data-w');
    var d0 = +target.getAttribute('data-d');
    svg.querySelectorAll('g.node').forEach(function (g) {
      var x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w'), d = +g.getAttribute('data-d');
      var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9 && d >= d0;
      var above = d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
      if (inside) {
        g.style.display = '';
        fit(g, (x - x0) / w0 * W, w / w0 * W);
      } else if (above) {
        g.style.display = '';
        fit(g, 0, W);
      } else {
        g.style.display = 'none';
      }
    });
  }
  document.querySelectorAll('svg.flame').forEach(function (svg) {
    svg.addEventListener('click', function (e) {
      var g = e.target.closest ? e.target.closest('g.node') : null;
      if (g) { zoom(svg, g); }
    });
  });
  document.querySelectorAll('table.legend-table').forEach(function (table) {
    var svg = document.getElementById(table.getAttribute('data-for'));
    if (!svg) { return; }
    var pinned = null;
    function show(id) {
      svg.querySelectorAll('.band').forEach(function (b) {
        b.classList.toggle('dim', id !== null && b.getAttribute('data-band') !== id);
      });
      table.querySelectorAll('tr.legend').forEach(function (tr) {
        tr.classList.toggle('hl', tr.getAttribute('data-band') === id);
      });
    }
    table.querySelectorAll('tr.legend').forEach(function (tr) {
      var id = tr.getAttribute('data-band');
      tr.addEventListener('mouseenter', function () { if (pinned === null) { show(id); } });
      tr.addEventListener('mouseleave', function () { if (pinned === null) { show(null); } });
      tr.addEventListener('click', function () { pinned = pinned === id ? null : id; show(pinned); });
    });
  });
  // Reached only when everything above ran: the browser test looks for it.
  document.documentElement.setAttribute('data-script', 'ready');
})();
"#;

/// The page under construction. Writing to a `String` cannot fail; the whole page is written
/// out at the end.
struct Page {
    s: String,
    root: Option<String>,
    groups: usize,
    frames: usize,
    /// Ids of SVG elements, so every one is unique in the page.
    next_id: usize,
}

impl Page {
    fn new(view: &View) -> Self {
        Page {
            s: String::with_capacity(64 << 10),
            root: view.source_root.clone(),
            groups: view.top.map_or(MAX_GROUPS, |t| t.min(MAX_GROUPS)),
            frames: view.frames.map_or(MAX_FRAMES, |f| f.min(MAX_FRAMES)),
            next_id: 0,
        }
    }

    fn id(&mut self, what: &str) -> String {
        self.next_id += 1;
        format!("{what}-{}", self.next_id)
    }

    fn head(&mut self, title: &str) {
        let _ = write!(
            self.s,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"cudaleak {VERSION}\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            esc_text(title)
        );
    }

    fn tail(&mut self, inputs: &[String]) {
        self.s.push_str("<footer>\n<p>Made by cudaleak ");
        self.s.push_str(VERSION);
        self.s.push_str(
            " from the dumps below. One self-contained file: nothing is fetched; \
             the script only adds zooming and highlighting.</p>\n",
        );
        if !inputs.is_empty() {
            let shown = inputs.len().min(12);
            self.s.push_str("<p class=\"mono\">");
            for (i, f) in inputs.iter().take(shown).enumerate() {
                if i > 0 {
                    self.s.push_str("<br>");
                }
                self.s.push_str(&esc(f));
            }
            if inputs.len() > shown {
                let _ = write!(self.s, "<br>… {} more", inputs.len() - shown);
            }
            self.s.push_str("</p>\n");
        }
        let _ = write!(
            self.s,
            "</footer>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
        );
    }

    /// A stack as a list: `#i frame` lines, folded runs and cuts as unnumbered lines.
    fn stack(&mut self, st: &StackView) {
        self.s.push_str("<ul class=\"stack\">");
        let shown = st.frames.len().min(self.frames);
        for (i, f) in st.frames.iter().take(shown).enumerate() {
            self.folded(st, i);
            let py = if f.python { " class=\"py\"" } else { "" };
            let badge = if f.python {
                "<span class=\"badge\">py</span>"
            } else {
                ""
            };
            let _ = write!(
                self.s,
                "<li{py}><span class=\"n\">#{i}</span>{badge}{}</li>",
                frame_html(f, self.root.as_deref())
            );
        }
        if shown == st.frames.len() {
            self.folded(st, st.frames.len());
        }
        let more = st.omitted + (st.frames.len() - shown);
        if more > 0 {
            let _ = write!(
                self.s,
                "<li class=\"more\">… {} (--frames)</li>",
                plural(more as u64, "more frame", "more frames")
            );
        }
        self.s.push_str("</ul>\n");
    }

    fn folded(&mut self, st: &StackView, at: usize) {
        for r in st.folded.iter().filter(|r| r.at == at) {
            let _ = write!(
                self.s,
                "<li class=\"fold\">   {} (--native)</li>",
                esc_text(&folded_text(r))
            );
        }
    }

    /// A stack's innermost frame for one-line listings, C++ template arguments of long names
    /// elided as in text output (the stack below it has the whole name).
    fn where_text(&self, st: &StackView) -> String {
        st.where_frame().map_or("(no frames)".into(), |f| {
            frame_text_short(f, self.root.as_deref())
        })
    }

    /// One group as a `<details>` element: size and API in the summary line, the stack inside.
    fn group(&mut self, head: &str, st: &StackView, open: bool) {
        let _ = writeln!(
            self.s,
            "<details{}><summary>{head} <span class=\"muted\">at</span> <code>{}</code></summary>",
            if open { " open" } else { "" },
            esc_text(&self.where_text(st))
        );
        self.stack(st);
        self.s.push_str("</details>\n");
    }

    fn not_shown(&mut self, n: usize, what: (&str, &str), why: &str) {
        if n > 0 {
            let _ = writeln!(
                self.s,
                "<p class=\"note\">… {} not shown ({why})</p>",
                plural(n as u64, what.0, what.1)
            );
        }
    }
}

/// A frame as HTML: function (or address), `at file:line`, `(module)`; all escaped.
fn frame_html(f: &FrameView, root: Option<&str>) -> String {
    let mut s = String::new();
    match &f.function {
        Some(name) => {
            let _ = write!(s, "<span class=\"fn\">{}</span>", esc(name));
        }
        None => {
            let _ = write!(s, "<span class=\"fn\">{:#x}</span>", f.ip);
        }
    }
    if let Some(file) = &f.file {
        let shown = root
            .and_then(|r| file.strip_prefix(r))
            .filter(|rel| !rel.is_empty())
            .unwrap_or(file);
        let _ = write!(s, " at <span class=\"file\">{}", esc(shown));
        if let Some(line) = f.line {
            let _ = write!(s, ":{line}");
        }
        s.push_str("</span>");
    }
    match (f.module_name(), f.function.is_none(), f.offset) {
        (Some(m), true, Some(off)) => {
            let _ = write!(s, " <span class=\"muted\">({}+{off:#x})</span>", esc(m));
        }
        (Some(m), _, _) => {
            let _ = write!(s, " <span class=\"muted\">({})</span>", esc(m));
        }
        (None, _, _) => {}
    }
    s
}

fn leak_head(g: &LeakGroup) -> String {
    format!(
        "<b>{}</b> in {} via <code>{}</code> {}",
        human_bytes(g.bytes),
        esc_text(&group_what(g)),
        esc(&g.api),
        esc_text(&placement(g.kind, g.device))
    )
}

/// The verdict of the exit report: `Gate failed (leaks): exit status 23.` or why it passed.
fn report_verdict(f: &Findings) -> (bool, String) {
    let reasons = gate_reasons(f);
    if !reasons.is_empty() && f.verdict.exit_code != 0 {
        return (
            true,
            format!(
                "Gate failed ({}): exit status {}.",
                reasons.join(" and "),
                f.verdict.exit_code
            ),
        );
    }
    let why = if f.verdict.tolerated {
        format!(
            " (the leaked {} are within --max-leaked-bytes {})",
            human_bytes(f.totals.leaked.bytes),
            human_bytes(f.gate.max_leaked_bytes)
        )
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
            format!(
                "Gate failed ({}): exit status {}.",
                growth_gate_reason(g),
                g.exit_code
            ),
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
pub fn page(
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
        timeline_section(&mut p, g, gate);
    }
    flame_section(&mut p, exit, series);
    if let Some(f) = exit {
        report_sections(&mut p, f);
    }
    if let Some(g) = series {
        growth_sections(&mut p, g);
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
            format!(
                "{}; {}",
                counts_text(t.cached),
                esc_text(cached_gate_text(f))
            ),
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
                format!(
                    "{} {TEARDOWN_TEXT} (not errors)",
                    plural(t.teardown, "call", "calls")
                ),
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

// ---------------------------------------------------------------------------------------------
// Timeline

/// Which dumps of a series are drawn: all of them, or an even sample that keeps the first, the
/// last, and the dump where all live memory peaked.
fn sample_points(s: &Series) -> Vec<usize> {
    let n = s.points.len();
    if n <= TIMELINE_POINTS {
        return (0..n).collect();
    }
    let mut idx: Vec<usize> = (0..TIMELINE_POINTS)
        .map(|i| i * (n - 1) / (TIMELINE_POINTS - 1))
        .collect();
    if let Some(peak) = (0..n).max_by_key(|&i| (s.points[i].live.bytes, std::cmp::Reverse(i))) {
        idx.push(peak);
    }
    idx.sort_unstable();
    idx.dedup();
    idx
}

/// Band colours: suspects warm, other callsites cool, the rest grey.
const PALETTE: [&str; TIMELINE_CALLSITES] = [
    "#e4572e", "#f3a712", "#4c9f70", "#2e86ab", "#a23b72", "#8f8f3f", "#5c6bc0", "#c0707a",
];
const OTHER_COLOUR: &str = "#c9ced8";

fn timeline_section(p: &mut Page, g: &GrowthFindings, gate: Gatekeeper) {
    p.s.push_str("<section id=\"timeline\">\n<h2>Live memory over time</h2>\n");
    let _ = writeln!(
        p.s,
        "<p>Live bytes at each dump of the series, stacked by the {TIMELINE_CALLSITES} callsites \
         that grew most (growth suspects outlined in red), the rest as one grey band. \
         Hover a band for its numbers; {}.</p>",
        if gate == Gatekeeper::Report {
            "growth suspects do not decide this report's exit status (<code>cudaleak report \
             --growth</code> gates on them)"
        } else {
            "suspects fail the gate"
        }
    );
    for s in g.series.iter().take(MAX_PROCESSES) {
        timeline(p, s);
    }
    p.not_shown(
        g.series.len().saturating_sub(MAX_PROCESSES),
        ("more process", "more processes"),
        "timelines of the first 32 by pid",
    );
    p.s.push_str("</section>\n");
}

fn timeline(p: &mut Page, s: &Series) {
    let _ = writeln!(p.s, "<h3>{}</h3>", esc_text(&process_label(&s.process)));
    let first = s.points.first().map_or(0, |x| x.live.bytes);
    let last = s.points.last().map_or(0, |x| x.live.bytes);
    let _ = writeln!(
        p.s,
        "<p>{} over {} ({} → {}); live {} → {}.</p>",
        plural(s.points.len() as u64, "dump", "dumps"),
        human_duration(s.span_ms),
        esc_text(&s.points.first().map(point_label).unwrap_or_default()),
        esc_text(&s.points.last().map(point_label).unwrap_or_default()),
        human_bytes(first),
        human_bytes(last)
    );
    let idx = sample_points(s);
    if idx.len() < s.points.len() {
        let _ = writeln!(
            p.s,
            "<p class=\"note\">{} of the {} dumps are drawn (evenly spaced, the peak kept).</p>",
            idx.len(),
            s.points.len()
        );
    }
    let rows: Vec<&GrowthRow> = s.rows.iter().take(TIMELINE_CALLSITES).collect();
    // Bytes of each drawn band at each drawn dump: the "other" band first (bottom), then the
    // rows from the last to the first, so the first suspect's growth is the top edge.
    let mut bands: Vec<Vec<u64>> = Vec::with_capacity(rows.len() + 1);
    let other: Vec<u64> = idx
        .iter()
        .map(|&i| {
            let shown: u64 = rows
                .iter()
                .map(|r| r.series.get(i).map_or(0, |c| c.bytes))
                .fold(0, u64::saturating_add);
            s.points[i].live.bytes.saturating_sub(shown)
        })
        .collect();
    bands.push(other);
    for r in rows.iter().rev() {
        bands.push(
            idx.iter()
                .map(|&i| r.series.get(i).map_or(0, |c| c.bytes))
                .collect(),
        );
    }
    let totals: Vec<u64> = (0..idx.len())
        .map(|k| bands.iter().map(|b| b[k]).fold(0, u64::saturating_add))
        .collect();
    let ymax = totals.iter().copied().max().unwrap_or(0).max(1);

    let (w, h) = (960.0, 280.0);
    let (left, right, top, bottom) = (78.0, 12.0, 10.0, 34.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let t0 = s.points.first().map_or(0, |x| x.end_unix_ms);
    let by_time = s.span_ms > 0;
    let xs: Vec<f64> = idx
        .iter()
        .map(|&i| {
            let f = if by_time {
                s.points[i].end_unix_ms.saturating_sub(t0) as f64 / s.span_ms as f64
            } else if s.points.len() > 1 {
                i as f64 / (s.points.len() - 1) as f64
            } else {
                0.0
            };
            left + f * pw
        })
        .collect();
    let y = |b: u64| top + ph - (b as f64 / ymax as f64) * ph;

    let id = p.id("timeline");
    let _ = writeln!(
        p.s,
        "<svg class=\"timeline\" id=\"{id}\" data-callsites=\"{}\" data-dumps=\"{}\" \
         viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" \
         aria-label=\"live memory over time\">",
        rows.len(),
        s.points.len()
    );
    // Axes and ticks.
    for k in 0..=4u64 {
        let v = ymax / 4 * k;
        let yy = num(y(v));
        let _ = writeln!(
            p.s,
            "<line class=\"axis\" x1=\"{}\" y1=\"{yy}\" x2=\"{}\" y2=\"{yy}\" stroke-opacity=\".3\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            num(left),
            num(left + pw),
            num(left - 6.0),
            num(y(v) + 4.0),
            human_bytes(v)
        );
    }
    let _ = writeln!(
        p.s,
        "<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        num(left),
        num(h - 12.0),
        if by_time { "0 s" } else { "dump 1" },
        num(left + pw),
        num(h - 12.0),
        if by_time {
            esc_text(&human_duration(s.span_ms))
        } else {
            format!("dump {}", s.points.len())
        }
    );
    // Bands, bottom up.
    let mut lower = vec![0u64; idx.len()];
    for (b, values) in bands.iter().enumerate() {
        let upper: Vec<u64> = lower
            .iter()
            .zip(values)
            .map(|(l, v)| l.saturating_add(*v))
            .collect();
        let mut d = String::new();
        for (k, x) in xs.iter().enumerate() {
            let _ = write!(
                d,
                "{}{},{}",
                if k == 0 { "M" } else { "L" },
                num(*x),
                num(y(upper[k]))
            );
        }
        for (k, x) in xs.iter().enumerate().rev() {
            let _ = write!(d, "L{},{}", num(*x), num(y(lower[k])));
        }
        d.push('Z');
        let (class, colour, title) = if b == 0 {
            (
                "band other".to_string(),
                OTHER_COLOUR.to_string(),
                format!(
                    "other callsites ({} drawn as bands of their own): {} → {}",
                    rows.len(),
                    human_bytes(values.first().copied().unwrap_or(0)),
                    human_bytes(values.last().copied().unwrap_or(0))
                ),
            )
        } else {
            // Band b (from the bottom) draws row n: legend and colours follow the row.
            let n = rows.len() - b + 1;
            let r = rows[n - 1];
            (
                format!(
                    "band callsite{}",
                    if r.is_suspect() { " suspect" } else { "" }
                ),
                PALETTE[(n - 1) % PALETTE.len()].to_string(),
                band_title(p, n, r),
            )
        };
        let _ = writeln!(
            p.s,
            "<path class=\"{class}\" data-band=\"{band}\" fill=\"{colour}\" d=\"{d}\"><title>{}</title></path>",
            esc_text(&title),
            band = if b == 0 { 0 } else { rows.len() - b + 1 }
        );
        lower = upper;
    }
    // A mark at each drawn dump on the top edge.
    for (k, x) in xs.iter().enumerate() {
        let _ = write!(
            p.s,
            "<circle class=\"dump\" cx=\"{}\" cy=\"{}\" r=\"2\" fill=\"#333\"><title>{}: {}</title></circle>",
            num(*x),
            num(y(totals[k])),
            esc_text(&point_label(&s.points[idx[k]])),
            human_bytes(s.points[idx[k]].live.bytes)
        );
    }
    p.s.push_str("\n</svg>\n");

    // The legend: one row per band, top band first.
    let _ = writeln!(
        p.s,
        "<table class=\"legend-table\" data-for=\"{id}\"><tr><th></th><th>Callsite</th>\
         <th>Suspect</th><th>Growth</th><th>Per hour</th><th>Live first → last</th></tr>"
    );
    for (b, r) in rows.iter().enumerate().map(|(i, r)| (i + 1, r)) {
        let mut suspect = match r.not_suspect {
            None => "<span class=\"suspect-badge\">yes</span>".to_string(),
            Some(why) => format!("no: {}", why.as_str()),
        };
        if let Some(h) = &r.held_by {
            suspect.push_str(&format!(
                " <span class=\"muted\" title=\"{}\">held by <code>{}</code></span>",
                esc(h.grows.as_deref().unwrap_or(&h.name)),
                esc(&h.id)
            ));
        }
        let _ = writeln!(
            p.s,
            "<tr class=\"legend\" data-band=\"{b}\"><td><span class=\"swatch\" style=\"background:{}\"></span></td>\
             <td><code>{}</code> <span class=\"muted\">via {}</span></td><td>{suspect}</td>\
             <td class=\"num\">{} ({:+} blocks)</td><td class=\"num\">{}</td><td class=\"num\">{} → {}</td></tr>",
            PALETTE[(b - 1) % PALETTE.len()],
            esc_text(&p.where_text(&r.stack)),
            esc(&r.api),
            signed_human(r.growth_bytes()),
            r.growth_blocks(),
            esc_text(&rate_text(r.bytes_per_hour)),
            human_bytes(r.first().bytes),
            human_bytes(r.last().bytes),
        );
    }
    let _ = writeln!(
        p.s,
        "<tr class=\"legend\" data-band=\"0\"><td><span class=\"swatch\" style=\"background:{OTHER_COLOUR}\"></span></td>\
         <td colspan=\"5\">other callsites{}</td></tr>\n</table>",
        if s.rows.len() > rows.len() {
            format!(
                " (including {} that grew, listed below)",
                plural(
                    (s.rows.len() - rows.len()) as u64,
                    "more callsite",
                    "more callsites"
                )
            )
        } else {
            String::new()
        }
    );
}

fn band_title(p: &Page, b: usize, r: &GrowthRow) -> String {
    format!(
        "{b}. {}{} via {}: {} ({:+} blocks), {}; {}; live {} → {}",
        if r.is_suspect() { "SUSPECT " } else { "" },
        p.where_text(&r.stack),
        clean(&r.api),
        signed_human(r.growth_bytes()),
        r.growth_blocks(),
        rate_text(r.bytes_per_hour),
        steps_text(r),
        human_bytes(r.first().bytes),
        human_bytes(r.last().bytes)
    )
}

// ---------------------------------------------------------------------------------------------
// Flame graphs

fn flame_section(p: &mut Page, exit: Option<&Findings>, series: Option<&GrowthFindings>) {
    p.s.push_str("<section id=\"flame\">\n<h2>Flame graphs</h2>\n");
    p.s.push_str(
        "<p>Icicle graphs: the outermost frame on top, the CUDA API at the bottom of each \
         stack; a frame's width is its share of the bytes. Hover a frame for its bytes and blocks; \
         click one to zoom in (the top bar zooms out). Red: leaked; blue: held by a cache or \
         library handle; orange: a growth suspect's; yellow: grew, not a suspect; green \
         frames are Python.</p>\n",
    );
    if let Some(f) = exit {
        p.s.push_str("<h3>Live memory at exit by stack</h3>\n");
        let live = flame::live_at_exit(f, true, p.root.as_deref());
        flame_svg(p, "exit", &live);
    }
    if let Some(g) = series {
        p.s.push_str(
            "<h3>Peak live memory by stack</h3>\n<p class=\"note\">Each callsite that grew, \
             at its own peak in the series (the most it held at once as far as the dumps \
             tell).</p>\n",
        );
        let peak = flame::peak(g, p.root.as_deref());
        flame_svg(p, "peak", &peak);
    }
    p.s.push_str("</section>\n");
}

fn class_name(c: Class) -> &'static str {
    match c {
        Class::Leak => "leak",
        Class::Cached => "cached",
        Class::Suspect => "suspect",
        Class::Grew => "grew",
    }
}

fn fill(node: &Node) -> String {
    let label = node.frame.as_ref().map_or("", |f| f.label.as_str());
    let h = hash(label);
    let jitter = (h % 21) as i32 - 10;
    let (hue, sat, light) = match (node.frame.as_ref().is_some_and(|f| f.python), node.class()) {
        (true, _) => (110, 45, 62),
        (_, Class::Leak) => (8, 72, 62),
        (_, Class::Cached) => (212, 60, 66),
        (_, Class::Suspect) => (28, 85, 58),
        (_, Class::Grew) => (48, 80, 60),
    };
    format!(
        "hsl({},{sat}%,{}%)",
        hue + jitter,
        light + (h >> 8) as i32 % 9 - 4
    )
}

struct Flame<'a> {
    s: &'a mut String,
    total: u64,
    drawn: usize,
    skipped: usize,
    depth: usize,
}

impl Flame<'_> {
    fn node(&mut self, n: &Node, x: f64, d: usize) {
        let w = if self.total == 0 {
            0.0
        } else {
            n.bytes as f64 / self.total as f64
        };
        let px = w * FLAME_WIDTH;
        let label = n
            .frame
            .as_ref()
            .map_or_else(|| "all".to_string(), |f| f.label.clone());
        let pct = w * 100.0;
        let title = format!(
            "{label}\n{} ({}%) in {}",
            human_bytes(n.bytes),
            num(pct),
            plural(n.blocks, "block", "blocks")
        );
        // Drawn text: template arguments elided, cut to the width (the title has it whole).
        let short = short_function(&label).into_owned();
        let chars = ((px - 6.0) / 6.6).floor();
        let text = if chars < 3.0 {
            String::new()
        } else {
            let n = chars as usize;
            if short.chars().count() > n {
                let mut t: String = short.chars().take(n - 1).collect();
                t.push('…');
                t
            } else {
                short.clone()
            }
        };
        let class = if n.frame.is_none() {
            "root".to_string()
        } else {
            class_name(n.class()).to_string()
        };
        let _ = write!(
            self.s,
            "<g class=\"node {class}\" data-x=\"{}\" data-w=\"{}\" data-d=\"{d}\" data-label=\"{}\">\
             <title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>",
            num(x * FLAME_WIDTH),
            num(px),
            esc_text(&short),
            esc_text(&title),
            num(x * FLAME_WIDTH),
            num(d as f64 * FLAME_ROW),
            num((px - 0.5).max(0.0)),
            num(FLAME_ROW - 1.0),
            if n.frame.is_none() {
                "#d0d4dc".to_string()
            } else {
                fill(n)
            }
        );
        if !text.is_empty() {
            let _ = write!(
                self.s,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                num(x * FLAME_WIDTH + 3.0),
                num(d as f64 * FLAME_ROW + 12.0),
                esc_text(&text)
            );
        }
        self.s.push_str("</g>\n");
        self.drawn += 1;
        self.depth = self.depth.max(d + 1);
    }
}

/// Nodes in breadth-first order, widest first within a level, until FLAME_NODES: a large graph
/// loses its narrowest, deepest frames first.
fn flame_svg(p: &mut Page, what: &str, stacks: &[Weighted]) {
    let t = flame::tree(stacks);
    if t.bytes == 0 {
        p.s.push_str("<p>Nothing to draw: no bytes.</p>\n");
        return;
    }
    let mut body = String::new();
    let mut f = Flame {
        s: &mut body,
        total: t.bytes,
        drawn: 0,
        skipped: 0,
        depth: 0,
    };
    let mut level: Vec<(&Node, f64)> = vec![(&t, 0.0)];
    let mut d = 0;
    while !level.is_empty() {
        let mut next: Vec<(&Node, f64)> = Vec::new();
        for (n, x) in level {
            if f.drawn >= FLAME_NODES
                || (n.bytes as f64 / f.total as f64) * FLAME_WIDTH < FLAME_MIN_PX
            {
                f.skipped += 1;
                continue;
            }
            f.node(n, x, d);
            let mut cx = x;
            for c in &n.children {
                next.push((c, cx));
                cx += c.bytes as f64 / f.total as f64;
            }
        }
        level = next;
        d += 1;
    }
    let (drawn, skipped, depth) = (f.drawn, f.skipped, f.depth);
    let height = depth as f64 * FLAME_ROW;
    let id = p.id(&format!("flame-{what}"));
    let _ = writeln!(
        p.s,
        "<svg class=\"flame\" id=\"{id}\" data-what=\"{what}\" data-nodes=\"{drawn}\" \
         viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"flame graph\">",
        num(FLAME_WIDTH),
        num(height),
        num(FLAME_WIDTH),
        num(height)
    );
    p.s.push_str(&body);
    p.s.push_str("</svg>\n");
    if skipped > 0 {
        let _ = writeln!(
            p.s,
            "<p class=\"note\">{}, with the frames below them, not drawn (narrower than {} px, \
             or past {FLAME_NODES} frames); the folded format has every stack: \
             <code>--format folded</code>.</p>",
            plural(skipped as u64, "frame is", "frames are"),
            num(FLAME_MIN_PX)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The exit report

fn report_sections(p: &mut Page, f: &Findings) {
    p.s.push_str("<section id=\"leaks\">\n<h2>Leaks</h2>\n");
    for pf in f.processes.iter().take(MAX_PROCESSES) {
        let _ = writeln!(p.s, "<h3>{}</h3>", esc_text(&process_label(&pf.process)));
        if let Some(why) = &pf.process.recording_stopped {
            let _ = writeln!(
                p.s,
                "<p class=\"warn-text\">warning: the shim stopped recording early ({}); this dump is partial</p>",
                esc(why)
            );
        }
        if pf.summary.dropped_events > 0 {
            let _ = writeln!(
                p.s,
                "<p class=\"warn-text\">warning: {} not stored (the event list was full); the counts include them</p>",
                plural(pf.summary.dropped_events, "event was", "events were")
            );
        }
        let _ = writeln!(
            p.s,
            "<p>Leaked: {} from {}; peak live {} during the run; live at end {}.</p>",
            counts_text(pf.leaked),
            plural(pf.leaked.groups, "callsite", "callsites"),
            human_bytes(pf.summary.peak_live_bytes),
            human_bytes(pf.summary.live_bytes)
        );
        if pf.leaked.groups == 0 {
            p.s.push_str("<p class=\"ok\">No leaks.</p>\n");
        }
        let total = pf.leaked.groups;
        let shown = pf.leaks.len().min(p.groups);
        for (i, g) in pf.leaks.iter().take(shown).enumerate() {
            let head = format!(
                "<span class=\"fail-text\">Leak {} of {total}:</span> {}",
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
        let per_rule = super::suppressed_per_rule(f);
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
        let (label, what) = if kind == EventType::DoubleFree {
            ("Double free", "of memory that was already freed")
        } else {
            ("Invalid free", "of an address that was never allocated")
        };
        for (i, g) in of_kind.iter().take(p.groups).enumerate() {
            let addr = g.address.map_or(String::new(), |a| format!("{a:#x}"));
            let times = if g.count > 1 {
                format!(" ({} times)", g.count)
            } else {
                String::new()
            };
            let _ = writeln!(
                p.s,
                "<details open><summary><span class=\"fail-text\">{label} {} of {}:</span> \
                 <code>{}({addr})</code> {what}{times}</summary>",
                i + 1,
                of_kind.len(),
                esc(&g.api)
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
        let codes: Vec<String> = g.errors.iter().map(|&c| error_text(&g.api, c)).collect();
        let head = format!(
            "<span class=\"warn-text\">Failed allocation {} of {}:</span> <code>{}</code> of {} returned {}{}",
            i + 1,
            pf.failed.len(),
            esc(&g.api),
            human_bytes(g.bytes),
            esc_text(&codes.join(", ")),
            if g.count > 1 {
                format!(" ({} times)", g.count)
            } else {
                String::new()
            }
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
    let total = crate::analyze::sum_groups(groups);
    let _ = writeln!(
        p.s,
        "<h4>Managed memory: {} live from {}</h4>\n<p class=\"note\">{}</p>",
        counts_text(total),
        plural(groups.len() as u64, "callsite", "callsites"),
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
    let _ = writeln!(
        p.s,
        "<h4>Teardown notes (not errors): {} {TEARDOWN_TEXT}</h4>",
        plural(n, "call", "calls")
    );
    for g in pf.teardown.iter().take(p.groups) {
        let codes: Vec<String> = g.errors.iter().map(|&c| error_text(&g.api, c)).collect();
        let head = format!(
            "<code>{}</code> returned {}{}",
            esc(&g.api),
            esc_text(&codes.join(", ")),
            if g.count > 1 {
                format!(" ({} times)", g.count)
            } else {
                String::new()
            }
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
        let _ = writeln!(
            p.s,
            "<li>{} via <code>{}</code> at {}{cache}</li>",
            counts_text(c.live),
            esc(&c.api),
            esc_text(&p.where_text(&c.stack))
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
        "<h4>Held by caches and library handles: {}; {}</h4>",
        counts_text(pf.cached_total),
        esc_text(cached_gate_text(f))
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

// ---------------------------------------------------------------------------------------------
// The series

fn growth_sections(p: &mut Page, g: &GrowthFindings) {
    p.s.push_str("<section id=\"growth\">\n<h2>Growth over the series</h2>\n");
    let _ = writeln!(
        p.s,
        "<p class=\"note\">Suspect rule: {}.</p>",
        esc_text(RULE_TEXT)
    );
    for s in g.series.iter().take(MAX_PROCESSES) {
        let _ = writeln!(p.s, "<h3>{}</h3>", esc_text(&process_label(&s.process)));
        if s.rows.is_empty() {
            p.s.push_str("<p>No callsite grew.</p>\n");
        }
        let suspects = s.rows.iter().filter(|r| r.is_suspect()).count();
        let mut shown = 0;
        for r in &s.rows {
            if shown >= p.groups {
                break;
            }
            shown += 1;
            let mut head = match r.not_suspect {
                None => format!(
                    "<span class=\"fail-text\">Suspect:</span> <b>{}</b> ({:+} blocks) via <code>{}</code>, {}, {}",
                    signed_human(r.growth_bytes()),
                    r.growth_blocks(),
                    esc(&r.api),
                    esc_text(&rate_text(r.bytes_per_hour)),
                    esc_text(&steps_text(r))
                ),
                Some(why) => format!(
                    "Grew, not a suspect ({}): <b>{}</b> via <code>{}</code>, {}",
                    why.as_str(),
                    signed_human(r.growth_bytes()),
                    esc(&r.api),
                    esc_text(&steps_text(r))
                ),
            };
            if let Some(h) = &r.held_by {
                head.push_str(&format!(" — held by {} [{}]", esc(&h.name), esc(&h.id)));
                if let (Some(g), true) = (&h.grows, r.is_suspect()) {
                    head.push_str(&format!(": {}", esc_text(g)));
                }
            }
            p.group(&head, &r.stack, r.is_suspect() && shown <= 3);
        }
        p.not_shown(
            s.rows.len().saturating_sub(shown) + s.suspects_not_shown as usize,
            ("more callsite", "more callsites"),
            "--top; the HTML report lists at most 50",
        );
        if let Some(note) = coarse_pools_text(&s.coarse_pools) {
            let _ = writeln!(p.s, "<p class=\"note\">note: {}.</p>", esc_text(&note));
        }
        let _ = suspects;
    }
    for sk in g.skipped.iter().take(NAMED_SKIPPED) {
        let _ = writeln!(
            p.s,
            "<p class=\"note\">note: {} has only one dump ({}): nothing to compare</p>",
            esc_text(&process_label(&sk.process)),
            esc(&sk.source.display().to_string())
        );
    }
    if let Some(rest) = skipped_rest_text(g.skipped.len()) {
        let _ = writeln!(p.s, "<p class=\"note\">note: {}</p>", esc_text(&rest));
    }
    p.s.push_str("</section>\n");
}

// ---------------------------------------------------------------------------------------------
// diff

fn diff_page(d: &DiffFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
    let mut p = Page::new(view);
    let summary = diff_summary_line(d);
    p.head(&format!(
        "cudaleak diff: {}",
        summary.trim_start_matches("SUMMARY: ")
    ));
    p.s.push_str("<header>\n<h1>cudaleak diff</h1>\n");
    let _ = writeln!(p.s, "<p class=\"summary\">{}</p>", esc_text(&summary));
    p.s.push_str("<table class=\"totals\">\n");
    for (name, side) in [("Old", &d.old), ("New", &d.new)] {
        let _ = writeln!(
            p.s,
            "<tr><th>{name}</th><td><code>{}</code> — {}, {} live</td></tr>",
            esc(&side.source.display().to_string()),
            esc_text(&process_label(&side.process)),
            counts_text(side.live)
        );
    }
    p.s.push_str("</table>\n</header>\n<section id=\"flame\">\n<h2>Growth by stack</h2>\n");
    let grew = flame::diff(d, p.root.as_deref());
    flame_svg(&mut p, "growth", &grew);
    p.s.push_str("</section>\n<section id=\"callsites\">\n<h2>Callsites</h2>\n");
    let total = d.rows.len() as u64 + d.rows_not_shown;
    let shown = d.rows.len().min(p.groups);
    for (i, r) in d.rows.iter().take(shown).enumerate() {
        let label = match r.trend() {
            1 => "<span class=\"fail-text\">Grew</span>",
            -1 => "Shrank",
            _ => "Unchanged",
        };
        let head = format!(
            "{label} {} of {total}: <b>{}</b>, {:+} blocks via <code>{}</code> ({} → {})",
            i + 1,
            signed_human(r.delta_bytes()),
            r.delta_blocks(),
            esc(&r.api),
            human_bytes(r.old.bytes),
            human_bytes(r.new.bytes)
        );
        p.group(&head, &r.stack, i == 0 && r.trend() == 1);
    }
    p.not_shown(
        (total as usize).saturating_sub(shown),
        ("more callsite", "more callsites"),
        "--top; the HTML report lists at most 50",
    );
    p.s.push_str("</section>\n");
    p.tail(&[
        d.old.source.display().to_string(),
        d.new.source.display().to_string(),
    ]);
    out.write_all(p.s.as_bytes())
}

impl Reporter for Html {
    fn report(&self, f: &Findings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        page(Some(f), None, Gatekeeper::Report, view, out)
    }

    fn diff(&self, d: &DiffFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        diff_page(d, view, out)
    }

    fn growth(&self, g: &GrowthFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        page(None, Some(g), Gatekeeper::Growth, view, out)
    }
}

/// `num` for the snapshot tests next door.
#[cfg(test)]
pub(crate) fn tests_num(v: f64) -> String {
    num(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_text_is_escaped_for_html() {
        assert_eq!(
            esc("std::vector<int, A<&x>>::f\"'"),
            "std::vector&lt;int, A&lt;&amp;x&gt;&gt;::f&quot;&#39;"
        );
        assert_eq!(
            esc("a\x1bb"),
            "a\\x1bb",
            "control characters are shown, not kept"
        );
    }

    #[test]
    fn coordinates_are_short_and_never_negative_zero() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.256), "1.26");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(12.5), "12.5");
    }
}
