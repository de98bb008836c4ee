//! Measurements checked against each other, before any model sees them.
//!
//! Synchronous data parallelism with the same per-GPU batch cannot get faster
//! by adding GPUs: every GPU still computes its share, then more of them
//! synchronise. An in-node weak-scaling series (one model, GPU type and
//! per-GPU batch, one node, data parallelism only) whose iteration on more
//! GPUs is clearly faster than on fewer contradicts itself: at least one of
//! its points did not measure what its record says (another job on the
//! server, a different link than the rest, a logging slip). Calibration
//! lists the series' multi-GPU points as warnings in its report (and still
//! fits with them: what such series share, a slow layout, is real for other
//! models too), and `cellsched bench estimator` reports them.
use crate::profile_db::ProfileRecord;
use std::collections::BTreeMap;

/// Share of the iteration time by which a point on more GPUs may beat one on
/// fewer (timing noise) before the pair counts as a contradiction.
pub const CONTRADICTION_TOLERANCE: f64 = 0.10;

/// Indices (into `points`) of the multi-GPU points of every in-node
/// weak-scaling series in which an iteration on more GPUs is over
/// [`CONTRADICTION_TOLERANCE`] faster than one on fewer. Each point is
/// (model key as the caller names models, record); series are keyed by model
/// key, GPU type and per-GPU batch; records over several nodes, with tensor or
/// pipeline parallelism or gradient accumulation, are never in a series.
/// Sorted.
pub fn weak_scaling_contradictions<K: Ord>(points: &[(K, &ProfileRecord)]) -> Vec<usize> {
    let mut series: BTreeMap<(&K, &str, u32), Vec<usize>> = BTreeMap::new();
    for (i, (k, r)) in points.iter().enumerate() {
        let g = r.gpus().max(1);
        let dp_only = r.plan.map_or(true, |p| p.tp == 1 && p.pp == 1 && p.dp == g && p.micro_batches <= 1);
        if r.nodes == 1 && dp_only && r.batch % g == 0 && r.iter_time_s > 0.0 {
            series.entry((k, r.gpu_type.as_str(), r.batch / g)).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for idx in series.values() {
        let t = |i: usize| points[i].1.iter_time_s;
        let g = |i: usize| points[i].1.gpus();
        let contradicts = idx.iter().any(|&a| idx.iter().any(|&b| g(a) < g(b) && t(a) > (1.0 + CONTRADICTION_TOLERANCE) * t(b)));
        if contradicts {
            out.extend(idx.iter().copied().filter(|&i| g(i) > 1));
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Plan;

    fn rec(model: &str, gpus: u32, t: f64) -> ProfileRecord {
        ProfileRecord { model: model.into(), batch: 8 * gpus, gpu_type: "v100".into(), nodes: 1, gpus_per_node: gpus, iter_time_s: t, plan: None, peak_mem_gib: None, first_iter_s: None }
    }

    /// A series whose 4-GPU iteration is slower than its 8-GPU one is flagged
    /// whole (its multi-GPU points); a monotone series, one within the
    /// tolerance, points over several nodes and strong scaling are not.
    #[test]
    fn contradicting_series_are_flagged_whole() {
        let mut v = Vec::new();
        for (m, times) in [("bad", [0.10, 0.10, 0.30, 0.12]), ("good", [0.10, 0.11, 0.13, 0.15]), ("noisy", [0.10, 0.11, 0.12, 0.115])] {
            for (g, t) in [1, 2, 4, 8].into_iter().zip(times) {
                v.push(rec(m, g, t));
            }
        }
        let keyed = |v: &[ProfileRecord]| -> Vec<(String, ProfileRecord)> { v.iter().map(|r| (r.model.clone(), r.clone())).collect() };
        let check = |v: &[ProfileRecord]| {
            let k = keyed(v);
            let refs: Vec<(&str, &ProfileRecord)> = k.iter().map(|(m, r)| (m.as_str(), r)).collect();
            weak_scaling_contradictions(&refs)
        };
        assert_eq!(check(&v), vec![1, 2, 3]);
        // Under one key the models' series mix, and contradict each other.
        let one: Vec<(u8, &ProfileRecord)> = v.iter().map(|r| (0u8, r)).collect();
        assert!(!weak_scaling_contradictions(&one).is_empty());
        // The same times over nodes (one GPU each) are not in-node series.
        let spread: Vec<ProfileRecord> = v.iter().map(|r| ProfileRecord { nodes: r.gpus_per_node, gpus_per_node: 1, ..r.clone() }).collect();
        assert!(check(&spread).is_empty());
        // Strong scaling (a fixed global batch) and gradient accumulation are not weak-scaling series.
        let mut strong = vec![rec("s", 2, 0.4), rec("s", 4, 0.2)];
        strong[0].batch = 16;
        strong[1].batch = 16;
        assert!(check(&strong).is_empty());
        let mut accum = vec![rec("a", 2, 0.4), rec("a", 4, 0.2)];
        accum[0].plan = Some(Plan { dp: 2, micro_batches: 2, ..Plan::default() });
        assert!(check(&accum).is_empty());
    }
}
