//! `report --growth`: a series of dumps of each process (snapshots, then the final dump) in,
//! per-callsite live bytes over time and the leak suspects out.
//!
//! Pure like `analyze`: no I/O, no formatting. Dumps are added one at a time and reduced at
//! once to per-callsite counts (a callsite's stack is kept once per process), so memory stays
//! bounded by the largest dump plus callsites × dumps counters.
//!
//! Here the series and their rows are built; the types they are made of are in `model`, the
//! rules that judge them in `rules`, the statistics the rule for long series rests on in
//! `stats`, and the frameworks' own counts (schema 6), which the same rules judge, in
//! `frameworks`.

use std::collections::HashMap;
use std::path::Path;

use crate::load::schema as format;

use crate::analyze::{
    cut, live_into, live_into_taking_stacks, process_view, CallsiteLive, Config, Counts, StackView,
    Sums,
};
use crate::callsite::{shown_api, ByCallsite, Callsite};

mod frameworks;
mod model;
mod rules;
mod stats;

use frameworks::FrameworksAcc;
pub use frameworks::{framework, Framework, FrameworkGrowth, RecordGroup, FRAMEWORKS};
pub use model::*;
pub use rules::{judge, judge_kept, FAMILY_ALPHA, MIN_GROWTH_BLOCKS, MIN_JUDGED};
use rules::{judged_points, kept_series, steps, Judged};
pub use stats::Stats;

/// The suspect rule in short, for reports; docs/report-format.md, "The growth rule", has it in
/// full. It must say what `judge` and `judge_kept` do: with one interval up to the peak, one
/// rise is enough (an attach with two dumps).
pub const RULE_TEXT: &str = "3+ blocks more (a pool: any); with 8+ points, what it kept rose \
steadily to new highs; with fewer, a late peak, few falls and 2+ rises (1 if 1 interval led to \
the peak)";

/// A dump of a series reduced to what was allocated after sequence number `seq` (`report
/// --growth --since`), so that nothing made before the window is judged:
/// * its live records, failed calls, bad frees and handles as `report --since` keeps them;
/// * its floors (kept per stack, not per block) only for stacks with a block after `seq`, less
///   the blocks of that stack made before `seq` and still live (they were held through the
///   whole interval), and at most what the stack holds after `seq`;
/// * not the moment Python began to shut down (what each stack held then carries no sequence
///   numbers), and not the frameworks' counts (a count is of every object, made before the
///   window or in it).
pub fn keep_after(dump: &mut format::Dump, seq: u64) {
    // Per stack: (blocks, bytes) made up to `seq` and after it, still live.
    let mut per_stack: HashMap<usize, (Counts, Counts)> = HashMap::new();
    for r in &dump.live {
        let (before, after) = per_stack.entry(r.stack).or_default();
        let c = if r.seq > seq { after } else { before };
        c.allocations += 1;
        c.bytes = c.bytes.saturating_add(r.held());
    }
    if let Some(floors) = dump.floors.as_mut() {
        floors.retain_mut(|f| {
            let Some((before, after)) = per_stack.get(&f.stack) else {
                return false;
            };
            if after.allocations == 0 {
                return false;
            }
            f.allocations = f
                .allocations
                .saturating_sub(before.allocations)
                .min(after.allocations);
            f.bytes = f.bytes.saturating_sub(before.bytes).min(after.bytes);
            true
        });
    }
    dump.finalizing = None;
    dump.frameworks = None;
    crate::analyze::keep_after(dump, seq);
}

/// The series order of `points`: snapshots in number order, then final dumps; time breaks
/// ties. A requested dump (`cudaleak_dump()`: a snapshot without a number) goes after the
/// numbered snapshots taken before it, by its time: as the last dump of a window it stands as
/// the series' last, whatever its file is called.
fn series_keys(points: &[Point]) -> Vec<(bool, u64, bool, u64)> {
    let numbered = |p: &&Point| p.end == format::End::Snapshot && p.snapshot.is_some();
    points
        .iter()
        .map(|p| match (p.end, p.snapshot) {
            (format::End::Snapshot, Some(n)) => (false, n, false, p.end_unix_ms),
            (format::End::Snapshot, None) => {
                let after = points
                    .iter()
                    .filter(numbered)
                    .filter(|q| q.end_unix_ms <= p.end_unix_ms)
                    .filter_map(|q| q.snapshot)
                    .max()
                    .unwrap_or(0);
                (false, after, true, p.end_unix_ms)
            }
            _ => (true, 0, false, p.end_unix_ms),
        })
        .collect()
}

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
    /// The rows by callsite.
    index: ByCallsite,
    /// When the Python interpreter began to shut down, and the dump (index into `points`)
    /// that said so.
    finalizing: Option<(u64, usize)>,
    /// The frameworks' own counts (schema 6).
    frameworks: FrameworksAcc,
    /// The newest dump schema seen, and whether the process runs Python (a Python frame, or a
    /// program named `python…`).
    schema: u32,
    python: bool,
}

