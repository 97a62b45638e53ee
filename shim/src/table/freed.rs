//! The table's memory of recent frees, per shard (and for the mappings): what tells a double
//! free from an invalid one, and what a free that then fails puts back. Safe Rust, no lock of
//! its own: each ring lives under the lock of its shard.
#![forbid(unsafe_code)]

use super::Block;
use crate::stack::StackId;

/// Frees of tracked blocks remembered per shard, for telling double frees from invalid ones.
pub(super) const FREED_PER_SHARD: usize = 128;

/// The last [`FREED_PER_SHARD`] frees in a shard, oldest overwritten first: each tracked block
/// freed (kept whole, so a free that then fails puts it back), and each free of an address the
/// table did not know (a marker: a failed free after it does not repeat an older one).
/// Written once per free (one slot, no hashing), searched only when a free fails.
#[derive(Default)]
pub(super) struct FreedRing {
    entries: Vec<Freed>,
    next: usize,
}

#[derive(Clone, Copy)]
pub(super) struct Freed {
    addr: u64,
    /// The free's number in the sequence: 0 for a free recorded without the ring.
    ticket: u64,
    /// The block freed; `None` for the free of an address the table did not know.
    pub(super) block: Option<Block>,
    space: u8,
}

impl FreedRing {
    pub(super) fn push(&mut self, space: usize, addr: u64, ticket: u64, block: Option<Block>) {
        let e = Freed {
            addr,
            ticket,
            block,
            space: space as u8,
        };
        if self.entries.len() < FREED_PER_SHARD {
            self.entries.push(e);
        } else {
            self.entries[self.next] = e;
        }
        self.next = (self.next + 1) % FREED_PER_SHARD;
    }

    /// Newest first: the slots before `next` (this lap) backwards, then the rest (the last lap).
    fn newest_first(&mut self) -> impl Iterator<Item = &mut Freed> {
        let split = self.next.min(self.entries.len());
        let (this_lap, last_lap) = self.entries.split_at_mut(split);
        this_lap.iter_mut().rev().chain(last_lap.iter_mut().rev())
    }

    /// Where the last tracked block freed at `addr` had been allocated (none when the last free
    /// there was of an address the table did not know).
    pub(super) fn find(&mut self, space: usize, addr: u64) -> Option<StackId> {
        self.newest_first()
            .find(|e| e.addr == addr && usize::from(e.space) == space)
            .and_then(|e| e.block)
            .map(|b| b.stack)
    }

    /// Takes out the entry free number `ticket` made at `addr`, if it is still remembered.
    pub(super) fn take_ticket(&mut self, space: usize, addr: u64, ticket: u64) -> Option<Freed> {
        let e = self
            .newest_first()
            .find(|e| e.ticket == ticket && e.addr == addr && usize::from(e.space) == space)?;
        let taken = *e;
        e.addr = 0;
        Some(taken)
    }

    /// Forgets `addr`: a block we did not track was freed there since.
    pub(super) fn forget(&mut self, space: usize, addr: u64) {
        for e in self.newest_first() {
            if e.addr == addr && usize::from(e.space) == space {
                e.addr = 0;
            }
        }
    }
}
