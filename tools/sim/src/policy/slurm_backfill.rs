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
            let releases: Vec<(f64, u32, u32)> = sim
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
            let free_now = sim.cluster().groups[g].free_per_node().to_vec();
            for shape in sim.cluster().shapes(g, gpus) {
                if let Some((at, nodes)) = earliest(&free_now, &releases, &planned, shape, now, window) {
                    if best.as_ref().map_or(true, |b| at < b.0) {
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
