//! `report --growth`: a series of dumps of each process (snapshots, then the final dump) in,
//! per-callsite live bytes over time and the leak suspects out.
//!
//! Pure like `analyze`: no I/O, no formatting. Dumps are added one at a time and reduced at
//! once to per-callsite counts (a callsite's stack is kept once per process), so memory stays
//! bounded by the largest dump plus callsites × dumps counters.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::load::schema as format;

use crate::analyze::{cut, live_by_callsite, process_view, Config, Counts, StackView};
use crate::callsite::Callsite;

/// The suspect rule, in words, for reports (docs/report-format.md explains it).
pub const RULE_TEXT: &str = "up to its peak (its last maximum, in the second half of the \
series), live bytes rose from the first dump, and to a new high in the second half of that stretch, fell in \
at most a quarter of its intervals, and (with three or more dumps) rose in at least two; memory \
released after the peak, as at interpreter shutdown, does not clear a suspect";

/// One dump of a series, in series order.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub source: PathBuf,
    pub end: format::End,
    pub snapshot: Option<u64>,
    pub signal: Option<String>,
    pub end_unix_ms: u64,
    pub live: Counts,
}

impl Point {
    /// Snapshots in number order first, then final dumps; time breaks ties.
    fn order(&self) -> (bool, u64, u64) {
        (
            self.end != format::End::Snapshot,
            self.snapshot.unwrap_or(0),
            self.end_unix_ms,
        )
    }
}

/// Why a callsite that grew overall is not a suspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSuspect {
    /// It grew early and then stayed level or fell (a warm-up, a cache filled once).
    LevelledOff,
    /// It fell in more than a quarter of the intervals: it follows the workload.
    Fluctuates,
    /// It rose in only one interval of three or more: one jump is not a trend.
    OneStep,
    /// It grew by fewer bytes than `--min-bytes`.
    BelowMinBytes,
    /// It peaked in the first half of the series and was released: it followed a phase of
    /// the program, not the run.
    Released,
}

impl NotSuspect {
    pub fn as_str(self) -> &'static str {
        match self {
            NotSuspect::LevelledOff => "levelled off in the second half",
            NotSuspect::Fluctuates => "fell in more than a quarter of the intervals",
            NotSuspect::OneStep => "rose in only one interval",
            NotSuspect::BelowMinBytes => "grew less than --min-bytes",
            NotSuspect::Released => "peaked in the first half and was released",
        }
    }
}

/// One callsite across a series.
#[derive(Debug, Clone, PartialEq)]
pub struct GrowthRow {
    pub callsite: Callsite,
    pub api: String,
    pub stack: StackView,
    /// Live blocks in each dump of the series (zero where the callsite had none).
    pub series: Vec<Counts>,
    pub grew_intervals: u64,
    pub shrank_intervals: u64,
    /// Index in `series` of the peak the growth is measured to (its last maximum).
    pub peak: usize,
    /// Bytes per hour from the first dump to the peak (`None` when they share a timestamp).
    pub bytes_per_hour: Option<f64>,
    /// `None` for a suspect.
    pub not_suspect: Option<NotSuspect>,
    /// The cache or library handle that holds what this callsite allocated.
    pub held_by: Option<HeldBy>,
}

/// A cache rule as a growth row names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBy {
    pub id: String,
    pub name: String,
    /// What the growth of this cache means (the rule's `grows`).
    pub grows: Option<String>,
}

impl GrowthRow {
    pub fn first(&self) -> Counts {
        self.series.first().copied().unwrap_or_default()
    }
    pub fn last(&self) -> Counts {
        self.series.last().copied().unwrap_or_default()
    }
    /// Intervals up to the peak: the stretch the verdict judged.
    pub fn intervals(&self) -> u64 {
        self.peak as u64
    }
    pub fn at_peak(&self) -> Counts {
        self.series.get(self.peak).copied().unwrap_or_default()
    }
    /// Growth from the first dump to the peak.
    pub fn growth_bytes(&self) -> i128 {
        i128::from(self.at_peak().bytes) - i128::from(self.first().bytes)
    }
    pub fn growth_blocks(&self) -> i128 {
        i128::from(self.at_peak().allocations) - i128::from(self.first().allocations)
    }
    /// Bytes freed between the peak and the last dump (the program's teardown, often).
    pub fn released_bytes(&self) -> u64 {
        self.at_peak().bytes.saturating_sub(self.last().bytes)
    }
    pub fn is_suspect(&self) -> bool {
        self.not_suspect.is_none()
    }
}

