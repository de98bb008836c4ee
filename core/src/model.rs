//! The model catalog: GPT/BERT transformers, mixture-of-experts and
//! Wide-ResNet families at Alpa-benchmark sizes (`gpt__1.3B`, `moe__2.4B`,
//! `wide_resnet__6.8B`, …), aliases for the reference-data workloads, and
//! user-defined models in TOML. [`ModelSpec::cost`] derives parameters, FLOPs
//! and activation sizes from the architecture for the estimator.
use crate::error::{close_names, line_of, toml_error, CoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::OnceLock;

const BUILTIN_TOML: &str = include_str!("../data/models.toml");

/// Architecture family; decides how parameters, FLOPs and activations are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFamily {
    /// Decoder-only transformer.
    Gpt,
    /// Encoder-only transformer.
    Bert,
    /// Transformer whose FFNs are `experts` experts with `top_k` active per token.
    Moe,
    /// Bottleneck (Wide-)ResNet for 2-D images.
    WideResnet,
    /// Any model given by explicit parameter count and FLOPs per sample.
    Generic,
}

/// Training numeric precision of the matrix multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Mixed precision fp16 with fp32 master weights (tensor-core peak).
    #[default]
    Fp16,
    /// Mixed precision bf16 (autocast; tensor-core peak).
    Bf16,
    /// fp32 storage with TF32 tensor-core matmuls (Ampere and later).
    Tf32,
    /// Plain fp32 (non-tensor peak; activations 4 bytes).
    Fp32,
}

impl Precision {
    /// Bytes per activation / weight value in the forward pass.
    pub fn value_bytes(self) -> f64 {
        match self {
            Precision::Fp16 | Precision::Bf16 => 2.0,
            Precision::Tf32 | Precision::Fp32 => 4.0,
        }
    }

    /// Whether weights are kept as fp32 masters beside half-precision copies.
    pub fn mixed(self) -> bool {
        matches!(self, Precision::Fp16 | Precision::Bf16)
    }
}

/// Optimizer, for the state bytes it keeps per parameter and its step's memory traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    /// Adam / AdamW: two fp32 moments (8 bytes per parameter).
    #[default]
    #[serde(alias = "adamw")]
    Adam,
    /// SGD with momentum: one fp32 buffer (4 bytes).
    SgdMomentum,
    /// Plain SGD: no state.
    Sgd,
    /// Adafactor without momentum: factored second moment (well under 1 byte).
    Adafactor,
}

impl Optimizer {
    /// Kernels an unfused (per-tensor, eager) step launches per parameter
    /// tensor, with gradient clipping and zeroing: Adam's moment updates,
    /// square root, denominator and update (~9) plus norm, clip and zero;
    /// SGD with momentum's buffer update and step plus weight decay and
    /// zeroing; plain SGD's step plus clipping and zeroing; Adafactor's
    /// row/column factors and update.
    pub fn step_kernels_per_tensor(self) -> f64 {
        match self {
            Optimizer::Adam => 12.0,
            Optimizer::SgdMomentum => 5.0,
            Optimizer::Sgd => 3.0,
            Optimizer::Adafactor => 15.0,
        }
    }

    /// fp32 state bytes per parameter (moments), excluding master weights.
    pub fn state_bytes(self) -> f64 {
        match self {
            Optimizer::Adam => 8.0,
            Optimizer::SgdMomentum => 4.0,
            Optimizer::Sgd => 0.0,
            Optimizer::Adafactor => 0.1,
        }
    }

    /// Passes over memory per parameter in the step (read p, g, states; write p, states).
    pub fn step_bytes(self) -> f64 {
        match self {
            Optimizer::Adam => 28.0,
            Optimizer::SgdMomentum => 20.0,
            Optimizer::Sgd => 12.0,
            Optimizer::Adafactor => 16.0,
        }
    }
}

/// Activation recomputation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Recompute {
    /// The plan search decides per plan.
    #[default]
    Auto,
    /// Always recompute (every layer's activations are rebuilt in backward).
    Full,
    /// Never recompute.
    Off,
}

/// The training runtime: which plans it can execute and how it syncs gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// Unspecified: any plan (DP/TP/PP, ZeRO 0-3); gradient sync overlaps backward.
    #[default]
    Any,
    /// PyTorch DistributedDataParallel: data parallel only, overlapped bucketed all-reduce.
    Ddp,
    /// PyTorch FSDP: data parallel with ZeRO-3 sharding, overlapped.
    Fsdp,
    /// Megatron-LM: DP/TP/PP with ZeRO-1 (distributed optimizer); gradients reduced after the schedule.
    Megatron,
    /// DeepSpeed: DP with ZeRO 0-3 and pipelines; overlapped from ZeRO-2 on.
    Deepspeed,
    /// JAX/Alpa: DP/TP/PP; intra-op sharding can shard states, gradients and
    /// weights along the data axis (ZeRO 0-3); gradients synchronised after
    /// accumulation (no overlap with backward).
    Alpa,
}

impl Runtime {
    /// Whether the runtime can execute `plan` (`tp`, `pp`, ZeRO stage).
    pub fn can_execute(self, tp: u32, pp: u32, zero_stage: u8) -> bool {
        match self {
            Runtime::Any => true,
            Runtime::Ddp => tp == 1 && pp == 1 && zero_stage == 0,
            Runtime::Fsdp => tp == 1 && pp == 1 && (zero_stage == 0 || zero_stage == 3),
            Runtime::Megatron => zero_stage <= 1,
            Runtime::Deepspeed => tp == 1,
            Runtime::Alpa => true,
        }
    }

    /// Whether gradient synchronisation overlaps the backward pass by default
    /// at ZeRO stage `zero_stage`: DDP/FSDP reduce buckets from backward
    /// hooks; DeepSpeed only from stage 2 (its stage-2/3 reduce-scatter hooks
    /// with `overlap_comm`; stages 0-1 all-reduce after backward, at the
    /// accumulation boundary); Megatron-LM all-reduces after the pipeline
    /// schedule (`--overlap-grad-reduce` is opt-in); Alpa after accumulation.
    pub fn grad_overlap(self, zero_stage: u8) -> bool {
        match self {
            Runtime::Any | Runtime::Ddp | Runtime::Fsdp => true,
            Runtime::Deepspeed => zero_stage >= 2,
            Runtime::Megatron | Runtime::Alpa => false,
        }
    }

    /// Whether the runtime balances pipeline stages by their profiled cost
    /// (Alpa's stage construction moves whole layers off the stage that holds
    /// the output head) rather than giving every stage the same layer count.
    pub fn balances_stages(self) -> bool {
        matches!(self, Runtime::Alpa)
    }

    /// Whether attention scores are materialised (s² memory traffic) rather than
    /// computed by a fused flash-attention kernel.
    pub fn materialised_attention(self) -> bool {
        matches!(self, Runtime::Alpa)
    }
}

/// How attention scores are computed: whether the s² score matrix goes
/// through memory, and in how many kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// By runtime: `fused` for Alpa (XLA), `flash` for the others.
    #[default]
    Auto,
    /// A flash/memory-efficient kernel: the scores never reach memory.
    Flash,
    /// Scores materialised, scale, mask and softmax in one kernel (XLA,
    /// Megatron-LM's fused softmax in fp16/bf16).
    Fused,
    /// Scores materialised, scale, mask, softmax and dropout each a kernel
    /// of its own (PyTorch eager attention; Megatron-LM's fallback outside
    /// fp16/bf16, whose fused softmax needs half inputs).
    Eager,
}

impl Attention {
    /// Passes over the s² scores per forward-pass unit of the estimator's
    /// memory-bound traffic (which counts backward as twice forward), or 0
    /// when they never reach memory. Fused: written by the QK matmul, read
    /// and written by the softmax, read by the value matmul (4); backward
    /// about twice that. Eager, counted kernel by kernel: forward writes the
    /// scores (1), scales (2), masks (2), softmax (2), dropout (2 + ¼ for
    /// its byte mask), the value matmul reads (1): 10¼; backward: dP written
    /// (1) and P read for dV (1), dropout (2¼), softmax (3), mask (2), scale
    /// (2), dS read by the two matmuls (2): 13¼; (10¼ + 13¼) / 3 ≈ 7.8.
    pub fn score_passes(self, runtime: Runtime) -> f64 {
        match self {
            Attention::Auto if runtime.materialised_attention() => 4.0,
            Attention::Auto | Attention::Flash => 0.0,
            Attention::Fused => 4.0,
            Attention::Eager => 7.8,
        }
    }
}

