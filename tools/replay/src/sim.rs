//! The simulator on the same trace: policies `slurm` (stock baseline) and
//! `cellsched` on a cluster TOML that mirrors the live cluster, so the live
//! ratio can be checked against the simulated one. With a truth table the
//! simulated clock runs on the same measured times as the live emulator,
//! and the knowledge is the same profile DB the plugins get.
//!
//! [`LiveModel`] carries what the live replay does differently from a bare
//! simulation, each a physical mechanism with its source:
//! - time limits: the `--time` each job was submitted with (whole minutes
//!   of compressed time, so coarser than the trace's), which Slurm's
//!   backfill plans with;
//! - node shapes: `--nodes=ceil(n / gpus_per_node)` with a per-node GRES
//!   count, so a job never spreads over more nodes;
//! - GPU counts: the cellsched pass submits an untyped `--gres=gpu:N`, a
//!   count job_submit keeps (the simulator's `fixed_counts`);
//! - the plugins' configuration: the same cellsched.toml (`[placement]`,
//!   `[ordering]`) the cellsched pass loads;
//! - launch time: GPUs held per run beyond the job's work (launch, plugins,
//!   completion), per mode, measured on the live cluster (sacct run time
//!   minus the trainer's own elapsed time; see [`crate::jobs`]);
//! - Slurm's machinery for both passes: backfill that plans every tested
//!   job (`SlurmPolicy::conservative`) every `bf_interval`; for cellsched
//!   the same, in A-SRPT order, with job_submit's rules for a job's GPU
//!   type (no slower Cell at submission, moves only every
//!   `replan_interval_s` and not within `replan_cooldown_s`; `SlurmGate`),
//!   all in compressed seconds.
use crate::error::ReplayError;
use crate::jobs::JobTimes;
use crate::results::{Ratios, SimSide};
use crate::workload::ReplayJob;
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::policy::{self, CellschedOptions};
use cellsched_sim::truth::{Truth, TruthMissing, TruthTable};
use cellsched_sim::{ClusterSpec, ClusterState, IterTimeSource, Sim, SimConfig, TimeCache, TraceJob};
use serde::Serialize;
use std::collections::BTreeMap;
use std::rc::Rc;

/// How the simulator mirrors the live replay (see the module doc). Times
/// are trace seconds (real seconds × the replay's speedup).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveModel {
    /// Time limits as submitted (`--time`, whole compressed minutes) instead of the trace's.
    pub submitted_limits: bool,
    /// Jobs span exactly the fewest nodes their count needs (`--nodes`).
    pub fewest_nodes: bool,
    /// cellsched keeps each job's GPU count (untyped `--gres=gpu:N`).
    pub fixed_counts: bool,
    /// GPUs held per run beyond the work, stock pass.
    pub launch_stock_s: f64,
    /// GPUs held per run beyond the work, cellsched pass.
    pub launch_cellsched_s: f64,
    /// The stock baseline plans as Slurm's backfill does (a reservation for
    /// every tested job, planned nodes held whole; `SlurmPolicy::conservative`)
    /// instead of EASY's single reservation.
    pub slurm_planning: bool,
    /// slurmctld's backfill interval (`bf_interval`); `None`: every event.
    pub backfill_interval_s: Option<f64>,
    /// job_submit's re-planning interval (`placement.replan_interval_s`); `None`: every event.
    pub replan_interval_s: Option<f64>,
    /// job_submit's cool-down after a move (`placement.replan_cooldown_s`).
    pub replan_cooldown_s: f64,
}

impl LiveModel {
    /// A bare simulation: the trace's limits, any node count, counts as
    /// hints, no launch time, decisions at every event.
    pub fn none() -> LiveModel {
        LiveModel {
            submitted_limits: false,
            fewest_nodes: false,
            fixed_counts: false,
            launch_stock_s: 0.0,
            launch_cellsched_s: 0.0,
            slurm_planning: false,
            backfill_interval_s: None,
            replan_interval_s: None,
            replan_cooldown_s: 0.0,
        }
    }

