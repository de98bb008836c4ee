//! Reconfiguration of running elastic jobs (`--dl-elastic`): the one rule
//! slurmctld's side and the simulator call ([`decide`]). Pure, no I/O.
//!
//! A job that opted in checkpoints on its signal and resumes from its
//! checkpoint, so it can be stopped and restarted on another Cell for the
//! cost of one save and one restart ([`RestartCost`]). Each pass looks at
//! the pending jobs in priority order and the running elastic jobs:
//!
//! 1. A pending job whose Cell can start on the free GPUs takes them.
//! 2. A pending job near the head of the queue (the first
//!    [`HEAD_OF_QUEUE`] that cannot start) may get a running elastic job's
//!    GPUs: the running job is **moved** (shrunk, or put on another GPU
//!    type, on the GPUs still free) or, A-SRPT's preemptive rule, **preempted**
//!    when the pending job's predicted run time is at most `preempt_ratio` x
//!    the running job's predicted remaining time. The pending job's saved
//!    wait (its forecast wait, at most the running job's remaining time,
//!    less the save) minus the running job's loss (its slowdown plus the
//!    restart, or for a preemption the pending job's run plus the restart)
//!    must be at least `min_gain` x the restart cost. The best such action
//!    per pending job is taken.
//! 3. A running elastic job **grows** (more GPUs or a faster type) into free
//!    GPUs no pending job waits for, by the placement sizing rule against
//!    the load (`placement.load_sizing`), when the predicted time saved is
//!    at least `min_gain` x its restart cost with the new Cell's predicted
//!    iteration time `grow_margin` longer: a grown job is not shrunk back
//!    for running slower than predicted, so a gain within the estimator's
//!    error is no reason to take the GPUs.
//!
//! Bounds, applied here: only jobs with `elastic=` in their record, at most
//! `max_per_hour` reconfigurations per job in any hour, at least
//! `min_run_s` since the job's (re)start, none while a signal is pending
//! (`reconf_at` at or after this run's start), one action per job per pass,
//! and GPUs given to one action are set aside for it. Times are predictions
//! (knowledge): the hosts pass predicted remaining and run times.
//!
//! The host signals the job, requeues it after `grace_s` with the record of
//! the action ([`Reconfig::admin_comment`]) and, for a grow or move, the
//! target's features and GRES ([`Reconfig::target`], a re-planning
//! [`Move`]); a preempted job is placed again by the normal path. Both
//! hosts build the rule's inputs from their jobs' facts with [`build_inputs`].
mod cost;
mod inputs;

pub use crate::config::ElasticConfig;
pub use cost::RestartCost;
pub use inputs::{build_inputs, running_remaining_s, JobFacts, Phase};
pub use crate::signal::{ElasticSignal, SIGNAL_FORM};

use crate::config::PlacementConfig;
use crate::declared::DeclaredConfig;
use crate::estimator::{Estimate, Estimator, JobSpec};
use crate::placement::{self, LoadView, Move, NodeGpus};
use crate::rank_cache::RankCache;
use crate::record::DlRecord;
use crate::Decision;

/// How many pending jobs that cannot start (from the head of the queue)
/// one pass tries to help; the rest only count as demand.
pub const HEAD_OF_QUEUE: usize = 32;

/// A running job that opted in (`--dl-elastic`).
#[derive(Debug, Clone)]
pub struct RunningElastic {
    /// Job id.
    pub id: u32,
    /// Its record (decision, `elastic=`, reconfiguration history).
    pub record: DlRecord,
    /// What the estimator needs.
    pub job: JobSpec,
    /// Its current feature expression (a move rewrites its GPU type feature).
    pub features: Option<String>,
    /// The nodes it runs on; its Cell's GPUs there, `gpus / nodes` each,
    /// come back to the pool when it is requeued.
    pub nodes: Vec<String>,
    /// Unix time this run started (after its last requeue).
    pub started_at: i64,
    /// Predicted seconds left on its current decision (knowledge).
    pub remaining_s: f64,
    /// Its cost of one reconfiguration ([`RestartCost::of`]).
    pub cost: RestartCost,
}

