//! This thread's state in the shim, in one block: the hook layer's guard, label, library-handle
//! owner and thread id ([`crate::guard`]) and the critical-section words ([`crate::critical`]).
//!
//! Why one block: in a shared library every thread-local is found through a `__tls_get_addr`
//! call, with its own index word to load. A hook that looked up each of its thread-locals where
//! it used it made about ten such calls an allocation and free (valgrind, `bench --cold`): 132
//! instructions and 15 cache misses a pair where the driver's own work leaves the caches cold.
//! A hook now looks its thread up once ([`with`]) and hands the reference down.
//!
//! Only const-initialised cells without destructors: the block needs no allocation and no TLS
//! destructor registration, so it is safe to use from any thread at any time, signal handlers
//! included.

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU32};

use crate::api::Api;

/// One thread's state. The fields belong to the modules named on them, which alone read and
/// write them.
pub struct Thread {
    /// [`crate::guard::Guard`]: 1 while a hook of this thread records.
    pub(crate) depth: Cell<u32>,
    /// [`crate::guard::thread_id`]: the kernel's id, 0 until first asked.
    pub(crate) tid: Cell<u32>,
    /// [`crate::guard::OwnerScope`]: the token of the library handle whose call runs, or 0.
    pub(crate) owner: Cell<u64>,
    /// [`crate::guard::LabelScope`]: what a runtime forward tells the driver hook below it.
    pub(crate) label: Cell<Option<Label>>,
    /// [`crate::critical`]: the shim's locks this thread holds or waits for. Written by the
    /// thread only; atomic (plain loads and stores) because its signal handlers read it.
    pub(crate) locks: AtomicU32,
    /// [`crate::critical`]: a terminating signal that arrived while the thread held a lock.
    /// Written by the thread's signal handler, cleared by the thread.
    pub(crate) deferred: AtomicI32,
}

/// What a runtime forward (`cudaMalloc`) tells the driver wrapper it is about to reach
/// ([`crate::guard::LabelScope`], [`crate::guard::label_for`]).
#[derive(Clone, Copy)]
pub struct Label {
    pub(crate) api: Api,
    pub(crate) consumed: bool,
}

thread_local! {
    static THREAD: Thread = const {
        Thread {
            depth: Cell::new(0),
            tid: Cell::new(0),
            owner: Cell::new(0),
            label: Cell::new(None),
            locks: AtomicU32::new(0),
            deferred: AtomicI32::new(0),
        }
    };
}

/// Runs `f` with this thread's state: one thread-local lookup, however much `f` reads.
#[inline]
pub fn with<R>(f: impl FnOnce(&Thread) -> R) -> R {
    THREAD.with(f)
}

/// What drops a thread's own state of the shim at the thread's end (the walk cache, the Python
/// read plan): a pthread key's destructor, armed by the thread when it makes that state. The
/// state itself lives in a thread-local without drop glue (`ManuallyDrop`), so its first use
/// registers no thread-local destructor: glibc's `__cxa_thread_atexit_impl` holds the loader's
/// `dl_load_lock`, and a child forked at that instant hangs in `exit()`, which takes it
/// (`_dl_fini`). Neither making the key nor arming it takes a lock of the loader's.
pub struct ExitKey {
    key: std::sync::OnceLock<Option<libc::pthread_key_t>>,
    dtor: extern "C" fn(*mut std::ffi::c_void),
}

impl ExitKey {
    pub const fn new(dtor: extern "C" fn(*mut std::ffi::c_void)) -> ExitKey {
        ExitKey {
            key: std::sync::OnceLock::new(),
            dtor,
        }
    }

    /// The key, made the first time (the constructor makes it, before the program has threads
    /// that could fork meanwhile); None if none could be made: the state then stays until the
    /// process ends.
    pub fn make(&self) -> Option<libc::pthread_key_t> {
        *self.key.get_or_init(|| {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is a valid out-parameter; `dtor` has the signature pthread asks for.
            (unsafe { libc::pthread_key_create(&mut key, Some(self.dtor)) } == 0).then_some(key)
        })
    }

    /// This thread made its state: the destructor runs at its end.
    pub fn arm(&self) {
        if let Some(key) = self.make() {
            // SAFETY: a key pthread_key_create made; any non-null value makes its destructor
            // run.
            unsafe {
                libc::pthread_setspecific(key, std::ptr::NonNull::<u8>::dangling().as_ptr().cast())
            };
        }
    }
}

/// What an [`ExitKey`]'s destructor does: takes this thread's state out of `state` and drops it.
/// Nothing it calls panics; a panic would still stop here, not in the thread's exit.
pub fn drop_at_exit<T: 'static>(
    state: &'static std::thread::LocalKey<std::mem::ManuallyDrop<std::cell::RefCell<Option<T>>>>,
) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = state.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.take();
            }
        });
    }));
}
