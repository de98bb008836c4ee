//! One job as reported: the typed form of a `sacct --parsable2` record.
//!
//! **Trust rule.** Everything a report computes (timings, GPUs, the Cell,
//! DL tags, predictions, the predictor's history) comes from fields only
//! Slurm or the plugins write: [`SACCT_FIELDS`], with the DL tags read from
//! AdminComment alone (written by job_submit/cellsched). User-writable text
//! (`JobName`, `Comment`) is fetched by a second query ([`DISPLAY_FIELDS`])
//! and is display-only: whatever it holds (newlines, the delimiter, non-UTF-8)
//! cannot break or change a report.
//!
//! Records are separated by [`DELIM`] (ASCII unit separator, 0x1f) with
//! AdminComment last; a line that does not start a record continues the
//! previous record's AdminComment (an admin's `scontrol update
//! AdminComment=` may hold a newline).
//!
//! Derived values:
//! - queueing delay = Start − Submit, JCT (job completion time) = End − Submit,
//!   run time = ElapsedRaw;
//! - typed GPUs from AllocTRES `gres/gpu:TYPE=N` (an untyped `gres/gpu=N`
//!   takes the type of the recorded Cell, else `gpu`);
//! - the Cell/plan from the plugins' AdminComment ([`Decision`]);
//! - DL tags `model=`, `batch=`, `iters=`, `deadline=` from AdminComment;
//! - predicted run time = iters × the Decision's `iter_s` × the report's time
//!   scale ([`JobRecord::apply_time_scale`]: `cellsched report --time-scale X`
//!   for emulated, time-compressed runs; 1 otherwise);
//! - predicted vs measured seconds per iteration ([`JobRecord::measure`]):
//!   the Decision's `iter_s` against what the job itself shows — the median of
//!   its `cellsched-iter <seconds>` output lines when the report is given the
//!   job output files (on the job's own clock), else run time / iterations
//!   for a COMPLETED job divided by the time scale; never the prediction
//!   injected into the job.
use crate::error::ReportError;
use cellsched_core::record::DlRecord;
use cellsched_core::slurm_text::parse_tres_gpus;
use cellsched_core::Decision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The field delimiter passed to `sacct --delimiter` (ASCII unit separator).
pub const DELIM: char = '\u{1f}';

/// The user-writable fields, fetched separately for display only:
/// `JobIDRaw`, then `JobName` and `Comment`.
pub const DISPLAY_FIELDS: &[&str] = &["JobIDRaw", "JobName", "Comment"];

/// The `sacct --format` fields, in the order [`parse_sacct_line`] expects:
/// only fields Slurm or the plugins write, `AdminComment` last.
pub const SACCT_FIELDS: &[&str] = &[
    "JobIDRaw",
    "JobID",
    "User",
    "Partition",
    "Submit",
    "Start",
    "End",
    "ElapsedRaw",
    "State",
    "ExitCode",
    "NNodes",
    "AllocTRES",
    "NodeList",
    "TimelimitRaw",
    "AdminComment",
];

/// The DL facts of a job's cellsched record that reports show ([`DlTags::of`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DlTags {
    /// `model=NAME`.
    pub model: Option<String>,
    /// `batch=N` (global batch).
    pub batch: Option<u32>,
    /// `iters=N` (declared iterations; also `iterations=`).
    pub iters: Option<u64>,
    /// `deadline=T` (Unix time job_submit resolved `--dl-deadline` to).
    #[serde(default)]
    pub deadline: Option<i64>,
    /// `elastic=`: the job opted in to reconfiguration (`--dl-elastic`).
    #[serde(default)]
    pub elastic: bool,
    /// `restarts=`: reconfigurations cellsched made of the running job.
    #[serde(default)]
    pub reconfs: u32,
    /// `reconf_cost_s=`: seconds the reconfigurations cost it (from each
    /// signal to the job pending again, as slurmctld measured them).
    #[serde(default)]
    pub reconf_cost_s: f64,
    /// `infeasible_deadline=T`: a deadline dropped at submit because the
    /// job could not meet it even alone on its fastest Cell.
    #[serde(default)]
    pub infeasible_deadline: Option<i64>,
}