/// A model architecture. Fields not used by a family are 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Catalog or user name, e.g. `gpt__1.3B`.
    pub name: String,
    /// Architecture family.
    pub family: ModelFamily,
    /// Transformer layers; for `generic`, pipeline-splittable layers.
    pub layers: u32,
    /// Transformer hidden size.
    pub hidden: u32,
    /// Attention heads.
    pub heads: u32,
    /// Tokens per sample.
    pub seq_len: u32,
    /// Vocabulary size (output classes for encoders and ResNets; 0 → 1000 for ResNets).
    pub vocab: u32,
    /// FFN inner size (0 → 4 × hidden).
    pub ffn_hidden: u32,
    /// SwiGLU-style FFN with three matrices.
    pub gated_ffn: bool,
    /// MoE experts per layer.
    pub experts: u32,
    /// MoE experts active per token.
    pub top_k: u32,
    /// ResNet depth (18 or 34: basic blocks; 50, 101 or 152: bottlenecks).
    pub depth: u32,
    /// ResNet base width (channels of the first stage).
    pub width: u32,
    /// ResNet bottleneck width multiplier.
    pub width_factor: u32,
    /// Input image side in pixels (under 64: the CIFAR stem, one 3×3
    /// convolution at full resolution).
    pub image_size: u32,
    /// CNNs: tensors in channels-last (NHWC) memory format
    /// (`torch.channels_last`), the layout tensor-core convolutions use;
    /// false (NCHW, PyTorch's default): mixed-precision convolutions
    /// transpose their operands and results.
    #[serde(default)]
    pub channels_last: bool,
    /// CNNs: the training script sets `torch.backends.cudnn.benchmark`
    /// (cuDNN autotuning: every candidate algorithm of each new convolution
    /// shape is timed with its workspace, which the caching allocator keeps
    /// reserved). False: PyTorch's default, heuristic algorithm choice.
    #[serde(default)]
    pub cudnn_benchmark: bool,
    /// Training precision.
    pub precision: Precision,
    /// Optimizer (state bytes, step traffic).
    #[serde(default)]
    pub optimizer: Optimizer,
    /// Activation recomputation policy.
    #[serde(default)]
    pub recompute: Recompute,
    /// Training runtime (executable plans, gradient-sync overlap).
    #[serde(default)]
    pub runtime: Runtime,
    /// Overrides the runtime's gradient-sync overlap with backward.
    #[serde(default)]
    pub grad_overlap: Option<bool>,
    /// ZeRO-Offload (DeepSpeed): fp32 master weights and optimizer states
    /// live in host memory and the optimizer step runs on the CPU; gradients
    /// go to the host and updated weights come back over PCIe every step.
    #[serde(default)]
    pub offload: bool,
    /// Samples per micro-batch per replica when the training script fixes it
    /// (DeepSpeed's `train_micro_batch_size_per_gpu`, Megatron-LM's
    /// `--micro-batch-size`): the plan search keeps to it, accumulating
    /// gradients over as many micro-batches as the global batch needs. None:
    /// the search chooses.
    #[serde(default)]
    pub micro_batch: Option<u32>,
    /// MoE: an expert layer every `expert_interval` layers (1 = every layer; 0 = 1).
    #[serde(default)]
    pub expert_interval: u32,
    /// MoE: expert capacity factor (0 = 1.0).
    #[serde(default)]
    pub capacity_factor: f64,
    /// MoE: tokens per dispatch group (0 = sequence length).
    #[serde(default)]
    pub expert_group_size: u32,
    /// Encoder-decoder transformers (the original Transformer, T5): how
    /// many of `layers` are decoder layers, each with an extra
    /// encoder-decoder (cross) attention block. 0: encoder or decoder only.
    #[serde(default)]
    pub decoder_layers: u32,
    /// Element-wise kernels the FFN activation runs as (0 or 1: one fused
    /// kernel). Eager PyTorch runs an activation written as tensor
    /// arithmetic one kernel per operation: Hugging Face GPT-2's default
    /// `gelu_new`, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), is 8.
    pub activation_kernels: u32,
    /// How attention scores are computed (`auto`: by runtime).
    #[serde(default)]
    pub attention: Attention,
    /// Explicit parameter count (`generic`).
    pub params_override: Option<f64>,
    /// Explicit forward FLOPs per sample (`generic`).
    pub fwd_flops_override: Option<f64>,
    /// Explicit activation bytes per sample (`generic`).
    pub act_bytes_override: Option<f64>,
    /// Explicit gradient readiness (`generic`): the mean share of backward
    /// still to run when a parameter's gradient is ready (0.5: parameters
    /// spread evenly with the work; an LSTM language model's vocabulary
    /// decoder, most of its work, finishes first and its embedding last).
    #[serde(default)]
    pub grad_ready_override: Option<f64>,
    /// Variable-length samples padded per batch (translation pairs, captions,
    /// unpacked text): the mean and standard deviation of a sample's tokens.
    /// Each micro-batch is padded to its longest sample, so data-parallel
    /// replicas, drawing different samples, finish their compute at
    /// different times and the step waits for the slowest. None: every
    /// sample has the same length (packed or padded to `seq_len`).
    #[serde(default)]
    pub sample_len: Option<SampleLengths>,
}

/// Token counts of a model's training samples (`sample_len_mean`,
/// `sample_len_sd` in a model file).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampleLengths {
    /// Mean tokens per sample.
    pub mean: f64,
    /// Standard deviation of tokens per sample.
    pub sd: f64,
}

/// Quantities the estimator needs, derived once per model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelCost {
    /// Total parameters.
    pub params: f64,
    /// Parameters touched per sample (MoE: attention + top-k experts).
    pub active_params: f64,
    /// Forward FLOPs per sample, all kinds (backward = 2 ×).
    pub fwd_flops_per_sample: f64,
    /// Forward dense matmul/convolution FLOPs per sample (incl. the vocabulary projection).
    pub gemm_flops_per_sample: f64,
    /// Of `gemm_flops_per_sample`: the output head (projection onto the
    /// vocabulary), which runs once per sample on the last pipeline stage.
    pub head_flops_per_sample: f64,
    /// Forward attention score/value FLOPs per sample (the s² term).
    pub attn_flops_per_sample: f64,
    /// Forward MoE dispatch/combine einsum FLOPs per sample (low-efficiency batched matmuls).
    pub dispatch_flops_per_sample: f64,
    /// Forward memory-bound traffic per sample (norms, activations, dropout,
    /// residuals, softmax, cross-entropy over the vocabulary), bytes.
    pub mem_bytes_per_sample: f64,
    /// Of `mem_bytes_per_sample`: the part every tensor-parallel rank repeats
    /// in full (layer norms, residual adds and dropouts on the unsplit
    /// hidden state, outside the column/row-parallel blocks).
    pub mem_bytes_replicated_per_sample: f64,
    /// Rows of the typical GEMM per sample (tokens; output pixels for CNNs).
    pub gemm_rows_per_sample: f64,
    /// Smallest typical GEMM dimension besides the rows (hidden size, channels).
    pub gemm_width: f64,
    /// Forward kernels per layer (launch floor).
    pub kernels_per_layer: f64,
    /// Layers a pipeline can split.
    pub pipeline_layers: u32,
    /// Of the pipeline layers, the last ones that are decoder layers with
    /// cross-attention (encoder-decoder models; 0 otherwise).
    pub decoder_layers: u32,
    /// Byte-weighted mean share of the backward pass still to run when a
    /// synchronised gradient becomes ready: ½ when parameters are spread
    /// evenly with the work (a transformer's layers), near 1 when most bytes
    /// sit in the last layers, whose backward runs first (a CNN), 0 when all
    /// are ready only at the end. Sets how much of the gradient sync
    /// overlapping backward can hide.
    pub grad_ready_share: f64,
    /// Extra forward FLOPs per sample of one decoder layer (its
    /// cross-attention) over an encoder layer.
    pub cross_flops_per_sample_layer: f64,
    /// Parameters of the largest layer (ZeRO-3 gather buffer).
    pub max_layer_params: f64,
    /// Stored activation bytes per sample per layer not split by TP.
    pub act_fixed_per_sample_layer: f64,
    /// Stored activation bytes per sample per layer split by TP.
    pub act_tp_per_sample_layer: f64,
    /// Bytes per sample per layer kept with activation checkpointing.
    pub ckpt_per_sample_layer: f64,
    /// Bytes per sample crossing a pipeline-stage boundary (and per TP all-reduce).
    pub boundary_bytes_per_sample: f64,
    /// Extra activation bytes per sample once per model (logits, loss buffers, stem).
    pub extra_act_per_sample: f64,
    /// Largest useful tensor-parallel degree (1 for CNNs and generic models).
    pub max_tp: u32,
    /// MoE: parameters of all experts (sharded over the data-parallel group:
    /// expert parallelism), 0 for dense models.
    pub expert_params: f64,
    /// MoE: experts per expert layer.
    pub experts: u32,
    /// MoE: bytes per sample one all-to-all moves, summed over expert layers
    /// (tokens × top-k × capacity factor × hidden).
    pub alltoall_bytes_per_sample: f64,
    /// Training precision.
    pub precision: Precision,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Recomputation policy.
    pub recompute: Recompute,
    /// Runtime.
    pub runtime: Runtime,
    /// The model's explicit setting of gradient-sync overlap (None: the runtime's default).
    pub grad_overlap: Option<bool>,
    /// ZeRO-Offload: optimizer states and step on the host.
    pub offload: bool,
    /// Samples per micro-batch fixed by the training script (None: chosen by the plan search).
    pub micro_batch: Option<u32>,
    /// Variable-length samples padded per micro-batch (None: fixed length).
    pub sample_len: Option<SampleLengths>,
    /// Longest sample in tokens, where samples are cut (0: not a token model).
    pub seq_len: u32,
}

impl ModelCost {
    /// Whether gradient sync overlaps backward in a plan at ZeRO stage `zero_stage`.
    pub fn overlaps_grad_sync(&self, zero_stage: u8) -> bool {
        self.grad_overlap.unwrap_or_else(|| self.runtime.grad_overlap(zero_stage))
    }
}

impl ModelSpec {
    /// Total parameter count derived from the architecture.
    pub fn params(&self) -> f64 {
        self.cost().params
    }

    /// Forward FLOPs per sample.
    pub fn fwd_flops_per_sample(&self) -> f64 {
        self.cost().fwd_flops_per_sample
    }

    /// Whether attention scores are materialised (no flash kernel).
    pub fn materialised_attention(&self) -> bool {
        self.attention.score_passes(self.runtime) > 0.0
    }

