//! Calibration of the analytical estimator from measured points.
//!
//! For each usable measured point the datasheet model's iteration time is
//! split into compute (scaled by efficiency) and the rest; the efficiency
//! factor that makes the prediction match is `compute / (measured − rest)`.
//! Factors are aggregated as the median in log space, per GPU type and per
//! (model, GPU type); a model × type factor is preferred when present.
use crate::cell::{Cell, Plan};
use crate::error::CoreError;
use super::{Estimator, JobSpec};
use crate::profile_db::ProfileRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Bounds on a fitted efficiency factor (guards against nonsense points).
const FACTOR_RANGE: (f64, f64) = (0.02, 50.0);

/// Which measured points may calibrate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalibrationPolicy {
    /// Only points measured on one node (default true).
    pub single_node_only: bool,
    /// Only points with at most this many GPUs (`Some(1)`: single-GPU points).
    pub max_gpus: Option<u32>,
    /// Fit per (model, GPU type) factors as well as per GPU type (default true).
    pub per_model: bool,
}

impl Default for CalibrationPolicy {
    fn default() -> Self {
        CalibrationPolicy { single_node_only: true, max_gpus: None, per_model: true }
    }
}

/// A fitted factor and how many points support it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedFactor {
    /// GPU type.
    pub gpu_type: String,
    /// Model (canonical name) for model × type factors.
    pub model: Option<String>,
    /// Multiplier on the datasheet efficiency.
    pub factor: f64,
    /// Points used.
    pub points: usize,
}

/// One point used for calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationPoint {
    /// Measured record.
    pub record: ProfileRecord,
    /// Datasheet prediction for it.
    pub datasheet_s: f64,
    /// The efficiency factor this point implies.
    pub factor: f64,
}

/// How the estimator was calibrated: factors, points used and points skipped.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// Per GPU type factors.
    pub per_type: Vec<FittedFactor>,
    /// Per (model, GPU type) factors.
    pub per_model_type: Vec<FittedFactor>,
    /// Points used.
    pub used: Vec<CalibrationPoint>,
    /// Points not used, with the reason.
    pub skipped: Vec<(ProfileRecord, String)>,
}

impl fmt::Display for CalibrationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.per_type.is_empty() {
            return writeln!(f, "not calibrated (no usable measured points; {} skipped)", self.skipped.len());
        }
        writeln!(f, "calibrated from {} measured points ({} skipped):", self.used.len(), self.skipped.len())?;
        for t in &self.per_type {
            writeln!(f, "  {:<10} efficiency x{:.3} ({} points)", t.gpu_type, t.factor, t.points)?;
        }
        for t in &self.per_model_type {
            writeln!(f, "  {:<10} {:<22} x{:.3} ({} points)", t.gpu_type, t.model.as_deref().unwrap_or(""), t.factor, t.points)?;
        }
        Ok(())
    }
}

/// Fitted efficiency factors used by the estimator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    per_type: BTreeMap<String, f64>,
    per_model_type: BTreeMap<(String, String), f64>,
    /// What was fitted from what.
    pub report: CalibrationReport,
}

impl Calibration {
    /// Efficiency multiplier for `model` on `gpu_type` (1 when uncalibrated).
    pub fn factor(&self, model: &str, gpu_type: &str) -> f64 {
        self.per_model_type
            .get(&(model.to_string(), gpu_type.to_string()))
            .or_else(|| self.per_type.get(gpu_type))
            .copied()
            .unwrap_or(1.0)
    }

    /// Whether any factor applies to `model` on `gpu_type`.
    pub fn has_factor(&self, model: &str, gpu_type: &str) -> bool {
        self.per_type.contains_key(gpu_type) || self.per_model_type.contains_key(&(model.to_string(), gpu_type.to_string()))
    }

