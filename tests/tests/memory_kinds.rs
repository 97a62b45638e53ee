//! Memory a program borrows or maps rather than allocates (issue 12): registered host memory,
//! IPC, imported pool pointers, reservations and mappings. Each driver function is reached
//! through every route the shim wraps (exported symbol, per-name dlsym, cuGetProcAddress v2 and
//! v1 by base name and version), recorded once with its kind, and forgotten by its own free.

use cudaleak_format::{EventType, Hex, Kind};
use cudaleak_tests::{assert_live, assert_site, live_of_size, summary, Expect, Scenario};

const MIB: u64 = 1 << 20;

const KINDS_EACH: &[Expect] = &[
    Expect {
        size: 7100,
        api: "cuMemHostRegister",
        kind: Kind::Registered,
        function: "register_v1",
        marker: "cuMemHostRegister",
    },
    Expect {
        size: 7200,
        api: "cuMemHostRegister_v2",
        kind: Kind::Registered,
        function: "register_v2",
        marker: "cuMemHostRegister_v2",
    },
    // The size of opened and imported memory is the driver's (cuMemGetAddressRange).
    Expect {
        size: 8100,
        api: "cuIpcOpenMemHandle",
        kind: Kind::Ipc,
        function: "open_v1",
        marker: "cuIpcOpenMemHandle",
    },
    Expect {
        size: 8200,
        api: "cuIpcOpenMemHandle_v2",
        kind: Kind::Ipc,
        function: "open_v2",
        marker: "cuIpcOpenMemHandle_v2",
    },
    Expect {
        size: 8300,
        api: "cuMemPoolImportPointer",
        kind: Kind::Ipc,
        function: "import_pointer",
        marker: "cuMemPoolImportPointer",
    },
    Expect {
        size: 16 * MIB,
        api: "cuMemAddressReserve",
        kind: Kind::Reserved,
        function: "reserve",
        marker: "cuMemAddressReserve",
    },
    Expect {
        size: 4 * MIB,
        api: "cuMemCreate",
        kind: Kind::Physical,
        function: "create",
        marker: "cuMemCreate",
    },
    Expect {
        size: 2 * MIB,
        api: "cuMemMap",
        kind: Kind::Mapped,
        function: "map",
        marker: "cuMemMap",
    },
];

/// Exporters' blocks, freed in every mode.
const SOURCES: u64 = 8100 + 8200 + 8300;
/// Memory held by the leaked records: the reservation and the mapping hold none of their own.
const HELD: u64 = 7100 + 7200 + 8100 + 8200 + 8300 + 4 * MIB;

const ROUTES: &[&str] = &["direct", "getproc", "getproc1", "dlsym"];

#[test]
fn every_route_records_each_kind_once_with_its_size_and_site() {
    for route in ROUTES {
        let run = Scenario::new("kinds_pointers")
            .arg(route)
            .arg("leak")
            .run_shim();
        run.assert_exit(0)
            .assert_stdout(&format!("route={route} leaked 8\n"));
        let dump = run.dump();
        assert_eq!(
            dump.summary,
            summary(11, 3, 0, 0, 0, 8, HELD, HELD + SOURCES, HELD + SOURCES),
            "route {route}"
        );
        assert!(dump.events.is_empty(), "route {route}: {:#?}", dump.events);
        assert_live(&dump, "kinds_pointers", KINDS_EACH);
        // Only the reservation and the mapping hold other than their size: nothing.
        for r in &dump.live {
            let expected = matches!(r.kind, Kind::Reserved | Kind::Mapped).then_some(0);
            assert_eq!(r.bytes_held, expected, "route {route}: {r:?}");
        }
    }
}

#[test]
fn every_route_forgets_each_kind_through_its_own_free() {
    for route in ROUTES {
        let run = Scenario::new("kinds_pointers")
            .arg(route)
            .arg("free")
            .run_shim();
        run.assert_exit(0)
            .assert_stdout(&format!("route={route} freed 8\n"));
        let dump = run.dump();
        assert_eq!(
            dump.summary,
            summary(11, 11, 0, 0, 0, 0, 0, HELD + SOURCES, HELD + SOURCES),
            "route {route}"
        );
        assert!(dump.live.is_empty(), "route {route}: {:#?}", dump.live);
        assert!(dump.events.is_empty(), "route {route}: {:#?}", dump.events);
    }
}

