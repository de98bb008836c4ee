//! `cellsched bench estimator`: parses the options and prints what
//! `cellsched_estbench` measures — the estimator's held-out error on every
//! measured point in `../shared/data` under protocols (a)–(f), published
//! throughputs (`bench/truth/nvidia-dle-resnet50.csv`) under (p), and the
//! plan-search and `rank_cells` speed. Each point is scored two ways:
//! `estimate` (the plan the estimator picks, as `cellsched estimate`
//! answers) and `measured plan` (the cost of the plan that was measured).
use anyhow::Result;
use cellsched_core::estimator::{quantile, CONTRADICTION_TOLERANCE};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;
use cellsched_estbench::memory::{memory_table, Role};
use cellsched_estbench::score::{calibrated, rank_correlations, ratio_by_shape, rows, score_point, score_protocol};
use cellsched_estbench::{contradictory_points, cross_type_floor, load_points, protocols, published_points, published_protocols, Pick, Point, Protocol, Row, Scored, PUBLISHED_RESNET50};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Options of `cellsched bench estimator`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory with the reference data (`gavel/`, `rubick-a800/`, `h100/`);
    /// default `$CELLSCHED_SHARED_DATA`, else `../shared/data`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Print every scored point (protocol, dataset, job, measured, predicted)
    /// and the fitted framework and layout constants of each split.
    #[arg(long)]
    detail: bool,
    /// Skip the accuracy part; time the estimator only.
    #[arg(long)]
    speed_only: bool,
}

/// Runs the benchmark.
pub fn run(a: Args) -> Result<()> {
    if !a.speed_only {
        let dir = a.data.clone().or_else(|| std::env::var_os("CELLSCHED_SHARED_DATA").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from("../shared/data"));
        if dir.is_dir() {
            accuracy(&dir, a.detail)?;
        } else {
            println!("bench estimator: reference data {} not found (give --data or CELLSCHED_SHARED_DATA); skipping the accuracy part", dir.display());
        }
    }
    speed();
    Ok(())
}

fn print_row(r: &Row) {
    println!("    {:<22} n={:<4} median APE {:>6.1}%  p90 APE {:>6.1}%  bias {:>+6.1}%", r.label, r.n, r.median_ape, r.p90_ape, r.median_bias);
}

fn accuracy(dir: &Path, detail: bool) -> Result<()> {
    let (gpus, mut models) = (cellsched_estbench::dataset_gpus()?, ModelCatalog::builtin());
    let points = load_points(dir, &mut models)?;
    let count = |d: &str| points.iter().filter(|p| p.dataset == d).count();
    println!(
        "bench estimator: {} measured points from {} ({} Gavel k80/p100/v100, {} Rubick A800, {} H100, {} H100 from bench/truth/h100-measured.csv, {} H200 from bench/truth/h200-measured.csv); {} single-GPU, {} multi-GPU",
        points.len(),
        dir.display(),
        count("gavel"),
        count("rubick-a800"),
        count("h100"),
        count("h100-own"),
        count("h200"),
        points.iter().filter(|p| p.rec.gpus() == 1).count(),
        points.iter().filter(|p| p.rec.gpus() > 1).count()
    );
    println!("servers as the datasets ran them (over the built-in GPU catalog): {}", cellsched_estbench::DATASET_SERVERS.trim().replace('\n', " "));
    println!("APE = |predicted - measured| / measured; bias = median of predicted / measured - 1 (negative: predicted too fast); rho = Spearman rank correlation of per-sample time across the Cells of one job (jobs with >= 3 scored Cells).");
    let contradictory = contradictory_points(&points);
    if !contradictory.is_empty() {
        let mut where_: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for &i in &contradictory {
            *where_.entry((points[i].dataset, points[i].rec.gpu_type.as_str())).or_default() += 1;
        }
        let list: Vec<String> = where_.iter().map(|((d, g), n)| format!("{n} {d} {g}")).collect();
        println!(
            "data consistency (measurements against each other, no estimator): {} multi-GPU points ({}) belong to in-node weak-scaling series in which more GPUs make an iteration over {:.0}% faster, which synchronous data parallelism cannot do; calibration warns of them and still fits with them, every score keeps them, and the rows \"w/o contradictory\" show the score without them",
            contradictory.len(),
            list.join(", "),
            CONTRADICTION_TOLERANCE * 100.0
        );
    }
    for proto in protocols(&points) {
        report(&points, &proto, &contradictory, &gpus, &models, detail);
        if proto.key == "e" {
            print_cross_type_floor(&points);
        }
    }
    // Published throughputs (bench/truth/): scored, never calibrated on.
    let mut all = points.clone();
    let published = published_points(PUBLISHED_RESNET50, &mut models)?;
    println!(
        "\npublished (not measured here; held out, never calibrated on): {} NVIDIA DeepLearningExamples ResNet-50 v1.5 throughputs (bench/truth/nvidia-dle-resnet50.csv)",
        published.len()
    );
    all.extend(published);
    for proto in published_protocols(&all) {
        report(&all, &proto, &contradictory, &gpus, &models, detail);
    }
    memory(&points, &gpus, &models)?;
    restart_cost(&points);
    Ok(())
}

