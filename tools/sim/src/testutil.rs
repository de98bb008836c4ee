//! Tiny clusters and traces with hand-computable JCTs.
use crate::cluster::{ClusterSpec, ClusterState};
use crate::engine::{Sim, SimConfig};
use crate::metrics::Metrics;
use crate::view::Policy;
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
        elastic: false,
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
