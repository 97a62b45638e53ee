//! The frameworks bootstrap (issue 40): python/cudaleak/_sitecustomize.py and _bootstrap.py,
//! copied into a folder first on PYTHONPATH as `cudaleak run` writes them, under the shim, with
//! the fake PyTorch of tests/python/fakefw. PyTorch's own count must reach every dump (its floor
//! rising for a loop that keeps a tensor a step, levelling for a cache that fills and stays),
//! its record at exit must name the `# @keep` line, the program's own `sitecustomize` must still
//! run, and a script that imports no framework must leave no `frameworks` in its dumps.

use std::path::{Path, PathBuf};

use cudaleak_format::{Dump, FrameworkCounter, Frameworks};
use cudaleak_tests::{
    bootstrap_dir, python_marker_line, python_script, pythons, read_raw_dump, Python, Run,
    Scenario, NULLCUDA_DIR,
};

/// A Python program run under the shim with the bootstrap first on PYTHONPATH, then `path`,
/// then the fake PyTorch.
struct Program {
    scenario: Scenario,
    /// Kept until the run is over.
    bootstrap: tempfile::TempDir,
}

impl Program {
    fn new(py: &Python, args: &[&str], path: &[&Path]) -> Self {
        let bootstrap = bootstrap_dir();
        let mut dirs: Vec<PathBuf> = vec![bootstrap.path().to_path_buf()];
        dirs.extend(path.iter().map(|p| p.to_path_buf()));
        dirs.push(python_script("fakefw"));
        let mut scenario = Scenario::program(&py.path)
            .env("PYTHONPATH", std::env::join_paths(dirs).unwrap())
            // Nothing written into the checkout (fakefw) or the bootstrap's folder.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("CUDALEAK_FRAMEWORK_INTERVAL_MS", "10")
            .env("CUDALEAK_FRAMEWORK_WINDOW_MS", "100")
            // PyTorch's default allocator, whatever the developer's environment says.
            .env("PYTORCH_CUDA_ALLOC_CONF", "");
        for a in args {
            scenario = scenario.arg(a);
        }
        Program {
            scenario,
            bootstrap,
        }
    }

    /// `tests/python/<name> NULLCUDA_DIR ARGS…`.
    fn script(py: &Python, name: &str, args: &[&str]) -> Self {
        let script = python_script(name);
        let mut all = vec![script.to_str().unwrap(), NULLCUDA_DIR];
        all.extend(args);
        Program::new(py, &all, &[])
    }

    fn env(mut self, k: &str, v: &str) -> Self {
        self.scenario = self.scenario.env(k, v);
        self
    }

    fn run(self) -> Run {
        let run = self.scenario.run_shim();
        drop(self.bootstrap);
        run
    }
}

/// Every dump of `run`: the snapshots in order, then the exit dump (one process).
fn dumps(run: &Run) -> (Vec<Dump>, Dump) {
    let mut snapshots: Vec<(u64, Dump)> = Vec::new();
    let mut exit = None;
    for path in run.files() {
        check_frameworks_text(&path);
        let dump = read_raw_dump(&path);
        assert_eq!(dump.process.pid, run.pid, "{}", path.display());
        match dump.process.snapshot {
            Some(n) => snapshots.push((n, dump)),
            None => {
                assert!(exit.is_none(), "two exit dumps");
                exit = Some(dump);
            }
        }
    }
    snapshots.sort_by_key(|(n, _)| *n);
    let exit = exit.unwrap_or_else(|| panic!("no exit dump\nstderr:\n{}", run.stderr));
    (snapshots.into_iter().map(|(_, d)| d).collect(), exit)
}

/// A dump without frameworks has no `frameworks` key at all, not an empty one.
fn check_frameworks_text(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let dump = read_raw_dump(path);
    assert_eq!(
        dump.frameworks.is_some(),
        text.contains("\"frameworks\":"),
        "{}",
        path.display()
    );
}

/// The one counter of a dump: PyTorch's native allocator on device 0 (the fake's device 1,
/// never used, is never handed over).
fn torch_counter(dump: &Dump) -> &FrameworkCounter {
    let f = frameworks(dump);
    let c: Vec<_> = f
        .counters
        .iter()
        .map(|c| (c.framework.as_str(), c.backend.as_deref(), c.device))
        .collect();
    assert_eq!(c, [("torch", Some("native"), 0)], "{:?}", dump.process);
    &f.counters[0]
}

fn frameworks(dump: &Dump) -> &Frameworks {
    dump.frameworks
        .as_ref()
        .unwrap_or_else(|| panic!("no frameworks in {:?}", dump.process))
}

