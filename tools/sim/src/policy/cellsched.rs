//! `cellsched`: the product's policy, running the core's decision code.
//!
//! - **Cell search** (`Estimator::rank_cells` through [`crate::times`]):
//!   among the free GPUs of every type, the fastest feasible Cell using at
//!   most `max_gpu_factor` x the requested GPUs, accepted if its iteration
//!   time is within `max_slowdown` x the job's best Cell on an idle cluster
//!   and if starting there now is predicted to finish no later than waiting
//!   for the planned Cell — otherwise the job waits. Waiting is estimated as
//!   the earliest time the planned Cell's shape fits (running jobs' GPUs
//!   released node by node at the end of their time limits, where Slurm's
//!   backfill expects them to end and job_submit's wait test reads it:
//!   the declared limit tightened to the declared work, `[declared]`;
//!   [`SimView::earliest_fit`], `CellschedPolicy::forecast_end`),
//!   plus the work queued ahead of the job on that type (GPU-seconds of the
//!   non-aged jobs earlier in the A-SRPT order that did not start, over the
//!   type's GPUs: `Backlog`) — at least the time the job has already waited
//!   when the free Cell uses no more GPU-time than the plan and the job is
//!   not urgent (`core::placement::wait`) — plus its run time there. A job
//!   with a deadline (trace column `due`) plans on and takes only Cells
//!   predicted to meet it (`SizingRule::choose_in_time`, as job_submit).
//!   Without the queue term every job in a long queue for a fast type
//!   believes it is next and slower free types idle (100k-job speed
//!   workload: t4/v100 unused, avg JCT above slurm's). Off: the requested
//!   type/count.
//! - **A-SRPT** (`core::asrpt`): pending jobs by predicted remaining work
//!   on their best Cell (`core::asrpt::remaining_time_s`, freezing
//!   included; GPU-seconds with the default `rank_by = area`), urgent jobs
//!   first (aged, or close to a deadline from the trace's `due` column),
//!   kept in a `core::asrpt::AsrptQueue` (the same order as
//!   `core::asrpt::order`, updated on arrival and start instead of
//!   re-sorted every pass). Off: FCFS.
//! - **Starvation guard** (aging): a job waiting past its aging threshold
//!   (`AsrptConfig`: the bound and `aging_factor` × its remaining time) is
//!   aged; the first `aged_lane` aged jobs are urgent. By default
//!   ([`AgedGuard::None`]) that is all: they come first in every pass and
//!   their work counts in the queue ahead of later jobs ([`Backlog`]).
//!   [`AgedGuard::Shadow`] adds an EASY-backfill reservation on the planned
//!   GPU type (later jobs use it only if they finish before the shadow time
//!   or take GPUs the urgent job will not need), [`AgedGuard::Type`] closes
//!   the type for the pass. Both idle GPUs: the reservations plan with
//!   predicted ends, which are optimistic on truth, and on the Philly traces
//!   shadow cost 8-48% of average JCT against none (2026-11-23, README).
//!   The guard applies under FCFS too, so the `srpt` ablation changes only
//!   the order. Off (`aging`): nothing ages.
//! - **Placement**: the Cell's shape on the fewest nodes, best-fit nodes.
//! - **Freezing** (`core::freezing`): jobs that opted in (trace `freeze`
//!   column) run with the mode's schedule and iteration penalty.
//! - **Re-planning**: a pending job's Cell is re-chosen at every pass from the
//!   free GPUs then; each start on a Cell other than the one planned at
//!   submission counts as a re-plan. A slower Cell is taken only when it is
//!   predicted to finish earlier than waiting by `placement.replan_min_gain`
//!   of the job's remaining run (`core::placement::PlanWait::gains_enough`,
//!   job_submit's hysteresis), and a job moved by a reconfiguration is not
//!   re-planned within `placement.replan_cooldown_s` (`core::placement::in_cooldown`).
//!   Off: the job waits for its submission-time Cell.
//! - **Reconfiguration** of running elastic jobs (trace column `elastic`):
//!   `core::elastic::decide` every `[elastic] interval_s`, with the restart
//!   cost on the clock ([`crate::elastic`]). Off (`elastic`): running jobs
//!   are never touched.
//!
//! Cost per pass: the queue walk is O(pending), but everything that depends
//! only on a job's class (model, batch, GPU cap) and the free GPUs — the
//! ranked Cells, the first fitting one, when the planned type frees up — is
//! computed once per class and cluster change ("epoch"), and a class whose
//! job lost against waiting skips its members with more remaining work.
//! Decisions are identical to evaluating every job from scratch.
//!
//! The policy plans with the scheduler's knowledge only: predicted iteration
//! times ([`crate::times`]) and known iterations ([`crate::engine::Job::iters`]);
//! the engine runs the clock on truth when one is set. Jobs whose model the
//! knowledge lacks keep their requested type and count (stock).
use super::slurm_backfill::{declared_limit, SlurmGate};
use super::starts::{iter_on, requested_admissible};
use crate::view::Policy;
use crate::cluster::Shape;
use crate::view::SimView;
use crate::error::SimError;
use crate::progress_model::SpeedProfile;
use crate::times::TimedCell;
use cellsched_core::estimator::CellOffer;
use cellsched_core::asrpt::{self, AsrptConfig, AsrptQueue, PendingJob};
use cellsched_core::config::Config;
use cellsched_core::deadline::{DeadlineConfig, DeadlineLedger};
use cellsched_core::freezing::{FreezeMode, FreezeProfile};
use cellsched_core::config::ElasticConfig;
use cellsched_core::declared::DeclaredConfig;
use cellsched_core::placement::{self, DeadlineWork, LoadView, Sizable, SizingRule};
use crate::elastic::ElasticHost;
use std::collections::HashMap;
use std::rc::Rc;

/// A cellsched component that can be switched off for ablations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ablation {
    /// `cell-search`: use the requested type and count.
    CellSearch,
    /// `srpt`: FCFS instead of A-SRPT.
    Srpt,
    /// `replan`: keep the submission-time Cell.
    Replan,
    /// `freeze`: ignore freezing opt-ins.
    Freeze,
    /// `aging`: no starvation guard (no aging, no reservation for aged jobs).
    Aging,
    /// `load-sizing`: size by marginal value alone, never growing a job into
    /// GPUs no pending job waits for (`core::placement::LoadView`).
    LoadSizing,
    /// `elastic`: never reconfigure running jobs (`core::elastic`).
    Elastic,
}

impl Ablation {
    /// All components, in table order.
    pub const ALL: [Ablation; 7] = [Ablation::CellSearch, Ablation::Srpt, Ablation::Replan, Ablation::Freeze, Ablation::Aging, Ablation::LoadSizing, Ablation::Elastic];
    /// Text form (`cell-search`, `srpt`, `replan`, `freeze`, `aging`, `load-sizing`, `elastic`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Ablation::CellSearch => "cell-search",
            Ablation::Srpt => "srpt",
            Ablation::Replan => "replan",
            Ablation::Freeze => "freeze",
            Ablation::Aging => "aging",
            Ablation::LoadSizing => "load-sizing",
            Ablation::Elastic => "elastic",
        }
    }
    /// Parses a comma-separated list such as `srpt,freeze` (empty = none).
    pub fn parse_list(s: &str) -> Result<Vec<Ablation>, SimError> {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| {
                Ablation::ALL
                    .into_iter()
                    .find(|a| a.as_str() == x.to_ascii_lowercase())
                    .ok_or_else(|| SimError::invalid("ablation", x, "cell-search, srpt, replan, freeze, aging, load-sizing or elastic"))
            })
            .collect()
    }
}

/// Settings of the cellsched policy.
#[derive(Debug, Clone)]
pub struct CellschedOptions {
    /// Cell search on (else requested type/count).
    pub cell_search: bool,
    /// A-SRPT ordering on (else FCFS).
    pub srpt: bool,
    /// Re-planning of pending jobs on.
    pub replan: bool,
    /// Layer freezing for opted-in jobs on.
    pub freeze: bool,
    /// Starvation guard on: aging (per `asrpt`) plus `aged_guard`.
    pub aging: bool,
    /// Load-adaptive sizing on: a job starting now also grows into free GPUs
    /// no pending job waits for (`SizingRule::choose_under_load`).
    pub load_sizing: bool,
    /// Accept a free Cell up to this many times slower than the job's best (>= 1).
    pub max_slowdown: f64,
    /// Take a slower free Cell only when it is predicted to finish before
    /// waiting for the plan would (`core::placement::PlanWait`, job_submit's
    /// `replan_wait_test`). Off: any free Cell within `max_slowdown` is
    /// taken at once.
    pub wait_test: bool,
    /// Most GPUs one job may get (`placement.max_gpus`; never below its request).
    pub max_gpus: u32,
    /// Cells may use up to this many times the requested GPU count (>= 1).
    pub max_gpu_factor: f64,
    /// GPU types Cells may use (`placement.allowed_gpu_types`); empty: all.
    pub allowed_gpu_types: Vec<String>,
    /// Marginal-value sizing (`core::placement::sizing`): a job grows to more
    /// GPUs only while the extra GPUs' marginal efficiency is at least this
    /// (0..=1; 0 takes the fastest Cell within the cap).
    pub min_marginal_efficiency: f64,
    /// A-SRPT settings.
    pub asrpt: AsrptConfig,
    /// How an aged job that cannot start is protected from being passed over.
    pub aged_guard: AgedGuard,
    /// Re-planning hysteresis: a slower Cell must be predicted to finish
    /// earlier than waiting by this share of the remaining run
    /// (`placement.replan_min_gain`).
    pub replan_min_gain: f64,
    /// Re-planning cool-down after a reconfiguration moved a job, seconds
    /// (`placement.replan_cooldown_s`).
    pub replan_cooldown_s: u64,
    /// Reconfiguration of running elastic jobs (`[elastic]`; `enabled`
    /// false: never).
    pub elastic: ElasticConfig,
    /// Time limits of declared work (`[declared]`): the limit job_submit
    /// gives a run is where slurmctld expects it to end
    /// (`CellschedPolicy::forecast_end`).
    pub declared: DeclaredConfig,
    /// Each user's deadline urgency budget (`[deadline]`), applied at
    /// arrival by core's rule ([`DeadlineLedger::gate`]).
    pub deadline: DeadlineConfig,
    /// The trace's GPU counts are fixed by their users (an untyped
    /// `--gres=gpu:N`, as `cellsched bench replay` submits them): each job
    /// gets the fastest Cell of exactly that count, as job_submit does for
    /// a fixed count (`core::placement::ranked_for`, `choose_ranked`).
    /// Off: the count is a hint the sizing rule may change.
    pub fixed_counts: bool,
    /// Jobs are started by slurmctld's scheduler as the plugins run there
    /// (main scheduler, backfill under declared time limits, job_submit's
    /// re-planning cadence; see `SlurmGate`). `None`: the policy starts
    /// jobs itself at every pass.
    pub started_by_slurm: Option<SlurmGate>,
}

/// Starvation guard for an aged job that cannot start in a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgedGuard {
    /// `none`: nothing beyond its place in the order.
    None,
    /// `type`: its planned GPU type is closed to every later job for the
    /// rest of the pass.
    Type,
    /// `shadow`: EASY-backfill reservation on its planned GPU type: later
    /// jobs may use that type only if they finish before the time enough of
    /// its GPUs free up (the shadow time) or use GPUs the aged job will not need then.
    Shadow,
}

impl std::str::FromStr for AgedGuard {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(AgedGuard::None),
            "type" => Ok(AgedGuard::Type),
            "shadow" => Ok(AgedGuard::Shadow),
            _ => Err(SimError::invalid("aged guard", s, "none, type or shadow")),
        }
    }
}

/// The plugins' defaults (cellsched.toml with no keys set).
impl Default for CellschedOptions {
    fn default() -> Self {
        CellschedOptions::from_config(&Config::default())
    }
}

