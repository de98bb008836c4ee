//! `cellsched cluster`: bring the local heterogeneous Slurm test cluster up
//! or down, show its state, or print the shell lines that point Slurm's
//! commands at it.
use anyhow::Context;
use cellsched_devcluster::{parse_port_base, Cluster, ClusterError, LocalClusterSpec, JobPolicy, UpOutcome};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Cluster directory (config, state, logs, database)
    /// [default: $XDG_STATE_HOME/cellsched/cluster or ~/.local/state/cellsched/cluster]
    #[arg(long, global = true, env = "CELLSCHED_CLUSTER_DIR", value_name = "DIR")]
    dir: Option<PathBuf>,
    /// First port of the cluster's range (slurmctld; then slurmdbd, MariaDB, one per slurmd)
    #[arg(long, global = true, env = "CELLSCHED_PORT_BASE", value_name = "PORT", value_parser = port_base)]
    port_base: Option<u16>,
    /// Run stock Slurm: do not install or configure cellsched's plugins
    #[arg(long, global = true)]
    no_plugins: bool,
    /// Node groups TYPE:NODESxGPUS,... [default: a100:2x4,v100:2x8,a10:1x4]
    /// (recorded in the cluster directory: later commands reuse them)
    #[arg(long, global = true, env = "CELLSCHED_CLUSTER_GROUPS", value_name = "GROUPS")]
    groups: Option<String>,
    /// Emulated cluster of N nodes (40% a100x8, 40% v100x8, 20% a10x4) served by one
    /// front-end slurmd; needs Slurm built by `scripts/slurm.sh build 22.05.8 front-end`
    /// (used from /opt/cellsched/slurm-22.05.8-fe unless CELLSCHED_SLURM_SBIN is set)
    #[arg(long, global = true, env = "CELLSCHED_CLUSTER_NODES", value_name = "N", conflicts_with = "groups")]
    nodes: Option<u32>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Start MariaDB, slurmdbd, slurmctld and the slurmd nodes: no-op if already up, starts
    /// only what is down on a partly-up cluster; never cancels a job
    Up {
        /// Slurm `SchedulerParameters=` instead of the test cluster's fast cycles
        /// (sched_interval=2,bf_interval=1,bf_resolution=1,sched_min_interval=100000);
        /// e.g. `sched_interval=2` keeps Slurm's default backfill (every 30 s, 500 jobs deep).
        /// A running cluster with other parameters is restarted (jobs kept)
        #[arg(long, env = "CELLSCHED_CLUSTER_SCHED_PARAMS", value_name = "PARAMS", value_parser = scheduler_parameters)]
        scheduler_parameters: Option<String>,
    },
    /// Stop every daemon of the cluster (no-op if already down). Jobs are kept in slurmctld's
    /// saved state and found again by the next `up`; running steps keep running meanwhile
    Down {
        /// Cancel every job of the cluster first (nothing is kept)
        #[arg(long)]
        cancel_jobs: bool,
    },
    /// Show each daemon's state and `sinfo`
    Status,
    /// Print `export SLURM_CONF=...` lines: eval "$(cellsched cluster env)"
    Env,
}

fn scheduler_parameters(s: &str) -> Result<String, String> {
    cellsched_devcluster::parse_scheduler_parameters(s).map_err(|e| e.to_string())
}

