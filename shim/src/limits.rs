//! How deep a stack may be: the bounds several layers size their buffers and check the
//! configuration by (`config`, `stack`, `python`'s capture through `stack::with_python`).
//! A leaf: it uses nothing of the shim, so any layer may read it.

/// The deepest native stack `CUDALEAK_DEPTH` may ask for.
pub const MAX_DEPTH: usize = 256;

/// The deepest Python stack `CUDALEAK_PY_DEPTH` may ask for.
pub const MAX_PY_DEPTH: usize = 256;
