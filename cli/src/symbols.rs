//! Names for the native frames of an unnamed dump (schema version 3), read from the modules'
//! files by address (addr2line: DWARF lines and inlined frames, the symbol table where there is
//! no debug info, separate debug files by build-id or `.gnu_debuglink`), then the two steps that
//! need names: the Python frames spliced in at the interpreter's frames, and a driver record
//! named by the runtime function in its stack. What the analysis sees is the dump the shim wrote
//! when it named frames itself.
//!
//! A file is trusted only if its build-id is the one the process had mapped: a rebuilt binary
//! would give wrong lines. A module that cannot be used leaves its frames unnamed (module and
//! offset) and is named once, with the reason, on stderr; a dump written back with such frames
//! stays marked unnamed, so that a later invocation names them once the file is back. Each
//! module is loaded once per invocation, however many dumps refer to it (the cache is this
//! thread's). Nothing here may panic on any input.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cudaleak_format::{self as format, Dump, Frame, Name};

use crate::input::{self, OpenError};

/// The interpreter's frame-evaluation function: where Python frames stand in a native stack.
pub const EVAL_FRAME_FUNCTION: &str = "_PyEval_EvalFrameDefault";

/// The name types a dump is held in: `String` (as written) and interned [`Name`]s (as the
/// analysis reads it).
pub trait NameText: Clone + AsRef<str> {
    fn from_name(n: &Name) -> Self;
    fn from_text(s: &str) -> Self;
}

impl NameText for String {
    fn from_name(n: &Name) -> Self {
        n.as_str().to_string()
    }
    fn from_text(s: &str) -> Self {
        s.to_string()
    }
}

impl NameText for Name {
    fn from_name(n: &Name) -> Self {
        n.clone()
    }
    fn from_text(s: &str) -> Self {
        Name::from(s)
    }
}

/// One frame's names, as a module gives them for an address.
#[derive(Clone)]
struct Named {
    function: Option<Name>,
    file: Option<Name>,
    line: Option<u32>,
}

/// A module's file, loaded and checked, with the names found so far by offset.
struct Loaded {
    source: Source,
    by_offset: HashMap<u64, Vec<Named>>,
    names: HashSet<Name>,
}

/// Where a module's names come from.
enum Source {
    /// Its DWARF (or its separate debug file's): addr2line, an offset at a time.
    Dwarf(Box<addr2line::Loader>),
    /// Its symbol table alone (no debug information anywhere: PyTorch's and NVIDIA's libraries),
    /// read for every offset a dump wants of it at once ([`symbols_at`]).
    Symbols(std::fs::File),
}

enum ModuleState {
    Ready(Box<Loaded>),
    /// Why its frames stay unnamed.
    Unusable(String),
}

/// A module by its path and the build-id the dump gave it.
type ModuleKey = (String, Option<String>);

/// Every module met in this invocation, by path and the build-id the dump gave it.
#[derive(Default)]
pub struct Symbolizer {
    modules: HashMap<ModuleKey, ModuleState>,
}

thread_local! {
    static SYMBOLIZER: RefCell<Symbolizer> = RefCell::new(Symbolizer::default());
}

/// Names an unnamed dump in place for reading (`report`, `diff`) with this thread's
/// [`Symbolizer`] (one per invocation), saying once on stderr which modules could not be used
/// and why; their frames stay `module+offset` and the rest is [`settle`]d. A named dump is left
/// as it is.
pub fn name<S: NameText>(dump: &mut Dump<S>) {
    name_for_writing(dump);
    settle(dump);
}

/// Names what the modules' files on this machine can name, for writing the dump back
/// (`symbolize`, `run`), with this thread's [`Symbolizer`]: the dump stays unnamed while frames
/// of a module that could not be used are left (see [`Symbolizer::name`]). A named dump is left
/// as it is.
pub fn name_for_writing<S: NameText>(dump: &mut Dump<S>) {
    if !dump.unnamed {
        return;
    }
    let notes = SYMBOLIZER.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => s.name(dump),
        Err(_) => Symbolizer::default().name(dump),
    });
    for n in notes {
        crate::say!("{n}");
    }
}

/// Gives up on the names still missing, for a report: the Python frames of the stacks still
/// unnamed are spliced in where their named frames place them, their driver records labelled
/// from those names, and the dump is read as named.
pub fn settle<S: NameText>(dump: &mut Dump<S>) {
    if !dump.unnamed {
        return;
    }
    for stack in &mut dump.stacks {
        if !stack.python.is_empty() {
            let python = std::mem::take(&mut stack.python);
            stack.frames = splice(std::mem::take(&mut stack.frames), python);
        }
    }
    label_driver_records(dump, |_| true);
    dump.unnamed = false;
}

