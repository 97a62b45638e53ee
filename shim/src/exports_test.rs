//! The shim's exported functions are the ones the format crate names for the CLI and the Python
//! package (`cudaleak_format::exports`): a function renamed or added on one side only fails here.

/// The function names of `paths`, checked to be functions of the shim by naming them.
macro_rules! functions {
    ($($path:path),* $(,)?) => {
        [$({
            let _function = $path;
            let path = stringify!($path);
            path.rsplit("::").next().unwrap_or(path).trim()
        }),*]
    };
}

#[test]
fn the_exported_functions_are_the_ones_the_format_crate_names() {
    let mut ours = functions!(
        crate::hooks::control::cudaleak_set_recording,
        crate::hooks::control::cudaleak_mark,
        crate::hooks::control::cudaleak_live_since,
        crate::hooks::control::cudaleak_restart_peak,
        crate::hooks::control::cudaleak_peak_bytes,
        crate::hooks::control::cudaleak_dump,
        crate::hooks::control::cudaleak_dump_records,
        crate::hooks::control::cudaleak_snapshot,
        crate::frameworks::cudaleak_framework_counters,
        crate::frameworks::cudaleak_framework_end,
        crate::python::watch::cudaleak_code_event,
        crate::python::watch::cudaleak_code_watched,
        crate::attach::cudaleak_attach,
        crate::attach::cudaleak_attach_refresh,
        crate::attach::cudaleak_detach,
    );
    let mut named = cudaleak_format::exports::ALL.to_vec();
    ours.sort_unstable();
    named.sort_unstable();
    assert_eq!(ours.as_slice(), named.as_slice());
}
