//! Exported plugin symbols. `site_factor_p_set`/`_update` run under
//! slurmctld's job write lock: they only parse strings already in memory,
//! query the fitted predictor and sort. The config file is read at `init`
//! and, on reconfigure, by a short background thread; the job history is
//! loaded and the iteration predictor fitted by a background thread started
//! at `init` and on reconfigure (no file I/O under the lock).
//!
//! After a config error the last good configuration stays in force for
//! every job (one consistent order; the error is logged); with no good
//! configuration yet, or `ordering.enabled = false`, site factors are stock,
//! and pending DL jobs ranked earlier get the stock factor back at the next update.
use crate::ordering::{self, JobFields, OrderingData};
use crate::prediction::Predictions;
use cellsched_core::asrpt::PendingJob;
use cellsched_core::config::{resolve_config_path, Config, OrderingConfig, CONFIG_ENV};
use cellsched_core::model::ModelCatalog;
use cellsched_plugin_common::ctld::{self, Job};
use cellsched_plugin_common::{guard, log, version};
use slurm_sys::shim::cellsched_job_t;
use std::ffi::c_int;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

cellsched_plugin_common::plugin_identity!(name: "cellsched A-SRPT site factor", kind: "site_factor/cellsched");

/// The ordering settings in force; `None` = stock behaviour (no good config yet, or ordering disabled).
static ORDERING: RwLock<Option<Arc<OrderingConfig>>> = RwLock::new(None);
/// Set when ordering was switched off: the next update puts the stock factor back on pending DL jobs.
static RESET_TO_STOCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The iteration predictor fitted on the history; `None` until loaded or without history.
static PREDICTIONS: RwLock<Option<Arc<Predictions>>> = RwLock::new(None);
/// The built-in model catalog (names and layer counts), parsed at `init`.
static MODELS: OnceLock<ModelCatalog> = OnceLock::new();
/// The background (re)load thread: config on reconfigure, history fit.
static RELOAD: Mutex<Reload> = Mutex::new(Reload { handle: None, running: false, again: false });

/// State of the reload thread; a reconfigure while it runs makes it run once more.
struct Reload {
    handle: Option<JoinHandle<()>>,
    running: bool,
    again: bool,
}

fn info(msg: &str) {
    log::info(&format!("site_factor/cellsched: {msg}"));
}

