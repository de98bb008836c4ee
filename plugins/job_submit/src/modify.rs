//! `job_modify`: users' edits of a placed DL job (`scontrol update`).
//!
//! Slurm calls it under the job write lock before applying an update. For
//! a job whose AdminComment holds a cellsched record, the edit of its
//! features, GPUs, node count, partition or time limit is judged by
//! [`placement::judge_edit`]: accepted, re-planned (the descriptor's
//! request rewritten, the record and the decision in the job's environment
//! replaced), or refused with a message naming the field (23.02+: shown
//! to the user; 22.05 has no message argument, so the user sees Slurm's
//! error for that field and the message goes to slurmctld's log).
//! Root, SlurmUser and operators are not judged; their edits that the rule
//! would have changed are logged. cellsched's own re-planning updates
//! (as root, carrying a new record) are not logged.
use crate::state::{current, error, info, node_snapshot, now_unix};
use crate::submit::opt_str;
use cellsched_core::job_env;
use cellsched_core::placement::{self, EditField, JobEdit, JobNow, ModifyContext, ModifyVerdict};
use cellsched_core::record::{self, DlRecord};
use cellsched_slurm_ffi::ctld::Job;
use cellsched_slurm_ffi::{cstr, guard};
use std::ffi::{c_char, c_int, c_void};

/// Jobs whose request an admin edited as is (not judged): re-planning's
/// reconciliation of request and record ([`placement::reconcile`]) leaves
/// them alone, so an admin's edit is never undone. In memory only.
pub(crate) static ADMIN_EDITED: std::sync::Mutex<std::collections::BTreeSet<u32>> = std::sync::Mutex::new(std::collections::BTreeSet::new());

/// True when an admin's edit of job `id` is to be left as is.
pub(crate) fn admin_edited(id: u32) -> bool {
    ADMIN_EDITED.lock().map(|s| s.contains(&id)).unwrap_or(true)
}

/// `scontrol update` fields of the descriptor judged by the rule.
unsafe fn edit_of(desc: &slurm_sys::job_desc_msg_t) -> JobEdit {
    let set = |n: u32| (n != slurm_sys::NO_VAL).then_some(n);
    let gpu_tres = [desc.tres_per_job, desc.tres_per_socket, desc.tres_per_task]
        .into_iter()
        .filter_map(|p| opt_str(p))
        .find(|t| placement::gpu_request(Some(t)).is_some());
    JobEdit {
        features: cstr::borrow_str(desc.features).map(str::to_string),
        tres_per_node: cstr::borrow_str(desc.tres_per_node).map(str::to_string),
        other_gpu_tres: gpu_tres,
        min_nodes: set(desc.min_nodes),
        max_nodes: set(desc.max_nodes),
        partition: opt_str(desc.partition),
        time_limit_min: set(desc.time_limit).map(|t| if t == slurm_sys::INFINITE { u32::MAX } else { t }),
    }
}

/// Root, SlurmUser or an operator (slurmctld's own `validate_operator`, found at run time).
fn is_admin(uid: u32) -> bool {
    if uid == 0 {
        return true;
    }
    // SAFETY: dlsym by NUL-terminated name; the symbol is slurmctld's `bool validate_operator(uid_t)`.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"validate_operator".as_ptr()) };
    if p.is_null() {
        return false;
    }
    let f: extern "C" fn(libc::uid_t) -> bool = unsafe { std::mem::transmute(p) };
    f(uid)
}

/// Slurm's error code for a refused field (what a 22.05 user sees).
fn errno_of(field: EditField) -> c_int {
    (match field {
        EditField::Features => slurm_sys::ESLURM_INVALID_FEATURE,
        EditField::Gres => slurm_sys::ESLURM_INVALID_GRES,
        EditField::NodeCount => slurm_sys::ESLURM_INVALID_NODE_COUNT,
        EditField::Partition => slurm_sys::ESLURM_INVALID_PARTITION_NAME,
        EditField::TimeLimit => slurm_sys::ESLURM_INVALID_TIME_LIMIT,
    }) as c_int
}

