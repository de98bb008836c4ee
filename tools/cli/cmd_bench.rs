//! `cellsched bench`: policy comparison, cellsched ablations and simulator speed.
//!
//! - `bench policies --trace T.csv --cluster C.toml`: every policy, with ratios against `slurm`.
//! - `bench ablation --trace T.csv --cluster C.toml`: cellsched with each component off.
//! - `bench table --trace A.csv --trace B.csv --cluster C.toml [--grow 4,2] --shrink 1,4,8`: the policy table
//!   (gavel, srtf, tiresias, cellsched and its ablations) per trace and cluster size, with
//!   cellsched's average JCT against the best of the others.
//! - `bench speed [--jobs 100000]`: a synthetic trace on a ~1,700-node cluster; wall time and events/s.
//! - `bench whatif [--pending 1000]`: `cellsched whatif` on a synthetic queue snapshot; wall time.
//! - `bench estimator [--data DIR]`: the estimator's held-out error on ../shared/data and its speed.
use crate::cmd_sim::{self, Inputs, Loaded, Tuning};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use anyhow::{bail, Result};
use cellsched_sim::policy::{self, Ablation};
use cellsched_sim::{ClusterSpec, Metrics, TimeCache};
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: BenchCmd,
}

#[derive(clap::Subcommand)]
enum BenchCmd {
    /// Run every policy on a trace; ratios against slurm.
    Policies(CompareArgs),
    /// Run cellsched with each component switched off.
    Ablation(CompareArgs),
    /// Policy table: traces x cluster sizes x (gavel, srtf, tiresias, cellsched, cellsched with one component off).
    Table(TableArgs),
    /// Simulator speed on a synthetic 100k-job trace and a ~1,700-node cluster.
    Speed(SpeedArgs),
    /// Replay a small trace on the live local cluster: stock Slurm vs cellsched.
    Replay(crate::cmd_bench_replay::Args),
    /// Time `cellsched whatif` on a synthetic queue snapshot.
    Whatif(WhatifArgs),
    /// The estimator's error on ../shared/data with held-out protocols, and its speed.
    Estimator(crate::cmd_bench_estimator::Args),
}

