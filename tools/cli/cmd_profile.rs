//! `cellsched profile`: profile GPUs with NVML and manage the profile database.
//!
//! - `profile gpus [--json]`: NVML inventory of this node.
//! - `profile run --model M --batch B [--gpus N] [--db FILE] -- COMMAND ...`
//!   (or `--probe`): measure seconds per iteration and record the median.
//! - `profile import FILE.csv... --db FILE` (alias `merge`): merge CSVs.
//! - `profile list --db FILE`: show the database.
//! - `profile comm [--db FILE] [--launcher 'srun ...']`: time NCCL all-reduce,
//!   all-gather and p2p with torch.distributed (one process per GPU under the
//!   launcher) and record them as `comm:` rows the estimator's communication
//!   model reads; `--from-output FILE` ingests a recorded run instead.
//!
//! Exit codes: 0 ok, 2 bad option, 3 NVML/NVIDIA driver unavailable,
//! 4 no iterations measured, 130 interrupted (database unchanged), 1 other.
use anyhow::Context;
use cellsched_core::profile_db::ProfileDb;
use cellsched_profiler::iterline::{IterParser, ITER_MARKER};
use cellsched_profiler::{db, nvml, probe, progress, runner, session, ProfilerError};
use comfy_table::{presets::ASCII_BORDERS_ONLY_CONDENSED, Table};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// List this node's GPUs through NVML (type, memory, clocks, power, NVLink, driver).
    Gpus(GpusArgs),
    /// Run a training command (or the built-in probe) and record its iteration time.
    Run(Box<RunArgs>),
    /// Merge profile CSV files into a profile database (created if missing).
    #[command(alias = "merge")]
    Import(ImportArgs),
    /// Show a profile database.
    List(ListArgs),
    /// Measure collective bandwidth/latency (torch.distributed + NCCL) into the profile database.
    Comm(CommArgs),
    /// The built-in CPU probe workload (used by `run --probe`).
    #[command(hide = true)]
    Probe(ProbeArgs),
}

