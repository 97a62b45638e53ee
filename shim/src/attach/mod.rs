//! `cudaleak attach`: the shim loaded into a process that is already running. The CLI's
//! injector makes one of the program's threads call `dlopen` on the shim under the name
//! [`ATTACH_NAME`] (a link to it), then [`cudaleak_attach`] with the configuration, and later
//! [`cudaleak_detach`]. Seeing that name, the constructor does nothing: the program's environment
//! is not ours, so the state is built here from the configuration passed in.
//!
//! The route is `pointers` (`patch.rs`): wherever the loaded modules keep a pointer to one of the
//! driver's hooked functions (their import slots, the runtime's table of driver entry points
//! filled through `cuGetProcAddress`) our hook replaces it; so do their import slots of the
//! runtime's allocation functions (labels) and of `dlsym` (lookups made later). Records go
//! through the same hooks, recorder and table as under LD_PRELOAD: the dumps have one form.
//!
//! Detach puts every replaced pointer back (where it still holds ours), pauses recording, ends
//! the worker, restores the signal dispositions it changed and writes the final dump; the library
//! stays loaded and inert (a thread may still be inside one of its hooks).
//!
//! Must never: run from a hook, or change anything of the program's before the configuration
//! is known to be good.

mod patch;

use std::ffi::{c_char, c_int, CStr, OsString};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::config::Config;
use crate::dump::{self, Moment};
use crate::{lifecycle, process, real, stack, state, stdio};

/// The file name the CLI gives the shim it injects (a symbolic link to `libcudaleak.so`).
pub use cudaleak_format::exports::ATTACH_NAME;

const IDLE: u8 = 0;
const BUSY: u8 = 1;
const ATTACHED: u8 = 2;
const DETACHED: u8 = 3;
static PHASE: AtomicU8 = AtomicU8::new(IDLE);
/// How many objects the process had loaded at the last pass over them (`patch::loads`).
static LOADS_SEEN: AtomicU64 = AtomicU64::new(0);

/// `cudaleak_attach`'s answers below zero (the CLI words them).
pub const ERR_ALREADY: c_int = -1;
pub const ERR_PRELOADED: c_int = -2;
pub const ERR_NO_DRIVER: c_int = -3;
pub const ERR_NO_DLSYM: c_int = -4;
pub const ERR_CONFIG: c_int = -5;
pub const ERR_PANIC: c_int = -6;

/// Whether this copy was loaded by `cudaleak attach` (its file is [`ATTACH_NAME`]).
pub fn injected() -> bool {
    let mut info: libc::Dl_info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the loader's tables and fills `info`; the address is one of
    // this library's functions.
    let found = unsafe { libc::dladdr(injected as *const libc::c_void, &mut info) } != 0;
    if !found || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: dli_fname is the loader's NUL-terminated name of this object.
    let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    name.rsplit(|&b| b == b'/').next() == Some(ATTACH_NAME.as_bytes())
}

/// The configuration the CLI passes: `KEY=VALUE` lines of `CUDALEAK_*` variables.
fn parse(text: &str) -> Config {
    Config::from_lookup(|k| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(key, _)| *key == k)
            .map(|(_, v)| OsString::from(v))
    })
}

/// Starts recording in a running process. `config` is `KEY=VALUE` lines (`CUDALEAK_OUTPUT`,
/// `CUDALEAK_SNAPSHOT_INTERVAL`, …). Returns how many pointers were replaced (import slots and
/// table entries; the dump tells them apart), or one of the `ERR_*` codes: nothing of the
/// program's is changed on an error.
///
/// # Safety
/// `config` is null or a NUL-terminated string. Called by the CLI's injector on a thread of the
/// program it stopped, never from a hook.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn cudaleak_attach(config: *const c_char) -> c_int {
    let text = if config.is_null() {
        String::new()
    } else {
        // SAFETY: per the contract, a NUL-terminated string.
        unsafe { CStr::from_ptr(config) }
            .to_string_lossy()
            .into_owned()
    };
    std::panic::catch_unwind(|| attach(&text)).unwrap_or_else(|_| {
        // Whatever was replaced before the panic is put back: the program is left as it was
        // (the CLI reports the failure; a later attach starts over).
        let _ = std::panic::catch_unwind(|| {
            patch::restore();
            state::set_paused(true);
        });
        PHASE.store(
            if state::get().is_some() {
                DETACHED
            } else {
                IDLE
            },
            Ordering::Release,
        );
        ERR_PANIC
    })
}

fn attach(text: &str) -> c_int {
    // Captures may be under way that began before this copy's hooks were in place.
    crate::hooks::pools::captures_unknown();
    if PHASE
        .compare_exchange(DETACHED, BUSY, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return attach_again(text);
    }
    if PHASE
        .compare_exchange(IDLE, BUSY, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return ERR_ALREADY;
    }
    let config = parse(text);
    if !config.warnings.is_empty() || config.output.is_none() || config.disabled {
        PHASE.store(IDLE, Ordering::Release);
        return ERR_CONFIG;
    }
    stdio::init();
    if real::dlsym_fn().is_none() {
        PHASE.store(IDLE, Ordering::Release);
        return ERR_NO_DLSYM;
    }
    if real::driver_handle().is_null() {
        PHASE.store(IDLE, Ordering::Release);
        return ERR_NO_DRIVER;
    }
    // Another copy (a preloaded one) records this process already.
    if !process::decide() {
        PHASE.store(DETACHED, Ordering::Release);
        return ERR_PRELOADED;
    }
    // The dump's `attach.unix_ms` (`State::attached`): the moment the attach began.
    let attached_unix_ms = crate::clock::unix_ms();
    process::init(lifecycle::adoption());
    stack::init_own_range();
    let s = state::init(config);
    s.attached
        .unix_ms
        .store(attached_unix_ms, Ordering::Relaxed);
    lifecycle::install_fork_handlers();
    let (imports, tables) = install(s);
    // Snapshots on their schedule from now, and the signal dumps, as the first allocation
    // would have started them.
    lifecycle::allocation_recorded(s);
    PHASE.store(ATTACHED, Ordering::Release);
    c_int::try_from(imports + tables).unwrap_or(c_int::MAX)
}

