//! `cellsched`: the product's policy, running the core's decision code.
//!
//! - **Cell search** (`Estimator::rank_cells` through [`crate::times`]):
//!   among the free GPUs of every type, the fastest feasible Cell using at
//!   most `max_gpu_factor` x the requested GPUs, accepted if its iteration
//!   time is within `max_slowdown` x the job's best Cell on an idle cluster
//!   and if starting there now is predicted to finish no later than waiting
//!   for the planned Cell (earliest time enough GPUs of its type free up, from
//!   running jobs' predicted ends, plus its run time there) — otherwise the
//!   job waits. Off: the requested type/count.
//! - **A-SRPT** (`core::asrpt::order`): pending jobs by predicted remaining
//!   time on their best Cell (`core::asrpt::remaining_time_s`, freezing
//!   included), aged jobs first. When an aged job cannot start, its planned
//!   GPU type is held for it for the rest of the pass (starvation guard). Off: FCFS.
//! - **Placement**: the Cell's shape on the fewest nodes, best-fit nodes.
//! - **Freezing** (`core::freezing`): jobs that opted in (trace `freeze`
//!   column) run with the mode's schedule and iteration penalty.
//! - **Re-planning**: a pending job's Cell is re-chosen at every pass from the
//!   free GPUs then; each start on a Cell other than the one planned at
//!   submission counts as a re-plan. Off: the job waits for its submission-time Cell.
//!
//! The simulator knows each job's true iteration count (the trace's
//! `num_iteration`), i.e. it assumes the declared or predicted iterations are exact.
use super::{iter_on, requested_admissible, Policy};
use crate::cluster::Shape;
use crate::engine::Sim;
use crate::error::SimError;
use crate::progress_model::SpeedProfile;
use crate::times::{CellChoice, Offer};
use cellsched_core::asrpt::{self, AsrptConfig, PendingJob};
use cellsched_core::freezing::{FreezeMode, FreezeProfile};
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
}

impl Ablation {
    /// All components, in table order.
    pub const ALL: [Ablation; 4] = [Ablation::CellSearch, Ablation::Srpt, Ablation::Replan, Ablation::Freeze];
    /// Text form (`cell-search`, `srpt`, `replan`, `freeze`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Ablation::CellSearch => "cell-search",
            Ablation::Srpt => "srpt",
            Ablation::Replan => "replan",
            Ablation::Freeze => "freeze",
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
                    .ok_or_else(|| SimError::invalid("ablation", x, "cell-search, srpt, replan or freeze"))
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
    /// Accept a free Cell up to this many times slower than the job's best (>= 1).
    pub max_slowdown: f64,
    /// Cells may use up to this many times the requested GPU count (>= 1).
    pub max_gpu_factor: f64,
    /// A-SRPT settings.
    pub asrpt: AsrptConfig,
}

