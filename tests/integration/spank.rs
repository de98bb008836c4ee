//! Integration tests: the SPANK plugin on the live cluster — `--dl-*` options
//! in `--help`, refusal of bad values at submit (no job created), plan
//! injection into a 2-node `srun` job and a batch job (same plan in the env
//! and the plan file, `dp*tp*pp` = GPUs granted), `--export=NONE`, and jobs
//! without DL options left untouched.
//!
//! With the job_submit plugin loaded, a batch job's tasks (batch step and
//! `srun` steps) and a direct `srun` allocation's tasks get exactly the
//! decision in `sacct`'s AdminComment (cell, dp/tp/pp, micro-batches, ZeRO,
//! checkpointing) with `CELLSCHED_PLAN_SOURCE=decision`.
use crate::common::{self, require_e2e};
use cellsched_core::Decision;
use std::collections::HashMap;
use std::time::Duration;

const MODEL: &str = "gpt2_xl";

/// Skips (with a note) when the plugin was not built.
macro_rules! require_spank {
    () => {
        if !common::plugin_built("libspank_cellsched.so") {
            eprintln!("skipped: build the plugin first (cargo build --release -p spank_cellsched)");
            return;
        }
    };
}

/// Skips (with a note) when slurmctld runs without job_submit/cellsched.
macro_rules! require_job_submit {
    () => {
        if !common::cluster().cluster.plugins.job_submit {
            eprintln!("skipped: job_submit/cellsched not loaded");
            return;
        }
    };
}

/// Shell run by every task: one `ENV` line of the relevant variables and one
/// line: `ENV k=v ... FILE <plan file JSON>` (absolute paths: works with --export=NONE).
const REPORT: &str = r#"echo "ENV job=${SLURM_JOB_ID} task=${SLURM_PROCID} gpus_on_node=${SLURM_GPUS_ON_NODE} nnodes=${SLURM_STEP_NUM_NODES:-$SLURM_JOB_NUM_NODES} dp=${CELLSCHED_DP} tp=${CELLSCHED_TP} pp=${CELLSCHED_PP} mb=${CELLSCHED_MICRO_BATCHES} zero=${CELLSCHED_ZERO_STAGE} ckpt=${CELLSCHED_CHECKPOINTING} src=${CELLSCHED_PLAN_SOURCE} cell=${CELLSCHED_CELL} gpus=${CELLSCHED_GPUS} world=${WORLD_SIZE} rank=${RANK:-none} file=${CELLSCHED_PLAN_FILE} error=${CELLSCHED_ERROR:+yes} FILE $(/bin/cat "$CELLSCHED_PLAN_FILE" | /usr/bin/tr -d '\n')""#;

/// One task's report: its `ENV` fields and its parsed plan file.
#[derive(Debug)]
struct TaskReport {
    env: HashMap<String, String>,
    file: serde_json::Value,
}

fn parse_reports(out: &str) -> Vec<TaskReport> {
    out.lines()
        .filter_map(|l| l.strip_prefix("ENV "))
        .map(|rest| {
            let (kv, json) = rest.split_once(" FILE ").unwrap_or((rest, ""));
            TaskReport {
                env: common::parse_key_values(kv),
                file: serde_json::from_str(json).unwrap_or(serde_json::Value::Null),
            }
        })
        .collect()
}

fn num(m: &HashMap<String, String>, k: &str) -> u32 {
    m.get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{k} missing or not a number in {m:?}"))
}

/// The plan one task was given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Injected {
    dp: u32,
    tp: u32,
    pp: u32,
    mb: u32,
    zero: u32,
    ckpt: bool,
    cell: String,
    /// `CELLSCHED_PLAN_SOURCE`: `decision`, `estimated` or `pinned`.
    source: String,
}

