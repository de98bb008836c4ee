//! Window summaries: JCT and queueing-delay statistics, makespan, GPU-hours
//! and utilization per GPU type, and prediction errors.
//!
//! Definitions (all over the jobs of the report):
//! - makespan = last End − first Submit;
//! - the utilization span is first Start .. last (Start + run time); a type's
//!   utilization = its GPU-seconds / (its capacity × span);
//! - estimator error = |predicted − actual| / actual run time, over finished
//!   jobs with a recorded Decision and declared iterations (see [`crate::record`]).
use crate::record::JobRecord;
use crate::sacct::{Capacity, Query};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Distribution statistics of one quantity (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (mean of the two middle values for even `n`).
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Stats {
    /// Statistics of `values`; `None` when empty.
    pub fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stats {
            n,
            mean: v.iter().sum::<f64>() / n as f64,
            median,
            p99: percentile_sorted(&v, 99.0),
            max: v[n - 1],
        })
    }
}

/// Nearest-rank percentile `p` (0..=100) of sorted, non-empty `v`.
pub fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Relative prediction error statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ErrorStats {
    /// Jobs compared.
    pub n: usize,
    /// Mean absolute percentage error (0.1 = 10 %).
    pub mape: f64,
    /// Median absolute percentage error.
    pub median_ape: f64,
    /// Mean signed error (predicted − actual) / actual; > 0 over-predicts
    /// (`None` where the source reports absolute errors only).
    pub bias: Option<f64>,
}

impl ErrorStats {
    /// Errors of `(predicted, actual)` pairs; pairs with actual <= 0 are skipped.
    pub fn of(pairs: &[(f64, f64)]) -> Option<ErrorStats> {
        let rel: Vec<f64> = pairs
            .iter()
            .filter(|(_, a)| *a > 0.0)
            .map(|(p, a)| (p - a) / a)
            .collect();
        let abs: Vec<f64> = rel.iter().map(|x| x.abs()).collect();
        let s = Stats::of(&abs)?;
        Some(ErrorStats {
            n: s.n,
            mape: s.mean,
            median_ape: s.median,
            bias: Some(rel.iter().sum::<f64>() / rel.len() as f64),
        })
    }
}

/// GPU use of one type over the span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TypeUsage {
    /// Jobs that used this type.
    pub jobs: usize,
    /// Allocated GPU-hours.
    pub gpu_hours: f64,
    /// GPUs of this type in the cluster, when known.
    pub capacity: Option<u32>,
    /// gpu_hours / (capacity × span), when capacity is known and the span > 0.
    pub utilization: Option<f64>,
}

/// The summary of a set of jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Jobs in the report.
    pub jobs: usize,
    /// Jobs that ended.
    pub finished: usize,
    /// Jobs with a cellsched Decision recorded.
    pub with_decision: usize,
    /// Job completion time (End − Submit) of finished jobs.
    pub jct: Option<Stats>,
    /// Queueing delay (Start − Submit) of started jobs.
    pub queue_delay: Option<Stats>,
    /// Last End − first Submit, seconds.
    pub makespan_s: Option<f64>,
    /// Utilization span in seconds (first Start .. last end of run).
    pub span_s: Option<f64>,
    /// GPU use per type.
    pub per_type: BTreeMap<String, TypeUsage>,
    /// Estimator: predicted (iters × iter_s) vs actual run time.
    pub estimator_error: Option<ErrorStats>,
    /// Estimator: predicted vs measured seconds per iteration (see
    /// [`JobRecord::measure`]), over jobs with both.
    #[serde(default)]
    pub iteration_time_error: Option<ErrorStats>,
    /// Iteration predictor: holdout error on the window's history, when enough
    /// jobs carry iterations (filled by [`crate::history`]).
    pub iteration_predictor_error: Option<ErrorStats>,
    /// Jobs with a `--dl-deadline` (AdminComment `deadline=`) that ended, and how many ended by it.
    #[serde(default)]
    pub deadlines: Option<DeadlineStats>,
    /// Per user: deadline jobs, how many met their deadline and how many
    /// were infeasible ([`UserDeadlines`]).
    #[serde(default)]
    pub deadlines_per_user: BTreeMap<String, UserDeadlines>,
    /// Reconfigurations of running `--dl-elastic` jobs, when the window holds any such job.
    #[serde(default)]
    pub reconfigurations: Option<ReconfStats>,
}

/// Reconfigurations of running elastic jobs (the records' `restarts=` and `reconf_cost_s=`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReconfStats {
    /// Jobs that opted in (`elastic=`) or were reconfigured.
    pub elastic_jobs: usize,
    /// Of those, jobs reconfigured at least once.
    pub jobs_reconfigured: usize,
    /// Reconfigurations in all.
    pub reconfigurations: u64,
    /// Seconds they cost, in all.
    pub cost_s: f64,
}

