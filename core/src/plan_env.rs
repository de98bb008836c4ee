//! The environment a training process is told its plan through: the
//! `CELLSCHED_*` plan variables and the conventional launcher variables
//! (`WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `NODE_RANK`, `MASTER_ADDR`,
//! `MASTER_PORT`). One pure function, used by the SPANK plugin (job tasks)
//! and by `cellsched profile run`, so the two export the same names and
//! values. Callers add their own extras (per-task `RANK`/`LOCAL_RANK`, the
//! plan file path, profiler-only variables).
//!
//! [`choose_plan`] is the rule both use to pick that plan for the GPUs a
//! process was granted: slurmctld's decision when it is for exactly those
//! GPUs, else a pinned plan (which must use all of them), else the
//! estimator's best plan over every stage count the GPUs allow.
use crate::cell::{Cell, Decision, Plan};
use crate::estimator::{Estimator, JobSpec};
use crate::CoreError;

/// How the processes of a step are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// One launcher per node (torchrun, deepspeed) spawns a worker per GPU:
    /// `WORLD_SIZE` is the plan's GPUs, `LOCAL_WORLD_SIZE` the GPUs per node.
    Launcher,
    /// One process per GPU: the sizes are the step's task counts (the caller
    /// adds each task's `RANK`/`LOCAL_RANK`).
    PerTask {
        /// Tasks of the step in total.
        world_size: u32,
        /// Tasks of the step on this node.
        local_world_size: u32,
    },
}

/// What the exported variables describe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanEnv<'a> {
    /// Canonical GPU type (`CELLSCHED_GPU_TYPE`).
    pub gpu_type: &'a str,
    /// Cell text `TYPExGPUSxSTAGES` (`CELLSCHED_CELL`).
    pub cell: &'a str,
    /// Nodes the plan spans (`CELLSCHED_NODES`).
    pub nodes: u32,
    /// GPUs in total (`CELLSCHED_GPUS`).
    pub gpus: u32,
    /// GPUs per node (launcher-mode `LOCAL_WORLD_SIZE`).
    pub gpus_per_node: u32,
    /// The parallel plan (`CELLSCHED_DP/TP/PP/MICRO_BATCHES/ZERO_STAGE/CHECKPOINTING`).
    pub plan: &'a Plan,
    /// Global batch (`CELLSCHED_GLOBAL_BATCH`).
    pub global_batch: u32,
    /// `off`, `conservative` or `auto` (`CELLSCHED_FREEZE_MODE`).
    pub freeze_mode: &'a str,
    /// `PROGRESS:FRACTION,...` (`CELLSCHED_FREEZE_SCHEDULE`); `None` exports
    /// no schedule variable at all.
    pub freeze_schedule: Option<&'a str>,
    /// Predicted seconds per iteration (`CELLSCHED_ITER_TIME_S`, 6 decimals),
    /// exported only when known.
    pub iter_time_s: Option<f64>,
    /// Where the plan came from (`CELLSCHED_PLAN_SOURCE`).
    pub source: &'a str,
    /// Process layout (`WORLD_SIZE`, `LOCAL_WORLD_SIZE`).
    pub workers: Workers,
    /// This node's index (`NODE_RANK`).
    pub node_rank: u32,
    /// Rendezvous host (`MASTER_ADDR`), exported only when known.
    pub master_addr: Option<&'a str>,
    /// Rendezvous port (`MASTER_PORT`).
    pub master_port: u16,
}

