//! One profiling session (`cellsched profile run`): NVML discovery, plan,
//! bounded run, warm-up discard, median, and the profile-database write.
//!
//! The database is written only after a successful measurement; an
//! interrupted run (SIGINT/SIGTERM) kills the command and leaves it untouched.
use crate::db;
use crate::error::ProfilerError;
use crate::iterline::{iter_stats, measured_window, IterParser, IterStats};
use crate::nvml;
use crate::run_env::{choose_plan, plan_env, ProfilePlan};
use crate::runner::{self, Progress, RunSpec, StopReason};
use crate::sampler::{summarize, summarize_window, GpuSample, GpuSummary, Sampler, Window};
use cellsched_core::profile_db::ProfileRecord;
use cellsched_core::Plan;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What to profile and how.
#[derive(Debug, Clone)]
pub struct Request {
    /// Model name (catalog name or the site's own label).
    pub model: String,
    /// Global batch.
    pub batch: u32,
    /// GPUs on this node.
    pub gpus: u32,
    /// GPU type; default: NVML's first GPU. Required with `nvml = false` when writing a DB.
    pub gpu_type: Option<String>,
    /// A pinned plan; default: the estimator's best, else `dp=gpus`.
    pub plan: Option<Plan>,
    /// The command (program + args, no shell).
    pub command: Vec<String>,
    /// Whether `command` is the built-in CPU probe (labelled, not a GPU measurement).
    pub probe: bool,
    /// Wall-time bound.
    pub duration: Duration,
    /// Leading iterations discarded.
    pub warmup: usize,
    /// Stop after this many measured iterations.
    pub max_iters: Option<usize>,
    /// Fewest measured iterations accepted.
    pub min_iters: usize,
    /// Iteration line parser.
    pub parser: IterParser,
    /// Echo the command's stdout to stderr.
    pub echo: bool,
    /// Sample NVML (false: `--no-nvml`).
    pub nvml: bool,
    /// NVML sampling interval.
    pub sample_interval: Duration,
    /// Profile database to update (none: measure only).
    pub db: Option<PathBuf>,
    /// Warn when fewer iteration lines than this were seen.
    pub warn_below_iters: usize,
}

/// Default of [`Request::warn_below_iters`].
pub const DEFAULT_WARN_BELOW_ITERS: usize = 10;

/// The outcome of a session.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// What ran.
    pub plan: ProfilePlan,
    /// GPU name from NVML, if sampled.
    pub gpu_name: Option<String>,
    /// Whether this was the built-in CPU probe (not a GPU measurement).
    pub probe: bool,
    /// Iteration statistics.
    pub stats: IterStats,
    /// Why the run stopped.
    pub stop: StopReason,
    /// The command's exit code (`None` if killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Seconds from the command's start to the end of its first iteration
    /// (when its line was read): a cold start's cost to first progress.
    pub first_iter_s: Option<f64>,
    /// Per-GPU NVML summary over the measured iterations only
    /// ([`Outcome::gpu_window`]); empty with `--no-nvml`.
    pub gpus: Vec<GpuSummary>,
    /// The span of the run the measured iterations cover, seconds since start.
    pub gpu_window: Option<Window>,
    /// Per-GPU NVML summary over the whole run, start-up included.
    pub gpus_whole_run: Vec<GpuSummary>,
    /// Things the user should know about the measurement (also printed to stderr).
    pub warnings: Vec<String>,
    /// The database written and its size afterwards.
    pub db: Option<(PathBuf, usize)>,
}

