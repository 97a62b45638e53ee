//! Unit tests of the table (in their own file: the table itself is long enough).

use super::freed::FREED_PER_SHARD;
use super::*;
use crate::lock::ForkLocked;

fn block(size: u64, seq: u64) -> Block {
    Block {
        size,
        seq,
        stack: StackId(seq as u32),
        time_ms: 0,
        thread: 1,
        device: 0,
        api: Api::cudaMalloc,
    }
}

fn free(t: &Table, addr: u64, ok: bool) -> FreeOutcome {
    let taken = t.take(Space::Device, addr);
    t.free_finished(Space::Device, addr, taken, ok)
}

/// A device allocation through the ring, made on this thread.
fn alloc_soon(t: &Table, addr: u64, block: Block) -> u64 {
    crate::thread::with(|th| t.allocated_soon(th, Space::Device, addr, block))
}

/// A device free's entry in the ring, written on this thread.
fn free_entry(t: &Table, addr: u64) -> u64 {
    crate::thread::with(|th| t.freeing_soon(th, Space::Device, addr))
}

#[test]
fn a_child_made_without_fork_gets_back_the_locks_a_gone_thread_held() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 1));
    assert!(!t.abandon_all(), "nothing held");
    assert!(
        t.snapshot(false).live.is_empty(),
        "the parent's records are left behind"
    );
    t.allocated(Space::Device, 0x1000, block(256, 1));
    // A thread of the parent was recording an event at the fork.
    std::mem::forget(t.events.lock());
    assert!(t.abandon_all());
    // Every lock held for good: every lock usable again.
    t.lock_all();
    assert!(t.abandon_all());
    assert!(t.snapshot(false).live.is_empty());
    t.allocated(Space::Device, 0x2000, block(512, 2));
    assert_eq!(t.snapshot(false).live.len(), 1);
}

#[test]
fn alloc_then_free_leaves_nothing_live() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 1));
    t.allocated(Space::Device, 0x2000, block(512, 2));
    assert_eq!(free(&t, 0x1000, true), FreeOutcome::Freed);
    let snap = t.snapshot(false);
    assert_eq!(snap.live.len(), 1);
    assert_eq!(snap.live[0].addr, 0x2000);
    let c = t.totals();
    assert_eq!(c.live_bytes, 512);
    assert_eq!(c.peak_live_bytes, 768);
    assert_eq!(c.bytes_allocated, 768);
    assert_eq!((c.allocations, c.frees), (2, 1));
}

#[test]
fn failed_free_of_freed_address_is_a_double_free_with_its_alloc_stack() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 7));
    assert_eq!(free(&t, 0x1000, true), FreeOutcome::Freed);
    assert_eq!(free(&t, 0x1000, false), FreeOutcome::DoubleFree(StackId(7)));
    assert_eq!(free(&t, 0x9000, false), FreeOutcome::InvalidFree);
    assert_eq!(t.totals().invalid_frees, 2);
}

#[test]
fn a_double_free_names_the_latest_allocation_at_that_address() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 1));
    free(&t, 0x1000, true);
    t.allocated(Space::Device, 0x1000, block(256, 2));
    free(&t, 0x1000, true);
    t.allocated(Space::Device, 0x1000, block(256, 3));
    assert_eq!(free(&t, 0x1000, true), FreeOutcome::Freed);
    assert_eq!(free(&t, 0x1000, false), FreeOutcome::DoubleFree(StackId(3)));
}

#[test]
fn freed_history_keeps_the_newest_and_forgets_the_oldest() {
    let t = Table::default();
    // Far more frees than any shard remembers; addresses spread over every shard.
    for i in 0..(SHARDS * FREED_PER_SHARD * 4) as u64 {
        let addr = 0x1000 + i * 256;
        t.allocated(Space::Device, addr, block(256, i));
        assert_eq!(free(&t, addr, true), FreeOutcome::Freed);
    }
    let last = 0x1000 + (SHARDS * FREED_PER_SHARD * 4 - 1) as u64 * 256;
    let n = (SHARDS * FREED_PER_SHARD * 4 - 1) as u32;
    assert_eq!(free(&t, last, false), FreeOutcome::DoubleFree(StackId(n)));
    assert_eq!(
        free(&t, 0x1000, false),
        FreeOutcome::InvalidFree,
        "long forgotten"
    );
}

