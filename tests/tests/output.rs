//! Where the dump goes (CUDALEAK_OUTPUT templates and the default), the one stderr line and
//! CUDALEAK_QUIET, and that the program's exit status and output are its own.

use std::path::{Path, PathBuf};

use cudaleak_format::End;
use cudaleak_tests::{files_in, read_dump, scenario_program, Run, Scenario};

const PROGRAM_STDERR: &str = "leak_exit says this on stderr";

/// leak_exit leaves three cudaMalloc blocks: 4096 + 8192 + 63590 bytes.
fn assert_leak_exit_dump(path: &Path, run: &Run) {
    let dump = read_dump(path);
    assert_eq!(dump.process.pid, run.pid);
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(dump.summary.live_allocations, 3);
    assert_eq!(dump.summary.live_bytes, 75_878);
    let mut sizes: Vec<u64> = dump.live.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![4096, 8192, 63_590]);
}

fn only_file(dir: &Path, expected: PathBuf, run: &Run) {
    assert_eq!(
        files_in(dir),
        vec![expected.clone()],
        "the dump and nothing else (no temporary file left)\nstderr:\n{}",
        run.stderr
    );
    assert_leak_exit_dump(&expected, run);
}

#[test]
fn percent_p_in_the_template_is_the_pid() {
    let dir = tempfile::tempdir().unwrap();
    let run = Scenario::new("leak_exit")
        .env(
            "CUDALEAK_OUTPUT",
            format!("{}/run-%p.json", dir.path().display()),
        )
        .run_shim();
    run.assert_exit(0);
    only_file(
        dir.path(),
        dir.path().join(format!("run-{}.json", run.pid)),
        &run,
    );
}

#[test]
fn trailing_slash_means_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", format!("{}/", dir.path().display()))
        .run_shim();
    run.assert_exit(0);
    only_file(
        dir.path(),
        dir.path().join(format!("cudaleak.{}.json", run.pid)),
        &run,
    );
}

#[test]
fn an_existing_directory_without_slash_is_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", dir.path())
        .run_shim();
    run.assert_exit(0);
    only_file(
        dir.path(),
        dir.path().join(format!("cudaleak.{}.json", run.pid)),
        &run,
    );
}

#[test]
fn default_output_is_in_the_working_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let run = Scenario::new("leak_exit")
        .env("LD_PRELOAD", cudaleak_tests::shim())
        .unset("CUDALEAK_OUTPUT")
        .cwd(cwd.path())
        .run_plain();
    run.assert_exit(0);
    only_file(
        cwd.path(),
        cwd.path().join(format!("cudaleak.{}.json", run.pid)),
        &run,
    );
}

#[test]
fn one_stderr_line_names_the_live_count_bytes_and_path() {
    let run = Scenario::new("leak_exit").run_shim();
    run.assert_exit(0).assert_stdout("hello from leak_exit\n");
    let expected = run.dir.path().join(format!("cudaleak.{}.json", run.pid));
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "stderr:\n{}", run.stderr);
    assert_eq!(lines[0], PROGRAM_STDERR);
    let prefix = "cudaleak: 3 allocations (74.10 KiB) still live at exit -> ";
    let path = lines[1]
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("stderr line {:?} does not start with {prefix:?}", lines[1]));
    assert_eq!(
        Path::new(path).canonicalize().unwrap(),
        expected.canonicalize().unwrap(),
        "the line names the dump"
    );
    assert!(run.stderr.ends_with('\n'));
    assert_leak_exit_dump(&expected, &run);
}

#[test]
fn quiet_prints_nothing_but_still_dumps() {
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_QUIET", "1")
        .run_shim();
    run.assert_exit(0).assert_stdout("hello from leak_exit\n");
    assert_eq!(run.stderr, format!("{PROGRAM_STDERR}\n"));
    let expected = run.dir.path().join(format!("cudaleak.{}.json", run.pid));
    only_file(run.dir.path(), expected, &run);
}

#[test]
fn a_process_that_used_no_cuda_memory_prints_nothing_but_still_dumps() {
    // Every child of a program run under the shim inherits it: a shell, a compiler, a tool
    // whose stderr its caller may parse.
    let run = Scenario::new("quiet_children").arg("helper").run_shim();
    run.assert_exit(0).assert_stdout("");
    assert_eq!(run.stderr, "");
    assert!(run.dump().summary.is_empty());
}

#[test]
fn without_an_output_directory_a_process_that_used_no_cuda_memory_leaves_no_file() {
    // `LD_PRELOAD=libcudaleak.so sh -c 'echo hi | cat | wc -c'` in a working directory: no
    // dump of the shell, cat or wc there (issue 25); the CUDA program's own dump still is.
    let cwd = tempfile::tempdir().unwrap();
    let run = Scenario::program(Path::new("/bin/sh"))
        .arg("-c")
        .arg("echo hi | cat | wc -c")
        .unset("CUDALEAK_OUTPUT")
        .cwd(cwd.path())
        .run_shim();
    run.assert_exit(0).assert_stdout("3\n");
    assert_eq!(files_in(cwd.path()), Vec::<PathBuf>::new());
    assert_eq!(run.files(), Vec::<PathBuf>::new());
    let run = Scenario::new("leak_exit")
        .unset("CUDALEAK_OUTPUT")
        .cwd(cwd.path())
        .run_shim();
    run.assert_exit(0);
    assert_eq!(
        files_in(cwd.path()),
        vec![cwd.path().join(format!("cudaleak.{}.json", run.pid))]
    );
}

