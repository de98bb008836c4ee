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
mod slurm_backfill;
mod starts;

pub use cellsched::{AgedGuard, Ablation, CellschedOptions, CellschedPolicy};
pub use fifo::FifoPolicy;
pub use gavel::GavelPolicy;
pub use preemptive::{SrtfPolicy, TiresiasPolicy};
pub use slurm::SlurmPolicy;
pub use slurm_backfill::SlurmGate;
pub use crate::view::{Policy, SimView};

use crate::error::SimError;

/// One row of the policy table: a name, what it does, and how to build it.
pub struct PolicyEntry {
    /// Name accepted by [`build`] (`--policy`).
    pub name: &'static str,
    /// One line on what it does.
    pub what: &'static str,
    /// Builds it; `cellsched` reads its options, the baselines ignore them.
    pub build: fn(&CellschedOptions) -> Result<Box<dyn Policy>, SimError>,
}

/// Every policy, by name: adding a policy is one entry here.
pub const POLICIES: &[PolicyEntry] = &[
    PolicyEntry { name: "fifo", what: "requested type/count, FCFS, head-of-line blocking", build: |_| Ok(Box::new(FifoPolicy)) },
    PolicyEntry { name: "slurm", what: "requested type/count, age priority + EASY backfill", build: |_| Ok(Box::new(SlurmPolicy::default())) },
    PolicyEntry { name: "srtf", what: "requested type/count, shortest remaining time first, preemptive", build: |_| Ok(Box::new(SrtfPolicy::default())) },
    PolicyEntry { name: "tiresias", what: "requested type/count, 2D-LAS on attained GPU-seconds, preemptive", build: |_| Ok(Box::new(TiresiasPolicy::default())) },
    PolicyEntry { name: "gavel", what: "requested count, GPU type by throughput ratio", build: |_| Ok(Box::new(GavelPolicy::default())) },
    PolicyEntry { name: "cellsched", what: "the core's Cell choice, A-SRPT order, re-planning", build: |o| Ok(Box::new(CellschedPolicy::new(o.clone())?)) },
];

/// Policy names accepted by [`build`], in table order.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|p| p.name).collect()
}

/// Builds a policy by name; `cellsched` takes `opts`.
pub fn build(name: &str, opts: &CellschedOptions) -> Result<Box<dyn Policy>, SimError> {
    match POLICIES.iter().find(|p| p.name == name) {
        Some(p) => (p.build)(opts),
        None => Err(SimError::invalid("policy", name, names().join(", "))),
    }
}
