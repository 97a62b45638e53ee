//! cudaleak_set_recording: a program pauses recording around one phase.

use cudaleak_format::Kind;
use cudaleak_tests::{assert_live, summary, Expect, Scenario};

#[test]
fn paused_calls_are_unseen_and_recording_resumes() {
    let run = Scenario::new("pause").run_shim();
    run.assert_exit(0)
        .assert_stdout("pause: 1\npause again: 0\nresume: 0\nwith shim\n");
    let dump = run.dump();
    // Seen: the 1000 allocated before the pause (its free during the pause is not), the 3000
    // and the 10-byte pair after it. Unseen: the 2000 allocated while paused.
    assert_eq!(dump.summary, summary(3, 1, 0, 0, 0, 2, 4000, 4010, 4010));
    let expect = |size, function, marker| Expect {
        size,
        api: "cuMemAlloc_v2",
        kind: Kind::Device,
        function,
        marker,
    };
    assert_live(
        &dump,
        "pause",
        &[
            expect(1000, "before", "before_pause"),
            expect(3000, "after", "after_pause"),
        ],
    );
}

#[test]
fn without_the_shim_the_program_runs_as_before() {
    Scenario::new("pause")
        .run_plain()
        .assert_exit(0)
        .assert_stdout("without shim\n");
}
