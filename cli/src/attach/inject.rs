//! Loading the shim into a running process and calling its two entry points there: one thread
//! borrowed through ptrace (`ptrace.rs`) calls libc's `dlopen(path, RTLD_NOW | RTLD_NODELETE)`,
//! then `cudaleak_attach(config)`; later, `cudaleak_detach()`. Addresses come from the files'
//! dynamic symbols and `/proc/PID/maps` (`elf.rs`, `target.rs`).
//!
//! The thread is borrowed only at a safe point (`safepoint.rs`): each thread is stopped in turn
//! and let go again until one is found outside the C library's allocator, loader and stdio;
//! none within the time allowed, and attach refuses with nothing changed.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::elf;
use super::ptrace::{Arg, CallError, Tracee};
use super::safepoint::{Unsafe, Unwinder};
use super::target::{self, Mapping};
use super::Borrow;

const RTLD_NOW: u64 = 2;
const RTLD_NODELETE: u64 = 0x1000;

/// Why a step failed, for the caller's message.
#[derive(Debug)]
pub enum InjectError {
    /// ptrace refused (EPERM/EACCES): the caller explains why.
    Forbidden,
    /// The process is stopped (SIGSTOP, Ctrl-Z): no thread is borrowed while the others cannot
    /// run (one may hold what the call needs).
    Stopped,
    /// No thread came to a safe point in the time allowed: where each was last seen.
    NoSafePoint(Duration, Vec<(i32, String)>),
    /// Ctrl-C (or SIGTERM) before a thread was borrowed.
    Interrupted,
    /// Anything else, worded.
    Other(String),
}

impl From<CallError> for InjectError {
    fn from(e: CallError) -> Self {
        match &e {
            CallError::Ptrace(_, io)
                if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) =>
            {
                InjectError::Forbidden
            }
            _ => InjectError::Other(e.to_string()),
        }
    }
}

fn maps(pid: u32) -> Result<Vec<Mapping>, InjectError> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|t| target::parse_maps(&t))
        .map_err(|e| InjectError::Other(format!("/proc/{pid}/maps: {e}")))
}

/// The address of `name` in the first mapped library `is` accepts that defines it.
fn function_in(pid: u32, maps: &[Mapping], is: fn(&str) -> bool, names: &[&str]) -> Option<u64> {
    let mut seen: Vec<&str> = Vec::new();
    for m in maps.iter().filter(|m| is(&m.path)) {
        if seen.contains(&m.path.as_str()) {
            continue;
        }
        seen.push(&m.path);
        let base = target::mapped_at(maps, &m.path)?;
        let offsets = elf::symbol_offsets(&target::in_root(pid, &m.path), names).ok()?;
        if let Some(off) = offsets.into_iter().flatten().next() {
            return Some(base + off);
        }
    }
    None
}

/// Where the shim (the file at `shim`, under whatever name) is mapped in the process.
fn shim_base(pid: u32, shim: &Path) -> Result<Option<u64>, InjectError> {
    use std::os::unix::fs::MetadataExt;
    let want = std::fs::metadata(shim).map(|m| (m.dev(), m.ino())).ok();
    let maps = maps(pid)?;
    for m in maps
        .iter()
        .filter(|m| m.offset == 0 && target::is_shim(&m.path))
    {
        let same = std::fs::metadata(target::in_root(pid, &m.path))
            .map(|md| Some((md.dev(), md.ino())) == want)
            .unwrap_or(false);
        if same {
            return Ok(target::mapped_at(&maps, &m.path));
        }
    }
    Ok(None)
}

fn offset_of(shim: &Path, name: &str) -> Result<u64, InjectError> {
    elf::symbol_offsets(shim, &[name])
        .map_err(InjectError::Other)?
        .into_iter()
        .flatten()
        .next()
        .ok_or_else(|| {
            InjectError::Other(format!(
                "{}: defines no {name}: not a shim of this version",
                shim.display()
            ))
        })
}

/// How long a thread found inside a C library call is stepped, one instruction at a time, to
/// the call's return before it is let go and tried again later.
const STEP_OUT: Duration = Duration::from_millis(20);

