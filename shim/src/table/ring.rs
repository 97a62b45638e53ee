//! The pending ring: allocations and frees on their way into the table, in the one sequence's
//! order. Every number of the sequence has its slot (slot `t % SLOTS` for number `t`), written by
//! the thread that took the number and read by whichever thread folds the ring into the table
//! (`Table::settle`). So a hooked call writes one slot, a cache line of its own that the next
//! call's neighbour shares with no one, instead of finding a shard, its lock, two hash maps and
//! the shared counters cold after the driver's own work (docs/performance.md: the table was
//! two thirds of what recording cost a pair on the GPU).
//!
//! A slot's state word says which number may write it next (`t`), and that `t` wrote it
//! (`t | PUBLISHED`); the fold, having read `t`, hands the slot to `t + SLOTS`. A writer whose
//! slot still holds an entry not yet folded makes room first (the ring is full). Safe Rust: the
//! entry's words are atomics, written before the state word's release and read after its
//! acquire (plain moves on x86-64).

use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use crate::api::Api;
use crate::stack::StackId;

use super::Block;

/// Slots in the ring: entries a fold takes at most at once (64 bytes each).
pub const SLOTS: u64 = 4096;
const PUBLISHED: u64 = 1 << 63;

const NOP: u64 = 0;
const ALLOC: u64 = 1;
const FREE: u64 = 2;

/// One entry of the ring, as its writer made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A number taken for something kept elsewhere (an event, a handle, a direct record).
    Nop,
    /// A successful allocation: `block.seq` is the entry's number.
    Alloc {
        space: usize,
        addr: u64,
        block: Block,
    },
    /// A free about to be forwarded (its number is the free's place in the sequence).
    Free { space: usize, addr: u64 },
}

/// One cache line: the state word and the entry.
#[repr(align(64))]
struct Slot {
    state: AtomicU64,
    words: [AtomicU64; 5],
}

pub struct Ring {
    slots: Box<[Slot]>,
}

impl Default for Ring {
    fn default() -> Self {
        let ring = Ring {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    state: AtomicU64::new(0),
                    words: Default::default(),
                })
                .collect(),
        };
        ring.reset(1);
        ring
    }
}

impl Ring {
    #[inline]
    fn slot(&self, ticket: u64) -> &Slot {
        &self.slots[(ticket % SLOTS) as usize]
    }

    /// Empties the ring for numbers from `first` on (the entries left in it are dropped).
    pub fn reset(&self, first: u64) {
        for (i, slot) in self.slots.iter().enumerate() {
            // The first number at or after `first` that falls on this slot.
            let i = i as u64;
            let ticket = first + (i + SLOTS - first % SLOTS) % SLOTS;
            slot.state.store(ticket, Release);
        }
    }

    /// Whether number `ticket` may write its slot now (the entry of `ticket - SLOTS` was folded).
    #[inline]
    pub fn has_room(&self, ticket: u64) -> bool {
        self.slot(ticket).state.load(Acquire) == ticket
    }

    /// Writes `entry` as number `ticket`'s; the slot must have room ([`Ring::has_room`]).
    ///
    /// Then asks for the next slot's line, to write: the next call is likely this thread's
    /// next number, and between the two the driver's own work leaves the caches cold; the
    /// line comes (from the fold's core, which read it last) while the driver works.
    #[inline]
    pub fn publish(&self, ticket: u64, entry: Entry) {
        let slot = self.slot(ticket);
        debug_assert!(slot.state.load(Relaxed) == ticket);
        let words = encode(entry);
        for (w, v) in slot.words.iter().zip(words) {
            w.store(v, Relaxed);
        }
        slot.state.store(ticket | PUBLISHED, Release);
        crate::hint::prefetch_for_write(self.slot(ticket + 1));
    }

    /// Number `ticket`'s entry, if it was written, and its slot handed to `ticket + SLOTS`.
    /// `None` when `ticket` has not written it yet. Called by one thread at a time (the fold).
    #[inline]
    pub fn take(&self, ticket: u64) -> Option<Entry> {
        let slot = self.slot(ticket);
        if slot.state.load(Acquire) != ticket | PUBLISHED {
            return None;
        }
        let mut words = [0; 5];
        for (v, w) in words.iter_mut().zip(&slot.words) {
            *v = w.load(Relaxed);
        }
        slot.state.store(ticket + SLOTS, Release);
        Some(decode(ticket, words))
    }
}

#[inline]
fn encode(entry: Entry) -> [u64; 5] {
    match entry {
        Entry::Nop => [NOP, 0, 0, 0, 0],
        Entry::Free { space, addr } => [FREE | (space as u64) << 8, addr, 0, 0, 0],
        Entry::Alloc { space, addr, block } => [
            ALLOC
                | (space as u64) << 8
                | u64::from(block.api as u8) << 16
                | u64::from(block.device as u16) << 32,
            addr,
            block.size,
            u64::from(block.stack.0) | u64::from(block.thread) << 32,
            u64::from(block.time_ms),
        ],
    }
}

#[inline]
fn decode(ticket: u64, w: [u64; 5]) -> Entry {
    let space = (w[0] >> 8 & 0xff) as usize;
    match w[0] & 0xff {
        ALLOC => Entry::Alloc {
            space,
            addr: w[1],
            block: Block {
                size: w[2],
                seq: ticket,
                stack: StackId(w[3] as u32),
                time_ms: w[4] as u32,
                thread: (w[3] >> 32) as u32,
                device: (w[0] >> 32) as u16 as i16,
                api: Api::from_index((w[0] >> 16) as u8),
            },
        },
        FREE => Entry::Free { space, addr: w[1] },
        _ => Entry::Nop,
    }
}
