//! The analytical cost of one plan on one Cell: per-GPU memory (states with
//! ZeRO sharding by precision and optimizer, activations per micro-batch and
//! in-flight micro-batches, logits, optimizer-step temporaries) and iteration
//! time (roofline compute with size-dependent GEMM efficiency, memory-bound
//! ops and a kernel-launch floor; α–β communication; 1F1B bubble; optimizer
//! step; per-micro-batch and per-iteration framework costs).
use super::conv::ConvNet;
use super::order_stats::{expected_max_normal, padded_length_cv};
use super::topology::{nic_contention_s, p2p_s, Group, LinkScale, Placement};
use crate::cell::Plan;
use crate::gpu::GpuSpec;
use crate::model::{ModelCost, Optimizer, Precision, Runtime};
use serde::Serialize;

/// Memory reserved per GPU for the CUDA context, allocator slack and workspaces.
pub const RESERVED_BYTES: f64 = 1.5 * (1u64 << 30) as f64;
/// Fraction of device memory a plan may use.
pub const MEMORY_HEADROOM: f64 = 0.92;
/// Allocator fragmentation on activations (caching allocator block rounding).
const FRAGMENTATION: f64 = 1.1;
/// GEMM rows (tokens, pixels) at which tile/wave quantisation halves efficiency.
const ROWS_HALF: f64 = 256.0;
/// GEMM width (hidden size per TP rank, channels) at which efficiency halves.
const WIDTH_HALF: f64 = 192.0;
/// Best fraction of peak a large GEMM reaches, by precision (tensor-core
/// fp16/bf16, TF32, fp32 SIMT).
fn gemm_max_efficiency(p: Precision) -> f64 {
    match p {
        Precision::Fp16 | Precision::Bf16 => 0.70,
        Precision::Tf32 => 0.60,
        Precision::Fp32 => 0.80,
    }
}
/// Attention's batched score/value matmuls relative to a GEMM of the same rows.
const ATTENTION_EFFICIENCY: f64 = 0.6;
/// MoE dispatch/combine einsums (sparse one-hot operands) relative to a GEMM.
const DISPATCH_EFFICIENCY: f64 = 0.3;
/// Fraction of peak memory bandwidth element-wise kernels reach.
const MEM_BW_EFFICIENCY: f64 = 0.7;
/// GPU-side floor per kernel: eager frameworks, and XLA's fused kernels.
fn launch_floor_s(r: Runtime) -> f64 {
    if r == Runtime::Alpa { 3e-6 } else { 6e-6 }
}
/// Share of the DP synchronisation that can never hide behind backward (last
/// bucket, NCCL kernels slowing the overlapped compute) when the parameters
/// are spread evenly with the work; it shrinks as gradients become ready
/// earlier (`ModelCost::grad_ready_share`).
const MIN_EXPOSED_DP: f64 = 0.4;
/// Fraction of the last micro-batch's backward pass that gradient buckets can
/// overlap (buckets are ready only after their layers' backward finishes)
/// when the parameters are spread evenly with the work; it grows as
/// gradients become ready earlier.
const BACKWARD_OVERLAP: f64 = 0.3;
/// Largest gradient-readiness share the overlap uses (the unhideable share
/// keeps at least a quarter of its even-spread value).
const MAX_READY_SHARE: f64 = 0.875;
/// Fraction of peak memory bandwidth element-wise optimizer kernels reach.
const OPT_BW_EFFICIENCY: f64 = 0.8;
/// Parameter tensors per layer (weights, biases, norms) the optimizer visits.
const OPT_TENSORS_PER_LAYER: f64 = 16.0;
/// Launch cost per parameter tensor per step: an eager step dispatches the
/// optimizer's kernels one by one (~7 µs each, host-bound); XLA fuses them.
fn opt_launch_per_tensor_s(r: Runtime, o: Optimizer) -> f64 {
    if r == Runtime::Alpa { 5e-6 } else { 7e-6 * o.step_kernels_per_tensor() }
}

