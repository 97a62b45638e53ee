//! A snapshot taken while 16 threads allocate and free is one moment: every allocation its
//! counters count is either freed (counted in `frees`) or in its `live` list. Not stated by
//! docs/dump-format.md; this test records whether the shim gives it.

use std::io::Read;
use std::time::Duration;

use cudaleak_tests::{read_dump, wait_for_exit, Scenario};

#[test]
fn snapshot_counters_agree_with_the_live_list_while_threads_allocate() {
    let mut sp = Scenario::new("threads_churn")
        .arg("3")
        .env("CUDALEAK_SNAPSHOT_INTERVAL", "0.1")
        .spawn_shim();
    let mut child = sp.child.take().expect("a child");
    drop(child.stdin.take());
    let status = wait_for_exit(
        &mut child,
        Duration::from_secs(60),
        "threads_churn (a deadlock?)",
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status}\nstderr:\n{stderr}");
    let prefix = format!("cudaleak.{}.snapshot-", sp.pid);
    let mut checked = 0;
    let mut inconsistent = Vec::new();
    for entry in std::fs::read_dir(sp.dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let s = read_dump(&entry.path()).summary;
        checked += 1;
        if s.allocations - s.frees != s.live_allocations {
            inconsistent.push((name, s.allocations, s.frees, s.live_allocations));
        }
    }
    assert!(checked >= 5, "only {checked} snapshots\nstderr:\n{stderr}");
    inconsistent.sort();
    assert!(
        inconsistent.is_empty(),
        "{} of {checked} snapshots have allocations - frees != live_allocations \
         (name, allocations, frees, live_allocations): {inconsistent:?}",
        inconsistent.len()
    );
}
