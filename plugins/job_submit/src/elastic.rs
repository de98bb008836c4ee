//! The elastic thread (slurmctld only): reconfiguration of running jobs
//! that opted in with `--dl-elastic` ([`cellsched_core::elastic`] decides,
//! this module carries it out with Slurm's own mechanisms).
//!
//! Each pass (every `elastic.interval_s`, every [`POLL_S`] while a job is
//! in flight) snapshots under the read locks, in short holds
//! ([`ctld::for_each_job_in_pieces`]), the running elastic jobs, the
//! pending DL jobs and the jobs in flight (between decisions, only the
//! jobs in flight, looked up by id), then without locks:
//!
//! 1. **In flight** (signalled earlier): a job still running at
//!    `signalled + grace_s` is requeued (it ignored the signal); a job that
//!    ended with [`job_env::RECONF_EXIT`] (checkpoint written) is requeued at
//!    once; a job that ended otherwise finished during the grace and is left
//!    alone. A requeued job, once pending again (its old run completed: at
//!    once for a job that exited on the signal), gets
//!    its new decision like a re-planning move (features, GRES, nodes,
//!    AdminComment with `restarts` + 1, `CELLSCHED_DECISION`) and may start
//!    at once (Slurm holds a requeued job back for its credential window;
//!    the begin time is set to now, after the old run's kill).
//! 2. **New decisions**: [`elastic::decide`] on the snapshot; each action
//!    signals the job (the batch script and all steps, `scancel --full`
//!    semantics) and records `reconf_at` in its AdminComment.
//!
//! Slurm operations run under the write locks, one short hold per pass for
//! all of them. Only jobs whose record says `elastic=` (set by job_submit
//! from `--dl-elastic`) and that Slurm may requeue are ever signalled or
//! requeued. A failed requeue leaves the job running (logged); nothing is
//! cancelled. The in-flight table lives in memory; the first pass after
//! the thread starts (a slurmctld start) and slurmctld recovered its saved
//! jobs adopts the jobs whose
//! record says they were signalled in their current run
//! ([`elastic::resume_after_restart`]): such a job is still requeued once
//! it checkpointed or its grace passed, on its own record, and placed again
//! by the normal path (the target of its forgotten action is not known).
//! A requeue also waits while a node of the job has not registered with
//! this slurmctld yet ([`ctld::Job::awaits_node_registration`]): a
//! restarted slurmctld recovers its node table before the slurmds
//! register, and freeing a job's GPUs on a node not registered yet could
//! start its next run there without GPUs and leave one of them counted as
//! in use. A node that Slurm sets NOT_RESPONDING or DOWN meanwhile stops
//! the wait (it takes no new work; a job that exited on the signal is not
//! left ended until slurmctld forgets it).
use cellsched_core::elastic::{self, DecideContext, JobFacts, Phase, PlacementChooser, Reconfig};
use cellsched_core::job_env;
use cellsched_core::placement;
use cellsched_core::record::{self, DlRecord};
use cellsched_slurm_ffi::ctld::{self, JobPhase, JobUpdate, LockKind};
use cellsched_slurm_ffi::host::Periodic;
use cellsched_slurm_ffi::log;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use crate::state::{current, error, info, nodes_parsed, nodes_read, now_unix, reload_if_changed, Loaded};

/// Seconds between passes while a job is in flight (signalled, or requeued
/// and not yet re-planned): a job that exits after its checkpoint is
/// requeued within this, well inside Slurm's `MinJobAge`.
pub const POLL_S: u64 = 1;

/// What marks a job cellsched placed, in its AdminComment.
const MARKER: &[u8] = record::PREFIX.as_bytes();
/// What marks an elastic job's record.
const ELASTIC_MARK: &[u8] = b" elastic=";
/// What marks a record of a job signalled at least once.
const SIGNALLED_MARK: &[u8] = b" reconf_at=";

static THREAD: Mutex<Option<Periodic>> = Mutex::new(None);
/// Jobs signalled or requeued and not yet done with, by job id.
static IN_FLIGHT: Mutex<Option<HashMap<u32, InFlight>>> = Mutex::new(None);
/// Whether the jobs signalled before this thread started were adopted.
static ADOPTED: AtomicBool = AtomicBool::new(false);
/// When the last decision pass ran (Unix seconds).
static LAST_DECIDE: Mutex<i64> = Mutex::new(0);