impl CellschedOptions {
    /// The policy the plugins' configuration describes: the `[placement]`
    /// section (job_submit: Cell choice, sizing, re-planning) and the
    /// `[ordering]` section (site_factor: A-SRPT), read from the same
    /// cellsched.toml, and the `[elastic]` section (reconfiguration of
    /// running jobs, at its `interval_s`). Keys that only steer slurmctld
    /// plumbing have no simulator counterpart: `placement.replan_interval_s`
    /// (the simulator re-plans at every scheduling pass),
    /// `placement.deadline_policy` (a submit-time refusal; trace jobs are
    /// all admitted), and `ordering.site_factor_max`, `default_remaining_s`,
    /// `rank_interval_s`, `release_gres_select`.
    pub fn from_config(cfg: &Config) -> Self {
        let p = &cfg.placement;
        CellschedOptions {
            cell_search: p.enabled,
            srpt: cfg.ordering.enabled,
            replan: p.replan,
            freeze: true,
            aging: true,
            load_sizing: p.load_sizing,
            max_slowdown: p.replan_max_slowdown,
            wait_test: p.replan_wait_test,
            max_gpus: p.max_gpus,
            max_gpu_factor: p.max_gpu_factor,
            allowed_gpu_types: p.allowed_gpu_types.clone(),
            min_marginal_efficiency: p.min_marginal_efficiency,
            asrpt: cellsched_core::ordering::asrpt_config(&cfg.ordering),
            aged_guard: AgedGuard::None,
            deadline: cfg.deadline.clone(),
            fixed_counts: false,
            started_by_slurm: None,
            replan_min_gain: p.replan_min_gain,
            replan_cooldown_s: p.replan_cooldown_s,
            elastic: cfg.elastic.clone(),
            declared: cfg.declared.clone(),
        }
    }

    /// The `[placement]` section these options stand for (what the elastic
    /// rule reads: sizing and allowed types).
    pub fn placement_config(&self) -> cellsched_core::config::PlacementConfig {
        cellsched_core::config::PlacementConfig {
            enabled: self.cell_search,
            replan: self.replan,
            replan_max_slowdown: self.max_slowdown,
            replan_wait_test: self.wait_test,
            replan_min_gain: self.replan_min_gain,
            replan_cooldown_s: self.replan_cooldown_s,
            max_gpus: self.max_gpus,
            max_gpu_factor: self.max_gpu_factor,
            min_marginal_efficiency: self.min_marginal_efficiency,
            load_sizing: self.load_sizing,
            allowed_gpu_types: self.allowed_gpu_types.clone(),
            ..Default::default()
        }
    }
}

impl CellschedOptions {
    /// Switches the given components off.
    pub fn without(mut self, off: &[Ablation]) -> Self {
        for a in off {
            match a {
                Ablation::CellSearch => self.cell_search = false,
                Ablation::Srpt => self.srpt = false,
                Ablation::Replan => self.replan = false,
                Ablation::Freeze => self.freeze = false,
                Ablation::Aging => self.aging = false,
                Ablation::LoadSizing => self.load_sizing = false,
                Ablation::Elastic => self.elastic.enabled = false,
            }
        }
        self
    }
    /// `cellsched` plus `-no-X` for each component switched off.
    pub fn name(&self) -> String {
        let mut n = String::from("cellsched");
        for (on, a) in [(self.cell_search, "cell-search"), (self.srpt, "srpt"), (self.replan, "replan"), (self.freeze, "freeze"), (self.aging, "aging"), (self.load_sizing, "load-sizing"), (self.elastic.enabled, "elastic")] {
            if !on {
                n.push_str("-no-");
                n.push_str(a);
            }
        }
        n
    }
}

/// What the policy knows about a job from its submission.
#[derive(Debug, Clone)]
struct JobPlan {
    /// Best Cell on an idle cluster (the submission-time plan).
    ideal: TimedCell,
    /// Freezing profile when the job freezes.
    freeze: Option<FreezeProfile>,
    /// Jobs of one class (model, batch, GPU cap) see the same Cells.
    class: usize,
    /// Remaining seconds on the planned Cell; fixed while the job waits
    /// (this policy never preempts). Set on arrival.
    rem_plan_s: f64,
    /// The job as A-SRPT ranks it (set on arrival).
    asrpt: PendingJob,
    /// Cluster type index of the planned Cell's GPU type.
    plan_type: usize,
}

/// GPUs of each type started during the current pass. The engine's view
/// ([`SimView::start`] updates the free GPUs and the running ends at once)
/// already includes them, so [`Self::earliest`] counts them a second time:
/// a pessimistic margin, on top of [`Backlog`], that makes jobs later in a
/// pass readier to take a slower free Cell. Kept deliberately: dropping it
/// raised cellsched's average JCT by 17% and 31% on two Philly traces (2%
/// lower on the third; 2026-11-21, see bench/README.md).
#[derive(Default)]
struct FreeTimes {
    used: HashMap<usize, u64>,
}

impl FreeTimes {
    /// Earliest time `gpus` GPUs of type `t` are free (GPU counts only),
    /// from running jobs' predicted ends.
    fn earliest(&mut self, sim: &dyn SimView, t: usize, gpus: u32) -> f64 {
        let need = gpus as u64 + self.used.get(&t).copied().unwrap_or(0);
        let mut cum = sim.cluster().free_of_type(t);
        if cum >= need {
            return sim.now();
        }
        for (end, g) in sim.running_ends(t) {
            cum += g as u64;
            if cum >= need {
                return end;
            }
        }
        f64::INFINITY
    }

    /// EASY-backfill reservation for `gpus` GPUs of type `t`: the shadow
    /// time ([`Self::earliest`]) and how many GPUs beyond `gpus` are free then.
    fn shadow(&mut self, sim: &dyn SimView, t: usize, gpus: u32) -> (f64, u64) {
        let at = self.earliest(sim, t, gpus);
        let used = self.used.get(&t).copied().unwrap_or(0);
        let mut free = sim.cluster().free_of_type(t);
        for (end, g) in sim.running_ends(t) {
            if end > at {
                break;
            }
            free += g as u64;
        }
        (at, free.saturating_sub(used + gpus as u64))
    }
}

/// The least remaining time (on the plan) of a class's job that lost
/// against waiting, and the queue wait on its planned type it lost under.
#[derive(Debug, Clone, Copy)]
struct Loss {
    rem_plan_s: f64,
    queue_wait_s: f64,
}

impl Loss {
    const NONE: Loss = Loss { rem_plan_s: f64::INFINITY, queue_wait_s: f64::NEG_INFINITY };
}

/// Work queued ahead of the current job in one pass, per GPU type: the
/// GPU-seconds (on their planned Cells) of the jobs earlier in the order
/// that did not start and wait for a Cell of that type.
///
/// Spread over all GPUs of the type, it is the time that backlog keeps the
/// type busy once GPUs free up — the job's extra wait for its planned Cell
/// beyond the running jobs' releases ([`FreeTimes::earliest`]). Without it,
/// every job in a long queue for a fast type believes it is next, waits for
/// it, and slower free types stay idle.
struct Backlog {
    gpu_s: Vec<f64>,
    inv_cap: Vec<f64>,
}

impl Backlog {
    fn new(sim: &dyn SimView) -> Self {
        let c = sim.cluster();
        let inv_cap = (0..c.types.len()).map(|t| 1.0 / (c.total_of_type(t).max(1) as f64)).collect();
        Backlog { gpu_s: vec![0.0; c.types.len()], inv_cap }
    }
    /// A job that did not start waits for `gpus` GPUs of type `t` for
    /// `rem_s` seconds. `reserved` jobs (urgent ones under a guard that
    /// reserves) are not counted: their claim is the guard's reservation,
    /// which later jobs may backfill around.
    fn add(&mut self, reserved: bool, t: usize, gpus: u32, rem_s: f64) {
        if !reserved {
            self.gpu_s[t] += gpus as f64 * rem_s;
        }
    }
    /// Seconds the queued work ahead keeps all GPUs of type `t` busy.
    fn wait_s(&self, t: usize) -> f64 {
        self.gpu_s[t] * self.inv_cap[t]
    }
}

/// The cellsched policy.
pub struct CellschedPolicy {
    opts: CellschedOptions,
    name: String,
    plans: Vec<Option<JobPlan>>,
    classes: HashMap<(String, u32, u32), usize>,
    /// Per class: the pass epoch in which it found no acceptable free Cell.
    no_cell_epoch: Vec<u64>,
    /// Per class: Cells ranked on the free GPUs of the epoch it was made in.
    ranked: Vec<(u64, Rc<Vec<TimedCell>>)>,
    /// Per class: what the free GPUs of an epoch offer it (see
    /// [`ClassPick`]) and the least remaining time (on the plan) of a job of
    /// the class that lost against waiting in that epoch, with the queue
    /// wait ([`Backlog::wait_s`]) it lost under.
    picks: Vec<(u64, ClassPick, Loss)>,
    /// Bumped whenever the free GPUs (or held types) change.
    epoch: u64,
    /// Pending jobs in A-SRPT order, kept incrementally (A-SRPT on).
    queue: Option<AsrptQueue>,
    /// Scratch: jobs started in the current pass; FCFS order.
    started: Vec<usize>,
    fcfs: Vec<(usize, bool)>,
    /// Per GPU type: the GPUs the pending jobs' plans wait for, counted at
    /// the start of each pass and lowered as jobs start (the load view).
    wanted: Vec<u64>,
    /// Reconfiguration of running elastic jobs (`None`: off).
    elastic: Option<ElasticHost>,
    /// Deadline urgency granted per user (core's rule, as site_factor applies it).
    ledger: DeadlineLedger,
    /// Trace user names to the ids the ledger keys on.
    users: HashMap<String, u32>,
    /// slurmctld's machinery when jobs are started through it (`CellschedOptions::started_by_slurm`).
    gate: Option<SlurmGate>,
}

/// The GPU types a job may be offered: all but `held`; `slot` names the
/// per-class caches of this view (0: the pass's held types; 1: those plus
/// the types reserved for aged jobs, for jobs that may not backfill there).
#[derive(Clone, Copy)]
struct View<'a> {
    held: &'a [bool],
    slot: usize,
}

/// What the free GPUs offer one class in one epoch: everything in
/// [`CellschedPolicy::choose`] that does not depend on the individual job.
#[derive(Debug, Clone, Copy)]
enum ClassPick {
    /// No acceptable Cell fits.
    NoCell,
    /// The fastest fitting Cell is no slower than the plan: start there.
    Start(Shape, f64),
    /// The fastest fitting Cell is slower than the plan, whose GPUs free up
    /// at the given time: start there only if that finishes sooner.
    Slower(Shape, f64, f64),
}

impl CellschedPolicy {
    /// A policy with the given options (validated).
    pub fn new(opts: CellschedOptions) -> Result<Self, SimError> {
        if !(opts.max_slowdown.is_finite() && opts.max_slowdown >= 1.0) {
            return Err(SimError::invalid("max slowdown", opts.max_slowdown.to_string(), "a number >= 1"));
        }
        if !(0.0..=1.0).contains(&opts.min_marginal_efficiency) {
            return Err(SimError::invalid("min marginal efficiency", opts.min_marginal_efficiency.to_string(), "a number in 0..=1"));
        }
        if !(opts.max_gpu_factor.is_finite() && opts.max_gpu_factor >= 1.0) {
            return Err(SimError::invalid("max GPU factor", opts.max_gpu_factor.to_string(), "a number >= 1"));
        }
        opts.asrpt.validate()?;
        let mut opts = opts;
        if !opts.aging {
            // No job ever ages (the largest finite bound) and none is guarded.
            opts.asrpt.aging_bound_s = f64::MAX;
            opts.asrpt.aging_factor = 0.0;
            opts.aged_guard = AgedGuard::None;
        }
        let queue = if opts.srpt { Some(AsrptQueue::new(opts.asrpt.clone(), 0.0)?) } else { None };
        opts.elastic.check().map_err(|e| SimError::invalid("elastic settings", e, "the ranges of cellsched.toml(5)"))?;
        let sizing = SizingRule { max_gpus: opts.max_gpus.max(1), max_gpu_factor: opts.max_gpu_factor, min_marginal_efficiency: opts.min_marginal_efficiency };
        let elastic = opts.elastic.enabled.then(|| ElasticHost::new(opts.elastic.clone(), opts.placement_config(), sizing).with_fixed_counts(opts.fixed_counts));
        let gate = opts.started_by_slurm.clone();
        Ok(CellschedPolicy {
            name: opts.name(),
            opts,
            plans: Vec::new(),
            classes: HashMap::new(),
            no_cell_epoch: Vec::new(),
            ranked: Vec::new(),
            picks: Vec::new(),
            epoch: 1,
            queue,
            started: Vec::new(),
            fcfs: Vec::new(),
            wanted: Vec::new(),
            elastic,
            ledger: DeadlineLedger::default(),
            users: HashMap::new(),
            gate,
        })
    }

