//! A-SRPT ordering of pending jobs.
//!
//! A-SRPT (adaptive shortest-remaining-processing-time for distributed DL
//! jobs) maps every job onto a *virtual single machine* whose processing time
//! for the job is its predicted remaining time on its best feasible Cell
//! (remaining iterations × iteration time, iterations predicted by a random
//! forest for recurring jobs, see [`crate::predictor`]). Preemptive SRPT on
//! that machine — shortest remaining time first — gives the order in which
//! the real cluster should start jobs.
//!
//! Starvation guard (aging): a job whose *waiting time* `now - submit_time`
//! exceeds its aging threshold ([`aging_threshold_s`]) is *aged* and ranked
//! ahead of every non-aged job; aged jobs are FIFO among themselves. So once
//! a job has waited its threshold, only jobs that waited even longer can pass
//! it. The threshold is [`AsrptConfig::aging_bound_s`], or, with
//! [`AsrptConfig::aging_factor`] > 0, at least that many times the job's own
//! predicted remaining time: on an overloaded cluster where every job waits
//! longer than an absolute bound, an absolute bound turns A-SRPT into FIFO,
//! while a duration-scaled one bounds each job's slowdown (how long it can be
//! passed over relative to its own length) and keeps the SRPT order. Waiting
//! time (not a passed-over counter) is used because it needs no state across
//! scheduler passes and works identically in `site_factor_p_set` and `_p_update`.
//!
//! [`AsrptQueue`] keeps the same order incrementally (insert/remove/advance
//! the clock in O(log n)) for callers that rank on every event, such as the
//! simulator; it always yields exactly the order of [`order`].
//!
//! Priorities: [`priority_for`] maps one job to a priority without the list
//! (Slurm's per-job `site_factor_p_set` at submit); [`order`] ranks the whole
//! list and assigns priorities that are at most that per-job value, strictly
//! decreasing along the order and within `[1, max_priority]`, so both paths
//! agree. The scale: the upper half of `[1, max_priority]` is the aged band
//! (log-scaled in waiting time beyond the bound), the lower half the SRPT
//! band (log-scaled and decreasing in remaining time between
//! [`AsrptConfig::min_remaining_s`] and [`AsrptConfig::max_remaining_s`]).
//!
//! Ties are broken by earlier submit time, then lower id, so the output is a
//! deterministic function of the job set (independent of input order).
//! Cost: one sort, O(n log n); 10 000 jobs take well under a millisecond-scale
//! budget (see `benches/predictor.rs`).
use crate::error::CoreError;
use crate::freezing::FreezeProfile;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Configuration of the ordering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AsrptConfig {
    /// Waiting time after which a job is aged and promoted ahead of non-aged
    /// jobs (seconds, > 0). Default 24 h.
    pub aging_bound_s: f64,
    /// Largest priority handed out (≥ 2). Default 1 000 000.
    pub max_priority: u32,
    /// Remaining times at or below this get the top SRPT priority. Default 1 s.
    pub min_remaining_s: f64,
    /// Remaining times at or above this (and unknown ones) get the lowest
    /// SRPT priority. Default 10^7 s (~116 days).
    pub max_remaining_s: f64,
    /// Waiting time beyond the bound at which the aged band saturates.
    /// Default 30 days.
    pub max_aged_wait_s: f64,
    /// Duration-scaled aging: a job ages only after waiting at least this
    /// many times its own predicted remaining time (and at least
    /// `aging_bound_s`). 0 (the default) = the absolute bound alone.
    pub aging_factor: f64,
}

impl Default for AsrptConfig {
    fn default() -> Self {
        AsrptConfig {
            aging_bound_s: 24.0 * 3600.0,
            max_priority: 1_000_000,
            min_remaining_s: 1.0,
            max_remaining_s: 1e7,
            max_aged_wait_s: 30.0 * 86400.0,
            aging_factor: 0.0,
        }
    }
}

