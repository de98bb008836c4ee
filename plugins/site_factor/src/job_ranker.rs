//! The A-SRPT ranking, computed off slurmctld's job write lock.
//!
//! A background thread takes a snapshot of the pending DL jobs under the
//! *read* locks, in pieces that release them every few milliseconds
//! (`for_each_job_in_pieces`; [`JobRanker::wants`] says which jobs must be
//! copied: only new ones and those whose AdminComment or time limit
//! changed; a running job's AdminComment is copied and parsed once, for the
//! overrun check, [`JobRanker::overruns`]), ranks them with
//! no lock held ([`JobRanker::update`]) and publishes the site factors.
//! `site_factor_p_update`, under the write lock, then only copies the
//! published numbers into the job records ([`JobRanker::factors`]): a hash
//! lookup per pending job, no parsing and no sorting.
//!
//! Deadline urgency follows the per-user rule of
//! [`DeadlineLedger::gate`] at every pass; running jobs that miss their
//! deadline by far ([`JobRanker::deadline_misses`]) and pending jobs whose
//! deadline was dropped as infeasible at submit cost their user deadline
//! urgency ([`DeadlineLedger::demote`]).
//!
//! Memory is bounded by the pending queue: jobs that left it are evicted
//! at every pass.
use cellsched_core::ordering::{self, JobFields, OrderingData, RankedJob};
use cellsched_core::asrpt::PendingJob;
use cellsched_core::config::OrderingConfig;
use cellsched_core::deadline::{self, DeadlineConfig, DeadlineLedger};
use cellsched_core::record::DlRecord;
use cellsched_core::declared::{self, DeclaredConfig};
use cellsched_core::snapshot_cache::{self, IdMap, IdSet, SnapshotCache};
use std::collections::HashMap;
use std::sync::Arc;

/// What tells whether a job changed since it was last parsed: a hash of
/// its AdminComment (the decision; re-planning changes it) and time limit
/// (stands in for unknown iterations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp(u64);

impl Stamp {
    /// The stamp of a job with this AdminComment and time limit.
    pub fn of(admin_comment: &str, time_limit_min: Option<u32>) -> Stamp {
        Stamp::of_bytes(admin_comment.as_bytes(), time_limit_min)
    }

    /// [`Stamp::of`] of the AdminComment's bytes (under the lock: no UTF-8 check).
    pub fn of_bytes(admin_comment: &[u8], time_limit_min: Option<u32>) -> Stamp {
        let limit = time_limit_min.map(u32::to_le_bytes);
        Stamp(snapshot_cache::stamp_bytes(&[Some(admin_comment), limit.as_ref().map(|l| &l[..])]))
    }
}

/// A running DL job seen by a pass (overrun check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running {
    /// Slurm job id.
    pub id: u32,
    /// Its user's uid.
    pub user_id: u32,
    /// Start time (Unix seconds).
    pub start_s: i64,
    /// [`Stamp`] of its AdminComment (no time limit).
    pub stamp: Stamp,
}

/// A pending DL job copied out of slurmctld: only what ordering reads.
#[derive(Debug, Clone, Default)]
pub struct Snap {
    /// Slurm job id.
    pub id: u32,
    /// Submitting user's uid.
    pub user_id: u32,
    /// Submit time (Unix seconds).
    pub submit_time_s: i64,
    /// AdminComment (holds the decision).
    pub admin_comment: String,
    /// The job's `CELLSCHED_DL_*` environment entries and its private
    /// record's entry (`cellsched_core::record::is_private_entry`) only.
    pub env: Vec<String>,
    /// Time limit in minutes; `None` when unset or infinite.
    pub time_limit_min: Option<u32>,
}

/// What the checks of a running job read from its record.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RunFacts {
    /// Declared work (iterations, seconds per iteration).
    work: Option<(u64, f64)>,
    /// Its deadline (Unix seconds).
    deadline: Option<i64>,
}

/// A running DL job's AdminComment and private record entry, copied for its checks.
pub type RunningCopy = (u32, Stamp, String, Option<String>);

