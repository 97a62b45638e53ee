//! Whether a stopped thread of another process may be borrowed for a call. The call is `dlopen`
//! (then the shim's own entry points), which allocates and takes the loader's locks: a thread
//! stopped inside malloc and made to call it corrupts the heap, and one holding the loader's or
//! the allocator's lock waits forever on itself. So a thread is borrowed only where its stack
//! shows it inside none of the libraries whose locks and half-done state the call would meet:
//! the C library (allocator, stdio), the loader, libpthread and libdl of older glibc, libgcc's
//! unwinder, and the shim.
//!
//! The stack is unwound remotely with each module's `.eh_frame`, read from the process's memory
//! as the process has it mapped (through its `PT_GNU_EH_FRAME` table), never from files that
//! may have changed since. It is safe when no frame is in those libraries but for two runs:
//! - its base: the C library's frames below the program's first (`__libc_start_main`,
//!   `start_thread`, `clone3`), which hold nothing;
//! - innermost, a blocking call the program made into the C library and is waiting in (`poll`,
//!   `nanosleep`, `pthread_cond_wait` …: they hold none of its locks while they wait), entered
//!   from outside it.
//!
//! Whatever cannot be unwound (code without unwind tables, a signal frame, an expression rule)
//! is not safe: the caller lets the thread run on and looks again.
//!
//! Reads only; never stops or resumes a thread (the caller does).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EhFrameOffset, NativeEndian, Pointer,
    RegisterRule, UnwindContext, UnwindSection,
};

use super::elf;
use super::target::{self, Mapping};

/// The C library's functions a program waits in while holding none of the library's locks:
/// a thread found inside one of these, called from outside the library, may be borrowed.
pub const BLOCKING: &[&str] = &[
    "poll",
    "ppoll",
    "select",
    "pselect",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "nanosleep",
    "clock_nanosleep",
    "usleep",
    "sleep",
    "pause",
    "sigsuspend",
    "sigtimedwait",
    "sigwaitinfo",
    "sigwait",
    "read",
    "readv",
    "write",
    "writev",
    "recv",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "accept",
    "accept4",
    "connect",
    "wait",
    "waitpid",
    "wait3",
    "wait4",
    "waitid",
    "ioctl",
    "sched_yield",
    "syscall",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "pthread_join",
    "pthread_timedjoin_np",
    "pthread_clockjoin_np",
    "pthread_mutex_lock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_barrier_wait",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "msgrcv",
    "semop",
    "semtimedop",
    "mq_receive",
    "mq_timedreceive",
];

/// The libraries a borrowed thread must not be inside.
pub fn is_guarded(path: &str) -> bool {
    let name = target::file_name(path);
    target::is_libc(path)
        || target::is_libdl(path)
        || target::is_shim(path)
        || name.starts_with("ld-linux")
        || name.starts_with("ld64.so")
        || (name.starts_with("ld-2.") && name.ends_with(".so"))
        || name.starts_with("libpthread.so")
        || (name.starts_with("libpthread-2.") && name.ends_with(".so"))
        || name.starts_with("libgcc_s.so")
}

/// One frame of an unwound stack: the address looked up (a return address less one, but for
/// the innermost), the start of the function holding it, its module, and its canonical frame
/// address (the stack pointer once it has returned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub pc: u64,
    pub function: u64,
    pub cfa: u64,
    pub module: String,
    pub guarded: bool,
}

/// Why a thread may not be borrowed where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsafe {
    /// Where the thread is, for the refusal's message.
    pub why: String,
    /// Where it will be safe, when only the call it is running in stands in the way: the
    /// return address into the program's code and the stack pointer there.
    pub exit: Option<(u64, u64)>,
}

impl Unsafe {
    fn at(why: String) -> Unsafe {
        Unsafe { why, exit: None }
    }
}

