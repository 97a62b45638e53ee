//! Grouping: each stack prepared once per stack index and API (its callsite, the frames shown,
//! the cache that holds its blocks), live blocks grouped by callsite, API, kind and device,
//! failed calls and bad frees grouped by callsite, and leaks merged by callsite across
//! processes. No filters and no verdict here (`mod.rs` applies them).

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use hashbrown::HashTable;

use crate::load::schema as format;
use format::{EventType, Kind};

use crate::caches::{self, CacheRule};
use crate::callsite::Callsite;

use super::{
    cut, cut_name, fold_native, frame_is_internal, frame_view, handles, is_api_entry,
    is_internal_function, is_internal_module, is_startup_function, is_teardown, visible_frames,
    BadFreeGroup, CallsiteTotal, FailedGroup, Folded, FrameView, LeakGroup, ProcessFindings,
    RecordNote, StackParts, StackView, TeardownGroup, View,
};

/// A stack prepared once per (stack index, API): its callsite, what is shown, and the cache
/// that holds what it allocated. The callsite is kept once, for the API it was prepared for, and
/// shared by the groups made from it.
pub(super) struct PreparedStack {
    callsite: Callsite,
    pub(super) view: StackView,
    pub(super) held_by: Option<usize>,
}

impl PreparedStack {
    /// The callsite of `api` at this stack.
    pub(super) fn callsite(&self, api: &str) -> Callsite {
        self.callsite.with_api(api)
    }
}

fn prepare(
    frames: &[format::Frame],
    api: &str,
    view: &View,
    caches: &[CacheRule],
) -> PreparedStack {
    // The allocating end: past the runtime's, driver's and API entry frames, whatever is shown.
    let start = leading_entries(frames, api, false);
    let held_by = caches::classify(caches, frames, start);
    let idx = visible_frames(frames, api, view.show_internal);
    // With --show-internal every frame is shown; remember which ones a user would have seen.
    // The callsite is of those alone, whatever is shown.
    let user_idx = if view.show_internal {
        visible_frames(frames, api, false)
    } else {
        idx.clone()
    };
    let mut user = vec![!view.show_internal; frames.len()];
    if view.show_internal {
        for &i in &user_idx {
            user[i] = true;
        }
    }
    let (idx, folded) = if view.native {
        (idx, Vec::new())
    } else {
        fold_native(frames, &idx)
    };
    let limit = view.frames.unwrap_or(usize::MAX);
    let shown: Vec<Arc<FrameView>> = idx
        .iter()
        .take(limit)
        .map(|&i| frame_view(&frames[i], !user[i]))
        .collect();
    let shown: Arc<[Arc<FrameView>]> = shown.into();
    // The callsite holds the frames shown when they are the user's (the usual case), else the
    // user's own list; either way the frames themselves are the shared views.
    let callsite_frames = if idx.len() <= limit && idx == user_idx {
        Arc::clone(&shown)
    } else {
        user_idx
            .iter()
            .map(|&i| frame_view(&frames[i], false))
            .collect()
    };
    let callsite = Callsite::new(api, callsite_frames);
    let folded_frames: usize = folded.iter().map(|r| r.frames).sum();
    // A run after the last frame `--frames` shows is cut with the frames after it.
    let cut_off = shown.len() < idx.len();
    let (folded, cut_runs): (Vec<Folded>, Vec<Folded>) = folded
        .into_iter()
        .partition(|r| r.at < shown.len() || (r.at == shown.len() && !cut_off));
    let cut_frames: usize = cut_runs.iter().map(|r| r.frames).sum();
    // Memory a library holds is named at the program's call into the library (its frames stay
    // in the stack): `handle_request at svc.cpp:9`, not `libcublas.so.13+0x5b45ee`.
    let entry = held_by
        .and_then(|_| shown.iter().position(|f| f.is_own()))
        .unwrap_or(0);
    PreparedStack {
        callsite,
        view: StackView::new(StackParts {
            omitted: idx.len() - shown.len() + cut_frames,
            hidden: frames.len() - idx.len() - folded_frames,
            frames: shown,
            folded,
            entry,
        }),
        held_by,
    }
}