    /// A stable fingerprint of every field (for memoization keys).
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.name.hash(&mut h);
        self.family.hash(&mut h);
        for v in [
            self.layers, self.hidden, self.heads, self.seq_len, self.vocab, self.ffn_hidden, self.experts,
            self.top_k, self.depth, self.width, self.width_factor, self.image_size, self.expert_interval, self.expert_group_size,
            self.decoder_layers,
            self.activation_kernels,
        ] {
            v.hash(&mut h);
        }
        self.gated_ffn.hash(&mut h);
        self.channels_last.hash(&mut h);
        self.cudnn_benchmark.hash(&mut h);
        self.precision.hash(&mut h);
        self.optimizer.hash(&mut h);
        self.recompute.hash(&mut h);
        self.runtime.hash(&mut h);
        self.attention.hash(&mut h);
        self.grad_overlap.hash(&mut h);
        self.offload.hash(&mut h);
        self.micro_batch.hash(&mut h);
        self.capacity_factor.to_bits().hash(&mut h);
        for o in [self.params_override, self.fwd_flops_override, self.act_bytes_override, self.grad_ready_override] {
            o.map(f64::to_bits).hash(&mut h);
        }
        self.sample_len.map(|l| (l.mean.to_bits(), l.sd.to_bits())).hash(&mut h);
        h.finish()
    }

    /// Derives the estimator's quantities from the architecture.
    pub fn cost(&self) -> ModelCost {
        let b = self.precision.value_bytes();
        let mut c = match self.family {
            ModelFamily::Gpt | ModelFamily::Bert | ModelFamily::Moe => self.transformer_cost(b),
            ModelFamily::WideResnet => self.resnet_cost(b),
            ModelFamily::Generic => self.generic_cost(b),
        };
        c.precision = self.precision;
        c.optimizer = self.optimizer;
        c.recompute = self.recompute;
        c.runtime = self.runtime;
        c.grad_overlap = self.grad_overlap;
        c.offload = self.offload;
        c.micro_batch = self.micro_batch;
        c.sample_len = self.sample_len;
        c.seq_len = self.seq_len;
        c
    }

    fn blank_cost(&self) -> ModelCost {
        ModelCost {
            params: 0.0,
            active_params: 0.0,
            fwd_flops_per_sample: 0.0,
            gemm_flops_per_sample: 0.0,
            head_flops_per_sample: 0.0,
            attn_flops_per_sample: 0.0,
            dispatch_flops_per_sample: 0.0,
            mem_bytes_per_sample: 0.0,
            mem_bytes_replicated_per_sample: 0.0,
            gemm_rows_per_sample: 1.0,
            gemm_width: 1.0,
            kernels_per_layer: 10.0,
            pipeline_layers: 1,
            decoder_layers: 0,
            // Unknown structure: parameters as spread as the work, unless the
            // description says otherwise.
            grad_ready_share: self.grad_ready_override.unwrap_or(0.5),
            cross_flops_per_sample_layer: 0.0,
            max_layer_params: 0.0,
            act_fixed_per_sample_layer: 0.0,
            act_tp_per_sample_layer: 0.0,
            ckpt_per_sample_layer: 0.0,
            boundary_bytes_per_sample: 0.0,
            extra_act_per_sample: 0.0,
            max_tp: 1,
            expert_params: 0.0,
            experts: 0,
            alltoall_bytes_per_sample: 0.0,
            precision: self.precision,
            optimizer: self.optimizer,
            recompute: self.recompute,
            runtime: self.runtime,
            grad_overlap: None,
            offload: false,
            micro_batch: None,
            sample_len: None,
            seq_len: 0,
        }
    }

    fn generic_cost(&self, b: f64) -> ModelCost {
        let params = self.params_override.unwrap_or(0.0);
        let fwd = self.fwd_flops_override.unwrap_or(0.0);
        let layers = self.layers.max(1);
        let l = layers as f64;
        let act = self.act_bytes_override.unwrap_or(fwd / 80.0) * b / 4.0;
        ModelCost {
            params,
            active_params: params,
            fwd_flops_per_sample: fwd,
            gemm_flops_per_sample: fwd,
            // No op-level description: memory-bound ops are unknown (the
            // activation size is a memory figure, not traffic); calibration
            // absorbs them.
            mem_bytes_per_sample: 0.0,
            // Rows of the matmuls per sample: each weight does one
            // multiply-add per output position or token, so FLOPs = 2 ×
            // weights × positions (embedding weights do none, which only
            // lowers the figure). Without both figures, a small GEMM (an
            // LSTM step, a small convolution). The width stays unknown.
            gemm_rows_per_sample: generic_rows_per_sample(params, fwd),
            gemm_width: 256.0,
            kernels_per_layer: 12.0,
            pipeline_layers: layers,
            max_layer_params: params / l,
            act_fixed_per_sample_layer: act / l,
            ckpt_per_sample_layer: act / l / 4.0,
            boundary_bytes_per_sample: act / l / 10.0,
            ..self.blank_cost()
        }
    }

    fn transformer_cost(&self, b: f64) -> ModelCost {
        let h = self.hidden as f64;
        let s = self.seq_len as f64;
        let l = self.layers as f64;
        let v = self.vocab as f64;
        let heads = self.heads.max(1) as f64;
        let f = if self.ffn_hidden == 0 { 4.0 * h } else { self.ffn_hidden as f64 };
        let mats = if self.gated_ffn { 3.0 } else { 2.0 };
        let ffn = mats * h * f;
        let attn = 4.0 * h * h;
        let moe = self.family == ModelFamily::Moe;
        let (experts, k) = if moe { (self.experts.max(1) as f64, self.top_k.max(1) as f64) } else { (1.0, 1.0) };
        let interval = self.expert_interval.max(1) as f64;
        // Expert layers: every `interval`-th layer of a MoE model.
        let moe_layers = if moe { (l / interval).floor().max(1.0) } else { 0.0 };
        let dense_layers = l - moe_layers;
        let cf = if self.capacity_factor > 0.0 { self.capacity_factor } else { 1.0 };
        let group = if self.expert_group_size > 0 { self.expert_group_size as f64 } else { s };
        let norms = 4.0 * h;
        // Decoder layers of an encoder-decoder model add a cross-attention
        // block (its four projections and a norm) over the encoder's output.
        let xl = self.decoder_layers.min(self.layers) as f64;
        let cross = xl * (attn + 2.0 * h);
        let params = l * (attn + norms) + dense_layers * ffn + moe_layers * (experts * ffn + h * experts) + cross + v * h + s * h;
        let active_params = l * (attn + norms) + dense_layers * ffn + moe_layers * k * ffn + cross + v * h + s * h;
        // Per token, forward: 2 FLOPs per active weight (experts process
        // capacity-padded slots: × capacity factor), attention scores and
        // values (2 · 2·s·h per layer), output projection onto the vocabulary.
        let gemm_tok = 2.0 * ((l + xl) * attn + dense_layers * ffn + moe_layers * (k * cf * ffn + h * experts)) + 2.0 * v * h;
        let attn_tok = 4.0 * (l + xl) * s * h;
        // GShard dispatch and combine einsums: 2 · E · C · h each per token, C = k · cf · group / E.
        let dispatch_tok = moe_layers * 2.0 * 2.0 * k * cf * group * h;
        // Memory-bound traffic per token: per layer two norms, two residual
        // adds, three dropouts, bias/activation over the FFN width (~18 h + 2 f
        // values), materialised attention scores (`Attention::score_passes`
        // over heads · s values: 4 fused, ~7.8 eager, none under a flash
        // kernel), and the cross-entropy over the vocabulary (logits, fp32
        // softmax, gradient: ~b + 12 bytes).
        let materialised = self.materialised_attention();
        let attn_scores = self.attention.score_passes(self.runtime) * heads * s * b;
        // A cross-attention block adds a norm, a residual add and a dropout (~6 h).
        // An activation run as n separate element-wise kernels passes over the
        // FFN width n times, each kernel reading ~1.25 values and writing one
        // (gelu_new's 8 kernels: 10 reads, 8 writes), where a fused one reads
        // and writes once; autograd keeps about one intermediate per two of
        // those kernels for backward.
        let unfused = self.activation_kernels.max(1) as f64 - 1.0;
        let act_fn = f * k.min(2.0) * b * (2.0 + 2.25 * unfused);
        let mem_tok = l * ((18.0 * h) * b + act_fn + attn_scores) + xl * (6.0 * h * b + attn_scores) + v * (b + 12.0);
        // Korthikanti et al. per-token activation bytes at fp16: 10h unsplit,
        // 24h split by TP (8h attention, 16h MLP scaled by FFN width and active
        // experts), plus 5·heads·s for materialised attention scores.
        let scale = b / 2.0;
        let ffn_scale = f / (4.0 * h) * k * if self.gated_ffn { 1.5 } else { 1.0 };
        let max_tp = (0..=6).map(|e| 1u32 << e).filter(|t| self.heads.max(1) % t == 0).max().unwrap_or(1);
        // Largest layer gathered under ZeRO-3: experts are sharded (expert
        // parallel), never gathered, so a dense layer.
        let layer = attn + norms + ffn + if xl > 0.0 { attn + 2.0 * h } else { 0.0 };
        // Per-layer figures are averages over the layers; `xf` of them carry
        // a cross-attention block (its attention activations, about half of
        // a layer's unsplit ones, eight more kernels) and, past a pipeline
        // stage boundary, the encoder's output beside the hidden state.
        let xf = xl / l.max(1.0);
        let scores = if materialised { 5.0 * heads * s * s * scale } else { 0.0 };
        // Backward runs the head, then the layers from the last; each
        // layer's weights are ready once its backward is done; the (tied)
        // embedding and the position table only at the end. Experts' weights
        // are not synchronised across data-parallel ranks.
        let grad_ready_share = {
            let fwd = gemm_tok + attn_tok + dispatch_tok;
            let head = 2.0 * v * h;
            let layer_work = (fwd - head) / l.max(1.0);
            let synced_layer = (attn + norms) + (dense_layers * ffn + moe_layers * h * experts + cross) / l.max(1.0);
            // Mean over the layers of the backward left after layer i
            // (i = 1 is the last layer): 1 − (head + i · work) / total.
            let left = 1.0 - (head + layer_work * (l.max(1.0) + 1.0) / 2.0) / fwd.max(1e-30);
            let synced = l * synced_layer + v * h + s * h;
            if synced > 0.0 { (l * synced_layer * left.max(0.0) / synced).clamp(0.0, 1.0) } else { 0.5 }
        };
        ModelCost {
            params,
            active_params,
            fwd_flops_per_sample: (gemm_tok + attn_tok + dispatch_tok) * s,
            gemm_flops_per_sample: gemm_tok * s,
            head_flops_per_sample: 2.0 * v * h * s,
            attn_flops_per_sample: attn_tok * s,
            dispatch_flops_per_sample: dispatch_tok * s,
            mem_bytes_per_sample: mem_tok * s,
            mem_bytes_replicated_per_sample: (l * 18.0 + xl * 6.0) * h * b * s,
            gemm_rows_per_sample: s,
            gemm_width: h.min(f),
            kernels_per_layer: if moe { 30.0 } else { 20.0 } + 8.0 * xf,
            pipeline_layers: self.layers.max(1),
            decoder_layers: xl as u32,
            grad_ready_share,
            cross_flops_per_sample_layer: (2.0 * attn + 4.0 * s * h) * s,
            max_layer_params: layer,
            act_fixed_per_sample_layer: s * h * (10.0 + 5.0 * xf) * scale,
            act_tp_per_sample_layer: s * h * (8.0 * (1.0 + xf) + 16.0 * ffn_scale) * scale + scores * (1.0 + xf) + s * f * k * b * unfused / 2.0,
            ckpt_per_sample_layer: s * h * b,
            boundary_bytes_per_sample: s * h * b * (1.0 + xf),
            // Logits, their fp32 softmax and its gradient.
            extra_act_per_sample: s * v * (b + 8.0),
            max_tp,
            expert_params: moe_layers * experts * ffn,
            experts: if moe { self.experts } else { 0 },
            alltoall_bytes_per_sample: moe_layers * k * cf * s * h * b,
            ..self.blank_cost()
        }
    }

    fn resnet_cost(&self, b: f64) -> ModelCost {
        // Basic blocks (two 3×3 convolutions) at depth 18 and 34, bottlenecks
        // (1×1, 3×3, 1×1 with 4× expansion) from 50 up.
        let (blocks, bottleneck): (&[u32], bool) = match self.depth {
            18 => (&[2, 2, 2, 2], false),
            34 => (&[3, 4, 6, 3], false),
            101 => (&[3, 4, 23, 3], true),
            152 => (&[3, 8, 36, 3], true),
            _ => (&[3, 4, 6, 3], true),
        };
        let w = self.width.max(1) as f64;
        let k = self.width_factor.max(1) as f64;
        let img = if self.image_size == 0 { 224.0 } else { self.image_size as f64 };
        let classes = if self.vocab == 0 { 1000.0 } else { self.vocab as f64 };
        // ImageNet stem: a 7×7 stride-2 convolution and a max-pool, stages at
        // img/4 … img/32. CIFAR-sized inputs (under 64 pixels): one 3×3
        // convolution at full resolution, stages at img … img/8.
        // Stem outputs kept for backward: convolution and batch norm, and the
        // max-pool's on the ImageNet stem.
        let (stem, stem_side, first_side, stem_outputs) = if img < 64.0 { (3.0 * w * 9.0, img, img, 2.0) } else { (3.0 * w * 49.0, img / 2.0, img / 4.0, 3.0) };
        let mut params = stem;
        let mut flops = 2.0 * stem * stem_side.powi(2);
        let stem_act = stem_outputs * w * stem_side.powi(2);
        let mut act = 0.0; // stored activation elements of all blocks
        let mut boundary = 0.0;
        let mut max_layer = 0.0f64;
        let mut inc = w;
        let mut per_block: Vec<(f64, f64)> = Vec::new(); // (parameters, forward FLOPs)
        for (i, &n) in blocks.iter().enumerate() {
            let scale = 2f64.powi(i as i32);
            let inner = w * scale * k;
            let out = if bottleneck { 4.0 * w * scale } else { inner };
            let sp = (first_side / scale).max(1.0).powi(2);
            for j in 0..n {
                let mut p = if bottleneck { inc * inner + 9.0 * inner * inner + inner * out } else { 9.0 * inc * inner + 9.0 * inner * out };
                // Projection shortcut where the shape changes.
                if j == 0 && (inc != out || i > 0) {
                    p += inc * out;
                }
                let block_flops = 2.0 * p * sp;
                params += p;
                flops += block_flops;
                per_block.push((p, block_flops));
                // conv and batch-norm outputs of the convolutions (the ReLU
                // runs in place on the batch-norm output).
                act += 2.0 * (if bottleneck { 2.0 * inner } else { inner } + out) * sp;
                boundary += out * sp;
                max_layer = max_layer.max(p);
                inc = out;
            }
        }
        params += inc * classes;
        flops += 2.0 * inc * classes;
        // Backward runs the classifier, then the blocks from the last, the
        // stem at the end: the wide late stages, which hold most parameters
        // and little work, have their gradients ready early.
        let grad_ready_share = {
            let mut done = 2.0 * inc * classes;
            let mut weighted = inc * classes * (1.0 - done / flops);
            for &(p, f) in per_block.iter().rev() {
                done += f;
                weighted += p * (1.0 - done / flops).max(0.0);
            }
            (weighted / params).clamp(0.0, 1.0)
        };
        let nb = per_block.len().max(1) as f64;
        ModelCost {
            params,
            active_params: params,
            fwd_flops_per_sample: flops,
            gemm_flops_per_sample: flops,
            // Batch-norm and ReLU read and write every stored activation.
            mem_bytes_per_sample: (2.0 * act + 2.0 * stem_act) * b,
            // Output pixels of the last stage per sample (the smallest GEMM rows).
            gemm_rows_per_sample: (first_side / 8.0).max(1.0).powi(2),
            // Reduction dimension of the 3×3 convolutions' implicit GEMM.
            gemm_width: 9.0 * w * k,
            kernels_per_layer: if bottleneck { 12.0 } else { 8.0 },
            pipeline_layers: per_block.len() as u32,
            max_layer_params: max_layer,
            act_fixed_per_sample_layer: act * b / nb,
            ckpt_per_sample_layer: boundary * b / nb,
            boundary_bytes_per_sample: boundary * b / nb,
            extra_act_per_sample: stem_act * b,
            grad_ready_share,
            ..self.blank_cost()
        }
    }
}

