//! Soak benchmark of the long-lived state the slurmctld plugins keep, on a
//! fast simulated clock: 100,000 job submissions and completions (about a
//! day of a busy 1,000-node cluster) drive the same caches the plugins hold
//! inside slurmctld, and the process RSS is sampled as it goes.
//!
//! What runs per event, as in the plugins: a submission ranks Cells through
//! the [`RankCache`] (job_submit at submit; the cluster's free GPUs change
//! with every start and end, so shapes vary) with the estimator's own memo
//! behind it; every 30 simulated seconds a re-planning pass updates the
//! [`SnapshotCache`] of pending jobs (new and changed ones parsed, departed
//! ones dropped) and the A-SRPT order of the queue is recomputed (what the
//! site_factor ranking thread does). Models and batches vary over the whole
//! catalog, so the caches fill up to their limits and evict.
//!
//! Prints RSS every 10,000 events and the spread after warm-up (the first
//! 40,000 events, while the caches fill to their limits); asserts nothing.
//!
//! Run: `cargo bench -p cellsched-core --bench soak` (env `SOAK_EVENTS`, default 100000)
use cellsched_core::asrpt::{order, AsrptConfig, PendingJob};
use cellsched_core::estimator::{CellOffer, Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;
use cellsched_core::rng::SplitMix64;
use cellsched_core::rank_cache::RankCache;
use cellsched_core::record::DlRecord;
use cellsched_core::snapshot_cache::{stamp, SnapshotCache};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4
}

/// One GPU type of the emulated cluster: nodes of `per_node` GPUs, free GPUs per node.
struct Group {
    gpu_type: &'static str,
    per_node: u32,
    free: Vec<u32>,
}

struct Job {
    id: u32,
    spec: usize,
    submit_s: f64,
    iters: u64,
    comment: String,
    /// (group, node, GPUs) while running.
    placed: Option<(usize, usize, u32)>,
}

