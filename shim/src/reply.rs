//! How the shim's exported C functions answer: a value (0 where there is nothing else to say),
//! or -1 with `errno` set, as the C library's own functions do. One place for the convention,
//! which depends on nothing else of the shim, so that any module can export a function.

use std::ffi::c_int;

/// The answer to a call that ran inside [`crate::state::shield`]: its value, or -1 with `errno`
/// set to its error; `EIO` where the shield caught a panic (`None`).
pub fn answer(r: Option<Result<c_int, c_int>>) -> c_int {
    match r {
        Some(Ok(v)) => v,
        Some(Err(errno)) => fail(errno),
        None => fail(libc::EIO),
    }
}

/// -1, with `errno` set to `errno`.
pub fn fail(errno: c_int) -> c_int {
    // SAFETY: __errno_location returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = errno };
    -1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> c_int {
        // SAFETY: as in `fail`.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn an_answer_is_its_value_or_minus_one_with_errno_set() {
        assert_eq!(answer(Some(Ok(7))), 7);
        assert_eq!(answer(Some(Err(libc::EEXIST))), -1);
        assert_eq!(errno(), libc::EEXIST);
        assert_eq!(answer(None), -1);
        assert_eq!(errno(), libc::EIO, "a caught panic");
        assert_eq!(fail(libc::EINVAL), -1);
        assert_eq!(errno(), libc::EINVAL);
    }
}
