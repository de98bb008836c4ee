//! job_submit/cellsched: Cell/GRES-type-aware placement and re-planning inside slurmctld.
//!
//! Loaded with `JobSubmitPlugins=cellsched`. Jobs carrying DL options (the
//! SPANK plugin's `CELLSCHED_DL_*` entries in `spank_job_env`) get a Cell at
//! submit: `--dl-cell=auto` jobs are rewritten to the chosen GPU type as a
//! node feature plus an untyped GPU count and node count; pinned jobs keep
//! their type. The decision goes to `AdminComment` and `CELLSCHED_DECISION`.
//! A thread (slurmctld only) re-plans still-pending auto jobs as GPUs free up.
//! Jobs without DL options are untouched; a missing or bad config leaves all
//! jobs stock; bad DL options are rejected at submit with a message.
//!
//! The decisions themselves are pure and live in `cellsched_core`
//! ([`cellsched_core::placement`]: submit-time choice, GRES strings in
//! `placement::request`, re-planning in `placement::replan`;
//! [`cellsched_core::job_env`]: `spank_job_env` lookups), so the simulator,
//! `whatif` and tests call the same code; this crate is the slurmctld host.
//!
//! - [`node_cache`]: the node table's GPUs, copied again only after it changed.
//! - `state`: the configuration, estimator and node table in force.
//! - `submit`: `job_submit`, the Cell at submit.
//! - `replan`: the re-planning thread.
//! - `elastic`: the elastic thread: signals, requeues and re-plans running
//!   `--dl-elastic` jobs ([`cellsched_core::elastic`] decides).
//! - `plugin`: the plugin's identity, `init` and `fini`.
//! - `modify`: `job_modify`, the rule for users' edits of placed DL jobs
//!   ([`cellsched_core::placement::judge_edit`]).
#![deny(missing_docs)]

/// The plugin's Rust heap, counted for the passes' `debug` lines (see `cellsched_slurm_ffi::heap`).
#[cfg(not(test))]
#[global_allocator]
static HEAP: cellsched_slurm_ffi::heap::CountingAlloc = cellsched_slurm_ffi::heap::CountingAlloc;
pub mod node_cache;
mod elastic;
mod modify;
mod plugin;
mod replan;
mod state;
mod submit;