impl Symbolizer {
    /// Names `dump`'s native frames from the modules' files, then splices the Python frames and
    /// labels the driver records of each stack left with no frame of a module that could not be
    /// used (missing, rebuilt). While such a stack is left the dump stays unnamed, its frames
    /// `module+offset` and its Python runs apart, so a later call, once the file is back, names
    /// it as if this one had not happened. Returns a line for each module first found unusable
    /// by this call.
    pub fn name<S: NameText>(&mut self, dump: &mut Dump<S>) -> Vec<String> {
        if !dump.unnamed {
            return Vec::new();
        }
        let build_ids: HashMap<&str, Option<&str>> = dump
            .modules
            .iter()
            .map(|m| (m.path.as_str(), m.build_id.as_deref()))
            .collect();
        // Names in an unnamed dump come only from a module that an earlier call could use: its
        // frames still without one had none to find, and its file is not read again.
        let mut named_before: HashSet<String> = HashSet::new();
        for f in dump.stacks.iter().flat_map(|s| &s.frames) {
            let Some(m) = f.module.as_ref().map(AsRef::as_ref) else {
                continue;
            };
            let named = f.function.is_some() || f.file.is_some();
            if named && !f.is_python() && !named_before.contains(m) {
                named_before.insert(m.to_string());
            }
        }
        let mut notes = Vec::new();
        // What each module is asked for, in the order the frames meet them (so the notes about
        // modules that cannot be used come in that order): a module without debug information
        // answers them all in one pass over its symbol table.
        let mut wanted: Vec<(ModuleKey, Vec<u64>)> = Vec::new();
        let mut slot: HashMap<(&str, Option<&str>), usize> = HashMap::new();
        for f in dump.stacks.iter().flat_map(|s| &s.frames) {
            let Some((module, offset)) = to_name(f, &named_before) else {
                continue;
            };
            let key = (module, build_ids.get(module).copied().flatten());
            let i = *slot.entry(key).or_insert_with(|| {
                let (m, b) = key;
                wanted.push(((m.to_string(), b.map(str::to_string)), Vec::new()));
                wanted.len() - 1
            });
            wanted[i].1.push(offset);
        }
        drop(slot);
        for ((module, build_id), offsets) in &wanted {
            self.ask_all(module, build_id.as_deref(), offsets, &mut notes);
        }
        // The stacks with a frame of a module that could not be used: they wait for its file.
        let mut waiting = vec![false; dump.stacks.len()];
        for (stack, waits) in dump.stacks.iter_mut().zip(&mut waiting) {
            let mut frames = Vec::with_capacity(stack.frames.len());
            for f in std::mem::take(&mut stack.frames) {
                let Some((module, offset)) = to_name(&f, &named_before) else {
                    frames.push(f);
                    continue;
                };
                let build_id = build_ids.get(module).copied().flatten();
                match self.frames(module, build_id, offset, &mut notes) {
                    None => {
                        *waits = true;
                        frames.push(f);
                    }
                    Some(named) if named.is_empty() => frames.push(f),
                    Some(named) => {
                        for n in named {
                            frames.push(Frame {
                                function: n.function.as_ref().map(S::from_name),
                                file: n.file.as_ref().map(S::from_name),
                                line: n.line,
                                ..f.clone()
                            });
                        }
                    }
                }
            }
            let python = if *waits {
                Vec::new()
            } else {
                std::mem::take(&mut stack.python)
            };
            stack.frames = if python.is_empty() {
                frames
            } else {
                splice(frames, python)
            };
        }
        label_driver_records(dump, |stack| !waiting.get(stack).copied().unwrap_or(false));
        dump.unnamed = waiting.contains(&true);
        notes
    }

    /// The module `module` of build `build_id`, loaded the first time (a note said when it
    /// cannot be used); `None` when it cannot be.
    fn module(
        &mut self,
        module: &str,
        build_id: Option<&str>,
        notes: &mut Vec<String>,
    ) -> Option<&mut Loaded> {
        let key = (module.to_string(), build_id.map(str::to_string));
        let state = self.modules.entry(key).or_insert_with(|| {
            let state = load(Path::new(module), build_id);
            if let ModuleState::Unusable(why) = &state {
                notes.push(format!("{module}: {why}; its frames stay unnamed"));
            }
            state
        });
        match state {
            ModuleState::Ready(m) => Some(m),
            ModuleState::Unusable(_) => None,
        }
    }

    /// Loads `module` and, when its names come from its symbol table, names all of `offsets`
    /// in one pass (what [`Symbolizer::frames`] then finds).
    fn ask_all(
        &mut self,
        module: &str,
        build_id: Option<&str>,
        offsets: &[u64],
        notes: &mut Vec<String>,
    ) {
        let Some(m) = self.module(module, build_id, notes) else {
            return;
        };
        let Source::Symbols(file) = &m.source else {
            return;
        };
        let mut new: Vec<u64> = offsets
            .iter()
            .copied()
            .filter(|o| !m.by_offset.contains_key(o))
            .collect();
        new.sort_unstable();
        new.dedup();
        let found = symbols_at(file, &new);
        for (offset, name) in new.into_iter().zip(found) {
            let named = name_of_symbol(name.as_deref(), &mut m.names);
            m.by_offset.insert(offset, named);
        }
    }

