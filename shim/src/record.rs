//! What every hook does after its real call: turn the result into table entries and events.
//! Each entry point is shielded, so a failure here stops recording and never reaches the host.
//! The state and the thread's block come from the hook's recorder (`hooks::recording`), which
//! found the shim recording; only the hooks that record without one (a runtime forward, the end
//! of a graph executable) look the state up here.
#![forbid(unsafe_code)]

use cudaleak_format::EventType;

use crate::api::{Api, Space};
use crate::handles::{Handle, Library};
use crate::probe::{self, Part};
use crate::python;
use crate::stack::{self, StackId};
use crate::state::{self, State};
use crate::table::{Block, EventRecord, FreeOutcome, Mapping, FOLD_EVERY};
use crate::thread::Thread;
use crate::{guard, lifecycle, process};

/// The caller's stack, with the thread's Python frames if it runs Python. `api` is what is
/// recorded, `driver` the hook that records it: when they differ the call came through a
/// runtime forward, whose caller is where the stack starts.
///
/// This and the other functions of an allocation's or a free's usual path are inlined into the
/// hook, and what the usual path does not run is kept out of line: on the GPU the driver's own
/// work leaves the caches cold at every call, and each line of code the hook runs is fetched
/// again (`bench --cold` counts them).
#[inline]
fn capture_stack(s: &State, t: &Thread, api: Api, driver: Api) -> StackId {
    if guard::owner(t).is_some() {
        return capture_in_library(s);
    }
    let native = probe::time(Part::Native, || {
        stack::capture_interned(
            &s.stacks,
            s.config.depth,
            driver as u8,
            api != driver,
            s.config.unwind,
        )
    });
    with_python(s, native)
}

/// Inside a library's call that the shim forwards: its frames stay in the stack.
#[inline(never)]
fn capture_in_library(s: &State) -> StackId {
    with_python(s, stack::capture_in_library(&s.stacks, s.config.depth))
}

/// `native` with the thread's Python frames, if it runs Python.
#[inline]
fn with_python(s: &State, native: StackId) -> StackId {
    if s.config.py_depth == 0 || !python::present() {
        return native;
    }
    python_frames(s, native)
}

#[inline(never)]
fn python_frames(s: &State, native: StackId) -> StackId {
    probe::time(Part::Python, || {
        stack::with_python(&s.mixed, native, s.config.py_depth, |buf| {
            python::capture(&s.python, buf)
        })
    })
}

/// Whether this build leaves the table out of allocations and frees: a build made only to
/// measure where the recording's cost goes (`scripts/build-ablations.sh`: `--cfg
/// cudaleak_ablate="table"`, or `"both"` with [`ablated_capture`]). Such a build records
/// nothing useful; the shipped build has no `cudaleak_ablate`.
const fn ablated_table() -> bool {
    cfg!(cudaleak_ablate = "table") || cfg!(cudaleak_ablate = "both")
}

/// Whether this build gives every allocation one fixed stack id instead of capturing its stack
/// (`cudaleak_ablate="capture"` or `"both"`), for the same measurement.
const fn ablated_capture() -> bool {
    cfg!(cudaleak_ablate = "capture") || cfg!(cudaleak_ablate = "both")
}

/// A block was recorded: the first one arms the shim (`lifecycle`) and has it say what it has to
/// say about its setup (`process`).
#[inline]
fn touched(s: &'static State) {
    process::touched(&s.config);
    lifecycle::allocation_recorded(s);
}

/// A live block made now, on thread `t`, numbered `seq`.
fn new_block(
    s: &State,
    t: &Thread,
    api: Api,
    size: u64,
    stack: StackId,
    device: Option<i32>,
    seq: u64,
) -> Block {
    Block {
        size,
        seq,
        stack,
        time_ms: s.elapsed_ms(),
        thread: guard::thread_id(t),
        device: device.and_then(|d| i16::try_from(d).ok()).unwrap_or(-1),
        api,
    }
}

/// Whether the records of `space` go through the table's ring (`Table::allocated_soon`,
/// `Table::freeing_soon`): allocations and frees that nothing else reads back at once. A
/// physical allocation's release settles its mappings, so it is recorded at once.
fn through_ring(space: Space) -> bool {
    space != Space::Physical
}

