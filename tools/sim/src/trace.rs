//! Job traces: the CSV format read by the simulator and written by the
//! converters and the synthetic generator.
//!
//! Header (any order; extra columns such as `user` are allowed):
//! `job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type`
//! plus an optional `freeze` column (`off|conservative|auto`; empty = off),
//! an optional `due` column and an optional `elastic` column.
//!
//! - `submission_time`: seconds from the trace start.
//! - `num_iteration`: iterations the job trains for (the simulator's truth).
//! - `model_name`: catalog form, e.g. `bert__760M`.
//! - `deadline`: the user's declared wall-time limit in seconds from the job's
//!   start (what `sbatch --time` would get; Slurm's backfill plans with it);
//!   0 or empty means "none declared" (the policy's default limit applies).
//!   Jobs are not killed at the limit: the simulator measures scheduling.
//! - `num_gpu`, `gpu_type`: what the user asked for.
//! - `due` (optional): the job's deadline (`--dl-deadline`), in seconds
//!   after its *submission*; empty or absent = no deadline. The policy may
//!   use it (deadline-aware ordering) and the metrics report the share of
//!   deadline jobs that finished by it. (Not to be confused with the
//!   historical `deadline` column above, which is the time limit.)
//! - `elastic` (optional): `1` when the job opted in to reconfiguration
//!   (`--dl-elastic`: it checkpoints on a signal and resumes), `0` or empty
//!   when not.
use crate::error::SimError;
use serde::Serialize;

/// One job of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceJob {
    /// The job's id as written in the trace.
    pub job_id: String,
    /// Submission time, seconds.
    pub submission_time: f64,
    /// Iterations to train.
    pub num_iteration: u64,
    /// Catalog model name.
    pub model_name: String,
    /// Declared wall-time limit, seconds (0 = none).
    pub deadline: f64,
    /// Global batch size.
    pub batch_size: u32,
    /// Requested GPU count.
    pub num_gpu: u32,
    /// Requested GPU type.
    pub gpu_type: String,
    /// User name, if the trace has a `user` column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Layer-freezing opt-in (`off`, `conservative`, `auto`), if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freeze: Option<String>,
    /// Deadline in seconds after submission (`due` column), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_s: Option<f64>,
    /// Opted in to reconfiguration (`elastic` column, `--dl-elastic`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub elastic: bool,
}

const REQUIRED: [&str; 8] =
    ["job_id", "submission_time", "num_iteration", "model_name", "deadline", "batch_size", "num_gpu", "gpu_type"];

/// Parses trace CSV text; `path` names the source in errors. Jobs are
/// returned sorted by submission time (stable: file order breaks ties).
pub fn parse_trace(text: &str, path: &str) -> Result<Vec<TraceJob>, SimError> {
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).flexible(false).from_reader(text.as_bytes());
    let headers = rdr.headers().map_err(|e| SimError::input(path, Some(1), "header", e.to_string()))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let mut idx = [0usize; 8];
    for (i, name) in REQUIRED.iter().enumerate() {
        idx[i] = col(name).ok_or_else(|| {
            SimError::input(path, Some(1), name, format!("missing column (header must have: {})", REQUIRED.join(",")))
        })?;
    }
    let user_col = col("user");
    let freeze_col = col("freeze");
    let due_col = col("due");
    let elastic_col = col("elastic");
    let mut jobs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize);
            SimError::input(path, line, "record", e.to_string())
        })?;
        let line = rec.position().map(|p| p.line() as usize);
        let get = |i: usize| rec.get(idx[i]).unwrap_or("");
        let bad = |i: usize, msg: &str| SimError::input(path, line, REQUIRED[i], format!("'{}' {msg}", get(i)));
        let job_id = get(0).to_string();
        if job_id.is_empty() {
            return Err(bad(0, "is empty"));
        }
        if !seen.insert(job_id.clone()) {
            return Err(bad(0, "is a duplicate job id"));
        }
        let submission_time: f64 = get(1).parse().ok().filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| bad(1, "is not a non-negative number of seconds"))?;
        let capped = |i: usize, limit: cellsched_core::limits::Limit| {
            limit.parse(REQUIRED[i], get(i)).map_err(|_| bad(i, &format!("is not a positive integer of at most {} ({})", limit.max, limit.what)))
        };
        let num_iteration: u64 = capped(2, cellsched_core::limits::ITERS)?;
        let model_name = get(3).to_string();
        if model_name.is_empty() {
            return Err(bad(3, "is empty"));
        }
        let deadline: f64 = if get(4).is_empty() { 0.0 } else {
            get(4).parse().ok().filter(|t: &f64| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| bad(4, "is not a non-negative number of seconds"))?
        };
        let batch_size = capped(5, cellsched_core::limits::BATCH)? as u32;
        let num_gpu = capped(6, cellsched_core::limits::CELL_GPUS)? as u32;
        let gpu_type = get(7).to_ascii_lowercase();
        if gpu_type.is_empty() {
            return Err(bad(7, "is empty"));
        }
        let user = user_col.and_then(|c| rec.get(c)).filter(|s| !s.is_empty()).map(str::to_string);
        let freeze = match freeze_col.and_then(|c| rec.get(c)).filter(|s| !s.is_empty()) {
            None => None,
            Some(f) => {
                let f = f.to_ascii_lowercase();
                if !matches!(f.as_str(), "off" | "conservative" | "auto") {
                    return Err(SimError::input(path, line, "freeze", format!("'{f}' is not off, conservative or auto")));
                }
                Some(f)
            }
        };
        let due_s = match due_col.and_then(|c| rec.get(c)).filter(|s| !s.is_empty()) {
            None => None,
            Some(d) => Some(d.parse::<f64>().ok().filter(|t| t.is_finite() && *t > 0.0).ok_or_else(|| {
                SimError::input(path, line, "due", format!("'{d}' is not a positive number of seconds after submission"))
            })?),
        };
        let elastic = match elastic_col.and_then(|c| rec.get(c)).unwrap_or("") {
            "" | "0" => false,
            "1" => true,
            e => return Err(SimError::input(path, line, "elastic", format!("'{e}' is not 0 or 1"))),
        };
        jobs.push(TraceJob { job_id, submission_time, num_iteration, model_name, deadline, batch_size, num_gpu, gpu_type, user, freeze, due_s, elastic });
    }
    jobs.sort_by(|a, b| a.submission_time.total_cmp(&b.submission_time));
    Ok(jobs)
}

