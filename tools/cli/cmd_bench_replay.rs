//! `cellsched bench replay`: replay a small trace on the live local cluster,
//! stock Slurm then cellsched, and compare them from sacct (plus the
//! simulator on the same trace).
//!
//! `cellsched bench replay --trace bench/replay/gavel-small.csv [--speedup 30] [--json]
//!  [--dir D --port-base N] [--modes stock,cellsched] [--elastic] [--groups v100:2x8,p100:1x8,k80:1x8]
//!  [--truth etc/examples/truth-gavel.csv] [--knowledge bench/truth/gavel-knowledge-1gpu.csv] [--dry-run]`
//!
//! Truth: the emulated trainer sleeps the measured iteration time of the
//! GPUs each job was granted (`--truth`). Knowledge: the plugins' estimator,
//! calibrated with `--knowledge` (written into the cellsched pass's
//! `cellsched.toml` as `[estimator] profile_db`). The live cluster's node
//! groups (`--groups`) are GPU types the truth table covers.
use anyhow::{bail, Context, Result};
use cellsched_devcluster::{parse_port_base, LocalClusterSpec, NodeGroup};
use cellsched_core::estimator::Estimator;
use cellsched_replay::results::{live_table, sim_table};
use cellsched_replay::workload::sbatch_args;
use cellsched_replay::{interrupt, runner, sim, Comparison, LiveOptions, Mode, Settings};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Trace CSV (job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type[,user,freeze]).
    #[arg(long)]
    trace: PathBuf,
    /// Time compression: trace seconds per real second.
    #[arg(long, default_value_t = 30.0)]
    speedup: f64,
    /// Modes to run, in order (comma list of stock, cellsched, elastic:
    /// cellsched with every job opted in to reconfiguration, `--dl-elastic`).
    #[arg(long, default_value = "stock,cellsched")]
    modes: String,
    /// Compare the same jobs without and with `--dl-elastic`: the modes
    /// cellsched,elastic (replaces --modes).
    #[arg(long)]
    elastic: bool,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
    /// Cluster directory [default: as `cellsched cluster`].
    #[arg(long, env = "CELLSCHED_CLUSTER_DIR", value_name = "DIR")]
    dir: Option<PathBuf>,
    /// First port of the cluster's range [default: as `cellsched cluster`].
    #[arg(long, env = "CELLSCHED_PORT_BASE", value_name = "PORT", value_parser = port_base)]
    port_base: Option<u16>,
    /// Plugin configuration (cellsched.toml) for the cellsched pass
    /// [default: bench/replay/cellsched.toml when present].
    #[arg(long, value_name = "FILE")]
    cellsched_toml: Option<PathBuf>,
    /// Simulator cluster TOML mirroring the live cluster [default: bench/replay/gavel-cluster.toml].
    #[arg(long, value_name = "FILE")]
    sim_cluster: Option<PathBuf>,
    /// Simulator: Cells may use up to this many times the requested GPUs
    /// [default: the replay's cellsched.toml]; with the live model the
    /// count is fixed as the cellsched pass submits it.
    #[arg(long, value_name = "FACTOR")]
    sim_max_gpu_factor: Option<f64>,
    /// How the simulator mirrors the live run: `live` (limits as submitted,
    /// node shapes, fixed counts, launch time, scheduling cadence; see
    /// `cellsched_replay::sim`) or `bare` (the trace as is, decisions at every event).
    #[arg(long, default_value = "live", value_name = "MODEL")]
    sim_model: String,
    /// Live model: mechanisms to leave out, comma list of limits, nodes,
    /// counts, launch, slurm (Slurm's planning and cadences), to see what each contributes.
    #[arg(long, value_name = "LIST", default_value = "")]
    sim_without: String,
    /// Launch time per run the simulator assumes, real seconds, stock and
    /// cellsched pass (GPUs held beyond the job's work: sacct's run time
    /// minus the trainer's own elapsed time; every live run prints what it
    /// measured). Default: the mean of five replays on the local cluster
    /// (2026-11-26, bench/HISTORY.md).
    #[arg(long, value_name = "STOCK,CELLSCHED", default_value = "1.28,1.34")]
    sim_launch_s: String,
    /// Elastic pass: real seconds from a reconfiguration's signal to the
    /// job's GPUs being free again that the simulator puts on its clock
    /// (the trainer's checkpoint, the elastic thread's poll and requeue;
    /// every live run prints what it measured from slurmctld's log). The
    /// restart itself is the trainer's `CELLSCHED_EMU_RESTART_S`.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    sim_reconf_latency_s: f64,
    /// Skip the simulator comparison.
    #[arg(long)]
    no_sim: bool,
    /// Live cluster node groups, TYPE:NODESxGPUS comma list (types the truth table covers).
    #[arg(long, default_value = "v100:2x8,p100:1x8,k80:1x8")]
    groups: String,
    /// Truth table the emulated trainer (and the simulator's clock) reads [default: etc/examples/truth-gavel.csv].
    #[arg(long, value_name = "FILE")]
    truth: Option<PathBuf>,
    /// Knowledge: profile DB for the plugins' estimator and the simulator's
    /// [default: bench/truth/gavel-knowledge-1gpu.csv]; `none` for the datasheet estimator.
    #[arg(long, value_name = "FILE")]
    knowledge: Option<String>,
    /// The emulated training job [default: etc/examples/emulated-train.sh].
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Time limit = max(declared, FACTOR × predicted run on the requested Cell).
    #[arg(long, default_value_t = 3.0, value_name = "FACTOR")]
    limit_factor: f64,
    /// Real seconds a mode may run; unfinished jobs are then cancelled and reported.
    #[arg(long, default_value_t = 600.0, value_name = "SECONDS")]
    timeout: f64,
    /// Seconds between squeue polls.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    poll: f64,
    /// Leave the cluster up at the end (default: bring it down).
    #[arg(long)]
    keep_up: bool,
    /// Print the sbatch command lines of each mode and the simulator's view
    /// (with --json: the prepared jobs and the simulator's side); start nothing.
    #[arg(long)]
    dry_run: bool,
}

