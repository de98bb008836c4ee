//! Remote context (slurmstepd). Three callbacks:
//! - [`post_opt`] (`init_post_opt`, once per step and node, as root before
//!   privileges drop): creates the step's plan directory for the job's user
//!   (see [`crate::plan_file`]), fetches the job's record (decision, model,
//!   batch) from its AdminComment, the only copy a user cannot write, and builds the step's
//!   estimator once for all its tasks ([`crate::step_estimator`]).
//! - [`task_init`] (each task, as the job's user, once the GPUs are known):
//!   reads the options (forwarded option values, or the `CELLSCHED_DL_*` /
//!   `SPANK_*` / `SLURM_SPANK_*` copies in the job environment, which is all
//!   that survives `--export=NONE`), chooses the plan for the granted GPUs,
//!   writes the plan file and exports the variables (after clearing those
//!   inherited from the enclosing step); whatever goes wrong is also shown
//!   to the job as `CELLSCHED_ERROR`, and a step whose own `--dl-*` values
//!   its grant cannot honour fails ([`SpankError::StepRefused`]).
//! - [`exit`] (`slurm_spank_exit`, as root): removes the step's plan directory;
//!   [`job_epilog`] removes what a killed step left.
//!
//! Jobs without DL options are left untouched.
//!
//! Trust: a `CELLSCHED_DECISION` in the job environment is only a hint the
//! user could have edited (e.g. `export CELLSCHED_DECISION=... ; srun`). A
//! decision is labelled `decision` only when it comes from the job's
//! AdminComment, read by slurmstepd as root with one `slurm_load_job` RPC per
//! DL step and node; when that RPC fails the tasks estimate their plan
//! (`CELLSCHED_PLAN_SOURCE=estimated`).
//!
//! The same AdminComment read serves batch steps, their `srun` steps and
//! direct `srun` allocations alike (job_submit's copies of the decision in
//! the batch environment and `env_sup` are only compared with it).
//! Fallback, when the read fails (slurmctld unreachable, job_submit plugin
//! not loaded), for steps granted another GPU count than the decision's, or
//! for steps running another model or batch than the one recorded with it:
//! the tasks estimate the plan here for the GPUs granted
//! (`CELLSCHED_PLAN_SOURCE=estimated`; GPU type from the typed request or the
//! node's Slurm configuration), which can differ from AdminComment.
use crate::args::PluginArgs;
use crate::env::{gpus_on_node, job_num_nodes, task_env, StepInfo, BATCH_STEP_ID, PLAN_KEYS};
use crate::error::SpankError;
use crate::spank::{self, Item, Spank};
use crate::options::{given, given_keys, with_env};
use cellsched_core::options::{CellChoice, DlOptions};
use crate::plan::{choose, gres_gpu_type, PlanInputs};
use crate::plan_file::{plan_path, prepare_plan_dir, prepare_step_dir, remove_job_dirs, remove_step_dir, write_private};
use cellsched_core::config::{resolve_config_path, Config};
use cellsched_core::estimator::Estimator;
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::job_env;
use cellsched_core::model::ModelCatalog;
use cellsched_core::record::DlRecord;
use cellsched_core::Decision;
use std::sync::Arc;
use crate::step_estimator::EstimatorCache;

/// Looks `key` up in the job environment by `cellsched_core::job_env`'s
/// rule (plain, then `SPANK_`, then `SLURM_SPANK_`).
pub fn lookup_prefixed(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    job_env::lookup(env, key).map(|(_, v)| v)
}

/// The decision claimed by the job environment (unverified: users can set it).
pub fn decision(env: &dyn Fn(&str) -> Option<String>) -> Option<Decision> {
    lookup_prefixed(env, job_env::DECISION_KEY).and_then(|t| Decision::parse_admin_comment(&t))
}

/// The decision the tasks may trust: the job's AdminComment (`admin`:
/// `None` when slurmctld could not be asked, `Some(None)` when the job has
/// no decision), never an environment claim that differs. The note says
/// why a claim was set aside.
pub fn verified_decision(claimed: Option<Decision>, admin: Option<Option<Decision>>) -> (Option<Decision>, Option<String>) {
    match (admin, claimed) {
        (Some(Some(d)), Some(c)) if c != d => {
            (Some(d), Some("CELLSCHED_DECISION in the job environment differs from the job's AdminComment; the AdminComment is used".into()))
        }
        (Some(d), Some(_)) if d.is_none() => {
            (None, Some("CELLSCHED_DECISION in the job environment is not the job's (no decision in its AdminComment); ignored".into()))
        }
        (Some(d), _) => (d, None),
        (None, Some(_)) => (
            None,
            Some("could not read the job's AdminComment from slurmctld to verify CELLSCHED_DECISION; the plan is estimated on the node".into()),
        ),
        (None, None) => (None, None),
    }
}

