//! Unit tests of `report --growth`: series, floors, the rule for long series and for short ones,
//! and the statistics they rest on.
use super::stats::{at_least, erfc, mann_kendall};
use super::*;
use crate::analyze::{Gate, View};
use std::path::PathBuf;

mod frameworks;

fn cfg() -> Config {
    Config {
        view: View::default(),
        rules: Vec::new(),
        caches: Vec::new(),
        min_bytes: 0,
        gate: Gate::default(),
        hide_quiet: false,
        pools_emptied: false,
        framework_records: false,
    }
}

fn fixture_series(cfg: &Config) -> GrowthFindings {
    crate::report::snapshots_test::growth_findings(cfg)
}

fn framework_rows(g: &GrowthFindings) -> Vec<&GrowthRow> {
    g.series[0]
        .rows
        .iter()
        .filter(|r| r.framework.is_some())
        .collect()
}

fn builtin_caches() -> Config {
    let mut c = cfg();
    c.caches = crate::caches::builtin().unwrap();
    c
}

fn first_function(r: &GrowthRow) -> &str {
    r.stack.frames[0].function.as_deref().unwrap_or("?")
}

#[test]
fn a_callsite_held_by_a_cache_names_it_and_what_its_growth_means() {
    let mut c = cfg();
    c.caches = crate::caches::parse(
        "[my-pool]\nname = My pool\nrelease = free_all()\nblocks = segments\n\
         grows = the pool ran out here\nanchor = Cache::fill*\n",
    )
    .unwrap();
    let g = fixture_series(&c);
    let s = &g.series[0];
    let (held, rest): (Vec<&GrowthRow>, Vec<&GrowthRow>) = s
        .rows
        .iter()
        .partition(|r| first_function(r) == "Cache::fill()");
    assert_eq!(held.len(), 1);
    assert!(
        held[0].is_suspect(),
        "a cache that grows is still a suspect"
    );
    assert_eq!(
        held[0].held_by.as_deref(),
        Some(&HeldBy {
            id: "my-pool".into(),
            name: "My pool".into(),
            grows: Some("the pool ran out here".into()),
            segments: true,
        })
    );
    assert!(rest.iter().all(|r| r.held_by.is_none()), "{rest:#?}");
}

#[test]
fn a_block_that_blinks_in_and_out_is_not_a_suspect() {
    // Seen on the H200 under --exact-pools: a step's input tensor, alive at two of eleven
    // snapshots, rose twice and fell once.
    let kib = 1024;
    let blink = [0, 0, 0, 256 * kib, 0, 0, 0, 256 * kib, 256 * kib, 0, 0];
    assert_eq!(judge(&blink), Some((8, Err(NotSuspect::LevelledOff))));
    // The tensor kept per step in the same run stays a suspect.
    let kept = [0, 0, 0, 0, 43, 88, 133, 177, 222, 261, 0].map(|m| m * kib * kib);
    assert_eq!(judge(&kept), Some((9, Ok(()))));
}

#[test]
fn series_is_ordered_by_snapshot_number_then_the_final_dump() {
    let g = fixture_series(&cfg());
    assert_eq!(g.series.len(), 1);
    let s = &g.series[0];
    let order: Vec<Option<u64>> = s.points.iter().map(|p| p.snapshot).collect();
    assert_eq!(order, [Some(1), Some(2), Some(3), Some(9), Some(10), None]);
    assert_eq!(s.span_ms, 300_000);
    assert_eq!(s.process.end, format::End::Exit);
}

#[test]
fn the_leak_per_iteration_and_the_cache_freed_at_exit_are_the_suspects() {
    let g = fixture_series(&cfg());
    let s = &g.series[0];
    assert_eq!((g.suspects, s.suspects), (2, 2));
    let r = &s.rows[0];
    assert!(r.is_suspect());
    assert_eq!(first_function(r), "train_step(int)");
    let blocks: Vec<u64> = r.series.iter().map(|c| c.allocations).collect();
    assert_eq!(blocks, [2, 4, 6, 8, 10, 12]);
    assert_eq!((r.growth_bytes(), r.growth_blocks()), (40960, 10));
    assert_eq!(
        (r.grew_intervals, r.shrank_intervals, r.intervals()),
        (5, 0, 5)
    );
    // 40 KiB in 5 minutes.
    assert_eq!(r.bytes_per_hour, Some(40960.0 * 12.0));
    assert_eq!(r.released_bytes(), 0);
    // A cache that grew all run and was only emptied at exit still filled the GPU meanwhile.
    let cache = &s.rows[1];
    assert!(cache.is_suspect());
    assert_eq!(first_function(cache), "Cache::fill()");
    assert_eq!((cache.peak, cache.growth_bytes()), (4, 32768));
    assert_eq!(cache.released_bytes(), 40960);
    let others: Vec<(&str, Option<NotSuspect>)> = s.rows[2..]
        .iter()
        .map(|r| (first_function(r), r.not_suspect))
        .collect();
    assert_eq!(
        others,
        [
            ("load_model()", Some(NotSuspect::LevelledOff)),
            ("forward(int)", Some(NotSuspect::Fluctuates)),
        ]
    );
    assert_eq!(g.exit_code, 23);
    assert_eq!(g.skipped.len(), 1);
    assert_eq!(g.skipped[0].process.pid, 4002);
}

