//! Remote context (slurmstepd), `task_init`: runs in each task as the job's
//! user once the GPUs are known. Reads the options (forwarded option values,
//! or the `CELLSCHED_DL_*` / `SPANK_*` / `SLURM_SPANK_*` copies in the job
//! environment, which is all that survives `--export=NONE`), chooses the plan
//! for the granted GPUs, writes the plan file and exports the variables.
//! Jobs without DL options are left untouched.
//!
//! Where slurmctld's decision comes from (`CELLSCHED_PLAN_SOURCE=decision`):
//! job_submit/cellsched puts `CELLSCHED_DECISION` and
//! `SLURM_SPANK_CELLSCHED_DECISION` into a batch job's environment at submit
//! (and into `env_sup` when it re-plans a pending job, which slurmctld adds
//! at launch), so the batch step and the `srun` steps inside it (which
//! inherit the environment; `--export=NONE` keeps the `SLURM_SPANK_` copy)
//! see it. A direct `srun` allocation gets no environment from slurmctld at
//! submit (22.05 passes `spank_job_env` only to prolog/epilog), so srun's
//! local side fetches the decision from the job's AdminComment after the
//! allocation (`local::user_init`, one RPC per srun) and exports both names.
//! Fallback, when that fails (slurmctld unreachable, AdminComment hidden by
//! `PrivateData`, job_submit plugin not loaded) or for steps granted another
//! GPU count than the decision's: the tasks estimate the plan here for the
//! GPUs granted (`CELLSCHED_PLAN_SOURCE=estimated`; GPU type from the typed
//! request or the node's Slurm configuration), which can differ from AdminComment.
use crate::args::PluginArgs;
use crate::env::{gpus_on_node, job_num_nodes, task_env, StepInfo, BATCH_STEP_ID, RANK_KEYS};
use crate::error::SpankError;
use crate::ffi::{self, item, spank_t};
use crate::options::{given, given_keys};
use crate::plan::{choose, gres_gpu_type, PlanInputs};
use crate::plan_file::{plan_path, write_private};
use cellsched_core::config::{resolve_config_path, Config};
use cellsched_core::estimator::Estimator;
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;
use cellsched_core::options::{DlKey, DlOptions};
use cellsched_core::profile_db::ProfileDb;
use cellsched_core::Decision;

/// Prefixes under which a job-environment key may arrive: plain (sbatch
/// `--export=ALL`), `SPANK_` (slurmctld's spank_job_env copy) and
/// `SLURM_SPANK_` (sbatch's copy, kept by `--export=NONE`).
const PREFIXES: [&str; 3] = ["", "SPANK_", "SLURM_SPANK_"];

/// Looks `key` up under every prefix in [`PREFIXES`].
pub fn lookup_prefixed(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    PREFIXES.iter().find_map(|p| env(&format!("{p}{key}")))
}

/// Options forwarded by Slurm (callbacks), completed from the job env.
pub fn job_options(forwarded: &DlOptions, given: &[DlKey], env: &dyn Fn(&str) -> Option<String>) -> Result<DlOptions, SpankError> {
    let mut o = forwarded.clone();
    for key in DlKey::ALL.into_iter().filter(|k| !given.contains(k)) {
        for p in PREFIXES {
            let name = format!("{p}{}", key.env_key());
            if let Some(v) = env(&name) {
                o.parse_option(&name, &v)?;
                break;
            }
        }
    }
    Ok(o)
}

/// The decision slurmctld recorded, if it reached the job environment.
pub fn decision(env: &dyn Fn(&str) -> Option<String>) -> Option<Decision> {
    lookup_prefixed(env, "CELLSCHED_DECISION").and_then(|t| Decision::parse_admin_comment(&t))
}

