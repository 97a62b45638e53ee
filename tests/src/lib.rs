//! The harness for cudaleak's integration tests: where the null-device CUDA libraries, the
//! scenario programs and the shim are, how to run a scenario (with or without the shim), and
//! how to read what it left behind.
//!
//! It owns no expectations: each test in tests/ states its own, exactly. It must never make a
//! failing run look like a passing one (a missing dump, a stray dump, a shim that does not build
//! are all panics).
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;

use cudaleak_format::Dump;

mod dumps;
mod wait;

pub use dumps::*;
pub use wait::{wait_for, wait_for_exit, wait_until};

/// Directory with the null libcuda.so.1 and libcudart.so.13 (and their dev symlinks).
pub const NULLCUDA_DIR: &str = env!("NULLCUDA_DIR");
/// Directory with the compiled scenario programs.
pub const SCENARIO_DIR: &str = env!("SCENARIO_DIR");
/// The call spy: an LD_PRELOAD library that logs how a program reaches the driver.
pub const SPY_LIB: &str = env!("SPY_LIB");
/// A library attach_harm loads and closes in a loop (tests/nullcuda/churn_lib.c).
pub const CHURN_LIB: &str = env!("CHURN_LIB");
/// An LD_PRELOAD interposer of `getppid` that finds the real one with `dlsym(RTLD_NEXT, …)`.
pub const NEXT_PROBE_LIB: &str = env!("NEXT_PROBE_LIB");
/// A library whose constructor sleeps (`SLOWINIT_MS`, default 60) under the loader's lock.
pub const SLOW_INIT_LIB: &str = env!("SLOW_INIT_LIB");
/// Directory with the framework stand-ins (libcublas.so.13, libc10_cuda.so); scenarios that link
/// them need it on LD_LIBRARY_PATH beside [`NULLCUDA_DIR`].
pub const FRAMEWORKS_DIR: &str = env!("FRAMEWORKS_DIR");

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Where the shim reads the process's rank from; cleared for every run unless a test sets one.
pub const RANK_VARIABLES: &[&str] = &["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"];

/// The compiled scenario program `name`.
pub fn scenario_program(name: &str) -> PathBuf {
    Path::new(SCENARIO_DIR).join(name)
}

/// The C source of scenario `name`.
pub fn scenario_source(name: &str) -> PathBuf {
    Path::new(MANIFEST_DIR)
        .join("scenarios")
        .join(format!("{name}.c"))
}

/// The 1-based line of scenario `name` that carries the comment `// @marker`; exactly one must.
pub fn marker_line(name: &str, marker: &str) -> u32 {
    marker_line_in(&scenario_source(name), marker)
}

/// The 1-based line of source file `path` that carries the comment `// @marker`.
pub fn marker_line_in(path: &Path, marker: &str) -> u32 {
    marker_line_tagged(path, &format!("// @{marker}"))
}

/// The 1-based line of a Python script that carries the comment `# @marker`.
pub fn python_marker_line(path: &Path, marker: &str) -> u32 {
    marker_line_tagged(path, &format!("# @{marker}"))
}

fn marker_line_tagged(path: &Path, tag: &str) -> u32 {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let hits: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(tag))
        .map(|(i, _)| i + 1)
        .collect();
    match hits.as_slice() {
        [line] => u32::try_from(*line).expect("line number fits u32"),
        _ => panic!(
            "{}: expected exactly one `{tag}`, found {}",
            path.display(),
            hits.len()
        ),
    }
}

