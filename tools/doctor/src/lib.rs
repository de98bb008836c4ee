//! cellsched-doctor: checks a cellsched installation and says what to fix.
//!
//! [`run`] reads slurm.conf (and what it includes), gres.conf,
//! plugstack.conf, cellsched.toml and the estimator data it names, looks at
//! the plugin `.so` files in PluginDir, and asks the running slurmctld (via
//! [`controller::Controller`]) whether it answers and which release it runs.
//! Each check gives one [`report::Finding`]: OK, WARN or FAIL with the fix.
pub mod checks;
pub mod conf;
pub mod controller;
pub mod elf;
pub mod report;

pub use checks::{run, Options};
pub use report::{Finding, Report, Status};
