//! `cudaleak attach` run as root on another user's process (issue 39 item 6): the program's user
//! can write where its dumps go, and nothing it plants there (a link to a root-only file, a hard
//! link, a FIFO) is read, written, renamed over or quoted by the CLI; its genuine dumps, the exit
//! dump included, become files of root's; a run directory that user could move is refused. Runs
//! only as root (CI and the test machines are); elsewhere each test says it skipped.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use cudaleak_tests::{attach_command, marker_line, wait_for, Scenario, Spawned};

const SCENARIO: &str = "attach_loop";
/// `nobody` and `nogroup` on Debian and Ubuntu; any unprivileged ids would do.
const NOBODY: u32 = 65534;

fn root() -> bool {
    if !std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        return false;
    }
    // The program, the null runtime and the shim must be reachable by `nobody` (a checkout
    // under a home directory of mode 0700 is not).
    let needed = [
        cudaleak_tests::scenario_program(SCENARIO),
        PathBuf::from(cudaleak_tests::NULLCUDA_DIR).join("libcuda.so.1"),
        cudaleak_tests::shim().to_path_buf(),
    ];
    match needed.iter().find(|p| !others_can_reach(p)) {
        Some(p) => {
            eprintln!("{}: not reachable by other users", p.display());
            false
        }
        None => true,
    }
}

/// Whether every directory above `path` is searchable, and `path` readable, by other users.
fn others_can_reach(path: &Path) -> bool {
    let readable = std::fs::metadata(path).is_ok_and(|m| m.mode() & 0o004 != 0);
    readable
        && path
            .ancestors()
            .skip(1)
            .all(|d| std::fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// `cudaleak attach OPTIONS PID`.
fn attach(pid: u32, out: &Path, options: &[&str]) -> Output {
    attach_command(pid, out, options)
        .output()
        .expect("run cudaleak attach")
}

/// Starts attach_loop as `nobody` with `args`, without the shim, and waits for its "ready".
fn start_as_nobody(args: &[&str]) -> (Spawned, Child) {
    let s = args
        .iter()
        .fold(Scenario::new(SCENARIO), |s, a| s.arg(a))
        .user(NOBODY, NOBODY);
    let (spawned, child, mut stdout) = s.spawn_ready();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
    });
    (spawned, child)
}

/// A temporary directory `nobody` can reach (tempfile makes them 0700).
fn open_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("a temporary directory");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

