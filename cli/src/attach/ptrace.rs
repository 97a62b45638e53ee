//! Making one thread of another process call a function, as gdb's `call` and heaptrack's
//! injector do: the thread is seized and interrupted (`PTRACE_SEIZE`, `PTRACE_INTERRUPT`; the
//! other threads run on), its registers and its whole FPU/vector state saved, a call frame built
//! below its stack's red zone whose return address is 0, and the thread resumed at the function;
//! it comes back as a SIGSEGV stop at address 0 with the result in rax. Then every register is
//! put back as it was and the thread let go: the fault is never delivered.
//!
//! A thread stopped inside a system call: `orig_rax` is set to -1 for the call, so the kernel does
//! not restart the interrupted system call at the new instruction pointer; the saved registers,
//! restored at the end, carry the restart (the system call goes on as if it had been interrupted
//! by a signal with SA_RESTART).
//!
//! The thread's errno is put back as well: the called functions set it (dlopen's search leaves
//! ENOENT), and the program may be about to read it.
//!
//! A call cannot be taken back half-way (the thread would return into our frame without us), so
//! its wait goes on through Ctrl-C; it says once, on stderr, that it does and why, and again if
//! the call takes more than 10 s.
//!
//! The only file of the CLI with `unsafe`: every block calls ptrace or waitpid with buffers it
//! owns. x86-64 only; elsewhere [`supported`] is false and nothing here is called.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The flag the CLI's Ctrl-C and SIGTERM handler sets (`attach::stop_flag`): a call in flight
/// says that it finishes first.
static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Makes calls in flight answer `flag` (set by Ctrl-C).
pub fn answer_interrupts(flag: Arc<AtomicBool>) {
    let _ = INTERRUPTED.set(flag);
}

/// Whether this build can inject.
pub const fn supported() -> bool {
    cfg!(all(target_arch = "x86_64", target_os = "linux"))
}

const PTRACE_EVENT_STOP: i32 = 128;
const NT_PRSTATUS: usize = 1;
const NT_X86_XSTATE: usize = 0x202;
const NT_PRFPREG: usize = 2;
/// Room for the largest XSAVE area (AVX-512 and AMX tiles: under 12 KiB).
const XSTATE_BYTES: usize = 16 * 1024;

/// Why a call did not complete.
#[derive(Debug)]
pub enum CallError {
    /// ptrace itself failed (EPERM: not allowed to trace; ESRCH: gone).
    Ptrace(&'static str, io::Error),
    /// The process ended while the thread was in our call.
    Ended,
    /// The called function faulted (at this address) instead of returning.
    Crashed(u64),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Ptrace(what, e) => write!(f, "{what}: {e}"),
            CallError::Ended => f.write_str("the process ended during the call"),
            CallError::Crashed(at) => write!(f, "the called function faulted at {at:#x}"),
        }
    }
}

fn last(what: &'static str) -> CallError {
    CallError::Ptrace(what, io::Error::last_os_error())
}

/// A thread of another process, seized and stopped; let go (registers restored) when dropped.
pub struct Tracee {
    pid: u32,
    tid: i32,
    regs: libc::user_regs_struct,
    fpu: Vec<u8>,
    /// Which register set `fpu` holds.
    fpu_kind: usize,
    /// A signal that arrived while stopping the thread, delivered when it is let go.
    pending: i32,
    /// The thread was found in a group stop (SIGSTOP, SIGTSTP …): its process is stopped.
    group_stopped: bool,
    /// Where the thread's errno lives and what it held, put back when it is let go.
    errno: Option<(u64, [u8; 4])>,
    mem: File,
}

fn wait(tid: i32) -> Result<i32, CallError> {
    let mut status: i32 = 0;
    loop {
        // SAFETY: waitpid writes the status into a local.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
        if r == tid {
            return Ok(status);
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(last("waitpid"));
        }
    }
}

