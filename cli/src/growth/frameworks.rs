//! The frameworks' own counts as growth rows (dump schema 6, `frameworks`): PyTorch's, JAX's and
//! CuPy's count of what their live objects hold, one series per framework, backend and device,
//! judged by the same rule as a callsite's floors; the record a framework kept of where its
//! blocks were made, as the row's stack; and the rule that one growth is not counted twice
//! (`not_twice`).
//!
//! Pure like the rest of `growth`: no I/O, no formatting beyond the names and sentences of the
//! frameworks themselves, which live here once ([`FRAMEWORKS`]).

use crate::load::schema as format;

use crate::analyze::{prepare_frames, record_frames, Counts, StackView, View};
use crate::callsite::Callsite;

use super::{GrowthRow, HeldBy, NotSuspect};

/// A framework whose count a dump may carry, and the words a report uses for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framework {
    /// The dump's `framework` value.
    pub id: &'static str,
    pub title: &'static str,
    /// The count, as a user would read it in their own program: a growth row's `api`.
    pub api: &'static str,
    /// What its live objects are called.
    pub objects: &'static str,
    /// The cache rule (`caches.rules`) of the pool the framework's objects live in.
    pub pool: &'static str,
    /// That pool in words, as a report names where a kept object is.
    pub pool_name: &'static str,
    /// Why a row of this framework names no line, and what to do.
    pub no_line: &'static str,
    /// The backend under which every object is its own driver allocation (`--exact-pools`).
    pub exact: Option<&'static str>,
}

/// The frameworks `cudaleak run` reads the counts of (the shim takes these ids and no others).
pub const FRAMEWORKS: [Framework; 3] = [
    Framework {
        id: "torch",
        title: "PyTorch",
        api: "torch.cuda.memory_allocated()",
        objects: "tensors",
        pool: "pytorch-native",
        pool_name: "PyTorch's caching allocator",
        no_line: "PyTorch kept no Python stack for these blocks (its record turns on only after \
                  its count rose for 4 windows in a row); `cudaleak run --exact-pools` gives \
                  every tensor its own driver allocation, seen at its line",
        exact: Some("cudaMallocAsync"),
    },
    Framework {
        id: "jax",
        title: "JAX",
        api: "jax Device.memory_stats() bytes_in_use",
        objects: "arrays",
        pool: "xla-bfc",
        pool_name: "JAX's BFC allocator",
        no_line: "JAX keeps no record of where its buffers were made; `cudaleak run \
                  --exact-pools` gives every buffer its own driver allocation, seen at its line",
        exact: Some("platform"),
    },
    Framework {
        id: "cupy",
        title: "CuPy",
        api: "cupy MemoryPool.used_bytes()",
        objects: "arrays",
        pool: "cupy-pool",
        pool_name: "CuPy's memory pool",
        no_line: "CuPy keeps no record of where its arrays were made; with \
                  cupy.cuda.set_allocator(None) in the program every array is its own driver \
                  allocation, seen at its line",
        exact: None,
    },
];

/// The framework of a dump's `framework` value.
pub fn framework(id: &str) -> Option<&'static Framework> {
    FRAMEWORKS.iter().find(|f| f.id == id)
}

/// What a framework row carries beyond a callsite's: which count it is, and the groups of live
/// blocks the framework's own record named (largest first).
#[derive(Debug, Clone, PartialEq)]
pub struct FrameworkGrowth {
    /// `torch`, `jax` or `cupy`.
    pub framework: String,
    pub backend: Option<String>,
    pub device: i32,
    pub groups: Vec<RecordGroup>,
    /// Why no line is named, and what to do; `None` when the largest group names one.
    pub note: Option<String>,
}

/// Live blocks the framework's record saw made at one Python stack.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordGroup {
    pub blocks: u64,
    pub bytes: u64,
    pub stack: StackView,
}

/// One count across the dumps of a process.
pub(super) struct CounterAcc {
    pub framework: String,
    pub backend: Option<String>,
    pub device: i32,
    /// The framework counts its blocks (PyTorch): growth is judged per object, else as a pool's.
    pub blocks_known: bool,
    /// (index into the process's points, at the last read, the floor of the interval)
    pub seen: Vec<(usize, Counts, Counts)>,
}

/// The frameworks' counts of one process, dump by dump.
#[derive(Default)]
pub(super) struct FrameworksAcc {
    pub counters: Vec<CounterAcc>,
    /// When the bootstrap stopped reading (the script's end).
    pub ended_ms: Option<u64>,
    /// The records of the newest dump that carried any, with that dump's order key.
    records: Option<((bool, u64, u64), Vec<format::FrameworkRecord>)>,
}

impl FrameworksAcc {
    pub fn add(&mut self, f: &format::Frameworks, at: usize, order: (bool, u64, u64)) {
        for c in &f.counters {
            let i = match self.counters.iter().position(|a| {
                a.framework == c.framework && a.backend == c.backend && a.device == c.device
            }) {
                Some(i) => i,
                None => {
                    self.counters.push(CounterAcc {
                        framework: c.framework.clone(),
                        backend: c.backend.clone(),
                        device: c.device,
                        blocks_known: true,
                        seen: Vec::new(),
                    });
                    self.counters.len() - 1
                }
            };
            let acc = &mut self.counters[i];
            // PyTorch's cudaMallocAsync backend answers 0 blocks while it holds bytes: it does
            // not count them (seen on the H200), so such a count is judged as a pool's.
            let blocks = c.blocks.filter(|&b| b > 0 || c.bytes == 0);
            acc.blocks_known &= blocks.is_some();
            let live = Counts {
                groups: 0,
                allocations: blocks.unwrap_or(0),
                bytes: c.bytes,
            };
            let floor = Counts {
                groups: 0,
                allocations: blocks.and(c.floor_blocks).or(blocks).unwrap_or(0),
                bytes: c.floor_bytes.min(c.bytes),
            };
            // A count named twice in one dump: its last entry stands.
            match acc.seen.last_mut() {
                Some(last) if last.0 == at => *last = (at, live, floor),
                _ => acc.seen.push((at, live, floor)),
            }
        }
        if let Some(ms) = f.ended_unix_ms {
            self.ended_ms = Some(self.ended_ms.map_or(ms, |e| e.min(ms)));
        }
        if !f.records.is_empty() && self.records.as_ref().is_none_or(|(o, _)| order >= *o) {
            self.records = Some((order, f.records.clone()));
        }
    }

