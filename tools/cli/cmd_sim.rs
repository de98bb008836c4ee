//! `cellsched sim`: trace-driven simulation of scheduling policies.
//!
//! - `cellsched sim --trace T.csv --cluster C.toml [--db iter_times.csv] [--truth measured.csv [--truth-missing estimate|skip]] --policy NAME [--seed N] [--json]`
//! - `cellsched sim convert-gavel --input philly-X.trace --output T.csv --cluster C.toml [--truth measured.csv] [--seed N]`
//! - `cellsched sim gavel-truth --input simulation_throughputs.json --output truth.csv [--single-gpu-output knowledge.csv] [--consistent-output consistent.csv]`
//!
//! Truth (`--truth`, measured iteration times) runs the clock; knowledge
//! (the estimator calibrated with `--db`, and the declared iterations,
//! optionally noisy) makes every decision. Without `--truth` the clock runs
//! on the knowledge itself: the oracle mode, an upper bound only.
//! - `cellsched sim generate --cluster C.toml --jobs N --output T.csv [--load 0.9] [--seed N]`
use anyhow::{bail, Context, Result};
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::policy::{self, Ablation, CellschedOptions};
use cellsched_sim::truth::{Truth, TruthMissing, TruthTable, TruthTimes};
use cellsched_sim::{ClusterSpec, IterTimeSource, Metrics, Sim, SimConfig, TimeCache, TraceJob};
use std::rc::Rc;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use std::io::IsTerminal;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    cmd: Option<SimCmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand)]
enum SimCmd {
    /// Convert a Gavel/Philly trace (../shared/data/gavel/philly-*.trace) into the trace CSV.
    ConvertGavel(ConvertArgs),
    /// Write a seeded synthetic heterogeneous trace for a cluster.
    Generate(GenerateArgs),
    /// Build a truth table from Gavel's measured throughputs (simulation_throughputs.json).
    GavelTruth(GavelTruthArgs),
}

#[derive(clap::Args)]
struct GavelTruthArgs {
    /// Gavel's simulation_throughputs.json.
    #[arg(long)]
    input: String,
    /// Truth table CSV to write (every measured point).
    #[arg(long)]
    output: String,
    /// Also write only the single-GPU points (a knowledge DB as one profiler run per GPU type gives).
    #[arg(long)]
    single_gpu_output: Option<String>,
    /// Also write the table without the multi-GPU points of weak-scaling series that contradict themselves
    /// (more GPUs at the same per-GPU batch make an iteration faster; as `bench estimator` flags them), for
    /// checking how much a simulated result rests on those points.
    #[arg(long)]
    consistent_output: Option<String>,
}

/// Inputs shared by `sim` and `bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct Inputs {
    /// Trace CSV (job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type).
    #[arg(long)]
    pub trace: Option<String>,
    /// Cluster TOML with [[group]] tables (gpu_type, nodes, gpus_per_node[, inter_node_gbps]).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Knowledge: measured iteration times CSV (model,batch,gpu_type,nodes,gpus_per_node,iter_time_s) that calibrates the estimator; else the datasheet estimator.
    #[arg(long)]
    pub db: Option<String>,
    /// Truth: measured iteration times CSV (same columns; iter_time_s <= 0 = does not fit) that runs the clock. Without it the clock runs on the knowledge (oracle mode, an upper bound).
    #[arg(long)]
    pub truth: Option<String>,
    /// A Cell the truth table lacks: `estimate` (the estimator calibrated on the whole truth table; counted) or `skip` (the Cell is not used; counted).
    #[arg(long, default_value = "estimate")]
    pub truth_missing: String,
    /// Seed (recorded in results; the engine is deterministic).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Shrink the cluster about K times (each group keeps nodes/K nodes, or
    /// one node with gpus_per_node x nodes / K GPUs); requests above what a
    /// type then has are lowered to it (counted in the output).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub shrink: u32,
    /// Grow the cluster K times (every group has K times its nodes), for light load.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub grow: u32,
    /// Which jobs opted in to reconfiguration (`--dl-elastic`): `trace` (its
    /// `elastic` column), `all` or `none`.
    #[arg(long, value_name = "trace|all|none", default_value = "trace")]
    pub elastic_jobs: String,
}

