//! The run directory `cudaleak attach` makes, and who may write in it. The CLI owns it; the link
//! the program loads the shim under is in its `.shim/`. A program of our own user writes its
//! dumps straight into it. A program of another user (root attaching to `nobody`'s job) gets one
//! directory of its own, `.target/`, and nothing else: after the wait the CLI takes that
//! directory back, copies the program's dumps out of it (regular files of the program's user,
//! opened without following a link) into files it creates, and removes it. Everything after that
//! (frames named in place, the report) reads and writes the CLI's own files only.
//!
//! Must never, where the program's user can write: follow a link, open a FIFO or a device,
//! rename over a name, or show a byte of what it read.
#![forbid(unsafe_code)]

use std::ffi::CStr;
use std::fs::{File, Metadata};
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::load;
use crate::say;

const SHIM_DIR: &str = ".shim";
/// The program's own directory, when it runs as another user.
const TARGET_DIR: &str = ".target";

/// A user and a group, as the kernel checks a file access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

impl Ids {
    /// Ours: the effective ids, those our files are created and checked with.
    fn mine() -> Ids {
        Ids {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    /// The ids a process's file accesses are checked with.
    pub fn of_process(pid: u32) -> Option<Ids> {
        parse_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
    }
}

/// The filesystem ids in a `/proc/PID/status` text: the fourth word of `Uid:` and `Gid:` (real,
/// effective, saved, filesystem). The filesystem ids follow the effective ones unless the
/// program set them apart; they are the ones its files get.
fn parse_status(text: &str) -> Option<Ids> {
    let fs_id = |key: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().nth(3)?.parse().ok()
        })
    };
    Some(Ids {
        uid: fs_id("Uid")?,
        gid: fs_id("Gid")?,
    })
}

/// A run directory made by `run::fresh_run_dir`, set up for one program.
#[derive(Debug)]
pub struct RunDir {
    dir: PathBuf,
    /// The program's ids when they are not ours: it writes into `.target/`.
    other: Option<Ids>,
}

impl RunDir {
    /// Makes `.shim/` with the link to `shim`, and, when `pid` runs as another user,
    /// `.target/` for its dumps (refused where that user could move the run directory away).
    pub fn prepare(dir: &Path, pid: u32, shim: &Path) -> Result<RunDir, String> {
        let other = Ids::of_process(pid).filter(|theirs| theirs.uid != Ids::mine().uid);
        let run = RunDir {
            dir: dir.to_path_buf(),
            other,
        };
        let link = run.link();
        std::fs::create_dir(dir.join(SHIM_DIR))
            .and_then(|()| std::os::unix::fs::symlink(shim, &link))
            .map_err(|e| format!("{}: cannot create: {e}", link.display()))?;
        if let Some(theirs) = other {
            run.hand_over(theirs)?;
        }
        Ok(run)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The name the program loads the shim under.
    pub fn link(&self) -> PathBuf {
        self.dir.join(SHIM_DIR).join(super::ATTACH_NAME)
    }

    /// Where the program writes its dumps.
    pub fn output(&self) -> PathBuf {
        match self.other {
            Some(_) => self.dir.join(TARGET_DIR),
            None => self.dir.clone(),
        }
    }

    /// `.target/`, given to the program's user; the run directory and `.shim/` stay ours,
    /// searchable by all (0711), so the program reaches the link and its directory.
    fn hand_over(&self, theirs: Ids) -> Result<(), String> {
        check_ancestors(&self.dir, theirs)?;
        for d in [self.dir.clone(), self.dir.join(SHIM_DIR)] {
            rustix::fs::chmod(&d, Mode::from_raw_mode(0o711))
                .map_err(|e| format!("{}: cannot make it searchable: {e}", d.display()))?;
        }
        let target = self.dir.join(TARGET_DIR);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&target)
            .map_err(|e| format!("{}: cannot create: {e}", target.display()))?;
        std::os::unix::fs::lchown(&target, Some(theirs.uid), Some(theirs.gid)).map_err(|e| {
            format!(
                "{}: cannot give it to the program's user (uid {}): {e}; attaching to another \
                 user's process takes root",
                target.display(),
                theirs.uid
            )
        })
    }

