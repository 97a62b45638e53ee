//! Table → `format::Dump` → a temporary file renamed into place, so a reader never sees half a
//! dump. Runs at exit (and later for snapshots and signals); never calls CUDA.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

use cudaleak_format::{self as format, End, Event, Hex, LiveRecord, Process, Stack, Summary};

use crate::stack::StackId;
use crate::state::{self, State};
use crate::symbolize::Symbolizer;

/// Builds the dump of the table as it is now.
pub fn build(s: &State, end: End) -> format::Dump {
    let snap = s.table.snapshot();
    let exe = fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut symbolizer = Symbolizer::new(exe.clone());
    let mut stacks = Vec::new();
    let mut index: HashMap<StackId, usize> = HashMap::new();
    let mut stack_index = |id: StackId| -> usize {
        *index.entry(id).or_insert_with(|| {
            let ips = s.stacks.get(id).unwrap_or_default();
            stacks.push(Stack {
                frames: symbolizer.frames(&ips),
            });
            stacks.len() - 1
        })
    };
    let live: Vec<LiveRecord> = snap
        .live
        .iter()
        .map(|(_, addr, b)| LiveRecord {
            address: Hex(*addr),
            size: b.size,
            api: b.api.name().to_string(),
            kind: b.api.op().kind(),
            device: (b.device >= 0).then_some(b.device),
            thread: u64::from(b.thread),
            seq: b.seq,
            time_ms: u64::from(b.time_ms),
            stack: stack_index(b.stack),
        })
        .collect();
    let events: Vec<Event> = snap
        .events
        .iter()
        .map(|e| Event {
            kind: e.kind,
            api: e.api.name().to_string(),
            address: e.address.map(Hex),
            size: e.size,
            error: e.error,
            seq: e.seq,
            stack: stack_index(e.stack),
            alloc_stack: e.alloc_stack.map(&mut stack_index),
        })
        .collect();
    let c = &s.table.counters;
    let summary = Summary {
        allocations: c.allocations.load(Relaxed),
        frees: c.frees.load(Relaxed),
        untracked_frees: c.untracked_frees.load(Relaxed),
        failed_allocations: c.failed_allocations.load(Relaxed),
        invalid_frees: c.invalid_frees.load(Relaxed),
        // From the list itself, so the dump is consistent even while other threads allocate.
        live_allocations: live.len() as u64,
        live_bytes: live.iter().map(|r| r.size).sum(),
        peak_live_bytes: c.peak_live_bytes.load(Relaxed),
        bytes_allocated: c.bytes_allocated.load(Relaxed),
        dropped_events: c.dropped_events.load(Relaxed),
    };
    format::Dump {
        cudaleak_dump: format::SCHEMA_VERSION,
        process: process(s, exe, end),
        summary,
        stacks,
        live,
        events,
    }
}

fn process(s: &State, exe: String, end: End) -> Process {
    let argv = fs::read("/proc/self/cmdline")
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let rank = ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse().ok());
    Process {
        pid: std::process::id(),
        ppid: std::os::unix::process::parent_id(),
        exe,
        argv,
        rank,
        start_unix_ms: s.start_unix_ms,
        end_unix_ms: state::unix_ms(),
        end,
        signal: None,
        snapshot: None,
        recording_stopped: s.stopped.get().cloned(),
    }
}

/// Writes `dump` to `path` through a temporary file in the same directory, mode 0600.
pub fn write_atomically(dump: &format::Dump, path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cudaleak.json".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    // A stale temporary (a reused pid) or a planted link is removed, never followed.
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        format::write(dump, &mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `74.1 KiB`: one decimal in the largest binary unit that keeps the number ≥ 1.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Writes the exit dump and prints the one-line summary. Errors cost one stderr line.
pub fn at_exit(s: &State) {
    let dump = build(s, End::Exit);
    let path = s.config.dump_path(std::process::id(), |p| p.is_dir());
    let line = match write_atomically(&dump, &path) {
        Ok(()) => {
            if s.config.quiet {
                return;
            }
            let n = dump.summary.live_allocations;
            format!(
                "cudaleak: {n} allocation{} ({}) still live at exit -> {}\n",
                if n == 1 { "" } else { "s" },
                human_bytes(dump.summary.live_bytes),
                path.display()
            )
        }
        Err(e) => format!("cudaleak: could not write {}: {e}\n", path.display()),
    };
    let _ = io::stderr().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_the_unit() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(75_878), "74.1 KiB");
        assert_eq!(human_bytes(1 << 20), "1.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn atomic_write_leaves_only_the_final_file_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cudaleak-dump-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("cudaleak.1.json");
        let dump = format::from_slice(include_bytes!("../../format/tests/v1-sample.json")).unwrap();
        write_atomically(&dump, &path).unwrap();
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("cudaleak.1.json")]);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(format::read_file(&path).unwrap(), dump);
        fs::remove_dir_all(&dir).unwrap();
    }
}
