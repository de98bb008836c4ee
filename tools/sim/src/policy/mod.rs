//! Scheduling policies, all behind one trait so the comparison is fair: the
//! same engine, cluster model, placement code and iteration times.
//!
//! | name | what |
//! |---|---|
//! | `fifo` | requested type/count, first come first served, head-of-line blocking, no backfill |
//! | `slurm` | requested type/count, multifactor-like age priority + EASY backfill on declared time limits |
//! | `srtf` | requested type/count, shortest remaining time first on predicted durations (exact only in oracle mode), preemptive |
//! | `tiresias` | requested type/count, 2D-LAS: discretized queues on attained GPU-seconds, preemptive |
//! | `gavel` | requested count, GPU type chosen by throughput ratio (heterogeneity-aware max-throughput), non-preemptive |
//! | `cellsched` | Cell choice via the core's `rank_cells`, A-SRPT order via `core::asrpt`, min-node packing, layer freezing, re-planning |
mod cellsched;
mod fifo;
mod gavel;
mod preemptive;
mod slurm;

pub use cellsched::{AgedGuard, Ablation, CellschedOptions, CellschedPolicy};
pub use fifo::FifoPolicy;
pub use gavel::GavelPolicy;
pub use preemptive::{SrtfPolicy, TiresiasPolicy};
pub use slurm::SlurmPolicy;

use crate::cluster::Shape;
use crate::engine::Sim;
use crate::error::SimError;

