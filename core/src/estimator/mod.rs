//! The Cell estimator (Crius Cells with Rubick's plan knobs).
//!
//! For a job (model, global batch) and a Cell (GPU type, count, stages) it
//! searches the plans inside the Cell — DP × TP per stage (TP kept inside a
//! node), micro-batch count, ZeRO 0–3, activation checkpointing — rejects
//! those that do not fit in GPU memory and returns the fastest, with its
//! iteration time from measurements ([`EstimateSource::Measured`]), the
//! calibrated model or datasheet numbers. [`Estimator::rank_cells`] ranks all
//! feasible Cells of the offered GPUs. Results are memoized per
//! (model, batch, Cell, node size).
mod assemble;
mod autotune;
mod calibration;
mod comm;
mod consistency;
mod conv;
mod order_stats;
mod plan_cost;
mod search;
mod topology;
mod transfer;

pub use assemble::{Assembled, EstimatorSources};
pub use autotune::{AutotuneWorkspace, DEFAULT_BYTES_PER_CHANNEL_PAIR};
pub use calibration::{
    median, quantile, spearman, Calibration, CalibrationPoint, CalibrationPolicy, CalibrationReport, FittedFactor, FittedBatch, FittedFramework,
    FittedLayout, FittedOverhead, FlaggedProfile, JobRefit, MIN_JOB_CONFIGS, PLAUSIBLE_EFFICIENCY,
};
pub use transfer::{flop_per_byte, roofline_prior, transfer_prior, FactorSource, Mechanism, TransferredLevel, TypeLevel};
pub use comm::{fit_links, Collective, CommPoint, MeasuredLinks, COMM_MODEL_PREFIX};
pub use consistency::{weak_scaling_contradictions, CONTRADICTION_TOLERANCE};
pub use plan_cost::{Framework, MemoryBreakdown, PlanEval, TimeBreakdown, MEMORY_HEADROOM, RESERVED_BYTES};

use crate::cell::{Cell, Decision, EstimateSource, Plan};
use crate::error::CoreError;
use crate::gpu::{GpuCatalog, GpuSpec};
use crate::model::{ModelCatalog, ModelCost, ModelFamily, ModelSpec, Recompute};
use crate::profile_db::ProfileDb;
use plan_cost::CellContext;
use topology::Placement;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;

/// A training job as the estimator sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The model.
    pub model: ModelSpec,
    /// Samples per iteration over all replicas.
    pub global_batch: u32,
}

/// GPUs of one type offered for placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellOffer {
    /// GPU type (catalog key or NVML name).
    pub gpu_type: String,
    /// GPUs per node of this type.
    pub gpus_per_node: u32,
    /// Free GPUs on each node of this type (one entry per node).
    pub free_gpus_per_node: Vec<u32>,
}

/// The best plan of a job on a Cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The Cell.
    pub cell: Cell,
    /// Nodes the Cell spans.
    pub nodes: u32,
    /// GPUs of the Cell on each node.
    pub gpus_per_node: u32,
    /// The chosen plan.
    pub plan: Plan,
    /// Predicted (or measured) seconds per iteration.
    pub iter_time_s: f64,
    /// Predicted peak bytes per GPU.
    pub mem_per_gpu_bytes: u64,
    /// Where `iter_time_s` came from.
    pub source: EstimateSource,
}

impl Estimate {
    /// GPU-seconds one iteration costs: iteration time × GPUs.
    pub fn gpu_seconds_per_iter(&self) -> f64 {
        self.iter_time_s * self.cell.gpus as f64
    }

    /// The placement decision recorded by the plugins.
    pub fn to_decision(&self) -> Decision {
        Decision {
            cell: self.cell.clone(),
            nodes: self.nodes,
            plan: self.plan,
            iter_s: self.iter_time_s,
            source: self.source,
        }
    }
}

/// [`Estimator::explain`]'s answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The estimate (best plan).
    pub estimate: Estimate,
    /// Its plan's time and memory breakdown (model numbers, before a measured override).
    pub eval: PlanEval,
    /// Compute efficiency multiplier applied (1 = datasheet).
    pub efficiency_factor: f64,
    /// Framework constants applied.
    pub framework: Framework,
    /// (parameter, where it came from).
    pub sources: Vec<(String, String)>,
}

type MemoKey = (u64, u32, Cell, u32);
/// Entries kept before the memo is cleared (bounded memory in long-lived plugins).
const MEMO_CAPACITY: usize = 200_000;

