//! A seeded PRNG so generated traces are reproducible across platforms and
//! dependency versions: core's SplitMix64 with the simulator's distributions
//! (uniform range, normal, exponential, weighted choice) on top.
use cellsched_core::rng::SplitMix64;

/// SplitMix64, seeded as the simulator always has (`seed` mixed with a constant).
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed ^ 0x9E37_79B9_7F4A_7C15))
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        self.0.next_f64()
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(1e-300);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).max(1e-300).ln()
    }
    /// Index drawn with probability proportional to `weights`.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.f64() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(8).next_u64(), xs[0]);
        let mut r = Rng::new(1);
        let mean = (0..20000).map(|_| r.exp(2.0)).sum::<f64>() / 20000.0;
        assert!((mean - 2.0).abs() < 0.1, "{mean}");
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.f64())));
        let hits = (0..1000).filter(|_| r.weighted(&[0.0, 1.0, 0.0]) == 1).count();
        assert_eq!(hits, 1000);
    }
}
