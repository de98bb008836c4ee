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
use cellsched_core::plan_env::{choose_plan, PlanChoiceError, PlanRequest};
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
    /// The step runs the work the decision was made for (the model and
    /// batch recorded with it); `false` sets the decision's plan aside
    /// (its GPU type still applies).
    pub same_work: bool,
    /// The job's Cell (its decision's, else its own `--dl-cell`), which every
    /// step inherits; a step's other pinned Cell must match its grant.
    pub job_cell: Option<&'a Cell>,
    /// A job array's GPU types from its record (`types=`; empty for other
    /// jobs): a task granted one of them is planned here without a warning.
    pub array_types: &'a [String],
    /// Site defaults.
    pub args: &'a PluginArgs,
}

/// How slurmctld's decision relates to the GPU type granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantCheck {
    /// No decision, or the grant's type is unknown or the decision's.
    Matches,
    /// A job array task granted another of its array's types: planned here.
    ArrayType {
        /// The decision's GPU type.
        decided: String,
        /// The granted GPU type.
        granted: String,
    },
    /// The decision is for another GPU type than granted (an admin's edit of
    /// the job's features, for instance): set aside, the plan is made here.
    Stale {
        /// The decision's GPU type.
        decided: String,
        /// The granted GPU type.
        granted: String,
    },
}

impl GrantCheck {
    /// The message for the task's log and, when the decision was stale,
    /// `CELLSCHED_ERROR`; `None` when the decision matches.
    pub fn note(&self) -> Option<String> {
        match self {
            GrantCheck::Matches => None,
            GrantCheck::ArrayType { decided, granted } => Some(format!(
                "array task granted {granted} GPUs (one of its array's types; the decision is for {decided}): plan made on the node for the GPUs granted"
            )),
            GrantCheck::Stale { decided, granted } => Some(format!(
                "the job's decision is for {decided} GPUs but this step was granted {granted} GPUs: re-planned on the node for the GPUs granted"
            )),
        }
    }
}

/// Compares the decision's GPU type with the grant's (from Slurm: the typed
/// request or the node's configuration), catalog spellings compared.
pub fn check_grant(i: &PlanInputs) -> GrantCheck {
    let (Some(d), Some(g)) = (i.decision, i.gres_gpu_type.as_deref()) else { return GrantCheck::Matches };
    let (decided, granted) = (canonical(&d.cell.gpu_type), canonical(g));
    if decided == granted {
        GrantCheck::Matches
    } else if i.array_types.iter().any(|t| canonical(t) == granted) {
        GrantCheck::ArrayType { decided, granted }
    } else {
        GrantCheck::Stale { decided, granted }
    }
}

/// The decision when it was made for the GPU type granted ([`check_grant`]).
fn decision_for_grant<'a>(i: &PlanInputs<'a>) -> Option<&'a Decision> {
    i.decision.filter(|_| check_grant(i) == GrantCheck::Matches)
}

