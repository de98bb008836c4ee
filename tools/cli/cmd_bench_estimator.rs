//! `cellsched bench estimator`: the estimator's error on every measured point
//! in `../shared/data` (Gavel k80/p100/v100, Rubick A800, H100), scored with
//! held-out protocols, plus the plan-search and `rank_cells` speed.
//!
//! Measured points are truth; the estimator's output is knowledge. A point is
//! never scored by an estimator calibrated with it:
//! - `datasheet`: no calibration, every point;
//! - `(a) single-GPU calibration`: calibrate with every single-GPU point, score every multi-GPU point;
//! - `(b) leave one model out`: for each model, calibrate with every point of the
//!   other models plus the model's single-GPU points, score its multi-GPU points;
//! - `(c) unseen model`: for each model, calibrate with the other models only,
//!   score its single-GPU points (the only protocol that scores the H100 runs);
//! - `(d) job history`: for each job (model and per-GPU batch), calibrate as
//!   (b) does (every point of the other models, the model's single-GPU points)
//!   plus the job's multi-GPU points at its smallest multi-GPU count (Gavel: 2
//!   GPUs in one node and over two nodes, so 3 configurations with the
//!   single-GPU one), score its larger Cells; scored with the per-job refit
//!   and without it, and (b) on the same points.
//!
//! Gavel's runs are described as trained (a fixed micro-batch of the batch
//! size per worker, no gradient accumulation: `<model>+gavel-mbN`).
//! Rubick's runs are described as trained (fp32 on TF32 tensor cores, the
//! ZeRO-Offload runs with `offload = true`, registered as
//! `<model>+rubick[+offload]`); for leave-one-model-out they count as the
//! same model as its other runs.
//!
//! Each point is scored two ways: `estimate` (the plan the estimator picks, as
//! `cellsched estimate` answers) and `measured plan` (the cost of the plan that
//! was measured, where it is known).
use anyhow::{bail, Context, Result};
use cellsched_core::cell::{Cell, Plan};
use cellsched_core::estimator::{quantile, spearman, weak_scaling_contradictions, Calibration, CalibrationPolicy, CONTRADICTION_TOLERANCE};
use cellsched_core::estimator::{CellOffer, Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::{ModelCatalog, ModelFamily, ModelSpec, Optimizer, Precision, Recompute, Runtime};
use cellsched_core::profile_db::{parse_csv, ProfileRecord};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `cellsched bench estimator`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory with the reference data (`gavel/`, `rubick-a800/`, `h100/`);
    /// default `$CELLSCHED_SHARED_DATA`, else `../shared/data`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Print every scored point (protocol, dataset, job, measured, predicted).
    #[arg(long)]
    detail: bool,
    /// Skip the accuracy part; time the estimator only.
    #[arg(long)]
    speed_only: bool,
}

