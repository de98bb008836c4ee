//! Slurm's `sched/backfill` as it plans ([`super::SlurmPolicy::conservative`]):
//! every pending job it tests, in priority order, gets the earliest start at
//! which its requested shape fits on nodes of its GPU type for its whole
//! time limit, given the running jobs' GPUs (released at their start plus
//! limit, the only end Slurm knows) and the nodes already planned for
//! higher-priority jobs, which are held whole for the planned window (the
//! backfill node-space map reserves node bitmaps). A job whose earliest
//! start is now starts on the nodes planned for it; the others keep their
//! plan for the rest of the pass, so a lower-priority job never delays one
//! above it (conservative backfill, as opposed to EASY's single reservation).
//!
//! Between backfill cycles (`bf_interval`) only the main scheduler starts
//! jobs: in priority order, up to the first one that does not fit (that job
//! blocks its partition; the simulated cluster is one partition).
use super::starts::iter_on;
use crate::cluster::Shape;
use crate::view::SimView;

/// Nodes held whole for a higher-priority job's planned window.
#[derive(Debug, Clone)]
struct Planned {
    group: usize,
    nodes: Vec<u32>,
    start: f64,
    end: f64,
}

/// Earliest `(start, nodes)` for `shape` over `window` seconds, at `now` or
/// at a release time of the group, avoiding `planned` windows; best fit
/// (fewest free GPUs at that time, then node index). `releases`: the
/// group's running jobs as (end, node, GPUs).
fn earliest(free_now: &[u32], releases: &[(f64, u32, u32)], planned: &[Planned], shape: Shape, now: f64, window: f64) -> Option<(f64, Vec<u32>)> {
    let mut times: Vec<f64> = std::iter::once(now)
        .chain(releases.iter().map(|r| r.0))
        .chain(planned.iter().filter(|p| p.group == shape.group).map(|p| p.end))
        .filter(|&t| t >= now)
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    for t in times {
        let mut free = free_now.to_vec();
        for &(end, n, g) in releases {
            if end <= t {
                free[n as usize] += g;
            }
        }
        let mut ok: Vec<(u32, u32)> = (0..free.len() as u32)
            .filter(|&n| free[n as usize] >= shape.gpus_per_node)
            .filter(|&n| !planned.iter().any(|p| p.group == shape.group && p.start < t + window && p.end > t && p.nodes.contains(&n)))
            .map(|n| (free[n as usize], n))
            .collect();
        if ok.len() >= shape.nodes as usize {
            ok.sort_unstable();
            return Some((t, ok.into_iter().take(shape.nodes as usize).map(|(_, n)| n).collect()));
        }
    }
    None
}

/// One backfill cycle over the pending jobs in `order` (highest priority
/// first; at most `max_test` of them planned, `bf_max_job_test`); `limit`
/// gives a job's time limit in seconds.
pub(super) fn backfill_cycle(sim: &mut dyn SimView, order: &[usize], max_test: usize, limit: &dyn Fn(&dyn SimView, usize) -> f64) {
    let mut planned: Vec<Planned> = Vec::new();
    for &i in order.iter().take(max_test) {
        let j = sim.job(i);
        let Some(t) = j.req_type else { continue };
        let gpus = j.spec.num_gpu;
        let window = limit(sim, i);
        let now = sim.now();
        let mut best: Option<(f64, Shape, Vec<u32>)> = None;
        for &g in &sim.cluster().type_groups[t] {
            let (free_now, releases) = group_state(sim, g, limit);
            for shape in sim.cluster().shapes(g, gpus) {
                if let Some((at, nodes)) = earliest(&free_now, &releases, &planned, shape, now, window) {
                    if best.as_ref().is_none_or(|b| at < b.0) {
                        best = Some((at, shape, nodes));
                    }
                }
            }
        }
        let Some((at, shape, nodes)) = best else { continue };
        if at <= now {
            if let Some(it) = iter_on(sim, i, shape) {
                if sim.start_on(i, shape, &nodes, it) {
                    continue;
                }
            }
        }
        planned.push(Planned { group: shape.group, nodes, start: at, end: at + window });
    }
}

