//! Speed of the estimator: a cold plan search per Cell and `rank_cells`
//! over every GPU type of the built-in catalog.
use cellsched_core::cell::Cell;
use cellsched_core::estimator::{CellOffer, Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;
use std::time::Instant;

/// What [`measure`] timed.
#[derive(Debug, Clone, PartialEq)]
pub struct Speed {
    /// Microseconds per full plan search on one Cell (fresh estimator, no memo).
    pub search_us: f64,
    /// Searches timed.
    pub searches: u64,
    /// Milliseconds per `rank_cells` call (one job over every type).
    pub rank_ms: f64,
    /// GPU types offered to `rank_cells`.
    pub types: usize,
    /// Feasible Cells `rank_cells` returned per job.
    pub cells_per_job: usize,
}

/// Times the plan search and `rank_cells` on the built-in catalogs.
pub fn measure() -> Speed {
    let models = ModelCatalog::builtin();
    let gpus = GpuCatalog::builtin();
    let jobs: Vec<JobSpec> = ["gpt__1.3B", "bert__760M", "moe__2.4B", "wide_resnet__2B", "gpt__6.7B"]
        .iter()
        .filter_map(|m| models.get(m).ok())
        .map(|m| JobSpec { model: m.clone(), global_batch: 256 })
        .collect();
    let cells: Vec<Cell> = ["a100x8", "v100x4", "a10x4x2", "h100x16x2", "t4x2", "a100x32x4"].iter().filter_map(|c| c.parse().ok()).collect();
    let rounds = 20;
    let t0 = Instant::now();
    let mut n = 0u64;
    for _ in 0..rounds {
        let est = Estimator::new(gpus.clone(), models.clone());
        for j in &jobs {
            for c in &cells {
                let _ = std::hint::black_box(est.estimate(j, c, 8));
                n += 1;
            }
        }
    }
    let search_us = t0.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
    let offers: Vec<CellOffer> = gpus
        .specs()
        .map(|g| CellOffer { gpu_type: g.name.clone(), gpus_per_node: g.gpus_per_node, free_gpus_per_node: vec![g.gpus_per_node; 4] })
        .collect();
    let rank_rounds = 3;
    let t1 = Instant::now();
    let mut cells_seen = 0;
    for _ in 0..rank_rounds {
        let est = Estimator::new(gpus.clone(), models.clone());
        for j in &jobs {
            cells_seen += est.rank_cells(j, &offers, 32).len();
        }
    }
    let calls = (rank_rounds * jobs.len()).max(1);
    Speed { search_us, searches: n, rank_ms: t1.elapsed().as_secs_f64() * 1e3 / calls as f64, types: offers.len(), cells_per_job: cells_seen / calls }
}
