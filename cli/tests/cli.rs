//! End-to-end tests of the `cudaleak` binary: every exit-code rule of `report`, `diff` and
//! `run`, error messages that name the file, and `run` driven with a shell script standing in
//! for a CUDA program (it writes the dump the shim would have written).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cudaleak"));
    c.env_remove("CUDALEAK_SHIM")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn report(args: &[&str]) -> assert_cmd::assert::Assert {
    bin().arg("report").args(args).assert()
}

fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

#[test]
fn leaks_exit_23_with_the_lsan_like_report() {
    report(&[&fx("error_path.json")])
        .code(23)
        .stdout(predicate::str::contains(
            "Leak 1 of 3: 1.00 MiB (1048576 B) in 1 allocation via cudaMalloc (device 0)\n    #0 process_data(float*) at cuda-samples/leak_error_path.cu:18 (leak_error_path)\n",
        ))
        .stdout(predicate::str::ends_with(
            "SUMMARY: 1.06 MiB leaked in 12 allocations from 3 callsites (1 process)\n",
        ));
}

#[test]
fn clean_dump_exits_0() {
    report(&[&fx("clean.json")])
        .code(0)
        .stdout(predicate::str::contains(
            "SUMMARY: 0 B leaked in 0 allocations from 0 callsites (1 process)",
        ));
}

#[test]
fn exit_code_flag_changes_and_zero_disables_the_gate() {
    report(&["--exit-code", "9", &fx("leak_loop.json")]).code(9);
    report(&["--exit-code", "0", &fx("leak_loop.json")]).code(0);
}

#[test]
fn bad_frees_fail_the_gate_unless_fail_on_leaks() {
    report(&[&fx("double_free.json")]).code(23);
    report(&["--fail-on", "errors", &fx("double_free.json")]).code(23);
    report(&["--fail-on", "leaks", &fx("double_free.json")]).code(0);
    report(&["--fail-on", "errors", &fx("leak_loop.json")]).code(0);
    report(&["--fail-on", "all", &fx("leak_loop.json")]).code(23);
}

#[test]
fn failed_allocations_are_shown_but_pass_the_gate() {
    report(&[&fx("failed_alloc.json")])
        .code(0)
        .stdout(predicate::str::contains(
        "Failed allocation 1 of 1: cudaMalloc of 64.00 GiB returned 2 (cudaErrorMemoryAllocation)",
    ));
}

#[test]
fn min_bytes_and_max_leaked_bytes_filter_and_tolerate() {
    // All three groups of error_path are smaller than 2 MiB: nothing left.
    report(&["--min-bytes", "2M", &fx("error_path.json")])
        .code(0)
        .stdout(predicate::str::contains(
            "Ignored by --min-bytes 2.00 MiB: 3 leak groups",
        ));
    report(&["--min-bytes", "1MiB", &fx("error_path.json")])
        .code(23)
        .stdout(predicate::str::contains(
            "1.00 MiB leaked in 1 allocation from 1 callsite",
        ));
    report(&["--max-leaked-bytes", "40960", &fx("leak_loop.json")])
        .code(0)
        .stdout(predicate::str::contains("within --max-leaked-bytes"));
    report(&["--max-leaked-bytes", "40959", &fx("leak_loop.json")]).code(23);
}

#[test]
fn suppressions_silence_matching_leaks_and_show_counts() {
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("cudaleak.supp");
    std::fs::write(&supp, "# known\nleak:loop_alloc\nleak:no_such_function\n").unwrap();
    report(&[
        "--suppressions",
        supp.to_str().unwrap(),
        &fx("leak_loop.json"),
    ])
    .code(0)
    .stdout(predicate::str::contains("10    40.00 KiB  leak:loop_alloc"))
    .stdout(predicate::str::contains(
        "0          0 B  leak:no_such_function",
    ));
}

#[test]
fn list_caches_prints_the_builtin_rules_and_the_suppression_file_s_cache_lines() {
    let out = report(&["--list-caches"])
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text, cudaleak_cli::caches::BUILTIN);
    for id in [
        "[pytorch-native]",
        "[pytorch-async]",
        "[cublas]",
        "[cudnn]",
        "[cufft]",
        "[cusolver]",
        "[cusparse]",
        "[nccl]",
        "[cupy-pool]",
        "[rmm-pool]",
        "[xla-bfc]",
    ] {
        assert!(text.contains(&format!("\n{id}\n")), "{id}");
    }
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("ci.supp");
    std::fs::write(&supp, "leak:x\ncache:MyPool::*\n").unwrap();
    report(&["--list-caches", "--suppressions", supp.to_str().unwrap()])
        .code(0)
        .stdout(predicate::str::ends_with("cache:MyPool::*    # line 2\n"));
    // --list-caches needs no dump, but a report does; --growth and --list-caches exclude each other.
    report(&["--list-caches", "--growth"]).code(2);
}

#[test]
fn framework_dump_passes_the_gate_for_its_caches_and_fails_for_its_leak() {
    report(&[&fx("framework.json")])
        .code(23)
        .stdout(predicate::str::contains(
            "Held by caches: 86.00 MiB in 3 allocations (cublas 64.00 MiB, pytorch-native 22.00 MiB)",
        ))
        .stdout(predicate::str::contains("Gate failed (leaks): exit status 23."));
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("ci.supp");
    std::fs::write(&supp, "leak:my_ext::scratch\n").unwrap();
    report(&[
        "--suppressions",
        supp.to_str().unwrap(),
        &fx("framework.json"),
    ])
    .code(0);
    report(&[
        "--suppressions",
        supp.to_str().unwrap(),
        "--fail-on",
        "strict",
        &fx("framework.json"),
    ])
    .code(23)
    .stdout(predicate::str::contains(
        "Gate failed (cached memory (--fail-on strict)): exit status 23.",
    ));
}

