//! The plugin's identity and its `init`/`fini`: load the configuration,
//! start the re-planning thread (slurmctld only), stop it within a bound.
use cellsched_slurm_ffi::ctld;
use cellsched_slurm_ffi::{guard, version};
use std::ffi::c_int;
use crate::replan::{start_thread, stop_thread};
use crate::state::{error, reload_if_changed, LOADED, NODES, SOURCE};


cellsched_slurm_ffi::plugin_identity!(name: "cellsched Cell placement", kind: "job_submit/cellsched");

#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard("job_submit/cellsched init", slurm_sys::SLURM_ERROR, || {
        if let Err(e) = version::check_running_slurm() {
            error(&format!("{e}; refusing to load"));
            return slurm_sys::SLURM_ERROR;
        }
        *SOURCE.lock().unwrap_or_else(|e| e.into_inner()) = None;
        reload_if_changed();
        if ctld::in_slurmctld() {
            cellsched_slurm_ffi::plugin::pin_library();
            start_thread();
            crate::elastic::start_thread();
        }
        slurm_sys::SLURM_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("job_submit/cellsched fini", slurm_sys::SLURM_SUCCESS, || {
        stop_thread();
        crate::elastic::stop_thread();
        *LOADED.write().unwrap_or_else(|e| e.into_inner()) = None;
        // Free the caches; never wait for a pass still running (it may wait for slurmctld's locks).
        if let Ok(mut g) = NODES.try_lock() {
            *g = None;
        }
        slurm_sys::SLURM_SUCCESS
    })
}