/// A pending job, as [`decide`] sees it (the slice is in priority order).
#[derive(Debug, Clone)]
pub struct WaitingJob {
    /// Job id.
    pub id: u32,
    /// Its planned decision (Cell, nodes).
    pub decision: Decision,
    /// Predicted run time on it, seconds.
    pub run_s: f64,
    /// The host's forecast of its wait for that Cell (backfill's start
    /// time); `None`: unknown, bounded by the running job's remaining time.
    pub wait_s: Option<f64>,
}

/// One reconfiguration of a running elastic job.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconfig {
    /// More GPUs or a faster type, on free GPUs nobody waits for.
    Grow {
        /// The job.
        id: u32,
        /// Its new Cell, features and GRES; `to.record` is the record after the action.
        to: Move,
        /// Predicted seconds saved, net of the restart cost.
        gain_s: f64,
    },
    /// Fewer GPUs or another type, so that a pending job can start.
    Move {
        /// The job.
        id: u32,
        /// Its new Cell, features and GRES; `to.record` is the record after the action.
        to: Move,
        /// The pending job that gets its GPUs.
        for_job: Option<u32>,
        /// Predicted seconds saved, net of the restart cost.
        gain_s: f64,
    },
    /// Stopped and requeued (placed again by the normal path) for a much shorter pending job.
    Preempt {
        /// The job.
        id: u32,
        /// The pending job that gets its GPUs.
        for_job: u32,
        /// The record after the action.
        record: DlRecord,
        /// Predicted seconds saved, net of the restart cost.
        gain_s: f64,
    },
    /// A job signalled in its current run whose action the host no longer
    /// holds (slurmctld restarted between the signal and the requeue):
    /// requeued on its own record, then placed again by the normal path
    /// ([`resume_after_restart`]).
    Resumed {
        /// The job.
        id: u32,
        /// The record after the requeue.
        record: DlRecord,
    },
}

/// The action that carries through a job whose record says it was
/// signalled during its current run (`reconf_at` after `start_time`, the
/// run's start) when the host has no action for it, with the signal's
/// time: after a slurmctld restart the job is still requeued once it
/// checkpointed or its grace passed, never left ended on the signal.
/// `None` for a job not elastic or not signalled in this run.
pub fn resume_after_restart(id: u32, record: &DlRecord, start_time: i64) -> Option<(Reconfig, i64)> {
    record.elastic?;
    let at = record.reconf_at.filter(|t| *t > start_time)?;
    Some((Reconfig::Resumed { id, record: record.reconfigured(at) }, at))
}

impl Reconfig {
    /// The running job reconfigured.
    pub fn id(&self) -> u32 {
        match self {
            Reconfig::Grow { id, .. } | Reconfig::Move { id, .. } | Reconfig::Preempt { id, .. } | Reconfig::Resumed { id, .. } => *id,
        }
    }

    /// The pending job it is for, if any.
    pub fn for_job(&self) -> Option<u32> {
        match self {
            Reconfig::Grow { .. } | Reconfig::Resumed { .. } => None,
            Reconfig::Move { for_job, .. } => *for_job,
            Reconfig::Preempt { for_job, .. } => Some(*for_job),
        }
    }

    /// The new Cell, features and GRES (grow and move); `None` for a preemption.
    pub fn target(&self) -> Option<&Move> {
        match self {
            Reconfig::Grow { to, .. } | Reconfig::Move { to, .. } => Some(to),
            Reconfig::Preempt { .. } | Reconfig::Resumed { .. } => None,
        }
    }

    /// Predicted seconds saved, net of the restart cost.
    pub fn gain_s(&self) -> f64 {
        match self {
            Reconfig::Grow { gain_s, .. } | Reconfig::Move { gain_s, .. } | Reconfig::Preempt { gain_s, .. } => *gain_s,
            Reconfig::Resumed { .. } => 0.0,
        }
    }

