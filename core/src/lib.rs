//! cellsched-core: the decision logic of cellsched, in pure Rust with no FFI.
//!
//! Used alike by the slurmctld plugins, the SPANK plugin, the simulator and
//! the CLI, so that what is tested here is what runs inside Slurm.
//!
//! - [`cell`]: the shared vocabulary — [`cell::Cell`], [`cell::Plan`],
//!   [`cell::Decision`] and their text forms (sbatch options, admin comments).
pub mod asrpt;
pub mod bounded;
pub mod cell;
pub mod config;
pub mod deadline;
pub mod declared;
pub mod error;
pub mod estimator;
pub mod freezing;
pub mod gpu;
pub mod history;
pub mod job_env;
pub mod model;
pub mod options;
pub mod placement;
pub mod plan_env;
pub mod predictor;
pub mod profile_db;
pub mod rank_cache;
pub mod slurm_conf;
pub mod snapshot_cache;

pub use cell::{Cell, Decision, Plan};
pub use error::CoreError;