#[test]
fn gate_follows_exit_code_min_bytes_tolerance_and_suppressions() {
    let mut c = cfg();
    c.gate.exit_code = 7;
    assert_eq!(fixture_series(&c).exit_code, 7);
    c.gate.exit_code = 0;
    assert_eq!(fixture_series(&c).exit_code, 0);

    let mut c = cfg();
    c.min_bytes = 40961;
    let g = fixture_series(&c);
    assert_eq!((g.suspects, g.exit_code), (0, 0));
    let leak = g.series[0]
        .rows
        .iter()
        .find(|r| first_function(r) == "train_step(int)")
        .unwrap();
    assert_eq!(leak.not_suspect, Some(NotSuspect::BelowMinBytes));

    let mut c = cfg();
    c.gate.max_leaked_bytes = 40960 + 32768;
    let g = fixture_series(&c);
    assert!(g.tolerated);
    assert_eq!(g.exit_code, 0);

    let mut c = cfg();
    c.gate.fail_on_leaks = false;
    assert_eq!(fixture_series(&c).exit_code, 0);

    let mut c = cfg();
    c.rules = vec![crate::suppressions::Rule::new(
        "train_step",
        Path::new("s.supp"),
        1,
    )];
    let g = fixture_series(&c);
    assert_eq!(g.suspects, 1, "only the cache is left");
    // Every dump counts, the forked child's single one too.
    assert_eq!(g.suppressed[0].allocations, 2 + 4 + 6 + 8 + 10 + 12 + 1);
}

#[test]
fn top_cuts_suspects_shown_not_counted() {
    let mut c = cfg();
    c.view.top = Some(1);
    let g = fixture_series(&c);
    assert_eq!(g.series[0].suspects, 2);
    assert_eq!(g.series[0].suspects_not_shown, 1);
    assert_eq!(
        g.series[0].rows.len(),
        3,
        "one suspect shown and the two others"
    );
}

#[test]
fn one_dump_per_process_is_an_error_that_names_it() {
    let c = cfg();
    let mut b = Builder::new(&c);
    let d = crate::load::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/leak_loop.json"),
    )
    .unwrap();
    b.add(&d, Path::new("leak_loop.json"));
    let e = b.finish().unwrap_err();
    assert!(e.0.contains("at least two dumps"), "{}", e.0);
    assert!(
        e.0.ends_with("found one dump each of 1 process:\n  pid 1001 (leak_loop.json)"),
        "{}",
        e.0
    );
}

#[test]
fn many_single_dumps_are_counted_and_the_first_few_named_one_per_line() {
    let c = cfg();
    let mut b = Builder::new(&c);
    let mut d = crate::load::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/leak_loop.json"),
    )
    .unwrap();
    for pid in (1..=12).rev() {
        d.process.pid = pid;
        b.add(&d, Path::new(&format!("cudaleak.{pid}.json")));
    }
    let e = b.finish().unwrap_err().0;
    let lines: Vec<&str> = e.lines().collect();
    assert!(
        lines[0].ends_with("found one dump each of 12 processes:"),
        "{e}"
    );
    assert_eq!(
        lines[1..],
        [
            "  pid 1 (cudaleak.1.json)",
            "  pid 2 (cudaleak.2.json)",
            "  pid 3 (cudaleak.3.json)",
            "  pid 4 (cudaleak.4.json)",
            "  pid 5 (cudaleak.5.json)",
            "  … and 7 more",
        ]
    );
}

#[test]
fn a_steady_leak_is_a_suspect() {
    assert_eq!(judge(&[0, 4, 8, 12, 16]), Some((4, Ok(()))));
    assert_eq!(judge(&[100, 200]), Some((1, Ok(()))));
    // A leak in steps, level in between, is still one.
    assert_eq!(judge(&[0, 0, 4, 4, 8, 8, 12]), Some((6, Ok(()))));
    // One dip in eight intervals is tolerated.
    assert_eq!(judge(&[0, 4, 8, 6, 10, 14, 18, 22, 26]), Some((8, Ok(()))));
}

