//! Return addresses → frames (function, file, line, module, offset), at dump time only and
//! only for stacks the dump refers to. Inlined calls become frames of their own, sharing an ip.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::ffi::c_void;

use cudaleak_format::{Frame, Hex};

use crate::real;

/// Symbolises addresses, remembering each address's frames.
pub struct Symbolizer {
    exe: String,
    cache: HashMap<usize, Vec<Frame>>,
}

impl Symbolizer {
    pub fn new(exe: String) -> Symbolizer {
        Symbolizer {
            exe,
            cache: HashMap::new(),
        }
    }

    pub fn frames(&mut self, ips: &[usize]) -> Vec<Frame> {
        let mut out = Vec::with_capacity(ips.len());
        for &ip in ips {
            if !self.cache.contains_key(&ip) {
                let frames = self.resolve(ip);
                self.cache.insert(ip, frames);
            }
            out.extend_from_slice(&self.cache[&ip]);
        }
        out
    }

    fn resolve(&self, ip: usize) -> Vec<Frame> {
        let (module, offset) = match real::module_of(ip) {
            Some((Some(name), bias)) => (
                Some(name.to_string_lossy().into_owned()),
                Some(Hex(ip.wrapping_sub(bias) as u64)),
            ),
            Some((None, bias)) => (
                Some(self.exe.clone()),
                Some(Hex(ip.wrapping_sub(bias) as u64)),
            ),
            None => (None, None),
        };
        let mut frames = Vec::new();
        // `resolve` looks up ip - 1: a return address belongs to the line after the call.
        backtrace::resolve(ip as *mut c_void, |sym| {
            frames.push(Frame {
                kind: None,
                ip: Hex(ip as u64),
                module: module.clone(),
                offset,
                function: sym.name().map(|n| function_name(&n)),
                file: sym.filename().map(|f| f.to_string_lossy().into_owned()),
                line: sym.lineno(),
            });
        });
        if frames.is_empty() {
            frames.push(Frame {
                kind: None,
                ip: Hex(ip as u64),
                module,
                offset,
                function: None,
                file: None,
                line: None,
            });
        }
        frames
    }
}

/// The symbol as the program's author wrote it: demangled only when it is mangled (`_Z…`, `_R…`).
/// A C function called `b` or `x` must stay `b`, not become the C++ type `bool` or `long long`
/// that a demangler reads in a bare letter.
fn function_name(name: &backtrace::SymbolName<'_>) -> String {
    let raw = name.as_bytes();
    let mangled = [&b"_Z"[..], b"__Z", b"_R"]
        .iter()
        .any(|p| raw.starts_with(p));
    if mangled {
        format!("{name:#}")
    } else {
        String::from_utf8_lossy(raw).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mangled_names_are_demangled() {
        let name = |raw: &[u8]| function_name(&backtrace::SymbolName::new(raw));
        for c_name in ["b", "a", "c", "x", "main", "cudaMalloc", "alloc_block"] {
            assert_eq!(name(c_name.as_bytes()), c_name);
        }
        assert_eq!(name(b"_Z3fooPf"), "foo(float*)");
        assert_eq!(
            name(b"_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
    }

    #[inline(never)]
    fn marker() -> u32 {
        std::hint::black_box(7)
    }

    #[test]
    fn resolves_function_file_line_and_module() {
        let mut s = Symbolizer::new("/proc/self/exe".into());
        // resolve() looks up ip - 1, so this lands on marker's first instruction.
        let ip = marker as *const () as usize + 1;
        let frames = s.frames(&[ip]);
        // Inlined code (black_box, in release builds) comes first; the function itself last.
        let f = frames.last().unwrap();
        assert!(
            f.function
                .as_deref()
                .unwrap_or("")
                .ends_with("tests::marker"),
            "{f:?}"
        );
        assert!(
            f.file.as_deref().unwrap_or("").ends_with("symbolize.rs"),
            "{f:?}"
        );
        assert!(f.line.is_some());
        assert!(f.module.is_some());
        assert_eq!(f.ip, Hex(ip as u64));
        assert_eq!(
            s.frames(&[ip]),
            frames,
            "a cached address gives the same frames"
        );
    }
}
