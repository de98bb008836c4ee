//! `cellsched report`: Reports on DL jobs from sacct.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'report' is not available in this build yet")
}