    /// The frames at `offset` in `module` (several when the address lies in inlined code, the
    /// innermost first; none when the module knows nothing of the address); `None` when the
    /// module cannot be used.
    fn frames(
        &mut self,
        module: &str,
        build_id: Option<&str>,
        offset: u64,
        notes: &mut Vec<String>,
    ) -> Option<Vec<Named>> {
        let m = self.module(module, build_id, notes)?;
        if let Some(found) = m.by_offset.get(&offset) {
            return Some(found.clone());
        }
        let found = match &m.source {
            Source::Dwarf(loader) => lookup(loader, offset, &mut m.names),
            Source::Symbols(file) => {
                let name = symbols_at(file, &[offset]).pop().flatten();
                name_of_symbol(name.as_deref(), &mut m.names)
            }
        };
        m.by_offset.insert(offset, found.clone());
        Some(found)
    }
}

/// The module and offset of a native frame still to be named, of a module no earlier call named
/// frames from (`named_before`); None for any other frame.
fn to_name<'f, S: AsRef<str>>(
    f: &'f Frame<S>,
    named_before: &HashSet<String>,
) -> Option<(&'f str, u64)> {
    let (Some(module), Some(offset), None, None) = (&f.module, f.offset, &f.function, &f.file)
    else {
        return None;
    };
    let module = module.as_ref();
    (!f.is_python() && !named_before.contains(module)).then_some((module, offset.0))
}

/// Opens `path` for naming, if it is the file the process mapped.
fn load(path: &Path, build_id: Option<&str>) -> ModuleState {
    // A dump is input like any other: a module path naming a FIFO or a device must not make
    // the report wait or read without end, so it is opened as the dumps are.
    let file = match input::open_regular(path) {
        Ok((f, _)) => f,
        Err(e) => {
            return ModuleState::Unusable(match e {
                OpenError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    "not found on this machine: run `cudaleak symbolize` where the program ran"
                        .into()
                }
                OpenError::NotAFile(what) => format!("is {what}, not a regular file"),
                OpenError::Io(e) => format!("cannot be read: {e}"),
            })
        }
    };
    let facts = elf_facts(file);
    if let Some(want) = build_id {
        match facts.as_ref().and_then(|f| f.build_id.as_deref()) {
            Some(have) if have == want => {}
            _ => return ModuleState::Unusable("rebuilt since the run (build-id differs)".into()),
        }
    }
    // Stripped of its debug info: a separate debug file of the same build, if installed.
    let source = facts
        .as_ref()
        .filter(|f| !f.has_debug_info)
        .and_then(|f| debug_file(path, f))
        .unwrap_or_else(|| path.to_path_buf());
    let without_debug_info = source == path && facts.as_ref().is_some_and(|f| !f.has_debug_info);
    if without_debug_info {
        return match input::open_regular(&source) {
            Ok((file, _)) => ModuleState::Ready(Box::new(Loaded {
                source: Source::Symbols(file),
                by_offset: HashMap::new(),
                names: HashSet::new(),
            })),
            Err(_) => ModuleState::Unusable("cannot be read".into()),
        };
    }
    match addr2line::Loader::new(&source) {
        Ok(loader) => ModuleState::Ready(Box::new(Loaded {
            source: Source::Dwarf(Box::new(loader)),
            by_offset: HashMap::new(),
            names: HashSet::new(),
        })),
        Err(e) => ModuleState::Unusable(format!("cannot be read: {e}")),
    }
}

/// What is read of a module's file before trusting it.
struct Facts {
    build_id: Option<String>,
    has_debug_info: bool,
    /// `.gnu_debuglink`: the file name of its separate debug file.
    debuglink: Option<String>,
}

fn elf_facts(file: std::fs::File) -> Option<Facts> {
    use object::{Object, ObjectSection};
    let cache = object::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    Some(Facts {
        build_id: obj.build_id().ok().flatten().map(hex),
        has_debug_info: obj
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0),
        debuglink: obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned()),
    })
}

/// The separate debug file of a stripped module, where GDB looks for one: by build-id under
/// `/usr/lib/debug/.build-id/`, then by its `.gnu_debuglink` name beside it, in `.debug/` beside
/// it, and under `/usr/lib/debug/` plus its directory. A candidate of another build is not used.
fn debug_file(path: &Path, facts: &Facts) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(id) = facts.build_id.as_deref().filter(|id| id.len() > 2) {
        candidates.push(PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        )));
    }
    if let (Some(link), Some(dir)) = (facts.debuglink.as_deref(), path.parent()) {
        candidates.push(dir.join(link));
        candidates.push(dir.join(".debug").join(link));
        let relative = dir.strip_prefix("/").unwrap_or(dir);
        candidates.push(Path::new("/usr/lib/debug").join(relative).join(link));
    }
    candidates.into_iter().find(|c| {
        c.as_path() != path
            && input::open_regular(c)
                .ok()
                .and_then(|(f, _)| elf_facts(f))
                .is_some_and(|f| f.has_debug_info && f.build_id == facts.build_id)
    })
}

