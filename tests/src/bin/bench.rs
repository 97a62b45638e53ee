//! `make bench`: the shim's CPU overhead, measured against bare runs of the same programs on a
//! driver that costs next to nothing (bench/benchdrv.c), so what is left is the shim's own cost.
//!
//! Prints medians; asserts nothing. Timing is not a test: numbers go to docs/performance.md.
//!
//! Usage: `bench [--quick] [--reps N]` (quick: fewer repetitions and a 100 000-block scale
//! run; `--reps`: repetitions of each measurement, for a machine shared with other work), or
//! `bench --instructions`: instructions per pair counted by valgrind instead of times, or
//! `bench --exit`: what the shim adds to the end of a process — a small leaking one, and one
//! with 1 000 000 live blocks (the dump's time), or `bench --cold`: the batch round of the GPU
//! A/B (10 000 live blocks, then their frees) on a driver that evicts the caches at every call
//! as a real one does, with the shim's cache misses per pair counted by valgrind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use cudaleak_tests::{pythons, scenario_program, shim};

const BENCHCUDA_DIR: &str = env!("BENCHCUDA_DIR");
/// Calls below `loop()` in bench_pairs: `deep` DEPTH+1 times, worker, start_thread, clone3.
/// 17 gives the 22-frame stack the overhead target is stated for.
const DEPTH_FOR_22_FRAMES: u32 = 17;