/// The context of protocol (e): how far a type's measured times follow from
/// the other types' measurements of the same Cells ([`cross_type_floor`]).
fn print_cross_type_floor(points: &[Point]) {
    let (rows, all) = cross_type_floor(points);
    if let Some(all) = all {
        let per: Vec<String> = rows.iter().map(|r| format!("{} {:.1}% (n={})", r.gpu_type, r.median_ape * 100.0, r.n)).collect();
        println!(
            "  data consistency (measurements against each other, no estimator): each point predicted from the same model, batch and Cell measured on the other GPU types (geometric mean) times one factor per model fitted on the held-out type's own points, which (e) may not use, errs by median {:.1}%: {}",
            all * 100.0,
            per.join(", ")
        );
    }
}

/// Measured reconfigurations on one H200 (`bench/truth/h200-restart.csv`, compiled in).
const H200_RESTART: &str = include_str!("../../bench/truth/h200-restart.csv");
/// The same reconfigurations on one H100 of another machine (`bench/truth/h100-restart.csv`): all held out.
const H100_RESTART: &str = include_str!("../../bench/truth/h100-restart.csv");
/// The runs `[elastic]`'s defaults were fitted on (core::elastic::cost; H200 only).
const RESTART_CALIBRATION: [&str; 2] = ["gpt__125M", "gpt__1.3B"];

/// The reconfiguration cost model (`core::elastic::RestartCost`, default
/// `[elastic]`) against measured saves and restarts: by the model alone,
/// and with the profiler's measured cold start of the same model and batch
/// (`first_iter_s` of the H200 runs) as the plugins use it. The H200 table
/// holds the two calibration runs; every H100 run is held out.
fn restart_cost(points: &[Point]) {
    let cfg = cellsched_core::config::ElasticConfig::default();
    println!("\n== reconfiguration cost (core::elastic::RestartCost, [elastic] defaults) against measured reconfigurations ==");
    println!("    truth: one GPU, torch.save + fsync after the signal, restart to the end of the first iteration; knowledge: 12 bytes of checkpoint per parameter (AdamW)");
    let mut held: Vec<(f64, f64)> = Vec::new();
    for (text, path, gpu, calibration) in
        [(H200_RESTART, "bench/truth/h200-restart.csv", "h200", &RESTART_CALIBRATION[..]), (H100_RESTART, "bench/truth/h100-restart.csv", "h100-own", &[][..])]
    {
        println!("  {path}:");
        match cellsched_sim::RestartTruth::parse(text, path) {
            Ok(t) => restart_rows(&t, points, gpu, calibration, &cfg, &mut held),
            Err(e) => println!("    {e}"),
        }
    }
    if !held.is_empty() {
        let worst = |k: fn(&(f64, f64)) -> f64| held.iter().map(k).fold(0.0_f64, |a, b| if b.abs() > a.abs() { b } else { a });
        let save: Vec<f64> = held.iter().map(|h| h.0.abs()).collect();
        let restart: Vec<f64> = held.iter().map(|h| h.1.abs()).collect();
        println!(
            "    held out ({} runs, both GPUs): restart median |error| {:.0}%, worst {:+.0}%; save median |error| {:.0}%, worst {:+.0}%",
            held.len(),
            quantile(&restart, 0.5),
            worst(|h| h.1),
            quantile(&save, 0.5),
            worst(|h| h.0)
        );
    }
    // Issue 33's measurement on another H200: 1.3B GPT, 15.8 GB, 29.5 s to save, 51.4 s to the first iteration.
    let c = cellsched_core::elastic::RestartCost::of_size(15.8e9 / 12.0, 15.8e9, &cfg);
    println!("    another H200 (issue 33: 1.3B GPT, 15.8 GB, save 29.5 s, restart 51.4 s): predicted save {:.1} s ({:+.0}%), restart {:.1} s ({:+.0}%)", c.save_s, (c.save_s / 29.5 - 1.0) * 100.0, c.restart_s, (c.restart_s / 51.4 - 1.0) * 100.0);
}

