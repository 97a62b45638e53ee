//! How dumps are written: mode 0600 whatever the umask (they hold paths and argv), never through
//! a symlink planted at the target name, and no temporary file left behind.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cudaleak_format::End;
use cudaleak_tests::{read_dump, scenario_program, Run, Scenario};

/// leak_exit leaves three cudaMalloc blocks: 4096 + 8192 + 63590 bytes.
fn assert_leak_exit_dump(path: &Path, run: &Run) {
    let dump = read_dump(path);
    assert_eq!(dump.process.pid, run.pid);
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(dump.summary.live_allocations, 3);
    assert_eq!(dump.summary.live_bytes, 75_878);
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every name in `dir`, hidden ones and links included, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn the_exit_dump_is_mode_0600() {
    let run = Scenario::new("leak_exit").run_shim();
    run.assert_exit(0);
    let path = run.dir.path().join(format!("cudaleak.{}.json", run.pid));
    run.dump();
    assert_eq!(mode_of(&path), 0o600, "mode of {}", path.display());
}

#[test]
fn the_exit_dump_is_mode_0600_under_umask_000() {
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = probe_dir.path().join("probe");
    // sh sets the umask, proves it with a probe file, then execs leak_exit (same pid).
    let run = Scenario::program(Path::new("/bin/sh"))
        .arg("-c")
        .arg("umask 000 && : > \"$1\" && exec \"$0\"")
        .arg(&scenario_program("leak_exit").display().to_string())
        .arg(&probe.display().to_string())
        .run_shim();
    run.assert_exit(0);
    assert_eq!(mode_of(&probe), 0o666, "the umask really was 000");
    let path = run.dir.path().join(format!("cudaleak.{}.json", run.pid));
    run.dump();
    assert_leak_exit_dump(&path, &run);
    assert_eq!(mode_of(&path), 0o600, "mode of {}", path.display());
}

#[test]
fn a_symlink_at_the_target_name_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let planted = dir.path().join("fixed.json");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", &planted)
        .run_shim();
    run.assert_exit(0);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "keep",
        "the link's target is untouched\nstderr:\n{}",
        run.stderr
    );
    let meta = std::fs::symlink_metadata(&planted).unwrap();
    assert!(meta.file_type().is_symlink(), "the link is still a link");
    assert_eq!(std::fs::read_link(&planted).unwrap(), victim);
    assert_eq!(
        names_in(dir.path()),
        vec!["fixed.1.json", "fixed.json", "victim"],
        "the dump under the next free name and nothing else (no .tmp)\nstderr:\n{}",
        run.stderr
    );
    let next = dir.path().join("fixed.1.json");
    assert!(
        std::fs::symlink_metadata(&next)
            .unwrap()
            .file_type()
            .is_file(),
        "a regular file"
    );
    assert_eq!(mode_of(&next), 0o600);
    assert_leak_exit_dump(&next, &run);
    let line = run.stderr.lines().last().unwrap_or("");
    assert!(
        line.ends_with("/fixed.1.json"),
        "the stderr line names the file used: {line:?}"
    );
}

#[test]
fn a_dangling_symlink_at_the_target_name_creates_nothing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent");
    let planted = dir.path().join("fixed.json");
    std::os::unix::fs::symlink(&absent, &planted).unwrap();
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", &planted)
        .run_shim();
    run.assert_exit(0);
    assert!(
        std::fs::symlink_metadata(&absent).is_err(),
        "nothing was created through the link\nstderr:\n{}",
        run.stderr
    );
    assert!(std::fs::symlink_metadata(&planted)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        names_in(dir.path()),
        vec!["fixed.1.json", "fixed.json"],
        "the dump under the next free name and nothing else (no .tmp)\nstderr:\n{}",
        run.stderr
    );
    let next = dir.path().join("fixed.1.json");
    assert_eq!(mode_of(&next), 0o600);
    assert_leak_exit_dump(&next, &run);
}
