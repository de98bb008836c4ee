//! The discrete-event engine: arrivals, completions and wake-ups in an
//! O(log n) binary-heap event queue; after each batch of same-time events the
//! policy runs one scheduling pass against the live cluster state.
//!
//! **Truth and knowledge.** Policies decide with what the scheduler would
//! know in production: iteration times from the [`TimeCache`] (the
//! estimator, calibrated with a profile DB) and each job's *known*
//! iterations ([`Job::iters`]: the declared count, optionally with noise,
//! see [`SimConfig::iter_noise`]). With a [`Truth`] set
//! ([`Sim::with_truth`]) the clock runs on truth instead: the measured
//! iteration time of the GPUs granted and the job's true iteration count
//! (the trace's `num_iteration`). A Cell truth says does not fit fails after
//! [`SimConfig::oom_startup_s`] (GPUs held), the scheduler's knowledge
//! learns that the Cell does not fit for the job's model and batch, and the
//! job is requeued ([`Policy::on_requeue`]). Without a truth the clock runs
//! on the policy's own predictions: the *oracle* mode, an upper bound.
//!
//! Jobs whose model the knowledge lacks run the way stock Slurm would run
//! them: requested type and count, time guessed from the declared limit.
//!
//! Determinism: there are no random choices inside the engine; events at
//! the same time are ordered by insertion sequence, jobs by trace order
//! (submission time, then file order), nodes by index. Same inputs and seed
//! give identical results.
use crate::cluster::{ClusterState, Shape};
use crate::error::SimError;
pub use crate::job::{Job, RunTiming, Status};
use crate::metrics::{Metrics, RunRecord, TruthStats};
use crate::progress_model::SpeedProfile;
use crate::view::{Policy, SimView};
use crate::times::{Measured, TimeCache};
use crate::trace::TraceJob;
use crate::truth::{Truth, TruthAnswer};
use std::collections::HashMap;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

/// Engine settings shared by all policies.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed recorded with the results (the engine itself draws nothing).
    pub seed: u64,
    /// Seconds a preempted job loses on restart (checkpoint reload), GPUs held.
    pub preempt_overhead_s: f64,
    /// Seconds every run holds its GPUs beyond its work: job launch
    /// (prolog, plugins, the program starting) and completion, as measured
    /// on a live cluster (`cellsched bench replay`). The scheduler's
    /// predicted end does not include it. 0: runs are pure work.
    pub launch_s: f64,
    /// Extra scheduling passes every this many seconds while jobs wait.
    pub replan_interval_s: Option<f64>,
    /// Stop the clock here; jobs not done count as unfinished.
    pub max_time_s: Option<f64>,
    /// Seconds a run on a Cell that does not fit holds its GPUs before it fails (start-up cost).
    pub oom_startup_s: f64,
    /// Time limit assumed for a job that declared none (stock guesses), s.
    pub default_limit_s: f64,
    /// Declared-iteration noise: the scheduler knows `true x exp(noise x N(0,1))`
    /// iterations (rounded, >= 1), drawn from `seed`; 0 = the exact count.
    pub iter_noise: f64,
    /// What the scheduler knows (label for results).
    pub knowledge: String,
    /// Measured seconds of a reconfiguration on the clock (truth), used
    /// instead of the policy's cost model when set; the policy still
    /// decides with its model.
    pub reconf_truth: Option<ReconfTruth>,
    /// Measured save and restart times by checkpoint size (truth for
    /// elastic jobs' reconfigurations), used instead of the policy's cost
    /// model when set and [`SimConfig::reconf_truth`] is not.
    pub restart_truth: Option<std::sync::Arc<crate::RestartTruth>>,
    /// The scheduler learns each run's measured iteration time on its Cell
    /// this many seconds after the run starts training (a site importing
    /// its jobs' measurements into the profile DB, `cellsched report
    /// --profile-rows`; [`TimeCache::learn`]), and the knowledge is
    /// recalibrated on every Cell learnt so far ([`TimeCache::recalibrate`]),
    /// as the plugins' estimator is on the imported rows. `None`: the
    /// knowledge stays as given (the plugins' default).
    pub learn_after_s: Option<f64>,
}

/// A reconfiguration's measured cost on the clock: `save_s` from the
/// signal to the GPUs being free (checkpoint plus the host's latency to
/// requeue), `restart_s` from the next start to the first iteration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ReconfTruth {
    /// Signal to GPUs free, seconds.
    pub save_s: f64,
    /// Restart to first iteration, seconds (besides [`SimConfig::launch_s`]).
    pub restart_s: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            preempt_overhead_s: 30.0,
            launch_s: 0.0,
            replan_interval_s: None,
            max_time_s: None,
            oom_startup_s: 60.0,
            default_limit_s: 86400.0,
            iter_noise: 0.0,
            knowledge: "estimator".into(),
            reconf_truth: None,
            restart_truth: None,
            learn_after_s: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EvKind {
    Arrival(usize),
    Finish(usize, u32),
    Fail(usize, u32),
    Wake,
    /// A reconfigured job's checkpoint is written: it leaves its GPUs and waits again.
    Checkpointed(usize, u32),
    /// The policy's periodic pass ([`Policy::tick`]).
    Tick,
    /// A run's iteration time becomes knowledge (an index into `Sim::to_learn`).
    Learn(usize),
}

