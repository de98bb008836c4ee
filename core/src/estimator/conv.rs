//! Convolutional networks as trained: the (Wide-)ResNet layer list derived
//! from its definition, each convolution costed as an implicit GEMM
//! (forward M = batch·Ho·Wo, N = Cout, K = Cin·kh·kw; data and weight
//! gradients with their own shapes) whose efficiency comes from tile
//! padding, wave quantisation over the GPU's SMs, split-K and the reduction
//! depth under a per-precision ceiling; batch norm, ReLU, residual adds and
//! pooling as bytes moved over memory bandwidth; under mixed precision with
//! NCHW tensors, the layout transposes around every tensor-core convolution.
//!
//! [`ConvNet::of`] runs once per model and Cell context (a few dozen
//! distinct layer shapes); [`ConvNet::pass_times`] per micro-batch size.
use crate::gpu::GpuSpec;
use crate::model::{ModelFamily, ModelSpec, Precision};
use std::cell::RefCell;

/// Most distinct convolution shapes kept (ResNet-50/101/152: 29; basic blocks: 21).
const MAX_LAYERS: usize = 32;

/// Thread-block tiles (rows, columns, throughput relative to the largest)
/// convolution kernels choose among: smaller tiles fit narrow layers and
/// fill more SMs but reuse each loaded operand less.
const TILES: [(f64, f64, f64); 3] = [(128.0, 128.0, 1.0), (128.0, 64.0, 0.9), (64.0, 64.0, 0.75)];
/// Smallest reduction slice per block when the reduction is split across
/// blocks (split-K) to fill the SMs.
const SPLIT_K_MIN: f64 = 256.0;
/// Reduction depth at which a tile's main loop reaches half its rate (its
/// prologue and epilogue, loading and writing the tile, take as long as the
/// loop): tensor-core tiles run the loop ~4× faster than SIMT ones, so their
/// fixed part weighs ~4× as much.
fn k_half(tensor: bool) -> f64 {
    if tensor { 64.0 } else { 16.0 }
}
/// Best fraction of peak a large convolution reaches, by precision: the
/// same ceilings as the dense GEMMs of transformers (tensor-core fp16/bf16,
/// TF32, fp32 SIMT).
fn ceiling(p: Precision) -> f64 {
    match p {
        Precision::Fp16 | Precision::Bf16 => 0.70,
        Precision::Tf32 => 0.60,
        Precision::Fp32 => 0.80,
    }
}
/// Fraction of peak memory bandwidth the element-wise and normalisation
/// kernels reach (as for transformers' memory-bound ops).
const MEM_BW_EFFICIENCY: f64 = 0.7;
/// Bytes of one max-pool index (PyTorch keeps int64 indices for backward).
const POOL_INDEX_BYTES: f64 = 8.0;

/// Pass times kept per thread (the plan search asks for the same
/// micro-batch of the same network on the same GPU many times); cleared
/// when full.
const MEMO_ENTRIES: usize = 256;
type MemoKey = (u64, u64, u64, u8, u64);
thread_local! {
    static MEMO: RefCell<Vec<(MemoKey, PassTimes)>> = const { RefCell::new(Vec::new()) };
}

/// Streaming multiprocessors of the catalog's types (datasheets; a K80
/// "GPU" is one GK210 die). Other types: estimated from the fp32 peak at
/// 128 FP32 lanes per SM and a 1.5 GHz clock.
fn sm_count(gpu: &GpuSpec) -> f64 {
    match gpu.name.as_str() {
        "k80" => 13.0,
        "p100" => 56.0,
        "v100" => 80.0,
        "t4" => 40.0,
        "a10" => 72.0,
        "a40" => 84.0,
        "a100" | "a100_40g" | "a800" => 108.0,
        "l20" => 92.0,
        "h100" | "h200" => 132.0,
        _ => (gpu.fp32_tflops * 1e12 / (2.0 * 128.0 * 1.5e9)).round().max(8.0),
    }
}