/// The number a driver prints after `done `.
fn done(run: &Run) -> u64 {
    run.assert_exit(0);
    run.stdout
        .strip_prefix("done ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("stdout: {:?}\nstderr:\n{}", run.stdout, run.stderr))
}

/// PyTorch's count in every snapshot: read (samples) and consistent (the floor never above the
/// last read, blocks and the pool's sizes known).
fn snapshot_floors(snapshots: &[Dump]) -> Vec<u64> {
    snapshots
        .iter()
        .map(|d| {
            let c = torch_counter(d);
            assert!(c.samples > 0, "{c:?}");
            assert!(c.floor_bytes <= c.bytes, "{c:?}");
            assert!(c.blocks.is_some() && c.floor_blocks.is_some(), "{c:?}");
            assert!(c.reserved_bytes.unwrap() >= c.bytes, "{c:?}");
            assert_eq!(c.active_bytes, Some(c.bytes), "{c:?}");
            c.floor_bytes
        })
        .collect()
}

/// The frames of the record's largest group, as (file name, function, line).
fn top_frames(dump: &Dump) -> Vec<(String, String, u32)> {
    let f = frameworks(dump);
    assert_eq!(f.records.len(), 1, "{:?}", f.records);
    let r = &f.records[0];
    assert_eq!((r.framework.as_str(), r.note.as_deref()), ("torch", None));
    assert!(
        dump.process.start_unix_ms <= r.since_unix_ms && r.since_unix_ms <= r.unix_ms,
        "{r:?}"
    );
    let g = &r.groups[0];
    assert_eq!(g.device, Some(0));
    assert!(g.blocks >= 5, "{g:?}");
    assert_eq!(g.bytes, 512 * g.blocks, "{g:?}");
    // Only the live blocks made while the record was on: none of the fake's freed blocks.
    assert!(
        r.groups.iter().all(|g| g.frames[0]
            .file
            .as_deref()
            .is_some_and(|f| f.ends_with("/frameworks_keep.py"))),
        "{r:?}"
    );
    g.frames
        .iter()
        .map(|fr| {
            assert!(
                fr.is_python() && fr.ip.0 == 0 && fr.module.is_none(),
                "{fr:?}"
            );
            let file = fr.file.as_deref().unwrap();
            let name = Path::new(file).file_name().unwrap().to_string_lossy();
            (
                name.into_owned(),
                fr.function.clone().unwrap(),
                fr.line.unwrap(),
            )
        })
        .collect()
}

fn keep_stack() -> Vec<(String, String, u32)> {
    let line = |m| python_marker_line(&python_script("frameworks_keep.py"), m);
    [
        ("train_step", "keep"),
        ("main", "main"),
        ("<module>", "module"),
    ]
    .iter()
    .map(|(f, m)| ("frameworks_keep.py".to_string(), f.to_string(), line(m)))
    .collect()
}

#[test]
fn pytorch_s_count_of_kept_tensors_rises_from_snapshot_to_snapshot_and_its_record_names_the_keep_line(
) {
    let py = &pythons()[0];
    let run = Program::script(py, "frameworks_keep.py", &["2"])
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.25")
        .env("FAKE_TORCH_SNAPSHOT_S", "0.6")
        .run();
    let kept = done(&run);
    let (snapshots, exit) = dumps(&run);
    // A snapshot may come between the bootstrap's end (Python's exit handlers) and the exit
    // dump; the ones before it are those the script was running for.
    let running: Vec<Dump> = snapshots
        .into_iter()
        .filter(|d| frameworks(d).ended_unix_ms.is_none())
        .collect();
    assert!(running.len() >= 4, "{} snapshots", running.len());
    assert!(running.iter().all(|d| frameworks(d).records.is_empty()));
    // Each interval's floor is above the one before: 512 B more every step.
    let floors = snapshot_floors(&running);
    assert!(floors.windows(2).all(|w| w[0] < w[1]), "{floors:?}");
    // At exit: what the script held after its last step, the temporaries gone.
    let c = torch_counter(&exit);
    assert_eq!((c.bytes, c.blocks), (512 * kept, Some(kept)), "{c:?}");
    let f = frameworks(&exit);
    let ended = f.ended_unix_ms.expect("ended at exit");
    assert!(ended <= exit.process.end_unix_ms);
    // The counts ended with the script, before the record's slow read (0.6 s), not after it.
    assert!(
        f.records[0].unix_ms >= ended + 500,
        "ended {ended}, {:?}",
        f.records[0]
    );
    assert_eq!(top_frames(&exit), keep_stack());
    // Blocks made before the record was turned on carry no frames and are not listed.
    let g = &f.records[0].groups[0];
    assert!(g.blocks < kept, "{g:?} of {kept}");
}

#[test]
fn memory_stats_without_the_nested_call_and_frames_listed_outermost_first_give_the_same_record() {
    let py = &pythons()[0];
    let run = Program::script(py, "frameworks_keep.py", &["1.2"])
        .env("FAKE_TORCH_NO_C", "1")
        .env("FAKE_TORCH_FRAMES", "outermost_first")
        .run();
    let kept = done(&run);
    let (_, exit) = dumps(&run);
    let c = torch_counter(&exit);
    assert_eq!((c.bytes, c.blocks), (512 * kept, Some(kept)), "{c:?}");
    assert_eq!(top_frames(&exit), keep_stack());
}

#[test]
fn a_record_pytorch_refuses_to_turn_on_is_a_note_and_cuda_malloc_async_turns_none_on() {
    let py = &pythons()[0];
    let run = Program::script(py, "frameworks_keep.py", &["1.2"])
        .env("FAKE_TORCH_HISTORY", "fail")
        .run();
    done(&run);
    let (_, exit) = dumps(&run);
    let r = &frameworks(&exit).records;
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(r[0].groups.is_empty(), "{r:?}");
    let note = r[0].note.as_deref().unwrap_or("");
    assert!(
        note.starts_with("PyTorch's record could not be turned on: RuntimeError: ")
            && note.ends_with("the fake's record is broken on purpose"),
        "{note}"
    );

    let run = Program::script(py, "frameworks_keep.py", &["1.2"])
        .env("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync")
        .run();
    let kept = done(&run);
    let (_, exit) = dumps(&run);
    let f = frameworks(&exit);
    let c: Vec<_> = f
        .counters
        .iter()
        .map(|c| (c.backend.as_deref(), c.device, c.bytes))
        .collect();
    assert_eq!(c, [(Some("cudaMallocAsync"), 0, 512 * kept)]);
    assert!(f.ended_unix_ms.is_some());
    assert!(f.records.is_empty(), "{:?}", f.records);
}

#[test]
fn a_cache_that_fills_and_stays_levels_pytorch_s_floor_and_turns_no_record_on() {
    let py = &pythons()[0];
    // Filling takes a second: two or three windows of 500 ms, never the four rises in a row
    // that turn the record on.
    let run = Program::script(py, "frameworks_warm.py", &["3"])
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.25")
        .env("CUDALEAK_FRAMEWORK_WINDOW_MS", "500")
        .run();
    let cached = done(&run);
    let (snapshots, exit) = dumps(&run);
    assert!(snapshots.len() >= 8, "{} snapshots", snapshots.len());
    let floors = snapshot_floors(&snapshots);
    let full = 2048 * cached;
    assert!(floors[0] < full, "{floors:?}");
    // The last third of the run: the cache's bytes, interval after interval.
    let last = &floors[floors.len() - 3..];
    assert_eq!(last, [full, full, full], "{floors:?}");
    let c = torch_counter(&exit);
    assert_eq!((c.bytes, c.blocks), (full, Some(cached)), "{c:?}");
    let f = frameworks(&exit);
    assert!(f.ended_unix_ms.is_some());
    assert!(f.records.is_empty(), "{:?}", f.records);
}

/// A script that makes one fake tensor and allocates through the null runtime, then says
/// which `sitecustomize` Python kept and whether the bootstrap's folder is still on sys.path.
const REPORT_SITE: &str = r#"
import ctypes, os, sys
import torch
rt = ctypes.CDLL(sys.argv[1] + "/libcudart.so.13")
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), 4096) == 0
KEPT = torch.empty(1000)
site = sys.modules.get("sitecustomize")
ours = [e for e in sys.path if os.path.isfile(os.path.join(e, "_cudaleak_bootstrap.py"))]
print(getattr(site, "WHO", None), ours)
"#;

