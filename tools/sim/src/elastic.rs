//! Reconfiguration of running elastic jobs (trace column `elastic`,
//! `--dl-elastic`) in the simulator: the `cellsched` policy's host of
//! `core::elastic::decide`, the rule slurmctld's side calls too.
//!
//! Every `[elastic] interval_s` of simulated time ([`crate::view::Policy::tick`])
//! the policy hands the rule what the plugin would see: the running elastic
//! jobs (their current Cell, this run's start, their predicted remaining
//! time, their restart cost), the pending jobs in its order with their
//! planned Cells, predicted run times and forecast waits
//! ([`crate::view::SimView::earliest_fit`]), and the free GPUs per node.
//! Ranked Cells come from the simulator's knowledge ([`crate::times`]) and
//! are sized by `core::placement::sizing`, as the policy sizes at start.
//!
//! Each reconfiguration runs on the clock ([`crate::view::SimView::reconfigure`]):
//! the job checkpoints at once (no progress, GPUs held) for its save time,
//! leaves its GPUs, is requeued with its progress kept and re-planned, and
//! its next start loses its restart time (start to first iteration). A
//! grown or moved job restarts on its target Cell: it is planned there and,
//! within `placement.replan_cooldown_s` of the move, not re-planned
//! elsewhere (the plugin's cool-down, `core::placement::in_cooldown`).
//!
//! Truth and knowledge: decisions use predicted (knowledge) iteration and
//! remaining times and the cost model (`core::elastic::RestartCost`); the
//! clock runs on truth. Save and restart times on the clock are measured
//! ones when given: `SimConfig::reconf_truth` (the live replay's emulated
//! trainer and host latency) or `SimConfig::restart_truth` (measured runs
//! by checkpoint size, `--restart-truth`); else the cost model's.
//!
//! A job with a fixed GPU count (`CellschedOptions::fixed_counts`, the
//! plugin's `fixed_gpus`: an untyped `--gres=gpu:N`) is only moved to
//! another type, keeping its count, as job_submit's chooser does.
use crate::cluster::ClusterState;
use crate::times::{TimeCache, TimedCell};
use crate::view::SimView;
use cellsched_core::config::{ElasticConfig, PlacementConfig};
use cellsched_core::declared::DeclaredConfig;
use cellsched_core::elastic::{self, CellChooser, DecideContext, Reconfig, RestartCost, RunningElastic, WaitingJob};
use cellsched_core::estimator::{CellOffer, Estimate, JobSpec};
use cellsched_core::model::ModelCatalog;
use cellsched_core::placement::{in_cooldown, LoadView, NodeGpus, SizingRule};
use cellsched_core::record::DlRecord;
use cellsched_core::signal::ElasticSignal;
use cellsched_core::{Cell, Decision, Plan};
use std::collections::HashMap;

/// One decision pass as the rule saw it, kept when [`ElasticHost::keep_passes`] is set.
#[derive(Debug, Clone)]
pub struct Pass {
    /// Simulated time of the pass (the rule's `now`).
    pub now: i64,
    /// The running elastic jobs handed to the rule.
    pub running: Vec<RunningElastic>,
    /// The pending jobs, in the policy's order.
    pub waiting: Vec<WaitingJob>,
    /// Free GPUs per node.
    pub nodes: Vec<NodeGpus>,
    /// What the rule decided.
    pub decided: Vec<Reconfig>,
}

/// The policy's elastic state: the rule's settings, each elastic job's
/// record (its reconfiguration history), the Cells reconfigured jobs
/// restart on and the decision cadence.
pub struct ElasticHost {
    cfg: ElasticConfig,
    placement: PlacementConfig,
    declared: DeclaredConfig,
    sizing: SizingRule,
    fixed_counts: bool,
    catalog: ModelCatalog,
    specs: HashMap<String, Option<JobSpec>>,
    records: HashMap<usize, DlRecord>,
    targets: HashMap<usize, TimedCell>,
    moved_at: HashMap<usize, i64>,
    next_at: f64,
    /// After a pass that decided nothing: the simulation's version then and
    /// when a running elastic job's bounds next let the rule touch it (see
    /// [`Self::tick`]).
    idle: Option<(u64, f64)>,
    /// Keep every pass ([`Self::passes`]), for tests that replay them on the plugin's side.
    pub keep_passes: bool,
    passes: Vec<Pass>,
}

