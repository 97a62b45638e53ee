//! The JSON report: a stable, versioned document for programs (`"cudaleak_report": 1`).
//! Every field is documented in docs/report-format.md; a change of meaning bumps the version.
//!
//! Field order is fixed by these structs; nothing here may drop or rename a field silently.
//!
//! Its rooms: `exit.rs` (the exit report's document), `growth.rs` (`--growth`'s) and `diff.rs`
//! (`diff`'s), each its serde types and the function that fills them from the findings; here,
//! what they share (the tool, the version, frames written as they are serialised).

mod diff;
mod exit;
mod growth;

use std::io::{self, Write};

use serde::Serialize;

use super::{Reporter, VERSION};
use crate::analyze::View;
use crate::analyze::{DiffFindings, Findings, FrameView, StackView};
use crate::growth::GrowthFindings;

pub struct Json;

/// The version of this document's shape.
pub const REPORT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

const TOOL: Tool = Tool {
    name: "cudaleak",
    version: VERSION,
};

#[derive(Serialize)]
#[serde(untagged)]
enum Frame<'a> {
    Frame {
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<&'static str>,
        function: Option<&'a str>,
        file: Option<&'a str>,
        line: Option<u32>,
        module: Option<&'a str>,
        offset: Option<String>,
    },
    /// A run of frames folded next to the program's Python frames (without `--native`).
    Folded {
        folded_frames: usize,
        modules: &'a [String],
    },
}

/// A stack's frames, written straight from the findings as the document is written (never a
/// copy of every frame of every group); runs of folded frames sit where they were folded.
struct Frames<'a>(&'a StackView);

impl Serialize for Frames<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        s.collect_seq(
            v.frames
                .iter()
                .enumerate()
                .flat_map(|(i, f)| folded_at(v, i).chain(std::iter::once(frame(f))))
                .chain(folded_at(v, v.frames.len())),
        )
    }
}

fn frames(s: &StackView) -> Frames<'_> {
    Frames(s)
}

fn folded_at(s: &StackView, at: usize) -> impl Iterator<Item = Frame<'_>> {
    s.folded
        .iter()
        .filter(move |r| r.at == at)
        .map(|r| Frame::Folded {
            folded_frames: r.frames,
            modules: &r.modules,
        })
}

fn frame(f: &FrameView) -> Frame<'_> {
    Frame::Frame {
        kind: f.python.then_some("python"),
        function: f.function.as_deref(),
        file: f.file.as_deref(),
        line: f.line,
        module: f.module.as_deref(),
        offset: f.offset().map(|o| format!("{o:#x}")),
    }
}

fn write_doc<T: Serialize>(doc: &T, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, doc).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

impl Reporter for Json {
    fn report(&self, f: &Findings, _view: &View, out: &mut dyn Write) -> io::Result<()> {
        write_doc(&exit::document(f), out)
    }

    fn growth(&self, g: &GrowthFindings, _view: &View, out: &mut dyn Write) -> io::Result<()> {
        write_doc(&growth::document(g), out)
    }

    fn diff(&self, d: &DiffFindings, _view: &View, out: &mut dyn Write) -> io::Result<()> {
        write_doc(&diff::document(d), out)
    }
}