#[test]
fn flat_or_shrinking_callsites_are_not_listed() {
    assert_eq!(judge(&[8, 8, 8]), None);
    assert_eq!(judge(&[8, 4, 2]), None);
    assert_eq!(judge(&[8]), None);
    assert_eq!(judge(&[]), None);
}

#[test]
fn warm_up_that_levels_off_is_not_a_suspect() {
    assert_eq!(
        judge(&[0, 100, 200, 200, 200, 200]),
        Some((5, Err(NotSuspect::LevelledOff)))
    );
}

#[test]
fn memory_that_follows_the_workload_is_not_a_suspect() {
    assert_eq!(
        judge(&[100, 200, 100, 200, 100, 200]),
        Some((5, Err(NotSuspect::Fluctuates)))
    );
    assert_eq!(
        judge(&[100, 200, 100, 300, 150, 400]),
        Some((5, Err(NotSuspect::Fluctuates)))
    );
}

#[test]
fn a_single_late_allocation_is_not_a_trend() {
    assert_eq!(judge(&[0, 0, 0, 4096]), Some((3, Err(NotSuspect::OneStep))));
}

#[test]
fn a_leak_released_at_exit_is_still_a_suspect() {
    // PyTorch: one tensor kept per step, freed when the interpreter shuts down.
    assert_eq!(judge(&[1, 14, 33, 51, 70, 89, 1, 1]), Some((5, Ok(()))));
}

#[test]
fn a_phase_that_peaks_early_and_is_released_is_not_a_suspect() {
    assert_eq!(
        judge(&[0, 10, 20, 30, 0, 0, 0, 0, 0, 0]),
        Some((3, Err(NotSuspect::Released)))
    );
    // Three dumps, the peak in the second half: judged like a leak freed at exit.
    assert_eq!(judge(&[8, 16, 4]), Some((1, Ok(()))));
}

#[test]
fn steps_count_rises_and_falls() {
    assert_eq!(steps(&[1, 2, 2, 1, 3]), (2, 1));
}

/// `n` judged points one second apart, `kept[i]` bytes in `blocks[i]` blocks.
fn kept(bytes: &[u64], blocks: &[u64]) -> (Vec<Counts>, Vec<u64>) {
    let k = bytes
        .iter()
        .zip(blocks)
        .map(|(&bytes, &allocations)| Counts {
            groups: 0,
            allocations,
            bytes,
        })
        .collect();
    (k, (0..bytes.len() as u64).map(|i| i * 1000).collect())
}

#[test]
fn a_tensor_kept_every_step_is_a_suspect_of_the_long_rule() {
    let n: Vec<u64> = (0..12).collect();
    let (k, t) = kept(&n.iter().map(|i| i << 20).collect::<Vec<_>>(), &n);
    let (verdict, st) = judge_kept(&k, &t, true, FAMILY_ALPHA).unwrap();
    assert_eq!(verdict, Ok(()));
    assert_eq!((st.rose, st.fell, st.late, st.late_highs), (11, 0, 6, 6));
    assert!(st.p_trend < 1e-4 && st.p_highs < 1e-3, "{st:?}");
}

#[test]
fn a_cache_that_warms_up_is_settled_not_a_suspect() {
    // New highs at 1, 2, 4 and 8 (a cache growing to the largest batch so far), then level:
    // a rising trend, but its records thin out as a stationary workload's do.
    let bytes = [
        10, 20, 30, 30, 40, 40, 40, 40, 50, 50, 50, 50, 50, 50, 50, 50,
    ];
    let (k, t) = kept(&bytes, &bytes);
    let (verdict, st) = judge_kept(&k, &t, false, FAMILY_ALPHA).unwrap();
    assert_eq!(verdict, Err(NotSuspect::Settled), "{st:?}");
    assert!(
        st.p_trend < FAMILY_ALPHA,
        "the trend alone would call it: {st:?}"
    );
    // One new high in the second half (the 50 at index 8), about what a warming cache makes.
    assert_eq!(st.late_highs, 1);
    assert!(st.p_highs > 0.3, "{st:?}");
}

#[test]
fn a_series_that_only_wanders_has_no_trend() {
    let bytes = [5, 9, 4, 8, 3, 9, 5, 7, 4, 6, 5, 10];
    let (k, t) = kept(&bytes, &[50; 12]);
    let (verdict, st) = judge_kept(&k, &t, false, FAMILY_ALPHA).unwrap();
    assert_eq!(verdict, Err(NotSuspect::NoTrend), "{st:?}");
}

