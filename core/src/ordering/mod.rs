//! From pending jobs to site factors: site_factor/cellsched's decision (pure; the plugin feeds it job records and copies the factors).
//!
//! A job takes part in the A-SRPT order only when job_submit/cellsched
//! recorded a placement [`Decision`] in its `AdminComment`: that gives the
//! predicted seconds per iteration. Remaining time = iterations × iteration
//! time. Iterations come from the declared iterations in the job's record
//! ([`DlRecord::iters`], from `--dl-iters` at submit), else from the [`Predictions`] fitted on the job history; when neither
//! knows them the time limit (or the configured default) stands in. A job
//! with `CELLSCHED_DL_FREEZE` set to a freezing mode is ranked by its
//! effective remaining time ([`FreezeProfile`]: faster iterations as layers
//! freeze, more iterations for the accuracy penalty). Jobs without a
//! decision keep Slurm's stock site factor.
mod predictions;

pub use predictions::Predictions;
use crate::asrpt::{self, AsrptConfig, PendingJob};
use crate::config::OrderingConfig;
use crate::freezing::{FreezeMode, FreezeProfile};
use crate::model::ModelCatalog;
use crate::options::DlOptions;
use crate::predictor::HistoryQuery;
use crate::record::DlRecord;
use crate::Decision;

/// The job's DL options from its `spank_job_env` entries, read through
/// core's option table and precedence rule; a bad value (only possible when
/// job_submit did not validate the job) leaves that option unset.
fn options(job: &JobFields<'_>) -> DlOptions {
    DlOptions::from_entries_lenient(&job.env)
}

/// What the plugin reads from one job record.
#[derive(Debug, Clone, Default)]
pub struct JobFields<'a> {
    /// Slurm job id.
    pub id: u32,
    /// Submitting user's uid.
    pub user_id: u32,
    /// Submit time (Unix seconds).
    pub submit_time_s: i64,
    /// `AdminComment`, if any.
    pub admin_comment: Option<&'a str>,
    /// `spank_job_env` entries: the `CELLSCHED_DL_*` ones and a private
    /// record's entry ([`crate::record::is_private_entry`]).
    pub env: Vec<String>,
    /// Time limit in minutes; `None` when unset or infinite.
    pub time_limit_min: Option<u32>,
    /// The user overran declared work recently: their declared iterations
    /// are not used (see `crate::declared`).
    pub distrusted: bool,
}

/// What ordering knows beyond the job record, loaded outside slurmctld's locks.
#[derive(Debug, Clone, Copy)]
pub struct OrderingData<'a> {
    /// Catalog for canonical model names and layer counts (no file reads).
    pub models: &'a ModelCatalog,
    /// Fitted iteration predictor, once the history has been loaded.
    pub predictions: Option<&'a Predictions>,
}

/// Iterations the history predicts for this job, if it knows its model.
pub fn predicted_iters(job: &JobFields<'_>, decision: &Decision, data: &OrderingData<'_>) -> Option<f64> {
    let p = data.predictions?;
    let o = options(job);
    let (raw, batch) = (o.model.as_deref()?, o.batch?);
    let mut q = HistoryQuery {
        user: p.user_name(job.user_id),
        model: data.models.canonical_name(raw).unwrap_or(raw).to_string(),
        batch,
        gpus: decision.cell.gpus.max(1),
        requested_time_s: job.time_limit_min.map_or(0.0, |m| f64::from(m) * 60.0),
    };
    if let Some(v) = p.predict(&q) {
        return Some(v);
    }
    // The history may use the name as the user wrote it (an alias).
    if q.model != raw {
        q.model = raw.to_string();
        return p.predict(&q);
    }
    None
}

/// The job's freezing profile when it opted in and its model is in the catalog.
pub fn freeze_profile(job: &JobFields<'_>, data: &OrderingData<'_>) -> Option<FreezeProfile> {
    let o = options(job);
    if o.freeze == FreezeMode::Off {
        return None;
    }
    let model = data.models.get(o.model.as_deref()?).ok()?;
    Some(FreezeProfile::for_mode(o.freeze, model.layers))
}

/// True when a running DL job whose record is `record` has overrun the
/// work it declared after `elapsed_s` seconds of running.
pub fn running_overran(record: &DlRecord, elapsed_s: f64, cfg: &crate::declared::DeclaredConfig) -> bool {
    record.declared_work().is_some_and(|(iters, iter_s)| crate::declared::overran(iters, iter_s, elapsed_s, cfg))
}

