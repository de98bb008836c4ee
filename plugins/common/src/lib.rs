//! Thin FFI helpers shared by the cellsched Slurm plugins:
//! - [`log`]: Slurm's logger with a fixed `"%s"` format (`log::info(&str)`, ...),
//!   working in slurmctld, slurmd, slurmstepd and SPANK client contexts; an
//!   optional `log` crate backend ([`log::SlurmLogger`]).
//! - [`guard()`]: `catch_unwind` for every exported function; logs the panic
//!   and returns the fallback.
//! - [`cstr`]: borrowed `char *` → `&str`, `xstrdup`ed strings Slurm will `xfree`.
//! - [`version`]: running-Slurm-versus-build check for `init`.
//! - [`plugin_identity!`]: `plugin_name` / `plugin_type` / `plugin_version` symbols.
//! - [`ctld`]: safe slurmctld access (jobs, locks, `update_job`, nodes) over the slurm-sys shim.
//!
//! Link arguments (version script, lazy binding) come from
//! `plugins/build_support.rs`, included by each plugin crate's `build.rs`.

pub mod cstr;
pub mod ctld;
pub mod guard;
pub mod log;
pub mod plugin;
pub mod version;

pub use guard::guard;
pub use slurm_sys;
