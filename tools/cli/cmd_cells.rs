//! `cellsched cells`: List the feasible Cells of a job, ranked.
use crate::cmd_estimate::{bounded, CatalogArgs, JobArgs};
use cellsched_core::limits;
use anyhow::bail;
use cellsched_core::estimator::CellOffer;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub job: JobArgs,
    /// GPU types to consider, comma separated (default: the whole catalog).
    #[arg(long, value_delimiter = ',')]
    pub gpu_types: Vec<String>,
    /// Largest Cell in GPUs.
    #[arg(long, default_value_t = 16, value_parser = bounded(limits::CELL_GPUS))]
    pub max_gpus: u32,
    /// Nodes available per GPU type (all assumed free).
    #[arg(long, default_value_t = 4, value_parser = bounded(limits::NODES))]
    pub nodes: u32,
    /// Show at most this many Cells.
    #[arg(long, default_value_t = 30)]
    pub top: usize,
    #[command(flatten)]
    pub catalogs: CatalogArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    let est = a.catalogs.estimator()?;
    let job = a.job.job(&est)?;
    if a.max_gpus == 0 || a.nodes == 0 {
        bail!("--max-gpus and --nodes must be positive");
    }
    let types: Vec<String> = if a.gpu_types.is_empty() {
        est.gpu_catalog().names().map(str::to_string).collect()
    } else {
        let mut v = Vec::new();
        for t in &a.gpu_types {
            v.push(est.gpu_catalog().get(t)?.name.clone());
        }
        v
    };
    let offers: Vec<CellOffer> = types
        .iter()
        .map(|t| {
            let node = est.gpu_catalog().get(t).map(|g| g.gpus_per_node).unwrap_or(8);
            CellOffer { gpu_type: t.clone(), gpus_per_node: node, free_gpus_per_node: vec![node; a.nodes as usize] }
        })
        .collect();
    let ranked = est.rank_cells(&job, &offers, a.max_gpus);
    if ranked.is_empty() {
        bail!(
            "no feasible Cell for {} (batch {}) on {} with at most {} GPUs (does not fit in memory or batch not divisible)",
            job.model.name,
            job.global_batch,
            types.join(","),
            a.max_gpus
        );
    }
    if a.json {
        let rows: Vec<_> = ranked
            .iter()
            .take(a.top)
            .map(|e| serde_json::json!({"estimate": e, "gpu_seconds_per_iter": e.gpu_seconds_per_iter()}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["#", "cell", "nodes", "plan", "iter s", "GPU-s/iter", "mem/GPU GiB", "source"]);
    for (i, e) in ranked.iter().take(a.top).enumerate() {
        t.add_row([
            (i + 1).to_string(),
            e.cell.to_string(),
            e.nodes.to_string(),
            e.plan.to_string(),
            format!("{:.4}", e.iter_time_s),
            format!("{:.3}", e.gpu_seconds_per_iter()),
            format!("{:.1}", e.mem_per_gpu_bytes as f64 / (1u64 << 30) as f64),
            e.source.to_string(),
        ]);
    }
    println!("{} (batch {}): {} feasible Cells", job.model.name, job.global_batch, ranked.len());
    println!("{t}");
    Ok(())
}