/// One measured point and the job (model + per-GPU work) it belongs to.
#[derive(Debug, Clone)]
pub struct Point {
    /// `gavel`, `rubick-a800` or `h100`.
    pub dataset: &'static str,
    /// Job key for rank correlation across Cells (same model and per-GPU batch).
    pub job: String,
    /// Canonical model name (the unit of leave-one-model-out).
    pub model: String,
    /// The measurement.
    pub rec: ProfileRecord,
    /// False when the measured configuration cannot be described to the
    /// estimator: scored, never used to calibrate.
    pub calibratable: bool,
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

/// How the H100 runs were trained (`h100/train.py`): Hugging Face GPT-2/BERT
/// in PyTorch eager with bf16 autocast and AdamW, no recomputation, with the
/// dimensions of the catalog entry of the same name at the time of the runs
/// (BERT then had sequence length 512 and vocabulary 30522). Registered in
/// `models` as `hf:<name>`; returns that name.
pub fn h100_model(models: &mut ModelCatalog, name: &str) -> Result<String> {
    register_variant(models, name, |m| {
        m.name = format!("hf:{}", m.name);
        m.precision = Precision::Bf16;
        m.optimizer = Optimizer::Adam;
        m.recompute = Recompute::Off;
        m.runtime = Runtime::Ddp;
        m.grad_overlap = None;
        if m.family == ModelFamily::Bert {
            m.seq_len = 512;
            m.vocab = 30522;
        }
    })
}

/// Registers in `models` a variant of the catalog model `name` as `describe`
/// renames and describes it (a variant registered again is replaced by the
/// same description); returns the variant's name.
fn register_variant(models: &mut ModelCatalog, name: &str, describe: impl FnOnce(&mut ModelSpec)) -> Result<String> {
    let mut m = models.get(name)?.clone();
    describe(&mut m);
    let out = m.name.clone();
    models.insert(m, &[]);
    Ok(out)
}

/// How Gavel's throughputs were measured: its PyTorch workloads train data
/// parallel with the batch size per worker as given (`--batch_size`), no
/// gradient accumulation, so every iteration computes one micro-batch of
/// `per_gpu` samples on each GPU. Registered as `<name>+gavel-mb<per_gpu>`,
/// a variant of the same network with that fixed micro-batch; returns that name.
pub fn gavel_model(models: &mut ModelCatalog, name: &str, per_gpu: u32) -> Result<String> {
    register_variant(models, name, |m| {
        m.name = format!("{}+gavel-mb{per_gpu}", m.name);
        m.micro_batch = Some(per_gpu.max(1));
    })
}

/// How Rubick's A800 runs were trained: the catalog model in fp32 on TF32
/// tensor cores (the artifact's Megatron-DeepSpeed configs disable fp16 and
/// its Hugging Face runs pass no `--fp16`; the measured forward passes run at
/// ~50 TFLOP/s, above the A800's 19.5 TFLOP/s fp32 peak), at the fixed
/// `micro_batch` of its DeepSpeed config (`train_micro_batch_size_per_gpu`,
/// the `batch_size` column), with ZeRO-Offload (optimizer states and step on
/// the host) when `offload`, and activation recomputation always on when
/// `recompute` (the artifact's "ZeRO-Offload+GC" runs). Registered as `<name>+rubick[+offload]`, a
/// variant of the same network; returns that name.
pub fn rubick_model(models: &mut ModelCatalog, name: &str, offload: bool, recompute: bool, micro_batch: u32) -> Result<String> {
    register_variant(models, name, |m| {
        m.name = format!("{}+rubick{}", m.name, if offload { "+offload" } else { "" });
        m.precision = Precision::Tf32;
        m.micro_batch = Some(micro_batch);
        m.offload = offload;
        if recompute {
            m.recompute = Recompute::Full;
        }
    })
}

/// Loads every measured point under `dir`; datasets that are absent are
/// skipped. Adds the H100 runs' model descriptions to `models`.
pub fn load_points(dir: &Path, models: &mut ModelCatalog) -> Result<Vec<Point>> {
    let mut out = Vec::new();
    let gavel = dir.join("gavel/simulation_throughputs.json");
    if gavel.is_file() {
        let text = std::fs::read_to_string(&gavel).with_context(|| format!("reading {}", gavel.display()))?;
        out.extend(gavel_points(&text).with_context(|| format!("parsing {}", gavel.display()))?);
    }
    out.extend(rubick_points(&dir.join("rubick-a800"))?);
    let h100 = dir.join("h100/measured-iter-times.csv");
    if h100.is_file() {
        let text = std::fs::read_to_string(&h100).with_context(|| format!("reading {}", h100.display()))?;
        for mut rec in parse_csv(&text, &h100.display().to_string())? {
            rec.model = h100_model(models, &rec.model)?;
            let per_gpu = rec.batch / rec.gpus().max(1);
            out.push(Point { dataset: "h100", job: format!("h100:{} bs{per_gpu}", rec.model), model: String::new(), rec, calibratable: true });
        }
    }
    for p in &mut out {
        if p.dataset == "gavel" {
            let per_gpu = p.rec.batch / p.rec.gpus().max(1);
            p.rec.model = gavel_model(models, &p.rec.model, per_gpu)?;
        }
        if p.dataset == "rubick-a800" {
            let gc = p.rec.plan.is_some_and(|pl| pl.checkpointing);
            let mbs = p.rec.plan.map_or(1, |pl| p.rec.batch / (pl.dp * pl.micro_batches).max(1));
            p.rec.model = rubick_model(models, &p.rec.model, p.job.ends_with("-offload"), gc, mbs)?;
        }
        let name = models.canonical_name(&p.rec.model).unwrap_or(&p.rec.model).to_string();
        // A variant (`+gavel-mbN`, `+rubick`, `+offload`) is the same network as the model's other runs.
        p.model = name.split('+').next().unwrap_or(&name).to_string();
    }
    Ok(out)
}

/// Gavel: `('<Model> (batch size N)', scale)` → aggregate steps/s of `scale`
/// data-parallel workers with batch N each (weak scaling): one synchronous
/// iteration of global batch N × scale takes scale / throughput seconds.
/// `<type>_unconsolidated` tables are the same jobs with the workers spread
/// over servers: one GPU per node, `scale` nodes.
pub fn gavel_points(text: &str) -> Result<Vec<Point>> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let Some(types) = v.as_object() else { bail!("expected an object of GPU types") };
    let mut out = Vec::new();
    for (gpu, table) in types {
        let Some(obj) = table.as_object() else { continue };
        let (gpu_type, spread) = match gpu.strip_suffix("_unconsolidated") {
            Some(t) => (t.to_string(), true),
            None => (gpu.clone(), false),
        };
        for (key, val) in obj {
            let Some(tput) = val.get("null").and_then(|x| x.as_f64()).filter(|t| *t > 0.0) else { continue };
            let inner = key.trim_start_matches("('");
            let Some((name, rest)) = inner.split_once("',") else { bail!("unexpected key {key}") };
            let scale: u32 = rest.trim().trim_end_matches(')').trim().parse().with_context(|| format!("scale factor in key {key}"))?;
            let (model, bs) = match name.split_once(" (batch size ") {
                Some((m, b)) => (m.to_string(), b.trim_end_matches(')').parse::<u32>().with_context(|| format!("batch size in key {key}"))?),
                None => (name.to_string(), 1),
            };
            out.push(Point {
                dataset: "gavel",
                job: format!("gavel:{model} bs{bs}"),
                model: String::new(),
                calibratable: true,
                rec: ProfileRecord {
                    model: model.to_ascii_lowercase(),
                    batch: bs * scale,
                    gpu_type: gpu_type.clone(),
                    nodes: if spread { scale } else { 1 },
                    gpus_per_node: if spread { 1 } else { scale },
                    iter_time_s: scale as f64 / tput,
                    plan: Some(Plan { dp: scale, ..Plan::default() }),
                    peak_mem_gib: None,
                },
            });
        }
    }
    Ok(out)
}

