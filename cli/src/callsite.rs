//! [`Callsite`]: the identity of the code that made a call — its API and the frames a user sees
//! (function, file, line and module file name; an offset or address only for a frame without a
//! function) — and its fingerprint.
//!
//! Built once per prepared stack in the analysis and carried on every group, callsite total,
//! diff row and growth row. Nothing a display option changes (`--frames`, `--native`,
//! `--show-internal`, `--top`, colour) may enter it: grouping, merging across processes and
//! dumps, and SARIF fingerprints all hash this, never what a reporter shows.
//!
//! A callsite keeps no frames of its own: it holds the shared [`FrameView`]s the reports print
//! (often the very list its stack shows) and compares, orders and hashes their identity
//! ([`FrameKey`], read from each frame when asked), never their addresses or cut names.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use cudaleak_format::Name;

use crate::frame::{FrameView, Whole};
pub use crate::hash::fnv1a;
use crate::hash::Fnv;
use crate::names::{basename, cut, MAX_NAME_BYTES};

/// A name in a key: itself, or for one over [`MAX_NAME_BYTES`](crate::names::MAX_NAME_BYTES)
/// its first bytes, its length and a hash of the whole, so keys stay small and still tell long
/// names apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct KeyText<'a> {
    head: &'a str,
    /// For a cut name: its whole length in bytes and its [`fnv1a`].
    whole: Option<(usize, u64)>,
}

