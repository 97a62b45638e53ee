//! The Python API in a running process (issue 41, items 2 and 5): `cudaleak.track()`,
//! `snapshot()`, `diff()` and the `%%cudaleak` / `%cudaleak_report` magics, on the null device,
//! the shim never preloaded: the package (python/, on PYTHONPATH) attaches it on first use, and
//! runs this build's CLI and shim (CUDALEAK_CLI, CUDALEAK_SHIM).
//!
//! tests/python/api/track.py prints what the API answered as JSON; tests/python/api/leak.ipynb
//! is executed in a real IPython kernel by nbclient, which the notebook tests install from PyPI
//! into a fresh virtual environment (ipykernel, nbclient): when that fails, they fail. The
//! notebook is docs/python-api.md's example, and a test holds the two together.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use cudaleak_tests::{cudaleak_cli, python_marker_line, shim, NULLCUDA_DIR};
use serde_json::Value;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn api_dir() -> PathBuf {
    Path::new(MANIFEST_DIR).join("python/api")
}

/// PYTHON ARGS on the null device with the package importable and this build's CLI and shim,
/// nothing of the developer's cudaleak environment (no preload, no CUDALEAK_* of theirs).
fn python(python: &Path, args: &[&Path], cwd: &Path) -> Output {
    python_with(python, args, cwd, |_| {})
}

/// [`python`], with ADJUST given the command last.
fn python_with(
    python: &Path,
    args: &[&Path],
    cwd: &Path,
    adjust: impl FnOnce(&mut Command),
) -> Output {
    let mut cmd = Command::new(python);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CUDALEAK_") || k == "LD_PRELOAD" {
            cmd.env_remove(&*k);
        }
    }
    cmd.args(args)
        .current_dir(cwd)
        .env("LD_LIBRARY_PATH", NULLCUDA_DIR)
        .env("PYTHONPATH", Path::new(MANIFEST_DIR).join("../python"))
        .env("CUDALEAK_CLI", cudaleak_cli())
        .env("CUDALEAK_SHIM", shim())
        .env("NO_COLOR", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null());
    adjust(&mut cmd);
    let out = cmd.output().expect("python runs");
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\n{}\n{}",
        python.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What track.py's API calls answered, run once for the tests below.
fn track() -> &'static Value {
    static OUT: OnceLock<Value> = OnceLock::new();
    OUT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = python(
            Path::new("python3"),
            &[&api_dir().join("track.py")],
            dir.path(),
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "track.py printed no JSON ({e}):\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    })
}

fn line_of(marker: &str) -> u32 {
    python_marker_line(&api_dir().join("track.py"), marker)
}

/// A report's frame: FUNCTION at track.py's line marked MARKER (run by its absolute path).
fn at(function: &str, marker: &str) -> String {
    let path = api_dir().join("track.py");
    format!("{function} at {}:{}\n", path.display(), line_of(marker))
}

