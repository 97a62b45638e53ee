//! Recording in the target, naming outside it: the shim's dump carries addresses, modules and
//! build-ids but no names; the CLI names it (`report`, `symbolize`) from the modules' files, and
//! only from the files the process ran.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cudaleak_tests::{
    assert_site, assert_site_in, cudaleak_cli, marker_line, read_dump, read_raw_dump,
    scenario_program, scenario_source, Run, Scenario,
};

fn dump_path(run: &Run) -> PathBuf {
    run.dir.path().join(format!("cudaleak.{}.json", run.pid))
}

fn deep_stack() -> Run {
    let run = Scenario::new("deep_stack").run_shim();
    run.assert_exit(0);
    run
}

fn cli(args: &[&str], cwd: &Path) -> Output {
    Command::new(cudaleak_cli())
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run cudaleak")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_shims_dump_has_no_names_and_a_module_table_with_build_ids() {
    let run = deep_stack();
    let dump = read_raw_dump(&dump_path(&run));
    assert!(dump.unnamed);
    // The newest version but for library handles (5), which this program has none of.
    assert_eq!(dump.cudaleak_dump, 4);
    let stack = &dump.stacks[dump.live[0].stack];
    assert_eq!(stack.frames.len(), 32);
    for f in &stack.frames {
        assert_eq!(
            (&f.function, &f.file, f.line),
            (&None, &None, None),
            "{f:?}"
        );
        let module = f.module.as_deref().expect("every frame lies in a module");
        let m = dump
            .modules
            .iter()
            .find(|m| m.path == module)
            .unwrap_or_else(|| panic!("{module} is in the module table: {:?}", dump.modules));
        assert_eq!(f.offset.expect("an offset").0, f.ip.0 - m.base.0, "{f:?}");
    }
    let program = scenario_program("deep_stack");
    let own = dump
        .modules
        .iter()
        .find(|m| Path::new(&m.path) == program)
        .unwrap_or_else(|| panic!("the program is a module: {:?}", dump.modules));
    let id = own.build_id.as_deref().expect("the program has a build-id");
    assert!(
        id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    // The same note as `readelf -n` shows in the file (its bytes in order).
    let file = std::fs::read(&program).unwrap();
    let raw: Vec<u8> = (0..id.len() / 2)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(file.windows(raw.len()).any(|w| w == raw));
    // Only modules a frame lies in, each once.
    for m in &dump.modules {
        assert!(
            dump.stacks.iter().any(|s| s
                .frames
                .iter()
                .any(|f| f.module.as_deref() == Some(&*m.path))),
            "{m:?} is no frame's module"
        );
    }
    // Named by the CLI, it is the stack the shim used to write.
    let named = read_dump(&dump_path(&run));
    assert!(!named.unnamed);
    assert_site(
        &named,
        named.live[0].stack,
        "deep_stack",
        "allocate",
        "deep_alloc",
    );
}

#[test]
fn symbolize_writes_what_report_shows_and_leaves_a_named_dump_alone() {
    let run = deep_stack();
    let name = format!("cudaleak.{}.json", run.pid);
    let dir = run.dir.path();
    let report = |format: &str| {
        let out = cli(&["report", "--format", format, &name], dir);
        assert_eq!(out.status.code(), Some(23), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let (text_before, json_before) = (report("text"), report("json"));
    assert!(text_before.contains("allocate"), "{text_before}");
    // To another file first: the input stays as it was.
    let raw = std::fs::read(dir.join(&name)).unwrap();
    let other = tempfile::tempdir().unwrap();
    let copy = other.path().join("named.json");
    let out = cli(&["symbolize", "-o", copy.to_str().unwrap(), &name], dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(dir.join(&name)).unwrap(), raw);
    // Then in place.
    let out = cli(&["symbolize", &name], dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "",
        "nothing to say of a dump named in full"
    );
    let named = std::fs::read(dir.join(&name)).unwrap();
    assert_eq!(named, std::fs::read(&copy).unwrap());
    assert_eq!(report("text"), text_before);
    assert_eq!(report("json"), json_before);
    let dump = read_raw_dump(&dir.join(&name));
    assert!(!dump.unnamed, "names written in");
    assert!(!dump.modules.is_empty(), "the module table stays");
    assert_site(
        &dump,
        dump.live[0].stack,
        "deep_stack",
        "allocate",
        "deep_alloc",
    );
    // Named already: left as it is, byte for byte.
    let out = cli(&["symbolize", dir.to_str().unwrap()], dir);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains(&format!("{name}: already named, left as it is")),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(dir.join(&name)).unwrap(), named);
}

#[test]
fn symbolize_of_a_file_that_is_not_a_dump_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.json"), "{\"cudaleak_dump\": 3,").unwrap();
    let out = cli(&["symbolize", "bad.json"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("cudaleak: bad.json:1:"),
        "{}",
        text(&out.stderr)
    );
}

/// deep_stack run from a copy of the program, for tests that change the copy after the run.
fn run_from_copy() -> (tempfile::TempDir, PathBuf, Run) {
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("app");
    std::fs::copy(scenario_program("deep_stack"), &program).unwrap();
    let run = Scenario::program(&program).run_shim();
    run.assert_exit(0);
    (bin, program, run)
}

#[test]
fn a_program_rebuilt_since_the_run_is_not_trusted_and_said_once() {
    let (_bin, program, run) = run_from_copy();
    // Another build at the same path: a different program, so a different build-id.
    std::fs::copy(scenario_program("leak_exit"), &program).unwrap();
    let dump = dump_path(&run);
    let path = dump.to_str().unwrap();
    let out = cli(&["report", path, path], run.dir.path());
    assert_eq!(out.status.code(), Some(23));
    let stderr = text(&out.stderr);
    let note = format!(
        "cudaleak: {}: rebuilt since the run (build-id differs); its frames stay unnamed\n",
        program.display()
    );
    assert_eq!(
        stderr.matches(&note).count(),
        1,
        "once per invocation: {stderr}"
    );
    assert!(
        !text(&out.stdout).contains("allocate"),
        "{}",
        text(&out.stdout)
    );
    let named = read_dump(&dump);
    let top = &named.stacks[named.live[0].stack].frames[0];
    assert_eq!(top.function, None, "{top:?}");
    assert_eq!(top.module.as_deref(), program.to_str());
    assert!(top.offset.is_some());
}

#[test]
fn a_program_missing_here_says_to_symbolize_where_it_ran() {
    let (bin, program, run) = run_from_copy();
    drop(bin);
    let out = cli(
        &["report", dump_path(&run).to_str().unwrap()],
        run.dir.path(),
    );
    assert_eq!(out.status.code(), Some(23));
    assert!(
        text(&out.stderr).contains(&format!(
            "cudaleak: {}: not found on this machine: run `cudaleak symbolize` where the program ran; its frames stay unnamed\n",
            program.display()
        )),
        "{}",
        text(&out.stderr)
    );
}

/// `symbolize` where the program is missing names what it can and leaves the dump unnamed: once
/// the program is back, `symbolize` names the rest (it is not "already named").
#[test]
fn a_dump_named_while_its_program_was_missing_is_named_once_it_is_back() {
    let (_bin, program, run) = run_from_copy();
    let away = program.with_extension("away");
    std::fs::rename(&program, &away).unwrap();
    let dump = dump_path(&run);
    let path = dump.to_str().unwrap();
    let out = cli(&["symbolize", path], run.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let raw = read_raw_dump(&dump);
    assert!(raw.unnamed, "frames are left to name");
    let top = &raw.stacks[raw.live[0].stack].frames[0];
    assert_eq!(top.function, None, "{top:?}");
    assert_eq!(top.module.as_deref(), program.to_str());
    assert_eq!(
        text(&out.stderr),
        format!(
            "cudaleak: {}: not found on this machine: run `cudaleak symbolize` where the program \
             ran; its frames stay unnamed\n\
             cudaleak: {path}: named in part; the frames of the modules that could not be used \
             stay unnamed, for a later `cudaleak symbolize` where their files are\n",
            program.display()
        )
    );

    std::fs::rename(&away, &program).unwrap();
    let out = cli(&["symbolize", path], run.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "named in full this time");
    let named = read_raw_dump(&dump);
    assert!(!named.unnamed);
    assert_site_in(
        &named,
        named.live[0].stack,
        &scenario_source("deep_stack"),
        &program,
        "allocate",
        "deep_alloc",
    );
}

/// `report` of a dump that `symbolize` wrote while the program was rebuilt names the program's
/// frames once the build of the run is back.
#[test]
fn report_names_a_dump_written_while_its_program_was_rebuilt_once_the_build_is_back() {
    let (bin, program, run) = run_from_copy();
    let kept = bin.path().join("app.kept");
    std::fs::copy(&program, &kept).unwrap();
    std::fs::copy(scenario_program("leak_exit"), &program).unwrap();
    let name = format!("cudaleak.{}.json", run.pid);
    let out = cli(&["symbolize", &name], run.dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("rebuilt since the run (build-id differs)"),
        "{}",
        text(&out.stderr)
    );
    assert!(read_raw_dump(&dump_path(&run)).unnamed);
    let site = format!("deep_stack.c:{}", marker_line("deep_stack", "deep_alloc"));
    let report = || {
        let out = cli(&["report", &name], run.dir.path());
        assert_eq!(out.status.code(), Some(23), "{}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (stdout, _) = report();
    assert!(!stdout.contains(&site), "{stdout}");

    std::fs::rename(&kept, &program).unwrap();
    let (stdout, stderr) = report();
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("#0 allocate at ")
                && l.ends_with(&format!("/{site} (app)"))),
        "{stdout}"
    );
    assert_eq!(stderr, "", "nothing left unnamed");
}

#[test]
fn a_dump_written_with_names_still_reads_and_is_left_alone() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../format/tests/v1-sample.json");
    let dir = tempfile::tempdir().unwrap();
    let out = cli(&["report", sample.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(23), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("process_data(float*)"));
    let copy = dir.path().join("copy.json");
    let out = cli(
        &[
            "symbolize",
            "-o",
            copy.to_str().unwrap(),
            sample.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&sample).unwrap()
    );
}

/// `cudaleak run` names the dumps it wrote in place, while the program's files are at hand: a run
/// directory kept as a CI artifact reads the same on a machine without them.
#[test]
fn run_leaves_its_dumps_named_for_another_machine() {
    let run = cudaleak_tests::cudaleak_run(&[], "deep_stack", &[], &[]);
    assert_eq!(run.status.code(), Some(23), "{}", run.stderr);
    let dumps: Vec<PathBuf> = std::fs::read_dir(run.out.path())
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    // Read as written, without the CLI's naming.
    let dump = read_raw_dump(&dumps[0]);
    assert!(!dump.unnamed, "the dump on disk is named");
    let frames = &dump.stacks[dump.live[0].stack].frames;
    assert!(
        frames.iter().any(|f| f
            .function
            .as_deref()
            .is_some_and(|n| n.starts_with("recurse"))
            && f.file
                .as_deref()
                .is_some_and(|p| p.ends_with("deep_stack.c"))),
        "{frames:#?}"
    );
}

/// The shim is linked with `-Bsymbolic` (shim/build.rs), which binds every symbol it exports to
/// its own definition; meant for its functions (the hooks, which must not resolve to the
/// driver's functions of the same names when attach loads it after the driver). A data symbol
/// exported too would be bound the same way, and a program's copy relocation of it would then
/// part from the shim's: so the shim exports functions only.
#[test]
fn dynamic_symbols_are_functions_only() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(cudaleak_tests::shim())
        .output()
        .expect("nm (binutils)");
    assert!(
        out.status.success(),
        "nm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let symbols: Vec<&str> = text.lines().collect();
    assert!(
        symbols.iter().any(|l| l.ends_with(" T cuMemAlloc_v2")),
        "the hooks are exported:\n{text}"
    );
    let others: Vec<&&str> = symbols
        .iter()
        .filter(|l| l.split_whitespace().nth(1) != Some("T"))
        .collect();
    assert!(
        others.is_empty(),
        "exported symbols that are not functions: {others:?}"
    );
}