#[derive(clap::Args)]
struct GpusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Model name (catalog name, or the site's own label for the job).
    #[arg(long)]
    model: String,
    /// Global batch size.
    #[arg(long)]
    batch: u32,
    /// GPUs the command uses on this node.
    #[arg(long, default_value_t = 1)]
    gpus: u32,
    /// GPU type to record (default: NVML's name of GPU 0, canonicalised).
    #[arg(long)]
    gpu_type: Option<String>,
    /// Pinned plan, e.g. dp=2,tp=2,pp=1: the plan the command runs, recorded in
    /// the DB (default: the estimator's best, else dp=GPUS, offered to the
    /// command through the environment and recorded as `unknown`).
    #[arg(long)]
    plan: Option<String>,
    /// Stop the command after this many seconds at most.
    #[arg(long, default_value_t = 300.0)]
    duration: f64,
    /// Leading iterations discarded as warm-up.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Stop after this many measured iterations (after warm-up).
    #[arg(long)]
    iters: Option<usize>,
    /// Fewest measured iterations accepted.
    #[arg(long, default_value_t = 3)]
    min_iters: usize,
    /// Warn when fewer iteration lines than this were seen (0: never).
    #[arg(long, default_value_t = session::DEFAULT_WARN_BELOW_ITERS)]
    warn_iters: usize,
    /// Also read iteration times from lines matching this regex (one capture group).
    #[arg(long)]
    regex: Option<String>,
    /// Unit of the --regex capture.
    #[arg(long, value_parser = ["s", "ms"], default_value = "s")]
    regex_unit: String,
    /// Profile database to update (CSV; created if missing). Without it, measure only.
    #[arg(long)]
    db: Option<PathBuf>,
    /// TOML file with `[gpu.NAME]` overrides/extensions of the GPU catalog (the
    /// site's `estimator.gpu_catalog`): its types and aliases name the GPU type recorded.
    #[arg(long)]
    gpu_catalog: Option<PathBuf>,
    /// TOML file with extra `[[model]]` entries (for the estimator's plan).
    #[arg(long)]
    model_catalog: Option<PathBuf>,
    /// Do not use NVML (no GPU sampling; for machines without the driver).
    #[arg(long)]
    no_nvml: bool,
    /// NVML sampling interval in milliseconds.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// Echo the command's stdout to stderr.
    #[arg(long)]
    echo: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// Run the built-in CPU probe instead of COMMAND (not a GPU measurement).
    #[arg(long, conflicts_with = "command")]
    probe: bool,
    /// Matrix size of the probe's iteration.
    #[arg(long, default_value_t = 96, requires = "probe")]
    probe_size: usize,
    /// The training command and its arguments (run without a shell).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(clap::Args)]
struct ImportArgs {
    /// Profile CSV files (`model,batch,gpu_type,nodes,gpus_per_node,iter_time_s, optional plan, peak_mem_gib, first_iter_s`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The database to merge into.
    #[arg(long)]
    db: PathBuf,
}

#[derive(clap::Args)]
struct CommArgs {
    /// Profile database to update (CSV; created if missing). Without it, measure only.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Launcher that starts one process per GPU, split on whitespace
    /// (e.g. 'srun -N2 --ntasks-per-node=8 --gpus-per-node=8'); default: one
    /// process on this node.
    #[arg(long)]
    launcher: Option<String>,
    /// Python interpreter with PyTorch (CUDA, NCCL).
    #[arg(long, default_value = "python3")]
    python: String,
    /// Largest message, bytes per rank (sizes from 64 KiB in steps of 4x).
    #[arg(long, default_value_t = 1 << 28)]
    max_bytes: u64,
    /// Timed calls per size (median recorded).
    #[arg(long, default_value_t = 20)]
    iters: u32,
    /// GPU type to record (default: the device name, canonicalised).
    #[arg(long)]
    gpu_type: Option<String>,
    /// Ingest a recorded benchmark output instead of running it.
    #[arg(long, conflicts_with_all = ["launcher"])]
    from_output: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ListArgs {
    /// The database.
    #[arg(long)]
    db: PathBuf,
}

#[derive(clap::Args)]
struct ProbeArgs {
    /// Iterations to run.
    #[arg(long, default_value_t = 20)]
    iters: u64,
    /// Matrix size.
    #[arg(long, default_value_t = 96)]
    size: usize,
}

/// Runs the subcommand; profiler errors exit with their documented code.
pub fn run(a: Args) -> anyhow::Result<()> {
    let res = match a.cmd {
        Sub::Gpus(g) => gpus(g),
        Sub::Run(r) => run_profile(*r),
        Sub::Import(i) => import(i),
        Sub::List(l) => list(l),
        Sub::Comm(c) => comm(c),
        Sub::Probe(p) => {
            let mut out = std::io::stdout().lock();
            probe::run_probe(&mut out, p.iters, p.size).context("probe output")?;
            Ok(())
        }
    };
    if let Err(e) = &res {
        if let Some(pe) = e.downcast_ref::<ProfilerError>() {
            eprintln!("cellsched: error: {e:#}");
            std::process::exit(pe.exit_code());
        }
    }
    res
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(ASCII_BORDERS_ONLY_CONDENSED)
        .set_header(header.to_vec());
    t
}

fn opt<T: std::fmt::Display>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn gpus(a: GpusArgs) -> anyhow::Result<()> {
    let nv = nvml::open()?;
    let inv = nvml::inventory(&nv)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&inv)?);
        return Ok(());
    }
    println!(
        "Driver {}   CUDA {}   GPUs {}",
        inv.driver_version,
        opt(inv.cuda_version.as_ref()),
        inv.gpus.len()
    );
    let mut t = table(&[
        "GPU",
        "Name",
        "Type",
        "Memory GiB",
        "Max SM MHz",
        "Max Mem MHz",
        "Power limit W",
        "NVLink active",
    ]);
    for g in &inv.gpus {
        t.add_row(vec![
            g.index.to_string(),
            g.name.clone(),
            g.gpu_type.clone().unwrap_or_else(|| "(unknown)".into()),
            opt(g
                .memory_bytes
                .map(|b| format!("{:.1}", b as f64 / (1u64 << 30) as f64))),
            opt(g.max_sm_clock_mhz),
            opt(g.max_mem_clock_mhz),
            opt(g.power_limit_w.map(|w| format!("{w:.0}"))),
            g.nvlink_active_links
                .map(|n| n.to_string())
                .unwrap_or_else(|| "n/a".into()),
        ]);
    }
    println!("{t}");
    Ok(())
}

