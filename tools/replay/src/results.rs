//! Per-mode results from sacct records, and the stock vs cellsched comparison.
//!
//! Statistics come from the report library ([`cellsched_report::Summary`]):
//! JCT = End − Submit, queueing delay = Start − Submit, makespan = last End −
//! first Submit, all in real (compressed) seconds. Jobs that were never
//! submitted, were cancelled as stuck or did not complete are counted, never
//! silently dropped.
use crate::jobs::{gap, JobGap, JobTimes};
use crate::workload::Mode;
use cellsched_report::summary::Stats;
use cellsched_report::{JobRecord, Summary};
use cellsched_sim::Metrics;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

/// A trace job that did not run to the end, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// Trace job id.
    pub trace_job: String,
    /// Slurm job id, when it was submitted.
    pub slurm_id: Option<u64>,
    /// What happened.
    pub reason: String,
}

/// One mode's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeResult {
    /// The mode.
    pub mode: Mode,
    /// Jobs in the trace.
    pub trace_jobs: usize,
    /// Jobs Slurm accepted.
    pub submitted: usize,
    /// Jobs with an End time in sacct.
    pub finished: usize,
    /// Jobs that ended `COMPLETED`.
    pub completed: usize,
    /// Jobs whose AdminComment carries a cellsched decision.
    pub with_decision: usize,
    /// Mean GPUs allocated per started job.
    pub avg_gpus: Option<f64>,
    /// Mean JCT of finished jobs, seconds.
    pub avg_jct_s: Option<f64>,
    /// Median JCT, seconds.
    pub median_jct_s: Option<f64>,
    /// 99th-percentile JCT, seconds.
    pub p99_jct_s: Option<f64>,
    /// Mean queueing delay of started jobs, seconds.
    pub avg_queue_s: Option<f64>,
    /// Last End − first Submit, seconds.
    pub makespan_s: Option<f64>,
    /// GPU-hours per GPU type (real time).
    pub gpu_hours: Vec<(String, f64)>,
    /// Submission failures, stuck or unfinished jobs.
    pub problems: Vec<Problem>,
    /// Wall time of the mode (submissions to last job end), seconds.
    pub wall_s: f64,
    /// The estimator's error over the mode's jobs: predicted (AdminComment
    /// `iter_s`) vs measured seconds per iteration (the jobs' own
    /// `cellsched-iter` lines, at the replay's time scale).
    pub iteration_time_error: Option<cellsched_report::summary::ErrorStats>,
    /// Per job, trace seconds from the mode's first submission slot
    /// ([`crate::jobs`]); filled by the runner, which knows when it began.
    pub jobs: Vec<JobTimes>,
    /// Mean real seconds a job held its GPUs beyond the trainer's own run
    /// (sacct run time minus the trainer's elapsed time), over the jobs
    /// that printed their summary; what the simulator's launch time models.
    pub launch_s: Option<f64>,
}

impl ModeResult {
    /// Summarizes a mode from its sacct `records` plus what went wrong
    /// before sacct could see it (`problems`).
    pub fn of(mode: Mode, trace_jobs: usize, records: &[JobRecord], mut problems: Vec<Problem>, wall_s: f64) -> ModeResult {
        let s = Summary::of(records, None);
        for r in records.iter().filter(|r| r.state != "COMPLETED") {
            if problems.iter().any(|p| p.slurm_id == Some(r.job_id)) {
                continue;
            }
            problems.push(Problem {
                trace_job: trace_job_of(r).unwrap_or_else(|| r.name.clone()),
                slurm_id: Some(r.job_id),
                reason: format!("ended {} (exit {})", r.state, r.exit_code),
            });
        }
        let gpus: Vec<f64> = records.iter().filter(|r| r.start.is_some()).map(|r| f64::from(r.gpu_count())).collect();
        let avg_gpus = Stats::of(&gpus).map(|g| g.mean);
        ModeResult {
            mode,
            avg_gpus,
            trace_jobs,
            submitted: records.len(),
            finished: s.finished,
            completed: records.iter().filter(|r| r.state == "COMPLETED").count(),
            with_decision: s.with_decision,
            avg_jct_s: s.jct.as_ref().map(|j| j.mean),
            median_jct_s: s.jct.as_ref().map(|j| j.median),
            p99_jct_s: s.jct.as_ref().map(|j| j.p99),
            avg_queue_s: s.queue_delay.as_ref().map(|q| q.mean),
            makespan_s: s.makespan_s,
            gpu_hours: s.per_type.iter().map(|(t, u)| (t.clone(), u.gpu_hours)).collect(),
            problems,
            wall_s,
            iteration_time_error: s.iteration_time_error,
            jobs: Vec::new(),
            launch_s: None,
        }
    }
}

