//! Mappings (`cuMemMap`), kept apart from the shards: an unmap names a range, not a key, and a
//! mapping holds memory only once its physical allocation was released while still mapped.
//! Safe Rust; one lock (`Table::mappings`), never held while calling out.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use super::freed::FreedRing;
use super::{Block, FreeOutcome, Table, Totals, SPACES};

/// The physical allocation a mapping maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maps {
    /// By its `CUmemGenericAllocationHandle`, while the program holds it.
    Handle(u64),
    /// Released by the program, named by its record's sequence number from then on: the
    /// driver may give the same handle value to a new allocation.
    Released(u64),
}

/// One `cuMemMap`: `block.size` is the mapped range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub block: Block,
    pub maps: Maps,
    /// Bytes of memory this mapping keeps allocated: 0 while its physical allocation is live
    /// (that record counts them); once the program released the allocation while it was still
    /// mapped (legal: the memory lives until its last mapping goes), one of its mappings holds
    /// the allocation's size.
    pub holds: u64,
}

/// The live mappings by start address, their recent unmaps and their counters.
#[derive(Default)]
pub(super) struct Mappings {
    pub(super) live: BTreeMap<u64, Mapping>,
    pub(super) freed: FreedRing,
    pub(super) counts: Totals,
}

/// The index `Mappings::freed` files unmaps under (the ring holds one space only).
const MAPPED_RING: usize = SPACES;

impl Mappings {
    /// The physical allocation `handle` (record `seq`, `bytes` big) was released: its mappings
    /// now map a released allocation, and the one at the lowest address holds its bytes. False
    /// if it had no mapping left: the bytes are freed.
    pub(super) fn released(&mut self, handle: u64, seq: u64, bytes: u64) -> bool {
        let mut held = false;
        for m in self.live.values_mut() {
            if m.maps == Maps::Handle(handle) {
                m.maps = Maps::Released(seq);
                if !held {
                    m.holds += bytes;
                    held = true;
                }
            }
        }
        held
    }

    /// Gives `bytes` held by an unmapped mapping to another live mapping of the same released
    /// allocation (the lowest address); false if none is left, and the bytes are freed.
    fn hand_over(&mut self, maps: Maps, bytes: u64) -> bool {
        match self.live.values_mut().find(|m| m.maps == maps) {
            Some(m) => {
                m.holds += bytes;
                true
            }
            None => false,
        }
    }
}

impl Table {
    /// Records a successful `cuMemMap` of `handle` at `addr` (`block.size` bytes of range).
    /// It holds no memory of its own: the physical allocation's record counts it.
    pub fn mapped(&self, addr: u64, handle: u64, block: Block) {
        self.settle();
        let mut m = self.mappings.lock();
        m.counts.allocations += 1;
        let old = m.live.insert(
            addr,
            Mapping {
                block,
                maps: Maps::Handle(handle),
                holds: 0,
            },
        );
        if let Some(old) = old {
            // Mapped again without us seeing the unmap: the old mapping is gone.
            drop(m);
            self.sub_live(old.holds);
        }
    }

    /// Forgets, before the real `cuMemUnmap(addr, size)` runs, every mapping that starts in
    /// the range (one unmap may cover several). Pass the result to [`Table::unmap_finished`].
    pub fn take_mappings(&self, addr: u64, size: u64) -> Vec<(u64, Mapping)> {
        self.settle();
        let end = addr.saturating_add(size.max(1));
        let mut m = self.mappings.lock();
        let starts: Vec<u64> = m.live.range(addr..end).map(|(&a, _)| a).collect();
        let taken: Vec<(u64, Mapping)> = starts
            .into_iter()
            .filter_map(|a| m.live.remove(&a).map(|x| (a, x)))
            .collect();
        m.counts.frees += taken.len() as u64;
        drop(m);
        let holds: u64 = taken.iter().map(|(_, x)| x.holds).sum();
        self.sub_live(holds);
        taken
    }

    /// Settles an unmap once the real call has answered, as [`Table::free_finished`] does a free.
    /// Memory a taken mapping held goes to another mapping of the same physical allocation if
    /// one is left, else it is freed with this unmap.
    pub fn unmap_finished(
        &self,
        addr: u64,
        taken: Vec<(u64, Mapping)>,
        succeeded: bool,
    ) -> FreeOutcome {
        self.settle();
        let mut m = self.mappings.lock();
        if taken.is_empty() {
            return if succeeded {
                m.freed.forget(MAPPED_RING, addr);
                m.counts.untracked_frees += 1;
                FreeOutcome::Untracked
            } else {
                m.counts.invalid_frees += 1;
                match m.freed.find(MAPPED_RING, addr) {
                    Some(stack) => FreeOutcome::DoubleFree(stack),
                    None => FreeOutcome::InvalidFree,
                }
            };
        }
        let mut restored = 0;
        if succeeded {
            for (a, x) in &taken {
                m.freed.push(MAPPED_RING, *a, 0, Some(x.block));
                if x.holds > 0 && m.hand_over(x.maps, x.holds) {
                    restored += x.holds;
                }
            }
        } else {
            // Still mapped as far as the driver is concerned: put them back.
            m.counts.frees -= taken.len() as u64;
            for (a, x) in taken {
                restored += x.holds;
                m.live.entry(a).or_insert(x);
            }
        }
        drop(m);
        self.add_live(restored);
        if succeeded {
            FreeOutcome::Freed
        } else {
            FreeOutcome::Failed
        }
    }
}