/// A callsite's row as the dumps come in: one per callsite of a process, so kept small (its
/// API is the callsite's, shown as [`shown_api`] says; what few rows have is boxed).
struct RowAcc {
    callsite: Callsite,
    stack: StackView,
    /// Index into the configuration's cache rules.
    held_by: Option<usize>,
    /// (index into `points`, live blocks, floor)
    seen: Vec<(usize, Counts, Counts)>,
    /// What it held when the interpreter began to shut down, and its floor until then.
    finalizing: Option<Box<(Counts, Counts)>>,
}

impl ProcessAcc {
    /// The row of a callsite, made on first sight.
    fn row(&mut self, key: Callsite, stack: &StackView, held_by: Option<usize>) -> usize {
        let make = |callsite| RowAcc {
            callsite,
            stack: stack.clone(),
            held_by,
            seen: Vec::new(),
            finalizing: None,
        };
        self.index.slot(&mut self.rows, key, |r| &r.callsite, make) as usize
    }
}

/// A dump's live blocks summed straight into its process's rows: each callsite's row (made on
/// first sight) gets an entry for the dump, `at`, in its list.
struct IntoRows<'a> {
    acc: &'a mut ProcessAcc,
    at: usize,
}

impl Sums for IntoRows<'_> {
    fn slot(&mut self, key: Callsite, stack: &StackView, held_by: Option<usize>) -> u32 {
        self.acc.row(key, stack, held_by) as u32
    }

    fn key(&self, i: u32) -> &Callsite {
        &self.acc.rows[i as usize].callsite
    }

    fn counts(&mut self, i: u32) -> (&mut Counts, &mut Counts) {
        let seen = &mut self.acc.rows[i as usize].seen;
        if seen.last().is_none_or(|s| s.0 != self.at) {
            // Doubled from one, not from four (std's first room): most callsites of a long
            // series are seen in a few dumps, and with every callsite distinct the rows' lists
            // were a tenth of the peak.
            if seen.len() == seen.capacity() {
                seen.reserve_exact(seen.len().max(1));
            }
            seen.push((self.at, Counts::default(), Counts::default()));
        }
        let n = seen.len() - 1;
        let (_, live, floor) = &mut seen[n];
        (live, floor)
    }
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
        let cfg = self.cfg;
        let (slot, at) = self.point(dump, source);
        let mut rows = self.rows_of(slot, at, dump);
        let found = live_into(dump, &cfg.view, &cfg.rules, &cfg.caches, &mut rows);
        self.callsites(slot, at, dump, found);
    }

    /// [`Builder::add`] of a dump the caller has no further use for: its stack table is taken
    /// (`dump.stacks` is left empty), each stack's frames dropped once their views hold them.
    pub fn add_taking_stacks(&mut self, dump: &mut format::Dump, source: &Path) {
        let cfg = self.cfg;
        let (slot, at) = self.point(dump, source);
        let mut rows = self.rows_of(slot, at, dump);
        let found = live_into_taking_stacks(dump, &cfg.view, &cfg.rules, &cfg.caches, &mut rows);
        self.callsites(slot, at, dump, found);
    }

    /// Where the dump's live blocks go: its process's rows, the first dump's made room for at
    /// once (a row per record, up to one per stack; a doubling copies the list beside itself).
    fn rows_of(&mut self, slot: usize, at: usize, dump: &format::Dump) -> IntoRows<'_> {
        let acc = &mut self.processes[slot];
        if acc.rows.is_empty() {
            acc.rows
                .reserve_exact(dump.live.len().min(dump.stacks.len()));
        }
        IntoRows { acc, at }
    }

    /// The dump as a point of its process's series: the process's slot, and the point's index.
    fn point(&mut self, dump: &format::Dump, source: &Path) -> (usize, usize) {
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
            floors: dump.floors.is_some(),
        };
        let order = point.newer();
        let key = (p.pid, p.start_unix_ms);
        let slot = *self.index.entry(key).or_insert_with(|| {
            self.processes.push(ProcessAcc {
                process: process_view(p),
                process_order: order,
                points: Vec::new(),
                rows: Vec::new(),
                index: ByCallsite::default(),
                finalizing: None,
                frameworks: FrameworksAcc::default(),
                schema: 0,
                python: false,
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
        acc.schema = acc.schema.max(dump.cudaleak_dump);
        // Only an older series needs to know (`LeftOutWhy::PythonTeardown`).
        if acc.schema <= 3 && !acc.python {
            acc.python = runs_python(dump);
        }
        if let Some(f) = &dump.frameworks {
            acc.frameworks.add(f, at, order);
        }
        (slot, at)
    }

    /// What suppressions took of the point, and what its callsites held at finalizing.
    fn callsites(
        &mut self,
        slot: usize,
        at: usize,
        dump: &format::Dump,
        (suppressed, held): (Vec<Counts>, Option<Vec<CallsiteLive>>),
    ) {
        let acc = &mut self.processes[slot];
        for (total, c) in self.suppressed.iter_mut().zip(suppressed) {
            total.add(c);
        }
        if let Some(held) = held {
            acc.finalizing = dump.finalizing.as_ref().map(|f| (f.unix_ms, at));
            for c in held {
                let held = (c.live, c.floor);
                let row = acc.row(c.key, &c.stack, c.held_by);
                acc.rows[row].finalizing = Some(Box::new(held));
            }
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
            at_exit: None,
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

/// Whether a dump is of a Python program: a stack with a Python frame, or a program whose file
/// name starts with `python` (its executable or its `argv[0]`).
fn runs_python(dump: &format::Dump) -> bool {
    let named = |s: &str| crate::names::basename(s).starts_with("python");
    named(&dump.process.exe)
        || dump.process.argv.first().is_some_and(|a| named(a))
        || dump
            .stacks
            .iter()
            .any(|s| !s.python.is_empty() || s.frames.iter().any(|f| f.is_python()))
}

/// Whether the cache rule `held_by` (an index into the configuration's rules) holds its blocks as
/// a pool's segments (`blocks = segments`).
fn held_in_segments(cfg: &Config, held_by: Option<usize>) -> bool {
    held_by
        .and_then(|i| cfg.caches.get(i))
        .is_some_and(|c| c.segments)
}

/// The judged points of one kind of row, and whether they end where the script did.
struct Judging {
    points: Vec<Judged>,
    /// The last point is what was kept up to the script's end: the interpreter's shutdown for
    /// callsites, the frameworks' last read for their counts.
    fin: bool,
}

/// A row to be, before the rule: a callsite or a framework's count.
struct Candidate<'j> {
    callsite: Callsite,
    api: format::Name,
    stack: StackView,
    held_by: Option<Box<HeldBy>>,
    framework: Option<Box<FrameworkGrowth>>,
    series: Vec<Counts>,
    floors: Vec<Counts>,
    judging: &'j Judging,
    kept: Vec<Counts>,
    levels: Vec<u64>,
}

impl Candidate<'_> {
    /// Its blocks are a pool's segments, or a count that has no blocks: any growth may be a
    /// leak, and fewer than three more blocks says nothing.
    fn segments(&self) -> bool {
        self.held_by.as_ref().is_some_and(|h| h.segments)
    }
}

/// The exit dumps an older Python series leaves out (`LeftOutWhy::PythonTeardown`): indices
/// into `acc.points`.
fn left_out(acc: &ProcessAcc) -> Vec<usize> {
    let older = acc.schema <= 3 && acc.finalizing.is_none() && !acc.points.iter().any(|p| p.floors);
    if !(older && acc.python) {
        return Vec::new();
    }
    // A dump written at a fatal signal was not after teardown: it stays.
    (0..acc.points.len())
        .filter(|&i| acc.points[i].end == format::End::Exit)
        .collect()
}

fn build_series(mut acc: ProcessAcc, cfg: &Config) -> Series {
    let left = left_out(&acc);
    let keys = series_keys(&acc.points);
    let by_order = |a: usize, b: usize| {
        keys[a]
            .cmp(&keys[b])
            .then_with(|| acc.points[a].source.cmp(&acc.points[b].source))
    };
    // Series order, and where each added dump went in it (`usize::MAX`: left out).
    let mut order: Vec<usize> = (0..acc.points.len())
        .filter(|i| !left.contains(i))
        .collect();
    order.sort_by(|&a, &b| by_order(a, b));
    let mut position = vec![usize::MAX; acc.points.len()];
    for (pos, &i) in order.iter().enumerate() {
        position[i] = pos;
    }
    let points: Vec<Point> = order.iter().map(|&i| acc.points[i].clone()).collect();
    let left_out = (!left.is_empty()).then(|| {
        let mut left = left.clone();
        left.sort_by(|&a, &b| by_order(a, b));
        let points: Vec<Point> = left.iter().map(|&i| acc.points[i].clone()).collect();
        LeftOut {
            points,
            why: LeftOutWhy::PythonTeardown,
            schema: acc.schema,
        }
    });
    let (first_ms, last_ms) = match (points.first(), points.last()) {
        (Some(a), Some(b)) => (a.end_unix_ms, b.end_unix_ms),
        _ => (0, 0),
    };
    let span_ms = last_ms.saturating_sub(first_ms);
    if points.len() < 2 {
        // Nothing to compare once the left-out dumps are gone: the series says so.
        return Series {
            process: acc.process,
            points,
            span_ms,
            rows: Vec::new(),
            suspects: 0,
            suspect_growth_bytes: 0,
            suspects_not_shown: 0,
            coarse_pools: Vec::new(),
            left_out,
        };
    }

    // The points the rule for long series judges: each interval's floor from the second
    // interval on (the first starts with the program), up to the moment the interpreter began
    // to shut down when a dump says so (what teardown freed is not the run). The frameworks'
    // counts stop where their bootstrap stopped reading, at the script's end.
    let fin = acc.finalizing.map(|f| f.0).filter(|&ms| ms >= first_ms);
    let callsites = Judging {
        points: judged_points(&points, fin, false),
        fin: fin.is_some(),
    };
    let ended = acc.frameworks.ended_ms.filter(|&ms| ms >= first_ms);
    let counts = Judging {
        points: judged_points(&points, ended, true),
        fin: ended.is_some(),
    };
    let place = |seen: &[(usize, Counts, Counts)]| {
        let mut series = vec![Counts::default(); points.len()];
        let mut floors = vec![Counts::default(); points.len()];
        for &(at, live, floor) in seen {
            if let Some(&p) = position.get(at).filter(|&&p| p != usize::MAX) {
                series[p].add(live);
                floors[p].add(floor);
            }
        }
        (series, floors)
    };
    // Each row's judged series: what it kept at each judged point, and when.
    let row_kept = |r: &RowAcc| {
        let (series, floors) = place(&r.seen);
        let (kept, levels) = kept_series(
            &callsites.points,
            &series,
            &floors,
            r.finalizing.as_deref().copied(),
            &points,
        );
        (series, floors, kept, levels)
    };
    // The frameworks' counts as candidates (a few per process).
    let fw = &acc.frameworks;
    let mut counters: Vec<Candidate> = Vec::with_capacity(fw.counters.len());
    for c in &fw.counters {
        let one_device = fw
            .counters
            .iter()
            .filter(|o| o.framework == c.framework)
            .count()
            == 1;
        let p = frameworks::prepare(c, fw.records(), one_device, &cfg.view);
        let (series, floors) = place(&c.seen);
        // After the bootstrap's last read the counts stand still: the last dump holds what the
        // script kept up to its end.
        let last = points.len() - 1;
        let at_end = counts.fin.then(|| (series[last], floors[last]));
        let (kept, levels) = kept_series(&counts.points, &series, &floors, at_end, &points);
        counters.push(Candidate {
            callsite: p.callsite,
            api: p.api,
            stack: p.stack,
            held_by: Some(Box::new(p.held_by)),
            framework: Some(Box::new(p.framework)),
            series,
            floors,
            judging: &counts,
            kept,
            levels,
        });
    }
    // The tests run only on rows that kept more at the end than at the start, by three blocks
    // or more unless their blocks are a pool's segments: those share the level.
    let tested_kept = |kept: &[Counts], segments: bool| match (kept.first(), kept.last()) {
        (Some(a), Some(b)) if kept.len() >= MIN_JUDGED && b.bytes > a.bytes => {
            segments || i128::from(b.allocations) - i128::from(a.allocations) >= MIN_GROWTH_BLOCKS
        }
        _ => false,
    };
    // How many are tested sets the rule's threshold, so the callsites' rows are read twice:
    // here to count (each row's series made and dropped), then each made into its growth row
    // as its accumulator goes. No list of every candidate and its series stands beside the
    // rows (with every callsite distinct, that list was the peak). Found on the way: the
    // pools seen holding blocks.
    drop(std::mem::take(&mut acc.index));
    let mut tested = counters
        .iter()
        .filter(|c| tested_kept(&c.kept, c.segments()))
        .count();
    let mut coarse: Vec<usize> = Vec::new();
    for r in &acc.rows {
        let (series, _, kept, _) = row_kept(r);
        tested += usize::from(tested_kept(&kept, held_in_segments(cfg, r.held_by)));
        if series.iter().any(|x| x.bytes > 0) {
            coarse.extend(r.held_by.filter(|&i| held_in_segments(cfg, Some(i))));
        }
    }
    let alpha = FAMILY_ALPHA / tested.max(1) as f64;
    coarse.sort_unstable();
    coarse.dedup();

    let to_row = |c: Candidate| -> Option<GrowthRow> {
        let segments = c.segments();
        let Candidate {
            callsite,
            api,
            stack,
            held_by,
            framework,
            series,
            floors,
            judging,
            kept,
            levels,
            ..
        } = c;
        let bytes: Vec<u64> = series.iter().map(|c| c.bytes).collect();
        let (peak, verdict, evidence) = if kept.len() >= MIN_JUDGED {
            // `None`: what it kept never rose above the first judged point.
            let (verdict, stats) = judge_kept(&kept, &levels, !segments, alpha)?;
            let e = Evidence {
                ends_at_finalizing: judging.fin && kept.len() == judging.points.len(),
                kept,
                stats,
            };
            // Growth up to the last point judged; what was freed after it is teardown.
            let last = judging.points.last().map_or(points.len() - 1, |j| j.point);
            (last, verdict, Some(Box::new(e)))
        } else {
            // `None`: never rose above the first dump.
            let (peak, verdict) = judge(&bytes)?;
            (peak, verdict, None)
        };
        let mut row = GrowthRow {
            callsite,
            api,
            stack,
            series,
            floors,
            evidence,
            grew_intervals: 0,
            shrank_intervals: 0,
            peak,
            bytes_per_hour: None,
            not_suspect: None,
            held_by,
            framework,
        };
        let growth = u64::try_from(row.growth_bytes()).unwrap_or(0);
        row.not_suspect = verdict.err().or(if growth < cfg.min_bytes {
            Some(NotSuspect::BelowMinBytes)
        } else if !segments && row.growth_blocks() < MIN_GROWTH_BLOCKS {
            // One or two tensors held a little longer (a batch in flight, a loss kept for a
            // log line) are not a trend, however few dumps there are.
            Some(NotSuspect::FewBlocks)
        } else {
            None
        });
        let (from_ms, to_ms) = match &row.evidence {
            Some(e) => (levels[0], levels[e.kept.len() - 1]),
            None => (first_ms, points[peak].end_unix_ms),
        };
        let span = to_ms.saturating_sub(from_ms);
        row.bytes_per_hour = (span > 0).then(|| growth as f64 * 3_600_000.0 / span as f64);
        (row.grew_intervals, row.shrank_intervals) = match &row.evidence {
            Some(e) => (e.stats.rose, e.stats.fell),
            None => steps(&bytes[..=peak]),
        };
        Some(row)
    };
    // Grown as rows come, not made at its size at once: on the dump of distinct stacks that one
    // block found no room in what the dumps left free, and took 4 MiB more at the peak.
    let mut rows: Vec<GrowthRow> = Vec::new();
    for r in std::mem::take(&mut acc.rows) {
        let (series, floors, kept, levels) = row_kept(&r);
        let api = shown_api(r.callsite.api());
        let c = Candidate {
            callsite: r.callsite,
            api,
            stack: r.stack,
            held_by: r
                .held_by
                .and_then(|i| cfg.caches.get(i))
                .map(|c| Box::new(HeldBy::of(c))),
            framework: None,
            series,
            floors,
            judging: &callsites,
            kept,
            levels,
        };
        rows.extend(to_row(c));
    }
    rows.extend(counters.into_iter().filter_map(to_row));
    frameworks::not_twice(&mut rows);
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
    // A pool whose framework's own count was read is judged at the count's grain, not the
    // segments'.
    let counted: Vec<&str> = acc
        .frameworks
        .counters
        .iter()
        .filter_map(|c| framework(&c.framework))
        .map(|f| f.pool)
        .collect();
    let coarse_pools = coarse
        .into_iter()
        .filter_map(|i| cfg.caches.get(i))
        .filter(|c| {
            !counted.contains(&c.id.as_str())
                && !rows
                    .iter()
                    .any(|r| r.is_suspect() && r.held_by.as_ref().is_some_and(|h| h.id == c.id))
        })
        .map(HeldBy::of)
        .collect();
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
        coarse_pools,
        left_out,
    }
}

#[cfg(test)]
mod tests;
