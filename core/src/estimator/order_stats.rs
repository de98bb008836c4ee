//! Order statistics the cost model needs: the slowest of `n` ranks whose
//! times vary independently (stragglers in a synchronous step).

/// Expected maximum of `n` independent standard normal draws (exact values
/// at powers of two, linear in log2 between them; grows like √(2 ln n)).
pub(super) fn expected_max_normal(n: f64) -> f64 {
    const AT_POW2: [f64; 11] = [0.0, 0.5642, 1.0294, 1.4236, 1.7660, 2.0427, 2.3187, 2.5306, 2.7460, 2.9322, 3.1142];
    if n <= 1.0 {
        return 0.0;
    }
    let l = n.log2();
    let last = (AT_POW2.len() - 1) as f64;
    if l >= last {
        // Beyond 1024 ranks: the last step's slope per doubling.
        return AT_POW2[AT_POW2.len() - 1] + (l - last) * (AT_POW2[AT_POW2.len() - 1] - AT_POW2[AT_POW2.len() - 2]);
    }
    let i = l.floor() as usize;
    AT_POW2[i] + (AT_POW2[i + 1] - AT_POW2[i]) * (l - i as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected maximum of n standard normals: 0 for one rank, the exact
    /// values at powers of two, increasing and below √(2 ln n).
    #[test]
    fn expected_max_of_ranks_grows_like_sqrt_log() {
        assert_eq!(expected_max_normal(1.0), 0.0);
        assert!((expected_max_normal(2.0) - 1.0 / std::f64::consts::PI.sqrt()).abs() < 1e-3);
        let mut last = 0.0;
        for n in [2.0, 3.0, 4.0, 8.0, 16.0, 100.0, 1024.0, 4096.0] {
            let e = expected_max_normal(n);
            assert!(e > last && e < (2.0 * f64::ln(n)).sqrt(), "{n}: {e}");
            last = e;
        }
    }
}
