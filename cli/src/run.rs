//! `cudaleak run`: finds the shim, makes a fresh dump directory, runs the program with the shim
//! preloaded (and, with `--exact-pools`, the frameworks' allocator variables set) and the signals
//! a user sends forwarded, and returns the program's exit status.
//!
//! Owns the child process and nothing else: reporting on the dumps is `commands`' job. The
//! program's stdin, stdout and stderr are inherited untouched.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use crate::analyze::ProgramStatus;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

use cudaleak_format::env as var;
/// The shim's file name, as the shim crate builds it.
pub use cudaleak_format::exports::SHIM_NAME;

/// Where the shim was found, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShimSource {
    Flag,
    Env,
    NextToBinary,
    LibDir,
}

/// Resolves the shim: `--shim`, then `$CUDALEAK_SHIM` (an explicit one must exist), then
/// `libcudaleak.so` beside the cudaleak binary, then `../lib/libcudaleak.so` relative to it.
pub fn find_shim(
    flag: Option<&Path>,
    env: Option<OsString>,
    exe: Option<&Path>,
) -> Result<(PathBuf, ShimSource), String> {
    let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if let Some(p) = flag {
        if p.is_file() {
            is_elf(p).map_err(|why| format!("--shim {}: {why}", p.display()))?;
            return Ok((absolute(p), ShimSource::Flag));
        }
        return Err(format!("--shim {}: no such file", p.display()));
    }
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        if p.is_file() {
            is_elf(&p).map_err(|why| format!("CUDALEAK_SHIM={}: {why}", p.display()))?;
            return Ok((absolute(&p), ShimSource::Env));
        }
        return Err(format!("CUDALEAK_SHIM={}: no such file", p.display()));
    }
    let Some(dir) = exe.and_then(Path::parent) else {
        return Err(
            "cannot tell where the cudaleak binary is; pass --shim PATH or set CUDALEAK_SHIM"
                .into(),
        );
    };
    let beside = dir.join(SHIM_NAME);
    let lib = dir.join("..").join("lib").join(SHIM_NAME);
    if beside.is_file() {
        return Ok((absolute(&beside), ShimSource::NextToBinary));
    }
    if lib.is_file() {
        return Ok((absolute(&lib), ShimSource::LibDir));
    }
    Err(format!(
        "cannot find the shim: neither {} nor {} exists; build it (cargo build -p cudaleak-shim) or pass --shim PATH or set CUDALEAK_SHIM",
        beside.display(),
        lib.display()
    ))
}