/// One model table in TOML (catalog `[[model]]` entry or a user file).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelToml {
    name: Option<String>,
    #[serde(default)]
    aliases: Vec<String>,
    family: ModelFamily,
    layers: Option<u32>,
    hidden: Option<u32>,
    heads: Option<u32>,
    seq_len: Option<u32>,
    vocab: Option<u32>,
    ffn_hidden: Option<u32>,
    #[serde(default)]
    gated_ffn: bool,
    experts: Option<u32>,
    top_k: Option<u32>,
    depth: Option<u32>,
    width: Option<u32>,
    width_factor: Option<u32>,
    image_size: Option<u32>,
    channels_last: Option<bool>,
    cudnn_benchmark: Option<bool>,
    #[serde(default)]
    precision: Precision,
    #[serde(default)]
    optimizer: Optimizer,
    #[serde(default)]
    recompute: Recompute,
    #[serde(default)]
    runtime: Runtime,
    grad_overlap: Option<bool>,
    #[serde(default)]
    offload: bool,
    micro_batch: Option<u32>,
    expert_interval: Option<u32>,
    capacity_factor: Option<f64>,
    expert_group_size: Option<u32>,
    decoder_layers: Option<u32>,
    activation_kernels: Option<u32>,
    #[serde(default)]
    attention: Attention,
    params: Option<f64>,
    fwd_flops_per_sample: Option<f64>,
    act_bytes_per_sample: Option<f64>,
    grad_ready_share: Option<f64>,
    sample_len_mean: Option<f64>,
    sample_len_sd: Option<f64>,
}

impl ModelToml {
    /// `sample_len_mean` and `sample_len_sd`: both or neither, a positive
    /// mean within `seq_len`, a deviation from 0 to 4 means, token models only.
    fn sample_lengths(&self) -> Result<Option<SampleLengths>, String> {
        let (mean, sd) = match (self.sample_len_mean, self.sample_len_sd) {
            (None, None) => return Ok(None),
            (Some(m), Some(s)) => (m, s),
            (Some(_), None) => return Err("field 'sample_len_mean' needs 'sample_len_sd' (the standard deviation of tokens per sample)".into()),
            (None, Some(_)) => return Err("field 'sample_len_sd' needs 'sample_len_mean' (the mean tokens per sample)".into()),
        };
        if self.family == ModelFamily::WideResnet {
            return Err("fields 'sample_len_mean' and 'sample_len_sd' describe token sequences; a wide_resnet's images all have one size".into());
        }
        if !(mean.is_finite() && mean > 0.0) {
            return Err(format!("field 'sample_len_mean' must be a positive number of tokens, got {mean}"));
        }
        if let Some(cap) = self.seq_len.filter(|&c| c > 0 && mean > f64::from(c)) {
            return Err(format!("field 'sample_len_mean' ({mean}) must be at most 'seq_len' ({cap}), the longest sample"));
        }
        if !(sd.is_finite() && (0.0..=4.0 * mean).contains(&sd)) {
            return Err(format!("field 'sample_len_sd' must be 0 to 4 x 'sample_len_mean', got {sd}"));
        }
        Ok(Some(SampleLengths { mean, sd }))
    }

    /// Validates and converts; errors name the field and the table's line.
    fn into_spec(self, default_name: &str, origin: &str, line: usize) -> Result<(ModelSpec, Vec<String>), CoreError> {
        let name = self.name.clone().unwrap_or_else(|| default_name.to_string());
        let err = |msg: String| CoreError::File { path: origin.to_string(), line: Some(line), msg };
        let need = |v: Option<u32>, field: &str| -> Result<u32, CoreError> {
            match v {
                Some(x) if x > 0 => Ok(x),
                Some(_) => Err(err(format!("model '{name}': field '{field}' must be positive"))),
                None => Err(err(format!("model '{name}' ({:?}): missing field '{field}'", self.family))),
            }
        };
        let pos = |v: Option<f64>, field: &str| -> Result<Option<f64>, CoreError> {
            match v {
                Some(x) if !(x.is_finite() && x > 0.0) => {
                    Err(err(format!("model '{name}': field '{field}' must be a positive number, got {x}")))
                }
                o => Ok(o),
            }
        };
        if name.trim().is_empty() {
            return Err(err("model name is empty".into()));
        }
        let mut spec = ModelSpec {
            name: name.clone(),
            family: self.family,
            layers: 0,
            hidden: 0,
            heads: 0,
            seq_len: 0,
            vocab: 0,
            ffn_hidden: self.ffn_hidden.unwrap_or(0),
            gated_ffn: self.gated_ffn,
            experts: 0,
            top_k: 0,
            depth: 0,
            width: 0,
            width_factor: 0,
            image_size: 0,
            channels_last: false,
            cudnn_benchmark: false,
            precision: self.precision,
            optimizer: self.optimizer,
            recompute: self.recompute,
            runtime: self.runtime,
            grad_overlap: self.grad_overlap,
            offload: self.offload,
            micro_batch: match self.micro_batch {
                Some(0) => return Err(err(format!("model '{name}': field 'micro_batch' must be positive"))),
                m => m,
            },
            expert_interval: 0,
            capacity_factor: 0.0,
            expert_group_size: 0,
            decoder_layers: 0,
            activation_kernels: 0,
            attention: self.attention,
            params_override: None,
            fwd_flops_override: None,
            act_bytes_override: None,
            grad_ready_override: None,
            sample_len: None,
        };
        for (field, set) in [("channels_last", self.channels_last.is_some()), ("cudnn_benchmark", self.cudnn_benchmark.is_some())] {
            if set && self.family != ModelFamily::WideResnet {
                return Err(err(format!("model '{name}': field '{field}' needs family = \"wide_resnet\"")));
            }
        }
        spec.sample_len = self.sample_lengths().map_err(|m| err(format!("model '{name}': {m}")))?;
        if self.grad_ready_share.is_some() && self.family != ModelFamily::Generic {
            return Err(err(format!("model '{name}': field 'grad_ready_share' needs family = \"generic\" (the others derive it)")));
        }
        match self.family {
            ModelFamily::Gpt | ModelFamily::Bert | ModelFamily::Moe => {
                spec.layers = need(self.layers, "layers")?;
                spec.hidden = need(self.hidden, "hidden")?;
                spec.heads = need(self.heads, "heads")?;
                spec.seq_len = need(self.seq_len, "seq_len")?;
                spec.vocab = self.vocab.unwrap_or(0);
                spec.decoder_layers = self.decoder_layers.unwrap_or(0);
                spec.activation_kernels = match self.activation_kernels {
                    Some(n) if !(1..=MAX_ACTIVATION_KERNELS).contains(&n) => {
                        return Err(err(format!("model '{name}': field 'activation_kernels' must be 1 to {MAX_ACTIVATION_KERNELS}, got {n}")));
                    }
                    n => n.unwrap_or(0),
                };
                if spec.decoder_layers >= spec.layers && spec.decoder_layers > 0 {
                    return Err(err(format!(
                        "model '{name}': field 'decoder_layers' ({}) must be less than 'layers' ({}): the rest are the encoder's",
                        spec.decoder_layers, spec.layers
                    )));
                }
                if spec.hidden % spec.heads != 0 {
                    return Err(err(format!(
                        "model '{name}': field 'heads' ({}) must divide 'hidden' ({})",
                        spec.heads, spec.hidden
                    )));
                }
                if self.family == ModelFamily::Moe {
                    spec.experts = need(self.experts, "experts")?;
                    spec.top_k = self.top_k.unwrap_or(2).clamp(1, spec.experts);
                    spec.expert_interval = need(self.expert_interval.or(Some(1)), "expert_interval")?;
                    if spec.expert_interval > spec.layers {
                        return Err(err(format!(
                            "model '{name}': field 'expert_interval' ({}) must be at most 'layers' ({})",
                            spec.expert_interval, spec.layers
                        )));
                    }
                    let cf = pos(self.capacity_factor, "capacity_factor")?.unwrap_or(1.0);
                    if cf > 16.0 {
                        return Err(err(format!("model '{name}': field 'capacity_factor' must be at most 16, got {cf}")));
                    }
                    spec.capacity_factor = cf;
                    spec.expert_group_size = self.expert_group_size.unwrap_or(0);
                } else if self.expert_interval.is_some() || self.capacity_factor.is_some() || self.expert_group_size.is_some() {
                    return Err(err(format!(
                        "model '{name}': fields 'expert_interval', 'capacity_factor' and 'expert_group_size' need family = \"moe\""
                    )));
                }
            }
            _ if self.decoder_layers.is_some() || self.activation_kernels.is_some() || self.attention != Attention::Auto => {
                let field = if self.decoder_layers.is_some() {
                    "decoder_layers"
                } else if self.activation_kernels.is_some() {
                    "activation_kernels"
                } else {
                    "attention"
                };
                return Err(err(format!("model '{name}': field '{field}' needs family = \"gpt\", \"bert\" or \"moe\"")));
            }
            ModelFamily::WideResnet => {
                spec.depth = need(self.depth.or(Some(50)), "depth")?;
                if ![18, 34, 50, 101, 152].contains(&spec.depth) {
                    return Err(err(format!("model '{name}': field 'depth' must be 18, 34, 50, 101 or 152, got {}", spec.depth)));
                }
                spec.vocab = self.vocab.unwrap_or(0);
                spec.width = need(self.width, "width")?;
                spec.width_factor = need(self.width_factor.or(Some(1)), "width_factor")?;
                spec.image_size = need(self.image_size.or(Some(224)), "image_size")?;
                spec.channels_last = self.channels_last.unwrap_or(false);
                spec.cudnn_benchmark = self.cudnn_benchmark.unwrap_or(false);
            }
            ModelFamily::Generic => {
                spec.params_override = Some(pos(self.params, "params")?.ok_or_else(|| err(format!("model '{name}' (Generic): missing field 'params'")))?);
                spec.fwd_flops_override = Some(
                    pos(self.fwd_flops_per_sample, "fwd_flops_per_sample")?
                        .ok_or_else(|| err(format!("model '{name}' (Generic): missing field 'fwd_flops_per_sample'")))?,
                );
                spec.act_bytes_override = pos(self.act_bytes_per_sample, "act_bytes_per_sample")?;
                spec.grad_ready_override = match self.grad_ready_share {
                    Some(x) if !(0.0..=1.0).contains(&x) => {
                        return Err(err(format!("model '{name}': field 'grad_ready_share' must be 0 to 1, got {x}")));
                    }
                    o => o,
                };
                spec.layers = self.layers.unwrap_or(1).max(1);
            }
        }
        check_size_bounds(&spec).map_err(err)?;
        Ok((spec, self.aliases))
    }
}