#[test]
fn gen_suppressions_prints_a_leak_line_per_group_that_suppresses_it() {
    let dumps = [
        fx("error_path.json"),
        fx("python_torch.json"),
        fx("unsymbolized.json"),
    ];
    let out = bin()
        .args(["report", "--gen-suppressions"])
        .args(&dumps)
        .assert()
        .code(23);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains(
            "# 1.00 MiB in 1 allocation via cudaMalloc (device 0) (pid 4711) at process_data(float*) \
             at cuda-samples/leak_error_path.cu:18 (leak_error_path)\nleak:^process_data(float*)$\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nleak:^train_step$\n"), "{text}");
    let rules = text.lines().filter(|l| l.starts_with("leak:")).count();
    assert_eq!(rules, 7, "{text}");
    // Used as the suppression file, it suppresses every leak it was made from.
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("gen.supp");
    std::fs::write(&supp, &text).unwrap();
    report(&[
        "--suppressions",
        supp.to_str().unwrap(),
        &dumps[0],
        &dumps[1],
        &dumps[2],
    ])
    .code(0)
    .stdout(predicate::str::contains(
        "SUMMARY: 0 B leaked in 0 allocations from 0 callsites (3 processes)",
    ));
}

#[test]
fn bad_suppression_file_is_a_usage_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("bad.supp");
    std::fs::write(&supp, "leak:ok\nrace:foo\n").unwrap();
    report(&[
        "--suppressions",
        supp.to_str().unwrap(),
        &fx("leak_loop.json"),
    ])
    .code(2)
    .stderr(predicate::str::contains(format!("{}:2: ", supp.display())));
    report(&["--suppressions", "/nonexistent.supp", &fx("leak_loop.json")])
        .code(2)
        .stderr(predicate::str::contains("/nonexistent.supp"));
}

#[test]
fn broken_inputs_exit_2_with_file_line_and_column() {
    let cases = [
        ("malformed.json", ":14:5: missing field \"size\""),
        (
            "truncated.json",
            ":145:15: the file ends early, inside an object: it is truncated",
        ),
        ("non_utf8.json", ":49:24: invalid unicode code point"),
        (
            "wrong_version.json",
            ": dump schema version 99 is not supported",
        ),
        (
            "dangling_stack.json",
            ": inconsistent dump: live[3].stack is 7",
        ),
    ];
    for (name, msg) in cases {
        report(&[&fx(name)])
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "cudaleak: {}{msg}",
                fx(name)
            )))
            .stderr(predicate::str::contains("panicked").not());
    }
    report(&["/nonexistent/cudaleak.1.json"])
        .code(2)
        .stderr("cudaleak: /nonexistent/cudaleak.1.json: No such file or directory\n");
}

#[test]
fn an_empty_a_binary_and_a_non_dump_json_file_each_say_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty.json", b"", ": the file is empty; a cudaleak dump is a JSON object\n"),
        ("blank.json", b"  \n", ": the file is empty; a cudaleak dump is a JSON object\n"),
        (
            "binary.json",
            b"\x7fELF\x02\x01\x01\x00",
            ":1:1: not JSON (it starts with byte 0x7f); a cudaleak dump is a JSON object\n",
        ),
        (
            "array.json",
            b"[1, 2]",
            ": not a cudaleak dump: the file holds an array, and a cudaleak dump is a JSON object\n",
        ),
        (
            "object.json",
            b"{\"process\": 2}",
            ": not a cudaleak dump (no \"cudaleak_dump\" version field)\n",
        ),
    ];
    for (name, bytes, msg) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        report(&[p.to_str().unwrap()])
            .code(2)
            .stdout("")
            .stderr(format!("cudaleak: {}{msg}", p.display()));
    }
}

#[test]
fn garbage_of_every_kind_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: [&[u8]; 7] = [
        b"",
        b"\xff\xfe\x00",
        b"[]",
        b"null",
        b"{\"cudaleak_dump\": \"1\"}",
        b"{\"cudaleak_dump\": 1}",
        &[b'['; 100_000],
    ];
    for (i, bytes) in inputs.iter().enumerate() {
        let p = dir.path().join(format!("g{i}.json"));
        std::fs::write(&p, bytes).unwrap();
        report(&[p.to_str().unwrap()])
            .code(2)
            .stderr(predicate::str::starts_with(format!(
                "cudaleak: {}",
                p.display()
            )))
            .stderr(predicate::str::contains("panicked").not());
    }
}

#[test]
fn a_directory_reports_one_section_per_process_sorted_by_pid_and_skips_stale_snapshots() {
    let out = report(&[&fx("multi")]).code(23);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let a = text.find("== pid 2001:").unwrap();
    let b = text
        .find("== pid 2002: ./multi_process (killed by SIGTERM) ==")
        .unwrap();
    assert!(a < b);
    assert_eq!(
        text.matches("== pid 2002").count(),
        1,
        "snapshot of 2002 must be skipped"
    );
    assert!(text.contains("== total: 2 processes =="));
    assert!(text
        .ends_with("SUMMARY: 2.00 MiB leaked in 3 allocations from 2 callsites (2 processes)\n"));
}

#[test]
fn a_directory_of_only_snapshots_uses_the_latest_one() {
    report(&[&fx("snapshots")])
        .code(23)
        .stdout(predicate::str::contains("(snapshot 2, still running)"))
        .stdout(predicate::str::contains("snapshot 1").not());
}

#[test]
fn an_empty_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    report(&[dir.path().to_str().unwrap()])
        .code(2)
        .stderr(predicate::str::contains("no cudaleak dumps"));
}

#[test]
fn every_format_parses_or_reads_as_documented() {
    let out = report(&["--format", "json", &fx("error_path.json")]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["cudaleak_report"], 1);
    assert_eq!(v["leaks"].as_array().unwrap().len(), 3);
    let out = report(&["--format", "sarif", &fx("error_path.json")]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["runs"][0]["results"].as_array().unwrap().len(), 3);
    report(&["--format", "markdown", &fx("error_path.json")])
        .code(23)
        .stdout(predicate::str::starts_with("### cudaleak: 1.06 MiB leaked"));
}