impl DlTags {
    /// The facts of a cellsched job record that reports show (none without a record).
    pub fn of(record: Option<&DlRecord>) -> DlTags {
        record.map_or_else(DlTags::default, |r| DlTags {
            model: r.model.clone(),
            batch: r.batch.and_then(|b| u32::try_from(b).ok()),
            iters: r.iters,
            deadline: r.deadline,
            elastic: r.elastic.is_some(),
            reconfs: r.restarts,
            reconf_cost_s: r.reconf_cost_s,
            infeasible_deadline: r.infeasible_deadline,
        })
    }
}

/// A job allocation as read from sacct, with derived timings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Numeric job id (`JobIDRaw`).
    pub job_id: u64,
    /// Display id (`JobID`, e.g. `12_3` for array tasks).
    pub job_id_text: String,
    /// `JobName`.
    pub name: String,
    /// `User`.
    pub user: String,
    /// `Partition`.
    pub partition: String,
    /// Submit time (seconds; Unix epoch when sacct printed `%s`).
    pub submit: i64,
    /// Start time, if started.
    pub start: Option<i64>,
    /// End time, if ended.
    pub end: Option<i64>,
    /// `ElapsedRaw` seconds.
    pub elapsed_s: u64,
    /// First word of `State` (e.g. `COMPLETED`, `CANCELLED`).
    pub state: String,
    /// `ExitCode`.
    pub exit_code: String,
    /// `NNodes`.
    pub nodes: u32,
    /// Allocated GPUs per type (from AllocTRES).
    pub gpus: BTreeMap<String, u32>,
    /// `NodeList`.
    pub node_list: String,
    /// Time limit in seconds (`TimelimitRaw` minutes × 60); `None` if unlimited.
    pub time_limit_s: Option<u64>,
    /// `AdminComment` as recorded.
    pub admin_comment: String,
    /// `Comment` as recorded (display only; lossy UTF-8).
    pub comment: String,
    /// The Cell/plan recorded by the plugins, if any.
    pub decision: Option<Decision>,
    /// DL tags from AdminComment.
    pub tags: DlTags,
    /// Start − Submit, seconds.
    pub queue_delay_s: Option<f64>,
    /// End − Submit, seconds.
    pub jct_s: Option<f64>,
    /// Declared iterations × predicted seconds per iteration × time scale.
    pub predicted_run_s: Option<f64>,
    /// Real seconds per predicted second (`cellsched report --time-scale`; 1 unless emulated).
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Measured seconds per iteration (unscaled), from the job itself ([`JobRecord::measure`]).
    #[serde(default)]
    pub measured_iter_s: Option<f64>,
    /// Where `measured_iter_s` came from: `iter-log` or `run/iters`.
    #[serde(default)]
    pub measured_from: Option<String>,
    /// Earlier runs of the job that Slurm requeued (sacct `--duplicates`
    /// rows folded in by [`merge_requeued_runs`]): 0 for a job that ran once.
    #[serde(default)]
    pub requeued_runs: u32,
    /// The job's own measure of its last restart: the last
    /// `cellsched-restart <seconds>` line of its output (from its start to
    /// the end of its first iteration after resuming), when the report is
    /// given the job output files. The job's claim, shown, never used to decide.
    #[serde(default)]
    pub measured_restart_s: Option<f64>,
}

fn one() -> f64 {
    1.0
}

impl JobRecord {
    /// Total allocated GPUs.
    pub fn gpu_count(&self) -> u32 {
        self.gpus.values().sum()
    }

