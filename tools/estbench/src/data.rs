//! The measured reference data (truth) and how each dataset trained its
//! runs. Gavel's runs are described as trained (a fixed micro-batch of the
//! batch size per worker, no gradient accumulation: `<model>+gavel-mbN`);
//! Rubick's as fp32 on TF32 tensor cores with the ZeRO-Offload runs as
//! `offload = true` (`<model>+rubick[+offload]`); the H100 runs as Hugging
//! Face models in bf16 autocast with AdamW (`hf:<model>`). A variant is the
//! same network as its model's other runs (one unit for leave-one-model-out).
use crate::error::{read, BenchError};
use cellsched_core::cell::Plan;
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::{Attention, ModelCatalog, ModelFamily, ModelSpec, Optimizer, Precision, Recompute, Runtime};
use cellsched_core::profile_db::{parse_csv, ProfileRecord};
use std::path::Path;

/// One measured point and the job (model + per-GPU work) it belongs to.
#[derive(Debug, Clone)]
pub struct Point {
    /// `gavel`, `rubick-a800` or `h100`.
    pub dataset: &'static str,
    /// Job key for rank correlation across Cells (same model and per-GPU batch).
    pub job: String,
    /// Canonical model name (the unit of leave-one-model-out).
    pub model: String,
    /// The model's family (rows per family).
    pub family: ModelFamily,
    /// The measurement.
    pub rec: ProfileRecord,
    /// False when the measured configuration cannot be described to the
    /// estimator: scored, never used to calibrate.
    pub calibratable: bool,
}

impl Point {
    /// A point of `dataset` and `job`; [`load_points`] fills in the model and family.
    pub fn new(dataset: &'static str, job: String, rec: ProfileRecord) -> Point {
        Point { dataset, job, model: String::new(), family: ModelFamily::Generic, rec, calibratable: true }
    }
}

/// How the H100 runs were trained (`h100/train.py`): Hugging Face GPT-2/BERT
/// in PyTorch eager with bf16 autocast and AdamW, no recomputation, GPT-2's
/// tanh GELU unfused (8 element-wise kernels), with the dimensions of the catalog entry of the same name at the time of the runs
/// (BERT then had sequence length 512 and vocabulary 30522). Registered in
/// `models` as `hf:<name>`; returns that name.
pub fn h100_model(models: &mut ModelCatalog, name: &str) -> Result<String, BenchError> {
    register_variant(models, name, |m| {
        m.name = format!("hf:{}", m.name);
        m.precision = Precision::Bf16;
        m.optimizer = Optimizer::Adam;
        m.recompute = Recompute::Off;
        m.runtime = Runtime::Ddp;
        m.grad_overlap = None;
        match m.family {
            ModelFamily::Bert => {
                m.seq_len = 512;
                m.vocab = 30522;
            }
            // GPT2Config's default activation, gelu_new, is the tanh formula
            // in 8 PyTorch operations (BERT's gelu is one fused kernel).
            ModelFamily::Gpt => m.activation_kernels = 8,
            _ => {}
        }
    })
}

/// Registers in `models` a variant of the catalog model `name` as `describe`
/// renames and describes it (a variant registered again is replaced by the
/// same description); returns the variant's name.
fn register_variant(models: &mut ModelCatalog, name: &str, describe: impl FnOnce(&mut ModelSpec)) -> Result<String, BenchError> {
    let mut m = models.get(name)?.clone();
    describe(&mut m);
    let out = m.name.clone();
    models.insert(m, &[]);
    Ok(out)
}

/// The servers the datasets ran on, where they differ from the built-in
/// catalog's typical ones, in the site catalog's `[gpu.NAME]` form: Gavel's
/// V100 workers are AWS `p3.2xlarge` instances (one V100 each: the instance
/// type Gavel's own cost model maps a V100 worker to, `scheduler/utils.py`
/// at commit c4fa400), whose network AWS lists as "up to 10 Gigabit"
/// Ethernet, without RDMA: NCCL runs its socket transport over it. Only the
/// one-GPU-per-server (`_unconsolidated`) points cross that network. Gavel's
/// K80 workers (`p2.xlarge`) already have the catalog's 10 Gb/s; its P100s
/// (Google Cloud, whose per-VM rate depends on the vCPUs, not given) keep
/// the undeclared default.
pub const DATASET_SERVERS: &str = "[gpu.v100]\ninter_node_gbs = 1.25\ninter_node_transport = \"tcp\"\n";