fn port_base(s: &str) -> Result<u16, String> {
    parse_port_base(s).map_err(|e| e.to_string())
}

/// `rel` under the current directory, else under the source tree this binary was built from.
fn repo_file(rel: &str) -> Option<PathBuf> {
    [std::env::current_dir().ok(), Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")))]
        .into_iter()
        .flatten()
        .map(|d| d.join(rel))
        .find(|p| p.is_file())
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| format!("{} does not exist", p.display()))
}

/// UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// The simulator's model of the live run (`--sim-model`, `--sim-launch-s`;
/// the cadences from the cluster's `SchedulerParameters` and the plugins'
/// configuration), in trace seconds.
fn live_model(a: &Args, spec: &LocalClusterSpec, cfg: &cellsched_core::config::Config) -> Result<sim::LiveModel> {
    match a.sim_model.as_str() {
        "bare" => return Ok(sim::LiveModel::none()),
        "live" => {}
        m => bail!("--sim-model '{m}': expected live or bare"),
    }
    let launch: Vec<f64> = a
        .sim_launch_s
        .split(',')
        .map(|x| x.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
        .collect::<Option<Vec<f64>>>()
        .filter(|v| v.len() == 2)
        .with_context(|| format!("--sim-launch-s '{}': expected two seconds >= 0, STOCK,CELLSCHED", a.sim_launch_s))?;
    let params = spec.scheduler_parameters.as_deref().unwrap_or(cellsched_devcluster::DEV_SCHEDULER_PARAMETERS);
    let mut off = std::collections::BTreeSet::new();
    for w in a.sim_without.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if !["limits", "nodes", "counts", "launch", "slurm"].contains(&w) {
            bail!("--sim-without '{w}': expected limits, nodes, counts, launch or slurm");
        }
        off.insert(w);
    }
    let on = |m: &str| !off.contains(m);
    let launch = if on("launch") { launch } else { vec![0.0, 0.0] };
    Ok(sim::LiveModel {
        submitted_limits: on("limits"),
        fewest_nodes: on("nodes"),
        fixed_counts: on("counts"),
        launch_stock_s: launch[0] * a.speedup,
        launch_cellsched_s: launch[1] * a.speedup,
        slurm_planning: on("slurm"),
        backfill_interval_s: sim::scheduler_parameter(params, "bf_interval").map(|s| s * a.speedup),
        replan_interval_s: Some(cfg.placement.replan_interval_s as f64 * a.speedup),
        replan_cooldown_s: cfg.placement.replan_cooldown_s as f64 * a.speedup,
        reconf_truth: a.elastic.then_some(cellsched_sim::ReconfTruth {
            save_s: a.sim_reconf_latency_s * a.speedup,
            restart_s: cellsched_replay::workload::EMU_RESTART_S,
        }),
    })
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    let modes = Mode::parse_list(if a.elastic { "cellsched,elastic" } else { &a.modes })?;
    if !(a.sim_reconf_latency_s.is_finite() && a.sim_reconf_latency_s >= 0.0) {
        bail!("--sim-reconf-latency-s must be a number of seconds >= 0, got {}", a.sim_reconf_latency_s);
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds, got {}", a.timeout);
    }
    let trace_path = a.trace.display().to_string();
    let trace = cellsched_sim::trace::load_trace(&trace_path)?;
    if trace.is_empty() {
        bail!("{trace_path}: the trace has no jobs");
    }
    let mut spec = LocalClusterSpec::from_env().context("reading the cluster settings from the environment")?;
    if let Some(d) = &a.dir {
        spec.dir = if d.is_absolute() { d.clone() } else { std::env::current_dir()?.join(d) };
    }
    if let Some(p) = a.port_base {
        spec.port_base = p;
    }
    spec.groups = NodeGroup::parse_list(&a.groups)?;
    let truth_path = match &a.truth {
        Some(p) => absolute(p)?,
        None => absolute(&repo_file("etc/examples/truth-gavel.csv").context("etc/examples/truth-gavel.csv not found; give --truth")?)?,
    };
    let truth_table = cellsched_sim::truth::TruthTable::load(&truth_path.display().to_string())?;
    let knowledge = match a.knowledge.as_deref() {
        Some("none") => None,
        Some(p) => Some(absolute(Path::new(p))?),
        None => repo_file("bench/truth/gavel-knowledge-1gpu.csv").map(|p| absolute(&p)).transpose()?,
    };
    let toml_path = a.cellsched_toml.clone().or_else(|| repo_file("bench/replay/cellsched.toml"));
    let mut toml = match &toml_path {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading --cellsched-toml {}", p.display()))?,
        None => String::new(),
    };
    if let Some(k) = &knowledge {
        if toml.lines().any(|l| l.trim() == "[estimator]") {
            bail!("--cellsched-toml has an [estimator] table; the replay writes [estimator] profile_db from --knowledge (give --knowledge none to keep yours)");
        }
        toml.push_str(&format!("\n[estimator]\nprofile_db = {:?}\n", k.display().to_string()));
    }
    let plugin_cfg = cellsched_core::config::Config::from_toml_str(&toml, "the replay's cellsched.toml")?;
    spec.cellsched_toml = Some(toml);
    let script = match &a.script {
        Some(p) => absolute(p)?,
        None => absolute(&repo_file("etc/examples/emulated-train.sh").context(
            "etc/examples/emulated-train.sh not found under the current directory or the source tree; give --script",
        )?)?,
    };
    let run_tag = format!("r{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    let settings = Settings {
        speedup: a.speedup,
        limit_factor: a.limit_factor,
        script,
        out_dir: spec.dir.join("replay").join(&run_tag),
        run_tag,
        truth: truth_path.clone(),
    };
    // The plugins' estimator, assembled from the cellsched.toml they get.
    let est = {
        let a = Estimator::from_config(&plugin_cfg.estimator, None);
        if let Some(p) = a.problems.first() {
            bail!("the replay's cellsched.toml: {p}");
        }
        a.estimator
    };
    let shapes = cellsched_replay::shapes_of_cluster(&spec);
    let jobs = cellsched_replay::prepare(&trace, &shapes, &est, Some(&truth_table), &settings)?;
    let unknown = jobs.iter().filter(|j| j.unknown_model).count();
    eprintln!("truth (emulator clock): {}; knowledge (plugins' estimator): {}", truth_path.display(), knowledge.as_ref().map_or("datasheet only".into(), |k| k.display().to_string()));
    if unknown > 0 {
        eprintln!("{unknown} job(s) name a model the catalog lacks: submitted as stock Slurm would run them (typed GRES) in every mode");
    }

    // The simulator on the same trace (cheap: tens of jobs).
    let sim_side = if a.no_sim {
        None
    } else {
        let path = match &a.sim_cluster {
            Some(p) => Some(p.clone()),
            None => repo_file("bench/replay/gavel-cluster.toml"),
        };
        match path {
            Some(p) => {
                let p = p.display().to_string();
                if sim::shapes_of_sim_cluster(&p)? != shapes {
                    eprintln!("note: simulator cluster {p} differs from the live cluster's node groups");
                }
                let k = knowledge.as_ref().map(|k| k.display().to_string());
                let mut opts = cellsched_sim::policy::CellschedOptions::from_config(&plugin_cfg);
                if let Some(f) = a.sim_max_gpu_factor {
                    opts.max_gpu_factor = f;
                }
                let elastic = modes.contains(&Mode::Elastic);
                if elastic {
                    opts.elastic = sim::elastic_in_trace_s(&plugin_cfg.elastic, a.speedup);
                }
                let model = live_model(&a, &spec, &plugin_cfg)?;
                let sim_trace = sim::live_trace(&trace, &jobs, a.speedup, &model);
                Some(sim::simulate_both(&sim_trace, &p, &opts, &model, Some(&truth_path.display().to_string()), k.as_deref(), elastic)?)
            }
            None => {
                eprintln!("note: no bench/replay/gavel-cluster.toml found; skipping the simulator (give --sim-cluster)");
                None
            }
        }
    };

    if a.dry_run && a.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "jobs": jobs, "sim": sim_side }))?);
        return Ok(());
    }
    if a.dry_run {
        for &m in &modes {
            println!("# mode {m}: {} jobs", jobs.len());
            for j in &jobs {
                println!("at {:>7.1} s: sbatch {}", j.submit_at_s, sbatch_args(j, m, &settings).join(" "));
            }
        }
        if let Some(s) = &sim_side {
            println!("{}", sim_table(s));
        }
        return Ok(());
    }

    interrupt::install();
    let last_submit = jobs.last().map_or(0.0, |j| j.submit_at_s);
    if a.timeout <= last_submit {
        bail!("--timeout {} s ends before the last submission at {last_submit:.0} s; raise it or the --speedup", a.timeout);
    }
    let opts = LiveOptions { spec, timeout_s: a.timeout, poll_s: a.poll, queue_wait_s: 60.0, keep_up: a.keep_up };
    let started = utc_now();
    eprintln!(
        "replaying {} jobs from {trace_path} at {}x on the cluster at {} (ports from {}); modes: {}",
        jobs.len(),
        a.speedup,
        opts.spec.dir.display(),
        opts.spec.port_base,
        modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
    );
    let mut sink = |line: &str| eprintln!("{line}");
    let results = runner::run_modes(&jobs, &modes, &settings, &opts, &mut sink)?;
    let c = Comparison::new(trace_path, a.speedup, started, results, sim_side);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(());
    }
    print_text(&c, &settings);
    Ok(())
}

