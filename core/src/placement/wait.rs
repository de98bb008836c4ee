//! Wait for the planned Cell or take a slower free one now.
//!
//! A pending job whose planned Cell is not free may start on a slower free
//! Cell when that is predicted to finish no later than waiting: the planned
//! GPUs free up, the work queued ahead of the job there runs, then the job.
//! The queue ahead is what the order shows now; under a shortest-work-first
//! order later arrivals with less work keep passing a job that waits, so
//! that estimate is optimistic for exactly the jobs that wait longest.
//! [`expected_queue_wait_s`] corrects it the ski-rental way: a job that has
//! already waited `w` expects to wait at least `w` more, so once its loss on
//! the slower Cell is no more than the time it has waited, it takes it.
//! Two exceptions keep the correction from costing the queue:
//! - the slower Cell must use no more GPU-time than the plan
//!   ([`uses_no_more_gpu_time`]: fewer GPUs, or a cheaper shape), so a job
//!   never takes capacity the others need — on an overloaded cluster
//!   every job has waited long, and moving them all to slow Cells raised
//!   average JCT by 2-20% (Philly traces shrunk 4x and 8x, bench/HISTORY.md);
//! - an urgent job (aged, or near its deadline) is first in the order, so
//!   nothing passes it and its estimate needs no correction.

/// What a host knows of a pending job's wait for its planned Cell: when the
/// Cell's GPUs free up, the work queued ahead of it there, how long it has
/// waited, and its work left on the plan. The simulator derives the first
/// two from running jobs' predicted ends and the pass's backlog;
/// job_submit in slurmctld has backfill's expected start of the job, which
/// covers both, so it gives the current time and that whole wait as the
/// queue ahead (the waited-time correction then applies to all of it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanWait {
    /// When (absolute seconds, the host's clock) the planned Cell's GPUs are
    /// predicted free; the current time when the host has no forecast.
    pub plan_free_at_s: f64,
    /// Extra seconds the work queued ahead keeps them busy.
    pub queue_ahead_s: f64,
    /// Seconds the job has waited so far.
    pub waited_s: f64,
    /// Seconds of work the job has left on its planned Cell.
    pub rem_plan_s: f64,
}

impl PlanWait {
    /// When the job is predicted to finish if it waits for its plan, with
    /// the waited-time correction when `correct` ([`expected_queue_wait_s`]).
    pub fn finish_on_plan_s(&self, correct: bool) -> f64 {
        self.plan_free_at_s + expected_queue_wait_s(self.queue_ahead_s, self.waited_s, correct) + self.rem_plan_s
    }

    /// Whether starting now (`now_s`) on a slower free Cell with `rem_here_s`
    /// seconds of work is predicted to finish no later than waiting for the
    /// plan: the one test both hosts apply before taking a slower Cell.
    pub fn slower_cell_finishes_first(&self, now_s: f64, rem_here_s: f64, correct: bool) -> bool {
        now_s + rem_here_s <= self.finish_on_plan_s(correct)
    }

    /// Re-planning hysteresis (`placement.replan_min_gain`): starting now on
    /// a slower Cell with `rem_here_s` seconds of work is predicted to
    /// finish earlier than waiting by at least `min_gain` x the job's
    /// remaining run on its plan (always true for `min_gain` <= 0). Both
    /// hosts apply it after [`Self::slower_cell_finishes_first`].
    pub fn gains_enough(&self, now_s: f64, rem_here_s: f64, correct: bool, min_gain: f64) -> bool {
        let margin = min_gain * self.rem_plan_s;
        margin.is_nan() || margin <= 0.0 || now_s + rem_here_s + margin <= self.finish_on_plan_s(correct)
    }

    /// [`Self::slower_cell_finishes_first`] for a job whose own Cell is
    /// `own` (GPUs, seconds per iteration) and the free one `slower`, its
    /// work there scaled by the iteration times, with the waited-time
    /// correction where [`corrects_wait`] applies it.
    pub fn takes_slower_cell(&self, now_s: f64, slower: (u32, f64), own: (u32, f64), urgent: bool, contended: bool) -> bool {
        let correct = corrects_wait(urgent, slower.0, slower.1, own.0, own.1, contended);
        self.slower_cell_finishes_first(now_s, self.rem_plan_s * slower.1 / own.1, correct)
    }
}

