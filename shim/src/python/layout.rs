//! Where CPython keeps what a Python stack is made of, per minor version (x86-64 and other LP64
//! targets, the default, GIL-enabled build): byte offsets into the thread state, the frames,
//! code objects, `bytes` and `str` objects. Plain data; nothing here reads memory.
//!
//! Sources: the headers of each version (`Include/cpython/pystate.h`, `cpython/code.h`,
//! `cpython/frameobject.h` (3.9, 3.10), `internal/pycore_frame.h` (3.11+),
//! `internal/pycore_interpframe_structs.h` and `pycore_stackref.h` (3.14+),
//! `cpython/unicodeobject.h`).
//! Every number is checked by this file's test, which compiles `shim/tests/python_layout_probe.c`
//! (`offsetof`) against the headers of each version installed, and by `tests/tests/python.rs`,
//! which runs scripts under each installed interpreter (docs/python.md says which were).
//! A version without a layout here gets no Python frames.
#![forbid(unsafe_code)]

/// How the current frame is found from the thread state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstFrame {
    /// `tstate->frame` (3.9, 3.10: a `PyFrameObject`), `tstate->current_frame` (3.13+: a
    /// `_PyInterpreterFrame`).
    Direct(usize),
    /// `tstate->cframe->current_frame` (3.11, 3.12: a `_PyInterpreterFrame`).
    ThroughCFrame { cframe: usize, current_frame: usize },
}

/// Where a frame says which instruction it is executing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instr {
    /// `int f_lasti`: a byte offset into `co_code` (3.9), -1 before the first instruction.
    LastiBytes(usize),
    /// `int f_lasti`: an index of 2-byte code units into `co_code` (3.10).
    LastiUnits(usize),
    /// A pointer to a code unit inside the code object's inline bytecode (3.11+:
    /// `prev_instr`, or `instr_ptr` from 3.13).
    Pointer(usize),
}

/// The format of the code object's line table (`co_lnotab` / `co_linetable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFormat {
    /// 3.9 `co_lnotab`: (address delta, signed line delta) byte pairs.
    Lnotab,
    /// 3.10 `co_linetable` (PEP 626): (address delta, signed line delta, -128 = no line) pairs.
    Pep626,
    /// 3.11+ `co_linetable` (PEP 657 location table): varint entries of code-unit lengths.
    Pep657,
}

/// The frame fields of one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    pub back: usize,
    pub code: usize,
    /// Tag bits of the code reference, cleared before it is followed: from 3.14 `f_executable`
    /// is a `_PyStackRef` whose low bit (`Py_TAG_REFCNT`) marks a deferred reference.
    pub code_tag_bits: usize,
    pub instr: Instr,
    /// `char owner` (3.11+).
    pub owner: Option<usize>,
    /// `bool is_entry` (3.11 only): the frame a `_PyEval_EvalFrameDefault` call started with.
    pub is_entry: Option<usize>,
    /// `FRAME_OWNED_BY_GENERATOR` (never incomplete).
    pub owned_by_generator: u8,
    /// The owner of the entry frame each `_PyEval_EvalFrameDefault` call pushes below the
    /// Python frames it runs: `FRAME_OWNED_BY_CSTACK` (3.12, 3.13), `FRAME_OWNED_BY_INTERPRETER`
    /// (3.14, where `FRAME_OWNED_BY_CSTACK` is 4 and assigned nowhere; 3.15, which dropped it).
    /// A frame of this owner or a higher one is not a Python frame (as 3.14's
    /// `_PyFrame_IsIncomplete` decides).
    pub owned_by_cstack: Option<u8>,
}

