//! The built-in probe (`cellsched profile run --probe`): a small synthetic
//! CPU workload that prints `cellsched-iter <seconds>` lines, so the profiling
//! flow can be exercised without a user script or a GPU. Its timings measure
//! this CPU, NOT a GPU; runs with it are labelled as such.
use std::io::Write;
use std::time::Instant;

/// One probe iteration: a dense `n`×`n` matrix product; returns a checksum
/// so the work cannot be optimised away.
pub fn probe_iteration(n: usize) -> f64 {
    let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64 * 0.5).collect();
    let b: Vec<f64> = (0..n * n).map(|i| (i % 5) as f64 * 0.25).collect();
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            for j in 0..n {
                c[i * n + j] += aik * b[k * n + j];
            }
        }
    }
    c.iter().sum()
}

/// Runs `iters` probe iterations of size `n`, printing one
/// `cellsched-iter <seconds>` line per iteration to `out`.
pub fn run_probe(out: &mut impl Write, iters: u64, n: usize) -> std::io::Result<f64> {
    let mut check = 0.0;
    for _ in 0..iters {
        let t = Instant::now();
        check += probe_iteration(n);
        writeln!(
            out,
            "{} {:.6}",
            crate::iterline::ITER_MARKER,
            t.elapsed().as_secs_f64().max(1e-6)
        )?;
        out.flush()?;
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterline::IterParser;

    #[test]
    fn probe_prints_parsable_lines() {
        let mut buf = Vec::new();
        let check = run_probe(&mut buf, 3, 8).unwrap();
        assert!(check > 0.0);
        let text = String::from_utf8(buf).unwrap();
        let p = IterParser::new();
        let times: Vec<f64> = text.lines().filter_map(|l| p.parse_line(l)).collect();
        assert_eq!(times.len(), 3, "{text}");
    }
}
