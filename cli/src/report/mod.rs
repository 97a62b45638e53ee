//! Output formats behind one trait, and the words they share (sizes, counts, frames, process
//! labels, CUDA error names); the sentences made of them are in `wording.rs`. Each format lives
//! in its own file (or folder) and writes to any `io::Write`.
//!
//! Reporters never decide anything: what is a leak, what is hidden and whether the gate fails
//! were settled in `analyze`. They must not panic on any findings.

use std::io;

use cudaleak_format as format;

use std::borrow::Cow;

use crate::analyze::View;
use crate::analyze::{Counts, DiffFindings, Findings, FrameView, ProcessFindings};
use crate::growth::{GrowthFindings, Point};

pub mod flame;
pub mod folded;
pub mod gen_suppressions;
pub mod html;
pub mod json;
pub mod markdown;
pub mod sarif;
pub mod text;
pub mod wording;

#[cfg(test)]
pub(crate) mod snapshots_test;

/// One output format.
pub trait Reporter {
    fn report(&self, findings: &Findings, view: &View, out: &mut dyn io::Write) -> io::Result<()>;
    fn diff(&self, diff: &DiffFindings, view: &View, out: &mut dyn io::Write) -> io::Result<()>;
    fn growth(&self, g: &GrowthFindings, view: &View, out: &mut dyn io::Write) -> io::Result<()>;

    /// Whether [`Reporter::page`] shows the exit report and the series of the same dumps side
    /// by side (HTML: a timeline beside the leaks), so that the command reads both from its
    /// dumps; the other formats show the one report asked for.
    fn shows_both(&self) -> bool {
        false
    }

    /// What a command writes: the report asked for, with the other of the same dumps where the
    /// command read it ([`Reporter::shows_both`]). By default, the one asked for.
    fn page(&self, page: Page<'_>, view: &View, out: &mut dyn io::Write) -> io::Result<()> {
        match page {
            Page::Report { exit, .. } => self.report(exit, view, out),
            Page::Growth { series, .. } => self.growth(series, view, out),
        }
    }
}

/// A command's output: the report it was asked for (whose verdict is its exit status), and the
/// other report of the same dumps where it has one.
#[derive(Clone, Copy)]
pub enum Page<'a> {
    /// The exit report, and the series of the same dumps where they hold one.
    Report {
        exit: &'a Findings,
        series: Option<&'a GrowthFindings>,
    },
    /// The growth report (`--growth`), and the exit report of the same dumps.
    Growth {
        series: &'a GrowthFindings,
        exit: Option<&'a Findings>,
    },
}

/// The output formats, as `--format` names them (the variants' comments are its help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Markdown,
    Sarif,
    /// One self-contained HTML page: summary, stacks, flame graphs, a timeline for a series
    Html,
    /// Collapsed stacks (`frame;frame BYTES`, root first) for inferno, flamegraph.pl, speedscope
    Folded,
}

/// The reporter of `format`; `color`: whether the text report paints (no other format does).
pub fn reporter(format: Format, color: bool) -> Box<dyn Reporter> {
    match format {
        Format::Text => Box::new(text::Text { color }),
        Format::Json => Box::new(json::Json),
        Format::Markdown => Box::new(markdown::Markdown),
        Format::Sarif => Box::new(sarif::Sarif),
        Format::Html => Box::new(html::Html),
        Format::Folded => Box::new(folded::Folded),
    }
}

/// The tool's version, as `--version` prints it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Binary units: `512 B`, `4.00 KiB`, `1.06 MiB`, `2.50 GiB` (two decimals from KiB up), as the
/// shim's exit line writes them.
pub use cudaleak_format::{human_bytes, human_bytes_exact};

pub use crate::analyze::MAX_NAME_BYTES;