    /// The job's AdminComment text after the action: for a grow or move its
    /// new decision (a re-planning move's record, [`Move::admin_comment`]),
    /// always `reconf_at`, `reconfs_h` and `restarts` updated.
    pub fn admin_comment(&self) -> String {
        match self {
            Reconfig::Grow { to, .. } | Reconfig::Move { to, .. } => to.admin_comment(),
            Reconfig::Preempt { record, .. } | Reconfig::Resumed { record, .. } => record.to_string(),
        }
    }

    /// A short word for logs and reports: `grow`, `move`, `preempt` or
    /// `resume` (a signal slurmctld's restart interrupted).
    pub fn kind(&self) -> &'static str {
        match self {
            Reconfig::Grow { .. } => "grow",
            Reconfig::Move { .. } => "move",
            Reconfig::Preempt { .. } => "preempt",
            Reconfig::Resumed { .. } => "resume",
        }
    }
}

/// What one pass reads besides the jobs, the nodes and the Cell chooser.
#[derive(Debug, Clone, Copy)]
pub struct DecideContext<'a> {
    /// `[elastic]`.
    pub cfg: &'a ElasticConfig,
    /// `[placement]` (sizing, allowed types).
    pub placement: &'a PlacementConfig,
    /// `[declared]` (the new time limit of a moved job).
    pub declared: &'a DeclaredConfig,
    /// Unix seconds of the pass (the simulator: its clock).
    pub now: i64,
}

/// The host's placement rule for a running job given free GPUs: which Cell
/// it would get. Both hosts size by `core::placement`'s rule; they differ
/// only in where ranked Cells come from.
pub trait CellChooser {
    /// The Cell `r` gets on the free GPUs of `free` (its own already
    /// counted free) under `load` (`None`: marginal value alone), `None`
    /// if no Cell fits.
    fn choose(&mut self, r: &RunningElastic, free: &[NodeGpus], load: Option<&LoadView>) -> Option<Estimate>;
}

/// The plugins' chooser: `placement::offers`, `placement::ranked_for` (the
/// estimator, through `ranks` when given) and
/// `placement::choose_ranked_under_load`, as a re-planning move sizes.
pub struct PlacementChooser<'a> {
    /// The estimator.
    pub est: &'a Estimator,
    /// A cache of `est`'s rankings, when the host keeps one.
    pub ranks: Option<&'a RankCache>,
    /// `[placement]`.
    pub placement: &'a PlacementConfig,
}

impl CellChooser for PlacementChooser<'_> {
    fn choose(&mut self, r: &RunningElastic, free: &[NodeGpus], load: Option<&LoadView>) -> Option<Estimate> {
        let offers = placement::offers(free, self.placement, false);
        let ranked = placement::ranked_for(&r.job, &offers, self.placement, r.record.fixed_gpus, self.est, self.ranks);
        placement::choose_ranked_under_load(&ranked, self.placement, r.record.fixed_gpus, load).map(|i| ranked[i].clone())
    }
}

/// Whether `r` may be reconfigured at `now` (opt-in and bounds).
pub fn eligible(r: &RunningElastic, cfg: &ElasticConfig, now: i64) -> bool {
    cfg.enabled
        && r.record.elastic.is_some()
        && now - r.started_at >= cfg.min_run_s as i64
        && r.record.reconfs_in_hour(now) < cfg.max_per_hour as usize
        && r.record.reconf_at.is_none_or(|t| t < r.started_at)
        && r.remaining_s.is_finite()
        && r.remaining_s > 0.0
}