/// Judges an update of a DL job (the 23.02+ form; 22.05 passes no `err_msg`, see [`slurm_sys::compat::JOB_MODIFY_HAS_ERR_MSG`]).
#[no_mangle]
pub extern "C" fn job_modify(desc: *mut slurm_sys::job_desc_msg_t, job_ptr: *mut c_void, uid: u32, err_msg: *mut *mut c_char) -> c_int {
    guard("job_submit/cellsched job_modify", slurm_sys::SLURM_SUCCESS, || {
        let err_msg = if slurm_sys::compat::JOB_MODIFY_HAS_ERR_MSG { err_msg } else { std::ptr::null_mut() };
        let Some(desc) = (unsafe { desc.as_mut() }) else { return slurm_sys::SLURM_SUCCESS };
        // SAFETY: Slurm passes a live job record and holds the job write lock during job_modify.
        let Some(mut job) = (unsafe { Job::from_raw(job_ptr) }) else { return slurm_sys::SLURM_SUCCESS };
        let Some(comment) = job.admin_comment().filter(|c| c.contains(record::PREFIX)) else { return slurm_sys::SLURM_SUCCESS };
        // The CELLSCHED_DL_* options and a private record's entry.
        let env: Vec<String> = job.env().filter(|e| e.contains("CELLSCHED_")).map(str::to_string).collect();
        let Some(rec) = DlRecord::of_job(comment, &env) else { return slurm_sys::SLURM_SUCCESS };
        let edit = unsafe { edit_of(desc) };
        if edit.is_empty() {
            return slurm_sys::SLURM_SUCCESS;
        }
        let admin = is_admin(uid);
        // cellsched's own re-planning update (as root, with the new record): nothing to judge.
        if admin && unsafe { cstr::borrow_str(desc.admin_comment) }.is_some_and(|c| c.contains(record::PREFIX)) {
            return slurm_sys::SLURM_SUCCESS;
        }
        let loaded = current();
        let nodes = node_snapshot();
        let declared = loaded.as_ref().map(|l| l.cfg.declared.clone()).unwrap_or_default();
        let (features, partition) = (job.features().map(str::to_string), job.partition().map(str::to_string));
        let now = JobNow { record: &rec, env: &env, features: features.as_deref(), partition: partition.as_deref(), pending: job.is_pending() };
        let ctx = ModifyContext {
            nodes: &nodes,
            est: loaded.as_ref().map(|l| &l.est),
            declared: &declared,
            gres_prefix: slurm_sys::compat::TRES_GRES_PREFIX,
            now: now_unix(),
        };
        let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| placement::judge_edit(&now, &edit, &ctx))).unwrap_or_else(|_| {
            ModifyVerdict::Refuse { field: EditField::Features, message: "cellsched: internal error judging the edit (see slurmctld log); the job is unchanged".into() }
        });
        let id = job.id();
        if admin {
            if verdict != ModifyVerdict::Accept {
                let what = match &verdict {
                    ModifyVerdict::Refuse { message, .. } => format!("would have refused it: {message}"),
                    ModifyVerdict::Replan(x) => format!("would have re-planned it on {}", x.record.decision.cell),
                    ModifyVerdict::Accept => unreachable!(),
                };
                info(&format!("JobId={id}: admin override by uid {uid}: edit '{edit}' applied as is (cellsched {what}); its record still says {}", rec.decision.cell));
                if let Ok(mut s) = ADMIN_EDITED.lock() {
                    s.insert(id);
                }
            }
            return slurm_sys::SLURM_SUCCESS;
        }
        match verdict {
            ModifyVerdict::Accept => slurm_sys::SLURM_SUCCESS,
            ModifyVerdict::Refuse { field, message } => {
                info(&format!("JobId={id}: refused the edit '{edit}' by uid {uid}: {message}"));
                unsafe { cstr::set_err_msg(err_msg, &message) };
                errno_of(field)
            }
            ModifyVerdict::Replan(x) => {
                let written = unsafe { write_request(desc, &x) }.and_then(|()| {
                    let text = x.record.decision.to_admin_comment();
                    job.set_admin_comment(&x.record.admin_comment_after(job.admin_comment())).map_err(|e| e.to_string())?;
                    job.env_set(job_env::DECISION_KEY, &text).map_err(|e| e.to_string())?;
                    job_env::DECISION_ENV_KEYS.iter().try_for_each(|k| job.env_sup_set(k, &text)).map_err(|e| e.to_string())
                });
                match written {
                    Ok(()) => {
                        info(&format!(
                            "JobId={id}: edit '{edit}' by uid {uid} re-planned from {} to {} on {} node(s) ({})",
                            rec.decision.cell, x.record.decision.cell, x.rewrite.nodes, x.record.decision.to_admin_comment()
                        ));
                        slurm_sys::SLURM_SUCCESS
                    }
                    Err(e) => {
                        error(&format!("JobId={id}: cannot write the re-planned edit ({e}); refused"));
                        unsafe { cstr::set_err_msg(err_msg, &format!("cellsched: internal error writing the re-planned request ({e}); the job is unchanged")) };
                        slurm_sys::SLURM_ERROR
                    }
                }
            }
        }
    })
}

/// Writes the re-planned request (feature, untyped GPUs per node, node count, time limit) into the update.
unsafe fn write_request(desc: &mut slurm_sys::job_desc_msg_t, x: &placement::Replanned) -> Result<(), String> {
    cstr::replace_xstr(&mut desc.features, &x.rewrite.features).map_err(|e| e.to_string())?;
    cstr::replace_xstr(&mut desc.tres_per_node, &x.rewrite.tres_per_node).map_err(|e| e.to_string())?;
    desc.min_nodes = x.rewrite.nodes;
    desc.max_nodes = x.rewrite.nodes;
    if let Some(t) = x.time_limit_min {
        desc.time_limit = t;
    }
    Ok(())
}
