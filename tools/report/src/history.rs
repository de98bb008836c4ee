//! The iteration predictor's training data from sacct history
//! (`cellsched report history --out history.csv`, core's history CSV form).
//!
//! Per finished job that started (one [`HistoryRecord`]):
//! - `user`: sacct `User`;
//! - `model`: the `model=` tag of AdminComment (required);
//! - `batch`: the `batch=` tag of AdminComment (required);
//! - `gpus`: total GPUs in `AllocTRES`; `gpu_type`: its type when only one;
//! - `requested_time_s`: `TimelimitRaw` × 60 (required);
//! - `elapsed_s`: End − Start;
//! - `iterations`: the declared `iters=` tag for a `COMPLETED` job (it ran
//!   them all); otherwise elapsed / the Decision's `iter_s` (jobs stopped
//!   early: TIMEOUT, CANCELLED, FAILED), else the job is skipped.
//!
//! Tags come only from AdminComment, which job_submit/cellsched writes; a
//! user's Comment or job name never enters the predictor's training data.
//! Jobs that lack a required field are listed as skipped with the reason.
use crate::record::JobRecord;
use crate::summary::ErrorStats;
use cellsched_core::history::HistoryRecord;
use serde::Serialize;

/// A job left out of the history, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    /// The job id.
    pub job_id: String,
    /// What it lacked.
    pub reason: String,
}

/// History records built from jobs, plus those skipped.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct History {
    /// The predictor's training records.
    pub records: Vec<HistoryRecord>,
    /// Jobs that could not be used.
    pub skipped: Vec<Skipped>,
}

/// One job's history record, or why it has none.
pub fn history_record(j: &JobRecord) -> Result<HistoryRecord, String> {
    let (Some(_), Some(_)) = (j.start, j.end) else {
        return Err("not finished".into());
    };
    let batch = j.tags.batch.filter(|b| *b > 0).ok_or("no batch= tag")?;
    let gpus = j.gpu_count();
    if gpus == 0 {
        return Err("no GPUs in AllocTRES".into());
    }
    let requested_time_s = j.time_limit_s.filter(|t| *t > 0).ok_or("no time limit")? as f64;
    let elapsed_s = j.run_s();
    let iterations = match (j.state.as_str(), j.tags.iters, &j.decision) {
        ("COMPLETED", Some(n), _) if n > 0 => n,
        (_, _, Some(d)) if d.iter_s > 0.0 && elapsed_s >= d.iter_s => {
            (elapsed_s / d.iter_s).floor() as u64
        }
        _ => {
            return Err(
                "iterations unknown (no iters= tag on a completed job, no Decision iter_s)".into(),
            )
        }
    };
    let model = j
        .tags
        .model
        .clone()
        .filter(|m| !m.is_empty())
        .ok_or("no model= tag in AdminComment")?;
    Ok(HistoryRecord {
        user: j.user.clone(),
        model,
        batch,
        gpus,
        requested_time_s,
        iterations,
        elapsed_s,
        gpu_type: if j.gpus.len() == 1 {
            j.gpus.keys().next().cloned()
        } else {
            None
        },
    })
}

/// History of all `jobs`.
pub fn history(jobs: &[JobRecord]) -> History {
    let mut h = History::default();
    for j in jobs {
        match history_record(j) {
            Ok(r) => h.records.push(r),
            Err(reason) => h.skipped.push(Skipped {
                job_id: j.job_id_text.clone(),
                reason,
            }),
        }
    }
    h
}

/// Holdout error of the iteration predictor on `records` (a quarter held
/// back, fixed seed); `None` when there are too few records to fit.
pub fn predictor_error(records: &[HistoryRecord]) -> Option<ErrorStats> {
    let r = cellsched_core::predictor::evaluate_holdout(records, 0.25, 1).ok()?;
    (r.n_test > 0).then_some(ErrorStats {
        n: r.n_test,
        mape: r.mape,
        median_ape: r.median_ape,
        bias: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::job;

    const ADMIN: &str = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet";

    #[test]
    fn completed_job_uses_declared_iterations() {
        let j = job(
            1,
            0,
            10,
            110,
            "gres/gpu:a100=4",
            &format!("{ADMIN} model=gpt2 batch=32 iters=250"),
            "model=forged batch=1 iters=1",
        );
        let r = history_record(&j).unwrap();
        assert_eq!(
            (r.user.as_str(), r.model.as_str(), r.batch, r.gpus),
            ("alice", "gpt2", 32, 4)
        );
        assert_eq!(
            (r.iterations, r.elapsed_s, r.requested_time_s),
            (250, 100.0, 600.0)
        );
        assert_eq!(r.gpu_type.as_deref(), Some("a100"));
    }

    #[test]
    fn stopped_job_derives_iterations_and_unusable_jobs_say_why() {
        let mut j = job(2, 0, 10, 110, "gres/gpu:a100=4", &format!("{ADMIN} model=gpt2 batch=8"), "");
        j.state = "TIMEOUT".into();
        let r = history_record(&j).unwrap();
        assert_eq!((r.iterations, r.model.as_str()), (200, "gpt2"));
        let h = history(&[
            j,
            job(3, 0, 1, 2, "gres/gpu:a100=1", "model=x", ""),
            job(4, 0, 1, 2, "", &format!("{ADMIN} batch=1 iters=3"), ""),
            // A stock job whose user wrote DL tags into Comment: not history.
            job(5, 0, 1, 2, "gres/gpu:a100=1", "", "model=gpt__1.3B batch=64 iters=100"),
        ]);
        assert_eq!(h.records.len(), 1);
        assert_eq!(h.skipped[0].reason, "no batch= tag");
        assert_eq!(h.skipped[1].reason, "no GPUs in AllocTRES");
        assert_eq!(h.skipped[2].reason, "no batch= tag");
        let csv = cellsched_core::history::to_csv_string(&h.records);
        let back = cellsched_core::history::parse_csv(&csv, "exported").unwrap();
        assert_eq!(
            back, h.records,
            "export is readable by the predictor's loader"
        );
    }

    #[test]
    fn predictor_error_needs_data() {
        assert!(predictor_error(&[]).is_none());
        let recs: Vec<HistoryRecord> =
            cellsched_core::history::synthetic(&cellsched_core::history::SyntheticSpec {
                users: 4,
                records: 200,
                noise: 0.05,
                early_stop_share: 0.1,
                seed: 7,
            });
        let e = predictor_error(&recs).unwrap();
        assert_eq!(e.n, 50);
        assert!(e.mape.is_finite() && e.mape >= 0.0);
    }
}
