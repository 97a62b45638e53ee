//! CPython 3.13+'s `_Py_DebugOffsets`: the offsets the interpreter publishes for out-of-process
//! tools at the start of `_PyRuntime` (cookie `"xdebugpy"`), turned into a [`Layout`]. Where a
//! field is published, its value replaces the hand-written table's (layout.rs): the interpreter
//! that runs knows its own structures, the table only what its headers said when it was written.
//! Fields the interpreter does not publish (`_co_firsttraceable`, the frame owners, the stack
//! reference's tag bits, `PyCompactUnicodeObject`'s size) stay the table's. Plain data, like
//! layout.rs: nothing here reads memory.
//!
//! The struct itself changes between minor versions (fields are added in the middle), so where
//! each published field sits is written down per version here (`Include/internal/
//! pycore_runtime.h` in 3.13, `pycore_debug_offsets.h` from 3.14). A version not listed, a cookie
//! or version that does not match, a free-threaded build or offsets that fail the sanity checks
//! below give `None`, and the table is used alone.
#![forbid(unsafe_code)]

use super::layout::{
    FirstFrame, Instr, Layout, BYTES_SVAL, OB_SIZE, OB_TYPE, UNICODE_LENGTH, UNICODE_STATE,
};

/// Bytes of `_PyRuntime` to read: enough for every version's `_Py_DebugOffsets` up to the fields
/// used here.
pub const READ: usize = 768;

const COOKIE: &[u8; 8] = b"xdebugpy";

/// Where, in one version's `_Py_DebugOffsets`, each used field sits (byte offsets).
struct Positions {
    version: (u32, u32),
    tstate_size: usize,
    tstate_current_frame: usize,
    tstate_thread_id: usize,
    frame_size: usize,
    frame_previous: usize,
    frame_executable: usize,
    frame_instr_ptr: usize,
    frame_owner: usize,
    code_size: usize,
    code_filename: usize,
    code_qualname: usize,
    code_linetable: usize,
    code_firstlineno: usize,
    code_adaptive: usize,
    ob_type: usize,
    bytes_ob_size: usize,
    bytes_ob_sval: usize,
    unicode_state: usize,
    unicode_length: usize,
    unicode_ascii_size: usize,
}

/// 3.13: `Include/internal/pycore_runtime.h` (checked against 3.13.0's headers).
const V3_13: Positions = Positions {
    version: (3, 13),
    tstate_size: 152,
    tstate_current_frame: 184,
    tstate_thread_id: 192,
    frame_size: 224,
    frame_previous: 232,
    frame_executable: 240,
    frame_instr_ptr: 248,
    frame_owner: 264,
    code_size: 272,
    code_filename: 280,
    code_qualname: 296,
    code_linetable: 304,
    code_firstlineno: 312,
    code_adaptive: 344,
    ob_type: 360,
    bytes_ob_size: 520,
    bytes_ob_sval: 528,
    unicode_state: 544,
    unicode_length: 552,
    unicode_ascii_size: 560,
};

/// 3.14: `Include/internal/pycore_debug_offsets.h`, which added `interpreter_state.threads_main`,
/// `code_object_generation` and `tlbc_generation`, `interpreter_frame.stackpointer` and
/// `tlbc_index`, `code_object.co_tlbc` and a `set_object` section before `dict_object` (checked
/// against 3.14.10's headers).
const V3_14: Positions = Positions {
    version: (3, 14),
    tstate_size: 176,
    tstate_current_frame: 208,
    tstate_thread_id: 216,
    frame_size: 248,
    frame_previous: 256,
    frame_executable: 264,
    frame_instr_ptr: 272,
    frame_owner: 288,
    code_size: 312,
    code_filename: 320,
    code_qualname: 336,
    code_linetable: 344,
    code_firstlineno: 352,
    code_adaptive: 384,
    ob_type: 408,
    bytes_ob_size: 600,
    bytes_ob_sval: 608,
    unicode_state: 624,
    unicode_length: 632,
    unicode_ascii_size: 640,
};

/// 3.15: more thread-state and frame fields for the sampling profiler (checked against 3.15.2's
/// headers).
const V3_15: Positions = Positions {
    version: (3, 15),
    tstate_size: 176,
    tstate_current_frame: 208,
    tstate_thread_id: 240,
    frame_size: 312,
    frame_previous: 320,
    frame_executable: 328,
    frame_instr_ptr: 336,
    frame_owner: 352,
    code_size: 376,
    code_filename: 384,
    code_qualname: 400,
    code_linetable: 408,
    code_firstlineno: 416,
    code_adaptive: 448,
    ob_type: 472,
    bytes_ob_size: 696,
    bytes_ob_sval: 704,
    unicode_state: 720,
    unicode_length: 728,
    unicode_ascii_size: 736,
};

const KNOWN: [Positions; 3] = [V3_13, V3_14, V3_15];

/// Whether this module knows where `major.minor` keeps its debug offsets.
pub fn known(major: u32, minor: u32) -> bool {
    KNOWN.iter().any(|p| p.version == (major, minor))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_ne_bytes(bytes.try_into().ok()?))
}