/// A stack that no dump's stack table holds (a framework's own record of where its blocks were
/// made), prepared as any stack is: the callsite of `api` at it, and what is shown (frames
/// hidden and folded, cut to `--frames`). No cache rule applies to it.
pub fn prepare_frames(frames: &[format::Frame], api: &str, view: &View) -> (Callsite, StackView) {
    let p = prepare(frames, api, view, &[]);
    (p.callsite, p.view)
}

/// A framework record's frames (plain strings, as `format::FrameworkGroup` holds them) as the
/// dump's frames are held, for [`prepare_frames`].
pub fn record_frames(f: &[cudaleak_format::Frame]) -> Vec<format::Frame> {
    f.iter()
        .map(|f| format::Frame {
            kind: f.kind,
            ip: f.ip,
            module: f.module.as_deref().map(format::Name::from),
            offset: f.offset,
            function: f.function.as_deref().map(format::Name::from),
            file: f.file.as_deref().map(format::Name::from),
            line: f.line,
        })
        .collect()
}

/// Caches `prepare` for one dump per (stack index, how many leading frames the API hides). The
/// API matters only through that count, so a dump with many distinct API names over one big
/// stack cannot multiply the work or the memory.
///
/// Where the analysis owns the dump's stack table ([`Stacks::owning`]), a stack's frames are
/// dropped once its prepared view shows every one of them as the dump has it, and are read back
/// from that view when asked again ([`Stacks::frames`]): each frame is then held once, as its
/// view. With stacks that share no frame, the dump's copy was a quarter of the peak.
pub(super) struct Stacks<'a> {
    raw: Cow<'a, [format::Stack]>,
    view: &'a View,
    pub(super) caches: &'a [CacheRule],
    /// Per stack index, the stack prepared for the first leading count asked of it (the only
    /// one, unless one stack allocates through APIs whose entry frames differ).
    first: Vec<Option<(usize, PreparedStack)>>,
    /// Per stack index, whether its frames were dropped for its first prepared view.
    dropped: Vec<bool>,
    /// The others, by stack index and leading count.
    more: HashMap<(usize, usize), PreparedStack>,
}

/// How many frames at the innermost end `visible_frames` drops as API entries for `api`
/// (counting the internal frames among them).
fn leading_entries(frames: &[format::Frame], api: &str, show_internal: bool) -> usize {
    if show_internal {
        return 0;
    }
    frames
        .iter()
        .take_while(|f| {
            frame_is_internal(f) || f.function.as_deref().is_some_and(|n| is_api_entry(n, api))
        })
        .count()
}

/// [`leading_entries`] of the frames a view shows, where they are the whole stack: what it
/// reads of a frame (module and function) the view holds the same.
fn leading_views(frames: &[Arc<FrameView>], api: &str) -> usize {
    frames
        .iter()
        .take_while(|f| {
            f.module.as_deref().is_some_and(is_internal_module)
                || f.function.as_deref().is_some_and(|n| {
                    is_internal_function(n) || is_startup_function(n) || is_api_entry(n, api)
                })
        })
        .count()
}

/// The frame of the dump a view was made from, where its names are whole.
fn frame_of(v: &FrameView) -> format::Frame {
    format::Frame {
        kind: v.python.then_some(format::FrameKind::Python),
        ip: format::Hex(v.ip),
        module: v.module.clone(),
        offset: v.offset().map(format::Hex),
        function: v.function.clone(),
        file: v.file.clone(),
        line: v.line,
    }
}

/// Whether `view` shows `frames`, every one whole and in order, so that they can be read back
/// from it.
fn shows_every_frame(view: &StackView, frames: &[format::Frame]) -> bool {
    view.frames.len() == frames.len()
        && view
            .frames
            .iter()
            .zip(frames)
            .all(|(v, f)| v.long.is_none() && frame_of(v) == *f)
}

