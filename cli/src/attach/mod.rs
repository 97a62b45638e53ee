//! `cudaleak attach PID`: record a running CUDA program from now on, then report what grew while
//! attached and what it allocated since that is still live. docs/attach.md says how it works.
//!
//! Owns the refusals (each a message and exit 2, with nothing of the target changed), the fresh
//! run directory, the injection (`inject.rs` over `ptrace.rs`), the wait (Ctrl-C, `--for`, the
//! program's exit) and the detach; the report is `commands`' (the same functions `run --growth`
//! and `report --growth` use).

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod elf;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod inject;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod ptrace;
mod rundir;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod safepoint;
pub mod target;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::AttachArgs;
use crate::commands::{self, Failure, EXIT_ERROR};
use crate::load;
use crate::report::Format;
use crate::run;
use crate::say;

use cudaleak_format::env as var;
/// The name the injected shim is loaded under (the format crate's, which the shim reads too): a
/// link to the shim, so that its constructor knows to wait for `cudaleak_attach`.
pub use cudaleak_format::exports::ATTACH_NAME;

/// Why attach refuses: the message, exit 2, nothing changed.
fn refuse(pid: u32, why: impl std::fmt::Display) -> Failure {
    Failure(format!("cannot attach to pid {pid}: {why}"))
}

/// The checks made before anything is touched.
fn check_target(pid: u32) -> Result<target::Identity, Failure> {
    if pid == std::process::id() {
        return Err(refuse(pid, "that is this cudaleak process"));
    }
    let Some(identity) = target::Identity::of(pid).filter(target::Identity::alive) else {
        return Err(refuse(pid, "no such process"));
    };
    if !ptrace_available() {
        return Err(refuse(
            pid,
            "attach works on x86-64 Linux only; use `cudaleak run` here",
        ));
    }
    if target::stopped(pid) {
        return Err(stopped(pid));
    }
    let maps = match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        Ok(t) => target::parse_maps(&t),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(forbidden(pid));
        }
        Err(e) => return Err(refuse(pid, format!("/proc/{pid}/maps: {e}"))),
    };
    if let Some(m) = maps.iter().find(|m| target::is_shim(&m.path)) {
        // Preloaded, its path is in the environment the process started with; loaded by an
        // earlier attach (maps shows the file the link named), it is not, and attaching again
        // starts its recording over.
        let preloaded = target::environ_var(pid, "LD_PRELOAD")
            .is_some_and(|p| p.contains("cudaleak"))
            || target::environ_var(pid, var::OUTPUT).is_some();
        let readable = std::fs::read(format!("/proc/{pid}/environ")).is_ok();
        if readable && !preloaded {
            say!(
                "cudaleak was attached to pid {pid} before ({} stays loaded): recording starts \
                 over, with the first attach's settings but for the dump directory",
                m.path
            );
        } else {
            let dir = target::environ_var(pid, var::OUTPUT)
                .map(|d| format!(" (its dumps go to {d})"))
                .unwrap_or_default();
            return Err(refuse(
                pid,
                format!(
                    "it already runs under the shim ({} is loaded){dir}: it records everything \
                     already; `kill -USR1 {pid}` writes a snapshot, and `cudaleak report --growth` \
                     on its run directory reports what grew",
                    m.path
                ),
            ));
        }
    }
    if !maps.iter().any(|m| target::is_driver(&m.path)) {
        return Err(refuse(
            pid,
            format!(
                "not a CUDA process: {} has no libcuda.so mapped (a program loads the driver \
                 when it first uses CUDA)",
                target::program_name(pid)
            ),
        ));
    }
    Ok(identity)
}

fn ptrace_available() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    return ptrace::supported();
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    false
}

/// The refusal for a stopped process.
fn stopped(pid: u32) -> Failure {
    refuse(
        pid,
        format!(
            "it is stopped (SIGSTOP, Ctrl-Z or a debugger): a thread of it would have to run \
             while the others cannot let go of what they hold; continue it (`kill -CONT {pid}`) \
             and attach again. Nothing was changed"
        ),
    )
}

/// The refusal for a ptrace the kernel would not allow, with its cause and fix.
fn forbidden(pid: u32) -> Failure {
    let (tracer, other_user) = target::tracer_and_owner(pid);
    refuse(
        pid,
        format!(
            "ptrace is not allowed: {}",
            target::ptrace_refusal(
                target::yama_scope(),
                target::have_cap_sys_ptrace(),
                tracer,
                other_user
            )
        ),
    )
}