#[test]
fn bad_configuration_is_reported_only_by_processes_that_use_cuda_once_each() {
    // A shell pipeline inherits LD_PRELOAD and the variables: three processes, no CUDA, and not
    // a word on stderr.
    let run = Scenario::program(Path::new("/bin/sh"))
        .arg("-c")
        .arg("echo hi | cat | wc -c")
        .env("CUDALEAK_DEPTH", "abc")
        .run_shim();
    run.assert_exit(0).assert_stdout("3\n");
    assert_eq!(run.stderr, "");
    // The CUDA program says it once (at its first allocation), its three non-CUDA children never.
    let run = Scenario::new("quiet_children")
        .env("CUDALEAK_DEPTH", "abc")
        .run_shim();
    run.assert_exit(0).assert_stdout("done\n");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert_eq!(
        lines[0],
        "cudaleak: CUDALEAK_DEPTH=abc is not a number from 1 to 256; using 32"
    );
    assert!(
        lines[1].starts_with("cudaleak: 0 allocations (0 B) still live at exit -> "),
        "{lines:?}"
    );
    assert_eq!(run.files().len(), 4, "every process still dumps");
    // A forked child whose parent said it already does not say it again.
    let run = Scenario::new("fork_child")
        .env("CUDALEAK_DEPTH", "abc")
        .run_shim();
    run.assert_exit(0);
    let warnings = run.stderr.matches("CUDALEAK_DEPTH=abc").count();
    assert_eq!(warnings, 1, "{}", run.stderr);
    assert_eq!(run.files().len(), 2);
    // Still said when the exit line is not.
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_DEPTH", "abc")
        .env("CUDALEAK_QUIET", "1")
        .run_shim();
    run.assert_exit(0);
    assert_eq!(
        run.stderr,
        format!(
            "cudaleak: CUDALEAK_DEPTH=abc is not a number from 1 to 256; using 32\n{PROGRAM_STDERR}\n"
        )
    );
}

#[test]
fn a_process_whose_only_call_failed_still_prints_its_line() {
    let run = Scenario::new("failed_alloc")
        .arg("fail-only")
        .env("NULLCUDA_MEM_LIMIT", "1048576")
        .run_shim();
    run.assert_exit(0);
    let dump = run.dump();
    assert_eq!(dump.summary.allocations, 0);
    assert_eq!(dump.summary.failed_allocations, 2);
    assert!(
        run.stderr
            .lines()
            .any(|l| l.contains("still live at exit -> ")),
        "{}",
        run.stderr
    );
}

#[test]
fn exit_status_7_stays_7_and_the_dump_is_written() {
    let run = Scenario::new("leak_exit").arg("7").run_shim();
    run.assert_exit(7).assert_stdout("hello from leak_exit\n");
    let dump = run.dump();
    assert_eq!(dump.process.pid, run.pid);
    assert_eq!(dump.process.end, End::Exit);
    assert_eq!(
        dump.process.argv,
        vec![
            scenario_program("leak_exit").display().to_string(),
            "7".to_string()
        ]
    );
    assert!(
        dump.process.exe.ends_with("/leak_exit"),
        "exe {:?}",
        dump.process.exe
    );
    assert_eq!(dump.summary.live_allocations, 3);
    assert!(dump.process.end_unix_ms >= dump.process.start_unix_ms);
}

#[test]
fn rank_comes_from_the_launcher_variables() {
    for var in cudaleak_tests::RANK_VARIABLES {
        let run = Scenario::new("leak_exit").env(var, "3").run_shim();
        run.assert_exit(0);
        assert_eq!(run.dump().process.rank, Some(3), "{var}=3");
    }
    let run = Scenario::new("leak_exit").run_shim();
    assert_eq!(run.dump().process.rank, None, "no rank variable set");
}

#[test]
fn an_existing_file_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("fixed.json");
    std::fs::write(&taken, "someone else's\n").unwrap();
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", &taken)
        .run_shim();
    run.assert_exit(0);
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "someone else's\n");
    let next = dir.path().join("fixed.1.json");
    assert_eq!(files_in(dir.path()), vec![next.clone(), taken]);
    assert_leak_exit_dump(&next, &run);
    let line = run.stderr.lines().last().unwrap_or("");
    assert!(
        line.starts_with("cudaleak: 3 allocations (74.10 KiB) still live at exit -> ")
            && line.ends_with("/fixed.1.json"),
        "the stderr line names the file used: {line:?}"
    );
}

#[test]
fn a_missing_directory_with_trailing_slash_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("new").join("deeper");
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", format!("{}/", sub.display()))
        .run_shim();
    run.assert_exit(0);
    only_file(&sub, sub.join(format!("cudaleak.{}.json", run.pid)), &run);
}

#[test]
fn an_unwritable_output_costs_one_stderr_line_and_nothing_else() {
    let run = Scenario::new("leak_exit")
        .env("CUDALEAK_OUTPUT", "/proc/cudaleak-cannot-exist/")
        .arg("7")
        .run_shim();
    run.assert_exit(7).assert_stdout("hello from leak_exit\n");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "stderr:\n{}", run.stderr);
    assert_eq!(lines[0], PROGRAM_STDERR);
    assert!(lines[1].starts_with("cudaleak: "), "{:?}", lines[1]);
}
