//! The shim's runtime forwards in a process without a CUDA runtime: they answer with the
//! runtime's "initialization error" and record nothing.

use cudaleak_tests::Scenario;

#[test]
fn without_a_runtime_the_forwards_return_initialization_error() {
    Scenario::new("no_runtime")
        .run_plain()
        .assert_exit(0)
        .assert_stdout("no cudaMalloc\n");
    let run = Scenario::new("no_runtime").run_shim();
    // p is an out-param: a failed call leaves it as it was.
    run.assert_exit(0)
        .assert_stdout("cudaMalloc rc=3 p=0x1\ncudaFree rc=3\n");
    // Whether a process that never reached the driver leaves a dump is the shim's choice;
    // if it does, the dump records nothing.
    for path in run.files() {
        let dump = cudaleak_tests::read_dump(&path);
        assert_eq!(dump.summary.allocations, 0);
        assert_eq!(dump.summary.failed_allocations, 0);
        assert!(dump.live.is_empty() && dump.events.is_empty(), "{dump:#?}");
    }
}
