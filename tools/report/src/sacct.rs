//! Running `sacct` (and `scontrol` for GPU capacity) for a query window.
//!
//! The command is `sacct --parsable2 --noheader --delimiter=<0x1f> --allocations
//! --duplicates --format=<SACCT_FIELDS>` plus `--starttime/--endtime`, `--partition`,
//! `--user` (or `--allusers`), `--jobs`, run with `SLURM_TIME_FORMAT=%s` so
//! times are Unix seconds. A second query with the same filters fetches the
//! user-writable display fields ([`DISPLAY_FIELDS`]); see [`crate::record`]
//! for why they are kept apart. The runs of a requeued job (one row each,
//! Submit reset at every requeue) are folded into one job whose JCT counts
//! from its first submission ([`crate::record::merge_requeued_runs`]). Output is read as lossy UTF-8.
//! `SLURM_CONF` is inherited (`eval "$(cellsched cluster env)"`).
use crate::error::ReportError;
use crate::record::{merge_requeued_runs, parse_display_output, parse_sacct_output, set_display, JobRecord, DELIM, DISPLAY_FIELDS, SACCT_FIELDS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::process::Command;

/// What to ask sacct for. Times are passed to sacct as given (any form sacct
/// accepts: `2024-05-01T10:00`, `now-2hours`, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Query {
    /// `--starttime`; when `None` and no `jobs` are given, the whole
    /// accounting history (sacct alone would show only today's jobs).
    pub start: Option<String>,
    /// `--endtime`.
    pub end: Option<String>,
    /// `--partition` (comma list).
    pub partition: Option<String>,
    /// `--user` (comma list); all users when `None`.
    pub user: Option<String>,
    /// `--jobs` (comma list of ids).
    pub jobs: Option<String>,
}

impl Query {
    /// A short text naming the window, used in messages ("no jobs in window ...").
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}..{}",
            self.start.as_deref().unwrap_or(if self.jobs.is_some() {
                "any"
            } else {
                "midnight"
            }),
            self.end.as_deref().unwrap_or("now")
        );
        for (k, v) in [
            ("partition", &self.partition),
            ("user", &self.user),
            ("jobs", &self.jobs),
        ] {
            if let Some(v) = v {
                s.push_str(&format!(" {k}={v}"));
            }
        }
        s
    }

    /// The sacct arguments for this query (the trusted fields).
    pub fn sacct_args(&self) -> Vec<String> {
        self.args_for(SACCT_FIELDS)
    }

    /// The sacct arguments for the display-only fields.
    pub fn display_args(&self) -> Vec<String> {
        self.args_for(DISPLAY_FIELDS)
    }

    fn args_for(&self, fields: &[&str]) -> Vec<String> {
        let mut a = vec![
            "--parsable2".to_string(),
            "--noheader".into(),
            format!("--delimiter={DELIM}"),
            "--allocations".into(),
            // Every run of a requeued job (folded by `merge_requeued_runs`).
            "--duplicates".into(),
            format!("--format={}", fields.join(",")),
        ];
        if let Some(s) = &self.start {
            a.push(format!("--starttime={s}"));
        } else if self.jobs.is_none() {
            // Without a start sacct shows only today's jobs; a report wants
            // everything the database holds unless told otherwise.
            a.push("--starttime=1970-01-02T00:00:00".into());
        }
        if let Some(e) = &self.end {
            a.push(format!("--endtime={e}"));
        }
        if let Some(p) = &self.partition {
            a.push(format!("--partition={p}"));
        }
        match &self.user {
            Some(u) => a.push(format!("--user={u}")),
            None => a.push("--allusers".into()),
        }
        if let Some(j) = &self.jobs {
            a.push(format!("--jobs={j}"));
        }
        a
    }

    /// Checks that every `--user` name exists on this host, so a typo is
    /// reported as such instead of as an empty window.
    pub fn check_users(&self) -> Result<(), ReportError> {
        let Some(users) = &self.user else {
            return Ok(());
        };
        for u in users.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            if u.chars().all(|c| c.is_ascii_digit()) {
                continue; // numeric uid: sacct accepts it as is
            }
            let c =
                std::ffi::CString::new(u).map_err(|_| ReportError::UnknownUser(u.to_string()))?;
            // SAFETY: getpwnam with a valid C string; we only test for NULL.
            let pw = unsafe { libc::getpwnam(c.as_ptr()) };
            if pw.is_null() {
                return Err(ReportError::UnknownUser(u.to_string()));
            }
        }
        Ok(())
    }
}

