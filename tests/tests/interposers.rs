//! Other interposers in the same process: a preloaded library that finds the function it wraps
//! with `dlsym(RTLD_NEXT, …)` (profilers, fault injectors, loggers do) gets the next definition
//! after itself, whether it is preloaded before the shim or after it, and the shim still records.

use cudaleak_tests::{read_dump, shim, Scenario, NEXT_PROBE_LIB};

fn with_probe(preload: String) {
    let run = Scenario::new("rtld_next")
        .env("LD_PRELOAD", &preload)
        .run_shim();
    assert_eq!(
        run.status.code(),
        Some(0),
        "LD_PRELOAD={preload}: {}\n{}",
        run.status,
        run.stderr
    );
    assert_eq!(run.stdout, "getppid ok\n");
    let probe = run
        .stderr
        .lines()
        .find(|l| l.starts_with("next_probe: "))
        .unwrap_or_else(|| panic!("no line from the probe: {}", run.stderr));
    assert!(
        probe.contains("the next getppid in") && probe.contains("libc.so"),
        "the probe found the C library's getppid after itself: {probe}"
    );
    let dump = read_dump(&run.dir.path().join(format!("cudaleak.{}.json", run.pid)));
    assert_eq!(dump.summary.live_allocations, 1, "the shim still records");
    assert_eq!(dump.live[0].size, 1000);
}

#[test]
fn an_interposer_preloaded_after_the_shim_finds_the_next_definition() {
    with_probe(format!("{}:{NEXT_PROBE_LIB}", shim().display()));
}

#[test]
fn an_interposer_preloaded_before_the_shim_finds_the_next_definition() {
    with_probe(format!("{NEXT_PROBE_LIB}:{}", shim().display()));
}
