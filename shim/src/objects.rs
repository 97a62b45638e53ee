//! The loaded objects as the loader lists them (`dl_iterate_phdr`): the one walk the shim's three
//! users share — which copy of the shim records (`process`), the shim's own code range (`stack`),
//! the modules whose pointers `cudaleak attach` replaces (`attach::patch`).
//!
//! The walk runs under the loader's lock: it allocates nothing itself and calls nothing of the
//! loader's; what the visitor does under that lock is the visitor's to keep safe.

use std::ffi::{c_char, c_int, c_void};
use std::ops::Range;

/// One loaded object, valid for the visit.
pub struct Object<'a> {
    /// The load bias: `p_vaddr` of a segment plus this is its address.
    pub base: usize,
    pub phdrs: &'a [libc::Elf64_Phdr],
    /// The loader's name of the object (empty for the executable), NUL-terminated.
    pub name: *const c_char,
    /// How many objects the process has loaded so far (glibc's `dlpi_adds`, the same in every
    /// visit of one walk): a change says something was loaded since.
    pub loads: u64,
}

impl Object<'_> {
    /// The addresses its loadable segments span (empty if it has none).
    pub fn span(&self) -> Range<usize> {
        let (mut lo, mut hi) = (usize::MAX, 0);
        for p in self.phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
            lo = lo.min(self.base + p.p_vaddr as usize);
            hi = hi.max(self.base + (p.p_vaddr + p.p_memsz) as usize);
        }
        if lo < hi {
            lo..hi
        } else {
            0..0
        }
    }
}

/// Calls `visit` for each loaded object, in the loader's order, until it returns true.
pub fn each(mut visit: impl FnMut(&Object) -> bool) {
    unsafe extern "C" fn callback(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: data is the `&mut dyn FnMut` `each` passed, alive for the whole iteration and
        // used by nothing else meanwhile; the loader passes a valid dl_phdr_info whose dlpi_phdr
        // array has dlpi_phnum entries, valid for the duration of the callback.
        unsafe {
            let visit = &mut *(data as *mut &mut dyn FnMut(&Object) -> bool);
            let info = &*info;
            if info.dlpi_phdr.is_null() {
                return 0;
            }
            let object = Object {
                base: info.dlpi_addr as usize,
                phdrs: std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)),
                name: info.dlpi_name,
                loads: info.dlpi_adds,
            };
            c_int::from(visit(&object))
        }
    }
    let mut visit: &mut dyn FnMut(&Object) -> bool = &mut visit;
    // SAFETY: the callback only reads what the loader hands it and calls `visit`, which outlives
    // the iteration.
    unsafe {
        libc::dl_iterate_phdr(
            Some(callback),
            &mut visit as *mut &mut dyn FnMut(&Object) -> bool as *mut c_void,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_finds_the_object_holding_this_code_and_stops_when_told() {
        let here =
            the_walk_finds_the_object_holding_this_code_and_stops_when_told as *const () as usize;
        let (mut seen, mut found) = (0, 0..0);
        each(|o| {
            seen += 1;
            let span = o.span();
            if span.contains(&here) {
                found = span;
                return true;
            }
            false
        });
        assert!(found.contains(&here), "{found:x?}");
        let mut all = 0;
        each(|_| {
            all += 1;
            false
        });
        assert!(seen <= all && all > 1, "{seen} of {all}");
    }
}
