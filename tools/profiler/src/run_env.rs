//! The plan a profiled run uses and the environment it gets. The plan and
//! launcher variables come from [`cellsched_core::plan_env`], the function the
//! SPANK plugin uses for a job's launcher, here for one node in launcher mode:
//! `CELLSCHED_GPU_TYPE`, `CELLSCHED_CELL`, `CELLSCHED_NODES=1`,
//! `CELLSCHED_GPUS`, `CELLSCHED_DP/TP/PP/MICRO_BATCHES/ZERO_STAGE/CHECKPOINTING`,
//! `CELLSCHED_GLOBAL_BATCH`, `CELLSCHED_FREEZE_MODE=off` (no schedule),
//! `CELLSCHED_PLAN_SOURCE`, `CELLSCHED_ITER_TIME_S` (the estimate, when
//! known), `WORLD_SIZE` = `LOCAL_WORLD_SIZE` = GPUs, `NODE_RANK=0`,
//! `MASTER_ADDR=127.0.0.1`, `MASTER_PORT`. The profiler adds
//! `CELLSCHED_DL_MODEL`, `CELLSCHED_DL_BATCH`, `CELLSCHED_PROFILE=1` and
//! `CUDA_VISIBLE_DEVICES=0..N-1` unless already set (inside a Slurm step it is).
use crate::error::ProfilerError;
use cellsched_core::estimator::{Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::options::DlKey;
use cellsched_core::plan_env::{
    choose_plan as core_choose_plan, plan_env as core_plan_env, PlanChoiceError, PlanEnv, PlanRequest, PlanSource, Workers,
};
use cellsched_core::{Cell, Plan};

/// What is profiled: model, batch and the plan on `gpus` GPUs of one node.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProfilePlan {
    /// Model name as given.
    pub model: String,
    /// Global batch.
    pub batch: u32,
    /// Canonical GPU type (or the name given).
    pub gpu_type: String,
    /// GPUs on the one node.
    pub gpus: u32,
    /// The plan.
    pub plan: Plan,
    /// The estimator's predicted seconds per iteration for this plan.
    pub estimate_s: Option<f64>,
    /// Where the plan came from: `pinned`, `estimator` or `default`.
    pub plan_source: &'static str,
}

/// The GPU type key recorded for a user or NVML name: the catalog's type
/// (`Tesla V100-SXM2-16GB` → `v100`; a site's `estimator.gpu_catalog` types
/// and aliases included), else the name lower-cased with every other
/// character than letters, digits, `_`, `-` turned into `_`.
pub fn gpu_type_key(gpus: &GpuCatalog, name: &str) -> String {
    gpus.canonical(name).unwrap_or_else(|| {
        name.trim()
            .to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    })
}

/// Builds the plan by the rule the SPANK plugin uses for a job's tasks
/// ([`cellsched_core::plan_env::choose_plan`]): a pinned `--plan` (must use
/// exactly `gpus` GPUs), else the estimator's best plan for the model on
/// these GPUs over every stage count, else plain data parallelism
/// `dp=gpus` (the estimator needs the model and GPU in its catalogs; `note`
/// receives why it was not used). `est` is the site's estimator
/// (`Estimator::from_config`).
pub fn choose_plan(
    est: &Estimator,
    model: &str,
    batch: u32,
    gpu_type: &str,
    gpus: u32,
    pinned: Option<Plan>,
    mut note: impl FnMut(String),
) -> Result<ProfilePlan, ProfilerError> {
    if gpus == 0 {
        return Err(ProfilerError::invalid(
            "--gpus",
            "0",
            "a positive GPU count",
        ));
    }
    if batch == 0 {
        return Err(ProfilerError::invalid(
            "--batch",
            "0",
            "a positive global batch",
        ));
    }
    let gpu_type = gpu_type_key(est.gpu_catalog(), gpu_type);
    let job = est.model_catalog().resolve(model).map(|m| JobSpec {
        model: m,
        global_batch: batch,
    });
    let request = PlanRequest {
        job: job.as_ref().ok(),
        gpu_type: &gpu_type,
        gpus,
        gpus_per_node: gpus,
        pinned_plan: pinned.as_ref(),
        pinned_cell: None,
        decision: None,
    };
    let mk = |plan: Plan, estimate_s: Option<f64>, plan_source| ProfilePlan {
        model: model.to_string(),
        batch,
        gpu_type: gpu_type.clone(),
        gpus,
        plan,
        estimate_s,
        plan_source,
    };
    match core_choose_plan(est, &request) {
        Ok(c) => {
            let source = match c.source {
                PlanSource::Pinned => "pinned",
                PlanSource::Estimated | PlanSource::Decision => "estimator",
            };
            Ok(mk(c.plan, c.iter_time_s, source))
        }
        Err(PlanChoiceError::PinnedSize { plan, gpus }) => Err(ProfilerError::invalid(
            "--plan",
            plan.to_string(),
            format!("dp*tp*pp = --gpus ({gpus})"),
        )),
        Err(PlanChoiceError::Cell(e)) => Err(ProfilerError::invalid(
            "GPU type / plan",
            format!("{gpu_type} x{gpus}"),
            e.to_string(),
        )),
        Err(e) => {
            let why = match (&job, e) {
                (Err(unknown), _) => unknown.to_string(),
                (Ok(_), e) => e.to_string(),
            };
            note(format!("estimator has no plan ({why}); using dp={gpus}"));
            Ok(mk(
                Plan {
                    dp: gpus,
                    ..Plan::default()
                },
                None,
                "default",
            ))
        }
    }
}

