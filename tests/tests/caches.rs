//! Blocks held by caches and library handles at exit: a program whose allocating functions carry
//! the names of PyTorch's caching allocator and cuBLAS (the stand-ins in tests/frameworks) passes
//! the gate; the same program with leaks of its own (one from user code that the caching
//! allocator calls back, one that cuBLAS hands to its caller) fails it, with exactly those in
//! `"leaks"`.

use cudaleak_tests::{cudaleak_run, marker_line, CliRun};
use serde_json::Value;

/// `cudaleak run --format json -o <file> OPTIONS -- framework_caches ARGS`: the run and its report.
fn run_json(options: &[&str], args: &[&str]) -> (CliRun, Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut opts = vec!["--format", "json", "-o", report.to_str().unwrap()];
    opts.extend_from_slice(options);
    let run = cudaleak_run(&opts, "framework_caches", args, &[]);
    assert_eq!(run.stdout, "done\n", "stderr:\n{}", run.stderr);
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report: {e}\nstderr:\n{}", run.stderr));
    (run, serde_json::from_str(&text).unwrap())
}

/// (cache id, bytes, allocations) of every cached group, sorted.
fn cached(v: &Value) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = v["cached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["cache"].as_str().unwrap().to_string(),
                g["bytes"].as_u64().unwrap(),
                g["allocations"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn expected_cached() -> Vec<(String, u64, u64)> {
    let mut v = vec![
        ("cublas".to_string(), 1 << 20, 1),
        ("cublas".to_string(), 4096, 1),
        ("pytorch-async".to_string(), 1 << 20, 1),
        ("pytorch-native".to_string(), 2 << 20, 1),
        ("pytorch-native".to_string(), 2 << 20, 1),
    ];
    v.sort();
    v
}

fn function(frame: &Value) -> &str {
    frame["function"].as_str().unwrap_or("?")
}

#[test]
fn a_program_whose_memory_is_all_held_by_caches_passes_the_gate() {
    let (run, v) = run_json(&[], &[]);
    run.assert_exit(0);
    assert_eq!(v["leaks"], serde_json::json!([]));
    assert_eq!(cached(&v), expected_cached());
    let caches: Vec<(&str, u64)> = v["caches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        caches,
        [
            ("pytorch-native", 4 << 20),
            ("cublas", (1 << 20) + 4096),
            ("pytorch-async", 1 << 20)
        ]
    );
    assert_eq!(v["summary"]["cached_bytes"], (6 << 20) + 4096);
    assert_eq!(v["summary"]["leaked_allocations"], 0);
    assert_eq!(v["gate"]["failed"], false);
    // The segment's innermost frame is the caching allocator itself, named from the symbol table.
    let native = v["cached"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["cache"] == "pytorch-native")
        .unwrap();
    assert!(
        function(&native["frames"][0]).starts_with(
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block("
        ),
        "{native:#}"
    );
}

#[test]
fn strict_counts_what_caches_hold() {
    let (run, v) = run_json(&["--fail-on", "strict"], &[]);
    run.assert_exit(23);
    assert_eq!(v["leaks"], serde_json::json!([]));
    assert_eq!(
        v["gate"]["reasons"],
        serde_json::json!(["cached memory (--fail-on strict)"])
    );
}

#[test]
fn user_leaks_fail_the_gate_even_under_the_caching_allocator_and_only_they_are_leaks() {
    let (run, v) = run_json(&[], &["leak"]);
    run.assert_exit(23);
    assert_eq!(cached(&v), expected_cached());
    let mut leaks: Vec<(u64, String, String)> = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let frames = g["frames"].as_array().unwrap();
            let named: Vec<&str> = frames.iter().map(function).filter(|f| *f != "?").collect();
            (
                g["bytes"].as_u64().unwrap(),
                named[0].to_string(),
                named.get(1).copied().unwrap_or("").to_string(),
            )
        })
        .collect();
    leaks.sort();
    assert_eq!(
        leaks,
        [
            (4096, "user_leak".to_string(), "main".to_string()),
            (
                8192,
                "user_hook".to_string(),
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block(unsigned long, void* (*)(unsigned long))".to_string()
            ),
            (16384, "cublasAlloc".to_string(), "user_owned".to_string()),
        ]
    );
    // Each leak points at the scenario's own line.
    let line_of = |bytes: u64, func: &str| -> u64 {
        let g = v["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["bytes"] == bytes)
            .unwrap();
        g["frames"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| function(f) == func)
            .and_then(|f| f["line"].as_u64())
            .unwrap_or(0)
    };
    assert_eq!(
        line_of(4096, "user_leak"),
        u64::from(marker_line("framework_caches", "user_leak"))
    );
    assert_eq!(
        line_of(8192, "user_hook"),
        u64::from(marker_line("framework_caches", "user_hook"))
    );
    assert_eq!(
        line_of(16384, "user_owned"),
        u64::from(marker_line("framework_caches", "user_owned"))
    );
    assert_eq!(v["summary"]["leaked_bytes"], 4096 + 8192 + 16384);
    assert_eq!(v["gate"]["reasons"], serde_json::json!(["leaks"]));
}

#[test]
fn a_cache_line_in_the_suppressions_file_holds_the_program_s_own_pool() {
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("ci.supp");
    std::fs::write(
        &supp,
        "# our own pools\ncache:user_leak\ncache:user_owned\nleak:user_hook\n",
    )
    .unwrap();
    let (run, v) = run_json(&["--suppressions", supp.to_str().unwrap()], &["leak"]);
    // user_leak is at the allocating end: held. user_owned is not (cublasAlloc's frames are):
    // still a leak, so the gate fails. user_hook is suppressed as a leak.
    run.assert_exit(23);
    let mut ids: Vec<&str> = v["cached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["cache"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "cache:user_leak",
            "cublas",
            "cublas",
            "pytorch-async",
            "pytorch-native",
            "pytorch-native"
        ]
    );
    let leaks: Vec<u64> = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(leaks, [16384]);
    let user = v["caches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cache:user_leak")
        .unwrap();
    assert_eq!(user["builtin"], false);
    assert!(
        user["rule"].as_str().unwrap().ends_with("ci.supp:2"),
        "{user}"
    );
    assert_eq!(v["suppressed"]["rules"][0]["rule"], "leak:user_hook");
    assert_eq!(v["suppressed"]["rules"][0]["bytes"], 8192);
}

#[test]
fn the_text_report_shows_caches_apart_with_what_releases_them() {
    let run = cudaleak_run(&[], "framework_caches", &[], &[]);
    run.assert_exit(0);
    let out = &run.stdout;
    assert!(out.contains("\nNo leaks.\n"), "{out}");
    assert!(
        out.contains("Held by caches and library handles: 6.00 MiB in 5 allocations; not leaks, not counted by the gate (--fail-on strict counts them)\n"),
        "{out}"
    );
    // One line per cache by default; --show-cached lists the callsites and the release text.
    assert!(
        out.contains("  cuBLAS / cuBLASLt handles [cublas]: 1.00 MiB in 2 allocations from "),
        "{out}"
    );
    assert!(!out.contains("    release: "), "{out}");
    assert!(
        out.contains("  (--show-cached lists each callsite and what would release the memory)\n"),
        "{out}"
    );
    assert!(
        out.ends_with("SUMMARY: 0 B leaked in 0 allocations from 0 callsites (1 process); 6.00 MiB held by caches\n"),
        "{out}"
    );
    let run = cudaleak_run(&["--show-cached"], "framework_caches", &[], &[]);
    run.assert_exit(0);
    let out = &run.stdout;
    assert!(
        out.contains("    release: torch.cuda.empty_cache()"),
        "{out}"
    );
    assert!(out.contains("  cuBLAS / cuBLASLt handles [cublas]: 1.00 MiB in 2 allocations\n"));
    assert!(!out.contains("--show-cached lists"), "{out}");
}