/// Largest accepted value of any architecture size field (layers, hidden,
/// heads, sequence length, vocabulary, FFN width, experts, ResNet widths,
/// image side): far above any trained model, low enough that no derived
/// count overflows.
pub const MAX_MODEL_DIM: u32 = 1 << 24;
/// Most element-wise kernels an activation may be described as running.
pub const MAX_ACTIVATION_KERNELS: u32 = 64;
/// Largest accepted explicit parameter count, FLOPs or activation bytes per sample.
pub const MAX_MODEL_QUANTITY: f64 = 1e21;

/// Matmul rows per sample of a model described only by its parameter and
/// FLOP counts: forward FLOPs over two per weight (its reuse per sample),
/// at least one; 32 (a small GEMM) when either figure is missing.
fn generic_rows_per_sample(params: f64, fwd_flops: f64) -> f64 {
    if params > 0.0 && fwd_flops > 0.0 {
        (fwd_flops / (2.0 * params)).max(1.0)
    } else {
        32.0
    }
}

fn check_size_bounds(s: &ModelSpec) -> Result<(), String> {
    let dims = [
        ("layers", s.layers),
        ("hidden", s.hidden),
        ("heads", s.heads),
        ("seq_len", s.seq_len),
        ("vocab", s.vocab),
        ("ffn_hidden", s.ffn_hidden),
        ("experts", s.experts),
        ("width", s.width),
        ("width_factor", s.width_factor),
        ("image_size", s.image_size),
        ("expert_group_size", s.expert_group_size),
        ("decoder_layers", s.decoder_layers),
    ];
    for (k, v) in dims {
        if v > MAX_MODEL_DIM {
            return Err(format!("model '{}': field '{k}' = {v} is out of range (at most {MAX_MODEL_DIM})", s.name));
        }
    }
    for (k, v) in [("params", s.params_override), ("fwd_flops_per_sample", s.fwd_flops_override), ("act_bytes_per_sample", s.act_bytes_override)] {
        if v.is_some_and(|x| x > MAX_MODEL_QUANTITY) {
            return Err(format!("model '{}': field '{k}' is out of range (at most {MAX_MODEL_QUANTITY:e})", s.name));
        }
    }
    if s.name.len() > 128 || s.name.chars().any(char::is_control) {
        return Err("model name: at most 128 characters, no control characters".into());
    }
    Ok(())
}

/// True when `--dl-model` names a user model file (ends in `.toml`) rather than a catalog model.
pub fn is_model_file(name_or_path: &str) -> bool {
    name_or_path.trim().to_ascii_lowercase().ends_with(".toml")
}

/// Largest model TOML file the SPANK plugin reads at submit.
pub const MAX_MODEL_FILE_BYTES: u64 = 64 * 1024;
/// Job-environment key carrying a user model's validated description from
/// the submit host to slurmctld and the nodes (see [`model_to_wire`]).
pub const MODEL_SPEC_ENV_KEY: &str = "CELLSCHED_DL_MODEL_SPEC";

/// Reads and validates a user model TOML file of at most
/// [`MAX_MODEL_FILE_BYTES`] (done by the SPANK plugin as the submitting user).
pub fn load_model_file_limited(path: &Path) -> Result<ModelSpec, CoreError> {
    use std::io::Read;
    let origin = path.display().to_string();
    let ioe = |e: std::io::Error| CoreError::File { path: origin.clone(), line: None, msg: format!("cannot read model file: {e}") };
    let f = std::fs::File::open(path).map_err(ioe)?;
    let mut bytes = Vec::new();
    f.take(MAX_MODEL_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(ioe)?;
    if bytes.len() as u64 > MAX_MODEL_FILE_BYTES {
        return Err(CoreError::File { path: origin, line: None, msg: format!("model file is larger than {MAX_MODEL_FILE_BYTES} bytes") });
    }
    let text = String::from_utf8(bytes).map_err(|_| CoreError::File { path: origin.clone(), line: None, msg: "model file is not UTF-8".into() })?;
    parse_model_toml(&text, &origin, path.file_stem().and_then(|s| s.to_str()).unwrap_or("user_model"))
}

/// One-line canonical form of a model (JSON with the TOML file's keys),
/// passed in the job environment as [`MODEL_SPEC_ENV_KEY`].
pub fn model_to_wire(s: &ModelSpec) -> String {
    let nz = |v: u32| (v > 0).then_some(v);
    let mut wire = serde_json::json!({
        "name": s.name,
        "family": s.family,
        "layers": nz(s.layers),
        "hidden": nz(s.hidden),
        "heads": nz(s.heads),
        "seq_len": nz(s.seq_len),
        "vocab": nz(s.vocab),
        "ffn_hidden": nz(s.ffn_hidden),
        "gated_ffn": s.gated_ffn,
        "experts": nz(s.experts),
        "top_k": nz(s.top_k),
        "depth": nz(s.depth),
        "width": nz(s.width),
        "width_factor": nz(s.width_factor),
        "image_size": nz(s.image_size),
        "channels_last": s.channels_last.then_some(true),
        "cudnn_benchmark": s.cudnn_benchmark.then_some(true),
        "precision": s.precision,
        "optimizer": s.optimizer,
        "recompute": s.recompute,
        "runtime": s.runtime,
        "grad_overlap": s.grad_overlap,
        "offload": s.offload,
        "micro_batch": s.micro_batch,
        "expert_interval": nz(s.expert_interval),
        "capacity_factor": (s.capacity_factor > 0.0).then_some(s.capacity_factor),
        "expert_group_size": nz(s.expert_group_size),
        "decoder_layers": nz(s.decoder_layers),
        "activation_kernels": nz(s.activation_kernels),
        "attention": (s.attention != Attention::Auto).then_some(s.attention),
        "params": s.params_override,
        "fwd_flops_per_sample": s.fwd_flops_override,
        "act_bytes_per_sample": s.act_bytes_override,
        "grad_ready_share": s.grad_ready_override,
        "sample_len_mean": s.sample_len.map(|l| l.mean),
        "sample_len_sd": s.sample_len.map(|l| l.sd),
    });
    // Unset fields are left out, so a receiver built before a field existed
    // (a rolling upgrade) still reads descriptions that do not use it.
    if let Some(fields) = wire.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    wire.to_string()
}

/// Parses and validates [`model_to_wire`]'s form with the same rules as a
/// model TOML file (the receiver never trusts the sender's checks).
pub fn model_from_wire(text: &str) -> Result<ModelSpec, CoreError> {
    let err = |msg: String| CoreError::File { path: MODEL_SPEC_ENV_KEY.into(), line: None, msg };
    if text.len() as u64 > MAX_MODEL_FILE_BYTES {
        return Err(err("too long".into()));
    }
    let m: ModelToml = serde_json::from_str(text).map_err(|e| err(format!("invalid model description: {e}")))?;
    Ok(as_user_model(m.into_spec("user_model", MODEL_SPEC_ENV_KEY, 1)?.0))
}

#[derive(Debug, Deserialize)]
struct CatalogToml {
    #[serde(default)]
    model: Vec<toml::Spanned<ModelToml>>,
}

/// Known models by canonical name, plus aliases.
#[derive(Debug, Clone)]
pub struct ModelCatalog {
    models: BTreeMap<String, ModelSpec>,
    /// lower-case alias or name → canonical name.
    index: BTreeMap<String, String>,
}

impl ModelCatalog {
    /// The built-in catalog.
    pub fn builtin() -> ModelCatalog {
        static BUILTIN: OnceLock<ModelCatalog> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                let mut c = ModelCatalog { models: BTreeMap::new(), index: BTreeMap::new() };
                c.add_models_toml(BUILTIN_TOML, "<builtin models.toml>").expect("built-in model catalog parses");
                c
            })
            .clone()
    }

    /// Adds (or replaces) the `[[model]]` entries of `toml_text`; other keys are ignored.
    pub fn add_models_toml(&mut self, toml_text: &str, origin: &str) -> Result<(), CoreError> {
        let doc: CatalogToml = toml::from_str(toml_text).map_err(|e| toml_error(origin, toml_text, &e))?;
        for m in doc.model {
            let line = line_of(toml_text, m.span().start);
            let inner = m.into_inner();
            match inner.name.as_deref() {
                None => return Err(CoreError::File { path: origin.into(), line: Some(line), msg: "[[model]] needs field 'name'".into() }),
                Some(n) if n.contains([':', '@']) => {
                    return Err(CoreError::File {
                        path: origin.into(),
                        line: Some(line),
                        msg: format!("model name '{n}': ':' and '@' are reserved for user models (user:NAME@FINGERPRINT)"),
                    })
                }
                Some(_) => {}
            }
            let (spec, aliases) = inner.into_spec("", origin, line)?;
            self.insert(spec, &aliases);
        }
        Ok(())
    }

    /// Adds a model under its name and aliases.
    pub fn insert(&mut self, spec: ModelSpec, aliases: &[String]) {
        let name = spec.name.clone();
        self.index.insert(name.to_ascii_lowercase(), name.clone());
        for a in aliases {
            self.index.insert(a.to_ascii_lowercase(), name.clone());
        }
        self.models.insert(name, spec);
    }

    /// Canonical name for a name or alias (case-insensitive).
    pub fn canonical_name(&self, name: &str) -> Option<&str> {
        self.index.get(&name.trim().to_ascii_lowercase()).map(String::as_str)
    }

    /// Looks a model up by name or alias; unknown → [`CoreError::Unknown`] with close names.
    pub fn get(&self, name: &str) -> Result<&ModelSpec, CoreError> {
        match self.canonical_name(name) {
            Some(c) => Ok(&self.models[c]),
            None => Err(CoreError::Unknown {
                kind: "model",
                name: name.to_string(),
                suggestions: close_names(&name.trim().to_ascii_lowercase(), self.index.keys().map(String::as_str))
                    .into_iter()
                    .map(|a| self.index[&a].clone())
                    .fold(Vec::new(), |mut v, n| {
                        if !v.contains(&n) {
                            v.push(n)
                        }
                        v
                    }),
            }),
        }
    }

    /// A catalog model, or a user model when `name_or_path` ends in `.toml`.
    pub fn resolve(&self, name_or_path: &str) -> Result<ModelSpec, CoreError> {
        if is_model_file(name_or_path) {
            return load_model_file(Path::new(name_or_path.trim()));
        }
        self.get(name_or_path).cloned()
    }

    /// Canonical model names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }
}

