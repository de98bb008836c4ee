//! The simulator's error type: every variant names the offending input.
use thiserror::Error;

/// Errors from reading inputs and configuring a simulation.
#[derive(Debug, Error)]
pub enum SimError {
    /// A file could not be opened or read.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The underlying I/O error (in the message, not repeated as a cause).
        error: std::io::Error,
    },
    /// A bad value in an input file; `line` is 1-based, `field` the column or key.
    #[error("{path}{}: field '{field}': {msg}", .line.map(|l| format!(":{l}")).unwrap_or_default())]
    Input {
        /// The file.
        path: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// The column or key.
        field: String,
        /// What went wrong.
        msg: String,
    },
    /// A bad option or setting (policy name, ablation list, ...).
    #[error("invalid {what} '{value}': expected {expected}")]
    Invalid {
        /// The field, setting or operation.
        what: String,
        /// The value given.
        value: String,
        /// The accepted form.
        expected: String,
    },
    /// An error from the cellsched core (catalogs, estimator, profile DB).
    #[error(transparent)]
    Core(#[from] cellsched_core::CoreError),
}

impl SimError {
    /// Shorthand for [`SimError::Input`].
    pub fn input(path: &str, line: Option<usize>, field: &str, msg: impl Into<String>) -> Self {
        SimError::Input { path: path.to_string(), line, field: field.to_string(), msg: msg.into() }
    }
    /// Shorthand for [`SimError::Invalid`].
    pub fn invalid(what: impl Into<String>, value: impl Into<String>, expected: impl Into<String>) -> Self {
        SimError::Invalid { what: what.into(), value: value.into(), expected: expected.into() }
    }
}
