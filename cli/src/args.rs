//! Command-line definitions (clap) and their translation into the analysis's own options
//! ([`View`], [`Gate`]).
//!
//! Owns every flag's name, default and help text. It must never read dumps or print reports:
//! what a flag means is decided in `analyze` and `report`; here it is only parsed and checked.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use crate::analyze::DEFAULT_EXIT_CODE;
use crate::analyze::{Gate, View};
use crate::report::Format;

/// `--shim`'s help, the same for `run`, `env` and `attach`: the order `run::find_shim` searches.
const SHIM_HELP: &str = "The shim library (default: $CUDALEAK_SHIM, else libcudaleak.so next to \
    the cudaleak binary, else ../lib/libcudaleak.so relative to it)";

#[derive(Debug, Parser)]
#[command(
    name = "cudaleak",
    version,
    about = "Find CUDA memory leaks: run a program under the cudaleak shim, report what leaked and from where, gate CI",
    after_help = "Exit status: 0 clean, 23 leaks or bad frees remain (see --exit-code, --fail-on), \
                  2 usage error or unreadable input. `run` returns the program's own failure first.\n\
                  Blocks held by a cache or library handle (PyTorch's caching allocator, cuBLAS handles, …) \
                  are reported apart and do not fail the gate unless --fail-on strict; \
                  `cudaleak report --list-caches` prints the rules."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run PROGRAM with the shim preloaded, then report on every dump it wrote
    #[command(
        override_usage = "cudaleak run [OPTIONS] [--] PROGRAM [ARGS]...",
        after_help = "The shim is found as --shim PATH, else $CUDALEAK_SHIM, else libcudaleak.so next to \
                      the cudaleak binary, else ../lib/libcudaleak.so relative to it.\n\
                      SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to cudaleak are passed on to the program, \
                      and SIGUSR1 (a snapshot) once the program catches it.\n\
                      Exit status: the program's non-zero status (128+N when killed by signal N) wins; \
                      126 when PROGRAM cannot be executed, 127 when it is not found; otherwise the \
                      report's (0, 23, or 2 when no dump was written)."
    )]
    Run(RunArgs),
    /// Report leaks, bad frees, failed allocations and managed memory from dumps
    #[command(
        after_help = "PATH is a dump file or a directory: a directory contributes its cudaleak.<pid>.json \
                      files; a process with only snapshot dumps contributes its latest snapshot.\n\
                      With --growth a directory contributes every dump (snapshots and final), each \
                      process needs at least two, and the gate fails (--exit-code) when a callsite \
                      is a growth suspect; --min-bytes and --max-leaked-bytes then apply to growth."
    )]
    Report(ReportArgs),
    /// Compare two dumps of one program (e.g. snapshots): which callsites grew
    Diff(DiffArgs),
    /// Write the function, file and line names into dumps, so they can be read where the
    /// program's binaries are not
    #[command(
        after_help = "The shim writes each native frame as an address in a module (with the module's \
                      build-id); `report` and `diff` read the names from the modules' files when they \
                      load a dump. `symbolize` does that once and writes the names into the dump, on the \
                      machine where the program ran, so the dump reads the same anywhere. A directory \
                      stands for every dump in it (snapshots too). A dump already named is left as it \
                      is. A module whose file is missing or was rebuilt since the run (its build-id \
                      differs) is named on stderr and its frames stay unnamed: the dump is written \
                      named in part, still marked unnamed, and a later `symbolize` (or `report`) \
                      names those frames once the right file is back.\n\
                      Exit status: 0, or 2 when an input cannot be read or an output written."
    )]
    Symbolize(SymbolizeArgs),
    /// Record a running CUDA program from now on (loaded into it with ptrace), then report what
    /// grew while attached; the program runs on after detach
    #[command(
        override_usage = "cudaleak attach [OPTIONS] <PID>",
        after_help = ATTACH_HELP
    )]
    Attach(AttachArgs),
    /// Print the environment `run` gives a program, for launchers that start it themselves
    /// (the pytest plugin, job schedulers, containers)
    #[command(
        after_help = "Prints one KEY=VALUE line per variable (--json: one JSON object): LD_PRELOAD with \
                      the shim added to the current value, CUDALEAK_OUTPUT with --out, the \
                      frameworks' allocator variables with --exact-pools (as `run --exact-pools` \
                      sets them, notes on stderr), CUDALEAK_SNAPSHOT_INTERVAL=auto with --growth. \
                      The shim is found as `run` finds it.\n\
                      --names prints instead the names the shim, the CLI and the Python package \
                      share (the CUDALEAK_* variables, the shim's files and exported functions, \
                      which frames are internal, the recorded APIs) as one JSON object; it needs \
                      no shim.\n\
                      Exit status: 0, or 2 when the shim cannot be found."
    )]
    Env(EnvArgs),
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    #[arg(long, value_name = "PATH", help = SHIM_HELP)]
    pub shim: Option<PathBuf>,
    /// The frameworks' allocator variables `run --exact-pools` sets
    #[arg(long)]
    pub exact_pools: bool,
    /// Snapshots on the `auto` schedule, as `run --growth` takes them
    #[arg(long)]
    pub growth: bool,
    /// The directory the dumps go to (CUDALEAK_OUTPUT; created when the program writes its
    /// first dump); without it, each process writes into its working directory
    #[arg(long, value_name = "DIR", conflicts_with = "run_in")]
    pub out: Option<PathBuf>,
    /// Make a fresh run directory under DIR, as `run --out DIR` does (`DIR/run-<unix
    /// seconds>-<pid>/`, which `report DIR` finds), and send the dumps there
    #[arg(long, value_name = "DIR")]
    pub run_in: Option<PathBuf>,
    /// One JSON object instead of KEY=VALUE lines
    #[arg(long)]
    pub json: bool,
    /// Print the names the shim, the CLI and the Python package share (JSON), not variables
    #[arg(long, conflicts_with_all = ["shim", "exact_pools", "growth", "out", "run_in"])]
    pub names: bool,
}

