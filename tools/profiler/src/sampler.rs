//! Background sampling of GPU utilization, memory, power and SM clock at a
//! fixed interval, each reading stamped with its time in the run, and
//! per-GPU summaries over the whole run or over a [`Window`] of it (the
//! measured iterations: start-up and warm-up excluded).
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
    /// Seconds since the run started when read (set by [`SamplerThread`];
    /// a bare [`Sampler`] leaves it 0).
    pub t_s: f64,
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

/// A span of the run, in seconds since it started (both ends included).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Window {
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
}

impl Window {
    /// Whether `t_s` lies in the window.
    pub fn contains(&self, t_s: f64) -> bool {
        self.start_s <= t_s && t_s <= self.end_s
    }
}

/// Summarizes the readings taken inside `window`, per GPU index (sorted).
/// A GPU read during the run but never inside the window gets a row with
/// 0 samples and no values.
pub fn summarize_window(samples: &[GpuSample], window: &Window) -> Vec<GpuSummary> {
    let inside: Vec<GpuSample> = samples.iter().filter(|s| window.contains(s.t_s)).copied().collect();
    let mut out = summarize(&inside);
    for i in summarize(samples).into_iter().map(|s| s.index) {
        if !out.iter().any(|s| s.index == i) {
            out.push(GpuSummary {
                index: i,
                samples: 0,
                mean_util_pct: None,
                peak_mem_bytes: None,
                mean_power_w: None,
                mean_sm_clock_mhz: None,
            });
        }
    }
    out.sort_by_key(|s| s.index);
    out
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
    /// one reading is taken even if stopped at once); readings are stamped
    /// with their time since `origin` (the run's start).
    pub fn start(mut sampler: Box<dyn Sampler>, interval: Duration, origin: Instant) -> SamplerThread {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("cellsched-nvml-sampler".into())
            .spawn(move || {
                let mut out = Vec::new();
                // At least one reading, however short the run.
                loop {
                    let t = Instant::now();
                    let t_s = t.saturating_duration_since(origin).as_secs_f64();
                    out.extend(sampler.sample().into_iter().map(|s| GpuSample { t_s, ..s }));
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
                t_s: 0.0,
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
            t_s: 0.0,
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
            Instant::now(),
        );
        rx.recv().unwrap();
        let v = t.stop();
        assert!(v.len() >= 3, "{} samples", v.len());
        assert_eq!(v[0].util_pct, Some(10.0));
        assert_eq!(v[1].util_pct, Some(20.0));
        assert!(v.windows(2).all(|w| w[0].t_s <= w[1].t_s), "stamped in order");
    }

    /// A synthetic stream: GPU `index` read every `dt` seconds from 0 to
    /// `end`, with utilization `util(t)`, memory `mem(t)` and power `power(t)`.
    pub(crate) fn stream(
        index: u32,
        dt: f64,
        end: f64,
        util: impl Fn(f64) -> f64,
        mem: impl Fn(f64) -> u64,
        power: impl Fn(f64) -> f64,
    ) -> Vec<GpuSample> {
        let n = (end / dt).round() as usize;
        (0..=n)
            .map(|k| {
                let t = k as f64 * dt;
                GpuSample { index, t_s: t, util_pct: Some(util(t)), mem_used_bytes: Some(mem(t)), power_w: Some(power(t)), sm_clock_mhz: None }
            })
            .collect()
    }

    #[test]
    fn window_excludes_start_up_and_tail() {
        // 0-10 s start-up at 0% / 60 W, 10-40 s training at 95% / 300 W, 40-50 s teardown at 5%.
        let phase = |t: f64, a: f64, b: f64, c: f64| if t < 10.0 { a } else if t <= 40.0 { b } else { c };
        let mut samples = stream(0, 0.5, 50.0, |t| phase(t, 0.0, 95.0, 5.0), |t| if t <= 40.0 { (t * 1e9) as u64 } else { 1 }, |t| phase(t, 60.0, 300.0, 80.0));
        // A second GPU only read during start-up.
        samples.extend(stream(1, 0.5, 5.0, |_| 0.0, |_| 7, |_| 50.0));
        let whole = summarize(&samples);
        assert!(whole[0].mean_util_pct.unwrap() < 60.0, "whole-run mean is diluted: {:?}", whole[0]);
        let w = Window { start_s: 10.0, end_s: 40.0 };
        let s = summarize_window(&samples, &w);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].samples, 61);
        assert_eq!(s[0].mean_util_pct, Some(95.0));
        assert_eq!(s[0].mean_power_w, Some(300.0));
        assert_eq!(s[0].peak_mem_bytes, Some(40_000_000_000));
        assert_eq!((s[1].index, s[1].samples, s[1].mean_util_pct), (1, 0, None));
        assert!(w.contains(10.0) && w.contains(40.0) && !w.contains(40.01));
    }
}
