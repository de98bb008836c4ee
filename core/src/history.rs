//! Job history: finished training jobs, the training data of the iteration
//! predictor ([`crate::predictor`]).
//!
//! CSV form (header required, columns in any order, `#` starts a comment
//! line, fields trimmed):
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `user` | text | submitting user (non-empty) |
//! | `model` | text | model name, e.g. `gpt__1.3B` (non-empty) |
//! | `batch` | integer ≥ 1 | global batch size |
//! | `gpus` | integer ≥ 1 | GPUs the job ran on |
//! | `requested_time_s` | number > 0 | the job's time limit in seconds |
//! | `iterations` | integer ≥ 1 | iterations the job actually ran |
//! | `elapsed_s` | number ≥ 0 | wall time the job actually ran |
//! | `gpu_type` | text, optional | canonical GPU type; empty = unknown |
//!
//! Errors name the file, the 1-based line and the field.
//! [`synthetic`] generates realistic recurring-job histories for tests and
//! benchmarks.
use crate::error::CoreError;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// One finished job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// Submitting user.
    pub user: String,
    /// Model name.
    pub model: String,
    /// Global batch size.
    pub batch: u32,
    /// GPUs used.
    pub gpus: u32,
    /// Requested time limit (s).
    pub requested_time_s: f64,
    /// Iterations actually run.
    pub iterations: u64,
    /// Wall time actually run (s).
    pub elapsed_s: f64,
    /// GPU type, when known.
    pub gpu_type: Option<String>,
}

/// The CSV columns in the order [`to_csv_string`] writes them.
pub const COLUMNS: [&str; 8] =
    ["user", "model", "batch", "gpus", "requested_time_s", "iterations", "elapsed_s", "gpu_type"];
const REQUIRED: usize = 7;

fn file_err(path: &str, line: Option<usize>, msg: impl Into<String>) -> CoreError {
    CoreError::File { path: path.to_string(), line, msg: msg.into() }
}

/// Parses history CSV text; `name` is used in error messages.
pub fn parse_csv(text: &str, name: &str) -> Result<Vec<HistoryRecord>, CoreError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers = rdr.headers().map_err(|e| file_err(name, Some(1), format!("bad header: {e}")))?.clone();
    let mut idx = [usize::MAX; 8];
    for (i, h) in headers.iter().enumerate() {
        match COLUMNS.iter().position(|c| c.eq_ignore_ascii_case(h)) {
            Some(c) if idx[c] == usize::MAX => idx[c] = i,
            Some(_) => return Err(file_err(name, Some(1), format!("duplicate column '{h}'"))),
            None => {
                return Err(file_err(name, Some(1), format!("unknown column '{h}' (expected {})", COLUMNS.join(","))))
            }
        }
    }
    if let Some(c) = (0..REQUIRED).find(|&c| idx[c] == usize::MAX) {
        return Err(file_err(
            name,
            Some(1),
            format!("missing column '{}' (required: {})", COLUMNS[c], COLUMNS[..REQUIRED].join(",")),
        ));
    }
    let mut out = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize);
            file_err(name, line, format!("bad CSV: {e}"))
        })?;
        let line = rec.position().map(|p| p.line() as usize);
        let field = |c: usize| -> &str {
            if idx[c] == usize::MAX {
                ""
            } else {
                rec.get(idx[c]).unwrap_or("")
            }
        };
        let bad = |c: usize, expected: &str| {
            file_err(name, line, format!("field '{}': invalid value '{}': expected {expected}", COLUMNS[c], field(c)))
        };
        let text = |c: usize| -> Result<String, CoreError> {
            let v = field(c);
            if v.is_empty() {
                Err(bad(c, "a non-empty name"))
            } else {
                Ok(v.to_string())
            }
        };
        let pos_int = |c: usize| -> Result<u64, CoreError> {
            match field(c).parse::<u64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad(c, "a positive integer")),
            }
        };
        let num = |c: usize, allow_zero: bool| -> Result<f64, CoreError> {
            match field(c).parse::<f64>() {
                Ok(x) if x.is_finite() && (x > 0.0 || (allow_zero && x == 0.0)) => Ok(x),
                _ => Err(bad(c, if allow_zero { "a non-negative number" } else { "a positive number" })),
            }
        };
        let small = |c: usize| -> Result<u32, CoreError> {
            u32::try_from(pos_int(c)?).map_err(|_| bad(c, "a positive integer below 2^32"))
        };
        let gpu = field(7);
        out.push(HistoryRecord {
            user: text(0)?,
            model: text(1)?,
            batch: small(2)?,
            gpus: small(3)?,
            requested_time_s: num(4, false)?,
            iterations: pos_int(5)?,
            elapsed_s: num(6, true)?,
            gpu_type: if gpu.is_empty() { None } else { Some(gpu.to_ascii_lowercase()) },
        });
    }
    Ok(out)
}

