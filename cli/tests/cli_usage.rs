//! End-to-end tests of the command line itself: usage errors exit 2, `--help` and `--version`
//! exit 0, required and conflicting options are named as clap names them.

mod common;

use predicates::prelude::*;

use common::{bin, fx, report, run_env};

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

// Issue 44: a mistyped option before PROGRAM was taken for the program, run, and not found
// (exit 127 with "cannot run --fromat").
#[test]
fn an_unknown_option_before_the_program_is_a_usage_error_not_the_program() {
    let env = run_env();
    for typo in [&["--fromat", "json"][..], &["-x"][..]] {
        env.cmd(typo, "touch ran")
            .current_dir(env.dir.path())
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "unexpected argument '{}'",
                typo[0]
            )))
            .stderr(predicate::str::contains("cannot run").not());
    }
    bin()
        .args(["run", "--fromat", "json", "--", "./prog"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "a similar argument exists: '--format'",
        ));
    assert!(!env.dir.path().join("ran").exists());
    assert!(env.run_dirs().is_empty(), "{:?}", env.run_dirs());
}

#[test]
fn options_after_the_double_dash_or_the_program_are_the_programs() {
    let env = run_env();
    // After `--`, even before PROGRAM's own arguments.
    env.cmd(&[], "echo \"[$0]\"; exit 6")
        .arg("--fromat")
        .assert()
        .code(6)
        .stdout(predicate::str::contains("[--fromat]"));
    // A program named with a leading `-` runs after `--`: not found here, so 127.
    env.run_with(&["--", "-no-such-program"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains("cannot run -no-such-program"));
}

#[test]
fn run_help_documents_126_and_127() {
    bin()
        .args(["run", "--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "126 when PROGRAM cannot be executed, 127 when it is not found",
        ));
}

#[test]
fn attach_usage_errors_show_its_options() {
    bin()
        .args(["attach"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "Usage: cudaleak attach [OPTIONS] <PID>",
        ));
    bin()
        .args(["attach", "--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "Usage: cudaleak attach [OPTIONS] <PID>",
        ));
}

#[test]
fn env_help_wraps_without_runs_of_spaces() {
    bin()
        .args(["env", "--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "LD_PRELOAD with the shim added to the current value, CUDALEAK_OUTPUT with --out, the \
             frameworks' allocator variables",
        ));
}

#[test]
fn every_shim_option_says_where_the_shim_is_looked_for() {
    for sub in ["run", "env", "attach"] {
        bin()
            .args([sub, "--help"])
            .assert()
            .code(0)
            .stdout(predicate::str::contains(
                "The shim library (default: $CUDALEAK_SHIM, else libcudaleak.so next \
                 to the cudaleak binary, else ../lib/libcudaleak.so relative to it)",
            ));
    }
}
