//! Scoring a split (calibrate with its knowledge points, predict its truth
//! points) and summarising errors into rows: APE, signed bias, rank
//! correlation across a job's Cells, predicted/measured by shape.
use crate::data::Point;
use crate::protocol::{Protocol, Split};
use cellsched_core::cell::Cell;
use cellsched_core::estimator::{quantile, spearman, Calibration, CalibrationPolicy, Estimator, JobSpec, PlanEval};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::{ModelCatalog, ModelFamily};
use cellsched_core::profile_db::ProfileRecord;
use std::collections::BTreeMap;

/// A scored point.
#[derive(Debug, Clone)]
pub struct Scored {
    /// Index into the points.
    pub idx: usize,
    /// `estimate()` answer: iteration time, or None when judged infeasible/unanswerable.
    pub est: Option<f64>,
    /// Why `estimate()` gave no answer.
    pub est_err: Option<String>,
    /// Measured plan's cost: (time, fits, peak bytes per GPU).
    pub pinned: Option<(f64, bool, u64)>,
}

/// The calibration of one split, as `cellsched estimate` would use it.
pub fn calibrated(points: &[Point], split: &Split, per_job: bool, gpus: &GpuCatalog, models: &ModelCatalog) -> (Estimator, Option<Calibration>) {
    let base = Estimator::new(gpus.clone(), models.clone());
    if split.calibrate.is_empty() {
        return (base, None);
    }
    let policy = CalibrationPolicy { single_node_only: false, max_gpus: None, per_model: true, per_job };
    let cal = Calibration::fit(&base, split.calibrate.iter().map(|i| &points[*i].rec), &policy);
    (Estimator::new(gpus.clone(), models.clone()).with_calibration(cal.clone()), Some(cal))
}

/// Scores every test point of `split` with an estimator calibrated on its calibration points.
pub fn score_split(points: &[Point], split: &Split, per_job: bool, gpus: &GpuCatalog, models: &ModelCatalog) -> Vec<Scored> {
    let (est, _) = calibrated(points, split, per_job, gpus, models);
    split.test.iter().map(|&i| score_point(&est, models, i, &points[i].rec)).collect()
}

/// Scores every split of a protocol.
pub fn score_protocol(points: &[Point], proto: &Protocol, gpus: &GpuCatalog, models: &ModelCatalog) -> Vec<Scored> {
    proto.splits.iter().flat_map(|s| score_split(points, s, proto.per_job, gpus, models)).collect()
}

/// Scores one record: the estimator's own plan and, when known, the measured plan.
pub fn score_point(est: &Estimator, models: &ModelCatalog, idx: usize, rec: &ProfileRecord) -> Scored {
    let mut s = Scored { idx, est: None, est_err: None, pinned: None };
    let model = match models.get(&rec.model) {
        Ok(m) => m.clone(),
        Err(e) => {
            s.est_err = Some(e.to_string());
            return s;
        }
    };
    let job = JobSpec { model, global_batch: rec.batch };
    let stages = rec.plan.map_or(1, |p| p.pp);
    match Cell::new(&rec.gpu_type, rec.gpus(), stages).and_then(|cell| est.estimate(&job, &cell, rec.gpus_per_node)) {
        Ok(e) => s.est = Some(e.iter_time_s),
        Err(e) => s.est_err = Some(e.to_string()),
    }
    if let Some(ev) = measured_plan_eval(est, &job, rec) {
        s.pinned = Some((ev.iter_time_s, ev.fits, ev.mem_per_gpu_bytes));
    }
    s
}

/// `rec`'s measured plan evaluated on its Cell for `job`: `None` when the
/// record has no plan or the Cell or plan is refused.
pub fn measured_plan_eval(est: &Estimator, job: &JobSpec, rec: &ProfileRecord) -> Option<PlanEval> {
    let plan = rec.plan?;
    let cell = Cell::new(&rec.gpu_type, rec.gpus(), plan.pp).ok()?;
    est.evaluate_plan(job, &cell, rec.gpus_per_node, &plan).ok()
}

