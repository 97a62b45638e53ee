//! Teardown is not an error: calls that fail because the driver is shutting down are marked by
//! the shim (`during_exit` once the program began to exit) and reported by `cudaleak run` as
//! notes, neither failed allocations nor bad frees; the same error before exit began is a real
//! failure.

use cudaleak_format::EventType;
use cudaleak_tests::{cudaleak_run, marker_line, read_dump, Scenario};

/// (type, error, during_exit) of every event, in order.
fn events(d: &cudaleak_format::Dump) -> Vec<(EventType, Option<i64>, bool)> {
    d.events
        .iter()
        .map(|e| (e.kind, e.error, e.during_exit))
        .collect()
}

#[test]
fn the_shim_marks_calls_made_after_exit_began() {
    let run = Scenario::new("teardown").run_shim();
    run.assert_exit(0).assert_stdout("done\n");
    let d = run.dump();
    assert_eq!(
        events(&d),
        [
            (EventType::FailedAllocation, Some(201), false),
            (EventType::FailedAllocation, Some(4), false),
            (EventType::FailedAllocation, Some(201), true),
            (EventType::FailedAllocation, Some(3), true),
            (EventType::InvalidFree, Some(4), true),
        ]
    );
    assert_eq!(
        (d.summary.failed_allocations, d.summary.invalid_frees),
        (4, 1)
    );
    assert!(d.live.is_empty());
}

#[test]
fn teardown_failures_are_notes_and_do_not_fail_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let run = cudaleak_run(
        &["--format", "json", "-o", report.to_str().unwrap()],
        "teardown",
        &[],
        &[],
    );
    // Were the failed cuMemFree_v2 a bad free, the gate would fail with 23.
    run.assert_exit(0);
    assert_eq!(run.dumps().len(), 1);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["bad_frees"], serde_json::json!([]));
    assert_eq!(v["summary"]["bad_frees"], 0);
    assert_eq!(v["summary"]["teardown"], 4);
    // Only the 201 from before exit began is a failed allocation.
    assert_eq!(v["summary"]["failed_allocations"], 1);
    let failed = v["failed_allocations"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["errors"][0]["code"], 201);
    assert_eq!(failed[0]["frames"][1]["function"], "before_exit");
    let notes: Vec<(String, String, i64, u64, u64)> = v["teardown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["type"].as_str().unwrap().to_string(),
                t["api"].as_str().unwrap().to_string(),
                t["errors"][0]["code"].as_i64().unwrap(),
                t["count"].as_u64().unwrap(),
                t["during_exit"].as_u64().unwrap(),
            )
        })
        .collect();
    let alloc = |code, during| {
        (
            "failed_allocation".to_string(),
            "cuMemAlloc_v2".to_string(),
            code,
            1,
            during,
        )
    };
    assert_eq!(
        notes,
        [
            alloc(4, 0),
            alloc(201, 1),
            alloc(3, 1),
            (
                "invalid_free".to_string(),
                "cuMemFree_v2".to_string(),
                4,
                1,
                1
            )
        ]
    );
    let free = &v["teardown"][3]["frames"][0];
    assert_eq!(free["function"], "fail_free");
    assert_eq!(free["line"], marker_line("teardown", "fail_free"));
}

#[test]
fn the_text_report_says_teardown_is_not_an_error() {
    let run = cudaleak_run(&[], "teardown", &[], &[]);
    run.assert_exit(0);
    let out = &run.stdout;
    assert!(
        out.contains("Teardown notes (not errors): 4 calls failed because the CUDA runtime or driver was shutting down:\n"),
        "{out}"
    );
    assert!(
        out.contains("  cuMemFree_v2 returned 4 (CUDA_ERROR_DEINITIALIZED), after exit began, at fail_free at "),
        "{out}"
    );
    assert!(out.contains("\nErrors: 1 failed allocation\n"), "{out}");
    let dumps = run.dumps();
    let d = read_dump(&dumps[0]);
    assert_eq!(d.summary.failed_allocations, 4);
}
