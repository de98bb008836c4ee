//! From trace rows to `sbatch` command lines, for each replay mode.
//!
//! Time is compressed by `speedup`: a job submitted at trace second `t` is
//! submitted `t / speedup` real seconds after the mode starts, and the
//! emulated trainer sleeps `1 / speedup` real seconds per measured second.
//!
//! In both modes the emulated trainer runs at truth: the measured iteration
//! time of the GPUs it was granted, from the truth table (`--truth`), for
//! the trace's iterations (the job's real count).
//!
//! - stock: the user's own typed GRES, `--gres=gpu:TYPE:PER_NODE` on
//!   `ceil(n / gpus_per_node)` nodes;
//! - cellsched: `--dl-model/--dl-batch/--dl-iters/--dl-cell=auto` (and
//!   `--dl-freeze` when the trace opts in) with an untyped `--gres=gpu:N` on
//!   one node: the plugins keep the job's GPU count and choose the GPU type,
//!   the plan and the order from their knowledge (estimator and profile DB).
//!   The count is kept because the truth table (Gavel's measurements) holds
//!   only the per-GPU batches users asked for; a Cell it lacks would make
//!   the trainer fail rather than invent a speed.
//! - elastic: as cellsched, plus `--dl-elastic`: running jobs may be moved
//!   to another GPU type or preempted, the trainer checkpointing its
//!   iteration count on the signal and resuming from it.
//!
//! Both modes get the same time limit: the larger of the trace's declared
//! limit and `limit_factor` × the run time on the requested Cell (truth when
//! the table has the Cell, as a user who ran the job before would know,
//! else the estimator's prediction).
use crate::error::ReplayError;
use cellsched_core::estimator::{Estimator, JobSpec};
use cellsched_core::Cell;
use cellsched_sim::TraceJob;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Seconds a restarted job of the elastic pass loses before its first
/// iteration (the emulated trainer's truth, `CELLSCHED_EMU_RESTART_S`):
/// the process-start part of the issue 33 measurement on one H200 (51.4 s
/// from start to the end of the first iteration, 13.6 s of it loading a
/// 15.8 GB checkpoint); the replay's models have small checkpoints.
pub const EMU_RESTART_S: f64 = 40.0;

/// Which scheduler a replay pass runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Stock Slurm (multifactor + backfill), no cellsched plugins.
    Stock,
    /// cellsched's plugins loaded; jobs carry `--dl-*` options.
    Cellsched,
    /// As [`Mode::Cellsched`], every job also opted in to reconfiguration
    /// (`--dl-elastic`): the emulated trainer checkpoints on the signal.
    Elastic,
}

impl Mode {
    /// The mode's name as used on the command line and in job names.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stock => "stock",
            Mode::Cellsched => "cellsched",
            Mode::Elastic => "elastic",
        }
    }

    /// True when cellsched's plugins run in this mode.
    pub fn with_plugins(self) -> bool {
        self != Mode::Stock
    }

    /// Parses a comma list such as `stock,cellsched` (order kept, no duplicates).
    pub fn parse_list(s: &str) -> Result<Vec<Mode>, ReplayError> {
        let mut v = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let m = match w.to_ascii_lowercase().as_str() {
                "stock" | "slurm" => Mode::Stock,
                "cellsched" => Mode::Cellsched,
                "elastic" => Mode::Elastic,
                _ => return Err(ReplayError::invalid("mode", w, "stock, cellsched or elastic")),
            };
            if v.contains(&m) {
                return Err(ReplayError::invalid("mode list", s, "each mode at most once"));
            }
            v.push(m);
        }
        if v.is_empty() {
            return Err(ReplayError::invalid("mode list", s, "stock, cellsched, elastic or a comma list of them"));
        }
        Ok(v)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How trace rows become jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Trace seconds per real second (> 0).
    pub speedup: f64,
    /// Time limit = max(declared, `limit_factor` × predicted run), ≥ 1.
    pub limit_factor: f64,
    /// The emulated trainer (absolute path, readable on the nodes).
    pub script: PathBuf,
    /// Directory for the jobs' output files (also their working directory).
    pub out_dir: PathBuf,
    /// Tag of this replay run, written into every job's comment.
    pub run_tag: String,
    /// Truth table the emulated trainer reads (absolute path, readable on the nodes).
    pub truth: PathBuf,
}