/// The reconfigurations for this pass (see the module doc): `running` are
/// the running elastic jobs, `waiting` the pending jobs in priority order,
/// `nodes` the GPUs free now, `chooser` the host's placement rule.
pub fn decide(running: &[RunningElastic], waiting: &[WaitingJob], nodes: &[NodeGpus], ctx: &DecideContext<'_>, chooser: &mut dyn CellChooser) -> Vec<Reconfig> {
    let cfg = ctx.cfg;
    if !cfg.enabled || cfg.max_per_hour == 0 {
        return Vec::new();
    }
    let mut open: Vec<&RunningElastic> = running.iter().filter(|r| eligible(r, cfg, ctx.now)).collect();
    if open.is_empty() {
        return Vec::new();
    }
    let mut pool = Pool { nodes: nodes.to_vec() };
    let mut load = LoadView::from_nodes(nodes);
    for w in waiting {
        load.add_wanted(&w.decision.cell.gpu_type, u64::from(w.decision.cell.gpus));
    }
    let mut out = Vec::new();
    let mut blocked = 0;
    for w in waiting {
        let c = &w.decision.cell;
        if pool.reserve_decision(&w.decision) {
            load.remove_wanted(&c.gpu_type, u64::from(c.gpus));
            continue;
        }
        if blocked >= HEAD_OF_QUEUE || open.is_empty() {
            continue;
        }
        blocked += 1;
        let mut best: Option<(Reconfig, Pool)> = None;
        for r in open.iter().filter(|r| r.record.decision.cell.gpu_type.eq_ignore_ascii_case(&c.gpu_type)) {
            let mut freed = pool.clone();
            freed.release(r);
            if !freed.reserve_decision(&w.decision) {
                continue;
            }
            let cost = r.cost.total_s();
            let saved = w.wait_s.unwrap_or(f64::INFINITY).min(r.remaining_s) - r.cost.save_s;
            let mut consider = |rc: Reconfig, p: Pool| {
                if rc.gain_s() >= cfg.min_gain * cost && rc.gain_s() > 0.0 && best.as_ref().is_none_or(|(b, _)| rc.gain_s() > b.gain_s()) {
                    best = Some((rc, p));
                }
            };
            if w.run_s <= cfg.preempt_ratio * r.remaining_s {
                let gain_s = saved - (w.run_s + cost);
                consider(Reconfig::Preempt { id: r.id, for_job: w.id, record: r.record.reconfigured(ctx.now), gain_s }, freed.clone());
            }
            let after = freed.view(&load.without_wanted(&c.gpu_type, u64::from(c.gpus)));
            if let Some(e) = choose_for(r, &freed, Some(&after), chooser) {
                let new_rem = r.remaining_s * e.iter_time_s / r.record.decision.iter_s;
                let gain_s = saved - (new_rem - r.remaining_s + cost);
                let mut p = freed.clone();
                if p.reserve(&e) {
                    let to = target(r, e, ctx);
                    consider(Reconfig::Move { id: r.id, to, for_job: Some(w.id), gain_s }, p);
                }
            }
        }
        if let Some((rc, p)) = best {
            pool = p;
            load.remove_wanted(&c.gpu_type, u64::from(c.gpus));
            open.retain(|r| r.id != rc.id());
            out.push(rc);
        }
    }
    for r in open {
        let mut freed = pool.clone();
        freed.release(r);
        let d = &r.record.decision;
        let view = freed.view(&load);
        let Some(e) = choose_for(r, &freed, ctx.placement.load_sizing.then_some(&view), chooser) else { continue };
        // Only into GPUs nobody waits for (the job's own are its own).
        let own = if e.cell.gpu_type.eq_ignore_ascii_case(&d.cell.gpu_type) { d.cell.gpus } else { 0 };
        // Judged on the new Cell's time made `grow_margin` longer (the estimator's error).
        let pessimistic = e.iter_time_s * (1.0 + cfg.grow_margin.max(0.0));
        if u64::from(e.cell.gpus.saturating_sub(own)) > view.unwanted(&e.cell.gpu_type) || pessimistic >= d.iter_s {
            continue;
        }
        let gain_s = r.remaining_s - r.remaining_s * pessimistic / d.iter_s - r.cost.total_s();
        if gain_s < cfg.min_gain * r.cost.total_s() || gain_s <= 0.0 {
            continue;
        }
        if freed.reserve(&e) {
            pool = freed;
            out.push(Reconfig::Grow { id: r.id, to: target(r, e, ctx), gain_s });
        }
    }
    out
}