/// Program-supplied text made safe to print anywhere, a terminal included: control characters
/// (C0, DEL, C1, so no ANSI escape sequence survives) and bidirectional-override characters
/// (which reorder what a terminal shows) are written as `\x1b` / `\u{202e}`. Names arrive cut
/// to [`MAX_NAME_BYTES`] by `analyze` (with a note of the rest, which must survive here); as a
/// backstop anything longer than that plus room for the note is cut too. Text that needs none of
/// this is borrowed unchanged.
pub fn clean(s: &str) -> Cow<'_, str> {
    const LIMIT: usize = MAX_NAME_BYTES + 64;
    let odd =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if s.len() <= LIMIT && !s.chars().any(odd) {
        return Cow::Borrowed(s);
    }
    let mut cut = s.len().min(LIMIT);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = String::with_capacity(cut + 32);
    for c in s[..cut].chars() {
        if !odd(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    if cut < s.len() {
        out.push_str(&format!("…[{} more bytes]", s.len() - cut));
    }
    Cow::Owned(out)
}

/// `420 ms`, `12.5 s`, `5m 30s`, `3h 07m`, `2d 04h`.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m {:02}s", s / 60, s % 60),
        3_600_000..=86_399_999 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86400, s % 86400 / 3600),
    }
}

/// `+1.50 MiB/h`, or `no rate (the dumps share a timestamp)`.
pub fn rate_text(bytes_per_hour: Option<f64>) -> String {
    match bytes_per_hour {
        // `as` saturates: an absurd rate prints as 16.00 EiB/h.
        Some(r) => format!("+{}/h", human_bytes(r.max(0.0).round() as u64)),
        None => "no rate (the dumps share a timestamp)".into(),
    }
}

/// A dump's place in a series: `snapshot 3`, `requested dump`, `exit`, `SIGTERM`.
pub fn point_label(p: &Point) -> String {
    match p.end {
        // A snapshot without a number is one the program asked for (`cudaleak_dump()`).
        format::End::Snapshot => match p.snapshot {
            Some(n) => format!("snapshot {n}"),
            None => "requested dump".into(),
        },
        format::End::Exit => "exit".into(),
        format::End::Signal => clean(p.signal.as_deref().unwrap_or("signal")).into_owned(),
        format::End::Detach => "detach".into(),
    }
}

/// A growth row's API as reports name it: a framework's own count with its device
/// (`torch.cuda.memory_allocated() (device 0)`), a callsite's API as it is.
pub fn growth_api(r: &crate::growth::GrowthRow) -> Cow<'_, str> {
    match &r.framework {
        Some(f) => Cow::Owned(format!("{} (device {})", r.api, f.device)),
        None => Cow::Borrowed(&r.api),
    }
}

/// `+4.00 KiB`, `-512 B`, `±0 B`.
pub fn signed_human(delta: i128) -> String {
    let mag = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
    match delta.signum() {
        1 => format!("+{}", human_bytes(mag)),
        -1 => format!("-{}", human_bytes(mag)),
        _ => "±0 B".into(),
    }
}

/// `4.00 MiB in 2 allocations`.
pub fn counts_text(c: Counts) -> String {
    format!(
        "{} in {}",
        human_bytes(c.bytes),
        plural(c.allocations, "allocation", "allocations")
    )
}

/// What a leak or cache group holds: `120 allocations`, or for library handles never destroyed
/// `40 cuBLAS handles never destroyed (120 allocations)`.
pub fn group_what(g: &crate::analyze::LeakGroup) -> String {
    let blocks = plural(g.allocations, "allocation", "allocations");
    match &g.handles {
        Some(h) => format!("{} never destroyed ({blocks})", h.text()),
        None => blocks,
    }
}

/// `1 allocation`, `2 allocations`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `4 more blocks`, `1 fewer block`; `None` when the count did not change.
pub fn blocks_change(delta: i128) -> Option<String> {
    let n = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
    match delta.signum() {
        1 => Some(plural(n, "more block", "more blocks")),
        -1 => Some(plural(n, "fewer block", "fewer blocks")),
        _ => None,
    }
}

