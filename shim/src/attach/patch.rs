//! The `pointers` route: where a running program keeps a pointer to a function the shim hooks,
//! the pointer is replaced by the hook, and put back at detach.
//!
//! Two passes over every loaded module but this one (`dl_iterate_phdr`):
//! - **imports**: its dynamic relocations (GLOB_DAT, JUMP_SLOT, absolute) that name a hooked
//!   driver function, a runtime allocation function (its forward labels the record), a library
//!   handle's create, destroy or use (cuBLAS, cuFFT … : `hooks/libraries.rs`) or `dlsym` (lookups
//!   made after attach are answered with our hooks, as under LD_PRELOAD). Lazily bound slots are
//!   covered too: the slot is found by its name, not its value.
//! - **tables**: every 8-byte word of its writable segments (RELRO included) that holds the
//!   address of one of the driver's hooked functions: the table a runtime fills through
//!   `cuGetProcAddress` (static cudart keeps it in the program's own data, shared cudart in
//!   libcudart's; PyTorch's driver API table in libc10_cuda's). A word that equals a driver
//!   function's address is taken to be a pointer to it.
//!
//! A module's pointers into itself are left alone (the driver's own tables, a runtime's calls of
//! its own exports). Not covered: pointers kept on the heap or on a stack (a framework that
//! copies the driver's entry points into an object it allocated), and calls already inside the
//! driver. Slots under RELRO are made writable for the write and read-only again.
//!
//! Other threads run on meanwhile and may `dlopen` or `dlclose`: each module is read and written
//! inside the loader's walk (`dl_iterate_phdr`, whose lock `dlclose` unmaps under), and a RELRO
//! page is opened only where the loader has already sealed it (an object another thread is still
//! relocating is left alone: sealing its page under the loader would fault the loader).

use std::collections::BTreeMap;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::hook_list::hooked;
use crate::hooks::driver::{wrapper, HOOKS};
use crate::real;

/// One replaced pointer.
struct Patched {
    slot: usize,
    original: usize,
    ours: usize,
}

static PATCHED: Mutex<Vec<Patched>> = Mutex::new(Vec::new());

/// What the passes need of one loaded module.
struct Module {
    base: usize,
    /// Its whole extent in memory.
    lo: usize,
    hi: usize,
    /// Writable segments.
    writable: Vec<(usize, usize)>,
    /// The pages the loader made read-only after relocation.
    relro: Option<(usize, usize)>,
    dynamic: Option<usize>,
}

const PT_GNU_RELRO: u32 = 0x6474_e552;
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;

#[cfg(target_arch = "x86_64")]
const IMPORT_TYPES: [u32; 3] = [6, 7, 1]; // GLOB_DAT, JUMP_SLOT, 64
#[cfg(target_arch = "aarch64")]
const IMPORT_TYPES: [u32; 3] = [1025, 1026, 257]; // GLOB_DAT, JUMP_SLOT, ABS64

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

macro_rules! runtime_forwards {
    (
        driver { $($driver:tt)* }
        unlabelled { $($unlabelled:tt)* }
        runtime { $(
            $name:ident $op:ident fn($($arg:ident: $ty:ty),*) => $returned:ident($($rarg:expr),*);
        )* }
        libraries { $($libraries:tt)* }
    ) => {
        /// The runtime functions with a forward, and the forward.
        fn runtime_forwards() -> Vec<(&'static [u8], usize)> {
            vec![$((stringify!($name).as_bytes(), crate::hooks::runtime::$name as *const () as usize),)*]
        }
    };
}

hooked!(runtime_forwards);

macro_rules! library_forwards {
    (
        driver { $($driver:tt)* }
        unlabelled { $($unlabelled:tt)* }
        runtime { $($runtime:tt)* }
        libraries { $(
            $library:ident: $name:ident $role:ident fn($($arg:ident: $ty:ty),*) => $handle:ident;
        )* }
    ) => {
        /// The library functions with a forward (handle create, destroy and use), and the forward.
        fn library_forwards() -> Vec<(&'static [u8], usize)> {
            vec![$((stringify!($name).as_bytes(), crate::hooks::libraries::$name as *const () as usize),)*]
        }
    };
}

hooked!(library_forwards);

/// Our `dlsym`, which hands out the hooks for the driver's functions.
fn our_dlsym() -> Option<usize> {
    #[cfg(not(test))]
    return Some(crate::hooks::dlsym::dlsym as *const () as usize);
    #[cfg(test)]
    None
}