/// The configuration the shim gets: its dump directory, snapshots on the `auto` schedule (or the
/// interval in our CUDALEAK_SNAPSHOT_INTERVAL), quiet (the program's stderr is its own), no
/// signal handlers unless our CUDALEAK_SIGNAL asks for them, and the stack settings of our
/// environment.
///
/// Why no signal handlers by default: a library loaded with dlopen has its thread-local state
/// allocated at a thread's first use of it, with malloc (glibc's `__tls_get_addr`), and the
/// handler's first use on a thread interrupted inside malloc would wait for a lock that thread
/// holds. Preloaded, the shim's thread-local state is allocated with each thread.
fn shim_config(dir: &Path) -> String {
    let mut lines = vec![
        format!("{}={}/", var::OUTPUT, dir.display()),
        format!("{}=1", var::QUIET),
    ];
    let snapshots = std::env::var(var::SNAPSHOT_INTERVAL).unwrap_or_else(|_| "auto".into());
    lines.push(format!("{}={snapshots}", var::SNAPSHOT_INTERVAL));
    let signals = std::env::var(var::SIGNAL).unwrap_or_else(|_| "0".into());
    lines.push(format!("{}={signals}", var::SIGNAL));
    for k in [var::DEPTH, var::PY_DEPTH, var::UNWIND] {
        if let Ok(v) = std::env::var(k) {
            lines.push(format!("{k}={v}"));
        }
    }
    lines.join("\n") + "\n"
}

/// What `cudaleak_attach` answered below zero, in words.
fn attach_error(rc: i32) -> String {
    match rc {
        -1 => "the shim in the process is attached already (another cudaleak attach?)".into(),
        -2 => "the shim in the process is already recording it".into(),
        -3 => "the shim found no CUDA driver loaded in the process".into(),
        -4 => "the shim could not find the C library's dlsym in the process".into(),
        -5 => {
            "the shim refused the configuration (a CUDALEAK_* variable of yours is invalid)".into()
        }
        _ => format!("the shim failed to start ({rc})"),
    }
}

/// How the wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Interrupted,
    Time,
    Exited,
}

/// From before the first ptrace call to the end: Ctrl-C, SIGTERM and SIGHUP only set this flag.
/// Killed in the middle of an injected call, cudaleak would leave the borrowed thread running
/// our frame without us (the kernel lets a tracee go when its tracer dies), and the program
/// would crash at its return to address 0.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    ptrace::answer_interrupts(Arc::clone(&stop));
    stop
}