#[derive(clap::Args)]
struct WhatifArgs {
    /// Pending jobs in the synthetic snapshot.
    #[arg(long, default_value_t = 1000)]
    pending: usize,
    /// Timed runs.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

#[derive(clap::Args)]
struct CompareArgs {
    #[command(flatten)]
    inputs: Inputs,
    /// Policies to run (comma-separated; `policies` only).
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tuning: Tuning,
}

#[derive(clap::Args)]
struct TableArgs {
    /// Trace CSVs (repeat the option for several).
    #[arg(long = "trace", required = true)]
    traces: Vec<String>,
    /// Cluster TOML.
    #[arg(long)]
    cluster: String,
    /// Shrink factors of the cluster, comma-separated (see `sim --shrink`).
    #[arg(long = "shrink", value_delimiter = ',', default_value = "1,4,8")]
    shrinks: Vec<u32>,
    /// Grow factors of the cluster, comma-separated (see `sim --grow`), run before the shrunk sizes: light load.
    #[arg(long = "grow", value_delimiter = ',')]
    grows: Vec<u32>,
    /// Knowledge: profile DB that calibrates the estimator (see `sim --db`).
    #[arg(long)]
    db: Option<String>,
    /// Truth: measured iteration times that run the clock (see `sim --truth`).
    #[arg(long)]
    truth: Option<String>,
    /// A Cell the truth table lacks: estimate or skip.
    #[arg(long, default_value = "estimate")]
    truth_missing: String,
    /// Policies compared with cellsched (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "gavel,srtf,tiresias")]
    baselines: Vec<String>,
    /// cellsched components switched off one at a time (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "srpt,replan,cell-search,aging,load-sizing,elastic")]
    ablations: Vec<String>,
    /// Which jobs opted in to reconfiguration: `trace` (its `elastic` column), `all` or `none`.
    #[arg(long, value_name = "trace|all|none", default_value = "trace")]
    elastic_jobs: String,
    /// Runs per cell: the trace as is, then replicas with every submission
    /// moved by up to --jitter-s seconds (seeded 1, 2, ...). Tables show the
    /// geometric mean over the runs (avg, p99 JCT, makespan; the rest: mean)
    /// and each cell's verdict rests on it; one run of an overloaded
    /// schedule is one sample of a chaotic system.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    replicas: u32,
    /// Largest move of a submission in a replica, seconds.
    #[arg(long, default_value_t = 60.0)]
    jitter_s: f64,
    /// Print a JSON array instead of tables.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tuning: Tuning,
}

#[derive(clap::Args)]
struct SpeedArgs {
    /// Jobs in the synthetic trace.
    #[arg(long, default_value_t = 100_000)]
    jobs: usize,
    /// Offered load (fraction of GPU capacity).
    #[arg(long, default_value_t = 0.9)]
    load: f64,
    /// Policies to time (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "cellsched,slurm")]
    policies: Vec<String>,
    /// Seed of the synthetic trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Truth table that runs the clock (else oracle mode: the clock runs on the estimator).
    #[arg(long)]
    truth: Option<String>,
    /// A Cell the truth table lacks: estimate or skip.
    #[arg(long, default_value = "estimate")]
    truth_missing: String,
    #[command(flatten)]
    tuning: Tuning,
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    match a.cmd {
        BenchCmd::Policies(c) => {
            let names = c.policies.clone().unwrap_or_else(|| policy::names().into_iter().map(str::to_string).collect());
            let runs: Vec<(String, Vec<Ablation>)> = names.into_iter().map(|n| (n, vec![])).collect();
            compare(c, runs, "slurm")
        }
        BenchCmd::Ablation(c) => {
            if c.policies.is_some() {
                bail!("--policies applies to `bench policies` only");
            }
            let mut runs = vec![("cellsched".to_string(), vec![])];
            runs.extend(Ablation::ALL.iter().map(|a| ("cellsched".to_string(), vec![*a])));
            runs.push(("slurm".to_string(), vec![]));
            compare(c, runs, "cellsched")
        }
        BenchCmd::Table(t) => table(t),
        BenchCmd::Speed(s) => speed(s),
        BenchCmd::Replay(r) => crate::cmd_bench_replay::run(r),
        BenchCmd::Whatif(w) => crate::cmd_whatif::bench(w.pending, w.runs),
        BenchCmd::Estimator(e) => crate::cmd_bench_estimator::run(e),
    }
}

fn ratio(x: f64, base: f64) -> String {
    if base > 0.0 { format!("{:.3}", x / base) } else { "-".into() }
}

fn compare(c: CompareArgs, runs: Vec<(String, Vec<Ablation>)>, base: &str) -> Result<()> {
    c.tuning.validate_for(c.inputs.truth.as_deref())?;
    let mut l: Loaded = cmd_sim::load(&c.inputs)?;
    if let Some(h) = &c.tuning.iters_from_history {
        l.known_iters = Some(cmd_sim::predicted_iters(&l.jobs, h, cellsched_sim::SimConfig::default().default_limit_s)?);
    }
    let base_opts = c.tuning.cellsched()?;
    let mut rows: Vec<Metrics> = Vec::new();
    let mut walls = Vec::new();
    for (name, off) in &runs {
        let t0 = Instant::now();
        let m = cmd_sim::run_policy(name, &base_opts.clone().without(off), c.tuning.config(c.inputs.seed)?, &mut l, &c.tuning.iterations_label())?;
        walls.push(t0.elapsed().as_secs_f64());
        rows.push(m);
    }
    let b = rows.iter().find(|m| m.policy == base).cloned();
    let (Some(bm), true) = (b, rows.iter().all(|m| m.jobs > 0)) else {
        bail!("baseline '{base}' missing from the runs or the trace is empty");
    };
    if c.json {
        let arr: Vec<_> = rows
            .iter()
            .zip(&walls)
            .map(|(m, w)| {
                serde_json::json!({
                    "metrics": m,
                    "wall_s": w,
                    "baseline": base,
                    "avg_jct_ratio": if bm.avg_jct_s > 0.0 { m.avg_jct_s / bm.avg_jct_s } else { f64::NAN },
                    "makespan_ratio": if bm.makespan_s > 0.0 { m.makespan_s / bm.makespan_s } else { f64::NAN },
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&arr)?);
        return Ok(());
    }
    let extra = vec![
        ("avg JCT / ".to_string() + base, rows.iter().map(|m| ratio(m.avg_jct_s, bm.avg_jct_s)).collect::<Vec<_>>()),
        ("p99 JCT / ".to_string() + base, rows.iter().map(|m| ratio(m.p99_jct_s, bm.p99_jct_s)).collect()),
        ("makespan / ".to_string() + base, rows.iter().map(|m| ratio(m.makespan_s, bm.makespan_s)).collect()),
        ("wall s".to_string(), walls.iter().map(|w| format!("{w:.2}")).collect()),
    ];
    let extra_ref: Vec<(&str, Vec<String>)> = extra.iter().map(|(h, v)| (h.as_str(), v.clone())).collect();
    cmd_sim::print_sources(&rows[0], &l.unknown_models);
    println!("{}", cmd_sim::table(&rows, &extra_ref));
    cmd_sim::print_truth_stats(&rows);
    for m in &rows {
        if m.policy != base && m.avg_jct_s > 0.0 && bm.avg_jct_s > 0.0 {
            let pct = (1.0 - m.avg_jct_s / bm.avg_jct_s) * 100.0;
            println!("{}: avg JCT {} than {} by {:.1}%", m.policy, if pct >= 0.0 { "lower" } else { "higher" }, base, pct.abs());
        }
    }
    Ok(())
}

/// What a `bench table` cell compares cellsched against.
const ACCEPT_RATIO: f64 = 1.02;

fn table(a: TableArgs) -> Result<()> {
    a.tuning.validate_for(a.truth.as_deref())?;
    if !(a.jitter_s.is_finite() && a.jitter_s >= 0.0) {
        bail!("--jitter-s must be a number of seconds >= 0, got {}", a.jitter_s);
    }
    let base = a.tuning.cellsched()?;
    let mut runs: Vec<(String, Vec<Ablation>)> = vec![("cellsched".into(), vec![])];
    runs.extend(a.baselines.iter().map(|b| (b.clone(), vec![])));
    for x in &a.ablations {
        runs.push(("cellsched".into(), Ablation::parse_list(x)?));
    }
    let mut json = Vec::new();
    let (mut cells, mut met) = (0, 0);
    let mut summary = Vec::new();
    // Cluster sizes, largest first: (grow, shrink).
    let mut sizes: Vec<(u32, u32)> = a.grows.iter().filter(|&&g| g > 1).map(|&g| (g, 1)).collect();
    sizes.sort_by(|x, y| y.0.cmp(&x.0));
    sizes.extend(a.shrinks.iter().map(|&k| (1, k)));
    for trace in &a.traces {
        for (n, &(g, k)) in sizes.iter().enumerate() {
            let inputs = Inputs {
                trace: Some(trace.clone()),
                cluster: Some(a.cluster.clone()),
                db: a.db.clone(),
                truth: a.truth.clone(),
                truth_missing: a.truth_missing.clone(),
                seed: 0,
                shrink: k,
                grow: g,
                elastic_jobs: a.elastic_jobs.clone(),
            };
            let mut l = cmd_sim::load(&inputs)?;
            let trace_jobs = l.jobs.clone();
            let mut replicas: Vec<Vec<Metrics>> = Vec::new();
            for r in 0..a.replicas.max(1) {
                l.jobs = if r == 0 { trace_jobs.clone() } else { cellsched_sim::trace::jittered(&trace_jobs, u64::from(r), a.jitter_s) };
                let mut rows: Vec<Metrics> = Vec::new();
                for (name, off) in &runs {
                    rows.push(cmd_sim::run_policy(name, &base.clone().without(off), a.tuning.config(0)?, &mut l, &a.tuning.iterations_label())?);
                }
                replicas.push(rows);
            }
            let rows = over_replicas(&replicas);
            let gpus: u64 = l.spec.groups.iter().map(|g| g.nodes as u64 * g.gpus_per_node as u64).sum();
            // Every run is averaged over the same jobs (unfinished ones up to the end of the run).
            let (best_i, to_best) = to_best_other(&rows);
            let ours = &rows[0];
            let ok = ours.finished == ours.jobs && to_best <= ACCEPT_RATIO;
            cells += 1;
            met += ok as usize;
            let size = if g > 1 { format!("grown {g}x") } else { format!("shrunk {k}x") };
            let cell = format!("{trace} on {} {size} ({gpus} GPUs)", a.cluster);
            let spread = if replicas.len() > 1 {
                let r: Vec<f64> = replicas.iter().map(|x| to_best_other(x).1).collect();
                format!(" (per run {:.3}-{:.3})", r.iter().copied().fold(f64::INFINITY, f64::min), r.iter().copied().fold(0.0, f64::max))
            } else {
                String::new()
            };
            summary.push(format!(
                "{cell}: cellsched avg JCT / best other ({}) = {to_best:.3}{spread} {}",
                rows.get(best_i).map_or("-", |m| m.policy.as_str()),
                if ok { "ok" } else { "NOT MET" }
            ));
            if a.json {
                let each = if replicas.len() > 1 { serde_json::json!(replicas) } else { serde_json::Value::Null };
                json.push(serde_json::json!({ "trace": trace, "grow": g, "shrink": k, "gpus": gpus, "runs": rows, "replicas": each, "ratio_to_best_other": to_best, "met": ok }));
                continue;
            }
            println!("\n== {cell}");
            if n == 0 && trace == &a.traces[0] {
                cmd_sim::print_sources(ours, &l.unknown_models);
                if replicas.len() > 1 {
                    println!(
                        "runs per cell:       {} (the trace, then submissions moved by up to {} s); avg, p99 JCT and makespan: geometric mean over the runs; the rest: mean (finished: fewest)",
                        replicas.len(),
                        a.jitter_s
                    );
                }
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec!["policy", "finished", "avg JCT h", "p99 JCT h", "makespan h", "GPU-h", "reconf/job", "restart h", "deadline met", "avg JCT / cellsched"]);
            for m in &rows {
                t.add_row(vec![
                    m.policy.clone(),
                    format!("{}/{}", m.finished, m.jobs),
                    format!("{:.2}", m.avg_jct_s / 3600.0),
                    format!("{:.2}", m.p99_jct_s / 3600.0),
                    format!("{:.2}", m.makespan_s / 3600.0),
                    format!("{:.0}", m.gpu_hours),
                    format!("{:.3}", m.reconfs_per_job),
                    format!("{:.2}", m.restart_h),
                    m.deadline_met_ratio.map_or("n/a".into(), |r| format!("{:.1}%", r * 100.0)),
                    ratio(m.avg_jct_s, ours.avg_jct_s),
                ]);
            }
            println!("{t}");
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    println!();
    for l in &summary {
        println!("{l}");
    }
    println!("cellsched within {ACCEPT_RATIO}x of the best other policy (by avg JCT over every job; unfinished ones count up to the end of the run) and finishing every job in {met} of {cells} cells");
    Ok(())
}

/// Index of the best run other than the first (lowest average JCT) and the
/// first run's average JCT over it.
fn to_best_other(rows: &[Metrics]) -> (usize, f64) {
    let (i, best) = rows[1..].iter().enumerate().min_by(|x, y| x.1.avg_jct_s.total_cmp(&y.1.avg_jct_s)).map(|(i, m)| (i + 1, m.avg_jct_s)).unwrap_or((0, f64::NAN));
    (i, rows[0].avg_jct_s / best)
}

/// One row per policy over the runs of a cell (`replicas[r][policy]`):
/// geometric mean of average, median and p99 JCT and makespan, mean of
/// queueing time, GPU-hours, reconfigurations per job, restart hours and
/// deadlines met, fewest finished; the other fields (GPU utilisation,
/// counters, sources) from the first run (the trace as is).
fn over_replicas(replicas: &[Vec<Metrics>]) -> Vec<Metrics> {
    let n = replicas.len() as f64;
    let geo = |f: &dyn Fn(&Metrics) -> f64, p: usize| (replicas.iter().map(|r| f(&r[p]).max(1e-9).ln()).sum::<f64>() / n).exp();
    let mean = |f: &dyn Fn(&Metrics) -> f64, p: usize| replicas.iter().map(|r| f(&r[p])).sum::<f64>() / n;
    if replicas.len() == 1 {
        return replicas[0].clone();
    }
    (0..replicas[0].len())
        .map(|p| Metrics {
            avg_jct_s: geo(&|m| m.avg_jct_s, p),
            p99_jct_s: geo(&|m| m.p99_jct_s, p),
            median_jct_s: geo(&|m| m.median_jct_s, p),
            avg_queue_s: mean(&|m| m.avg_queue_s, p),
            makespan_s: geo(&|m| m.makespan_s, p),
            gpu_hours: mean(&|m| m.gpu_hours, p),
            reconfs_per_job: mean(&|m| m.reconfs_per_job, p),
            restart_h: mean(&|m| m.restart_h, p),
            deadline_met_ratio: replicas[0][p].deadline_met_ratio.map(|_| mean(&|m| m.deadline_met_ratio.unwrap_or(0.0), p)),
            finished: replicas.iter().map(|r| r[p].finished).min().unwrap_or(0),
            unfinished: replicas.iter().map(|r| r[p].unfinished).max().unwrap_or(0),
            ..replicas[0][p].clone()
        })
        .collect()
}

/// The speed-test cluster: 1,700 nodes of four GPU types.
fn speed_cluster() -> ClusterSpec {
    let text = "[[group]]\ngpu_type = \"a100\"\nnodes = 400\ngpus_per_node = 8\ninter_node_gbps = 200\n\n\
                [[group]]\ngpu_type = \"v100\"\nnodes = 450\ngpus_per_node = 8\ninter_node_gbps = 100\n\n\
                [[group]]\ngpu_type = \"a10\"\nnodes = 450\ngpus_per_node = 4\n\n\
                [[group]]\ngpu_type = \"t4\"\nnodes = 400\ngpus_per_node = 4\n";
    ClusterSpec::parse(text, "<speed cluster>").expect("built-in speed cluster parses")
}

fn speed(s: SpeedArgs) -> Result<()> {
    let spec = speed_cluster();
    let t0 = Instant::now();
    let mut times = TimeCache::new(Box::new(cmd_sim::time_source(&spec, None)?));
    let cfg = cellsched_sim::synth::SynthConfig { jobs: s.jobs, seed: s.seed, load: s.load, due_share: 0.0, elastic_share: 0.0 };
    let jobs = cellsched_sim::synth::generate(&cfg, &spec, &mut times)?;
    let gen_s = t0.elapsed().as_secs_f64();
    println!(
        "cluster: {} nodes, {} GPUs; trace: {} jobs (seed {}, load {}), generated in {gen_s:.2} s",
        spec.total_nodes(),
        spec.groups.iter().map(|g| g.nodes as u64 * g.gpus_per_node as u64).sum::<u64>(),
        jobs.len(),
        s.seed,
        s.load
    );
    let truth = match &s.truth {
        Some(p) => Some(cmd_sim::load_truth(&spec, p, &s.truth_missing)?),
        None => None,
    };
    let mut l = Loaded { spec, jobs, times, truth, knowledge: "estimator, datasheet only (no profile DB)".into(), unknown_models: Vec::new(), known_iters: None };
    if let Some(h) = &s.tuning.iters_from_history {
        l.known_iters = Some(cmd_sim::predicted_iters(&l.jobs, h, cellsched_sim::SimConfig::default().default_limit_s)?);
    }
    s.tuning.validate_for(s.truth.as_deref())?;
    let opts = s.tuning.cellsched()?;
    let mut rows = Vec::new();
    let mut walls = Vec::new();
    for name in &s.policies {
        let t = Instant::now();
        let m = cmd_sim::run_policy(name, &opts, s.tuning.config(s.seed)?, &mut l, &s.tuning.iterations_label())?;
        walls.push(t.elapsed().as_secs_f64());
        rows.push(m);
    }
    let extra = vec![
        ("wall s", walls.iter().map(|w| format!("{w:.2}")).collect::<Vec<_>>()),
        ("events", rows.iter().map(|m| m.events.to_string()).collect()),
        ("events/s", rows.iter().zip(&walls).map(|(m, w)| format!("{:.0}", m.events as f64 / w.max(1e-9))).collect()),
    ];
    cmd_sim::print_sources(&rows[0], &[]);
    println!("{}", cmd_sim::table(&rows, &extra));
    cmd_sim::print_truth_stats(&rows);
    println!("iteration-time cache: {} hits, {} misses", l.times.hits, l.times.misses);
    Ok(())
}