/// Absolute percentage error.
pub fn ape(pred: f64, truth: f64) -> f64 {
    (pred - truth).abs() / truth * 100.0
}

/// Signed error, percent (negative: predicted too fast / too small).
pub fn bias(pred: f64, truth: f64) -> f64 {
    (pred / truth - 1.0) * 100.0
}

/// One summary row: a group of scored points.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What the group is (`all`, `gavel`, `family gpt`, `2 nodes`, ...).
    pub label: String,
    /// Points in it.
    pub n: usize,
    /// Median absolute percentage error.
    pub median_ape: f64,
    /// 90th percentile of the absolute percentage error.
    pub p90_ape: f64,
    /// Median signed error, percent (negative: predicted too fast).
    pub median_bias: f64,
}

impl Row {
    /// The row of `(ape, bias)` pairs; None when empty.
    pub fn of(label: impl Into<String>, errs: &[(f64, f64)]) -> Option<Row> {
        if errs.is_empty() {
            return None;
        }
        let a: Vec<f64> = errs.iter().map(|e| e.0).collect();
        let b: Vec<f64> = errs.iter().map(|e| e.1).collect();
        Some(Row { label: label.into(), n: errs.len(), median_ape: quantile(&a, 0.5), p90_ape: quantile(&a, 0.9), median_bias: quantile(&b, 0.5) })
    }
}

/// Which prediction of a scored point a summary uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The estimator's own plan (`cellsched estimate`).
    Estimate,
    /// The measured plan's cost.
    MeasuredPlan,
}

impl Pick {
    fn time(self, s: &Scored) -> Option<f64> {
        match self {
            Pick::Estimate => s.est,
            Pick::MeasuredPlan => s.pinned.map(|p| p.0),
        }
    }
}

/// Lower-case name of a family.
pub fn family_name(f: ModelFamily) -> String {
    format!("{f:?}").to_lowercase()
}