/// Engine and cellsched settings shared by `sim` and `bench`.
///
/// The `cellsched` policy's settings come from the plugins' configuration:
/// `--config cellsched.toml` (its `[placement]`, `[ordering]` and `[elastic]` sections),
/// else the plugins' defaults; the per-knob flags below override single keys.
#[derive(clap::Args, Clone, Debug)]
pub struct Tuning {
    /// cellsched: the plugins' cellsched.toml; its [placement], [ordering], [elastic] and [declared] sections drive the policy (default: the plugins' defaults). The flags below override single keys.
    #[arg(long, value_name = "cellsched.toml")]
    pub config: Option<String>,
    /// cellsched: use the requested GPU type and count (no Cell search).
    #[arg(long)]
    pub no_cell_search: bool,
    /// cellsched: FCFS instead of A-SRPT ordering.
    #[arg(long)]
    pub no_srpt: bool,
    /// cellsched: keep each job's submission-time Cell (no re-planning).
    #[arg(long)]
    pub no_replan: bool,
    /// cellsched: ignore layer-freezing opt-ins.
    #[arg(long)]
    pub no_freeze: bool,
    /// cellsched: components to switch off, comma-separated (cell-search,srpt,replan,freeze,aging,load-sizing,elastic).
    #[arg(long, value_name = "LIST")]
    pub ablation: Option<String>,
    /// cellsched: accept a free Cell up to this many times slower than the job's best (overrides placement.replan_max_slowdown).
    #[arg(long)]
    pub max_slowdown: Option<f64>,
    /// cellsched: take any free Cell within --max-slowdown at once, without
    /// predicting whether waiting for the planned Cell finishes sooner
    /// (job_submit with placement.replan_wait_test = false).
    #[arg(long)]
    pub no_wait_test: bool,
    /// cellsched: Cells may use up to this many times the requested GPUs (overrides placement.max_gpu_factor).
    #[arg(long)]
    pub max_gpu_factor: Option<f64>,
    /// cellsched: a job grows to more GPUs only while the extra GPUs' marginal efficiency is at least this (0..=1; 0 = fastest Cell within the cap; overrides placement.min_marginal_efficiency).
    #[arg(long)]
    pub min_marginal_efficiency: Option<f64>,
    /// cellsched: most GPUs one job may get (overrides placement.max_gpus).
    #[arg(long)]
    pub max_gpus: Option<u32>,
    /// cellsched: A-SRPT aging bound in seconds (overrides ordering.aging_bound_s).
    #[arg(long)]
    pub aging_bound: Option<f64>,
    /// cellsched: a job ages only after waiting this many times its own predicted remaining time (0 = absolute bound; overrides ordering.aging_factor).
    #[arg(long)]
    pub aging_factor: Option<f64>,
    /// cellsched: at most this many aged jobs (the first to age) are ranked ahead at a time (0 = all; overrides ordering.aged_lane).
    #[arg(long)]
    pub aged_lane: Option<u32>,
    /// cellsched: what the A-SRPT order ranks by: area (remaining GPU-seconds) or time (remaining seconds) (overrides ordering.rank_by).
    #[arg(long)]
    pub rank_by: Option<String>,
    /// cellsched: a deadline job (trace column `due`) moves up once its slack is at most this many times its remaining time (overrides ordering.deadline_slack_factor).
    #[arg(long)]
    pub deadline_slack_factor: Option<f64>,
    /// cellsched: guard for an aged job that cannot start: none, type (close its GPU type for the pass) or shadow (EASY reservation).
    #[arg(long, default_value = "none")]
    pub aged_guard: String,
    /// Seconds a preempted job loses on restart (srtf, tiresias).
    #[arg(long, default_value_t = 30.0)]
    pub preempt_overhead: f64,
    /// Truth of elastic reconfigurations: measured save and restart times by checkpoint size (CSV with ckpt_bytes, save_s, load_s, restart_s, e.g. bench/truth/h200-restart.csv); without it the clock charges the cost model the rule decides with.
    #[arg(long, value_name = "FILE.csv")]
    pub restart_truth: Option<String>,
    /// Extra scheduling passes every this many seconds while jobs wait.
    #[arg(long, value_name = "SECONDS")]
    pub replan_interval: Option<f64>,
    /// Stop the simulated clock here (unfinished jobs are counted).
    #[arg(long, value_name = "SECONDS")]
    pub max_time: Option<f64>,
    /// Knowledge learns from the cluster: each run's measured iteration time
    /// on its Cell (truth) joins the knowledge this many seconds after the
    /// run starts, as at a site that imports its jobs' measurements into the
    /// profile DB (`cellsched report --profile-rows`, then `cellsched
    /// profile import`): the measured Cell answers for itself and the
    /// estimator is recalibrated on every Cell learnt so far, moving the
    /// model's other Cells too, as in the plugins. Needs --truth. Default:
    /// the knowledge stays as given.
    #[arg(long, value_name = "SECONDS")]
    pub learn_after: Option<f64>,
    /// Knowledge of iterations: the scheduler knows true x exp(NOISE x N(0,1)) (declared-count noise; 0 = exact).
    #[arg(long, default_value_t = 0.0)]
    pub iter_noise: f64,
    /// Seconds a run on a Cell that truth says does not fit holds its GPUs before it fails.
    #[arg(long, default_value_t = 60.0)]
    pub oom_startup: f64,
    /// Knowledge of iterations: the random forest fitted on this job-history CSV
    /// (`cellsched report history` form) predicts each job's iterations from
    /// (user, model, batch, GPUs, time limit); the declared count where it cannot.
    #[arg(long, value_name = "HISTORY.csv", conflicts_with = "iter_noise")]
    pub iters_from_history: Option<String>,
}

