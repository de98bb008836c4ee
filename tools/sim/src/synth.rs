//! Seeded synthetic heterogeneous workload generator.
//!
//! Each job: a model/batch from a mix of small CNNs to multi-billion
//! transformers, a requested GPU type drawn in proportion to the cluster's
//! GPUs of that type, a GPU count (1: 45 %, 2: 15 %, 4: 20 %, 8: 15 %,
//! 16: 5 %), and a target run time on its request that is log-normal
//! (median 40 min, sigma 1.4, clamped to 2 min..3 days); the iteration count
//! is that time over the estimator's iteration time. The declared time limit
//! (`deadline`) is 1.5-4x the true run time, rounded up to minutes. 30 % of
//! jobs opt into layer freezing. Arrivals are Poisson at the rate that
//! offers `load` x the cluster's GPU capacity on the requested GPUs.
//! With `due_share` > 0, that share of jobs (drawn from a separate stream,
//! so the rest of the trace is unchanged) gets a deadline (`due`) of 2-6x its
//! true run time on its request after its submission. With `elastic_share`
//! > 0, that share (another separate stream) opts in to reconfiguration
//! (`elastic` column, `--dl-elastic`).
use crate::cluster::{ClusterSpec, ClusterState};
use crate::error::SimError;
use crate::rng::Rng;
use crate::times::TimeCache;
use crate::trace::TraceJob;

/// Generator settings.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Number of jobs.
    pub jobs: usize,
    /// Seed.
    pub seed: u64,
    /// Offered load as a fraction of cluster GPU capacity (e.g. 0.9).
    pub load: f64,
    /// Share of jobs with a deadline (0 = none).
    pub due_share: f64,
    /// Share of jobs that opt in to reconfiguration (0 = none).
    pub elastic_share: f64,
}

/// (catalog model, global batch, weight)
const MODELS: [(&str, u32, f64); 12] = [
    ("resnet18_cifar", 128, 1.0),
    ("resnet50", 64, 1.5),
    ("resnet50", 256, 1.0),
    ("transformer_multi30k", 64, 1.0),
    ("lstm_wikitext2", 20, 0.7),
    ("vit_base", 128, 1.0),
    ("bert__350M", 32, 1.0),
    ("bert__760M", 64, 0.8),
    ("gpt__350M", 32, 1.0),
    ("gpt__1.3B", 64, 0.7),
    ("moe__690M", 64, 0.5),
    ("gpt__2.6B", 128, 0.4),
];
const GPU_COUNTS: [(u32, f64); 5] = [(1, 0.45), (2, 0.15), (4, 0.2), (8, 0.15), (16, 0.05)];