#[test]
fn two_more_tensors_are_not_a_trend_but_two_more_segments_may_be() {
    let bytes: Vec<u64> = (0..12)
        .map(|i| if i < 6 { 1 << 20 } else { 3 << 20 })
        .collect();
    let blocks: Vec<u64> = (0..12).map(|i| if i < 6 { 1 } else { 3 }).collect();
    let (k, t) = kept(&bytes, &blocks);
    assert_eq!(
        judge_kept(&k, &t, true, FAMILY_ALPHA).unwrap().0,
        Err(NotSuspect::FewBlocks)
    );
    // As segments the same two blocks go to the tests: one step up ranks as a trend, but
    // one new high in the second half is what a warming cache makes.
    assert_eq!(
        judge_kept(&k, &t, false, FAMILY_ALPHA).unwrap().0,
        Err(NotSuspect::Settled)
    );
    // Never above the first point: not listed at all.
    let (k, t) = kept(&[4, 4, 3, 4, 4, 4, 4, 4], &[1; 8]);
    assert!(judge_kept(&k, &t, true, FAMILY_ALPHA).is_none());
}

#[test]
fn poisson_binomial_tail_and_trend_test_match_hand_computed_values() {
    // Three fair coins: P(X >= 2) = 4/8; P(X >= 0) = 1; P(X >= 4) = 0.
    assert!((at_least(&[0.5, 0.5, 0.5], 2) - 0.5).abs() < 1e-12);
    assert!((at_least(&[0.5, 0.5, 0.5], 0) - 1.0).abs() < 1e-12);
    assert_eq!(at_least(&[0.5, 0.5, 0.5], 4), 0.0);
    // Unequal trials: P(both) = 0.2 * 0.7.
    assert!((at_least(&[0.2, 0.7], 2) - 0.14).abs() < 1e-12);
    // Mann-Kendall, n = 10 strictly rising: S = 45, var = 125, z = 44 / sqrt(125) = 3.935.
    let p = mann_kendall(&(0..10).collect::<Vec<u64>>());
    assert!((p - 4.16e-5).abs() < 0.05e-5, "{p}");
    // Falling or flat: no upward trend.
    assert_eq!(mann_kendall(&[5, 4, 3, 2, 1]), 1.0);
    assert_eq!(mann_kendall(&[3, 3, 3, 3]), 1.0);
    assert!((erfc(0.0) - 1.0).abs() < 1e-7 && (erfc(1.0) - 0.157_299_2).abs() < 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Older Python series: no shutdown mark, no floors (schema 2, the H200 of 2026-12-03)

/// The dumps of `h200/torch_keep-exact` (9 snapshots, then the exit dump) that `keep` keeps,
/// the exit dump changed by `exit`.
fn torch_keep_exact(
    keep: impl Fn(&str) -> bool,
    exit: impl Fn(&mut format::Dump),
) -> GrowthFindings {
    let c = builtin_caches();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200/torch_keep-exact");
    let mut b = Builder::new(&c);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| keep(n))
        .collect();
    names.sort();
    for n in &names {
        let mut d = crate::fixture(&format!("h200/torch_keep-exact/{n}"));
        assert_eq!(d.cudaleak_dump, 2);
        if d.process.end == format::End::Exit {
            exit(&mut d);
        }
        b.add(&d, Path::new(n));
    }
    b.finish().unwrap()
}

#[test]
fn an_older_python_series_is_judged_on_its_snapshots_and_says_its_exit_dump_is_left_out() {
    // Teardown freed every tensor before the exit dump: with it the series would end released.
    let g = torch_keep_exact(
        |_| true,
        |d| {
            d.live.clear();
            d.summary.live_allocations = 0;
            d.summary.live_bytes = 0;
        },
    );
    let s = &g.series[0];
    assert!(s.judged());
    let l = s.left_out.as_ref().unwrap();
    assert_eq!(l.why, LeftOutWhy::PythonTeardown);
    assert_eq!(l.schema, 2);
    assert_eq!(l.points.len(), 1);
    assert_eq!(l.points[0].source, Path::new("cudaleak.3386.json"));
    assert_eq!(s.points.len(), 9);
    assert!(s.points.iter().all(|p| p.end == format::End::Snapshot));
    assert_eq!(g.suspects, 1, "{:#?}", s.rows);
    assert_eq!(s.rows[0].growth_blocks(), 250);
}

#[test]
fn an_older_python_series_left_with_one_snapshot_cannot_be_judged() {
    let g = torch_keep_exact(
        |n| n.ends_with(".3386.json") || n.ends_with("snapshot-9.json"),
        |_| (),
    );
    let s = &g.series[0];
    assert!(!s.judged());
    assert_eq!(s.points.len(), 1);
    assert!(s.rows.is_empty());
    assert!(s.left_out.is_some());
    assert_eq!((g.suspects, g.exit_code), (0, 0));
    let mut out = Vec::new();
    crate::report::reporter(crate::report::Format::Text, false)
        .growth(&g, &View::default(), &mut out)
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("No growth suspects"), "{text}");
    assert!(
        text.contains("Cannot be judged: with the exit dump left out, only 1 snapshot is left"),
        "{text}"
    );
    assert!(text.contains("1 process could not be judged"), "{text}");
}

