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
pub fn build_inputs(facts: &[JobFacts], busy: &dyn Fn(u32) -> bool, elastic: &ElasticConfig, ordering: &OrderingConfig, est: &Estimator, now: i64) -> (Vec<RunningElastic>, Vec<WaitingJob>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;

    fn facts(id: u32, phase: Phase, comment: &str, priority: u32, start_time: i64) -> JobFacts {
        JobFacts {
            id,
            phase,
            comment: comment.into(),
            env: vec!["CELLSCHED_DL_MODEL=gpt__350M".into(), "CELLSCHED_DL_BATCH=32".into(), "CELLSCHED_DL_CELL=auto".into()],
            features: None,
            nodes: Some("a100-[1-2]".into()),
            priority,
            start_time,
            end_time: 0,
            time_limit_min: None,
            typed: false,
            requeueable: true,
        }
    }

    /// Running jobs count only when opted in, requeueable, untyped and not
    /// busy; their remaining time is the declared work less this run's
    /// time; pending jobs come in priority order with Slurm's forecast wait.
    #[test]
    fn inputs_keep_only_eligible_running_jobs_and_order_the_waiting_ones() {
        let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let rec = "cellsched: cell=a100x8x1 nodes=2 dp=8 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet iters=1000";
        let el = format!("{rec} elastic=USR1");
        let now = 10_000;
        let all = vec![
            facts(1, Phase::Running, &el, 0, now - 100),
            facts(2, Phase::Running, rec, 0, now - 100),
            JobFacts { typed: true, ..facts(3, Phase::Running, &el, 0, now - 100) },
            JobFacts { requeueable: false, ..facts(4, Phase::Running, &el, 0, now - 100) },
            facts(5, Phase::Running, &el, 0, now - 100),
            facts(6, Phase::Pending, rec, 10, 0),
            facts(7, Phase::Pending, rec, 30, now + 60),
            facts(8, Phase::Pending, rec, 0, 0),
            facts(9, Phase::Other, &el, 50, 0),
        ];
        let cfg = ElasticConfig::default();
        let (running, waiting) = build_inputs(&all, &|id| id == 5, &cfg, &OrderingConfig::default(), &est, now);
        assert_eq!(running.iter().map(|r| r.id).collect::<Vec<_>>(), [1]);
        assert_eq!(running[0].remaining_s, 1000.0 * 0.5 - 100.0);
        assert_eq!(running[0].nodes, ["a100-1", "a100-2"]);
        assert_eq!(waiting.iter().map(|w| (w.id, w.wait_s)).collect::<Vec<_>>(), [(7, Some(60.0)), (6, None)]);
        assert_eq!(waiting[0].run_s, 500.0);
    }
}
