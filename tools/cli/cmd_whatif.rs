//! `cellsched whatif`: where and when would this DL job run if submitted now?
//! The answer comes from `cellsched_whatif`; this file parses and prints.
//!
//! Reads the live cluster with Slurm's own commands (`sinfo`, `squeue` with
//! explicit formats, AdminComments from `scontrol show job`), builds a
//! [`Snapshot`], and for each feasible Cell of the job (the best few per GPU
//! type, `Estimator::rank_cells`) runs the simulator forward with the job
//! pinned to that Cell: predicted start, finish, seconds per iteration and
//! GPU-hours. The Cell cellsched would choose now is job_submit/cellsched's
//! own decision (`cellsched_core::placement::place` on the snapshot): the
//! Cell sized by marginal value in the free GPUs of the allowed types (with
//! an untyped GPU count: the fastest of exactly that count), else the one
//! of the whole cluster, where it waits.
//! Every number is a prediction (estimator + declared iterations).
use anyhow::{bail, Result};
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::TimeCache;
use cellsched_whatif::{answer, estimator, load_config, read_cluster, Request};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model: catalog name (e.g. gpt__1.3B), as for `sbatch --dl-model`.
    #[arg(long = "dl-model")]
    pub model: String,
    /// Global batch size, as for `sbatch --dl-batch`.
    #[arg(long = "dl-batch", value_parser = crate::cmd_estimate::parse_batch, allow_hyphen_values = true)]
    pub batch: u32,
    /// Declared iterations, as for `sbatch --dl-iters` (without them no finish or GPU-hours is predicted).
    #[arg(long = "dl-iters", value_parser = parse_iters)]
    pub iters: Option<u64>,
    /// Training runtime, as for `sbatch --dl-runtime` (any, ddp, fsdp, megatron, deepspeed, alpa; default: the model's).
    #[arg(long = "dl-runtime", value_parser = crate::cmd_estimate::parse_training("dl-runtime"))]
    pub runtime: Option<String>,
    /// Training precision, as for `sbatch --dl-precision` (fp16, bf16, tf32, fp32; default: the model's).
    #[arg(long = "dl-precision", value_parser = crate::cmd_estimate::parse_training("dl-precision"))]
    pub precision: Option<String>,
    /// GPU request per node as for sbatch: `gpu:TYPE:N` pins the Cell, `gpu:N` fixes the count.
    #[arg(long)]
    pub gres: Option<String>,
    /// GPU request per job as for sbatch: `TYPE:N` pins the Cell, `N` fixes the count.
    #[arg(long)]
    pub gpus: Option<String>,
    /// Node count asked for (multiplies a `--gres` count, as in sbatch).
    #[arg(long, short = 'N', value_parser = crate::cmd_estimate::bounded(cellsched_core::limits::NODES))]
    pub nodes: Option<u32>,
    /// Only this partition's nodes and jobs.
    #[arg(long, short = 'p')]
    pub partition: Option<String>,
    /// The plugins' cellsched.toml (default: $CELLSCHED_CONFIG, else beside $SLURM_CONF, else /etc/slurm/cellsched.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Cells shown per GPU type (best first).
    #[arg(long, default_value_t = 3)]
    pub per_type: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Parses `--dl-iters` as sbatch does (the shared cap, [`cellsched_core::limits::ITERS`]).
fn parse_iters(s: &str) -> std::result::Result<u64, String> {
    cellsched_core::limits::ITERS.parse("--dl-iters", s).map_err(|e| e.to_string())
}

/// The request an sbatch-like `--gres`/`--gpus`/`--nodes` describes.
pub fn request(a: &Args) -> Result<Request> {
    let nodes = a.nodes.unwrap_or(1).max(1);
    let parse = |s: &str, per_node: bool| -> Result<(Option<String>, u32)> {
        let s = if per_node { s.trim().to_string() } else { format!("gpu:{}", s.trim()) };
        let counted = s.rsplit(':').next().is_some_and(|n| n.trim().parse::<u32>().is_ok());
        let Some((t, n)) = cellsched_core::placement::gpu_entries(&s).into_iter().next().filter(|_| counted) else {
            bail!("cannot read the GPU request '{s}': expected gpu:N or gpu:TYPE:N (--gres), N or TYPE:N (--gpus)")
        };
        let n = if per_node { n.saturating_mul(nodes) } else { n };
        cellsched_core::limits::CELL_GPUS.check_u32("GPU request", n)?;
        Ok((t, n))
    };
    let (typed, want) = match (&a.gres, &a.gpus) {
        (Some(_), Some(_)) => bail!("give --gres or --gpus, not both"),
        (Some(g), None) => parse(g, true)?,
        (None, Some(g)) => parse(g, false)?,
        (None, None) => (None, 0),
    };
    let training = crate::cmd_estimate::training(a.runtime.as_deref(), a.precision.as_deref())?;
    Ok(Request {
        runtime: training.runtime,
        precision: training.precision,
        model: a.model.clone(),
        batch: a.batch,
        iters: a.iters,
        typed: typed.map(|t| (t, want)),
        want_gpus: (want > 0).then_some(want),
    })
}

