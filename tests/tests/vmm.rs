//! Physical allocations (cuMemCreate/cuMemRelease) used through a reserved, mapped range, as
//! PyTorch's expandable segments and JAX do: one record per physical allocation (kind
//! `physical`), per reservation (`reserved`) and per mapping (`mapped`), and the memory counted
//! once: reservations and mappings hold no bytes of their own, and an allocation released while
//! still mapped is held by a mapping until its last one goes.

use cudaleak_format::{Dump, EventType, Kind, LiveRecord};
use cudaleak_tests::{assert_site, summary, Scenario};

const MIB: u64 = 1 << 20;

/// The one live record of `kind` and `size`, with what it holds, at its site.
fn live<'a>(
    dump: &'a Dump,
    name: &str,
    kind: Kind,
    size: u64,
    site: (&str, &str),
) -> &'a LiveRecord {
    let hits: Vec<&LiveRecord> = dump
        .live
        .iter()
        .filter(|r| r.kind == kind && r.size == size)
        .collect();
    let [r] = hits.as_slice() else {
        panic!(
            "one {kind:?} record of {size} bytes expected: {:#?}",
            dump.live
        );
    };
    assert_site(dump, r.stack, name, site.0, site.1);
    r
}

#[test]
fn a_reservation_its_mapping_and_the_physical_allocation_are_recorded_memory_once() {
    Scenario::new("vmm")
        .run_plain()
        .assert_exit(0)
        .assert_stdout("granularity=2097152 mapped=17\n");
    let run = Scenario::new("vmm").run_shim();
    run.assert_exit(0)
        .assert_stdout("granularity=2097152 mapped=17\n");
    let dump = run.dump();
    let two_mib = 2 * MIB;
    // Reserve, two creates, two maps; one unmap, one release.
    assert_eq!(
        dump.summary,
        summary(5, 2, 0, 0, 0, 3, two_mib, 2 * two_mib, 2 * two_mib)
    );
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    let r = live(
        &dump,
        "vmm",
        Kind::Reserved,
        4 * two_mib,
        ("reserve_pool", "vmm_reserve"),
    );
    assert_eq!(
        (r.api.as_str(), r.bytes_held, r.device),
        ("cuMemAddressReserve", Some(0), None)
    );
    let p = live(
        &dump,
        "vmm",
        Kind::Physical,
        two_mib,
        ("create_kept", "vmm_kept"),
    );
    assert_eq!(
        (p.api.as_str(), p.bytes_held, p.device),
        ("cuMemCreate", None, Some(0))
    );
    let m = live(
        &dump,
        "vmm",
        Kind::Mapped,
        two_mib,
        ("map_chunk", "vmm_map"),
    );
    assert_eq!(
        (m.api.as_str(), m.bytes_held, m.device),
        ("cuMemMap", Some(0), Some(0))
    );
}

#[test]
fn memory_released_while_mapped_is_held_by_its_mappings_until_the_last_unmap() {
    let run = Scenario::new("vmm_released").arg("leak").run_shim();
    run.assert_exit(0)
        .assert_stdout("unmapped 2 in one call\nleft 1 mapping\n");
    let dump = run.dump();
    // Reserve, create A (2 MiB) and B (4 MiB), map A once and B twice: 6 MiB at most. A is
    // gone with its mapping; B's 4 MiB live on in its second mapping.
    assert_eq!(
        dump.summary,
        summary(6, 4, 0, 0, 0, 2, 4 * MIB, 6 * MIB, 6 * MIB)
    );
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    let r = live(
        &dump,
        "vmm_released",
        Kind::Reserved,
        16 * MIB,
        ("reserve", "released_reserve"),
    );
    assert_eq!(r.bytes_held, Some(0));
    let m = live(
        &dump,
        "vmm_released",
        Kind::Mapped,
        4 * MIB,
        ("map_b_again", "released_map_b_again"),
    );
    assert_eq!(m.bytes_held, None, "it holds B's 4 MiB: its own size");
    assert_eq!(m.device, Some(0));
}

#[test]
fn unmapping_everything_frees_released_memory_and_a_second_unmap_is_a_double_free() {
    let run = Scenario::new("vmm_released").arg("free").run_shim();
    run.assert_exit(0)
        .assert_stdout("unmapped 2 in one call\nleft 1 mapping\nsecond unmap rc=1\nfreed all\n");
    let dump = run.dump();
    assert_eq!(dump.summary, summary(6, 6, 0, 0, 1, 0, 0, 6 * MIB, 6 * MIB));
    assert!(dump.live.is_empty(), "{:#?}", dump.live);
    let [e] = dump.events.as_slice() else {
        panic!("one event expected: {:#?}", dump.events);
    };
    assert_eq!(
        (e.kind, e.api.as_str(), e.error),
        (EventType::DoubleFree, "cuMemUnmap", Some(1))
    );
    assert_site(
        &dump,
        e.stack,
        "vmm_released",
        "main",
        "released_second_unmap",
    );
    let alloc = e.alloc_stack.expect("where the mapping was made");
    assert_site(&dump, alloc, "vmm_released", "map_a", "released_map_a");
}
