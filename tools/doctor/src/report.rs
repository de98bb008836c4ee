//! What doctor found: one [`Finding`] per check, rendered as text (one line
//! each) or serialised as JSON.
use serde::Serialize;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Works, but something is likely wrong or missing.
    Warn,
    /// cellsched will not work as intended until fixed.
    Fail,
}

impl Status {
    /// `OK`, `WARN`, `FAIL`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Short name of what was checked (`slurm.conf PriorityType`, `cellsched.toml`).
    pub check: String,
    /// OK, WARN or FAIL.
    pub status: Status,
    /// What was found, naming files and lines.
    pub message: String,
    /// What to do about it (WARN and FAIL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    /// An OK finding.
    pub fn ok(check: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Ok, message: message.into(), fix: None }
    }
    /// A WARN finding with its fix.
    pub fn warn(check: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Warn, message: message.into(), fix: Some(fix.into()) }
    }
    /// A FAIL finding with its fix.
    pub fn fail(check: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Fail, message: message.into(), fix: Some(fix.into()) }
    }

    /// One line: `FAIL check: message -- fix: ...`.
    pub fn line(&self) -> String {
        let mut s = format!("{:<4} {}: {}", self.status.label(), self.check, self.message);
        if let Some(f) = &self.fix {
            s.push_str(" -- fix: ");
            s.push_str(f);
        }
        s.replace('\n', " ")
    }
}

/// All findings of one doctor run, in check order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// The findings.
    pub checks: Vec<Finding>,
}

impl Report {
    /// How many findings have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|f| f.status == status).count()
    }

    /// True when no check failed.
    pub fn ok(&self) -> bool {
        self.count(Status::Fail) == 0
    }

    /// The text form: one line per finding, then a summary line.
    pub fn text(&self) -> String {
        let mut s: String = self.checks.iter().map(|f| f.line() + "\n").collect();
        s.push_str(&format!(
            "{} OK, {} WARN, {} FAIL\n",
            self.count(Status::Ok),
            self.count(Status::Warn),
            self.count(Status::Fail)
        ));
        s
    }

    /// The findings of checks whose name starts with `prefix`.
    pub fn of(&self, prefix: &str) -> Vec<&Finding> {
        self.checks.iter().filter(|f| f.check.starts_with(prefix)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_counts() {
        let r = Report {
            checks: vec![
                Finding::ok("a", "fine"),
                Finding::warn("b", "hmm", "look"),
                Finding::fail("c", "bad\nthing", "repair it"),
            ],
        };
        assert_eq!(r.checks[2].line(), "FAIL c: bad thing -- fix: repair it");
        assert_eq!(r.checks[0].line(), "OK   a: fine");
        assert!(!r.ok());
        assert!(r.text().ends_with("1 OK, 1 WARN, 1 FAIL\n"));
        assert_eq!(r.of("b").len(), 1);
        assert!(Report { checks: vec![Finding::warn("b", "x", "y")] }.ok());
    }
}
