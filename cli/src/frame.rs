//! [`FrameView`]: one frame as reporters show it and as a callsite's identity reads it — made
//! once per distinct frame and shared by every stack, group and callsite that has it — and
//! what it says of itself (the program's own code or a library's, its module's name).
//!
//! A frame is held once: the callsite (`crate::callsite`) compares, orders and hashes the same
//! object the reports print, through its key, rather than keeping a second copy of every frame.
//! No analysis and no formatting here.

use crate::hash::fnv1a;
use crate::names::{basename, MAX_NAME_BYTES};
use cudaleak_format::Name;

/// One frame as reporters show it. Its names are shared with the dump and every other view
/// of the same name (cut to [`MAX_NAME_BYTES`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FrameView {
    pub function: Option<Name>,
    pub file: Option<Name>,
    pub line: Option<u32>,
    /// Full path of the module, as in the dump.
    pub module: Option<Name>,
    /// `ip` in its module, read as [`FrameView::offset`] and set by [`FrameView::with_offset`]:
    /// a value and whether there is one, since an `Option<u64>` takes 16 bytes, and a view of
    /// 96 bytes takes a chunk of memory a seventh larger than one of 88 (a view per frame, with
    /// every frame distinct).
    pub(crate) offset: u64,
    pub(crate) has_offset: bool,
    pub ip: u64,
    /// A Python function's frame (the dump's `kind: python`).
    pub python: bool,
    /// Inside the CUDA runtime/driver, the shim or start-up code (shown only with
    /// `--show-internal`).
    pub internal: bool,
    /// What the identity needs of names that were cut (longer than [`MAX_NAME_BYTES`]); `None`
    /// for every frame whose names are whole, that is almost all.
    pub long: Option<Box<LongKey>>,
}

/// The identity of a cut name: the length of the head it kept (the bytes before `…[N more
/// bytes]`), and the whole name's length and [`fnv1a`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Whole {
    pub head: usize,
    pub len: usize,
    pub hash: u64,
}

/// The identities of a frame's names that were cut. The module's is of its file name: the
/// head kept of it, and the whole when that is cut too.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LongKey {
    pub function: Option<Whole>,
    pub file: Option<Whole>,
    pub module: Option<(Name, Option<Whole>)>,
}

/// Where `s` is cut: its longest head of at most [`MAX_NAME_BYTES`] on a character boundary.
pub fn head_len(s: &str) -> usize {
    let mut end = MAX_NAME_BYTES.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

fn whole(s: &str) -> Option<Whole> {
    (s.len() > MAX_NAME_BYTES).then(|| Whole {
        head: head_len(s),
        len: s.len(),
        hash: fnv1a(s.as_bytes()),
    })
}

impl LongKey {
    /// What a frame with these names (as the dump has them) needs kept beside its cut names;
    /// `None` when no name is cut.
    pub fn of(
        function: Option<&str>,
        file: Option<&str>,
        module: Option<&str>,
    ) -> Option<Box<Self>> {
        let function = function.and_then(whole);
        let file = file.and_then(whole);
        let module = module.filter(|m| m.len() > MAX_NAME_BYTES).map(|m| {
            let b = basename(m);
            (Name::from(&b[..head_len(b)]), whole(b))
        });
        if function.is_none() && file.is_none() && module.is_none() {
            return None;
        }
        Some(Box::new(LongKey {
            function,
            file,
            module,
        }))
    }
}

impl FrameView {
    /// `ip` in its module's own address space (the dump's `offset`).
    pub fn offset(&self) -> Option<u64> {
        self.has_offset.then_some(self.offset)
    }

    /// The same frame with `offset` as its offset.
    pub fn with_offset(mut self, offset: Option<u64>) -> Self {
        self.offset = offset.unwrap_or(0);
        self.has_offset = offset.is_some();
        self
    }

    /// A frame of the program's own code: a source line outside the CUDA libraries (NCCL is
    /// built with line tables) and the installed Python packages and standard library.
    pub fn is_own(&self) -> bool {
        !self.internal
            && self.line.is_some()
            && !self.module.as_deref().is_some_and(nvidia_library)
            && self
                .file
                .as_deref()
                .is_some_and(|file| !file.starts_with('<') && python_library_of(file).is_none())
    }

    /// The module's file name (`leak_error_path` for `/home/dev/leak_error_path`).
    pub fn module_name(&self) -> Option<&str> {
        self.module.as_deref().map(basename)
    }

    /// The module's file name; for a Python frame, its script's (`train.py`).
    pub fn module_or_script(&self) -> Option<&str> {
        match (self.python, &self.file) {
            (true, Some(file)) => Some(basename(file)),
            _ => self.module_name(),
        }
    }
}

/// A module of NVIDIA's CUDA libraries (cuBLAS, cuDNN, NCCL …), whatever its frames carry.
fn nvidia_library(module: &str) -> bool {
    const PREFIXES: [&str; 13] = [
        "libcublas",
        "libcudnn",
        "libcufft",
        "libcurand",
        "libcusparse",
        "libcusolver",
        "libnccl",
        "libnvrtc",
        "libnvJitLink",
        "libcupti",
        "libnvjpeg",
        "libnpp",
        "libcutensor",
    ];
    let name = basename(module);
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The package of a Python source file in installed code — `torch` for
/// `…/site-packages/torch/nn/modules/linear.py`, the file name for the standard library or a
/// frozen module — or `None` for the program's own scripts.
pub fn python_library_of(file: &str) -> Option<&str> {
    for dir in ["/site-packages/", "/dist-packages/"] {
        if let Some((_, rest)) = file.split_once(dir) {
            return Some(rest.split('/').next().unwrap_or(rest));
        }
    }
    let stdlib = file.contains("/lib/python3.") || file.starts_with("<frozen ");
    stdlib.then(|| basename(file))
}
