//! Table → `format::Dump` → a temporary file renamed into place, so a reader never sees half a
//! dump. Runs at exit, for snapshots and at fatal signals; never calls CUDA, never symbolises
//! and never takes the loader lock (frames are written as addresses in modules: `modules.rs`).
//! Everything it writes comes from the state it is handed (what `cudaleak attach` did too:
//! `State::attached`); it never calls up into the lifecycle or `attach` that call it.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use cudaleak_format::{
    self as format, DumpParts, End, Event, Finalizing, Held, Hex, LiveRecord, Module, Process,
    ShimInfo, Stack, StackCounts, Summary,
};

use crate::modules::Modules;
use crate::python::PyFrame;
use crate::stack::{self, StackId};
use crate::state::State;
use crate::stdio;
use crate::table::Live;

/// Bumped as a dump is written, so a signal handler waiting for it can tell slow from stuck.
static PROGRESS: AtomicU64 = AtomicU64::new(0);

/// How far dumps have got ([`PROGRESS`]): the signal path's evidence that the worker is not
/// stuck. Async-signal-safe.
pub fn progress() -> u64 {
    PROGRESS.load(Relaxed)
}

/// When a dump is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    Exit,
    /// A terminating signal, by number.
    Signal(i32),
    Snapshot,
    /// `cudaleak attach` lets go of a process that runs on.
    Detach,
    /// Asked for by the program (`cudaleak_dump`, a test harness between two tests): written
    /// as a snapshot without a number, and it does not start the next interval of the series.
    Requested,
}

/// A dump ready to write: everything but the live records, which are written one at a time
/// from the table's snapshot (a process may end with millions of them).
pub struct Prepared {
    version: u32,
    process: Process,
    summary: Summary,
    unnamed: bool,
    modules: Vec<Module>,
    stacks: Vec<Stack>,
    events: Vec<Event>,
    floors: Vec<StackCounts>,
    finalizing: Option<Finalizing>,
    handles: Vec<format::Handle>,
    frameworks: Option<format::Frameworks>,
    shim: ShimInfo,
    live: Vec<Live>,
    /// For each of `live`: its index into `stacks`.
    stack_of: Vec<u32>,
}