/// Run-to-run variation (coefficient of variation) of one rank's compute in
/// an iteration: clock boost and thermal throttling, data loading, host
/// jitter. Synchronous training waits at every collective for the slowest
/// rank, so the expected iteration is the expected maximum over ranks.
const RANK_JITTER_CV: f64 = 0.03;
/// Extra variation per rank on another node (the other host's OS and data
/// pipeline, network congestion seen as late arrivals).
const NODE_JITTER_CV: f64 = 0.02;

/// ZeRO-Offload: CPU threads per rank running the optimizer step (DeepSpeed
/// CPU-Adam's usual share of a server's cores per GPU).
const OFFLOAD_THREADS: f64 = 4.0;
/// Host memory bandwidth one CPU thread's vectorised optimizer loop streams.
const HOST_THREAD_BW: f64 = 10e9;
/// Host memory bandwidth of one server, shared by its ranks' CPU steps
/// (two-socket DDR4/DDR5, achievable streaming rate).
const HOST_NODE_BW: f64 = 100e9;
/// Host↔GPU rate of pinned copies through one PCIe switch port (Gen4 x16).
const HOST_LINK_BW: f64 = 24e9;
/// GPUs of a server behind one host PCIe switch port once the server is
/// full (8-GPU servers: four switches, two GPUs each); fewer ranks on a
/// node spread over the switches and do not share.
const GPUS_PER_HOST_SWITCH: f64 = 2.0;
/// PCIe switches of a full server.
const HOST_SWITCHES: f64 = 4.0;

/// Framework constants shared by every model: fitted from the multi-GPU
/// points of the profile DB (see `calibration`), else these defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Framework {
    /// Multiplier on intra-node collective and point-to-point times (1 = α–β defaults).
    pub comm_scale: f64,
    /// Multiplier on the cross-node (network) part of collectives and sends:
    /// fitted apart from `comm_scale` because the network is other hardware.
    pub net_scale: f64,
    /// Seconds per micro-batch per stage (scheduling, framework bookkeeping).
    pub per_microbatch_s: f64,
    /// Seconds per iteration (step launch, data hand-off).
    pub per_iter_s: f64,
}

impl Default for Framework {
    fn default() -> Self {
        Framework { comm_scale: 1.0, net_scale: 1.0, per_microbatch_s: 0.3e-3, per_iter_s: 2e-3 }
    }
}

impl Framework {
    /// The link scales of these constants.
    pub(crate) fn links(&self) -> LinkScale {
        LinkScale { intra: self.comm_scale, net: self.net_scale }
    }
}

/// Where the iteration time goes (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct TimeBreakdown {
    /// Forward/backward(/recompute) work of all micro-batches, bubble excluded.
    pub compute_s: f64,
    /// Of `compute_s`: dense matmuls (incl. MoE dispatch einsums).
    pub gemm_s: f64,
    /// Of `compute_s`: attention's s² matmuls.
    pub attention_s: f64,
    /// Of `compute_s`: memory-bound ops (norms, activations, softmax, cross-entropy).
    pub memory_bound_s: f64,
    /// Of `compute_s`: time added because kernel launches outran the work (launch floor).
    pub launch_bound_s: f64,
    /// Pipeline bubble: (pp − 1) micro-batch slots of the slowest stage.
    pub bubble_s: f64,
    /// Tensor-parallel all-reduces (not overlapped).
    pub tp_comm_s: f64,
    /// Pipeline point-to-point sends, with what they lose to gradient sync
    /// sharing their network link.
    pub pp_comm_s: f64,
    /// MoE all-to-all token exchanges (expert parallelism over the DP group).
    pub ep_comm_s: f64,
    /// Data-parallel gradient sync and ZeRO gathers left exposed after overlap.
    pub dp_comm_s: f64,
    /// Optimizer step (memory-bandwidth bound).
    pub optimizer_s: f64,
    /// Per-micro-batch and per-iteration framework overhead.
    pub overhead_s: f64,
    /// Waiting for the slowest rank: the expected maximum of the ranks'
    /// compute times over their mean (synchronous training, every rank's
    /// time varies a little; grows with ranks and nodes).
    pub sync_wait_s: f64,
}

