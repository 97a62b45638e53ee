//! The one way into recording from a hook: [`recording`] looks this thread's block up once,
//! takes its re-entrancy guard and the shim's state together (bytehound's `acquire_lock()`) and
//! hands a [`Recorder`] to the hook's body; every record it makes keeps errno as the real call
//! left it and goes through the shield in `record` (a panic stops recording, never reaches the
//! program).
//!
//! A hook reads: `recording(api, call, |rec, call| { real call → record })`. Without a recorder
//! (another hook of this thread is running, another copy of the shim records this process, or
//! this one is not recording: not yet started, paused, stopped) it only forwards.
//! Nothing here holds a lock across the real call or changes what the real call returned.

use std::ffi::{c_int, c_void};

use crate::api::Api;
use crate::graphs::ExecMemory;
use crate::guard::{Guard, LabelScope};
use crate::record;
use crate::stack::StackId;
use crate::state::{self, State};
use crate::table::Mapping;
use crate::thread::{self, Thread};

use super::{keeping_errno, CuResult, CUDA_ERROR_CUDART_UNLOADING, CUDA_SUCCESS};

/// Held from before the real call to the last record of one hooked call: the guard (with this
/// thread's block), and the state the shim records into.
pub struct Recorder<'t> {
    api: Api,
    state: &'static State,
    guard: Guard<'t>,
}

/// The way a hook records a call of `api`: `body` gets the recorder and the real call `call`,
/// or, when the call must only be forwarded, `call` alone is made. The thread's block is looked
/// up once here, for everything the records of this call read of it.
#[inline]
pub fn recording<C, R>(api: Api, call: C, body: impl FnOnce(&Recorder<'_>, C) -> R) -> R
where
    C: FnOnce() -> R,
{
    thread::with(|t| match enter(t, api) {
        Some(rec) => body(&rec, call),
        None => call(),
    })
}

/// Enters recording for a call of `api` on thread `t`; `None` when the call must only be
/// forwarded. The guard is taken first: looking up the state may adopt it (a child made without
/// fork), and nothing that does may reach a hook that records.
#[inline]
fn enter(t: &Thread, api: Api) -> Option<Recorder<'_>> {
    let guard = Guard::enter(t)?;
    let state = state::recording()?;
    Some(Recorder { api, state, guard })
}

/// [`recording`] for calls recorded under no API name, after their real call: graph
/// instantiation, which only learns what later launches do. `body` runs only when recording.
#[inline]
pub fn unlabelled(body: impl FnOnce(&Unlabelled)) {
    thread::with(|t| {
        let Some(guard) = Guard::enter(t) else { return };
        let Some(state) = state::recording() else {
            return;
        };
        body(&Unlabelled {
            state,
            _guard: guard,
        });
    });
}

/// A [`Recorder`] without an API name.
pub struct Unlabelled<'t> {
    state: &'static State,
    _guard: Guard<'t>,
}

impl Unlabelled<'_> {
    /// An executable graph `exec` was made; `memory` asks the driver what its launches do.
    #[inline]
    pub fn graph_instantiated(&self, exec: u64, memory: impl FnOnce() -> Option<ExecMemory>) {
        keeping_errno(|| {
            if let Some(memory) = memory() {
                record::graph_instantiated(self.state, exec, memory);
            }
        });
    }
}