/// What a module without debug information says of an address: the name of its symbol there
/// (`symbols_at`), as [`lookup`] gives it where DWARF names nothing.
fn name_of_symbol(symbol: Option<&str>, names: &mut HashSet<Name>) -> Vec<Named> {
    symbol
        .map(|sym| Named {
            function: Some(intern(names, &function_name(sym))),
            file: None,
            line: None,
        })
        .into_iter()
        .collect()
}

/// One shared [`Name`] per distinct text of a module's names.
fn intern(names: &mut HashSet<Name>, s: &str) -> Name {
    match names.get(s) {
        Some(n) => n.clone(),
        None => {
            let n = Name::from(s);
            names.insert(n.clone());
            n
        }
    }
}

/// A symbol's rank among those at one address, as `object`'s symbol map ranks them (lower is
/// better): a known kind, then a size, then the widest visibility, then the later entry. `None`:
/// not a symbol the map holds (undefined, or of another kind); its name is checked apart.
fn rank<'d, S: object::ObjectSymbol<'d>>(symbol: &S) -> Option<(u32, usize)> {
    use object::{SymbolKind, SymbolScope};
    if !symbol.is_definition() {
        return None;
    }
    let mut priority = match symbol.kind() {
        SymbolKind::Text | SymbolKind::Data => 0,
        SymbolKind::Unknown => 1,
        _ => return None,
    };
    priority = priority * 4 + u32::from(symbol.size() == 0);
    priority = priority * 4
        + match symbol.scope() {
            SymbolScope::Unknown => 3,
            SymbolScope::Compilation => 2,
            SymbolScope::Linkage => 1,
            SymbolScope::Dynamic => 0,
        };
    Some((priority, !0 - symbol.index().0))
}

/// Whether a symbol's name is one the symbol map keeps: UTF-8, not empty.
fn named<'d, S: object::ObjectSymbol<'d>>(symbol: &S) -> bool {
    symbol.name().is_ok_and(|n| !n.is_empty())
}

/// The symbol names of `offsets` (return addresses) in the module `file`, which has no debug
/// information: what `addr2line::Loader::find_symbol` answers at `offset - 1`, the containing
/// entry of `object`'s symbol map (the best-ranked symbol at the greatest address at or below;
/// a symbol without a size runs to the next symbol or section end). The map is not built: that
/// collects, validates and sorts every symbol of the table (a million in a large C++ library)
/// for a few addresses. Two passes over the table instead: the best symbol at or below each
/// address, then the next entry after each of those. None where the module names nothing, or
/// cannot be read.
fn symbols_at(file: &std::fs::File, offsets: &[u64]) -> Vec<Option<String>> {
    use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};
    let none = || vec![None; offsets.len()];
    let Some(map) = crate::mapped::map(file) else {
        return none();
    };
    let Ok(obj) = object::File::parse(&*map) else {
        return none();
    };
    let Some(table) = obj.symbol_table().or_else(|| obj.dynamic_symbol_table()) else {
        return none();
    };
    let mut probes: Vec<u64> = offsets.iter().map(|o| o.saturating_sub(1)).collect();
    probes.sort_unstable();
    probes.dedup();
    // The best symbol at the greatest address in (probes[k - 1], probes[k]], per k.
    #[derive(Clone, Copy)]
    struct Best {
        address: u64,
        rank: (u32, usize),
        size: u64,
        index: object::SymbolIndex,
    }
    let mut best: Vec<Option<Best>> = vec![None; probes.len()];
    for symbol in table.symbols() {
        let Some(rank) = rank(&symbol) else { continue };
        let address = symbol.address();
        let k = probes.partition_point(|&p| p < address);
        let Some(slot) = best.get_mut(k) else {
            continue;
        };
        let better = slot.is_none_or(|b| {
            (address, std::cmp::Reverse(rank)) > (b.address, std::cmp::Reverse(b.rank))
        });
        if better && named(&symbol) {
            *slot = Some(Best {
                address,
                rank,
                size: symbol.size(),
                index: symbol.index(),
            });
        }
    }
    // Each probe's symbol: its own range's, else the one below it.
    for k in 1..best.len() {
        if best[k].is_none() {
            best[k] = best[k - 1];
        }
    }
    // Where a symbol without a size ends: the next entry of the map (a symbol, or a section's
    // end), the least address above it. Only the nearest chosen address below an entry can
    // end there: any chosen address further below ends at that nearer one first.
    let mut sizeless: Vec<u64> = best
        .iter()
        .flatten()
        .filter(|b| b.size == 0)
        .map(|b| b.address)
        .collect();
    sizeless.sort_unstable();
    sizeless.dedup();
    let mut next: Vec<Option<u64>> = vec![None; sizeless.len()];
    if !sizeless.is_empty() {
        let mut offer = |x: u64, valid: &dyn Fn() -> bool| {
            let i = sizeless.partition_point(|&a| a < x);
            if i > 0 && next[i - 1].is_none_or(|n| x < n) && valid() {
                next[i - 1] = Some(x);
            }
        };
        for symbol in table.symbols() {
            if rank(&symbol).is_some() {
                offer(symbol.address(), &|| named(&symbol));
            }
        }
        for section in obj.sections() {
            offer(section.address().saturating_add(section.size()), &|| true);
        }
    }
    let name_at = |index| {
        table
            .symbol_by_index(index)
            .ok()?
            .name()
            .ok()
            .map(str::to_string)
    };
    let found: HashMap<u64, Option<String>> = probes
        .iter()
        .zip(&best)
        .map(|(&probe, b)| {
            let name = b.and_then(|b| {
                let size = match b.size {
                    0 => sizeless
                        .binary_search(&b.address)
                        .ok()
                        .and_then(|i| next[i])
                        .map_or(0, |n| n - b.address),
                    size => size,
                };
                let inside = size == 0 || probe.wrapping_sub(b.address) < size;
                inside.then(|| name_at(b.index)).flatten()
            });
            (probe, name)
        })
        .collect();
    offsets
        .iter()
        .map(|o| found.get(&o.saturating_sub(1)).cloned().flatten())
        .collect()
}