/// Runs a session; `notes` receives informational messages, `progress` ticks.
pub fn profile(
    req: &Request,
    est: &cellsched_core::estimator::Estimator,
    interrupt: &AtomicBool,
    mut notes: impl FnMut(String),
    progress: impl FnMut(Progress),
) -> Result<Outcome, ProfilerError> {
    let mut sampler: Option<Box<dyn Sampler>> = None;
    let mut gpu_name = None;
    let gpu_type = if req.nvml {
        let nv = nvml::open()?;
        let inv = nvml::inventory(&nv)?;
        let first = inv
            .gpus
            .first()
            .ok_or_else(|| ProfilerError::NvmlUnavailable("NVML sees no GPUs".into()))?;
        if (inv.gpus.len() as u32) < req.gpus {
            return Err(ProfilerError::invalid(
                "--gpus",
                req.gpus.to_string(),
                format!("at most the {} GPUs NVML sees", inv.gpus.len()),
            ));
        }
        gpu_name = Some(first.name.clone());
        let t = req.gpu_type.clone().unwrap_or_else(|| first.name.clone());
        sampler = Some(Box::new(nvml::NvmlSampler::new(nv, Some(req.gpus))?));
        t
    } else {
        match (&req.gpu_type, &req.db) {
            (Some(t), _) => t.clone(),
            (None, None) => "unknown".into(),
            (None, Some(_)) => {
                return Err(ProfilerError::invalid(
                    "--gpu-type",
                    "",
                    "a GPU type (e.g. a100) when --no-nvml writes to --db",
                ))
            }
        }
    };
    let plan = choose_plan(
        est,
        &req.model, req.batch, &gpu_type, req.gpus, req.plan, &mut notes,
    )?;
    let env = plan_env(&plan, std::env::var_os("CUDA_VISIBLE_DEVICES").is_some());
    let spec = RunSpec {
        command: req.command.clone(),
        env,
        duration: req.duration,
        warmup: req.warmup,
        max_iters: req.max_iters,
        parser: req.parser.clone(),
        echo: req.echo,
        sample_interval: req.sample_interval,
    };
    let out = runner::run(&spec, sampler, interrupt, progress)?;
    if out.stop == StopReason::Interrupted {
        return Err(ProfilerError::Interrupted);
    }
    let exit_code = out.status.and_then(|s| s.code());
    let stats = iter_stats(&out.times, req.warmup, req.min_iters).ok_or_else(|| {
        ProfilerError::NoIterations(format!(
            "saw {} iteration lines, need {} after discarding {} warm-up ({}; the command {}); print 'cellsched-iter <seconds>' per iteration or pass --regex",
            out.times.len(),
            req.min_iters.max(1),
            req.warmup,
            match out.stop {
                StopReason::Duration => format!("stopped at the {:?} limit", req.duration),
                _ => "stopped".into(),
            },
            match out.status {
                Some(s) if s.success() => "exited successfully".to_string(),
                Some(s) => format!("ended with {s}"),
                None => "did not report a status".into(),
            }
        ))
    })?;
    if exit_code.is_some_and(|c| c != 0) && out.stop == StopReason::Exited {
        notes(format!(
            "the command exited with code {}; measured iterations kept",
            exit_code.unwrap_or(-1)
        ));
    }
    let (gpu_window, gpus) = gpu_use(&out.samples, &out.iter_at_s, &out.times, req.warmup);
    let gpus_whole_run = summarize(&out.samples);
    let db = match &req.db {
        Some(path) => {
            if req.plan.is_none() {
                notes(format!("the row's plan is recorded as unknown: the command was offered {} but may not follow it; pass --plan for the plan it runs", plan.plan));
            }
            let n = db::insert_record(path, db_record(&plan, req.plan.is_some(), stats.median_s, out.iter_at_s.first().copied(), &gpus_whole_run))?;
            Some((path.clone(), n))
        }
        None => None,
    };
    let warnings = warnings(stats.seen, req.warn_below_iters, gpu_window.as_ref(), &gpus);
    Ok(Outcome {
        plan,
        gpu_name,
        probe: req.probe,
        stats,
        stop: out.stop,
        exit_code,
        wall_s: out.wall.as_secs_f64(),
        first_iter_s: out.iter_at_s.first().copied(),
        gpus,
        gpu_window,
        gpus_whole_run,
        warnings,
        db,
    })
}

