//! What job_submit/cellsched holds between calls: the configuration and
//! estimator in force (loaded at `init`, and again when `cellsched.toml` or
//! its profile DB changes, found by `cellsched_slurm_ffi::host`), and the
//! node table's GPUs (copied again only when slurmctld's
//! `last_node_update` moved, [`crate::node_cache`]). Submissions, edits and
//! re-planning read them without file I/O. A config file that fails to
//! load leaves the last good configuration in force (logged); with none
//! yet, DL jobs keep their own GPU request or are refused without one
//! ([`placement::fallback`]).
use crate::node_cache::NodeCache;
use cellsched_core::placement::{self, NodeGpus};
use cellsched_core::config::Config;
use cellsched_core::estimator::Estimator;
use cellsched_core::rank_cache::RankCache;
use cellsched_slurm_ffi::ctld;
use cellsched_slurm_ffi::host::FileStamp;
use cellsched_slurm_ffi::log;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;


/// Config and estimator in force; `None` = stock behaviour.
pub(crate) struct Loaded {
    pub(crate) cfg: Config,
    pub(crate) est: Estimator,
    /// Cell rankings of `est` (a new estimator comes with an empty cache).
    pub(crate) ranks: RankCache,
}

pub(crate) static LOADED: RwLock<Option<Arc<Loaded>>> = RwLock::new(None);
/// What the last config load attempt read: the config path and its
/// modification time, and those of the profile DB it named (a changed
/// profile DB recalibrates the estimator, which empties the caches).
type SourceStamp = (FileStamp, Option<FileStamp>);
pub(crate) static SOURCE: Mutex<Option<SourceStamp>> = Mutex::new(None);
/// The node table's GPUs, shared by submissions and the re-planning thread.
pub(crate) static NODES: Mutex<Option<NodeCache>> = Mutex::new(None);
pub(crate) fn info(msg: &str) {
    log::info(&format!("job_submit/cellsched: {msg}"));
}
pub(crate) fn error(msg: &str) {
    log::error(&format!("job_submit/cellsched: {msg}"));
}

/// The profile DB named by the configuration in force, as it is now.
fn db_stamp() -> Option<FileStamp> {
    Some(FileStamp::of(current()?.cfg.estimator.profile_db.as_deref()?))
}

/// Builds the estimator; data files that fail are logged and skipped.
pub(crate) fn estimator(cfg: &Config) -> Estimator {
    let a = Estimator::from_config(&cfg.estimator, None);
    for p in &a.problems {
        error(p);
    }
    a.estimator
}

/// (Re)loads the config if its file changed since the last attempt (outside locks).
pub(crate) fn reload_if_changed() {
    let path = cellsched_slurm_ffi::host::config_path();
    let now = FileStamp::of(&path);
    {
        let src = SOURCE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((conf, db)) = src.as_ref() {
            if *conf == now && *db == db_stamp() {
                return;
            }
        }
    }
    let new = match Config::load(&path) {
        Ok(cfg) => {
            info(&format!(
                "loaded {}: placement {}, re-planning {} every {} s, max {} GPUs",
                path.display(),
                if cfg.placement.enabled { "on" } else { "off" },
                if cfg.placement.replan { "on" } else { "off" },
                cfg.placement.replan_interval_s,
                cfg.placement.max_gpus
            ));
            Some(Arc::new(Loaded { est: estimator(&cfg), cfg, ranks: RankCache::default() }))
        }
        Err(e) => {
            let last = current();
            error(&format!(
                "config error: {e}; {} until it is fixed",
                if last.is_some() {
                    "the last good configuration stays in force"
                } else {
                    "DL jobs keep their own GPU request (or are refused without one)"
                }
            ));
            last
        }
    };
    *LOADED.write().unwrap_or_else(|e| e.into_inner()) = new;
    let db = db_stamp();
    *SOURCE.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, db));
}

pub(crate) fn current() -> Option<Arc<Loaded>> {
    LOADED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The node table as read under the node read lock: the last parsed copy
/// while slurmctld's `last_node_update` says nothing changed, else the raw
/// fields (parsed by [`nodes_parsed`], which may run after the lock is released).
pub(crate) enum NodesRead {
    Cached(Arc<Vec<NodeGpus>>),
    Raw { stamp: Option<i64>, taken_s: i64, count: usize, nodes: Vec<ctld::NodeInfo> },
}

/// Reads the node table (caller holds the node read lock): no copy while
/// the cached one is still exact.
pub(crate) fn nodes_read() -> NodesRead {
    let stamp = ctld::last_node_update();
    let count = ctld::node_count();
    if let Some(stamp) = stamp {
        if let Some(n) = NODES.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(NodeCache::default).get(stamp, count) {
            return NodesRead::Cached(n);
        }
    }
    // Under the lock nothing changes the table, so the second read now is the copy's.
    let taken_s = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    NodesRead::Raw { stamp, taken_s, count, nodes: ctld::nodes() }
}

/// GPUs per node of a [`nodes_read`] result (no lock needed); a raw copy is parsed and cached.
pub(crate) fn nodes_parsed(read: NodesRead) -> Arc<Vec<NodeGpus>> {
    let (stamp, taken_s, count, raw) = match read {
        NodesRead::Cached(n) => return n,
        NodesRead::Raw { stamp, taken_s, count, nodes } => (stamp, taken_s, count, nodes),
    };
    let nodes: Vec<NodeGpus> =
        raw.iter().flat_map(|n| placement::node_gpus(&n.name, n.gres.as_deref(), n.gres_used.as_deref(), n.available)).collect();
    match stamp {
        Some(stamp) => NODES.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(NodeCache::default).put(stamp, taken_s, count, nodes),
        None => Arc::new(nodes),
    }
}

/// GPUs per node from the node table (caller holds the node read lock):
/// the last copy while slurmctld's `last_node_update` says nothing changed.
pub(crate) fn node_snapshot() -> Arc<Vec<NodeGpus>> {
    nodes_parsed(nodes_read())
}

/// Seconds since the Unix epoch.
pub(crate) fn now_unix() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

