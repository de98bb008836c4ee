//! cellsched-core: the decision logic of cellsched, in pure Rust with no FFI.
//!
//! Used alike by the slurmctld plugins, the SPANK plugin, the simulator and
//! the CLI, so that what is tested here is what runs inside Slurm.
//!
//! - [`cell`]: the shared vocabulary — [`cell::Cell`], [`cell::Plan`],
//!   [`cell::Decision`] and their text forms (sbatch options, admin comments).
pub mod asrpt;
pub mod cell;
pub mod config;
pub mod declared;
pub mod error;
pub mod estimator;
pub mod freezing;
pub mod gpu;
pub mod history;
pub mod model;
pub mod options;
pub mod plan_env;
pub mod predictor;
pub mod profile_db;
pub mod slurm_conf;

pub use cell::{Cell, Decision, Plan};
pub use error::CoreError;