/// Summary rows of one protocol's scores: all points, without the
/// `contradictory` ones, per dataset (and without ZeRO-Offload runs), per
/// GPU type, per model family and per node count.
pub fn rows(points: &[Point], scored: &[Scored], pick: Pick, contradictory: &[usize]) -> Vec<Row> {
    let errs: Vec<(usize, (f64, f64))> = scored
        .iter()
        .filter_map(|s| pick.time(s).map(|t| (s.idx, (ape(t, points[s.idx].rec.iter_time_s), bias(t, points[s.idx].rec.iter_time_s)))))
        .collect();
    let group = |f: &dyn Fn(usize) -> bool| -> Vec<(f64, f64)> { errs.iter().filter(|(i, _)| f(*i)).map(|x| x.1).collect() };
    let mut out = Vec::new();
    out.extend(Row::of("all", &group(&|_| true)));
    let consistent = group(&|i| contradictory.binary_search(&i).is_err());
    if consistent.len() < errs.len() {
        out.extend(Row::of("w/o contradictory", &consistent));
    }
    for prec in ["amp", "tf32", "fp32"] {
        out.extend(Row::of(format!("published {prec}"), &group(&|i| points[i].dataset == "published" && points[i].job.split(' ').nth(1) == Some(prec))));
    }
    for ds in ["gavel", "rubick-a800", "h100", "h100-own", "h200"] {
        let sub = group(&|i| points[i].dataset == ds);
        out.extend(Row::of(ds, &sub));
        let described = group(&|i| points[i].dataset == ds && !points[i].job.ends_with("-offload"));
        if !described.is_empty() && described.len() < sub.len() {
            out.extend(Row::of(format!("{ds} w/o offload"), &described));
        }
    }
    let mut types: Vec<&str> = errs.iter().map(|(i, _)| points[*i].rec.gpu_type.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    for t in types {
        out.extend(Row::of(format!("type {t}"), &group(&|i| points[i].rec.gpu_type == t)));
    }
    let mut fams: Vec<String> = errs.iter().map(|(i, _)| family_name(points[*i].family)).collect();
    fams.sort_unstable();
    fams.dedup();
    for f in fams {
        out.extend(Row::of(format!("family {f}"), &group(&|i| family_name(points[i].family) == f)));
    }
    let mut nodes: Vec<u32> = errs.iter().map(|(i, _)| points[*i].rec.nodes).collect();
    nodes.sort_unstable();
    nodes.dedup();
    for n in nodes {
        out.extend(Row::of(format!("{n} node{}", if n == 1 { "" } else { "s" }), &group(&|i| points[i].rec.nodes == n)));
    }
    out
}

/// Spearman ρ of per-sample time across the Cells of each job with ≥ 3 scored Cells.
pub fn rank_correlations(points: &[Point], scored: &[Scored], pick: Pick) -> Vec<f64> {
    let mut by_job: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for s in scored {
        let p = &points[s.idx];
        if let Some(pred) = pick.time(s) {
            let e = by_job.entry(&p.job).or_default();
            e.0.push(pred / p.rec.batch as f64);
            e.1.push(p.rec.iter_time_s / p.rec.batch as f64);
        }
    }
    by_job.values().filter(|(a, _)| a.len() >= 3).filter_map(|(a, b)| spearman(a, b)).collect()
}

/// Predicted/measured (own plan) of multi-GPU points by (dataset, GPUs, nodes).
pub fn ratio_by_shape<'p>(points: &'p [Point], scored: &[Scored]) -> BTreeMap<(&'p str, u32, u32), Vec<f64>> {
    let mut by: BTreeMap<(&str, u32, u32), Vec<f64>> = BTreeMap::new();
    for s in scored {
        let p = &points[s.idx];
        if let (Some(t), true) = (s.est, p.rec.gpus() > 1) {
            by.entry((p.dataset, p.rec.gpus(), p.rec.nodes)).or_default().push(t / p.rec.iter_time_s);
        }
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Point;

    #[test]
    fn rows_group_by_family_type_and_nodes_with_signed_bias() {
        let mk = |model: &str, fam: ModelFamily, nodes: u32, t: f64| {
            let mut p = Point::new(
                "gavel",
                format!("j:{model}"),
                ProfileRecord { model: model.into(), batch: 8, gpu_type: "v100".into(), nodes, gpus_per_node: 1, iter_time_s: t, plan: None, peak_mem_gib: None, first_iter_s: None },
            );
            p.family = fam;
            p
        };
        let points = vec![mk("a", ModelFamily::Gpt, 1, 1.0), mk("b", ModelFamily::WideResnet, 2, 1.0), mk("c", ModelFamily::WideResnet, 2, 2.0)];
        let scored: Vec<Scored> = [0.9, 0.6, 1.0].iter().enumerate().map(|(idx, &t)| Scored { idx, est: Some(t), est_err: None, pinned: None }).collect();
        let r = rows(&points, &scored, Pick::Estimate, &[]);
        let get = |l: &str| r.iter().find(|x| x.label == l).unwrap_or_else(|| panic!("{l}: {r:?}")).clone();
        assert_eq!(get("all").n, 3);
        let cnn = get("family wideresnet");
        assert_eq!(cnn.n, 2);
        assert!((cnn.median_bias + 45.0).abs() < 1e-9, "{cnn:?}");
        assert!((cnn.median_ape - 45.0).abs() < 1e-9);
        assert!((get("family gpt").median_bias + 10.0).abs() < 1e-9);
        assert_eq!((get("1 node").n, get("2 nodes").n, get("type v100").n), (1, 2, 3));
        assert!(rows(&points, &scored, Pick::MeasuredPlan, &[]).is_empty());
    }
}