/// One measured table's rows of [`restart_cost`]; held-out errors (save, restart, in %) go to `held`.
fn restart_rows(table: &cellsched_sim::RestartTruth, points: &[Point], gpu: &str, calibration: &[&str], cfg: &cellsched_core::config::ElasticConfig, held: &mut Vec<(f64, f64)>) {
    use cellsched_core::elastic::RestartCost;
    for run in table.runs() {
        let (model, bytes, save, load, restart) = (run.model.as_deref().unwrap_or("?"), run.ckpt_bytes, run.save_s, run.load_s, run.restart_s);
        let c = RestartCost::of_size(bytes / 12.0, bytes, cfg);
        let role = if calibration.contains(&model) { "calibration" } else { "held out" };
        let first_iter = points
            .iter()
            .find(|p| p.dataset == gpu && p.rec.model.split('+').next() == Some(format!("hf:{model}").as_str()) && Some(p.rec.batch) == run.batch)
            .and_then(|p| p.rec.first_iter_s);
        let profiled = first_iter.map(|s| s + bytes / 1e9 / cfg.checkpoint_read_gbs);
        let e = |p: f64, m: f64| (p / m - 1.0) * 100.0;
        println!(
            "    {:<11} {:<11} {:>5.1} GB  save {:>5.1} s predicted {:>5.1} ({:+4.0}%)  restart {:>5.1} s predicted {:>5.1} ({:+4.0}%){}  [load {load:.1} s]",
            model,
            role,
            bytes / 1e9,
            save,
            c.save_s,
            e(c.save_s, save),
            restart,
            c.restart_s,
            e(c.restart_s, restart),
            profiled.map(|p| format!(", with the profiled start {p:.1} ({:+.0}%)", e(p, restart))).unwrap_or_default()
        );
        if role == "held out" {
            held.push((e(c.save_s, save), e(c.restart_s, restart)));
        }
    }
}

/// Scores one protocol and prints its rows.
fn report(points: &[Point], proto: &Protocol, contradictory: &[usize], gpus: &GpuCatalog, models: &ModelCatalog, detail: bool) {
    if detail {
        for s in &proto.splits {
            let (_, cal) = calibrated(points, s, proto.per_job, gpus, models);
            let mut held: Vec<&str> = s.test.iter().map(|i| points[*i].model.as_str()).collect();
            held.dedup();
            for l in cal.map(|c| c.report.to_string()).unwrap_or_default().lines().filter(|l| l.contains("framework (") || l.contains("layout   ")) {
                println!("    fit (testing {}): {}", held.join(","), l.trim());
            }
        }
    }
    let scored = score_protocol(points, proto, gpus, models);
    println!("\n== {} ({} split{}) ==", proto.name, proto.splits.len(), if proto.splits.len() == 1 { "" } else { "s" });
    for (label, pick) in [("estimate (own plan)", Pick::Estimate), ("measured plan", Pick::MeasuredPlan)] {
        println!("  {label}:");
        for r in rows(points, &scored, pick, contradictory) {
            print_row(&r);
        }
    }
    for (label, pick) in [("estimate", Pick::Estimate), ("measured plan", Pick::MeasuredPlan)] {
        let rhos = rank_correlations(points, &scored, pick);
        if !rhos.is_empty() {
            println!(
                "  rho ({label}): jobs={} mean {:.3} median {:.3} min {:.3}",
                rhos.len(),
                rhos.iter().sum::<f64>() / rhos.len() as f64,
                quantile(&rhos, 0.5),
                rhos.iter().copied().fold(f64::INFINITY, f64::min)
            );
        }
    }
    let by = ratio_by_shape(points, &scored);
    if !by.is_empty() {
        println!("  predicted/measured by GPUs and nodes (multi-GPU points, own plan):");
        for ((ds, g, n), v) in &by {
            println!("    {ds} x{g} n{n}: {:.2} (p10 {:.2}, p90 {:.2}, n={})", quantile(v, 0.5), quantile(v, 0.1), quantile(v, 0.9), v.len());
        }
    }
    feasibility(points, &scored);
    if detail {
        for s in &scored {
            let p = &points[s.idx];
            println!(
                "    {:<12} {:<36} {:<5} x{:<2} n{:<2} measured {:>9.4}s estimate {:>9} measured-plan {:>9}{}",
                p.dataset,
                p.job,
                p.rec.gpu_type,
                p.rec.gpus(),
                p.rec.nodes,
                p.rec.iter_time_s,
                s.est.map_or("-".into(), |t| format!("{t:.4}")),
                s.pinned.map_or("-".into(), |t| format!("{:.4}", t.0)),
                if s.pinned.is_some_and(|t| !t.1) { " (predicted not to fit)" } else { "" }
            );
        }
    }
}

