//! `cellsched sim`: Trace-driven simulation of scheduling policies.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'sim' is not available in this build yet")
}
