//! Pure computation of what a task sees: the step's shape read from the job
//! environment, and the `CELLSCHED_*` / launcher variables for one task.
use crate::plan_file::InjectedPlan;
use cellsched_core::plan_env::{plan_env, PlanEnv, Workers};

/// Slurm's step id for the batch script step (`SLURM_BATCH_SCRIPT`).
pub const BATCH_STEP_ID: u32 = 0xffff_fffb;

/// The shape of the step as seen from one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepInfo {
    /// Slurm job id.
    pub job_id: u32,
    /// Step id ([`BATCH_STEP_ID`] for the batch script).
    pub step_id: u32,
    /// Nodes the plan spans: the step's nodes, or the job's for the batch step.
    pub nnodes: u32,
    /// This node's index in the step.
    pub node_id: u32,
    /// GPUs granted on this node.
    pub gpus_on_node: u32,
    /// Tasks of the step on this node / in total.
    pub local_tasks: u32,
    /// Tasks of the step in total.
    pub total_tasks: u32,
    /// This task's local / global index.
    pub local_task_id: u32,
    /// This task's global index.
    pub global_task_id: u32,
    /// First node of the step (rendezvous host).
    pub first_node: Option<String>,
}

impl StepInfo {
    /// True for the batch script step.
    pub fn is_batch(&self) -> bool {
        self.step_id == BATCH_STEP_ID
    }

    /// GPUs granted to the plan: per-node GPUs times nodes (Cells are
    /// homogeneous: one GPU type, the same count on each node).
    pub fn gpus_granted(&self) -> u32 {
        self.gpus_on_node.saturating_mul(self.nnodes)
    }

    /// Step label used in file names and the plan file: `batch` or the id.
    pub fn step_label(&self) -> String {
        if self.is_batch() {
            "batch".into()
        } else {
            self.step_id.to_string()
        }
    }

    /// One process per GPU (tasks == GPUs): the task ids are the ranks.
    /// Otherwise tasks are launchers (torchrun, deepspeed) spawning workers.
    pub fn process_per_gpu(&self) -> bool {
        !self.is_batch() && self.total_tasks == self.gpus_granted() && self.total_tasks > 0
    }
}

/// GPUs on this node from the job environment: `SLURM_GPUS_ON_NODE`, else
/// the entries of `CUDA_VISIBLE_DEVICES`; `None` when neither is usable.
pub fn gpus_on_node(lookup: &dyn Fn(&str) -> Option<String>) -> Option<u32> {
    if let Some(n) = lookup("SLURM_GPUS_ON_NODE").and_then(|v| v.trim().parse::<u32>().ok()) {
        return Some(n);
    }
    let cvd = lookup("CUDA_VISIBLE_DEVICES")?;
    let n = cvd.split(',').filter(|s| !s.trim().is_empty() && !s.contains("NoDevFiles")).count();
    u32::try_from(n).ok()
}

/// Node count of the whole job (for the batch step, where the step spans one
/// node): `SLURM_JOB_NUM_NODES`, else `SLURM_NNODES`.
pub fn job_num_nodes(lookup: &dyn Fn(&str) -> Option<String>) -> Option<u32> {
    ["SLURM_JOB_NUM_NODES", "SLURM_NNODES"]
        .iter()
        .find_map(|k| lookup(k).and_then(|v| v.trim().parse::<u32>().ok()))
        .filter(|n| *n > 0)
}

pub use cellsched_core::slurm_text::first_host;

/// The per-job rendezvous port: `base + job_id % 2000`.
pub fn master_port(base: u16, job_id: u32) -> u16 {
    base.saturating_add((job_id % 2000) as u16)
}

