//! A live heterogeneous Slurm cluster on localhost: MariaDB, slurmdbd,
//! slurmctld and one `slurmd -N NAME` per node (default `a100-[1-2]` with
//! 4 GPUs each, `v100-[1-2]` with 8, `a10-1` with 4), GPUs backed by plain
//! files, everything under one directory and one port range, daemons
//! tracked by PID file.
//!
//! - Directory: `$XDG_STATE_HOME/cellsched/cluster` (else
//!   `~/.local/state/cellsched/cluster`), or `CELLSCHED_CLUSTER_DIR`:
//!   `etc/` (slurm.conf, gres.conf, plugstack.conf, slurmdbd.conf,
//!   cellsched.toml), `log/`, `run/` (PID files, MariaDB socket), `state/`,
//!   `spool/<node>/`, `plugins/` (private PluginDir), `dev/<node>/nvidiaN`,
//!   `mariadb/`, `jobs/` (test jobs' working dir).
//! - Ports from `CELLSCHED_PORT_BASE` (default 17800): base slurmctld,
//!   +1 slurmdbd, +2 MariaDB (127.0.0.1), +3.. one per slurmd.
//! - Plugins: `lib*_cellsched.so` from `CELLSCHED_PLUGIN_BUILD_DIR` (default
//!   `<workspace>/target/release`) are copied in by temp file + rename and
//!   configured; `with_plugins = false` gives stock Slurm.
//! - Other Slurm builds: `CELLSCHED_SLURM_SBIN` (its sibling `bin/` and
//!   `lib/slurm/` are used when present). `CELLSCHED_CLUSTER_TOML` names a
//!   file to use as `etc/cellsched.toml`.
//! - Emulated large clusters ([`LocalClusterSpec::emulate`], `cluster up --nodes N`):
//!   one front-end slurmd (`FrontendName=fe`) stands for every node and runs
//!   every job, on a Slurm built with `--enable-front-end`
//!   (`scripts/slurm.sh build 22.05.8 front-end`, [`FRONT_END_PREFIX`]).
//!
//! ```no_run
//! use cellsched_devcluster::{Cluster, LocalClusterSpec, JobPolicy};
//! let spec = LocalClusterSpec::from_env()?;
//! let cluster = Cluster::up(&spec)?;          // idempotent
//! println!("{}", cluster.env_lines().join("\n"));
//! print!("{}", cluster.status());
//! cluster.down(JobPolicy::Keep)?; // idempotent; jobs kept (JobPolicy::Cancel cancels them)
//! # Ok::<(), cellsched_devcluster::ClusterError>(())
//! ```
#![deny(missing_docs)]
mod cluster;
mod daemon;
mod error;
mod layout;
mod lock;
mod mariadb;
mod plugins;
mod ports;
mod render;
mod slurm_client;
mod spec;

pub use cluster::{Cluster, DaemonState, JobPolicy, Status, UpOutcome};
pub use error::{ClusterError, Result};
pub use layout::Layout;
pub use plugins::{PluginSet, OUR_PLUGINS};
pub use ports::{holder_of, is_free};
pub use render::DEFAULT_CELLSCHED_TOML;
pub use spec::{
    default_dir, default_plugin_build_dir, parse_port_base, parse_scheduler_parameters, LocalClusterSpec, NodeGroup, Ports, DEFAULT_PORT_BASE, DEV_SCHEDULER_PARAMETERS,
    FRONT_END_NAME, FRONT_END_PREFIX,
};