/// Checks one task: a plan is injected, the plan file says the same, and
/// dp*tp*pp equals the GPUs granted.
fn check_task(r: &TaskReport) -> Injected {
    let e = &r.env;
    assert_eq!(e.get("error").map(String::as_str), Some(""), "CELLSCHED_ERROR set: {e:?}");
    let (dp, tp, pp, mb, zero) = (num(e, "dp"), num(e, "tp"), num(e, "pp"), num(e, "mb"), num(e, "zero"));
    let ckpt = match e.get("ckpt").map(String::as_str) {
        Some("1") => true,
        Some("0") => false,
        other => panic!("CELLSCHED_CHECKPOINTING {other:?} is not 0/1: {e:?}"),
    };
    let granted = num(e, "gpus_on_node") * num(e, "nnodes");
    assert_eq!(dp * tp * pp, granted, "dp*tp*pp must equal the GPUs granted: {e:?}");
    assert_eq!(num(e, "gpus"), granted);
    assert_eq!(num(e, "world"), granted, "WORLD_SIZE is the GPU count: {e:?}");
    let p = &r.file["plan"];
    assert_eq!(
        (p["dp"].as_u64(), p["tp"].as_u64(), p["pp"].as_u64(), p["micro_batches"].as_u64()),
        (Some(dp.into()), Some(tp.into()), Some(pp.into()), Some(mb.into())),
        "plan file {} disagrees with env {e:?}",
        r.file
    );
    assert_eq!(
        (p["zero_stage"].as_u64(), p["checkpointing"].as_bool()),
        (Some(zero.into()), Some(ckpt)),
        "plan file {} disagrees with env {e:?}",
        r.file
    );
    assert_eq!(r.file["cell"].as_str(), e.get("cell").map(String::as_str));
    assert_eq!(r.file["source"].as_str(), e.get("src").map(String::as_str), "plan file source vs env {e:?}");
    assert_eq!(r.file["model"].as_str(), Some(MODEL));
    Injected { dp, tp, pp, mb, zero, ckpt, cell: e["cell"].clone(), source: e["src"].clone() }
}

/// The decision the job_submit plugin recorded for the job, read from
/// `sacct`'s AdminComment; `None` (with a note) when that plugin is not loaded.
fn sacct_decision(jobid: u32) -> Option<Decision> {
    if !common::cluster().cluster.plugins.job_submit {
        eprintln!("note: job_submit/cellsched not loaded: no decision to compare job {jobid} with");
        return None;
    }
    let f = common::sacct_fields_when(jobid, &["AdminComment"], Duration::from_secs(30), |m| !m["AdminComment"].is_empty())
        .unwrap_or_else(|e| panic!("job_submit/cellsched is loaded but recorded no AdminComment: {e}"));
    let text = &f["AdminComment"];
    // The same text slurmctld holds, spaces and all.
    assert_eq!(common::admin_comment(jobid).as_deref(), Some(text.as_str()), "scontrol/sacct AdminComment differ");
    Some(Decision::parse_admin_comment(text).unwrap_or_else(|| panic!("no cellsched decision in AdminComment {text:?}")))
}

/// The plan a task must get when slurmctld's decision reached it.
fn from_decision(d: &Decision) -> Injected {
    Injected {
        dp: d.plan.dp,
        tp: d.plan.tp,
        pp: d.plan.pp,
        mb: d.plan.micro_batches,
        zero: d.plan.zero_stage.into(),
        ckpt: d.plan.checkpointing,
        cell: d.cell.to_string(),
        source: "decision".into(),
    }
}

fn output_of(jobid: u32, path: &std::path::Path) -> String {
    common::wait_for_state(jobid, &["COMPLETED"], Duration::from_secs(180))
        .unwrap_or_else(|e| panic!("{e}; output: {}", common::read(path)));
    common::read(path)
}

#[test]
fn help_lists_dl_options() {
    require_e2e!();
    require_spank!();
    let out = common::slurm_ok("sbatch", &["--help"]);
    for opt in ["--dl-model", "--dl-batch", "--dl-iters", "--dl-cell", "--dl-freeze", "--dl-plan"] {
        let line = out.lines().find(|l| l.contains(opt)).unwrap_or_else(|| panic!("{opt} not in sbatch --help"));
        assert!(line.contains("[cellsched]"), "{line}");
    }
    let srun = common::slurm_ok("srun", &["--help"]);
    assert!(srun.contains("--dl-model") && srun.contains("[cellsched]"));
}