#[test]
fn a_newer_or_native_series_keeps_its_exit_dump() {
    // Not Python (the growth fixture, schema 1): every dump is judged as before.
    let g = fixture_series(&cfg());
    assert!(g.series[0].left_out.is_none());
    assert_eq!(g.series[0].points.len(), 6);
}

fn point(end: format::End, snapshot: Option<u64>, ms: u64, name: &str) -> Point {
    Point {
        source: PathBuf::from(name),
        end,
        snapshot,
        signal: None,
        end_unix_ms: ms,
        live: Counts::default(),
        floors: false,
    }
}

#[test]
fn a_requested_dump_goes_after_the_snapshots_taken_before_it() {
    use format::End::{Exit, Snapshot};
    // `cudaleak_dump()` writes a snapshot without a number; here between snapshots 2 and 3,
    // and one at the end of the window named as the process's last dump.
    let points = [
        point(Snapshot, None, 4_000, "cudaleak.1.json"),
        point(Snapshot, Some(3), 3_000, "cudaleak.1.snapshot-3.json"),
        point(Snapshot, None, 2_500, "window-a.json"),
        point(Snapshot, Some(1), 1_000, "cudaleak.1.snapshot-1.json"),
        point(Snapshot, Some(2), 2_000, "cudaleak.1.snapshot-2.json"),
    ];
    let keys = series_keys(&points);
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    let names: Vec<&str> = order
        .iter()
        .map(|&i| points[i].source.to_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "cudaleak.1.snapshot-1.json",
            "cudaleak.1.snapshot-2.json",
            "window-a.json",
            "cudaleak.1.snapshot-3.json",
            "cudaleak.1.json",
        ]
    );
    // A final dump still ends the series, whatever the time.
    let points = [
        point(Exit, None, 1_000, "cudaleak.1.json"),
        point(Snapshot, None, 2_000, "window.json"),
    ];
    let keys = series_keys(&points);
    assert!(keys[1] < keys[0]);
}

#[test]
fn keep_after_judges_floors_only_on_blocks_made_after_the_mark() {
    let mut d = crate::fixture("clean.json");
    d.stacks = vec![format::Stack::default(); 3];
    let rec = |stack: usize, seq: u64| format::LiveRecord {
        address: format::Hex(0x7f00_0000_0000 + seq * 0x10_0000),
        size: 100,
        bytes_held: None,
        api: "cudaMalloc".into(),
        kind: format::Kind::Device,
        device: Some(0),
        thread: 1,
        seq,
        time_ms: seq,
        stack,
    };
    // Stack 0: two blocks before the mark (10), three after; stack 1: before only; stack 2:
    // after only.
    d.live = vec![
        rec(0, 1),
        rec(0, 2),
        rec(0, 11),
        rec(0, 12),
        rec(0, 13),
        rec(1, 3),
        rec(2, 14),
    ];
    let floor = |stack: usize, allocations: u64| format::StackCounts {
        stack,
        allocations,
        bytes: allocations * 100,
    };
    d.floors = Some(vec![floor(0, 3), floor(1, 0), floor(2, 0)]);
    d.finalizing = None;
    d.frameworks = Some(format::Frameworks::default());
    keep_after(&mut d, 10);
    assert_eq!(d.live.len(), 4);
    assert_eq!(d.summary.live_allocations, 4);
    assert_eq!(d.summary.live_bytes, 400);
    // Stack 0 kept 3 through the interval, 2 of them made before the mark: 1 of the window's.
    // Stack 1 has nothing after the mark: no floor. Stack 2's floor stays 0.
    assert_eq!(d.floors, Some(vec![floor(0, 1), floor(2, 0)]));
    assert_eq!(d.frameworks, None);
}
