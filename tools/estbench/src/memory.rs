//! Predicted peak memory of the measured plan against the NVML peak of every
//! point that recorded one. The memory the plan needs is not calibrated
//! (datasheet estimator); the one fitted constant, cuDNN autotuning's
//! workspace per channel pair ([`AutotuneWorkspace`]), is fitted leave one
//! model out: a run is scored with the constant fitted on the other
//! models' runs, never on its own model's.
//!
//! The workspace is measured apart from the rest: NVML peak minus the
//! caching allocator's peak of the same shapes without autotuning
//! (`bench/truth/h200-conv-memory.csv`) minus the CUDA context (the median
//! NVML − allocator gap of the runs that autotuned in both measurements).
use crate::data::Point;
use crate::error::BenchError;
use crate::score::measured_plan_eval;
use cellsched_core::estimator::{median, AutotuneWorkspace, Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;

/// PyTorch allocator peaks of the H200 CNN runs' shapes, with and without
/// autotuning (`bench/truth/h200-conv-memory.csv`, compiled in).
pub const H200_CONV_MEMORY: &str = include_str!("../../../bench/truth/h200-conv-memory.csv");

const GIB: f64 = (1u64 << 30) as f64;

/// One row of [`H200_CONV_MEMORY`].
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatorPeak {
    /// torchvision network (`resnet50`, `wide_resnet50_2`).
    pub net: String,
    /// Samples per iteration.
    pub batch: u32,
    /// `fp32` or `bf16`.
    pub precision: String,
    /// Whether `cudnn.benchmark` autotuned in that measurement.
    pub autotuned: bool,
    /// `torch.cuda.max_memory_reserved`, GiB.
    pub reserved_gib: f64,
}

/// Parses [`H200_CONV_MEMORY`]'s form; a malformed row names its line.
pub fn allocator_peaks(text: &str) -> Result<Vec<AllocatorPeak>, BenchError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("model,") {
            continue;
        }
        let bad = |msg: String| BenchError::format(format!("bench/truth/h200-conv-memory.csv:{}", n + 1), msg);
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 6 {
            return Err(bad(format!("expected 6 columns, got {}", f.len())));
        }
        let batch = f[1].parse::<u32>().map_err(|_| bad(format!("batch is not a number: '{}'", f[1])))?;
        let reserved_gib = f[5].parse::<f64>().map_err(|_| bad(format!("max_reserved_gib is not a number: '{}'", f[5])))?;
        let autotuned = match f[3] {
            "true" => true,
            "false" => false,
            b => return Err(bad(format!("benchmark must be true or false, got '{b}'"))),
        };
        out.push(AllocatorPeak { net: f[0].to_string(), batch, precision: f[2].to_string(), autotuned, reserved_gib });
    }
    Ok(out)
}

/// How a row's constant relates to it.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// No autotuning workspace predicted (no autotuning, or mixed
    /// precision): no constant enters the prediction.
    NoTerm,
    /// Scored with the constant fitted on these other networks' runs.
    HeldOut(Vec<String>),
    /// Scored with the constant fitted on its own network's runs (shown,
    /// never counted).
    Calibration,
}

/// One scored run.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRow {
    /// Index into the points.
    pub idx: usize,
    /// Predicted bytes the plan needs, GiB.
    pub required_gib: f64,
    /// Predicted autotuning workspace, GiB.
    pub workspace_gib: f64,
    /// NVML peak, GiB.
    pub nvml_gib: f64,
    /// Where the constant came from.
    pub role: Role,
}

impl MemoryRow {
    /// Predicted peak, GiB.
    pub fn predicted_gib(&self) -> f64 {
        self.required_gib + self.workspace_gib
    }

    /// Signed error against NVML, percent.
    pub fn error_pct(&self) -> f64 {
        (self.predicted_gib() / self.nvml_gib - 1.0) * 100.0
    }
}

/// A measured autotuning workspace (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredWorkspace {
    /// torchvision network.
    pub net: String,
    /// Samples per iteration.
    pub batch: u32,
    /// Channel pairs of its widest stride-1 k×k convolution.
    pub pairs: f64,
    /// NVML peak − allocator peak without autotuning − context, GiB.
    pub gib: f64,
}

