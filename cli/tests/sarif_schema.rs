//! Every SARIF document cudaleak writes — `report` (leaks, bad frees, failed allocations,
//! managed memory, caches, teardown notes, an empty run), `report --growth` and `diff` — is
//! valid against the SARIF 2.1.0 JSON schema, vendored in `tests/sarif/` (no network in CI).

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn sarif(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args(args)
        .args(["--format", "sarif", "--exit-code", "0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sarif_output_is_valid_sarif_2_1_0() {
    let schema_path: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sarif/sarif-schema-2.1.0.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let runs: Vec<(String, serde_json::Value)> = vec![
        (
            "report".into(),
            sarif(&[
                "report",
                &fixture("error_path.json"),
                &fixture("double_free.json"),
                &fixture("unsymbolized.json"),
                &fixture("failed_alloc.json"),
                &fixture("managed.json"),
                &fixture("framework.json"),
                &fixture("python_torch.json"),
            ]),
        ),
        ("clean".into(), sarif(&["report", &fixture("clean.json")])),
        (
            "growth".into(),
            sarif(&["report", "--growth", &fixture("growth")]),
        ),
        (
            "diff".into(),
            sarif(&[
                "diff",
                &fixture("snapshots/cudaleak.3001.snapshot-1.json"),
                &fixture("multi/cudaleak.2002.json"),
            ]),
        ),
    ];
    for (what, doc) in &runs {
        let errors: Vec<String> = validator
            .iter_errors(doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{what}: {errors:#?}");
        assert!(
            !doc["runs"][0]["results"].as_array().unwrap().is_empty() || what == "clean",
            "{what}: no results to check"
        );
    }
    // The schema is not vacuous: a document without `version` is refused.
    let mut broken = runs[0].1.clone();
    broken.as_object_mut().unwrap().remove("version");
    assert!(!validator.is_valid(&broken));
}
