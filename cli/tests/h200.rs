//! Real dumps from the H200 (docs/validation.md, 2026-12-03 afternoon, run 3: PyTorch 2.11,
//! transformers, JAX 0.11, CuPy 14.2, numba-cuda 0.68), kept in `tests/fixtures/h200/` so the
//! verdicts on real framework stacks cannot regress in CI, where there is no GPU.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn dir(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200")
        .join(name)
        .display()
        .to_string()
}

/// `cudaleak report ARGS… --format json DIR`: its exit status and parsed output.
fn json(args: &[&str], name: &str) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .env_remove("CUDALEAK_SHIM")
        .arg("report")
        .args(args)
        .args(["--format", "json", &dir(name)])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

#[test]
fn correct_framework_programs_pass_the_gate_with_what_their_caches_hold() {
    for (name, processes, caches) in [
        // The segments the caching allocator made for cuBLAS workspaces are the workspaces'.
        (
            "torch_train-default",
            1,
            &[
                "cublas",
                "pytorch-blas-workspace",
                "pytorch-host",
                "pytorch-native",
            ][..],
        ),
        (
            "bert_train-default",
            1,
            &[
                "cublas",
                "pytorch-blas-workspace",
                "pytorch-host",
                "pytorch-native",
            ],
        ),
        // The program and the 120 ptxas/nvlink runs XLA started (no CUDA allocation).
        ("jax_train-default", 121, &["cublas", "cudnn"]),
        ("cupy_ok-default", 1, &["cupy-pool"]),
        ("numba_ok-default", 1, &["numba"]),
        // torchrun: the launcher and two ranks.
        (
            "ddp_gloo-default",
            3,
            &[
                "cublas",
                "pytorch-blas-workspace",
                "pytorch-host",
                "pytorch-native",
            ],
        ),
    ] {
        let (code, v) = json(&[], name);
        assert_eq!(code, 0, "{name}: {:#}", v["leaks"]);
        assert_eq!(v["leaks"].as_array().unwrap().len(), 0, "{name}");
        assert_eq!(v["summary"]["processes"], processes, "{name}");
        let mut ids: Vec<&str> = v["caches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        ids.sort();
        assert_eq!(ids, caches, "{name}");
        assert!(v["summary"]["cached_bytes"].as_u64().unwrap() > 0, "{name}");
        // They fill their pools at the start: none is still growing at exit.
        for p in v["processes"].as_array().unwrap() {
            assert_eq!(p["pools_growing"], serde_json::json!([]), "{name}");
        }
    }
}

/// The exit dump alone of the loop that keeps a tensor per step (default allocator): no leak,
/// but the pool's segments were taken all through the run, and the report says so.
#[test]
fn a_pool_that_grows_to_the_end_is_noted_in_the_exit_report() {
    let exit = format!("{}/cudaleak.2878.json", dir("torch_keep-default"));
    let out = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args(["report", "--format", "json", &exit])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let growing = v["processes"][0]["pools_growing"].as_array().unwrap();
    assert_eq!(growing.len(), 1, "{growing:?}");
    assert_eq!(growing[0]["cache"], "pytorch-native");
    assert_eq!(growing[0]["tenths"], 6);
    let (held, late) = (
        growing[0]["held_bytes"].as_u64().unwrap(),
        growing[0]["second_half_bytes"].as_u64().unwrap(),
    );
    // 324 MiB in the pool's segments, less the 66 MiB of segments made for cuBLAS workspaces
    // (held for the process, and listed as PyTorch's workspaces).
    assert_eq!(held, 258 << 20);
    assert_eq!(late, 230 << 20);
    let text = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args(["report", &exit])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(
            "    note: still growing at exit: 230.00 MiB of its 258.00 MiB was taken in the \
             second half of the run, in 6 of its 10 tenths."
        ),
        "{text}"
    );
    assert!(
        text.contains("`cudaleak run --growth` finds what grows"),
        "{text}"
    );
    let html = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args(["report", "--format", "html", &exit])
        .output()
        .unwrap();
    let html = String::from_utf8(html.stdout).unwrap();
    assert!(
        html.contains("<p class=\"note\"><b>note:</b> still growing at exit: 230.00 MiB"),
        "no note in the HTML page"
    );
}

/// The suspects of a growth report, with the first frame that has a file.
fn suspects(v: &Value) -> Vec<&Value> {
    v["processes"][0]["callsites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["suspect"] == true)
        .collect()
}

fn first_file_frame(c: &Value) -> (String, u64) {
    let f = c["frames"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].is_string())
        .expect("a frame with a file");
    (
        f["file"].as_str().unwrap().into(),
        f["line"].as_u64().unwrap(),
    )
}

#[test]
fn a_tensor_kept_per_step_is_the_one_suspect_at_the_script_s_line_under_exact_pools() {
    let (code, v) = json(&["--growth"], "torch_keep-exact");
    assert_eq!(code, 23);
    let s = suspects(&v);
    assert_eq!(s.len(), 1, "{:#}", v["processes"][0]["callsites"]);
    // 250 steps of `history.append(torch.full((262144,), …))`: one 1 MiB tensor each.
    assert_eq!(s[0]["growth_allocations"], 250);
    assert_eq!(s[0]["growth_bytes"], 250 * 1024 * 1024);
    assert_eq!(s[0]["api"], "cudaMallocAsync");
    let (file, line) = first_file_frame(s[0]);
    assert!(
        file.ends_with("tests/gpu/frameworks/torch_keep.py"),
        "{file}"
    );
    assert_eq!(line, 27);
}