/// A reconfiguration under way.
#[derive(Debug, Clone)]
struct InFlight {
    action: Reconfig,
    signalled_at: i64,
    stage: Stage,
    /// Whether the wait for its nodes' registration was logged.
    told_waiting: bool,
}

impl InFlight {
    fn new(action: Reconfig, signalled_at: i64) -> InFlight {
        InFlight { action, signalled_at, stage: Stage::Signalled, told_waiting: false }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Signalled; waiting for the job to exit or the grace to pass.
    Signalled,
    /// Requeued at this time; waiting for the old run to complete.
    Requeued(i64),
}

/// A job as the pass copied it under the read locks: Slurm's phase and
/// exit code, and the facts the rule's inputs are built from
/// ([`elastic::build_inputs`]).
#[derive(Debug, Clone)]
struct Raw {
    phase: JobPhase,
    exit_code: Option<u8>,
    /// A node of the job has yet to register with this slurmctld ([`ctld::Job::awaits_node_registration`]).
    awaits_nodes: bool,
    facts: JobFacts,
}

impl Raw {
    fn id(&self) -> u32 {
        self.facts.id
    }
}

/// What the next step for an in-flight job is, given its state now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Wait,
    /// Due for its requeue, but a node of the job has not registered with
    /// this slurmctld yet (it restarted): freeing the job's GPUs now could
    /// leave one counted as in use, so the requeue waits for the registration.
    WaitForNodes,
    Requeue,
    /// Pending again: write the new decision and let it start.
    Replan,
    /// Done with it: `true` when it finished on its own (left alone).
    Drop { finished: bool },
}

/// The step for a job in flight (pure: see the module doc). `now` and the
/// times are Unix seconds; `phase` and `exit_code` are `None` when slurmctld
/// no longer knows the job; `awaits_nodes` says whether a node of the job
/// has yet to register with this slurmctld (a requeue waits for it).
fn next_step(stage: Stage, signalled_at: i64, grace_s: u64, now: i64, phase: Option<JobPhase>, exit_code: Option<u8>, awaits_nodes: bool) -> Step {
    let Some(phase) = phase else { return Step::Drop { finished: true } };
    let requeue = if awaits_nodes { Step::WaitForNodes } else { Step::Requeue };
    match (stage, phase) {
        (Stage::Signalled, JobPhase::Running) if now >= signalled_at + grace_s as i64 => requeue,
        (Stage::Signalled, JobPhase::Running) => Step::Wait,
        (Stage::Signalled, JobPhase::Ended) if exit_code == Some(job_env::RECONF_EXIT) => requeue,
        (Stage::Signalled, JobPhase::Ended) => Step::Drop { finished: true },
        // Requeued by someone else meanwhile: treat as ours once it settles.
        (_, JobPhase::PendingCompleting) => Step::Wait,
        (_, JobPhase::Pending) => Step::Replan,
        // Restarted or ended before the decision could be written.
        (Stage::Requeued(_), JobPhase::Running | JobPhase::Ended) => Step::Drop { finished: false },
    }
}

/// Copies the jobs the pass needs (read locks, in pieces): pending DL jobs,
/// running elastic jobs, the jobs in `wanted` and, with `adopt`, ended
/// jobs that were signalled once; with the walk's lock holds. `None` when
/// the walk was cut short.
fn snapshot(wanted: &HashMap<u32, InFlight>, adopt: bool) -> Option<(Vec<Raw>, ctld::WalkStats)> {
    let mut out = Vec::new();
    let walk = ctld::for_each_job_in_pieces(LockKind::Read, false, ctld::PIECE_HOLD, |job| {
        let id = job.id();
        let Some(comment) = job.admin_comment_bytes().filter(|c| cellsched_core::snapshot_cache::contains(c, MARKER)) else { return };
        let phase = job.phase();
        let keep = wanted.contains_key(&id)
            || phase == JobPhase::Pending
            || (phase == JobPhase::Running && cellsched_core::snapshot_cache::contains(comment, ELASTIC_MARK))
            || (adopt && phase == JobPhase::Ended && cellsched_core::snapshot_cache::contains(comment, SIGNALLED_MARK));
        if keep {
            out.extend(raw(job));
        }
    })
    .ok()
    .filter(|w| w.complete)?;
    out.sort_unstable_by_key(Raw::id);
    out.dedup_by_key(|r| r.id());
    Some((out, walk))
}