/// One convolution shape, `count` times in the network.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct ConvLayer {
    /// Output pixels per sample (Ho·Wo).
    pub out_pixels: f64,
    /// Input pixels per sample (Hi·Wi).
    pub in_pixels: f64,
    /// Input channels.
    pub cin: f64,
    /// Output channels.
    pub cout: f64,
    /// Kernel side (1, 3 or 7).
    pub kernel: f64,
    /// Occurrences.
    pub count: f64,
    /// Whether backward computes the input's gradient (not for the stem,
    /// whose input is the image).
    pub dgrad: bool,
}

impl ConvLayer {
    /// Forward multiply-adds ×2 per sample.
    #[cfg(test)]
    fn flops(&self) -> f64 {
        2.0 * self.out_pixels * self.cout * self.cin * self.kernel * self.kernel
    }
}

/// The element counts per sample the memory-bound layers touch.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct ElementwiseElems {
    /// Batch-norm outputs (one per convolution output).
    bn: f64,
    /// ReLU outputs.
    relu: f64,
    /// Residual-add outputs.
    add: f64,
    /// Max-pool input and output.
    pool_in: f64,
    pool_out: f64,
    /// Global average-pool input.
    avg_in: f64,
}

impl ElementwiseElems {
    /// Bytes per sample moved by one forward and backward, `b` bytes a value:
    /// batch norm reads its input twice (statistics, normalise) and writes
    /// once forward, reads the gradient and input twice and writes once
    /// backward (8 accesses); ReLU reads and writes forward, reads the
    /// gradient and output and writes backward (5); an add reads two and
    /// writes one each way (6); max-pool reads its input and writes its
    /// output and indices, and backward zeroes and scatters into the input's
    /// gradient; average-pool reads forward and writes backward.
    fn bytes(&self, b: f64) -> f64 {
        (8.0 * self.bn + 5.0 * self.relu + 6.0 * self.add) * b
            + self.pool_in * 3.0 * b
            + self.pool_out * 2.0 * (b + POOL_INDEX_BYTES)
            + self.avg_in * 2.0 * b
    }
}

/// A CNN's layers, computed once per model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ConvNet {
    layers: [ConvLayer; MAX_LAYERS],
    n: usize,
    elems: ElementwiseElems,
    /// Classifier (input features, classes): a small GEMM.
    fc: (f64, f64),
    channels_last: bool,
    /// The architecture's fingerprint (memo key).
    id: u64,
}

/// Seconds of one micro-batch's forward and backward on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct PassTimes {
    /// Convolutions and the classifier (forward, data and weight gradients).
    pub conv_s: f64,
    /// Memory-bound layers and layout transposes.
    pub memory_s: f64,
}

impl ConvNet {
    /// The network of a `wide_resnet` model; `None` for other families.
    pub fn of(m: &ModelSpec) -> Option<ConvNet> {
        (m.family == ModelFamily::WideResnet).then(|| ConvNet::resnet(m))
    }