/// Slurm's scheduling machinery for a policy that decides Cells and order
/// itself but whose jobs are started by slurmctld (the cellsched plugins:
/// job_submit and its re-planning thread set each job's GPU type, the
/// site_factor plugin its priority; slurmctld's main scheduler and backfill
/// start it). The policy walks its pending jobs in priority order and, per
/// job, either asks to start it ([`SlurmGate::try_start`]) or lets it wait
/// for its planned Cell ([`SlurmGate::wait`]):
/// - the main scheduler (every pass) starts jobs in priority order up to
///   the first one that does not start;
/// - a backfill cycle (every `backfill_interval_s`) also starts later jobs,
///   on nodes that no higher-priority job's planned window needs, each
///   waiting job planning its earliest window on its type (whole nodes);
/// - a pending job's GPU type changes only when job_submit decides: at its
///   first pass (submission) and every `replan_interval_s` (the re-planning
///   thread), and not again within `replan_cooldown_s` of a move; between
///   those, it starts only on the type it has. At submission job_submit
///   takes no Cell slower than the job's best (Slurm has no forecast of the
///   job's start yet, so the wait test says wait); the policy applies that
///   with [`SlurmGate::at_submission`].
#[derive(Debug, Clone)]
pub struct SlurmGate {
    /// Seconds between backfill cycles (`bf_interval`); `None`: every pass.
    pub backfill_interval_s: Option<f64>,
    /// Seconds between re-planning passes (`placement.replan_interval_s`); `None`: every pass.
    pub replan_interval_s: Option<f64>,
    /// Seconds after a move during which a job is not moved again (`placement.replan_cooldown_s`).
    pub replan_cooldown_s: f64,
    /// Per job: when a re-plan last moved it to another GPU type.
    moved_at: Vec<Option<f64>>,
    now: f64,
    next_backfill: f64,
    next_replan: f64,
    backfill_now: bool,
    replan_now: bool,
    blocked: bool,
    planned: Vec<Planned>,
    /// Per job: the GPU type index job_submit gave it (`None`: not decided yet).
    assigned: Vec<Option<usize>>,
    /// Per job: its submission time (job_submit decides then, from the free GPUs).
    submitted: Vec<Option<f64>>,
}

impl SlurmGate {
    /// A gate with the given cadences (seconds; `None` or non-positive:
    /// every pass); no cool-down ([`SlurmGate::with_cooldown`]).
    pub fn new(backfill_interval_s: Option<f64>, replan_interval_s: Option<f64>) -> Self {
        let pos = |x: Option<f64>| x.filter(|v| v.is_finite() && *v > 0.0);
        SlurmGate {
            backfill_interval_s: pos(backfill_interval_s),
            replan_interval_s: pos(replan_interval_s),
            replan_cooldown_s: 0.0,
            moved_at: Vec::new(),
            now: 0.0,
            next_backfill: 0.0,
            next_replan: 0.0,
            backfill_now: true,
            replan_now: true,
            blocked: false,
            planned: Vec::new(),
            assigned: Vec::new(),
            submitted: Vec::new(),
        }
    }

    /// The same gate with a re-planning cool-down of `seconds`.
    pub fn with_cooldown(mut self, seconds: f64) -> Self {
        self.replan_cooldown_s = if seconds.is_finite() { seconds.max(0.0) } else { 0.0 };
        self
    }

    fn size(&mut self, jobs: usize) {
        self.assigned.resize(jobs, None);
        self.moved_at.resize(jobs, None);
        self.submitted.resize(jobs, None);
    }

    /// Job `i` is submitted at `now` with its plan on GPU type `plan_t`:
    /// job_submit gives it that type unless its submission pass starts it
    /// on a free Cell of another.
    pub(crate) fn arrive(&mut self, i: usize, plan_t: usize, now: f64, jobs: usize) {
        self.size(jobs);
        self.assigned[i] = Some(plan_t);
        self.submitted[i] = Some(now);
    }

    /// Whether this pass is job `i`'s submission (job_submit's decision).
    pub(crate) fn at_submission(&self, i: usize) -> bool {
        self.submitted[i] == Some(self.now)
    }

    /// Starts a pass at `now`.
    pub(crate) fn begin_pass(&mut self, now: f64, jobs: usize) {
        self.size(jobs);
        self.now = now;
        self.backfill_now = now >= self.next_backfill;
        self.replan_now = now >= self.next_replan;
        self.blocked = false;
        self.planned.clear();
    }

    /// Whether job `i` may take a Cell of GPU type `t` in this pass: at its
    /// first pass or a re-planning pass any type, else only its own.
    pub(crate) fn type_allowed(&self, i: usize, t: usize) -> bool {
        if self.at_submission(i) {
            return true;
        }
        match self.assigned[i] {
            None => true,
            Some(a) if a == t => true,
            Some(_) => self.replan_now && self.moved_at[i].is_none_or(|m| self.now - m >= self.replan_cooldown_s),
        }
    }

    /// The policy starts job `i` on `shape` if Slurm would now; false: it waits.
    pub(crate) fn try_start(&mut self, sim: &mut dyn SimView, i: usize, shape: Shape, iter_s: f64, limit_s: f64) -> bool {
        let t = sim.cluster().groups[shape.group].type_idx;
        match self.assigned[i] {
            _ if self.at_submission(i) => self.assigned[i] = Some(t),
            None => self.assigned[i] = Some(t),
            Some(a) if a != t && self.type_allowed(i, t) => {
                self.assigned[i] = Some(t);
                self.moved_at[i] = Some(self.now);
            }
            _ => {}
        }
        if self.blocked && !self.backfill_now {
            return false;
        }
        let (free_now, releases) = group_state(sim, shape.group, &declared_limit);
        let now = sim.now();
        match earliest(&free_now, &releases, &self.planned, shape, now, limit_s) {
            Some((at, nodes)) if at <= now && sim.start_on(i, shape, &nodes, iter_s) => true,
            _ => {
                self.wait(sim, i, t, shape.gpus(), limit_s);
                false
            }
        }
    }

