//! Calibration of the analytical estimator from measured points, in log
//! space and hierarchical:
//!
//! 1. **Compute level** from single-GPU points: for each point the datasheet
//!    model's time is split into compute (scaled by efficiency) and the rest;
//!    the factor that makes it match is `compute / (measured − rest)`. Logs of
//!    factors are aggregated by median per GPU type, per (family, type) and
//!    per (model, type); a (model, type) level shrinks toward its family × type
//!    prior, which shrinks toward type × family-residual. Variants of one
//!    network (`<model>+offload`) share its (model, type) level. Where a
//!    (model, type) has single-GPU points at two or more batch sizes, its
//!    level and a per-iteration host overhead (the part of the time that
//!    does not grow with the batch: Python and launch work, data hand-off,
//!    synchronisation) are fitted together; the overhead stays when data
//!    parallelism shrinks each GPU's share of the batch. Each single-GPU
//!    point then leaves a **compute multiplier for its micro-batch size**
//!    (what that size measured beyond the level, shrunk toward 1 by the
//!    typical residual), used by predictions and the per-job refit at that
//!    size; the shared constants of level 2 are fitted against the level.
//! 2. **Framework constants** (communication scale, per-micro-batch cost) are
//!    fitted from every multi-GPU point across models, per runtime when it has
//!    enough points, else globally, minimising the median |log(pred/measured)|;
//!    a new model with only a single-GPU profile inherits them.
//!    Then per **layout** (GPU type, nodes, GPUs per node): one multiplier
//!    on both link scales over those constants, from the multi-GPU points
//!    measured on that layout (servers of one type differ by layout: which
//!    link joins a group's GPUs, how many share a PCIe switch or NIC), shrunk
//!    toward 1 in log space by point count; an unmeasured layout keeps the
//!    type's constants.
//! 3. (model, type) pairs measured only on several GPUs get their compute
//!    level from those points, with the fitted framework constants (and so
//!    does a GPU type without single-GPU points).
//!
//!    A catalog type without measured points takes a type level carried from
//!    the measured types (its generation's, else by roofline over the types
//!    of the job's precision: [`super::transfer`]); family residuals apply
//!    on every type.
//! 0. **Links from microbenchmarks**: `comm:` rows (`cellsched profile
//!    comm`) give per GPU type multipliers on the α–β times inside a node and
//!    across nodes ([`super::comm`]), applied under the framework constants.
//! 4. **Per-job refit** (Rubick): a model whose history holds at least
//!    [`MIN_JOB_CONFIGS`] measured configurations, one of them multi-GPU, gets
//!    two multipliers of its own on top of levels 1–3 — compute and
//!    communication — fitted to those points and used for its other Cells.
//!
//! The report says what was fitted from what, and flags profiles whose implied
//! efficiency is implausible (a wrong model description) and in-node series
//! that contradict themselves ([`super::consistency`]).
use super::comm::{fit_links, CommPoint, MeasuredLinks};
use super::consistency::{weak_scaling_contradictions, CONTRADICTION_TOLERANCE};
use super::conv::ConvNet;
use super::plan_cost::{batch_scale_at, evaluate, micro_batch_size, CellContext, Framework};
use super::topology::Placement;
use super::transfer::{flop_per_byte, roofline_prior, transfer_prior, FactorSource, Mechanism, TransferredLevel, TypeLevel};
use super::{Estimator, JobSpec};
use crate::cell::{Cell, Plan};
use crate::error::CoreError;
use crate::gpu::GpuSpec;
use crate::model::{ModelCost, ModelFamily, ModelSpec, Precision, Recompute, Runtime};
use crate::profile_db::{ProfileRecord, UNKNOWN_PLAN};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Bounds on a fitted efficiency factor (guards against nonsense points).
const FACTOR_RANGE: (f64, f64) = (0.02, 50.0);
/// Prior weight, in points, of the family × type level on a (model, type) level
/// (small: one profile point pins its model).
const MODEL_PRIOR_POINTS: f64 = 0.25;
/// Prior weight, in points, of type × family residual on a (family, type) level.
const FAMILY_PRIOR_POINTS: f64 = 1.0;
/// Most points one framework fit evaluates (about 350 plan evaluations each).
const MAX_FIT_POINTS: usize = 400;
/// Range of a compute multiplier for one micro-batch size over the fitted level.
const BATCH_SCALE_RANGE: (f64, f64) = (0.25, 4.0);

/// Fewest multi-GPU points of one runtime for its own framework constants.
const MIN_RUNTIME_POINTS: usize = 5;
/// Prior weight, in points, of the parent (runtime, type) constants on a
/// layout's communication multiplier: a layout measured by a few points
/// keeps most of its type's constants.
const LAYOUT_PRIOR_POINTS: f64 = 4.0;
/// Range of a layout's communication multiplier (log2 steps of 1/8).
const LAYOUT_RANGE_LOG2: i32 = 3;
/// Fewest distinct measured configurations (GPU type, GPUs, nodes, batch) of
/// one model, at least one of them multi-GPU, for its per-job refit.
pub const MIN_JOB_CONFIGS: usize = 2;
/// Penalty per unit |log scale| in the per-job fit: with two or three
/// points, keep the scales near the hierarchical model unless the points
/// need otherwise.
const JOB_PRIOR_WEIGHT: f64 = 0.02;
/// A fitted host overhead is kept only if it cuts the median |log error| of
/// its model's single-GPU points to this fraction of one level's or less.
const OVERHEAD_MIN_GAIN: f64 = 0.5;
/// Implied efficiency (fraction of the precision's peak) outside which a
/// profile is flagged as pointing at a wrong model description.
pub const PLAUSIBLE_EFFICIENCY: (f64, f64) = (0.10, 0.80);

/// Which measured points may calibrate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalibrationPolicy {
    /// Only points measured on one node (default false: multi-node points fit
    /// the framework constants).
    pub single_node_only: bool,
    /// Only points with at most this many GPUs (`Some(1)`: single-GPU points).
    pub max_gpus: Option<u32>,
    /// Fit per (model, GPU type) levels as well as per GPU type (default true).
    pub per_model: bool,
    /// Refit compute and communication multipliers per model from its own
    /// history (≥ [`MIN_JOB_CONFIGS`] configurations; default true).
    pub per_job: bool,
}

impl Default for CalibrationPolicy {
    fn default() -> Self {
        CalibrationPolicy { single_node_only: false, max_gpus: None, per_model: true, per_job: true }
    }
}

/// A model's own multipliers, fitted from its measured configurations on top
/// of the hierarchical calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRefit {
    /// Model (canonical name).
    pub model: String,
    /// Multiplier on its compute efficiency.
    pub compute_scale: f64,
    /// Multiplier on its communication times (both links).
    pub comm_scale: f64,
    /// Distinct configurations used.
    pub configs: usize,
    /// Median |log(pred/measured)| over its points before the refit.
    pub log_error_before: f64,
    /// The same after the refit.
    pub log_error_after: f64,
}

/// A fitted factor and how many points support it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedFactor {
    /// GPU type (empty for a family residual).
    pub gpu_type: String,
    /// Model (canonical name) for model × type factors, family name for family levels.
    pub model: Option<String>,
    /// Multiplier on the datasheet efficiency.
    pub factor: f64,
    /// Points used.
    pub points: usize,
}

/// Framework constants fitted for one runtime (or all: `runtime` None),
/// optionally on one GPU type's servers (its interconnect).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedFramework {
    /// Runtime, or None for the global fit.
    pub runtime: Option<Runtime>,
    /// GPU type whose servers the fit describes, or None for all types.
    pub gpu_type: Option<String>,
    /// The constants.
    pub constants: Framework,
    /// Multi-GPU points used.
    pub points: usize,
    /// Median |log(pred/measured)| of those points after the fit.
    pub median_log_error: f64,
}

/// A communication multiplier fitted for one layout (GPU type, nodes, GPUs
/// per node): servers of one type differ by layout (which link joins the
/// GPUs of a group, how many share a PCIe switch or NIC), so the type's
/// constants are refined per layout from the multi-GPU points measured on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedLayout {
    /// GPU type.
    pub gpu_type: String,
    /// Nodes spanned.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Multiplier on both link scales over the type's constants, shrunk
    /// toward 1 by [`LAYOUT_PRIOR_POINTS`].
    pub comm_scale: f64,
    /// The multiplier the points alone give (before shrinkage).
    pub raw_scale: f64,
    /// Multi-GPU points used.
    pub points: usize,
    /// Distinct models among them.
    pub models: usize,
    /// Median |log(pred/measured)| of those points with the type's constants.
    pub log_error_before: f64,
    /// The same with the (shrunk) layout multiplier.
    pub log_error_after: f64,
}

/// A per-iteration host overhead fitted for one (model, GPU type).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedOverhead {
    /// Model (network name).
    pub model: String,
    /// GPU type.
    pub gpu_type: String,
    /// Seconds per iteration that do not grow with the batch.
    pub seconds: f64,
    /// Single-GPU points (batch sizes) used.
    pub points: usize,
}

/// A compute multiplier fitted for one micro-batch size of a (model, GPU type).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedBatch {
    /// Model (network name).
    pub model: String,
    /// GPU type.
    pub gpu_type: String,
    /// Samples per GPU per micro-batch.
    pub micro_batch: u32,
    /// Multiplier on compute time at that size, shrunk (see `fit_batch_sizes`).
    pub scale: f64,
    /// The multiplier that makes the single-GPU point exact.
    pub raw_scale: f64,
}

/// One point used for calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationPoint {
    /// Measured record.
    pub record: ProfileRecord,
    /// Datasheet prediction for it.
    pub datasheet_s: f64,
    /// The efficiency factor this point implies (1 for points that fitted framework constants).
    pub factor: f64,
}

/// A profile whose implied efficiency is implausible.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlaggedProfile {
    /// Measured record.
    pub record: ProfileRecord,
    /// Model FLOPs per second achieved over the precision's peak.
    pub implied_efficiency: f64,
    /// What to check.
    pub message: String,
}

/// How the estimator was calibrated: what was fitted from what, points skipped, profiles flagged.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// Per GPU type compute factors (single-GPU points).
    pub per_type: Vec<FittedFactor>,
    /// Per family residuals over the type level.
    pub per_family: Vec<FittedFactor>,
    /// Per (model, GPU type) compute factors.
    pub per_model_type: Vec<FittedFactor>,
    /// Per (model, GPU type) per-iteration host overheads.
    pub per_model_overhead: Vec<FittedOverhead>,
    /// Per (model, GPU type, micro-batch size) compute multipliers.
    pub per_batch: Vec<FittedBatch>,
    /// Framework constants (multi-GPU points).
    pub framework: Vec<FittedFramework>,
    /// Per-layout communication multipliers (multi-GPU points).
    pub per_layout: Vec<FittedLayout>,
    /// Per-job refits.
    pub per_job: Vec<JobRefit>,
    /// Link multipliers measured by collective microbenchmarks.
    pub links: Vec<MeasuredLinks>,
    /// Points used.
    pub used: Vec<CalibrationPoint>,
    /// Points not used, with the reason.
    pub skipped: Vec<(ProfileRecord, String)>,
    /// Profiles whose implied efficiency is outside [`PLAUSIBLE_EFFICIENCY`].
    pub flagged: Vec<FlaggedProfile>,
    /// Multi-GPU points of in-node weak-scaling series that contradict
    /// themselves (see `weak_scaling_contradictions`), with what to check; still used.
    pub contradicting: Vec<(ProfileRecord, String)>,
    /// Type levels carried to catalog types without measured points.
    pub transferred: Vec<TransferredLevel>,
    /// Points recorded without the plan that ran, with the plan they were
    /// costed with: the best plan without activation recomputation (unless
    /// the model's description says it always recomputes).
    pub unknown_plan: Vec<(ProfileRecord, Plan)>,
}