/// A change of live memory: `+16.00 KiB, 4 more blocks`, `-192.00 KiB`, `1 more block`, or
/// `no change`; never `+0 blocks` or `-1 blocks`.
pub fn change_text(bytes: i128, blocks: i128) -> String {
    let bytes = (bytes != 0).then(|| signed_human(bytes));
    match (bytes, blocks_change(blocks)) {
        (Some(b), Some(k)) => format!("{b}, {k}"),
        (Some(b), None) => b,
        (None, Some(k)) => k,
        (None, None) => "no change".into(),
    }
}

/// [`change_text`] for the middle of a sentence: `+40.00 KiB (10 more blocks)`.
pub fn change_text_paren(bytes: i128, blocks: i128) -> String {
    match (bytes, blocks_change(blocks)) {
        (0, _) | (_, None) => change_text(bytes, blocks),
        (b, Some(k)) => format!("{} ({k})", signed_human(b)),
    }
}

/// `process_data(float*) at leak.cu:18 (leak)`; without a symbol `0x55d4c2a01a3f (leak+0x1a3f)`.
pub fn frame_text(f: &FrameView) -> String {
    frame_text_under(f, None)
}

/// `frame_text`, with a source file under `root` (a directory ending in `/`) shown relative to it.
pub fn frame_text_under(f: &FrameView, root: Option<&str>) -> String {
    let mut s = match &f.function {
        Some(name) => clean(name).into_owned(),
        None => format!("{:#x}", f.ip),
    };
    if let Some(file) = &f.file {
        s.push_str(" at ");
        let shown = root
            .and_then(|r| file.strip_prefix(r))
            .filter(|rel| !rel.is_empty())
            .unwrap_or(file);
        s.push_str(&clean(shown));
        if let Some(line) = f.line {
            s.push_str(&format!(":{line}"));
        }
    }
    match (f.module_name().map(clean), f.function.is_none(), f.offset()) {
        (Some(m), true, Some(off)) => s.push_str(&format!(" ({m}+{off:#x})")),
        (Some(m), _, _) => s.push_str(&format!(" ({m})")),
        (None, _, _) => {}
    }
    s
}