    /// Run time in seconds (End − Start, else `ElapsedRaw`).
    pub fn run_s(&self) -> f64 {
        match (self.start, self.end) {
            (Some(s), Some(e)) if e >= s => (e - s) as f64,
            _ => self.elapsed_s as f64,
        }
    }

    /// Sets the time scale of an emulated, time-compressed run: the
    /// prediction becomes iters × `iter_s` × `scale` (real seconds).
    pub fn apply_time_scale(&mut self, scale: f64) {
        self.time_scale = scale;
        if self.measured_from.as_deref() != Some("iter-log") {
            self.measure(None);
        }
        self.predicted_run_s = match (&self.decision, self.tags.iters) {
            (Some(d), Some(it)) => Some(d.iter_s * it as f64 * scale),
            _ => None,
        };
    }

    /// Predicted seconds per iteration (the Decision's), if any.
    pub fn predicted_iter_s(&self) -> Option<f64> {
        self.decision.as_ref().map(|d| d.iter_s)
    }

    /// Measures seconds per iteration from the job itself: the median of the
    /// `cellsched-iter <seconds>` lines of `log` (its output file's text; the
    /// lines are on the job's own clock: an emulated trainer prints its
    /// unscaled speed), else run time / AdminComment `iters=` of a COMPLETED
    /// job divided by the time scale. Never reads the prediction.
    pub fn measure(&mut self, log: Option<&str>) {
        let scale = if self.time_scale > 0.0 { self.time_scale } else { 1.0 };
        if let Some(l) = log {
            self.measured_restart_s = last_restart_line(l);
        }
        if let Some(m) = log.and_then(median_iter_line) {
            self.measured_iter_s = Some(m);
            self.measured_from = Some("iter-log".into());
            return;
        }
        match (self.state.as_str(), self.tags.iters) {
            ("COMPLETED", Some(n)) if n > 0 && self.start.is_some() && self.run_s() > 0.0 => {
                self.measured_iter_s = Some(self.run_s() / n as f64 / scale);
                self.measured_from = Some("run/iters".into());
            }
            _ => {
                self.measured_iter_s = None;
                self.measured_from = None;
            }
        }
    }

    /// Whether the job has finished (has an End time).
    pub fn finished(&self) -> bool {
        self.end.is_some()
    }

