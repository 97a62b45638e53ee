//! What a user sees of a stack: the frames shown (internal ones hidden, framework and template
//! runs folded into one line each), the names cut to a bound, and the frame a one-line listing
//! names. Decides nothing about grouping: the callsite is computed from the frames before
//! folding (`crate::callsite`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::load::schema as format;
use format::Name;

use crate::frame::python_library_of;
pub use crate::frame::{FrameView, LongKey};
pub use crate::names::{basename, cut, MAX_NAME_BYTES};

/// A stack as shown: user frames (or all frames with `--show-internal`), cut to `--frames`.
/// Made once per stack and shared, whole, by every group, callsite and event from that stack
/// (a clone is a reference count): its parts are read through `Deref`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StackView(Arc<StackParts>);

/// What a [`StackView`] holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StackParts {
    pub frames: Arc<[Arc<FrameView>]>,
    /// Internal frames left out.
    pub hidden: usize,
    /// Visible frames left out by `--frames`.
    pub omitted: usize,
    /// Runs of frames folded into one line each (without `--native`: native runs in stacks with
    /// Python frames, the toolkit's header templates in others), in stack order.
    pub folded: Vec<Folded>,
    /// The frame a one-line listing names (index into `frames`): the first, or for memory a
    /// cache or library handle holds, the program's own call into it.
    pub entry: usize,
}

impl StackView {
    pub fn new(parts: StackParts) -> Self {
        StackView(Arc::new(parts))
    }
}

impl std::ops::Deref for StackView {
    type Target = StackParts;
    fn deref(&self) -> &StackParts {
        &self.0
    }
}

impl StackParts {
    /// The frame a one-line listing names ([`StackParts::entry`]).
    pub fn where_frame(&self) -> Option<&FrameView> {
        self.frames
            .get(self.entry)
            .or_else(|| self.frames.first())
            .map(|f| &**f)
    }
}

/// Native frames (and Python frames of installed packages) next to the program's Python frames,
/// shown as one line: `… 18 frames in libtorch_cpu.so, torch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The index in `frames` of the frame the run stood before (`frames.len()`: after the last).
    pub at: usize,
    pub frames: usize,
    /// The run's modules (file names) and Python packages, innermost first, each once.
    pub modules: Vec<String>,
}

/// The package of a Python frame in installed code — `torch` for
/// `…/site-packages/torch/nn/modules/linear.py`, the file name for the standard library or a
/// frozen module — or `None` for the program's own scripts.
pub(super) fn python_library(f: &format::Frame) -> Option<&str> {
    python_library_of(f.file.as_deref()?)
}

/// The header library of the CUDA toolkit a frame's code comes from — `thrust`, `cub` or
/// `libcu++` (CCCL's template code, instantiated in the program's own binary) — by its source
/// file where the dump names one, else by its function's namespace.
pub(super) fn header_library(f: &format::Frame) -> Option<&'static str> {
    const BY_DIR: [(&str, &str); 4] = [
        ("/thrust/", "thrust"),
        ("/cub/", "cub"),
        ("/cuda/std/", "libcu++"),
        ("/libcudacxx/", "libcu++"),
    ];
    if let Some(file) = f.file.as_deref() {
        let in_include = file.contains("/include/") || file.contains("/cccl/");
        return BY_DIR
            .iter()
            .find(|(dir, _)| in_include && file.contains(dir))
            .map(|&(_, lib)| lib);
    }
    let name = f.function.as_deref()?;
    // Demangled names may start with a return type: `void thrust::…` (a space before any
    // template or parameter list).
    let head = name.find(['(', '<']).unwrap_or(name.len());
    let name = name[..head]
        .find(' ')
        .map_or(name, |space| &name[space + 1..]);
    [
        ("thrust::", "thrust"),
        ("cub::", "cub"),
        ("cuda::std::", "libcu++"),
    ]
    .iter()
    .find(|(ns, _)| name.starts_with(ns))
    .map(|&(_, lib)| lib)
}

/// In a stack without Python frames, folds each run of the toolkit's header-library frames
/// (thrust, CUB, libcu++: nine frames of templates above a `thrust::device_vector` the program
/// made) into one line, when a frame of the program's own is left to show first.
pub(super) fn fold_header_templates(
    all: &[format::Frame],
    frames: &[usize],
) -> (Vec<usize>, Vec<Folded>) {
    let lib = |i: usize| header_library(&all[i]);
    if frames.iter().all(|&i| lib(i).is_some()) || !frames.iter().any(|&i| lib(i).is_some()) {
        return (frames.to_vec(), Vec::new());
    }
    fold_runs(frames, |i| lib(i).is_none(), |i| lib(i).map(String::from))
}

/// `frames` (indices into a stack) with each run of frames not kept folded into one
/// [`Folded`], which names the run by the `label`s of its frames, each once, innermost first.
fn fold_runs(
    frames: &[usize],
    keep: impl Fn(usize) -> bool,
    label: impl Fn(usize) -> Option<String>,
) -> (Vec<usize>, Vec<Folded>) {
    let (mut kept, mut folded): (Vec<usize>, Vec<Folded>) = (Vec::new(), Vec::new());
    let mut run: Option<Folded> = None;
    for &i in frames {
        if keep(i) {
            folded.extend(run.take());
            kept.push(i);
            continue;
        }
        let r = run.get_or_insert_with(|| Folded {
            at: kept.len(),
            frames: 0,
            modules: Vec::new(),
        });
        r.frames += 1;
        if let Some(m) = label(i) {
            if !r.modules.contains(&m) {
                r.modules.push(m);
            }
        }
    }
    folded.extend(run);
    (kept, folded)
}