/// A function name for a human: C++ template arguments of a name longer than 80 bytes elided
/// (`c10::impl::wrap_kernel_functor_unboxed_<…>::call`), so a frame stays one readable line.
/// Machine formats keep the whole name.
pub fn short_function(name: &str) -> Cow<'_, str> {
    if name.len() <= 80 || !name.contains('<') {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(80);
    let mut depth = 0usize;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        // `operator<`, `operator<<=`, `operator->`… are names, not brackets.
        if depth == 0 && rest.starts_with("operator") {
            let ops = rest["operator".len()..]
                .find(|ch: char| !"<>=-".contains(ch))
                .unwrap_or(rest.len() - "operator".len());
            let end = "operator".len() + ops;
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        match c {
            '<' => {
                if depth == 0 {
                    out.push_str("<…>");
                }
                depth += 1;
            }
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// `frame_text_under` with [`short_function`] names: for text output.
pub fn frame_text_short(f: &FrameView, root: Option<&str>) -> String {
    match f.function.as_deref().map(short_function) {
        Some(Cow::Owned(short)) => {
            let mut g = f.clone();
            g.function = Some(short.into());
            frame_text_under(&g, root)
        }
        _ => frame_text_under(f, root),
    }
}

/// `… 18 frames in libtorch_cpu.so, libtorch_cuda.so, torch`: a folded run of frames.
pub fn folded_text(r: &crate::analyze::Folded) -> String {
    let n = plural(r.frames as u64, "frame", "frames");
    if r.modules.is_empty() {
        format!("… {n}")
    } else {
        let modules: Vec<Cow<'_, str>> = r.modules.iter().map(|m| clean(m)).collect();
        format!("… {n} in {}", modules.join(", "))
    }
}

/// `(device 0)`, `(managed, device 0)`, `(host)`, `(address space reserved)`.
pub fn placement(kind: format::Kind, device: Option<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    if kind != format::Kind::Device || device.is_none() {
        parts.push(kind_words(kind).to_string());
    }
    if let Some(d) = device {
        parts.push(format!("device {d}"));
    }
    format!("({})", parts.join(", "))
}

/// A kind in words, where its name alone would mislead: a reservation is address space, not
/// memory, and its bytes are not in any total.
pub fn kind_words(kind: format::Kind) -> &'static str {
    match kind {
        format::Kind::Registered => "registered host memory",
        format::Kind::Ipc => "opened through IPC",
        format::Kind::Reserved => "address space reserved",
        other => other.as_str(),
    }
}

/// How a process ended, in words.
pub fn ending(p: &format::Process) -> String {
    match p.end {
        format::End::Exit => "exited".into(),
        format::End::Signal => match &p.signal {
            Some(s) => format!("killed by {}", clean(s)),
            None => "killed by a signal".into(),
        },
        format::End::Snapshot => match p.snapshot {
            Some(n) => format!("snapshot {n}, still running"),
            None => "requested dump, still running".into(),
        },
        format::End::Detach => "detached, still running".into(),
    }
}

/// `pid 4711: ./app --n 3 (exited)`, with the rank when there is one.
pub fn process_label(p: &format::Process) -> String {
    let command = if p.argv.is_empty() {
        clean(&p.exe).into_owned()
    } else {
        let mut c = String::new();
        for a in &p.argv {
            if c.len() > MAX_NAME_BYTES {
                c.push_str(" …");
                break;
            }
            if !c.is_empty() {
                c.push(' ');
            }
            c.push_str(&clean(a));
        }
        c
    };
    let rank = p.rank.map_or(String::new(), |r| format!(", rank {r}"));
    format!("pid {}: {} ({}{rank})", p.pid, command, ending(p))
}

/// The name of a CUDA return code: runtime names for `cuda*` calls, driver names for `cu*`.
pub fn error_name(api: &str, code: i64) -> Option<&'static str> {
    let runtime = api.starts_with("cuda");
    Some(match (code, runtime) {
        (1, true) => "cudaErrorInvalidValue",
        (2, true) => "cudaErrorMemoryAllocation",
        (3, true) => "cudaErrorInitializationError",
        (4, true) => "cudaErrorCudartUnloading",
        (35, true) => "cudaErrorInsufficientDriver",
        (100, true) => "cudaErrorNoDevice",
        (101, true) => "cudaErrorInvalidDevice",
        (201, true) => "cudaErrorDeviceUninitialized",
        (400, true) => "cudaErrorInvalidResourceHandle",
        (801, true) => "cudaErrorNotSupported",
        (999, true) => "cudaErrorUnknown",
        (1, false) => "CUDA_ERROR_INVALID_VALUE",
        (2, false) => "CUDA_ERROR_OUT_OF_MEMORY",
        (3, false) => "CUDA_ERROR_NOT_INITIALIZED",
        (4, false) => "CUDA_ERROR_DEINITIALIZED",
        (100, false) => "CUDA_ERROR_NO_DEVICE",
        (101, false) => "CUDA_ERROR_INVALID_DEVICE",
        (201, false) => "CUDA_ERROR_INVALID_CONTEXT",
        (400, false) => "CUDA_ERROR_INVALID_HANDLE",
        (801, false) => "CUDA_ERROR_NOT_SUPPORTED",
        (999, false) => "CUDA_ERROR_UNKNOWN",
        _ => return None,
    })
}

/// `2 (cudaErrorMemoryAllocation)`, or just the number.
pub fn error_text(api: &str, code: i64) -> String {
    match error_name(api, code) {
        Some(name) => format!("{code} ({name})"),
        None => code.to_string(),
    }
}

/// Why the gate fails, in words; empty when it passes.
pub fn gate_reasons(f: &Findings) -> Vec<&'static str> {
    let mut r = Vec::new();
    if f.verdict.fails_on_leaks && f.verdict.leaks {
        r.push("leaks");
    }
    if f.verdict.fails_on_cached {
        r.push("cached memory (--fail-on strict)");
    }
    if f.verdict.fails_on_errors {
        r.push("bad frees");
    }
    r
}