impl fmt::Display for CalibrationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.per_type.is_empty() && self.framework.is_empty() && self.links.is_empty() {
            return writeln!(f, "not calibrated (no usable measured points; {} skipped)", self.skipped.len());
        }
        writeln!(f, "calibrated from {} measured points ({} skipped):", self.used.len(), self.skipped.len())?;
        for t in &self.per_type {
            writeln!(f, "  compute  {:<10} efficiency x{:.3} ({} single-GPU points)", t.gpu_type, t.factor, t.points)?;
        }
        for t in self.transferred.iter().filter(|t| (t.factor.ln()).abs() >= 1e-9) {
            writeln!(f, "  compute  {:<10} efficiency x{:.3} transferred (no points of its own; {})", t.gpu_type, t.factor, t.mechanism.describe(&t.from))?;
        }
        for t in &self.per_family {
            writeln!(f, "  compute  family {:<14} x{:.3} over its types ({} points)", t.model.as_deref().unwrap_or(""), t.factor, t.points)?;
        }
        for t in &self.per_model_type {
            writeln!(f, "  compute  {:<10} {:<22} x{:.3} ({} points)", t.gpu_type, t.model.as_deref().unwrap_or(""), t.factor, t.points)?;
        }
        for o in &self.per_model_overhead {
            writeln!(f, "  overhead {:<10} {:<22} {:.1} ms per iteration ({} single-GPU batch sizes)", o.gpu_type, o.model, o.seconds * 1e3, o.points)?;
        }
        for w in &self.framework {
            let mut who = w.runtime.map_or("all runtimes".to_string(), |r| format!("runtime {r:?}").to_lowercase());
            if let Some(g) = &w.gpu_type {
                who = format!("{who} on {g}");
            }
            writeln!(
                f,
                "  framework ({who}): comm x{:.2} in a node, x{:.2} across nodes, {:.2} ms per micro-batch, {:.1} ms per iteration ({} multi-GPU points, median |log error| {:.3})",
                w.constants.comm_scale,
                w.constants.net_scale,
                w.constants.per_microbatch_s * 1e3,
                w.constants.per_iter_s * 1e3,
                w.points,
                w.median_log_error
            )?;
        }
        for l in &self.per_layout {
            writeln!(
                f,
                "  layout   {:<10} {} node(s) x {} GPUs: comm x{:.2} over the type's constants (points alone x{:.2}; {} multi-GPU points of {} models, median |log error| {:.3} -> {:.3})",
                l.gpu_type, l.nodes, l.gpus_per_node, l.comm_scale, l.raw_scale, l.points, l.models, l.log_error_before, l.log_error_after
            )?;
        }
        for l in &self.links {
            writeln!(
                f,
                "  links    {:<10} measured: x{:.2} in a node, x{:.2} across nodes over the alpha-beta defaults ({} + {} collective rows)",
                l.gpu_type, l.intra, l.net, l.points.0, l.points.1
            )?;
        }
        for b in self.per_batch.iter().filter(|b| (b.scale.ln()).abs() >= 0.05) {
            writeln!(
                f,
                "  batch    {:<22} {:<10} micro-batch {:>4}: compute x{:.2} (the single-GPU point alone x{:.2})",
                b.model, b.gpu_type, b.micro_batch, b.scale, b.raw_scale
            )?;
        }
        for j in &self.per_job {
            writeln!(
                f,
                "  per-job  {:<22} compute x{:.3}, communication x{:.2} ({} configurations; median |log error| {:.3} -> {:.3})",
                j.model, j.compute_scale, j.comm_scale, j.configs, j.log_error_before, j.log_error_after
            )?;
        }
        for p in &self.flagged {
            writeln!(f, "  WARNING {} x{} batch {} on {}: {}", p.record.model, p.record.gpus(), p.record.batch, p.record.gpu_type, p.message)?;
        }
        for (r, message) in &self.contradicting {
            writeln!(f, "  WARNING {} x{} batch {} on {}: {}", r.model, r.gpus(), r.batch, r.gpu_type, message)?;
        }
        for (r, plan) in &self.unknown_plan {
            writeln!(
                f,
                "  note     {} x{} batch {} on {}: plan unknown, costed as {plan} (no recomputation assumed; record the plan with profile run --plan)",
                r.model,
                r.gpus(),
                r.batch,
                r.gpu_type
            )?;
        }
        Ok(())
    }
}

/// Fitted levels used by the estimator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    /// log factor and points per GPU type.
    per_type: BTreeMap<String, (f64, usize)>,
    /// log residual over the type level per family.
    per_family: BTreeMap<String, (f64, usize)>,
    /// log factor per (family, type).
    per_family_type: BTreeMap<(String, String), (f64, usize)>,
    /// log factor per (model, type).
    per_model_type: BTreeMap<(String, String), (f64, usize)>,
    /// Type levels carried to catalog types without measured points: log
    /// level and the measured types it came from.
    per_type_transferred: BTreeMap<String, (f64, Vec<String>)>,
    /// Type levels carried by roofline to catalog types without measured
    /// points nor measured types of their generation, per precision class
    /// (see [`roofline_prior`]): log level and the measured types it came from.
    per_type_roofline: BTreeMap<(String, String), (f64, Vec<String>)>,
    /// Type levels net of their points' family residuals per (type,
    /// precision class) (single-GPU points): what the roofline prior fits.
    per_type_prec_net: BTreeMap<(String, String), f64>,
    /// Type levels and family residuals fitted together (additive in log
    /// space, [`type_family_levels`]): the level of a family on a measured
    /// type it was never measured on.
    per_type_additive: BTreeMap<String, f64>,
    /// See `per_type_additive`.
    per_family_additive: BTreeMap<String, f64>,
    /// Types each family residual was measured on.
    per_family_types: BTreeMap<String, Vec<String>>,
    /// Architecture generation (compute-capability major version) of every
    /// catalog type that declares one: which types a model's own level
    /// carries between ([`Calibration::carried_model_residual`]).
    type_generation: BTreeMap<String, f64>,

    /// Type levels net of their points' family residuals (single-GPU points).
    per_type_net: BTreeMap<String, f64>,
    /// Per-iteration host overhead (seconds) per (model, type).
    per_model_overhead: BTreeMap<(String, String), f64>,
    /// Compute-time multipliers by micro-batch size per (model, type): what a
    /// single-GPU profile at that size says beyond the fitted level, shrunk.
    per_batch: BTreeMap<(String, String), Vec<(u32, f64)>>,
    /// Framework constants per runtime.
    framework_by_runtime: BTreeMap<String, Framework>,
    /// Framework constants per (runtime, GPU type): the cluster's interconnect as measured.
    framework_by_runtime_type: BTreeMap<(String, String), Framework>,
    /// Framework constants from every multi-GPU point.
    framework_global: Option<Framework>,
    /// Communication multiplier per GPU type and layout (nodes, GPUs per node).
    per_layout: BTreeMap<String, BTreeMap<(u32, u32), f64>>,
    /// Per-model (compute, communication) multipliers of the per-job refit.
    per_job: BTreeMap<String, (f64, f64)>,
    /// Measured link multipliers per GPU type.
    links: BTreeMap<String, MeasuredLinks>,
    /// What was fitted from what.
    pub report: CalibrationReport,
}

/// The key a family's points are pooled under when levels are fitted.
fn family_key(f: ModelFamily) -> String {
    format!("{f:?}").to_lowercase()
}

/// The family level a model is predicted from: its architecture family's;
/// for a `generic` model (no architecture described, only parameter and
/// FLOP counts) none, as generic models share no kernels whose efficiency
/// could carry from one to another: the key names no fitted family, so the
/// model gets the type level. The pooled `generic` residual still keeps
/// generic points from biasing the type levels while they are fitted.
fn predict_family_key(model: &str, f: ModelFamily) -> String {
    if family_pooled(f) {
        family_key(f)
    } else {
        format!("generic:{}", network_key(model))
    }
}

/// Whether models of `f` are predicted from a level pooled over the family
/// (every architecture family; not `generic`).
fn family_pooled(f: ModelFamily) -> bool {
    f != ModelFamily::Generic
}

fn precision_key(p: Precision) -> String {
    match p {
        Precision::Fp16 | Precision::Bf16 => "half".into(),
        Precision::Tf32 => "tf32".into(),
        Precision::Fp32 => "fp32".into(),
    }
}

fn runtime_key(r: Runtime) -> String {
    format!("{r:?}").to_lowercase()
}

/// The network a model name stands for: `<model>+<variant>` names a way of
/// training `<model>` (e.g. `+offload`: ZeRO-Offload) with the same layers,
/// so its compute level is the model's, and its profiles pin it.
pub(crate) fn network_key(model: &str) -> &str {
    model.split_once('+').map_or(model, |(m, _)| m)
}

fn model_type_key(model: &str, gpu_type: &str) -> (String, String) {
    (network_key(model).to_string(), gpu_type.to_string())
}

fn shrink(mean: f64, n: usize, prior: f64, prior_points: f64) -> f64 {
    (mean * n as f64 + prior * prior_points) / (n as f64 + prior_points)
}

impl Calibration {
    /// Compute efficiency multiplier for `model` (of `family`, trained in
    /// `precision`) on `gpu_type` (1 when uncalibrated): in log space, the
    /// type level — measured, else carried from its architecture generation,
    /// else carried by roofline from measured types of the precision
    /// ([`super::transfer`]), else the datasheet's 0 — plus the family
    /// residual (measured over every type), refined by the (family, type)
    /// level where measured; then the model's own (model, type) level shrunk
    /// toward that.
    pub fn factor_for(&self, model: &str, family: ModelFamily, precision: Precision, gpu_type: &str) -> f64 {
        let fam_level = self.family_level(&predict_family_key(model, family), precision, gpu_type);
        match self.per_model_type.get(&model_type_key(model, gpu_type)) {
            Some(&(l, n)) => shrink(l, n, fam_level, MODEL_PRIOR_POINTS).exp(),
            None => (fam_level + self.carried_model_residual(model, family, precision, gpu_type).unwrap_or(0.0)).exp(),
        }
    }

    /// The model's own residual over its family level, carried to a type it
    /// was not measured on from the measured types of the same
    /// architecture generation: the mean of [`Self::same_generation_residuals`].
    /// Within a generation the kernels, libraries and tensor cores a model's
    /// time depends on are the same, so what sets a model apart from its
    /// family carries; across generations it does not (bench/HISTORY.md:
    /// carried from every type, leave-one-type-out error rose). None
    /// without such a type.
    fn carried_model_residual(&self, model: &str, family: ModelFamily, precision: Precision, gpu_type: &str) -> Option<f64> {
        let (sum, n) = self.same_generation_residuals(model, family, precision, gpu_type).fold((0.0, 0u32), |(s, k), (_, r)| (s + r, k + 1));
        (n > 0).then(|| sum / f64::from(n))
    }

