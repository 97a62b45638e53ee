//! End-to-end tests of `cudaleak report` on single dumps and directories: the exit report's
//! lines, every exit-code rule of its gate (leaks, bad frees, caches, `--min-bytes`,
//! `--max-leaked-bytes`), one section per process, and each format read back.

mod common;

use predicates::prelude::*;

use common::{bin, fixture, fx, report};

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

/// Frees of addresses the shim never saw are noted, but not for a process the shim was attached
/// to (by `cudaleak attach`, or in process by the Python API): it knows only what came after,
/// and frees of older blocks are expected there (every notebook cell would carry the note).
#[test]
fn untracked_frees_are_noted_except_in_an_attached_process() {
    let mut dump: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("leak_loop.json")).unwrap()).unwrap();
    dump["summary"]["untracked_frees"] = 3.into();
    let dir = tempfile::tempdir().unwrap();
    let preloaded = dir.path().join("preloaded.json");
    std::fs::write(&preloaded, dump.to_string()).unwrap();
    dump["cudaleak_dump"] = 5.into();
    dump["shim"] = serde_json::json!({
        "version": "0.1.0",
        "stack_walks": 10,
        "stack_reuses": 0,
        "attach": {"route": "pointers", "unix_ms": 1, "import_slots": 2, "table_slots": 3}
    });
    let attached = dir.path().join("attached.json");
    std::fs::write(&attached, dump.to_string()).unwrap();
    let note = "note: 3 frees of addresses the shim never saw allocated";
    report(&[preloaded.to_str().unwrap()])
        .code(23)
        .stdout(predicate::str::contains(note));
    report(&[attached.to_str().unwrap()])
        .code(23)
        .stdout(predicate::str::contains("Leak 1 of 1").and(predicate::str::contains(note).not()));
}
