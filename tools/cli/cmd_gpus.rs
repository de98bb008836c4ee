//! `cellsched gpus`: the GPU catalog (built in, plus a site's
//! `--gpu-catalog`): each type's key, the names that map to it (NVML product
//! names, user spellings) and its datasheet numbers.
use crate::cmd_estimate::CatalogArgs;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub catalogs: CatalogArgs,
    /// Print JSON: one object per type with its aliases and every datasheet field.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    let est = a.catalogs.estimator()?;
    let cat = est.gpu_catalog();
    if a.json {
        let mut rows = Vec::new();
        for spec in cat.specs() {
            let mut v = serde_json::to_value(spec)?;
            v["aliases"] = json!(cat.aliases(&spec.name));
            rows.push(v);
        }
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["type", "aliases", "mem GiB", "fp16 TFLOP/s", "fp32 TFLOP/s", "mem GB/s", "link", "link GB/s", "net GB/s", "GPUs/node"]);
    let mut n = 0;
    for s in cat.specs() {
        t.add_row([
            s.name.clone(),
            cat.aliases(&s.name).join(", "),
            format!("{}", s.mem_gib),
            format!("{}", s.fp16_tflops),
            format!("{}", s.fp32_tflops),
            format!("{}", s.mem_bw_gbs),
            serde_json::to_value(s.intra_link)?.as_str().unwrap_or("").to_string(),
            format!("{}", s.intra_node_gbs),
            format!("{}{}", s.inter_node_gbs, if s.network_declared { "" } else { " (typical)" }),
            s.gpus_per_node.to_string(),
        ]);
        n += 1;
    }
    println!("{n} GPU types (a name matches a type when it holds every word of one of its aliases; the key is an alias)");
    println!("{t}");
    Ok(())
}
