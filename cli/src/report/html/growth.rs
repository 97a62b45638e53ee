//! The series' section: per process, the callsites that grew (suspects first, opened), the
//! suspect rule, and the processes with only one dump.

use std::fmt::Write as _;

use super::page::{esc, esc_text, Page};
use super::MAX_PROCESSES;
use crate::growth::GrowthFindings;
use crate::report::wording::{
    coarse_pools_text, held_by_text, left_out_text, one_dump_text, record_group_text,
    record_groups_rest_text, skipped_rest_text, steps_text, suspect_rule_text, unjudged_text,
    NAMED_SKIPPED, NO_FRAMES, NO_GROWTH, RECORD_GROUPS_SHOWN,
};
use crate::report::{
    frame_text_short, growth_api, own_frame, process_label, rate_text, signed_human,
};

pub(super) fn section(p: &mut Page, g: &GrowthFindings) {
    p.s.push_str("<section id=\"growth\">\n<h2>Growth over the series</h2>\n");
    let _ = writeln!(
        p.s,
        "<p class=\"note\">{}</p>",
        esc_text(&suspect_rule_text())
    );
    for s in g.series.iter().take(MAX_PROCESSES) {
        let _ = writeln!(p.s, "<h3>{}</h3>", esc_text(&process_label(&s.process)));
        if let Some(l) = &s.left_out {
            let names: Vec<String> = l
                .points
                .iter()
                .map(|p| format!("<code>{}</code>", esc(&p.source.display().to_string())))
                .collect();
            let _ = writeln!(
                p.s,
                "<p class=\"note\">note: {}.</p>",
                left_out_text(l, &names)
            );
        }
        if !s.judged() {
            let _ = writeln!(p.s, "<p><b>{}.</b></p>", esc_text(&unjudged_text(s)));
            continue;
        }
        if s.rows.is_empty() {
            let _ = writeln!(p.s, "<p>{NO_GROWTH}</p>");
        }
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
                    esc(&growth_api(r)),
                    esc_text(&rate_text(r.bytes_per_hour)),
                    esc_text(&steps_text(r))
                ),
                Some(why) => format!(
                    "Grew, not a suspect ({}): <b>{}</b> via <code>{}</code>, {}",
                    why.as_str(),
                    signed_human(r.growth_bytes()),
                    esc(&growth_api(r)),
                    esc_text(&steps_text(r))
                ),
            };
            if let Some(h) = &r.held_by {
                // What growth of the cache means, for suspects only.
                let note = h.grows.as_deref().filter(|_| r.is_suspect()).map(esc_text);
                let held = held_by_text(&esc(&h.name), &esc(&h.id), note.as_deref());
                head.push_str(&format!(" — {held}"));
            }
            p.group(&head, &r.stack, r.is_suspect() && shown <= 3);
            if let Some(f) = r.framework.as_ref().filter(|_| r.is_suspect()) {
                for g in f.groups.iter().skip(1).take(RECORD_GROUPS_SHOWN) {
                    let at = own_frame(&g.stack)
                        .or(g.stack.where_frame())
                        .map_or(NO_FRAMES.into(), |f| frame_text_short(f, p.root.as_deref()));
                    let at = format!("<code>{}</code>", esc_text(&at));
                    let _ = writeln!(
                        p.s,
                        "<p class=\"note\">{}</p>",
                        record_group_text(g.bytes, g.blocks, &at)
                    );
                }
                let rest = f.groups.len().saturating_sub(1 + RECORD_GROUPS_SHOWN);
                if rest > 0 {
                    let _ = writeln!(
                        p.s,
                        "<p class=\"note\">{}</p>",
                        record_groups_rest_text(rest as u64)
                    );
                }
            }
        }
        p.not_shown(
            s.rows.len().saturating_sub(shown) + s.suspects_not_shown as usize,
            ("more callsite", "more callsites"),
            "--top; the HTML report lists at most 50",
        );
        if let Some(note) = coarse_pools_text(&s.coarse_pools) {
            let _ = writeln!(p.s, "<p class=\"note\">note: {}.</p>", esc_text(&note));
        }
    }
    for sk in g.skipped.iter().take(NAMED_SKIPPED) {
        let source = esc(&sk.source.display().to_string());
        let _ = writeln!(
            p.s,
            "<p class=\"note\">note: {}</p>",
            one_dump_text(&esc_text(&process_label(&sk.process)), Some(&source))
        );
    }
    if let Some(rest) = skipped_rest_text(g.skipped.len()) {
        let _ = writeln!(p.s, "<p class=\"note\">note: {}</p>", esc_text(&rest));
    }
    p.s.push_str("</section>\n");
}