#[test]
fn bad_values_are_refused_and_nothing_is_submitted() {
    require_e2e!();
    require_spank!();
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--dl-iters=abc"], &["--dl-iters", "'abc'", "positive integer"]),
        (&["--dl-cell=x100x0"], &["--dl-cell", "'x100x0'", "TYPExN"]),
        (&["--dl-model=gtp2", "--dl-batch=8"], &["--dl-model", "'gtp2'", "did you mean"]),
        (&["--dl-model=gpt2_xl"], &["--dl-batch=N"]),
        (&["--dl-plan=dp=0"], &["--dl-plan", "positive integer"]),
    ];
    for (args, needles) in cases {
        let name = common::unique_name("spank-bad");
        let mut full = vec!["-J", name.as_str(), "--wrap", "true"];
        full.extend_from_slice(args);
        let err = common::submit(&full).expect_err(&format!("{args:?} must be refused"));
        for n in needles {
            assert!(err.contains(n), "message for {args:?} lacks {n:?}: {err}");
        }
        let q = common::slurm_ok("squeue", &["-h", "-n", &name]);
        assert!(q.trim().is_empty(), "job created for {args:?}: {q}");
        let a = common::slurm_cmd("sacct", &["-n", "-X", "--name", &name, "-S", "now-1hour"]);
        assert!(String::from_utf8_lossy(&a.stdout).trim().is_empty(), "sacct has a job for {args:?}");
    }
}

#[test]
fn two_node_srun_job_gets_one_consistent_plan() {
    require_e2e!();
    require_spank!();
    let name = common::unique_name("spank-srun");
    let out = common::slurm_cmd(
        "srun",
        &[
            "-J", &name, "-N2", "--ntasks-per-node=4", "--gpus-per-node=a100:4", "--dl-model", MODEL,
            "--dl-batch=64", "/bin/sh", "-c", REPORT,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "srun failed: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    let reports = parse_reports(&stdout);
    assert_eq!(reports.len(), 8, "one report per task: {stdout}");
    let plans: Vec<_> = reports.iter().map(check_task).collect();
    assert!(plans.windows(2).all(|w| w[0] == w[1]), "tasks disagree: {plans:?}");
    let mut ranks: Vec<u32> = reports.iter().map(|r| num(&r.env, "rank")).collect();
    ranks.sort();
    assert_eq!(ranks, (0..8).collect::<Vec<_>>(), "one process per GPU: RANK = task id");
    let jobid = num(&reports[0].env, "job");
    assert!(plans[0].cell.starts_with("a100x8x"), "the typed a100 request, 2 x 4 GPUs: {plans:?}");
    // slurmstepd read the decision from AdminComment.
    if let Some(d) = sacct_decision(jobid) {
        assert_eq!(plans[0], from_decision(&d), "injected plan differs from sacct's AdminComment decision {d:?}");
    }
}

fn batch_job(export_none: bool) {
    let c = common::cluster();
    let name = common::unique_name("spank-batch");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let script = format!("#!/bin/sh\n{REPORT}\nsrun /bin/sh -c '{}'\n", REPORT.replace('\'', "'\\''"));
    let out_s = out.to_string_lossy().into_owned();
    let mut args = vec![
        "-J", &name, "-o", &out_s, "-N2", "--ntasks-per-node=1", "--gpus-per-node=a100:4", "--dl-model", MODEL,
        "--dl-batch=64", "--dl-freeze=conservative",
    ];
    if export_none {
        args.push("--export=NONE");
    }
    args.extend(["--wrap", &script]);
    let jobid = common::submit(&args).expect("submit DL batch job");
    let text = output_of(jobid, &out);
    let reports = parse_reports(&text);
    assert_eq!(reports.len(), 3, "batch step + 2 srun tasks: {text}");
    let plans: Vec<_> = reports.iter().map(check_task).collect();
    assert!(plans.windows(2).all(|w| w[0] == w[1]), "batch step and srun tasks disagree: {plans:?}");
    assert_eq!(reports[0].file["step"].as_str(), Some("batch"));
    assert_eq!(reports[0].file["freeze_mode"].as_str(), Some("conservative"));
    assert_eq!(reports[0].env["rank"], "none", "the batch step is a launcher: no RANK");
    // job_submit put the decision into the batch environment: every task runs it.
    if let Some(d) = sacct_decision(jobid) {
        assert_eq!(plans[0], from_decision(&d), "injected plan differs from sacct's AdminComment decision {d:?}");
    }
}

#[test]
fn batch_job_and_its_steps_see_the_same_plan() {
    require_e2e!();
    require_spank!();
    batch_job(false);
}

#[test]
fn export_none_batch_job_still_gets_the_plan() {
    require_e2e!();
    require_spank!();
    batch_job(true);
}

#[test]
fn jobs_without_dl_options_see_no_cellsched_variables() {
    require_e2e!();
    require_spank!();
    let c = common::cluster();
    let name = common::unique_name("spank-plain");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    let jobid = common::submit(&[
        "-J", &name, "-o", &out_s, "-N1", "--gpus-per-node=1", "--wrap",
        "env | grep -cE '^(CELLSCHED_(DP|CELL|PLAN_FILE|ERROR|DL_)|WORLD_SIZE=)' || true; srun /bin/sh -c \"env | grep -cE '^(CELLSCHED_(DP|CELL|PLAN_FILE|ERROR|DL_)|WORLD_SIZE=)' || true\"",
    ])
    .expect("submit plain job");
    let text = output_of(jobid, &out);
    let counts: Vec<&str> = text.lines().map(str::trim).collect();
    assert_eq!(counts, ["0", "0"], "CELLSCHED_ variables leaked into a plain job: {text}");
}

/// The shared cluster's plan directory (`plan_dir=` in its plugstack.conf).
fn plan_dir() -> std::path::PathBuf {
    common::cluster().cluster.layout.run().join("plans")
}

/// Names of the plan directories of job `id` still under `plan_dir`.
fn plan_dirs_of(id: u32) -> Vec<String> {
    std::fs::read_dir(plan_dir())
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(&format!("{id}."))).collect())
        .unwrap_or_default()
}

