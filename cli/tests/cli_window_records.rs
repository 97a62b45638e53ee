//! `report --since SEQ` on a window's dump that carries a framework's own record
//! (`frameworks.records`, what `cudaleak.track()` hands the shim): each record group is a leak
//! group of the window in every format, under the gate, the filters and the suppressions; a
//! record's note is shown; without `--since` the records change nothing. Fixtures:
//! `fixtures/gen_window.py`.

mod common;

use predicates::prelude::*;

use common::{fx, report};

/// The dump `cudaleak_dump()` wrote at the window's end; the window starts at mark 20.
const WINDOW: &str = "window/cudaleak.6006.json";
const MARK: &str = "20";
const KEPT: &str = "    note: kept in PyTorch's caching allocator, out of the driver's sight; \
                    PyTorch's own record named these blocks\n";

fn json(args: &[&str], dump: &str) -> serde_json::Value {
    let out = report(&[&["--format", "json"], args, &[&fx(dump)]].concat())
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

fn window(args: &[&str]) -> assert_cmd::assert::Assert {
    report(&[&["--since", MARK], args, &[&fx(WINDOW)]].concat())
}

#[test]
fn record_groups_are_leaks_of_the_window_in_text() {
    window(&["--color", "never"])
        .code(23)
        .stdout(predicate::str::contains(format!(
            "Leak 1 of 3: 1.50 MiB (1572864 B) in 3 allocations via torch (device 0)\n{KEPT}"
        )))
        .stdout(predicate::str::contains(
            "    #0 train_step at /home/dev/train.py:17\n    #1 <module> at /home/dev/train.py:33\n",
        ))
        .stdout(predicate::str::contains(
            "Leak 2 of 3: 20.00 KiB (20480 B) in 5 allocations via cudaMalloc (device 0)\n",
        ))
        .stdout(predicate::str::contains(format!(
            "Leak 3 of 3: 512 B in 1 allocation via torch (device 0)\n{KEPT}    #0 log_loss at /home/dev/train.py:24\n"
        )))
        .stdout(predicate::str::ends_with(
            "Gate failed (leaks): exit status 23.\n\
             SUMMARY: 1.52 MiB leaked in 9 allocations from 3 callsites (1 process)\n",
        ));
}

#[test]
fn record_groups_in_json_carry_their_framework() {
    let doc = json(&["--since", MARK], WINDOW);
    let leaks = doc["leaks"].as_array().unwrap();
    let rows: Vec<(&str, Option<&str>, u64, u64)> = leaks
        .iter()
        .map(|g| {
            (
                g["api"].as_str().unwrap(),
                g["framework"].as_str(),
                g["bytes"].as_u64().unwrap(),
                g["allocations"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("torch", Some("torch"), 1572864, 3),
            ("cudaMalloc", None, 20480, 5),
            ("torch", Some("torch"), 512, 1),
        ]
    );
    let first = &leaks[0];
    assert_eq!(first["device"], 0);
    assert_eq!(first["kind"], "device");
    // PyTorch's own frame folded, as in any stack with Python frames.
    assert_eq!(first["frames"][0]["modules"][0], "torch");
    assert_eq!(first["frames"][1]["function"], "train_step");
    assert_eq!(first["frames"][1]["line"], 17);
    assert_eq!(
        first["note"],
        "kept in PyTorch's caching allocator, out of the driver's sight; PyTorch's own record \
         named these blocks"
    );
    assert!(leaks[1].get("framework").is_none() && leaks[1].get("note").is_none());
    assert_eq!(doc["summary"]["leaked_bytes"], 1572864 + 20480 + 512);
    assert_eq!(doc["summary"]["leaked_allocations"], 9);
    assert_eq!(doc["summary"]["callsites"], 3);
    assert_eq!(doc["processes"][0]["leak_groups"], 3);
    assert_eq!(doc["gate"]["exit_code"], 23);
    assert!(doc["processes"][0].get("record_notes").is_none());
}

#[test]
fn record_groups_fail_the_gate_as_leaks_do() {
    // Only the records: the driver's leak of the window suppressed.
    let supp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(supp.path(), "leak:^ext_alloc\n").unwrap();
    let supp = supp.path().to_str().unwrap().to_string();
    window(&["--suppressions", &supp])
        .code(23)
        .stdout(predicate::str::contains(
            "SUMMARY: 1.50 MiB leaked in 4 allocations from 2 callsites",
        ));
    window(&["--suppressions", &supp, "--exit-code", "5"]).code(5);
    window(&["--suppressions", &supp, "--exit-code", "0"]).code(0);
    window(&["--suppressions", &supp, "--fail-on", "errors"]).code(0);
    window(&["--suppressions", &supp, "--fail-on", "leaks"]).code(23);
    window(&["--suppressions", &supp, "--fail-on", "strict"]).code(23);
    window(&["--suppressions", &supp, "--max-leaked-bytes", "2M"]).code(0);
    window(&["--suppressions", &supp, "--max-leaked-bytes", "1M"]).code(23);
}

#[test]
fn suppressions_match_a_record_group_s_python_frames() {
    let supp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(supp.path(), "leak:^train_step$\nleak:log_loss\n").unwrap();
    let doc = json(
        &[
            "--since",
            MARK,
            "--suppressions",
            supp.path().to_str().unwrap(),
        ],
        WINDOW,
    );
    let apis: Vec<&str> = doc["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["api"].as_str().unwrap())
        .collect();
    assert_eq!(apis, ["cudaMalloc"]);
    let rules = doc["suppressed"]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["bytes"], 1572864);
    assert_eq!(rules[1]["bytes"], 512);
}

#[test]
fn min_bytes_and_top_apply_to_record_groups() {
    let doc = json(&["--since", MARK, "--min-bytes", "1K"], WINDOW);
    assert_eq!(doc["leaks"].as_array().unwrap().len(), 2);
    assert_eq!(doc["suppressed"]["below_min_bytes"]["bytes"], 512);
    window(&["--top", "1"])
        .code(23)
        .stdout(predicate::str::contains("via torch").count(1))
        .stdout(predicate::str::contains("... 2 more leak groups not shown"))
        .stdout(predicate::str::contains(
            "SUMMARY: 1.52 MiB leaked in 9 allocations from 3 callsites",
        ));
}

#[test]
fn every_format_shows_record_groups() {
    window(&["--format", "markdown"])
        .code(23)
        .stdout(predicate::str::contains("| 1 | 1.50 MiB | 3 | torch |"))
        .stdout(predicate::str::contains(
            "Note: kept in PyTorch's caching allocator, out of the driver's sight; PyTorch's own \
             record named these blocks.",
        ));
    let sarif = report(&["--since", MARK, "--format", "sarif", &fx(WINDOW)])
        .code(23)
        .get_output()
        .stdout
        .clone();
    let sarif: serde_json::Value = serde_json::from_slice(&sarif).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let torch: Vec<&serde_json::Value> = results
        .iter()
        .filter(|r| r["properties"]["framework"] == "torch")
        .collect();
    assert_eq!(torch.len(), 2, "{results:#?}");
    assert!(torch[0]["message"]["text"]
        .as_str()
        .unwrap()
        .ends_with("; kept in PyTorch's caching allocator, out of the driver's sight; PyTorch's own record named these blocks"));
    window(&["--format", "html"])
        .code(23)
        .stdout(predicate::str::contains(
            "<code>torch</code> (device 0) <span class=\"note\">(kept in PyTorch's caching \
             allocator, out of the driver's sight; PyTorch's own record named these blocks)</span>",
        ));
    window(&["--format", "folded"])
        .code(23)
        .stdout(predicate::str::contains(
            "<module> at /home/dev/train.py:33;log_loss at /home/dev/train.py:24;torch 512\n",
        ));
}

#[test]
fn a_record_s_note_is_shown() {
    let note = "torch.cuda.memory._snapshot() failed: RuntimeError: record not enabled";
    report(&["--since", MARK, &fx("window_note.json")])
        .code(23)
        .stdout(predicate::str::contains(format!(
            "(requested dump, still running) ==\nnote: PyTorch's own record: {note}\n"
        )))
        .stdout(predicate::str::contains("via torch").not());
    let doc = json(&["--since", MARK], "window_note.json");
    assert_eq!(
        doc["processes"][0]["record_notes"],
        serde_json::json!([{
            "framework": "torch",
            "note": note,
            "text": format!("PyTorch's own record: {note}"),
        }])
    );
    report(&[
        "--since",
        MARK,
        "--format",
        "markdown",
        &fx("window_note.json"),
    ])
    .stdout(predicate::str::contains(
        "> **Note:** PyTorch's own record: torch.cuda.memory.\\_snapshot() failed: \
         RuntimeError: record not enabled.",
    ));
    // Not a window: the record is the growth verdict's, and not shown.
    report(&[&fx("window_note.json")]).stdout(predicate::str::contains("own record").not());
}

#[test]
fn without_since_the_records_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("cudaleak.6006.json");
    let mut d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(common::fixture(WINDOW)).unwrap()).unwrap();
    d.as_object_mut().unwrap().remove("frameworks");
    std::fs::write(&bare, d.to_string()).unwrap();
    for format in ["text", "markdown", "sarif", "html", "json"] {
        let out = |path: &str| {
            report(&["--format", format, path])
                .code(23)
                .get_output()
                .stdout
                .clone()
        };
        let with = String::from_utf8(out(&fx(WINDOW))).unwrap();
        let without = String::from_utf8(out(bare.to_str().unwrap())).unwrap();
        let with = with.replace(&fx(WINDOW), "DUMP");
        let without = without.replace(bare.to_str().unwrap(), "DUMP");
        assert_eq!(with, without, "--format {format}");
        assert!(!with.contains("torch</code>") && !with.contains("via torch"));
    }
    // With --since the same dump shows them.
    window(&[]).stdout(predicate::str::contains("via torch"));
}

/// The window's series: three snapshots, then the requested dump.
const SERIES: &str = "window";

fn growth_json(args: &[&str]) -> serde_json::Value {
    let out = report(&[&["--growth", "--format", "json"], args, &[&fx(SERIES)]].concat())
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

/// (first function of the program's own, suspect) per row.
fn rows(doc: &serde_json::Value) -> Vec<(String, bool)> {
    doc["processes"][0]["callsites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let f = r["frames"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|f| f["function"].as_str())
                .unwrap_or("?");
            (f.to_string(), r["suspect"].as_bool().unwrap())
        })
        .collect()
}

#[test]
fn growth_since_never_blames_blocks_made_before_the_mark() {
    // Without --since, warm_up's blocks (all made before the window) grew too.
    let all = growth_json(&[]);
    assert_eq!(
        rows(&all),
        [("step".to_string(), true), ("warm_up".to_string(), true)]
    );
    let window = growth_json(&["--since", MARK]);
    assert_eq!(rows(&window), [("step".to_string(), true)]);
    let step = &window["processes"][0]["callsites"][0];
    let live: Vec<u64> = step["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["allocations"].as_u64().unwrap())
        .collect();
    assert_eq!(live, [0, 0, 2, 5], "only the blocks made after the mark");
    assert_eq!(window["suspect_growth_bytes"], 5 * 4096);
    assert_eq!(window["gate"]["exit_code"], 23);

    report(&["--growth", "--since", MARK, &fx(SERIES)])
        .code(23)
        .stdout(predicate::str::contains("warm_up").not())
        .stdout(predicate::str::contains(
            "SUMMARY: 1 growth suspect (+20.00 KiB) in 1 process (4 dumps)",
        ));
    report(&["--growth", "--since", MARK, "--exit-code", "7", &fx(SERIES)]).code(7);
    let supp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(supp.path(), "leak:^ext_alloc\n").unwrap();
    report(&[
        "--growth",
        "--since",
        MARK,
        "--suppressions",
        supp.path().to_str().unwrap(),
        &fx(SERIES),
    ])
    .code(0);
    // A mark after every block: nothing of the window grew.
    report(&["--growth", "--since", "100", &fx(SERIES)]).code(0);
}

#[test]
fn a_requested_dump_is_the_last_of_its_series() {
    let doc = growth_json(&["--since", MARK]);
    let dumps = doc["processes"][0]["dumps"].as_array().unwrap();
    let order: Vec<(String, Option<u64>)> = dumps
        .iter()
        .map(|d| {
            let source = d["source"].as_str().unwrap();
            let name = source.rsplit('/').next().unwrap().to_string();
            (name, d["snapshot"].as_u64())
        })
        .collect();
    assert_eq!(
        order,
        [
            ("cudaleak.6006.snapshot-1.json".to_string(), Some(1)),
            ("cudaleak.6006.snapshot-2.json".to_string(), Some(2)),
            ("cudaleak.6006.snapshot-3.json".to_string(), Some(3)),
            ("cudaleak.6006.json".to_string(), None),
        ]
    );
    assert!(dumps.iter().all(|d| d["end"] == "snapshot"));
    report(&["--growth", &fx(SERIES)]).stdout(predicate::str::contains(
        "4 dumps over 3.0 s (snapshot 1, snapshot 2, snapshot 3, requested dump); live 2.01 MiB in 3 \
         allocations → 2.05 MiB in 14 allocations\n",
    ));
}
