//! Library handles (issue 24): which of the handles a dump lists (cuBLAS handles, cuFFT plans,
//! cuRAND generators …) the program leaked, and which blocks go with them.
//!
//! A handle never destroyed is *held* when it is the process's handle: a framework's (its create
//! call comes from an installed package or a framework library: PyTorch, CuPy and JAX keep one per
//! thread and device, and plan caches of bounded size), or one made by the program's own code
//! that no other handle of the same create site, thread and device outlives. It is *leaked* when
//! a create site of the program's own code left two or more live handles on one thread and
//! device: the per-request pattern. Then every live handle of that site is the leak, reported
//! once per site with the blocks they own; held handles leave their blocks to the cache rules.
//! Blocks a handle still owned after the program destroyed it are the library's leak: no cache
//! rule may hold them.

use std::collections::{HashMap, HashSet};

use super::frames::{basename, cut_name};
use super::group::StackList;
use super::{format, GroupAcc, LeakGroup, Stacks};
use crate::callsite::Callsite;

/// The handles one leak group stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleCount {
    /// The library, as dumps name it (`cublas`, `cufft` …).
    pub library: String,
    pub count: u64,
}

impl HandleCount {
    /// `40 cuBLAS handles`, `1 cuFFT plan`.
    pub fn text(&self) -> String {
        let (one, many) = noun(&self.library);
        if self.count == 1 {
            format!("1 {one}")
        } else {
            format!("{} {many}", self.count)
        }
    }
}

/// What a library calls its handles, one and many.
fn noun(library: &str) -> (String, String) {
    let (name, thing) = match library {
        "cublas" => ("cuBLAS", "handle"),
        "cublasLt" => ("cuBLASLt", "handle"),
        "cudnn" => ("cuDNN", "handle"),
        "cufft" => ("cuFFT", "plan"),
        "curand" => ("cuRAND", "generator"),
        "cusparse" => ("cuSPARSE", "handle"),
        "cusolver" => ("cuSOLVER", "handle"),
        "nccl" => ("NCCL", "communicator"),
        other => (other, "handle"),
    };
    (format!("{name} {thing}"), format!("{name} {thing}s"))
}

/// What [`judge`] found in one dump.
#[derive(Default)]
pub(super) struct Judged {
    /// One leak group per create site that leaked its handles, with the blocks they own.
    pub groups: Vec<GroupAcc>,
    /// The `seq` of every block those groups hold: not grouped again at its own stack.
    pub in_groups: HashSet<u64>,
    /// The `seq` of blocks destroyed handles left behind: leaks, never held by a cache.
    pub left_behind: HashSet<u64>,
    /// The `seq` of blocks of held handles, and the cache rule of their library: what holds
    /// them where no rule recognises their stack.
    pub held: HashMap<u64, usize>,
}

/// The cache rule (by id) that stands for a library's handles.
fn rule_id(library: &str) -> &str {
    match library {
        "cublasLt" => "cublas",
        other => other,
    }
}

/// Modules whose calls make framework handles: installed Python packages, and the frameworks'
/// own libraries wherever they are installed.
fn framework_module(module: &str) -> bool {
    const LIBRARIES: [&str; 8] = [
        "libtorch",
        "libc10",
        "libcaffe2",
        "libxla",
        "xla_",
        "libjax",
        "libtensorflow",
        "librmm",
    ];
    let name = basename(module);
    module.contains("/site-packages/")
        || module.contains("/dist-packages/")
        || LIBRARIES.iter().any(|l| name.starts_with(l))
}

/// Whether the handle's create call was made by a framework: its caller, the stack's first
/// frame, lies in one.
fn made_by_framework(frames: &[format::Frame]) -> bool {
    frames
        .first()
        .and_then(|f| f.module.as_deref())
        .is_some_and(framework_module)
}

/// The blocks of the live handles the program's own code made (not a framework): each block's
/// `seq`, with the handle's create stack and function.
pub(super) fn owned_by_program<'d>(
    dump: &'d format::Dump,
    stacks: &Stacks<'_>,
) -> HashMap<u64, (usize, &'d str)> {
    let mut owned = HashMap::new();
    for h in dump.handles.iter().filter(|h| !h.destroyed) {
        if h.stack >= stacks.len() || made_by_framework(&stacks.frames(h.stack)) {
            continue;
        }
        for &seq in &h.blocks {
            owned.insert(seq, (h.stack, h.create.as_str()));
        }
    }
    owned
}