impl Tuning {
    /// The cellsched options these flags select.
    pub fn cellsched(&self) -> Result<CellschedOptions> {
        let mut off = Vec::new();
        for (on, a) in [
            (self.no_cell_search, Ablation::CellSearch),
            (self.no_srpt, Ablation::Srpt),
            (self.no_replan, Ablation::Replan),
            (self.no_freeze, Ablation::Freeze),
        ] {
            if on {
                off.push(a);
            }
        }
        if let Some(list) = &self.ablation {
            off.extend(Ablation::parse_list(list)?);
        }
        let cfg = match &self.config {
            Some(p) => cellsched_core::config::Config::load(std::path::Path::new(p)).with_context(|| format!("--config {p}"))?,
            None => cellsched_core::config::Config::default(),
        };
        let mut o = CellschedOptions::from_config(&cfg);
        if let Some(x) = self.max_slowdown {
            o.max_slowdown = x;
        }
        if self.no_wait_test {
            o.wait_test = false;
        }
        if let Some(x) = self.max_gpu_factor {
            o.max_gpu_factor = x;
        }
        if let Some(x) = self.min_marginal_efficiency {
            o.min_marginal_efficiency = x;
        }
        if let Some(x) = self.max_gpus {
            o.max_gpus = x;
        }
        if let Some(x) = self.aging_bound {
            o.asrpt.aging_bound_s = x;
        }
        if let Some(x) = self.aging_factor {
            o.asrpt.aging_factor = x;
        }
        if let Some(x) = &self.rank_by {
            o.asrpt.rank_by = x.parse()?;
        }
        if let Some(x) = self.aged_lane {
            o.asrpt.aged_lane = x;
        }
        if let Some(x) = self.deadline_slack_factor {
            o.asrpt.deadline_slack_factor = x;
        }
        o.aged_guard = self.aged_guard.parse()?;
        Ok(o.without(&off))
    }

    /// The engine settings (reads `--restart-truth`).
    pub fn config(&self, seed: u64) -> Result<SimConfig> {
        let restart_truth = match &self.restart_truth {
            Some(p) => Some(std::sync::Arc::new(cellsched_sim::RestartTruth::load(std::path::Path::new(p)).with_context(|| format!("--restart-truth {p}"))?)),
            None => None,
        };
        Ok(SimConfig {
            seed,
            preempt_overhead_s: self.preempt_overhead,
            replan_interval_s: self.replan_interval,
            max_time_s: self.max_time,
            oom_startup_s: self.oom_startup,
            iter_noise: self.iter_noise,
            restart_truth,
            learn_after_s: self.learn_after,
            ..SimConfig::default()
        })
    }

    /// How the scheduler knows iterations (for labels).
    pub fn iterations_label(&self) -> String {
        if let Some(h) = &self.iters_from_history {
            format!("iterations predicted by the random forest fitted on {h} (declared where it cannot predict)")
        } else if self.iter_noise > 0.0 {
            format!("declared iterations with noise (true x exp({} N(0,1)))", self.iter_noise)
        } else {
            "declared iterations (exact)".into()
        }
    }

