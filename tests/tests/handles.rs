//! Library handles (issue 24), through the stand-ins of cuBLAS, cuBLASLt, cuDNN, cuFFT, cuRAND,
//! cuSPARSE, cuSOLVER and NCCL in tests/frameworks (each allocates through the driver inside
//! its create call, cuFFT in cufftMakePlan*, cuRAND at a generator's first generation, and frees
//! it all in its destroy) and tests/scenarios/handles.c:
//! - `per-request`: a create site that makes a handle per request and never destroys it is one
//!   leak, at the program's create line, with the handle count and the blocks they own;
//! - `one`: one handle of each library, never destroyed, is held, not leaked;
//! - `threads`: one handle per thread from one site is held;
//! - `clean`: every handle destroyed leaves nothing, not even a handle in the dump;
//! - `slow`: under `run --growth`, the per-request site grows at its create line.

use cudaleak_tests::{cudaleak_run, marker_line, read_dump, CliRun};
use serde_json::Value;

/// `cudaleak run --format json -o <file> -- handles MODE`: the run and its report.
fn run(mode: &str) -> (CliRun, Value) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let opts = ["--format", "json", "-o", report.to_str().unwrap()];
    let run = cudaleak_run(&opts, "handles", &[mode], &[]);
    assert_eq!(run.stdout, "done\n", "stderr:\n{}", run.stderr);
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report: {e}\nstderr:\n{}", run.stderr));
    (run, serde_json::from_str(&text).unwrap())
}

/// The one dump of the run.
fn dump(run: &CliRun) -> cudaleak_format::Dump {
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    read_dump(&dumps[0])
}

/// The line of the group's first frame in the scenario's source.
fn first_line(group: &Value) -> u64 {
    let f = &group["frames"][0];
    assert!(f["function"].is_string(), "{group:#}");
    assert!(
        f["file"].as_str().unwrap().ends_with("handles.c"),
        "{group:#}"
    );
    f["line"].as_u64().unwrap()
}

#[test]
fn handles_made_per_request_and_never_destroyed_are_one_leak_per_create_site() {
    let (run, v) = run("per-request");
    run.assert_exit(23);
    // (library, handles, blocks, bytes, create call, line) of every leak.
    let mut leaks: Vec<(String, u64, u64, u64, String, u64)> = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let h = &g["handles"];
            (
                h["library"].as_str().unwrap().to_string(),
                h["count"].as_u64().unwrap(),
                g["allocations"].as_u64().unwrap(),
                g["bytes"].as_u64().unwrap(),
                g["api"].as_str().unwrap().to_string(),
                first_line(g),
            )
        })
        .collect();
    leaks.sort();
    let line = |m| u64::from(marker_line("handles", m));
    assert_eq!(
        leaks,
        [
            // cuBLAS: a 1 MiB workspace and 4 KiB of scratch per handle.
            (
                "cublas".to_string(),
                40,
                80,
                40 * ((1 << 20) + 4096),
                "cublasCreate_v2".to_string(),
                line("create_per_request")
            ),
            // cuDNN: 48 KiB and 1 KiB per handle.
            (
                "cudnn".to_string(),
                5,
                10,
                5 * (49152 + 1024),
                "cudnnCreate".to_string(),
                line("cudnn_per_request")
            ),
            // cuFFT: the work area cufftPlan1d makes through the exported cufftMakePlan1d.
            (
                "cufft".to_string(),
                5,
                5,
                5 * 256 * 8 * 10,
                "cufftPlan1d".to_string(),
                line("plan_per_request")
            ),
            // cuRAND: the state made at the first generation, a call after the create.
            (
                "curand".to_string(),
                5,
                5,
                5 * 192 * 1024,
                "curandCreateGenerator".to_string(),
                line("gen_per_request")
            ),
        ]
    );
    assert_eq!(v["summary"]["leaked_allocations"], 100);
    // The dump lists every handle, each with its create stack and the blocks it owns.
    let d = dump(&run);
    assert_eq!(d.cudaleak_dump, 5);
    assert_eq!(d.handles.len(), 55);
    let live: std::collections::HashSet<u64> = d.live.iter().map(|r| r.seq).collect();
    let owned: usize = d.handles.iter().map(|h| h.blocks.len()).sum();
    assert_eq!(owned, 100, "every live block belongs to its handle");
    assert!(d
        .handles
        .iter()
        .all(|h| !h.destroyed && h.blocks.iter().all(|s| live.contains(s))));
}

#[test]
fn the_text_report_says_how_many_handles_a_site_left_and_where_it_made_them() {
    let run = cudaleak_run(&[], "handles", &["per-request"], &[]);
    run.assert_exit(23);
    let line = marker_line("handles", "create_per_request");
    let head = "40.16 MiB (42106880 B) in 40 cuBLAS handles never destroyed (80 allocations) via \
                cublasCreate_v2 (device 0)";
    let at = format!("#0 handle_request at scenarios/handles.c:{line} (handles)");
    let text = &run.stdout;
    let i = text.find(head).unwrap_or_else(|| panic!("{text}"));
    assert!(text[i..].lines().nth(1).unwrap().trim() == at, "{text}");
    assert!(
        text.contains("SUMMARY: 41.43 MiB leaked in 100 allocations and 55 library handles"),
        "{text}"
    );
}