fn error(msg: &str) {
    log::error(&format!("site_factor/cellsched: {msg}"));
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Reads the config file (outside slurmctld's locks) and installs it;
/// returns the history file to fit the predictor on (`Some(None)`: none),
/// or `None` after a config error (the last good state stays, predictor included).
fn load_config() -> Option<Option<PathBuf>> {
    let (params, slurm_conf) = crate::slurm_conf::conf_paths();
    let env = std::env::var(CONFIG_ENV).ok();
    let path = resolve_config_path(params.as_deref(), env.as_deref(), slurm_conf.as_deref());
    let (new, history) = match Config::load(&path) {
        Ok(c) if c.ordering.enabled => {
            info(&format!(
                "loaded {}: A-SRPT ordering on (aging bound {} s, max site factor {})",
                path.display(),
                c.ordering.aging_bound_s,
                c.ordering.site_factor_max
            ));
            (Some(Arc::new(c.ordering)), c.estimator.history)
        }
        Ok(_) => {
            info(&format!("{}: ordering.enabled = false; site factors are stock", path.display()));
            (None, None)
        }
        Err(e) => {
            let last = current();
            error(&format!(
                "config error: {e}; {} until it is fixed and slurmctld reconfigured",
                if last.is_some() { "the last good ordering configuration stays in force" } else { "site factors are stock" }
            ));
            // Keep the predictor of the last good configuration too: return no new history.
            return None;
        }
    };
    let mut w = ORDERING.write().unwrap_or_else(|e| e.into_inner());
    if w.is_some() && new.is_none() {
        RESET_TO_STOCK.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    *w = new;
    drop(w);
    Some(history)
}

/// Loads the job history and fits the iteration predictor (background
/// thread only: file I/O, NSS lookups and the fit take time), then installs it.
fn load_predictions(history: Option<Option<PathBuf>>) {
    let Some(history) = history else { return };
    let new = history.and_then(|path| {
        let t = Instant::now();
        match Predictions::load(&path) {
            Ok(p) if p.is_trained() => {
                info(&format!(
                    "fitted the iteration predictor on {} jobs of {} in {:.1} s; jobs without --dl-iters use its predictions",
                    p.n_train(),
                    path.display(),
                    t.elapsed().as_secs_f64()
                ));
                Some(Arc::new(p))
            }
            Ok(p) => {
                info(&format!(
                    "{}: {} jobs are too few to fit the iteration predictor; jobs without --dl-iters use their time limit",
                    path.display(),
                    p.n_train()
                ));
                None
            }
            Err(e) => {
                error(&format!("estimator.history: {e}; jobs without --dl-iters use their time limit"));
                None
            }
        }
    });
    *PREDICTIONS.write().unwrap_or_else(|e| e.into_inner()) = new;
}

/// Runs `first` on the reload thread, then a full reload (config and
/// predictor) for every reconfigure that came while it ran. If the thread
/// is running already, only asks it for one more full reload.
fn spawn_reload(first: impl FnOnce() + Send + 'static) {
    let mut r = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
    if r.running {
        r.again = true;
        return;
    }
    if let Some(h) = r.handle.take() {
        let _ = h.join(); // finished: it cleared `running` as its last step
    }
    let run = move || {
        guard("site_factor/cellsched reload", (), first);
        loop {
            let mut r = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
            if !r.again {
                r.running = false;
                return;
            }
            r.again = false;
            drop(r);
            guard("site_factor/cellsched reload", (), || load_predictions(load_config()));
        }
    };
    match std::thread::Builder::new().name("cellsched-sf-load".into()).spawn(run) {
        Ok(h) => {
            r.handle = Some(h);
            r.running = true;
        }
        Err(e) => error(&format!("cannot start the reload thread: {e}")),
    }
}

fn models() -> &'static ModelCatalog {
    MODELS.get_or_init(ModelCatalog::builtin)
}

fn current() -> Option<Arc<OrderingConfig>> {
    ORDERING.read().unwrap_or_else(|e| e.into_inner()).clone()
}

fn predictions() -> Option<Arc<Predictions>> {
    PREDICTIONS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The A-SRPT view of a job record, `None` if cellsched did not place it.
fn pending_of(job: &Job<'_>, cfg: &OrderingConfig, data: &OrderingData<'_>) -> Option<PendingJob> {
    let comment = job.admin_comment();
    // Cheap pre-check before copying the environment.
    if !comment.is_some_and(|c| c.contains("cellsched:")) {
        return None;
    }
    let limit = job.time_limit_min();
    let f = JobFields {
        id: job.id(),
        user_id: job.user_id(),
        submit_time_s: job.submit_time(),
        admin_comment: comment,
        env: job.env().map(str::to_string).collect(),
        time_limit_min: (limit != slurm_sys::NO_VAL && limit != slurm_sys::INFINITE && limit > 0).then_some(limit),
    };
    ordering::pending_job(&f, cfg, data)
}

#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard("site_factor/cellsched init", slurm_sys::SLURM_ERROR, || {
        if let Err(e) = version::check_running_slurm() {
            error(&format!("{e}; refusing to load"));
            return slurm_sys::SLURM_ERROR;
        }
        models();
        let history = load_config();
        spawn_reload(move || load_predictions(history));
        slurm_sys::SLURM_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("site_factor/cellsched fini", slurm_sys::SLURM_SUCCESS, || {
        let handle = {
            let mut r = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
            r.again = false;
            r.handle.take()
        };
        if let Some(h) = handle {
            let _ = h.join();
        }
        *ORDERING.write().unwrap_or_else(|e| e.into_inner()) = None;
        *PREDICTIONS.write().unwrap_or_else(|e| e.into_inner()) = None;
        slurm_sys::SLURM_SUCCESS
    })
}

/// Called under slurmctld's write locks: the file is re-read and the
/// predictor refitted by a thread.
#[no_mangle]
pub extern "C" fn site_factor_p_reconfig() {
    guard("site_factor_p_reconfig", (), || spawn_reload(|| load_predictions(load_config())))
}

/// Puts the stock site factor back on every pending job cellsched placed (job write lock held).
fn reset_to_stock() {
    let mut n = 0;
    ctld::for_each_job(true, |job| {
        if job.admin_comment().is_some_and(|c| c.contains("cellsched:")) && job.site_factor() != slurm_sys::NICE_OFFSET {
            job.set_site_factor(slurm_sys::NICE_OFFSET);
            n += 1;
        }
        ControlFlow::Continue(())
    });
    info(&format!("ordering off: {n} pending DL jobs got the stock site factor back"));
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
        let preds = predictions();
        let data = OrderingData { models: models(), predictions: preds.as_deref() };
        ctld::with_job(id, |job| {
            if let Some(p) = pending_of(job, &cfg, &data) {
                job.set_site_factor(ordering::site_factor_one(&p, now_s(), &cfg, slurm_sys::NICE_OFFSET));
            }
        });
    })
}

/// Every PriorityCalcPeriod (job write lock held): re-rank all pending DL jobs.
#[no_mangle]
pub extern "C" fn site_factor_p_update() {
    guard("site_factor_p_update", (), || {
        let Some(cfg) = current() else {
            if RESET_TO_STOCK.swap(false, std::sync::atomic::Ordering::SeqCst) {
                reset_to_stock();
            }
            return;
        };
        let started = Instant::now();
        let preds = predictions();
        let data = OrderingData { models: models(), predictions: preds.as_deref() };
        let mut jobs = Vec::new();
        ctld::for_each_job(true, |job| {
            if let Some(p) = pending_of(job, &cfg, &data) {
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
        // The cost of this call under the job write lock (shown with `scontrol setdebug debug`).
        log::debug(&format!(
            "site_factor/cellsched: update ranked {} pending DL jobs in {} us",
            factors.len(),
            started.elapsed().as_micros()
        ));
    })
}
