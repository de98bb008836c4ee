//! The held-out protocols: which points calibrate and which are scored in
//! each split. A point is never scored by an estimator calibrated with it.
//! - `datasheet`: no calibration, every point;
//! - `(a)`: calibrate with every single-GPU point, score every multi-GPU point;
//! - `(b)` leave one model out: for each model, calibrate with every point of
//!   the other models plus the model's single-GPU points, score its
//!   multi-GPU points;
//! - `(c)` unseen model: for each model, calibrate with the other models
//!   only, score its single-GPU points;
//! - `(d)` job history: for each job (model and per-GPU batch), calibrate as
//!   (b) plus the job's multi-GPU points at its smallest multi-GPU count,
//!   score its larger Cells; with the per-job refit and without it, and (b)
//!   on the same points;
//! - `(e)` leave one GPU type out: for each GPU type, calibrate with every
//!   point of the other types, score every point of that type (a type the
//!   site has never profiled).
//! - `(f)` leave one model family out: for each family (GPT-like,
//!   BERT-like, MoE, CNN, generic), calibrate with every point of the other
//!   families plus the family's single-GPU points, score its multi-GPU
//!   points: (b) when no other model of the family was measured on several
//!   GPUs.
use crate::data::Point;

/// One calibration/test split: indices into the points.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Points the estimator may calibrate with (knowledge).
    pub calibrate: Vec<usize>,
    /// Points scored (truth), disjoint from `calibrate`.
    pub test: Vec<usize>,
}

/// A named protocol: one or more splits.
#[derive(Debug, Clone)]
pub struct Protocol {
    /// Short key: `datasheet`, `a`, `b`, `c`, `d`, `d-norefit`, `d-base`, `e`, `f`.
    pub key: &'static str,
    /// Name printed in the report.
    pub name: &'static str,
    /// Its splits.
    pub splits: Vec<Split>,
    /// Whether calibration may refit per job (level 4 of the calibration).
    pub per_job: bool,
}