/// The directory under `out` that the target's user may write its dumps into, once attach has
/// made it: whichever of the run directory and its subdirectories `nobody` owns.
fn target_writable_dir(out: &Path) -> PathBuf {
    let what = format!(
        "attach to make a directory the program's user owns under {}",
        out.display()
    );
    wait_for(Duration::from_secs(10), &what, || {
        let runs = std::fs::read_dir(out).into_iter().flatten().flatten();
        for run in runs {
            let mut dirs = vec![run.path()];
            dirs.extend(
                std::fs::read_dir(run.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
            for d in dirs {
                if std::fs::symlink_metadata(&d).is_ok_and(|m| m.is_dir() && m.uid() == NOBODY) {
                    return Some(d);
                }
            }
        }
        None
    })
}

#[test]
fn a_dump_name_linked_by_the_targets_user_to_a_root_only_file_is_never_followed() {
    if !root() {
        eprintln!("skipped: starting another user's process needs root (and files it can reach)");
        return;
    }
    // Root-only files in a root-only directory: one of root's own dumps (of another program,
    // leak_exit), and a file that is not JSON.
    let vault = tempfile::tempdir().expect("a temporary directory");
    let roots_run = Scenario::new("leak_exit").run_shim();
    let roots_dump = vault.path().join("root-only-dump.json");
    std::fs::copy(
        roots_run
            .dir
            .path()
            .join(format!("cudaleak.{}.json", roots_run.pid)),
        &roots_dump,
    )
    .expect("copy root's dump");
    let secret = vault.path().join("root-only.txt");
    std::fs::write(
        &secret,
        b"Q7root-only-secret: never printed, never replaced\n",
    )
    .expect("write the root-only file");
    let mut before = Vec::new();
    for f in [&roots_dump, &secret] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        before.push((
            std::fs::read(f).expect("read"),
            std::fs::metadata(f).expect("stat"),
        ));
    }

    let (spawned, mut child) = start_as_nobody(&["400", "15", "0"]);
    let pid = spawned.pid;
    let out = open_tempdir();
    let out_path = out.path().to_path_buf();
    let cli = std::thread::spawn(move || attach(pid, &out_path, &["--for", "2.5"]));

    // While attach waits, the program's user plants the names the shim writes: links to the
    // root-only file (as the user would make them: owned by it), a hard link to it, a FIFO.
    let planted = target_writable_dir(out.path());
    let link = |name: &str, to: &Path| {
        let p = planted.join(name);
        std::os::unix::fs::symlink(to, &p).expect("plant a link");
        std::os::unix::fs::lchown(&p, Some(NOBODY), Some(NOBODY)).expect("lchown");
    };
    link(&format!("cudaleak.{pid}.json"), &roots_dump);
    link(&format!("cudaleak.{pid}.snapshot-999.json"), &secret);
    link(&format!("cudaleak.{pid}.snapshot-996.json"), &roots_dump);
    std::fs::hard_link(
        &roots_dump,
        planted.join(format!("cudaleak.{pid}.snapshot-998.json")),
    )
    .expect("plant a hard link");
    let fifo = planted.join(format!("cudaleak.{pid}.snapshot-997.json"));
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo")
        .success());
    std::os::unix::fs::lchown(&fifo, Some(NOBODY), Some(NOBODY)).expect("lchown");

    let o = cli.join().expect("cudaleak attach");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("{stderr}{stdout}");

    // The root-only files are as they were: same files, same bytes, same owner and mode.
    for (f, (bytes, meta)) in [&roots_dump, &secret].into_iter().zip(&before) {
        let after = std::fs::metadata(f).expect("the root-only file is still there");
        assert!(
            std::fs::read(f).expect("read") == *bytes,
            "{} was rewritten",
            f.display()
        );
        assert_eq!(
            (after.ino(), after.uid(), after.mode()),
            (meta.ino(), meta.uid(), meta.mode()),
            "{} was replaced",
            f.display()
        );
    }
    // Nothing of them is shown: not a byte of the file, not root's dump in the report.
    for shown in [&stdout, &stderr] {
        assert!(
            !shown.contains("Q7") && !shown.contains("root-only-secret"),
            "{shown}"
        );
        assert!(!shown.contains("'Q'") && !shown.contains("0x51"), "{shown}");
        assert!(
            !shown.contains("leak_exit") && !shown.contains("leak_three"),
            "{shown}"
        );
    }
    // Each planted name is skipped with a line that says why.
    for name in [
        format!("cudaleak.{pid}.json"),
        format!("cudaleak.{pid}.snapshot-999.json"),
        format!("cudaleak.{pid}.snapshot-998.json"),
        format!("cudaleak.{pid}.snapshot-997.json"),
        format!("cudaleak.{pid}.snapshot-996.json"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("skipping") && l.contains(&name)),
            "{name} not named as skipped:\n{stderr}"
        );
    }
    // The report is the genuine dumps': three callsites keep a block every step.
    assert_eq!(
        o.status.code(),
        Some(23),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("SUMMARY: 3 growth suspects"), "{stdout}");
    let site = format!("attach_loop.c:{}", marker_line(SCENARIO, "attach_table"));
    assert!(stdout.contains(&site), "{site} missing:\n{stdout}");
    // What is left in the run directory is root's: regular files, and no directory of the
    // program's user.
    let run = planted
        .ancestors()
        .find(|d| d.parent() == Some(out.path()))
        .expect("the run directory")
        .to_path_buf();
    let mut dumps = 0;
    for e in std::fs::read_dir(&run)
        .expect("read the run directory")
        .flatten()
    {
        let m = std::fs::symlink_metadata(e.path()).expect("stat");
        if e.file_name() == ".shim" {
            assert_eq!(m.uid(), 0);
            continue;
        }
        assert!(m.is_file() && m.uid() == 0, "{}: {m:?}", e.path().display());
        dumps += 1;
    }
    assert!(dumps >= 2, "the detach dump and at least one snapshot");

    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn another_users_program_that_exits_while_attached_leaves_its_exit_dump_in_a_file_of_roots() {
    if !root() {
        eprintln!("skipped: starting another user's process needs root (and files it can reach)");
        return;
    }
    let (spawned, child) = start_as_nobody(&["90", "15", "5"]);
    let out = open_tempdir();
    let o = attach(spawned.pid, out.path(), &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("the program exited while attached"),
        "{stderr}"
    );
    assert!(!stderr.contains("skipping"), "{stderr}");
    let status = child.wait_with_output().expect("wait").status;
    assert_eq!(status.code(), Some(5));
    let site = format!("attach_loop.c:{}", marker_line(SCENARIO, "attach_table"));
    assert!(stdout.contains(&site), "{stdout}\n{stderr}");
    let run = std::fs::read_dir(out.path())
        .expect("read --out")
        .flatten()
        .next()
        .expect("a run directory")
        .path();
    // The exit dump, written by the program as it exited, is a file of root's; `.target/` is gone.
    let exit_dump = run.join(format!("cudaleak.{}.json", spawned.pid));
    let m = std::fs::symlink_metadata(&exit_dump).expect("the exit dump");
    assert!(m.is_file() && m.uid() == 0, "{m:?}");
    assert_eq!(
        cudaleak_tests::read_dump(&exit_dump).process.end,
        cudaleak_format::End::Exit
    );
    assert!(!run.join(".target").exists());
    assert_eq!(std::fs::metadata(&run).unwrap().mode() & 0o7777, 0o711);
}

#[test]
fn a_run_directory_the_targets_user_could_move_is_refused() {
    if !root() {
        eprintln!("skipped: starting another user's process needs root (and files it can reach)");
        return;
    }
    let (spawned, mut child) = start_as_nobody(&["400", "15", "0"]);
    let base = open_tempdir();
    std::os::unix::fs::chown(base.path(), Some(NOBODY), Some(NOBODY)).expect("chown");
    let out = base.path().join("out");
    let o = attach(spawned.pid, &out, &["--for", "1"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot attach to pid {}", spawned.pid))
            && stderr.contains("belongs to the program's user (uid 65534)"),
        "{stderr}"
    );
    assert!(!out.exists(), "a refusal leaves no run directory");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", spawned.pid)).expect("maps");
    assert!(!maps.contains("libcudaleak"), "the shim was loaded");
    let _ = child.kill();
    let _ = child.wait();
}
