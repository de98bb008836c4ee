//! Layer freezing (IceFrog-style): opted-in jobs freeze their converged front
//! layers as training proceeds, so later iterations are cheaper, at the cost of
//! a few extra iterations to reach the same quality.
//!
//! Model (documented assumptions, all configurable):
//! - A [`FreezeSchedule`] is a step function: from progress `p_i` on, the front
//!   fraction `f_i` of the layers is frozen (`0.30:0.25,0.60:0.50` freezes a
//!   quarter of the layers at 30 % of training and half at 60 %).
//! - Throughput: forward ≈ 1/3 and backward ≈ 2/3 of an iteration's compute.
//!   Frozen front layers still run forward (later layers need their
//!   activations) but skip backward compute and gradient all-reduce. With
//!   `backward_share` = share of the iteration time spent in backward compute
//!   plus gradient sync, an iteration with frozen fraction `f` takes
//!   `1 - backward_share * f` of the unfrozen time
//!   ([`FreezeSchedule::iteration_time_factor`], [`backward_share`]).
//! - Penalty: freezing costs extra iterations to reach the same quality,
//!   a multiplicative factor on the total iterations ([`FreezePenalty`]:
//!   conservative 1.02, auto 1.05 by default).
//! - Effective remaining time integrates the per-iteration time factor over
//!   the remaining progress ([`effective_remaining_time`]); A-SRPT orders jobs
//!   by it, so effective progress, not raw iterations, drives the ordering.
use crate::error::CoreError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Whether and how aggressively a job freezes layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FreezeMode {
    /// No freezing (the default).
    #[default]
    Off,
    /// Freeze late and little: small penalty, small speedup.
    Conservative,
    /// Freeze early and more: larger speedup, larger penalty.
    Auto,
}

impl FromStr for FreezeMode {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(FreezeMode::Off),
            "conservative" => Ok(FreezeMode::Conservative),
            "auto" => Ok(FreezeMode::Auto),
            _ => Err(CoreError::invalid("freeze mode", s, "off, conservative or auto")),
        }
    }
}

impl fmt::Display for FreezeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FreezeMode::Off => "off",
            FreezeMode::Conservative => "conservative",
            FreezeMode::Auto => "auto",
        })
    }
}

/// Default share of an iteration spent in backward compute when gradient
/// sync is negligible: backward ≈ 2/3 of compute.
pub const DEFAULT_BACKWARD_SHARE: f64 = 2.0 / 3.0;

/// Share of iteration time removed per unit of frozen fraction, given the
/// share `comm_share` of the iteration spent in exposed gradient all-reduce:
/// `(1 - comm_share) * 2/3 + comm_share`. `comm_share` is clamped to [0, 1].
pub fn backward_share(comm_share: f64) -> f64 {
    let c = if comm_share.is_finite() { comm_share.clamp(0.0, 1.0) } else { 0.0 };
    (1.0 - c) * DEFAULT_BACKWARD_SHARE + c
}

const SCHEDULE_FORM: &str =
    "PROGRESS:FRACTION,... with progress strictly increasing in (0,1) and fractions non-decreasing in [0,1) (e.g. 0.30:0.25,0.60:0.50), or 'none'";

/// A freezing schedule: steps `(progress, frozen front-layer fraction)`.
/// Empty means no freezing; text form `0.3:0.25,0.6:0.5` (empty: `none`).
/// Serialized as its text form, validated on deserialization.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FreezeSchedule {
    steps: Vec<(f64, f64)>,
}

impl FreezeSchedule {
    /// A validated schedule: progress strictly increasing in (0,1), fractions
    /// non-decreasing in [0,1).
    pub fn new(steps: Vec<(f64, f64)>) -> Result<Self, CoreError> {
        let mut prev = (0.0_f64, 0.0_f64);
        for (i, &(p, f)) in steps.iter().enumerate() {
            let item = || format!("{p}:{f}");
            if !(p > 0.0 && p < 1.0) {
                return Err(CoreError::invalid(
                    format!("freeze schedule step {} progress", i + 1),
                    item(),
                    "a progress fraction strictly between 0 and 1",
                ));
            }
            if i > 0 && p <= prev.0 {
                return Err(CoreError::invalid(
                    format!("freeze schedule step {} progress", i + 1),
                    item(),
                    format!("a progress greater than the previous step's {}", prev.0),
                ));
            }
            if !(0.0..1.0).contains(&f) {
                return Err(CoreError::invalid(
                    format!("freeze schedule step {} fraction", i + 1),
                    item(),
                    "a frozen-layer fraction in [0, 1)",
                ));
            }
            if f < prev.1 {
                return Err(CoreError::invalid(
                    format!("freeze schedule step {} fraction", i + 1),
                    item(),
                    format!("a fraction not below the previous step's {}", prev.1),
                ));
            }
            prev = (p, f);
        }
        Ok(FreezeSchedule { steps })
    }

