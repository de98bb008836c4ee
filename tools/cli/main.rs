//! `cellsched`: the command-line tool of the cellsched Slurm plugin suite.
//!
//! Each subcommand lives in its own module with its own clap `Args` and a
//! `run` function; this file only dispatches.
mod cmd_cluster;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cellsched", version = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("CELLSCHED_GIT_REV"), ", Slurm ", env!("CELLSCHED_SLURM_RELEASE"), ")"))]
#[command(about = "Cell-aware deep-learning scheduling for Slurm")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bring a local heterogeneous Slurm test cluster up or down.
    Cluster(cmd_cluster::Args),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Cluster(a) => cmd_cluster::run(a),
    };
    if let Err(e) = res {
        eprintln!("cellsched: error: {e:#}");
        std::process::exit(1);
    }
}
