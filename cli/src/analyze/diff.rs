//! `diff` and the per-callsite counts of one dump that `diff` and `report --growth` compare:
//! live blocks (and their floors, and what was held when Python began to shut down) summed per
//! callsite, never per address or stack index.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};

use crate::load::schema as format;
use format::Name;

use super::*;
use crate::caches::CacheRule;
use crate::callsite::{shown_api, Callsite};
use crate::suppressions::Rule;
use hashbrown::HashTable;

// ---------------------------------------------------------------------------------------------
// diff

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    pub callsite: Callsite,
    pub api: Name,
    pub stack: StackView,
    pub old: Counts,
    pub new: Counts,
}

impl DiffRow {
    pub fn delta_bytes(&self) -> i128 {
        i128::from(self.new.bytes) - i128::from(self.old.bytes)
    }
    pub fn delta_blocks(&self) -> i128 {
        i128::from(self.new.allocations) - i128::from(self.old.allocations)
    }
    /// 1 grew, 0 unchanged, -1 shrank (by bytes, then by blocks).
    pub fn trend(&self) -> i8 {
        match self.delta_bytes().signum() {
            0 => self.delta_blocks().signum() as i8,
            s => s as i8,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffSide {
    pub source: PathBuf,
    pub process: format::Process,
    pub live: Counts,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiffFindings {
    pub old: DiffSide,
    pub new: DiffSide,
    /// Growing first (largest growth first), then unchanged, then shrinking; cut to `--top`.
    pub rows: Vec<DiffRow>,
    pub grew: u64,
    pub shrank: u64,
    pub unchanged: u64,
    pub rows_not_shown: u64,
}

fn side_counts(dump: &format::Dump) -> Counts {
    Counts {
        groups: 0,
        allocations: dump.live.len() as u64,
        bytes: dump.summary.live_bytes,
    }
}

/// One callsite's live blocks in one dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallsiteLive {
    /// Equal for the same code in any dump of any run.
    pub key: Callsite,
    pub api: Name,
    pub stack: StackView,
    pub live: Counts,
    /// The least it held since the previous snapshot (the dump's `floors`; `live` where the dump
    /// has none): what it kept through the interval, not a block in flight at the dump's instant.
    pub floor: Counts,
    /// The cache rule (index into the `caches` passed) that holds what this callsite allocated.
    pub held_by: Option<usize>,
}

/// Live blocks of one dump summed per callsite (API plus visible frames, never addresses or
/// stack indices), in order of first appearance: what `diff` and `report --growth` compare.
/// Blocks whose stack matches a suppression rule are counted per rule instead. A block of a live
/// library handle the program's own code made counts at the handle's create call, so a site
/// that makes a handle per request grows there ([`super::handles::owned_by_program`]).
pub fn live_by_callsite(
    dump: &format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
) -> (Vec<CallsiteLive>, Vec<Counts>) {
    live_in(dump, &mut Stacks::new(dump, view, caches), rules)
}

/// [`live_by_callsite`] and [`held_at_finalizing`] of a dump the caller has no further use
/// for: its stack table is taken from it (`dump.stacks` is left empty), and each stack's
/// frames are dropped once the view made of them holds them all, so a frame is held once.
pub fn live_and_finalizing_taking_stacks(
    dump: &mut format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
) -> (Vec<CallsiteLive>, Vec<Counts>, Option<Vec<CallsiteLive>>) {
    let table = std::mem::take(&mut dump.stacks);
    let mut stacks = Stacks::owning(table, view, caches);
    let (live, suppressed) = live_in(dump, &mut stacks, rules);
    let finalizing = held_at_finalizing_in(dump, &mut stacks, rules);
    (live, suppressed, finalizing)
}

/// [`live_by_callsite`] through `stacks` (the dump's, prepared).
fn live_in(
    dump: &format::Dump,
    stacks: &mut Stacks<'_>,
    rules: &[Rule],
) -> (Vec<CallsiteLive>, Vec<Counts>) {
    let owners = super::handles::owned_by_program(dump, stacks);
    let records = dump.live.iter().map(|r| match owners.get(&r.seq) {
        Some(&(stack, create)) => (stack, create, 1, r.held()),
        None => (r.stack, r.api.as_str(), 1, r.held()),
    });
    by_callsite(
        stacks,
        records,
        dump.floors.as_deref().unwrap_or(&[]),
        rules,
    )
}

/// What each callsite held when the Python interpreter began to shut down (`finalizing.held`),
/// with its floor since the previous snapshot; `None` when the dump does not say.
pub fn held_at_finalizing(
    dump: &format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
) -> Option<Vec<CallsiteLive>> {
    held_at_finalizing_in(dump, &mut Stacks::new(dump, view, caches), rules)
}

/// [`held_at_finalizing`] of the stacks an analysis prepares (which may hold them only as
/// their views).
pub(super) fn held_at_finalizing_in(
    dump: &format::Dump,
    stacks: &mut Stacks<'_>,
    rules: &[Rule],
) -> Option<Vec<CallsiteLive>> {
    let f = dump.finalizing.as_ref()?;
    let held = f
        .held
        .iter()
        .map(|h| (h.stack, h.api.as_str(), h.allocations, h.bytes));
    Some(by_callsite(stacks, held, &f.floors, rules).0)
}

/// Sums (stack, API, blocks, bytes) per callsite, with each stack's floor (where `floors` names
/// none, its floor is what it holds) taken off the callsite its stack went to first.
fn by_callsite<'d>(
    stacks: &mut Stacks<'_>,
    held: impl Iterator<Item = (usize, &'d str, u64, u64)>,
    floors: &[format::StackCounts],
    rules: &[Rule],
) -> (Vec<CallsiteLive>, Vec<Counts>) {
    // Room for a callsite per record (up to one per stack) at once: a doubling copies the
    // list beside itself; what is not used is given back at the end.
    let mut out: Vec<CallsiteLive> = Vec::with_capacity(held.size_hint().0.min(stacks.len()));
    let mut suppressed = vec![Counts::default(); rules.len()];
    // Callsites are found by their key through a table of their indices, hashed from the
    // callsite itself: no second copy of any key.
    let hasher = RandomState::new();
    let mut index: HashTable<u32> = HashTable::new();
    // Whether a stack index is suppressed, and by which rule: computed once per stack.
    let mut rule_of: HashMap<usize, Option<usize>> = HashMap::new();
    // Per stack index, the API of its last record and the callsite it went to: records of one
    // stack index and API share a callsite, found without building its key.
    let mut last: Vec<Option<(&str, u32)>> = vec![None; stacks.len()];
    // Per stack index: the callsite it went to first, and what it holds in all.
    let mut by_stack: Vec<Option<(u32, u64, u64)>> = vec![None; stacks.len()];
    for (stack, api, blocks, bytes) in held {
        if !rules.is_empty() {
            let rule = *rule_of
                .entry(stack)
                .or_insert_with(|| suppressing_rule(rules, &stacks.frames(stack)));
            if let Some(i) = rule {
                suppressed[i].add(Counts {
                    groups: 0,
                    allocations: blocks,
                    bytes,
                });
                continue;
            }
        }
        let hit = last
            .get(stack)
            .copied()
            .flatten()
            .filter(|&(a, _)| a == api);
        let slot = match hit {
            Some((_, slot)) => slot as usize,
            None => {
                let p = stacks.get(stack, api);
                let key = p.callsite(api);
                let hash = hasher.hash_one(&key);
                let slot = match index.find(hash, |&i| out[i as usize].key == key) {
                    Some(&i) => i as usize,
                    None => {
                        out.push(CallsiteLive {
                            key,
                            api: shown_api(api),
                            stack: p.view.clone(),
                            live: Counts {
                                groups: 1,
                                ..Counts::default()
                            },
                            floor: Counts::default(),
                            held_by: p.held_by,
                        });
                        let i = out.len() - 1;
                        index.insert_unique(hash, i as u32, |&j| {
                            hasher.hash_one(&out[j as usize].key)
                        });
                        i
                    }
                };
                if let Some(l) = last.get_mut(stack) {
                    *l = Some((api, slot as u32));
                }
                slot
            }
        };
        let c = &mut out[slot].live;
        c.allocations += blocks;
        c.bytes = c.bytes.saturating_add(bytes);
        if let Some(s) = by_stack.get_mut(stack) {
            let s = s.get_or_insert((slot as u32, 0, 0));
            s.1 += blocks;
            s.2 = s.2.saturating_add(bytes);
        }
    }
    out.shrink_to_fit();
    for c in &mut out {
        c.floor = Counts {
            groups: 0,
            ..c.live
        };
    }
    for f in floors {
        // A floor of a stack with nothing left (all freed since) or one suppressed: no row.
        let Some(&Some((slot, blocks, bytes))) = by_stack.get(f.stack) else {
            continue;
        };
        let slot = slot as usize;
        let c = &mut out[slot].floor;
        c.allocations = c
            .allocations
            .saturating_sub(blocks.saturating_sub(f.allocations));
        c.bytes = c.bytes.saturating_sub(bytes.saturating_sub(f.bytes));
    }
    (out, suppressed)
}

/// Per-callsite live bytes in two dumps. Callsites are matched by API and visible frames, so
/// dumps of two runs (different addresses, different stack indices) compare too.
pub fn diff(
    old: &format::Dump,
    old_source: &Path,
    new: &format::Dump,
    new_source: &Path,
    view: &View,
) -> DiffFindings {
    diff_of(
        diff_input(old.clone(), old_source, view),
        diff_input(new.clone(), new_source, view),
        view,
    )
}

/// What `diff` needs of one dump: taken before the next dump is read, so a diff holds one dump
/// in memory at a time.
pub struct DiffInput {
    side: DiffSide,
    callsites: Vec<CallsiteLive>,
}

/// Consumes the dump: its frames are dropped as the views of its callsites hold them.
pub fn diff_input(mut dump: format::Dump, source: &Path, view: &View) -> DiffInput {
    let side = DiffSide {
        source: source.to_path_buf(),
        process: process_view(&dump.process),
        live: side_counts(&dump),
    };
    let table = std::mem::take(&mut dump.stacks);
    let mut stacks = Stacks::owning(table, view, &[]);
    DiffInput {
        side,
        callsites: live_in(&dump, &mut stacks, &[]).0,
    }
}

/// `diff` of two dumps' inputs.
pub fn diff_of(old: DiffInput, new: DiffInput, view: &View) -> DiffFindings {
    let mut rows: Vec<DiffRow> = Vec::new();
    let mut index: HashMap<Callsite, usize> = HashMap::new();
    for (callsites, is_new) in [(old.callsites, false), (new.callsites, true)] {
        for c in callsites {
            let slot = *index.entry(c.key.clone()).or_insert_with(|| {
                rows.push(DiffRow {
                    callsite: c.key,
                    api: c.api,
                    stack: c.stack,
                    old: Counts::default(),
                    new: Counts::default(),
                });
                rows.len() - 1
            });
            let row = &mut rows[slot];
            if is_new {
                row.new = c.live;
            } else {
                row.old = c.live;
            }
        }
    }
    drop(index);
    rows.sort_by(|a, b| {
        b.trend()
            .cmp(&a.trend())
            .then(b.delta_bytes().abs().cmp(&a.delta_bytes().abs()))
            .then(b.delta_blocks().abs().cmp(&a.delta_blocks().abs()))
            .then(b.new.bytes.cmp(&a.new.bytes))
            .then_with(|| a.api.cmp(&b.api))
    });
    let count = |t: i8| rows.iter().filter(|r| r.trend() == t).count() as u64;
    let (grew, unchanged, shrank) = (count(1), count(0), count(-1));
    let total = rows.len();
    rows.truncate(view.top.unwrap_or(usize::MAX));
    DiffFindings {
        old: old.side,
        new: new.side,
        rows_not_shown: (total - rows.len()) as u64,
        rows,
        grew,
        shrank,
        unchanged,
    }
}
