//! `--gen-suppressions`: instead of a report, a suppression file with one ready `leak:` line per
//! leak group shown (what Valgrind's `--gen-suppressions=all` gives its users), each under a
//! comment naming the group, its source files shown as the report shows them (relative to the
//! source root).
//!
//! The lines use the syntax `suppressions.rs` reads: the group's first user frame's function
//! (else its file, else its module's file name), anchored at both ends so it matches that name
//! only. It must never write a line that `suppressions::parse` would refuse.

use std::io::{self, Write};

use super::wording::{group_text, Holds, Plain};
use super::{clean, frame_text_under, plural};
use crate::analyze::{basename, Findings, LeakGroup};

/// The `leak:` pattern that names a group: its first user frame's function, file or module,
/// anchored (`^name$`). `None` when the frame has no name a pattern can hold (a name with a
/// line break, or one cut for length).
pub fn pattern(g: &LeakGroup) -> Option<String> {
    let f = g
        .stack
        .frames
        .iter()
        .find(|f| !f.internal)
        .or_else(|| g.stack.frames.first())?;
    let name = f
        .function
        .as_deref()
        .or(f.file.as_deref())
        .or(f.module.as_deref().map(basename))?;
    let usable = !name.is_empty()
        && !name.contains(['\n', '\r'])
        && !name.contains("…[")
        && name.trim() == name;
    usable.then(|| format!("^{name}$"))
}

/// Writes the suppression file: a header, then per distinct pattern the comments of the groups
/// it covers and its `leak:` line. Groups without a usable name are listed as comments only.
/// `root`: the report's source root (a directory ending in `/`); files under it are shown
/// relative to it, as the report shows them.
pub fn write(f: &Findings, root: Option<&str>, out: &mut dyn Write) -> io::Result<()> {
    let mut entries: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut groups = 0u64;
    for p in &f.processes {
        for g in &p.leaks {
            groups += 1;
            let comment = format!(
                "# {} (pid {}){}",
                group_text(g, Holds::Allocations, &Plain),
                p.process.pid,
                g.stack.frames.first().map_or(String::new(), |fr| format!(
                    " at {}",
                    clean(&frame_text_under(fr, root))
                ))
            );
            let pat = pattern(g);
            match entries.iter_mut().find(|e| pat.is_some() && e.0 == pat) {
                Some(e) => e.1.push(comment),
                None => entries.push((pat, vec![comment])),
            }
        }
    }
    writeln!(
        out,
        "# cudaleak suppressions: {} (use with --suppressions FILE)",
        plural(groups, "leak group", "leak groups")
    )?;
    for (pat, comments) in entries {
        writeln!(out)?;
        for c in comments {
            writeln!(out, "{c}")?;
        }
        match pat {
            Some(p) => writeln!(out, "leak:{p}")?,
            None => writeln!(
                out,
                "# (no name to match: suppress it by a frame of your own)"
            )?,
        }
    }
    Ok(())
}
