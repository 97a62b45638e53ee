//! The document of `cudaleak diff` (`"cudaleak_diff": 1`): the two dumps and each callsite's
//! change between them.

use serde::Serialize;

use super::{frames, Frames, Tool, REPORT_VERSION, TOOL};
use crate::analyze::{DiffFindings, DiffSide};

#[derive(Serialize)]
struct DiffSideDoc<'a> {
    source: String,
    pid: u32,
    exe: &'a str,
    end: &'static str,
    snapshot: Option<u64>,
    live_bytes: u64,
    live_allocations: u64,
}

fn side(s: &DiffSide) -> DiffSideDoc<'_> {
    DiffSideDoc {
        source: s.source.display().to_string(),
        pid: s.process.pid,
        exe: &s.process.exe,
        end: s.process.end.as_str(),
        snapshot: s.process.snapshot,
        live_bytes: s.live.bytes,
        live_allocations: s.live.allocations,
    }
}

#[derive(Serialize)]
struct DiffRowDoc<'a> {
    trend: &'static str,
    api: &'a str,
    old_bytes: u64,
    old_allocations: u64,
    new_bytes: u64,
    new_allocations: u64,
    delta_bytes: i128,
    delta_allocations: i128,
    frames: Frames<'a>,
}

#[derive(Serialize)]
pub(super) struct DiffDoc<'a> {
    cudaleak_diff: u32,
    tool: Tool,
    old: DiffSideDoc<'a>,
    new: DiffSideDoc<'a>,
    callsites: Vec<DiffRowDoc<'a>>,
    callsites_not_shown: u64,
    grew: u64,
    shrank: u64,
    unchanged: u64,
    delta_bytes: i128,
}

/// The document of `cudaleak diff --format json`.
pub(super) fn document(d: &DiffFindings) -> DiffDoc<'_> {
    DiffDoc {
        cudaleak_diff: REPORT_VERSION,
        tool: TOOL,
        old: side(&d.old),
        new: side(&d.new),
        callsites: d
            .rows
            .iter()
            .map(|r| DiffRowDoc {
                trend: match r.trend() {
                    1 => "grew",
                    -1 => "shrank",
                    _ => "unchanged",
                },
                api: &r.api,
                old_bytes: r.old.bytes,
                old_allocations: r.old.allocations,
                new_bytes: r.new.bytes,
                new_allocations: r.new.allocations,
                delta_bytes: r.delta_bytes(),
                delta_allocations: r.delta_blocks(),
                frames: frames(&r.stack),
            })
            .collect(),
        callsites_not_shown: d.rows_not_shown,
        grew: d.grew,
        shrank: d.shrank,
        unchanged: d.unchanged,
        delta_bytes: i128::from(d.new.live.bytes) - i128::from(d.old.live.bytes),
    }
}