    /// One line per mechanism that is on, for the report.
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.submitted_limits {
            v.push("time limits as submitted (--time, whole compressed minutes)".into());
        }
        if self.fewest_nodes {
            v.push("jobs on the fewest nodes their count needs (--nodes)".into());
        }
        if self.fixed_counts {
            v.push("cellsched keeps each job's GPU count (untyped --gres=gpu:N)".into());
        }
        if self.launch_stock_s > 0.0 || self.launch_cellsched_s > 0.0 {
            v.push(format!(
                "launch time per run: stock {:.0} s, cellsched {:.0} s (trace s)",
                self.launch_stock_s, self.launch_cellsched_s
            ));
        }
        if self.slurm_planning {
            v.push(match self.backfill_interval_s {
                Some(b) => format!("stock: Slurm's backfill planning (every tested job reserved, nodes held whole), every {b:.0} s (bf_interval)"),
                None => "stock: Slurm's backfill planning (every tested job reserved, nodes held whole)".into(),
            });
        }
        if self.slurm_planning {
            v.push(match self.replan_interval_s {
                Some(r) => format!("cellsched: jobs started by the same Slurm machinery in A-SRPT order; GPU types change at submission and every {r:.0} s (placement.replan_interval_s), not within {:.0} s of a move (replan_cooldown_s)", self.replan_cooldown_s),
                None => "cellsched: jobs started by the same Slurm machinery in A-SRPT order".into(),
            });
        }
        v
    }
}

/// A numeric `key=value` of slurm.conf's `SchedulerParameters`, seconds;
/// Slurm's default when absent (`bf_interval` 30 s, `sched_interval` 60 s).
pub fn scheduler_parameter(params: &str, key: &str) -> Option<f64> {
    let given = params.split(',').filter_map(|w| w.trim().split_once('=')).find(|(k, _)| *k == key).and_then(|(_, v)| v.parse::<f64>().ok());
    given.or(match key {
        "bf_interval" => Some(30.0),
        "sched_interval" => Some(60.0),
        _ => None,
    })
}

/// The trace as the live cluster got it: with [`LiveModel::submitted_limits`]
/// each job's limit is its `--time` (`jobs` are the prepared replay jobs).
pub fn live_trace(trace: &[TraceJob], jobs: &[ReplayJob], speedup: f64, model: &LiveModel) -> Vec<TraceJob> {
    let limits: BTreeMap<&str, u64> = jobs.iter().map(|j| (j.trace.job_id.as_str(), j.time_limit_min)).collect();
    trace
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if model.submitted_limits {
                if let Some(m) = limits.get(t.job_id.as_str()) {
                    t.deadline = *m as f64 * 60.0 * speedup;
                }
            }
            t
        })
        .collect()
}

/// Simulates `slurm` and `cellsched` (`opts`, with `model.fixed_counts`)
/// on `trace` under `model`.
/// `truth`: truth table path (else the oracle mode); `knowledge`: profile DB path.
pub fn simulate_both(
    trace: &[TraceJob],
    cluster_toml: &str,
    opts: &CellschedOptions,
    model: &LiveModel,
    truth: Option<&str>,
    knowledge: Option<&str>,
) -> Result<SimSide, ReplayError> {
    if !(opts.max_gpu_factor.is_finite() && opts.max_gpu_factor >= 1.0) {
        return Err(ReplayError::invalid("simulator max GPU factor", opts.max_gpu_factor.to_string(), "a number >= 1"));
    }
    let spec = ClusterSpec::load(cluster_toml)?;
    let db = match knowledge {
        Some(p) => Some(CoreTimes::load_db(p)?),
        None => None,
    };
    let truth = match truth {
        Some(p) => {
            let table = TruthTable::load(p)?;
            let fallback = CoreTimes::new(&spec, Some(table.to_profile_db(false)))?;
            Some(Truth::new(table, Some(Rc::new(fallback) as Rc<dyn IterTimeSource>), TruthMissing::Estimate))
        }
        None => None,
    };
    let mut times = TimeCache::new(Box::new(CoreTimes::new(&spec, db)?));
    let gate = model.slurm_planning.then(|| policy::SlurmGate::new(model.backfill_interval_s, model.replan_interval_s).with_cooldown(model.replan_cooldown_s));
    let opts = CellschedOptions { fixed_counts: model.fixed_counts, started_by_slurm: gate, ..opts.clone() };
    let base = SimConfig { knowledge: knowledge.map_or("estimator, datasheet only".into(), |k| format!("estimator calibrated with {k}")), ..SimConfig::default() };
    let mut run = |name: &str, launch_s: f64| -> Result<(cellsched_sim::Metrics, Vec<JobTimes>), ReplayError> {
        let mut p = if name == "slurm" && model.slurm_planning {
            Box::new(policy::SlurmPolicy::conservative(model.backfill_interval_s))
        } else {
            policy::build(name, &opts)?
        };
        let mut cluster = ClusterState::new(&spec);
        cluster.fewest_nodes_only = model.fewest_nodes;
        let cfg = SimConfig { launch_s, ..base.clone() };
        let mut sim = Sim::new(cfg, cluster, trace, &mut times).with_truth(truth.clone());
        let m = sim.run(p.as_mut(), None);
        let jobs = sim.jobs().iter().map(|j| JobTimes::of_sim(j, sim.cluster())).collect();
        Ok((m, jobs))
    };
    let (slurm, slurm_jobs) = run("slurm", model.launch_stock_s)?;
    let (cellsched, cellsched_jobs) = run("cellsched", model.launch_cellsched_s)?;
    let ratios = Ratios::sim(&slurm, &cellsched);
    Ok(SimSide { cluster: cluster_toml.to_string(), slurm, cellsched, ratios, slurm_jobs, cellsched_jobs, model: model.describe() })
}

