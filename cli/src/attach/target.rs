//! What `/proc` says about the process to attach to: whether it exists and is the one we looked
//! at, what it has mapped (the driver, the shim, the C library), its threads and what each is
//! doing, and, when ptrace is refused, why (Yama, capabilities, another tracer) and the fix.
//!
//! Reads only; never stops or changes the process.

use std::path::{Path, PathBuf};

/// One line of `/proc/PID/maps` that maps a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// Mapped executable.
    pub exec: bool,
    pub path: String,
}

/// The file-backed lines of a maps text.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
            let _dev = fields.next()?;
            let _inode = fields.next()?;
            let path = fields.next()?.trim_start();
            if !path.starts_with('/') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset,
                exec: perms.as_bytes().get(2) == Some(&b'x'),
                path: path.to_string(),
            })
        })
        .collect()
}

/// The file name of a path.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The CUDA driver, as the loader maps it (`libcuda.so.1`, or the file it links to).
pub fn is_driver(path: &str) -> bool {
    let name = file_name(path);
    name == "libcuda.so" || name.starts_with("libcuda.so.")
}

/// A copy of the shim (preloaded, or injected by an earlier attach).
pub fn is_shim(path: &str) -> bool {
    file_name(path).starts_with("libcudaleak")
}

/// glibc's C library (2.34 and later hold `dlopen`; earlier ones keep it in libdl).
pub fn is_libc(path: &str) -> bool {
    let name = file_name(path);
    name.starts_with("libc.so") || (name.starts_with("libc-2.") && name.ends_with(".so"))
}

pub fn is_libdl(path: &str) -> bool {
    let name = file_name(path);
    name.starts_with("libdl.so") || (name.starts_with("libdl-2.") && name.ends_with(".so"))
}

/// The frameworks whose own count of what they hold attach cannot read (it runs no code in the
/// job's interpreter), named by a library each maps: PyTorch's `libc10_cuda.so`, JAX's jaxlib
/// (`xla_extension*.so`, `_jax*.so`) or its CUDA plugin, CuPy's `cupy_backends`.
pub fn frameworks_mapped(maps: &[Mapping]) -> Vec<&'static str> {
    let mut found = Vec::new();
    for m in maps {
        let name = file_name(&m.path);
        let which = if name == "libc10_cuda.so" {
            "PyTorch"
        } else if (m.path.contains("/jaxlib/")
            && (name.starts_with("xla_extension") || name.starts_with("_jax")))
            || m.path.contains("/jax_cuda")
        {
            "JAX"
        } else if m.path.contains("/cupy_backends/") {
            "CuPy"
        } else {
            continue;
        };
        if !found.contains(&which) {
            found.push(which);
        }
    }
    found
}

/// The lowest address at which `path` is mapped from its start (file offset 0).
pub fn mapped_at(maps: &[Mapping], path: &str) -> Option<u64> {
    maps.iter()
        .filter(|m| m.path == path && m.offset == 0)
        .map(|m| m.start)
        .min()
}

/// A process's identity for the time we watch it: its pid and its start time (field 22 of
/// `/proc/PID/stat`), so a pid reused by another process is not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub pid: u32,
    pub start: u64,
}

/// The state letter and start time from a `/proc/PID/stat` text.
pub fn parse_stat(text: &str) -> Option<(char, u64)> {
    // The command name is in parentheses and may hold anything, spaces and ')' included.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 is the state; the start time is field 22.
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

impl Identity {
    pub fn of(pid: u32) -> Option<Identity> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, start) = parse_stat(&text)?;
        Some(Identity { pid, start })
    }

    /// Whether the process still runs: not gone, not a zombie, not replaced by another.
    pub fn alive(&self) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) else {
            return false;
        };
        matches!(parse_stat(&text), Some((state, start))
            if start == self.start && state != 'Z' && state != 'X' && state != 'x')
    }
}

/// The program's name for messages: its command line's first word, else its `comm`.
pub fn program_name(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .take(3)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if words.is_empty() {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    } else {
        words.join(" ")
    }
}

