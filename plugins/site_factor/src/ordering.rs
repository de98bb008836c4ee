//! From pending jobs to site factors: the pure part of the plugin.
//!
//! A job takes part in the A-SRPT order only when job_submit/cellsched
//! recorded a placement [`Decision`] in its `AdminComment`: that gives the
//! predicted seconds per iteration. Remaining time = iterations × iteration
//! time, iterations from `CELLSCHED_DL_ITERS` in the job environment; when
//! they are unknown the time limit (or the configured default) stands in.
//! Jobs without a decision keep Slurm's stock site factor.
use cellsched_core::asrpt::{self, AsrptConfig, PendingJob};
use cellsched_core::config::OrderingConfig;
use cellsched_core::Decision;

/// Environment key holding declared iterations (set by the SPANK plugin).
pub const ITERS_KEY: &str = "CELLSCHED_DL_ITERS";

/// The value of `key` in `KEY=VALUE` entries, accepting a `SPANK_` prefix.
pub fn env_value<'a>(entries: &'a [String], key: &str) -> Option<&'a str> {
    entries.iter().rev().find_map(|e| {
        let (k, v) = e.split_once('=')?;
        (k.strip_prefix("SPANK_").unwrap_or(k) == key).then_some(v)
    })
}

/// What the plugin reads from one job record.
#[derive(Debug, Clone, Default)]
pub struct JobFields<'a> {
    /// Slurm job id.
    pub id: u32,
    /// Submit time (Unix seconds).
    pub submit_time_s: i64,
    /// `AdminComment`, if any.
    pub admin_comment: Option<&'a str>,
    /// `spank_job_env` entries.
    pub env: Vec<String>,
    /// Time limit in minutes; `None` when unset or infinite.
    pub time_limit_min: Option<u32>,
}

/// The A-SRPT view of a job, or `None` if cellsched did not place it.
pub fn pending_job(job: &JobFields<'_>, cfg: &OrderingConfig) -> Option<PendingJob> {
    let decision = Decision::parse_admin_comment(job.admin_comment?)?;
    let iters = env_value(&job.env, ITERS_KEY).and_then(|v| v.trim().parse::<u64>().ok()).filter(|i| *i > 0);
    let remaining_s = match iters {
        Some(i) => asrpt::remaining_time_s(i as f64, 0.0, decision.iter_s, None),
        None => job.time_limit_min.map(|m| f64::from(m) * 60.0).unwrap_or(cfg.default_remaining_s),
    };
    Some(PendingJob { id: job.id, submit_time_s: job.submit_time_s as f64, remaining_s })
}

/// The A-SRPT settings for the site factor scale.
pub fn asrpt_config(cfg: &OrderingConfig) -> AsrptConfig {
    AsrptConfig { aging_bound_s: cfg.aging_bound_s, max_priority: cfg.site_factor_max.max(2), ..AsrptConfig::default() }
}

/// `site_factor` for a priority: `base` (Slurm's `NICE_OFFSET`, meaning 0) plus it.
pub fn site_factor(base: u32, priority: u32) -> u32 {
    base.saturating_add(priority)
}

/// Site factors for the whole pending set: `(job id, site_factor)`.
pub fn site_factors(jobs: &[PendingJob], now_s: f64, cfg: &OrderingConfig, base: u32) -> Vec<(u32, u32)> {
    let acfg = asrpt_config(cfg);
    asrpt::order(jobs, now_s, &acfg).into_iter().map(|r| (r.id, site_factor(base, r.priority))).collect()
}

/// Site factor for one job on its own (at submit).
pub fn site_factor_one(job: &PendingJob, now_s: f64, cfg: &OrderingConfig, base: u32) -> u32 {
    site_factor(base, asrpt::priority_for(job, now_s, &asrpt_config(cfg)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u32 = 0x8000_0000;

    fn comment(iter_s: f64) -> String {
        format!("cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s={iter_s:.6} src=datasheet")
    }

    fn job<'a>(id: u32, submit: i64, c: Option<&'a str>, iters: Option<u64>) -> JobFields<'a> {
        let env = iters.map(|i| vec![format!("SPANK_CELLSCHED_DL_ITERS={i}")]).unwrap_or_default();
        JobFields { id, submit_time_s: submit, admin_comment: c, env, time_limit_min: Some(60) }
    }

    #[test]
    fn remaining_time_from_decision_and_iters() {
        let cfg = OrderingConfig::default();
        let c = comment(0.5);
        let p = pending_job(&job(7, 100, Some(&c), Some(1000)), &cfg).unwrap();
        assert_eq!((p.id, p.submit_time_s, p.remaining_s), (7, 100.0, 500.0));
        // Unknown iterations: the time limit stands in, else the default.
        assert_eq!(pending_job(&job(7, 100, Some(&c), None), &cfg).unwrap().remaining_s, 3600.0);
        let mut j = job(7, 100, Some(&c), None);
        j.time_limit_min = None;
        assert_eq!(pending_job(&j, &cfg).unwrap().remaining_s, cfg.default_remaining_s);
    }

    #[test]
    fn jobs_without_decision_are_not_ordered() {
        let cfg = OrderingConfig::default();
        assert!(pending_job(&job(1, 0, None, Some(10)), &cfg).is_none());
        assert!(pending_job(&job(1, 0, Some("set by admin"), Some(10)), &cfg).is_none());
    }

    #[test]
    fn shorter_job_gets_higher_factor_even_if_submitted_later() {
        let cfg = OrderingConfig::default();
        let (cl, cs) = (comment(1.0), comment(1.0));
        let long = pending_job(&job(1, 1000, Some(&cl), Some(100_000)), &cfg).unwrap();
        let short = pending_job(&job(2, 1010, Some(&cs), Some(100)), &cfg).unwrap();
        let f = site_factors(&[long, short], 1020.0, &cfg, BASE);
        let get = |id| f.iter().find(|(i, _)| *i == id).unwrap().1;
        assert!(get(2) > get(1) && get(1) > BASE, "{f:?}");
        assert!(get(2) - BASE <= cfg.site_factor_max);
        // The per-job value at submit agrees on the order and bounds the list value.
        let (s1, s2) = (site_factor_one(&long, 1020.0, &cfg, BASE), site_factor_one(&short, 1020.0, &cfg, BASE));
        assert!(s2 > s1 && get(2) <= s2 && get(1) <= s1);
    }

    #[test]
    fn aging_bound_promotes_long_waiters() {
        let cfg = OrderingConfig { aging_bound_s: 600.0, ..OrderingConfig::default() };
        let c = comment(1.0);
        let old_long = pending_job(&job(1, 0, Some(&c), Some(100_000)), &cfg).unwrap();
        let new_short = pending_job(&job(2, 900, Some(&c), Some(10)), &cfg).unwrap();
        let f = site_factors(&[new_short, old_long], 1000.0, &cfg, BASE);
        assert_eq!(f[0].0, 1, "aged job first: {f:?}");
    }
}
