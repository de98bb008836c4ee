//! cellsched-sim: a trace-driven discrete-event simulator of a heterogeneous
//! GPU cluster that runs the cellsched core's decision code, plus the
//! baseline policies it is compared against.
//!
//! - [`cluster`]: cluster spec (TOML `[[group]]` tables) and free-GPU state.
//! - [`trace`]: the job trace CSV.
//! - [`times`]: iteration times and Cell ranking behind [`times::IterTimeSource`], cached;
//!   [`core_times`]: the production source (core `Estimator` + `ProfileDb`) —
//!   the scheduler's *knowledge*, which every decision uses;
//! - [`truth`]: measured iteration times that run the clock (`--truth`),
//!   never seen by a policy; without one the clock runs on the knowledge
//!   (the oracle mode, an upper bound).
//! - [`engine`]: the event loop ([`engine::Sim`]); [`job`]: a job's state;
//!   [`metrics`]: the results of a run.
//! - [`view`]: what a policy may read and do ([`view::SimView`]) and the
//!   [`view::Policy`] trait; the engine implements the view, policies use
//!   only it (no policy imports the engine).
//! - [`policy`]: `fifo`, `slurm`, `srtf`, `tiresias`, `gavel`, `cellsched`,
//!   registered by name in one table ([`policy::POLICIES`]).
//! - [`elastic`]: reconfiguration of running elastic jobs by the `cellsched`
//!   policy (`core::elastic::decide` at the plugins' cadence, restart cost on the clock).
//! - [`progress_model`]: per-job speed (layer freezing).
//! - [`synth`]: seeded synthetic workloads; [`gavel_convert`]: Gavel/Philly trace converter.
//! - [`progress`]: progress bar for long runs.
//! - [`snapshot`]: a live cluster's state (nodes, running and pending jobs)
//!   run forward with one more job (`cellsched whatif`).
#![deny(missing_docs)]
pub mod cluster;
pub mod core_times;
pub mod elastic;
pub mod engine;
pub mod error;
pub mod gavel_convert;
pub mod job;
pub mod metrics;
pub mod policy;
pub mod progress;
pub mod progress_model;
pub mod restart_truth;
pub mod rng;
pub mod snapshot;
pub mod synth;
pub mod times;
pub mod trace;
pub mod truth;
pub mod view;

#[cfg(test)]
mod testutil;
#[cfg(test)]
mod truth_engine_tests;

pub use cluster::{ClusterSpec, ClusterState};
pub use engine::{ReconfTruth, Sim, SimConfig};
pub use restart_truth::{MeasuredRestart, RestartTruth};
pub use error::SimError;
pub use metrics::Metrics;
pub use policy::{Ablation, CellschedOptions, Policy};
pub use view::SimView;
pub use times::{IterTimeSource, TimeCache};
pub use trace::TraceJob;

/// Simulates `jobs` on `spec` under `policy`, with iteration times from `times`.
pub fn simulate(
    cfg: SimConfig,
    spec: &ClusterSpec,
    jobs: &[TraceJob],
    times: &mut TimeCache,
    policy: &mut dyn Policy,
    progress: Option<&mut dyn FnMut(u64, u64)>,
) -> Metrics {
    let mut sim = Sim::new(cfg, ClusterState::new(spec), jobs, times);
    sim.run(policy, progress)
}