/// The code object fields of one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeLayout {
    pub filename: usize,
    /// `co_qualname` (3.11+), else `co_name`.
    pub name: usize,
    pub qualified: bool,
    pub firstlineno: usize,
    pub linetable: usize,
    pub line_format: LineFormat,
    /// `co_code_adaptive`: the inline bytecode (3.11+).
    pub code_adaptive: Option<usize>,
    /// `_co_firsttraceable` (3.11+, in code units): a frame whose instruction lies before it
    /// has not started (an incomplete frame).
    pub firsttraceable: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub version: (u32, u32),
    pub tstate_thread_id: usize,
    pub first_frame: FirstFrame,
    pub frame: FrameLayout,
    pub code: CodeLayout,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start.
    pub unicode_ascii_data: usize,
    /// `sizeof(PyCompactUnicodeObject)`: where a compact non-ASCII string's characters start.
    pub unicode_compact_data: usize,
}

/// Shared by every version: `ob_type`, `ob_size`, `PyBytesObject.ob_sval`, `PyASCIIObject.length`
/// and its `state` bit field (interned:2, kind:3, compact:1, ascii:1).
pub const OB_TYPE: usize = 8;
pub const OB_SIZE: usize = 16;
pub const BYTES_SVAL: usize = 32;
pub const UNICODE_LENGTH: usize = 16;
pub const UNICODE_STATE: usize = 32;
/// `PyThreadState.interp`, after `prev` and `next` in every version.
pub const TSTATE_INTERP: usize = 16;

const V3_9: Layout = Layout {
    version: (3, 9),
    tstate_thread_id: 176,
    first_frame: FirstFrame::Direct(24),
    frame: FrameLayout {
        back: 24,
        code: 32,
        code_tag_bits: 0,
        instr: Instr::LastiBytes(104),
        owner: None,
        is_entry: None,
        owned_by_generator: 0,
        owned_by_cstack: None,
    },
    code: CodeLayout {
        filename: 104,
        name: 112,
        qualified: false,
        firstlineno: 40,
        linetable: 120,
        line_format: LineFormat::Lnotab,
        code_adaptive: None,
        firsttraceable: None,
    },
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
};

const V3_10: Layout = Layout {
    version: (3, 10),
    frame: FrameLayout {
        instr: Instr::LastiUnits(96),
        ..V3_9.frame
    },
    code: CodeLayout {
        line_format: LineFormat::Pep626,
        ..V3_9.code
    },
    ..V3_9
};

const V3_11: Layout = Layout {
    version: (3, 11),
    tstate_thread_id: 152,
    first_frame: FirstFrame::ThroughCFrame {
        cframe: 56,
        current_frame: 8,
    },
    frame: FrameLayout {
        back: 48,
        code: 32,
        code_tag_bits: 0,
        instr: Instr::Pointer(56),
        owner: Some(69),
        is_entry: Some(68),
        owned_by_generator: 1,
        owned_by_cstack: None,
    },
    code: CodeLayout {
        filename: 112,
        name: 128,
        qualified: true,
        firstlineno: 72,
        linetable: 136,
        line_format: LineFormat::Pep657,
        code_adaptive: Some(184),
        firsttraceable: Some(168),
    },
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
};

const V3_12: Layout = Layout {
    version: (3, 12),
    tstate_thread_id: 136,
    first_frame: FirstFrame::ThroughCFrame {
        cframe: 56,
        current_frame: 0,
    },
    frame: FrameLayout {
        back: 8,
        code: 0,
        code_tag_bits: 0,
        instr: Instr::Pointer(56),
        owner: Some(70),
        is_entry: None,
        owned_by_generator: 1,
        owned_by_cstack: Some(3),
    },
    code: CodeLayout {
        firstlineno: 68,
        code_adaptive: Some(192),
        firsttraceable: Some(176),
        ..V3_11.code
    },
    unicode_ascii_data: 40,
    unicode_compact_data: 56,
};

const V3_13: Layout = Layout {
    version: (3, 13),
    tstate_thread_id: 152,
    first_frame: FirstFrame::Direct(72),
    code: CodeLayout {
        code_adaptive: Some(200),
        firsttraceable: Some(184),
        ..V3_12.code
    },
    ..V3_12
};

