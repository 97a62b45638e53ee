//! `report --since SEQ` and `--pools-emptied` (what the pytest plugin asks of a test's dump), and
//! `cudaleak env` (what it starts pytest under), end to end on a real H200 dump: PyTorch with
//! the cudaMallocAsync backend, two kept tensors, cuBLAS handles and their workspaces.

mod common;

use predicates::prelude::*;

use common::{bin, fx, report, run_env, RunEnv};

const TORCH_KEEP: &str = "h200/torch_keep-exact/cudaleak.3386.json";

fn json(args: &[&str]) -> serde_json::Value {
    let out = report(&[&["--format", "json"], args, &[&fx(TORCH_KEEP)]].concat())
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

fn leaked(doc: &serde_json::Value) -> Vec<(String, u64)> {
    doc["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["cache"].as_str().unwrap_or("").to_string(),
                g["bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn pools_emptied_turns_what_a_pool_still_holds_into_leaks_and_leaves_handles_held() {
    report(&[&fx(TORCH_KEEP)]).code(0);
    report(&["--pools-emptied", &fx(TORCH_KEEP)])
        .code(23)
        .stdout(predicate::str::contains(
            "    note: still held by PyTorch CUDA allocator (cudaMallocAsync backend) [pytorch-async] \
             with its pools emptied (nothing to do: the backend frees each block with its tensor): \
             an object made here is kept\n",
        ))
        .stdout(predicate::str::contains("torch_keep.py:11\n"));
    let doc = json(&["--pools-emptied"]);
    let leaks = leaked(&doc);
    assert!(!leaks.is_empty());
    assert!(
        leaks
            .iter()
            .all(|(cache, _)| cache == "pytorch-async" || cache == "pytorch-host"),
        "only the pools' blocks (device tensors, a pinned one); cuBLAS handles and workspaces \
         stay held: {leaks:?}"
    );
    let held: Vec<&str> = doc["cached"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["cache"].as_str())
        .collect();
    assert!(
        held.contains(&"cublas") && held.contains(&"pytorch-blas-workspace"),
        "{held:?}"
    );
    assert!(!held.contains(&"pytorch-async"), "{held:?}");
}

#[test]
fn since_keeps_only_what_was_allocated_after_the_mark() {
    let all = json(&["--pools-emptied", "--since", "0"]);
    let after = json(&["--pools-emptied", "--since", "24"]);
    let sum = |d: &serde_json::Value| leaked(d).iter().map(|(_, b)| b).sum::<u64>();
    assert_eq!(
        all["leaks"],
        json(&["--pools-emptied"])["leaks"],
        "--since 0 is everything"
    );
    assert!(sum(&after) < sum(&all), "{} < {}", sum(&after), sum(&all));
    report(&["--pools-emptied", "--since", "6169", &fx(TORCH_KEEP)])
        .code(0)
        .stdout(predicate::str::contains("No leaks."))
        .stdout(predicate::str::contains(
            "SUMMARY: 0 B leaked in 0 allocations from 0 callsites (1 process)",
        ));
}

#[test]
fn pools_emptied_is_not_for_growth() {
    report(&["--growth", "--pools-emptied", &fx(TORCH_KEEP)])
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

#[test]
fn env_prints_what_run_gives_the_program() {
    let RunEnv { dir, shim, .. } = run_env();
    let out = bin()
        .args([
            "env",
            "--json",
            "--exact-pools",
            "--growth",
            "--out",
            "dumps",
            "--shim",
        ])
        .arg(&shim)
        .env("LD_PRELOAD", "/opt/other.so")
        .env_remove("PYTORCH_CUDA_ALLOC_CONF")
        .env_remove("CUDALEAK_SNAPSHOT_INTERVAL")
        .current_dir(dir.path())
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let vars: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let shim = shim.canonicalize().unwrap();
    assert_eq!(
        vars["LD_PRELOAD"],
        format!("/opt/other.so:{}", shim.display())
    );
    let out_dir = dir.path().canonicalize().unwrap().join("dumps");
    assert_eq!(vars["CUDALEAK_OUTPUT"], format!("{}/", out_dir.display()));
    assert_eq!(vars["PYTORCH_CUDA_ALLOC_CONF"], "backend:cudaMallocAsync");
    assert_eq!(vars["XLA_PYTHON_CLIENT_ALLOCATOR"], "platform");
    assert_eq!(vars["CUDALEAK_SNAPSHOT_INTERVAL"], "auto");

    bin()
        .args(["env", "--shim"])
        .arg(dir.path().join("libcudaleak.so"))
        .env_remove("LD_PRELOAD")
        .assert()
        .code(0)
        .stdout(format!("LD_PRELOAD={}\n", shim.display()));
    bin()
        .args(["env", "--shim", "/nonexistent/libcudaleak.so"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--shim /nonexistent/libcudaleak.so: no such file",
        ));
}

#[test]
fn env_run_in_makes_a_fresh_run_directory_as_run_does() {
    let RunEnv { dir, shim, .. } = run_env();
    let env = |extra: &[&str]| {
        bin()
            .arg("env")
            .args(extra)
            .arg("--shim")
            .arg(&shim)
            .current_dir(dir.path())
            .assert()
    };
    let out = env(&["--json", "--run-in", "runs"])
        .code(0)
        .get_output()
        .stdout
        .clone();
    let vars: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let output = vars["CUDALEAK_OUTPUT"].as_str().unwrap();
    let run = std::path::Path::new(output.strip_suffix('/').unwrap());
    assert!(run.is_dir(), "{output}");
    assert_eq!(
        run.parent().unwrap(),
        dir.path().canonicalize().unwrap().join("runs")
    );
    assert!(
        run.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("run-"),
        "{output}"
    );
    env(&["--run-in", "runs", "--out", "x"])
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}