/// Runs `program` to completion and returns its standard output.
fn run(program: &Path, args: &[String], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", BENCHCUDA_DIR)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        program.display(),
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn value(stdout: &str, key: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{key}` in output:\n{stdout}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Bench {
    shim: PathBuf,
    dumps: tempfile::TempDir,
    reps: usize,
}

impl Bench {
    fn shim_env<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut env = vec![
            ("LD_PRELOAD", self.shim.to_str().expect("UTF-8 shim path")),
            (
                "CUDALEAK_OUTPUT",
                self.dumps.path().to_str().expect("UTF-8 temp dir"),
            ),
            ("CUDALEAK_QUIET", "1"),
        ];
        env.extend_from_slice(extra);
        env
    }

    /// Median ns per alloc+free pair of `threads` threads, bare and under the shim, alternating.
    fn pairs(&self, threads: u32, pairs: u64, extra: &[(&str, &str)]) -> (f64, f64) {
        self.pairs_of(threads, pairs, extra, false)
    }

    /// As [`Bench::pairs`]; with `stream_ordered`, cuMemAllocAsync + cuMemFreeAsync pairs.
    fn pairs_of(
        &self,
        threads: u32,
        pairs: u64,
        extra: &[(&str, &str)],
        stream_ordered: bool,
    ) -> (f64, f64) {
        let program = scenario_program("bench_pairs");
        let mut args = vec![
            threads.to_string(),
            pairs.to_string(),
            DEPTH_FOR_22_FRAMES.to_string(),
        ];
        if stream_ordered {
            args.push("async".into());
        }
        let (mut bare, mut shimmed) = (Vec::new(), Vec::new());
        for _ in 0..self.reps {
            bare.push(value(&run(&program, &args, &[]), "ns_per_pair"));
            let env = self.shim_env(extra);
            shimmed.push(value(&run(&program, &args, &env), "ns_per_pair"));
        }
        (median(bare), median(shimmed))
    }
}

impl Bench {
    /// Medians of wall and CPU ns per pair under the shim, for each thread count; the counts
    /// alternate within each repetition, so load from other work hits them alike.
    fn shim_threads(&self, counts: &[u32], pairs: u64) -> Vec<(f64, f64)> {
        let program = scenario_program("bench_pairs");
        let mut samples = vec![(Vec::new(), Vec::new()); counts.len()];
        for _ in 0..self.reps {
            for (&threads, (wall, cpu)) in counts.iter().zip(samples.iter_mut()) {
                let args = vec![
                    threads.to_string(),
                    pairs.to_string(),
                    DEPTH_FOR_22_FRAMES.to_string(),
                ];
                let out = run(&program, &args, &self.shim_env(&[]));
                wall.push(value(&out, "ns_per_pair"));
                cpu.push(value(&out, "cpu_ns_per_pair"));
            }
        }
        samples
            .into_iter()
            .map(|(wall, cpu)| (median(wall), median(cpu)))
            .collect()
    }
}

/// Runs `program` on the benchmark driver under valgrind with `tool` (its options) and returns
/// valgrind's report (standard error).
fn valgrind(tool: &[&str], program: &Path, args: &[String], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new("valgrind");
    cmd.args(tool)
        .arg(program)
        .args(args)
        .env("LD_LIBRARY_PATH", BENCHCUDA_DIR)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .expect("valgrind (needed for --instructions and --cold)");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "valgrind {}: {text}",
        program.display()
    );
    text
}

/// Instructions a program executes under valgrind's callgrind (its "Collected" total).
fn instructions_of(program: &Path, args: &[String], env: &[(&str, &str)]) -> f64 {
    let text = valgrind(
        &["--tool=callgrind", "--callgrind-out-file=/dev/null"],
        program,
        args,
        env,
    );
    text.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no total in valgrind's output:\n{text}"))
}

/// `--instructions`: instructions per pair, counted by callgrind — unlike times, the same on a
/// machine shared with other work. Two loop lengths per configuration; the difference divided
/// by the difference in pairs leaves out start-up and exit.
fn instructions(bench: &Bench) {
    let per_pair = |program: &Path, args: &dyn Fn(u64) -> Vec<String>, env: &[(&str, &str)]| {
        let (short, long) = (10_000u64, 60_000u64);
        let a = instructions_of(program, &args(short), env);
        let b = instructions_of(program, &args(long), env);
        (b - a) / (long - short) as f64
    };
    let pairs = scenario_program("bench_pairs");
    let native = |stream_ordered: bool| {
        move |n: u64| {
            let mut v = vec![
                "1".to_string(),
                n.to_string(),
                DEPTH_FOR_22_FRAMES.to_string(),
            ];
            if stream_ordered {
                v.push("async".into());
            }
            v
        }
    };
    println!("## Instructions per alloc+free pair (valgrind --tool=callgrind), 1 thread");
    println!("| run | instructions/pair | added by the shim |");
    println!("|---|---:|---:|");
    let bare = per_pair(&pairs, &native(false), &[]);
    println!("| cuMemAlloc_v2 + cuMemFree_v2, 22 frames, bare | {bare:.0} | |");
    let shim = per_pair(&pairs, &native(false), &bench.shim_env(&[]));
    println!(
        "| the same under the shim | {shim:.0} | {:.0} |",
        shim - bare
    );
    let bare_async = per_pair(&pairs, &native(true), &[]);
    let shim_async = per_pair(&pairs, &native(true), &bench.shim_env(&[]));
    println!(
        "| cuMemAllocAsync + cuMemFreeAsync (the --exact-pools route) under the shim | {shim_async:.0} | {:.0} |",
        shim_async - bare_async
    );
    let py = &pythons()[0];
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/python_pairs.py");
    let py_args = |n: u64| vec![script.to_string(), n.to_string(), "20".to_string()];
    let py_bare = per_pair(&py.path, &py_args, &[]);
    let py_native = per_pair(
        &py.path,
        &py_args,
        &bench.shim_env(&[("CUDALEAK_PY_DEPTH", "0")]),
    );
    let py_frames = per_pair(&py.path, &py_args, &bench.shim_env(&[]));
    println!(
        "| ctypes pair from 20 Python frames (CPython {}.{}), bare | {py_bare:.0} | |",
        py.version.0, py.version.1
    );
    println!(
        "| the same under the shim, `CUDALEAK_PY_DEPTH=0` | {py_native:.0} | {:.0} |",
        py_native - py_bare
    );
    println!(
        "| the same under the shim, Python frames (default) | {py_frames:.0} | {:.0} |",
        py_frames - py_bare
    );
    println!(
        "Python frames: {:.0} instructions per allocation.",
        py_frames - py_native
    );
    // The code watcher (CPython 3.12+): what `cudaleak run`'s bootstrap adds once a framework is
    // imported, and the pytest plugin always.
    let Some(py) = pythons().into_iter().find(|p| p.version >= (3, 12)) else {
        println!("No CPython 3.12 or later here: the code watcher not measured.");
        return;
    };
    let watched_args = |n: u64| {
        let mut a = py_args(n);
        a.push("watch".to_string());
        a
    };
    let native = per_pair(
        &py.path,
        &py_args,
        &bench.shim_env(&[("CUDALEAK_PY_DEPTH", "0")]),
    );
    let unwatched = per_pair(&py.path, &py_args, &bench.shim_env(&[]));
    let watched = per_pair(&py.path, &watched_args, &bench.shim_env(&[]));
    println!(
        "Python frames (CPython {}.{}): {:.0} instructions per allocation, {:.0} with the code watcher.",
        py.version.0,
        py.version.1,
        unwatched - native,
        watched - native
    );
}

/// The counts cachegrind prints for a program: instructions, first-level instruction-cache
/// misses, first-level data-cache read and write misses.
struct CacheCounts {
    instructions: f64,
    i1_misses: f64,
    d1_read_misses: f64,
    d1_write_misses: f64,
}

impl CacheCounts {
    fn minus(&self, o: &CacheCounts) -> CacheCounts {
        CacheCounts {
            instructions: self.instructions - o.instructions,
            i1_misses: self.i1_misses - o.i1_misses,
            d1_read_misses: self.d1_read_misses - o.d1_read_misses,
            d1_write_misses: self.d1_write_misses - o.d1_write_misses,
        }
    }

    fn per(&self, n: f64) -> CacheCounts {
        CacheCounts {
            instructions: self.instructions / n,
            i1_misses: self.i1_misses / n,
            d1_read_misses: self.d1_read_misses / n,
            d1_write_misses: self.d1_write_misses / n,
        }
    }

    fn row(&self, label: &str) -> String {
        format!(
            "| {label} | {:.0} | {:.1} | {:.1} | {:.1} |",
            self.instructions, self.i1_misses, self.d1_read_misses, self.d1_write_misses
        )
    }
}

/// `program` under valgrind's cachegrind, with the caches of a current x86-64 server core
/// (32 KiB 8-way L1i, 48 KiB 12-way L1d, 64-byte lines).
fn cache_counts_of(program: &Path, args: &[String], env: &[(&str, &str)]) -> CacheCounts {
    let text = valgrind(
        &[
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--I1=32768,8,64",
            "--D1=49152,12,64",
            "--cachegrind-out-file=/dev/null",
        ],
        program,
        args,
        env,
    );
    // "==PID== D1  misses:  43,662,243  (43,217,130 rd   +    445,113 wr)"
    let numbers = |key: &str| -> Vec<f64> {
        let line = text
            .lines()
            .find_map(|l| l.split_once(key).map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("no `{key}` in cachegrind's output:\n{text}"));
        line.split(|c: char| !c.is_ascii_digit() && c != ',')
            .filter(|w| !w.is_empty() && w.chars().any(|c| c.is_ascii_digit()))
            .map(|w| w.replace(',', "").parse().expect("a count"))
            .collect()
    };
    let d1 = numbers("D1  misses:");
    CacheCounts {
        instructions: numbers("I   refs:")[0],
        i1_misses: numbers("I1  misses:")[0],
        d1_read_misses: d1[1],
        d1_write_misses: d1[2],
    }
}

/// `--cold`: what the shim costs where a real driver leaves the caches cold. On the GPU the batch
/// round (10 000 live 4 KiB blocks, then their frees) pays about three times the shim's cost
/// measured on the null driver (docs/performance.md): between two hooked calls the driver's own
/// work evicts the shim's code and data from the first-level caches. Here the benchmark driver
/// does the same (BENCHDRV_EVICT=1: 64 KiB of code and 64 KiB of data touched per call, see
/// bench/benchdrv.c), so the misses a pair adds can be counted (cachegrind: exact, unlike times
/// on a shared machine) and the time it adds measured.
fn cold(bench: &Bench) {
    let program = scenario_program("bench_pairs");
    let args = |n: u64| {
        vec![
            "1".to_string(),
            n.to_string(),
            DEPTH_FOR_22_FRAMES.to_string(),
            "batch".to_string(),
        ]
    };
    // Two loop lengths; the difference leaves out start-up and exit.
    let per_pair = |env: &[(&str, &str)]| {
        let (short, long) = (20_000u64, 40_000u64);
        let a = cache_counts_of(&program, &args(short), env);
        let b = cache_counts_of(&program, &args(long), env);
        b.minus(&a).per((long - short) as f64)
    };
    println!(
        "## Batch round (10 000 live, then freed), 22 frames: per alloc+free pair (valgrind --tool=cachegrind)"
    );
    println!("| run | instructions | L1i misses | L1d read misses | L1d write misses |");
    println!("|---|---:|---:|---:|---:|");
    let evict = [("BENCHDRV_EVICT", "1")];
    let bare_warm = per_pair(&[]);
    let shim_warm = per_pair(&bench.shim_env(&[]));
    let bare_cold = per_pair(&evict);
    let shim_cold = per_pair(&bench.shim_env(&evict));
    println!(
        "{}",
        shim_warm
            .minus(&bare_warm)
            .row("added by the shim, null driver (warm caches)")
    );
    println!(
        "{}",
        bare_cold.row("bare, evicting driver (BENCHDRV_EVICT=1)")
    );
    println!(
        "{}",
        shim_cold
            .minus(&bare_cold)
            .row("added by the shim, evicting driver")
    );
    println!();
    println!("## Batch round on the evicting driver, wall time (medians)");
    println!("| bare ns/pair | shim ns/pair | added ns/pair | ratio |");
    println!("|---:|---:|---:|---:|");
    let (mut bare, mut shimmed) = (Vec::new(), Vec::new());
    for _ in 0..bench.reps {
        bare.push(value(&run(&program, &args(100_000), &evict), "ns_per_pair"));
        let out = run(&program, &args(100_000), &bench.shim_env(&evict));
        shimmed.push(value(&out, "ns_per_pair"));
    }
    let (bare, shimmed) = (median(bare), median(shimmed));
    println!(
        "| {bare:.0} | {shimmed:.0} | {:.0} | {:.3}x |",
        shimmed - bare,
        shimmed / bare
    );
}

/// `--reps N`: repetitions of each measurement (default 7, 3 with `--quick`).
fn reps_arg() -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--reps")?;
    let n = args.get(i + 1)?.parse().ok()?;
    (n > 0).then_some(n)
}

fn now_ns() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as f64)
        .unwrap_or(0.0)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let bench = Bench {
        shim: shim().to_path_buf(),
        dumps: tempfile::tempdir().expect("temp dir"),
        reps: reps_arg().unwrap_or(if quick { 3 } else { 7 }),
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split(':')
                    .nth(1)
                    .map(str::trim)
                    .map(String::from)
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "cudaleak CPU benchmarks — {cpu}, {cores} cores; medians of {} runs",
        bench.reps
    );
    println!();

    if std::env::args().any(|a| a == "--instructions") {
        instructions(&bench);
        return;
    }
    if std::env::args().any(|a| a == "--cold") {
        cold(&bench);
        return;
    }
    if std::env::args().any(|a| a == "--exit") {
        exit_cost(&bench, if quick { 10 } else { 40 });
        scale(&bench, if quick { 100_000 } else { 1_000_000 });
        return;
    }

    println!("## Overhead per cuMemAlloc_v2 + cuMemFree_v2 pair, 22-frame stack, 1 thread");
    println!("| unwinding | bare ns/pair | shim ns/pair | overhead ns/pair |");
    println!("|---|---:|---:|---:|");
    for (label, unwind, pairs) in [
        ("fast (default)", "fast", 200_000u64),
        ("precise", "precise", 20_000),
    ] {
        let (bare, shimmed) = bench.pairs(1, pairs, &[("CUDALEAK_UNWIND", unwind)]);
        println!(
            "| {label} | {bare:.1} | {shimmed:.1} | {:.1} |",
            shimmed - bare
        );
    }
    // What `cudaleak run --exact-pools` makes of PyTorch: every tensor a stream-ordered driver
    // allocation (backend:cudaMallocAsync), each asking the driver whether the stream captures.
    let (bare, shimmed) = bench.pairs_of(1, 200_000, &[], true);
    println!(
        "| fast, cuMemAllocAsync + cuMemFreeAsync (the --exact-pools route) | {bare:.1} | {shimmed:.1} | {:.1} |",
        shimmed - bare
    );
    println!();

    println!("## Throughput under the shim, 1 vs 8 threads (fast unwinding)");
    println!("| threads | shim ns/pair (wall / all pairs) | pairs/s | CPU ns/pair (all threads) |");
    println!("|---:|---:|---:|---:|");
    let mut per_s = Vec::new();
    let mut cpu = Vec::new();
    for (threads, (wall, cpu_ns)) in [1u32, 8]
        .into_iter()
        .zip(bench.shim_threads(&[1, 8], 100_000))
    {
        per_s.push(1e9 / wall);
        cpu.push(cpu_ns);
        println!(
            "| {threads} | {wall:.1} | {:.0} | {cpu_ns:.1} |",
            1e9 / wall
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!(
        "8-thread / 1-thread throughput: {:.2}x wall; {:.2}x with all {cores} cores free \
         (CPU time per pair of one thread over 8 threads', times the cores, at most 8)",
        per_s[1] / per_s[0],
        (cores.min(8.0) * cpu[0] / cpu[1])
    );
    println!();

    python_frames(&bench, quick);

    scale(&bench, if quick { 100_000 } else { 1_000_000 });
}

/// A small leaking process (10 blocks from 10 call sites, 20-frame stacks) run bare and under
/// the shim, alternating: the whole process's wall time and the time from main's return to the
/// process's end (where the shim writes its dump). Medians of `runs`.
fn exit_cost(bench: &Bench, runs: usize) {
    let program = scenario_program("bench_scale");
    let args = vec!["10".to_string()];
    let timed = |env: &[(&str, &str)]| {
        let start = now_ns();
        let out = run(&program, &args, env);
        let end = now_ns();
        (
            (end - start) / 1e6,
            (end - value(&out, "main_end_ns")) / 1e6,
        )
    };
    let (mut bare_wall, mut bare_exit, mut shim_wall, mut shim_exit) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let (w, e) = timed(&[]);
        bare_wall.push(w);
        bare_exit.push(e);
        let (w, e) = timed(&bench.shim_env(&[]));
        shim_wall.push(w);
        shim_exit.push(e);
    }
    let (bw, be, sw, se) = (
        median(bare_wall),
        median(bare_exit),
        median(shim_wall),
        median(shim_exit),
    );
    println!("## Exit cost of a small leaking process (10 live blocks), medians of {runs}");
    println!("| run | process wall ms | main's return to process end ms |");
    println!("|---|---:|---:|");
    println!("| bare | {bw:.2} | {be:.2} |");
    println!("| under the shim | {sw:.2} | {se:.2} |");
    println!("| added by the shim | {:.2} | {:.2} |", sw - bw, se - be);
    println!();
}

/// 1 000 000 live blocks from 1 000 call sites (allocated in turn) left at exit: the exit dump's
/// time, the memory per live record, the dump's size, and `cudaleak report` on it. Medians of
/// three runs (one with `--quick`).
fn scale(bench: &Bench, blocks: u64) {
    println!("## Scale: {blocks} live blocks at exit (1000 call sites)");
    let program = scenario_program("bench_scale");
    let args = vec![blocks.to_string()];
    let runs = if bench.reps > 3 { 3 } else { 1 };
    let (mut alloc_bare, mut alloc_shim, mut exit_added, mut per_record) =
        (vec![], vec![], vec![], vec![]);
    let mut dump = None;
    for _ in 0..runs {
        let bare = run(&program, &args, &[]);
        let bare_exit = now_ns() - value(&bare, "main_end_ns");
        alloc_bare.push(value(&bare, "alloc_ns") / 1e9);
        let bare_gain = value(&bare, "rss_gain_kib");
        let scale_dir = tempfile::tempdir().expect("temp dir");
        let dump_dir = format!("{}/", scale_dir.path().display());
        let env = vec![
            ("LD_PRELOAD", bench.shim.to_str().expect("UTF-8 shim path")),
            ("CUDALEAK_OUTPUT", dump_dir.as_str()),
            ("CUDALEAK_QUIET", "1"),
        ];
        let shimmed = run(&program, &args, &env);
        exit_added.push((now_ns() - value(&shimmed, "main_end_ns") - bare_exit) / 1e9);
        alloc_shim.push(value(&shimmed, "alloc_ns") / 1e9);
        let gain = value(&shimmed, "rss_gain_kib");
        per_record.push((gain - bare_gain) * 1024.0 / blocks as f64);
        let path = std::fs::read_dir(scale_dir.path())
            .expect("dump dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .expect("the scale run wrote a dump");
        dump = Some((scale_dir, path));
    }
    let (_dir, dump) = dump.expect("at least one run");
    let size_mb = std::fs::metadata(&dump).map_or(0.0, |m| m.len() as f64 / 1e6);
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| exit dump (process end minus main's return, less a bare run's) | {:.2} s |",
        median(exit_added)
    );
    println!(
        "| allocating them: bare / under the shim | {:.2} s / {:.2} s |",
        median(alloc_bare),
        median(alloc_shim)
    );
    println!(
        "| resident memory per live record (shim run minus bare run) | {:.0} bytes |",
        median(per_record)
    );
    println!("| dump size | {size_mb:.1} MB |");
    let (report_s, report_rss) = report(&dump);
    println!("| `cudaleak report` on it | {report_s:.2} s |");
    println!(
        "| `cudaleak report` peak resident memory | {:.0} MiB |",
        report_rss as f64 / 1024.0
    );
}

/// Python frames: the same ctypes loop bare, under the shim without Python frames
/// (`CUDALEAK_PY_DEPTH=0`) and with them, 20 Python frames deep; the last two differ only in the
/// Python capture (thread state, frame walk, interning with the native stack).
fn python_frames(bench: &Bench, quick: bool) {
    let py = &pythons()[0];
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/python_pairs.py");
    let pairs: u64 = if quick { 50_000 } else { 200_000 };
    let args = vec![script.to_string(), pairs.to_string(), "20".to_string()];
    let (mut bare, mut native, mut python) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..bench.reps {
        bare.push(value(&run(&py.path, &args, &[]), "ns_per_pair"));
        let env = bench.shim_env(&[("CUDALEAK_PY_DEPTH", "0")]);
        native.push(value(&run(&py.path, &args, &env), "ns_per_pair"));
        let env = bench.shim_env(&[]);
        python.push(value(&run(&py.path, &args, &env), "ns_per_pair"));
    }
    let (bare, native, python) = (median(bare), median(native), median(python));
    println!(
        "## Python frames: ctypes cuMemAlloc_v2 + cuMemFree_v2 from 20 Python frames (CPython {}.{})",
        py.version.0, py.version.1
    );
    println!("| run | ns/pair | added by the shim |");
    println!("|---|---:|---:|");
    println!("| bare | {bare:.1} | |");
    println!(
        "| shim, no Python frames (`CUDALEAK_PY_DEPTH=0`) | {native:.1} | {:.1} |",
        native - bare
    );
    println!(
        "| shim, Python frames (default) | {python:.1} | {:.1} |",
        python - bare
    );
    println!(
        "Python frames cost {:.1} ns per allocation (one allocation per pair).",
        python - native
    );
    println!();
}

/// Wall time and peak RSS (KiB) of `cudaleak report --format json` on `dump`, through GNU time.
fn report(dump: &Path) -> (f64, i64) {
    let cli = bench_cli();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%e %M"])
        .arg(&cli)
        .args(["report", "--format", "json", "--exit-code", "0"])
        .arg(dump)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("/usr/bin/time {}: {e}", cli.display()));
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text.lines().last().unwrap_or_default();
    let mut it = last.split_whitespace();
    let secs = it.next().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
    let kib = it.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
    assert!(out.status.success(), "cudaleak report failed: {text}");
    (secs, kib)
}

/// target/release/cudaleak, next to the shim the harness built.
fn bench_cli() -> PathBuf {
    let dir = shim().parent().expect("shim has a directory");
    let cli = dir.join("cudaleak");
    assert!(
        cli.is_file(),
        "{} is missing: run `cargo build --release -p cudaleak-cli` (make bench does)",
        cli.display()
    );
    cli
}