/// Every [`FOLD_EVERY`] numbers, asks the worker to fold the ring, so the program's threads
/// rarely find it full (then they fold it themselves).
#[inline]
fn fold_now_and_then(ticket: u64) {
    if ticket.is_multiple_of(FOLD_EVERY) {
        lifecycle::fold_soon();
    }
}

/// What a free's start did, for its end ([`free_finished`]).
pub enum FreeStart {
    /// The block taken from the table at once (none if it was not live).
    Taken(Option<Block>),
    /// The free's entry in the table's ring, by its number.
    Soon(u64),
}

/// A successful allocation by driver function `driver` of `size` bytes at `addr`.
pub fn allocated(
    s: &'static State,
    t: &Thread,
    driver: Api,
    addr: u64,
    size: u64,
    device: Option<i32>,
    stack: StackId,
) {
    state::shield(|| {
        let op = driver.op();
        let api = guard::label_for(t, op, driver);
        let space = op.space();
        let owner = guard::owner(t);
        if ablated_table() {
            // (A measuring build: nothing recorded.)
        } else if owner.is_none() && through_ring(space) {
            let block = new_block(s, t, api, size, stack, device, 0);
            let ticket = s.table.allocated_soon(t, space, addr, block);
            fold_now_and_then(ticket);
        } else {
            let block = new_block(s, t, api, size, stack, device, s.next_seq());
            allocated_now(s, space, addr, block, owner);
        }
        touched(s);
    });
}

/// The stack of the allocation `driver` is about to make on `t`, for [`allocated`]: captured
/// before the real call, while the caller's frames (an interpreter's frames and code objects,
/// the walk cache's lines) are still in the cache; the driver's call evicts them. The runtime's
/// label is read, not used up: the call may fail and be retried.
#[inline]
pub fn allocation_stack(s: &State, t: &Thread, driver: Api) -> Option<StackId> {
    if ablated_capture() {
        return Some(StackId(0));
    }
    state::shield(|| capture_stack(s, t, guard::label_peek(t, driver.op(), driver), driver))
}

/// An allocation recorded at once (a physical allocation, or a library handle's), and given to
/// the handle `owner`, if any.
#[inline(never)]
fn allocated_now(s: &State, space: Space, addr: u64, block: Block, owner: Option<u64>) {
    s.table.allocated(space, addr, block);
    if let Some(token) = owner {
        s.handles
            .owns(token, space, addr, block.seq, |space, addr, seq| {
                s.table.is_live_as(space, addr, seq)
            });
    }
}

/// A failed allocation: the program was told no, and may not have checked.
pub fn allocation_failed(s: &State, t: &Thread, driver: Api, size: u64, error: i32) {
    if guard::runtime_pending(t, driver.op()) {
        // The runtime forward above records what the program is told (seen on the H200: the
        // runtime's first cudaMallocAsync on a new thread fails in the driver with 201, sets
        // up the context and succeeds).
        return;
    }
    state::shield(|| {
        let api = guard::label_for(t, driver.op(), driver);
        s.table.failed_allocation();
        process::touched(&s.config);
        let stack = capture_stack(s, t, api, driver);
        s.table.event(EventRecord {
            kind: EventType::FailedAllocation,
            api,
            address: None,
            size: Some(size),
            error: Some(error.into()),
            seq: s.next_seq(),
            stack,
            alloc_stack: None,
            during_exit: lifecycle::exiting(),
        });
    });
}

/// A runtime allocation failed, and no driver hook below recorded it (the runtime forward's own
/// record: it holds no recorder, so the state is looked up here).
pub fn runtime_allocation_failed(t: &Thread, runtime: Api, size: u64, error: i32) {
    let Some(s) = state::recording() else { return };
    allocation_failed(s, t, runtime, size, error);
}

/// Before a free is forwarded: forget the address. Pass the result to [`free_finished`].
pub fn free_started(s: &State, t: &Thread, driver: Api, addr: u64) -> FreeStart {
    state::shield(|| {
        note_finalizing(s);
        let space = driver.op().space();
        if ablated_table() {
            FreeStart::Taken(None)
        } else if through_ring(space) {
            let ticket = s.table.freeing_soon(t, space, addr);
            fold_now_and_then(ticket);
            FreeStart::Soon(ticket)
        } else {
            FreeStart::Taken(s.table.take(space, addr))
        }
    })
    .unwrap_or(FreeStart::Taken(None))
}

