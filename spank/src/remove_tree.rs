//! Removal of a directory tree a job could fill at will (its plan
//! directory), with a bounded number of open descriptors and no path
//! longer than one name.
//!
//! A recursive removal keeps a descriptor (or a path) per level, so a job
//! that nests tens of thousands of directories makes it fail ("Too many
//! open files", or paths past `PATH_MAX`) and leaves the tree behind.
//! Here the tree is flattened instead: the top directory's entries are
//! removed one by one; a non-empty subdirectory is opened, its files
//! unlinked and its own subdirectories moved up into the top directory
//! (`renameat` within the tree), then removed once empty. At most three
//! descriptors are open at any time (the parent, the top, one
//! subdirectory), each entry is handled a bounded number of times, and
//! every call names one entry relative to a descriptor. Nothing is
//! followed: symlinks are unlinked like files, and every directory is
//! opened with `O_NOFOLLOW`.
use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Names read from a directory per pass (memory bound for wide directories).
const BATCH: usize = 4096;

/// An owned descriptor, closed on drop.
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this guard.
        unsafe { libc::close(self.0) };
    }
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Opens directory `name` relative to `dir` (`None`: `name` is a path),
/// never following a symlink.
fn open_dir(dir: Option<&Fd>, name: &CStr) -> io::Result<Fd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: NUL-terminated name; the returned descriptor is owned by `Fd`.
    let fd = unsafe { libc::openat(dir.map_or(libc::AT_FDCWD, |d| d.0), name.as_ptr(), flags) };
    if fd < 0 {
        Err(last_err())
    } else {
        Ok(Fd(fd))
    }
}

/// Up to [`BATCH`] entry names of `dir` (without `.` and `..`), read from
/// the start through a duplicate descriptor.
fn names(dir: &Fd) -> io::Result<Vec<CString>> {
    // SAFETY: `dup` of an owned descriptor; fdopendir takes the duplicate,
    // closedir closes it; readdir's entries are read before the next call.
    unsafe {
        let dup = libc::fcntl(dir.0, libc::F_DUPFD_CLOEXEC, 0);
        if dup < 0 {
            return Err(last_err());
        }
        let d = libc::fdopendir(dup);
        if d.is_null() {
            let e = last_err();
            libc::close(dup);
            return Err(e);
        }
        libc::rewinddir(d);
        let mut out = Vec::new();
        while out.len() < BATCH {
            let ent = libc::readdir(d);
            if ent.is_null() {
                break;
            }
            let name = CStr::from_ptr((*ent).d_name.as_ptr());
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                out.push(name.to_owned());
            }
        }
        libc::closedir(d);
        Ok(out)
    }
}

/// `unlinkat(dir, name, flags)`.
fn unlink_at(dir: &Fd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: NUL-terminated name relative to an owned descriptor.
    if unsafe { libc::unlinkat(dir.0, name.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(last_err())
    }
}

/// Moves directory `name` of `from` into `top` under a fresh name. The
/// counter only grows, so each name is tried once: entries already holding
/// such names cost one try each.
fn move_up(from: &Fd, name: &CStr, top: &Fd, budget: &mut Budget) -> io::Result<()> {
    loop {
        budget.spend()?;
        budget.counter += 1;
        let fresh = CString::new(format!(".cellsched-rm.{}", budget.counter)).expect("no NUL");
        // SAFETY: NUL-terminated names relative to owned descriptors.
        if unsafe { libc::renameat(from.0, name.as_ptr(), top.0, fresh.as_ptr()) } == 0 {
            return Ok(());
        }
        let e = last_err();
        match e.raw_os_error() {
            // The fresh name is taken (a non-empty directory, or a file): next one.
            Some(libc::ENOTEMPTY) | Some(libc::EEXIST) | Some(libc::ENOTDIR) | Some(libc::EISDIR) => continue,
            _ => return Err(e),
        }
    }
}

/// Bounds the work of one removal (a process still adding entries while
/// the tree is removed cannot keep it going for ever), and numbers the
/// names directories are moved to.
struct Budget {
    ops: u64,
    counter: u64,
}

impl Budget {
    /// Operations allowed per removal: far above any tree a job can make
    /// in a plan directory before it ends.
    const MAX_OPS: u64 = 200_000_000;

    fn spend(&mut self) -> io::Result<()> {
        self.ops += 1;
        if self.ops > Self::MAX_OPS {
            return Err(io::Error::new(io::ErrorKind::Other, "tree still growing while it is removed; gave up"));
        }
        Ok(())
    }
}

/// Is this error "a directory" (for `unlinkat` without `AT_REMOVEDIR`)?
fn is_dir_err(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::EPERM))
}

/// Empties the directory `top` (see the module doc).
fn empty(top: &Fd) -> io::Result<()> {
    let mut budget = Budget { ops: 0, counter: 0 };
    loop {
        budget.spend()?;
        let batch = names(top)?;
        if batch.is_empty() {
            return Ok(());
        }
        for name in &batch {
            remove_entry(top, name, &mut budget)?;
        }
    }
}

/// Removes entry `name` of `top`: a file or link at once; a directory once
/// its files are unlinked and its subdirectories moved up into `top`.
fn remove_entry(top: &Fd, name: &CStr, budget: &mut Budget) -> io::Result<()> {
    budget.spend()?;
    match unlink_at(top, name, 0) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if is_dir_err(&e) => {}
        Err(e) => return Err(e),
    }
    loop {
        budget.spend()?;
        match unlink_at(top, name, libc::AT_REMOVEDIR) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) => {}
            Err(e) => return Err(e),
        }
        let sub = match open_dir(Some(top), name) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for child in names(&sub)? {
            budget.spend()?;
            match unlink_at(&sub, &child, 0) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) if is_dir_err(&e) => move_up(&sub, &child, top, budget)?,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Removes directory `dir` and everything in it (see the module doc);
