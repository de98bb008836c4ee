//! `cellsched report`: reports on DL jobs from Slurm accounting (sacct).
//!
//! - `cellsched report [--start T] [--end T] [--partition P] [--user U] [--jobs IDS]
//!   [--capacity a100=8,..] [--time-scale X] [--iter-log 'DIR/%j.out'] [--json|--csv] [--plot FILE.png|.svg ...]`
//!
//! DL tags come only from AdminComment (written by job_submit/cellsched);
//! JobName and Comment are display-only. Predictions are compared with
//! what the jobs themselves show (their `cellsched-iter` lines, or run time
//! over iterations), scaled by `--time-scale` for emulated runs.
//! - `cellsched report --openmetrics [--ctld-log FILE] [window options]`: OpenMetrics text
//!   (live queue per GPU type from squeue, GPU-hours and estimator error over the
//!   window, jobs left stock and plugin timings from slurmctld's log).
//! - `cellsched report compare --a X --b Y` (X/Y: saved `--json` file or `START..END`)
//! - `cellsched report history --out history.csv`
//!
//! Exit codes: 0 ok, 2 bad option, 3 sacct/slurmdbd unavailable, 4 no jobs in
//! the window, 5 malformed sacct output, 6 unknown user, 1 other errors.
use anyhow::Context;
use cellsched_report::{compare, history, output, plot, sacct, Query, Report, ReportError};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    jobs: JobsArgs,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Two windows or saved reports side by side, with ratios B/A.
    Compare(CompareArgs),
    /// Export the iteration predictor's training data (history CSV).
    History(HistoryArgs),
}

/// Which jobs: passed to sacct as given.
#[derive(clap::Args, Clone, Default)]
struct WindowArgs {
    /// Window start (any sacct time form: 2024-05-01T10:00, now-2hours);
    /// default: all of the accounting history.
    #[arg(long, short = 'S')]
    start: Option<String>,
    /// Window end (default: now).
    #[arg(long, short = 'E')]
    end: Option<String>,
    /// Only these partitions (comma list).
    #[arg(long, short = 'r')]
    partition: Option<String>,
    /// Only these users (comma list); default: all users.
    #[arg(long, short = 'u')]
    user: Option<String>,
    /// Only these job ids (comma list).
    #[arg(long, short = 'j')]
    jobs: Option<String>,
}

impl WindowArgs {
    fn query(&self) -> Query {
        Query {
            start: self.start.clone(),
            end: self.end.clone(),
            partition: self.partition.clone(),
            user: self.user.clone(),
            jobs: self.jobs.clone(),
        }
    }
}

#[derive(clap::Args)]
struct JobsArgs {
    #[command(flatten)]
    window: WindowArgs,
    /// GPUs per type for utilization, e.g. a100=8,v100=16 (default: from
    /// `scontrol show nodes`).
    #[arg(long)]
    capacity: Option<String>,
    /// Print the report as JSON (readable by `report compare`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the jobs as CSV.
    #[arg(long)]
    csv: bool,
    /// Print only the summary (no per-job table).
    #[arg(long, conflicts_with_all = ["json", "csv"])]
    summary: bool,
    /// Print OpenMetrics text for monitoring (node_exporter textfile collector,
    /// Prometheus): live queue per GPU type, GPU-hours and estimator error over
    /// the window, and with --ctld-log jobs left stock and plugin timings.
    #[arg(long, conflicts_with_all = ["json", "csv", "summary"])]
    openmetrics: bool,
    /// slurmctld's log, read for --openmetrics (left-stock reasons, plugin timings).
    #[arg(long, value_name = "FILE", requires = "openmetrics")]
    ctld_log: Option<PathBuf>,
    /// Write plots (JCT CDF, queueing delay, GPU utilization) to FILE.png or
    /// FILE.svg; may be repeated.
    #[arg(long, value_name = "FILE")]
    plot: Vec<PathBuf>,
    /// Write the window's measured jobs as profile-DB rows to FILE (one row
    /// per model, batch and Cell: the median measured seconds per iteration;
    /// plan `unknown`), for `cellsched profile import` after review: the
    /// measurements are the jobs' own (see --iter-log)
    #[arg(long, value_name = "FILE")]
    profile_rows: Option<PathBuf>,
    #[command(flatten)]
    measure: MeasureArgs,
}