impl<'a> Stacks<'a> {
    /// Prepares the stacks of `dump`, which stays whole.
    pub(super) fn new(dump: &'a format::Dump, view: &'a View, caches: &'a [CacheRule]) -> Self {
        Self::of(Cow::Borrowed(&dump.stacks), view, caches)
    }

    /// Prepares `stacks` (a dump's table, taken from it), dropping each stack's frames once
    /// its view holds them.
    pub(super) fn owning(
        stacks: Vec<format::Stack>,
        view: &'a View,
        caches: &'a [CacheRule],
    ) -> Self {
        Self::of(Cow::Owned(stacks), view, caches)
    }

    fn of(raw: Cow<'a, [format::Stack]>, view: &'a View, caches: &'a [CacheRule]) -> Self {
        Stacks {
            raw,
            view,
            caches,
            first: Vec::new(),
            dropped: Vec::new(),
            more: HashMap::new(),
        }
    }

    /// How many stacks the dump has.
    pub(super) fn len(&self) -> usize {
        self.raw.len()
    }

    /// The frames of a stack as the dump has them (none for an index out of range).
    pub(super) fn frames(&self, stack: usize) -> Cow<'_, [format::Frame]> {
        if let Some(Some((_, p))) = self.first.get(stack).filter(|_| self.dropped[stack]) {
            return Cow::Owned(p.view.frames.iter().map(|v| frame_of(v)).collect());
        }
        Cow::Borrowed(self.raw.get(stack).map_or(&[], |s| &s.frames))
    }

    pub(super) fn get(&mut self, stack: usize, api: &str) -> &PreparedStack {
        let (view, caches) = (self.view, self.caches);
        if self.first.len() != self.raw.len() {
            self.first = std::iter::repeat_with(|| None)
                .take(self.raw.len())
                .collect();
            self.dropped = vec![false; self.raw.len()];
        }
        // What is shown and which cache holds the blocks depend on the API only through this
        // count (with --show-internal nothing shown depends on it at all).
        let lead = match self.first.get(stack) {
            Some(Some((_, p))) if self.dropped[stack] => leading_views(&p.view.frames, api),
            _ => leading_entries(&self.frames(stack), api, false),
        };
        if let Some(None) = self.first.get(stack) {
            // Indices were validated by cudaleak-format; out of range, no stack is asked.
            let frames = self.raw.get(stack).map_or(&[][..], |s| &s.frames);
            let p = prepare(frames, api, view, caches);
            let owned = matches!(self.raw, Cow::Owned(_));
            if owned && !frames.is_empty() && shows_every_frame(&p.view, frames) {
                self.raw.to_mut()[stack].frames = Vec::new();
                self.dropped[stack] = true;
            }
            self.first[stack] = Some((lead, p));
        }
        if let Some(Some((l, p))) = self.first.get(stack) {
            if *l == lead {
                return p;
            }
        }
        if !self.more.contains_key(&(stack, lead)) {
            let p = prepare(&self.frames(stack), api, view, caches);
            self.more.insert((stack, lead), p);
        }
        &self.more[&(stack, lead)]
    }
}

/// Sort order of leak groups: most bytes, then most blocks, then callsite for stability.
pub(super) fn by_size(a: &LeakGroup, b: &LeakGroup) -> std::cmp::Ordering {
    b.held
        .cmp(&a.held)
        .then(b.bytes.cmp(&a.bytes))
        .then(b.allocations.cmp(&a.allocations))
        .then_with(|| a.callsite.cmp(&b.callsite))
        .then(a.kind.cmp(&b.kind))
        .then(a.device.cmp(&b.device))
}