/// A replica of `jobs` for measuring how much a result rests on the exact
/// arrival times: each submission moved by an offset drawn uniformly from
/// `[-jitter_s, jitter_s)` (seeded by `seed`, never before 0); everything
/// else, and the jobs' order, unchanged. Overloaded schedules are chaotic:
/// one early decision reorders the queue for hours, so one run of a policy
/// is one sample.
pub fn jittered(jobs: &[TraceJob], seed: u64, jitter_s: f64) -> Vec<TraceJob> {
    let mut rng = crate::rng::Rng::new(seed);
    let j = if jitter_s.is_finite() { jitter_s.abs() } else { 0.0 };
    jobs.iter()
        .map(|t| TraceJob { submission_time: (t.submission_time + rng.range(-j, j)).max(0.0), ..t.clone() })
        .collect()
}

/// Reads a trace CSV file.
pub fn load_trace(path: &str) -> Result<Vec<TraceJob>, SimError> {
    let text = std::fs::read_to_string(path).map_err(|error| SimError::Io { path: path.to_string(), error })?;
    parse_trace(&text, path)
}

/// Writes jobs as trace CSV (with `user`/`freeze`/`due`/`elastic` columns when any job has them).
pub fn write_trace<W: std::io::Write>(jobs: &[TraceJob], out: W) -> std::io::Result<()> {
    let with_user = jobs.iter().any(|j| j.user.is_some());
    let with_freeze = jobs.iter().any(|j| j.freeze.is_some());
    let with_due = jobs.iter().any(|j| j.due_s.is_some());
    let with_elastic = jobs.iter().any(|j| j.elastic);
    let mut w = csv::Writer::from_writer(out);
    let mut header: Vec<&str> = REQUIRED.to_vec();
    if with_user {
        header.push("user");
    }
    if with_freeze {
        header.push("freeze");
    }
    if with_due {
        header.push("due");
    }
    if with_elastic {
        header.push("elastic");
    }
    w.write_record(&header)?;
    for j in jobs {
        let mut rec = vec![
            j.job_id.clone(),
            fmt_num(j.submission_time),
            j.num_iteration.to_string(),
            j.model_name.clone(),
            fmt_num(j.deadline),
            j.batch_size.to_string(),
            j.num_gpu.to_string(),
            j.gpu_type.clone(),
        ];
        if with_user {
            rec.push(j.user.clone().unwrap_or_default());
        }
        if with_freeze {
            rec.push(j.freeze.clone().unwrap_or_default());
        }
        if with_due {
            rec.push(j.due_s.map(fmt_num).unwrap_or_default());
        }
        if with_elastic {
            rec.push(if j.elastic { "1" } else { "0" }.to_string());
        }
        w.write_record(&rec)?;
    }
    w.flush()
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.3}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: &str = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type";

    #[test]
    fn parses_sorts_and_roundtrips() {
        let text = format!("{HDR},user\n2,10,100,bert__760M,3600,32,4,A100,alice\n1,5,50,gpt2__124M,,16,1,v100,\n");
        let jobs = parse_trace(&text, "t.csv").unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].job_id, "1");
        assert_eq!(jobs[0].deadline, 0.0);
        assert_eq!(jobs[1].gpu_type, "a100");
        assert_eq!(jobs[1].user.as_deref(), Some("alice"));
        let mut buf = Vec::new();
        write_trace(&jobs, &mut buf).unwrap();
        let again = parse_trace(std::str::from_utf8(&buf).unwrap(), "u.csv").unwrap();
        assert_eq!(again, jobs);
    }

    #[test]
    fn jittered_replicas_move_only_submissions_within_the_bound() {
        let text = format!("{HDR}\n1,0,100,m,0,32,4,a100\n2,30,50,m,0,16,1,v100\n3,5000,70,m,600,8,2,k80\n");
        let jobs = parse_trace(&text, "t.csv").unwrap();
        let a = jittered(&jobs, 1, 60.0);
        assert_eq!(a, jittered(&jobs, 1, 60.0), "seeded");
        assert_ne!(a, jittered(&jobs, 2, 60.0));
        assert_eq!(jittered(&jobs, 1, 0.0), jobs);
        for (x, y) in a.iter().zip(&jobs) {
            assert!(x.submission_time >= 0.0 && (x.submission_time - y.submission_time).abs() <= 60.0, "{x:?}");
            assert_eq!(TraceJob { submission_time: y.submission_time, ..x.clone() }, *y);
        }
        assert!(a.iter().zip(&jobs).any(|(x, y)| x.submission_time != y.submission_time));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = parse_trace(&format!("{HDR}\n1,0,100,m,0,32,4,a100\n2,0,-3,m,0,32,4,a100\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("t.csv:3") && e.contains("num_iteration") && e.contains("-3"), "{e}");
        let e = parse_trace("job_id,submission_time\n1,0\n", "t.csv").unwrap_err().to_string();
        assert!(e.contains("t.csv:1") && e.contains("num_iteration") && e.contains("missing column"), "{e}");
        let e = parse_trace(&format!("{HDR}\n1,0,100,m,0,32,4,a100\n1,0,100,m,0,32,4,a100\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("duplicate"), "{e}");
        let e = parse_trace(&format!("{HDR}\n1,0,100,m,0,32,four,a100\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("num_gpu") && e.contains("four"), "{e}");
        let e = parse_trace(&format!("{HDR}\n1,0,100,m,0,32\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("t.csv:2"), "{e}");
        let e = parse_trace(&format!("{HDR},freeze\n1,0,100,m,0,32,4,a100,maybe\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("freeze") && e.contains("maybe"), "{e}");
        let e = parse_trace(&format!("{HDR},due\n1,0,100,m,0,32,4,a100,-5\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("t.csv:2") && e.contains("due") && e.contains("-5"), "{e}");
    }

    #[test]
    fn due_column_is_optional_and_roundtrips() {
        let jobs = parse_trace(&format!("{HDR},due\n1,0,100,m,0,32,4,a100,7200\n2,5,100,m,0,32,4,a100,\n"), "t.csv").unwrap();
        assert_eq!((jobs[0].due_s, jobs[1].due_s), (Some(7200.0), None));
        let mut buf = Vec::new();
        write_trace(&jobs, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.lines().next().unwrap().ends_with(",due"), "{text}");
        assert_eq!(parse_trace(&text, "u.csv").unwrap(), jobs);
        assert_eq!(parse_trace(&format!("{HDR}\n1,0,100,m,0,32,4,a100\n"), "t.csv").unwrap()[0].due_s, None);
    }

    #[test]
    fn elastic_column_is_optional_and_roundtrips() {
        let jobs = parse_trace(&format!("{HDR},elastic\n1,0,100,m,0,32,4,a100,1\n2,5,100,m,0,32,4,a100,\n3,6,100,m,0,32,4,a100,0\n"), "t.csv").unwrap();
        assert_eq!(jobs.iter().map(|j| j.elastic).collect::<Vec<_>>(), [true, false, false]);
        let mut buf = Vec::new();
        write_trace(&jobs, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.lines().next().unwrap().ends_with(",elastic"), "{text}");
        assert_eq!(parse_trace(&text, "u.csv").unwrap(), jobs);
        let e = parse_trace(&format!("{HDR},elastic\n1,0,100,m,0,32,4,a100,yes\n"), "t.csv").unwrap_err().to_string();
        assert!(e.contains("t.csv:2") && e.contains("elastic") && e.contains("'yes'"), "{e}");
        let mut none = Vec::new();
        write_trace(&[TraceJob { elastic: false, ..jobs[0].clone() }], &mut none).unwrap();
        assert!(!String::from_utf8(none).unwrap().contains("elastic"));
    }
}
