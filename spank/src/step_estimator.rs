//! The estimator a step's tasks plan with, built once per step.
//!
//! slurmstepd is one process per step and node, and forks one child per
//! task. The estimator (cellsched.toml, the site's catalogs, and with a
//! profile DB configured the DB read and the calibration refit) is built in
//! `init_post_opt`, before the fork, and every task inherits it. It is kept
//! keyed by the config file's path and modification time, so a task that
//! finds the file changed (or a process where `init_post_opt` did not build
//! it) builds its own instead of using a stale one.
use cellsched_core::estimator::Estimator;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What the cached estimator was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    path: PathBuf,
    mtime: Option<SystemTime>,
}

impl Key {
    fn of(path: &Path) -> Key {
        Key { path: path.to_path_buf(), mtime: std::fs::metadata(path).and_then(|m| m.modified()).ok() }
    }
}

/// A cache of one estimator, keyed by its config file.
#[derive(Default)]
pub struct EstimatorCache {
    slot: Mutex<Option<(Key, Arc<Estimator>)>>,
}

impl EstimatorCache {
    /// An empty cache.
    pub const fn new() -> EstimatorCache {
        EstimatorCache { slot: Mutex::new(None) }
    }

    /// The estimator for the config at `path`: the cached one when `path`
    /// and its modification time are those it was built from, else
    /// `build(path)`, cached.
    pub fn get(&self, path: &Path, build: impl FnOnce(&Path) -> Estimator) -> Arc<Estimator> {
        let key = Key::of(path);
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, e)) = slot.as_ref() {
            if *k == key {
                return Arc::clone(e);
            }
        }
        let e = Arc::new(build(path));
        *slot = Some((key, Arc::clone(&e)));
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::gpu::GpuCatalog;
    use cellsched_core::model::ModelCatalog;
    use std::cell::Cell;

    #[test]
    fn built_once_per_config_version() {
        let dir = std::env::temp_dir().join(format!("cs-spank-estcache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("cellsched.toml");
        std::fs::write(&conf, "").unwrap();
        let cache = EstimatorCache::new();
        let builds = Cell::new(0);
        let build = |_: &Path| {
            builds.set(builds.get() + 1);
            Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
        };
        let a = cache.get(&conf, build);
        // Every further task of the step reuses it.
        for _ in 0..8 {
            let b = cache.get(&conf, build);
            assert!(Arc::ptr_eq(&a, &b));
        }
        assert_eq!(builds.get(), 1);
        // A changed file (another modification time) is read again.
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        std::fs::File::options().write(true).open(&conf).unwrap().set_modified(later).unwrap();
        let c = cache.get(&conf, build);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(builds.get(), 2);
        // Another path is another estimator; a missing file is keyed too.
        cache.get(&dir.join("missing.toml"), build);
        cache.get(&dir.join("missing.toml"), build);
        assert_eq!(builds.get(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
