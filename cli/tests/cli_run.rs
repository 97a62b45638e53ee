//! End-to-end tests of `cudaleak run`, driven with a shell script standing in for a CUDA
//! program (it writes the dump the shim would have written): the run directory and the
//! variables the program gets, the program's status against the gate, what is refused before
//! anything runs.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use predicates::prelude::*;

use common::{bin, copy_dump, dir_file, fx, report, run_env};

#[test]
fn run_reports_leaks_with_23_and_clean_with_0() {
    let env = run_env();
    env.cmd(&[], &copy_dump("leak_loop.json"))
        .assert()
        .code(23)
        .stdout(predicate::str::contains(
            "Leak 1 of 1: 40.00 KiB (40960 B) in 10 allocations via cudaMalloc",
        ))
        .stderr(predicate::str::contains(
            "cudaleak: dumps of this run go to ",
        ));
    env.cmd(&[], &copy_dump("clean.json")).assert().code(0);
    // One fresh directory per run.
    assert_eq!(env.run_dirs().len(), 2);
}

#[test]
fn run_takes_the_program_with_or_without_a_double_dash() {
    let env = run_env();
    let mut c = bin();
    c.arg("run")
        .arg("--shim")
        .arg(&env.shim)
        .arg("--out")
        .arg(&env.out);
    // Everything from PROGRAM on belongs to the program, options included.
    c.args(["sh", "-c", "echo \"[$0]\"; exit 6", "--format"])
        .assert()
        .code(6)
        .stdout(predicate::str::contains("[--format]"));
}

#[test]
fn run_passes_report_options_through() {
    let env = run_env();
    env.cmd(&["--exit-code", "0"], &copy_dump("leak_loop.json"))
        .assert()
        .code(0);
    let out = env
        .cmd(&["--format", "json"], &copy_dump("leak_loop.json"))
        .assert()
        .code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["summary"]["leaked_allocations"], 10);
}

#[test]
fn run_program_failure_wins_over_the_gate() {
    let env = run_env();
    let script = format!("{}; exit 3", copy_dump("leak_loop.json"));
    env.cmd(&[], &script)
        .assert()
        .code(3)
        .stdout(predicate::str::contains("SUMMARY: 40.00 KiB leaked"));
    let script = format!("{}; exit 5", copy_dump("clean.json"));
    env.cmd(&[], &script).assert().code(5);
}

#[test]
fn run_killed_program_exits_128_plus_signal() {
    let env = run_env();
    let script = format!("{}; kill -TERM $$", copy_dump("leak_loop.json"));
    env.cmd(&[], &script).assert().code(128 + 15);
    env.cmd(&[], "kill -KILL $$").assert().code(128 + 9);
}

#[test]
fn the_gate_line_after_a_failed_program_names_the_status_run_returns() {
    let env = run_env();
    let script = format!("{}; kill -TERM $$", copy_dump("leak_loop.json"));
    let out = env.cmd(&[], &script).assert().code(143);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(
            "\nGate failed (leaks); the program was killed by SIGTERM: exit status 143, the program's.\nSUMMARY: "
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("exit status 23"), "{stdout}");
    // A clean dump from a program that failed: no gate failure, still the program's status.
    let script = format!("{}; exit 5", copy_dump("clean.json"));
    env.cmd(&[], &script)
        .assert()
        .code(5)
        .stdout(predicate::str::contains(
            "\nThe program exited with status 5: exit status 5, the program's.\n",
        ));
    let script = format!("{}; kill -TERM $$", copy_dump("leak_loop.json"));
    let out = env.cmd(&["--format", "json"], &script).assert().code(143);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["gate"]["exit_code"], 23);
    assert_eq!(v["gate"]["exit_status"], 143);
    assert_eq!(
        v["gate"]["program"],
        serde_json::json!({"status": 143, "signal": "SIGTERM"})
    );
    let script = format!("{}; kill -TERM $$", copy_dump("leak_loop.json"));
    env.cmd(&["--format", "markdown"], &script)
        .assert()
        .code(143)
        .stdout(predicate::str::contains(
            "❌ gate failed (leaks); the program was killed by SIGTERM: exit status 143, the program's",
        ));
}