/// A pending job as the policy hands it over: its index, planned Cell and
/// predicted remaining time there.
pub type Waiting = (usize, TimedCell, f64);

/// Node `n` of group `g` as the rule names it.
fn node_name(g: usize, n: u32) -> String {
    format!("g{g}n{n}")
}

/// The free GPUs of every node, as the plugins see them.
pub fn free_nodes(c: &ClusterState) -> Vec<NodeGpus> {
    let mut out = Vec::new();
    for (g, gs) in c.groups.iter().enumerate() {
        for (n, &free) in gs.free_per_node().iter().enumerate() {
            out.push(NodeGpus { node: node_name(g, n as u32), gpu_type: gs.spec.gpu_type.clone(), total: gs.spec.gpus_per_node, free });
        }
    }
    out
}

/// A simulator Cell as a core decision: one pipeline stage, data parallel
/// over its GPUs (the plan is not modelled by the simulator's clock; this
/// one keeps the record consistent, as a parsed AdminComment must be).
pub fn decision_of(c: &TimedCell) -> Option<Decision> {
    let plan = Plan { dp: c.gpus.max(1), ..Plan::default() };
    Some(Decision { cell: Cell::new(&c.gpu_type, c.gpus, 1).ok()?, nodes: c.nodes, plan, iter_s: c.iter_s, source: cellsched_core::cell::EstimateSource::Datasheet })
}

impl ElasticHost {
    /// The host for `cfg` and the policy's placement settings.
    pub fn new(cfg: ElasticConfig, placement: PlacementConfig, sizing: SizingRule) -> Self {
        ElasticHost {
            cfg,
            placement,
            declared: DeclaredConfig::default(),
            sizing,
            fixed_counts: false,
            catalog: ModelCatalog::builtin(),
            specs: HashMap::new(),
            records: HashMap::new(),
            targets: HashMap::new(),
            moved_at: HashMap::new(),
            next_at: 0.0,
            idle: None,
            keep_passes: false,
            passes: Vec::new(),
        }
    }

    /// Keeps each job's GPU count (the trace's) when it is moved, as the
    /// plugin does for a job with `fixed_gpus`.
    pub fn with_fixed_counts(mut self, fixed: bool) -> Self {
        self.fixed_counts = fixed;
        self
    }

    /// The passes kept so far (see [`Self::keep_passes`]).
    pub fn passes(&self) -> &[Pass] {
        &self.passes
    }

    /// The Cell reconfigured job `i` restarts on, taken once at its re-plan.
    pub fn take_target(&mut self, i: usize) -> Option<TimedCell> {
        self.targets.remove(&i)
    }

    /// Whether job `i` was moved by a reconfiguration less than
    /// `cooldown_s` ago: it is then not re-planned away from its target.
    pub fn in_cooldown(&self, i: usize, now: f64, cooldown_s: u64) -> bool {
        in_cooldown(self.moved_at.get(&i).copied(), now.max(1.0), cooldown_s)
    }

    fn spec(&mut self, model: &str, batch: u32) -> Option<JobSpec> {
        let catalog = &self.catalog;
        self.specs
            .entry(model.to_string())
            .or_insert_with(|| catalog.resolve(model).ok().map(|m| JobSpec { model: m, global_batch: batch }))
            .clone()
            .map(|s| JobSpec { global_batch: batch, ..s })
    }

    /// Whether job `i` may be reconfigured at all: it opted in and runs on
    /// a Cell the knowledge chose (not stock, not pinned).
    pub fn elastic_job(sim: &dyn SimView, i: usize) -> bool {
        let j = sim.job(i);
        j.spec.elastic && !j.stock && !j.pinned
    }

