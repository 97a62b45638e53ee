//! libFuzzer entry point: bytes → the dump readers → every report format, in memory.
//! The target itself lives in the CLI library (`cudaleak_cli::fuzz_target`), where the stable
//! smoke test `cli/tests/fuzz_smoke.rs` runs it too. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cudaleak_cli::fuzz_target::render_all(data);
});
