//! Exported plugin symbols and the re-planning thread.
//!
//! `job_submit()` runs under slurmctld's conf/job/node/part read locks: it
//! uses the config and estimator loaded at `init` (or by the thread when the
//! file or the profile DB changes), the node table's GPUs (copied again only
//! when slurmctld's `last_node_update` moved, [`crate::node_cache`]) and the
//! Cell rankings cached by (model, batch, cluster shape)
//! ([`cellsched_core::rank_cache`], rebuilt with the estimator); no file I/O.
//! The thread (slurmctld only) sleeps on a condvar, snapshots under the read
//! locks only the jobs that are new or changed since its last pass
//! ([`cellsched_core::snapshot_cache`]), walking the job list in pieces that
//! hold the locks at most about [`ctld::PIECE_HOLD`] each
//! ([`ctld::for_each_job_in_pieces`]), computes without locks, and applies
//! moves through `update_job()` under the write locks, then asks the
//! scheduler to run.
//!
//! A config file that fails to load leaves the last good configuration in
//! force (logged); with none yet, DL jobs keep their own GPU request or are
//! refused without one ([`placement::fallback`]).
use crate::node_cache::NodeCache;
use cellsched_core::job_env;
use cellsched_core::placement::{self, NodeGpus, Outcome, PendingDl, PlanWait, SubmitRequest};
use cellsched_core::config::{Config, OrderingConfig};
use cellsched_core::declared::DeclaredConfig;
use cellsched_core::estimator::Estimator;
use cellsched_core::rank_cache::RankCache;
use cellsched_core::snapshot_cache::{self, SnapshotCache};
use cellsched_core::record;
use cellsched_slurm_ffi::ctld::{self, JobUpdate, LockKind};
use cellsched_slurm_ffi::host::{FileStamp, Periodic};
use cellsched_slurm_ffi::{cstr, guard, log, version};
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

cellsched_slurm_ffi::plugin_identity!(name: "cellsched Cell placement", kind: "job_submit/cellsched");

/// Config and estimator in force; `None` = stock behaviour.
pub(crate) struct Loaded {
    pub(crate) cfg: Config,
    pub(crate) est: Estimator,
    /// Cell rankings of `est` (a new estimator comes with an empty cache).
    ranks: RankCache,
}

static LOADED: RwLock<Option<Arc<Loaded>>> = RwLock::new(None);
/// What the last config load attempt read: the config path and its
/// modification time, and those of the profile DB it named (a changed
/// profile DB recalibrates the estimator, which empties the caches).
type SourceStamp = (FileStamp, Option<FileStamp>);
static SOURCE: Mutex<Option<SourceStamp>> = Mutex::new(None);
/// The node table's GPUs, shared by submissions and the re-planning thread.
static NODES: Mutex<Option<NodeCache>> = Mutex::new(None);
/// What the re-planning thread parsed from each pending DL job (with the
/// [`comment_stamp`] of the AdminComment it was parsed from, not the text),
/// and for which configuration. Boxed: the map's slots (a quarter to a half
/// of them empty) hold a pointer, not a 330-byte `PendingDl`.
/// (The configuration is held, so its address is never reused by a newer one while cached.)
/// The third field is the pass's list of pending DL jobs, kept to reuse its buffer.
static REPLAN_JOBS: Mutex<Option<(Arc<Loaded>, SnapshotCache<Parsed>, Vec<Seen>)>> = Mutex::new(None);
/// A pending DL job as re-planning sees it, with the [`comment_stamp`] of its AdminComment.
type Parsed = Box<(PendingDl, u64)>;
static THREAD: Mutex<Option<Periodic>> = Mutex::new(None);
/// The GPUs per type the pending DL jobs wait for, as of the last
/// re-planning pass: the load a submitted job is sized against
/// (`placement::place_under_load`). `None` before the first pass.
static PENDING_LOAD: Mutex<Option<placement::LoadView>> = Mutex::new(None);

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
fn estimator(cfg: &Config) -> Estimator {
    let a = Estimator::from_config(&cfg.estimator, None);
    for p in &a.problems {
        error(p);
    }
    a.estimator
}