/// Loads a user model from a TOML file with top-level keys (`family`, `layers`, …);
/// the name defaults to the file stem.
pub fn load_model_file(path: &Path) -> Result<ModelSpec, CoreError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CoreError::File { path: origin.clone(), line: None, msg: format!("cannot read model file: {e}") })?;
    parse_model_toml(&text, &origin, path.file_stem().and_then(|s| s.to_str()).unwrap_or("user_model"))
}

/// Parses one user model from TOML text; `origin` names it in errors. The
/// model is named [`user_model_name`]: never a catalog name.
pub fn parse_model_toml(text: &str, origin: &str, default_name: &str) -> Result<ModelSpec, CoreError> {
    let m: ModelToml = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
    Ok(as_user_model(m.into_spec(default_name, origin, 1)?.0))
}

/// Prefix of every user model's name (a model TOML given with `--dl-model`):
/// catalog names cannot contain `:` or `@`, so a user model can never be
/// recorded, calibrated, measured or predicted as a catalog model.
pub const USER_MODEL_PREFIX: &str = "user:";

/// Whether `name` is a user model's name ([`user_model_name`]'s form).
pub fn is_user_model_name(name: &str) -> bool {
    name.starts_with(USER_MODEL_PREFIX)
}

/// The name a user model is known by: `user:<name>@<fingerprint>`, where
/// `<name>` is the name the file gives (its `user:` prefix and `@` suffix
/// removed, characters outside letters, digits and `._+-` dropped, at most
/// 64) and `<fingerprint>` is 12 hex digits of a stable hash (FNV-1a) of
/// the architecture (the wire form without the name). Two files share a
/// name only when they describe the same model under the same name; the
/// job history and the iteration predictor key on it.
pub fn user_model_name(spec: &ModelSpec) -> String {
    let mut given = spec.name.trim();
    while let Some(rest) = given.strip_prefix(USER_MODEL_PREFIX) {
        given = rest;
    }
    let given = given.split('@').next().unwrap_or("");
    let mut base: String = given.chars().filter(|c| c.is_ascii_alphanumeric() || "._+-".contains(*c)).take(64).collect();
    if base.is_empty() {
        base = "model".into();
    }
    let arch = model_to_wire(&ModelSpec { name: String::new(), ..spec.clone() });
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in arch.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{USER_MODEL_PREFIX}{base}@{:012x}", h >> 16)
}