/// `1h02m`, `45s`, `now`.
pub fn fmt_dur(s: f64) -> String {
    if s < 0.5 {
        return "now".into();
    }
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    let req = request(&a)?;
    let (cfg, cfg_from) = load_config(a.config.as_ref())?;
    let snap = read_cluster(a.partition.as_deref())?;
    if snap.nodes.is_empty() {
        bail!("no usable node with typed GPUs (gpu:TYPE:N in Gres) in sinfo's output{}", a.partition.as_ref().map_or(String::new(), |p| format!(" for partition {p}")));
    }
    let (est, db) = estimator(&cfg)?;
    let (est2, _) = estimator(&cfg)?;
    let job = cellsched_whatif::job(&est, &req)?;
    let mut times = TimeCache::new(Box::new(CoreTimes::from_estimator(est2.with_model(job.model), db)));
    let ans = answer(&snap, &est, &mut times, &cfg, &req, a.per_type.max(1))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"config": cfg_from, "answer": ans}))?);
        return Ok(());
    }
    println!(
        "{} (batch {}{}) on {} nodes, {} running and {} pending GPU jobs; config: {cfg_from}",
        ans.model,
        ans.batch,
        ans.iters.map_or(String::new(), |n| format!(", {n} iterations")),
        snap.nodes.len(),
        ans.running,
        ans.pending
    );
    println!("All numbers are {}.", ans.knowledge);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["", "cell", "nodes", "plan", "pred. s/iter", "source", "pred. start", "pred. finish", "pred. GPU-h"]);
    for r in &ans.rows {
        let e = &r.estimate;
        t.add_row([
            if r.chosen { "=>".into() } else { String::new() },
            e.cell.to_string(),
            e.nodes.to_string(),
            e.plan.to_string(),
            format!("{:.4}", e.iter_time_s),
            e.source.to_string(),
            r.start_s.map_or("never".into(), fmt_dur),
            r.finish_s.map_or("-".into(), fmt_dur),
            r.gpu_hours.map_or("-".into(), |h| format!("{h:.2}")),
        ]);
    }
    println!("{t}");
    match ans.rows.iter().find(|r| r.chosen) {
        Some(r) => println!("cellsched would choose {} now: {}.", r.estimate.cell, ans.why),
        None => println!("cellsched would choose no Cell: {}.", ans.why),
    }
    for s in &ans.skipped {
        eprintln!("note: left out of the snapshot: {s}");
    }
    if cellsched_report::private_data::caller_sees_own_jobs_only() {
        eprintln!("note: PrivateData=jobs: Slurm shows you only your own jobs, so this forecast leaves other users' jobs out (predicted starts may be earlier than they will be)");
    }
    Ok(())
}

/// `cellsched bench whatif`: times the answer on synthetic snapshots (measured wall time).
pub fn bench(pending: usize, runs: usize) -> Result<()> {
    let (times_s, snap, a) = cellsched_whatif::time_answers(pending, runs)?;
    println!(
        "whatif on a synthetic snapshot: {} nodes, {} running, {} pending jobs; {} Cells simulated (each a full forward run of the queue)",
        snap.nodes.len(),
        snap.running.len(),
        snap.pending.len(),
        a.rows.len()
    );
    println!(
        "wall time over {} runs (measured): min {:.3} s, median {:.3} s, max {:.3} s",
        times_s.len(),
        times_s[0],
        times_s[times_s.len() / 2],
        times_s[times_s.len() - 1]
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_like_sbatch() {
        let base = Args { model: "m".into(), batch: 8, iters: None, gres: None, gpus: None, nodes: None, partition: None, config: None, per_type: 3, json: false, runtime: None, precision: None };
        let r = request(&Args { gres: Some("gpu:a100:2".into()), nodes: Some(2), ..base }).unwrap();
        assert_eq!((r.typed, r.want_gpus), (Some(("a100".into(), 4)), Some(4)));
        let base = Args { model: "m".into(), batch: 8, iters: None, gres: None, gpus: Some("4".into()), nodes: None, partition: None, config: None, per_type: 3, json: false, runtime: None, precision: None };
        let r = request(&base).unwrap();
        assert_eq!((r.typed, r.want_gpus), (None, Some(4)));
        let bad = Args { gpus: Some("lots".into()), ..base };
        assert!(request(&bad).unwrap_err().to_string().contains("lots"));
        assert_eq!(fmt_dur(0.0), "now");
        assert_eq!(fmt_dur(3725.0), "1h02m");
    }
}