    /// [`Self::validate`], and that learning (`--learn-after`) has a truth
    /// table (`truth`: the `--truth` given) to learn from.
    pub fn validate_for(&self, truth: Option<&str>) -> Result<()> {
        self.validate()?;
        if self.learn_after.is_some() && truth.is_none() {
            bail!("--learn-after needs --truth: the knowledge learns measured times, and without a truth table the clock runs on the knowledge itself");
        }
        Ok(())
    }

    /// Checks the numeric settings.
    fn validate(&self) -> Result<()> {
        if !(self.iter_noise.is_finite() && self.iter_noise >= 0.0) {
            bail!("--iter-noise {}: expected a number >= 0", self.iter_noise);
        }
        if !(self.oom_startup.is_finite() && self.oom_startup >= 0.0) {
            bail!("--oom-startup {}: expected seconds >= 0", self.oom_startup);
        }
        if let Some(a) = self.learn_after {
            if !(a.is_finite() && a >= 0.0) {
                bail!("--learn-after {a}: expected seconds >= 0");
            }
        }
        Ok(())
    }
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    inputs: Inputs,
    /// Policy: fifo, slurm, srtf, tiresias, gavel or cellsched.
    #[arg(long)]
    policy: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tuning: Tuning,
}

#[derive(clap::Args)]
struct ConvertArgs {
    /// Gavel trace (tab-separated, 7 fields per line).
    #[arg(long)]
    input: String,
    /// Output trace CSV.
    #[arg(long)]
    output: String,
    /// Cluster TOML: requested GPU types are drawn from its types.
    #[arg(long)]
    cluster: String,
    /// Seed for the GPU-type and time-limit draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Truth table: users' declared time limits derive from true run times (else from the estimator).
    #[arg(long)]
    truth: Option<String>,
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// Cluster TOML the workload is sized for.
    #[arg(long)]
    cluster: String,
    /// Number of jobs.
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    /// Offered load as a fraction of the cluster's GPU capacity.
    #[arg(long, default_value_t = 0.9)]
    load: f64,
    /// Output trace CSV.
    #[arg(long)]
    output: String,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Share of jobs given a deadline (`due` column: 2-6x the job's true run time after its submission).
    #[arg(long, default_value_t = 0.0)]
    due_share: f64,
    /// Share of jobs that opt in to reconfiguration (`elastic` column: `--dl-elastic`).
    #[arg(long, default_value_t = 0.0)]
    elastic_share: f64,
}

/// Loaded inputs: cluster, jobs, the knowledge (cached estimator) and the truth.
pub struct Loaded {
    pub spec: ClusterSpec,
    pub jobs: Vec<TraceJob>,
    pub times: TimeCache,
    /// The clock's source; `None` = oracle mode.
    pub truth: Option<Truth>,
    /// Label of the knowledge (estimator and profile DB).
    pub knowledge: String,
    /// Models of the trace the knowledge lacks (their jobs run stock).
    pub unknown_models: Vec<String>,
    /// Iterations the scheduler knows per job when predicted (trace order).
    pub known_iters: Option<Vec<Option<f64>>>,
}

/// Time source for a cluster: the core estimator with the optional measured DB.
pub fn time_source(spec: &ClusterSpec, db: Option<&str>) -> Result<CoreTimes> {
    let db = match db {
        Some(p) => Some(CoreTimes::load_db(p).with_context(|| format!("loading knowledge DB {p}"))?),
        None => None,
    };
    Ok(CoreTimes::new(spec, db)?)
}

/// The truth of `--truth`: the table, with the estimator calibrated on the
/// whole table as the `estimate` fallback.
pub fn load_truth(spec: &ClusterSpec, path: &str, missing: &str) -> Result<Truth> {
    let missing: TruthMissing = missing.parse()?;
    let table = TruthTable::load(path).with_context(|| format!("loading truth table {path}"))?;
    let fallback = CoreTimes::new(spec, Some(table.to_profile_db(false)))?;
    Ok(Truth::new(table, Some(Rc::new(fallback) as Rc<dyn IterTimeSource>), missing))
}

fn knowledge_label(db: Option<&str>) -> Result<String> {
    Ok(match db {
        None => "estimator, datasheet only (no profile DB)".into(),
        Some(p) => {
            let d = CoreTimes::load_db(p)?;
            let single = d.records().filter(|r| r.gpus() == 1).count();
            format!("estimator calibrated with {p} ({} points, {single} single-GPU)", d.len())
        }
    })
}

/// Loads `--trace`, `--cluster`, `--db` (knowledge) and `--truth`; models
/// the knowledge lacks are listed (their jobs run stock), not errors.
pub fn load(inputs: &Inputs) -> Result<Loaded> {
    let (Some(trace), Some(cluster)) = (&inputs.trace, &inputs.cluster) else {
        bail!("--trace and --cluster are required");
    };
    let spec = ClusterSpec::load(cluster)?.shrink(inputs.shrink)?.grow(inputs.grow)?;
    let mut jobs = cellsched_sim::trace::load_trace(trace)?;
    match inputs.elastic_jobs.as_str() {
        "trace" => {}
        "all" | "none" => jobs.iter_mut().for_each(|j| j.elastic = inputs.elastic_jobs == "all"),
        other => bail!("--elastic-jobs {other}: expected trace, all or none"),
    }
    if inputs.shrink > 1 {
        let n = spec.clamp_requests(&mut jobs);
        eprintln!("cluster {cluster} shrunk {}x ({} GPUs); {n} job request(s) lowered to what their GPU type has", inputs.shrink, spec.groups.iter().map(|g| g.nodes as u64 * g.gpus_per_node as u64).sum::<u64>());
    }
    let src = time_source(&spec, inputs.db.as_deref())?;
    let mut models: Vec<&str> = jobs.iter().map(|j| j.model_name.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let unknown_models: Vec<String> = models.into_iter().filter(|m| src.check_model(m).is_err()).map(str::to_string).collect();
    let truth = match &inputs.truth {
        Some(p) => Some(load_truth(&spec, p, &inputs.truth_missing)?),
        None => None,
    };
    let knowledge = knowledge_label(inputs.db.as_deref())?;
    Ok(Loaded { spec, jobs, times: TimeCache::new(Box::new(src)), truth, knowledge, unknown_models, known_iters: None })
}

/// Iterations the random forest fitted on `history` predicts for each job
/// (trace order), `None` where it cannot (fewer than 30 records, unseen model).
pub fn predicted_iters(jobs: &[TraceJob], history: &str, default_limit_s: f64) -> Result<Vec<Option<f64>>> {
    use cellsched_core::predictor::{HistoryQuery, IterationPredictor};
    let recs = cellsched_core::history::load_csv(std::path::Path::new(history)).with_context(|| format!("loading history {history}"))?;
    let rf = IterationPredictor::fit(&recs);
    let preds: Vec<Option<f64>> = jobs
        .iter()
        .map(|j| {
            rf.predict(&HistoryQuery {
                user: j.user.clone().unwrap_or_default(),
                model: j.model_name.clone(),
                batch: j.batch_size,
                gpus: j.num_gpu,
                requested_time_s: if j.deadline > 0.0 { j.deadline } else { default_limit_s },
            })
        })
        .collect();
    let n = preds.iter().filter(|p| p.is_some()).count();
    eprintln!("iteration predictor: fitted on {} records of {history}; predicts {n} of {} jobs (the rest keep their declared count)", recs.len(), jobs.len());
    Ok(preds)
}

/// Runs one policy by name on loaded inputs, with a progress bar on a terminal.
pub fn run_policy(name: &str, opts: &CellschedOptions, mut cfg: SimConfig, l: &mut Loaded, iterations: &str) -> Result<Metrics> {
    let mut p = policy::build(name, opts)?;
    let label = p.name().to_string();
    let mut bar = cellsched_sim::progress::bar(&label);
    let progress: Option<&mut dyn FnMut(u64, u64)> =
        if std::io::stderr().is_terminal() && l.jobs.len() >= 5000 { Some(&mut bar) } else { None };
    cfg.knowledge = format!("{}; {iterations}", l.knowledge);
    let mut sim = Sim::new(cfg, cellsched_sim::ClusterState::new(&l.spec), &l.jobs, &mut l.times).with_truth(l.truth.clone());
    if let Some(k) = &l.known_iters {
        sim = sim.with_known_iters(k);
    }
    Ok(sim.run(p.as_mut(), progress))
}

/// Prints which source ran the clock and which one decided.
pub fn print_sources(m: &Metrics, unknown_models: &[String]) {
    println!("truth (clock):       {}", m.truth);
    println!("knowledge (decides): {}", m.knowledge);
    if !unknown_models.is_empty() {
        println!("models the knowledge lacks (their jobs run stock, requested type and count): {}", unknown_models.join(", "));
    }
}

/// One line per run on prediction error and truth's special cases.
pub fn print_truth_stats(rows: &[Metrics]) {
    for m in rows {
        let t = &m.truth_stats;
        println!(
            "{}: predicted vs true iteration time: held out (not a knowledge point) {} starts: median APE {:.1}%, p90 {:.1}%, bias {:+.1}%; all {} starts: median APE {:.1}%, p90 {:.1}%, bias {:+.1}%; truth missing: {} starts, {:.1}% of run time on the fallback estimate, {} refused; does not fit: {} failed runs, {} failed jobs; stock (unknown model): {} jobs",
            m.policy,
            t.held_out_predictions,
            t.held_out_median_ape_pct,
            t.held_out_p90_ape_pct,
            t.held_out_bias_pct,
            t.predictions,
            t.median_ape_pct,
            t.p90_ape_pct,
            t.bias_pct,
            t.missing_starts,
            if t.run_job_s > 0.0 { t.missing_job_s / t.run_job_s * 100.0 } else { 0.0 },
            t.skipped_starts,
            t.oom_failures,
            t.failed_jobs,
            t.stock_jobs
        );
    }
}

fn hours(s: f64) -> String {
    format!("{:.2}", s / 3600.0)
}

/// A metrics table; `extra` adds (header, per-row values) columns.
pub fn table(rows: &[Metrics], extra: &[(&str, Vec<String>)]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["policy", "jobs", "finished", "unfinished", "avg JCT h", "median JCT h", "p99 JCT h", "avg queue h", "makespan h", "GPU util", "GPU-h", "deadline met", "replans", "preempt", "reconf/job", "restart h"];
    header.extend(extra.iter().map(|e| e.0));
    t.set_header(header);
    for (i, m) in rows.iter().enumerate() {
        let util = m.gpu_util.iter().map(|(k, v)| format!("{k} {:.0}%", v * 100.0)).collect::<Vec<_>>().join(" ");
        let mut row = vec![
            m.policy.clone(),
            m.jobs.to_string(),
            m.finished.to_string(),
            m.unfinished.to_string(),
            hours(m.avg_jct_s),
            hours(m.median_jct_s),
            hours(m.p99_jct_s),
            hours(m.avg_queue_s),
            hours(m.makespan_s),
            util,
            format!("{:.0}", m.gpu_hours),
            m.deadline_met_ratio.map_or("n/a".into(), |r| format!("{:.1}%", r * 100.0)),
            m.replans.to_string(),
            m.preemptions.to_string(),
            format!("{:.3}", m.reconfs_per_job),
            format!("{:.2}", m.restart_h),
        ];
        row.extend(extra.iter().map(|e| e.1[i].clone()));
        t.add_row(row);
    }
    t
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    match a.cmd {
        Some(SimCmd::ConvertGavel(c)) => convert(c),
        Some(SimCmd::Generate(g)) => generate(g),
        Some(SimCmd::GavelTruth(g)) => gavel_truth(g),
        None => simulate(a.run),
    }
}

fn simulate(r: RunArgs) -> Result<()> {
    let Some(name) = &r.policy else {
        bail!("--policy is required (one of: {})", policy::names().join(", "));
    };
    let opts = r.tuning.cellsched()?;
    r.tuning.validate_for(r.inputs.truth.as_deref())?;
    let mut l = load(&r.inputs)?;
    if let Some(h) = &r.tuning.iters_from_history {
        l.known_iters = Some(predicted_iters(&l.jobs, h, SimConfig::default().default_limit_s)?);
    }
    let m = run_policy(name, &opts, r.tuning.config(r.inputs.seed)?, &mut l, &r.tuning.iterations_label())?;
    if r.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        print_sources(&m, &l.unknown_models);
        println!("{}", table(std::slice::from_ref(&m), &[]));
        print_truth_stats(std::slice::from_ref(&m));
        if m.unfinished > 0 {
            println!(
                "{} job(s) unfinished ({} can never fit this cluster under {}); the JCT statistics count them with their time up to the end of the run.",
                m.unfinished, m.never_fit, m.policy
            );
        }
    }
    Ok(())
}

fn write_jobs(jobs: &[TraceJob], path: &str) -> Result<()> {
    let tmp = format!("{path}.tmp");
    let f = std::fs::File::create(&tmp).with_context(|| format!("creating {tmp}"))?;
    cellsched_sim::trace::write_trace(jobs, std::io::BufWriter::new(f)).with_context(|| format!("writing {tmp}"))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {tmp} to {path}"))?;
    Ok(())
}

fn convert(c: ConvertArgs) -> Result<()> {
    let spec = ClusterSpec::load(&c.cluster)?;
    let text = std::fs::read_to_string(&c.input).with_context(|| format!("reading {}", c.input))?;
    let src = time_source(&spec, None)?;
    let catalog = src.estimator().model_catalog().clone();
    let canon = move |n: &str| catalog.canonical_name(n).map(str::to_string);
    let mut times = match &c.truth {
        Some(p) => TimeCache::new(Box::new(TruthTimes(load_truth(&spec, p, "estimate")?))),
        None => TimeCache::new(Box::new(src)),
    };
    let (jobs, rep) = cellsched_sim::gavel_convert::convert_gavel(&text, &c.input, &spec, &mut times, &canon, c.seed)?;
    write_jobs(&jobs, &c.output)?;
    eprintln!("wrote {} jobs to {} ({} of them fit no GPU type of {} and will show as unfinished)", rep.jobs, c.output, rep.infeasible, c.cluster);
    Ok(())
}

fn generate(g: GenerateArgs) -> Result<()> {
    let spec = ClusterSpec::load(&g.cluster)?;
    let mut times = TimeCache::new(Box::new(time_source(&spec, None)?));
    let cfg = cellsched_sim::synth::SynthConfig { jobs: g.jobs, seed: g.seed, load: g.load, due_share: g.due_share, elastic_share: g.elastic_share };
    let jobs = cellsched_sim::synth::generate(&cfg, &spec, &mut times)?;
    write_jobs(&jobs, &g.output)?;
    eprintln!("wrote {} jobs to {}", jobs.len(), g.output);
    Ok(())
}

fn gavel_truth(g: GavelTruthArgs) -> Result<()> {
    let text = std::fs::read_to_string(&g.input).with_context(|| format!("reading {}", g.input))?;
    let catalog = cellsched_core::model::ModelCatalog::builtin();
    let canon = move |n: &str| catalog.canonical_name(n).map(str::to_string);
    let t = cellsched_sim::gavel_convert::throughputs_to_truth(&text, &g.input, &canon)?;
    let note = format!(
        "Measured iteration times from Gavel's simulation_throughputs.json (stanford-futuredata/gavel, commit c4fa400;\n\
         isolated throughputs of the consolidated k80/p100/v100 workers; iter_time_s = GPUs / steps per second; one node).\n\
         Written by `cellsched sim gavel-truth --input {}`.",
        g.input
    );
    let write = |path: &str, table: &TruthTable, note: &str| -> Result<()> {
        let tmp = format!("{path}.tmp");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).with_context(|| format!("creating {tmp}"))?);
        table.write_csv(&mut f, note).with_context(|| format!("writing {tmp}"))?;
        drop(f);
        std::fs::rename(&tmp, path).with_context(|| format!("renaming {tmp} to {path}"))?;
        Ok(())
    };
    write(&g.output, &t, &note)?;
    eprintln!("wrote {} truth points to {}", t.len(), g.output);
    if let Some(p) = &g.single_gpu_output {
        let mut one = TruthTable::new(p);
        for pt in t.points().iter().filter(|p| p.nodes * p.gpus_per_node == 1 && p.iter_time_s.is_some()) {
            one.insert(pt.clone());
        }
        write(p, &one, &format!("{note}\nSingle-GPU points only (knowledge: what one profiler run per GPU type measures)."))?;
        eprintln!("wrote {} single-GPU points to {p}", one.len());
    }
    if let Some(p) = &g.consistent_output {
        let (kept, dropped) = t.without_contradictions(p);
        let note = format!(
            "{note}\nWithout the {} multi-GPU points of weak-scaling series that contradict themselves (more GPUs at the same\n\
             per-GPU batch faster by over {:.0}%; core::estimator::weak_scaling_contradictions): a sensitivity check, not a measurement.",
            dropped,
            cellsched_core::estimator::CONTRADICTION_TOLERANCE * 100.0
        );
        write(p, &kept, &note)?;
        eprintln!("wrote {} points to {p} ({dropped} contradicting multi-GPU points left out)", kept.len());
    }
    Ok(())
}
