//! Iteration timings from a training command's output.
//!
//! The documented line format is `cellsched-iter <seconds>` (anywhere on a
//! line, e.g. after a logger prefix; seconds is a positive decimal such as
//! `0.2315` or `2.3e-1`). For existing logs, `--regex RE` with exactly one
//! capture group that matches the seconds, e.g. `iter time: ([0-9.]+) s`;
//! `--regex-unit ms` reads the captured value as milliseconds.
use crate::error::ProfilerError;
use crate::sampler::Window;
use regex::Regex;

/// The marker of the built-in line format.
pub const ITER_MARKER: &str = "cellsched-iter";

/// Reads seconds-per-iteration values from output lines.
#[derive(Debug, Clone)]
pub struct IterParser {
    regex: Option<Regex>,
    scale: f64,
}

impl Default for IterParser {
    fn default() -> Self {
        IterParser {
            regex: None,
            scale: 1.0,
        }
    }
}

impl IterParser {
    /// The built-in `cellsched-iter <seconds>` format only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also accepts lines matching `re`, whose one capture group is the time,
    /// multiplied by `scale` to get seconds (1.0 for s, 0.001 for ms).
    pub fn with_regex(re: &str, scale: f64) -> Result<Self, ProfilerError> {
        let regex = Regex::new(re)
            .map_err(|e| ProfilerError::invalid("--regex", re, format!("a valid regex ({e})")))?;
        if regex.captures_len() != 2 {
            return Err(ProfilerError::invalid(
                "--regex",
                re,
                format!(
                    "exactly one capture group for the iteration time, found {}",
                    regex.captures_len() - 1
                ),
            ));
        }
        Ok(IterParser {
            regex: Some(regex),
            scale,
        })
    }

    /// Seconds of one iteration if `line` reports one.
    pub fn parse_line(&self, line: &str) -> Option<f64> {
        if let Some(pos) = line.find(ITER_MARKER) {
            let rest = &line[pos + ITER_MARKER.len()..];
            if rest.starts_with(|c: char| c.is_whitespace() || c == ':' || c == '=') {
                let tok =
                    rest.trim_start_matches(|c: char| c.is_whitespace() || c == ':' || c == '=');
                let tok = tok.split_whitespace().next().unwrap_or("");
                if let Some(v) = valid(tok.parse().ok()) {
                    return Some(v);
                }
            }
        }
        let re = self.regex.as_ref()?;
        let cap = re.captures(line)?.get(1)?;
        valid(
            cap.as_str()
                .trim()
                .parse::<f64>()
                .ok()
                .map(|v| v * self.scale),
        )
    }
}

fn valid(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite() && *x > 0.0)
}

/// The measurement from a series of iteration times.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IterStats {
    /// Iterations seen in total.
    pub seen: usize,
    /// Leading iterations discarded as warm-up.
    pub warmup: usize,
    /// Iterations measured (seen − warm-up).
    pub measured: usize,
    /// Median seconds per iteration of the measured ones.
    pub median_s: f64,
    /// Mean seconds per iteration.
    pub mean_s: f64,
    /// Smallest and largest measured time.
    pub min_s: f64,
    /// Largest measured time.
    pub max_s: f64,
}

/// Statistics after dropping the first `warmup` values; `None` if fewer than
/// `min_measured` remain (at least 1).
pub fn iter_stats(times: &[f64], warmup: usize, min_measured: usize) -> Option<IterStats> {
    let kept = times.get(warmup..)?;
    if kept.is_empty() || kept.len() < min_measured.max(1) {
        return None;
    }
    let mut v = kept.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median_s = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(IterStats {
        seen: times.len(),
        warmup,
        measured: n,
        median_s,
        mean_s: v.iter().sum::<f64>() / n as f64,
        min_s: v[0],
        max_s: v[n - 1],
    })
}