#[test]
fn track_names_the_kept_block_at_its_line_and_no_block_from_before() {
    let out = track();
    let kept = &out["kept"];
    assert_eq!(
        out["attached"], true,
        "the shim was attached, not preloaded"
    );
    let keep = line_of("keep");
    let leaks = kept["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "only the kept block: {kept:#}");
    let [bytes, allocations, api, line] = &leaks[0].as_array().unwrap()[..] else {
        panic!("{kept:#}")
    };
    assert_eq!(
        (bytes, allocations, api),
        (&4096.into(), &1.into(), &"cudaMalloc".into())
    );
    let line = line.as_str().unwrap();
    assert!(line.ends_with(&format!("/track.py:{keep}")), "{line}");
    assert_eq!(kept["leaked_bytes"], 4096);

    let report = kept["report"].as_str().unwrap();
    assert!(
        report.contains("Leak 1 of 1: 4.00 KiB (4096 B) in 1 allocation via cudaMalloc"),
        "{report}"
    );
    assert!(report.contains(&at("<module>", "keep")), "{report}");
    // The 1 MiB block from before the shim was attached, the 2 MiB one from before the block,
    // the 8 KiB one freed inside it: none is the block's.
    for not_it in ["1.00 MiB", "2.00 MiB", "8.00 KiB"] {
        assert!(!report.contains(not_it), "{not_it}:\n{report}");
    }
    // assert_no_leaks() raises LeakError with the same report (and passed at "4 KiB").
    let raised = kept["assert"].as_array().expect("assert_no_leaks() raised");
    assert_eq!(raised[0], 4096);
    assert_eq!(raised[1].as_str().unwrap(), report);
}

#[test]
fn a_clean_block_passes_and_shows_the_clis_verdict() {
    let clean = &track()["clean"];
    assert_eq!(clean["leaks"], 0, "{clean:#}");
    let report = clean["report"].as_str().unwrap();
    assert!(report.lines().any(|l| l == "No leaks."), "{report}");
    assert!(
        report.contains("SUMMARY: 0 B leaked in 0 allocations from 0 callsites"),
        "{report}"
    );
}

#[test]
fn the_decorator_raises_leak_error_on_the_leaking_call_only() {
    // track.py's `step(False)` passed (else it would have ended with the LeakError).
    let raised = track()["decorator"]
        .as_array()
        .expect("the leaking call raised LeakError");
    assert_eq!(raised[0], 512);
    let report = raised[1].as_str().unwrap();
    assert!(
        report.contains("Leak 1 of 1: 512 B in 1 allocation via cudaMalloc"),
        "{report}"
    );
    assert!(report.contains(&at("keeps", "keep-call")), "{report}");
    assert!(report.contains(&at("step", "step")), "{report}");
}

#[test]
fn snapshot_and_diff_show_the_growth_and_no_block_from_before_the_shim() {
    let diff = &track()["diff"];
    assert_eq!(diff["delta_bytes"], 65536, "{diff:#}");
    let report = diff["report"].as_str().unwrap();
    assert!(
        report.contains("Grew 1 of 4: +64.00 KiB, 1 more block via cudaMalloc"),
        "{report}"
    );
    assert!(report.contains(&at("<module>", "grow")), "{report}");
    // The old snapshot: the 2 MiB, 4 KiB and 512 B blocks; the 1 MiB block allocated before the
    // shim was attached is unknown to it.
    assert!(
        report.contains("2.00 MiB in 3 allocations live"),
        "{report}"
    );
}

/// A virtual environment with ipykernel, nbclient and pytest from PyPI, made once per run.
struct Venv {
    _dir: tempfile::TempDir,
    python: PathBuf,
}

fn venv() -> &'static Venv {
    static VENV: OnceLock<Venv> = OnceLock::new();
    VENV.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().join("venv");
        ok(
            Command::new("python3").arg("-m").arg("venv").arg(&root),
            "python3 -m venv",
        );
        ok(
            Command::new(root.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .args(["ipykernel", "nbclient", "pytest"]),
            "pip install ipykernel nbclient pytest (PyPI)",
        );
        Venv {
            python: root.join("bin/python"),
            _dir: dir,
        }
    })
}

fn ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn notebook_path() -> PathBuf {
    api_dir().join("leak.ipynb")
}

/// A cell's source as one string (a notebook keeps it as a list of lines, or one string).
fn source(cell: &Value) -> String {
    match &cell["source"] {
        Value::String(s) => s.clone(),
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        other => panic!("a cell's source: {other}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// One executed cell: its source, what it printed, its HTML outputs, its error (name, value).
struct Cell {
    source: String,
    stdout: String,
    html: String,
    error: Option<(String, String)>,
}

/// leak.ipynb executed in a fresh IPython kernel, once per run.
fn notebook() -> &'static [Cell] {
    static CELLS: OnceLock<Vec<Cell>> = OnceLock::new();
    CELLS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let executed = dir.path().join("executed.ipynb");
        python(
            &venv().python,
            &[
                &api_dir().join("run_notebook.py"),
                &notebook_path(),
                &executed,
            ],
            dir.path(),
        );
        let nb: Value = serde_json::from_slice(&std::fs::read(&executed).unwrap()).unwrap();
        nb["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let mut cell = Cell {
                    source: source(c),
                    stdout: String::new(),
                    html: String::new(),
                    error: None,
                };
                for o in c["outputs"].as_array().into_iter().flatten() {
                    match o["output_type"].as_str() {
                        Some("stream") if o["name"] == "stdout" => {
                            cell.stdout += &text(&o["text"]);
                        }
                        Some("display_data" | "execute_result") => {
                            cell.html += &text(&o["data"]["text/html"]);
                        }
                        Some("error") => {
                            cell.error = Some((text(&o["ename"]), text(&o["evalue"])));
                        }
                        _ => {}
                    }
                }
                cell
            })
            .collect()
    })
}

