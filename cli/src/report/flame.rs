//! Findings as weighted stacks, root first: what the folded format prints one line each and the
//! HTML report draws as a flame graph (icicle). One place decides how a frame is labelled and
//! which bytes a stack carries, so the two agree.
//!
//! Pure: no I/O, no markup. Never changes what `analyze` or `growth` decided; bytes are memory
//! held (`LeakGroup::held`), the figure every total adds.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::{clean, folded_text, frame_text_under, plural};
use crate::analyze::{DiffFindings, Findings, LeakGroup, StackView};
use crate::growth::{GrowthFindings, GrowthRow};

/// What a stack's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Leaked: live at exit, held by no cache.
    Leak,
    /// Held by a cache or library handle.
    Cached,
    /// Gained over a series (`--growth`) or between two dumps (`diff`): a growth suspect's.
    Suspect,
    /// Gained, but not like a leak (or by a callsite `diff` does not judge).
    Grew,
}

/// One frame of a weighted stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// `function at file:line (module)`, as text reports write it (sources under the
    /// current directory relative to it); program text cleaned of control characters.
    pub label: String,
    /// A Python function's frame.
    pub python: bool,
}

/// A stack and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighted {
    /// Root (outermost) first; the last frame is the API the memory came from (`cudaMalloc`).
    pub frames: Vec<Frame>,
    pub bytes: u64,
    pub blocks: u64,
    pub class: Class,
}

fn frame(label: String, python: bool) -> Frame {
    Frame { label, python }
}

/// A stack view root first, with its folded runs and the frames `--frames` cut, ending in the
/// API: `[… 3 more frames] ; main at app.cu:40 ; process(float*) at app.cu:18 ; cudaMalloc`.
pub fn root_first(s: &StackView, api: &str, root: Option<&str>) -> Vec<Frame> {
    let mut inner_first: Vec<Frame> = Vec::with_capacity(s.frames.len() + s.folded.len() + 2);
    inner_first.push(frame(clean(api).into_owned(), false));
    let runs = |at: usize, out: &mut Vec<Frame>| {
        for r in s.folded.iter().filter(|r| r.at == at) {
            out.push(frame(format!("[{}]", folded_text(r)), false));
        }
    };
    for (i, f) in s.frames.iter().enumerate() {
        runs(i, &mut inner_first);
        inner_first.push(frame(frame_text_under(f, root), f.python));
    }
    runs(s.frames.len(), &mut inner_first);
    if s.omitted > 0 {
        let more = plural(s.omitted as u64, "more frame", "more frames");
        inner_first.push(frame(format!("[… {more}]"), false));
    }
    inner_first.reverse();
    inner_first
}

fn of_group(g: &LeakGroup, class: Class, root: Option<&str>) -> Weighted {
    Weighted {
        frames: root_first(&g.stack, &g.api, root),
        bytes: g.held,
        blocks: g.allocations,
        class,
    }
}

/// Live memory at exit by stack: every leak group shown (after filters and `--top`), and with
/// `cached` the groups held by caches. Made one stack at a time, as the caller takes them.
pub fn live_at_exit<'a>(
    f: &'a Findings,
    cached: bool,
    root: Option<&'a str>,
) -> impl Iterator<Item = Weighted> + 'a {
    f.processes.iter().flat_map(move |p| {
        let held = if cached { &p.cached[..] } else { &[] };
        p.leaks
            .iter()
            .map(move |g| of_group(g, Class::Leak, root))
            .chain(held.iter().map(move |g| of_group(g, Class::Cached, root)))
    })
}

fn growth_class(r: &GrowthRow) -> Class {
    if r.is_suspect() {
        Class::Suspect
    } else {
        Class::Grew
    }
}

/// The rows of every series, a growth seen twice (a framework's count and its pool's driver
/// calls) once.
fn listed_rows(g: &GrowthFindings) -> impl Iterator<Item = &GrowthRow> {
    g.series
        .iter()
        .flat_map(|s| s.rows.iter().filter(|r| !r.counted_elsewhere()))
}