/// The shim library: `CUDALEAK_SHIM` if set, else `target/release/libcudaleak.so` after one
/// `cargo build --release -p cudaleak-shim` per test binary.
pub fn shim() -> &'static Path {
    static SHIM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match SHIM.get_or_init(build_shim) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn build_shim() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CUDALEAK_SHIM") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("CUDALEAK_SHIM={} is not a file", p.display()))
        };
    }
    let workspace = Path::new(MANIFEST_DIR)
        .parent()
        .expect("tests/ has a parent");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| {
            if t.is_relative() {
                workspace.join(t)
            } else {
                t
            }
        })
        .unwrap_or_else(|| workspace.join("target"));
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(OsString::from))
        .unwrap_or_else(|| OsString::from("cargo"));
    let out = Command::new(&cargo)
        .args(["build", "--release", "-p", "cudaleak-shim", "--target-dir"])
        .arg(&target)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
    if !out.status.success() {
        return Err(format!(
            "`cargo build --release -p cudaleak-shim` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let lib = target.join("release").join("libcudaleak.so");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!("the shim built but {} is missing", lib.display()))
    }
}

/// LD_LIBRARY_PATH for programs that load the framework stand-ins.
pub fn frameworks_library_path() -> String {
    format!("{NULLCUDA_DIR}:{FRAMEWORKS_DIR}")
}

/// A Python script of tests/python/.
pub fn python_script(name: &str) -> PathBuf {
    Path::new(MANIFEST_DIR).join("python").join(name)
}

/// The two files `cudaleak run` writes for a Python program (cli/src/bootstrap.rs), under the
/// names it gives them, in a fresh folder to put first on PYTHONPATH.
pub fn bootstrap_dir() -> tempfile::TempDir {
    let src = Path::new(MANIFEST_DIR).join("../python/cudaleak");
    let dir = tempfile::Builder::new()
        .prefix("cudaleak-bootstrap-")
        .tempdir()
        .expect("a temporary directory");
    for (from, to) in [
        ("_sitecustomize.py", "sitecustomize.py"),
        ("_bootstrap.py", "_cudaleak_bootstrap.py"),
    ] {
        std::fs::copy(src.join(from), dir.path().join(to))
            .unwrap_or_else(|e| panic!("copy {from}: {e}"));
    }
    dir
}

/// One CPython interpreter: the real executable (not a launcher script such as pyenv's
/// `python3`, which would leave dumps of its own) and its `(major, minor)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Python {
    pub path: PathBuf,
    pub version: (u32, u32),
}

/// `python3` (required, first), then every other CPython from 3.9 to 3.15 found as `python3.N`
/// on PATH or under pyenv's versions directory, one per minor version.
pub fn pythons() -> Vec<Python> {
    let ask = |program: &Path| -> Option<Python> {
        let out = Command::new(program)
            .args([
                "-c",
                "import sys; print(sys.executable); print(sys.version_info[0], sys.version_info[1])",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        let mut lines = text.lines();
        let path = PathBuf::from(lines.next()?.trim());
        let mut v = lines.next()?.split_whitespace().map(|n| n.parse().ok());
        let version = (v.next()??, v.next()??);
        (out.status.success() && path.is_file()).then_some(Python { path, version })
    };
    let first = ask(Path::new("python3")).expect("python3 is needed for the Python tests");
    let mut found = vec![first];
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(Ok(entries)) = pyenv.map(|r| std::fs::read_dir(r.join("versions"))) {
        let mut versions: Vec<PathBuf> = entries
            .filter_map(|e| Some(e.ok()?.path().join("bin")))
            .collect();
        versions.sort();
        dirs.extend(versions);
    }
    for minor in 9..=15 {
        if found.iter().any(|p| p.version == (3, minor)) {
            continue;
        }
        let name = format!("python3.{minor}");
        if let Some(p) = dirs
            .iter()
            .map(|d| d.join(&name))
            .filter(|p| p.is_file())
            .find_map(|p| ask(&p))
        {
            found.push(p);
        }
    }
    found[1..].sort_by_key(|p| p.version);
    found
}

/// The `cudaleak` binary built beside the shim (`cargo build --release` builds both).
pub fn cudaleak_cli() -> PathBuf {
    let cli = shim().with_file_name("cudaleak");
    assert!(
        cli.is_file(),
        "{} is missing: cargo build --release -p cudaleak-cli",
        cli.display()
    );
    cli
}

/// `cudaleak attach --shim SHIM --out OUT OPTIONS PID`, stdin closed, with nothing from the
/// developer's environment steering it (no `CUDALEAK_*`, rank variable or `LD_PRELOAD`).
pub fn attach_command(pid: u32, out: &Path, options: &[&str]) -> Command {
    let mut cmd = Command::new(cudaleak_cli());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CUDALEAK_") || RANK_VARIABLES.contains(&&*k) || k == "LD_PRELOAD" {
            cmd.env_remove(&*k);
        }
    }
    cmd.arg("attach")
        .arg("--shim")
        .arg(shim())
        .arg("--out")
        .arg(out)
        .args(options)
        .arg(pid.to_string())
        .stdin(Stdio::null());
    cmd
}