fn run_profile(a: RunArgs) -> anyhow::Result<()> {
    let parser = match &a.regex {
        Some(re) => IterParser::with_regex(re, if a.regex_unit == "ms" { 1e-3 } else { 1.0 })?,
        None => IterParser::new(),
    };
    let plan = a
        .plan
        .as_deref()
        .map(|p| {
            p.parse().map_err(|e: cellsched_core::CoreError| {
                ProfilerError::invalid("--plan", p, e.to_string())
            })
        })
        .transpose()?;
    if !(a.duration.is_finite() && a.duration > 0.0) {
        return Err(ProfilerError::invalid(
            "--duration",
            a.duration.to_string(),
            "a positive number of seconds",
        )
        .into());
    }
    let command = if a.probe {
        let exe = std::env::current_exe().context("locating the cellsched binary for --probe")?;
        let n = a.warmup + a.iters.unwrap_or(20);
        vec![
            exe.display().to_string(),
            "profile".into(),
            "probe".into(),
            format!("--iters={n}"),
            format!("--size={}", a.probe_size),
        ]
    } else if a.command.is_empty() {
        return Err(ProfilerError::invalid(
            "command",
            "(none)",
            "a training command after '--', or --probe",
        )
        .into());
    } else {
        a.command.clone()
    };
    if a.probe {
        eprintln!(
            "note: --probe runs a synthetic CPU workload: its timings are NOT a GPU measurement"
        );
    }
    let req = session::Request {
        model: a.model.clone(),
        batch: a.batch,
        gpus: a.gpus,
        gpu_type: a.gpu_type.clone(),
        plan,
        command,
        probe: a.probe,
        duration: Duration::from_secs_f64(a.duration),
        warmup: a.warmup,
        max_iters: a.iters,
        min_iters: a.min_iters,
        parser,
        echo: a.echo,
        nvml: !a.no_nvml,
        sample_interval: Duration::from_millis(a.interval_ms.max(10)),
        db: a.db.clone(),
        warn_below_iters: a.warn_iters,
    };
    let est = crate::cmd_estimate::CatalogArgs { db: None, gpu_catalog: a.gpu_catalog.clone(), model_catalog: a.model_catalog.clone() }.estimator()?;
    let interrupt = runner::interrupt_flag()?;
    let (bar, tick) = progress::bar(req.duration);
    let res = session::profile(
        &req,
        &est,
        &interrupt,
        |n| bar.println(format!("note: {n}")),
        tick,
    );
    bar.finish_and_clear();
    let o = res?;
    for w in &o.warnings {
        eprintln!("warning: {w}");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&o)?);
        return Ok(());
    }
    print_outcome(&o);
    Ok(())
}

fn print_outcome(o: &session::Outcome) {
    let s = &o.stats;
    let mut t = table(&[
        "Model",
        "Batch",
        "GPU type",
        "GPUs",
        "Plan",
        "Iterations",
        "Median s/iter",
        "Mean",
        "Min",
        "Max",
        "Estimate",
    ]);
    t.add_row(vec![
        o.plan.model.clone(),
        o.plan.batch.to_string(),
        if o.probe {
            format!("{} (CPU probe)", o.plan.gpu_type)
        } else {
            o.plan.gpu_type.clone()
        },
        o.plan.gpus.to_string(),
        format!("{} ({})", o.plan.plan, o.plan.plan_source),
        format!("{} (+{} warm-up)", s.measured, s.warmup),
        format!("{:.6}", s.median_s),
        format!("{:.6}", s.mean_s),
        format!("{:.6}", s.min_s),
        format!("{:.6}", s.max_s),
        opt(o.plan.estimate_s.map(|e| format!("{e:.6}"))),
    ]);
    println!("{t}");
    if !o.gpus.is_empty() {
        match &o.gpu_window {
            Some(w) => println!(
                "GPU use over the {} measured iterations ({:.1} s to {:.1} s of the run; start-up and warm-up excluded):",
                s.measured, w.start_s, w.end_s
            ),
            None => println!("GPU use:"),
        }
        let mut g = table(&[
            "GPU",
            "Samples",
            "Util %",
            "Peak mem GiB",
            "Power W",
            "SM MHz",
            "Util % whole run",
        ]);
        for x in &o.gpus {
            let whole = o.gpus_whole_run.iter().find(|w| w.index == x.index);
            g.add_row(vec![
                x.index.to_string(),
                x.samples.to_string(),
                opt(x.mean_util_pct.map(|v| format!("{v:.0}"))),
                opt(x
                    .peak_mem_bytes
                    .map(|b| format!("{:.2}", b as f64 / (1u64 << 30) as f64))),
                opt(x.mean_power_w.map(|v| format!("{v:.0}"))),
                opt(x.mean_sm_clock_mhz.map(|v| format!("{v:.0}"))),
                opt(whole.and_then(|w| w.mean_util_pct).map(|v| format!("{v:.0}"))),
            ]);
        }
        println!("{g}");
    }
    let why = format!("{:?}", o.stop).to_lowercase();
    println!(
        "Stopped: {why} after {:.1} s; command exit code {}",
        o.wall_s,
        opt(o.exit_code)
    );
    if let Some(f) = o.first_iter_s {
        println!("First iteration ended {f:.1} s after the command started (start-up, model build, first iteration: the restart cost of an elastic job starts from it)");
    }
    if o.probe {
        println!("Source: built-in CPU probe ({ITER_MARKER} lines) - not a GPU measurement");
    }
    match &o.db {
        Some((p, n)) => println!("Recorded median in {} ({n} records)", p.display()),
        None => println!("Not recorded (no --db)"),
    }
}

