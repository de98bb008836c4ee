//! Order statistics the cost model needs: the slowest of `n` ranks whose
//! times vary independently (stragglers in a synchronous step).

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
pub(crate) fn expected_max_normal(n: f64) -> f64 {
    const MEAN: [f64; DRAWS_POW2] = [0.0, 0.5642, 1.0294, 1.4236, 1.7660, 2.0697, 2.3437, 2.5946, 2.8269, 3.0439, 3.2482];
    // Beyond 1024 ranks: the last step's slope per doubling.
    at_draws(&MEAN, n, |v, l| v + (l - (DRAWS_POW2 - 1) as f64) * (MEAN[DRAWS_POW2 - 1] - MEAN[DRAWS_POW2 - 2]))
}

/// Standard deviation of the maximum of `n` independent standard normal
/// draws (exact at powers of two, linear in log2 between them; 1 for one
/// draw, shrinking like 1 / √(2 ln n)).
pub(crate) fn sd_max_normal(n: f64) -> f64 {
    const SD: [f64; DRAWS_POW2] = [1.0, 0.8256, 0.7012, 0.6107, 0.5431, 0.4915, 0.4511, 0.4186, 0.3920, 0.3697, 0.3508];
    at_draws(&SD, n, |v, l| v * ((DRAWS_POW2 - 1) as f64 / l).sqrt())
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