/// The memory table: every run scored held out, the calibration rows
/// apart, the per-network fits and the context used to measure workspaces.
#[derive(Debug, Clone, Default)]
pub struct MemoryTable {
    /// Every run with an NVML peak, none scored with a constant fitted on it.
    pub held_out: Vec<MemoryRow>,
    /// The runs the constants were fitted on, scored with their own fit.
    pub calibration: Vec<MemoryRow>,
    /// Workspaces measured per run.
    pub workspaces: Vec<MeasuredWorkspace>,
    /// Constant fitted on each network's runs alone.
    pub fits: Vec<(String, AutotuneWorkspace)>,
    /// CUDA context, GiB (median NVML − allocator gap of runs autotuned in both).
    pub context_gib: Option<f64>,
    /// fp32 runs without autotuning: (network, batch, predicted needed GiB,
    /// allocator peak + context GiB, NVML with autotuning GiB).
    pub without_autotuning: Vec<(String, u32, f64, f64, f64)>,
}

/// Predicted (needed, workspace) GiB of point `p`'s measured plan.
fn predict(est: &Estimator, models: &ModelCatalog, p: &Point) -> Option<(f64, f64)> {
    let model = models.get(&p.rec.model).ok()?.clone();
    let ev = measured_plan_eval(est, &JobSpec { model, global_batch: p.rec.batch }, &p.rec)?;
    Some((ev.memory.total() / GIB, ev.memory.autotune_workspace / GIB))
}

