//! Links the shim with `-Bsymbolic`: inside the library, its own functions are its own.
//! Preloaded it comes first and nothing changes; loaded by `cudaleak attach` (dlopen, after the
//! driver is in the global scope) the address of its hook `cuMemAlloc_v2` would otherwise be the
//! driver's function of that name, and every hook would take itself for the real function.
//!
//! `-Bsymbolic` rather than `-Bsymbolic-functions`, which `zig cc` (the wheel's linker,
//! scripts/wheel.sh) refuses: the shim exports functions only (the `dynamic_symbols` test checks
//! it), so the two bind the same symbols.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
}