/// The built-in GPU catalog with [`DATASET_SERVERS`] applied: the catalog
/// the benchmark's estimators use.
pub fn dataset_gpus() -> Result<GpuCatalog, BenchError> {
    let mut gpus = GpuCatalog::builtin();
    gpus.apply_overrides_toml(DATASET_SERVERS, "estbench DATASET_SERVERS")?;
    Ok(gpus)
}

/// How Gavel's throughputs were measured: its PyTorch workloads train data
/// parallel with the batch size per worker as given (`--batch_size`), no
/// gradient accumulation, so every iteration computes one micro-batch of
/// `per_gpu` samples on each GPU. Registered as `<name>+gavel-mb<per_gpu>`,
/// a variant of the same network with that fixed micro-batch; returns that name.
pub fn gavel_model(models: &mut ModelCatalog, name: &str, per_gpu: u32) -> Result<String, BenchError> {
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
/// `recompute` (the artifact's "ZeRO-Offload+GC" runs), with eager
/// attention (the artifact pins torch 1.12 and transformers 4.25, before
/// PyTorch's fused attention kernels; Megatron-LM's fused softmax needs fp16
/// or bf16 inputs, so its fp32 runs take the unfused path: scale, mask,
/// softmax and dropout as separate kernels over the s² scores). Registered as `<name>+rubick[+offload]`, a
/// variant of the same network; returns that name.
pub fn rubick_model(models: &mut ModelCatalog, name: &str, offload: bool, recompute: bool, micro_batch: u32) -> Result<String, BenchError> {
    register_variant(models, name, |m| {
        m.name = format!("{}+rubick{}", m.name, if offload { "+offload" } else { "" });
        m.precision = Precision::Tf32;
        m.micro_batch = Some(micro_batch);
        m.offload = offload;
        m.attention = Attention::Eager;
        // LLaMA-7B ran at sequence 2048, the artifact's SEQ_HID = 4096 · 2048
        // · 32 in validate_llama7B.py (config.csv's seq_hid column says
        // 4096 · 4096 · 32, but its forward times, 0.38 s per sample on one
        // A800, would be 168 TFLOP/s at 4096: above the 156 TFLOP/s TF32 peak).
        if m.name.starts_with("llama7b") {
            m.seq_len = 2048;
        }
        if recompute {
            m.recompute = Recompute::Full;
        }
    })
}

/// NVIDIA DeepLearningExamples' published ResNet-50 v1.5 training
/// throughputs (`bench/truth/nvidia-dle-resnet50.csv`, compiled in; its
/// header says where each number comes from). Not this project's
/// measurements: held-out evaluation data, never calibrated on.
pub const PUBLISHED_RESNET50: &str = include_str!("../../../bench/truth/nvidia-dle-resnet50.csv");

/// How DeepLearningExamples trained ResNet-50 v1.5: torchvision's
/// architecture (stride on the 3×3), SGD with momentum, PyTorch DDP, a
/// fixed batch per GPU; AMP is fp16 autocast with channels-last tensors,
/// TF32 and FP32 are fp32 storage in NCHW. Registered as
/// `resnet50+dle-<precision>-mb<batch>`; returns that name.
pub fn dle_model(models: &mut ModelCatalog, precision: Precision, channels_last: bool, per_gpu: u32) -> Result<String, BenchError> {
    register_variant(models, "resnet-50", |m| {
        m.name = format!("{}+dle-{}-mb{per_gpu}", m.name, format!("{precision:?}").to_lowercase());
        m.precision = precision;
        m.channels_last = channels_last;
        m.optimizer = Optimizer::SgdMomentum;
        m.runtime = Runtime::Ddp;
        m.micro_batch = Some(per_gpu.max(1));
    })
}

/// The published points of [`PUBLISHED_RESNET50`] (dataset `published`),
/// their models registered in `models`; `calibratable` is false.
pub fn published_points(text: &str, models: &mut ModelCatalog) -> Result<Vec<Point>, BenchError> {
    let origin = "bench/truth/nvidia-dle-resnet50.csv";
    let mut out = Vec::new();
    let mut header = true;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if header {
            header = false;
            continue;
        }
        let bad = |msg: String| BenchError::format(format!("{origin}:{}", i + 1), msg);
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 7 {
            return Err(bad(format!("expected 7 columns, got {}", f.len())));
        }
        let num = |s: &str| s.parse::<f64>().map_err(|_| bad(format!("not a number: '{s}'")));
        let precision = match f[2] {
            "amp" => Precision::Fp16,
            "tf32" => Precision::Tf32,
            "fp32" => Precision::Fp32,
            p => return Err(bad(format!("precision must be amp, tf32 or fp32, got '{p}'"))),
        };
        let channels_last = f[3] == "true";
        let (per_gpu, gpus, tput) = (num(f[4])? as u32, num(f[5])? as u32, num(f[6])?);
        if per_gpu == 0 || gpus == 0 || tput <= 0.0 {
            return Err(bad("batch, GPUs and throughput must be positive".into()));
        }
        let model = dle_model(models, precision, channels_last, per_gpu)?;
        let mut p = Point::new(
            "published",
            format!("dle:{} {} {}", f[0], f[2], per_gpu),
            ProfileRecord {
                model: model.clone(),
                batch: per_gpu * gpus,
                gpu_type: f[1].to_string(),
                nodes: 1,
                gpus_per_node: gpus,
                iter_time_s: (per_gpu * gpus) as f64 / tput,
                plan: Some(Plan { dp: gpus, ..Plan::default() }),
                peak_mem_gib: None,
                first_iter_s: None,
            },
        );
        p.model = "resnet50".into();
        p.family = ModelFamily::WideResnet;
        p.calibratable = false;
        out.push(p);
    }
    Ok(out)
}

