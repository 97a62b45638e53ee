//! Physical allocations (cuMemCreate/cuMemRelease) used through a reserved, mapped range, as
//! PyTorch's expandable segments and JAX do: one record per physical allocation, kind
//! `physical`; reserving and mapping allocate nothing.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, summary, Expect, Scenario};

#[test]
fn mapped_physical_allocations_are_recorded_once_each() {
    Scenario::new("vmm")
        .run_plain()
        .assert_exit(0)
        .assert_stdout("granularity=2097152 mapped=17\n");
    let run = Scenario::new("vmm").run_shim();
    run.assert_exit(0)
        .assert_stdout("granularity=2097152 mapped=17\n");
    let dump = run.dump();
    let two_mib = 2 * 1024 * 1024;
    assert_eq!(
        dump.summary,
        summary(2, 1, 0, 0, 0, 1, two_mib, 2 * two_mib, 2 * two_mib)
    );
    assert!(dump.events.is_empty(), "{:#?}", dump.events);
    assert_live(
        &dump,
        "vmm",
        &[Expect {
            size: two_mib,
            api: "cuMemCreate",
            kind: Kind::Physical,
            function: "create_kept",
            marker: "vmm_kept",
        }],
    );
}