/// How to compare predictions with what the jobs did.
#[derive(clap::Args, Clone, Default)]
struct MeasureArgs {
    /// Real seconds per predicted second, for emulated time-compressed runs
    /// (demo, replay): predictions are multiplied by it, measurements divided.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Job output files to read `cellsched-iter <seconds>` lines from (`%j` = job id),
    /// e.g. '/tmp/demo/out/%j.out'; without it, or where a file has none,
    /// run time / iterations of completed jobs is the measurement.
    #[arg(long, value_name = "PATTERN")]
    iter_log: Option<String>,
}

impl MeasureArgs {
    fn check(&self) -> Result<(), ReportError> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err(ReportError::invalid("--time-scale", self.time_scale.to_string(), "a positive number"));
        }
        Ok(())
    }

    /// Scales predictions and measures each job from itself.
    fn apply(&self, jobs: &mut [cellsched_report::JobRecord]) {
        for j in jobs {
            j.apply_time_scale(self.time_scale);
            if let Some(p) = &self.iter_log {
                let path = p.replace("%j", &j.job_id.to_string());
                // Only regular files, no symlink, no blocking, size-capped:
                // the path and its contents are the job owner's.
                match cellsched_report::iter_log::read_iter_log(std::path::Path::new(&path)) {
                    Ok(text) => j.measure(Some(&text)),
                    Err(e) if std::path::Path::new(&path).symlink_metadata().is_ok() => eprintln!("cellsched: warning: --iter-log: {e}"),
                    Err(_) => {}
                }
            }
        }
    }
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Side A: a report saved with `--json`, or a window START..END.
    #[arg(long)]
    a: String,
    /// Side B: a report saved with `--json`, or a window START..END.
    #[arg(long)]
    b: String,
    /// Label of A in the table (default: its argument).
    #[arg(long)]
    a_name: Option<String>,
    /// Label of B in the table (default: its argument).
    #[arg(long)]
    b_name: Option<String>,
    /// Partition filter for window sides.
    #[arg(long, short = 'r')]
    partition: Option<String>,
    /// User filter for window sides.
    #[arg(long, short = 'u')]
    user: Option<String>,
    /// GPUs per type for utilization of window sides.
    #[arg(long)]
    capacity: Option<String>,
    /// Print the comparison rows as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct HistoryArgs {
    #[command(flatten)]
    window: WindowArgs,
    /// Output CSV file (written atomically); `-` for stdout.
    #[arg(long, short = 'o')]
    out: PathBuf,
}

/// Runs the subcommand; report errors exit with their documented code.
pub fn run(a: Args) -> anyhow::Result<()> {
    let res = match a.sub {
        Some(Sub::Compare(c)) => run_compare(c),
        Some(Sub::History(h)) => run_history(h),
        None => run_jobs(a.jobs),
    };
    if let Err(e) = &res {
        if let Some(re) = e.downcast_ref::<ReportError>() {
            eprintln!("cellsched: error: {e:#}");
            std::process::exit(re.exit_code());
        }
    }
    res
}

fn capacity(opt: &Option<String>) -> Result<Option<sacct::Capacity>, ReportError> {
    match opt {
        Some(s) => sacct::parse_capacity(s).map(Some),
        None => match sacct::fetch_capacity() {
            Ok(c) if !c.is_empty() => Ok(Some(c)),
            Ok(_) => Ok(None),
            Err(e) => {
                log::warn!("GPU capacity unknown, utilization not computed: {e}");
                Ok(None)
            }
        },
    }
}

/// Builds a report for `q` (capacity from `--capacity`, else scontrol), with
/// the iteration predictor's holdout error.
fn build_report(q: Query, cap: &Option<String>, m: &MeasureArgs) -> Result<Report, ReportError> {
    m.check()?;
    let mut jobs = sacct::fetch_jobs(&q)?;
    m.apply(&mut jobs);
    let cap = capacity(cap)?;
    let mut r = Report::new(q, jobs, cap.as_ref());
    r.summary.iteration_predictor_error =
        history::predictor_error(&history::history(&r.jobs).records);
    Ok(r)
}