#[test]
fn the_program_s_own_sitecustomize_still_runs_and_sys_path_is_as_without_the_bootstrap() {
    let user = tempfile::tempdir().unwrap();
    std::fs::write(
        user.path().join("sitecustomize.py"),
        "WHO = 'the user\\'s'\n",
    )
    .unwrap();
    for py in &pythons() {
        let context = format!("python {}.{}", py.version.0, py.version.1);
        let run = Program::new(py, &["-c", REPORT_SITE, NULLCUDA_DIR], &[user.path()])
            .env("CUDALEAK_QUIET", "1")
            .run();
        run.assert_exit(0);
        assert_eq!(run.stdout, "the user's []\n", "{context}\n{}", run.stderr);
        assert_eq!(run.stderr, "", "{context}");
        // The bootstrap ran too: PyTorch's count, read at exit.
        let (_, exit) = dumps(&run);
        assert_eq!(torch_counter(&exit).bytes, 1000, "{context}");
    }
}

#[test]
fn a_failing_sitecustomize_of_the_program_is_reported_by_site_as_without_the_bootstrap() {
    let py = &pythons()[0];
    for body in [
        "raise RuntimeError('the user site broke')\n",
        "import no_such_module_of_the_user\n",
    ] {
        let user = tempfile::tempdir().unwrap();
        std::fs::write(user.path().join("sitecustomize.py"), body).unwrap();
        let with = Program::new(py, &["-c", REPORT_SITE, NULLCUDA_DIR], &[user.path()])
            .env("CUDALEAK_QUIET", "1")
            .run();
        let without = Scenario::program(&py.path)
            .arg("-c")
            .arg(REPORT_SITE)
            .arg(NULLCUDA_DIR)
            .env(
                "PYTHONPATH",
                std::env::join_paths([user.path(), &python_script("fakefw")]).unwrap(),
            )
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("CUDALEAK_QUIET", "1")
            .run_shim();
        without.assert_exit(0);
        assert!(
            without
                .stderr
                .starts_with("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"),
            "{}",
            without.stderr
        );
        with.assert_exit(0);
        assert_eq!(without.stdout, "None []\n", "{body}");
        assert_eq!(
            (with.stdout.as_str(), with.stderr.as_str()),
            ("None []\n", without.stderr.as_str()),
            "{body}"
        );
        // The bootstrap ran all the same.
        let (_, exit) = dumps(&with);
        assert_eq!(torch_counter(&exit).bytes, 1000, "{body}");
    }
}