pub(super) fn judge(dump: &format::Dump, stacks: &mut Stacks<'_>) -> Judged {
    let mut judged = Judged::default();
    if dump.handles.is_empty() {
        return judged;
    }
    let by_seq: HashMap<u64, &format::LiveRecord> = dump.live.iter().map(|r| (r.seq, r)).collect();
    for h in dump.handles.iter().filter(|h| h.destroyed) {
        judged.left_behind.extend(h.blocks.iter().copied());
    }
    // Live handles by (library, create site): the site's handles per thread and device.
    struct Site<'a> {
        handles: Vec<&'a format::Handle<format::Name>>,
        per_thread: HashMap<(u64, Option<i32>), u64>,
        framework: bool,
    }
    let mut order: Vec<(String, Callsite)> = Vec::new();
    let mut sites: HashMap<(String, Callsite), Site<'_>> = HashMap::new();
    for h in dump.handles.iter().filter(|h| !h.destroyed) {
        let callsite = stacks.get(h.stack, &h.create).callsite(&h.create);
        let key = (h.library.to_string(), callsite);
        let site = sites.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            Site {
                handles: Vec::new(),
                per_thread: HashMap::new(),
                framework: made_by_framework(&stacks.frames(h.stack)),
            }
        });
        site.handles.push(h);
        *site.per_thread.entry((h.thread, h.device)).or_default() += 1;
    }
    for key in order {
        let site = &sites[&key];
        let leaked = !site.framework && site.per_thread.values().any(|&n| n >= 2);
        if !leaked {
            let rule = stacks.caches.iter().position(|c| c.id == rule_id(&key.0));
            if let Some(rule) = rule {
                for h in &site.handles {
                    judged.held.extend(h.blocks.iter().map(|&seq| (seq, rule)));
                }
            }
            continue;
        }
        let first = site.handles[0];
        let p = stacks.get(first.stack, &first.create);
        let mut group = LeakGroup {
            api: cut_name(&first.create),
            kind: format::Kind::Device,
            device: first.device,
            bytes: 0,
            held: 0,
            allocations: 0,
            stack: p.view.clone(),
            callsite: key.1.clone(),
            held_by: None,
            handles: Some(Box::new(HandleCount {
                library: key.0.clone(),
                count: site.handles.len() as u64,
            })),
            framework: None,
        };
        // Memory held per kind: the group is of the kind that holds the most.
        let mut kinds: Vec<(format::Kind, u64)> = Vec::new();
        let mut stacks_of = StackList::default();
        for h in &site.handles {
            if group.device != h.device {
                group.device = None;
            }
            if !stacks_of.contains(h.stack) && stacks_of.len() < 64 {
                stacks_of.push(h.stack);
            }
            for r in h.blocks.iter().filter_map(|seq| by_seq.get(seq)) {
                if !judged.in_groups.insert(r.seq) {
                    continue;
                }
                group.held = group.held.saturating_add(r.held());
                group.allocations += 1;
                match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
                    Some((_, held)) => *held = held.saturating_add(r.held()),
                    None => kinds.push((r.kind, r.held())),
                }
            }
        }
        // Handles own blocks of several kinds (NCCL: host memory, reservations, physical
        // memory and its mappings): the group's size is the memory they hold, never address
        // ranges added to it.
        group.bytes = group.held;
        group.kind = kinds
            .iter()
            .max_by_key(|(_, held)| *held)
            .map_or(format::Kind::Device, |(k, _)| *k);
        judged.groups.push(GroupAcc {
            group,
            stacks: stacks_of,
            record: None,
        });
    }
    judged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_named_as_their_library_names_them() {
        let n = |library: &str, count| {
            HandleCount {
                library: library.into(),
                count,
            }
            .text()
        };
        assert_eq!(n("cublas", 40), "40 cuBLAS handles");
        assert_eq!(n("cufft", 1), "1 cuFFT plan");
        assert_eq!(n("curand", 2), "2 cuRAND generators");
        assert_eq!(n("nccl", 3), "3 NCCL communicators");
        assert_eq!(n("somelib", 2), "2 somelib handles");
    }

    #[test]
    fn framework_modules_are_told_from_the_programs() {
        assert!(framework_module(
            "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"
        ));
        assert!(framework_module("/usr/local/libtorch/lib/libtorch_cuda.so"));
        assert!(framework_module(
            "/usr/lib/python3/dist-packages/cupy/cuda/cufft.so"
        ));
        assert!(!framework_module("/home/dev/svc/build/svc"));
        assert!(!framework_module("/home/dev/svc/build/libservice.so"));
    }
}
