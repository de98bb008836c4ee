//! Pure computation of what a task sees: the step's shape read from the job
//! environment, and the `CELLSCHED_*` / launcher variables for one task.
use crate::plan_file::InjectedPlan;

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

/// First host of a Slurm hostlist expression: `a100-[1-2],v100-1` -> `a100-1`,
/// `gpu[07,09]` -> `gpu07`. `None` for an empty or malformed list.
pub fn first_host(hostlist: &str) -> Option<String> {
    let s = hostlist.trim();
    // Split off the first top-level entry (commas inside brackets belong to it).
    let mut depth = 0;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    // Replace each bracket group by its first value.
    let mut host = s[..end].to_string();
    while let Some(open) = host.find('[') {
        let close = host[open..].find(']')? + open;
        let lo = host[open + 1..close].split(',').next()?.split('-').next()?.to_string();
        host = format!("{}{}{}", &host[..open], lo, &host[close + 1..]);
    }
    let ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    ok.then_some(host)
}

/// The per-job rendezvous port: `base + job_id % 2000`.
pub fn master_port(base: u16, job_id: u32) -> u16 {
    base.saturating_add((job_id % 2000) as u16)
}

/// The variables exported to one task: the plan (`CELLSCHED_*`) and the
/// conventional launcher variables. In process-per-GPU steps `RANK`,
/// `LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE` are the task's; otherwise
/// (batch step, one launcher per node) `WORLD_SIZE` is the GPU count,
/// `LOCAL_WORLD_SIZE` the GPUs per node and `NODE_RANK` the node index, and
/// the launcher assigns `RANK`/`LOCAL_RANK` to its workers.
pub fn task_env(plan: &InjectedPlan, step: &StepInfo, plan_file: Option<&str>) -> Vec<(&'static str, String)> {
    let p = &plan.plan;
    let mut v: Vec<(&'static str, String)> = vec![
        ("CELLSCHED_GPU_TYPE", plan.gpu_type.clone()),
        ("CELLSCHED_CELL", plan.cell.clone()),
        ("CELLSCHED_NODES", plan.nodes.to_string()),
        ("CELLSCHED_GPUS", plan.gpus.to_string()),
        ("CELLSCHED_DP", p.dp.to_string()),
        ("CELLSCHED_TP", p.tp.to_string()),
        ("CELLSCHED_PP", p.pp.to_string()),
        ("CELLSCHED_MICRO_BATCHES", p.micro_batches.to_string()),
        ("CELLSCHED_ZERO_STAGE", p.zero_stage.to_string()),
        ("CELLSCHED_CHECKPOINTING", u8::from(p.checkpointing).to_string()),
        ("CELLSCHED_GLOBAL_BATCH", plan.global_batch.to_string()),
        ("CELLSCHED_FREEZE_MODE", plan.freeze_mode.clone()),
        ("CELLSCHED_FREEZE_SCHEDULE", plan.freeze_schedule.clone()),
        ("CELLSCHED_PLAN_SOURCE", plan.source.clone()),
    ];
    if let Some(t) = plan.iter_time_s {
        v.push(("CELLSCHED_ITER_TIME_S", format!("{t:.6}")));
    }
    if let Some(f) = plan_file {
        v.push(("CELLSCHED_PLAN_FILE", f.to_string()));
    }
    if step.process_per_gpu() {
        v.push(("WORLD_SIZE", step.total_tasks.to_string()));
        v.push(("RANK", step.global_task_id.to_string()));
        v.push(("LOCAL_RANK", step.local_task_id.to_string()));
        v.push(("LOCAL_WORLD_SIZE", step.local_tasks.to_string()));
    } else {
        v.push(("WORLD_SIZE", plan.gpus.to_string()));
        v.push(("LOCAL_WORLD_SIZE", plan.gpus_per_node.to_string()));
    }
    v.push(("NODE_RANK", step.node_id.to_string()));
    if let Some(a) = &plan.master_addr {
        v.push(("MASTER_ADDR", a.clone()));
    }
    v.push(("MASTER_PORT", plan.master_port.to_string()));
    v
}

/// Variables a task must not keep from an outer step (the batch script's
/// launcher-mode values leak into `srun` steps through `--export=ALL`).
pub const RANK_KEYS: [&str; 2] = ["RANK", "LOCAL_RANK"];

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
    fn hostlists() {
        assert_eq!(first_host("a100-[1-2]").as_deref(), Some("a100-1"));
        assert_eq!(first_host("gpu[07,09-10],cpu1").as_deref(), Some("gpu07"));
        assert_eq!(first_host("v100-2,a100-1").as_deref(), Some("v100-2"));
        assert_eq!(first_host("rack[1-2]-n[3-4]").as_deref(), Some("rack1-n3"));
        assert_eq!(first_host(""), None);
        assert_eq!(first_host("a[1-2"), None);
        assert_eq!(first_host("a;b"), None);
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
}
