//! Re-planning: which still-pending DL jobs move to another Cell, given the
//! GPUs free now. Pure; the plugin's thread snapshots jobs and nodes under
//! slurmctld's read locks, calls [`plan_moves`] without locks, then applies
//! the moves under the write locks.
//!
//! Jobs are visited in priority order. A job whose current Cell could start
//! on the free GPUs keeps it (and those GPUs are set aside for it); one that
//! could not moves to the Cell the free GPUs allow (sized by marginal value,
//! `super::sizing`, like at submit, and against the load: it grows into
//! free GPUs no other pending job waits for, `super::load`), if that is at most
//! `replan_max_slowdown` times slower per iteration and, with the wait test
//! on (`replan_wait_test`, the default) and a wait view from the host
//! ([`ReplanJob::plan_wait`]), only if it is predicted to finish no later
//! than waiting for the current Cell ([`PlanWait::slower_cell_finishes_first`],
//! the simulator's rule). GPUs given to a moved job are set aside too, so
//! two jobs are never moved onto the same GPUs.
use super::wait::PlanWait;
use super::{offers, request, LoadView, NodeGpus};
use crate::config::PlacementConfig;
use crate::declared::DeclaredConfig;
use crate::estimator::{CellOffer, Estimate, Estimator, JobSpec};
use crate::rank_cache::RankCache;
use crate::record::DlRecord;
use crate::Decision;
use std::collections::HashMap;
use std::rc::Rc;

/// A pending, automatically placed DL job.
#[derive(Debug, Clone)]
pub struct PendingDl {
    /// Job id.
    pub id: u32,
    /// Its record (from AdminComment): decision, declared iterations, the
    /// GPU count the user fixed, the limit cellsched set, `plan_iter_s`.
    pub record: DlRecord,
    /// What the estimator needs.
    pub job: JobSpec,
    /// Its current feature expression.
    pub features: Option<String>,
    /// Declared iterations and the seconds left to its `--dl-deadline` at
    /// the snapshot: a move goes only to a Cell predicted to finish in time.
    pub deadline_work: Option<(u64, f64)>,
}

impl PendingDl {
    /// The job as re-planning sees it, from its AdminComment and job
    /// environment (`now` in Unix seconds): `None` unless cellsched placed
    /// it automatically (no pinned Cell or plan; the caller leaves out
    /// typed GPU requests) and its record and model still read, and
    /// `None` for a job array with a type set (`DlRecord::types`): its
    /// tasks already start on any of those types, so it is never moved.
    pub fn from_job(id: u32, admin_comment: &str, env: &[String], features: Option<String>, est: &Estimator, now: i64) -> Option<PendingDl> {
        use crate::options::{CellChoice, PlanChoice};
        let record = DlRecord::of_job(admin_comment, env).filter(|r| r.types.len() < 2)?;
        let o = super::dl_options(env).ok().flatten().filter(|o| o.cell == CellChoice::Auto && o.plan == PlanChoice::Auto)?;
        let job = super::job_spec(&o, est, env).ok()?;
        // Seconds left to the recorded deadline; one already passed no longer steers the move.
        let left = record.deadline.map(|d| d - now).filter(|l| *l > 0);
        let deadline_work = left.zip(record.iters).map(|(l, n)| (n, l as f64));
        Some(PendingDl { id, record, job, features, deadline_work })
    }

    /// Its current decision.
    pub fn decision(&self) -> &Decision {
        &self.record.decision
    }

    /// Declared iterations, when cellsched set the job's time limit from
    /// them (`limit_min` in its record): a move resets the limit for the
    /// new Cell's iteration time.
    pub fn limited_iters(&self) -> Option<u64> {
        self.record.limit_min.and(self.record.iters)
    }
}

/// A pending job as [`plan_moves_cached`] reads it: the job, and what its
/// host knows of its wait for its current Cell.
pub trait ReplanJob {
    /// The job.
    fn job(&self) -> &PendingDl;
    /// Its wait for its current Cell; `None`: the host has no wait view, and
    /// a slower free Cell within the slowdown bound is taken at once.
    fn plan_wait(&self) -> Option<PlanWait>;
}