/// Runs a Slurm client tool and returns its stdout; a missing binary or a
/// non-zero exit becomes [`ReportError::SlurmUnavailable`] with its stderr.
pub fn run_tool(tool: &str, args: &[String]) -> Result<String, ReportError> {
    log::debug!("running {tool} {}", args.join(" "));
    let out = Command::new(tool)
        .args(args)
        .env("SLURM_TIME_FORMAT", "%s")
        .output()
        .map_err(|e| ReportError::SlurmUnavailable {
            tool: tool.into(),
            msg: format!("cannot run {tool}: {e}"),
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // The last line is the fatal one (e.g. "sacct: fatal: ...").
        let msg = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        return Err(ReportError::SlurmUnavailable {
            tool: tool.into(),
            msg: if msg.is_empty() {
                format!("exit status {}", out.status)
            } else {
                msg
            },
        });
    }
    // sacct prints some failures (e.g. slurmdbd down) on stderr with exit 0
    // and no output; surface them rather than "no jobs".
    if out.stdout.is_empty() {
        if let Some(l) = stderr.lines().find(|l| l.contains("error")) {
            return Err(ReportError::SlurmUnavailable {
                tool: tool.into(),
                msg: l.trim().to_string(),
            });
        }
    }
    // Users' fields may hold any bytes; they are display-only.
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Queries sacct and parses the jobs; an empty result is [`ReportError::NoJobs`].
/// With `PrivateData=jobs` in slurm.conf the query is limited to the
/// caller's own jobs unless the caller may see all ([`crate::private_data`]).
pub fn fetch_jobs(q: &Query) -> Result<Vec<JobRecord>, ReportError> {
    q.check_users()?;
    let q = &crate::private_data::restrict_for_caller(q)?;
    let text = run_tool("sacct", &q.sacct_args())?;
    let mut jobs = parse_sacct_output(&text)?;
    if jobs.is_empty() {
        return Err(ReportError::NoJobs(q.describe()));
    }
    let ids: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
    let display = run_tool("sacct", &q.display_args())?;
    set_display(&mut jobs, &parse_display_output(&display, &ids));
    Ok(merge_requeued_runs(jobs))
}

/// GPU capacity per type: total GPUs of each type over the nodes.
pub type Capacity = BTreeMap<String, u32>;

/// Parses `--capacity a100=8,v100=16`.
pub fn parse_capacity(s: &str) -> Result<Capacity, ReportError> {
    let mut c = Capacity::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let bad =
            || ReportError::invalid("--capacity item", item, "TYPE=COUNT, e.g. a100=8,v100=16");
        let (t, n) = item.split_once('=').ok_or_else(bad)?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if t.trim().is_empty() {
            return Err(bad());
        }
        *c.entry(t.trim().to_ascii_lowercase()).or_insert(0) += n;
    }
    if c.is_empty() {
        return Err(ReportError::invalid(
            "--capacity",
            s,
            "TYPE=COUNT[,TYPE=COUNT...]",
        ));
    }
    Ok(c)
}

/// Parses `scontrol show nodes --oneliner` output: sums the `Gres=gpu:TYPE:N`
/// entries per type (an untyped `gpu:N` counts as type `gpu`).
pub fn parse_scontrol_nodes(text: &str) -> Capacity {
    let mut c = Capacity::new();
    for line in text.lines() {
        let Some(gres) = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("Gres="))
        else {
            continue;
        };
        for item in gres.split(',') {
            // gpu:a100:4(S:0-1) or gpu:4
            let item = item.split('(').next().unwrap_or("");
            let parts: Vec<&str> = item.split(':').collect();
            match parts.as_slice() {
                ["gpu", ty, n] => {
                    if let Ok(n) = n.parse::<u32>() {
                        *c.entry(ty.to_ascii_lowercase()).or_insert(0) += n;
                    }
                }
                ["gpu", n] => {
                    if let Ok(n) = n.parse::<u32>() {
                        *c.entry("gpu".into()).or_insert(0) += n;
                    }
                }
                _ => {}
            }
        }
    }
    c
}