fn port_base(s: &str) -> Result<u16, String> {
    parse_port_base(s).map_err(|e| e.to_string())
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    let mut spec = LocalClusterSpec::from_env().context("reading the cluster settings from the environment")?;
    if let Some(d) = a.dir {
        spec.dir = if d.is_absolute() { d } else { std::env::current_dir()?.join(d) };
    }
    if let Some(p) = a.port_base {
        spec.port_base = p;
    }
    spec.with_plugins = !a.no_plugins;
    let own_sbin = std::env::var_os("CELLSCHED_SLURM_SBIN").is_some_and(|v| !v.is_empty());
    match (&a.groups, a.nodes) {
        (Some(g), _) => spec.groups = cellsched_devcluster::NodeGroup::parse_list(g)?,
        (None, Some(n)) => spec.emulate(n, own_sbin)?,
        // Without --groups/--nodes, a cluster keeps the groups it was brought up with.
        (None, None) => spec.use_saved_groups(own_sbin)?,
    }
    match a.action {
        Action::Up { scheduler_parameters } => {
            spec.scheduler_parameters = scheduler_parameters;
            up(&spec)
        }
        Action::Down { cancel_jobs } => {
            let t = Instant::now();
            let policy = if cancel_jobs { JobPolicy::Cancel } else { JobPolicy::Keep };
            let stopped = Cluster::open(&spec)?.down(policy)?;
            if stopped.is_empty() {
                eprintln!("cluster at {} was not running", spec.dir.display());
            } else {
                eprintln!(
                    "stopped {} in {:.1} s; jobs {}",
                    stopped.join(", "),
                    t.elapsed().as_secs_f64(),
                    if cancel_jobs { "cancelled" } else { "kept (the next `cluster up` finds them again; --cancel-jobs cancels them)" }
                );
            }
            Ok(())
        }
        Action::Status => {
            let status = Cluster::open(&spec)?.status();
            print!("{status}");
            Ok(())
        }
        Action::Env => {
            for l in Cluster::open(&spec)?.env_lines() {
                println!("{l}");
            }
            Ok(())
        }
    }
}

fn up(spec: &LocalClusterSpec) -> anyhow::Result<()> {
    let t = Instant::now();
    let c = match Cluster::up(spec) {
        Ok(c) => c,
        Err(e @ ClusterError::MissingProgram { .. }) if spec.front_end => {
            return Err(anyhow::Error::new(e).context(
                "cannot bring the emulated cluster up (it needs Slurm built with --enable-front-end: run scripts/slurm.sh build 22.05.8 front-end, or set CELLSCHED_SLURM_SBIN)",
            ))
        }
        Err(e) => return Err(hint(e)),
    };
    let secs = t.elapsed().as_secs_f64();
    let plugins = if c.plugins.is_stock() {
        if spec.with_plugins {
            format!("stock Slurm (no plugin .so files in {}; build them with cargo build --release)", spec.plugin_build_dir.display())
        } else {
            "stock Slurm (--no-plugins)".to_string()
        }
    } else {
        c.plugins.names().join(", ")
    };
    match c.outcome {
        Some(UpOutcome::AlreadyUp) => eprintln!("cluster already up at {} (checked in {secs:.1} s); plugins: {plugins}", spec.dir.display()),
        Some(UpOutcome::Restarted { ref reason }) => {
            eprintln!("cluster restarted ({reason}; jobs kept) in {secs:.1} s at {}; plugins: {plugins}", spec.dir.display())
        }
        Some(UpOutcome::Repaired { ref started }) => {
            eprintln!("cluster repaired in {secs:.1} s at {}: started {} (jobs kept); plugins: {plugins}", spec.dir.display(), started.join(", "))
        }
        _ => eprintln!("cluster up in {secs:.1} s at {}; plugins: {plugins}", spec.dir.display()),
    }
    eprintln!("nodes: {}", spec.groups.iter().map(|g| format!("{} ({}x{})", g.hostlist(), g.gpus_per_node, g.gpu_type)).collect::<Vec<_>>().join(", "));
    eprintln!("use it with: eval \"$(cellsched cluster env --dir {} --port-base {})\"", spec.dir.display(), spec.port_base);
    Ok(())
}

/// Adds the next step to errors a user can fix.
fn hint(e: ClusterError) -> anyhow::Error {
    let extra = match &e {
        ClusterError::NotRoot { .. } => Some("run it with sudo or as root"),
        ClusterError::StepFailed { .. } => Some("all daemons that had started were stopped again; fix the cause and rerun `cellsched cluster up`"),
        _ => None,
    };
    match extra {
        Some(h) => anyhow::Error::new(e).context(format!("cannot bring the cluster up ({h})")),
        None => anyhow::Error::new(e).context("cannot bring the cluster up"),
    }
}
