//! cuDNN autotuning's workspace (`torch.backends.cudnn.benchmark`).
//!
//! With autotuning on, PyTorch times every cuDNN engine for each new
//! convolution shape (forward, data and weight gradient). Before timing it
//! allocates, through the caching allocator, one workspace as large as the
//! largest candidate's that fits in the largest free block, and candidates
//! that fit nowhere are dropped. The caching allocator keeps the freed
//! block reserved, so the process's NVML peak carries it on top of what
//! training needs. With fp32 inputs (fp32, TF32) the FFT engines are
//! candidates; their workspace holds the filter bank transformed to the
//! frequency domain, so it grows with the widest stride-1 k×k convolution's
//! input × output channel pairs and not with the batch. cuDNN has no FFT
//! engine for bf16, and none was seen in bf16 runs; fp16 is treated alike
//! (unmeasured).
//!
//! The term is opportunistic: it is what the autotuner takes when the
//! memory is free, so feasibility never counts it.
use super::conv::ConvNet;
use crate::model::{ModelSpec, Precision};
use serde::Serialize;

/// Bytes of autotuning workspace per input × output channel pair of the
/// widest stride-1 k×k convolution: the median over the four fp32 H200 runs
/// of `bench/gpu/train.py` (ResNet-50 at batch 64 and 256, Wide-ResNet-50-2
/// at 32 and 128) of the NVML peak minus the allocator's peak without
/// autotuning and the CUDA context (`bench/truth/h200-conv-memory.csv`),
/// over the pairs. A 64×64 complex64 half-spectrum per pair would be
/// 64·33·8 = 16,896 bytes.
pub const DEFAULT_BYTES_PER_CHANNEL_PAIR: f64 = 17_440.0;

/// How large cuDNN autotuning's workspace is predicted to be.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AutotuneWorkspace {
    /// Bytes per input × output channel pair of the widest stride-1 k×k
    /// convolution (see [`DEFAULT_BYTES_PER_CHANNEL_PAIR`]).
    pub bytes_per_channel_pair: f64,
}

impl Default for AutotuneWorkspace {
    fn default() -> Self {
        AutotuneWorkspace { bytes_per_channel_pair: DEFAULT_BYTES_PER_CHANNEL_PAIR }
    }
}

impl AutotuneWorkspace {
    /// Bytes the autotuner of `net` trained in `p` reserves when memory is
    /// free: 0 without FFT candidates (mixed precision) or spatial filters.
    pub(crate) fn bytes(&self, net: &ConvNet, p: Precision) -> f64 {
        if fft_candidates(p) {
            self.bytes_per_channel_pair.max(0.0) * net.widest_spatial_filter_pairs()
        } else {
            0.0
        }
    }

    /// Bytes `m`'s autotuner reserves when memory is free (`net`: its
    /// layer list): 0 unless it declares `cudnn_benchmark` and
    /// [`Self::bytes`] has FFT candidates.
    pub(crate) fn bytes_for(&self, m: &ModelSpec, net: Option<&ConvNet>) -> f64 {
        match net {
            Some(net) if m.cudnn_benchmark => self.bytes(net, m.precision),
            _ => 0.0,
        }
    }

    /// Where `m`'s autotuning workspace comes from, for `--explain`: the
    /// same decision as [`Self::bytes_for`].
    pub fn source(&self, m: &ModelSpec) -> String {
        if !m.cudnn_benchmark {
            return "none (the model does not declare cudnn_benchmark)".into();
        }
        let net = ConvNet::of(m);
        if self.bytes_for(m, net.as_ref()) == 0.0 {
            return "none (no FFT candidates: mixed precision, or no stride-1 k x k convolution)".into();
        }
        format!(
            "{:.0} bytes per channel pair of the widest stride-1 k x k convolution ({:.0} pairs), capped by the memory left over; in the NVML peak, not in what must fit",
            self.bytes_per_channel_pair,
            net.map_or(0.0, |n| n.widest_spatial_filter_pairs())
        )
    }

    /// Input × output channel pairs of `m`'s widest stride-1 k×k
    /// convolution, which the workspace scales with (0 for non-CNNs).
    pub fn channel_pairs(m: &ModelSpec) -> f64 {
        ConvNet::of(m).map_or(0.0, |n| n.widest_spatial_filter_pairs())
    }

    /// The constant that makes `pairs` channel pairs need `workspace_bytes`:
    /// the median over measured runs (pairs, bytes) with pairs > 0.
    pub fn fit(runs: &[(f64, f64)]) -> Option<AutotuneWorkspace> {
        let per: Vec<f64> = runs.iter().filter(|r| r.0 > 0.0 && r.1.is_finite()).map(|r| r.1 / r.0).collect();
        (!per.is_empty()).then(|| AutotuneWorkspace { bytes_per_channel_pair: super::median(&per) })
    }
}