/// The project's own H200 runs (`bench/truth/h200-measured.csv`, compiled
/// in; its header gives the commands): `cellsched profile run` of
/// `bench/gpu/train.py`, with NVML peak memory per run.
pub const H200_RUNS: &str = include_str!("../../../bench/truth/h200-measured.csv");

/// How the H200 CNN runs were trained (`bench/gpu/train.py cnn`):
/// torchvision ResNet-50 (`resnet50`) or Wide-ResNet-50-2
/// (`wide_resnet50_2`), SGD with momentum, NCHW, fp32 without TF32 or bf16
/// autocast (label suffix `_bf16`), with cuDNN autotuning
/// (`torch.backends.cudnn.benchmark = True`). Registered as `<label>+torchvision`;
/// returns that name, or `None` for a label that is not such a CNN.
pub fn torchvision_model(models: &mut ModelCatalog, label: &str) -> Result<Option<String>, BenchError> {
    let (net, bf16) = match label.strip_suffix("_bf16") {
        Some(net) => (net, true),
        None => (label, false),
    };
    let width_factor = match net {
        "resnet50" => 1,
        "wide_resnet50_2" => 2,
        _ => return Ok(None),
    };
    register_variant(models, "resnet-50", |m| {
        m.name = format!("{label}+torchvision");
        m.width_factor = width_factor;
        m.precision = if bf16 { Precision::Bf16 } else { Precision::Fp32 };
        m.channels_last = false;
        m.cudnn_benchmark = true;
        m.optimizer = Optimizer::SgdMomentum;
        m.runtime = Runtime::Ddp;
        m.micro_batch = None;
    })
    .map(Some)
}

/// Runs of `bench/gpu/measure.sh` whose vocabulary differs from their catalog entry's (the
/// command line of `bench/gpu/measure.sh`): GPT-2 1.3B ran with 32,128
/// tokens (its 15.3 GB checkpoint is 1.28B parameters).
const H200_VOCAB: [(&str, u32); 1] = [("gpt__1.3B", 32128)];

/// The project's own H100 runs (`bench/truth/h100-measured.csv`, compiled
/// in): the same loops, models and batches as [`H200_RUNS`] on one H100.
pub const H100_OWN_RUNS: &str = include_str!("../../../bench/truth/h100-measured.csv");

