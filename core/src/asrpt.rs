//! A-SRPT ordering of pending jobs.
//!
//! A-SRPT (adaptive shortest-remaining-processing-time for distributed DL
//! jobs) maps every job onto a *virtual single machine* whose processing time
//! for the job is its predicted remaining work on the Cell it is planned on
//! (remaining iterations × iteration time, iterations predicted by a random
//! forest for recurring jobs, see [`crate::predictor`]). Shortest remaining
//! work first on that machine gives the order in which the real cluster
//! should start jobs. The work is measured per [`AsrptConfig::rank_by`]:
//! remaining GPU-seconds (`area`, the default: remaining time × the Cell's
//! GPUs, so a short job that needs many GPUs does not pass many small ones
//! it would block — the machine's capacity is GPUs) or remaining seconds
//! (`time`, the paper's single-machine view).
//!
//! Two bands: *urgent* jobs are ranked ahead of every *normal* one, earliest
//! "must start by" time first (EDF); normal jobs are ranked by remaining work.
//! A job is urgent when
//! - it is **aged**: it has waited longer than its aging threshold
//!   ([`aging_threshold_s`]): `aging_bound_s`, or, with `aging_factor` > 0, at
//!   least that many times its own predicted remaining time (aging by
//!   slowdown). Its must-start time is when it aged
//!   (`submit + threshold`), so aged jobs are served in the order they
//!   crossed their thresholds — with the absolute bound alone that is FIFO;
//!   with the factor, a long job crosses late and cannot block short ones
//!   that have waited far longer relative to their length. Aging is for
//!   starvation only: on an overloaded cluster where every job waits longer
//!   than an absolute bound, that bound turns A-SRPT into FIFO (measured:
//!   2.3-2.9x the average JCT of no aging on the Philly traces, see bench/HISTORY.md);
//! - or it has a **deadline** ([`PendingJob::deadline_s`]) that it can still
//!   meet and whose slack `deadline - now - remaining` has dropped to
//!   `deadline_slack_factor` × remaining or less. Its must-start time is
//!   `deadline - remaining`. A job that can no longer meet its deadline
//!   (`now > deadline - remaining`) loses the urgency (it is ranked as a
//!   normal job, and still ages), so hopeless jobs do not push others past
//!   their own deadlines. Deadline jobs cannot starve the rest: an aged job's
//!   must-start time lies in the past, a deadline job's in the future, so
//!   aged jobs always come first.
//!
//! The aging bound applies from the submit time; times are seconds on one
//! clock (`now_s`). Waiting time (not a passed-over counter) is used because
//! it needs no state across scheduler passes and works identically in
//! `site_factor_p_set` and `_p_update`.
//!
//! [`AsrptQueue`] keeps the same order incrementally (insert/remove/advance
//! the clock in O(log n) per job whose standing changes) for callers that
//! rank on every event, such as the simulator; it always yields exactly the
//! order of [`order`].
//!
//! Priorities: [`priority_for`] maps one job to a priority without the list
//! (Slurm's per-job `site_factor_p_set` at submit); [`order`] ranks the whole
//! list and assigns priorities that are at most that per-job value, strictly
//! decreasing along the order and within `[1, max_priority]`, so both paths
//! agree. The scale: the upper half of `[1, max_priority]` is the urgent band
//! (log-scaled in how far the must-start time lies in the past), the lower
//! half the normal band (log-scaled and decreasing in remaining work between
//! [`AsrptConfig::min_remaining_s`] and [`AsrptConfig::max_remaining_s`]).
//!
//! Ties are broken by earlier submit time, then lower id, so the output is a
//! deterministic function of the job set (independent of input order).
//! Cost: one sort, O(n log n); see `benches/predictor.rs`.
use crate::error::CoreError;
use crate::freezing::FreezeProfile;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// What the normal band ranks by (`[ordering] rank_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RankBy {
    /// Predicted remaining seconds (A-SRPT's single virtual machine).
    Time,
    /// Predicted remaining GPU-seconds: remaining seconds × the Cell's GPUs.
    #[default]
    Area,
}

impl std::str::FromStr for RankBy {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        match s.to_ascii_lowercase().as_str() {
            "time" => Ok(RankBy::Time),
            "area" => Ok(RankBy::Area),
            _ => Err(CoreError::invalid("rank_by", s, "time or area")),
        }
    }
}