#[test]
fn an_untracked_free_clears_the_history_of_its_address() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 1));
    free(&t, 0x1000, true);
    assert_eq!(free(&t, 0x1000, true), FreeOutcome::Untracked);
    assert_eq!(free(&t, 0x1000, false), FreeOutcome::InvalidFree);
}

#[test]
fn a_free_in_flight_is_already_counted_so_snapshots_stay_consistent() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 1));
    t.allocated(Space::Device, 0x2000, block(256, 2));
    let taken = t.take(Space::Device, 0x1000);
    let snap = t.snapshot(false);
    assert_eq!(
        snap.totals.allocations - snap.totals.frees,
        snap.live.len() as u64
    );
    assert_eq!(snap.live.len(), 1);
    t.free_finished(Space::Device, 0x1000, taken, false);
    let snap = t.snapshot(false);
    assert_eq!(
        (snap.totals.frees, snap.live.len()),
        (0, 2),
        "a failed free is uncounted"
    );
}

#[test]
fn failed_free_of_live_block_keeps_it_live() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(256, 1));
    assert_eq!(free(&t, 0x1000, false), FreeOutcome::Failed);
    assert!(t.is_live(Space::Device, 0x1000));
    assert_eq!(t.totals().live_bytes, 256);
    assert_eq!(t.totals().frees, 0);
}

#[test]
fn successful_free_of_unknown_address_is_untracked() {
    let t = Table::default();
    assert_eq!(free(&t, 0x4000, true), FreeOutcome::Untracked);
    assert_eq!(t.totals().untracked_frees, 1);
    assert_eq!(t.totals().frees, 0);
}

#[test]
fn spaces_do_not_alias() {
    let t = Table::default();
    t.allocated(Space::Host, 0x1000, block(64, 1));
    assert!(!t.is_live(Space::Device, 0x1000));
    assert_eq!(free(&t, 0x1000, false), FreeOutcome::InvalidFree);
    assert!(t.is_live(Space::Host, 0x1000));
}

fn unmap(t: &Table, addr: u64, size: u64, ok: bool) -> FreeOutcome {
    let taken = t.take_mappings(addr, size);
    t.unmap_finished(addr, taken, ok)
}

fn release(t: &Table, handle: u64) -> FreeOutcome {
    let taken = t.take(Space::Physical, handle);
    t.free_finished(Space::Physical, handle, taken, true)
}

const MIB2: u64 = 2 << 20;

#[test]
fn a_reservation_and_its_mappings_add_no_bytes_to_physical_memory() {
    let t = Table::default();
    t.allocated(Space::Reserved, 0x10_0000_0000, block(4 * MIB2, 1));
    t.allocated(Space::Physical, 0xa, block(MIB2, 2));
    t.mapped(0x10_0000_0000, 0xa, block(MIB2, 3));
    let c = t.totals();
    assert_eq!(
        (c.allocations, c.live_bytes, c.peak_live_bytes),
        (3, MIB2, MIB2)
    );
    assert_eq!(c.bytes_allocated, MIB2);
    let snap = t.snapshot(false);
    let held: Vec<(Space, u64, u64)> = snap
        .live
        .iter()
        .map(|l| (l.space, l.block.size, l.held))
        .collect();
    assert_eq!(
        held,
        [
            (Space::Reserved, 4 * MIB2, 0),
            (Space::Physical, MIB2, MIB2),
            (Space::Mapped, MIB2, 0)
        ]
    );
}

