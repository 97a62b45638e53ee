//! The CUDALEAK_* environment variables, read once at start-up into a plain value.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::limits::{MAX_DEPTH, MAX_PY_DEPTH};
use cudaleak_format::env as var;

pub const DEFAULT_DEPTH: usize = 32;
pub const DEFAULT_PY_DEPTH: usize = 32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// CUDALEAK_OUTPUT: the dump path template, unexpanded.
    pub output: Option<OsString>,
    /// CUDALEAK_DEPTH: frames per stack.
    pub depth: usize,
    /// CUDALEAK_PY_DEPTH: Python frames per stack; 0 records none.
    pub py_depth: usize,
    /// CUDALEAK_QUIET=1: no line on stderr at exit.
    pub quiet: bool,
    /// CUDALEAK_DISABLE=1: forward every call, record nothing, write no dump.
    pub disabled: bool,
    /// CUDALEAK_SNAPSHOT_INTERVAL=SECONDS|auto: when to write snapshot dumps.
    pub snapshot_interval: Option<Schedule>,
    /// CUDALEAK_UNWIND=precise: walk the stack at every allocation (default `fast`: reuse a
    /// walk when the stack is provably the same).
    pub unwind: Unwind,
    /// CUDALEAK_SIGNAL=0: leave SIGUSR1 and the terminating signals alone.
    pub signals: bool,
    /// Problems with the variables, reported once on stderr.
    pub warnings: Vec<String>,
}

/// How stacks are taken: `Cached` reuses a walk when its stack slots prove it identical,
/// `Precise` walks every time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwind {
    Cached,
    Precise,
}

/// When the worker writes snapshot dumps, counted from the first recorded allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every this long.
    Every(Duration),
    /// `auto`: a second apart for the first [`AUTO_DENSE`] snapshots (a short program still gets
    /// a series), then twice as far apart each time, up to [`AUTO_MAX`] (a long one does not
    /// fill a disk: 24 in the first 10 minutes, then 12 an hour).
    Auto,
}

pub const AUTO_DENSE: u64 = 16;
pub const AUTO_MAX: Duration = Duration::from_secs(300);

impl Schedule {
    /// The wait before the snapshot that follows `taken` timed snapshots.
    pub fn interval(self, taken: u64) -> Duration {
        match self {
            Schedule::Every(d) => d,
            Schedule::Auto => {
                let doublings = taken.saturating_sub(AUTO_DENSE - 1).min(16) as u32;
                Duration::from_secs(1u64 << doublings).min(AUTO_MAX)
            }
        }
    }
}