/// The span of the run the measured iterations cover, from the times the
/// iteration lines were read (`at_s`, seconds since start) and the times they
/// report (`times`): from the line ending the last warm-up iteration (with no
/// warm-up, from the first line minus the first iteration's own time) to the
/// last line. `None` when no iteration is left after the warm-up.
pub fn measured_window(at_s: &[f64], times: &[f64], warmup: usize) -> Option<Window> {
    let n = at_s.len().min(times.len());
    if n <= warmup {
        return None;
    }
    let end_s = at_s[n - 1];
    let start_s = if warmup > 0 { at_s[warmup - 1] } else { (at_s[0] - times[0]).max(0.0) };
    (start_s <= end_s).then_some(Window { start_s, end_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_format() {
        let p = IterParser::new();
        assert_eq!(p.parse_line("cellsched-iter 0.25"), Some(0.25));
        assert_eq!(
            p.parse_line("[rank0] 12:00:01 cellsched-iter 2.5e-1 loss=3.1"),
            Some(0.25)
        );
        assert_eq!(p.parse_line("cellsched-iter: 1.5"), Some(1.5));
        assert_eq!(p.parse_line("cellsched-iter=3"), Some(3.0));
        for bad in [
            "cellsched-iter",
            "cellsched-iter abc",
            "cellsched-iter -1",
            "cellsched-iter 0",
            "cellsched-iter NaN",
            "cellsched-iterations 5",
            "loss 0.3",
        ] {
            assert_eq!(p.parse_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn regex_format() {
        let p = IterParser::with_regex(r"step \d+ took ([0-9.]+)ms", 0.001).unwrap();
        assert_eq!(p.parse_line("step 10 took 250ms"), Some(0.25));
        assert_eq!(
            p.parse_line("cellsched-iter 0.5"),
            Some(0.5),
            "built-in lines still count"
        );
        assert_eq!(p.parse_line("step 10 took ms"), None);
        let e = IterParser::with_regex(r"took (\d+) (ms)", 1.0).unwrap_err();
        assert!(
            e.to_string().contains("exactly one capture group") && e.exit_code() == 2,
            "{e}"
        );
        assert!(IterParser::with_regex(r"took ([0-9", 1.0)
            .unwrap_err()
            .to_string()
            .contains("--regex"));
        assert!(IterParser::with_regex(r"took \d+", 1.0).is_err());
    }

    #[test]
    fn warmup_and_median() {
        let t = [5.0, 4.0, 1.0, 3.0, 2.0];
        let s = iter_stats(&t, 2, 1).unwrap();
        assert_eq!((s.seen, s.warmup, s.measured), (5, 2, 3));
        assert_eq!(
            (s.median_s, s.mean_s, s.min_s, s.max_s),
            (2.0, 2.0, 1.0, 3.0)
        );
        assert_eq!(iter_stats(&t[..4], 2, 1).unwrap().median_s, 2.0);
        assert!(iter_stats(&t, 5, 1).is_none());
        assert!(iter_stats(&t, 7, 1).is_none());
        assert!(iter_stats(&t, 2, 4).is_none());
    }

    #[test]
    fn window_of_the_measured_iterations() {
        // Lines read at 12, 13, 14, 15 s, each reporting 1 s; 2 warm-up.
        let at = [12.0, 13.0, 14.0, 15.0];
        let t = [1.0; 4];
        assert_eq!(measured_window(&at, &t, 2), Some(Window { start_s: 13.0, end_s: 15.0 }));
        assert_eq!(measured_window(&at, &t, 0), Some(Window { start_s: 11.0, end_s: 15.0 }));
        assert_eq!(measured_window(&at, &[20.0; 4], 0).unwrap().start_s, 0.0, "clamped at the run's start");
        assert_eq!(measured_window(&at, &t, 3), Some(Window { start_s: 14.0, end_s: 15.0 }));
        assert_eq!(measured_window(&at, &t, 4), None);
        assert_eq!(measured_window(&[], &[], 0), None);
    }
}