#[derive(Debug, Clone, Copy)]
struct Ev {
    t: f64,
    seq: u64,
    kind: EvKind,
}
impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        self.t.total_cmp(&o.t).then(self.seq.cmp(&o.seq))
    }
}

/// The simulation state a policy schedules against.
pub struct Sim<'t> {
    cfg: SimConfig,
    cluster: ClusterState,
    jobs: Vec<Job>,
    pending: BTreeSet<usize>,
    running: BTreeSet<usize>,
    events: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    now: f64,
    times: &'t mut TimeCache,
    busy_gpu_s: Vec<f64>,
    replans: u64,
    preemptions: u64,
    events_done: u64,
    next_wake: Option<f64>,
    next_tick: Option<f64>,
    reconfigurations: u64,
    /// Bumped whenever a job arrives, starts or stops ([`SimView::version`]).
    version: u64,
    arrivals_left: usize,
    /// Per GPU type: running jobs by predicted end (f64 bits of a non-negative time order like the time).
    ends: Vec<BTreeSet<(u64, usize)>>,
    truth: Option<Truth>,
    truth_cache: HashMap<(u32, u32, u32, u32), TruthAnswer>,
    /// Per job: its (model, batch) class, for the truth cache.
    class_of: Vec<u32>,
    /// Truth's special cases so far (the prediction-error fields are filled from `pairs` at the end).
    stats: TruthStats,
    /// (predicted, measured, held out) seconds per iteration at each start
    /// on a measured truth point; held out: the prediction was not itself a
    /// measured point of the knowledge.
    pairs: Vec<(f64, f64, bool)>,
    requeue: Vec<usize>,
    /// Measurements the knowledge gains at their `EvKind::Learn` event.
    to_learn: Vec<Measured>,
}

impl<'t> Sim<'t> {
    /// A simulation of `jobs` (sorted by submission time) on `cluster`.
    pub fn new(cfg: SimConfig, cluster: ClusterState, jobs: &[TraceJob], times: &'t mut TimeCache) -> Self {
        let ntypes = cluster.types.len();
        times.clear_marks();
        times.clear_learned();
        let mut stock_models: HashMap<&str, bool> = HashMap::new();
        let jobs: Vec<Job> = jobs
            .iter()
            .enumerate()
            .map(|(n, s)| Job {
                known_iters: known_iters(s.num_iteration, cfg.iter_noise, cfg.seed, n as u64),
                pred_iter_s: 0.0,
                pred_end: 0.0,
                stock: *stock_models.entry(s.model_name.as_str()).or_insert_with(|| times.source().check_model(&s.model_name).is_err()),
                timing: RunTiming::Measured,
                pinned: false,
                req_type: cluster.type_index(&s.gpu_type),
                spec: s.clone(),
                status: Status::Future,
                progress: 0.0,
                speed: SpeedProfile::none(),
                alloc: None,
                last_shape: None,
                iter_s: 0.0,
                alloc_time: 0.0,
                run_start: 0.0,
                first_start: None,
                finish: None,
                attained_gpu_s: 0.0,
                preemptions: 0,
                expected_end: 0.0,
                planned: None,
                reconfs: 0,
                reconf_lost_s: 0.0,
                restart_overhead_s: None,
                gen: 0,
            })
            .collect();
        let mut sim = Sim {
            cfg,
            cluster,
            pending: BTreeSet::new(),
            running: BTreeSet::new(),
            events: BinaryHeap::with_capacity(jobs.len() * 2),
            seq: 0,
            now: 0.0,
            times,
            busy_gpu_s: vec![0.0; ntypes],
            replans: 0,
            preemptions: 0,
            events_done: 0,
            next_wake: None,
            next_tick: None,
            reconfigurations: 0,
            version: 0,
            arrivals_left: jobs.len(),
            ends: vec![BTreeSet::new(); ntypes],
            stats: TruthStats { stock_jobs: jobs.iter().filter(|j| j.stock).count() as u64, ..Default::default() },
            pairs: Vec::new(),
            truth: None,
            truth_cache: HashMap::new(),
            class_of: {
                let mut ids: HashMap<(&str, u32), u32> = HashMap::new();
                jobs.iter()
                    .map(|j| {
                        let n = ids.len() as u32;
                        *ids.entry((j.spec.model_name.as_str(), j.spec.batch_size)).or_insert(n)
                    })
                    .collect()
            },
            requeue: Vec::new(),
            to_learn: Vec::new(),
            jobs,
        };
        for i in 0..sim.jobs.len() {
            let t = sim.jobs[i].spec.submission_time;
            sim.push(t, EvKind::Arrival(i));
        }
        sim
    }