/// Cached parse results and the published site factors.
#[derive(Debug, Default)]
pub struct JobRanker {
    cache: IdMap<(Stamp, Option<RankedJob>)>,
    /// Pending jobs of demoted users (stock factor).
    demoted: IdSet,
    /// Running DL jobs' declared work and deadline, by id.
    running: SnapshotCache<RunFacts>,
    factors: Arc<HashMap<u32, u32>>,
    /// The last pass's buffers, reused by the next one (no growth under the lock).
    pub buffers: Buffers,
}

/// Lists a pass fills under the read locks; kept between passes for their capacity.
#[derive(Debug, Default)]
pub struct Buffers {
    /// Every pending DL job with its stamp.
    pub seen: Vec<(u32, Stamp)>,
    /// Every running DL job.
    pub running: Vec<Running>,
}

/// Users who overran declared work recently, and what that costs them.
#[derive(Debug, Clone, Default)]
pub struct Distrust {
    /// Their uids.
    pub users: std::collections::HashSet<u32>,
    /// Stock site factor for their pending DL jobs (`OverrunPolicy::Demote`)
    /// instead of ranking them without their declarations.
    pub demote: bool,
}

impl JobRanker {
    /// True when job `id` with `stamp` must be copied for the next pass
    /// (unknown, or changed since it was parsed).
    pub fn wants(&self, id: u32, stamp: &Stamp) -> bool {
        self.cache.get(&id).map_or(true, |(s, _)| s != stamp)
    }

    /// True when running job `id`'s AdminComment must be copied (unknown, or changed).
    pub fn wants_running(&self, id: u32, stamp: Stamp) -> bool {
        self.running.wants(id, stamp.0)
    }

    /// The running DL jobs (`running`, from a pass) that overran their
    /// declared work at `now_s`; `fresh` holds the AdminComments
    /// [`JobRanker::wants_running`] asked for (parsed here, once per job). Jobs
    /// no longer running are forgotten.
    pub fn overruns(&mut self, running: &[Running], fresh: Vec<RunningCopy>, now_s: f64, cfg: &DeclaredConfig) -> Vec<(u32, u32, i64)> {
        for (id, stamp, comment, private) in fresh {
            let facts = DlRecord::parse_with_private(&comment, private.as_deref()).map(|r| RunFacts { work: r.declared_work(), deadline: r.deadline });
            self.running.insert(id, stamp.0, facts);
        }
        self.running.retain_live(&running.iter().map(|r| r.id).collect::<IdSet>());
        running
            .iter()
            .filter(|r| {
                self.running
                    .get_at(r.id, r.stamp.0)
                    .and_then(|f| f.work)
                    .is_some_and(|(iters, iter_s)| declared::overran(iters, iter_s, now_s - r.start_s as f64, cfg))
            })
            .map(|r| (r.id, r.user_id, r.start_s))
            .collect()
    }

    /// Running jobs (parsed by [`JobRanker::overruns`] this pass) still
    /// running at `now_s` later than their deadline by more than
    /// `miss_factor` × their predicted run time (declared iterations ×
    /// seconds per iteration): `(uid, when it became a miss by far)`. That
    /// time does not move from pass to pass, so demoting with it is idempotent.
    pub fn deadline_misses(&self, running: &[Running], now_s: f64, cfg: &DeadlineConfig) -> Vec<(u32, f64)> {
        running
            .iter()
            .filter_map(|r| {
                let f = self.running.get_at(r.id, r.stamp.0)?;
                let (d, (iters, iter_s)) = (f.deadline?, f.work?);
                let run_s = iters as f64 * iter_s;
                deadline::missed_by_far(d, now_s as i64, run_s, cfg).then_some((r.user_id, d as f64 + cfg.miss_factor * run_s))
            })
            .collect()
    }

    /// Forgets every parse (the predictor or the config changed).
    pub fn invalidate(&mut self) {
        self.cache.clear();
        self.demoted.clear();
    }