/// At the first free after the Python interpreter began to shut down (its teardown frees what
/// the script's globals held), notes what every stack held: what the script kept to its end.
#[inline]
fn note_finalizing(s: &State) {
    if s.table.finalizing_noted() || !python::finalizing() {
        return;
    }
    s.table
        .note_finalizing(crate::clock::unix_ms(), s.table.seq_now());
}

/// After the real free answered `error` (0 is success).
pub fn free_finished(s: &State, t: &Thread, driver: Api, addr: u64, start: FreeStart, error: i32) {
    state::shield(|| {
        let api = guard::label_for(t, driver.op(), driver);
        let space = driver.op().space();
        let outcome = match start {
            // The usual end: the entry written at the start says it all.
            FreeStart::Soon(_) if error == 0 => FreeOutcome::Freed,
            FreeStart::Soon(ticket) => s.table.free_failed(space, addr, ticket),
            FreeStart::Taken(_) if ablated_table() => FreeOutcome::Freed,
            FreeStart::Taken(taken) => {
                let outcome = s.table.free_finished(space, addr, taken, error == 0);
                numbered(s, outcome);
                outcome
            }
        };
        settled(s, t, api, driver, addr, outcome, error);
    });
}

/// Gives a free recorded at once its number in the sequence, unless it makes an event (which
/// takes the number). A free through the ring took its number at its start.
fn numbered(s: &State, outcome: FreeOutcome) {
    if matches!(
        outcome,
        FreeOutcome::Freed | FreeOutcome::Untracked | FreeOutcome::Failed
    ) {
        s.next_seq();
    }
}

/// Makes the event a settled free calls for, if any.
#[inline]
fn settled(
    s: &State,
    t: &Thread,
    api: Api,
    driver: Api,
    addr: u64,
    outcome: FreeOutcome,
    error: i32,
) {
    process::touched(&s.config);
    if !matches!(
        outcome,
        FreeOutcome::Freed | FreeOutcome::Untracked | FreeOutcome::Failed
    ) {
        free_event(s, t, api, driver, addr, outcome, error);
    }
}

/// The event of a double or invalid free.
#[cold]
#[inline(never)]
fn free_event(
    s: &State,
    t: &Thread,
    api: Api,
    driver: Api,
    addr: u64,
    outcome: FreeOutcome,
    error: i32,
) {
    let (kind, alloc_stack) = match outcome {
        FreeOutcome::Freed | FreeOutcome::Untracked | FreeOutcome::Failed => return,
        FreeOutcome::DoubleFree(stack) => (EventType::DoubleFree, Some(stack)),
        FreeOutcome::InvalidFree => (EventType::InvalidFree, None),
    };
    let stack = capture_stack(s, t, api, driver);
    s.table.event(EventRecord {
        kind,
        api,
        address: Some(addr),
        size: None,
        error: Some(error.into()),
        seq: s.next_seq(),
        stack,
        alloc_stack,
        during_exit: lifecycle::exiting(),
    });
}

/// A successful `cuMemMap` of physical allocation `handle` over `size` bytes at `addr`; its
/// device is the allocation's, when the shim recorded it.
pub fn mapped(s: &'static State, t: &Thread, driver: Api, addr: u64, size: u64, handle: u64) {
    state::shield(|| {
        let api = guard::label_for(t, driver.op(), driver);
        let stack = capture_stack(s, t, api, driver);
        let device = s.table.device_of(Space::Physical, handle).map(i32::from);
        let block = new_block(s, t, api, size, stack, device, s.next_seq());
        s.table.mapped(addr, handle, block);
        touched(s);
    });
}

/// Before `cuMemUnmap(addr, size)` is forwarded: forget the mappings it covers.
pub fn unmap_started(s: &State, addr: u64, size: u64) -> Vec<(u64, Mapping)> {
    state::shield(|| s.table.take_mappings(addr, size)).unwrap_or_default()
}

/// After the real unmap answered `error` (0 is success).
pub fn unmap_finished(
    s: &State,
    t: &Thread,
    driver: Api,
    addr: u64,
    taken: Vec<(u64, Mapping)>,
    error: i32,
) {
    state::shield(|| {
        let api = guard::label_for(t, driver.op(), driver);
        let outcome = s.table.unmap_finished(addr, taken, error == 0);
        numbered(s, outcome);
        settled(s, t, api, driver, addr, outcome, error);
    });
}