/// Takes the table as it is now, with the module of every address the dump refers to. Names
/// nothing: native frames carry their address, module and offset, and the reader names them
/// (symbolising takes the loader lock and malloc, and costs tens of milliseconds per process).
pub fn prepare(s: &State, moment: Moment, snapshot: Option<u64>) -> Prepared {
    // The moment the table is copied is the dump's: naming modules and stacks takes a while
    // under load, and a snapshot stamped after it would land next to the following one.
    let taken_ms = crate::clock::unix_ms();
    let snap = s.table.snapshot(moment == Moment::Snapshot);
    let exe = fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut modules = Modules::read();
    let mut native_frames: HashMap<usize, format::Frame> = HashMap::new();
    let mut stacks = Vec::new();
    let mut index: HashMap<StackId, usize> = HashMap::new();
    // Ids that differ only in what the dump does not show (two instructions of one Python line)
    // give the same frames: one stack.
    let mut by_frames: HashMap<Stack, usize> = HashMap::new();
    let mut stack_index = |id: StackId| -> usize {
        *index.entry(id).or_insert_with(|| {
            PROGRESS.fetch_add(1, Relaxed);
            let stack = stack_of(s, &mut modules, &mut native_frames, id);
            *by_frames.entry(stack).or_insert_with_key(|stack| {
                stacks.push(stack.clone());
                stacks.len() - 1
            })
        })
    };
    let stack_of: Vec<u32> = snap
        .live
        .iter()
        .map(|l| stack_index(l.block.stack) as u32)
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
            during_exit: e.during_exit,
        })
        .collect();
    // What each stack of the dump holds now, to state its floor as a count, not a dip.
    let mut holds: HashMap<usize, (u64, u64)> = HashMap::new();
    for (l, &i) in snap.live.iter().zip(&stack_of) {
        let h = holds.entry(i as usize).or_default();
        h.0 += 1;
        h.1 += l.held;
    }
    let mut dips: HashMap<usize, (u64, u64)> = HashMap::new();
    for (&id, d) in &snap.dips {
        let h = dips.entry(stack_index(id)).or_default();
        h.0 += d.blocks;
        h.1 += d.bytes;
    }
    let floors = counts_by_stack(dips.iter().map(|(&i, &(blocks, bytes))| {
        let (b0, y0) = holds.get(&i).copied().unwrap_or_default();
        (i, b0.saturating_sub(blocks), y0.saturating_sub(bytes))
    }));
    let finalizing = snap.finalizing.as_ref().map(|f| {
        let mut held: HashMap<usize, ([u64; 4], &'static str)> = HashMap::new();
        for (&id, &(now, floor, api)) in &f.held {
            let (h, _) = held.entry(stack_index(id)).or_insert(([0; 4], api.name()));
            h[0] += now.blocks;
            h[1] += now.bytes;
            h[2] += floor.blocks;
            h[3] += floor.bytes;
        }
        let mut by_stack: Vec<Held> = held
            .iter()
            .map(|(&stack, &(h, api))| Held {
                stack,
                api: api.to_string(),
                allocations: h[0],
                bytes: h[1],
            })
            .collect();
        by_stack.sort_unstable_by_key(|h| h.stack);
        Finalizing {
            unix_ms: f.unix_ms,
            seq: f.seq,
            held: by_stack,
            floors: counts_by_stack(
                held.iter()
                    .filter(|(_, (h, _))| (h[2], h[3]) != (h[0], h[1]))
                    .map(|(&i, (h, _))| (i, h[2], h[3])),
            ),
        }
    });
    let handles = handles(s, &snap.live, &mut stack_index);
    let frameworks = crate::frameworks::read(moment == Moment::Snapshot);
    let c = snap.totals;
    let summary = Summary {
        allocations: c.allocations,
        frees: c.frees,
        untracked_frees: c.untracked_frees,
        failed_allocations: c.failed_allocations,
        invalid_frees: c.invalid_frees,
        // From the list itself, so the dump is consistent even while other threads allocate.
        live_allocations: snap.live.len() as u64,
        live_bytes: snap.live.iter().map(|l| l.held).sum(),
        peak_live_bytes: c.peak_live_bytes,
        bytes_allocated: c.bytes_allocated,
        dropped_events: c.dropped_events,
    };
    let modules = modules.table();
    let unnamed = stacks
        .iter()
        .any(|s| !s.python.is_empty() || s.frames.iter().any(|f| !f.is_python()));
    Prepared {
        version: format::version_for(
            &stacks,
            &modules,
            unnamed,
            true,
            !handles.is_empty(),
            frameworks.is_some(),
        ),
        process: process(s, exe, moment, snapshot, taken_ms),
        summary,
        unnamed,
        modules,
        stacks,
        events,
        floors,
        finalizing,
        handles,
        frameworks,
        shim: ShimInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            stack_walks: stack::WALKS.load(Relaxed),
            stack_reuses: stack::REUSES.load(Relaxed),
            attach: s.attached.info(),
        },
        live: snap.live,
        stack_of,
    }
}

impl Prepared {
    /// Writes the dump as JSON, each live record made as it is written.
    pub fn write(&self, w: impl io::Write) -> io::Result<()> {
        let parts = DumpParts {
            cudaleak_dump: self.version,
            process: &self.process,
            summary: &self.summary,
            unnamed: self.unnamed,
            modules: &self.modules,
            stacks: &self.stacks,
            events: &self.events,
            floors: Some(&self.floors),
            finalizing: self.finalizing.as_ref(),
            handles: &self.handles,
            frameworks: self.frameworks.as_ref(),
            shim: Some(&self.shim),
        };
        let live = self.live.iter().zip(&self.stack_of).map(
            |(
                &Live {
                    addr,
                    block: b,
                    held,
                    ..
                },
                &stack,
            )| {
                PROGRESS.fetch_add(1, Relaxed);
                LiveRecord {
                    address: Hex(addr),
                    size: b.size,
                    bytes_held: (held != b.size).then_some(held),
                    api: b.api.name(),
                    kind: b.api.op().kind(),
                    device: (b.device >= 0).then_some(i32::from(b.device)),
                    thread: u64::from(b.thread),
                    seq: b.seq,
                    time_ms: u64::from(b.time_ms),
                    stack: stack as usize,
                }
            },
        );
        format::write_streamed(&parts, live, w)
    }
}

