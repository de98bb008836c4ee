//! `site_factor/cellsched_smoke`: a throwaway site_factor plugin proving that
//! plugins built on cellsched-slurm-ffi load into slurmctld, log through
//! Slurm, read job fields through the slurm-sys shim, and do not break client
//! commands. Install as `site_factor_cellsched_smoke.so` in PluginDir.
//!
//! A background thread (as job_submit's re-planner will have) takes the
//! slurmctld write lock every 2 s, and for each pending job named
//! `cs-update*` without an AdminComment runs `update_job` (AdminComment),
//! writes `CELLSCHED_DECISION` into its `spank_job_env`, and reads the node table.
use cellsched_slurm_ffi::ctld::{self, Job, JobUpdate, LockKind};
use cellsched_slurm_ffi::slurm_sys::{NICE_OFFSET, SLURM_ERROR, SLURM_SUCCESS};
use cellsched_slurm_ffi::{guard, log, plugin_identity, version};
use std::ops::ControlFlow;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);
static DONE: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);

/// One pass of the updater (runs holding the write lock).
fn update_pass() -> Vec<String> {
    let mut todo = Vec::new();
    ctld::for_each_job(true, |job: &mut Job<'_>| {
        if job.name().is_some_and(|n| n.starts_with("cs-update")) && job.admin_comment().is_none() {
            todo.push(job.id());
        }
        ControlFlow::Continue(())
    });
    let mut out = Vec::new();
    for id in todo {
        let text = format!("cellsched-smoke: updated JobId={id}");
        let upd = JobUpdate { job_id: id, admin_comment: Some(text.clone()), min_nodes: Some(1), ..Default::default() };
        let r = ctld::update_job(&upd);
        let env = ctld::with_job(id, |j| j.env_set("CELLSCHED_DECISION", "cell=smoke"));
        let after = ctld::with_job(id, |j| (j.admin_comment().map(str::to_string), j.env_get("CELLSCHED_DECISION").map(str::to_string)));
        out.push(format!("JobId={id} update_job={r:?} env_set={env:?} now admin_comment={:?} env={:?}", after.as_ref().map(|a| &a.0), after.as_ref().map(|a| &a.1)));
        // A bad update must come back as a Slurm error, not a crash.
        let bad = ctld::update_job(&JobUpdate { job_id: id, gres: Some("nosuchgres:3".into()), ..Default::default() });
        out.push(format!("JobId={id} bad gres update -> {bad:?}"));
    }
    if !out.is_empty() {
        out.push(format!("nodes: {:?}", ctld::nodes()));
    }
    out
}

fn updater(done: mpsc::Sender<()>) {
    while !STOP.load(Ordering::Relaxed) {
        match ctld::with_lock(LockKind::Write, || guard("update_pass", Vec::new(), update_pass)) {
            Ok(lines) => lines.iter().for_each(|l| log::info(&format!("site_factor/cellsched_smoke: {l}"))),
            Err(e) => {
                log::error(&format!("site_factor/cellsched_smoke: updater stops: {e}"));
                break;
            }
        }
        for _ in 0..20 {
            if STOP.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let _ = done.send(());
}

plugin_identity!(name: "cellsched smoke-test site factor", kind: "site_factor/cellsched_smoke");

/// Plugin load: checks the running Slurm and logs.
#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard("init", SLURM_ERROR, || {
        if let Err(e) = version::check_running_slurm() {
            log::error(&format!("site_factor/cellsched_smoke: {e}"));
            return SLURM_ERROR;
        }
        log::info(&format!(
            "site_factor/cellsched_smoke: loaded (built for Slurm {}, in_slurmctld={})",
            cellsched_slurm_ffi::slurm_sys::RELEASE,
            ctld::in_slurmctld()
        ));
        if ctld::in_slurmctld() {
            let (tx, rx) = mpsc::channel();
            STOP.store(false, Ordering::Relaxed);
            std::thread::Builder::new()
                .name("cs_smoke".into())
                .spawn(move || updater(tx))
                .map_err(|e| log::error(&format!("site_factor/cellsched_smoke: no updater thread: {e}")))
                .ok();
            *DONE.lock().unwrap_or_else(|p| p.into_inner()) = Some(rx);
        }
        SLURM_SUCCESS
    })
}

/// Plugin unload.
#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("fini", SLURM_SUCCESS, || {
        STOP.store(true, Ordering::Relaxed);
        if let Some(rx) = DONE.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if rx.recv_timeout(Duration::from_secs(5)).is_err() {
                log::error("site_factor/cellsched_smoke: updater did not stop within 5 s");
            }
        }
        log::info("site_factor/cellsched_smoke: unloading");
        SLURM_SUCCESS
    })
}

/// New or changed job: reads fields through the shim, sets a neutral factor.
///
/// # Safety
/// Called by slurmctld with a live `job_record_t *`, holding the job write lock.
#[no_mangle]
pub unsafe extern "C" fn site_factor_p_set(job_ptr: *mut c_void) {
    guard("site_factor_p_set", (), || {
        let Some(mut job) = (unsafe { Job::from_raw(job_ptr) }) else { return };
        log::info(&format!(
            "site_factor/cellsched_smoke: set JobId={} uid={} name={:?} tres_per_node={:?} pending={}",
            job.id(),
            job.user_id(),
            job.name().unwrap_or(""),
            job.tres_per_node().unwrap_or(""),
            job.is_pending()
        ));
        job.set_site_factor(NICE_OFFSET);
    })
}

/// Periodic update (called holding the job write lock): counts pending jobs.
#[no_mangle]
pub extern "C" fn site_factor_p_update() {
    guard("site_factor_p_update", (), || {
        let mut ids = Vec::new();
        let n = ctld::for_each_job(true, |job: &mut Job<'_>| {
            ids.push(job.id());
            ControlFlow::Continue(())
        });
        log::verbose(&format!("site_factor/cellsched_smoke: update saw {n:?} pending jobs {ids:?}"));
    })
}

/// Reconfiguration (22.05 only).
#[no_mangle]
pub extern "C" fn site_factor_p_reconfig() {
    guard("site_factor_p_reconfig", (), || log::info("site_factor/cellsched_smoke: reconfig"))
}
