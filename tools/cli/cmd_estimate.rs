//! `cellsched estimate`: Predict the best plan and iteration time of a job on one Cell.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'estimate' is not available in this build yet")
}
