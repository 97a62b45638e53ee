//! The module map at dump time: which executable or shared library holds a return address, its
//! load bias and its GNU build-id — read from `/proc/self/maps` and, through `/proc/self/mem`,
//! from the ELF headers and notes of the image as mapped.
//!
//! Owns the "record in the target" half of symbolisation (names are the CLI's). It must never
//! take the loader lock (no `dl_iterate_phdr`, `dladdr`, `dlsym`) nor read memory directly: a
//! dump may be written from a signal handler's thread while another thread holds the lock, and a
//! mapping may go away while it is read — a read of `/proc/self/mem` then fails, it cannot fault.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use cudaleak_format::{Hex, Module};

/// An executable mapping of a file.
struct Mapping {
    start: usize,
    end: usize,
    image: usize,
}

/// One file mapped by the process, with what is learnt of it when a frame first lands in it.
struct Image {
    path: String,
    /// Start address of its mapping at file offset 0 (where its ELF header is), if mapped.
    header_at: Option<usize>,
    /// `start - offset` of its first mapping: the bias when the ELF header cannot be read.
    fallback_base: usize,
    /// Filled on first use: load bias and build-id.
    known: Option<(usize, Option<String>)>,
    /// Its index in the dump's module table, once a frame refers to it.
    index: Option<usize>,
}

/// The process's file mappings, read once per dump.
pub struct Modules {
    mappings: Vec<Mapping>,
    images: Vec<Image>,
    mem: Option<File>,
    used: Vec<usize>,
}

impl Modules {
    /// Reads `/proc/self/maps`; an unreadable one gives an empty map (frames keep their `ip`).
    pub fn read() -> Modules {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let mut m = Modules::parse(&text);
        m.mem = File::open("/proc/self/mem").ok();
        m
    }

    fn parse(text: &str) -> Modules {
        let mut images: Vec<Image> = Vec::new();
        let mut by_path: HashMap<&str, usize> = HashMap::new();
        let mut mappings = Vec::new();
        for line in text.lines() {
            let Some(m) = parse_line(line) else { continue };
            let image = *by_path.entry(m.path).or_insert_with(|| {
                images.push(Image {
                    path: m
                        .path
                        .strip_suffix(" (deleted)")
                        .unwrap_or(m.path)
                        .to_string(),
                    header_at: None,
                    fallback_base: m.start.wrapping_sub(m.offset),
                    known: None,
                    index: None,
                });
                images.len() - 1
            });
            if m.offset == 0 && images[image].header_at.is_none() {
                images[image].header_at = Some(m.start);
            }
            if m.exec {
                mappings.push(Mapping {
                    start: m.start,
                    end: m.end,
                    image,
                });
            }
        }
        mappings.sort_by_key(|m| m.start);
        Modules {
            mappings,
            images,
            mem: None,
            used: Vec::new(),
        }
    }

    /// The module table index and offset (ip minus load bias) of a return address, or `None`
    /// outside every file mapping (JIT code, the vDSO).
    pub fn locate(&mut self, ip: usize) -> Option<(usize, u64)> {
        let i = self
            .mappings
            .partition_point(|m| m.start <= ip)
            .checked_sub(1)?;
        let m = &self.mappings[i];
        if ip >= m.end {
            return None;
        }
        let image = m.image;
        if self.images[image].known.is_none() {
            let img = &self.images[image];
            let known = match (img.header_at, &self.mem) {
                (Some(at), Some(mem)) => elf_facts(mem, at),
                _ => None,
            };
            let img = &mut self.images[image];
            img.known = Some(known.unwrap_or((img.fallback_base, None)));
        }
        let img = &mut self.images[image];
        let base = img.known.as_ref().map_or(0, |k| k.0);
        let index = *img.index.get_or_insert_with(|| {
            self.used.push(image);
            self.used.len() - 1
        });
        Some((index, ip.wrapping_sub(base) as u64))
    }

    /// The path of module table entry `index`.
    pub fn path(&self, index: usize) -> &str {
        &self.images[self.used[index]].path
    }

    /// The module table: every module a located address lies in, in the order first met.
    pub fn table(&self) -> Vec<Module> {
        self.used
            .iter()
            .map(|&i| {
                let img = &self.images[i];
                let (base, build_id) = img.known.clone().unwrap_or((img.fallback_base, None));
                Module {
                    path: img.path.clone(),
                    base: Hex(base as u64),
                    build_id,
                }
            })
            .collect()
    }
}

struct Line<'a> {
    start: usize,
    end: usize,
    offset: usize,
    exec: bool,
    path: &'a str,
}

/// `start-end perms offset dev inode path`; only mappings of a file (a path starting with `/`).
fn parse_line(line: &str) -> Option<Line<'_>> {
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let t = rest.trim_start();
        let end = t.find(' ').unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?;
    let offset = field()?;
    let _dev = field()?;
    let _inode = field()?;
    let path = rest.trim_start();
    if !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some(Line {
        start: usize::from_str_radix(start, 16).ok()?,
        end: usize::from_str_radix(end, 16).ok()?,
        offset: usize::from_str_radix(offset, 16).ok()?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        path,
    })
}

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const NT_GNU_BUILD_ID: u32 = 3;
const PAGE: usize = 4096;
/// More notes than any real image has: a bound on what is read.
const MAX_NOTES_BYTES: usize = 64 << 10;

fn read_at(mem: &File, addr: usize, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, addr as u64).ok()?;
    Some(buf)
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<usize> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize)
}

