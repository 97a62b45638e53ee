//! Reading what a scenario left behind and asserting it exactly: the dump files of a
//! directory, a dump parsed and named as the CLI names it, the live record of a size, the frame
//! a stack starts in and the source line it must name, a whole summary.
//!
//! It owns no expectations: the tests pass theirs in. A missing or unreadable dump is a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cudaleak_format::{Dump, Frame, LiveRecord};

use crate::{marker_line_in, scenario_program, scenario_source};

/// The regular files directly in `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Parses and validates a dump and names its frames as the CLI does (the shim writes addresses
/// and modules, `cudaleak report` names them: `cudaleak_cli::symbols`), panicking with the
/// reader's error. What tests assert of function names and lines is what a report shows.
pub fn read_dump(path: &Path) -> Dump {
    let mut dump = read_raw_dump(path);
    cudaleak_cli::symbols::name(&mut dump);
    dump
}

/// Parses and validates a dump as the shim wrote it, without naming anything.
pub fn read_raw_dump(path: &Path) -> Dump {
    cudaleak_format::read_file(path)
        .unwrap_or_else(|e| panic!("{}: not a valid dump: {e}", path.display()))
}

/// The one live record of `size` bytes.
pub fn live_of_size(dump: &Dump, size: u64) -> &LiveRecord {
    let hits: Vec<&LiveRecord> = dump.live.iter().filter(|r| r.size == size).collect();
    match hits.as_slice() {
        [r] => r,
        _ => panic!(
            "expected exactly one live record of {size} bytes, found {}: {:#?}",
            hits.len(),
            dump.live
        ),
    }
}

/// The innermost frame of stack `index`: the code that called the CUDA function.
pub fn first_frame(dump: &Dump, index: usize) -> &Frame {
    let stack = dump
        .stacks
        .get(index)
        .unwrap_or_else(|| panic!("no stack {index}"));
    stack
        .frames
        .first()
        .unwrap_or_else(|| panic!("stack {index} has no frames"))
}

/// Asserts that stack `index` starts in `function` at the line of scenario `name` marked
/// `// @marker`, in that scenario's source file.
pub fn assert_site(dump: &Dump, index: usize, name: &str, function: &str, marker: &str) {
    assert_site_in(
        dump,
        index,
        &scenario_source(name),
        &scenario_program(name),
        function,
        marker,
    );
}

/// Asserts that stack `index` starts in `function` at the line of `source` marked
/// `// @marker`, in the module `program`.
pub fn assert_site_in(
    dump: &Dump,
    index: usize,
    source: &Path,
    program: &Path,
    function: &str,
    marker: &str,
) {
    let line = marker_line_in(source, marker);
    let source_name = source.file_name().expect("a file").to_string_lossy();
    let program_name = program.file_name().expect("a file").to_string_lossy();
    let frame = first_frame(dump, index);
    let context = || {
        let program_frame = dump.stacks[index]
            .frames
            .iter()
            .position(|f| f.function.as_deref() == Some(function));
        format!(
            "{function} is frame {program_frame:?} of stack {index}: {:#?}",
            dump.stacks[index]
        )
    };
    assert_eq!(
        frame.function.as_deref(),
        Some(function),
        "frames[0].function; {}",
        context()
    );
    assert_eq!(frame.line, Some(line), "frames[0].line; {}", context());
    let file = frame.file.as_deref().unwrap_or("");
    assert!(
        file.ends_with(&format!("/{source_name}")) || file == source_name,
        "frames[0].file is {file:?}, expected {source_name}; {}",
        context()
    );
    let module = frame.module.as_deref().unwrap_or("");
    assert!(
        module.ends_with(&format!("/{program_name}")),
        "frames[0].module is {module:?}, expected the {program_name} program; {}",
        context()
    );
    assert_no_shim_frames(dump);
}

/// The shim's own frames are skipped: no frame of any stack lies in libcudaleak.so.
pub fn assert_no_shim_frames(dump: &Dump) {
    for (i, s) in dump.stacks.iter().enumerate() {
        for f in &s.frames {
            let module = f.module.as_deref().unwrap_or("");
            assert!(
                !module.ends_with("libcudaleak.so"),
                "stack {i} holds a frame of the shim: {f:?}"
            );
        }
    }
}

/// Identical stacks are stored once: no two entries of `stacks` have the same return addresses.
pub fn assert_stacks_interned(dump: &Dump) {
    let mut seen: BTreeMap<Vec<u64>, usize> = BTreeMap::new();
    for (i, s) in dump.stacks.iter().enumerate() {
        let ips: Vec<u64> = s.frames.iter().map(|f| f.ip.0).collect();
        if let Some(j) = seen.insert(ips, i) {
            panic!("stacks {j} and {i} are the same stack: {:#?}", s.frames);
        }
    }
}

/// What one live record must be: found by its size, then checked field by field.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub size: u64,
    pub api: &'static str,
    pub kind: cudaleak_format::Kind,
    /// The scenario function that made the call, and the `// @marker` on the call's line.
    pub function: &'static str,
    pub marker: &'static str,
}

/// Asserts that `dump.live` holds exactly the `expected` records (any order), each with its
/// size, api, kind, device 0 (or none, for host memory, which belongs to no device; none for a
/// reservation of address space) and allocating site in scenario `name`.
pub fn assert_live(dump: &Dump, name: &str, expected: &[Expect]) {
    let mut sizes: Vec<u64> = dump.live.iter().map(|r| r.size).collect();
    let mut want: Vec<u64> = expected.iter().map(|e| e.size).collect();
    sizes.sort_unstable();
    want.sort_unstable();
    assert_eq!(sizes, want, "sizes of the live records: {:#?}", dump.live);
    for e in expected {
        let r = live_of_size(dump, e.size);
        assert_eq!(r.api, e.api, "api of the {}-byte record {r:?}", e.size);
        assert_eq!(r.kind, e.kind, "kind of the {}-byte record {r:?}", e.size);
        if e.kind == cudaleak_format::Kind::Reserved {
            // Address space belongs to no device.
            assert_eq!(
                r.device, None,
                "device of the {}-byte reservation {r:?}",
                e.size
            );
        } else if matches!(
            e.kind,
            cudaleak_format::Kind::Host | cudaleak_format::Kind::Registered
        ) {
            assert!(
                matches!(r.device, Some(0) | None),
                "device of the {}-byte host record {r:?}",
                e.size
            );
        } else {
            assert_eq!(
                r.device,
                Some(0),
                "device of the {}-byte record {r:?}",
                e.size
            );
        }
        assert_site(dump, r.stack, name, e.function, e.marker);
    }
}

/// A summary with every counter given; `dropped_events` must be 0.
#[allow(clippy::too_many_arguments)]
pub fn summary(
    allocations: u64,
    frees: u64,
    untracked_frees: u64,
    failed_allocations: u64,
    invalid_frees: u64,
    live_allocations: u64,
    live_bytes: u64,
    peak_live_bytes: u64,
    bytes_allocated: u64,
) -> cudaleak_format::Summary {
    cudaleak_format::Summary {
        allocations,
        frees,
        untracked_frees,
        failed_allocations,
        invalid_frees,
        live_allocations,
        live_bytes,
        peak_live_bytes,
        bytes_allocated,
        dropped_events: 0,
    }
}