    /// Runs the clock on `truth` (measured iteration times) instead of the
    /// policies' predictions; `None` keeps the oracle mode.
    pub fn with_truth(mut self, truth: Option<Truth>) -> Self {
        self.truth = truth;
        self
    }

    /// Replaces the iterations the scheduler knows (e.g. the random forest's
    /// predictions from history); `None` entries keep the declared count.
    /// `known` is in trace order (the order of [`Sim::jobs`]); extra entries are ignored.
    pub fn with_known_iters(mut self, known: &[Option<f64>]) -> Self {
        for (j, k) in self.jobs.iter_mut().zip(known) {
            if let Some(k) = k.filter(|k| k.is_finite() && *k >= 1.0) {
                j.known_iters = k.round();
            }
        }
        self
    }

    /// Pins job `i` to its requested GPU type and count ([`Job::pinned`]).
    pub fn pin_request(&mut self, i: usize) {
        self.jobs[i].pinned = true;
    }

    /// Seeds job `i` as already running at time 0 (a snapshot of a live
    /// cluster): it holds `gpus_per_node` GPUs on each of `nodes` (node
    /// indices of `group`) and finishes after `remaining_s` seconds; its
    /// arrival event is skipped. Call before [`Sim::run`], for jobs submitted
    /// at 0 and not yet seeded. Errors if the GPUs are not free.
    pub fn seed_running(&mut self, i: usize, group: usize, nodes: &[u32], gpus_per_node: u32, remaining_s: f64) -> Result<(), SimError> {
        let j = &self.jobs[i];
        if self.now != 0.0 || j.status != Status::Future || j.spec.submission_time != 0.0 {
            return Err(SimError::invalid("seeded job", &j.spec.job_id, "a job submitted at 0, seeded before the run"));
        }
        if !(remaining_s.is_finite() && remaining_s >= 0.0) {
            return Err(SimError::invalid("remaining seconds", remaining_s.to_string(), "a finite number >= 0"));
        }
        let Some(alloc) = self.cluster.allocate_on(group, nodes, gpus_per_node) else {
            return Err(SimError::invalid(
                "seeded job",
                &j.spec.job_id,
                format!("{gpus_per_node} free GPUs on each of nodes {nodes:?} of group {group}"),
            ));
        };
        let t = self.cluster.groups[group].type_idx;
        let j = &mut self.jobs[i];
        // The clock runs the remaining time as one run over the job's whole
        // (true) iterations, from progress 0.
        let iter_s = remaining_s / j.true_iters().max(1.0);
        j.status = Status::Running;
        j.alloc = Some(alloc);
        j.iter_s = iter_s;
        j.pred_iter_s = iter_s;
        j.timing = RunTiming::Measured;
        j.first_start = Some(0.0);
        j.expected_end = remaining_s;
        j.pred_end = remaining_s;
        j.gen += 1;
        let gen = j.gen;
        self.ends[t].insert((remaining_s.to_bits(), i));
        self.running.insert(i);
        self.arrivals_left -= 1;
        self.push(remaining_s, EvKind::Finish(i, gen));
        Ok(())
    }

    /// Label of the clock's source.
    pub fn truth_label(&self) -> String {
        self.truth.as_ref().map_or_else(|| "oracle (the clock runs on the scheduler's own predictions)".to_string(), Truth::label)
    }

    /// Seconds per iteration the scheduler guesses for a stock job (its
    /// model unknown): its declared limit (or the default) over its iterations.
    pub fn stock_iter_s(&self, i: usize) -> f64 {
        let j = &self.jobs[i];
        let limit = if j.spec.deadline > 0.0 { j.spec.deadline } else { self.cfg.default_limit_s };
        limit / j.known_iters.max(1.0)
    }

    fn push(&mut self, t: f64, kind: EvKind) {
        self.seq += 1;
        self.events.push(Reverse(Ev { t, seq: self.seq, kind }));
    }