/// The library handles as the dump lists them: each with the blocks it owns that are live in
/// `live`; a destroyed handle only while some are.
fn handles(
    s: &State,
    live: &[Live],
    stack_index: &mut impl FnMut(StackId) -> usize,
) -> Vec<format::Handle> {
    let all = s.handles.snapshot();
    if all.is_empty() {
        return Vec::new();
    }
    let seqs: std::collections::HashSet<u64> = live.iter().map(|l| l.block.seq).collect();
    all.into_iter()
        .filter_map(|h| {
            let blocks: Vec<u64> = h
                .blocks
                .iter()
                .map(|&(_, _, seq)| seq)
                .filter(|seq| seqs.contains(seq))
                .collect();
            if h.destroyed && blocks.is_empty() {
                return None;
            }
            Some(format::Handle {
                library: h.library.name().to_string(),
                create: h.create.to_string(),
                handle: Hex(h.value?),
                thread: u64::from(h.thread),
                device: (h.device >= 0).then_some(i32::from(h.device)),
                seq: h.seq,
                time_ms: u64::from(h.time_ms),
                stack: stack_index(h.stack),
                blocks,
                destroyed: h.destroyed,
            })
        })
        .collect()
}

/// (stack index, blocks, bytes) as the dump lists them: by stack index.
fn counts_by_stack(it: impl Iterator<Item = (usize, u64, u64)>) -> Vec<StackCounts> {
    let mut v: Vec<StackCounts> = it
        .map(|(stack, allocations, bytes)| StackCounts {
            stack,
            allocations,
            bytes,
        })
        .collect();
    v.sort_unstable_by_key(|c| c.stack);
    v
}

/// The stack of an interned id: native frames as addresses in their modules, and the Python
/// frames, if any, as the runs of the evaluation loop that the reader places among them.
fn stack_of(
    s: &State,
    modules: &mut Modules,
    known: &mut HashMap<usize, format::Frame>,
    id: StackId,
) -> Stack {
    let (native, python) = if id.has_python() {
        match stack::split_python(&s.mixed, id) {
            Some((native, python)) => (native, python),
            None => return Stack::default(),
        }
    } else {
        (id, Box::default())
    };
    let frames = s
        .stacks
        .get(native)
        .unwrap_or_default()
        .iter()
        .map(|&ip| {
            known
                .entry(ip)
                .or_insert_with(|| native_frame(modules, ip))
                .clone()
        })
        .collect();
    let python: Vec<PyFrame> = python.iter().map(|&w| PyFrame::unpack(w)).collect();
    let python = python
        .split_inclusive(|f| f.ends_eval)
        .filter(|run| !run.is_empty())
        .map(|run| run.iter().map(|&f| s.python.frame(f)).collect())
        .collect();
    Stack { frames, python }
}

fn native_frame(modules: &mut Modules, ip: usize) -> format::Frame {
    let (module, offset) = match modules.locate(ip) {
        Some((index, offset)) => (Some(modules.path(index).to_string()), Some(Hex(offset))),
        None => (None, None),
    };
    format::Frame {
        kind: None,
        ip: Hex(ip as u64),
        module,
        offset,
        function: None,
        file: None,
        line: None,
    }
}

fn process(
    s: &State,
    exe: String,
    moment: Moment,
    snapshot: Option<u64>,
    end_unix_ms: u64,
) -> Process {
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
        start_unix_ms: s.start_unix_ms.load(Relaxed),
        end_unix_ms,
        end: match moment {
            Moment::Exit => End::Exit,
            Moment::Signal(_) => End::Signal,
            Moment::Snapshot | Moment::Requested => End::Snapshot,
            Moment::Detach => End::Detach,
        },
        signal: match moment {
            Moment::Signal(sig) => Some(signal_name(sig)),
            _ => None,
        },
        snapshot,
        forked_from: match s.forked_from.load(Relaxed) {
            0 => None,
            pid => Some(pid),
        },
        recording_stopped: s.stopped.get().cloned(),
    }
}

pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGABRT => "SIGABRT".into(),
        n => format!("SIG{n}"),
    }
}

/// Writes a dump (what `write` writes) through a temporary file in the same directory (mode
/// 0600), then gives it the name `path` — or, if a file of that name exists (another process's
/// dump), the first free `NAME.1.json`, `NAME.2.json` …: a dump never replaces another. Returns
/// the name used.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    create_dir(&dir)?;
    // Short, so that any valid final name is possible; one per process (the dumping lock
    // serialises a process's dumps).
    let tmp = dir.join(format!(".cudaleak.{}.tmp", std::process::id()));
    // A stale temporary (a reused pid) or a planted link is removed, never followed.
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let file = stdio::file_above_stdio(file)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        // Complete before it gets its name, so no reader sees half a dump. Not synced to disk:
        // that only matters if the machine goes down, and cost up to 0.7 s on a 140 MB dump.
        w.into_inner().map_err(|e| e.into_error())?;
        publish(&tmp, path)
    })();
    let _ = fs::remove_file(&tmp);
    result
}

/// Creates `dir` and its parents, saying which part of the path is in the way when one is not a
/// directory (`create_dir_all` reports only "File exists").
fn create_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir).map_err(|e| {
        let blocker = dir
            .ancestors()
            .find(|a| fs::symlink_metadata(a).is_ok_and(|m| !m.is_dir()) && !a.is_dir());
        match blocker {
            Some(b) => io::Error::other(format!("{} is not a directory", b.display())),
            None => e,
        }
    })
}