impl AsrptConfig {
    /// Checks the fields; errors name the field.
    pub fn validate(&self) -> Result<(), CoreError> {
        if !(self.aging_bound_s.is_finite() && self.aging_bound_s > 0.0) {
            return Err(CoreError::invalid(
                "aging_bound_s",
                self.aging_bound_s.to_string(),
                "a positive number of seconds",
            ));
        }
        if self.max_priority < 2 {
            return Err(CoreError::invalid("max_priority", self.max_priority.to_string(), "an integer >= 2"));
        }
        if !(self.min_remaining_s.is_finite() && self.min_remaining_s > 0.0) {
            return Err(CoreError::invalid(
                "min_remaining_s",
                self.min_remaining_s.to_string(),
                "a positive number of seconds",
            ));
        }
        if !(self.max_remaining_s.is_finite() && self.max_remaining_s > self.min_remaining_s) {
            return Err(CoreError::invalid(
                "max_remaining_s",
                self.max_remaining_s.to_string(),
                format!("a number of seconds above min_remaining_s ({})", self.min_remaining_s),
            ));
        }
        if !(self.max_aged_wait_s.is_finite() && self.max_aged_wait_s > 0.0) {
            return Err(CoreError::invalid(
                "max_aged_wait_s",
                self.max_aged_wait_s.to_string(),
                "a positive number of seconds",
            ));
        }
        if !(self.aging_factor.is_finite() && self.aging_factor >= 0.0) {
            return Err(CoreError::invalid(
                "aging_factor",
                self.aging_factor.to_string(),
                "a non-negative number (0 = absolute aging bound)",
            ));
        }
        Ok(())
    }

    /// Highest priority of the SRPT (non-aged) band; aged jobs get more.
    fn srpt_top(&self) -> u32 {
        self.max_priority.max(2) / 2
    }
}

/// A pending job as A-SRPT sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PendingJob {
    /// Slurm job id.
    pub id: u32,
    /// Submit time (seconds, same clock as `now_s`).
    pub submit_time_s: f64,
    /// Predicted remaining processing time on the best feasible Cell
    /// (see [`remaining_time_s`]). NaN or infinite = unknown: ranked last
    /// among non-aged jobs; negative counts as 0.
    pub remaining_s: f64,
}

/// One job's place in the order: `rank` 0 runs first; higher `priority`
/// runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ranked {
    /// Slurm job id.
    pub id: u32,
    /// 0-based position in the order.
    pub rank: u32,
    /// Priority in `[1, max_priority]`, strictly decreasing with rank.
    pub priority: u32,
}

/// Predicted remaining processing time: remaining iterations × iteration
/// time, or, for a freezing job, the effective remaining time integrated over
/// its schedule with its iteration penalty ([`FreezeProfile::remaining_time`]).
/// `total_iters` is the unfrozen iteration count (declared or predicted).
pub fn remaining_time_s(total_iters: f64, done_iters: f64, iter_time_s: f64, freeze: Option<&FreezeProfile>) -> f64 {
    match freeze {
        Some(f) => f.remaining_time(total_iters, done_iters, iter_time_s),
        None => {
            if !(iter_time_s.is_finite() && iter_time_s > 0.0) {
                return 0.0;
            }
            (total_iters - done_iters.max(0.0)).max(0.0) * iter_time_s
        }
    }
}

fn sanitize_remaining(r: f64) -> f64 {
    if r.is_nan() || r.is_infinite() {
        f64::INFINITY
    } else {
        r.max(0.0)
    }
}

/// Waiting time after which `job` is aged: `aging_bound_s`, or
/// `aging_factor` × its remaining time when that is larger (unknown
/// remaining times use the bound alone).
pub fn aging_threshold_s(job: &PendingJob, cfg: &AsrptConfig) -> f64 {
    let r = job.remaining_s;
    if cfg.aging_factor > 0.0 && r.is_finite() {
        cfg.aging_bound_s.max(cfg.aging_factor * r)
    } else {
        cfg.aging_bound_s
    }
}

/// The time after which `job` is aged (submit time plus [`aging_threshold_s`]).
pub fn aged_after_s(job: &PendingJob, cfg: &AsrptConfig) -> f64 {
    job.submit_time_s + aging_threshold_s(job, cfg)
}

/// Whether the job has waited longer than its aging threshold at `now_s`.
pub fn is_aged(job: &PendingJob, now_s: f64, cfg: &AsrptConfig) -> bool {
    // One comparison for `order` and `AsrptQueue`, so both agree exactly.
    now_s > aged_after_s(job, cfg)
}

/// Log-scaled map of `x` in `[lo, hi]` onto `[0, 1]` (clamped).
fn log_position(x: f64, lo: f64, hi: f64) -> f64 {
    if x.is_nan() || x >= hi {
        return 1.0;
    }
    if x <= lo {
        return 0.0;
    }
    ((x / lo).ln() / (hi / lo).ln()).clamp(0.0, 1.0)
}