/// Every measured point ran, so truth is "fits" for all of them.
fn feasibility(points: &[Point], scored: &[Scored]) {
    let answered = scored.iter().filter(|s| s.est.is_some()).count();
    let refused: Vec<&Scored> = scored.iter().filter(|s| s.est.is_none()).collect();
    let pin_fit = scored.iter().filter(|s| s.pinned.is_some_and(|p| p.1)).count();
    let pin_nofit = scored.iter().filter(|s| s.pinned.is_some_and(|p| !p.1)).count();
    println!("  memory feasibility (truth: all {} scored points ran = fit; no measured infeasible points exist in the data):", scored.len());
    println!(
        "    estimate:      predicted fit {answered:<4} predicted infeasible/unanswered {:<4} -> right on {:.1}%",
        refused.len(),
        answered as f64 * 100.0 / scored.len().max(1) as f64
    );
    println!(
        "    measured plan: predicted fit {pin_fit:<4} predicted not to fit {pin_nofit:<4} -> right on {:.1}%",
        pin_fit as f64 * 100.0 / (pin_fit + pin_nofit).max(1) as f64
    );
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for s in &refused {
        let r = s.est_err.clone().unwrap_or_default();
        let short: String = r.split(':').next().unwrap_or("").chars().take(60).collect();
        *reasons.entry(format!("{} {}", points[s.idx].rec.model, short)).or_default() += 1;
    }
    for (r, n) in reasons.iter().take(8) {
        println!("      unanswered x{n}: {r}");
    }
}

/// Measured peak memory of the H100 runs (NVML, whole process): 25.4–57.7 GiB
/// over the runs (per-run values were not recorded; see shared/README.md).
const H100_PEAK_GIB: (f64, f64) = (25.4, 57.7);