fn main() {
    let events: u64 = std::env::var("SOAK_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let models = ModelCatalog::builtin();
    let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
    let ranks = RankCache::default();
    let mut parsed: SnapshotCache<(u32, f64)> = SnapshotCache::default();
    let names: Vec<String> = models.names().map(str::to_string).collect();
    let mut specs: Vec<JobSpec> = Vec::new();
    for n in &names {
        let m = models.resolve(n).expect("catalog model");
        for b in [8, 16, 32, 64, 128, 256, 512, 1024] {
            specs.push(JobSpec { model: m.clone(), global_batch: b });
        }
    }
    // 1,000 nodes: 400 a100x8, 400 v100x8, 200 a10x4.
    let mut groups = vec![
        Group { gpu_type: "a100", per_node: 8, free: vec![8; 400] },
        Group { gpu_type: "v100", per_node: 8, free: vec![8; 400] },
        Group { gpu_type: "a10", per_node: 4, free: vec![4; 200] },
    ];
    let mut rng = SplitMix64::new(7);
    let mut now = 0.0f64;
    let mut next_pass = 0.0f64;
    let mut pending: BTreeMap<u32, Job> = BTreeMap::new();
    let mut running: HashMap<u32, (Job, f64)> = HashMap::new();
    let (mut submitted, mut completed, mut next_id) = (0u64, 0u64, 1u32);
    let cfg = AsrptConfig::default();
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut next_sample = 10_000u64;
    let t0 = Instant::now();
    println!("soak: {events} submissions and as many completions on a simulated 1,000-node cluster (fast clock)");
    println!("{:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>10} {:>8}", "events", "sim_h", "pending", "running", "rss_kib", "rank_hit", "rank_held", "snap");
    while completed < events {
        // Poisson arrivals until `events` were submitted, in 12-hour days: 6 busy hours at
        // 0.5 jobs/s (more than the GPUs take: a queue of thousands builds) and 6 quiet
        // ones at 0.1 jobs/s (it drains); runs of 5 min to 3 h.
        let rate = if (now / 3600.0) % 12.0 < 6.0 { 0.5 } else { 0.1 };
        now += -(1.0 - rng.next_f64()).ln() / rate;
        if submitted < events {
            let spec = (rng.next_u64() % specs.len() as u64) as usize;
            let iters = 100 + rng.next_u64() % 20_000;
            let job = JobSpec { model: specs[spec].model.clone(), global_batch: specs[spec].global_batch };
            let offers: Vec<CellOffer> = groups
                .iter()
                .map(|g| CellOffer { gpu_type: g.gpu_type.into(), gpus_per_node: g.per_node, free_gpus_per_node: g.free.clone() })
                .collect();
            let ranked = ranks.rank_cells(&est, &job, &offers, 64);
            let comment = match ranked.first() {
                Some(e) => DlRecord { model: Some(job.model.name.clone()), batch: Some(u64::from(job.global_batch)), iters: Some(iters), ..DlRecord::new(e.to_decision()) }.to_string(),
                None => String::new(),
            };
            pending.insert(next_id, Job { id: next_id, spec, submit_s: now, iters, comment, placed: None });
            next_id = next_id.wrapping_add(1).max(1);
            submitted += 1;
        }
        // Completions due by now free their GPUs.
        let done: Vec<u32> = running.iter().filter(|(_, (_, end))| *end <= now).map(|(id, _)| *id).collect();
        for id in done {
            if let Some((j, _)) = running.remove(&id) {
                if let Some((g, n, k)) = j.placed {
                    groups[g].free[n] += k;
                }
                completed += 1;
            }
        }
        // Start what fits (first fit, 1-8 GPUs on one node of any type), oldest first.
        let ids: Vec<u32> = pending.keys().take(64).copied().collect();
        for id in ids {
            let want = 1u32 << (id % 4);
            let fit = (0..groups.len()).map(|i| (i + id as usize) % groups.len()).find_map(|g| {
                let k = want.min(groups[g].per_node);
                groups[g].free.iter().position(|f| *f >= k).map(|n| (g, n, k))
            });
            if let Some((g, n, k)) = fit {
                groups[g].free[n] -= k;
                let mut j = pending.remove(&id).expect("pending");
                j.placed = Some((g, n, k));
                let run_s = 300.0 + (rng.next_u64() % 10_500) as f64;
                running.insert(id, (j, now + run_s));
            }
        }
        if now >= next_pass {
            next_pass = now + 30.0;
            // Re-planning snapshot: copy new/changed pending jobs, forget departed ones.
            let mut live = std::collections::HashSet::new();
            for j in pending.values() {
                let st = stamp(&[Some(&j.comment), None, None]);
                live.insert(j.id);
                if parsed.wants(j.id, st) {
                    let iter_s = DlRecord::parse(&j.comment).map_or(1.0, |r| r.decision.iter_s);
                    parsed.insert(j.id, st, Some((j.spec as u32, iter_s)));
                }
            }
            parsed.retain_live(&live);
            // The site factor ranking of the queue.
            let q: Vec<PendingJob> = pending
                .values()
                .filter_map(|j| parsed.get(j.id).map(|(_, it)| PendingJob::new(j.id, j.submit_s, *it * j.iters as f64)))
                .collect();
            std::hint::black_box(order(&q, now, &cfg));
        }
        let ev = submitted + completed;
        if ev >= next_sample {
            next_sample += 10_000;
            let rss = rss_kib();
            samples.push((ev, rss));
            let (hits, misses, held, _) = ranks.stats();
            println!(
                "{ev:>9} {:>9.1} {:>8} {:>8} {rss:>9} {:>8.1}% {held:>10} {:>8}",
                now / 3600.0,
                pending.len(),
                running.len(),
                100.0 * hits as f64 / (hits + misses).max(1) as f64,
                parsed.len()
            );
        }
    }
    let warm: Vec<u64> = samples.iter().filter(|s| s.0 > 40_000).map(|s| s.1).collect();
    if let (Some(min), Some(max)) = (warm.iter().min(), warm.iter().max()) {
        let mean = warm.iter().sum::<u64>() as f64 / warm.len() as f64;
        println!(
            "after warm-up (events > 40,000, {} samples): RSS mean {:.0} KiB, min {min}, max {max}: {:+.1}% / {:+.1}% of the mean",
            warm.len(),
            mean,
            100.0 * (*min as f64 - mean) / mean,
            100.0 * (*max as f64 - mean) / mean
        );
    }
    let (hits, misses, held, evicted) = ranks.stats();
    println!(
        "{submitted} submitted, {completed} completed, {:.1} simulated hours in {:.1} s; rank cache {hits} hits, {misses} misses, {held} held, {evicted} evicted",
        now / 3600.0,
        t0.elapsed().as_secs_f64()
    );
}
