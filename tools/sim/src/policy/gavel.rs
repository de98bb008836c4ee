//! `gavel`: heterogeneity-aware max-throughput (after Gavel, OSDI'20),
//! simplified to a non-preemptive, work-conserving greedy: each pass pairs
//! waiting jobs with GPU types, best *throughput ratio* first — a job's
//! throughput on a type over its throughput on its slowest type — so the
//! jobs that gain most from fast GPUs get them. The GPU count is the user's;
//! the type is Gavel's choice. Gavel's round-based time-sharing LP and lease
//! preemption are not modelled. Only the first `window` waiting jobs (in
//! submission order) are considered per pass, to bound the cost.
use super::starts::{idle_iter, start_on_type};
use crate::view::Policy;
use crate::view::SimView;
use std::collections::HashMap;

/// Greedy throughput-ratio type assignment.
#[derive(Debug, Clone)]
pub struct GavelPolicy {
    /// Waiting jobs considered per pass.
    pub window: usize,
    /// Per job: idle-cluster iteration time on each type (None = infeasible).
    iters: HashMap<usize, Vec<Option<f64>>>,
}

impl Default for GavelPolicy {
    fn default() -> Self {
        GavelPolicy { window: 256, iters: HashMap::new() }
    }
}

impl GavelPolicy {
    fn type_iters(&mut self, sim: &mut dyn SimView, i: usize) -> Vec<Option<f64>> {
        if let Some(v) = self.iters.get(&i) {
            return v.clone();
        }
        let g = sim.job(i).spec.num_gpu;
        let v: Vec<Option<f64>> = (0..sim.cluster().types.len()).map(|t| idle_iter(sim, i, t, g)).collect();
        self.iters.insert(i, v.clone());
        v
    }
}

impl Policy for GavelPolicy {
    fn name(&self) -> &str {
        "gavel"
    }
    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        self.type_iters(sim, i).iter().any(Option::is_some)
    }
    fn on_requeue(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        self.iters.remove(&i);
        self.admissible(sim, i)
    }
    fn schedule(&mut self, sim: &mut dyn SimView) {
        let mut cands: Vec<usize> = sim.pending().iter().copied().take(self.window).collect();
        loop {
            if sim.cluster().free_total() == 0 || cands.is_empty() {
                return;
            }
            // (ratio, candidate position, type)
            let mut best: Option<(f64, usize, usize)> = None;
            for (pos, &i) in cands.iter().enumerate() {
                let its = self.type_iters(sim, i);
                let slowest = its.iter().flatten().fold(0.0f64, |a, &b| a.max(b));
                let g = sim.job(i).spec.num_gpu;
                for (t, it) in its.iter().enumerate() {
                    let Some(it) = it else { continue };
                    if sim.cluster().free_of_type(t) < g as u64 || sim.cluster().place_now(t, g).is_none() {
                        continue;
                    }
                    let ratio = slowest / it;
                    if best.map_or(true, |b| ratio > b.0 + 1e-12) {
                        best = Some((ratio, pos, t));
                    }
                }
            }
            let Some((_, pos, t)) = best else { return };
            let i = cands.remove(pos);
            let g = sim.job(i).spec.num_gpu;
            start_on_type(sim, i, t, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::times::LinearTimes;

    #[test]
    fn fast_gpu_goes_to_the_job_that_gains_most() {
        // Model m is 2x faster on a100, model n only 1.1x. Both ask for v100.
        // Gavel gives a100 to the m job (100 s) and v100 to the n job (110 s).
        let c = cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 1\n");
        let t = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0).with("n", "a100", 1.0).with("n", "v100", 1.1);
        let mut n = job("n", 0.0, 100, 1, "v100", 0.0);
        n.model_name = "n".into();
        let jobs = [n, job("m", 0.0, 100, 1, "v100", 0.0)];
        let (m, jct) = run(&mut GavelPolicy::default(), c, &jobs, t);
        assert_eq!(jct.len(), 2);
        assert!((jct[0].unwrap() - 110.0).abs() < 1e-9, "{jct:?}");
        assert_eq!(jct[1], Some(100.0));
        assert_eq!(m.finished, 2);
    }
}
