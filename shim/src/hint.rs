//! Hints to the processor's caches, for the hot path. A hint changes no value the program or the
//! shim sees and cannot fault, so its users stay safe Rust (the table, which `forbid`s unsafe
//! blocks of its own, asks for its ring's next slot here).

/// Asks for the cache line at `p` in a state to be written (x86-64's `prefetchw`); nothing
/// elsewhere.
#[inline]
pub fn prefetch_for_write<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` is a hint: it reads nothing the program sees, cannot fault, and
    // touches no register or flag; where a processor lacks it, its encoding is a NOP. (The
    // intrinsic's _MM_HINT_ET0 is lowered to a plain read prefetch without the prfchw feature.)
    unsafe {
        std::arch::asm!(
            "prefetchw [{}]",
            in(reg) std::ptr::from_ref(p),
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