/// Configuration of the ordering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AsrptConfig {
    /// Waiting time after which a job is aged and promoted ahead of non-aged
    /// jobs (seconds, > 0). Default 24 h.
    pub aging_bound_s: f64,
    /// Largest priority handed out (≥ 2). Default 1 000 000.
    pub max_priority: u32,
    /// Remaining work at or below this gets the top normal-band priority. Default 1.
    pub min_remaining_s: f64,
    /// Remaining work at or above this (and unknown) gets the lowest
    /// normal-band priority. Default 10^7 (seconds, or GPU-seconds with `area`).
    pub max_remaining_s: f64,
    /// How far in the past a must-start time lies when the urgent band
    /// saturates. Default 30 days.
    pub max_aged_wait_s: f64,
    /// Aging by slowdown: a job ages only after waiting at least this many
    /// times its own predicted remaining time (and at least
    /// `aging_bound_s`). 0 = the absolute bound alone.
    pub aging_factor: f64,
    /// What the normal band ranks by. Default `area`.
    pub rank_by: RankBy,
    /// A job with a deadline becomes urgent when its slack (deadline − now
    /// − remaining time) is at most this many times its remaining time (≥ 0).
    pub deadline_slack_factor: f64,
    /// At most this many aged jobs (those that aged first) are urgent at a
    /// time; later-aged ones keep their place in the normal band until one
    /// ahead of them starts. 0 = every aged job is urgent.
    pub aged_lane: u32,
}

impl Default for AsrptConfig {
    fn default() -> Self {
        AsrptConfig {
            aging_bound_s: 24.0 * 3600.0,
            max_priority: 1_000_000,
            min_remaining_s: 1.0,
            max_remaining_s: 1e7,
            max_aged_wait_s: 30.0 * 86400.0,
            aging_factor: DEFAULT_AGING_FACTOR,
            rank_by: RankBy::Area,
            deadline_slack_factor: DEFAULT_DEADLINE_SLACK_FACTOR,
            aged_lane: DEFAULT_AGED_LANE,
        }
    }
}

/// Default [`AsrptConfig::aging_factor`].
pub const DEFAULT_AGING_FACTOR: f64 = 60.0;
/// Default [`AsrptConfig::aged_lane`].
pub const DEFAULT_AGED_LANE: u32 = 1;
/// Default [`AsrptConfig::deadline_slack_factor`].
pub const DEFAULT_DEADLINE_SLACK_FACTOR: f64 = 1.0;

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
        if !(self.deadline_slack_factor.is_finite() && self.deadline_slack_factor >= 0.0) {
            return Err(CoreError::invalid(
                "deadline_slack_factor",
                self.deadline_slack_factor.to_string(),
                "a non-negative number",
            ));
        }
        Ok(())
    }

    /// Highest priority of the normal band; urgent jobs get more.
    fn srpt_top(&self) -> u32 {
        self.max_priority.max(2) / 2
    }
}

fn one() -> u32 {
    1
}

/// A pending job as A-SRPT sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PendingJob {
    /// Slurm job id.
    pub id: u32,
    /// Submit time (seconds, same clock as `now_s`).
    pub submit_time_s: f64,
    /// Predicted remaining processing time on the Cell it is planned on
    /// (see [`remaining_time_s`]). NaN or infinite = unknown: ranked last
    /// among normal jobs; negative counts as 0.
    pub remaining_s: f64,
    /// GPUs of that Cell (the area's width; 0 counts as 1).
    #[serde(default = "one")]
    pub gpus: u32,
    /// When the job should be finished (same clock), if it has a deadline.
    #[serde(default)]
    pub deadline_s: Option<f64>,
}