/// A process's cached groups by cache, in order of the cache's first group (largest first):
/// (rule index, total, the groups).
pub fn cached_by_rule(
    p: &ProcessFindings,
) -> Vec<(usize, Counts, Vec<&crate::analyze::LeakGroup>)> {
    let mut out: Vec<(usize, Counts, Vec<&crate::analyze::LeakGroup>)> = Vec::new();
    for g in &p.cached {
        let Some(rule) = g.held_by else { continue };
        let slot = match out.iter().position(|(r, _, _)| *r == rule) {
            Some(i) => i,
            None => {
                let total = p.cached_per_rule.get(rule).copied().unwrap_or_default();
                out.push((rule, total, Vec::new()));
                out.len() - 1
            }
        };
        out[slot].2.push(g);
    }
    out
}

/// The first frame of the program's own code in a stack ([`FrameView::is_own`]).
pub fn own_frame(s: &crate::analyze::StackView) -> Option<&FrameView> {
    s.frames.iter().map(|f| &**f).find(|f| f.is_own())
}

/// The caches that hold something over all processes, largest first: (rule index, total).
pub fn cached_totals(f: &Findings) -> Vec<(usize, Counts)> {
    let mut v: Vec<(usize, Counts)> = f
        .cached_per_rule
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, c)| c.allocations > 0)
        .collect();
    v.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0)));
    v
}