/// A pending job's remaining seconds on its Cell (`iter_s` per iteration):
/// its iterations (declared or predicted) with freezing, else its time
/// limit, else `default_remaining_s`. What ordering ranks by and what
/// re-planning's wait test weighs.
pub fn remaining_s(iters: Option<f64>, iter_s: f64, freeze: Option<&FreezeProfile>, time_limit_min: Option<u32>, cfg: &OrderingConfig) -> f64 {
    match iters {
        Some(i) => asrpt::remaining_time_s(i, 0.0, iter_s, freeze),
        None => time_limit_min.map(|m| f64::from(m) * 60.0).unwrap_or(cfg.default_remaining_s),
    }
}

/// A pending DL job as the ranking sees it: its A-SRPT view and what the
/// deadline rule ([`crate::deadline::DeadlineLedger`]) reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedJob {
    /// The A-SRPT view ([`pending_job`]).
    pub job: PendingJob,
    /// Submitting user's uid.
    pub user_id: u32,
    /// A deadline dropped at submit as infeasible (`infeasible_deadline=`).
    pub infeasible_deadline: Option<i64>,
}

/// The A-SRPT view of a job, or `None` if cellsched did not place it.
pub fn pending_job(job: &JobFields<'_>, cfg: &OrderingConfig, data: &OrderingData<'_>) -> Option<PendingJob> {
    ranked_job(job, cfg, data).map(|r| r.job)
}

/// [`pending_job`] with its user and infeasible deadline, read from the
/// job's record (AdminComment joined with its private entry, [`DlRecord::of_job`]).
pub fn ranked_job(job: &JobFields<'_>, cfg: &OrderingConfig, data: &OrderingData<'_>) -> Option<RankedJob> {
    let record = DlRecord::of_job(job.admin_comment?, &job.env)?;
    let decision = &record.decision;
    // Declared iterations and the deadline as job_submit recorded them (not
    // the user's text); ignored for a user whose declarations are distrusted.
    let declared = if job.distrusted { None } else { record.iters.map(|i| i as f64) };
    let iters = declared.or_else(|| predicted_iters(job, decision, data));
    // An array with a type set is ranked on the slowest of its types (no rank from a type its tasks may not get).
    let remaining_s = remaining_s(iters, record.work_iter_s(), freeze_profile(job, data).as_ref(), job.time_limit_min, cfg);
    let job_view = PendingJob::new(job.id, job.submit_time_s as f64, remaining_s).with_gpus(decision.cell.gpus.max(1));
    let deadline = record.deadline.filter(|_| !job.distrusted);
    Some(RankedJob { job: job_view.with_deadline(deadline.map(|d| d as f64)), user_id: job.user_id, infeasible_deadline: record.infeasible_deadline })
}

