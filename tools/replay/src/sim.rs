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
//!   all in compressed seconds;
//! - the elastic pass (`--elastic`): every job the plugins place opts in;
//!   the `[elastic]` bounds and cadence of the same cellsched.toml in
//!   compressed seconds ([`elastic_in_trace_s`]), each job's GPU count kept
//!   on a move as job_submit keeps `fixed_gpus`, and a reconfiguration's
//!   cost on the clock as measured ([`LiveModel::reconf_truth`]): the
//!   host's latency from the signal to the GPUs being free and the
//!   emulated trainer's restart (`CELLSCHED_EMU_RESTART_S`).
use crate::error::ReplayError;
use crate::jobs::JobTimes;
use crate::results::{Ratios, SimSide};
use crate::workload::ReplayJob;
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::policy::{self, CellschedOptions};
use cellsched_sim::truth::{Truth, TruthMissing, TruthTable};
use cellsched_core::config::ElasticConfig;
use cellsched_sim::{ClusterSpec, ClusterState, IterTimeSource, ReconfTruth, Sim, SimConfig, TimeCache, TraceJob};
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
    /// A reconfiguration's cost on the clock of the elastic pass, as
    /// measured live (`None`: the rule's cost model).
    pub reconf_truth: Option<ReconfTruth>,
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
            reconf_truth: None,
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
        if let Some(t) = &self.reconf_truth {
            v.push(format!(
                "elastic: a reconfiguration costs {:.0} s from the signal to free GPUs (host latency) and {:.0} s restart (trainer), trace s",
                t.save_s, t.restart_s
            ));
        }
        v
    }
}

/// `[elastic]` of the plugins' configuration with its bounds and cadence
/// (real seconds live) in trace seconds at `speedup`; predictions and
/// restart costs are already trace seconds. `max_per_hour` stays per hour
/// of the simulated clock.
pub fn elastic_in_trace_s(cfg: &ElasticConfig, speedup: f64) -> ElasticConfig {
    let scale = |s: u64| (s as f64 * speedup).round() as u64;
    ElasticConfig { interval_s: scale(cfg.interval_s).max(1), min_run_s: scale(cfg.min_run_s), grace_s: scale(cfg.grace_s), ..cfg.clone() }
}

/// One reconfiguration the simulator made in the elastic pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReconfig {
    /// Trace seconds.
    pub at_s: f64,
    /// `grow`, `move` or `preempt`.
    pub kind: String,
    /// The trace job reconfigured.
    pub trace_job: String,
    /// The trace job it made room for.
    pub for_job: Option<String>,
    /// Its new Cell (grow, move).
    pub to: Option<String>,
    /// Predicted gain, net of the restart cost, trace s.
    pub gain_s: f64,
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
/// on `trace` under `model`; with `elastic` also `cellsched` with every
/// job opted in (`opts.elastic`, already in trace seconds).
/// `truth`: truth table path (else the oracle mode); `knowledge`: profile DB path.
pub fn simulate_both(
    trace: &[TraceJob],
    cluster_toml: &str,
    opts: &CellschedOptions,
    model: &LiveModel,
    truth: Option<&str>,
    knowledge: Option<&str>,
    elastic: bool,
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
    let mut run = |p: &mut dyn policy::Policy, trace: &[TraceJob], launch_s: f64| -> (cellsched_sim::Metrics, Vec<JobTimes>) {
        let mut cluster = ClusterState::new(&spec);
        cluster.fewest_nodes_only = model.fewest_nodes;
        let cfg = SimConfig { launch_s, reconf_truth: model.reconf_truth, ..base.clone() };
        let mut sim = Sim::new(cfg, cluster, trace, &mut times).with_truth(truth.clone());
        let m = sim.run(p, None);
        let jobs = sim.jobs().iter().map(|j| JobTimes::of_sim(j, sim.cluster())).collect();
        (m, jobs)
    };
    let mut stock = if model.slurm_planning { Box::new(policy::SlurmPolicy::conservative(model.backfill_interval_s)) } else { policy::build("slurm", &opts)? };
    let (slurm, slurm_jobs) = run(stock.as_mut(), trace, model.launch_stock_s);
    let (cellsched, cellsched_jobs) = run(policy::build("cellsched", &opts)?.as_mut(), trace, model.launch_cellsched_s);
    let ratios = Ratios::sim(&slurm, &cellsched);
    let mut side = SimSide {
        cluster: cluster_toml.to_string(),
        slurm,
        cellsched,
        ratios,
        slurm_jobs,
        cellsched_jobs,
        model: model.describe(),
        elastic: None,
        elastic_ratios: None,
        elastic_jobs: Vec::new(),
        reconfigs: Vec::new(),
    };
    if elastic {
        let opted: Vec<TraceJob> = trace.iter().map(|t| TraceJob { elastic: true, ..t.clone() }).collect();
        let mut p = policy::CellschedPolicy::new(opts.clone())?;
        p.keep_elastic_passes();
        let (m, jobs) = run(&mut p, &opted, model.launch_cellsched_s);
        let id = |i: u32| opted.get(i as usize).map_or_else(|| i.to_string(), |t| t.job_id.clone());
        side.reconfigs = p
            .elastic_passes()
            .iter()
            .flat_map(|pass| pass.decided.iter().map(move |r| (pass.now, r)))
            .map(|(now, r)| SimReconfig {
                at_s: now as f64,
                kind: r.kind().to_string(),
                trace_job: id(r.id()),
                for_job: r.for_job().map(id),
                to: r.target().map(|t| format!("{}x{}", t.to.cell.gpu_type, t.to.cell.gpus)),
                gain_s: r.gain_s(),
            })
            .collect();
        side.elastic_ratios = Some(Ratios::sim(&side.cellsched, &m));
        side.elastic = Some(m);
        side.elastic_jobs = jobs;
    }
    Ok(side)
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
