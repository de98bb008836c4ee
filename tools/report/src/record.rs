//! One job as reported: the typed form of a `sacct --parsable2` line.
//!
//! Field order is [`SACCT_FIELDS`]. Derived values:
//! - queueing delay = Start − Submit, JCT (job completion time) = End − Submit,
//!   run time = ElapsedRaw;
//! - typed GPUs from AllocTRES `gres/gpu:TYPE=N` (an untyped `gres/gpu=N`
//!   takes the type of the recorded Cell, else `gpu`);
//! - the Cell/plan from the plugins' AdminComment ([`Decision`]);
//! - DL tags `model=`, `batch=`, `iters=` (`key=value` words) from AdminComment
//!   or Comment (e.g. `sbatch --comment "model=gpt2 batch=32 iters=500"`);
//! - predicted run time = iters × the Decision's `iter_s` × `time_scale`, when
//!   iters and the Decision are known; `time_scale=X` (default 1) tags a run
//!   whose clock was compressed, e.g. emulated jobs in the demo and replay.
use crate::error::ReportError;
use cellsched_core::Decision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `sacct --format` fields, in the order [`parse_sacct_line`] expects.
/// `Comment` is last so a `|` inside it cannot shift the other fields.
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
    "JobName",
    "Comment",
];

/// DL facts tagged on a job as `key=value` words in AdminComment or Comment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DlTags {
    /// `model=NAME`.
    pub model: Option<String>,
    /// `batch=N` (global batch).
    pub batch: Option<u32>,
    /// `iters=N` (declared iterations; also `iterations=`).
    pub iters: Option<u64>,
    /// `time_scale=X`: real seconds per predicted second of an emulated,
    /// time-compressed run (positive and finite; absent means 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
}

impl DlTags {
    /// Collects tags from free text; later texts fill only what is missing.
    pub fn parse(texts: &[&str]) -> DlTags {
        let mut t = DlTags::default();
        for text in texts {
            for word in text.split(|c: char| c.is_whitespace() || c == ';' || c == ',') {
                let Some((k, v)) = word.split_once('=') else {
                    continue;
                };
                match k.trim().to_ascii_lowercase().as_str() {
                    "model" | "dl_model" if t.model.is_none() && !v.is_empty() => {
                        t.model = Some(v.to_string())
                    }
                    "batch" | "dl_batch" if t.batch.is_none() => t.batch = v.parse().ok(),
                    "iters" | "iterations" | "dl_iters" if t.iters.is_none() => {
                        t.iters = v.parse().ok()
                    }
                    "time_scale" if t.time_scale.is_none() => {
                        t.time_scale = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
                    }
                    _ => {}
                }
            }
        }
        t
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
    /// `Comment` as recorded.
    pub comment: String,
    /// The Cell/plan recorded by the plugins, if any.
    pub decision: Option<Decision>,
    /// DL tags from the comments.
    pub tags: DlTags,
    /// Start − Submit, seconds.
    pub queue_delay_s: Option<f64>,
    /// End − Submit, seconds.
    pub jct_s: Option<f64>,
    /// Declared iterations × predicted seconds per iteration.
    pub predicted_run_s: Option<f64>,
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

/// Typed GPUs from a TRES string such as
/// `billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4,mem=1G,node=1`.
/// Untyped `gres/gpu=N` counts go to `fallback_type` when no typed entry exists.
pub fn parse_tres_gpus(tres: &str, fallback_type: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut typed = BTreeMap::new();
    let mut untyped = 0u32;
    for item in tres.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("TRES item '{item}' is not KEY=VALUE"));
        };
        if k == "gres/gpu" {
            untyped = v
                .parse()
                .map_err(|_| format!("GPU count '{v}' in '{item}'"))?;
        } else if let Some(ty) = k.strip_prefix("gres/gpu:") {
            let n: u32 = v
                .parse()
                .map_err(|_| format!("GPU count '{v}' in '{item}'"))?;
            *typed.entry(ty.to_ascii_lowercase()).or_insert(0) += n;
        }
    }
    if typed.is_empty() && untyped > 0 {
        typed.insert(fallback_type.to_string(), untyped);
    }
    Ok(typed)
}