/// Scores every point with an NVML peak (see [`MemoryTable`]).
pub fn memory_table(points: &[Point], gpus: &GpuCatalog, models: &ModelCatalog) -> Result<MemoryTable, BenchError> {
    let peaks = allocator_peaks(H200_CONV_MEMORY)?;
    let mut t = MemoryTable::default();
    // The H200 run of network `net` at `batch` trained as `suffix` says.
    let run = |net: &str, batch: u32, bf16: bool| {
        let name = format!("{net}{}+torchvision", if bf16 { "_bf16" } else { "" });
        points.iter().find(|p| p.dataset == "h200" && p.rec.model == name && p.rec.batch == batch && p.rec.peak_mem_gib.is_some())
    };
    let mut ctx: Vec<f64> = peaks.iter().filter(|a| a.autotuned && a.precision == "bf16").filter_map(|a| Some(run(&a.net, a.batch, true)?.rec.peak_mem_gib? - a.reserved_gib)).collect();
    ctx.retain(|c| c.is_finite());
    t.context_gib = (!ctx.is_empty()).then(|| median(&ctx));
    let base = Estimator::new(gpus.clone(), models.clone());
    if let Some(context) = t.context_gib {
        for a in peaks.iter().filter(|a| a.precision == "fp32" && !a.autotuned) {
            let Some(p) = run(&a.net, a.batch, false) else { continue };
            let (Some(nvml), Ok(m)) = (p.rec.peak_mem_gib, models.get(&p.rec.model)) else { continue };
            let pairs = AutotuneWorkspace::channel_pairs(m);
            if m.cudnn_benchmark && pairs > 0.0 {
                t.workspaces.push(MeasuredWorkspace { net: a.net.clone(), batch: a.batch, pairs, gib: nvml - a.reserved_gib - context });
            }
            if let Some((need, _)) = predict(&base, models, p) {
                t.without_autotuning.push((a.net.clone(), a.batch, need, a.reserved_gib + context, nvml));
            }
        }
    }
    let fit = |keep: &dyn Fn(&str) -> bool| AutotuneWorkspace::fit(&t.workspaces.iter().filter(|w| keep(&w.net)).map(|w| (w.pairs, w.gib * GIB)).collect::<Vec<_>>());
    let mut nets: Vec<String> = t.workspaces.iter().map(|w| w.net.clone()).collect();
    nets.sort_unstable();
    nets.dedup();
    t.fits = nets.iter().filter_map(|n| Some((n.clone(), fit(&|x| x == n)?))).collect();
    for (i, p) in points.iter().enumerate() {
        let Some(nvml) = p.rec.peak_mem_gib else { continue };
        let Some((need, ws)) = predict(&base, models, p) else { continue };
        let row = |role: Role, ws: f64| MemoryRow { idx: i, required_gib: need, workspace_gib: ws, nvml_gib: nvml, role };
        if ws == 0.0 {
            t.held_out.push(row(Role::NoTerm, 0.0));
            continue;
        }
        // The network this run trains (the points' model without its variant).
        let net = p.model.as_str();
        let others: Vec<String> = nets.iter().filter(|n| n.as_str() != net).cloned().collect();
        if let Some(c) = fit(&|x| x != net) {
            let ws = predict(&base.clone().with_autotune(c), models, p).map_or(0.0, |r| r.1);
            t.held_out.push(row(Role::HeldOut(others), ws));
        }
        if let Some(c) = t.fits.iter().find(|f| f.0 == net).map(|f| f.1) {
            let ws = predict(&base.clone().with_autotune(c), models, p).map_or(0.0, |r| r.1);
            t.calibration.push(row(Role::Calibration, ws));
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{h200_points, own_gpu_points, H100_OWN_RUNS};

    /// The allocator table parses; a malformed row names its line.
    #[test]
    fn allocator_peaks_parse_and_name_bad_lines() {
        let rows = allocator_peaks(H200_CONV_MEMORY).unwrap();
        assert_eq!(rows.len(), 12);
        assert!(rows.iter().any(|r| r.net == "wide_resnet50_2" && r.batch == 128 && !r.autotuned && r.precision == "fp32"));
        let e = allocator_peaks("# c\nmodel,batch\nresnet50,64,fp32,maybe,1,2\n").unwrap_err().to_string();
        assert!(e.contains(":3") && e.contains("maybe"), "{e}");
    }

    /// Leave one network out: each fp32 autotuned run is scored held out
    /// with the constant fitted on the other network only, so changing a
    /// network's measured peaks moves its calibration rows, never its
    /// held-out ones; bf16 and transformer rows carry no term.
    #[test]
    fn no_run_is_scored_with_a_constant_fitted_on_it() {
        let gpus = crate::data::dataset_gpus().unwrap();
        let mut models = ModelCatalog::builtin();
        let mut points = h200_points(crate::data::H200_RUNS, &mut models).unwrap();
        points.extend(own_gpu_points(H100_OWN_RUNS, "h100-measured.csv", "h100-own", &mut models).unwrap());
        for p in &mut points {
            let name = models.canonical_name(&p.rec.model).unwrap_or(&p.rec.model).to_string();
            p.model = name.split('+').next().unwrap_or(&name).to_string();
        }
        let t = memory_table(&points, &gpus, &models).unwrap();
        assert_eq!(t.held_out.len(), points.len());
        assert_eq!(t.fits.len(), 2);
        // The built-in default is the fit on every measured workspace.
        let all = AutotuneWorkspace::fit(&t.workspaces.iter().map(|w| (w.pairs, w.gib * GIB)).collect::<Vec<_>>()).unwrap();
        let d = cellsched_core::estimator::DEFAULT_BYTES_PER_CHANNEL_PAIR;
        assert!((all.bytes_per_channel_pair / d - 1.0).abs() < 0.001, "fit on all runs {} vs default {d}", all.bytes_per_channel_pair);
        let fp32 = |r: &&MemoryRow| points[r.idx].rec.model == "resnet50+torchvision";
        let held: Vec<&MemoryRow> = t.held_out.iter().filter(fp32).collect();
        assert_eq!(held.len(), 4, "resnet50 fp32 on h200 and h100-own, two batches each");
        assert!(held.iter().all(|r| r.role == Role::HeldOut(vec!["wide_resnet50_2".into()]) && r.workspace_gib > 1.0));
        assert!(t.held_out.iter().filter(|r| points[r.idx].rec.model.contains("bf16") || points[r.idx].rec.model.starts_with("hf:")).all(|r| r.role == Role::NoTerm && r.workspace_gib == 0.0));
        // Double ResNet-50's measured peaks: its held-out rows do not move.
        let mut bumped = points.clone();
        for p in bumped.iter_mut().filter(|p| p.rec.model == "resnet50+torchvision") {
            p.rec.peak_mem_gib = p.rec.peak_mem_gib.map(|g| g * 2.0);
        }
        let t2 = memory_table(&bumped, &gpus, &models).unwrap();
        let ws = |t: &MemoryTable, rows: &dyn Fn(&MemoryTable) -> Vec<MemoryRow>| rows(t).iter().filter(|r| points[r.idx].rec.model == "resnet50+torchvision").map(|r| r.workspace_gib).collect::<Vec<_>>();
        assert_eq!(ws(&t, &|t| t.held_out.clone()), ws(&t2, &|t| t.held_out.clone()));
        assert_ne!(ws(&t, &|t| t.calibration.clone()), ws(&t2, &|t| t.calibration.clone()));
    }
}