fn wait(who: target::Identity, limit: Option<Duration>, stop: &AtomicBool) -> Ended {
    let start = Instant::now();
    loop {
        if !who.alive() {
            return Ended::Exited;
        }
        if stop.load(Ordering::Relaxed) {
            return Ended::Interrupted;
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            return Ended::Time;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// `cudaleak attach`.
pub fn command(a: &AttachArgs) -> u8 {
    go(a).unwrap_or_else(commands::fail)
}

fn go(a: &AttachArgs) -> Result<u8, Failure> {
    let pid = a.pid;
    let cfg = crate::analyze::Config {
        hide_quiet: true,
        ..commands::config(&a.report, a.report.view())?
    };
    let who = check_target(pid)?;
    let exe = std::env::current_exe().ok();
    let (shim, _) = run::find_shim(
        a.shim.as_deref(),
        std::env::var_os(var::SHIM),
        exe.as_deref(),
    )?;
    let out_existed = a.out.exists();
    let dir = run::fresh_run_dir(&a.out)?;
    let cleanup = |dir: &Path| {
        let _ = std::fs::remove_dir_all(dir);
        if !out_existed {
            let _ = std::fs::remove_dir(&a.out);
        }
    };
    // A program run by another user writes into a directory of its own, which `report` collects.
    let run = match rundir::RunDir::prepare(&dir, pid, &shim) {
        Ok(run) => run,
        Err(why) => {
            cleanup(&dir);
            return Err(refuse(pid, why));
        }
    };
    let link = run.link();
    let program = target::program_name(pid);
    say!("attaching to pid {pid} ({program})");
    let stop = stop_flag();
    let how = Borrow {
        limit: a.safe_point_wait,
        stop: &stop,
    };
    let started = Instant::now();
    let rc = match attach(pid, &link, &shim, &shim_config(&run.output()), &how) {
        Ok(rc) => rc,
        Err(f) => {
            cleanup(&dir);
            return Err(f);
        }
    };
    let took = started.elapsed();
    if rc < 0 {
        cleanup(&dir);
        return Err(refuse(pid, attach_error(rc)));
    }
    say!(
        "attached in {}: {rc} pointer{} replaced by the shim's hooks (route: pointers); \
         recording from now on, blocks allocated before are unknown; dumps go to {}",
        ms(took),
        if rc == 1 { "" } else { "s" },
        dir.display()
    );
    if rc == 0 {
        say!(
            "warning: the program keeps no pointer to a hooked driver function where attach can \
             see it (its modules' import slots and data); only what it looks up from now on \
             is recorded"
        );
    }
    match a.duration {
        Some(d) => say!(
            "detaching after {}, at Ctrl-C, or when the program exits",
            humantime(d)
        ),
        None => say!("detaching at Ctrl-C or when the program exits"),
    }
    // Read now: the program may be gone when the report is written.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let frameworks = target::frameworks_mapped(&target::parse_maps(&maps));
    let ended = wait(who, a.duration, &stop);
    if ended == Ended::Exited {
        say!("the program exited while attached; its exit dump is the last");
    } else {
        // A Ctrl-C from here on gives up looking for a thread to detach with (the shim then
        // records on, to the program's exit).
        stop.store(false, Ordering::Relaxed);
        let started = Instant::now();
        match detach(pid, &shim, &how) {
            Ok(()) => say!("detached in {}; the program runs on", ms(started.elapsed())),
            Err(why) => say!("{why}"),
        }
    }
    report(a, &run, &cfg, &frameworks)
}

/// What attach cannot see in a job whose frameworks count their own memory, in words.
fn unread_counts_note(frameworks: &[&str]) -> Option<String> {
    let (last, rest) = frameworks.split_last()?;
    let names = if rest.is_empty() {
        last.to_string()
    } else {
        format!("{} and {last}", rest.join(", "))
    };
    let (own, its) = if rest.is_empty() {
        ("count", "its pool")
    } else {
        ("counts", "their pools")
    };
    Some(format!(
        "note: {names}'s own {own} of what {} hold{} could not be read (attach runs no code in the \
         job's interpreter): a tensor or array kept inside {its} shows here only when {its} take{} \
         more from the driver; `cudaleak run` reads those counts",
        if rest.is_empty() { "it" } else { "they" },
        if rest.is_empty() { "s" } else { "" },
        if rest.is_empty() { "s" } else { "" },
    ))
}

/// How a thread of the program is borrowed for a call: how long to look for a safe point
/// (`safepoint.rs`), and the flag Ctrl-C sets, which ends the looking.
pub struct Borrow<'a> {
    pub limit: Duration,
    pub stop: &'a AtomicBool,
}

/// Why no thread could be borrowed, in words.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn not_borrowed(pid: u32, e: inject::InjectError) -> Failure {
    use inject::InjectError as E;
    match e {
        E::Forbidden => forbidden(pid),
        E::Stopped => stopped(pid),
        E::Interrupted => refuse(
            pid,
            "interrupted before a thread was borrowed; nothing was changed",
        ),
        E::NoSafePoint(limit, seen) => {
            let threads: Vec<String> = seen
                .iter()
                .take(8)
                .map(|(tid, why)| format!("thread {tid}: {why}"))
                .collect();
            refuse(
                pid,
                format!(
                    "no thread of it came to a point where it is safe to borrow in {} (one \
                     outside the C library's allocator, loader and stdio, with a stack that \
                     unwinds); nothing was changed. Last seen: {}. A program that is never \
                     outside them (one thread in a loop of malloc and free, all others waiting \
                     inside them) can wait longer (--safe-point-wait) or be run under \
                     `cudaleak run`",
                    humantime(limit),
                    if threads.is_empty() {
                        "no thread".into()
                    } else {
                        threads.join("; ")
                    }
                ),
            )
        }
        E::Other(why) => refuse(pid, why),
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn attach(pid: u32, link: &Path, shim: &Path, config: &str, how: &Borrow) -> Result<i32, Failure> {
    inject::attach(pid, link, shim, config, how).map_err(|e| not_borrowed(pid, e))
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn attach(pid: u32, _: &Path, _: &Path, _: &str, _: &Borrow) -> Result<i32, Failure> {
    Err(refuse(pid, "attach works on x86-64 Linux only"))
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detach(pid: u32, shim: &Path, how: &Borrow) -> Result<(), String> {
    match inject::detach(pid, shim, how) {
        Ok(Some(0)) => Ok(()),
        Ok(Some(rc)) => Err(format!("the shim would not detach ({rc})")),
        Ok(None) => Err("the shim is no longer mapped in the process".into()),
        Err(e) => Err(format!(
            "could not detach: {}; the shim records on, and stops at the program's exit (or \
             at a later `cudaleak attach`, which starts it over)",
            not_borrowed(pid, e).0
        )),
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detach(_: u32, _: &Path, _: &Borrow) -> Result<(), String> {
    Err("attach works on x86-64 Linux only".into())
}

fn humantime(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 {
        format!("{:.4} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.4} min", s / 60.0)
    } else {
        format!("{s} s")
    }
}

/// The heading of the first section of attach's report (text and Markdown on standard output).
const LIVE_HEADING: &str = "blocks allocated since attach and still live at the end, per callsite:";
/// The heading of the second section, the growth report.
const GROWTH_HEADING: &str = "what grew while attached:";

/// Writes a section heading on the report's own stream (stderr is for progress); a closed pipe
/// downstream is fine, as for the report itself.
fn heading(out: &mut impl std::io::Write, text: &str) -> Result<(), Failure> {
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure(format!("cannot write the report: {e}")))
        }
        _ => Ok(()),
    }
}

/// The live blocks since attach, then the growth report; the growth report's gate is the
/// status. With fewer than two dumps there is no growth verdict: the live blocks, and 2.
/// Reads and rewrites only the CLI's own files: the dumps of a program run by another user are
/// first copied out of its directory (`rundir`).
fn report(
    a: &AttachArgs,
    run: &rundir::RunDir,
    cfg: &crate::analyze::Config,
    frameworks: &[&str],
) -> Result<u8, Failure> {
    run.collect();
    let dir = run.dir();
    let dirs = [dir.to_path_buf()];
    let files = load::expand(&dirs, true)?;
    if files.is_empty() {
        return Err(Failure(format!(
            "the program wrote no dump into {}: it was killed (SIGKILL) before its first \
             snapshot, or could not write there",
            dir.display()
        )));
    }
    let series = load::expand_again(&dirs, true)?;
    for f in &series {
        if let Err(Failure(why)) = commands::name_into(f, f) {
            say!("{why}; the report names its frames, the file stays unnamed");
        }
    }
    // Blocks live when recording ended are the program's working set as much as its leaks: they
    // are listed, and only growth fails the gate (as `report --growth`).
    let live_cfg = crate::analyze::Config {
        gate: crate::analyze::Gate {
            exit_code: 0,
            ..cfg.gate
        },
        ..cfg.clone()
    };
    let (growth, processes) =
        commands::growth_and_exit(&series, Some(&files), cfg, &live_cfg, None)?;
    let exit = crate::analyze::finish(processes, &live_cfg);
    let opts = &a.report;
    let alone =
        !matches!(opts.out.format, Format::Text | Format::Markdown) || opts.out.output.is_some();
    if let Some(note) = unread_counts_note(frameworks) {
        say!("{note}");
    }
    match growth {
        Ok(growth) => {
            if alone {
                say!(
                    "the blocks allocated since attach and still live: cudaleak report {}",
                    dir.display()
                );
            } else {
                // On the report's stream, so that `> file` keeps each heading with its section.
                heading(&mut std::io::stdout(), LIVE_HEADING)?;
                commands::write_report(&exit, None, opts, &live_cfg)?;
                heading(&mut std::io::stdout(), GROWTH_HEADING)?;
            }
            commands::write_growth(&growth, Some(&exit), opts, cfg)?;
            Ok(growth.exit_code)
        }
        Err(why) => {
            say!(
                "{why}\nno growth verdict: the blocks allocated since attach and still live follow"
            );
            commands::write_report(&exit, None, opts, &live_cfg)?;
            Ok(EXIT_ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_each_framework_whose_count_was_not_read() {
        assert_eq!(unread_counts_note(&[]), None);
        let one = unread_counts_note(&["PyTorch"]).unwrap();
        assert!(
            one.starts_with("note: PyTorch's own count of what it holds could not be read"),
            "{one}"
        );
        assert!(
            one.contains("inside its pool shows here only when its pool takes more"),
            "{one}"
        );
        let two = unread_counts_note(&["PyTorch", "JAX"]).unwrap();
        assert!(
            two.starts_with("note: PyTorch and JAX's own counts of what they hold"),
            "{two}"
        );
    }

    #[test]
    fn section_headings_are_written_on_the_stream_given_and_a_closed_pipe_is_fine() {
        let mut out = Vec::new();
        assert!(heading(&mut out, LIVE_HEADING).is_ok());
        assert!(heading(&mut out, GROWTH_HEADING).is_ok());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{LIVE_HEADING}\n{GROWTH_HEADING}\n")
        );
        struct Closed;
        impl std::io::Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        assert!(heading(&mut Closed, LIVE_HEADING).is_ok());
    }

    #[test]
    fn the_shim_is_told_where_to_write_and_to_keep_quiet() {
        let c = shim_config(Path::new("/tmp/run-1"));
        assert!(c.contains("CUDALEAK_OUTPUT=/tmp/run-1/\n"));
        assert!(c.contains("CUDALEAK_QUIET=1\n"));
        assert!(c.contains("CUDALEAK_SNAPSHOT_INTERVAL="));
        if std::env::var_os("CUDALEAK_SIGNAL").is_none() {
            assert!(
                c.contains("CUDALEAK_SIGNAL=0\n"),
                "no signal handlers by default"
            );
        }
    }

    #[test]
    fn a_missing_process_is_refused() {
        // Pid numbers stop well below this.
        let e = check_target(0x3fff_fff0).expect_err("refused");
        assert!(e.0.contains("no such process"), "{}", e.0);
    }
}
