//! The benchmark's error type: every variant names the file or input at fault.
use thiserror::Error;

/// Errors reading the reference data.
#[derive(Debug, Error)]
pub enum BenchError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file's contents are not what its format says.
    #[error("{path}: {msg}")]
    Format {
        /// The file (and line, when known).
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// The catalogs refused a model or GPU type.
    #[error(transparent)]
    Core(#[from] cellsched_core::CoreError),
}

impl BenchError {
    pub(crate) fn format(path: impl Into<String>, msg: impl Into<String>) -> BenchError {
        BenchError::Format { path: path.into(), msg: msg.into() }
    }
}

/// Reads a file to a string, naming it on error.
pub(crate) fn read(path: &std::path::Path) -> Result<String, BenchError> {
    std::fs::read_to_string(path).map_err(|source| BenchError::Read { path: path.display().to_string(), source })
}