/// The trace job id recorded in a replay job's comment (`trace_job=ID`).
pub fn trace_job_of(r: &JobRecord) -> Option<String> {
    r.comment.split_whitespace().find_map(|w| w.strip_prefix("trace_job=")).map(str::to_string)
}

/// `a / b` when both are known and `b > 0`.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

/// Stock / cellsched ratios (> 1: cellsched is better).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// Average JCT.
    pub avg_jct: Option<f64>,
    /// Median JCT.
    pub median_jct: Option<f64>,
    /// Makespan.
    pub makespan: Option<f64>,
    /// Average queueing delay.
    pub avg_queue: Option<f64>,
}

impl Ratios {
    /// The ratios of two modes' results.
    pub fn live(stock: &ModeResult, cs: &ModeResult) -> Ratios {
        Ratios {
            avg_jct: ratio(stock.avg_jct_s, cs.avg_jct_s),
            median_jct: ratio(stock.median_jct_s, cs.median_jct_s),
            makespan: ratio(stock.makespan_s, cs.makespan_s),
            avg_queue: ratio(stock.avg_queue_s, cs.avg_queue_s),
        }
    }

    /// The ratios of two simulated runs (`slurm` / `cellsched`).
    pub fn sim(slurm: &Metrics, cs: &Metrics) -> Ratios {
        let f = |x: f64| (x.is_finite()).then_some(x);
        Ratios {
            avg_jct: ratio(f(slurm.avg_jct_s), f(cs.avg_jct_s)),
            median_jct: ratio(f(slurm.median_jct_s), f(cs.median_jct_s)),
            makespan: ratio(f(slurm.makespan_s), f(cs.makespan_s)),
            avg_queue: ratio(f(slurm.avg_queue_s), f(cs.avg_queue_s)),
        }
    }
}

/// The simulator's view of the same trace, in trace seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimSide {
    /// The cluster TOML simulated.
    pub cluster: String,
    /// Policy `slurm` (the stock baseline).
    pub slurm: Metrics,
    /// Policy `cellsched`.
    pub cellsched: Metrics,
    /// slurm / cellsched.
    pub ratios: Ratios,
    /// Per job under `slurm`.
    pub slurm_jobs: Vec<JobTimes>,
    /// Per job under `cellsched`.
    pub cellsched_jobs: Vec<JobTimes>,
    /// How the simulator models the live cluster (one line per mechanism).
    pub model: Vec<String>,
    /// Policy `cellsched` with every job opted in (`--elastic`).
    pub elastic: Option<Metrics>,
    /// cellsched / elastic, simulated.
    pub elastic_ratios: Option<Ratios>,
    /// Per job under `cellsched` with every job opted in.
    pub elastic_jobs: Vec<JobTimes>,
    /// The reconfigurations the simulator made there, in order.
    pub reconfigs: Vec<crate::sim::SimReconfig>,
}

/// Everything a replay run reports (`--json` prints this).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The trace file.
    pub trace: String,
    /// Trace seconds per real second.
    pub speedup: f64,
    /// When the run started (UTC, RFC 3339).
    pub started: String,
    /// Each mode that ran, in order.
    pub modes: Vec<ModeResult>,
    /// stock / cellsched, when both ran.
    pub live_ratios: Option<Ratios>,
    /// cellsched / elastic (the same jobs without and with `--dl-elastic`), when both ran.
    pub elastic_ratios: Option<Ratios>,
    /// The simulator on the same trace, when asked for.
    pub sim: Option<SimSide>,
    /// Whether the live and simulated average-JCT ratios point the same way.
    pub same_direction: Option<bool>,
    /// Live stock/cellsched average-JCT ratio over the simulated one
    /// (1 = the simulator predicted the live ratio exactly).
    pub live_over_sim: Option<f64>,
    /// Live cellsched/elastic average-JCT ratio over the simulated one.
    pub elastic_live_over_sim: Option<f64>,
    /// Per mode, live vs simulated jobs (stock vs `slurm`, cellsched vs `cellsched`).
    pub job_gaps: Vec<(Mode, JobGap)>,
}