/// Bytes gained over each series by stack (first dump → the callsite's peak), every listed
/// callsite of every process; a growth seen twice once.
pub fn growth<'a>(
    g: &'a GrowthFindings,
    root: Option<&'a str>,
) -> impl Iterator<Item = Weighted> + 'a {
    listed_rows(g).map(move |r| Weighted {
        frames: root_first(&r.stack, &r.api, root),
        bytes: u64::try_from(r.growth_bytes()).unwrap_or(0),
        blocks: u64::try_from(r.growth_blocks()).unwrap_or(0),
        class: growth_class(r),
    })
}

/// Each listed callsite's live bytes at its own peak in the series: the most it held at once,
/// as far as the dumps tell (a growth seen twice, once).
pub fn peak<'a>(
    g: &'a GrowthFindings,
    root: Option<&'a str>,
) -> impl Iterator<Item = Weighted> + 'a {
    listed_rows(g).map(move |r| {
        let at = r.at_peak();
        Weighted {
            frames: root_first(&r.stack, &r.api, root),
            bytes: at.bytes,
            blocks: at.allocations,
            class: growth_class(r),
        }
    })
}

/// Bytes gained between the two dumps of a diff, by stack (callsites that grew).
pub fn diff<'a>(d: &'a DiffFindings, root: Option<&'a str>) -> impl Iterator<Item = Weighted> + 'a {
    d.rows
        .iter()
        .filter(|r| r.delta_bytes() > 0)
        .map(move |r| Weighted {
            frames: root_first(&r.stack, &r.api, root),
            bytes: u64::try_from(r.delta_bytes()).unwrap_or(u64::MAX),
            blocks: u64::try_from(r.delta_blocks()).unwrap_or(0),
            class: Class::Grew,
        })
}

/// Where one node's frame lies in [`Tree`]'s text: start and length in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    len: u32,
}

/// A node of the merged tree: one frame reached by one path from the root.
#[derive(Debug, Default)]
struct Flat {
    label: Span,
    python: bool,
    parent: u32,
    bytes: u64,
    blocks: u64,
    /// Bytes per class below this node, in [`Class`] order.
    by_class: [u64; 4],
    /// The children that may be wide enough to draw, in the order first seen.
    kids: Vec<u32>,
    /// How many children are too narrow to draw: counted, not kept.
    narrow: u32,
}

impl Flat {
    fn add(&mut self, w: &Weighted) {
        self.bytes = self.bytes.saturating_add(w.bytes);
        self.blocks = self.blocks.saturating_add(w.blocks);
        let c = &mut self.by_class[w.class as usize];
        *c = c.saturating_add(w.bytes);
    }
}

/// A child too narrow to draw: its parent and its frame, known only to be counted once.
struct Narrow {
    parent: u32,
    label: Span,
    python: bool,
}

/// Stacks that share a path from the root merged into one tree (stacks of no bytes left out),
/// holding only what a drawing can show: the nodes that may be wide enough to draw and, for
/// each of them, its children. A child too narrow to draw is counted, its own children not
/// kept. Node 0 is the root (no frame).
pub struct Tree {
    nodes: Vec<Flat>,
    /// Every kept frame's label, one after another.
    text: String,
}

/// Per row of [`tree`]'s sketch of path weights.
const SKETCH_BITS: u32 = 17;

/// The counters a path's hash adds to, one per row of the sketch.
fn sketch_slots(h: u64) -> [usize; 2] {
    let mask = (1u64 << SKETCH_BITS) - 1;
    let row = 1usize << SKETCH_BITS;
    [(h & mask) as usize, row + ((h >> 32) & mask) as usize]
}