/// The points of [`H200_RUNS`] (dataset `h200`): CNNs as
/// [`torchvision_model`], transformers as [`h100_model`] (the same loop).
pub fn h200_points(text: &str, models: &mut ModelCatalog) -> Result<Vec<Point>, BenchError> {
    own_gpu_points(text, "bench/truth/h200-measured.csv", "h200", models)
}

/// The points of a table written by `bench/gpu/measure.sh` (`path` names it
/// in errors) as dataset `dataset`: CNNs as [`torchvision_model`],
/// transformers as [`h100_model`] (the same loop), with the vocabularies
/// of [`H200_VOCAB`].
pub fn own_gpu_points(text: &str, path: &str, dataset: &'static str, models: &mut ModelCatalog) -> Result<Vec<Point>, BenchError> {
    let mut out = Vec::new();
    for mut rec in parse_csv(text, path)? {
        let vocab = H200_VOCAB.iter().find(|(label, _)| *label == rec.model).map(|v| v.1);
        rec.model = match torchvision_model(models, &rec.model)? {
            Some(m) => m,
            None => h100_model(models, &rec.model)?,
        };
        if let Some(vocab) = vocab {
            let base = rec.model.clone();
            rec.model = register_variant(models, &base, |m| {
                m.name = format!("{base}+vocab{vocab}");
                m.vocab = vocab;
            })?;
        }
        let per_gpu = rec.batch / rec.gpus().max(1);
        out.push(Point::new(dataset, format!("{dataset}:{} bs{per_gpu}", rec.model), rec));
    }
    Ok(out)
}

