//! Several copies of the shim in one process (two paths in LD_PRELOAD, `LD_PRELOAD=/other/copy.so
//! cudaleak run …`): the first in load order records, the others pass every call through, so a
//! process still writes one dump that counts each block once — exactly what one copy writes.

use std::path::{Path, PathBuf};

use cudaleak_format::Dump;
use cudaleak_tests::{cudaleak_run, first_frame, read_dump, shim, summary, Run, Scenario};

/// A second copy of the shim, at another path (another file: the loader would load one file
/// named twice only once).
fn copy_of_shim(dir: &Path) -> PathBuf {
    let copy = dir.join("libcudaleak.so");
    std::fs::copy(shim(), &copy).expect("copy the shim");
    copy
}

fn preload(paths: &[&Path]) -> String {
    let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    paths.join(":")
}

/// What a dump says about the program's memory, without what differs between two runs
/// (pids, times, addresses, the shim's own counters).
fn memory(dump: &Dump) -> (cudaleak_format::Summary, Vec<(u64, String, String)>) {
    let mut live: Vec<(u64, String, String)> = dump
        .live
        .iter()
        .map(|r| {
            let frame = first_frame(dump, r.stack);
            (
                r.size,
                r.api.clone(),
                frame.function.clone().unwrap_or_default(),
            )
        })
        .collect();
    live.sort();
    (dump.summary.clone(), live)
}

fn run(scenario: &str, args: &[&str], preload: Option<String>) -> Run {
    let mut s = Scenario::new(scenario);
    for a in args {
        s = s.arg(a);
    }
    if let Some(p) = preload {
        s = s.env("LD_PRELOAD", p);
    }
    s.run_shim()
}

const COPIES_LINE: &str = "cudaleak: 2 copies of the shim are loaded; this one records (";

#[test]
fn two_copies_in_ld_preload_write_one_dump_that_counts_each_block_once() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of_shim(dir.path());
    // The runtime, cudaGetDriverEntryPoint and dlsym routes (mixed_paths), the driver linked
    // with -lcuda (driver_each), and the static runtime's cuGetProcAddress route.
    let cases: [(&str, &[&str]); 4] = [
        ("mixed_paths", &[]),
        ("driver_each", &["leak"]),
        ("driver_pointers", &["getproc", "leak"]),
        ("static_runtime", &[]),
    ];
    for (scenario, args) in cases {
        let alone = run(scenario, args, None);
        alone.assert_exit(0);
        let expected = memory(&alone.dump());
        for order in [[shim(), &copy], [&copy, shim()]] {
            let both = run(scenario, args, Some(preload(&order)));
            both.assert_exit(0).assert_stdout(&alone.stdout);
            assert_eq!(
                memory(&both.dump()),
                expected,
                "{scenario} {args:?} under {order:?}\nstderr:\n{}",
                both.stderr
            );
            let lines: Vec<&str> = both
                .stderr
                .lines()
                .filter(|l| l.starts_with("cudaleak: "))
                .collect();
            let line = format!(
                "{COPIES_LINE}{}), the other passes every call through ({})",
                order[0].display(),
                order[1].display()
            );
            assert_eq!(lines.len(), 2, "{scenario}: {}", both.stderr);
            assert_eq!(lines[0], line, "{scenario}");
            assert!(lines[1].contains(" still live at exit -> "), "{lines:?}");
        }
    }
    // mixed_paths' blocks, counted once: 111 + 222 + 444 B live.
    let dump = run("mixed_paths", &[], Some(preload(&[shim(), &copy]))).dump();
    assert_eq!(dump.summary, summary(4, 1, 0, 0, 0, 3, 777, 777, 1110));
}

#[test]
fn a_copy_the_program_dlopens_later_stays_passive() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of_shim(dir.path());
    let run = Scenario::new("dlopen_copy")
        .env("SHIM_COPY", &copy)
        .run_shim();
    run.assert_exit(0).assert_stdout("loaded 2\n");
    let dump = run.dump();
    assert_eq!(dump.summary, summary(3, 0, 0, 0, 0, 3, 600, 600, 600));
    // The recorder did not know of the copy when it started, and the copy says nothing.
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(lines[0].contains(" still live at exit -> "), "{lines:?}");
}

#[test]
fn a_process_without_cuda_says_nothing_of_the_copies() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of_shim(dir.path());
    let run = run(
        "quiet_children",
        &["helper"],
        Some(preload(&[shim(), &copy])),
    );
    run.assert_exit(0);
    assert_eq!(run.stderr, "");
    assert!(run.dump().summary.is_empty());
}

#[test]
fn cudaleak_run_with_another_copy_already_preloaded_reports_each_leak_once() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of_shim(dir.path());
    let copy_env = copy.display().to_string();
    // LD_PRELOAD reaches `cudaleak` itself too: its copy writes an (empty) dump of the CLI
    // process, here rather than into the working directory.
    let cli_dumps = tempfile::tempdir().unwrap();
    let cli_output = format!("{}/", cli_dumps.path().display());
    let run = cudaleak_run(
        &[],
        "mixed_paths",
        &[],
        &[("LD_PRELOAD", &copy_env), ("CUDALEAK_OUTPUT", &cli_output)],
    );
    run.assert_exit(23);
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1, "one dump: {dumps:?}\n{}", run.stderr);
    let dump = read_dump(&dumps[0]);
    assert_eq!(dump.summary, summary(4, 1, 0, 0, 0, 3, 777, 777, 1110));
    assert!(
        run.stdout
            .contains("SUMMARY: 777 B leaked in 3 allocations from 3 callsites (1 process)"),
        "{}",
        run.stdout
    );
    // `run` appends its shim: the copy already there comes first and records.
    assert!(
        run.stderr.contains(&format!(
            "{COPIES_LINE}{copy_env}), the other passes every call through ({})",
            shim().display()
        )),
        "{}",
        run.stderr
    );
}
