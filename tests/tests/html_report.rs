//! The HTML report in a real browser: `cudaleak run --format html` on a program that leaks per
//! step while snapshots are taken (growth_steps, null-device runtime), then the page rendered by
//! headless Chromium. The DOM Chromium built must hold the timeline with one band per callsite
//! the growth report lists (up to the page's eight) and both flame graphs, the page's script
//! must have run to its end, and the console must stay silent (no "Uncaught …"). The page and a
//! screenshot are kept under target/html-report/ for a look.
//!
//! Without Chromium the test skips with a message — unless `CUDALEAK_REQUIRE_BROWSER=1` (set by
//! `make test`, hence CI), where it fails. `CUDALEAK_CHROMIUM` names the browser to use.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use cudaleak_tests::{cudaleak_cli, cudaleak_run, wait_for_exit};

/// The page's own cap on timeline bands (cli/src/report/html/mod.rs, TIMELINE_CALLSITES).
const TIMELINE_CALLSITES: usize = 8;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

fn required() -> bool {
    std::env::var_os("CUDALEAK_REQUIRE_BROWSER").is_some_and(|v| v == "1")
}

/// `CUDALEAK_CHROMIUM`, else the first of chromium, chromium-browser, google-chrome on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CUDALEAK_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Where the page and its screenshot are kept: `$CARGO_TARGET_DIR/html-report`, else the
/// workspace's `target/html-report`.
fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("html-report");
    std::fs::create_dir_all(&dir).expect("create target/html-report");
    dir
}

/// Headless Chromium with nothing that reaches the network, its console on stderr; killed
/// after BROWSER_TIMEOUT.
fn browse(browser: &Path, profile: &Path, args: &[String]) -> Output {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", browser.display()));
    wait_for_exit(&mut child, BROWSER_TIMEOUT, "chromium");
    child.wait_with_output().expect("chromium output")
}

/// Lines where the page's console spoke (`INFO:CONSOLE…`, `Uncaught …`).
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The value of `attr` on each start tag that begins with `tag`.
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

/// Loads report.html (next to it) in a frame, clicks as a user would, and writes what it saw
/// into its own DOM for `--dump-dom`. File pages may read each other only with
/// `--allow-file-access-from-files`.
const DRIVER: &str = r#"<!DOCTYPE html>
<html><body><pre id="out">not run</pre>
<iframe id="report" src="report.html" width="1300" height="900"></iframe>
<script>
document.getElementById('report').addEventListener('load', function () {
  var out = [], error = 'none';
  function click(el) { el.dispatchEvent(new MouseEvent('click', {bubbles: true})); }
  function shown(nodes) {
    var n = 0;
    nodes.forEach(function (g) { if (g.style.display !== 'none') { n++; } });
    return n;
  }
  try {
    var d = this.contentDocument;
    var nodes = d.querySelector('svg.flame').querySelectorAll('g.node');
    var first = null;
    nodes.forEach(function (g) { if (!first && g.getAttribute('data-d') === '1') { first = g; } });
    click(first);
    out.push('shown=' + shown(nodes));
    out.push('width=' + first.querySelector('rect').getAttribute('width'));
    click(nodes[0]);
    out.push('after_root=' + shown(nodes) + '/' + nodes.length);
    click(d.querySelector('tr.legend[data-band="1"]'));
    out.push('dimmed=' + d.querySelectorAll('svg.timeline .band.dim').length + '/' +
             d.querySelectorAll('svg.timeline .band').length);
  } catch (e) { error = String(e); }
  out.push('error=' + error);
  document.getElementById('out').textContent = out.join('\n');
});
</script></body></html>
"#;