/// The GPU type: granted by Slurm when known and not the decision's (see
/// [`check_grant`]), else the decision's, pinned Cell, typed GRES request,
/// site default.
pub fn gpu_type(i: &PlanInputs) -> Result<String, SpankError> {
    if let Some(d) = decision_for_grant(i) {
        return Ok(d.cell.gpu_type.clone());
    }
    if let (Some(_), Some(g)) = (i.decision, i.gres_gpu_type.as_ref()) {
        return Ok(g.clone());
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

/// The type of the GPUs granted, when known from Slurm (the typed request
/// or the node's configuration, else the decision), never from `--dl-cell`.
fn granted_gpu_type(i: &PlanInputs) -> Option<String> {
    i.gres_gpu_type.clone().or_else(|| i.decision.map(|d| d.cell.gpu_type.clone()))
}

/// A GPU type name in the catalog's spelling (as Cells hold them).
fn canonical(t: &str) -> String {
    cellsched_core::gpu::canonical_gpu_type(t).unwrap_or_else(|| t.to_ascii_lowercase())
}

/// Refuses a pinned `--dl-cell` the step's grant cannot honour: another GPU
/// type than granted, or (unless it is the job's own Cell, inherited by
/// every step) another GPU count.
fn check_pinned_cell(i: &PlanInputs, granted: u32) -> Result<(), SpankError> {
    let CellChoice::Pinned(c) = &i.opts.cell else { return Ok(()) };
    if let Some(t) = granted_gpu_type(i) {
        if canonical(&c.gpu_type) != canonical(&t) {
            return Err(SpankError::StepRefused(format!(
                "--dl-cell={c} asks for {} GPUs but this step runs on {t} GPUs; drop --dl-cell or submit a job on {} GPUs",
                c.gpu_type, c.gpu_type
            )));
        }
    }
    let inherited = i.job_cell.is_some_and(|j| j.gpus == c.gpus && canonical(&j.gpu_type) == canonical(&c.gpu_type));
    if c.gpus != granted && !inherited {
        return Err(SpankError::StepRefused(format!(
            "--dl-cell={c} asks for {} GPUs but the step was granted {granted} ({} node(s) x {}); request them with srun's --gpus options",
            c.gpus, i.step.nnodes, i.step.gpus_on_node
        )));
    }
    Ok(())
}

/// Chooses the plan for the granted GPUs (see the module doc).
pub fn choose(i: &PlanInputs, est: &Estimator) -> Result<InjectedPlan, SpankError> {
    let granted = i.step.gpus_granted();
    if granted == 0 {
        return Err(SpankError::Allocation(
            "no GPUs granted to this step (SLURM_GPUS_ON_NODE / CUDA_VISIBLE_DEVICES unset); request GPUs with --gpus or let the job_submit plugin place the job".into(),
        ));
    }
    check_pinned_cell(i, granted)?;
    let gtype = gpu_type(i)?;
    let batch = i.opts.batch.ok_or_else(|| SpankError::Allocation("--dl-batch missing".into()))?;
    let job = JobSpec { model: i.model.clone(), global_batch: batch };
    let node = i.step.gpus_on_node;
    let pinned_plan = match &i.opts.plan {
        PlanChoice::Pinned(p) => Some(p),
        PlanChoice::Auto => None,
    };
    let pinned_cell = match &i.opts.cell {
        CellChoice::Pinned(c) => Some(c),
        _ => None,
    };
    let request = PlanRequest {
        job: Some(&job),
        gpu_type: &gtype,
        gpus: granted,
        gpus_per_node: node,
        pinned_plan,
        pinned_cell,
        decision: decision_for_grant(i).filter(|_| i.same_work),
    };
    let chosen = choose_plan(est, &request).map_err(|e| match e {
        PlanChoiceError::PinnedSize { plan, gpus } => SpankError::StepRefused(format!(
            "--dl-plan={plan} uses dp*tp*pp = {} GPUs but the step was granted {gpus} ({} node(s) x {node})",
            plan.gpus(),
            i.step.nnodes
        )),
        PlanChoiceError::NoPlan(why) => SpankError::StepRefused(format!(
            "no feasible plan for model {} (batch {batch}) on {granted} x {gtype}: {}",
            i.model.name,
            why.map(|e| e.to_string()).unwrap_or_default()
        )),
        PlanChoiceError::Cell(e) => SpankError::Core(e),
        PlanChoiceError::NoGpus => SpankError::Allocation("no GPUs granted to this step".into()),
    })?;
    let (cell, plan, iter_s, source) = (chosen.cell, chosen.plan, chosen.iter_time_s, chosen.source.as_str());
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
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: None, args: &args, same_work: true, job_cell: None, array_types: &[] };
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
        let i = PlanInputs { opts: &o, model: &m, decision: Some(&d), step: &s, gres_gpu_type: Some("v100".into()), args: &args, same_work: true, job_cell: None, array_types: &[] };
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
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: Some("a100".into()), args: &args, same_work: true, job_cell: None, array_types: &[] };
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
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: Some("a100".into()), args: &args, same_work: true, job_cell: None, array_types: &[] };
        let q = choose(&PlanInputs { decision: Some(&other), gres_gpu_type: None, ..i }, &estimator()).unwrap();
        assert_eq!((q.plan.dp, q.plan.tp, q.source.as_str()), (2, 2, "pinned"));
        let same = Decision { plan: "dp=2,tp=2,pp=1".parse().unwrap(), ..other };
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s, gres_gpu_type: Some("a100".into()), args: &args, same_work: true, job_cell: None, array_types: &[] };
        let r = choose(&PlanInputs { decision: Some(&same), ..i }, &estimator()).unwrap();
        assert_eq!((r.plan.dp, r.plan.tp, r.source.as_str()), (2, 2, "decision"));
    }

    /// Issue 31 item 2: a decision for another GPU type than granted is set
    /// aside: the plan, its type and its Cell are the grant's; an array
    /// task on one of its array's types is planned the same way, quietly.
    #[test]
    fn a_decision_for_another_gpu_type_is_replanned_for_the_grant() {
        let o = opts(&[]);
        let m = model(&o);
        let args = PluginArgs::default();
        let s = step(1, 4);
        let d = Decision { cell: Cell::new("a100", 4, 1).unwrap(), nodes: 1, plan: "dp=4,tp=1,pp=1".parse().unwrap(), iter_s: 0.01, source: EstimateSource::Datasheet };
        let i = PlanInputs { opts: &o, model: &m, decision: Some(&d), step: &s, gres_gpu_type: Some("v100".into()), args: &args, same_work: true, job_cell: Some(&d.cell), array_types: &[] };
        assert!(matches!(check_grant(&i), GrantCheck::Stale { ref decided, ref granted } if decided == "a100" && granted == "v100"));
        assert!(check_grant(&i).note().unwrap().contains("re-planned"));
        let p = choose(&i, &estimator()).unwrap();
        assert_eq!((p.gpu_type.as_str(), p.cell.as_str(), p.source.as_str()), ("v100", "v100x4x1", "estimated"));
        assert_ne!(p.iter_time_s, Some(d.iter_s), "not the a100 decision's time");
        // The same type in another spelling matches.
        let same = PlanInputs { gres_gpu_type: Some("A100".into()), ..i };
        assert_eq!(check_grant(&same), GrantCheck::Matches);
        assert_eq!(choose(&same, &estimator()).unwrap().source, "decision");
        // An array task on one of its types.
        let set = vec!["a100".to_string(), "v100".to_string()];
        let arr = PlanInputs { array_types: &set, ..i };
        assert!(matches!(check_grant(&arr), GrantCheck::ArrayType { .. }));
        assert_eq!(choose(&arr, &estimator()).unwrap().cell, "v100x4x1");
        // Grant type unknown: the decision stands.
        let unknown = PlanInputs { gres_gpu_type: None, ..i };
        assert_eq!(check_grant(&unknown), GrantCheck::Matches);
        assert_eq!(choose(&unknown, &estimator()).unwrap().source, "decision");
    }

    #[test]
    fn a_step_with_other_work_gets_its_own_plan_or_is_refused() {
        let o = opts(&[]);
        let m = model(&o);
        let s = step(1, 4);
        let d = Decision {
            cell: Cell::new("a100", 4, 1).unwrap(),
            nodes: 1,
            plan: "dp=4,tp=1,pp=1,zero=2".parse().unwrap(),
            iter_s: 0.5,
            source: EstimateSource::Datasheet,
        };
        let args = PluginArgs::default();
        let i = PlanInputs { opts: &o, model: &m, decision: Some(&d), step: &s, gres_gpu_type: None, args: &args, same_work: false, job_cell: None, array_types: &[] };
        let p = choose(&i, &estimator()).unwrap();
        assert_eq!((p.source.as_str(), p.gpu_type.as_str(), p.gpus), ("estimated", "a100", 4), "the decision's type, not its plan");
        // A model no plan of which fits the grant: refused, not run without a plan.
        let mut big = opts(&[]);
        big.parse_option("dl-model", "gpt__15B").unwrap();
        big.parse_option("dl-batch", "4096").unwrap();
        let bm = model(&big);
        let one = step(1, 1);
        let e = choose(&PlanInputs { opts: &big, model: &bm, step: &one, ..i }, &estimator()).unwrap_err();
        assert!(matches!(e, SpankError::StepRefused(_)) && e.to_string().contains("no feasible plan"), "{e}");
    }

    #[test]
    fn a_pinned_cell_the_grant_cannot_honour_is_refused() {
        let args = PluginArgs::default();
        let s = step(1, 4);
        let d = Decision {
            cell: Cell::new("a100", 4, 1).unwrap(),
            nodes: 1,
            plan: "dp=4,tp=1,pp=1".parse().unwrap(),
            iter_s: 0.5,
            source: EstimateSource::Datasheet,
        };
        // Another GPU type than granted (decision's or typed request's).
        let o = opts(&[("dl-cell", "a10x1")]);
        let m = model(&o);
        let i = PlanInputs { opts: &o, model: &m, decision: Some(&d), step: &s, gres_gpu_type: None, args: &args, same_work: true, job_cell: Some(&d.cell), array_types: &[] };
        let e = choose(&i, &estimator()).unwrap_err();
        assert!(matches!(e, SpankError::StepRefused(_)) && e.to_string().contains("runs on a100"), "{e}");
        let e = choose(&PlanInputs { decision: None, gres_gpu_type: Some("a100".into()), job_cell: None, ..i }, &estimator()).unwrap_err();
        assert!(e.to_string().contains("--dl-cell=a10x1"), "{e}");
        // Another count than granted: refused, unless it is the job's own Cell.
        let o2 = opts(&[("dl-cell", "a100x2")]);
        let e = choose(&PlanInputs { opts: &o2, gres_gpu_type: None, ..i }, &estimator()).unwrap_err();
        assert!(e.to_string().contains("granted 4"), "{e}");
        let o8 = opts(&[("dl-cell", "a100x8")]);
        let job8 = Cell::new("a100", 8, 1).unwrap();
        let p = choose(&PlanInputs { opts: &o8, decision: None, gres_gpu_type: Some("a100".into()), job_cell: Some(&job8), ..i }, &estimator()).unwrap();
        assert_eq!((p.gpus, p.source.as_str()), (4, "estimated"), "a step of a job pinned to a100x8 with 4 GPUs is re-planned");
        // A pinned Cell that matches the grant is honoured.
        let o4 = opts(&[("dl-cell", "a100x4")]);
        assert!(choose(&PlanInputs { opts: &o4, gres_gpu_type: None, ..i }, &estimator()).is_ok());
    }

    #[test]
    fn errors_without_gpus_or_type() {
        let o = opts(&[]);
        let m = model(&o);
        let args = PluginArgs::default();
        let s0 = step(1, 0);
        let i = PlanInputs { opts: &o, model: &m, decision: None, step: &s0, gres_gpu_type: None, args: &args, same_work: true, job_cell: None, array_types: &[] };
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