/// The variables exported to one task: the plan and launcher variables of
/// [`cellsched_core::plan_env`] (shared with `cellsched profile run`), plus
/// `CELLSCHED_PLAN_FILE` when the plan file was written. In process-per-GPU
/// steps `WORLD_SIZE`, `LOCAL_WORLD_SIZE` are the step's task counts and
/// `RANK`, `LOCAL_RANK` the task's; otherwise (batch step, one launcher per
/// node) `WORLD_SIZE` is the GPU count, `LOCAL_WORLD_SIZE` the GPUs per node
/// and `NODE_RANK` the node index, and the launcher assigns `RANK`/`LOCAL_RANK`
/// to its workers.
pub fn task_env(plan: &InjectedPlan, step: &StepInfo, plan_file: Option<&str>) -> Vec<(&'static str, String)> {
    let per_task = step.process_per_gpu();
    let workers = if per_task {
        Workers::PerTask { world_size: step.total_tasks, local_world_size: step.local_tasks }
    } else {
        Workers::Launcher
    };
    let mut v = plan_env(&PlanEnv {
        gpu_type: &plan.gpu_type,
        cell: &plan.cell,
        nodes: plan.nodes,
        gpus: plan.gpus,
        gpus_per_node: plan.gpus_per_node,
        plan: &plan.plan,
        global_batch: plan.global_batch,
        freeze_mode: &plan.freeze_mode,
        freeze_schedule: Some(&plan.freeze_schedule),
        iter_time_s: plan.iter_time_s,
        source: &plan.source,
        workers,
        node_rank: step.node_id,
        master_addr: plan.master_addr.as_deref(),
        master_port: plan.master_port,
    });
    if let Some(f) = plan_file {
        v.push(("CELLSCHED_PLAN_FILE", f.to_string()));
    }
    if per_task {
        v.push(("RANK", step.global_task_id.to_string()));
        v.push(("LOCAL_RANK", step.local_task_id.to_string()));
    }
    v
}