/// Copies only the jobs in flight, by id, in one short read-locked hold
/// (a pass between decisions: no walk of the job list).
fn snapshot_in_flight(wanted: &HashMap<u32, InFlight>) -> Option<Vec<Raw>> {
    ctld::with_lock(LockKind::Read, || wanted.keys().filter_map(|id| ctld::with_job(*id, |j| raw(j)).flatten()).collect()).ok()
}

/// The copy of one job with a cellsched record (caller holds the read locks).
fn raw(job: &ctld::Job<'_>) -> Option<Raw> {
    let phase = job.phase();
    let comment = job.admin_comment()?;
    Some(Raw {
        phase,
        exit_code: if phase == JobPhase::Ended { job.exit_code() } else { None },
        awaits_nodes: phase != JobPhase::Pending && job.awaits_node_registration(),
        facts: JobFacts {
            id: job.id(),
            phase: match phase {
                JobPhase::Running => Phase::Running,
                JobPhase::Pending => Phase::Pending,
                _ => Phase::Other,
            },
            comment: comment.to_string(),
            // Only a running job's options and nodes are read (a pending job
            // counts by its record): copying them for thousands of pending
            // jobs would lengthen the read-lock holds.
            env: if phase == JobPhase::Pending { Vec::new() } else { job.env().filter(|e| e.contains("CELLSCHED_")).map(str::to_string).collect() },
            features: (phase != JobPhase::Pending).then(|| job.features().map(str::to_string)).flatten(),
            nodes: (phase != JobPhase::Pending).then(|| job.nodes().map(str::to_string)).flatten(),
            priority: job.priority(),
            start_time: job.start_time(),
            end_time: job.end_time(),
            time_limit_min: job.time_limit(),
            typed: placement::gpu_request(job.tres_per_node()).is_some_and(|g| g.gpu_type.is_some()),
            requeueable: job.is_batch() && job.requeue_allowed(),
        },
    })
}

/// Takes into `flights` the running or ended jobs whose record says they
/// were signalled in their current run but that no action is held for
/// (slurmctld restarted between the signal and the requeue).
fn adopt_signalled(raws: &[Raw], flights: &mut HashMap<u32, InFlight>) {
    for r in raws.iter().filter(|r| matches!(r.phase, JobPhase::Running | JobPhase::Ended)) {
        if flights.contains_key(&r.id()) {
            continue;
        }
        let Some(rec) = DlRecord::parse(&r.facts.comment) else { continue };
        if let Some((action, at)) = elastic::resume_after_restart(r.id(), &rec, r.facts.start_time) {
            info(&format!(
                "elastic JobId={} was signalled at {at}, before job_submit/cellsched started; it is requeued once it checkpoints or its grace passes",
                r.id()
            ));
            flights.insert(r.id(), InFlight::new(action, at));
        }
    }
}

/// Whether slurmctld has recovered its saved state. The thread starts with
/// the plugin, before slurmctld reads its state save; it builds the node
/// table and loads the saved jobs in one hold of the write locks, so a
/// node table seen under the read locks means the job list is complete
/// (before, it is empty, and adopting from it would miss every job).
fn state_recovered() -> bool {
    ctld::with_lock(LockKind::Read, ctld::node_count).is_ok_and(|n| n > 0)
}

/// The update that writes an action's outcome into the requeued, pending job.
fn replan_update(f: &InFlight, now: i64) -> JobUpdate {
    let lost = (now - f.signalled_at).max(0) as f64;
    let comment = DlRecord::parse(&f.action.admin_comment()).map(|r| r.with_reconf_cost(lost).to_string()).unwrap_or_else(|| f.action.admin_comment());
    match f.action.target() {
        Some(m) => JobUpdate {
            job_id: f.action.id(),
            features: Some(m.features.clone()),
            gres: Some(m.gres.clone()),
            admin_comment: Some(comment),
            min_nodes: Some(m.to.nodes),
            max_nodes: Some(m.to.nodes),
            num_tasks: None,
            time_limit_min: m.time_limit_min,
            begin_time: Some(now),
        },
        None => JobUpdate { job_id: f.action.id(), admin_comment: Some(comment), begin_time: Some(now), ..JobUpdate::default() },
    }
}