impl Settings {
    /// Checks the numbers.
    pub fn validate(&self) -> Result<(), ReplayError> {
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(ReplayError::invalid("speedup", self.speedup.to_string(), "a positive number"));
        }
        if !(self.limit_factor.is_finite() && self.limit_factor >= 1.0) {
            return Err(ReplayError::invalid("limit factor", self.limit_factor.to_string(), "a number >= 1"));
        }
        Ok(())
    }

    /// Real seconds slept per predicted second.
    pub fn scale(&self) -> f64 {
        1.0 / self.speedup
    }
}

/// A trace row ready to be submitted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayJob {
    /// The trace row.
    pub trace: TraceJob,
    /// Real seconds after the mode's start at which it is submitted.
    pub submit_at_s: f64,
    /// Nodes of the requested Cell.
    pub nodes: u32,
    /// GPUs per node of the requested Cell (typed GRES count).
    pub gpus_per_node: u32,
    /// Seconds per iteration on the requested Cell behind the time limit
    /// (measured when the truth table has it, else predicted).
    pub iter_time_s: f64,
    /// `num_iteration` × `iter_time_s`, trace seconds.
    pub predicted_run_s: f64,
    /// `--time` in whole minutes (same in both modes).
    pub time_limit_min: u64,
    /// The model catalog lacks the job's model: it is submitted as stock
    /// Slurm would run it (typed GRES) in every mode.
    pub unknown_model: bool,
}

/// Predicted seconds per iteration of `model`/`batch` on `gpus` GPUs of
/// `gpu_type` with `gpus_per_node` per node: the fastest over the pipeline
/// stage counts that divide `gpus` (as the simulator does).
pub fn requested_iter_time(
    est: &Estimator,
    model: &str,
    batch: u32,
    gpu_type: &str,
    gpus: u32,
    gpus_per_node: u32,
) -> Result<f64, String> {
    let spec = est.model_catalog().resolve(model).map_err(|e| e.to_string())?;
    let job = JobSpec { model: spec, global_batch: batch };
    let mut best: Option<f64> = None;
    let mut last_err = String::new();
    for stages in (1..=gpus.min(64)).filter(|s| gpus % s == 0) {
        let cell = Cell::new(gpu_type, gpus, stages).map_err(|e| e.to_string())?;
        match est.estimate(&job, &cell, gpus_per_node) {
            Ok(e) if best.map_or(true, |b| e.iter_time_s < b) => best = Some(e.iter_time_s),
            Ok(_) => {}
            Err(e) => last_err = e.to_string(),
        }
    }
    best.ok_or_else(|| format!("no feasible plan for {model} (batch {batch}) on {gpus} x {gpu_type}: {last_err}"))
}

/// Turns trace rows into jobs for a cluster whose GPU types have the given
/// node sizes and node counts (`type → (gpus_per_node, nodes)`).
pub fn prepare(
    trace: &[TraceJob],
    node_shapes: &BTreeMap<String, (u32, u32)>,
    est: &Estimator,
    truth: Option<&cellsched_sim::truth::TruthTable>,
    s: &Settings,
) -> Result<Vec<ReplayJob>, ReplayError> {
    s.validate()?;
    let mut out = Vec::with_capacity(trace.len());
    for t in trace {
        let bad = |msg: String| ReplayError::Job { job: t.job_id.clone(), msg };
        let Some(&(gpn, count)) = node_shapes.get(&t.gpu_type) else {
            let known: Vec<&str> = node_shapes.keys().map(String::as_str).collect();
            return Err(bad(format!("gpu_type '{}' is not in the cluster (types: {})", t.gpu_type, known.join(", "))));
        };
        let nodes = t.num_gpu.div_ceil(gpn);
        if nodes > count {
            return Err(bad(format!(
                "asks for {} x {} but the cluster has {} node(s) of {} GPUs",
                t.num_gpu, t.gpu_type, count, gpn
            )));
        }
        let per_node = t.num_gpu.div_ceil(nodes);
        let measured = truth.and_then(|tt| tt.lookup(&t.model_name, t.batch_size, &t.gpu_type, nodes, per_node)).flatten();
        let unknown_model = est.model_catalog().resolve(&t.model_name).is_err();
        let iter_time_s = match measured {
            Some(x) => x,
            None if unknown_model && t.deadline > 0.0 => t.deadline / s.limit_factor / t.num_iteration as f64,
            None => requested_iter_time(est, &t.model_name, t.batch_size, &t.gpu_type, t.num_gpu, per_node).map_err(bad)?,
        };
        let predicted_run_s = t.num_iteration as f64 * iter_time_s;
        let limit_s = t.deadline.max(s.limit_factor * predicted_run_s) / s.speedup;
        out.push(ReplayJob {
            trace: t.clone(),
            submit_at_s: t.submission_time / s.speedup,
            nodes,
            gpus_per_node: per_node,
            iter_time_s,
            predicted_run_s,
            time_limit_min: ((limit_s / 60.0).ceil() as u64).max(1),
            unknown_model,
        });
    }
    out.sort_by(|a, b| a.submit_at_s.total_cmp(&b.submit_at_s));
    Ok(out)
}