    /// Per measured type of `gpu_type`'s architecture generation other than
    /// `gpu_type` itself: the type and the model's level there less its
    /// family's level there.
    fn same_generation_residuals<'a>(&'a self, model: &str, family: ModelFamily, precision: Precision, gpu_type: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        let gen = self.type_generation.get(gpu_type).copied();
        let net = network_key(model).to_string();
        let fam = predict_family_key(model, family);
        self.per_model_type
            .range((net.clone(), String::new())..)
            .take_while(move |((m, _), _)| *m == net)
            .filter(move |((_, t), _)| gen.is_some() && t != gpu_type && self.type_generation.get(t).copied() == gen)
            .map(move |((_, t), &(l, n))| {
                let fl = self.family_level(&fam, precision, t);
                (t.as_str(), shrink(l, n, fl, MODEL_PRIOR_POINTS) - fl)
            })
    }

    /// The type level of `gpu_type` for `precision` and where it came from.
    fn type_level(&self, precision: Precision, gpu_type: &str) -> (f64, TypeLevel) {
        if let Some(&(l, _)) = self.per_type.get(gpu_type) {
            return (l, TypeLevel::Measured);
        }
        if let Some((l, from)) = self.per_type_transferred.get(gpu_type) {
            return (*l, TypeLevel::Transferred { from: from.clone(), mechanism: Mechanism::Generation });
        }
        let pk = precision_key(precision);
        match self.per_type_roofline.get(&(gpu_type.to_string(), pk.clone())) {
            Some((l, from)) => (*l, TypeLevel::Transferred { from: from.clone(), mechanism: Mechanism::Roofline { precision: pk } }),
            None => (0.0, TypeLevel::Datasheet),
        }
    }

    /// Log level of `fam` on `gpu_type` before any model's own points: the
    /// type level plus the family residual, refined by the (family, type)
    /// level where measured.
    fn family_level(&self, fam: &str, precision: Precision, gpu_type: &str) -> f64 {
        let prior = self.type_level(precision, gpu_type).0 + self.per_family.get(fam).map_or(0.0, |v| v.0);
        match self.per_family_type.get(&(fam.to_string(), gpu_type.to_string())) {
            Some(&(l, n)) => shrink(l, n, prior, FAMILY_PRIOR_POINTS),
            None => match (self.per_type_additive.get(gpu_type), self.per_family_additive.get(fam)) {
                (Some(t), Some(f)) => t + f,
                _ => prior,
            },
        }
    }

    /// Where each part of the compute efficiency of `model` (of `family`,
    /// in `precision`) on `gpu_type` comes from.
    pub fn factor_source(&self, model: &str, family: ModelFamily, precision: Precision, gpu_type: &str) -> FactorSource {
        let fam = predict_family_key(model, family);
        let model_measured = self.per_model_type.contains_key(&model_type_key(model, gpu_type));
        FactorSource {
            gpu_type: self.type_level(precision, gpu_type).1,
            family_from: self.per_family_types.get(&fam).cloned().unwrap_or_default(),
            family_on_type: self.per_family_type.contains_key(&(fam, gpu_type.to_string())),
            family_pooled: family_pooled(family),
            model_measured,
            model_from: if model_measured {
                Vec::new()
            } else {
                self.same_generation_residuals(model, family, precision, gpu_type).map(|(t, _)| t.to_string()).collect()
            },
        }
    }

    /// Carries type levels to every catalog type without measured points:
    /// from the measured types of its architecture generation
    /// ([`transfer_prior`]), else, per precision class, by roofline from the
    /// measured types of that precision ([`roofline_prior`]).
    fn fit_transfers(&mut self, gpus: &crate::gpu::GpuCatalog) {
        self.type_generation = gpus.specs().filter_map(|g| g.compute_capability.map(|c| (g.name.clone(), c.floor()))).collect();
        let measured: Vec<(String, f64, Option<f64>)> = self
            .per_type
            .iter()
            .map(|(t, &(l, _))| (t.clone(), self.per_type_net.get(t).copied().unwrap_or(l), gpus.get(t).ok().and_then(|g| g.compute_capability)))
            .collect();
        self.per_type_transferred.clear();
        self.per_type_roofline.clear();
        self.report.transferred.clear();
        for g in gpus.specs().filter(|g| !self.per_type.contains_key(&g.name)) {
            if let Some((l, from)) = transfer_prior(&measured, g.compute_capability) {
                self.report.transferred.push(TransferredLevel { gpu_type: g.name.clone(), factor: l.exp(), from: from.clone(), mechanism: Mechanism::Generation });
                self.per_type_transferred.insert(g.name.clone(), (l, from));
                continue;
            }
            for (pk, prec) in [("half", Precision::Bf16), ("tf32", Precision::Tf32), ("fp32", Precision::Fp32)] {
                let pts: Vec<(String, f64, f64)> = self
                    .per_type_prec_net
                    .iter()
                    .filter(|((_, q), _)| q == pk)
                    .filter_map(|((t, _), &l)| gpus.get(t).ok().map(|u| (t.clone(), flop_per_byte(u, prec), l)))
                    .collect();
                let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.1, p.2)).collect();
                if let Some(l) = roofline_prior(&line, flop_per_byte(g, prec)) {
                    let from: Vec<String> = pts.iter().map(|p| p.0.clone()).collect();
                    let mechanism = Mechanism::Roofline { precision: pk.to_string() };
                    self.report.transferred.push(TransferredLevel { gpu_type: g.name.clone(), factor: l.exp(), from: from.clone(), mechanism });
                    self.per_type_roofline.insert((g.name.clone(), pk.to_string()), (l, from));
                }
            }
        }
    }

    /// [`Calibration::factor_for`] for a catalog model name (family looked up by the caller when known).
    pub fn factor(&self, model: &str, gpu_type: &str) -> f64 {
        self.per_model_type
            .get(&model_type_key(model, gpu_type))
            .or_else(|| self.per_type.get(gpu_type))
            .map_or(1.0, |v| v.0.exp())
    }

    /// Framework constants for a runtime: its own fit, else the global one, else defaults.
    pub fn framework(&self, runtime: Runtime) -> Framework {
        self.framework_by_runtime.get(&runtime_key(runtime)).copied().or(self.framework_global).unwrap_or_default()
    }

    /// Framework constants for a runtime on one GPU type's servers: the
    /// (runtime, type) fit, else [`Calibration::framework`], with the type's
    /// measured link multipliers applied.
    pub fn framework_on(&self, runtime: Runtime, gpu_type: &str) -> Framework {
        let fw = self.framework_by_runtime_type.get(&(runtime_key(runtime), gpu_type.to_string())).copied().unwrap_or_else(|| self.framework(runtime));
        self.with_links(gpu_type, fw)
    }

    /// [`Calibration::framework_on`] for a group of `nodes` × `per_node`
    /// GPUs: with the layout's communication multiplier when one was fitted
    /// (else the type's constants as they are).
    pub fn framework_at(&self, runtime: Runtime, gpu_type: &str, nodes: u32, per_node: u32) -> Framework {
        let mut fw = self.framework_on(runtime, gpu_type);
        let m = self.layout_scale(gpu_type, nodes, per_node);
        fw.comm_scale *= m;
        fw.net_scale *= m;
        fw
    }

    /// The communication multiplier fitted for a layout (1 when none).
    pub fn layout_scale(&self, gpu_type: &str, nodes: u32, per_node: u32) -> f64 {
        self.per_layout.get(gpu_type).and_then(|l| l.get(&(nodes, per_node))).copied().unwrap_or(1.0)
    }

    /// `fw` with `gpu_type`'s measured link multipliers applied.
    fn with_links(&self, gpu_type: &str, mut fw: Framework) -> Framework {
        if let Some(l) = self.links.get(gpu_type) {
            let k = l.scale();
            fw.comm_scale *= k.intra;
            fw.net_scale *= k.net;
        }
        fw
    }

    /// Per-iteration host overhead fitted for `model` on `gpu_type` (0 when none).
    pub fn overhead(&self, model: &str, gpu_type: &str) -> f64 {
        self.per_model_overhead.get(&model_type_key(model, gpu_type)).copied().unwrap_or(0.0)
    }

    /// Compute-time multipliers by micro-batch size fitted for `model` on
    /// `gpu_type` (empty when none): (samples per GPU per micro-batch, multiplier).
    pub fn batch_scale(&self, model: &str, gpu_type: &str) -> &[(u32, f64)] {
        self.per_batch.get(&model_type_key(model, gpu_type)).map_or(&[], |v| v.as_slice())
    }

    /// `fw` with `model`'s host overhead on `gpu_type` added to its per-iteration cost.
    fn with_overhead(&self, model: &str, gpu_type: &str, mut fw: Framework) -> Framework {
        fw.per_iter_s += self.overhead(model, gpu_type);
        fw
    }

    /// Compute factor and framework constants for `spec` on `gpu_type`:
    /// the hierarchical levels, the model's host overhead and, when the
    /// model has one, its per-job refit.
    /// `nodes` × `per_node` is the Cell's layout.
    pub fn job_constants(&self, spec: &ModelSpec, gpu_type: &str, nodes: u32, per_node: u32) -> (f64, Framework) {
        let model = spec.name.as_str();
        let mut f = self.factor_for(model, spec.family, spec.precision, gpu_type);
        let mut fw = self.with_overhead(model, gpu_type, self.framework_at(spec.runtime, gpu_type, nodes, per_node));
        if let Some(&(c, m)) = self.per_job.get(model) {
            f *= c;
            fw.comm_scale *= m;
            fw.net_scale *= m;
        }
        (f, fw)
    }

    /// Whether `model` has a per-job refit.
    pub fn has_job_refit(&self, model: &str) -> bool {
        self.per_job.contains_key(model)
    }

    /// Whether any compute factor applies to `model` on `gpu_type`.
    pub fn has_factor(&self, model: &str, gpu_type: &str) -> bool {
        self.per_type.contains_key(gpu_type)
            || self.per_type_transferred.contains_key(gpu_type)
            || self.per_model_type.contains_key(&model_type_key(model, gpu_type))
            || self.per_type_roofline.keys().any(|k| k.0 == gpu_type)
    }

    /// A calibration with one compute factor for a GPU type (tests, what-if studies).
    pub fn with_type_factor(mut self, gpu_type: &str, factor: f64) -> Calibration {
        self.per_type.insert(gpu_type.to_string(), (factor.ln(), 1));
        self
    }

    /// Fits the levels and constants from `records` with the datasheet estimator `base`.
    pub fn fit<'a>(base: &Estimator, records: impl IntoIterator<Item = &'a ProfileRecord>, policy: &CalibrationPolicy) -> Calibration {
        let mut cal = Calibration::default();
        let mut singles: Vec<(ResolvedPoint, f64)> = Vec::new();
        let mut multis: Vec<ResolvedPoint> = Vec::new();
        let mut comm: Vec<CommPoint> = Vec::new();
        for rec in records {
            if policy.single_node_only && rec.nodes != 1 {
                cal.report.skipped.push((rec.clone(), "multi-node point (policy: single-node points only)".into()));
                continue;
            }
            if policy.max_gpus.is_some_and(|m| rec.gpus() > m) {
                cal.report.skipped.push((rec.clone(), format!("more than {} GPUs", policy.max_gpus.unwrap_or(0))));
                continue;
            }
            if let Some(c) = CommPoint::from_record(rec) {
                match c {
                    Ok(c) => comm.push(c),
                    Err(e) => cal.report.skipped.push((rec.clone(), e.to_string())),
                }
                continue;
            }
            let resolved = resolve(base, rec);
            if let (Ok(p), None) = (&resolved, rec.plan) {
                cal.report.unknown_plan.push((rec.clone(), p.plan));
            }
            match resolved {
                Ok(p) if rec.gpus() == 1 => match p.implied_factor(base, 1.0, &Framework::default()) {
                    Ok((datasheet_s, factor)) => {
                        if let Some(flag) = p.sanity(base) {
                            cal.report.flagged.push(flag);
                        }
                        cal.report.used.push(CalibrationPoint { record: rec.clone(), datasheet_s, factor });
                        singles.push((p, factor.ln()));
                    }
                    Err(e) => cal.report.skipped.push((rec.clone(), e.to_string())),
                },
                Ok(p) => multis.push(p),
                Err(e) => cal.report.skipped.push((rec.clone(), e.to_string())),
            }
        }
        // Series that contradict themselves are kept (leaving them out of the
        // communication fits made the held-out error worse: what they share,
        // a slow layout, is still real) but reported, for the user to check.
        let all: Vec<(&str, &ProfileRecord)> = singles.iter().map(|s| &s.0).chain(multis.iter()).map(|p| (p.job.model.name.as_str(), &p.rec)).collect();
        for i in weak_scaling_contradictions(&all) {
            let r = all[i].1;
            let message = format!(
                "an iteration of this model on more GPUs of one node at {} samples per GPU is over {:.0}% faster than on fewer, which synchronous data parallelism cannot do: one of these measurements is not what its record says (kept)",
                r.batch / r.gpus().max(1),
                CONTRADICTION_TOLERANCE * 100.0
            );
            cal.report.contradicting.push((r.clone(), message));
        }
        cal.report.links = fit_links(&comm, base.gpu_catalog());
        cal.links = cal.report.links.iter().map(|l| (l.gpu_type.clone(), l.clone())).collect();
        cal.fit_compute(&singles, policy.per_model);
        cal.fit_transfers(base.gpu_catalog());
        if policy.per_model {
            cal.fit_overheads(base, &singles);
            cal.fit_batch_sizes(base, &singles);
        }
        cal.fit_framework(base, &multis);
        cal.fit_layouts(base, &multis);
        // (model, type) pairs seen only on several GPUs: their level from those points.
        let mut only_multi: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        // GPU types without single-GPU points get their type level from these
        // too, net of each point's family residual (applied again on lookup).
        let mut type_only_multi: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for p in &multis {
            let key = model_type_key(&p.job.model.name, &p.gpu);
            if policy.per_model && !cal.per_model_type.contains_key(&key) {
                let fw = cal.point_framework(p);
                if let Ok((_, f)) = p.implied_factor(base, 1.0, &fw) {
                    only_multi.entry(key).or_default().push(f.ln());
                    if !cal.per_type.contains_key(&p.gpu) {
                        let resid = cal.per_family.get(&family_key(p.job.model.family)).map_or(0.0, |v| v.0);
                        type_only_multi.entry(p.gpu.clone()).or_default().push(f.ln() - resid);
                    }
                }
            }
        }
        for (key, logs) in only_multi {
            cal.report.per_model_type.push(FittedFactor { gpu_type: key.1.clone(), model: Some(key.0.clone()), factor: median(&logs).exp(), points: logs.len() });
            cal.per_model_type.insert(key, (median(&logs), logs.len()));
        }
        let new_types = !type_only_multi.is_empty();
        for (gpu, logs) in type_only_multi {
            cal.report.per_type.push(FittedFactor { gpu_type: gpu.clone(), model: None, factor: median(&logs).exp(), points: logs.len() });
            cal.per_type.insert(gpu, (median(&logs), logs.len()));
        }
        if new_types {
            cal.fit_transfers(base.gpu_catalog());
        }
        // The shared constants above (framework, layouts) are fitted against
        // the smooth compute level: one size's single-GPU run is evidence about
        // that (model, type, size) alone, not about links every model shares.
        // The per-job refit predicts as the estimator will, sizes included.
        for p in singles.iter_mut().map(|s| &mut s.0).chain(multis.iter_mut()) {
            p.batch_scale = cal.batch_scale(&p.job.model.name, &p.gpu).to_vec();
        }
        if policy.per_job {
            cal.fit_jobs(base, singles.iter().map(|s| &s.0).chain(multis.iter()));
        }
        for p in &multis {
            cal.report.used.push(CalibrationPoint { record: p.rec.clone(), datasheet_s: p.datasheet_s, factor: 1.0 });
        }
        cal
    }

    /// Framework constants (with the model's host overhead) for a measured
    /// point's runtime, GPU type and layout.
    fn point_framework(&self, p: &ResolvedPoint) -> Framework {
        let (nodes, per_node) = p.layout();
        self.with_overhead(&p.job.model.name, &p.gpu, self.framework_at(p.job.model.runtime, &p.gpu, nodes, per_node))
    }

    /// Level 2b: per layout (GPU type, nodes, GPUs per node) with multi-GPU
    /// points, one multiplier on both link scales over the points' (runtime,
    /// type) constants, searched in log2 steps of 1/8 within
    /// ±[`LAYOUT_RANGE_LOG2`] minimising the points' mean |log error| (a
    /// layout holds few models: the mean is steadier than the median), then
    /// shrunk toward 1 in log space by [`LAYOUT_PRIOR_POINTS`]. A layout
    /// without points keeps its type's constants.
    fn fit_layouts(&mut self, base: &Estimator, multis: &[ResolvedPoint]) {
        let mut groups: BTreeMap<(String, u32, u32), Vec<&ResolvedPoint>> = BTreeMap::new();
        for p in multis {
            let (nodes, per_node) = p.layout();
            groups.entry((p.gpu.clone(), nodes, per_node)).or_default().push(p);
        }
        for (key, pts) in groups {
            let stride = pts.len().div_ceil(MAX_FIT_POINTS).max(1);
            let pts: Vec<&ResolvedPoint> = pts.iter().step_by(stride).copied().collect();
            let consts: Vec<(f64, Framework)> =
                pts.iter().map(|p| (self.factor_for(&p.job.model.name, p.job.model.family, p.job.model.precision, &p.gpu), self.point_framework(p))).collect();
            let errs = |m: f64| -> Vec<f64> {
                pts.iter()
                    .zip(&consts)
                    .filter_map(|(p, (f, fw))| {
                        let fw = Framework { comm_scale: fw.comm_scale * m, net_scale: fw.net_scale * m, ..*fw };
                        p.predict(base, *f, &fw).map(|t| (t / p.rec.iter_time_s).ln().abs())
                    })
                    .collect()
            };
            let loss = |m: f64| -> f64 {
                let e = errs(m);
                if e.len() < pts.len() || e.is_empty() { f64::INFINITY } else { e.iter().sum::<f64>() / e.len() as f64 }
            };
            let (mut best, mut best_loss) = (1.0, loss(1.0));
            if !best_loss.is_finite() {
                continue;
            }
            for k in -8 * LAYOUT_RANGE_LOG2..=8 * LAYOUT_RANGE_LOG2 {
                let m = 2f64.powf(k as f64 / 8.0);
                let l = loss(m);
                if l < best_loss {
                    (best, best_loss) = (m, l);
                }
            }
            let mut models: Vec<&str> = pts.iter().map(|p| network_key(&p.job.model.name)).collect();
            models.sort_unstable();
            models.dedup();
            let n = pts.len() as f64;
            let shrunk = (best.ln() * n / (n + LAYOUT_PRIOR_POINTS)).exp();
            self.report.per_layout.push(FittedLayout {
                gpu_type: key.0.clone(),
                nodes: key.1,
                gpus_per_node: key.2,
                comm_scale: shrunk,
                raw_scale: best,
                points: pts.len(),
                models: models.len(),
                log_error_before: median(&errs(1.0)),
                log_error_after: median(&errs(shrunk)),
            });
            self.per_layout.entry(key.0).or_default().insert((key.1, key.2), shrunk);
        }
    }

    /// Level 4: per model with ≥ [`MIN_JOB_CONFIGS`] configurations (one
    /// multi-GPU), a coordinate search in log space over a compute and a
    /// communication multiplier minimising its points' mean |log error| plus
    /// a small pull toward 1 ([`JOB_PRIOR_WEIGHT`]).
    fn fit_jobs<'p>(&mut self, base: &Estimator, pts: impl Iterator<Item = &'p ResolvedPoint>) {
        let mut by_model: BTreeMap<String, Vec<&ResolvedPoint>> = BTreeMap::new();
        for p in pts {
            by_model.entry(p.job.model.name.clone()).or_default().push(p);
        }
        for (model, pts) in by_model {
            let mut configs: Vec<(&str, u32, u32, u32)> = pts.iter().map(|p| (p.gpu.as_str(), p.rec.gpus(), p.rec.nodes, p.rec.batch)).collect();
            configs.sort_unstable();
            configs.dedup();
            if configs.len() < MIN_JOB_CONFIGS || pts.iter().all(|p| p.rec.gpus() <= 1) {
                continue;
            }
            let base_consts: Vec<(f64, Framework)> =
                pts.iter()
                    .map(|p| (self.factor_for(&p.job.model.name, p.job.model.family, p.job.model.precision, &p.gpu), self.point_framework(p)))
                    .collect();
            let errs = |c: f64, m: f64| -> Vec<f64> {
                pts.iter()
                    .zip(&base_consts)
                    .filter_map(|(p, (f, fw))| {
                        let fw = Framework { comm_scale: fw.comm_scale * m, net_scale: fw.net_scale * m, ..*fw };
                        p.predict(base, f * c, &fw).map(|t| (t / p.rec.iter_time_s).ln().abs())
                    })
                    .collect()
            };
            let loss = |c: f64, m: f64| -> f64 {
                let e = errs(c, m);
                if e.len() < pts.len() { f64::INFINITY } else { e.iter().sum::<f64>() / e.len().max(1) as f64 + JOB_PRIOR_WEIGHT * (c.ln().abs() + m.ln().abs()) }
            };
            let (mut c, mut m) = (1.0, 1.0);
            let mut best = loss(c, m);
            if !best.is_finite() {
                continue;
            }
            // Coarse rounds over the whole range, then finer steps around the best.
            for (steps, per_octave) in [(16, 8.0), (16, 8.0), (4, 32.0), (4, 32.0)] {
                let (c0, m0) = (c, m);
                for k in -steps..=steps {
                    let cand = if per_octave < 10.0 { 2f64.powf(k as f64 / per_octave) } else { c0 * 2f64.powf(k as f64 / per_octave) };
                    let l = loss(cand, m);
                    if l < best {
                        (c, best) = (cand, l);
                    }
                }
                for k in -steps..=steps {
                    let cand = if per_octave < 10.0 { 2f64.powf(k as f64 / 4.0 + 1.0) } else { m0 * 2f64.powf(k as f64 / per_octave) };
                    let l = loss(c, cand);
                    if l < best {
                        (m, best) = (cand, l);
                    }
                }
            }
            self.report.per_job.push(JobRefit {
                model: model.clone(),
                compute_scale: c,
                comm_scale: m,
                configs: configs.len(),
                log_error_before: median(&errs(1.0, 1.0)),
                log_error_after: median(&errs(c, m)),
            });
            self.per_job.insert(model, (c, m));
        }
    }

    /// Per (model, type) with single-GPU points at two or more batch sizes:
    /// the measured time less the modelled non-compute part, `y`, is fitted
    /// as `a · compute + x` (least squares on relative error), `compute` the
    /// datasheet compute; `1/a` replaces the (model, type) level and `x` is
    /// its per-iteration host overhead. Kept only when `x` is positive, below
    /// 90% of the fastest point, and the fit's median error is at most
    /// [`OVERHEAD_MIN_GAIN`] of one level's.
    fn fit_overheads(&mut self, base: &Estimator, singles: &[(ResolvedPoint, f64)]) {
        let mut groups: BTreeMap<(String, String), Vec<(u32, f64, f64)>> = BTreeMap::new();
        for (p, _) in singles {
            if let Some((compute, rest)) = p.split(base) {
                groups.entry(model_type_key(&p.job.model.name, &p.gpu)).or_default().push((p.rec.batch, compute, p.rec.iter_time_s - rest));
            }
        }
        for (key, pts) in groups {
            let mut batches: Vec<u32> = pts.iter().map(|p| p.0).collect();
            batches.sort_unstable();
            batches.dedup();
            if batches.len() < 2 || pts.iter().any(|p| p.1 <= 0.0 || p.2 <= 0.0) {
                continue;
            }
            // Least squares on relative error.
            let (mut scc, mut sc, mut sw, mut scy, mut sy) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for &(_, c, y) in &pts {
                let w = 1.0 / (y * y);
                (scc, sc, sw, scy, sy) = (scc + w * c * c, sc + w * c, sw + w, scy + w * c * y, sy + w * y);
            }
            let det = scc * sw - sc * sc;
            if det.abs() < 1e-30 {
                continue;
            }
            let a = (scy * sw - sc * sy) / det;
            let x = (scc * sy - sc * scy) / det;
            // Kept only where it explains the points clearly better than
            // one level alone (the median of the points' levels).
            let a0 = median(&pts.iter().map(|p| p.2 / p.1).collect::<Vec<_>>());
            let err = |a: f64, x: f64| median(&pts.iter().map(|p| ((a * p.1 + x) / p.2).ln().abs()).collect::<Vec<_>>());
            if err(a, x) > OVERHEAD_MIN_GAIN * err(a0, 0.0) {
                continue;
            }
            let fastest = pts.iter().map(|p| p.2).fold(f64::INFINITY, f64::min);
            if a <= 0.0 || x <= 0.0 || x >= 0.9 * fastest {
                continue;
            }
            let level = (1.0 / a).clamp(FACTOR_RANGE.0, FACTOR_RANGE.1).ln();
            self.per_model_type.insert(key.clone(), (level, pts.len()));
            if let Some(r) = self.report.per_model_type.iter_mut().find(|r| r.gpu_type == key.1 && r.model.as_deref().map(network_key) == Some(key.0.as_str())) {
                r.factor = level.exp();
            }
            self.report.per_model_overhead.push(FittedOverhead { model: key.0.clone(), gpu_type: key.1.clone(), seconds: x, points: pts.len() });
            self.per_model_overhead.insert(key, x);
        }
    }

    /// Level 1c: per (model, type) and micro-batch size, what a single-GPU
    /// profile at that size says beyond the fitted level (and host overhead):
    /// GEMM algorithms, memory effects and input pipelines change with the
    /// size in ways a smooth model does not follow, and a data-parallel run
    /// at the same size per GPU computes the same micro-batches. The
    /// multiplier on compute time that makes the point exact is shrunk in log
    /// space by r²/(r² + s²), s² being the median squared residual over every
    /// single-GPU point (their typical noise): a residual at the noise level
    /// moves the prediction half way, a large one nearly all the way, a small
    /// one hardly.
    fn fit_batch_sizes(&mut self, base: &Estimator, singles: &[(ResolvedPoint, f64)]) {
        let mut res: Vec<((String, String), u32, f64)> = Vec::new();
        for (p, _) in singles {
            let key = model_type_key(&p.job.model.name, &p.gpu);
            let Some((compute, rest)) = p.split(base) else { continue };
            let f = self.factor_for(&p.job.model.name, p.job.model.family, p.job.model.precision, &p.gpu);
            let x = self.overhead(&p.job.model.name, &p.gpu);
            let work = compute / f;
            let m = (p.rec.iter_time_s - rest - x) / work;
            if let (true, Some(mbs)) = (work > 0.0 && m > 0.0, micro_batch_size(p.rec.batch, &p.plan)) {
                res.push((key, mbs, m.clamp(BATCH_SCALE_RANGE.0, BATCH_SCALE_RANGE.1).ln()));
            }
        }
        if res.is_empty() {
            return;
        }
        let s2 = median(&res.iter().map(|r| r.2 * r.2).collect::<Vec<_>>());
        for (key, mbs, r) in res {
            let w = if r * r + s2 > 0.0 { r * r / (r * r + s2) } else { 0.0 };
            let v = self.per_batch.entry(key.clone()).or_default();
            if batch_scale_at(v, mbs).is_none() {
                v.push((mbs, (w * r).exp()));
                self.report.per_batch.push(FittedBatch { model: key.0, gpu_type: key.1, micro_batch: mbs, scale: (w * r).exp(), raw_scale: r.exp() });
            }
        }
    }

    fn fit_compute(&mut self, singles: &[(ResolvedPoint, f64)], per_model: bool) {
        let mut by_type: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut by_model_type: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        let mut by_family_type: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for (p, l) in singles {
            by_type.entry(p.gpu.clone()).or_default().push(*l);
            by_model_type.entry(model_type_key(&p.job.model.name, &p.gpu)).or_default().push(*l);
            by_family_type.entry((family_key(p.job.model.family), p.gpu.clone())).or_default().push(*l);
        }
        self.per_type = by_type.iter().map(|(k, v)| (k.clone(), (median(v), v.len()))).collect();
        let mut resid: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (p, l) in singles {
            resid.entry(family_key(p.job.model.family)).or_default().push(l - self.per_type[&p.gpu].0);
        }
        self.per_family = resid.iter().map(|(k, v)| (k.clone(), (median(v), v.len()))).collect();
        let (types, families) = type_family_levels(singles.iter().map(|(p, l)| (p.gpu.clone(), family_key(p.job.model.family), *l)));
        self.per_type_additive = types.into_iter().map(|(k, v)| (k, v.0)).collect();
        self.per_family_additive = families.into_iter().map(|(k, v)| (k, v.0)).collect();
        self.per_family_types.clear();
        for (fam, gpu) in by_family_type.keys() {
            self.per_family_types.entry(fam.clone()).or_default().push(gpu.clone());
        }
        // Type levels net of the families measured on them: comparable
        // across types whatever their model mix (the level a transfer carries).
        let mut net: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (p, l) in singles {
            net.entry(p.gpu.clone()).or_default().push(l - self.per_family[&family_key(p.job.model.family)].0);
        }
        self.per_type_net = net.iter().map(|(k, v)| (k.clone(), median(v))).collect();
        let mut net_prec: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for (p, l) in singles {
            net_prec.entry((p.gpu.clone(), precision_key(p.job.model.precision))).or_default().push(l - self.per_family[&family_key(p.job.model.family)].0);
        }
        self.per_type_prec_net = net_prec.iter().map(|(k, v)| (k.clone(), median(v))).collect();
        self.per_family_type = by_family_type.iter().map(|(k, v)| (k.clone(), (median(v), v.len()))).collect();
        if per_model {
            self.per_model_type = by_model_type.iter().map(|(k, v)| (k.clone(), (median(v), v.len()))).collect();
        }
        self.report.per_type = by_type.iter().map(|(k, v)| FittedFactor { gpu_type: k.clone(), model: None, factor: median(v).exp(), points: v.len() }).collect();
        self.report.per_family =
            self.per_family.iter().map(|(k, v)| FittedFactor { gpu_type: String::new(), model: Some(k.clone()), factor: v.0.exp(), points: v.1 }).collect();
        self.report.per_model_type = self
            .per_model_type
            .iter()
            .map(|((m, g), v)| FittedFactor { gpu_type: g.clone(), model: Some(m.clone()), factor: v.0.exp(), points: v.1 })
            .collect();
    }

    /// Framework constants per runtime (≥ [`MIN_RUNTIME_POINTS`] points) and globally.
    fn fit_framework(&mut self, base: &Estimator, multis: &[ResolvedPoint]) {
        if multis.is_empty() {
            return;
        }
        let all: Vec<&ResolvedPoint> = multis.iter().collect();
        let (global, err) = self.fit_constants(base, &all);
        self.framework_global = Some(global);
        self.report.framework.push(FittedFramework { runtime: None, gpu_type: None, constants: global, points: all.len(), median_log_error: err });
        let mut by_rt: BTreeMap<String, (Runtime, Vec<&ResolvedPoint>)> = BTreeMap::new();
        for p in multis {
            by_rt.entry(runtime_key(p.job.model.runtime)).or_insert_with(|| (p.job.model.runtime, Vec::new())).1.push(p);
        }
        for (key, (rt, pts)) in by_rt {
            if pts.len() >= MIN_RUNTIME_POINTS && pts.len() < all.len() {
                let (fw, err) = self.fit_constants(base, &pts);
                self.framework_by_runtime.insert(key.clone(), fw);
                self.report.framework.push(FittedFramework { runtime: Some(rt), gpu_type: None, constants: fw, points: pts.len(), median_log_error: err });
            } else if pts.len() == all.len() {
                self.framework_by_runtime.insert(key.clone(), global);
            }
            let mut by_type: BTreeMap<String, Vec<&ResolvedPoint>> = BTreeMap::new();
            for p in &pts {
                by_type.entry(p.gpu.clone()).or_default().push(p);
            }
            if by_type.len() > 1 {
                for (gpu, tp) in by_type {
                    if tp.len() >= MIN_RUNTIME_POINTS {
                        let (fw, err) = self.fit_constants(base, &tp);
                        self.framework_by_runtime_type.insert((key.clone(), gpu.clone()), fw);
                        self.report.framework.push(FittedFramework { runtime: Some(rt), gpu_type: Some(gpu), constants: fw, points: tp.len(), median_log_error: err });
                    }
                }
            }
        }
    }

    /// Coordinate search in log space over the intra-node communication scale
    /// and the network scale (when some points span nodes), in steps of
    /// 2^(1/8) from 1/4 to 16, and the per-micro-batch cost; returns the
    /// constants and their median |log error|.
    fn fit_constants(&self, base: &Estimator, pts: &[&ResolvedPoint]) -> (Framework, f64) {
        // Bounded work (the plugins fit at configuration load): an even
        // subsample of at most MAX_FIT_POINTS points.
        let stride = pts.len().div_ceil(MAX_FIT_POINTS).max(1);
        let sampled: Vec<&ResolvedPoint> = pts.iter().step_by(stride).copied().collect();
        let pts = &sampled[..];
        // Compute factors do not depend on the constants searched.
        let factors: Vec<f64> = pts.iter().map(|p| self.factor_for(&p.job.model.name, p.job.model.family, p.job.model.precision, &p.gpu)).collect();
        let loss = |fw: &Framework| -> f64 {
            let errs: Vec<f64> = pts
                .iter()
                .zip(&factors)
                .filter_map(|(p, &f)| {
                    p.predict(base, f, &self.with_overhead(&p.job.model.name, &p.gpu, self.with_links(&p.gpu, *fw))).map(|t| (t / p.rec.iter_time_s).ln().abs())
                })
                .collect();
            if errs.is_empty() { f64::INFINITY } else { median(&errs) + 0.1 * errs.iter().sum::<f64>() / errs.len() as f64 }
        };
        let mut best = Framework::default();
        let mut best_loss = loss(&best);
        for _round in 0..2 {
            for k in -16..=32 {
                let cand = Framework { comm_scale: 2f64.powf(k as f64 / 8.0), ..best };
                let l = loss(&cand);
                if l < best_loss {
                    (best, best_loss) = (cand, l);
                }
            }
            if pts.iter().any(|p| p.rec.nodes > 1) {
                for k in -16..=32 {
                    let cand = Framework { net_scale: 2f64.powf(k as f64 / 8.0), ..best };
                    let l = loss(&cand);
                    if l < best_loss {
                        (best, best_loss) = (cand, l);
                    }
                }
            }
            for ms in [0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0] {
                let cand = Framework { per_microbatch_s: ms * 1e-3, ..best };
                let l = loss(&cand);
                if l < best_loss {
                    (best, best_loss) = (cand, l);
                }
            }
        }
        let errs: Vec<f64> = pts
            .iter()
            .zip(&factors)
            .filter_map(|(p, &f)| {
                let fw = self.with_overhead(&p.job.model.name, &p.gpu, self.with_links(&p.gpu, best));
                p.predict(base, f, &fw).map(|t| (t / p.rec.iter_time_s).ln().abs())
            })
            .collect();
        (best, median(&errs))
    }
}

