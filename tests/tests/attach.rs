//! `cudaleak attach PID` against programs of the null runtime, started without the shim: the
//! shim is loaded into them while they run, records from then on through each way a program
//! reaches the driver (shared runtime, the driver's export, its own table of entry points),
//! detaches leaving them as they were (output, exit status, signal dispositions, no later dump),
//! starts over at a second attach, or writes its last dump when they exit while attached; a Python loop's growth is named by its
//! script line; and every refusal is exit 2 with nothing changed.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use cudaleak_format::{Dump, End};
use cudaleak_tests::{
    assert_site, attach_command, files_in, frameworks_library_path, kill, marker_line,
    python_marker_line, python_script, pythons, read_dump, wait_until, Scenario, Spawned,
    NULLCUDA_DIR,
};

const SCENARIO: &str = "attach_loop";

/// `cudaleak attach OPTIONS PID` with nothing from the developer's environment steering it.
fn attach(pid: u32, out: &Path, options: &[&str]) -> Output {
    attach_with(pid, out, options, &[])
}

/// [`attach`] with `env` set for cudaleak.
fn attach_with(pid: u32, out: &Path, options: &[&str], env: &[(&str, &str)]) -> Output {
    attach_command(pid, out, options)
        .envs(env.iter().copied())
        .output()
        .expect("run cudaleak attach")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Starts attach_loop with `args`, without the shim, and waits for its "ready"; the handle
/// yields the rest of its standard output once it has exited.
fn start(args: &[&str]) -> (Spawned, Child, std::thread::JoinHandle<String>) {
    ready(args.iter().fold(Scenario::new(SCENARIO), |s, a| s.arg(a)))
}

/// Starts tests/python/attach_keep.py (NULLCUDA_DIR, then `args`) as [`start`] starts the
/// scenario.
fn start_python(args: &[&str]) -> (Spawned, Child, std::thread::JoinHandle<String>) {
    let script = python_script("attach_keep.py");
    let program = Scenario::program(&pythons()[0].path)
        .arg(script.to_str().expect("a UTF-8 path"))
        .arg(NULLCUDA_DIR);
    ready(args.iter().fold(program, |s, a| s.arg(a)))
}

/// Spawns `s` without the shim and waits for its "ready" line.
fn ready(s: Scenario) -> (Spawned, Child, std::thread::JoinHandle<String>) {
    let (spawned, child, mut stdout) = s.spawn_ready();
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        rest
    });
    (spawned, child, rest)
}

/// The one run directory under `out`.
fn run_dir(out: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("read --out")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
    runs[0].clone()
}

/// The dump that is not a snapshot.
fn final_dump(dir: &Path) -> (PathBuf, Dump) {
    let finals: Vec<PathBuf> = files_in(dir)
        .into_iter()
        .filter(|f| !f.to_string_lossy().contains("snapshot"))
        .collect();
    assert_eq!(finals.len(), 1, "one final dump: {finals:?}");
    let d = read_dump(&finals[0]);
    (finals[0].clone(), d)
}

fn live_of(d: &Dump, size: u64) -> usize {
    d.live.iter().filter(|r| r.size == size).count()
}

/// Waits for the child and its whole stdout and stderr.
fn finish(mut child: Child) -> (std::process::ExitStatus, String) {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (child.wait().expect("wait for the scenario"), err)
}

