//! End-to-end tests of dumps of one process compared: `report --growth` (suspects, their rate,
//! its gate, every format, too few dumps) and `diff` (growth first, `--fail-on-growth`).

mod common;

use predicates::prelude::*;

use common::{bin, fixture, fx, report};

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

/// `frameworks/` (dump schema 6): PyTorch's own count is the one suspect, at the line its
/// record names, in every format; its pool's segments are that growth, not a second suspect.
#[test]
fn a_framework_s_own_count_is_the_suspect_in_every_format() {
    let dir = fx("frameworks");
    report(&["--growth", &dir])
        .code(23)
        .stdout(predicate::str::contains(
            "Suspect 1 of 1: +18.00 MiB (36 more blocks) via torch.cuda.memory_allocated() (device 0), ",
        ))
        .stdout(predicate::str::contains(
            "    #0 train_step at /home/dev/train.py:17\n",
        ))
        .stdout(predicate::str::contains(
            "[pytorch-native]: the framework's count above is this growth",
        ))
        .stdout(predicate::str::ends_with(
            "SUMMARY: 1 growth suspect (+18.00 MiB) in 1 process (11 dumps)\n",
        ));
    let out = report(&["--growth", "--format", "json", &dir]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = v["processes"][0]["callsites"].as_array().unwrap();
    assert_eq!(rows[0]["framework"]["name"], "torch");
    assert_eq!(rows[0]["framework"]["device"], 0);
    assert_eq!(rows[0]["framework"]["groups"].as_array().unwrap().len(), 5);
    assert_eq!(rows[0]["held_by"], "torch");
    assert_eq!(rows[1]["framework"], serde_json::Value::Null);
    assert_eq!(
        rows[1]["not_suspect"],
        "the framework's count above is this growth"
    );
    let out = report(&["--growth", "--format", "sarif", &dir]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["properties"]["framework"]["name"], "torch");
    let at = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(at["region"]["startLine"], 17, "{at}");
    report(&["--growth", "--format", "markdown", &dir])
        .code(23)
        .stdout(predicate::str::contains(
            "torch.cuda.memory\\_allocated() (device 0)",
        ));
    report(&["--growth", "--format", "html", &dir])
        .code(23)
        .stdout(predicate::str::contains(
            "via <code>torch.cuda.memory_allocated() (device 0)</code>",
        ));
}