/// A measured point resolved against the catalogs: job, Cell and plan.
struct ResolvedPoint {
    rec: ProfileRecord,
    job: JobSpec,
    gpu: String,
    cell: Cell,
    plan: Plan,
    datasheet_s: f64,
    /// The (model, type)'s compute multipliers by micro-batch size, once fitted.
    batch_scale: Vec<(u32, f64)>,
    /// What every prediction of the point shares, made on first use
    /// ([`ResolvedPoint::prepared`]), or why the Cell has no setup.
    prepared: std::cell::OnceCell<Result<Prepared, CoreError>>,
}

/// The parts of a point's cell context that no fitted constant changes:
/// the fits predict each point many times over (one per candidate).
struct Prepared {
    gpu: GpuSpec,
    placement: Placement,
    cost: ModelCost,
    conv: Option<ConvNet>,
    autotune_workspace: f64,
}

fn resolve(base: &Estimator, rec: &ProfileRecord) -> Result<ResolvedPoint, CoreError> {
    let mut model = base.model_catalog().get(&rec.model)?.clone();
    model.name = base.model_catalog().canonical_name(&rec.model).unwrap_or(&rec.model).to_string();
    let gpu = base.gpu_catalog().get(&rec.gpu_type)?.name.clone();
    let job = JobSpec { model, global_batch: rec.batch };
    let stages = rec.plan.map_or(1, |p| p.pp);
    let cell = Cell::new(&gpu, rec.gpus(), stages)?;
    let plan: Plan = match rec.plan {
        Some(p) => p,
        None => unknown_plan(base, &job, &cell, rec.gpus_per_node)?,
    };
    let datasheet_s = base.evaluate_plan(&job, &cell, rec.gpus_per_node, &plan)?.iter_time_s;
    Ok(ResolvedPoint { rec: rec.clone(), job, gpu, cell, plan, datasheet_s, batch_scale: Vec::new(), prepared: std::cell::OnceCell::new() })
}

