//! SPANK plugin `spank_cellsched.so`: cellsched's DL options on
//! sbatch/srun/salloc, their validation and propagation to slurmctld, and the
//! injection of the chosen plan into every task (pyxis layout: one module per
//! Slurm context).
//!
//! - [`options`]: the `--dl-*` option table (`--help` text `[cellsched] ...`).
//! - [`local`]: sbatch/srun/salloc — env-var equivalents, validation at
//!   submit, `spank_job_control_setenv` propagation.
//! - [`remote`]: slurmstepd `task_init` — plan choice, plan file, task env.
//! - [`plan`], [`env`], [`plan_file`], [`args`]: pure logic, unit tested.
//!
//! Every exported callback runs under `catch_unwind`; logging goes through
//! Slurm's logger with a fixed `%s` format ([`ffi::log`]).
#![deny(missing_docs)]
mod args;
mod env;
mod error;
mod ffi;
mod local;
mod options;
mod plan;
mod plan_file;
mod remote;

use args::PluginArgs;
use ffi::{spank_t, Context};
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::sync::OnceLock;

/// `plugin_name`: also the prefix of Slurm's option variables
/// (`_SLURM_SPANK_OPTION_cellsched_dl_model`).
#[no_mangle]
pub static plugin_name: [u8; 10] = *b"cellsched\0";
/// `plugin_type`: SPANK plugins say `spank`.
#[no_mangle]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// `plugin_version`: the Slurm release built against (major.minor must match).
#[no_mangle]
pub static plugin_version: c_uint = slurm_sys::SLURM_VERSION_NUMBER;
/// `spank_plugin_version`: SPANK interface version (0).
#[no_mangle]
pub static spank_plugin_version: c_uint = 0;

/// Plugstack arguments parsed in `slurm_spank_init`.
static ARGS: OnceLock<PluginArgs> = OnceLock::new();

fn plugin_args() -> PluginArgs {
    ARGS.get().cloned().unwrap_or_default()
}

/// Runs a callback body: panics and errors are logged, and mapped to the
/// return code (`fail_rc` on error; 0 where the job must not be disturbed).
fn guard(what: &str, fail_rc: c_int, f: impl FnOnce() -> Result<(), error::SpankError>) -> c_int {
    cellsched_slurm_ffi::guard(&format!("cellsched: {what}"), fail_rc, || match f() {
        Ok(()) => 0,
        Err(e) => {
            ffi::log(ffi::Level::Error, &e.to_string());
            fail_rc
        }
    })
}

/// Arguments from plugstack.conf as strings.
unsafe fn argv_strings(ac: c_int, av: *mut *mut c_char) -> Vec<String> {
    let n = usize::try_from(ac).unwrap_or(0);
    if av.is_null() {
        return Vec::new();
    }
    (0..n)
        .filter_map(|i| {
            // SAFETY: Slurm passes `ac` valid NUL-terminated strings.
            let p = unsafe { *av.add(i) };
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
        .collect()
}

/// Parses the plugstack arguments (an unknown key fails the load) and
/// registers the `--dl-*` options.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(sp: spank_t, ac: c_int, av: *mut *mut c_char) -> c_int {
    // SAFETY: forwarded from Slurm.
    let argv = unsafe { argv_strings(ac, av) };
    guard("slurm_spank_init", -1, || {
        let args = PluginArgs::parse(&argv)?;
        let _ = ARGS.set(args);
        match ffi::context() {
            Context::Local | Context::Allocator | Context::Remote => {
                options::register_all(sp).map_err(|msg| error::SpankError::Spank { call: "spank_option_register", msg })
            }
            _ => Ok(()),
        }
    })
}

/// Local/allocator: validates and propagates the options. An error refuses
/// the submission: Slurm ignores a failing `optional` plugin here, so the
/// client (sbatch/srun/salloc, before anything is submitted) exits with
/// status 1 after printing the message, as it does for a `required` one.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init_post_opt(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    let ctx = ffi::context();
    let rc = match ctx {
        Context::Local | Context::Allocator => guard("slurm_spank_init_post_opt", -1, || local::post_opt(sp)),
        // slurmstepd, as root: plan directory and verified decision (never fails the step).
        Context::Remote => guard("slurm_spank_init_post_opt", 0, || remote::post_opt(sp, &plugin_args())),
        _ => 0,
    };
    if rc != 0 && matches!(ctx, Context::Local | Context::Allocator) {
        std::process::exit(1);
    }
    rc
}

/// `slurm_spank_exit`: in slurmstepd (remote), removes the step's plan directory.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_exit(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    guard("slurm_spank_exit", 0, || match ffi::context() {
        Context::Remote => remote::exit(sp, &plugin_args()),
        _ => Ok(()),
    })
}

/// Job epilog (root, once per job and node): removes plan directories a
/// killed step left behind (never fails the epilog).
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_epilog(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    guard("slurm_spank_job_epilog", 0, || match ffi::context() {
        Context::JobScript => remote::job_epilog(sp, &plugin_args()),
        _ => Ok(()),
    })
}

/// Remote: injects the plan into the task (never fails the task).
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    guard("slurm_spank_task_init", 0, || match ffi::context() {
        Context::Remote => remote::task_init(sp, &plugin_args()),
        _ => Ok(()),
    })
}