/// (Re)loads the config if its file changed since the last attempt (outside locks).
fn reload_if_changed() {
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
enum NodesRead {
    Cached(Arc<Vec<NodeGpus>>),
    Raw { stamp: Option<i64>, taken_s: i64, count: usize, nodes: Vec<ctld::NodeInfo> },
}

/// Reads the node table (caller holds the node read lock): no copy while
/// the cached one is still exact.
fn nodes_read() -> NodesRead {
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
fn nodes_parsed(read: NodesRead) -> Arc<Vec<NodeGpus>> {
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

unsafe fn opt_str(p: *const c_char) -> Option<String> {
    cstr::borrow_nonempty(p).map(str::to_string)
}

/// Applies a placement to the job descriptor: the request rewrite, the
/// AdminComment (decision + report tags), and the decision in the job's
/// `spank_job_env` (prolog/epilog) and, for batch jobs, in the batch
/// environment (the batch step and its `srun` steps, see [`job_env::DECISION_ENV_KEYS`]).
unsafe fn apply(desc: &mut slurm_sys::job_desc_msg_t, p: &placement::Placement, declared: &DeclaredConfig) -> Result<(), String> {
    let text = p.record.decision.to_admin_comment();
    let mut record = p.record.clone();
    if let Some(w) = &p.rewrite {
        rewrite_request(desc, w)?;
    }
    // Declared work bounds the job (NO_VAL: no limit asked for; INFINITE is larger than any bound).
    let current = if desc.time_limit == slurm_sys::NO_VAL { 0 } else { desc.time_limit };
    if let Some(b) = placement::bounded_limit(current, record.iters, record.decision.iter_s, declared) {
        desc.time_limit = b;
        record.limit_min = Some(b);
    }
    let comment = record.admin_comment_after(opt_str(desc.admin_comment).as_deref());
    cstr::replace_xstr(&mut desc.admin_comment, &comment).map_err(|e| e.to_string())?;
    ctld::desc_env_set(desc, job_env::DECISION_KEY, &text).map_err(|e| e.to_string())?;
    for key in job_env::DECISION_ENV_KEYS {
        ctld::desc_environment_set(desc, key, &text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Writes a request rewrite (feature, untyped GPUs per node, node count) into the descriptor.
unsafe fn rewrite_request(desc: &mut slurm_sys::job_desc_msg_t, w: &placement::Rewrite) -> Result<(), String> {
    cstr::replace_xstr(&mut desc.features, &w.features).map_err(|e| e.to_string())?;
    cstr::replace_xstr(&mut desc.tres_per_node, &w.tres_per_node).map_err(|e| e.to_string())?;
    for field in [&mut desc.tres_per_job, &mut desc.tres_per_socket, &mut desc.tres_per_task] {
        if !field.is_null() {
            match placement::without_gpus(opt_str(*field).as_deref()) {
                Some(rest) => cstr::replace_xstr(field, &rest).map_err(|e| e.to_string())?,
                None => {
                    slurm_sys::shim::cellsched_xfree((*field).cast());
                    *field = std::ptr::null_mut();
                }
            }
        }
    }
    desc.min_nodes = w.nodes;
    desc.max_nodes = w.nodes;
    Ok(())
}

/// Seconds since the Unix epoch.
pub(crate) fn now_unix() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// slurmctld's local time minus UTC at `t` (for `--dl-deadline` local times).
fn local_utc_offset(t: i64) -> i64 {
    let tt = t as libc::time_t;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r writes only into `tm`.
    if unsafe { libc::localtime_r(&tt, &mut tm) }.is_null() {
        return 0;
    }
    tm.tm_gmtoff as i64
}

#[no_mangle]
pub extern "C" fn job_submit(desc: *mut slurm_sys::job_desc_msg_t, _uid: u32, err_msg: *mut *mut c_char) -> c_int {
    guard("job_submit/cellsched job_submit", slurm_sys::SLURM_SUCCESS, || {
        let Some(desc) = (unsafe { desc.as_mut() }) else { return slurm_sys::SLURM_SUCCESS };
        let env: Vec<String> = ctld::desc_env(desc).into_iter().map(str::to_string).collect();
        if !job_env::has_dl_options(&env) {
            return slurm_sys::SLURM_SUCCESS; // not a DL job: untouched
        }
        let now = now_unix();
        let req = unsafe {
            SubmitRequest {
                gres_prefix: slurm_sys::compat::TRES_GRES_PREFIX,
                env,
                features: opt_str(desc.features),
                tres_per_node: opt_str(desc.tres_per_node),
                tres_per_job: opt_str(desc.tres_per_job),
                min_nodes: (desc.min_nodes != slurm_sys::NO_VAL && desc.min_nodes > 0).then_some(desc.min_nodes),
                het_component: desc.het_job_offset != slurm_sys::NO_VAL,
                now,
                utc_offset_s: local_utc_offset(now),
            }
        };
        let nodes = node_snapshot();
        // A panic in the placement logic must not cost the job its GPUs either.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match current() {
            Some(l) => {
                // Never wait for the re-planning thread: without its view, marginal value alone.
                let pending = PENDING_LOAD.try_lock().ok().and_then(|g| g.clone());
                placement::place_under_load(&req, &nodes, &l.cfg.placement, &l.est, Some(&l.ranks), pending.as_ref())
            }
            None => placement::fallback(&req, &nodes, "no valid cellsched.toml"),
        }))
        .unwrap_or_else(|_| placement::fallback(&req, &nodes, "internal error in placement (see slurmctld log)"));
        match outcome {
            Outcome::Stock(why) => {
                info(&format!("DL job left stock: {why}"));
                slurm_sys::SLURM_SUCCESS
            }
            Outcome::Honour(why, w) => match unsafe { rewrite_request(desc, &w) } {
                Ok(()) => {
                    info(&format!("DL job not placed ({why}): features={} {}", w.features, w.tres_per_node));
                    slurm_sys::SLURM_SUCCESS
                }
                Err(e) => reject(err_msg, &format!("cellsched: cannot write the requested Cell into the job ({e})")),
            },
            Outcome::Reject(msg) => reject(err_msg, &msg),
            Outcome::Place(p) => match unsafe { apply(desc, &p, &current().map(|l| l.cfg.declared.clone()).unwrap_or_default()) } {
                Ok(()) => {
                    info(&format!(
                        "placed {} job on {}{} ({})",
                        if p.pinned { "pinned" } else { "auto" },
                        p.record.decision.cell,
                        p.rewrite.as_ref().map(|w| format!(" features={} {}", w.features, w.tres_per_node)).unwrap_or_default(),
                        p.admin_comment()
                    ));
                    if let Some(msg) = &p.user_message() {
                        // With SLURM_SUCCESS, sbatch/srun print this once as `sbatch: ...`.
                        if !err_msg.is_null() {
                            if let Ok(m) = cstr::xstrdup(msg) {
                                unsafe { *err_msg = m };
                            }
                        }
                    }
                    slurm_sys::SLURM_SUCCESS
                }
                // The request may be half rewritten: refuse rather than run with the wrong GPUs.
                Err(e) => {
                    error(&format!("cannot rewrite job request ({e})"));
                    reject(err_msg, &format!("cellsched: internal error writing the placement into the job ({e}); please resubmit"))
                }
            },
        }
    })
}

/// Logs and returns a refusal with `msg` shown to the user.
fn reject(err_msg: *mut *mut c_char, msg: &str) -> c_int {
    info(&format!("rejected submission: {msg}"));
    if !err_msg.is_null() {
        if let Ok(p) = cstr::xstrdup(msg) {
            unsafe { *err_msg = p };
        }
    }
    slurm_sys::SLURM_ERROR
}

/// A pending job with a cellsched decision, copied under the read locks
/// because it is new or changed since the last pass.
struct RawDl {
    id: u32,
    stamp: u64,
    comment: String,
    /// Its `CELLSCHED_*` `spank_job_env` entries only.
    env: Vec<String>,
    features: Option<String>,
    typed: bool,
}

/// What the pass saw of each pending job with a cellsched decision.
#[derive(Debug, Clone, Copy)]
struct Seen {
    id: u32,
    priority: u32,
    /// Backfill's expected start (Unix seconds; 0: none yet).
    start_time: i64,
    submit_time: i64,
    time_limit_min: Option<u32>,
}

/// What marks a job cellsched placed, in its AdminComment (core's [`record::PREFIX`]).
const MARKER: &[u8] = record::PREFIX.as_bytes();

/// Every pending job with a cellsched decision (into `seen`, cleared
/// first: its buffer is reused from pass to pass), and copies of those
/// `cache` does not hold at their current stamp. Walks the job list in
/// pieces under the read locks ([`ctld::for_each_job_in_pieces`]); an
/// unchanged job costs a byte scan and a hash of its three strings and one
/// lookup: no UTF-8 check, no allocation. `None` when the walk was cut short.
fn scan_jobs(cache: &SnapshotCache<Parsed>, seen: &mut Vec<Seen>) -> Option<(Vec<RawDl>, ctld::WalkStats)> {
    seen.clear();
    let mut fresh = Vec::new();
    let walk = ctld::for_each_job_in_pieces(LockKind::Read, true, ctld::PIECE_HOLD, |job| {
        let Some(comment) = job.admin_comment_bytes().filter(|c| snapshot_cache::contains(c, MARKER)) else { return };
        let stamp = snapshot_cache::stamp_bytes(&[Some(comment), job.features_bytes(), job.tres_per_node_bytes()]);
        let id = job.id();
        if cache.wants(id, stamp) {
            // Copied with the checks the parse needs (a field that is not UTF-8 reads as absent, as before).
            let Some(comment) = job.admin_comment() else { return };
            fresh.push(RawDl {
                id,
                stamp,
                comment: comment.to_string(),
                env: job.env().filter(|e| e.contains("CELLSCHED_")).map(str::to_string).collect(),
                features: job.features().map(str::to_string),
                typed: placement::gpu_request(job.tres_per_node()).is_some_and(|g| g.gpu_type.is_some()),
            });
        }
        seen.push(Seen { id, priority: job.priority(), start_time: job.start_time(), submit_time: job.submit_time(), time_limit_min: job.time_limit() });
    })
    .ok()
    .filter(|w| w.complete)?;
    // A job is listed once even if the list were reordered between pieces.
    seen.sort_unstable_by_key(|s| s.id);
    seen.dedup_by_key(|s| s.id);
    Some((fresh, walk))
}

/// What identifies an AdminComment for the check before a move (a hash of
/// its bytes: the cache keeps 8 bytes per job instead of the text).
fn comment_stamp(comment: &[u8]) -> u64 {
    snapshot_cache::stamp_bytes(&[Some(comment)])
}

/// Without locks: the job as re-planning sees it, `None` unless cellsched
/// placed it automatically (no typed GPUs, no pinned Cell or plan).
fn parse_dl(r: &RawDl, l: &Loaded) -> Option<Parsed> {
    if r.typed {
        return None;
    }
    let p = PendingDl::from_job(r.id, &r.comment, &r.env, r.features.clone(), &l.est, now_unix())?;
    Some(Box::new((p, comment_stamp(r.comment.as_bytes()))))
}

/// What slurmctld knows of job `p`'s wait for its current Cell: backfill's
/// expected start (`squeue --start`; until backfill has reached the job,
/// now, so only the time it has waited argues for a slower Cell), the time
/// it has waited, and its work left there (declared iterations, else its
/// time limit, else `ordering.default_remaining_s`).
fn plan_wait(p: &PendingDl, s: &Seen, now: i64, ordering: &OrderingConfig) -> PlanWait {
    let rem_plan_s = cellsched_core::ordering::remaining_s(p.record.iters.map(|n| n as f64), p.decision().iter_s, None, s.time_limit_min, ordering);
    // Backfill's forecast covers both the GPUs' release and the queue ahead:
    // all of it is the wait the waited-time correction applies to.
    PlanWait {
        plan_free_at_s: now as f64,
        queue_ahead_s: (s.start_time - now).max(0) as f64,
        waited_s: (now - s.submit_time).max(0) as f64,
        rem_plan_s,
    }
}

/// One re-planning pass.
fn replan_pass() {
    reload_if_changed();
    let Some(l) = current().filter(|l| l.cfg.placement.enabled && l.cfg.placement.replan) else {
        // Re-planning off (or no configuration): nothing to keep the parses for.
        if let Ok(mut g) = REPLAN_JOBS.try_lock() {
            *g = None;
        }
        return;
    };
    // The parse cache belongs to one configuration (its estimator and model catalog).
    let mut guard_jobs = REPLAN_JOBS.lock().unwrap_or_else(|e| e.into_inner());
    if guard_jobs.as_ref().map_or(true, |(k, _, _)| !Arc::ptr_eq(k, &l)) {
        *guard_jobs = Some((l.clone(), SnapshotCache::default(), Vec::new()));
    }
    let (cache, seen) = {
        let g = guard_jobs.as_mut().expect("set above");
        (&mut g.1, &mut g.2)
    };
    let Some((fresh, walk)) = scan_jobs(cache, seen) else { return };
    // The node table in a hold of its own.
    let t0 = Instant::now();
    let Ok((nodes_now, held, nodes_us)) = ctld::with_lock(LockKind::Read, || {
        let held = Instant::now();
        (nodes_read(), held, held.elapsed().as_micros())
    }) else {
        return;
    };
    // The longest time the read locks were held at once (the cost to slurmctld), and the wait for them.
    let snapshot_us = walk.max_hold_us.max(nodes_us);
    let waited_us = walk.wait_us + held.duration_since(t0).as_micros();
    let t1 = Instant::now();
    let nodes_copied = matches!(nodes_now, NodesRead::Raw { .. });
    let nodes = nodes_parsed(nodes_now);
    let copied = fresh.len();
    for r in &fresh {
        cache.insert(r.id, r.stamp, parse_dl(r, &l));
    }
    cache.retain_live(&seen.iter().map(|s| s.id).collect::<snapshot_cache::IdSet>());
    // Held jobs (priority 0) are not moved; highest priority first.
    let mut ranked: Vec<(&Seen, &(PendingDl, u64))> =
        seen.iter().filter(|s| s.priority > 0).filter_map(|s| cache.get(s.id).map(|p| (s, &**p))).collect();
    ranked.sort_by(|a, b| b.0.priority.cmp(&a.0.priority).then(a.1 .0.id.cmp(&b.1 .0.id)));
    let n_pending = ranked.len();
    if n_pending == 0 {
        if let Ok(mut g) = PENDING_LOAD.lock() {
            *g = Some(placement::LoadView::new()); // nobody waits
        }
        return;
    }
    // Planned on references into the cache (no per-pass copy of every job):
    // the cache's own mutex stays held while planning; no slurmctld lock is.
    let now = now_unix();
    let pending: Vec<(&PendingDl, Option<PlanWait>)> = ranked.iter().map(|(s, (p, _))| (p, Some(plan_wait(p, s, now, &l.cfg.ordering)))).collect();
    let mut wanted = placement::LoadView::new();
    for (p, _) in &pending {
        wanted.add_wanted(&p.record.decision.cell.gpu_type, u64::from(p.record.decision.cell.gpus));
    }
    if let Ok(mut g) = PENDING_LOAD.lock() {
        *g = Some(wanted);
    }
    drop(ranked);
    let moves = placement::plan_moves_cached(&pending, &nodes, &l.cfg.placement, &l.cfg.declared, &l.est, Some(&l.ranks), now as f64);
    drop(pending);
    // The AdminComment each moved job was parsed from, for the check before the move.
    let comments: snapshot_cache::IdMap<u64> = moves.iter().filter_map(|m| cache.get(m.id).map(|p| (m.id, p.1))).collect();
    drop(guard_jobs);
    // Costs of the pass (shown with `scontrol setdebug debug`): the snapshot
    // holds slurmctld's read locks, the planning holds none.
    let (hits, misses, held, _) = l.ranks.stats();
    log::debug(&format!(
        "job_submit/cellsched: re-planning pass over {} pending DL jobs: snapshot {} us (the longest of {} read-lock holds; {} us held in all, {} us waiting for them; {} jobs copied, node table {} in {} us), planning {} us, {} moves; rank cache {} hits, {} misses, {} held; plugin heap {} KiB (peak {} KiB)",
        n_pending,
        snapshot_us,
        walk.pieces + 1,
        walk.total_hold_us + nodes_us,
        waited_us,
        copied,
        if nodes_copied { "copied" } else { "cached" },
        nodes_us,
        t1.elapsed().as_micros(),
        moves.len(),
        hits,
        misses,
        held,
        cellsched_slurm_ffi::heap::live_bytes() / 1024,
        cellsched_slurm_ffi::heap::peak_bytes() / 1024
    ));
    if moves.is_empty() {
        return;
    }
    let applied = ctld::with_lock(LockKind::Write, || {
        let mut n = 0;
        for m in &moves {
            // Still pending, and nobody changed it since the snapshot (never while starting).
            // (The AdminComment compared by a 64-bit hash of its bytes, taken when it was parsed.)
            let same = ctld::with_job(m.id, |j| {
                j.is_pending() && j.admin_comment().is_some() && j.admin_comment_bytes().map(comment_stamp) == comments.get(&m.id).copied()
            });
            if same != Some(true) {
                continue;
            }
            let u = JobUpdate {
                job_id: m.id,
                features: Some(m.features.clone()),
                gres: Some(m.gres.clone()),
                admin_comment: Some(m.admin_comment()),
                min_nodes: Some(m.to.nodes),
                max_nodes: Some(m.to.nodes),
                num_tasks: None,
                time_limit_min: m.time_limit_min,
            };
            match ctld::update_job(&u) {
                Ok(()) => {
                    let text = m.decision_text();
                    // spank_job_env (prolog/epilog) and env_sup: slurmctld adds env_sup to the
                    // batch environment at launch, overriding the decision saved at submit, and
                    // sends it to srun/salloc in the allocation response.
                    let set = ctld::with_job(m.id, |j| {
                        j.env_set(job_env::DECISION_KEY, &text)?;
                        job_env::DECISION_ENV_KEYS.iter().try_for_each(|k| j.env_sup_set(k, &text))
                    });
                    if let Some(Err(e)) = set {
                        error(&format!("JobId={}: {e}; its tasks may see the decision made at submit", m.id));
                    }
                    info(&format!("re-planned JobId={} from {} to {} ({})", m.id, m.from.cell, m.to.cell, text));
                    n += 1;
                }
                Err(e) => error(&format!("re-planning JobId={} to {} failed: {e}", m.id, m.to.cell)),
            }
        }
        n
    });
    if matches!(applied, Ok(n) if n > 0) {
        let _ = ctld::queue_scheduler();
    }
}

fn start_thread() {
    let interval = || current().map(|l| l.cfg.placement.replan_interval_s).unwrap_or(30);
    match Periodic::start("job_submit/cellsched", "replan", interval, replan_pass) {
        Ok(p) => *THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(p),
        Err(e) => error(&format!("cannot start the re-planning thread: {e}; placement at submit only")),
    }
}

#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard("job_submit/cellsched init", slurm_sys::SLURM_ERROR, || {
        if let Err(e) = version::check_running_slurm() {
            error(&format!("{e}; refusing to load"));
            return slurm_sys::SLURM_ERROR;
        }
        *SOURCE.lock().unwrap_or_else(|e| e.into_inner()) = None;
        reload_if_changed();
        if ctld::in_slurmctld() {
            cellsched_slurm_ffi::plugin::pin_library();
            start_thread();
        }
        slurm_sys::SLURM_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("job_submit/cellsched fini", slurm_sys::SLURM_SUCCESS, || {
        // fini may be called while slurmctld holds its locks (reconfigure): wait a bounded time.
        if let Some(p) = THREAD.lock().unwrap_or_else(|e| e.into_inner()).take() {
            p.stop("job_submit/cellsched", Duration::from_secs(5));
        }
        *LOADED.write().unwrap_or_else(|e| e.into_inner()) = None;
        // Free the caches; never wait for a pass still running (it may wait for slurmctld's locks).
        if let Ok(mut g) = REPLAN_JOBS.try_lock() {
            *g = None;
        }
        if let Ok(mut g) = NODES.try_lock() {
            *g = None;
        }
        slurm_sys::SLURM_SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Counts the bytes this thread has allocated and not freed (requested sizes).
    struct Counting;
    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let p = System.alloc(l);
            if !p.is_null() {
                let _ = LIVE.try_with(|c| c.set(c.get() + l.size() as isize));
            }
            p
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            System.dealloc(p, l);
            let _ = LIVE.try_with(|c| c.set(c.get() - l.size() as isize));
        }
    }
    #[global_allocator]
    static ALLOC: Counting = Counting;

    fn live() -> isize {
        LIVE.with(Cell::get)
    }

    /// Benchmark and bound: what the re-planning cache keeps per pending DL
    /// job, for jobs as the scale bench submits them (5,000 auto-placed DL jobs).
    #[test]
    fn replan_cache_keeps_little_per_job() {
        let cfg = Config::default();
        let l = Loaded { est: estimator(&cfg), cfg, ranks: RankCache::default() };
        let raws: Vec<RawDl> = (0..5000u32)
            .map(|i| {
                let (model, iter_s, mb) = if i % 2 == 0 { ("gpt2", 2.294467, 4) } else { ("bert_large", 0.288089, 1) };
                let iters = 1000 + i;
                RawDl {
                    id: i + 1,
                    stamp: u64::from(i),
                    comment: format!(
                        "cellsched: cell=a100x1x1 nodes=1 dp=1 tp=1 pp=1 mb={mb} zero=0 ckpt=0 iter_s={iter_s} src=datasheet model={model} batch=32 iters={iters} gpus=1 limit_min=145"
                    ),
                    env: vec![format!("CELLSCHED_DL_MODEL={model}"), "CELLSCHED_DL_BATCH=32".into(), format!("CELLSCHED_DL_ITERS={iters}")],
                    features: Some("a100".into()),
                    typed: false,
                }
            })
            .collect();
        let before = live();
        let mut cache: SnapshotCache<Parsed> = SnapshotCache::default();
        for r in &raws {
            let parsed = parse_dl(r, &l);
            assert!(parsed.is_some(), "job {} not parsed: {}", r.id, r.comment);
            cache.insert(r.id, r.stamp, parsed);
        }
        let total = live() - before;
        let per_job = total as f64 / raws.len() as f64;
        // The layout before 2026-11-24's change, for comparison: unboxed, with the AdminComment text.
        let before_old = live();
        let mut old: SnapshotCache<(PendingDl, String)> = SnapshotCache::default();
        for r in &raws {
            old.insert(r.id, r.stamp, parse_dl(r, &l).map(|p| (p.0, r.comment.clone())));
        }
        let per_job_old = (live() - before_old) as f64 / raws.len() as f64;
        eprintln!(
            "re-planning cache: {:.0} bytes per pending DL job ({} jobs, {} bytes in all); unboxed with the AdminComment text: {:.0} bytes per job",
            per_job,
            raws.len(),
            total,
            per_job_old
        );
        // The typed record (2026-11-26) holds every fact of the AdminComment: 512 bytes per job then.
        assert!(per_job < 640.0 && per_job < per_job_old, "{per_job:.0} bytes per job (before: {per_job_old:.0})");
        // The parse keeps what a move's check needs: the comment's stamp.
        assert_eq!(cache.get(1).map(|p| p.1), Some(comment_stamp(raws[0].comment.as_bytes())));
    }
}