    /// Current simulated time, seconds.
    pub fn now(&self) -> f64 {
        self.now
    }
    /// The live cluster.
    pub fn cluster(&self) -> &ClusterState {
        &self.cluster
    }
    /// All jobs, in trace order.
    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }
    /// One job.
    pub fn job(&self, i: usize) -> &Job {
        &self.jobs[i]
    }
    /// The (cached) iteration-time source.
    pub fn times(&mut self) -> &mut TimeCache {
        self.times
    }
    /// Asks for a scheduling pass at time `t` (> now).
    pub fn wake_at(&mut self, t: f64) {
        if t > self.now && self.next_wake.map_or(true, |w| t < w || w <= self.now) {
            self.next_wake = Some(t);
            self.push(t, EvKind::Wake);
        }
    }

    /// Progress of job `i` now, in [0, 1].
    pub fn progress_now(&self, i: usize) -> f64 {
        let j = &self.jobs[i];
        if j.status != Status::Running || self.now <= j.run_start {
            return j.progress;
        }
        if j.timing == RunTiming::NoFit {
            return j.progress;
        }
        j.speed.progress_after(j.progress, self.now - j.run_start, j.true_iters(), j.iter_s)
    }

    /// GPU-seconds job `i` has received up to now (Tiresias' attained service).
    pub fn attained_gpu_s(&self, i: usize) -> f64 {
        let j = &self.jobs[i];
        j.attained_gpu_s + if j.status == Status::Running { j.gpus() as f64 * (self.now - j.alloc_time) } else { 0.0 }
    }

    /// Seconds job `i` still needs, as the scheduler sees it: its known
    /// iterations at `iter_s` per iteration from its current progress.
    pub fn remaining_s(&self, i: usize, iter_s: f64) -> f64 {
        let j = &self.jobs[i];
        let p = self.progress_now(i);
        let p = if j.known_iters == j.true_iters() { p } else { (p * j.true_iters() / j.known_iters).min(1.0) };
        j.speed.time_to_finish(p, j.known_iters, iter_s)
    }

    /// What truth says about job `i` on `shape` (cached per model and batch).
    fn truth_answer(&mut self, i: usize, shape: Shape) -> Option<TruthAnswer> {
        let truth = self.truth.as_ref()?;
        let key = (self.class_of[i], self.cluster.groups[shape.group].type_idx as u32, shape.nodes, shape.gpus_per_node);
        if let Some(a) = self.truth_cache.get(&key) {
            return Some(*a);
        }
        let j = &self.jobs[i];
        let ty = &self.cluster.groups[shape.group].spec.gpu_type;
        let a = truth.answer(&j.spec.model_name, j.spec.batch_size, ty, shape.nodes, shape.gpus_per_node);
        self.truth_cache.insert(key, a);
        Some(a)
    }

    /// Starts pending job `i` on `shape`; `iter_s` is the policy's predicted
    /// seconds per iteration there. The clock uses truth when set (see the
    /// module doc). Returns false (changing nothing) if the shape does not
    /// fit now; also false when truth lacks the Cell and has no fallback:
    /// then the scheduler's knowledge loses the Cell and the job is requeued.
    pub fn start(&mut self, i: usize, shape: Shape, iter_s: f64) -> bool {
        self.start_with(i, shape, None, iter_s)
    }

    /// [`Sim::start`] on the given nodes of `shape`'s group (node indices
    /// in the group, `shape.nodes` of them), for policies that plan nodes.
    pub fn start_on(&mut self, i: usize, shape: Shape, nodes: &[u32], iter_s: f64) -> bool {
        nodes.len() == shape.nodes as usize && self.start_with(i, shape, Some(nodes), iter_s)
    }

    fn start_with(&mut self, i: usize, shape: Shape, nodes: Option<&[u32]>, iter_s: f64) -> bool {
        debug_assert_eq!(self.jobs[i].status, Status::Pending);
        let free = &self.cluster.groups[shape.group].free_per_node();
        let fits = match nodes {
            None => self.cluster.fits(&shape),
            Some(ns) => ns.iter().all(|&n| free.get(n as usize).is_some_and(|&f| f >= shape.gpus_per_node)),
        };
        if !fits {
            return false;
        }
        let (true_iter, timing) = match self.truth_answer(i, shape) {
            None => (iter_s, RunTiming::Measured),
            Some(TruthAnswer::Measured(t)) => {
                if !self.jobs[i].stock {
                    let j = &self.jobs[i];
                    let ty = &self.cluster.groups[shape.group].spec.gpu_type;
                    let measured = self.times.source().is_measured(&j.spec.model_name, j.spec.batch_size, ty, shape.nodes, shape.gpus_per_node);
                    let (m, b, ty) = (j.spec.model_name.clone(), j.spec.batch_size, ty.clone());
                    let held_out = !measured && !self.times.is_learned(&m, b, &ty, shape.nodes, shape.gpus_per_node);
                    self.pairs.push((iter_s, t, held_out));
                }
                (t, RunTiming::Measured)
            }
            Some(TruthAnswer::NoFit) => (f64::INFINITY, RunTiming::NoFit),
            Some(TruthAnswer::Missing(Some(t))) => {
                self.stats.missing_starts += 1;
                (t, RunTiming::Fallback)
            }
            Some(TruthAnswer::Missing(None)) => {
                self.stats.skipped_starts += 1;
                self.unusable(i, shape);
                return false;
            }
        };
        let alloc = match nodes {
            None => self.cluster.allocate(shape),
            Some(ns) => self.cluster.allocate_on(shape.group, ns, shape.gpus_per_node),
        };
        let Some(alloc) = alloc else { return false };
        let now = self.now;
        let restart = match self.jobs[i].restart_overhead_s.take() {
            Some(restart_s) => {
                self.jobs[i].reconf_lost_s += restart_s;
                restart_s
            }
            None if self.jobs[i].preemptions > 0 => self.cfg.preempt_overhead_s,
            None => 0.0,
        };
        let overhead = restart + self.cfg.launch_s;
        let pred_dur = restart + self.remaining_s(i, iter_s);
        let oom_after = self.cfg.oom_startup_s;
        let j = &mut self.jobs[i];
        j.status = Status::Running;
        j.alloc = Some(alloc);
        j.iter_s = true_iter;
        j.pred_iter_s = iter_s;
        j.timing = timing;
        j.alloc_time = now;
        j.run_start = now + overhead;
        j.first_start.get_or_insert(now);
        j.gen += 1;
        let gen = j.gen;
        let (dur, ev) = if timing == RunTiming::NoFit {
            (oom_after, EvKind::Fail(i, gen))
        } else {
            (overhead + j.speed.time_to_finish(j.progress, j.true_iters(), true_iter), EvKind::Finish(i, gen))
        };
        j.expected_end = now + dur;
        j.pred_end = if self.truth.is_some() { now + pred_dur } else { now + dur };
        let t = self.cluster.groups[shape.group].type_idx;
        self.ends[t].insert((j.pred_end.max(0.0).to_bits(), i));
        self.pending.remove(&i);
        self.running.insert(i);
        self.version += 1;
        self.push(now + dur, ev);
        if let (Some(after), RunTiming::Measured | RunTiming::Fallback) = (self.cfg.learn_after_s, timing) {
            if self.truth.is_some() && !self.jobs[i].stock {
                let j = &self.jobs[i];
                let ty = self.cluster.groups[shape.group].spec.gpu_type.clone();
                self.to_learn.push(Measured { model: j.spec.model_name.clone(), batch: j.spec.batch_size, gpu_type: ty, nodes: shape.nodes, gpus_per_node: shape.gpus_per_node, iter_s: true_iter });
                let k = self.to_learn.len() - 1;
                self.push(now + overhead + after.max(0.0), EvKind::Learn(k));
            }
        }
        true
    }

    /// The scheduler learns that job `i`'s model and batch cannot use
    /// `shape`'s Cell; the job is requeued (re-planned) after the pass.
    fn unusable(&mut self, i: usize, shape: Shape) {
        let ty = self.cluster.groups[shape.group].spec.gpu_type.clone();
        let (m, b) = (self.jobs[i].spec.model_name.clone(), self.jobs[i].spec.batch_size);
        self.times.mark_unusable(&m, b, &ty, shape.nodes, shape.gpus_per_node);
        if !self.requeue.contains(&i) {
            self.requeue.push(i);
        }
    }

    /// Asks for pending job `i` to be re-planned ([`Policy::on_requeue`]) after the pass.
    pub fn requeue_later(&mut self, i: usize) {
        if !self.requeue.contains(&i) {
            self.requeue.push(i);
        }
    }

    /// Re-plans requeued jobs; those the policy can no longer run are failed.
    fn process_requeues(&mut self, policy: &mut dyn Policy) {
        for i in std::mem::take(&mut self.requeue) {
            if self.jobs[i].status != Status::Pending {
                continue;
            }
            if !policy.on_requeue(self, i) {
                self.pending.remove(&i);
                self.jobs[i].status = Status::Never;
                self.stats.failed_jobs += 1;
            }
        }
    }

    /// Preempts running job `i`: it keeps its progress and waits again.
    pub fn preempt(&mut self, i: usize) {
        debug_assert_eq!(self.jobs[i].status, Status::Running);
        let p = self.progress_now(i);
        self.stop(i);
        let j = &mut self.jobs[i];
        j.progress = p;
        j.status = Status::Pending;
        j.preemptions += 1;
        j.gen += 1;
        self.preemptions += 1;
        self.pending.insert(i);
    }

    /// Reconfigures running job `i` (`crate::elastic`): it checkpoints at
    /// once (no progress from now on, GPUs held) for `save_s` seconds, then
    /// leaves its GPUs and waits again with its progress kept; the policy
    /// re-plans it ([`Policy::on_requeue`]) and its next start loses
    /// `restart_s` (GPUs held, no progress); [`SimConfig::reconf_truth`],
    /// when set, replaces both, else [`SimConfig::restart_truth`] by the
    /// job's `checkpoint_bytes`. False (nothing changed) unless it is
    /// running on a Cell that fits.
    pub fn reconfigure(&mut self, i: usize, save_s: f64, restart_s: f64, checkpoint_bytes: f64) -> bool {
        let (save_s, restart_s) = match (&self.cfg.reconf_truth, &self.cfg.restart_truth) {
            (Some(t), _) => (t.save_s, t.restart_s),
            (None, Some(t)) => t.cost(checkpoint_bytes),
            (None, None) => (save_s, restart_s),
        };
        let j = &self.jobs[i];
        if j.status != Status::Running || j.timing == RunTiming::NoFit || !(save_s >= 0.0 && restart_s >= 0.0) {
            return false;
        }
        let p = self.progress_now(i);
        let now = self.now;
        let t = self.cluster.groups[j.alloc.as_ref().expect("running").shape.group].type_idx;
        let j = &mut self.jobs[i];
        self.ends[t].remove(&(j.pred_end.max(0.0).to_bits(), i));
        j.progress = p;
        j.run_start = f64::INFINITY; // no progress while it checkpoints
        j.gen += 1;
        j.expected_end = now + save_s;
        j.pred_end = now + save_s;
        j.reconfs += 1;
        j.reconf_lost_s += save_s; // the restart counts when it happens
        j.restart_overhead_s = Some(restart_s);
        let gen = j.gen;
        self.ends[t].insert(((now + save_s).to_bits(), i));
        self.reconfigurations += 1;
        self.push(now + save_s, EvKind::Checkpointed(i, gen));
        true
    }

    /// Asks for a [`Policy::tick`] at time `t` (>= now; the earliest asked for wins).
    pub fn tick_at(&mut self, t: f64) {
        if t >= self.now && self.next_tick.is_none_or(|w| t < w || w < self.now) {
            self.next_tick = Some(t);
            self.push(t, EvKind::Tick);
        }
    }

    fn stop(&mut self, i: usize) {
        self.version += 1;
        let now = self.now;
        let j = &mut self.jobs[i];
        let a = j.alloc.take().expect("running job has an allocation");
        j.last_shape = Some(a.shape);
        let gpu_s = a.shape.gpus() as f64 * (now - j.alloc_time);
        j.attained_gpu_s += gpu_s;
        let t = self.cluster.groups[a.shape.group].type_idx;
        self.busy_gpu_s[t] += gpu_s;
        self.ends[t].remove(&(j.pred_end.max(0.0).to_bits(), i));
        if j.timing == RunTiming::Fallback {
            self.stats.missing_job_s += now - j.alloc_time;
        }
        self.stats.run_job_s += now - j.alloc_time;
        self.cluster.release(&a);
        self.running.remove(&i);
    }

    /// Runs to completion (or `max_time_s`) under `policy`; `progress` is
    /// called now and then with (jobs arrived, jobs total).
    pub fn run(&mut self, policy: &mut dyn Policy, mut progress: Option<&mut dyn FnMut(u64, u64)>) -> Metrics {
        let total = self.jobs.len() as u64;
        while let Some(Reverse(ev)) = self.events.pop() {
            if self.cfg.max_time_s.is_some_and(|m| ev.t > m) {
                break;
            }
            // Learning after the last job has left changes nothing and must
            // not move the clock (the run's end).
            if matches!(ev.kind, EvKind::Learn(_)) && self.running.is_empty() && self.pending.is_empty() && self.arrivals_left == 0 {
                continue;
            }
            self.now = ev.t;
            let mut batch = vec![ev];
            while let Some(Reverse(next)) = self.events.peek() {
                if next.t != self.now {
                    break;
                }
                batch.push(self.events.pop().unwrap().0);
            }
            let mut changed = false;
            let mut tick = false;
            // (model, batch) whose Cells were learnt at this time.
            let mut learnt: Vec<(String, u32)> = Vec::new();
            for ev in batch {
                self.events_done += 1;
                match ev.kind {
                    EvKind::Arrival(i) if self.jobs[i].status != Status::Future => {
                        // Seeded as running (`seed_running`): already arrived.
                    }
                    EvKind::Arrival(i) => {
                        self.arrivals_left -= 1;
                        self.jobs[i].status = Status::Pending;
                        if policy.admissible(self, i) {
                            self.version += 1;
                            self.pending.insert(i);
                            policy.on_arrival(self, i);
                            changed = true;
                        } else {
                            self.jobs[i].status = Status::Never;
                        }
                        if let Some(cb) = progress.as_deref_mut() {
                            if self.arrivals_left % 1024 == 0 {
                                cb(total - self.arrivals_left as u64, total);
                            }
                        }
                    }
                    EvKind::Finish(i, gen) => {
                        if self.jobs[i].gen == gen && self.jobs[i].status == Status::Running {
                            self.stop(i);
                            let j = &mut self.jobs[i];
                            j.status = Status::Finished;
                            j.progress = 1.0;
                            j.finish = Some(self.now);
                            changed = true;
                        }
                    }
                    EvKind::Fail(i, gen) => {
                        if self.jobs[i].gen == gen && self.jobs[i].status == Status::Running {
                            let shape = self.jobs[i].alloc.as_ref().expect("running").shape;
                            self.stop(i);
                            let j = &mut self.jobs[i];
                            j.status = Status::Pending;
                            j.gen += 1;
                            j.timing = RunTiming::Measured;
                            self.stats.oom_failures += 1;
                            self.pending.insert(i);
                            self.unusable(i, shape);
                            changed = true;
                        }
                    }
                    EvKind::Wake => {
                        if self.next_wake == Some(self.now) {
                            self.next_wake = None;
                        }
                        changed = true;
                    }
                    EvKind::Checkpointed(i, gen) => {
                        if self.jobs[i].gen == gen && self.jobs[i].status == Status::Running {
                            self.stop(i);
                            let j = &mut self.jobs[i];
                            j.status = Status::Pending;
                            j.gen += 1;
                            self.pending.insert(i);
                            self.requeue_later(i);
                            changed = true;
                        }
                    }
                    EvKind::Learn(k) => {
                        let r = &self.to_learn[k];
                        if self.times.learn(&r.model, r.batch, &r.gpu_type, r.nodes, r.gpus_per_node, r.iter_s) && !learnt.iter().any(|(m, b)| *m == r.model && *b == r.batch) {
                            learnt.push((r.model.clone(), r.batch));
                        }
                    }
                    EvKind::Tick => {
                        if self.next_tick == Some(self.now) {
                            self.next_tick = None;
                            tick = true;
                        }
                    }
                }
            }
            if !learnt.is_empty() {
                // The knowledge is recalibrated on what was learnt and the
                // pending jobs are re-planned against it, as job_submit's
                // re-planning re-decides them with a reloaded profile DB:
                // every pending job when the calibration moved, else those of
                // the models and batches learnt.
                let all = self.times.recalibrate();
                let affected: Vec<usize> = self
                    .pending
                    .iter()
                    .copied()
                    .filter(|&p| all || learnt.iter().any(|(m, b)| self.jobs[p].spec.model_name == *m && self.jobs[p].spec.batch_size == *b))
                    .collect();
                for p in affected {
                    self.requeue_later(p);
                }
            }
            if !self.requeue.is_empty() {
                self.process_requeues(policy);
                changed = true;
            }
            if tick {
                policy.tick(self);
            }
            if changed && !self.pending.is_empty() {
                policy.schedule(self);
                // Starts refused by truth requeue jobs: re-plan and go again.
                // Each refusal removes a Cell from the knowledge, so this ends;
                // the bound only guards against a policy that never settles.
                let mut rounds = 0;
                while !self.requeue.is_empty() && rounds < 100_000 {
                    self.process_requeues(policy);
                    if !self.pending.is_empty() {
                        policy.schedule(self);
                    }
                    rounds += 1;
                }
            }
            if let Some(dt) = self.cfg.replan_interval_s {
                let can_change = !self.running.is_empty() || self.arrivals_left > 0;
                if !self.pending.is_empty() && can_change && self.next_wake.is_none() {
                    self.wake_at(self.now + dt);
                }
            }
        }
        if let Some(cb) = progress.as_deref_mut() {
            cb(total, total);
        }
        self.metrics(policy.name())
    }

    /// The metrics of the run so far under the policy named `policy`.
    pub fn metrics(&self, policy: &str) -> Metrics {
        Metrics::collect(&RunRecord {
            policy,
            seed: self.cfg.seed,
            knowledge: &self.cfg.knowledge,
            truth: self.truth_label(),
            jobs: &self.jobs,
            cluster: &self.cluster,
            now: self.now,
            busy_gpu_s: &self.busy_gpu_s,
            replans: self.replans,
            preemptions: self.preemptions,
            reconfigurations: self.reconfigurations,
            events: self.events_done,
            stats: &self.stats,
            pairs: &self.pairs,
        })
    }

    /// Sets when the host expects running job `i`'s current run to end
    /// ([`SimView::set_forecast_end`]); nothing for a job not running.
    pub fn set_forecast_end(&mut self, i: usize, end: f64) {
        let Some(a) = self.jobs[i].alloc.as_ref() else { return };
        let t = self.cluster.groups[a.shape.group].type_idx;
        let j = &mut self.jobs[i];
        self.ends[t].remove(&(j.pred_end.max(0.0).to_bits(), i));
        j.pred_end = end;
        self.ends[t].insert((end.max(0.0).to_bits(), i));
    }

    /// Running jobs on GPU type `t` as (forecast end, GPUs), earliest
    /// first; a run past its forecast end is expected to end now.
    pub fn running_ends(&self, t: usize) -> impl Iterator<Item = (f64, u32)> + '_ {
        let now = self.now;
        self.ends[t].iter().map(move |&(b, i)| (f64::from_bits(b).max(now), self.jobs[i].gpus()))
    }

    /// Earliest time a Cell of `nodes` nodes × `gpus_per_node` GPUs of type
    /// `t` fits in one group of that type, releasing running jobs' GPUs
    /// node by node at their forecast ends (infinite: never, e.g. the
    /// shape is larger than every group). Unlike a count of free GPUs, this
    /// sees fragmentation: 8 GPUs free over several 8-GPU nodes do not make
    /// an 8-GPU one-node Cell free. O(running jobs of the type + its nodes).
    pub fn earliest_fit(&self, t: usize, nodes: u32, gpus_per_node: u32) -> f64 {
        let c = &self.cluster;
        let groups = &c.type_groups[t];
        let fits = |free: &[u32]| free.iter().filter(|&&f| f >= gpus_per_node).count() >= nodes as usize;
        let mut free: Vec<Option<Vec<u32>>> = vec![None; c.groups.len()];
        for &g in groups {
            let gs = &c.groups[g];
            if gs.spec.gpus_per_node < gpus_per_node || gs.spec.nodes < nodes {
                continue;
            }
            if gs.nodes_with_free(gpus_per_node) >= nodes as usize {
                return self.now;
            }
            free[g] = Some(gs.free_per_node().to_vec());
        }
        if free.iter().all(Option::is_none) {
            return f64::INFINITY;
        }
        for &(b, i) in &self.ends[t] {
            let Some(a) = &self.jobs[i].alloc else { continue };
            let Some(f) = free[a.shape.group].as_mut() else { continue };
            for &n in &a.nodes {
                f[n as usize] += a.shape.gpus_per_node;
            }
            if fits(f) {
                return f64::from_bits(b).max(self.now);
            }
        }
        f64::INFINITY
    }

    /// Busy GPU-seconds per type so far.
    pub fn busy_gpu_s(&self) -> &[f64] {
        &self.busy_gpu_s
    }
    /// Re-plans counted so far.
    pub fn replans(&self) -> u64 {
        self.replans
    }
    /// Preemptions so far.
    pub fn preemptions(&self) -> u64 {
        self.preemptions
    }
    /// Events processed so far.
    pub fn events_done(&self) -> u64 {
        self.events_done
    }
    /// The engine settings.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }
}

