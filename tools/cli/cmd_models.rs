//! `cellsched models`: the model catalog (built in, plus a site's
//! `--model-catalog`), with each model's family, size and how it is
//! described as trained: the names `--dl-model` and `--model` accept.
use crate::cmd_estimate::CatalogArgs;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub catalogs: CatalogArgs,
    /// Print JSON: one object per model with every field of its description.
    #[arg(long)]
    pub json: bool,
}

/// A field of a serialised model description as text ("" when absent).
fn field(v: &Value, name: &str) -> String {
    match v.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Parameters in the usual short form (125M, 1.3B).
fn short_count(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.1}B", n / 1e9)
    } else {
        format!("{:.0}M", n / 1e6)
    }
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    let est = a.catalogs.estimator()?;
    let cat = est.model_catalog();
    if a.json {
        let mut rows = Vec::new();
        for name in cat.names() {
            let spec = cat.get(name)?;
            let mut v = serde_json::to_value(spec)?;
            v["params"] = json!(spec.params());
            rows.push(v);
        }
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["model", "family", "params", "layers", "hidden", "seq/image", "precision", "optimizer", "runtime", "recompute"]);
    let mut n = 0;
    for name in cat.names() {
        let spec = cat.get(name)?;
        let v = serde_json::to_value(spec)?;
        let input = if spec.image_size > 0 { format!("{}px", spec.image_size) } else { spec.seq_len.to_string() };
        t.add_row([
            name.to_string(),
            field(&v, "family"),
            short_count(spec.params()),
            spec.layers.to_string(),
            if spec.hidden > 0 { spec.hidden.to_string() } else { String::new() },
            input,
            field(&v, "precision"),
            field(&v, "optimizer"),
            field(&v, "runtime"),
            field(&v, "recompute"),
        ]);
        n += 1;
    }
    println!("{n} models (use the name with --dl-model, or a model TOML file; see docs/GUIDE.md)");
    println!("{t}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_counts() {
        assert_eq!(short_count(1.3e9), "1.3B");
        assert_eq!(short_count(125e6), "125M");
    }
}