/// Predicts iteration times; cheap to share (`&self` methods, internal memo).
#[derive(Debug)]
pub struct Estimator {
    gpus: GpuCatalog,
    models: ModelCatalog,
    db: Option<ProfileDb>,
    calibration: Calibration,
    autotune: AutotuneWorkspace,
    memo: Mutex<HashMap<MemoKey, Result<Estimate, CoreError>>>,
}

impl Clone for Estimator {
    fn clone(&self) -> Self {
        Estimator {
            gpus: self.gpus.clone(),
            models: self.models.clone(),
            db: self.db.clone(),
            calibration: self.calibration.clone(),
            autotune: self.autotune,
            memo: Mutex::new(HashMap::new()),
        }
    }
}

impl Estimator {
    /// A datasheet-only estimator.
    pub fn new(gpus: GpuCatalog, models: ModelCatalog) -> Estimator {
        Estimator { gpus, models, db: None, calibration: Calibration::default(), autotune: AutotuneWorkspace::default(), memo: Mutex::new(HashMap::new()) }
    }

    /// This estimator with another cuDNN autotuning workspace model (e.g.
    /// one fitted on other runs, for hold-out tests). It changes only the
    /// predicted peak (`MemoryBreakdown::peak`), never what fits.
    pub fn with_autotune(mut self, autotune: AutotuneWorkspace) -> Estimator {
        self.autotune = autotune;
        self.memo = Mutex::new(HashMap::new());
        self
    }

    /// Uses measured points: exact matches override the model, and single-node
    /// points calibrate per-GPU-type (and per model×type) efficiency.
    pub fn with_db(self, db: ProfileDb) -> Estimator {
        self.with_db_policy(db, &CalibrationPolicy::default())
    }

    /// [`Estimator::with_db`] with an explicit choice of calibration points.
    pub fn with_db_policy(mut self, db: ProfileDb, policy: &CalibrationPolicy) -> Estimator {
        let base = Estimator::new(self.gpus.clone(), self.models.clone());
        self.calibration = Calibration::fit(&base, db.records(), policy);
        self.db = Some(db);
        self.memo = Mutex::new(HashMap::new());
        self
    }

    /// Measured seconds from a cold start to the end of the first iteration
    /// of `model` (a catalog name; rows under an alias count), from the
    /// profile DB's `first_iter_s`: the median of its rows on `gpu_type`,
    /// else of its rows on any type (start-up is mostly host work: process,
    /// CUDA and data loader start, model build). `None` when never measured.
    pub fn measured_first_iter_s(&self, model: &str, gpu_type: &str) -> Option<f64> {
        let db = self.db.as_ref()?;
        let gpu_type = crate::profile_db::normalize_gpu_type(gpu_type);
        let rows: Vec<(bool, f64)> = db
            .records()
            .filter(|r| r.model.eq_ignore_ascii_case(model) || self.models.get(&r.model).is_ok_and(|m| m.name == model))
            .filter_map(|r| r.first_iter_s.map(|x| (r.gpu_type == gpu_type, x)))
            .collect();
        let same: Vec<f64> = rows.iter().filter(|r| r.0).map(|r| r.1).collect();
        let pick = if same.is_empty() { rows.iter().map(|r| r.1).collect() } else { same };
        (!pick.is_empty()).then(|| calibration::median(&pick))
    }

    /// Uses a fitted calibration without measured overrides (e.g. for hold-out tests).
    pub fn with_calibration(mut self, calibration: Calibration) -> Estimator {
        self.calibration = calibration;
        self.memo = Mutex::new(HashMap::new());
        self
    }

    /// This estimator with `spec` in its model catalog under its own name (a
    /// job's own description, e.g. a catalog model as `--dl-precision`
    /// trains it), for hosts that look models up by name (the simulator).
    /// The calibration is kept: it knows the model by name or by family.
    pub fn with_model(mut self, spec: crate::model::ModelSpec) -> Estimator {
        self.models.insert(spec, &[]);
        self.memo = Mutex::new(HashMap::new());
        self
    }

    /// How the model was calibrated.
    pub fn calibration(&self) -> &CalibrationReport {
        &self.calibration.report
    }

    /// The GPU catalog.
    pub fn gpu_catalog(&self) -> &GpuCatalog {
        &self.gpus
    }

    /// The model catalog.
    pub fn model_catalog(&self) -> &ModelCatalog {
        &self.models
    }