impl ReplanJob for PendingDl {
    fn job(&self) -> &PendingDl {
        self
    }
    fn plan_wait(&self) -> Option<PlanWait> {
        None
    }
}

impl ReplanJob for &PendingDl {
    fn job(&self) -> &PendingDl {
        self
    }
    fn plan_wait(&self) -> Option<PlanWait> {
        None
    }
}

impl<J: std::borrow::Borrow<PendingDl>> ReplanJob for (J, Option<PlanWait>) {
    fn job(&self) -> &PendingDl {
        self.0.borrow()
    }
    fn plan_wait(&self) -> Option<PlanWait> {
        self.1
    }
}

/// One re-placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// Job id.
    pub id: u32,
    /// Decision it had.
    pub from: Decision,
    /// New estimate.
    pub to: Estimate,
    /// New feature expression.
    pub features: String,
    /// New per-node GRES as users write it (`gpu:N`).
    pub gres: String,
    /// The job's record before the move (its facts are kept).
    pub record: DlRecord,
    /// New time limit (minutes) from the declared iterations on the new Cell.
    pub time_limit_min: Option<u32>,
    /// Seconds per iteration the slowdown bound counts from (kept in AdminComment).
    pub plan_iter_s: f64,
    /// When the move was planned (Unix seconds, the pass's clock), kept as
    /// the record's `moved_at` for the cool-down; `None` without a clock.
    pub moved_at: Option<i64>,
}

impl Move {
    /// The new decision's text (also put into the job's environment).
    pub fn decision_text(&self) -> String {
        self.to.to_decision().to_admin_comment()
    }

    /// AdminComment after the move: the new decision, the job's facts, the
    /// new limit, and where it came from ([`DlRecord::moved`]).
    pub fn admin_comment(&self) -> String {
        DlRecord { moved_at: self.moved_at, ..self.record.moved(self.to.to_decision(), self.plan_iter_s, self.time_limit_min) }.to_string()
    }
}

/// The free GPUs during one planning pass, with what per-job work can share
/// while they do not change: the offers they make, and per job class
/// (model, batch, fixed GPU count) its ranked Cells. Every reservation
/// starts a new epoch that drops both. Per GPU type the nodes' indices and
/// the free GPUs in all, so a job whose Cell cannot start costs no scan of
/// the whole node table.
struct Pool<'c> {
    nodes: Vec<NodeGpus>,
    by_type: HashMap<String, Vec<usize>>,
    free_by_type: HashMap<String, u64>,
    cfg: &'c PlacementConfig,
    offers: Option<Vec<CellOffer>>,
    ranked: HashMap<(u64, u32, Option<u32>), Rc<Vec<Estimate>>>,
}

impl<'c> Pool<'c> {
    fn new(nodes: &[NodeGpus], cfg: &'c PlacementConfig) -> Self {
        let mut by_type: HashMap<String, Vec<usize>> = HashMap::new();
        let mut free_by_type: HashMap<String, u64> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            by_type.entry(n.gpu_type.clone()).or_default().push(i);
            *free_by_type.entry(n.gpu_type.clone()).or_default() += u64::from(n.free);
        }
        Pool { nodes: nodes.to_vec(), by_type, free_by_type, cfg, offers: None, ranked: HashMap::new() }
    }

    /// Sets aside `nodes` nodes of `gpu_type` with `per_node` free GPUs each
    /// (the first that fit, in node-table order); false if impossible.
    fn reserve(&mut self, gpu_type: &str, nodes: u32, per_node: u32) -> bool {
        let need = u64::from(nodes) * u64::from(per_node);
        if self.free_by_type.get(gpu_type).copied().unwrap_or(0) < need {
            return false;
        }
        let Some(idx) = self.by_type.get(gpu_type) else { return false };
        let fit: Vec<usize> = idx.iter().copied().filter(|&i| self.nodes[i].free >= per_node).take(nodes as usize).collect();
        if (fit.len() as u32) < nodes {
            return false;
        }
        for i in fit {
            self.nodes[i].free -= per_node;
        }
        if let Some(f) = self.free_by_type.get_mut(gpu_type) {
            *f -= need;
        }
        self.offers = None;
        self.ranked.clear();
        true
    }

    /// `super::ranked_for` the job on the free GPUs, shared by its class until the next reservation.
    fn ranked_for(&mut self, j: &PendingDl, est: &Estimator, ranks: Option<&RankCache>) -> Rc<Vec<Estimate>> {
        let key = (j.job.model.fingerprint(), j.job.global_batch, j.record.fixed_gpus);
        if let Some(r) = self.ranked.get(&key) {
            return r.clone();
        }
        let offers = self.offers.get_or_insert_with(|| offers(&self.nodes, self.cfg, false));
        let r = Rc::new(super::ranked_for(&j.job, offers, self.cfg, j.record.fixed_gpus, est, ranks));
        self.ranked.insert(key, r.clone());
        r
    }
}

