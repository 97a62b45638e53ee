//! The device ordinal of each record: the current context's device, asked of the driver only
//! when the process sees more than one; host memory belongs to no device.

use cudaleak_tests::{live_of_size, Scenario};

fn devices(count: &str, current: &str) -> (Option<i32>, Option<i32>) {
    let run = Scenario::new("devices")
        .env("NULLCUDA_DEVICES", count)
        .env("NULLCUDA_CURRENT_DEVICE", current)
        .run_shim();
    run.assert_exit(0).assert_stdout("ok\n");
    let dump = run.dump();
    (
        live_of_size(&dump, 1234).device,
        live_of_size(&dump, 4321).device,
    )
}

#[test]
fn with_several_devices_the_current_contexts_device_is_recorded() {
    assert_eq!(devices("4", "2"), (Some(2), None));
    assert_eq!(devices("2", "0"), (Some(0), None));
}

#[test]
fn with_one_device_the_driver_is_not_asked() {
    assert_eq!(devices("1", "0"), (Some(0), None));
    // A driver claiming one device but a context on device 3: the shim did not ask the context.
    assert_eq!(devices("1", "3"), (Some(0), None));
}
