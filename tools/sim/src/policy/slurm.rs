//! `slurm`: stock Slurm with `priority/multifactor` (age factor only: all
//! jobs share partition, QOS and fair-share here) and `sched/backfill` in
//! its EASY form: the highest-priority job that cannot start gets a
//! reservation at the earliest time it fits, computed from running jobs'
//! declared time limits (`deadline` column; the default limit when none was
//! declared); lower-priority jobs start early only if they fit now and either
//! end (by their own limit) before that reservation or use only GPUs the
//! reservation does not need. Jobs use the type and count the user asked for.
//!
//! With [`SlurmPolicy::conservative`] it plans the way Slurm's backfill
//! does (every tested job gets a reservation, held nodes, cycles every
//! `bf_interval`; the main scheduler stops at the first job that does not
//! fit): see [`super::slurm_backfill`].
use super::starts::{requested_admissible, start_requested};
use crate::view::Policy;
use crate::cluster::ClusterState;
use crate::view::SimView;

/// Multifactor age priority + EASY backfill.
#[derive(Debug, Clone)]
pub struct SlurmPolicy {
    /// `PriorityWeightAge`.
    pub weight_age: f64,
    /// `PriorityMaxAge`, seconds (age factor saturates here).
    pub max_age_s: f64,
    /// Time limit assumed for jobs that declared none (partition `DefaultTime`).
    pub default_limit_s: f64,
    /// Plan as Slurm's sched/backfill does (a reservation for every tested
    /// job, planned nodes held whole) instead of EASY's single reservation.
    pub conservative: bool,
    /// With `conservative`: seconds between backfill cycles (`bf_interval`);
    /// `None`: a cycle at every scheduling pass.
    pub backfill_interval_s: Option<f64>,
    /// With `conservative`: most jobs planned per cycle (`bf_max_job_test`).
    pub max_job_test: usize,
    /// Time of the next backfill cycle.
    next_backfill_s: f64,
}

impl Default for SlurmPolicy {
    fn default() -> Self {
        SlurmPolicy { weight_age: 1000.0, max_age_s: 7.0 * 86400.0, default_limit_s: 86400.0, conservative: false, backfill_interval_s: None, max_job_test: 500, next_backfill_s: 0.0 }
    }
}

impl SlurmPolicy {
    /// Slurm's own planning ([`SlurmPolicy::conservative`]) with backfill
    /// cycles every `backfill_interval_s` (`None`: every pass).
    pub fn conservative(backfill_interval_s: Option<f64>) -> Self {
        SlurmPolicy { conservative: true, backfill_interval_s: backfill_interval_s.filter(|x| x.is_finite() && *x > 0.0), ..SlurmPolicy::default() }
    }

    /// Main scheduler, then (when due) a backfill cycle.
    fn schedule_conservative(&mut self, sim: &mut dyn SimView) {
        let mut order: Vec<(u64, usize)> = sim.pending().iter().copied().map(|i| (self.priority(sim, i), i)).collect();
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let order: Vec<usize> = order.into_iter().map(|x| x.1).collect();
        // Main scheduler: priority order up to the first job that does not fit.
        let mut rest = order.as_slice();
        while let Some((&i, tail)) = rest.split_first() {
            if !start_requested(sim, i) {
                break;
            }
            rest = tail;
        }
        let now = sim.now();
        if rest.is_empty() || now < self.next_backfill_s {
            return;
        }
        let rest = rest.to_vec();
        let me = &*self;
        super::slurm_backfill::backfill_cycle(sim, &rest, self.max_job_test, &|v, i| me.limit(v, i));
        if let Some(dt) = self.backfill_interval_s {
            self.next_backfill_s = ((now / dt).floor() + 1.0) * dt;
            if !sim.pending().is_empty() {
                sim.wake_at(self.next_backfill_s);
            }
        }
    }
}

/// The head job's reservation: at `shadow` it gets its GPUs in `group`;
/// `extra` GPUs of that group are free then beyond its needs.
#[derive(Debug, Clone, Copy)]
struct Reservation {
    group: usize,
    shadow: f64,
    extra: u64,
}

impl SlurmPolicy {
    fn limit(&self, sim: &dyn SimView, i: usize) -> f64 {
        let d = sim.job(i).spec.deadline;
        if d > 0.0 { d } else { self.default_limit_s }
    }

    /// Slurm's integer priority: `weight_age * min(age / max_age, 1)`.
    fn priority(&self, sim: &dyn SimView, i: usize) -> u64 {
        let age = (sim.now() - sim.job(i).spec.submission_time).max(0.0);
        (self.weight_age * (age / self.max_age_s).min(1.0)).floor() as u64
    }

