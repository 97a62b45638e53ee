//! Each subcommand from validated arguments to an exit status: load → analyse → write.
//!
//! The exit status is the contract (0 clean, 23 gate failed, 2 usage or input error; for `run`
//! the program's own failure first). Messages go to stderr prefixed `cudaleak:`; a broken pipe
//! on the report is not an error.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::analyze::View;
use crate::analyze::{self, Config, Findings, ProcessFindings, ProgramStatus};
use crate::args::{DiffArgs, EnvArgs, ReportArgs, ReportOptions, RunArgs, SymbolizeArgs};
use crate::caches;
use crate::growth::{self, AtExit, GrowthFindings};
use crate::load;
use crate::output::Output;
use crate::report::{self, Page};
use crate::run::{self, Outcome};
use crate::say;
use crate::suppressions;

/// Exit status for usage errors and unreadable input.
pub const EXIT_ERROR: u8 = 2;

/// A failure that ends the command with status 2 and this message.
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

pub(crate) fn fail(f: Failure) -> u8 {
    say!("{}", f.0);
    EXIT_ERROR
}

/// Where the report goes (standard output or `-o FILE`), and whether `--color auto` colours it.
fn open_output(path: Option<&Path>) -> Result<(Output, bool), Failure> {
    Output::open(path).map_err(Failure)
}

/// Writes with `write`, then completes the output (a file is renamed into place); a closed pipe
/// downstream (`| head`) is fine.
fn emit(
    mut out: Output,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), Failure> {
    match write(&mut out).and_then(|()| out.finish()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(Failure(format!("cannot write the report: {e}")))
        }
        _ => Ok(()),
    }
}

/// When the report went to a file (`-o FILE`, any format), its verdict and where it is, on
/// stderr: a run whose report is in a file would otherwise end with nothing on the terminal.
fn say_written(path: Option<&Path>, summary: &str, gate: Option<&str>) {
    if let Some(p) = path.filter(|p| !crate::output::is_stdout(p)) {
        say!(
            "{}",
            report::wording::written_line(summary, gate, &p.display().to_string())
        );
    }
}

/// The current directory with a trailing slash: reports show source files under it relative
/// to it (SARIF through `uriBaseId`).
fn source_root() -> Option<String> {
    let dir = std::env::current_dir().ok()?;
    let s = dir.to_str()?.trim_end_matches('/');
    Some(format!("{s}/"))
}

fn read_suppressions(opts: &ReportOptions) -> Result<suppressions::Suppressions, Failure> {
    Ok(match &opts.suppressions {
        Some(p) => suppressions::read(p)?,
        None => suppressions::Suppressions::default(),
    })
}

pub(crate) fn config(opts: &ReportOptions, view: View) -> Result<Config, Failure> {
    let rules = read_suppressions(opts)?;
    Ok(Config {
        view,
        caches: caches::rules(&rules.cache)?,
        rules: rules.leak,
        min_bytes: opts.min_bytes.unwrap_or(0),
        gate: opts.gate(),
        hide_quiet: false,
        pools_emptied: false,
        framework_records: false,
    })
}

/// How a command reads a series (every dump of each process) beside or instead of the exit
/// dumps.
struct Series<'a> {
    files: &'a [PathBuf],
    /// `--growth`'s series: `--since` and `cfg.hide_quiet` apply. Otherwise the series the HTML
    /// page draws beside an exit report, every dump as it was written.
    judged: bool,
    cfg: &'a Config,
}

