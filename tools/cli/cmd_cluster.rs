//! `cellsched cluster`: Bring a local heterogeneous Slurm test cluster up or down.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'cluster' is not available in this build yet")
}
