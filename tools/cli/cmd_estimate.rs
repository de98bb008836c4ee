//! `cellsched estimate`: Predict the best plan and iteration time of a job on one Cell.
use anyhow::bail;
use cellsched_core::cell::{Cell, Plan};
use cellsched_core::estimator::{Estimate, Estimator, JobSpec};
use cellsched_core::limits;
use std::path::PathBuf;

/// Catalog and database options shared by `estimate` and `cells`.
#[derive(clap::Args, Debug, Clone)]
pub struct CatalogArgs {
    /// Profile database CSV (model,batch,gpu_type,nodes,gpus_per_node,iter_time_s, optional plan, peak_mem_gib, first_iter_s):
    /// exact matches override, single-node points calibrate.
    #[arg(long, env = "CELLSCHED_PROFILE_DB")]
    pub db: Option<PathBuf>,
    /// TOML file with `[gpu.NAME]` overrides/extensions of the GPU catalog.
    #[arg(long)]
    pub gpu_catalog: Option<PathBuf>,
    /// TOML file with extra `[[model]]` entries.
    #[arg(long)]
    pub model_catalog: Option<PathBuf>,
}

impl CatalogArgs {
    /// Builds the estimator these options describe.
    pub fn estimator(&self) -> anyhow::Result<Estimator> {
        let cfg = cellsched_core::config::EstimatorConfig { profile_db: self.db.clone(), gpu_catalog: self.gpu_catalog.clone(), history: None };
        let a = Estimator::from_config(&cfg, self.model_catalog.as_deref());
        if let Some(p) = a.problems.first() {
            anyhow::bail!("{p}");
        }
        Ok(a.estimator)
    }
}

/// Parses a batch size as sbatch's `--dl-batch` does: a positive integer up
/// to the shared cap ([`cellsched_core::limits::BATCH`]).
pub fn parse_batch(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i128>() {
        Ok(b) if b <= 0 => Err(format!("batch must be a positive integer, got {b}")),
        _ => cellsched_core::limits::BATCH.parse_u32("batch", s).map_err(|_| expected(cellsched_core::limits::BATCH)),
    }
}

/// A clap parser for a count bounded by one row of [`cellsched_core::limits`].
pub fn bounded(limit: cellsched_core::limits::Limit) -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync + 'static {
    move |s: &str| limit.parse_u32("value", s).map_err(|_| expected(limit))
}

fn expected(limit: cellsched_core::limits::Limit) -> String {
    format!("expected a {} in 1..={}", limit.what, limit.max)
}

/// The job options shared by `estimate` and `cells`: model and global batch.
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// Model: catalog name or alias (e.g. gpt__1.3B, bert__760M) or a model .toml file.
    #[arg(long)]
    pub model: String,
    /// Global batch size (samples per iteration).
    #[arg(long, value_parser = parse_batch, allow_hyphen_values = true)]
    pub batch: u32,
    /// Training runtime, as `sbatch --dl-runtime` gives it (any, ddp, fsdp, megatron, deepspeed, alpa; default: the model's).
    #[arg(long = "dl-runtime", value_parser = parse_training("dl-runtime"))]
    pub runtime: Option<String>,
    /// Training precision, as `sbatch --dl-precision` gives it (fp16, bf16, tf32, fp32; default: the model's).
    #[arg(long = "dl-precision", value_parser = parse_training("dl-precision"))]
    pub precision: Option<String>,
}

impl JobArgs {
    /// The job these options describe, its model resolved in `est`'s catalog
    /// and trained as `--dl-runtime`/`--dl-precision` say.
    pub fn job(&self, est: &Estimator) -> anyhow::Result<JobSpec> {
        let model = est.model_catalog().resolve(&self.model)?;
        let training = training(self.runtime.as_deref(), self.precision.as_deref())?;
        Ok(JobSpec { model: training.trained_as(model), global_batch: self.batch })
    }
}

/// A clap parser that validates a `--dl-*` value with the option table's
/// own parser (as sbatch does) and keeps it as given.
pub fn parse_training(option: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |s: &str| {
        cellsched_core::options::DlOptions::default().parse_option(option, s).map_err(|e| e.to_string())?;
        Ok(s.to_string())
    }
}