/// Judges an unwound stack (innermost frame first). `in_syscall`: the thread was stopped in a
/// system call; `blocking`: the start addresses of the [`BLOCKING`] functions.
pub fn judge(frames: &[Frame], in_syscall: bool, blocking: &[u64]) -> Result<(), Unsafe> {
    let inner = frames.iter().take_while(|f| f.guarded).count();
    let rest = &frames[inner..];
    let mut end = rest.len();
    // The program's entry (`_start`), below the C library's start.
    if end >= 2 && !rest[end - 1].guarded && rest[end - 2].guarded {
        end -= 1;
    }
    while end > 0 && rest[end - 1].guarded {
        end -= 1;
    }
    if let Some(f) = rest[..end].iter().find(|f| f.guarded) {
        return Err(Unsafe::at(format!(
            "inside a call of {} (its code called back into the program's)",
            target::file_name(&f.module)
        )));
    }
    if inner == 0 {
        return Ok(());
    }
    let entry = &frames[inner - 1];
    let name = target::file_name(&frames[0].module);
    // The rest is the program's: safe once the call returns (rest[0] is where it returns to).
    let exit = (end > 0).then(|| (rest[0].pc + 1, entry.cfa));
    if !in_syscall {
        return Err(Unsafe {
            why: format!("running inside {name}"),
            exit,
        });
    }
    if end == 0 || !blocking.contains(&entry.function) {
        // Waiting inside (for a lock, for input under stdio's): stepping would wait with it.
        return Err(Unsafe::at(format!(
            "inside {name}, not in a call that only waits"
        )));
    }
    Ok(())
}

/// What the unwinder keeps of one mapped module: its `.eh_frame_hdr` and where it is mapped
/// (None: the module has none).
struct Module {
    hdr: Option<(u64, Vec<u8>)>,
}

/// Unwinds the stacks of one process's stopped threads.
pub struct Unwinder {
    pid: u32,
    mem: File,
    maps: Vec<Mapping>,
    modules: HashMap<u64, Option<Module>>,
    blocking: Option<Vec<u64>>,
    ctx: Box<UnwindContext<usize>>,
}

/// The registers the unwinder follows (DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8-r15
/// ra).
type Registers = [u64; 17];
const RSP: usize = 7;
const RA: usize = 16;
const MAX_FRAMES: usize = 512;
/// A CIE and the FDE that names it are read together; farther apart than this, the frame is
/// not unwound.
const MAX_ENTRY_SPAN: u64 = 16 << 20;

impl Unwinder {
    pub fn new(pid: u32) -> std::io::Result<Unwinder> {
        let mem = File::open(format!("/proc/{pid}/mem"))?;
        let mut u = Unwinder {
            pid,
            mem,
            maps: Vec::new(),
            modules: HashMap::new(),
            blocking: None,
            ctx: Box::new(UnwindContext::new()),
        };
        u.refresh();
        Ok(u)
    }