/// The plan and launcher variables for `e`, in a fixed order: the
/// `CELLSCHED_*` plan variables, then `WORLD_SIZE`, `LOCAL_WORLD_SIZE`,
/// `NODE_RANK`, `MASTER_ADDR` (when known), `MASTER_PORT`.
pub fn plan_env(e: &PlanEnv) -> Vec<(&'static str, String)> {
    let p = e.plan;
    let mut v: Vec<(&'static str, String)> = vec![
        ("CELLSCHED_GPU_TYPE", e.gpu_type.to_string()),
        ("CELLSCHED_CELL", e.cell.to_string()),
        ("CELLSCHED_NODES", e.nodes.to_string()),
        ("CELLSCHED_GPUS", e.gpus.to_string()),
        ("CELLSCHED_DP", p.dp.to_string()),
        ("CELLSCHED_TP", p.tp.to_string()),
        ("CELLSCHED_PP", p.pp.to_string()),
        ("CELLSCHED_MICRO_BATCHES", p.micro_batches.to_string()),
        ("CELLSCHED_ZERO_STAGE", p.zero_stage.to_string()),
        ("CELLSCHED_CHECKPOINTING", u8::from(p.checkpointing).to_string()),
        ("CELLSCHED_GLOBAL_BATCH", e.global_batch.to_string()),
        ("CELLSCHED_FREEZE_MODE", e.freeze_mode.to_string()),
    ];
    if let Some(s) = e.freeze_schedule {
        v.push(("CELLSCHED_FREEZE_SCHEDULE", s.to_string()));
    }
    v.push(("CELLSCHED_PLAN_SOURCE", e.source.to_string()));
    if let Some(t) = e.iter_time_s {
        v.push(("CELLSCHED_ITER_TIME_S", format!("{t:.6}")));
    }
    let (world, local) = match e.workers {
        Workers::Launcher => (e.gpus, e.gpus_per_node),
        Workers::PerTask { world_size, local_world_size } => (world_size, local_world_size),
    };
    v.push(("WORLD_SIZE", world.to_string()));
    v.push(("LOCAL_WORLD_SIZE", local.to_string()));
    v.push(("NODE_RANK", e.node_rank.to_string()));
    if let Some(a) = e.master_addr {
        v.push(("MASTER_ADDR", a.to_string()));
    }
    v.push(("MASTER_PORT", e.master_port.to_string()));
    v
}

/// Where a chosen plan came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanSource {
    /// slurmctld's decision for the job.
    Decision,
    /// The plan the user pinned.
    Pinned,
    /// The estimator's best plan for the granted GPUs.
    Estimated,
}

impl PlanSource {
    /// `decision`, `pinned` or `estimated` (`CELLSCHED_PLAN_SOURCE`).
    pub fn as_str(self) -> &'static str {
        match self {
            PlanSource::Decision => "decision",
            PlanSource::Pinned => "pinned",
            PlanSource::Estimated => "estimated",
        }
    }
}

/// What a plan is chosen for.
#[derive(Debug, Clone, Copy)]
pub struct PlanRequest<'a> {
    /// The model and global batch; `None` when the model is not in the
    /// estimator's catalog (a pinned plan is then used without an estimate).
    pub job: Option<&'a JobSpec>,
    /// Canonical GPU type of the granted GPUs.
    pub gpu_type: &'a str,
    /// GPUs granted in total.
    pub gpus: u32,
    /// GPUs granted on each node.
    pub gpus_per_node: u32,
    /// A plan the user pinned (`--dl-plan`, `profile run --plan`).
    pub pinned_plan: Option<&'a Plan>,
    /// Pipeline stages of a pinned Cell; used when the Cell's size is
    /// the grant, else every stage count dividing the GPUs is tried.
    pub pinned_cell: Option<&'a Cell>,
    /// slurmctld's decision for the job, when it is for this job's work.
    pub decision: Option<&'a Decision>,
}

/// The plan for a grant.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenPlan {
    /// The Cell the plan runs on (the granted GPUs, the plan's stages).
    pub cell: Cell,
    /// The plan.
    pub plan: Plan,
    /// Predicted seconds per iteration, when known.
    pub iter_time_s: Option<f64>,
    /// Where it came from.
    pub source: PlanSource,
}

/// Why no plan could be chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanChoiceError {
    /// No GPUs were granted.
    NoGpus,
    /// The pinned plan uses another number of GPUs than granted.
    PinnedSize {
        /// The pinned plan.
        plan: Plan,
        /// GPUs granted.
        gpus: u32,
    },
    /// No plan of the model fits the grant (or the model is unknown).
    NoPlan(Option<CoreError>),
    /// The GPU type and count make no Cell.
    Cell(CoreError),
}

