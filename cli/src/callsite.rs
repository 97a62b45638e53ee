//! [`Callsite`]: the identity of the code that made a call — its API and the frames a user sees
//! (function, file, line and module file name; an offset or address only for a frame without a
//! function) — and its fingerprint.
//!
//! Built once per prepared stack in the analysis and carried on every group, callsite total,
//! diff row and growth row. Nothing a display option changes (`--frames`, `--native`,
//! `--show-internal`, `--top`, colour) may enter it: grouping, merging across processes and
//! dumps, and SARIF fingerprints all hash this, never what a reporter shows.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use cudaleak_format::Name;

use crate::load::schema as format;
use crate::names::{basename, MAX_NAME_BYTES};

/// A name in a key: itself, or for one over [`MAX_NAME_BYTES`] its first bytes, its length and
/// a hash of the whole, so keys stay small and still tell long names apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct KeyText {
    head: Name,
    /// For a cut name: its whole length in bytes and its [`fnv1a`].
    whole: Option<(usize, u64)>,
}

impl KeyText {
    fn new(s: &Name) -> Self {
        if s.len() <= MAX_NAME_BYTES {
            return KeyText {
                head: s.clone(),
                whole: None,
            };
        }
        let mut end = MAX_NAME_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        KeyText {
            head: Name::from(&s[..end]),
            whole: Some((s.len(), fnv1a(s.as_bytes()))),
        }
    }

    fn feed(&self, h: &mut Fnv) {
        h.write(self.head.as_bytes());
        if let Some((len, hash)) = self.whole {
            h.write(format!("\u{1c}{len}:{hash:016x}").as_bytes());
        }
    }
}

/// Where a frame without a function is: its offset in its module, else its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Place {
    Offset(u64),
    Address(u64),
}

/// One frame's identity: the same code in another process or on another machine compares equal
/// (addresses differ under ASLR, so they are used only without a symbol).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct FrameKey {
    function: Option<KeyText>,
    file: Option<KeyText>,
    line: Option<u32>,
    /// The module's file name: the same library at another path is the same code.
    module: Option<KeyText>,
    place: Option<Place>,
}

impl FrameKey {
    fn new(f: &format::Frame) -> Self {
        FrameKey {
            function: f.function.as_ref().map(KeyText::new),
            file: f.file.as_ref().map(KeyText::new),
            line: f.line,
            module: f
                .module
                .as_deref()
                .map(|m| KeyText::new(&basename(m).into())),
            place: match (&f.function, f.offset) {
                (Some(_), _) => None,
                (None, Some(o)) => Some(Place::Offset(o.0)),
                (None, None) => Some(Place::Address(f.ip.0)),
            },
        }
    }
}

/// A callsite: an API and the frames a user sees, innermost first. Cheap to clone; two
/// callsites of one stack share their frames, and every callsite shares each frame's identity
/// with the others that have that frame ([`intern`]): a program has far fewer distinct frames
/// than stacks, and a dump of 100 000 distinct stacks would otherwise hold 100 000 copies of
/// `main`'s. Comparing, ordering and hashing look at the frames' contents, as before.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Callsite {
    api: Name,
    frames: Arc<[Arc<FrameKey>]>,
}

/// The one copy of `key` in this process (every dump read shares it).
fn intern(key: FrameKey) -> Arc<FrameKey> {
    static KEYS: Mutex<Option<HashSet<Arc<FrameKey>>>> = Mutex::new(None);
    let mut keys = KEYS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let keys = keys.get_or_insert_with(HashSet::new);
    if let Some(k) = keys.get(&key) {
        return Arc::clone(k);
    }
    let k = Arc::new(key);
    keys.insert(Arc::clone(&k));
    k
}

impl Callsite {
    /// The callsite of `api` at `frames` (indices into `all`: the frames a user sees).
    pub fn new(api: &str, all: &[format::Frame], frames: &[usize]) -> Self {
        Callsite {
            api: Name::from(api),
            frames: frames
                .iter()
                .map(|&i| intern(FrameKey::new(&all[i])))
                .collect(),
        }
    }