    /// Asks for the next pass while an elastic job runs.
    pub fn keep_ticking(&self, sim: &mut dyn SimView) {
        if self.cfg.enabled && sim.running().iter().any(|&i| Self::elastic_job(sim, i)) {
            let at = self.next_at.max(sim.now());
            sim.tick_at(at);
        }
    }

    /// One decision pass at the plugin's cadence: `waiting` gives the
    /// pending jobs in the policy's order with their planned Cells and
    /// predicted remaining times there. Applies what the rule decides.
    ///
    /// A pass is skipped when no job arrived, started or stopped since a
    /// pass that decided nothing and no running elastic job's bounds
    /// (`min_run_s`, `max_per_hour`) have expired since: every gain the rule
    /// weighs only shrinks as time passes (remaining times and forecast
    /// waits fall, costs stay), so it would decide nothing again.
    pub fn tick(&mut self, sim: &mut dyn SimView, waiting: &dyn Fn(&dyn SimView) -> Vec<Waiting>) {
        if !self.cfg.enabled || sim.now() < self.next_at {
            return;
        }
        let now_f = sim.now();
        self.next_at = now_f + self.cfg.interval_s as f64;
        if self.idle.is_some_and(|(v, until)| v == sim.version() && now_f < until) {
            return;
        }
        let waiting = waiting(sim);
        let now = now_f.floor() as i64;
        let mut running = Vec::new();
        let mut hints = HashMap::new();
        let ids: Vec<usize> = sim.running().iter().copied().filter(|&i| Self::elastic_job(sim, i)).collect();
        for i in ids {
            let j = sim.job(i);
            let Some(a) = &j.alloc else { continue };
            let gs = &sim.cluster().groups[a.shape.group];
            let cell = TimedCell { gpu_type: gs.spec.gpu_type.clone(), gpus: a.shape.gpus(), nodes: a.shape.nodes, gpus_per_node: a.shape.gpus_per_node, iter_s: j.pred_iter_s };
            let Some(decision) = decision_of(&cell) else { continue };
            let nodes: Vec<String> = a.nodes.iter().map(|&n| node_name(a.shape.group, n)).collect();
            let (model, batch, hint, started_at) = (j.spec.model_name.clone(), j.spec.batch_size, j.spec.num_gpu.max(1), j.alloc_time.floor() as i64);
            let remaining_s = sim.remaining_s(i, j.pred_iter_s);
            let Some(job) = self.spec(&model, batch) else { continue };
            // As job_submit records it at placement (`core::placement::dl_record`).
            let measured = sim.times().measured_first_iter_s(&job.model.name, &decision.cell.gpu_type);
            let rec = self.records.entry(i).or_insert_with(|| DlRecord { elastic: Some(ElasticSignal::USR1), restart_s: measured, ..DlRecord::new(decision.clone()) });
            rec.decision = decision;
            let record = rec.clone();
            let cost = RestartCost::of(&record, &job, &self.cfg);
            hints.insert(i as u32, (model, batch, hint));
            running.push(RunningElastic { id: i as u32, record, job, features: None, nodes, started_at, remaining_s, cost });
        }
        if running.is_empty() {
            return;
        }
        let version = sim.version();
        let waiting: Vec<WaitingJob> = waiting
            .iter()
            .filter_map(|(i, c, run_s)| {
                let t = sim.cluster().type_index(&c.gpu_type)?;
                let at = sim.earliest_fit(t, c.nodes, c.gpus_per_node);
                Some(WaitingJob { id: *i as u32, decision: decision_of(c)?, run_s: *run_s, wait_s: at.is_finite().then_some(at - now_f) })
            })
            .collect();
        let nodes = free_nodes(sim.cluster());
        let ctx = DecideContext { cfg: &self.cfg, placement: &self.placement, declared: &self.declared, now };
        let decided = {
            let mut chooser = SimChooser { times: sim.times(), placement: &self.placement, sizing: self.sizing, fixed_counts: self.fixed_counts, hints: &hints };
            elastic::decide(&running, &waiting, &nodes, &ctx, &mut chooser)
        };
        self.idle = decided.is_empty().then(|| (version, self.bounds_expire(&running, now) as f64));
        for rc in &decided {
            let i = rc.id() as usize;
            let Some(r) = running.iter().find(|r| r.id == rc.id()) else { continue };
            if !sim.reconfigure(i, r.cost.save_s, r.cost.restart_s, RestartCost::checkpoint_bytes(&r.job)) {
                continue;
            }
            self.records.insert(i, r.record.reconfigured(now).with_reconf_cost(r.cost.total_s()));
            if let Some(mv) = rc.target() {
                let e = &mv.to;
                self.targets.insert(i, TimedCell { gpu_type: e.cell.gpu_type.clone(), gpus: e.cell.gpus, nodes: e.nodes, gpus_per_node: e.gpus_per_node, iter_s: e.iter_time_s });
                self.moved_at.insert(i, now);
            }
        }
        if self.keep_passes {
            self.passes.push(Pass { now, running, waiting, nodes, decided });
        }
    }
}