/// The job's record in its AdminComment as slurmctld holds it (users can
/// write `Comment=`, never AdminComment): `None` when slurmctld could not be
/// asked, `Some(None)` when the job has no cellsched record.
pub fn admin_record(admin_comment: Option<Option<String>>) -> Option<Option<DlRecord>> {
    admin_comment.map(|c| c.as_deref().and_then(DlRecord::parse))
}

/// What slurmstepd prepared as root for the tasks of this step (inherited
/// by each task through fork).
#[derive(Debug)]
struct Prepared {
    /// The step's plan directory, or why there is none.
    dir: Result<std::path::PathBuf, String>,
    /// The verified decision.
    decision: Option<Decision>,
    /// The job's record (the decision's work: model, batch), when it has one.
    record: Option<DlRecord>,
}

/// Does a step of `model` with `batch` run the work `record` holds the
/// decision for? A field the record lacks does not tell them apart.
pub fn same_work(record: Option<&DlRecord>, model: &str, batch: Option<u32>) -> bool {
    record.map_or(true, |r| {
        r.model.as_deref().map_or(true, |m| m == model) && r.batch.map_or(true, |b| batch.map(u64::from) == Some(b))
    })
}

static PREPARED: std::sync::OnceLock<Prepared> = std::sync::OnceLock::new();

/// The job's step label and node index as seen by slurmstepd.
fn step_ids(sp: &Spank) -> Option<(u32, String, u32)> {
    let job = sp.get_u32(Item::JobId)?;
    let step = sp.get_u32(Item::StepId)?;
    let node = sp.get_u32(Item::NodeId).unwrap_or(0);
    let label = if step == BATCH_STEP_ID { "batch".to_string() } else { step.to_string() };
    Some((job, label, node))
}

/// `init_post_opt` in slurmstepd (root): see the module doc. Never fails the step.
pub fn post_opt(sp: &Spank, args: &PluginArgs) -> Result<(), SpankError> {
    let env = |k: &str| sp.getenv(k);
    match with_env(&given().clone(), &given_keys(), &env) {
        Ok(o) if !o.is_empty() => {}
        _ => return Ok(()), // not a DL job; bad options are reported by task_init
    }
    let Some((job, label, node)) = step_ids(sp) else { return Ok(()) };
    let (dir, _) = plan_path(&args.plan_dir, job, &label, node);
    let uid = sp.get_u32(Item::JobUid);
    let gid = sp.get_u32(Item::JobGid);
    let dir = match (uid, gid) {
        (Some(u), Some(g)) => prepare_plan_dir(&args.plan_dir).and_then(|()| prepare_step_dir(&dir, u, g)).map(|()| dir),
        _ => Err(SpankError::Allocation("job uid/gid unavailable".into())),
    }
    .map_err(|e| {
        spank::log(spank::Level::Error, &format!("job {job} step {label}: no plan file: {e}"));
        e.to_string()
    });
    let comment = spank::job_admin_comment(job);
    let admin = admin_record(comment);
    let record = admin.clone().flatten();
    let (decision, note) = verified_decision(decision(&env), admin.map(|r| r.map(|r| r.decision)));
    if let Some(n) = note {
        spank::log(spank::Level::Info, &format!("job {job} step {label}: {n}"));
    }
    let _ = PREPARED.set(Prepared { dir, decision, record });
    // Built here, before slurmstepd forks the tasks: each task inherits it.
    estimator(args);
    Ok(())
}

/// `slurm_spank_exit` in slurmstepd (root): removes the step's plan directory.
pub fn exit(sp: &Spank, args: &PluginArgs) -> Result<(), SpankError> {
    if PREPARED.get().is_none() {
        return Ok(());
    }
    let Some((job, label, node)) = step_ids(sp) else { return Ok(()) };
    remove_step_dir(&plan_path(&args.plan_dir, job, &label, node).0)
}