    /// After the wait, when the program wrote into `.target/`: its dumps copied into the run
    /// directory, each thing skipped named on stderr with why, `.target/` removed. Later dumps
    /// of the program (a child it forked that is still running) are not collected.
    pub fn collect(&self) {
        let Some(theirs) = self.other else {
            return;
        };
        let target = self.dir.join(TARGET_DIR);
        let copied = take_back(&target).and_then(|from| {
            let into = rustix::fs::open(&self.dir, DIR_FLAGS, Mode::empty())?;
            copy_dumps(&from, &into, theirs.uid)
        });
        match copied {
            Ok(skipped) => {
                for s in skipped {
                    say!("skipping {}: {}", target.join(&s.name).display(), s.why);
                }
            }
            Err(e) => say!("{}: cannot read the program's dumps: {e}", target.display()),
        }
        // Never follows a link (`unlinkat` under a directory descriptor, opened O_NOFOLLOW).
        if let Err(e) = std::fs::remove_dir_all(&target) {
            say!("{}: cannot remove: {e}", target.display());
        }
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Refuses a run directory that the program's user, or anyone but us and root, could rename or
/// replace (a directory above it that user owns, or that others may write and is not sticky):
/// every later step goes by its path.
fn check_ancestors(dir: &Path, theirs: Ids) -> Result<(), String> {
    for a in dir.ancestors() {
        let m = std::fs::symlink_metadata(a).map_err(|e| format!("{}: {e}", a.display()))?;
        let why = if m.file_type().is_symlink() {
            Some("is a symbolic link".to_string())
        } else if m.uid() == theirs.uid {
            Some(format!(
                "belongs to the program's user (uid {})",
                theirs.uid
            ))
        } else if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 {
            Some("can be written by other users (and is not sticky)".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!(
                "the program runs as uid {}, and {} {why}: it could move the run directory \
                 away; choose an --out that only you can change",
                theirs.uid,
                a.display()
            ));
        }
    }
    Ok(())
}

/// `.target/` made ours again before it is read: from then on the program's user can neither
/// add, rename nor remove a name in it, so what is checked is what is copied.
fn take_back(target: &Path) -> io::Result<OwnedFd> {
    let mine = Ids::mine();
    std::os::unix::fs::lchown(target, Some(mine.uid), Some(mine.gid))?;
    // Its entry is in our directory: the path names the directory we made.
    rustix::fs::chmod(target, Mode::RWXU)?;
    Ok(rustix::fs::open(target, DIR_FLAGS, Mode::empty())?)
}

/// A file left out of the run directory, and why.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Skipped {
    name: String,
    why: String,
}

/// The names the shim gives dumps: `cudaleak.<pid>.json`, `cudaleak.<pid>.snapshot-<n>.json`,
/// and their `.1`, `.2` … when a name was taken.
fn is_dump_name(name: &str) -> bool {
    name.len() > "cudaleak..json".len() && name.starts_with("cudaleak.") && name.ends_with(".json")
}

/// Copies each dump in `from` owned by `owner` into `into` under its name; returns the names of
/// dumps that were not copied, with why.
fn copy_dumps(from: &OwnedFd, into: &OwnedFd, owner: u32) -> io::Result<Vec<Skipped>> {
    let mut skipped = Vec::new();
    for entry in rustix::fs::Dir::read_from(from)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().ok().filter(|n| is_dump_name(n)) else {
            continue;
        };
        if let Err(why) = copy_one(from, into, entry.file_name(), owner, load::MAX_DUMP_BYTES) {
            skipped.push(Skipped {
                name: name.to_string(),
                why,
            });
        }
    }
    skipped.sort();
    Ok(skipped)
}