/// Merges the stacks `stacks()` makes (called twice: the same stacks each time, taken one at a
/// time). `narrow(bytes, total)` says whether a node of `bytes` out of `total` is too narrow to
/// draw. The first pass adds each stack's bytes to a small sketch of path weights (a path's
/// counters never hold less than its bytes, so a path the sketch calls narrow is narrow); the
/// second keeps the nodes under paths the sketch calls wide, exactly, and counts the narrow
/// children of each (a frame's label kept once in the tree's text).
pub fn tree<I: Iterator<Item = Weighted>>(
    stacks: impl Fn() -> I,
    narrow: impl Fn(u64, u64) -> bool,
) -> Tree {
    let hasher = RandomState::new();
    let step = |h: u64, f: &Frame| hasher.hash_one((h, f.label.as_str(), f.python));
    let mut sketch = vec![0u64; 2 << SKETCH_BITS];
    let mut total = 0u64;
    for w in stacks().filter(|w| w.bytes > 0) {
        total = total.saturating_add(w.bytes);
        let mut h = 0u64;
        for f in &w.frames {
            h = step(h, f);
            for s in sketch_slots(h) {
                sketch[s] = sketch[s].saturating_add(w.bytes);
            }
        }
    }
    let wide = |h: u64| {
        let est = sketch_slots(h)
            .iter()
            .map(|&s| sketch[s])
            .min()
            .unwrap_or(0);
        !narrow(est, total)
    };
    let mut t = Tree {
        nodes: vec![Flat::default()],
        text: String::new(),
    };
    let mut index: HashTable<u32> = HashTable::new();
    let mut narrows: Vec<Narrow> = Vec::new();
    let mut narrow_index: HashTable<u32> = HashTable::new();
    for w in stacks().filter(|w| w.bytes > 0) {
        t.nodes[0].add(&w);
        let mut at = 0u32;
        let mut h = 0u64;
        for f in &w.frames {
            h = step(h, f);
            let key = hasher.hash_one((at, f.label.as_str(), f.python));
            if !wide(h) {
                let found = narrow_index.find(key, |&i| {
                    let n = &narrows[i as usize];
                    n.parent == at && n.python == f.python && t.label(n.label) == f.label
                });
                if found.is_none() {
                    let i = u32::try_from(narrows.len()).unwrap_or(u32::MAX);
                    narrows.push(Narrow {
                        parent: at,
                        label: t.keep(&f.label),
                        python: f.python,
                    });
                    narrow_index.insert_unique(key, i, |&i| {
                        let n = &narrows[i as usize];
                        hasher.hash_one((n.parent, t.label(n.label), n.python))
                    });
                    t.nodes[at as usize].narrow += 1;
                }
                break;
            }
            let found = index.find(key, |&i| {
                let n = &t.nodes[i as usize];
                n.parent == at && n.python == f.python && t.label(n.label) == f.label
            });
            let next = match found {
                Some(&i) => i,
                None => {
                    let n = u32::try_from(t.nodes.len()).unwrap_or(u32::MAX);
                    let label = t.keep(&f.label);
                    t.nodes.push(Flat {
                        label,
                        python: f.python,
                        parent: at,
                        ..Flat::default()
                    });
                    t.nodes[at as usize].kids.push(n);
                    index.insert_unique(key, n, |&i| {
                        let n = &t.nodes[i as usize];
                        hasher.hash_one((n.parent, t.label(n.label), n.python))
                    });
                    n
                }
            };
            t.nodes[next as usize].add(&w);
            at = next;
        }
    }
    t
}

impl Tree {
    fn keep(&mut self, label: &str) -> Span {
        let start = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        self.text.push_str(label);
        Span {
            start,
            len: u32::try_from(label.len()).unwrap_or(u32::MAX),
        }
    }

    fn label(&self, s: Span) -> &str {
        &self.text[s.start as usize..(s.start + s.len) as usize]
    }

    /// The root's index.
    pub const ROOT: u32 = 0;

    /// Node `i`'s frame label and whether it is a Python function's; `None` for the root.
    pub fn frame(&self, i: u32) -> Option<(&str, bool)> {
        let n = &self.nodes[i as usize];
        (i != Self::ROOT).then(|| (self.label(n.label), n.python))
    }

    pub fn bytes(&self, i: u32) -> u64 {
        self.nodes[i as usize].bytes
    }

    pub fn blocks(&self, i: u32) -> u64 {
        self.nodes[i as usize].blocks
    }