    /// Reads the process's mappings again (a module may have been loaded since).
    pub fn refresh(&mut self) {
        self.maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid))
            .map(|t| target::parse_maps(&t))
            .unwrap_or_default();
        self.modules.clear();
        self.blocking = None;
    }

    /// Whether the thread stopped with `regs` may be borrowed (see the module's comment).
    pub fn safe(&mut self, regs: &libc::user_regs_struct) -> Result<(), Unsafe> {
        let frames = self.unwind(regs).map_err(Unsafe::at)?;
        let blocking = self.blocking().to_vec();
        judge(&frames, (regs.orig_rax as i64) >= 0, &blocking)
    }

    /// The start addresses of the blocking functions of the C library (and of libpthread, where
    /// older glibc keeps the waits).
    fn blocking(&mut self) -> &[u64] {
        if self.blocking.is_none() {
            let mut found = Vec::new();
            let mut seen: Vec<&str> = Vec::new();
            for m in &self.maps {
                let name = target::file_name(&m.path);
                let wanted = target::is_libc(&m.path) || name.starts_with("libpthread");
                if !wanted || seen.contains(&m.path.as_str()) {
                    continue;
                }
                seen.push(&m.path);
                let Some(base) = target::mapped_at(&self.maps, &m.path) else {
                    continue;
                };
                let file = target::in_root(self.pid, &m.path);
                if let Ok(offsets) = elf::all_definitions(&file, BLOCKING) {
                    found.extend(offsets.into_iter().map(|o| base + o));
                }
            }
            self.blocking = Some(found);
        }
        self.blocking.as_deref().unwrap_or(&[])
    }

    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, String> {
        read(&self.mem, addr, len)
    }

    fn read_u32(&self, addr: u64) -> Result<u32, String> {
        let b = self.read(addr, 4)?;
        Ok(u32::from_ne_bytes(b.try_into().expect("4 bytes")))
    }

    /// The stack of a thread stopped with `regs`, innermost first, to its end: the registers'
    /// values as a thread's are, the return address standing in the `RA` slot.
    pub fn unwind(&mut self, regs: &libc::user_regs_struct) -> Result<Vec<Frame>, String> {
        let mut r: Registers = [
            regs.rax, regs.rdx, regs.rcx, regs.rbx, regs.rsi, regs.rdi, regs.rbp, regs.rsp,
            regs.r8, regs.r9, regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15, regs.rip,
        ];
        let mut frames = Vec::new();
        for depth in 0..MAX_FRAMES {
            // A return address is the instruction after the call: the call is the one before.
            let pc = if depth == 0 { r[RA] } else { r[RA] - 1 };
            let (base, module) = self.module_at(pc)?;
            let (function, cfa, last) = self.step(base, &module, pc, &mut r)?;
            frames.push(Frame {
                pc,
                function,
                cfa,
                guarded: is_guarded(&module),
                module,
            });
            if last || r[RA] == 0 {
                return Ok(frames);
            }
        }
        Err(format!("its stack is deeper than {MAX_FRAMES} frames"))
    }

    /// The module mapping `pc` executable: its base and path.
    fn module_at(&self, pc: u64) -> Result<(u64, String), String> {
        let m = self
            .maps
            .iter()
            .find(|m| m.exec && (m.start..m.end).contains(&pc))
            .ok_or_else(|| format!("running code at {pc:#x} that no mapped file holds"))?;
        let base = target::mapped_at(&self.maps, &m.path)
            .ok_or_else(|| format!("{}: not mapped from its start", m.path))?;
        Ok((base, m.path.clone()))
    }

    /// The module loaded at `base`, its unwind table read once.
    fn module(&mut self, base: u64) -> Option<&Module> {
        if !self.modules.contains_key(&base) {
            let m = self.load_module(base);
            self.modules.insert(base, m);
        }

        self.modules.get(&base).and_then(Option::as_ref)
    }

    fn load_module(&self, base: u64) -> Option<Module> {
        const PT_LOAD: u32 = 1;
        const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
        let header = self.read(base, 64).ok()?;
        if &header[..4] != b"\x7fELF" || header[4] != 2 {
            return None;
        }
        let word = |at: usize, n: usize| {
            header[at..at + n]
                .iter()
                .rev()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b))
        };
        let (phoff, phentsize, phnum) = (word(0x20, 8), word(0x36, 2), word(0x38, 2));
        if phentsize < 56 || phnum == 0 || phnum > 256 {
            return None;
        }
        let phdrs = self.read(base + phoff, (phentsize * phnum) as usize).ok()?;
        let mut first_load = u64::MAX;
        let mut eh = None;
        for ph in phdrs.chunks_exact(phentsize as usize) {
            let field = |at: usize, n: usize| {
                ph[at..at + n]
                    .iter()
                    .rev()
                    .fold(0u64, |v, &b| (v << 8) | u64::from(b))
            };
            match field(0, 4) as u32 {
                PT_LOAD => first_load = first_load.min(field(0x10, 8)),
                PT_GNU_EH_FRAME => eh = Some((field(0x10, 8), field(0x28, 8))),
                _ => {}
            }
        }
        let bias = base.checked_sub(first_load & !0xfff)?;
        let hdr = match eh {
            Some((vaddr, size)) if size < (64 << 20) => {
                let at = bias + vaddr;
                self.read(at, size as usize).ok().map(|b| (at, b))
            }
            _ => None,
        };
        Some(Module { hdr })
    }

    /// Unwinds one frame at `pc` of the module at `base`: `r` becomes the caller's registers.
    /// Returns the function's start, the frame's CFA and whether this is the stack's last frame.
    fn step(
        &mut self,
        base: u64,
        path: &str,
        pc: u64,
        r: &mut Registers,
    ) -> Result<(u64, u64, bool), String> {
        let name = target::file_name(path).to_string();
        let (hdr_at, hdr) = self
            .module(base)
            .and_then(|m| m.hdr.clone())
            .ok_or_else(|| format!("{name} has no unwind table in memory"))?;
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at);
        let parsed = EhFrameHdr::new(&hdr, NativeEndian)
            .parse(&bases, 8)
            .map_err(|e| format!("{name}: unwind table: {e}"))?;
        let table = parsed
            .table()
            .ok_or_else(|| format!("{name}: unwind table without a search table"))?;
        let fde_at = match table.lookup(pc, &bases) {
            Ok(Pointer::Direct(a)) => a,
            _ => return Err(format!("{name}: no unwind entry for {pc:#x}")),
        };
        // The FDE names its CIE by a backward distance; both are read in one piece.
        let fde_len = u64::from(self.read_u32(fde_at)?);
        let cie_at = (fde_at + 4)
            .checked_sub(u64::from(self.read_u32(fde_at + 4)?))
            .ok_or_else(|| format!("{name}: a malformed unwind entry"))?;
        let cie_len = u64::from(self.read_u32(cie_at)?);
        if fde_len >= 0xffff_fff0 || cie_len >= 0xffff_fff0 {
            return Err(format!("{name}: a 64-bit unwind entry"));
        }
        let lo = cie_at.min(fde_at);
        let hi = (cie_at + 4 + cie_len).max(fde_at + 4 + fde_len);
        if hi - lo > MAX_ENTRY_SPAN {
            return Err(format!("{name}: an unwind entry far from its CIE"));
        }
        let bytes = self.read(lo, (hi - lo) as usize)?;
        let section = EhFrame::new(&bytes, NativeEndian);
        let bases = bases.set_eh_frame(lo);
        let fde = section
            .fde_from_offset(
                &bases,
                EhFrameOffset((fde_at - lo) as usize),
                EhFrame::cie_from_offset,
            )
            .map_err(|e| format!("{name}: unwind entry: {e}"))?;
        if !fde.contains(pc) {
            return Err(format!("{name}: no unwind entry for {pc:#x}"));
        }
        if fde.is_signal_trampoline() {
            return Err("in a signal handler".into());
        }
        let function = fde.initial_address();
        let row = fde
            .unwind_info_for_address(&section, &bases, &mut self.ctx, pc)
            .map_err(|e| format!("{name}: unwind rule: {e}"))?;
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => {
                let at = usize::from(register.0);
                if at >= RA {
                    return Err(format!("{name}: an unwind rule on an unfollowed register"));
                }
                r[at].wrapping_add_signed(*offset)
            }
            CfaRule::Expression(_) => return Err(format!("{name}: an unwind expression")),
        };
        let mut next = *r;
        next[RSP] = cfa;
        for (register, rule) in row.registers() {
            let at = usize::from(register.0);
            if at > RA {
                continue;
            }
            next[at] = match rule {
                RegisterRule::Undefined if at == RA => return Ok((function, cfa, true)),
                RegisterRule::Undefined => 0,
                RegisterRule::SameValue => r[at],
                RegisterRule::Offset(n) => read_u64(&self.mem, cfa.wrapping_add_signed(*n))?,
                RegisterRule::ValOffset(n) => cfa.wrapping_add_signed(*n),
                RegisterRule::Register(from) if usize::from(from.0) <= RA => r[usize::from(from.0)],
                _ => return Err(format!("{name}: an unwind rule it cannot follow")),
            };
        }
        if row.register(gimli::X86_64::RA).is_none() {
            return Err(format!("{name}: no rule for the return address"));
        }
        *r = next;
        Ok((function, cfa, false))
    }
}