/// Sorts groups [`by_size`], stably, without a scratch copy of half the groups (what a stable
/// sort of the groups themselves takes): the order is sorted as indices, then applied in place.
pub(super) fn sort_groups(groups: &mut [GroupAcc]) {
    let n = u32::try_from(groups.len()).unwrap_or(u32::MAX);
    let mut order: Vec<u32> = (0..n).collect();
    order.sort_by(|&a, &b| by_size(&groups[a as usize].group, &groups[b as usize].group));
    // Position i takes the group at order[i]: follow each cycle, marking what is done with
    // order[j] = j.
    for i in 0..order.len() {
        let mut j = i;
        while order[j] as usize != j {
            let k = order[j] as usize;
            order[j] = j as u32;
            if k == i {
                break;
            }
            groups.swap(j, k);
            j = k;
        }
    }
}

/// The stack indices of a group's records, in order, each once: the first kept in place (a
/// group of a distinct callsite has one), the rest in a list.
#[derive(Debug, Default)]
pub(super) struct StackList {
    first: Option<usize>,
    more: Vec<usize>,
}

impl StackList {
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.first.into_iter().chain(self.more.iter().copied())
    }
    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }
    pub(super) fn contains(&self, s: usize) -> bool {
        self.first == Some(s) || self.more.contains(&s)
    }
    pub(super) fn push(&mut self, s: usize) {
        if self.first.is_none() {
            self.first = Some(s);
        } else {
            self.more.push(s);
        }
    }
}

pub(super) struct GroupAcc {
    pub(super) group: LeakGroup,
    pub(super) stacks: StackList,
    /// A framework's record group: its frames, which no stack of the dump holds (suppressions
    /// are matched on them).
    pub(super) record: Option<Box<format::Stack>>,
}

/// The groups of the frameworks' own records (`frameworks.records`) as leak groups: each
/// group's Python frames its stack, its framework its API. Records that name no blocks and
/// say why give their note instead.
pub(super) fn group_records(dump: &format::Dump, view: &View) -> (Vec<GroupAcc>, Vec<RecordNote>) {
    let mut groups = Vec::new();
    let mut notes = Vec::new();
    let records = dump.frameworks.iter().flat_map(|f| &f.records);
    for r in records {
        let framework = cut(&r.framework);
        if let Some(note) = &r.note {
            notes.push(RecordNote {
                framework: framework.clone(),
                note: cut(note),
            });
        }
        for g in &r.groups {
            let frames = record_frames(&g.frames);
            let (callsite, stack) = prepare_frames(&frames, &framework, view);
            groups.push(GroupAcc {
                group: LeakGroup {
                    api: framework.as_str().into(),
                    kind: Kind::Device,
                    device: g.device,
                    bytes: g.bytes,
                    held: g.bytes,
                    allocations: g.blocks,
                    stack,
                    callsite,
                    held_by: None,
                    handles: None,
                    framework: Some(framework.clone()),
                },
                stacks: StackList::default(),
                record: Some(Box::new(format::Stack {
                    frames,
                    python: Vec::new(),
                })),
            });
        }
    }
    (groups, notes)
}

