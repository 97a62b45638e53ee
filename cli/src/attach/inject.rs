//! Loading the shim into a running process and calling its two entry points there: one thread
//! borrowed through ptrace (`ptrace.rs`) calls libc's `dlopen(path, RTLD_NOW | RTLD_NODELETE)`,
//! then `cudaleak_attach(config)`; later, `cudaleak_detach()`. Addresses come from the files'
//! dynamic symbols and `/proc/PID/maps` (`elf.rs`, `target.rs`).

use std::path::Path;

use super::elf;
use super::ptrace::{Arg, CallError, Tracee};
use super::target::{self, Mapping};

const RTLD_NOW: u64 = 2;
const RTLD_NODELETE: u64 = 0x1000;

/// Why a step failed, for the caller's message.
#[derive(Debug)]
pub enum InjectError {
    /// ptrace refused (EPERM/EACCES): the caller explains why.
    Forbidden(String),
    /// Anything else, worded.
    Other(String),
}

impl From<CallError> for InjectError {
    fn from(e: CallError) -> Self {
        match &e {
            CallError::Ptrace(_, io)
                if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) =>
            {
                InjectError::Forbidden(e.to_string())
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

/// Seizes the thread of `pid` best borrowed for a call.
fn borrow(pid: u32) -> Result<Tracee, InjectError> {
    let tid = target::pick_thread(pid, &target::threads(pid));
    Ok(Tracee::seize(pid, tid)?)
}

/// `dlopen(link)` then `cudaleak_attach(config)` in `pid`; `shim` is the file `link` names.
/// Returns what `cudaleak_attach` returned.
pub fn attach(pid: u32, link: &Path, shim: &Path, config: &str) -> Result<i32, InjectError> {
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
    let entry = offset_of(shim, "cudaleak_attach")?;
    let mut data = link.as_os_str().as_encoded_bytes().to_vec();
    data.push(0);
    let config_at = data.len();
    data.extend_from_slice(config.as_bytes());
    data.push(0);

    let mut thread = borrow(pid)?;
    let handle = thread.call(
        dlopen,
        &[Arg::Data(0), Arg::Value(RTLD_NOW | RTLD_NODELETE)],
        &data,
    )?;
    if handle == 0 {
        let why = dlerror
            .and_then(|f| thread.call(f, &[], &[]).ok())
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
    let rc = thread.call(base + entry, &[Arg::Data(config_at)], &data)?;
    Ok(rc as u32 as i32)
}

/// `cudaleak_detach()` in `pid`. `Ok(None)` when the shim is not (or no longer) mapped.
pub fn detach(pid: u32, shim: &Path) -> Result<Option<i32>, InjectError> {
    let Some(base) = shim_base(pid, shim)? else {
        return Ok(None);
    };
    let entry = offset_of(shim, "cudaleak_detach")?;
    let mut thread = borrow(pid)?;
    let rc = thread.call(base + entry, &[], &[])?;
    Ok(Some(rc as u32 as i32))
}