#[derive(Debug, Args)]
pub struct SymbolizeArgs {
    /// Write here instead of replacing each dump in place (atomically: a temporary file renamed
    /// over it): a file for one dump, a directory (created if missing) for several
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Dump files or directories of dumps
    #[arg(required = true, value_name = "DUMP_OR_DIR")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[arg(long, value_name = "PATH", help = SHIM_HELP)]
    pub shim: Option<PathBuf>,
    /// Make frameworks give every tensor/array its own driver allocation: PyTorch
    /// (PYTORCH_CUDA_ALLOC_CONF backend:cudaMallocAsync, other keys kept) and JAX/XLA
    /// (XLA_PYTHON_CLIENT_ALLOCATOR=platform, XLA_PYTHON_CLIENT_PREALLOCATE=false); CuPy has no
    /// such variable
    #[arg(long)]
    pub exact_pools: bool,
    /// Directory that receives one fresh subdirectory of dumps per run
    #[arg(long, value_name = "DIR", default_value = "cudaleak-out")]
    pub out: PathBuf,
    /// Take snapshots while the program runs (CUDALEAK_SNAPSHOT_INTERVAL=auto unless set: a
    /// second apart, then farther apart as it runs on) and report the callsites whose live
    /// bytes kept growing, as `report --growth` does: memory a program keeps every step and
    /// frees only at exit. The gate also counts the leaks at exit
    #[arg(long, conflicts_with = "gen_suppressions")]
    pub growth: bool,
    #[command(flatten)]
    pub report: ReportOptions,
    /// The program to run and its arguments (`--` before them is optional unless PROGRAM
    /// starts with `-`)
    // Not `allow_hyphen_values`: with it a mistyped option before PROGRAM (`--fromat json`)
    // became the program, run and not found (127). Once PROGRAM is seen, every argument after
    // it is the program's (`trailing_var_arg`), options included.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub program: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub report: ReportOptions,
    /// Read every dump of each process (snapshots, then the final dump) and list the callsites
    /// whose live bytes grew across the series: leak suspects, with growth per hour
    #[arg(long, conflicts_with = "gen_suppressions")]
    pub growth: bool,
    /// Print the built-in cache rules (and the `cache:` lines of --suppressions) and exit
    #[arg(long, conflicts_with_all = ["growth", "gen_suppressions", "stats", "paths"])]
    pub list_caches: bool,
    /// Only what was allocated after sequence number SEQ (the shim's `cudaleak_mark()` at the
    /// start of a window, e.g. one test): live blocks, failed calls and bad frees of the window,
    /// and the blocks a framework's own record named in it; with --growth, the series is judged
    /// on the blocks allocated after SEQ only
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,
    /// The program emptied its memory pools before the dump (torch.cuda.empty_cache(),
    /// CuPy's free_all_blocks(); `report --list-caches` shows each pool's `empty` line): blocks
    /// such a pool still holds are held by objects the program keeps, and are reported as leaks
    #[arg(long, conflicts_with = "growth")]
    pub pools_emptied: bool,
    /// Dump files or directories of dumps
    // Required (so help shows `<PATH>...`); clap lets a required argument be missing when one
    // it conflicts with, here --list-caches, is present.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Options `report`, `run` and `diff` share: where the output goes and how it is shaped. None
/// of them changes what is grouped, counted or fingerprinted.
#[derive(Debug, Args)]
pub struct OutputOptions {
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write to FILE instead of standard output (a temporary file in FILE's directory, renamed
    /// into place when complete); `-` is standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Colour in text output (auto: on a terminal, unless NO_COLOR is set or TERM=dumb;
    /// CLICOLOR_FORCE forces it)
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// Show at most N leak groups per process (diff: callsites; --growth: suspects); totals,
    /// SUMMARY and the gate still count all
    #[arg(long, value_name = "N", value_parser = at_least_one("--top"))]
    pub top: Option<u64>,
    /// Show at most N frames per stack
    #[arg(long, value_name = "N", value_parser = at_least_one("--frames"))]
    pub frames: Option<u64>,
    /// Show frames inside the CUDA runtime/driver, the shim and the C start-up code
    #[arg(long)]
    pub show_internal: bool,
    /// In stacks with Python frames, show every frame instead of folding framework runs
    #[arg(long)]
    pub native: bool,
    /// List every callsite whose blocks a cache or library handle holds (text and Markdown
    /// show one line per cache by default; JSON and HTML always list them)
    #[arg(long)]
    pub show_cached: bool,
}

#[derive(Debug, Args)]
pub struct ReportOptions {
    #[command(flatten)]
    pub out: OutputOptions,
    /// Add statistics: counters, live bytes by API and by module, top callsites
    #[arg(long)]
    pub stats: bool,
    /// LeakSanitizer-style suppressions: `leak:PATTERN` lines, `#` comments, `*` wildcards;
    /// `cache:PATTERN` lines name caches of your own
    #[arg(long, value_name = "FILE")]
    pub suppressions: Option<PathBuf>,
    /// Ignore leak groups smaller than N bytes (suffixes K, M, G, T, KB, MB, GB, TB, KiB, MiB,
    /// GiB, TiB: all binary)
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub min_bytes: Option<u64>,
    /// Tolerate up to N leaked bytes in total before failing the gate
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub max_leaked_bytes: Option<u64>,
    /// Exit status when the gate fails; 0 disables the gate
    #[arg(long, value_name = "N", default_value_t = DEFAULT_EXIT_CODE)]
    pub exit_code: u8,
    /// Instead of the report, print a suppression file: a ready `leak:` line per leak group shown,
    /// under a comment naming the group (the exit status is still the gate's); text only, so
    /// not with --stats or a --format other than text
    #[arg(long, conflicts_with = "stats")]
    pub gen_suppressions: bool,
    /// What fails the gate: leaks, errors (double and invalid frees), all (both), or strict (both,
    /// and blocks held by caches and library handles count as leaked)
    #[arg(long, value_enum, default_value_t = FailOn::All, value_name = "WHAT")]
    pub fail_on: FailOn,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier dump
    #[arg(value_name = "OLD")]
    pub old: PathBuf,
    /// The later dump
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    #[command(flatten)]
    pub out: OutputOptions,
    /// Exit with --exit-code when any callsite's live bytes grew
    #[arg(long)]
    pub fail_on_growth: bool,
    /// Exit status for --fail-on-growth
    #[arg(long, value_name = "N", default_value_t = DEFAULT_EXIT_CODE)]
    pub exit_code: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Leaks,
    Errors,
    All,
    /// All, and what caches hold counts as leaked.
    Strict,
}

impl FailOn {
    fn leaks(self) -> bool {
        matches!(self, FailOn::Leaks | FailOn::All | FailOn::Strict)
    }
    fn errors(self) -> bool {
        matches!(self, FailOn::Errors | FailOn::All | FailOn::Strict)
    }
    fn cached(self) -> bool {
        self == FailOn::Strict
    }
}

fn to_usize(n: Option<u64>) -> Option<usize> {
    n.map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Whether to colour: `--color always`/`never` decide; `auto` takes `auto`, what anstream's rules
/// say of the stream (`output.rs`: a terminal, NO_COLOR, CLICOLOR_FORCE, TERM=dumb).
pub fn use_color(choice: ColorChoice, auto: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => auto,
    }
}

impl OutputOptions {
    /// What the analysis and the reporters are told; `stats` is `report`'s alone.
    pub fn view(&self, stats: bool) -> View {
        View {
            top: to_usize(self.top),
            frames: to_usize(self.frames),
            stats,
            show_internal: self.show_internal,
            native: self.native,
            show_cached: self.show_cached,
            source_root: None,
        }
    }

