//! Choosing the plan a step is told about, from (in order) slurmctld's
//! decision, a pinned `--dl-plan`, or the estimator run on the node, always
//! for the GPUs actually granted.
use crate::args::PluginArgs;
use crate::env::{first_host, master_port, StepInfo};
use crate::error::SpankError;
use crate::plan_file::{InjectedPlan, PLAN_FILE_VERSION};
use cellsched_core::estimator::{Estimator, JobSpec};
use cellsched_core::freezing::FreezeSchedule;
use cellsched_core::model::ModelSpec;
use cellsched_core::options::{CellChoice, DlOptions, PlanChoice};
use cellsched_core::{Cell, Decision};
pub use cellsched_core::slurm_text::{gres_conf_gpu_type, slurm_conf_gpu_type};

/// Everything the choice depends on.
pub struct PlanInputs<'a> {
    /// The job's validated DL options (model and batch set).
    pub opts: &'a DlOptions,
    /// The resolved model.
    pub model: &'a ModelSpec,
    /// slurmctld's decision (`CELLSCHED_DECISION`), when known.
    pub decision: Option<&'a Decision>,
    /// The step as seen from this task.
    pub step: &'a StepInfo,
    /// GPU type read from the job's GRES request, if typed.
    pub gres_gpu_type: Option<String>,
    /// Site defaults.
    pub args: &'a PluginArgs,
}

/// The GPU type: decision, pinned Cell, typed GRES request, site default.
pub fn gpu_type(i: &PlanInputs) -> Result<String, SpankError> {
    if let Some(d) = i.decision {
        return Ok(d.cell.gpu_type.clone());
    }
    if let CellChoice::Pinned(c) = &i.opts.cell {
        return Ok(c.gpu_type.clone());
    }
    i.gres_gpu_type.clone().or_else(|| i.args.default_gpu_type.clone()).ok_or_else(|| {
        SpankError::Allocation(
            "GPU type unknown: no slurmctld decision, no --dl-cell, no typed GPU request and no \
             default_gpu_type= plugstack argument"
                .into(),
        )
    })
}

/// Chooses the plan for the granted GPUs (see the module doc).
pub fn choose(i: &PlanInputs, est: &Estimator) -> Result<InjectedPlan, SpankError> {
    let granted = i.step.gpus_granted();
    if granted == 0 {
        return Err(SpankError::Allocation(
            "no GPUs granted to this step (SLURM_GPUS_ON_NODE / CUDA_VISIBLE_DEVICES unset); request GPUs with --gpus or let the job_submit plugin place the job".into(),
        ));
    }
    let gtype = gpu_type(i)?;
    let batch = i.opts.batch.ok_or_else(|| SpankError::Allocation("--dl-batch missing".into()))?;
    let job = JobSpec { model: i.model.clone(), global_batch: batch };
    let node = i.step.gpus_on_node;
    let (cell, plan, iter_s, source) = match (i.decision, &i.opts.plan) {
        // slurmctld's decision, unless the user pinned another plan (a pinned plan is honoured or refused).
        (Some(d), PlanChoice::Auto) if d.cell.gpus == granted && d.plan.gpus() == granted => {
            (d.cell.clone(), d.plan, Some(d.iter_s), "decision")
        }
        (Some(d), PlanChoice::Pinned(p)) if d.cell.gpus == granted && d.plan == *p => {
            (d.cell.clone(), d.plan, Some(d.iter_s), "decision")
        }
        (_, PlanChoice::Pinned(p)) => {
            if p.gpus() != granted {
                return Err(SpankError::Allocation(format!(
                    "--dl-plan={p} uses dp*tp*pp = {} GPUs but the step was granted {granted} ({} node(s) x {node})",
                    p.gpus(),
                    i.step.nnodes
                )));
            }
            let cell = Cell::new(&gtype, granted, p.pp)?;
            let iter = est.estimate_plan(&job, &cell, node, p).ok().map(|e| e.iter_time_s);
            (cell, *p, iter, "pinned")
        }
        _ => {
            let stages: Vec<u32> = match &i.opts.cell {
                CellChoice::Pinned(c) if c.gpus == granted => vec![c.stages],
                _ => (1..=granted).filter(|s| granted % s == 0).collect(),
            };
            let mut best = None;
            let mut last_err = None;
            for s in stages {
                let cell = Cell::new(&gtype, granted, s)?;
                match est.estimate(&job, &cell, node) {
                    Ok(e) => {
                        if best.as_ref().map_or(true, |b: &cellsched_core::estimator::Estimate| e.iter_time_s < b.iter_time_s) {
                            best = Some(e);
                        }
                    }
                    Err(e) => last_err = Some(e),
                }
            }
            let e = best.ok_or_else(|| {
                SpankError::Allocation(format!(
                    "no feasible plan for model {} (batch {batch}) on {granted} x {gtype}: {}",
                    i.model.name,
                    last_err.map(|e| e.to_string()).unwrap_or_default()
                ))
            })?;
            (e.cell, e.plan, Some(e.iter_time_s), "estimated")
        }
    };
    Ok(InjectedPlan {
        version: PLAN_FILE_VERSION,
        job_id: i.step.job_id,
        step: i.step.step_label(),
        model: i.opts.model.clone().unwrap_or_default(),
        global_batch: batch,
        iters: i.opts.iters,
        gpu_type: gtype,
        cell: cell.to_string(),
        nodes: i.step.nnodes,
        gpus_per_node: node,
        gpus: granted,
        plan,
        plan_text: plan.to_string(),
        freeze_mode: i.opts.freeze.to_string(),
        freeze_schedule: FreezeSchedule::for_mode(i.opts.freeze, i.model.layers).to_string(),
        iter_time_s: iter_s,
        source: source.into(),
        master_addr: i.step.first_node.as_deref().and_then(first_host),
        master_port: master_port(i.args.master_port_base, i.step.job_id),
    })
}