#[test]
fn output_flag_writes_the_report_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.sarif");
    report(&[
        "--format",
        "sarif",
        "-o",
        out.to_str().unwrap(),
        &fx("leak_loop.json"),
    ])
    .code(23)
    .stdout("");
    assert!(std::fs::read_to_string(out).unwrap().contains("\"2.1.0\""));
}

#[test]
fn colour_only_when_forced_and_never_with_no_color_on_auto() {
    report(&[&fx("leak_loop.json")]).stdout(predicate::str::contains("\x1b[").not());
    report(&["--color", "always", &fx("leak_loop.json")]).stdout(predicate::str::contains("\x1b["));
    bin()
        .env("NO_COLOR", "1")
        .args(["report", "--color", "auto", &fx("leak_loop.json")])
        .assert()
        .stdout(predicate::str::contains("\x1b[").not());
}

#[test]
fn colour_auto_honours_clicolor_force_and_no_color_wins() {
    let coloured = |envs: &[(&str, &str)]| {
        let mut c = bin();
        c.args(["report", &fx("leak_loop.json")]);
        for (k, v) in envs {
            c.env(k, v);
        }
        let out = c.assert().code(23);
        String::from_utf8_lossy(&out.get_output().stdout).contains("\x1b[")
    };
    assert!(coloured(&[("CLICOLOR_FORCE", "1")]));
    assert!(!coloured(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]));
    // Only text is ever coloured.
    bin()
        .env("CLICOLOR_FORCE", "1")
        .args(["report", "--format", "json", &fx("leak_loop.json")])
        .assert()
        .stdout(predicate::str::contains("\x1b[").not());
}

