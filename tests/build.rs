//! Builds the null-device CUDA runtime and driver (nullcuda/), the call spy, stand-ins for
//! framework libraries (frameworks/: libcublas.so.13 and the other handle-owning NVIDIA libraries,
//! and a PyTorch libc10_cuda.so, that allocate under their real names) and the scenario programs
//! (scenarios/) with the system C and C++ compilers, into OUT_DIR. Tests find them through
//! `NULLCUDA_DIR`, `SPY_LIB`, `FRAMEWORKS_DIR` and `SCENARIO_DIR`.
//!
//! Must never: touch anything outside OUT_DIR, or link a scenario with an rpath (programs find
//! the null libraries through LD_LIBRARY_PATH, as real ones find the real driver).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const WARNINGS: &[&str] = &["-Wall", "-Wextra", "-Werror"];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let src = manifest.join("nullcuda");
    let include = src.join("include");
    let lib_dir = out.join("nullcuda");
    let scenario_dir = out.join("scenarios");
    fs::create_dir_all(&lib_dir).expect("create OUT_DIR/nullcuda");
    fs::create_dir_all(&scenario_dir).expect("create OUT_DIR/scenarios");
    println!("cargo:rerun-if-changed=nullcuda");
    println!("cargo:rerun-if-changed=scenarios");
    println!("cargo:rerun-if-changed=frameworks");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CXX");

    let shared = |soname: &str, source: &str, map: Option<&str>, libs: &[&str]| {
        let mut args: Vec<String> = ["-g", "-O1", "-fPIC", "-shared", "-fvisibility=hidden"]
            .iter()
            .chain(WARNINGS)
            .map(|s| s.to_string())
            .collect();
        args.push(format!("-I{}", include.display()));
        args.push(format!("-Wl,-soname,{soname}"));
        if let Some(map) = map {
            args.push(format!("-Wl,--version-script={}", src.join(map).display()));
        }
        args.push("-o".into());
        args.push(lib_dir.join(soname).display().to_string());
        args.push(src.join(source).display().to_string());
        args.extend(libs.iter().map(|s| s.to_string()));
        compile(&cc, &args);
    };
    shared(
        "libcuda.so.1",
        "driver.c",
        Some("libcuda.map"),
        &["-lpthread"],
    );
    shared(
        "libcudart.so.13",
        "runtime.c",
        Some("libcudart.map"),
        &["-ldl", "-lpthread"],
    );
    dev_symlink(&lib_dir, "libcuda.so", "libcuda.so.1");

    // The benchmark driver lives apart: benchmarks put its directory on LD_LIBRARY_PATH.
    let bench_dir = out.join("benchcuda");
    fs::create_dir_all(&bench_dir).expect("create OUT_DIR/benchcuda");
    let mut args: Vec<String> = ["-O2", "-fPIC", "-shared", "-fvisibility=hidden"]
        .iter()
        .chain(WARNINGS)
        .map(|s| s.to_string())
        .collect();
    args.extend([
        "-Wl,-soname,libcuda.so.1".into(),
        "-o".into(),
        bench_dir.join("libcuda.so.1").display().to_string(),
        manifest.join("bench/benchdrv.c").display().to_string(),
    ]);
    compile(&cc, &args);
    println!("cargo:rerun-if-changed=bench");
    println!("cargo:rustc-env=BENCHCUDA_DIR={}", bench_dir.display());
    dev_symlink(&lib_dir, "libcudart.so", "libcudart.so.13");

    // Framework stand-ins live apart: only tests that put FRAMEWORKS_DIR on LD_LIBRARY_PATH
    // load them. None has debug information, like the real wheels: c10 keeps its symbol table
    // (names come from it, an anonymous namespace included); cuBLAS and the other NVIDIA
    // libraries are stripped, so only their exported names resolve.
    let cxx = env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let fw_src = manifest.join("frameworks");
    let fw_dir = out.join("frameworks");
    fs::create_dir_all(&fw_dir).expect("create OUT_DIR/frameworks");
    let framework = |compiler: &str, soname: &str, source: &str, strip: bool, libs: &[&str]| {
        let mut args: Vec<String> = [
            "-O1",
            "-fPIC",
            "-shared",
            "-fvisibility=hidden",
            "-fno-omit-frame-pointer",
        ]
        .iter()
        .chain(WARNINGS)
        .map(|s| s.to_string())
        .collect();
        if strip {
            args.push("-s".into());
        }
        args.push(format!("-I{}", include.display()));
        args.push(format!("-Wl,-soname,{soname}"));
        args.push("-o".into());
        args.push(fw_dir.join(soname).display().to_string());
        args.push(fw_src.join(source).display().to_string());
        args.push(format!("-L{}", lib_dir.display()));
        args.extend(libs.iter().map(|s| s.to_string()));
        compile(compiler, &args);
    };
    framework(&cc, "libcublas.so.13", "cublas.c", true, &["-lcuda"]);
    dev_symlink(&fw_dir, "libcublas.so", "libcublas.so.13");
    // Handle-owning libraries (issue 24), stripped like cuBLAS. cuSOLVER links the cuBLAS
    // stand-in above: its create makes a cuBLAS handle through cublasCreate_v2.
    let fw_link = format!("-L{}", fw_dir.display());
    let cuda: &[&str] = &["-lcuda"];
    let handle_libraries: [(&str, &str, &[&str]); 7] = [
        ("libcublasLt.so.13", "cublaslt.c", cuda),
        ("libcudnn.so.9", "cudnn.c", cuda),
        ("libcufft.so.12", "cufft.c", &["-lcuda", "-lpthread"]),
        ("libcurand.so.10", "curand.c", cuda),
        ("libcusparse.so.12", "cusparse.c", &[]),
        (
            "libcusolver.so.12",
            "cusolver.c",
            &[&fw_link, "-lcublas", "-lcuda"],
        ),
        ("libnccl.so.2", "nccl.c", cuda),
    ];
    for (soname, source, libs) in handle_libraries {
        framework(&cc, soname, source, true, libs);
        // The dev symlink scenarios link with: libcufft.so for libcufft.so.12.
        let link = &soname[..soname.find(".so").expect("a soname has .so") + 3];
        dev_symlink(&fw_dir, link, soname);
    }
    framework(&cxx, "libc10_cuda.so", "c10_cuda.cpp", false, &["-lcudart"]);
    framework(
        &cc,
        "libpin_memory.so",
        "pin_memory.c",
        false,
        &["-lcudart"],
    );

    // The spy is not a CUDA library: it lives apart so LD_LIBRARY_PATH never finds it, with the
    // other libraries only a test names by path. Each is one source of nullcuda/.
    let spy_dir = out.join("spy");
    fs::create_dir_all(&spy_dir).expect("create OUT_DIR/spy");
    let side_library = |name: &str, source: &str, flags: &[&str], libs: &[&str]| {
        let library = spy_dir.join(name);
        let mut args: Vec<String> = ["-g", "-O1", "-fPIC", "-shared"]
            .iter()
            .chain(flags)
            .chain(WARNINGS)
            .map(|s| s.to_string())
            .collect();
        args.push(format!("-I{}", include.display()));
        args.extend([
            "-o".into(),
            library.display().to_string(),
            src.join(source).display().to_string(),
        ]);
        args.extend(libs.iter().map(|s| s.to_string()));
        compile(&cc, &args);
        library
    };
    let hidden = ["-fvisibility=hidden"];
    let spy = side_library("libcallspy.so", "spy.c", &hidden, &["-ldl", "-lpthread"]);
    // A library attach_harm loads and closes in a loop while attach patches.
    let driver_dir = format!("-L{}", lib_dir.display());
    let churn = side_library(
        "libchurn.so",
        "churn_lib.c",
        &["-Wl,-z,now", "-Wl,-z,relro"],
        &[&driver_dir, "-lcuda"],
    );
    // An interposer that finds the real function with dlsym(RTLD_NEXT, …).
    let next_probe = side_library("libnextprobe.so", "next_probe.c", &hidden, &["-ldl"]);
    // A library whose constructor holds the loader's lock for a while (fork_loader).
    let slow_init = side_library("libslowinit.so", "slow_init.c", &hidden, &[]);

    let scenarios = manifest.join("scenarios");
    let mut sources: Vec<PathBuf> = fs::read_dir(&scenarios)
        .expect("read scenarios/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    for source in sources {
        let name = source.file_stem().expect("file stem").to_string_lossy();
        let text = fs::read_to_string(&source).expect("read scenario");
        // Frame pointers and -O1: the stacks the shim captures resolve to these lines.
        let mut args: Vec<String> = ["-g", "-O1", "-fno-omit-frame-pointer"]
            .iter()
            .chain(WARNINGS)
            .map(|s| s.to_string())
            .collect();
        args.push(format!("-I{}", include.display()));
        args.push(format!("-I{}", scenarios.display()));
        args.push("-o".into());
        args.push(scenario_dir.join(&*name).display().to_string());
        args.push(source.display().to_string());
        args.push(format!("-L{}", lib_dir.display()));
        args.push(format!("-L{}", fw_dir.display()));
        // Where the linker finds the libraries those depend on (not an rpath in the program).
        args.push(format!("-Wl,-rpath-link,{}", lib_dir.display()));
        args.extend(link_flags(&text));
        compile(&cc, &args);
    }

    println!("cargo:rustc-env=NULLCUDA_DIR={}", lib_dir.display());
    println!("cargo:rustc-env=SPY_LIB={}", spy.display());
    println!("cargo:rustc-env=CHURN_LIB={}", churn.display());
    println!("cargo:rustc-env=NEXT_PROBE_LIB={}", next_probe.display());
    println!("cargo:rustc-env=SLOW_INIT_LIB={}", slow_init.display());
    println!("cargo:rustc-env=SCENARIO_DIR={}", scenario_dir.display());
    println!("cargo:rustc-env=FRAMEWORKS_DIR={}", fw_dir.display());
}

/// The libraries a scenario names on its ` * build: -l…` header line.
fn link_flags(source: &str) -> Vec<String> {
    source
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("* build:"))
        .map(|rest| {
            rest.trim_end_matches("*/")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn compile(cc: &str, args: &[String]) {
    let output = Command::new(cc)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    if !output.status.success() {
        panic!(
            "`{cc} {}` failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn dev_symlink(dir: &Path, link: &str, target: &str) {
    let path = dir.join(link);
    let _ = fs::remove_file(&path);
    std::os::unix::fs::symlink(target, &path)
        .unwrap_or_else(|e| panic!("symlink {}: {e}", path.display()));
}
