//! Where a function of a shared library lies in another process: its dynamic symbol's value in
//! the file, plus where the process mapped the file (`/proc/PID/maps`), minus the file's first
//! load address. Read from the file with `object`; the process is never read for this.

use std::path::Path;

use object::{Object, ObjectSegment, ObjectSymbol};

/// The offset of dynamic symbol `name` from the library's load base, if it defines one.
pub fn symbol_offset(data: &[u8], name: &str) -> Option<u64> {
    let file = object::File::parse(data).ok()?;
    let first_load = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
    file.dynamic_symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
        .map(|s| s.address() - first_load)
}

/// The offsets of every definition of any of `names` (each version of a versioned symbol:
/// `pthread_cond_wait@GLIBC_2.2.5` and `@@GLIBC_2.3.2` are two functions).
pub fn all_definitions(path: &Path, names: &[&str]) -> Result<Vec<u64>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let Ok(file) = object::File::parse(&*data) else {
        return Ok(Vec::new());
    };
    let first_load = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
    Ok(file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.name().is_ok_and(|n| names.contains(&n)))
        .map(|s| s.address() - first_load)
        .collect())
}

/// `symbol_offset` for each of `names` in the file at `path`.
pub fn symbol_offsets(path: &Path, names: &[&str]) -> Result<Vec<Option<u64>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    Ok(names.iter().map(|n| symbol_offset(&data, n)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_library_defines_dlopen_or_its_private_twin() {
        // Whatever libc this test runs against: one of the two must be there.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = crate::attach::target::parse_maps(&maps)
            .into_iter()
            .find(|m| crate::attach::target::is_libc(&m.path))
            .expect("libc is mapped");
        let found =
            symbol_offsets(Path::new(&libc.path), &["dlopen", "__libc_dlopen_mode"]).unwrap();
        assert!(found.iter().any(Option::is_some), "{found:?}");
        // Both versions of pthread_cond_wait where this libc keeps the old one too.
        let waits = all_definitions(Path::new(&libc.path), &["pthread_cond_wait"]).unwrap();
        assert!(!waits.is_empty());
        let newest = symbol_offsets(Path::new(&libc.path), &["pthread_cond_wait"]).unwrap();
        assert!(newest.iter().flatten().all(|o| waits.contains(o)));
        assert_eq!(symbol_offset(b"not an ELF file", "dlopen"), None);
    }
}