/// Whether `p` starts as a shared library does (the ELF magic): the loader only warns about a
/// preload it cannot use and runs the program unwatched, so a wrong file is refused up front.
fn is_elf(p: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(p).and_then(|mut f| f.read_exact(&mut magic));
    match read {
        Ok(()) if magic == *b"\x7fELF" => Ok(()),
        Ok(()) => Err(
            "not a shared library (no ELF header); pass the libcudaleak.so the shim \
                       crate builds"
                .into(),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(
            "not a shared library (shorter than an ELF header); pass the libcudaleak.so the \
             shim crate builds"
                .into(),
        ),
        Err(e) => Err(format!("cannot read: {e}")),
    }
}

/// The note `run` prints when the program failed and no CUDA driver can be found: a machine
/// without a GPU runs programs against the null device (see the README). Not for exit status
/// 127 ([`LOADER_NOTE`]): the program did not run far enough to miss the driver.
pub const NO_DRIVER_NOTE: &str = "note: no CUDA driver (libcuda.so.1) was found on this machine, \
     so CUDA calls fail (cudaErrorInsufficientDriver); to run on the null device without a GPU, \
     see \"Without a GPU: the null device\" in README.md";

/// The exit status of a program the loader could not start: not found, not executable, or a
/// library it needs (`libcudart.so.13`, …) not loaded ("error while loading shared libraries").
pub const EXIT_NOT_LOADED: u8 = 127;

/// The note `run` prints for [`EXIT_NOT_LOADED`] instead of [`NO_DRIVER_NOTE`]: the loader's
/// own message, on the program's stderr (inherited), names what is missing.
pub const LOADER_NOTE: &str = "note: the program could not be started or a library it needs \
     could not be loaded (exit 127); see the loader's message above";

/// Whether `libcuda.so.1` can be found as the dynamic loader would look for it: in a directory
/// of `ld_library_path`, in the loader's cache (`/etc/ld.so.cache`), or in a default library
/// directory. A name search, not a `dlopen`: the CLI loads no CUDA library itself.
pub fn driver_found(ld_library_path: Option<OsString>) -> bool {
    const NAME: &str = "libcuda.so.1";
    let listed = ld_library_path
        .iter()
        .flat_map(std::env::split_paths)
        .filter(|d| !d.as_os_str().is_empty());
    let defaults = [
        "/lib",
        "/usr/lib",
        "/lib64",
        "/usr/lib64",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/wsl/lib",
    ]
    .map(PathBuf::from);
    if listed.chain(defaults).any(|d| d.join(NAME).exists()) {
        return true;
    }
    std::fs::read("/etc/ld.so.cache").is_ok_and(|cache| {
        cache
            .windows(NAME.len() + 1)
            .any(|w| w[..NAME.len()] == *NAME.as_bytes() && w[NAME.len()] == 0)
    })
}

/// LD_PRELOAD with the shim appended to what is already there.
pub fn ld_preload(existing: Option<OsString>, shim: &Path) -> Result<OsString, String> {
    let s = shim.as_os_str();
    if s.as_encoded_bytes().iter().any(|&b| b == b':' || b == b' ') {
        return Err(format!(
            "the shim path {} contains ':' or a space, which LD_PRELOAD cannot hold; copy or link it elsewhere",
            shim.display()
        ));
    }
    match existing.filter(|e| !e.as_encoded_bytes().iter().all(u8::is_ascii_whitespace)) {
        Some(mut e) => {
            e.push(":");
            e.push(s);
            Ok(e)
        }
        None => Ok(s.to_os_string()),
    }
}

/// The variable PyTorch reads its allocator settings from (all versions); newer ones read
/// `PYTORCH_ALLOC_CONF` too, and some prefer it, so a value the user set there is merged as well.
pub const TORCH_CONF: &str = "PYTORCH_CUDA_ALLOC_CONF";
pub const TORCH_CONF_GENERIC: &str = "PYTORCH_ALLOC_CONF";
/// The PyTorch backend that hands every tensor to the driver (`cudaMallocAsync` per tensor).
pub const TORCH_BACKEND: &str = "cudaMallocAsync";

/// `value` (a PyTorch allocator setting: `key:value` items separated by commas, brackets may
/// hold commas) with `backend:cudaMallocAsync`: the user's other items kept in order, a `backend`
/// item of the user's replaced in place, else one appended. Also returns the backend replaced,
/// if it was another one.
pub fn merge_torch_conf(value: &str) -> (String, Option<String>) {
    let mut items: Vec<String> = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in value.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    let mut replaced = None;
    let mut found = false;
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let key = item.split(':').next().unwrap_or("").trim();
        if key == "backend" {
            let old = item.split_once(':').map_or("", |(_, v)| v.trim());
            if old != TORCH_BACKEND {
                replaced = Some(old.to_string());
            }
            if !found {
                out.push(format!("backend:{TORCH_BACKEND}"));
            }
            found = true;
            continue;
        }
        out.push(item.to_string());
    }
    if !found {
        out.push(format!("backend:{TORCH_BACKEND}"));
    }
    (out.join(","), replaced)
}

