//! Plan search inside a Cell and the Cell sizes worth trying.
use super::plan_cost::{evaluate, CellContext, PlanEval};
use crate::cell::{Cell, Plan};
use crate::model::Recompute;

/// Most micro-batch counts tried per (dp, tp).
const MAX_MICRO_BATCH_CHOICES: usize = 12;

/// Divisors of `n` in increasing order (none for 0). The square is taken in
/// `u64`, so no `n` up to `u32::MAX` overflows it.
fn divisors(n: u32) -> Vec<u32> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut i: u32 = 1;
    while u64::from(i) * u64::from(i) <= u64::from(n) {
        if n % i == 0 {
            small.push(i);
            if i != n / i {
                large.push(n / i);
            }
        }
        i += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// Micro-batch counts for `per_replica` samples: the smallest divisors (for
/// gradient accumulation) plus, with pipelines, counts near 1–4 × stages.
fn micro_batch_counts(per_replica: u32, pp: u32) -> Vec<u32> {
    let divs = divisors(per_replica);
    if divs.len() <= MAX_MICRO_BATCH_CHOICES {
        return divs;
    }
    let mut pick: Vec<u32> = divs.iter().copied().take(MAX_MICRO_BATCH_CHOICES / 2).collect();
    for target in [pp, pp.saturating_mul(2), pp.saturating_mul(4), pp.saturating_mul(8), per_replica] {
        if let Some(d) = divs.iter().copied().find(|d| *d >= target) {
            pick.push(d);
        }
    }
    pick.sort_unstable();
    pick.dedup();
    pick
}

/// Micro-batch counts to try: the one that gives the training script's fixed
/// micro-batch size (at most the replica's samples) when there is one and it
/// divides them, else [`micro_batch_counts`].
fn fixed_or_all_counts(per_replica: u32, pp: u32, fixed: Option<u32>) -> Vec<u32> {
    match fixed.map(|f| f.clamp(1, per_replica.max(1))) {
        Some(f) if per_replica % f == 0 => vec![per_replica / f],
        _ => micro_batch_counts(per_replica, pp),
    }
}

/// The fastest plan that fits; `Err` explains why none does.
pub(crate) fn best_plan(cx: &CellContext<'_>, cell: &Cell) -> Result<PlanEval, String> {
    let cost = cx.cost;
    if cell.stages > cost.pipeline_layers {
        return Err(format!("{} pipeline stages exceed the model's {} layers", cell.stages, cost.pipeline_layers));
    }
    let per_stage = cell.gpus_per_stage();
    let node = cx.placement.per_node;
    let mut best: Option<PlanEval> = None;
    let mut smallest: Option<PlanEval> = None;
    let mut any_divisible = false;
    let mut tp = 1;
    while tp <= per_stage {
        if per_stage % tp == 0 && tp <= cost.max_tp.max(1) && (tp == 1 || tp <= node) {
            let dp = per_stage / tp;
            if cx.global_batch % dp == 0 {
                for m in fixed_or_all_counts(cx.global_batch / dp, cell.stages, cost.micro_batch) {
                    any_divisible = true;
                    let zeros: &[u8] = if dp > 1 { &[0, 1, 2, 3] } else { &[0] };
                    let ckpts: &[bool] = match cost.recompute {
                        Recompute::Auto => &[false, true],
                        Recompute::Full => &[true],
                        Recompute::Off => &[false],
                    };
                    for &zero_stage in zeros {
                        if !cost.runtime.can_execute(tp, cell.stages, zero_stage) {
                            continue;
                        }
                        for &checkpointing in ckpts {
                            let plan = Plan { dp, tp, pp: cell.stages, micro_batches: m, zero_stage, checkpointing };
                            let Some(ev) = evaluate(cx, &plan) else { continue };
                            if smallest.as_ref().map_or(true, |s| ev.mem_per_gpu_bytes < s.mem_per_gpu_bytes) {
                                smallest = Some(ev);
                            }
                            if ev.fits && best.as_ref().map_or(true, |b| better(&ev, b)) {
                                best = Some(ev);
                            }
                        }
                    }
                }
            }
        }
        let Some(next) = tp.checked_mul(2) else { break };
        tp = next;
    }
    match (best, smallest) {
        (Some(b), _) => Ok(b),
        (None, Some(s)) => Err(format!(
            "does not fit in memory: the smallest plan ({}) needs {:.1} GiB per GPU, {} has {:.0} GiB",
            s.plan,
            s.mem_per_gpu_bytes as f64 / (1u64 << 30) as f64,
            cx.gpu.name,
            cx.gpu.mem_gib
        )),
        (None, None) if !any_divisible => Err(format!(
            "global batch {} is not divisible by any data-parallel degree of {} GPUs per stage",
            cx.global_batch, per_stage
        )),
        (None, None) => Err(format!("no plan the model's runtime ({:?}) can execute on this Cell", cost.runtime).to_lowercase()),
    }
}

/// Robust choice: the plan with the lower upper end of its error band wins
/// (an advantage that rests on the least certain terms — communication,
/// bubble, overheads — must survive their band); near-ties (0.1 %) go to less
/// memory, then the simpler plan.
fn better(a: &PlanEval, b: &PlanEval) -> bool {
    let (ta, tb) = (a.iter_time_s * (1.0 + a.time.error_band()), b.iter_time_s * (1.0 + b.time.error_band()));
    if (ta - tb).abs() > 1e-3 * ta.min(tb) {
        return ta < tb;
    }
    let simple = |p: &Plan| (p.tp, p.zero_stage, p.checkpointing, p.micro_batches);
    (a.mem_per_gpu_bytes, simple(&a.plan)) < (b.mem_per_gpu_bytes, simple(&b.plan))
}

/// GPU counts to try: powers of two and multiples of the node size, up to
/// `max_gpus`, placeable on one node with `best_free` free GPUs or on
/// `full_nodes` completely free nodes.
pub(crate) fn cell_sizes(node: u32, max_gpus: u32, best_free: u32, full_nodes: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut n = 1u32;
    while n <= max_gpus && n <= node {
        if n <= best_free {
            out.push(n);
        }
        let Some(next) = n.checked_mul(2) else { break };
        n = next;
    }
    if best_free >= node && node <= max_gpus {
        out.push(node);
    }
    for k in 2..=full_nodes {
        match k.checked_mul(node) {
            Some(total) if total <= max_gpus => out.push(total),
            _ => break,
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Pipeline stage counts for `gpus` GPUs: power-of-two divisors, at most the model's layers.
pub(crate) fn stage_counts(gpus: u32, layers: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut s: u32 = 1;
    while s <= gpus && s <= layers.max(1) && s <= 16 {
        if gpus % s == 0 {
            out.push(s);
        }
        s *= 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_and_choices() {
        assert_eq!(divisors(12), vec![1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(1), vec![1]);
        let mb = micro_batch_counts(1024, 4);
        assert!(mb.len() <= MAX_MICRO_BATCH_CHOICES + 5 && mb.contains(&1) && mb.contains(&1024) && mb.contains(&16));
        assert!(mb.iter().all(|m| 1024 % m == 0));
    }

    #[test]
    fn sizes_respect_free_gpus_and_nodes() {
        assert_eq!(cell_sizes(8, 64, 8, 3), vec![1, 2, 4, 8, 16, 24]);
        assert_eq!(cell_sizes(8, 16, 3, 0), vec![1, 2]);
        assert_eq!(cell_sizes(4, 8, 4, 1), vec![1, 2, 4]);
        assert_eq!(cell_sizes(6, 12, 6, 2), vec![1, 2, 4, 6, 12]);
        assert_eq!(stage_counts(8, 24), vec![1, 2, 4, 8]);
        assert_eq!(stage_counts(12, 2), vec![1, 2]);
    }

    /// The probe's crash: `i * i` overflowed `u32` for n = 2^32 - 1, wrapped
    /// to 0 and divided by it. Every extreme now answers.
    #[test]
    fn extreme_inputs_do_not_overflow() {
        let d = divisors(u32::MAX);
        assert_eq!((d.len(), d.last()), (32, Some(&u32::MAX)));
        assert!(d.iter().all(|x| u32::MAX % x == 0));
        assert_eq!(divisors(0), Vec::<u32>::new());
        assert!(micro_batch_counts(u32::MAX, u32::MAX).iter().all(|m| u32::MAX % m == 0));
        assert_eq!(cell_sizes(u32::MAX, u32::MAX, u32::MAX, u32::MAX).last(), Some(&u32::MAX));
        assert_eq!(cell_sizes(1 << 31, u32::MAX, 1 << 31, 3), (0..=31).map(|e| 1u32 << e).collect::<Vec<_>>());
        assert_eq!(stage_counts(u32::MAX, u32::MAX), vec![1]);
        assert_eq!(fixed_or_all_counts(u32::MAX, 1, Some(u32::MAX)), vec![1]);
    }

    /// The estimator's entry points with extreme inputs: an estimate or a
    /// clear error, never a panic. A batch above the shared cap is refused
    /// by name before any search runs.
    #[test]
    fn entry_points_refuse_or_answer_at_the_extremes() {
        use crate::estimator::{CellOffer, Estimator, JobSpec};
        let est = Estimator::new(crate::gpu::GpuCatalog::builtin(), crate::model::ModelCatalog::builtin());
        let model = crate::model::ModelCatalog::builtin().resolve("gpt__125M").unwrap();
        let a100x4 = Cell::new("a100", 4, 1).unwrap();
        let job = |b: u32| JobSpec { model: model.clone(), global_batch: b };
        let e = est.estimate(&job(u32::MAX), &a100x4, 4).unwrap_err().to_string();
        assert!(e.contains("global batch") && e.contains("1..=16777216"), "{e}");
        let e = est.estimate(&job(64), &a100x4, u32::MAX).unwrap_err().to_string();
        assert!(e.contains("GPUs per node") && e.contains("1..=64"), "{e}");
        assert!(est.estimate(&job(crate::limits::BATCH.max_u32()), &a100x4, 4).is_ok());
        let plan = Plan { dp: 4, tp: 1, pp: 1, micro_batches: crate::limits::MICRO_BATCHES.max_u32(), zero_stage: 0, checkpointing: false };
        assert!(est.estimate_plan(&job(u32::MAX), &a100x4, 4, &plan).is_err());
        let offers = [CellOffer { gpu_type: "a100".into(), gpus_per_node: u32::MAX, free_gpus_per_node: vec![u32::MAX; 4] }];
        assert!(est.rank_cells(&job(64), &offers, u32::MAX).is_empty(), "no node of 2^32-1 GPUs is estimated");
        let offers = [CellOffer { gpu_type: "a100".into(), gpus_per_node: 4, free_gpus_per_node: vec![4; 4] }];
        assert!(!est.rank_cells(&job(64), &offers, u32::MAX).is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..proptest::prelude::ProptestConfig::default() })]

        /// Any batch, Cell, node size and plan: the estimator answers or
        /// errs, and every answer respects the caps and its Cell.
        #[test]
        fn estimator_never_panics(batch in proptest::prelude::any::<u32>(), gpus_log in 0u32..=12, stages_log in 0u32..=4, node in proptest::prelude::any::<u32>(), mb in 1u32..=(1 << 20), tp_log in 0u32..=12) {
            use crate::estimator::{Estimator, JobSpec};
            let est = Estimator::new(crate::gpu::GpuCatalog::builtin(), crate::model::ModelCatalog::builtin());
            let job = JobSpec { model: crate::model::ModelCatalog::builtin().resolve("gpt__125M").unwrap(), global_batch: batch };
            let gpus = 1u32 << gpus_log;
            let stages = 1u32 << stages_log.min(gpus_log);
            let cell = Cell::new("a100", gpus, stages).unwrap();
            let node = if node % 2 == 0 { node } else { 1 << (node % 7) };
            if let Ok(e) = est.estimate(&job, &cell, node) {
                proptest::prop_assert!(batch <= crate::limits::BATCH.max_u32() && e.plan.gpus() == gpus && e.iter_time_s.is_finite());
            }
            let per_stage = gpus / stages;
            let tp = (1u32 << tp_log.min(31)).min(per_stage);
            let plan = Plan { dp: per_stage / tp, tp, pp: stages, micro_batches: mb, zero_stage: (mb % 4) as u8, checkpointing: mb % 2 == 0 };
            let _ = est.estimate_plan(&job, &cell, node, &plan);
        }
    }

    proptest::proptest! {
        /// Any sizes: the search's helpers answer without panicking, and
        /// what they answer is consistent with their inputs.
        #[test]
        fn helpers_never_panic(n in proptest::prelude::any::<u32>(), pp in proptest::prelude::any::<u32>(), node in 0u32..=u32::MAX, max in proptest::prelude::any::<u32>(), free in proptest::prelude::any::<u32>(), full in 0u32..1_000_000) {
            let n = n % (1 << 26); // the divisor loop is O(sqrt n): keep each case fast
            for m in micro_batch_counts(n, pp) {
                proptest::prop_assert!(m >= 1 && n % m == 0);
            }
            for s in cell_sizes(node, max, free, full) {
                proptest::prop_assert!(s >= 1 && s <= max);
            }
            for s in stage_counts(n, pp) {
                proptest::prop_assert!(n % s == 0);
            }
        }
    }
}