#[test]
fn output_file_is_replaced_whole_and_a_fifo_there_is_refused_not_opened() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.txt");
    std::fs::write(
        &out,
        "an older, longer report that must not survive in part\n".repeat(500),
    )
    .unwrap();
    report(&["-o", out.to_str().unwrap(), &fx("leak_loop.json")]).code(23);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("== pid "), "{text}");
    assert!(!text.contains("older"), "{text}");
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["report.txt"]);
    // A FIFO with no reader would block an open for writing forever: it is refused unopened.
    let fifo = dir.path().join("report.fifo");
    mkfifo(&fifo);
    bin()
        .args([
            "report",
            "-o",
            fifo.to_str().unwrap(),
            &fx("leak_loop.json"),
        ])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(format!(
            "cudaleak: {}: is a FIFO (named pipe), not a regular file; -o writes a regular file \
             (a temporary file renamed into place), so leave -o out to write to standard output\n",
            fifo.display()
        ));
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn broken_pipe_is_not_an_error() {
    // `cudaleak report … | head -c1`: the reader goes away early.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args([
            "report",
            "--stats",
            &fx("multi"),
            &fx("error_path.json"),
            &fx("managed.json"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(23));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn usage_errors_exit_2_and_help_and_version_exit_0() {
    bin().assert().code(2);
    bin().args(["report"]).assert().code(2);
    bin()
        .args(["report", "--format", "xml", "x"])
        .assert()
        .code(2);
    bin().args(["report", "--top", "0", "x"]).assert().code(2);
    bin()
        .args(["report", "--min-bytes", "lots", "x"])
        .assert()
        .code(2);
    bin().args(["run"]).assert().code(2);
    bin().args(["diff", "only-one"]).assert().code(2);
    for sub in ["run", "report", "diff"] {
        bin()
            .args([sub, "--help"])
            .assert()
            .code(0)
            .stdout(predicate::str::contains("Usage: cudaleak"));
    }
    bin()
        .arg("--version")
        .assert()
        .code(0)
        .stdout(format!("cudaleak {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn diff_puts_growth_first_and_fails_only_when_asked() {
    let old = fx("snapshots/cudaleak.3001.snapshot-1.json");
    let new = fx("snapshots/cudaleak.3001.snapshot-2.json");
    bin()
        .args(["diff", &old, &new])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "Grew 1 of 3: +16.00 KiB, 4 more blocks via cudaMalloc (8.00 KiB in 2 blocks → 24.00 KiB in 6 blocks)\n    #0 handle_request(int)",
        ));
    bin()
        .args(["diff", "--fail-on-growth", &old, &new])
        .assert()
        .code(23);
    // A dump compared with itself has not grown: the growth gate passes.
    bin()
        .args(["diff", "--fail-on-growth", &new, &new])
        .assert()
        .code(0);
    bin()
        .args(["diff", &old, &fx("truncated.json")])
        .assert()
        .code(2);
}

// ---------------------------------------------------------------------------------------------
// run

/// A stand-in shim: any file with the ELF magic works, since the "program" is a shell script
/// that writes the dump itself (the loader only warns that it cannot preload a file that short).
struct RunEnv {
    dir: tempfile::TempDir,
    shim: PathBuf,
    out: PathBuf,
}

fn run_env() -> RunEnv {
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("libcudaleak.so");
    // The ELF magic: `run` refuses a shim that is not a shared library.
    std::fs::write(&shim, b"\x7fELF").unwrap();
    let out = dir.path().join("out");
    RunEnv { dir, shim, out }
}

impl RunEnv {
    fn cmd(&self, extra: &[&str], script: &str) -> Command {
        let mut c = bin();
        c.arg("run")
            .arg("--shim")
            .arg(&self.shim)
            .arg("--out")
            .arg(&self.out)
            .args(extra)
            .args(["--", "sh", "-c", script]);
        c
    }

    fn run_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.out)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn copy_dump(name: &str) -> String {
    format!("cp '{}' \"${{CUDALEAK_OUTPUT}}cudaleak.$$.json\"", fx(name))
}

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

fn dir_file(env: &RunEnv, name: &str) -> PathBuf {
    env.dir.path().join(name)
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
fn run_forwards_sigterm_to_the_program() {
    let env = run_env();
    let script = format!("{}; exec sleep 30", copy_dump("leak_loop.json"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .arg("run")
        .arg("--shim")
        .arg(&env.shim)
        .arg("--out")
        .arg(&env.out)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the program has written its dump, i.e. it is running.
    let start = Instant::now();
    loop {
        let written = env
            .run_dirs()
            .iter()
            .any(|d| std::fs::read_dir(d).is_ok_and(|mut r| r.next().is_some()));
        if written {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the program never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "SIGTERM was not forwarded"
    );
    // sleep died of SIGTERM: 128 + 15 wins over the leak gate, and the report still ran.
    assert_eq!(out.status.code(), Some(143));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 40.00 KiB leaked"));
}

/// `cudaleak run` of `sh -c SCRIPT` in the background, once the script has written a file into
/// the run directory (it is running by then).
fn spawn_run_and_wait(env: &RunEnv, script: &str) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .arg("run")
        .arg("--shim")
        .arg(&env.shim)
        .arg("--out")
        .arg(&env.out)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !env
        .run_dirs()
        .iter()
        .any(|d| std::fs::read_dir(d).is_ok_and(|mut r| r.next().is_some()))
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the program never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    child
}

fn kill(sig: &str, pid: u32) {
    let sent = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn run_forwards_sigusr1_to_a_program_that_catches_it() {
    let env = run_env();
    // The program's SIGUSR1 handler (the shim's, once armed) writes a snapshot; here the trap
    // writes the dump and ends the script.
    let marker = dir_file(&env, "usr1");
    // Bounded, so that a cudaleak killed by SIGUSR1 leaves no endless orphan behind.
    let script = format!(
        "trap 'touch {}; {}; exit 0' USR1; touch \"${{CUDALEAK_OUTPUT}}started\"; \
         i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        marker.display(),
        copy_dump("leak_loop.json")
    );
    let child = spawn_run_and_wait(&env, &script);
    kill("-USR1", child.id());
    let out = child.wait_with_output().unwrap();
    assert!(marker.exists(), "SIGUSR1 was not forwarded");
    // cudaleak survived it (not 128 + 10) and reported the dump the program wrote.
    assert_eq!(out.status.code(), Some(23));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 40.00 KiB leaked"));
}

#[test]
fn run_keeps_sigusr1_from_a_program_without_a_handler_and_says_so() {
    let env = run_env();
    let script = format!("{}; exec sleep 10", copy_dump("leak_loop.json"));
    let child = spawn_run_and_wait(&env, &script);
    kill("-USR1", child.id());
    std::thread::sleep(Duration::from_millis(300));
    // Still running: end it with SIGTERM, which is forwarded.
    kill("-TERM", child.id());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cudaleak: SIGUSR1 not passed on: the program (pid "),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 40.00 KiB leaked"));
}

#[test]
fn source_files_under_the_current_directory_are_shown_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let text = std::fs::read_to_string(fixture("leak_loop.json"))
        .unwrap()
        .replace(
            "\"cuda-samples/leak_loop.cu\"",
            &format!("\"{}/cuda-samples/leak_loop.cu\"", root.display()),
        );
    let dump = root.join("cudaleak.1001.json");
    std::fs::write(&dump, text).unwrap();
    bin()
        .current_dir(&root)
        .args(["report", "cudaleak.1001.json"])
        .assert()
        .code(23)
        .stdout(predicate::str::contains(
            "    #0 loop_alloc(int) at cuda-samples/leak_loop.cu:14 (leak_loop)\n",
        ));
    // Elsewhere the path stays as recorded; JSON always keeps it verbatim.
    bin()
        .args(["report", dump.to_str().unwrap()])
        .assert()
        .stdout(predicate::str::contains(format!(
            "at {}/cuda-samples/leak_loop.cu:14",
            root.display()
        )));
    bin()
        .current_dir(&root)
        .args(["report", "--format", "json", "cudaleak.1001.json"])
        .assert()
        .stdout(predicate::str::contains(format!(
            "\"{}/cuda-samples/leak_loop.cu\"",
            root.display()
        )));
}

#[test]
fn growth_names_the_leak_per_iteration_with_its_rate_and_fails_the_gate() {
    report(&["--growth", &fx("growth")])
        .code(23)
        .stdout(predicate::str::contains(
            "Suspect 1 of 2: +40.00 KiB (10 more blocks) via cudaMalloc, +480.00 KiB/h, rose in 5 of 5 intervals\n",
        ))
        .stdout(predicate::str::contains(
            "rose in 4 of 4 intervals up to its peak, then 40.00 KiB released\n",
        ))
        .stdout(predicate::str::contains(
            "    #0 train_step(int) at cuda-samples/leak_per_iteration.cu:31",
        ))
        .stdout(predicate::str::contains("levelled off in the second half"))
        .stdout(predicate::str::ends_with(
            "SUMMARY: 2 growth suspects (+72.00 KiB) in 1 process (6 dumps)\n",
        ));
    report(&["--growth", "--exit-code", "0", &fx("growth")]).code(0);
    report(&["--growth", "--min-bytes", "41K", &fx("growth")])
        .code(0)
        .stdout(predicate::str::contains("No growth suspects."));
    // Files named one by one make a series too.
    let snaps = fixture("snapshots");
    report(&[
        "--growth",
        snaps
            .join("cudaleak.3001.snapshot-2.json")
            .to_str()
            .unwrap(),
        snaps
            .join("cudaleak.3001.snapshot-1.json")
            .to_str()
            .unwrap(),
    ])
    .code(23)
    .stdout(predicate::str::contains("live: 8.00 KiB, 24.00 KiB"));
}

#[test]
fn growth_in_every_format_parses_or_reads_as_documented() {
    let out = report(&["--growth", "--format", "json", &fx("growth")]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["cudaleak_growth"], 1);
    assert_eq!(v["suspects"], 2);
    let c = &v["processes"][0]["callsites"][0];
    assert_eq!(c["suspect"], true);
    assert_eq!(c["bytes_per_hour"], 491520.0);
    assert_eq!(c["series"].as_array().unwrap().len(), 6);
    assert_eq!(
        (c["peak"].as_u64(), c["released_bytes"].as_u64()),
        (Some(5), Some(0))
    );
    let cache = &v["processes"][0]["callsites"][1];
    assert_eq!(
        (cache["peak"].as_u64(), cache["released_bytes"].as_u64()),
        (Some(4), Some(40960))
    );
    assert_eq!(v["gate"]["exit_code"], 23);
    let out = report(&["--growth", "--format", "sarif", &fx("growth")]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["ruleId"], "cudaleak/growth");
    report(&["--growth", "--format", "markdown", &fx("growth")])
        .code(23)
        .stdout(predicate::str::starts_with(
            "### cudaleak growth: 2 growth suspects",
        ));
}

#[test]
fn growth_with_one_dump_per_process_exits_2_and_says_why() {
    report(&["--growth", &fx("leak_loop.json")])
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "cudaleak: --growth needs at least two dumps of one process",
        ))
        .stderr(predicate::str::contains("pid 1001"));
    report(&["--growth", &fx("truncated.json"), &fx("growth")])
        .code(2)
        .stderr(predicate::str::contains(format!(
            "cudaleak: {}:",
            fx("truncated.json")
        )));
}

/// `leak_loop.json` with `edit` applied, written into `dir` as `name`.
fn edited(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("leak_loop.json")).unwrap()).unwrap();
    edit(&mut v);
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    p.display().to_string()
}

