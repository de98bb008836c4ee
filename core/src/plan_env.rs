//! The environment a training process is told its plan through: the
//! `CELLSCHED_*` plan variables and the conventional launcher variables
//! (`WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `NODE_RANK`, `MASTER_ADDR`,
//! `MASTER_PORT`). One pure function, used by the SPANK plugin (job tasks)
//! and by `cellsched profile run`, so the two export the same names and
//! values. Callers add their own extras (per-task `RANK`/`LOCAL_RANK`, the
//! plan file path, profiler-only variables).
use crate::cell::Plan;

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
}
