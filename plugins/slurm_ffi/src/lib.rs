//! Thin FFI helpers shared by the cellsched Slurm plugins:
//! - [`log`]: Slurm's logger with a fixed `"%s"` format (`log::info(&str)`, ...),
//!   working in slurmctld, slurmd, slurmstepd and SPANK client contexts.
//! - [`guard()`]: `catch_unwind` for every exported function; logs the panic
//!   and returns the fallback.
//! - [`cstr`]: borrowed `char *` → `&str`, `xstrdup`ed strings Slurm will `xfree`.
//! - [`version`]: running-Slurm-versus-build check for `init`.
//! - [`plugin_identity!`]: `plugin_name` / `plugin_type` / `plugin_version` symbols.
//! - [`heap`]: a counting global allocator (the plugin's own Rust heap, for `debug` lines).
//! - [`background`]: the plugins' background threads yield the CPU to slurmctld's own.
//! - [`ctld`]: safe slurmctld access (jobs, locks, `update_job`, nodes) over the slurm-sys shim.
//! - [`host`]: what both slurmctld plugins host alike: the `cellsched.toml`
//!   locator, file stamps, a periodic background thread with a bounded stop.
//! - [`running_conf`]: the running daemon's `slurm_conf` paths, read through `dlsym`.
//!
//! Link arguments (version script, lazy binding) come from
//! `plugins/build_support.rs`, included by each plugin crate's `build.rs`.
#![deny(missing_docs)]

pub mod background;
pub mod cstr;
pub mod ctld;
pub mod guard;
pub mod heap;
pub mod host;
pub mod log;
pub mod plugin;
pub mod running_conf;
pub mod version;

pub use guard::guard;
pub use slurm_sys;

/// Tests of `plugins/build_support.rs` (included by the plugin build scripts).
#[cfg(test)]
mod build_support_tests {
    include!("../../build_support.rs");

    #[test]
    fn version_script_exports_only_the_given_symbols() {
        let s = version_script(&["plugin_name", "init", "site_factor_p_set"]);
        assert_eq!(s, "{\n  global:\n    plugin_name;\n    init;\n    site_factor_p_set;\n  local: *;\n};\n");
    }

    #[test]
    #[should_panic(expected = "bad symbol name")]
    fn version_script_rejects_bad_names() {
        version_script(&["init; local"]);
    }

    #[test]
    #[should_panic(expected = "no symbols")]
    fn version_script_needs_symbols() {
        version_script(&[]);
    }
}