/// The Cell the host's rule gives `r` on the free GPUs of `pool` (its own
/// already returned to it), other than its current one.
fn choose_for(r: &RunningElastic, pool: &Pool, load: Option<&LoadView>, chooser: &mut dyn CellChooser) -> Option<Estimate> {
    let e = chooser.choose(r, &pool.nodes, load)?;
    (e.cell != r.record.decision.cell && e.iter_time_s.is_finite() && e.iter_time_s > 0.0).then_some(e)
}

/// The re-planning move that writes `e` into `r` (features, GRES, limit,
/// record with the reconfiguration counted).
fn target(r: &RunningElastic, e: Estimate, ctx: &DecideContext<'_>) -> Move {
    let d = &r.record.decision;
    let user = placement::without_type_feature(r.features.as_deref(), &d.cell.gpu_type);
    let record = r.record.reconfigured(ctx.now);
    Move {
        id: r.id,
        from: d.clone(),
        features: placement::with_type_feature(user.as_deref(), &e.cell.gpu_type),
        gres: format!("gpu:{}", e.gpus_per_node),
        time_limit_min: record.limit_min.and(record.iters).and_then(|n| crate::declared::time_bound_min(n, e.iter_time_s, ctx.declared)),
        plan_iter_s: e.iter_time_s,
        moved_at: Some(ctx.now),
        record,
        to: e,
    }
}

/// Free GPUs per node during a pass.
#[derive(Debug, Clone)]
struct Pool {
    nodes: Vec<NodeGpus>,
}

impl Pool {
    /// `load` with its free GPUs replaced by this pool's.
    fn view(&self, load: &LoadView) -> LoadView {
        let mut free: Vec<(&str, u64)> = Vec::new();
        for n in &self.nodes {
            match free.iter_mut().find(|(t, _)| t.eq_ignore_ascii_case(&n.gpu_type)) {
                Some((_, f)) => *f += u64::from(n.free),
                None => free.push((&n.gpu_type, u64::from(n.free))),
            }
        }
        let mut v = load.clone();
        for (t, f) in free {
            v.set_free(t, f);
        }
        v
    }

    /// Sets aside `nodes` nodes of `gpu_type` with `per_node` free GPUs each.
    fn reserve_on(&mut self, gpu_type: &str, nodes: u32, per_node: u32) -> bool {
        let fit: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].gpu_type.eq_ignore_ascii_case(gpu_type) && self.nodes[i].free >= per_node)
            .take(nodes as usize)
            .collect();
        if (fit.len() as u32) < nodes {
            return false;
        }
        for i in fit {
            self.nodes[i].free -= per_node;
        }
        true
    }

    fn reserve_decision(&mut self, d: &Decision) -> bool {
        let n = d.nodes.max(1);
        self.reserve_on(&d.cell.gpu_type, n, d.cell.gpus / n)
    }

    fn reserve(&mut self, e: &Estimate) -> bool {
        self.reserve_on(&e.cell.gpu_type, e.nodes.max(1), e.gpus_per_node)
    }

    /// Gives back the GPUs of running job `r` on its nodes.
    fn release(&mut self, r: &RunningElastic) {
        let d = &r.record.decision;
        let per_node = d.cell.gpus / d.nodes.max(1);
        for name in &r.nodes {
            if let Some(n) = self.nodes.iter_mut().find(|n| &n.node == name && n.gpu_type.eq_ignore_ascii_case(&d.cell.gpu_type)) {
                n.free = (n.free + per_node).min(n.total);
            }
        }
    }
}

#[cfg(test)]
mod tests;
