//! What each stack holds, per shard: now, and its floor since the last snapshot (what growth is
//! judged on), kept as blocks come and go; and what every stack held when the Python interpreter
//! began to shut down. Safe Rust; each shard's counts live under the shard's lock.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

use super::{Shard, Table};
use crate::api::Api;
use crate::stack::StackId;

/// Blocks and bytes (`held` bytes, as `live_bytes` counts them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub blocks: u64,
    pub bytes: u64,
}

impl Counts {
    pub(super) fn add(&mut self, o: Counts) {
        self.blocks += o.blocks;
        self.bytes += o.bytes;
    }
}

/// One stack in one shard: what it holds now and its floor since the last snapshot. 32 bytes
/// (40 with its key): every shard keeps one per stack that holds blocks in it, so a program
/// with a thousand call sites has 64 000 of them. Block counts are per stack and shard: 32 bits.
#[derive(Clone, Copy, Debug)]
pub(super) struct Holding {
    now_bytes: u64,
    floor_bytes: u64,
    now_blocks: u32,
    floor_blocks: u32,
    /// The call that made its last block (a stack makes one kind, in practice).
    api: Api,
}

const _: () = assert!(std::mem::size_of::<Holding>() == 32);

impl Holding {
    fn now(&self) -> Counts {
        Counts {
            blocks: self.now_blocks.into(),
            bytes: self.now_bytes,
        }
    }

    fn floor(&self) -> Counts {
        Counts {
            blocks: self.floor_blocks.into(),
            bytes: self.floor_bytes,
        }
    }

    /// How far below what it holds now the stack went since the last snapshot.
    pub(super) fn dip(&self) -> Counts {
        Counts {
            blocks: (self.now_blocks - self.floor_blocks).into(),
            bytes: self.now_bytes - self.floor_bytes,
        }
    }

    /// A snapshot starts the next interval: the floor is what is held now.
    pub(super) fn restart_floor(&mut self) {
        self.floor_blocks = self.now_blocks;
        self.floor_bytes = self.now_bytes;
    }
}

impl Shard {
    pub(super) fn hold(&mut self, stack: StackId, bytes: u64, api: Api) {
        let h = self.by_stack.entry(stack).or_insert(Holding {
            now_bytes: 0,
            floor_bytes: 0,
            now_blocks: 0,
            floor_blocks: 0,
            api,
        });
        h.api = api;
        h.now_blocks = h.now_blocks.saturating_add(1);
        h.now_bytes += bytes;
    }

    pub(super) fn release(&mut self, stack: StackId, bytes: u64) {
        let Some(h) = self.by_stack.get_mut(&stack) else {
            return;
        };
        h.now_blocks = h.now_blocks.saturating_sub(1);
        h.now_bytes = h.now_bytes.saturating_sub(bytes);
        if h.now_blocks == 0 {
            // Nothing held, so the floor is nothing too: the entry says no more than its absence.
            self.by_stack.remove(&stack);
            return;
        }
        h.floor_blocks = h.floor_blocks.min(h.now_blocks);
        h.floor_bytes = h.floor_bytes.min(h.now_bytes);
    }
}

/// The table at the moment the Python interpreter began to shut down: what the script still
/// held when it ended, apart from what teardown freed after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finalizing {
    pub unix_ms: u64,
    /// The sequence number then: later blocks were allocated during teardown.
    pub seq: u64,
    /// Per stack: held then, the floor since the last snapshot up to then, and its call.
    pub held: HashMap<StackId, (Counts, Counts, Api)>,
}

impl Table {
    /// Whether [`Table::note_finalizing`] noted the moment.
    pub fn finalizing_noted(&self) -> bool {
        self.finalizing_noted.load(Relaxed)
    }

    /// Notes, once, what every stack holds now and its floor so far: the Python interpreter
    /// began to shut down (`unix_ms`, sequence number `seq`). False if it was noted before.
    /// (Mappings are left out: they hold what their physical allocation's record counts.)
    pub fn note_finalizing(&self, unix_ms: u64, seq: u64) -> bool {
        if self.finalizing.lock().is_some() {
            return false;
        }
        self.settle();
        let mut held: HashMap<StackId, (Counts, Counts, Api)> = HashMap::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for (&stack, h) in shard.by_stack.iter() {
                let e = held
                    .entry(stack)
                    .or_insert((Counts::default(), Counts::default(), h.api));
                e.0.add(h.now());
                e.1.add(h.floor());
            }
        }
        let mut f = self.finalizing.lock();
        if f.is_some() {
            return false;
        }
        *f = Some(Finalizing { unix_ms, seq, held });
        self.finalizing_noted.store(true, Relaxed);
        true
    }
}
