//! Whether a code object may have been freed since a walk: CPython 3.12+'s code watchers
//! (`PyCode_AddWatcher`) call [`cudaleak_code_event`] as the interpreter makes and frees each
//! code object, and every event but a creation moves [`FREED`] on.
//!
//! What it is for: a frame of this thread's live chain holds a strong reference to its code
//! object, so the object a frame names is alive while the walk reads it. If no code object was
//! freed since the walk that remembered a step (the count did not move), the object at the
//! address the frame names now is the one that step read: no other object can have been made at
//! that address. The walk then trusts the step without reading the code object's key
//! (walk.rs's [`Memo`](super::walk)): four loads from another cache line a frame, cold after the
//! driver's call.
//!
//! The Python bootstrap (`python/cudaleak/_bootstrap.py`) adds the watcher with the interpreter's
//! own function, holding the GIL, then names the interpreter it watches with
//! [`cudaleak_code_watched`]. A walk trusts the count only on a thread whose state belongs to that
//! interpreter: a subinterpreter's code objects are watched by its own list, not ours. Before the
//! interpreter is named, and on an interpreter that is not, [`generation`] is 0, which no memo
//! trusts.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::Registry;

/// `PY_CODE_EVENT_CREATE` of `PyCodeEvent` (3.12+: `PY_FOREACH_CODE_EVENT` makes CREATE, then
/// DESTROY).
const CREATE: c_int = 0;

/// The interpreter (`PyInterpreterState *`) whose code objects are watched; 0 for none.
static WATCHED: AtomicUsize = AtomicUsize::new(0);
/// The registry a free is forgotten in: the state's, once it is made ([`forget_in`]).
static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());
/// Moved on by every event of the watched interpreter but a creation; 1 or more once the
/// interpreter is named, so 0 is never a watched generation.
static FREED: AtomicU64 = AtomicU64::new(0);

/// The watcher's callback, `int (*)(PyCodeEvent event, PyCodeObject *code)`: called by the
/// interpreter, with the GIL held, as it makes or frees a code object. A free moves the count on
/// before the object's memory goes back. Always 0 (no Python exception set): nothing here can
/// fail, allocate or block.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_code_event(event: c_int, code: *mut c_void) -> c_int {
    if event != CREATE {
        // The registry first: a walk that reads the moved count finds the address forgotten.
        forget(code as usize);
        FREED.fetch_add(1, Ordering::Release);
    }
    0
}

/// The registry the watcher's frees are forgotten in (the state's, which lives as long as the
/// process).
pub fn forget_in(registry: &'static Registry) {
    REGISTRY.store(
        registry as *const Registry as *mut Registry,
        Ordering::Release,
    );
}

fn registry() -> Option<&'static Registry> {
    // SAFETY: null, or the `'static` registry `forget_in` was given.
    unsafe { REGISTRY.load(Ordering::Acquire).as_ref() }
}

/// The registry forgets the code object at `code`, under the thread's re-entrancy guard where it
/// can be had (a hook in a signal handler on this thread then passes through rather than wait for
/// the registry's lock held here). Nothing it calls panics; a panic would still stop here, not in
/// the interpreter.
fn forget(code: usize) {
    if WATCHED.load(Ordering::Acquire) == 0 {
        return; // nothing trusts the registry's entries yet: the naming clears them
    }
    let Some(registry) = registry() else {
        return;
    };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        crate::thread::with(|t| {
            let _guard = crate::guard::Guard::enter(t);
            registry.forget(code);
        })
    }));
}

/// Names `interp` (the `PyInterpreterState *` the bootstrap's `PyCode_AddWatcher` added
/// [`cudaleak_code_event`] to) as the interpreter whose frees are counted. Returns 0, or -1 with
/// `errno`: `EINVAL` for a null pointer, `EEXIST` when another interpreter was named already (the
/// first stays; naming the same one again does nothing).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn cudaleak_code_watched(interp: *mut c_void) -> c_int {
    match name(interp as usize) {
        Ok(()) => 0,
        Err(errno) => crate::reply::fail(errno),
    }
}

fn name(interp: usize) -> Result<(), c_int> {
    if interp == 0 {
        return Err(libc::EINVAL);
    }
    // The count leaves 0 before the interpreter is named: a walk that sees it named reads a
    // count a memo made before the watcher was added (0) never had.
    FREED.fetch_max(1, Ordering::Release);
    match WATCHED.compare_exchange(0, interp, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // What the registry met before: a code object freed before the watcher was added
            // was never forgotten. From here on every free is.
            if let Some(registry) = registry() {
                let _ = catch_unwind(AssertUnwindSafe(|| registry.forget_all()));
            }
            Ok(())
        }
        Err(named) if named == interp => Ok(()),
        Err(_) => Err(libc::EEXIST),
    }
}

/// The count of frees for a walk of a thread whose state belongs to `interp`: 0 (trust nothing)
/// unless that interpreter's code objects are watched. Read before the walk reads any frame.
#[inline]
pub(super) fn generation(interp: usize) -> u64 {
    if interp == 0 || WATCHED.load(Ordering::Acquire) != interp {
        return 0;
    }
    FREED.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::python::CodeKey;

    fn met(registry: &Registry, code: usize) {
        let key = CodeKey {
            code,
            ..CodeKey::default()
        };
        registry.inner.lock().ids.insert(code, (key, 0));
    }

    fn knows(registry: &Registry, code: usize) -> bool {
        registry.inner.lock().ids.contains_key(&code)
    }

    // The statics are the process's: one test walks through every step in order.
    #[test]
    fn only_the_named_interpreter_is_trusted_and_every_free_moves_the_count() {
        let registry: &'static Registry = Box::leak(Box::default());
        forget_in(registry);
        met(registry, 0x7100_0000);
        let interp = 0x7f00_0000_1000;
        assert_eq!(generation(interp), 0, "nothing named yet");
        assert_eq!(cudaleak_code_event(1, 0x7100_0000 as *mut c_void), 0);
        assert_eq!(
            generation(interp),
            0,
            "a free before the naming is not trusted"
        );
        assert!(knows(registry, 0x7100_0000), "nothing forgotten before");
        assert_eq!(name(0), Err(libc::EINVAL));
        name(interp).unwrap();
        assert!(
            !knows(registry, 0x7100_0000),
            "what was met before the naming is forgotten: its free went unseen"
        );
        let g = generation(interp);
        assert!(g >= 1, "a watched generation is never 0");
        assert_eq!(generation(interp + 8), 0, "another interpreter");
        assert_eq!(generation(0), 0);
        assert_eq!(name(interp + 8), Err(libc::EEXIST));
        name(interp).unwrap();
        assert_eq!(generation(interp), g, "naming it again changes nothing");
        met(registry, 0x7200_0000);
        met(registry, 0x7300_0000);
        cudaleak_code_event(CREATE, 0x7200_0000 as *mut c_void);
        assert_eq!(generation(interp), g, "a creation frees nothing");
        assert!(knows(registry, 0x7200_0000));
        cudaleak_code_event(1, 0x7200_0000 as *mut c_void);
        assert_eq!(generation(interp), g + 1);
        assert!(!knows(registry, 0x7200_0000), "a free is forgotten");
        assert!(knows(registry, 0x7300_0000), "and nothing else");
    }
}
