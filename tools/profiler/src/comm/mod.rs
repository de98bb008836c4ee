//! `cellsched profile comm`: the collective microbenchmark (a Python script
//! using torch.distributed/NCCL, run one process per GPU under the site's
//! launcher) and the parsing of its output into profile DB rows
//! (`comm:<collective>:<bytes>`, see `cellsched_core::estimator::comm`).
use crate::ProfilerError;
use cellsched_core::estimator::{Collective, CommPoint};
use cellsched_core::profile_db::normalize_gpu_type;

/// The benchmark script (written to a temporary file and run by `profile comm`).
pub const SCRIPT: &str = include_str!("comm_bench.py");
/// Prefix of a measurement line.
pub const LINE_MARKER: &str = "cellsched-comm ";
/// Prefix of the script's error line (torch, CUDA or NCCL missing).
pub const ERROR_MARKER: &str = "cellsched-comm-error:";

/// Parses the script's output: measurement lines become [`CommPoint`]s (GPU
/// type canonicalised from the device name unless `gpu_type` is given);
/// other lines are ignored. An error line, a malformed measurement line or
/// no measurement at all is an error naming the line.
pub fn parse_output(text: &str, gpu_type: Option<&str>) -> Result<Vec<CommPoint>, ProfilerError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(msg) = line.strip_prefix(ERROR_MARKER) {
            return Err(ProfilerError::CommUnavailable(msg.trim().to_string()));
        }
        let Some(rest) = line.strip_prefix(LINE_MARKER) else { continue };
        let bad = |what: &str| ProfilerError::invalid(format!("collective benchmark output line {} ({what})", i + 1), line, "cellsched-comm <collective> <bytes> <seconds> <nodes> <gpus per node> <gpu name>");
        let f: Vec<&str> = rest.splitn(6, ' ').collect();
        if f.len() < 6 {
            return Err(bad("too few fields"));
        }
        let collective = Collective::parse(f[0]).map_err(|_| bad("collective"))?;
        let bytes = f[1].parse::<u64>().ok().filter(|b| *b > 0).ok_or_else(|| bad("bytes"))?;
        let time_s = f[2].parse::<f64>().ok().filter(|t| t.is_finite() && *t > 0.0).ok_or_else(|| bad("seconds"))?;
        let nodes = f[3].parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| bad("nodes"))?;
        let gpus_per_node = f[4].parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| bad("gpus per node"))?;
        let gpu = gpu_type.map(str::to_string).unwrap_or_else(|| normalize_gpu_type(f[5]));
        // The DB's time floor is 1 µs; a faster call is clamped to it.
        out.push(CommPoint { collective, bytes, gpu_type: gpu, nodes, gpus_per_node, time_s: time_s.max(cellsched_core::cell::MIN_ITER_TIME_S) });
    }
    if out.is_empty() {
        return Err(ProfilerError::NoIterations("the collective benchmark printed no 'cellsched-comm' lines".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::estimator::{Calibration, CalibrationPolicy};
    use cellsched_core::estimator::Estimator;
    use cellsched_core::gpu::GpuCatalog;
    use cellsched_core::model::ModelCatalog;
    use cellsched_core::profile_db::ProfileDb;

    /// A recorded sample in the script's output format (hand-written: no GPU
    /// was available when this was built; the numbers are NCCL-like for two
    /// 8-GPU NVLink nodes on a 25 Gb/s network).
    const SAMPLE: &str = include_str!("sample-output.txt");

    #[test]
    fn sample_output_becomes_db_rows_the_calibration_reads() {
        let pts = parse_output(SAMPLE, None).unwrap();
        assert_eq!(pts.len(), 12);
        assert!(pts.iter().all(|p| p.gpu_type == "a100"));
        assert_eq!((pts[0].collective, pts[0].bytes, pts[0].nodes, pts[0].gpus_per_node), (Collective::AllReduce, 1 << 20, 1, 8));
        let mut db = ProfileDb::new();
        for p in &pts {
            db.insert(p.to_record());
        }
        let text = {
            let dir = std::env::temp_dir().join(format!("cs-comm-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("db.csv");
            db.save_csv(&path).unwrap();
            let back = ProfileDb::load_csv(&path).unwrap();
            std::fs::remove_dir_all(&dir).ok();
            back
        };
        let base = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let cal = Calibration::fit(&base, text.records(), &CalibrationPolicy::default());
        assert!(cal.report.skipped.is_empty(), "{:?}", cal.report.skipped);
        let links = &cal.report.links;
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].points, (6, 6));
        assert!(links[0].intra > 0.0 && links[0].net > 0.0);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = parse_output("cellsched-comm-error: torch is not importable (No module named 'torch')\n", None).unwrap_err();
        assert!(e.to_string().contains("torch is not importable"), "{e}");
        assert_eq!(e.exit_code(), 3);
        assert!(parse_output("hello\n", None).unwrap_err().to_string().contains("no 'cellsched-comm' lines"));
        let e = parse_output("cellsched-comm all_reduce 1024 fast 1 8 NVIDIA A100\n", None).unwrap_err();
        assert!(e.to_string().contains("line 1 (seconds)"), "{e}");
        let e = parse_output("cellsched-comm broadcast 1024 0.1 1 8 NVIDIA A100\n", None).unwrap_err();
        assert!(e.to_string().contains("collective"), "{e}");
        let pts = parse_output("cellsched-comm p2p 4096 0.00002 2 8 Whatever\n", Some("h100")).unwrap();
        assert_eq!(pts[0].gpu_type, "h100");
    }

    #[test]
    fn the_script_prints_what_the_parser_reads() {
        assert!(SCRIPT.contains("cellsched-comm {coll} {size} {t:.9f} {nodes} {per_node} {name}"));
        assert!(SCRIPT.contains(ERROR_MARKER));
        assert!(SCRIPT.contains("sys.exit(3)"));
    }
}
