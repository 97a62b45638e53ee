//! The null-device runtime and driver on their own, without the shim: every scenario runs and
//! prints what it should, the driver resolves and rejects like driver 580, and the runtime
//! reaches the driver by exactly the calls real cudart 12.9/13.0 makes.

use cudaleak_tests::{files_in, Scenario, NULLCUDA_DIR};

#[test]
fn driver_follows_the_measured_rules() {
    let run = Scenario::new("nullcuda_rules")
        .env("NULLCUDA_MEM_LIMIT", "1048576")
        .run_plain();
    run.assert_exit(0).assert_stdout("66 checks, 0 failed\n");
}

#[test]
fn runtime_reaches_the_driver_like_real_cudart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("spy.log");
    Scenario::new("runtime_each")
        .arg("leak")
        .run_spy(&log)
        .assert_exit(0);
    let seen = std::fs::read_to_string(&log).unwrap();
    let expected = "\
dlopen libcuda.so.1 2
dlsym cuGetProcAddress_v2
getproc  0 0
getproc cuInit 2000 0
getproc cuGetProcAddress 11030 0
getproc cuGetProcAddress 12000 0
getproc cuDriverGetVersion 2020 0
getproc cuMemAlloc 3020 0
getproc cuMemAllocPitch 3020 0
getproc cuMemFree 3020 0
getproc cuMemAllocManaged 6000 0
getproc cuMemHostAlloc 2020 0
getproc cuMemFreeHost 2000 0
getproc cuMemAllocAsync 11020 0
getproc cuDevicePrimaryCtxRetain 7000 0
getproc cuCtxSetCurrent 4000 0
getproc cuMemAllocFromPoolAsync 11020 0
getproc cuMemFreeAsync 11020 0
getproc cuMemAllocAsync 11020 2
getproc cuMemAllocFromPoolAsync 11020 2
getproc cuMemFreeAsync 11020 2
getproc cuArrayCreate 3020 0
getproc cuArray3DCreate 3020 0
getproc cuArrayDestroy 2000 0
getproc cuMemCreate 10020 0
getproc cuMemRelease 10020 0
getproc cuMemGetInfo 3020 0
getproc cuCtxSynchronize 2000 0
getproc cuDeviceGetDefaultMemPool 11020 0
getproc cuMemHostRegister 6050 0
getproc cuMemHostUnregister 4000 0
getproc cuIpcGetMemHandle 4010 0
getproc cuIpcOpenMemHandle 11000 0
getproc cuIpcCloseMemHandle 4010 0
getproc cuMemPoolExportPointer 11020 0
getproc cuMemPoolImportPointer 11020 0
";
    assert_eq!(seen, expected);
}

#[test]
fn runtime_exports_carry_the_libcudart_version() {
    let out = std::process::Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(cudaleak_tests::scenario_program("runtime_each"))
        .output();
    let Ok(out) = out else {
        eprintln!("nm is not installed; skipping the symbol version check");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "cudaMalloc",
        "cudaFree",
        "cudaMallocAsync_ptsz",
        "cudaFreeArray",
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_end().ends_with(&format!(" {name}@libcudart.so.13"))),
            "{name}@libcudart.so.13 not imported:\n{text}"
        );
    }
}

#[test]
fn dev_symlinks_point_at_the_sonames() {
    let dir = std::path::Path::new(NULLCUDA_DIR);
    assert_eq!(
        std::fs::read_link(dir.join("libcuda.so")).unwrap(),
        std::path::Path::new("libcuda.so.1")
    );
    assert_eq!(
        std::fs::read_link(dir.join("libcudart.so")).unwrap(),
        std::path::Path::new("libcudart.so.13")
    );
    assert_eq!(files_in(dir).len(), 4);
}

fn plain(name: &str, args: &[&str], stdout: &str) {
    let mut s = Scenario::new(name);
    for a in args {
        s = s.arg(a);
    }
    if name == "failed_alloc" {
        s = s.env("NULLCUDA_MEM_LIMIT", "1048576");
    }
    let run = s.run_plain();
    run.assert_exit(0).assert_stdout(stdout);
    assert!(run.files().is_empty(), "no dump without the shim");
}

#[test]
fn scenarios_run_without_the_shim() {
    plain(
        "runtime_each",
        &["leak"],
        "pitch=512 pitch3d=512\nleaked 11\n",
    );
    plain(
        "runtime_each",
        &["free"],
        "pitch=512 pitch3d=512\nfreed 11\n",
    );
    for route in ["getproc", "getproc1", "cuda11", "deepbind", "dlsym"] {
        plain(
            "driver_pointers",
            &[route, "free"],
            &format!("route={route} pitch=512\nfreed 12\n"),
        );
    }
    plain(
        "v1_alloc",
        &[],
        "v1 blocks below 4 GiB: 1\ncuMemFree_v2 of a v1 block: rc=0\n",
    );
    plain(
        "mixed_paths",
        &[],
        "entry point status=0\nallocated 4, freed 1\n",
    );
    plain(
        "failed_alloc",
        &[],
        "cudaMalloc rc=2 errno=12 p=(nil)\ncuMemAlloc_v2 rc=2 errno=12 d=0\nlast error=2\n",
    );
    plain(
        "bad_free",
        &[],
        "cudaFree(0x1000) rc=1 errno=22\ncuMemFree_v2(0x2000) rc=1 errno=22\n\
         second cudaFree rc=1 errno=22\ncudaFree(NULL) rc=0\ncuMemFree_v2(0) rc=0\n",
    );
    plain("threads", &[], "threads done\n");
    plain(
        "passthrough",
        &[],
        "cudaMalloc rc=0 errno=4242 nonnull=1\ncudaMallocPitch rc=0 errno=4343 pitch=1024\n\
         cudaFree rc=0 errno=4444\ncudaFree rc=0 errno=4545\n",
    );
    plain("nvcc_style", &[], "kernel launched, no error\n");
}

#[test]
fn driver_scenarios_run_without_the_shim() {
    // cuMemCreate asks for 2 MiB: the default limit (16 GiB) applies here.
    for mode in ["leak", "free"] {
        let run = Scenario::new("driver_each").arg(mode).run_plain();
        let done = if mode == "leak" { "leaked" } else { "freed" };
        run.assert_exit(0)
            .assert_stdout(&format!("pitch=512\n{done} 12\n"));
    }
}

#[test]
fn exit_status_is_the_programs() {
    let run = Scenario::new("leak_exit").arg("7").run_plain();
    run.assert_exit(7).assert_stdout("hello from leak_exit\n");
    assert_eq!(run.stderr, "leak_exit says this on stderr\n");
}

#[test]
fn runtime_without_a_driver_reports_insufficient_driver() {
    // With LD_LIBRARY_PATH pointing elsewhere the program cannot even load libcudart, so
    // hide only the driver: copy the runtime alone into a directory of its own.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        std::path::Path::new(NULLCUDA_DIR).join("libcudart.so.13"),
        dir.path().join("libcudart.so.13"),
    )
    .unwrap();
    let out = std::process::Command::new(cudaleak_tests::scenario_program("passthrough"))
        .env("LD_LIBRARY_PATH", dir.path())
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    // CHECK(cudaFree(0)) fails with cudaErrorInsufficientDriver and exits 99.
    assert_eq!(out.status.code(), Some(99));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("returned 35"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
