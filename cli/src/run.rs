//! `cudaleak run`: finds the shim, makes a fresh dump directory, runs the program with the shim
//! preloaded and the signals a user sends forwarded, and returns the program's exit status.
//!
//! Owns the child process and nothing else: reporting on the dumps is `commands`' job. The
//! program's stdin, stdout and stderr are inherited untouched.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// The shim's file name, as the shim crate builds it.
pub const SHIM_NAME: &str = "libcudaleak.so";

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
            return Ok((absolute(p), ShimSource::Flag));
        }
        return Err(format!("--shim {}: no such file", p.display()));
    }
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        if p.is_file() {
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

/// Creates `<out>/run-<unix seconds>-<pid>[-n]`, a directory no earlier run used.
pub fn fresh_run_dir(out: &Path) -> Result<PathBuf, String> {
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
    /// The exit status the shell would report: the code, or 128 + signal.
    Exited(u8),
    /// It could not be started; 127 not found, 126 not executable (as shells do).
    NotStarted(u8),
}

/// Maps a status to what a shell reports: the exit code, or 128 + the signal number.
pub fn shell_status(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}

fn forwardable(sig: i32) -> Option<rustix::process::Signal> {
    use rustix::process::Signal;
    Some(match sig {
        SIGINT => Signal::INT,
        SIGTERM => Signal::TERM,
        SIGHUP => Signal::HUP,
        SIGQUIT => Signal::QUIT,
        _ => return None,
    })
}

/// Runs the program to completion. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to cudaleak by a
/// process (`kill`) are passed on to the child; ones the kernel sent for the terminal (Ctrl-C)
/// already reached the child, which shares our process group, and are not sent twice.
pub fn run_program(program: &[OsString], shim: &Path, run_dir: &Path) -> Result<Outcome, String> {
    let (prog, args) = program
        .split_first()
        .ok_or_else(|| "no program given after --".to_string())?;
    let preload = ld_preload(std::env::var_os("LD_PRELOAD"), shim)?;
    let mut output = run_dir.as_os_str().to_os_string();
    output.push("/");

    let child_pid = Arc::new(AtomicI32::new(0));
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])
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
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    });

    let spawned = Command::new(prog)
        .args(args)
        .env("LD_PRELOAD", &preload)
        .env("CUDALEAK_OUTPUT", &output)
        .spawn();
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
                .map(|s| Outcome::Exited(shell_status(s)))
                .map_err(|e| format!("waiting for the program failed: {e}"))
        }
    };
    handle.close();
    let _ = forwarder.join();
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
        std::fs::write(lib.join(SHIM_NAME), "").unwrap();
        let (p, src) = find_shim(None, None, Some(&exe)).unwrap();
        assert_eq!(src, ShimSource::LibDir);
        assert!(p.ends_with("lib/libcudaleak.so"));
        std::fs::write(bin.join(SHIM_NAME), "").unwrap();
        assert_eq!(
            find_shim(None, None, Some(&exe)).unwrap().1,
            ShimSource::NextToBinary
        );
        // The environment wins over the default places, the flag over the environment.
        let other = dir.path().join("other.so");
        std::fs::write(&other, "").unwrap();
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
    fn each_run_gets_its_own_directory() {
        let out = tempfile::tempdir().unwrap();
        let a = fresh_run_dir(out.path()).unwrap();
        let b = fresh_run_dir(out.path()).unwrap();
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("run-"));
    }
}
