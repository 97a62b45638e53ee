//! The table's part in a fork: its mutexes, listed once, in the order a fork takes them (the
//! fold lock first: a fold holds it while it takes the shards'), which `lock::ForkLocked`'s
//! steps walk; and the child's fresh start. Safe Rust.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering::Relaxed;

use super::mappings::Mappings;
use super::{Shard, Table};
use crate::lock::{ForkLock, ForkLocked};

impl ForkLocked for Table {
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock)) {
        f(&self.fold);
        for shard in self.shards.iter() {
            f(&**shard);
        }
        f(&self.mappings);
        f(&self.events);
        f(&self.finalizing);
    }

    /// In a child made without fork(), once every lock is abandoned (`lock::abandon`: everything
    /// empty, the parent's records left behind unread and unfreed): the ring's entries too.
    fn abandoned(&self) {
        self.empty_ring();
    }
}

impl Table {
    /// Drops the ring's entries (the parent's, in a child): the child's numbers start after
    /// the last one taken.
    fn empty_ring(&self) {
        let first = self.seq_now() + 1;
        *self.fold.lock() = first;
        self.ring.reset(first);
    }

    /// Empties everything: a forked child starts with nothing of its parent's.
    pub fn clear(&self) {
        self.empty_ring();
        for shard in self.shards.iter() {
            *shard.lock() = Shard::default();
        }
        *self.mappings.lock() = Mappings::default();
        self.events.lock().clear();
        *self.finalizing.lock() = None;
        self.finalizing_noted.store(false, Relaxed);
        // The sequence goes on: a child's records follow its parent's.
        for counter in [
            &self.shared.live_bytes,
            &self.shared.peak_live_bytes,
            &self.shared.earlier_peak,
            &self.failed_allocations,
            &self.dropped_events,
        ] {
            counter.store(0, Relaxed);
        }
    }
}