const V3_14: Layout = Layout {
    version: (3, 14),
    frame: FrameLayout {
        code_tag_bits: 1,
        owner: Some(74),
        ..V3_13.frame
    },
    code: CodeLayout {
        code_adaptive: Some(208),
        firsttraceable: Some(192),
        ..V3_13.code
    },
    ..V3_13
};

/// 3.15 moved `thread_id` and dropped `FRAME_OWNED_BY_CSTACK`; the rest is 3.14's.
const V3_15: Layout = Layout {
    version: (3, 15),
    tstate_thread_id: 176,
    ..V3_14
};

pub const ALL: [Layout; 7] = [V3_9, V3_10, V3_11, V3_12, V3_13, V3_14, V3_15];

/// The layout of CPython `major.minor`, if known.
pub fn for_version(major: u32, minor: u32) -> Option<&'static Layout> {
    ALL.iter().find(|l| l.version == (major, minor))
}

/// `(major, minor)` of a version string such as `"3.11.7 (main, …)"`.
pub fn parse_version(s: &[u8]) -> Option<(u32, u32)> {
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit() && *b != b'.')
        .unwrap_or(s.len());
    let text = std::str::from_utf8(&s[..end]).ok()?;
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `(major, minor)` of `Py_Version` (3.11+: `0xMMmmppRS`).
pub fn from_hex_version(v: u64) -> (u32, u32) {
    (((v >> 24) & 0xff) as u32, ((v >> 16) & 0xff) as u32)
}