fn print_text(c: &Comparison, s: &Settings) {
    println!("live replay of {} at {}x ({} UTC); job output in {}", c.trace, c.speedup, c.started, s.out_dir.display());
    println!("truth (emulator clock): {}", s.truth.display());
    println!("{}", live_table(c));
    for m in &c.modes {
        match &m.iteration_time_error {
            Some(e) => println!(
                "{}: estimator error over {} jobs, predicted (AdminComment iter_s) vs measured (the jobs' cellsched-iter lines) seconds per iteration: MAPE {:.1}%, median APE {:.1}%, bias {:+.1}%",
                m.mode,
                e.n,
                e.mape * 100.0,
                e.median_ape * 100.0,
                e.bias.unwrap_or(0.0) * 100.0
            ),
            None => println!("{}: no job with both a prediction and a measurement", m.mode),
        }
    }
    for m in &c.modes {
        for p in &m.problems {
            println!(
                "  {}: trace job {}{}: {}",
                m.mode,
                p.trace_job,
                p.slurm_id.map_or(String::new(), |id| format!(" (Slurm job {id})")),
                p.reason
            );
        }
    }
    for m in &c.modes {
        if let Some(l) = m.launch_s {
            println!("{}: launch time measured (sacct run time minus the trainer's own elapsed time), mean {l:.2} real s per job", m.mode);
        }
    }
    if let Some(sim) = &c.sim {
        println!("simulator on the same trace ({}):", sim.cluster);
        for line in &sim.model {
            println!("  model: {line}");
        }
        println!("{}", sim_table(sim));
    }
    for (m, g) in &c.job_gaps {
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
        println!(
            "{m} vs simulated, {} jobs both finished ({} on the same Cell), trace s live/sim: mean queue {}/{}, run {}/{}, JCT {}/{}; same-Cell run excess {}",
            g.jobs,
            g.same_cell,
            f(g.queue_s.0),
            f(g.queue_s.1),
            f(g.run_s.0),
            f(g.run_s.1),
            f(g.jct_s.0),
            f(g.jct_s.1),
            f(g.run_excess_same_cell_s)
        );
    }
    let (live, simr) = (c.live_ratios.as_ref().and_then(|r| r.avg_jct), c.sim.as_ref().and_then(|s| s.ratios.avg_jct));
    if let Some(l) = live {
        println!(
            "live: cellsched's average JCT is {:.1}% {} than stock Slurm's (stock/cellsched = {l:.2}x)",
            (1.0 - 1.0 / l).abs() * 100.0,
            if l >= 1.0 { "lower" } else { "higher" }
        );
    }
    if let Some(e) = c.elastic_ratios.as_ref().and_then(|r| r.avg_jct) {
        println!(
            "live: with --dl-elastic the average JCT is {:.1}% {} than without (cellsched/elastic = {e:.2}x)",
            (1.0 - 1.0 / e).abs() * 100.0,
            if e >= 1.0 { "lower" } else { "higher" }
        );
    }
    if let Some(x) = simr {
        println!("simulator: slurm/cellsched average JCT = {x:.2}x");
    }
    if let Some(q) = c.live_over_sim {
        println!("live ratio / simulated ratio = {q:.2} ({:+.0}%)", (q - 1.0) * 100.0);
    }
    if let Some(sim) = &c.sim {
        if let Some(x) = sim.elastic_ratios.as_ref().and_then(|r| r.avg_jct) {
            println!("simulator: cellsched/elastic average JCT = {x:.2}x ({} reconfigurations)", sim.reconfigs.len());
        }
        for r in &sim.reconfigs {
            println!(
                "  simulated {} of trace job {} at {:.0} s{}{} (predicted gain {:.0} s)",
                r.kind,
                r.trace_job,
                r.at_s,
                r.to.as_ref().map(|t| format!(" to {t}")).unwrap_or_default(),
                r.for_job.as_ref().map(|j| format!(" for trace job {j}")).unwrap_or_default(),
                r.gain_s
            );
        }
    }
    for m in c.modes.iter().filter(|m| m.mode == Mode::Elastic) {
        let moved: Vec<String> = m.jobs.iter().filter(|j| j.reconfs > 0).map(|j| format!("{} ({}x, ended on {})", j.trace_job, j.reconfs, j.gpu_type.as_deref().unwrap_or("-"))).collect();
        println!("live: {} reconfigurations: {}", m.jobs.iter().map(|j| j.reconfs).sum::<u32>(), if moved.is_empty() { "none".into() } else { moved.join(", ") });
    }
    if let Some(q) = c.elastic_live_over_sim {
        println!("live elastic ratio / simulated elastic ratio = {q:.2} ({:+.0}%)", (q - 1.0) * 100.0);
    }
    match c.same_direction {
        Some(true) => println!("direction: live and simulated results agree"),
        Some(false) => println!("direction: live and simulated results DISAGREE"),
        None => {}
    }
}
