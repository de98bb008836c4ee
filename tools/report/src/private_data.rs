//! Slurm's `PrivateData=jobs` for `cellsched report`.
//!
//! slurmctld hides other users' jobs from `squeue` and `scontrol show job`
//! when slurm.conf has `PrivateData=jobs`, but `sacct` answers from
//! slurmdbd, which follows its own `PrivateData` in slurmdbd.conf: a site
//! that sets it in slurm.conf only would let `sacct --allusers` (and so a
//! report) show every user's jobs and AdminComments. A report therefore
//! follows slurm.conf's `PrivateData=jobs` itself: a caller who is not root,
//! the SlurmUser or a Slurm operator/administrator sees only their own jobs
//! ([`restrict`]).
use crate::error::ReportError;
use crate::sacct::Query;

/// What slurm.conf says about job privacy (from `scontrol show config`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobPrivacy {
    /// `PrivateData` lists `jobs`.
    pub private_jobs: bool,
    /// The SlurmUser's name (`SlurmUser = slurm(64030)`).
    pub slurm_user: Option<String>,
}

impl JobPrivacy {
    /// Reads `PrivateData` and `SlurmUser` from `scontrol show config` output.
    pub fn of_show_config(text: &str) -> JobPrivacy {
        use cellsched_core::slurm_text::show_config_value;
        let private_jobs = show_config_value(text, "PrivateData").is_some_and(|v| v.split(',').any(|w| w.trim().eq_ignore_ascii_case("jobs")));
        let slurm_user = show_config_value(text, "SlurmUser").map(|v| v.split('(').next().unwrap_or("").trim().to_string()).filter(|u| !u.is_empty());
        JobPrivacy { private_jobs, slurm_user }
    }
}

/// Who runs the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Real uid.
    pub uid: u32,
    /// User name (`None` when the uid has no passwd entry).
    pub name: Option<String>,
}

impl Caller {
    /// The process's real user.
    pub fn current() -> Caller {
        // SAFETY: getuid cannot fail; getpwuid's result is only read before the next call.
        let uid = unsafe { libc::getuid() };
        let pw = unsafe { libc::getpwuid(uid) };
        let name = (!pw.is_null())
            .then(|| unsafe { std::ffi::CStr::from_ptr((*pw).pw_name) }.to_string_lossy().into_owned());
        Caller { uid, name }
    }
}

/// True when `caller` may see only their own jobs: jobs are private and
/// the caller is not root, the SlurmUser or an operator (`is_operator`,
/// asked only when needed).
pub fn own_jobs_only(privacy: &JobPrivacy, caller: &Caller, is_operator: impl FnOnce(&str) -> bool) -> bool {
    if !privacy.private_jobs || caller.uid == 0 {
        return false;
    }
    let own = caller.name.clone().unwrap_or_else(|| caller.uid.to_string());
    !(privacy.slurm_user.as_deref() == Some(own.as_str()) || is_operator(&own))
}

/// The query a report may run for `caller`: unchanged unless the caller
/// may see only their own jobs ([`own_jobs_only`]); then limited to the
/// caller's own jobs, and refused when it names other users.
pub fn restrict(q: &Query, privacy: &JobPrivacy, caller: &Caller, is_operator: impl FnOnce(&str) -> bool) -> Result<Query, ReportError> {
    if !own_jobs_only(privacy, caller, is_operator) {
        return Ok(q.clone());
    }
    let own = caller.name.clone().unwrap_or_else(|| caller.uid.to_string());
    let asked: Vec<&str> = q.user.as_deref().map(|u| u.split(',').map(str::trim).filter(|u| !u.is_empty()).collect()).unwrap_or_default();
    if let Some(other) = asked.iter().find(|u| **u != own && **u != caller.uid.to_string()) {
        return Err(ReportError::Invalid {
            what: "--user".into(),
            value: other.to_string(),
            expected: format!("your own user name ({own}): PrivateData=jobs in slurm.conf shows other users' jobs only to root, the SlurmUser and Slurm operators"),
        });
    }
    Ok(Query { user: Some(own), ..q.clone() })
}