/// The moves for `jobs` (highest priority first) on the free GPUs of `nodes`
/// (no wait view: see [`plan_moves_cached`]).
pub fn plan_moves(jobs: &[PendingDl], nodes: &[NodeGpus], cfg: &PlacementConfig, declared: &DeclaredConfig, est: &Estimator) -> Vec<Move> {
    plan_moves_cached(jobs, nodes, cfg, declared, est, None, 0.0)
}

/// [`plan_moves`], with Cell rankings from `ranks` (the cache of `est`) when
/// given, and each job's wait view ([`ReplanJob::plan_wait`], on the clock
/// of `now_s`). `jobs` may be references or `(&PendingDl, Option<PlanWait>)`
/// pairs: a caller keeping the jobs in a cache plans without cloning them.
pub fn plan_moves_cached<J: ReplanJob>(
    jobs: &[J],
    nodes: &[NodeGpus],
    cfg: &PlacementConfig,
    declared: &DeclaredConfig,
    est: &Estimator,
    ranks: Option<&RankCache>,
    now_s: f64,
) -> Vec<Move> {
    // The load moves are sized against: every pending job waits for its Cell's GPUs until it starts or moves.
    let mut load = LoadView::from_nodes(nodes);
    for jw in jobs {
        load.add_wanted(&jw.job().record.decision.cell.gpu_type, u64::from(jw.job().record.decision.cell.gpus));
    }
    let mut pass = Pass { pool: Pool::new(nodes, cfg), waited_for: Vec::new(), declared, est, ranks, now_s, load };
    let mut moves = Vec::new();
    for jw in jobs {
        let j = jw.job();
        let d = &j.record.decision;
        let nodes_n = d.nodes.max(1);
        if pass.pool.reserve(&d.cell.gpu_type, nodes_n, d.cell.gpus / nodes_n) {
            pass.load.remove_wanted(&d.cell.gpu_type, u64::from(d.cell.gpus));
            continue; // its Cell can start now
        }
        match pass.plan_move(j, jw.plan_wait()) {
            Some(mv) => {
                pass.load.remove_wanted(&d.cell.gpu_type, u64::from(d.cell.gpus));
                moves.push(mv)
            }
            None => {
                if !pass.waited_for.contains(&d.cell.gpu_type) {
                    pass.waited_for.push(d.cell.gpu_type.clone());
                }
            }
        }
    }
    moves
}

/// One planning pass: the free GPUs, the GPU types that jobs earlier in the
/// order wait for (they neither start nor move), and what every job's
/// choice reads.
struct Pass<'a> {
    pool: Pool<'a>,
    waited_for: Vec<String>,
    declared: &'a DeclaredConfig,
    est: &'a Estimator,
    ranks: Option<&'a RankCache>,
    now_s: f64,
    /// Free GPUs (as of the pass start) and the GPUs still-pending jobs wait for.
    load: LoadView,
}