/// The step's shape from SPANK items and the job environment.
fn step_info(sp: spank_t, env: &dyn Fn(&str) -> Option<String>) -> Result<StepInfo, SpankError> {
    let get = |it, what: &'static str| {
        ffi::get_u32(sp, it).ok_or(SpankError::Spank { call: "spank_get_item", msg: format!("{what} unavailable") })
    };
    let step_id = get(item::S_JOB_STEPID, "step id")?;
    let batch = step_id == BATCH_STEP_ID;
    let nnodes = if batch { job_num_nodes(env).unwrap_or(1) } else { get(item::S_JOB_NNODES, "node count")? };
    let first = if batch { env("SLURM_JOB_NODELIST") } else { env("SLURM_STEP_NODELIST").or_else(|| env("SLURM_JOB_NODELIST")) };
    Ok(StepInfo {
        job_id: get(item::S_JOB_ID, "job id")?,
        step_id,
        nnodes,
        node_id: get(item::S_JOB_NODEID, "node id").unwrap_or(0),
        gpus_on_node: gpus_on_node(env).unwrap_or(0),
        local_tasks: get(item::S_JOB_LOCAL_TASK_COUNT, "local task count").unwrap_or(1),
        total_tasks: get(item::S_JOB_TOTAL_TASK_COUNT, "task count").unwrap_or(1),
        local_task_id: get(item::S_TASK_ID, "task id").unwrap_or(0),
        global_task_id: get(item::S_TASK_GLOBAL_ID, "global task id").unwrap_or(0),
        first_node: first,
    })
}

/// The slurm.conf slurmd runs with. slurmd exports `SLURM_CONF` to
/// slurmstepd (also when started with `-f FILE`, and pointing into its
/// conf-cache when configless), and slurmstepd copies it into the task
/// environment; a stock install's path is the last resort.
fn slurm_conf_path(env: &dyn Fn(&str) -> Option<String>) -> std::path::PathBuf {
    std::env::var("SLURM_CONF")
        .ok()
        .or_else(|| env("SLURM_CONF"))
        .filter(|p| p.starts_with('/') && !p.split('/').any(|c| c == ".."))
        .unwrap_or_else(|| "/etc/slurm/slurm.conf".into())
        .into()
}

/// This node's GPU type from the Slurm configuration: gres.conf beside
/// slurm.conf (`Type=`), else slurm.conf's `NodeName=... Gres=gpu:TYPE:N`
/// (gres.conf with only `AutoDetect=`). Used when no decision, pinned Cell
/// or typed request in the task environment names the type (a direct
/// `srun --gpus-per-node=a100:4`: srun does not export its GPU options to tasks).
fn node_gpu_type(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let node = env("SLURMD_NODENAME")?;
    let conf = slurm_conf_path(env);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).ok();
    conf.parent()
        .and_then(|d| read(&d.join("gres.conf")))
        .and_then(|t| crate::plan::gres_conf_gpu_type(&t, &node))
        .or_else(|| read(&conf).and_then(|t| crate::plan::slurm_conf_gpu_type(&t, &node)))
}

/// The estimator with the site's GPU overrides and profile DB when the
/// cellsched.toml is readable; built-in numbers otherwise.
fn estimator(args: &PluginArgs) -> Estimator {
    let conf_path = resolve_config_path(
        args.config.as_deref().and_then(|p| p.to_str()),
        None,
        std::env::var("SLURM_CONF").ok().as_deref(),
    );
    let mut gpus = GpuCatalog::builtin();
    let mut db = None;
    match Config::load(&conf_path) {
        Ok(cfg) => {
            if let Some(p) = &cfg.estimator.gpu_catalog {
                match std::fs::read_to_string(p).map_err(|e| e.to_string()).and_then(|t| {
                    GpuCatalog::with_overrides_toml(&t).map_err(|e| e.to_string())
                }) {
                    Ok(c) => gpus = c,
                    Err(e) => ffi::log(ffi::Level::Error, &format!("GPU catalog {}: {e}; using built-in", p.display())),
                }
            }
            if let Some(p) = &cfg.estimator.profile_db {
                match ProfileDb::load_csv(p) {
                    Ok(d) => db = Some(d),
                    Err(e) => ffi::log(ffi::Level::Verbose, &format!("profile DB: {e}")),
                }
            }
        }
        Err(e) => ffi::log(ffi::Level::Debug, &format!("config: {e}; using built-in catalogs")),
    }
    let est = Estimator::new(gpus, ModelCatalog::builtin());
    match db {
        Some(d) => est.with_db(d),
        None => est,
    }
}

