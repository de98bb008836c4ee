//! The analytical cost of one plan on one Cell: per-GPU memory (states with
//! ZeRO sharding, activations per micro-batch and in-flight micro-batches)
//! and iteration time (compute, exposed communication, pipeline bubble,
//! optimizer step).
use super::topology::{p2p_s, Group, Placement};
use crate::cell::Plan;
use crate::gpu::GpuSpec;
use crate::model::ModelCost;
use serde::Serialize;

/// Memory reserved per GPU for the CUDA context, allocator slack and workspaces.
pub const RESERVED_BYTES: f64 = 1.5 * (1u64 << 30) as f64;
/// Fraction of device memory a plan may use.
pub const MEMORY_HEADROOM: f64 = 0.92;
/// Work (seconds at peak) per micro-batch at which kernels reach half their best efficiency.
const HALF_EFFICIENCY_S: f64 = 1.0e-3;
/// Kernel-launch and framework overhead per layer per micro-batch (forward + backward).
const LAYER_OVERHEAD_S: f64 = 60e-6;
/// Fixed per-iteration overhead (data loading hand-off, Python step).
const ITER_OVERHEAD_S: f64 = 2e-3;
/// Upper bound on achieved fraction of peak, even after calibration.
const MAX_EFFICIENCY: f64 = 0.9;
/// Share of the DP synchronisation that can never hide behind backward (last
/// bucket, NCCL kernels slowing the overlapped compute).
const MIN_EXPOSED_DP: f64 = 0.4;
/// Fraction of the last micro-batch's backward pass that gradient buckets can
/// overlap (buckets are ready only after their layers' backward finishes).
const BACKWARD_OVERLAP: f64 = 0.3;
/// Memory traffic per locally updated parameter of a mixed-precision step:
/// unscale and overflow check, gradient norm, Adam (p, g, m, v), master →
/// half copy, gradient zeroing — each a pass over memory.
const OPT_BYTES_MIXED: f64 = 80.0;
/// The same for plain fp32 training (no unscale/copy passes).
const OPT_BYTES_FP32: f64 = 40.0;
/// Fraction of peak memory bandwidth element-wise optimizer kernels reach.
const OPT_BW_EFFICIENCY: f64 = 0.8;
/// Parameter tensors per layer (weights, biases, norms) the optimizer visits.
const OPT_TENSORS_PER_LAYER: f64 = 16.0;
/// Launch cost per parameter tensor per step (~6 kernels × 5 µs).
const OPT_LAUNCH_PER_TENSOR_S: f64 = 30e-6;

/// Where the iteration time goes (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct TimeBreakdown {
    /// Forward/backward(/recompute) arithmetic of all micro-batches, bubble excluded.
    pub compute_s: f64,
    /// Pipeline bubble: (pp − 1) micro-batch slots.
    pub bubble_s: f64,
    /// Tensor-parallel all-reduces (not overlapped).
    pub tp_comm_s: f64,
    /// Pipeline point-to-point sends.
    pub pp_comm_s: f64,
    /// Data-parallel gradient sync and ZeRO gathers left exposed after overlap.
    pub dp_comm_s: f64,
    /// Optimizer step (memory-bandwidth bound).
    pub optimizer_s: f64,
    /// Kernel-launch and per-iteration framework overhead.
    pub overhead_s: f64,
}

impl TimeBreakdown {
    /// Sum of all parts.
    pub fn total(&self) -> f64 {
        self.compute_s + self.bubble_s + self.tp_comm_s + self.pp_comm_s + self.dp_comm_s + self.optimizer_s + self.overhead_s
    }
}

/// Memory per GPU (bytes) by kind.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MemoryBreakdown {
    /// Weights, gradients and optimizer states after ZeRO sharding.
    pub states: f64,
    /// Stored activations of in-flight micro-batches.
    pub activations: f64,
    /// Gather buffers, context and workspaces.
    pub other: f64,
}

impl MemoryBreakdown {
    /// Total bytes.
    pub fn total(&self) -> f64 {
        self.states + self.activations + self.other
    }
}

/// A plan with its predicted time and memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlanEval {
    /// The plan.
    pub plan: Plan,
    /// Predicted seconds per iteration.
    pub iter_time_s: f64,
    /// Predicted peak bytes per GPU.
    pub mem_per_gpu_bytes: u64,
    /// Whether it fits in the GPU's memory with headroom.
    pub fits: bool,
    /// Time by component.
    pub time: TimeBreakdown,
    /// Memory by component.
    pub memory: MemoryBreakdown,
}

/// Inputs shared by every plan of one (model, batch, Cell, placement).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellContext<'a> {
    pub gpu: &'a GpuSpec,
    pub cost: &'a ModelCost,
    pub global_batch: u32,
    pub placement: Placement,
    /// Calibrated efficiency multiplier (1 = datasheet).
    pub efficiency_factor: f64,
}

/// Samples per micro-batch, if the plan divides the global batch exactly.
pub(crate) fn micro_batch_size(global_batch: u32, plan: &Plan) -> Option<u32> {
    let per_replica = plan.dp.checked_mul(plan.micro_batches)?;
    (per_replica > 0 && global_batch % per_replica == 0).then(|| global_batch / per_replica)
}

