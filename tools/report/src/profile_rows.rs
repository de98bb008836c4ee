//! Profile-DB rows from the window's measured jobs (`cellsched report
//! --profile-rows FILE`): what a site imports (`cellsched profile import`)
//! so that the estimator's predictions for the Cells its jobs ran on are
//! replaced by what those jobs measured.
//!
//! One row per (model, global batch, GPU type, nodes, GPUs per node): the
//! median of the measured seconds per iteration of the jobs that ran that
//! Cell. The plan column is `unknown`: the plan cellsched injected is a
//! recommendation the training script may not follow. The measurements are
//! the jobs' own (iteration-log lines, or run time over declared
//! iterations), so the rows are for an administrator to review before
//! importing them, never read by the plugins directly.
use crate::record::JobRecord;
use cellsched_core::estimator::median;
use cellsched_core::profile_db::{ProfileDb, ProfileRecord};
use std::collections::BTreeMap;

/// The rows and why other jobs gave none.
#[derive(Debug, Default)]
pub struct ProfileRows {
    /// One record per Cell.
    pub db: ProfileDb,
    /// Jobs measured into the rows.
    pub jobs: usize,
    /// Jobs per measurement source (`iter-log`, `run/iters`).
    pub by_source: BTreeMap<String, usize>,
    /// Jobs skipped, per reason.
    pub skipped: BTreeMap<&'static str, usize>,
}

/// A row's key: (model, global batch, GPU type, nodes, GPUs per node).
type CellKey = (String, u32, String, u32, u32);

/// Why job `j` gives no row, or its Cell key and measurement.
fn row_of(j: &JobRecord) -> Result<(CellKey, f64), &'static str> {
    let s = j.measured_iter_s.ok_or("no measured iteration time")?;
    if !cellsched_core::cell::plausible_iter_time(s) {
        return Err("implausible measured iteration time");
    }
    let model = j.tags.model.clone().ok_or("no model in its record")?;
    let batch = j.tags.batch.filter(|b| *b > 0).ok_or("no batch in its record")?;
    let mut types = j.gpus.iter().filter(|(_, n)| **n > 0);
    let (ty, gpus) = types.next().ok_or("no GPUs allocated")?;
    if types.next().is_some() {
        return Err("GPUs of more than one type");
    }
    let nodes = j.nodes.max(1);
    if gpus % nodes != 0 {
        return Err("GPUs not spread evenly over its nodes");
    }
    Ok(((model, batch, ty.clone(), nodes, gpus / nodes), s))
}

/// The profile rows of `jobs` (see the module doc).
pub fn profile_rows(jobs: &[JobRecord]) -> ProfileRows {
    let mut out = ProfileRows::default();
    let mut cells: BTreeMap<CellKey, Vec<f64>> = BTreeMap::new();
    for j in jobs {
        match row_of(j) {
            Ok((key, s)) => {
                cells.entry(key).or_default().push(s);
                out.jobs += 1;
                *out.by_source.entry(j.measured_from.clone().unwrap_or_default()).or_default() += 1;
            }
            Err(why) => *out.skipped.entry(why).or_default() += 1,
        }
    }
    for ((model, batch, gpu_type, nodes, gpus_per_node), v) in cells {
        let iter_time_s = median(&v);
        out.db.insert(ProfileRecord { model, batch, gpu_type, nodes, gpus_per_node, iter_time_s, plan: None, peak_mem_gib: None, first_iter_s: None });
    }
    out
}

impl ProfileRows {
    /// One line for the operator: rows, jobs by source, skipped jobs by reason.
    pub fn summary(&self) -> String {
        let src: Vec<String> = self.by_source.iter().map(|(k, v)| format!("{v} from {k}")).collect();
        let skip: Vec<String> = self.skipped.iter().map(|(k, v)| format!("{v} ({k})")).collect();
        format!(
            "{} profile rows from {} measured jobs ({}); {} jobs skipped{}{}",
            self.db.len(),
            self.jobs,
            if src.is_empty() { "none".to_string() } else { src.join(", ") },
            self.skipped.values().sum::<usize>(),
            if skip.is_empty() { "" } else { ": " },
            skip.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, model: Option<&str>, gpus: &[(&str, u32)], nodes: u32, iter_s: Option<f64>) -> JobRecord {
        let mut j: JobRecord = serde_json::from_value(serde_json::json!({
            "job_id": id, "job_id_text": id.to_string(), "name": "t", "user": "u", "partition": "p",
            "submit": 0, "start": 10, "end": 110, "elapsed_s": 100, "state": "COMPLETED", "exit_code": "0:0",
            "nodes": nodes, "gpus": {}, "node_list": "n1", "time_limit_s": null, "admin_comment": "", "comment": "",
            "decision": null, "tags": {}, "queue_delay_s": 10.0, "jct_s": 110.0, "predicted_run_s": null
        }))
        .unwrap();
        j.gpus = gpus.iter().map(|(t, n)| (t.to_string(), *n)).collect();
        j.tags.model = model.map(str::to_string);
        j.tags.batch = Some(64);
        j.measured_iter_s = iter_s;
        j.measured_from = iter_s.map(|_| "run/iters".to_string());
        j
    }

    /// Jobs on the same Cell give one row at their median; a job without a
    /// model, a measurement, one GPU type or an even spread gives none, and
    /// the summary says why.
    #[test]
    fn one_row_per_cell_at_the_median() {
        let jobs = vec![
            job(1, Some("gpt__350M"), &[("a100", 8)], 2, Some(0.30)),
            job(2, Some("gpt__350M"), &[("a100", 8)], 2, Some(0.20)),
            job(3, Some("gpt__350M"), &[("a100", 8)], 2, Some(0.40)),
            job(4, Some("gpt__350M"), &[("a100", 4)], 1, Some(0.5)),
            job(5, None, &[("a100", 4)], 1, Some(0.5)),
            job(6, Some("gpt__350M"), &[("a100", 4)], 1, None),
            job(7, Some("gpt__350M"), &[("a100", 2), ("v100", 2)], 1, Some(0.5)),
            job(8, Some("gpt__350M"), &[("a100", 3)], 2, Some(0.5)),
        ];
        let r = profile_rows(&jobs);
        assert_eq!((r.db.len(), r.jobs), (2, 4));
        assert_eq!(r.db.lookup("gpt__350M", 64, "a100", 2, 4), Some(0.30));
        assert_eq!(r.db.lookup("gpt__350M", 64, "a100", 1, 4), Some(0.5));
        assert!(r.db.records().all(|x| x.plan.is_none()), "the plan that ran is not known");
        let s = r.summary();
        assert!(s.contains("2 profile rows from 4 measured jobs (4 from run/iters); 4 jobs skipped"), "{s}");
        for why in ["no model in its record", "no measured iteration time", "more than one type", "evenly"] {
            assert!(s.contains(why), "{why}: {s}");
        }
    }
}
