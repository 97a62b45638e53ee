//! Per-thread state of the hook layer: the re-entrancy guard, the label a runtime forward
//! leaves for the driver wrapper below it, the library handle whose create (or use) call is
//! running, and the cached thread id.
//!
//! Only const-initialised `Cell`s without destructors: they need no allocation and no TLS
//! destructor registration, so they are safe from any thread at any time.

use std::cell::Cell;

use crate::api::{Api, Op};

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static LABEL: Cell<Option<Label>> = const { Cell::new(None) };
    static TID: Cell<u32> = const { Cell::new(0) };
    static OWNER: Cell<u64> = const { Cell::new(0) };
}

/// Set while a library's create call (or a call that names a handle) runs on this thread: the
/// blocks the driver hooks record meanwhile belong to the handle of this token
/// ([`crate::handles`]).
pub struct OwnerScope {
    previous: u64,
}

impl OwnerScope {
    pub fn set(token: u64) -> OwnerScope {
        OwnerScope {
            previous: OWNER.with(|o| o.replace(token)),
        }
    }
}

impl Drop for OwnerScope {
    fn drop(&mut self) {
        OWNER.with(|o| o.set(self.previous));
    }
}

/// The token of the handle whose call runs on this thread, if any.
pub fn owner() -> Option<u64> {
    Some(OWNER.with(Cell::get)).filter(|&t| t != 0)
}

/// Held while a driver wrapper runs; calls that arrive while one is held (the driver calling
/// its own exported functions, the unwinder, nested hooks) are forwarded without recording.
/// A copy of the shim that another copy records for never gets one: its wrappers only forward.
pub struct Guard(());

impl Guard {
    pub fn enter() -> Option<Guard> {
        if crate::process::passive() {
            return None;
        }
        DEPTH.with(|d| {
            if d.get() > 0 {
                None
            } else {
                d.set(1);
                Some(Guard(()))
            }
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(0));
    }
}

/// What a runtime forward (`cudaMalloc`) tells the driver wrapper it is about to reach.
#[derive(Clone, Copy)]
struct Label {
    api: Api,
    consumed: bool,
}

/// Set by a runtime forward for the duration of the real runtime call.
pub struct LabelScope {
    previous: Option<Label>,
}

impl LabelScope {
    pub fn set(api: Api) -> LabelScope {
        let previous = LABEL.with(|l| {
            l.replace(Some(Label {
                api,
                consumed: false,
            }))
        });
        LabelScope { previous }
    }

    /// Whether a driver wrapper below made the record (or the event) for this call.
    pub fn consumed(&self) -> bool {
        LABEL.with(|l| l.get().is_some_and(|l| l.consumed))
    }
}

impl Drop for LabelScope {
    fn drop(&mut self) {
        LABEL.with(|l| l.set(self.previous));
    }
}

/// The API name to record for a driver call of operation `op` made as `driver`: the pending
/// runtime label if it is for the same operation (and then it is used up), else `driver`.
pub fn label_for(op: Op, driver: Api) -> Api {
    LABEL.with(|l| match l.get() {
        Some(label) if !label.consumed && label.api.op() == op => {
            l.set(Some(Label {
                consumed: true,
                ..label
            }));
            label.api
        }
        _ => driver,
    })
}

/// Whether a runtime forward for operation `op` is waiting on this thread: then a failure the
/// driver returns is the runtime's to judge (it may set up the thread's context and retry, as
/// `cudaMallocAsync` does on a new thread), and the forward records the result it returns.
pub fn runtime_pending(op: Op) -> bool {
    LABEL.with(|l| {
        l.get()
            .is_some_and(|label| !label.consumed && label.api.op() == op)
    })
}

/// The kernel thread id, cached per thread.
pub fn thread_id() -> u32 {
    TID.with(|t| {
        let mut id = t.get();
        if id == 0 {
            // SAFETY: gettid has no preconditions.
            id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
            t.set(id);
        }
        id
    })
}

/// In a forked child: the cached id is the parent thread's.
pub fn forget_thread_id() {
    TID.with(|t| t.set(0));
}