/// Folds the runs of native frames of `frames` (indices into `all`) when any is a Python frame —
/// and with them the Python frames of installed packages and the standard library, when a
/// Python frame of the program's own is left: the frames kept, and the folded runs.
pub(super) fn fold_native(all: &[format::Frame], frames: &[usize]) -> (Vec<usize>, Vec<Folded>) {
    let python = |i: &usize| all[*i].is_python();
    let own = |i: &usize| python(i) && python_library(&all[*i]).is_none();
    if !frames.iter().any(python) {
        return fold_header_templates(all, frames);
    }
    let keep_libraries = !frames.iter().any(own);
    fold_runs(
        frames,
        |i| own(&i) || (keep_libraries && python(&i)),
        |i| {
            let f = &all[i];
            let module = if f.is_python() {
                python_library(f)
            } else {
                f.module.as_deref().map(basename)
            };
            module.map(cut)
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Internal frames

// Which modules and functions are internal, and which functions are the entry of a recorded
// CUDA call, is the format crate's to say (the shim's hook list and the table beside these
// rules agree by test): `cudaleak env --names` prints the same rules.
pub(super) use format::frames::{
    is_api_entry, is_internal_function, is_internal_module, is_startup_function,
};

pub(super) fn frame_is_internal(f: &format::Frame) -> bool {
    f.module.as_deref().is_some_and(is_internal_module)
        || f.function
            .as_deref()
            .is_some_and(|n| is_internal_function(n) || is_startup_function(n))
}

/// A frame of the C library that its symbol table does not name: start-up and thread entry
/// code on distributions whose libc carries no local symbols (Ubuntu's `__libc_start_call_main`).
pub(super) fn is_unnamed_libc(f: &format::Frame) -> bool {
    f.function.is_none()
        && f.module
            .as_deref()
            .is_some_and(|m| basename(m).starts_with("libc.so"))
}

/// Indices of the frames a user sees: internal frames anywhere are dropped, and so are API
/// entry frames at the innermost end, everything below `main`, and unnamed C library frames at
/// the outermost end. If nothing is left, every frame is shown.
pub fn visible_frames(frames: &[format::Frame], api: &str, show_internal: bool) -> Vec<usize> {
    if show_internal {
        return (0..frames.len()).collect();
    }
    let mut out: Vec<usize> = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        if frame_is_internal(f) {
            continue;
        }
        let leading = out.is_empty();
        if leading && !f.is_python() && f.function.as_deref().is_some_and(|n| is_api_entry(n, api))
        {
            continue;
        }
        out.push(i);
        if f.function.as_deref() == Some("main") && !f.is_python() {
            break; // what calls main is the C start-up code
        }
    }
    while out.len() > 1 && out.last().is_some_and(|&i| is_unnamed_libc(&frames[i])) {
        out.pop();
    }
    if out.is_empty() {
        return (0..frames.len()).collect();
    }
    out
}

/// The process, with its names cut to [`MAX_NAME_BYTES`] and at most 4096 argv words.
pub fn process_view(p: &format::Process) -> format::Process {
    let mut argv: Vec<String> = p.argv.iter().take(4096).map(|a| cut(a)).collect();
    if p.argv.len() > 4096 {
        argv.push(format!("…[{} more arguments]", p.argv.len() - 4096));
    }
    format::Process {
        exe: cut(&p.exe),
        argv,
        signal: p.signal.as_deref().map(cut),
        recording_stopped: p.recording_stopped.as_deref().map(cut),
        pid: p.pid,
        ppid: p.ppid,
        rank: p.rank,
        start_unix_ms: p.start_unix_ms,
        end_unix_ms: p.end_unix_ms,
        end: p.end,
        snapshot: p.snapshot,
        forked_from: p.forked_from,
    }
}

/// `cut` for a name from the dump: itself (shared) when short enough.
pub(super) fn cut_name(s: &Name) -> Name {
    if s.len() <= MAX_NAME_BYTES {
        s.clone()
    } else {
        cut(s).into()
    }
}

/// The table through which [`frame_view`] shares views.
static VIEWS: Mutex<Option<HashSet<Arc<FrameView>>>> = Mutex::new(None);

/// Gives back the table that shares views, once every dump is read: the views live on in the
/// findings, and a report writes without it (on 100 000 distinct frames, its slots were 5 MB).
pub fn forget_shared_views() {
    let mut views = VIEWS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *views = None;
}

/// The view of `f`, shared with every stack that shows the same frame: a program has far fewer
/// distinct frames than stacks (100 000 distinct stacks of one program share a few hundred
/// frames), so a report holds each once.
pub(super) fn frame_view(f: &format::Frame, internal: bool) -> Arc<FrameView> {
    let view = FrameView {
        internal,
        function: f.function.as_ref().map(cut_name),
        file: f.file.as_ref().map(cut_name),
        line: f.line,
        module: f.module.as_ref().map(cut_name),
        ip: f.ip.0,
        python: f.is_python(),
        long: LongKey::of(
            f.function.as_deref(),
            f.file.as_deref(),
            f.module.as_deref(),
        ),
        ..FrameView::default()
    }
    .with_offset(f.offset.map(|h| h.0));
    let mut views = VIEWS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let views = views.get_or_insert_with(HashSet::new);
    if let Some(v) = views.get(&view) {
        return Arc::clone(v);
    }
    let v = Arc::new(view);
    views.insert(Arc::clone(&v));
    v
}
