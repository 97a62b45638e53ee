//! The examples in README.md and docs/ are the output of commands this test runs again, so they
//! cannot go stale (issue 25). An example is a fenced block right after a marker
//! `<!-- example: ID -->`; each ID below says how its output is made. The block's lines must
//! appear in that output, in order and next to each other, where a `…` in a block line stands
//! for any text and lines starting with `$ ` (the command, as a user types it) are not compared.
//! Every ID must be marked at least once, and every marker must have an ID here.

use std::path::{Path, PathBuf};
use std::process::Command;

use cudaleak_tests::{
    cudaleak_cli, frameworks_library_path, python_script, pythons, scenario_program, shim,
    Scenario, NULLCUDA_DIR,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `cudaleak ARGS` from the repository root (relative paths in the output, as in the docs).
fn cli(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(cudaleak_cli());
    cmd.current_dir(repo()).args(args);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CUDALEAK_") || k.starts_with("NULLCUDA_") || k == "LD_PRELOAD" {
            cmd.env_remove(&*k);
        }
    }
    cmd.envs(env.iter().copied()).env("NO_COLOR", "1");
    let out = cmd.output().expect("cudaleak runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The output each example is taken from; None when this machine cannot make it (no nvcc).
fn output(id: &str) -> Option<String> {
    Some(match id {
        // README, "Caches and library handles": the framework stand-ins under `cudaleak run`.
        "caches-run" => {
            let out = tempfile::tempdir().unwrap();
            let program = scenario_program("framework_caches");
            let shim = shim().display().to_string();
            let out_dir = out.path().display().to_string();
            let lib_path = frameworks_library_path();
            cli(
                &["run", "--shim", &shim, "--out", &out_dir, "--"]
                    .into_iter()
                    .chain([program.to_str().unwrap()])
                    .collect::<Vec<_>>(),
                &[("LD_LIBRARY_PATH", &lib_path)],
            )
        }
        // README, "Python programs": tests/python/leaks.py on the null device (python3), the
        // report read from the repository root.
        "python-leaks" => {
            let py = &pythons()[0];
            let run = Scenario::program(&py.path)
                .arg(python_script("leaks.py").to_str().unwrap())
                .arg(NULLCUDA_DIR)
                .arg("cdll")
                .run_shim();
            run.assert_exit(0);
            cli(&["report", run.dir.path().to_str().unwrap()], &[])
        }
        // docs/report-format.md, `report --growth`: the series the CLI's tests pin.
        "growth-fixture" => cli(&["report", "--growth", "cli/tests/fixtures/growth"], &[]),
        // docs/report-format.md, "What the script held when it ended": a real exit dump, its
        // script moved into this checkout (the GPU machine's was elsewhere).
        "script-end" => {
            let dir = tempfile::tempdir().unwrap();
            let status = Command::new("python3")
                .arg(repo().join("scripts/growth-fixture.py"))
                .arg("unpack")
                .arg(repo().join("cli/tests/fixtures/growth-corpus/leak_losses_append-exact.json"))
                .arg(dir.path())
                .arg("--root")
                .arg(repo())
                .status()
                .expect("python3 runs scripts/growth-fixture.py");
            assert!(status.success());
            let exit = dir.path().join("cudaleak.2595.json");
            cli(&["report", exit.to_str().unwrap()], &[])
        }
        // README, "Without a GPU": the C file marked `my_app.c` compiled and run by the block's own
        // `$ ` lines, in a directory laid out as `make nullcuda` leaves target/nullcuda/.
        "own-c-program" => run_readme_commands(id, "my_app.c", None),
        // The same for the .cu file, built by the nvcc the sample tests use (none: skipped).
        "own-cu-program" => run_readme_commands(id, "my_kernels.cu", Some(nvcc()?)),
        other => panic!("no command for the example {other:?}"),
    })
}

/// nvcc as tests/tests/nvcc.rs finds it: NVCC, PATH, $CUDA_HOME, /usr/local/cuda, the install
/// scripts/nvcc.sh leaves in its cache; with CUDALEAK_REQUIRE_SAMPLES=1 (make test) that script
/// installs one or the test fails.
fn nvcc() -> Option<PathBuf> {
    if let Some(found) = cudaleak_tests::installed_nvcc() {
        return Some(found);
    }
    if std::env::var_os("CUDALEAK_REQUIRE_SAMPLES").is_none_or(|v| v != "1") {
        eprintln!("no nvcc: the README's .cu example is not checked (CUDALEAK_REQUIRE_SAMPLES=1 requires it)");
        return None;
    }
    let out = Command::new(repo().join("scripts/nvcc.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("scripts/nvcc.sh runs");
    assert!(
        out.status.success(),
        "CUDALEAK_REQUIRE_SAMPLES=1 but scripts/nvcc.sh found or installed no nvcc"
    );
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// `make nullcuda`, once: the directory it prints (this checkout's target/nullcuda).
fn make_nullcuda() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("make")
            .args(["-s", "--no-print-directory", "nullcuda"])
            .current_dir(repo())
            .output()
            .expect("make runs");
        assert!(
            out.status.success(),
            "make nullcuda failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = PathBuf::from(stdout.trim());
        for file in [
            "libcudart.so",
            "libcudart.so.13",
            "libcuda.so.1",
            "include/cuda_runtime.h",
        ] {
            assert!(
                dir.join(file).exists(),
                "make nullcuda printed {stdout:?}, without {file}"
            );
        }
        dir
    })
    .clone()
}

/// The `$ ` lines of the README block marked ID, run by sh in a fresh directory that holds the
/// README's file marked SOURCE and target/nullcuda (a link to what `make nullcuda` made), with the
/// CLI (and NVCC, as `nvcc`) on PATH: the last command's standard output.
fn run_readme_commands(id: &str, source: &str, nvcc: Option<PathBuf>) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("target")).unwrap();
    std::os::unix::fs::symlink(make_nullcuda(), dir.path().join("target/nullcuda")).unwrap();
    std::fs::write(dir.path().join(source), marked_file(source)).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    if let Some(nvcc) = nvcc {
        // A script, not a link: nvcc finds its toolkit from the path it was started by.
        let wrapper = bin.join("nvcc");
        std::fs::write(
            &wrapper,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", nvcc.display()),
        )
        .unwrap();
        let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&wrapper, perms).unwrap();
    }
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        cudaleak_cli().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut report = String::new();
    for command in commands(id) {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&command).current_dir(dir.path());
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("CUDALEAK_") || k == "LD_PRELOAD" || k == "LD_LIBRARY_PATH" {
                cmd.env_remove(&*k);
            }
        }
        let out = cmd
            .env("PATH", &path)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c == 0 || c == 23),
            "`{command}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        report = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    report
}

