//! `cellsched profile`: Profile GPUs with NVML and manage the profile database.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("'profile' is not available in this build yet")
}