impl ReconfStats {
    /// Over the elastic jobs of `jobs`; `None` without any.
    pub fn of(jobs: &[JobRecord]) -> Option<ReconfStats> {
        let elastic: Vec<&JobRecord> = jobs.iter().filter(|j| j.tags.elastic || j.tags.reconfs > 0).collect();
        (!elastic.is_empty()).then(|| ReconfStats {
            elastic_jobs: elastic.len(),
            jobs_reconfigured: elastic.iter().filter(|j| j.tags.reconfs > 0).count(),
            reconfigurations: elastic.iter().map(|j| u64::from(j.tags.reconfs)).sum(),
            cost_s: elastic.iter().map(|j| j.tags.reconf_cost_s).sum(),
        })
    }
}

/// One user's deadline jobs (those whose record carries `deadline=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserDeadlines {
    /// Ended jobs with a deadline.
    pub ended: usize,
    /// Of those, COMPLETED with End not after the deadline.
    pub met: usize,
    /// Jobs with a deadline their predicted run (declared iterations ×
    /// predicted seconds per iteration) could not meet even started at
    /// submit: infeasible from the start (recorded with the deadline, or
    /// dropped at submit as `infeasible_deadline=`).
    pub infeasible: usize,
}

impl UserDeadlines {
    /// Per user, over `jobs`.
    pub fn of(jobs: &[JobRecord]) -> BTreeMap<String, UserDeadlines> {
        let mut out: BTreeMap<String, UserDeadlines> = BTreeMap::new();
        for j in jobs {
            if j.tags.infeasible_deadline.is_some() {
                out.entry(j.user.clone()).or_default().infeasible += 1;
            }
            let Some(d) = j.tags.deadline else { continue };
            let u = out.entry(j.user.clone()).or_default();
            if j.finished() {
                u.ended += 1;
                if j.state == "COMPLETED" && j.end.is_some_and(|e| e <= d) {
                    u.met += 1;
                }
            }
            if j.predicted_run_s.is_some_and(|r| r > (d - j.submit) as f64) {
                u.infeasible += 1;
            }
        }
        out
    }
}

/// Deadline-met ratio over the ended jobs that carried a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeadlineStats {
    /// Ended jobs with a deadline.
    pub jobs: usize,
    /// Of those, completed (state COMPLETED) by their deadline.
    pub met: usize,
    /// `met / jobs`.
    pub met_ratio: f64,
}

impl DeadlineStats {
    /// Over `jobs`: a deadline counts as met only by a COMPLETED job whose End is not after it.
    pub fn of(jobs: &[JobRecord]) -> Option<DeadlineStats> {
        let ended: Vec<(&JobRecord, i64)> = jobs.iter().filter(|j| j.finished()).filter_map(|j| Some((j, j.tags.deadline?))).collect();
        if ended.is_empty() {
            return None;
        }
        let met = ended.iter().filter(|(j, d)| j.state == "COMPLETED" && j.end.is_some_and(|e| e <= *d)).count();
        Some(DeadlineStats { jobs: ended.len(), met, met_ratio: met as f64 / ended.len() as f64 })
    }
}

impl Summary {
    /// Summarizes `jobs`; `capacity` gives GPUs per type for utilization.
    pub fn of(jobs: &[JobRecord], capacity: Option<&Capacity>) -> Summary {
        let jct: Vec<f64> = jobs.iter().filter_map(|j| j.jct_s).collect();
        let qd: Vec<f64> = jobs.iter().filter_map(|j| j.queue_delay_s).collect();
        let makespan_s = match (
            jobs.iter().map(|j| j.submit).min(),
            jobs.iter().filter_map(|j| j.end).max(),
        ) {
            (Some(s), Some(e)) if e >= s => Some((e - s) as f64),
            _ => None,
        };
        let starts = jobs
            .iter()
            .filter_map(|j| j.start.filter(|s| *s >= j.submit));
        let ends = jobs.iter().filter_map(|j| {
            j.start
                .filter(|s| *s >= j.submit)
                .map(|s| s as f64 + j.run_s())
        });
        let span_s = match (
            starts.min(),
            ends.fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e)))),
        ) {
            (Some(s), Some(e)) if e > s as f64 => Some(e - s as f64),
            _ => None,
        };
        let mut per_type: BTreeMap<String, TypeUsage> = BTreeMap::new();
        for j in jobs.iter().filter(|j| j.start.is_some()) {
            for (t, n) in &j.gpus {
                let u = per_type.entry(t.clone()).or_insert(TypeUsage {
                    jobs: 0,
                    gpu_hours: 0.0,
                    capacity: None,
                    utilization: None,
                });
                u.jobs += 1;
                u.gpu_hours += *n as f64 * j.run_s() / 3600.0;
            }
        }
        if let Some(cap) = capacity {
            for (t, c) in cap {
                let u = per_type.entry(t.clone()).or_insert(TypeUsage {
                    jobs: 0,
                    gpu_hours: 0.0,
                    capacity: None,
                    utilization: None,
                });
                u.capacity = Some(*c);
                u.utilization = match span_s {
                    Some(s) if *c > 0 => Some(u.gpu_hours * 3600.0 / (*c as f64 * s)),
                    _ => None,
                };
            }
        }
        let est: Vec<(f64, f64)> = jobs
            .iter()
            .filter(|j| j.finished() && j.state == "COMPLETED")
            .filter_map(|j| j.predicted_run_s.map(|p| (p, j.run_s())))
            .collect();
        Summary {
            jobs: jobs.len(),
            finished: jobs.iter().filter(|j| j.finished()).count(),
            with_decision: jobs.iter().filter(|j| j.decision.is_some()).count(),
            jct: Stats::of(&jct),
            queue_delay: Stats::of(&qd),
            makespan_s,
            span_s,
            per_type,
            estimator_error: ErrorStats::of(&est),
            iteration_time_error: ErrorStats::of(
                &jobs
                    .iter()
                    .filter_map(|j| Some((j.predicted_iter_s()?, j.measured_iter_s?)))
                    .collect::<Vec<_>>(),
            ),
            iteration_predictor_error: None,
            deadlines: DeadlineStats::of(jobs),
            deadlines_per_user: UserDeadlines::of(jobs),
            reconfigurations: ReconfStats::of(jobs),
        }
    }
}