/// The layout `runtime` (the first bytes of `_PyRuntime`) publishes, on top of `table` (the
/// hand-written layout of the same version), or `None` if it publishes none this module can read.
pub fn layout(runtime: &[u8], table: &Layout) -> Option<Layout> {
    let (major, minor) = table.version;
    let p = KNOWN.iter().find(|p| p.version == (major, minor))?;
    if runtime.get(..8)? != COOKIE {
        return None;
    }
    let version = u64_at(runtime, 8)?;
    if ((version >> 24) & 0xff, (version >> 16) & 0xff) != (u64::from(major), u64::from(minor)) {
        return None;
    }
    if u64_at(runtime, 16)? != 0 {
        return None; // free-threaded: another object header, which this module does not read
    }
    let at = |pos: usize| -> Option<usize> { usize::try_from(u64_at(runtime, pos)?).ok() };
    // What every version shares: if these differ, the bytes are not the struct we think.
    let shared = [
        (p.ob_type, OB_TYPE),
        (p.bytes_ob_size, OB_SIZE),
        (p.bytes_ob_sval, BYTES_SVAL),
        (p.unicode_length, UNICODE_LENGTH),
        (p.unicode_state, UNICODE_STATE),
    ];
    for (pos, want) in shared {
        if at(pos)? != want {
            return None;
        }
    }
    // Each field lies inside its structure, and the structures are of sane sizes.
    let inside = |size: usize, fields: &[usize]| -> Option<Vec<usize>> {
        let size = at(size)?;
        if size > 1 << 16 {
            return None;
        }
        fields
            .iter()
            .map(|&f| at(f).filter(|&o| o + 8 <= size))
            .collect()
    };
    let t = inside(p.tstate_size, &[p.tstate_current_frame, p.tstate_thread_id])?;
    let f = inside(
        p.frame_size,
        &[
            p.frame_previous,
            p.frame_executable,
            p.frame_instr_ptr,
            p.frame_owner,
        ],
    )?;
    let c = inside(
        p.code_size,
        &[
            p.code_filename,
            p.code_qualname,
            p.code_linetable,
            p.code_firstlineno,
            p.code_adaptive,
        ],
    )?;
    let ascii = at(p.unicode_ascii_size)?;
    if !(24..=64).contains(&ascii) {
        return None;
    }
    let mut l = *table;
    l.first_frame = FirstFrame::Direct(t[0]);
    l.tstate_thread_id = t[1];
    l.frame.back = f[0];
    l.frame.code = f[1];
    l.frame.instr = Instr::Pointer(f[2]);
    l.frame.owner = Some(f[3]);
    l.code.filename = c[0];
    l.code.name = c[1];
    l.code.linetable = c[2];
    l.code.firstlineno = c[3];
    l.code.code_adaptive = Some(c[4]);
    // PyCompactUnicodeObject is PyASCIIObject plus utf8_length and utf8.
    l.unicode_compact_data = ascii + (table.unicode_compact_data - table.unicode_ascii_data);
    l.unicode_ascii_data = ascii;
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::layout::{
        for_version,
        tests::{header_probe, interpreters},
    };

    /// `_PyRuntime`'s first bytes as 3.13 fills them, for the given table.
    fn synthetic(p: &Positions, l: &Layout) -> Vec<u8> {
        let mut b = vec![0u8; READ];
        b[..8].copy_from_slice(COOKIE);
        let put =
            |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        put(
            &mut b,
            8,
            (u64::from(l.version.0) << 24) | (u64::from(l.version.1) << 16),
        );
        let FirstFrame::Direct(current) = l.first_frame else {
            panic!("3.13+ reads the frame directly")
        };
        let Instr::Pointer(instr) = l.frame.instr else {
            panic!("3.13+ has an instruction pointer")
        };
        for (at, v) in [
            (p.tstate_size, 400),
            (p.tstate_current_frame, current),
            (p.tstate_thread_id, l.tstate_thread_id),
            (p.frame_size, 80),
            (p.frame_previous, l.frame.back),
            (p.frame_executable, l.frame.code),
            (p.frame_instr_ptr, instr),
            (p.frame_owner, l.frame.owner.unwrap()),
            (p.code_size, 240),
            (p.code_filename, l.code.filename),
            (p.code_qualname, l.code.name),
            (p.code_linetable, l.code.linetable),
            (p.code_firstlineno, l.code.firstlineno),
            (p.code_adaptive, l.code.code_adaptive.unwrap()),
            (p.ob_type, OB_TYPE),
            (p.bytes_ob_size, OB_SIZE),
            (p.bytes_ob_sval, BYTES_SVAL),
            (p.unicode_state, UNICODE_STATE),
            (p.unicode_length, UNICODE_LENGTH),
            (p.unicode_ascii_size, l.unicode_ascii_data),
        ] {
            put(&mut b, at, v as u64);
        }
        b
    }

    #[test]
    fn published_offsets_replace_the_table_and_bad_ones_are_refused() {
        let table = *for_version(3, 13).unwrap();
        let bytes = synthetic(&V3_13, &table);
        assert_eq!(layout(&bytes, &table), Some(table));

        // A published offset that differs from the table wins.
        let mut moved = bytes.clone();
        moved[V3_13.tstate_thread_id..V3_13.tstate_thread_id + 8]
            .copy_from_slice(&160u64.to_ne_bytes());
        assert_eq!(layout(&moved, &table).unwrap().tstate_thread_id, 160);

        let refused = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = bytes.clone();
            edit(&mut b);
            layout(&b, &table)
        };
        assert_eq!(refused(&|b| b[0] = b'y'), None, "cookie");
        assert_eq!(refused(&|b| b[10] = 14), None, "another minor version");
        assert_eq!(refused(&|b| b[16] = 1), None, "free-threaded");
        assert_eq!(
            refused(&|b| b[V3_13.ob_type] = 16),
            None,
            "a shared offset that differs: not the struct we think"
        );
        assert_eq!(
            refused(&|b| b[V3_13.frame_owner] = 250),
            None,
            "a field outside its structure"
        );
        assert_eq!(layout(&bytes[..100], &table), None, "too short");
        assert_eq!(
            layout(&bytes, for_version(3, 12).unwrap()),
            None,
            "3.12 has none"
        );
    }

    /// The first `READ` bytes of `_PyRuntime` in a running interpreter, and its version.
    fn runtime_bytes(python: &std::path::Path) -> Option<((u32, u32), Vec<u8>)> {
        let script = format!(
            "import ctypes, sys\n\
             a = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, '_PyRuntime'))\n\
             print(sys.version_info[0], sys.version_info[1])\n\
             print(ctypes.string_at(a, {READ}).hex())"
        );
        let out = std::process::Command::new(python)
            .args(["-c", &script])
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        let mut lines = text.lines();
        let mut v = lines.next()?.split(' ').map(|n| n.parse::<u32>().ok());
        let version = (v.next()??, v.next()??);
        let hex = lines.next()?;
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some((version, bytes))
    }

    /// The cross-check: on every installed CPython that publishes debug offsets this module
    /// knows, they are read and agree with the hand-written table.
    #[test]
    fn published_offsets_agree_with_the_tables_on_the_installed_interpreters() {
        let mut checked = Vec::new();
        for p in &KNOWN {
            let (major, minor) = p.version;
            // The first that answers: a launcher (pyenv's shims) may not.
            let Some((python, (version, bytes))) = interpreters(major, minor)
                .into_iter()
                .find_map(|py| Some((py.clone(), runtime_bytes(&py)?)))
            else {
                eprintln!("python{major}.{minor} not found: its debug offsets not checked here");
                continue;
            };
            assert_eq!(version, p.version, "{}", python.display());
            let table = for_version(major, minor).unwrap();
            let published = layout(&bytes, table);
            assert_eq!(published.as_ref(), Some(table), "{major}.{minor}");
            checked.push(format!("{major}.{minor}"));
        }
        eprintln!("debug offsets checked against the tables: {checked:?}");
        assert!(
            !checked.is_empty() || interpreters(3, 13).is_empty(),
            "nothing was checked"
        );
    }

    fn named(p: &Positions) -> Vec<(&'static str, usize)> {
        vec![
            ("tstate_size", p.tstate_size),
            ("tstate_current_frame", p.tstate_current_frame),
            ("tstate_thread_id", p.tstate_thread_id),
            ("frame_size", p.frame_size),
            ("frame_previous", p.frame_previous),
            ("frame_executable", p.frame_executable),
            ("frame_instr_ptr", p.frame_instr_ptr),
            ("frame_owner", p.frame_owner),
            ("code_size", p.code_size),
            ("code_filename", p.code_filename),
            ("code_qualname", p.code_qualname),
            ("code_linetable", p.code_linetable),
            ("code_firstlineno", p.code_firstlineno),
            ("code_adaptive", p.code_adaptive),
            ("ob_type", p.ob_type),
            ("bytes_ob_size", p.bytes_ob_size),
            ("bytes_ob_sval", p.bytes_ob_sval),
            ("unicode_state", p.unicode_state),
            ("unicode_length", p.unicode_length),
            ("unicode_ascii_size", p.unicode_ascii_size),
        ]
    }

    /// Where each field sits in `_Py_DebugOffsets`, against the headers of each installed 3.13+
    /// (`shim/tests/python_debug_offsets_probe.c`, `offsetof`).
    #[test]
    fn positions_match_the_installed_headers() {
        let mut checked = Vec::new();
        for p in &KNOWN {
            let (major, minor) = p.version;
            let Some(from_headers) = header_probe("python_debug_offsets_probe.c", major, minor)
            else {
                continue;
            };
            let ours: Vec<(String, usize)> = named(p)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            assert_eq!(ours, from_headers, "_Py_DebugOffsets of {major}.{minor}");
            checked.push(format!("{major}.{minor}"));
        }
        eprintln!("debug offset positions checked against headers: {checked:?}");
    }
}
