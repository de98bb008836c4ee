//! `cellsched cells`: List the feasible Cells of a job, ranked.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'cells' is not available in this build yet")
}