    /// Job `i` waits for `gpus` GPUs of type `t` (its planned Cell): it
    /// blocks the main scheduler, and a backfill cycle plans its window.
    pub(crate) fn wait(&mut self, sim: &dyn SimView, i: usize, t: usize, gpus: u32, limit_s: f64) {
        self.blocked = true;
        if self.assigned[i].is_none() {
            self.assigned[i] = Some(t);
        }
        if !self.backfill_now {
            return;
        }
        let t = self.assigned[i].unwrap_or(t);
        let now = sim.now();
        let mut best: Option<(f64, Shape, Vec<u32>)> = None;
        for &g in &sim.cluster().type_groups[t] {
            let (free_now, releases) = group_state(sim, g, &declared_limit);
            for shape in sim.cluster().shapes(g, gpus) {
                if let Some((at, nodes)) = earliest(&free_now, &releases, &self.planned, shape, now, limit_s) {
                    if best.as_ref().is_none_or(|b| at < b.0) {
                        best = Some((at, shape, nodes));
                    }
                }
            }
        }
        if let Some((at, shape, nodes)) = best {
            self.planned.push(Planned { group: shape.group, nodes, start: at, end: at + limit_s });
        }
    }

    /// Ends the pass: asks for the next backfill or re-planning pass while jobs wait.
    pub(crate) fn end_pass(&mut self, sim: &mut dyn SimView) {
        let now = sim.now();
        let next = |dt: Option<f64>| dt.map_or(now, |d| ((now / d).floor() + 1.0) * d);
        if self.backfill_now {
            self.next_backfill = next(self.backfill_interval_s);
        }
        if self.replan_now {
            self.next_replan = next(self.replan_interval_s);
        }
        if !sim.pending().is_empty() {
            for t in [self.next_backfill, self.next_replan] {
                if t > now {
                    sim.wake_at(t);
                }
            }
        }
    }
}

/// A job's declared time limit (trace column `deadline`), else Slurm's
/// default of a day (the partition's `DefaultTime` in the simulator).
pub(crate) fn declared_limit(sim: &dyn SimView, i: usize) -> f64 {
    let d = sim.job(i).spec.deadline;
    if d > 0.0 { d } else { 86400.0 }
}

/// A group's free GPUs per node now and its running jobs' releases as
/// (start + limit, node, GPUs); `limit` gives a job's time limit.
fn group_state(sim: &dyn SimView, g: usize, limit: &dyn Fn(&dyn SimView, usize) -> f64) -> (Vec<u32>, Vec<(f64, u32, u32)>) {
    let now = sim.now();
    let releases = sim
        .running()
        .iter()
        .filter_map(|&r| {
            let a = sim.job(r).alloc.as_ref()?;
            (a.shape.group == g).then(|| {
                let end = (sim.job(r).alloc_time + limit(sim, r)).max(now);
                a.nodes.iter().map(move |&n| (end, n, a.shape.gpus_per_node)).collect::<Vec<_>>()
            })
        })
        .flatten()
        .collect();
    (sim.cluster().groups[g].free_per_node().to_vec(), releases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_waits_for_releases_and_keeps_off_planned_nodes() {
        let shape = Shape { group: 0, nodes: 1, gpus_per_node: 4 };
        // Two 8-GPU nodes: node 0 has 2 free until t=50 (6 released then), node 1 has 4 free now.
        let releases = [(50.0, 0, 6)];
        assert_eq!(earliest(&[2, 4], &releases, &[], shape, 0.0, 100.0), Some((0.0, vec![1])));
        // Node 1 is planned for a higher-priority job from 30 to 90: a 100 s window overlaps it,
        // so the job goes to node 0 when it frees at 50.
        let p = Planned { group: 0, nodes: vec![1], start: 30.0, end: 90.0 };
        assert_eq!(earliest(&[2, 4], &releases, std::slice::from_ref(&p), shape, 0.0, 100.0), Some((50.0, vec![0])));
        // A 20 s window ends before the planned one begins: it fits on node 1 now.
        assert_eq!(earliest(&[2, 4], &releases, std::slice::from_ref(&p), shape, 0.0, 20.0), Some((0.0, vec![1])));
        // Best fit: of two fitting nodes, the one with fewer free GPUs.
        assert_eq!(earliest(&[8, 5], &[], &[], shape, 0.0, 10.0), Some((0.0, vec![1])));
        // Nothing ever fits a 12-GPU node shape.
        assert_eq!(earliest(&[8, 8], &[], &[], Shape { group: 0, nodes: 1, gpus_per_node: 12 }, 0.0, 10.0), None);
    }
}
