//! Order statistics the cost model needs: the slowest of `n` ranks whose
//! times vary independently (stragglers in a synchronous step), and the
//! longest of a batch of variable-length samples.
use crate::model::SampleLengths;

/// Values of the maximum of 1, 2, 4, … 1024 standard normal draws.
const DRAWS_POW2: usize = 11;

/// `table` (at 1, 2, 4, … draws) at `n` draws: linear in log2 between
/// powers of two, `beyond(last value, log2 n)` past the last.
fn at_draws(table: &[f64; DRAWS_POW2], n: f64, beyond: impl Fn(f64, f64) -> f64) -> f64 {
    if n <= 1.0 {
        return table[0];
    }
    let l = n.log2();
    let last = (DRAWS_POW2 - 1) as f64;
    if l >= last {
        return beyond(table[DRAWS_POW2 - 1], l);
    }
    let i = l.floor() as usize;
    table[i] + (table[i + 1] - table[i]) * (l - i as f64)
}

/// Expected maximum of `n` independent standard normal draws (exact values
/// at powers of two, linear in log2 between them; grows like √(2 ln n)).
pub(super) fn expected_max_normal(n: f64) -> f64 {
    const MEAN: [f64; DRAWS_POW2] = [0.0, 0.5642, 1.0294, 1.4236, 1.7660, 2.0697, 2.3437, 2.5946, 2.8269, 3.0439, 3.2482];
    // Beyond 1024 ranks: the last step's slope per doubling.
    at_draws(&MEAN, n, |v, l| v + (l - (DRAWS_POW2 - 1) as f64) * (MEAN[DRAWS_POW2 - 1] - MEAN[DRAWS_POW2 - 2]))
}

/// Standard deviation of the maximum of `n` independent standard normal
/// draws (exact at powers of two, linear in log2 between them; 1 for one
/// draw, shrinking like 1 / √(2 ln n)).
fn sd_max_normal(n: f64) -> f64 {
    const SD: [f64; DRAWS_POW2] = [1.0, 0.8256, 0.7012, 0.6107, 0.5431, 0.4915, 0.4511, 0.4186, 0.3920, 0.3697, 0.3508];
    at_draws(&SD, n, |v, l| v * ((DRAWS_POW2 - 1) as f64 / l).sqrt())
}

/// Coefficient of variation of the longest sample's length in a micro-batch
/// of `mbs` samples of lengths `l`, samples cut at `cap` tokens (0: not
/// cut): lengths taken as log-normal with this mean and deviation, the
/// longest of `mbs` has the spread of the maximum of `mbs` normal draws in
/// log space (shrinking as the batch grows), and no more than its expected
/// distance below the cap (none once the batches all reach it).
pub(super) fn padded_length_cv(l: &SampleLengths, mbs: f64, cap: u32) -> f64 {
    let cv = l.sd / l.mean;
    let sigma = (1.0 + cv * cv).ln().sqrt();
    let spread = sigma * sd_max_normal(mbs);
    if cap == 0 {
        return spread;
    }
    let log_longest = l.mean.ln() - sigma * sigma / 2.0 + sigma * expected_max_normal(mbs);
    spread.min((f64::from(cap).ln() - log_longest).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// E[max of n standard normals] by the midpoint rule on [-10, 10].
    fn integrated_max(n: f64) -> f64 {
        integrated_moments(n).0
    }

    /// Mean and standard deviation of the max of n standard normals.
    fn integrated_moments(n: f64) -> (f64, f64) {
        let (h, mut m1, mut m2) = (1e-3, 0.0, 0.0);
        for i in 0..20_000 {
            let x = -10.0 + (i as f64 + 0.5) * h;
            let pdf = (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let w = n * pdf * normal_cdf(x).powf(n - 1.0) * h;
            (m1, m2) = (m1 + x * w, m2 + x * x * w);
        }
        (m1, (m2 - m1 * m1).sqrt())
    }

    /// A padded batch's length varies less the more samples it holds, and
    /// not at all once every batch reaches the cut.
    #[test]
    fn padded_batches_vary_less_as_they_grow_and_not_at_the_cut() {
        let multi30k = SampleLengths { mean: 14.9, sd: 4.2 };
        let cv = |b: f64| padded_length_cv(&multi30k, b, 50);
        assert!(cv(1.0) > cv(16.0) && cv(16.0) > cv(256.0) && cv(256.0) > 0.0);
        // Sampled from the tokenised Multi30k text: 13% at 64 pairs.
        assert!((cv(64.0) - 0.125).abs() < 0.01, "{}", cv(64.0));
        let long = SampleLengths { mean: 180.0, sd: 100.0 };
        assert!(padded_length_cv(&long, 8.0, 512) > 0.2 && padded_length_cv(&long, 64.0, 512) == 0.0 && padded_length_cv(&long, 64.0, 0) > 0.2);
    }

    /// The spread of the longest of n draws: 1 for one, the integrated
    /// values at powers of two and between them, shrinking with n.
    #[test]
    fn the_maximum_of_more_draws_varies_less() {
        assert_eq!(sd_max_normal(1.0), 1.0);
        let mut last = 1.0;
        for n in [2.0, 3.0, 8.0, 48.0, 100.0, 1024.0, 4096.0] {
            let s = sd_max_normal(n);
            assert!((s - integrated_moments(n).1).abs() < 0.01, "{n}: {s} vs {}", integrated_moments(n).1);
            assert!(s < last, "{n}");
            last = s;
        }
    }

    /// Φ(x) by the Abramowitz–Stegun 7.1.26 erf (|error| < 1.5e-7).
    fn normal_cdf(x: f64) -> f64 {
        let z = x.abs() / std::f64::consts::SQRT_2;
        let t = 1.0 / (1.0 + 0.3275911 * z);
        let erf = 1.0 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * (-z * z).exp();
        0.5 * (1.0 + if x < 0.0 { -erf } else { erf })
    }

    /// The expected maximum of n standard normals: 0 for one rank, the exact
    /// values at powers of two, increasing and below √(2 ln n).
    #[test]
    fn expected_max_of_ranks_grows_like_sqrt_log() {
        assert_eq!(expected_max_normal(1.0), 0.0);
        assert!((expected_max_normal(2.0) - 1.0 / std::f64::consts::PI.sqrt()).abs() < 1e-3);
        // Against a direct numerical integration of n·x·φ(x)·Φ(x)^(n-1).
        for n in [4.0, 32.0, 100.0, 1024.0] {
            assert!((expected_max_normal(n) - integrated_max(n)).abs() < 0.02, "{n}: {} vs {}", expected_max_normal(n), integrated_max(n));
        }
        let mut last = 0.0;
        for n in [2.0, 3.0, 4.0, 8.0, 16.0, 100.0, 1024.0, 4096.0] {
            let e = expected_max_normal(n);
            assert!(e > last && e < (2.0 * f64::ln(n)).sqrt(), "{n}: {e}");
            last = e;
        }
    }
}
