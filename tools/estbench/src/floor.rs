//! How far one GPU type's measurements follow from the other types', no
//! estimator involved: the context for protocol (e).
//!
//! Each point is predicted from the same model, batch and Cell (nodes ×
//! GPUs per node) measured on the other GPU types: the geometric mean of
//! their times, times one factor per (model, held-out type) — the median
//! ratio over that model's points on the held-out type, fitted on those very
//! points. That factor is more than protocol (e) may know (it comes from the
//! held-out type's truth), so the error left is a floor for any prediction
//! that carries a model's measured behaviour to a new type by one factor per
//! model: the part of the held-out type's times that depends on the batch
//! and the Cell differently than on the other types.
use crate::data::Point;
use cellsched_core::estimator::median;
use std::collections::BTreeMap;

/// The floor on one GPU type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeFloor {
    /// The held-out GPU type.
    pub gpu_type: String,
    /// Its points measured on at least one other type too.
    pub n: usize,
    /// Median |predicted / measured - 1| of those points.
    pub median_ape: f64,
}

/// The same model, batch and Cell.
type CellKey = (String, u32, u32, u32);

fn key(p: &Point) -> CellKey {
    (p.model.clone(), p.rec.batch, p.rec.nodes, p.rec.gpus_per_node)
}

/// The floor per GPU type (types with no point measured elsewhere are
/// left out) and over all their points, as `(per type, all)`.
pub fn cross_type_floor(points: &[Point]) -> (Vec<TypeFloor>, Option<f64>) {
    // log times per Cell and type (a Cell measured twice on a type: the mean).
    let mut times: BTreeMap<CellKey, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for p in points.iter().filter(|p| p.rec.iter_time_s > 0.0) {
        times.entry(key(p)).or_default().entry(p.rec.gpu_type.as_str()).or_default().push(p.rec.iter_time_s.ln());
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // (type, model) -> [(log measured, log base from the other types)]
    let mut pairs: BTreeMap<(&str, &str), Vec<(f64, f64)>> = BTreeMap::new();
    for (k, by_type) in &times {
        for (&ty, own) in by_type {
            let others: Vec<f64> = by_type.iter().filter(|(t, _)| **t != ty).map(|(_, v)| mean(v)).collect();
            if others.is_empty() {
                continue;
            }
            pairs.entry((ty, k.0.as_str())).or_default().push((mean(own), mean(&others)));
        }
    }
    let mut per_type: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for ((ty, _), v) in &pairs {
        let logs: Vec<f64> = v.iter().map(|(m, b)| m - b).collect();
        let factor = median(&logs);
        per_type.entry(ty).or_default().extend(v.iter().map(|(m, b)| (b + factor - m).exp() - 1.0).map(f64::abs));
    }
    let all: Vec<f64> = per_type.values().flatten().copied().collect();
    let rows = per_type.into_iter().map(|(t, v)| TypeFloor { gpu_type: t.to_string(), n: v.len(), median_ape: median(&v) }).collect();
    (rows, (!all.is_empty()).then(|| median(&all)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::profile_db::ProfileRecord;

    fn pt(model: &str, batch: u32, ty: &str, gpus: u32, t: f64) -> Point {
        let mut p = Point::new("gavel", format!("gavel:{model} bs{batch}"), ProfileRecord { model: model.into(), batch, gpu_type: ty.into(), nodes: 1, gpus_per_node: gpus, iter_time_s: t, plan: None, peak_mem_gib: None, first_iter_s: None });
        p.model = model.into();
        p
    }

    /// A type that is a constant factor slower per model has no floor.
    #[test]
    fn a_constant_factor_per_model_transfers_exactly() {
        let mut points = Vec::new();
        for (b, t) in [(16, 0.1), (32, 0.2), (64, 0.4)] {
            points.push(pt("m", b, "p100", 1, t));
            points.push(pt("m", b, "k80", 1, 3.0 * t));
            points.push(pt("n", b, "p100", 1, t));
            points.push(pt("n", b, "k80", 1, 2.0 * t));
        }
        let (rows, all) = cross_type_floor(&points);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.n == 6 && r.median_ape < 1e-9), "{rows:?}");
        assert!(all.unwrap() < 1e-9);
    }

    /// A model whose held-out-type ratio varies with the batch: one factor
    /// cannot follow it, and the error left is the floor.
    #[test]
    fn a_ratio_that_varies_with_the_batch_is_the_floor() {
        // k80 / p100 is 3 at batch 16 and 6 at batch 32: the fitted factor is
        // their geometric mean, sqrt(18), and both points err by it.
        let points = vec![pt("m", 16, "p100", 1, 0.1), pt("m", 16, "k80", 1, 0.3), pt("m", 32, "p100", 1, 0.2), pt("m", 32, "k80", 1, 1.2)];
        let (rows, all) = cross_type_floor(&points);
        let want = 0.5 * ((18f64.sqrt() / 3.0 - 1.0) + (1.0 - 18f64.sqrt() / 6.0));
        for r in &rows {
            assert_eq!(r.n, 2);
            assert!((r.median_ape - want).abs() < 1e-9, "{r:?} vs {want}");
        }
        assert!((all.unwrap() - want).abs() < 1e-9);
    }

    /// A Cell measured on one type only says nothing about the floor.
    #[test]
    fn cells_measured_on_one_type_are_left_out() {
        let points = vec![pt("m", 16, "p100", 1, 0.1), pt("m", 16, "k80", 2, 0.3)];
        let (rows, all) = cross_type_floor(&points);
        assert!(rows.is_empty() && all.is_none());
    }
}