/// Import names → the function that replaces them.
fn import_targets() -> BTreeMap<&'static [u8], usize> {
    let mut names: BTreeMap<&'static [u8], usize> = BTreeMap::new();
    for (i, h) in HOOKS.iter().enumerate() {
        names.insert(h.slot.name.to_bytes(), wrapper(i) as usize);
    }
    for (name, ours) in runtime_forwards().into_iter().chain(library_forwards()) {
        names.insert(name, ours);
    }
    if let Some(ours) = our_dlsym() {
        names.insert(b"dlsym", ours);
    }
    names
}

/// The driver's hooked functions (resolved now, as each hook would at its first call) → hooks,
/// sorted by address.
fn table_targets() -> Vec<(usize, usize)> {
    let mut targets: Vec<(usize, usize)> = (0..HOOKS.len())
        .filter_map(|i| {
            let p = HOOKS[i].slot.get(wrapper(i), real::driver);
            (!p.is_null()).then_some((p as usize, wrapper(i) as usize))
        })
        .collect();
    targets.sort_unstable();
    targets.dedup_by_key(|t| t.0);
    targets
}

/// Replaces the pointers; returns how many import slots and how many other pointers.
///
/// Each module is scanned and written inside the loader's walk, which holds the lock `dlclose`
/// unmaps under: a library another thread closes meanwhile is either seen whole or not at all.
pub fn install() -> (usize, usize) {
    let names = import_targets();
    let tables = table_targets();
    let mut patched = PATCHED.lock().unwrap_or_else(|e| e.into_inner());
    let (mut imports_n, mut tables_n) = (0, 0);
    walk(|m, pages| {
        imports_n += imports(m, &names, pages, &mut patched);
        tables_n += table_pointers(m, &tables, pages, &mut patched);
    });
    (imports_n, tables_n)
}

/// How many objects the process has loaded so far (see `objects::Object::loads`).
pub fn loads() -> u64 {
    let mut n = 0;
    crate::objects::each(|o| {
        n = o.loads;
        true
    });
    n
}

/// Puts back every pointer that still holds ours (in a module still loaded). A pointer that
/// cannot be put back now (its page was being loaded over) keeps ours: the library stays
/// loaded, and its hook passes calls through.
pub fn restore() {
    let mut patched = PATCHED.lock().unwrap_or_else(|e| e.into_inner());
    walk(|m, pages| {
        patched.retain(|p| {
            if !m
                .writable
                .iter()
                .any(|&(lo, hi)| (lo..hi).contains(&p.slot))
            {
                return true; // another module's
            }
            // SAFETY: the slot is an aligned word of a writable segment of a module the walk
            // holds loaded, the one `install` wrote.
            if unsafe { slot(p.slot) }.load(Ordering::Acquire) != p.ours {
                return false; // the program or its loader wrote it since: theirs now
            }
            // SAFETY: as above.
            !unsafe { write(m, p.slot, p.original, pages) }
        });
    });
    // What no walk reached was unloaded with its module.
    patched.clear();
}

/// Calls `visit` for every loaded module but this library, inside the loader's walk, with the
/// process's pages as they are during it.
fn walk(mut visit: impl FnMut(&Module, &Pages)) {
    let mut pages = None;
    each_module(|m| visit(m, pages.get_or_insert_with(Pages::now)));
}

/// The process's mappings, read inside the loader's walk: no listed object is unmapped until
/// the walk ends, so a page read-only now stays so, and its object's.
struct Pages {
    /// Start, end and whether writable.
    ranges: Vec<(usize, usize, bool)>,
}

impl Pages {
    fn now() -> Pages {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        Pages {
            ranges: parse_ranges(&text),
        }
    }

    /// Whether the RELRO page holding `addr` may be opened for a write: the loader has made it
    /// read-only, which it does once it has relocated the object, and never writes it again. A
    /// page still writable belongs to an object another thread is relocating: sealing it under
    /// the loader would fault the loader.
    fn sealed(&self, addr: usize) -> bool {
        self.ranges
            .iter()
            .any(|&(lo, hi, writable)| (lo..hi).contains(&addr) && !writable)
    }
}

/// `start-end perms …` lines → (start, end, writable).
fn parse_ranges(text: &str) -> Vec<(usize, usize, bool)> {
    text.lines()
        .filter_map(|line| {
            let (range, rest) = line.split_once(' ')?;
            let (lo, hi) = range.split_once('-')?;
            Some((
                usize::from_str_radix(lo, 16).ok()?,
                usize::from_str_radix(hi, 16).ok()?,
                rest.as_bytes().get(1) == Some(&b'w'),
            ))
        })
        .collect()
}

/// # Safety
/// `addr` is an 8-byte-aligned address of mapped, readable memory that lives for the call.
unsafe fn slot<'a>(addr: usize) -> &'a AtomicUsize {
    // SAFETY: per the contract; AtomicUsize has the size and alignment of a pointer.
    unsafe { &*(addr as *const AtomicUsize) }
}