/// [`wait`] for a thread running an injected call (`what`): polled, so that Ctrl-C and a long
/// call are answered on stderr while the wait goes on.
fn wait_for_call(tid: i32, what: &str) -> Result<i32, CallError> {
    let start = Instant::now();
    let (mut said_interrupt, mut said_slow) = (false, false);
    let mut nap = Duration::from_micros(20);
    loop {
        let mut status: i32 = 0;
        // SAFETY: waitpid writes the status into a local.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
        if r == tid {
            return Ok(status);
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(last("waitpid"));
        }
        if !said_interrupt && INTERRUPTED.get().is_some_and(|f| f.load(Ordering::Relaxed)) {
            said_interrupt = true;
            crate::say!(
                "interrupted: the thread borrowed from the program is {what}, which cannot be \
                 taken back half-way; cudaleak finishes it, puts the thread back, then stops"
            );
        }
        if !said_slow && start.elapsed() > Duration::from_secs(10) {
            said_slow = true;
            crate::say!(
                "still waiting for the thread borrowed from the program ({what}, 10 s so far): \
                 it waits for something another thread of the program holds (a stopped \
                 program continues with `kill -CONT`)"
            );
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(5));
    }
}

fn ptrace(request: libc::c_uint, tid: i32, addr: usize, data: usize) -> i64 {
    // SAFETY: every request made here passes either 0 or a pointer to a buffer owned by the
    // caller, of the size the request reads or writes (an iovec for the register sets).
    unsafe {
        libc::ptrace(
            request,
            tid,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    }
}

fn get_regset(tid: i32, kind: usize, buf: &mut [u8]) -> Option<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    (ptrace(
        libc::PTRACE_GETREGSET,
        tid,
        kind,
        &mut iov as *mut libc::iovec as usize,
    ) == 0)
        .then_some(iov.iov_len)
}

fn set_regset(tid: i32, kind: usize, buf: &[u8]) -> bool {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    ptrace(
        libc::PTRACE_SETREGSET,
        tid,
        kind,
        &mut iov as *mut libc::iovec as usize,
    ) == 0
}

fn regs_bytes(r: &libc::user_regs_struct) -> &[u8] {
    // SAFETY: user_regs_struct is plain integers with no padding; viewed as its bytes.
    unsafe {
        std::slice::from_raw_parts(
            (r as *const libc::user_regs_struct).cast::<u8>(),
            size_of::<libc::user_regs_struct>(),
        )
    }
}

fn get_regs(tid: i32) -> Result<libc::user_regs_struct, CallError> {
    // SAFETY: user_regs_struct is plain integers, for which all-zero is valid.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: (&mut r as *mut libc::user_regs_struct).cast(),
        iov_len: size_of::<libc::user_regs_struct>(),
    };
    if ptrace(
        libc::PTRACE_GETREGSET,
        tid,
        NT_PRSTATUS,
        &mut iov as *mut libc::iovec as usize,
    ) != 0
    {
        return Err(last("PTRACE_GETREGSET"));
    }
    Ok(r)
}

/// The thread's whole FPU and vector state, and which register set holds it.
fn get_fpu(tid: i32) -> (Vec<u8>, usize) {
    let mut fpu = vec![0u8; XSTATE_BYTES];
    let (kind, len) = match get_regset(tid, NT_X86_XSTATE, &mut fpu) {
        Some(n) => (NT_X86_XSTATE, n),
        None => (
            NT_PRFPREG,
            get_regset(tid, NT_PRFPREG, &mut fpu).unwrap_or(0),
        ),
    };
    fpu.truncate(len);
    (fpu, kind)
}

fn set_regs(tid: i32, r: &libc::user_regs_struct) -> Result<(), CallError> {
    if set_regset(tid, NT_PRSTATUS, regs_bytes(r)) {
        Ok(())
    } else {
        Err(last("PTRACE_SETREGSET"))
    }
}