impl TimeBreakdown {
    /// Sum of all parts (the sub-parts of `compute_s` are not added again).
    pub fn total(&self) -> f64 {
        self.compute_s + self.bubble_s + self.tp_comm_s + self.pp_comm_s + self.ep_comm_s + self.dp_comm_s + self.optimizer_s + self.overhead_s + self.sync_wait_s
    }

    /// Relative error band of this prediction: compute is the best-anchored
    /// part (profiles pin it), communication, bubble and overheads the least.
    pub fn error_band(&self) -> f64 {
        let t = self.total().max(1e-12);
        let comm = self.tp_comm_s + self.pp_comm_s + self.ep_comm_s + self.dp_comm_s + self.bubble_s;
        0.1 * (self.compute_s + self.optimizer_s) / t + 0.5 * comm / t + 0.3 * (self.overhead_s + self.sync_wait_s) / t
    }
}

/// Memory per GPU (bytes) by kind.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MemoryBreakdown {
    /// Weights (and autocast copies), gradients and optimizer states after ZeRO sharding.
    pub states: f64,
    /// Stored activations of in-flight micro-batches, logits and loss buffers, with fragmentation.
    pub activations: f64,
    /// Gather buffers, context and workspaces.
    pub other: f64,
    /// Optimizer-step temporaries (peak of the step phase, activations freed by then).
    pub optimizer_temp: f64,
    /// cuDNN autotuning's workspace (`cudnn_benchmark` CNNs trained with fp32
    /// inputs), at most the GPU memory [`MemoryBreakdown::total`] leaves:
    /// reserved when free, not needed to fit, so not part of `total`.
    pub autotune_workspace: f64,
}

impl MemoryBreakdown {
    /// Bytes the plan needs (what feasibility counts): the larger of the
    /// forward/backward phase and the optimizer step.
    pub fn total(&self) -> f64 {
        self.states + self.other + self.activations.max(self.optimizer_temp)
    }

    /// Predicted peak the process reaches (NVML): [`MemoryBreakdown::total`]
    /// plus the autotuning workspace taken from memory left over.
    pub fn peak(&self) -> f64 {
        self.total() + self.autotune_workspace
    }
}

/// A plan with its predicted time and memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlanEval {
    /// The plan.
    pub plan: Plan,
    /// Predicted seconds per iteration.
    pub iter_time_s: f64,
    /// Predicted bytes per GPU the plan needs ([`MemoryBreakdown::total`];
    /// the NVML peak adds [`MemoryBreakdown::autotune_workspace`]).
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
    /// Calibrated efficiency multiplier on compute (1 = datasheet).
    pub efficiency_factor: f64,
    /// Measured compute-time multipliers by micro-batch size (samples per
    /// GPU per micro-batch) over the calibrated level; 1 for other sizes.
    pub batch_scale: &'a [(u32, f64)],
    /// Framework constants (fitted or default).
    pub framework: Framework,
    /// A CNN's layers (convolutions costed layer by layer), else None.
    pub conv: Option<ConvNet>,
    /// cuDNN autotuning's workspace when memory is free (0 without autotuning).
    pub autotune_workspace: f64,
}