/// The series of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The process as its last dump describes it.
    pub process: format::Process,
    pub points: Vec<Point>,
    /// Milliseconds from the first dump to the last.
    pub span_ms: u64,
    /// Suspects (largest growth first, cut to `--top`), then callsites that grew but are not
    /// suspects (largest growth first). Callsites that did not grow are left out.
    pub rows: Vec<GrowthRow>,
    /// Suspects of this process, before `--top`.
    pub suspects: u64,
    /// Sum of the suspects' growth in bytes, before `--top`.
    pub suspect_growth_bytes: u64,
    pub suspects_not_shown: u64,
}

/// A process with a single dump: nothing to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub process: format::Process,
    pub source: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GrowthFindings {
    /// Processes with at least two dumps, by pid.
    pub series: Vec<Series>,
    pub skipped: Vec<Skipped>,
    pub rules: Vec<crate::suppressions::Rule>,
    /// Per rule: blocks it suppressed, summed over every dump read.
    pub suppressed: Vec<Counts>,
    pub min_bytes: u64,
    pub max_growth_bytes: u64,
    pub suspects: u64,
    pub suspect_growth_bytes: u64,
    /// Suspects exist but their growth is within `--max-leaked-bytes`.
    pub tolerated: bool,
    /// 0, or the gate's exit code.
    pub exit_code: u8,
}

/// Why a growth report cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooFewDumps(pub String);

/// Collects dumps one at a time.
pub struct Builder<'a> {
    cfg: &'a Config,
    processes: Vec<ProcessAcc>,
    index: HashMap<(u32, u64), usize>,
    suppressed: Vec<Counts>,
}

struct ProcessAcc {
    process: format::Process,
    /// The order key of the dump `process` came from.
    process_order: (bool, u64, u64),
    points: Vec<Point>,
    rows: Vec<RowAcc>,
    index: HashMap<Callsite, usize>,
}

struct RowAcc {
    callsite: Callsite,
    api: String,
    stack: StackView,
    /// Index into the configuration's cache rules.
    held_by: Option<usize>,
    /// (index into `points`, live blocks)
    seen: Vec<(usize, Counts)>,
}

impl<'a> Builder<'a> {
    pub fn new(cfg: &'a Config) -> Self {
        Builder {
            cfg,
            processes: Vec::new(),
            index: HashMap::new(),
            suppressed: vec![Counts::default(); cfg.rules.len()],
        }
    }

    /// Adds one dump. A process is its pid plus its start time, so a pid reused by a later
    /// run starts a series of its own.
    pub fn add(&mut self, dump: &format::Dump, source: &Path) {
        let p = &dump.process;
        let point = Point {
            source: source.to_path_buf(),
            end: p.end,
            snapshot: p.snapshot,
            signal: p.signal.as_deref().map(cut),
            end_unix_ms: p.end_unix_ms,
            live: Counts {
                groups: 0,
                allocations: dump.live.len() as u64,
                bytes: dump.summary.live_bytes,
            },
        };
        let order = point.order();
        let key = (p.pid, p.start_unix_ms);
        let slot = *self.index.entry(key).or_insert_with(|| {
            self.processes.push(ProcessAcc {
                process: process_view(p),
                process_order: order,
                points: Vec::new(),
                rows: Vec::new(),
                index: HashMap::new(),
            });
            self.processes.len() - 1
        });
        let acc = &mut self.processes[slot];
        if order >= acc.process_order {
            acc.process = process_view(p);
            acc.process_order = order;
        }
        let at = acc.points.len();
        acc.points.push(point);
        let (callsites, suppressed) =
            live_by_callsite(dump, &self.cfg.view, &self.cfg.rules, &self.cfg.caches);
        for (total, c) in self.suppressed.iter_mut().zip(suppressed) {
            total.add(c);
        }
        for c in callsites {
            let row = match acc.index.get(&c.key) {
                Some(&i) => i,
                None => {
                    acc.index.insert(c.key.clone(), acc.rows.len());
                    acc.rows.push(RowAcc {
                        callsite: c.key,
                        api: c.api,
                        stack: c.stack,
                        held_by: c.held_by,
                        seen: Vec::new(),
                    });
                    acc.rows.len() - 1
                }
            };
            acc.rows[row].seen.push((at, c.live));
        }
    }

