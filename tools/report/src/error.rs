//! The report crate's error type; every variant names the offending input and
//! maps to a documented process exit code ([`ReportError::exit_code`]).
use thiserror::Error;

/// Errors from querying Slurm accounting and building reports.
#[derive(Debug, Error)]
pub enum ReportError {
    /// `sacct`/`sinfo`/`scontrol` could not be run or failed (no slurmdbd,
    /// accounting disabled, no slurm.conf). Exit code 3.
    #[error("{tool} failed: {msg} (is slurmdbd running and SLURM_CONF set? try: eval \"$(cellsched cluster env)\")")]
    SlurmUnavailable {
        /// The Slurm command that was run.
        tool: String,
        /// What went wrong.
        msg: String,
    },
    /// The `--user` named nobody known to this host. Exit code 6.
    #[error("unknown user '{0}' (not in the passwd database)")]
    UnknownUser(String),
    /// The query matched no jobs. Exit code 4.
    #[error("no jobs in window {0}")]
    NoJobs(String),
    /// A line of `sacct` output (1-based `line`) did not parse. Exit code 5.
    #[error("malformed sacct line {line}: {msg}: '{text}'")]
    MalformedLine {
        /// 1-based line, when known.
        line: usize,
        /// What went wrong.
        msg: String,
        /// The offending line.
        text: String,
    },
    /// An invalid option value, e.g. `--capacity a100=x`. Exit code 2.
    #[error("invalid {what} '{value}': expected {expected}")]
    Invalid {
        /// The field, setting or operation.
        what: String,
        /// The value given.
        value: String,
        /// The accepted form.
        expected: String,
    },
    /// A saved report or output file could not be read or written. Exit code 1.
    #[error("{path}: {msg}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        msg: String,
    },
    /// Drawing a plot failed. Exit code 1.
    #[error("plot {path}: {msg}")]
    Plot {
        /// The file.
        path: String,
        /// What went wrong.
        msg: String,
    },
}

impl ReportError {
    /// The process exit code `cellsched report` uses for this error:
    /// 2 bad option, 3 Slurm accounting unavailable, 4 no jobs in the window,
    /// 5 malformed sacct output, 6 unknown user, 1 anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            ReportError::Invalid { .. } => 2,
            ReportError::SlurmUnavailable { .. } => 3,
            ReportError::NoJobs(_) => 4,
            ReportError::MalformedLine { .. } => 5,
            ReportError::UnknownUser(_) => 6,
            ReportError::File { .. } | ReportError::Plot { .. } => 1,
        }
    }

    /// Shorthand for [`ReportError::Invalid`].
    pub fn invalid(
        what: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        ReportError::Invalid {
            what: what.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    pub(crate) fn file(path: &std::path::Path, msg: impl std::fmt::Display) -> Self {
        ReportError::File {
            path: path.display().to_string(),
            msg: msg.to_string(),
        }
    }
}
