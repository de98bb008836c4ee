//! The re-planning thread (slurmctld only): every `replan_interval_s` it
//! snapshots under the read locks only the pending DL jobs that are new or
//! changed since its last pass ([`cellsched_core::snapshot_cache`]), walking
//! the job list in pieces that hold the locks at most about
//! [`ctld::PIECE_HOLD`] each ([`ctld::for_each_job_in_pieces`]), computes
//! moves without locks (`cellsched_core::placement::plan_moves_cached`),
//! applies them through `update_job()` under the write locks, then asks the
//! scheduler to run.
use cellsched_core::job_env;
use cellsched_core::placement::{self, JobNow, ModifyContext, PendingDl, PlanWait, Reconcile};
use cellsched_core::config::OrderingConfig;
use cellsched_core::snapshot_cache::{self, SnapshotCache};
use cellsched_core::record;
use cellsched_slurm_ffi::ctld::{self, JobUpdate, LockKind};
use cellsched_slurm_ffi::host::Periodic;
use cellsched_slurm_ffi::log;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use crate::state::{current, error, info, nodes_parsed, nodes_read, now_unix, reload_if_changed, Loaded, NodesRead};


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
pub(crate) static PENDING_LOAD: Mutex<Option<placement::LoadView>> = Mutex::new(None);

/// A pending job with a cellsched decision, copied under the read locks
/// because it is new or changed since the last pass.
struct RawDl {
    id: u32,
    stamp: u64,
    comment: String,
    /// Its `CELLSCHED_*` `spank_job_env` entries only.
    env: Vec<String>,
    features: Option<String>,
    tres_per_node: Option<String>,
    min_nodes: u32,
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
                tres_per_node: job.tres_per_node().map(str::to_string),
                min_nodes: job.min_nodes(),
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
    // Request and record apart (an update Slurm refused after job_modify re-planned it): brought back together.
    let fixes: Vec<(u32, u64, Reconcile)> = fresh.iter().filter_map(|r| drift(r, &l, &nodes).map(|x| (r.id, comment_stamp(r.comment.as_bytes()), x))).collect();
    if !fixes.is_empty() {
        apply_reconciled(&fixes);
        // Copied again next pass whatever its stamp: the same text coming back (an edit
        // repeated within the second of `moved_at`) must not look unchanged.
        for (id, _, _) in &fixes {
            cache.forget(*id);
        }
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
                begin_time: None,
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

/// Without locks: how job `r`'s request and record are brought back
/// together, `None` when they agree or the job is not cellsched's to fix
/// (a typed GPU request, a pinned Cell or plan, an admin's edit as is).
fn drift(r: &RawDl, l: &Loaded, nodes: &[placement::NodeGpus]) -> Option<Reconcile> {
    use cellsched_core::options::{CellChoice, PlanChoice};
    if r.typed || crate::modify::admin_edited(r.id) {
        return None;
    }
    let record = cellsched_core::record::DlRecord::parse(&r.comment)?;
    let opts = placement::dl_options(&r.env).ok().flatten()?;
    if opts.cell != CellChoice::Auto || opts.plan != PlanChoice::Auto {
        return None;
    }
    let now = JobNow { record: &record, env: &r.env, features: r.features.as_deref(), partition: None, pending: true };
    let ctx = ModifyContext { nodes, est: Some(&l.est), declared: &l.cfg.declared, gres_prefix: slurm_sys::compat::TRES_GRES_PREFIX, now: now_unix() };
    let nodes_now = if r.min_nodes == slurm_sys::NO_VAL || r.min_nodes == 0 { 1 } else { r.min_nodes };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| placement::reconcile(&now, r.tres_per_node.as_deref(), nodes_now, &ctx))).ok().flatten()
}