/// `len` bytes of the process's memory at `addr`.
fn read(mem: &File, addr: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, addr)
        .map_err(|e| format!("cannot read its memory at {addr:#x}: {e}"))?;
    Ok(buf)
}

fn read_u64(mem: &File, addr: u64) -> Result<u64, String> {
    let b = read(mem, addr, 8)?;
    Ok(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(module: &str, function: u64) -> Frame {
        Frame {
            pc: function + 4,
            function,
            cfa: function + 0x100,
            module: module.into(),
            guarded: is_guarded(module),
        }
    }

    const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    const PROG: &str = "/work/prog";
    const POLL: u64 = 0x7000;

    /// The main thread's base: main, __libc_start_call_main, __libc_start_main, _start.
    fn main_base() -> Vec<Frame> {
        vec![
            frame(PROG, 0x1000),
            frame(LIBC, 0x2000),
            frame(LIBC, 0x2100),
            frame(PROG, 0x900),
        ]
    }

    #[test]
    fn the_program_s_own_code_over_the_c_library_s_start_is_safe() {
        let mut frames = vec![frame(PROG, 0x1200)];
        frames.extend(main_base());
        assert_eq!(judge(&frames, false, &[POLL]), Ok(()));
        // A thread of its own: its function over start_thread and clone3.
        let thread = [
            frame(PROG, 0x1300),
            frame(LIBC, 0x3000),
            frame(LIBC, 0x3100),
        ];
        assert_eq!(judge(&thread, false, &[POLL]), Ok(()));
    }

    #[test]
    fn a_thread_inside_the_allocator_is_not_borrowed() {
        let mut frames = vec![frame(LIBC, 0x5000), frame(LIBC, 0x5100)];
        frames.extend(main_base());
        let e = judge(&frames, false, &[POLL]).unwrap_err();
        assert!(e.why.contains("running inside libc.so.6"), "{e:?}");
        // It is safe once back in main, with the stack pointer malloc's caller had.
        assert_eq!(e.exit, Some((0x1004 + 1, 0x5100 + 0x100)));
        // Waiting in a system call inside malloc (an mmap, a lock) is no better.
        let e = judge(&frames, true, &[POLL]).unwrap_err();
        assert!(e.why.contains("not in a call that only waits"), "{e:?}");
        assert_eq!(e.exit, None);
    }

    #[test]
    fn a_blocking_call_made_by_the_program_is_safe_and_one_made_by_the_library_is_not() {
        let mut frames = vec![frame(LIBC, 0x7400), frame(LIBC, POLL)];
        frames.extend(main_base());
        assert_eq!(judge(&frames, true, &[POLL]), Ok(()));
        // poll from inside the C library (its code called the program back, which polled).
        let mut callback = vec![frame(LIBC, POLL), frame(PROG, 0x1500), frame(LIBC, 0x6000)];
        callback.extend(main_base());
        let e = judge(&callback, true, &[POLL]).unwrap_err();
        assert!(e.why.contains("called back"), "{e:?}");
        // Leaving the callback is no way out: no exit to step to.
        assert_eq!(e.exit, None);
    }

    #[test]
    fn the_loader_the_unwinder_and_the_shim_are_guarded_too() {
        for path in [
            "/lib64/ld-linux-x86-64.so.2",
            "/lib/x86_64-linux-gnu/libpthread.so.0",
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/run/x/.shim/libcudaleak-attach.so",
            "/lib/x86_64-linux-gnu/libdl.so.2",
        ] {
            assert!(is_guarded(path), "{path}");
        }
        assert!(!is_guarded("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
        assert!(!is_guarded("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"));
    }

    #[test]
    fn a_sleeping_process_unwinds_through_the_c_library_s_wait_to_its_base() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("run sleep");
        let pid = child.id();
        // Until it waits in its sleep (nanosleep or clock_nanosleep), not in the loader's start.
        for _ in 0..500 {
            let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            if matches!(target::parse_syscall(&call), Some(35 | 230)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let tracee = match super::super::ptrace::Tracee::seize(pid, pid as i32) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("skipped: ptrace is not allowed here ({e})");
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
        };
        let mut u = Unwinder::new(pid).expect("open its memory");
        let frames = u.unwind(tracee.regs()).expect("unwound");
        let verdict = u.safe(tracee.regs());
        drop(tracee);
        let _ = child.kill();
        let _ = child.wait();
        assert!(frames.len() >= 3, "{frames:#?}");
        assert!(target::is_libc(&frames[0].module), "{frames:#?}");
        assert!(!frames.last().unwrap().guarded || frames.len() > 2);
        assert!(frames.iter().any(|f| !f.guarded), "{frames:#?}");
        assert_eq!(verdict, Ok(()), "{frames:#?}");
    }
}
