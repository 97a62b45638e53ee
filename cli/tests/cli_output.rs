//! End-to-end tests of where and how the binary writes: `-o FILE` (replaced whole, a FIFO
//! refused unopened, an unwritable path named as given), `-o -`, and colour (`--color`,
//! `NO_COLOR`, `CLICOLOR_FORCE`; only text is ever coloured).

mod common;

use std::os::unix::fs::FileTypeExt;
use std::time::Duration;

use predicates::prelude::*;

use common::{bin, fx, mkfifo, report};

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

/// Issue 44: with `-o FILE` nothing reached the terminal; the verdict and the path now do, in
/// every format, and not when the report is on standard output.
#[test]
fn a_report_written_to_a_file_says_its_verdict_and_path_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["text", "json", "markdown", "sarif", "html", "folded"] {
        let out = dir.path().join(format!("report.{format}"));
        report(&[
            "--format",
            format,
            "-o",
            out.to_str().unwrap(),
            &fx("leak_loop.json"),
        ])
        .code(23)
        .stdout("")
        .stderr(format!(
            "cudaleak: SUMMARY: 40.00 KiB leaked in 10 allocations from 1 callsite (1 process); \
             Gate failed (leaks): exit status 23; report written to {}\n",
            out.display()
        ));
    }
    let out = dir.path().join("growth.txt");
    report(&["--growth", "-o", out.to_str().unwrap(), &fx("growth")])
        .code(23)
        .stderr(predicate::str::ends_with(format!(
            "cudaleak: SUMMARY: 2 growth suspects (+72.00 KiB) in 1 process (6 dumps); Gate \
             failed (growth): exit status 23; report written to {}\n",
            out.display()
        )));
    let out = dir.path().join("clean.txt");
    report(&["-o", out.to_str().unwrap(), &fx("clean.json")])
        .code(0)
        .stderr(predicate::str::contains("(1 process); report written to "));
    report(&["-o", "-", &fx("leak_loop.json")])
        .code(23)
        .stderr(predicate::str::contains("report written").not());
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
fn an_unwritable_output_names_the_path_given_not_the_temporary_file() {
    report(&["-o", "/nonexistent/x", &fx("leak_loop.json")])
        .code(2)
        .stderr("cudaleak: /nonexistent/x: cannot create: No such file or directory\n");
}