    /// The class holding most of node `i`'s bytes.
    pub fn class(&self, i: u32) -> Class {
        const CLASSES: [Class; 4] = [Class::Leak, Class::Cached, Class::Suspect, Class::Grew];
        CLASSES
            .iter()
            .zip(self.nodes[i as usize].by_class)
            .filter(|(_, b)| *b > 0)
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map_or(Class::Leak, |(c, _)| *c)
    }

    /// Node `i`'s kept children, largest first, then by frame: the order is the same for the
    /// same input. The children too narrow to draw come after all of them, and are only
    /// counted ([`Tree::narrow_children`]).
    pub fn children(&self, i: u32) -> Vec<u32> {
        let mut kids = self.nodes[i as usize].kids.clone();
        kids.sort_by(|&x, &y| {
            self.bytes(y)
                .cmp(&self.bytes(x))
                .then_with(|| self.frame(x).cmp(&self.frame(y)))
        });
        kids
    }

    /// How many of node `i`'s children are too narrow to draw (not kept).
    pub fn narrow_children(&self, i: u32) -> usize {
        self.nodes[i as usize].narrow as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::FrameView;

    fn fv(name: &str) -> FrameView {
        FrameView {
            function: Some(name.into()),
            file: Some("app.cu".into()),
            line: Some(3),
            module: Some("/bin/app".into()),
            ip: 1,
            ..FrameView::default()
        }
    }

    fn stack(names: &[&str], omitted: usize) -> StackView {
        StackView::new(crate::analyze::StackParts {
            frames: names
                .iter()
                .map(|n| std::sync::Arc::new(fv(n)))
                .collect::<Vec<_>>()
                .into(),
            hidden: 0,
            omitted,
            folded: Vec::new(),
            entry: 0,
        })
    }

    #[test]
    fn stacks_are_root_first_and_end_in_the_api() {
        let f = root_first(&stack(&["inner", "main"], 2), "cudaMalloc", None);
        let labels: Vec<&str> = f.iter().map(|f| f.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "[… 2 more frames]",
                "main at app.cu:3 (app)",
                "inner at app.cu:3 (app)",
                "cudaMalloc"
            ]
        );
    }

    #[test]
    fn the_tree_merges_shared_paths_and_orders_children_by_bytes() {
        let w = |names: &[&str], bytes, class| Weighted {
            frames: root_first(&stack(names, 0), "cudaMalloc", None),
            bytes,
            blocks: 1,
            class,
        };
        let stacks = [
            w(&["a", "main"], 10, Class::Leak),
            w(&["b", "main"], 30, Class::Cached),
            w(&["c", "main"], 0, Class::Leak),
        ];
        let t = tree(|| stacks.iter().cloned(), |_, _| false);
        assert_eq!(t.bytes(Tree::ROOT), 40);
        let roots = t.children(Tree::ROOT);
        assert_eq!(roots.len(), 1, "one root frame: main");
        let main = roots[0];
        assert_eq!(
            t.class(main),
            Class::Cached,
            "most of main's bytes are cached"
        );
        let kids: Vec<(&str, u64)> = t
            .children(main)
            .into_iter()
            .map(|n| (t.frame(n).unwrap().0, t.bytes(n)))
            .collect();
        assert_eq!(
            kids,
            [("b at app.cu:3 (app)", 30), ("a at app.cu:3 (app)", 10)],
            "largest first; a stack of no bytes is left out"
        );
    }

    #[test]
    fn narrow_children_are_counted_not_kept() {
        let w = |names: &[&str], bytes| Weighted {
            frames: root_first(&stack(names, 0), "cudaMalloc", None),
            bytes,
            blocks: 1,
            class: Class::Leak,
        };
        let stacks = [
            w(&["a", "main"], 90),
            w(&["b", "main"], 5),
            w(&["b", "main"], 4),
        ];
        let t = tree(|| stacks.iter().cloned(), |b, total| b * 10 < total);
        let main = t.children(Tree::ROOT)[0];
        let kids = t.children(main);
        assert_eq!(kids.len(), 1, "a is kept");
        assert_eq!(t.frame(kids[0]).unwrap().0, "a at app.cu:3 (app)");
        assert_eq!(
            t.narrow_children(main),
            1,
            "b, seen twice, is one narrow child"
        );
    }
}
