//! End-to-end tests of suppression files and cache rules through the binary: `leak:` lines and
//! their counts, `--list-caches`, `--gen-suppressions` (whose output suppresses what it was
//! made from), and a bad or unreadable suppression file refused with its name and line.

mod common;

use predicates::prelude::*;

use common::{bin, fx, report};

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

/// Issue 44: the comments named `/home/…/prog.cu:18` where the report says `prog.cu:18`.
#[test]
fn gen_suppressions_comments_show_files_as_the_report_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let source = root.join("src/prog.cu");
    let dump = std::fs::read_to_string(common::fixture("error_path.json"))
        .unwrap()
        .replace(
            "\"cuda-samples/leak_error_path.cu\"",
            &format!("\"{}\"", source.display()),
        );
    assert!(dump.contains(&source.display().to_string()));
    let path = root.join("cudaleak.4711.json");
    std::fs::write(&path, dump).unwrap();
    let report_text = bin()
        .current_dir(&root)
        .args(["report", "cudaleak.4711.json"])
        .assert()
        .code(23)
        .get_output()
        .stdout
        .clone();
    let report_text = String::from_utf8(report_text).unwrap();
    assert!(report_text.contains(" at src/prog.cu:18 "), "{report_text}");
    let out = bin()
        .current_dir(&root)
        .args(["report", "--gen-suppressions", "cudaleak.4711.json"])
        .assert()
        .code(23)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("at process_data(float*) at src/prog.cu:18 (leak_error_path)\n"),
        "{text}"
    );
    assert!(!text.contains(&root.display().to_string()), "{text}");
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
