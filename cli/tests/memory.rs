//! A generous bound on the CLI's peak memory, checked in its own test binary (its own process,
//! so the children's peak resident memory that `getrusage` reports is only these runs').
//!
//! The real numbers come from `scripts/bench-report.py` (docs/performance.md); this only guards
//! against a return of whole-document trees: SARIF once took 35× the dump, now about 1.3×.

use std::path::Path;
use std::process::{Command, Stdio};

use cudaleak_format as format;
use format::{Dump, End, Frame, Hex, Kind, LiveRecord, Process, Stack, Summary};

/// A dump of `n` live blocks from `n` distinct stacks of 12 frames with C++-length names drawn
/// from a pool of 500 functions.
fn dump(n: usize) -> Dump {
    let name = |j: usize| {
        format!(
            "acme::sim::Solver<float, 3>::step_{j}(acme::sim::State&, unsigned long, CUstream_st*)"
        )
    };
    let frame = |j: usize, line: u32| Frame {
        kind: None,
        ip: Hex(0x55d4_c2a0_0000 + j as u64 * 0x40),
        module: Some(format!("/home/ci/build/lib/libsolver_{}.so.2", j % 7)),
        offset: Some(Hex(j as u64 * 0x40)),
        function: Some(name(j)),
        file: Some(format!("/home/ci/build/src/solver/step_{}.cu", j % 61)),
        line: Some(line),
    };
    let stacks = (0..n)
        .map(|i| Stack {
            // Frames 0 and 1 spell i in base 500: no two stacks are equal.
            frames: (0..12usize)
                .map(|k| {
                    let j = if k == 0 { i } else { i / 500 + 37 * k };
                    frame(j % 500, 10 + k as u32)
                })
                .collect(),
            python: Vec::new(),
        })
        .collect();
    let live: Vec<LiveRecord> = (0..n)
        .map(|i| LiveRecord {
            address: Hex(0x7f00_0000_0000 + (i as u64) * 0x10_0000),
            size: 4096,
            bytes_held: None,
            api: "cudaMalloc".into(),
            kind: Kind::Device,
            device: Some(0),
            thread: 1,
            seq: i as u64,
            time_ms: 0,
            stack: i,
        })
        .collect();
    Dump {
        cudaleak_dump: 2,
        unnamed: false,
        modules: Vec::new(),
        process: Process {
            pid: 7001,
            ppid: 1,
            exe: "/home/ci/build/bin/solver".into(),
            argv: vec!["solver".into()],
            rank: None,
            start_unix_ms: 0,
            end_unix_ms: 1000,
            end: End::Exit,
            signal: None,
            snapshot: None,
            forked_from: None,
            recording_stopped: None,
        },
        summary: Summary {
            allocations: n as u64,
            live_allocations: n as u64,
            live_bytes: 4096 * n as u64,
            peak_live_bytes: 4096 * n as u64,
            bytes_allocated: 4096 * n as u64,
            ..Summary::default()
        },
        stacks,
        live,
        events: Vec::new(),
        floors: None,
        finalizing: None,
        handles: Vec::new(),
        frameworks: None,
        shim: None,
    }
}

/// The largest peak resident memory of any child this process has waited for, in bytes.
fn children_max_rss() -> u64 {
    // SAFETY: getrusage only writes the struct it is given, which is zeroed and ours.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a valid pointer to a rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    assert_eq!(rc, 0);
    ru.ru_maxrss as u64 * 1024 // kilobytes on Linux
}

fn run(args: &[&str], path: &Path) -> i32 {
    Command::new(env!("CARGO_BIN_EXE_cudaleak"))
        .args(args)
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .code()
        .unwrap_or(-1)
}

#[test]
fn no_report_format_holds_more_than_a_few_times_the_dump() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cudaleak.7001.json");
    let mut bytes = Vec::new();
    format::write(&dump(5000), &mut bytes).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let size = bytes.len() as u64;
    drop(bytes);
    assert!(size > 8 << 20, "the dump is only {size} bytes");
    for f in ["text", "json", "markdown", "sarif", "folded"] {
        assert_eq!(run(&["report", "--format", f], &path), 23, "{f}");
    }
    // The HTML page caps what it embeds: 5000 leak groups of 20 frames stay a small page.
    let page = dir.path().join("report.html");
    let html_args = ["report", "--format", "html", "-o", page.to_str().unwrap()];
    assert_eq!(run(&html_args, &path), 23, "html");
    let page_size = std::fs::metadata(&page).unwrap().len();
    assert!(
        page_size < 512 << 10,
        "the HTML page of a {} MiB dump is {page_size} bytes",
        size >> 20
    );
    // The dump twice: a series of two equal dumps (nothing grew) and a diff of it with itself.
    assert_eq!(
        run(&["report", "--growth", &path.display().to_string()], &path),
        0
    );
    assert_eq!(
        run(
            &["diff", "--format", "sarif", &path.display().to_string()],
            &path
        ),
        0
    );
    // Generous: 3x the dump plus room for the binary itself. The SARIF report used to take 35x.
    let bound = 3 * size + (24 << 20);
    let peak = children_max_rss();
    assert!(
        peak < bound,
        "peak RSS {} MiB for a {} MiB dump (bound {} MiB)",
        peak >> 20,
        size >> 20,
        bound >> 20
    );
}