#[test]
fn a_physical_allocation_released_while_mapped_is_counted_once_until_its_last_unmap() {
    let t = Table::default();
    t.allocated(Space::Physical, 0xa, block(MIB2, 1));
    t.mapped(0x1000_0000, 0xa, block(MIB2, 2));
    t.mapped(0x2000_0000, 0xa, block(MIB2, 3));
    assert_eq!(release(&t, 0xa), FreeOutcome::Freed);
    assert!(!t.is_live(Space::Physical, 0xa));
    let c = t.totals();
    assert_eq!((c.live_bytes, c.peak_live_bytes, c.frees), (MIB2, MIB2, 1));
    let holding: Vec<(u64, u64)> = t
        .snapshot(false)
        .live
        .iter()
        .map(|l| (l.addr, l.held))
        .collect();
    assert_eq!(holding, [(0x1000_0000, MIB2), (0x2000_0000, 0)]);
    // The mapping that held the bytes goes first: the other one takes them over.
    assert_eq!(unmap(&t, 0x1000_0000, MIB2, true), FreeOutcome::Freed);
    assert_eq!(t.totals().live_bytes, MIB2);
    assert_eq!(t.snapshot(false).live[0].held, MIB2);
    assert_eq!(unmap(&t, 0x2000_0000, MIB2, true), FreeOutcome::Freed);
    let c = t.totals();
    assert_eq!((c.live_bytes, c.peak_live_bytes), (0, MIB2));
    assert_eq!((c.allocations, c.frees), (3, 3));
}

#[test]
fn one_unmap_covering_several_mappings_unmaps_each() {
    let t = Table::default();
    for i in 0..3u64 {
        t.allocated(Space::Physical, 0xa + i, block(MIB2, i));
        t.mapped(0x1000_0000 + i * MIB2, 0xa + i, block(MIB2, 10 + i));
    }
    t.mapped(0x1000_0000 + 3 * MIB2, 0xa, block(MIB2, 20)); // beyond the range
    assert_eq!(unmap(&t, 0x1000_0000, 3 * MIB2, true), FreeOutcome::Freed);
    assert!(!t.is_live(Space::Mapped, 0x1000_0000 + 2 * MIB2));
    assert!(t.is_live(Space::Mapped, 0x1000_0000 + 3 * MIB2));
    assert_eq!(t.totals().frees, 3);
    assert_eq!(
        unmap(&t, 0x1000_0000, 3 * MIB2, false),
        FreeOutcome::DoubleFree(StackId(10))
    );
    assert_eq!(
        unmap(&t, 0x9000_0000, MIB2, false),
        FreeOutcome::InvalidFree
    );
    assert_eq!(unmap(&t, 0x9000_0000, MIB2, true), FreeOutcome::Untracked);
}

#[test]
fn a_failed_unmap_keeps_the_mappings_and_the_memory_they_hold() {
    let t = Table::default();
    t.allocated(Space::Physical, 0xa, block(MIB2, 1));
    t.mapped(0x1000_0000, 0xa, block(MIB2, 2));
    release(&t, 0xa);
    assert_eq!(unmap(&t, 0x1000_0000, MIB2, false), FreeOutcome::Failed);
    assert!(t.is_live(Space::Mapped, 0x1000_0000));
    let c = t.totals();
    assert_eq!((c.live_bytes, c.frees, c.allocations), (MIB2, 1, 2));
    assert_eq!(unmap(&t, 0x1000_0000, MIB2, true), FreeOutcome::Freed);
    assert_eq!(t.totals().live_bytes, 0);
}

#[test]
fn a_handle_value_reused_by_a_new_allocation_is_not_the_released_one() {
    let t = Table::default();
    t.allocated(Space::Physical, 0xa, block(MIB2, 1));
    t.mapped(0x1000_0000, 0xa, block(MIB2, 2));
    release(&t, 0xa);
    // The driver hands out 0xa again, for a new allocation mapped elsewhere.
    t.allocated(Space::Physical, 0xa, block(2 * MIB2, 3));
    t.mapped(0x2000_0000, 0xa, block(2 * MIB2, 4));
    release(&t, 0xa);
    let holding: Vec<(u64, u64)> = t
        .snapshot(false)
        .live
        .iter()
        .map(|l| (l.addr, l.held))
        .collect();
    assert_eq!(holding, [(0x1000_0000, MIB2), (0x2000_0000, 2 * MIB2)]);
    // Unmapping the first frees the first allocation; the second keeps its own bytes.
    unmap(&t, 0x1000_0000, MIB2, true);
    let c = t.totals();
    assert_eq!((c.live_bytes, c.peak_live_bytes), (2 * MIB2, 3 * MIB2));
}