/// The one pass over a command's dumps, one dump in memory at a time (two where a dump is both
/// an exit dump and a point of a `--growth --since` series, which each cut their own way): each
/// file is read once, added to the series when there is one, and analysed for the exit report
/// when it is one of `exit`. The processes come in `exit`'s order. `since`: only what was
/// allocated after that sequence number (`--since`).
fn read_dumps<'a>(
    exit: Option<&[PathBuf]>,
    series: Option<Series<'a>>,
    cfg: &Config,
    since: Option<u64>,
) -> Result<(Vec<ProcessFindings>, Option<growth::Builder<'a>>), Failure> {
    let exit = exit.unwrap_or_default();
    // Where each exit dump goes; a path named twice is two processes, as it always was.
    let mut slots: HashMap<&Path, Vec<usize>> = HashMap::new();
    for (i, f) in exit.iter().enumerate() {
        slots.entry(f.as_path()).or_default().push(i);
    }
    let mut processes: Vec<Option<ProcessFindings>> = vec![None; exit.len()];
    let mut analyse = |mut dump: load::schema::Dump, f: &Path, at: &[usize]| {
        if let Some(seq) = since {
            analyze::keep_after(&mut dump, seq);
        }
        // A path named twice is two processes with the same findings.
        let findings = analyze::analyze_process(dump, f, cfg);
        if let Some((&last, more)) = at.split_last() {
            for &i in more {
                processes[i] = Some(findings.clone());
            }
            processes[last] = Some(findings);
        }
    };
    let mut builder = None;
    if let Some(s) = series {
        let b = builder.insert(growth::Builder::new(s.cfg));
        for f in s.files {
            let mut dump = load::read(f)?;
            let at = slots.remove(f.as_path());
            let as_written = match &at {
                Some(_) if s.judged && since.is_some() => Some(dump.clone()),
                _ => None,
            };
            // The series may take the dump's stacks where the exit report does not read it.
            let last_use = at.is_none() || as_written.is_some();
            add_to_series(b, &mut dump, f, s.judged.then_some(since), s.cfg, last_use);
            if let Some(at) = at {
                analyse(as_written.unwrap_or(dump), f, &at);
            }
        }
    }
    for f in exit {
        if let Some(at) = slots.remove(f.as_path()) {
            analyse(load::read(f)?, f, &at);
        }
    }
    Ok((processes.into_iter().flatten().collect(), builder))
}

/// Adds a dump to a series; `judged`: `--growth`'s series, of the window after `Some(seq)`
/// (`--since`), leaving out a process that made no CUDA call where `cfg.hide_quiet` says so;
/// `last_use`: nothing reads the dump after, so the series may take its stack table.
fn add_to_series(
    b: &mut growth::Builder,
    dump: &mut load::schema::Dump,
    f: &Path,
    judged: Option<Option<u64>>,
    cfg: &Config,
    last_use: bool,
) {
    if let Some(since) = judged {
        if cfg.hide_quiet && dump.is_quiet() {
            return;
        }
        if let Some(seq) = since {
            growth::keep_after(dump, seq);
        }
    }
    if last_use {
        b.add_taking_stacks(dump, f);
    } else {
        b.add(dump, f);
    }
}

/// Whether the format shows the series beside the exit report (and the exit report beside the
/// series), so that the command reads both.
fn shows_both(opts: &ReportOptions) -> bool {
    !opts.gen_suppressions && report::reporter(opts.out.format, false).shows_both()
}

/// The exit report of `files` and, where the format shows it beside them, the series of the
/// same `paths` (every dump as written).
fn exit_report(
    files: &[PathBuf],
    paths: &[PathBuf],
    opts: &ReportOptions,
    cfg: &Config,
    since: Option<u64>,
) -> Result<(Findings, Option<GrowthFindings>), Failure> {
    let series_files = if shows_both(opts) {
        let all = load::expand_again(paths, true)?;
        // A series needs a process with two dumps: fewer than two dumps, each read for the
        // exit report anyway, make none (`growth::Builder::finish` would say so), and reading
        // them into a series only adds its callsites beside the findings.
        (all.len() >= 2 || !all.iter().all(|f| files.contains(f))).then_some(all)
    } else {
        None
    };
    let series = series_files.as_deref().map(|files| Series {
        files,
        judged: false,
        cfg,
    });
    let (processes, builder) = read_dumps(Some(files), series, cfg, since)?;
    analyze::forget_shared_views();
    Ok((
        analyze::finish(processes, cfg),
        builder.and_then(|b| b.finish().ok()),
    ))
}