impl Config {
    pub fn from_env() -> Config {
        Config::from_lookup(|k| std::env::var_os(k))
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Config {
        let mut warnings = Vec::new();
        let depth = match get(var::DEPTH) {
            None => DEFAULT_DEPTH,
            Some(v) => match v.to_str().and_then(|s| s.trim().parse::<usize>().ok()) {
                Some(d) if (1..=MAX_DEPTH).contains(&d) => d,
                _ => {
                    warnings.push(format!(
                        "{}={} is not a number from 1 to {MAX_DEPTH}; using {DEFAULT_DEPTH}",
                        var::DEPTH,
                        v.to_string_lossy()
                    ));
                    DEFAULT_DEPTH
                }
            },
        };
        let py_depth = match get(var::PY_DEPTH) {
            None => DEFAULT_PY_DEPTH,
            Some(v) => match v.to_str().and_then(|s| s.trim().parse::<usize>().ok()) {
                Some(d) if d <= MAX_PY_DEPTH => d,
                _ => {
                    warnings.push(format!(
                        "{}={} is not a number from 0 to {}; using {DEFAULT_PY_DEPTH}",
                        var::PY_DEPTH,
                        v.to_string_lossy(),
                        MAX_PY_DEPTH
                    ));
                    DEFAULT_PY_DEPTH
                }
            },
        };
        let snapshot_interval = match get(var::SNAPSHOT_INTERVAL) {
            None => None,
            Some(v) if v.to_str().map(str::trim) == Some("auto") => Some(Schedule::Auto),
            Some(v) => match v.to_str().and_then(|s| s.trim().parse::<f64>().ok()) {
                Some(secs) if secs > 0.0 && secs.is_finite() && secs <= 1e9 => {
                    Some(Schedule::Every(Duration::from_secs_f64(secs.max(0.01))))
                }
                _ => {
                    warnings.push(format!(
                        "{}={} is neither a positive number of seconds nor auto; no periodic snapshots",
                        var::SNAPSHOT_INTERVAL,
                        v.to_string_lossy()
                    ));
                    None
                }
            },
        };
        let unwind = match get(var::UNWIND) {
            None => Unwind::Cached,
            Some(v) if v == "fast" => Unwind::Cached,
            Some(v) if v == "precise" => Unwind::Precise,
            Some(v) => {
                warnings.push(format!(
                    "{}={} is neither fast nor precise; using fast",
                    var::UNWIND,
                    v.to_string_lossy()
                ));
                Unwind::Cached
            }
        };
        let flag = |k: &str| get(k).is_some_and(|v| v == "1" || v == "true" || v == "yes");
        Config {
            unwind,
            snapshot_interval,
            signals: get(var::SIGNAL).is_none_or(|v| v != "0"),
            output: get(var::OUTPUT).filter(|v| !v.is_empty()),
            depth,
            py_depth,
            quiet: flag(var::QUIET),
            disabled: flag(var::DISABLE),
            warnings,
        }
    }

    /// Where the dump of process `pid` goes: `%p` becomes the pid; a value ending in `/` or
    /// naming a directory means `DIR/cudaleak.<pid>.json`; unset means `./cudaleak.<pid>.json`.
    /// Where snapshot `n` of process `pid` goes: the dump path with `.snapshot-N` before
    /// its `.json` (or at its end).
    pub fn snapshot_path(&self, pid: u32, n: u64, is_dir: impl Fn(&PathBuf) -> bool) -> PathBuf {
        let path = self.dump_path(pid, is_dir);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let snap = match name.strip_suffix(".json") {
            Some(stem) => format!("{stem}.snapshot-{n}.json"),
            None => format!("{name}.snapshot-{n}"),
        };
        path.with_file_name(snap)
    }

    pub fn dump_path(&self, pid: u32, is_dir: impl Fn(&PathBuf) -> bool) -> PathBuf {
        let file = format!("cudaleak.{pid}.json");
        let Some(template) = &self.output else {
            return PathBuf::from(file);
        };
        let raw = template.to_string_lossy();
        let expanded = raw.replace("%p", &pid.to_string());
        let path = PathBuf::from(&expanded);
        if expanded.ends_with('/') || is_dir(&path) {
            path.join(file)
        } else {
            path
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        Config::from_lookup(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults() {
        let c = config(&[]);
        assert_eq!(c.depth, 32);
        assert!(!c.quiet && !c.disabled);
        assert_eq!(
            c.dump_path(42, |_| false),
            PathBuf::from("cudaleak.42.json")
        );
    }

    #[test]
    fn output_templates() {
        let c = config(&[("CUDALEAK_OUTPUT", "/tmp/run-%p.json")]);
        assert_eq!(c.dump_path(7, |_| false), PathBuf::from("/tmp/run-7.json"));
        let c = config(&[("CUDALEAK_OUTPUT", "/tmp/out/")]);
        assert_eq!(
            c.dump_path(7, |_| false),
            PathBuf::from("/tmp/out/cudaleak.7.json")
        );
        let c = config(&[("CUDALEAK_OUTPUT", "/tmp/out")]);
        assert_eq!(
            c.dump_path(7, |_| true),
            PathBuf::from("/tmp/out/cudaleak.7.json")
        );
        assert_eq!(c.dump_path(7, |_| false), PathBuf::from("/tmp/out"));
    }

    #[test]
    fn snapshot_names_carry_their_number() {
        let c = config(&[("CUDALEAK_OUTPUT", "/tmp/out/")]);
        assert_eq!(
            c.snapshot_path(7, 3, |_| false),
            PathBuf::from("/tmp/out/cudaleak.7.snapshot-3.json")
        );
        let c = config(&[("CUDALEAK_OUTPUT", "/tmp/run-%p")]);
        assert_eq!(
            c.snapshot_path(7, 1, |_| false),
            PathBuf::from("/tmp/run-7.snapshot-1")
        );
    }

    #[test]
    fn snapshot_interval_and_signal_switch() {
        assert_eq!(config(&[]).snapshot_interval, None);
        assert!(config(&[]).signals);
        let c = config(&[
            ("CUDALEAK_SNAPSHOT_INTERVAL", "2.5"),
            ("CUDALEAK_SIGNAL", "0"),
        ]);
        assert_eq!(
            c.snapshot_interval,
            Some(Schedule::Every(Duration::from_millis(2500)))
        );
        assert!(!c.signals);
        let c = config(&[("CUDALEAK_SNAPSHOT_INTERVAL", "-1")]);
        assert_eq!(c.snapshot_interval, None);
        assert_eq!(c.warnings.len(), 1);
        let c = config(&[("CUDALEAK_SNAPSHOT_INTERVAL", "auto")]);
        assert_eq!(c.snapshot_interval, Some(Schedule::Auto));
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn the_auto_schedule_is_dense_then_doubles_up_to_five_minutes() {
        let waits: Vec<u64> = (0..30)
            .map(|k| Schedule::Auto.interval(k).as_secs())
            .collect();
        assert_eq!(waits[..16], [1; 16]);
        assert_eq!(waits[16..26], [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(Schedule::Auto.interval(u64::MAX).as_secs(), 300);
        // 24 snapshots in the first 10 minutes.
        let mut t = 0;
        let n = (0..).take_while(|&k| {
            t += Schedule::Auto.interval(k).as_secs();
            t <= 600
        });
        assert_eq!(n.count(), 24);
        let every = Schedule::Every(Duration::from_millis(250));
        assert_eq!(every.interval(7), Duration::from_millis(250));
    }

    #[test]
    fn bad_depth_warns_and_falls_back() {
        let c = config(&[("CUDALEAK_DEPTH", "lots")]);
        assert_eq!(c.depth, DEFAULT_DEPTH);
        assert_eq!(c.warnings.len(), 1);
        assert_eq!(config(&[("CUDALEAK_DEPTH", "0")]).depth, DEFAULT_DEPTH);
        assert_eq!(config(&[("CUDALEAK_DEPTH", "8")]).depth, 8);
        assert!(config(&[("CUDALEAK_QUIET", "1")]).quiet);
    }

    #[test]
    fn python_depth_may_be_zero_and_warns_past_the_maximum() {
        assert_eq!(config(&[]).py_depth, DEFAULT_PY_DEPTH);
        assert_eq!(config(&[("CUDALEAK_PY_DEPTH", "0")]).py_depth, 0);
        let c = config(&[("CUDALEAK_PY_DEPTH", "9999")]);
        assert_eq!((c.py_depth, c.warnings.len()), (DEFAULT_PY_DEPTH, 1));
    }
}