/// What `cudaleak run` printed and returned, and the directory its run directories went to.
#[derive(Debug)]
pub struct CliRun {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// `--out`; removed when dropped.
    pub out: tempfile::TempDir,
}

impl CliRun {
    /// Panics unless cudaleak exited with `code`.
    pub fn assert_exit(&self, code: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "cudaleak exited with {}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// The dumps of the one run directory under `--out`.
    pub fn dumps(&self) -> Vec<PathBuf> {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.out.path())
            .expect("read --out")
            .map(|e| e.expect("an entry").path())
            .collect();
        assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
        files_in(&runs[0])
    }
}

/// `cudaleak run --shim <shim> --out <fresh dir> OPTIONS -- <scenario> ARGS` with the null
/// libraries and the framework stand-ins on LD_LIBRARY_PATH, `env` set, and nothing from the
/// developer's environment steering the shim.
pub fn cudaleak_run(
    options: &[&str],
    scenario: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> CliRun {
    let out = tempfile::Builder::new()
        .prefix("cudaleak-run-")
        .tempdir()
        .expect("create a temporary directory");
    let mut cmd = Command::new(cudaleak_cli());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CUDALEAK_")
            || k.starts_with("NULLCUDA_")
            || k.starts_with("PYTORCH_")
            || k.starts_with("XLA_PYTHON_CLIENT_")
            || RANK_VARIABLES.contains(&&*k)
            || k == "LD_PRELOAD"
        {
            cmd.env_remove(&*k);
        }
    }
    cmd.arg("run")
        .arg("--shim")
        .arg(shim())
        .arg("--out")
        .arg(out.path())
        .args(options)
        .arg("--")
        .arg(scenario_program(scenario))
        .args(args)
        .env("LD_LIBRARY_PATH", frameworks_library_path())
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let output = cmd.output().expect("run cudaleak");
    CliRun {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        out,
    }
}

/// How to run one scenario program.
#[derive(Debug, Clone)]
pub struct Scenario {
    name: String,
    program: Option<PathBuf>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    unset: Vec<String>,
    cwd: Option<PathBuf>,
    /// Descriptors the program starts with closed (see [`Scenario::closed`]).
    closed: Vec<u8>,
    /// The user and group the program runs as (see [`Scenario::user`]).
    user: Option<(u32, u32)>,
}

/// What a run left: its status and output, and the directory its dumps were written to.
#[derive(Debug)]
pub struct Run {
    pub name: String,
    pub status: ExitStatus,
    pub pid: u32,
    pub stdout: String,
    pub stderr: String,
    /// The default dump directory (`CUDALEAK_OUTPUT=<dir>/`); removed when the run is dropped.
    pub dir: tempfile::TempDir,
}

impl Scenario {
    pub fn new(name: &str) -> Self {
        Scenario {
            name: name.to_string(),
            program: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            unset: Vec::new(),
            cwd: None,
            closed: Vec::new(),
            user: None,
        }
    }