/// Groups live records by API, kind, device, visible stack and the cache that holds them; the
/// blocks of leaked handles are left to their handles' groups, and blocks a destroyed handle
/// left behind are never held by a cache.
pub(super) fn group_live<'a>(
    dump: &'a format::Dump,
    stacks: &mut Stacks<'a>,
    judged: &handles::Judged,
) -> Vec<GroupAcc> {
    // Groups are found by their key (callsite, cache, kind, device) through a table of their
    // indices, hashed from the group itself: no second copy of any key.
    let hasher = RandomState::new();
    let key_hash = |g: &LeakGroup| hasher.hash_one((&g.callsite, g.held_by, g.kind, g.device));
    let mut index: HashTable<u32> = HashTable::new();
    // The group the last record of each stack index went to, and what else decided it: records
    // of one stack index, API, kind and device share a group, found without hashing the callsite
    // (a whole stack's worth of frames) for every record. A miss only takes the long way.
    #[derive(Clone, Copy)]
    struct Last {
        slot: u32,
        kind: Kind,
        device: Option<i32>,
        left_behind: bool,
        owner_rule: Option<usize>,
    }
    let mut last: Vec<Option<Last>> = vec![None; stacks.len()];
    // Room for a group per stack (what a dump of distinct callsites has) at once: a doubling
    // of a large list copies it beside itself, and the room never written is never resident.
    let mut groups: Vec<GroupAcc> = Vec::with_capacity(dump.live.len().min(stacks.len()));
    for r in &dump.live {
        if judged.in_groups.contains(&r.seq) {
            continue;
        }
        // What the handles say of the block: left behind by a destroyed one (a leak), or held
        // by a live one (that library's cache rule).
        let left_behind = judged.left_behind.contains(&r.seq);
        let owner_rule = judged.held.get(&r.seq).copied();
        let hit = last.get(r.stack).copied().flatten().filter(|l| {
            l.kind == r.kind
                && l.device == r.device
                && l.left_behind == left_behind
                && l.owner_rule == owner_rule
                && groups[l.slot as usize].group.api == *r.api
        });
        if let Some(l) = hit {
            let acc = &mut groups[l.slot as usize];
            acc.group.bytes = acc.group.bytes.saturating_add(r.size);
            acc.group.held = acc.group.held.saturating_add(r.held());
            acc.group.allocations += 1;
            continue;
        }
        let p = stacks.get(r.stack, &r.api);
        let callsite = p.callsite(&r.api);
        let held_by = if left_behind {
            None
        } else {
            p.held_by.or(owner_rule)
        };
        let hash = hasher.hash_one((&callsite, held_by, r.kind, r.device));
        let found = index.find(hash, |&i| {
            let g = &groups[i as usize].group;
            g.callsite == callsite
                && g.held_by == held_by
                && g.kind == r.kind
                && g.device == r.device
        });
        let slot = match found {
            Some(&i) => i as usize,
            None => {
                groups.push(GroupAcc {
                    group: LeakGroup {
                        api: cut_name(&r.api),
                        kind: r.kind,
                        device: r.device,
                        bytes: 0,
                        held: 0,
                        allocations: 0,
                        stack: p.view.clone(),
                        callsite,
                        held_by,
                        handles: None,
                        framework: None,
                    },
                    stacks: StackList::default(),
                    record: None,
                });
                let i = groups.len() - 1;
                index.insert_unique(hash, i as u32, |&j| key_hash(&groups[j as usize].group));
                i
            }
        };
        if let Some(l) = last.get_mut(r.stack) {
            *l = Some(Last {
                slot: slot as u32,
                kind: r.kind,
                device: r.device,
                left_behind,
                owner_rule,
            });
        }
        let acc = &mut groups[slot];
        acc.group.bytes = acc.group.bytes.saturating_add(r.size);
        acc.group.held = acc.group.held.saturating_add(r.held());
        acc.group.allocations += 1;
        if !acc.stacks.contains(r.stack) && acc.stacks.len() < 64 {
            acc.stacks.push(r.stack);
        }
    }
    // The slack of the last doubling (up to half the groups) is given back before the groups
    // are sorted and sifted.
    groups.shrink_to_fit();
    groups
}

/// Adds `code` to a sorted list of at most 16 distinct codes.
fn add_code(codes: &mut Vec<i64>, code: Option<i64>) {
    if let Some(code) = code {
        if let Err(at) = codes.binary_search(&code) {
            if codes.len() < 16 {
                codes.insert(at, code);
            }
        }
    }
}