#[test]
fn a_released_allocation_that_is_not_mapped_is_simply_freed() {
    let t = Table::default();
    t.allocated(Space::Physical, 0xa, block(MIB2, 1));
    t.mapped(0x1000_0000, 0xb, block(MIB2, 2)); // another allocation's mapping
    release(&t, 0xa);
    assert_eq!(t.totals().live_bytes, 0);
    assert_eq!(t.snapshot(false).live[0].held, 0);
}

#[test]
fn a_registered_pointer_is_not_a_host_block() {
    let t = Table::default();
    t.allocated(Space::Registered, 0x1000, block(64, 1));
    let taken = t.take(Space::Host, 0x1000);
    assert_eq!(
        t.free_finished(Space::Host, 0x1000, taken, false),
        FreeOutcome::InvalidFree
    );
    assert!(t.is_live(Space::Registered, 0x1000));
}

#[test]
fn events_beyond_the_cap_are_counted_not_stored() {
    let t = Table::default();
    let e = EventRecord {
        kind: EventType::InvalidFree,
        api: Api::cudaFree,
        address: Some(1),
        size: None,
        error: Some(1),
        seq: 0,
        stack: StackId(0),
        alloc_stack: None,
        during_exit: false,
    };
    for _ in 0..MAX_EVENTS + 5 {
        t.event(e.clone());
    }
    assert_eq!(t.snapshot(false).events.len(), MAX_EVENTS);
    assert_eq!(t.totals().dropped_events, 5);
}

#[test]
fn counts_are_exact_with_many_threads() {
    let t = Table::default();
    std::thread::scope(|s| {
        for th in 0..8u64 {
            let t = &t;
            s.spawn(move || {
                for i in 0..10_000u64 {
                    let addr = (th << 32) | (i << 8);
                    t.allocated(Space::Device, addr, block(16, i));
                    if i % 10 != 0 {
                        free(t, addr, true);
                    }
                }
            });
        }
    });
    let c = t.totals();
    assert_eq!((c.allocations, c.frees), (80_000, 72_000));
    assert_eq!(t.snapshot(false).live.len(), 8_000);
    assert_eq!(c.live_bytes, 8_000 * 16);
    assert_eq!(c.bytes_allocated, 80_000 * 16);
}

fn at(stack: u32, size: u64, seq: u64) -> Block {
    Block {
        stack: StackId(stack),
        ..block(size, seq)
    }
}

/// How far stack `id` dipped below what it holds now.
fn dip(snap: &Snapshot, id: u32) -> Counts {
    snap.dips.get(&StackId(id)).copied().unwrap_or_default()
}

#[test]
fn a_block_in_flight_at_the_snapshot_leaves_the_floor_where_it_was() {
    let t = Table::default();
    // Stack 1 keeps one block per step; stack 2's block lives one step, and one is in flight
    // when the snapshot is taken.
    for step in 0..4u64 {
        t.allocated(Space::Device, 0x10_000 + step * 0x100, at(1, 64, step));
        let a = 0x90_000 + step * 0x100;
        t.allocated(Space::Device, a, at(2, 4096, step));
        if step < 3 {
            free(&t, a, true);
        }
    }
    let snap = t.snapshot(true);
    // Both began the interval with nothing: their floor is nothing.
    assert_eq!(dip(&snap, 1).blocks, 4);
    assert_eq!(dip(&snap, 2).blocks, 1);
    // The next interval: stack 1 keeps one more; stack 2 has one in flight at each end.
    t.allocated(Space::Device, 0x10_400, at(1, 64, 10));
    let a = 0x90_400;
    t.allocated(Space::Device, a, at(2, 4096, 11));
    free(&t, 0x90_300, true);
    let snap = t.snapshot(true);
    assert_eq!(
        dip(&snap, 1),
        Counts {
            blocks: 1,
            bytes: 64
        },
        "kept: its floor is what it held when the interval began"
    );
    // Never without a block, though not the same one: the shards of the two addresses
    // bottomed out apart (one before its block came, the other after its block went), and
    // the floor counts only what was kept through the interval.
    assert_eq!(dip(&snap, 2).blocks, 1);
    free(&t, a, true);
    t.allocated(Space::Device, a, at(2, 4096, 12));
    assert_eq!(dip(&t.snapshot(true), 2).blocks, 1, "in flight: floor 0");
    // Nothing happened since: no stack dipped.
    let snap = t.snapshot(true);
    assert!(snap.dips.is_empty(), "{:?}", snap.dips);
    // Freeing the rest of stack 1 drops its entry; its blocks no longer count anywhere.
    for step in 0..5u64 {
        free(&t, 0x10_000 + step * 0x100, true);
    }
    assert!(t.snapshot(true).dips.is_empty());
    assert!(t
        .shards
        .iter()
        .all(|s| s.lock().by_stack.keys().all(|&k| k == StackId(2))));
}

