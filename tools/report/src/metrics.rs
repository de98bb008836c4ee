//! OpenMetrics text for monitoring (`cellsched report --openmetrics`), also
//! readable by node_exporter's textfile collector.
//!
//! Sources, each named in the metric's HELP text:
//! - the live queue (the caller counts pending and running GPU jobs per GPU
//!   type from `squeue` and the AdminComments);
//! - the report's [`Summary`] over a sacct window: allocated GPU-hours and
//!   utilization per type (measured), and the estimator's error, predicted
//!   vs measured seconds per iteration and run time;
//! - slurmctld's log ([`CtldLog::parse`]): DL jobs left stock and why, and
//!   the plugins' own timings (`update copied ... in N us`, `ranking pass ...
//!   snapshot N us`, `re-planning pass ... snapshot N us`).
use crate::summary::{ErrorStats, Summary};
use std::collections::BTreeMap;
use std::fmt::Write;

/// What slurmctld's log says about the plugins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CtldLog {
    /// `DL job left stock: <why>` lines per normalized reason ([`stock_reason`]).
    pub left_stock: BTreeMap<String, u64>,
    /// Microseconds per plugin step (`update`, `ranking_snapshot`, `replan_snapshot`).
    pub step_us: BTreeMap<&'static str, Vec<f64>>,
}

/// A `left stock` reason as a low-cardinality label: the text before the
/// first `;` or `(`, digit runs replaced by `N`, at most 80 characters.
pub fn stock_reason(why: &str) -> String {
    let head = why.split([';', '(']).next().unwrap_or("").trim();
    let mut out = String::new();
    let mut in_digits = false;
    for c in head.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out.chars().take(80).collect()
}

/// The number right before ` us` after `marker` in `line`.
fn us_after(line: &str, marker: &str) -> Option<f64> {
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.split_once(" us")?.0.trim().parse().ok()
}

impl CtldLog {
    /// Reads slurmctld log text.
    pub fn parse(text: &str) -> CtldLog {
        let mut l = CtldLog::default();
        for line in text.lines() {
            if let Some(i) = line.find("DL job left stock: ") {
                *l.left_stock.entry(stock_reason(&line[i + "DL job left stock: ".len()..])).or_default() += 1;
            } else if line.contains("site_factor/cellsched: update copied ") {
                if let Some(us) = us_after(line, ") in ") {
                    l.step_us.entry("update").or_default().push(us);
                }
            } else if line.contains("site_factor/cellsched: ranking pass ") {
                if let Some(us) = us_after(line, "snapshot ") {
                    l.step_us.entry("ranking_snapshot").or_default().push(us);
                }
            } else if line.contains("job_submit/cellsched: re-planning pass ") {
                if let Some(us) = us_after(line, "snapshot ") {
                    l.step_us.entry("replan_snapshot").or_default().push(us);
                }
            }
        }
        l
    }
}

/// Jobs in the live queue of one GPU type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Pending jobs.
    pub pending: u64,
    /// Running jobs.
    pub running: u64,
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "# HELP {name} {help}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], v: f64) {
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
    let l = if l.is_empty() { String::new() } else { format!("{{{}}}", l.join(",")) };
    let _ = writeln!(out, "{name}{l} {v}");
}

fn errors(out: &mut String, name: &str, help: &str, e: &Option<ErrorStats>) {
    let Some(e) = e else { return };
    family(out, name, "gauge", help);
    sample(out, name, &[("stat", "mape")], e.mape);
    sample(out, name, &[("stat", "median_ape")], e.median_ape);
    if let Some(b) = e.bias {
        sample(out, name, &[("stat", "bias")], b);
    }
    sample(out, name, &[("stat", "jobs")], e.n as f64);
}

