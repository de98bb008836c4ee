//! Raw declarations of the C shim (`shim/cellsched_shim.c`); see the crate
//! docs for the contract. Every function resolves Slurm symbols with
//! `dlsym(RTLD_DEFAULT, ..)`, so calling one outside slurmctld is safe and
//! returns its "unavailable" value (`-1`, `NULL`, `0`).
#![allow(missing_docs)]
use core::ffi::{c_char, c_int, c_void};

/// Opaque slurmctld `job_record_t` (layout differs between releases: use accessors).
#[repr(C)]
pub struct cellsched_job_t {
    _private: [u8; 0],
}

/// Opaque walk over the job list in pieces (`cellsched_job_walk_*`).
#[repr(C)]
pub struct cellsched_job_walk_t {
    _private: [u8; 0],
}

/// Lock set `conf R, job R, node R, part R`.
pub const CELLSCHED_LOCK_READ: c_int = 0;
/// Lock set `conf R, job W, node W, part R, fed R` (what the update_job RPC takes).
pub const CELLSCHED_LOCK_WRITE: c_int = 1;

/// Pending-job update applied with slurmctld's `update_job()`; init with
/// [`cellsched_job_update_init`]. NULL strings / `NO_VAL` numbers = unchanged.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cellsched_job_update_t {
    pub job_id: u32,
    pub features: *const c_char,
    pub gres: *const c_char,
    pub admin_comment: *const c_char,
    pub min_nodes: u32,
    pub max_nodes: u32,
    pub num_tasks: u32,
    pub time_limit: u32,
    /// Unix seconds; 0 = unchanged.
    pub begin_time: i64,
}

pub type CellschedJobCb = unsafe extern "C" fn(job: *mut cellsched_job_t, arg: *mut c_void) -> c_int;
pub type CellschedLockCb = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