/// Writes the outcome of a requeued job's action into it (caller holds the
/// write locks): `None` while its old run still completes or slurmctld
/// refuses updates for a moment (try again),
/// `Some(true)` when written, `Some(false)` when the update failed (logged;
/// the job runs on its earlier decision).
fn apply_replan(id: u32, f: &InFlight, now: i64) -> Option<bool> {
    if ctld::with_job(id, |j| j.phase() == JobPhase::Pending) != Some(true) {
        return None;
    }
    let u = replan_update(f, now);
    let text = f.action.target().map(|m| m.decision_text());
    match ctld::update_job(&u) {
        Ok(()) => {
            if let Some(text) = &text {
                let set = ctld::with_job(id, |j| {
                    j.env_set(job_env::DECISION_KEY, text)?;
                    job_env::DECISION_ENV_KEYS.iter().try_for_each(|k| j.env_sup_set(k, text))
                });
                if let Some(Err(e)) = set {
                    error(&format!("JobId={id}: {e}; its tasks may see its earlier decision"));
                }
            }
            info(&format!(
                "elastic JobId={id} ({}) pending again{}",
                f.action.kind(),
                f.action.target().map(|m| format!(" on {}", m.to.cell)).unwrap_or_default()
            ));
            Some(true)
        }
        Err(e) if e.is_transient() => {
            info(&format!("writing the {} decision into requeued JobId={id}: {e} (slurmctld is still setting its accounting index); trying again", f.action.kind()));
            None
        }
        Err(e) => {
            error(&format!("writing the {} decision into requeued JobId={id} failed: {e}; it runs on its earlier decision", f.action.kind()));
            Some(false)
        }
    }
}