    fn resnet(m: &ModelSpec) -> ConvNet {
        let (blocks, bottleneck): (&[u32], bool) = match m.depth {
            18 => (&[2, 2, 2, 2], false),
            34 => (&[3, 4, 6, 3], false),
            101 => (&[3, 4, 23, 3], true),
            152 => (&[3, 8, 36, 3], true),
            _ => (&[3, 4, 6, 3], true),
        };
        let w = m.width.max(1) as f64;
        let k = m.width_factor.max(1) as f64;
        let img = if m.image_size == 0 { 224.0 } else { m.image_size as f64 };
        let classes = if m.vocab == 0 { 1000.0 } else { m.vocab as f64 };
        let mut net = ConvNet {
            layers: [ConvLayer::default(); MAX_LAYERS],
            n: 0,
            elems: ElementwiseElems::default(),
            fc: (0.0, classes),
            channels_last: m.channels_last,
            id: m.fingerprint(),
        };
        let push = |net: &mut ConvNet, l: ConvLayer, relu: bool| {
            net.elems.bn += l.out_pixels * l.cout * l.count;
            if relu {
                net.elems.relu += l.out_pixels * l.cout * l.count;
            }
            if net.n < MAX_LAYERS {
                net.layers[net.n] = l;
                net.n += 1;
            }
        };
        // Stem: ImageNet 7×7 stride 2 then a 3×3 stride-2 max-pool; CIFAR
        // (under 64 px) one 3×3 at full resolution.
        let first_side = if img < 64.0 {
            push(&mut net, ConvLayer { out_pixels: img * img, in_pixels: img * img, cin: 3.0, cout: w, kernel: 3.0, count: 1.0, dgrad: false }, true);
            img
        } else {
            let s = (img / 2.0).ceil();
            push(&mut net, ConvLayer { out_pixels: s * s, in_pixels: img * img, cin: 3.0, cout: w, kernel: 7.0, count: 1.0, dgrad: false }, true);
            net.elems.pool_in += w * s * s;
            let p = (s / 2.0).ceil();
            net.elems.pool_out += w * p * p;
            p
        };
        let mut inc = w;
        let mut side = first_side;
        for (i, &nb) in blocks.iter().enumerate() {
            let scale = 2f64.powi(i as i32);
            let inner = w * scale * k;
            let out = if bottleneck { 4.0 * w * scale } else { w * scale * k };
            let stride = if i > 0 { 2.0 } else { 1.0 };
            let in_px = side * side;
            let out_side = (side / stride).ceil();
            let out_px = out_side * out_side;
            // The first block (stride and projection shortcut: torchvision's
            // v1.5, stride on the 3×3), then nb − 1 identical ones.
            for (first, count) in [(true, 1.0), (false, nb as f64 - 1.0)] {
                if count <= 0.0 {
                    continue;
                }
                let cin = if first { inc } else { out };
                let l = |o: f64, i_px: f64, ci: f64, co: f64, kk: f64| ConvLayer { out_pixels: o, in_pixels: i_px, cin: ci, cout: co, kernel: kk, count, dgrad: true };
                if bottleneck {
                    push(&mut net, l(in_px_or(first, in_px, out_px), in_px_or(first, in_px, out_px), cin, inner, 1.0), true);
                    push(&mut net, l(out_px, in_px_or(first, in_px, out_px), inner, inner, 3.0), true);
                    push(&mut net, l(out_px, out_px, inner, out, 1.0), false);
                } else {
                    push(&mut net, l(out_px, in_px_or(first, in_px, out_px), cin, inner, 3.0), true);
                    push(&mut net, l(out_px, out_px, inner, out, 3.0), false);
                }
                if first && (cin != out || i > 0) {
                    push(&mut net, l(out_px, in_px, cin, out, 1.0), false);
                }
                // The residual add and the ReLU after it.
                net.elems.add += out * out_px * count;
                net.elems.relu += out * out_px * count;
            }
            inc = out;
            side = out_side;
        }
        net.elems.avg_in += inc * side * side;
        net.fc.0 = inc;
        net
    }

    /// Forward FLOPs per sample of the convolutions and the classifier.
    #[cfg(test)]
    pub fn fwd_flops(&self) -> f64 {
        self.layers[..self.n].iter().map(|l| l.flops() * l.count).sum::<f64>() + 2.0 * self.fc.0 * self.fc.1
    }

    /// Input × output channel pairs of the widest stride-1 convolution with
    /// a kernel wider than 1×1 (the filter banks FFT-based cuDNN algorithms
    /// transform); 0 when the network has none.
    pub fn widest_spatial_filter_pairs(&self) -> f64 {
        self.layers[..self.n]
            .iter()
            .filter(|l| l.kernel > 1.0 && l.in_pixels == l.out_pixels)
            .map(|l| l.cin * l.cout)
            .fold(0.0, f64::max)
    }

