//! Library handles (issue 24): the cuBLAS handles, cuDNN handles, cuFFT plans, cuRAND generators
//! … a program makes, from the create call that made each to its destroy, and the blocks the
//! library allocated for each one: those made on the creating thread while the create call ran,
//! or while a call that names the handle ran (`cufftMakePlan*`, `curandGenerate*`).
//!
//! The CLI judges them (a create site that keeps making handles nobody destroys leaks them);
//! this file only keeps the facts. Touched only by the libraries' create, use and destroy calls
//! and by allocations made during them, never by a plain allocation.
#![deny(unsafe_code)]

use std::collections::HashMap;

use crate::api::Space;
use crate::lock::{ForkLock, ForkLocked, Mutex};
use crate::stack::StackId;

/// The libraries whose handles are followed, by the name dumps give them.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Library {
    cublas,
    cublasLt,
    cudnn,
    cufft,
    curand,
    cusparse,
    cusolver,
    nccl,
}

impl Library {
    pub fn name(self) -> &'static str {
        match self {
            Library::cublas => "cublas",
            Library::cublasLt => "cublasLt",
            Library::cudnn => "cudnn",
            Library::cufft => "cufft",
            Library::curand => "curand",
            Library::cusparse => "cusparse",
            Library::cusolver => "cusolver",
            Library::nccl => "nccl",
        }
    }

    /// Where the real functions are when the global scope lacks them (a framework loaded the
    /// library with RTLD_LOCAL): its sonames, newest first.
    pub fn sonames(self) -> &'static [&'static std::ffi::CStr] {
        match self {
            Library::cublas => &[c"libcublas.so.13", c"libcublas.so.12", c"libcublas.so.11"],
            Library::cublasLt => &[
                c"libcublasLt.so.13",
                c"libcublasLt.so.12",
                c"libcublasLt.so.11",
            ],
            Library::cudnn => &[c"libcudnn.so.9", c"libcudnn.so.8"],
            Library::cufft => &[c"libcufft.so.12", c"libcufft.so.11", c"libcufft.so.10"],
            Library::curand => &[c"libcurand.so.10"],
            Library::cusparse => &[c"libcusparse.so.12", c"libcusparse.so.11"],
            Library::cusolver => &[c"libcusolver.so.12", c"libcusolver.so.11"],
            Library::nccl => &[c"libnccl.so.2"],
        }
    }

    /// What a hook returns when the real function cannot be found (which a program that called
    /// it and runs cannot meet): each library's "not initialized" status.
    pub fn not_found(self) -> std::ffi::c_int {
        match self {
            // CUBLAS_STATUS_NOT_INITIALIZED, CUSPARSE_…, CUSOLVER_…
            Library::cublas | Library::cublasLt | Library::cusparse | Library::cusolver => 1,
            Library::cudnn => 1001, // CUDNN_STATUS_NOT_INITIALIZED (cuDNN 9)
            Library::cufft => 7,    // CUFFT_SETUP_FAILED
            Library::curand => 203, // CURAND_STATUS_INITIALIZATION_FAILED
            Library::nccl => 3,     // ncclInternalError
        }
    }
}

/// A handle, from its create call on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handle {
    pub library: Library,
    /// The function that made it.
    pub create: &'static str,
    /// Its value; `None` while the create call runs.
    pub value: Option<u64>,
    pub stack: StackId,
    pub thread: u32,
    pub device: i16,
    pub seq: u64,
    pub time_ms: u32,
    /// (space, address, seq) of the blocks the library allocated for it.
    pub blocks: Vec<(Space, u64, u64)>,
    pub destroyed: bool,
}

/// Blocks one handle remembers before the freed ones are dropped from its list.
const BLOCKS_KEPT: usize = 64;

#[derive(Default)]
pub(crate) struct Inner {
    next_token: u64,
    /// Token → handle: being made, live, or destroyed with blocks still live.
    by_token: HashMap<u64, Handle>,
    /// (library, value) → token of the live handle.
    live: HashMap<(Library, u64), u64>,
}

#[derive(Default)]
pub struct Handles {
    inner: Mutex<Inner>,
}

impl Handles {
    /// A create call begins: the handle it will make, under a token (never 0).
    pub fn creating(&self, handle: Handle) -> u64 {
        let mut inner = self.inner.lock();
        inner.next_token += 1;
        let token = inner.next_token;
        inner.by_token.insert(token, handle);
        token
    }

    /// The create call of `token` returned `value` (`None` when it failed), on `device`.
    pub fn created(&self, token: u64, value: Option<u64>, device: i16) {
        let mut inner = self.inner.lock();
        let Some(value) = value else {
            inner.by_token.remove(&token);
            return;
        };
        let Some(h) = inner.by_token.get_mut(&token) else {
            return;
        };
        h.value = Some(value);
        h.device = device;
        let key = (h.library, value);
        // A value reused without a destroy we saw (the library freed it some other way): the
        // old handle is gone.
        if let Some(old) = inner.live.insert(key, token) {
            inner.by_token.remove(&old);
        }
    }

    /// The token of live handle `value` of `library`.
    pub fn token_of(&self, library: Library, value: u64) -> Option<u64> {
        self.inner.lock().live.get(&(library, value)).copied()
    }

