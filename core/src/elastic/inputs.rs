//! The rule's inputs from what a host knows of its jobs ([`JobFacts`]):
//! the running elastic jobs and the waiting jobs in priority order that
//! [`super::decide`] takes. slurmctld's elastic thread builds them here
//! from its snapshot; the simulator's parity test builds the same facts
//! from a simulated cluster and checks both hosts then decide alike.
use super::{ElasticConfig, RestartCost, RunningElastic, WaitingJob};
use crate::config::OrderingConfig;
use crate::estimator::Estimator;
use crate::placement::PendingDl;
use crate::record::DlRecord;
use crate::slurm_text::hostlist_expand;

/// Where a job stands, as far as the rule cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Running (allocated, not completing).
    Running,
    /// Pending, not held by a completing run.
    Pending,
    /// Anything else (completing, ended): not an input.
    Other,
}

/// What the host copied of one job carrying a cellsched record.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFacts {
    /// Job id.
    pub id: u32,
    /// Where it stands.
    pub phase: Phase,
    /// Its AdminComment (the cellsched record).
    pub comment: String,
    /// Its `CELLSCHED_*` environment entries (`--dl-*` options).
    pub env: Vec<String>,
    /// Its feature expression.
    pub features: Option<String>,
    /// Its node list (Slurm hostlist syntax), when running.
    pub nodes: Option<String>,
    /// Its priority (higher first).
    pub priority: u32,
    /// Unix seconds: a running job's start of this run; a pending job's
    /// forecast start (backfill's), 0 when none.
    pub start_time: i64,
    /// Unix seconds a running job's time limit ends (0: none).
    pub end_time: i64,
    /// Its time limit, minutes.
    pub time_limit_min: Option<u32>,
    /// Typed GPUs in its request (a pinned type: never reconfigured).
    pub typed: bool,
    /// A batch job Slurm may requeue.
    pub requeueable: bool,
}

/// Predicted seconds left of a running job: its declared work less this
/// run's time, else to the end of its time limit, else the default.
pub fn running_remaining_s(f: &JobFacts, record: &DlRecord, now: i64, ordering: &OrderingConfig) -> f64 {
    let ran = (now - f.start_time).max(0) as f64;
    match record.iters {
        Some(n) => (n as f64 * record.decision.iter_s - ran).max(1.0),
        None if f.time_limit_min.is_some() && f.end_time > now => (f.end_time - now) as f64,
        None => ordering.default_remaining_s,
    }
}

/// The running elastic jobs and the waiting jobs (priority order, then id)
/// among `facts`, leaving out the jobs `busy` names (a reconfiguration
/// under way). A running job counts only when Slurm may requeue it, its
/// GPUs are untyped, cellsched placed it automatically and it opted in.
pub fn inputs(facts: &[JobFacts], busy: &dyn Fn(u32) -> bool, elastic: &ElasticConfig, ordering: &OrderingConfig, est: &Estimator, now: i64) -> (Vec<RunningElastic>, Vec<WaitingJob>) {
    let mut running = Vec::new();
    let mut waiting: Vec<(u32, WaitingJob)> = Vec::new();
    for f in facts.iter().filter(|f| !busy(f.id)) {
        match f.phase {
            Phase::Running if f.requeueable && !f.typed => {
                let Some(p) = PendingDl::from_job(f.id, &f.comment, &f.env, f.features.clone(), est, now) else { continue };
                if p.record.elastic.is_none() {
                    continue;
                }
                let remaining_s = running_remaining_s(f, &p.record, now, ordering);
                let cost = RestartCost::of(&p.record, &p.job, elastic);
                let nodes = f.nodes.as_deref().and_then(|n| hostlist_expand(n, 4096)).unwrap_or_default();
                running.push(RunningElastic { id: f.id, record: p.record, job: p.job, features: p.features, nodes, started_at: f.start_time, remaining_s, cost });
            }
            Phase::Pending if f.priority > 0 => {
                let Some(rec) = DlRecord::parse(&f.comment) else { continue };
                let run_s = crate::ordering::remaining_s(rec.iters.map(|n| n as f64), rec.decision.iter_s, None, f.time_limit_min, ordering);
                let wait_s = (f.start_time > now).then(|| (f.start_time - now) as f64);
                waiting.push((f.priority, WaitingJob { id: f.id, decision: rec.decision, run_s, wait_s }));
            }
            _ => {}
        }
    }
    waiting.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
    (running, waiting.into_iter().map(|(_, w)| w).collect())
}
