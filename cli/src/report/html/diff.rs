//! The page of `cudaleak diff`: the two dumps, a flame graph of what grew, and the callsites.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::flame_graph::flame_svg;
use super::page::{esc, esc_text, Page};
use crate::analyze::{DiffFindings, View};
use crate::report::flame;
use crate::report::wording::{diff_side_text, diff_summary_line, trend_label};
use crate::report::{human_bytes, process_label, signed_human};

pub(super) fn page(d: &DiffFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
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
        let source = format!("<code>{}</code>", esc(&side.source.display().to_string()));
        let _ = writeln!(
            p.s,
            "<tr><th>{name}</th><td>{}</td></tr>",
            diff_side_text(&source, &esc_text(&process_label(&side.process)), side.live)
        );
    }
    p.s.push_str("</table>\n</header>\n<section id=\"flame\">\n<h2>Growth by stack</h2>\n");
    let root = p.root.clone();
    flame_svg(&mut p, "growth", || flame::diff(d, root.as_deref()));
    p.s.push_str("</section>\n<section id=\"callsites\">\n<h2>Callsites</h2>\n");
    let total = d.rows.len() as u64 + d.rows_not_shown;
    let shown = d.rows.len().min(p.groups);
    for (i, r) in d.rows.iter().take(shown).enumerate() {
        let label = match r.trend() {
            1 => format!("<span class=\"fail-text\">{}</span>", trend_label(1)),
            t => trend_label(t).to_string(),
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
