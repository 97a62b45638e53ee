//! What the hook layer keeps per thread, in the thread's block ([`crate::thread`]): the
//! re-entrancy guard, the label a runtime forward leaves for the driver wrapper below it, the
//! library handle whose create (or use) call is running, and the cached thread id. Each takes
//! the block from its caller, which looked it up once.

use crate::api::{Api, Op};
use crate::thread::{self, Label, Thread};

/// Set while a library's create call (or a call that names a handle) runs on this thread: the
/// blocks the driver hooks record meanwhile belong to the handle of this token
/// ([`crate::handles`]).
pub struct OwnerScope<'t> {
    thread: &'t Thread,
    previous: u64,
}

impl OwnerScope<'_> {
    pub fn set(t: &Thread, token: u64) -> OwnerScope<'_> {
        OwnerScope {
            thread: t,
            previous: t.owner.replace(token),
        }
    }
}

impl Drop for OwnerScope<'_> {
    fn drop(&mut self) {
        self.thread.owner.set(self.previous);
    }
}

/// The token of the handle whose call runs on this thread, if any.
#[inline]
pub fn owner(t: &Thread) -> Option<u64> {
    Some(t.owner.get()).filter(|&t| t != 0)
}

/// Held while a driver wrapper runs; calls that arrive while one is held (the driver calling
/// its own exported functions, the unwinder, nested hooks) are forwarded without recording.
/// A copy of the shim that another copy records for never gets one: its wrappers only forward.
pub struct Guard<'t> {
    thread: &'t Thread,
}

impl<'t> Guard<'t> {
    #[inline]
    pub fn enter(t: &'t Thread) -> Option<Guard<'t>> {
        if crate::process::passive() || t.depth.get() > 0 {
            return None;
        }
        t.depth.set(1);
        Some(Guard { thread: t })
    }

    /// The thread that holds the guard.
    #[inline]
    pub fn thread(&self) -> &'t Thread {
        self.thread
    }
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.thread.depth.set(0);
    }
}

/// Set by a runtime forward for the duration of the real runtime call.
pub struct LabelScope<'t> {
    thread: &'t Thread,
    previous: Option<Label>,
}

impl LabelScope<'_> {
    pub fn set(t: &Thread, api: Api) -> LabelScope<'_> {
        let previous = t.label.replace(Some(Label {
            api,
            consumed: false,
        }));
        LabelScope {
            thread: t,
            previous,
        }
    }

    /// Whether a driver wrapper below made the record (or the event) for this call.
    pub fn consumed(&self) -> bool {
        self.thread.label.get().is_some_and(|l| l.consumed)
    }
}

impl Drop for LabelScope<'_> {
    fn drop(&mut self) {
        self.thread.label.set(self.previous);
    }
}

/// The API name to record for a driver call of operation `op` made as `driver`: the pending
/// runtime label if it is for the same operation (and then it is used up), else `driver`.
#[inline]
pub fn label_for(t: &Thread, op: Op, driver: Api) -> Api {
    match t.label.get() {
        Some(label) if !label.consumed && label.api.op() == op => {
            t.label.set(Some(Label {
                consumed: true,
                ..label
            }));
            label.api
        }
        _ => driver,
    }
}

/// The API name [`label_for`] would give a driver call of operation `op` made as `driver`, left
/// pending: for what is read before the real call, which may fail and be retried.
#[inline]
pub fn label_peek(t: &Thread, op: Op, driver: Api) -> Api {
    match t.label.get() {
        Some(label) if !label.consumed && label.api.op() == op => label.api,
        _ => driver,
    }
}

/// Whether a runtime forward for operation `op` is waiting on this thread: then a failure the
/// driver returns is the runtime's to judge (it may set up the thread's context and retry, as
/// `cudaMallocAsync` does on a new thread), and the forward records the result it returns.
pub fn runtime_pending(t: &Thread, op: Op) -> bool {
    t.label
        .get()
        .is_some_and(|label| !label.consumed && label.api.op() == op)
}

/// The kernel thread id, cached per thread.
#[inline]
pub fn thread_id(t: &Thread) -> u32 {
    let id = t.tid.get();
    if id != 0 {
        return id;
    }
    // SAFETY: gettid has no preconditions.
    let id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    t.tid.set(id);
    id
}

/// In a forked child: the cached id is the parent thread's.
pub fn forget_thread_id() {
    thread::with(|t| t.tid.set(0));
}