/// The executed cell whose source starts with HEAD (exactly one).
fn cell(head: &str, marker: Option<&str>) -> &'static Cell {
    let found: Vec<&Cell> = notebook()
        .iter()
        .filter(|c| c.source.starts_with(head))
        .filter(|c| marker.is_none_or(|m| c.source.contains(&format!("# @{m}"))))
        .collect();
    assert_eq!(found.len(), 1, "one cell starts with {head:?} ({marker:?})");
    found[0]
}

/// The cell's line (the magic's line is 1) that ends with `# @MARKER`.
fn cell_line(cell: &Cell, marker: &str) -> usize {
    let tag = format!("# @{marker}");
    let lines: Vec<usize> = cell
        .source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(&tag))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{tag} in\n{}", cell.source);
    lines[0]
}

/// The report names the cell's file (the name ipykernel gave the cell's code) at LINE.
fn names_the_cells_line(report: &str, line: usize) -> bool {
    report.lines().any(|l| {
        let l = l.trim();
        l.starts_with("#")
            && l.contains(" <module> at ")
            && l.contains("/ipykernel_")
            && l.ends_with(&format!(".py:{line}"))
    })
}

#[test]
fn the_cell_magic_names_the_cells_line_in_a_real_kernel() {
    let keep = cell("%%cudaleak\n", Some("keep"));
    let o = &keep.stdout;
    assert!(
        o.contains("Leak 1 of 1: 4.00 KiB (4096 B) in 1 allocation via cudaMalloc"),
        "{o}"
    );
    assert!(names_the_cells_line(o, cell_line(keep, "keep")), "{o}");
    // Neither the block freed in the cell nor the 1 MiB one from before the extension.
    assert!(!o.contains("8.00 KiB") && !o.contains("1.00 MiB"), "{o}");
    assert!(keep.error.is_none());

    let clean = cell("%%cudaleak\nscratch", None);
    assert!(
        clean.stdout.lines().any(|l| l == "No leaks."),
        "{}",
        clean.stdout
    );
    assert!(!clean.stdout.contains("Leak 1"), "{}", clean.stdout);
    assert!(clean.error.is_none());

    // Over --limit: LeakError, whose message is the report, and nothing printed besides.
    let over = cell("%%cudaleak --limit", None);
    let (name, message) = over.error.as_ref().expect("the cell over its limit raised");
    assert_eq!(name, "LeakError");
    assert!(
        message.contains("Leak 1 of 1: 2.00 KiB (2048 B) in 1 allocation via cudaMalloc"),
        "{message}"
    );
    assert!(
        names_the_cells_line(message, cell_line(over, "over")),
        "{message}"
    );
    assert!(over.stdout.is_empty(), "{}", over.stdout);

    // What the session keeps: the two kept blocks, not the one from before the extension.
    let report = &cell("%cudaleak_report", None).stdout;
    assert!(
        report.contains("Leak 1 of 2: 4.00 KiB (4096 B)"),
        "{report}"
    );
    assert!(
        report.contains("Leak 2 of 2: 2.00 KiB (2048 B)"),
        "{report}"
    );
    assert!(
        report.contains("SUMMARY: 6.00 KiB leaked in 2 allocations from 2 callsites"),
        "{report}"
    );

    // --html: the CLI's page, escaped into a frame.
    let html = &cell("%%cudaleak --html", None).html;
    assert!(
        html.starts_with("<div><iframe srcdoc=\"&lt;!DOCTYPE html&gt;"),
        "{html}"
    );
    assert!(
        html.contains("&lt;title&gt;cudaleak: 256 B leaked in 1 allocation from 1 callsite"),
        "{html}"
    );
}