/// One pass.
fn elastic_pass() {
    reload_if_changed();
    let l = current();
    let mut guard = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    let flights = guard.get_or_insert_with(HashMap::new);
    let now = now_unix();
    let enabled = l.as_ref().is_some_and(|l| l.cfg.elastic.enabled && l.cfg.placement.enabled);
    let interval = l.as_ref().map_or(60, |l| l.cfg.elastic.interval_s) as i64;
    let decide_due = enabled && {
        let last = *LAST_DECIDE.lock().unwrap_or_else(|e| e.into_inner());
        now - last >= interval
    };
    // The first pass after slurmctld recovered its saved jobs adopts the jobs
    // signalled before this thread started (also with `enabled = false`: a
    // signalled job is always carried through).
    let adopt = !ADOPTED.load(Ordering::Relaxed) && state_recovered();
    if flights.is_empty() && !decide_due && !adopt {
        return;
    }
    let snap_t0 = std::time::Instant::now();
    let raws = if decide_due || adopt { snapshot(flights, adopt) } else { snapshot_in_flight(flights).map(|r| (r, ctld::WalkStats::default())) };
    let Some((raws, walk)) = raws else { return };
    if adopt {
        ADOPTED.store(true, Ordering::Relaxed);
        adopt_signalled(&raws, flights);
    }
    let snap_us = snap_t0.elapsed().as_micros();
    let by_id: HashMap<u32, &Raw> = raws.iter().map(|r| (r.id(), r)).collect();
    let grace = l.as_ref().map_or(120, |l| l.cfg.elastic.grace_s);

    // 1. Jobs in flight.
    let mut requeue = Vec::new();
    let mut replan = Vec::new();
    flights.retain(|id, f| {
        let raw = by_id.get(id);
        match next_step(f.stage, f.signalled_at, grace, now, raw.map(|r| r.phase), raw.and_then(|r| r.exit_code), raw.is_some_and(|r| r.awaits_nodes)) {
            Step::Wait => true,
            Step::WaitForNodes => {
                if !f.told_waiting {
                    f.told_waiting = true;
                    info(&format!(
                        "elastic JobId={id} ({}) is requeued once its nodes ({}) register with this slurmctld (restarted; until then it does not know which of their GPUs are in use)",
                        f.action.kind(),
                        raw.and_then(|r| r.facts.nodes.as_deref()).unwrap_or("?")
                    ));
                }
                true
            }
            Step::Requeue => {
                requeue.push(*id);
                true
            }
            Step::Replan => {
                replan.push((*id, f.clone()));
                false
            }
            Step::Drop { finished } => {
                if finished {
                    info(&format!("JobId={id} ended after the {} signal (exit code {:?}); left alone", f.action.kind(), raw.and_then(|r| r.exit_code)));
                } else {
                    info(&format!("JobId={id} started again before its {} decision was written; it runs on the placement path's", f.action.kind()));
                }
                false
            }
        }
    });

    // 2. New decisions, without locks.
    let mut actions = Vec::new();
    if decide_due {
        if let Some(l) = &l {
            *LAST_DECIDE.lock().unwrap_or_else(|e| e.into_inner()) = now;
            let nodes_t0 = std::time::Instant::now();
            let nodes = match ctld::with_lock(LockKind::Read, nodes_read) {
                Ok(n) => nodes_parsed(n),
                Err(_) => return,
            };
            let nodes_us = nodes_t0.elapsed().as_micros();
            let decide_t0 = std::time::Instant::now();
            let facts: Vec<JobFacts> = raws.iter().map(|r| r.facts.clone()).collect();
            let (running, waiting) = elastic::build_inputs(&facts, &|id| flights.contains_key(&id), &l.cfg.elastic, &l.cfg.ordering, &l.est, now);
            if !running.is_empty() {
                let ctx = DecideContext { cfg: &l.cfg.elastic, placement: &l.cfg.placement, declared: &l.cfg.declared, now };
                let mut chooser = PlacementChooser { est: &l.est, ranks: Some(&l.ranks), placement: &l.cfg.placement };
                actions = elastic::decide(&running, &waiting, &nodes, &ctx, &mut chooser);
            }
            // "snapshot N us" is the longest single read-lock hold (the walk
            // releases the locks between pieces), as the other threads log it.
            log::debug(&format!(
                "job_submit/cellsched: elastic pass over {} running elastic and {} waiting jobs: snapshot {} us (the longest of {} read-lock holds; {} us held in all, {} us waiting for them; {} jobs copied in {} us), node table {} us, deciding {} us (no locks), {} actions",
                running.len(),
                waiting.len(),
                walk.max_hold_us,
                walk.pieces,
                walk.total_hold_us,
                walk.wait_us,
                raws.len(),
                snap_us,
                nodes_us,
                decide_t0.elapsed().as_micros(),
                actions.len()
            ));
        }
    }
    if requeue.is_empty() && replan.is_empty() && actions.is_empty() {
        return;
    }
    let comments: HashMap<u32, String> = actions.iter().filter_map(|a| by_id.get(&a.id()).map(|r| (a.id(), r.facts.comment.clone()))).collect();

    // 3. Slurm operations, one hold of the write locks.
    let applied = ctld::with_lock(LockKind::Write, || {
        let mut changed = 0;
        for id in &requeue {
            match ctld::requeue_job(*id) {
                Ok(()) => {
                    info(&format!("requeued elastic JobId={id} ({})", flights.get(id).map_or("?", |f| f.action.kind())));
                    changed += 1;
                    // A job that exited on the signal and completed is pending at once: re-planned now.
                    let done = flights.get(id).and_then(|f| apply_replan(*id, f, now)).is_some();
                    if done {
                        flights.remove(id);
                    } else if let Some(f) = flights.get_mut(id) {
                        f.stage = Stage::Requeued(now);
                    }
                }
                Err(e) => {
                    // The job keeps running (or stays ended); never cancelled.
                    error(&format!("{e}; elastic JobId={id} is left as it is"));
                    flights.remove(id);
                }
            }
        }
        for (id, f) in &replan {
            match apply_replan(*id, f, now) {
                Some(true) => changed += 1,
                Some(false) => {}
                None => {
                    flights.insert(*id, f.clone()); // not yet: next pass
                }
            }
        }
        for a in &actions {
            let id = a.id();
            // Still running, still elastic, nobody changed its record since the snapshot.
            let ok = ctld::with_job(id, |j| j.phase() == JobPhase::Running && j.admin_comment() == comments.get(&id).map(String::as_str));
            if ok != Some(true) {
                continue;
            }
            let Some(rec) = comments.get(&id).and_then(|c| DlRecord::parse(c)) else { continue };
            let Some(sig) = rec.elastic else { continue };
            match ctld::signal_job(id, u16::from(sig.number())) {
                Ok(()) => {
                    let marked = DlRecord { reconf_at: Some(now), ..rec };
                    if let Some(Err(e)) = ctld::with_job(id, |j| j.set_admin_comment(&marked.to_string())) {
                        error(&format!("JobId={id}: {e}"));
                    }
                    info(&format!(
                        "elastic {} of JobId={id}{}{}: sent {sig}, requeue after at most {grace} s (predicted gain {:.0} s)",
                        a.kind(),
                        a.target().map(|m| format!(" to {}", m.to.cell)).unwrap_or_default(),
                        a.for_job().map(|j| format!(" for JobId={j}")).unwrap_or_default(),
                        a.gain_s()
                    ));
                    flights.insert(id, InFlight::new(a.clone(), now));
                    changed += 1;
                }
                Err(e) => error(&format!("{e}; elastic JobId={id} is not reconfigured")),
            }
        }
        changed
    });
    if matches!(applied, Ok(n) if n > 0) {
        let _ = ctld::queue_scheduler();
    }
}