impl ElasticHost {
    /// The earliest time (Unix seconds of the clock) one of `running` that
    /// the bounds keep from the rule now becomes eligible.
    fn bounds_expire(&self, running: &[RunningElastic], now: i64) -> i64 {
        let c = &self.cfg;
        running
            .iter()
            .filter(|r| !elastic::eligible(r, c, now))
            .filter_map(|r| {
                if r.record.reconf_at.is_some_and(|t| t >= r.started_at) || c.max_per_hour == 0 {
                    return None; // a signal pending: it stops; or never
                }
                let run = r.started_at + c.min_run_s as i64;
                let mut times: Vec<i64> = r.record.reconfs_h.iter().copied().filter(|t| now - t < 3600).collect();
                times.sort_unstable();
                let over = times.len() + 1 - (c.max_per_hour as usize).min(times.len() + 1);
                let hour = if over > 0 { times[over - 1] + 3600 } else { now };
                Some(run.max(hour).max(now))
            })
            .min()
            .unwrap_or(i64::MAX)
    }
}

/// The simulator's Cell choice for a running job: its knowledge's ranking
/// on the free GPUs (summarized per type as the policy's offers are: whole
/// free nodes, else the node with the most free GPUs, which `rank_cells`
/// ranks alike), sized by `core::placement::sizing` with the trace's GPU
/// count as the hint, as the policy sizes a job it starts; with fixed
/// counts the fastest Cell of exactly that count (job_submit's
/// `choose_ranked_under_load` with `fixed_gpus`).
struct SimChooser<'a> {
    times: &'a mut TimeCache,
    placement: &'a PlacementConfig,
    sizing: SizingRule,
    fixed_counts: bool,
    hints: &'a HashMap<u32, (String, u32, u32)>,
}

impl CellChooser for SimChooser<'_> {
    fn choose(&mut self, r: &RunningElastic, free: &[NodeGpus], load: Option<&LoadView>) -> Option<Estimate> {
        let (model, batch, hint) = self.hints.get(&r.id)?;
        let cap = if self.fixed_counts { *hint } else { self.sizing.cap(*hint) };
        let offers = summarized_offers(free, self.placement, cap);
        if offers.is_empty() {
            return None;
        }
        let ranked = self.times.rank_cells(model, *batch, &offers, cap);
        let cells: Vec<&TimedCell> = ranked.iter().collect();
        let k = if self.fixed_counts { cells.iter().position(|c| c.gpus == *hint)? } else { self.sizing.choose_under_load(&cells, Some(*hint), load)? };
        let c = cells[k];
        Some(Estimate {
            cell: Cell::new(&c.gpu_type, c.gpus, 1).ok()?,
            nodes: c.nodes,
            gpus_per_node: c.gpus_per_node,
            plan: Plan::default(),
            iter_time_s: c.iter_s,
            mem_per_gpu_bytes: 0,
            source: cellsched_core::cell::EstimateSource::Datasheet,
        })
    }
}