impl PendingJob {
    /// A one-GPU job without a deadline.
    pub fn new(id: u32, submit_time_s: f64, remaining_s: f64) -> Self {
        PendingJob { id, submit_time_s, remaining_s, gpus: 1, deadline_s: None }
    }
    /// The same job on a Cell of `gpus` GPUs.
    pub fn with_gpus(mut self, gpus: u32) -> Self {
        self.gpus = gpus;
        self
    }
    /// The same job due at `deadline_s` (a non-finite value means none).
    pub fn with_deadline(mut self, deadline_s: Option<f64>) -> Self {
        self.deadline_s = deadline_s.filter(|d| d.is_finite());
        self
    }
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

/// The normal band's key: remaining seconds, or GPU-seconds with `area`
/// (infinite when unknown).
pub fn work_key(job: &PendingJob, cfg: &AsrptConfig) -> f64 {
    let r = sanitize_remaining(job.remaining_s);
    match cfg.rank_by {
        RankBy::Time => r,
        RankBy::Area => r * f64::from(job.gpus.max(1)),
    }
}

/// Waiting time after which `job` is aged: `aging_bound_s`, or
/// `aging_factor` × its remaining time when that is larger (unknown
/// remaining times use the bound alone).
pub fn aging_threshold_s(job: &PendingJob, cfg: &AsrptConfig) -> f64 {
    let r = job.remaining_s;
    if cfg.aging_factor > 0.0 && r.is_finite() {
        cfg.aging_bound_s.max(cfg.aging_factor * r.max(0.0))
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
    now_s > aged_after_s(job, cfg)
}

/// The deadline window of a job that has one and a known remaining time:
/// (urgent after, must start by) = (deadline − remaining × (1 + slack
/// factor), deadline − remaining).
fn deadline_window(job: &PendingJob, cfg: &AsrptConfig) -> Option<(f64, f64)> {
    let d = job.deadline_s.filter(|d| d.is_finite())?;
    let r = job.remaining_s;
    if !r.is_finite() {
        return None;
    }
    let r = r.max(0.0);
    let latest = d - r;
    Some((latest - cfg.deadline_slack_factor * r, latest))
}

/// Where a job stands in the order at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Standing {
    /// Ranked by remaining work ([`work_key`]).
    Normal,
    /// Ranked ahead of every normal job, earliest `must_start_s` first.
    Urgent {
        /// When it should have started (aged: when it aged; deadline: deadline − remaining).
        must_start_s: f64,
        /// Urgent because it aged (else: because of its deadline).
        aged: bool,
    },
}

impl Standing {
    /// Whether the job is in the urgent band.
    pub fn is_urgent(&self) -> bool {
        matches!(self, Standing::Urgent { .. })
    }
}

/// The job's standing at `now_s` (see the module doc), and the time until
/// which it stays so: it may change once `now_s` exceeds that time
/// (infinite: never).
pub fn standing(job: &PendingJob, now_s: f64, cfg: &AsrptConfig) -> (Standing, f64) {
    let aged_at = aged_after_s(job, cfg);
    if now_s > aged_at {
        return (Standing::Urgent { must_start_s: aged_at, aged: true }, f64::INFINITY);
    }
    let mut until = aged_at;
    if let Some((from, latest)) = deadline_window(job, cfg) {
        if now_s > from && now_s <= latest {
            return (Standing::Urgent { must_start_s: latest, aged: false }, until.min(latest));
        }
        for t in [from, latest] {
            if now_s <= t {
                until = until.min(t);
            }
        }
    }
    (Standing::Normal, until)
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
/// Normal jobs get `[1, max_priority/2]`: monotone decreasing in
/// [`work_key`], log-scaled between `min_remaining_s` (top) and
/// `max_remaining_s` (1). Urgent jobs get [`urgent_priority`], always above.
pub fn priority_for(job: &PendingJob, now_s: f64, cfg: &AsrptConfig) -> u32 {
    match standing(job, now_s, cfg).0 {
        Standing::Urgent { must_start_s, .. } => urgent_priority(now_s - must_start_s, cfg),
        Standing::Normal => srpt_priority(work_key(job, cfg), cfg),
    }
}

/// Normal-band priority for a remaining work (see [`priority_for`]).
pub fn srpt_priority(work: f64, cfg: &AsrptConfig) -> u32 {
    let top = cfg.srpt_top();
    let pos = log_position(sanitize_remaining(work), cfg.min_remaining_s, cfg.max_remaining_s);
    let p = top as f64 - pos * (top as f64 - 1.0);
    (p.floor() as u32).clamp(1, top)
}

/// Urgent-band priority of a job whose must-start time lies `overdue_s` in
/// the past (negative: in the future, a deadline job). In
/// `(max_priority/2, max_priority]`, non-decreasing in `overdue_s`,
/// log-scaled in its magnitude up to `max_aged_wait_s` (the middle of the
/// band is "must start now").
pub fn urgent_priority(overdue_s: f64, cfg: &AsrptConfig) -> u32 {
    let base = cfg.srpt_top() + 1;
    let span = cfg.max_priority.saturating_sub(base) as f64;
    let o = if overdue_s.is_nan() { 0.0 } else { overdue_s };
    let mag = (1.0 + o.abs()).ln() / (1.0 + cfg.max_aged_wait_s).ln();
    let pos = 0.5 + 0.5 * o.signum() * mag.min(1.0);
    let p = base as f64 + pos.clamp(0.0, 1.0) * span;
    (p.floor() as u32).clamp(base, cfg.max_priority.max(base))
}

/// Sort key of one job at one time: (urgent, must-start or work, submit, id).
#[derive(Debug, Clone, Copy)]
struct SortKey {
    urgent: bool,
    aged: bool,
    key: f64,
    submit: f64,
    id: u32,
}

fn sort_key(job: &PendingJob, now_s: f64, cfg: &AsrptConfig) -> SortKey {
    let (urgent, aged, key) = match standing(job, now_s, cfg).0 {
        Standing::Urgent { must_start_s, aged } => (true, aged, must_start_s),
        Standing::Normal => (false, false, work_key(job, cfg)),
    };
    SortKey { urgent, aged, key, submit: job.submit_time_s, id: job.id }
}

/// Urgent first (earliest must-start), then least work, ties by earlier
/// submit then lower id.
fn compare(a: &SortKey, b: &SortKey) -> Ordering {
    b.urgent
        .cmp(&a.urgent)
        .then(a.key.total_cmp(&b.key))
        .then(a.submit.total_cmp(&b.submit))
        .then(a.id.cmp(&b.id))
}

/// Orders pending jobs (see the module doc) and assigns priorities.
///
/// Only the first [`AsrptConfig::aged_lane`] aged jobs (by the time they
/// aged) are urgent; the other aged jobs are ranked by their work.
/// Each job's priority is its band's value ([`urgent_priority`] or
/// [`srpt_priority`]) lowered to stay strictly below its predecessor's, but
/// raised where needed to stay above the number of jobs after it (many ties
/// near the bottom of the scale), so priorities are strictly decreasing and
/// ≥ 1 whenever `jobs.len() <= max_priority` (beyond that the tail
/// saturates at 1). With no aged job beyond the lane the values are those
/// of [`priority_for`]. Jobs with duplicate ids are ranked independently.
pub fn order(jobs: &[PendingJob], now_s: f64, cfg: &AsrptConfig) -> Vec<Ranked> {
    let mut keyed: Vec<(SortKey, &PendingJob)> = jobs.iter().map(|j| (sort_key(j, now_s, cfg), j)).collect();
    if cfg.aged_lane > 0 {
        let mut aged: Vec<usize> = (0..keyed.len()).filter(|&i| keyed[i].0.aged).collect();
        if aged.len() > cfg.aged_lane as usize {
            aged.sort_unstable_by(|&x, &y| compare(&keyed[x].0, &keyed[y].0));
            for &i in &aged[cfg.aged_lane as usize..] {
                let (k, j) = &mut keyed[i];
                *k = SortKey { urgent: false, aged: false, key: work_key(j, cfg), ..*k };
            }
        }
    }
    keyed.sort_unstable_by(|a, b| compare(&a.0, &b.0));
    let n = keyed.len();
    let mut out = Vec::with_capacity(n);
    let mut prev = u64::from(cfg.max_priority) + 1;
    for (rank, (k, job)) in keyed.iter().enumerate() {
        let score = u64::from(if k.urgent { urgent_priority(now_s - k.key, cfg) } else { srpt_priority(k.key, cfg) });
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

/// Which set a queued job is filed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Band {
    Aged,
    Deadline,
    Normal,
}

/// Where a queued job is filed: its band, keys and next standing change.
#[derive(Debug, Clone, Copy)]
struct Filed {
    job: PendingJob,
    band: Band,
    /// Must-start time (urgent bands) or work (normal band).
    key: f64,
    /// Work ([`work_key`]), for aged jobs beyond the lane.
    work: f64,
    until: f64,
}

type Entry = (Key, Key, u32);

/// The A-SRPT order kept incrementally: jobs are inserted and removed in
/// O(log n), and moving the clock re-files only the jobs whose standing may
/// change ([`standing`]'s "until"), so a caller that ranks on every event
/// avoids re-sorting the whole pending list. [`AsrptQueue::iter`] yields
/// exactly the order of [`order`] for the same jobs and time (ids must be unique).
#[derive(Debug, Clone)]
pub struct AsrptQueue {
    cfg: AsrptConfig,
    now_s: f64,
    jobs: std::collections::HashMap<u32, Filed>,
    /// Aged jobs by (aged at, submit, id).
    aged: BTreeSet<Entry>,
    /// Aged jobs by (work, submit, id): those beyond the lane rank by it.
    aged_work: BTreeSet<Entry>,
    /// Deadline-urgent jobs by (must-start, submit, id).
    deadline: BTreeSet<Entry>,
    /// Normal jobs by (work, submit, id).
    normal: BTreeSet<Entry>,
    /// Jobs by the time after which their standing may change.
    changes: BTreeSet<(Key, u32)>,
}

impl AsrptQueue {
    /// An empty queue at time `now_s`; the configuration is validated.
    pub fn new(cfg: AsrptConfig, now_s: f64) -> Result<Self, CoreError> {
        cfg.validate()?;
        Ok(AsrptQueue {
            cfg,
            now_s,
            jobs: Default::default(),
            aged: BTreeSet::new(),
            aged_work: BTreeSet::new(),
            deadline: BTreeSet::new(),
            normal: BTreeSet::new(),
            changes: BTreeSet::new(),
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
        self.jobs.get(&id).is_some_and(|f| f.band == Band::Aged)
    }

    /// The last aged entry inside the lane (None: no aged job is urgent).
    fn lane_end(&self) -> Option<Entry> {
        match self.cfg.aged_lane {
            0 => self.aged.last().copied(),
            n => self.aged.iter().nth(n as usize - 1).or_else(|| self.aged.last()).copied(),
        }
    }

    /// Whether job `id` is queued and urgent (an aged job inside the lane,
    /// or a job close to its deadline).
    pub fn is_urgent(&self, id: u32) -> bool {
        match self.jobs.get(&id) {
            Some(f) if f.band == Band::Deadline => true,
            Some(f) if f.band == Band::Aged => self.lane_end().is_some_and(|e| (Key(f.key), Key(f.job.submit_time_s), id) <= e),
            _ => false,
        }
    }

    fn file(&mut self, job: PendingJob) {
        let (st, until) = standing(&job, self.now_s, &self.cfg);
        let work = work_key(&job, &self.cfg);
        let (band, key) = match st {
            Standing::Urgent { must_start_s, aged: true } => (Band::Aged, must_start_s),
            Standing::Urgent { must_start_s, aged: false } => (Band::Deadline, must_start_s),
            Standing::Normal => (Band::Normal, work),
        };
        let sub = Key(job.submit_time_s);
        match band {
            Band::Aged => {
                self.aged.insert((Key(key), sub, job.id));
                self.aged_work.insert((Key(work), sub, job.id));
            }
            Band::Deadline => {
                self.deadline.insert((Key(key), sub, job.id));
            }
            Band::Normal => {
                self.normal.insert((Key(key), sub, job.id));
            }
        }
        if until.is_finite() {
            self.changes.insert((Key(until), job.id));
        }
        self.jobs.insert(job.id, Filed { job, band, key, work, until });
    }

    fn unfile(&mut self, id: u32) -> Option<PendingJob> {
        let f = self.jobs.remove(&id)?;
        let sub = Key(f.job.submit_time_s);
        match f.band {
            Band::Aged => {
                self.aged.remove(&(Key(f.key), sub, id));
                self.aged_work.remove(&(Key(f.work), sub, id));
            }
            Band::Deadline => {
                self.deadline.remove(&(Key(f.key), sub, id));
            }
            Band::Normal => {
                self.normal.remove(&(Key(f.key), sub, id));
            }
        }
        if f.until.is_finite() {
            self.changes.remove(&(Key(f.until), id));
        }
        Some(f.job)
    }

    /// Adds `job`, replacing (and returning) a queued job with the same id.
    pub fn insert(&mut self, job: PendingJob) -> Option<PendingJob> {
        let old = self.unfile(job.id);
        self.file(job);
        old
    }

    /// Removes job `id`, returning it if it was queued.
    pub fn remove(&mut self, id: u32) -> Option<PendingJob> {
        self.unfile(id)
    }

    /// Moves the clock to `now_s`, re-filing the jobs whose standing may
    /// have changed (O(k log n) for k of them; moving back re-files every job).
    pub fn advance(&mut self, now_s: f64) {
        if now_s < self.now_s {
            self.now_s = now_s;
            let all: Vec<PendingJob> = self.jobs.values().map(|f| f.job).collect();
            self.jobs.clear();
            self.aged.clear();
            self.aged_work.clear();
            self.deadline.clear();
            self.normal.clear();
            self.changes.clear();
            for j in all {
                self.file(j);
            }
            return;
        }
        self.now_s = now_s;
        while let Some(&(at, id)) = self.changes.first() {
            if now_s <= at.0 {
                break;
            }
            let j = self.unfile(id).expect("a filed change names a queued job");
            self.file(j);
        }
    }

    /// Job ids in A-SRPT order at the queue's clock, with whether each is
    /// urgent: the aged jobs in the lane (in the order they aged), the
    /// deadline-urgent jobs (earliest must-start first), then the normal
    /// jobs and the aged jobs beyond the lane, least work first. O(n).
    pub fn iter_flagged(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        let end = self.lane_end();
        let in_lane = move |e: &Entry| end.is_some_and(|x| *e <= x);
        let lane = self.aged.iter().filter(move |e| in_lane(e)).map(|&(_, _, id)| (id, true));
        let dl = self.deadline.iter().map(|&(_, _, id)| (id, true));
        let beyond = self.aged_work.iter().filter(move |e| {
            let f = &self.jobs[&e.2];
            !in_lane(&(Key(f.key), e.1, e.2))
        });
        let mut a = self.normal.iter().peekable();
        let mut b = beyond.peekable();
        let rest = std::iter::from_fn(move || {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => {
                    if x <= y {
                        a.next()
                    } else {
                        b.next()
                    }
                }
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => None,
            };
            next.map(|&(_, _, id)| (id, false))
        });
        lane.chain(dl).chain(rest)
    }

    /// Job ids in A-SRPT order at the queue's clock (see [`Self::iter_flagged`]).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter_flagged().map(|(id, _)| id)
    }

    /// One queued job.
    pub fn get(&self, id: u32) -> Option<&PendingJob> {
        self.jobs.get(&id).map(|f| &f.job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freezing::FreezeMode;
    use proptest::prelude::*;

    fn job(id: u32, submit: f64, rem: f64) -> PendingJob {
        PendingJob::new(id, submit, rem)
    }

    /// The old default: absolute aging bound, remaining time as the key.
    fn abs_cfg() -> AsrptConfig {
        AsrptConfig { aging_factor: 0.0, rank_by: RankBy::Time, aged_lane: 0, ..AsrptConfig::default() }
    }

    fn ids(r: &[Ranked]) -> Vec<u32> {
        r.iter().map(|x| x.id).collect()
    }

    #[test]
    fn shortest_remaining_first() {
        let cfg = abs_cfg();
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
        let cfg = abs_cfg();
        let jobs = [job(9, 5.0, 100.0), job(3, 5.0, 100.0), job(7, 1.0, 100.0)];
        let r = order(&jobs, 10.0, &cfg);
        assert_eq!(ids(&r), vec![7, 3, 9]);
        assert!(r[0].priority > r[1].priority && r[1].priority > r[2].priority);
    }

    #[test]
    fn aged_jobs_go_first_in_fifo_order() {
        let cfg = AsrptConfig { aging_bound_s: 100.0, ..abs_cfg() };
        let jobs = [job(1, 0.0, 1e6), job(2, 50.0, 2e6), job(3, 950.0, 1.0), job(4, 990.0, 10.0)];
        let r = order(&jobs, 1000.0, &cfg);
        assert_eq!(ids(&r), vec![1, 2, 3, 4]);
        assert!(urgent_priority(1000.0 - 100.0, &cfg) > srpt_priority(0.0, &cfg));
        assert!(urgent_priority(5000.0 - 100.0, &cfg) >= urgent_priority(1000.0 - 100.0, &cfg));
    }

    #[test]
    fn unknown_and_negative_remaining_are_handled() {
        let cfg = abs_cfg();
        let jobs = [job(1, 0.0, f64::NAN), job(2, 0.0, -5.0), job(3, 0.0, 1e3), job(4, 0.0, f64::INFINITY)];
        let r = order(&jobs, 1.0, &cfg);
        assert_eq!(ids(&r), vec![2, 3, 1, 4]);
        assert_eq!(r[0].priority, cfg.max_priority / 2);
    }

    #[test]
    fn priority_scale_is_log_and_bounded() {
        let cfg = abs_cfg();
        let top = cfg.max_priority / 2;
        assert_eq!(srpt_priority(0.5, &cfg), top);
        assert_eq!(srpt_priority(1e8, &cfg), 1);
        // Each decade of remaining time costs the same priority (log scale).
        let d1 = srpt_priority(10.0, &cfg) - srpt_priority(100.0, &cfg);
        let d2 = srpt_priority(1e4, &cfg) - srpt_priority(1e5, &cfg);
        assert!(d1.abs_diff(d2) <= 1, "{d1} vs {d2}");
        assert!(urgent_priority(1e12, &cfg) == cfg.max_priority);
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
        let abs = abs_cfg();
        let scaled = AsrptConfig { aging_factor: 1.0, ..abs_cfg() };
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
        let bad = AsrptConfig { aging_factor: -1.0, ..abs_cfg() };
        assert!(bad.validate().unwrap_err().to_string().contains("aging_factor"));
    }

    #[test]
    fn area_ranks_wide_short_jobs_behind_narrow_ones() {
        // W: 100 s on 8 GPUs (800 GPU-s); N: 300 s on 1 GPU (300 GPU-s).
        let w = job(1, 0.0, 100.0).with_gpus(8);
        let n = job(2, 1.0, 300.0);
        let area = AsrptConfig { rank_by: RankBy::Area, ..abs_cfg() };
        assert_eq!(ids(&order(&[w, n], 10.0, &area)), vec![2, 1]);
        assert_eq!(ids(&order(&[w, n], 10.0, &abs_cfg())), vec![1, 2]);
        assert_eq!(work_key(&w, &area), 800.0);
        assert_eq!(work_key(&job(3, 0.0, 5.0).with_gpus(0), &area), 5.0);
        assert_eq!("AREA".parse::<RankBy>().unwrap(), RankBy::Area);
        assert!("size".parse::<RankBy>().unwrap_err().to_string().contains("rank_by"));
    }

    #[test]
    fn slowdown_aging_serves_aged_jobs_by_when_they_aged() {
        // Bound 100 s, factor 2. L (1000 s, t=0) ages after 2000 s of wait;
        // S (10 s, t=50) after 100 s, i.e. at 150.
        let cfg = AsrptConfig { aging_bound_s: 100.0, aging_factor: 2.0, ..abs_cfg() };
        let l = job(1, 0.0, 1000.0);
        let s = job(2, 50.0, 10.0);
        assert_eq!(standing(&s, 150.0, &cfg), (Standing::Normal, 150.0));
        assert_eq!(standing(&s, 160.0, &cfg).0, Standing::Urgent { must_start_s: 150.0, aged: true });
        assert_eq!(standing(&l, 160.0, &cfg), (Standing::Normal, 2000.0));
        // Both aged at 2100: S aged first (150 < 2000), so it stays first;
        // under the absolute bound the older L would go first (FIFO).
        assert_eq!(ids(&order(&[l, s], 2100.0, &cfg)), vec![2, 1]);
        let fifo = AsrptConfig { aging_bound_s: 100.0, ..abs_cfg() };
        assert_eq!(ids(&order(&[l, s], 2100.0, &fifo)), vec![1, 2]);
    }

    #[test]
    fn deadline_jobs_move_up_when_slack_is_small_and_drop_when_hopeless() {
        // Slack factor 1. D: 100 s left, due at 1000: urgent after
        // 1000 - 100 - 100 = 800, must start by 900. N: 50 s, no deadline.
        let cfg = AsrptConfig { aging_bound_s: 1e6, ..abs_cfg() };
        let d = job(1, 0.0, 100.0).with_deadline(Some(1000.0));
        let n = job(2, 0.0, 50.0);
        assert_eq!(standing(&d, 700.0, &cfg), (Standing::Normal, 800.0));
        assert_eq!(ids(&order(&[d, n], 700.0, &cfg)), vec![2, 1]);
        assert_eq!(standing(&d, 850.0, &cfg), (Standing::Urgent { must_start_s: 900.0, aged: false }, 900.0));
        assert_eq!(ids(&order(&[d, n], 850.0, &cfg)), vec![1, 2]);
        assert!(priority_for(&d, 850.0, &cfg) > srpt_priority(0.0, &cfg));
        // Past 900 it can no longer finish in time: back to SRPT order.
        assert_eq!(standing(&d, 950.0, &cfg), (Standing::Normal, 1e6));
        assert_eq!(ids(&order(&[d, n], 950.0, &cfg)), vec![2, 1]);
        // Among deadline jobs: earliest must-start first, whatever the size.
        let e = job(3, 0.0, 10.0).with_deadline(Some(880.0)); // urgent after 860, must start by 870
        assert_eq!(ids(&order(&[d, e, n], 860.0, &cfg)), vec![1, 3, 2]);
        assert_eq!(ids(&order(&[d, e, n], 865.0, &cfg)), vec![3, 1, 2]);
        // An aged job (bound 1000, submitted at -1000) goes before any
        // deadline job: no starvation.
        let aged = AsrptConfig { aging_bound_s: 1000.0, ..abs_cfg() };
        let old = job(4, -1000.0, 1e5);
        assert_eq!(ids(&order(&[d, e, n, old], 865.0, &aged)), vec![4, 3, 1, 2]);
        // A non-finite deadline is none.
        assert_eq!(job(5, 0.0, 1.0).with_deadline(Some(f64::INFINITY)).deadline_s, None);
        let bad = AsrptConfig { deadline_slack_factor: -1.0, ..abs_cfg() };
        assert!(bad.validate().unwrap_err().to_string().contains("deadline_slack_factor"));
    }

    #[test]
    fn aged_lane_promotes_only_the_first_aged_jobs() {
        // Bound 100 s, lane 1. A (500 s, t=0), B (50 s, t=10), C (5 s, t=300).
        // At 400: A and B aged (at 100 and 110), C not. Only A (aged first)
        // is urgent; B ranks by its work among the normal jobs: C (5) then B (50).
        let cfg = AsrptConfig { aging_bound_s: 100.0, aged_lane: 1, ..abs_cfg() };
        let jobs = [job(1, 0.0, 500.0), job(2, 10.0, 50.0), job(3, 300.0, 5.0)];
        let r = order(&jobs, 400.0, &cfg);
        assert_eq!(ids(&r), vec![1, 3, 2]);
        assert!(r[0].priority > srpt_priority(0.0, &cfg) && r[1].priority <= srpt_priority(0.0, &cfg));
        // Lane 0: every aged job is urgent (FIFO here).
        assert_eq!(ids(&order(&jobs, 400.0, &AsrptConfig { aged_lane: 0, ..cfg.clone() })), vec![1, 2, 3]);
        let mut q = AsrptQueue::new(cfg, 400.0).unwrap();
        for j in jobs {
            q.insert(j);
        }
        assert_eq!(q.iter_flagged().collect::<Vec<_>>(), vec![(1, true), (3, false), (2, false)]);
        assert!(q.is_aged(2) && !q.is_urgent(2));
        // Once A starts, B is the first aged job and moves up.
        q.remove(1);
        assert_eq!(q.iter_flagged().collect::<Vec<_>>(), vec![(2, true), (3, false)]);
    }

    #[test]
    fn queue_follows_deadline_windows() {
        let cfg = AsrptConfig { aging_bound_s: 1e6, ..abs_cfg() };
        let mut q = AsrptQueue::new(cfg, 0.0).unwrap();
        q.insert(job(1, 0.0, 100.0).with_deadline(Some(1000.0)));
        q.insert(job(2, 0.0, 50.0));
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![2, 1]);
        q.advance(850.0);
        assert!(q.is_urgent(1) && !q.is_aged(1));
        assert_eq!(q.iter_flagged().collect::<Vec<_>>(), vec![(1, true), (2, false)]);
        q.advance(950.0);
        assert!(!q.is_urgent(1));
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![2, 1]);
    }

    #[test]
    fn queue_ages_jobs_as_the_clock_moves() {
        let cfg = AsrptConfig { aging_bound_s: 100.0, ..abs_cfg() };
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
        assert!(AsrptQueue::new(AsrptConfig { aging_bound_s: 0.0, ..abs_cfg() }, 0.0).is_err());
    }

    #[test]
    fn config_validation_names_the_field() {
        let bad = AsrptConfig { aging_bound_s: -1.0, ..abs_cfg() };
        assert!(bad.validate().unwrap_err().to_string().contains("aging_bound_s"));
        let bad = AsrptConfig { max_priority: 1, ..abs_cfg() };
        assert!(bad.validate().unwrap_err().to_string().contains("max_priority"));
        assert!(abs_cfg().validate().is_ok());
    }

    #[test]
    fn many_ties_stay_strict_and_positive() {
        let cfg = AsrptConfig { max_priority: 100, ..abs_cfg() };
        let jobs: Vec<PendingJob> = (0..100).map(|i| job(i, 0.0, 1e9)).collect();
        let r = order(&jobs, 1.0, &cfg);
        assert_eq!(r.last().unwrap().priority, 1);
        assert_eq!(r[0].priority, 100);
        assert!(r.windows(2).all(|w| w[0].priority > w[1].priority));
    }

    fn jobs_strategy() -> impl Strategy<Value = Vec<PendingJob>> {
        // Coarse values make ties frequent; some jobs are wide, some have deadlines.
        proptest::collection::vec(
            (
                0u32..50,
                0u32..20,
                prop_oneof![Just(f64::NAN), (0u32..8).prop_map(|x| 10f64.powi(x as i32))],
                prop_oneof![Just(1u32), Just(2), Just(8)],
                prop_oneof![Just(None), (0u32..120).prop_map(|d| Some(d as f64 * 100.0))],
            ),
            0..60,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (sub, idmod, rem, gpus, due))| {
                    job(i as u32 * 20 + idmod, sub as f64 * 100.0, rem).with_gpus(gpus).with_deadline(due)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn priorities_strictly_decrease_in_range(jobs in jobs_strategy(), now in 0.0f64..10_000.0, bound in 1.0f64..5000.0) {
            let cfg = AsrptConfig { aging_bound_s: bound, max_priority: 1000, ..abs_cfg() };
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
            let cfg = AsrptConfig { aging_bound_s: 2000.0, ..abs_cfg() };
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
        fn ties_are_stable(jobs in jobs_strategy(), now in 0.0f64..10_000.0, area in any::<bool>()) {
            let rank_by = if area { RankBy::Area } else { RankBy::Time };
            let cfg = AsrptConfig { aging_bound_s: 2000.0, rank_by, ..abs_cfg() };
            let r = order(&jobs, now, &cfg);
            let pos: std::collections::HashMap<u32, &PendingJob> = jobs.iter().map(|j| (j.id, j)).collect();
            for w in r.windows(2) {
                let (a, b) = (sort_key(pos[&w[0].id], now, &cfg), sort_key(pos[&w[1].id], now, &cfg));
                // Urgent before normal; within a band by key, ties by (submit, id).
                prop_assert!(a.urgent >= b.urgent);
                if a.urgent == b.urgent {
                    prop_assert!(a.key <= b.key || a.key.is_nan());
                    if a.key == b.key {
                        prop_assert!((a.submit, a.id) <= (b.submit, b.id));
                    }
                }
            }
        }

        #[test]
        fn aging_bound_holds(jobs in jobs_strategy(), now in 0.0f64..10_000.0, bound in 1.0f64..5000.0) {
            let cfg = AsrptConfig { aging_bound_s: bound, ..abs_cfg() };
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
            lane in 0u32..3,
        ) {
            // Insert the jobs in batches, remove some, move the clock forward
            // (and once back): the queue's order equals `order` each time.
            let cfg = AsrptConfig { aging_bound_s: 500.0, aging_factor: factor, aged_lane: lane, rank_by: RankBy::Area, ..abs_cfg() };
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
                // Urgent: deadline-urgent jobs and the first `lane` aged ones.
                let mut aged: Vec<&PendingJob> = live.iter().filter(|j| is_aged(j, now, &cfg)).collect();
                aged.sort_by(|a, b| aged_after_s(a, &cfg).total_cmp(&aged_after_s(b, &cfg)).then(a.submit_time_s.total_cmp(&b.submit_time_s)).then(a.id.cmp(&b.id)));
                let in_lane = if lane == 0 { aged.len() } else { (lane as usize).min(aged.len()) };
                for j in &live {
                    prop_assert_eq!(q.is_aged(j.id), is_aged(j, now, &cfg));
                    let urgent = if is_aged(j, now, &cfg) { aged[..in_lane].iter().any(|a| a.id == j.id) } else { standing(j, now, &cfg).0.is_urgent() };
                    prop_assert_eq!(q.is_urgent(j.id), urgent);
                }
                let flagged: Vec<(u32, bool)> = q.iter_flagged().collect();
                prop_assert!(flagged.iter().all(|&(id, urgent)| urgent == q.is_urgent(id)));
            }
        }

        #[test]
        fn per_job_priority_monotone_in_remaining(a in 0.0f64..1e8, b in 0.0f64..1e8) {
            let cfg = abs_cfg();
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(srpt_priority(lo, &cfg) >= srpt_priority(hi, &cfg));
        }
    }
}
