//! Terminal tables in sacct/sreport style (comfy-table) and CSV output.
use crate::error::ReportError;
use crate::record::JobRecord;
use crate::summary::{ErrorStats, Report, Stats, Summary};
use comfy_table::{presets::ASCII_BORDERS_ONLY_CONDENSED, CellAlignment, Table};

/// Seconds as `[D-]HH:MM:SS`, like sacct's Elapsed; `-` for none.
pub fn hms(s: Option<f64>) -> String {
    let Some(s) = s else { return "-".into() };
    let t = s.round().max(0.0) as u64;
    let (d, h, m, sec) = (t / 86_400, t / 3600 % 24, t / 60 % 60, t % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(ASCII_BORDERS_ONLY_CONDENSED)
        .set_header(header.to_vec());
    t
}

fn right_align(t: &mut Table, cols: &[usize]) {
    for c in cols {
        if let Some(col) = t.column_mut(*c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// The per-job table.
pub fn jobs_table(jobs: &[JobRecord]) -> Table {
    let mut t = table(&[
        "JobID",
        "JobName",
        "User",
        "State",
        "GPUs",
        "QueueDelay",
        "Run",
        "JCT",
        "Predicted",
        "PredIter",
        "MeasIter",
        "IterErr",
        "Cell",
        "Plan",
        "Reconfs",
        "ReconfCost",
        "Restart",
    ]);
    for j in jobs {
        let (cell, plan) = match &j.decision {
            Some(d) => (d.cell.to_string(), d.plan.to_string()),
            None => ("-".into(), "-".into()),
        };
        let run = if j.start.is_some() {
            Some(j.run_s())
        } else {
            None
        };
        t.add_row(vec![
            j.job_id_text.clone(),
            j.name.clone(),
            j.user.clone(),
            j.state.clone(),
            j.gpus_text(),
            hms(j.queue_delay_s),
            hms(run),
            hms(j.jct_s),
            hms(j.predicted_run_s),
            secs(j.predicted_iter_s()),
            match (&j.measured_iter_s, &j.measured_from) {
                (Some(m), Some(from)) => format!("{} ({from})", secs(Some(*m))),
                _ => "-".into(),
            },
            match (j.predicted_iter_s(), j.measured_iter_s) {
                (Some(p), Some(m)) if m > 0.0 => format!("{:+.1}%", (p - m) / m * 100.0),
                _ => "-".into(),
            },
            cell,
            plan,
            if j.tags.elastic || j.tags.reconfs > 0 { j.tags.reconfs.to_string() } else { "-".into() },
            if j.tags.reconfs > 0 { hms(Some(j.tags.reconf_cost_s)) } else { "-".into() },
            hms(j.measured_restart_s),
        ]);
    }
    right_align(&mut t, &[5, 6, 7, 8, 9, 10, 11, 14, 15, 16]);
    t
}

/// Seconds per iteration with 4 significant digits; `-` for none.
fn secs(s: Option<f64>) -> String {
    match s {
        Some(x) if x >= 100.0 => format!("{x:.0}s"),
        Some(x) if x >= 1.0 => format!("{x:.3}s"),
        Some(x) => format!("{:.4}s", x),
        None => "-".into(),
    }
}

fn stats_row(name: &str, s: &Option<Stats>) -> Vec<String> {
    match s {
        Some(s) => vec![
            name.into(),
            s.n.to_string(),
            hms(Some(s.mean)),
            hms(Some(s.median)),
            hms(Some(s.p99)),
            hms(Some(s.max)),
        ],
        None => vec![
            name.into(),
            "0".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn error_text(e: &Option<ErrorStats>, none: &str) -> String {
    match e {
        Some(e) => format!(
            "MAPE {} (median {}{}) over {} jobs",
            pct(e.mape),
            pct(e.median_ape),
            e.bias
                .map(|b| format!(", bias {:+.1}%", b * 100.0))
                .unwrap_or_default(),
            e.n
        ),
        None => format!("n/a ({none})"),
    }
}

/// The summary as text: timing table, per-type usage table and error lines.
pub fn summary_text(s: &Summary) -> String {
    let mut t = table(&["Metric", "Jobs", "Mean", "Median", "P99", "Max"]);
    t.add_row(stats_row("JCT", &s.jct));
    t.add_row(stats_row("QueueDelay", &s.queue_delay));
    right_align(&mut t, &[1, 2, 3, 4, 5]);
    let mut u = table(&["GPU type", "Jobs", "GPU-hours", "Capacity", "Utilization"]);
    for (ty, x) in &s.per_type {
        u.add_row(vec![
            ty.clone(),
            x.jobs.to_string(),
            format!("{:.3}", x.gpu_hours),
            x.capacity
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            x.utilization.map(pct).unwrap_or_else(|| "-".into()),
        ]);
    }
    right_align(&mut u, &[1, 2, 3, 4]);
    format!(
        "Jobs: {} ({} finished, {} with a cellsched decision)   Makespan: {}   Span: {}\n{t}\n{u}\nEstimator error, run time:       {}\nEstimator error, iteration time: {}\nIteration predictor error:       {}\nDeadlines met:                   {}\nReconfigurations:                {}\n",
        s.jobs,
        s.finished,
        s.with_decision,
        hms(s.makespan_s),
        hms(s.span_s),
        error_text(&s.estimator_error, "no completed job with a Decision and an iters= tag"),
        error_text(&s.iteration_time_error, "no job with both a Decision and a measurement (cellsched-iter lines or run time / iters)"),
        error_text(&s.iteration_predictor_error, "too few jobs with history fields for a holdout; see `report history`"),
        match &s.deadlines {
            Some(d) => format!("{}/{} ({}) of the ended jobs with --dl-deadline (End <= deadline, COMPLETED)", d.met, d.jobs, pct(d.met_ratio)),
            None => "n/a (no ended job with --dl-deadline)".into(),
        },
        match &s.reconfigurations {
            Some(r) => format!("{} of {} elastic jobs, {} in all, costing {} (from each signal to the job pending again)", r.jobs_reconfigured, r.elastic_jobs, r.reconfigurations, hms(Some(r.cost_s))),
            None => "n/a (no job with --dl-elastic)".into(),
        },
    ) + &deadlines_per_user_text(s)
}

/// `Deadlines per user:` lines (met of ended, infeasible), when any job had a deadline.
fn deadlines_per_user_text(s: &Summary) -> String {
    if s.deadlines_per_user.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = s
        .deadlines_per_user
        .iter()
        .map(|(u, d)| format!("{u} {}/{} met, {} infeasible", d.met, d.ended, d.infeasible))
        .collect();
    format!("Deadlines per user:              {}\n", parts.join("; "))
}

/// The full terminal report: jobs table then summary.
pub fn report_text(r: &Report) -> String {
    format!("{}\n\n{}", jobs_table(&r.jobs), summary_text(&r.summary))
}

/// CSV header of [`jobs_csv`].
pub const CSV_HEADER: &[&str] = &[
    "job_id",
    "name",
    "user",
    "partition",
    "state",
    "submit",
    "start",
    "end",
    "queue_delay_s",
    "run_s",
    "jct_s",
    "gpu_types",
    "gpus",
    "nodes",
    "node_list",
    "time_limit_s",
    "cell",
    "plan",
    "iter_s",
    "source",
    "model",
    "batch",
    "iters",
    "predicted_run_s",
    "measured_iter_s",
    "measured_from",
];

/// The jobs as CSV (one row per job, [`CSV_HEADER`] columns; empty = unknown).
pub fn jobs_csv(jobs: &[JobRecord]) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let io = |e: csv::Error| ReportError::File {
        path: "<csv>".into(),
        msg: e.to_string(),
    };
    w.write_record(CSV_HEADER).map_err(io)?;
    let opt = |x: Option<String>| x.unwrap_or_default();
    for j in jobs {
        let d = j.decision.as_ref();
        w.write_record([
            j.job_id_text.clone(),
            j.name.clone(),
            j.user.clone(),
            j.partition.clone(),
            j.state.clone(),
            j.submit.to_string(),
            opt(j.start.map(|x| x.to_string())),
            opt(j.end.map(|x| x.to_string())),
            opt(j.queue_delay_s.map(|x| x.to_string())),
            if j.start.is_some() {
                j.run_s().to_string()
            } else {
                String::new()
            },
            opt(j.jct_s.map(|x| x.to_string())),
            j.gpus.keys().cloned().collect::<Vec<_>>().join("+"),
            j.gpu_count().to_string(),
            j.nodes.to_string(),
            j.node_list.clone(),
            opt(j.time_limit_s.map(|x| x.to_string())),
            opt(d.map(|d| d.cell.to_string())),
            opt(d.map(|d| d.plan.to_string())),
            opt(d.map(|d| d.iter_s.to_string())),
            opt(d.map(|d| d.source.to_string())),
            opt(j.tags.model.clone()),
            opt(j.tags.batch.map(|x| x.to_string())),
            opt(j.tags.iters.map(|x| x.to_string())),
            opt(j.predicted_run_s.map(|x| x.to_string())),
            opt(j.measured_iter_s.map(|x| x.to_string())),
            opt(j.measured_from.clone()),
        ])
        .map_err(io)?;
    }
    let bytes = w.into_inner().map_err(|e| ReportError::File {
        path: "<csv>".into(),
        msg: e.to_string(),
    })?;
    Ok(String::from_utf8(bytes).expect("csv of UTF-8 fields is UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::job;

    #[test]
    fn hms_forms() {
        assert_eq!(hms(Some(3661.0)), "01:01:01");
        assert_eq!(hms(Some(90_061.0)), "1-01:01:01");
        assert_eq!(hms(None), "-");
    }

    #[test]
    fn tables_and_csv_show_the_jobs() {
        let admin = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet";
        let jobs = vec![
            job(41, 0, 10, 110, "gres/gpu:a100=4", &format!("{admin} iters=250"), ""),
            job(42, 5, 5, 65, "", "", ""),
        ];
        let text = jobs_table(&jobs).to_string();
        assert!(
            text.contains("41") && text.contains("a100x4x1") && text.contains("dp=4,tp=1,pp=1"),
            "{text}"
        );
        assert!(text.contains("00:01:50"), "JCT of job 41: {text}");
        let r = Report::new(Default::default(), jobs.clone(), None);
        let all = report_text(&r);
        assert!(
            all.contains("JCT") && all.contains("Estimator error") && all.contains("MAPE 25.0%"),
            "{all}"
        );
        let csv = jobs_csv(&jobs).unwrap();
        let mut rd = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(rd.headers().unwrap().len(), CSV_HEADER.len());
        let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[0][10], "110");
        assert_eq!(&rows[0][16], "a100x4x1");
        assert_eq!(&rows[1][16], "");
    }
}
