//! `cellsched sim`: trace-driven simulation of scheduling policies.
//!
//! - `cellsched sim --trace T.csv --cluster C.toml [--db iter_times.csv] --policy NAME [--seed N] [--json]`
//! - `cellsched sim convert-gavel --input philly-X.trace --output T.csv --cluster C.toml [--seed N]`
//! - `cellsched sim generate --cluster C.toml --jobs N --output T.csv [--load 0.9] [--seed N]`
use anyhow::{bail, Context, Result};
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::policy::{self, Ablation, CellschedOptions};
use cellsched_sim::{ClusterSpec, Metrics, SimConfig, TimeCache, TraceJob};
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
    /// Measured iteration times CSV (model,batch,gpu_type,nodes,gpus_per_node,iter_time_s); else the estimator.
    #[arg(long)]
    pub db: Option<String>,
    /// Seed (recorded in results; the engine is deterministic).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Engine and cellsched settings shared by `sim` and `bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct Tuning {
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
    /// cellsched: components to switch off, comma-separated (cell-search,srpt,replan,freeze,aging).
    #[arg(long, value_name = "LIST")]
    pub ablation: Option<String>,
    /// cellsched: accept a free Cell up to this many times slower than the job's best.
    #[arg(long, default_value_t = 6.0)]
    pub max_slowdown: f64,
    /// cellsched: Cells may use up to this many times the requested GPUs.
    #[arg(long, default_value_t = 1.0)]
    pub max_gpu_factor: f64,
    /// cellsched: A-SRPT aging bound in seconds.
    #[arg(long, default_value_t = 86400.0)]
    pub aging_bound: f64,
    /// cellsched: a job ages only after waiting this many times its own predicted remaining time (0 = absolute bound).
    #[arg(long, default_value_t = 0.0)]
    pub aging_factor: f64,
    /// cellsched: guard for an aged job that cannot start: none, type (close its GPU type for the pass) or shadow (EASY reservation).
    #[arg(long, default_value = "shadow")]
    pub aged_guard: String,
    /// Seconds a preempted job loses on restart (srtf, tiresias).
    #[arg(long, default_value_t = 30.0)]
    pub preempt_overhead: f64,
    /// Extra scheduling passes every this many seconds while jobs wait.
    #[arg(long, value_name = "SECONDS")]
    pub replan_interval: Option<f64>,
    /// Stop the simulated clock here (unfinished jobs are counted).
    #[arg(long, value_name = "SECONDS")]
    pub max_time: Option<f64>,
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
        let mut o = CellschedOptions { max_slowdown: self.max_slowdown, max_gpu_factor: self.max_gpu_factor, ..Default::default() };
        o.asrpt.aging_bound_s = self.aging_bound;
        o.asrpt.aging_factor = self.aging_factor;
        o.aged_guard = self.aged_guard.parse()?;
        Ok(o.without(&off))
    }

    /// The engine settings.
    pub fn config(&self, seed: u64) -> SimConfig {
        SimConfig { seed, preempt_overhead_s: self.preempt_overhead, replan_interval_s: self.replan_interval, max_time_s: self.max_time }
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
}

/// Loaded inputs: cluster, jobs and a cached time source.
pub struct Loaded {
    pub spec: ClusterSpec,
    pub jobs: Vec<TraceJob>,
    pub times: TimeCache,
}

/// Time source for a cluster: the core estimator with the optional measured DB.
pub fn time_source(spec: &ClusterSpec, db: Option<&str>) -> Result<CoreTimes> {
    let db = match db {
        Some(p) => Some(CoreTimes::load_db(p).with_context(|| format!("loading measured DB {p}"))?),
        None => None,
    };
    Ok(CoreTimes::new(spec, db)?)
}

/// Loads `--trace`, `--cluster`, `--db` and checks the trace's models.
pub fn load(inputs: &Inputs) -> Result<Loaded> {
    let (Some(trace), Some(cluster)) = (&inputs.trace, &inputs.cluster) else {
        bail!("--trace and --cluster are required");
    };
    let spec = ClusterSpec::load(cluster)?;
    let jobs = cellsched_sim::trace::load_trace(trace)?;
    let src = time_source(&spec, inputs.db.as_deref())?;
    let mut models: Vec<&str> = jobs.iter().map(|j| j.model_name.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    for m in models {
        use cellsched_sim::IterTimeSource;
        src.check_model(m).with_context(|| format!("{trace}: model_name '{m}'"))?;
    }
    Ok(Loaded { spec, jobs, times: TimeCache::new(Box::new(src)) })
}

/// Runs one policy by name on loaded inputs, with a progress bar on a terminal.
pub fn run_policy(name: &str, opts: &CellschedOptions, cfg: SimConfig, l: &mut Loaded) -> Result<Metrics> {
    let mut p = policy::build(name, opts)?;
    let label = p.name().to_string();
    let mut bar = cellsched_sim::progress::bar(&label);
    let progress: Option<&mut dyn FnMut(u64, u64)> =
        if std::io::stderr().is_terminal() && l.jobs.len() >= 5000 { Some(&mut bar) } else { None };
    Ok(cellsched_sim::simulate(cfg, &l.spec, &l.jobs, &mut l.times, p.as_mut(), progress))
}

fn hours(s: f64) -> String {
    format!("{:.2}", s / 3600.0)
}

/// A metrics table; `extra` adds (header, per-row values) columns.
pub fn table(rows: &[Metrics], extra: &[(&str, Vec<String>)]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["policy", "jobs", "finished", "unfinished", "avg JCT h", "median JCT h", "p99 JCT h", "avg queue h", "makespan h", "GPU util", "replans", "preempt"];
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
            m.replans.to_string(),
            m.preemptions.to_string(),
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
        None => simulate(a.run),
    }
}

fn simulate(r: RunArgs) -> Result<()> {
    let Some(name) = &r.policy else {
        bail!("--policy is required (one of: {})", policy::POLICY_NAMES.join(", "));
    };
    let opts = r.tuning.cellsched()?;
    let mut l = load(&r.inputs)?;
    let m = run_policy(name, &opts, r.tuning.config(r.inputs.seed), &mut l)?;
    if r.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        println!("{}", table(std::slice::from_ref(&m), &[]));
        if m.unfinished > 0 {
            println!("{} job(s) unfinished ({} can never fit this cluster under {}).", m.unfinished, m.never_fit, m.policy);
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
    let mut times = TimeCache::new(Box::new(src));
    let (jobs, rep) = cellsched_sim::gavel_convert::convert_gavel(&text, &c.input, &spec, &mut times, &canon, c.seed)?;
    write_jobs(&jobs, &c.output)?;
    eprintln!("wrote {} jobs to {} ({} of them fit no GPU type of {} and will show as unfinished)", rep.jobs, c.output, rep.infeasible, c.cluster);
    Ok(())
}

fn generate(g: GenerateArgs) -> Result<()> {
    let spec = ClusterSpec::load(&g.cluster)?;
    let mut times = TimeCache::new(Box::new(time_source(&spec, None)?));
    let cfg = cellsched_sim::synth::SynthConfig { jobs: g.jobs, seed: g.seed, load: g.load };
    let jobs = cellsched_sim::synth::generate(&cfg, &spec, &mut times)?;
    write_jobs(&jobs, &g.output)?;
    eprintln!("wrote {} jobs to {}", jobs.len(), g.output);
    Ok(())
}