/// docs/python-api.md shows the notebook this test runs: every cell, verbatim, and of each
/// output it shows, every line without a `…` printed by a cell.
#[test]
fn the_docs_notebook_example_is_the_notebook_the_test_runs() {
    let blocks = doc_blocks("In Jupyter and IPython");
    let cells = notebook();
    let code: Vec<&str> = blocks
        .iter()
        .filter(|(lang, _)| lang == "python")
        .map(|(_, b)| b.trim_end())
        .collect();
    let sources: Vec<&str> = cells.iter().map(|c| c.source.trim_end()).collect();
    assert_eq!(
        code, sources,
        "docs/python-api.md's notebook cells are leak.ipynb's"
    );
    let printed: Vec<String> = cells
        .iter()
        .map(|c| {
            let error = c.error.as_ref().map(|(n, v)| format!("{n}: {v}"));
            format!("{}{}", c.stdout, error.unwrap_or_default())
        })
        .collect();
    let outputs: Vec<&(String, String)> = blocks.iter().filter(|(l, _)| l == "text").collect();
    assert!(!outputs.is_empty(), "the docs show the cells' output");
    for (_, output) in outputs {
        shown_lines_were_printed(output, &printed);
    }
}

/// docs/python-api.md's runnable `track()` example, run: what it shows is what it prints, and
/// the kept block is named at the example's line.
#[test]
fn the_docs_track_example_prints_what_the_docs_show() {
    let blocks = doc_blocks("`track()`: a block");
    let (example, shown) = match &blocks[..] {
        [(l1, example), (l2, shown), ..] if l1 == "python" && l2 == "text" => (example, shown),
        _ => panic!("the section opens with the example, then its output: {blocks:?}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("example.py");
    std::fs::write(&script, example).unwrap();
    let out = python(Path::new("python3"), &[&script], dir.path());
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    shown_lines_were_printed(shown, std::slice::from_ref(&printed));
    let line = 1 + example
        .lines()
        .position(|l| l.contains("kept.append(malloc(4096))"))
        .expect("the example keeps a 4096-byte block");
    assert!(
        printed.contains(&format!("<module> at example.py:{line}\n")),
        "the kept block at example.py:{line}\n{printed}"
    );
    assert!(
        !printed.contains("1.00 MiB") && !printed.contains("8.00 KiB"),
        "{printed}"
    );
}

/// The fenced blocks of docs/python-api.md's section HEADING: (language, text).
fn doc_blocks(heading: &str) -> Vec<(String, String)> {
    let docs =
        std::fs::read_to_string(Path::new(MANIFEST_DIR).join("../docs/python-api.md")).unwrap();
    let section = docs
        .split(&format!("\n## {heading}\n"))
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_else(|| panic!("docs/python-api.md has a section {heading:?}"))
        .to_string();
    section
        .split("```")
        .skip(1)
        .step_by(2)
        .map(|b| {
            let (lang, text) = b.split_once('\n').unwrap_or((b, ""));
            (lang.to_string(), text.to_string())
        })
        .collect()
}

/// Every line of SHOWN without a `…` (a placeholder for what differs per run) is a line of one
/// of PRINTED.
fn shown_lines_were_printed(shown: &str, printed: &[String]) {
    for line in shown.lines().filter(|l| !l.contains('…')) {
        assert!(
            printed.iter().any(|p| p.lines().any(|l| l == line)),
            "docs/python-api.md shows a line that was not printed: {line:?}\n{}",
            printed.join("\n----\n")
        );
    }
}

/// python/tests/: pytest unit tests of the package's pure-Python parts (Leak.line, sizes read
/// and written as the CLI does), run with an
/// empty configuration of their own (none of the checkout's) and no bytecode left behind.
#[test]
fn the_packages_unit_tests_pass() {
    let dir = tempfile::tempdir().unwrap();
    let ini = dir.path().join("pytest.ini");
    std::fs::write(&ini, "[pytest]\n").unwrap();
    let tests = Path::new(MANIFEST_DIR).join("../python/tests");
    let out = python(
        &venv().python,
        &[
            Path::new("-m"),
            Path::new("pytest"),
            Path::new("-q"),
            Path::new("-p"),
            Path::new("no:cacheprovider"),
            Path::new("-c"),
            &ini,
            &tests,
        ],
        dir.path(),
    );
    // pytest exits 0 (`python` asserts it) only when every test passed; and some ran.
    let o = String::from_utf8_lossy(&out.stdout);
    let passed = o
        .split_whitespace()
        .zip(o.split_whitespace().skip(1))
        .find(|(_, w)| w.trim_end_matches(',') == "passed")
        .and_then(|(n, _)| n.parse::<u32>().ok());
    assert!(passed.is_some_and(|n| n >= 30), "{o}");
}

/// What tests/python/api/window.py's blocks answered (the fake PyTorch on PYTHONPATH).
fn window() -> &'static Value {
    static OUT: OnceLock<Value> = OnceLock::new();
    OUT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let script = api_dir().join("window.py");
        let fakefw = Path::new(MANIFEST_DIR).join("python/fakefw");
        let path = format!(
            "{}:{}",
            Path::new(MANIFEST_DIR).join("../python").display(),
            fakefw.display()
        );
        let out = python_with(Path::new("python3"), &[&script], dir.path(), |cmd| {
            cmd.env("PYTHONPATH", &path);
        });
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "window.py printed no JSON ({e}):\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    })
}

fn window_line(marker: &str) -> String {
    let path = api_dir().join("window.py");
    format!("{}:{}", path.display(), python_marker_line(&path, marker))
}

/// The runtime was loaded after the shim was attached (by the first block): the next block's
/// `cudaleak_attach_refresh()` replaced its pointers, so its kept block is seen.
#[test]
fn a_runtime_loaded_after_the_attach_is_seen_from_the_next_block() {
    let late = &window()["late"];
    assert_eq!(
        late,
        &serde_json::json!([[4096, window_line("malloc")]]),
        "{late:#}"
    );
}

/// The snapshots a block takes (one every 50 ms here) give the growth verdict: a block keeping
/// a block every step has one suspect at its line; one freeing all it makes has none; a block
/// without snapshots has no verdict.
#[test]
fn growth_over_a_blocks_snapshots_names_the_growing_line_and_only_it() {
    let w = window();
    let grows = &w["grows"];
    assert!(grows["snapshots"].as_u64().unwrap() >= 8, "{grows:#}");
    let suspects = grows["suspects"].as_array().unwrap();
    assert_eq!(suspects.len(), 1, "{grows:#}");
    assert_eq!(suspects[0][0], "cudaMalloc");
    let grows_line = python_marker_line(&api_dir().join("window.py"), "grows");
    assert!(
        suspects[0][1]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["function"] == "<module>" && f["line"] == grows_line),
        "{grows:#}"
    );
    let report = grows["report"].as_str().unwrap();
    assert!(report.contains("Suspect 1 of 1: +"), "{report}");
    assert!(report.contains("requested dump); live"), "{report}");
    assert_eq!(w["steady"]["suspects"], 0, "{:#}", w["steady"]);
    assert!(w["steady"]["snapshots"].as_u64().unwrap() >= 8);
    assert_eq!(w["short"], Value::Null);
}

/// A tensor kept inside the caching allocator's segment (the driver sees nothing): named by
/// PyTorch's own record, handed to the shim with the block's dump, reported by the CLI at its
/// line; the tensor from before the blocks and the one freed inside are not the block's.
#[test]
fn a_tensor_kept_in_pytorchs_pool_is_named_at_its_line() {
    let w = window();
    let leaks = &w["torch"]["leaks"];
    assert_eq!(
        leaks,
        &serde_json::json!([[5120, 10, "torch", "torch", window_line("tensor")]]),
        "{:#}",
        w["torch"]
    );
    let report = w["torch"]["report"].as_str().unwrap();
    assert!(
        report.contains(
            "Leak 1 of 1: 5.00 KiB (5120 B) in 10 allocations via torch (device 0)\n    note: \
             kept in PyTorch's caching allocator, out of the driver's sight"
        ),
        "{report}"
    );
    assert_eq!(w["torch_clean"], 0);
}