/// Generates a trace for `spec` using `times` for iteration times.
pub fn generate(cfg: &SynthConfig, spec: &ClusterSpec, times: &mut TimeCache) -> Result<Vec<TraceJob>, SimError> {
    if !(cfg.load.is_finite() && cfg.load > 0.0) {
        return Err(SimError::invalid("load", cfg.load.to_string(), "a positive fraction such as 0.9"));
    }
    if !(0.0..=1.0).contains(&cfg.due_share) {
        return Err(SimError::invalid("due share", cfg.due_share.to_string(), "a fraction in [0, 1]"));
    }
    if !(0.0..=1.0).contains(&cfg.elastic_share) {
        return Err(SimError::invalid("elastic share", cfg.elastic_share.to_string(), "a fraction in [0, 1]"));
    }
    let c = ClusterState::new(spec);
    let type_w: Vec<f64> = (0..c.types.len()).map(|t| c.total_of_type(t) as f64).collect();
    let model_w: Vec<f64> = MODELS.iter().map(|m| m.2).collect();
    let count_w: Vec<f64> = GPU_COUNTS.iter().map(|g| g.1).collect();
    let mut rng = Rng::new(cfg.seed);
    let mut jobs = Vec::with_capacity(cfg.jobs);
    let mut runs = Vec::with_capacity(cfg.jobs);
    let mut gpu_s = 0.0;
    while jobs.len() < cfg.jobs {
        let (model, batch, _) = MODELS[rng.weighted(&model_w)];
        let t = rng.weighted(&type_w);
        let gpus = GPU_COUNTS[rng.weighted(&count_w)].0;
        let Some(shape) = c.place_idle(t, gpus) else { continue };
        let ty = &c.types[t];
        let Some(iter_s) = times.iter_time(model, batch, ty, shape.nodes, shape.gpus_per_node) else {
            continue; // does not fit this request: draw again
        };
        let dur = (2400.0 * (1.4 * rng.normal()).exp()).clamp(120.0, 3.0 * 86400.0);
        let iters = (dur / iter_s).round().max(1.0) as u64;
        let real = iters as f64 * iter_s;
        let limit = ((real * rng.range(1.5, 4.0)) / 60.0).ceil() * 60.0;
        gpu_s += real * gpus as f64;
        runs.push(real);
        let freeze = if rng.f64() < 0.3 { Some(if rng.f64() < 0.5 { "conservative" } else { "auto" }.to_string()) } else { None };
        jobs.push(TraceJob {
            job_id: (jobs.len() + 1).to_string(),
            submission_time: 0.0,
            num_iteration: iters,
            model_name: model.to_string(),
            deadline: limit,
            batch_size: batch,
            num_gpu: gpus,
            gpu_type: ty.clone(),
            user: Some(format!("u{}", rng.next_u64() % 40)),
            freeze,
            due_s: None,
            elastic: false,
        });
    }
    let cap: f64 = type_w.iter().sum();
    let mean_gap = if jobs.is_empty() { 0.0 } else { gpu_s / jobs.len() as f64 / (cfg.load * cap) };
    let mut now = 0.0;
    for j in &mut jobs {
        j.submission_time = (now * 1000.0f64).round() / 1000.0;
        now += rng.exp(mean_gap);
    }
    if cfg.due_share > 0.0 {
        let mut r = Rng::new(cfg.seed ^ 0xD0E5_D0E5_D0E5_D0E5);
        for (j, real) in jobs.iter_mut().zip(&runs) {
            if r.f64() < cfg.due_share {
                j.due_s = Some((real * r.range(2.0, 6.0)).ceil());
            }
        }
    }
    if cfg.elastic_share > 0.0 {
        let mut r = Rng::new(cfg.seed ^ 0xE1A5_71C0_E1A5_71C0);
        for j in &mut jobs {
            j.elastic = r.f64() < cfg.elastic_share;
        }
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_times::CoreTimes;

    #[test]
    fn seeded_and_feasible() {
        let spec = ClusterSpec::parse("[[group]]\ngpu_type = \"a100\"\nnodes = 4\ngpus_per_node = 8\n[[group]]\ngpu_type = \"v100\"\nnodes = 4\ngpus_per_node = 8\n", "c").unwrap();
        let gen = |seed| {
            let mut t = TimeCache::new(Box::new(CoreTimes::new(&spec, None).unwrap()));
            generate(&SynthConfig { jobs: 200, seed, load: 0.9, due_share: 0.0, elastic_share: 0.0 }, &spec, &mut t).unwrap()
        };
        let a = gen(1);
        assert_eq!(a, gen(1));
        assert_ne!(a, gen(2));
        assert_eq!(a.len(), 200);
        assert!(a.windows(2).all(|w| w[0].submission_time <= w[1].submission_time));
        assert!(a.iter().all(|j| j.deadline >= 60.0 && j.num_gpu <= 16 && (j.gpu_type == "a100" || j.gpu_type == "v100")));
        assert!(a.iter().any(|j| j.freeze.is_some()));
        assert!(a.iter().all(|j| j.due_s.is_none()));
        // Deadlines for about half the jobs, the rest of the trace unchanged.
        let mut t = TimeCache::new(Box::new(CoreTimes::new(&spec, None).unwrap()));
        let d = generate(&SynthConfig { jobs: 200, seed: 1, load: 0.9, due_share: 0.5, elastic_share: 0.0 }, &spec, &mut t).unwrap();
        let n = d.iter().filter(|j| j.due_s.is_some()).count();
        assert!((70..130).contains(&n), "{n}");
        let strip: Vec<TraceJob> = d.into_iter().map(|j| TraceJob { due_s: None, ..j }).collect();
        assert_eq!(strip, a);
        // Elastic opt-ins likewise, from their own stream.
        let mut t = TimeCache::new(Box::new(CoreTimes::new(&spec, None).unwrap()));
        let e = generate(&SynthConfig { jobs: 200, seed: 1, load: 0.9, due_share: 0.0, elastic_share: 0.5 }, &spec, &mut t).unwrap();
        let n = e.iter().filter(|j| j.elastic).count();
        assert!((70..130).contains(&n), "{n}");
        let strip: Vec<TraceJob> = e.into_iter().map(|j| TraceJob { elastic: false, ..j }).collect();
        assert_eq!(strip, a);
    }
}