    /// A program built elsewhere (e.g. by nvcc), run the same way.
    pub fn program(path: &Path) -> Self {
        let mut s = Scenario::new(&path.file_name().expect("a file").to_string_lossy());
        s.program = Some(path.to_path_buf());
        s
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Self {
        self.env
            .insert(k.to_string(), v.as_ref().to_string_lossy().into_owned());
        self
    }

    /// Runs with this variable absent (e.g. `CUDALEAK_OUTPUT`, to test the default).
    pub fn unset(mut self, k: &str) -> Self {
        self.unset.push(k.to_string());
        self
    }

    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Starts the program with descriptor `fd` (0, 1 or 2) closed, as `prog 2>&-` would.
    pub fn closed(mut self, fd: u8) -> Self {
        assert!(fd <= 2, "only the standard descriptors");
        self.closed.push(fd);
        self
    }

    /// Runs the program as user `uid`, group `gid`, without supplementary groups (a test run as
    /// root starts another user's process). Its files must be readable by that user.
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// Runs against the null libraries, without the shim.
    pub fn run_plain(self) -> Run {
        self.run(None)
    }

    /// Runs under the shim with the program's stdout and stderr connected where the test says
    /// (e.g. a pipe whose reader has gone); what is not captured reads as empty.
    pub fn run_shim_with(self, stdout: Stdio, stderr: Stdio) -> Run {
        let shim = shim().to_path_buf();
        self.run_with(Some(shim), stdout, stderr)
    }

    /// Runs with `LD_PRELOAD=<shim>` and `CUDALEAK_OUTPUT=<fresh dir>/`.
    pub fn run_shim(self) -> Run {
        let shim = shim().to_path_buf();
        self.run(Some(shim))
    }

    /// Runs with the call spy preloaded, logging to `log`.
    pub fn run_spy(self, log: &Path) -> Run {
        self.env("NULLCUDA_SPY_LOG", log)
            .run(Some(PathBuf::from(SPY_LIB)))
    }

    fn run(self, preload: Option<PathBuf>) -> Run {
        self.run_with(preload, Stdio::piped(), Stdio::piped())
    }

    fn run_with(self, preload: Option<PathBuf>, stdout: Stdio, stderr: Stdio) -> Run {
        let name = self.name.clone();
        let mut spawned = self.spawn_with(preload, [Stdio::null(), stdout, stderr]);
        let child = spawned.child.take().expect("a fresh child");
        let out = child.wait_with_output().expect("wait for the scenario");
        Run {
            name,
            status: out.status,
            pid: spawned.pid,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            dir: spawned.dir,
        }
    }

    /// Starts the program without the shim, with piped stdin, stdout and stderr (`cudaleak
    /// attach` comes to it while it runs).
    pub fn spawn_plain(self) -> Spawned {
        self.spawn_with(None, [Stdio::piped(), Stdio::piped(), Stdio::piped()])
    }

    /// [`Scenario::spawn_plain`], then waits for the program's "ready" line: the process, its
    /// child handle (stdin and stderr piped) and the rest of its stdout.
    pub fn spawn_ready(
        self,
    ) -> (
        Spawned,
        std::process::Child,
        std::io::BufReader<std::process::ChildStdout>,
    ) {
        use std::io::BufRead;
        let mut spawned = self.spawn_plain();
        let mut child = spawned.child.take().expect("a child");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read ready");
        assert_eq!(line, "ready\n", "the scenario did not start");
        (spawned, child, stdout)
    }

    /// Starts the program under the shim with piped stdin, stdout and stderr, for tests that
    /// talk to it (signals, snapshots) while it runs.
    pub fn spawn_shim(self) -> Spawned {
        let shim = shim().to_path_buf();
        self.spawn_with(Some(shim), [Stdio::piped(), Stdio::piped(), Stdio::piped()])
    }

    fn spawn_with(self, preload: Option<PathBuf>, [stdin, stdout, stderr]: [Stdio; 3]) -> Spawned {
        let dir = tempfile::Builder::new()
            .prefix("cudaleak-test-")
            .tempdir()
            .expect("create a temporary directory");
        let program = self
            .program
            .clone()
            .unwrap_or_else(|| scenario_program(&self.name));
        let mut argv: Vec<OsString> = Vec::new();
        if let Some(flag) = default_signals() {
            argv.extend(["env".into(), flag.into()]);
        }
        if !self.closed.is_empty() {
            let closes: Vec<String> = self.closed.iter().map(|fd| format!("{fd}>&-")).collect();
            let script = format!("exec {} \"$0\" \"$@\"", closes.join(" "));
            argv.extend(["sh".into(), "-c".into(), script.into()]);
        }
        argv.push(program.clone().into());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd.args(&self.args).stdin(stdin);
        // Hermetic: nothing from the developer's environment steers the shim or the driver.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("CUDALEAK_")
                || k.starts_with("NULLCUDA_")
                || RANK_VARIABLES.contains(&&*k)
                || k == "LD_PRELOAD"
            {
                cmd.env_remove(&*k);
            }
        }
        cmd.env("LD_LIBRARY_PATH", NULLCUDA_DIR);
        if let Some(p) = &preload {
            cmd.env("LD_PRELOAD", p);
            cmd.env("CUDALEAK_OUTPUT", format!("{}/", dir.path().display()));
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for k in &self.unset {
            cmd.env_remove(k);
        }
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        if let Some((uid, gid)) = self.user {
            // Run as root, std drops the supplementary groups too.
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid);
        }
        cmd.stdout(stdout).stderr(stderr);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
        Spawned {
            pid: child.id(),
            child: Some(child),
            dir,
        }
    }
}

