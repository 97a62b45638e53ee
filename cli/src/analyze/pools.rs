//! Notes on the exit dump that are no verdict: pools whose blocks were taken all through the
//! run (still growing), and what a Python script held when its interpreter began to shut down.
//! Information for the report only: nothing here changes what leaked or what the gate decides.

use crate::load::schema as format;

use crate::caches::CacheRule;

use super::group::Stacks;
use super::{
    held_at_finalizing_in, CallsiteLive, Config, Counts, PoolGrowth, ScriptEnd,
    SCRIPT_END_NUMEROUS, SCRIPT_END_TOP,
};

/// The least a pool must show to count as still growing: blocks, tenths of the run that took
/// some, the share of its bytes taken in the second half, and a run long enough for the coarse
/// clock (a few ms) and a program's warm-up to be told apart from growth.
const GROWING_MIN_BLOCKS: u64 = 8;
const GROWING_MIN_TENTHS: u32 = 4;
const GROWING_MIN_SECOND_HALF: f64 = 0.25;
const GROWING_MIN_SPAN_MS: u64 = 2_000;

/// The run is measured from its oldest live block (for a framework, its model or first
/// segment) to the dump. A correct training loop fills its pool in its first steps (one or two
/// tenths: the H200 runs of PyTorch, BERT and torchrun); a loop that keeps a tensor every step
/// keeps adding segments (`torch_keep`: 6 tenths, 71 % in the second half).
pub(super) fn pools_still_growing(
    dump: &format::Dump,
    stacks: &mut Stacks<'_>,
    caches: &[CacheRule],
    per_rule: &[Counts],
) -> Vec<PoolGrowth> {
    // Most dumps hold no pool with enough blocks: no second pass over their records.
    let eligible = caches
        .iter()
        .zip(per_rule)
        .any(|(c, n)| c.grows.is_some() && n.allocations >= GROWING_MIN_BLOCKS);
    if !eligible {
        return Vec::new();
    }
    let end = dump
        .process
        .end_unix_ms
        .saturating_sub(dump.process.start_unix_ms);
    let Some(start) = dump.live.iter().map(|r| r.time_ms).min() else {
        return Vec::new();
    };
    let span = end.saturating_sub(start);
    if span < GROWING_MIN_SPAN_MS {
        return Vec::new();
    }
    #[derive(Default, Clone, Copy)]
    struct Acc {
        blocks: u64,
        held: u64,
        second_half: u64,
        tenths: u16,
    }
    let mut per_rule = vec![Acc::default(); caches.len()];
    for r in &dump.live {
        let Some(rule) = stacks.get(r.stack, &r.api).held_by else {
            continue;
        };
        if caches.get(rule).is_none_or(|c| c.grows.is_none()) {
            continue;
        }
        let at = r.time_ms.saturating_sub(start).min(span);
        let a = &mut per_rule[rule];
        a.blocks += 1;
        a.held = a.held.saturating_add(r.held());
        if at * 2 > span {
            a.second_half = a.second_half.saturating_add(r.held());
        }
        a.tenths |= 1 << (at * 10 / span).min(9);
    }
    per_rule
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.blocks >= GROWING_MIN_BLOCKS
                && a.tenths.count_ones() >= GROWING_MIN_TENTHS
                && a.second_half as f64 >= a.held as f64 * GROWING_MIN_SECOND_HALF
        })
        .map(|(rule, a)| PoolGrowth {
            rule,
            held: a.held,
            second_half: a.second_half,
            tenths: a.tenths.count_ones(),
        })
        .collect()
}

/// What the script held when Python began to shut down (`finalizing.held`).
pub(super) fn script_end(
    dump: &format::Dump,
    stacks: &mut Stacks<'_>,
    cfg: &Config,
) -> Option<ScriptEnd> {
    let f = dump.finalizing.as_ref()?;
    let held = held_at_finalizing_in(dump, stacks, &cfg.rules)?;
    let total = held.iter().fold(Counts::default(), |mut a, c| {
        a.add(c.live);
        a
    });
    // The largest, and the most numerous (a list that keeps a small tensor every step holds
    // few bytes in many blocks).
    let mut order: Vec<usize> = (0..held.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((held[i].live.allocations, held[i].live.bytes)));
    let numerous: Vec<usize> = order.iter().copied().take(SCRIPT_END_NUMEROUS).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((held[i].live.bytes, held[i].live.allocations)));
    let mut pick: Vec<usize> = order.iter().copied().take(SCRIPT_END_TOP).collect();
    for i in numerous {
        if !pick.contains(&i) {
            pick.push(i);
        }
    }
    pick.sort_by_key(|&i| std::cmp::Reverse((held[i].live.bytes, held[i].live.allocations)));
    let mut slots: Vec<Option<CallsiteLive>> = held.into_iter().map(Some).collect();
    Some(ScriptEnd {
        after_ms: f.unix_ms.saturating_sub(dump.process.start_unix_ms),
        held: total,
        top: pick.iter().filter_map(|&i| slots[i].take()).collect(),
    })
}