    /// Forward and backward seconds of `mbs` samples on `gpu` in `p`.
    pub fn pass_times(&self, mbs: f64, gpu: &GpuSpec, p: Precision) -> PassTimes {
        let key = (self.id, gpu.peak_for(p).to_bits(), gpu.mem_bw_gbs.to_bits() ^ sm_count(gpu).to_bits(), p as u8, mbs.to_bits());
        if let Some(t) = MEMO.with(|m| m.borrow().iter().find(|e| e.0 == key).map(|e| e.1)) {
            return t;
        }
        let t = self.pass_times_uncached(mbs, gpu, p);
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if m.len() >= MEMO_ENTRIES {
                m.clear();
            }
            m.push((key, t));
        });
        t
    }

    fn pass_times_uncached(&self, mbs: f64, gpu: &GpuSpec, p: Precision) -> PassTimes {
        let peak = gpu.peak_for(p);
        let sms = sm_count(gpu);
        let tensor = p != Precision::Fp32 && (p != Precision::Tf32 || gpu.tf32_tflops.is_some());
        let b = p.value_bytes();
        let bw = gpu.mem_bw_gbs * 1e9 * MEM_BW_EFFICIENCY;
        let gemm = |m: f64, n: f64, k: f64| 2.0 * m * n * k / (peak * gemm_efficiency(m, n, k, sms, tensor, p));
        let mut conv_s = 0.0;
        let mut transposed = 0.0;
        for l in &self.layers[..self.n] {
            let kk = l.kernel * l.kernel;
            let rows = mbs * l.out_pixels;
            let fwd = gemm(rows, l.cout, l.cin * kk);
            let dgrad = if l.dgrad { gemm(rows, l.cin, l.cout * kk) } else { 0.0 };
            let wgrad = gemm(l.cout, l.cin * kk, rows);
            conv_s += l.count * (fwd + dgrad + wgrad);
            // Tensor-core kernels work on NHWC: with NCHW tensors each call
            // transposes its two operands in and its result out (read and
            // write each): forward x, y; data gradient dy, dx; weight
            // gradient x, dy.
            let (x, y) = (l.in_pixels * l.cin, l.out_pixels * l.cout);
            let calls = if l.dgrad { 3.0 } else { 2.0 };
            transposed += l.count * calls * (x + y) * 2.0;
        }
        // The classifier: forward, data and weight gradients.
        let (f, c) = self.fc;
        conv_s += gemm(mbs, c, f) + gemm(mbs, f, c) + gemm(c, f, mbs);
        let layout = if p.mixed() && !self.channels_last { transposed * b } else { 0.0 };
        let memory_s = mbs * (self.elems.bytes(b) + layout) / bw;
        PassTimes { conv_s, memory_s }
    }

}

/// In a first block the 1×1 reduction runs at the input resolution (v1.5
/// strides on the 3×3); elsewhere input and output resolutions agree.
fn in_px_or(first: bool, in_px: f64, out_px: f64) -> f64 {
    if first { in_px } else { out_px }
}