/// Groups failed allocations by (API, stack), bad frees by (type, API, free stack, alloc
/// stack) and teardown failures by (type, API, stack), in order of first occurrence.
pub(super) fn group_events<'a>(
    dump: &'a format::Dump,
    stacks: &mut Stacks<'a>,
) -> (Vec<FailedGroup>, Vec<BadFreeGroup>, Vec<TeardownGroup>) {
    let mut failed: Vec<FailedGroup> = Vec::new();
    let mut failed_index: HashMap<Callsite, usize> = HashMap::new();
    let mut bad: Vec<BadFreeGroup> = Vec::new();
    let mut bad_index: HashMap<(EventType, Callsite, Option<Callsite>), usize> = HashMap::new();
    let mut teardown: Vec<TeardownGroup> = Vec::new();
    let mut teardown_index: HashMap<(EventType, Callsite), usize> = HashMap::new();
    for e in &dump.events {
        let p = stacks.get(e.stack, &e.api);
        let (key, view) = (p.callsite(&e.api), p.view.clone());
        if is_teardown(e) {
            let slot = *teardown_index
                .entry((e.kind, key.clone()))
                .or_insert_with(|| {
                    teardown.push(TeardownGroup {
                        callsite: key,
                        kind: e.kind,
                        api: cut(&e.api),
                        count: 0,
                        errors: Vec::new(),
                        during_exit: 0,
                        stack: view,
                    });
                    teardown.len() - 1
                });
            let g = &mut teardown[slot];
            g.count += 1;
            g.during_exit += u64::from(e.during_exit);
            add_code(&mut g.errors, e.error);
            continue;
        }
        match e.kind {
            EventType::FailedAllocation => {
                let slot = *failed_index.entry(key.clone()).or_insert_with(|| {
                    failed.push(FailedGroup {
                        callsite: key,
                        api: cut(&e.api),
                        count: 0,
                        bytes: 0,
                        errors: Vec::new(),
                        stack: view,
                    });
                    failed.len() - 1
                });
                let g = &mut failed[slot];
                g.count += 1;
                g.bytes = g.bytes.saturating_add(e.size.unwrap_or(0));
                add_code(&mut g.errors, e.error);
            }
            EventType::DoubleFree | EventType::InvalidFree => {
                let alloc = e.alloc_stack.map(|s| {
                    let p = stacks.get(s, &e.api);
                    (p.callsite(&e.api), p.view.clone())
                });
                let full_key = (e.kind, key.clone(), alloc.as_ref().map(|a| a.0.clone()));
                let slot = *bad_index.entry(full_key).or_insert_with(|| {
                    bad.push(BadFreeGroup {
                        callsite: key,
                        kind: e.kind,
                        api: cut(&e.api),
                        count: 0,
                        address: e.address.map(|a| a.0),
                        stack: view,
                        alloc_stack: alloc.map(|a| a.1),
                    });
                    bad.len() - 1
                });
                bad[slot].count += 1;
            }
        }
    }
    (failed, bad, teardown)
}

/// Sums leak groups by callsite over all processes.
pub(super) fn merge_callsites(processes: &[ProcessFindings]) -> Vec<CallsiteTotal> {
    let mut index: HashMap<&Callsite, (usize, usize)> = HashMap::new();
    // At most a callsite per group, room for all at once (a doubling copies the list beside
    // itself); what is not used is given back.
    let groups = processes.iter().map(|p| p.leaks.len()).sum();
    let mut out: Vec<CallsiteTotal> = Vec::with_capacity(groups);
    for (pi, p) in processes.iter().enumerate() {
        for g in &p.leaks {
            let slot = index.entry(&g.callsite).or_insert_with(|| {
                out.push(CallsiteTotal {
                    callsite: g.callsite.clone(),
                    api: g.api.clone(),
                    stack: g.stack.clone(),
                    bytes: 0,
                    allocations: 0,
                    processes: 0,
                });
                (out.len() - 1, usize::MAX)
            });
            let c = &mut out[slot.0];
            c.bytes = c.bytes.saturating_add(g.bytes);
            c.allocations += g.allocations;
            if slot.1 != pi {
                slot.1 = pi;
                c.processes += 1;
            }
        }
    }
    drop(index);
    out.shrink_to_fit();
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.allocations.cmp(&a.allocations))
            .then(b.processes.cmp(&a.processes))
    });
    out
}
