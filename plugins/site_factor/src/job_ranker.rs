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
//! Memory is bounded by the pending queue: jobs that left it are evicted
//! at every pass.
use cellsched_core::ordering::{self, JobFields, OrderingData};
use cellsched_core::asrpt::PendingJob;
use cellsched_core::config::OrderingConfig;
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
    /// The job's `CELLSCHED_DL_*` environment entries only.
    pub env: Vec<String>,
    /// Time limit in minutes; `None` when unset or infinite.
    pub time_limit_min: Option<u32>,
}

/// Cached parse results and the published site factors.
#[derive(Debug, Default)]
pub struct JobRanker {
    cache: IdMap<(Stamp, Option<PendingJob>)>,
    /// Pending jobs of demoted users (stock factor).
    demoted: IdSet,
    /// Running DL jobs' declared work (iterations, seconds per iteration), by id.
    running: SnapshotCache<(u64, f64)>,
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
    pub fn overruns(&mut self, running: &[Running], fresh: Vec<(u32, Stamp, String)>, now_s: f64, cfg: &DeclaredConfig) -> Vec<(u32, u32, i64)> {
        for (id, stamp, comment) in fresh {
            self.running.insert(id, stamp.0, DlRecord::parse(&comment).and_then(|r| r.declared_work()));
        }
        self.running.retain_live(&running.iter().map(|r| r.id).collect::<IdSet>());
        running
            .iter()
            .filter(|r| {
                self.running
                    .get_at(r.id, r.stamp.0)
                    .is_some_and(|&(iters, iter_s)| declared::overran(iters, iter_s, now_s - r.start_s as f64, cfg))
            })
            .map(|r| (r.id, r.user_id, r.start_s))
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
    pub fn update(&mut self, seen: &[(u32, Stamp)], fresh: Vec<Snap>, now_s: f64, cfg: &OrderingConfig, data: &OrderingData<'_>, base: u32, distrust: &Distrust) {
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
            self.cache.insert(s.id, (stamp, ordering::pending_job(&fields, cfg, data)));
        }
        let live: IdSet = seen.iter().map(|(id, _)| *id).collect();
        self.cache.retain(|id, _| live.contains(id));
        self.demoted.retain(|id| live.contains(id));
        let jobs: Vec<PendingJob> = self.cache.values().filter_map(|(_, p)| *p).collect();
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
        r.update(&seen, jobs.to_vec(), 1000.0, &cfg, &data, 10, &Distrust::default());
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
        r.update(&seen2, vec![moved], 1000.0, &cfg, &data, 10, &Distrust::default());
        assert_eq!(r.len(), 2);
        assert!(!r.factors().contains_key(&3));
        assert!(r.factors()[&1] > r.factors()[&2], "the re-planned job is now the shortest");
        r.invalidate();
        assert!(r.is_empty() && r.wants(2, &seen[1].1));
        // A distrusted user's one-iteration claim no longer wins; demoted, they get the stock factor.
        let liar = Distrust { users: [1000].into_iter().collect(), demote: false };
        r.update(&seen, jobs.to_vec(), 1000.0, &cfg, &data, 10, &liar);
        assert!(r.factors()[&2] <= r.factors()[&3], "job 2's 10 iterations are ignored: {:?}", r.factors());
        r.invalidate();
        r.update(&seen, jobs.to_vec(), 1000.0, &cfg, &data, 10, &Distrust { demote: true, ..liar });
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
        assert!(r.overruns(&run, vec![(7, st, comment.clone())], 100.0 + allowed - 1.0, &d).is_empty());
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
        assert!(r.overruns(&b, vec![(8, b[0].stamp, bare)], 1e9, &d).is_empty());
        // The byte stamp is the text stamp; the time limit is part of it.
        assert_eq!(Stamp::of_bytes(comment.as_bytes(), Some(5)), Stamp::of(&comment, Some(5)));
        assert_ne!(Stamp::of(&comment, Some(5)), Stamp::of(&comment, Some(6)));
        assert_ne!(Stamp::of(&comment, Some(5)), Stamp::of(&comment, None));
    }
}
