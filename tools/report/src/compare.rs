//! `cellsched report compare --a X --b Y`: two reports side by side with
//! ratios B/A. Each side is a saved `--json` report file or a sacct window
//! `START..END` (either end may be empty: `now-2hours..`).
use crate::error::ReportError;
use crate::output::hms;
use crate::sacct::Query;
use crate::summary::{Report, Summary};
use comfy_table::{presets::ASCII_BORDERS_ONLY_CONDENSED, CellAlignment, Table};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Side {
    /// A report saved with `cellsched report --json`.
    File(PathBuf),
    /// A sacct window.
    Window(Query),
}

impl Side {
    /// An existing file is a saved report; `START..END` is a window.
    pub fn parse(s: &str) -> Result<Side, ReportError> {
        if Path::new(s).is_file() {
            return Ok(Side::File(s.into()));
        }
        if let Some((a, b)) = s.split_once("..") {
            let opt = |x: &str| {
                if x.trim().is_empty() {
                    None
                } else {
                    Some(x.trim().to_string())
                }
            };
            return Ok(Side::Window(Query {
                start: opt(a),
                end: opt(b),
                ..Default::default()
            }));
        }
        Err(ReportError::invalid(
            "comparison side",
            s,
            "an existing report .json file or a window START..END",
        ))
    }
}

/// Reads a report saved with `--json`.
pub fn load_report(path: &Path) -> Result<Report, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::file(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| ReportError::file(path, format!("not a cellsched report JSON: {e}")))
}

/// How a metric is shown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Seconds, shown as HH:MM:SS.
    Seconds,
    /// A plain number.
    Number,
    /// A fraction, shown as a percentage.
    Fraction,
}

/// One compared metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Metric name, e.g. `JCT mean`.
    pub metric: String,
    /// Unit of `a` and `b`.
    pub unit: Unit,
    /// Value in A.
    pub a: Option<f64>,
    /// Value in B.
    pub b: Option<f64>,
    /// B / A (when both are known and A != 0).
    pub ratio: Option<f64>,
}

/// The rows comparing summaries `a` and `b`.
pub fn compare(a: &Summary, b: &Summary) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut push = |metric: String, unit: Unit, f: &dyn Fn(&Summary) -> Option<f64>| {
        let (x, y) = (f(a), f(b));
        let ratio = match (x, y) {
            (Some(x), Some(y)) if x != 0.0 => Some(y / x),
            _ => None,
        };
        rows.push(Row {
            metric,
            unit,
            a: x,
            b: y,
            ratio,
        });
    };
    push("jobs".into(), Unit::Number, &|s| Some(s.jobs as f64));
    push("JCT mean".into(), Unit::Seconds, &|s| s.jct.map(|x| x.mean));
    push("JCT median".into(), Unit::Seconds, &|s| {
        s.jct.map(|x| x.median)
    });
    push("JCT p99".into(), Unit::Seconds, &|s| s.jct.map(|x| x.p99));
    push("queue delay mean".into(), Unit::Seconds, &|s| {
        s.queue_delay.map(|x| x.mean)
    });
    push("queue delay median".into(), Unit::Seconds, &|s| {
        s.queue_delay.map(|x| x.median)
    });
    push("queue delay p99".into(), Unit::Seconds, &|s| {
        s.queue_delay.map(|x| x.p99)
    });
    push("makespan".into(), Unit::Seconds, &|s| s.makespan_s);
    let mut types: Vec<&String> = a.per_type.keys().chain(b.per_type.keys()).collect();
    types.sort();
    types.dedup();
    for t in types {
        let t2 = t.clone();
        push(format!("{t} GPU-hours"), Unit::Number, &move |s| {
            s.per_type.get(&t2).map(|u| u.gpu_hours)
        });
        let t3 = t.clone();
        push(format!("{t} utilization"), Unit::Fraction, &move |s| {
            s.per_type.get(&t3).and_then(|u| u.utilization)
        });
    }
    push("estimator MAPE".into(), Unit::Fraction, &|s| {
        s.estimator_error.map(|e| e.mape)
    });
    push("iteration predictor MAPE".into(), Unit::Fraction, &|s| {
        s.iteration_predictor_error.map(|e| e.mape)
    });
    rows
}

fn show(unit: Unit, v: Option<f64>) -> String {
    match (unit, v) {
        (_, None) => "-".into(),
        (Unit::Seconds, Some(x)) => hms(Some(x)),
        (Unit::Number, Some(x)) if x.fract() == 0.0 => format!("{x:.0}"),
        (Unit::Number, Some(x)) => format!("{x:.3}"),
        (Unit::Fraction, Some(x)) => format!("{:.1}%", x * 100.0),
    }
}

/// The comparison as a table with columns Metric, A, B, B/A.
pub fn compare_table(rows: &[Row], a_name: &str, b_name: &str) -> Table {
    let mut t = Table::new();
    t.load_preset(ASCII_BORDERS_ONLY_CONDENSED).set_header(vec![
        "Metric".to_string(),
        format!("A: {a_name}"),
        format!("B: {b_name}"),
        "B/A".into(),
    ]);
    for r in rows {
        t.add_row(vec![
            r.metric.clone(),
            show(r.unit, r.a),
            show(r.unit, r.b),
            r.ratio
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    for c in 1..4 {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::job;

    #[test]
    fn ratios_and_sides() {
        let a = Summary::of(&[job(1, 0, 10, 110, "gres/gpu:a100=4", "", "")], None);
        let b = Summary::of(&[job(2, 0, 5, 55, "gres/gpu:a100=4", "", "")], None);
        let rows = compare(&a, &b);
        let jct = rows.iter().find(|r| r.metric == "JCT mean").unwrap();
        assert_eq!((jct.a, jct.b), (Some(110.0), Some(55.0)));
        assert_eq!(jct.ratio, Some(0.5));
        let qd = rows
            .iter()
            .find(|r| r.metric == "queue delay mean")
            .unwrap();
        assert_eq!(qd.ratio, Some(0.5));
        let t = compare_table(&rows, "stock", "cellsched").to_string();
        assert!(t.contains("A: stock") && t.contains("0.500"), "{t}");

        assert_eq!(
            Side::parse("now-2hours..").unwrap(),
            Side::Window(Query {
                start: Some("now-2hours".into()),
                ..Default::default()
            })
        );
        assert!(Side::parse("not-a-file.json").is_err());
    }

    #[test]
    fn saved_report_roundtrip() {
        let r = Report::new(Default::default(), vec![job(1, 0, 10, 110, "gres/gpu:a100=4", "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet", "")], None);
        let p =
            std::env::temp_dir().join(format!("cellsched-report-cmp-{}.json", std::process::id()));
        std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(
            Side::parse(p.to_str().unwrap()).unwrap(),
            Side::File(p.clone())
        );
        assert_eq!(load_report(&p).unwrap(), r);
        std::fs::write(&p, "{}").unwrap();
        assert!(load_report(&p)
            .unwrap_err()
            .to_string()
            .contains("not a cellsched report"));
        std::fs::remove_file(p).ok();
    }
}