    /// One pass: `seen` lists every pending DL job with its stamp, `fresh`
    /// the copies [`JobRanker::wants`] asked for. Parses the fresh ones, drops
    /// jobs no longer pending, ranks the rest and publishes their factors.
    /// Jobs of `distrust.users` are parsed without their declared
    /// iterations, or, with `distrust.demote`, left out of the ranking at
    /// the stock factor `base` (call [`JobRanker::invalidate`] when that set changes).
    /// Deadlines count as `deadlines` grants them, in submit order
    /// ([`DeadlineLedger::gate`]); a job whose deadline was infeasible at
    /// submit demotes its user (from its submit time).
    #[allow(clippy::too_many_arguments)]
    pub fn update(&mut self, seen: &[(u32, Stamp)], fresh: Vec<Snap>, now_s: f64, cfg: &OrderingConfig, data: &OrderingData<'_>, base: u32, distrust: &Distrust, deadlines: (&mut DeadlineLedger, &DeadlineConfig)) {
        for s in fresh {
            let distrusted = distrust.users.contains(&s.user_id);
            if distrusted && distrust.demote {
                self.cache.insert(s.id, (Stamp::of(&s.admin_comment, s.time_limit_min), None));
                self.demoted.insert(s.id);
                continue;
            }
            self.demoted.remove(&s.id);
            let stamp = Stamp::of(&s.admin_comment, s.time_limit_min);
            let fields = JobFields {
                id: s.id,
                user_id: s.user_id,
                submit_time_s: s.submit_time_s,
                admin_comment: Some(&s.admin_comment),
                env: s.env,
                time_limit_min: s.time_limit_min,
                distrusted,
            };
            self.cache.insert(s.id, (stamp, ordering::ranked_job(&fields, cfg, data)));
        }
        let live: IdSet = seen.iter().map(|(id, _)| *id).collect();
        self.cache.retain(|id, _| live.contains(id));
        self.demoted.retain(|id| live.contains(id));
        let mut ranked: Vec<RankedJob> = self.cache.values().filter_map(|(_, p)| *p).collect();
        let (ledger, dcfg) = deadlines;
        for r in ranked.iter().filter(|r| r.infeasible_deadline.is_some()) {
            ledger.demote(r.user_id, r.job.submit_time_s);
        }
        ranked.sort_unstable_by(|a, b| a.job.submit_time_s.total_cmp(&b.job.submit_time_s).then(a.job.id.cmp(&b.job.id)));
        let jobs: Vec<PendingJob> = ranked
            .into_iter()
            .map(|mut r| {
                ledger.gate(r.user_id, &mut r.job, now_s, dcfg);
                r.job
            })
            .collect();
        let mut factors: HashMap<u32, u32> = ordering::site_factors(&jobs, now_s, cfg, base).into_iter().collect();
        factors.extend(self.demoted.iter().map(|id| (*id, base)));
        self.factors = Arc::new(factors);
    }

    /// The site factors of the last pass, by job id.
    pub fn factors(&self) -> Arc<HashMap<u32, u32>> {
        self.factors.clone()
    }

    /// Jobs currently parsed (for the debug log).
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when no job is parsed.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::model::ModelCatalog;

    fn snap(id: u32, iter_s: f64, iters: u64, submit: i64) -> Snap {
        Snap {
            id,
            user_id: 1000,
            submit_time_s: submit,
            admin_comment: format!(
                "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s={iter_s} src=datasheet model=gpt2 batch=32 iters={iters}"
            ),
            env: vec!["CELLSCHED_DL_MODEL=gpt2".into(), "CELLSCHED_DL_BATCH=32".into(), format!("CELLSCHED_DL_ITERS={iters}")],
            time_limit_min: Some(600),
        }
    }

    fn stamp(s: &Snap) -> (u32, Stamp) {
        (s.id, Stamp::of(&s.admin_comment, s.time_limit_min))
    }

