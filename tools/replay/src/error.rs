//! Errors of the replay library.
use thiserror::Error;

/// Why a replay could not be prepared or run.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The trace could not be read or parsed (the simulator's parser names the line).
    #[error("trace: {0}")]
    Trace(#[from] cellsched_sim::SimError),
    /// A trace job the replay cannot run as given.
    #[error("trace job '{job}': {msg}")]
    Job {
        /// The trace job's name.
        job: String,
        /// What is wrong with it.
        msg: String,
    },
    /// A bad setting (speedup, timeouts, mode list, ...).
    #[error("invalid {what} '{value}': expected {expected}")]
    Invalid {
        /// The setting.
        what: String,
        /// The value given.
        value: String,
        /// The accepted form.
        expected: String,
    },
    /// The local cluster could not be brought up, down or queried.
    #[error("cluster: {0}")]
    Cluster(#[from] cellsched_devcluster::ClusterError),
    /// A Slurm client command failed.
    #[error("{tool}: {msg}")]
    Slurm {
        /// The Slurm command that was run.
        tool: String,
        /// What went wrong.
        msg: String,
    },
    /// The queue still held jobs that are not ours before a mode started.
    #[error("the cluster's queue is not empty ({0}); wait for those jobs or cancel them, then rerun")]
    QueueBusy(String),
    /// Reading sacct's output failed.
    #[error("report: {0}")]
    Report(#[from] cellsched_report::ReportError),
    /// Ctrl-C or SIGTERM: the run's jobs were cancelled.
    #[error("interrupted; the replay's jobs were cancelled")]
    Interrupted,
    /// A file could not be written or read.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The underlying I/O error (in the message, not repeated as a cause).
        error: std::io::Error,
    },
}

impl ReplayError {
    /// Shorthand for [`ReplayError::Invalid`].
    pub fn invalid(what: impl Into<String>, value: impl Into<String>, expected: impl Into<String>) -> Self {
        ReplayError::Invalid { what: what.into(), value: value.into(), expected: expected.into() }
    }
}