/// The extra wait for the planned Cell, beyond the time its GPUs free up,
/// a pending job should assume: the queued work ahead of it
/// (`queue_ahead_s`), or, when the correction applies (`correct`), at
/// least the time it has waited so far (`waited_s`).
pub fn expected_queue_wait_s(queue_ahead_s: f64, waited_s: f64, correct: bool) -> f64 {
    if correct && waited_s.is_finite() {
        queue_ahead_s.max(waited_s)
    } else {
        queue_ahead_s
    }
}

/// Whether a Cell of `gpus` GPUs at `iter_s` seconds per iteration uses no
/// more GPU-time per iteration than the plan (`plan_gpus`, `plan_iter_s`).
pub fn uses_no_more_gpu_time(gpus: u32, iter_s: f64, plan_gpus: u32, plan_iter_s: f64) -> bool {
    f64::from(gpus) * iter_s <= f64::from(plan_gpus) * plan_iter_s * (1.0 + 1e-9)
}

/// Whether the waited-time correction applies to a job: not urgent, and
/// the slower Cell uses no more GPU-time than the plan or nobody ahead of
/// the job waits for its GPU type (`contended` false: the extra GPU-time
/// is taken from no one).
pub fn corrects_wait(urgent: bool, gpus: u32, iter_s: f64, plan_gpus: u32, plan_iter_s: f64, contended: bool) -> bool {
    !urgent && (!contended || uses_no_more_gpu_time(gpus, iter_s, plan_gpus, plan_iter_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_wait_raises_the_expected_wait_only_when_corrected() {
        assert_eq!(expected_queue_wait_s(100.0, 500.0, true), 500.0);
        assert_eq!(expected_queue_wait_s(100.0, 500.0, false), 100.0);
        assert_eq!(expected_queue_wait_s(800.0, 500.0, true), 800.0);
        assert_eq!(expected_queue_wait_s(100.0, f64::NAN, true), 100.0);
    }

    #[test]
    fn a_slower_cell_is_taken_only_when_it_finishes_first() {
        // Plan frees at 100 s, 50 s of queue, 200 s of work; waited 10 s.
        let w = PlanWait { plan_free_at_s: 100.0, queue_ahead_s: 50.0, waited_s: 10.0, rem_plan_s: 200.0 };
        assert_eq!(w.finish_on_plan_s(false), 350.0);
        // Starting at 0 with 350 s of work ties: taken; 351 s: not.
        assert!(w.slower_cell_finishes_first(0.0, 350.0, false));
        assert!(!w.slower_cell_finishes_first(0.0, 351.0, false));
        // Having waited 400 s, the corrected wait is 400 s, not 50 s.
        let long = PlanWait { waited_s: 400.0, ..w };
        assert_eq!(long.finish_on_plan_s(true), 700.0);
        assert!(long.slower_cell_finishes_first(0.0, 600.0, true));
        assert!(!long.slower_cell_finishes_first(0.0, 600.0, false));
    }

    #[test]
    fn gpu_time_decides_whether_a_slower_cell_is_cheap() {
        // 4 GPUs at 1.5 s vs 8 at 1 s: 6 < 8 GPU-s per iteration.
        assert!(uses_no_more_gpu_time(4, 1.5, 8, 1.0));
        // 8 slower GPUs at 2 s vs 8 at 1 s: twice the GPU-time.
        assert!(!uses_no_more_gpu_time(8, 2.0, 8, 1.0));
        assert!(corrects_wait(false, 4, 1.5, 8, 1.0, true));
        assert!(!corrects_wait(true, 4, 1.5, 8, 1.0, false));
        assert!(!corrects_wait(false, 8, 2.0, 8, 1.0, true));
        // Nobody waits for the slower Cell's type: its extra GPU-time costs no one.
        assert!(corrects_wait(false, 8, 2.0, 8, 1.0, false));
    }
}
