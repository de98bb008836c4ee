//! `job_submit()`: the Cell of a DL job at submit. Runs under slurmctld's
//! conf/job/node/part read locks with the configuration, estimator and node
//! table in force ([`crate::state`]) and the Cell rankings cached by (model,
//! batch, cluster shape) ([`cellsched_core::rank_cache`]); no file I/O. A
//! placement rewrites the request (feature, untyped GPU count, node count),
//! writes the job's record into AdminComment (with `[privacy] admin_comment
//! = "minimal"`, its private words into `spank_job_env` instead) and its
//! decision into the job environment.
use cellsched_core::job_env;
use cellsched_core::placement::{self, Outcome, SubmitRequest};
use cellsched_core::config::Config;
use cellsched_core::record;
use cellsched_slurm_ffi::ctld;
use cellsched_slurm_ffi::{cstr, guard};
use std::ffi::{c_char, c_int};
use crate::replan::PENDING_LOAD;
use crate::state::{current, error, info, node_snapshot, now_unix};


pub(crate) unsafe fn opt_str(p: *const c_char) -> Option<String> {
    cstr::borrow_nonempty(p).map(str::to_string)
}

/// Applies a placement to the job descriptor: the request rewrite, the
/// AdminComment (decision + report tags), a private record's words in
/// `spank_job_env` ([`record::PRIVATE_ENV_KEY`], overwriting any entry the
/// user set), and the decision in the job's `spank_job_env` (prolog/epilog)
/// and, for batch jobs, in the batch environment (the batch step and its
/// `srun` steps, see [`job_env::DECISION_ENV_KEYS`]).
pub(crate) unsafe fn apply(desc: &mut slurm_sys::job_desc_msg_t, p: &placement::Placement, cfg: &Config) -> Result<(), String> {
    let declared = &cfg.declared;
    let text = p.record.decision.to_admin_comment();
    let mut record = cfg.privacy.apply(p.record.clone());
    if let Some(w) = &p.rewrite {
        rewrite_request(desc, w)?;
    }
    // Declared work bounds the job (NO_VAL: no limit asked for; INFINITE is larger than any bound).
    let current = if desc.time_limit == slurm_sys::NO_VAL { 0 } else { desc.time_limit };
    if let Some(b) = placement::bounded_limit(current, record.iters, record.work_iter_s(), declared) {
        desc.time_limit = b;
        record.limit_min = Some(b);
    }
    // An elastic job is requeued to be reconfigured: Slurm must allow it
    // (unless the user said --no-requeue, which keeps it from ever being reconfigured).
    if record.elastic.is_some() && desc.requeue == slurm_sys::NO_VAL16 {
        desc.requeue = 1;
    }
    let comment = record.admin_comment_after(opt_str(desc.admin_comment).as_deref());
    if let Some(private) = record.private_text() {
        ctld::desc_env_set(desc, record::PRIVATE_ENV_KEY, &private).map_err(|e| e.to_string())?;
    }
    cstr::replace_xstr(&mut desc.admin_comment, &comment).map_err(|e| e.to_string())?;
    ctld::desc_env_set(desc, job_env::DECISION_KEY, &text).map_err(|e| e.to_string())?;
    for key in job_env::DECISION_ENV_KEYS {
        ctld::desc_environment_set(desc, key, &text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Writes a request rewrite (feature, untyped GPUs per node, node count) into the descriptor.
pub(crate) unsafe fn rewrite_request(desc: &mut slurm_sys::job_desc_msg_t, w: &placement::Rewrite) -> Result<(), String> {
    cstr::replace_xstr(&mut desc.features, &w.features).map_err(|e| e.to_string())?;
    cstr::replace_xstr(&mut desc.tres_per_node, &w.tres_per_node).map_err(|e| e.to_string())?;
    for field in [&mut desc.tres_per_job, &mut desc.tres_per_socket, &mut desc.tres_per_task] {
        if !field.is_null() {
            match placement::without_gpus(opt_str(*field).as_deref()) {
                Some(rest) => cstr::replace_xstr(field, &rest).map_err(|e| e.to_string())?,
                None => {
                    slurm_sys::shim::cellsched_xfree((*field).cast());
                    *field = std::ptr::null_mut();
                }
            }
        }
    }
    desc.min_nodes = w.nodes;
    desc.max_nodes = w.nodes;
    Ok(())
}

/// slurmctld's local time minus UTC at `t` (for `--dl-deadline` local times).
fn local_utc_offset(t: i64) -> i64 {
    let tt = t as libc::time_t;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r writes only into `tm`.
    if unsafe { libc::localtime_r(&tt, &mut tm) }.is_null() {
        return 0;
    }
    tm.tm_gmtoff as i64
}

#[no_mangle]
pub extern "C" fn job_submit(desc: *mut slurm_sys::job_desc_msg_t, _uid: u32, err_msg: *mut *mut c_char) -> c_int {
    guard("job_submit/cellsched job_submit", slurm_sys::SLURM_SUCCESS, || {
        let Some(desc) = (unsafe { desc.as_mut() }) else { return slurm_sys::SLURM_SUCCESS };
        let env: Vec<String> = ctld::desc_env(desc).into_iter().map(str::to_string).collect();
        if !job_env::has_dl_options(&env) {
            return slurm_sys::SLURM_SUCCESS; // not a DL job: untouched
        }
        let now = now_unix();
        let req = unsafe {
            SubmitRequest {
                gres_prefix: slurm_sys::compat::TRES_GRES_PREFIX,
                env,
                features: opt_str(desc.features),
                tres_per_node: opt_str(desc.tres_per_node),
                tres_per_job: opt_str(desc.tres_per_job),
                min_nodes: (desc.min_nodes != slurm_sys::NO_VAL && desc.min_nodes > 0).then_some(desc.min_nodes),
                het_component: desc.het_job_offset != slurm_sys::NO_VAL,
                array: !desc.array_inx.is_null(),
                now,
                utc_offset_s: local_utc_offset(now),
            }
        };
        let nodes = node_snapshot();
        // A panic in the placement logic must not cost the job its GPUs either.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match current() {
            Some(l) => {
                // Never wait for the re-planning thread: without its view, marginal value alone.
                let pending = PENDING_LOAD.try_lock().ok().and_then(|g| g.clone());
                placement::place_under_load(&req, &nodes, &l.cfg.placement, &l.est, Some(&l.ranks), pending.as_ref())
            }
            None => placement::fallback(&req, &nodes, "no valid cellsched.toml"),
        }))
        .unwrap_or_else(|_| placement::fallback(&req, &nodes, "internal error in placement (see slurmctld log)"));
        match outcome {
            Outcome::Stock(why) => {
                info(&format!("DL job left stock: {why}"));
                slurm_sys::SLURM_SUCCESS
            }
            Outcome::Honour(why, w) => match unsafe { rewrite_request(desc, &w) } {
                Ok(()) => {
                    info(&format!("DL job not placed ({why}): features={} {}", w.features, w.tres_per_node));
                    slurm_sys::SLURM_SUCCESS
                }
                Err(e) => reject(err_msg, &format!("cellsched: cannot write the requested Cell into the job ({e})")),
            },
            Outcome::Reject(msg) => reject(err_msg, &msg),
            Outcome::Place(p) => match unsafe { apply(desc, &p, current().as_ref().map_or(&Config::default(), |l| &l.cfg)) } {
                Ok(()) => {
                    info(&format!(
                        "placed {} job on {}{} ({})",
                        if p.pinned { "pinned" } else { "auto" },
                        p.record.decision.cell,
                        p.rewrite.as_ref().map(|w| format!(" features={} {}", w.features, w.tres_per_node)).unwrap_or_default(),
                        p.admin_comment()
                    ));
                    if let Some(msg) = &p.user_message() {
                        // With SLURM_SUCCESS, sbatch/srun print this once as `sbatch: ...`.
                        unsafe { cstr::set_err_msg(err_msg, msg) };
                    }
                    slurm_sys::SLURM_SUCCESS
                }
                // The request may be half rewritten: refuse rather than run with the wrong GPUs.
                Err(e) => {
                    error(&format!("cannot rewrite job request ({e})"));
                    reject(err_msg, &format!("cellsched: internal error writing the placement into the job ({e}); please resubmit"))
                }
            },
        }
    })
}

/// Logs and returns a refusal with `msg` shown to the user.
pub(crate) fn reject(err_msg: *mut *mut c_char, msg: &str) -> c_int {
    info(&format!("rejected submission: {msg}"));
    unsafe { cstr::set_err_msg(err_msg, msg) };
    slurm_sys::SLURM_ERROR
}