/// What addr2line says of `offset`, the way the `backtrace` crate asks it: at `offset - 1` (a
/// return address belongs to the line after the call), every inlined frame with its own name,
/// the symbol table's name for a frame without one, and the symbol table alone where there is no
/// debug info.
fn lookup(loader: &addr2line::Loader, offset: u64, names: &mut HashSet<Name>) -> Vec<Named> {
    let probe = offset.saturating_sub(1);
    let mut intern = |s: &str| intern(names, s);
    let mut out = Vec::new();
    if let Ok(mut frames) = loader.find_frames(probe) {
        while let Ok(Some(frame)) = frames.next() {
            let raw = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok().map(|n| n.into_owned()))
                .or_else(|| loader.find_symbol(probe).map(str::to_string));
            let (file, line) = match &frame.location {
                Some(l) => (l.file, l.line),
                None => (None, None),
            };
            // Neither name nor file says nothing `module+offset` does not; kept, it would read
            // as a frame still to be named.
            if raw.is_none() && file.is_none() {
                continue;
            }
            out.push(Named {
                function: raw.map(|r| intern(&function_name(&r))),
                file: file.map(&mut intern),
                line,
            });
        }
    }
    if out.is_empty() {
        if let Some(sym) = loader.find_symbol(probe) {
            out.push(Named {
                function: Some(intern(&function_name(sym))),
                file: None,
                line: None,
            });
        }
    }
    out
}

/// The symbol as the program's author wrote it: demangled only when it is mangled (`_Z…`,
/// `__Z…`, `_R…`), Rust names without their hash, C++ names with their parameter types. A C
/// function called `b` or `x` must stay `b`, not become the C++ type `bool` or `long long` that
/// a demangler reads in a bare letter.
pub fn function_name(raw: &str) -> String {
    let mangled = ["_Z", "__Z", "_R"].iter().any(|p| raw.starts_with(p));
    if !mangled {
        return raw.to_string();
    }
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if let Ok(sym) = cpp_demangle::Symbol::new(raw.as_bytes()) {
        if let Ok(d) = sym.demangle() {
            return d;
        }
    }
    raw.to_string()
}

/// The stack the report shows: the Python frames stand where the interpreter evaluated them.
///
/// Each native `_PyEval_EvalFrameDefault` frame, innermost first, is replaced by one run of the
/// evaluation loop (from 3.11 one run executes several Python frames: a Python-to-Python call
/// adds no native frame). The outermost evaluation frame present also takes the runs left over
/// (the native stack was cut by `CUDALEAK_DEPTH`); evaluation frames left over (a run whose
/// frames were not recorded) are dropped; a native stack without any (not named, or cut before
/// the interpreter) gets the Python frames at its outer end.
pub fn splice<S: AsRef<str>>(native: Vec<Frame<S>>, runs: Vec<Vec<Frame<S>>>) -> Vec<Frame<S>> {
    let evals: Vec<usize> = native
        .iter()
        .enumerate()
        .filter(|(_, f)| f.function.as_ref().map(AsRef::as_ref) == Some(EVAL_FRAME_FUNCTION))
        .map(|(i, _)| i)
        .collect();
    let mut runs = runs.into_iter().filter(|r| !r.is_empty()).peekable();
    let mut out = Vec::with_capacity(native.len());
    let Some(&last_eval) = evals.last() else {
        out.extend(native);
        out.extend(runs.flatten());
        return out;
    };
    for (i, f) in native.into_iter().enumerate() {
        if !evals.contains(&i) {
            out.push(f);
        } else if i == last_eval {
            out.extend(runs.by_ref().flatten());
        } else if let Some(run) = runs.next() {
            out.extend(run);
        }
    }
    out
}