#[test]
fn the_html_report_of_a_snapshot_series_renders_in_chromium_without_console_errors() {
    let Some(browser) = chromium() else {
        if required() {
            panic!(
                "CUDALEAK_REQUIRE_BROWSER=1 but no Chromium was found (chromium, \
                 chromium-browser or google-chrome on PATH, or CUDALEAK_CHROMIUM): \
                 apt-get install -y chromium"
            );
        }
        eprintln!(
            "skipping the browser test (set CUDALEAK_REQUIRE_BROWSER=1 to fail instead): \
             no chromium on PATH"
        );
        return;
    };
    let work = tempfile::tempdir().expect("temporary directory");
    let page = work.path().join("report.html");
    let page_arg = page.display().to_string();
    let run = cudaleak_run(
        &["--format", "html", "-o", &page_arg],
        "growth_steps",
        &["24", "25"],
        &[("CUDALEAK_SNAPSHOT_INTERVAL", "0.1")],
    );
    run.assert_exit(23);
    let dumps = run.dumps();
    assert!(
        dumps.len() >= 3,
        "the exit dump and at least two snapshots: {dumps:?}"
    );

    // What the page should draw, from the growth report's JSON over the same run.
    let run_dir = dumps[0].parent().expect("run directory").to_path_buf();
    let json = Command::new(cudaleak_cli())
        .args(["report", "--growth", "--format", "json"])
        .arg(&run_dir)
        .output()
        .expect("cudaleak report --growth");
    let growth: serde_json::Value =
        serde_json::from_slice(&json.stdout).expect("the growth report is JSON");
    let process = &growth["processes"][0];
    let listed = process["callsites"].as_array().expect("callsites").len();
    let series_dumps = process["dumps"].as_array().expect("dumps").len();
    assert!(
        listed >= 2,
        "train_step and cache_fill grew: {}",
        String::from_utf8_lossy(&json.stdout)
    );
    let bands = listed.min(TIMELINE_CALLSITES);

    let keep = artifacts();
    std::fs::copy(&page, keep.join("report.html")).expect("keep the page");
    let profile = tempfile::tempdir().expect("browser profile");
    let url = format!("file://{}", page.display());

    let dom = browse(
        &browser,
        profile.path(),
        &["--dump-dom".into(), url.clone()],
    );
    let stderr = String::from_utf8_lossy(&dom.stderr);
    assert!(
        dom.status.success(),
        "chromium --dump-dom failed:\n{stderr}"
    );
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(
        console_lines(&stderr),
        Vec::<&str>::new(),
        "the page wrote to the console"
    );
    assert!(
        dom_text.contains("data-script=\"ready\""),
        "the page's script ran to its end:\n{}",
        &dom_text[..dom_text.len().min(2000)]
    );
    assert_eq!(count(&dom_text, "<svg class=\"timeline\""), 1);
    assert_eq!(
        attrs(&dom_text, "<svg class=\"timeline\"", "data-callsites"),
        [bands.to_string()]
    );
    assert_eq!(
        attrs(&dom_text, "<svg class=\"timeline\"", "data-dumps"),
        [series_dumps.to_string()]
    );
    assert_eq!(count(&dom_text, "<path class=\"band callsite"), bands);
    assert!(
        count(&dom_text, "<path class=\"band callsite suspect\"") >= 2,
        "train_step and cache_fill are suspects"
    );
    assert_eq!(count(&dom_text, "<svg class=\"flame\""), 2, "exit and peak");
    let nodes: usize = attrs(&dom_text, "<svg class=\"flame\"", "data-nodes")
        .iter()
        .map(|n| n.parse::<usize>().expect("a count"))
        .sum();
    assert!(nodes >= 8, "{nodes} flame nodes");
    assert_eq!(count(&dom_text, "<rect "), nodes, "a rect per flame node");
    assert!(
        dom_text.contains("train_step"),
        "the leaking function is named"
    );
    assert!(dom_text.contains("Gate failed (leaks): exit status 23."));

    // The script's interactivity, driven from a page that holds the report in a frame: a click
    // on the first frame below the root zooms into it (its rect spans the width, frames outside
    // it hide), a click on the root shows every frame again, and a click on a legend row picks
    // out its band (every other band dimmed).
    let driver = work.path().join("driver.html");
    std::fs::write(&driver, DRIVER).expect("write the driver page");
    let driven = browse(
        &browser,
        profile.path(),
        &[
            "--allow-file-access-from-files".into(),
            "--virtual-time-budget=10000".into(),
            "--dump-dom".into(),
            format!("file://{}", driver.display()),
        ],
    );
    let stderr = String::from_utf8_lossy(&driven.stderr);
    assert!(
        driven.status.success(),
        "chromium (driver) failed:\n{stderr}"
    );
    assert_eq!(console_lines(&stderr), Vec::<&str>::new());
    let result = String::from_utf8_lossy(&driven.stdout);
    let exit_nodes: usize = attrs(&dom_text, "<svg class=\"flame\"", "data-nodes")[0]
        .parse()
        .expect("a count");
    let field = |name: &str| -> String {
        let at = result
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("no {name}= in the driver's output:\n{result}"));
        let rest = &result[at + name.len() + 1..];
        rest[..rest.find(['\n', '<']).unwrap_or(rest.len())].to_string()
    };
    assert_eq!(field("error"), "none", "{result}");
    let shown: usize = field("shown").parse().expect("a count");
    assert!(
        shown >= 2 && shown < exit_nodes,
        "zoomed: {shown} of {exit_nodes} frames shown\n{result}"
    );
    assert_eq!(
        field("width"),
        "1199.50",
        "the zoomed frame spans the graph"
    );
    assert_eq!(field("after_root"), format!("{exit_nodes}/{exit_nodes}"));
    assert_eq!(field("dimmed"), format!("{bands}/{}", bands + 1));

    let shot = keep.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let out = browse(
        &browser,
        profile.path(),
        &[
            "--window-size=1280,2200".into(),
            format!("--screenshot={}", shot.display()),
            url,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chromium --screenshot failed:\n{stderr}"
    );
    assert_eq!(console_lines(&stderr), Vec::<&str>::new());
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(
        png.len() > 20_000,
        "a page, not a blank: {} bytes",
        png.len()
    );
    eprintln!("page and screenshot: {}", keep.display());
}