    /// GPUs as text, e.g. `a100:4` or `a100:4,v100:8`; `-` if none.
    pub fn gpus_text(&self) -> String {
        if self.gpus.is_empty() {
            return "-".into();
        }
        self.gpus
            .iter()
            .map(|(t, n)| format!("{t}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Parses sacct time text: Unix seconds (`SLURM_TIME_FORMAT=%s`) or
/// `YYYY-MM-DDTHH:MM:SS` (read as UTC: only differences are used). `None` for
/// `Unknown`, `None` or empty. `Err` names what was wrong.
pub fn parse_time(s: &str) -> Result<Option<i64>, String> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("unknown") || s.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    if s.chars().all(|c| c.is_ascii_digit()) {
        return s
            .parse()
            .map(Some)
            .map_err(|_| format!("time '{s}' out of range"));
    }
    let bad = || format!("time '{s}' is neither Unix seconds nor YYYY-MM-DDTHH:MM:SS");
    let (date, time) = s.split_once('T').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if d.len() != 3
        || t.len() != 3
        || !(1..=12).contains(&d[1])
        || !(1..=31).contains(&d[2])
        || t[0] > 23
        || t[1] > 59
        || t[2] > 60
    {
        return Err(bad());
    }
    Ok(Some(
        days_from_civil(d[0], d[1], d[2]) * 86_400 + t[0] * 3600 + t[1] * 60 + t[2],
    ))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Median of the `cellsched-iter <seconds>` lines of a job's output, if any.
pub fn median_iter_line(text: &str) -> Option<f64> {
    let mut v: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cellsched-iter"))
        .filter_map(|r| r.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The last `cellsched-restart <seconds>` line of a job's output, if any
/// (an elastic job's time from its start to the end of its first
/// iteration after resuming from its checkpoint).
pub fn last_restart_line(text: &str) -> Option<f64> {
    text.lines()
        .rev()
        .filter_map(|l| l.trim().strip_prefix("cellsched-restart"))
        .filter_map(|r| r.split_whitespace().next()?.parse::<f64>().ok())
        .find(|x| x.is_finite() && *x >= 0.0)
}

/// Whether `line` starts a record: [`SACCT_FIELDS`] count of fields and a numeric JobIDRaw.
fn starts_record(line: &str) -> bool {
    line.split(DELIM).count() >= SACCT_FIELDS.len()
        && line.split(DELIM).next().is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses one `sacct --parsable2 --noheader --delimiter=<DELIM>` record in
/// [`SACCT_FIELDS`] order; `line_no` (1-based) names its first line in errors.
pub fn parse_sacct_line(line: &str, line_no: usize) -> Result<JobRecord, ReportError> {
    let err = |msg: String| ReportError::MalformedLine {
        line: line_no,
        msg,
        text: line.escape_debug().to_string(),
    };
    let n = SACCT_FIELDS.len();
    let f: Vec<&str> = line.splitn(n, DELIM).collect();
    if f.len() != n {
        return Err(err(format!(
            "expected {n} fields separated by 0x1f ({}), found {}",
            SACCT_FIELDS.join(","),
            f.len()
        )));
    }
    let field = |i: usize| f[i].trim();
    let job_id: u64 = field(0)
        .parse()
        .map_err(|_| err(format!("JobIDRaw '{}' is not a number", field(0))))?;
    let time =
        |i: usize| parse_time(field(i)).map_err(|m| err(format!("{}: {m}", SACCT_FIELDS[i])));
    let submit = time(4)?.ok_or_else(|| err("Submit time missing".into()))?;
    let start = time(5)?;
    let end = time(6)?;
    let elapsed_s: u64 = field(7)
        .parse()
        .map_err(|_| err(format!("ElapsedRaw '{}' is not a number", field(7))))?;
    let nodes: u32 = if field(10).is_empty() {
        0
    } else {
        field(10)
            .parse()
            .map_err(|_| err(format!("NNodes '{}' is not a number", field(10))))?
    };
    let time_limit_s = match field(13) {
        "" | "UNLIMITED" | "Partition_Limit" => None,
        m => Some(
            m.parse::<u64>()
                .map_err(|_| err(format!("TimelimitRaw '{m}' is not minutes")))?
                * 60,
        ),
    };
    let admin_comment = f[14].trim_end_matches(['\n', '\r']).trim().to_string();
    let record = DlRecord::parse(&admin_comment);
    let decision = record.as_ref().map(|r| r.decision.clone());
    let fallback = decision
        .as_ref()
        .map(|d| d.cell.gpu_type.clone())
        .unwrap_or_else(|| "gpu".into());
    let gpus = parse_tres_gpus(field(11), &fallback).map_err(|m| err(format!("AllocTRES: {m}")))?;
    let tags = DlTags::of(record.as_ref());
    // A started job that never ended (RUNNING) has no End; an unstarted one
    // (PENDING, cancelled while pending) may carry Start = End.
    let started = start.filter(|s| *s >= submit);
    let queue_delay_s = started.map(|s| (s - submit) as f64);
    let jct_s = end.filter(|e| *e >= submit).map(|e| (e - submit) as f64);
    let predicted_run_s = match (&decision, tags.iters) {
        (Some(d), Some(it)) => Some(d.iter_s * it as f64),
        _ => None,
    };
    let state = field(8).split_whitespace().next().unwrap_or("").to_string();
    if state.is_empty() {
        return Err(err("State is empty".into()));
    }
    let mut r = JobRecord {
        job_id,
        job_id_text: field(1).to_string(),
        name: String::new(),
        user: field(2).to_string(),
        partition: field(3).to_string(),
        submit,
        start,
        end,
        elapsed_s,
        state,
        exit_code: field(9).to_string(),
        nodes,
        gpus,
        node_list: field(12).to_string(),
        time_limit_s,
        admin_comment,
        comment: String::new(),
        decision,
        tags,
        queue_delay_s,
        jct_s,
        predicted_run_s,
        time_scale: 1.0,
        measured_iter_s: None,
        measured_from: None,
        requeued_runs: 0,
        measured_restart_s: None,
    };
    r.measure(None);
    Ok(r)
}

/// Folds the rows of a requeued job (sacct `--duplicates`: one row per
/// run, each with the Submit time Slurm reset at the requeue) into one
/// record: the last run's fields, the first run's Submit, the first start
/// for the queueing delay, and [`JobRecord::requeued_runs`]. The order of
/// first appearance is kept.
pub fn merge_requeued_runs(jobs: Vec<JobRecord>) -> Vec<JobRecord> {
    let mut groups: Vec<Vec<JobRecord>> = Vec::with_capacity(jobs.len());
    let mut at: BTreeMap<u64, usize> = BTreeMap::new();
    for j in jobs {
        match at.get(&j.job_id) {
            Some(&i) => groups[i].push(j),
            None => {
                at.insert(j.job_id, groups.len());
                groups.push(vec![j]);
            }
        }
    }
    groups
        .into_iter()
        .map(|mut runs| {
            runs.sort_by_key(|r| r.submit);
            let first = runs.first().expect("a group holds a run").clone();
            let mut last = runs.pop().expect("a group holds a run");
            last.requeued_runs = runs.len() as u32;
            if !runs.is_empty() {
                let submit = first.submit;
                last.submit = submit;
                last.queue_delay_s = first.start.filter(|s| *s >= submit).map(|s| (s - submit) as f64);
                last.jct_s = last.end.filter(|e| *e >= submit).map(|e| (e - submit) as f64);
            }
            last
        })
        .collect()
}

/// Parses the whole output of the trusted query ([`SACCT_FIELDS`]): a line
/// that does not start a record continues the previous record's last field
/// (AdminComment); blank lines between records are skipped.
pub fn parse_sacct_output(text: &str) -> Result<Vec<JobRecord>, ReportError> {
    let mut records: Vec<(usize, String)> = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        let l = l.strip_suffix('\r').unwrap_or(l);
        if starts_record(l) || records.is_empty() {
            if l.trim().is_empty() {
                continue;
            }
            records.push((i + 1, l.to_string()));
        } else if let Some(last) = records.last_mut() {
            last.1.push('\n');
            last.1.push_str(l);
        }
    }
    records.iter().map(|(n, r)| parse_sacct_line(r.trim_end_matches('\n'), *n)).collect()
}

/// Parses the display query's output ([`DISPLAY_FIELDS`]) for the jobs
/// `ids` (in the trusted query's order, which sacct repeats): each record
/// starts at a line `<id><DELIM>` for the next expected id; every other line
/// continues the current record. Never fails: a record that cannot be
/// found leaves the job's name and comment empty. Returns (name, comment) by job id.
pub fn parse_display_output(text: &str, ids: &[u64]) -> BTreeMap<u64, (String, String)> {
    let mut out: BTreeMap<u64, (String, String)> = BTreeMap::new();
    let mut cur: Option<(u64, String)> = None;
    let mut next = 0usize;
    let flush = |cur: &mut Option<(u64, String)>, out: &mut BTreeMap<u64, (String, String)>| {
        if let Some((id, rec)) = cur.take() {
            let rest = rec.trim_end_matches(['\n', '\r']);
            let (name, comment) = rest.split_once(DELIM).unwrap_or((rest, ""));
            out.entry(id).or_insert((name.to_string(), comment.to_string()));
        }
    };
    for line in text.split('\n') {
        let start = (next..ids.len()).take(1).find_map(|k| {
            let p = format!("{}{DELIM}", ids[k]);
            line.strip_prefix(p.as_str()).map(|rest| (k, rest))
        });
        match start {
            Some((k, rest)) => {
                flush(&mut cur, &mut out);
                cur = Some((ids[k], rest.to_string()));
                next = k + 1;
            }
            None => {
                if let Some((_, rec)) = &mut cur {
                    rec.push('\n');
                    rec.push_str(line);
                }
            }
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// Fills the display-only fields (JobName, Comment) of `jobs`.
pub fn set_display(jobs: &mut [JobRecord], display: &BTreeMap<u64, (String, String)>) {
    for j in jobs {
        if let Some((name, comment)) = display.get(&j.job_id) {
            j.name = name.clone();
            j.comment = comment.clone();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A record from `|`-separated text (the tests' readable form).
    pub(crate) fn rec(s: &str) -> String {
        s.replace('|', &DELIM.to_string())
    }

    pub(crate) const DECIDED: &str = "17|17|alice|gpu|1700000000|1700000010|1700000110|100|COMPLETED|0:0|1|billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4,mem=100M,node=1|a100-1|5|cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.200000 src=datasheet model=gpt2 batch=32 iters=450";

    #[test]
    fn parses_a_decided_job() {
        let r = parse_sacct_line(&rec(DECIDED), 1).unwrap();
        assert_eq!(r.job_id, 17);
        assert_eq!(r.user, "alice");
        assert_eq!(
            (r.submit, r.start, r.end),
            (1_700_000_000, Some(1_700_000_010), Some(1_700_000_110))
        );
        assert_eq!(r.queue_delay_s, Some(10.0));
        assert_eq!(r.jct_s, Some(110.0));
        assert_eq!(r.gpus.get("a100"), Some(&4));
        assert_eq!(r.gpu_count(), 4);
        assert_eq!(r.time_limit_s, Some(300));
        let d = r.decision.as_ref().unwrap();
        assert_eq!(d.cell.to_string(), "a100x4x1");
        assert_eq!(r.tags, DlTags { model: Some("gpt2".into()), batch: Some(32), iters: Some(450), ..DlTags::default() });
        assert!((r.predicted_run_s.unwrap() - 90.0).abs() < 1e-9);
    }

    #[test]
    fn requeued_runs_fold_into_one_job_from_its_first_submission() {
        // Run 1 submitted at 1000, started 1010, requeued at 1050; run 2 (Submit reset to 1051) ran 1060-1160.
        let first = parse_sacct_line(&rec("9|9|bob|gpu|1000|1010|1050|40|REQUEUED|0:0|1|gres/gpu=1|a100-1|5|cellsched: cell=a100x1x1 nodes=1 dp=1 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.2 src=datasheet"), 1).unwrap();
        let second = parse_sacct_line(&rec("9|9|bob|gpu|1051|1060|1160|100|COMPLETED|0:0|1|gres/gpu=4|a100-1|5|cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.06 src=datasheet restarts=1"), 2).unwrap();
        let other = parse_sacct_line(&rec(DECIDED), 3).unwrap();
        let merged = merge_requeued_runs(vec![second, other.clone(), first]);
        assert_eq!(merged.len(), 2);
        let j = &merged[0];
        assert_eq!((j.job_id, j.requeued_runs, j.submit, j.state.as_str()), (9, 1, 1000, "COMPLETED"));
        assert_eq!((j.jct_s, j.queue_delay_s), (Some(160.0), Some(10.0)));
        assert_eq!(j.gpu_count(), 4, "the last run's allocation");
        assert_eq!((j.tags.reconfs, j.tags.elastic), (1, false));
        assert_eq!(merged[1], other, "a job that ran once is unchanged");
    }

    #[test]
    fn time_scale_comes_from_the_report_not_the_job() {
        let mut r = parse_sacct_line(&rec(DECIDED), 1).unwrap();
        r.apply_time_scale(0.5);
        assert!((r.predicted_run_s.unwrap() - 45.0).abs() < 1e-9);
        // Measured from the job: 100 s for 450 iterations at scale 0.5.
        r.measure(None);
        assert!((r.measured_iter_s.unwrap() - 100.0 / 450.0 / 0.5).abs() < 1e-12);
        assert_eq!(r.measured_from.as_deref(), Some("run/iters"));
        r.measure(Some("hello\ncellsched-iter 0.1\ncellsched-iter 0.3\ncellsched-iter 0.2\ncellsched-iter nan\n"));
        assert_eq!(r.measured_restart_s, None);
        r.measure(Some("cellsched-restart 60\ncellsched-iter 0.2\ncellsched-restart 51.4\ncellsched-restart -3\n"));
        assert_eq!(r.measured_restart_s, Some(51.4), "the last valid restart line");
        assert!((r.measured_iter_s.unwrap() - 0.2).abs() < 1e-12, "log lines are on the job's own clock");
        assert_eq!(r.measured_from.as_deref(), Some("iter-log"));
        // A time_scale written into AdminComment text is not a tag.
        let t = DlTags::of(DlRecord::parse("cellsched: cell=a100x1 nodes=1 dp=1 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.2 src=datasheet iters=5 time_scale=0.000001").as_ref());
        assert_eq!(t.iters, Some(5));
        // Tags outside a cellsched record are not facts.
        assert_eq!(DlTags::of(DlRecord::parse("iters=5 model=x").as_ref()), DlTags::default());
    }

    #[test]
    fn pending_and_iso_times() {
        let line = rec("18|18|bob|gpu|2023-11-14T22:13:20|Unknown|Unknown|0|PENDING|0:0|1|||UNLIMITED|");
        let r = parse_sacct_line(&line, 3).unwrap();
        assert_eq!(r.submit, 1_700_000_000, "ISO text read as UTC");
        assert_eq!((r.start, r.end, r.queue_delay_s, r.jct_s), (None, None, None, None));
        assert!(r.gpus.is_empty() && r.time_limit_s.is_none() && r.decision.is_none());
    }

    #[test]
    fn admin_comment_may_hold_bars_newlines_and_untyped_gpus_take_cell_type() {
        let line = rec("19|19|bob|gpu|1|2|3|1|CANCELLED by 0|0:15|2|cpu=2,gres/gpu=8|v100-[1-2]|10|cellsched: cell=v100x8x2 nodes=2 dp=2 tp=2 pp=2 mb=4 zero=1 ckpt=1 iter_s=1.5 src=measured")
            + " note|x\nsecond line\n"
            + &rec(DECIDED)
            + "\n";
        let jobs = parse_sacct_output(&line).unwrap();
        assert_eq!(jobs.len(), 2);
        assert!(jobs[0].admin_comment.ends_with(" note|x\nsecond line"), "{:?}", jobs[0].admin_comment);
        assert_eq!(jobs[0].state, "CANCELLED");
        assert_eq!(jobs[0].gpus.get("v100"), Some(&8));
        assert_eq!(jobs[1].job_id, 17);
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for (line, needle) in [
            ("1|2|3", "expected 15"),
            ("x|1|u|p|1|2|3|1|COMPLETED|0:0|1||n|5|", "JobIDRaw 'x'"),
            ("1|1|u|p|yesterday|2|3|1|COMPLETED|0:0|1||n|5|", "Submit"),
            ("1|1|u|p|1|2|3|1|COMPLETED|0:0|1|gres/gpu:a100=four|n|5|", "AllocTRES"),
            ("1|1|u|p|1|2|3|abc|COMPLETED|0:0|1||n|5|", "ElapsedRaw"),
            ("1|1|u|p|1|2|3|1|COMPLETED|0:0|1||n|soon|", "TimelimitRaw"),
            ("1|1|u|p|1|2|3|1||0:0|1||n|5|", "State"),
        ] {
            let e = parse_sacct_line(&rec(line), 7).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("line 7") && msg.contains(needle), "{msg}");
            assert_eq!(e.exit_code(), 5);
        }
        let e = parse_sacct_output(&format!("{}\n\n{}\n", rec(DECIDED), rec("2|2|u|p|1|2|3|x|COMPLETED|0:0|1||n|5|"))).unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
    }

    #[test]
    fn display_fields_never_break_or_forge() {
        let ids = [17, 18, 19];
        let d = DELIM;
        // 17's comment holds a newline, the delimiter and a forged line for 19;
        // 18's name is empty; 19's comment has non-UTF-8 (already lossy here).
        let text = format!("17{d}train{d}a\nb{d}c\n19{d}forged{d}x\n18{d}{d}\n19{d}real{d}\u{fffd}\n");
        let m = parse_display_output(&text, &ids);
        // The forged 19 line comes before 18's record: it stays in 17's comment.
        assert_eq!(m[&17].0, "train");
        assert!(m[&17].1.starts_with("a\nb\u{1f}c\n19") && m[&17].1.contains("forged"), "{:?}", m[&17]);
        assert_eq!(m[&18], (String::new(), String::new()));
        assert_eq!(m[&19].0, "real");
        assert!(parse_display_output("garbage\n", &ids).is_empty());
    }

    fn field() -> impl Strategy<Value = String> {
        // Any text users may write: newlines, CR, '|', the delimiter, any char.
        proptest::collection::vec(
            prop_oneof![Just('\n'), Just('\r'), Just('|'), Just(DELIM), Just('='), any::<char>()],
            0..24,
        )
        .prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        /// Whatever users put in JobName and Comment, the trusted records parse
        /// identically, and every job keeps its own display fields when they
        /// contain no forged record start.
        #[test]
        fn user_fields_cannot_break_reports(names in proptest::collection::vec((field(), field()), 1..6)) {
            let ids: Vec<u64> = (0..names.len() as u64).map(|i| 100 + i).collect();
            let trusted: String = ids.iter().map(|id| rec(&DECIDED.replacen("17|17", &format!("{id}|{id}"), 1)) + "\n").collect();
            let jobs = parse_sacct_output(&trusted).unwrap();
            prop_assert_eq!(jobs.len(), ids.len());
            let display: String = ids.iter().zip(&names).map(|(id, (n, c))| format!("{id}{DELIM}{n}{DELIM}{c}\n")).collect();
            let m = parse_display_output(&display, &ids);
            for (id, (n, c)) in ids.iter().zip(&names) {
                let forged = ids.iter().any(|o| format!("{n}{DELIM}{c}").contains(&format!("\n{o}{DELIM}")));
                let got = m.get(id);
                if !forged && !n.contains(DELIM) {
                    prop_assert_eq!(got, Some(&(n.clone(), c.trim_end_matches(['\n', '\r']).to_string())));
                }
            }
            let mut j2 = jobs.clone();
            set_display(&mut j2, &m);
            for (a, b) in jobs.iter().zip(&j2) {
                prop_assert_eq!((a.job_id, &a.tags, &a.decision, a.predicted_run_s), (b.job_id, &b.tags, &b.decision, b.predicted_run_s));
            }
        }

        /// Arbitrary bytes never panic the trusted parser.
        #[test]
        fn arbitrary_output_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_sacct_output(&text);
            let _ = parse_display_output(&text, &[1, 2, 3]);
        }
    }

    #[test]
    fn time_forms() {
        assert_eq!(parse_time("1970-01-02T00:00:01"), Ok(Some(86_401)));
        assert_eq!(parse_time("2000-03-01T00:00:00"), Ok(Some(951_868_800)));
        assert_eq!(parse_time("None"), Ok(None));
        assert!(parse_time("2000-13-01T00:00:00").is_err());
        assert!(parse_time("12:00").is_err());
    }
}