/// Under the write locks: writes each reconciliation (if the job's
/// AdminComment is still the one it was computed from) and logs it.
fn apply_reconciled(fixes: &[(u32, u64, Reconcile)]) {
    let applied = ctld::with_lock(LockKind::Write, || {
        let mut n = 0;
        for (id, stamp, fix) in fixes {
            let same = ctld::with_job(*id, |j| j.is_pending() && j.admin_comment_bytes().map(comment_stamp) == Some(*stamp));
            if same != Some(true) {
                continue;
            }
            let (u, text, what) = match fix {
                Reconcile::Record(x) => {
                    let comment = ctld::with_job(*id, |j| x.record.admin_comment_after(j.admin_comment())).unwrap_or_else(|| x.record.to_string());
                    (
                        JobUpdate {
                            job_id: *id,
                            features: Some(x.rewrite.features.clone()),
                            gres: Some(format!("gpu:{}", x.estimate.gpus_per_node)),
                            admin_comment: Some(comment),
                            min_nodes: Some(x.rewrite.nodes),
                            max_nodes: Some(x.rewrite.nodes),
                            num_tasks: None,
                            time_limit_min: x.time_limit_min,
                            begin_time: None,
                        },
                        Some(x.record.decision.to_admin_comment()),
                        format!("its record re-planned on the Cell its request names, {}", x.record.decision.cell),
                    )
                }
                Reconcile::Request(w) => (
                    JobUpdate {
                        job_id: *id,
                        features: Some(w.features.clone()),
                        gres: placement::gpu_request(Some(&w.tres_per_node)).map(|g| format!("gpu:{}", g.count)),
                        admin_comment: None,
                        min_nodes: Some(w.nodes),
                        max_nodes: Some(w.nodes),
                        num_tasks: None,
                        time_limit_min: None,
                        begin_time: None,
                    },
                    None,
                    format!("its request written back to its record's Cell (features={} {} on {} node(s))", w.features, w.tres_per_node, w.nodes),
                ),
            };
            match ctld::update_job(&u) {
                Ok(()) => {
                    if let Some(text) = &text {
                        let set = ctld::with_job(*id, |j| {
                            j.env_set(job_env::DECISION_KEY, text)?;
                            job_env::DECISION_ENV_KEYS.iter().try_for_each(|k| j.env_sup_set(k, text))
                        });
                        if let Some(Err(e)) = set {
                            error(&format!("JobId={id}: {e}; its tasks may see an older decision"));
                        }
                    }
                    info(&format!("JobId={id}: request and record disagreed (an update refused after job_modify?): {what}"));
                    n += 1;
                }
                Err(e) => error(&format!("JobId={id}: reconciling request and record failed: {e}")),
            }
        }
        n
    });
    if matches!(applied, Ok(n) if n > 0) {
        let _ = ctld::queue_scheduler();
    }
}

pub(crate) fn start_thread() {
    let interval = || current().map(|l| l.cfg.placement.replan_interval_s).unwrap_or(30);
    match Periodic::start("job_submit/cellsched", "replan", interval, replan_pass) {
        Ok(p) => *THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(p),
        Err(e) => error(&format!("cannot start the re-planning thread: {e}; placement at submit only")),
    }
}

/// Stops the re-planning thread within a bound (fini may be called while
/// slurmctld holds its locks, at reconfigure) and frees its caches unless a
/// pass still holds them.
pub(crate) fn stop_thread() {
    if let Some(p) = THREAD.lock().unwrap_or_else(|e| e.into_inner()).take() {
        p.stop("job_submit/cellsched", Duration::from_secs(5));
    }
    if let Ok(mut g) = REPLAN_JOBS.try_lock() {
        *g = None;
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::estimator;
    use cellsched_core::config::Config;
    use cellsched_core::rank_cache::RankCache;
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
                    tres_per_node: Some("gres:gpu:1".into()),
                    min_nodes: 1,
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
        // The typed record (2026-11-26) holds every fact of the AdminComment: 512 bytes per job then;
        // ~700 with the array type set, the elastic history and the private reference (issues 31, 33).
        assert!(per_job < 768.0 && per_job < per_job_old, "{per_job:.0} bytes per job (before: {per_job_old:.0})");
        // The parse keeps what a move's check needs: the comment's stamp.
        assert_eq!(cache.get(1).map(|p| p.1), Some(comment_stamp(raws[0].comment.as_bytes())));
    }
}

