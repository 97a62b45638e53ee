//! The collapsed-stack ("folded") format that inferno, flamegraph.pl and speedscope read:
//! `frame;frame;frame BYTES`, root first, one line per unique stack, lines sorted.
//!
//! `report`: bytes leaked (live at exit, held by no cache) per stack; `report --growth`: bytes
//! gained over each series (first dump → the callsite's peak); `diff`: bytes gained from OLD to
//! NEW. The stack's last frame is the CUDA API. Frames are labelled as in text reports; a `;`
//! in a label becomes `；` (U+FF1B, fullwidth semicolon) so it cannot split a frame, and a
//! control character is written visibly (`\x0a`), so a line is always one stack. Stacks of no
//! bytes (an address-space reservation holds none) are left out. Never prints anything else.

use std::io::{self, Write};

use super::flame::{self, Weighted};
use super::Reporter;
use crate::analyze::View;
use crate::analyze::{DiffFindings, Findings};
use crate::growth::GrowthFindings;

pub struct Folded;

/// A frame label made safe for the format: `;` separates frames, a newline ends the line.
pub fn frame_label(label: &str) -> String {
    label.replace(';', "\u{ff1b}")
}

/// One line per unique stack (identical stacks summed), sorted, as `flamegraph.pl` expects.
/// The stacks are taken one at a time: only the lines are held, as a list sorted once (a map
/// of them took twice the room).
fn write(stacks: impl Iterator<Item = Weighted>, out: &mut dyn Write) -> io::Result<()> {
    let mut lines: Vec<(Box<str>, u64)> = stacks
        .filter(|w| w.bytes > 0)
        .map(|w| {
            let key: Vec<String> = w.frames.iter().map(|f| frame_label(&f.label)).collect();
            (key.join(";").into_boxed_str(), w.bytes)
        })
        .collect();
    // Identical stacks are summed, so their order among themselves does not matter.
    lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut lines = lines.into_iter().peekable();
    while let Some((stack, mut bytes)) = lines.next() {
        while let Some((_, more)) = lines.next_if(|next| next.0 == stack) {
            bytes = bytes.saturating_add(more);
        }
        writeln!(out, "{stack} {bytes}")?;
    }
    Ok(())
}

impl Reporter for Folded {
    fn report(&self, f: &Findings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        write(
            flame::live_at_exit(f, false, view.source_root.as_deref()),
            out,
        )
    }

    fn diff(&self, d: &DiffFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        write(flame::diff(d, view.source_root.as_deref()), out)
    }

    fn growth(&self, g: &GrowthFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        write(flame::growth(g, view.source_root.as_deref()), out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semicolon_in_a_name_cannot_split_a_frame() {
        assert_eq!(frame_label("f(a;b)"), "f(a\u{ff1b}b)");
        assert_eq!(frame_label("plain"), "plain");
    }
}