/// Writes the exit report (or, with --gen-suppressions, its suppression lines), with the series
/// of the same dumps where the format shows it ([`report::Reporter::shows_both`]).
pub(crate) fn write_report(
    findings: &Findings,
    series: Option<&GrowthFindings>,
    opts: &ReportOptions,
    cfg: &Config,
) -> Result<u8, Failure> {
    let (out, auto_color) = open_output(opts.out.output.as_deref())?;
    let view = View {
        source_root: source_root(),
        ..cfg.view.clone()
    };
    if opts.gen_suppressions {
        emit(out, |w| {
            report::gen_suppressions::write(findings, view.source_root.as_deref(), w)
        })?;
    } else {
        let reporter = report::reporter(opts.out.format, opts.out.text_color(auto_color));
        let page = Page::Report {
            exit: findings,
            series,
        };
        emit(out, |w| reporter.page(page, &view, w))?;
    }
    say_written(
        opts.out.output.as_deref(),
        &report::wording::summary_line(findings),
        report::wording::exit_line(findings).as_deref(),
    );
    Ok(findings.exit_status())
}

/// The growth of the series in `files`, judged on what was allocated after `since` (`report
/// --growth --since`); with `cfg.hide_quiet` (`run`, `attach`) a process that made no CUDA call
/// is left out (it has one dump and nothing to grow). Where `exit` names the exit dumps, also
/// their processes, analysed with `exit_cfg` for the exit report; each dump is read once.
pub(crate) fn growth_and_exit(
    files: &[PathBuf],
    exit: Option<&[PathBuf]>,
    cfg: &Config,
    exit_cfg: &Config,
    since: Option<u64>,
) -> Result<(Result<GrowthFindings, String>, Vec<ProcessFindings>), Failure> {
    let series = Series {
        files,
        judged: true,
        cfg,
    };
    let (processes, builder) = read_dumps(exit, Some(series), exit_cfg, since)?;
    analyze::forget_shared_views();
    let growth = builder.map_or_else(|| Err(String::new()), |b| b.finish().map_err(|e| e.0));
    Ok((growth, processes))
}

/// Writes the growth report; the HTML page shows `exit` (the exit report) beside the series.
pub(crate) fn write_growth(
    findings: &GrowthFindings,
    exit: Option<&Findings>,
    opts: &ReportOptions,
    cfg: &Config,
) -> Result<(), Failure> {
    let (out, auto_color) = open_output(opts.out.output.as_deref())?;
    let view = View {
        source_root: source_root(),
        ..cfg.view.clone()
    };
    let reporter = report::reporter(opts.out.format, opts.out.text_color(auto_color));
    let page = Page::Growth {
        series: findings,
        exit,
    };
    emit(out, |w| reporter.page(page, &view, w))?;
    let gate = (findings.exit_code != 0).then(|| {
        report::wording::gate_failed_text(
            &report::wording::growth_gate_reason(findings),
            findings.exit_code,
        )
    });
    say_written(
        opts.out.output.as_deref(),
        &report::wording::growth_summary_line(findings),
        gate.as_deref(),
    );
    Ok(())
}

/// `cudaleak report --growth`.
fn growth(a: &ReportArgs, cfg: &Config) -> Result<u8, Failure> {
    let files = load::expand_series(&a.paths)?;
    // The HTML page shows the exit report beside the series (the exit status stays --growth's),
    // of the same window.
    let exit_files = if shows_both(&a.report) {
        Some(load::expand_again(&a.paths, false)?)
    } else {
        None
    };
    let (findings, exit) = growth_and_exit(&files, exit_files.as_deref(), cfg, cfg, a.since)?;
    let findings = findings.map_err(Failure)?;
    let exit = exit_files.map(|_| analyze::finish(exit, cfg));
    write_growth(&findings, exit.as_ref(), &a.report, cfg)?;
    Ok(findings.exit_code)
}