/// The signals whose default action tests rely on (a signal dump, then death; CPython's
/// KeyboardInterrupt). A test run under `nohup` inherits SIGHUP ignored, one run as a background
/// job SIGINT and SIGQUIT ignored, and an ignored disposition survives exec; so every scenario
/// starts through `env --default-signal=…` (coreutils 8.31+), which resets them and execs the
/// program in the same process. `None` where `env` lacks the option: the dispositions are then
/// inherited.
fn default_signals() -> Option<&'static str> {
    const FLAG: &str = "--default-signal=HUP,INT,QUIT,TERM";
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    SUPPORTED
        .get_or_init(|| {
            Command::new("env")
                .args([FLAG, "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .then_some(FLAG)
}

/// Runs the test `name` of the current test binary again, in a child that inherits `signals`
/// (e.g. `"HUP"`) ignored, as under `nohup` or in a background job, and panics unless it
/// passes: a test that passes only with the default disposition fails there unless the harness
/// resets it. Needs `env --ignore-signal` (coreutils 8.31 or later); without it this fails too,
/// rather than pass without checking.
pub fn assert_passes_with_ignored(signals: &str, name: &str) {
    let ignore = format!("--ignore-signal={signals}");
    let works = Command::new("env")
        .args([ignore.as_str(), "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        works,
        "`env {ignore}` does not work here (coreutils < 8.31?)"
    );
    let me = std::env::current_exe().expect("the test binary");
    let out = Command::new("env")
        .arg(&ignore)
        .arg(me)
        .args(["--exact", name, "--test-threads", "1"])
        .stdin(Stdio::null())
        .output()
        .expect("run the test again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} with {signals} ignored: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scenario still running; see [`Scenario::spawn_shim`].
#[derive(Debug)]
pub struct Spawned {
    pub pid: u32,
    /// Taken by whoever waits for it.
    pub child: Option<std::process::Child>,
    /// The dump directory, as for [`Run::dir`].
    pub dir: tempfile::TempDir,
}

impl Run {
    /// Panics unless the program exited with `code`.
    pub fn assert_exit(&self, code: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "{} exited with {}\nstdout:\n{}\nstderr:\n{}",
            self.name,
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics unless stdout is exactly `expected`.
    pub fn assert_stdout(&self, expected: &str) -> &Self {
        assert_eq!(
            self.stdout, expected,
            "{}: stdout differs\nstderr:\n{}",
            self.name, self.stderr
        );
        self
    }

    /// Every file in the dump directory.
    pub fn files(&self) -> Vec<PathBuf> {
        files_in(self.dir.path())
    }

    /// The one dump, `<dir>/cudaleak.<pid>.json`; panics if it is missing, unreadable, or not
    /// alone.
    pub fn dump(&self) -> Dump {
        let expected = self.dir.path().join(format!("cudaleak.{}.json", self.pid));
        let files = self.files();
        assert_eq!(
            files,
            vec![expected.clone()],
            "{}: expected exactly one dump {}\nstderr:\n{}",
            self.name,
            expected.display(),
            self.stderr
        );
        read_dump(&expected)
    }
}

/// Sends `signal` (a name, as `kill -TERM` takes it) to `pid`, with the system's `kill`.
pub fn kill(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// nvcc where it is installed: `NVCC`, `nvcc` on PATH, `$CUDA_HOME/bin/nvcc`, /usr/local/cuda,
/// or the install `scripts/nvcc.sh` leaves in its cache (`CUDALEAK_CUDA_CACHE`, else
/// `~/.cache/cudaleak/cuda-13.0.88`, complete only with its `.complete` mark). Installs nothing.
pub fn installed_nvcc() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NVCC") {
        return Some(PathBuf::from(p));
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("nvcc")).collect())
        .unwrap_or_default();
    if let Some(h) = std::env::var_os("CUDA_HOME") {
        candidates.push(Path::new(&h).join("bin/nvcc"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    let cache = std::env::var_os("CUDALEAK_CUDA_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
            Some(base.join("cudaleak/cuda-13.0.88"))
        });
    if let Some(c) = cache.filter(|c| c.join(".complete").is_file()) {
        candidates.push(c.join("nvidia/cu13/bin/nvcc"));
    }
    candidates.into_iter().find(|p| p.is_file())
}
