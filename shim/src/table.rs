//! Live allocations, events and counters: what the dump is made of. Safe Rust only; sharded so
//! threads allocating at once rarely meet on a lock.
//!
//! The hot calls (a device or host allocation, a free) do not touch the shards: they write their
//! entry into the pending ring (`ring.rs`) under their number of the one sequence, and the ring
//! is folded into the shards in that order, in batches: when it is full, and before anything
//! reads or changes the table otherwise (every other method settles it first). So the table is
//! always as if every call had been applied in sequence order, and the exact peak is the peak of
//! that order.
//!
//! Here: the shards and the fold, allocations, frees, events, counters and snapshots. Beside it,
//! one job each: the recently freed addresses (`freed.rs`), what each stack holds and its floor
//! (`floors.rs`), the mappings (`mappings.rs`), the table's part in a fork (`fork.rs`).
//!
//! No lock here is ever held while calling into CUDA or anything else outside the table.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::lock::{CachePadded, Mutex, MutexGuard};
use cudaleak_format::EventType;

use crate::api::{Api, Space};
use crate::hash::{mix, AddrHash};
use crate::probe::{self, Part};
use crate::stack::StackId;
use crate::thread::Thread;

mod floors;
mod fork;
mod freed;
mod mappings;
mod ring;
use floors::Holding;
pub use floors::{Counts, Finalizing};
use freed::{Freed, FreedRing};
pub use mappings::Mapping;
use mappings::Mappings;
use ring::{Entry, Ring};

const SHARDS: usize = 64;
const SPACES: usize = 7;
/// A hot call whose number is a multiple of this asks the worker to fold the ring: half of it.
pub const FOLD_EVERY: u64 = ring::SLOTS / 2;
/// The longest the last dump waits for another thread to write the entry whose number it took.
const LAST_DUMP_WAIT_MS: u64 = 20;
/// Events kept; later ones are only counted.
pub const MAX_EVENTS: usize = 10_000;

/// One live block. Kept to 32 bytes (40 with its key): there may be millions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub size: u64,
    pub seq: u64,
    pub stack: StackId,
    pub time_ms: u32,
    pub thread: u32,
    /// Device ordinal, or -1 when unknown (or beyond i16).
    pub device: i16,
    pub api: Api,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub kind: EventType,
    pub api: Api,
    pub address: Option<u64>,
    pub size: Option<u64>,
    pub error: Option<i64>,
    pub seq: u64,
    pub stack: StackId,
    pub alloc_stack: Option<StackId>,
    /// Made after the program had begun to exit ([`crate::lifecycle::exiting`]).
    pub during_exit: bool,
}

/// What a free turned out to be, once the real call has answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeOutcome {
    /// A tracked block was freed.
    Freed,
    /// The real call succeeded for an address we never saw allocated.
    Untracked,
    /// The real call failed for a tracked block; it stays live.
    Failed,
    /// The real call failed for an address freed before; where it had been allocated.
    DoubleFree(StackId),
    /// The real call failed for an address never allocated.
    InvalidFree,
}

#[derive(Default)]
struct Shard {
    live: [HashMap<u64, Block, AddrHash>; SPACES],
    /// What each stack holds in this shard now, and the least it held since the last snapshot:
    /// the interval's floor, which a tensor in flight at the snapshot's instant does not raise.
    /// Kept per shard, under the lock the call holds anyway; the sum of the shards' floors lies
    /// between what the stack kept all interval and its true floor (see [`Table::snapshot`]).
    by_stack: HashMap<StackId, Holding, AddrHash>,
    freed: FreedRing,
    /// This shard's share of the counters: kept under the lock the call holds anyway, so
    /// threads allocating at once do not fight over shared cache lines.
    counts: Totals,
}

impl Shard {
    /// Removes the live block at `addr` as a free does: counted as a free and no longer held by
    /// its stack. Returns it, with the bytes it held.
    fn take_live(&mut self, s: usize, addr: u64) -> Option<(Block, u64)> {
        let b = self.live[s].remove(&addr)?;
        let bytes = held(ALL_SPACES[s], &b);
        self.counts.frees += 1;
        self.release(b.stack, bytes);
        Some((b, bytes))
    }

    /// A free of `block` at `addr` failed: it is live again (unless the address was taken
    /// meanwhile) and the free uncounted. Returns the bytes it holds, for the live total.
    fn put_back(&mut self, s: usize, addr: u64, block: Block) -> u64 {
        let bytes = held(ALL_SPACES[s], &block);
        if !self.live[s].contains_key(&addr) {
            self.hold(block.stack, bytes, block.api);
            self.live[s].insert(addr, block);
        }
        self.counts.frees -= 1;
        bytes
    }
}