/// Sum of the per-rule counts over all processes.
pub fn suppressed_per_rule(f: &Findings) -> Vec<crate::analyze::Counts> {
    let mut out = vec![crate::analyze::Counts::default(); f.rules.len()];
    for p in &f.processes {
        for (i, c) in p.suppressed.iter().enumerate() {
            if let Some(o) = out.get_mut(i) {
                o.add(*c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_units_with_two_decimals() {
        assert_eq!(change_text(16384, 4), "+16.00 KiB, 4 more blocks");
        assert_eq!(change_text(-196_608, -1), "-192.00 KiB, 1 fewer block");
        assert_eq!(change_text(1024, 0), "+1.00 KiB");
        assert_eq!(change_text(0, 1), "1 more block");
        assert_eq!(change_text(0, 0), "no change");
        assert_eq!(change_text_paren(40960, 10), "+40.00 KiB (10 more blocks)");
        assert_eq!(change_text_paren(40960, 0), "+40.00 KiB");
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.00 KiB");
        assert_eq!(human_bytes(4096), "4.00 KiB");
        assert_eq!(human_bytes(75_878), "74.10 KiB");
        assert_eq!(human_bytes(1 << 20), "1.00 MiB");
        assert_eq!(human_bytes(1_111_490), "1.06 MiB");
        assert_eq!(human_bytes((1 << 20) - 1), "1.00 MiB");
        assert_eq!(human_bytes(64 << 30), "64.00 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.00 EiB");
    }

    #[test]
    fn long_cpp_names_lose_their_template_arguments_in_text() {
        let long = "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (c10::DispatchKeySet, at::Tensor const&), &torch::autograd::VariableType::(anonymous namespace)::addmm>, at::Tensor>, at::Tensor (c10::DispatchKeySet, at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)";
        assert_eq!(
            short_function(long),
            "c10::impl::wrap_kernel_functor_unboxed_<…>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)"
        );
        assert_eq!(
            short_function("std::vector<int>::push_back"),
            "std::vector<int>::push_back",
            "short names stay"
        );
        let shift = format!("{}::operator<<(std::ostream&)", "n".repeat(80));
        assert_eq!(
            short_function(&shift),
            shift,
            "an operator's brackets are its name"
        );
    }

    #[test]
    fn frames_read_like_lsan_with_module_file_names() {
        let f = FrameView {
            function: Some("process_data(float*)".into()),
            file: Some("cuda-samples/leak_error_path.cu".into()),
            line: Some(18),
            module: Some("/home/dev/leak_error_path".into()),
            ip: 0x55d4c2a01a3f,
            ..FrameView::default()
        }
        .with_offset(Some(0x1a3f));
        assert_eq!(
            frame_text(&f),
            "process_data(float*) at cuda-samples/leak_error_path.cu:18 (leak_error_path)"
        );
        let mut bare = f.clone();
        (bare.function, bare.file, bare.line) = (None, None, None);
        assert_eq!(frame_text(&bare), "0x55d4c2a01a3f (leak_error_path+0x1a3f)");
        let mut abs = bare.clone();
        (abs.file, abs.line) = (Some("/work/main/cuda-samples/leak.cu".into()), Some(3));
        assert!(frame_text_under(&abs, Some("/work/main/")).contains(" at cuda-samples/leak.cu:3 "));
        assert!(frame_text_under(&abs, Some("/elsewhere/"))
            .contains(" at /work/main/cuda-samples/leak.cu:3 "));
    }

    #[test]
    fn program_text_cannot_carry_terminal_escapes_or_reorder_the_line() {
        assert_eq!(clean("process_data(float*)"), "process_data(float*)");
        assert!(matches!(clean("plain"), Cow::Borrowed(_)));
        assert_eq!(
            clean("evil\x1b[2J\x1b]0;pwned\x07"),
            "evil\\x1b[2J\\x1b]0;pwned\\x07"
        );
        assert_eq!(clean("a\nb\r\u{9b}c"), "a\\x0ab\\x0d\\x9bc");
        assert_eq!(clean("abc\u{202e}fed"), "abc\\u{202e}fed");
        let long = "é".repeat(MAX_NAME_BYTES);
        let c = clean(&long);
        assert!(c.len() < MAX_NAME_BYTES + 96, "{}", c.len());
        assert!(c.ends_with(&format!("…[{} more bytes]", MAX_NAME_BYTES - 64)));
        let noted = crate::analyze::cut(&long);
        assert_eq!(clean(&noted), noted.as_str());
    }

    #[test]
    fn durations_and_rates_read_naturally() {
        assert_eq!(human_duration(420), "420 ms");
        assert_eq!(human_duration(12_500), "12.5 s");
        assert_eq!(human_duration(330_000), "5m 30s");
        assert_eq!(human_duration(3 * 3_600_000 + 7 * 60_000), "3h 07m");
        assert_eq!(human_duration(2 * 86_400_000 + 4 * 3_600_000), "2d 04h");
        assert_eq!(rate_text(Some(1_572_864.0)), "+1.50 MiB/h");
        assert_eq!(rate_text(Some(f64::INFINITY)), "+16.00 EiB/h");
        assert!(rate_text(None).starts_with("no rate"));
    }

    #[test]
    fn placement_names_kind_and_device() {
        use format::Kind;
        assert_eq!(placement(Kind::Device, Some(0)), "(device 0)");
        assert_eq!(placement(Kind::Managed, Some(1)), "(managed, device 1)");
        assert_eq!(placement(Kind::Host, None), "(host)");
        assert_eq!(placement(Kind::Device, None), "(device)");
        assert_eq!(placement(Kind::Reserved, None), "(address space reserved)");
        assert_eq!(placement(Kind::Mapped, Some(0)), "(mapped, device 0)");
        assert_eq!(
            placement(Kind::Registered, None),
            "(registered host memory)"
        );
        assert_eq!(
            placement(Kind::Ipc, Some(1)),
            "(opened through IPC, device 1)"
        );
    }

    #[test]
    fn error_names_follow_the_api_family() {
        assert_eq!(error_text("cudaMalloc", 2), "2 (cudaErrorMemoryAllocation)");
        assert_eq!(
            error_text("cuMemAlloc_v2", 2),
            "2 (CUDA_ERROR_OUT_OF_MEMORY)"
        );
        assert_eq!(error_text("cudaMalloc", 12345), "12345");
    }
}
