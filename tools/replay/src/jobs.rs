//! Per-job times on one clock, live and simulated, so the two can be
//! compared job by job: where a job waited longer, ran longer, or got
//! another GPU type.
//!
//! Everything is in trace seconds from the mode's first submission slot:
//! live times are sacct's (whole real seconds) minus the real time the mode
//! began submitting, times the speedup; simulated times are the simulator's.
use cellsched_report::JobRecord;
use cellsched_sim::job::{Job, Status};
use serde::Serialize;
use std::collections::BTreeMap;

/// One job's submit, start and end, trace seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobTimes {
    /// Trace job id.
    pub trace_job: String,
    /// Submission.
    pub submit_s: f64,
    /// First start, if it started.
    pub start_s: Option<f64>,
    /// End (completion), if it ended.
    pub end_s: Option<f64>,
    /// GPU type it ran on.
    pub gpu_type: Option<String>,
    /// GPUs it held.
    pub gpus: u32,
    /// Reconfigurations (live: `restarts` of its AdminComment record).
    pub reconfs: u32,
}

impl JobTimes {
    /// Queueing delay (start − submit).
    pub fn queue_s(&self) -> Option<f64> {
        self.start_s.map(|s| s - self.submit_s)
    }
    /// Run time (end − start).
    pub fn run_s(&self) -> Option<f64> {
        Some(self.end_s? - self.start_s?)
    }
    /// JCT (end − submit).
    pub fn jct_s(&self) -> Option<f64> {
        self.end_s.map(|e| e - self.submit_s)
    }

    /// A live job from its sacct record: `t0_epoch` is when the mode began
    /// submitting (Unix seconds), `speedup` trace seconds per real second.
    pub fn of_record(r: &JobRecord, t0_epoch: f64, speedup: f64) -> JobTimes {
        let t = |x: i64| (x as f64 - t0_epoch) * speedup;
        JobTimes {
            trace_job: crate::results::trace_job_of(r).unwrap_or_else(|| r.name.clone()),
            submit_s: t(r.submit),
            start_s: r.start.map(t),
            end_s: r.end.filter(|_| r.start.is_some()).map(t),
            gpu_type: r.gpus.keys().find(|k| !k.is_empty()).cloned(),
            gpus: r.gpu_count(),
            reconfs: cellsched_core::record::DlRecord::parse(&r.admin_comment).map_or(0, |d| d.restarts),
        }
    }

    /// A simulated job (its last run's GPUs; a job that never ran has none).
    pub fn of_sim(j: &Job, cluster: &cellsched_sim::ClusterState) -> JobTimes {
        let last_shape = j.last_shape.or(j.alloc.as_ref().map(|a| a.shape)).map(|s| (s.group, s.gpus()));
        JobTimes {
            trace_job: j.spec.job_id.clone(),
            submit_s: j.spec.submission_time,
            start_s: j.first_start,
            end_s: j.finish.filter(|_| j.status == Status::Finished),
            gpu_type: last_shape.map(|(g, _)| cluster.groups[g].spec.gpu_type.clone()),
            gpus: last_shape.map_or(0, |(_, n)| n),
            reconfs: j.reconfs,
        }
    }
}

/// The emulated trainer's own elapsed real seconds, from its summary line
/// (`done: N iterations, X measured s, Y s elapsed`).
pub fn trainer_elapsed_s(output: &str) -> Option<f64> {
    let line = output.lines().rev().find(|l| l.starts_with("done: "))?;
    let tail = line.strip_suffix(" s elapsed")?;
    tail.rsplit(", ").next()?.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0)
}

/// Mean of the values that are present.
fn mean(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = xs.flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Live minus simulated, averaged over the jobs both sides finished.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobGap {
    /// Jobs both sides finished.
    pub jobs: usize,
    /// Of those, jobs that ran on the same GPU type and count on both sides.
    pub same_cell: usize,
    /// Mean queueing delay live / simulated, trace s.
    pub queue_s: (Option<f64>, Option<f64>),
    /// Mean run time live / simulated, trace s.
    pub run_s: (Option<f64>, Option<f64>),
    /// Mean run time live − simulated over the same-Cell jobs (what the
    /// live run adds to a job's own work: launch, chunked sleeps, end), trace s.
    pub run_excess_same_cell_s: Option<f64>,
    /// Mean JCT live / simulated, trace s.
    pub jct_s: (Option<f64>, Option<f64>),
}

/// Compares live and simulated jobs by trace job id.
pub fn gap(live: &[JobTimes], sim: &[JobTimes]) -> JobGap {
    let by_id: BTreeMap<&str, &JobTimes> = sim.iter().map(|j| (j.trace_job.as_str(), j)).collect();
    let pairs: Vec<(&JobTimes, &JobTimes)> = live
        .iter()
        .filter(|l| l.end_s.is_some())
        .filter_map(|l| by_id.get(l.trace_job.as_str()).filter(|s| s.end_s.is_some()).map(|s| (l, *s)))
        .collect();
    let same: Vec<&(&JobTimes, &JobTimes)> = pairs.iter().filter(|(l, s)| l.gpu_type == s.gpu_type && l.gpus == s.gpus).collect();
    JobGap {
        jobs: pairs.len(),
        same_cell: same.len(),
        queue_s: (mean(pairs.iter().map(|p| p.0.queue_s())), mean(pairs.iter().map(|p| p.1.queue_s()))),
        run_s: (mean(pairs.iter().map(|p| p.0.run_s())), mean(pairs.iter().map(|p| p.1.run_s()))),
        run_excess_same_cell_s: mean(same.iter().map(|p| Some(p.0.run_s()? - p.1.run_s()?))),
        jct_s: (mean(pairs.iter().map(|p| p.0.jct_s())), mean(pairs.iter().map(|p| p.1.jct_s()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jt(id: &str, submit: f64, start: f64, end: f64, ty: &str, gpus: u32) -> JobTimes {
        JobTimes { trace_job: id.into(), submit_s: submit, start_s: Some(start), end_s: Some(end), gpu_type: Some(ty.into()), gpus, reconfs: 0 }
    }

    #[test]
    fn trainer_elapsed_comes_from_the_summary_line() {
        let out = "cellsched plan: job=41\ncellsched-iter 0.08\ndone: 2512 iterations, 220.4 measured s, 7.4 s elapsed\n";
        assert_eq!(trainer_elapsed_s(out), Some(7.4));
        assert_eq!(trainer_elapsed_s("progress: 1/2\n"), None);
        assert_eq!(trainer_elapsed_s("done: 1 iterations, 1 measured s, soon s elapsed"), None);
    }

    #[test]
    fn gap_pairs_jobs_by_id_and_separates_same_cell_run_excess() {
        let live = vec![jt("a", 0.0, 30.0, 330.0, "v100", 2), jt("b", 10.0, 100.0, 200.0, "k80", 1), JobTimes { end_s: None, ..jt("c", 0.0, 0.0, 0.0, "v100", 1) }];
        let sim = vec![jt("b", 10.0, 40.0, 100.0, "p100", 1), jt("a", 0.0, 0.0, 270.0, "v100", 2), jt("c", 0.0, 0.0, 50.0, "v100", 1)];
        let g = gap(&live, &sim);
        assert_eq!((g.jobs, g.same_cell), (2, 1), "c did not end live; b ran elsewhere");
        assert_eq!(g.queue_s, (Some(60.0), Some(15.0)));
        assert_eq!(g.run_s, (Some(200.0), Some(165.0)));
        assert_eq!(g.run_excess_same_cell_s, Some(30.0));
        assert_eq!(g.jct_s, (Some(260.0), Some(180.0)));
    }
}
