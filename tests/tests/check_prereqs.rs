//! scripts/check-prereqs.sh, which `make test` runs first (issue 44: without Chromium, `make test`
//! failed after 14 minutes at the HTML test): with a tool missing it names it and the command that
//! installs it and fails at once; with every tool there it passes. Tools stand in as stubs on a
//! PATH of their own, so this runs in a second on any machine.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check-prereqs.sh")
}

/// bash from this process's PATH: the script's PATH is the one under test.
fn bash() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
        .expect("bash on PATH")
}

fn check(path: &str) -> Output {
    Command::new(bash())
        .arg(script())
        .env("PATH", path)
        .env_remove("CUDALEAK_CHROMIUM")
        .env_remove("CUDA_HOME")
        .output()
        .expect("bash runs scripts/check-prereqs.sh")
}

#[test]
fn a_missing_tool_is_named_with_its_install_command_and_fails_the_check() {
    let out = check("/nonexistent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for (tool, install) in [
        ("chromium", "apt-get install chromium"),
        ("rustfmt", "rustup component add rustfmt"),
        ("clippy", "rustup component add clippy"),
        ("python3", "apt-get install python3"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.trim_start().starts_with(tool) && l.contains(install)),
            "{tool} is not named with `{install}`:\n{err}"
        );
    }
}

#[test]
fn with_every_tool_on_path_the_check_passes() {
    let dir = tempfile::tempdir().unwrap();
    for tool in [
        "cargo",
        "rustfmt",
        "cargo-clippy",
        "make",
        "cc",
        "c++",
        "python3",
        "chromium",
        "nvcc",
    ] {
        let stub = dir.path().join(tool);
        std::fs::write(&stub, "#!/bin/sh\nexit 0\n").unwrap();
        let mut perms = std::fs::metadata(&stub).unwrap().permissions();
        perms.set_mode(0o755);
        std::fs::set_permissions(&stub, perms).unwrap();
    }
    let out = check(dir.path().to_str().unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("needs what is missing"), "{err}");
}
