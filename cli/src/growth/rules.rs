//! The rules of `report --growth`: which points of a series are judged (each interval's floor,
//! up to the script's end), what a row kept at each, and the verdicts of the rule for long
//! series (`judge_kept`) and for short ones (`judge`). Pure functions of numbers: the series
//! and rows they are applied to are built in `mod.rs`, the statistics are in `stats`.

use crate::analyze::Counts;
use crate::load::schema as format;

use super::stats::{at_least, late_records, mann_kendall};
use super::{NotSuspect, Point, Stats};

/// Series with at least this many judged points are judged by the rule for long series
/// (`judge_kept`); shorter ones by `judge`. `run --growth` makes 16 dumps in its first 16 s.
pub const MIN_JUDGED: usize = 8;

/// A callsite not held by a cache must have grown by at least this many blocks.
pub const MIN_GROWTH_BLOCKS: i128 = 3;

/// The chance, per process, that the rule for long series calls a stationary callsite a
/// suspect: each test runs at this level divided by the callsites that grew (Bonferroni).
pub const FAMILY_ALPHA: f64 = 0.01;

/// Where a judged point's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The floor of the interval that ends at this dump.
    Floor,
    /// Live blocks at this dump (a dump without floors).
    Live,
    /// What was held when the interpreter began to shut down, and its floor until then.
    Finalizing,
}

/// One point of the series the rule for long series judges.
#[derive(Debug, Clone, Copy)]
pub(super) struct Judged {
    /// Index into the ordered points: the dump the value is read from.
    pub(super) point: usize,
    source: Source,
    /// The moment the value stands for: a floor is reached at its interval's start at the
    /// latest for memory that only grows, so its interval's start; a live count, its dump.
    level_ms: u64,
}

/// The judged points of a series: every interval's floor but the first's (which starts with
/// the program, from nothing), or live blocks at each dump that has no floors (`floors`: every
/// dump has them, as the frameworks' counts do); when the script's end is known (`fin_ms`),
/// nothing after it, and the floor up to it last.
pub(super) fn judged_points(points: &[Point], fin_ms: Option<u64>, floors: bool) -> Vec<Judged> {
    let mut out = Vec::new();
    let mut before_fin = None;
    for (i, p) in points.iter().enumerate() {
        if fin_ms.is_some_and(|f| p.end_unix_ms > f) {
            break; // teardown
        }
        before_fin = Some(i);
        if !(floors || p.floors) {
            out.push(Judged {
                point: i,
                source: Source::Live,
                level_ms: p.end_unix_ms,
            });
        } else if i > 0 {
            out.push(Judged {
                point: i,
                source: Source::Floor,
                level_ms: points[i - 1].end_unix_ms,
            });
        }
    }
    if fin_ms.is_some() {
        if let Some(i) = before_fin {
            out.push(Judged {
                point: points.len() - 1,
                source: Source::Finalizing,
                level_ms: points[i].end_unix_ms,
            });
        }
    }
    out
}

/// A row's value at each judged point. Without a shutdown moment, a final dump's floor below
/// the point before it is left out: a program's teardown is not its run.
pub(super) fn kept_series(
    judged: &[Judged],
    series: &[Counts],
    floors: &[Counts],
    finalizing: Option<(Counts, Counts)>,
    points: &[Point],
) -> (Vec<Counts>, Vec<u64>) {
    let mut kept: Vec<Counts> = judged
        .iter()
        .map(|j| match j.source {
            Source::Floor => floors[j.point],
            Source::Live => series[j.point],
            Source::Finalizing => finalizing.map(|f| f.1).unwrap_or_default(),
        })
        .collect();
    if let [.., before, last] = kept[..] {
        let j = judged[judged.len() - 1];
        if j.source != Source::Finalizing
            && points[j.point].end != format::End::Snapshot
            && last.bytes < before.bytes
        {
            kept.pop();
        }
    }
    let levels = judged[..kept.len()].iter().map(|j| j.level_ms).collect();
    (kept, levels)
}