impl std::fmt::Display for PlanChoiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanChoiceError::NoGpus => write!(f, "no GPUs granted"),
            PlanChoiceError::PinnedSize { plan, gpus } => {
                write!(f, "plan {plan} uses dp*tp*pp = {} GPUs but {gpus} were granted", plan.gpus())
            }
            PlanChoiceError::NoPlan(Some(e)) => write!(f, "no feasible plan: {e}"),
            PlanChoiceError::NoPlan(None) => write!(f, "no feasible plan: the model is not in the estimator's catalog"),
            PlanChoiceError::Cell(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PlanChoiceError {}

/// The plan for the GPUs of `r` (see the module doc): the decision when its
/// Cell and plan use exactly the granted GPUs and no other plan is pinned;
/// a pinned plan, which must use every granted GPU (estimated when the
/// model is known); else the estimator's fastest plan over the pinned
/// Cell's stages (when the Cell is the grant's size) or every stage count
/// dividing the GPUs.
pub fn choose_plan(est: &Estimator, r: &PlanRequest) -> Result<ChosenPlan, PlanChoiceError> {
    let gpus = r.gpus;
    if gpus == 0 {
        return Err(PlanChoiceError::NoGpus);
    }
    if let Some(d) = r.decision {
        let fits = d.cell.gpus == gpus && d.plan.gpus() == gpus;
        if fits && r.pinned_plan.map_or(true, |p| *p == d.plan) {
            return Ok(ChosenPlan { cell: d.cell.clone(), plan: d.plan, iter_time_s: Some(d.iter_s), source: PlanSource::Decision });
        }
    }
    if let Some(p) = r.pinned_plan {
        if p.gpus() != gpus {
            return Err(PlanChoiceError::PinnedSize { plan: *p, gpus });
        }
        let cell = Cell::new(r.gpu_type, gpus, p.pp).map_err(PlanChoiceError::Cell)?;
        let iter = r.job.and_then(|j| est.estimate_plan(j, &cell, r.gpus_per_node, p).ok()).map(|e| e.iter_time_s);
        return Ok(ChosenPlan { cell, plan: *p, iter_time_s: iter, source: PlanSource::Pinned });
    }
    let Some(job) = r.job else { return Err(PlanChoiceError::NoPlan(None)) };
    let stages: Vec<u32> = match r.pinned_cell {
        Some(c) if c.gpus == gpus => vec![c.stages],
        _ => (1..=gpus).filter(|s| gpus % s == 0).collect(),
    };
    let mut best: Option<crate::estimator::Estimate> = None;
    let mut last_err = None;
    for s in stages {
        let cell = Cell::new(r.gpu_type, gpus, s).map_err(PlanChoiceError::Cell)?;
        match est.estimate(job, &cell, r.gpus_per_node) {
            Ok(e) if best.as_ref().map_or(true, |b| e.iter_time_s < b.iter_time_s) => best = Some(e),
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    let e = best.ok_or(PlanChoiceError::NoPlan(last_err))?;
    Ok(ChosenPlan { cell: e.cell, plan: e.plan, iter_time_s: Some(e.iter_time_s), source: PlanSource::Estimated })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(plan: &Plan) -> PlanEnv<'_> {
        PlanEnv {
            gpu_type: "a100",
            cell: "a100x8x2",
            nodes: 2,
            gpus: 8,
            gpus_per_node: 4,
            plan,
            global_batch: 64,
            freeze_mode: "auto",
            freeze_schedule: Some("0.30:0.25,0.60:0.50"),
            iter_time_s: Some(0.125),
            source: "decision",
            workers: Workers::Launcher,
            node_rank: 1,
            master_addr: Some("a100-1"),
            master_port: 29542,
        }
    }

    #[test]
    fn launcher_mode_exports_every_variable_in_order() {
        let plan: Plan = "dp=2,tp=2,pp=2,mb=4,zero=1,ckpt=on".parse().unwrap();
        let got = plan_env(&sample(&plan));
        let want: Vec<(&str, &str)> = vec![
            ("CELLSCHED_GPU_TYPE", "a100"),
            ("CELLSCHED_CELL", "a100x8x2"),
            ("CELLSCHED_NODES", "2"),
            ("CELLSCHED_GPUS", "8"),
            ("CELLSCHED_DP", "2"),
            ("CELLSCHED_TP", "2"),
            ("CELLSCHED_PP", "2"),
            ("CELLSCHED_MICRO_BATCHES", "4"),
            ("CELLSCHED_ZERO_STAGE", "1"),
            ("CELLSCHED_CHECKPOINTING", "1"),
            ("CELLSCHED_GLOBAL_BATCH", "64"),
            ("CELLSCHED_FREEZE_MODE", "auto"),
            ("CELLSCHED_FREEZE_SCHEDULE", "0.30:0.25,0.60:0.50"),
            ("CELLSCHED_PLAN_SOURCE", "decision"),
            ("CELLSCHED_ITER_TIME_S", "0.125000"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("NODE_RANK", "1"),
            ("MASTER_ADDR", "a100-1"),
            ("MASTER_PORT", "29542"),
        ];
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn per_task_sizes_come_from_the_tasks() {
        let plan: Plan = "dp=8,tp=1,pp=1".parse().unwrap();
        let e = PlanEnv { workers: Workers::PerTask { world_size: 6, local_world_size: 3 }, ..sample(&plan) };
        let got = plan_env(&e);
        let get = |k: &str| got.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!((get("WORLD_SIZE"), get("LOCAL_WORLD_SIZE")), (Some("6"), Some("3")));
        assert_eq!((get("CELLSCHED_CHECKPOINTING"), get("CELLSCHED_ZERO_STAGE")), (Some("0"), Some("0")));
        assert_eq!(get("RANK"), None, "per-task ranks are the caller's");
    }

    #[test]
    fn optional_variables_are_left_out_when_unknown() {
        let plan = Plan::default();
        let e = PlanEnv { freeze_schedule: None, iter_time_s: None, master_addr: None, ..sample(&plan) };
        let keys: Vec<&str> = plan_env(&e).into_iter().map(|(k, _)| k).collect();
        for absent in ["CELLSCHED_FREEZE_SCHEDULE", "CELLSCHED_ITER_TIME_S", "MASTER_ADDR"] {
            assert!(!keys.contains(&absent), "{absent} in {keys:?}");
        }
        assert_eq!(keys.len(), 17, "{keys:?}");
        // An empty schedule is still exported (the SPANK plugin's `none`/empty text).
        let e = PlanEnv { freeze_schedule: Some(""), ..sample(&plan) };
        assert!(plan_env(&e).contains(&("CELLSCHED_FREEZE_SCHEDULE", String::new())));
    }

    fn est() -> Estimator {
        Estimator::new(crate::gpu::GpuCatalog::builtin(), crate::model::ModelCatalog::builtin())
    }

    fn job(model: &str, batch: u32) -> JobSpec {
        JobSpec { model: crate::model::ModelCatalog::builtin().resolve(model).unwrap(), global_batch: batch }
    }

    fn request<'a>(job: Option<&'a JobSpec>, gpus: u32) -> PlanRequest<'a> {
        PlanRequest { job, gpu_type: "a100", gpus, gpus_per_node: gpus.min(8), pinned_plan: None, pinned_cell: None, decision: None }
    }

    #[test]
    fn estimated_plan_is_the_fastest_over_every_stage_count() {
        let j = job("gpt__125M", 64);
        let got = choose_plan(&est(), &request(Some(&j), 8)).unwrap();
        assert_eq!((got.source, got.plan.gpus(), got.cell.gpus), (PlanSource::Estimated, 8, 8));
        for s in [1, 2, 4, 8] {
            let cell = Cell::new("a100", 8, s).unwrap();
            if let Ok(e) = est().estimate(&j, &cell, 8) {
                assert!(got.iter_time_s.unwrap() <= e.iter_time_s, "stages {s} is faster");
            }
        }
        // A pinned Cell of the grant's size fixes the stages.
        let cell = Cell::new("a100", 8, 2).unwrap();
        let pinned = choose_plan(&est(), &PlanRequest { pinned_cell: Some(&cell), ..request(Some(&j), 8) }).unwrap();
        assert_eq!(pinned.cell.stages, 2);
    }

    #[test]
    fn decision_only_for_exactly_the_granted_gpus() {
        let j = job("gpt__125M", 64);
        let d = Decision {
            cell: Cell::new("v100", 4, 2).unwrap(),
            nodes: 1,
            plan: "dp=1,tp=2,pp=2,mb=8".parse().unwrap(),
            iter_s: 0.5,
            source: crate::cell::EstimateSource::Datasheet,
        };
        let r = PlanRequest { decision: Some(&d), ..request(Some(&j), 4) };
        let got = choose_plan(&est(), &r).unwrap();
        assert_eq!((got.source, got.plan, got.iter_time_s), (PlanSource::Decision, d.plan, Some(0.5)));
        // Another grant is estimated; a different pinned plan is honoured; the same one is the decision.
        assert_eq!(choose_plan(&est(), &PlanRequest { gpus: 2, ..r }).unwrap().source, PlanSource::Estimated);
        let other: Plan = "dp=4".parse().unwrap();
        assert_eq!(choose_plan(&est(), &PlanRequest { pinned_plan: Some(&other), ..r }).unwrap().source, PlanSource::Pinned);
        assert_eq!(choose_plan(&est(), &PlanRequest { pinned_plan: Some(&d.plan), ..r }).unwrap().source, PlanSource::Decision);
    }

    #[test]
    fn pinned_plans_must_use_the_grant() {
        let p: Plan = "dp=2,tp=2".parse().unwrap();
        let j = job("gpt__125M", 64);
        let got = choose_plan(&est(), &PlanRequest { pinned_plan: Some(&p), ..request(Some(&j), 4) }).unwrap();
        assert_eq!((got.source, got.plan, got.cell.to_string()), (PlanSource::Pinned, p, "a100x4x1".to_string()));
        let dp: Plan = "dp=4,ckpt=on".parse().unwrap();
        let got = choose_plan(&est(), &PlanRequest { pinned_plan: Some(&dp), ..request(Some(&j), 4) }).unwrap();
        assert!(got.iter_time_s.is_some_and(|t| t > 0.0), "a feasible pinned plan is estimated");
        // Without a known model: used, not estimated.
        let got = choose_plan(&est(), &PlanRequest { pinned_plan: Some(&p), ..request(None, 4) }).unwrap();
        assert_eq!(got.iter_time_s, None);
        let e = choose_plan(&est(), &PlanRequest { pinned_plan: Some(&p), ..request(Some(&j), 8) }).unwrap_err();
        assert_eq!(e, PlanChoiceError::PinnedSize { plan: p, gpus: 8 });
        assert!(e.to_string().contains("dp*tp*pp = 4") && e.to_string().contains("8 were granted"), "{e}");
    }

    #[test]
    fn no_gpus_unknown_model_or_too_big_a_model_is_an_error() {
        let j = job("gpt__125M", 64);
        assert_eq!(choose_plan(&est(), &request(Some(&j), 0)).unwrap_err(), PlanChoiceError::NoGpus);
        assert_eq!(choose_plan(&est(), &request(None, 4)).unwrap_err(), PlanChoiceError::NoPlan(None));
        let big = job("llama7b", 256);
        let e = choose_plan(&est(), &PlanRequest { gpu_type: "t4", ..request(Some(&big), 1) }).unwrap_err();
        assert!(matches!(e, PlanChoiceError::NoPlan(Some(_))), "{e:?}");
    }
}