/// One dump: looked at first without being opened (a FIFO or a device never is), then opened
/// without following a link and checked again, then copied into a file created afresh.
fn copy_one(
    from: &OwnedFd,
    into: &OwnedFd,
    name: &CStr,
    owner: u32,
    limit: u64,
) -> Result<(), String> {
    let looked = rustix::fs::openat(from, name, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty())
        .map_err(|e| format!("cannot look at it: {e}"))?;
    let seen = File::from(looked)
        .metadata()
        .map_err(|e| format!("cannot look at it: {e}"))?;
    acceptable(&seen, owner, limit)?;
    let read_flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let source = File::from(
        rustix::fs::openat(from, name, read_flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| format!("cannot open it: {e}"))?,
    );
    let opened = source
        .metadata()
        .map_err(|e| format!("cannot look at it: {e}"))?;
    if (opened.dev(), opened.ino()) != (seen.dev(), seen.ino()) {
        return Err("it was replaced while it was read".into());
    }
    acceptable(&opened, owner, limit)?;
    let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
    let dest = rustix::fs::openat(
        into,
        name,
        create | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )
    .map_err(|e| format!("cannot create it in the run directory: {e}"))?;
    let mut out = BufWriter::new(File::from(dest));
    // Read to at most one byte past the limit: the file may grow while it is read.
    let copied = io::copy(&mut source.take(limit + 1), &mut out).and_then(|n| {
        out.flush()?;
        Ok(n)
    });
    let why = match copied {
        Ok(n) if n <= limit => return Ok(()),
        Ok(_) => format!("it grew past the {limit} bytes a dump may have"),
        Err(e) => format!("cannot copy it: {e}"),
    };
    drop(out);
    let _ = rustix::fs::unlinkat(into, name, AtFlags::empty());
    Err(why)
}