    #[test]
    fn ranks_like_the_direct_computation_and_reparses_only_changes() {
        let models = ModelCatalog::builtin();
        let data = OrderingData { models: &models, predictions: None };
        let cfg = OrderingConfig::default();
        let jobs = [snap(1, 0.5, 100_000, 100), snap(2, 0.5, 10, 100), snap(3, 1.0, 1000, 50)];
        let mut r = JobRanker::default();
        let seen: Vec<_> = jobs.iter().map(stamp).collect();
        assert!(seen.iter().all(|(id, st)| r.wants(*id, st)));
        let (mut ledger, dcfg) = (DeadlineLedger::default(), DeadlineConfig::default());
        r.update(&seen, jobs.to_vec(), 1000.0, &cfg, &data, 10, &Distrust::default(), (&mut ledger, &dcfg));
        // Same factors as ranking the whole set directly.
        let direct: Vec<PendingJob> = jobs
            .iter()
            .filter_map(|s| {
                let f = JobFields { id: s.id, user_id: s.user_id, submit_time_s: s.submit_time_s, admin_comment: Some(&s.admin_comment), env: s.env.clone(), time_limit_min: s.time_limit_min, distrusted: false };
                ordering::pending_job(&f, &cfg, &data)
            })
            .collect();
        let want: HashMap<u32, u32> = ordering::site_factors(&direct, 1000.0, &cfg, 10).into_iter().collect();
        assert_eq!(*r.factors(), want);
        assert!(r.factors()[&2] > r.factors()[&1], "short before long");
        // Unchanged jobs are not copied again; a re-planned one (new AdminComment) is.
        assert!(seen.iter().all(|(id, st)| !r.wants(*id, st)));
        let mut moved = jobs[0].clone();
        moved.admin_comment = moved.admin_comment.replace("iter_s=0.5", "iter_s=0.00001");
        assert!(r.wants(1, &Stamp::of(&moved.admin_comment, moved.time_limit_min)));
        // A job that left the queue is evicted; the moved one is re-parsed.
        let seen2 = vec![stamp(&moved), seen[1]];
        r.update(&seen2, vec![moved], 1000.0, &cfg, &data, 10, &Distrust::default(), (&mut ledger, &dcfg));
        assert_eq!(r.len(), 2);
        assert!(!r.factors().contains_key(&3));
        assert!(r.factors()[&1] > r.factors()[&2], "the re-planned job is now the shortest");
        r.invalidate();
        assert!(r.is_empty() && r.wants(2, &seen[1].1));
        // A distrusted user's one-iteration claim no longer wins; demoted, they get the stock factor.
        let liar = Distrust { users: [1000].into_iter().collect(), demote: false };
        r.update(&seen, jobs.to_vec(), 1000.0, &cfg, &data, 10, &liar, (&mut ledger, &dcfg));
        assert!(r.factors()[&2] <= r.factors()[&3], "job 2's 10 iterations are ignored: {:?}", r.factors());
        r.invalidate();
        r.update(&seen, jobs.to_vec(), 1000.0, &cfg, &data, 10, &Distrust { demote: true, ..liar }, (&mut ledger, &dcfg));
        assert!(r.factors().values().all(|f| *f == 10), "{:?}", r.factors());
    }