/// The plan an unknown-plan record is costed with: the estimator's best plan
/// for the job as described, except that activation recomputation is never
/// assumed (a model described as `recompute = "full"` keeps it: that is what
/// its owner said). Errs when no plan without recomputation fits, rather than
/// guess one with it.
fn unknown_plan(base: &Estimator, job: &JobSpec, cell: &Cell, per_node: u32) -> Result<Plan, CoreError> {
    let mut job = job.clone();
    if job.model.recompute == Recompute::Auto {
        job.model.recompute = Recompute::Off;
    }
    base.estimate(&job, cell, per_node).map(|e| e.plan).map_err(|e| CoreError::invalid("plan", UNKNOWN_PLAN, format!("the record has no plan and none without recomputation is predicted to fit ({e})")))
}

impl ResolvedPoint {
    /// (nodes, GPUs per node) the point's GPUs sit on.
    fn layout(&self) -> (u32, u32) {
        Placement::pack(self.rec.gpus(), self.rec.gpus_per_node.max(1)).map_or((self.rec.nodes.max(1), self.rec.gpus_per_node.max(1)), |p| (p.nodes, p.per_node))
    }

    /// The point's [`Prepared`] context parts against `base` (the same
    /// uncalibrated estimator for the point's whole life).
    fn prepared(&self, base: &Estimator) -> Result<&Prepared, CoreError> {
        self.prepared
            .get_or_init(|| {
                let (gpu, placement) = base.setup(&self.job, &self.cell, self.rec.gpus_per_node)?;
                let cost = self.job.model.cost();
                let cx = base.cell_context(&self.job, gpu, &cost, placement);
                let (conv, autotune_workspace) = (cx.conv, cx.autotune_workspace);
                Ok(Prepared { gpu: gpu.clone(), placement, cost, conv, autotune_workspace })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The cell context with a compute factor and framework constants.
    fn context<'a>(&'a self, p: &'a Prepared, factor: f64, fw: &Framework) -> CellContext<'a> {
        CellContext {
            gpu: &p.gpu,
            cost: &p.cost,
            global_batch: self.job.global_batch,
            placement: p.placement,
            efficiency_factor: factor,
            batch_scale: &self.batch_scale,
            framework: *fw,
            conv: p.conv,
            autotune_workspace: p.autotune_workspace,
        }
    }

    /// Predicted time with a compute factor and framework constants.
    fn predict(&self, base: &Estimator, factor: f64, fw: &Framework) -> Option<f64> {
        let p = self.prepared(base).ok()?;
        evaluate(&self.context(p, factor, fw), &self.plan).map(|e| e.iter_time_s)
    }

    /// (prediction at factor `f0`, the compute factor that makes it match the measurement).
    fn implied_factor(&self, base: &Estimator, f0: f64, fw: &Framework) -> Result<(f64, f64), CoreError> {
        let cx = self.context(self.prepared(base)?, f0, fw);
        let ev = evaluate(&cx, &self.plan).ok_or_else(|| CoreError::invalid("plan", self.plan.to_string(), "a plan that divides the batch"))?;
        let compute = ev.time.compute_s - ev.time.launch_bound_s + ev.time.bubble_s;
        let rest = ev.iter_time_s - compute;
        let left = (self.rec.iter_time_s - rest).max(0.1 * self.rec.iter_time_s);
        Ok((ev.iter_time_s, (f0 * compute / left).clamp(FACTOR_RANGE.0, FACTOR_RANGE.1)))
    }

    /// The datasheet model's (compute, everything else) seconds for this point.
    fn split(&self, base: &Estimator) -> Option<(f64, f64)> {
        let p = self.prepared(base).ok()?;
        let mut cx = self.context(p, 1.0, &Framework::default());
        // The datasheet model: no fitted batch-size multipliers either.
        cx.batch_scale = &[];
        let ev = evaluate(&cx, &self.plan)?;
        let compute = ev.time.compute_s - ev.time.launch_bound_s + ev.time.bubble_s;
        Some((compute, ev.iter_time_s - compute))
    }

    /// Flags a single-GPU profile whose implied model-FLOPs efficiency is implausible.
    fn sanity(&self, base: &Estimator) -> Option<FlaggedProfile> {
        let gpu = base.gpu_catalog().get(&self.gpu).ok()?;
        let cost = self.job.model.cost();
        let passes = if self.plan.checkpointing { 4.0 } else { 3.0 };
        let flops = cost.fwd_flops_per_sample * passes * self.rec.batch as f64;
        let eff = flops / (self.rec.iter_time_s * gpu.peak_for(cost.precision));
        let (lo, hi) = PLAUSIBLE_EFFICIENCY;
        (eff < lo || eff > hi).then(|| FlaggedProfile {
            record: self.rec.clone(),
            implied_efficiency: eff,
            message: format!(
                "implied efficiency {:.0}% of the {:?} peak is outside {:.0}-{:.0}%: check the model description (precision, recomputation, sequence length, vocabulary, FFN width, MoE layout)",
                eff * 100.0,
                cost.precision,
                lo * 100.0,
                hi * 100.0
            )
            .to_lowercase(),
        })
    }
}

/// Log levels with their point counts, by type or by family.
type LevelsByKey = BTreeMap<String, (f64, usize)>;

/// Rounds of [`type_family_levels`]' alternating medians.
const POLISH_ROUNDS: usize = 20;

/// Type levels and family residuals of log compute levels `(type, family,
/// log level)` fitted together, additive in log space (Tukey's median
/// polish: alternating medians of the residuals over types and over
/// families, from the raw type medians). A type's level is then net of the
/// families measured on it, so a family never measured on that type takes
/// the type's own level plus its residual, not the residual of the families
/// that happened to be measured there: with a type measured on BERT-like
/// models only, its raw median is the BERT-like level, which a GPT would
/// otherwise inherit. Returns (per type, per family): (log level, points).
fn type_family_levels(points: impl Iterator<Item = (String, String, f64)>) -> (LevelsByKey, LevelsByKey) {
    let pts: Vec<(String, String, f64)> = points.collect();
    let mut types: BTreeMap<String, (f64, usize)>;
    let mut fams: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let group = |key: &dyn Fn(&(String, String, f64)) -> String, val: &dyn Fn(&(String, String, f64)) -> f64| {
        let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for p in &pts {
            by.entry(key(p)).or_default().push(val(p));
        }
        by.into_iter().map(|(k, v)| (k, (median(&v), v.len()))).collect::<BTreeMap<String, (f64, usize)>>()
    };
    types = group(&|p| p.0.clone(), &|p| p.2);
    for round in 0..POLISH_ROUNDS {
        fams = group(&|p| p.1.clone(), &|p| p.2 - types[&p.0].0);
        if round + 1 == POLISH_ROUNDS {
            break;
        }
        let next = group(&|p| p.0.clone(), &|p| p.2 - fams[&p.1].0);
        let moved = next.iter().map(|(k, v)| (v.0 - types[k].0).abs()).fold(0.0, f64::max);
        types = next;
        if moved < 1e-9 {
            fams = group(&|p| p.1.clone(), &|p| p.2 - types[&p.0].0);
            break;
        }
    }
    (types, fams)
}

/// Median (mean of the middle two for even lengths); 0 for empty input.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { 0.5 * (s[n / 2 - 1] + s[n / 2]) }
}

/// The `q` quantile (0..=1) by linear interpolation; 0 for empty input.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// Spearman rank correlation of paired samples (average ranks for ties);
/// `None` with fewer than 2 pairs or a constant side.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;

    #[test]
    fn stats_helpers() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.9) - 4.6).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    /// Single-GPU points at several batch sizes generated with a 50 ms
    /// per-iteration overhead give it back beside the compute level; the
    /// overhead then stays in a data-parallel Cell's prediction.
    #[test]
    fn host_overhead_is_fitted_from_batch_sizes() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let mut truth = Calibration::default().with_type_factor("v100", 0.6);
        truth.framework_global = Some(Framework { per_iter_s: Framework::default().per_iter_s + 0.05, ..Framework::default() });
        let slow = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(truth.clone());
        let m = ModelCatalog::builtin().resolve("gpt__125M").unwrap();
        let plan = |_: u32| Plan { dp: 1, tp: 1, pp: 1, micro_batches: 1, zero_stage: 0, checkpointing: true };
        let recs: Vec<ProfileRecord> = [2u32, 4, 8, 16]
            .iter()
            .map(|&b| {
                let job = JobSpec { model: m.clone(), global_batch: b };
                rec("gpt__125M", b, 1, 1, slow.estimate_plan(&job, &Cell::new("v100", 1, 1).unwrap(), 8, &plan(b)).unwrap().iter_time_s, plan(b))
            })
            .collect();
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        assert!((cal.overhead("gpt__125M", "v100") - 0.05).abs() < 0.005, "{}", cal.report);
        assert!((cal.factor_for("gpt__125M", ModelFamily::Gpt, Precision::Fp16, "v100") - 0.6).abs() < 0.05, "{}", cal.report);
        assert!(cal.report.to_string().contains("50.0 ms per iteration"), "{}", cal.report);
        assert_eq!(cal.overhead("gpt__350M", "v100"), 0.0);
        // One batch size: no overhead.
        assert_eq!(Calibration::fit(&base, &recs[..1], &CalibrationPolicy::default()).overhead("gpt__125M", "v100"), 0.0);
    }

    /// A variant (`<model>+offload`) shares its network's (model, type) level.
    #[test]
    fn variants_share_their_networks_compute_level() {
        assert_eq!((network_key("bert_large+rubick+offload"), network_key("bert_large")), ("bert_large", "bert_large"));
        let mut cal = Calibration::default().with_type_factor("a800", 1.0);
        cal.per_model_type.insert(model_type_key("bert_large+offload", "a800"), (0.5f64.ln(), 4));
        let (a, b) = (cal.factor_for("bert_large", ModelFamily::Bert, Precision::Fp16, "a800"), cal.factor_for("bert_large+offload", ModelFamily::Bert, Precision::Fp16, "a800"));
        assert!(a < 0.6 && (a - b).abs() < 1e-12, "{a} {b}");
        assert!(cal.has_factor("bert_large+x", "h100") == cal.has_factor("bert_large", "h100"));
    }

    fn rec(model: &str, batch: u32, gpus: u32, nodes: u32, t: f64, plan: Plan) -> ProfileRecord {
        ProfileRecord { model: model.into(), batch, gpu_type: "v100".into(), nodes, gpus_per_node: gpus / nodes, iter_time_s: t, plan: Some(plan), peak_mem_gib: None, first_iter_s: None }
    }

    /// Points generated by a "true" estimator whose compute efficiency is 0.6×
    /// the datasheet's and whose communication is 3× slower are recovered: the
    /// compute level from single-GPU points, the communication scale from
    /// multi-GPU points of other models; an unmeasured Cell then gets the
    /// slower, calibrated prediction.
    #[test]
    fn recovers_compute_level_and_framework_constants() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let mut truth = Calibration::default().with_type_factor("v100", 0.6);
        let true_fw = Framework { comm_scale: 2f64.powf(6.0 / 4.0), ..Framework::default() };
        truth.framework_global = Some(true_fw);
        let slow = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(truth);
        let mut recs = Vec::new();
        for model in ["gpt__350M", "bert__350M", "gpt__125M"] {
            let m = ModelCatalog::builtin().resolve(model).unwrap();
            for (batch, gpus, nodes) in [(8, 1, 1), (16, 1, 1), (32, 4, 1), (32, 8, 1), (64, 16, 2)] {
                let job = JobSpec { model: m.clone(), global_batch: batch };
                let plan = Plan { dp: gpus, tp: 1, pp: 1, micro_batches: batch / gpus / 4, zero_stage: 0, checkpointing: true };
                let e = slow.estimate_plan(&job, &Cell::new("v100", gpus, 1).unwrap(), 8, &plan).unwrap();
                recs.push(rec(model, batch, gpus, nodes, e.iter_time_s, plan));
            }
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        let f = cal.factor_for("gpt__350M", ModelFamily::Gpt, Precision::Fp16, "v100");
        assert!((f - 0.6).abs() < 0.03, "{f}");
        let fw = cal.framework(Runtime::Alpa);
        assert!((fw.comm_scale / true_fw.comm_scale - 1.0).abs() < 0.2, "{fw:?}");
        assert!(cal.report.framework.iter().any(|w| w.runtime.is_none() && w.points == 9));
        assert_eq!(cal.factor("gpt__350M", "a100"), 1.0);
        assert!(cal.report.to_string().contains("framework"));
        // Single-GPU points only: no framework fit, defaults stay.
        let cal1 = Calibration::fit(&base, &recs, &CalibrationPolicy { max_gpus: Some(1), ..Default::default() });
        assert_eq!(cal1.framework(Runtime::Alpa), Framework::default());
        let unknown = ProfileRecord { model: "no_such_model".into(), ..recs[0].clone() };
        let cal2 = Calibration::fit(&base, [&unknown], &CalibrationPolicy::default());
        assert!(cal2.report.per_type.is_empty() && cal2.report.skipped[0].1.contains("no_such_model"));
    }

    /// Type and family levels fitted together: type "a" measured on family
    /// "bert" only (x2 of the datasheet), type "b" on both families, where
    /// "bert" runs at x2 of "gpt". The raw median of "a" is the BERT-like
    /// level; the additive fit nets it out, so a "gpt" on "a" is x1.
    #[test]
    fn type_levels_are_net_of_the_families_measured_on_them() {
        let l2 = 2f64.ln();
        let pts = vec![
            ("a".to_string(), "bert".to_string(), l2),
            ("a".into(), "bert".into(), l2),
            ("b".into(), "bert".into(), l2 + 0.1),
            ("b".into(), "bert".into(), l2 + 0.1),
            ("b".into(), "gpt".into(), 0.1),
            ("b".into(), "gpt".into(), 0.1),
            ("b".into(), "gpt".into(), 0.1),
        ];
        let (types, fams) = type_family_levels(pts.into_iter());
        let gpt_on_a = types["a"].0 + fams["gpt"].0;
        let bert_on_a = types["a"].0 + fams["bert"].0;
        assert!(gpt_on_a.abs() < 1e-4, "{types:?} {fams:?}");
        assert!((bert_on_a - l2).abs() < 1e-4);
        assert_eq!((types["b"].1, fams["gpt"].1), (5, 3));
    }

    /// A type with no point of its own takes the level measured on the types
    /// of its architecture generation (H200 from H100), says so, and a type
    /// of another generation stays on the datasheet.
    #[test]
    fn unmeasured_types_take_their_generations_level() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let truth = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(Calibration::default().with_type_factor("h100", 0.6));
        let mut recs = Vec::new();
        for (model, batch) in [("gpt__350M", 8), ("gpt__760M", 8), ("gpt__125M", 16)] {
            let job = JobSpec { model: base.model_catalog().get(model).unwrap().clone(), global_batch: batch };
            let plan = Plan { checkpointing: true, ..Plan::default() };
            let t = truth.estimate_plan(&job, &Cell::new("h100", 1, 1).unwrap(), 8, &plan).unwrap().iter_time_s;
            recs.push(ProfileRecord { gpu_type: "h100".into(), ..rec(model, batch, 1, 1, t, plan) });
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        let f = cal.factor_for("gpt__1.3B", ModelFamily::Gpt, Precision::Fp16, "h200");
        assert!((f - 0.6).abs() < 0.03, "{f}\n{}", cal.report);
        let src = |m: &str, t: &str| cal.factor_source(m, ModelFamily::Gpt, Precision::Fp16, t);
        assert_eq!(src("gpt__1.3B", "h200").gpu_type, TypeLevel::Transferred { from: vec!["h100".into()], mechanism: Mechanism::Generation });
        assert!(src("gpt__1.3B", "h200").to_string().contains("from h100, same architecture generation"), "{}", src("gpt__1.3B", "h200"));
        assert_eq!(cal.factor_for("gpt__1.3B", ModelFamily::Gpt, Precision::Fp16, "a100"), 1.0);
        assert_eq!(src("gpt__1.3B", "a100").gpu_type, TypeLevel::Datasheet);
        assert!(src("gpt__350M", "h100").model_measured && src("gpt__350M", "h100").gpu_type == TypeLevel::Measured);
        assert!(!src("gpt__1.3B", "h100").model_measured && src("gpt__1.3B", "h100").family_on_type);
        assert_eq!(src("gpt__1.3B", "a100").family_from, vec!["h100".to_string()]);
        assert!(cal.report.to_string().contains("h200       efficiency x0.6"), "{}", cal.report);
    }

    /// A model that runs slower than the rest of its family on an H100 keeps
    /// that residual on an unmeasured H200 (same architecture generation),
    /// not on an A100 (another generation); the explanation names where
    /// the model's level came from.
    #[test]
    fn a_models_residual_carries_within_its_generation_only() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let mut recs = Vec::new();
        for (model, batch, level) in [("gpt__125M", 16, 0.6), ("gpt__760M", 8, 0.6), ("gpt__350M", 8, 0.4)] {
            let truth = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(Calibration::default().with_type_factor("h100", level));
            let job = JobSpec { model: base.model_catalog().get(model).unwrap().clone(), global_batch: batch };
            let plan = Plan::default();
            let t = truth.estimate_plan(&job, &Cell::new("h100", 1, 1).unwrap(), 8, &plan).unwrap().iter_time_s;
            recs.push(ProfileRecord { gpu_type: "h100".into(), ..rec(model, batch, 1, 1, t, plan) });
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        let f = |m: &str, t: &str| cal.factor_for(m, ModelFamily::Gpt, Precision::Fp16, t);
        // On the H100 the slow model's own level sits below its family's.
        let measured = f("gpt__350M", "h100") / f("gpt__1.3B", "h100");
        assert!(measured < 0.9, "{measured}\n{}", cal.report);
        // The same ratio on the H200, none on the A100.
        let carried = f("gpt__350M", "h200") / f("gpt__1.3B", "h200");
        assert!((carried - measured).abs() < 1e-9, "{carried} vs {measured}");
        assert_eq!(f("gpt__350M", "a100"), f("gpt__1.3B", "a100"));
        let src = |m: &str, t: &str| cal.factor_source(m, ModelFamily::Gpt, Precision::Fp16, t);
        assert_eq!(src("gpt__350M", "h200").model_from, vec!["h100".to_string()]);
        assert!(!src("gpt__350M", "h200").model_measured);
        assert!(src("gpt__350M", "h200").to_string().contains("its residual over its family measured on h100 (same architecture generation)"), "{}", src("gpt__350M", "h200"));
        assert!(src("gpt__350M", "h100").model_from.is_empty() && src("gpt__350M", "a100").model_from.is_empty());
        assert!(src("gpt__1.3B", "h200").model_from.is_empty());
    }

    /// Profiles of two generic models running at half the modelled speed on
    /// a V100 and two GPT models at the modelled speed: an unprofiled GPT
    /// takes its family's level, an unprofiled generic model the type's
    /// alone (generic models share no kernels), a profiled one its own.
    #[test]
    fn an_unprofiled_generic_model_takes_the_type_level_not_other_generic_models() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let mut recs = Vec::new();
        for (model, batch, level) in [("lm", 20, 0.5), ("recommendation", 512, 0.5), ("gpt__125M", 4, 1.0), ("gpt__350M", 2, 1.0)] {
            let truth = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(Calibration::default().with_type_factor("v100", level));
            let job = JobSpec { model: base.model_catalog().resolve(model).unwrap(), global_batch: batch };
            let plan = Plan::default();
            let t = truth.estimate_plan(&job, &Cell::new("v100", 1, 1).unwrap(), 8, &plan).unwrap().iter_time_s;
            recs.push(ProfileRecord { gpu_type: "v100".into(), ..rec(&job.model.name, batch, 1, 1, t, plan) });
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        let f = |m: &str, fam: ModelFamily| cal.factor_for(m, fam, Precision::Fp32, "v100");
        assert!(f("lstm_wikitext2", ModelFamily::Generic) < 0.6, "a profiled generic model keeps its own level: {}", f("lstm_wikitext2", ModelFamily::Generic));
        let unseen = f("cyclegan", ModelFamily::Generic);
        assert!((unseen - cal.type_level(Precision::Fp32, "v100").0.exp()).abs() < 1e-9, "{unseen}\n{}", cal.report);
        assert!(unseen > 0.6, "not the other generic models' half speed: {unseen}");
        let gpt = f("gpt__760M", ModelFamily::Gpt);
        assert!(gpt > 0.9 && gpt < 1.1, "an unprofiled GPT: its family's level {gpt}");
    }

    /// Three fp32 types: points measured on P100 and V100, whose levels lie
    /// on the roofline line 1/level = 0.2 + 0.05 · FLOP/byte (fp32 peak over
    /// memory bandwidth), with BERT-like models x1.3 over GPT-like ones. An
    /// unmeasured K80 (another generation) takes the line's level at its own
    /// ratio and the family residual on top; half-precision jobs (no
    /// half-precision type measured) stay on the datasheet level; the
    /// explanation names the mechanism and the types.
    #[test]
    fn unmeasured_types_take_the_roofline_level_of_their_precision_with_the_family_residual() {
        let mut models = ModelCatalog::builtin();
        for (name, from) in [("g1", "gpt__125M"), ("g2", "gpt__350M"), ("b1", "bert__125M"), ("b2", "bert__350M")] {
            let mut m = models.get(from).unwrap().clone();
            m.name = name.into();
            m.precision = Precision::Fp32;
            models.insert(m, &[]);
        }
        let gpus = GpuCatalog::builtin();
        let ratio = |t: &str| flop_per_byte(gpus.get(t).unwrap(), Precision::Fp32);
        let level = |t: &str| -(0.2 + 0.05 * ratio(t)).ln();
        let mut truth = Calibration::default().with_type_factor("p100", level("p100").exp()).with_type_factor("v100", level("v100").exp());
        let fam = 0.5 * 1.3f64.ln();
        truth.per_family.insert("bert".into(), (fam, 1));
        truth.per_family.insert("gpt".into(), (-fam, 1));
        let base = Estimator::new(gpus.clone(), models.clone());
        let slow = Estimator::new(gpus.clone(), models.clone()).with_calibration(truth);
        let mut recs = Vec::new();
        for t in ["p100", "v100"] {
            for (m, batch) in [("g1", 4), ("g2", 2), ("b1", 4), ("b2", 2)] {
                let job = JobSpec { model: models.get(m).unwrap().clone(), global_batch: batch };
                let plan = Plan::default();
                let time = slow.evaluate_plan(&job, &Cell::new(t, 1, 1).unwrap(), 8, &plan).unwrap().iter_time_s;
                recs.push(ProfileRecord { gpu_type: t.into(), ..rec(m, batch, 1, 1, time, plan) });
            }
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        for t in ["p100", "v100"] {
            let f = cal.factor_for("g1", ModelFamily::Gpt, Precision::Fp32, t);
            assert!((f.ln() - (level(t) - fam)).abs() < 0.03, "{t} {f}\n{}", cal.report);
        }
        // K80: the line at its ratio (0.2 + 0.05 * 18.2 -> x0.90), and each family's residual.
        let (g, b) = (cal.factor_for("g9", ModelFamily::Gpt, Precision::Fp32, "k80"), cal.factor_for("b9", ModelFamily::Bert, Precision::Fp32, "k80"));
        assert!((g.ln() - (level("k80") - fam)).abs() < 0.03, "{g} vs {}\n{}", (level("k80") - fam).exp(), cal.report);
        assert!((b / g - 1.3).abs() < 0.05, "{b} {g}");
        // Without the roofline (the datasheet level) the K80 would be x1.0 before the family.
        assert!((level("k80").exp() - 1.0).abs() > 0.08);
        // No half-precision type was measured: datasheet level, family residual only.
        let h = cal.factor_for("g9", ModelFamily::Gpt, Precision::Bf16, "k80");
        assert!((h.ln() + fam).abs() < 0.03, "{h}");
        let src = cal.factor_source("g9", ModelFamily::Gpt, Precision::Fp32, "k80");
        assert_eq!(src.gpu_type, TypeLevel::Transferred { from: vec!["p100".into(), "v100".into()], mechanism: Mechanism::Roofline { precision: "fp32".into() } });
        assert_eq!(cal.factor_source("g9", ModelFamily::Gpt, Precision::Bf16, "k80").gpu_type, TypeLevel::Datasheet);
        assert!(cal.report.to_string().contains("k80        efficiency x"), "{}", cal.report);
        // The estimate's explanation says so, factor by factor.
        let est = Estimator::new(gpus.clone(), models.clone()).with_calibration(cal);
        let job = JobSpec { model: models.get("b1").unwrap().clone(), global_batch: 4 };
        let why = est.explain(&job, &Cell::new("k80", 1, 1).unwrap(), 8).unwrap();
        let row = |k: &str| why.sources.iter().find(|s| s.0 == k).map(|s| s.1.clone()).unwrap_or_default();
        assert!(row("compute efficiency: type level").contains("roofline over p100, v100"), "{:?}", why.sources);
        assert!(row("compute efficiency: family").contains("measured on p100, v100 (not on this type)"), "{:?}", why.sources);
        assert!(row("compute efficiency: model").contains("not profiled on this type"), "{:?}", why.sources);
        let why = est.explain(&job, &Cell::new("p100", 1, 1).unwrap(), 8).unwrap();
        assert!(why.sources.iter().any(|s| s.0 == "compute efficiency: model" && s.1.starts_with("measured on this type")), "{:?}", why.sources);
    }

    /// A record without a plan is costed with the best plan that does not
    /// recompute activations, even for a catalog model whose description
    /// leaves recomputation to the search, and the report says so; a model
    /// described as always recomputing keeps it.
    #[test]
    fn unknown_plans_never_assume_recomputation() {
        let mut models = ModelCatalog::builtin();
        let mut auto = models.get("gpt__350M").unwrap().clone();
        auto.name = "my_gpt".into();
        auto.recompute = Recompute::Auto;
        models.insert(auto.clone(), &[]);
        let base = Estimator::new(GpuCatalog::builtin(), models);
        let mut r = rec("my_gpt", 8, 1, 1, 0.3, Plan::default());
        r.plan = None;
        let job = JobSpec { model: auto.clone(), global_batch: 8 };
        let cell = Cell::new("v100", 1, 1).unwrap();
        let p = unknown_plan(&base, &job, &cell, 1).unwrap();
        assert!(!p.checkpointing, "{p}");
        auto.recompute = Recompute::Full;
        let full = JobSpec { model: auto, global_batch: 8 };
        assert!(unknown_plan(&base, &full, &cell, 1).unwrap().checkpointing);
        // A model too big for one GPU without recomputation is refused, not guessed.
        let mut huge = base.model_catalog().get("gpt__6.7B").unwrap().clone();
        huge.recompute = Recompute::Auto;
        let e = unknown_plan(&base, &JobSpec { model: huge, global_batch: 64 }, &cell, 1).unwrap_err().to_string();
        assert!(e.contains("unknown") && e.contains("recomputation"), "{e}");
        let cal = Calibration::fit(&base, [&r], &CalibrationPolicy::default());
        assert_eq!(cal.report.unknown_plan.len(), 1);
        assert!(!cal.report.unknown_plan[0].1.checkpointing);
        assert!(cal.report.to_string().contains("plan unknown"), "{}", cal.report);
    }

    /// Single-GPU points from a "true" estimator at five micro-batch sizes,
    /// one of them (8) measured 2.5x slower than the rest follow: that size
    /// gets a compute multiplier near its raw one, so a data-parallel run at
    /// 8 samples per GPU is predicted slow while one at 4 is not; the other
    /// sizes, on the fitted level, stay near 1. Without the multiplier
    /// (`per_model: false`) nothing is fitted per size.
    #[test]
    fn a_micro_batch_size_measured_off_the_level_gets_its_own_multiplier() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let truth = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(Calibration::default().with_type_factor("v100", 0.6));
        let m = ModelCatalog::builtin().resolve("gpt__125M").unwrap();
        let plan = |dp: u32| Plan { dp, tp: 1, pp: 1, micro_batches: 1, zero_stage: 0, checkpointing: true };
        let time = |batch: u32, gpus: u32| truth.estimate_plan(&JobSpec { model: m.clone(), global_batch: batch }, &Cell::new("v100", gpus, 1).unwrap(), 8, &plan(gpus)).unwrap().iter_time_s;
        let mut recs = Vec::new();
        for mbs in [1, 2, 4, 8, 16] {
            let slow = if mbs == 8 { 2.5 } else { 1.0 };
            recs.push(rec("gpt__125M", mbs, 1, 1, time(mbs, 1) * slow, plan(1)));
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
        let scale: BTreeMap<u32, f64> = cal.batch_scale("gpt__125M", "v100").iter().copied().collect();
        assert!(scale[&8] > 1.8, "{scale:?}");
        for mbs in [1, 2, 4, 16] {
            assert!((scale[&mbs].ln()).abs() < 0.5 * scale[&8].ln(), "{scale:?}");
        }
        assert!(cal.report.per_batch.iter().any(|b| b.micro_batch == 8 && b.raw_scale >= b.scale && b.scale > 1.8), "{:?}", cal.report.per_batch);
        assert!(cal.report.to_string().contains("micro-batch    8"));
        let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(cal);
        let predict = |batch: u32, gpus: u32| est.estimate_plan(&JobSpec { model: m.clone(), global_batch: batch }, &Cell::new("v100", gpus, 1).unwrap(), 8, &plan(gpus)).unwrap().iter_time_s;
        assert!(predict(32, 4) > 1.6 * time(32, 4), "{} vs {}", predict(32, 4), time(32, 4));
        assert!((predict(16, 4) / time(16, 4) - 1.0).abs() < 0.35, "{} vs {}", predict(16, 4), time(16, 4));
        let off = Calibration::fit(&base, &recs, &CalibrationPolicy { per_model: false, ..Default::default() });
        assert!(off.batch_scale("gpt__125M", "v100").is_empty() && off.report.per_batch.is_empty());
    }

    /// Points generated with communication 3x slower on one layout (one
    /// node of 4 V100s) than on the type's others: the layout gets its own
    /// multiplier from other models' points there, which moves a new
    /// model's prediction on that layout toward the truth; layouts measured
    /// as modelled stay near 1, an unseen layout keeps the type's constants,
    /// and a layout measured by one point is shrunk most of the way to 1.
    #[test]
    fn layout_multiplier_is_fitted_per_layout_and_shrunk() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let mut truth = Calibration::default().with_type_factor("v100", 0.6);
        truth.framework_global = Some(Framework::default());
        truth.per_layout.entry("v100".into()).or_default().insert((1, 4), 3.0);
        let slow = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(truth);
        let point = |model: &str, per_gpu: u32, gpus: u32, nodes: u32| {
            let job = JobSpec { model: ModelCatalog::builtin().resolve(model).unwrap(), global_batch: per_gpu * gpus };
            let plan = Plan { dp: gpus, tp: 1, pp: 1, micro_batches: 1, zero_stage: 0, checkpointing: true };
            let t = slow.evaluate_plan(&job, &Cell::new("v100", gpus, 1).unwrap(), gpus / nodes, &plan).unwrap().iter_time_s;
            rec(model, per_gpu * gpus, gpus, nodes, t, plan)
        };
        let mut recs = Vec::new();
        for model in ["gpt__125M", "bert__350M", "gpt__350M"] {
            for per_gpu in [1, 2, 4, 8] {
                for (gpus, nodes) in [(1, 1), (2, 1), (4, 1), (2, 2)] {
                    recs.push(point(model, per_gpu, gpus, nodes));
                }
            }
        }
        let cal = Calibration::fit(&base, &recs, &CalibrationPolicy { per_job: false, ..Default::default() });
        let four = cal.report.per_layout.iter().find(|l| (l.nodes, l.gpus_per_node) == (1, 4)).expect("layout 1 x 4");
        assert!((four.raw_scale / 3.0 - 1.0).abs() < 0.15 && four.points == 12 && four.models == 3, "{}", cal.report);
        assert!(four.log_error_after < 0.5 * four.log_error_before, "{four:?}");
        let shrunk = 3f64.ln() * 12.0 / (12.0 + LAYOUT_PRIOR_POINTS);
        assert!((cal.layout_scale("v100", 1, 4).ln() - four.raw_scale.ln() * shrunk / 3f64.ln()).abs() < 1e-9);
        for (nodes, per_node) in [(1, 2), (2, 1)] {
            let m = cal.layout_scale("v100", nodes, per_node);
            assert!((m - 1.0).abs() < 0.2, "{nodes} x {per_node}: {m}");
        }
        // Unseen layout and type: the type's constants as they are.
        assert_eq!(cal.layout_scale("v100", 1, 8), 1.0);
        assert_eq!(cal.framework_at(Runtime::Ddp, "v100", 1, 8), cal.framework_on(Runtime::Ddp, "v100"));
        assert_eq!(cal.layout_scale("a100", 1, 4), 1.0);
        assert!(cal.report.to_string().contains("1 node(s) x 4 GPUs"), "{}", cal.report);
        // A new model on the slow layout: closer with the layout level than without.
        let truth_t = point("bert__1.3B", 4, 4, 1);
        let job = JobSpec { model: ModelCatalog::builtin().resolve("bert__1.3B").unwrap(), global_batch: truth_t.batch };
        let cell = Cell::new("v100", 4, 1).unwrap();
        let err = |c: &Calibration| {
            let e = base.clone().with_calibration(c.clone());
            (e.evaluate_plan(&job, &cell, 4, &truth_t.plan.unwrap()).unwrap().iter_time_s / truth_t.iter_time_s).ln().abs()
        };
        let mut flat = cal.clone();
        flat.per_layout.clear();
        assert!(err(&cal) < 0.6 * err(&flat), "with layout {} without {}", err(&cal), err(&flat));
        // One point on the layout: shrunk to a fifth of its log.
        let mut few: Vec<ProfileRecord> = recs.iter().filter(|r| r.gpus() != 4).cloned().collect();
        few.push(point("gpt__350M", 8, 4, 1));
        let cal1 = Calibration::fit(&base, &few, &CalibrationPolicy { per_job: false, ..Default::default() });
        let one = cal1.report.per_layout.iter().find(|l| (l.nodes, l.gpus_per_node) == (1, 4)).unwrap();
        assert_eq!(one.points, 1);
        assert!(one.raw_scale > 2.0 && (one.comm_scale.ln() - one.raw_scale.ln() / (1.0 + LAYOUT_PRIOR_POINTS)).abs() < 1e-9, "{one:?}");
    }

    /// A model whose communication is 4x slower than the hierarchical model
    /// believes (other models are not) gets a per-job communication multiplier
    /// from two or three of its configurations, and its other Cells are then
    /// predicted within a few percent; without the refit they are not, and a
    /// model with one configuration gets none.
    #[test]
    fn per_job_refit_predicts_a_models_other_cells() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let slow_job = |m: f64| {
            let mut truth = Calibration::default();
            truth.framework_global = Some(Framework::default());
            truth.per_job.insert("gpt__350M".into(), (0.8, m));
            Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin()).with_calibration(truth)
        };
        let truth = slow_job(4.0);
        let point_of = |name: &str, gpus: u32, nodes: u32| {
            let job = JobSpec { model: ModelCatalog::builtin().resolve(name).unwrap(), global_batch: 8 * gpus };
            let plan = Plan { dp: gpus, tp: 1, pp: 1, micro_batches: 2, zero_stage: 0, checkpointing: true };
            let t = truth.estimate_plan(&job, &Cell::new("v100", gpus, 1).unwrap(), gpus / nodes, &plan).unwrap().iter_time_s;
            rec(name, 8 * gpus, gpus, nodes, t, plan)
        };
        let m = ModelCatalog::builtin().resolve("gpt__350M").unwrap();
        let point = |gpus: u32, nodes: u32| point_of("gpt__350M", gpus, nodes);
        let history = [point(1, 1), point(2, 1), point(2, 2)];
        // The profile DB also holds other models, whose communication is as modelled:
        // they pin the shared framework constants.
        let mut db: Vec<ProfileRecord> = history.to_vec();
        for other in ["gpt__125M", "bert__350M"] {
            for (gpus, nodes) in [(1, 1), (2, 1), (2, 2), (4, 1), (8, 2)] {
                db.push(point_of(other, gpus, nodes));
            }
        }
        let history = db;
        let cal = Calibration::fit(&base, &history, &CalibrationPolicy::default());
        let refit = cal.report.per_job.iter().find(|j| j.model == "gpt__350M").expect("refit");
        assert_eq!(refit.configs, 3);
        assert!(cal.report.per_job.iter().all(|j| j.model == "gpt__350M" || (j.comm_scale - 1.0).abs() < 0.2), "{:?}", cal.report.per_job);
        assert!(refit.comm_scale > 2.0 && refit.log_error_after < refit.log_error_before, "{refit:?}");
        assert!(cal.report.to_string().contains("per-job"));
        let without = Calibration::fit(&base, &history, &CalibrationPolicy { per_job: false, ..Default::default() });
        assert!(without.report.per_job.is_empty());
        let with_refit = base.clone().with_calibration(cal);
        let no_refit = base.clone().with_calibration(without);
        let mut worst_without: f64 = 0.0;
        for (gpus, nodes) in [(8, 1), (8, 4), (16, 2)] {
            let r = point(gpus, nodes);
            let job = JobSpec { model: m.clone(), global_batch: r.batch };
            let cell = Cell::new("v100", gpus, 1).unwrap();
            let t = |e: &Estimator| e.estimate_plan(&job, &cell, r.gpus_per_node, &r.plan.unwrap()).unwrap().iter_time_s / r.iter_time_s;
            let (with_err, without_err) = ((t(&with_refit) - 1.0).abs(), (t(&no_refit) - 1.0).abs());
            assert!(with_err < 0.05, "x{gpus}/{nodes} nodes: {with_err}");
            assert!(without_err > 2.0 * with_err, "x{gpus}/{nodes} nodes: {without_err} without refit, {with_err} with");
            worst_without = worst_without.max(without_err);
        }
        assert!(worst_without > 0.2, "{worst_without}");
        let one = Calibration::fit(&base, &history[..1], &CalibrationPolicy::default());
        assert!(one.report.per_job.is_empty());
    }

    /// `comm:` rows in the profile DB (as `profile comm` writes them) are
    /// not training points: they set the type's link multipliers, which slow
    /// a multi-node Cell's prediction and leave a single-GPU one alone.
    #[test]
    fn collective_rows_set_measured_links() {
        use crate::estimator::comm::{Collective, CommPoint};
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let mut rows = Vec::new();
        for (nodes, per_node, k) in [(1, 8, 1.5), (2, 8, 4.0)] {
            let mut p = CommPoint { collective: Collective::AllReduce, bytes: 1 << 26, gpu_type: "v100".into(), nodes, gpus_per_node: per_node, time_s: 0.0 };
            // The α–β model's time with the in-node links 1.5x and the network k x slower.
            p.time_s = p.modelled_s(base.gpu_catalog(), crate::estimator::topology::LinkScale { intra: 1.5, net: k }).unwrap();
            rows.push(p.to_record());
        }
        let cal = Calibration::fit(&base, &rows, &CalibrationPolicy::default());
        assert!(cal.report.skipped.is_empty() && cal.report.per_type.is_empty(), "{:?}", cal.report.skipped);
        let l = &cal.report.links[0];
        assert!((l.intra - 1.5).abs() < 1e-6 && (l.net - 4.0).abs() < 1e-6, "{l:?}");
        assert!(cal.report.to_string().contains("links"));
        let fw = cal.framework_on(Runtime::Ddp, "v100");
        assert!((fw.comm_scale - 1.5).abs() < 1e-9 && (fw.net_scale - 4.0).abs() < 1e-9);
        let measured = base.clone().with_calibration(cal);
        let job = JobSpec { model: ModelCatalog::builtin().resolve("gpt__350M").unwrap(), global_batch: 64 };
        let spread = Cell::new("v100", 16, 1).unwrap();
        assert!(measured.estimate(&job, &spread, 8).unwrap().iter_time_s > 1.05 * base.estimate(&job, &spread, 8).unwrap().iter_time_s);
        let one = Cell::new("v100", 1, 1).unwrap();
        assert_eq!(measured.estimate(&job, &one, 8).unwrap().iter_time_s, base.estimate(&job, &one, 8).unwrap().iter_time_s);
        let bad = ProfileRecord { model: "comm:bcast:10".into(), ..rows[0].clone() };
        let cal = Calibration::fit(&base, [&bad], &CalibrationPolicy::default());
        assert!(cal.report.skipped[0].1.contains("bcast"));
    }

    /// A model whose 4-GPU iterations are slower than its 8-GPU ones in one
    /// node is reported, and its points still calibrate; a monotone series is not.
    #[test]
    fn contradicting_series_are_reported_and_kept() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let dp = |g: u32| Plan { dp: g, checkpointing: true, ..Plan::default() };
        let series = |m: &str, times: [f64; 4]| -> Vec<ProfileRecord> { [1, 2, 4, 8].into_iter().zip(times).map(|(g, t)| rec(m, 8 * g, g, 1, t, dp(g))).collect() };
        let mut rows = series("gpt__350M", [0.10, 0.11, 0.30, 0.12]);
        rows.extend(series("bert__350M", [0.10, 0.11, 0.12, 0.13]));
        let cal = Calibration::fit(&base, rows.iter(), &CalibrationPolicy::default());
        let flagged: Vec<u32> = cal.report.contradicting.iter().map(|(r, _)| r.gpus()).collect();
        assert_eq!(flagged, vec![2, 4, 8], "{:?} skipped {:?}", cal.report.contradicting, cal.report.skipped);
        assert!(cal.report.contradicting.iter().all(|(r, m)| r.model == "gpt__350M" && m.contains("faster")));
        assert!(cal.report.to_string().contains("WARNING gpt__350M x4"));
        assert!(cal.report.skipped.is_empty(), "{:?}", cal.report.skipped);
        assert_eq!(cal.report.used.len(), rows.len());
    }

    /// A profile far faster than the model's FLOPs allow is flagged, a plausible one is not.
    #[test]
    fn implausible_profiles_are_flagged() {
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let plan = Plan { dp: 1, tp: 1, pp: 1, micro_batches: 1, zero_stage: 0, checkpointing: true };
        let ok = base.estimate_plan(&JobSpec { model: ModelCatalog::builtin().resolve("gpt__350M").unwrap(), global_batch: 8 }, &Cell::new("v100", 1, 1).unwrap(), 8, &plan).unwrap();
        let good = rec("gpt__350M", 8, 1, 1, ok.iter_time_s, plan);
        let too_fast = rec("gpt__350M", 16, 1, 1, ok.iter_time_s / 10.0, plan);
        let cal = Calibration::fit(&base, [&good, &too_fast], &CalibrationPolicy::default());
        assert_eq!(cal.report.flagged.len(), 1, "{:?}", cal.report.flagged);
        assert_eq!(cal.report.flagged[0].record.batch, 16);
        assert!(cal.report.flagged[0].message.contains("model description"));
    }
}