/// The load bias and build-id of the 64-bit little-endian ELF image whose header is mapped at
/// `header`, read from memory.
fn elf_facts(mem: &File, header: usize) -> Option<(usize, Option<String>)> {
    let ehdr = read_at(mem, header, 64)?;
    if ehdr[..4] != *b"\x7fELF" || ehdr[4] != 2 || ehdr[5] != 1 {
        return None;
    }
    let phoff = u64_at(&ehdr, 0x20)?;
    let phentsize = usize::from(u16_at(&ehdr, 0x36)?);
    let phnum = usize::from(u16_at(&ehdr, 0x38)?);
    if phentsize < 56 || phnum == 0 || phnum > 256 {
        return None;
    }
    let phdrs = read_at(mem, header.checked_add(phoff)?, phentsize * phnum)?;
    let phdr = |i: usize| -> Option<(u32, usize, usize, usize)> {
        let p = &phdrs[i * phentsize..];
        // p_type, p_offset, p_vaddr, p_filesz
        Some((u32_at(p, 0)?, u64_at(p, 8)?, u64_at(p, 16)?, u64_at(p, 32)?))
    };
    // The segment mapped from file offset 0 is the one whose first page `header` is.
    let (_, _, vaddr, _) = (0..phnum)
        .filter_map(phdr)
        .find(|&(t, off, _, _)| t == PT_LOAD && off < PAGE)?;
    let bias = header.wrapping_sub(vaddr & !(PAGE - 1));
    let build_id = (0..phnum)
        .filter_map(phdr)
        .filter(|&(t, ..)| t == PT_NOTE)
        .find_map(|(_, _, vaddr, size)| {
            let notes = read_at(mem, bias.wrapping_add(vaddr), size.min(MAX_NOTES_BYTES))?;
            build_id_in(&notes)
        });
    Some((bias, build_id))
}

/// The GNU build-id in a run of ELF notes, as lower-case hex.
fn build_id_in(notes: &[u8]) -> Option<String> {
    let align4 = |n: usize| (n + 3) & !3;
    let mut at = 0;
    while at + 12 <= notes.len() {
        let namesz = u32_at(notes, at)? as usize;
        let descsz = u32_at(notes, at + 4)? as usize;
        let kind = u32_at(notes, at + 8)?;
        let name = at + 12;
        let desc = name.checked_add(align4(namesz))?;
        let next = desc.checked_add(align4(descsz))?;
        if kind == NT_GNU_BUILD_ID && notes.get(name..name + namesz)? == b"GNU\0" {
            let id = notes.get(desc..desc + descsz)?;
            return Some(id.iter().map(|b| format!("{b:02x}")).collect());
        }
        at = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_file_mappings_only() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123  /usr/bin/app
55d0c0a01000-55d0c0a05000 r-xp 00001000 08:01 123  /usr/bin/app
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f1000000000-7f1000028000 r--p 00000000 08:01 77   /lib/x86_64-linux-gnu/libc.so.6
7f1000028000-7f10001bd000 r-xp 00028000 08:01 77   /lib/x86_64-linux-gnu/libc.so.6
7f2000000000-7f2000001000 r-xp 00000000 08:01 99   /tmp/a b (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0    [vdso]
";
        let mut m = Modules::parse(text);
        assert_eq!(m.mappings.len(), 3);
        // No /proc/self/mem here: the bias is start minus file offset.
        assert_eq!(m.locate(0x55d0c0a01234), Some((0, 0x1234)));
        assert_eq!(m.locate(0x7f1000028010), Some((1, 0x28010)));
        assert_eq!(m.locate(0x7f2000000010), Some((2, 0x10)));
        assert_eq!(m.locate(0x55d0c0a00010), None, "not executable");
        assert_eq!(m.locate(0x7ffd00000010), None, "the vDSO is no file");
        assert_eq!(m.locate(0x10), None);
        assert_eq!(m.path(2), "/tmp/a b");
        let t = m.table();
        assert_eq!(t[0].path, "/usr/bin/app");
        assert_eq!(t[0].base, Hex(0x55d0c0a00000));
        assert_eq!(t[1].path, "/lib/x86_64-linux-gnu/libc.so.6");
    }

    #[inline(never)]
    fn marker() -> u32 {
        std::hint::black_box(7)
    }

    #[test]
    fn this_test_binary_is_located_with_its_bias_and_build_id() {
        let mut m = Modules::read();
        let ip = marker as *const () as usize;
        let (index, offset) = m.locate(ip).expect("the test binary is mapped");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(m.path(index), exe.to_str().unwrap());
        let t = m.table();
        assert_eq!(t.len(), 1);
        assert_eq!(ip as u64 - t[0].base.0, offset);
        // Rust links with --build-id on Linux: the note the file has is the one read from memory.
        let id = t[0].build_id.clone().expect("a build-id");
        assert!(
            id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        let file = std::fs::read(&exe).unwrap();
        let raw: Vec<u8> = (0..id.len() / 2)
            .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert!(file.windows(raw.len()).any(|w| w == raw));
    }

    #[test]
    fn notes_other_than_the_gnu_build_id_are_skipped() {
        let mut notes = Vec::new();
        // An ABI tag note (type 1), then the build-id (type 3).
        notes.extend_from_slice(&4u32.to_le_bytes());
        notes.extend_from_slice(&16u32.to_le_bytes());
        notes.extend_from_slice(&1u32.to_le_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0; 16]);
        notes.extend_from_slice(&4u32.to_le_bytes());
        notes.extend_from_slice(&3u32.to_le_bytes());
        notes.extend_from_slice(&3u32.to_le_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0xab, 0x01, 0xff, 0]);
        assert_eq!(build_id_in(&notes).as_deref(), Some("ab01ff"));
        assert_eq!(build_id_in(&notes[..20]), None);
    }
}