/// Fraction of the model's compute on the slowest of `pp` pipeline stages.
/// The output head (vocabulary projection and loss) runs on the last stage
/// beside its layers: runtimes that partition by layer count give every
/// stage ⌈L/pp⌉ layers and the last one the head as well; a runtime that
/// balances stages by profiled cost (Alpa) moves whole layers off the last
/// stage, down to one.
pub(crate) fn slowest_stage_share(c: &ModelCost, pp: u32) -> f64 {
    let l = c.pipeline_layers.max(1) as f64;
    if pp <= 1 {
        return 1.0;
    }
    let p = pp as f64;
    let total = c.fwd_flops_per_sample;
    let head = c.head_flops_per_sample.clamp(0.0, total);
    // Encoder-decoder models: the last `xl` layers carry cross-attention and
    // weigh `w` encoder layers each, so the stages holding them are heavier.
    let xl = (c.decoder_layers as f64).min(l);
    let cross = c.cross_flops_per_sample_layer.max(0.0);
    let per_layer = (total - head - xl * cross) / l;
    if per_layer <= 0.0 {
        return (l / p).ceil() / l;
    }
    let w = 1.0 + cross / per_layer;
    let h = head / per_layer; // the head in (encoder) layers' worth of work
    // Work of the last k layers, in encoder layers.
    let tail = |k: f64| k.min(xl) * w + (k - xl).max(0.0);
    let units = if c.runtime.balances_stages() {
        // The last stage keeps k layers and the head; the others split the
        // rest in whole layers, the heaviest being the one just before it.
        let most = (l / p).ceil() as u32;
        (1..=most.max(1))
            .map(|k| {
                let k = k as f64;
                let others = ((l - k) / (p - 1.0)).ceil();
                (tail(k + others) - tail(k)).max(tail(k) + h)
            })
            .fold(f64::INFINITY, f64::min)
    } else {
        tail((l / p).ceil()) + h
    };
    units / (tail(l) + h)
}

/// Samples per micro-batch, if the plan divides the global batch exactly.
pub(crate) fn micro_batch_size(global_batch: u32, plan: &Plan) -> Option<u32> {
    let per_replica = plan.dp.checked_mul(plan.micro_batches)?;
    (per_replica > 0 && global_batch % per_replica == 0).then(|| global_batch / per_replica)
}

/// The compute multiplier `scale` holds for micro-batch size `mbs`, if any
/// ([`CellContext::batch_scale`]).
pub(crate) fn batch_scale_at(scale: &[(u32, f64)], mbs: u32) -> Option<f64> {
    scale.iter().find(|b| b.0 == mbs).map(|b| b.1)
}