/// Base of `MASTER_PORT` for profiled runs.
pub const MASTER_PORT: u16 = 29_500;

/// The environment of the profiled command (see the module doc): core's
/// plan and launcher variables for one node in launcher mode (the same
/// function the SPANK plugin uses), plus the profiler's own.
pub fn plan_env(p: &ProfilePlan, cuda_visible_set: bool) -> Vec<(String, String)> {
    let cell = Cell {
        gpu_type: p.gpu_type.clone(),
        gpus: p.gpus,
        stages: p.plan.pp.max(1),
    }
    .to_string();
    let mut v = core_plan_env(&PlanEnv {
        gpu_type: &p.gpu_type,
        cell: &cell,
        nodes: 1,
        gpus: p.gpus,
        gpus_per_node: p.gpus,
        plan: &p.plan,
        global_batch: p.batch,
        freeze_mode: "off",
        freeze_schedule: None,
        iter_time_s: p.estimate_s,
        source: p.plan_source,
        workers: Workers::Launcher,
        node_rank: 0,
        master_addr: Some("127.0.0.1"),
        master_port: MASTER_PORT,
    });
    v.push((DlKey::Model.env_key(), p.model.clone()));
    v.push((DlKey::Batch.env_key(), p.batch.to_string()));
    v.push(("CELLSCHED_PROFILE", "1".into()));
    let mut out: Vec<(String, String)> = v.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    if !cuda_visible_set {
        let ids: Vec<String> = (0..p.gpus).map(|i| i.to_string()).collect();
        out.push(("CUDA_VISIBLE_DEVICES".into(), ids.join(",")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn est() -> Estimator {
        Estimator::from_config(&Default::default(), None).estimator
    }

    #[test]
    fn a_sites_own_gpu_type_is_recorded_under_its_key() {
        let site = Estimator::builder(&Default::default())
            .gpu_overrides("site gpus.toml", "[gpu.acme9000]\nfp16_tflops = 989\nfp32_tflops = 67\ntf32_tflops = 494.5\nmem_gib = 80\nmem_bw_gbs = 3350\nintra_link = \"nvlink\"\nintra_node_gbs = 450\ninter_node_gbs = 50\ngpus_per_node = 8\naliases = [\"Acme Tensor 9000\"]\n".into())
            .assemble();
        assert!(site.problems.is_empty(), "{:?}", site.problems);
        assert_eq!(gpu_type_key(site.estimator.gpu_catalog(), "Acme Tensor 9000 PCIe"), "acme9000");
        assert_eq!(gpu_type_key(&GpuCatalog::builtin(), "Acme Tensor 9000 PCIe"), "acme_tensor_9000_pcie", "the built-in catalog lacks it");
        let pp = choose_plan(&site.estimator, "gpt2", 8, "Acme Tensor 9000 PCIe", 2, None, |_| {}).unwrap();
        assert_eq!((pp.gpu_type.as_str(), pp.plan_source), ("acme9000", "estimator"));
    }

    #[test]
    fn pinned_plan_must_use_the_gpus() {
        let p: Plan = "dp=2,tp=2,pp=1".parse().unwrap();
        let pp = choose_plan(&est(), "no-such-model", 8, "a100", 4, Some(p), |_| {}).unwrap();
        assert_eq!(
            (pp.plan, pp.plan_source, pp.estimate_s),
            (p, "pinned", None)
        );
        let e = choose_plan(&est(), "gpt2", 8, "a100", 8, Some(p), |_| {}).unwrap_err();
        assert!(
            e.to_string().contains("--plan") && e.exit_code() == 2,
            "{e}"
        );
        assert!(choose_plan(&est(), "gpt2", 8, "a100", 0, None, |_| {}).is_err());
        assert!(choose_plan(&est(), "gpt2", 0, "a100", 1, None, |_| {}).is_err());
    }

    #[test]
    fn unknown_model_falls_back_to_data_parallel() {
        let mut notes = Vec::new();
        let pp = choose_plan(&est(), "my-private-net", 32, "a100", 4, None, |n| notes.push(n)).unwrap();
        assert_eq!(
            (pp.plan.dp, pp.plan.tp, pp.plan.pp, pp.plan_source),
            (4, 1, 1, "default")
        );
        assert!(notes[0].contains("my-private-net"), "{notes:?}");
    }

    #[test]
    fn gpu_names_become_keys() {
        assert_eq!(gpu_type_key(&GpuCatalog::builtin(), "Tesla V100-SXM2-16GB"), "v100");
        assert_eq!(gpu_type_key(&GpuCatalog::builtin(), "NVIDIA A100-SXM4-80GB"), "a100");
        assert_eq!(gpu_type_key(&GpuCatalog::builtin(), "Acme Tensor 9000"), "acme_tensor_9000");
        let pp = choose_plan(&est(), "x", 8, "Tesla V100-SXM2-16GB", 2, None, |_| {}).unwrap();
        assert_eq!(pp.gpu_type, "v100");
    }

    /// gpt2, batch 16, on v100 x4 with `plan`, estimated at 0.5 s.
    fn sample(plan: &str) -> ProfilePlan {
        ProfilePlan {
            model: "gpt2".into(),
            batch: 16,
            gpu_type: "v100".into(),
            gpus: 4,
            plan: plan.parse().unwrap(),
            estimate_s: Some(0.5),
            plan_source: "pinned",
        }
    }

    #[test]
    fn env_mirrors_the_spank_keys() {
        let pp = sample("dp=1,tp=2,pp=2,mb=4");
        let env: HashMap<String, String> = plan_env(&pp, false).into_iter().collect();
        assert_eq!(env["CELLSCHED_CELL"], "v100x4x2");
        assert_eq!(env["CELLSCHED_TP"], "2");
        assert_eq!(env["CELLSCHED_MICRO_BATCHES"], "4");
        assert_eq!(env["WORLD_SIZE"], "4");
        assert_eq!(env["CELLSCHED_ITER_TIME_S"], "0.500000");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
        assert!(!plan_env(&pp, true)
            .iter()
            .any(|(k, _)| k == "CUDA_VISIBLE_DEVICES"));
    }

    /// The complete exported set, key by key (the variables shared with the
    /// SPANK plugin come from core; the profiler adds its own).
    #[test]
    fn exported_set_is_exact() {
        let pp = sample("dp=1,tp=2,pp=2,mb=4,zero=1,ckpt=on");
        let mut got = plan_env(&pp, false);
        got.sort();
        let want: Vec<(String, String)> = [
            ("CELLSCHED_CELL", "v100x4x2"),
            ("CELLSCHED_CHECKPOINTING", "1"),
            ("CELLSCHED_DL_BATCH", "16"),
            ("CELLSCHED_DL_MODEL", "gpt2"),
            ("CELLSCHED_DP", "1"),
            ("CELLSCHED_FREEZE_MODE", "off"),
            ("CELLSCHED_GLOBAL_BATCH", "16"),
            ("CELLSCHED_GPUS", "4"),
            ("CELLSCHED_GPU_TYPE", "v100"),
            ("CELLSCHED_ITER_TIME_S", "0.500000"),
            ("CELLSCHED_MICRO_BATCHES", "4"),
            ("CELLSCHED_NODES", "1"),
            ("CELLSCHED_PLAN_SOURCE", "pinned"),
            ("CELLSCHED_PP", "2"),
            ("CELLSCHED_PROFILE", "1"),
            ("CELLSCHED_TP", "2"),
            ("CELLSCHED_ZERO_STAGE", "1"),
            ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("NODE_RANK", "0"),
            ("WORLD_SIZE", "4"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        let unestimated = ProfilePlan {
            estimate_s: None,
            ..pp
        };
        assert!(!plan_env(&unestimated, true)
            .iter()
            .any(|(k, _)| k == "CELLSCHED_ITER_TIME_S"));
    }
}
