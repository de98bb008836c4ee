//! How fast a job progresses: a base iteration time, optionally sped up by
//! layer freezing as a piecewise-constant speedup over training progress.
//!
//! Freezing (IceFrog) makes later iterations faster and costs extra
//! iterations (`penalty` >= 1 multiplies the iteration count); the profile is
//! built from the core's freezing model (see [`crate::core_times`]).

/// Piecewise-constant speedup over progress in [0, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedProfile {
    /// `(progress_from, speedup)`, sorted, first at 0.0; speedup >= 1.
    pub segments: Vec<(f64, f64)>,
    /// Factor on the number of iterations (>= 1).
    pub penalty: f64,
}

impl SpeedProfile {
    /// No freezing: speedup 1 everywhere, no penalty.
    pub fn none() -> Self {
        SpeedProfile { segments: vec![(0.0, 1.0)], penalty: 1.0 }
    }

    fn seg_end(&self, i: usize) -> f64 {
        self.segments.get(i + 1).map_or(1.0, |s| s.0)
    }

    /// Seconds to go from progress `p0` to 1 for `iters` iterations (before
    /// the penalty) at `iter_s` seconds per unfrozen iteration.
    pub fn time_to_finish(&self, p0: f64, iters: f64, iter_s: f64) -> f64 {
        let total = iters * self.penalty * iter_s;
        let mut t = 0.0;
        for (i, &(from, speed)) in self.segments.iter().enumerate() {
            let lo = from.max(p0);
            let hi = self.seg_end(i);
            if hi > lo {
                t += (hi - lo) * total / speed;
            }
        }
        t
    }

    /// Progress reached after running `dt` seconds from progress `p0`.
    pub fn progress_after(&self, p0: f64, dt: f64, iters: f64, iter_s: f64) -> f64 {
        let total = iters * self.penalty * iter_s;
        if total <= 0.0 {
            return 1.0;
        }
        let mut left = dt;
        let mut p = p0;
        for (i, &(_, speed)) in self.segments.iter().enumerate() {
            let hi = self.seg_end(i);
            if hi <= p {
                continue;
            }
            let need = (hi - p) * total / speed;
            if left < need {
                return (p + left * speed / total).min(1.0);
            }
            left -= need;
            p = hi;
        }
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piecewise_time_and_inverse() {
        let none = SpeedProfile::none();
        assert_eq!(none.time_to_finish(0.0, 100.0, 2.0), 200.0);
        assert_eq!(none.progress_after(0.0, 50.0, 100.0, 2.0), 0.25);
        let f = SpeedProfile { segments: vec![(0.0, 1.0), (0.5, 2.0)], penalty: 1.1 };
        // 110 iterations x 1 s: first half 55 s, second half 27.5 s.
        assert!((f.time_to_finish(0.0, 100.0, 1.0) - 82.5).abs() < 1e-9);
        assert!((f.time_to_finish(0.75, 100.0, 1.0) - 13.75).abs() < 1e-9);
        assert!((f.progress_after(0.0, 55.0 + 13.75, 100.0, 1.0) - 0.75).abs() < 1e-9);
        assert_eq!(f.progress_after(0.2, 1e9, 100.0, 1.0), 1.0);
    }
}