/// Rubick A800: `config.csv` + `data.csv` rows in the same order (iteration
/// time in ms). The global batch is fixed per model, as in the `BATCH_SIZE`
/// of Rubick's validate scripts (bert 32, gpt2 16, roberta 64, t5 16, vit 64,
/// llama7b 8; the forward times, which halve with every doubling of GPUs,
/// show the batch is fixed) and split into micro-batches of `batch_size` per
/// GPU; `num_cpu_threads > 1` marks a ZeRO-Offload run (described by
/// `load_points` as `<model>+rubick+offload`), which for gpt2, t5 and llama7b
/// recomputes activations (the scripts' "ZeRO-Offload+GC").
pub fn rubick_points(dir: &Path) -> Result<Vec<Point>> {
    let global: [(&str, u32); 6] = [("bert", 32), ("gpt2", 16), ("roberta", 64), ("t5", 16), ("vit", 64), ("llama7b", 8)];
    let offload_recomputes = ["gpt2", "t5", "llama7b"];
    let mut out = Vec::new();
    for (model, g) in global {
        let (cfg_path, data_path) = (dir.join(model).join("config.csv"), dir.join(model).join("data.csv"));
        if !cfg_path.is_file() {
            continue;
        }
        let cfg = std::fs::read_to_string(&cfg_path).with_context(|| format!("reading {}", cfg_path.display()))?;
        let data = std::fs::read_to_string(&data_path).with_context(|| format!("reading {}", data_path.display()))?;
        for (i, (c, d)) in cfg.lines().skip(1).zip(data.lines().skip(1)).enumerate() {
            let nums = |s: &str, path: &Path| -> Result<Vec<f64>> {
                s.split(',').map(|x| x.trim().parse::<f64>().with_context(|| format!("{}:{}: not a number: '{x}'", path.display(), i + 2))).collect()
            };
            let (c, d) = (nums(c, &cfg_path)?, nums(d, &data_path)?);
            if c.len() < 9 || d.len() < 4 {
                bail!("{}:{}: expected 9 config and 4+ data columns", cfg_path.display(), i + 2);
            }
            let (nodes, gpus, mbs_col, threads, zero) = (c[0] as u32, c[1] as u32, c[3] as u32, c[5] as u32, c[6] as u8);
            let per_gpu = (g / gpus.max(1)).max(1);
            let mbs = mbs_col.clamp(1, per_gpu);
            let offload = threads > 1;
            out.push(Point {
                dataset: "rubick-a800",
                job: format!("rubick:{model} zero{zero}{}", if offload { "-offload" } else { "" }),
                model: String::new(),
                calibratable: true,
                rec: ProfileRecord {
                    model: model.into(),
                    batch: g,
                    gpu_type: "a800".into(),
                    nodes: nodes.max(1),
                    gpus_per_node: gpus / nodes.max(1),
                    iter_time_s: d[3] / 1000.0,
                    plan: Some(Plan {
                        dp: gpus,
                        tp: 1,
                        pp: 1,
                        micro_batches: (per_gpu / mbs).max(1),
                        zero_stage: zero.min(3),
                        checkpointing: offload && offload_recomputes.contains(&model),
                    }),
                    peak_mem_gib: None,
                },
            });
        }
    }
    Ok(out)
}