/// The GPU type of a typed GPU request in the job environment
/// (`SLURM_GPUS_PER_NODE=a100:4`, `SLURM_TRES_PER_NODE=gres:gpu:a100:4`, ...).
pub fn gres_gpu_type(lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    for key in ["SLURM_GPUS_PER_NODE", "SLURM_GPUS", "SLURM_TRES_PER_NODE", "SLURM_TRES_PER_TASK", "SLURM_JOB_GRES"] {
        let Some(v) = lookup(key) else { continue };
        // `--gpus*` values name no GRES (`a100:4`): read them as `gpu:a100:4`.
        let text = if lookup_is_gpu_key(key) { v.split(',').map(|i| format!("gpu:{}", i.trim())).collect::<Vec<_>>().join(",") } else { v };
        let Some(ty) = cellsched_core::slurm_text::gpu_entries(&text).into_iter().find_map(|(t, _)| t) else { continue };
        if ty.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        return cellsched_core::gpu::canonical_gpu_type(&ty)
            .or_else(|| ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-').then_some(ty));
    }
    None
}

/// Keys whose values are GPU requests without a `gpu:` prefix.
fn lookup_is_gpu_key(key: &str) -> bool {
    key.starts_with("SLURM_GPUS")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::BATCH_STEP_ID;
    use cellsched_core::gpu::GpuCatalog;
    use cellsched_core::model::ModelCatalog;
    use cellsched_core::cell::EstimateSource;
    use std::collections::HashMap;

    fn estimator() -> Estimator {
        Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
    }

    fn step(nnodes: u32, gpus_on_node: u32) -> StepInfo {
        StepInfo {
            job_id: 100,
            step_id: 0,
            nnodes,
            node_id: 0,
            gpus_on_node,
            local_tasks: gpus_on_node,
            total_tasks: gpus_on_node * nnodes,
            local_task_id: 0,
            global_task_id: 0,
            first_node: Some("a100-[1-2]".into()),
        }
    }

    fn opts(extra: &[(&str, &str)]) -> DlOptions {
        let mut o = DlOptions::default();
        let model = ModelCatalog::builtin().names().next().unwrap().to_string();
        o.parse_option("dl-model", &model).unwrap();
        o.parse_option("dl-batch", "64").unwrap();
        for (k, v) in extra {
            o.parse_option(k, v).unwrap();
        }
        o
    }

    fn model(o: &DlOptions) -> ModelSpec {
        ModelCatalog::builtin().resolve(o.model.as_deref().unwrap()).unwrap()
    }

    #[test]
    fn estimated_plan_uses_all_granted_gpus() {
        let o = opts(&[]);
        let m = model(&o);
        let s = step(2, 4);
        let args = PluginArgs { default_gpu_type: Some("a100".into()), ..PluginArgs::default() };
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: None, args: &args };
        let p = choose(&i, &estimator()).unwrap();
        assert_eq!(p.plan.gpus(), 8);
        assert_eq!((p.gpus, p.nodes, p.gpus_per_node), (8, 2, 4));
        assert_eq!(p.source, "estimated");
        assert_eq!(p.gpu_type, "a100");
        assert!(p.cell.starts_with("a100x8x"));
        assert_eq!(p.master_addr.as_deref(), Some("a100-1"));
        assert!(p.iter_time_s.unwrap() > 0.0);
        // The same inputs give the same plan (batch step and srun tasks agree).
        let mut b = s.clone();
        b.step_id = BATCH_STEP_ID;
        b.total_tasks = 1;
        let i2 = PlanInputs { step: &b, ..i };
        let q = choose(&i2, &estimator()).unwrap();
        assert_eq!((q.plan, q.cell.clone(), q.step.as_str()), (p.plan, p.cell.clone(), "batch"));
    }

    #[test]
    fn decision_wins_when_it_matches_the_grant() {
        let o = opts(&[("dl-freeze", "auto")]);
        let m = model(&o);
        let s = step(1, 4);
        let d = Decision {
            cell: Cell::new("v100", 4, 2).unwrap(),
            nodes: 1,
            plan: "dp=1,tp=2,pp=2,mb=8,zero=1,ckpt=on".parse().unwrap(),
            iter_s: 0.5,
            source: EstimateSource::Datasheet,
        };
        let args = PluginArgs::default();
        let i = PlanInputs { opts: &o, model: &m, decision: Some(&d), step: &s, gres_gpu_type: Some("a100".into()), args: &args };
        let p = choose(&i, &estimator()).unwrap();
        assert_eq!((p.plan, p.cell.as_str(), p.source.as_str(), p.gpu_type.as_str()), (d.plan, "v100x4x2", "decision", "v100"));
        assert_eq!(p.iter_time_s, Some(0.5));
        assert!(!p.freeze_schedule.is_empty(), "freeze auto gives a schedule");
        // A step granted a different GPU count is re-planned on the same type.
        let s2 = step(1, 2);
        let p2 = choose(&PlanInputs { step: &s2, ..i }, &estimator()).unwrap();
        assert_eq!((p2.plan.gpus(), p2.source.as_str(), p2.gpu_type.as_str()), (2, "estimated", "v100"));
    }

    #[test]
    fn pinned_plan_must_match_grant() {
        let o = opts(&[("dl-plan", "dp=2,tp=2,pp=1")]);
        let m = model(&o);
        let args = PluginArgs::default();
        let s = step(1, 4);
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: Some("a100".into()), args: &args };
        let p = choose(&i, &estimator()).unwrap();
        assert_eq!((p.plan.dp, p.plan.tp, p.source.as_str()), (2, 2, "pinned"));
        let s8 = step(2, 4);
        let e = choose(&PlanInputs { step: &s8, ..i }, &estimator()).unwrap_err().to_string();
        assert!(e.contains("dp*tp*pp = 4") && e.contains("granted 8"), "{e}");
        // A decision with another plan never replaces the pinned one; the same plan is the decision.
        let other = Decision {
            cell: Cell::new("a100", 4, 1).unwrap(),
            nodes: 1,
            plan: "dp=4,tp=1,pp=1".parse().unwrap(),
            iter_s: 0.5,
            source: EstimateSource::Datasheet,
        };
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: Some("a100".into()), args: &args };
        let q = choose(&PlanInputs { decision: Some(&other), gres_gpu_type: None, ..i }, &estimator()).unwrap();
        assert_eq!((q.plan.dp, q.plan.tp, q.source.as_str()), (2, 2, "pinned"));
        let same = Decision { plan: "dp=2,tp=2,pp=1".parse().unwrap(), ..other };
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: Some("a100".into()), args: &args };
        let r = choose(&PlanInputs { decision: Some(&same), ..i }, &estimator()).unwrap();
        assert_eq!((r.plan.dp, r.plan.tp, r.source.as_str()), (2, 2, "decision"));
    }

    #[test]
    fn errors_without_gpus_or_type() {
        let o = opts(&[]);
        let m = model(&o);
        let args = PluginArgs::default();
        let s0 = step(1, 0);
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s0, gres_gpu_type: None, args: &args };
        assert!(choose(&i, &estimator()).unwrap_err().to_string().contains("no GPUs granted"));
        let s = step(1, 4);
        let e = choose(&PlanInputs { step: &s, ..i }, &estimator()).unwrap_err().to_string();
        assert!(e.contains("GPU type unknown") && e.contains("default_gpu_type"), "{e}");
    }

    #[test]
    fn typed_gres_requests() {
        let t = |pairs: &[(&str, &str)]| {
            let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            gres_gpu_type(&|k: &str| m.get(k).cloned())
        };
        assert_eq!(t(&[("SLURM_GPUS_PER_NODE", "a100:4")]).as_deref(), Some("a100"));
        assert_eq!(t(&[("SLURM_TRES_PER_NODE", "gres:gpu:v100:8")]).as_deref(), Some("v100"));
        assert_eq!(t(&[("SLURM_TRES_PER_NODE", "gres/gpu:a10=4")]).as_deref(), Some("a10"));
        assert_eq!(t(&[("SLURM_GPUS_PER_NODE", "4")]), None);
        assert_eq!(t(&[("SLURM_TRES_PER_NODE", "gres:gpu:4")]), None);
        assert_eq!(t(&[("SLURM_TRES_PER_NODE", "gres:mps:100")]), None);
        assert_eq!(t(&[]), None);
    }
}