    /// The empty schedule (no freezing).
    pub fn none() -> Self {
        FreezeSchedule::default()
    }

    /// The schedule's steps.
    pub fn steps(&self) -> &[(f64, f64)] {
        &self.steps
    }

    /// True when nothing is ever frozen.
    pub fn is_off(&self) -> bool {
        self.steps.iter().all(|&(_, f)| f == 0.0)
    }

    /// Default schedule for a mode, quantized to whole layers of a model with
    /// `num_layers` layers (0 = unknown: no quantization).
    ///
    /// Conservative: 25 % at 50 % progress, 50 % at 75 %.
    /// Auto: 25 % at 30 %, 50 % at 50 %, 75 % at 70 %.
    /// Steps that quantize to no new frozen layer are dropped.
    pub fn for_mode(mode: FreezeMode, num_layers: u32) -> Self {
        let raw: &[(f64, f64)] = match mode {
            FreezeMode::Off => &[],
            FreezeMode::Conservative => &[(0.50, 0.25), (0.75, 0.50)],
            FreezeMode::Auto => &[(0.30, 0.25), (0.50, 0.50), (0.70, 0.75)],
        };
        let mut steps: Vec<(f64, f64)> = Vec::new();
        for &(p, f) in raw {
            let q = if num_layers == 0 { f } else { (f * num_layers as f64).floor() / num_layers as f64 };
            let last = steps.last().map_or(0.0, |s| s.1);
            if q > last {
                steps.push((p, q));
            }
        }
        FreezeSchedule { steps }
    }

    /// Frozen front-layer fraction at `progress` (0 before the first step).
    pub fn frozen_fraction(&self, progress: f64) -> f64 {
        self.steps.iter().take_while(|&&(p, _)| p <= progress).last().map_or(0.0, |s| s.1)
    }

    /// Iteration time relative to unfrozen training at `progress`:
    /// `1 - backward_share * frozen_fraction(progress)` (see module doc).
    pub fn iteration_time_factor(&self, progress: f64, backward_share: f64) -> f64 {
        1.0 - backward_share.clamp(0.0, 1.0) * self.frozen_fraction(progress)
    }

    /// Mean iteration-time factor over progress `[from, 1]`, integrated
    /// exactly over the step function; 0-length interval gives 0.
    fn integral_factor(&self, from: f64, backward_share: f64) -> f64 {
        let from = from.clamp(0.0, 1.0);
        let mut total = 0.0;
        let mut start = from;
        let mut frac = self.frozen_fraction(from);
        for &(p, f) in self.steps.iter().filter(|&&(p, _)| p > from) {
            total += (p - start) * (1.0 - backward_share * frac);
            start = p;
            frac = f;
        }
        total + (1.0 - start) * (1.0 - backward_share * frac)
    }

    /// Time left for a job that needs `total_iters` without freezing, has
    /// done `done_iters`, runs unfrozen iterations in `base_iter_s`, and
    /// needs `penalty` (≥ 1) times the iterations with this schedule.
    /// Progress is `done / (total * penalty)`; the time integrates the
    /// iteration-time factor over the remaining progress.
    pub fn remaining_time(
        &self,
        total_iters: f64,
        done_iters: f64,
        base_iter_s: f64,
        penalty: f64,
        backward_share: f64,
    ) -> f64 {
        let penalty = if self.is_off() { 1.0 } else { penalty.max(1.0) };
        let effective_total = total_iters.max(0.0) * penalty;
        if effective_total <= 0.0 || !base_iter_s.is_finite() || base_iter_s <= 0.0 {
            return 0.0;
        }
        let progress = (done_iters.max(0.0) / effective_total).min(1.0);
        effective_total * base_iter_s * self.integral_factor(progress, backward_share.clamp(0.0, 1.0))
    }
}

