//! Where a hooked call's time goes, in a build made to measure it: `--cfg cudaleak_probe`
//! (`scripts/build-probe.sh`). Each [`Part`] a call passes through is timed with the processor's
//! time-stamp counter; at exit the process prints, on stderr, each part's calls and time per call:
//! the split of a pair's cost (native walk, Python walk, the ring, the driver) and where threads
//! wait (making room in a full ring, the fold) read off one run on the GPU machine, which has no
//! profiler. The shipped build has no probe: [`time`] is the closure's call and nothing else.
//!
//! The timers cost some 20 ns each, so a probe build is slower than the shipped one: compare
//! its parts with each other, not its total with another build's.

/// What is timed.
#[derive(Clone, Copy)]
#[cfg_attr(not(cudaleak_probe), allow(dead_code))]
pub enum Part {
    /// A recorded allocation's hook body, the driver's call included.
    Alloc,
    /// A recorded free's hook body, the driver's call included.
    Free,
    /// The real driver's call inside those two.
    Driver,
    /// The native stack's capture and interning.
    Native,
    /// The Python frames' capture and interning.
    Python,
    /// A ring entry written: the sequence's number taken, room made if needed, the slot written.
    Write,
    /// A writer that found the ring full making room (folding, or waiting for a fold).
    Room,
    /// Folds of the ring into the table ([`time_n`]: counted by entries folded, not by folds).
    Fold,
}

#[cfg(not(cudaleak_probe))]
#[inline(always)]
pub fn time<R>(_: Part, body: impl FnOnce() -> R) -> R {
    body()
}

/// [`time`], counted as `calls(&result)` calls rather than one.
#[cfg(not(cudaleak_probe))]
#[inline(always)]
pub fn time_n<R>(_: Part, body: impl FnOnce() -> R, _: impl FnOnce(&R) -> u64) -> R {
    body()
}

#[cfg(cudaleak_probe)]
pub use probed::{time, time_n};

#[cfg(cudaleak_probe)]
mod probed {
    use super::Part;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Once;

    const PARTS: usize = 8;
    const NAMES: [&str; PARTS] = [
        "alloc", "free", "driver", "native", "python", "write", "room", "fold",
    ];
    /// A thread's sums go to the process's after this many timings (and at exit, the
    /// reporting thread's): a thread's last few are lost, which a run of thousands of calls
    /// does not see.
    const FLUSH_EVERY: u64 = 256;

    /// Per part: calls (or entries) and time-stamp counter ticks.
    static CALLS: [AtomicU64; PARTS] = [const { AtomicU64::new(0) }; PARTS];
    static TICKS: [AtomicU64; PARTS] = [const { AtomicU64::new(0) }; PARTS];
    static START: Once = Once::new();
    /// The counter and the monotonic clock at the first timing, to convert ticks to time.
    static FIRST_TICKS: AtomicU64 = AtomicU64::new(0);
    static FIRST_NS: AtomicU64 = AtomicU64::new(0);

    thread_local! {
        static SUMS: Cell<[(u64, u64); PARTS]> = const { Cell::new([(0, 0); PARTS]) };
        static PENDING: Cell<u64> = const { Cell::new(0) };
    }

    #[inline(always)]
    fn ticks() -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: rdtsc reads a counter; it has no preconditions and changes nothing.
        unsafe {
            std::arch::x86_64::_rdtsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            monotonic_ns()
        }
    }

    fn monotonic_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a valid out-parameter.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn started() {
        START.call_once(|| {
            FIRST_NS.store(monotonic_ns(), Relaxed);
            FIRST_TICKS.store(ticks(), Relaxed);
            // SAFETY: report is an extern "C" fn taking nothing, as atexit wants.
            unsafe { libc::atexit(report) };
        });
    }

    #[inline(always)]
    pub fn time<R>(part: Part, body: impl FnOnce() -> R) -> R {
        let t0 = ticks();
        let r = body();
        add(part, 1, ticks().wrapping_sub(t0));
        r
    }

    pub fn time_n<R>(part: Part, body: impl FnOnce() -> R, calls: impl FnOnce(&R) -> u64) -> R {
        let t0 = ticks();
        let r = body();
        add(part, calls(&r), ticks().wrapping_sub(t0));
        r
    }

    fn add(part: Part, calls: u64, ticks: u64) {
        started();
        let i = part as usize;
        if matches!(part, Part::Room | Part::Fold) {
            // Rare: straight to the process's sums.
            CALLS[i].fetch_add(calls, Relaxed);
            TICKS[i].fetch_add(ticks, Relaxed);
            return;
        }
        let _ = SUMS.try_with(|s| {
            let mut sums = s.get();
            sums[i].0 += calls;
            sums[i].1 += ticks;
            s.set(sums);
        });
        let _ = PENDING.try_with(|p| {
            p.set(p.get() + 1);
            if p.get() >= FLUSH_EVERY {
                p.set(0);
                flush();
            }
        });
    }

    fn flush() {
        let _ = SUMS.try_with(|s| {
            for (i, (calls, ticks)) in s.replace([(0, 0); PARTS]).into_iter().enumerate() {
                CALLS[i].fetch_add(calls, Relaxed);
                TICKS[i].fetch_add(ticks, Relaxed);
            }
        });
    }

    extern "C" fn report() {
        flush();
        if CALLS.iter().all(|c| c.load(Relaxed) == 0) {
            return;
        }
        let ns = monotonic_ns().saturating_sub(FIRST_NS.load(Relaxed)) as f64;
        let ticks = ticks().wrapping_sub(FIRST_TICKS.load(Relaxed)) as f64;
        let per_ns = if ns > 0.0 && ticks > 0.0 {
            ticks / ns
        } else {
            1.0
        };
        let mut text = format!("cudaleak probe (pid {}):", std::process::id());
        for (i, name) in NAMES.iter().enumerate() {
            let calls = CALLS[i].load(Relaxed);
            if calls == 0 {
                continue;
            }
            let total = TICKS[i].load(Relaxed) as f64 / per_ns;
            text.push_str(&format!(
                " {name} {calls} x {:.1} ns ({:.1} ms);",
                total / calls as f64,
                total / 1e6
            ));
        }
        text.push('\n');
        // SAFETY: writes a buffer we own to stderr; a failed write is ignored.
        unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
    }
}
