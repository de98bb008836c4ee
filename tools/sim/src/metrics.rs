//! Results of one simulation: JCT statistics, queueing delay, makespan,
//! utilization per GPU type, re-plans; unfinished jobs are counted, never
//! dropped: their JCT runs to the end of the run.
use crate::cluster::ClusterState;
use crate::job::{Job, Status};
use serde::Serialize;
use std::collections::BTreeMap;

/// One run's metrics (the `--json` object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Policy name (with ablations, e.g. `cellsched-no-srpt`).
    pub policy: String,
    /// Seed of the run.
    pub seed: u64,
    /// Jobs in the trace.
    pub jobs: u64,
    /// Jobs that completed.
    pub finished: u64,
    /// Jobs that did not complete (never fit, or still queued/running at the end).
    pub unfinished: u64,
    /// Of the unfinished, those that can never run on this cluster under the policy.
    pub never_fit: u64,
    /// Mean job completion time (finish - submit) over every job of the
    /// trace; an unfinished job (`unfinished`) counts with its time up to
    /// the end of the run, so every policy is averaged over the same jobs, s.
    pub avg_jct_s: f64,
    /// Median JCT (same jobs), s.
    pub median_jct_s: f64,
    /// 99th-percentile JCT (nearest rank), s.
    pub p99_jct_s: f64,
    /// Mean wait from submission to first start over started jobs, s.
    pub avg_queue_s: f64,
    /// Last completion - first submission, s.
    pub makespan_s: f64,
    /// Busy GPU-seconds / (GPUs x makespan), per GPU type.
    pub gpu_util: BTreeMap<String, f64>,
    /// GPU-hours held by jobs (all types, failed runs included).
    pub gpu_hours: f64,
    /// Jobs with a deadline (trace column `due`).
    pub deadline_jobs: u64,
    /// Of those, the share that finished by their deadline; `None` without deadline jobs.
    pub deadline_met_ratio: Option<f64>,
    /// Pending jobs whose Cell changed from the submission-time plan.
    pub replans: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Reconfigurations of running elastic jobs (grow, move, preempt).
    pub reconfigurations: u64,
    /// Reconfigurations per job of the trace.
    pub reconfs_per_job: f64,
    /// Hours jobs lost to reconfigurations (checkpoint saves and restarts,
    /// GPUs held; summed over jobs).
    pub restart_h: f64,
    /// Events processed.
    pub events: u64,
    /// What ran the clock: a truth table, or `oracle` (the scheduler's own predictions).
    pub truth: String,
    /// What the scheduler knew (estimator, profile DB, iterations).
    pub knowledge: String,
    /// Prediction vs truth, and the cases where the two disagreed.
    pub truth_stats: TruthStats,
}

/// The scheduler's prediction error seen during the run, and the counts of
/// truth's special cases (see [`crate::truth`]).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct TruthStats {
    /// Starts on measured truth points with a prediction (stock jobs excluded).
    pub predictions: u64,
    /// Median absolute percentage error of predicted vs measured seconds per iteration, %.
    pub median_ape_pct: f64,
    /// 90th-percentile APE, %.
    pub p90_ape_pct: f64,
    /// Mean signed error (predicted - measured) / measured, % (negative: optimistic).
    pub bias_pct: f64,
    /// Of the predictions, those held out: not a measured point of the knowledge itself.
    pub held_out_predictions: u64,
    /// Median APE over the held-out predictions, %.
    pub held_out_median_ape_pct: f64,
    /// p90 APE over the held-out predictions, %.
    pub held_out_p90_ape_pct: f64,
    /// Bias over the held-out predictions, %.
    pub held_out_bias_pct: f64,
    /// Run seconds of all runs (the denominator of `missing_job_s`).
    pub run_job_s: f64,
    /// Starts on Cells truth lacks, timed by the fallback estimate.
    pub missing_starts: u64,
    /// Run seconds timed by the fallback estimate.
    pub missing_job_s: f64,
    /// Starts refused because truth lacks the Cell and has no fallback.
    pub skipped_starts: u64,
    /// Runs that failed because truth says the Cell does not fit (after the start-up cost).
    pub oom_failures: u64,
    /// Jobs failed because no Cell was left after such failures or refusals.
    pub failed_jobs: u64,
    /// Jobs whose model the knowledge lacks, run as stock Slurm would (requested type and count).
    pub stock_jobs: u64,
}

/// Nearest-rank percentile of sorted values (`q` in [0, 1]).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// Median of sorted values (mean of the middle two for even counts).
pub fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// What one run leaves behind for its metrics (filled by the engine).
pub struct RunRecord<'a> {
    /// Policy name.
    pub policy: &'a str,
    /// Seed of the run.
    pub seed: u64,
    /// What the scheduler knew (label).
    pub knowledge: &'a str,
    /// What ran the clock (label).
    pub truth: String,
    /// The jobs at the end of the run.
    pub jobs: &'a [Job],
    /// The cluster at the end of the run.
    pub cluster: &'a ClusterState,
    /// The clock at the end of the run, s.
    pub now: f64,
    /// Busy GPU-seconds per type of the runs that ended.
    pub busy_gpu_s: &'a [f64],
    /// Re-plans counted.
    pub replans: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Reconfigurations.
    pub reconfigurations: u64,
    /// Events processed.
    pub events: u64,
    /// Truth's special cases (prediction-error fields unset).
    pub stats: &'a TruthStats,
    /// (predicted, measured, held out) seconds per iteration at each start on a measured truth point.
    pub pairs: &'a [(f64, f64, bool)],
}

