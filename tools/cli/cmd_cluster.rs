//! `cellsched cluster up|down|status|env`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("cluster: not built yet")
}