#[test]
fn the_floor_counts_held_bytes_and_a_failed_free_puts_the_block_back() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, at(3, 100, 1));
    t.allocated(Space::Device, 0x2000, at(3, 100, 2));
    t.snapshot(true);
    let taken = t.take(Space::Device, 0x1000);
    assert_eq!(
        t.free_finished(Space::Device, 0x1000, taken, false),
        FreeOutcome::Failed
    );
    let snap = t.snapshot(false);
    // It was gone for a moment: the floor went down with it, and what it holds came back.
    assert_eq!(
        dip(&snap, 3),
        Counts {
            blocks: 1,
            bytes: 100
        }
    );
    // A snapshot that is not a snapshot dump leaves the interval open.
    assert_eq!(dip(&t.snapshot(false), 3).blocks, 1);
    // A reservation holds no bytes, but its block counts.
    t.allocated(Space::Reserved, 0x9000, at(4, 1 << 30, 3));
    t.allocated(Space::Reserved, 0xa000, at(4, 1 << 30, 4));
    t.snapshot(true);
    t.allocated(Space::Reserved, 0xb000, at(4, 1 << 30, 5));
    assert!(t.forget(Space::Reserved, 0x9000));
    assert!(t.forget(Space::Reserved, 0xb000));
    // Two at the start, one now, one at the least: the floor is what it holds.
    assert_eq!(dip(&t.snapshot(false), 4), Counts::default());
}

#[test]
fn finalizing_is_noted_once_with_what_each_stack_held_and_its_floor() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, at(5, 8, 1));
    t.snapshot(true);
    t.allocated(Space::Device, 0x2000, at(5, 8, 2));
    free(&t, 0x2000, true);
    t.allocated(Space::Device, 0x3000, at(5, 8, 3));
    assert!(t.note_finalizing(1234, 3));
    // Teardown frees everything; what the script held at its end stays on record.
    free(&t, 0x1000, true);
    free(&t, 0x3000, true);
    assert!(!t.note_finalizing(9999, 9), "noted once");
    let snap = t.snapshot(false);
    assert!(snap.live.is_empty());
    let f = snap.finalizing.expect("noted");
    assert_eq!((f.unix_ms, f.seq), (1234, 3));
    let two = Counts {
        blocks: 2,
        bytes: 16,
    };
    let one = Counts {
        blocks: 1,
        bytes: 8,
    };
    assert_eq!(f.held[&StackId(5)], (two, one, Api::cudaMalloc));
    t.clear();
    assert!(t.snapshot(false).finalizing.is_none());
}

#[test]
fn a_peak_window_starts_at_what_is_live_and_the_process_peak_is_kept() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(1000, 1));
    t.allocated(Space::Device, 0x2000, block(500, 2));
    assert_eq!(free(&t, 0x2000, true), FreeOutcome::Freed);
    assert_eq!(t.window_peak(), 1500);
    t.restart_peak();
    assert_eq!(t.window_peak(), 1000, "the window starts at what is live");
    t.allocated(Space::Device, 0x3000, block(200, 3));
    assert_eq!(free(&t, 0x3000, true), FreeOutcome::Freed);
    assert_eq!(t.window_peak(), 1200);
    assert_eq!(
        t.totals().peak_live_bytes,
        1500,
        "the dump's peak is the process's"
    );
}