#[test]
fn hostile_dumps_exit_2_with_a_message_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let negative = edited(dir.path(), "negative.json", |v| {
        v["live"][0]["size"] = (-4096).into()
    });
    let not_hex = edited(dir.path(), "not_hex.json", |v| {
        v["live"][0]["address"] = "7f00zz".into()
    });
    let dangling_event = edited(dir.path(), "dangling_event.json", |v| {
        v["events"] = serde_json::json!([{"type": "double_free", "api": "cudaFree",
            "address": "0x1", "size": null, "error": 1, "seq": 99, "stack": 0, "alloc_stack": 42}]);
    });
    let summary_lies = edited(dir.path(), "summary_lies.json", |v| {
        v["summary"]["live_bytes"] = 1.into()
    });
    let deep = dir.path().join("deep.json");
    std::fs::write(
        &deep,
        format!(
            "{{\"cudaleak_dump\": 1, \"process\": {}",
            "[".repeat(200_000)
        ),
    )
    .unwrap();
    let deep = deep.display().to_string();
    let deep_unknown = dir.path().join("deep_unknown.json");
    std::fs::write(
        &deep_unknown,
        format!("{{\"cudaleak_dump\": 1, \"x\": {}", "[".repeat(200_000)),
    )
    .unwrap();
    let deep_unknown = deep_unknown.display().to_string();
    let cases = [
        (&negative, "invalid value: integer \"-4096\", expected u64"),
        (&not_hex, "a string \"0x\" + 1 to 16 hex digits"),
        (
            &dangling_event,
            "inconsistent dump: events[0].alloc_stack is 42",
        ),
        (&summary_lies, "inconsistent dump: summary.live_bytes is 1"),
        (&deep, ":1:34: invalid type: sequence"),
        (&deep_unknown, ":1:"),
    ];
    for (path, msg) in cases {
        for sub in [
            &["report"][..],
            &["report", "--growth"],
            &["diff", path.as_str()],
        ] {
            bin()
                .args(sub)
                .arg(path)
                .assert()
                .code(2)
                .stdout("")
                .stderr(predicate::str::starts_with(format!("cudaleak: {path}")))
                .stderr(predicate::str::contains(msg))
                .stderr(predicate::str::contains("panicked").not());
        }
    }
}

#[test]
fn files_over_4_gib_are_refused_before_reading_and_a_big_bad_file_stops_at_the_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse: no disk space, no time.
    let huge = dir.path().join("cudaleak.1.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len((4 << 30) + 1).unwrap();
    drop(f);
    let t = Instant::now();
    report(&[huge.to_str().unwrap()])
        .code(2)
        .stderr(format!(
            "cudaleak: {}: the file is 4294967297 bytes; cudaleak reads dumps of at most 4294967296 bytes (4 GiB)\n",
            huge.display()
        ));
    // A 1 GB file of zeros: the first byte is already wrong.
    let gig = dir.path().join("zeros.json");
    let f = std::fs::File::create(&gig).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let p = gig.to_str().unwrap();
    report(&[p])
        .code(2)
        .stderr(predicate::str::starts_with(format!("cudaleak: {p}:1:1: ")));
    // An endless stream of zeros is not even opened for reading.
    report(&["/dev/zero"]).code(2).stderr(
        "cudaleak: /dev/zero: is a character device, not a regular file; cudaleak reads dumps only from regular files\n",
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    bin()
        .args(["diff", dir.path().to_str().unwrap(), &fx("clean.json")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "is a directory, not a regular file",
        ));
}

#[test]
fn a_100_mb_function_name_is_cut_in_every_format_and_the_report_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    // 100 MB once (text; a debug build parses it in seconds), 1 MiB for every format.
    for (mib, formats) in [
        (100, &["text"][..]),
        (1, &["text", "json", "markdown", "sarif"]),
    ] {
        let name = "A".repeat(mib << 20);
        let path = edited(dir.path(), &format!("big_name_{mib}.json"), |v| {
            v["stacks"][0]["frames"][2]["function"] = name.clone().into();
        });
        drop(name);
        for format in formats {
            let out = report(&["--format", format, &path]).code(23);
            let stdout = &out.get_output().stdout;
            assert!(stdout.len() < 1 << 20, "{format}: {} bytes", stdout.len());
            let text = String::from_utf8_lossy(stdout);
            assert!(
                text.contains(&format!("{} more bytes", (mib << 20) - (64 << 10))),
                "{format}"
            );
        }
    }
}

