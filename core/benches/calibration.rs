//! Calibration benchmark: the estimator's error against every measured point
//! in `../shared/data` (Gavel k80/p100/v100 throughputs, Rubick A800
//! profiles), datasheet-only and calibrated from single-GPU points only
//! (multi-GPU points held out), plus estimate()/rank_cells() call rates.
//!
//! Run: `cargo bench -p cellsched-core --bench calibration` (set
//! `CELLSCHED_BENCH_DETAIL=1` to print every point). Skips with a note when
//! the shared data directory is absent.
use cellsched_core::calibration::{quantile, spearman, Calibration, CalibrationPolicy};
use cellsched_core::cell::{Cell, Plan};
use cellsched_core::estimator::{CellOffer, Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;
use cellsched_core::profile_db::ProfileRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A measured point plus the job it belongs to (for rank correlation).
struct Point {
    job: String,
    rec: ProfileRecord,
}

fn shared_data() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("CELLSCHED_SHARED_DATA") {
        return Some(PathBuf::from(p)).filter(|p| p.is_dir());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    [root.join("../shared/data"), root.join("shared/data")].into_iter().find(|p| p.is_dir())
}

/// Gavel: `('<Model> (batch size N)', scale)` → aggregate steps/s of `scale`
/// workers, each with batch N (weak scaling). One synchronous iteration of
/// global batch N × scale takes scale / throughput seconds.
fn gavel_points(path: &Path) -> Vec<Point> {
    let text = std::fs::read_to_string(path).expect("read gavel json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("parse gavel json");
    let mut out = Vec::new();
    for gpu in ["k80", "p100", "v100"] {
        let Some(obj) = v.get(gpu).and_then(|o| o.as_object()) else { continue };
        for (key, val) in obj {
            let Some(tput) = val.get("null").and_then(|x| x.as_f64()).filter(|t| *t > 0.0) else { continue };
            let inner = key.trim_start_matches("('");
            let Some((name, rest)) = inner.split_once("',") else { continue };
            let Ok(scale) = rest.trim().trim_end_matches(')').trim().parse::<u32>() else { continue };
            let (model, bs) = match name.split_once(" (batch size ") {
                Some((m, b)) => (m.to_string(), b.trim_end_matches(')').parse::<u32>().unwrap_or(1)),
                None => (name.to_string(), 1),
            };
            out.push(Point {
                job: format!("gavel:{model} bs{bs}"),
                rec: ProfileRecord {
                    model: model.to_ascii_lowercase(),
                    batch: bs * scale,
                    gpu_type: gpu.into(),
                    nodes: 1,
                    gpus_per_node: scale,
                    iter_time_s: scale as f64 / tput,
                    plan: Some(Plan { dp: scale, ..Plan::default() }),
                },
            });
        }
    }
    out
}

/// Rubick A800: config.csv + data.csv rows (iter_time in ms). The global batch
/// is fixed per model (bert 32 and gpt2 16 from Rubick's validate scripts;
/// the others are assumptions) and split into micro-batches of `batch_size`.
fn rubick_points(dir: &Path) -> Vec<Point> {
    let global: BTreeMap<&str, u32> =
        [("bert", 32), ("gpt2", 16), ("roberta", 32), ("t5", 32), ("vit", 64), ("llama7b", 8)].into_iter().collect();
    let mut out = Vec::new();
    for (model, g) in global {
        let (Ok(cfg), Ok(data)) = (std::fs::read_to_string(dir.join(model).join("config.csv")), std::fs::read_to_string(dir.join(model).join("data.csv"))) else {
            continue;
        };
        for (c, d) in cfg.lines().skip(1).zip(data.lines().skip(1)) {
            let c: Vec<f64> = c.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            let d: Vec<f64> = d.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            if c.len() < 9 || d.len() < 4 {
                continue;
            }
            let (nodes, gpus, mbs_col, threads, zero) = (c[0] as u32, c[1] as u32, c[3] as u32, c[5] as u32, c[6] as u8);
            let per_gpu = (g / gpus).max(1);
            let mbs = mbs_col.clamp(1, per_gpu);
            let offload = threads > 1;
            out.push(Point {
                job: format!("rubick:{model} zero{zero}{}", if offload { "-offload" } else { "" }),
                rec: ProfileRecord {
                    model: model.into(),
                    batch: g,
                    gpu_type: "a800".into(),
                    nodes,
                    gpus_per_node: gpus / nodes.max(1),
                    iter_time_s: d[3] / 1000.0,
                    plan: Some(Plan { dp: gpus, tp: 1, pp: 1, micro_batches: (per_gpu / mbs).max(1), zero_stage: zero.min(3), checkpointing: false }),
                },
            });
        }
    }
    out
}

fn predict(est: &Estimator, p: &ProfileRecord) -> Option<(f64, bool)> {
    let job = JobSpec { model: est.model_catalog().get(&p.model).ok()?.clone(), global_batch: p.batch };
    let plan = p.plan?;
    let cell = Cell::new(&p.gpu_type, p.gpus(), plan.pp).ok()?;
    let ev = est.evaluate_plan(&job, &cell, p.gpus_per_node, &plan).ok()?;
    Some((ev.iter_time_s, ev.fits))
}

fn report(mode: &str, est: &Estimator, points: &[Point], held_out: impl Fn(&ProfileRecord) -> bool) {
    let mut ape_all = Vec::new();
    let mut ape_held = Vec::new();
    let mut by_source: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut by_job: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut no_fit = 0;
    let mut missing = 0;
    // CELLSCHED_BENCH_DETAIL=1 prints every point (prediction vs measurement).
    let detail = std::env::var_os("CELLSCHED_BENCH_DETAIL").is_some();
    for p in points {
        let Some((pred, fits)) = predict(est, &p.rec) else {
            missing += 1;
            continue;
        };
        no_fit += usize::from(!fits);
        let ape = (pred - p.rec.iter_time_s).abs() / p.rec.iter_time_s * 100.0;
        if detail {
            println!("  {:<34} {:<5} x{:<2} measured {:>9.4}s predicted {:>9.4}s ratio {:>5.2}", p.job, p.rec.gpu_type, p.rec.gpus(), p.rec.iter_time_s, pred, pred / p.rec.iter_time_s);
        }
        ape_all.push(ape);
        if held_out(&p.rec) {
            ape_held.push(ape);
        }
        by_source.entry(if p.job.starts_with("gavel") { "gavel" } else { "rubick" }).or_default().push(ape);
        let e = by_job.entry(&p.job).or_default();
        e.0.push(pred / p.rec.batch as f64);
        e.1.push(p.rec.iter_time_s / p.rec.batch as f64);
    }
    let rhos: Vec<f64> = by_job.values().filter(|(a, _)| a.len() >= 3).filter_map(|(a, b)| spearman(a, b)).collect();
    println!("\n== {mode} ==");
    println!(
        "  all points      n={:<4} median APE {:>6.1}%  p90 APE {:>7.1}%",
        ape_all.len(),
        quantile(&ape_all, 0.5),
        quantile(&ape_all, 0.9)
    );
    println!(
        "  multi-GPU only  n={:<4} median APE {:>6.1}%  p90 APE {:>7.1}%",
        ape_held.len(),
        quantile(&ape_held, 0.5),
        quantile(&ape_held, 0.9)
    );
    for (src, v) in &by_source {
        println!("  {src:<15} n={:<4} median APE {:>6.1}%  p90 APE {:>7.1}%", v.len(), quantile(v, 0.5), quantile(v, 0.9));
    }
    println!(
        "  Spearman rank correlation of per-sample time across Cells of a job: jobs={} mean {:.3} median {:.3} min {:.3}",
        rhos.len(),
        rhos.iter().sum::<f64>() / rhos.len().max(1) as f64,
        quantile(&rhos, 0.5),
        rhos.iter().copied().fold(f64::INFINITY, f64::min)
    );
    if no_fit > 0 || missing > 0 {
        println!("  note: {no_fit} measured plans predicted not to fit in memory (ZeRO-offload not modelled); {missing} points not predictable");
    }
}

fn timing() {
    let models = ModelCatalog::builtin();
    let jobs: Vec<JobSpec> = ["gpt__1.3B", "bert__760M", "moe__2.4B", "wide_resnet__2B", "gpt__6.7B"]
        .iter()
        .map(|m| JobSpec { model: models.get(m).unwrap().clone(), global_batch: 256 })
        .collect();
    let cells: Vec<Cell> = ["a100x8", "v100x4", "a10x4x2", "h100x16x2", "t4x2", "a100x32x4"].iter().map(|c| c.parse().unwrap()).collect();
    let rounds = 40;
    let t0 = Instant::now();
    let mut n = 0u64;
    for _ in 0..rounds {
        let est = Estimator::new(GpuCatalog::builtin(), models.clone());
        for j in &jobs {
            for c in &cells {
                let _ = std::hint::black_box(est.estimate(j, c, 8));
                n += 1;
            }
        }
    }
    let cold = n as f64 / t0.elapsed().as_secs_f64();
    let est = Estimator::new(GpuCatalog::builtin(), models.clone());
    for j in &jobs {
        for c in &cells {
            let _ = est.estimate(j, c, 8);
        }
    }
    let t1 = Instant::now();
    let mut m = 0u64;
    for _ in 0..2000 {
        for j in &jobs {
            for c in &cells {
                let _ = std::hint::black_box(est.estimate(j, c, 8));
                m += 1;
            }
        }
    }
    let warm = m as f64 / t1.elapsed().as_secs_f64();
    let gpus = GpuCatalog::builtin();
    let offers: Vec<CellOffer> = gpus
        .specs()
        .map(|g| CellOffer { gpu_type: g.name.clone(), gpus_per_node: g.gpus_per_node, free_gpus_per_node: vec![g.gpus_per_node; 4] })
        .collect();
    let t2 = Instant::now();
    let mut cells_seen = 0;
    let rank_rounds = 3;
    for _ in 0..rank_rounds {
        let est = Estimator::new(gpus.clone(), models.clone());
        for j in &jobs {
            cells_seen += est.rank_cells(j, &offers, 32).len();
        }
    }
    let per_rank = t2.elapsed().as_secs_f64() / (rank_rounds * jobs.len()) as f64;
    println!("\n== timing ==");
    println!("  estimate() cold (plan search): {cold:>10.0} calls/s  ({:.1} us/call)", 1e6 / cold);
    println!("  estimate() memoized:           {warm:>10.0} calls/s");
    println!(
        "  rank_cells() cold, {} GPU types x 4 nodes, <=32 GPUs: {:.1} ms/call ({} feasible Cells per job on average)",
        offers.len(),
        per_rank * 1e3,
        cells_seen / (rank_rounds * jobs.len())
    );
}

fn main() {
    // `cargo test --benches` passes --bench-less args; run everything either way.
    match shared_data() {
        None => println!("calibration bench: ../shared/data not found (set CELLSCHED_SHARED_DATA); skipping accuracy part"),
        Some(dir) => {
            let mut points = gavel_points(&dir.join("gavel/simulation_throughputs.json"));
            let gavel_n = points.len();
            points.extend(rubick_points(&dir.join("rubick-a800")));
            println!("calibration bench: {} points ({} Gavel k80/p100/v100, {} Rubick A800) from {}", points.len(), gavel_n, points.len() - gavel_n, dir.display());
            let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
            let multi = |r: &ProfileRecord| r.gpus() > 1;
            report("datasheet only", &base, &points, multi);
            for (label, per_model) in [("calibrated per GPU type (single-GPU points only)", false), ("calibrated per GPU type and per model x type (single-GPU points only)", true)] {
                let policy = CalibrationPolicy { single_node_only: true, max_gpus: Some(1), per_model };
                let cal = Calibration::fit(&base, points.iter().map(|p| &p.rec), &policy);
                print!("\n{}", cal.report);
                let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(cal);
                report(label, &est, &points, multi);
            }
        }
    }
    timing();
}