fn import(a: ImportArgs) -> anyhow::Result<()> {
    let s = db::merge_files(&a.db, &a.files)?;
    for (f, n) in &s.files {
        println!("{f}: {n} rows");
    }
    println!("{}: {} records", a.db.display(), s.total);
    Ok(())
}

fn list(a: ListArgs) -> anyhow::Result<()> {
    let d = ProfileDb::load_csv(&a.db).map_err(ProfilerError::from)?;
    let mut t = table(&[
        "Model",
        "Batch",
        "GPU type",
        "Nodes",
        "GPUs/node",
        "s/iter",
        "Plan",
        "Peak GiB",
        "First iter s",
    ]);
    for r in d.records() {
        t.add_row(vec![
            r.model.clone(),
            r.batch.to_string(),
            r.gpu_type.clone(),
            r.nodes.to_string(),
            r.gpus_per_node.to_string(),
            format!("{:.6}", r.iter_time_s),
            r.plan.map_or_else(|| cellsched_core::profile_db::UNKNOWN_PLAN.to_string(), |p| p.to_string()),
            opt(r.peak_mem_gib.map(|g| format!("{g:.1}"))),
            opt(r.first_iter_s.map(|x| format!("{x:.1}"))),
        ]);
    }
    println!("{t}\n{} records", d.len());
    Ok(())
}

fn comm(a: CommArgs) -> anyhow::Result<()> {
    use cellsched_core::estimator::{Calibration, CalibrationPolicy};
    use cellsched_core::estimator::Estimator;
    use cellsched_profiler::comm as bench;
    let output = match &a.from_output {
        Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        None => {
            let script = std::env::temp_dir().join(format!("cellsched-comm-{}.py", std::process::id()));
            std::fs::write(&script, bench::SCRIPT).with_context(|| format!("writing {}", script.display()))?;
            let mut argv: Vec<String> = a.launcher.as_deref().unwrap_or("").split_whitespace().map(str::to_string).collect();
            argv.extend([a.python.clone(), script.display().to_string(), a.max_bytes.to_string(), a.iters.to_string()]);
            eprintln!("cellsched: running {}", argv.join(" "));
            let out = std::process::Command::new(&argv[0]).args(&argv[1..]).stderr(std::process::Stdio::inherit()).output();
            let _ = std::fs::remove_file(&script);
            let out = out.map_err(|e| ProfilerError::Spawn { command: argv.join(" "), msg: e.to_string() })?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if !out.status.success() && !text.contains(bench::ERROR_MARKER) {
                anyhow::bail!("{} exited with {}; its output:\n{text}", argv[0], out.status);
            }
            text
        }
    };
    let points = bench::parse_output(&output, a.gpu_type.as_deref())?;
    let mut t = table(&["Collective", "Bytes/rank", "Nodes x GPUs", "GPU type", "Median ms", "Bus GB/s"]);
    for p in &points {
        let ranks = (p.nodes * p.gpus_per_node) as f64;
        // NCCL's bus bandwidth convention: all-reduce moves 2(n-1)/n, all-gather (n-1)/n of the bytes.
        let factor = match p.collective.name() {
            "all_reduce" => 2.0 * (ranks - 1.0) / ranks,
            "all_gather" => (ranks - 1.0) / ranks,
            _ => 1.0,
        };
        t.add_row(vec![
            p.collective.to_string(),
            p.bytes.to_string(),
            format!("{} x {}", p.nodes, p.gpus_per_node),
            p.gpu_type.clone(),
            format!("{:.3}", p.time_s * 1e3),
            format!("{:.2}", p.bytes as f64 * factor / p.time_s / 1e9),
        ]);
    }
    println!("{t}");
    let recs: Vec<_> = points.iter().map(|p| p.to_record()).collect();
    let base = Estimator::new(cellsched_core::gpu::GpuCatalog::builtin(), cellsched_core::model::ModelCatalog::builtin());
    let cal = Calibration::fit(&base, &recs, &CalibrationPolicy::default());
    for l in &cal.report.links {
        println!(
            "{}: measured x{:.2} in a node, x{:.2} across nodes over the estimator's alpha-beta defaults ({} + {} rows)",
            l.gpu_type, l.intra, l.net, l.points.0, l.points.1
        );
    }
    match &a.db {
        Some(path) => {
            let n = db::insert_records(path, recs)?;
            println!("recorded {} collective rows in {} ({n} records)", points.len(), path.display());
        }
        None => println!("(no --db: nothing recorded)"),
    }
    Ok(())
}