    /// The same frames called through another API.
    pub fn with_api(&self, api: &str) -> Self {
        if *self.api == *api {
            return self.clone();
        }
        Callsite {
            api: Name::from(api),
            frames: Arc::clone(&self.frames),
        }
    }

    /// The same frames, whatever the API (a double free's allocation stack).
    pub fn same_frames(&self, other: &Callsite) -> bool {
        self.frames == other.frames
    }

    /// A stable fingerprint of this callsite for the result kind `rule` (a SARIF rule id):
    /// 64-bit FNV-1a over the rule, the API and each frame's identity, as 16 hex digits. Equal
    /// across runs, machines and display options.
    pub fn fingerprint(&self, rule: &str) -> String {
        let mut h = Fnv::new();
        h.write(rule.as_bytes());
        h.write(b"\x1d");
        h.write(self.api.as_bytes());
        h.write(b"\x1d");
        for f in self.frames.iter() {
            let text = |h: &mut Fnv, t: &Option<KeyText>| {
                if let Some(t) = t {
                    t.feed(h);
                }
            };
            text(&mut h, &f.function);
            h.write(b"\x1f");
            text(&mut h, &f.file);
            h.write(b"\x1f");
            if let Some(l) = f.line {
                h.write(l.to_string().as_bytes());
            }
            h.write(b"\x1f");
            text(&mut h, &f.module);
            match f.place {
                Some(Place::Offset(o)) => h.write(format!("\x1f+{o:x}").as_bytes()),
                Some(Place::Address(a)) => h.write(format!("\x1f@{a:x}").as_bytes()),
                None => {}
            }
            h.write(b"\x1e");
        }
        format!("{:016x}", h.finish())
    }
}

/// 64-bit FNV-1a: small, stable across Rust versions and platforms (unlike `DefaultHasher`).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// [`Fnv`] of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv::new();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::{Frame, Hex};

    fn frame(function: Option<&str>, line: u32, module: &str) -> Frame {
        Frame {
            kind: None,
            ip: Hex(0x4000),
            module: Some(module.into()),
            offset: Some(Hex(0x40)),
            function: function.map(Name::from),
            file: function.map(|_| Name::from("app.cu")),
            line: function.map(|_| line),
        }
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn fingerprints_hash_the_identity_the_key_holds() {
        let frames = [
            frame(Some("leak"), 12, "/home/a/app"),
            frame(None, 0, "/home/a/libx.so"),
        ];
        let c = Callsite::new("cudaMalloc", &frames, &[0, 1]);
        // The encoding of the callsite keys before this type (so leak fingerprints already
        // uploaded keep matching): API, then per frame function, file, line, module file name
        // and, without a function, `+offset`.
        let text = "cudaleak/leak\u{1d}cudaMalloc\u{1d}leak\u{1f}app.cu\u{1f}12\u{1f}app\u{1e}\
                    \u{1f}\u{1f}\u{1f}libx.so\u{1f}+40\u{1e}";
        assert_eq!(
            c.fingerprint("cudaleak/leak"),
            format!("{:016x}", fnv1a(text.as_bytes()))
        );
        // The module's directory is not part of it; the rule and the API are.
        let moved = [
            frame(Some("leak"), 12, "/opt/b/app"),
            frame(None, 0, "/usr/lib/libx.so"),
        ];
        let d = Callsite::new("cudaMalloc", &moved, &[0, 1]);
        assert_eq!(c, d);
        assert_eq!(c.fingerprint("r"), d.fingerprint("r"));
        assert_ne!(c.fingerprint("r"), c.fingerprint("s"));
        assert_ne!(c, c.with_api("cudaMallocAsync"));
        assert!(c.same_frames(&c.with_api("cudaMallocAsync")));
        assert_ne!(c, Callsite::new("cudaMalloc", &frames, &[0]));
    }
}