/// The summary's counters (see docs/dump-format.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub allocations: u64,
    pub frees: u64,
    pub untracked_frees: u64,
    pub failed_allocations: u64,
    pub invalid_frees: u64,
    pub bytes_allocated: u64,
    pub live_bytes: u64,
    pub peak_live_bytes: u64,
    pub dropped_events: u64,
}

impl Totals {
    fn add(&mut self, o: &Totals) {
        self.allocations += o.allocations;
        self.frees += o.frees;
        self.untracked_frees += o.untracked_frees;
        self.invalid_frees += o.invalid_frees;
        self.bytes_allocated += o.bytes_allocated;
    }
}

pub struct Table {
    /// Each shard on cache lines of its own: two threads working in neighbouring shards do
    /// not take each other's lines.
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    /// Mappings (`cuMemMap`) apart from the shards: an unmap names a range, not a key.
    mappings: Mutex<Mappings>,
    events: Mutex<Vec<EventRecord>>,
    /// The only counters every call updates, together on lines of their own (see [`Shared`]).
    shared: CachePadded<Shared>,
    failed_allocations: AtomicU64,
    dropped_events: AtomicU64,
    /// What each stack held when the Python interpreter began to shut down ([`Table::finalizing`]).
    finalizing: Mutex<Option<Finalizing>>,
    /// Whether `finalizing` is set: read at every free, without the lock.
    finalizing_noted: AtomicBool,
    /// The hot calls' entries not yet in the shards.
    ring: Ring,
    /// The next number of the sequence to fold from the ring; held while folding.
    fold: Mutex<u64>,
}

/// What all threads update at every call: the sequence (one order for allocations, frees and
/// events) and the running total the exact peak needs. One cache line, so a call that updates
/// two of them moves one line between cores, not two.
#[derive(Default)]
struct Shared {
    seq: AtomicU64,
    live_bytes: AtomicU64,
    /// The peak since the window began ([`Table::restart_peak`]); the process's peak is the
    /// larger of it and `earlier_peak`.
    peak_live_bytes: AtomicU64,
    /// The process's peak before the current window began.
    earlier_peak: AtomicU64,
}

/// A copy for a dump. Each shard's blocks and counters are copied under one hold of its lock,
/// and a block is always counted in the shard of its address, so the copy is consistent:
/// `allocations - frees` is the number of live blocks, even while other threads allocate.
pub struct Snapshot {
    pub live: Vec<Live>,
    pub events: Vec<EventRecord>,
    pub totals: Totals,
    /// Per stack that went below what it holds now since the last snapshot: by how much.
    pub dips: HashMap<StackId, Counts>,
    pub finalizing: Option<Finalizing>,
}

/// One live record of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Live {
    pub space: Space,
    pub addr: u64,
    pub block: Block,
    /// Bytes of memory the record keeps allocated: what `live_bytes` counts (see [`held`]).
    pub held: u64,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
            mappings: Mutex::default(),
            events: Mutex::new(Vec::new()),
            shared: CachePadded::default(),
            failed_allocations: AtomicU64::new(0),
            dropped_events: AtomicU64::new(0),
            finalizing: Mutex::new(None),
            finalizing_noted: AtomicBool::new(false),
            ring: Ring::default(),
            fold: Mutex::new(1),
        }
    }
}

fn space_index(space: Space) -> usize {
    match space {
        Space::Device => 0,
        Space::Host => 1,
        Space::Array => 2,
        Space::Physical => 3,
        Space::Registered => 4,
        Space::Ipc => 5,
        Space::Reserved => 6,
        // Mappings live in `Table::mappings`; the shards never see them.
        Space::Mapped => unreachable!("mappings are not kept in the shards"),
    }
}

const ALL_SPACES: [Space; SPACES] = [
    Space::Device,
    Space::Host,
    Space::Array,
    Space::Physical,
    Space::Registered,
    Space::Ipc,
    Space::Reserved,
];

/// Bytes of memory a block of `space` keeps allocated, which is what `live_bytes`, its peak and
/// `bytes_allocated` count: memory is counted once. A reservation is address space, not memory;
/// a mapping's bytes are its physical allocation's (see [`Mapping::holds`]).
pub fn held(space: Space, block: &Block) -> u64 {
    match space {
        Space::Reserved | Space::Mapped => 0,
        _ => block.size,
    }
}

