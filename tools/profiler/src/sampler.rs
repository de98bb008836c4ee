//! Background sampling of GPU utilization, memory, power and SM clock at a
//! fixed interval, summarized per GPU when stopped.
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One reading of one GPU; fields NVML could not read are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuSample {
    /// Device index.
    pub index: u32,
    /// GPU utilization, percent.
    pub util_pct: Option<f64>,
    /// Memory used, bytes.
    pub mem_used_bytes: Option<u64>,
    /// Power draw, watts.
    pub power_w: Option<f64>,
    /// Current SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
}

/// A source of readings (NVML, or a fake in tests).
pub trait Sampler: Send {
    /// Reads every sampled GPU once.
    fn sample(&mut self) -> Vec<GpuSample>;
}

/// Per-GPU summary of the samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuSummary {
    /// Device index.
    pub index: u32,
    /// Number of readings.
    pub samples: usize,
    /// Mean utilization, percent.
    pub mean_util_pct: Option<f64>,
    /// Peak memory used, bytes.
    pub peak_mem_bytes: Option<u64>,
    /// Mean power, watts.
    pub mean_power_w: Option<f64>,
    /// Mean SM clock, MHz.
    pub mean_sm_clock_mhz: Option<f64>,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// Summarizes readings per GPU index (sorted by index).
pub fn summarize(samples: &[GpuSample]) -> Vec<GpuSummary> {
    let mut idx: Vec<u32> = samples.iter().map(|s| s.index).collect();
    idx.sort_unstable();
    idx.dedup();
    idx.into_iter()
        .map(|i| {
            let mine: Vec<&GpuSample> = samples.iter().filter(|s| s.index == i).collect();
            GpuSummary {
                index: i,
                samples: mine.len(),
                mean_util_pct: mean(mine.iter().filter_map(|s| s.util_pct)),
                peak_mem_bytes: mine.iter().filter_map(|s| s.mem_used_bytes).max(),
                mean_power_w: mean(mine.iter().filter_map(|s| s.power_w)),
                mean_sm_clock_mhz: mean(mine.iter().filter_map(|s| s.sm_clock_mhz)),
            }
        })
        .collect()
}

/// A sampler running on its own thread until [`SamplerThread::stop`].
pub struct SamplerThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<GpuSample>>,
}

impl SamplerThread {
    /// Starts sampling every `interval` (first reading immediately; at least
    /// one reading is taken even if stopped at once).
    pub fn start(mut sampler: Box<dyn Sampler>, interval: Duration) -> SamplerThread {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("cellsched-nvml-sampler".into())
            .spawn(move || {
                let mut out = Vec::new();
                // At least one reading, however short the run.
                loop {
                    let t = Instant::now();
                    out.extend(sampler.sample());
                    // Sleep in short slices so stop() returns promptly.
                    while t.elapsed() < interval && !flag.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20).min(interval));
                    }
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                }
                out
            })
            .expect("spawning the sampler thread");
        SamplerThread { stop, handle }
    }

    /// Stops the thread and returns all readings.
    pub fn stop(self) -> Vec<GpuSample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fake GPU whose utilization counts up 10, 20, 30, ...
    pub(crate) struct FakeGpu(pub u32);

    impl Sampler for FakeGpu {
        fn sample(&mut self) -> Vec<GpuSample> {
            self.0 += 1;
            vec![GpuSample {
                index: 0,
                util_pct: Some(10.0 * self.0 as f64),
                mem_used_bytes: Some(1000 * self.0 as u64),
                power_w: Some(100.0),
                sm_clock_mhz: None,
            }]
        }
    }

    #[test]
    fn summary_per_gpu() {
        let s = |i, u| GpuSample {
            index: i,
            util_pct: Some(u),
            mem_used_bytes: Some(u as u64),
            power_w: None,
            sm_clock_mhz: Some(1000.0),
        };
        let sum = summarize(&[s(1, 50.0), s(0, 10.0), s(0, 30.0)]);
        assert_eq!(sum.len(), 2);
        assert_eq!(
            (
                sum[0].index,
                sum[0].samples,
                sum[0].mean_util_pct,
                sum[0].peak_mem_bytes
            ),
            (0, 2, Some(20.0), Some(30))
        );
        assert_eq!(sum[0].mean_power_w, None);
        assert_eq!(sum[1].mean_sm_clock_mhz, Some(1000.0));
    }

    /// Tells the test once it has been sampled 3 times.
    struct Signalling(FakeGpu, std::sync::mpsc::Sender<()>);

    impl Sampler for Signalling {
        fn sample(&mut self) -> Vec<GpuSample> {
            let v = self.0.sample();
            if self.0 .0 == 3 {
                self.1.send(()).ok();
            }
            v
        }
    }

    #[test]
    fn thread_collects_until_stopped() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = SamplerThread::start(
            Box::new(Signalling(FakeGpu(0), tx)),
            Duration::from_millis(1),
        );
        rx.recv().unwrap();
        let v = t.stop();
        assert!(v.len() >= 3, "{} samples", v.len());
        assert_eq!(v[0].util_pct, Some(10.0));
        assert_eq!(v[1].util_pct, Some(20.0));
    }
}
