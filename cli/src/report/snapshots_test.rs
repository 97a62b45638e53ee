//! Snapshot tests: each format rendered in memory from the fixture dumps and pinned with insta
//! (`INSTA_UPDATE=always cargo test -p cudaleak-cli` rewrites the .snap files; review the diff).

use std::path::Path;

use super::{reporter, Reporter};
use crate::analyze::{self, Config, Findings};
use crate::analyze::{Gate, View};
use crate::report::Format;
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
        pools_emptied: false,
        framework_records: false,
    }
}

fn findings(names: &[&str], cfg: &Config) -> Findings {
    let ps = names
        .iter()
        .map(|n| analyze::analyze_process(dump(n), Path::new(&format!("fixtures/{n}")), cfg))
        .collect();
    analyze::finish(ps, cfg)
}

fn render(format: Format, f: &Findings, view: &View) -> String {
    render_painted(format, f, view, false)
}

/// [`render`], painted when `color` (only text paints).
fn render_painted(format: Format, f: &Findings, view: &View, color: bool) -> String {
    let mut out = Vec::new();
    reporter(format, color).report(f, view, &mut out).unwrap();
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
    reporter(format, false).diff(&d, &view(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The `growth/` fixture series, every dump added in file-name order (as a directory gives).
pub(crate) fn growth_findings(cfg: &Config) -> crate::growth::GrowthFindings {
    series_of("growth", cfg)
}

/// The series of the fixture folder `dir`, every dump added in file-name order.
fn series_of(dir: &str, cfg: &Config) -> crate::growth::GrowthFindings {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut b = crate::growth::Builder::new(cfg);
    for n in &names {
        let name = format!("{dir}/{n}");
        b.add(&dump(&name), Path::new(&name));
    }
    b.finish().unwrap()
}

fn render_growth(format: Format) -> String {
    render_series("growth", format)
}

fn render_series(dir: &str, format: Format) -> String {
    let cfg = cfg_with(view(), vec![], 0);
    let mut out = Vec::new();
    reporter(format, false)
        .growth(&series_of(dir, &cfg), &cfg.view, &mut out)
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

/// `frameworks/`: a PyTorch script that keeps tensors every step with the caching allocator on
/// (schema 6). PyTorch's own count is the suspect, at the line its record names; the pool's
/// segments that grew with it are that growth, not a second suspect.
#[test]
fn growth_of_a_framework_count_text_and_json() {
    insta::assert_snapshot!(
        "growth_framework_text",
        render_series("frameworks", Format::Text)
    );
    insta::assert_snapshot!(
        "growth_framework_json",
        render_series("frameworks", Format::Json)
    );
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
        ..view()
    };
    let cfg = cfg_with(v, vec![], 0);
    let f = findings(&["leak_loop.json", "clean.json"], &cfg);
    insta::assert_snapshot!(render_painted(Format::Text, &f, &cfg.view, true));
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
        vec![analyze::analyze_process(d, Path::new("x"), &cfg)],
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

// ---------------------------------------------------------------------------------------------
// HTML and folded

/// The exit report of the `growth/` fixture directory (final dumps) and its series, rendered as
/// `cudaleak report --format html growth/` renders them.
fn html_growth_page(view: &View) -> String {
    let cfg = cfg_with(view.clone(), vec![], 0);
    let exit = findings(
        &["growth/cudaleak.4001.json", "growth/cudaleak.4002.json"],
        &cfg,
    );
    let g = growth_findings(&cfg);
    let mut out = Vec::new();
    let page = super::Page::Report {
        exit: &exit,
        series: Some(&g),
    };
    super::html::Html.page(page, view, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The values of `attr="…"` on the elements whose start tag begins with `tag`.
fn attrs<'a>(html: &'a str, tag: &str, attr: &str) -> Vec<&'a str> {
    html.split(tag)
        .skip(1)
        .filter_map(|rest| {
            let start_tag = &rest[..rest.find('>').unwrap_or(rest.len())];
            let at = start_tag.find(&format!(" {attr}=\""))? + attr.len() + 3;
            let value = &start_tag[at..];
            Some(&value[..value.find('"')?])
        })
        .collect()
}

#[test]
fn html_growth_page_golden() {
    insta::assert_snapshot!("html_growth", html_growth_page(&view()));
}

#[test]
fn html_has_one_band_per_callsite_shown_and_one_rect_per_flame_node() {
    let html = html_growth_page(&view());
    assert!(html.starts_with("<!DOCTYPE html>\n"));
    assert!(html.ends_with("</html>\n"));
    // Self-contained: nothing to fetch, no external script, style or font.
    assert!(!html.contains("://"), "no URL of any kind");
    assert!(!html.contains(" src="), "no src attribute");
    assert!(!html.contains("<link"), "no stylesheet link");
    assert_eq!(count(&html, "<script"), 1, "only the page's own script");

    // One series (pid 4001; 4002 has a single dump): one timeline, a band per listed callsite
    // (4 grew: 2 suspects, 2 not) plus the band of the others.
    assert_eq!(count(&html, "<svg class=\"timeline\""), 1);
    assert_eq!(
        attrs(&html, "<svg class=\"timeline\"", "data-callsites"),
        ["4"]
    );
    assert_eq!(attrs(&html, "<svg class=\"timeline\"", "data-dumps"), ["6"]);
    assert_eq!(count(&html, "<path class=\"band callsite"), 4);
    assert_eq!(count(&html, "<path class=\"band callsite suspect\""), 2);
    assert_eq!(count(&html, "<path class=\"band other\""), 1);
    assert_eq!(count(&html, "<tr class=\"legend\""), 5);
    assert_eq!(count(&html, "<circle class=\"dump\""), 6, "a mark per dump");

    // Flame graphs: live at exit (leaks of both processes: root, 3 `main` lines, 3 callers,
    // 3 `cudaMalloc` leaves; 4002's stack is 4001's train_step) and each grown callsite's peak
    // (root, 4 main lines, 4 callers, 4 leaves).
    assert_eq!(count(&html, "<svg class=\"flame\""), 2);
    assert_eq!(
        attrs(&html, "<svg class=\"flame\"", "data-nodes"),
        ["10", "13"]
    );
    let exit = &html[html.find("data-what=\"exit\"").unwrap()..];
    let exit = &exit[..exit.find("</svg>").unwrap()];
    assert_eq!(count(exit, "<g class=\"node "), 10);
    assert_eq!(count(exit, "<rect "), 10);
    assert_eq!(count(exit, "<title>"), 10, "hover text on every node");
    assert_eq!(
        count(exit, "<g class=\"node leak\""),
        9,
        "all but the root are leaks"
    );
    // The root's width is all of it; the widest child (load_model's 2 MiB) is most of it.
    let widths = attrs(exit, "<g class=\"node", "data-w");
    assert_eq!(widths[0], "1200");
    let total = 2_342_912.0 + 4096.0;
    let want = super::html::tests_num(2_097_152.0 / total * 1200.0);
    assert_eq!(widths[1], want);

    // Stacks: a <details> per leak group (3 + 1) and per grown callsite (4), balanced.
    assert_eq!(count(&html, "<details"), 8);
    assert_eq!(count(&html, "</details>"), 8);
    assert_eq!(count(&html, "<svg"), count(&html, "</svg>"));
    assert!(html.contains("Gate failed (leaks): exit status 23."));
}

/// A dump whose names try to break out of the markup and the folded format.
fn hostile_dump() -> crate::load::schema::Dump {
    let mut d = dump("error_path.json");
    let evil = "evil<script>alert(1)</script>&std::vector<int>::f;g\" onmouseover=\"x";
    for s in &mut d.stacks {
        for f in &mut s.frames {
            if f.function.as_deref() == Some("process_data(float*)") {
                f.function = Some(evil.into());
                f.file = Some("a'b\"<c>.cu".into());
            }
        }
    }
    d
}

#[test]
fn html_escapes_every_name_from_the_dump() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = analyze::finish(
        vec![analyze::analyze_process(
            hostile_dump(),
            Path::new("fixtures/<evil>.json"),
            &cfg,
        )],
        &cfg,
    );
    let html = render(Format::Html, &f, &cfg.view);
    assert!(
        html.contains("evil&lt;script&gt;alert(1)&lt;/script&gt;&amp;std::vector&lt;int&gt;::f;g"),
        "the name is there, escaped"
    );
    assert_eq!(count(&html, "<script"), 1, "no script from the dump");
    assert!(
        !html.contains("onmouseover=\"x"),
        "no attribute from the dump"
    );
    assert!(!html.contains("<c>"), "file names are escaped too");
    assert!(html.contains("a&#39;b&quot;&lt;c&gt;.cu"));
    assert!(!html.contains("<evil>"), "so are dump paths");
    // Every attribute value is closed before its tag ends: the labels' quotes are entities.
    for label in attrs(&html, "<g class=\"node", "data-label") {
        assert!(!label.contains('<') && !label.contains('>'), "{label}");
    }
}

#[test]
fn folded_escapes_semicolons_and_keeps_one_line_per_stack() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = analyze::finish(
        vec![analyze::analyze_process(
            hostile_dump(),
            Path::new("h.json"),
            &cfg,
        )],
        &cfg,
    );
    let plain = render(
        Format::Folded,
        &findings(&["error_path.json"], &cfg),
        &cfg.view,
    );
    let hostile = render(Format::Folded, &f, &cfg.view);
    assert_eq!(plain.lines().count(), hostile.lines().count());
    for (a, b) in plain.lines().zip(hostile.lines()) {
        assert_eq!(a.matches(';').count(), b.matches(';').count(), "{b}");
    }
    assert!(
        hostile.contains("std::vector<int>::f\u{ff1b}g"),
        "{hostile}"
    );
}

/// `(stack, bytes)` of each folded line.
fn folded_lines(text: &str) -> Vec<(Vec<&str>, u64)> {
    text.lines()
        .map(|l| {
            let (stack, bytes) = l.rsplit_once(' ').expect("STACK BYTES");
            (stack.split(';').collect(), bytes.parse().expect("bytes"))
        })
        .collect()
}

#[test]
fn folded_is_root_first_and_adds_up_to_the_json_totals() {
    let cfg = cfg_with(view(), vec![], 0);
    let f = findings(
        &[
            "error_path.json",
            "leak_loop.json",
            "multi/cudaleak.2001.json",
            "multi/cudaleak.2002.json",
            "framework.json",
            "python_torch.json",
        ],
        &cfg,
    );
    let text = render(Format::Folded, &f, &cfg.view);
    insta::assert_snapshot!("folded_report", text);
    let lines = folded_lines(&text);
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, &f, &cfg.view)).unwrap();
    let leaked = json["summary"]["leaked_bytes"].as_u64().unwrap();
    assert!(leaked > 0);
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), leaked);
    let mut sorted = lines.clone();
    sorted.sort();
    sorted.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(sorted.len(), lines.len(), "one line per unique stack");
    for (stack, _) in &lines {
        // Root first: the outermost frame is main, or the interpreter's frames below the
        // Python module; the last is the API.
        let first = stack[0];
        assert!(
            first.starts_with("main ") || first.starts_with("[… 5 frames in python3.12]"),
            "{first}"
        );
        assert!(stack.last().unwrap().starts_with("cu"), "{stack:?}");
    }
}

#[test]
fn folded_growth_is_the_growth_of_each_listed_callsite() {
    let cfg = cfg_with(view(), vec![], 0);
    let g = growth_findings(&cfg);
    let mut out = Vec::new();
    reporter(Format::Folded, false)
        .growth(&g, &cfg.view, &mut out)
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    insta::assert_snapshot!("folded_growth", text);
    let json: serde_json::Value = serde_json::from_str(&render_growth(Format::Json)).unwrap();
    let want: u64 = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["callsites"].as_array().unwrap())
        .map(|c| c["growth_bytes"].as_u64().unwrap())
        .sum();
    let lines = folded_lines(&text);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), want);
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
        reporter(Format::Sarif, false)
            .growth(&growth_findings(&cfg), v, &mut out)
            .unwrap();
        sarif_fingerprints(&String::from_utf8(out).unwrap())
    };
    let diff = |v: &View| {
        let old = dump("snapshots/cudaleak.3001.snapshot-1.json");
        let new = dump("snapshots/cudaleak.3001.snapshot-2.json");
        let d = analyze::diff(&old, Path::new("o"), &new, Path::new("n"), v);
        let mut out = Vec::new();
        reporter(Format::Sarif, false)
            .diff(&d, v, &mut out)
            .unwrap();
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
