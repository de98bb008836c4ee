//! `cellsched bench`: Benchmarks: policy comparison, ablations, live replay.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'bench' is not available in this build yet")
}
