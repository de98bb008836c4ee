//! The core's error type: every variant names the offending input; and the
//! helpers the catalogs share to build it from TOML text (line numbers,
//! TOML errors, close-name suggestions).
use thiserror::Error;

/// Errors from parsing and estimation. Messages name the field, value and,
/// for files, the line, so users can fix their input.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// A value did not parse; `what` names the field and `expected` the form.
    #[error("invalid {what} '{value}': expected {expected}")]
    Invalid {
        /// The field or option.
        what: String,
        /// The value given.
        value: String,
        /// The accepted form.
        expected: String,
    },
    /// A name not in a catalog; `suggestions` are the closest known names.
    #[error("unknown {kind} '{name}'{}", fmt_suggestions(.suggestions))]
    Unknown {
        /// What kind of name (`model`, `GPU type`, ...).
        kind: &'static str,
        /// The name given.
        name: String,
        /// Up to five close known names.
        suggestions: Vec<String>,
    },
    /// A file that could not be read or parsed; `line` is 1-based when known.
    #[error("{path}{}: {msg}", .line.map(|l| format!(":{l}")).unwrap_or_default())]
    File {
        /// The file (or the source's name, e.g. `<builtin gpus.toml>`).
        path: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// What is wrong there.
        msg: String,
    },
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

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// Converts a TOML error into [`CoreError::File`] with line and the offending line's text.
pub(crate) fn toml_error(origin: &str, src: &str, e: &toml::de::Error) -> CoreError {
    let (line, text) = match e.span() {
        Some(sp) => {
            let line = line_of(src, sp.start);
            (Some(line), src.lines().nth(line - 1).unwrap_or("").trim().to_string())
        }
        None => (None, String::new()),
    };
    let msg = e.message().trim().to_string();
    let msg = if text.is_empty() { msg } else { format!("{msg} (at `{text}`)") };
    CoreError::File { path: origin.to_string(), line, msg }
}

/// Up to five candidates closest to `query` by edit distance (or containing it).
pub(crate) fn close_names<'a>(query: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let q = query.to_ascii_lowercase();
    let limit = (q.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = candidates
        .filter_map(|c| {
            let cl = c.to_ascii_lowercase();
            let d = levenshtein(&q, &cl);
            let contains = q.len() >= 2 && (cl.contains(&q) || q.contains(&cl));
            (d <= limit || contains).then(|| (if contains { d.min(limit) } else { d }, c.to_string()))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, c)| c).collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