impl Comparison {
    /// Builds the comparison, computing ratios and the direction check.
    pub fn new(trace: String, speedup: f64, started: String, modes: Vec<ModeResult>, sim: Option<SimSide>) -> Comparison {
        let get = |m: Mode| modes.iter().find(|r| r.mode == m);
        let live_ratios = match (get(Mode::Stock), get(Mode::Cellsched)) {
            (Some(s), Some(c)) => Some(Ratios::live(s, c)),
            _ => None,
        };
        let elastic_ratios = match (get(Mode::Cellsched), get(Mode::Elastic)) {
            (Some(c), Some(e)) => Some(Ratios::live(c, e)),
            _ => None,
        };
        let same_direction = match (live_ratios.as_ref().and_then(|r| r.avg_jct), sim.as_ref().and_then(|s| s.ratios.avg_jct)) {
            (Some(l), Some(s)) => Some((l >= 1.0) == (s >= 1.0)),
            _ => None,
        };
        let live_over_sim = ratio(live_ratios.as_ref().and_then(|r| r.avg_jct), sim.as_ref().and_then(|s| s.ratios.avg_jct));
        let elastic_live_over_sim = ratio(elastic_ratios.as_ref().and_then(|r| r.avg_jct), sim.as_ref().and_then(|s| s.elastic_ratios.as_ref()?.avg_jct));
        let job_gaps = match &sim {
            Some(s) => modes
                .iter()
                .filter_map(|m| {
                    let simulated = match m.mode {
                        Mode::Stock => &s.slurm_jobs,
                        Mode::Cellsched => &s.cellsched_jobs,
                        Mode::Elastic if s.elastic.is_some() => &s.elastic_jobs,
                        Mode::Elastic => return None,
                    };
                    Some((m.mode, gap(&m.jobs, simulated)))
                })
                .collect(),
            None => Vec::new(),
        };
        Comparison { trace, speedup, started, modes, live_ratios, elastic_ratios, sim, same_direction, live_over_sim, elastic_live_over_sim, job_gaps }
    }
}

fn secs(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

fn times(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}x"))
}

/// The live table: one row per mode plus the stock/cellsched ratio row.
pub fn live_table(c: &Comparison) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["live (real s)", "jobs", "submitted", "completed", "with Cell", "GPUs/job", "avg JCT", "median JCT", "p99 JCT", "avg queue", "makespan"]);
    for m in &c.modes {
        t.add_row(vec![
            m.mode.name().to_string(),
            m.trace_jobs.to_string(),
            m.submitted.to_string(),
            m.completed.to_string(),
            m.with_decision.to_string(),
            m.avg_gpus.map_or("-".into(), |g| format!("{g:.1}")),
            secs(m.avg_jct_s),
            secs(m.median_jct_s),
            secs(m.p99_jct_s),
            secs(m.avg_queue_s),
            secs(m.makespan_s),
        ]);
    }
    for (label, r) in [("stock / cellsched", &c.live_ratios), ("cellsched / elastic", &c.elastic_ratios)] {
        if let Some(r) = r {
            t.add_row(vec![
                label.into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                times(r.avg_jct),
                times(r.median_jct),
                String::new(),
                times(r.avg_queue),
                times(r.makespan),
            ]);
        }
    }
    t
}