/// Cost of `plan`; `None` if it does not divide the batch or the layers.
pub(crate) fn evaluate(cx: &CellContext<'_>, plan: &Plan) -> Option<PlanEval> {
    let c = cx.cost;
    let g = cx.gpu;
    let mbs = micro_batch_size(cx.global_batch, plan)? as f64;
    if plan.pp > c.pipeline_layers || plan.tp > c.max_tp.max(1) {
        return None;
    }
    let (dp, tp, pp, m) = (plan.dp as f64, plan.tp as f64, plan.pp as f64, plan.micro_batches as f64);
    let ckpt = plan.checkpointing;
    let z = plan.zero_stage;
    let layers_stage = (c.pipeline_layers as f64 / pp).ceil();

    // ---- memory ----
    let p_gpu = c.params / (tp * pp);
    let (wb, gb, ob) = if c.fp32 { (4.0, 4.0, 8.0) } else { (2.0, 2.0, 12.0) };
    let shard = |on: bool| if on { dp } else { 1.0 };
    let states = p_gpu * (wb / shard(z >= 3) + gb / shard(z >= 2) + ob / shard(z >= 1));
    let act_layer = (c.act_fixed_per_sample_layer + c.act_tp_per_sample_layer / tp) * mbs;
    let inflight = if plan.pp > 1 { m.min(pp) } else { 1.0 };
    let activations = if ckpt {
        c.ckpt_per_sample_layer * mbs * layers_stage * inflight + act_layer
    } else {
        act_layer * layers_stage * inflight
    } + c.extra_act_per_sample * mbs / tp;
    let gather = if z >= 3 { 2.0 * c.max_layer_params / tp * wb } else { 0.0 };
    let memory = MemoryBreakdown { states, activations, other: gather + RESERVED_BYTES };
    let fits = memory.total() <= MEMORY_HEADROOM * g.mem_bytes() as f64;

    // ---- compute per micro-batch on one GPU ----
    let peak = g.peak_flops(c.fp32);
    let passes = if ckpt { 4.0 } else { 3.0 };
    let work = c.fwd_flops_per_sample * mbs * passes / (tp * pp);
    let eff = (c.max_efficiency * work / (work + peak * HALF_EFFICIENCY_S) * cx.efficiency_factor).min(MAX_EFFICIENCY);
    let t_compute_mb = work / (peak * eff);

    // ---- communication ----
    let p = cx.placement;
    let tp_group = Group::new(plan.tp, 1, p);
    let dp_group = Group::new(plan.dp, plan.tp, p);
    let act_msg = c.boundary_bytes_per_sample * mbs;
    let tp_collectives = if plan.tp > 1 { layers_stage * if ckpt { 6.0 } else { 4.0 } } else { 0.0 };
    let t_tp_mb = tp_collectives * tp_group.all_reduce_s(act_msg, g);
    let stage_span = plan.tp * plan.dp;
    let pp_cross = plan.pp > 1 && p.nodes > 1 && stage_span >= p.per_node;
    let t_pp_mb = if plan.pp > 1 {
        2.0 * p2p_s(act_msg / tp, pp_cross, g, (p.per_node / stage_span.max(1)).max(1) * plan.tp)
    } else {
        0.0
    };
    let t_over_mb = layers_stage * LAYER_OVERHEAD_S * if ckpt { 1.33 } else { 1.0 };
    let t_mb = t_compute_mb + t_tp_mb + t_pp_mb + t_over_mb;
    let slots = m + pp - 1.0;

    // DP gradient sync (all-reduce, or reduce-scatter + all-gather under ZeRO),
    // ZeRO-2 reduce-scatter per micro-batch, ZeRO-3 parameter gathers per micro-batch.
    let grad_bytes = p_gpu * gb;
    let mut dp_comm = dp_group.all_reduce_s(grad_bytes, g);
    if z >= 2 {
        dp_comm += (m - 1.0) * dp_group.all_gather_s(grad_bytes, g);
    }
    if z >= 3 {
        dp_comm += 2.0 * m * dp_group.all_gather_s(p_gpu * wb, g);
    }
    let window = t_compute_mb * 2.0 / 3.0 * BACKWARD_OVERLAP + if z >= 2 { (m - 1.0) * t_compute_mb } else { 0.0 };
    let dp_exposed = if plan.dp > 1 { (dp_comm - window).max(MIN_EXPOSED_DP * dp_comm) } else { 0.0 };

    // Adam step: memory-bound passes over the locally updated parameters plus
    // per-tensor kernel launches.
    let opt_params = p_gpu / shard(z >= 1);
    let opt_bytes = if c.fp32 { OPT_BYTES_FP32 } else { OPT_BYTES_MIXED };
    let optimizer_s = opt_params * opt_bytes / (g.mem_bw_gbs * 1e9 * OPT_BW_EFFICIENCY)
        + layers_stage * OPT_TENSORS_PER_LAYER * OPT_LAUNCH_PER_TENSOR_S;

    let time = TimeBreakdown {
        compute_s: m * t_compute_mb,
        bubble_s: (pp - 1.0) * t_compute_mb,
        tp_comm_s: slots * t_tp_mb,
        pp_comm_s: slots * t_pp_mb,
        dp_comm_s: dp_exposed,
        optimizer_s,
        overhead_s: slots * t_over_mb + ITER_OVERHEAD_S,
    };
    debug_assert!((slots * t_mb + dp_exposed + optimizer_s + ITER_OVERHEAD_S - time.total()).abs() < 1e-9 * time.total().max(1.0));
    Some(PlanEval {
        plan: *plan,
        iter_time_s: time.total(),
        mem_per_gpu_bytes: memory.total() as u64,
        fits,
        time,
        memory,
    })
}