#[test]
fn program_names_cannot_inject_terminal_escapes_markdown_or_html() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "evil\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m|`*_<img src=x>[a](b)\u{202e}";
    let path = edited(dir.path(), "evil.json", |v| {
        v["stacks"][0]["frames"][2]["function"] = evil.into();
        v["stacks"][0]["frames"][2]["file"] = "src/\u{1b}[31mred.cu".into();
        v["process"]["argv"] = serde_json::json!(["./app", "\u{1b}[8mhidden"]);
        for r in v["live"].as_array_mut().unwrap() {
            r["api"] = "cudaMalloc\u{1b}[1A".into();
        }
    });
    for color in ["never", "always"] {
        let out = report(&["--color", color, &path]).code(23);
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(
            text.contains("evil\\x1b]0;owned\\x07\\x1b[2J\\x9b31m|`*_<img src=x>[a](b)\\u{202e}"),
            "{text}"
        );
        assert!(text.contains("\\x1b[8mhidden"), "{text}");
        assert!(text.contains("via cudaMalloc\\x1b[1A"), "{text}");
        // The only escape sequences left are cudaleak's own colours: ESC [ digits ; m.
        for (i, _) in text.match_indices('\u{1b}') {
            let rest = &text[i + 1..];
            let end = rest.find('m').unwrap();
            assert!(
                rest.starts_with('[')
                    && rest[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
                "foreign escape at {i}: {:?}",
                &rest[..end.min(20)]
            );
        }
        assert!(!text.contains('\u{9b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'));
    }
    let out = report(&["--format", "markdown", &path]).code(23);
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(md.contains("evil\\\\x1b\\]0;owned"), "{md}");
    assert!(
        md.contains("\\|\\`\\*\\_&lt;img src=x&gt;\\[a\\](b)"),
        "{md}"
    );
    assert!(!md.contains("<img") && !md.contains('\u{1b}'));
    let out = report(&["--format", "sarif", &path]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let r = &v["runs"][0]["results"][0];
    let message = r["message"]["text"].as_str().unwrap();
    assert!(message.contains("via cudaMalloc\\x1b[1A"), "{message}");
    let fqn = r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]
        .as_str()
        .unwrap();
    assert!(fqn.starts_with("evil\\x1b]0;owned"), "{fqn}");
    // Every string in the SARIF is free of control characters.
    fn walk(v: &serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}")
            }
            serde_json::Value::Array(a) => a.iter().for_each(walk),
            serde_json::Value::Object(o) => o.values().for_each(walk),
            _ => {}
        }
    }
    walk(&v["runs"][0]["results"]);
}

// ---------------------------------------------------------------------------------------------
// issue 9: inputs that are not regular files, and dead standard streams

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

#[test]
fn a_fifo_planted_as_a_dump_is_skipped_in_a_directory_and_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("leak_loop.json"),
        dir.path().join("cudaleak.1001.json"),
    )
    .unwrap();
    let fifo = dir.path().join("cudaleak.6666.json");
    mkfifo(&fifo);
    // Before: `report DIR` blocked forever opening the FIFO.
    report(&[dir.path().to_str().unwrap()])
        .code(23)
        .stdout(predicate::str::contains("pid 1001"))
        .stderr(format!(
            "cudaleak: skipping {}: it is a FIFO (named pipe), not a regular file\n",
            fifo.display()
        ));
    bin()
        .args(["report", fifo.to_str().unwrap()])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(format!(
            "cudaleak: {}: is a FIFO (named pipe), not a regular file; cudaleak reads dumps only from regular files\n",
            fifo.display()
        ));
    bin()
        .args(["diff", fifo.to_str().unwrap(), &fx("leak_loop.json")])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a FIFO (named pipe)"));
    let supp = dir.path().join("supp.txt");
    mkfifo(&supp);
    bin()
        .args(["report", "--suppressions", supp.to_str().unwrap()])
        .arg(fx("leak_loop.json"))
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a FIFO (named pipe)"));
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

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn dead_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Which standard streams `dead` connects to a dead pipe.
#[derive(Clone, Copy, PartialEq)]
enum Dead {
    Stdout,
    Stderr,
    Both,
}

/// The binary with `args`, nothing on stdin, the `dead` streams connected to a dead pipe and
/// the others captured: (exit code, stdout, stderr).
fn dead(d: Dead, args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_cudaleak"));
    c.env_remove("CUDALEAK_SHIM")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if d != Dead::Stderr {
        c.stdout(dead_pipe());
    }
    if d != Dead::Stdout {
        c.stderr(dead_pipe());
    }
    let out = c.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(Into::into).collect()
}

fn dead_code(d: Dead, args: &[std::ffi::OsString]) -> Option<i32> {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    dead(d, &args).0
}

#[test]
fn a_dead_stderr_never_panics_and_keeps_the_exit_status() {
    // Before: 101, a panic in eprintln!.
    let e = Dead::Stderr;
    assert_eq!(dead_code(e, &os(&["report", "/nonexistent.json"])), Some(2));
    let leaky = fx("leak_loop.json");
    assert_eq!(dead_code(e, &os(&["report", "--growth", &leaky])), Some(2));
    let args = os(&["report", &leaky]);
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (code, stdout, _) = dead(e, &args);
    assert_eq!(code, Some(23));
    assert!(stdout.contains("SUMMARY: 40.00 KiB leaked"), "{stdout}");
    // Usage errors print through clap.
    assert_eq!(dead_code(e, &os(&["report", "--no-such-flag"])), Some(2));
}

