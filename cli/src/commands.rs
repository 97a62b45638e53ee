//! Each subcommand from validated arguments to an exit status: load → analyse → write.
//!
//! The exit status is the contract (0 clean, 23 gate failed, 2 usage or input error; for `run`
//! the program's own failure first). Messages go to stderr prefixed `cudaleak:`; a broken pipe
//! on the report is not an error.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::analyze::View;
use crate::analyze::{self, Config, Findings};
use crate::args::{DiffArgs, EnvArgs, Format, ReportArgs, ReportOptions, RunArgs, SymbolizeArgs};
use crate::caches;
use crate::growth::{self, AtExit, GrowthFindings};
use crate::load;
use crate::output::Output;
use crate::report::{self, html, html::Gatekeeper};
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

/// Loads and analyses dumps one at a time, so only one dump is in memory at once.
pub(crate) fn analyze_paths(files: &[PathBuf], cfg: &Config) -> Result<Findings, Failure> {
    analyze_window(files, cfg, None)
}

/// [`analyze_paths`], of only what was allocated after sequence number `since` (`--since`).
fn analyze_window(
    files: &[PathBuf],
    cfg: &Config,
    since: Option<u64>,
) -> Result<Findings, Failure> {
    let mut processes = Vec::with_capacity(files.len());
    for f in files {
        let mut dump = load::read(f)?;
        if let Some(seq) = since {
            analyze::keep_after(&mut dump, seq);
        }
        processes.push(analyze::analyze_process(&dump, f, cfg));
    }
    Ok(analyze::finish(processes, cfg))
}

/// The series in `paths` for the HTML page's timeline: `None` when no process has two dumps.
/// Read after the exit report, one dump at a time like `--growth`.
fn html_series(paths: &[PathBuf], cfg: &Config) -> Result<Option<GrowthFindings>, Failure> {
    let files = load::expand_again(paths, true)?;
    let mut builder = growth::Builder::new(cfg);
    for f in &files {
        builder.add(&load::read(f)?, f);
    }
    Ok(builder.finish().ok())
}

/// Writes the exit report (or, with --gen-suppressions, its suppression lines); the HTML page
/// also gets the timeline of any series in `paths`.
pub(crate) fn write_report(
    findings: &Findings,
    paths: &[PathBuf],
    opts: &ReportOptions,
    cfg: &Config,
) -> Result<u8, Failure> {
    let series = match opts.out.format {
        Format::Html if !opts.gen_suppressions => html_series(paths, cfg)?,
        _ => None,
    };
    let (out, auto_color) = open_output(opts.out.output.as_deref())?;
    let view = View {
        source_root: source_root(),
        ..cfg.view.clone()
    };
    if opts.gen_suppressions {
        emit(out, |w| {
            report::gen_suppressions::write(findings, view.source_root.as_deref(), w)
        })?;
    } else if let Some(g) = &series {
        emit(out, |w| {
            html::page(Some(findings), Some(g), Gatekeeper::Report, &view, w)
        })?;
    } else {
        let reporter = report::reporter(opts.out.format, opts.out.text_color(auto_color));
        emit(out, |w| reporter.report(findings, &view, w))?;
    }
    say_written(
        opts.out.output.as_deref(),
        &report::wording::summary_line(findings),
        report::wording::exit_line(findings).as_deref(),
    );
    Ok(findings.exit_status())
}

/// Every dump of each process in `files`, one at a time, reduced at once. With
/// `cfg.hide_quiet` (`run`) a process that made no CUDA call is left out: it has one dump and
/// nothing to grow.
pub(crate) fn growth_of(
    files: &[PathBuf],
    cfg: &Config,
) -> Result<Result<GrowthFindings, String>, Failure> {
    growth_since(files, cfg, None)
}

/// [`growth_of`], judged only on what was allocated after sequence number `since` (`report
/// --growth --since`).
fn growth_since(
    files: &[PathBuf],
    cfg: &Config,
    since: Option<u64>,
) -> Result<Result<GrowthFindings, String>, Failure> {
    let mut builder = growth::Builder::new(cfg);
    for f in files {
        let mut dump = load::read(f)?;
        if cfg.hide_quiet && dump.is_quiet() {
            continue;
        }
        if let Some(seq) = since {
            growth::keep_after(&mut dump, seq);
        }
        builder.add(&dump, f);
    }
    Ok(builder.finish().map_err(|e| e.0))
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
    match exit {
        Some(f) if opts.out.format == Format::Html => emit(out, |w| {
            html::page(Some(f), Some(findings), Gatekeeper::Growth, &view, w)
        })?,
        _ => {
            let reporter = report::reporter(opts.out.format, opts.out.text_color(auto_color));
            emit(out, |w| reporter.growth(findings, &view, w))?
        }
    }
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
    let findings = growth_since(&files, cfg, a.since)?.map_err(Failure)?;
    // The HTML page shows the exit report beside the series (the exit status stays --growth's),
    // of the same window.
    let exit = match a.report.out.format {
        Format::Html => Some(analyze_window(
            &load::expand_again(&a.paths, false)?,
            cfg,
            a.since,
        )?),
        _ => None,
    };
    write_growth(&findings, exit.as_ref(), &a.report, cfg)?;
    Ok(findings.exit_code)
}

/// `run --growth`'s report: the growth report of the run's series, whose gate also counts the
/// exit report's (a block leaked once, early, does not grow). A run with no process that wrote
/// two dumps (too short for a snapshot, or snapshots turned off) gets the exit report, with a
/// note.
fn run_growth(
    exit: Findings,
    dir: &Path,
    opts: &ReportOptions,
    cfg: &Config,
) -> Result<u8, Failure> {
    let series = load::expand_again(&[dir.to_path_buf()], true)?;
    let mut findings = match growth_of(&series, cfg)? {
        Ok(f) => f,
        Err(why) => {
            say!("{why}\nno process wrote two dumps: the exit report follows");
            return write_report(&exit, &[dir.to_path_buf()], opts, cfg);
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
        let findings = analyze_window(&files, &cfg, a.since)?;
        write_report(&findings, &a.paths, &a.report, &cfg)
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
        for f in &load::expand_again(std::slice::from_ref(&dir), true)? {
            if let Err(Failure(why)) = name_into(f, f) {
                say!("{why}; the report names its frames, the file stays unnamed");
            }
        }
        let report = analyze_paths(&files, &cfg).and_then(|mut f| {
            f.program = program;
            if a.growth {
                run_growth(f, &dir, &a.report, &cfg)
            } else {
                write_report(&f, std::slice::from_ref(&dir), &a.report, &cfg)
            }
        });
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
        // One dump in memory at a time: each is reduced to its callsites before the next is read.
        let old = analyze::diff_input(&load::read(&a.old)?, &a.old, &view);
        let new = analyze::diff_input(&load::read(&a.new)?, &a.new, &view);
        let d = analyze::diff_of(old, new, &view);
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
