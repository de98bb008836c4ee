//! cellsched-report: reports on DL jobs from Slurm accounting (`sacct`).
//!
//! - [`sacct`]: the query (window, partition, user, jobs) and running
//!   `sacct`/`scontrol`; [`record`]: typed jobs parsed from `--parsable2`
//!   records. Trust rule: everything computed comes from fields Slurm or the
//!   plugins write (DL tags from AdminComment only); JobName and Comment are
//!   fetched separately and are display-only;
//! - [`summary`]: JCT/queueing-delay statistics, makespan, GPU-hours and
//!   utilization per type, prediction errors; [`compare`]: two reports side by side;
//! - [`output`]: sacct-style tables and CSV; [`plot`]: PNG/SVG plots with an
//!   embedded font; [`history`]: the iteration predictor's training data;
//!   [`iter_log`]: job output files read safely (`--iter-log`);
//!   [`profile_rows`]: profile-DB rows from the jobs' measurements
//!   (`--profile-rows`, for an administrator to review and import);
//! - [`metrics`]: OpenMetrics text (queue, GPU-hours, estimator error, jobs
//!   left stock, plugin timings from slurmctld's log).
//!
//! Errors are [`ReportError`], each with a documented exit code.
#![deny(missing_docs)]
pub mod compare;
mod error;
pub mod history;
pub mod iter_log;
pub mod metrics;
pub mod output;
pub mod plot;
pub mod private_data;
pub mod profile_rows;
pub mod record;
pub mod sacct;
pub mod summary;

pub use error::ReportError;
pub use record::JobRecord;
pub use sacct::Query;
pub use summary::{Report, Summary};