/// The profile DB row of a run: the plan only when it was pinned (`--plan`;
/// an injected plan the command may not have followed is recorded as
/// unknown, never as a guess), the highest NVML memory reading of any
/// of its GPUs over the whole run, and the seconds from the command's start
/// to its first iteration line (`first_iter_s`).
pub fn db_record(plan: &ProfilePlan, pinned: bool, median_s: f64, first_iter_s: Option<f64>, whole_run: &[GpuSummary]) -> ProfileRecord {
    let peak = whole_run.iter().filter_map(|g| g.peak_mem_bytes).max();
    ProfileRecord {
        model: plan.model.clone(),
        batch: plan.batch,
        gpu_type: plan.gpu_type.clone(),
        nodes: 1,
        gpus_per_node: plan.gpus,
        iter_time_s: median_s,
        plan: pinned.then_some(plan.plan),
        peak_mem_gib: peak.map(|b| b as f64 / (1u64 << 30) as f64),
        first_iter_s: first_iter_s.filter(|x| *x > 0.0 && *x <= cellsched_core::profile_db::MAX_FIRST_ITER_S),
    }
}

/// GPU use over the measured iterations: the window they cover (from the
/// times their lines were read, `at_s`) and the per-GPU summary of the
/// readings inside it.
pub fn gpu_use(samples: &[GpuSample], at_s: &[f64], times: &[f64], warmup: usize) -> (Option<Window>, Vec<GpuSummary>) {
    match measured_window(at_s, times, warmup) {
        Some(w) => (Some(w), summarize_window(samples, &w)),
        None => (None, Vec::new()),
    }
}