#[test]
fn run_without_any_dump_says_so_and_exits_2() {
    let env = run_env();
    env.cmd(&[], "true")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("wrote no dump"));
    // The program's own failure still wins.
    env.cmd(&[], "exit 4").assert().code(4);
}

#[test]
fn run_sets_output_dir_and_appends_the_shim_to_ld_preload() {
    let env = run_env();
    let record = dir_file(&env, "seen");
    let script = format!(
        "printf '%s\\n%s\\n' \"$LD_PRELOAD\" \"$CUDALEAK_OUTPUT\" > '{}'; {}",
        record.display(),
        copy_dump("clean.json")
    );
    // The loader may warn about the preloads; only the variables matter here.
    env.cmd(&[], &script)
        .env("LD_PRELOAD", "/nonexistent/other.so")
        .assert()
        .code(0);
    let seen = std::fs::read_to_string(&record).unwrap();
    let mut lines = seen.lines();
    let shim = std::fs::canonicalize(&env.shim).unwrap();
    assert_eq!(
        lines.next().unwrap(),
        format!("/nonexistent/other.so:{}", shim.display())
    );
    let output = lines.next().unwrap();
    assert!(output.ends_with('/'), "{output}");
    let run_dir = &env.run_dirs()[0];
    assert_eq!(
        Path::new(output.trim_end_matches('/')),
        std::fs::canonicalize(run_dir).unwrap()
    );
}

#[test]
fn run_reports_every_dump_including_children() {
    let env = run_env();
    // A child process (its own pid, so its own dump) and then the parent.
    let child = dir_file(&env, "child.sh");
    std::fs::write(&child, copy_dump("leak_loop.json")).unwrap();
    let script = format!("sh '{}'; {}", child.display(), copy_dump("error_path.json"));
    env.cmd(&[], &script)
        .assert()
        .code(23)
        .stdout(predicate::str::contains("(2 processes)"));
}

#[test]
fn run_refuses_a_missing_shim_before_running_anything() {
    let env = run_env();
    let marker = dir_file(&env, "ran");
    let mut c = bin();
    c.args(["run", "--shim", "/nonexistent/libcudaleak.so", "--"])
        .args(["sh", "-c", &format!("touch '{}'", marker.display())]);
    c.assert()
        .code(2)
        .stderr("cudaleak: --shim /nonexistent/libcudaleak.so: no such file\n");
    bin()
        .env("CUDALEAK_SHIM", "/nonexistent/env.so")
        .args(["run", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "CUDALEAK_SHIM=/nonexistent/env.so: no such file",
        ));
    assert!(!marker.exists());
}

#[test]
fn run_refuses_a_bad_suppression_file_before_running_anything() {
    let env = run_env();
    let marker = dir_file(&env, "ran");
    let supp = dir_file(&env, "bad.supp");
    std::fs::write(&supp, "nonsense\n").unwrap();
    env.cmd(
        &["--suppressions", supp.to_str().unwrap()],
        &format!("touch '{}'", marker.display()),
    )
    .assert()
    .code(2)
    .stderr(predicate::str::contains(format!("{}:1:", supp.display())));
    assert!(!marker.exists());
}