/// `run --growth`'s report: the growth report of the run's series, whose gate also counts the
/// exit report's (a block leaked once, early, does not grow). A run with no process that wrote
/// two dumps (too short for a snapshot, or snapshots turned off) gets the exit report, with a
/// note.
fn run_growth(
    files: &[PathBuf],
    series: &[PathBuf],
    program: Option<ProgramStatus>,
    dir: &Path,
    opts: &ReportOptions,
    cfg: &Config,
) -> Result<u8, Failure> {
    let (growth, processes) = growth_and_exit(series, Some(files), cfg, cfg, None)?;
    let mut exit = analyze::finish(processes, cfg);
    exit.program = program;
    let mut findings = match growth {
        Ok(f) => f,
        Err(why) => {
            say!("{why}\nno process wrote two dumps: the exit report follows");
            return write_report(&exit, None, opts, cfg);
        }
    };
    // The report's last line carries the verdict (CI logs often keep stdout only): when the
    // exit report fails the gate and growth does not, the growth report says so itself.
    if findings.exit_code == 0 && exit.verdict.exit_code != 0 {
        findings.exit_code = exit.verdict.exit_code;
        findings.at_exit = Some(AtExit {
            reasons: report::gate_reasons(&exit),
            leaked: exit.totals.leaked,
        });
    }
    write_growth(&findings, Some(&exit), opts, cfg)?;
    if findings.at_exit.is_some() {
        say!(
            "nothing grew like a leak, but the exit report fails the gate: `cudaleak report {}` \
             lists what was still leaked at exit",
            dir.display()
        );
    }
    Ok(findings.exit_code)
}

/// `cudaleak report`.
pub fn report(a: &ReportArgs) -> u8 {
    let run = || -> Result<u8, Failure> {
        if a.list_caches {
            let user = read_suppressions(&a.report)?.cache;
            let text = caches::listing(&user, a.report.suppressions.as_deref());
            let (out, _) = open_output(a.report.out.output.as_deref())?;
            emit(out, |w| w.write_all(text.as_bytes()))?;
            return Ok(0);
        }
        let cfg = Config {
            pools_emptied: a.pools_emptied,
            framework_records: a.since.is_some(),
            ..config(&a.report, a.report.view())?
        };
        if a.growth {
            return growth(a, &cfg);
        }
        let files = load::expand(&a.paths, false)?;
        let (findings, series) = exit_report(&files, &a.paths, &a.report, &cfg, a.since)?;
        write_report(&findings, series.as_ref(), &a.report, &cfg)
    };
    run().unwrap_or_else(fail)
}

/// The variables `--exact-pools` and `--growth` add for `run` and `env`; notes for values of
/// the user's they replace or keep go to stderr.
fn extra_env(exact_pools: bool, growth: bool) -> Vec<(&'static str, std::ffi::OsString)> {
    let mut extra_env = if exact_pools {
        let (env, notes) = run::exact_pools_env(|k| std::env::var_os(k));
        for n in notes {
            say!("{n}");
        }
        env
    } else {
        Vec::new()
    };
    if growth {
        match run::growth_env(|k| std::env::var_os(k)) {
            Some(v) => extra_env.push(v),
            None => say!(
                "--growth: snapshots as CUDALEAK_SNAPSHOT_INTERVAL={} says (yours, kept)",
                std::env::var_os(cudaleak_format::env::SNAPSHOT_INTERVAL)
                    .unwrap_or_default()
                    .to_string_lossy()
            ),
        }
    }
    extra_env
}

fn shim_of(flag: Option<&Path>) -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe().ok();
    let (shim, _) = run::find_shim(
        flag,
        std::env::var_os(cudaleak_format::env::SHIM),
        exe.as_deref(),
    )?;
    Ok(shim)
}

/// `cudaleak env`.
pub fn env(a: &EnvArgs) -> u8 {
    let go = || -> Result<u8, Failure> {
        if a.names {
            let text = format!("{}\n", crate::env_names::document());
            let (out, _) = open_output(None)?;
            emit(out, |w| w.write_all(text.as_bytes()))?;
            return Ok(0);
        }
        let shim = shim_of(a.shim.as_deref())?;
        let mut vars: Vec<(&str, String)> = vec![(
            "LD_PRELOAD",
            run::ld_preload(std::env::var_os("LD_PRELOAD"), &shim)?
                .to_string_lossy()
                .into_owned(),
        )];
        let run_dir = a.run_in.as_deref().map(run::fresh_run_dir).transpose()?;
        if let Some(dir) = run_dir.as_ref().or(a.out.as_ref()) {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            let mut out = dir.into_os_string();
            out.push("/");
            vars.push((
                cudaleak_format::env::OUTPUT,
                out.to_string_lossy().into_owned(),
            ));
        }
        vars.extend(
            extra_env(a.exact_pools, a.growth)
                .into_iter()
                .map(|(k, v)| (k, v.to_string_lossy().into_owned())),
        );
        let text = if a.json {
            let map: serde_json::Map<String, serde_json::Value> = vars
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            format!("{}\n", serde_json::Value::Object(map))
        } else {
            vars.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
        };
        let (out, _) = open_output(None)?;
        emit(out, |w| w.write_all(text.as_bytes()))?;
        Ok(0)
    };
    go().unwrap_or_else(fail)
}