#[test]
fn no_frameworks_in_the_dumps_of_a_script_that_imports_none_or_with_the_bootstrap_off() {
    let py = &pythons()[0];
    // The reader never started: no thread of that name.
    let script = r#"
import ctypes, os, sys, time
rt = ctypes.CDLL(sys.argv[1] + "/libcudart.so.13")
for _ in range(30):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), 4096) == 0
    time.sleep(0.01)
names = [open("/proc/self/task/%s/comm" % t).read().strip() for t in os.listdir("/proc/self/task")]
print("cudaleak-fw" in names)
"#;
    let run = Program::new(py, &["-c", script, NULLCUDA_DIR], &[])
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.1")
        .run();
    run.assert_exit(0).assert_stdout("False\n");
    let (snapshots, exit) = dumps(&run);
    assert!(!snapshots.is_empty());
    assert!(snapshots
        .iter()
        .chain([&exit])
        .all(|d| d.frameworks.is_none()));
    assert_eq!(exit.live.len(), 30);

    let run = Program::script(py, "frameworks_keep.py", &["0.3"])
        .env("CUDALEAK_FRAMEWORKS", "0")
        .run();
    done(&run);
    let (_, exit) = dumps(&run);
    assert!(exit.frameworks.is_none(), "{:?}", exit.frameworks);
}

#[test]
fn python_in_isolated_mode_or_ignoring_the_environment_runs_as_before() {
    for py in &pythons() {
        for flag in ["-I", "-E"] {
            let run = Program::new(
                py,
                &[
                    flag,
                    "-c",
                    "import sys; print('_cudaleak_bootstrap' in sys.modules)",
                ],
                &[],
            )
            .run();
            run.assert_exit(0).assert_stdout("False\n");
        }
    }
}

#[test]
fn a_forked_child_reads_its_own_pytorch_count() {
    for py in &pythons() {
        let context = format!("python {}.{}", py.version.0, py.version.1);
        let run = Program::script(py, "frameworks_fork.py", &[]).run();
        run.assert_exit(0).assert_stdout("child 0\n");
        let files = run.files();
        assert_eq!(files.len(), 2, "{context}: {files:?}");
        let mut by_pid: Vec<Dump> = files.iter().map(|p| read_raw_dump(p)).collect();
        by_pid.sort_by_key(|d| d.process.pid != run.pid);
        let (parent, child) = (&by_pid[0], &by_pid[1]);
        assert_eq!(child.process.forked_from, Some(run.pid), "{context}");
        let p = torch_counter(parent);
        assert_eq!((p.bytes, p.blocks), (3000, Some(1)), "{context}: {p:?}");
        let c = torch_counter(child);
        assert_eq!((c.bytes, c.blocks), (8000, Some(2)), "{context}: {c:?}");
        // The reader started again in the child: many reads of its own, not only the one at
        // its exit.
        assert!(c.samples >= 5, "{context}: {c:?}");
        assert!(frameworks(child).ended_unix_ms.is_some(), "{context}");
    }
}