#[test]
fn with_the_caching_allocator_the_suspect_is_the_pool_and_says_so() {
    let (code, v) = json(&["--growth"], "torch_keep-default");
    assert_eq!(code, 23);
    let s = suspects(&v);
    assert_eq!(s.len(), 1, "{:#}", v["processes"][0]["callsites"]);
    assert_eq!(s[0]["held_by"], "pytorch-native");
    let note = s[0]["held_by_note"].as_str().unwrap();
    assert!(note.contains("--exact-pools"), "{note}");
}

/// The text of `cudaleak report --growth ARGS… DIR`'s first suspect, up to the blank line.
fn first_suspect_text(args: &[&str], name: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .env_remove("CUDALEAK_SHIM")
        .args(["report", "--growth", "--color", "never"])
        .args(args)
        .arg(dir(name))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let start = text.find("Suspect 1 of").expect("a suspect");
    let end = text[start..].find("\n\n").map_or(text.len(), |e| start + e);
    text[start..end].to_string()
}

#[test]
fn a_pool_s_suspect_shows_the_top_of_its_stack_and_frames_shows_the_rest() {
    // The autograd thread's 24 frames that found the cache full say nothing about the kept
    // tensor: three, then a count.
    let short = first_suspect_text(&[], "torch_keep-default");
    let frames = |t: &str| {
        t.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
    };
    assert_eq!(frames(&short), 3, "{short}");
    assert!(short.contains("more frames (--frames)"), "{short}");
    let all = first_suspect_text(&["--frames", "64"], "torch_keep-default");
    assert!(frames(&all) > 3, "{all}");
    assert!(!all.contains("more frames (--frames)"), "{all}");
    // The tensors' own suspect under --exact-pools is not cut.
    let exact = first_suspect_text(&[], "torch_keep-exact");
    assert!(exact.contains("torch_keep.py:27"), "{exact}");
    assert!(!exact.contains("more frames (--frames)"), "{exact}");
}

/// PyTorch with its cache off (`PYTORCH_NO_CUDA_MEMORY_CACHING=1`, torch_train.py, H200
/// 2026-12-04): the cuBLAS workspaces PyTorch gives each handle (32 MiB for the main thread's and
/// autograd's) and its cuBLASLt workspace (1 MiB) are the handles', not leaks; the tensors still
/// alive at exit stay the program's.
#[test]
fn pytorch_s_cublas_workspaces_with_the_cache_off_are_held_not_leaked() {
    let (code, v) = json(&[], "torch_train-nocache");
    assert_eq!(code, 23, "{v}");
    let held: Vec<(&str, u64, u64)> = v["cached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["cache"].as_str().unwrap(),
                g["bytes"].as_u64().unwrap(),
                g["allocations"].as_u64().unwrap(),
            )
        })
        .filter(|(by, _, _)| *by == "pytorch-blas-workspace")
        .collect();
    let total: u64 = held.iter().map(|h| h.1).sum();
    let blocks: u64 = held.iter().map(|h| h.2).sum();
    assert_eq!((total, blocks), (65 << 20, 3), "{held:?}");
    let text = serde_json::to_string(&v["leaks"]).unwrap();
    assert!(!text.contains("setWorkspaceForHandle"), "{text}");
}

/// The H200 series of 2026-12-03 are schema 2: no moment of Python's shutdown, no floors. Their
/// exit dumps are left out, and the report says so; the verdicts stand on the snapshots.
#[test]
fn an_older_python_series_leaves_out_its_exit_dump_and_says_why() {
    for (name, points) in [("torch_keep-exact", 9), ("torch_keep-default", 12)] {
        let (code, v) = json(&["--growth"], name);
        assert_eq!(code, 23, "{name}");
        let p = &v["processes"][0];
        assert_eq!(p["dumps"].as_array().unwrap().len(), points, "{name}");
        let left = p["left_out"].as_array().unwrap();
        assert_eq!(left.len(), 1, "{name}");
        assert_eq!(left[0]["end"], "exit");
        let note = p["left_out_note"].as_str().unwrap();
        assert!(
            note.contains("(schema 2) did not record when the interpreter"),
            "{note}"
        );
        assert_eq!(p["judged"], true);
    }
    // One snapshot and the exit dump: nothing left to compare, and the report says so.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["cudaleak.3386.snapshot-9.json", "cudaleak.3386.json"] {
        std::fs::copy(
            format!("{}/{f}", dir("torch_keep-exact")),
            tmp.path().join(f),
        )
        .unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args(["report", "--growth", "--color", "never"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("No growth suspects"), "{text}");
    assert!(text.contains("note: the exit dump ("), "{text}");
    assert!(text.contains("Cannot be judged: "), "{text}");
    assert!(
        text.ends_with("in 1 process (1 dump); 1 process could not be judged\n"),
        "{text}"
    );
}