/// A runtime free refused because the runtime is unloading: teardown reclaims the block, and
/// the program did free it, so it is not reported as a leak.
pub fn freed_during_teardown(runtime: Api, addr: u64) {
    let Some(s) = state::recording() else { return };
    state::shield(|| s.table.forget(runtime.op().space(), addr));
}

/// A graph allocation node was made by `driver` (explicitly, or by an allocation captured from
/// a stream) at `addr`: remember where, for the records its launches make.
pub fn graph_node_added(s: &State, t: &Thread, driver: Api, addr: u64) {
    state::shield(|| {
        let stack = capture_stack(s, t, driver, driver);
        s.graphs.node_added(addr, stack);
    });
}

/// An executable graph was made: what its launches will allocate and free.
pub fn graph_instantiated(s: &State, exec: u64, memory: crate::graphs::ExecMemory) {
    state::shield(|| s.graphs.instantiated(exec, memory));
}

pub fn graph_exec_destroyed(exec: u64) {
    let Some(s) = state::recording() else { return };
    state::shield(|| s.graphs.destroyed(exec));
}

/// A launch of `exec` succeeded: each allocation node's memory is live from now on (a record
/// of kind `graph`, with the stack where the node was made, or this launch's when unknown), and
/// each free node of memory from outside the graph frees it.
pub fn graph_launched(s: &'static State, t: &Thread, driver: Api, exec: u64, device: Option<i32>) {
    let Some(memory) = state::shield(|| s.graphs.memory_of(exec)).flatten() else {
        return;
    };
    state::shield(|| {
        let space = driver.op().space();
        let mut launch_stack = None;
        for &(addr, size) in &memory.allocs {
            let stack = match s.graphs.node_stack(addr) {
                Some(stack) => stack,
                None => *launch_stack.get_or_insert_with(|| capture_stack(s, t, driver, driver)),
            };
            let block = new_block(s, t, driver, size, stack, device, s.next_seq());
            s.table.allocated(space, addr, block);
        }
        for &addr in &memory.frees {
            let taken = s.table.take(space, addr);
            s.table.free_finished(space, addr, taken, true);
            s.next_seq();
        }
        if !memory.allocs.is_empty() {
            touched(s);
        }
    });
}

/// A library's create call begins on this thread (`hooks::libraries`): the handle it will make,
/// with the program's call as its stack, under a token for the blocks made meanwhile.
pub fn handle_creating(
    s: &State,
    t: &Thread,
    library: Library,
    create: &'static str,
) -> Option<u64> {
    state::shield(|| {
        // Rare calls: walked every time, never from the walk cache (whose keys are APIs).
        let native = stack::capture_interned(
            &s.stacks,
            s.config.depth,
            0,
            false,
            crate::config::Unwind::Precise,
        );
        s.handles.creating(Handle {
            library,
            create,
            value: None,
            stack: with_python(s, native),
            thread: guard::thread_id(t),
            device: -1,
            seq: s.next_seq(),
            time_ms: s.elapsed_ms(),
            blocks: Vec::new(),
            destroyed: false,
        })
    })
}

/// The create call of `token` returned: `value` is the handle it made, `None` if it failed;
/// `device` the current device now.
pub fn handle_created(
    s: &State,
    token: u64,
    value: Option<u64>,
    device: impl FnOnce() -> Option<i32>,
) {
    state::shield(|| {
        let device = value
            .and_then(|_| device())
            .and_then(|d| i16::try_from(d).ok());
        s.handles.created(token, value, device.unwrap_or(-1));
    });
}

/// A destroy call of handle `value` of `library` begins: the token of the handle, if known.
pub fn handle_destroying(s: &State, library: Library, value: u64) -> Option<u64> {
    state::shield(|| s.handles.destroy_started(library, value)).flatten()
}

/// The destroy call of handle `token` returned `rc`.
pub fn handle_destroyed(s: &State, token: u64, rc: i32) {
    state::shield(|| {
        s.handles
            .destroy_finished(token, rc == 0, |space, addr, seq| {
                s.table.is_live_as(space, addr, seq)
            });
    });
}