/// The options `--dl-runtime` and `--dl-precision` give, parsed by the option table.
pub fn training(runtime: Option<&str>, precision: Option<&str>) -> anyhow::Result<cellsched_core::options::DlOptions> {
    let mut o = cellsched_core::options::DlOptions::default();
    for (name, v) in [("dl-runtime", runtime), ("dl-precision", precision)] {
        if let Some(v) = v {
            o.parse_option(name, v)?;
        }
    }
    Ok(o)
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    /// GPU type (catalog key or NVML name, e.g. a100, "NVIDIA A100-SXM4-80GB").
    #[arg(long)]
    pub gpu: String,
    /// Total GPUs in the Cell.
    #[arg(long, value_parser = bounded(limits::CELL_GPUS))]
    pub gpus: u32,
    /// Nodes the Cell spans (default: as few as the node size allows).
    #[arg(long, value_parser = bounded(limits::NODES))]
    pub nodes: Option<u32>,
    /// GPUs per node of this type (default: the catalog's typical server size).
    #[arg(long, value_parser = bounded(limits::GPUS_PER_NODE))]
    pub gpus_per_node: Option<u32>,
    /// Pipeline stages (default: try every power-of-two divisor and keep the fastest).
    #[arg(long, value_parser = bounded(limits::CELL_GPUS))]
    pub stages: Option<u32>,
    /// Evaluate this plan instead of searching (dp=..,tp=..,pp=..[,mb=..][,zero=..][,ckpt=on]).
    #[arg(long)]
    pub plan: Option<Plan>,
    #[command(flatten)]
    pub catalogs: CatalogArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the breakdown: compute (GEMM, attention, memory-bound, launch
    /// floor), exposed DP/TP/PP communication, bubble, optimizer, overheads,
    /// memory terms, and which parameters were measured, fitted or defaulted.
    #[arg(long)]
    pub explain: bool,
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    let est = a.catalogs.estimator()?;
    let job = a.job.job(&est)?;
    let gpu = est.gpu_catalog().get(&a.gpu)?.clone();
    if a.gpus == 0 {
        bail!("--gpus must be a positive integer, got 0");
    }
    let node = match (a.nodes, a.gpus_per_node) {
        (Some(0), _) => bail!("--nodes must be a positive integer, got 0"),
        (Some(k), _) if a.gpus % k != 0 => bail!("--gpus {} is not divisible by --nodes {k}", a.gpus),
        (Some(k), _) => a.gpus / k,
        (None, Some(0)) => bail!("--gpus-per-node must be a positive integer, got 0"),
        (None, Some(g)) => g,
        (None, None) => gpu.gpus_per_node,
    };
    let stage_choices: Vec<u32> = match (a.stages, a.plan) {
        (Some(s), _) => vec![s],
        (None, Some(p)) => vec![p.pp],
        (None, None) => (0..6).map(|e| 1u32 << e).filter(|s| *s <= a.gpus && a.gpus % s == 0).collect(),
    };
    let mut best: Option<Estimate> = None;
    let mut last_err = None;
    for s in stage_choices {
        let cell = Cell::new(&gpu.name, a.gpus, s)?;
        let r = match &a.plan {
            Some(p) => est.estimate_plan(&job, &cell, node, p),
            None => est.estimate(&job, &cell, node),
        };
        match r {
            Ok(e) if best.as_ref().map_or(true, |b| e.iter_time_s < b.iter_time_s) => best = Some(e),
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    let Some(e) = best else {
        return Err(last_err.map(anyhow::Error::from).unwrap_or_else(|| anyhow::anyhow!("no Cell to evaluate")));
    };
    let ev = est.evaluate_plan(&job, &e.cell, node, &e.plan)?;
    let why = est.explain(&job, &e.cell, node).ok();
    if a.json {
        let v = serde_json::json!({
            "model": job.model.name,
            "batch": job.global_batch,
            "estimate": e,
            "gpu_seconds_per_iter": e.gpu_seconds_per_iter(),
            "time_breakdown": ev.time,
            "memory_breakdown": ev.memory,
            "error_band": ev.time.error_band(),
            "efficiency_factor": why.as_ref().map(|w| w.efficiency_factor),
            "framework": why.as_ref().map(|w| w.framework),
            "sources": why.as_ref().map(|w| w.sources.iter().map(|(k, v)| serde_json::json!({"parameter": k, "source": v})).collect::<Vec<_>>()),
            "decision": e.to_decision().to_admin_comment(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let p = e.plan;
    println!("model        {} (batch {})", job.model.name, job.global_batch);
    println!("cell         {} on {} node(s) x {} GPU(s)", e.cell, e.nodes, e.gpus_per_node);
    println!(
        "plan         dp={} tp={} pp={} micro-batches={} zero={} checkpointing={}",
        p.dp, p.tp, p.pp, p.micro_batches, p.zero_stage, if p.checkpointing { "on" } else { "off" }
    );
    println!("iteration    {:.4} s  ({:.3} GPU-s/iter, source: {})", e.iter_time_s, e.gpu_seconds_per_iter(), e.source);
    println!(
        "memory/GPU   {:.2} GiB of {:.0} GiB (states {:.2}, activations {:.2}, other {:.2})",
        gib(e.mem_per_gpu_bytes as f64),
        gpu.mem_gib,
        gib(ev.memory.states),
        gib(ev.memory.activations),
        gib(ev.memory.other)
    );
    let t = ev.time;
    println!(
        "model time   compute {:.4}  bubble {:.4}  tp {:.4}  pp {:.4}  ep {:.4}  dp {:.4}  optimizer {:.4}  overhead {:.4}  slowest rank {:.4}",
        t.compute_s, t.bubble_s, t.tp_comm_s, t.pp_comm_s, t.ep_comm_s, t.dp_comm_s, t.optimizer_s, t.overhead_s, t.sync_wait_s
    );
    if a.explain {
        print_explain(&job, &ev, why.as_ref());
    }
    if a.catalogs.db.is_some() {
        print!("{}", est.calibration());
    }
    Ok(())
}

/// The `--explain` breakdown.
fn print_explain(job: &JobSpec, ev: &cellsched_core::estimator::PlanEval, why: Option<&cellsched_core::estimator::Explanation>) {
    let t = ev.time;
    let total = t.total().max(1e-12);
    let m = &job.model;
    println!(
        "\nexplain      {} trained in {:?} precision with {:?}, recompute {:?}, runtime {:?} (gradient sync {} backward){}",
        m.name,
        m.precision,
        m.optimizer,
        m.recompute,
        m.runtime,
        if m.cost().overlaps_grad_sync(ev.plan.zero_stage) { "overlaps" } else { "after" },
        m.micro_batch.map_or(String::new(), |b| format!(", micro-batch fixed at {b}"))
    );
    println!("time (model, before any measured override; error band +/-{:.0}%):", t.error_band() * 100.0);
    for (name, v) in [
        ("compute, all micro-batches", t.compute_s),
        ("  of which dense matmuls", t.gemm_s),
        ("  of which attention (s^2)", t.attention_s),
        ("  of which memory-bound ops", t.memory_bound_s),
        ("  of which kernel-launch floor", t.launch_bound_s),
        ("pipeline bubble", t.bubble_s),
        ("exposed DP gradient sync / ZeRO", t.dp_comm_s),
        ("TP all-reduces", t.tp_comm_s),
        ("PP sends", t.pp_comm_s),
        ("MoE all-to-all (expert parallel)", t.ep_comm_s),
        ("optimizer step", t.optimizer_s),
        ("framework overheads", t.overhead_s),
        ("waiting for the slowest rank", t.sync_wait_s),
    ] {
        println!("  {name:<34} {v:>10.4} s  {:>5.1}%", v / total * 100.0);
    }
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let mm = ev.memory;
    println!(
        "memory per GPU: states {:.2} GiB, activations+logits {:.2} GiB, optimizer-step temporaries {:.2} GiB, context/buffers {:.2} GiB -> needed {:.2} GiB",
        gib(mm.states),
        gib(mm.activations),
        gib(mm.optimizer_temp),
        gib(mm.other),
        gib(mm.total())
    );
    if m.cudnn_benchmark {
        println!(
            "  cuDNN autotuning workspace {:.2} GiB (cudnn_benchmark; taken from memory left over, not needed to fit) -> NVML peak {:.2} GiB",
            gib(mm.autotune_workspace),
            gib(mm.peak())
        );
    }
    if let Some(w) = why {
        println!(
            "parameters: compute efficiency x{:.3}; communication x{:.2} in a node, x{:.2} across nodes, {:.2} ms per micro-batch, {:.1} ms per iteration",
            w.efficiency_factor,
            w.framework.comm_scale,
            w.framework.net_scale,
            w.framework.per_microbatch_s * 1e3,
            w.framework.per_iter_s * 1e3
        );
        for (k, v) in &w.sources {
            println!("  {k:<38} {v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_are_read_against_the_shared_caps() {
        assert_eq!(parse_batch(" 16777216 "), Ok(16_777_216));
        assert_eq!(parse_batch("-3").unwrap_err(), "batch must be a positive integer, got -3");
        assert_eq!(parse_batch("4294967295").unwrap_err(), "expected a global batch size in 1..=16777216");
        assert_eq!(bounded(limits::NODES)("65536"), Ok(65_536));
        assert_eq!(bounded(limits::NODES)("65537").unwrap_err(), "expected a node count in 1..=65536");
    }

    proptest! {
        /// Any text: a value within the cap or an error, never a panic.
        #[test]
        fn cli_count_parsers_never_panic(text in any::<String>(), n in any::<u64>(), i in 0usize..6) {
            let limit = limits::ALL[i];
            for s in [text.clone(), n.to_string(), format!("-{n}")] {
                if let Ok(b) = parse_batch(&s) {
                    prop_assert!((1..=limits::BATCH.max_u32()).contains(&b));
                }
                if let Ok(v) = bounded(limit)(&s) {
                    prop_assert!(u64::from(v) <= limit.max && v >= 1);
                }
            }
        }
    }
}
