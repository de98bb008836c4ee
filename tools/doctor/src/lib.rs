//! cellsched-doctor: checks a cellsched installation and says what to fix.
//!
//! [`run`] reads slurm.conf (and what it includes), gres.conf,
//! plugstack.conf, cellsched.toml and the estimator data it names, looks at
//! the plugin `.so` files in PluginDir, and asks the running slurmctld (via
//! [`controller::Controller`]) whether it answers and which release it runs.
//! Each check gives one [`report::Finding`]: OK, WARN or FAIL with the fix.
#![deny(missing_docs)]
pub mod checks;
mod conf;
pub mod controller;
mod elf;
mod report;

pub use checks::{run, Options};
pub use report::{Finding, Report, Status};
