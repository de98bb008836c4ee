//! `fifo`: the user's requested type and count, first come first served;
//! the first job that does not fit blocks everything behind it.
use super::starts::{requested_admissible, start_requested};
use crate::view::Policy;
use crate::view::SimView;

/// First come first served with head-of-line blocking and no backfill.
#[derive(Debug, Default, Clone)]
pub struct FifoPolicy;

impl Policy for FifoPolicy {
    fn name(&self) -> &str {
        "fifo"
    }
    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        requested_admissible(sim, i)
    }
    fn schedule(&mut self, sim: &mut dyn SimView) {
        let order: Vec<usize> = sim.pending().iter().copied().collect();
        for i in order {
            if !start_requested(sim, i) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn head_of_line_blocking() {
        // A: 2 GPUs x 50 iters at 0.5 s = 25 s. B wants 4 GPUs: blocks at the head.
        // C (1 GPU, 5 s) would fit beside A but waits behind B; B runs 25..35, C 35..40.
        let jobs = [job("a", 0.0, 50, 2, "a100", 30.0), job("b", 1.0, 40, 4, "a100", 20.0), job("c", 2.0, 5, 1, "a100", 10.0)];
        let (m, jct) = run(&mut FifoPolicy, a100_node(4), &jobs, times());
        assert_eq!(jct, vec![Some(25.0), Some(34.0), Some(38.0)]);
        assert_eq!(m.finished, 3);
        assert_eq!(m.makespan_s, 40.0);
        assert!((m.avg_jct_s - 97.0 / 3.0).abs() < 1e-6);
        assert_eq!(m.median_jct_s, 34.0);
        assert!((m.avg_queue_s - (0.0 + 24.0 + 33.0) / 3.0).abs() < 1e-6);
    }

    #[test]
    fn jobs_that_never_fit_are_unfinished_and_do_not_block() {
        // 8 GPUs on a 4-GPU node and an unknown type can never run.
        let jobs = [job("a", 0.0, 10, 8, "a100", 0.0), job("b", 0.0, 10, 1, "h100", 0.0), job("c", 1.0, 10, 1, "a100", 0.0)];
        let (m, jct) = run(&mut FifoPolicy, a100_node(4), &jobs, times());
        assert_eq!(jct, vec![None, None, Some(10.0)]);
        assert_eq!((m.jobs, m.finished, m.unfinished, m.never_fit), (3, 1, 2, 2));
    }

    #[test]
    fn deadline_met_ratio_and_gpu_hours() {
        use crate::testutil::{a100_node, job, run, times};
        // One GPU, FIFO: A 0..100, B 100..150, C 150..160 (1 s per iteration).
        let mut jobs = vec![job("a", 0.0, 100, 1, "a100", 0.0), job("b", 0.0, 50, 1, "a100", 0.0), job("c", 0.0, 10, 1, "a100", 0.0)];
        let (m, _) = run(&mut FifoPolicy, a100_node(1), &jobs, times());
        assert_eq!((m.deadline_jobs, m.deadline_met_ratio), (0, None));
        assert!((m.gpu_hours - 160.0 / 3600.0).abs() < 1e-6, "{}", m.gpu_hours);
        jobs[1].due_s = Some(150.0); // finishes at 150: met
        jobs[2].due_s = Some(100.0); // finishes at 160: missed
        let (m, _) = run(&mut FifoPolicy, a100_node(1), &jobs, times());
        assert_eq!((m.deadline_jobs, m.deadline_met_ratio), (2, Some(0.5)));
    }
}
