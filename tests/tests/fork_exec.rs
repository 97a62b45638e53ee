//! fork + exec: the exec'd child is a fresh image that inherits LD_PRELOAD and writes its own
//! dump under its own pid (naming its parent, not `forked_from`: exec starts anew); the parent's
//! dump holds only its own block; `cudaleak run` reports both processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cudaleak_format::Kind;
use cudaleak_tests::{
    assert_live, cudaleak_cli, files_in, marker_line, read_dump, scenario_program, shim, summary,
    Expect, Scenario, NULLCUDA_DIR, RANK_VARIABLES,
};

const PARENT: Expect = Expect {
    size: 3333,
    api: "cuMemAlloc_v2",
    kind: Kind::Device,
    function: "parent_alloc",
    marker: "parent_alloc",
};
const LEAF: Expect = Expect {
    size: 4444,
    api: "cuMemAlloc_v2",
    kind: Kind::Device,
    function: "leaf_alloc",
    marker: "leaf_alloc",
};

#[test]
fn an_execd_child_writes_its_own_dump_and_the_parent_keeps_its_own() {
    let run = Scenario::new("fork_exec").run_shim();
    run.assert_exit(0).assert_stdout("leaf done\nparent done\n");
    let files = files_in(run.dir.path());
    assert_eq!(files.len(), 2, "one dump per process: {files:?}");
    let dumps: Vec<_> = files.iter().map(|p| read_dump(p)).collect();
    let parent = dumps
        .iter()
        .find(|d| d.process.pid == run.pid)
        .unwrap_or_else(|| panic!("no dump of the parent {}: {files:?}", run.pid));
    let child = dumps
        .iter()
        .find(|d| d.process.pid != run.pid)
        .expect("the exec'd child's dump");
    let parent_path = run.dir.path().join(format!("cudaleak.{}.json", run.pid));
    let child_path = run
        .dir
        .path()
        .join(format!("cudaleak.{}.json", child.process.pid));
    let mut want = vec![parent_path, child_path];
    want.sort();
    assert_eq!(files, want, "each dump under its own pid");

    assert_eq!(parent.process.forked_from, None);
    assert_eq!(parent.process.end, cudaleak_format::End::Exit);
    assert_eq!(parent.summary, summary(1, 0, 0, 0, 0, 1, 3333, 3333, 3333));
    assert_live(parent, "fork_exec", &[PARENT]);

    assert_eq!(
        child.process.ppid, run.pid,
        "the exec'd child names its parent"
    );
    assert_eq!(
        child.process.forked_from, None,
        "exec starts a fresh image: not a forked copy"
    );
    assert_eq!(child.process.end, cudaleak_format::End::Exit);
    assert_eq!(
        child.process.argv,
        vec![
            scenario_program("fork_exec").display().to_string(),
            "leaf".to_string()
        ]
    );
    assert!(
        child.process.exe.ends_with("/fork_exec"),
        "exe {:?}",
        child.process.exe
    );
    assert_eq!(child.summary, summary(1, 0, 0, 0, 0, 1, 4444, 4444, 4444));
    assert_live(child, "fork_exec", &[LEAF]);
}

fn hermetic(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CUDALEAK_")
            || k.starts_with("NULLCUDA_")
            || RANK_VARIABLES.contains(&&*k)
            || k == "LD_PRELOAD"
        {
            cmd.env_remove(&*k);
        }
    }
}

fn dumps_under(out: &Path) -> Vec<PathBuf> {
    let runs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
    files_in(&runs[0])
}

#[test]
fn cudaleak_run_reports_the_parent_and_the_execd_child() {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(cudaleak_cli());
    hermetic(&mut cmd);
    cmd.arg("run")
        .arg("--shim")
        .arg(shim())
        .arg("--out")
        .arg(out.path())
        .arg("--")
        .arg(scenario_program("fork_exec"))
        .env("LD_LIBRARY_PATH", NULLCUDA_DIR)
        .stdin(Stdio::null());
    let output = cmd.output().expect("run cudaleak");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(23),
        "leaks fail the gate\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let sections: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("== pid "))
        .collect();
    assert_eq!(
        sections.len(),
        2,
        "one section per process\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let pids: Vec<u32> = sections
        .iter()
        .map(|l| {
            l["== pid ".len()..]
                .split(':')
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|e| panic!("pid in {l:?}: {e}"))
        })
        .collect();
    assert_ne!(pids[0], pids[1], "two processes: {sections:?}");
    for l in &sections {
        assert!(l.contains("fork_exec"), "{l:?}");
        assert!(l.ends_with("(exited) =="), "{l:?}");
    }
    let dumps = dumps_under(out.path());
    let mut dump_pids: Vec<u32> = dumps.iter().map(|p| read_dump(p).process.pid).collect();
    dump_pids.sort_unstable();
    let mut section_pids = pids.clone();
    section_pids.sort_unstable();
    assert_eq!(
        dump_pids, section_pids,
        "the report names the dumps' processes"
    );
    assert_eq!(
        sections
            .iter()
            .filter(|l| l.ends_with("/fork_exec leaf (exited) =="))
            .count(),
        1,
        "one section is the exec'd child: {sections:?}"
    );
    for (function, marker) in [
        ("parent_alloc", "parent_alloc"),
        ("leaf_alloc", "leaf_alloc"),
    ] {
        let site = format!(
            "#0 {function} at scenarios/fork_exec.c:{} (fork_exec)",
            marker_line("fork_exec", marker)
        );
        assert_eq!(
            stdout.matches(&site).count(),
            1,
            "{site:?} once\nstdout:\n{stdout}"
        );
    }
}