    /// Earliest reservation for job `i` over the groups of its type, from
    /// running jobs' declared ends (node-level: a shape must fit).
    fn reserve(&self, sim: &dyn SimView, i: usize) -> Option<Reservation> {
        let j = sim.job(i);
        let t = j.req_type?;
        let gpus = j.spec.num_gpu;
        let c = sim.cluster();
        let mut best: Option<Reservation> = None;
        for &g in &c.type_groups[t] {
            let gs = &c.groups[g];
            let gpn = gs.spec.gpus_per_node;
            let shapes: Vec<(u32, u32)> = c.shapes(g, gpus).map(|s| (s.nodes, s.gpus_per_node)).collect();
            if shapes.is_empty() {
                continue;
            }
            let mut free: Vec<u32> = gs.free_per_node().to_vec();
            let mut hist = vec![0u64; gpn as usize + 1];
            for &f in &free {
                hist[f as usize] += 1;
            }
            let fits = |hist: &[u64]| {
                shapes.iter().any(|&(n, k)| hist[k as usize..].iter().sum::<u64>() >= n as u64)
            };
            let mut ends: Vec<(f64, usize)> = sim
                .running()
                .iter()
                .copied()
                .filter(|&r| sim.job(r).alloc.as_ref().is_some_and(|a| a.shape.group == g))
                .map(|r| ((sim.job(r).alloc_time + self.limit(sim, r)).max(sim.now()), r))
                .collect();
            ends.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut found = None;
            for (end, r) in ends {
                let a = sim.job(r).alloc.as_ref().expect("running");
                for &n in &a.nodes {
                    let f = &mut free[n as usize];
                    hist[*f as usize] -= 1;
                    *f += a.shape.gpus_per_node;
                    hist[*f as usize] += 1;
                }
                if fits(&hist) {
                    found = Some(end);
                    break;
                }
            }
            if let Some(shadow) = found {
                let total_free: u64 = free.iter().map(|&f| f as u64).sum();
                let r = Reservation { group: g, shadow, extra: total_free.saturating_sub(gpus as u64) };
                if best.map_or(true, |b| shadow < b.shadow) {
                    best = Some(r);
                }
            }
        }
        best
    }
}

fn any_free(c: &ClusterState) -> bool {
    c.free_total() > 0
}

