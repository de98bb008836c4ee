//! The plugin's identity and its `init`/`fini`: load the configuration,
//! start the re-planning thread (slurmctld only), stop it within a bound.
use crate::node_cache::NodeCache;
use cellsched_core::job_env;
use cellsched_core::placement::{self, NodeGpus, Outcome, PendingDl, PlanWait, SubmitRequest};
use cellsched_core::config::{Config, OrderingConfig};
use cellsched_core::declared::DeclaredConfig;
use cellsched_core::estimator::Estimator;
use cellsched_core::rank_cache::RankCache;
use cellsched_core::snapshot_cache::{self, SnapshotCache};
use cellsched_core::record;
use cellsched_slurm_ffi::ctld::{self, JobUpdate, LockKind};
use cellsched_slurm_ffi::host::{FileStamp, Periodic};
use cellsched_slurm_ffi::{cstr, guard, log, version};
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};
use crate::replan::{start_thread, PENDING_LOAD, REPLAN_JOBS, THREAD};
use crate::state::*;


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
        }
        slurm_sys::SLURM_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("job_submit/cellsched fini", slurm_sys::SLURM_SUCCESS, || {
        // fini may be called while slurmctld holds its locks (reconfigure): wait a bounded time.
        if let Some(p) = THREAD.lock().unwrap_or_else(|e| e.into_inner()).take() {
            p.stop("job_submit/cellsched", Duration::from_secs(5));
        }
        *LOADED.write().unwrap_or_else(|e| e.into_inner()) = None;
        // Free the caches; never wait for a pass still running (it may wait for slurmctld's locks).
        if let Ok(mut g) = REPLAN_JOBS.try_lock() {
            *g = None;
        }
        if let Ok(mut g) = NODES.try_lock() {
            *g = None;
        }
        slurm_sys::SLURM_SUCCESS
    })
}