    /// The library allocated block `addr` (sequence number `seq`) for the handle of `token`.
    /// `still_live` says whether a block it remembers is still live, for a handle whose list is
    /// full (called without this lock held).
    pub fn owns(
        &self,
        token: u64,
        space: Space,
        addr: u64,
        seq: u64,
        still_live: impl Fn(Space, u64, u64) -> bool,
    ) {
        let full = {
            let mut inner = self.inner.lock();
            let Some(h) = inner.by_token.get_mut(&token) else {
                return;
            };
            if h.blocks.len() < BLOCKS_KEPT {
                h.blocks.push((space, addr, seq));
                return;
            }
            h.blocks.clone()
        };
        let kept: Vec<_> = full
            .into_iter()
            .filter(|&(sp, a, s)| still_live(sp, a, s))
            .collect();
        let mut inner = self.inner.lock();
        if let Some(h) = inner.by_token.get_mut(&token) {
            h.blocks.retain(|b| kept.contains(b));
            if h.blocks.len() < BLOCKS_KEPT {
                h.blocks.push((space, addr, seq));
            }
        }
    }

    /// The program is destroying handle `value` of `library`: no longer found by its value (a
    /// handle made meanwhile may get it). The token of the handle, for [`Handles::destroy_finished`].
    pub fn destroy_started(&self, library: Library, value: u64) -> Option<u64> {
        self.inner.lock().live.remove(&(library, value))
    }

    /// The destroy call of handle `token` returned. Failed: the handle is live again. Succeeded:
    /// forgotten, unless some block the library allocated for it is still live (`still_live`,
    /// called without this lock held).
    pub fn destroy_finished(
        &self,
        token: u64,
        succeeded: bool,
        still_live: impl Fn(Space, u64, u64) -> bool,
    ) {
        let blocks = {
            let mut inner = self.inner.lock();
            let Some(h) = inner.by_token.get(&token) else {
                return;
            };
            if !succeeded {
                if let Some(value) = h.value {
                    let key = (h.library, value);
                    inner.live.entry(key).or_insert(token);
                }
                return;
            }
            h.blocks.clone()
        };
        let left: Vec<_> = blocks
            .into_iter()
            .filter(|&(sp, a, s)| still_live(sp, a, s))
            .collect();
        let mut inner = self.inner.lock();
        if left.is_empty() {
            inner.by_token.remove(&token);
        } else if let Some(h) = inner.by_token.get_mut(&token) {
            h.destroyed = true;
            h.blocks = left;
        }
    }

    /// Every handle made and not destroyed, and destroyed ones that left blocks, oldest first.
    pub fn snapshot(&self) -> Vec<Handle> {
        let inner = self.inner.lock();
        let mut all: Vec<Handle> = inner
            .by_token
            .values()
            .filter(|h| h.value.is_some())
            .cloned()
            .collect();
        all.sort_by_key(|h| h.seq);
        all
    }

    /// A forked child starts with none of its parent's handles (nor its blocks).
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.by_token.clear();
        inner.live.clear();
    }
}

impl ForkLocked for Handles {
    fn each_lock(&self, f: &mut dyn FnMut(&dyn ForkLock)) {
        f(&self.inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(library: Library) -> Handle {
        Handle {
            library,
            create: "cublasCreate_v2",
            value: None,
            stack: StackId(0),
            thread: 1,
            device: 0,
            seq: 1,
            time_ms: 0,
            blocks: Vec::new(),
            destroyed: false,
        }
    }

    #[test]
    fn a_handle_lives_from_its_create_to_its_destroy_with_its_blocks() {
        let h = Handles::default();
        let t = h.creating(handle(Library::cublas));
        h.owns(t, Space::Device, 0x1000, 2, |_, _, _| true);
        h.created(t, Some(0xabc), 0);
        assert_eq!(h.token_of(Library::cublas, 0xabc), Some(t));
        assert_eq!(h.token_of(Library::cufft, 0xabc), None);
        let snap = h.snapshot();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[0].blocks, vec![(Space::Device, 0x1000, 2)]);
        let token = h.destroy_started(Library::cublas, 0xabc).unwrap();
        h.destroy_finished(token, false, |_, _, _| false);
        assert_eq!(
            h.token_of(Library::cublas, 0xabc),
            Some(t),
            "a failed destroy keeps it"
        );
        let token = h.destroy_started(Library::cublas, 0xabc).unwrap();
        h.destroy_finished(token, true, |_, _, _| false);
        assert!(h.snapshot().is_empty());
    }

    #[test]
    fn a_failed_create_leaves_nothing_and_a_destroy_that_left_blocks_is_kept() {
        let h = Handles::default();
        let t = h.creating(handle(Library::cufft));
        h.created(t, None, -1);
        assert!(h.snapshot().is_empty());
        let t = h.creating(handle(Library::cufft));
        h.owns(t, Space::Device, 0x2000, 5, |_, _, _| true);
        h.owns(t, Space::Device, 0x3000, 6, |_, _, _| true);
        h.created(t, Some(1), 0);
        let token = h.destroy_started(Library::cufft, 1).unwrap();
        h.destroy_finished(token, true, |_, addr, _| addr == 0x3000);
        let snap = h.snapshot();
        assert!(snap[0].destroyed);
        assert_eq!(snap[0].blocks, vec![(Space::Device, 0x3000, 6)]);
        // Destroyed: no longer found by its value.
        assert_eq!(h.token_of(Library::cufft, 1), None);
    }

    #[test]
    fn a_full_block_list_drops_the_freed_ones() {
        let h = Handles::default();
        let t = h.creating(handle(Library::curand));
        h.created(t, Some(9), 0);
        for i in 0..BLOCKS_KEPT as u64 {
            h.owns(t, Space::Device, 0x1000 + i, i, |_, _, _| true);
        }
        // Only the last one remembered is still live.
        let last = BLOCKS_KEPT as u64 - 1;
        h.owns(t, Space::Device, 0x9000, 99, |_, _, seq| seq == last);
        let blocks = &h.snapshot()[0].blocks;
        assert_eq!(
            blocks,
            &vec![
                (Space::Device, 0x1000 + last, last),
                (Space::Device, 0x9000, 99)
            ]
        );
    }
}