    /// Keeps every elastic decision pass ([`crate::elastic::Pass`]), for
    /// replaying them on the plugins' side.
    pub fn keep_elastic_passes(&mut self) {
        if let Some(e) = &mut self.elastic {
            e.keep_passes = true;
        }
    }

    /// The elastic decision passes kept so far.
    pub fn elastic_passes(&self) -> &[crate::elastic::Pass] {
        self.elastic.as_ref().map_or(&[], |e| e.passes())
    }

    /// The ledger's id of job `i`'s user: one per trace user name; a job
    /// without one is its own user (nothing ties it to other jobs).
    fn user_id(&mut self, i: usize, user: Option<&str>) -> u32 {
        match user {
            Some(u) => {
                let next = self.users.len() as u32;
                *self.users.entry(u.to_string()).or_insert(next)
            }
            None => (1 << 31) | (i as u32 & !(1 << 31)),
        }
    }

    fn plan(&self, i: usize) -> &JobPlan {
        self.plans[i].as_ref().expect("admitted job has a plan")
    }

    /// Job `i` was moved by a reconfiguration within the re-planning cool-down.
    fn cooling(&self, sim: &dyn SimView, i: usize) -> bool {
        self.elastic.as_ref().is_some_and(|e| e.in_cooldown(i, sim.now(), self.opts.replan_cooldown_s))
    }

    /// The pending jobs in this policy's order (A-SRPT or FCFS), each with
    /// its planned Cell and predicted remaining time there.
    fn waiting(&self, sim: &dyn SimView) -> Vec<crate::elastic::Waiting> {
        let order: Vec<usize> = match &self.queue {
            Some(q) => q.iter_flagged().map(|(id, _)| id as usize).collect(),
            None => sim.pending().iter().copied().collect(),
        };
        order
            .into_iter()
            .filter(|&i| sim.job(i).status == crate::job::Status::Pending)
            .filter_map(|i| self.plans.get(i)?.as_ref().map(|p| (i, p.ideal.clone(), p.rem_plan_s)))
            .collect()
    }

    /// The sizing rule: the trace's GPU count is the job's hint, capped at
    /// `max_gpu_factor` times it (the cluster bounds the rest).
    fn sizing(&self) -> SizingRule {
        SizingRule { max_gpus: self.opts.max_gpus.max(1), max_gpu_factor: self.opts.max_gpu_factor, min_marginal_efficiency: self.opts.min_marginal_efficiency }
    }

    fn max_gpus(&self, sim: &dyn SimView, i: usize) -> u32 {
        let n = sim.job(i).spec.num_gpu.max(1);
        if self.opts.fixed_counts { n } else { self.sizing().cap(n) }
    }

    /// The Cell the sizing rule picks among `cells` for job `i` (the same
    /// rule job_submit applies, `core::placement::sizing`).
    /// With a deadline (`work`), only the Cells predicted to meet it count
    /// (`SizingRule::choose_in_time`, as job_submit and re-planning do);
    /// `None` then means none of `cells` does.
    /// With [`CellschedOptions::fixed_counts`], the fastest Cell of exactly
    /// the job's count (`cells` are fastest first).
    fn sized(&self, sim: &dyn SimView, i: usize, cells: &[&TimedCell], work: Option<DeadlineWork>, load: Option<&LoadView>) -> Option<usize> {
        if self.opts.fixed_counts {
            let n = sim.job(i).spec.num_gpu.max(1);
            return cells.iter().position(|c| c.gpus == n && work.is_none_or(|w| w.met_by(c.iter_s)));
        }
        self.sizing().choose_in_time_under_load(cells, Some(sim.job(i).spec.num_gpu.max(1)), work, load)
    }

    /// The load job `i` is sized against when it starts now: the free GPUs
    /// of every type and the GPUs the other pending jobs' plans wait for.
    /// `None` with load sizing off.
    fn load_view(&self, sim: &dyn SimView, i: usize) -> Option<LoadView> {
        if !self.opts.load_sizing {
            return None;
        }
        let c = sim.cluster();
        let mut v = LoadView::new();
        for (t, name) in c.types.iter().enumerate() {
            v.add_total(name, c.total_of_type(t));
            v.add_free(name, c.free_of_type(t));
            v.add_wanted(name, self.wanted.get(t).copied().unwrap_or(0));
        }
        let p = self.plan(i);
        Some(v.without_wanted(&p.ideal.gpu_type, u64::from(p.ideal.gpus)))
    }

    /// When slurmctld expects running job `i`'s run to end: at the end of
    /// its time limit, which is what Slurm's backfill forecasts with and so
    /// what job_submit's wait test and the elastic rule read. The limit is
    /// the job's declared one (trace column `deadline`), tightened to its
    /// declared work as job_submit does ([`placement::bounded_limit`],
    /// `[declared]`); under `started_by_slurm`, as submitted (what the
    /// modelled backfill plans with). A job without any limit keeps its
    /// predicted end.
    fn forecast_end(&self, sim: &dyn SimView, i: usize) -> f64 {
        let j = sim.job(i);
        if self.gate.is_some() {
            return j.alloc_time + declared_limit(sim, i);
        }
        let declared_min = if j.spec.deadline > 0.0 { (j.spec.deadline / 60.0).ceil().min(f64::from(u32::MAX - 1)) as u32 } else { 0 };
        let iters = (j.iters().is_finite() && j.iters() >= 1.0).then(|| j.iters().ceil() as u64);
        let limit_min = placement::bounded_limit(declared_min, iters, j.pred_iter_s, &self.opts.declared).unwrap_or(declared_min);
        if limit_min == 0 {
            j.pred_end
        } else {
            j.alloc_time + f64::from(limit_min) * 60.0
        }
    }

    /// Job `i`'s deadline work now (trace column `due`): the iterations it
    /// has left as the scheduler knows them and the seconds to its deadline.
    /// None without a deadline or Cell search.
    fn deadline_work(&self, sim: &dyn SimView, i: usize) -> Option<DeadlineWork> {
        let j = sim.job(i);
        let due = j.spec.due_s.filter(|d| d.is_finite())?;
        if !self.opts.cell_search || j.stock || j.pinned {
            return None;
        }
        // Remaining time at 1 s per iteration = iterations left (freezing included).
        Some(DeadlineWork { iters: sim.remaining_s(i, 1.0), left_s: j.spec.submission_time + due - sim.now() })
    }

    /// Offers of the free GPUs (or of an idle cluster), skipping `held` types.
    ///
    /// `rank_cells` offers Cells of at most one node (up to the largest free
    /// count) or of whole free nodes, so each group is summarized in that
    /// canonical form — the fully free nodes a Cell of `max_gpus` could use,
    /// else the node with the most free GPUs — which gives the same ranking
    /// and lets [`crate::times::TimeCache`] hit far more often.
    fn offers(&self, sim: &dyn SimView, max_gpus: u32, idle: bool, held: &[bool]) -> Vec<CellOffer> {
        let c = sim.cluster();
        let allowed = &self.opts.allowed_gpu_types;
        c.groups
            .iter()
            .filter(|g| !held[g.type_idx])
            .filter(|g| allowed.is_empty() || allowed.iter().any(|t| t.eq_ignore_ascii_case(&g.spec.gpu_type)))
            .filter_map(|g| {
                let gpn = g.spec.gpus_per_node;
                let cap = max_gpus.div_ceil(gpn) as usize;
                let full = if idle { g.spec.nodes as usize } else { g.nodes_with_free(gpn) }.min(cap);
                let free = if full > 0 {
                    vec![gpn; full]
                } else {
                    g.top_free(1)
                };
                (!free.is_empty()).then(|| CellOffer { gpu_type: g.spec.gpu_type.clone(), gpus_per_node: gpn, free_gpus_per_node: free })
            })
            .collect()
    }

    /// The group where a choice's shape fits now (or on an idle cluster).
    fn group_for(sim: &dyn SimView, c: &TimedCell, idle: bool) -> Option<Shape> {
        let cl = sim.cluster();
        let t = cl.type_index(&c.gpu_type)?;
        cl.type_groups[t].iter().find_map(|&g| {
            let s = Shape { group: g, nodes: c.nodes, gpus_per_node: c.gpus_per_node };
            let gs = &cl.groups[g];
            let ok = if idle {
                s.gpus_per_node <= gs.spec.gpus_per_node && s.nodes <= gs.spec.nodes
            } else {
                cl.fits(&s)
            };
            ok.then_some(s)
        })
    }

    /// Best Cell on an idle cluster, per the enabled components.
    fn ideal(&self, sim: &mut dyn SimView, i: usize) -> Option<TimedCell> {
        if self.opts.cell_search && !sim.job(i).stock && !sim.job(i).pinned {
            let max = self.max_gpus(sim, i);
            let held = vec![false; sim.cluster().types.len()];
            let offers = self.offers(sim, max, true, &held);
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            let ranked = sim.times().rank_cells(&m, b, &offers, max);
            let fit: Vec<&TimedCell> = ranked.iter().filter(|c| Self::group_for(sim, c, true).is_some()).collect();
            // With a deadline: the sizing choice among the Cells that meet
            // it; when none does, the fastest Cell (job_submit's rule).
            let work = self.deadline_work(sim, i);
            let k = self.sized(sim, i, &fit, work, None).or_else(|| {
                work.and_then(|_| (0..fit.len()).min_by(|&a, &b| fit[a].iter_s.total_cmp(&fit[b].iter_s)))
            });
            k.map(|k| fit[k].clone())
        } else {
            if !requested_admissible(sim, i) {
                return None;
            }
            let j = sim.job(i);
            let (t, g) = (j.req_type?, j.spec.num_gpu);
            let shape = sim.cluster().place_idle(t, g)?;
            let iter_s = iter_on(sim, i, shape)?;
            Some(TimedCell { gpu_type: sim.cluster().types[t].clone(), gpus: g, nodes: shape.nodes, gpus_per_node: shape.gpus_per_node, iter_s })
        }
    }