/// Links `tmp` to `path` or to the first free alternative name; `tmp` is left for the caller.
/// A name taken by something other than a regular file (a device such as `/dev/stdout`, a FIFO,
/// a directory) is an error: the dump would not be where the user looks for it.
fn publish(tmp: &Path, path: &Path) -> io::Result<PathBuf> {
    if let Ok(m) = fs::symlink_metadata(path) {
        if !m.file_type().is_file() && !m.file_type().is_symlink() {
            return Err(io::Error::other(format!(
                "{} exists and is not a regular file",
                path.display()
            )));
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, ext) = match name.strip_suffix(".json") {
        Some(stem) => (stem.to_string(), ".json"),
        None => (name.clone(), ""),
    };
    for n in 0..1000u32 {
        let candidate = if n == 0 {
            path.to_path_buf()
        } else {
            path.with_file_name(format!("{stem}.{n}{ext}"))
        };
        match fs::hard_link(tmp, &candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            // Filesystems without hard links: rename, having checked the name is free.
            Err(_) if !candidate.exists() => {
                fs::rename(tmp, &candidate)?;
                return Ok(candidate);
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "1000 dumps of that name exist",
    ))
}

/// `74.10 KiB`: the formatter the CLI's reports use, so the exit line and the report agree.
pub use cudaleak_format::human_bytes;

/// Writes a dump the program asked for to `path` (through a temporary file; a dump never
/// replaces another: see [`write_atomically`]), returning the name used. Refused once the
/// final dump has begun.
pub fn write_requested(
    s: &State,
    path: &Path,
    records: Option<Vec<format::FrameworkRecord>>,
) -> io::Result<PathBuf> {
    let ending = s.dumping.lock();
    if *ending {
        return Err(io::Error::other("the process is ending"));
    }
    let mut dump = prepare(s, Moment::Requested, None);
    if let Some(records) = records {
        // This dump's own: what a framework's record named for the caller's window (the
        // Python API, the pytest plugin), in place of any the bootstrap handed in.
        let f = dump
            .frameworks
            .get_or_insert_with(format::Frameworks::default);
        f.records = records;
        dump.version = dump.version.max(format::SCHEMA_VERSION);
    }
    let written = write_atomically(path, |w| dump.write(w));
    drop(ending);
    written
}

/// Writes a dump and, at the end of a process that used CUDA memory, prints the one-line
/// summary. Failure costs one stderr line; the program carries on either way. Returns the
/// snapshot's number when a snapshot was written.
pub fn write(s: &State, moment: Moment) -> Option<u64> {
    let mut ending = s.dumping.lock();
    if *ending {
        return None; // the final dump is written: the process is ending
    }
    if moment != Moment::Snapshot {
        *ending = true;
    }
    let pid = std::process::id();
    let is_dir = |p: &PathBuf| p.is_dir();
    // A second `cudaleak attach` writes into its own run directory.
    let config = s.attached.config(&s.config);
    let (path, snapshot) = match moment {
        Moment::Snapshot => {
            let n = s.snapshots.fetch_add(1, Relaxed) + 1;
            (config.snapshot_path(pid, n, is_dir), Some(n))
        }
        _ => (config.dump_path(pid, is_dir), None),
    };
    let dump = prepare(s, moment, snapshot);
    let when = match moment {
        Moment::Exit => "at exit".to_string(),
        Moment::Signal(sig) => format!("at {}", signal_name(sig)),
        Moment::Snapshot | Moment::Requested => String::new(),
        Moment::Detach => "at detach".to_string(),
    };
    // A process that never touched CUDA memory (a shell, a compiler, `nvidia-smi` run by the
    // program: every child inherits LD_PRELOAD) keeps its stderr as it was, even if its dump
    // could not be written. Its dump is written only where dumps were sent on purpose
    // (`CUDALEAK_OUTPUT`: `cudaleak run`'s directory, which counts such processes): under a
    // plain LD_PRELOAD it would litter the working directory of every pipeline the program
    // runs. (What `format::Dump::is_quiet` says of the dump.)
    let untouched = dump.summary.is_empty()
        && dump.events.is_empty()
        && dump.process.recording_stopped.is_none();
    if untouched && s.config.output.is_none() && moment != Moment::Snapshot {
        return None;
    }
    let written = write_atomically(&path, |w| dump.write(w));
    let numbered = written.as_ref().ok().and(snapshot);
    if untouched {
        return numbered;
    }
    let line = match written {
        Ok(_) if s.config.quiet || moment == Moment::Snapshot => return numbered,
        Ok(written) => {
            let n = dump.summary.live_allocations;
            format!(
                "cudaleak: {n} allocation{} ({}) still live {when} -> {}\n",
                if n == 1 { "" } else { "s" },
                human_bytes(dump.summary.live_bytes),
                written.display()
            )
        }
        Err(e) => format!("cudaleak: could not write {}: {e}\n", path.display()),
    };
    stdio::say(&line);
    numbered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_line_writes_sizes_as_the_report_does() {
        // The report's leak header reads "4.00 MiB"; the exit line once read "4.0 MiB".
        assert_eq!(human_bytes(4 << 20), "4.00 MiB");
        assert_eq!(human_bytes(75_878), "74.10 KiB");
        assert_eq!(human_bytes(1023), "1023 B");
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cudaleak-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn sample() -> format::Dump {
        format::from_slice(include_bytes!("../../format/tests/v1-sample.json")).unwrap()
    }

    fn write_sample(w: &mut BufWriter<fs::File>) -> io::Result<()> {
        format::write(&sample(), w)
    }

    #[test]
    fn a_file_in_the_way_of_the_directory_is_named() {
        let dir = scratch("notdir");
        fs::write(dir.join("plain"), "x").unwrap();
        let err = write_atomically(&dir.join("plain/sub/d.json"), write_sample).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{} is not a directory", dir.join("plain").display())
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_name_of_255_bytes_can_be_written() {
        let dir = scratch("longname");
        let name = format!("{}.json", "n".repeat(250));
        let written = write_atomically(&dir.join(&name), write_sample).unwrap();
        assert_eq!(written, dir.join(&name));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_name_taken_by_something_not_a_regular_file_is_an_error_not_a_new_name() {
        let dir = scratch("nonregular");
        fs::create_dir(dir.join("taken.json")).unwrap();
        let err = write_atomically(&dir.join("taken.json"), write_sample).unwrap_err();
        assert!(err.to_string().ends_with("is not a regular file"), "{err}");
        let mut names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, vec![std::ffi::OsString::from("taken.json")]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn atomic_write_leaves_only_the_final_file_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cudaleak-dump-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("cudaleak.1.json");
        let dump = format::from_slice(include_bytes!("../../format/tests/v1-sample.json")).unwrap();
        write_atomically(&path, |w| format::write(&dump, w)).unwrap();
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
