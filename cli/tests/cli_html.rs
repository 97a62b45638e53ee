//! End-to-end tests of the formats that draw stacks: the HTML page (one file, the timeline of a
//! series, the gate's verdict, no half-written page) and the folded lines of `report`,
//! `report --growth` and `diff`.

mod common;

use predicates::prelude::*;

use common::{bin, fixture, fx, report};

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
