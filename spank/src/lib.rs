//! SPANK plugin `spank_cellsched.so`: cellsched's DL options on
//! sbatch/srun/salloc, their validation and propagation to slurmctld, and the
//! injection of the chosen plan into every task (pyxis layout: one module per
//! Slurm context).
//!
//! - [`options`]: the `--dl-*` option table (`--help` text `[cellsched] ...`).
//! - [`local`]: sbatch/srun/salloc — env-var equivalents, validation at
//!   submit, `spank_job_control_setenv` propagation.
//! - [`remote`]: slurmstepd `task_init` — plan choice, plan file, task env.
//! - [`plan`], [`env`], [`plan_file`], [`args`], [`elastic_env`]: pure logic, unit tested;
//!   [`step_estimator`]: the estimator built once per step; [`remove_tree`]:
//!   plan-directory removal with bounded descriptors.
//!
//! - [`spank`]: the safe [`spank::Spank`] handle over slurm-sys's generated
//!   spank.h bindings; callback code never sees a raw `spank_t`.
//!
//! Every exported callback runs under `catch_unwind`; logging goes through
//! Slurm's logger with a fixed `%s` format ([`spank::log`]).
#![deny(missing_docs)]
mod args;
mod elastic_env;
mod env;
mod error;
mod local;
mod options;
mod plan;
mod plan_file;
mod remote;
mod remove_tree;
mod spank;
mod step_estimator;

use args::PluginArgs;
use slurm_sys::spank_t;
use spank::{Context, Spank};
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
            spank::log(spank::Level::Error, &e.to_string());
            fail_rc
        }
    })
}

/// Runs a callback body with the safe handle for Slurm's `sp` (see [`guard`]).
fn callback(what: &str, sp: spank_t, fail_rc: c_int, f: impl FnOnce(&Spank<'_>) -> Result<(), error::SpankError>) -> c_int {
    // SAFETY: `sp` is the handle Slurm passed to the exported callback now
    // running; the wrapper lives only for this call.
    let handle = unsafe { Spank::from_raw(sp) };
    guard(what, fail_rc, || f(&handle))
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
    callback("slurm_spank_init", sp, -1, |sp| {
        let args = PluginArgs::parse(&argv)?;
        let _ = ARGS.set(args);
        match Context::current() {
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
    let ctx = Context::current();
    let rc = match ctx {
        Context::Local | Context::Allocator => callback("slurm_spank_init_post_opt", sp, -1, local::post_opt),
        // slurmstepd, as root: plan directory and verified decision (never fails the step).
        Context::Remote => callback("slurm_spank_init_post_opt", sp, 0, |sp| remote::post_opt(sp, &plugin_args())),
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
    callback("slurm_spank_exit", sp, 0, |sp| match Context::current() {
        Context::Remote => remote::exit(sp, &plugin_args()),
        _ => Ok(()),
    })
}

/// Job epilog (root, once per job and node): removes plan directories a
/// killed step left behind (never fails the epilog).
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_epilog(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    callback("slurm_spank_job_epilog", sp, 0, |sp| match Context::current() {
        Context::JobScript => remote::job_epilog(sp, &plugin_args()),
        _ => Ok(()),
    })
}

/// Remote: injects the plan into the task. An `srun` step whose `--dl-*`
/// values its grant cannot honour fails: the task prints why on its stderr
/// and exits 1 before the user's program starts (Slurm ignores a failing
/// `optional` plugin, so the plugin ends the task itself, as slurmstepd
/// does for a failing `required` one). Other errors never fail the task.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_init(sp: spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    let mut refused = None;
    let rc = callback("slurm_spank_task_init", sp, 0, |sp| match Context::current() {
        Context::Remote => remote::task_init(sp, &plugin_args()).inspect_err(|e| {
            if let error::SpankError::StepRefused(why) = e {
                refused = Some(why.clone());
            }
        }),
        _ => Ok(()),
    });
    if let Some(why) = refused {
        refuse_task(&why);
    }
    rc
}

/// Ends the task (forked by slurmstepd, before the user's program runs)
/// with status 1 after writing `cellsched: error: <why>` to its stderr.
fn refuse_task(why: &str) -> ! {
    let line = format!("cellsched: error: {why}; the step is refused\n");
    // SAFETY: write(2) of an owned buffer to the task's stderr, then _exit
    // (no unwinding, no atexit handlers of slurmstepd in the task).
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
        libc::_exit(1)
    }
}