/// Loads a history CSV file (it must pass [`crate::config::check_trusted_file`]).
pub fn load_csv(path: &Path) -> Result<Vec<HistoryRecord>, CoreError> {
    let name = path.display().to_string();
    crate::config::check_trusted_file(path)?;
    let text = std::fs::read_to_string(path).map_err(|e| file_err(&name, None, format!("cannot read: {e}")))?;
    parse_csv(&text, &name)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with('#') || s != s.trim() {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Renders records as CSV with the [`COLUMNS`] header.
pub fn to_csv_string(records: &[HistoryRecord]) -> String {
    let mut s = COLUMNS.join(",");
    s.push('\n');
    for r in records {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            csv_field(&r.user),
            csv_field(&r.model),
            r.batch,
            r.gpus,
            r.requested_time_s,
            r.iterations,
            r.elapsed_s,
            csv_field(r.gpu_type.as_deref().unwrap_or("")),
        ));
    }
    s
}

/// Saves records atomically (temporary file in the same directory + rename).
pub fn save_csv(path: &Path, records: &[HistoryRecord]) -> Result<(), CoreError> {
    let name = path.display().to_string();
    let err = |e: std::io::Error| file_err(&name, None, format!("cannot write: {e}"));
    let file_name = path.file_name().ok_or_else(|| file_err(&name, None, "not a file path"))?;
    let tmp = path.with_file_name(format!(".{}.tmp.{}", file_name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(to_csv_string(records).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

/// Shape of a synthetic recurring-job history.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    /// Distinct users.
    pub users: usize,
    /// Records to generate.
    pub records: usize,
    /// Relative run-to-run noise (σ of log iterations) of a recurring job.
    pub noise: f64,
    /// Share of runs that stop early (debugging, crashes): 5–30 % of the usual iterations.
    pub early_stop_share: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec { users: 40, records: 2000, noise: 0.10, early_stop_share: 0.05, seed: 1 }
    }
}

const SYNTH_MODELS: [(&str, f64); 8] = [
    ("bert__340M", 0.35),
    ("gpt__125M", 0.12),
    ("gpt__1.3B", 1.3),
    ("gpt__2.6B", 2.6),
    ("moe__1.3B", 0.9),
    ("wide_resnet__500M", 0.5),
    ("wide_resnet__2B", 2.0),
    ("gpt__6.7B", 6.7),
];
const SYNTH_GPUS: [(&str, f64); 4] = [("a100", 1.0), ("v100", 0.4), ("a10", 0.3), ("h100", 2.5)];

/// Generates a recurring-job history: each user owns 1–4 "projects" (model,
/// batch, GPUs, GPU type, typical iteration count log-uniform in 10^3..10^6)
/// and resubmits them; each run's iterations are the project's count times
/// log-normal noise (σ = `noise`), a run sometimes doubles the batch (and
/// halves the iterations, same epochs), and a share of runs stop early.
/// Elapsed time follows from a per-GPU throughput model; the requested time
/// is the expected elapsed time times a per-user safety margin (1.2–3×),
/// rounded up to 10 minutes.
pub fn synthetic(spec: &SyntheticSpec) -> Vec<HistoryRecord> {
    struct Project {
        model: usize,
        batch: u32,
        gpus: u32,
        gpu: usize,
        iters: f64,
    }
    let mut rng = SplitMix64::new(spec.seed);
    let users: Vec<(String, f64, Vec<Project>)> = (0..spec.users.max(1))
        .map(|u| {
            let margin = 1.2 + 1.8 * rng.next_f64();
            let n = 1 + rng.below(4);
            let projects = (0..n)
                .map(|_| Project {
                    model: rng.below(SYNTH_MODELS.len()),
                    batch: 1 << (3 + rng.below(6)),
                    gpus: 1 << rng.below(4),
                    gpu: rng.below(SYNTH_GPUS.len()),
                    iters: 10f64.powf(3.0 + 3.0 * rng.next_f64()),
                })
                .collect();
            (format!("user{u:03}"), margin, projects)
        })
        .collect();
    (0..spec.records)
        .map(|_| {
            let (user, margin, projects) = &users[rng.below(users.len())];
            let p = &projects[rng.below(projects.len())];
            let double = rng.next_f64() < 0.2;
            let batch = if double { p.batch * 2 } else { p.batch };
            let planned = p.iters * if double { 0.5 } else { 1.0 };
            let mut iters = planned * (spec.noise * rng.normal()).exp();
            if rng.next_f64() < spec.early_stop_share {
                iters *= 0.05 + 0.25 * rng.next_f64();
            }
            let iterations = iters.round().max(1.0) as u64;
            let (model, size_b) = SYNTH_MODELS[p.model];
            let (gpu, speed) = SYNTH_GPUS[p.gpu];
            // Seconds per iteration: ~ params × batch / (GPUs × speed), with 85 % scaling per doubling.
            let scaling = 0.85f64.powf((p.gpus as f64).log2());
            let iter_s = 0.004 * size_b * batch as f64 / (p.gpus as f64 * scaling * speed);
            let elapsed = iterations as f64 * iter_s * (1.0 + 0.03 * rng.normal()).max(0.5);
            let requested = ((planned * iter_s * margin) / 600.0).ceil().max(1.0) * 600.0;
            HistoryRecord {
                user: user.clone(),
                model: model.to_string(),
                batch,
                gpus: p.gpus,
                requested_time_s: requested,
                iterations,
                elapsed_s: (elapsed * 10.0).round() / 10.0,
                gpu_type: Some(gpu.to_string()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
# finished jobs
user,model,batch,gpus,requested_time_s,iterations,elapsed_s,gpu_type
alice,gpt__1.3B,32,4,7200,12000,5400.5,a100
bob , bert__340M , 64 , 1 , 3600 , 800 , 0 ,
";

    #[test]
    fn parses_documented_columns() {
        let r = parse_csv(GOOD, "h.csv").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].user, "alice");
        assert_eq!(r[0].iterations, 12000);
        assert_eq!(r[0].gpu_type.as_deref(), Some("a100"));
        assert_eq!(r[1].model, "bert__340M");
        assert_eq!(r[1].gpu_type, None);
        // Column order is free and gpu_type optional.
        let r2 =
            parse_csv("iterations,elapsed_s,user,model,batch,gpus,requested_time_s\n5,1,u,m,1,1,60\n", "x").unwrap();
        assert_eq!(r2[0].iterations, 5);
        assert_eq!(r2[0].gpu_type, None);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let bad = "user,model,batch,gpus,requested_time_s,iterations,elapsed_s\nu,m,1,1,60,5,1\nu,m,0,1,60,5,1\n";
        let e = parse_csv(bad, "hist.csv").unwrap_err().to_string();
        assert!(e.starts_with("hist.csv:3:") && e.contains("'batch'") && e.contains("'0'"), "{e}");
        let e = parse_csv("user,model,batch,gpus,requested_time_s,iterations\n", "h.csv").unwrap_err().to_string();
        assert!(e.contains("h.csv:1") && e.contains("missing column 'elapsed_s'"), "{e}");
        let e = parse_csv("user,model,batch,gpus,requested_time_s,iterations,elapsed_s,colour\n", "h.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown column 'colour'"), "{e}");
        let e = parse_csv("user,model,batch,gpus,requested_time_s,iterations,elapsed_s\nu,m,1,1,-3,5,1\n", "h.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("h.csv:2") && e.contains("requested_time_s"), "{e}");
        let e = parse_csv("user,model,batch,gpus,requested_time_s,iterations,elapsed_s\n,m,1,1,3,5,1\n", "h.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'user'"), "{e}");
        let e = load_csv(Path::new("/nonexistent/h.csv")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/h.csv") && e.contains("cannot read"), "{e}");
    }

    #[test]
    fn save_and_load_round_trip() {
        let mut recs = synthetic(&SyntheticSpec { records: 50, ..Default::default() });
        recs[0].user = "odd, \"user\"".into();
        recs[1].gpu_type = None;
        let dir = std::env::temp_dir().join(format!("cellsched-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.csv");
        save_csv(&path, &recs).unwrap();
        assert_eq!(load_csv(&path).unwrap(), recs);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn synthetic_history_is_recurring_and_deterministic() {
        let spec = SyntheticSpec { users: 10, records: 500, ..Default::default() };
        let a = synthetic(&spec);
        assert_eq!(a, synthetic(&spec));
        assert_ne!(a, synthetic(&SyntheticSpec { seed: 2, ..spec.clone() }));
        // Few (user, model, gpus) groups relative to records: jobs recur.
        let groups: std::collections::HashSet<_> = a.iter().map(|r| (&r.user, &r.model, r.gpus)).collect();
        assert!(groups.len() <= 40, "{}", groups.len());
        assert!(a.iter().all(|r| r.iterations >= 1 && r.requested_time_s >= 600.0 && r.elapsed_s > 0.0));
    }
}