impl Pass<'_> {
    /// The move of pending job `j`, whose Cell cannot start now, if any (its GPUs then set aside).
    fn plan_move(&mut self, j: &PendingDl, wait: Option<PlanWait>) -> Option<Move> {
        let (cfg, declared, now_s) = (self.pool.cfg, self.declared, self.now_s);
        let d = &j.record.decision;
        if in_cooldown(j.record.moved_at, now_s, cfg.replan_cooldown_s) {
            return None;
        }
        let all = self.pool.ranked_for(j, self.est, self.ranks);
        // Only Cells within the slowdown bound of its first plan are candidates (as in the simulator).
        let plan_iter_s = j.record.plan_iter_s.map_or(d.iter_s, |p| p.min(d.iter_s));
        let limit = plan_iter_s * cfg.replan_max_slowdown * (1.0 + 1e-9);
        let mut ranked: Vec<Estimate> = all.iter().filter(|e| e.iter_time_s <= limit).cloned().collect();
        if let Some((iters, left_s)) = j.deadline_work {
            let work = super::sizing::DeadlineWork { iters: iters as f64, left_s };
            ranked.retain(|e| work.met_by(e.iter_time_s));
        }
        let mut load = self.load.without_wanted(&d.cell.gpu_type, u64::from(d.cell.gpus));
        for (t, free) in &self.pool.free_by_type {
            load.set_free(t, *free);
        }
        let best = super::choose_ranked_under_load(&ranked, cfg, j.record.fixed_gpus, cfg.load_sizing.then_some(&load)).map(|i| ranked[i].clone())?;
        if best.cell == d.cell {
            return None;
        }
        if best.iter_time_s > d.iter_s * (1.0 + 1e-9) && cfg.replan_wait_test {
            if let Some(w) = wait {
                // Slower than its Cell: only if that beats waiting for it. A
                // deadline job counts as urgent (nothing passes it, so its
                // forecast needs no waited-time correction).
                let contended = self.waited_for.contains(&best.cell.gpu_type);
                if !w.takes_slower_cell(now_s, (best.cell.gpus, best.iter_time_s), (d.cell.gpus, d.iter_s), j.deadline_work.is_some(), contended) {
                    return None;
                }
                // The predicted gain must be worth a move (hysteresis).
                let correct = super::wait::corrects_wait(j.deadline_work.is_some(), best.cell.gpus, best.iter_time_s, d.cell.gpus, d.iter_s, contended);
                if !w.gains_enough(now_s, w.rem_plan_s * best.iter_time_s / d.iter_s, correct, cfg.replan_min_gain) {
                    return None;
                }
            }
        }
        if !self.pool.reserve(&best.cell.gpu_type, best.nodes, best.gpus_per_node) {
            return None;
        }
        let user = request::without_type_feature(j.features.as_deref(), &d.cell.gpu_type);
        Some(Move {
            id: j.id,
            from: d.clone(),
            features: request::with_type_feature(user.as_deref(), &best.cell.gpu_type),
            gres: format!("gpu:{}", best.gpus_per_node),
            record: j.record.clone(),
            time_limit_min: j.limited_iters().and_then(|n| crate::declared::time_bound_min(n, best.iter_time_s, declared)),
            plan_iter_s,
            moved_at: (now_s > 0.0).then_some(now_s as i64),
            to: best,
        })
    }
}