/// The A-SRPT settings for the site factor scale.
pub fn asrpt_config(cfg: &OrderingConfig) -> AsrptConfig {
    AsrptConfig {
        aging_bound_s: cfg.aging_bound_s,
        aging_factor: cfg.aging_factor,
        rank_by: cfg.rank_by,
        deadline_slack_factor: cfg.deadline_slack_factor,
        aged_lane: cfg.aged_lane,
        max_priority: cfg.site_factor_max.max(2),
        ..AsrptConfig::default()
    }
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

    use crate::options::DlKey;

    const ITERS_KEY: &str = DlKey::Iters.spec().env_key;
    const MODEL_KEY: &str = DlKey::Model.spec().env_key;
    const BATCH_KEY: &str = DlKey::Batch.spec().env_key;
    const FREEZE_KEY: &str = DlKey::Freeze.spec().env_key;
    const BASE: u32 = 0x8000_0000;

    fn comment(iter_s: f64) -> String {
        format!("cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s={iter_s:.6} src=datasheet")
    }

    /// A job with AdminComment `c`; declared iterations go into its record, as job_submit writes them.
    fn job<'a>(id: u32, submit: i64, c: Option<&'a str>, iters: Option<u64>) -> JobFields<'a> {
        let c = match (c, iters) {
            (Some(c), Some(i)) => Some(&*Box::leak(format!("{c} iters={i}").into_boxed_str())),
            _ => c,
        };
        JobFields { id, user_id: 1000, submit_time_s: submit, admin_comment: c, env: Vec::new(), time_limit_min: Some(60), distrusted: false }
    }

    #[test]
    fn recorded_deadlines_reach_the_ranking_unless_the_user_is_distrusted() {
        let c = format!("{} model=m batch=8 deadline=5000", comment(0.5));
        let j = job(1, 100, Some(&c), Some(1000));
        let cfg = OrderingConfig::default();
        assert_eq!(pending_job(&j, &cfg, &data()).unwrap().deadline_s, Some(5000.0));
        let liar = JobFields { distrusted: true, ..job(1, 100, Some(&c), Some(1000)) };
        assert_eq!(pending_job(&liar, &cfg, &data()).unwrap().deadline_s, None);
        // A deadline in the user's own text (not AdminComment) is not read.
        let plain = comment(0.5);
        let mut forged = job(2, 100, Some(&plain), Some(1000));
        forged.env.push("SPANK_CELLSCHED_DL_DEADLINE=now+60".into());
        assert_eq!(pending_job(&forged, &cfg, &data()).unwrap().deadline_s, None);
        // A private record: the deadline and iterations come from its spank_job_env entry.
        let minimal = crate::record::PrivacyConfig { admin_comment: crate::record::AdminCommentPrivacy::Minimal };
        let rec = minimal.apply(DlRecord { deadline: Some(5000), iters: Some(10), infeasible_deadline: Some(4000), ..DlRecord::parse(&c).unwrap() });
        let public = rec.to_string();
        assert!(!public.contains("deadline=") && !public.contains("iters="), "{public}");
        let entry = format!("{}={}", crate::record::PRIVATE_ENV_KEY, rec.private_text().unwrap());
        let private = JobFields { env: vec![entry], ..job(1, 100, Some(&public), Some(1000)) };
        let r = ranked_job(&private, &cfg, &data()).unwrap();
        assert_eq!((r.job.deadline_s, r.job.remaining_s, r.infeasible_deadline, r.user_id), (Some(5000.0), 5.0, Some(4000), 1000));
        let without = ranked_job(&job(1, 100, Some(&public), Some(1000)), &cfg, &data()).unwrap();
        assert_eq!(without.job.deadline_s, None);
        assert_ne!(without.job.remaining_s, 5.0, "without its entry the declared iterations are unknown");
    }

    /// An array with a type set is ranked on its slowest type (`slowest_iter_s`), not its decision's.
    #[test]
    fn an_array_with_a_type_set_is_ranked_on_its_slowest_type() {
        let cfg = OrderingConfig::default();
        let one = format!("{} model=m batch=8 iters=1000", comment(0.5));
        let set = format!("{one} types=a100,v100 slowest_iter_s=2");
        let r1 = pending_job(&job(1, 100, Some(&one), None), &cfg, &data()).unwrap().remaining_s;
        let r2 = pending_job(&job(2, 100, Some(&set), None), &cfg, &data()).unwrap().remaining_s;
        assert_eq!((r1, r2), (500.0, 2000.0));
    }

    fn catalog() -> &'static ModelCatalog {
        static C: std::sync::OnceLock<ModelCatalog> = std::sync::OnceLock::new();
        C.get_or_init(ModelCatalog::builtin)
    }

    fn data() -> OrderingData<'static> {
        OrderingData { models: catalog(), predictions: None }
    }

    /// A DL job of uid 1000 with model/batch (and optional freeze mode) but no declared iterations.
    fn dl_job<'a>(id: u32, c: &'a str, model: &str, freeze: Option<&str>) -> JobFields<'a> {
        let mut env = vec![format!("SPANK_{MODEL_KEY}={model}"), format!("SPANK_{BATCH_KEY}=32")];
        if let Some(f) = freeze {
            env.push(format!("SPANK_{FREEZE_KEY}={f}"));
        }
        JobFields { id, user_id: 1000, submit_time_s: 100, admin_comment: Some(c), env, time_limit_min: Some(600), distrusted: false }
    }

    /// History: alice's gpt__350M runs ~5,000 iterations, bob's ~400,000.
    fn predictions() -> Predictions {
        let rec = |user: &str, iters: u64, i: u64| crate::history::HistoryRecord {
            user: user.into(),
            model: "gpt__350M".into(),
            batch: 32,
            gpus: 4,
            requested_time_s: 36_000.0,
            iterations: iters + (i % 5) * iters / 50,
            elapsed_s: 3600.0,
            gpu_type: Some("a100".into()),
        };
        let h: Vec<_> = (0..40).map(|i| rec("alice", 5_000, i)).chain((0..40).map(|i| rec("bob", 400_000, i))).collect();
        Predictions::from_records(&h, std::collections::HashMap::from([(1000, "alice".into()), (1001, "bob".into())]))
    }

    #[test]
    fn predicted_iterations_stand_in_for_missing_ones() {
        let cfg = OrderingConfig::default();
        let p = predictions();
        let d = OrderingData { models: catalog(), predictions: Some(&p) };
        let c = comment(0.5);
        let alice = dl_job(1, &c, "gpt__350M", None);
        let mut bob = dl_job(2, &c, "gpt__350M", None);
        bob.user_id = 1001;
        let (a, b) = (pending_job(&alice, &cfg, &d).unwrap(), pending_job(&bob, &cfg, &d).unwrap());
        let ia = predicted_iters(&alice, &Decision::parse_admin_comment(&c).unwrap(), &d).unwrap();
        assert!((a.remaining_s - ia * 0.5).abs() < 1e-6 && ia < 20_000.0, "alice: {ia} iters, {} s", a.remaining_s);
        assert!(b.remaining_s > 50_000.0 * 0.5, "bob: {} s", b.remaining_s);
        // Both share the time limit (600 min), so without the predictor they tie.
        assert_eq!(pending_job(&alice, &cfg, &data()).unwrap().remaining_s, 36_000.0);
        assert_eq!(pending_job(&bob, &cfg, &data()).unwrap().remaining_s, 36_000.0);
        // With it, alice's recurring short job is ordered first although submitted later.
        bob.submit_time_s = 50;
        let b = pending_job(&bob, &cfg, &d).unwrap();
        let f = site_factors(&[b, a], 200.0, &cfg, BASE);
        assert_eq!(f[0].0, 1, "{f:?}");
        // Declared iterations win over predicted ones.
        let with_iters = format!("{c} iters=10");
        let declared = JobFields { admin_comment: Some(&with_iters), ..alice.clone() };
        // Iterations in the user's own environment are not the record's.
        let mut env_only = alice.clone();
        env_only.env.push(format!("{ITERS_KEY}=10"));
        assert_eq!(pending_job(&env_only, &cfg, &d).unwrap().remaining_s, a.remaining_s);
        assert_eq!(pending_job(&declared, &cfg, &d).unwrap().remaining_s, 5.0);
        // A model the history never saw falls back to the time limit.
        let unknown = dl_job(3, &c, "llama7b", None);
        assert_eq!(pending_job(&unknown, &cfg, &d).unwrap().remaining_s, 36_000.0);
    }

    #[test]
    fn freezing_jobs_are_ranked_by_effective_remaining_time() {
        let cfg = OrderingConfig::default();
        let c = format!("{} iters=100000", comment(0.5));
        let model = "gpt__350M";
        let layers = catalog().get(model).unwrap().layers;
        let plain = dl_job(1, &c, model, None);
        let frozen = dl_job(2, &c, model, Some("auto"));
        let p = pending_job(&plain, &cfg, &data()).unwrap().remaining_s;
        let f = pending_job(&frozen, &cfg, &data()).unwrap().remaining_s;
        let expected = asrpt::remaining_time_s(100_000.0, 0.0, 0.5, Some(&FreezeProfile::for_mode(FreezeMode::Auto, layers)));
        assert_eq!(p, 50_000.0);
        assert!((f - expected).abs() < 1e-6, "{f} vs {expected}");
        assert!(f != p, "freezing must change the remaining time");
        // The order follows the effective time.
        let jobs = [pending_job(&plain, &cfg, &data()).unwrap(), pending_job(&frozen, &cfg, &data()).unwrap()];
        let first = site_factors(&jobs, 200.0, &cfg, BASE)[0].0;
        assert_eq!(first, if f < p { 2 } else { 1 });
        // `off`, a bad mode, or a model outside the catalog: no freezing.
        for (m, mode) in [(model, "off"), (model, "sometimes"), ("/home/u/m.toml", "auto")] {
            let j = dl_job(3, &c, m, Some(mode));
            assert_eq!(pending_job(&j, &cfg, &data()).unwrap().remaining_s, 50_000.0, "{m} {mode}");
        }
    }

    #[test]
    fn remaining_time_from_decision_and_iters() {
        let cfg = OrderingConfig::default();
        let c = comment(0.5);
        let p = pending_job(&job(7, 100, Some(&c), Some(1000)), &cfg, &data()).unwrap();
        assert_eq!((p.id, p.submit_time_s, p.remaining_s), (7, 100.0, 500.0));
        // Unknown iterations: the time limit stands in, else the default.
        assert_eq!(pending_job(&job(7, 100, Some(&c), None), &cfg, &data()).unwrap().remaining_s, 3600.0);
        let mut j = job(7, 100, Some(&c), None);
        j.time_limit_min = None;
        assert_eq!(pending_job(&j, &cfg, &data()).unwrap().remaining_s, cfg.default_remaining_s);
    }

    #[test]
    fn jobs_without_decision_are_not_ordered() {
        let cfg = OrderingConfig::default();
        assert!(pending_job(&job(1, 0, None, Some(10)), &cfg, &data()).is_none());
        assert!(pending_job(&job(1, 0, Some("set by admin"), Some(10)), &cfg, &data()).is_none());
    }

    #[test]
    fn shorter_job_gets_higher_factor_even_if_submitted_later() {
        let cfg = OrderingConfig::default();
        let (cl, cs) = (comment(1.0), comment(1.0));
        let long = pending_job(&job(1, 1000, Some(&cl), Some(100_000)), &cfg, &data()).unwrap();
        let short = pending_job(&job(2, 1010, Some(&cs), Some(100)), &cfg, &data()).unwrap();
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
        // Absolute bound (aging_factor 0): the 100,000 s job waited 1,000 s > 600 s.
        let cfg = OrderingConfig { aging_bound_s: 600.0, aging_factor: 0.0, ..OrderingConfig::default() };
        let c = comment(1.0);
        let old_long = pending_job(&job(1, 0, Some(&c), Some(100_000)), &cfg, &data()).unwrap();
        let new_short = pending_job(&job(2, 900, Some(&c), Some(10)), &cfg, &data()).unwrap();
        let f = site_factors(&[new_short, old_long], 1000.0, &cfg, BASE);
        assert_eq!(f[0].0, 1, "aged job first: {f:?}");
        // Aging by slowdown (factor 20): it ages only after 2,000,000 s of wait.
        let slow = OrderingConfig { aging_factor: 20.0, ..cfg.clone() };
        assert_eq!(site_factors(&[new_short, old_long], 1000.0, &slow, BASE)[0].0, 2);
        assert!(!asrpt::is_aged(&old_long, 2_000_000.0, &asrpt_config(&slow)));
        assert!(asrpt::is_aged(&old_long, 2_000_001.0, &asrpt_config(&slow)));
    }

    #[test]
    fn ranks_by_gpu_seconds_of_the_cell() {
        // Narrow: 1,000 s on its Cell's 4 GPUs (4,000 GPU-s); wide: 900 s on 8 (7,200 GPU-s).
        let cfg = OrderingConfig::default();
        let narrow = pending_job(&job(1, 0, Some(&comment(1.0)), Some(1000)), &cfg, &data()).unwrap();
        assert_eq!(narrow.gpus, 4);
        let mut wide = narrow;
        wide.id = 2;
        wide.gpus = 8;
        wide.remaining_s = 900.0;
        assert_eq!(site_factors(&[wide, narrow], 10.0, &cfg, BASE)[0].0, 1);
        let by_time = OrderingConfig { rank_by: crate::asrpt::RankBy::Time, ..cfg };
        assert_eq!(site_factors(&[wide, narrow], 10.0, &by_time, BASE)[0].0, 2);
    }

    #[test]
    fn distrusted_users_declarations_are_not_used() {
        let models = ModelCatalog::builtin();
        let data = OrderingData { models: &models, predictions: None };
        let cfg = OrderingConfig::default();
        let c = comment(0.5);
        let declared = format!("{c} iters=1");
        let honest = JobFields { id: 1, user_id: 7, submit_time_s: 100, admin_comment: Some(&declared), env: Vec::new(), time_limit_min: Some(600), distrusted: false };
        let liar = JobFields { distrusted: true, ..honest.clone() };
        let (h, l) = (pending_job(&honest, &cfg, &data).unwrap(), pending_job(&liar, &cfg, &data).unwrap());
        assert!((h.remaining_s - 0.5).abs() < 1e-9, "{h:?}");
        assert!((l.remaining_s - 36_000.0).abs() < 1e-9, "the time limit stands in: {l:?}");
        // Overruns are read from the AdminComment tags only.
        let d = crate::declared::DeclaredConfig::default();
        let tagged = format!("{c} model=gpt2 batch=32 iters=10");
        let (tagged, c) = (DlRecord::parse(&tagged).unwrap(), DlRecord::parse(&c).unwrap());
        assert!(!running_overran(&tagged, 14.0, &d));
        assert!(running_overran(&tagged, 16.0, &d));
        assert!(!running_overran(&c, 1e6, &d), "no declaration, no overrun");
        assert_eq!(tagged.declared_work(), Some((10, 0.5)));
        assert_eq!(c.declared_work(), None);
        assert_eq!(DlRecord::parse("iters=10"), None, "no decision, no record");
    }
}