#[test]
fn run_of_a_missing_program_exits_127() {
    let env = run_env();
    let mut c = bin();
    c.arg("run")
        .arg("--shim")
        .arg(&env.shim)
        .arg("--out")
        .arg(&env.out);
    c.args(["--", "/nonexistent/program"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains("cannot run /nonexistent/program"));
}

#[test]
fn run_skips_a_fifo_the_program_planted_among_its_dumps() {
    let env = run_env();
    let script = format!(
        "{}; mkfifo \"${{CUDALEAK_OUTPUT}}cudaleak.1.json\"",
        copy_dump("leak_loop.json")
    );
    let mut cmd = env.cmd(&[], &script);
    cmd.timeout(Duration::from_secs(20))
        .assert()
        .code(23)
        .stdout(predicate::str::contains("Leak 1 of 1: 40.00 KiB"))
        .stderr(predicate::str::contains(
            "cudaleak.1.json: it is a FIFO (named pipe), not a regular file\n",
        ));
}

#[test]
fn run_out_naming_a_file_says_it_is_a_file() {
    let env = run_env();
    let file = env.dir.path().join("results");
    std::fs::write(&file, "").unwrap();
    bin()
        .args(["run", "--shim", env.shim.to_str().unwrap(), "--out"])
        .arg(&file)
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(format!(
            "cudaleak: --out {}: is a file, not a directory; --out names a directory that \
             receives one subdirectory of dumps per run\n",
            file.display()
        ));
}

#[test]
fn run_of_a_missing_program_leaves_no_directory_behind() {
    let env = run_env();
    bin()
        .args(["run", "--shim", env.shim.to_str().unwrap(), "--out"])
        .arg(&env.out)
        .args(["--", "/nonexistent/program"])
        .assert()
        .code(127);
    assert!(!env.out.exists(), "--out was made by this run: removed");
    std::fs::create_dir(&env.out).unwrap();
    bin()
        .args(["run", "--shim", env.shim.to_str().unwrap(), "--out"])
        .arg(&env.out)
        .args(["--", "/nonexistent/program"])
        .assert()
        .code(127);
    assert!(env.out.is_dir(), "an --out of the user's stays");
    assert_eq!(
        env.run_dirs(),
        Vec::<PathBuf>::new(),
        "no empty run directory"
    );
}

#[test]
fn run_refuses_a_shim_that_is_not_a_shared_library() {
    let env = run_env();
    let text = env.dir.path().join("notes.txt");
    std::fs::write(&text, "not a library\n").unwrap();
    bin()
        .args(["run", "--shim", text.to_str().unwrap(), "--out"])
        .arg(&env.out)
        .args(["--", "sh", "-c", "touch ran"])
        .current_dir(env.dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with(format!(
            "cudaleak: --shim {}: not a shared library (no ELF header)",
            text.display()
        )));
    assert!(!env.dir.path().join("ran").exists());
}

/// Issue 44: `run --format html -o report.html` exited 23 and printed nothing about it.
#[test]
fn run_with_the_report_in_a_file_says_its_verdict_and_path_on_stderr() {
    let env = run_env();
    let page = env.dir.path().join("report.html");
    env.cmd(
        &["--format", "html", "-o", page.to_str().unwrap()],
        &copy_dump("leak_loop.json"),
    )
    .assert()
    .code(23)
    .stdout("")
    .stderr(predicate::str::contains(format!(
        "cudaleak: SUMMARY: 40.00 KiB leaked in 10 allocations from 1 callsite (1 process); \
         Gate failed (leaks): exit status 23; report written to {}\n",
        page.display()
    )));
    assert!(std::fs::read_to_string(&page).unwrap().contains("<html"));
}

/// Issue 44: a program whose `libcudart.so.13` could not be loaded (exit 127) was told that no
/// CUDA driver was found.
#[test]
fn run_blames_the_loader_not_the_driver_when_the_program_exits_127() {
    let env = run_env();
    let empty = env.dir.path().join("nolib");
    std::fs::create_dir(&empty).unwrap();
    let loader = "echo './prog: error while loading shared libraries: libcudart.so.13: cannot \
                  open shared object file: No such file or directory' >&2; exit 127";
    for script in [
        loader.to_string(),
        format!("{}; {loader}", copy_dump("clean.json")),
    ] {
        env.cmd(&[], &script)
            .env("LD_LIBRARY_PATH", &empty)
            .assert()
            .code(127)
            .stderr(predicate::str::contains("libcudart.so.13"))
            .stderr(predicate::str::contains(format!(
                "cudaleak: {}\n",
                cudaleak_cli::run::LOADER_NOTE
            )))
            .stderr(predicate::str::contains("no CUDA driver").not());
    }
    assert!(cudaleak_cli::run::LOADER_NOTE.contains("(exit 127); see the loader's message above"));
}

#[test]
fn run_says_how_to_use_the_null_device_when_a_program_fails_without_a_driver() {
    let env = run_env();
    let note = cudaleak_cli::run::NO_DRIVER_NOTE;
    let empty = env.dir.path().join("nolib");
    std::fs::create_dir(&empty).unwrap();
    let fails = format!("{}; exit 1", copy_dump("clean.json"));
    // Where this machine has a driver of its own, only the second half can be checked.
    if !cudaleak_cli::run::driver_found(Some(empty.clone().into())) {
        env.cmd(&[], &fails)
            .env("LD_LIBRARY_PATH", &empty)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!("cudaleak: {note}\n")));
    }
    let with_driver = env.dir.path().join("lib");
    std::fs::create_dir(&with_driver).unwrap();
    std::fs::write(with_driver.join("libcuda.so.1"), b"\x7fELF").unwrap();
    env.cmd(&[], &fails)
        .env("LD_LIBRARY_PATH", &with_driver)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no CUDA driver").not());
    // A program that succeeds needs no advice.
    env.cmd(&[], &copy_dump("clean.json"))
        .env("LD_LIBRARY_PATH", &empty)
        .assert()
        .code(0)
        .stderr(predicate::str::contains("no CUDA driver").not());
    assert!(note.contains("\"Without a GPU: the null device\" in README.md"));
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    assert!(
        readme.contains("\n## Without a GPU: the null device\n"),
        "the note points at a README section that exists"
    );
}

