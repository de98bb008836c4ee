//! cellsched-profiler: measures iteration times of training jobs on this
//! node's GPUs and writes them into the profile database the estimator reads.
//!
//! - [`nvml`]: GPU inventory and sampling through NVML (dlopen'ed at run time:
//!   builds and runs without the driver, failing with a clear error);
//! - [`iterline`]: `cellsched-iter <seconds>` lines and `--regex` parsing,
//!   warm-up discard and median; [`runner`]: the bounded, interruptible run;
//!   [`sampler`]: background GPU sampling; [`run_env`]: the plan of a profiled run and its env;
//! - [`comm`]: the collective microbenchmark of `profile comm` and its output;
//! - [`session`]: one `profile run`; [`db`]: locked, atomic database writes
//!   and merges; [`probe`]: the built-in CPU probe; [`progress`]: the bar.
//!
//! Errors are [`ProfilerError`], each with a documented exit code.
#![deny(missing_docs)]
pub mod comm;
pub mod db;
mod error;
pub mod iterline;
pub mod nvml;
mod run_env;
pub mod probe;
pub mod progress;
pub mod runner;
mod sampler;
pub mod session;

pub use error::ProfilerError;
