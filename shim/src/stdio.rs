//! The program's standard descriptors are the program's: the shim never takes fd 0, 1 or 2 for
//! its own files or pipes, and writes its one line to stderr only if fd 2 is still the file the
//! program started with, without ever letting SIGPIPE or EPIPE from that write reach the program.
//!
//! Why: a program started with fd 2 closed would otherwise get the shim's pipe or dump file as
//! its stderr (its own writes corrupting ours, or ours landing in a file it opened later), and a
//! program whose stderr reader has gone (`app 2>&1 | head`) would die of SIGPIPE at exit where it
//! would have exited normally.

use std::ffi::c_int;
use std::fs::File;
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// fd 2's device and inode when the shim loaded, folded into one value; 0 when fd 2 was closed.
static STDERR_ID: AtomicU64 = AtomicU64::new(0);

fn identity(fd: c_int) -> u64 {
    // SAFETY: st is a valid stat buffer; fstat on any integer is safe (EBADF if not open).
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return 0;
        }
        // Never 0 for an open file: st_ino is never 0 on Linux filesystems.
        (st.st_dev ^ st.st_ino.rotate_left(32)) | 1
    }
}

/// Remembers what fd 2 is. Called once, from the constructor, before anything is written.
pub fn init() {
    STDERR_ID.store(identity(2), Ordering::Release);
}

/// Writes `line` to stderr if fd 2 is still the file it was when the shim loaded. A reader that
/// has gone costs the line, nothing else: SIGPIPE is blocked on this thread for the write, and
/// one it raised is taken off the thread before the mask is restored.
pub fn say(line: &str) {
    let id = STDERR_ID.load(Ordering::Acquire);
    if id == 0 || identity(2) != id {
        return;
    }
    // SAFETY: sigset_t values are initialised by sigemptyset/sigaddset before use; every call is
    // a plain libc call on valid pointers, and the mask is restored on every path.
    unsafe {
        let mut pipe_only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe_only);
        libc::sigaddset(&mut pipe_only, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, &pipe_only, &mut old) != 0 {
            return;
        }
        // A SIGPIPE already pending for the program is the program's: leave it.
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut pending);
        let was_pending = libc::sigismember(&pending, libc::SIGPIPE) == 1;

        let errno = *libc::__errno_location();
        let mut rest = line.as_bytes();
        let mut broken = false;
        while !rest.is_empty() {
            let n = libc::write(2, rest.as_ptr().cast(), rest.len());
            if n > 0 {
                rest = &rest[n as usize..];
            } else if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            } else {
                broken = n < 0 && *libc::__errno_location() == libc::EPIPE;
                break;
            }
        }
        if broken && !was_pending {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&pipe_only, std::ptr::null_mut(), &zero);
        }
        *libc::__errno_location() = errno;
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Moves `fd` above the standard descriptors (close-on-exec), closing the original; returns it
/// unchanged when it is already above 2, and -1 (having closed it) if it cannot be moved.
pub fn above_stdio(fd: RawFd) -> RawFd {
    if !(0..=2).contains(&fd) {
        return fd;
    }
    // SAFETY: fd is a descriptor this crate just created and owns; F_DUPFD_CLOEXEC duplicates it
    // to the lowest free number ≥ 3, and the original is closed exactly once.
    unsafe {
        let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        libc::close(fd);
        moved
    }
}

/// [`above_stdio`] for a file the shim opened.
pub fn file_above_stdio(file: File) -> std::io::Result<File> {
    let fd = above_stdio(file.into_raw_fd());
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}