fn shard_index(addr: u64) -> usize {
    (mix(addr) >> 58) as usize % SHARDS
}

/// Puts `block` into `shard`. Returns the bytes it makes live, and those of a block it replaced:
/// the address came back without the shim seeing it freed, so the old block is gone.
fn insert_into(shard: &mut Shard, s: usize, addr: u64, block: Block) -> (u64, u64) {
    let space = ALL_SPACES[s];
    let bytes = held(space, &block);
    shard.counts.allocations += 1;
    shard.counts.bytes_allocated += bytes;
    shard.hold(block.stack, bytes, block.api);
    let replaced = shard.live[s].insert(addr, block).map_or(0, |old| {
        let gone = held(space, &old);
        shard.release(old.stack, gone);
        gone
    });
    (bytes, replaced)
}

/// A free's entry, folded: the block leaves the live blocks for the freed history (whole, in
/// case the real call failed), or the free is counted untracked (and marked there). Returns the
/// bytes it freed.
fn remove_freed(shard: &mut Shard, s: usize, addr: u64, ticket: u64) -> u64 {
    match shard.take_live(s, addr) {
        Some((b, bytes)) => {
            shard.freed.push(s, addr, ticket, Some(b));
            bytes
        }
        None => {
            shard.counts.untracked_frees += 1;
            shard.freed.push(s, addr, ticket, None);
            0
        }
    }
}

impl Table {
    fn shard(&self, addr: u64) -> &Mutex<Shard> {
        &self.shards[shard_index(addr)]
    }

    /// Records a successful allocation now (the ring's entries before it folded first).
    pub fn allocated(&self, space: Space, addr: u64, block: Block) {
        self.settle();
        self.insert(space_index(space), addr, block);
    }

    /// Records a successful allocation, made on thread `t`, through the ring: folded into the
    /// shards later, in sequence order. The block's number is the one the entry takes; returned.
    pub fn allocated_soon(&self, t: &Thread, space: Space, addr: u64, mut block: Block) -> u64 {
        let s = space_index(space);
        self.write(t, |ticket| {
            block.seq = ticket;
            Entry::Alloc {
                space: s,
                addr,
                block,
            }
        })
    }

    /// Records, through the ring, a free about to be forwarded on thread `t`: folded later, it
    /// forgets the block (or counts an untracked free). Returns the free's number, for
    /// [`Table::free_failed`] should the real call fail.
    pub fn freeing_soon(&self, t: &Thread, space: Space, addr: u64) -> u64 {
        let s = space_index(space);
        self.write(t, |_| Entry::Free { space: s, addr })
    }

    /// Takes the next number of the sequence and writes what `entry` makes of it into the ring.
    /// Between the two, a terminating signal on this thread, `t`, waits (`critical`): the fold
    /// stops at a number not yet written, and the signal's dump should find this one.
    #[inline]
    fn write(&self, t: &Thread, entry: impl FnOnce(u64) -> Entry) -> u64 {
        probe::time(Part::Write, || {
            crate::critical::enter_in(t);
            let ticket = self.shared.seq.fetch_add(1, Relaxed) + 1;
            if !self.ring.has_room(ticket) {
                probe::time(Part::Room, || self.make_room(ticket));
            }
            self.ring.publish(ticket, entry(ticket));
            crate::critical::leave_in(t);
            ticket
        })
    }