/// `slurm_spank_job_epilog` (root, once per job and node): removes every
/// plan directory of the job that a killed step may have left.
pub fn job_epilog(sp: &Spank, args: &PluginArgs) -> Result<(), SpankError> {
    let Some(job) = sp.get_u32(Item::JobId) else { return Ok(()) };
    let n = remove_job_dirs(&args.plan_dir, job)?;
    if n > 0 {
        spank::log(spank::Level::Verbose, &format!("job {job}: removed {n} plan director{} left by its steps", if n == 1 { "y" } else { "ies" }));
    }
    Ok(())
}

/// The job's model: a catalog name, or a user model file's description as
/// the SPANK plugin forwarded it at submit (read from the file, as the
/// job's user, only when that is missing).
fn job_model(name: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<cellsched_core::model::ModelSpec, SpankError> {
    use cellsched_core::model::{is_model_file, load_model_file_limited, model_from_wire, MODEL_SPEC_ENV_KEY};
    if is_model_file(name) {
        return Ok(match lookup_prefixed(env, MODEL_SPEC_ENV_KEY) {
            Some(wire) => model_from_wire(&wire)?,
            None => load_model_file_limited(std::path::Path::new(name.trim()))?,
        });
    }
    Ok(ModelCatalog::builtin().resolve(name)?)
}

/// The step's shape from SPANK items and the job environment.
fn step_info(sp: &Spank, env: &dyn Fn(&str) -> Option<String>) -> Result<StepInfo, SpankError> {
    let get = |it, what: &'static str| {
        sp.get_u32(it).ok_or(SpankError::Spank { call: "spank_get_item", msg: format!("{what} unavailable") })
    };
    let step_id = get(Item::StepId, "step id")?;
    let batch = step_id == BATCH_STEP_ID;
    let nnodes = if batch { job_num_nodes(env).unwrap_or(1) } else { get(Item::Nodes, "node count")? };
    let first = if batch { env("SLURM_JOB_NODELIST") } else { env("SLURM_STEP_NODELIST").or_else(|| env("SLURM_JOB_NODELIST")) };
    Ok(StepInfo {
        job_id: get(Item::JobId, "job id")?,
        step_id,
        nnodes,
        node_id: get(Item::NodeId, "node id").unwrap_or(0),
        gpus_on_node: gpus_on_node(env).unwrap_or(0),
        local_tasks: get(Item::LocalTasks, "local task count").unwrap_or(1),
        total_tasks: get(Item::TotalTasks, "task count").unwrap_or(1),
        local_task_id: get(Item::TaskId, "task id").unwrap_or(0),
        global_task_id: get(Item::GlobalTaskId, "global task id").unwrap_or(0),
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

/// The step's estimator (see [`crate::step_estimator`]): the site's GPU
/// overrides and profile DB when the cellsched.toml is readable, built-in
/// numbers otherwise. Built once per step, in `init_post_opt`, and shared by
/// every task.
fn estimator(args: &PluginArgs) -> Arc<Estimator> {
    static CACHE: EstimatorCache = EstimatorCache::new();
    let conf_path = resolve_config_path(
        args.config.as_deref().and_then(|p| p.to_str()),
        None,
        std::env::var("SLURM_CONF").ok().as_deref(),
    );
    CACHE.get(&conf_path, |path| match Config::load(path) {
        Ok(cfg) => {
            let a = Estimator::from_config(&cfg.estimator, None);
            for p in &a.problems {
                spank::log(spank::Level::Verbose, p);
            }
            a.estimator
        }
        Err(e) => {
            spank::log(spank::Level::Debug, &format!("config: {e}; using built-in catalogs"));
            Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
        }
    })
}

/// `slurm_spank_task_init`: see the module doc. Errors are logged by the
/// caller and also shown to the job as `CELLSCHED_ERROR`; the task then
/// runs without plan variables, except for [`SpankError::StepRefused`],
/// which the caller turns into the task's failure.
pub fn task_init(sp: &Spank, args: &PluginArgs) -> Result<(), SpankError> {
    let env = |k: &str| sp.getenv(k);
    let forwarded = given().clone();
    let opts = match with_env(&forwarded, &given_keys(), &env) {
        Ok(o) => o,
        Err(e) => return Err(fail(sp, e)),
    };
    if opts.is_empty() {
        return Ok(());
    }
    // Whatever the enclosing step was told (an `srun` inherits the batch
    // step's variables) is not this step's plan.
    for k in PLAN_KEYS {
        sp.unsetenv(k);
    }
    let result = (|| {
        opts.check_consistency()?;
        let model = opts.trained_as(job_model(opts.model.as_deref().unwrap_or_default(), &env)?);
        let step = step_info(sp, &env)?;
        let prepared = PREPARED.get();
        let d = prepared.and_then(|p| p.decision.clone());
        let same_work = same_work(prepared.and_then(|p| p.record.as_ref()), &model.name, opts.batch);
        if !same_work && d.is_some() {
            spank::log(
                spank::Level::Info,
                &format!("job {} step {}: model {} batch {:?} differ from the job's; the plan is estimated for the step's GPUs", step.job_id, step.step_label(), model.name, opts.batch),
            );
        }
        // The job's Cell: its decision's, else its own --dl-cell (the job environment's).
        let job_cell = d.as_ref().map(|d| d.cell.clone()).or_else(|| match with_env(&DlOptions::NONE, &[], &env) {
            Ok(DlOptions { cell: CellChoice::Pinned(c), .. }) => Some(c),
            _ => None,
        });
        let inputs = PlanInputs {
            opts: &opts,
            model: &model,
            decision: d.as_ref(),
            step: &step,
            gres_gpu_type: gres_gpu_type(&env).or_else(|| node_gpu_type(&env)),
            args,
            same_work,
            job_cell: job_cell.as_ref(),
        };
        let plan = choose(&inputs, &estimator(args)).map_err(|e| batch_step_runs_on(e, &step))?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let (_, file) = plan_path(&args.plan_dir, step.job_id, &step.step_label(), step.node_id);
        let file_error = match prepared.map(|p| &p.dir) {
            Some(Ok(dir)) => write_private(dir, &file, &plan.to_json(), uid).err().map(|e| e.to_string()),
            Some(Err(why)) => Some(why.clone()),
            None => Some("the plan directory was not prepared by slurmstepd (plugin not loaded in slurmstepd's plugstack.conf?)".into()),
        };
        if let Some(why) = &file_error {
            spank::log(spank::Level::Error, &format!("job {} step {}: plan file not written: {why}", step.job_id, plan.step));
            show_error(sp, &format!("plan file not written: {why}"));
        }
        let file_ok = file_error.is_none();
        let file_text = file.to_string_lossy().into_owned();
        for (k, v) in task_env(&plan, &step, file_ok.then_some(file_text.as_str())) {
            sp.setenv(k, &v, true).map_err(|msg| SpankError::Spank { call: "spank_setenv", msg })?;
        }
        spank::log(
            spank::Level::Verbose,
            &format!("job {} step {}: {} plan {} ({})", step.job_id, plan.step, plan.cell, plan.plan_text, plan.source),
        );
        Ok::<(), SpankError>(())
    })();
    result.map_err(|e| fail(sp, e))
}

/// The batch step is the job itself, whose values slurmctld accepted at
/// submit: it is never refused (it runs without a plan, the error in
/// `CELLSCHED_ERROR`, as when cellsched could not decide); only the steps
/// launched in a job (`srun`) are.
fn batch_step_runs_on(e: SpankError, step: &StepInfo) -> SpankError {
    match e {
        SpankError::StepRefused(why) if step.is_batch() => SpankError::Allocation(why),
        e => e,
    }
}

/// Shows the error to the job as `CELLSCHED_ERROR` and returns it.
fn fail(sp: &Spank, e: SpankError) -> SpankError {
    show_error(sp, &e.to_string());
    e
}

/// Sets `CELLSCHED_ERROR` (control characters dropped, at most 512 characters).
fn show_error(sp: &Spank, msg: &str) {
    let msg: String = msg.chars().filter(|c| !c.is_control()).take(512).collect();
    let _ = sp.setenv("CELLSCHED_ERROR", &msg, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::options::{DlKey, DlOptions};
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
        let o = with_env(&DlOptions::default(), &[], &look).unwrap();
        assert_eq!((o.model.as_deref(), o.batch, o.iters), (Some("gpt2"), Some(32), Some(10)));
        let d = decision(&look).unwrap();
        assert_eq!((d.cell.gpus, d.nodes, d.plan.dp), (8, 2, 8));
    }

    #[test]
    fn forwarded_options_win_and_empty_env_means_no_dl_job() {
        let mut fwd = DlOptions::default();
        fwd.parse_option("dl-batch", "8").unwrap();
        let e = env(&[("CELLSCHED_DL_BATCH", "64"), ("CELLSCHED_DL_MODEL", "gpt2")]);
        let o = with_env(&fwd, &[DlKey::Batch], &|k: &str| e.get(k).cloned()).unwrap();
        assert_eq!((o.batch, o.model.as_deref()), (Some(8), Some("gpt2")));
        let none = with_env(&DlOptions::default(), &[], &|_: &str| None).unwrap();
        assert!(none.is_empty());
        assert!(decision(&|_: &str| None).is_none());
    }

    #[test]
    fn only_the_admin_comment_decision_is_trusted() {
        let real = Decision::parse_admin_comment("cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.1 src=datasheet").unwrap();
        let forged = Decision { plan: "dp=2,tp=2,pp=1".parse().unwrap(), iter_s: 0.001, ..real.clone() };
        // Matching claim, or no claim: the AdminComment's decision.
        assert_eq!(verified_decision(Some(real.clone()), Some(Some(real.clone()))), (Some(real.clone()), None));
        assert_eq!(verified_decision(None, Some(Some(real.clone()))), (Some(real.clone()), None));
        // A different claim is set aside for the AdminComment's.
        let (d, note) = verified_decision(Some(forged.clone()), Some(Some(real.clone())));
        assert_eq!(d, Some(real.clone()));
        assert!(note.unwrap().contains("differs"));
        // A claim for a job without a decision, or one that cannot be checked: nothing trusted.
        let (d, note) = verified_decision(Some(forged.clone()), Some(None));
        assert!(d.is_none() && note.unwrap().contains("ignored"));
        let (d, note) = verified_decision(Some(forged), None);
        assert!(d.is_none() && note.unwrap().contains("estimated"));
        assert_eq!(verified_decision(None, None), (None, None));
        assert_eq!(verified_decision(None, Some(None)), (None, None));
    }

    #[test]
    fn a_step_runs_the_decisions_work_only_with_its_model_and_batch() {
        let c = "site note cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=2 ckpt=0 iter_s=0.5 src=datasheet model=gpt__125M batch=64 iters=10";
        let r = admin_record(Some(Some(c.into()))).unwrap().unwrap();
        assert!(same_work(Some(&r), "gpt__125M", Some(64)));
        assert!(!same_work(Some(&r), "llama7b", Some(256)) && !same_work(Some(&r), "gpt__125M", Some(256)) && !same_work(Some(&r), "llama7b", Some(64)));
        // Nothing recorded (no record, or one without the fields): nothing tells them apart.
        assert!(same_work(None, "anything", None));
        let bare = DlRecord::new(r.decision.clone());
        assert!(same_work(Some(&bare), "anything", Some(1)));
    }

    #[test]
    fn only_steps_launched_in_a_job_are_refused() {
        let mut step = StepInfo {
            job_id: 1,
            step_id: 0,
            nnodes: 1,
            node_id: 0,
            gpus_on_node: 1,
            local_tasks: 1,
            total_tasks: 1,
            local_task_id: 0,
            global_task_id: 0,
            first_node: None,
        };
        let refused = || SpankError::StepRefused("no feasible plan".into());
        assert!(matches!(batch_step_runs_on(refused(), &step), SpankError::StepRefused(_)));
        step.step_id = BATCH_STEP_ID;
        assert!(matches!(batch_step_runs_on(refused(), &step), SpankError::Allocation(m) if m == "no feasible plan"));
    }

    #[test]
    fn decision_only_from_the_admin_comment() {
        let d = "cellsched: cell=a100x8x1 nodes=2 dp=8 tp=1 pp=1 mb=1 zero=2 ckpt=0 iter_s=0.5 src=datasheet";
        let got = admin_record(Some(Some(format!("{d} model=gpt2 batch=64 ")))).unwrap().unwrap().decision;
        assert_eq!((got.cell.to_string(), got.plan.dp, got.nodes), ("a100x8x1".into(), 8, 2));
        // No AdminComment, or one without a decision: the job has none; no answer: unknown.
        assert_eq!(admin_record(Some(None)), Some(None));
        assert_eq!(admin_record(Some(Some("site note".into()))), Some(None));
        assert_eq!(admin_record(None), None);
    }
}