#[test]
fn run_growth_ends_stdout_with_the_verdict_when_only_the_exit_report_fails() {
    let env = run_env();
    // Two dumps of one process that did not grow, still holding leak_loop's 10 blocks at exit.
    let script = format!(
        "cp '{0}' \"${{CUDALEAK_OUTPUT}}cudaleak.$$.snapshot-1.json\"; cp '{0}' \"${{CUDALEAK_OUTPUT}}cudaleak.$$.json\"",
        fx("leak_loop.json")
    );
    let out = env.cmd(&["--growth"], &script).assert().code(23);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("No growth suspects."), "{stdout}");
    assert!(
        stdout.ends_with(
            "Gate failed (leaks at exit): exit status 23.\n\
             SUMMARY: 0 growth suspects (+0 B) in 1 process (2 dumps); 40.00 KiB in 10 \
             allocations leaked at exit\n"
        ),
        "{stdout}"
    );
    env.cmd(&["--growth", "--format", "markdown"], &script)
        .assert()
        .code(23)
        .stdout(predicate::str::starts_with(
            "### cudaleak growth: 0 growth suspects (+0 B) in 1 process (2 dumps); 40.00 KiB in \
             10 allocations leaked at exit\n\n❌ gate failed (leaks at exit), exit status 23\n",
        ));
    let out = env
        .cmd(&["--growth", "--format", "json"], &script)
        .assert()
        .code(23);
    let doc: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        doc["gate"],
        serde_json::json!({
            "failed": true,
            "exit_code": 23,
            "max_leaked_bytes": 0,
            "tolerated": false,
            "at_exit": {"reasons": ["leaks"], "leaked_bytes": 40960, "leaked_allocations": 10}
        })
    );
    // `report --growth` of the same series has no exit report to fold in: its gate is growth's.
    let dir = &env.run_dirs()[0];
    report(&["--growth", "--format", "json", dir.to_str().unwrap()])
        .code(0)
        .stdout(predicate::str::contains("\"at_exit\": null"));
}
