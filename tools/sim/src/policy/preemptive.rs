//! Preemptive policies on requested type and count: `srtf` (shortest
//! remaining time first with oracle durations) and `tiresias` (2D-LAS).
//!
//! Both share one pass: rank running and pending jobs together by the
//! policy's key, select greedily while each type's GPU count allows, start
//! selected pending jobs (preempting unselected running jobs of the same
//! type, lowest rank first, only as needed), then start any other pending
//! job that fits (work conserving). A preempted job keeps its progress and
//! pays `SimConfig::preempt_overhead_s` on restart.
use super::starts::{idle_iter, requested_admissible, start_requested};
use crate::view::Policy;
use crate::view::SimView;
use std::collections::HashSet;

/// Ranked pass shared by the preemptive policies; keys sort ascending.
fn preemptive_pass(sim: &mut dyn SimView, mut keyed: Vec<((f64, f64), usize)>) {
    keyed.sort_by(|a, b| a.0 .0.total_cmp(&b.0 .0).then(a.0 .1.total_cmp(&b.0 .1)).then(a.1.cmp(&b.1)));
    let c = sim.cluster();
    let mut cap: Vec<u64> = (0..c.types.len()).map(|t| c.total_of_type(t)).collect();
    let mut selected = HashSet::new();
    for &(_, i) in &keyed {
        let j = sim.job(i);
        let Some(t) = j.req_type else { continue };
        let g = j.spec.num_gpu as u64;
        if cap[t] >= g {
            cap[t] -= g;
            selected.insert(i);
        }
    }
    let is_running = |sim: &dyn SimView, i: usize| sim.job(i).alloc.is_some();
    let pending_sel: Vec<usize> =
        keyed.iter().map(|k| k.1).filter(|&i| selected.contains(&i) && !is_running(sim, i)).collect();
    for i in pending_sel {
        if start_requested(sim, i) {
            continue;
        }
        let t = sim.job(i).req_type.expect("selected jobs have a type");
        // Victims: unselected running jobs of type t, lowest rank (last) first.
        let victims: Vec<usize> = keyed
            .iter()
            .rev()
            .map(|k| k.1)
            .filter(|&v| !selected.contains(&v) && is_running(sim, v))
            .filter(|&v| {
                let a = sim.job(v).alloc.as_ref().unwrap();
                sim.cluster().groups[a.shape.group].type_idx == t
            })
            .collect();
        for v in victims {
            sim.preempt(v);
            if start_requested(sim, i) {
                break;
            }
        }
    }
    if sim.cluster().free_total() == 0 {
        return;
    }
    for &(_, i) in &keyed {
        if !selected.contains(&i) && !is_running(sim, i) && sim.job(i).status == crate::engine::Status::Pending {
            start_requested(sim, i);
        }
    }
}

/// Shortest remaining time first, preemptive, on the requested type and
/// count, with remaining times as the scheduler knows them (predicted
/// iteration time x known iterations; exact only in oracle mode).
#[derive(Debug, Default, Clone)]
pub struct SrtfPolicy;

impl Policy for SrtfPolicy {
    fn name(&self) -> &str {
        "srtf"
    }
    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        requested_admissible(sim, i)
    }
    fn schedule(&mut self, sim: &mut dyn SimView) {
        let ids: Vec<usize> = sim.running().iter().chain(sim.pending().iter()).copied().collect();
        let mut keyed = Vec::with_capacity(ids.len());
        for i in ids {
            let j = sim.job(i);
            let iter = if j.alloc.is_some() {
                j.pred_iter_s
            } else {
                let (t, g) = (j.req_type.expect("admitted"), j.spec.num_gpu);
                idle_iter(sim, i, t, g).unwrap_or(f64::INFINITY)
            };
            let rem = sim.remaining_s(i, iter);
            keyed.push(((rem, sim.job(i).spec.submission_time), i));
        }
        preemptive_pass(sim, keyed);
    }
}

/// Tiresias 2D-LAS: jobs fall into discretized priority queues by attained
/// service (GPUs x seconds); lower queues run first, FIFO (by submission)
/// inside a queue. Passes also run when a running job crosses a threshold.
/// Not modelled: Tiresias' starvation promotion (STARVELIMIT).
#[derive(Debug, Clone)]
pub struct TiresiasPolicy {
    /// Queue thresholds in GPU-seconds, ascending.
    pub thresholds_gpu_s: Vec<f64>,
}

impl Default for TiresiasPolicy {
    fn default() -> Self {
        // 1 GPU-hour and 10 GPU-hours: three queues.
        TiresiasPolicy { thresholds_gpu_s: vec![3600.0, 36000.0] }
    }
}

impl TiresiasPolicy {
    fn queue(&self, attained: f64) -> usize {
        self.thresholds_gpu_s.iter().take_while(|&&th| attained >= th).count()
    }
}

impl Policy for TiresiasPolicy {
    fn name(&self) -> &str {
        "tiresias"
    }
    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        requested_admissible(sim, i)
    }
    fn schedule(&mut self, sim: &mut dyn SimView) {
        let ids: Vec<usize> = sim.running().iter().chain(sim.pending().iter()).copied().collect();
        let keyed = ids
            .into_iter()
            .map(|i| ((self.queue(sim.attained_gpu_s(i)) as f64, sim.job(i).spec.submission_time), i))
            .collect();
        preemptive_pass(sim, keyed);
        // Wake when the next running job crosses a threshold (demotion).
        let mut next = f64::INFINITY;
        for i in sim.running().iter().copied() {
            let a = sim.attained_gpu_s(i);
            let g = sim.job(i).gpus() as f64;
            if let Some(th) = self.thresholds_gpu_s.iter().find(|&&th| th > a) {
                next = next.min(sim.now() + (th - a) / g);
            }
        }
        if next.is_finite() && !sim.pending().is_empty() {
            sim.wake_at(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn srtf_preempts_for_shorter_job() {
        // One GPU. A needs 100 s; B arrives at 10 needing 10 s: A is preempted,
        // B runs 10..20, A resumes 20..110 (no restart overhead in tests).
        let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 10.0, 10, 1, "a100", 0.0)];
        let (m, jct) = run(&mut SrtfPolicy, a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(110.0), Some(10.0)]);
        assert_eq!(m.preemptions, 1);
    }

    #[test]
    fn srtf_keeps_shorter_running_job() {
        let jobs = [job("a", 0.0, 20, 1, "a100", 0.0), job("b", 10.0, 50, 1, "a100", 0.0)];
        let (m, jct) = run(&mut SrtfPolicy, a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(20.0), Some(60.0)]);
        assert_eq!(m.preemptions, 0);
    }

    #[test]
    fn tiresias_demotes_at_threshold() {
        // Threshold 50 GPU-s. A (100 s) keeps the GPU when B arrives (same
        // queue, earlier), is demoted at t=50 and preempted by B (50..80);
        // A resumes 80..130.
        let mut p = TiresiasPolicy { thresholds_gpu_s: vec![50.0] };
        let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 10.0, 30, 1, "a100", 0.0)];
        let (m, jct) = run(&mut p, a100_node(1), &jobs, times());
        assert_eq!(jct, vec![Some(130.0), Some(70.0)]);
        assert_eq!(m.preemptions, 1);
    }
}