const IDS: [&str; 6] = [
    "caches-run",
    "python-leaks",
    "growth-fixture",
    "script-end",
    "own-c-program",
    "own-cu-program",
];

/// The fenced block after `<!-- file: NAME -->` in README.md: a source file an example builds.
fn marked_file(name: &str) -> String {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let marker = format!("<!-- file: {name} -->");
    let after = &text[text
        .find(&marker)
        .unwrap_or_else(|| panic!("README.md has no {marker}"))..];
    let body = after.split_once("```").unwrap().1;
    let body = body.split_once('\n').unwrap().1;
    body[..body.find("\n```").unwrap() + 1].to_string()
}

/// The `$ ` lines of the README block marked `<!-- example: ID -->`, without the `$ `.
fn commands(id: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let marker = format!("<!-- example: {id} -->");
    let after = &text[text.find(&marker).unwrap()..];
    let block = after.split("```").nth(1).unwrap();
    block
        .lines()
        .filter_map(|l| l.strip_prefix("$ "))
        .map(str::to_string)
        .collect()
}

/// (file, id, the block's lines) of every marked example.
fn examples() -> Vec<(PathBuf, String, Vec<String>)> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let Some(id) = line
                .trim()
                .strip_prefix("<!-- example:")
                .and_then(|r| r.strip_suffix("-->"))
            else {
                continue;
            };
            let fence = lines.by_ref().find(|l| !l.trim().is_empty());
            assert!(
                fence.is_some_and(|f| f.starts_with("```")),
                "{}: the example {id} is not followed by a fenced block",
                file.display()
            );
            let block: Vec<String> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .filter(|l| !l.starts_with("$ "))
                .map(str::to_string)
                .collect();
            out.push((file.clone(), id.trim().to_string(), block));
        }
    }
    out
}

/// A block line matches an output line when its pieces between `…` appear in it, in order,
/// the first at its start and the last at its end.
fn line_matches(doc: &str, seen: &str) -> bool {
    let pieces: Vec<&str> = doc.split('…').collect();
    if pieces.len() == 1 {
        return doc == seen;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !seen.starts_with(first) || !seen.ends_with(last) || seen.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &seen[first.len()..seen.len() - last.len()];
    for p in &pieces[1..pieces.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

fn contains_block(output: &[&str], block: &[String]) -> bool {
    block.is_empty()
        || output.windows(block.len()).any(|w| {
            w.iter()
                .zip(block)
                .all(|(seen, doc)| line_matches(doc, seen))
        })
}

#[test]
fn line_matching_knows_ellipses() {
    assert!(line_matches("a … z", "a b c z"));
    assert!(line_matches(
        "note: … (x/…/y.json): nothing",
        "note: pid 1 (x/a/b/y.json): nothing"
    ));
    assert!(!line_matches("a … z", "a b c"));
    assert!(!line_matches("abc", "abcd"));
    assert!(contains_block(
        &["x", "a", "b", "y"],
        &["a".into(), "b".into()]
    ));
    assert!(!contains_block(&["a", "x", "b"], &["a".into(), "b".into()]));
}

#[test]
fn every_marked_example_is_what_its_command_prints() {
    let examples = examples();
    for id in IDS {
        let n = examples.iter().filter(|(_, e, _)| e == id).count();
        assert!(
            n >= 1,
            "the example {id} is marked nowhere in README.md and docs/"
        );
    }
    let mut stale = Vec::new();
    for (file, id, block) in &examples {
        assert!(
            IDS.contains(&id.as_str()),
            "{}: unknown example {id}",
            file.display()
        );
        let Some(out) = output(id) else { continue };
        let lines: Vec<&str> = out.lines().collect();
        if !contains_block(&lines, block) {
            stale.push(format!(
                "{} (example {id}) is stale; the command printed:\n{out}\n--- the docs say:\n{}",
                file.display(),
                block.join("\n")
            ));
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n\n"));
}