/// Whether what a dump's name stands for may be read as one: a regular file of the program's
/// user, no larger than a dump may be. The reasons name the file's kind, never its content.
fn acceptable(m: &Metadata, owner: u32, limit: u64) -> Result<(), String> {
    let t = m.file_type();
    if t.is_symlink() {
        return Err("it is a symbolic link (never followed here)".into());
    }
    if !t.is_file() {
        return Err(format!(
            "it is {}, not a regular file",
            crate::input::what_it_is(t)
        ));
    }
    if m.uid() != owner {
        return Err(format!(
            "it belongs to uid {}, not to the program's user (uid {owner})",
            m.uid()
        ));
    }
    if m.len() > limit {
        return Err(format!(
            "it is {} bytes, more than the {limit} a dump may have",
            m.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_process_is_known_by_its_filesystem_ids() {
        let status = "Name:\tjob\nUid:\t1000\t65534\t65534\t65533\nGid:\t100\t200\t200\t201\n";
        assert_eq!(
            parse_status(status),
            Some(Ids {
                uid: 65533,
                gid: 201
            })
        );
        assert_eq!(parse_status("Uid:\t0\n"), None);
        let me = Ids::of_process(std::process::id()).expect("our own status");
        assert_eq!(me, Ids::mine());
    }

    #[test]
    fn dump_names_are_the_shims() {
        for name in [
            "cudaleak.4711.json",
            "cudaleak.4711.snapshot-3.json",
            "cudaleak.4711.1.json",
        ] {
            assert!(is_dump_name(name), "{name}");
        }
        for name in ["cudaleak.json", ".cudaleak.4711.tmp", "other.json", ".shim"] {
            assert!(!is_dump_name(name), "{name}");
        }
    }

    fn dir_fd(p: &Path) -> OwnedFd {
        rustix::fs::open(p, DIR_FLAGS, Mode::empty()).expect("open a directory")
    }

    /// What `copy_dumps` does with `make`'s file `cudaleak.1.json` in `from`, collecting for
    /// `owner`: the reason it was skipped, if it was.
    fn collect_one(make: impl FnOnce(&Path), owner: u32) -> (Option<String>, tempfile::TempDir) {
        let from = tempfile::tempdir().expect("a temporary directory");
        let into = tempfile::tempdir().expect("a temporary directory");
        make(&from.path().join("cudaleak.1.json"));
        let skipped =
            copy_dumps(&dir_fd(from.path()), &dir_fd(into.path()), owner).expect("collected");
        assert!(skipped.len() <= 1, "{skipped:?}");
        let why = skipped.into_iter().next().map(|s| {
            assert_eq!(s.name, "cudaleak.1.json");
            s.why
        });
        (why, into)
    }

    #[test]
    fn a_regular_file_of_the_programs_user_is_copied_into_a_file_of_ours() {
        let me = Ids::mine().uid;
        let (why, into) = collect_one(|p| std::fs::write(p, b"{\"dump\": 1}").unwrap(), me);
        assert_eq!(why, None);
        let copy = into.path().join("cudaleak.1.json");
        assert_eq!(std::fs::read(&copy).unwrap(), b"{\"dump\": 1}");
        let m = std::fs::symlink_metadata(&copy).unwrap();
        assert!(m.is_file());
        assert_eq!((m.uid(), m.permissions().mode() & 0o777), (me, 0o600));
    }

    #[test]
    fn a_link_is_skipped_and_never_followed() {
        let elsewhere = tempfile::tempdir().expect("a temporary directory");
        let secret = elsewhere.path().join("secret");
        std::fs::write(&secret, b"Q-secret").unwrap();
        let (why, into) = collect_one(
            |p| std::os::unix::fs::symlink(&secret, p).unwrap(),
            Ids::mine().uid,
        );
        let why = why.expect("skipped");
        assert!(why.contains("symbolic link"), "{why}");
        assert!(!why.contains('Q'), "{why}");
        assert!(!into.path().join("cudaleak.1.json").exists());
        assert_eq!(std::fs::read(&secret).unwrap(), b"Q-secret");
    }

    #[test]
    fn a_fifo_is_skipped_without_being_opened() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (why, _into) = collect_one(
                |p| {
                    let made = std::process::Command::new("mkfifo").arg(p).status();
                    assert!(made.expect("mkfifo").success());
                },
                Ids::mine().uid,
            );
            let _ = tx.send(why);
        });
        // A FIFO opened for reading with no writer would block for ever.
        let why = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("collecting returns")
            .expect("skipped");
        assert!(why.contains("FIFO"), "{why}");
    }

    #[test]
    fn a_file_of_another_user_is_skipped() {
        let (why, into) = collect_one(
            |p| std::fs::write(p, b"{}").unwrap(),
            Ids::mine().uid.wrapping_add(1),
        );
        let why = why.expect("skipped");
        assert!(why.contains("not to the program's user"), "{why}");
        assert!(!into.path().join("cudaleak.1.json").exists());
    }

    #[test]
    fn a_directory_is_skipped_and_a_name_in_the_run_directory_is_never_replaced() {
        let (why, _) = collect_one(|p| std::fs::create_dir(p).unwrap(), Ids::mine().uid);
        assert!(why.expect("skipped").contains("a directory"));

        let from = tempfile::tempdir().expect("a temporary directory");
        let into = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(from.path().join("cudaleak.2.json"), b"theirs").unwrap();
        std::fs::write(into.path().join("cudaleak.2.json"), b"ours").unwrap();
        let skipped =
            copy_dumps(&dir_fd(from.path()), &dir_fd(into.path()), Ids::mine().uid).unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].why.contains("cannot create"), "{skipped:?}");
        assert_eq!(
            std::fs::read(into.path().join("cudaleak.2.json")).unwrap(),
            b"ours"
        );
    }

    #[test]
    fn a_file_past_the_limit_is_not_copied() {
        let from = tempfile::tempdir().expect("a temporary directory");
        let into = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(from.path().join("cudaleak.3.json"), b"0123456789").unwrap();
        let why = copy_one(
            &dir_fd(from.path()),
            &dir_fd(into.path()),
            c"cudaleak.3.json",
            Ids::mine().uid,
            4,
        )
        .expect_err("too large");
        assert!(why.contains("10 bytes"), "{why}");
        assert!(!into.path().join("cudaleak.3.json").exists());
    }

    #[test]
    fn a_run_directory_the_programs_user_could_move_is_refused() {
        let base = tempfile::tempdir().expect("a temporary directory");
        let run = base.path().join("run");
        std::fs::create_dir(&run).unwrap();
        let owner = std::fs::metadata(base.path()).unwrap().uid();
        let e = check_ancestors(&run, Ids { uid: owner, gid: 0 }).expect_err("refused");
        assert!(e.contains("belongs to the program's user"), "{e}");
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_ancestors(
            &run,
            Ids {
                uid: u32::MAX - 1,
                gid: 0,
            },
        )
        .expect_err("refused");
        assert!(e.contains("written by other users"), "{e}");
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            check_ancestors(
                &run,
                Ids {
                    uid: u32::MAX - 1,
                    gid: 0
                }
            ),
            Ok(())
        );
    }
}
