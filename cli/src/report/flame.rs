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

/// A node of the merged tree: one frame reached by one path from the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub frame: Option<Frame>,
    pub bytes: u64,
    pub blocks: u64,
    /// Bytes per class below this node, in [`Class`] order.
    by_class: [u64; 4],
    /// Largest first, then by label: the order is the same for the same input.
    pub children: Vec<Node>,
}

impl Node {
    /// The class holding most of this node's bytes.
    pub fn class(&self) -> Class {
        const CLASSES: [Class; 4] = [Class::Leak, Class::Cached, Class::Suspect, Class::Grew];
        CLASSES
            .iter()
            .zip(self.by_class)
            .filter(|(_, b)| *b > 0)
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map_or(Class::Leak, |(c, _)| *c)
    }

    fn add(&mut self, w: &Weighted) {
        self.bytes = self.bytes.saturating_add(w.bytes);
        self.blocks = self.blocks.saturating_add(w.blocks);
        let c = &mut self.by_class[w.class as usize];
        *c = c.saturating_add(w.bytes);
    }
}

/// A node of the flat tree: the node, its parent and its children's indices.
struct Flat {
    node: Node,
    parent: u32,
    kids: Vec<u32>,
}

/// Merges stacks that share a path from the root into one tree (stacks of no bytes left out),
/// taking the stacks one at a time: a frame's label moves into the node it makes, or is dropped
/// where the node exists. Built flat first (each node once, found by its parent and frame
/// through a table of node indices), then nested.
pub fn tree(stacks: impl IntoIterator<Item = Weighted>) -> Node {
    let hasher = RandomState::new();
    let mut nodes: Vec<Flat> = vec![Flat {
        node: Node::default(),
        parent: 0,
        kids: Vec::new(),
    }];
    let mut index: HashTable<u32> = HashTable::new();
    for mut w in stacks.into_iter().filter(|w| w.bytes > 0) {
        let frames = std::mem::take(&mut w.frames);
        nodes[0].node.add(&w);
        let mut at = 0u32;
        for f in frames {
            let hash = hasher.hash_one((at, &f));
            let found = index.find(hash, |&i| {
                let n = &nodes[i as usize];
                n.parent == at && n.node.frame.as_ref() == Some(&f)
            });
            let next = match found {
                Some(&i) => i,
                None => {
                    let n = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
                    nodes.push(Flat {
                        node: Node {
                            frame: Some(f),
                            ..Node::default()
                        },
                        parent: at,
                        kids: Vec::new(),
                    });
                    nodes[at as usize].kids.push(n);
                    index.insert_unique(hash, n, |&i| {
                        let n = &nodes[i as usize];
                        n.node
                            .frame
                            .as_ref()
                            .map_or(0, |f| hasher.hash_one((n.parent, f)))
                    });
                    n
                }
            };
            nodes[next as usize].node.add(&w);
            at = next;
        }
    }
    drop(index);
    let mut slots: Vec<Option<Flat>> = nodes.into_iter().map(Some).collect();
    nest(&mut slots, 0)
}

/// Node `i` of the flat tree with its children nested, largest first, then by frame.
fn nest(slots: &mut [Option<Flat>], i: u32) -> Node {
    let Some(Flat { mut node, kids, .. }) = slots.get_mut(i as usize).and_then(Option::take) else {
        return Node::default();
    };
    node.children = kids.into_iter().map(|k| nest(slots, k)).collect();
    node.children
        .sort_by(|x, y| y.bytes.cmp(&x.bytes).then_with(|| x.frame.cmp(&y.frame)));
    node
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
            offset: None,
            ip: 1,
            python: false,
            internal: false,
            long: None,
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
        let t = tree(stacks);
        assert_eq!(t.bytes, 40);
        assert_eq!(t.children.len(), 1, "one root frame: main");
        let main = &t.children[0];
        assert_eq!(
            main.class(),
            Class::Cached,
            "most of main's bytes are cached"
        );
        let kids: Vec<(&str, u64)> = main
            .children
            .iter()
            .map(|n| (n.frame.as_ref().unwrap().label.as_str(), n.bytes))
            .collect();
        assert_eq!(
            kids,
            [("b at app.cu:3 (app)", 30), ("a at app.cu:3 (app)", 10)],
            "largest first; a stack of no bytes is left out"
        );
    }
}