impl Metrics {
    /// Collects the metrics of a finished (or stopped) simulation.
    pub fn collect(run: &RunRecord<'_>) -> Metrics {
        let jobs = run.jobs;
        // Every policy is averaged over the same jobs: a job that did not
        // finish counts with its time in the system up to the end of the run.
        let end = run.now;
        let mut jct: Vec<f64> = jobs.iter().map(|j| j.finish.unwrap_or(end.max(j.spec.submission_time)) - j.spec.submission_time).collect();
        jct.sort_by(f64::total_cmp);
        let queue: Vec<f64> = jobs.iter().filter_map(|j| j.first_start.map(|s| s - j.spec.submission_time)).collect();
        let first_submit = jobs.iter().map(|j| j.spec.submission_time).fold(f64::INFINITY, f64::min);
        let last_finish = jobs.iter().filter_map(|j| j.finish).fold(f64::NEG_INFINITY, f64::max);
        let makespan = if last_finish.is_finite() { (last_finish - first_submit).max(0.0) } else { 0.0 };
        let mut busy = run.busy_gpu_s.to_vec();
        for j in jobs.iter().filter(|j| j.status == Status::Running) {
            let a = j.alloc.as_ref().expect("running job has an allocation");
            busy[run.cluster.groups[a.shape.group].type_idx] += j.gpus() as f64 * (run.now - j.alloc_time);
        }
        let span = if makespan > 0.0 { makespan } else { (run.now - first_submit).max(0.0) };
        let c = run.cluster;
        let gpu_util = c
            .types
            .iter()
            .enumerate()
            .map(|(t, name)| {
                let cap = c.total_of_type(t) as f64 * span;
                (name.clone(), if cap > 0.0 { round6(busy[t] / cap) } else { 0.0 })
            })
            .collect();
        let gpu_hours = round6(busy.iter().sum::<f64>() / 3600.0);
        let due: Vec<bool> =
            jobs.iter().filter_map(|j| j.spec.due_s.map(|d| j.finish.is_some_and(|f| f - j.spec.submission_time <= d))).collect();
        let deadline_met_ratio = (!due.is_empty()).then(|| round6(due.iter().filter(|m| **m).count() as f64 / due.len() as f64));
        let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        let finished = jobs.iter().filter(|j| j.finish.is_some()).count() as u64;
        let c = run.stats;
        let all = ErrorStats::of(run.pairs.iter().map(|&(p, t, _)| (p, t)));
        let held = ErrorStats::of(run.pairs.iter().filter(|x| x.2).map(|&(p, t, _)| (p, t)));
        let truth_stats = TruthStats {
            predictions: all.n,
            median_ape_pct: all.median_ape,
            p90_ape_pct: all.p90_ape,
            bias_pct: all.bias,
            held_out_predictions: held.n,
            held_out_median_ape_pct: held.median_ape,
            held_out_p90_ape_pct: held.p90_ape,
            held_out_bias_pct: held.bias,
            run_job_s: round6(c.run_job_s),
            missing_starts: c.missing_starts,
            missing_job_s: round6(c.missing_job_s),
            skipped_starts: c.skipped_starts,
            oom_failures: c.oom_failures,
            failed_jobs: c.failed_jobs,
            stock_jobs: c.stock_jobs,
        };
        Metrics {
            policy: run.policy.to_string(),
            seed: run.seed,
            jobs: jobs.len() as u64,
            finished,
            unfinished: jobs.len() as u64 - finished,
            never_fit: jobs.iter().filter(|j| j.status == Status::Never).count() as u64,
            avg_jct_s: round6(mean(&jct)),
            median_jct_s: round6(median(&jct)),
            p99_jct_s: round6(percentile(&jct, 0.99)),
            avg_queue_s: round6(mean(&queue)),
            makespan_s: round6(makespan),
            gpu_util,
            gpu_hours,
            deadline_jobs: due.len() as u64,
            deadline_met_ratio,
            replans: run.replans,
            preemptions: run.preemptions,
            reconfigurations: run.reconfigurations,
            reconfs_per_job: if jobs.is_empty() { 0.0 } else { round6(jobs.iter().map(|j| f64::from(j.reconfs)).sum::<f64>() / jobs.len() as f64) },
            restart_h: round6(jobs.iter().map(|j| j.reconf_lost_s).sum::<f64>() / 3600.0),
            events: run.events,
            truth: run.truth.clone(),
            knowledge: run.knowledge.to_string(),
            truth_stats,
        }
    }
}

/// Error of predictions against measurements.
struct ErrorStats {
    n: u64,
    median_ape: f64,
    p90_ape: f64,
    bias: f64,
}

impl ErrorStats {
    fn of(pairs: impl Iterator<Item = (f64, f64)>) -> Self {
        let rel: Vec<f64> = pairs.map(|(p, t)| (p - t) / t * 100.0).collect();
        let mut ape: Vec<f64> = rel.iter().map(|r| r.abs()).collect();
        ape.sort_by(f64::total_cmp);
        let bias = if rel.is_empty() { 0.0 } else { rel.iter().sum::<f64>() / rel.len() as f64 };
        ErrorStats { n: rel.len() as u64, median_ape: round6(median(&ape)), p90_ape: round6(percentile(&ape, 0.9)), bias: round6(bias) }
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(median(&v), 2.5);
        assert_eq!(median(&v[..3]), 2.0);
        assert_eq!(percentile(&v, 0.99), 4.0);
        assert_eq!(percentile(&v, 0.5), 2.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