/// The engine as its policies see it (see [`crate::view`]).
impl SimView for Sim<'_> {
    fn now(&self) -> f64 {
        self.now
    }
    fn cluster(&self) -> &ClusterState {
        &self.cluster
    }
    fn jobs(&self) -> &[Job] {
        &self.jobs
    }
    fn pending(&self) -> &BTreeSet<usize> {
        &self.pending
    }
    fn running(&self) -> &BTreeSet<usize> {
        &self.running
    }
    fn times(&mut self) -> &mut TimeCache {
        self.times
    }
    fn remaining_s(&self, i: usize, iter_s: f64) -> f64 {
        Sim::remaining_s(self, i, iter_s)
    }
    fn attained_gpu_s(&self, i: usize) -> f64 {
        Sim::attained_gpu_s(self, i)
    }
    fn stock_iter_s(&self, i: usize) -> f64 {
        Sim::stock_iter_s(self, i)
    }
    fn running_ends(&self, t: usize) -> Box<dyn Iterator<Item = (f64, u32)> + '_> {
        Box::new(Sim::running_ends(self, t))
    }
    fn earliest_fit(&self, t: usize, nodes: u32, gpus_per_node: u32) -> f64 {
        Sim::earliest_fit(self, t, nodes, gpus_per_node)
    }
    fn set_forecast_end(&mut self, i: usize, end: f64) {
        Sim::set_forecast_end(self, i, end)
    }
    fn start(&mut self, i: usize, shape: Shape, iter_s: f64) -> bool {
        Sim::start(self, i, shape, iter_s)
    }
    fn start_on(&mut self, i: usize, shape: Shape, nodes: &[u32], iter_s: f64) -> bool {
        Sim::start_on(self, i, shape, nodes, iter_s)
    }
    fn preempt(&mut self, i: usize) {
        Sim::preempt(self, i)
    }
    fn requeue_later(&mut self, i: usize) {
        Sim::requeue_later(self, i)
    }
    fn wake_at(&mut self, t: f64) {
        Sim::wake_at(self, t)
    }
    fn tick_at(&mut self, t: f64) {
        Sim::tick_at(self, t)
    }
    fn version(&self) -> u64 {
        self.version
    }
    fn reconfigure(&mut self, i: usize, save_s: f64, restart_s: f64, checkpoint_bytes: f64) -> bool {
        Sim::reconfigure(self, i, save_s, restart_s, checkpoint_bytes)
    }
    fn count_replan(&mut self) {
        self.replans += 1;
    }
    fn set_planned(&mut self, i: usize, planned: (String, u32, u32)) {
        self.jobs[i].planned = Some(planned);
    }
    fn set_speed(&mut self, i: usize, speed: SpeedProfile) {
        self.jobs[i].speed = speed;
    }
}

/// Iterations the scheduler knows for a job with `true_iters`: exact when
/// `noise` is 0, else `true x exp(noise x z)` with `z` standard normal drawn
/// from (`seed`, job index), rounded, at least 1.
pub fn known_iters(true_iters: u64, noise: f64, seed: u64, index: u64) -> f64 {
    if noise <= 0.0 {
        return true_iters as f64;
    }
    let mut rng = crate::rng::Rng::new(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x5851_F42D_4C95_7F2D));
    (true_iters as f64 * (noise * rng.normal()).exp()).round().max(1.0)
}