/// Per allowed GPU type: the whole free nodes a Cell of `max_gpus` could
/// use, else the node with the most free GPUs.
fn summarized_offers(free: &[NodeGpus], placement: &PlacementConfig, max_gpus: u32) -> Vec<CellOffer> {
    let mut by_type: Vec<(String, u32, u32, u32)> = Vec::new(); // type, gpus per node, whole free nodes, most free
    for n in free.iter().filter(|n| placement.allows(&n.gpu_type) && n.total > 0) {
        let i = match by_type.iter().position(|t| t.0 == n.gpu_type) {
            Some(i) => i,
            None => {
                by_type.push((n.gpu_type.clone(), n.total, 0, 0));
                by_type.len() - 1
            }
        };
        let t = &mut by_type[i];
        t.1 = t.1.max(n.total);
        t.2 += u32::from(n.free == n.total);
        t.3 = t.3.max(n.free);
    }
    by_type
        .into_iter()
        .filter_map(|(ty, gpn, full, most)| {
            let full = full.min(max_gpus.div_ceil(gpn.max(1)));
            let free = if full > 0 { vec![gpn; full as usize] } else if most > 0 { vec![most] } else { Vec::new() };
            (!free.is_empty()).then_some(CellOffer { gpu_type: ty, gpus_per_node: gpn, free_gpus_per_node: free })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::policy::{Ablation, CellschedOptions, CellschedPolicy};
    use crate::testutil::*;
    use crate::times::LinearTimes;
    use crate::trace::TraceJob;
    use cellsched_core::config::ElasticConfig;
    use cellsched_core::elastic::RestartCost;
    use cellsched_core::estimator::JobSpec;
    use cellsched_core::model::ModelCatalog;

    const MODEL: &str = "gpt__350M";

    fn dl(id: &str, submit: f64, iters: u64, gpus: u32, elastic: bool) -> TraceJob {
        TraceJob { model_name: MODEL.into(), elastic, ..job(id, submit, iters, gpus, "a100", 0.0) }
    }

    /// gpt__350M: 1 s per iteration on one a100, scaling with GPUs; spanning
    /// nodes costs `penalty` per extra node.
    fn times(penalty: f64) -> LinearTimes {
        LinearTimes::new(penalty).with(MODEL, "a100", 1.0)
    }

    /// The cost model's save and restart seconds for the test model.
    fn cost() -> RestartCost {
        let job = JobSpec { model: ModelCatalog::builtin().resolve(MODEL).unwrap(), global_batch: 32 };
        RestartCost::derived(&job, &ElasticConfig::default())
    }

    fn policy(off: &[Ablation]) -> CellschedPolicy {
        CellschedPolicy::new(CellschedOptions::default().without(off)).unwrap()
    }

    /// A-SRPT's preemptive rule on the clock: a long elastic job holds the
    /// only node; a 600 s job arrives at 2,000 s. At the next decision pass
    /// (2,040 s: every 60 s from the long job's start) the long job is
    /// signalled, saves its checkpoint, the short job runs, and the long
    /// job restarts with its progress kept and its restart cost paid.
    #[test]
    fn a_short_job_preempts_a_long_elastic_one_and_progress_is_kept() {
        let jobs = [dl("long", 0.0, 80_000, 4, true), dl("short", 2_000.0, 2_400, 4, false)];
        let c = cost();
        let (m, jct) = run(&mut policy(&[]), a100_node(4), &jobs, times(0.0));
        assert_eq!(m.reconfigurations, 1, "{m:?}");
        let short = 2_040.0 + c.save_s + 600.0 - 2_000.0;
        assert!((jct[1].unwrap() - short).abs() < 1e-6, "short job: {:?} vs {short}", jct[1]);
        let long = 20_000.0 + 600.0 + c.save_s + c.restart_s;
        assert!((jct[0].unwrap() - long).abs() < 1e-6, "long job: {:?} vs {long}", jct[0]);
        assert!((m.restart_h - c.total_s() / 3600.0).abs() < 1e-6 && (m.reconfs_per_job - 0.5).abs() < 1e-9, "{m:?}");
        // Without the opt-in, or with reconfiguration off, nothing is touched.
        for (jobs, off) in [([dl("long", 0.0, 80_000, 4, false), jobs[1].clone()], vec![]), (jobs.clone(), vec![Ablation::Elastic])] {
            let (m, jct) = run(&mut policy(&off), a100_node(4), &jobs, times(0.0));
            assert_eq!((m.reconfigurations, m.restart_h), (0, 0.0));
            assert_eq!((jct[0], jct[1]), (Some(20_000.0), Some(18_600.0)));
        }
        // A job not much shorter (A-SRPT ratio 0.5) does not preempt.
        let (m, _) = run(&mut policy(&[]), a100_node(4), &[jobs[0].clone(), dl("short", 2_000.0, 40_000, 4, false)], times(0.0));
        assert_eq!(m.reconfigurations, 0);
    }

    /// Growth into GPUs nobody waits for: an elastic job starts on the one
    /// free GPU of four one-GPU nodes (a stock job holds three until
    /// 3,000 s). At the pass after they free up it grows to the Cell the
    /// sizing rule picks under that load (two nodes: 0.75 s per iteration
    /// with a 50% cost per extra node) and finishes earlier than without
    /// reconfiguration, its restart cost included.
    #[test]
    fn an_elastic_job_grows_into_idle_gpus() {
        let c4 = || cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 4\ngpus_per_node = 1\n");
        let blocker = TraceJob { model_name: "mystery".into(), ..job("blocker", 0.0, 3_000, 3, "a100", 3_000.0) };
        let jobs = [blocker, dl("e", 1.0, 40_000, 1, true)];
        let (m, jct) = run(&mut policy(&[]), c4(), &jobs, times(0.5));
        assert_eq!(m.reconfigurations, 1, "{m:?}");
        let c = cost();
        // Signalled at 3,001 s (passes every 60 s from its start at 1 s) after 3,000 iterations.
        let e = 3_001.0 + c.save_s + c.restart_s + 37_000.0 * 0.75 - 1.0;
        assert!((jct[1].unwrap() - e).abs() < 1e-6, "{:?} vs {e}", jct[1]);
        let (m0, jct0) = run(&mut policy(&[Ablation::Elastic]), c4(), &jobs, times(0.5));
        assert_eq!((m0.reconfigurations, jct0[1]), (0, Some(40_000.0)));
        assert!(jct[1].unwrap() < jct0[1].unwrap());
    }

    /// The bounds hold on the clock: with min_run_s above the job's whole
    /// run nothing happens; with max_per_hour = 0 neither.
    #[test]
    fn bounds_are_applied() {
        let jobs = [dl("long", 0.0, 80_000, 4, true), dl("short", 2_000.0, 2_400, 4, false)];
        for e in [ElasticConfig { min_run_s: 30_000, ..Default::default() }, ElasticConfig { max_per_hour: 0, ..Default::default() }] {
            let mut p = CellschedPolicy::new(CellschedOptions { elastic: e, ..Default::default() }).unwrap();
            let (m, _) = run(&mut p, a100_node(4), &jobs, times(0.0));
            assert_eq!(m.reconfigurations, 0);
        }
    }

    /// One scenario through both hosts' input builders. The simulator runs
    /// it with its own host (`ElasticHost::tick`: progress, forecasts and
    /// Cells from the simulation); at every decision pass the same cluster
    /// state is written as slurmctld would hold it (AdminComment records,
    /// `--dl-*` environment, node lists, priorities in the policy's order,
    /// backfill's forecast starts) and handed to job_submit's builder
    /// (`core::elastic::build_inputs`) and its chooser (`PlacementChooser`: the
    /// estimator's ranking): the same reconfigurations come out. Three
    /// scenarios between them grow, move and preempt.
    #[test]
    fn both_hosts_input_builders_make_the_same_reconfigurations() {
        use cellsched_core::config::{OrderingConfig, PlacementConfig};
        use cellsched_core::declared::DeclaredConfig;
        use cellsched_core::elastic::{self, DecideContext, JobFacts, PlacementChooser, Phase};
        use cellsched_core::estimator::Estimator;
        use cellsched_core::gpu::GpuCatalog;
        use cellsched_core::options::DlKey;
        use cellsched_core::record::DlRecord;
        use cellsched_core::signal::ElasticSignal;
        let est = || Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let dlj = |id: &str, submit: f64, iters: u64, gpus: u32, model: &str, batch: u32, elastic: bool| TraceJob {
            model_name: model.into(),
            batch_size: batch,
            elastic,
            ..job(id, submit, iters, gpus, "a100", 0.0)
        };
        let hold = |id: &str, gpus: u32, ty: &str, until: f64| TraceJob { model_name: "mystery".into(), ..job(id, 0.0, until as u64, gpus, ty, until) };
        let mixed = "[[group]]\ngpu_type = \"a100\"\nnodes = 2\ngpus_per_node = 4\n\
                     [[group]]\ngpu_type = \"v100\"\nnodes = 2\ngpus_per_node = 8\n\
                     [[group]]\ngpu_type = \"a10\"\nnodes = 1\ngpus_per_node = 4\n";
        let efficient = PlacementConfig { min_marginal_efficiency: 0.9, ..PlacementConfig::default() };
        let scenarios: Vec<(&str, &str, PlacementConfig, bool, Vec<TraceJob>)> = vec![
            // Grow: the elastic job starts on the one a100 GPU stock jobs leave, which end at 3,000 s.
            (
                "grow",
                mixed,
                efficient,
                false,
                vec![
                    hold("h1", 3, "a100", 3_000.0),
                    hold("h2", 4, "a100", 3_000.0),
                    hold("h3", 8, "v100", 3_000.0),
                    hold("h4", 8, "v100", 3_000.0),
                    hold("h5", 4, "a10", 3_000.0),
                    dlj("e", 1.0, 400_000, 1, "gpt__350M", 8, true),
                ],
            ),
            // Preempt: a long elastic job holds the only a100 node; a much shorter job arrives.
            (
                "preempt",
                "[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 4\n",
                PlacementConfig::default(),
                true,
                vec![dlj("long", 0.0, 2_000_000, 4, "gpt__350M", 32, true), dlj("short", 2_000.0, 2_000, 4, "gpt__350M", 32, false)],
            ),
            // Move: a long elastic job grew into the idle a100 node (the
            // trace's count is the fewest GPUs its model fits on, the
            // plugin's base); a job about as long (no preemption: not much
            // shorter) arrives and wants part of it; the elastic job shrinks.
            (
                "move",
                "[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 4\n",
                PlacementConfig::default(),
                false,
                vec![dlj("e", 0.0, 400_000, 1, "gpt__125M", 32, true), dlj("p", 100.0, 3_000_000, 1, "gpt__125M", 1, false)],
            ),
        ];
        let mut kinds = std::collections::BTreeSet::new();
        for (name, toml, placement, fixed_counts, trace) in scenarios {
            let cfg = crate::policy::CellschedOptions {
                max_gpus: placement.max_gpus,
                max_gpu_factor: placement.max_gpu_factor,
                min_marginal_efficiency: placement.min_marginal_efficiency,
                fixed_counts,
                ..Default::default()
            };
            let mut pol = CellschedPolicy::new(cfg.clone()).unwrap();
            pol.keep_elastic_passes();
            let mut cache = crate::times::TimeCache::new(Box::new(crate::core_times::CoreTimes::from_estimator(est(), None)));
            let mut sim = crate::Sim::new(crate::SimConfig::default(), cluster(toml), &trace, &mut cache);
            let m = sim.run(&mut pol, None);
            assert_eq!(m.finished, m.jobs, "{name}: {m:?}");
            let placement = cfg.placement_config();
            let (declared, ecfg, ordering, e) = (DeclaredConfig::default(), cfg.elastic.clone(), OrderingConfig::default(), est());
            let key = |r: &elastic::Reconfig| (r.kind(), r.id(), r.for_job(), r.target().map(|t| (t.to.cell.gpu_type.clone(), t.to.cell.gpus, t.to.nodes)));
            let env = |t: &TraceJob, elastic: bool| {
                let mut v = vec![format!("{}={}", DlKey::Model.env_key(), t.model_name), format!("{}={}", DlKey::Batch.env_key(), t.batch_size), format!("{}=auto", DlKey::Cell.env_key())];
                if elastic {
                    v.push(format!("{}=USR1", DlKey::Elastic.env_key()));
                }
                v
            };
            let mut decided = 0;
            for pass in pol.elastic_passes() {
                let mut facts = Vec::new();
                for r in &pass.running {
                    let t = &trace[r.id as usize];
                    let fixed_gpus = fixed_counts.then_some(t.num_gpu);
                    let record = DlRecord { iters: Some(t.num_iteration), fixed_gpus, ..r.record.clone() };
                    facts.push(JobFacts {
                        id: r.id,
                        phase: Phase::Running,
                        comment: record.to_string(),
                        env: env(t, true),
                        features: None,
                        nodes: Some(r.nodes.join(",")),
                        priority: 0,
                        start_time: r.started_at,
                        end_time: 0,
                        time_limit_min: None,
                        typed: false,
                        requeueable: true,
                    });
                }
                let n = pass.waiting.len() as u32;
                for (k, w) in pass.waiting.iter().enumerate() {
                    let t = &trace[w.id as usize];
                    let record = DlRecord { iters: Some(t.num_iteration), elastic: t.elastic.then_some(ElasticSignal::USR1), ..DlRecord::new(w.decision.clone()) };
                    facts.push(JobFacts {
                        id: w.id,
                        phase: Phase::Pending,
                        comment: record.to_string(),
                        env: env(t, t.elastic),
                        features: None,
                        nodes: None,
                        priority: n - k as u32,
                        start_time: w.wait_s.map_or(0, |s| pass.now + s.round() as i64),
                        end_time: 0,
                        time_limit_min: None,
                        typed: false,
                        requeueable: true,
                    });
                }
                let (running, waiting) = elastic::build_inputs(&facts, &|_| false, &ecfg, &ordering, &e, pass.now);
                assert_eq!(running.len(), pass.running.len(), "{name} at {}: running elastic jobs", pass.now);
                assert_eq!(waiting.iter().map(|w| w.id).collect::<Vec<_>>(), pass.waiting.iter().map(|w| w.id).collect::<Vec<_>>(), "{name} at {}: waiting order", pass.now);
                let ctx = DecideContext { cfg: &ecfg, placement: &placement, declared: &declared, now: pass.now };
                let mut chooser = PlacementChooser { est: &e, ranks: None, placement: &placement };
                let plugin = elastic::decide(&running, &waiting, &pass.nodes, &ctx, &mut chooser);
                let (a, b): (Vec<_>, Vec<_>) = (pass.decided.iter().map(key).collect(), plugin.iter().map(key).collect());
                assert_eq!(a, b, "{name}, pass at {}: simulator vs job_submit (running {:?} vs {:?})", pass.now, pass.running.iter().map(|r| r.remaining_s).collect::<Vec<_>>(), running.iter().map(|r| r.remaining_s).collect::<Vec<_>>());
                decided += a.len();
                kinds.extend(a.iter().map(|k| k.0));
            }
            assert!(decided > 0, "{name}: no reconfiguration decided");
            assert!(kinds.contains(name), "{name}: decided {kinds:?}");
        }
        assert_eq!(kinds.len(), 3, "{kinds:?}");
    }

}