impl Default for CellschedOptions {
    fn default() -> Self {
        CellschedOptions {
            cell_search: true,
            srpt: true,
            replan: true,
            freeze: true,
            max_slowdown: 6.0,
            max_gpu_factor: 1.0,
            asrpt: AsrptConfig::default(),
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
            }
        }
        self
    }
    /// `cellsched` plus `-no-X` for each component switched off.
    pub fn name(&self) -> String {
        let mut n = String::from("cellsched");
        for (on, a) in [(self.cell_search, "cell-search"), (self.srpt, "srpt"), (self.replan, "replan"), (self.freeze, "freeze")] {
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
    ideal: CellChoice,
    /// Freezing profile when the job freezes.
    freeze: Option<FreezeProfile>,
    /// Jobs of one class (model, batch, GPU cap) see the same Cells.
    class: usize,
}

/// GPUs of each type started during the current pass (not yet in the
/// engine's view of when GPUs free up).
#[derive(Default)]
struct FreeTimes {
    used: HashMap<usize, u64>,
}

impl FreeTimes {
    /// Earliest time `gpus` GPUs of type `t` are free (GPU counts only),
    /// from running jobs' predicted ends.
    fn earliest(&mut self, sim: &Sim<'_>, t: usize, gpus: u32) -> f64 {
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
    ranked: Vec<(u64, Rc<Vec<CellChoice>>)>,
    /// Bumped whenever the free GPUs (or held types) change.
    epoch: u64,
}

impl CellschedPolicy {
    /// A policy with the given options (validated).
    pub fn new(opts: CellschedOptions) -> Result<Self, SimError> {
        if !(opts.max_slowdown.is_finite() && opts.max_slowdown >= 1.0) {
            return Err(SimError::invalid("max slowdown", opts.max_slowdown.to_string(), "a number >= 1"));
        }
        if !(opts.max_gpu_factor.is_finite() && opts.max_gpu_factor >= 1.0) {
            return Err(SimError::invalid("max GPU factor", opts.max_gpu_factor.to_string(), "a number >= 1"));
        }
        opts.asrpt.validate()?;
        Ok(CellschedPolicy { name: opts.name(), opts, plans: Vec::new(), classes: HashMap::new(), no_cell_epoch: Vec::new(), ranked: Vec::new(), epoch: 1 })
    }

    fn plan(&self, i: usize) -> &JobPlan {
        self.plans[i].as_ref().expect("admitted job has a plan")
    }

    fn max_gpus(&self, sim: &Sim<'_>, i: usize) -> u32 {
        ((sim.job(i).spec.num_gpu as f64) * self.opts.max_gpu_factor).floor().max(1.0) as u32
    }

    /// Offers of the free GPUs (or of an idle cluster), skipping `held` types.
    ///
    /// `rank_cells` offers Cells of at most one node (up to the largest free
    /// count) or of whole free nodes, so each group is summarized in that
    /// canonical form — the fully free nodes a Cell of `max_gpus` could use,
    /// else the node with the most free GPUs — which gives the same ranking
    /// and lets [`crate::times::TimeCache`] hit far more often.
    fn offers(sim: &Sim<'_>, max_gpus: u32, idle: bool, held: &[bool]) -> Vec<Offer> {
        let c = sim.cluster();
        c.groups
            .iter()
            .filter(|g| !held[g.type_idx])
            .filter_map(|g| {
                let gpn = g.spec.gpus_per_node;
                let cap = max_gpus.div_ceil(gpn) as usize;
                let full = if idle { g.spec.nodes as usize } else { g.nodes_with_free(gpn) }.min(cap);
                let free = if full > 0 {
                    vec![gpn; full]
                } else {
                    g.top_free(1)
                };
                (!free.is_empty()).then(|| Offer { gpu_type: g.spec.gpu_type.clone(), gpus_per_node: gpn, free_gpus_per_node: free })
            })
            .collect()
    }

    /// The group where a choice's shape fits now (or on an idle cluster).
    fn group_for(sim: &Sim<'_>, c: &CellChoice, idle: bool) -> Option<Shape> {
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
    fn ideal(&self, sim: &mut Sim<'_>, i: usize) -> Option<CellChoice> {
        if self.opts.cell_search {
            let max = self.max_gpus(sim, i);
            let held = vec![false; sim.cluster().types.len()];
            let offers = Self::offers(sim, max, true, &held);
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            let ranked = sim.times().rank_cells(&m, b, &offers, max);
            ranked.iter().find(|c| Self::group_for(sim, c, true).is_some()).cloned()
        } else {
            if !requested_admissible(sim, i) {
                return None;
            }
            let j = sim.job(i);
            let (t, g) = (j.req_type?, j.spec.num_gpu);
            let shape = sim.cluster().place_idle(t, g)?;
            let iter_s = iter_on(sim, i, shape)?;
            Some(CellChoice { gpu_type: sim.cluster().types[t].clone(), gpus: g, nodes: shape.nodes, gpus_per_node: shape.gpus_per_node, iter_s })
        }
    }

    /// The Cell to start job `i` on now, if any.
    /// The Cell to start job `i` on now, if any; `no_cell` is set when no
    /// free Cell is acceptable for the job's whole class (not just this job).
    fn choose(&mut self, sim: &mut Sim<'_>, i: usize, held: &[bool], ft: &mut FreeTimes, no_cell: &mut bool) -> Option<(Shape, f64)> {
        let plan = &self.plan(i).ideal;
        if !self.opts.cell_search || !self.opts.replan {
            // The planned Cell (requested one when Cell search is off).
            let t = sim.cluster().type_index(&plan.gpu_type)?;
            if held[t] {
                return None;
            }
            let s = if self.opts.cell_search {
                Self::group_for(sim, plan, false)?
            } else {
                sim.cluster().place_now(t, plan.gpus)?
            };
            let it = if s.nodes == plan.nodes { plan.iter_s } else { iter_on(sim, i, s)? };
            return Some((s, it));
        }
        let class = self.plan(i).class;
        let ranked = if self.ranked[class].0 == self.epoch {
            self.ranked[class].1.clone()
        } else {
            let max = self.max_gpus(sim, i);
            let offers = Self::offers(sim, max, false, held);
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            let r = if offers.is_empty() { Rc::new(Vec::new()) } else { sim.times().rank_cells(&m, b, &offers, max) };
            self.ranked[class] = (self.epoch, r.clone());
            r
        };
        let plan = &self.plan(i).ideal;
        let limit = plan.iter_s * self.opts.max_slowdown;
        let plan_t = sim.cluster().type_index(&plan.gpu_type)?;
        let mut wait_done: Option<f64> = None;
        for c in ranked.iter().take_while(|c| c.iter_s <= limit * (1.0 + 1e-9)) {
            let Some(s) = Self::group_for(sim, c, false) else { continue };
            if c.iter_s > plan.iter_s * (1.0 + 1e-9) {
                // Slower than the plan: only if it beats waiting for the plan.
                let wait = *wait_done.get_or_insert_with(|| {
                    ft.earliest(sim, plan_t, plan.gpus) + sim.remaining_s(i, plan.iter_s)
                });
                if sim.now() + sim.remaining_s(i, c.iter_s) > wait {
                    return None;
                }
            }
            return Some((s, c.iter_s));
        }
        *no_cell = wait_done.is_none();
        None
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

    fn admissible(&mut self, sim: &mut Sim<'_>, i: usize) -> bool {
        match self.ideal(sim, i) {
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
                    self.ranked.push((0, Rc::new(Vec::new())));
                }
                if self.plans.len() <= i {
                    self.plans.resize(sim.jobs().len().max(i + 1), None);
                }
                self.plans[i] = Some(JobPlan { ideal, freeze, class });
                true
            }
            None => false,
        }
    }

    fn on_arrival(&mut self, sim: &mut Sim<'_>, i: usize) {
        let p = self.plan(i);
        let j = sim.job_mut(i);
        j.planned = Some((p.ideal.gpu_type.clone(), p.ideal.gpus, p.ideal.nodes));
        if let Some(f) = &p.freeze {
            j.speed = speed_profile(f);
        }
    }

    fn schedule(&mut self, sim: &mut Sim<'_>) {
        if sim.cluster().free_total() == 0 {
            return;
        }
        let pending: Vec<usize> = sim.pending().collect();
        let order: Vec<usize> = if self.opts.srpt {
            let jobs: Vec<PendingJob> = pending
                .iter()
                .map(|&i| {
                    let j = sim.job(i);
                    let p = self.plan(i);
                    let penalty = p.freeze.as_ref().map_or(1.0, |f| if f.schedule.is_off() { 1.0 } else { f.penalty.max(1.0) });
                    let done = j.progress * j.iters() * penalty;
                    PendingJob {
                        id: i as u32,
                        submit_time_s: j.spec.submission_time,
                        remaining_s: asrpt::remaining_time_s(j.iters(), done, p.ideal.iter_s, p.freeze.as_ref()),
                    }
                })
                .collect();
            asrpt::order(&jobs, sim.now(), &self.opts.asrpt).into_iter().map(|r| r.id as usize).collect()
        } else {
            pending
        };
        let mut held = vec![false; sim.cluster().types.len()];
        let mut ft = FreeTimes::default();
        self.epoch += 1; // the cluster changed since the last pass
        for i in order {
            if sim.cluster().free_total() == 0 {
                break;
            }
            let class = self.plan(i).class;
            let replanning = self.opts.cell_search && self.opts.replan;
            if replanning && self.no_cell_epoch[class] == self.epoch {
                continue; // same class, same free GPUs: still no acceptable Cell
            }
            let mut no_cell = false;
            let chosen = self.choose(sim, i, &held, &mut ft, &mut no_cell);
            if no_cell && replanning {
                self.no_cell_epoch[class] = self.epoch;
            }
            match chosen {
                Some((shape, iter_s)) => {
                    self.epoch += 1;
                    let planned = sim.job(i).planned.clone();
                    let t = sim.cluster().groups[shape.group].type_idx;
                    *ft.used.entry(t).or_default() += shape.gpus() as u64;
                    let ty = sim.cluster().types[t].clone();
                    if sim.start(i, shape, iter_s) && planned != Some((ty, shape.gpus(), shape.nodes)) {
                        sim.count_replan();
                    }
                }
                None => {
                    if self.opts.srpt {
                        let j = sim.job(i);
                        let pj = PendingJob { id: i as u32, submit_time_s: j.spec.submission_time, remaining_s: 0.0 };
                        if asrpt::is_aged(&pj, sim.now(), &self.opts.asrpt) {
                            if let Some(t) = sim.cluster().type_index(&self.plan(i).ideal.gpu_type) {
                                held[t] = true;
                                self.epoch += 1; // the offers changed
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;
    use crate::times::LinearTimes;

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

    #[test]
    fn waits_for_the_planned_cell_when_that_finishes_sooner() {
        // A (a100, 0..100). B (t=1, 100 iters) plans a100: v100 would finish at
        // 201, waiting finishes at 200: B waits.
        let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 1.0, 100, 1, "a100", 0.0)];
        let (m, jct) = run(&mut CellschedPolicy::new(CellschedOptions::default()).unwrap(), two_types(), &jobs, times());
        assert_eq!(jct, vec![Some(100.0), Some(199.0)]);
        assert_eq!(m.replans, 0);
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
    fn ablation_names_and_parsing() {
        let o = CellschedOptions::default().without(&Ablation::parse_list("srpt, freeze").unwrap());
        assert_eq!(o.name(), "cellsched-no-srpt-no-freeze");
        assert!(Ablation::parse_list("srpt,bogus").unwrap_err().to_string().contains("bogus"));
    }
}
