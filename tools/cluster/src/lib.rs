//! A live heterogeneous Slurm cluster on localhost: MariaDB, slurmdbd,
//! slurmctld and one `slurmd -N NAME` per node (default `a100-[1-2]` with
//! 4 GPUs each, `v100-[1-2]` with 8, `a10-1` with 4), GPUs backed by plain
//! files, everything under one directory and one port range, daemons
//! tracked by PID file.
//!
//! ```no_run
//! use cellsched_cluster::{Cluster, ClusterSpec};
//! let spec = ClusterSpec::from_env()?;
//! let cluster = Cluster::up(&spec)?;          // idempotent
//! println!("{}", cluster.env_lines().join("\n"));
//! print!("{}", cluster.status());
//! cluster.down()?;                            // idempotent
//! # Ok::<(), cellsched_cluster::ClusterError>(())
//! ```
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

pub use cluster::{Cluster, DaemonState, Status, UpOutcome};
pub use error::{ClusterError, Result};
pub use layout::Layout;
pub use plugins::{PluginSet, OUR_PLUGINS};
pub use ports::{holder_of, is_free};
pub use render::DEFAULT_CELLSCHED_TOML;
pub use spec::{default_dir, default_plugin_build_dir, parse_port_base, ClusterSpec, NodeGroup, Ports, DEFAULT_PORT_BASE};