/// A variable of the process's environment as it was when it started.
pub fn environ_var(pid: u32, key: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    raw.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

/// System calls a thread waits in for long, without holding a lock of its process's own: a
/// thread stopped there is the best one to borrow (x86-64 numbers).
const RESTFUL: &[i64] = &[
    0,   // read
    7,   // poll
    23,  // select
    34,  // pause
    35,  // nanosleep
    43,  // accept
    45,  // recvfrom
    47,  // recvmsg
    61,  // wait4
    128, // rt_sigtimedwait
    230, // clock_nanosleep
    232, // epoll_wait
    270, // pselect6
    271, // ppoll
    281, // epoll_pwait
];
const FUTEX: i64 = 202;

/// What a thread is doing, from `/proc/PID/task/TID/syscall`: `Some(nr)` in system call `nr`,
/// `None` running (or unknown).
pub fn parse_syscall(text: &str) -> Option<i64> {
    let first = text.split_whitespace().next()?;
    first.parse().ok().filter(|&n: &i64| n >= 0)
}

/// The order in which threads are tried for a call: the main thread if it rests in a system
/// call, then the others that do, then those waiting on a futex (the main thread first), then
/// the main thread, then the rest. Each is borrowed only if its stack shows it safe
/// (`safepoint.rs`); a resting thread is the likeliest to be.
pub fn borrow_order(pid: u32, threads: &[(i32, Option<i64>)]) -> Vec<i32> {
    let main = pid as i32;
    let rank = |&(tid, call): &(i32, Option<i64>)| {
        let resting = call.is_some_and(|n| RESTFUL.contains(&n));
        let futex = call == Some(FUTEX);
        match (resting, futex, tid == main) {
            (true, _, true) => 0,
            (true, _, false) => 1,
            (_, true, true) => 2,
            (_, true, false) => 3,
            (_, _, true) => 4,
            _ => 5,
        }
    };
    let mut ordered = threads.to_vec();
    ordered.sort_by_key(|t| (rank(t), t.0));
    ordered.into_iter().map(|t| t.0).collect()
}

/// Whether the process is stopped (SIGSTOP, Ctrl-Z): state `T` in `/proc/PID/stat`.
pub fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .is_some_and(|(state, _)| state == 'T')
}

/// The process's threads and what each is doing (none once it has ended).
pub fn threads(pid: u32) -> Vec<(i32, Option<i64>)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let call = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
            .ok()
            .and_then(|t| parse_syscall(&t));
        Some((tid, call))
    })
    .collect()
}

/// Why ptrace was refused, and the fix: from the Yama setting (`None`: no Yama), whether we hold
/// CAP_SYS_PTRACE, the tracer the process already has (0: none), and whether it runs as another
/// user.
pub fn ptrace_refusal(
    yama: Option<u8>,
    cap_sys_ptrace: bool,
    tracer: u32,
    other_user: bool,
) -> String {
    if tracer != 0 {
        let name = program_name(tracer);
        return format!(
            "the process is already traced by pid {tracer} ({name}) and a process has one \
             tracer at a time; detach that debugger or tracer first"
        );
    }
    match yama {
        Some(3) => "ptrace is disabled on this machine (Yama: /proc/sys/kernel/yama/ptrace_scope \
                    is 3, which only a reboot undoes); attach cannot work here, use `cudaleak run`"
            .into(),
        Some(2) if !cap_sys_ptrace => "ptrace is limited to administrators (Yama: \
             /proc/sys/kernel/yama/ptrace_scope is 2); run cudaleak as root or with \
             CAP_SYS_PTRACE (in a container: --cap-add=SYS_PTRACE)"
            .into(),
        Some(1) if !cap_sys_ptrace => "ptrace is limited to a process's ancestors (Yama: \
             /proc/sys/kernel/yama/ptrace_scope is 1); either run cudaleak with CAP_SYS_PTRACE \
             (sudo; in a container --cap-add=SYS_PTRACE), or allow it for everyone until the \
             next boot: sudo sysctl kernel.yama.ptrace_scope=0"
            .into(),
        _ if other_user && !cap_sys_ptrace => "the process belongs to another user; run \
             cudaleak as that user, or as root"
            .into(),
        _ if !cap_sys_ptrace => "the kernel refused ptrace: without CAP_SYS_PTRACE (containers \
             drop it: docker run --cap-add=SYS_PTRACE, Kubernetes securityContext.capabilities.add \
             [SYS_PTRACE]) a process that is not dumpable, or one in another user namespace, \
             cannot be traced; a seccomp profile may also forbid ptrace"
            .into(),
        _ => "the kernel refused ptrace although cudaleak holds CAP_SYS_PTRACE: a seccomp \
              profile or a security module (AppArmor, SELinux) forbids it here"
            .into(),
    }
}

/// The Yama ptrace scope, if the kernel has Yama.
pub fn yama_scope() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// A field of a `/proc/PID/status` text (`TracerPid`, `CapEff`, `Uid` …), its first word.
pub fn status_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.split_whitespace().next().unwrap_or("").to_string())
    })
}

/// Whether our effective capabilities include CAP_SYS_PTRACE (bit 19).
pub fn have_cap_sys_ptrace() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| status_field(&t, "CapEff"))
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .is_some_and(|caps| caps & (1 << 19) != 0)
}

/// The process's tracer (0: none) and whether its real uid differs from ours.
pub fn tracer_and_owner(pid: u32) -> (u32, bool) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let tracer = status_field(&text, "TracerPid")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mine = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| status_field(&t, "Uid"));
    let theirs = status_field(&text, "Uid");
    (tracer, mine.is_some() && theirs.is_some() && mine != theirs)
}

