//! The simulator on the same trace: policies `slurm` (stock baseline) and
//! `cellsched` on a cluster TOML that mirrors the live cluster, so the live
//! ratio can be checked against the simulated one. With a truth table the
//! simulated clock runs on the same measured times as the live emulator,
//! and the knowledge is the same profile DB the plugins get.
use crate::error::ReplayError;
use crate::results::{Ratios, SimSide};
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::policy::{self, CellschedOptions};
use cellsched_sim::truth::{Truth, TruthMissing, TruthTable};
use cellsched_sim::{ClusterSpec, ClusterState, IterTimeSource, Sim, SimConfig, TimeCache, TraceJob};
use std::rc::Rc;
use std::collections::BTreeMap;

/// Simulates `slurm` and `cellsched` (default options, except that Cells
/// may use up to `max_gpu_factor` × the requested GPUs) on `trace`.
/// `truth`: truth table path (else the oracle mode); `knowledge`: profile DB path.
pub fn simulate_both(trace: &[TraceJob], cluster_toml: &str, max_gpu_factor: f64, truth: Option<&str>, knowledge: Option<&str>) -> Result<SimSide, ReplayError> {
    if !(max_gpu_factor.is_finite() && max_gpu_factor >= 1.0) {
        return Err(ReplayError::invalid("simulator max GPU factor", max_gpu_factor.to_string(), "a number >= 1"));
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
    let opts = CellschedOptions { max_gpu_factor, ..CellschedOptions::default() };
    let cfg = SimConfig { knowledge: knowledge.map_or("estimator, datasheet only".into(), |k| format!("estimator calibrated with {k}")), ..SimConfig::default() };
    let mut run = |name: &str| -> Result<cellsched_sim::Metrics, ReplayError> {
        let mut p = policy::build(name, &opts)?;
        let mut sim = Sim::new(cfg.clone(), ClusterState::new(&spec), trace, &mut times).with_truth(truth.clone());
        Ok(sim.run(p.as_mut(), None))
    };
    let slurm = run("slurm")?;
    let cellsched = run("cellsched")?;
    let ratios = Ratios::sim(&slurm, &cellsched);
    Ok(SimSide { cluster: cluster_toml.to_string(), slurm, cellsched, ratios })
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