    #[test]
    fn running_overruns_are_parsed_once_and_checked_by_the_clock() {
        let d = DeclaredConfig::default();
        // 10 iterations of 0.5 s declared: overran past 10 x 0.5 x slack seconds.
        let comment = snap(7, 0.5, 10, 0).admin_comment;
        let allowed = 10.0 * 0.5 * d.slack;
        let st = Stamp::of(&comment, None);
        let run = [Running { id: 7, user_id: 1000, start_s: 100, stamp: st }];
        let mut r = JobRanker::default();
        assert!(r.wants_running(7, st));
        assert!(r.overruns(&run, vec![(7, st, comment.clone(), None)], 100.0 + allowed - 1.0, &d).is_empty());
        assert!(!r.wants_running(7, st), "parsed once");
        // The next pass copies nothing and still sees the overrun once the clock passes the bound.
        assert_eq!(r.overruns(&run, Vec::new(), 100.0 + allowed + 1.0, &d), vec![(7, 1000, 100)]);
        // A changed comment is not trusted until copied again; a job that ended is forgotten.
        let changed = [Running { stamp: Stamp::of("cellsched: other", None), ..run[0] }];
        assert!(r.wants_running(7, changed[0].stamp));
        assert!(r.overruns(&changed, Vec::new(), 1e9, &d).is_empty());
        assert!(r.overruns(&[], Vec::new(), 1e9, &d).is_empty());
        assert!(r.wants_running(7, st), "forgotten after it left");
        // No declaration: never an overrun.
        let bare = snap(8, 0.5, 10, 0).admin_comment.replace(" iters=10", "");
        let b = [Running { id: 8, user_id: 1, start_s: 0, stamp: Stamp::of(&bare, None) }];
        assert!(r.overruns(&b, vec![(8, b[0].stamp, bare, None)], 1e9, &d).is_empty());
        // The byte stamp is the text stamp; the time limit is part of it.
        assert_eq!(Stamp::of_bytes(comment.as_bytes(), Some(5)), Stamp::of(&comment, Some(5)));
        assert_ne!(Stamp::of(&comment, Some(5)), Stamp::of(&comment, Some(6)));
        assert_ne!(Stamp::of(&comment, Some(5)), Stamp::of(&comment, None));
    }

    /// A private record (`[privacy] admin_comment = "minimal"`) ranks by
    /// the declared work of its spank_job_env entry as a full one does.
    #[test]
    fn private_records_rank_like_full_ones() {
        use cellsched_core::record::{AdminCommentPrivacy, PrivacyConfig, PRIVATE_ENV_KEY};
        let models = ModelCatalog::builtin();
        let data = OrderingData { models: &models, predictions: None };
        let cfg = OrderingConfig::default();
        let minimal = PrivacyConfig { admin_comment: AdminCommentPrivacy::Minimal };
        let private = |s: Snap| {
            let rec = minimal.apply(DlRecord::parse(&s.admin_comment).unwrap());
            assert!(!rec.to_string().contains("iters="));
            let entry = format!("{PRIVATE_ENV_KEY}={}", rec.private_text().unwrap());
            Snap { admin_comment: rec.to_string(), env: [s.env, vec![entry]].concat(), ..s }
        };
        let full = [snap(1, 0.5, 100_000, 100), snap(2, 0.5, 10, 100)];
        let hidden: Vec<Snap> = full.iter().cloned().map(private).collect();
        let (mut ledger, dcfg) = (DeadlineLedger::default(), DeadlineConfig::default());
        let mut a = JobRanker::default();
        a.update(&full.iter().map(stamp).collect::<Vec<_>>(), full.to_vec(), 1000.0, &cfg, &data, 10, &Distrust::default(), (&mut ledger, &dcfg));
        let mut b = JobRanker::default();
        b.update(&hidden.iter().map(stamp).collect::<Vec<_>>(), hidden.clone(), 1000.0, &cfg, &data, 10, &Distrust::default(), (&mut ledger, &dcfg));
        assert_eq!(*a.factors(), *b.factors());
        assert!(b.factors()[&2] > b.factors()[&1], "short before long: {:?}", b.factors());
        // Running: the overrun check reads the private iterations.
        let d = DeclaredConfig::default();
        let h = &hidden[1];
        let st = Stamp::of(&h.admin_comment, None);
        let run = [Running { id: 2, user_id: 1000, start_s: 0, stamp: st }];
        let entry = h.env.iter().find_map(|e| e.strip_prefix(&format!("{PRIVATE_ENV_KEY}="))).map(str::to_string);
        assert_eq!(b.overruns(&run, vec![(2, st, h.admin_comment.clone(), entry)], 1e6, &d), vec![(2, 1000, 0)]);
    }

