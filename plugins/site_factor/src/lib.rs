//! site_factor/cellsched: A-SRPT ordering as a Slurm priority site factor.
//!
//! Loaded by `priority/multifactor` with `PrioritySiteFactorPlugin=site_factor/cellsched`
//! (optionally `PrioritySiteFactorParameters=config=/path/cellsched.toml`).
//! DL jobs placed by job_submit/cellsched get `site_factor = NICE_OFFSET + p`
//! with `p` from the A-SRPT order of pending DL jobs (shortest predicted
//! remaining time first, aging guard); other jobs keep the stock value, so
//! `sprio` shows the factor and `PriorityWeight*` still weigh the rest.
//!
//! - [`ordering`]: pure computation (tested without Slurm).
//! - [`prediction`]: the iteration predictor fitted on the job history.
//! - [`ranker`]: the ranking computed by a background thread off the job
//!   write lock, which `site_factor_p_update` only copies.
//! - [`slurm_conf`]: the running daemon's config paths.
//! - `plugin`: the exported symbols, each behind a panic guard.
#![deny(missing_docs)]
pub mod ordering;
mod plugin;
pub mod prediction;
pub mod ranker;
pub mod slurm_conf;