/// A scheduling policy driven by the engine.
pub trait Policy {
    /// Name shown in results.
    fn name(&self) -> &str;
    /// Whether job `i` could ever run on this cluster under the policy (in
    /// an idle cluster); jobs that cannot are reported as unfinished.
    fn admissible(&mut self, sim: &mut Sim<'_>, i: usize) -> bool;
    /// Called once when job `i` arrives and is admitted.
    fn on_arrival(&mut self, _sim: &mut Sim<'_>, _i: usize) {}
    /// One scheduling pass: start (and possibly preempt) jobs.
    fn schedule(&mut self, sim: &mut Sim<'_>);
    /// Job `i` is pending again after a run failed or a start was refused
    /// (its Cell turned out not to fit; the knowledge now says so): re-plan
    /// it. Returns false if it can no longer run (it is then failed).
    fn on_requeue(&mut self, sim: &mut Sim<'_>, i: usize) -> bool {
        self.admissible(sim, i)
    }
}

/// Policy names accepted by [`build`].
pub const POLICY_NAMES: [&str; 6] = ["fifo", "slurm", "srtf", "tiresias", "gavel", "cellsched"];

/// Builds a policy by name; `cellsched` takes `opts`.
pub fn build(name: &str, opts: &CellschedOptions) -> Result<Box<dyn Policy>, SimError> {
    Ok(match name {
        "fifo" => Box::new(FifoPolicy),
        "slurm" => Box::new(SlurmPolicy::default()),
        "srtf" => Box::new(SrtfPolicy::default()),
        "tiresias" => Box::new(TiresiasPolicy::default()),
        "gavel" => Box::new(GavelPolicy::default()),
        "cellsched" => Box::new(CellschedPolicy::new(opts.clone())?),
        _ => return Err(SimError::invalid("policy", name, POLICY_NAMES.join(", "))),
    })
}

/// Predicted iteration time of job `i` on `shape` (its model and batch),
/// from the scheduler's knowledge. A stock job (model unknown to the
/// knowledge) runs only on its requested type, at the time its declared
/// limit implies ([`Sim::stock_iter_s`]).
pub(crate) fn iter_on(sim: &mut Sim<'_>, i: usize, shape: Shape) -> Option<f64> {
    let t = sim.cluster().groups[shape.group].type_idx;
    let ty = sim.cluster().types[t].clone();
    let j = sim.job(i);
    let (model, batch, stock, req) = (j.spec.model_name.clone(), j.spec.batch_size, j.stock, j.req_type);
    if stock {
        if req != Some(t) || sim.times().is_marked(&model, batch, &ty, shape.nodes, shape.gpus_per_node) {
            return None;
        }
        return Some(sim.stock_iter_s(i));
    }
    sim.times().iter_time(&model, batch, &ty, shape.nodes, shape.gpus_per_node)
}

/// Iteration time of job `i` with `gpus` GPUs of type `t` in an idle cluster.
pub(crate) fn idle_iter(sim: &mut Sim<'_>, i: usize, t: usize, gpus: u32) -> Option<f64> {
    let shape = sim.cluster().place_idle(t, gpus)?;
    iter_on(sim, i, shape)
}

/// Whether job `i`'s request (type and count) can ever run: the type exists,
/// a shape of that many GPUs exists, and the job fits on it.
pub(crate) fn requested_admissible(sim: &mut Sim<'_>, i: usize) -> bool {
    let j = sim.job(i);
    match j.req_type {
        Some(t) => {
            let g = j.spec.num_gpu;
            idle_iter(sim, i, t, g).is_some()
        }
        None => false,
    }
}

/// Starts job `i` with `gpus` GPUs of type `t` on the fewest nodes free now.
/// Returns false if it does not fit now.
pub(crate) fn start_on_type(sim: &mut Sim<'_>, i: usize, t: usize, gpus: u32) -> bool {
    let Some(shape) = sim.cluster().place_now(t, gpus) else { return false };
    let iter = match iter_on(sim, i, shape) {
        Some(x) => x,
        None => {
            // The knowledge learnt that the idle-cluster Cell, the one the
            // job was admitted on, cannot be used (a run failed or truth
            // lacks it): re-plan the job, which may fail it. A fragmented
            // shape the knowledge rules out changes nothing in the plan (the
            // re-plan would find the same Cell and come back here at once,
            // round after round): the job waits for the idle-cluster shape.
            let idle = sim.cluster().place_idle(t, gpus);
            let ty = sim.cluster().groups[shape.group].spec.gpu_type.clone();
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            if idle.is_some_and(|s| s.nodes == shape.nodes && s.gpus_per_node == shape.gpus_per_node)
                && sim.times().is_marked(&m, b, &ty, shape.nodes, shape.gpus_per_node)
            {
                sim.requeue_later(i);
            }
            return false;
        }
    };
    sim.start(i, shape, iter)
}

/// Starts job `i` as requested (type and count); false if it does not fit now.
pub(crate) fn start_requested(sim: &mut Sim<'_>, i: usize) -> bool {
    let j = sim.job(i);
    match j.req_type {
        Some(t) => {
            let g = j.spec.num_gpu;
            start_on_type(sim, i, t, g)
        }
        None => false,
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Tiny clusters and traces with hand-computable JCTs.
    use crate::cluster::{ClusterSpec, ClusterState};
    use crate::engine::{Sim, SimConfig};
    use crate::metrics::Metrics;
    use crate::policy::Policy;
    use crate::times::{LinearTimes, TimeCache};
    use crate::trace::TraceJob;

    /// A trace job: `iters` iterations of model `m` (1 s/iter on 1 GPU of
    /// `a100`, 2 s on `v100` unless the table says otherwise).
    pub fn job(id: &str, submit: f64, iters: u64, gpus: u32, ty: &str, limit: f64) -> TraceJob {
        TraceJob {
            job_id: id.into(),
            submission_time: submit,
            num_iteration: iters,
            model_name: "m".into(),
            deadline: limit,
            batch_size: 32,
            num_gpu: gpus,
            gpu_type: ty.into(),
            user: None,
            freeze: None,
            due_s: None,
        }
    }

    /// Time table: model `m` takes 1 s/iter on one a100, 2 s on one v100,
    /// scaling perfectly with GPUs; nodes cost nothing extra.
    pub fn times() -> LinearTimes {
        LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0)
    }

    /// Cluster from TOML text.
    pub fn cluster(toml: &str) -> ClusterState {
        ClusterState::new(&ClusterSpec::parse(toml, "test.toml").unwrap())
    }

    /// One a100 node with `gpus` GPUs.
    pub fn a100_node(gpus: u32) -> ClusterState {
        cluster(&format!("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = {gpus}\n"))
    }

    /// Runs `jobs` on `c` under `p`, returning metrics and per-job JCTs by id order of the trace.
    pub fn run(p: &mut dyn Policy, c: ClusterState, jobs: &[TraceJob], t: LinearTimes) -> (Metrics, Vec<Option<f64>>) {
        let mut cache = TimeCache::new(Box::new(t));
        let cfg = SimConfig { preempt_overhead_s: 0.0, ..SimConfig::default() };
        let mut sim = Sim::new(cfg, c, jobs, &mut cache);
        let m = sim.run(p, None);
        let jct = sim.jobs().iter().map(|j| j.finish.map(|f| f - j.spec.submission_time)).collect();
        (m, jct)
    }
}