/// The OpenMetrics exposition (ends with `# EOF`). `summary` is the sacct
/// window's (`None`: no jobs in it), `queue` the live counts per GPU type,
/// `ctld` what slurmctld's log says (`None`: no log given).
pub fn openmetrics(summary: Option<&Summary>, queue: &BTreeMap<String, QueueCounts>, ctld: Option<&CtldLog>) -> String {
    let mut o = String::new();
    family(&mut o, "cellsched_queue_pending_jobs", "gauge", "Pending GPU jobs per GPU type now (squeue; DL jobs by the Cell cellsched recorded in AdminComment).");
    for (t, c) in queue {
        sample(&mut o, "cellsched_queue_pending_jobs", &[("gpu_type", t)], c.pending as f64);
    }
    family(&mut o, "cellsched_running_jobs", "gauge", "Running GPU jobs per GPU type now (squeue).");
    for (t, c) in queue {
        sample(&mut o, "cellsched_running_jobs", &[("gpu_type", t)], c.running as f64);
    }
    if let Some(s) = summary {
        family(&mut o, "cellsched_gpu_hours", "gauge", "Allocated GPU-hours per GPU type over the report window (measured, sacct AllocTRES x elapsed).");
        for (t, u) in &s.per_type {
            sample(&mut o, "cellsched_gpu_hours", &[("gpu_type", t)], u.gpu_hours);
        }
        family(&mut o, "cellsched_gpu_utilization_ratio", "gauge", "GPU-hours over capacity x span per GPU type in the report window (measured).");
        for (t, u) in &s.per_type {
            if let Some(x) = u.utilization {
                sample(&mut o, "cellsched_gpu_utilization_ratio", &[("gpu_type", t)], x);
            }
        }
        errors(
            &mut o,
            "cellsched_iteration_time_error_ratio",
            "Estimator error, predicted (AdminComment iter_s) vs measured (the jobs' cellsched-iter lines, else run time / iterations) seconds per iteration, over the window's jobs: mape, median_ape, bias (signed, > 0 over-predicts) and jobs compared.",
            &s.iteration_time_error,
        );
        errors(
            &mut o,
            "cellsched_run_time_error_ratio",
            "Estimator error, predicted (declared iterations x iter_s) vs measured run time, over the window's jobs: mape, median_ape, bias and jobs compared.",
            &s.estimator_error,
        );
        family(&mut o, "cellsched_report_jobs", "gauge", "Jobs in the report window (sacct), and those with a cellsched decision.");
        sample(&mut o, "cellsched_report_jobs", &[("kind", "all")], s.jobs as f64);
        sample(&mut o, "cellsched_report_jobs", &[("kind", "with_decision")], s.with_decision as f64);
    }
    if let Some(l) = ctld {
        family(&mut o, "cellsched_jobs_left_stock", "gauge", "DL jobs job_submit/cellsched left to stock Slurm, per reason, in the given slurmctld log (`DL job left stock:` lines).");
        for (why, n) in &l.left_stock {
            sample(&mut o, "cellsched_jobs_left_stock", &[("reason", why)], *n as f64);
        }
        family(&mut o, "cellsched_plugin_step_seconds", "summary", "Plugin step durations from slurmctld's log (measured): update = site_factor_p_update under the job write lock, ranking_snapshot / replan_snapshot = the longest single hold of the read locks in a snapshot pass (the walk releases them between pieces).");
        for (step, v) in &l.step_us {
            sample(&mut o, "cellsched_plugin_step_seconds_count", &[("step", step)], v.len() as f64);
            sample(&mut o, "cellsched_plugin_step_seconds_sum", &[("step", step)], v.iter().sum::<f64>() / 1e6);
        }
        family(&mut o, "cellsched_plugin_step_max_seconds", "gauge", "Longest plugin step in the given slurmctld log (measured).");
        for (step, v) in &l.step_us {
            sample(&mut o, "cellsched_plugin_step_max_seconds", &[("step", step)], v.iter().copied().fold(0.0, f64::max) / 1e6);
        }
    }
    o.push_str("# EOF\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "[2026-11-23T12:00:00.000] job_submit/cellsched: DL job left stock: no Cell of exactly 3 GPUs can run gpt__125M (batch 7); the job's own GPU request is kept\n\
[2026-11-23T12:00:01.000] job_submit/cellsched: DL job left stock: no Cell of exactly 5 GPUs can run gpt__125M (batch 9); the job's own GPU request is kept\n\
[2026-11-23T12:00:02.000] site_factor/cellsched: update copied 12 ranked site factors (3 changed) in 150 us\n\
[2026-11-23T12:00:03.000] site_factor/cellsched: update copied 12 ranked site factors (0 changed) in 50 us\n\
[2026-11-23T12:00:04.000] site_factor/cellsched: ranking pass over 12 pending DL jobs (2 copied): snapshot 3300 us (the longest of 4 read-lock holds; 7100 us held in all, 12 us waiting for them), ranking 240 us\n\
[2026-11-23T12:00:05.000] job_submit/cellsched: re-planning pass over 4 pending DL jobs: snapshot 10700 us (read locks), planning 90 us, 1 moves\n\
[2026-11-23T12:00:06.000] sched: Allocate JobId=5\n";

    #[test]
    fn ctld_log_lines_are_counted_and_timed() {
        let l = CtldLog::parse(LOG);
        assert_eq!(l.left_stock.len(), 1, "numbers normalized into one reason: {:?}", l.left_stock);
        assert_eq!(l.left_stock["no Cell of exactly N GPUs can run gpt__NM"], 2);
        assert_eq!(l.step_us["update"], vec![150.0, 50.0]);
        assert_eq!(l.step_us["ranking_snapshot"], vec![3300.0]);
        assert_eq!(l.step_us["replan_snapshot"], vec![10700.0]);
    }

    #[test]
    fn exposition_has_types_labels_and_eof() {
        let l = CtldLog::parse(LOG);
        let mut q = BTreeMap::new();
        q.insert("a100".to_string(), QueueCounts { pending: 3, running: 2 });
        let text = openmetrics(None, &q, Some(&l));
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("cellsched_queue_pending_jobs{gpu_type=\"a100\"} 3\n"), "{text}");
        assert!(text.contains("cellsched_running_jobs{gpu_type=\"a100\"} 2\n"), "{text}");
        assert!(text.contains("cellsched_plugin_step_seconds_count{step=\"update\"} 2\n"), "{text}");
        assert!(text.contains("cellsched_plugin_step_seconds_sum{step=\"update\"} 0.0002\n"), "{text}");
        assert!(text.contains("cellsched_plugin_step_max_seconds{step=\"replan_snapshot\"} 0.0107\n"), "{text}");
        assert!(text.contains("cellsched_jobs_left_stock{reason=\"no Cell of exactly N GPUs can run gpt__NM\"} 2\n"), "{text}");
        // Every sample belongs to a declared family, each declared once.
        let mut declared = Vec::new();
        for line in text.lines() {
            if let Some(r) = line.strip_prefix("# TYPE ") {
                let name = r.split(' ').next().unwrap().to_string();
                assert!(!declared.contains(&name), "{name} declared twice");
                declared.push(name);
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(declared.iter().any(|d| name == d || name.strip_prefix(d.as_str()).is_some_and(|s| s == "_count" || s == "_sum")), "{line}");
            }
        }
        // Label values are escaped.
        assert_eq!(esc("a\"b\\c"), "a\\\"b\\\\c");
    }

    #[test]
    fn the_sample_grafana_dashboard_uses_only_metrics_we_emit() {
        let mut s = Summary::of(&[], None);
        s.per_type.insert("v100".into(), crate::summary::TypeUsage { jobs: 1, gpu_hours: 1.0, capacity: Some(8), utilization: Some(0.5) });
        s.iteration_time_error = Some(ErrorStats { n: 1, mape: 0.1, median_ape: 0.1, bias: Some(0.1) });
        s.estimator_error = s.iteration_time_error;
        let mut q = BTreeMap::new();
        q.insert("v100".to_string(), QueueCounts::default());
        let text = openmetrics(Some(&s), &q, Some(&CtldLog::parse(LOG)));
        let emitted: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split(['{', ' ']).next().unwrap()).collect();
        let dash: serde_json::Value = serde_json::from_str(include_str!("../../../etc/grafana/cellsched.json")).expect("dashboard JSON");
        let mut used = 0;
        for p in dash["panels"].as_array().expect("panels") {
            for t in p["targets"].as_array().expect("targets") {
                let expr = t["expr"].as_str().expect("expr");
                for (i, _) in expr.match_indices("cellsched_") {
                    let name: String = expr[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    assert!(emitted.contains(&name.as_str()), "dashboard uses {name}, not emitted: {emitted:?}");
                    used += 1;
                }
            }
        }
        assert!(used >= 10, "{used}");
    }

    #[test]
    fn summary_metrics_carry_gpu_hours_and_errors() {
        let mut s = Summary::of(&[], None);
        s.per_type.insert("v100".into(), crate::summary::TypeUsage { jobs: 2, gpu_hours: 1.5, capacity: Some(16), utilization: Some(0.25) });
        s.iteration_time_error = Some(ErrorStats { n: 4, mape: 0.15, median_ape: 0.04, bias: Some(-0.1) });
        let text = openmetrics(Some(&s), &BTreeMap::new(), None);
        assert!(text.contains("cellsched_gpu_hours{gpu_type=\"v100\"} 1.5\n"), "{text}");
        assert!(text.contains("cellsched_gpu_utilization_ratio{gpu_type=\"v100\"} 0.25\n"), "{text}");
        assert!(text.contains("cellsched_iteration_time_error_ratio{stat=\"bias\"} -0.1\n"), "{text}");
        assert!(text.contains("cellsched_iteration_time_error_ratio{stat=\"jobs\"} 4\n"), "{text}");
        assert!(!text.contains("cellsched_run_time_error_ratio"), "no estimate, no family: {text}");
        assert!(!text.contains("left_stock"), "no log, no log metrics");
    }
}