/// Cost of `plan`; `None` if it does not divide the batch or the layers.
pub(crate) fn evaluate(cx: &CellContext<'_>, plan: &Plan) -> Option<PlanEval> {
    let c = cx.cost;
    let g = cx.gpu;
    let fw = &cx.framework;
    let mbs_n = micro_batch_size(cx.global_batch, plan)?;
    let mbs = mbs_n as f64;
    if plan.pp > c.pipeline_layers || plan.tp > c.max_tp.max(1) {
        return None;
    }
    let (dp, tp, pp, m) = (plan.dp as f64, plan.tp as f64, plan.pp as f64, plan.micro_batches as f64);
    let ckpt = plan.checkpointing;
    let z = plan.zero_stage;
    let layers_stage = (c.pipeline_layers as f64 / pp).ceil();
    let stage_share = layers_stage / c.pipeline_layers.max(1) as f64;

    // ---- memory ----
    let mixed = c.precision.mixed();
    // PyTorch autocast keeps fp32 weights and gradients plus half copies of the
    // weights for the forward pass; Megatron/DeepSpeed/Alpa keep half weights
    // and gradients beside fp32 master weights.
    let autocast = mixed && (c.precision == Precision::Bf16 || matches!(c.runtime, Runtime::Ddp | Runtime::Fsdp));
    let opt_state = c.optimizer.state_bytes();
    let (wb, gb, ob) = if !mixed {
        (4.0, 4.0, opt_state)
    } else if autocast {
        (6.0, 4.0, opt_state)
    } else {
        (2.0, 2.0, 4.0 + opt_state)
    };
    // ZeRO-Offload keeps the fp32 masters and optimizer states in host memory.
    let ob = if c.offload { 0.0 } else { ob };
    let shard = |on: bool| if on { dp } else { 1.0 };
    // MoE experts are sharded over the data-parallel group (expert
    // parallelism): each rank holds experts / ep of them, whole.
    let ep = if c.experts > 1 { dp.min(c.experts as f64) } else { 1.0 };
    let expert_gpu = c.expert_params / (tp * pp * ep);
    let dense_gpu = (c.params - c.expert_params) / (tp * pp);
    let states = dense_gpu * (wb / shard(z >= 3) + gb / shard(z >= 2) + ob / shard(z >= 1)) + expert_gpu * (wb + gb + ob);
    // Autocast runs norms and residual adds in fp32 (the unsplit activations
    // double) and keeps a bf16 copy of the logits beside the fp32 loss
    // buffers (b + 12 instead of b + 8 bytes per logit). A CNN's batch norm
    // and ReLU run in the half type autocast gives them (their inputs are
    // the convolutions' half outputs): its stored activations stay half.
    let (fixed_scale, extra_scale) = if autocast && cx.conv.is_none() { (2.0, (2.0 + 12.0) / (2.0 + 8.0)) } else { (1.0, 1.0) };
    let act_layer = (c.act_fixed_per_sample_layer * fixed_scale + c.act_tp_per_sample_layer / tp) * mbs;
    let inflight = if plan.pp > 1 { m.min(pp) } else { 1.0 };
    let activations = if ckpt {
        c.ckpt_per_sample_layer * mbs * layers_stage * inflight + act_layer
    } else {
        act_layer * layers_stage * inflight
    } + c.extra_act_per_sample * extra_scale * mbs / tp;
    let gather = if z >= 3 { 2.0 * c.max_layer_params / tp * wb } else { 0.0 };
    // The step's temporaries: about one fp32 buffer per locally updated parameter.
    let opt_params = dense_gpu / shard(z >= 1) + expert_gpu;
    // Unfactored optimizers (Adam, momentum) allocate about one fp32 buffer
    // per locally updated parameter during the step.
    let optimizer_temp = if opt_state >= 4.0 && !c.offload { 4.0 * opt_params } else { 0.0 };
    let mut memory = MemoryBreakdown { states, activations: activations * FRAGMENTATION, other: gather + RESERVED_BYTES, optimizer_temp, autotune_workspace: 0.0 };
    let fits = memory.total() <= MEMORY_HEADROOM * g.mem_bytes() as f64;
    // The autotuner skips candidates whose workspace does not fit: it takes
    // what is left over, and feasibility (above) never counts it.
    memory.autotune_workspace = cx.autotune_workspace.min(g.mem_bytes() as f64 - memory.total()).max(0.0);

    // ---- compute per micro-batch on one GPU (slowest stage) ----
    let peak = g.peak_for(c.precision);
    let passes = if ckpt { 4.0 } else { 3.0 };
    let share = slowest_stage_share(c, plan.pp) / tp;
    let rows = c.gemm_rows_per_sample * mbs;
    let width = c.gemm_width / tp;
    let eff = gemm_max_efficiency(c.precision) * rows / (rows + ROWS_HALF) * width / (width + WIDTH_HALF);
    let mut gemm = (c.gemm_flops_per_sample + c.dispatch_flops_per_sample / DISPATCH_EFFICIENCY) * mbs * passes * share / (peak * eff);
    let attention = c.attn_flops_per_sample * mbs * passes * share / (peak * eff * ATTENTION_EFFICIENCY);
    let bw = g.mem_bw_gbs * 1e9;
    // Memory-bound traffic: the part on the unsplit hidden state (norms,
    // residuals, dropouts) runs in full on every tensor-parallel rank.
    let rep = c.mem_bytes_replicated_per_sample.min(c.mem_bytes_per_sample);
    let mem_rank = (c.mem_bytes_per_sample - rep) * share + rep * share * tp;
    let mut mem_bound = mem_rank * mbs * passes / (bw * MEM_BW_EFFICIENCY);
    if let Some(net) = &cx.conv {
        // CNNs: convolutions layer by layer, memory-bound layers by bytes
        // (forward and backward; recomputation repeats the forward third).
        let t = net.pass_times(mbs, g, c.precision);
        gemm = t.conv_s * passes / 3.0 * share;
        mem_bound = t.memory_s * passes / 3.0 * share;
    }
    let roofline_floor = (c.fwd_flops_per_sample * passes * share / peak + mem_rank * passes / bw) * mbs;
    let at_size = batch_scale_at(cx.batch_scale, mbs_n).unwrap_or(1.0);
    let work = ((gemm + attention + mem_bound) / cx.efficiency_factor * at_size).max(roofline_floor);
    let launch = c.kernels_per_layer * layers_stage * passes * launch_floor_s(c.runtime);
    let t_compute_mb = work.max(launch);
    let launch_bound = t_compute_mb - work;
    let scale_parts = work / (gemm + attention + mem_bound).max(1e-30);

    // ---- communication (α–β per collective, scaled by the fitted framework constant) ----
    let p = cx.placement;
    let tp_group = Group::new(plan.tp, 1, p);
    let dp_group = Group::new(plan.dp, plan.tp, p);
    let act_msg = c.boundary_bytes_per_sample * mbs;
    let tp_collectives = if plan.tp > 1 { layers_stage * if ckpt { 6.0 } else { 4.0 } } else { 0.0 };
    let k = fw.links();
    let t_tp_mb = tp_collectives * tp_group.all_reduce_s(act_msg, g, k);
    // Pipeline sends: stages sit on consecutive GPUs, so once the Cell spans
    // nodes some stage boundary crosses the network, and in 1F1B's steady
    // state the slowest boundary paces every slot. At that boundary every
    // rank of the sending stage on the node (its whole stage, or the whole
    // node when a stage fills nodes) sends its share of its replica's
    // activations through the node's network link at once.
    let stage_span = plan.tp * plan.dp;
    let pp_cross = plan.pp > 1 && p.nodes > 1;
    let senders = stage_span.min(p.per_node).max(1);
    let t_pp_mb = if plan.pp > 1 {
        2.0 * p2p_s(act_msg / tp, pp_cross, g, senders, k)
    } else {
        0.0
    };
    let slots = m + pp - 1.0;
    // MoE all-to-all: dispatch and combine, forward and backward (and the
    // recomputed forward), each sending (ep − 1)/ep of the tokens' slots to
    // other ranks; across nodes they share each node's network link.
    let t_ep_mb = if ep > 1.0 {
        let a2a = if ckpt { 6.0 } else { 4.0 };
        a2a * dp_group.all_to_all_s(c.alltoall_bytes_per_sample * mbs * stage_share / tp, g, k)
    } else {
        0.0
    };

    // DP gradient sync (all-reduce, or reduce-scatter + all-gather under ZeRO),
    // ZeRO-2 reduce-scatter per micro-batch, ZeRO-3 parameter gathers per micro-batch.
    // Expert gradients stay on their rank; only the dense part is synchronised.
    let grad_bytes = dense_gpu * gb.min(4.0);
    let mut dp_comm = dp_group.all_reduce_s(grad_bytes, g, k);
    if z >= 2 {
        dp_comm += (m - 1.0) * dp_group.all_gather_s(grad_bytes, g, k);
    }
    if z >= 3 {
        dp_comm += 2.0 * m * dp_group.all_gather_s(dense_gpu * wb.min(4.0), g, k);
    }
    let mut dp_window = 0.0;
    let dp_exposed = if plan.dp <= 1 {
        0.0
    } else if c.overlaps_grad_sync(z) {
        // Both constants hold for gradients ready on average half way through
        // backward (share ½); earlier-ready gradients hide more. ZeRO-3's
        // parameter gathers are prefetched, not waiting on gradients: they
        // keep the constants. NCCL kernels slow the overlapped compute however
        // early the gradients are ready: at most a share of ⅞ counts.
        let share = if z >= 3 { 0.5 } else { c.grad_ready_share.clamp(0.0, MAX_READY_SHARE) };
        let (early, late) = (share / 0.5, (1.0 - share) / 0.5);
        let window = t_compute_mb * 2.0 / 3.0 * BACKWARD_OVERLAP * early + if z >= 2 { (m - 1.0) * t_compute_mb } else { 0.0 };
        dp_window = window;
        (dp_comm - window).max(MIN_EXPOSED_DP * late * dp_comm)
    } else {
        dp_comm
    };
    // Pipeline sends and hidden gradient sync both crossing the nodes share
    // each node's network link during the overlap window.
    let contention = if pp_cross && dp_group.nodes > 1 && dp_window > 0.0 && dp_comm > 0.0 {
        let net = LinkScale { intra: 0.0, net: k.net };
        let net_share = (dp_group.all_reduce_s(grad_bytes, g, net) / dp_group.all_reduce_s(grad_bytes, g, k)).clamp(0.0, 1.0);
        let slots_in_window = (dp_window / t_compute_mb.max(1e-12)).min(slots);
        nic_contention_s(slots_in_window * t_pp_mb, (dp_comm - dp_exposed) * net_share)
    } else {
        0.0
    };

    // Optimizer step: memory-bound passes over the locally updated parameters
    // and per-tensor launches. Mixed precision with fp32 masters adds the half
    // → fp32 gradient copy, unscale, overflow check, gradient norm, master →
    // half copy and gradient zeroing (~30 bytes; XLA fuses them into the
    // update, leaving the copy); autocast adds the gradient zeroing.
    let step_bytes = c.optimizer.step_bytes()
        + match (mixed, autocast, c.runtime) {
            (true, false, Runtime::Alpa) => 6.0,
            (true, false, _) => 30.0,
            (true, true, _) => 4.0,
            _ => 0.0,
        };
    let optimizer_s = if c.offload {
        // On the CPU: fp32 masters, gradients and states streamed by the
        // rank's threads, all ranks of a node sharing its memory bandwidth.
        let host_bytes = opt_params * (4.0 + 2.0 * (4.0 + opt_state));
        // Both the rank's threads and the node's memory bandwidth bound the
        // step; near saturation they compound (queueing on the memory
        // controllers), so the time is the 2-norm of the two bounds.
        let cpu = (host_bytes / (OFFLOAD_THREADS * HOST_THREAD_BW)).hypot(host_bytes * p.per_node as f64 / HOST_NODE_BW);
        // Gradients stream to the host during backward, bucket by bucket
        // (off the critical path); the updated weights come back after the
        // step, through a switch port the rank shares once the node is full.
        let sharing = (p.per_node as f64 / HOST_SWITCHES).ceil().clamp(1.0, GPUS_PER_HOST_SWITCH);
        cpu + opt_params * wb.min(4.0) * sharing / HOST_LINK_BW
    } else {
        opt_params * step_bytes / (bw * OPT_BW_EFFICIENCY) + layers_stage * OPT_TENSORS_PER_LAYER * opt_launch_per_tensor_s(c.runtime, c.optimizer)
    };

    // Synchronous ranks wait for the slowest: the expected maximum of the
    // ranks' compute, each varying by RANK_JITTER_CV (more across nodes).
    let ranks = (plan.dp * plan.tp * plan.pp) as f64;
    let cv = if p.nodes > 1 { (RANK_JITTER_CV * RANK_JITTER_CV + NODE_JITTER_CV * NODE_JITTER_CV).sqrt() } else { RANK_JITTER_CV };
    let jitter = (m + pp - 1.0) * t_compute_mb * cv * expected_max_normal(ranks);
    // Samples of varying length padded per micro-batch: each replica's
    // micro-batch runs at the length of its longest sample, drawn
    // independently per micro-batch and replica (a replica's tensor- and
    // pipeline-parallel ranks share its samples), so its m micro-batches
    // vary by √m times one's spread and the step waits for the slowest replica.
    let padding = c.sample_len.map_or(0.0, |l| m.sqrt() * t_compute_mb * padded_length_cv(&l, mbs, c.seq_len) * expected_max_normal(dp));
    let sync_wait = jitter.hypot(padding);

    let time = TimeBreakdown {
        compute_s: m * t_compute_mb,
        gemm_s: m * gemm * scale_parts,
        attention_s: m * attention * scale_parts,
        memory_bound_s: m * mem_bound * scale_parts,
        launch_bound_s: m * launch_bound,
        bubble_s: (pp - 1.0) * t_compute_mb,
        tp_comm_s: slots * t_tp_mb,
        pp_comm_s: slots * t_pp_mb + contention,
        ep_comm_s: m * t_ep_mb,
        dp_comm_s: dp_exposed,
        optimizer_s,
        overhead_s: slots * fw.per_microbatch_s + fw.per_iter_s,
        sync_wait_s: sync_wait,
    };
    let total = time.total();
    if !total.is_finite() || total <= 0.0 {
        return None;
    }
    Some(PlanEval { plan: *plan, iter_time_s: total, mem_per_gpu_bytes: memory.total() as u64, fits, time, memory })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelCatalog;

    /// The vocabulary head makes the last stage the slowest: with layer-count
    /// partitioning it adds the head to ⌈L/pp⌉ layers; Alpa's balancing moves
    /// layers off that stage and lands between the even split and that.
    #[test]
    fn the_head_stage_is_the_slowest() {
        let cat = ModelCatalog::builtin();
        let mut gpt = cat.get("gpt__1.3B").unwrap().clone();
        gpt.runtime = Runtime::Alpa;
        let alpa = gpt.cost();
        assert!(alpa.head_flops_per_sample > 0.05 * alpa.fwd_flops_per_sample);
        assert_eq!(slowest_stage_share(&alpa, 1), 1.0);
        let even = (alpa.pipeline_layers as f64 / 8.0).ceil() / alpa.pipeline_layers as f64;
        gpt.runtime = Runtime::Megatron;
        let uniform = slowest_stage_share(&gpt.cost(), 8);
        let balanced = slowest_stage_share(&alpa, 8);
        assert!(balanced > even * 1.05 && uniform > balanced * 1.05, "{even} {balanced} {uniform}");
        // A CNN has no vocabulary head: the even split.
        let wrn = cat.get("wide_resnet__500M").unwrap().cost();
        let l = wrn.pipeline_layers as f64;
        assert_eq!(slowest_stage_share(&wrn, 4), (l / 4.0).ceil() / l);
    }

    /// Decoder layers carry cross-attention: with an encoder-decoder split
    /// over two stages the decoder's stage does more than half the work, by
    /// as much as cross-attention adds; without decoder layers, the old split.
    #[test]
    fn the_decoder_stage_is_heavier() {
        let mut m = ModelCatalog::builtin().get("transformer").unwrap().clone();
        m.runtime = Runtime::Megatron;
        let c = m.cost();
        assert_eq!((c.pipeline_layers, c.decoder_layers), (12, 6));
        let share = slowest_stage_share(&c, 2);
        let enc_layer = (c.fwd_flops_per_sample - c.head_flops_per_sample - 6.0 * c.cross_flops_per_sample_layer) / 12.0;
        let want = (c.fwd_flops_per_sample - 6.0 * enc_layer) / c.fwd_flops_per_sample;
        assert!((share - want).abs() < 1e-9 && share > 0.55, "{share} vs {want}");
        // Alpa balances stages by cost: no more than the count split, no
        // less than an even share.
        let mut alpa = m.clone();
        alpa.runtime = Runtime::Alpa;
        let balanced = slowest_stage_share(&alpa.cost(), 4);
        assert!(balanced >= 0.25 - 1e-12 && balanced <= slowest_stage_share(&c, 4) + 1e-12, "{balanced}");
        m.decoder_layers = 0;
        let plain = m.cost();
        let h = plain.head_flops_per_sample / ((plain.fwd_flops_per_sample - plain.head_flops_per_sample) / 12.0);
        assert!((slowest_stage_share(&plain, 2) - (6.0 + h) / (12.0 + h)).abs() < 1e-9);
    }
}