#[test]
fn live_after_counts_only_blocks_allocated_after_the_mark() {
    let t = Table::default();
    t.allocated(Space::Device, 0x1000, block(100, 1));
    t.allocated(Space::Host, 0x2000, block(20, 2));
    t.allocated(Space::Device, 0x3000, block(3, 3));
    assert_eq!(free(&t, 0x3000, true), FreeOutcome::Freed);
    assert_eq!(
        t.live_after(0),
        Counts {
            blocks: 2,
            bytes: 120
        }
    );
    assert_eq!(
        t.live_after(1),
        Counts {
            blocks: 1,
            bytes: 20
        }
    );
    assert_eq!(t.live_after(2), Counts::default());
}

/// A free through the ring, ended as `record::free_finished` ends it.
fn free_soon(t: &Table, addr: u64, ok: bool) -> FreeOutcome {
    let ticket = free_entry(t, addr);
    if ok {
        FreeOutcome::Freed
    } else {
        t.free_failed(Space::Device, addr, ticket)
    }
}

#[test]
fn the_ring_records_allocations_and_frees_as_the_table_does() {
    let t = Table::default();
    let a = alloc_soon(&t, 0x1000, block(256, 1));
    let b = alloc_soon(&t, 0x2000, block(512, 2));
    assert!(a < b, "numbers of the one sequence");
    free_soon(&t, 0x1000, true);
    free_soon(&t, 0x9000, true);
    let snap = t.snapshot(false);
    assert_eq!(snap.live.len(), 1);
    assert_eq!((snap.live[0].addr, snap.live[0].block.seq), (0x2000, b));
    assert_eq!(snap.live[0].block, {
        let mut x = block(512, 2);
        x.seq = b;
        x
    });
    let c = snap.totals;
    assert_eq!((c.allocations, c.frees, c.untracked_frees), (2, 1, 1));
    assert_eq!((c.live_bytes, c.peak_live_bytes), (512, 768));
}

#[test]
fn a_failed_free_through_the_ring_puts_the_block_back_or_names_the_double_free() {
    let t = Table::default();
    let seq = alloc_soon(&t, 0x1000, block(256, 7));
    assert_eq!(free_soon(&t, 0x1000, false), FreeOutcome::Failed);
    let snap = t.snapshot(false);
    assert_eq!(snap.live.len(), 1);
    assert_eq!(snap.live[0].block.seq, seq, "the same block, back");
    assert_eq!((snap.totals.frees, snap.totals.live_bytes), (0, 256));
    assert_eq!(free_soon(&t, 0x1000, true), FreeOutcome::Freed);
    assert_eq!(
        free_soon(&t, 0x1000, false),
        FreeOutcome::DoubleFree(StackId(7))
    );
    assert_eq!(free_soon(&t, 0x5000, false), FreeOutcome::InvalidFree);
    let c = t.totals();
    assert_eq!(
        (c.frees, c.untracked_frees, c.invalid_frees, c.live_bytes),
        (1, 0, 2, 0)
    );
}

#[test]
fn the_peak_through_a_ring_filled_three_times_is_the_sequences() {
    let t = Table::default();
    let n = ring::SLOTS * 3 + 5;
    for i in 0..n {
        alloc_soon(&t, 0x1000 + i * 4096, block(4096, 1));
    }
    for i in 0..n {
        free_soon(&t, 0x1000 + i * 4096, true);
    }
    let c = t.totals();
    assert_eq!((c.allocations, c.frees, c.live_bytes), (n, n, 0));
    assert_eq!(c.peak_live_bytes, n * 4096);
}

