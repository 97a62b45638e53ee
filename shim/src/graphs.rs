//! CUDA graph memory: what each instantiated graph allocates and frees when it is launched, and
//! where each allocation node was asked for. Graph allocations never pass through `cuMemAlloc*`:
//! their addresses are fixed when the node is made, and the memory becomes live at each launch
//! (CUDA programming guide, "Graph Memory Nodes"). So the shim learns a graph's memory nodes when
//! it is instantiated, and turns them into records when it is launched.
//!
//! Touched only by graph calls (instantiate, launch, node creation), never by plain allocations.
#![deny(unsafe_code)]

use std::collections::HashMap;

use crate::lock::{ForkLock, ForkLocked, Mutex};

use crate::stack::StackId;

/// The memory nodes of one instantiated graph, as they act at each launch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecMemory {
    /// Allocation nodes the graph does not free itself: (address, bytes).
    pub allocs: Vec<(u64, u64)>,
    /// Free nodes of memory the graph did not allocate.
    pub frees: Vec<u64>,
}

impl ExecMemory {
    /// From a graph's allocation nodes and free nodes: an allocation the same graph frees
    /// leaves nothing behind, and is dropped with its free.
    pub fn from_nodes(allocs: Vec<(u64, u64)>, frees: Vec<u64>) -> ExecMemory {
        let inside = |addr: &u64| allocs.iter().any(|(a, _)| a == addr);
        let external: Vec<u64> = frees.iter().copied().filter(|f| !inside(f)).collect();
        let kept = allocs
            .iter()
            .copied()
            .filter(|(a, _)| !frees.contains(a))
            .collect();
        ExecMemory {
            allocs: kept,
            frees: external,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.allocs.is_empty() && self.frees.is_empty()
    }
}

#[derive(Default)]
pub(crate) struct Inner {
    /// Executable graph handle → its memory nodes; only graphs that have any.
    execs: HashMap<u64, ExecMemory>,
    /// Allocation node address → where the node was made.
    node_stacks: HashMap<u64, StackId>,
}

#[derive(Default)]
pub struct Graphs {
    inner: Mutex<Inner>,
}

impl Graphs {
    pub fn node_added(&self, addr: u64, stack: StackId) {
        self.inner.lock().node_stacks.insert(addr, stack);
    }

    pub fn node_stack(&self, addr: u64) -> Option<StackId> {
        self.inner.lock().node_stacks.get(&addr).copied()
    }

    pub fn instantiated(&self, exec: u64, memory: ExecMemory) {
        let mut inner = self.inner.lock();
        if memory.is_empty() {
            inner.execs.remove(&exec);
        } else {
            inner.execs.insert(exec, memory);
        }
    }

    pub fn memory_of(&self, exec: u64) -> Option<ExecMemory> {
        self.inner.lock().execs.get(&exec).cloned()
    }

    pub fn destroyed(&self, exec: u64) {
        self.inner.lock().execs.remove(&exec);
    }
}

impl ForkLocked for Graphs {
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock)) {
        f(&self.inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_the_graph_frees_itself_leaves_nothing() {
        let m = ExecMemory::from_nodes(vec![(0x1000, 64), (0x2000, 128)], vec![0x1000, 0x9000]);
        assert_eq!(m.allocs, vec![(0x2000, 128)]);
        assert_eq!(m.frees, vec![0x9000]);
        assert!(ExecMemory::from_nodes(vec![(1, 8)], vec![1]).is_empty());
    }

    #[test]
    fn executables_without_memory_nodes_are_not_kept() {
        let g = Graphs::default();
        g.instantiated(7, ExecMemory::default());
        assert_eq!(g.memory_of(7), None);
        g.instantiated(8, ExecMemory::from_nodes(vec![(0x10, 4)], vec![]));
        assert_eq!(g.memory_of(8).unwrap().allocs, vec![(0x10, 4)]);
        g.destroyed(8);
        assert_eq!(g.memory_of(8), None);
    }
}