/// `cudaleak run`.
pub fn run(a: &RunArgs) -> u8 {
    let go = || -> Result<u8, Failure> {
        // Everything that can be wrong with the command line is checked before the program runs.
        let cfg = Config {
            hide_quiet: true,
            ..config(&a.report, a.report.view())?
        };
        let extra_env = extra_env(a.exact_pools, a.growth);
        let shim = shim_of(a.shim.as_deref())?;
        let out_existed = a.out.exists();
        let dir = run::fresh_run_dir(&a.out)?;
        say!("dumps of this run go to {}", dir.display());
        let started = run::run_program(&a.program, &shim, &dir, &extra_env);
        if !matches!(started, Ok(Outcome::Exited(_))) {
            // Nothing ran: leave no empty directory behind (nor --out, if this run made it).
            let _ = std::fs::remove_dir(&dir);
            if !out_existed {
                let _ = std::fs::remove_dir(&a.out);
            }
        }
        let program = match started? {
            Outcome::NotStarted(code) => return Ok(code),
            Outcome::Exited(status) => Some(status).filter(|s| s.shell() != 0),
        };
        if let Some(p) = program {
            say!(
                "the program {}; exit status {} is this run's status",
                p.how(),
                p.shell()
            );
            // A missing libcudart makes the loader fail with 127 before any CUDA call: the
            // driver note would send the user looking for the wrong library.
            if p.shell() == run::EXIT_NOT_LOADED {
                say!("{}", run::LOADER_NOTE);
            } else if !run::driver_found(std::env::var_os("LD_LIBRARY_PATH")) {
                say!("{}", run::NO_DRIVER_NOTE);
            }
        }
        let files = load::expand(std::slice::from_ref(&dir), true)?;
        if files.is_empty() {
            say!(
                "the program wrote no dump into {}: the shim was not loaded \
                 (a static or setuid program, or one that clears LD_PRELOAD) or the program \
                 was killed before it could write one; nothing was checked",
                dir.display()
            );
            return Ok(program.map_or(EXIT_ERROR, |p| p.shell()));
        }
        // The run's dumps, snapshots included, get their names now, where the program's files
        // are: a run directory kept as a CI artifact reads the same on any machine (a series
        // of named and unnamed dumps would not match its callsites there). A dump that cannot
        // be rewritten is still reported (named in memory), and said.
        let series = load::expand_again(std::slice::from_ref(&dir), true)?;
        for f in &series {
            if let Err(Failure(why)) = name_into(f, f) {
                say!("{why}; the report names its frames, the file stays unnamed");
            }
        }
        let report = if a.growth {
            run_growth(&files, &series, program, &dir, &a.report, &cfg)
        } else {
            let dirs = std::slice::from_ref(&dir);
            exit_report(&files, dirs, &a.report, &cfg, None).and_then(|(mut f, series)| {
                f.program = program;
                write_report(&f, series.as_ref(), &a.report, &cfg)
            })
        };
        match (program, report) {
            (None, r) => r,
            (Some(p), Ok(_)) => Ok(p.shell()),
            (Some(p), Err(e)) => {
                fail(e);
                Ok(p.shell())
            }
        }
    };
    go().unwrap_or_else(fail)
}