fn memory(points: &[Point], gpus: &GpuCatalog, models: &ModelCatalog) -> Result<()> {
    let t = memory_table(points, gpus, models)?;
    println!("\n== peak memory against NVML (measured plan; needed memory not calibrated; cuDNN autotuning workspace fitted leave one network out) ==");
    if t.held_out.is_empty() {
        println!("    no point records its NVML peak (profile DB column peak_mem_gib)");
    } else {
        let ctx = t.context_gib.map_or("-".into(), |c| format!("{c:.2}"));
        println!("  autotuning workspace measured per fp32 H200 run (NVML peak - allocator peak without autotuning - {ctx} GiB CUDA context, the median NVML - allocator gap of the bf16 runs; bench/truth/h200-conv-memory.csv):");
        for w in &t.workspaces {
            println!("    {:<28} {:>6.2} GiB over {:>8.0} channel pairs of its widest stride-1 k x k convolution: {:>6.0} B a pair", format!("{} bs{}", w.net, w.batch), w.gib, w.pairs, w.gib * (1u64 << 30) as f64 / w.pairs);
        }
        for (net, c) in &t.fits {
            println!("    fitted on {net:<18} {:>6.0} B a pair (median of its runs)", c.bytes_per_channel_pair);
        }
        println!("    built-in default (cellsched-core, fitted on both networks; scores no row below): {:.0} B a pair", cellsched_core::estimator::DEFAULT_BYTES_PER_CHANNEL_PAIR);
        println!("  every row held out: an autotuned fp32 run is scored with the constant fitted on the other network; other rows have no autotuning term (no constant):");
        let line = |r: &cellsched_estbench::memory::MemoryRow| {
            let role = match &r.role {
                Role::NoTerm => "held out (no term)".to_string(),
                Role::HeldOut(on) => format!("held out (fit: {})", on.join("+")),
                Role::Calibration => "calibration".to_string(),
            };
            println!(
                "    {:<36} {:<34} predicted {:>6.1} + {:>5.1} = {:>6.1} GiB, NVML {:>6.1} GiB: {:+.0}%",
                points[r.idx].job,
                role,
                r.required_gib,
                r.workspace_gib,
                r.predicted_gib(),
                r.nvml_gib,
                r.error_pct()
            );
        };
        t.held_out.iter().for_each(line);
        let summary = |label: &str, keep: &dyn Fn(&Point) -> bool| {
            let errs: Vec<f64> = t.held_out.iter().filter(|r| keep(&points[r.idx])).map(|r| r.error_pct()).collect();
            if errs.is_empty() {
                return;
            }
            let within = errs.iter().filter(|e| e.abs() <= 20.0).count();
            println!("    {label}: within +-20% {within} of {} ({:.0}%), median error {:+.1}%", errs.len(), within as f64 * 100.0 / errs.len() as f64, quantile(&errs, 0.5));
        };
        summary("all held-out rows", &|_| true);
        summary("h200 rows only (h100-own ran the same loops on the same GH100 chip: byte-identical NVML peaks, not independent evidence)", &|p| p.dataset == "h200");
        println!("  calibration rows (scored with the constant fitted on their own network; not counted above):");
        t.calibration.iter().for_each(line);
        if !t.without_autotuning.is_empty() {
            println!("  fp32 CNN runs without cuDNN autotuning (allocator peak reserved + context; the needed memory alone):");
            for (net, batch, pred, measured, nvml) in &t.without_autotuning {
                println!("    {:<28} predicted {pred:>6.1} GiB, allocator + context {measured:>6.1} GiB: {:+.0}% (NVML with autotuning {nvml:.1} GiB)", format!("{net} bs{batch}"), (pred / measured - 1.0) * 100.0);
            }
        }
    }
    let est = cellsched_core::estimator::Estimator::new(gpus.clone(), models.clone());
    let h100: Vec<(String, f64)> = points
        .iter()
        .filter(|p| p.dataset == "h100" && p.rec.peak_mem_gib.is_none())
        .filter_map(|p| score_point(&est, models, 0, &p.rec).pinned.map(|(_, _, b)| (p.job.clone(), b as f64 / (1u64 << 30) as f64)))
        .collect();
    if h100.is_empty() {
        return Ok(());
    }
    println!("  H100 runs without a per-run peak (bf16 autocast + AdamW):");
    for (job, gib) in &h100 {
        println!("    {job:<28} predicted peak {gib:>6.1} GiB");
    }
    let lo = h100.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = h100.iter().map(|p| p.1).fold(0.0, f64::max);
    println!(
        "    predicted range {lo:.1}-{hi:.1} GiB vs measured range {:.1}-{:.1} GiB: low end {:+.0}%, high end {:+.0}% (only the range was recorded, not per-run peaks)",
        H100_PEAK_GIB.0,
        H100_PEAK_GIB.1,
        (lo / H100_PEAK_GIB.0 - 1.0) * 100.0,
        (hi / H100_PEAK_GIB.1 - 1.0) * 100.0
    );
    Ok(())
}

fn speed() {
    let s = cellsched_estbench::speed::measure();
    println!("\n== speed (this build; goals: plan search <= 100 us per Cell, rank_cells for 12 GPU types <= 10 ms) ==");
    println!("    full plan search per Cell (cold, no memo): {:.1} us ({} searches)", s.search_us, s.searches);
    println!("    rank_cells, {} GPU types x 4 free nodes, <= 32 GPUs: {:.2} ms per job ({} feasible Cells per job)", s.types, s.rank_ms, s.cells_per_job);
}