/// `slurm_spank_task_init`: see the module doc. Errors are logged by the
/// caller and also shown to the job as `CELLSCHED_ERROR`; the task still runs.
pub fn task_init(sp: spank_t, args: &PluginArgs) -> Result<(), SpankError> {
    let env = |k: &str| ffi::getenv(sp, k);
    let forwarded = given().clone();
    let opts = match job_options(&forwarded, &given_keys(), &env) {
        Ok(o) => o,
        Err(e) => return Err(fail(sp, e)),
    };
    if opts.is_empty() {
        return Ok(());
    }
    let result = (|| {
        opts.check_consistency()?;
        let model = ModelCatalog::builtin().resolve(opts.model.as_deref().unwrap_or_default())?;
        let step = step_info(sp, &env)?;
        let d = decision(&env);
        let inputs = PlanInputs {
            opts: &opts,
            model: &model,
            decision: d.as_ref(),
            step: &step,
            gres_gpu_type: gres_gpu_type(&env).or_else(|| node_gpu_type(&env)),
            args,
        };
        let plan = choose(&inputs, &estimator(args))?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let (dir, file) = plan_path(&args.plan_dir, uid, step.job_id, &step.step_label());
        let file_ok = match write_private(&dir, &file, &plan.to_json(), uid) {
            Ok(()) => true,
            Err(e) => {
                ffi::log(ffi::Level::Error, &e.to_string());
                false
            }
        };
        for k in RANK_KEYS {
            ffi::unsetenv(sp, k);
        }
        let file_text = file.to_string_lossy().into_owned();
        for (k, v) in task_env(&plan, &step, file_ok.then_some(file_text.as_str())) {
            ffi::setenv(sp, k, &v, true).map_err(|msg| SpankError::Spank { call: "spank_setenv", msg })?;
        }
        ffi::log(
            ffi::Level::Verbose,
            &format!("job {} step {}: {} plan {} ({})", step.job_id, plan.step, plan.cell, plan.plan_text, plan.source),
        );
        Ok::<(), SpankError>(())
    })();
    result.map_err(|e| fail(sp, e))
}

/// Shows the error to the job as `CELLSCHED_ERROR` and returns it.
fn fail(sp: spank_t, e: SpankError) -> SpankError {
    let msg: String = e.to_string().chars().filter(|c| !c.is_control()).take(512).collect();
    let _ = ffi::setenv(sp, "CELLSCHED_ERROR", &msg, true);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn export_none_copies_are_read() {
        let e = env(&[
            ("SLURM_SPANK_CELLSCHED_DL_MODEL", "gpt2"),
            ("SLURM_SPANK_CELLSCHED_DL_BATCH", "32"),
            ("SPANK_CELLSCHED_DL_ITERS", "10"),
            ("SLURM_SPANK_CELLSCHED_DECISION", "cellsched: cell=a100x8x1 nodes=2 dp=8 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.1 src=datasheet"),
        ]);
        let look = |k: &str| e.get(k).cloned();
        let o = job_options(&DlOptions::default(), &[], &look).unwrap();
        assert_eq!((o.model.as_deref(), o.batch, o.iters), (Some("gpt2"), Some(32), Some(10)));
        let d = decision(&look).unwrap();
        assert_eq!((d.cell.gpus, d.nodes, d.plan.dp), (8, 2, 8));
    }

    #[test]
    fn forwarded_options_win_and_empty_env_means_no_dl_job() {
        let mut fwd = DlOptions::default();
        fwd.parse_option("dl-batch", "8").unwrap();
        let e = env(&[("CELLSCHED_DL_BATCH", "64"), ("CELLSCHED_DL_MODEL", "gpt2")]);
        let o = job_options(&fwd, &[DlKey::Batch], &|k: &str| e.get(k).cloned()).unwrap();
        assert_eq!((o.batch, o.model.as_deref()), (Some(8), Some("gpt2")));
        let none = job_options(&DlOptions::default(), &[], &|_: &str| None).unwrap();
        assert!(none.is_empty());
        assert!(decision(&|_: &str| None).is_none());
    }
}
