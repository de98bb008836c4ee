//! An exclusive lock on the cluster directory, so two `up`/`down` calls
//! (say, two test processes) never start or stop the same daemons at once.
use crate::error::{ClusterError, Result};
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Held while the lock is taken; released on drop (the file is closed).
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Blocks until this process holds `<dir>/cluster.lock` exclusively.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        std::fs::create_dir_all(dir).map_err(ClusterError::io("cannot create directory", dir))?;
        let path = dir.join("cluster.lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(ClusterError::io("cannot open", &path))?;
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(ClusterError::io("cannot lock", &path)(std::io::Error::last_os_error()));
        }
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn second_holder_waits_for_the_first() {
        let d = std::env::temp_dir().join(format!("cs-lock-{}", std::process::id()));
        let first = DirLock::acquire(&d).unwrap();
        let d2 = d.clone();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            let _second = DirLock::acquire(&d2).unwrap();
            start.elapsed()
        });
        std::thread::sleep(Duration::from_millis(300));
        drop(first);
        assert!(t.join().unwrap() >= Duration::from_millis(250));
        let _ = std::fs::remove_dir_all(&d);
    }
}