#[test]
fn run_with_a_dead_stderr_still_runs_the_program_and_returns_its_status() {
    let env = run_env();
    // The stand-in shim must really preload: ld.so's warning about an empty file would go to the
    // dead stderr and SIGPIPE would kill the program before it starts. Any harmless library does.
    let shim = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .expect("no libm.so.6 to stand in for the shim");
    let env = RunEnv { shim, ..env };
    let marker = env.dir.path().join("ran");
    let run = |d: Dead, tail: &str| {
        let script = format!(
            "touch '{}'; {}; {tail}",
            marker.display(),
            copy_dump("leak_loop.json")
        );
        let _ = std::fs::remove_file(&marker);
        let mut args = os(&["run", "--shim"]);
        args.extend([
            env.shim.clone().into(),
            "--out".into(),
            env.out.clone().into(),
        ]);
        args.extend(os(&["--", "sh", "-c", &script]));
        let code = dead_code(d, &args);
        assert!(marker.exists(), "the program did not run");
        code
    };
    // Before: a panic at "dumps of this run go to …", and the program never ran.
    assert_eq!(run(Dead::Stderr, "exit 0"), Some(23));
    assert_eq!(run(Dead::Stderr, "exit 7"), Some(7));
    // Both streams dead: the report is dropped quietly, the gate still decides.
    assert_eq!(run(Dead::Both, "exit 0"), Some(23));
    assert_eq!(run(Dead::Both, "exit 5"), Some(5));
    // A program that cannot be started: 127, with nothing said.
    let mut args = os(&["run", "--shim"]);
    args.extend([
        env.shim.clone().into(),
        "--out".into(),
        env.out.clone().into(),
    ]);
    args.extend(os(&["--", "/nonexistent/program"]));
    assert_eq!(dead_code(Dead::Stderr, &args), Some(127));
}

#[test]
fn a_dead_stdout_ends_the_report_quietly_with_the_gate_status() {
    for (dump, code) in [("leak_loop.json", 23), ("clean.json", 0)] {
        for format in ["text", "json", "markdown", "sarif"] {
            let args = os(&["report", "--format", format, &fx(dump)]);
            let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            let (got, _, stderr) = dead(Dead::Stdout, &args);
            assert_eq!((got, stderr.as_str()), (Some(code), ""), "{format} {dump}");
        }
    }
    let leaky = fx("leak_loop.json");
    assert_eq!(dead_code(Dead::Both, &os(&["report", &leaky])), Some(23));
    let growth = os(&["report", "--growth", &fx("growth")]);
    assert_eq!(dead_code(Dead::Both, &growth), Some(23));
    let diff = os(&["diff", "--fail-on-growth", &leaky, &leaky]);
    assert_eq!(dead_code(Dead::Stdout, &diff), Some(0));
}

#[test]
fn html_report_is_one_file_with_the_timeline_of_a_series_and_the_gate_s_status() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let out = page.display().to_string();
    report(&["--format", "html", "-o", &out, &fx("growth")])
        .code(23)
        .stdout("");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg class=\"timeline\"").count(), 1);
    assert!(html.contains("Gate failed (leaks): exit status 23."));
    // --growth: the same page with the growth gate's verdict (tolerated: exit 0).
    report(&["--growth", "--format", "html", "-o", &out, &fx("growth")]).code(23);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Gate failed (growth): exit status 23."));
    assert!(
        html.contains("<section id=\"leaks\">"),
        "with the exit report"
    );
    report(&[
        "--growth",
        "--format",
        "html",
        "--max-leaked-bytes",
        "1M",
        "-o",
        &out,
        &fx("growth"),
    ])
    .code(0);
    // A single dump: no timeline, no error.
    report(&["--format", "html", "-o", &out, &fx("leak_loop.json")]).code(23);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<svg class=\"timeline\""));
    assert_eq!(html.matches("<svg class=\"flame\"").count(), 1);
}

#[test]
fn html_and_folded_refuse_a_broken_snapshot_with_its_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture("growth")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let bad = dir.path().join("cudaleak.4001.snapshot-11.json");
    std::fs::copy(fixture("truncated.json"), &bad).unwrap();
    let page = dir.path().join("report.html");
    let d = dir.path().display().to_string();
    // The plain report reads the final dumps only; the HTML page also reads the series.
    report(&[&d]).code(23);
    report(&["--format", "html", "-o", &page.display().to_string(), &d])
        .code(2)
        .stderr(predicate::str::contains(format!(
            "cudaleak: {}:145:15: the file ends early, inside an object: it is truncated",
            bad.display()
        )));
    assert!(!page.exists(), "no half-written page");
    report(&["--growth", "--format", "folded", &d])
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "{}:145:15",
            bad.display()
        )));
}

