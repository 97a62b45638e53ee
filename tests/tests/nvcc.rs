//! A real `nvcc -cudart shared` build against the null runtime, under the shim: the program
//! imports `cudaMalloc@libcudart.so.13` and the registration/launch glue, exactly as on a GPU
//! machine. Needs nvcc (not a GPU): `NVCC`, `nvcc` on PATH, `$CUDA_HOME/bin/nvcc`,
//! /usr/local/cuda, or the install `scripts/nvcc.sh` leaves in its cache. Without one these
//! tests say so on stderr and check nothing — unless `CUDALEAK_REQUIRE_SAMPLES=1` (`make test`),
//! where scripts/nvcc.sh installs one or the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use cudaleak_format::Kind;
use cudaleak_tests::{assert_site_in, live_of_size, summary, Scenario};

fn nvcc() -> Option<PathBuf> {
    cudaleak_tests::installed_nvcc()
}

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/nvcc_leak.cu")
}

/// With `CUDALEAK_REQUIRE_SAMPLES=1` (`make test`, hence CI) a missing nvcc is installed by
/// scripts/nvcc.sh, as the sample tests do, and its failure fails the test: CI cannot pass
/// without having built with nvcc.
fn required_nvcc() -> PathBuf {
    // Once per test binary: its tests run in parallel, and one install is enough.
    static NVCC: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    NVCC.get_or_init(install_nvcc).clone()
}

fn install_nvcc() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/nvcc.sh");
    let out = Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "CUDALEAK_REQUIRE_SAMPLES=1 but scripts/nvcc.sh found or installed no nvcc"
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Builds nvcc_leak.cu with `-cudart shared` plus `extra`; None when there is no nvcc (and
/// none is required).
fn build(dir: &Path, name: &str, extra: &[&str]) -> Option<PathBuf> {
    let required = std::env::var_os("CUDALEAK_REQUIRE_SAMPLES").is_some_and(|v| v == "1");
    let nvcc = match nvcc() {
        Some(n) => n,
        None if required => required_nvcc(),
        None => {
            eprintln!("no nvcc found: the nvcc build is not checked (CUDALEAK_REQUIRE_SAMPLES=1 requires it)");
            return None;
        }
    };
    let out = dir.join(name);
    // Link-time libcudart: nvcc's own, whose symbols carry the same version as the null one.
    let lib = nvcc.parent().and_then(Path::parent).map(|r| r.join("lib"));
    let mut cmd = Command::new(&nvcc);
    cmd.args([
        "-cudart",
        "shared",
        "-g",
        "-O1",
        "-Xcompiler",
        "-fno-omit-frame-pointer",
    ])
    .args(extra)
    .arg("-o")
    .arg(&out)
    .arg(source());
    if let Some(lib) = lib.filter(|l| l.is_dir()) {
        cmd.arg(format!("-L{}", lib.display()));
    }
    let o = cmd.output().expect("run nvcc");
    assert!(
        o.status.success(),
        "nvcc failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(out)
}

fn check(program: &Path, async_api: &str) {
    let run = Scenario::program(program).run_shim();
    run.assert_exit(0)
        .assert_stdout("nvcc_leak: no error, ok\n");
    let dump = run.dump();
    assert_eq!(
        dump.summary,
        // The 512-byte block is freed before the two that stay: the peak is theirs.
        summary(3, 1, 0, 0, 0, 2, 5120, 5120, 5632)
    );
    let dev = live_of_size(&dump, 1024);
    assert_eq!(dev.api, "cudaMalloc");
    assert_eq!(dev.kind, Kind::Device);
    assert_eq!(dev.device, Some(0));
    let asy = live_of_size(&dump, 4096);
    assert_eq!(asy.api, async_api);
    assert_eq!(asy.kind, Kind::Async);
    assert_site_in(
        &dump,
        dev.stack,
        &source(),
        program,
        "leak_buffer(unsigned long)",
        "nvcc_leak",
    );
    assert_site_in(
        &dump,
        asy.stack,
        &source(),
        program,
        "leak_async(CUstream_st*)",
        "nvcc_async",
    );
}

#[test]
fn nvcc_cudart_shared_build_runs_on_the_null_runtime_and_its_leaks_are_found() {
    let dir = tempfile::tempdir().unwrap();
    if let Some(p) = build(dir.path(), "nvcc_leak", &[]) {
        check(&p, "cudaMallocAsync");
    }
}

#[test]
fn nvcc_per_thread_default_stream_build_uses_the_ptsz_names() {
    let dir = tempfile::tempdir().unwrap();
    if let Some(p) = build(
        dir.path(),
        "nvcc_leak_ptsz",
        &["--default-stream", "per-thread"],
    ) {
        check(&p, "cudaMallocAsync_ptsz");
    }
}
