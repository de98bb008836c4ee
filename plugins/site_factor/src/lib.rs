//! site_factor/cellsched: A-SRPT ordering as a Slurm priority site factor.
//!
//! Loaded by `priority/multifactor` with `PrioritySiteFactorPlugin=site_factor/cellsched`
//! (optionally `PrioritySiteFactorParameters=config=/path/cellsched.toml`).
//! DL jobs placed by job_submit/cellsched get `site_factor = NICE_OFFSET + p`
//! with `p` from the A-SRPT order of pending DL jobs (shortest predicted
//! remaining time first, aging guard); other jobs keep the stock value, so
//! `sprio` shows the factor and `PriorityWeight*` still weigh the rest.
//!
//! - The decision itself is pure and lives in core
//!   ([`cellsched_core::ordering`]: job records → site factors, with the
//!   iteration predictor fitted on the job history); [`users`]: the uid
//!   lookup it is given.
//! - [`job_ranker`]: the ranking computed by a background thread off the job
//!   write lock, which `site_factor_p_update` only copies.
//! - `plugin`: the exported symbols, each behind a panic guard.
#![deny(missing_docs)]

/// The plugin's Rust heap, counted for the passes' `debug` lines (see `cellsched_slurm_ffi::heap`).
#[cfg(not(test))]
#[global_allocator]
static HEAP: cellsched_slurm_ffi::heap::CountingAlloc = cellsched_slurm_ffi::heap::CountingAlloc;
mod plugin;
pub mod users;
pub mod job_ranker;