/// A file of the process as the process sees it (its root may be a container's).
pub fn in_root(pid: u32, path: &str) -> PathBuf {
    let inside = PathBuf::from(format!("/proc/{pid}/root{path}"));
    if inside.exists() {
        inside
    } else {
        Path::new(path).to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_are_named_by_the_libraries_they_map_each_once() {
        let maps = parse_maps(
            "7f00-7f10 r-xp 00000000 08:01 1 /v/site-packages/torch/lib/libc10_cuda.so\n\
             7f10-7f20 r--p 00010000 08:01 1 /v/site-packages/torch/lib/libc10_cuda.so\n\
             7f20-7f30 r-xp 00000000 08:01 2 /v/site-packages/cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so\n\
             7f30-7f40 r-xp 00000000 08:01 3 /v/site-packages/jaxlib/_jax.so\n\
             7f40-7f50 r-xp 00000000 08:01 4 /usr/lib/libc10.so\n",
        );
        assert_eq!(frameworks_mapped(&maps), ["PyTorch", "CuPy", "JAX"]);
        assert!(
            frameworks_mapped(&parse_maps("7f40-7f50 r-xp 0 08:01 4 /usr/bin/app\n")).is_empty()
        );
    }

    const MAPS: &str = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/prog
7f10a0000000-7f10a0028000 r--p 00000000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f10a0028000-7f10a01bd000 r-xp 00028000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f10b0000000-7f10b0010000 r-xp 00000000 08:01 789 /opt/null cuda/libcuda.so.1
7f10c0000000-7f10c0021000 rw-p 00000000 00:00 0 \n\
7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn maps_lines_name_their_files_spaces_included() {
        let maps = parse_maps(MAPS);
        assert_eq!(maps.len(), 4);
        assert_eq!(maps[3].path, "/opt/null cuda/libcuda.so.1");
        assert!(is_driver(&maps[3].path));
        assert!(is_libc(&maps[1].path));
        assert_eq!(
            mapped_at(&maps, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            Some(0x7f10a0000000)
        );
        assert!(!maps.iter().any(|m| is_shim(&m.path)));
        assert!(is_shim("/run/cudaleak/.shim/libcudaleak-attach.so"));
        assert!(!is_driver("/usr/lib/libcudart.so.13"));
        assert!(!is_driver("/usr/lib/libcudadebugger.so.1"));
    }

    #[test]
    fn stat_is_read_past_a_command_name_with_parentheses_and_spaces() {
        let stat = "4711 (my (odd) prog) S 1 4711 4711 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 98765 1000 50";
        assert_eq!(parse_stat(stat), Some(('S', 98765)));
        assert_eq!(parse_stat("4711 (x) Z 1"), None);
    }

    #[test]
    fn a_resting_thread_is_tried_before_a_busy_main_thread() {
        let threads = [(100, None), (101, Some(202)), (102, Some(7))];
        assert_eq!(borrow_order(100, &threads), [102, 101, 100]);
        let threads = [(100, Some(230)), (102, Some(7))];
        assert_eq!(borrow_order(100, &threads), [100, 102]);
        let threads = [(103, None), (100, None), (101, Some(202))];
        assert_eq!(borrow_order(100, &threads), [101, 100, 103]);
        assert_eq!(borrow_order(100, &[(100, None)]), [100]);
        assert_eq!(parse_syscall("running"), None);
        assert_eq!(parse_syscall("-1 0x7ffc 0x4005"), None);
        assert_eq!(parse_syscall("230 0x1 0x0 0x7ffc"), Some(230));
    }

    #[test]
    fn each_ptrace_refusal_names_its_cause_and_fix() {
        let yama1 = ptrace_refusal(Some(1), false, 0, false);
        assert!(
            yama1.contains("ptrace_scope is 1")
                && yama1.contains("sysctl kernel.yama.ptrace_scope=0")
        );
        assert!(ptrace_refusal(Some(2), false, 0, false).contains("CAP_SYS_PTRACE"));
        assert!(ptrace_refusal(Some(3), true, 0, false).contains("only a reboot"));
        let container = ptrace_refusal(None, false, 0, false);
        assert!(container.contains("--cap-add=SYS_PTRACE"), "{container}");
        assert!(ptrace_refusal(None, false, 0, true).contains("another user"));
        assert!(ptrace_refusal(Some(1), true, 0, false).contains("seccomp"));
        assert!(ptrace_refusal(None, true, 1, false).contains("already traced by pid 1"));
    }

    #[test]
    fn status_fields_are_found_by_name() {
        let text =
            "Name:\tprog\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t00000000a80425fb\n";
        assert_eq!(status_field(text, "TracerPid").as_deref(), Some("0"));
        assert_eq!(status_field(text, "Uid").as_deref(), Some("1000"));
        assert_eq!(
            status_field(text, "CapEff").as_deref(),
            Some("00000000a80425fb")
        );
    }
}