impl<'a> KeyText<'a> {
    /// The key of a name as a [`FrameView`] holds it: whole, or cut as `whole` says.
    fn of(shown: &'a str, whole: Option<Whole>) -> Self {
        match whole {
            None => KeyText {
                head: shown,
                whole: None,
            },
            Some(w) => KeyText {
                head: shown.get(..w.head).unwrap_or(shown),
                whole: Some((w.len, w.hash)),
            },
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
/// (addresses differ under ASLR, so they are used only without a symbol). Fields in the order
/// callsites sort by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct FrameKey<'a> {
    function: Option<KeyText<'a>>,
    file: Option<KeyText<'a>>,
    line: Option<u32>,
    /// The module's file name: the same library at another path is the same code.
    module: Option<KeyText<'a>>,
    place: Option<Place>,
}

impl<'a> FrameKey<'a> {
    fn of(f: &'a FrameView) -> Self {
        let long = f.long.as_deref();
        FrameKey {
            function: f
                .function
                .as_deref()
                .map(|s| KeyText::of(s, long.and_then(|l| l.function))),
            file: f
                .file
                .as_deref()
                .map(|s| KeyText::of(s, long.and_then(|l| l.file))),
            line: f.line,
            module: match long.and_then(|l| l.module.as_ref()) {
                Some((head, whole)) => Some(KeyText {
                    head,
                    whole: whole.map(|w| (w.len, w.hash)),
                }),
                None => f.module.as_deref().map(|m| KeyText {
                    head: basename(m),
                    whole: None,
                }),
            },
            place: match (&f.function, f.offset()) {
                (Some(_), _) => None,
                (None, Some(o)) => Some(Place::Offset(o)),
                (None, None) => Some(Place::Address(f.ip)),
            },
        }
    }
}

/// The one copy of an API's name in this process: a program calls a few APIs from many
/// callsites.
fn api_name(api: &str) -> Name {
    static NAMES: Mutex<Option<HashSet<Name>>> = Mutex::new(None);
    let mut names = NAMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(n) = names.get(api) {
        return n.clone();
    }
    let n = Name::from(api);
    names.insert(n.clone());
    n
}

/// An API's name as reports show it ([`cut`]), shared: one copy per API however many callsites,
/// rows and totals name it.
pub fn shown_api(api: &str) -> Name {
    if api.len() <= MAX_NAME_BYTES {
        api_name(api)
    } else {
        api_name(&cut(api))
    }
}

/// A callsite: an API and the frames a user sees, innermost first. Cheap to clone; the frames
/// are shared with the stack they came from and with every other callsite that has them.
/// Comparing, ordering and hashing look at the frames' identities ([`FrameKey`]).
#[derive(Debug, Clone)]
pub struct Callsite {
    api: Name,
    frames: Arc<[Arc<FrameView>]>,
}

impl Callsite {
    /// The callsite of `api` at `frames` (the frames a user sees, as a user sees them).
    pub fn new(api: &str, frames: Arc<[Arc<FrameView>]>) -> Self {
        Callsite {
            api: api_name(api),
            frames,
        }
    }

    /// The API called, whole (reports show it cut: [`shown_api`]).
    pub fn api(&self) -> &str {
        &self.api
    }

    fn keys(&self) -> impl Iterator<Item = FrameKey<'_>> {
        self.frames.iter().map(|f| FrameKey::of(f))
    }

    /// The same frames called through another API.
    pub fn with_api(&self, api: &str) -> Self {
        if *self.api == *api {
            return self.clone();
        }
        Callsite {
            api: api_name(api),
            frames: Arc::clone(&self.frames),
        }
    }

    /// The same frames, whatever the API (a double free's allocation stack).
    pub fn same_frames(&self, other: &Callsite) -> bool {
        Arc::ptr_eq(&self.frames, &other.frames)
            || (self.frames.len() == other.frames.len()
                && self
                    .frames
                    .iter()
                    .zip(other.frames.iter())
                    .all(|(a, b)| Arc::ptr_eq(a, b) || FrameKey::of(a) == FrameKey::of(b)))
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
        for f in self.keys() {
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

impl PartialEq for Callsite {
    fn eq(&self, other: &Self) -> bool {
        self.api == other.api && self.same_frames(other)
    }
}

impl Eq for Callsite {}

impl Hash for Callsite {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.api.hash(state);
        state.write_usize(self.frames.len());
        for k in self.keys() {
            k.hash(state);
        }
    }
}

impl PartialOrd for Callsite {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Callsite {
    /// The API, then the frames' identities, innermost first (a shorter list first where one
    /// is the start of the other).
    fn cmp(&self, other: &Self) -> Ordering {
        self.api
            .cmp(&other.api)
            .then_with(|| self.keys().cmp(other.keys()))
    }
}

/// Rows found by their callsite: a table of the rows' indices, hashed from each row's own
/// callsite, so no key is held twice (a `diff`'s rows, a dump's callsite list, a growth
/// series' rows: one per callsite of a large dump).
#[derive(Default)]
pub struct ByCallsite {
    index: hashbrown::HashTable<u32>,
    hasher: std::hash::RandomState,
}

impl ByCallsite {
    /// The index in `rows` of the row of `key` (its callsite as `callsite` reads it), the row
    /// `make(key)` pushed first when there is none.
    pub fn slot<T>(
        &mut self,
        rows: &mut Vec<T>,
        key: Callsite,
        callsite: impl Fn(&T) -> &Callsite,
        make: impl FnOnce(Callsite) -> T,
    ) -> u32 {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(&key);
        if let Some(&i) = self
            .index
            .find(hash, |&i| *callsite(&rows[i as usize]) == key)
        {
            return i;
        }
        let i = rows.len() as u32;
        rows.push(make(key));
        let hasher = &self.hasher;
        self.index
            .insert_unique(hash, i, |&j| hasher.hash_one(callsite(&rows[j as usize])));
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::MAX_NAME_BYTES;

    fn frame(function: Option<&str>, line: u32, module: &str) -> Arc<FrameView> {
        Arc::new(
            FrameView {
                function: function.map(Name::from),
                file: function.map(|_| Name::from("app.cu")),
                line: function.map(|_| line),
                module: Some(module.into()),
                ip: 0x4000,
                ..FrameView::default()
            }
            .with_offset(Some(0x40)),
        )
    }

    fn callsite(api: &str, frames: &[Arc<FrameView>]) -> Callsite {
        Callsite::new(api, frames.iter().cloned().collect())
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
        let c = callsite("cudaMalloc", &frames);
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
        let d = callsite("cudaMalloc", &moved);
        assert_eq!(c, d);
        assert_eq!(c.cmp(&d), Ordering::Equal);
        assert_eq!(c.fingerprint("r"), d.fingerprint("r"));
        assert_ne!(c.fingerprint("r"), c.fingerprint("s"));
        assert_ne!(c, c.with_api("cudaMallocAsync"));
        assert!(c.same_frames(&c.with_api("cudaMallocAsync")));
        assert_ne!(c, callsite("cudaMalloc", &frames[..1]));
        assert!(
            callsite("cudaMalloc", &frames[..1]) < c,
            "a prefix sorts first"
        );
    }

    #[test]
    fn a_cut_name_is_told_apart_by_its_whole_length_and_hash() {
        let cut = |name: &str| {
            let head = &name[..MAX_NAME_BYTES];
            Arc::new(FrameView {
                function: Some(format!("{head}…[{} more bytes]", name.len() - head.len()).into()),
                long: crate::frame::LongKey::of(Some(name), Some("app.cu"), Some("/a/app")),
                ..(*frame(Some("x"), 1, "/a/app")).clone()
            })
        };
        let a = "f".repeat(MAX_NAME_BYTES + 10);
        let b = format!("{}g", "f".repeat(MAX_NAME_BYTES + 9));
        let (ca, cb) = (
            callsite("cudaMalloc", &[cut(&a)]),
            callsite("cudaMalloc", &[cut(&b)]),
        );
        assert_ne!(ca, cb);
        assert_eq!(ca, callsite("cudaMalloc", &[cut(&a)]));
        let whole = |s: &str| fnv1a(s.as_bytes());
        let text = format!(
            "r\u{1d}cudaMalloc\u{1d}{}\u{1c}{}:{:016x}\u{1f}app.cu\u{1f}1\u{1f}app\u{1e}",
            &a[..MAX_NAME_BYTES],
            a.len(),
            whole(&a)
        );
        assert_eq!(
            ca.fingerprint("r"),
            format!("{:016x}", fnv1a(text.as_bytes()))
        );
    }
}