impl Recorder<'_> {
    fn thread(&self) -> &Thread {
        self.guard.thread()
    }

    /// Before an allocation's real call: its stack, for [`Recorder::allocated`] (None when the
    /// capture failed, and recording stopped).
    #[inline]
    pub fn stack(&self) -> Option<StackId> {
        keeping_errno(|| record::allocation_stack(self.state, self.thread(), self.api))
    }

    /// After an allocation that answered `rc` and, on success, made the block `out()` names,
    /// allocated from `stack` ([`Recorder::stack`], taken before the call). `out` and `device`
    /// run only on success (and `device` only when there is a block).
    #[inline]
    pub fn allocated(
        &self,
        rc: CuResult,
        out: impl FnOnce() -> Option<u64>,
        size: u64,
        device: impl FnOnce() -> Option<i32>,
        stack: Option<StackId>,
    ) {
        keeping_errno(|| match rc {
            CUDA_SUCCESS => {
                if let (Some(addr), Some(stack)) = (out(), stack) {
                    let (s, t) = (self.state, self.thread());
                    record::allocated(s, t, self.api, addr, size, device(), stack);
                }
            }
            error => record::allocation_failed(self.state, self.thread(), self.api, size, error),
        });
    }

    /// Before a free is forwarded: forgets `addr`. Pass the result to [`Recorder::free_finished`].
    #[inline]
    pub fn free_started(&self, addr: u64) -> record::FreeStart {
        keeping_errno(|| record::free_started(self.state, self.thread(), self.api, addr))
    }

    /// After the real free of `addr` answered `rc`.
    #[inline]
    pub fn free_finished(&self, addr: u64, taken: record::FreeStart, rc: CuResult) {
        keeping_errno(|| {
            record::free_finished(self.state, self.thread(), self.api, addr, taken, rc)
        });
    }

    /// A graph allocation node was made at `addr` (its memory comes with the graph's launches).
    #[inline]
    pub fn graph_node_added(&self, addr: u64) {
        keeping_errno(|| record::graph_node_added(self.state, self.thread(), self.api, addr));
    }

    /// A launch of executable graph `exec` succeeded.
    #[inline]
    pub fn graph_launched(&self, exec: u64, device: impl FnOnce() -> Option<i32>) {
        keeping_errno(|| {
            record::graph_launched(self.state, self.thread(), self.api, exec, device())
        });
    }

    /// After `cuMemMap` of physical allocation `handle` over `size` bytes at `addr` answered `rc`.
    #[inline]
    pub fn mapped(&self, rc: CuResult, addr: u64, size: u64, handle: u64) {
        keeping_errno(|| match rc {
            CUDA_SUCCESS => record::mapped(self.state, self.thread(), self.api, addr, size, handle),
            error => record::allocation_failed(self.state, self.thread(), self.api, size, error),
        });
    }

    /// Before `cuMemUnmap(addr, size)` is forwarded: forgets the mappings it covers.
    #[inline]
    pub fn unmap_started(&self, addr: u64, size: u64) -> Vec<(u64, Mapping)> {
        keeping_errno(|| record::unmap_started(self.state, addr, size))
    }

    /// After the real unmap answered `rc`.
    #[inline]
    pub fn unmap_finished(&self, addr: u64, taken: Vec<(u64, Mapping)>, rc: CuResult) {
        keeping_errno(|| {
            record::unmap_finished(self.state, self.thread(), self.api, addr, taken, rc)
        });
    }
}

/// The way in for a runtime forward (`cudaMalloc` …) on thread `t`: it takes no guard, since the
/// driver hook its call reaches records the block; it leaves its name there (the label) for that
/// record.
#[inline]
pub fn forward(t: &Thread, api: Api) -> Forward<'_> {
    Forward {
        api,
        thread: t,
        label: LabelScope::set(t, api),
    }
}

/// A runtime call on its way to the driver, labelled with the runtime's name until it returns.
pub struct Forward<'t> {
    api: Api,
    thread: &'t Thread,
    label: LabelScope<'t>,
}

impl Forward<'_> {
    /// After the runtime allocation returned `rc`: a failure that no driver hook recorded (it
    /// never reached the driver, or the driver hook left it to the runtime) is recorded once
    /// the label is gone, with the code the program is told.
    #[inline]
    pub fn allocation(self, rc: c_int, size: usize) {
        let recorded = self.label.consumed();
        let (api, t) = (self.api, self.thread);
        drop(self);
        if rc != 0 && !recorded {
            keeping_errno(|| record::runtime_allocation_failed(t, api, size as u64, rc));
        }
    }

    /// After the runtime free of `ptr` returned `rc`: a free refused because the runtime is
    /// unloading still counts as freed.
    #[inline]
    pub fn free(self, rc: c_int, ptr: *mut c_void) {
        if rc == CUDA_ERROR_CUDART_UNLOADING && !ptr.is_null() {
            keeping_errno(|| record::freed_during_teardown(self.api, ptr as u64));
        }
    }
}