    /// Fits factors from `records` with the datasheet estimator `base`.
    pub fn fit<'a>(base: &Estimator, records: impl IntoIterator<Item = &'a ProfileRecord>, policy: &CalibrationPolicy) -> Calibration {
        let mut report = CalibrationReport::default();
        let mut by_type: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut by_model_type: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for rec in records {
            if policy.single_node_only && rec.nodes != 1 {
                report.skipped.push((rec.clone(), "multi-node point (calibration uses single-node points)".into()));
                continue;
            }
            if policy.max_gpus.is_some_and(|m| rec.gpus() > m) {
                report.skipped.push((rec.clone(), format!("more than {} GPUs", policy.max_gpus.unwrap_or(0))));
                continue;
            }
            match point_factor(base, rec) {
                Ok((model, gpu, datasheet_s, factor)) => {
                    by_type.entry(gpu.clone()).or_default().push(factor.ln());
                    by_model_type.entry((model, gpu)).or_default().push(factor.ln());
                    report.used.push(CalibrationPoint { record: rec.clone(), datasheet_s, factor });
                }
                Err(e) => report.skipped.push((rec.clone(), e.to_string())),
            }
        }
        let agg = |v: &Vec<f64>| median(v).exp();
        let per_type: BTreeMap<String, f64> = by_type.iter().map(|(k, v)| (k.clone(), agg(v))).collect();
        let per_model_type: BTreeMap<(String, String), f64> =
            if policy.per_model { by_model_type.iter().map(|(k, v)| (k.clone(), agg(v))).collect() } else { BTreeMap::new() };
        report.per_type = by_type
            .iter()
            .map(|(k, v)| FittedFactor { gpu_type: k.clone(), model: None, factor: per_type[k], points: v.len() })
            .collect();
        report.per_model_type = per_model_type
            .iter()
            .map(|((m, g), f)| FittedFactor {
                gpu_type: g.clone(),
                model: Some(m.clone()),
                factor: *f,
                points: by_model_type[&(m.clone(), g.clone())].len(),
            })
            .collect();
        Calibration { per_type, per_model_type, report }
    }
}

/// (canonical model, GPU type, datasheet prediction, implied factor) of one point.
fn point_factor(base: &Estimator, rec: &ProfileRecord) -> Result<(String, String, f64, f64), CoreError> {
    let model = base.model_catalog().get(&rec.model)?.clone();
    let gpu = base.gpu_catalog().get(&rec.gpu_type)?.name.clone();
    let job = JobSpec { model, global_batch: rec.batch };
    let stages = rec.plan.map_or(1, |p| p.pp);
    let cell = Cell::new(&gpu, rec.gpus(), stages)?;
    let plan: Plan = match rec.plan {
        Some(p) => p,
        None => base.estimate(&job, &cell, rec.gpus_per_node)?.plan,
    };
    let ev = base.evaluate_plan(&job, &cell, rec.gpus_per_node, &plan)?;
    let compute = ev.time.compute_s + ev.time.bubble_s;
    let rest = ev.iter_time_s - compute;
    let left = (rec.iter_time_s - rest).max(0.1 * rec.iter_time_s);
    let factor = (compute / left).clamp(FACTOR_RANGE.0, FACTOR_RANGE.1);
    Ok((job.model.name, gpu, ev.iter_time_s, factor))
}

/// Median (mean of the middle two for even lengths); 0 for empty input.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { 0.5 * (s[n / 2 - 1] + s[n / 2]) }
}

/// The `q` quantile (0..=1) by linear interpolation; 0 for empty input.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// Spearman rank correlation of paired samples (average ranks for ties);
/// `None` with fewer than 2 pairs or a constant side.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;

    #[test]
    fn stats_helpers() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.9) - 4.6).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    /// Points generated by a "true" estimator whose efficiency is 0.6× the
    /// datasheet's are recovered by the fit, and an unmeasured Cell then gets
    /// the slower, calibrated prediction.
    #[test]
    fn recovers_a_known_efficiency_factor() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let truth = Calibration {
            per_type: [("v100".to_string(), 0.6)].into_iter().collect(),
            ..Calibration::default()
        };
        let slow = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(truth);
        let model = ModelCatalog::builtin().resolve("gpt__350M").unwrap();
        let mut recs = Vec::new();
        for (batch, gpus) in [(8, 1), (16, 1), (16, 2)] {
            let job = JobSpec { model: model.clone(), global_batch: batch };
            let e = slow.estimate(&job, &Cell::new("v100", gpus, 1).unwrap(), 8).unwrap();
            recs.push(ProfileRecord {
                model: model.name.clone(),
                batch,
                gpu_type: "v100".into(),
                nodes: 1,
                gpus_per_node: gpus,
                iter_time_s: e.iter_time_s,
                plan: Some(e.plan),
            });
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy { max_gpus: Some(1), ..Default::default() });
        assert_eq!(cal.report.used.len(), 2);
        assert_eq!(cal.report.skipped.len(), 1);
        let f = cal.factor("gpt__350M", "v100");
        assert!((f - 0.6).abs() < 0.03, "{f}");
        assert_eq!(cal.factor("gpt__350M", "a100"), 1.0);
        let unknown = ProfileRecord { model: "no_such_model".into(), ..recs[0].clone() };
        let cal2 = Calibration::fit(&base, [&unknown], &CalibrationPolicy::default());
        assert!(cal2.report.per_type.is_empty() && cal2.report.skipped[0].1.contains("no_such_model"));
    }
}