/// Writes `value` into the slot at `addr` of `m`, opening its RELRO page for the write where
/// `pages` says that is safe; false when it is not (the slot is left as it is).
///
/// # Safety
/// `addr` is an 8-byte-aligned slot of a writable segment of `m`, which the caller's loader
/// walk keeps loaded.
unsafe fn write(m: &Module, addr: usize, value: usize, pages: &Pages) -> bool {
    if !in_relro(m, addr) {
        // SAFETY: per the contract; outside RELRO a writable segment stays writable.
        unsafe { slot(addr) }.store(value, Ordering::Release);
        return true;
    }
    if !pages.sealed(addr) {
        return false;
    }
    let page = page_size();
    let start = (addr & !(page - 1)) as *mut c_void;
    // SAFETY: mprotect on one page of a loaded module's data segment, restored below.
    if unsafe { libc::mprotect(start, page, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        return false;
    }
    // SAFETY: per the contract, and writable now.
    unsafe { slot(addr) }.store(value, Ordering::Release);
    // SAFETY: as above: the page goes back to what the loader made it.
    unsafe { libc::mprotect(start, page, libc::PROT_READ) };
    true
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

fn in_relro(m: &Module, addr: usize) -> bool {
    m.relro.is_some_and(|(lo, hi)| (lo..hi).contains(&addr))
}

/// Replaces the pointer at `addr` by `ours`; whether it did.
fn record(m: &Module, addr: usize, ours: usize, pages: &Pages, patched: &mut Vec<Patched>) -> bool {
    // SAFETY: addr is an aligned slot inside one of m's writable segments (callers check),
    // loaded for the walk the caller runs in.
    let original = unsafe { slot(addr) }.load(Ordering::Acquire);
    if original == ours || (m.lo..m.hi).contains(&original) {
        return false; // ours already, or the module's pointer into itself
    }
    // SAFETY: as above.
    let written = unsafe { write(m, addr, ours, pages) };
    if written {
        patched.push(Patched {
            slot: addr,
            original,
            ours,
        });
    }
    written
}

/// Replaces the import slots of `m` that name one of `names`; how many.
fn imports(
    m: &Module,
    names: &BTreeMap<&'static [u8], usize>,
    pages: &Pages,
    patched: &mut Vec<Patched>,
) -> usize {
    let Some(dynamic) = m.dynamic else { return 0 };
    let fix = |p: u64| -> usize {
        // glibc rewrites these entries to addresses where it loads the object; a value below
        // the base is still an offset.
        let p = p as usize;
        if p < m.base {
            p + m.base
        } else {
            p
        }
    };
    let (mut strtab, mut symtab) = (0usize, 0usize);
    let mut tables: [(usize, usize); 2] = [(0, 0); 2];
    let mut d = dynamic as *const Dyn;
    // SAFETY: the dynamic segment of a loaded object is an array of Dyn ending in DT_NULL.
    unsafe {
        loop {
            let e = &*d;
            match e.tag {
                DT_NULL => break,
                DT_STRTAB => strtab = fix(e.val),
                DT_SYMTAB => symtab = fix(e.val),
                DT_RELA => tables[0].0 = fix(e.val),
                DT_RELASZ => tables[0].1 = e.val as usize,
                DT_JMPREL => tables[1].0 = fix(e.val),
                DT_PLTRELSZ => tables[1].1 = e.val as usize,
                _ => {}
            }
            d = d.add(1);
        }
    }
    if strtab == 0 || symtab == 0 {
        return 0;
    }
    let mut n_replaced = 0;
    for (start, size) in tables {
        if start == 0 {
            continue;
        }
        let n = size / std::mem::size_of::<Rela>();
        // SAFETY: DT_RELA/DT_JMPREL point at `size` bytes of Rela entries in the object.
        let relas = unsafe { std::slice::from_raw_parts(start as *const Rela, n) };
        for r in relas {
            let kind = (r.info & 0xffff_ffff) as u32;
            let index = (r.info >> 32) as usize;
            if index == 0 || !IMPORT_TYPES.contains(&kind) || r.addend != 0 {
                continue;
            }
            // SAFETY: a relocation's symbol index names an entry of the object's DT_SYMTAB,
            // whose name is a NUL-terminated string in DT_STRTAB.
            let name = unsafe {
                let sym = &*(symtab as *const Sym).add(index);
                CStr::from_ptr((strtab + sym.name as usize) as *const libc::c_char)
            }
            .to_bytes();
            let Some(&ours) = names.get(name) else {
                continue;
            };
            let addr = m.base + r.offset as usize;
            if addr.is_multiple_of(8)
                && m.writable.iter().any(|&(lo, hi)| (lo..hi).contains(&addr))
                && record(m, addr, ours, pages, patched)
            {
                n_replaced += 1;
            }
        }
    }
    n_replaced
}

/// Replaces the words of `m`'s writable segments that hold a driver function's address; how
/// many.
fn table_pointers(
    m: &Module,
    targets: &[(usize, usize)],
    pages: &Pages,
    patched: &mut Vec<Patched>,
) -> usize {
    let (Some(first), Some(last)) = (targets.first(), targets.last()) else {
        return 0;
    };
    if (m.lo..m.hi).contains(&first.0) || (m.lo..m.hi).contains(&last.0) {
        return 0; // the driver itself
    }
    let mut n_replaced = 0;
    for &(lo, hi) in &m.writable {
        let mut addr = (lo + 7) & !7;
        while addr + 8 <= hi {
            // SAFETY: an aligned word inside a loaded segment, readable for the process's life.
            let v = unsafe { slot(addr) }.load(Ordering::Relaxed);
            if v >= first.0 && v <= last.0 {
                if let Ok(i) = targets.binary_search_by_key(&v, |t| t.0) {
                    if record(m, addr, targets[i].1, pages, patched) {
                        n_replaced += 1;
                    }
                }
            }
            addr += 8;
        }
    }
    n_replaced
}

/// Calls `visit` for every loaded module but this library, inside the loader's walk: what
/// `visit` does must take none of the loader's locks (no dlsym, dladdr or dlopen, no first use
/// of a loaded library's thread-local).
fn each_module(mut visit: impl FnMut(&Module)) {
    let own = page_size as *const () as usize;
    let page = page_size();
    crate::objects::each(|o| {
        let mut m = Module {
            base: o.base,
            lo: usize::MAX,
            hi: 0,
            writable: Vec::new(),
            relro: None,
            dynamic: None,
        };
        for p in o.phdrs {
            let start = o.base + p.p_vaddr as usize;
            let end = start + p.p_memsz as usize;
            match p.p_type {
                libc::PT_LOAD => {
                    m.lo = m.lo.min(start);
                    m.hi = m.hi.max(end);
                    if p.p_flags & libc::PF_W != 0 {
                        m.writable.push((start, end));
                    }
                }
                libc::PT_DYNAMIC => m.dynamic = Some(start),
                PT_GNU_RELRO => m.relro = Some((start & !(page - 1), end & !(page - 1))),
                _ => {}
            }
        }
        if m.lo < m.hi && !(m.lo..m.hi).contains(&own) {
            visit(&m);
        }
        false
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hooked_driver_function_and_runtime_forward_is_an_import_target() {
        let names = import_targets();
        assert!(names.contains_key(&b"cuMemAlloc_v2"[..]));
        assert!(names.contains_key(&b"cuGetProcAddress_v2"[..]));
        assert!(names.contains_key(&b"cudaMalloc"[..]));
        assert!(names.contains_key(&b"cudaFreeAsync_ptsz"[..]));
        assert!(names.contains_key(&b"cublasCreate_v2"[..]));
        assert!(names.contains_key(&b"ncclCommDestroy"[..]));
        assert!(!names.contains_key(&b"cuMemcpy"[..]));
    }

    #[test]
    fn the_modules_exclude_this_one_and_have_their_writable_segments() {
        let own = page_size as *const () as usize;
        let (mut n, mut with_writable, mut holding_own) = (0, 0, 0);
        each_module(|m| {
            n += 1;
            with_writable += usize::from(!m.writable.is_empty());
            holding_own += usize::from((m.lo..m.hi).contains(&own));
        });
        assert!(n > 0 && with_writable > 0 && holding_own == 0);
    }

    #[test]
    fn a_relro_page_is_opened_only_where_the_loader_sealed_it() {
        let ranges = parse_ranges(
            "7f0000000000-7f0000001000 r--p 00000000 08:01 1 /lib/a.so\n\
             7f0000001000-7f0000002000 rw-p 00001000 08:01 1 /lib/a.so\n\
             bad line\n",
        );
        assert_eq!(
            ranges,
            [
                (0x7f00_0000_0000, 0x7f00_0000_1000, false),
                (0x7f00_0000_1000, 0x7f00_0000_2000, true)
            ]
        );
        let pages = Pages { ranges };
        assert!(pages.sealed(0x7f00_0000_0008));
        // Still writable: another thread's dlopen is relocating its object.
        assert!(!pages.sealed(0x7f00_0000_1008));
        // Not mapped when the maps were read.
        assert!(!pages.sealed(0x7f00_0000_3008));
    }
}