/// The cluster's GPU capacity from `scontrol show nodes --oneliner`.
pub fn fetch_capacity() -> Result<Capacity, ReportError> {
    let text = run_tool(
        "scontrol",
        &["show".into(), "nodes".into(), "--oneliner".into()],
    )?;
    Ok(parse_scontrol_nodes(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacct_args_carry_the_query() {
        let q = Query {
            start: Some("now-1hours".into()),
            end: None,
            partition: Some("gpu".into()),
            user: None,
            jobs: Some("3,4".into()),
        };
        let a = q.sacct_args();
        assert!(a.contains(&"--starttime=now-1hours".to_string()));
        assert!(a.contains(&"--partition=gpu".to_string()));
        assert!(a.contains(&"--allusers".to_string()));
        assert!(a.contains(&"--jobs=3,4".to_string()));
        assert!(a
            .iter()
            .any(|x| x.starts_with("--format=JobIDRaw,JobID,") && x.ends_with(",AdminComment")));
        assert!(!a.iter().any(|x| x.contains("Comment,") || x.contains("JobName")), "user-writable fields stay out of the trusted query");
        assert!(a.contains(&"--delimiter=\u{1f}".to_string()));
        assert!(q.display_args().contains(&"--format=JobIDRaw,JobName,Comment".to_string()));
        assert!(q.describe().contains("now-1hours..now") && q.describe().contains("jobs=3,4"));
        let d = Query::default().sacct_args();
        assert!(d.iter().any(|x| x.starts_with("--starttime=1970")));
    }

    #[test]
    fn unknown_user_is_reported() {
        let q = Query {
            user: Some("root,no-such-user-cellsched".into()),
            ..Default::default()
        };
        let e = q.check_users().unwrap_err();
        assert!(e.to_string().contains("no-such-user-cellsched"));
        assert_eq!(e.exit_code(), 6);
        assert!(Query {
            user: Some("root,0".into()),
            ..Default::default()
        }
        .check_users()
        .is_ok());
    }

    #[test]
    fn missing_tool_is_unavailable() {
        let e = run_tool("cellsched-no-such-sacct", &[]).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("cellsched-no-such-sacct"), "{e}");
        let e = run_tool("false", &[]).unwrap_err();
        assert_eq!(e.exit_code(), 3);
    }

    #[test]
    fn capacity_forms() {
        let c = parse_capacity("a100=8, v100=16").unwrap();
        assert_eq!(c.get("a100"), Some(&8));
        assert_eq!(c.get("v100"), Some(&16));
        for bad in ["a100", "a100=x", "=3", ""] {
            let e = parse_capacity(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
        }
        let text = "NodeName=a100-1 Arch=x86_64 Gres=gpu:a100:4(S:0) State=IDLE\nNodeName=a100-2 Gres=gpu:a100:4 State=IDLE\nNodeName=c1 Gres=(null)\nNodeName=x Gres=gpu:2,gpu:v100:8\n";
        let c = parse_scontrol_nodes(text);
        assert_eq!(c.get("a100"), Some(&8));
        assert_eq!(c.get("v100"), Some(&8));
        assert_eq!(c.get("gpu"), Some(&2));
    }
}