/// `type → (gpus_per_node, nodes)` of a simulator cluster TOML.
pub fn shapes_of_sim_cluster(cluster_toml: &str) -> Result<BTreeMap<String, (u32, u32)>, ReplayError> {
    let spec = ClusterSpec::load(cluster_toml)?;
    let mut m = BTreeMap::new();
    for g in &spec.groups {
        let e = m.entry(g.gpu_type.clone()).or_insert((g.gpus_per_node, 0));
        e.0 = e.0.max(g.gpus_per_node);
        e.1 += g.nodes;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_parameters_are_read_with_slurms_defaults() {
        let p = "sched_interval=2,bf_interval=1,bf_resolution=1,sched_min_interval=100000";
        assert_eq!(scheduler_parameter(p, "bf_interval"), Some(1.0));
        assert_eq!(scheduler_parameter(p, "sched_interval"), Some(2.0));
        assert_eq!(scheduler_parameter("bf_continue", "bf_interval"), Some(30.0), "Slurm's default");
        assert_eq!(scheduler_parameter("", "bf_max_job_test"), None);
    }

    #[test]
    fn the_live_trace_carries_the_submitted_limits() {
        let row = |id: &str, deadline: f64| TraceJob {
            job_id: id.into(),
            submission_time: 0.0,
            num_iteration: 10,
            model_name: "resnet50".into(),
            deadline,
            batch_size: 16,
            num_gpu: 1,
            gpu_type: "v100".into(),
            user: None,
            freeze: None,
            due_s: None,
            elastic: false,
        };
        let trace = vec![row("1", 900.0), row("2", 0.0)];
        let job = |t: &TraceJob, min: u64| ReplayJob {
            trace: t.clone(),
            submit_at_s: 0.0,
            nodes: 1,
            gpus_per_node: 1,
            iter_time_s: 1.0,
            predicted_run_s: 10.0,
            time_limit_min: min,
            unknown_model: false,
        };
        let jobs = vec![job(&trace[0], 1), job(&trace[1], 2)];
        let live = LiveModel { submitted_limits: true, ..LiveModel::none() };
        // 900 trace s at 30x is 30 real s, submitted as --time=1: 60 real s = 1,800 trace s.
        let t = live_trace(&trace, &jobs, 30.0, &live);
        assert_eq!((t[0].deadline, t[1].deadline), (1800.0, 3600.0));
        let t = live_trace(&trace, &jobs, 30.0, &LiveModel::none());
        assert_eq!((t[0].deadline, t[1].deadline), (900.0, 0.0));
        assert!(LiveModel::none().describe().is_empty());
        assert_eq!(live.describe().len(), 1);
    }
}
