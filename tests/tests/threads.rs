//! Exact totals with 8 threads allocating and freeing at once.

use std::collections::BTreeMap;

use cudaleak_format::Kind;
use cudaleak_tests::{assert_site, assert_stacks_interned, summary, Scenario};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 10_000;

fn size_of_block(i: u64) -> u64 {
    64 * (1 + i % 16)
}

#[test]
fn eight_threads_times_ten_thousand_allocations_add_up_exactly() {
    let run = Scenario::new("threads").run_shim();
    run.assert_exit(0).assert_stdout("threads done\n");
    let dump = run.dump();

    let all: u64 = THREADS * (0..PER_THREAD).map(size_of_block).sum::<u64>();
    let kept: u64 = THREADS
        * (0..PER_THREAD)
            .filter(|i| i % 100 == 0)
            .map(size_of_block)
            .sum::<u64>();
    let live = THREADS * PER_THREAD / 100;
    // A barrier puts every allocation before every free: the peak is everything.
    assert_eq!(
        dump.summary,
        summary(
            THREADS * PER_THREAD,
            THREADS * PER_THREAD - live,
            0,
            0,
            0,
            live,
            kept,
            all,
            all
        )
    );
    assert!(dump.events.is_empty(), "{:#?}", dump.events);

    let mut per_thread: BTreeMap<u64, u64> = BTreeMap::new();
    for r in &dump.live {
        assert_eq!(r.api, "cudaMalloc", "{r:?}");
        assert_eq!(r.kind, Kind::Device, "{r:?}");
        assert_eq!(r.device, Some(0), "{r:?}");
        *per_thread.entry(r.thread).or_default() += 1;
    }
    assert_eq!(
        per_thread.values().copied().collect::<Vec<_>>(),
        vec![PER_THREAD / 100; THREADS as usize],
        "100 live blocks on each of 8 distinct threads: {per_thread:?}"
    );
    assert!(
        !per_thread.contains_key(&u64::from(run.pid)),
        "the main thread allocated nothing"
    );

    let mut seqs: Vec<u64> = dump.live.iter().map(|r| r.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len() as u64, live, "sequence numbers are unique");

    // One call site on eight threads: one stack, stored once.
    assert_stacks_interned(&dump);
    let mut stacks: Vec<usize> = dump.live.iter().map(|r| r.stack).collect();
    stacks.sort_unstable();
    stacks.dedup();
    assert_eq!(stacks.len(), 1, "one stack for one call site: {stacks:?}");
    for s in stacks {
        assert_site(&dump, s, "threads", "worker", "thread_alloc");
    }
}
