//! Python programs (issue 11): tests/python/leaks.py, run by each CPython found (python3 always;
//! 3.9–3.15 where installed) under the shim, calls the null runtime's cudaMalloc through
//! ctypes.CDLL (the GIL released) and ctypes.PyDLL (the GIL held). The dump and the report must
//! name each Python function and line, group a loop's blocks per line, and keep apart two Python
//! paths that reach the same native stack.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use cudaleak_format::{Dump, Frame, LiveRecord};
use cudaleak_tests::{
    cudaleak_cli, python_marker_line, python_script, pythons, Python, Run, Scenario,
    FRAMEWORKS_DIR, NULLCUDA_DIR,
};

fn run(py: &Python, mode: &str, env: &[(&str, &str)]) -> Run {
    let mut s = Scenario::program(&py.path)
        .arg(python_script("leaks.py").to_str().unwrap())
        .arg(NULLCUDA_DIR)
        .arg(mode);
    for (k, v) in env {
        s = s.env(k, v);
    }
    let run = s.run_shim();
    run.assert_exit(0).assert_stdout("done\n");
    run
}

fn line(marker: &str) -> u32 {
    python_marker_line(&python_script("leaks.py"), marker)
}

/// The Python frames of a record's stack, innermost first, as (function, line), checking that
/// each is in leaks.py (or, past the script, in the standard library's threading.py).
fn python_frames<'a>(dump: &'a Dump, r: &LiveRecord) -> Vec<(&'a str, u32)> {
    dump.stacks[r.stack]
        .frames
        .iter()
        .filter(|f| f.is_python())
        .map(|f| {
            let file = f.file.as_deref().unwrap_or("");
            assert!(
                file.ends_with("/leaks.py") || file.ends_with("/threading.py"),
                "{f:?}"
            );
            assert_eq!(f.module, None, "{f:?}");
            assert_eq!(f.ip.0, 0, "{f:?}");
            (f.function.as_deref().unwrap_or("?"), f.line.unwrap_or(0))
        })
        .collect()
}

fn of_size(dump: &Dump, size: u64) -> Vec<&LiveRecord> {
    dump.live.iter().filter(|r| r.size == size).collect()
}

fn native(frames: &[Frame]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| !f.is_python())
        .map(|f| f.ip.0)
        .collect()
}

/// What every run must show, whichever the interpreter and the ctypes loader.
fn check_dump(py: &Python, dump: &Dump) {
    let v = py.version;
    let context = format!("python {}.{}", v.0, v.1);
    // Version 3 since the shim writes addresses and modules (the CLI named this dump, and
    // spliced its Python runs in: none is left over), 4 since it writes floors; 5 only for a
    // program with library handles.
    assert_eq!(dump.cudaleak_dump, 4, "{context}: the shim's version");
    assert!(dump.stacks.iter().all(|s| s.python.is_empty()), "{context}");
    let mut sizes: Vec<u64> = dump.live.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    assert_eq!(
        sizes,
        [1000, 2000, 2000, 2000, 2000, 2000, 3000, 3000, 4000, 5000, 6000, 7000],
        "{context}"
    );
    // Qualified names exist from 3.11 on.
    let forward = if v >= (3, 11) {
        "Model.forward"
    } else {
        "forward"
    };
    let script = [("main", line("main")), ("<module>", line("module"))];
    let alloc = ("cuda_malloc", line("alloc"));

    let r = of_size(dump, 1000)[0];
    let mut want = vec![
        alloc,
        (forward, line("forward")),
        ("train_step", line("train_step")),
    ];
    want.extend(script);
    assert_eq!(python_frames(dump, r), want, "{context}: 1000 B");

    let loop_records = of_size(dump, 2000);
    assert!(
        loop_records
            .iter()
            .all(|r| r.stack == loop_records[0].stack),
        "{context}: a loop leaking from one line is one stack: {loop_records:?}"
    );
    let mut want = vec![alloc, ("leak_in_loop", line("loop"))];
    want.extend(script);
    assert_eq!(python_frames(dump, loop_records[0]), want, "{context}");

    let paths = of_size(dump, 3000);
    assert_ne!(
        paths[0].stack, paths[1].stack,
        "{context}: two Python paths"
    );
    let mut seen: Vec<(&str, u32)> = paths.iter().map(|r| python_frames(dump, r)[1]).collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        [("path_a", line("path_a")), ("path_b", line("path_b"))],
        "{context}"
    );
    assert_eq!(
        native(&dump.stacks[paths[0].stack].frames),
        native(&dump.stacks[paths[1].stack].frames),
        "{context}: the two paths share one native stack"
    );

    let mut want = vec![alloc, ("größe", line("unicode"))];
    want.extend(script);
    assert_eq!(
        python_frames(dump, of_size(dump, 5000)[0]),
        want,
        "{context}"
    );

    // At exit: an atexit handler still runs Python; the finalizer's allocation is recorded,
    // whatever the interpreter's state then.
    assert_eq!(
        python_frames(dump, of_size(dump, 6000)[0])[..2],
        [alloc, ("at_exit", line("atexit"))],
        "{context}"
    );
    assert_eq!(of_size(dump, 7000).len(), 1, "{context}");

    // A thread Python started: its own frames, then threading's.
    let thread = python_frames(dump, of_size(dump, 4000)[0]);
    assert_eq!(
        thread[..2],
        [alloc, ("worker", line("worker"))],
        "{context}"
    );
    assert!(
        thread[2..].iter().any(|(f, _)| f.ends_with("_bootstrap")),
        "{context}: {thread:?}"
    );

    // Every stack with Python frames has them in place of the evaluation frames.
    for s in dump
        .stacks
        .iter()
        .filter(|s| s.frames.iter().any(Frame::is_python))
    {
        assert!(
            !s.frames
                .iter()
                .any(|f| f.function.as_deref() == Some("_PyEval_EvalFrameDefault")),
            "{context}: an evaluation frame was not replaced: {s:#?}"
        );
    }
    let mut distinct = dump.stacks.clone();
    distinct.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    distinct.dedup();
    assert_eq!(distinct.len(), dump.stacks.len(), "stacks are written once");
}

