//! The profiler's error type; each variant names the offending input and maps
//! to a documented exit code ([`ProfilerError::exit_code`]).
use thiserror::Error;

/// Errors from NVML, the profiled command and the profile database.
#[derive(Debug, Error)]
pub enum ProfilerError {
    /// NVML could not be loaded or initialised (no NVIDIA driver on this
    /// machine, or `libnvidia-ml.so.1` missing). Exit code 3.
    #[error("NVML unavailable: {0} (no NVIDIA driver on this machine? use --no-nvml to run without GPU sampling)")]
    NvmlUnavailable(String),
    /// NVML is loaded but a query failed. Exit code 1.
    #[error("NVML {what}: {msg}")]
    Nvml {
        /// The field, setting or operation.
        what: String,
        /// What went wrong.
        msg: String,
    },
    /// An invalid option value (e.g. a regex without exactly one capture group). Exit code 2.
    #[error("invalid {what} '{value}': expected {expected}")]
    Invalid {
        /// The field, setting or operation.
        what: String,
        /// The value given.
        value: String,
        /// The accepted form.
        expected: String,
    },
    /// The profiled command could not be started. Exit code 1.
    #[error("cannot run '{command}': {msg}")]
    Spawn {
        /// The command that was run.
        command: String,
        /// What went wrong.
        msg: String,
    },
    /// The collective benchmark cannot run here (torch, CUDA or NCCL
    /// missing in the Python environment). Exit code 3.
    #[error("collective benchmark unavailable: {0}")]
    CommUnavailable(String),
    /// The command printed too few iteration lines to measure. Exit code 4.
    #[error("no iteration timings measured: {0}")]
    NoIterations(String),
    /// Interrupted by SIGINT/SIGTERM: the child was killed and the profile
    /// database left untouched. Exit code 130.
    #[error("interrupted: command killed, profile database not changed")]
    Interrupted,
    /// The profile database could not be read or written. Exit code 1.
    #[error("profile database: {0}")]
    Db(#[from] cellsched_core::CoreError),
    /// Other I/O. Exit code 1.
    #[error("{what}: {source}")]
    Io {
        /// The field, setting or operation.
        what: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

impl ProfilerError {
    /// The exit code `cellsched profile` uses for this error: 2 bad option,
    /// 3 NVML/driver (or torch for `profile comm`) unavailable, 4 no iterations measured, 130 interrupted,
    /// 1 anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            ProfilerError::Invalid { .. } => 2,
            ProfilerError::NvmlUnavailable(_) | ProfilerError::CommUnavailable(_) => 3,
            ProfilerError::NoIterations(_) => 4,
            ProfilerError::Interrupted => 130,
            _ => 1,
        }
    }

    /// Shorthand for [`ProfilerError::Invalid`].
    pub fn invalid(
        what: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        ProfilerError::Invalid {
            what: what.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        ProfilerError::Io {
            what: what.into(),
            source,
        }
    }
}