    /// The Cell to start job `i` on now, if any; `no_cell` is set when no
    /// free Cell is acceptable for the job's whole class (not just this job).
    /// `queue_wait_s` is the extra wait for the planned Cell caused by the
    /// work queued ahead of the job on its type ([`Backlog::wait_s`]).
    /// `queued_on`: per GPU type, the work of the jobs earlier in the pass
    /// that wait for it ([`Backlog`]); none: a slower Cell there takes GPU-time from no one.
    /// `urgent`: the job is in the urgent band (see [`wait`]).
    #[allow(clippy::too_many_arguments)]
    fn choose(&mut self, sim: &mut dyn SimView, i: usize, view: View<'_>, ft: &mut FreeTimes, queue_wait_s: f64, queued_on: &[f64], urgent: bool, no_cell: &mut bool) -> Option<(Shape, f64)> {
        let held = view.held;
        let plan = &self.plan(i).ideal;
        // A job pinned to its request is handled like a stock one here
        // (its type and count), but timed by the knowledge.
        let stock = sim.job(i).stock || sim.job(i).pinned;
        if !self.opts.cell_search || !self.opts.replan || stock || self.cooling(sim, i) {
            // The planned Cell (requested one when Cell search is off, and
            // for stock jobs, whose model the knowledge lacks).
            let t = sim.cluster().type_index(&plan.gpu_type)?;
            if held[t] {
                return None;
            }
            let s = if self.opts.cell_search && !stock {
                Self::group_for(sim, plan, false)?
            } else {
                sim.cluster().place_now(t, plan.gpus)?
            };
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            if sim.times().is_marked(&m, b, &plan.gpu_type, plan.nodes, plan.gpus_per_node) {
                // The plan turned out not to fit (another job's run failed there): re-plan.
                sim.requeue_later(i);
                return None;
            }
            let it = if s.nodes == plan.nodes { plan.iter_s } else { iter_on(sim, i, s)? };
            return Some((s, it));
        }
        let class = self.plan(i).class;
        let slot = 2 * class + view.slot;
        // A deadline job's choice depends on its own work and time left:
        // it bypasses the class caches.
        let work = self.deadline_work(sim, i);
        let pick = if work.is_some() {
            self.class_pick(sim, i, view, ft, work)?
        } else if self.picks[slot].0 == self.epoch {
            self.picks[slot].1
        } else {
            let p = self.class_pick(sim, i, view, ft, None)?;
            self.picks[slot] = (self.epoch, p, Loss::NONE);
            p
        };
        match pick {
            ClassPick::NoCell => {
                *no_cell = work.is_none();
                None
            }
            ClassPick::Start(s, it) => Some((s, it)),
            ClassPick::Slower(s, it, _) if !self.opts.wait_test => Some((s, it)),
            ClassPick::Slower(s, it, plan_free_at) => {
                // Slower than the plan: only if it beats waiting for the plan.
                // Waiting means: the plan's GPUs free up, the work queued
                // ahead on that type runs, then the job runs there.
                let rem_plan = self.plan(i).rem_plan_s;
                // Later arrivals with less work pass a waiting job, so the
                // queue ahead understates its wait: one that has waited long
                // expects to wait as long again (core::placement::wait).
                let (plan_gpus, plan_iter) = (self.plan(i).ideal.gpus, self.plan(i).ideal.iter_s);
                // Contended: a job earlier in this pass waits for the slower Cell's type.
                let contended = queued_on.get(sim.cluster().groups[s.group].type_idx).is_some_and(|g| *g > 0.0);
                let correct = placement::corrects_wait(urgent, s.gpus(), it, plan_gpus, plan_iter, contended);
                let waited = sim.now() - sim.job(i).spec.submission_time;
                let pw = placement::PlanWait { plan_free_at_s: plan_free_at, queue_ahead_s: queue_wait_s, waited_s: waited, rem_plan_s: rem_plan };
                let queue_wait_s = placement::expected_queue_wait_s(queue_wait_s, waited, correct);
                debug_assert_eq!(rem_plan, sim.remaining_s(i, self.plan(i).ideal.iter_s));
                let loss = if work.is_none() { self.picks[slot].2 } else { Loss::NONE };
                if rem_plan >= loss.rem_plan_s && queue_wait_s <= loss.queue_wait_s {
                    // A class mate with less work already lost under at
                    // least this queue wait (see below).
                    debug_assert!(
                        sim.now() + sim.remaining_s(i, it) + self.opts.replan_min_gain.max(0.0) * rem_plan > plan_free_at + queue_wait_s + rem_plan,
                        "skip must equal the full check"
                    );
                    return None;
                }
                // The test job_submit applies too (core::placement::PlanWait).
                let (rem_here, wait) = (sim.remaining_s(i, it), pw.finish_on_plan_s(correct));
                // Hysteresis (job_submit's replan_min_gain): the slower Cell must win by a margin.
                let here = sim.now() + rem_here + self.opts.replan_min_gain.max(0.0) * rem_plan;
                if !pw.slower_cell_finishes_first(sim.now(), rem_here, correct) || !pw.gains_enough(sim.now(), rem_here, correct, self.opts.replan_min_gain) {
                    // Remaining times scale with the iteration time, so the
                    // loss grows with the job's remaining time on the plan:
                    // every class mate with at least as much also loses under
                    // a queue wait no longer than this one (the queue wait
                    // only grows during a pass). Only recorded when the loss
                    // is far above rounding error.
                    if work.is_none() && here - wait > 1e-9 * (here.abs() + wait.abs()) {
                        let l = &mut self.picks[slot].2;
                        if queue_wait_s > l.queue_wait_s {
                            *l = Loss { rem_plan_s: rem_plan, queue_wait_s };
                        } else {
                            l.rem_plan_s = l.rem_plan_s.min(rem_plan);
                        }
                    }
                    return None;
                }
                Some((s, it))
            }
        }
    }

    /// The job-independent part of [`Self::choose`] for job `i`'s class on
    /// the current free GPUs: the fastest ranked Cell within the slowdown
    /// bound that fits now, and when it is slower than the plan, when the
    /// plan's GPUs free up. Cached per class and epoch by the caller.
    /// With `work` (a deadline job), only free Cells that meet the deadline
    /// count; when none does, it waits for its plan (a re-planned job moves
    /// only to a Cell in time); when not even the plan would meet it, the
    /// fastest free Cell (job_submit's rule when no Cell is in time).
    fn class_pick(&mut self, sim: &mut dyn SimView, i: usize, view: View<'_>, ft: &mut FreeTimes, work: Option<DeadlineWork>) -> Option<ClassPick> {
        let (held, slot) = (view.held, 2 * self.plan(i).class + view.slot);
        let ranked = if self.ranked[slot].0 == self.epoch {
            self.ranked[slot].1.clone()
        } else {
            let max = self.max_gpus(sim, i);
            let offers = self.offers(sim, max, false, held);
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            let r = if offers.is_empty() { Rc::new(Vec::new()) } else { sim.times().rank_cells(&m, b, &offers, max) };
            self.ranked[slot] = (self.epoch, r.clone());
            r
        };
        let plan = &self.plan(i).ideal;
        let limit = plan.iter_s * self.opts.max_slowdown;
        let plan_t = sim.cluster().type_index(&plan.gpu_type)?;
        let fit: Vec<(&TimedCell, Shape)> = ranked
            .iter()
            .take_while(|c| c.iter_s <= limit * (1.0 + 1e-9))
            .filter_map(|c| Self::group_for(sim, c, false).map(|s| (c, s)))
            .collect();
        let cells: Vec<&TimedCell> = fit.iter().map(|(c, _)| *c).collect();
        let k = match work {
            // Not even the plan meets the deadline: the fastest Cell (job_submit's fallback).
            Some(w) if !w.met_by(plan.iter_s) => (0..cells.len()).min_by(|&a, &b| cells[a].iter_s.total_cmp(&cells[b].iter_s)),
            _ => {
                let load = self.load_view(sim, i);
                self.sized(sim, i, &cells, work, load.as_ref())
            }
        };
        let Some((c, s)) = k.map(|k| fit[k]) else { return Some(ClassPick::NoCell) };
        let (plan_iter, plan_gpus) = (plan.iter_s, plan.gpus);
        if c.iter_s > plan_iter * (1.0 + 1e-9) {
            // When the planned shape fits, not just when enough GPUs are free
            // (fragmentation: 8 free GPUs over several nodes are no 8-GPU node).
            let (nodes, per_node) = (plan.nodes, plan.gpus_per_node);
            let at = ft.earliest(sim, plan_t, plan_gpus).max(sim.earliest_fit(plan_t, nodes, per_node));
            return Some(ClassPick::Slower(s, c.iter_s, at));
        }
        Some(ClassPick::Start(s, c.iter_s))
    }
}

/// A ranked Cell as the core's sizing rule sees it.
impl Sizable for TimedCell {
    fn gpus(&self) -> u32 {
        self.gpus
    }
    fn iter_s(&self) -> f64 {
        self.iter_s
    }
    fn gpu_type(&self) -> &str {
        &self.gpu_type
    }
}

/// The core's freezing profile as a piecewise speedup for the engine.
pub fn speed_profile(p: &FreezeProfile) -> SpeedProfile {
    let mut segments = vec![(0.0, 1.0)];
    for &(prog, frac) in p.schedule.steps() {
        let factor = p.schedule.iteration_time_factor(prog, p.backward_share).max(1e-6);
        debug_assert!(frac >= 0.0);
        if prog <= 0.0 {
            segments[0].1 = 1.0 / factor;
        } else {
            segments.push((prog.min(1.0), 1.0 / factor));
        }
    }
    let penalty = if p.schedule.is_off() { 1.0 } else { p.penalty.max(1.0) };
    SpeedProfile { segments, penalty }
}