/// Seconds to the next pass: [`POLL_S`] while a job is in flight.
fn interval_s() -> u64 {
    let busy = IN_FLIGHT.try_lock().ok().is_some_and(|g| g.as_ref().is_some_and(|m| !m.is_empty()));
    let cfg_s = current().map_or(60, |l: std::sync::Arc<Loaded>| l.cfg.elastic.interval_s);
    if busy {
        POLL_S.min(cfg_s)
    } else {
        cfg_s
    }
}

pub(crate) fn start_thread() {
    match Periodic::start("job_submit/cellsched", "elastic", interval_s, elastic_pass) {
        Ok(p) => *THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(p),
        Err(e) => error(&format!("cannot start the elastic thread: {e}; running jobs are not reconfigured")),
    }
}

/// Stops the elastic thread within a bound (see `replan::stop_thread`).
pub(crate) fn stop_thread() {
    if let Some(p) = THREAD.lock().unwrap_or_else(|e| e.into_inner()).take() {
        p.stop("job_submit/cellsched", Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signalled_job_is_requeued_after_the_grace_or_when_it_checkpointed() {
        let s = Stage::Signalled;
        // Still running within the grace: wait; at the end of the grace: requeue (it ignored the signal).
        assert_eq!(next_step(s, 100, 30, 129, Some(JobPhase::Running), None, false), Step::Wait);
        assert_eq!(next_step(s, 100, 30, 130, Some(JobPhase::Running), None, false), Step::Requeue);
        // Exited with the reconfiguration code: requeued at once.
        assert_eq!(next_step(s, 100, 30, 101, Some(JobPhase::Ended), Some(job_env::RECONF_EXIT), false), Step::Requeue);
        // Finished on its own (any other code), or gone: left alone.
        assert_eq!(next_step(s, 100, 30, 101, Some(JobPhase::Ended), Some(0), false), Step::Drop { finished: true });
        assert_eq!(next_step(s, 100, 30, 101, Some(JobPhase::Ended), None, false), Step::Drop { finished: true });
        assert_eq!(next_step(s, 100, 30, 101, None, None, false), Step::Drop { finished: true });
    }

    #[test]
    fn a_requeued_job_is_replanned_once_its_old_run_completed() {
        let s = Stage::Requeued(120);
        assert_eq!(next_step(s, 100, 30, 121, Some(JobPhase::PendingCompleting), None, false), Step::Wait);
        assert_eq!(next_step(s, 100, 30, 122, Some(JobPhase::Pending), None, false), Step::Replan);
        assert_eq!(next_step(s, 100, 30, 122, Some(JobPhase::Running), None, false), Step::Drop { finished: false });
        // Requeued by an admin while signalled: settles like ours.
        assert_eq!(next_step(Stage::Signalled, 100, 30, 105, Some(JobPhase::Pending), None, false), Step::Replan);
    }

    #[test]
    fn a_requeue_waits_until_the_jobs_nodes_registered() {
        let s = Stage::Signalled;
        // Grace passed or checkpoint written, but a node has not registered
        // with the restarted slurmctld: wait, then requeue once it has.
        assert_eq!(next_step(s, 100, 30, 130, Some(JobPhase::Running), None, true), Step::WaitForNodes);
        assert_eq!(next_step(s, 100, 30, 101, Some(JobPhase::Ended), Some(job_env::RECONF_EXIT), true), Step::WaitForNodes);
        assert_eq!(next_step(s, 100, 30, 131, Some(JobPhase::Running), None, false), Step::Requeue);
        // Nothing else waits for the nodes: within the grace, finished on its
        // own, gone, or pending again.
        assert_eq!(next_step(s, 100, 30, 129, Some(JobPhase::Running), None, true), Step::Wait);
        assert_eq!(next_step(s, 100, 30, 101, Some(JobPhase::Ended), Some(0), true), Step::Drop { finished: true });
        assert_eq!(next_step(s, 100, 30, 101, None, None, true), Step::Drop { finished: true });
        assert_eq!(next_step(Stage::Requeued(120), 100, 30, 122, Some(JobPhase::Pending), None, true), Step::Replan);
    }
}