#[test]
fn the_ring_gives_an_entry_only_after_it_was_written_and_hands_its_slot_on() {
    let r = Ring::default();
    let mut b = block(4096, 3);
    b.device = -1;
    b.api = Api::cuMemAllocHost_v2;
    b.time_ms = 77;
    b.thread = u32::MAX;
    assert!(r.has_room(2));
    r.publish(2, Entry::Nop);
    assert_eq!(r.take(1), None, "number 1 is not written yet");
    b.seq = 1;
    let alloc = Entry::Alloc {
        space: 1,
        addr: 0xdead_0000,
        block: b,
    };
    r.publish(1, alloc);
    assert_eq!(r.take(1), Some(alloc), "every field comes back");
    assert_eq!(r.take(2), Some(Entry::Nop));
    assert_eq!(r.take(2), None, "taken once");
    assert!(r.has_room(1 + ring::SLOTS) && r.has_room(2 + ring::SLOTS));
    assert!(!r.has_room(3 + ring::SLOTS), "number 3 has not been folded");
}

#[test]
fn a_free_numbered_before_an_allocation_at_its_address_is_folded_first() {
    // Thread B takes its free's number; the driver frees the block and gives the address to
    // thread A, whose allocation writes its entry before B writes the free's.
    let t = Table::default();
    alloc_soon(&t, 0x1000, block(256, 1));
    let free_ticket = t.shared.seq.fetch_add(1, Relaxed) + 1;
    let again = alloc_soon(&t, 0x1000, block(1024, 2));
    let snap = t.snapshot(false);
    assert_eq!(snap.live.len(), 1);
    assert_eq!(
        snap.live[0].block.size, 256,
        "folded up to the free's number only"
    );
    t.ring.publish(
        free_ticket,
        Entry::Free {
            space: 0,
            addr: 0x1000,
        },
    );
    let snap = t.snapshot(false);
    assert_eq!(snap.live.len(), 1);
    assert_eq!(
        (snap.live[0].block.seq, snap.live[0].block.size),
        (again, 1024),
        "the new block is live, the old one freed"
    );
    let c = snap.totals;
    assert_eq!((c.allocations, c.frees, c.live_bytes), (2, 1, 1024));
    assert_eq!(c.peak_live_bytes, 1024);
}

#[test]
fn threads_writing_the_ring_while_snapshots_fold_it_stay_consistent() {
    let t = std::sync::Arc::new(Table::default());
    let threads: Vec<_> = (0..4u64)
        .map(|k| {
            let t = t.clone();
            std::thread::spawn(move || {
                for round in 0..20u64 {
                    for i in 0..500u64 {
                        let addr = (k << 40) | (i + 1) << 12;
                        alloc_soon(&t, addr, block(4096, round));
                    }
                    for i in 0..500u64 {
                        free_soon(&t, (k << 40) | (i + 1) << 12, true);
                    }
                }
            })
        })
        .collect();
    while !threads.iter().all(|h| h.is_finished()) {
        let snap = t.snapshot(false);
        assert_eq!(
            snap.totals.allocations - snap.totals.frees,
            snap.live.len() as u64,
            "each shard copied with its counts"
        );
    }
    for h in threads {
        h.join().unwrap();
    }
    let c = t.totals();
    assert_eq!((c.allocations, c.frees, c.live_bytes), (40_000, 40_000, 0));
    assert!(c.peak_live_bytes <= 4 * 500 * 4096 && c.peak_live_bytes >= 500 * 4096);
}

#[test]
fn the_last_dump_waits_for_a_number_another_thread_is_still_writing() {
    let t = std::sync::Arc::new(Table::default());
    let (taken, wait) = std::sync::mpsc::channel();
    let writer = {
        let t = t.clone();
        std::thread::spawn(move || {
            // Preempted between its number and its entry: the window the last dump waits out.
            let ticket = t.shared.seq.fetch_add(1, Relaxed) + 1;
            taken.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
            let mut b = block(4096, 9);
            b.seq = ticket;
            t.ring.publish(
                ticket,
                Entry::Alloc {
                    space: 0,
                    addr: 0x7000,
                    block: b,
                },
            );
        })
    };
    wait.recv().unwrap();
    let snap = t.snapshot(false);
    writer.join().unwrap();
    assert_eq!(
        snap.live.len(),
        1,
        "the entry written while the dump waited"
    );
    assert_eq!(snap.live[0].addr, 0x7000);
}