/// Parses one `sacct --parsable2 --noheader` line in [`SACCT_FIELDS`] order;
/// `line_no` (1-based) names the line in errors.
pub fn parse_sacct_line(line: &str, line_no: usize) -> Result<JobRecord, ReportError> {
    let err = |msg: String| ReportError::MalformedLine {
        line: line_no,
        msg,
        text: line.to_string(),
    };
    let n = SACCT_FIELDS.len();
    let f: Vec<&str> = line.splitn(n, '|').collect();
    if f.len() != n {
        return Err(err(format!(
            "expected {n} '|'-separated fields ({}), found {}",
            SACCT_FIELDS.join("|"),
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
    let admin_comment = field(14).to_string();
    let comment = f[16].trim_end_matches(['\n', '\r']).to_string();
    let decision = Decision::parse_admin_comment(&admin_comment);
    let fallback = decision
        .as_ref()
        .map(|d| d.cell.gpu_type.clone())
        .unwrap_or_else(|| "gpu".into());
    let gpus = parse_tres_gpus(field(11), &fallback).map_err(|m| err(format!("AllocTRES: {m}")))?;
    let tags = DlTags::parse(&[&admin_comment, &comment]);
    // A started job that never ended (RUNNING) has no End; an unstarted one
    // (PENDING, cancelled while pending) may carry Start = End.
    let started = start.filter(|s| *s >= submit);
    let queue_delay_s = started.map(|s| (s - submit) as f64);
    let jct_s = end.filter(|e| *e >= submit).map(|e| (e - submit) as f64);
    let predicted_run_s = match (&decision, tags.iters) {
        (Some(d), Some(it)) => Some(d.iter_s * it as f64 * tags.time_scale.unwrap_or(1.0)),
        _ => None,
    };
    let state = field(8).split_whitespace().next().unwrap_or("").to_string();
    if state.is_empty() {
        return Err(err("State is empty".into()));
    }
    Ok(JobRecord {
        job_id,
        job_id_text: field(1).to_string(),
        name: field(15).to_string(),
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
        comment,
        decision,
        tags,
        queue_delay_s,
        jct_s,
        predicted_run_s,
    })
}

/// Parses the whole output of sacct (blank lines skipped).
pub fn parse_sacct_output(text: &str) -> Result<Vec<JobRecord>, ReportError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_sacct_line(l, i + 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const DECIDED: &str = "17|17|alice|gpu|1700000000|1700000010|1700000110|100|COMPLETED|0:0|1|billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4,mem=100M,node=1|a100-1|5|cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.200000 src=datasheet model=gpt2|train|iters=450 batch=32";

    #[test]
    fn parses_a_decided_job() {
        let r = parse_sacct_line(DECIDED, 1).unwrap();
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
        assert_eq!(
            r.tags,
            DlTags {
                model: Some("gpt2".into()),
                batch: Some(32),
                iters: Some(450),
                time_scale: None,
            }
        );
        assert!((r.predicted_run_s.unwrap() - 90.0).abs() < 1e-9);
    }

    #[test]
    fn time_scale_tag_compresses_the_prediction() {
        let scaled = DECIDED.replace("iters=450 batch=32", "iters=450 batch=32 time_scale=0.5");
        let r = parse_sacct_line(&scaled, 1).unwrap();
        assert_eq!(r.tags.time_scale, Some(0.5));
        assert!((r.predicted_run_s.unwrap() - 45.0).abs() < 1e-9);
        for bad in ["time_scale=0", "time_scale=-2", "time_scale=inf", "time_scale=x"] {
            let line = DECIDED.replace("batch=32", &format!("batch=32 {bad}"));
            let r = parse_sacct_line(&line, 1).unwrap();
            assert_eq!(r.tags.time_scale, None, "{bad} must be ignored");
            assert!((r.predicted_run_s.unwrap() - 90.0).abs() < 1e-9);
        }
    }

    #[test]
    fn pending_and_iso_times() {
        let line =
            "18|18|bob|gpu|2023-11-14T22:13:20|Unknown|Unknown|0|PENDING|0:0|1|||UNLIMITED||sleep|";
        let r = parse_sacct_line(line, 3).unwrap();
        assert_eq!(r.submit, 1_700_000_000, "ISO text read as UTC");
        assert_eq!(
            (r.start, r.end, r.queue_delay_s, r.jct_s),
            (None, None, None, None)
        );
        assert!(r.gpus.is_empty() && r.time_limit_s.is_none() && r.decision.is_none());
    }

    #[test]
    fn comment_may_contain_bars_and_untyped_gpus_take_cell_type() {
        let line = "19|19|bob|gpu|1|2|3|1|CANCELLED by 0|0:15|2|cpu=2,gres/gpu=8|v100-[1-2]|10|cellsched: cell=v100x8x2 nodes=2 dp=2 tp=2 pp=2 mb=4 zero=1 ckpt=1 iter_s=1.5 src=measured|x|a|b|c";
        let r = parse_sacct_line(line, 1).unwrap();
        assert_eq!(r.comment, "a|b|c");
        assert_eq!(r.state, "CANCELLED");
        assert_eq!(r.gpus.get("v100"), Some(&8));
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for (line, needle) in [
            ("1|2|3", "expected 17"),
            ("x|1|u|p|1|2|3|1|COMPLETED|0:0|1||n|5|||", "JobIDRaw 'x'"),
            ("1|1|u|p|yesterday|2|3|1|COMPLETED|0:0|1||n|5|||", "Submit"),
            (
                "1|1|u|p|1|2|3|1|COMPLETED|0:0|1|gres/gpu:a100=four|n|5|||",
                "AllocTRES",
            ),
            ("1|1|u|p|1|2|3|abc|COMPLETED|0:0|1||n|5|||", "ElapsedRaw"),
            ("1|1|u|p|1|2|3|1|COMPLETED|0:0|1||n|soon|||", "TimelimitRaw"),
            ("1|1|u|p|1|2|3|1||0:0|1||n|5|||", "State"),
        ] {
            let e = parse_sacct_line(line, 7).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("line 7") && msg.contains(needle), "{msg}");
            assert_eq!(e.exit_code(), 5);
        }
        let e = parse_sacct_output(&format!("{DECIDED}\n\nbroken\n")).unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
    }

    #[test]
    fn time_forms() {
        assert_eq!(parse_time("1970-01-02T00:00:01"), Ok(Some(86_401)));
        assert_eq!(parse_time("2000-03-01T00:00:00"), Ok(Some(951_868_800)));
        assert_eq!(parse_time("None"), Ok(None));
        assert!(parse_time("2000-13-01T00:00:00").is_err());
        assert!(parse_time("12:00").is_err());
    }

    #[test]
    fn tres_forms() {
        let g = parse_tres_gpus("cpu=8,gres/gpu:a100=4,gres/gpu:v100=2,gres/gpu=6", "gpu").unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(
            parse_tres_gpus("cpu=1,gres/gpu=2", "gpu")
                .unwrap()
                .get("gpu"),
            Some(&2)
        );
        assert!(parse_tres_gpus("cpu", "gpu").is_err());
    }
}
