//! 16 threads allocating and freeing through the driver for 10 s while the shim writes a
//! snapshot every 0.2 s: the exit dump's totals are exactly the program's own counts, the
//! program finishes (no deadlock), and every snapshot is a complete, consistent dump numbered
//! 1..N without gaps.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cudaleak_format::{End, Kind};
use cudaleak_tests::{assert_site, read_dump, wait_for_exit, Scenario};

const THREADS: u64 = 16;
const KEPT: u64 = 5;
const DEADLINE: Duration = Duration::from_secs(60);

/// The program's own totals, from its one line of output.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    allocations: u64,
    frees: u64,
    live: u64,
    live_bytes: u64,
    bytes_allocated: u64,
}

fn parse_totals(stdout: &str) -> Totals {
    let words: Vec<&str> = stdout.split_whitespace().collect();
    let field = |name: &str| -> u64 {
        let i = words
            .iter()
            .position(|w| *w == name)
            .unwrap_or_else(|| panic!("no {name:?} in the program's output {stdout:?}"));
        words[i + 1]
            .parse()
            .unwrap_or_else(|e| panic!("{name} in {stdout:?}: {e}"))
    };
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout:?}");
    Totals {
        allocations: field("allocations"),
        frees: field("frees"),
        live: field("live"),
        live_bytes: field("live_bytes"),
        bytes_allocated: field("bytes_allocated"),
    }
}

#[test]
fn sixteen_threads_for_ten_seconds_with_snapshots_add_up_exactly() {
    let mut sp = Scenario::new("threads_churn")
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.2")
        .spawn_shim();
    let mut child = sp.child.take().expect("a child");
    drop(child.stdin.take());
    let status = wait_for_exit(&mut child, DEADLINE, "threads_churn (a deadlock?)");
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let totals = parse_totals(&stdout);
    assert_eq!(totals.live, THREADS * KEPT, "{totals:?}");
    assert_eq!(
        totals.allocations - totals.frees,
        totals.live,
        "the program's own books: {totals:?}"
    );

    // Every file is the exit dump or a snapshot; nothing else (no temporary left behind).
    let pid = sp.pid;
    let final_name = format!("cudaleak.{pid}.json");
    let snapshot_prefix = format!("cudaleak.{pid}.snapshot-");
    let mut snapshots: BTreeMap<u64, std::path::PathBuf> = BTreeMap::new();
    let mut saw_final = false;
    for entry in std::fs::read_dir(sp.dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == final_name {
            saw_final = true;
        } else if let Some(n) = name
            .strip_prefix(&snapshot_prefix)
            .and_then(|r| r.strip_suffix(".json"))
        {
            let n: u64 = n
                .parse()
                .unwrap_or_else(|e| panic!("snapshot number in {name:?}: {e}"));
            assert!(snapshots.insert(n, entry.path()).is_none(), "{name} twice");
        } else {
            panic!("unexpected file {name:?} in the dump directory\nstderr:\n{stderr}");
        }
    }
    assert!(saw_final, "no exit dump {final_name}\nstderr:\n{stderr}");

    // The exit dump: the program's totals exactly.
    let dump = read_dump(&sp.dir.path().join(&final_name));
    assert_eq!(dump.process.pid, pid);
    assert_eq!(dump.process.end, End::Exit);
    let s = &dump.summary;
    assert_eq!(s.allocations, totals.allocations, "allocations: {s:?}");
    assert_eq!(s.frees, totals.frees, "frees: {s:?}");
    assert_eq!(s.live_allocations, totals.live, "live_allocations: {s:?}");
    assert_eq!(s.live_bytes, totals.live_bytes, "live_bytes: {s:?}");
    assert_eq!(
        s.bytes_allocated, totals.bytes_allocated,
        "bytes_allocated: {s:?}"
    );
    assert_eq!(s.untracked_frees, 0, "{s:?}");
    assert_eq!(s.failed_allocations, 0, "{s:?}");
    assert_eq!(s.invalid_frees, 0, "{s:?}");
    assert_eq!(s.dropped_events, 0, "{s:?}");
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert!(s.peak_live_bytes >= s.live_bytes, "{s:?}");

    // The live blocks: each thread's five, by size, on 16 distinct threads.
    let mut sizes: Vec<u64> = dump.live.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    let mut want: Vec<u64> = (0..THREADS)
        .flat_map(|id| (0..KEPT).map(move |k| 1000 + 10 * id + k))
        .collect();
    want.sort_unstable();
    assert_eq!(sizes, want, "sizes of the live blocks");
    let mut per_thread: BTreeMap<u64, u64> = BTreeMap::new();
    for r in &dump.live {
        assert_eq!(r.api, "cuMemAlloc_v2", "{r:?}");
        assert_eq!(r.kind, Kind::Device, "{r:?}");
        *per_thread.entry(r.thread).or_default() += 1;
        assert_site(&dump, r.stack, "threads_churn", "alloc_one", "churn_alloc");
    }
    assert_eq!(
        per_thread.values().copied().collect::<Vec<_>>(),
        vec![KEPT; THREADS as usize],
        "five live blocks on each of 16 distinct threads: {per_thread:?}"
    );

    // The snapshots: at least 20, numbered 1..N, each a valid snapshot dump, mode 0600,
    // counters never going backwards.
    let numbers: Vec<u64> = snapshots.keys().copied().collect();
    assert!(
        numbers.len() >= 20,
        "at least 20 snapshots in 10 s at 0.2 s, found {}: {numbers:?}\nstderr:\n{stderr}",
        numbers.len()
    );
    assert_eq!(
        numbers,
        (1..=numbers.len() as u64).collect::<Vec<_>>(),
        "snapshots numbered 1..N without gaps"
    );
    let mut previous: Option<cudaleak_format::Summary> = None;
    for (n, path) in &snapshots {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "mode of {}", path.display());
        let snap = read_dump(path);
        assert_eq!(snap.process.pid, pid, "{}", path.display());
        assert_eq!(snap.process.end, End::Snapshot, "{}", path.display());
        assert_eq!(snap.process.snapshot, Some(*n), "{}", path.display());
        let cur = snap.summary.clone();
        if let Some(prev) = &previous {
            assert!(
                cur.allocations >= prev.allocations,
                "snapshot {n}: allocations went from {} to {}",
                prev.allocations,
                cur.allocations
            );
            assert!(
                cur.frees >= prev.frees,
                "snapshot {n}: frees went from {} to {}",
                prev.frees,
                cur.frees
            );
            assert!(
                cur.bytes_allocated >= prev.bytes_allocated,
                "snapshot {n}: bytes_allocated went from {} to {}",
                prev.bytes_allocated,
                cur.bytes_allocated
            );
        }
        previous = Some(cur);
    }
    let last = previous.expect("at least one snapshot");
    assert!(
        last.allocations <= s.allocations,
        "the last snapshot saw {} allocations, the exit dump {}",
        last.allocations,
        s.allocations
    );
}