/// Keeps letters, digits, `-`, `_`, `.` (job names, file names).
fn safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// The Slurm job name of a trace job in a mode: `replay-MODE-ID`.
pub fn job_name(mode: Mode, trace_id: &str) -> String {
    format!("replay-{}-{}", mode.name(), safe(trace_id))
}

/// The job comment: identifies the run, mode and trace job (display only:
/// reports read DL tags from AdminComment, and the time scale from
/// `cellsched report --time-scale`).
pub fn job_comment(mode: Mode, j: &ReplayJob, s: &Settings) -> String {
    format!("cellsched-replay run={} mode={} trace_job={}", safe(&s.run_tag), mode.name(), safe(&j.trace.job_id))
}

/// The `sbatch` arguments (without the program name) for `j` in `mode`.
pub fn sbatch_args(j: &ReplayJob, mode: Mode, s: &Settings) -> Vec<String> {
    let t = &j.trace;
    let out = s.out_dir.join(format!("{}-%j.out", job_name(mode, &t.job_id)));
    // The truth of a restart in the elastic pass: the trainer sleeps it (scaled) before resuming.
    let restart = if mode == Mode::Elastic { format!(",CELLSCHED_EMU_RESTART_S={}", fmt_num(EMU_RESTART_S)) } else { String::new() };
    let mut a = vec![
        "--parsable".to_string(),
        format!("--job-name={}", job_name(mode, &t.job_id)),
        format!("--comment={}", job_comment(mode, j, s)),
        format!("--time={}", j.time_limit_min),
        format!("--output={}", out.display()),
        format!("--chdir={}", s.out_dir.display()),
        format!("--export=ALL,CELLSCHED_EMU_SCALE={}{restart}", fmt_num(s.scale())),
    ];
    if mode == Mode::Stock || j.unknown_model {
        // Stock Slurm: the user's typed GRES (also for models the plugins do not know).
        a.push(format!("--nodes={}", j.nodes));
        a.push(format!("--gres=gpu:{}:{}", t.gpu_type, j.gpus_per_node));
    } else {
        a.push(format!("--nodes={}", j.nodes));
        a.push(format!("--gres=gpu:{}", j.gpus_per_node));
        a.push(format!("--dl-model={}", t.model_name));
        a.push(format!("--dl-batch={}", t.batch_size));
        a.push(format!("--dl-iters={}", t.num_iteration));
        a.push("--dl-cell=auto".to_string());
        if mode == Mode::Elastic {
            a.push("--dl-elastic".to_string());
        }
        if let Some(f) = t.freeze.as_deref().filter(|f| *f != "off") {
            a.push(format!("--dl-freeze={f}"));
        }
    }
    // The trainer: the job's model, batch and real iterations; its speed comes from the truth table.
    a.push(s.script.display().to_string());
    a.extend([
        "--model".to_string(),
        t.model_name.clone(),
        "--batch".into(),
        t.batch_size.to_string(),
        "--iters".into(),
        t.num_iteration.to_string(),
        "--truth".into(),
        s.truth.display().to_string(),
    ]);
    a
}

