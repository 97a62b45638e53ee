//! `diff` and the per-callsite counts of one dump that `diff` and `report --growth` compare:
//! live blocks (and their floors, and what was held when Python began to shut down) summed per
//! callsite, never per address or stack index.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::load::schema as format;
use format::Name;

use super::*;
use crate::caches::CacheRule;
use crate::callsite::{shown_api, ByCallsite, Callsite};
use crate::suppressions::Rule;

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

/// Where [`by_callsite`] sums a dump's blocks: a slot per callsite, found by the callsite. A
/// list of the dump's own callsites ([`CallsiteLive`]), or rows that an earlier dump began
/// (`diff`'s, a series'), filled straight from the dump so that no list of the dump's
/// callsites stands beside them.
pub trait Sums {
    /// The slot of the callsite `key`, made on first sight (`stack`: what is shown of it;
    /// `held_by`: the cache rule that holds its blocks).
    fn slot(&mut self, key: Callsite, stack: &StackView, held_by: Option<usize>) -> u32;
    /// The callsite of slot `i`.
    fn key(&self, i: u32) -> &Callsite;
    /// What slot `i` holds in this dump and its floor: zero until this dump's first record
    /// of it, which makes its `groups` 1.
    fn counts(&mut self, i: u32) -> (&mut Counts, &mut Counts);
}

/// A dump's callsites as a list of their own, in order of first appearance.
struct CallsiteList {
    list: Vec<CallsiteLive>,
    index: ByCallsite,
}

impl CallsiteList {
    /// Room for `n` callsites at once: a doubling copies the list beside itself; what is not
    /// used is given back at the end ([`CallsiteList::done`]).
    fn with_capacity(n: usize) -> Self {
        CallsiteList {
            list: Vec::with_capacity(n),
            index: ByCallsite::default(),
        }
    }

    fn done(mut self) -> Vec<CallsiteLive> {
        self.list.shrink_to_fit();
        self.list
    }
}

impl Sums for CallsiteList {
    fn slot(&mut self, key: Callsite, stack: &StackView, held_by: Option<usize>) -> u32 {
        self.index.slot(
            &mut self.list,
            key,
            |c| &c.key,
            |key| CallsiteLive {
                api: shown_api(key.api()),
                key,
                stack: stack.clone(),
                live: Counts::default(),
                floor: Counts::default(),
                held_by,
            },
        )
    }

    fn key(&self, i: u32) -> &Callsite {
        &self.list[i as usize].key
    }

    fn counts(&mut self, i: u32) -> (&mut Counts, &mut Counts) {
        let c = &mut self.list[i as usize];
        (&mut c.live, &mut c.floor)
    }
}

/// Live blocks of one dump summed per callsite (API plus visible frames, never addresses or
/// stack indices) into `sums`, and what each callsite held when the Python interpreter began
/// to shut down (`None` when the dump does not say): what `diff` and `report --growth`
/// compare. Blocks whose stack matches a suppression rule are counted per rule instead (the
/// counts returned). A block of a live library handle the program's own code made counts at the
/// handle's create call, so a site that makes a handle per request grows there
/// ([`super::handles::owned_by_program`]).
pub fn live_into(
    dump: &format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
    sums: &mut impl Sums,
) -> (Vec<Counts>, Option<Vec<CallsiteLive>>) {
    let mut stacks = Stacks::new(dump, view, caches);
    let suppressed = live_in(dump, &mut stacks, rules, sums);
    (suppressed, held_at_finalizing_in(dump, &mut stacks, rules))
}

/// [`live_into`] of a dump the caller has no further use for: its stack table is taken from
/// it (`dump.stacks` is left empty), and each stack's frames are dropped once the view made of
/// them holds them all, so a frame is held once.
pub fn live_into_taking_stacks(
    dump: &mut format::Dump,
    view: &View,
    rules: &[Rule],
    caches: &[CacheRule],
    sums: &mut impl Sums,
) -> (Vec<Counts>, Option<Vec<CallsiteLive>>) {
    let table = std::mem::take(&mut dump.stacks);
    let mut stacks = Stacks::owning(table, view, caches);
    let suppressed = live_in(dump, &mut stacks, rules, sums);
    (suppressed, held_at_finalizing_in(dump, &mut stacks, rules))
}

/// The live blocks of `dump` through `stacks` (the dump's, prepared), summed into `sums`.
fn live_in(
    dump: &format::Dump,
    stacks: &mut Stacks<'_>,
    rules: &[Rule],
    sums: &mut impl Sums,
) -> Vec<Counts> {
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
        sums,
    )
}

/// [`live_into`]'s held at finalizing, of the stacks an analysis prepares (which may hold them
/// only as their views).
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
    let mut list = CallsiteList::with_capacity(held.size_hint().0.min(stacks.len()));
    by_callsite(stacks, held, &f.floors, rules, &mut list);
    Some(list.done())
}