/// Waits (bounded) until job `id` has no plan directory left.
fn plan_dirs_gone(id: u32) -> Result<(), Vec<String>> {
    let t = std::time::Instant::now();
    loop {
        let left = plan_dirs_of(id);
        if left.is_empty() {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(30) {
            return Err(left);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A `CELLSCHED_DECISION` the user sets inside their own job before `srun`
/// is not trusted: the step's tasks get the decision in the job's
/// AdminComment (labelled `decision`), never the forged one.
#[test]
fn a_forged_decision_in_the_job_environment_is_ignored() {
    require_e2e!();
    require_spank!();
    require_job_submit!();
    let c = common::cluster();
    let name = common::unique_name("spank-forged");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    let forged = "cellsched: cell=a100x4x4 nodes=1 dp=1 tp=1 pp=4 mb=7 zero=0 ckpt=0 iter_s=0.000123 src=measured";
    let script = format!(
        "#!/bin/sh\nexport CELLSCHED_DECISION='{forged}' SLURM_SPANK_CELLSCHED_DECISION='{forged}' SPANK_CELLSCHED_DECISION='{forged}'\nsrun /bin/sh -c '{}'\n",
        REPORT.replace('\'', "'\\''")
    );
    let jobid = common::submit(&[
        "-J", &name, "-o", &out_s, "-N1", "--ntasks-per-node=1", "--gpus-per-node=a100:4", "--dl-model", MODEL, "--dl-batch=64",
        "--wrap", &script,
    ])
    .expect("submit");
    let text = output_of(jobid, &out);
    let reports = parse_reports(&text);
    assert_eq!(reports.len(), 1, "{text}");
    let got = check_task(&reports[0]);
    let d = sacct_decision(jobid).expect("a decision");
    assert_eq!(got, from_decision(&d), "the task must run the AdminComment's decision");
    assert!(!(got.pp == 4 && got.mb == 7), "the forged plan reached the task: {got:?}");
    assert_ne!(reports[0].file["iter_time_s"].as_f64(), Some(0.000123), "{}", reports[0].file);
}

/// Plan directories are created by slurmstepd in the root-owned plan_dir
/// and removed when the job ends, completed or cancelled.
#[test]
fn plan_directories_are_removed_when_jobs_end_or_are_cancelled() {
    require_e2e!();
    require_spank!();
    let c = common::cluster();
    let m = std::fs::symlink_metadata(plan_dir()).expect("plan_dir exists after DL jobs ran");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o755), "plan_dir is root's, 0755");
    let name = common::unique_name("spank-clean");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    let done = common::submit(&[
        "-J", &name, "-o", &out_s, "-N1", "--gpus-per-node=a100:1", "--dl-model", MODEL, "--dl-batch=8",
        "--wrap", "test -s \"$CELLSCHED_PLAN_FILE\" && echo PLAN_OK; srun true",
    ])
    .expect("submit");
    let text = output_of(done, &out);
    assert!(text.contains("PLAN_OK"), "{text}");
    plan_dirs_gone(done).unwrap_or_else(|left| panic!("job {done} left {left:?}"));
    let name = common::unique_name("spank-cancel");
    let cancelled = common::submit(&["-J", &name, "-o", "/dev/null", "-N1", "--gpus-per-node=a100:1", "--dl-model", MODEL, "--dl-batch=8", "--wrap", "sleep 300"])
        .expect("submit");
    common::wait_for_state(cancelled, &["RUNNING"], Duration::from_secs(120)).unwrap();
    let t = std::time::Instant::now();
    while plan_dirs_of(cancelled).is_empty() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!plan_dirs_of(cancelled).is_empty(), "a running DL job has its plan directory");
    common::slurm_ok("scancel", &[&cancelled.to_string()]);
    plan_dirs_gone(cancelled).unwrap_or_else(|left| panic!("cancelled job {cancelled} left {left:?}"));
}

/// Runs `prog args` as `user` against the shared cluster.
fn as_user(user: &str, prog: &str, args: &[&str]) -> std::process::Output {
    let c = common::cluster();
    common::run_as(user, &c.spec().slurm_bin, &c.slurm_conf, prog, args)
}

/// As a second, ordinary user nothing under /tmp or plan_dir can stop
/// another user's job from getting its plan file, nor make root write
/// outside plan_dir: the job's user cannot either (links it plants in its
/// own plan directory are removed, not followed).
#[test]
fn another_user_cannot_block_or_redirect_plan_files() {
    require_e2e!();
    require_spank!();
    let c = common::cluster();
    let (alice, bob) = ("cs-e2e-alice", "cs-e2e-bob");
    let _ = common::test_user(alice);
    let bob_uid = common::test_user(bob);
    // Alice cannot create anything in plan_dir ...
    let pd = plan_dir();
    // The next job ids: one past a held probe job's.
    let probe = common::submit(&["--hold", "-o", "/dev/null", "--wrap", "true"]).expect("probe job");
    common::slurm_ok("scancel", &[&probe.to_string()]);
    let next = probe + 1;
    for id in next..next + 5 {
        let target = pd.join(format!("{id}.batch.0"));
        let o = as_user(alice, "mkdir", &["-m", "777", &target.display().to_string()]);
        assert!(!o.status.success(), "alice created {} in plan_dir", target.display());
        let o = as_user(alice, "ln", &["-s", "/etc", &target.display().to_string()]);
        assert!(!o.status.success(), "alice linked {} in plan_dir", target.display());
        // ... and what she plants in /tmp (the old predictable paths) is not used.
        let _ = as_user(alice, "mkdir", &["-m", "777", &format!("/tmp/cellsched-{bob_uid}-{id}")]);
    }
    // Bob's job gets its plan file; inside it, he plants a link to a root file in his plan directory.
    let victim = std::env::temp_dir().join(format!("cs-e2e-victim-{}", std::process::id()));
    std::fs::write(&victim, "keep").unwrap();
    let outdir = std::env::temp_dir().join(format!("cs-e2e-bob-{}", std::process::id()));
    std::fs::create_dir_all(&outdir).unwrap();
    std::os::unix::fs::chown(&outdir, Some(bob_uid), None).unwrap();
    let out = outdir.join("job.out");
    let script = format!(
        "echo FILE=$CELLSCHED_PLAN_FILE ERR=[$CELLSCHED_ERROR]; test -s \"$CELLSCHED_PLAN_FILE\" && echo PLAN_OK; \
         ln -s {} \"$(dirname \"$CELLSCHED_PLAN_FILE\")/evil\"; mkdir \"$(dirname \"$CELLSCHED_PLAN_FILE\")/sub\"",
        victim.display()
    );
    let o = as_user(bob, "sbatch", &["--parsable", "-o", &out.display().to_string(), "-N1", "--gpus-per-node=a100:1", "--dl-model", MODEL, "--dl-batch=8", "--wrap", &script]);
    assert!(o.status.success(), "bob's sbatch: {}", String::from_utf8_lossy(&o.stderr));
    let id: u32 = String::from_utf8_lossy(&o.stdout).trim().split(';').next().unwrap().parse().unwrap();
    let text = output_of(id, &out);
    assert!(text.contains("PLAN_OK") && text.contains(&format!("FILE={}/{id}.batch.0/plan.json", pd.display())), "{text}");
    assert!(text.contains("ERR=[]"), "CELLSCHED_ERROR set: {text}");
    plan_dirs_gone(id).unwrap_or_else(|left| panic!("job {id} left {left:?}"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep", "root followed the user's link");
    let _ = std::fs::remove_file(&victim);
    let _ = std::fs::remove_dir_all(&outdir);
    for id in next..next + 5 {
        let _ = std::fs::remove_dir_all(format!("/tmp/cellsched-{bob_uid}-{id}"));
    }
    let _ = c;
}

/// A model described in the user's own TOML file gets a Cell and a plan
/// like a catalog model: the SPANK plugin forwards its description.
#[test]
fn a_model_toml_job_gets_a_cell_and_a_plan() {
    require_e2e!();
    require_spank!();
    require_job_submit!();
    let c = common::cluster();
    let name = common::unique_name("spank-toml");
    let model = c.jobs_dir.join(format!("{name}.toml"));
    std::fs::write(&model, "family = \"gpt\"\nlayers = 12\nhidden = 768\nheads = 12\nseq_len = 512\nvocab = 50000\n").unwrap();
    let out = c.jobs_dir.join(format!("{name}.out"));
    let (model_s, out_s) = (model.display().to_string(), out.display().to_string());
    let jobid = common::submit(&["-J", &name, "-o", &out_s, "--dl-model", &model_s, "--dl-batch=16", "--wrap", "echo SRC=$CELLSCHED_PLAN_SOURCE CELL=$CELLSCHED_CELL ERR=[$CELLSCHED_ERROR]"])
        .expect("submit");
    let text = output_of(jobid, &out);
    let d = sacct_decision(jobid).expect("a decision for the model file's job");
    let comment = common::admin_comment(jobid).unwrap_or_default();
    assert!(comment.contains(&format!("model=user:{name}@")), "{comment}");
    assert!(text.contains("SRC=decision") && text.contains(&format!("CELL={}", d.cell)) && text.contains("ERR=[]"), "{text}");
}

/// A step's own `--dl-*` values are checked against its own grant: inside
/// a job, an `srun` with another model and batch gets a plan estimated for
/// its GPUs (or fails, when none fits), never the job's decision; an
/// `srun --dl-plan` that does not use the step's GPUs and an `srun
/// --dl-cell` of another GPU type fail (non-zero, with the reason on the
/// step's stderr) before the program runs, never with the batch step's
/// plan. A plain `srun` in the same job still gets the decision.
#[test]
fn steps_with_other_dl_values_get_their_own_plan_or_fail() {
    require_e2e!();
    require_spank!();
    require_job_submit!();
    let c = common::cluster();
    let name = common::unique_name("spank-steps");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    let report = REPORT.replace('\'', "'\\''");
    let script = format!(
        "#!/bin/sh\n\
         srun --dl-model=llama7b --dl-batch=256 /bin/sh -c '{report}'; echo RC_MODEL=$?\n\
         srun --dl-plan=dp=8 /bin/sh -c 'echo RAN_PLAN dp=$CELLSCHED_DP file=$CELLSCHED_PLAN_FILE'; echo RC_PLAN=$?\n\
         srun --dl-cell=a10x1 /bin/sh -c 'echo RAN_CELL cell=$CELLSCHED_CELL'; echo RC_CELL=$?\n\
         srun /bin/sh -c '{report}'; echo RC_SAME=$?\n"
    );
    let jobid = common::submit(&[
        "-J", &name, "-o", &out_s, "-N1", "--ntasks-per-node=1", "--gpus-per-node=a100:4", "--dl-model", MODEL, "--dl-batch=64",
        "--wrap", &script,
    ])
    .expect("submit");
    let text = output_of(jobid, &out);
    let d = sacct_decision(jobid).expect("a decision");
    assert_eq!(d.cell.gpus, 4, "{d:?}");
    let reports = parse_reports(&text);
    let (other, same): (Vec<&TaskReport>, Vec<&TaskReport>) = reports.iter().partition(|r| r.file["model"].as_str() == Some("llama7b"));
    // Another model and batch: its own plan for the 4 GPUs, or refused.
    if text.contains("RC_MODEL=0") {
        assert_eq!(other.len(), 1, "{text}");
        let e = &other[0].env;
        assert_eq!((e["src"].as_str(), e["gpus"].as_str(), e["error"].as_str()), ("estimated", "4", ""), "{text}");
        assert_eq!(other[0].file["global_batch"].as_u64(), Some(256), "{text}");
        let p = &other[0].file["plan"];
        assert_eq!(p["dp"].as_u64().unwrap() * p["tp"].as_u64().unwrap() * p["pp"].as_u64().unwrap(), 4, "{text}");
    } else {
        assert!(other.is_empty() && text.contains("cellsched: error: no feasible plan for model llama7b"), "{text}");
    }
    // An impossible pinned plan and another GPU type's Cell: the step fails, nothing runs.
    assert!(!text.contains("RC_PLAN=0") && !text.contains("RAN_PLAN"), "{text}");
    assert!(text.contains("cellsched: error: --dl-plan=dp=8") && text.contains("granted 4"), "{text}");
    assert!(!text.contains("RC_CELL=0") && !text.contains("RAN_CELL"), "{text}");
    assert!(text.contains("cellsched: error: --dl-cell=a10x1") && text.contains("runs on a100"), "{text}");
    // The job's own work still gets its decision.
    assert!(text.contains("RC_SAME=0"), "{text}");
    assert_eq!(same.len(), 1, "{text}");
    assert_eq!(check_task(same[0]), from_decision(&d));
}

/// A job that nests 25,000 directories and writes 2,000 files into its
/// plan directory does not defeat the cleanup: the directory is gone when
/// the job ends.
#[test]
fn deep_nesting_in_a_plan_directory_does_not_defeat_its_removal() {
    require_e2e!();
    require_spank!();
    let c = common::cluster();
    let name = common::unique_name("spank-deep");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    let script = "#!/bin/sh\n\
        cd \"$(dirname \"$CELLSCHED_PLAN_FILE\")\" || exit 1\n\
        /usr/bin/perl -e 'mkdir q(wide) or die; for my $i (1..2000) { open(my $f, q(>), qq(wide/f$i)) or die; close $f } \
        for my $i (1..25000) { mkdir q(d) or die qq(mkdir $i: $!); chdir q(d) or die qq(chdir $i: $!) } print qq(NESTED\\n)'\n";
    let jobid = common::submit(&[
        "-J", &name, "-o", &out_s, "-N1", "--gpus-per-node=a100:1", "--dl-model", MODEL, "--dl-batch=8", "--wrap", script,
    ])
    .expect("submit");
    let text = output_of(jobid, &out);
    assert!(text.contains("NESTED"), "the job built its tree: {text}");
    plan_dirs_gone(jobid).unwrap_or_else(|left| panic!("job {jobid} left {left:?} ({text})"));
}

/// Probe round 3 (issue 31): the task's GPU type is checked against the
/// decision's; a typed request the user exports into a step
/// (`SLURM_TRES_PER_NODE=gres:gpu:OTHER:4`) does not pass for the grant's
/// type: the node's configured type is read first, so the step keeps the
/// decision made for its GPUs and no re-planning error.
#[test]
fn a_typed_request_exported_into_a_step_does_not_change_the_granted_type() {
    require_e2e!();
    require_spank!();
    require_job_submit!();
    let c = common::cluster();
    let name = common::unique_name("spank-faketype");
    let out = c.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    let mut types: Vec<String> = c.spec().groups.iter().map(|g| g.gpu_type.clone()).collect();
    types.sort();
    types.dedup();
    if types.len() < 2 {
        eprintln!("skipped: one GPU type");
        return;
    }
    // Claim each type in turn: one of them is not the job's.
    let claims: String = types
        .iter()
        .map(|t| format!("SLURM_TRES_PER_NODE=gres:gpu:{t}:4 srun /bin/sh -c 'echo \"STEP TYPE=$CELLSCHED_GPU_TYPE CELL=$CELLSCHED_CELL SRC=$CELLSCHED_PLAN_SOURCE ERR=${{CELLSCHED_ERROR:+yes}}\"'\n"))
        .collect();
    let script = format!("#!/bin/sh\n{claims}");
    let jobid = common::submit(&["-J", &name, "-o", &out_s, "-N1", "--ntasks-per-node=1", "--gres=gpu:4", "--dl-model", MODEL, "--dl-batch=64", "--wrap", &script]).expect("submit");
    let text = output_of(jobid, &out);
    let d = sacct_decision(jobid).expect("a decision");
    let steps: Vec<HashMap<String, String>> = text.lines().filter(|l| l.starts_with("STEP ")).map(common::parse_key_values).collect();
    assert_eq!(steps.len(), types.len(), "{text}");
    for s in &steps {
        assert_eq!((s["TYPE"].as_str(), s["CELL"].clone(), s["SRC"].as_str(), s["ERR"].as_str()), (d.cell.gpu_type.as_str(), d.cell.to_string(), "decision", ""), "{text}");
    }
}
