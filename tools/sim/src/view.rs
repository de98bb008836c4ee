//! What a scheduling policy may read and do: the [`SimView`] the engine
//! hands to every [`Policy`] callback. Policies see the cluster, the jobs
//! and the scheduler's knowledge (iteration times, known iterations), and
//! act by starting, preempting and re-queueing jobs; the clock, the event
//! queue and truth stay inside the engine. Neither this module nor the
//! policies import the engine.
use crate::cluster::{ClusterState, Shape};
use crate::job::Job;
use crate::progress_model::SpeedProfile;
use crate::times::TimeCache;
use std::collections::BTreeSet;

/// The simulation as a policy sees it.
pub trait SimView {
    /// Current simulated time, seconds.
    fn now(&self) -> f64;
    /// The live cluster.
    fn cluster(&self) -> &ClusterState;
    /// All jobs, in trace order.
    fn jobs(&self) -> &[Job];
    /// One job.
    fn job(&self, i: usize) -> &Job {
        &self.jobs()[i]
    }
    /// Waiting jobs (indices, trace order).
    fn pending(&self) -> &BTreeSet<usize>;
    /// Running jobs (indices, trace order).
    fn running(&self) -> &BTreeSet<usize>;
    /// The scheduler's knowledge of iteration times (cached).
    fn times(&mut self) -> &mut TimeCache;
    /// Seconds job `i` still needs at `iter_s` per iteration, as the
    /// scheduler sees it (its known iterations, from its progress now).
    fn remaining_s(&self, i: usize, iter_s: f64) -> f64;
    /// GPU-seconds job `i` has received up to now.
    fn attained_gpu_s(&self, i: usize) -> f64;
    /// Seconds per iteration guessed for a stock job (model unknown to the
    /// knowledge): its declared limit (or the default) over its iterations.
    fn stock_iter_s(&self, i: usize) -> f64;
    /// Running jobs on GPU type `t` as (forecast end, GPUs), earliest first
    /// ([`SimView::set_forecast_end`]).
    fn running_ends(&self, t: usize) -> Box<dyn Iterator<Item = (f64, u32)> + '_>;
    /// Earliest forecast time a Cell of `nodes` × `gpus_per_node` GPUs of
    /// type `t` fits in one group (infinite: never).
    fn earliest_fit(&self, t: usize, nodes: u32, gpus_per_node: u32) -> f64;
    /// Sets when the scheduler's host expects running job `i`'s current run
    /// to end (by default its predicted end), as [`SimView::running_ends`]
    /// and [`SimView::earliest_fit`] report it.
    fn set_forecast_end(&mut self, i: usize, end: f64);

    /// Starts pending job `i` on `shape`, predicted at `iter_s` seconds per
    /// iteration; false (nothing changed) if it cannot start there now.
    fn start(&mut self, i: usize, shape: Shape, iter_s: f64) -> bool;
    /// [`SimView::start`] on the given nodes of `shape`'s group.
    fn start_on(&mut self, i: usize, shape: Shape, nodes: &[u32], iter_s: f64) -> bool;
    /// Preempts running job `i`: it keeps its progress and waits again.
    fn preempt(&mut self, i: usize);
    /// Asks for pending job `i` to be re-planned ([`Policy::on_requeue`]) after the pass.
    fn requeue_later(&mut self, i: usize);
    /// Asks for a scheduling pass at time `t` (> now).
    fn wake_at(&mut self, t: f64);
    /// Asks for a [`Policy::tick`] at time `t` (>= now); it does not start a scheduling pass.
    fn tick_at(&mut self, t: f64);
    /// A number that changes whenever a job arrives, starts or stops (the
    /// waiting and running jobs or the free GPUs may then differ).
    fn version(&self) -> u64;
    /// Reconfigures running job `i`: it checkpoints for `save_s` seconds
    /// (GPUs held, no progress), then waits again with its progress kept
    /// and is re-planned ([`Policy::on_requeue`]); its next start loses
    /// `restart_s`. False (nothing changed) if it is not running.
    fn reconfigure(&mut self, i: usize, save_s: f64, restart_s: f64, checkpoint_bytes: f64) -> bool;
    /// Counts one re-plan (a job started on a Cell other than its submission-time plan).
    fn count_replan(&mut self);
    /// Records job `i`'s submission-time plan (type, GPUs, nodes).
    fn set_planned(&mut self, i: usize, planned: (String, u32, u32));
    /// Sets job `i`'s speed profile (layer freezing).
    fn set_speed(&mut self, i: usize, speed: SpeedProfile);
}

/// A scheduling policy driven by the engine.
pub trait Policy {
    /// Name shown in results.
    fn name(&self) -> &str;
    /// Whether job `i` could ever run on this cluster under the policy (in
    /// an idle cluster); jobs that cannot are reported as unfinished.
    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool;
    /// Called once when job `i` arrives and is admitted.
    fn on_arrival(&mut self, _sim: &mut dyn SimView, _i: usize) {}
    /// One scheduling pass: start (and possibly preempt) jobs.
    fn schedule(&mut self, sim: &mut dyn SimView);
    /// A periodic pass the policy asked for ([`SimView::tick_at`]), after
    /// the events of its time and before any scheduling pass: e.g.
    /// reconfiguring running jobs at the plugins' cadence.
    fn tick(&mut self, _sim: &mut dyn SimView) {}
    /// Job `i` is pending again after a run failed, a start was refused
    /// (its Cell turned out not to fit; the knowledge now says so) or it was
    /// reconfigured: re-plan it. Returns false if it can no longer run (it is then failed).
    fn on_requeue(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        self.admissible(sim, i)
    }
}