extern "C" {
    pub fn cellsched_shim_version_number() -> u32;
    pub fn cellsched_in_slurmctld() -> c_int;
    pub fn cellsched_xstrdup(s: *const c_char) -> *mut c_char;
    pub fn cellsched_xfree(p: *mut c_void);
    pub fn cellsched_with_lock(kind: c_int, cb: Option<CellschedLockCb>, arg: *mut c_void) -> c_int;
    pub fn cellsched_queue_scheduler() -> c_int;
    pub fn cellsched_for_each_job(pending_only: c_int, cb: Option<CellschedJobCb>, arg: *mut c_void) -> c_int;
    pub fn cellsched_find_job(job_id: u32) -> *mut cellsched_job_t;
    pub fn cellsched_job_walk_start() -> *mut cellsched_job_walk_t;
    pub fn cellsched_job_walk_next(walk: *mut cellsched_job_walk_t, pending_only: c_int, cb: Option<CellschedJobCb>, arg: *mut c_void) -> c_int;
    pub fn cellsched_job_walk_stop(walk: *mut cellsched_job_walk_t);

    pub fn cellsched_job_id(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_user_id(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_state(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_is_pending(job: *const cellsched_job_t) -> c_int;
    pub fn cellsched_job_state_reason(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_name(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_partition(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_admin_comment(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_comment(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_features(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_tres_per_node(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_tres_req_str(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_tres_alloc_str(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_nodes(job: *const cellsched_job_t) -> *const c_char;
    pub fn cellsched_job_min_nodes(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_max_nodes(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_num_tasks(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_time_limit(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_priority(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_site_factor(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_submit_time(job: *const cellsched_job_t) -> i64;
    pub fn cellsched_job_begin_time(job: *const cellsched_job_t) -> i64;
    pub fn cellsched_job_start_time(job: *const cellsched_job_t) -> i64;
    pub fn cellsched_job_set_site_factor(job: *mut cellsched_job_t, factor: u32);
    pub fn cellsched_job_release_gres_select(job: *mut cellsched_job_t) -> u64;
    pub fn cellsched_job_set_admin_comment(job: *mut cellsched_job_t, text: *const c_char) -> c_int;
    pub fn cellsched_job_env_count(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_env_at(job: *const cellsched_job_t, i: u32) -> *const c_char;
    pub fn cellsched_job_env_set(job: *mut cellsched_job_t, name: *const c_char, value: *const c_char) -> c_int;
    pub fn cellsched_job_env_sup_count(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_env_sup_at(job: *const cellsched_job_t, i: u32) -> *const c_char;
    pub fn cellsched_job_env_sup_set(job: *mut cellsched_job_t, name: *const c_char, value: *const c_char) -> c_int;
    pub fn cellsched_job_is_batch(job: *const cellsched_job_t) -> c_int;
    pub fn cellsched_job_exit_code(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_restart_cnt(job: *const cellsched_job_t) -> u32;
    pub fn cellsched_job_requeue_allowed(job: *const cellsched_job_t) -> c_int;
    pub fn cellsched_job_end_time(job: *const cellsched_job_t) -> i64;
    pub fn cellsched_job_awaits_registration(job: *const cellsched_job_t) -> c_int;
    pub fn cellsched_job_signal(job_id: u32, signal: u16) -> c_int;
    pub fn cellsched_job_requeue(job_id: u32) -> c_int;
    pub fn cellsched_env_array_set(
        env: *mut *mut *mut c_char,
        size: *mut u32,
        name: *const c_char,
        value: *const c_char,
    ) -> c_int;

    pub fn cellsched_job_update_init(u: *mut cellsched_job_update_t, job_id: u32);
    pub fn cellsched_update_job(u: *const cellsched_job_update_t) -> c_int;

    pub fn cellsched_node_count() -> c_int;
    pub fn cellsched_node_name(i: c_int) -> *const c_char;
    pub fn cellsched_node_features(i: c_int) -> *const c_char;
    pub fn cellsched_node_gres(i: c_int) -> *const c_char;
    pub fn cellsched_node_state(i: c_int) -> u32;
    pub fn cellsched_node_is_available(i: c_int) -> c_int;
    pub fn cellsched_node_cpus(i: c_int) -> u16;
    pub fn cellsched_node_gres_used(i: c_int) -> *mut c_char;
    pub fn cellsched_last_node_update() -> i64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_was_built_for_the_same_release() {
        assert_eq!(unsafe { cellsched_shim_version_number() }, crate::SLURM_VERSION_NUMBER);
    }

    #[test]
    fn outside_slurmctld_everything_reports_unavailable() {
        unsafe extern "C" fn never(_: *mut c_void) -> c_int {
            panic!("must not run outside slurmctld")
        }
        unsafe {
            assert_eq!(cellsched_in_slurmctld(), 0);
            assert_eq!(cellsched_with_lock(CELLSCHED_LOCK_READ, Some(never), core::ptr::null_mut()), -1);
            assert_eq!(cellsched_for_each_job(1, None, core::ptr::null_mut()), -1);
            assert!(cellsched_find_job(1).is_null());
            assert!(cellsched_job_walk_start().is_null());
            assert_eq!(cellsched_job_walk_next(core::ptr::null_mut(), 1, None, core::ptr::null_mut()), -1);
            cellsched_job_walk_stop(core::ptr::null_mut());
            assert_eq!(cellsched_queue_scheduler(), -1);
            assert_eq!(cellsched_node_count(), 0);
            assert!(cellsched_node_name(0).is_null());
            let mut u = core::mem::zeroed::<cellsched_job_update_t>();
            cellsched_job_update_init(&mut u, 42);
            assert_eq!((u.job_id, u.min_nodes, u.max_nodes), (42, crate::NO_VAL, crate::NO_VAL));
            assert!(u.features.is_null() && u.gres.is_null());
            assert_eq!(cellsched_update_job(&u), -1);
            assert_eq!(u.begin_time, 0);
            assert_eq!(cellsched_job_signal(42, 10), -1);
            assert_eq!(cellsched_job_requeue(42), -1);
        }
    }
}