impl Tracee {
    /// Seizes thread `tid` of process `pid` and stops it.
    pub fn seize(pid: u32, tid: i32) -> Result<Tracee, CallError> {
        if ptrace(libc::PTRACE_SEIZE, tid, 0, 0) != 0 {
            return Err(last("PTRACE_SEIZE"));
        }
        let mem = match File::options()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
        {
            Ok(f) => f,
            Err(e) => {
                ptrace(libc::PTRACE_DETACH, tid, 0, 0);
                return Err(CallError::Ptrace("open /proc/PID/mem", e));
            }
        };
        if ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) != 0 {
            let e = last("PTRACE_INTERRUPT");
            ptrace(libc::PTRACE_DETACH, tid, 0, 0);
            return Err(e);
        }
        let status = wait(tid)?;
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return Err(CallError::Ended);
        }
        // A stop of our interrupt, a group stop (the process was stopped), or a signal that
        // arrived first: the thread is stopped either way; such a signal is delivered when the
        // thread is let go.
        let event_stop = (status >> 16) == PTRACE_EVENT_STOP;
        let pending = if event_stop {
            0
        } else {
            libc::WSTOPSIG(status)
        };
        let group_stopped = event_stop
            && matches!(
                libc::WSTOPSIG(status),
                libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
            );
        let regs = match get_regs(tid) {
            Ok(r) => r,
            Err(e) => {
                ptrace(libc::PTRACE_DETACH, tid, 0, pending as usize);
                return Err(e);
            }
        };
        let (fpu, fpu_kind) = get_fpu(tid);
        Ok(Tracee {
            pid,
            tid,
            regs,
            fpu,
            fpu_kind,
            pending,
            group_stopped,
            errno: None,
            mem,
        })
    }

    /// The thread's registers when it was stopped.
    pub fn regs(&self) -> &libc::user_regs_struct {
        &self.regs
    }

    /// Whether the thread's process was stopped (SIGSTOP, Ctrl-Z) when it was seized.
    pub fn group_stopped(&self) -> bool {
        self.group_stopped
    }

    /// Notes the thread's errno (`errno_location`: the C library's `__errno_location`, called on
    /// the thread), to be put back when the thread is let go.
    pub fn keep_errno(&mut self, errno_location: u64) -> Result<(), CallError> {
        let at = self.call(errno_location, &[], &[], "finding its errno")?;
        let value = self
            .read(at, 4)
            .ok()
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .ok_or(CallError::Crashed(at))?;
        self.errno = Some((at, value));
        Ok(())
    }

    /// Lets the thread run on, one instruction at a time, until it returns to `ret` with its
    /// stack pointer at `sp` (out of the C library call it was stopped in, to the program's code
    /// that made it), for at most `limit`. Whether it got there; either way the thread is
    /// stopped again, and what is put back when it is let go is where it is now.
    ///
    /// The stepping stops before a `syscall` instruction: a system call made while stepped
    /// leaves a trap signal queued at its end, which would kill the program once it is let
    /// go. A signal that arrives meanwhile is delivered (its handler is stepped through).
    pub fn step_out(&mut self, ret: u64, sp: u64, limit: Duration) -> Result<bool, CallError> {
        const SYSCALL: [u8; 2] = [0x0f, 0x05];
        const TF: u64 = 0x100;
        let start = Instant::now();
        // A signal that arrived as the thread was stopped goes with the first step.
        let mut deliver = std::mem::take(&mut self.pending);
        let mut rip = self.regs.rip;
        let reached = loop {
            if self.read(rip, 2).map_or(true, |b| b == SYSCALL) {
                self.pending = deliver;
                break false;
            }
            if ptrace(libc::PTRACE_SINGLESTEP, self.tid, 0, deliver as usize) != 0 {
                return Err(last("PTRACE_SINGLESTEP"));
            }
            deliver = 0;
            // One instruction that is not a system call ends at once: waited for without a
            // limit, so that no step is left pending (its trap would outlive us).
            let status = wait(self.tid)?;
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                return Err(CallError::Ended);
            }
            if (status >> 16) == PTRACE_EVENT_STOP {
                // The process was stopped meanwhile: it stays so, and the thread is not taken.
                self.group_stopped = true;
                break false;
            }
            let sig = libc::WSTOPSIG(status);
            if sig != libc::SIGTRAP {
                deliver = sig;
                if start.elapsed() >= limit {
                    self.pending = deliver;
                    break false;
                }
                continue;
            }
            let now = get_regs(self.tid)?;
            if now.rip == ret && now.rsp == sp {
                break true;
            }
            rip = now.rip;
            if start.elapsed() >= limit {
                break false;
            }
        };
        // The trap flag as the program had it, never the stepping's.
        let tf = self.regs.eflags & TF;
        self.regs = get_regs(self.tid)?;
        self.regs.eflags = (self.regs.eflags & !TF) | tf;
        (self.fpu, self.fpu_kind) = get_fpu(self.tid);
        Ok(reached)
    }

    /// The thread's stack pointer when it was stopped.
    fn stack_pointer(&self) -> u64 {
        self.regs.rsp
    }

    /// Reads `len` bytes at `addr` of the process.
    pub fn read(&self, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        let n = self.mem.read_at(&mut buf, addr)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// A NUL-terminated string at `addr` (at most 4 KiB).
    pub fn read_c_string(&self, addr: u64) -> Option<String> {
        let bytes = self.read(addr, 4096).ok()?;
        let end = bytes.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    /// Calls `function(args…)` (up to 6 integer or pointer arguments) on the thread, with
    /// `data` copied below its stack (`args` may refer to it: `DATA` + offset is replaced by the
    /// copy's address). Returns rax. The thread's registers are restored afterwards either way.
    /// `what` names the call for the messages said while it runs.
    pub fn call(
        &mut self,
        function: u64,
        args: &[Arg],
        data: &[u8],
        what: &str,
    ) -> Result<u64, CallError> {
        let result = self.call_inner(function, args, data, what);
        let restored = self.restore();
        match (result, restored) {
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
            (Ok(v), Ok(())) => Ok(v),
        }
    }

    fn call_inner(
        &mut self,
        function: u64,
        args: &[Arg],
        data: &[u8],
        what: &str,
    ) -> Result<u64, CallError> {
        // Below the red zone (128 bytes) and whatever the thread was about to push.
        let data_at = (self.stack_pointer() - 1024 - data.len() as u64) & !15;
        let sp = data_at - 16 - 8; // 8 mod 16 at entry, as after a `call`
        self.mem
            .write_all_at(data, data_at)
            .and_then(|()| self.mem.write_all_at(&0u64.to_ne_bytes(), sp))
            .map_err(|e| CallError::Ptrace("write /proc/PID/mem", e))?;
        let mut r = self.regs;
        let value = |a: &Arg| match *a {
            Arg::Value(v) => v,
            Arg::Data(offset) => data_at + offset as u64,
        };
        let mut slots = [0u64; 6];
        for (slot, a) in slots.iter_mut().zip(args) {
            *slot = value(a);
        }
        [r.rdi, r.rsi, r.rdx, r.rcx, r.r8, r.r9] = slots;
        r.rsp = sp;
        r.rip = function;
        r.rax = 0;
        r.orig_rax = u64::MAX; // no system call restart at the new rip
        set_regs(self.tid, &r)?;
        let mut deliver = 0;
        loop {
            if ptrace(libc::PTRACE_CONT, self.tid, 0, deliver as usize) != 0 {
                return Err(last("PTRACE_CONT"));
            }
            deliver = 0;
            let status = wait_for_call(self.tid, what)?;
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                return Err(CallError::Ended);
            }
            if (status >> 16) == PTRACE_EVENT_STOP {
                // A late interrupt, or the process stopped (SIGSTOP) during the call: the call
                // goes on (it cannot be taken back); the other threads stay stopped until the
                // program is continued.
                continue;
            }
            let sig = libc::WSTOPSIG(status);
            if sig == libc::SIGSEGV {
                let now = get_regs(self.tid)?;
                if now.rip == 0 {
                    return Ok(now.rax);
                }
                return Err(CallError::Crashed(now.rip));
            }
            // Another signal for this thread during the call: its handler runs now, on top of
            // our frame, as it would have on top of any other.
            deliver = sig;
        }
    }

    fn restore(&mut self) -> Result<(), CallError> {
        set_regs(self.tid, &self.regs)?;
        if !self.fpu.is_empty() && !set_regset(self.tid, self.fpu_kind, &self.fpu) {
            return Err(last("PTRACE_SETREGSET (FPU)"));
        }
        Ok(())
    }

    /// The process this thread belongs to.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if let Some((at, value)) = self.errno {
            let _ = self.mem.write_all_at(&value, at);
        }
        let _ = self.restore();
        ptrace(libc::PTRACE_DETACH, self.tid, 0, self.pending as usize);
    }
}

/// An argument of an injected call.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    Value(u64),
    /// The address of the copied data, plus this offset.
    Data(usize),
}
