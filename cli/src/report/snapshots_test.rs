//! Snapshot tests: each format rendered in memory from the fixture dumps and pinned with insta
//! (`INSTA_UPDATE=always cargo test -p cudaleak-cli` rewrites the .snap files; review the diff).

use std::path::Path;

use super::reporter;
use crate::analyze::{self, Config, Findings};
use crate::analyze::{Gate, View};
use crate::args::Format;
use crate::suppressions::Rule;

use crate::fixture as dump;

fn view() -> View {
    View::default()
}

fn cfg_with(view: View, rules: Vec<Rule>, min_bytes: u64) -> Config {
    Config {
        view,
        rules,
        caches: crate::caches::builtin().unwrap(),
        min_bytes,
        gate: Gate::default(),
        hide_quiet: false,
    }
}

fn findings(names: &[&str], cfg: &Config) -> Findings {
    let ps = names
        .iter()
        .map(|n| analyze::analyze_process(&dump(n), Path::new(&format!("fixtures/{n}")), cfg))
        .collect();
    analyze::finish(ps, cfg)
}

fn render(format: Format, f: &Findings, view: &View) -> String {
    let mut out = Vec::new();
    reporter(format).report(f, view, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn render_diff(format: Format) -> String {
    let old = dump("snapshots/cudaleak.3001.snapshot-1.json");
    let new = dump("snapshots/cudaleak.3001.snapshot-2.json");
    let d = analyze::diff(
        &old,
        Path::new("old.json"),
        &new,
        Path::new("new.json"),
        &view(),
    );
    let mut out = Vec::new();
    reporter(format).diff(&d, &view(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The `growth/` fixture series, every dump added in file-name order (as a directory gives).
pub(crate) fn growth_findings(cfg: &Config) -> crate::growth::GrowthFindings {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/growth");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut b = crate::growth::Builder::new(cfg);
    for n in &names {
        b.add(
            &dump(&format!("growth/{n}")),
            Path::new(&format!("growth/{n}")),
        );
    }
    b.finish().unwrap()
}

fn render_growth(format: Format) -> String {
    let cfg = cfg_with(view(), vec![], 0);
    let mut out = Vec::new();
    reporter(format)
        .growth(&growth_findings(&cfg), &cfg.view, &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn growth_text_json_markdown_sarif() {
    insta::assert_snapshot!("growth_text", render_growth(Format::Text));
    insta::assert_snapshot!("growth_json", render_growth(Format::Json));
    insta::assert_snapshot!("growth_markdown", render_growth(Format::Markdown));
    insta::assert_snapshot!("growth_sarif", render_growth(Format::Sarif));
}

#[test]
fn text_error_path() {
    let cfg = cfg_with(view(), vec![], 0);
    insta::assert_snapshot!(render(
        Format::Text,
        &findings(&["error_path.json"], &cfg),
        &cfg.view
    ));
}

#[test]
fn text_multi_process_with_stats() {
    let v = View {
        stats: true,
        ..view()
    };
    let cfg = cfg_with(v, vec![], 0);
    let f = findings(
        &["multi/cudaleak.2002.json", "multi/cudaleak.2001.json"],
        &cfg,
    );
    insta::assert_snapshot!(render(Format::Text, &f, &cfg.view));
}

#[test]
fn text_errors_failed_and_managed() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = findings(
        &["double_free.json", "failed_alloc.json", "managed.json"],
        &cfg,
    );
    insta::assert_snapshot!(render(Format::Text, &f, &cfg.view));
}

#[test]
fn text_suppressions_min_bytes_top_and_frames() {
    let v = View {
        top: Some(1),
        frames: Some(1),
        ..view()
    };
    let rules = vec![
        Rule::new("scratch_*", Path::new("ci.supp"), 2),
        Rule::new("unused_rule", Path::new("ci.supp"), 3),
    ];
    let cfg = cfg_with(v, rules, 1024);
    let f = findings(
        &["error_path.json", "leak_loop.json", "unsymbolized.json"],
        &cfg,
    );
    insta::assert_snapshot!(render(Format::Text, &f, &cfg.view));
}

#[test]
fn text_show_internal_clean_and_colour() {
    let v = View {
        show_internal: true,
        color: true,
        ..view()
    };
    let cfg = cfg_with(v, vec![], 0);
    let f = findings(&["leak_loop.json", "clean.json"], &cfg);
    insta::assert_snapshot!(render(Format::Text, &f, &cfg.view));
}

#[test]
fn text_clean_ends_with_a_zero_summary() {
    let cfg = cfg_with(view(), vec![], 0);
    let out = render(Format::Text, &findings(&["clean.json"], &cfg), &cfg.view);
    assert_eq!(
        out.lines().last(),
        Some("SUMMARY: 0 B leaked in 0 allocations from 0 callsites (1 process)")
    );
    assert!(!out.contains('\x1b'));
}

#[test]
fn json_error_path_and_double_free() {
    let cfg = cfg_with(
        view(),
        vec![Rule::new("staging_area", Path::new("ci.supp"), 1)],
        0,
    );
    let f = findings(
        &[
            "error_path.json",
            "double_free.json",
            "failed_alloc.json",
            "managed.json",
        ],
        &cfg,
    );
    insta::assert_snapshot!(render(Format::Json, &f, &cfg.view));
}

#[test]
fn markdown_error_path_managed_and_errors() {
    let v = View {
        stats: true,
        ..view()
    };
    let cfg = cfg_with(
        v,
        vec![Rule::new("scratch_buffers", Path::new("ci.supp"), 1)],
        0,
    );
    let f = findings(
        &[
            "error_path.json",
            "managed.json",
            "double_free.json",
            "failed_alloc.json",
        ],
        &cfg,
    );
    insta::assert_snapshot!(render(Format::Markdown, &f, &cfg.view));
}

#[test]
fn sarif_error_path_and_double_free() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = findings(
        &["error_path.json", "double_free.json", "unsymbolized.json"],
        &cfg,
    );
    insta::assert_snapshot!(render(Format::Sarif, &f, &cfg.view));
}

#[test]
fn diff_text_json_markdown_sarif() {
    insta::assert_snapshot!("diff_text", render_diff(Format::Text));
    insta::assert_snapshot!("diff_json", render_diff(Format::Json));
    insta::assert_snapshot!("diff_markdown", render_diff(Format::Markdown));
    insta::assert_snapshot!("diff_sarif", render_diff(Format::Sarif));
}

/// The structure SARIF 2.1.0 consumers require, checked field by field rather than by snapshot.
#[test]
fn sarif_has_the_required_structure() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = findings(&["error_path.json", "double_free.json", "clean.json"], &cfg);
    let v: serde_json::Value = serde_json::from_str(&render(Format::Sarif, &f, &cfg.view)).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert!(v["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "cudaleak");
    assert!(driver["version"].is_string());
    assert!(driver["informationUri"]
        .as_str()
        .unwrap()
        .starts_with("https://"));
    let rules = driver["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"cudaleak/leak") && ids.contains(&"cudaleak/double-free"));
    let results = runs[0]["results"].as_array().unwrap();
    let leaks: Vec<&serde_json::Value> = results
        .iter()
        .filter(|r| r["ruleId"] == "cudaleak/leak")
        .collect();
    // One result per leak group.
    assert_eq!(leaks.len(), 3);
    for r in results {
        let idx = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx]["id"], r["ruleId"]);
        assert!(r["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(["error", "warning", "note"].contains(&r["level"].as_str().unwrap()));
    }
    // Located at the first user frame's file and line.
    let loc = &leaks[0]["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "cuda-samples/leak_error_path.cu"
    );
    assert_eq!(loc["region"]["startLine"], 18);
    let df = results
        .iter()
        .find(|r| r["ruleId"] == "cudaleak/double-free")
        .unwrap();
    assert_eq!(
        df["locations"][0]["physicalLocation"]["region"]["startLine"],
        20
    );
    assert_eq!(df["stacks"].as_array().unwrap().len(), 2);
}

/// With --show-internal the SARIF location still points at user code, not libcudart.
#[test]
fn sarif_location_skips_internal_frames_when_they_are_shown() {
    let cfg = cfg_with(
        View {
            show_internal: true,
            ..view()
        },
        vec![],
        0,
    );
    let f = findings(&["leak_loop.json"], &cfg);
    let v: serde_json::Value = serde_json::from_str(&render(Format::Sarif, &f, &cfg.view)).unwrap();
    let loc = &v["runs"][0]["results"][0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "cuda-samples/leak_loop.cu");
    assert_eq!(loc["region"]["startLine"], 14);
}

#[test]
fn json_document_has_the_documented_top_level_fields() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = findings(&["error_path.json"], &cfg);
    let v: serde_json::Value = serde_json::from_str(&render(Format::Json, &f, &cfg.view)).unwrap();
    for key in [
        "cudaleak_report",
        "tool",
        "processes",
        "leaks",
        "failed_allocations",
        "bad_frees",
        "managed",
        "cached",
        "caches",
        "teardown",
        "quiet_processes",
        "suppressed",
        "summary",
        "gate",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["cudaleak_report"], 1);
    let leak = &v["leaks"][0];
    assert_eq!(leak["bytes"], 1 << 20);
    assert_eq!(leak["allocations"], 1);
    assert_eq!(leak["api"], "cudaMalloc");
    assert_eq!(leak["kind"], "device");
    assert_eq!(leak["process"], 4711);
    let fr = &leak["frames"][0];
    assert_eq!(fr["function"], "process_data(float*)");
    assert_eq!(fr["file"], "cuda-samples/leak_error_path.cu");
    assert_eq!(fr["line"], 18);
    assert_eq!(fr["module"], "/work/cuda-samples/leak_error_path");
    assert_eq!(v["summary"]["leaked_bytes"], (1 << 20) + 40960 + 20480);
    assert_eq!(v["summary"]["callsites"], 3);
    assert_eq!(v["gate"]["exit_code"], 23);
}

#[test]
fn markdown_escapes_names_from_the_program() {
    let mut d = dump("leak_loop.json");
    d.stacks[0].frames[2].function = Some("evil|<img src=x>`*_".into());
    let cfg = cfg_with(view(), vec![], 0);
    let f = analyze::finish(
        vec![analyze::analyze_process(&d, Path::new("x"), &cfg)],
        &cfg,
    );
    let md = render(Format::Markdown, &f, &cfg.view);
    assert!(md.contains("evil\\|&lt;img src=x&gt;\\`\\*\\_"), "{md}");
    assert!(!md.contains("<img"));
}

/// A PyTorch-like process (caches, a user leak under the caching allocator, teardown notes) and
/// a quiet helper process, as `cudaleak run` shows them.
fn framework_findings(strict: bool) -> (Findings, Config) {
    let mut cfg = cfg_with(view(), vec![], 0);
    cfg.hide_quiet = true;
    cfg.gate.count_cached = strict;
    let f = findings(&["framework.json", "quiet.json"], &cfg);
    (f, cfg)
}

#[test]
fn framework_caches_teardown_and_quiet_in_every_format() {
    let (f, cfg) = framework_findings(false);
    insta::assert_snapshot!("framework_text", render(Format::Text, &f, &cfg.view));
    insta::assert_snapshot!("framework_json", render(Format::Json, &f, &cfg.view));
    insta::assert_snapshot!(
        "framework_markdown",
        render(Format::Markdown, &f, &cfg.view)
    );
    insta::assert_snapshot!("framework_sarif", render(Format::Sarif, &f, &cfg.view));
}

#[test]
fn strict_gate_names_cached_memory_as_a_reason_in_every_format() {
    let (f, cfg) = framework_findings(true);
    let text = render(Format::Text, &f, &cfg.view);
    assert!(
        text.contains("Gate failed (leaks and cached memory (--fail-on strict)): exit status 23."),
        "{text}"
    );
    assert!(text.contains("counted as leaked by the gate (--fail-on strict)"));
    let v: serde_json::Value = serde_json::from_str(&render(Format::Json, &f, &cfg.view)).unwrap();
    assert_eq!(v["gate"]["count_cached"], true);
    assert_eq!(
        v["gate"]["reasons"],
        serde_json::json!(["leaks", "cached memory (--fail-on strict)"])
    );
    let md = render(Format::Markdown, &f, &cfg.view);
    assert!(
        md.contains("❌ gate failed (leaks and cached memory"),
        "{md}"
    );
    let sarif: serde_json::Value =
        serde_json::from_str(&render(Format::Sarif, &f, &cfg.view)).unwrap();
    let levels: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ruleId"] == "cudaleak/cached-memory")
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["error", "error"]);
}

/// A PyTorch leak from Python (dump version 2): the text report starts at the script's line
/// with the dispatch folded into one line; `--native` shows every frame with short C++ names;
/// JSON keeps whole names and lists the folded run; SARIF points at the Python frame.
#[test]
fn python_torch_text_native_json_sarif() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = findings(&["python_torch.json"], &cfg);
    insta::assert_snapshot!("python_text", render(Format::Text, &f, &cfg.view));
    insta::assert_snapshot!("python_json", render(Format::Json, &f, &cfg.view));
    insta::assert_snapshot!("python_markdown", render(Format::Markdown, &f, &cfg.view));
    insta::assert_snapshot!("python_sarif", render(Format::Sarif, &f, &cfg.view));
    let native = cfg_with(
        View {
            native: true,
            ..view()
        },
        vec![],
        0,
    );
    let f = findings(&["python_torch.json"], &native);
    insta::assert_snapshot!("python_text_native", render(Format::Text, &f, &native.view));
}

/// Every SARIF result's (rule, fingerprint) of a rendering.
fn sarif_fingerprints(sarif: &str) -> std::collections::BTreeSet<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(sarif).unwrap();
    v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap().to_string(),
                r["partialFingerprints"]["cudaleakCallsite/v1"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// Regression: double-free, invalid-free, failed-allocation, teardown, growth and diff results
/// hashed the stack as displayed, so `--frames` (and `--native`, `--show-internal`) changed them.
#[test]
fn sarif_fingerprints_do_not_depend_on_any_display_option() {
    let variants = [
        View {
            frames: Some(1),
            ..view()
        },
        View {
            native: true,
            ..view()
        },
        View {
            show_internal: true,
            ..view()
        },
        View {
            color: true,
            source_root: Some("/work/".into()),
            ..view()
        },
        View {
            top: Some(1),
            ..view()
        },
    ];
    let sets: [&[&str]; 4] = [
        &["error_path.json", "double_free.json", "unsymbolized.json"],
        &["framework.json", "quiet.json"],
        &["python_torch.json", "failed_alloc.json"],
        &["managed.json", "leak_loop.json"],
    ];
    let report = |names: &[&str], v: &View| {
        let cfg = cfg_with(v.clone(), vec![], 0);
        sarif_fingerprints(&render(Format::Sarif, &findings(names, &cfg), v))
    };
    let growth = |v: &View| {
        let cfg = cfg_with(v.clone(), vec![], 0);
        let mut out = Vec::new();
        reporter(Format::Sarif)
            .growth(&growth_findings(&cfg), v, &mut out)
            .unwrap();
        sarif_fingerprints(&String::from_utf8(out).unwrap())
    };
    let diff = |v: &View| {
        let old = dump("snapshots/cudaleak.3001.snapshot-1.json");
        let new = dump("snapshots/cudaleak.3001.snapshot-2.json");
        let d = analyze::diff(&old, Path::new("o"), &new, Path::new("n"), v);
        let mut out = Vec::new();
        reporter(Format::Sarif).diff(&d, v, &mut out).unwrap();
        sarif_fingerprints(&String::from_utf8(out).unwrap())
    };
    let mut kinds = std::collections::BTreeSet::new();
    for v in &variants {
        let cut = v.top.is_some();
        let same = |base: std::collections::BTreeSet<(String, String)>,
                    got: std::collections::BTreeSet<(String, String)>,
                    what: &str| {
            if cut {
                assert!(
                    got.is_subset(&base),
                    "{what} {v:?}: {got:?} not in {base:?}"
                );
            } else {
                assert_eq!(got, base, "{what} {v:?}");
            }
        };
        for names in sets {
            let base = report(names, &view());
            kinds.extend(base.iter().map(|(r, _)| r.clone()));
            same(base, report(names, v), &names.join(" "));
        }
        same(growth(&view()), growth(v), "growth");
        same(diff(&view()), diff(v), "diff");
    }
    // Every kind of result was compared.
    for rule in [
        "cudaleak/leak",
        "cudaleak/double-free",
        "cudaleak/invalid-free",
        "cudaleak/failed-allocation",
        "cudaleak/managed-memory",
        "cudaleak/cached-memory",
        "cudaleak/teardown",
    ] {
        assert!(kinds.contains(rule), "no {rule} result in the fixtures");
    }
}