/// Seizes a thread of `pid` at a safe point, with its errno kept, or refuses.
fn borrow(pid: u32, how: &Borrow, maps: &[Mapping]) -> Result<Tracee, InjectError> {
    let mut unwinder = Unwinder::new(pid).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => InjectError::Forbidden,
        _ => InjectError::Other(format!("/proc/{pid}/mem: {e}")),
    })?;
    let deadline = Instant::now() + how.limit;
    let mut seen: Vec<(i32, String)> = Vec::new();
    for round in 0u64.. {
        if how.stop.load(Ordering::Relaxed) {
            return Err(InjectError::Interrupted);
        }
        let threads = target::threads(pid);
        if threads.is_empty() {
            return Err(InjectError::Other("the process ended".into()));
        }
        if target::stopped(pid) {
            return Err(InjectError::Stopped);
        }
        for tid in target::borrow_order(pid, &threads) {
            let mut thread = match Tracee::seize(pid, tid) {
                Ok(t) => t,
                // The thread ended meanwhile.
                Err(CallError::Ended) => continue,
                Err(CallError::Ptrace(_, e)) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                Err(e) => return Err(e.into()),
            };
            if thread.group_stopped() {
                return Err(InjectError::Stopped);
            }
            let mut verdict = unwinder.safe(thread.regs());
            if let Err(Unsafe {
                exit: Some((ret, sp)),
                ..
            }) = verdict
            {
                // Only the C library call it is in stands in the way: step it out of that call.
                if thread.step_out(ret, sp, STEP_OUT)? {
                    verdict = unwinder.safe(thread.regs());
                }
                if thread.group_stopped() {
                    return Err(InjectError::Stopped);
                }
            }
            match verdict {
                Ok(()) => return keep_errno(thread, maps),
                Err(Unsafe { why, .. }) => match seen.iter_mut().find(|s| s.0 == tid) {
                    Some(s) => s.1 = why,
                    None => seen.push((tid, why)),
                },
            }
            // Dropped: let go as it was.
        }
        if Instant::now() >= deadline {
            seen.retain(|(tid, _)| threads.iter().any(|t| t.0 == *tid));
            return Err(InjectError::NoSafePoint(how.limit, seen));
        }
        // Modules loaded since are read again now and then; the pause varies, so as not to
        // meet a looping thread at the same point each time.
        if round % 32 == 31 {
            unwinder.refresh();
        }
        std::thread::sleep(Duration::from_micros(500 + 700 * (round % 7)));
    }
    unreachable!("the loop returns")
}

/// The borrowed thread with its errno noted, to be put back when it is let go.
fn keep_errno(mut thread: Tracee, maps: &[Mapping]) -> Result<Tracee, InjectError> {
    if let Some(at) = function_in(thread.pid(), maps, target::is_libc, &["__errno_location"]) {
        thread.keep_errno(at)?;
    }
    Ok(thread)
}

/// `dlopen(link)` then `cudaleak_attach(config)` in `pid`; `shim` is the file `link` names.
/// Returns what `cudaleak_attach` returned.
pub fn attach(
    pid: u32,
    link: &Path,
    shim: &Path,
    config: &str,
    how: &Borrow,
) -> Result<i32, InjectError> {
    let before = maps(pid)?;
    let dlopen = function_in(pid, &before, target::is_libc, &["dlopen"])
        .or_else(|| function_in(pid, &before, target::is_libdl, &["dlopen"]))
        .or_else(|| function_in(pid, &before, target::is_libc, &["__libc_dlopen_mode"]))
        .ok_or_else(|| {
            InjectError::Other(
                "cannot find dlopen in the process: no glibc C library (or libdl) mapped".into(),
            )
        })?;
    let dlerror = function_in(pid, &before, target::is_libc, &["dlerror"])
        .or_else(|| function_in(pid, &before, target::is_libdl, &["dlerror"]));
    let entry = offset_of(shim, cudaleak_format::exports::ATTACH)?;
    let mut data = link.as_os_str().as_encoded_bytes().to_vec();
    data.push(0);
    let config_at = data.len();
    data.extend_from_slice(config.as_bytes());
    data.push(0);

    let mut thread = borrow(pid, how, &before)?;
    let handle = thread.call(
        dlopen,
        &[Arg::Data(0), Arg::Value(RTLD_NOW | RTLD_NODELETE)],
        &data,
        "loading the shim (dlopen)",
    )?;
    if handle == 0 {
        let why = dlerror
            .and_then(|f| thread.call(f, &[], &[], "asking why (dlerror)").ok())
            .filter(|&p| p != 0)
            .and_then(|p| thread.read_c_string(p))
            .unwrap_or_else(|| "no reason given".into());
        return Err(InjectError::Other(format!(
            "the process could not load the shim: {why}"
        )));
    }
    let base = shim_base(thread.pid(), shim)?.ok_or_else(|| {
        InjectError::Other("the shim was loaded but is not in /proc/PID/maps".into())
    })?;
    let rc = thread.call(
        base + entry,
        &[Arg::Data(config_at)],
        &data,
        "starting the shim (cudaleak_attach)",
    )?;
    Ok(rc as u32 as i32)
}

/// `cudaleak_detach()` in `pid`. `Ok(None)` when the shim is not (or no longer) mapped.
pub fn detach(pid: u32, shim: &Path, how: &Borrow) -> Result<Option<i32>, InjectError> {
    let Some(base) = shim_base(pid, shim)? else {
        return Ok(None);
    };
    let entry = offset_of(shim, cudaleak_format::exports::DETACH)?;
    let mut thread = borrow(pid, how, &maps(pid)?)?;
    let rc = thread.call(
        base + entry,
        &[],
        &[],
        "stopping the shim (cudaleak_detach)",
    )?;
    Ok(Some(rc as u32 as i32))
}
