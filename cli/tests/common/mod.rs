//! What the end-to-end tests of the `cudaleak` binary share: the binary with a clean
//! environment, the fixtures, `run`'s stand-in shim and output directory, and a bounded wait. Each test file
//! uses some of it, hence `dead_code` allowed here; nothing here asserts on output.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cudaleak"));
    c.env_remove("CUDALEAK_SHIM")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    c
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn report(args: &[&str]) -> assert_cmd::assert::Assert {
    bin().arg("report").args(args).assert()
}

pub fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

/// A stand-in shim: any file with the ELF magic works, since the "program" is a shell script
/// that writes the dump itself (the loader only warns that it cannot preload a file that short).
pub struct RunEnv {
    pub dir: tempfile::TempDir,
    pub shim: PathBuf,
    pub out: PathBuf,
}

pub fn run_env() -> RunEnv {
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("libcudaleak.so");
    // The ELF magic: `run` refuses a shim that is not a shared library.
    std::fs::write(&shim, b"\x7fELF").unwrap();
    let out = dir.path().join("out");
    RunEnv { dir, shim, out }
}

impl RunEnv {
    pub fn cmd(&self, extra: &[&str], script: &str) -> Command {
        let mut c = self.run_with(extra);
        c.args(["--", "sh", "-c", script]);
        c
    }

    /// `run` with the stand-in shim and `--out`, then `args` as they are (options, `--`, a
    /// program of the caller's).
    pub fn run_with(&self, args: &[&str]) -> Command {
        let mut c = bin();
        c.arg("run")
            .arg("--shim")
            .arg(&self.shim)
            .arg("--out")
            .arg(&self.out)
            .args(args);
        c
    }

    pub fn run_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.out)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// A shell command that puts fixture `name` into the run directory as the program's dump, whole
/// or not at all (copied beside it, then renamed): a test that waits for the dump to appear
/// never sees half of it.
pub fn copy_dump(name: &str) -> String {
    format!(
        "cp '{}' \"${{CUDALEAK_OUTPUT}}.copy.$$\" && mv \"${{CUDALEAK_OUTPUT}}.copy.$$\" \"${{CUDALEAK_OUTPUT}}cudaleak.$$.json\"",
        fx(name)
    )
}

pub fn dir_file(env: &RunEnv, name: &str) -> PathBuf {
    env.dir.path().join(name)
}

pub fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

/// Polls `cond` until it holds, for at most `timeout`; past it, panics naming `what` it waited
/// for. For an order a test must see, never a fixed sleep.
pub fn wait_until(timeout: std::time::Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(100);
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "waited {timeout:?} for {what}, in vain"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    }
}