/// One calibration/test split: indices into the points.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Points the estimator may calibrate with (knowledge).
    pub calibrate: Vec<usize>,
    /// Points scored (truth), disjoint from `calibrate`.
    pub test: Vec<usize>,
}

/// A named protocol: one or more splits.
#[derive(Debug, Clone)]
pub struct Protocol {
    /// Name printed in the report.
    pub name: &'static str,
    /// Its splits.
    pub splits: Vec<Split>,
    /// Whether calibration may refit per job (level 4 of the calibration).
    pub per_job: bool,
}

/// The protocols of the module doc over `points` (points that are not
/// calibratable are only ever tested).
pub fn protocols(points: &[Point]) -> Vec<Protocol> {
    let all: Vec<usize> = (0..points.len()).collect();
    let usable: Vec<usize> = all.iter().copied().filter(|i| points[*i].calibratable).collect();
    let single = |i: &usize| points[*i].rec.gpus() == 1;
    let mut models: Vec<&str> = points.iter().map(|p| p.model.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let mut b = Vec::new();
    let mut c = Vec::new();
    for m in models {
        let of = |i: &usize| points[*i].model == m;
        let test_b: Vec<usize> = all.iter().copied().filter(|i| of(i) && !single(i)).collect();
        if !test_b.is_empty() {
            b.push(Split { calibrate: usable.iter().copied().filter(|i| !of(i) || single(i)).collect(), test: test_b });
        }
        let test_c: Vec<usize> = all.iter().copied().filter(|i| of(i) && single(i)).collect();
        if !test_c.is_empty() {
            c.push(Split { calibrate: usable.iter().copied().filter(|i| !of(i)).collect(), test: test_c });
        }
    }
    let singles: Vec<usize> = usable.iter().copied().filter(single).collect();
    let mut jobs: Vec<&str> = points.iter().map(|p| p.job.as_str()).collect();
    jobs.sort_unstable();
    jobs.dedup();
    let mut d = Vec::new();
    for j in jobs {
        let of = |i: &usize| points[*i].job == j && !single(i);
        let Some(smallest) = usable.iter().filter(|i| of(i)).map(|i| points[*i].rec.gpus()).min() else { continue };
        let history: Vec<usize> = usable.iter().copied().filter(|i| of(i) && points[*i].rec.gpus() == smallest).collect();
        let test: Vec<usize> = all.iter().copied().filter(|i| of(i) && points[*i].rec.gpus() > smallest).collect();
        if !test.is_empty() {
            // The profile DB as a site has it: every point of the other models,
            // the model's single-GPU points and this job's history.
            let model = points[test[0]].model.as_str();
            let mut calibrate: Vec<usize> = usable.iter().copied().filter(|i| points[*i].model != model || single(i)).collect();
            calibrate.extend(history);
            calibrate.sort_unstable();
            d.push(Split { calibrate, test });
        }
    }
    // (b)'s splits restricted to the points (d) scores.
    let d_tests: Vec<usize> = d.iter().flat_map(|s| s.test.iter().copied()).collect();
    let b_on_d: Vec<Split> = b
        .iter()
        .map(|s| Split { calibrate: s.calibrate.clone(), test: s.test.iter().copied().filter(|i| d_tests.contains(i)).collect() })
        .filter(|s| !s.test.is_empty())
        .collect();
    vec![
        Protocol { name: "datasheet (no calibration), all points", splits: vec![Split { calibrate: vec![], test: all.clone() }], per_job: true },
        Protocol {
            name: "(a) calibrate with single-GPU points, test multi-GPU points",
            splits: vec![Split { calibrate: singles.clone(), test: all.iter().copied().filter(|i| !single(i)).collect() }],
            per_job: true,
        },
        Protocol { name: "(b) leave one model out (other models + its single-GPU points), test its multi-GPU points", splits: b, per_job: true },
        Protocol { name: "(c) unseen model (other models only), test its single-GPU points", splits: c, per_job: true },
        Protocol { name: "(d) job history ((b) + the job's smallest multi-GPU Cells), test its larger Cells, per-job refit", splits: d.clone(), per_job: true },
        Protocol { name: "(d) the same, without the per-job refit", splits: d, per_job: false },
        Protocol { name: "(d) baseline: (b) scored on (d)'s test points", splits: b_on_d, per_job: true },
    ]
}

/// A scored point.
#[derive(Debug, Clone)]
struct Scored {
    idx: usize,
    /// `estimate()` answer: iteration time, or None when judged infeasible/unanswerable.
    est: Option<f64>,
    /// Why `estimate()` gave no answer.
    est_err: Option<String>,
    /// Measured plan's cost: (time, fits, peak bytes).
    pinned: Option<(f64, bool, u64)>,
}

fn score_split(points: &[Point], split: &Split, per_job: bool, detail: bool, gpus: &GpuCatalog, models: &ModelCatalog) -> Vec<Scored> {
    let base = Estimator::new(gpus.clone(), models.clone());
    let est = if split.calibrate.is_empty() {
        base
    } else {
        let policy = CalibrationPolicy { single_node_only: false, max_gpus: None, per_model: true, per_job };
        let cal = Calibration::fit(&base, split.calibrate.iter().map(|i| &points[*i].rec), &policy);
        if detail {
            let held: Vec<&str> = {
                let mut m: Vec<&str> = split.test.iter().map(|i| points[*i].model.as_str()).collect();
                m.dedup();
                m
            };
            for l in cal.report.to_string().lines().filter(|l| l.contains("framework (") || l.contains("layout   ")) {
                println!("    fit (testing {}): {}", held.join(","), l.trim());
            }
        }
        Estimator::new(gpus.clone(), models.clone()).with_calibration(cal)
    };
    split.test.iter().map(|&i| score_point(&est, models, i, &points[i].rec)).collect()
}

fn score_point(est: &Estimator, models: &ModelCatalog, idx: usize, rec: &ProfileRecord) -> Scored {
    let mut s = Scored { idx, est: None, est_err: None, pinned: None };
    let model = match models.get(&rec.model) {
        Ok(m) => m.clone(),
        Err(e) => {
            s.est_err = Some(e.to_string());
            return s;
        }
    };
    let job = JobSpec { model, global_batch: rec.batch };
    let stages = rec.plan.map_or(1, |p| p.pp);
    match Cell::new(&rec.gpu_type, rec.gpus(), stages).and_then(|cell| est.estimate(&job, &cell, rec.gpus_per_node)) {
        Ok(e) => s.est = Some(e.iter_time_s),
        Err(e) => s.est_err = Some(e.to_string()),
    }
    if let Some(plan) = rec.plan {
        if let Ok(ev) = Cell::new(&rec.gpu_type, rec.gpus(), plan.pp).and_then(|cell| est.evaluate_plan(&job, &cell, rec.gpus_per_node, &plan)) {
            s.pinned = Some((ev.iter_time_s, ev.fits, ev.mem_per_gpu_bytes));
        }
    }
    s
}

fn ape(pred: f64, truth: f64) -> f64 {
    (pred - truth).abs() / truth * 100.0
}

fn line(label: &str, v: &[f64]) -> String {
    if v.is_empty() {
        return format!("    {label:<22} n=0");
    }
    format!("    {label:<22} n={:<4} median APE {:>6.1}%  p90 APE {:>6.1}%", v.len(), quantile(v, 0.5), quantile(v, 0.9))
}

/// Spearman ρ of per-sample time across the Cells of each job with ≥ 3 scored Cells.
fn rank_correlations(points: &[Point], scored: &[Scored], pick: impl Fn(&Scored) -> Option<f64>) -> Vec<f64> {
    let mut by_job: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for s in scored {
        let p = &points[s.idx];
        if let Some(pred) = pick(s) {
            let e = by_job.entry(&p.job).or_default();
            e.0.push(pred / p.rec.batch as f64);
            e.1.push(p.rec.iter_time_s / p.rec.batch as f64);
        }
    }
    by_job.values().filter(|(a, _)| a.len() >= 3).filter_map(|(a, b)| spearman(a, b)).collect()
}

fn accuracy(dir: &Path, detail: bool) -> Result<()> {
    let (gpus, mut models) = (GpuCatalog::builtin(), ModelCatalog::builtin());
    let points = load_points(dir, &mut models)?;
    let count = |d: &str| points.iter().filter(|p| p.dataset == d).count();
    println!(
        "bench estimator: {} measured points from {} ({} Gavel k80/p100/v100, {} Rubick A800, {} H100); {} single-GPU, {} multi-GPU",
        points.len(),
        dir.display(),
        count("gavel"),
        count("rubick-a800"),
        count("h100"),
        points.iter().filter(|p| p.rec.gpus() == 1).count(),
        points.iter().filter(|p| p.rec.gpus() > 1).count()
    );
    println!("APE = |predicted - measured| / measured; rho = Spearman rank correlation of per-sample time across the Cells of one job (jobs with >= 3 scored Cells).");
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
        let scored: Vec<Scored> = proto.splits.iter().flat_map(|s| score_split(&points, s, proto.per_job, detail, &gpus, &models)).collect();
        println!("\n== {} ({} split{}) ==", proto.name, proto.splits.len(), if proto.splits.len() == 1 { "" } else { "s" });
        let est_ape: Vec<(usize, f64)> = scored.iter().filter_map(|s| s.est.map(|t| (s.idx, ape(t, points[s.idx].rec.iter_time_s)))).collect();
        let pin_ape: Vec<(usize, f64)> = scored.iter().filter_map(|s| s.pinned.map(|(t, _, _)| (s.idx, ape(t, points[s.idx].rec.iter_time_s)))).collect();
        for (label, v) in [("estimate (own plan)", &est_ape), ("measured plan", &pin_ape)] {
            println!("  {label}:");
            println!("{}", line("all", &v.iter().map(|x| x.1).collect::<Vec<_>>()));
            let consistent: Vec<f64> = v.iter().filter(|(i, _)| contradictory.binary_search(i).is_err()).map(|x| x.1).collect();
            if consistent.len() < v.len() {
                println!("{}", line("w/o contradictory", &consistent));
            }
            for ds in ["gavel", "rubick-a800", "h100"] {
                let sub: Vec<f64> = v.iter().filter(|(i, _)| points[*i].dataset == ds).map(|x| x.1).collect();
                if !sub.is_empty() {
                    println!("{}", line(ds, &sub));
                }
                let described: Vec<f64> = v.iter().filter(|(i, _)| points[*i].dataset == ds && !points[*i].job.ends_with("-offload")).map(|x| x.1).collect();
                if !described.is_empty() && described.len() < sub.len() {
                    println!("{}", line(&format!("{ds} w/o offload"), &described));
                }
            }
        }
        for (label, rhos) in [
            ("estimate", rank_correlations(&points, &scored, |s| s.est)),
            ("measured plan", rank_correlations(&points, &scored, |s| s.pinned.map(|p| p.0))),
        ] {
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
        ratio_by_shape(&points, &scored);
        // Every measured point ran, so truth is "fits" for all of them.
        let answered = scored.iter().filter(|s| s.est.is_some()).count();
        let refused: Vec<&Scored> = scored.iter().filter(|s| s.est.is_none()).collect();
        let pin_fit = scored.iter().filter(|s| s.pinned.is_some_and(|p| p.1)).count();
        let pin_nofit = scored.iter().filter(|s| s.pinned.is_some_and(|p| !p.1)).count();
        println!(
            "  memory feasibility (truth: all {} scored points ran = fit; no measured infeasible points exist in the data):",
            scored.len()
        );
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
    h100_memory(&points, &gpus, &models);
    Ok(())
}

/// Truth checked against itself, no estimator involved: the multi-GPU points
/// of in-node weak-scaling series (same job, GPU type and per-GPU batch) in
/// which an iteration on more GPUs is clearly faster than on fewer
/// ([`weak_scaling_contradictions`], as calibration warns of them).
pub fn contradictory_points(points: &[Point]) -> Vec<usize> {
    let keyed: Vec<(&str, &ProfileRecord)> = points.iter().map(|p| (p.job.as_str(), &p.rec)).collect();
    weak_scaling_contradictions(&keyed)
}

/// Diagnostic: median predicted/measured ratio (own plan) by dataset, GPU
/// count and nodes spanned, for multi-GPU points (below 1: the estimator is
/// optimistic there).
fn ratio_by_shape(points: &[Point], scored: &[Scored]) {
    let mut by: BTreeMap<(&str, u32, u32), Vec<f64>> = BTreeMap::new();
    for s in scored {
        let p = &points[s.idx];
        if let (Some(t), true) = (s.est, p.rec.gpus() > 1) {
            by.entry((p.dataset, p.rec.gpus(), p.rec.nodes)).or_default().push(t / p.rec.iter_time_s);
        }
    }
    if by.is_empty() {
        return;
    }
    println!("  predicted/measured by GPUs and nodes (multi-GPU points, own plan):");
    for ((ds, g, n), v) in &by {
        println!("    {ds} x{g} n{n}: {:.2} (p10 {:.2}, p90 {:.2}, n={})", quantile(v, 0.5), quantile(v, 0.1), quantile(v, 0.9), v.len());
    }
}

/// Measured peak memory of the H100 runs (NVML, whole process): 25.4–57.7 GiB
/// over the runs (per-run values were not recorded; see shared/README.md).
const H100_PEAK_GIB: (f64, f64) = (25.4, 57.7);

fn h100_memory(points: &[Point], gpus: &GpuCatalog, models: &ModelCatalog) {
    let est = Estimator::new(gpus.clone(), models.clone());
    let mut peaks = Vec::new();
    for p in points.iter().filter(|p| p.dataset == "h100") {
        let s = score_point(&est, models, 0, &p.rec);
        if let Some((_, _, bytes)) = s.pinned {
            peaks.push((p.job.clone(), bytes as f64 / (1u64 << 30) as f64));
        }
    }
    if peaks.is_empty() {
        return;
    }
    println!("\n== H100 peak memory (measured plan, bf16 autocast + AdamW) ==");
    for (job, gib) in &peaks {
        println!("    {job:<28} predicted peak {gib:>6.1} GiB");
    }
    let lo = peaks.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = peaks.iter().map(|p| p.1).fold(0.0, f64::max);
    println!(
        "    predicted range {lo:.1}-{hi:.1} GiB vs measured range {:.1}-{:.1} GiB: low end {:+.0}%, high end {:+.0}% (only the range was recorded, not per-run peaks)",
        H100_PEAK_GIB.0,
        H100_PEAK_GIB.1,
        (lo / H100_PEAK_GIB.0 - 1.0) * 100.0,
        (hi / H100_PEAK_GIB.1 - 1.0) * 100.0
    );
}

/// Times a full plan search per Cell (cold: fresh estimator, no memo) and
/// `rank_cells` over every GPU type of the built-in catalog.
fn speed() {
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
    let cold_us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
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
    let per_rank_ms = t1.elapsed().as_secs_f64() * 1e3 / (rank_rounds * jobs.len()) as f64;
    println!("\n== speed (this build; goals: plan search <= 100 us per Cell, rank_cells for 12 GPU types <= 10 ms) ==");
    println!("    full plan search per Cell (cold, no memo): {cold_us:.1} us ({n} searches)");
    println!(
        "    rank_cells, {} GPU types x 4 free nodes, <= 32 GPUs: {per_rank_ms:.2} ms per job ({} feasible Cells per job)",
        offers.len(),
        cells_seen / (rank_rounds * jobs.len()).max(1)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(model: &str, gpus: u32) -> Point {
        Point {
            calibratable: true,
            dataset: "gavel",
            job: format!("j:{model}"),
            model: model.into(),
            rec: ProfileRecord { model: model.into(), batch: 8 * gpus, gpu_type: "v100".into(), nodes: 1, gpus_per_node: gpus, iter_time_s: 0.1, plan: None, peak_mem_gib: None },
        }
    }

    #[test]
    fn gavel_keys_become_weak_scaling_points() {
        let text = r#"{"v100": {"('ResNet-50 (batch size 64)', 4)": {"null": 8.0, "x": [1, 2]}, "('A3C', 1)": {"null": 2.0}},
                       "v100_unconsolidated": {"('ResNet-50 (batch size 64)', 4)": {"null": 6.0}}}"#;
        let pts = gavel_points(text).unwrap();
        let r = pts.iter().find(|p| p.rec.model == "resnet-50" && p.rec.nodes == 1).unwrap();
        assert_eq!((r.rec.batch, r.rec.gpus_per_node), (256, 4));
        let spread = pts.iter().find(|p| p.rec.model == "resnet-50" && p.rec.nodes == 4).unwrap();
        assert_eq!((spread.rec.gpu_type.as_str(), spread.rec.gpus_per_node, spread.job.as_str()), ("v100", 1, r.job.as_str()));
        assert!((r.rec.iter_time_s - 0.5).abs() < 1e-12);
        assert_eq!(r.rec.plan.unwrap().dp, 4);
        assert!(gavel_points("{\"v100\": {\"('X', many)\": {\"null\": 1.0}}}").is_err());
    }

    /// No protocol ever scores a point it calibrated with, (a) tests exactly
    /// the multi-GPU points and (b) never calibrates with the held-out model's
    /// multi-GPU points.
    #[test]
    fn protocols_never_score_calibration_points() {
        let mut points = vec![pt("m1", 1), pt("m1", 2), pt("m1", 4), pt("m2", 1), pt("m2", 8), pt("m3", 1), pt("m3", 2)];
        points[6].calibratable = false;
        let ps = protocols(&points);
        assert_eq!(ps.len(), 7);
        for p in &ps {
            for s in &p.splits {
                assert!(s.test.iter().all(|t| !s.calibrate.contains(t)), "{}", p.name);
                assert!(!s.test.is_empty());
            }
        }
        assert_eq!(ps[1].splits[0].test, vec![1, 2, 4, 6]);
        assert_eq!(ps[1].splits[0].calibrate, vec![0, 3, 5]);
        let b = &ps[2].splits;
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].test, vec![1, 2]);
        // m3's uncalibratable point is tested in its own split, never calibrates another's.
        assert_eq!(b[0].calibrate, vec![0, 3, 4, 5]);
        assert_eq!(b[2].test, vec![6]);
        let c = &ps[3].splits;
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].calibrate, vec![3, 4, 5]);
        // (d): m1's history is its 2-GPU point (beside (b)'s calibration set:
        // other models' points and m1's single-GPU one), its 4-GPU point is
        // scored; m2 and m3 have no larger Cell to score.
        let d = &ps[4].splits;
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].calibrate.clone(), d[0].test.clone()), (vec![0, 1, 3, 4, 5], vec![2]));
        assert!(ps[4].per_job && !ps[5].per_job && ps[5].splits == ps[4].splits);
        assert_eq!(ps[6].splits, vec![Split { calibrate: b[0].calibrate.clone(), test: vec![2] }]);
    }

    /// The bench keys series by job: a job whose 4-GPU iteration is slower
    /// than its 8-GPU one has its multi-GPU points reported.
    #[test]
    fn contradictory_points_are_keyed_by_job() {
        let mut points = Vec::new();
        for (job, times) in [("bad", [0.10, 0.10, 0.30, 0.12]), ("good", [0.10, 0.11, 0.13, 0.15])] {
            for (g, t) in [1, 2, 4, 8].into_iter().zip(times) {
                let mut p = pt(job, g);
                p.rec.iter_time_s = t;
                points.push(p);
            }
        }
        assert_eq!(contradictory_points(&points), vec![1, 2, 3]);
    }

    /// A Gavel job is the catalog network with its per-worker batch as a
    /// fixed micro-batch; registering it twice gives the same variant.
    #[test]
    fn gavel_jobs_are_described_with_their_fixed_micro_batch() {
        let mut models = ModelCatalog::builtin();
        let name = gavel_model(&mut models, "resnet-50", 64).unwrap();
        assert_eq!(name, format!("{}+gavel-mb64", models.canonical_name("resnet-50").unwrap_or("resnet-50")));
        assert_eq!(models.get(&name).unwrap().micro_batch, Some(64));
        assert_eq!(gavel_model(&mut models, "resnet-50", 64).unwrap(), name);
        assert!(gavel_model(&mut models, "no_such_network", 8).is_err());
    }

    #[test]
    fn rubick_rows_pair_config_and_data() {
        let d = std::env::temp_dir().join(format!("cs-bench-est-{}", std::process::id()));
        std::fs::create_dir_all(d.join("bert")).unwrap();
        std::fs::write(d.join("bert/config.csv"), "nodes,gpus,p,batch_size,s,threads,zero,tp,pp\n1,4,320,1,1,4,1,0,0\n").unwrap();
        std::fs::write(d.join("bert/data.csv"), "f,c,o,iter_time,s\n1,2,3,250,1111\n").unwrap();
        let pts = rubick_points(&d).unwrap();
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].job, "rubick:bert zero1-offload");
        assert!((pts[0].rec.iter_time_s - 0.25).abs() < 1e-12);
        assert_eq!(pts[0].rec.plan.unwrap().micro_batches, 8);
        std::fs::write(d.join("bert/data.csv"), "f,c,o,iter_time,s\n1,2,x,250,1111\n").unwrap();
        let e = rubick_points(&d).unwrap_err().to_string();
        assert!(e.contains("data.csv:2"), "{e}");
        std::fs::remove_dir_all(&d).ok();
    }
}