#[test]
fn attach_records_every_way_to_the_driver_and_detach_leaves_the_program_as_it_was() {
    let (spawned, child, rest) = start(&["400", "15", "7"]);
    let pid = spawned.pid;
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(pid, out.path(), &["--for", "2.5s"]);
    let (stdout, stderr) = text(&o);
    // What a user sees (README.md, docs/attach.md quote it): `-- --nocapture`.
    eprintln!("{stderr}{stdout}");
    // Three callsites keep a block every step: growth suspects, and the gate fails.
    assert_eq!(
        o.status.code(),
        Some(23),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("route: pointers"), "{stderr}");
    assert!(stderr.contains("detached in"), "{stderr}");
    assert!(stdout.contains("SUMMARY: 3 growth suspects"), "{stdout}");
    // The blocks still live when it detached are listed as live, not as leaked: the program
    // runs on and may free them.
    assert!(stdout.contains("Live 1 of 3: "), "{stdout}");
    assert!(!stdout.contains("Leak 1 of"), "{stdout}");
    assert!(
        stdout.contains(" still live in ") && !stdout.contains(" leaked in "),
        "{stdout}"
    );
    for marker in ["attach_runtime", "attach_driver", "attach_table"] {
        let site = format!("attach_loop.c:{}", marker_line(SCENARIO, marker));
        assert!(stdout.contains(&site), "{site} missing:\n{stdout}");
    }

    let dir = run_dir(out.path());
    let (path, d) = final_dump(&dir);
    assert_eq!(d.process.pid, pid);
    assert_eq!(d.process.end, End::Detach);
    let info = d
        .shim
        .as_ref()
        .and_then(|s| s.attach.clone())
        .expect("the dump says it was attached");
    assert_eq!(info.route, "pointers");
    // cudaMalloc, cuMemAlloc_v2 and dlsym of the program; its own table and libcudart's.
    assert!(info.import_slots >= 3, "{info:?}");
    assert!(info.table_slots >= 2, "{info:?}");
    let steps = live_of(&d, 4096);
    assert!(steps >= 20, "{steps} steps recorded in 2.5 s");
    assert_eq!(live_of(&d, 8192), steps);
    assert_eq!(live_of(&d, 16384), steps);
    assert_eq!(d.summary.invalid_frees, 0);
    assert_eq!(
        d.summary.frees,
        d.summary.allocations - d.live.len() as u64,
        "every scratch block freed"
    );
    let first = |size| {
        d.live
            .iter()
            .find(|r| r.size == size)
            .map(|r| r.stack)
            .expect("a block of that size")
    };
    assert_site(&d, first(4096), SCENARIO, "via_runtime", "attach_runtime");
    assert_site(&d, first(8192), SCENARIO, "via_driver", "attach_driver");
    assert_site(&d, first(16384), SCENARIO, "via_table", "attach_table");
    assert_eq!(
        d.live
            .iter()
            .find(|r| r.size == 4096)
            .map(|r| r.api.as_str()),
        Some("cudaMalloc"),
        "the runtime's import slot labels the record"
    );
    let dumps_at_detach = files_in(&dir);

    // Attached again: the shim (still loaded, inert) starts over, into the new directory.
    let again = tempfile::tempdir().expect("a temporary directory");
    let o = attach(pid, again.path(), &["--for", "1.5"]);
    let (report, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 23)), "{report}\n{err}");
    assert!(err.contains("recording starts over"), "{err}");
    let second_dir = run_dir(again.path());
    let (_, second) = final_dump(&second_dir);
    assert_eq!(second.process.end, End::Detach);
    let steps_again = live_of(&second, 4096);
    assert!(steps_again >= 10, "{steps_again} steps recorded in 1.5 s");
    assert_eq!(live_of(&second, 16384), steps_again);
    let first_blocks: std::collections::HashSet<u64> = d.live.iter().map(|r| r.address.0).collect();
    assert!(
        second
            .live
            .iter()
            .all(|r| !first_blocks.contains(&r.address.0)),
        "the second attach's table starts empty"
    );
    assert!(
        second
            .shim
            .as_ref()
            .and_then(|s| s.attach.as_ref())
            .unwrap()
            .unix_ms
            > info.unix_ms
    );
    let second_dumps = files_in(&second_dir);

    // The program ran on to its own end: same output, same status, and no dump after detach.
    let (status, err) = finish(child);
    assert_eq!(status.code(), Some(7), "{err}");
    assert_eq!(err, "");
    assert_eq!(rest.join().unwrap(), "attach_loop: 400 steps\n");
    assert_eq!(
        files_in(&dir),
        dumps_at_detach,
        "nothing written after detach"
    );
    assert_eq!(files_in(&second_dir), second_dumps, "nor after the second");
    assert!(path.exists());
}

#[test]
fn detach_gives_back_the_default_signal_dispositions() {
    // Handlers are installed only when asked for (CUDALEAK_SIGNAL=1: docs/attach.md says why).
    let (spawned, child, _) = start(&["600", "15", "0"]);
    let out = tempfile::tempdir().expect("a temporary directory");
    let pid = spawned.pid;
    let out_path = out.path().to_path_buf();
    let cli = std::thread::spawn(move || {
        attach_with(
            pid,
            &out_path,
            &["--for", "2.5"],
            &[("CUDALEAK_SIGNAL", "1")],
        )
    });
    // While attached (the shim's handler caught SIGUSR1), SIGUSR1 asks for a snapshot and the
    // program runs on …
    let wait = std::time::Duration::from_secs(20);
    wait_until(wait, "the shim to catch SIGUSR1 in the program", || {
        catches(pid, SIGUSR1)
    });
    let snapshots = || {
        std::fs::read_dir(out.path())
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|run| files_in(&run.path()))
            .filter(|f| f.to_string_lossy().contains(".snapshot-"))
            .count()
    };
    let before = snapshots();
    kill("USR1", pid);
    wait_until(wait, "a snapshot after SIGUSR1", || snapshots() > before);
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        !state.is_empty() && !state.contains(") Z"),
        "SIGUSR1 while attached ended the program: {state}"
    );
    let o = cli.join().expect("cudaleak attach");
    let (_, stderr) = text(&o);
    assert!(stderr.contains("detached in"), "{stderr}");
    // … after detach it ends the program, as before attach.
    kill("USR1", spawned.pid);
    let (status, _) = finish(child);
    assert_eq!(status.signal(), Some(SIGUSR1), "{status:?}");
}