    /// Orders each series, applies the suspect rule and decides the gate. At least one process
    /// must have two dumps.
    pub fn finish(self) -> Result<GrowthFindings, TooFewDumps> {
        let cfg = self.cfg;
        let mut series = Vec::new();
        let mut skipped = Vec::new();
        for acc in self.processes {
            if acc.points.len() < 2 {
                let source = acc.points[0].source.clone();
                skipped.push(Skipped {
                    process: acc.process,
                    source,
                });
                continue;
            }
            series.push(build_series(acc, cfg));
        }
        if series.is_empty() {
            return Err(too_few_dumps(&mut skipped));
        }
        series.sort_by(|a, b| {
            a.process
                .pid
                .cmp(&b.process.pid)
                .then(a.process.start_unix_ms.cmp(&b.process.start_unix_ms))
        });
        skipped.sort_by_key(|s| s.process.pid);
        let suspects = series.iter().map(|s| s.suspects).sum();
        let suspect_growth_bytes = series
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.suspect_growth_bytes));
        let gate = cfg.gate;
        let tolerated = suspects > 0 && suspect_growth_bytes <= gate.max_leaked_bytes;
        let exit_code = if suspects > 0 && !tolerated && gate.fail_on_leaks {
            gate.exit_code
        } else {
            0
        };
        Ok(GrowthFindings {
            series,
            skipped,
            rules: cfg.rules.clone(),
            suppressed: self.suppressed,
            min_bytes: cfg.min_bytes,
            max_growth_bytes: gate.max_leaked_bytes,
            suspects,
            suspect_growth_bytes,
            tolerated,
            exit_code,
        })
    }
}

/// Processes named in the "needs two dumps" error; the rest are counted.
const NAMED_SINGLE_DUMPS: usize = 5;

/// The error for a set of dumps with no process dumped twice: how many, then the first few, one
/// per line (a directory of a thousand single dumps must not make a thousand-name line).
fn too_few_dumps(skipped: &mut [Skipped]) -> TooFewDumps {
    skipped.sort_by(|a, b| (a.process.pid, &a.source).cmp(&(b.process.pid, &b.source)));
    let mut m = format!(
        "--growth needs at least two dumps of one process (snapshots: set \
         CUDALEAK_SNAPSHOT_INTERVAL=SECONDS or send SIGUSR1); found one dump each of {} {}:",
        skipped.len(),
        if skipped.len() == 1 {
            "process"
        } else {
            "processes"
        }
    );
    for s in skipped.iter().take(NAMED_SINGLE_DUMPS) {
        m.push_str(&format!(
            "\n  pid {} ({})",
            s.process.pid,
            s.source.display()
        ));
    }
    if skipped.len() > NAMED_SINGLE_DUMPS {
        m.push_str(&format!(
            "\n  … and {} more",
            skipped.len() - NAMED_SINGLE_DUMPS
        ));
    }
    TooFewDumps(m)
}

