//! Exported plugin symbols. `site_factor_p_set`/`_update` run under
//! slurmctld's job write lock: they only parse strings already in memory and
//! sort; the config file is read at `init` and, on reconfigure, by a short
//! background thread (no file I/O under the lock).
use crate::ordering::{self, JobFields};
use cellsched_core::asrpt::PendingJob;
use cellsched_core::config::{resolve_config_path, Config, OrderingConfig, CONFIG_ENV};
use cellsched_plugin_common::ctld::{self, Job};
use cellsched_plugin_common::{guard, log, version};
use slurm_sys::shim::cellsched_job_t;
use std::ffi::c_int;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

cellsched_plugin_common::plugin_identity!(name: "cellsched A-SRPT site factor", kind: "site_factor/cellsched");

/// The ordering settings in force; `None` = stock behaviour (no or bad config).
static ORDERING: RwLock<Option<Arc<OrderingConfig>>> = RwLock::new(None);
/// A config reload started by `site_factor_p_reconfig`.
static RELOAD: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

fn info(msg: &str) {
    log::info(&format!("site_factor/cellsched: {msg}"));
}

fn error(msg: &str) {
    log::error(&format!("site_factor/cellsched: {msg}"));
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Reads the config file (outside slurmctld's locks) and installs it.
fn load_config() {
    let (params, slurm_conf) = crate::slurm_conf::conf_paths();
    let env = std::env::var(CONFIG_ENV).ok();
    let path = resolve_config_path(params.as_deref(), env.as_deref(), slurm_conf.as_deref());
    let new = match Config::load(&path) {
        Ok(c) if c.ordering.enabled => {
            info(&format!(
                "loaded {}: A-SRPT ordering on (aging bound {} s, max site factor {})",
                path.display(),
                c.ordering.aging_bound_s,
                c.ordering.site_factor_max
            ));
            Some(Arc::new(c.ordering))
        }
        Ok(_) => {
            info(&format!("{}: ordering.enabled = false; site factors left stock", path.display()));
            None
        }
        Err(e) => {
            error(&format!("config error: {e}; site factors left stock until it is fixed and slurmctld reconfigured"));
            None
        }
    };
    *ORDERING.write().unwrap_or_else(|e| e.into_inner()) = new;
}

fn current() -> Option<Arc<OrderingConfig>> {
    ORDERING.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The A-SRPT view of a job record, `None` if cellsched did not place it.
fn pending_of(job: &Job<'_>, cfg: &OrderingConfig) -> Option<PendingJob> {
    let comment = job.admin_comment();
    // Cheap pre-check before copying the environment.
    if !comment.is_some_and(|c| c.contains("cellsched:")) {
        return None;
    }
    let limit = job.time_limit_min();
    let f = JobFields {
        id: job.id(),
        submit_time_s: job.submit_time(),
        admin_comment: comment,
        env: job.env().map(str::to_string).collect(),
        time_limit_min: (limit != slurm_sys::NO_VAL && limit != slurm_sys::INFINITE && limit > 0).then_some(limit),
    };
    ordering::pending_job(&f, cfg)
}

#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard("site_factor/cellsched init", slurm_sys::SLURM_ERROR, || {
        if let Err(e) = version::check_running_slurm() {
            error(&format!("{e}; refusing to load"));
            return slurm_sys::SLURM_ERROR;
        }
        load_config();
        slurm_sys::SLURM_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("site_factor/cellsched fini", slurm_sys::SLURM_SUCCESS, || {
        if let Some(h) = RELOAD.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        *ORDERING.write().unwrap_or_else(|e| e.into_inner()) = None;
        slurm_sys::SLURM_SUCCESS
    })
}

/// Called under slurmctld's write locks: the file is re-read by a thread.
#[no_mangle]
pub extern "C" fn site_factor_p_reconfig() {
    guard("site_factor_p_reconfig", (), || {
        let mut slot = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|h| !h.is_finished()) {
            return; // a reload is already running
        }
        if let Some(h) = slot.take() {
            let _ = h.join();
        }
        match std::thread::Builder::new().name("cellsched-sf-cfg".into()).spawn(load_config) {
            Ok(h) => *slot = Some(h),
            Err(e) => error(&format!("cannot start config reload thread: {e}")),
        }
    })
}

/// At submit (job write lock held): this job's A-SRPT priority on its own.
#[no_mangle]
pub extern "C" fn site_factor_p_set(job_ptr: *mut cellsched_job_t) {
    guard("site_factor_p_set", (), || {
        let Some(cfg) = current() else { return };
        if job_ptr.is_null() {
            return;
        }
        let id = unsafe { slurm_sys::shim::cellsched_job_id(job_ptr) };
        ctld::with_job(id, |job| {
            if let Some(p) = pending_of(job, &cfg) {
                job.set_site_factor(ordering::site_factor_one(&p, now_s(), &cfg, slurm_sys::NICE_OFFSET));
            }
        });
    })
}

/// Every PriorityCalcPeriod (job write lock held): re-rank all pending DL jobs.
#[no_mangle]
pub extern "C" fn site_factor_p_update() {
    guard("site_factor_p_update", (), || {
        let Some(cfg) = current() else { return };
        let mut jobs = Vec::new();
        ctld::for_each_job(true, |job| {
            if let Some(p) = pending_of(job, &cfg) {
                jobs.push(p);
            }
            ControlFlow::Continue(())
        });
        if jobs.is_empty() {
            return;
        }
        let factors: std::collections::HashMap<u32, u32> =
            ordering::site_factors(&jobs, now_s(), &cfg, slurm_sys::NICE_OFFSET).into_iter().collect();
        ctld::for_each_job(true, |job| {
            if let Some(&f) = factors.get(&job.id()) {
                if job.site_factor() != f {
                    job.set_site_factor(f);
                }
            }
            ControlFlow::Continue(())
        });
    })
}