/// True while a job moved at `moved_at` (Unix seconds) is within the
/// re-planning cool-down at `now_s` (no clock, `now_s` <= 0: never).
pub fn in_cooldown(moved_at: Option<i64>, now_s: f64, cooldown_s: u64) -> bool {
    match moved_at {
        Some(t) if now_s > 0.0 => now_s < t as f64 + cooldown_s as f64,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::node_gpus;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;

    fn est() -> Estimator {
        Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
    }

    fn spec() -> JobSpec {
        let m = ModelCatalog::builtin();
        let name = m.names().find(|n| n.contains("gpt")).unwrap().to_string();
        JobSpec { model: m.resolve(&name).unwrap(), global_batch: 32 }
    }

    fn cluster(used: &[(&str, u32)]) -> Vec<NodeGpus> {
        [("a100-1", "a100", 4), ("a100-2", "a100", 4), ("v100-1", "v100", 8), ("v100-2", "v100", 8)]
            .iter()
            .flat_map(|(n, t, c)| {
                let u = used.iter().find(|(x, _)| x == n).map(|(_, u)| *u).unwrap_or(0);
                node_gpus(n, Some(&format!("gpu:{t}:{c}")), Some(&format!("gpu:{t}:{u}")), true)
            })
            .collect()
    }

    /// The job's decision on the best a100 Cell.
    fn on_a100(e: &Estimator) -> Decision {
        let cfg = PlacementConfig { allowed_gpu_types: vec!["a100".into()], ..Default::default() };
        e.rank_cells(&spec(), &offers(&cluster(&[]), &cfg, false), 16)[0].to_decision()
    }

    #[test]
    fn waiting_job_moves_to_freed_type() {
        let e = est();
        let d = on_a100(&e);
        let job = PendingDl {
            id: 5,
            record: DlRecord { model: Some("m".into()), batch: Some(32), iters: Some(9), ..DlRecord::new(d.clone()) },
            job: spec(),
            features: Some(format!("ib&{}", d.cell.gpu_type)),
            deadline_work: None,
        };
        // a100s busy, v100s free: the job moves to v100 (if not too slow).
        let busy = cluster(&[("a100-1", 4), ("a100-2", 4)]);
        let cfg = PlacementConfig { replan_max_slowdown: 100.0, ..Default::default() };
        let m = plan_moves(std::slice::from_ref(&job), &busy, &cfg, &DeclaredConfig::default(), &e);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].to.cell.gpu_type, "v100");
        assert_eq!(m[0].features, "ib&v100");
        assert_eq!(m[0].gres, format!("gpu:{}", m[0].to.gpus_per_node));
        assert!(m[0].admin_comment().contains(&format!("replanned_from={}", d.cell)));
        assert_eq!(
            m[0].admin_comment(),
            format!("{} model=m batch=32 iters=9 plan_iter_s={} replanned_from={}", m[0].decision_text(), d.iter_s, d.cell)
        );
        assert_eq!(DlRecord::parse(&m[0].admin_comment()).unwrap().plan_iter_s, Some(d.iter_s));
        let back = Decision::parse_admin_comment(&m[0].admin_comment()).unwrap();
        assert_eq!((back.cell, back.plan, back.nodes), (m[0].to.cell.clone(), m[0].to.plan, m[0].to.nodes));

        // Its own Cell free: stays.
        assert!(plan_moves(std::slice::from_ref(&job), &cluster(&[]), &cfg, &DeclaredConfig::default(), &e).is_empty());
        // A slowdown bound of 1 forbids moving to anything slower.
        let strict = PlacementConfig { replan_max_slowdown: 1.0, ..Default::default() };
        for mv in plan_moves(std::slice::from_ref(&job), &busy, &strict, &DeclaredConfig::default(), &e) {
            assert!(mv.to.iter_time_s <= d.iter_s);
        }
        // A GPU count the user fixed is kept by every move.
        let fixed = PendingDl { record: DlRecord { fixed_gpus: Some(d.cell.gpus), ..job.record.clone() }, ..job.clone() };
        for mv in plan_moves(std::slice::from_ref(&fixed), &busy, &cfg, &DeclaredConfig::default(), &e) {
            assert_eq!(mv.to.cell.gpus, d.cell.gpus, "{mv:?}");
        }
        // A time limit cellsched set from declared iterations follows the new Cell's speed.
        let limited = PendingDl { record: DlRecord { iters: Some(5000), limit_min: Some(1), ..job.record.clone() }, ..job.clone() };
        let mv = plan_moves(std::slice::from_ref(&limited), &busy, &cfg, &DeclaredConfig::default(), &e);
        let want = crate::declared::time_bound_min(5000, mv[0].to.iter_time_s, &DeclaredConfig::default());
        assert!(want.is_some());
        assert_eq!(mv[0].time_limit_min, want);
        assert!(mv[0].admin_comment().contains(&format!("limit_min={} plan_iter_s=", want.unwrap())), "{}", mv[0].admin_comment());
        assert_eq!(m[0].time_limit_min, None, "no declared limit, none set");
        // A deadline: the move goes only where the work is predicted to finish in time.
        let t = m[0].to.iter_time_s;
        let in_time = PendingDl { deadline_work: Some((1000, 1000.0 * t * 1.01)), ..job.clone() };
        for mv in plan_moves(std::slice::from_ref(&in_time), &busy, &cfg, &DeclaredConfig::default(), &e) {
            assert!(1000.0 * mv.to.iter_time_s <= 1000.0 * t * 1.01, "{mv:?}");
        }
        let hopeless = PendingDl { deadline_work: Some((1000, 1000.0 * t * 0.5)), ..job.clone() };
        let faster_free = plan_moves(std::slice::from_ref(&hopeless), &busy, &cfg, &DeclaredConfig::default(), &e);
        assert!(faster_free.iter().all(|mv| 1000.0 * mv.to.iter_time_s <= 1000.0 * t * 0.5), "{faster_free:?}");
        let odd = PendingDl { record: DlRecord { fixed_gpus: Some(3), ..job.record.clone() }, ..job };
        assert!(plan_moves(std::slice::from_ref(&odd), &busy, &cfg, &DeclaredConfig::default(), &e).iter().all(|mv| mv.to.cell.gpus == 3));
    }

    #[test]
    fn moves_of_a_job_that_did_not_start_do_not_compound_the_slowdown() {
        let e = est();
        let d = on_a100(&e);
        let dc = DeclaredConfig::default();
        let job = PendingDl { id: 8, record: DlRecord::new(d.clone()), job: spec(), features: None, deadline_work: None };
        // Busy a100s, free v100s; then the v100s busy too, and p100s free.
        let nodes = |v100_used: u32| -> Vec<NodeGpus> {
            [("a100-1", "a100", 4, 4), ("a100-2", "a100", 4, 4), ("v100-1", "v100", 8, v100_used), ("v100-2", "v100", 8, v100_used), ("p100-1", "p100", 8, 8 - v100_used.min(8))]
                .iter()
                .flat_map(|(n, t, c, u)| node_gpus(n, Some(&format!("gpu:{t}:{c}")), Some(&format!("gpu:{t}:{u}")), true))
                .collect()
        };
        let loose = PlacementConfig { replan_max_slowdown: 100.0, ..Default::default() };
        let first = plan_moves(std::slice::from_ref(&job), &nodes(0), &loose, &dc, &e)[0].clone();
        assert_eq!(first.to.cell.gpu_type, "v100", "precondition: {first:?}");
        let after = |m: &Move, forget: bool| {
            let mut record = DlRecord::parse(&m.admin_comment()).unwrap();
            if forget {
                record.plan_iter_s = None;
            }
            PendingDl { record, ..job.clone() }
        };
        let second = plan_moves(&[after(&first, true)], &nodes(8), &loose, &dc, &e)[0].clone();
        assert_eq!(second.to.cell.gpu_type, "p100", "precondition: {second:?}");
        let (s1, s2) = (first.to.iter_time_s / d.iter_s, second.to.iter_time_s / first.to.iter_time_s);
        assert!(s1 > 1.0 && s2 > 1.0, "precondition: both moves slower ({s1}, {s2})");
        // A bound each move keeps on its own but the two together exceed.
        let bound = (s1.max(s2) * s1 * s2).sqrt();
        let cfg = PlacementConfig { replan_max_slowdown: bound, ..Default::default() };
        let first = plan_moves(std::slice::from_ref(&job), &nodes(0), &cfg, &dc, &e)[0].clone();
        let within = |m: &Move| m.to.iter_time_s <= d.iter_s * bound * (1.0 + 1e-9);
        // Counted from the new Cell, the second move goes beyond the bound from the first plan...
        let forgetful = plan_moves(&[after(&first, true)], &nodes(8), &cfg, &dc, &e);
        assert!(forgetful.iter().any(|m| !within(m)), "the scenario must show compounding: {forgetful:?}");
        // ... counted from the first plan (plan_iter_s in AdminComment), it stays within.
        for m in plan_moves(&[after(&first, false)], &nodes(8), &cfg, &dc, &e) {
            assert!(within(&m), "{m:?}");
            assert_eq!(m.plan_iter_s, d.iter_s);
        }
    }

    #[test]
    fn a_slower_cell_is_taken_only_when_it_beats_waiting() {
        let e = est();
        let d = on_a100(&e);
        let job = PendingDl { id: 7, record: DlRecord { iters: Some(1000), ..DlRecord::new(d.clone()) }, job: spec(), features: None, deadline_work: None };
        let busy = cluster(&[("a100-1", 4), ("a100-2", 4)]);
        let cfg = PlacementConfig { replan_max_slowdown: 100.0, ..Default::default() };
        let dc = DeclaredConfig::default();
        // Where the job would go with no wait view (at once).
        let to = plan_moves(std::slice::from_ref(&job), &busy, &cfg, &dc, &e)[0].to.clone();
        assert!(to.iter_time_s > d.iter_s, "precondition: the free Cell is slower");
        let rem_plan = 1000.0 * d.iter_s;
        let loss = 1000.0 * (to.iter_time_s - d.iter_s);
        let wait = |free_in: f64, waited: f64| PlanWait { plan_free_at_s: 0.0, queue_ahead_s: free_in, waited_s: waited, rem_plan_s: rem_plan };
        let moved = |w: PlanWait, cfg: &PlacementConfig| !plan_moves_cached(&[(&job, Some(w))], &busy, cfg, &dc, &e, None, 0.0).is_empty();
        // Its Cell frees up sooner than the slower Cell's loss: it waits.
        assert!(!moved(wait(0.5 * loss, 0.0), &cfg));
        // Later than the loss: it moves.
        assert!(moved(wait(1.5 * loss, 0.0), &cfg));
        // With the wait test off, it moves either way.
        let off = PlacementConfig { replan_wait_test: false, ..cfg.clone() };
        assert!(moved(wait(0.5 * loss, 0.0), &off));
        // Having waited longer than the loss counts where nobody ahead waits
        // for the slower Cell's type (here nobody is ahead)...
        assert!(moved(wait(0.0, 1.5 * loss), &cfg));
        assert!(!moved(wait(0.0, 0.5 * loss), &cfg));
        // ... and otherwise only where the slower Cell uses no more GPU-time.
        // A job ahead that needs 16 v100s waits for v100 (one node of it free):
        // a move of this job to that node is taken when it has waited longer
        // than its loss only if it uses no more GPU-time than its plan.
        let one_v100: Vec<NodeGpus> = cluster(&[("a100-1", 4), ("a100-2", 4), ("v100-2", 8)]);
        let v100s = PlacementConfig { allowed_gpu_types: vec!["v100".into()], ..Default::default() };
        let sixteen = e.rank_cells(&spec(), &offers(&cluster(&[]), &v100s, false), 16).into_iter().find(|x| x.cell.gpus == 16).expect("a 16-GPU v100 Cell");
        let ahead = PendingDl { id: 6, record: DlRecord { fixed_gpus: Some(16), ..DlRecord::new(sixteen.to_decision()) }, ..job.clone() };
        let alone = plan_moves_cached(&[(&job, Some(wait(0.0, 1e9)))], &one_v100, &cfg, &dc, &e, None, 0.0);
        let to1 = alone.first().map(|m| m.to.clone()).expect("precondition: the free v100 node takes the job");
        let loss1 = 1000.0 * (to1.iter_time_s - d.iter_s);
        let cheap = crate::placement::uses_no_more_gpu_time(to1.cell.gpus, to1.iter_time_s, d.cell.gpus, d.iter_s);
        assert!(!cheap, "the scenario must make the slower Cell cost more GPU-time: {to1:?}");
        let both = [(&ahead, None), (&job, Some(wait(0.0, 1.5 * loss1)))];
        let m = plan_moves_cached(&both, &one_v100, &cfg, &dc, &e, None, 0.0);
        assert!(m.iter().all(|mv| mv.id != 6), "the job ahead waits: {m:?}");
        assert_eq!(m.iter().any(|mv| mv.id == 7), cheap, "{m:?}");
        // Alone (nobody ahead waits for v100) it moves.
        assert!(!plan_moves_cached(&[(&job, Some(wait(0.0, 1.5 * loss1)))], &one_v100, &cfg, &dc, &e, None, 0.0).is_empty());
    }

    #[test]
    fn a_recent_move_or_a_small_gain_keeps_the_job_where_it_is() {
        let e = est();
        let d = on_a100(&e);
        let job = PendingDl { id: 9, record: DlRecord { iters: Some(1000), ..DlRecord::new(d.clone()) }, job: spec(), features: None, deadline_work: None };
        let busy = cluster(&[("a100-1", 4), ("a100-2", 4)]);
        let dc = DeclaredConfig::default();
        let cfg = PlacementConfig { replan_max_slowdown: 100.0, replan_cooldown_s: 300, ..Default::default() };
        let now = 1_800_000_000.0;
        let first = plan_moves_cached(&[&job], &busy, &cfg, &dc, &e, None, now);
        assert_eq!(first.len(), 1, "precondition: the job moves off the busy a100s");
        let back = DlRecord::parse(&first[0].admin_comment()).unwrap();
        assert_eq!(back.moved_at, Some(now as i64), "the move is stamped");
        // Moved to v100; now the v100s are busy and the a100s free again: the
        // job would move back, but not within the cool-down.
        let moved = PendingDl { record: back, ..job.clone() };
        let flipped = cluster(&[("v100-1", 8), ("v100-2", 8)]);
        assert!(plan_moves_cached(&[&moved], &flipped, &cfg, &dc, &e, None, now + 299.0).is_empty(), "moved back within the cool-down");
        let later = plan_moves_cached(&[&moved], &flipped, &cfg, &dc, &e, None, now + 300.0);
        assert_eq!(later.len(), 1, "after the cool-down it may move: {later:?}");
        let off = PlacementConfig { replan_cooldown_s: 0, ..cfg.clone() };
        assert_eq!(plan_moves_cached(&[&moved], &flipped, &off, &dc, &e, None, now + 1.0).len(), 1);
        assert!(!in_cooldown(Some(now as i64), 0.0, 300), "no clock, no cool-down");
        // Minimum gain: a slower Cell that wins by less than replan_min_gain of the run stays put.
        let to = first[0].to.clone();
        let rem_plan = 1000.0 * d.iter_s;
        let loss = 1000.0 * (to.iter_time_s - d.iter_s);
        // Waiting costs the loss plus 2 % of the run: a 1 % minimum gain moves, a 5 % one does not.
        let w = PlanWait { plan_free_at_s: now, queue_ahead_s: loss + 0.02 * rem_plan, waited_s: 0.0, rem_plan_s: rem_plan };
        let with_gain = |g: f64| PlacementConfig { replan_min_gain: g, ..cfg.clone() };
        assert_eq!(plan_moves_cached(&[(&job, Some(w))], &busy, &with_gain(0.01), &dc, &e, None, now).len(), 1);
        assert!(plan_moves_cached(&[(&job, Some(w))], &busy, &with_gain(0.05), &dc, &e, None, now).is_empty());
    }

    #[test]
    fn two_jobs_are_not_moved_onto_the_same_gpus() {
        let e = est();
        let d = on_a100(&e);
        let jobs: Vec<PendingDl> =
            (1..=3).map(|id| PendingDl { id, record: DlRecord::new(d.clone()), job: spec(), features: None, deadline_work: None }).collect();
        let busy = cluster(&[("a100-1", 4), ("a100-2", 4)]);
        let cfg = PlacementConfig { replan_max_slowdown: 100.0, ..Default::default() };
        let moves = plan_moves(&jobs, &busy, &cfg, &DeclaredConfig::default(), &e);
        let used: u32 = moves.iter().map(|m| m.to.cell.gpus).sum();
        assert!(used <= 16, "moved {used} GPUs onto 16 free: {moves:?}");
        assert!(!moves.is_empty());
        // Higher-priority jobs (earlier in the list) are served first.
        assert_eq!(moves[0].id, 1);
    }
}