/// The simulator table (trace seconds).
pub fn sim_table(s: &SimSide) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["simulated (trace s)", "jobs", "finished", "avg JCT", "median JCT", "p99 JCT", "avg queue", "makespan"]);
    for (name, m) in [("slurm", Some(&s.slurm)), ("cellsched", Some(&s.cellsched)), ("cellsched, elastic", s.elastic.as_ref())] {
        let Some(m) = m else { continue };
        t.add_row(vec![
            name.to_string(),
            m.jobs.to_string(),
            m.finished.to_string(),
            format!("{:.1}", m.avg_jct_s),
            format!("{:.1}", m.median_jct_s),
            format!("{:.1}", m.p99_jct_s),
            format!("{:.1}", m.avg_queue_s),
            format!("{:.1}", m.makespan_s),
        ]);
    }
    for (label, r) in [("slurm / cellsched", Some(&s.ratios)), ("cellsched / elastic", s.elastic_ratios.as_ref())] {
        let Some(r) = r else { continue };
        t.add_row(vec![
            label.into(),
            String::new(),
            String::new(),
            times(r.avg_jct),
            times(r.median_jct),
            String::new(),
            times(r.avg_queue),
            times(r.makespan),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_report::record::parse_sacct_line;

    /// A sacct record: id, submit, start, end, state, AdminComment; the display comment names the trace job.
    fn rec(id: u64, submit: i64, start: i64, end: i64, state: &str, admin: &str, trace: &str) -> JobRecord {
        let line = format!("{id}|{id}|root|gpu|{submit}|{start}|{end}|{}|{state}|0:0|1|gres/gpu:a100=4|a100-1|5|{admin}", end - start);
        let mut r = parse_sacct_line(&line.replace('|', "\u{1f}"), 1).unwrap();
        r.name = format!("replay-stock-{trace}");
        r.comment = format!("cellsched-replay run=r mode=stock trace_job={trace}");
        r
    }

    #[test]
    fn mode_result_aggregates_and_counts_problems() {
        let admin = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet";
        let records = vec![
            rec(10, 100, 100, 130, "COMPLETED", admin, "a"), // JCT 30, queue 0
            rec(11, 110, 130, 190, "COMPLETED", "", "b"),    // JCT 80, queue 20
            rec(12, 120, 190, 220, "TIMEOUT", "", "c"),      // JCT 100, queue 70
        ];
        let submit_failure = Problem { trace_job: "d".into(), slurm_id: None, reason: "sbatch: bad".into() };
        let m = ModeResult::of(Mode::Stock, 4, &records, vec![submit_failure], 120.0);
        assert_eq!((m.trace_jobs, m.submitted, m.finished, m.completed, m.with_decision), (4, 3, 3, 2, 1));
        assert_eq!(m.avg_jct_s, Some(70.0));
        assert_eq!(m.median_jct_s, Some(80.0));
        assert_eq!(m.avg_queue_s, Some(30.0));
        assert_eq!(m.makespan_s, Some(120.0));
        assert_eq!(m.avg_gpus, Some(4.0));
        // The failed submission and the timed-out job are both reported.
        assert_eq!(m.problems.len(), 2);
        assert_eq!(m.problems[1].trace_job, "c");
        assert_eq!(m.problems[1].slurm_id, Some(12));
        assert!(m.problems[1].reason.contains("TIMEOUT"));
        let hours = m.gpu_hours.iter().find(|(t, _)| t == "a100").unwrap().1;
        assert!((hours - 4.0 * (30.0 + 60.0 + 30.0) / 3600.0).abs() < 1e-12);
    }

    #[test]
    fn avg_gpus_is_over_started_jobs_only() {
        let eight = |id, start, end| {
            let mut r = rec(id, 0, start, end, "COMPLETED", "", "x");
            r.gpus = [("a100".to_string(), 8)].into();
            r
        };
        let mut pending = rec(3, 0, 0, 1, "PENDING", "", "p");
        pending.start = None;
        pending.end = None;
        let records = vec![rec(1, 0, 10, 20, "COMPLETED", "", "a"), eight(2, 10, 40), pending.clone()];
        assert_eq!(ModeResult::of(Mode::Stock, 3, &records, vec![], 0.0).avg_gpus, Some(6.0));
        assert_eq!(ModeResult::of(Mode::Stock, 1, &[pending], vec![], 0.0).avg_gpus, None);
        assert_eq!(ModeResult::of(Mode::Stock, 0, &[], vec![], 0.0).avg_gpus, None);
    }

    #[test]
    fn ratios_and_direction() {
        let stock = ModeResult::of(Mode::Stock, 1, &[rec(1, 0, 50, 100, "COMPLETED", "", "a")], vec![], 0.0);
        let cs = ModeResult::of(Mode::Cellsched, 1, &[rec(2, 0, 10, 40, "COMPLETED", "", "a")], vec![], 0.0);
        let c = Comparison::new("t.csv".into(), 20.0, "now".into(), vec![stock.clone(), cs.clone()], None);
        let r = c.live_ratios.clone().unwrap();
        assert_eq!(r.avg_jct, Some(2.5));
        assert_eq!(r.makespan, Some(2.5));
        assert_eq!(r.avg_queue, Some(5.0));
        assert_eq!(c.same_direction, None, "no simulator side: no direction check");
        // One mode only: no ratios.
        assert!(Comparison::new("t".into(), 1.0, "n".into(), vec![stock], None).live_ratios.is_none());
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
        let text = live_table(&c).to_string();
        assert!(text.contains("2.50x") && text.contains("stock / cellsched"), "{text}");
    }

    #[test]
    fn trace_job_comes_from_the_comment() {
        assert_eq!(trace_job_of(&rec(1, 0, 0, 1, "COMPLETED", "", "j-42")).as_deref(), Some("j-42"));
    }
}