/// Priority of one job without the rest of the list (Slurm's
/// `site_factor_p_set` at submit).
///
/// Non-aged jobs get the SRPT band `[1, max_priority/2]`: monotone
/// decreasing in `remaining_s`, log-scaled between `min_remaining_s` (top)
/// and `max_remaining_s` (1). Aged jobs get [`aged_priority`], always above
/// the SRPT band.
pub fn priority_for(job: &PendingJob, now_s: f64, cfg: &AsrptConfig) -> u32 {
    if is_aged(job, now_s, cfg) {
        return aged_priority(now_s - job.submit_time_s, cfg);
    }
    srpt_priority(job.remaining_s, cfg)
}

/// SRPT-band priority for a remaining time (see [`priority_for`]).
pub fn srpt_priority(remaining_s: f64, cfg: &AsrptConfig) -> u32 {
    let top = cfg.srpt_top();
    let pos = log_position(sanitize_remaining(remaining_s), cfg.min_remaining_s, cfg.max_remaining_s);
    let p = top as f64 - pos * (top as f64 - 1.0);
    (p.floor() as u32).clamp(1, top)
}

/// Aging adjustment: the priority of a job that has waited `wait_s` (>
/// `aging_bound_s`). In `(max_priority/2, max_priority]`, non-decreasing in
/// the wait, log-scaled in the excess wait up to `max_aged_wait_s`, so aged
/// jobs are FIFO among themselves.
pub fn aged_priority(wait_s: f64, cfg: &AsrptConfig) -> u32 {
    let base = cfg.srpt_top() + 1;
    let span = cfg.max_priority.saturating_sub(base) as f64;
    let excess = (wait_s - cfg.aging_bound_s).max(0.0);
    let pos = (1.0 + excess).ln() / (1.0 + cfg.max_aged_wait_s).ln();
    let p = base as f64 + pos.clamp(0.0, 1.0) * span;
    (p.floor() as u32).clamp(base, cfg.max_priority.max(base))
}

/// The sort key: aged first (FIFO), then shortest remaining, ties by earlier
/// submit then lower id.
fn compare(a: &(bool, f64, &PendingJob), b: &(bool, f64, &PendingJob)) -> Ordering {
    let by_submit = |x: &PendingJob, y: &PendingJob| x.submit_time_s.total_cmp(&y.submit_time_s).then(x.id.cmp(&y.id));
    match (a.0, b.0) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (true, true) => by_submit(a.2, b.2),
        (false, false) => a.1.total_cmp(&b.1).then_with(|| by_submit(a.2, b.2)),
    }
}

/// Orders pending jobs (see the module doc) and assigns priorities.
///
/// Each job's priority is its [`priority_for`] value lowered to stay
/// strictly below its predecessor's, but raised where needed to stay above
/// the number of jobs after it (many ties near the bottom of the scale), so
/// priorities are strictly decreasing and ≥ 1 whenever
/// `jobs.len() <= max_priority` (beyond that the tail saturates at 1). Jobs with duplicate ids are
/// ranked independently.
pub fn order(jobs: &[PendingJob], now_s: f64, cfg: &AsrptConfig) -> Vec<Ranked> {
    let mut keyed: Vec<(bool, f64, &PendingJob)> =
        jobs.iter().map(|j| (is_aged(j, now_s, cfg), sanitize_remaining(j.remaining_s), j)).collect();
    keyed.sort_unstable_by(compare);
    let n = keyed.len();
    let mut out = Vec::with_capacity(n);
    let mut prev = u64::from(cfg.max_priority) + 1;
    for (rank, (_, _, job)) in keyed.iter().enumerate() {
        let score = u64::from(priority_for(job, now_s, cfg));
        let room_below = (n - rank) as u64; // jobs from here to the end, this one included
        let p = score.min(prev.saturating_sub(1)).max(room_below).clamp(1, u64::from(cfg.max_priority));
        prev = p;
        out.push(Ranked { id: job.id, rank: rank as u32, priority: p as u32 });
    }
    out
}