#[test]
fn a_registered_pointer_is_not_pinned_memory_and_a_device_block_is_not_ipc() {
    for route in ROUTES {
        let run = Scenario::new("kinds_pointers")
            .arg(route)
            .arg("mismatch")
            .run_shim();
        run.assert_exit(0).assert_stdout(&format!(
            "cuMemFreeHost(registered)=1 cuIpcCloseMemHandle(device)=1\nroute={route} mismatch\n"
        ));
        let dump = run.dump();
        // Both wrong frees failed and freed nothing; the right ones then freed both.
        assert_eq!(
            dump.summary,
            summary(2, 2, 0, 0, 2, 0, 0, 15200, 15200),
            "route {route}"
        );
        let events: Vec<(EventType, &str)> = dump
            .events
            .iter()
            .map(|e| (e.kind, e.api.as_str()))
            .collect();
        assert_eq!(
            events,
            [
                (EventType::InvalidFree, "cuMemFreeHost"),
                (EventType::InvalidFree, "cuIpcCloseMemHandle")
            ],
            "route {route}"
        );
        assert_eq!(dump.events[0].error, Some(1));
        assert!(dump.events[0].address.is_some_and(|Hex(a)| a != 0));
        assert_site(
            &dump,
            dump.events[0].stack,
            "kinds_pointers",
            "main",
            "mismatch_free_host",
        );
        assert_site(
            &dump,
            dump.events[1].stack,
            "kinds_pointers",
            "main",
            "mismatch_close",
        );
    }
}

#[test]
fn failed_registrations_maps_and_opens_are_failed_allocation_events() {
    for route in ROUTES {
        let run = Scenario::new("kinds_pointers")
            .arg(route)
            .arg("fail")
            .run_shim();
        run.assert_exit(0).assert_stdout(&format!(
            "register again=712 map of no allocation=1 open of a bad handle=1\nroute={route} fail\n"
        ));
        let dump = run.dump();
        // The first registration and the reservation, both undone; three failures.
        assert_eq!(
            dump.summary,
            summary(2, 2, 0, 3, 0, 0, 0, 7100, 7100),
            "route {route}"
        );
        let events: Vec<(EventType, &str, Option<u64>, Option<i64>)> = dump
            .events
            .iter()
            .map(|e| (e.kind, e.api.as_str(), e.size, e.error))
            .collect();
        let failed = EventType::FailedAllocation;
        assert_eq!(
            events,
            [
                (failed, "cuMemHostRegister_v2", Some(7100), Some(712)),
                (failed, "cuMemMap", Some(2 * MIB), Some(1)),
                // An IPC open's size is not known before the call.
                (failed, "cuIpcOpenMemHandle_v2", Some(0), Some(1)),
            ],
            "route {route}"
        );
        for (e, marker) in dump
            .events
            .iter()
            .zip(["fail_register", "fail_map", "fail_open"])
        {
            assert_site(&dump, e.stack, "kinds_pointers", "main", marker);
        }
    }
}

/// The runtime names label the driver records they lead to.
const RUNTIME_KINDS: &[Expect] = &[
    Expect {
        size: 7300,
        api: "cudaHostRegister",
        kind: Kind::Registered,
        function: "register_host",
        marker: "cudaHostRegister",
    },
    Expect {
        size: 8400,
        api: "cudaIpcOpenMemHandle",
        kind: Kind::Ipc,
        function: "open_handle",
        marker: "cudaIpcOpenMemHandle",
    },
    Expect {
        size: 8500,
        api: "cudaMemPoolImportPointer",
        kind: Kind::Ipc,
        function: "import_pointer",
        marker: "cudaMemPoolImportPointer",
    },
];

#[test]
fn runtime_registration_ipc_and_import_are_labelled_with_the_runtime_names() {
    let run = Scenario::new("runtime_kinds").arg("leak").run_shim();
    run.assert_exit(0).assert_stdout("leaked 3\n");
    let dump = run.dump();
    let held = 7300 + 8400 + 8500;
    let all = held + 8400 + 8500;
    assert_eq!(dump.summary, summary(5, 2, 0, 0, 0, 3, held, all, all));
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert_live(&dump, "runtime_kinds", RUNTIME_KINDS);
    assert_eq!(live_of_size(&dump, 7300).device, None, "host memory");
}

#[test]
fn runtime_unregister_ipc_close_and_cuda_free_async_forget_their_records() {
    let run = Scenario::new("runtime_kinds").arg("free").run_shim();
    run.assert_exit(0).assert_stdout("freed 3\n");
    let dump = run.dump();
    let all = 7300 + 2 * (8400 + 8500);
    assert_eq!(dump.summary, summary(5, 5, 0, 0, 0, 0, 0, all, all));
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
}
