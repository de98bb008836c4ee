//! `cellsched bench`: policy comparison, cellsched ablations and simulator speed.
//!
//! - `bench policies --trace T.csv --cluster C.toml`: every policy, with ratios against `slurm`.
//! - `bench ablation --trace T.csv --cluster C.toml`: cellsched with each component off.
//! - `bench speed [--jobs 100000]`: a synthetic trace on a ~1,700-node cluster; wall time and events/s.
//! - `bench whatif [--pending 1000]`: `cellsched whatif` on a synthetic queue snapshot; wall time.
//! - `bench estimator [--data DIR]`: the estimator's held-out error on ../shared/data and its speed.
use crate::cmd_sim::{self, Inputs, Loaded, Tuning};
use anyhow::{bail, Result};
use cellsched_sim::policy::{Ablation, POLICY_NAMES};
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
            let names = c.policies.clone().unwrap_or_else(|| POLICY_NAMES.iter().map(|s| s.to_string()).collect());
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
    c.tuning.validate()?;
    let mut l: Loaded = cmd_sim::load(&c.inputs)?;
    if let Some(h) = &c.tuning.iters_from_history {
        l.known_iters = Some(cmd_sim::predicted_iters(&l.jobs, h, cellsched_sim::SimConfig::default().default_limit_s)?);
    }
    let base_opts = c.tuning.cellsched()?;
    let mut rows: Vec<Metrics> = Vec::new();
    let mut walls = Vec::new();
    for (name, off) in &runs {
        let t0 = Instant::now();
        let m = cmd_sim::run_policy(name, &base_opts.clone().without(off), c.tuning.config(c.inputs.seed), &mut l, &c.tuning.iterations_label())?;
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
    let cfg = cellsched_sim::synth::SynthConfig { jobs: s.jobs, seed: s.seed, load: s.load };
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
    s.tuning.validate()?;
    let opts = s.tuning.cellsched()?;
    let mut rows = Vec::new();
    let mut walls = Vec::new();
    for name in &s.policies {
        let t = Instant::now();
        let m = cmd_sim::run_policy(name, &opts, s.tuning.config(s.seed), &mut l, &s.tuning.iterations_label())?;
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