    /// Issue 31 item 3: a 1,000,000-iteration job due in 80 h ranks first
    /// by deadline urgency only while its user's deadline budget allows
    /// it; beyond the budget, or after an infeasible deadline, it ranks by
    /// its work behind an honest queue.
    #[test]
    fn deadline_urgency_follows_the_ledger() {
        let models = ModelCatalog::builtin();
        let data = OrderingData { models: &models, predictions: None };
        let cfg = OrderingConfig::default();
        let now = 1_000_000.0;
        // 1,000,000 iterations x 0.16 s on 4 GPUs: ~44 h, ~178 GPU-hours; due in 80 h (slack < remaining: urgent).
        let mut big = snap(9, 0.16, 1_000_000, 990_000);
        big.user_id = 2000;
        big.admin_comment = format!("{} deadline={}", big.admin_comment, now as i64 + 80 * 3600);
        let honest: Vec<Snap> = (1..=5).map(|i| snap(i, 0.5, 1000 * u64::from(i), 990_000)).collect();
        let jobs: Vec<Snap> = honest.iter().cloned().chain([big.clone()]).collect();
        let seen: Vec<_> = jobs.iter().map(stamp).collect();
        let top = |r: &JobRanker| r.factors().iter().max_by_key(|(_, f)| **f).map(|(id, _)| *id).unwrap();
        let rank = |dcfg: &DeadlineConfig, ledger: &mut DeadlineLedger| {
            let mut r = JobRanker::default();
            r.update(&seen, jobs.clone(), now, &cfg, &data, 10, &Distrust::default(), (ledger, dcfg));
            r
        };
        // No limit: the deadline puts it first (the attack).
        let unlimited = DeadlineConfig { budget_gpu_hours: 0.0, ..DeadlineConfig::default() };
        assert_eq!(top(&rank(&unlimited, &mut DeadlineLedger::default())), 9);
        // A 100 GPU-hour budget: the job alone is beyond it and ranks by its work (last).
        let budget = DeadlineConfig { budget_gpu_hours: 100.0, ..DeadlineConfig::default() };
        let r = rank(&budget, &mut DeadlineLedger::default());
        assert_ne!(top(&r), 9);
        assert!(r.factors().iter().all(|(id, f)| *id == 9 || *f > r.factors()[&9]), "{:?}", r.factors());
        // Within the default budget it keeps its urgency, until its user is demoted by an infeasible deadline.
        let mut ledger = DeadlineLedger::default();
        let dcfg = DeadlineConfig { budget_gpu_hours: 1000.0, ..DeadlineConfig::default() };
        assert_eq!(top(&rank(&dcfg, &mut ledger)), 9);
        let mut dropped = snap(10, 0.5, 10, 995_000);
        dropped.user_id = 2000;
        dropped.admin_comment = format!("{} infeasible_deadline={}", dropped.admin_comment, 995_100);
        let mut r = JobRanker::default();
        let jobs2: Vec<Snap> = jobs.iter().cloned().chain([dropped.clone()]).collect();
        r.update(&jobs2.iter().map(stamp).collect::<Vec<_>>(), jobs2, now, &cfg, &data, 10, &Distrust::default(), (&mut ledger, &dcfg));
        assert!(ledger.is_demoted(2000, now, &dcfg));
        assert!(r.factors()[&9] < r.factors()[&1], "demoted: {:?}", r.factors());
        // A running job past its deadline by far demotes its user from a fixed time.
        let mut late = JobRanker::default();
        let c = format!("{} deadline=1000", snap(11, 1.0, 100, 0).admin_comment);
        let st = Stamp::of(&c, None);
        let run = [Running { id: 11, user_id: 3000, start_s: 0, stamp: st }];
        late.overruns(&run, vec![(11, st, c, None)], 1040.0, &DeclaredConfig::default());
        assert!(late.deadline_misses(&run, 1040.0, &dcfg).is_empty(), "40 s late of a 100 s run: not by far");
        assert_eq!(late.deadline_misses(&run, 1060.0, &dcfg), vec![(3000, 1050.0)]);
        assert_eq!(late.deadline_misses(&run, 2000.0, &dcfg), vec![(3000, 1050.0)]);
    }
}
