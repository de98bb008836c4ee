//! `cellsched`: the command-line tool of the cellsched Slurm plugin suite.
//!
//! Each subcommand lives in its own module with its own clap `Args` and a
//! `run` function; this file only dispatches.
mod cmd_cluster;
mod cmd_estimate;
mod cmd_cells;
mod cmd_profile;
mod cmd_report;
mod cmd_sim;
mod cmd_bench;
mod cmd_bench_replay;
mod cmd_bench_estimator;
mod cmd_generate;
mod cmd_doctor;
mod cmd_whatif;
mod cmd_models;
mod cmd_gpus;

use clap::{CommandFactory, Parser, Subcommand};

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
    /// Predict the best plan and iteration time of a job on one Cell.
    Estimate(cmd_estimate::Args),
    /// List the feasible Cells of a job, ranked.
    Cells(cmd_cells::Args),
    /// Profile GPUs with NVML and manage the profile database.
    Profile(cmd_profile::Args),
    /// Reports on DL jobs from sacct.
    Report(cmd_report::Args),
    /// Trace-driven simulation of scheduling policies.
    Sim(cmd_sim::Args),
    /// Benchmarks: policy comparison, ablations, live replay.
    Bench(cmd_bench::Args),
    /// Generate man pages and shell completions (for packagers and `make install`).
    Generate(cmd_generate::Args),
    /// Check an installation (plugins, slurm.conf, plugstack.conf, cellsched.toml) and say what to fix.
    Doctor(cmd_doctor::Args),
    /// Where and when would a DL job run if submitted now? Predicted start, finish and cost per Cell.
    Whatif(cmd_whatif::Args),
    /// List the model catalog: the names --dl-model accepts, with family, size and how each is trained.
    Models(cmd_models::Args),
    /// List the GPU catalog: GPU types, the names (aliases) that map to them, datasheet numbers.
    Gpus(cmd_gpus::Args),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Cluster(a) => cmd_cluster::run(a),
        Command::Estimate(a) => cmd_estimate::run(a),
        Command::Cells(a) => cmd_cells::run(a),
        Command::Profile(a) => cmd_profile::run(a),
        Command::Report(a) => cmd_report::run(a),
        Command::Sim(a) => cmd_sim::run(a),
        Command::Bench(a) => cmd_bench::run(a),
        Command::Generate(a) => cmd_generate::run(a, Cli::command()),
        Command::Doctor(a) => cmd_doctor::run(a),
        Command::Whatif(a) => cmd_whatif::run(a),
        Command::Models(a) => cmd_models::run(a),
        Command::Gpus(a) => cmd_gpus::run(a),
    };
    if let Err(e) = res {
        eprintln!("cellsched: error: {e:#}");
        std::process::exit(1);
    }
}
