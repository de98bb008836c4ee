//! The whatif crate's error type: each variant names what failed.
use thiserror::Error;

/// Why a whatif question could not be answered.
#[derive(Debug, Error)]
pub enum WhatifError {
    /// A Slurm command (`sinfo`, `squeue`, `scontrol`) could not be run or failed.
    #[error("{command} failed: {msg}")]
    Slurm {
        /// The command.
        command: String,
        /// What went wrong.
        msg: String,
    },
    /// The configuration or the model could not be read.
    #[error(transparent)]
    Core(#[from] cellsched_core::CoreError),
    /// The estimator's data (GPU catalog override, profile DB) could not be read.
    #[error("estimator data: {0}")]
    Estimator(String),
    /// The simulation of the queue failed.
    #[error(transparent)]
    Sim(#[from] cellsched_sim::SimError),
}