/// Every variable [`task_env`] can set, plus `CELLSCHED_ERROR`: cleared at
/// the start of each DL task, so a step never runs with what the
/// enclosing step was told (the batch script's values reach its `srun`
/// steps through `--export=ALL`).
pub const PLAN_KEYS: [&str; 24] = [
    "CELLSCHED_GPU_TYPE",
    "CELLSCHED_CELL",
    "CELLSCHED_NODES",
    "CELLSCHED_GPUS",
    "CELLSCHED_DP",
    "CELLSCHED_TP",
    "CELLSCHED_PP",
    "CELLSCHED_MICRO_BATCHES",
    "CELLSCHED_ZERO_STAGE",
    "CELLSCHED_CHECKPOINTING",
    "CELLSCHED_GLOBAL_BATCH",
    "CELLSCHED_FREEZE_MODE",
    "CELLSCHED_FREEZE_SCHEDULE",
    "CELLSCHED_PLAN_SOURCE",
    "CELLSCHED_ITER_TIME_S",
    "CELLSCHED_PLAN_FILE",
    "CELLSCHED_ERROR",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_file::tests::sample_plan;
    use std::collections::HashMap;

    fn step(tasks: u32, gpus_on_node: u32, nnodes: u32) -> StepInfo {
        StepInfo {
            job_id: 42,
            step_id: 0,
            nnodes,
            node_id: 1,
            gpus_on_node,
            local_tasks: tasks / nnodes,
            total_tasks: tasks,
            local_task_id: 2,
            global_task_id: 6,
            first_node: Some("a100-1".into()),
        }
    }

    #[test]
    fn gpu_counts_from_env() {
        let env: HashMap<&str, &str> = [("CUDA_VISIBLE_DEVICES", "0,1,3")].into();
        let look = |k: &str| env.get(k).map(|s| s.to_string());
        assert_eq!(gpus_on_node(&look), Some(3));
        let env2: HashMap<&str, &str> = [("CUDA_VISIBLE_DEVICES", "0,1"), ("SLURM_GPUS_ON_NODE", "4")].into();
        assert_eq!(gpus_on_node(&|k: &str| env2.get(k).map(|s| s.to_string())), Some(4));
        assert_eq!(gpus_on_node(&|_: &str| None), None);
        let env3: HashMap<&str, &str> = [("SLURM_NNODES", "2")].into();
        assert_eq!(job_num_nodes(&|k: &str| env3.get(k).map(|s| s.to_string())), Some(2));
    }

    #[test]
    fn process_per_gpu_ranks() {
        let plan = sample_plan();
        let s = step(8, 4, 2);
        assert!(s.process_per_gpu());
        let env: HashMap<_, _> = task_env(&plan, &s, Some("/tmp/x/plan.json")).into_iter().collect();
        assert_eq!(env["WORLD_SIZE"], "8");
        assert_eq!(env["RANK"], "6");
        assert_eq!(env["LOCAL_RANK"], "2");
        assert_eq!(env["LOCAL_WORLD_SIZE"], "4");
        assert_eq!(env["NODE_RANK"], "1");
        assert_eq!(env["CELLSCHED_DP"], "2");
        assert_eq!(env["CELLSCHED_TP"], "2");
        assert_eq!(env["CELLSCHED_PP"], "2");
        assert_eq!(env["CELLSCHED_CHECKPOINTING"], "1");
        assert_eq!(env["CELLSCHED_PLAN_FILE"], "/tmp/x/plan.json");
        assert_eq!(env["MASTER_ADDR"], "a100-1");
        assert_eq!(env["MASTER_PORT"], "29542");
    }

    #[test]
    fn every_variable_a_task_gets_is_cleared_first() {
        let plan = sample_plan();
        for s in [step(8, 4, 2), step(2, 4, 2)] {
            for (k, _) in task_env(&plan, &s, Some("/tmp/x/plan.json")) {
                assert!(PLAN_KEYS.contains(&k), "{k} is not in PLAN_KEYS");
            }
        }
        assert!(PLAN_KEYS.contains(&"CELLSCHED_ERROR"));
    }

    #[test]
    fn launcher_mode_has_no_task_ranks() {
        let plan = sample_plan();
        let mut s = step(2, 4, 2);
        assert!(!s.process_per_gpu());
        let env: HashMap<_, _> = task_env(&plan, &s, None).into_iter().collect();
        assert_eq!(env["WORLD_SIZE"], "8");
        assert_eq!(env["LOCAL_WORLD_SIZE"], "4");
        assert!(!env.contains_key("RANK") && !env.contains_key("LOCAL_RANK") && !env.contains_key("CELLSCHED_PLAN_FILE"));
        s.step_id = BATCH_STEP_ID;
        s.total_tasks = 8;
        assert!(!s.process_per_gpu(), "the batch step is always a launcher");
        assert_eq!(s.step_label(), "batch");
        assert_eq!(master_port(29500, 4000 + 7), 29507);
    }

    /// The complete exported set, key by key, in both modes (guards the
    /// variables shared with `cellsched profile run` through core).
    #[test]
    fn exported_set_is_exact() {
        let plan = sample_plan();
        let mut got = task_env(&plan, &step(8, 4, 2), Some("/p.json"));
        got.sort();
        let want: Vec<(&str, &str)> = vec![
            ("CELLSCHED_CELL", "a100x8x2"),
            ("CELLSCHED_CHECKPOINTING", "1"),
            ("CELLSCHED_DP", "2"),
            ("CELLSCHED_FREEZE_MODE", "off"),
            ("CELLSCHED_FREEZE_SCHEDULE", ""),
            ("CELLSCHED_GLOBAL_BATCH", "64"),
            ("CELLSCHED_GPUS", "8"),
            ("CELLSCHED_GPU_TYPE", "a100"),
            ("CELLSCHED_ITER_TIME_S", "0.250000"),
            ("CELLSCHED_MICRO_BATCHES", "4"),
            ("CELLSCHED_NODES", "2"),
            ("CELLSCHED_PLAN_FILE", "/p.json"),
            ("CELLSCHED_PLAN_SOURCE", "decision"),
            ("CELLSCHED_PP", "2"),
            ("CELLSCHED_TP", "2"),
            ("CELLSCHED_ZERO_STAGE", "1"),
            ("LOCAL_RANK", "2"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("MASTER_ADDR", "a100-1"),
            ("MASTER_PORT", "29542"),
            ("NODE_RANK", "1"),
            ("RANK", "6"),
            ("WORLD_SIZE", "8"),
        ];
        let got_ref: Vec<(&str, &str)> = got.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(got_ref, want);

        let mut plan = sample_plan();
        plan.iter_time_s = None;
        plan.master_addr = None;
        let mut got = task_env(&plan, &step(2, 4, 2), None);
        got.sort();
        let keys: Vec<&str> = got.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "CELLSCHED_CELL",
                "CELLSCHED_CHECKPOINTING",
                "CELLSCHED_DP",
                "CELLSCHED_FREEZE_MODE",
                "CELLSCHED_FREEZE_SCHEDULE",
                "CELLSCHED_GLOBAL_BATCH",
                "CELLSCHED_GPUS",
                "CELLSCHED_GPU_TYPE",
                "CELLSCHED_MICRO_BATCHES",
                "CELLSCHED_NODES",
                "CELLSCHED_PLAN_SOURCE",
                "CELLSCHED_PP",
                "CELLSCHED_TP",
                "CELLSCHED_ZERO_STAGE",
                "LOCAL_WORLD_SIZE",
                "MASTER_PORT",
                "NODE_RANK",
                "WORLD_SIZE",
            ]
        );
    }
}