fn run_jobs(a: JobsArgs) -> anyhow::Result<()> {
    if let Some(c) = &a.capacity {
        sacct::parse_capacity(c)?; // a bad option fails before sacct runs
    }
    a.measure.check()?;
    if a.openmetrics {
        return run_openmetrics(&a);
    }
    let r = build_report(a.window.query(), &a.capacity, &a.measure)?;
    if let Some(path) = &a.profile_rows {
        let rows = cellsched_report::profile_rows::profile_rows(&r.jobs);
        rows.db.save_csv(path).with_context(|| format!("--profile-rows {}", path.display()))?;
        eprintln!("wrote {}: {}", path.display(), rows.summary());
    }
    for p in &a.plot {
        plot::write_plot(&r, p)?;
        let info = plot::check_image(p)?;
        eprintln!(
            "wrote {} ({}x{} {:?})",
            p.display(),
            info.width,
            info.height,
            info.format
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else if a.csv {
        print!("{}", output::jobs_csv(&r.jobs)?);
    } else if a.summary {
        print!("{}", output::summary_text(&r.summary));
    } else {
        print!("{}", output::report_text(&r));
    }
    Ok(())
}

/// `--openmetrics`: the window's summary (none when it holds no jobs), the
/// live queue and, with `--ctld-log`, slurmctld's log.
fn run_openmetrics(a: &JobsArgs) -> anyhow::Result<()> {
    use cellsched_report::metrics::{openmetrics, CtldLog, QueueCounts};
    let ctld = match &a.ctld_log {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading slurmctld log {}", p.display()))?;
            Some(CtldLog::parse(&String::from_utf8_lossy(&bytes)))
        }
        None => None,
    };
    let report = match build_report(a.window.query(), &a.capacity, &a.measure) {
        Ok(r) => Some(r),
        Err(ReportError::NoJobs(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let snap = cellsched_whatif::read_cluster(a.window.partition.as_deref())?;
    let mut queue: std::collections::BTreeMap<String, QueueCounts> = snap.gpu_types().into_iter().map(|t| (t, QueueCounts::default())).collect();
    for p in &snap.pending {
        queue.entry(p.gpu_type.clone()).or_default().pending += 1;
    }
    for r in &snap.running {
        queue.entry(r.gpu_type.clone()).or_default().running += 1;
    }
    print!("{}", openmetrics(report.as_ref().map(|r| &r.summary), &queue, ctld.as_ref()));
    Ok(())
}

fn side(arg: &str, a: &CompareArgs) -> Result<Report, ReportError> {
    match compare::Side::parse(arg)? {
        compare::Side::File(p) => compare::load_report(&p),
        compare::Side::Window(mut q) => {
            q.partition = a.partition.clone();
            q.user = a.user.clone();
            build_report(q, &a.capacity, &MeasureArgs { time_scale: 1.0, iter_log: None })
        }
    }
}

fn run_compare(a: CompareArgs) -> anyhow::Result<()> {
    let ra = side(&a.a, &a)?;
    let rb = side(&a.b, &a)?;
    let rows = compare::compare(&ra.summary, &rb.summary);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        let (na, nb) = (
            a.a_name.as_deref().unwrap_or(&a.a),
            a.b_name.as_deref().unwrap_or(&a.b),
        );
        println!("{}", compare::compare_table(&rows, na, nb));
    }
    Ok(())
}

fn run_history(a: HistoryArgs) -> anyhow::Result<()> {
    let jobs = sacct::fetch_jobs(&a.window.query())?;
    let h = history::history(&jobs);
    for s in &h.skipped {
        log::info!("job {} not in history: {}", s.job_id, s.reason);
    }
    if a.out.as_os_str() == "-" {
        print!("{}", cellsched_core::history::to_csv_string(&h.records));
    } else {
        cellsched_core::history::save_csv(&a.out, &h.records)
            .with_context(|| format!("writing history to {}", a.out.display()))?;
    }
    eprintln!(
        "history: {} jobs exported, {} skipped (need model= and batch= in AdminComment, GPUs, time limit, iterations; RUST_LOG=info lists them)",
        h.records.len(),
        h.skipped.len()
    );
    Ok(())
}