#[test]
fn ctypes_cdll_without_the_gil_names_python_functions_and_lines() {
    let all = pythons();
    for py in &all {
        check_dump(py, &run(py, "cdll", &[]).dump());
    }
    eprintln!(
        "checked: {:?}",
        all.iter().map(|p| p.version).collect::<Vec<_>>()
    );
}

#[test]
fn ctypes_pydll_with_the_gil_names_python_functions_and_lines() {
    for py in &pythons() {
        check_dump(py, &run(py, "pydll", &[]).dump());
    }
}

/// `script` (of tests/python/) under the shim with `args`, and the bootstrap `cudaleak run` gives
/// a Python program on PYTHONPATH (which adds the code watcher at start-up on 3.12+).
fn bootstrapped(py: &Python, script: &str, args: &[&str]) -> Run {
    let bootstrap = cudaleak_tests::bootstrap_dir();
    let mut s = Scenario::program(&py.path).arg(python_script(script).to_str().unwrap());
    for a in args {
        s = s.arg(a);
    }
    s.env("PYTHONPATH", bootstrap.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .run_shim()
}

/// The same program as `cudaleak run` gives it the bootstrap: on 3.12+ the code watcher is added
/// at start-up, and the main thread's walks replay their memo (python/walk.rs, `Memo::replay`)
/// — in full in the loop, up to the step where path_a's and path_b's stacks part — and give
/// the same frames as without it.
#[test]
fn the_frames_are_the_same_where_the_code_watcher_lets_the_walk_replay_its_memo() {
    let watched: Vec<_> = pythons()
        .into_iter()
        .filter(|p| p.version >= (3, 12))
        .collect();
    for py in &watched {
        let run = bootstrapped(py, "leaks.py", &[NULLCUDA_DIR, "cdll"]);
        run.assert_exit(0).assert_stdout("done\n");
        check_dump(py, &run.dump());
    }
    eprintln!(
        "checked: {:?}",
        watched.iter().map(|p| p.version).collect::<Vec<_>>()
    );
}

#[test]
fn python_depth_zero_records_native_stacks_only() {
    let py = &pythons()[0];
    let run = run(py, "cdll", &[("CUDALEAK_PY_DEPTH", "0")]);
    let raw =
        cudaleak_tests::read_raw_dump(&run.dir.path().join(format!("cudaleak.{}.json", run.pid)));
    assert!(
        raw.stacks.iter().all(|s| s.python.is_empty()),
        "no Python runs written"
    );
    let dump = run.dump();
    assert!(dump
        .stacks
        .iter()
        .all(|s| s.frames.iter().all(|f| !f.is_python())));
    // Without Python frames the two paths and the loop share one native stack.
    assert!(dump.stacks.len() < 5, "{}", dump.stacks.len());
}

#[test]
fn a_native_stack_cut_before_the_interpreter_gets_the_python_frames_at_its_end() {
    let py = &pythons()[0];
    let dump = run(py, "cdll", &[("CUDALEAK_DEPTH", "3")]).dump();
    let r = of_size(&dump, 1000)[0];
    let frames = &dump.stacks[r.stack].frames;
    let first = frames
        .iter()
        .position(|f| f.is_python())
        .expect("Python frames");
    assert!(frames[..first].iter().all(|f| !f.is_python()));
    assert!(frames[first..].iter().all(|f| f.is_python()), "{frames:#?}");
    assert_eq!(python_frames(&dump, r)[0], ("cuda_malloc", line("alloc")));
}

#[test]
fn diff_of_two_python_runs_matches_callsites_by_script_line() {
    let py = &pythons()[0];
    let (a, b) = (run(py, "cdll", &[]), run(py, "pydll", &[]));
    let dump = |r: &Run| r.dir.path().join(format!("cudaleak.{}.json", r.pid));
    let out = Command::new(cudaleak_cli())
        .args(["diff", "--format", "json"])
        .arg(dump(&a))
        .arg(dump(&b))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The same callsites in both runs (CDLL and PyDLL differ only in native frames under ctypes):
    // nothing grew or shrank.
    assert_eq!(
        (v["grew"].as_u64(), v["shrank"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
}

#[test]
fn python_frames_are_captured_with_a_shallow_python_depth() {
    let py = &pythons()[0];
    let dump = run(py, "cdll", &[("CUDALEAK_PY_DEPTH", "1")]).dump();
    let r = of_size(&dump, 1000)[0];
    assert_eq!(python_frames(&dump, r), [("cuda_malloc", line("alloc"))]);
}

fn report(dump_dir: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(cudaleak_cli())
        .arg("report")
        .args(args)
        .arg(dump_dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run cudaleak report");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The text report's leak groups: each header line with the lines under it.
fn groups(text: &str) -> Vec<Vec<&str>> {
    let mut out: Vec<Vec<&str>> = Vec::new();
    for l in text.lines() {
        if l.starts_with("Leak ") {
            out.push(vec![l]);
        } else if l.starts_with("    ") && !out.is_empty() {
            out.last_mut().unwrap().push(l.trim());
        } else if l.is_empty() || l.starts_with("pid ") {
            continue;
        }
    }
    out
}

#[test]
fn the_report_starts_each_python_leak_at_the_script_line_and_folds_native_frames() {
    let py = &pythons()[0];
    let run = run(py, "cdll", &[]);
    let dir = run.dir.path();
    let (code, text) = report(dir, &[]);
    assert_eq!(code, 23, "{text}");
    let groups = groups(&text);
    assert_eq!(groups.len(), 8, "{text}");
    let at = |marker: &str| format!("leaks.py:{}", line(marker));
    for g in groups.iter().filter(|g| !g[0].contains("6.84 KiB")) {
        // The folded native frames of ctypes, then the script's line as frame #0.
        assert!(
            g[1].starts_with("… ") && g[1].contains(" frames in "),
            "{g:?}"
        );
        assert!(
            g[2].starts_with("#0 cuda_malloc at ") && g[2].ends_with(&at("alloc")),
            "{g:?}"
        );
    }
    let loop_group = groups
        .iter()
        .find(|g| g.iter().any(|l| l.contains("leak_in_loop")))
        .expect("the loop's group");
    assert!(loop_group[0].contains("in 5 allocations"), "{loop_group:?}");
    assert!(loop_group
        .iter()
        .any(|l| l.starts_with("#1 leak_in_loop at ") && l.ends_with(&at("loop"))));
    let forward = if py.version >= (3, 11) {
        "Model.forward"
    } else {
        "forward"
    };
    assert!(text.contains(&format!("#1 {forward} at ")), "{text}");
    for p in ["path_a", "path_b"] {
        let hits = groups
            .iter()
            .filter(|g| g.iter().any(|l| l.starts_with(&format!("#1 {p} at "))))
            .count();
        assert_eq!(hits, 1, "{p} is one group of its own:\n{text}");
    }

    // --native shows every frame, with the ctypes call innermost.
    let (_, native) = report(dir, &["--native"]);
    assert!(!native.contains("(--native)"), "{native}");
    assert!(native.contains("ffi_call"), "{native}");
    assert!(native.contains("#3 cuda_malloc at ") || native.contains("cuda_malloc at "));

    // JSON keeps the Python frames as frames with their kind, and the folded runs.
    let (_, json) = report(dir, &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let leaks = v["leaks"].as_array().expect("leaks");
    assert_eq!(leaks.len(), 8);
    let first = &leaks[0]["frames"];
    assert!(first[0]["folded_frames"].as_u64().unwrap() > 0, "{first}");
    assert_eq!(first[1]["kind"], "python", "{first}");
    assert_eq!(first[1]["function"], "cuda_malloc", "{first}");
    assert_eq!(first[1]["line"], line("alloc"), "{first}");

    // SARIF points at the script's line.
    let (_, sarif) = report(dir, &["--format", "sarif"]);
    let v: serde_json::Value = serde_json::from_str(&sarif).unwrap();
    for r in v["runs"][0]["results"].as_array().unwrap() {
        if r["properties"]["bytes"] == 7000 {
            continue; // from __del__ at shutdown: perhaps without Python frames
        }
        let loc = &r["locations"][0]["physicalLocation"];
        let uri = loc["artifactLocation"]["uri"].as_str().unwrap_or("");
        assert!(uri.ends_with("leaks.py"), "{r}");
        assert_eq!(loc["region"]["startLine"], line("alloc"), "{r}");
    }

    // Markdown names the lines too.
    let (_, md) = report(dir, &["--format", "markdown"]);
    assert!(md.contains("path\\_b at "), "{md}");
}

#[test]
fn suppressions_match_python_functions_and_script_files() {
    let py = &pythons()[0];
    let run = run(py, "cdll", &[]);
    let scratch = tempfile::tempdir().unwrap();
    let rules = scratch.path().join("rules.txt");
    std::fs::write(&rules, "leak:train_step\nleak:path_*\n").unwrap();
    let (code, text) = report(run.dir.path(), &["--suppressions", rules.to_str().unwrap()]);
    assert_eq!(code, 23, "{text}");
    assert_eq!(groups(&text).len(), 5, "{text}");
    assert!(!text.contains("train_step at"), "{text}");
    assert!(!text.contains("path_a at"), "{text}");
    std::fs::write(&rules, "leak:leaks.py\n").unwrap();
    let (_, text) = report(run.dir.path(), &["--suppressions", rules.to_str().unwrap()]);
    // Everything is in leaks.py but the finalizer's block, which may have no Python frames.
    let left = groups(&text);
    assert!(
        left.iter().all(|g| g[0].contains("6.84 KiB")),
        "every leak with Python frames is in leaks.py:\n{text}"
    );
}

#[test]
fn growth_names_the_python_line_that_keeps_allocating() {
    let py = &pythons()[0];
    let script = format!(
        r#"
import ctypes, time
rt = ctypes.CDLL("{NULLCUDA_DIR}/libcudart.so.13")
kept = []
def step():
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), 65536) == 0  # grows here: line 7
    kept.append(p)
for _ in range(20):
    step()
    time.sleep(0.05)
"#
    );
    let run = Scenario::program(&py.path)
        .arg("-c")
        .arg(&script)
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.15")
        .run_shim();
    run.assert_exit(0);
    let (code, text) = report(run.dir.path(), &["--growth"]);
    assert_eq!(code, 23, "{text}");
    assert!(text.contains("Suspect 1 of 1"), "{text}");
    assert!(
        text.lines().any(|l| l.trim() == "#0 step at <string>:7"),
        "{text}"
    );
}

/// Where each version's `PyThreadState` keeps the first pointer the shim's walk follows
/// (`frame`, `cframe`, `current_frame`), as shim/src/python/layout.rs has it.
fn first_frame_pointer(v: (u32, u32)) -> u32 {
    match v {
        (3, 9) | (3, 10) => 24,
        (3, 11) | (3, 12) => 56,
        _ => 72,
    }
}

#[test]
fn a_thread_state_pointing_into_unmapped_memory_costs_python_frames_not_the_program() {
    let script = python_script("unmapped_frame.py");
    let worker = python_marker_line(&script, "worker");
    for py in &pythons() {
        let context = format!("python {}.{}", py.version.0, py.version.1);
        let run = Scenario::program(&py.path)
            .arg(script.to_str().unwrap())
            .arg(FRAMEWORKS_DIR)
            .arg(&first_frame_pointer(py.version).to_string())
            .run_shim();
        run.assert_exit(0);
        let during: u64 = run
            .stdout
            .strip_prefix("done ")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{context}: {:?}", run.stdout));
        assert!(
            during > 0,
            "{context}: no hook ran while the pointer was bad"
        );
        // The walk works again once the pointer is back: the block the loop leaves has the
        // worker's Python frames.
        let dump = run.dump();
        let live: Vec<&LiveRecord> = dump.live.iter().collect();
        assert_eq!(
            live.iter().map(|r| r.size).collect::<Vec<_>>(),
            [8192],
            "{context}"
        );
        let frames: Vec<(&str, u32)> = dump.stacks[live[0].stack]
            .frames
            .iter()
            .filter(|f| f.is_python())
            .map(|f| (f.function.as_deref().unwrap_or("?"), f.line.unwrap_or(0)))
            .collect();
        assert_eq!(
            frames.first(),
            Some(&("worker", worker)),
            "{context}: {frames:?}"
        );
    }
}

#[test]
fn daemon_threads_inside_hooks_while_the_interpreter_finalizes_never_crash_it() {
    // One run at a time: the daemon threads spin, and tests running beside this one (growth's
    // snapshot timing) must not starve on a small machine.
    const RUNS: usize = 50;
    let script = python_script("finalize.py");
    for py in &pythons() {
        let context = format!("python {}.{}", py.version.0, py.version.1);
        for i in 0..RUNS {
            let run = Scenario::program(&py.path)
                .arg(script.to_str().unwrap())
                .arg(FRAMEWORKS_DIR)
                .run_shim();
            // The program's own status, then the shim's exit dump, complete.
            assert_eq!(run.status.code(), Some(7), "{context}, run {i}: {run:?}");
            run.dump();
        }
        eprintln!("{context}: {RUNS} runs, each exited 7");
    }
}

#[test]
fn the_exit_dump_notes_what_the_script_held_when_the_interpreter_began_to_shut_down() {
    let script = python_script("teardown.py");
    let line = |m| python_marker_line(&script, m);
    for py in &pythons() {
        let context = format!("python {}.{}", py.version.0, py.version.1);
        let run = Scenario::program(&py.path)
            .arg(script.to_str().unwrap())
            .arg(NULLCUDA_DIR)
            .run_shim();
        run.assert_exit(0).assert_stdout("done\n");
        let dump = run.dump();
        // Teardown freed the four buffers: at exit only the block never freed is left.
        let sizes: Vec<u64> = dump.live.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [2000], "{context}");
        let f = dump
            .finalizing
            .as_ref()
            .unwrap_or_else(|| panic!("{context}: no finalizing in the exit dump"));
        assert!(
            f.unix_ms >= dump.process.start_unix_ms && f.unix_ms <= dump.process.end_unix_ms,
            "{context}: {f:?}"
        );
        // What was held then, by Python line: the buffers and the block never freed. One line
        // can be several stacks (on 3.13 the interpreter reaches it through two native paths).
        let mut by_line: BTreeMap<(u32, &str), (u64, u64)> = BTreeMap::new();
        for h in &f.held {
            let top = dump.stacks[h.stack]
                .frames
                .iter()
                .find(|fr| fr.is_python() && fr.function.as_deref() != Some("cuda_malloc"))
                .and_then(|fr| fr.line)
                .unwrap_or(0);
            let sum = by_line.entry((top, h.api.as_str())).or_default();
            sum.0 += h.allocations;
            sum.1 += h.bytes;
        }
        let held: Vec<(u32, u64, u64, &str)> = by_line
            .into_iter()
            .map(|((line, api), (n, bytes))| (line, n, bytes, api))
            .collect();
        // The call as the live records name it.
        let api = dump.live[0].api.as_str();
        let mut want = vec![
            (line("buffer"), 4, 4000, api),
            (line("never"), 1, 2000, api),
        ];
        want.sort_unstable();
        assert_eq!(held, want, "{context}");
        assert!(
            dump.live.iter().all(|r| r.seq <= f.seq),
            "{context}: nothing was allocated by teardown"
        );
    }
}

/// The blocks of tests/python/code_reuse.py's dump whose innermost frame of `f` does not name
/// the file and line of the code object that made it (see the test below), of `counts`: the
/// blocks of its first part and of `replaced` (those made before a late watcher are not judged).
fn misnamed_code_objects(py: &Python, dump: &Dump, counts: (u64, u64)) -> Vec<String> {
    let (mut made, mut replaced, mut wrong) = (0, 0, Vec::new());
    for r in &dump.live {
        let (file, line) = match r.size {
            1000..2000 => {
                made += 1;
                let i = r.size - 1000;
                let file = if i % 2 == 1 {
                    "gen.py".to_string()
                } else {
                    format!("gen_{i:04}.py")
                };
                (file, i + 2)
            }
            2000..3000 => {
                replaced += 1;
                ("replaced.py".to_string(), (r.size - 2000) / 2 + 2)
            }
            _ => continue,
        };
        let innermost = dump.stacks[r.stack]
            .frames
            .iter()
            .find(|f| f.is_python() && f.function.as_deref() == Some("f"))
            .unwrap_or_else(|| panic!("{:?}: no frame of f for {} B", py.path, r.size));
        let got = (innermost.file.as_deref(), innermost.line.map(u64::from));
        if got != (Some(file.as_str()), Some(line)) {
            wrong.push(format!("{} B: {got:?}, not {file}:{line}", r.size));
        }
    }
    assert_eq!((made, replaced), counts, "{:?}", py.path);
    wrong
}

/// tests/python/code_reuse.py makes and frees code objects one after another, so that a new one
/// takes the freed one's address, and its names' and line table's (`replaced`: the key the shim
/// tells code objects apart by reads the same). With the code watcher on (3.12+; before 3.12 the
/// script tells the shim what the watcher would), every block must name its own code object's
/// file and line: the walk's memo, each thread's cache and the registry forget a freed one.
/// `late`: the watcher comes after a block was recorded and its code object freed unwatched,
/// so the registry must forget what it met before it was watched.
#[test]
fn a_code_object_made_at_a_freed_ones_address_is_named_by_its_own_lines_once_watched() {
    for py in &pythons() {
        let early = if py.version >= (3, 12) {
            "watch"
        } else {
            "simulate"
        };
        for (mode, counts) in [(early, (200, 200)), ("late", (0, 194))] {
            let run = Scenario::program(&py.path)
                .arg(python_script("code_reuse.py").to_str().unwrap())
                .arg(NULLCUDA_DIR)
                .arg("200")
                .arg(mode)
                .run_shim();
            run.assert_exit(0);
            if mode == "watch" {
                run.assert_stdout("code watcher True\n");
            }
            let wrong = misnamed_code_objects(py, &run.dump(), counts);
            assert!(wrong.is_empty(), "{:?} ({mode}): {wrong:#?}", py.path);
        }
    }
}

/// The same program with the bootstrap `cudaleak run` gives a Python program on PYTHONPATH and
/// nothing else: on 3.12+ the bootstrap adds the watcher at start-up (every block named right);
/// before 3.12 it adds none and the program runs as without it.
#[test]
fn the_bootstrap_adds_the_code_watcher_at_start_up_from_3_12() {
    for py in &pythons() {
        let run = bootstrapped(py, "code_reuse.py", &[NULLCUDA_DIR, "200"]);
        run.assert_exit(0).assert_stdout("");
        let wrong = misnamed_code_objects(py, &run.dump(), (200, 200));
        if py.version >= (3, 12) {
            assert!(wrong.is_empty(), "{:?}: {wrong:#?}", py.path);
        }
    }
}
