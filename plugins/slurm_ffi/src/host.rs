//! What the two slurmctld plugins host alike: where `cellsched.toml` is
//! (one rule for both, the one `cellsched doctor` checks), whether a file
//! changed since it was read, and a periodic background thread with a
//! bounded stop.
use crate::{guard, log};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// The `cellsched.toml` of the slurmctld plugins:
/// `PrioritySiteFactorParameters=config=PATH`, then slurmctld's
/// `CELLSCHED_CONFIG`, then `cellsched.toml` beside the running slurm.conf
/// (`cellsched_core::config::resolve_config_path`).
pub fn config_path() -> PathBuf {
    let (params, slurm_conf) = crate::running_conf::conf_paths();
    let env = std::env::var(cellsched_core::config::CONFIG_ENV).ok();
    let slurm_conf = slurm_conf.or_else(|| std::env::var("SLURM_CONF").ok()).unwrap_or_else(|| "/etc/slurm/slurm.conf".into());
    cellsched_core::config::resolve_config_path(params.as_deref(), env.as_deref(), Some(&slurm_conf))
}

/// A file as it was when read: its path and modification time (`None`
/// when it could not be read), to tell whether it changed since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// The file.
    pub path: PathBuf,
    /// Its modification time.
    pub modified: Option<SystemTime>,
}

impl FileStamp {
    /// The file as it is now.
    pub fn of(path: &Path) -> FileStamp {
        FileStamp { path: path.to_path_buf(), modified: std::fs::metadata(path).and_then(|m| m.modified()).ok() }
    }
}

/// A named background thread that runs a pass every `interval_s()`
/// seconds (read again before each wait), at the lower CPU priority of
/// [`crate::background`], each pass behind a panic guard. Stopped with a
/// bound: `fini` may run while slurmctld holds its locks, which a pass may
/// be waiting for.
pub struct Periodic {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: JoinHandle<()>,
    name: &'static str,
}

impl Periodic {
    /// Starts thread `thread` of plugin `plugin` (for logs) running `pass`
    /// every `interval_s()` seconds (at least 1); the first pass after one interval.
    pub fn start(plugin: &'static str, thread: &'static str, interval_s: fn() -> u64, pass: fn()) -> std::io::Result<Periodic> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s2 = stop.clone();
        let handle = std::thread::Builder::new().name(format!("cellsched-{thread}")).spawn(move || {
            crate::background::yield_cpu_or_log(plugin, thread);
            loop {
                let (lock, cv) = &*s2;
                let g = lock.lock().unwrap_or_else(|e| e.into_inner());
                let (stopped, _) = cv.wait_timeout_while(g, Duration::from_secs(interval_s().max(1)), |s| !*s).unwrap_or_else(|e| e.into_inner());
                if *stopped {
                    return;
                }
                drop(stopped);
                guard(&format!("{plugin} {thread}"), (), pass);
            }
        })?;
        Ok(Periodic { stop, handle, name: thread })
    }

    /// Asks the thread to stop and waits at most `bound` for it; `true`
    /// when it ended (and was joined), else it ends after its current pass.
    pub fn stop(self, plugin: &str, bound: Duration) -> bool {
        *self.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.stop.1.notify_all();
        let t = Instant::now();
        while !self.handle.is_finished() && t.elapsed() < bound {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.handle.is_finished() {
            let _ = self.handle.join();
            true
        } else {
            log::error(&format!("{plugin}: the {} thread is still busy at fini; it stops after its current pass", self.name));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static PASSES: AtomicUsize = AtomicUsize::new(0);

    #[test]
    fn a_periodic_thread_runs_passes_and_stops_within_the_bound() {
        let p = Periodic::start("test/plugin", "tick", || 1, || {
            PASSES.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let t = Instant::now();
        while PASSES.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(PASSES.load(Ordering::SeqCst) > 0, "no pass ran");
        assert!(p.stop("test/plugin", Duration::from_secs(5)), "did not stop while waiting");
    }

    static SLOW_STARTED: AtomicUsize = AtomicUsize::new(0);

    #[test]
    fn a_busy_pass_does_not_hold_up_the_stop_past_its_bound() {
        let p = Periodic::start("test/plugin", "slow", || 1, || {
            SLOW_STARTED.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_secs(3));
        })
        .unwrap();
        let t = Instant::now();
        while SLOW_STARTED.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let t = Instant::now();
        assert!(!p.stop("test/plugin", Duration::from_millis(100)), "a pass was running");
        assert!(t.elapsed() < Duration::from_secs(2), "the stop waited past its bound");
    }

    #[test]
    fn stamps_tell_a_changed_file() {
        let dir = std::env::temp_dir().join(format!("cs-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.toml");
        assert_eq!(FileStamp::of(&f).modified, None);
        std::fs::write(&f, "x").unwrap();
        let a = FileStamp::of(&f);
        assert!(a.modified.is_some());
        let later = SystemTime::now() + Duration::from_secs(60);
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(later).unwrap();
        assert_ne!(FileStamp::of(&f), a);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn without_libslurm_the_config_is_found_by_the_environment_rule() {
        // No slurm_conf symbol in unit tests: CELLSCHED_CONFIG or SLURM_CONF decide.
        let p = config_path();
        assert!(p.ends_with("cellsched.toml") || std::env::var(cellsched_core::config::CONFIG_ENV).is_ok(), "{}", p.display());
    }
}