/// `dir` itself must not be a symlink (it is then refused with `ELOOP` or
/// `ENOTDIR`). Absent is an error of kind `NotFound`.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    let name = dir.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no directory name"))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let to_c = |b: &[u8]| CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"));
    let (cparent, cname) = (to_c(parent.as_os_str().as_bytes())?, to_c(name.as_bytes())?);
    let pfd = open_dir(None, &cparent)?;
    let top = open_dir(Some(&pfd), &cname)?;
    empty(&top)?;
    drop(top);
    unlink_at(&pfd, &cname, libc::AT_REMOVEDIR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory on tmpfs when there is one (plan directories live
    /// in `/run`; tens of thousands of entries are slow on a disk), else in
    /// the temporary directory.
    fn scratch(tag: &str) -> PathBuf {
        let shm = Path::new("/dev/shm");
        let root = if std::fs::metadata(shm).is_ok_and(|m| m.is_dir()) && std::fs::File::create(shm.join(format!(".cs-probe-{}", std::process::id()))).is_ok() {
            let _ = std::fs::remove_file(shm.join(format!(".cs-probe-{}", std::process::id())));
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let d = root.join(format!("cellsched-rmtree-{tag}-{}", std::process::id()));
        let _ = remove_tree(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Nests `depth` directories `d` under `base/name` (relative calls only:
    /// the path is far past PATH_MAX), with a file every 1000 levels.
    fn nest(base: &Path, name: &str, depth: usize) {
        let c = |s: &str| CString::new(s).unwrap();
        let mut fd = open_dir(None, &c(base.to_str().unwrap())).unwrap();
        let mut next = c(name);
        for level in 0..depth {
            // SAFETY: relative calls on owned descriptors.
            unsafe {
                assert_eq!(libc::mkdirat(fd.0, next.as_ptr(), 0o700), 0, "mkdirat at level {level}: {}", last_err());
            }
            fd = open_dir(Some(&fd), &next).unwrap();
            if level % 1000 == 0 {
                let f = c("f");
                // SAFETY: as above; the file descriptor is closed at once.
                unsafe {
                    let ffd = libc::openat(fd.0, f.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o600);
                    assert!(ffd >= 0);
                    libc::close(ffd);
                }
            }
            next = c("d");
        }
    }

    /// The soft limit on open files, set for the test and restored after.
    struct FdLimit(libc::rlimit);
    impl FdLimit {
        fn set(soft: u64) -> FdLimit {
            // SAFETY: plain getrlimit/setrlimit on owned structs.
            unsafe {
                let mut old: libc::rlimit = std::mem::zeroed();
                assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut old), 0);
                let new = libc::rlimit { rlim_cur: soft.min(old.rlim_max), rlim_max: old.rlim_max };
                assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &new), 0);
                FdLimit(old)
            }
        }
    }
    impl Drop for FdLimit {
        fn drop(&mut self) {
            // SAFETY: restores the saved limit.
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.0) };
        }
    }

    #[test]
    fn deep_nesting_and_many_files_are_removed_with_few_descriptors() {
        let base = scratch("deep");
        let step = base.join("7.0.0");
        std::fs::create_dir(&step).unwrap();
        nest(&step, "deep", 25_000);
        // Many files, a wide directory, and links that must not be followed.
        let wide = step.join("wide");
        std::fs::create_dir(&wide).unwrap();
        for i in 0..20_000 {
            std::fs::write(wide.join(format!("f{i}")), b"x").unwrap();
        }
        let outside = base.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, step.join("link")).unwrap();
        std::os::unix::fs::symlink(&outside, wide.join("link")).unwrap();
        {
            // A recursive removal holding a descriptor per level fails here
            // (the attack); this one needs a handful.
            let _limit = FdLimit::set(256);
            let e = std::fs::remove_dir_all(&step).unwrap_err();
            assert!(step.exists(), "the recursive removal left the tree ({e})");
            remove_tree(&step).unwrap();
        }
        assert!(!step.exists());
        assert!(outside.join("keep").exists(), "links are removed, never followed");
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 1, "only `outside` is left");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn names_planted_where_directories_are_moved_do_not_stop_the_removal() {
        let base = scratch("planted");
        let step = base.join("8.batch.0");
        std::fs::create_dir_all(step.join("a/b/c")).unwrap();
        for i in 1..=50 {
            let n = step.join(format!(".cellsched-rm.{i}"));
            if i % 2 == 0 {
                std::fs::write(&n, "x").unwrap();
            } else {
                std::fs::create_dir_all(n.join("sub")).unwrap();
            }
        }
        remove_tree(&step).unwrap();
        assert!(!step.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_symlink_or_missing_top_is_refused() {
        let base = scratch("top");
        let target = base.join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&target, base.join("ln")).unwrap();
        assert!(remove_tree(&base.join("ln")).is_err());
        assert!(target.join("keep").exists());
        assert_eq!(remove_tree(&base.join("absent")).unwrap_err().kind(), io::ErrorKind::NotFound);
        // A plain small tree goes.
        std::fs::create_dir_all(target.join("a/b/c")).unwrap();
        std::fs::write(target.join("a/b/c/f"), "x").unwrap();
        remove_tree(&target).unwrap();
        assert!(!target.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