fn distinct<'a>(it: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The protocols of the module doc over `points` (points that are not
/// calibratable are only ever tested).
pub fn protocols(points: &[Point]) -> Vec<Protocol> {
    let all: Vec<usize> = (0..points.len()).collect();
    let usable: Vec<usize> = all.iter().copied().filter(|i| points[*i].calibratable).collect();
    let single = |i: &usize| points[*i].rec.gpus() == 1;
    // A group (a model, a family) held out: every point of the others plus
    // the group's single-GPU points calibrate, its multi-GPU points are scored.
    let hold_out = |of: &dyn Fn(&usize) -> bool| {
        let test: Vec<usize> = all.iter().copied().filter(|i| of(i) && !single(i)).collect();
        (!test.is_empty()).then(|| Split { calibrate: usable.iter().copied().filter(|i| !of(i) || single(i)).collect(), test })
    };
    let mut b = Vec::new();
    let mut c = Vec::new();
    for m in distinct(points.iter().map(|p| p.model.as_str())) {
        let of = |i: &usize| points[*i].model == m;
        b.extend(hold_out(&of));
        let test_c: Vec<usize> = all.iter().copied().filter(|i| of(i) && single(i)).collect();
        if !test_c.is_empty() {
            c.push(Split { calibrate: usable.iter().copied().filter(|i| !of(i)).collect(), test: test_c });
        }
    }
    let singles: Vec<usize> = usable.iter().copied().filter(single).collect();
    let mut d = Vec::new();
    for j in distinct(points.iter().map(|p| p.job.as_str())) {
        let of = |i: &usize| points[*i].job == j && !single(i);
        let Some(smallest) = usable.iter().filter(|i| of(i)).map(|i| points[*i].rec.gpus()).min() else { continue };
        let history: Vec<usize> = usable.iter().copied().filter(|i| of(i) && points[*i].rec.gpus() == smallest).collect();
        let test: Vec<usize> = all.iter().copied().filter(|i| of(i) && points[*i].rec.gpus() > smallest).collect();
        if !test.is_empty() {
            // The profile DB as a site has it: every point of the other models,
            // the model's single-GPU points and this job's history.
            let model = points[test[0]].model.as_str();
            let mut calibrate: Vec<usize> = usable.iter().copied().filter(|i| points[*i].model != model || single(i)).collect();
            calibrate.extend(history);
            calibrate.sort_unstable();
            d.push(Split { calibrate, test });
        }
    }
    // (b)'s splits restricted to the points (d) scores.
    let d_tests: Vec<usize> = d.iter().flat_map(|s| s.test.iter().copied()).collect();
    let b_on_d: Vec<Split> = b
        .iter()
        .map(|s| Split { calibrate: s.calibrate.clone(), test: s.test.iter().copied().filter(|i| d_tests.contains(i)).collect() })
        .filter(|s| !s.test.is_empty())
        .collect();
    let e: Vec<Split> = distinct(points.iter().map(|p| p.rec.gpu_type.as_str()))
        .into_iter()
        .map(|t| Split {
            calibrate: usable.iter().copied().filter(|i| points[*i].rec.gpu_type != t).collect(),
            test: all.iter().copied().filter(|i| points[*i].rec.gpu_type == t).collect(),
        })
        .collect();
    let mut families: Vec<_> = points.iter().map(|p| p.family).collect();
    families.sort_by_key(|fam| format!("{fam:?}"));
    families.dedup();
    let f: Vec<Split> = families.into_iter().filter_map(|fam| hold_out(&|i: &usize| points[*i].family == fam)).collect();
    vec![
        Protocol { key: "datasheet", name: "datasheet (no calibration), all points", splits: vec![Split { calibrate: vec![], test: all.clone() }], per_job: true },
        Protocol {
            key: "a",
            name: "(a) calibrate with single-GPU points, test multi-GPU points",
            splits: vec![Split { calibrate: singles.clone(), test: all.iter().copied().filter(|i| !single(i)).collect() }],
            per_job: true,
        },
        Protocol { key: "b", name: "(b) leave one model out (other models + its single-GPU points), test its multi-GPU points", splits: b, per_job: true },
        Protocol { key: "c", name: "(c) unseen model (other models only), test its single-GPU points", splits: c, per_job: true },
        Protocol { key: "d", name: "(d) job history ((b) + the job's smallest multi-GPU Cells), test its larger Cells, per-job refit", splits: d.clone(), per_job: true },
        Protocol { key: "d-norefit", name: "(d) the same, without the per-job refit", splits: d, per_job: false },
        Protocol { key: "d-base", name: "(d) baseline: (b) scored on (d)'s test points", splits: b_on_d, per_job: true },
        Protocol { key: "e", name: "(e) leave one GPU type out (every point of the other types), test every point of that type", splits: e, per_job: true },
        Protocol { key: "f", name: "(f) leave one model family out (other families + its single-GPU points), test its multi-GPU points", splits: f, per_job: true },
    ]
}