/// Fraction of `p`'s peak an implicit GEMM of M×N with reduction K reaches
/// on `sms` SMs: the best tile's padding of M and N, its waves over the SMs
/// (split-K over idle SMs when tiles are few), its reduction depth per
/// block, under the precision's ceiling.
fn gemm_efficiency(m: f64, n: f64, k: f64, sms: f64, tensor: bool, p: Precision) -> f64 {
    let kh = k_half(tensor);
    let best = TILES
        .iter()
        .map(|&(tm, tn, rate)| {
            let tiles = (m / tm).ceil() * (n / tn).ceil();
            let split = (sms / tiles).floor().clamp(1.0, (k / SPLIT_K_MIN).floor().max(1.0));
            let units = tiles * split;
            let waves = (units / sms).ceil();
            let fill = units / (waves * sms);
            let pad = m * n / (tiles * tm * tn);
            let kk = k / split;
            rate * fill * pad * kk / (kk + kh)
        })
        .fold(0.0f64, f64::max);
    (ceiling(p) * best).max(1e-3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;

    fn net(name: &str) -> (ModelSpec, ConvNet) {
        let m = ModelCatalog::builtin().resolve(name).unwrap();
        let n = ConvNet::of(&m).unwrap();
        (m, n)
    }

    /// The layer list has the architecture's FLOPs (torchvision ResNet-50,
    /// v1.5: 4.1 GMACs → 8.2 GFLOPs forward at 224 px) and is within the v1
    /// to v1.5 difference (the stride on the 1×1 or the 3×3 of a stage's
    /// first block, ~6%) of the model catalog's count.
    #[test]
    fn layer_list_matches_the_architecture() {
        let (m, r50) = net("resnet-50");
        let f = r50.fwd_flops();
        assert!((f / 8.2e9 - 1.0).abs() < 0.03, "{f}");
        let v1 = m.cost().fwd_flops_per_sample;
        assert!(f > v1 && f / v1 < 1.07, "{f} vs {v1}");
        let (m18, r18) = net("resnet-18");
        assert!((r18.fwd_flops() / m18.cost().fwd_flops_per_sample - 1.0).abs() < 0.03);
        assert!(ConvNet::of(ModelCatalog::builtin().get("gpt__1.3B").unwrap()).is_none());
    }

    /// The widest stride-1 k×k convolution: the 3×3 of the last stage's
    /// later bottlenecks (ResNet-50: 512 channels in and out; Wide-ResNet-50-2
    /// twice as wide); not the strided first 3×3 nor the 7×7 stem.
    #[test]
    fn widest_spatial_filter_bank() {
        let (_, r50) = net("resnet-50");
        assert_eq!(r50.widest_spatial_filter_pairs(), 512.0 * 512.0);
        let mut m = ModelCatalog::builtin().resolve("resnet-50").unwrap();
        m.width_factor = 2;
        assert_eq!(ConvNet::of(&m).unwrap().widest_spatial_filter_pairs(), 1024.0 * 1024.0);
        let (_, r18) = net("resnet-18");
        assert_eq!(r18.widest_spatial_filter_pairs(), 512.0 * 512.0);
    }

    /// Small batches fill fewer SMs: per-sample convolution time falls with
    /// the batch, and a wide GPU needs a larger batch to fill than a K80.
    #[test]
    fn efficiency_grows_with_batch_and_falls_with_narrow_layers() {
        let gpus = GpuCatalog::builtin();
        let (_, r18) = net("resnet-18");
        let v100 = gpus.get("v100").unwrap();
        let per = |bs: f64| r18.pass_times(bs, v100, Precision::Fp32).conv_s / bs;
        assert!(per(4.0) > 1.15 * per(128.0), "{} {}", per(4.0), per(128.0));
        assert!(per(128.0) >= per(256.0) * 0.99);
        // Narrow N pads the tile: 32 channels run slower per FLOP than 256.
        let e = |n: f64| gemm_efficiency(1e6, n, 2304.0, 80.0, true, Precision::Bf16);
        assert!(e(32.0) < 0.7 * e(256.0), "{} {}", e(32.0), e(256.0));
        // Small K (a 1×1 over 64 channels) runs below a deep reduction.
        assert!(gemm_efficiency(1e6, 256.0, 64.0, 80.0, true, Precision::Bf16) < 0.6 * e(256.0));
    }

    /// Under mixed precision the memory-bound layers are a large share of a
    /// ResNet-50 step (the tensor cores make the convolutions cheap, the
    /// bytes stay), larger than in fp32; NCHW adds layout transposes that
    /// channels-last avoids.
    #[test]
    fn memory_bound_layers_dominate_mixed_precision() {
        let gpus = GpuCatalog::builtin();
        let a100 = gpus.get("a100").unwrap();
        let (mut m, r50) = net("resnet-50");
        let fp32 = r50.pass_times(128.0, a100, Precision::Fp32);
        let bf16 = r50.pass_times(128.0, a100, Precision::Bf16);
        let share = |t: PassTimes| t.memory_s / (t.memory_s + t.conv_s);
        assert!(share(bf16) > 0.4 && share(bf16) > 2.0 * share(fp32), "{} {}", share(bf16), share(fp32));
        m.channels_last = true;
        let nhwc = ConvNet::of(&m).unwrap().pass_times(128.0, a100, Precision::Bf16);
        assert!(nhwc.memory_s < 0.8 * bf16.memory_s && nhwc.conv_s == bf16.conv_s);
    }
}
