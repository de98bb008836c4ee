//! The core's error type: every variant names the offending input.
use thiserror::Error;

/// Errors from parsing and estimation. Messages name the field, value and,
/// for files, the line, so users can fix their input.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// A value did not parse; `what` names the field and `expected` the form.
    #[error("invalid {what} '{value}': expected {expected}")]
    Invalid { what: String, value: String, expected: String },
    /// A name not in a catalog; `suggestions` are the closest known names.
    #[error("unknown {kind} '{name}'{}", fmt_suggestions(.suggestions))]
    Unknown { kind: &'static str, name: String, suggestions: Vec<String> },
    /// A file that could not be read or parsed; `line` is 1-based when known.
    #[error("{path}{}: {msg}", .line.map(|l| format!(":{l}")).unwrap_or_default())]
    File { path: String, line: Option<usize>, msg: String },
    /// No plan fits: e.g. the model does not fit in memory on this Cell.
    #[error("infeasible: {0}")]
    Infeasible(String),
}

fn fmt_suggestions(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" (did you mean: {}?)", s.join(", "))
    }
}

impl CoreError {
    /// Shorthand for [`CoreError::Invalid`].
    pub fn invalid(what: impl Into<String>, value: impl Into<String>, expected: impl Into<String>) -> Self {
        CoreError::Invalid { what: what.into(), value: value.into(), expected: expected.into() }
    }
}