    /// Whether the text reporter paints (`auto_color`: what `--color auto` means on the output
    /// opened); only text is ever coloured.
    pub fn text_color(&self, auto_color: bool) -> bool {
        self.format == Format::Text && use_color(self.color, auto_color)
    }
}

/// The name `--format` takes for `f`, for messages.
fn format_name(f: Format) -> String {
    f.to_possible_value()
        .map_or_else(|| format!("{f:?}"), |v| v.get_name().to_string())
}

impl ReportOptions {
    /// What clap cannot refuse, since it depends on a flag's value: --gen-suppressions writes a
    /// suppression file, which has one format.
    pub fn check(&self) -> Result<(), String> {
        if self.gen_suppressions && self.out.format != Format::Text {
            return Err(format!(
                "the argument '--gen-suppressions' cannot be used with '--format {}' (it writes a \
                 suppression file, which is text)",
                format_name(self.out.format)
            ));
        }
        Ok(())
    }

    pub fn view(&self) -> View {
        self.out.view(self.stats)
    }

    pub fn gate(&self) -> Gate {
        Gate {
            exit_code: self.exit_code,
            fail_on_leaks: self.fail_on.leaks(),
            fail_on_errors: self.fail_on.errors(),
            count_cached: self.fail_on.cached(),
            max_leaked_bytes: self.max_leaked_bytes.unwrap_or(0),
        }
    }
}

impl ReportArgs {
    /// [`ReportOptions::check`], and --list-caches, which prints text only.
    pub fn check(&self) -> Result<(), String> {
        if self.list_caches && self.report.out.format != Format::Text {
            return Err(format!(
                "the argument '--list-caches' cannot be used with '--format {}' (the cache rules \
                 are listed as text)",
                format_name(self.report.out.format)
            ));
        }
        self.report.check()
    }
}

impl Cli {
    /// The checks clap cannot make while parsing (they depend on a flag's value), reported as
    /// clap reports its own conflicts: `error: …`, the subcommand's usage, exit 2.
    pub fn check(&self) -> Result<(), clap::Error> {
        let (sub, found) = match &self.command {
            Command::Report(a) => ("report", a.check()),
            Command::Run(a) => ("run", a.report.check()),
            Command::Attach(a) => ("attach", a.report.check()),
            Command::Diff(_) | Command::Symbolize(_) | Command::Env(_) => return Ok(()),
        };
        found.map_err(|message| {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            cmd.build();
            let sub = cmd
                .find_subcommand_mut(sub)
                .expect("the subcommand is defined");
            sub.error(clap::error::ErrorKind::ArgumentConflict, message)
        })
    }
}

impl DiffArgs {
    pub fn view(&self) -> View {
        self.out.view(false)
    }
}

/// A value parser for a count that must be 1 or more, whose error names `flag`.
fn at_least_one(flag: &'static str) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |s| match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err(format!("{flag} takes 1 or more")),
        Err(_) => Err(format!("{flag} takes a whole number, 1 or more")),
    }
}

/// A size argument (`--min-bytes`, `--max-leaked-bytes`): the grammar `format` decides for every
/// reader of sizes (the pytest plugin's markers and the Python API pass theirs to it).
pub fn parse_size(s: &str) -> Result<u64, String> {
    cudaleak_format::parse_size(s)
}

/// `cudaleak attach --help`'s closing text.
const ATTACH_HELP: &str = "The shim is loaded into the running process with ptrace (one thread is borrowed \
    for a few milliseconds to call dlopen, only where its stack shows it outside the C library's \
    allocator, loader and stdio: a safe point, sought for --safe-point-wait) and replaces the program's pointers to the CUDA driver's \
    memory functions; from then on every allocation and free is recorded with its native and \
    Python stack, and snapshots are taken on the `auto` schedule. Blocks allocated before attach \
    are unknown, and their frees are not errors.\n\
    At Ctrl-C (or SIGTERM), after --for, or when the program exits, the dumps are written and the \
    blocks allocated since attach that are still live are listed, then the growth report \
    (`report --growth`): its suspects fail the gate (--exit-code). The program runs on after \
    detach.\n\
    A signal that kills the program while attached leaves its last snapshot (CUDALEAK_SIGNAL=1: a \
    dump then too, see docs/attach.md).\n\
    Refused with exit 2, nothing changed: no such process, no libcuda mapped, ptrace not \
    allowed (Yama, missing CAP_SYS_PTRACE, another tracer), a stopped process (kill -CONT it \
    first), no thread at a safe point in time, a process already under the shim \
    (use `kill -USR1 PID` snapshots and its run directory). Attaching again after a detach starts \
    the recording over. x86-64 Linux, glibc.\n\
    Exit status: the growth report's (0 or --exit-code), or 2.";

/// `90`, `1.5`, `30s`, `500ms`, `5m`, `2h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 5m, 1h)"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("{other:?}: a duration's unit is ms, s, m or h")),
    };
    let secs = n * scale;
    if !(secs > 0.0 && secs.is_finite() && secs < 1e9) {
        return Err(format!("{s:?}: a duration must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_plain_bytes_and_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4kib"), Ok(4096));
        assert_eq!(parse_size("1.5M"), Ok(1_572_864));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("MB").is_err());
        // As pytest-memray reads them (the plugin's markers): binary, like KiB.
        assert_eq!(parse_size("4MB"), Ok(4 << 20));
        assert_eq!(parse_size("1 KB"), Ok(1024));
        assert!(parse_size("4 MiBs").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("1..2K").is_err());
    }

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("10 fortnights").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn fail_on_selects_the_gate_rules() {
        assert!(FailOn::All.leaks() && FailOn::All.errors());
        assert!(FailOn::Leaks.leaks() && !FailOn::Leaks.errors());
        assert!(!FailOn::Errors.leaks() && FailOn::Errors.errors());
        assert!(FailOn::Strict.leaks() && FailOn::Strict.errors() && FailOn::Strict.cached());
        assert!(!FailOn::All.cached());
    }

    #[test]
    fn colour_auto_follows_the_stream_and_forced_values_win() {
        assert!(!use_color(ColorChoice::Auto, false));
        assert!(use_color(ColorChoice::Always, false));
        assert!(!use_color(ColorChoice::Never, true));
    }

    #[test]
    fn counts_take_one_or_more_and_the_error_names_the_flag() {
        let top = at_least_one("--top");
        assert_eq!(top("1"), Ok(1));
        assert_eq!(top("0"), Err("--top takes 1 or more".into()));
        assert_eq!(
            top("-1"),
            Err("--top takes a whole number, 1 or more".into())
        );
    }

    #[test]
    fn no_help_text_has_a_run_of_spaces_from_a_lost_line_break() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        cli.build();
        for cmd in cli.get_subcommands() {
            let name = cmd.get_name();
            let texts = [cmd.get_about(), cmd.get_long_about(), cmd.get_after_help()]
                .into_iter()
                .flatten()
                .map(|t| (String::from("(command)"), t.to_string()))
                .chain(cmd.get_arguments().filter_map(|a| {
                    a.get_help()
                        .map(|h| (a.get_id().to_string(), h.to_string()))
                }));
            for (what, text) in texts {
                assert!(!text.contains("  "), "{name} {what}: {text:?}");
            }
        }
    }

    #[test]
    fn clap_definitions_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    #[arg(long, value_name = "PATH", help = SHIM_HELP)]
    pub shim: Option<PathBuf>,
    /// Detach after this long (`90`, `30s`, `5m`, `1h`); without it, at Ctrl-C or when the
    /// program exits
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Directory that receives one fresh subdirectory of dumps per attach
    #[arg(long, value_name = "DIR", default_value = "cudaleak-out")]
    pub out: PathBuf,
    /// How long to look for a thread of the program that is safe to borrow for the call that
    /// loads the shim (one outside the C library's allocator, loader and stdio); none by then,
    /// and attach refuses with nothing changed
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub safe_point_wait: std::time::Duration,
    #[command(flatten)]
    pub report: ReportOptions,
    /// The process to attach to
    #[arg(value_name = "PID")]
    pub pid: u32,
}