/// The rule for long series. `None`: what the callsite kept never rose above the first judged
/// point (not listed). Otherwise the verdict and what it rests on. A suspect
/// 1. kept more at the end than at the start, and (`per_tensor`: not a cache's segments)
///    at least three blocks more;
/// 2. kept more and more through the run: Mann–Kendall's one-sided rank test of trend on the
///    kept bytes, at `alpha`;
/// 3. kept reaching new highs in the second half of the run as often as in the first: under
///    a stationary workload (a cache growing to the largest demand so far) the point at time
///    t_k is a new high with probability (t_k − t_{k−1}) / (t_k − t_0), so new highs become
///    rarer; the number seen in the second half is tested against that Poisson-binomial law,
///    at `alpha`. A leak's highs do not thin out.
pub fn judge_kept(
    kept: &[Counts],
    levels: &[u64],
    per_tensor: bool,
    alpha: f64,
) -> Option<(Result<(), NotSuspect>, Stats)> {
    let bytes: Vec<u64> = kept.iter().map(|c| c.bytes).collect();
    let first = *bytes.first()?;
    if !bytes.iter().any(|&b| b > first) {
        return None;
    }
    let (rose, fell) = steps(&bytes);
    let m = bytes.len();
    let (p_late, late_highs) = late_records(&bytes, levels);
    let stats = Stats {
        rose,
        fell,
        late: p_late.len() as u64,
        late_highs,
        expected_late_highs: p_late.iter().sum(),
        p_highs: at_least(&p_late, late_highs),
        p_trend: mann_kendall(&bytes),
        alpha,
    };
    let (start, end) = (kept[0], kept[m - 1]);
    let verdict = if end.bytes <= start.bytes {
        Err(NotSuspect::Released)
    } else if per_tensor
        && i128::from(end.allocations) - i128::from(start.allocations) < MIN_GROWTH_BLOCKS
    {
        Err(NotSuspect::FewBlocks)
    } else if stats.p_trend >= alpha {
        Err(NotSuspect::NoTrend)
    } else if stats.p_highs >= alpha {
        Err(NotSuspect::Settled)
    } else {
        Ok(())
    };
    Some((verdict, stats))
}

/// Intervals in which live bytes rose, and in which they fell.
pub(super) fn steps(bytes: &[u64]) -> (u64, u64) {
    let mut grew = 0;
    let mut shrank = 0;
    for w in bytes.windows(2) {
        if w[1] > w[0] {
            grew += 1;
        } else if w[1] < w[0] {
            shrank += 1;
        }
    }
    (grew, shrank)
}

/// The suspect rule. `None`: the callsite never rose above its bytes in the first dump (not
/// listed). Otherwise the index of its peak — the last dump holding its maximum — and the
/// verdict: `Ok` a suspect, `Err(why)` it grew, but not like a leak.
///
/// The stretch up to the peak is judged, so memory the program releases at its very end
/// (an interpreter freeing its globals before the exit dump) does not hide a leak of the run.
/// A suspect's peak (1) lies in the second half of the series (index ≥ ⌊(n−1)/2⌋), else it
/// followed a phase and was released; up to the peak its live bytes (2) also rose over the
/// second half of that stretch — to a high above everything in its first half — so a warm-up
/// that levelled off, or a block that only blinks in and out, is not a suspect, (3) fell in at
/// most a quarter of the intervals, so memory that follows the workload is not one either, and
/// (4) with three or more dumps, rose in at least two intervals: one jump is not a trend. With
/// two dumps this is simply "more at the end".
pub fn judge(bytes: &[u64]) -> Option<(usize, Result<(), NotSuspect>)> {
    let first = *bytes.first()?;
    let max = *bytes.iter().max()?;
    if bytes.len() < 2 || max <= first {
        return None;
    }
    let peak = bytes.iter().rposition(|&b| b == max)?;
    let verdict = (|| {
        if peak < (bytes.len() - 1) / 2 {
            return Err(NotSuspect::Released);
        }
        let run = &bytes[..=peak];
        // A new high in the second half of the stretch: above everything before its middle, so
        // a block that merely blinks in and out (a tensor in flight when a snapshot was taken,
        // seen on the H200) does not count as rising.
        let (grew, shrank) = steps(run);
        let intervals = run.len() as u64 - 1;
        if shrank * 4 > intervals {
            return Err(NotSuspect::Fluctuates);
        }
        let first_half_high = run[..=(run.len() - 1) / 2]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        if run[peak] <= first_half_high {
            return Err(NotSuspect::LevelledOff);
        }
        if intervals >= 2 && grew < 2 {
            return Err(NotSuspect::OneStep);
        }
        Ok(())
    })();
    Some((peak, verdict))
}