fn build_series(mut acc: ProcessAcc, cfg: &Config) -> Series {
    // Series order, and where each added dump went in it.
    let mut order: Vec<usize> = (0..acc.points.len()).collect();
    order.sort_by(|&a, &b| {
        acc.points[a]
            .order()
            .cmp(&acc.points[b].order())
            .then_with(|| acc.points[a].source.cmp(&acc.points[b].source))
    });
    let mut position = vec![0; order.len()];
    for (pos, &i) in order.iter().enumerate() {
        position[i] = pos;
    }
    let points: Vec<Point> = order.iter().map(|&i| acc.points[i].clone()).collect();
    let (first_ms, last_ms) = (points[0].end_unix_ms, points[points.len() - 1].end_unix_ms);
    let span_ms = last_ms.saturating_sub(first_ms);

    let mut rows: Vec<GrowthRow> = Vec::new();
    for r in acc.rows.drain(..) {
        let mut series = vec![Counts::default(); points.len()];
        for (at, c) in r.seen {
            series[position[at]].add(c);
        }
        let bytes: Vec<u64> = series.iter().map(|c| c.bytes).collect();
        let Some((peak, verdict)) = judge(&bytes) else {
            continue; // never rose above the first dump
        };
        let growth = bytes[peak] - bytes[0];
        let peak_ms = points[peak].end_unix_ms.saturating_sub(first_ms);
        let not_suspect = verdict.err().or(if growth < cfg.min_bytes {
            Some(NotSuspect::BelowMinBytes)
        } else {
            None
        });
        let (grew, shrank) = steps(&bytes[..=peak]);
        rows.push(GrowthRow {
            callsite: r.callsite,
            api: r.api,
            stack: r.stack,
            series,
            grew_intervals: grew,
            shrank_intervals: shrank,
            peak,
            bytes_per_hour: (peak_ms > 0).then(|| growth as f64 * 3_600_000.0 / peak_ms as f64),
            not_suspect,
            held_by: r.held_by.and_then(|i| cfg.caches.get(i)).map(|c| HeldBy {
                id: c.id.clone(),
                name: c.name.clone(),
                grows: c.grows.clone(),
            }),
        });
    }
    rows.sort_by(|a, b| {
        b.is_suspect()
            .cmp(&a.is_suspect())
            .then(b.growth_bytes().cmp(&a.growth_bytes()))
            .then(b.growth_blocks().cmp(&a.growth_blocks()))
            .then_with(|| a.api.cmp(&b.api))
    });
    let suspects = rows.iter().filter(|r| r.is_suspect()).count();
    let suspect_growth_bytes = rows.iter().filter(|r| r.is_suspect()).fold(0u64, |a, r| {
        a.saturating_add(u64::try_from(r.growth_bytes()).unwrap_or(u64::MAX))
    });
    let top = cfg.view.top.unwrap_or(usize::MAX);
    let mut not_shown = 0;
    if suspects > top {
        not_shown = suspects - top;
        rows.drain(top..suspects);
    }
    Series {
        process: acc.process,
        points,
        span_ms,
        rows,
        suspects: suspects as u64,
        suspect_growth_bytes,
        suspects_not_shown: not_shown as u64,
    }
}

/// Intervals in which live bytes rose, and in which they fell.
fn steps(bytes: &[u64]) -> (u64, u64) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{Gate, View};

    fn cfg() -> Config {
        Config {
            view: View::default(),
            rules: Vec::new(),
            caches: Vec::new(),
            min_bytes: 0,
            gate: Gate::default(),
            hide_quiet: false,
        }
    }

    fn fixture_series(cfg: &Config) -> GrowthFindings {
        crate::report::snapshots_test::growth_findings(cfg)
    }

    fn first_function(r: &GrowthRow) -> &str {
        r.stack.frames[0].function.as_deref().unwrap_or("?")
    }

    #[test]
    fn a_callsite_held_by_a_cache_names_it_and_what_its_growth_means() {
        let mut c = cfg();
        c.caches = crate::caches::parse(
            "[my-pool]\nname = My pool\nrelease = free_all()\n\
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
            held[0].held_by,
            Some(HeldBy {
                id: "my-pool".into(),
                name: "My pool".into(),
                grows: Some("the pool ran out here".into()),
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
}
