//! The plugin's error type: every message names the bad input.
use cellsched_core::CoreError;
use thiserror::Error;

/// Errors raised inside the SPANK callbacks; logged through Slurm's logger.
#[derive(Debug, Error)]
pub enum SpankError {
    /// A DL option or job environment value failed validation.
    #[error("{0}")]
    Core(#[from] CoreError),
    /// A plugstack.conf argument was malformed or unknown.
    #[error("plugstack argument '{arg}': {msg}")]
    Arg {
        /// The argument as given.
        arg: String,
        /// What went wrong.
        msg: String,
    },
    /// The granted resources do not fit the requested or decided plan.
    #[error("{0}")]
    Allocation(String),
    /// The step's `--dl-*` values cannot be honoured on its grant (a pinned
    /// plan or Cell that does not fit, no feasible plan for its model): an
    /// `srun` step fails instead of running without its plan.
    #[error("{0}")]
    StepRefused(String),
    /// Writing the plan file failed.
    #[error("plan file {path}: {msg}")]
    PlanFile {
        /// The file.
        path: String,
        /// What went wrong.
        msg: String,
    },
    /// A SPANK API call failed.
    #[error("{call}: {msg}")]
    Spank {
        /// The SPANK function called.
        call: &'static str,
        /// What went wrong.
        msg: String,
    },
}
