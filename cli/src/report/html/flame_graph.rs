//! Flame graphs (icicles) as SVG: live bytes at exit, or each grown callsite at its peak, by
//! stack; a node per frame, widest first, capped at FLAME_NODES. The page's script zooms them.

use std::fmt::Write as _;

use super::page::{esc_text, num, Page};
use super::FLAME_NODES;
use crate::analyze::Findings;
use crate::growth::GrowthFindings;
use crate::report::flame::{self, Class, Tree, Weighted};
use crate::report::{human_bytes, plural, short_function};

const FLAME_WIDTH: f64 = 1200.0;
const FLAME_ROW: f64 = 17.0;
/// A node narrower than this many pixels (of FLAME_WIDTH) is not drawn.
const FLAME_MIN_PX: f64 = 0.6;

pub(super) fn section(p: &mut Page, exit: Option<&Findings>, series: Option<&GrowthFindings>) {
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
        let root = p.root.clone();
        flame_svg(p, "exit", || flame::live_at_exit(f, true, root.as_deref()));
    }
    if let Some(g) = series {
        p.s.push_str(
            "<h3>Peak live memory by stack</h3>\n<p class=\"note\">Each callsite that grew, \
             at its own peak in the series (the most it held at once as far as the dumps \
             tell).</p>\n",
        );
        let root = p.root.clone();
        flame_svg(p, "peak", || flame::peak(g, root.as_deref()));
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

fn fill(t: &Tree, i: u32) -> String {
    let frame = t.frame(i);
    let label = frame.map_or("", |f| f.0);
    let h = hash(label);
    let jitter = (h % 21) as i32 - 10;
    let (hue, sat, light) = match (frame.is_some_and(|f| f.1), t.class(i)) {
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
    fn node(&mut self, t: &Tree, i: u32, x: f64, d: usize) {
        let w = if self.total == 0 {
            0.0
        } else {
            t.bytes(i) as f64 / self.total as f64
        };
        let px = w * FLAME_WIDTH;
        let label = t.frame(i).map_or("all", |f| f.0);
        let pct = w * 100.0;
        let title = format!(
            "{label}\n{} ({}%) in {}",
            human_bytes(t.bytes(i)),
            num(pct),
            plural(t.blocks(i), "block", "blocks")
        );
        // Drawn text: template arguments elided, cut to the width (the title has it whole).
        let short = short_function(label).into_owned();
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
        let class = if i == Tree::ROOT {
            "root".to_string()
        } else {
            class_name(t.class(i)).to_string()
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
            if i == Tree::ROOT {
                "#d0d4dc".to_string()
            } else {
                fill(t, i)
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
/// loses its narrowest, deepest frames first. `stacks()` is called twice (see [`flame::tree`]).
pub(super) fn flame_svg<I: Iterator<Item = Weighted>>(
    p: &mut Page,
    what: &str,
    stacks: impl Fn() -> I,
) {
    let too_narrow =
        |bytes: u64, total: u64| (bytes as f64 / total as f64) * FLAME_WIDTH < FLAME_MIN_PX;
    let t = flame::tree(stacks, too_narrow);
    let total = t.bytes(Tree::ROOT);
    if total == 0 {
        p.s.push_str("<p>Nothing to draw: no bytes.</p>\n");
        return;
    }
    let mut body = String::new();
    let mut f = Flame {
        s: &mut body,
        total,
        drawn: 0,
        skipped: 0,
        depth: 0,
    };
    let mut level: Vec<(u32, f64)> = vec![(Tree::ROOT, 0.0)];
    let mut d = 0;
    while !level.is_empty() {
        let mut next: Vec<(u32, f64)> = Vec::new();
        for (n, x) in level {
            if f.drawn >= FLAME_NODES || too_narrow(t.bytes(n), f.total) {
                f.skipped += 1;
                continue;
            }
            f.node(&t, n, x, d);
            let mut cx = x;
            for c in t.children(n) {
                next.push((c, cx));
                cx += t.bytes(c) as f64 / f.total as f64;
            }
            // The children too narrow to draw, after all the others: never drawn.
            f.skipped += t.narrow_children(n);
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

/// A stable small hash of a label, for colours.
fn hash(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}
