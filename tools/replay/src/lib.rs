//! cellsched-replay: replays a small job trace on the live local Slurm
//! cluster twice — stock Slurm with the users' own typed GRES, then with
//! cellsched's plugins choosing the Cells — and compares the two from
//! `sacct`, next to the simulator's view of the same trace.
//!
//! - [`workload`]: trace rows → compressed submission times and `sbatch`
//!   arguments per [`workload::Mode`] (pure, unit tested);
//! - [`runner`]: cluster up per mode, timed submissions, polling, stuck-job
//!   and timeout handling, cluster down;
//! - [`slurm`]: the client commands with a clean environment;
//! - [`results`]: per-mode statistics (via `cellsched-report`), ratios, tables;
//! - [`sim`]: the simulator's `slurm` vs `cellsched` on the same trace;
//! - [`interrupt`]: Ctrl-C handling so a run always cleans up.
pub mod error;
pub mod interrupt;
pub mod results;
pub mod runner;
pub mod sim;
pub mod slurm;
pub mod workload;

pub use error::ReplayError;
pub use results::{Comparison, ModeResult, Ratios, SimSide};
pub use runner::{run_modes, LiveOptions};
pub use workload::{prepare, Mode, ReplayJob, Settings};

/// Node shapes of a live cluster spec: `type → (gpus_per_node, nodes)`.
pub fn shapes_of_cluster(spec: &cellsched_cluster::ClusterSpec) -> std::collections::BTreeMap<String, (u32, u32)> {
    let mut m = std::collections::BTreeMap::new();
    for g in &spec.groups {
        let e = m.entry(g.gpu_type.clone()).or_insert((g.gpus_per_node, 0));
        e.0 = e.0.max(g.gpus_per_node);
        e.1 += g.count;
    }
    m
}