fn as_user_model(mut spec: ModelSpec) -> ModelSpec {
    spec.name = user_model_name(&spec);
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31 item 9: a user model named like a catalog model is recorded
    /// under its own namespaced name, keyed by its architecture; the catalog
    /// refuses the namespace's characters.
    #[test]
    fn user_models_never_take_a_catalog_name() {
        let tiny = "name = 'gpt__1.3B'\nfamily = 'gpt'\nlayers = 2\nhidden = 64\nheads = 2\nseq_len = 16\n";
        let m = parse_model_toml(tiny, "m.toml", "m").unwrap();
        assert!(m.name.starts_with("user:gpt__1.3B@") && m.name.len() == "user:gpt__1.3B@".len() + 12, "{}", m.name);
        assert!(ModelCatalog::builtin().canonical_name(&m.name).is_none());
        assert!(is_user_model_name(&m.name) && !ModelCatalog::builtin().names().any(is_user_model_name));
        // Through the job environment the name is recomputed, not trusted.
        assert_eq!(model_from_wire(&model_to_wire(&m)).unwrap().name, m.name);
        let forged = model_to_wire(&ModelSpec { name: "gpt__1.3B".into(), ..m.clone() });
        assert_eq!(model_from_wire(&forged).unwrap().name, m.name);
        let claimed = model_to_wire(&ModelSpec { name: "user:gpt__1.3B@000000000000".into(), ..m.clone() });
        assert_eq!(model_from_wire(&claimed).unwrap().name, m.name, "a claimed fingerprint is replaced by the real one");
        // Another architecture under the same name is another model.
        let wider = parse_model_toml(&tiny.replace("hidden = 64", "hidden = 128"), "m.toml", "m").unwrap();
        assert_ne!(wider.name, m.name);
        assert!(wider.name.starts_with("user:gpt__1.3B@"));
        // Odd names are cleaned, never empty.
        let odd = parse_model_toml(&tiny.replace("'gpt__1.3B'", "'a b=c;d'"), "m.toml", "m").unwrap();
        assert!(odd.name.starts_with("user:abcd@"), "{}", odd.name);
        let blank = parse_model_toml(&tiny.replace("'gpt__1.3B'", "'@@@'"), "m.toml", "m").unwrap();
        assert!(blank.name.starts_with("user:model@"), "{}", blank.name);
        // A site catalog cannot claim the namespace.
        let mut c = ModelCatalog::builtin();
        let e = c.add_models_toml("[[model]]\nname = 'user:x@1'\nfamily = 'gpt'\nlayers = 2\nhidden = 64\nheads = 2\nseq_len = 16\n", "site.toml").unwrap_err().to_string();
        assert!(e.contains("reserved for user models"), "{e}");
    }

    fn nominal(name: &str) -> f64 {
        let size = name.split("__").nth(1).unwrap();
        let (num, mul) = if let Some(n) = size.strip_suffix('B') { (n, 1e9) } else { (size.strip_suffix('M').unwrap(), 1e6) };
        num.parse::<f64>().unwrap() * mul
    }

    #[test]
    fn sized_models_match_their_nominal_size() {
        let c = ModelCatalog::builtin();
        let mut n = 0;
        for name in c.names().filter(|n| n.contains("__")) {
            let p = c.get(name).unwrap().params();
            let nom = nominal(name);
            assert!((p / nom - 1.0).abs() < 0.2, "{name}: {p:.3e} vs nominal {nom:.3e}");
            n += 1;
        }
        assert_eq!(n, 7 + 7 + 6 + 7);
        let r50 = c.get("ResNet-50").unwrap().cost();
        assert!((r50.params / 25.5e6 - 1.0).abs() < 0.05, "{}", r50.params);
        assert!((r50.fwd_flops_per_sample / 7.7e9 - 1.0).abs() < 0.1);
        let llama = c.get("llama7b").unwrap().params();
        assert!((llama / 6.7e9 - 1.0).abs() < 0.05, "{llama}");
    }

    #[test]
    fn transformer_flops_follow_6pt() {
        let m = ModelCatalog::builtin().resolve("gpt__6.7B").unwrap();
        let c = m.cost();
        let six_pt = 6.0 * c.params * m.seq_len as f64;
        let train = 3.0 * c.fwd_flops_per_sample;
        assert!(train > six_pt && train < 1.25 * six_pt, "{train:e} vs {six_pt:e}");
        let moe = ModelCatalog::builtin().resolve("moe__10B").unwrap().cost();
        assert!(moe.active_params < 0.2 * moe.params);
    }

    #[test]
    fn lookups_aliases_and_suggestions() {
        let c = ModelCatalog::builtin();
        assert_eq!(c.get("GPT__1.3B").unwrap().name, "gpt__1.3B");
        assert_eq!(c.get("bert").unwrap().name, "bert_large");
        assert_eq!(c.get("Recommendation").unwrap().name, "autoencoder_ml20m");
        match c.resolve("gpt__1.4B").unwrap_err() {
            CoreError::Unknown { kind, suggestions, .. } => {
                assert_eq!(kind, "model");
                assert!(suggestions.contains(&"gpt__1.3B".to_string()), "{suggestions:?}");
            }
            e => panic!("{e}"),
        }
        let msg = c.resolve("wide_resnet__7B").unwrap_err().to_string();
        assert!(msg.contains("wide_resnet__"), "{msg}");
    }

    #[test]
    fn user_model_toml() {
        let dir = std::env::temp_dir().join(format!("cs-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("mygpt.toml");
        std::fs::write(&p, "family = 'gpt'\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 1000\n").unwrap();
        let m = ModelCatalog::builtin().resolve(p.to_str().unwrap()).unwrap();
        assert!(m.name.starts_with("user:mygpt@"), "{}", m.name);
        assert!(m.params() > 4.0 * 12.0 * 256.0 * 256.0);
        let cnn = parse_model_toml("name='w'\nfamily='wide_resnet'\ndepth=50\nwidth=64\nwidth_factor=2\n", "x", "x").unwrap();
        assert!((cnn.params() / 68.8e6 - 1.0).abs() < 0.05);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn malformed_model_toml_names_field_and_line() {
        let e = parse_model_toml("family = 'gpt'\nlayers = 4\nhiden = 256\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("m.toml:3") && e.contains("hiden"), "{e}");
        let e = parse_model_toml("family = 'gpt'\nlayers = 4\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("hidden") && e.contains("m.toml:1"), "{e}");
        let e = parse_model_toml("family = 'gpt'\nlayers = -4\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("m.toml:2") && e.contains("layers"), "{e}");
        let e = parse_model_toml("family = 'rnn'\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("m.toml:1") && e.contains("family"), "{e}");
        let e = ModelCatalog::builtin().resolve("/nonexistent/x.toml").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/x.toml"), "{e}");
    }

    #[test]
    fn models_cross_the_wire_unchanged_and_are_revalidated() {
        let c = ModelCatalog::builtin();
        for name in c.names() {
            let m = c.get(name).unwrap().clone();
            let back = model_from_wire(&model_to_wire(&m)).unwrap_or_else(|e| panic!("{name}: {e}"));
            // What crosses the wire is a user's model: it arrives under the user namespace.
            assert_eq!(back, ModelSpec { name: user_model_name(&m), ..m.clone() }, "{name}");
            assert!(!model_to_wire(&m).contains('\n'));
        }
        for bad in [
            r#"{"family":"gpt","layers":0,"hidden":8,"heads":2,"seq_len":4}"#,
            r#"{"family":"gpt","layers":4294967295,"hidden":8,"heads":2,"seq_len":4}"#,
            r#"{"family":"gpt","layers":2,"hidden":8,"heads":3,"seq_len":4}"#,
            r#"{"family":"generic","params":1e300,"fwd_flops_per_sample":1}"#,
            r#"{"family":"gpt","evil":1}"#,
            "not json",
        ] {
            assert!(model_from_wire(bad).is_err(), "{bad}");
        }
    }

    /// The training description (precision, optimizer, recomputation, runtime,
    /// MoE layout) parses, is validated with file and line, and changes the cost.
    #[test]
    fn training_fields_parse_validate_and_matter() {
        let base = "family = 'moe'\nlayers = 16\nhidden = 1024\nheads = 16\nseq_len = 1024\nvocab = 32000\nexperts = 16\n";
        let every = parse_model_toml(base, "m.toml", "m").unwrap();
        let alpa = parse_model_toml(
            &format!("{base}expert_interval = 2\nffn_hidden = 8192\ncapacity_factor = 1.25\nexpert_group_size = 2048\nruntime = 'alpa'\nrecompute = 'full'\noptimizer = 'adafactor'\n"),
            "m.toml",
            "m",
        )
        .unwrap();
        assert_eq!((alpa.expert_interval, alpa.runtime, alpa.recompute, alpa.optimizer), (2, Runtime::Alpa, Recompute::Full, Optimizer::Adafactor));
        let (ce, ca) = (every.cost(), alpa.cost());
        assert!(ca.dispatch_flops_per_sample > 0.0 && !ca.overlaps_grad_sync(0) && ce.overlaps_grad_sync(0));
        assert!(ca.mem_bytes_per_sample > ce.mem_bytes_per_sample, "materialised attention costs memory traffic");
        assert_eq!(model_from_wire(&model_to_wire(&alpa)).unwrap(), alpa);
        let fp32 = parse_model_toml("family='gpt'\nlayers=2\nhidden=64\nheads=2\nseq_len=16\nprecision='fp32'\noptimizer='sgd_momentum'\n", "x", "x").unwrap();
        assert_eq!(fp32.cost().precision.value_bytes(), 4.0);
        for (bad, field, line) in [
            ("family = 'gpt'\nlayers = 2\nhidden = 8\nheads = 2\nseq_len = 4\nexpert_interval = 2\n", "expert_interval", 1),
            (&format!("{base}capacity_factor = 0\n") as &str, "capacity_factor", 1),
            (&format!("{base}expert_interval = 17\n"), "expert_interval", 1),
            (&format!("{base}runtime = 'horovod'\n"), "runtime", 8),
            (&format!("{base}precision = 'fp8'\n"), "precision", 8),
        ] {
            let e = parse_model_toml(bad, "m.toml", "m").unwrap_err().to_string();
            assert!(e.contains(&format!("m.toml:{line}")) && e.contains(field), "{bad}: {e}");
        }
        assert!(model_from_wire(r#"{"family":"moe","layers":2,"hidden":8,"heads":2,"seq_len":4,"experts":2,"capacity_factor":-1}"#).is_err());
    }

    /// Decoder layers of an encoder-decoder model carry a cross-attention
    /// block: its weights are gradients to synchronise, its work is compute;
    /// the field is validated and crosses the wire.
    #[test]
    fn decoder_layers_add_cross_attention() {
        let enc = "family = 'bert'\nlayers = 12\nhidden = 512\nheads = 8\nseq_len = 50\nvocab = 10000\n";
        let plain = parse_model_toml(enc, "m.toml", "m").unwrap();
        let encdec = parse_model_toml(&format!("{enc}decoder_layers = 6\n"), "m.toml", "m").unwrap();
        let (cp, cd) = (plain.cost(), encdec.cost());
        let block = 4.0 * 512.0 * 512.0 + 2.0 * 512.0;
        assert!((cd.params - cp.params - 6.0 * block).abs() < 1.0, "{} vs {}", cd.params, cp.params);
        assert!(cd.fwd_flops_per_sample > cp.fwd_flops_per_sample && cd.act_tp_per_sample_layer > cp.act_tp_per_sample_layer);
        assert!(cd.max_layer_params > cp.max_layer_params);
        assert_eq!(model_from_wire(&model_to_wire(&encdec)).unwrap(), encdec);
        assert_ne!(plain.fingerprint(), encdec.fingerprint(), "memo keys tell them apart");
        assert!(!model_to_wire(&plain).contains("decoder_layers"), "unset fields stay off the wire");
        let builtin = ModelCatalog::builtin().resolve("transformer").unwrap();
        assert_eq!(builtin.decoder_layers, 6);
        assert!((builtin.params() / 49e6 - 1.0).abs() < 0.05, "{}", builtin.params());
        for (bad, field) in [
            (format!("{enc}decoder_layers = 12\n"), "decoder_layers"),
            ("family = 'wide_resnet'\nwidth = 64\ndecoder_layers = 2\n".to_string(), "decoder_layers"),
        ] {
            let e = parse_model_toml(&bad, "m.toml", "m").unwrap_err().to_string();
            assert!(e.contains("m.toml:1") && e.contains(field), "{bad}: {e}");
        }
    }

    /// A generic model may say when its gradients are ready (the catalog's
    /// LSTM language model: its decoder first, its embedding last); the
    /// default is parameters spread with the work; out of range or on a
    /// family that derives it, refused; it travels on the wire.
    #[test]
    fn generic_gradient_readiness() {
        let g = "family = 'generic'\nparams = 14e6\nfwd_flops_per_sample = 0.5e9\n";
        let plain = parse_model_toml(g, "m.toml", "m").unwrap();
        let lstm = parse_model_toml(&format!("{g}grad_ready_share = 0.044\n"), "m.toml", "m").unwrap();
        assert_eq!((plain.cost().grad_ready_share, lstm.cost().grad_ready_share), (0.5, 0.044));
        assert_eq!(ModelCatalog::builtin().resolve("lm").unwrap().cost().grad_ready_share, 0.044);
        assert_eq!(model_from_wire(&model_to_wire(&lstm)).unwrap(), lstm);
        assert_ne!(plain.fingerprint(), lstm.fingerprint());
        for bad in [format!("{g}grad_ready_share = 1.5\n"), "family = 'gpt'\nlayers = 2\nhidden = 64\nheads = 2\nseq_len = 8\ngrad_ready_share = 0.2\n".to_string()] {
            let e = parse_model_toml(&bad, "m.toml", "m").unwrap_err().to_string();
            assert!(e.contains("grad_ready_share"), "{bad}: {e}");
        }
    }

    /// Variable sample lengths: mean and deviation together, a mean within
    /// `seq_len`, token models only; the catalog's Multi30k Transformer has
    /// them; they reach the cost, the wire and the fingerprint.
    #[test]
    fn sample_lengths_are_declared_together_and_travel() {
        let t = "family = 'bert'\nlayers = 12\nhidden = 512\nheads = 8\nseq_len = 50\n";
        let padded = parse_model_toml(&format!("{t}sample_len_mean = 14.9\nsample_len_sd = 4.2\n"), "m.toml", "m").unwrap();
        let fixed = parse_model_toml(t, "m.toml", "m").unwrap();
        assert_eq!(padded.cost().sample_len, Some(SampleLengths { mean: 14.9, sd: 4.2 }));
        assert_eq!(fixed.cost().sample_len, None);
        assert_eq!(model_from_wire(&model_to_wire(&padded)).unwrap(), padded);
        assert!(!model_to_wire(&fixed).contains("sample_len"));
        assert_ne!(padded.fingerprint(), fixed.fingerprint());
        assert!(ModelCatalog::builtin().resolve("transformer").unwrap().sample_len.is_some());
        let cnn = "family = 'wide_resnet'\ndepth = 50\nwidth = 64\nwidth_factor = 2\n";
        for (bad, says) in [
            (format!("{t}sample_len_mean = 14.9\n"), "needs 'sample_len_sd'"),
            (format!("{t}sample_len_sd = 4.2\n"), "needs 'sample_len_mean'"),
            (format!("{t}sample_len_mean = 60\nsample_len_sd = 4\n"), "at most 'seq_len'"),
            (format!("{t}sample_len_mean = 0\nsample_len_sd = 4\n"), "positive"),
            (format!("{t}sample_len_mean = 10\nsample_len_sd = -1\n"), "'sample_len_sd' must be"),
            (format!("{cnn}sample_len_mean = 10\nsample_len_sd = 1\n"), "images"),
        ] {
            let e = parse_model_toml(&bad, "m.toml", "m").unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("m.toml"), "{bad}: {e}");
        }
    }

    /// Attention scores: a flash kernel keeps them out of memory, a fused
    /// softmax passes over them 4 times, eager kernels (scale, mask,
    /// softmax, dropout one by one) about 7.8; `auto` follows the runtime.
    /// Only memory traffic changes; the field travels on the wire and is
    /// refused where there is no attention.
    #[test]
    fn attention_kernels_set_the_score_traffic() {
        let gpt = "family = 'gpt'\nlayers = 12\nhidden = 768\nheads = 12\nseq_len = 1024\nvocab = 50257\n";
        let cost = |extra: &str| parse_model_toml(&format!("{gpt}{extra}"), "m.toml", "m").unwrap();
        let (auto, flash, fused, eager) = (cost(""), cost("attention = 'flash'\n"), cost("attention = 'fused'\n"), cost("attention = 'eager'\n"));
        assert_eq!(auto.cost().mem_bytes_per_sample, flash.cost().mem_bytes_per_sample);
        assert_eq!(cost("runtime = 'alpa'\n").cost().mem_bytes_per_sample, cost("runtime = 'alpa'\nattention = 'fused'\n").cost().mem_bytes_per_sample);
        // Passes × layers × heads × s² values of the precision's width.
        let per_pass = 12.0 * 12.0 * 1024.0 * 1024.0 * auto.precision.value_bytes();
        let extra = |m: &ModelSpec| m.cost().mem_bytes_per_sample - flash.cost().mem_bytes_per_sample;
        assert!((extra(&fused) / per_pass - 4.0).abs() < 1e-9 && (extra(&eager) / per_pass - 7.8).abs() < 1e-9);
        assert_eq!((eager.cost().gemm_flops_per_sample, eager.cost().params), (flash.cost().gemm_flops_per_sample, flash.cost().params));
        assert!(!flash.materialised_attention() && fused.materialised_attention() && eager.materialised_attention());
        assert_eq!(model_from_wire(&model_to_wire(&eager)).unwrap(), eager);
        assert!(!model_to_wire(&auto).contains("attention"), "unset fields stay off the wire");
        assert_ne!(eager.fingerprint(), fused.fingerprint());
        let e = parse_model_toml("family = 'wide_resnet'\nwidth = 64\nattention = 'eager'\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("attention"), "{e}");
        let e = parse_model_toml(&format!("{gpt}attention = 'sparse'\n"), "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("attention") || e.contains("sparse"), "{e}");
    }

    /// An activation run as separate element-wise kernels (Hugging Face
    /// GPT-2's `gelu_new`: 8) passes over the FFN width once per kernel and
    /// keeps intermediates for backward; the GEMMs and parameters do not
    /// change, and one kernel is the fused default.
    #[test]
    fn unfused_activation_adds_memory_traffic_and_activations() {
        let gpt = "family = 'gpt'\nlayers = 12\nhidden = 768\nheads = 12\nseq_len = 1024\nvocab = 50257\n";
        let fused = parse_model_toml(gpt, "m.toml", "m").unwrap();
        let one = parse_model_toml(&format!("{gpt}activation_kernels = 1\n"), "m.toml", "m").unwrap();
        let eager = parse_model_toml(&format!("{gpt}activation_kernels = 8\n"), "m.toml", "m").unwrap();
        let (cf, c1, ce) = (fused.cost(), one.cost(), eager.cost());
        assert_eq!(cf.mem_bytes_per_sample, c1.mem_bytes_per_sample);
        assert_eq!((ce.params, ce.gemm_flops_per_sample), (cf.params, cf.gemm_flops_per_sample));
        // 7 extra kernels of ~2.25 values each over 4h per token and layer.
        let extra = 12.0 * 1024.0 * 4.0 * 768.0 * fused.precision.value_bytes() * 7.0 * 2.25;
        assert!((ce.mem_bytes_per_sample - cf.mem_bytes_per_sample - extra).abs() < 1.0, "{}", ce.mem_bytes_per_sample - cf.mem_bytes_per_sample);
        assert!(ce.act_tp_per_sample_layer > cf.act_tp_per_sample_layer * 1.2);
        assert_eq!(model_from_wire(&model_to_wire(&eager)).unwrap(), eager);
        assert_ne!(fused.fingerprint(), eager.fingerprint());
        assert!(!model_to_wire(&fused).contains("activation_kernels"), "unset fields stay off the wire");
        for (bad, field) in [
            (format!("{gpt}activation_kernels = 0\n"), "activation_kernels"),
            (format!("{gpt}activation_kernels = 65\n"), "activation_kernels"),
            ("family = 'wide_resnet'\nwidth = 64\nactivation_kernels = 2\n".to_string(), "activation_kernels"),
        ] {
            let e = parse_model_toml(&bad, "m.toml", "m").unwrap_err().to_string();
            assert!(e.contains("m.toml:1") && e.contains(field), "{bad}: {e}");
        }
    }

    /// A model known only by its parameter and FLOP counts gets matmul rows
    /// per sample from their ratio (each weight's reuse): CycleGAN's
    /// convolutions over 256×256 images reuse a weight ~12,000 times a
    /// sample, an LSTM language model ~18; without parameters, a small GEMM.
    #[test]
    fn generic_models_take_their_matmul_rows_from_flops_per_weight() {
        let cat = ModelCatalog::builtin();
        let gan = cat.resolve("cyclegan").unwrap().cost();
        assert!((gan.gemm_rows_per_sample - 700e9 / (2.0 * 28.3e6)).abs() < 1.0, "{}", gan.gemm_rows_per_sample);
        let lm = cat.resolve("lm").unwrap().cost();
        assert!((lm.gemm_rows_per_sample - 0.51e9 / (2.0 * 14.0e6)).abs() < 1e-6, "{}", lm.gemm_rows_per_sample);
        let mlp = parse_model_toml("family='generic'\nparams=1e6\nfwd_flops_per_sample=1e6\n", "x", "x").unwrap().cost();
        assert_eq!(mlp.gemm_rows_per_sample, 1.0, "at least one row a sample");
        assert_eq!(generic_rows_per_sample(0.0, 1e9), 32.0);
    }

    /// ResNet-18 for CIFAR-10 as Gavel trains it (basic blocks, 3×3 stem at
    /// 32×32, 10 classes) has its published size and work; depths other
    /// than 18/34/50/101/152 are refused.
    #[test]
    fn basic_block_resnets_with_the_cifar_stem() {
        let r18 = ModelCatalog::builtin().resolve("resnet-18").unwrap().cost();
        assert!((r18.params / 11.17e6 - 1.0).abs() < 0.01, "{}", r18.params);
        assert!((r18.fwd_flops_per_sample / 1.11e9 - 1.0).abs() < 0.02, "{}", r18.fwd_flops_per_sample);
        assert_eq!((r18.pipeline_layers, r18.gemm_rows_per_sample), (8, 16.0));
        let imagenet = parse_model_toml("family='wide_resnet'\ndepth=18\nwidth=64\n", "x", "x").unwrap().cost();
        assert!((imagenet.params / 11.69e6 - 1.0).abs() < 0.01, "torchvision resnet18: {}", imagenet.params);
        let e = parse_model_toml("family='wide_resnet'\ndepth=20\nwidth=64\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("depth") && e.contains("18, 34"), "{e}");
    }

    /// `channels_last` describes CNN tensors: read for `wide_resnet`, kept
    /// through the wire form, refused for other families.
    #[test]
    fn channels_last_is_a_cnn_field() {
        let m = parse_model_toml("family='wide_resnet'\nwidth=64\nchannels_last=true\n", "m.toml", "m").unwrap();
        assert!(m.channels_last);
        assert!(model_from_wire(&model_to_wire(&m)).unwrap().channels_last);
        let plain = parse_model_toml("family='wide_resnet'\nwidth=64\n", "m.toml", "m").unwrap();
        assert!(!plain.channels_last && plain.fingerprint() != m.fingerprint());
        let e = parse_model_toml("family='gpt'\nlayers=2\nhidden=64\nheads=2\nseq_len=8\nchannels_last=true\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("channels_last") && e.contains("wide_resnet"), "{e}");
        // cuDNN autotuning is declared the same way: a CNN field, off by default.
        let tuned = parse_model_toml("family='wide_resnet'\nwidth=64\ncudnn_benchmark=true\n", "m.toml", "m").unwrap();
        assert!(tuned.cudnn_benchmark && !plain.cudnn_benchmark && tuned.fingerprint() != plain.fingerprint());
        assert!(model_from_wire(&model_to_wire(&tuned)).unwrap().cudnn_benchmark);
        assert!(!model_to_wire(&plain).contains("cudnn_benchmark"), "unset fields stay off the wire");
        let e = parse_model_toml("family='gpt'\nlayers=2\nhidden=64\nheads=2\nseq_len=8\ncudnn_benchmark=true\n", "m.toml", "m").unwrap_err().to_string();
        assert!(e.contains("cudnn_benchmark") && e.contains("wide_resnet"), "{e}");
    }

    /// Where the synchronised gradients become ready in backward: a CNN's
    /// wide late stages (most bytes, little work) early, a transformer's
    /// layers evenly with the work and its embedding last; an undescribed
    /// generic model is taken as even, the LSTM language model as its
    /// catalog entry describes it (decoder first, embedding last).
    #[test]
    fn gradients_of_cnns_are_ready_early() {
        let c = ModelCatalog::builtin();
        let share = |m: &str| c.resolve(m).unwrap().cost().grad_ready_share;
        for cnn in ["resnet-50", "resnet-18", "wide_resnet__1B"] {
            assert!(share(cnn) > 0.7 && share(cnn) < 1.0, "{cnn}: {}", share(cnn));
        }
        for t in ["gpt__1.3B", "bert_large", "transformer", "moe__1.3B"] {
            assert!(share(t) > 0.3 && share(t) < 0.5, "{t}: {}", share(t));
        }
        assert_eq!(share("lm"), 0.044);
        assert_eq!(share("a3c"), 0.5);
    }

    #[test]
    fn runtimes_execute_only_their_plans() {
        assert!(Runtime::Any.can_execute(4, 4, 3));
        assert!(Runtime::Ddp.can_execute(1, 1, 0) && !Runtime::Ddp.can_execute(2, 1, 0) && !Runtime::Ddp.can_execute(1, 1, 1));
        assert!(Runtime::Fsdp.can_execute(1, 1, 3) && !Runtime::Fsdp.can_execute(1, 2, 3));
        assert!(Runtime::Megatron.can_execute(8, 4, 1) && !Runtime::Megatron.can_execute(1, 1, 2));
        assert!(Runtime::Alpa.can_execute(2, 2, 3));
        assert!(!Runtime::Deepspeed.can_execute(2, 1, 0));
    }

    #[test]
    fn model_files_are_size_limited() {
        let d = std::env::temp_dir().join(format!("cs-model-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let ok = d.join("mine.toml");
        std::fs::write(&ok, "family = \"gpt\"\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 1000\n").unwrap();
        assert!(load_model_file_limited(&ok).unwrap().name.starts_with("user:mine@"));
        let big = d.join("big.toml");
        std::fs::write(&big, format!("family = \"gpt\"\n#{}\n", "x".repeat(70_000))).unwrap();
        assert!(load_model_file_limited(&big).unwrap_err().to_string().contains("larger than"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
        /// Model TOML and its wire form: parsed or refused, never a panic, and
        /// whatever parses has a finite cost.
        #[test]
        fn model_parsers_never_panic(text in "[a-z_ =\"0-9.\n]{0,160}", raw in proptest::prelude::any::<String>()) {
            for t in [text.as_str(), raw.as_str()] {
                if let Ok(m) = parse_model_toml(t, "fuzz.toml", "fuzz") {
                    let c = m.cost();
                    proptest::prop_assert!(m.params().is_finite() && c.pipeline_layers >= 1);
                }
                let _ = model_from_wire(t);
            }
        }
    }
}
