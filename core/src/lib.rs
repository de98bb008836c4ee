//! cellsched-core: the decision logic of cellsched, in pure Rust with no FFI.
//!
//! Used alike by the slurmctld plugins, the SPANK plugin, the simulator and
//! the CLI, so that what is tested here is what runs inside Slurm.
//!
//! - [`cell`]: the shared vocabulary — [`cell::Cell`], [`cell::Plan`],
//!   [`cell::Decision`] and their text forms (sbatch options, admin comments).
//! - [`gpu`], [`model`]: the GPU and model catalogs (data in `core/data/`).
//! - [`estimator`]: Cell → best plan and iteration time (with its
//!   calibration); [`profile_db`]: measured iteration times.
//! - [`placement`]: which Cell a DL job gets (submit, re-planning, sizing by
//!   marginal value, GRES strings); [`deadline`]: `--dl-deadline`;
//!   [`declared`]: what a declared `--dl-iters` bounds.
//! - [`asrpt`]: the order of pending jobs; [`ordering`]: job records → site factors (site_factor/cellsched); [`predictor`], [`history`]: the
//!   iteration predictor; [`freezing`]: layer freezing.
//! - [`options`], [`job_env`]: the DL option table and the job-environment
//!   contract; [`plan_env`]: the plan as environment variables for tasks.
//! - [`config`]: `cellsched.toml`; [`slurm_conf`]: slurm.conf/gres.conf text.
//! - [`bounded`], [`rank_cache`], [`snapshot_cache`]: bounded caches for
//!   long-lived processes (slurmctld).
//! - [`error`]: the crate's error type.
#![deny(missing_docs)]
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
pub mod ordering;
pub mod placement;
pub mod plan_env;
pub mod predictor;
pub mod profile_db;
pub mod rank_cache;
pub mod slurm_conf;
pub mod snapshot_cache;

pub use cell::{Cell, Decision, Plan};
pub use error::CoreError;