    pub fn records(&self) -> &[format::FrameworkRecord] {
        self.records.as_ref().map_or(&[], |r| &r.1)
    }
}

/// A count made ready to be a row: its identity, stack, what holds it, and what it carries.
pub(super) struct Prepared {
    pub callsite: Callsite,
    pub api: format::Name,
    pub stack: StackView,
    pub held_by: HeldBy,
    pub framework: FrameworkGrowth,
}

/// The row parts of count `c`: its stack is the largest group its framework's record named on
/// its device (a group without a device counts where the framework has one device only), its
/// callsite that stack under the count's name and device, which no driver call can have.
pub(super) fn prepare(
    c: &CounterAcc,
    records: &[format::FrameworkRecord],
    one_device: bool,
    view: &View,
) -> Prepared {
    let fw = framework(&c.framework);
    let api = fw.map_or_else(|| format!("{} count", c.framework), |f| f.api.to_string());
    let key = format!("{api} (device {})", c.device);
    let mut groups: Vec<(u64, u64, &[cudaleak_format::Frame])> = Vec::new();
    let mut record_note = None;
    for r in records.iter().filter(|r| r.framework == c.framework) {
        record_note = record_note.or(r.note.as_deref());
        for g in &r.groups {
            if g.device == Some(c.device) || (g.device.is_none() && one_device) {
                groups.push((g.bytes, g.blocks, &g.frames));
            }
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    let mut callsite = None;
    let groups: Vec<RecordGroup> = groups
        .into_iter()
        .map(|(bytes, blocks, f)| {
            let (site, stack) = prepare_frames(&record_frames(f), &key, view);
            callsite.get_or_insert(site);
            RecordGroup {
                blocks,
                bytes,
                stack,
            }
        })
        .collect();
    let callsite = callsite.unwrap_or_else(|| Callsite::new(&key, Vec::new().into()));
    let stack = groups.first().map(|g| g.stack.clone()).unwrap_or_default();
    let line = stack.frames.iter().any(|f| f.is_own());
    let (title, objects) = fw.map_or((c.framework.as_str(), "objects"), |f| (f.title, f.objects));
    let exact = fw.is_some_and(|f| f.exact.is_some() && f.exact == c.backend.as_deref());
    let note = (!line).then(|| {
        let mut n = match fw {
            // Already each object its own driver allocation: the lines are the callsites'.
            Some(_) if exact => format!(
                "every one of {title}'s {objects} was its own driver allocation here, and no \
                 callsite of them grew like a leak: the growth is spread over the callsites \
                 that grew, listed with it"
            ),
            Some(f) => f.no_line.to_string(),
            None => format!("{title} keeps no record of where its objects were made"),
        };
        if let Some(why) = record_note {
            n.push_str(&format!(" ({why})"));
        }
        n
    });
    let mut grows = format!(
        "what {title}'s {objects} hold ({api}) kept rising: the program keeps {objects}, some \
         every step (a result appended to a list, a dict that never evicts)"
    );
    match &note {
        Some(n) => {
            grows.push_str(". ");
            grows.push_str(n);
        }
        None => grows.push_str(&format!(
            "; the stack is where {title}'s own record saw most of the live ones made"
        )),
    }
    Prepared {
        callsite,
        api: api.into(),
        stack,
        held_by: HeldBy {
            id: c.framework.clone(),
            name: format!("{title}'s {objects}"),
            grows: Some(grows),
            segments: !c.blocks_known,
        },
        framework: FrameworkGrowth {
            framework: c.framework.clone(),
            backend: c.backend.clone(),
            device: c.device,
            groups,
            note,
        },
    }
}

/// One growth is not counted twice. A framework's count that is a suspect is explained where
/// the driver suspects not held in a pool's segments (each object its own allocation, as under
/// `--exact-pools`: their callsites name the lines) grew by at least half as much; a count that
/// stays a suspect is the growth of its framework's pool, whose driver suspects are then not
/// counted again.
pub(super) fn not_twice(rows: &mut [GrowthRow]) {
    let per_object: i128 = rows
        .iter()
        .filter(|r| r.is_suspect() && r.framework.is_none())
        .filter(|r| !r.held_by.as_ref().is_some_and(|h| h.segments))
        .map(|r| r.growth_bytes().max(0))
        .sum();
    for r in rows.iter_mut() {
        if r.is_suspect() && r.framework.is_some() && per_object * 2 >= r.growth_bytes() {
            r.not_suspect = Some(NotSuspect::ExplainedByCallsites);
        }
    }
    let pools: Vec<&'static str> = rows
        .iter()
        .filter(|r| r.is_suspect())
        .filter_map(|r| r.framework.as_ref())
        .filter_map(|f| framework(&f.framework))
        .map(|f| f.pool)
        .collect();
    for r in rows.iter_mut() {
        let in_pool = r
            .held_by
            .as_ref()
            .is_some_and(|h| pools.contains(&h.id.as_str()));
        if r.is_suspect() && r.framework.is_none() && in_pool {
            r.not_suspect = Some(NotSuspect::InFrameworkCount);
        }
    }
}