    /// The ring is full where `ticket` writes: fold until the entry there is folded. Numbers
    /// below it that are still being written stop a fold; their writers finish without
    /// waiting on anything but this same fold, so yielding and folding again gets there. A
    /// fold another thread is making frees the slot as well: the writer does not queue behind
    /// it on the lock (a sleep and a wake-up each), it yields and looks again.
    #[cold]
    #[inline(never)]
    fn make_room(&self, ticket: u64) {
        loop {
            if let Some(next) = self.fold.try_lock() {
                self.fold_from(next);
            }
            if self.ring.has_room(ticket) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Folds the ring into the shards, in sequence order, up to the first number not yet
    /// written (a call between taking its number and writing it).
    ///
    /// Each shard is held from the batch's first entry that reaches it to the batch's end, and
    /// the live bytes are counted locally, so an entry costs no lock and no atomic instruction:
    /// the next entries' cache misses overlap (on the GPU, folding entry by entry with a lock
    /// each cost as much as the table had). The peak is that of the batch's running total, in
    /// sequence order.
    /// Returns the next number to fold (the first not yet written).
    fn settle(&self) -> u64 {
        self.fold_from(self.fold.lock())
    }

    /// [`Table::settle`]'s fold, under the fold lock, whose guard holds the next number to fold.
    fn fold_from(&self, next: MutexGuard<'_, u64>) -> u64 {
        let from = *next;
        probe::time_n(Part::Fold, || self.fold_batch(next), |&to| to - from)
    }

    /// [`Table::fold_from`]'s work.
    fn fold_batch(&self, mut next: MutexGuard<'_, u64>) -> u64 {
        let Some(first) = self.ring.take(*next) else {
            return *next;
        };
        let mut shards: [Option<MutexGuard<'_, Shard>>; SHARDS] = std::array::from_fn(|_| None);
        let start = self.shared.live_bytes.load(Relaxed);
        let (mut live, mut peak) = (start, start);
        let mut entry = Some(first);
        while let Some(e) = entry {
            match e {
                Entry::Nop => {}
                Entry::Alloc { space, addr, block } => {
                    let i = shard_index(addr);
                    let shard = shards[i].get_or_insert_with(|| self.shards[i].lock());
                    let (added, replaced) = insert_into(shard, space, addr, block);
                    live = live.saturating_sub(replaced) + added;
                    peak = peak.max(live);
                }
                Entry::Free { space, addr } => {
                    let i = shard_index(addr);
                    let shard = shards[i].get_or_insert_with(|| self.shards[i].lock());
                    live = live.saturating_sub(remove_freed(shard, space, addr, *next));
                }
            }
            *next += 1;
            entry = self.ring.take(*next);
        }
        drop(shards);
        if live > start {
            self.shared.live_bytes.fetch_add(live - start, Relaxed);
        } else {
            self.shared.live_bytes.fetch_sub(start - live, Relaxed);
        }
        if peak > self.shared.peak_live_bytes.load(Relaxed) {
            self.shared.peak_live_bytes.fetch_max(peak, Relaxed);
        }
        *next
    }

    /// Folds the ring into the shards now (the worker, asked every [`FOLD_EVERY`] numbers).
    pub fn fold(&self) {
        self.settle();
    }

    /// Settles until number `ticket` is folded, yielding while numbers before it are still being
    /// written; after `limit_ms`, if given, it settles what it can and returns.
    fn settle_through(&self, ticket: u64, limit_ms: Option<u64>) {
        let start = crate::clock::coarse_ms();
        while self.settle() <= ticket {
            if limit_ms.is_some_and(|l| crate::clock::coarse_ms().saturating_sub(start) >= l) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// The real free of number `ticket` ([`Table::freeing_soon`]) failed: a tracked block is
    /// live again; an untracked free becomes an invalid one, or a double free when the address
    /// was freed before.
    pub fn free_failed(&self, space: Space, addr: u64, ticket: u64) -> FreeOutcome {
        // Its own number is written (by this thread): waiting ends.
        self.settle_through(ticket, None);
        let s = space_index(space);
        let mut shard = self.shard(addr).lock();
        let taken = shard.freed.take_ticket(s, addr, ticket);
        if let Some(Freed {
            block: Some(block), ..
        }) = taken
        {
            let bytes = shard.put_back(s, addr, block);
            drop(shard);
            self.add_live(bytes);
            return FreeOutcome::Failed;
        }
        if taken.is_some() {
            shard.counts.untracked_frees -= 1;
        }
        shard.counts.invalid_frees += 1;
        match shard.freed.find(s, addr) {
            Some(stack) => FreeOutcome::DoubleFree(stack),
            None => FreeOutcome::InvalidFree,
        }
    }

    /// Puts `block` into its shard: the work of an allocation's record.
    fn insert(&self, s: usize, addr: u64, block: Block) {
        let (added, replaced) = insert_into(&mut self.shard(addr).lock(), s, addr, block);
        self.sub_live(replaced);
        self.add_live(added);
    }

    fn add_live(&self, size: u64) {
        if size == 0 {
            return;
        }
        let live = self.shared.live_bytes.fetch_add(size, Relaxed) + size;
        // Read first: the read-modify-write is needed only when this is a new peak.
        if live > self.shared.peak_live_bytes.load(Relaxed) {
            self.shared.peak_live_bytes.fetch_max(live, Relaxed);
        }
    }

    fn sub_live(&self, size: u64) {
        if size != 0 {
            self.shared.live_bytes.fetch_sub(size, Relaxed);
        }
    }

    /// The last number of the one sequence given out.
    pub fn seq_now(&self) -> u64 {
        self.shared.seq.load(Relaxed)
    }

    /// The next number of the one sequence (its slot in the ring left empty: what it numbers is
    /// recorded elsewhere).
    pub fn next_seq(&self) -> u64 {
        crate::thread::with(|t| self.write(t, |_| Entry::Nop))
    }

    /// Forgets `addr` before the real free runs, so a racing allocation that reuses the address
    /// cannot be the one dropped. Returns the block to hand to [`Table::free_finished`].
    ///
    /// The free is counted now, with the removal, so that a snapshot taken while the real call
    /// runs still has `allocations - frees` equal to its live blocks; a failed call uncounts it.
    ///
    /// The address goes into the freed history now too, under the same hold of the lock: a
    /// successful free (the usual answer) then needs no second one; a failed free takes it out.
    pub fn take(&self, space: Space, addr: u64) -> Option<Block> {
        self.settle();
        let s = space_index(space);
        let mut shard = self.shard(addr).lock();
        let (b, bytes) = shard.take_live(s, addr)?;
        shard.freed.push(s, addr, 0, Some(b));
        drop(shard);
        self.sub_live(bytes);
        Some(b)
    }

    /// Settles a free once the real call has answered.
    pub fn free_finished(
        &self,
        space: Space,
        addr: u64,
        taken: Option<Block>,
        succeeded: bool,
    ) -> FreeOutcome {
        self.settle();
        let s = space_index(space);
        match (taken, succeeded) {
            // The usual answer: `take` did the shard's part already.
            (Some(block), true) => {
                if space == Space::Physical
                    && self.mappings.lock().released(addr, block.seq, block.size)
                {
                    // Released while mapped: the memory lives on, now counted by a mapping.
                    self.add_live(block.size);
                }
                FreeOutcome::Freed
            }
            (Some(block), false) => {
                // Still allocated as far as the driver is concerned: put it back, and out of
                // the freed history `take` put it in.
                let mut shard = self.shard(addr).lock();
                shard.freed.forget(s, addr);
                let bytes = shard.put_back(s, addr, block);
                drop(shard);
                self.add_live(bytes);
                FreeOutcome::Failed
            }
            (None, true) => {
                let mut shard = self.shard(addr).lock();
                shard.freed.forget(s, addr);
                shard.counts.untracked_frees += 1;
                FreeOutcome::Untracked
            }
            (None, false) => {
                let mut shard = self.shard(addr).lock();
                shard.counts.invalid_frees += 1;
                match shard.freed.find(s, addr) {
                    Some(stack) => FreeOutcome::DoubleFree(stack),
                    None => FreeOutcome::InvalidFree,
                }
            }
        }
    }

    pub fn failed_allocation(&self) {
        self.failed_allocations.fetch_add(1, Relaxed);
    }

    /// Removes a tracked block without a driver free (the runtime refused the free because it
    /// is unloading: the context's teardown reclaims the memory).
    pub fn forget(&self, space: Space, addr: u64) -> bool {
        self.settle();
        let taken = self.shard(addr).lock().take_live(space_index(space), addr);
        let Some((_, bytes)) = taken else {
            return false;
        };
        self.sub_live(bytes);
        true
    }

    #[cfg(test)]
    pub fn is_live(&self, space: Space, addr: u64) -> bool {
        self.settle();
        if space == Space::Mapped {
            return self.mappings.lock().live.contains_key(&addr);
        }
        self.shard(addr).lock().live[space_index(space)].contains_key(&addr)
    }

    /// Whether block `addr` of `space` is live and is the one allocated as call `seq` (not a
    /// later block at the same address).
    pub fn is_live_as(&self, space: Space, addr: u64, seq: u64) -> bool {
        if space == Space::Mapped {
            return false; // never a handle's: mappings are not allocations
        }
        self.settle();
        let shard = self.shard(addr).lock();
        shard.live[space_index(space)]
            .get(&addr)
            .is_some_and(|b| b.seq == seq)
    }

    /// The device of live block `addr`, if it is live and its device known.
    pub fn device_of(&self, space: Space, addr: u64) -> Option<i16> {
        self.settle();
        let shard = self.shard(addr).lock();
        let b = shard.live[space_index(space)].get(&addr)?;
        (b.device >= 0).then_some(b.device)
    }

    pub fn event(&self, event: EventRecord) {
        let mut events = self.events.lock();
        if events.len() < MAX_EVENTS {
            events.push(event);
        } else {
            drop(events);
            self.dropped_events.fetch_add(1, Relaxed);
        }
    }

    /// The counters, summed over the shards.
    #[cfg(test)]
    pub fn totals(&self) -> Totals {
        self.settle();
        let mut t = Totals::default();
        for shard in self.shards.iter() {
            t.add(&shard.lock().counts);
        }
        t.add(&self.mappings.lock().counts);
        self.shared_totals(&mut t);
        t
    }

    fn shared_totals(&self, t: &mut Totals) {
        t.failed_allocations = self.failed_allocations.load(Relaxed);
        t.dropped_events = self.dropped_events.load(Relaxed);
        t.live_bytes = self.shared.live_bytes.load(Relaxed);
        t.peak_live_bytes = self
            .shared
            .peak_live_bytes
            .load(Relaxed)
            .max(self.shared.earlier_peak.load(Relaxed));
    }

    /// Starts a new peak window at what is live now (a test harness measuring one test's
    /// peak). The process's peak, which dumps report, is kept apart: no allocation pays for it.
    pub fn restart_peak(&self) {
        self.settle();
        let live = self.shared.live_bytes.load(Relaxed);
        let before = self.shared.peak_live_bytes.swap(live, Relaxed);
        self.shared.earlier_peak.fetch_max(before, Relaxed);
    }

    /// The most bytes live at once since the window began ([`Table::restart_peak`]), or since
    /// the process started.
    pub fn window_peak(&self) -> u64 {
        self.settle();
        self.shared.peak_live_bytes.load(Relaxed)
    }

    /// The live blocks allocated after sequence number `after`, and the bytes they hold.
    pub fn live_after(&self, after: u64) -> Counts {
        self.settle();
        let mut c = Counts::default();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for (s, map) in shard.live.iter().enumerate() {
                for b in map.values().filter(|b| b.seq > after) {
                    c.blocks += 1;
                    c.bytes += held(ALL_SPACES[s], b);
                }
            }
        }
        for x in self.mappings.lock().live.values() {
            if x.block.seq > after {
                c.blocks += 1;
                c.bytes += x.holds;
            }
        }
        c
    }

    /// Copies the live blocks (ordered by sequence number), the events, and how far each stack
    /// dipped below what it holds now since the last snapshot. `snapshot` (a snapshot dump, not
    /// the last) starts the next interval: each stack's floor becomes what it holds now.
    ///
    /// A stack's floor is the sum of its floors in the shards, taken independently: at most its
    /// true floor (the shards may bottom out at different moments), and at least what it kept
    /// through the whole interval, which is what growth is judged on.
    ///
    /// The last dump (`snapshot` false) first waits, up to [`LAST_DUMP_WAIT_MS`], for the
    /// numbers taken before it to be written: another thread may be between taking its number
    /// and writing its entry (a few instructions, unless it was preempted there), and the fold
    /// stops at the first number not written.
    pub fn snapshot(&self, snapshot: bool) -> Snapshot {
        if snapshot {
            self.settle();
        } else {
            self.settle_through(self.seq_now(), Some(LAST_DUMP_WAIT_MS));
        }
        let mut live = Vec::new();
        let mut totals = Totals::default();
        let mut dips: HashMap<StackId, Counts> = HashMap::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for (s, map) in shard.live.iter().enumerate() {
                let space = ALL_SPACES[s];
                live.extend(map.iter().map(|(&addr, &block)| Live {
                    space,
                    addr,
                    block,
                    held: held(space, &block),
                }));
            }
            totals.add(&shard.counts);
            for (&stack, h) in shard.by_stack.iter_mut() {
                let dip = h.dip();
                if dip != Counts::default() {
                    dips.entry(stack).or_default().add(dip);
                }
                if snapshot {
                    h.restart_floor();
                }
            }
        }
        {
            let m = self.mappings.lock();
            live.extend(m.live.iter().map(|(&addr, x)| Live {
                space: Space::Mapped,
                addr,
                block: x.block,
                held: x.holds,
            }));
            totals.add(&m.counts);
        }
        live.sort_unstable_by_key(|l| l.block.seq);
        self.shared_totals(&mut totals);
        Snapshot {
            live,
            events: self.events.lock().clone(),
            totals,
            dips,
            finalizing: self.finalizing.lock().clone(),
        }
    }
}

const _: () = assert!(std::mem::size_of::<Block>() == 32);

#[cfg(test)]
mod tests;