/// Whether Slurm's accounting gives `user` the operator or administrator
/// level (`sacctmgr show user`); false when sacctmgr cannot tell.
pub fn sacctmgr_is_operator(user: &str) -> bool {
    let out = crate::sacct::run_tool("sacctmgr", &["--noheader".into(), "--parsable2".into(), "show".into(), "user".into(), user.into(), "format=AdminLevel".into()]);
    out.is_ok_and(|t| t.lines().any(|l| matches!(l.trim().to_ascii_lowercase().as_str(), "operator" | "administrator")))
}

/// slurm.conf's job privacy as `scontrol show config` says; when slurmctld
/// cannot tell, jobs count as private.
fn running_privacy() -> JobPrivacy {
    match crate::sacct::run_tool("scontrol", &["show".into(), "config".into()]) {
        Ok(conf) => JobPrivacy::of_show_config(&conf),
        Err(e) => {
            log::warn!("{e}; cannot tell whether slurm.conf has PrivateData=jobs: only your own jobs are read");
            JobPrivacy { private_jobs: true, slurm_user: None }
        }
    }
}

/// [`restrict`] for the process's caller, reading `scontrol show config`
/// (not run for root).
pub fn restrict_for_caller(q: &Query) -> Result<Query, ReportError> {
    let caller = Caller::current();
    if caller.uid == 0 {
        return Ok(q.clone());
    }
    restrict(q, &running_privacy(), &caller, sacctmgr_is_operator)
}

/// [`own_jobs_only`] for the process's caller: Slurm (`squeue`, `scontrol`)
/// shows this caller only their own jobs (`cellsched whatif` says so).
pub fn caller_sees_own_jobs_only() -> bool {
    let caller = Caller::current();
    caller.uid != 0 && own_jobs_only(&running_privacy(), &caller, sacctmgr_is_operator)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "Configuration data as of 2026-11-26T09:00:00\nPrivateData             = accounts,jobs\nSlurmUser               = slurm(64030)\n";

    #[test]
    fn private_jobs_limit_a_report_to_the_callers_own_jobs() {
        let p = JobPrivacy::of_show_config(CONF);
        assert_eq!(p, JobPrivacy { private_jobs: true, slurm_user: Some("slurm".into()) });
        assert!(!JobPrivacy::of_show_config("PrivateData = none\n").private_jobs);
        assert!(!JobPrivacy::of_show_config("PrivateData = jobcomp\n").private_jobs);
        let bob = Caller { uid: 1001, name: Some("bob".into()) };
        let all = Query::default();
        let never = |_: &str| false;
        // Every user's jobs become bob's own.
        assert_eq!(restrict(&all, &p, &bob, never).unwrap().user.as_deref(), Some("bob"));
        assert_eq!(restrict(&Query { user: Some("bob".into()), ..all.clone() }, &p, &bob, never).unwrap().user.as_deref(), Some("bob"));
        let e = restrict(&Query { user: Some("bob,alice".into()), ..all.clone() }, &p, &bob, never).unwrap_err().to_string();
        assert!(e.contains("alice") && e.contains("PrivateData=jobs"), "{e}");
        // root, the SlurmUser and operators see everyone; so does anyone without PrivateData=jobs.
        let root = Caller { uid: 0, name: Some("root".into()) };
        let slurm = Caller { uid: 64030, name: Some("slurm".into()) };
        assert_eq!(restrict(&all, &p, &root, never).unwrap(), all);
        assert_eq!(restrict(&all, &p, &slurm, never).unwrap(), all);
        assert_eq!(restrict(&all, &p, &bob, |u| u == "bob").unwrap(), all);
        assert_eq!(restrict(&all, &JobPrivacy::default(), &bob, never).unwrap(), all);
        assert!(own_jobs_only(&p, &bob, never) && !own_jobs_only(&p, &root, never) && !own_jobs_only(&p, &bob, |_| true));
    }
}