/// Warnings about a measurement: fewer than `warn_below` iteration lines
/// seen, and GPUs with no reading inside the measured window.
pub fn warnings(seen: usize, warn_below: usize, window: Option<&Window>, gpus: &[GpuSummary]) -> Vec<String> {
    let mut w = Vec::new();
    if seen < warn_below {
        w.push(format!(
            "only {seen} iteration lines were seen (fewer than {warn_below}): the median and the GPU summary rest on few iterations; \
             run longer (--duration, --iters) or print '{} <seconds>' after every iteration",
            crate::iterline::ITER_MARKER
        ));
    }
    if let Some(win) = window {
        let empty: Vec<String> = gpus.iter().filter(|g| g.samples == 0).map(|g| g.index.to_string()).collect();
        if !empty.is_empty() {
            w.push(format!(
                "no NVML reading of GPU {} fell within the measured iterations ({:.2} s to {:.2} s of the run); lower --interval-ms or run longer",
                empty.join(", "),
                win.start_s,
                win.end_s
            ));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::profile_db::ProfileDb;

    fn est() -> cellsched_core::estimator::Estimator {
        cellsched_core::estimator::Estimator::from_config(&Default::default(), None).estimator
    }

    fn req(script: &str, db: Option<PathBuf>) -> Request {
        Request {
            model: "my-net".into(),
            batch: 64,
            gpus: 2,
            gpu_type: Some("a100".into()),
            plan: None,
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            probe: false,
            duration: Duration::from_secs(60),
            warmup: 2,
            max_iters: None,
            min_iters: 3,
            parser: IterParser::new(),
            echo: false,
            nvml: false,
            sample_interval: Duration::from_millis(100),
            db,
            warn_below_iters: DEFAULT_WARN_BELOW_ITERS,
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cellsched-prof-sess-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn fake_training_writes_the_median() {
        let d = dir("ok");
        let db = d.join("p.csv");
        // Warm-up 5 and 4 are discarded; the median of 0.3 0.1 0.2 0.4 0.25 is 0.25.
        // WORLD_SIZE comes from the plan env.
        let script = "for t in 5 4 0.3 0.1 0.2 0.4; do echo \"cellsched-iter $t\"; done; echo \"cellsched-iter 0.$((WORLD_SIZE + 23))\"";
        let mut notes = Vec::new();
        let o = profile(
            &req(script, Some(db.clone())),
            &est(),
            &AtomicBool::new(false),
            |n| notes.push(n),
            |_| {},
        )
        .unwrap();
        assert_eq!((o.stats.seen, o.stats.measured), (7, 5));
        assert!((o.stats.median_s - 0.25).abs() < 1e-12, "{:?}", o.stats);
        assert_eq!(o.plan.plan.dp, 2);
        assert!(o.gpus.is_empty(), "no NVML sampling");
        assert_eq!(o.db.as_ref().unwrap().1, 1);
        let got = ProfileDb::load_csv(&db).unwrap();
        assert_eq!(got.lookup("my-net", 64, "a100", 1, 2), Some(0.25));
        // The plan was injected, not pinned: the command may not have followed it.
        assert_eq!(got.records().next().unwrap().plan, None);
        let mut pinned = req(script, Some(db.clone()));
        pinned.plan = Some("dp=1,tp=2,pp=1".parse().unwrap());
        profile(&pinned, &est(), &AtomicBool::new(false), |_| {}, |_| {}).unwrap();
        let got = ProfileDb::load_csv(&db).unwrap();
        assert_eq!(got.records().next().unwrap().plan, pinned.plan);
        std::fs::remove_dir_all(d).ok();
    }

    /// The DB row keeps the plan only when pinned, and the highest NVML
    /// reading of any GPU over the whole run.
    #[test]
    fn db_record_is_honest_about_the_plan_and_keeps_the_peak() {
        let plan = ProfilePlan { model: "m".into(), batch: 8, gpu_type: "h100".into(), gpus: 2, plan: "dp=2,tp=1,pp=1".parse().unwrap(), estimate_s: None, plan_source: "estimator" };
        let g = |index, peak: Option<u64>| GpuSummary { index, samples: 3, mean_util_pct: None, peak_mem_bytes: peak, mean_power_w: None, mean_sm_clock_mhz: None };
        let r = db_record(&plan, false, 0.5, Some(41.5), &[g(0, Some(3 << 30)), g(1, Some(5 << 30))]);
        assert_eq!((r.plan, r.peak_mem_gib, r.gpus_per_node, r.first_iter_s), (None, Some(5.0), 2, Some(41.5)));
        let r = db_record(&plan, true, 0.5, None, &[g(0, None)]);
        assert_eq!((r.plan, r.peak_mem_gib, r.first_iter_s), (Some(plan.plan), None, None));
    }

    #[test]
    fn too_few_iterations_leave_the_db_untouched() {
        let d = dir("few");
        let db = d.join("p.csv");
        std::fs::write(
            &db,
            "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\nx,1,a100,1,1,1\n",
        )
        .unwrap();
        let before = std::fs::read(&db).unwrap();
        let e = profile(
            &req(
                "echo 'cellsched-iter 1'; echo 'cellsched-iter 1'; echo 'cellsched-iter 1'",
                Some(db.clone()),
            ),
            &est(),
            &AtomicBool::new(false),
            |_| {},
            |_| {},
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(e.to_string().contains("saw 3 iteration lines"), "{e}");
        assert_eq!(std::fs::read(&db).unwrap(), before);
        std::fs::remove_dir_all(d).ok();
    }

    #[test]
    fn interrupted_run_leaves_the_db_untouched() {
        let d = dir("int");
        let db = d.join("p.csv");
        let flag = AtomicBool::new(false);
        let e = profile(
            &req(
                "while true; do echo 'cellsched-iter 0.01'; sleep 0.01; done",
                Some(db.clone()),
            ),
            &est(),
            &flag,
            |_| {},
            |p| {
                if p.iters >= 10 {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            },
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 130);
        assert!(!db.exists(), "nothing written");
        std::fs::remove_dir_all(d).ok();
    }

    #[test]
    fn no_nvml_db_write_needs_a_gpu_type() {
        let mut r = req("true", Some(PathBuf::from("/tmp/never-written.csv")));
        r.gpu_type = None;
        let e = profile(
            &r,
            &est(), &AtomicBool::new(false), |_| {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("--gpu-type"), "{e}");
    }

    #[test]
    fn gpu_use_covers_the_measured_iterations_only() {
        use crate::sampler::tests::stream;
        // Start-up 0-20 s at 0% util and 50 W; training 20-60 s at 90% / 250 W,
        // one line per second from 21 s to 60 s; 5 warm-up lines.
        let busy = |t: f64| t >= 20.0;
        let samples: Vec<GpuSample> = [0, 1]
            .into_iter()
            .flat_map(|i| {
                stream(i, 0.25, 62.0, |t| if busy(t) { 90.0 } else { 0.0 }, |t| if busy(t) { 30 << 30 } else { 1 << 30 }, |t| if busy(t) { 250.0 } else { 50.0 })
            })
            .collect();
        let at: Vec<f64> = (21..=60).map(f64::from).collect();
        let times = vec![1.0; at.len()];
        let (w, gpus) = gpu_use(&samples, &at, &times, 5);
        assert_eq!(w, Some(Window { start_s: 25.0, end_s: 60.0 }));
        assert_eq!(gpus.len(), 2);
        for g in &gpus {
            assert_eq!(g.mean_util_pct, Some(90.0), "{g:?}");
            assert_eq!(g.mean_power_w, Some(250.0));
            assert_eq!(g.peak_mem_bytes, Some(30 << 30));
            assert_eq!(g.samples, 141);
        }
        // The whole-run mean is what users saw before: diluted by start-up.
        let whole = summarize(&samples);
        assert!(whole[0].mean_util_pct.unwrap() < 62.0, "{:?}", whole[0]);
        assert!(warnings(at.len(), 10, w.as_ref(), &gpus).is_empty());
        // No lines after the warm-up: no window, no summary.
        assert_eq!(gpu_use(&samples, &at[..5], &times[..5], 5), (None, Vec::new()));
    }

    #[test]
    fn warnings_for_few_lines_and_unsampled_windows() {
        let w = warnings(4, 10, None, &[]);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("only 4 iteration lines") && w[0].contains("fewer than 10"), "{w:?}");
        assert!(warnings(10, 10, None, &[]).is_empty());
        assert!(warnings(0, 0, None, &[]).is_empty(), "--warn-iters 0 turns it off");
        let empty = GpuSummary { index: 3, samples: 0, mean_util_pct: None, peak_mem_bytes: None, mean_power_w: None, mean_sm_clock_mhz: None };
        let w = warnings(50, 10, Some(&Window { start_s: 1.0, end_s: 1.2 }), &[empty]);
        assert!(w.len() == 1 && w[0].contains("GPU 3") && w[0].contains("--interval-ms"), "{w:?}");
    }

    #[test]
    fn few_iteration_lines_give_a_warning_in_the_outcome() {
        let mut r = req("for t in 1 1 0.1 0.1 0.1; do echo \"cellsched-iter $t\"; done", None);
        r.warn_below_iters = 6;
        let o = profile(
            &r,
            &est(), &AtomicBool::new(false), |_| {}, |_| {}).unwrap();
        assert_eq!(o.stats.seen, 5);
        assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
        assert!(o.warnings[0].contains("only 5 iteration lines"));
        let json = serde_json::to_value(&o).unwrap();
        assert!(json["warnings"][0].as_str().unwrap().contains("fewer than 6"));
        assert!(o.gpu_window.is_some() && o.gpus.is_empty(), "a window but no NVML readings");
        r.warn_below_iters = 5;
        assert!(profile(
            &r,
            &est(), &AtomicBool::new(false), |_| {}, |_| {}).unwrap().warnings.is_empty());
    }
}