/// `f64` with the total order `order` sorts by.
#[derive(Debug, Clone, Copy)]
struct Key(f64);
impl PartialEq for Key {
    fn eq(&self, o: &Self) -> bool {
        self.0.total_cmp(&o.0) == Ordering::Equal
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// The A-SRPT order kept incrementally: jobs are inserted and removed in
/// O(log n) and the clock only moves jobs from the SRPT part to the aged
/// part, so a caller that ranks on every event avoids re-sorting the whole
/// pending list. [`AsrptQueue::iter`] yields exactly the order of [`order`]
/// for the same jobs and time (ids must be unique).
#[derive(Debug, Clone)]
pub struct AsrptQueue {
    cfg: AsrptConfig,
    now_s: f64,
    jobs: std::collections::HashMap<u32, PendingJob>,
    /// Non-aged jobs by (remaining, submit, id).
    young: BTreeSet<(Key, Key, u32)>,
    /// Non-aged jobs by the time they age.
    aging: BTreeSet<(Key, u32)>,
    /// Aged jobs by (submit, id).
    aged: BTreeSet<(Key, u32)>,
}

impl AsrptQueue {
    /// An empty queue at time `now_s`; the configuration is validated.
    pub fn new(cfg: AsrptConfig, now_s: f64) -> Result<Self, CoreError> {
        cfg.validate()?;
        Ok(AsrptQueue {
            cfg,
            now_s,
            jobs: Default::default(),
            young: BTreeSet::new(),
            aging: BTreeSet::new(),
            aged: BTreeSet::new(),
        })
    }

    /// Number of queued jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The queue's clock.
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// Whether job `id` is queued and aged at the queue's clock.
    pub fn is_aged(&self, id: u32) -> bool {
        self.jobs.get(&id).is_some_and(|j| self.aged.contains(&(Key(j.submit_time_s), j.id)))
    }

    fn place(&mut self, j: &PendingJob) {
        if is_aged(j, self.now_s, &self.cfg) {
            self.aged.insert((Key(j.submit_time_s), j.id));
        } else {
            self.young.insert((Key(sanitize_remaining(j.remaining_s)), Key(j.submit_time_s), j.id));
            self.aging.insert((Key(aged_after_s(j, &self.cfg)), j.id));
        }
    }

    fn unplace(&mut self, j: &PendingJob) {
        if !self.aged.remove(&(Key(j.submit_time_s), j.id)) {
            self.young.remove(&(Key(sanitize_remaining(j.remaining_s)), Key(j.submit_time_s), j.id));
            self.aging.remove(&(Key(aged_after_s(j, &self.cfg)), j.id));
        }
    }

    /// Adds `job`, replacing (and returning) a queued job with the same id.
    pub fn insert(&mut self, job: PendingJob) -> Option<PendingJob> {
        let old = self.remove(job.id);
        self.place(&job);
        self.jobs.insert(job.id, job);
        old
    }

    /// Removes job `id`, returning it if it was queued.
    pub fn remove(&mut self, id: u32) -> Option<PendingJob> {
        let j = self.jobs.remove(&id)?;
        self.unplace(&j);
        Some(j)
    }

    /// Moves the clock to `now_s`, ageing jobs whose threshold passed
    /// (O(k log n) for k newly aged jobs; moving back re-places every job).
    pub fn advance(&mut self, now_s: f64) {
        if now_s < self.now_s {
            self.now_s = now_s;
            let all: Vec<PendingJob> = self.jobs.values().copied().collect();
            self.young.clear();
            self.aging.clear();
            self.aged.clear();
            for j in &all {
                self.place(j);
            }
            return;
        }
        self.now_s = now_s;
        while let Some(&(at, id)) = self.aging.first() {
            if now_s <= at.0 {
                break;
            }
            let j = self.jobs[&id];
            self.aging.pop_first();
            self.young.remove(&(Key(sanitize_remaining(j.remaining_s)), Key(j.submit_time_s), j.id));
            self.aged.insert((Key(j.submit_time_s), j.id));
        }
    }

    /// Job ids in A-SRPT order at the queue's clock: aged jobs FIFO, then
    /// shortest remaining first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.aged.iter().map(|&(_, id)| id).chain(self.young.iter().map(|&(_, _, id)| id))
    }

    /// Like [`Self::iter`], with whether each job is aged.
    pub fn iter_flagged(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        self.aged.iter().map(|&(_, id)| (id, true)).chain(self.young.iter().map(|&(_, _, id)| (id, false)))
    }

    /// One queued job.
    pub fn get(&self, id: u32) -> Option<&PendingJob> {
        self.jobs.get(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freezing::FreezeMode;
    use proptest::prelude::*;

    fn job(id: u32, submit: f64, rem: f64) -> PendingJob {
        PendingJob { id, submit_time_s: submit, remaining_s: rem }
    }

    fn ids(r: &[Ranked]) -> Vec<u32> {
        r.iter().map(|x| x.id).collect()
    }

    #[test]
    fn shortest_remaining_first() {
        let cfg = AsrptConfig::default();
        let jobs = [job(1, 0.0, 500.0), job(2, 10.0, 50.0), job(3, 20.0, 5000.0), job(4, 30.0, 5.0)];
        let r = order(&jobs, 100.0, &cfg);
        assert_eq!(ids(&r), vec![4, 2, 1, 3]);
        assert_eq!(r.iter().map(|x| x.rank).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        // Priorities equal the per-job ones when there are no ties.
        for x in &r {
            let j = jobs.iter().find(|j| j.id == x.id).unwrap();
            assert_eq!(x.priority, priority_for(j, 100.0, &cfg));
        }
    }

    #[test]
    fn ties_break_by_submit_then_id() {
        let cfg = AsrptConfig::default();
        let jobs = [job(9, 5.0, 100.0), job(3, 5.0, 100.0), job(7, 1.0, 100.0)];
        let r = order(&jobs, 10.0, &cfg);
        assert_eq!(ids(&r), vec![7, 3, 9]);
        assert!(r[0].priority > r[1].priority && r[1].priority > r[2].priority);
    }

    #[test]
    fn aged_jobs_go_first_in_fifo_order() {
        let cfg = AsrptConfig { aging_bound_s: 100.0, ..Default::default() };
        let jobs = [job(1, 0.0, 1e6), job(2, 50.0, 2e6), job(3, 950.0, 1.0), job(4, 990.0, 10.0)];
        let r = order(&jobs, 1000.0, &cfg);
        assert_eq!(ids(&r), vec![1, 2, 3, 4]);
        assert!(aged_priority(1000.0, &cfg) > srpt_priority(0.0, &cfg));
        assert!(aged_priority(5000.0, &cfg) >= aged_priority(1000.0, &cfg));
    }

    #[test]
    fn unknown_and_negative_remaining_are_handled() {
        let cfg = AsrptConfig::default();
        let jobs = [job(1, 0.0, f64::NAN), job(2, 0.0, -5.0), job(3, 0.0, 1e3), job(4, 0.0, f64::INFINITY)];
        let r = order(&jobs, 1.0, &cfg);
        assert_eq!(ids(&r), vec![2, 3, 1, 4]);
        assert_eq!(r[0].priority, cfg.max_priority / 2);
    }

    #[test]
    fn priority_scale_is_log_and_bounded() {
        let cfg = AsrptConfig::default();
        let top = cfg.max_priority / 2;
        assert_eq!(srpt_priority(0.5, &cfg), top);
        assert_eq!(srpt_priority(1e8, &cfg), 1);
        // Each decade of remaining time costs the same priority (log scale).
        let d1 = srpt_priority(10.0, &cfg) - srpt_priority(100.0, &cfg);
        let d2 = srpt_priority(1e4, &cfg) - srpt_priority(1e5, &cfg);
        assert!(d1.abs_diff(d2) <= 1, "{d1} vs {d2}");
        assert!(aged_priority(1e12, &cfg) == cfg.max_priority);
    }

    #[test]
    fn remaining_time_with_and_without_freezing() {
        assert_eq!(remaining_time_s(1000.0, 400.0, 0.5, None), 300.0);
        assert_eq!(remaining_time_s(1000.0, 1400.0, 0.5, None), 0.0);
        let auto = FreezeProfile::for_mode(FreezeMode::Auto, 48);
        let plain = remaining_time_s(1000.0, 0.0, 0.5, None);
        let frozen = remaining_time_s(1000.0, 0.0, 0.5, Some(&auto));
        assert!(frozen < plain, "{frozen} >= {plain}");
        let off = FreezeProfile::for_mode(FreezeMode::Off, 48);
        assert_eq!(remaining_time_s(1000.0, 100.0, 0.5, Some(&off)), remaining_time_s(1000.0, 100.0, 0.5, None));
    }

    #[test]
    fn duration_scaled_aging_keeps_long_jobs_in_srpt_order() {
        // Both jobs waited 2 days, past the 1-day bound. With the absolute
        // bound both are aged (FIFO: the long one first); with factor 1 the
        // 10-day job is not aged yet (it waited less than its length), so the
        // short one (aged) runs first.
        let abs = AsrptConfig::default();
        let scaled = AsrptConfig { aging_factor: 1.0, ..Default::default() };
        let long = job(1, 0.0, 10.0 * 86400.0);
        let short = job(2, 1.0, 3600.0);
        let now = 2.0 * 86400.0 + 1.0;
        assert_eq!(ids(&order(&[long, short], now, &abs)), vec![1, 2]);
        assert_eq!(ids(&order(&[long, short], now, &scaled)), vec![2, 1]);
        assert_eq!(aging_threshold_s(&long, &scaled), 10.0 * 86400.0);
        assert_eq!(aging_threshold_s(&short, &scaled), 86400.0);
        // Unknown remaining time: the absolute bound still applies.
        assert_eq!(aging_threshold_s(&job(3, 0.0, f64::NAN), &scaled), 86400.0);
        // The long job ages once it has waited its own length.
        assert!(is_aged(&long, 10.0 * 86400.0 + 1.0, &scaled));
        let bad = AsrptConfig { aging_factor: -1.0, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("aging_factor"));
    }

    #[test]
    fn queue_ages_jobs_as_the_clock_moves() {
        let cfg = AsrptConfig { aging_bound_s: 100.0, ..Default::default() };
        let mut q = AsrptQueue::new(cfg, 0.0).unwrap();
        q.insert(job(1, 0.0, 1e6));
        q.insert(job(2, 50.0, 10.0));
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![2, 1]);
        q.advance(120.0); // job 1 waited 120 > 100
        assert!(q.is_aged(1) && !q.is_aged(2));
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(q.remove(1).map(|j| j.id), Some(1));
        assert_eq!(q.remove(1), None);
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![2]);
        assert!(AsrptQueue::new(AsrptConfig { aging_bound_s: 0.0, ..Default::default() }, 0.0).is_err());
    }

    #[test]
    fn config_validation_names_the_field() {
        let bad = AsrptConfig { aging_bound_s: -1.0, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("aging_bound_s"));
        let bad = AsrptConfig { max_priority: 1, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("max_priority"));
        assert!(AsrptConfig::default().validate().is_ok());
    }

    #[test]
    fn many_ties_stay_strict_and_positive() {
        let cfg = AsrptConfig { max_priority: 100, ..Default::default() };
        let jobs: Vec<PendingJob> = (0..100).map(|i| job(i, 0.0, 1e9)).collect();
        let r = order(&jobs, 1.0, &cfg);
        assert_eq!(r.last().unwrap().priority, 1);
        assert_eq!(r[0].priority, 100);
        assert!(r.windows(2).all(|w| w[0].priority > w[1].priority));
    }

    fn jobs_strategy() -> impl Strategy<Value = Vec<PendingJob>> {
        // Coarse values make ties frequent.
        proptest::collection::vec(
            (0u32..50, 0u32..20, prop_oneof![Just(f64::NAN), (0u32..8).prop_map(|x| 10f64.powi(x as i32))]),
            0..60,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (sub, idmod, rem))| job(i as u32 * 20 + idmod, sub as f64 * 100.0, rem))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn priorities_strictly_decrease_in_range(jobs in jobs_strategy(), now in 0.0f64..10_000.0, bound in 1.0f64..5000.0) {
            let cfg = AsrptConfig { aging_bound_s: bound, max_priority: 1000, ..Default::default() };
            let r = order(&jobs, now, &cfg);
            prop_assert_eq!(r.len(), jobs.len());
            for (i, x) in r.iter().enumerate() {
                prop_assert_eq!(x.rank as usize, i);
                prop_assert!(x.priority >= 1 && x.priority <= cfg.max_priority);
            }
            prop_assert!(r.windows(2).all(|w| w[0].priority > w[1].priority));
        }

        #[test]
        fn permutation_does_not_change_output(jobs in jobs_strategy(), now in 0.0f64..10_000.0, seed in any::<u64>()) {
            let cfg = AsrptConfig { aging_bound_s: 2000.0, ..Default::default() };
            let mut shuffled = jobs.clone();
            // Deterministic Fisher-Yates with a tiny LCG.
            let mut s = seed | 1;
            for i in (1..shuffled.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
            prop_assert_eq!(order(&jobs, now, &cfg), order(&shuffled, now, &cfg));
        }

        #[test]
        fn ties_are_stable(jobs in jobs_strategy(), now in 0.0f64..10_000.0) {
            let cfg = AsrptConfig { aging_bound_s: 2000.0, ..Default::default() };
            let r = order(&jobs, now, &cfg);
            let pos: std::collections::HashMap<u32, &PendingJob> = jobs.iter().map(|j| (j.id, j)).collect();
            for w in r.windows(2) {
                let (a, b) = (pos[&w[0].id], pos[&w[1].id]);
                let same_class = is_aged(a, now, &cfg) == is_aged(b, now, &cfg);
                let tied = same_class && (is_aged(a, now, &cfg)
                    || sanitize_remaining(a.remaining_s) == sanitize_remaining(b.remaining_s));
                if tied {
                    prop_assert!((a.submit_time_s, a.id) <= (b.submit_time_s, b.id));
                }
            }
        }

        #[test]
        fn aging_bound_holds(jobs in jobs_strategy(), now in 0.0f64..10_000.0, bound in 1.0f64..5000.0) {
            let cfg = AsrptConfig { aging_bound_s: bound, ..Default::default() };
            let r = order(&jobs, now, &cfg);
            let pos: std::collections::HashMap<u32, &PendingJob> = jobs.iter().map(|j| (j.id, j)).collect();
            // No job that waited longer than the bound is behind a younger non-aged job.
            for (i, x) in r.iter().enumerate() {
                let a = pos[&x.id];
                let waited = now - a.submit_time_s;
                // `is_aged` is `now > submit + bound`: the same up to rounding.
                if (waited - bound).abs() > 1e-6 {
                    prop_assert_eq!(is_aged(a, now, &cfg), waited > bound);
                }
                if is_aged(a, now, &cfg) {
                    for y in &r[..i] {
                        let b = pos[&y.id];
                        prop_assert!(is_aged(b, now, &cfg) && (b.submit_time_s, b.id) <= (a.submit_time_s, a.id));
                    }
                }
            }
        }

        #[test]
        fn queue_matches_order(
            jobs in jobs_strategy(),
            steps in proptest::collection::vec((0.0f64..2000.0, any::<u8>()), 1..12),
            factor in prop_oneof![Just(0.0), 0.0f64..3.0],
        ) {
            // Insert the jobs in batches, remove some, move the clock forward
            // (and once back): the queue's order equals `order` each time.
            let cfg = AsrptConfig { aging_bound_s: 500.0, aging_factor: factor, ..Default::default() };
            let mut q = AsrptQueue::new(cfg.clone(), 0.0).unwrap();
            let mut live: Vec<PendingJob> = Vec::new();
            let mut next = 0;
            let mut now = 0.0;
            let unique: Vec<PendingJob> = {
                let mut seen = std::collections::HashSet::new();
                jobs.into_iter().filter(|j| seen.insert(j.id)).collect()
            };
            for (k, &(dt, pick)) in steps.iter().enumerate() {
                now = if k == steps.len() / 2 { now * 0.5 } else { now + dt };
                q.advance(now);
                let take = (pick as usize % 7).min(unique.len() - next.min(unique.len()));
                for j in &unique[next..next + take] {
                    prop_assert!(q.insert(*j).is_none());
                    live.push(*j);
                }
                next += take;
                if pick % 3 == 0 && !live.is_empty() {
                    let gone = live.remove(pick as usize % live.len());
                    prop_assert_eq!(q.remove(gone.id).map(|j| j.id), Some(gone.id));
                }
                prop_assert_eq!(q.len(), live.len());
                let want = ids(&order(&live, now, &cfg));
                prop_assert_eq!(q.iter().collect::<Vec<_>>(), want);
                for j in &live {
                    prop_assert_eq!(q.is_aged(j.id), is_aged(j, now, &cfg));
                }
                let flagged: Vec<(u32, bool)> = q.iter_flagged().collect();
                prop_assert!(flagged.iter().all(|&(id, aged)| aged == q.is_aged(id)));
            }
        }

        #[test]
        fn per_job_priority_monotone_in_remaining(a in 0.0f64..1e8, b in 0.0f64..1e8) {
            let cfg = AsrptConfig::default();
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(srpt_priority(lo, &cfg) >= srpt_priority(hi, &cfg));
        }
    }
}