#[test]
fn one_handle_of_each_library_kept_for_the_process_is_held_not_leaked() {
    let (run, v) = run("one");
    run.assert_exit(0);
    assert_eq!(v["leaks"], serde_json::json!([]));
    let mut caches: Vec<(&str, u64)> = v["caches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["bytes"].as_u64().unwrap()))
        .collect();
    caches.sort();
    assert_eq!(
        caches,
        [
            // cuBLAS (1 MiB + 4 KiB), cuBLASLt (64 KiB), and the cuBLAS handle cuSOLVER made.
            ("cublas", 2 * ((1 << 20) + 4096) + 65536),
            ("cudnn", 49152 + 1024),
            ("cufft", 1000 * 8 * 3),
            ("curand", 192 * 1024),
            ("cusolver", 32768),
            // Its buffers, and the channels its first collective set up.
            ("nccl", (1 << 20) + (2 << 20)),
        ]
    );
    // Eight handles (cuSOLVER's own cuBLAS handle is part of it), each at its line.
    let d = dump(&run);
    let mut made: Vec<(String, String, usize)> = d
        .handles
        .iter()
        .map(|h| {
            let f = &d.stacks[h.stack].frames[0];
            assert_eq!(f.function.as_deref(), Some("init_libraries"), "{h:?}");
            (h.library.clone(), h.create.clone(), h.blocks.len())
        })
        .collect();
    made.sort();
    let expected = [
        ("cublas", "cublasCreate_v2", 2),
        ("cublasLt", "cublasLtCreate", 1),
        ("cudnn", "cudnnCreate", 2),
        ("cufft", "cufftCreate", 1),
        ("curand", "curandCreateGenerator", 1),
        ("cusolver", "cusolverDnCreate", 3),
        ("cusparse", "cusparseCreate", 0),
        ("nccl", "ncclCommInitRank", 2),
    ]
    .map(|(l, c, n)| (l.to_string(), c.to_string(), n));
    assert_eq!(made, expected);
    let line_of = |library: &str| {
        let h = d.handles.iter().find(|h| h.library == library).unwrap();
        d.stacks[h.stack].frames[0].line
    };
    assert_eq!(line_of("cufft"), Some(marker_line("handles", "one_cufft")));
    assert_eq!(line_of("nccl"), Some(marker_line("handles", "one_nccl")));
}

#[test]
fn one_handle_per_thread_from_one_site_is_held() {
    let (run, v) = run("threads");
    run.assert_exit(0);
    assert_eq!(v["leaks"], serde_json::json!([]));
    let d = dump(&run);
    let threads: std::collections::HashSet<u64> = d.handles.iter().map(|h| h.thread).collect();
    assert_eq!((d.handles.len(), threads.len()), (4, 4));
}

#[test]
fn handles_destroyed_leave_nothing_behind() {
    let (run, v) = run("clean");
    run.assert_exit(0);
    assert_eq!(v["leaks"], serde_json::json!([]));
    let d = dump(&run);
    assert!(d.live.is_empty(), "{:?}", d.live);
    assert!(d.handles.is_empty(), "{:?}", d.handles);
    // No handle: the dump is of the version without them.
    assert_eq!(d.cudaleak_dump, 4);
}

#[test]
fn handles_made_per_request_grow_at_the_create_line_under_growth() {
    // 40 requests 100 ms apart: the auto schedule takes a snapshot a second.
    let run = cudaleak_run(&["--growth"], "handles", &["slow"], &[]);
    run.assert_exit(23);
    let out = &run.stdout;
    let line = marker_line("handles", "create_per_request");
    let at = format!("#0 handle_request at scenarios/handles.c:{line} (handles)");
    let suspect = out
        .find("Suspect 1 of 1: ")
        .unwrap_or_else(|| panic!("{out}"));
    let first_frame = out[suspect..].lines().find(|l| l.trim().starts_with("#0"));
    assert_eq!(
        first_frame.map(str::trim),
        Some(at.as_str()),
        "the suspect is the create call:\n{out}"
    );
    assert!(
        out[suspect..]
            .lines()
            .next()
            .unwrap()
            .contains("cublasCreate_v2"),
        "{out}"
    );
}

#[test]
fn suppressions_and_min_bytes_apply_to_handle_leaks_as_to_any_leak() {
    let dir = tempfile::tempdir().unwrap();
    let supp = dir.path().join("handles.supp");
    std::fs::write(&supp, "leak:handle_request\nleak:rng_request\n").unwrap();
    let run = cudaleak_run(
        &[
            "--suppressions",
            supp.to_str().unwrap(),
            "--min-bytes",
            "250000",
        ],
        "handles",
        &["per-request"],
        &[],
    );
    // Left: the cuDNN handles (250880 B); the cuFFT plans (102400 B) are below --min-bytes.
    run.assert_exit(23);
    let out = &run.stdout;
    assert!(out.contains("Leak 1 of 1: "), "{out}");
    assert!(out.contains("in 5 cuDNN handles never destroyed"), "{out}");
    assert!(!out.contains("cuBLAS handles never destroyed"), "{out}");
}