/// A number without trailing zeros (`0.05`, `2`, `0.263`), 6 decimals at most.
pub fn fmt_num(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" { "0".into() } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::gpu::GpuCatalog;
    use cellsched_core::model::ModelCatalog;

    fn est() -> Estimator {
        Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
    }

    fn shapes() -> BTreeMap<String, (u32, u32)> {
        [("a100".to_string(), (4, 2)), ("v100".to_string(), (8, 2)), ("a10".to_string(), (4, 1))].into()
    }

    fn settings() -> Settings {
        Settings {
            speedup: 20.0,
            limit_factor: 3.0,
            script: PathBuf::from("/repo/etc/examples/emulated-train.sh"),
            out_dir: PathBuf::from("/tmp/out"),
            run_tag: "r1".into(),
            truth: PathBuf::from("/repo/etc/examples/truth-gavel.csv"),
        }
    }

    fn row(id: &str, t: f64, iters: u64, model: &str, deadline: f64, n: u32, ty: &str) -> TraceJob {
        TraceJob {
            job_id: id.into(),
            submission_time: t,
            num_iteration: iters,
            model_name: model.into(),
            deadline,
            batch_size: 64,
            num_gpu: n,
            gpu_type: ty.into(),
            user: None,
            freeze: None,
            due_s: None,
            elastic: false,
        }
    }

    #[test]
    fn modes_parse_and_reject() {
        assert_eq!(Mode::parse_list("stock,cellsched").unwrap(), vec![Mode::Stock, Mode::Cellsched]);
        assert_eq!(Mode::parse_list(" cellsched ").unwrap(), vec![Mode::Cellsched]);
        assert_eq!(Mode::parse_list("cellsched,elastic").unwrap(), vec![Mode::Cellsched, Mode::Elastic]);
        assert!(Mode::Elastic.with_plugins() && Mode::Cellsched.with_plugins() && !Mode::Stock.with_plugins());
        let e = Mode::parse_list("stock,fast").unwrap_err().to_string();
        assert!(e.contains("'fast'") && e.contains("stock, cellsched or elastic"), "{e}");
        assert!(Mode::parse_list("stock,stock").is_err());
        assert!(Mode::parse_list("").is_err());
    }

    #[test]
    fn compresses_time_and_sizes_nodes() {
        let trace = vec![
            row("b", 400.0, 1000, "gpt__350M", 0.0, 8, "a100"),
            row("a", 100.0, 2000, "resnet50", 7200.0, 2, "v100"),
        ];
        let jobs = prepare(&trace, &shapes(), &est(), None, &settings()).unwrap();
        // Sorted by submission; times divided by the speedup.
        assert_eq!(jobs[0].trace.job_id, "a");
        assert_eq!(jobs[0].submit_at_s, 5.0);
        assert_eq!(jobs[1].submit_at_s, 20.0);
        // 2 v100 fit one 8-GPU node; 8 a100 need both 4-GPU nodes.
        assert_eq!((jobs[0].nodes, jobs[0].gpus_per_node), (1, 2));
        assert_eq!((jobs[1].nodes, jobs[1].gpus_per_node), (2, 4));
        // Without truth, the limit's iteration time is the estimator's for the requested Cell.
        let t = requested_iter_time(&est(), "gpt__350M", 64, "a100", 8, 4).unwrap();
        assert_eq!(jobs[1].iter_time_s, t);
        assert!((jobs[1].predicted_run_s - 1000.0 * t).abs() < 1e-9);
        // Limit: declared 7200 s beats 3 × run for the short resnet job → 360 s real = 6 min.
        assert!(3.0 * jobs[0].predicted_run_s < 7200.0);
        assert_eq!(jobs[0].time_limit_min, 6);
        // No declared limit: 3 × predicted run, compressed, rounded up to minutes.
        assert_eq!(jobs[1].time_limit_min, ((3.0 * 1000.0 * t / 20.0 / 60.0).ceil() as u64).max(1));
        // With a measured point, the limit follows truth.
        let mut tt = cellsched_sim::truth::TruthTable::new("t.csv");
        tt.insert(cellsched_sim::truth::TruthPoint { model: "gpt__350m".into(), batch: 64, gpu_type: "a100".into(), nodes: 2, gpus_per_node: 4, iter_time_s: Some(7.5) });
        let jobs = prepare(&trace, &shapes(), &est(), Some(&tt), &settings()).unwrap();
        assert_eq!(jobs[1].iter_time_s, 7.5);
    }

    #[test]
    fn stock_args_use_typed_gres_and_the_truth_table() {
        let trace = vec![row("7", 60.0, 500, "bert__760M", 0.0, 8, "a100")];
        let s = settings();
        let j = &prepare(&trace, &shapes(), &est(), None, &s).unwrap()[0];
        let a = sbatch_args(j, Mode::Stock, &s);
        assert!(a.contains(&"--gres=gpu:a100:4".to_string()), "{a:?}");
        assert!(a.contains(&"--nodes=2".to_string()));
        assert!(a.contains(&"--job-name=replay-stock-7".to_string()));
        assert!(a.contains(&"--export=ALL,CELLSCHED_EMU_SCALE=0.05".to_string()));
        assert!(a.iter().all(|x| !x.starts_with("--dl-")), "stock Slurm knows no --dl-* options: {a:?}");
        let script = a.iter().position(|x| x == "/repo/etc/examples/emulated-train.sh").unwrap();
        assert_eq!(&a[script + 1..], &["--model", "bert__760M", "--batch", "64", "--iters", "500", "--truth", "/repo/etc/examples/truth-gavel.csv"]);
        let comment = a.iter().find(|x| x.starts_with("--comment=")).unwrap();
        assert_eq!(comment, "--comment=cellsched-replay run=r1 mode=stock trace_job=7");
    }

    #[test]
    fn cellsched_args_let_the_plugins_choose() {
        let mut r = row("x/1", 0.0, 300, "moe__690M", 0.0, 2, "a10");
        r.freeze = Some("conservative".into());
        let s = settings();
        let j = &prepare(&[r], &shapes(), &est(), None, &s).unwrap()[0];
        let a = sbatch_args(j, Mode::Cellsched, &s);
        for want in ["--dl-model=moe__690M", "--dl-batch=64", "--dl-iters=300", "--dl-cell=auto", "--dl-freeze=conservative"] {
            assert!(a.contains(&want.to_string()), "missing {want}: {a:?}");
        }
        assert!(a.contains(&"--gres=gpu:2".to_string()) && a.contains(&"--nodes=1".to_string()), "untyped count, cellsched picks the type: {a:?}");
        assert!(a.iter().all(|x| !x.starts_with("--gres=gpu:a10")), "{a:?}");
        // Unsafe characters of the trace id never reach names or paths.
        assert!(a.contains(&"--job-name=replay-cellsched-x_1".to_string()), "{a:?}");
        assert!(a.contains(&"--output=/tmp/out/replay-cellsched-x_1-%j.out".to_string()), "{a:?}");
        assert_eq!(a[a.len() - 3], "300");
        assert!(!a.contains(&"--dl-elastic".to_string()), "{a:?}");
        // The elastic pass: the same jobs, opted in, and the trainer's restart truth.
        let e = sbatch_args(j, Mode::Elastic, &s);
        assert!(e.contains(&"--dl-elastic".to_string()) && e.contains(&"--dl-cell=auto".to_string()), "{e:?}");
        assert!(e.contains(&"--export=ALL,CELLSCHED_EMU_SCALE=0.05,CELLSCHED_EMU_RESTART_S=40".to_string()), "{e:?}");
        assert!(e.contains(&"--job-name=replay-elastic-x_1".to_string()), "{e:?}");
        // An unknown model runs stock in cellsched mode too (the plugins would refuse its --dl-model).
        let moe = row("m", 0.0, 100, "moe__1T", 600.0, 2, "a10");
        let j = &prepare(&[moe], &shapes(), &est(), None, &s).unwrap()[0];
        assert!(j.unknown_model);
        let a = sbatch_args(j, Mode::Cellsched, &s);
        assert!(a.contains(&"--gres=gpu:a10:2".to_string()) && a.iter().all(|x| !x.starts_with("--dl-")), "{a:?}");
    }

    #[test]
    fn bad_rows_name_the_job_and_problem() {
        let s = settings();
        let e = prepare(&[row("9", 0.0, 10, "gpt__350M", 0.0, 2, "h100")], &shapes(), &est(), None, &s).unwrap_err().to_string();
        assert!(e.contains("'9'") && e.contains("h100") && e.contains("a10, a100, v100"), "{e}");
        let e = prepare(&[row("10", 0.0, 10, "gpt__350M", 0.0, 12, "a100")], &shapes(), &est(), None, &s).unwrap_err().to_string();
        assert!(e.contains("'10'") && e.contains("12 x a100"), "{e}");
        // An unknown model with neither truth nor a declared limit has no time limit to give.
        let e = prepare(&[row("11", 0.0, 10, "no_such_model", 0.0, 1, "a100")], &shapes(), &est(), None, &s).unwrap_err().to_string();
        assert!(e.contains("'11'") && e.contains("no_such_model"), "{e}");
        let mut bad = settings();
        bad.speedup = 0.0;
        assert!(prepare(&[], &shapes(), &est(), None, &bad).unwrap_err().to_string().contains("speedup"));
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(fmt_num(0.05), "0.05");
        assert_eq!(fmt_num(2.0), "2");
        assert_eq!(fmt_num(0.2630001), "0.263");
        assert_eq!(fmt_num(0.0), "0");
    }
}
