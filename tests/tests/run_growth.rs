//! `cudaleak run --growth`: snapshots on the shim's `auto` schedule (unless the user set an
//! interval), the growth report of the run's series, and a gate that also counts the leaks at
//! exit (null-device runtime; growth_steps sleeps between steps so the run spans snapshots).

use cudaleak_tests::{cudaleak_run, CliRun};

/// The snapshot dumps the run wrote.
fn snapshots(run: &CliRun) -> usize {
    run.dumps()
        .iter()
        .filter(|p| p.to_string_lossy().contains(".snapshot-"))
        .count()
}

#[test]
fn the_blocks_kept_every_step_are_growth_suspects_at_their_lines() {
    // 40 steps of 100 ms: the auto schedule takes a snapshot a second.
    let run = cudaleak_run(&["--growth"], "growth_steps", &["40", "100"], &[]);
    run.assert_exit(23);
    assert!(snapshots(&run) >= 2, "{:?}", run.dumps());
    let out = &run.stdout;
    assert!(out.contains("Suspect 1 of 2: "), "{out}");
    assert!(out.contains("Suspect 2 of 2: "), "{out}");
    assert!(out.contains("#0 train_step at "), "{out}");
    assert!(out.contains("#0 cache_fill at "), "{out}");
    // The model, allocated once, is live at exit but did not grow.
    assert!(!out.contains("#0 load_model at "), "{out}");
    assert!(
        !run.stderr.contains("exit report fails the gate"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_leak_at_exit_that_did_not_grow_still_fails_the_gate() {
    let run = cudaleak_run(&["--growth"], "growth_steps", &["40", "100", "flat"], &[]);
    run.assert_exit(23);
    assert!(snapshots(&run) >= 2, "{:?}", run.dumps());
    assert!(!run.stdout.contains("Suspect 1 of"), "{}", run.stdout);
    // CI logs often keep stdout only: its last lines carry the verdict and what leaked at exit.
    let tail: Vec<&str> = run.stdout.lines().rev().take(2).collect();
    assert_eq!(
        tail[1], "Gate failed (leaks at exit): exit status 23.",
        "{}",
        run.stdout
    );
    assert!(
        tail[0].starts_with("SUMMARY: 0 growth suspects (+0 B) in 1 process (")
            && tail[0].contains(" leaked at exit"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(
            "nothing grew like a leak, but the exit report fails the gate: `cudaleak report "
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_run_too_short_for_a_snapshot_gets_the_exit_report() {
    let run = cudaleak_run(&["--growth"], "growth_steps", &["2", "1"], &[]);
    run.assert_exit(23);
    assert_eq!(snapshots(&run), 0, "{:?}", run.dumps());
    assert!(
        run.stderr
            .contains("no process wrote two dumps: the exit report follows"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("Leak 1 of 3: "), "{}", run.stdout);
}

#[test]
fn an_interval_of_the_user_s_is_kept() {
    // 10 steps of 100 ms: the auto schedule's first snapshot would come after a second.
    let run = cudaleak_run(
        &["--growth"],
        "growth_steps",
        &["10", "100"],
        &[("CUDALEAK_SNAPSHOT_INTERVAL", "0.2")],
    );
    run.assert_exit(23);
    assert!(snapshots(&run) >= 3, "{:?}", run.dumps());
    assert!(run.stdout.contains("#0 train_step at "), "{}", run.stdout);
    assert!(
        run.stderr.contains(
            "cudaleak: --growth: snapshots as CUDALEAK_SNAPSHOT_INTERVAL=0.2 says (yours, kept)"
        ),
        "{}",
        run.stderr
    );
}