impl Policy for CellschedPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        // A reconfigured job restarts on the Cell the reconfiguration chose.
        let target = self.elastic.as_mut().and_then(|e| e.take_target(i));
        match target.or_else(|| self.ideal(sim, i)) {
            Some(ideal) => {
                let mode = match sim.job(i).spec.freeze.as_deref() {
                    Some(f) if self.opts.freeze => f.parse::<FreezeMode>().unwrap_or(FreezeMode::Off),
                    _ => FreezeMode::Off,
                };
                let model = sim.job(i).spec.model_name.clone();
                let freeze = (mode != FreezeMode::Off).then(|| {
                    let layers = sim.times().source().num_layers(&model);
                    FreezeProfile::for_mode(mode, layers)
                });
                let key = (model, sim.job(i).spec.batch_size, self.max_gpus(sim, i));
                let n = self.classes.len();
                let class = *self.classes.entry(key).or_insert(n);
                if class == self.no_cell_epoch.len() {
                    self.no_cell_epoch.push(0);
                    for _view in 0..2 {
                        self.ranked.push((0, Rc::new(Vec::new())));
                        self.picks.push((0, ClassPick::NoCell, Loss::NONE));
                    }
                }
                if self.plans.len() <= i {
                    self.plans.resize(sim.jobs().len().max(i + 1), None);
                }
                let plan_type = sim.cluster().type_index(&ideal.gpu_type).expect("a Cell's type is a cluster type");
                self.plans[i] = Some(JobPlan { ideal, freeze, class, rem_plan_s: f64::NAN, asrpt: PendingJob::new(i as u32, 0.0, 0.0), plan_type });
                true
            }
            None => false,
        }
    }

    fn on_requeue(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        if let Some(q) = &mut self.queue {
            q.remove(i as u32);
        }
        if self.admissible(sim, i) {
            self.on_arrival(sim, i);
            true
        } else {
            false
        }
    }

    fn on_arrival(&mut self, sim: &mut dyn SimView, i: usize) {
        let p = self.plan(i);
        sim.set_planned(i, (p.ideal.gpu_type.clone(), p.ideal.gpus, p.ideal.nodes));
        if let Some(f) = &p.freeze {
            sim.set_speed(i, speed_profile(f));
        }
        let plan_t = p.plan_type;
        if let Some(g) = &mut self.gate {
            g.arrive(i, plan_t, sim.now(), sim.jobs().len());
        }
        let rem = sim.remaining_s(i, self.plan(i).ideal.iter_s);
        // A pending job's remaining time is fixed while it waits (this
        // policy never preempts), so its A-SRPT key is computed once.
        let j = sim.job(i);
        let p = self.plans[i].as_mut().expect("admitted job has a plan");
        let penalty = p.freeze.as_ref().map_or(1.0, |f| if f.schedule.is_off() { 1.0 } else { f.penalty.max(1.0) });
        let done = j.progress * j.iters() * penalty;
        p.rem_plan_s = rem;
        p.asrpt = PendingJob::new(
            i as u32,
            j.spec.submission_time,
            asrpt::remaining_time_s(j.iters(), done, p.ideal.iter_s, p.freeze.as_ref()),
        )
        .with_gpus(p.ideal.gpus)
        .with_deadline(j.spec.due_s.map(|d| j.spec.submission_time + d));
        // Deadline urgency within the user's budget only (site_factor's rule).
        if p.asrpt.deadline_s.is_some() {
            let mut asrpt = p.asrpt;
            let user = j.spec.user.clone();
            let uid = self.user_id(i, user.as_deref());
            let now = sim.now();
            if i.is_multiple_of(256) {
                self.ledger.expire(now, &self.opts.deadline, &Default::default());
            }
            self.ledger.gate(uid, &mut asrpt, now, &self.opts.deadline);
            self.plans[i].as_mut().expect("admitted job has a plan").asrpt = asrpt;
        }
        let p = self.plans[i].as_ref().expect("admitted job has a plan");
        if let Some(q) = &mut self.queue {
            q.insert(p.asrpt);
        }
    }

    fn schedule(&mut self, sim: &mut dyn SimView) {
        if sim.cluster().free_total() == 0 {
            return;
        }
        // Walk the pending jobs in A-SRPT order (the incremental queue) or
        // FCFS; jobs started in the pass leave the queue after it.
        let mut queue = self.queue.take();
        if let Some(q) = &mut queue {
            q.advance(sim.now());
        }
        let mut fcfs = std::mem::take(&mut self.fcfs);
        let mut started = std::mem::take(&mut self.started);
        let mut gate = self.gate.take();
        if let Some(g) = &mut gate {
            g.begin_pass(sim.now(), sim.jobs().len());
        }
        fcfs.clear();
        started.clear();
        {
            let mut q_iter;
            let mut f_iter;
            let order: &mut dyn Iterator<Item = (usize, bool)> = match &queue {
                Some(q) => {
                    q_iter = q.iter_flagged().map(|(id, aged)| (id as usize, aged));
                    &mut q_iter
                }
                None => {
                    // FCFS: the same starvation guard, from the same aging rule.
                    let (now, cfg) = (sim.now(), &self.opts.asrpt);
                    fcfs.extend(sim.pending().iter().copied().map(|i| (i, asrpt::standing(&self.plan(i).asrpt, now, cfg).0.is_urgent())));
                    f_iter = fcfs.iter().copied();
                    &mut f_iter
                }
            };
            let mut held = vec![false; sim.cluster().types.len()];
            let mut shadow: Vec<Option<(f64, u64)>> = vec![None; held.len()];
            let mut reserved = held.clone(); // held or reserved for an aged job
            let mut ft = FreeTimes::default();
            let mut backlog = Backlog::new(sim);
            // An urgent job's claim is its reservation when the guard makes
            // one; without a guard its work is queued like any other's.
            let guarded = self.opts.aged_guard != AgedGuard::None;
            self.epoch += 1; // the cluster changed since the last pass
            if self.opts.load_sizing {
                self.wanted.clear();
                self.wanted.resize(sim.cluster().types.len(), 0);
                for i in sim.pending().iter().copied() {
                    let p = self.plans[i].as_ref().expect("admitted job has a plan");
                    self.wanted[p.plan_type] += u64::from(p.ideal.gpus);
                }
            }
            for (i, aged) in order {
                if sim.cluster().free_total() == 0 {
                    break;
                }
                let (class, plan_t, plan_gpus, rem_plan) = {
                    let p = self.plan(i);
                    (p.class, p.plan_type, p.ideal.gpus, p.rem_plan_s)
                };
                let replanning = self.opts.cell_search && self.opts.replan;
                if replanning && self.no_cell_epoch[class] == self.epoch && sim.job(i).spec.due_s.is_none() && !self.cooling(sim, i) {
                    // Same class, same free GPUs: still no acceptable Cell.
                    backlog.add(aged && guarded, plan_t, plan_gpus, rem_plan);
                    if let Some(g) = &mut gate {
                        g.wait(sim, i, plan_t, plan_gpus, declared_limit(sim, i));
                    }
                    continue;
                }
                let queue_wait = backlog.wait_s(plan_t);
                let mut no_cell = false;
                let mut chosen = self.choose(sim, i, View { held: &held, slot: 0 }, &mut ft, queue_wait, &backlog.gpu_s, aged, &mut no_cell);
                if no_cell && replanning {
                    self.no_cell_epoch[class] = self.epoch;
                }
                if let Some((shape, iter_s)) = chosen {
                    // Respect an aged job's reservation on this GPU type: backfill
                    // only if the job ends before the shadow time or fits in the
                    // GPUs left over then; else choose among the unreserved types.
                    let t = sim.cluster().groups[shape.group].type_idx;
                    if let Some((at, extra)) = &mut shadow[t] {
                        if sim.now() + sim.remaining_s(i, iter_s) <= *at {
                            // ends before the reservation starts
                        } else if shape.gpus() as u64 <= *extra {
                            *extra -= shape.gpus() as u64;
                        } else {
                            let mut unused = false;
                            chosen = self.choose(sim, i, View { held: &reserved, slot: 1 }, &mut ft, queue_wait, &backlog.gpu_s, aged, &mut unused);
                        }
                    }
                }
                if let (Some(g), Some((shape, iter_s))) = (&gate, chosen) {
                    // Between job_submit's decisions the job keeps its GPU
                    // type; at submission it takes no slower Cell than its
                    // best while the wait test is on (no forecast yet).
                    let slower = iter_s > self.plan(i).ideal.iter_s * (1.0 + 1e-9);
                    let wait_test = self.opts.wait_test && sim.job(i).spec.due_s.is_none();
                    if !g.type_allowed(i, sim.cluster().groups[shape.group].type_idx) || (g.at_submission(i) && slower && wait_test) {
                        chosen = None;
                    }
                }
                if let (Some(g), None) = (&mut gate, chosen) {
                    g.wait(sim, i, plan_t, plan_gpus, declared_limit(sim, i));
                }
                match chosen {
                    Some((shape, iter_s)) => {
                        self.epoch += 1;
                        let planned = sim.job(i).planned.clone();
                        let t = sim.cluster().groups[shape.group].type_idx;
                        *ft.used.entry(t).or_default() += shape.gpus() as u64;
                        let ty = sim.cluster().types[t].clone();
                        let ok = match &mut gate {
                            Some(g) => {
                                let limit = declared_limit(sim, i);
                                g.try_start(sim, i, shape, iter_s, limit)
                            }
                            None => sim.start(i, shape, iter_s),
                        };
                        if ok {
                            let end = self.forecast_end(sim, i);
                            sim.set_forecast_end(i, end);
                            started.push(i);
                            if let Some(w) = self.wanted.get_mut(plan_t) {
                                *w = w.saturating_sub(u64::from(plan_gpus));
                            }
                            if planned != Some((ty, shape.gpus(), shape.nodes)) {
                                sim.count_replan();
                            }
                        } else {
                            backlog.add(aged && guarded, plan_t, plan_gpus, rem_plan);
                        }
                    }
                    None if aged => {
                        backlog.add(aged && guarded, plan_t, plan_gpus, rem_plan);
                        let plan = &self.plan(i).ideal;
                        if let Some(t) = sim.cluster().type_index(&plan.gpu_type) {
                            match self.opts.aged_guard {
                                AgedGuard::None => {}
                                AgedGuard::Type => {
                                    held[t] = true;
                                    reserved[t] = true;
                                    self.epoch += 1; // the offers changed
                                }
                                AgedGuard::Shadow => {
                                    if shadow[t].is_none() && !held[t] {
                                        shadow[t] = Some(ft.shadow(sim, t, plan.gpus));
                                        reserved[t] = true;
                                        self.epoch += 1; // the reserved view changed
                                    }
                                }
                            }
                        }
                    }
                    None => backlog.add(aged && guarded, plan_t, plan_gpus, rem_plan),
                }
            }
        }
        if let Some(g) = &mut gate {
            g.end_pass(sim);
        }
        self.gate = gate;
        self.queue = queue;
        if let Some(q) = &mut self.queue {
            for &i in &started {
                q.remove(i as u32);
            }
        }
        self.fcfs = fcfs;
        self.started = started;
        if let Some(e) = &self.elastic {
            e.keep_ticking(sim);
        }
    }

    fn tick(&mut self, sim: &mut dyn SimView) {
        if let Some(mut e) = self.elastic.take() {
            e.tick(sim, &|s: &dyn SimView| self.waiting(s));
            e.keep_ticking(sim);
            self.elastic = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Sim;
    use crate::testutil::*;
    use crate::times::LinearTimes;

    /// Records the Cell each job starts on (type, GPUs, nodes), then delegates.
    struct Recording<'p> {
        inner: &'p mut CellschedPolicy,
        starts: Vec<(usize, String, u32, u32)>,
    }

    impl Policy for Recording<'_> {
        fn name(&self) -> &str {
            "recording"
        }
        fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
            self.inner.admissible(sim, i)
        }
        fn on_arrival(&mut self, sim: &mut dyn SimView, i: usize) {
            self.inner.on_arrival(sim, i)
        }
        fn on_requeue(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
            self.inner.on_requeue(sim, i)
        }
        fn schedule(&mut self, sim: &mut dyn SimView) {
            let before: Vec<bool> = sim.jobs().iter().map(|j| j.alloc.is_some()).collect();
            self.inner.schedule(sim);
            for (i, j) in sim.jobs().iter().enumerate() {
                if let (false, Some(a)) = (before[i], &j.alloc) {
                    let ty = sim.cluster().types[sim.cluster().groups[a.shape.group].type_idx].clone();
                    self.starts.push((i, ty, a.shape.gpus(), a.shape.nodes));
                }
            }
        }
    }

    /// Deadlines in the Cell choice (`core::placement::sizing::choose_in_time`,
    /// as job_submit): a job the sizing rule keeps on one GPU (the second
    /// GPU, on another node, speeds it up only 1.33x, below the default
    /// marginal efficiency 0.5) gets the faster 2-GPU Cell when only that
    /// one finishes by its deadline; without the deadline it keeps the
    /// cheaper, slower Cell; with a deadline no Cell meets, the fastest.
    #[test]
    fn a_deadline_job_gets_a_cell_that_meets_its_deadline() {
        // Two one-GPU a100 nodes; spanning two nodes costs 50%:
        // 1 GPU: 1 s/iteration; 2 GPUs over 2 nodes: 0.75 s/iteration.
        let c = || cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 2\ngpus_per_node = 1\n");
        let t = || LinearTimes::new(0.5).with("m", "a100", 1.0);
        let start_of = |due: Option<f64>| {
            let mut j = job("1", 10.0, 1000, 1, "a100", 1e6);
            j.due_s = due;
            let mut pol = CellschedPolicy::new(CellschedOptions { max_gpu_factor: 2.0, ..Default::default() }).unwrap();
            let mut rec = Recording { inner: &mut pol, starts: Vec::new() };
            let (m, jct) = run(&mut rec, c(), &[j], t());
            let (_, ty, gpus, nodes) = rec.starts.first().cloned().unwrap_or_else(|| panic!("never started: {m:?}"));
            (ty, gpus, nodes, jct[0].unwrap(), m.deadline_met_ratio)
        };
        // No deadline: the cheaper Cell, 1,000 s.
        let (ty, gpus, nodes, jct, met) = start_of(None);
        assert_eq!((ty.as_str(), gpus, nodes, met), ("a100", 1, 1, None));
        assert!((jct - 1000.0).abs() < 1e-6, "{jct}");
        // Due in 800 s: only the 2-GPU Cell (750 s) meets it.
        let (_, gpus, nodes, jct, met) = start_of(Some(800.0));
        assert_eq!((gpus, nodes, met), (2, 2, Some(1.0)));
        assert!((jct - 750.0).abs() < 1e-6, "{jct}");
        // Due in 1,200 s: the cheaper Cell meets it too and is kept.
        assert_eq!(start_of(Some(1200.0)).1, 1);
        // Due in 500 s: no Cell meets it: the fastest (job_submit's fallback).
        let (_, gpus, _, _, met) = start_of(Some(500.0));
        assert_eq!((gpus, met), (2, Some(0.0)));
    }

    /// Issue 31 item 3 in the simulator: a long deadline job passes a short
    /// honest one only while its user's deadline budget covers it (core's
    /// `DeadlineLedger::gate`, the rule site_factor applies).
    #[test]
    fn deadline_urgency_is_bounded_by_the_users_budget() {
        let order = |budget_gpu_hours: f64| {
            let blocker = job("0", 0.0, 100, 1, "a100", 1e6);
            // 10,000 s of work (2.8 GPU-hours) due in 15,000 s: urgent from submit.
            let mut long = job("1", 1.0, 10_000, 1, "a100", 1e6);
            long.due_s = Some(15_000.0);
            long.user = Some("mallory".into());
            let mut short = job("2", 1.0, 100, 1, "a100", 1e6);
            short.user = Some("alice".into());
            let deadline = DeadlineConfig { budget_gpu_hours, ..DeadlineConfig::default() };
            let mut pol = CellschedPolicy::new(CellschedOptions { deadline, ..Default::default() }).unwrap();
            let (_, jct) = run(&mut pol, a100_node(1), &[blocker, long, short], times());
            (jct[1].unwrap(), jct[2].unwrap())
        };
        // No limit: the deadline job goes first (the short one waits for it).
        let (long, short) = order(0.0);
        assert!(short > long, "long {long}, short {short}");
        // A 1 GPU-hour budget: the deadline buys nothing; shortest first.
        let (long, short) = order(1.0);
        assert!(short < long && short < 300.0, "long {long}, short {short}");
    }

    /// One policy, two hosts: the same jobs on the same free GPUs get the
    /// same Cell from the simulator's policy and from job_submit's `place()`
    /// (both call `core::placement::sizing` over the core estimator's
    /// ranking), by marginal value alone (`load-sizing` off; job_submit
    /// without a load view) and against the load (nobody waits: the job
    /// grows into the idle GPUs, `SizingRule::choose_under_load`, in both).
    #[test]
    fn simulator_and_job_submit_choose_the_same_cells() {
        use cellsched_core::config::PlacementConfig;
        use cellsched_core::estimator::Estimator;
        use cellsched_core::gpu::GpuCatalog;
        use cellsched_core::model::ModelCatalog;
        use cellsched_core::placement::{self, NodeGpus, Outcome, SubmitRequest};
        use cellsched_core::options::DlKey;
        // The job_submit test cluster: 2 x a100 (4), 2 x v100 (8), 1 x a10 (4).
        let toml = "[[group]]\ngpu_type = \"a100\"\nnodes = 2\ngpus_per_node = 4\n\
                    [[group]]\ngpu_type = \"v100\"\nnodes = 2\ngpus_per_node = 8\n\
                    [[group]]\ngpu_type = \"a10\"\nnodes = 1\ngpus_per_node = 4\n";
        let spec = crate::cluster::ClusterSpec::parse(toml, "test.toml").unwrap();
        let nodes: Vec<NodeGpus> = [("a100-1", "a100", 4), ("a100-2", "a100", 4), ("v100-1", "v100", 8), ("v100-2", "v100", 8), ("a10-1", "a10", 4)]
            .iter()
            .map(|(n, t, g)| NodeGpus { node: n.to_string(), gpu_type: t.to_string(), total: *g, free: *g })
            .collect();
        let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let jobs: Vec<(&str, u32)> = vec![("gpt__350M", 8), ("gpt__350M", 64), ("gpt__1.3B", 32), ("bert__350M", 16), ("gpt__125M", 128)];
        let configs = [
            PlacementConfig::default(),
            PlacementConfig { max_gpu_factor: 16.0, ..PlacementConfig::default() },
            PlacementConfig { max_gpu_factor: 16.0, min_marginal_efficiency: 0.0, ..PlacementConfig::default() },
            PlacementConfig { max_gpu_factor: 16.0, min_marginal_efficiency: 0.9, ..PlacementConfig::default() },
        ];
        let mut distinct = std::collections::BTreeSet::new();
        let mut grown = 0;
        let nobody_waits = placement::LoadView::new();
        let cases = configs.iter().flat_map(|c| jobs.iter().map(move |j| (c, j))).flat_map(|x| [(x, false), (x, true)]);
        for (k, ((cfg, (model, batch)), load)) in cases.enumerate() {
            // Plugin host: no GPU request, so the base is the fewest GPUs the model fits on.
            let req = SubmitRequest {
                env: vec![format!("{}={model}", DlKey::Model.env_key()), format!("{}={batch}", DlKey::Batch.env_key())],
                ..Default::default()
            };
            let Outcome::Place(p) = placement::place_under_load(&req, &nodes, cfg, &est, None, load.then_some(&nobody_waits)) else {
                panic!("{model}: not placed")
            };
            if load {
                let Outcome::Place(plain) = placement::place(&req, &nodes, cfg, &est) else { panic!("{model}: not placed") };
                grown += usize::from(p.estimate.cell.gpus > plain.estimate.cell.gpus);
            }
            // Simulator host: the trace's GPU count is that same base and the factor the same.
            let spec_j = cellsched_core::estimator::JobSpec { model: ModelCatalog::builtin().resolve(model).unwrap(), global_batch: *batch };
            let base = est
                .rank_cells(&spec_j, &placement::offers(&nodes, cfg, false), cfg.max_gpus)
                .iter()
                .map(|e| e.cell.gpus)
                .min()
                .unwrap();
            let mut t = job(&format!("j{k}"), 0.0, 10, base, "a100", 0.0);
            t.model_name = model.to_string();
            t.batch_size = *batch;
            let opts = CellschedOptions::from_config(&Config { placement: cfg.clone(), ..Config::default() });
            let opts = if load { opts } else { opts.without(&[Ablation::LoadSizing]) };
            let mut pol = CellschedPolicy::new(opts).unwrap();
            let mut rec = Recording { inner: &mut pol, starts: Vec::new() };
            let times = crate::core_times::CoreTimes::from_estimator(Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()), None);
            let mut cache = crate::times::TimeCache::new(Box::new(times));
            let mut sim = Sim::new(crate::engine::SimConfig::default(), crate::cluster::ClusterState::new(&spec), &[t], &mut cache);
            sim.run(&mut rec, None);
            distinct.insert((p.estimate.cell.gpus, p.estimate.nodes));
            let (_, ty, gpus, n) = rec.starts.first().cloned().unwrap_or_else(|| panic!("{model}: never started"));
            assert_eq!(
                (ty.as_str(), gpus, n),
                (p.estimate.cell.gpu_type.as_str(), p.estimate.cell.gpus, p.estimate.nodes),
                "{model} batch {batch}, {cfg:?}, load view {load}: simulator vs job_submit"
            );
        }
        // The scenarios exercise the rule: it picks several sizes, not one,
        // and the load view grows some jobs beyond their efficient size.
        assert!(distinct.len() >= 3, "sizes chosen: {distinct:?}");
        assert!(grown >= 2, "jobs grown into idle GPUs: {grown}");

        // Reconfiguration (issue 33): an elastic job whose efficient size is
        // one GPU (min_marginal_efficiency 0.9) starts on the one a100 GPU
        // left by stock jobs that hold the rest of the cluster until
        // 3,000 s; a short job arrives later. Every decision pass of the
        // simulator (its chooser: the knowledge's ranking, sized like a
        // start) is replayed through job_submit's side of the same rule
        // (`core::elastic::decide` with `PlacementChooser`, the estimator's
        // `ranked_for` + `choose_ranked_under_load`): same inputs, same
        // reconfigurations.
        use cellsched_core::elastic::{self, DecideContext, PlacementChooser};
        let hold = |id: &str, gpus, ty: &str| crate::trace::TraceJob { model_name: "mystery".into(), ..job(id, 0.0, 3_000, gpus, ty, 3_000.0) };
        let mut e = job("e", 1.0, 400_000, 1, "a100", 0.0);
        (e.model_name, e.batch_size, e.elastic) = ("gpt__350M".into(), 8, true);
        let mut short = job("s", 6_000.0, 2_000, 1, "a100", 0.0);
        (short.model_name, short.batch_size) = ("gpt__125M".into(), 32);
        let trace = [hold("h1", 3, "a100"), hold("h2", 4, "a100"), hold("h3", 8, "v100"), hold("h4", 8, "v100"), hold("h5", 4, "a10"), e, short];
        let efficient = Config { placement: PlacementConfig { min_marginal_efficiency: 0.9, ..PlacementConfig::default() }, ..Config::default() };
        let mut pol = CellschedPolicy::new(CellschedOptions::from_config(&efficient)).unwrap();
        pol.keep_elastic_passes();
        let times = crate::core_times::CoreTimes::from_estimator(Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()), None);
        let mut cache = crate::times::TimeCache::new(Box::new(times));
        let mut sim = Sim::new(crate::engine::SimConfig::default(), crate::cluster::ClusterState::new(&spec), &trace, &mut cache);
        let m = sim.run(&mut pol, None);
        let placement_cfg = pol.opts.placement_config();
        let (declared, elastic_cfg) = (DeclaredConfig::default(), pol.opts.elastic.clone());
        let key = |r: &elastic::Reconfig| (r.kind(), r.id(), r.for_job(), r.target().map(|t| (t.to.cell.gpu_type.clone(), t.to.cell.gpus, t.to.nodes)));
        let mut decided = Vec::new();
        for pass in pol.elastic_passes() {
            let ctx = DecideContext { cfg: &elastic_cfg, placement: &placement_cfg, declared: &declared, now: pass.now };
            let mut chooser = PlacementChooser { est: &est, ranks: None, placement: &placement_cfg };
            let plugin = elastic::decide(&pass.running, &pass.waiting, &pass.nodes, &ctx, &mut chooser);
            let (a, b): (Vec<_>, Vec<_>) = (pass.decided.iter().map(key).collect(), plugin.iter().map(key).collect());
            assert_eq!(a, b, "pass at {}: simulator vs job_submit", pass.now);
            decided.extend(a);
        }
        assert!(pol.elastic_passes().len() >= 2, "passes after the arrivals and ends");
        assert!(decided.iter().any(|d| d.0 == "grow"), "the elastic job grows once the stock jobs end: {decided:?}");
        assert_eq!(m.reconfigurations as usize, decided.len(), "every decision ran on the clock");
        assert_eq!(m.finished, m.jobs, "{m:?}");
    }

    /// One policy, two hosts, re-planning: job B's planned Cell (a100) is
    /// busy with A, a v100 is free. The simulator's policy and job_submit's
    /// `plan_moves_cached`, given the same wait (the end of A's time limit
    /// as job_submit sets it, which is Slurm's forecast; nothing queued; B's
    /// work), both move B to the v100 exactly when that is predicted to
    /// finish first (`core::placement::PlanWait`), over A's lengths on both
    /// sides of the break-even point.
    #[test]
    fn simulator_and_job_submit_make_the_same_replanning_decisions() {
        use cellsched_core::config::PlacementConfig;
        use cellsched_core::estimator::{Estimator, JobSpec};
        use cellsched_core::gpu::GpuCatalog;
        use cellsched_core::model::ModelCatalog;
        use cellsched_core::options::DlKey;
        use cellsched_core::placement::{self, NodeGpus, Outcome, PendingDl, PlanWait, SubmitRequest};
        let toml = "[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n\
                    [[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 1\n";
        let spec = crate::cluster::ClusterSpec::parse(toml, "test.toml").unwrap();
        let node = |n: &str, t: &str, free| NodeGpus { node: n.into(), gpu_type: t.into(), total: 1, free };
        let idle = vec![node("a100-1", "a100", 1), node("v100-1", "v100", 1)];
        let busy = vec![node("a100-1", "a100", 0), node("v100-1", "v100", 1)];
        let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let cfg = PlacementConfig::default();
        let (model, batch, b_iters) = ("gpt__125M", 8, 20_000u64);
        // Limits of the declared work alone (no slack, no grace): the break-even
        // point stays where the work is; whole minutes, as Slurm keeps them.
        let declared = DeclaredConfig { slack: 1.0, grace_s: 0.0, ..Default::default() };
        let req = SubmitRequest {
            env: vec![format!("{}={model}", DlKey::Model.env_key()), format!("{}={batch}", DlKey::Batch.env_key())],
            ..Default::default()
        };
        let Outcome::Place(p) = placement::place(&req, &idle, &cfg, &est) else { panic!("not placed") };
        assert_eq!(p.estimate.cell.gpu_type, "a100", "precondition: B plans on the a100");
        let d = p.estimate.to_decision();
        let job_spec = JobSpec { model: ModelCatalog::builtin().resolve(model).unwrap(), global_batch: batch };
        let b = PendingDl {
            id: 2,
            record: cellsched_core::record::DlRecord { iters: Some(b_iters), ..cellsched_core::record::DlRecord::new(d.clone()) },
            job: job_spec,
            features: None,
            deadline_work: None,
        };
        let mut outcomes = std::collections::BTreeSet::new();
        for a_iters in [2_000u64, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000] {
            // Plugin host: B pending at t = 1 (waited 0), A's end its Slurm
            // forecast: A started at 0 with the limit job_submit gave it.
            let a_limit_min = placement::bounded_limit(0, Some(a_iters), d.iter_s, &declared).expect("a limit from the declared work");
            let wait = PlanWait { plan_free_at_s: f64::from(a_limit_min) * 60.0, queue_ahead_s: 0.0, waited_s: 0.0, rem_plan_s: b_iters as f64 * d.iter_s };
            let moves = placement::plan_moves_cached(&[(&b, Some(wait))], &busy, &cfg, &declared, &est, None, 1.0);
            let plugin_moves = moves.first().map(|m| m.to.cell.gpu_type.clone());
            // Simulator host: A at 0 and B at 1, both planned on the a100.
            let mut ja = job("a", 0.0, a_iters, 1, "a100", 0.0);
            let mut jb = job("b", 1.0, b_iters, 1, "a100", 0.0);
            for j in [&mut ja, &mut jb] {
                j.model_name = model.to_string();
                j.batch_size = batch;
            }
            let mut pol = CellschedPolicy::new(CellschedOptions { max_gpu_factor: 1.0, declared: declared.clone(), ..Default::default() }).unwrap();
            let mut rec = Recording { inner: &mut pol, starts: Vec::new() };
            let times = crate::core_times::CoreTimes::from_estimator(Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()), None);
            let mut cache = crate::times::TimeCache::new(Box::new(times));
            let mut sim = Sim::new(crate::engine::SimConfig::default(), crate::cluster::ClusterState::new(&spec), &[ja, jb], &mut cache);
            sim.run(&mut rec, None);
            let b_start = rec.starts.iter().find(|s| s.0 == 1).cloned().expect("B started");
            let sim_moves = (b_start.1 != "a100").then(|| b_start.1.clone());
            assert_eq!(plugin_moves, sim_moves, "A of {a_iters} iterations: job_submit vs simulator");
            outcomes.insert(sim_moves);
        }
        assert_eq!(outcomes.len(), 2, "both outcomes occur: {outcomes:?}");
    }

    /// A user's fixed count (`fixed_counts`, untyped `--gres=gpu:N`) is
    /// kept; as a hint, the sizing rule grows the job into the idle node
    /// (perfect scaling: marginal efficiency 1).
    #[test]
    fn fixed_counts_keep_the_users_gpu_count() {
        let gpus_of = |fixed: bool| {
            let mut pol = CellschedPolicy::new(CellschedOptions { max_gpu_factor: 2.0, fixed_counts: fixed, ..Default::default() }).unwrap();
            let mut rec = Recording { inner: &mut pol, starts: Vec::new() };
            run(&mut rec, a100_node(4), &[job("1", 0.0, 100, 2, "a100", 1e6)], times());
            rec.starts[0].2
        };
        assert_eq!(gpus_of(false), 4);
        assert_eq!(gpus_of(true), 2);
    }

    /// Started through Slurm (`SlurmGate`): a pending job's GPU type
    /// changes only at job_submit's decisions. X holds the a100 until
    /// 1,000 s. Z (a model known only on v100) takes the v100 until 50.5 s.
    /// Y plans on the a100 and waits; the v100 frees at 50.5 s and Y (200 s
    /// there, well before the a100 frees) moves at once when the policy
    /// starts jobs itself, at the next re-planning pass (100 s) through
    /// Slurm. W arrives when only the slower v100 is free: the policy starts
    /// it there at once; job_submit takes no slower Cell at submission, so
    /// through Slurm it moves at the first re-planning pass.
    #[test]
    fn through_slurm_a_pending_job_changes_type_only_at_replanning_passes() {
        let t = || LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0).with("n", "v100", 2.0);
        let mut z = job("z", 0.5, 25, 1, "v100", 100.0);
        z.model_name = "n".into();
        let y_jobs = [job("x", 0.0, 1000, 1, "a100", 2000.0), z, job("y", 1.0, 100, 1, "a100", 500.0)];
        let w_jobs = [job("x", 0.0, 1000, 1, "a100", 2000.0), job("w", 1.0, 100, 1, "a100", 500.0)];
        let last = |jobs: &[crate::trace::TraceJob], gate: Option<SlurmGate>| {
            let mut pol = CellschedPolicy::new(CellschedOptions { max_gpu_factor: 1.0, started_by_slurm: gate, ..Default::default() }).unwrap();
            let mut rec = Recording { inner: &mut pol, starts: Vec::new() };
            let (_, jct) = run(&mut rec, two_types(), jobs, t());
            let k = jobs.len() - 1;
            let s = rec.starts.iter().find(|s| s.0 == k).cloned().expect("started");
            (s.1, jct[k].unwrap())
        };
        let gate = || Some(SlurmGate::new(None, Some(100.0)));
        for (jobs, itself) in [(&y_jobs[..], 249.5), (&w_jobs[..], 200.0)] {
            let (ty, jct) = last(jobs, None);
            assert_eq!(ty, "v100");
            assert!((jct - itself).abs() < 1e-6, "{jct}");
            let (ty, jct) = last(jobs, gate());
            assert_eq!(ty, "v100");
            assert!((jct - 299.0).abs() < 1e-6, "{jct}");
        }
    }

    fn two_types() -> crate::cluster::ClusterState {
        cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 1\n")
    }

    #[test]
    fn srpt_runs_short_job_first() {
        // One GPU busy with A until 10. Then B (100 s, earlier) and C (5 s) wait:
        // A-SRPT starts C first: C 10..15, B 15..115.
        let jobs = [job("a", 0.0, 10, 1, "a100", 0.0), job("b", 1.0, 100, 1, "a100", 0.0), job("c", 2.0, 5, 1, "a100", 0.0)];
        let (m, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(10.0), Some(114.0), Some(13.0)]);
        assert_eq!(m.replans, 0);
        let fcfs = CellschedOptions::default().without(&[Ablation::Srpt]);
        let (_, jct) = run(&mut CellschedPolicy::new(fcfs).unwrap(), a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(10.0), Some(109.0), Some(113.0)]);
    }

    #[test]
    fn cell_search_uses_the_free_type_and_counts_replans() {
        // Both jobs ask for v100 (2 s/iter); a100 (1 s/iter) is the best Cell.
        // A gets a100 (its plan) at 0. B (t=1) plans a100 too, but a100 is
        // busy until 100 and v100 finishes B by 21 < 110: B re-plans to v100.
        let jobs = [job("a", 0.0, 100, 1, "v100", 0.0), job("b", 1.0, 10, 1, "v100", 0.0)];
        let (m, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(20.0)]);
        assert_eq!(m.replans, 1);
        // No re-planning: B waits for a100 (100..110).
        let o = CellschedOptions::default().without(&[Ablation::Replan]);
        let (m, jct) = run(&mut CellschedPolicy::new(o).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(109.0)]);
        assert_eq!(m.replans, 0);
        // No Cell search: both on v100 as requested: A 0..200, B 200..220.
        let o = CellschedOptions::default().without(&[Ablation::CellSearch]);
        let (_, jct) = run(&mut CellschedPolicy::new(o).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(200.0), Some(219.0)]);
    }

    /// The defaults with no time limits from declared work (`[declared]
    /// policy = "off"`): trace jobs without a declared limit are then
    /// forecast to end at their predicted ends, which keeps hand
    /// computations in seconds.
    fn predicted_ends() -> CellschedOptions {
        CellschedOptions { declared: DeclaredConfig { policy: cellsched_core::declared::OverrunPolicy::Off, ..Default::default() }, ..Default::default() }
    }

    #[test]
    fn waits_for_the_planned_cell_when_that_finishes_sooner() {
        // A (a100, 0..100). B (t=1, 100 iters) plans a100: v100 would finish at
        // 201, waiting finishes at 200: B waits.
        let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 1.0, 100, 1, "a100", 0.0)];
        let (m, jct) = run(&mut CellschedPolicy::new(predicted_ends()).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(199.0)]);
        assert_eq!(m.replans, 0);
    }

    /// slurmctld forecasts a running job's end at the end of its time limit
    /// (Slurm's backfill), and job_submit's wait test reads that forecast:
    /// the simulator waits for a busy planned Cell only when the limit of
    /// the job holding it says it frees up in time.
    #[test]
    fn a_running_job_is_forecast_to_end_at_its_time_limit() {
        // A (a100, 50 iters: 0..50); B (t=1, 100 iters) plans a100; v100
        // would finish B at 1 + 200 = 201.
        let jobs = |a_limit: f64| [job("a", 0.0, 50, 1, "a100", a_limit), job("b", 1.0, 100, 1, "a100", 0.0)];
        // A declared 60 s (1 minute): a100 forecast free at 60, B would
        // finish there at 160 < 201: B waits and runs 50..150.
        let (m, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), two_types(), &jobs(60.0), times());
        assert_eq!(jct, vec![Some(50.0), Some(149.0)]);
        assert_eq!(m.replans, 0);
        // No declared limit: job_submit gives A 50 s x slack 3 + 1,800 s
        // grace = 33 minutes, so the a100 is forecast busy until 1,980: B
        // takes the free v100 at 1 (1..201).
        let (m, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), two_types(), &jobs(0.0), times());
        assert_eq!(jct, vec![Some(50.0), Some(200.0)]);
        assert_eq!(m.replans, 1);
        // Forecasting by predicted ends instead, B waits for A's predicted end.
        let (_, jct) = run(&mut CellschedPolicy::new(predicted_ends()).unwrap(), two_types(), &jobs(0.0), times());
        assert_eq!(jct, vec![Some(50.0), Some(149.0)]);
    }

    #[test]
    fn without_the_wait_test_a_slower_free_cell_is_taken_at_once() {
        // As above, but job_submit's re-planning rule: B takes the free v100
        // (2x slower, within the bound) at t=1 instead of waiting: 1..201.
        let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 1.0, 100, 1, "a100", 0.0)];
        let o = CellschedOptions { wait_test: false, ..Default::default() };
        let (m, jct) = run(&mut CellschedPolicy::new(o).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(200.0)]);
        assert_eq!(m.replans, 1);
        // Beyond the slowdown bound it still waits.
        let o = CellschedOptions { wait_test: false, max_slowdown: 1.5, ..Default::default() };
        let (_, jct) = run(&mut CellschedPolicy::new(o).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(199.0)]);
    }

    #[test]
    fn takes_a_slower_free_type_when_the_fast_queue_is_long() {
        // a100 1 s/iter, v100 2.5 s/iter for m; x runs only on v100. One GPU
        // of each. A (m, 14 iters) holds a100 0..14, V (x, 10 iters) holds
        // v100 0..10. B, C, D (m, 40 iters: 40 s on a100, 100 s on v100)
        // arrive at 1, 2, 3 and wait. At t=10 v100 frees up; in A-SRPT order
        // (ties by submission) waiting for a100 means: A's end (14) + the
        // work queued ahead on a100 + 40 s:
        //   B: 14 + 0 + 40 = 54 < 10 + 100 = 110: waits (backlog 40 s);
        //   C: 14 + 40 + 40 = 94 < 110: waits (backlog 80 s);
        //   D: 14 + 80 + 40 = 134 > 110: starts on v100, 10..110 (JCT 107).
        // B runs on a100 14..54 (JCT 53), C 54..94 (JCT 92).
        let t = || LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.5).with("x", "v100", 1.0);
        let mut v = job("v", 0.0, 10, 1, "v100", 0.0);
        v.model_name = "x".into();
        let jobs = [
            job("a", 0.0, 14, 1, "a100", 0.0),
            v,
            job("b", 1.0, 40, 1, "a100", 0.0),
            job("c", 2.0, 40, 1, "a100", 0.0),
            job("d", 3.0, 40, 1, "a100", 0.0),
        ];
        let (m, jct) = run(&mut CellschedPolicy::new(predicted_ends()).unwrap(), two_types(), &jobs, t());
        assert_eq!(jct, vec![Some(14.0), Some(10.0), Some(53.0), Some(92.0), Some(107.0)]);
        assert_eq!(m.replans, 1);
        // Ignoring the queue (each job sees only A's end, 14 + 40 = 54 < 110)
        // all three would wait at t=10 and v100 would stay idle.
    }

    #[test]
    fn slowdown_bound_makes_jobs_wait_for_a_good_cell() {
        // v100 is 8x slower for m here (bound 6x): B waits for a100 although
        // v100 would finish it sooner (81 < 1010).
        let t = || LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 8.0);
        let jobs = [job("a", 0.0, 1000, 1, "a100", 0.0), job("b", 1.0, 10, 1, "a100", 0.0)];
        let (_, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), two_types(), &jobs, t());
        assert_eq!(jct, vec![Some(1000.0), Some(1009.0)]);
        let o = CellschedOptions { max_slowdown: 10.0, ..Default::default() };
        let (_, jct) = run(&mut CellschedPolicy::new(o).unwrap(), two_types(), &jobs, t());
        assert_eq!(jct, vec![Some(1000.0), Some(80.0)]);
    }

    #[test]
    fn freezing_speeds_up_opted_in_jobs() {
        let mut j = job("a", 0.0, 100, 1, "a100", 0.0);
        j.freeze = Some("auto".into());
        let (_, on) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), a100_node(1), &[j.clone()], times());
        let off = CellschedOptions::default().without(&[Ablation::Freeze]);
        let (_, no) = run(&mut CellschedPolicy::new(off).unwrap(), a100_node(1), &[j], times());
        assert_eq!(no[0], Some(100.0));
        let p = FreezeProfile::for_mode(FreezeMode::Auto, 0);
        let expect = p.remaining_time(100.0, 0.0, 1.0);
        assert!((on[0].unwrap() - expect).abs() < 1e-6 && expect < 100.0, "{on:?} vs {expect}");
    }

    #[test]
    fn aged_guards_hand_computed() {
        // One a100 node, 4 GPUs; aging bound 10 s; requested Cells only.
        // A (2 GPUs, 50 s) runs 0..50. B (4 GPUs, 25 s, t=1) waits and ages
        // at 11. C (2 GPUs, 500 s, t=20) and D (1 GPU, 10 s, t=21) arrive.
        let jobs = [
            job("a", 0.0, 100, 2, "a100", 0.0),
            job("b", 1.0, 100, 4, "a100", 0.0),
            job("c", 20.0, 1000, 2, "a100", 0.0),
            job("d", 21.0, 10, 1, "a100", 0.0),
        ];
        let opts = |g| {
            let mut o = CellschedOptions { aged_guard: g, ..predicted_ends() }.without(&[Ablation::CellSearch]);
            o.asrpt.aging_bound_s = 10.0;
            o.asrpt.aging_factor = 0.0; // the bound alone
            o
        };
        let run_with = |o: CellschedOptions| run(&mut CellschedPolicy::new(o).unwrap(), a100_node(4), &jobs, times()).1;
        // Shadow: B's reservation is 4 GPUs at 50. C (ends 520) is held back;
        // D (ends 31) backfills. B 50..75, C 75..575.
        assert_eq!(run_with(opts(AgedGuard::Shadow)), vec![Some(50.0), Some(74.0), Some(555.0), Some(10.0)]);
        // Type: a100 is closed while B waits, so D waits too: B 50..75, D and C from 75.
        assert_eq!(run_with(opts(AgedGuard::Type)), vec![Some(50.0), Some(74.0), Some(555.0), Some(64.0)]);
        // None: C takes the free half at 20, D runs 50..60, B only after C (520..545).
        assert_eq!(run_with(opts(AgedGuard::None)), vec![Some(50.0), Some(544.0), Some(500.0), Some(39.0)]);
        // The `aging` ablation switches the guard off entirely.
        assert_eq!(run_with(opts(AgedGuard::Shadow).without(&[Ablation::Aging])), vec![Some(50.0), Some(544.0), Some(500.0), Some(39.0)]);
        // Under FCFS the same guard applies (B is first anyway; C waits, D backfills).
        assert_eq!(run_with(opts(AgedGuard::Shadow).without(&[Ablation::Srpt])), vec![Some(50.0), Some(74.0), Some(555.0), Some(10.0)]);
        assert!("bogus".parse::<AgedGuard>().unwrap_err().to_string().contains("bogus"));
    }

    #[test]
    fn deadline_job_moves_ahead_when_its_slack_is_small() {
        // One a100 GPU. A (100 s) runs 0..100. B (10 s, t=1) and D (50 s,
        // t=2, due 154 s after submission: deadline 156) wait. At t=100 D's
        // slack is 156 - 100 - 50 = 6 <= 1 x 50: D is urgent, runs 100..150
        // (met), B 150..160. Without deadline urgency (slack factor 0, D
        // urgent only once past 106) SRPT runs B 100..110, D 110..160: missed.
        let mut d = job("d", 2.0, 50, 1, "a100", 0.0);
        d.due_s = Some(154.0);
        let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 1.0, 10, 1, "a100", 0.0), d];
        let (m, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(159.0), Some(148.0)]);
        assert_eq!((m.deadline_jobs, m.deadline_met_ratio), (1, Some(1.0)));
        let mut o = CellschedOptions::default();
        o.asrpt.deadline_slack_factor = 0.0;
        let (m, jct) = run(&mut CellschedPolicy::new(o).unwrap(), a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(109.0), Some(158.0)]);
        assert_eq!(m.deadline_met_ratio, Some(0.0));
    }

    #[test]
    fn overloaded_synthetic_run_is_deterministic_and_complete() {
        // Long queues on a two-type cluster exercise the per-class caches
        // (their debug assertions compare skips with the full check).
        use crate::core_times::CoreTimes;
        use crate::synth::{generate, SynthConfig};
        use crate::{ClusterSpec, ClusterState, Sim, SimConfig, TimeCache};
        let spec = ClusterSpec::parse("[[group]]\ngpu_type = \"a100\"\nnodes = 2\ngpus_per_node = 8\n[[group]]\ngpu_type = \"v100\"\nnodes = 2\ngpus_per_node = 8\n", "c").unwrap();
        let mut t = TimeCache::new(Box::new(CoreTimes::new(&spec, None).unwrap()));
        let jobs = generate(&SynthConfig { jobs: 400, seed: 3, load: 1.5, due_share: 0.0, elastic_share: 0.0 }, &spec, &mut t).unwrap();
        let mut once = || {
            let mut p = CellschedPolicy::new(CellschedOptions::default()).unwrap();
            let mut sim = Sim::new(SimConfig::default(), ClusterState::new(&spec), &jobs, &mut t);
            let m = sim.run(&mut p, None);
            (m.finished, m.avg_jct_s, m.avg_queue_s, m.replans)
        };
        let a = once();
        assert_eq!(a, once());
        assert_eq!(a.0, 400);
        assert!(a.2 > 0.0, "the test needs queueing: {a:?}");
    }

    /// One configuration for both hosts: every `[placement]` and
    /// `[ordering]` knob either drives the simulator's policy exactly or is
    /// named as slurmctld plumbing. The destructuring breaks the build when
    /// a knob is added, so a new one cannot be forgotten here.
    #[test]
    fn options_follow_every_knob_of_the_plugins_configuration() {
        use cellsched_core::config::{OrderingConfig, PlacementConfig};
        let check = |cfg: &Config| {
            let o = CellschedOptions::from_config(cfg);
            let PlacementConfig {
                enabled,
                replan,
                replan_interval_s: _, // the simulator re-plans at every pass
                replan_max_slowdown,
                replan_wait_test,
                max_gpus,
                max_gpu_factor,
                min_marginal_efficiency,
                load_sizing,
                allowed_gpu_types,
                deadline_policy: _, // a submit-time refusal
                replan_min_gain,
                replan_cooldown_s,
            } = cfg.placement.clone();
            assert_eq!((o.replan_min_gain, o.replan_cooldown_s), (replan_min_gain, replan_cooldown_s));
            assert_eq!(o.cell_search, enabled);
            assert_eq!(o.replan, replan);
            assert_eq!(o.max_slowdown, replan_max_slowdown);
            assert_eq!(o.wait_test, replan_wait_test);
            assert_eq!(o.max_gpus, max_gpus);
            assert_eq!(o.max_gpu_factor, max_gpu_factor);
            assert_eq!(o.min_marginal_efficiency, min_marginal_efficiency);
            assert_eq!(o.allowed_gpu_types, allowed_gpu_types);
            assert_eq!(o.load_sizing, load_sizing);
            let OrderingConfig {
                enabled,
                aging_bound_s,
                aging_factor,
                rank_by,
                deadline_slack_factor,
                aged_lane,
                site_factor_max: _,     // the site factor's scale
                default_remaining_s: _, // slurmctld jobs without known work; trace jobs declare theirs
                rank_interval_s: _,     // the ranking thread's period
                release_gres_select: _, // Slurm memory housekeeping
            } = cfg.ordering.clone();
            assert_eq!(o.srpt, enabled);
            assert_eq!(
                (o.asrpt.aging_bound_s, o.asrpt.aging_factor, o.asrpt.rank_by, o.asrpt.deadline_slack_factor, o.asrpt.aged_lane),
                (aging_bound_s, aging_factor, rank_by, deadline_slack_factor, aged_lane)
            );
            assert_eq!(o.asrpt, cellsched_core::ordering::asrpt_config(&cfg.ordering), "site_factor's A-SRPT settings");
            // [elastic]: every knob drives the simulator's reconfiguration
            // (decide at interval_s, bounds and costs inside core::elastic).
            let cellsched_core::config::ElasticConfig {
                enabled,
                interval_s,
                max_per_hour,
                min_run_s,
                grace_s,
                restart_cost_s,
                checkpoint_write_gbs,
                checkpoint_read_gbs,
                start_s,
                start_s_per_bparam,
                min_gain,
                preempt_ratio,
                grow_margin,
            } = cfg.elastic.clone();
            let e = &o.elastic;
            assert_eq!(
                (e.enabled, e.interval_s, e.max_per_hour, e.min_run_s, e.grace_s),
                (enabled, interval_s, max_per_hour, min_run_s, grace_s)
            );
            assert_eq!(
                (e.restart_cost_s, e.checkpoint_write_gbs, e.checkpoint_read_gbs, e.start_s, e.min_gain, e.preempt_ratio),
                (restart_cost_s, checkpoint_write_gbs, checkpoint_read_gbs, start_s, min_gain, preempt_ratio)
            );
            assert_eq!((e.grow_margin, e.start_s_per_bparam), (grow_margin, start_s_per_bparam));
            assert_eq!(CellschedPolicy::new(o.clone()).unwrap().elastic.is_some(), enabled);
            // [declared]: the time limits job_submit sets are where slurmctld
            // expects running jobs to end (CellschedPolicy::forecast_end).
            let DeclaredConfig {
                policy,
                slack,
                grace_s,
                distrust_s: _, // whose declarations rank jobs; trace jobs are all trusted
            } = cfg.declared.clone();
            assert_eq!((o.declared.policy, o.declared.slack, o.declared.grace_s), (policy, slack, grace_s));
            o
        };
        // Without a file: exactly the plugins' defaults (issue: --max-gpu-factor was 1 here, 4 there).
        let d = check(&Config::default());
        assert_eq!(d.max_gpu_factor, PlacementConfig::default().max_gpu_factor);
        assert_eq!(d.elastic, cellsched_core::config::ElasticConfig::default());
        assert_eq!((d.replan_min_gain, d.replan_cooldown_s), (0.05, 300));
        assert_eq!(CellschedOptions::default().max_gpu_factor, 4.0);
        // Every knob changed from its default.
        let text = "[placement]\nenabled = false\nreplan = false\nreplan_max_slowdown = 2.5\nreplan_wait_test = false\n\
                    max_gpus = 8\nmax_gpu_factor = 2.0\nmin_marginal_efficiency = 0.25\nload_sizing = false\nallowed_gpu_types = [\"v100\"]\n\
                    replan_min_gain = 0.2\nreplan_cooldown_s = 60\n\
                    [ordering]\nenabled = false\naging_bound_s = 100.0\naging_factor = 3.0\nrank_by = \"time\"\n\
                    deadline_slack_factor = 2.0\naged_lane = 3\n\
                    [elastic]\nenabled = false\ninterval_s = 30\nmax_per_hour = 5\nmin_run_s = 60\ngrace_s = 30\nrestart_cost_s = 20.0\n\
                    checkpoint_write_gbs = 2.0\ncheckpoint_read_gbs = 3.0\nstart_s = 10.0\nstart_s_per_bparam = 5.0\nmin_gain = 1.0\npreempt_ratio = 0.25\ngrow_margin = 0.1\n\
                    [declared]\npolicy = \"off\"\nslack = 2.0\ngrace_s = 60.0\n";
        let cfg = Config::from_toml_str(text, "test.toml").unwrap();
        let o = check(&cfg);
        assert_eq!((o.replan_min_gain, o.replan_cooldown_s, o.elastic.interval_s, o.elastic.preempt_ratio), (0.2, 60, 30, 0.25));
        assert_eq!((o.declared.slack, o.declared.grace_s), (2.0, 60.0));
        assert_eq!(o.name(), "cellsched-no-cell-search-no-srpt-no-replan-no-load-sizing-no-elastic");
        assert!(!o.wait_test && o.max_gpus == 8 && o.allowed_gpu_types == ["v100"] && o.elastic.grow_margin == 0.1 && o.elastic.start_s_per_bparam == 5.0);
    }

    #[test]
    fn ablation_names_and_parsing() {
        let o = CellschedOptions::default().without(&Ablation::parse_list("srpt, freeze").unwrap());
        assert_eq!(o.name(), "cellsched-no-srpt-no-freeze");
        assert!(Ablation::parse_list("srpt,bogus").unwrap_err().to_string().contains("bogus"));
    }
}