/// The probe's name for each offset of `l`, as `shim/tests/python_layout_probe.c` prints them.
#[cfg(test)]
fn named_offsets(l: &Layout) -> Vec<(&'static str, usize)> {
    let mut v = vec![
        ("tstate.thread_id", l.tstate_thread_id),
        ("tstate.interp", TSTATE_INTERP),
        ("frame.back", l.frame.back),
        ("frame.code", l.frame.code),
        ("code.filename", l.code.filename),
        ("code.name", l.code.name),
        ("code.firstlineno", l.code.firstlineno),
        ("code.linetable", l.code.linetable),
        ("object.type", OB_TYPE),
        ("var.size", OB_SIZE),
        ("bytes.sval", BYTES_SVAL),
        ("unicode.length", UNICODE_LENGTH),
        ("unicode.state", UNICODE_STATE),
        ("unicode.ascii_data", l.unicode_ascii_data),
        ("unicode.compact_data", l.unicode_compact_data),
        ("unicode.state_bits", 1 << 2 | 1 << 5 | 1 << 6),
    ];
    match l.first_frame {
        FirstFrame::Direct(o) => v.push(("tstate.frame", o)),
        FirstFrame::ThroughCFrame {
            cframe,
            current_frame,
        } => {
            v.push(("tstate.cframe", cframe));
            v.push(("cframe.current_frame", current_frame));
        }
    }
    match l.frame.instr {
        Instr::LastiBytes(o) | Instr::LastiUnits(o) => v.push(("frame.lasti", o)),
        Instr::Pointer(o) => v.push(("frame.instr", o)),
    }
    let optional = [
        ("frame.owner", l.frame.owner),
        ("frame.is_entry", l.frame.is_entry),
        ("code.code_adaptive", l.code.code_adaptive),
        ("code.firsttraceable", l.code.firsttraceable),
        ("owner.cstack", l.frame.owned_by_cstack.map(usize::from)),
    ];
    v.extend(optional.iter().filter_map(|&(n, o)| Some((n, o?))));
    if l.frame.owner.is_some() {
        v.push(("owner.generator", usize::from(l.frame.owned_by_generator)));
    }
    if l.frame.code_tag_bits != 0 {
        v.push(("frame.code_tag_bits", l.frame.code_tag_bits));
    }
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_strings_and_hex() {
        assert_eq!(parse_version(b"3.11.7 (main, May  9 2026)"), Some((3, 11)));
        assert_eq!(parse_version(b"3.9.18"), Some((3, 9)));
        assert_eq!(parse_version(b"3.9.18\0"), Some((3, 9)));
        assert_eq!(parse_version(b"x"), None);
        assert_eq!(from_hex_version(0x030c03f0), (3, 12));
        assert_eq!(for_version(3, 14).map(|l| l.version), Some((3, 14)));
        assert_eq!(for_version(3, 15).map(|l| l.version), Some((3, 15)));
        assert!(for_version(3, 16).is_none());
        assert!(for_version(3, 8).is_none());
    }

    /// Interpreters `pythonM.m` on PATH and under pyenv's versions directory.
    pub(crate) fn interpreters(major: u32, minor: u32) -> Vec<std::path::PathBuf> {
        let name = format!("python{major}.{minor}");
        let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        let root = std::env::var_os("PYENV_ROOT")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".pyenv")));
        if let Some(versions) = root.map(|r| r.join("versions")) {
            if let Ok(entries) = std::fs::read_dir(versions) {
                dirs.extend(entries.filter_map(|e| Some(e.ok()?.path().join("bin"))));
            }
        }
        dirs.into_iter()
            .map(|d| d.join(&name))
            .filter(|p| p.is_file())
            .collect()
    }

    /// The include directory of the first interpreter of that version that answers, with
    /// internal headers where the version has them.
    pub(crate) fn include_dir(major: u32, minor: u32) -> Option<std::path::PathBuf> {
        interpreters(major, minor).into_iter().find_map(|py| {
            let out = std::process::Command::new(py)
                .args([
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['include'])",
                ])
                .output()
                .ok()?;
            let dir = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
            let internal = minor < 11 || dir.join("internal/pycore_frame.h").is_file();
            (out.status.success() && dir.join("Python.h").is_file() && internal).then_some(dir)
        })
    }

    /// Builds the C program `probe` (in shim/tests/) against the headers of Python
    /// `major.minor`, runs it and returns the `name offset` lines it prints; `None` (and a line
    /// on stderr) where this machine has no headers of that version.
    pub(crate) fn header_probe(
        probe: &str,
        major: u32,
        minor: u32,
    ) -> Option<Vec<(String, usize)>> {
        let Some(include) = include_dir(major, minor) else {
            eprintln!("python{major}.{minor} with headers not found: {probe} not checked here");
            return None;
        };
        let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join(probe);
        let out_dir = tempfile_dir();
        let exe = out_dir.join(format!("{probe}.{major}.{minor}"));
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = std::process::Command::new(cc)
            .arg(format!("-I{}", include.display()))
            .arg(format!("-I{}", include.join("internal").display()))
            // Debian's pyconfig.h includes <MULTIARCH/pythonX.Y/pyconfig.h> from here.
            .arg(format!(
                "-I{}",
                include.parent().unwrap_or(&include).display()
            ))
            .arg(&source)
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{probe} for {major}.{minor}: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let run = std::process::Command::new(&exe).output().unwrap();
        let _ = std::fs::remove_file(&exe);
        Some(
            String::from_utf8(run.stdout)
                .unwrap()
                .lines()
                .map(|line| {
                    let (k, v) = line.split_once(' ').unwrap();
                    (k.to_string(), v.parse().unwrap())
                })
                .collect(),
        )
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("cudaleak-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn layouts_match_the_installed_headers() {
        let mut checked = Vec::new();
        for l in &ALL {
            let (major, minor) = l.version;
            let Some(mut from_headers) = header_probe("python_layout_probe.c", major, minor) else {
                continue;
            };
            let mut ours: Vec<(String, usize)> = named_offsets(l)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            from_headers.sort();
            ours.sort();
            assert_eq!(ours, from_headers, "layout of {major}.{minor}");
            checked.push(format!("{major}.{minor}"));
        }
        eprintln!("layouts checked against headers: {checked:?}");
        // Passing without checking anything would hide a broken probe or a machine without any
        // CPython headers (CI has the interpreter's own).
        assert!(
            !checked.is_empty(),
            "no CPython with headers found: no layout was checked"
        );
    }
}