impl FromStr for FreezeSchedule {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let t = s.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("none") {
            return Ok(FreezeSchedule::none());
        }
        let mut steps = Vec::new();
        for (i, item) in t.split(',').enumerate() {
            let bad = || CoreError::invalid(format!("freeze schedule step {}", i + 1), item, SCHEDULE_FORM);
            let (p, f) = item.split_once(':').ok_or_else(bad)?;
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            let f: f64 = f.trim().parse().map_err(|_| bad())?;
            steps.push((p, f));
        }
        FreezeSchedule::new(steps)
    }
}

impl fmt::Display for FreezeSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.steps.is_empty() {
            return f.write_str("none");
        }
        for (i, (p, fr)) in self.steps.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{p}:{fr}")?;
        }
        Ok(())
    }
}

impl TryFrom<String> for FreezeSchedule {
    type Error = CoreError;
    fn try_from(s: String) -> Result<Self, CoreError> {
        s.parse()
    }
}

impl From<FreezeSchedule> for String {
    fn from(s: FreezeSchedule) -> String {
        s.to_string()
    }
}

/// Extra-iteration factors per mode (iterations with freezing = factor ×
/// iterations without). Defaults: conservative 1.02, auto 1.05.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FreezePenalty {
    /// Factor for [`FreezeMode::Conservative`].
    pub conservative: f64,
    /// Factor for [`FreezeMode::Auto`].
    pub auto: f64,
}

impl Default for FreezePenalty {
    fn default() -> Self {
        FreezePenalty { conservative: 1.02, auto: 1.05 }
    }
}

impl FreezePenalty {
    /// The factor for `mode` (1 for [`FreezeMode::Off`]; never below 1).
    pub fn factor(&self, mode: FreezeMode) -> f64 {
        let f = match mode {
            FreezeMode::Off => 1.0,
            FreezeMode::Conservative => self.conservative,
            FreezeMode::Auto => self.auto,
        };
        if f.is_finite() {
            f.max(1.0)
        } else {
            1.0
        }
    }
}

/// Default penalty factor for `mode` ([`FreezePenalty::default`]).
pub fn penalty_factor(mode: FreezeMode) -> f64 {
    FreezePenalty::default().factor(mode)
}

/// Everything needed to turn iterations into effective remaining time for a
/// freezing job: schedule, penalty factor and backward share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreezeProfile {
    /// When which fraction of layers freezes.
    pub schedule: FreezeSchedule,
    /// Extra-iteration factor (≥ 1).
    pub penalty: f64,
    /// Share of iteration time removed per unit frozen fraction.
    pub backward_share: f64,
}

impl FreezeProfile {
    /// Default profile for `mode` and a model of `num_layers` layers.
    pub fn for_mode(mode: FreezeMode, num_layers: u32) -> Self {
        FreezeProfile {
            schedule: FreezeSchedule::for_mode(mode, num_layers),
            penalty: penalty_factor(mode),
            backward_share: DEFAULT_BACKWARD_SHARE,
        }
    }

    /// See [`FreezeSchedule::remaining_time`].
    pub fn remaining_time(&self, total_iters: f64, done_iters: f64, base_iter_s: f64) -> f64 {
        self.schedule.remaining_time(total_iters, done_iters, base_iter_s, self.penalty, self.backward_share)
    }
}