/// A full report: the query, the jobs and their summary (the `--json` form,
/// which `cellsched report compare` reads back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// What was asked of sacct.
    pub query: Query,
    /// The jobs, in sacct order.
    pub jobs: Vec<JobRecord>,
    /// Their summary.
    pub summary: Summary,
}

impl Report {
    /// Builds the report of `jobs`.
    pub fn new(query: Query, jobs: Vec<JobRecord>, capacity: Option<&Capacity>) -> Report {
        let summary = Summary::of(&jobs, capacity);
        Report {
            query,
            jobs,
            summary,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::parse_sacct_line;
    use crate::record::JobRecord;

    /// A job for tests: id, submit, start, end, GPUs TRES, AdminComment, and
    /// the display-only Comment (the name is `job<id>`).
    pub(crate) fn job(
        id: u64,
        submit: i64,
        start: i64,
        end: i64,
        tres: &str,
        admin: &str,
        comment: &str,
    ) -> JobRecord {
        let line = format!(
            "{id}|{id}|alice|gpu|{submit}|{start}|{end}|{}|COMPLETED|0:0|1|{tres}|n1|10|{admin}",
            end - start
        );
        let mut j = parse_sacct_line(&crate::record::tests::rec(&line), 1).unwrap();
        j.name = format!("job{id}");
        j.comment = comment.to_string();
        j
    }

    #[test]
    fn deadline_met_ratio_counts_completed_jobs_ending_by_their_deadline() {
        let a = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet model=m batch=8";
        let mut failed = job(4, 0, 10, 50, "gres/gpu:a100=4", &format!("{a} deadline=100"), "");
        failed.state = "FAILED".into();
        let jobs = vec![
            job(1, 0, 10, 100, "gres/gpu:a100=4", &format!("{a} deadline=100"), ""), // met: End = deadline
            job(2, 0, 10, 101, "gres/gpu:a100=4", &format!("{a} deadline=100"), ""), // missed by 1 s
            job(3, 0, 10, 50, "gres/gpu:a100=4", a, "deadline=1000"),                // user text: not a deadline
            failed,                                                                  // ended early but failed
        ];
        let d = Summary::of(&jobs, None).deadlines.unwrap();
        assert_eq!((d.jobs, d.met), (3, 1));
        assert!((d.met_ratio - 1.0 / 3.0).abs() < 1e-12);
        assert!(Summary::of(&jobs[2..3], None).deadlines.is_none());
        assert!(crate::output::summary_text(&Summary::of(&jobs, None)).contains("Deadlines met:                   1/3"));
    }

    /// Issue 31 item 3: deadline-met and infeasible counts per user.
    #[test]
    fn deadlines_are_counted_per_user() {
        let a = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet model=m batch=8";
        let mut jobs = vec![
            job(1, 0, 10, 100, "gres/gpu:a100=4", &format!("{a} iters=100 deadline=100"), ""), // 50 s of work in 100 s: met
            job(2, 0, 10, 300, "gres/gpu:a100=4", &format!("{a} iters=1000 deadline=100"), ""), // 500 s in 100 s: infeasible, missed
            job(3, 0, 10, 50, "gres/gpu:a100=4", &format!("{a} iters=10"), ""),                 // no deadline
            job(4, 0, 10, 50, "gres/gpu:a100=4", &format!("{a} iters=10 infeasible_deadline=20"), ""), // dropped at submit
        ];
        jobs[1].user = "bob".into();
        jobs[3].user = "bob".into();
        for j in &mut jobs {
            j.apply_time_scale(1.0);
        }
        let per = Summary::of(&jobs, None).deadlines_per_user;
        assert_eq!(per.len(), 2);
        assert_eq!(per["alice"], UserDeadlines { ended: 1, met: 1, infeasible: 0 });
        assert_eq!(per["bob"], UserDeadlines { ended: 1, met: 0, infeasible: 2 });
        let text = crate::output::summary_text(&Summary::of(&jobs, None));
        assert!(text.contains("Deadlines per user:              alice 1/1 met, 0 infeasible; bob 0/1 met, 2 infeasible"), "{text}");
    }

    /// Issue 33 item 5: reconfigurations per job and the time they cost, from the records.
    #[test]
    fn reconfigurations_come_from_the_records() {
        let a = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet model=m batch=8";
        let jobs = vec![
            job(1, 0, 10, 100, "gres/gpu:a100=4", &format!("{a} restarts=2 elastic=USR1 reconf_at=50 reconfs_h=30,50 reconf_cost_s=12.5"), ""),
            job(2, 0, 10, 100, "gres/gpu:a100=4", &format!("{a} elastic=USR2"), ""),
            job(3, 0, 10, 100, "gres/gpu:a100=4", a, "restarts=9 reconf_cost_s=99"), // user text: nothing
        ];
        let r = Summary::of(&jobs, None).reconfigurations.unwrap();
        assert_eq!((r.elastic_jobs, r.jobs_reconfigured, r.reconfigurations), (2, 1, 2));
        assert!((r.cost_s - 12.5).abs() < 1e-9);
        assert!(Summary::of(&jobs[2..], None).reconfigurations.is_none());
        let text = crate::output::report_text(&Report { query: Query::default(), jobs: jobs.clone(), summary: Summary::of(&jobs, None) });
        assert!(text.contains("Reconfigurations:                1 of 2 elastic jobs, 2 in all"), "{text}");
        assert!(text.contains("Reconfs") && text.contains("ReconfCost"), "{text}");
    }

    #[test]
    fn stats_and_percentiles() {
        let s = Stats::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.p99, s.max),
            (4, 4.0, 2.5, 10.0, 10.0)
        );
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile_sorted(&v, 99.0), 198.0);
        assert_eq!(percentile_sorted(&v, 50.0), 100.0);
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn summary_of_two_jobs() {
        let admin = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet";
        let jobs = vec![
            job(1, 0, 10, 110, "gres/gpu:a100=4", &format!("{admin} iters=250"), "iters=1"),
            job(2, 5, 5, 365, "gres/gpu:v100=8", "", ""),
        ];
        let cap: Capacity = [
            ("a100".to_string(), 8),
            ("v100".to_string(), 16),
            ("a10".to_string(), 4),
        ]
        .into();
        let s = Summary::of(&jobs, Some(&cap));
        assert_eq!((s.jobs, s.finished, s.with_decision), (2, 2, 1));
        let jct = s.jct.unwrap();
        assert_eq!((jct.mean, jct.median, jct.max), (235.0, 235.0, 360.0));
        assert_eq!(s.queue_delay.unwrap().mean, 5.0);
        assert_eq!(s.makespan_s, Some(365.0));
        assert_eq!(s.span_s, Some(360.0));
        let a = s.per_type["a100"];
        assert!((a.gpu_hours - 400.0 / 3600.0).abs() < 1e-12);
        assert!((a.utilization.unwrap() - 400.0 / (8.0 * 360.0)).abs() < 1e-12);
        let v = s.per_type["v100"];
        assert!((v.utilization.unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(s.per_type["a10"].utilization, Some(0.0));
        // predicted 250 × 0.5 = 125 s vs actual 100 s: +25 %.
        let e = s.estimator_error.unwrap();
        assert_eq!(e.n, 1);
        assert!((e.mape - 0.25).abs() < 1e-12 && (e.bias.unwrap() - 0.25).abs() < 1e-12);
        // Per iteration: predicted 0.5 s vs measured 100 s / 250 = 0.4 s: +25 %.
        let e = s.iteration_time_error.unwrap();
        assert_eq!(e.n, 1);
        assert!((e.mape - 0.25).abs() < 1e-12);
    }

    #[test]
    fn error_stats_sign() {
        let e = ErrorStats::of(&[(90.0, 100.0), (120.0, 100.0), (5.0, 0.0)]).unwrap();
        assert_eq!(e.n, 2);
        assert!((e.mape - 0.15).abs() < 1e-12);
        assert!((e.bias.unwrap() - 0.05).abs() < 1e-12);
    }
}