/// `cudaleak diff`.
pub fn diff(a: &DiffArgs) -> u8 {
    let go = || -> Result<u8, Failure> {
        let view = a.view();
        // One dump in memory at a time: the old one is reduced to a row per callsite before the
        // new one is read, whose callsites are summed straight into those rows.
        let old = analyze::diff_old(load::read(&a.old)?, &a.old, &view);
        let d = old.and_new(load::read(&a.new)?, &a.new, &view);
        analyze::forget_shared_views();
        let (out, auto_color) = open_output(a.out.output.as_deref())?;
        let view = View {
            source_root: source_root(),
            ..view
        };
        let reporter = report::reporter(a.out.format, a.out.text_color(auto_color));
        emit(out, |w| reporter.diff(&d, &view, w))?;
        Ok(if a.fail_on_growth && d.grew > 0 {
            a.exit_code
        } else {
            0
        })
    };
    go().unwrap_or_else(fail)
}

/// `cudaleak symbolize`: each unnamed dump named and written back (or under `-o`), each
/// through a temporary file renamed into place; a named one left as it is (copied under `-o`).
/// A dump with frames of a module missing or rebuilt here is written still unnamed, and said.
pub fn symbolize(a: &SymbolizeArgs) -> u8 {
    let go = || -> Result<u8, Failure> {
        let files = load::expand_series(&a.paths)?;
        if a.output.as_deref().is_some_and(crate::output::is_stdout) && files.len() > 1 {
            return Err(Failure(format!(
                "-o - writes one dump to standard output, and {} dumps were given; name a \
                 directory instead",
                files.len()
            )));
        }
        let into_dir = match &a.output {
            Some(out) if crate::output::is_stdout(out) => false,
            Some(out) => files.len() > 1 || out.is_dir() || a.paths.iter().any(|p| p.is_dir()),
            None => false,
        };
        if let (true, Some(dir)) = (into_dir, &a.output) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Failure(format!("{}: cannot create: {e}", dir.display())))?;
        }
        for f in &files {
            let dest = match &a.output {
                None => f.clone(),
                Some(out) if into_dir => out.join(f.file_name().unwrap_or_default()),
                Some(out) => out.clone(),
            };
            match name_into(f, &dest)? {
                Naming::Whole => {}
                Naming::InPart => say!(
                    "{}: named in part; the frames of the modules that could not be used stay \
                     unnamed, for a later `cudaleak symbolize` where their files are",
                    dest.display()
                ),
                Naming::Already => {
                    if dest != *f {
                        let (mut out, _) = open_output(Some(&dest))?;
                        let mut input = load::open_regular(f)?.0;
                        emit_file(&dest, |w| io::copy(&mut input, w).map(drop), &mut out)?;
                        out.finish().map_err(|e| {
                            Failure(format!("{}: cannot write: {e}", dest.display()))
                        })?;
                    }
                    say!("{}: already named, left as it is", f.display());
                }
            }
        }
        Ok(0)
    };
    go().unwrap_or_else(fail)
}

/// What [`name_into`] made of a dump.
pub(crate) enum Naming {
    /// Named already: nothing written.
    Already,
    /// Every frame it could name is named; written without `unnamed`.
    Whole,
    /// Written, still `unnamed`: frames of a module missing or rebuilt here are left for a later
    /// naming where the module's file is.
    InPart,
}

/// Names the unnamed dump `f` with the modules' files here and writes it to `dest` (through a
/// temporary file renamed into place); nothing is written when `f` is named already.
pub(crate) fn name_into(f: &Path, dest: &Path) -> Result<Naming, Failure> {
    let mut dump = load::read_as_written(f, load::MAX_DUMP_BYTES)?;
    if !dump.unnamed {
        return Ok(Naming::Already);
    }
    crate::symbols::name_for_writing(&mut dump);
    let (mut out, _) = open_output(Some(dest))?;
    emit_file(dest, |w| cudaleak_format::write(&dump, w), &mut out)?;
    out.finish()
        .map_err(|e| Failure(format!("{}: cannot write: {e}", dest.display())))?;
    Ok(if dump.unnamed {
        Naming::InPart
    } else {
        Naming::Whole
    })
}

fn emit_file(
    dest: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    out: &mut Output,
) -> Result<(), Failure> {
    write(out).map_err(|e| Failure(format!("{}: cannot write: {e}", dest.display())))
}