impl Policy for SlurmPolicy {
    fn name(&self) -> &str {
        "slurm"
    }
    fn admissible(&mut self, sim: &mut dyn SimView, i: usize) -> bool {
        requested_admissible(sim, i)
    }
    fn schedule(&mut self, sim: &mut dyn SimView) {
        if self.conservative {
            // Backfill cycles run on their own clock, even with no GPU free
            // now (the wake-up for the next cycle must be asked for).
            return self.schedule_conservative(sim);
        }
        if !any_free(sim.cluster()) {
            return;
        }
        let mut order: Vec<(u64, usize)> = sim.pending().iter().copied().map(|i| (self.priority(sim, i), i)).collect();
        // Higher priority first; ties by submission (trace order = job id order).
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut res: Option<Reservation> = None;
        for (_, i) in order {
            if !any_free(sim.cluster()) {
                break;
            }
            match res {
                None => {
                    if !start_requested(sim, i) {
                        res = self.reserve(sim, i);
                        if res.is_none() {
                            // No running job frees enough of this type: nothing to protect.
                            continue;
                        }
                    }
                }
                Some(ref mut r) => {
                    let j = sim.job(i);
                    let Some(t) = j.req_type else { continue };
                    let gpus = j.spec.num_gpu;
                    let Some(shape) = sim.cluster().place_now(t, gpus) else { continue };
                    let ok = if shape.group != r.group || sim.now() + self.limit(sim, i) <= r.shadow {
                        true
                    } else if gpus as u64 <= r.extra {
                        r.extra -= gpus as u64;
                        true
                    } else {
                        false
                    };
                    if ok {
                        start_requested(sim, i);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn short_job_backfills_without_delaying_the_head() {
        // A runs 0..25 on 2 of 4 GPUs (declared limit 30). B (4 GPUs) is the
        // head: reservation at 30. C (1 GPU, limit 10) ends by 12 <= 30: backfills.
        let jobs = [job("a", 0.0, 50, 2, "a100", 30.0), job("b", 1.0, 40, 4, "a100", 20.0), job("c", 2.0, 5, 1, "a100", 10.0)];
        let (m, jct) = run(&mut SlurmPolicy::default(), a100_node(4), &jobs, times());
        assert_eq!(jct, vec![Some(25.0), Some(34.0), Some(5.0)]);
        assert_eq!(m.finished, 3);
    }

    #[test]
    fn long_job_does_not_backfill() {
        // D (2 GPUs, 50 s, limit 60) fits now but would end after the head's
        // reservation at 30 and the head needs all 4 GPUs: it must wait.
        let jobs = [job("a", 0.0, 50, 2, "a100", 30.0), job("b", 1.0, 40, 4, "a100", 20.0), job("d", 2.0, 100, 2, "a100", 60.0)];
        let (_, jct) = run(&mut SlurmPolicy::default(), a100_node(4), &jobs, times());
        // B 25..35, D 35..85.
        assert_eq!(jct, vec![Some(25.0), Some(34.0), Some(83.0)]);
    }

    #[test]
    fn backfill_into_gpus_the_reservation_leaves_over() {
        // 8 GPUs: A holds 4 until 25 (limit 30); B (head) needs 6 of 8 at 30,
        // leaving 2 extra; D (2 GPUs, long) fits into the extra and starts now.
        let jobs = [job("a", 0.0, 100, 4, "a100", 30.0), job("b", 1.0, 60, 6, "a100", 20.0), job("d", 2.0, 100, 2, "a100", 60.0)];
        let (_, jct) = run(&mut SlurmPolicy::default(), a100_node(8), &jobs, times());
        // D: 2..52 (0.5 s/iter); B starts at 25 when A ends (6 free) and runs 10 s.
        assert_eq!(jct, vec![Some(25.0), Some(34.0), Some(50.0)]);
    }

    /// EASY protects only the first blocked job; Slurm's backfill plans a
    /// window for every blocked job. A (4 a100, limit 60) and V (2 v100,
    /// limit 30, true 25 s) run; B (4 a100) is the head; C (4 v100, 10 s,
    /// limit 20) waits for V's GPUs; D (2 v100, 40 s, limit 50) fits now.
    /// EASY starts D at once (another type than the head's) and C waits for
    /// D; conservative backfill keeps D off C's planned window [30, 50), so
    /// C starts when V ends (25) and D after C (35).
    #[test]
    fn conservative_backfill_plans_every_blocked_job_easy_only_the_head() {
        let c = || cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 4\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 4\n");
        let jobs = [
            job("a", 0.0, 200, 4, "a100", 60.0),
            job("v", 0.0, 25, 2, "v100", 30.0),
            job("b", 1.0, 40, 4, "a100", 20.0),
            job("c", 2.0, 20, 4, "v100", 20.0),
            job("d", 3.0, 40, 2, "v100", 50.0),
        ];
        let (_, easy) = run(&mut SlurmPolicy::default(), c(), &jobs, times());
        assert_eq!(easy, vec![Some(50.0), Some(25.0), Some(59.0), Some(51.0), Some(40.0)]);
        let (m, cons) = run(&mut SlurmPolicy::conservative(None), c(), &jobs, times());
        assert_eq!(cons, vec![Some(50.0), Some(25.0), Some(59.0), Some(33.0), Some(72.0)]);
        assert_eq!(m.finished, 5);
    }

    /// Between backfill cycles only the main scheduler starts jobs, and it
    /// stops at the first job that does not fit: with cycles every 100 s, D
    /// (1 v100, behind the blocked B) waits for the cycle at 100 s.
    #[test]
    fn between_backfill_cycles_the_main_scheduler_stops_at_the_first_blocked_job() {
        let c = || cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 4\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 4\n");
        // A holds the a100 node until 200 s (limit 250).
        let jobs = [job("a", 0.0, 800, 4, "a100", 250.0), job("b", 1.0, 40, 4, "a100", 20.0), job("d", 3.0, 10, 1, "v100", 50.0)];
        let (_, every_pass) = run(&mut SlurmPolicy::conservative(None), c(), &jobs, times());
        assert_eq!(every_pass[2], Some(20.0), "D backfills at once");
        let (_, cycles) = run(&mut SlurmPolicy::conservative(Some(100.0)), c(), &jobs, times());
        // The cycle at 1 s (B's arrival) ran before D arrived; the next is at 100 s.
        assert_eq!(cycles[2], Some(117.0));
        assert_eq!(cycles[1], Some(209.0), "B starts when A ends: the main scheduler, no cycle needed");
    }

    #[test]
    fn other_types_are_not_held_by_the_reservation() {
        let c = cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 4\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 4\n");
        let jobs = [job("a", 0.0, 50, 2, "a100", 30.0), job("b", 1.0, 40, 4, "a100", 20.0), job("v", 2.0, 100, 1, "v100", 1000.0)];
        let (_, jct) = run(&mut SlurmPolicy::default(), c, &jobs, times());
        assert_eq!(jct, vec![Some(25.0), Some(34.0), Some(200.0)]);
    }
}