/// The variables `--exact-pools` gives the child, computed from the current ones (`get`), and a
/// note for each value of the user's it replaced. A value of the user's that already says the
/// same is passed on unchanged.
pub fn exact_pools_env(
    get: impl Fn(&str) -> Option<OsString>,
) -> (Vec<(&'static str, OsString)>, Vec<String>) {
    let mut env: Vec<(&'static str, OsString)> = Vec::new();
    let mut notes = Vec::new();
    let text = |k: &str| get(k).map(|v| v.to_string_lossy().into_owned());
    let torch_vars: Vec<&'static str> = [TORCH_CONF, TORCH_CONF_GENERIC]
        .into_iter()
        .filter(|k| get(k).is_some())
        .collect();
    let torch_vars = if torch_vars.is_empty() {
        vec![TORCH_CONF]
    } else {
        torch_vars
    };
    for k in torch_vars {
        let (merged, replaced) = merge_torch_conf(&text(k).unwrap_or_default());
        if let Some(old) = replaced {
            notes.push(format!(
                "--exact-pools: {k} said backend:{old}; the program gets backend:{TORCH_BACKEND}"
            ));
        }
        env.push((k, merged.into()));
    }
    for (k, want, same) in [
        (
            "XLA_PYTHON_CLIENT_ALLOCATOR",
            "platform",
            &["platform"] as &[&str],
        ),
        ("XLA_PYTHON_CLIENT_PREALLOCATE", "false", &["false", "0"]),
        // numba-cuda frees released arrays in batches, and never those pending at exit.
        ("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", "0", &["0"]),
    ] {
        match text(k) {
            Some(v) if same.contains(&v.trim().to_ascii_lowercase().as_str()) => {
                env.push((k, v.into()));
            }
            Some(v) => {
                notes.push(format!(
                    "--exact-pools: {k} was {v:?}; the program gets {want:?}"
                ));
                env.push((k, want.into()));
            }
            None => env.push((k, want.into())),
        }
    }
    (env, notes)
}

/// The variable `--growth` gives the child: snapshots on the shim's `auto` schedule, unless the
/// user set an interval of their own (kept).
pub fn growth_env(get: impl Fn(&str) -> Option<OsString>) -> Option<(&'static str, OsString)> {
    const K: &str = var::SNAPSHOT_INTERVAL;
    get(K).is_none().then(|| (K, "auto".into()))
}

/// Creates `<out>/run-<unix seconds>-<pid>[-n]`, a directory no earlier run used.
pub fn fresh_run_dir(out: &Path) -> Result<PathBuf, String> {
    if let Ok(m) = std::fs::metadata(out) {
        if !m.is_dir() {
            return Err(format!(
                "--out {}: is {}, not a directory; --out names a directory that receives one \
                 subdirectory of dumps per run",
                out.display(),
                if m.is_file() {
                    "a file"
                } else {
                    crate::input::what_it_is(m.file_type())
                }
            ));
        }
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: cannot create: {e}", out.display()))?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("run-{secs}-{}", std::process::id());
    for n in 0..1000 {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = out.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(std::fs::canonicalize(&dir).unwrap_or(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: cannot create: {e}", dir.display())),
        }
    }
    Err(format!(
        "{}: cannot find a fresh run directory",
        out.display()
    ))
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its exit code, or the signal that killed it.
    Exited(ProgramStatus),
    /// It could not be started; 127 not found, 126 not executable (as shells do).
    NotStarted(u8),
}

/// The exit code, or the signal that ended the process.
pub fn program_status(status: std::process::ExitStatus) -> ProgramStatus {
    match (status.code(), status.signal()) {
        (Some(c), _) => ProgramStatus::Code((c & 0xff) as u8),
        (None, Some(sig)) => ProgramStatus::Signal(sig),
        (None, None) => ProgramStatus::Code(1),
    }
}

fn forwardable(sig: i32) -> Option<rustix::process::Signal> {
    use rustix::process::Signal;
    Some(match sig {
        SIGINT => Signal::INT,
        SIGTERM => Signal::TERM,
        SIGHUP => Signal::HUP,
        SIGQUIT => Signal::QUIT,
        SIGUSR1 => Signal::USR1,
        _ => return None,
    })
}

/// Whether `status` (the text of `/proc/PID/status`) says the process catches signal `sig`: bit
/// `sig - 1` of its `SigCgt` mask. `None` when the line is missing or unreadable.
pub fn catches(status: &str, sig: i32) -> Option<bool> {
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())?;
    let bit = u32::try_from(sig.checked_sub(1)?)
        .ok()
        .filter(|&b| b < 64)?;
    Some(mask & (1 << bit) != 0)
}

/// Sends `sig` to the program. SIGUSR1 only where the program catches it: the shim's snapshot
/// handler exists only once it is armed (the first recorded allocation), and SIGUSR1's default
/// action would end the program.
fn forward(pid: rustix::process::Pid, raw: i32, sig: rustix::process::Signal) {
    if raw == SIGUSR1 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", pid.as_raw_nonzero()));
        if !status.is_ok_and(|s| catches(&s, SIGUSR1) == Some(true)) {
            crate::say!(
                "SIGUSR1 not passed on: the program (pid {}) has no SIGUSR1 handler yet (the shim \
                 installs one at its first CUDA allocation), and SIGUSR1 would end it",
                pid.as_raw_nonzero()
            );
            return;
        }
    }
    let _ = rustix::process::kill_process(pid, sig);
}

/// Runs the program to completion. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to cudaleak by a
/// process (`kill`) are passed on to the child, and SIGUSR1 (a snapshot) where the child catches
/// it; ones the kernel sent for the terminal (Ctrl-C)
/// already reached the child, which shares our process group, and are not sent twice.
pub fn run_program(
    program: &[OsString],
    shim: &Path,
    run_dir: &Path,
    extra_env: &[(&str, OsString)],
) -> Result<Outcome, String> {
    let (prog, args) = program
        .split_first()
        .ok_or_else(|| "no program given after --".to_string())?;
    let preload = ld_preload(std::env::var_os("LD_PRELOAD"), shim)?;
    let mut output = run_dir.as_os_str().to_os_string();
    output.push("/");
    // The frameworks' own counts, read in a Python program (CUDALEAK_FRAMEWORKS=0: not).
    let python = if std::env::var_os(var::FRAMEWORKS).is_some_and(|v| v == "0") {
        None
    } else {
        crate::bootstrap::install(run_dir, std::env::var_os("PYTHONPATH"))
            .map_err(|why| crate::say!("note: {why}; the frameworks' own counts are not read"))
            .ok()
    };

    let child_pid = Arc::new(AtomicI32::new(0));
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let handle = signals.handle();
    let forward_to = Arc::clone(&child_pid);
    let forwarder = std::thread::spawn(move || {
        for origin in signals.forever() {
            if matches!(origin.cause, Cause::Kernel) {
                continue;
            }
            let pid = forward_to.load(Ordering::SeqCst);
            if let (Some(pid), Some(sig)) = (
                rustix::process::Pid::from_raw(pid),
                forwardable(origin.signal),
            ) {
                forward(pid, origin.signal, sig);
            }
        }
    });

    let mut command = Command::new(prog);
    command
        .args(args)
        .envs(extra_env.iter().map(|(k, v)| (k, v)))
        .env("LD_PRELOAD", &preload)
        .env(var::OUTPUT, &output);
    if let Some((_, path)) = &python {
        command.env("PYTHONPATH", path);
    }
    let spawned = command.spawn();
    let outcome = match spawned {
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            crate::say!(
                "cannot run {}: {}",
                Path::new(prog).display(),
                e.to_string().split(" (os error").next().unwrap_or("")
            );
            Ok(Outcome::NotStarted(code))
        }
        Ok(mut child) => {
            child_pid.store(child.id() as i32, Ordering::SeqCst);
            let status = child.wait();
            child_pid.store(0, Ordering::SeqCst);
            status
                .map(|s| Outcome::Exited(program_status(s)))
                .map_err(|e| format!("waiting for the program failed: {e}"))
        }
    };
    handle.close();
    let _ = forwarder.join();
    if let Some((dir, _)) = &python {
        crate::bootstrap::remove(dir);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_shim_must_exist_and_is_named_in_the_error() {
        let e = find_shim(Some(Path::new("/nope/libcudaleak.so")), None, None).unwrap_err();
        assert_eq!(e, "--shim /nope/libcudaleak.so: no such file");
        let e = find_shim(None, Some("/nope/x.so".into()), None).unwrap_err();
        assert_eq!(e, "CUDALEAK_SHIM=/nope/x.so: no such file");
    }

    /// Enough of a shared library for `find_shim`: its magic number.
    const ELF: &[u8] = b"\x7fELF\x02\x01\x01";

    #[test]
    fn a_shim_that_is_not_elf_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("libcudaleak.so");
        std::fs::write(&text, "#!/bin/sh\n").unwrap();
        let e = find_shim(Some(&text), None, None).unwrap_err();
        assert!(
            e.starts_with(&format!("--shim {}: not a shared library", text.display())),
            "{e}"
        );
        std::fs::write(&text, "").unwrap();
        let e = find_shim(None, Some(text.clone().into()), None).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "CUDALEAK_SHIM={}: not a shared library",
                text.display()
            )),
            "{e}"
        );
        std::fs::write(&text, ELF).unwrap();
        assert!(find_shim(Some(&text), None, None).is_ok());
    }

    #[test]
    fn the_driver_is_found_on_ld_library_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libcuda.so.1"), ELF).unwrap();
        let mut path = OsString::from("/nonexistent:");
        path.push(dir.path());
        assert!(driver_found(Some(path)));
    }

    #[test]
    fn an_existing_file_as_out_is_named_not_an_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("results");
        std::fs::write(&file, "").unwrap();
        let e = fresh_run_dir(&file).unwrap_err();
        assert_eq!(
            e,
            format!(
                "--out {}: is a file, not a directory; --out names a directory that \
                 receives one subdirectory of dumps per run",
                file.display()
            )
        );
    }

    #[test]
    fn shim_is_found_beside_the_binary_then_in_lib() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let lib = dir.path().join("lib");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        let exe = bin.join("cudaleak");
        let e = find_shim(None, None, Some(&exe)).unwrap_err();
        assert!(
            e.contains("bin/libcudaleak.so") && e.contains("lib/libcudaleak.so"),
            "{e}"
        );
        std::fs::write(lib.join(SHIM_NAME), ELF).unwrap();
        let (p, src) = find_shim(None, None, Some(&exe)).unwrap();
        assert_eq!(src, ShimSource::LibDir);
        assert!(p.ends_with("lib/libcudaleak.so"));
        std::fs::write(bin.join(SHIM_NAME), ELF).unwrap();
        assert_eq!(
            find_shim(None, None, Some(&exe)).unwrap().1,
            ShimSource::NextToBinary
        );
        // The environment wins over the default places, the flag over the environment.
        let other = dir.path().join("other.so");
        std::fs::write(&other, ELF).unwrap();
        let (_, src) = find_shim(None, Some(other.clone().into()), Some(&exe)).unwrap();
        assert_eq!(src, ShimSource::Env);
        let (_, src) = find_shim(Some(&other), Some("/nope".into()), Some(&exe)).unwrap();
        assert_eq!(src, ShimSource::Flag);
    }

    #[test]
    fn shim_is_appended_to_an_existing_preload() {
        let shim = Path::new("/opt/lib/libcudaleak.so");
        assert_eq!(ld_preload(None, shim).unwrap(), "/opt/lib/libcudaleak.so");
        assert_eq!(
            ld_preload(Some("".into()), shim).unwrap(),
            "/opt/lib/libcudaleak.so"
        );
        assert_eq!(
            ld_preload(Some("/usr/lib/libfoo.so".into()), shim).unwrap(),
            "/usr/lib/libfoo.so:/opt/lib/libcudaleak.so"
        );
        assert!(ld_preload(None, Path::new("/my dir/libcudaleak.so")).is_err());
    }

    #[test]
    fn torch_conf_gets_the_async_backend_and_keeps_the_user_s_other_items() {
        let m = |v: &str| merge_torch_conf(v);
        assert_eq!(m(""), ("backend:cudaMallocAsync".into(), None));
        assert_eq!(
            m("expandable_segments:True"),
            (
                "expandable_segments:True,backend:cudaMallocAsync".into(),
                None
            )
        );
        // Brackets hold commas; the user's backend is replaced in place and named.
        assert_eq!(
            m("roundup_power2_divisions:[64:8,>:1], backend:native ,max_split_size_mb:128"),
            (
                "roundup_power2_divisions:[64:8,>:1],backend:cudaMallocAsync,max_split_size_mb:128"
                    .into(),
                Some("native".into())
            )
        );
        assert_eq!(
            m("backend:cudaMallocAsync,,"),
            ("backend:cudaMallocAsync".into(), None)
        );
    }

    #[test]
    fn exact_pools_sets_torch_and_xla_and_names_what_it_replaced() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let (vars, notes) = exact_pools_env(env(&[]));
        assert_eq!(
            vars,
            vec![
                ("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync".into()),
                ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform".into()),
                ("XLA_PYTHON_CLIENT_PREALLOCATE", "false".into()),
                ("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", "0".into()),
            ]
        );
        assert!(notes.is_empty());
        let (vars, notes) = exact_pools_env(env(&[
            ("PYTORCH_ALLOC_CONF", "backend:native"),
            ("XLA_PYTHON_CLIENT_ALLOCATOR", "bfc"),
            ("XLA_PYTHON_CLIENT_PREALLOCATE", "0"),
        ]));
        assert_eq!(
            vars,
            vec![
                ("PYTORCH_ALLOC_CONF", "backend:cudaMallocAsync".into()),
                ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform".into()),
                ("XLA_PYTHON_CLIENT_PREALLOCATE", "0".into()),
                ("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", "0".into()),
            ]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("PYTORCH_ALLOC_CONF said backend:native"));
        assert!(notes[1].contains("XLA_PYTHON_CLIENT_ALLOCATOR was \"bfc\""));
    }

    #[test]
    fn growth_asks_for_auto_snapshots_unless_the_user_set_an_interval() {
        assert_eq!(
            growth_env(|_| None),
            Some(("CUDALEAK_SNAPSHOT_INTERVAL", OsString::from("auto")))
        );
        assert_eq!(growth_env(|_| Some("60".into())), None);
    }

    #[test]
    fn sigcgt_bit_9_is_sigusr1() {
        let status = "Name:\tsh\nSigIgn:\t0000000000000004\nSigCgt:\t0000000000010200\n";
        assert_eq!(catches(status, SIGUSR1), Some(true));
        assert_eq!(catches(status, SIGTERM), Some(false));
        assert_eq!(catches(status, 17), Some(true));
        assert_eq!(catches("Name:\tsh\n", SIGUSR1), None);
        assert_eq!(catches("SigCgt:\tzz\n", SIGUSR1), None);
        assert_eq!(catches(status, 0), None);
    }

    #[test]
    fn each_run_gets_its_own_directory() {
        let out = tempfile::tempdir().unwrap();
        let a = fresh_run_dir(out.path()).unwrap();
        let b = fresh_run_dir(out.path()).unwrap();
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("run-"));
    }
}
