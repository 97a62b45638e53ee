//! The timeline of a series: live bytes at each dump as an SVG area chart, stacked by the
//! callsites that grew most (growth suspects outlined), with a legend table the page's script
//! links to the bands. Long series are sampled; the other callsites are one grey band.

use std::fmt::Write as _;

use super::page::{esc, esc_text, num, Page};
use super::{Gatekeeper, MAX_PROCESSES, TIMELINE_CALLSITES, TIMELINE_POINTS};
use crate::growth::{GrowthFindings, GrowthRow, Series};
use crate::report::wording::{series_line, steps_text};
use crate::report::{
    clean, human_bytes, human_duration, plural, point_label, process_label, rate_text, signed_human,
};

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

pub(super) fn section(p: &mut Page, g: &GrowthFindings, gate: Gatekeeper) {
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
    // A series that could not be judged has nothing to draw; the growth section says why.
    for s in g.series.iter().filter(|s| s.judged()).take(MAX_PROCESSES) {
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
    let labels = format!(
        "{} → {}",
        esc_text(&s.points.first().map(point_label).unwrap_or_default()),
        esc_text(&s.points.last().map(point_label).unwrap_or_default())
    );
    let _ = writeln!(
        p.s,
        "<p>{}.</p>",
        series_line(s, &labels, &human_bytes(first), &human_bytes(last))
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
    // Bands are driver memory: a framework's own count lies inside its pool's band already.
    let driver: Vec<&GrowthRow> = s.rows.iter().filter(|r| r.framework.is_none()).collect();
    let rows: Vec<&GrowthRow> = driver.iter().copied().take(TIMELINE_CALLSITES).collect();
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
        if driver.len() > rows.len() {
            format!(
                " (including {} that grew, listed below)",
                plural(
                    (driver.len() - rows.len()) as u64,
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