const SIGUSR1: i32 = 10;

/// Whether process `pid` has a handler for `signal` (`SigCgt` in `/proc/PID/status`).
fn catches(pid: u32, signal: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

#[test]
fn a_program_that_exits_while_attached_leaves_its_exit_dump() {
    let (spawned, child, _) = start(&["90", "15", "5"]);
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(spawned.pid, out.path(), &[]);
    let (stdout, stderr) = text(&o);
    assert!(
        stderr.contains("the program exited while attached"),
        "{stderr}"
    );
    let (status, _) = finish(child);
    assert_eq!(status.code(), Some(5));
    let (_, d) = final_dump(&run_dir(out.path()));
    assert_eq!(d.process.end, End::Exit);
    assert!(d.shim.as_ref().is_some_and(|s| s.attach.is_some()));
    let steps = live_of(&d, 8192);
    assert!(steps > 0);
    assert_eq!(live_of(&d, 16384), steps);
    // The exit dump comes after the program's exit handlers, although it was registered last:
    // the last 4 KiB block, freed by one of them, is not live.
    assert_eq!(live_of(&d, 4096), steps - 1);
    // `early` was allocated before attach and freed after: unknown, not an error.
    assert_eq!(d.summary.untracked_frees, 1, "{:?}", d.summary);
    assert_eq!(d.summary.invalid_frees, 0);
    assert!(d.events.is_empty(), "{:?}", d.events);
    // The live blocks are listed per callsite.
    let site = format!("attach_loop.c:{}", marker_line(SCENARIO, "attach_table"));
    assert!(stdout.contains(&site), "{stdout}\n{stderr}");
}

#[test]
fn a_python_loop_attached_to_names_the_script_line_that_keeps_memory() {
    let (spawned, child, rest) = start_python(&["500", "10"]);
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(spawned.pid, out.path(), &["--for", "2.5"]);
    let (report, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(23), "{report}\n{stderr}");
    let script = python_script("attach_keep.py");
    let keep = format!("attach_keep.py:{}", python_marker_line(&script, "keep"));
    assert!(report.contains("SUMMARY: 1 growth suspect"), "{report}");
    let suspect = &report[report.find("Suspect 1 of 1").expect("a suspect")..];
    assert!(suspect.contains(&keep), "{keep} missing:\n{report}");
    // The headings go with what they head, on the report's stream, in order (issue 44).
    let live = "blocks allocated since attach and still live at the end, per callsite:";
    let grew = "what grew while attached:";
    let (at_live, at_grew) = (report.find(live), report.find(grew));
    assert!(
        at_live.is_some_and(|l| at_grew.is_some_and(|g| l < g && g < report.len() - suspect.len())),
        "{report}"
    );
    assert!(!stderr.contains(live) && !stderr.contains(grew), "{stderr}");
    // A job that maps no framework gets no note about counts attach could not read.
    assert!(!stderr.contains("could not be read"), "{stderr}");
    let (_, d) = final_dump(&run_dir(out.path()));
    let kept = d.live.iter().filter(|r| r.size == 2048).count();
    assert!(kept >= 20, "{kept} kept blocks");
    assert_eq!(d.live.len(), kept, "the scratch blocks are freed");
    let (status, _) = finish(child);
    assert_eq!(rest.join().expect("the reader"), "done\n");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_steady_loop_that_allocates_nothing_while_attached_passes_the_growth_gate() {
    // A correct job whose pools are warm allocates nothing while attached: every snapshot
    // counts nothing since attach, and that is a series of zeros, not too few dumps.
    let (spawned, child, rest) = start_python(&["300", "10", "steady"]);
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(spawned.pid, out.path(), &["--for", "1.5"]);
    let (report, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{report}\n{stderr}");
    assert!(
        report.contains("SUMMARY: 0 growth suspects"),
        "{report}\n{stderr}"
    );
    let (status, _) = finish(child);
    assert_eq!(rest.join().expect("the reader"), "done\n");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn library_handles_made_while_attached_are_tracked_as_under_run() {
    // handles slow: a cuBLAS handle (the stand-in: 1 MiB + 4 KiB) per request, 100 ms apart,
    // never destroyed. It links the stand-in and the driver: both are mapped at its start.
    let mut spawned = Scenario::new("handles")
        .arg("slow")
        .env("LD_LIBRARY_PATH", frameworks_library_path())
        .spawn_plain();
    let child = spawned.child.take().expect("a child");
    let maps = format!("/proc/{}/maps", spawned.pid);
    // The loader maps the program's libraries in its own order: the driver may be in before the
    // C library, whose dlopen the attach needs.
    wait_until(
        std::time::Duration::from_secs(20),
        "the program to map the driver and the C library",
        || {
            std::fs::read_to_string(&maps).is_ok_and(|m| {
                m.contains("libcuda.so") && m.lines().any(|l| l.contains("/libc.so"))
            })
        },
    );
    let out = tempfile::tempdir().expect("a temporary directory");
    let o = attach(spawned.pid, out.path(), &["--for", "2.6"]);
    let (report, stderr) = text(&o);
    // Whether the growth rule calls three dumps of 10 handles a second a leak depends on where
    // the snapshots fall; what is asserted here is that the handles are tracked.
    assert!(
        matches!(o.status.code(), Some(0 | 23)),
        "{:?}\n{report}\n{stderr}",
        o.status
    );
    let site = format!(
        "#0 handle_request at scenarios/handles.c:{}",
        marker_line("handles", "create_per_request")
    );
    assert!(
        report.contains("cuBLAS handles never destroyed"),
        "{report}"
    );
    assert!(report.contains(&site), "{site} missing:\n{report}");
    let (_, d) = final_dump(&run_dir(out.path()));
    assert!(d.handles.len() >= 5, "{} handles in 2 s", d.handles.len());
    assert!(d
        .handles
        .iter()
        .all(|h| h.library == "cublas" && h.blocks.len() == 2 && !h.destroyed));
    assert_eq!(
        d.live.len(),
        2 * d.handles.len(),
        "every block is a handle's"
    );
    let (status, _) = finish(child);
    assert_eq!(status.code(), Some(0));
}

/// Asserts a refusal: exit 2, the message, and nothing left under --out.
fn assert_refused(pid: u32, expected: &[&str]) {
    let out = tempfile::tempdir().expect("a temporary directory");
    let dir = out.path().join("out");
    let o = attach(pid, &dir, &["--for", "1"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("cannot attach to pid {pid}")),
        "{stderr}"
    );
    for e in expected {
        assert!(stderr.contains(e), "{e:?} missing: {stderr}");
    }
    assert_eq!(stdout, "");
    assert!(!dir.exists(), "a refusal leaves no run directory");
}

#[test]
fn a_pid_with_no_process_is_refused() {
    let mut gone = Command::new("true").spawn().expect("run true");
    let pid = gone.id();
    gone.wait().expect("reap it");
    assert_refused(pid, &["no such process"]);
}

#[test]
fn a_process_without_the_driver_is_refused() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("run sleep");
    assert_refused(
        sleeper.id(),
        &["not a CUDA process", "no libcuda.so mapped"],
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn a_process_under_the_shim_is_sent_to_its_snapshots() {
    let mut spawned = Scenario::new("wait_signal").spawn_shim();
    let mut child = spawned.child.take().expect("a child");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("ready");
    assert_eq!(line, "ready\n");
    assert_refused(
        spawned.pid,
        &[
            "already runs under the shim",
            &format!("kill -USR1 {}", spawned.pid),
        ],
    );
    // Untouched: it finishes as it would have.
    drop(child.stdin.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(3), "stdin closed: it exits 3");
}

#[test]
fn a_process_another_tracer_holds_is_refused_with_the_reason() {
    // attach_loop asks to be traced by its parent: this test process.
    let (spawned, mut child, _) = start(&["1000", "15", "0", "traced"]);
    assert_refused(
        spawned.pid,
        &[
            "ptrace is not allowed",
            // By the thread of this test process that started it.
            "already traced by pid",
        ],
    );
    let _ = child.kill();
    let _ = child.wait();
}