/// Loads every measured point under `dir`; datasets that are absent are
/// skipped. Adds the datasets' model descriptions to `models`.
pub fn load_points(dir: &Path, models: &mut ModelCatalog) -> Result<Vec<Point>, BenchError> {
    let mut out = Vec::new();
    let gavel = dir.join("gavel/simulation_throughputs.json");
    if gavel.is_file() {
        let text = read(&gavel)?;
        out.extend(gavel_points(&text).map_err(|e| match e {
            BenchError::Format { msg, .. } => BenchError::format(gavel.display().to_string(), msg),
            e => e,
        })?);
    }
    out.extend(rubick_points(&dir.join("rubick-a800"))?);
    let h100 = dir.join("h100/measured-iter-times.csv");
    if h100.is_file() {
        let text = read(&h100)?;
        for mut rec in parse_csv(&text, &h100.display().to_string())? {
            rec.model = h100_model(models, &rec.model)?;
            let per_gpu = rec.batch / rec.gpus().max(1);
            out.push(Point::new("h100", format!("h100:{} bs{per_gpu}", rec.model), rec));
        }
    }
    out.extend(h200_points(H200_RUNS, models)?);
    out.extend(own_gpu_points(H100_OWN_RUNS, "bench/truth/h100-measured.csv", "h100-own", models)?);
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
        p.family = models.get(&name)?.family;
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
pub fn gavel_points(text: &str) -> Result<Vec<Point>, BenchError> {
    let bad = |msg: String| BenchError::format("gavel throughputs", msg);
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let Some(types) = v.as_object() else { return Err(bad("expected an object of GPU types".into())) };
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
            let Some((name, rest)) = inner.split_once("',") else { return Err(bad(format!("unexpected key {key}"))) };
            let scale: u32 = rest.trim().trim_end_matches(')').trim().parse().map_err(|_| bad(format!("scale factor in key {key}")))?;
            let (model, bs) = match name.split_once(" (batch size ") {
                Some((m, b)) => (m.to_string(), b.trim_end_matches(')').parse::<u32>().map_err(|_| bad(format!("batch size in key {key}")))?),
                None => (name.to_string(), 1),
            };
            out.push(Point::new(
                "gavel",
                format!("gavel:{model} bs{bs}"),
                ProfileRecord {
                    model: model.to_ascii_lowercase(),
                    batch: bs * scale,
                    gpu_type: gpu_type.clone(),
                    nodes: if spread { scale } else { 1 },
                    gpus_per_node: if spread { 1 } else { scale },
                    iter_time_s: scale as f64 / tput,
                    plan: Some(Plan { dp: scale, ..Plan::default() }),
                    peak_mem_gib: None,
                    first_iter_s: None,
                },
            ));
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
/// [`load_points`] as `<model>+rubick+offload`), which for gpt2, t5 and llama7b
/// recomputes activations (the scripts' "ZeRO-Offload+GC").
pub fn rubick_points(dir: &Path) -> Result<Vec<Point>, BenchError> {
    let global: [(&str, u32); 6] = [("bert", 32), ("gpt2", 16), ("roberta", 64), ("t5", 16), ("vit", 64), ("llama7b", 8)];
    let offload_recomputes = ["gpt2", "t5", "llama7b"];
    let mut out = Vec::new();
    for (model, g) in global {
        let (cfg_path, data_path) = (dir.join(model).join("config.csv"), dir.join(model).join("data.csv"));
        if !cfg_path.is_file() {
            continue;
        }
        let cfg = read(&cfg_path)?;
        let data = read(&data_path)?;
        for (i, (c, d)) in cfg.lines().skip(1).zip(data.lines().skip(1)).enumerate() {
            let nums = |s: &str, path: &Path| -> Result<Vec<f64>, BenchError> {
                s.split(',')
                    .map(|x| x.trim().parse::<f64>().map_err(|_| BenchError::format(format!("{}:{}", path.display(), i + 2), format!("not a number: '{x}'"))))
                    .collect()
            };
            let (c, d) = (nums(c, &cfg_path)?, nums(d, &data_path)?);
            if c.len() < 9 || d.len() < 4 {
                return Err(BenchError::format(format!("{}:{}", cfg_path.display(), i + 2), "expected 9 config and 4+ data columns"));
            }
            let (nodes, gpus, mbs_col, threads, zero) = (c[0] as u32, c[1] as u32, c[3] as u32, c[5] as u32, c[6] as u8);
            let per_gpu = (g / gpus.max(1)).max(1);
            let mbs = mbs_col.clamp(1, per_gpu);
            let offload = threads > 1;
            out.push(Point::new(
                "rubick-a800",
                format!("rubick:{model} zero{zero}{}", if offload { "-offload" } else { "" }),
                ProfileRecord {
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
                    first_iter_s: None,
                },
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Gavel's V100 servers are described with their 10 Gb/s Ethernet (TCP,
    /// declared); the other types keep the built-in description.
    #[test]
    fn dataset_servers_describe_gavels_v100_network() {
        use cellsched_core::gpu::Transport;
        let gpus = dataset_gpus().unwrap();
        let v100 = gpus.get("v100").unwrap();
        assert_eq!((v100.inter_node_gbs, v100.network_declared, v100.inter_node_transport), (1.25, true, Some(Transport::Tcp)));
        assert_eq!(gpus.get("p100").unwrap(), GpuCatalog::builtin().get("p100").unwrap());
        assert_eq!(v100.fp32_tflops, GpuCatalog::builtin().get("v100").unwrap().fp32_tflops);
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

    /// The H100 runs are described as Hugging Face trained them: GPT-2's
    /// tanh GELU in 8 eager kernels, BERT's fused GELU, both bf16 autocast.
    #[test]
    fn h100_runs_are_described_as_hugging_face_trains_them() {
        let mut models = ModelCatalog::builtin();
        let gpt = h100_model(&mut models, "gpt__125M").unwrap();
        let bert = h100_model(&mut models, "bert__350M").unwrap();
        let (g, b) = (models.get(&gpt).unwrap(), models.get(&bert).unwrap());
        assert_eq!((g.activation_kernels, b.activation_kernels), (8, 0));
        assert_eq!((g.precision, b.precision, b.seq_len, b.vocab), (Precision::Bf16, Precision::Bf16, 512, 30522));
    }

    /// The H100 runs of the same script load as dataset `h100-own` on type
    /// h100, with the same model descriptions as the H200 runs.
    #[test]
    fn own_h100_runs_load_as_their_own_dataset() {
        let mut models = ModelCatalog::builtin();
        let pts = own_gpu_points(H100_OWN_RUNS, "h100-measured.csv", "h100-own", &mut models).unwrap();
        assert!(pts.len() >= 12 && pts.iter().all(|p| p.dataset == "h100-own" && p.rec.gpu_type == "h100" && p.rec.peak_mem_gib.is_some()));
        assert!(pts.iter().any(|p| p.rec.model == "wide_resnet50_2_bf16+torchvision"));
        assert!(pts.iter().any(|p| p.rec.model.ends_with("+vocab32128")), "GPT-2 1.3B with its run's vocabulary");
        assert!(pts.iter().all(|p| p.job.starts_with("h100-own:")));
    }

    /// The H200 runs load as their training loop ran them: torchvision CNNs
    /// (Wide-ResNet-50-2 twice as wide, `_bf16` under bf16 autocast, fp32
    /// otherwise), transformers as the H100 runs; every run has its NVML peak.
    #[test]
    fn h200_runs_are_described_as_their_loop_trains_them() {
        let mut models = ModelCatalog::builtin();
        let pts = h200_points(H200_RUNS, &mut models).unwrap();
        assert!(pts.len() >= 13 && pts.iter().all(|p| p.dataset == "h200" && p.rec.gpu_type == "h200" && p.rec.peak_mem_gib.is_some()));
        let m = |name: &str| models.get(name).unwrap().clone();
        let (wrn, rn_bf16) = (m("wide_resnet50_2+torchvision"), m("resnet50_bf16+torchvision"));
        assert_eq!((wrn.width_factor, wrn.precision, wrn.optimizer, wrn.cudnn_benchmark), (2, Precision::Fp32, Optimizer::SgdMomentum, true));
        assert_eq!((rn_bf16.width_factor, rn_bf16.precision, rn_bf16.channels_last), (1, Precision::Bf16, false));
        // GPT-2 1.3B ran with a 32,128-token vocabulary: 1.28B parameters, as its checkpoint says.
        let big = pts.iter().find(|p| p.rec.model.starts_with("hf:gpt__1.3B")).unwrap();
        let params = models.get(&big.rec.model).unwrap().params();
        assert!((1.25e9..1.30e9).contains(&params), "{params}");
        assert_eq!(torchvision_model(&mut models, "vgg16").unwrap(), None);
    }

    /// The published ResNet-50 table parses into held-out points with the
    /// iteration time the throughput implies, the precision and layout of
    /// each run; a malformed row names its line.
    #[test]
    fn published_resnet50_rows_become_held_out_points() {
        let mut models = ModelCatalog::builtin();
        let pts = published_points(PUBLISHED_RESNET50, &mut models).unwrap();
        assert_eq!(pts.len(), 12);
        assert!(pts.iter().all(|p| !p.calibratable && p.dataset == "published" && p.family == ModelFamily::WideResnet));
        let amp = pts.iter().find(|p| p.rec.gpu_type == "a100" && p.rec.gpus() == 8 && p.job.contains("amp")).unwrap();
        assert!((amp.rec.iter_time_s - 2048.0 / 16621.0).abs() < 1e-12);
        let m = models.get(&amp.rec.model).unwrap();
        assert_eq!((m.precision, m.channels_last, m.micro_batch), (Precision::Fp16, true, Some(256)));
        let e = published_points("h\nx,v100,fp64,false,1,1,1\n", &mut models).unwrap_err().to_string();
        assert!(e.contains(":2") && e.contains("fp64"), "{e}");
    }

    /// Rubick's runs are described with eager attention (torch 1.12,
    /// transformers 4.25, Megatron-LM in fp32), in TF32 at their micro-batch.
    #[test]
    fn rubick_runs_are_described_with_eager_attention() {
        let mut models = ModelCatalog::builtin();
        let name = rubick_model(&mut models, "gpt2_xl", false, false, 1).unwrap();
        let m = models.get(&name).unwrap();
        assert_eq!((m.attention, m.precision, m.micro_batch), (Attention::Eager, Precision::Tf32, Some(1)));
        let llama = rubick_model(&mut models, "llama7b", true, true, 1).unwrap();
        assert_eq!(models.get(&llama).unwrap().seq_len, 2048);
        assert_eq!(models.get(&name).unwrap().seq_len, 1024);
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