/// Whether cuDNN offers FFT engines for convolutions trained in `p`: their
/// inputs are fp32 (fp32, and TF32, whose FFT engines are not tensor-core
/// ones and stay candidates).
fn fft_candidates(p: Precision) -> bool {
    matches!(p, Precision::Fp32 | Precision::Tf32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelCatalog;

    /// The workspace follows the widest filter bank (4× for a network twice
    /// as wide), is absent under mixed precision, and the fit inverts it.
    #[test]
    fn workspace_follows_the_filter_bank_and_precision() {
        let mut m = ModelCatalog::builtin().resolve("resnet-50").unwrap();
        let r50 = ConvNet::of(&m).unwrap();
        m.width_factor = 2;
        let wrn = ConvNet::of(&m).unwrap();
        let a = AutotuneWorkspace::default();
        let (x, y) = (a.bytes(&r50, Precision::Fp32), a.bytes(&wrn, Precision::Fp32));
        assert!((y / x - 4.0).abs() < 1e-12 && x > 4e9 && x < 5e9, "{x} {y}");
        assert_eq!(a.bytes(&r50, Precision::Tf32), x);
        assert_eq!((a.bytes(&r50, Precision::Bf16), a.bytes(&r50, Precision::Fp16)), (0.0, 0.0));
        let fitted = AutotuneWorkspace::fit(&[(262144.0, 4.0e9), (262144.0, 5.0e9), (0.0, 1.0)]).unwrap();
        assert!((fitted.bytes(&r50, Precision::Fp32) - 4.5e9).abs() < 1.0);
        assert!(AutotuneWorkspace::fit(&[]).is_none());
    }

    /// Declaring autotuning changes the predicted peak only: the same plans
    /// fit, the same plan wins, the needed bytes are equal; the workspace
    /// is added where memory is left over (all of it on an H200, capped at
    /// the device on a 16 GB V100 where it would not fit).
    #[test]
    fn autotuning_never_changes_what_fits() {
        use crate::cell::{Cell, Plan};
        use crate::estimator::{Estimator, JobSpec};
        use crate::gpu::GpuCatalog;
        let mut m = ModelCatalog::builtin().resolve("resnet-50").unwrap();
        m.width_factor = 2;
        m.precision = Precision::Fp32;
        let mut tuned = m.clone();
        tuned.cudnn_benchmark = true;
        let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        for (gpu, batch) in [("v100", 32), ("v100", 96), ("v100", 512), ("h200", 128)] {
            let cell = Cell::new(gpu, 1, 1).unwrap();
            let plan = Plan::default();
            let (a, b) = (JobSpec { model: m.clone(), global_batch: batch }, JobSpec { model: tuned.clone(), global_batch: batch });
            let (ea, eb) = (est.evaluate_plan(&a, &cell, 8, &plan).unwrap(), est.evaluate_plan(&b, &cell, 8, &plan).unwrap());
            assert_eq!((ea.fits, ea.mem_per_gpu_bytes, ea.memory.total()), (eb.fits, eb.mem_per_gpu_bytes, eb.memory.total()), "{gpu} bs{batch}");
            assert_eq!(ea.memory.autotune_workspace, 0.0);
            let dev = est.gpu_catalog().get(gpu).unwrap().mem_bytes() as f64;
            let want = AutotuneWorkspace::default().bytes(&ConvNet::of(&tuned).unwrap(), Precision::Fp32);
            assert!((eb.memory.peak() - (eb.memory.total() + want).min(dev.max(eb.memory.total()))).abs() < 1.0, "{gpu} bs{batch}");
            match (est.estimate(&a, &cell, 8), est.estimate(&b, &cell, 8)) {
                (Ok(x), Ok(y)) => assert_eq!((x.plan, x.mem_per_gpu_bytes), (y.plan, y.mem_per_gpu_bytes)),
                (x, y) => assert_eq!(x.is_ok(), y.is_ok(), "{gpu} bs{batch}"),
            }
        }
        // A V100 cannot hold the full workspace beside WRN-50-2 at batch 96: capped.
        let b = JobSpec { model: tuned, global_batch: 96 };
        let ev = est.evaluate_plan(&b, &Cell::new("v100", 1, 1).unwrap(), 8, &Plan::default()).unwrap();
        assert!(ev.memory.peak() <= 16.0 * (1u64 << 30) as f64 + 1.0 && ev.memory.autotune_workspace > 0.0);
    }
}