/// Effective remaining time with [`DEFAULT_BACKWARD_SHARE`]; see
/// [`FreezeSchedule::remaining_time`].
pub fn effective_remaining_time(
    total_iters: f64,
    done_iters: f64,
    base_iter_s: f64,
    schedule: &FreezeSchedule,
    penalty: f64,
) -> f64 {
    schedule.remaining_time(total_iters, done_iters, base_iter_s, penalty, DEFAULT_BACKWARD_SHARE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mode_text_round_trips_and_rejects_unknown() {
        for m in [FreezeMode::Off, FreezeMode::Conservative, FreezeMode::Auto] {
            assert_eq!(m.to_string().parse::<FreezeMode>().unwrap(), m);
        }
        assert_eq!(" AUTO ".parse::<FreezeMode>().unwrap(), FreezeMode::Auto);
        let e = "aggressive".parse::<FreezeMode>().unwrap_err().to_string();
        assert!(e.contains("aggressive") && e.contains("off, conservative or auto"), "{e}");
    }

    #[test]
    fn schedule_parses_example_and_rejects_bad_steps() {
        let s: FreezeSchedule = "0.30:0.25,0.60:0.50".parse().unwrap();
        assert_eq!(s.steps(), &[(0.3, 0.25), (0.6, 0.5)]);
        assert_eq!(s.to_string(), "0.3:0.25,0.6:0.5");
        assert_eq!(s.frozen_fraction(0.1), 0.0);
        assert_eq!(s.frozen_fraction(0.3), 0.25);
        assert_eq!(s.frozen_fraction(0.99), 0.5);
        for (bad, needle) in [
            ("0.6:0.25,0.3:0.5", "step 2 progress"),
            ("0.3:0.5,0.6:0.25", "step 2 fraction"),
            ("1.0:0.5", "step 1 progress"),
            ("0.5:1.0", "step 1 fraction"),
            ("0.5-0.2", "step 1"),
            ("0.2:0.1,x:0.2", "step 2"),
        ] {
            let e = bad.parse::<FreezeSchedule>().unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        assert!("none".parse::<FreezeSchedule>().unwrap().is_off());
        // Serde uses the validated text form.
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"0.3:0.25,0.6:0.5\"");
        assert_eq!(serde_json::from_str::<FreezeSchedule>(&json).unwrap(), s);
        let e = serde_json::from_str::<FreezeSchedule>("\"0.6:0.5,0.3:0.6\"").unwrap_err().to_string();
        assert!(e.contains("step 2 progress"), "{e}");
    }

    #[test]
    fn conservative_freezes_later_and_less_than_auto() {
        let c = FreezeSchedule::for_mode(FreezeMode::Conservative, 24);
        let a = FreezeSchedule::for_mode(FreezeMode::Auto, 24);
        assert!(FreezeSchedule::for_mode(FreezeMode::Off, 24).is_off());
        assert!(c.steps()[0].0 > a.steps()[0].0);
        for p in [0.2, 0.4, 0.6, 0.8, 0.95] {
            assert!(c.frozen_fraction(p) <= a.frozen_fraction(p));
        }
        assert!(c.frozen_fraction(0.99) < a.frozen_fraction(0.99));
        // Quantized to whole layers: 6 layers -> 0.75 * 6 = 4.5 -> 4/6.
        let q = FreezeSchedule::for_mode(FreezeMode::Auto, 6);
        assert!((q.frozen_fraction(0.99) - 4.0 / 6.0).abs() < 1e-12);
        // One layer cannot be partly frozen.
        assert!(FreezeSchedule::for_mode(FreezeMode::Auto, 1).is_off());
    }

    #[test]
    fn iteration_time_factor_follows_backward_share() {
        let s: FreezeSchedule = "0.5:0.5".parse().unwrap();
        assert_eq!(s.iteration_time_factor(0.2, DEFAULT_BACKWARD_SHARE), 1.0);
        assert!((s.iteration_time_factor(0.7, DEFAULT_BACKWARD_SHARE) - (1.0 - 1.0 / 3.0)).abs() < 1e-12);
        // All-communication iteration: half frozen halves the time.
        assert!((s.iteration_time_factor(0.7, backward_share(1.0)) - 0.5).abs() < 1e-12);
        assert!(backward_share(0.3) > DEFAULT_BACKWARD_SHARE);
    }

    #[test]
    fn remaining_time_integrates_steps_exactly() {
        // Freeze half at 50 %: second half runs at 2/3 time; no penalty.
        let s: FreezeSchedule = "0.5:0.5".parse().unwrap();
        let t = s.remaining_time(1000.0, 0.0, 1.0, 1.0, DEFAULT_BACKWARD_SHARE);
        assert!((t - (500.0 + 500.0 * 2.0 / 3.0)).abs() < 1e-9, "{t}");
        // From 75 % progress only the frozen part remains.
        let t = s.remaining_time(1000.0, 750.0, 1.0, 1.0, DEFAULT_BACKWARD_SHARE);
        assert!((t - 250.0 * 2.0 / 3.0).abs() < 1e-9, "{t}");
        // Penalty adds iterations: auto with 1.05 costs 5 % more iterations.
        let p = FreezeProfile::for_mode(FreezeMode::Auto, 0);
        let full = p.remaining_time(1000.0, 0.0, 1.0);
        let expect = 1050.0 * (0.3 + 0.2 * (1.0 - 0.25 * 2.0 / 3.0) + 0.2 * (1.0 - 0.5 * 2.0 / 3.0) + 0.3 * 0.5);
        assert!((full - expect).abs() < 1e-9, "{full} vs {expect}");
        assert!(full < 1000.0, "auto freezing should pay off overall: {full}");
        assert_eq!(p.remaining_time(1000.0, 2000.0, 1.0), 0.0);
    }

    #[test]
    fn penalty_is_configurable_and_never_below_one() {
        assert_eq!(penalty_factor(FreezeMode::Off), 1.0);
        assert_eq!(penalty_factor(FreezeMode::Conservative), 1.02);
        assert_eq!(penalty_factor(FreezeMode::Auto), 1.05);
        let p = FreezePenalty { conservative: 0.5, auto: 1.2 };
        assert_eq!(p.factor(FreezeMode::Conservative), 1.0);
        assert_eq!(p.factor(FreezeMode::Auto), 1.2);
    }

    fn schedule_strategy() -> impl Strategy<Value = FreezeSchedule> {
        proptest::collection::vec((1u32..1000, 0u32..1000), 0..6).prop_map(|mut v| {
            v.sort();
            v.dedup_by_key(|x| x.0);
            let mut fr: Vec<u32> = v.iter().map(|x| x.1).collect();
            fr.sort();
            let steps = v.iter().zip(fr).map(|(&(p, _), f)| (p as f64 / 1000.0, f as f64 / 1000.0)).collect();
            FreezeSchedule::new(steps).unwrap()
        })
    }

    proptest! {
        #[test]
        fn schedule_round_trips_through_text(s in schedule_strategy()) {
            let back: FreezeSchedule = s.to_string().parse().unwrap();
            prop_assert_eq!(back, s);
        }

        #[test]
        fn freezing_off_factor_is_one(p in 0.0f64..=1.0, b in 0.0f64..=1.0, total in 1.0f64..1e6,
                                       done_frac in 0.0f64..=1.0, it in 1e-3f64..10.0) {
            let off = FreezeSchedule::for_mode(FreezeMode::Off, 32);
            prop_assert_eq!(off.iteration_time_factor(p, b), 1.0);
            let t = off.remaining_time(total, total * done_frac, it, penalty_factor(FreezeMode::Off), b);
            prop_assert!((t - total * (1.0 - done_frac) * it).abs() <= 1e-9 * total * it);
        }

        #[test]
        fn remaining_time_monotone_in_done(s in schedule_strategy(), total in 1.0f64..1e6,
                                           a in 0.0f64..1.2, b in 0.0f64..1.2, pen in 1.0f64..1.2) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let t_lo = s.remaining_time(total, lo * total, 0.5, pen, DEFAULT_BACKWARD_SHARE);
            let t_hi = s.remaining_time(total, hi * total, 0.5, pen, DEFAULT_BACKWARD_SHARE);
            prop_assert!(t_hi <= t_lo + 1e-9 * total, "{} > {}", t_hi, t_lo);
            prop_assert!(t_hi >= 0.0);
        }

        #[test]
        fn factor_is_in_unit_interval_and_non_increasing(s in schedule_strategy(), p in 0.0f64..1.0, q in 0.0f64..1.0) {
            let (lo, hi) = if p <= q { (p, q) } else { (q, p) };
            let (f_lo, f_hi) = (s.iteration_time_factor(lo, DEFAULT_BACKWARD_SHARE), s.iteration_time_factor(hi, DEFAULT_BACKWARD_SHARE));
            prop_assert!(f_hi <= f_lo && f_hi > 0.0 && f_lo <= 1.0);
        }
    }
}