    /// Best plan of `job` on `cell`; `gpus_per_node` is the node size for this
    /// GPU type (a Cell larger than a node must fill whole nodes).
    pub fn estimate(&self, job: &JobSpec, cell: &Cell, gpus_per_node: u32) -> Result<Estimate, CoreError> {
        let key = (job.model.fingerprint(), job.global_batch, cell.clone(), gpus_per_node);
        if let Some(hit) = self.memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return hit;
        }
        let res = self.estimate_uncached(job, cell, gpus_per_node);
        if let Ok(mut m) = self.memo.lock() {
            if m.len() >= MEMO_CAPACITY {
                m.clear();
            }
            m.insert(key, res.clone());
        }
        res
    }

    /// Iteration time of `job` on `cell` with a pinned `plan`; errors if the
    /// plan does not match the Cell, does not divide the batch or does not fit.
    pub fn estimate_plan(&self, job: &JobSpec, cell: &Cell, gpus_per_node: u32, plan: &Plan) -> Result<Estimate, CoreError> {
        let ev = self.evaluate_plan(job, cell, gpus_per_node, plan)?;
        let (gpu, placement) = self.setup(job, cell, gpus_per_node)?;
        if !ev.fits {
            return Err(CoreError::Infeasible(format!(
                "plan {plan} of {} on {cell} needs {:.1} GiB per GPU; {} has {:.0} GiB",
                job.model.name,
                ev.mem_per_gpu_bytes as f64 / (1u64 << 30) as f64,
                gpu.name,
                gpu.mem_gib
            )));
        }
        let mut est = Estimate {
            cell: cell.clone(),
            nodes: placement.nodes,
            gpus_per_node: placement.per_node,
            plan: *plan,
            iter_time_s: ev.iter_time_s,
            mem_per_gpu_bytes: ev.mem_per_gpu_bytes,
            source: self.model_source(&job.model.name, &gpu.name),
        };
        self.apply_measured(job, &mut est, Some(plan));
        Ok(est)
    }

    /// Time and memory of a pinned plan with breakdowns, whether or not it fits.
    pub fn evaluate_plan(&self, job: &JobSpec, cell: &Cell, gpus_per_node: u32, plan: &Plan) -> Result<PlanEval, CoreError> {
        let (gpu, placement) = self.setup(job, cell, gpus_per_node)?;
        if plan.gpus() != cell.gpus || plan.pp != cell.stages {
            return Err(CoreError::invalid(
                "plan",
                plan.to_string(),
                format!("dp*tp*pp = {} GPUs with pp = {} stages for cell {cell}", cell.gpus, cell.stages),
            ));
        }
        let cost = job.model.cost();
        if !cost.runtime.can_execute(plan.tp, plan.pp, plan.zero_stage) {
            return Err(CoreError::invalid(
                "plan",
                plan.to_string(),
                format!("a plan the model's runtime ({:?}) can execute", cost.runtime).to_lowercase(),
            ));
        }
        match (cost.recompute, plan.checkpointing) {
            (Recompute::Full, false) => {
                return Err(CoreError::invalid("plan", plan.to_string(), "ckpt=on (the model recomputes activations: recompute = \"full\")"))
            }
            (Recompute::Off, true) => {
                return Err(CoreError::invalid("plan", plan.to_string(), "ckpt=off (the model never recomputes: recompute = \"off\")"))
            }
            _ => {}
        }
        let cx = self.cell_context(job, gpu, &cost, placement);
        plan_cost::evaluate(&cx, plan).ok_or_else(|| {
            CoreError::invalid(
                "plan",
                plan.to_string(),
                format!(
                    "dp*mb dividing the global batch {}, pp <= {} layers, tp <= {}",
                    job.global_batch,
                    cost.pipeline_layers,
                    cost.max_tp
                ),
            )
        })
    }

    /// The best plan of `job` on `cell` with its time and memory breakdown and
    /// where each parameter came from (measured, fitted or default).
    pub fn explain(&self, job: &JobSpec, cell: &Cell, gpus_per_node: u32) -> Result<Explanation, CoreError> {
        let est = self.estimate(job, cell, gpus_per_node)?;
        let eval = self.evaluate_plan(job, cell, gpus_per_node, &est.plan)?;
        let (gpu, placement) = self.setup(job, cell, gpus_per_node)?;
        let compute_source = self.calibration.factor_source(&job.model.name, job.model.family, job.model.precision, &gpu.name).rows();
        let fitted_framework = self.calibration.report.framework.iter().any(|w| w.runtime.map_or(true, |r| r == job.model.runtime));
        let refit = self.calibration.has_job_refit(&job.model.name);
        let overhead = self.calibration.overhead(&job.model.name, &gpu.name);
        let layout = self.calibration.layout_scale(&gpu.name, placement.nodes, placement.per_node);
        let (factor, framework) = self.calibration.job_constants(&job.model, &gpu.name, placement.nodes, placement.per_node);
        let mbs = plan_cost::micro_batch_size(job.global_batch, &est.plan).unwrap_or(0);
        let batch_source = match plan_cost::batch_scale_at(self.calibration.batch_scale(&job.model.name, &gpu.name), mbs) {
            Some(m) => format!("fitted x{m:.2} at {mbs} samples per micro-batch (this model's single-GPU profile at that size, shrunk toward the level)"),
            None => format!("none (no single-GPU profile of this model at {mbs} samples per micro-batch)"),
        };
        let layout_source = if layout != 1.0 {
            format!("fitted x{layout:.2} for {} node(s) x {} {} (other models' multi-GPU points on this layout, shrunk toward the type's constants)", placement.nodes, placement.per_node, gpu.name)
        } else {
            "none (the type's constants: no multi-GPU profiles on this layout)".to_string()
        };
        let cost = job.model.cost();
        let ready = cost.grad_ready_share;
        let overlap_source = if est.plan.dp <= 1 || !cost.overlaps_grad_sync(est.plan.zero_stage) {
            "not used (no data-parallel sync overlapping backward in this plan)".to_string()
        } else if job.model.family == ModelFamily::Generic {
            "default (gradients taken as ready evenly through backward: a generic model has no layer structure)".to_string()
        } else {
            format!("model (gradients ready on average with {:.0}% of backward still to run, from where the architecture's parameters and work sit)", ready * 100.0)
        };
        let padding_source = match job.model.sample_len {
            None => "none (every sample has the same length)".to_string(),
            Some(_) if est.plan.dp <= 1 => "not used (one data-parallel replica)".to_string(),
            Some(l) => format!(
                "model ({:.1} +- {:.1} tokens a sample, each micro-batch of {mbs} padded to its longest: the replicas' compute varies by {:.0}%)",
                l.mean,
                l.sd,
                order_stats::padded_length_cv(&l, f64::from(mbs.max(1)), cost.seq_len) * 100.0
            ),
        };
        let mut sources = vec![("iteration time", if est.source == EstimateSource::Measured { "measured (profile DB point)" } else { "model" })];
        sources.extend(compute_source.iter().map(|(k, v)| (*k, v.as_str())));
        sources.extend([
            ("communication alpha-beta", if fitted_framework { "fitted scale (multi-GPU profiles) over derated defaults" } else { "default (derated datasheet links)" }),
            ("communication by layout", layout_source.as_str()),
            ("gradient sync hidden behind backward", overlap_source.as_str()),
            ("variable sample lengths", padding_source.as_str()),
            ("per-micro-batch / per-iteration costs", if fitted_framework { "fitted (multi-GPU profiles)" } else { "default" }),
            ("compute at this micro-batch size", batch_source.as_str()),
            ("host overhead per iteration", if overhead > 0.0 { "fitted (this model's single-GPU profiles at several batch sizes; in the per-iteration cost)" } else { "none (no single-GPU profiles at two batch sizes)" }),
            ("per-job refit", if refit { "fitted (this model's own measured configurations: compute and communication multipliers)" } else { "none (fewer than 2 measured configurations of this model)" }),
            ("memory", "model (states by precision/optimizer, activations, logits, step temporaries, fragmentation)"),
        ]);
        let autotune_source = self.autotune.source(&job.model);
        sources.push(("cuDNN autotuning workspace", autotune_source.as_str()));
        Ok(Explanation {
            estimate: est,
            eval,
            efficiency_factor: factor,
            framework,
            sources: sources.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        })
    }

    /// All feasible Cells of `job` on the offered GPUs, at most `max_gpus`
    /// GPUs each, fastest first (ties: fewer GPU-seconds, then fewer nodes).
    /// GPU counts are powers of two and multiples of the node size; a Cell
    /// larger than a node needs that many completely free nodes.
    pub fn rank_cells(&self, job: &JobSpec, offers: &[CellOffer], max_gpus: u32) -> Vec<Estimate> {
        let mut out = Vec::new();
        for offer in offers {
            let Ok(gpu) = self.gpus.get(&offer.gpu_type) else { continue };
            let node = offer.gpus_per_node;
            if node == 0 {
                continue;
            }
            let best_free = offer.free_gpus_per_node.iter().copied().max().unwrap_or(0).min(node);
            let full_nodes = offer.free_gpus_per_node.iter().filter(|f| **f >= node).count() as u32;
            for n in search::cell_sizes(node, max_gpus, best_free, full_nodes) {
                for stages in search::stage_counts(n, job.model.cost().pipeline_layers) {
                    let Ok(cell) = Cell::new(&gpu.name, n, stages) else { continue };
                    if let Ok(e) = self.estimate(job, &cell, node) {
                        out.push(e);
                    }
                }
            }
        }
        out.sort_by(|a, b| {
            a.iter_time_s
                .total_cmp(&b.iter_time_s)
                .then(a.gpu_seconds_per_iter().total_cmp(&b.gpu_seconds_per_iter()))
                .then(a.nodes.cmp(&b.nodes))
                .then(a.cell.cmp(&b.cell))
        });
        out
    }

    fn setup(&self, job: &JobSpec, cell: &Cell, gpus_per_node: u32) -> Result<(&GpuSpec, Placement), CoreError> {
        crate::limits::BATCH.check_u32("global batch", job.global_batch)?;
        crate::limits::GPUS_PER_NODE.check_u32("GPUs per node", gpus_per_node)?;
        let gpu = self.gpus.get(&cell.gpu_type)?;
        let placement = Placement::pack(cell.gpus, gpus_per_node).ok_or_else(|| {
            CoreError::invalid(
                format!("GPU count of cell {cell}"),
                cell.gpus.to_string(),
                format!("at most {gpus_per_node} (one node) or a multiple of {gpus_per_node} (whole nodes)"),
            )
        })?;
        Ok((gpu, placement))
    }

    fn model_source(&self, model: &str, gpu: &str) -> EstimateSource {
        if self.calibration.has_factor(model, gpu) {
            EstimateSource::Calibrated
        } else {
            EstimateSource::Datasheet
        }
    }

    /// Replaces the predicted time by a measured one for an exact match.
    fn apply_measured(&self, job: &JobSpec, est: &mut Estimate, pinned: Option<&Plan>) {
        let Some(db) = &self.db else { return };
        let name = self.models.canonical_name(&job.model.name).unwrap_or(&job.model.name).to_string();
        if let Some(rec) = db.lookup_record(&self.models, &name, job.global_batch, &est.cell.gpu_type, est.nodes, est.gpus_per_node) {
            if let (Some(p), None) = (rec.plan, pinned) {
                if p.gpus() == est.cell.gpus && p.pp == est.cell.stages {
                    est.plan = p;
                }
            } else if let (Some(p), Some(pin)) = (rec.plan, pinned) {
                if p != *pin {
                    return; // measured with a different plan: keep the model's number
                }
            }
            est.iter_time_s = rec.iter_time_s;
            est.source = EstimateSource::Measured;
        }
    }

    /// What the cost model needs for `job` on `gpu` with this placement.
    fn cell_context<'a>(&'a self, job: &JobSpec, gpu: &'a GpuSpec, cost: &'a ModelCost, placement: Placement) -> CellContext<'a> {
        let (efficiency_factor, framework) =
            self.calibration.job_constants(&job.model, &gpu.name, placement.nodes, placement.per_node);
        let batch_scale = self.calibration.batch_scale(&job.model.name, &gpu.name);
        let conv = conv::ConvNet::of(&job.model);
        let autotune_workspace = self.autotune.bytes_for(&job.model, conv.as_ref());
        CellContext { gpu, cost, global_batch: job.global_batch, placement, efficiency_factor, batch_scale, framework, conv, autotune_workspace }
    }

    fn estimate_uncached(&self, job: &JobSpec, cell: &Cell, gpus_per_node: u32) -> Result<Estimate, CoreError> {
        let (gpu, placement) = self.setup(job, cell, gpus_per_node)?;
        let cost = job.model.cost();
        let cx = self.cell_context(job, gpu, &cost, placement);
        let best = search::best_plan(&cx, cell).map_err(|why| CoreError::Infeasible(format!("{} (batch {}) on {cell}: {why}", job.model.name, job.global_batch)))?;
        let mut est = Estimate {
            cell: cell.clone(),
            nodes: placement.nodes,
            gpus_per_node: placement.per_node,
            plan: best.plan,
            iter_time_s: best.iter_time_s,
            mem_per_gpu_bytes: best.mem_per_gpu_bytes,
            source: self.model_source(&job.model.name, &gpu.name),
        };
        self.apply_measured(job, &mut est, None);
        Ok(est)
    }
}

#[cfg(test)]
mod tests;