/// A later attach to a process the shim was attached to and detached from: the state starts
/// over (an empty table, as in a forked child), dumps go to the new directory, the pointers are
/// replaced again and recording resumes. The rest of the configuration stays the first
/// attach's. A copy that found another recording (`ERR_PRELOADED`) stays out of the way.
fn attach_again(text: &str) -> c_int {
    let Some(s) = state::get().filter(|_| !process::passive()) else {
        PHASE.store(DETACHED, Ordering::Release);
        return ERR_PRELOADED;
    };
    let config = parse(text);
    if !config.warnings.is_empty() || config.output.is_none() {
        PHASE.store(DETACHED, Ordering::Release);
        return ERR_CONFIG;
    }
    if let Ok(mut o) = s.attached.output.lock() {
        *o = config.output;
    }
    s.reset_for_child(0);
    s.attached
        .unix_ms
        .store(crate::clock::unix_ms(), Ordering::Relaxed);
    let (imports, tables) = install(s);
    state::set_paused(false);
    lifecycle::rearm(s);
    PHASE.store(ATTACHED, Ordering::Release);
    c_int::try_from(imports + tables).unwrap_or(c_int::MAX)
}

/// One pass of `patch::install`, counted in `s` (for the dumps): the pointers it replaced, and
/// the loads it saw.
fn install(s: &state::State) -> (usize, usize) {
    let loads = patch::loads();
    let (imports, tables) = patch::install();
    s.attached
        .import_slots
        .store(imports as u64, Ordering::Relaxed);
    s.attached
        .table_slots
        .store(tables as u64, Ordering::Relaxed);
    LOADS_SEEN.store(loads, Ordering::Relaxed);
    (imports, tables)
}

/// Replaces the pointers of the modules loaded since the last pass (a framework imported after
/// the attach: the Python API calls this as each tracked block begins). Returns how many it
/// replaced now, 0 when nothing was loaded since, or -1 when not attached. The pointers
/// already replaced are left as they are (a pass skips a slot that holds ours).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_attach_refresh() -> c_int {
    std::panic::catch_unwind(|| {
        if PHASE
            .compare_exchange(ATTACHED, BUSY, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return -1;
        }
        let mut replaced = 0;
        let loaded_since = patch::loads() != LOADS_SEEN.load(Ordering::Relaxed);
        if let Some(s) = state::get().filter(|_| loaded_since) {
            let slots = &s.attached;
            let (before_i, before_t) = (
                slots.import_slots.load(Ordering::Relaxed),
                slots.table_slots.load(Ordering::Relaxed),
            );
            let (imports, tables) = install(s);
            slots
                .import_slots
                .store(before_i + imports as u64, Ordering::Relaxed);
            slots
                .table_slots
                .store(before_t + tables as u64, Ordering::Relaxed);
            replaced = imports + tables;
        }
        PHASE.store(ATTACHED, Ordering::Release);
        c_int::try_from(replaced).unwrap_or(c_int::MAX)
    })
    .unwrap_or_else(|_| {
        // Only the pass can panic, after the phase became BUSY: what it replaced stays
        // replaced and known to detach.
        PHASE.store(ATTACHED, Ordering::Release);
        ERR_PANIC
    })
}

/// The exit dump of a process that exits while attached. Not an `atexit` handler: one registered
/// at attach would run before every handler the program registered earlier (C++ static
/// destructors, the CUDA runtime's teardown), whose frees it would miss. The finalisers of loaded
/// objects run after all of those (`_dl_fini`, the first exit handler registered), this library's
/// first among them (it was loaded last).
#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".fini_array")]
static AT_UNLOAD: extern "C" fn() = at_unload;

extern "C" fn at_unload() {
    if PHASE.load(Ordering::Acquire) == ATTACHED {
        lifecycle::at_exit();
    }
}

/// Stops recording: every replaced pointer put back, the worker ended, the signal handlers it
/// installed removed, the final dump written (`end: detach`). Returns 0, or -1 when not attached.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_detach() -> c_int {
    std::panic::catch_unwind(|| {
        if PHASE
            .compare_exchange(ATTACHED, BUSY, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return -1;
        }
        patch::restore();
        state::set_paused(true);
        lifecycle::disarm();
        if let Some(s) = state::get() {
            dump::write(s, Moment::Detach);
        }
        PHASE.store(DETACHED, Ordering::Release);
        0
    })
    .unwrap_or(ERR_PANIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_read_from_its_lines() {
        let c =
            parse("CUDALEAK_OUTPUT=/tmp/x/\nCUDALEAK_SNAPSHOT_INTERVAL=auto\nCUDALEAK_QUIET=1\n");
        assert_eq!(c.output, Some(OsString::from("/tmp/x/")));
        assert_eq!(c.snapshot_interval, Some(crate::config::Schedule::Auto));
        assert!(c.quiet);
        assert!(c.warnings.is_empty());
        let bad = parse("CUDALEAK_DEPTH=many\n");
        assert_eq!(bad.warnings.len(), 1);
    }

    #[test]
    fn a_copy_loaded_under_its_own_name_is_not_injected() {
        // The unit-test binary is not libcudaleak-attach.so.
        assert!(!injected());
    }
}