/// The protocols scoring published (not measured here) points: every point
/// of `points` whose dataset is `published`, with the datasheet alone and
/// with an estimator calibrated on every measured point. Published points
/// never calibrate; [`protocols`] is given the measured points only.
pub fn published_protocols(points: &[Point]) -> Vec<Protocol> {
    let test: Vec<usize> = (0..points.len()).filter(|i| points[*i].dataset == "published").collect();
    if test.is_empty() {
        return Vec::new();
    }
    let measured: Vec<usize> = (0..points.len()).filter(|i| points[*i].dataset != "published" && points[*i].calibratable).collect();
    vec![
        Protocol { key: "p-datasheet", name: "(p) published ResNet-50 throughputs, datasheet (no calibration)", splits: vec![Split { calibrate: vec![], test: test.clone() }], per_job: true },
        Protocol { key: "p", name: "(p) published ResNet-50 throughputs, calibrated with every measured point", splits: vec![Split { calibrate: measured, test }], per_job: true },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::profile_db::ProfileRecord;
    use cellsched_core::model::ModelFamily;

    pub(crate) fn pt(model: &str, gpus: u32) -> Point {
        Point::new(
            "gavel",
            format!("j:{model}"),
            ProfileRecord { model: model.into(), batch: 8 * gpus, gpu_type: "v100".into(), nodes: 1, gpus_per_node: gpus, iter_time_s: 0.1, plan: None, peak_mem_gib: None, first_iter_s: None },
        )
    }

    /// No protocol ever scores a point it calibrated with, (a) tests exactly
    /// the multi-GPU points, (b) never calibrates with the held-out model's
    /// multi-GPU points and (e) never with any point of the held-out type.
    #[test]
    fn protocols_never_score_calibration_points() {
        let mut points = vec![pt("m1", 1), pt("m1", 2), pt("m1", 4), pt("m2", 1), pt("m2", 8), pt("m3", 1), pt("m3", 2)];
        for p in &mut points {
            p.model = p.rec.model.clone();
        }
        points[6].calibratable = false;
        points[3].rec.gpu_type = "k80".into();
        points[4].rec.gpu_type = "k80".into();
        let ps = protocols(&points);
        assert_eq!(ps.len(), 9);
        for p in &ps {
            for s in &p.splits {
                assert!(s.test.iter().all(|t| !s.calibrate.contains(t)), "{}", p.name);
                assert!(!s.test.is_empty());
            }
        }
        assert_eq!(ps[1].splits[0].test, vec![1, 2, 4, 6]);
        assert_eq!(ps[1].splits[0].calibrate, vec![0, 3, 5]);
        let b = &ps[2].splits;
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].test, vec![1, 2]);
        // m3's uncalibratable point is tested in its own split, never calibrates another's.
        assert_eq!(b[0].calibrate, vec![0, 3, 4, 5]);
        assert_eq!(b[2].test, vec![6]);
        let c = &ps[3].splits;
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].calibrate, vec![3, 4, 5]);
        // (d): m1's history is its 2-GPU point (beside (b)'s calibration set:
        // other models' points and m1's single-GPU one), its 4-GPU point is
        // scored; m2 and m3 have no larger Cell to score.
        let d = &ps[4].splits;
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].calibrate.clone(), d[0].test.clone()), (vec![0, 1, 3, 4, 5], vec![2]));
        assert!(ps[4].per_job && !ps[5].per_job && ps[5].splits == ps[4].splits);
        assert_eq!(ps[6].splits, vec![Split { calibrate: b[0].calibrate.clone(), test: vec![2] }]);
        // (e): one split per GPU type, all of its points scored, none of them calibrating.
        let e = &ps[7].splits;
        assert_eq!(e, &vec![Split { calibrate: vec![0, 1, 2, 5], test: vec![3, 4] }, Split { calibrate: vec![3, 4], test: vec![0, 1, 2, 5, 6] }]);
        // (f): m1 and m3 of one family, m2 of another; a family's split keeps
        // its single-GPU points and none of its multi-GPU ones.
        let mut fam = points.clone();
        for p in &mut fam[3..5] {
            p.family = ModelFamily::Bert;
        }
        for p in fam.iter_mut().filter(|p| p.model != "m2") {
            p.family = ModelFamily::Gpt;
        }
        let f = &protocols(&fam)[8].splits;
        assert_eq!(f.len(), 2);
        let gpt = f.iter().find(|s| s.test.contains(&1)).unwrap();
        assert_eq!((gpt.calibrate.clone(), gpt.test.clone()), (vec![0, 3, 4, 5], vec![1, 2, 6]));
        let bert = f.iter().find(|s| s.test.contains(&4)).unwrap();
        assert_eq!((bert.calibrate.clone(), bert.test.clone()), (vec![0, 1, 2, 3, 5], vec![4]));
    }

    /// Published points are scored and never calibrate; no published
    /// point, no protocol.
    #[test]
    fn published_points_never_calibrate() {
        let mut points = vec![pt("m1", 1), pt("m1", 2), pt("r", 1), pt("r", 8)];
        assert!(published_protocols(&points).is_empty());
        for p in &mut points[2..] {
            p.dataset = "published";
            p.calibratable = false;
        }
        let ps = published_protocols(&points);
        assert_eq!(ps.len(), 2);
        assert!(ps[0].splits[0].calibrate.is_empty());
        assert_eq!((ps[1].splits[0].calibrate.clone(), ps[1].splits[0].test.clone()), (vec![0, 1], vec![2, 3]));
    }
}