/// Sums (stack, API, blocks, bytes) per callsite into `sums`, with each stack's floor (where
/// `floors` names none, its floor is what it holds) taken off the callsite its stack went to
/// first; returns what each suppression rule took.
fn by_callsite<'d>(
    stacks: &mut Stacks<'_>,
    held: impl Iterator<Item = (usize, &'d str, u64, u64)>,
    floors: &[format::StackCounts],
    rules: &[Rule],
    sums: &mut impl Sums,
) -> Vec<Counts> {
    const NONE: u32 = u32::MAX;
    let mut suppressed = vec![Counts::default(); rules.len()];
    // Whether a stack index is suppressed, and by which rule: computed once per stack.
    let mut rule_of: HashMap<usize, Option<usize>> = HashMap::new();
    // Per stack index, the slot its last record went to: records of one stack index and API
    // share a slot (the slot's callsite says its API), found without building its key.
    let mut last: Vec<u32> = vec![NONE; stacks.len()];
    // Per stack index, where there are floors to take off: the slot it went to first, and
    // what it holds in all.
    let mut by_stack: Vec<Option<(u32, u64, u64)>> = if floors.is_empty() {
        Vec::new()
    } else {
        vec![None; stacks.len()]
    };
    // The slots this dump touched, in order: their floors start from what they hold.
    let mut touched: Vec<u32> = Vec::new();
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
            .filter(|&s| s != NONE && sums.key(s).api() == api);
        let slot = match hit {
            Some(slot) => slot,
            None => {
                let p = stacks.get(stack, api);
                let slot = sums.slot(p.callsite(api), &p.view, p.held_by);
                if let Some(l) = last.get_mut(stack) {
                    *l = slot;
                }
                slot
            }
        };
        let (c, _) = sums.counts(slot);
        if c.groups == 0 {
            c.groups = 1;
            touched.push(slot);
        }
        c.allocations += blocks;
        c.bytes = c.bytes.saturating_add(bytes);
        if let Some(s) = by_stack.get_mut(stack) {
            let s = s.get_or_insert((slot, 0, 0));
            s.1 += blocks;
            s.2 = s.2.saturating_add(bytes);
        }
    }
    for &slot in &touched {
        let (live, floor) = sums.counts(slot);
        *floor = Counts { groups: 0, ..*live };
    }
    for f in floors {
        // A floor of a stack with nothing left (all freed since) or one suppressed: no row.
        let Some(&Some((slot, blocks, bytes))) = by_stack.get(f.stack) else {
            continue;
        };
        let (_, c) = sums.counts(slot);
        c.allocations = c
            .allocations
            .saturating_sub(blocks.saturating_sub(f.allocations));
        c.bytes = c.bytes.saturating_sub(bytes.saturating_sub(f.bytes));
    }
    suppressed
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
    diff_old(old.clone(), old_source, view).and_new(new.clone(), new_source, view)
}

/// `diff` of the old dump, reduced to a row per callsite before the new dump is read, so a
/// diff holds one dump in memory at a time; the new dump's callsites are summed straight into
/// the rows ([`DiffOld::and_new`]).
pub struct DiffOld {
    side: DiffSide,
    rows: DiffRows,
}

/// The rows of a diff, found by callsite (through a table of their indices), filled one side
/// at a time.
struct DiffRows {
    rows: Vec<DiffRow>,
    index: ByCallsite,
    /// Filling the new side.
    new: bool,
    /// Floors: a diff has no use for them.
    floor: Counts,
}

impl Sums for DiffRows {
    fn slot(&mut self, key: Callsite, stack: &StackView, _: Option<usize>) -> u32 {
        self.index.slot(
            &mut self.rows,
            key,
            |r| &r.callsite,
            |key| DiffRow {
                api: shown_api(key.api()),
                callsite: key,
                stack: stack.clone(),
                old: Counts::default(),
                new: Counts::default(),
            },
        )
    }

    fn key(&self, i: u32) -> &Callsite {
        &self.rows[i as usize].callsite
    }

    fn counts(&mut self, i: u32) -> (&mut Counts, &mut Counts) {
        let r = &mut self.rows[i as usize];
        let live = if self.new { &mut r.new } else { &mut r.old };
        (live, &mut self.floor)
    }
}

/// What one side of a diff says of its dump, and the dump's callsites summed into `rows`;
/// consumes the dump: its frames are dropped as the views of its callsites hold them.
fn diff_side(mut dump: format::Dump, source: &Path, view: &View, rows: &mut DiffRows) -> DiffSide {
    let side = DiffSide {
        source: source.to_path_buf(),
        process: process_view(&dump.process),
        live: side_counts(&dump),
    };
    let table = std::mem::take(&mut dump.stacks);
    let mut stacks = Stacks::owning(table, view, &[]);
    live_in(&dump, &mut stacks, &[], rows);
    side
}

/// The old side of a diff: a row per callsite of `dump`, in order of first appearance.
pub fn diff_old(dump: format::Dump, source: &Path, view: &View) -> DiffOld {
    let mut rows = DiffRows {
        // Room for a row per record (up to one per stack) at once: a doubling copies the
        // list beside itself; what is not used is given back before the new dump is read.
        rows: Vec::with_capacity(dump.live.len().min(dump.stacks.len())),
        index: ByCallsite::default(),
        new: false,
        floor: Counts::default(),
    };
    let side = diff_side(dump, source, view, &mut rows);
    rows.rows.shrink_to_fit();
    DiffOld { side, rows }
}

impl DiffOld {
    /// The diff of the old dump and `dump`, the new one: its callsites fill the rows of the old
    /// dump's they match, and make rows of their own after them (in order of first appearance).
    pub fn and_new(self, dump: format::Dump, source: &Path, view: &View) -> DiffFindings {
        let DiffOld {
            side: old,
            mut rows,
        } = self;
        rows.new = true;
        let new = diff_side(dump, source, view, &mut rows);
        let DiffRows { mut rows, .. } = rows;
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
            old,
            new,
            rows_not_shown: (total - rows.len()) as u64,
            rows,
            grew,
            shrank,
            unchanged,
        }
    }
}