#[test]
fn folded_lines_are_stack_space_bytes_for_report_growth_and_diff() {
    let line = "main at cuda-samples/leak_error_path.cu:40 (leak_error_path);\
                process_data(float*) at cuda-samples/leak_error_path.cu:18 (leak_error_path);\
                cudaMalloc 1048576\n";
    report(&["--format", "folded", &fx("error_path.json")])
        .code(23)
        .stdout(predicate::str::contains(line));
    report(&["--growth", "--format", "folded", &fx("growth")])
        .code(23)
        .stdout(predicate::str::starts_with(
            "main at cuda-samples/leak_per_iteration.cu:45 (leak_per_iteration);\
             load_model() at cuda-samples/leak_per_iteration.cu:12 (leak_per_iteration);\
             cudaMalloc 1048576\n",
        ));
    bin()
        .args(["diff", "--format", "folded"])
        .arg(fixture("snapshots/cudaleak.3001.snapshot-1.json"))
        .arg(fixture("snapshots/cudaleak.3001.snapshot-2.json"))
        .assert()
        .code(0)
        .stdout(predicate::str::is_match(r"^([^\n]+ [0-9]+\n)+$").unwrap());
    bin()
        .args(["diff", "--format", "html"])
        .arg(fixture("snapshots/cudaleak.3001.snapshot-1.json"))
        .arg(fixture("snapshots/cudaleak.3001.snapshot-2.json"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains("<svg class=\"flame\""));
}

#[test]
fn html_page_of_an_out_directory_names_its_latest_run_once() {
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run-1796220252-9281");
    std::fs::create_dir(&run).unwrap();
    for e in std::fs::read_dir(fixture("growth")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), run.join(e.file_name())).unwrap();
    }
    let page = out.path().join("report.html").display().to_string();
    let d = out.path().display().to_string();
    for growth in [false, true] {
        let mut args = vec!["--format", "html", "-o", &page, &d];
        if growth {
            args.insert(0, "--growth");
        }
        let assert = report(&args).code(23);
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        assert_eq!(
            stderr
                .matches("holds no dumps; reading its latest run")
                .count(),
            1,
            "--growth {growth}: {stderr}"
        );
    }
}

// issue 25: -o -, help, conflicting options, messages, the growth verdict, the null device

#[test]
fn dash_o_means_standard_output_for_every_command_that_takes_o() {
    let cwd = tempfile::tempdir().unwrap();
    let leak = fx("leak_loop.json");
    bin()
        .current_dir(cwd.path())
        .args(["report", "-o", "-", &leak])
        .assert()
        .code(23)
        .stdout(predicate::str::ends_with(
            "SUMMARY: 40.00 KiB leaked in 10 allocations from 1 callsite (1 process)\n",
        ));
    let old = fx("snapshots/cudaleak.3001.snapshot-1.json");
    let new = fx("snapshots/cudaleak.3001.snapshot-2.json");
    bin()
        .current_dir(cwd.path())
        .args(["diff", "-o", "-", &old, &new])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Grew 1 of 3: +16.00 KiB"));
    bin()
        .current_dir(cwd.path())
        .args(["symbolize", "-o", "-", &leak])
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("{"));
    bin()
        .current_dir(cwd.path())
        .args(["symbolize", "-o", "-", &fx("snapshots")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "-o - writes one dump to standard output, and 2 dumps were given",
        ));
    assert!(
        std::fs::read_dir(cwd.path()).unwrap().next().is_none(),
        "no file named - (nor anything else) was written"
    );
}

#[test]
fn report_help_shows_path_as_required() {
    bin()
        .args(["report", "--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "Usage: cudaleak report [OPTIONS] <PATH>...",
        ))
        .stdout(predicate::str::contains("[PATH]").not());
    bin()
        .args(["report"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the following required arguments were not provided:\n  <PATH>...",
        ));
}

#[test]
fn conflicting_options_are_refused_with_exit_2_naming_both() {
    let leak = fx("leak_loop.json");
    for format in ["json", "html", "markdown"] {
        report(&["--gen-suppressions", "--format", format, &leak])
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "the argument '--gen-suppressions' cannot be used with '--format {format}'"
            )));
    }
    report(&["--gen-suppressions", "--format", "text", &leak]).code(23);
    report(&["--gen-suppressions", "--stats", &leak])
        .code(2)
        .stderr(predicate::str::contains(
            "the argument '--gen-suppressions' cannot be used with '--stats'",
        ));
    report(&["--list-caches", "--format", "json"])
        .code(2)
        .stdout("")
        // Worded and laid out as clap's own conflicts (`--growth --gen-suppressions`).
        .stderr(predicate::str::starts_with(
            "error: the argument '--list-caches' cannot be used with '--format json'",
        ));
    report(&["--list-caches", &leak])
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "the argument '--list-caches' cannot be used with '<PATH>...'",
        ));
    // `run` shares the report options, and refuses before running anything.
    let env = run_env();
    env.cmd(&["--gen-suppressions", "--format", "json"], "touch ran")
        .current_dir(env.dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the argument '--gen-suppressions' cannot be used with '--format json'",
        ));
    assert!(!env.dir.path().join("ran").exists());
}

#[test]
fn a_count_of_zero_says_the_flag_takes_1_or_more() {
    let leak = fx("leak_loop.json");
    for flag in ["--top", "--frames"] {
        report(&[flag, "0", &leak])
            .code(2)
            .stderr(predicate::str::contains(format!("{flag} takes 1 or more")))
            .stderr(predicate::str::contains("18446744073709551615").not());
    }
}

#[test]
fn an_unwritable_output_names_the_path_given_not_the_temporary_file() {
    report(&["-o", "/nonexistent/x", &fx("leak_loop.json")])
        .code(2)
        .stderr("cudaleak: /nonexistent/x: cannot create: No such file or directory\n");
}

#[test]
fn a_suppression_fifo_is_called_a_suppression_file_not_a_dump() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("supp");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    report(&[
        "--suppressions",
        fifo.to_str().unwrap(),
        &fx("leak_loop.json"),
    ])
    .code(2)
    .stderr(predicate::str::contains(
        "is a FIFO (named pipe), not a regular file; a suppression file must be a regular file",
    ))
    .stderr(predicate::str::contains("dumps").not());
}

#[test]
fn a_version_field_that_is_a_string_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("leak_loop.json")).unwrap();
    let bad = dir.path().join("v.json");
    std::fs::write(
        &bad,
        text.replacen("\"cudaleak_dump\": 1,", "\"cudaleak_dump\": \"1\",", 1),
    )
    .unwrap();
    report(&[bad.to_str().unwrap()])
        .code(2)
        .stderr(predicate::str::contains(
            "v.json: the \"cudaleak_dump\" version field is \"1\", not a number",
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
