//! `cudaleak run`'s report of a process tree: children that made no CUDA allocation get no
//! section, one line counts them (their dumps are still written, their stderr left alone); `--exact-pools` gives the
//! program the frameworks' allocator variables, merged into the user's own.

use cudaleak_tests::{cudaleak_run, read_dump};

#[test]
fn children_that_made_no_cuda_allocation_get_one_line_not_a_section() {
    let run = cudaleak_run(&[], "quiet_children", &[], &[]);
    run.assert_exit(0);
    let out = &run.stdout;
    let sections: Vec<&str> = out.lines().filter(|l| l.starts_with("== pid ")).collect();
    assert_eq!(sections.len(), 1, "{out}");
    assert!(
        sections[0].ends_with("/quiet_children (exited) =="),
        "{out}"
    );
    assert!(
        out.contains(
            "\n3 processes made no CUDA allocation and are not shown: quiet_children (3).\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with("SUMMARY: 0 B leaked in 0 allocations from 0 callsites (1 process)\n"),
        "{out}"
    );
    // Only the parent, which used CUDA memory, printed the shim's exit line: the children's
    // stderr is as it would be without the shim.
    let exit_lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("still live at exit"))
        .collect();
    assert_eq!(exit_lines.len(), 1, "{}", run.stderr);
    assert!(
        exit_lines[0].starts_with("cudaleak: 0 allocations (0 B) still live at exit -> "),
        "{}",
        run.stderr
    );
    // Every process still wrote its dump.
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 4, "{dumps:?}");
    let quiet = dumps
        .iter()
        .map(|p| read_dump(p))
        .filter(|d| d.summary.allocations == 0 && d.events.is_empty())
        .count();
    assert_eq!(quiet, 3);
}

#[test]
fn quiet_children_are_listed_in_json_by_pid() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let run = cudaleak_run(
        &["--format", "json", "-o", report.to_str().unwrap()],
        "quiet_children",
        &[],
        &[],
    );
    run.assert_exit(0);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["processes"].as_array().unwrap().len(), 1);
    assert_eq!(v["summary"]["quiet_processes"], 3);
    let quiet = v["quiet_processes"].as_array().unwrap();
    assert_eq!(quiet.len(), 3);
    for q in quiet {
        assert!(
            q["exe"].as_str().unwrap().ends_with("/quiet_children"),
            "{q}"
        );
        assert_ne!(q["pid"], v["processes"][0]["pid"]);
    }
}

/// The `NAME=value` lines print_env wrote (the report goes to a file).
fn env_of(options: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.txt");
    let mut opts = vec!["-o", report.to_str().unwrap()];
    opts.extend_from_slice(options);
    let run = cudaleak_run(&opts, "print_env", &[], env);
    run.assert_exit(0);
    run.stdout.lines().map(str::to_string).collect()
}

#[test]
fn exact_pools_gives_the_program_the_frameworks_allocator_variables() {
    assert_eq!(
        env_of(&["--exact-pools"], &[]),
        [
            "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync",
            "PYTORCH_ALLOC_CONF unset",
            "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
            "XLA_PYTHON_CLIENT_PREALLOCATE=false",
        ]
    );
}

#[test]
fn exact_pools_keeps_the_user_s_other_keys_and_replaces_their_backend() {
    let env = [
        (
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True,backend:native,roundup_power2_divisions:[256:1,>:4]",
        ),
        ("PYTORCH_ALLOC_CONF", "max_split_size_mb:64"),
        ("XLA_PYTHON_CLIENT_PREALLOCATE", "true"),
    ];
    assert_eq!(
        env_of(&["--exact-pools"], &env),
        [
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,backend:cudaMallocAsync,roundup_power2_divisions:[256:1,>:4]",
            "PYTORCH_ALLOC_CONF=max_split_size_mb:64,backend:cudaMallocAsync",
            "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
            "XLA_PYTHON_CLIENT_PREALLOCATE=false",
        ]
    );
    // Without the flag the program gets the user's environment untouched.
    assert_eq!(
        env_of(&[], &env),
        [
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,backend:native,roundup_power2_divisions:[256:1,>:4]",
            "PYTORCH_ALLOC_CONF=max_split_size_mb:64",
            "XLA_PYTHON_CLIENT_ALLOCATOR unset",
            "XLA_PYTHON_CLIENT_PREALLOCATE=true",
        ]
    );
}

#[test]
fn exact_pools_says_what_it_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.txt");
    let run = cudaleak_run(
        &["--exact-pools", "-o", report.to_str().unwrap()],
        "print_env",
        &[],
        &[("PYTORCH_CUDA_ALLOC_CONF", "backend:native")],
    );
    run.assert_exit(0);
    assert!(
        run.stderr.contains(
            "cudaleak: --exact-pools: PYTORCH_CUDA_ALLOC_CONF said backend:native; the program gets backend:cudaMallocAsync\n"
        ),
        "{}",
        run.stderr
    );
}