/// Names each driver record (`cuMemAlloc_v2`; live, event or held at finalization) whose stack
/// is `ready` by the runtime function in that stack (`cudaMalloc` of a statically linked
/// runtime), once per API and stack.
fn label_driver_records<S: NameText>(dump: &mut Dump<S>, ready: impl Fn(usize) -> bool) {
    // By stack, the APIs asked about and their answers (a million records come from a few
    // thousand stacks, each with one or two APIs): no allocation for a record asked before.
    let mut memo: HashMap<usize, Vec<(String, Option<S>)>> = HashMap::new();
    let stacks = &dump.stacks;
    let mut label = |api: &S, stack: usize| -> Option<S> {
        let api = api.as_ref();
        if api.starts_with("cuda") || !ready(stack) {
            return None;
        }
        let asked = memo.entry(stack).or_default();
        match asked.iter().find(|(a, _)| a == api) {
            Some((_, found)) => found.clone(),
            None => {
                let functions = stacks.get(stack).into_iter().flat_map(|s| {
                    s.frames
                        .iter()
                        .map(|f| f.function.as_ref().map(AsRef::as_ref))
                });
                let found = format::api::called_as(api, functions).map(S::from_text);
                asked.push((api.to_string(), found.clone()));
                found
            }
        }
    };
    for r in &mut dump.live {
        if let Some(n) = label(&r.api, r.stack) {
            r.api = n;
        }
    }
    for e in &mut dump.events {
        if let Some(n) = label(&e.api, e.stack) {
            e.api = n;
        }
    }
    for h in dump.finalizing.iter_mut().flat_map(|f| f.held.iter_mut()) {
        if let Some(n) = label(&h.api, h.stack) {
            h.api = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::FrameKind;

    /// `symbols_at` reads a symbol table in one pass; it must name every address exactly as
    /// addr2line's symbol map does: at, just past and just before every symbol, and across the
    /// whole file, in this test's own binary (a full symbol table, symbols without sizes) and the
    /// system's shared libraries found here (dynamic symbols only).
    #[test]
    fn a_symbol_table_read_in_one_pass_names_as_addr2line_does() {
        use object::{Object, ObjectSymbol};
        let mut files = vec![std::env::current_exe().unwrap()];
        for lib in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
        ] {
            if Path::new(lib).exists() {
                files.push(PathBuf::from(lib));
            }
        }
        let mut compared = 0;
        for path in &files {
            let data = std::fs::read(path).unwrap();
            let obj = object::File::parse(&*data).unwrap();
            let table = obj.symbol_table().or_else(|| obj.dynamic_symbol_table());
            let addresses: Vec<u64> = table
                .iter()
                .flat_map(object::ObjectSymbolTable::symbols)
                .map(|s| s.address())
                .collect();
            // At most about 20 000 symbols a file, and a grid of 5 000 points over it.
            let step = addresses.len() / 20_000 + 1;
            let mut offsets: Vec<u64> = addresses
                .iter()
                .step_by(step)
                .flat_map(|&a| [a, a + 1, a + 2, a.saturating_sub(1)])
                .collect();
            let span = data.len() as u64;
            offsets.extend((0..5_000).map(|i| i * span / 5_000));
            offsets.push(u64::MAX);
            let loader = addr2line::Loader::new(path).unwrap();
            let ours = symbols_at(&std::fs::File::open(path).unwrap(), &offsets);
            for (offset, got) in offsets.iter().zip(ours) {
                let want = loader
                    .find_symbol(offset.saturating_sub(1))
                    .map(str::to_string);
                assert_eq!(got, want, "{} at {offset:#x}", path.display());
                compared += 1;
            }
        }
        assert!(
            compared > 20_000,
            "{compared} addresses compared in {files:?}"
        );
    }

    #[test]
    fn only_mangled_names_are_demangled() {
        for c_name in ["b", "a", "c", "x", "main", "cudaMalloc", "alloc_block"] {
            assert_eq!(function_name(c_name), c_name);
        }
        assert_eq!(function_name("_Z3fooPf"), "foo(float*)");
        assert_eq!(
            function_name("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
    }

    fn native(name: &str) -> Frame {
        Frame {
            function: Some(name.into()),
            ..Frame::default()
        }
    }

    fn py(name: &str) -> Frame {
        Frame {
            kind: Some(FrameKind::Python),
            function: Some(name.into()),
            ..Frame::default()
        }
    }

    fn names(frames: &[Frame]) -> Vec<&str> {
        frames
            .iter()
            .map(|f| f.function.as_deref().unwrap_or("?"))
            .collect()
    }

    #[test]
    fn each_eval_frame_takes_one_run_of_python_frames() {
        let stack = vec![
            native("ffi_call"),
            native(EVAL_FRAME_FUNCTION),
            native("PyObject_Vectorcall"),
            native(EVAL_FRAME_FUNCTION),
            native("main"),
        ];
        let runs = vec![
            vec![py("inner"), py("middle")],
            vec![py("callback"), py("<module>")],
        ];
        assert_eq!(
            names(&splice(stack, runs)),
            [
                "ffi_call",
                "inner",
                "middle",
                "PyObject_Vectorcall",
                "callback",
                "<module>",
                "main"
            ]
        );
    }

    #[test]
    fn the_outermost_eval_frame_takes_the_runs_left_and_extra_eval_frames_go() {
        let stack = vec![native("ffi_call"), native(EVAL_FRAME_FUNCTION)];
        let runs = vec![vec![py("a")], vec![py("b")], vec![py("c")]];
        assert_eq!(names(&splice(stack, runs)), ["ffi_call", "a", "b", "c"]);
        let stack = vec![
            native(EVAL_FRAME_FUNCTION),
            native("x"),
            native(EVAL_FRAME_FUNCTION),
        ];
        assert_eq!(names(&splice(stack, vec![vec![py("a")]])), ["a", "x"]);
    }

    #[test]
    fn without_an_eval_frame_python_frames_go_at_the_outer_end() {
        let stack = vec![native("at::empty"), native("at::_ops::call")];
        assert_eq!(
            names(&splice(stack, vec![vec![py("step")]])),
            ["at::empty", "at::_ops::call", "step"]
        );
    }

    #[inline(never)]
    fn marker() -> u32 {
        std::hint::black_box(7)
    }

    /// A dump of this test binary's own `marker`, as the shim writes it.
    fn unnamed_dump(build_id: Option<String>) -> Dump {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap().to_string();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        // The test binary's first mapping (file offset 0): its load bias for a PIE.
        let base = maps
            .lines()
            .find(|l| l.ends_with(&exe))
            .and_then(|l| usize::from_str_radix(l.split('-').next()?, 16).ok())
            .unwrap();
        // A return address just past marker's first instruction.
        let ip = marker as *const () as usize + 1;
        let mut d = crate::fixture("clean.json");
        d.unnamed = true;
        d.modules = vec![format::Module {
            path: exe.clone(),
            base: format::Hex(base as u64),
            build_id,
        }];
        let dump_text = serde_json::to_string(&d).unwrap();
        let mut d: Dump = serde_json::from_str(&dump_text).unwrap();
        d.stacks = vec![format::Stack {
            frames: vec![Frame {
                kind: None,
                ip: format::Hex(ip as u64),
                module: Some(exe),
                offset: Some(format::Hex((ip - base) as u64)),
                function: None,
                file: None,
                line: None,
            }],
            python: vec![vec![py("step")]],
        }];
        d
    }

    fn own_build_id() -> Option<String> {
        use object::Object;
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let obj = object::File::parse(&*exe).unwrap();
        obj.build_id()
            .unwrap()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect())
    }

    #[test]
    fn a_frame_is_named_from_its_module_and_offset_and_python_frames_are_spliced() {
        let mut d = unnamed_dump(own_build_id());
        let notes = Symbolizer::default().name(&mut d);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(!d.unnamed);
        assert_marker_named(&d);
    }

    /// `d` (an [`unnamed_dump`]) named whole: inlined code (black_box, in release builds) first;
    /// the function itself, then the Python frame spliced at the outer end (no evaluation frame
    /// in this stack).
    fn assert_marker_named(d: &Dump) {
        let frames = &d.stacks[0].frames;
        let own = &frames[frames.len() - 2];
        assert!(
            own.function
                .as_deref()
                .unwrap_or("")
                .ends_with("tests::marker"),
            "{frames:?}"
        );
        assert!(own.file.as_deref().unwrap_or("").ends_with("symbols.rs"));
        assert!(own.line.is_some());
        assert_eq!(frames.last().unwrap().function.as_deref(), Some("step"));
        assert!(d.stacks[0].python.is_empty());
    }

    #[test]
    fn a_module_whose_build_id_differs_stays_unnamed_and_is_said_once() {
        let mut s = Symbolizer::default();
        let mut d = unnamed_dump(Some("00112233445566778899aabbccddeeff00112233".into()));
        let notes = s.name(&mut d);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0]
                .ends_with(": rebuilt since the run (build-id differs); its frames stay unnamed"),
            "{}",
            notes[0]
        );
        assert_eq!(d.stacks[0].frames[0].function, None);
        assert!(d.stacks[0].frames[0].offset.is_some());
        let mut again = unnamed_dump(Some("00112233445566778899aabbccddeeff00112233".into()));
        assert!(s.name(&mut again).is_empty(), "said once per invocation");
    }

    #[test]
    fn a_missing_module_says_where_to_name_it() {
        let mut d = unnamed_dump(None);
        d.stacks[0].frames[0].module = Some("/nonexistent/app".into());
        let notes = Symbolizer::default().name(&mut d);
        assert_eq!(
            notes,
            ["/nonexistent/app: not found on this machine: run `cudaleak symbolize` where the program ran; its frames stay unnamed"]
        );
        // A report gives up on it: the Python frames go where the names there are place them.
        assert!(d.unnamed);
        settle(&mut d);
        assert!(!d.unnamed);
        assert_eq!(names(&d.stacks[0].frames), ["?", "step"]);
        assert!(d.stacks[0].python.is_empty());
    }

    /// `d`'s frames of the test binary moved to `path`: a module missing until the test links
    /// `path` to the test binary, which brings it back.
    fn moved_to(mut d: Dump, path: &Path) -> Dump {
        let path = path.to_str().unwrap().to_string();
        d.modules[0].path.clone_from(&path);
        for f in &mut d.stacks[0].frames {
            f.module = Some(path.clone());
        }
        d
    }

    fn bring_back(path: &Path) {
        std::os::unix::fs::symlink(std::fs::read_link("/proc/self/exe").unwrap(), path).unwrap();
    }

    #[test]
    fn a_module_missing_when_the_dump_was_named_is_named_once_it_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("app");
        let mut d = moved_to(unnamed_dump(own_build_id()), &app);
        let notes = Symbolizer::default().name(&mut d);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(d.unnamed, "frames are left to name");
        assert_eq!(names(&d.stacks[0].frames), ["?"]);
        assert_eq!(
            d.stacks[0].frames[0].offset,
            unnamed_dump(None).stacks[0].frames[0].offset
        );
        assert_eq!(
            d.stacks[0].python,
            [vec![py("step")]],
            "the Python frames wait for the native names"
        );
        // As written back and read again: a dump named in part is a valid dump.
        let mut text = Vec::new();
        format::write(&d, &mut text).unwrap();
        let mut d = format::from_slice(&text).expect("a valid dump");
        assert!(d.unnamed);

        bring_back(&app);
        let notes = Symbolizer::default().name(&mut d);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(!d.unnamed);
        assert_marker_named(&d);
    }

    #[test]
    fn a_later_naming_keeps_the_names_given_before_and_adds_the_rest() {
        // The frames one naming gives marker, inlined ones first.
        let mut whole = unnamed_dump(own_build_id());
        Symbolizer::default().name(&mut whole);
        let marker: Vec<String> = whole.stacks[0].frames[..whole.stacks[0].frames.len() - 1]
            .iter()
            .map(|f| f.function.clone().unwrap_or_default())
            .collect();
        assert!(
            marker.last().unwrap().ends_with("tests::marker"),
            "{marker:?}"
        );

        // A stack through the runtime, the test binary and a module missing for now.
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("app");
        let mut d = unnamed_dump(own_build_id());
        let missing = moved_to(unnamed_dump(own_build_id()), &app);
        d.modules.extend(missing.modules);
        d.stacks[0].frames.extend(missing.stacks[0].frames.clone());
        d.stacks[0].frames.insert(0, native("cudaMalloc"));
        d.live = vec![format::LiveRecord {
            address: format::Hex(0x1000),
            size: 1,
            bytes_held: None,
            api: "cuMemAlloc_v2".into(),
            kind: format::Kind::Device,
            device: Some(0),
            thread: 1,
            seq: 1,
            time_ms: 0,
            stack: 0,
        }];

        Symbolizer::default().name(&mut d);
        assert!(d.unnamed);
        let expected_first: Vec<&str> = std::iter::once("cudaMalloc")
            .chain(marker.iter().map(String::as_str))
            .chain(["?"])
            .collect();
        assert_eq!(names(&d.stacks[0].frames), expected_first);
        assert_eq!(d.stacks[0].python, [vec![py("step")]]);
        assert_eq!(
            d.live[0].api, "cuMemAlloc_v2",
            "labelled once its stack is named"
        );

        bring_back(&app);
        Symbolizer::default().name(&mut d);
        assert!(!d.unnamed);
        let expected: Vec<&str> = std::iter::once("cudaMalloc")
            .chain(marker.iter().map(String::as_str))
            .chain(marker.iter().map(String::as_str))
            .chain(["step"])
            .collect();
        assert_eq!(names(&d.stacks[0].frames), expected);
        let modules: Vec<Option<&str>> = d.stacks[0].frames[1..]
            .iter()
            .map(|f| f.module.as_deref())
            .collect();
        let own = d.modules[0].path.as_str();
        let n = marker.len();
        assert!(modules[..n].iter().all(|m| *m == Some(own)), "{modules:?}");
        assert!(
            modules[n..2 * n].iter().all(|m| *m == app.to_str()),
            "{modules:?}"
        );
        assert_eq!(d.live[0].api, "cudaMalloc");
    }

    #[test]
    fn a_module_path_naming_a_fifo_or_a_device_is_refused_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
        for (path, what) in [
            (fifo.to_str().unwrap(), "a FIFO (named pipe)"),
            ("/dev/zero", "a character device"),
        ] {
            let mut d = unnamed_dump(None);
            d.stacks[0].frames[0].module = Some(path.into());
            let notes = Symbolizer::default().name(&mut d);
            assert_eq!(
                notes,
                [format!(
                    "{path}: is {what}, not a regular file; its frames stay unnamed"
                )]
            );
        }
    }

    #[test]
    fn a_driver_record_is_named_by_the_runtime_entry_in_its_stack() {
        let mut d = unnamed_dump(None);
        d.stacks[0].frames.insert(0, native("cudaMalloc"));
        d.stacks[0].frames[0].module = None;
        d.live = vec![format::LiveRecord {
            address: format::Hex(0x1000),
            size: 1,
            bytes_held: None,
            api: "cuMemAlloc_v2".into(),
            kind: format::Kind::Device,
            device: Some(0),
            thread: 1,
            seq: 1,
            time_ms: 0,
            stack: 0,
        }];
        Symbolizer::default().name(&mut d);
        assert_eq!(d.live[0].api, "cudaMalloc");
    }
}
