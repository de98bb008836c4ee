//! End-to-end tests of the reconfiguration of running `--dl-elastic` jobs
//! (job_submit/cellsched's elastic thread, the SPANK plugin's restart
//! marker and checkpoint directory, the emulated trainer's checkpoint) on
//! a private cluster of this module: one a100 and one v100 node of 4 GPUs
//! each, port base = test cluster's + [`PORT_OFFSET`], short `[elastic]`
//! timings ([`toml`]). Tests run one at a time (a mutex): each needs the
//! cluster's GPUs to itself.
//!
//! Every test checks that no job is lost: each job ends COMPLETED (or is
//! still running or pending when cancelled by the test), never FAILED or
//! CANCELLED by cellsched.
use crate::common::{self, require_e2e};
use cellsched_core::record::DlRecord;
use cellsched_devcluster::{Cluster, LocalClusterSpec, NodeGroup};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Output;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Port offset of this module's cluster above the test cluster's base
/// (other modules use up to +180).
const PORT_OFFSET: u16 = 220;
/// How long a job may take to reach a state.
const WAIT: Duration = Duration::from_secs(120);
/// Seconds between the signal and the requeue of a job that ignores it.
const GRACE_S: u64 = 6;
/// How long a job may stay FAILED before it counts as lost.
const LOST_AFTER: Duration = Duration::from_secs(10);
/// The model and global batch of the DL jobs.
const MODEL: &str = "gpt2";
const BATCH: u32 = 32;

/// The cluster's cellsched.toml: decisions every 2 s, reconfiguration
/// allowed 3 s after a (re)start, a small restart cost (the gains of the
/// long declared jobs dwarf it), the grace of [`GRACE_S`].
fn toml() -> String {
    format!(
        "# cellsched e2e elastic tests\n\
[estimator]\nprofile_db = \"/nonexistent/cellsched-e2e/profiles.csv\"\n\
[placement]\nreplan_interval_s = 2\n\
[elastic]\ninterval_s = 2\nmin_run_s = 3\ngrace_s = {GRACE_S}\nmax_per_hour = 2\nrestart_cost_s = 1.0\ncheckpoint_write_gbs = 1000.0\n"
    )
}

/// The truth table of the emulated trainer: every Cell of one node the
/// test jobs may get (iteration times are the trainer's, not the predictor's).
fn truth() -> String {
    let mut t = String::from("model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\n");
    for ty in ["a100", "v100"] {
        for g in 1..=4 {
            t.push_str(&format!("{MODEL},{BATCH},{ty},1,{g},{}\n", 0.8 / f64::from(g)));
        }
    }
    t
}

/// The nodes of the private cluster.
const NODES: [&str; 2] = ["a100-1", "v100-1"];

struct Private {
    spec: LocalClusterSpec,
    cluster: Cluster,
    jobs_dir: PathBuf,
}

static PRIVATE: Mutex<Option<Private>> = Mutex::new(None);

extern "C" {
    fn atexit(cb: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn private_down() {
    let _ = std::panic::catch_unwind(|| {
        let guard = PRIVATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = guard.as_ref() {
            let _ = p.cluster.down(cellsched_devcluster::JobPolicy::Cancel);
            let _ = std::fs::remove_dir_all(&p.spec.dir);
        }
    });
}

/// Locks the private cluster (bringing it up on first use), idle.
fn private() -> Option<MutexGuard<'static, Option<Private>>> {
    let built = ["libjob_submit_cellsched.so", "libspank_cellsched.so", "libsite_factor_cellsched.so"].iter().all(|l| common::plugin_built(l));
    if !built {
        eprintln!("skipped: the plugins are not built (cargo build --release --workspace)");
        return None;
    }
    let mut g = PRIVATE.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        let mut spec = common::test_spec();
        spec.port_base += PORT_OFFSET;
        spec.dir = std::env::temp_dir().join(format!("cs-e2e-elastic-{}", std::process::id()));
        spec.groups = vec![NodeGroup::new("a100", 1, 4), NodeGroup::new("v100", 1, 4)];
        spec.cellsched_toml = Some(toml());
        let _ = std::fs::remove_dir_all(&spec.dir);
        std::fs::create_dir_all(&spec.dir).expect("create elastic cluster dir");
        let cluster = Cluster::up(&spec).unwrap_or_else(|e| panic!("cannot bring the elastic cluster up: {e}"));
        // SAFETY: registers a plain extern "C" fn with the C library.
        unsafe { atexit(private_down) };
        let jobs_dir = spec.dir.join("jobs");
        std::fs::create_dir_all(&jobs_dir).expect("create jobs dir");
        std::fs::write(jobs_dir.join("truth.csv"), truth()).expect("write truth table");
        *g = Some(Private { spec, cluster, jobs_dir });
    }
    g.as_ref().unwrap().reset();
    Some(g)
}

impl Private {
    fn slurm(&self) -> common::SlurmAt {
        common::SlurmAt { bin: self.spec.slurm_bin.clone(), slurm_conf: self.cluster.layout.slurm_conf(), cwd: self.jobs_dir.clone() }
    }

    fn cmd(&self, name: &str, args: &[&str]) -> Output {
        self.slurm().cmd(name, args)
    }

    fn ok(&self, name: &str, args: &[&str]) -> String {
        self.slurm().ok(name, args)
    }

    fn submit(&self, args: &[&str]) -> u32 {
        let mut full = vec!["--parsable"];
        full.extend_from_slice(args);
        let out = self.cmd("sbatch", &full);
        assert!(out.status.success(), "sbatch {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout.trim().split(';').next().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("sbatch said {stdout:?}"))
    }

    /// A long elastic job on one a100 GPU running `script`, started while
    /// every other GPU is held, which then frees them (so the elastic
    /// thread grows it); waits until it runs.
    fn elastic_with_gpus_to_grow_into(&self, tag: &str, script: &str) -> u32 {
        let blockers = [self.block("a100-1", "a100", 3), self.block("v100-1", "v100", 4)];
        let name = common::unique_name(tag);
        let id = self.submit(&[
            "-J", &name, "--open-mode=append", "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "200000", "--dl-elastic",
            "--wrap", script,
        ]);
        self.wait_state(id, &["RUNNING"]);
        self.cancel(&blockers);
        id
    }

    /// [`Self::elastic_with_gpus_to_grow_into`] with a script that ignores
    /// SIGUSR1 after running `first` (then sleeps); waits until the elastic
    /// thread has signalled it.
    fn signalled_job_ignoring_it(&self, tag: &str, first: &str) -> u32 {
        let id = self.elastic_with_gpus_to_grow_into(tag, &format!("trap '' USR1; {first}; sleep 600"));
        self.wait_until(id, "a signal", |p| p.record(id).reconf_at.is_some());
        id
    }

    /// A plain job holding `gpus` GPUs of node `node` until cancelled; waits until it runs.
    fn block(&self, node: &str, ty: &str, gpus: u32) -> u32 {
        let gres = format!("--gres=gpu:{ty}:{gpus}");
        let name = common::unique_name("blocker");
        let id = self.submit(&["-J", &name, "-N1", "-w", node, &gres, "--wrap", "sleep 600"]);
        self.wait_state(id, &["RUNNING"]);
        id
    }

    /// An elastic DL job running the emulated trainer (`iters` real
    /// iterations, 0.8 s / GPUs each, compressed by `scale`), declaring
    /// `declared` iterations to cellsched, with `extra` sbatch arguments.
    fn trainer(&self, elastic: bool, iters: u32, declared: u32, scale: f64, extra: &[&str]) -> u32 {
        let name = common::unique_name("elastic");
        let declared = declared.to_string();
        let script = format!(
            "exec {} --model {MODEL} --batch {BATCH} --iters {iters} --truth truth.csv --scale {scale} --restart-s 2",
            repo().join("etc/examples/emulated-train.sh").display()
        );
        let batch = BATCH.to_string();
        // Append: Slurm truncates the output file when a requeued job starts again.
        let mut args = vec!["-J", name.as_str(), "--open-mode=append", "--dl-model", MODEL, "--dl-batch", batch.as_str(), "--dl-iters", declared.as_str()];
        if elastic {
            args.push("--dl-elastic");
        }
        args.extend_from_slice(extra);
        args.extend(["--wrap", script.as_str()]);
        self.submit(&args)
    }

    fn cancel(&self, ids: &[u32]) {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let _ = self.cmd("scancel", &refs);
    }

    /// Cancels every job and waits until the queue is empty, the nodes idle
    /// and none of their GPUs counted as in use.
    fn reset(&self) {
        let ids = self.ok("squeue", &["-h", "-o", "%A"]);
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = self.cmd("scancel", &ids);
        }
        let t = Instant::now();
        loop {
            let q = self.ok("squeue", &["-h", "-o", "%i"]);
            let busy = self.ok("sinfo", &["-h", "-o", "%T"]);
            let gpus: Vec<(&str, u32)> = NODES.iter().map(|n| (*n, self.node_gpus_in_use(n))).collect();
            if q.trim().is_empty() && busy.lines().all(|l| l.trim() == "idle") && gpus.iter().all(|(_, g)| *g == 0) {
                return;
            }
            assert!(t.elapsed() < WAIT, "elastic cluster not idle: queue {q:?}, node states {busy:?}, GPUs counted in use {gpus:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// GPUs slurmctld counts as allocated on `node`: the largest `gres/gpu`
    /// count (typed or not) in its `AllocTRES`.
    fn node_gpus_in_use(&self, node: &str) -> u32 {
        let n = common::parse_key_values(&self.ok("scontrol", &["show", "node", "-o", node]));
        let tres = n.get("AllocTRES").cloned().unwrap_or_default();
        tres.split(',').filter(|kv| kv.starts_with("gres/gpu")).filter_map(|kv| kv.split_once('=')?.1.parse().ok()).max().unwrap_or(0)
    }

    /// Waits until `ok` holds (no job is watched); fails after [`WAIT`] with `what`.
    fn wait_for(&self, what: &str, ok: impl Fn(&Private) -> bool) {
        let t = Instant::now();
        while !ok(self) {
            assert!(t.elapsed() < WAIT, "no {what} after {WAIT:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn job(&self, id: u32) -> HashMap<String, String> {
        common::parse_key_values(&self.ok("scontrol", &["show", "job", "-o", &id.to_string()]))
    }

    fn record(&self, id: u32) -> DlRecord {
        let c = self.slurm().admin_comment(id).unwrap_or_default();
        DlRecord::parse(&c).unwrap_or_else(|| panic!("job {id}: no cellsched record in {c:?}"))
    }

    fn state(&self, id: u32) -> String {
        let out = self.cmd("scontrol", &["show", "job", "-o", &id.to_string()]);
        if out.status.success() {
            if let Some(s) = common::parse_key_values(&String::from_utf8_lossy(&out.stdout)).get("JobState") {
                return s.clone();
            }
        }
        let sacct = self.ok("sacct", &["-X", "-n", "-P", "-j", &id.to_string(), "-o", "State"]);
        sacct.split_whitespace().next().unwrap_or("UNKNOWN").to_string()
    }

    fn wait_state(&self, id: u32, states: &[&str]) -> String {
        self.wait_until(id, &format!("state in {states:?}"), |p| states.contains(&p.state(id).as_str()));
        self.state(id)
    }

    /// Waits until `ok` holds; fails on timeout, or when job `id` stays
    /// ended otherwise than COMPLETED (a lost job) for [`LOST_AFTER`] (a job
    /// that exits with 75 on the signal is FAILED until the elastic thread
    /// requeues it, within a second or two).
    fn wait_until(&self, id: u32, what: &str, mut ok: impl FnMut(&Private) -> bool) {
        let t = Instant::now();
        let mut ended_since: Option<Instant> = None;
        loop {
            if ok(self) {
                return;
            }
            let s = self.state(id);
            let ended = ["FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL"].contains(&s.as_str());
            ended_since = if ended { ended_since.or(Some(Instant::now())) } else { None };
            assert!(ended_since.map_or(true, |e| e.elapsed() < LOST_AFTER), "job {id} ended {s} while waiting for {what}:\n{}", self.output(id));
            assert!(t.elapsed() < WAIT, "job {id} ({s}): no {what} after {WAIT:?}; record {:?}\n{}", self.slurm().admin_comment(id), self.output(id));
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn output(&self, id: u32) -> String {
        common::read(&self.jobs_dir.join(format!("slurm-{id}.out")))
    }

    fn ctld_log(&self) -> String {
        common::read(&self.cluster.layout.log().join("slurmctld.log"))
    }

    /// `sacct -D` states of every run of job `id`, oldest first, once accounting has
    /// recorded the end of its last run: slurmctld sends a job's end to
    /// slurmdbd asynchronously, so right after `squeue` shows a job
    /// COMPLETED, `sacct` can still say RUNNING.
    fn runs(&self, id: u32) -> Vec<String> {
        let mut runs = Vec::new();
        self.wait_until(id, "its last run's end in the accounting", |p| {
            let text = p.ok("sacct", &["-X", "-D", "-n", "-P", "-j", &id.to_string(), "-o", "State"]);
            runs = text.lines().map(|l| l.split_whitespace().next().unwrap_or("").to_string()).collect();
            runs.last().is_some_and(|s| !["RUNNING", "PENDING", "REQUEUED", "SUSPENDED"].contains(&s.as_str()))
        });
        runs
    }

    /// A time field (`Start`, `End`) of the job's last run, Unix seconds.
    fn sacct_time(&self, id: u32, field: &str) -> i64 {
        let out = self.slurm().cmd_env("sacct", &["-X", "-n", "-P", "-j", &id.to_string(), "-o", field], &[("SLURM_TIME_FORMAT", "%s")]);
        String::from_utf8_lossy(&out.stdout).lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(0)
    }

    /// GPUs per node allocated to running job `id` (its `AllocTRES`/`TRES` gres/gpu count).
    fn gpus(&self, id: u32) -> u32 {
        let j = self.job(id);
        let tres = j.get("AllocTRES").or_else(|| j.get("TRES")).cloned().unwrap_or_default();
        tres.split(',').find_map(|kv| kv.strip_prefix("gres/gpu=")).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Seconds since the Unix epoch.
fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A running elastic job on one GPU grows when the others free up and
/// nobody waits: signalled, checkpointed, requeued with its job id,
/// started on more GPUs, resumed from its checkpoint, and completed.
#[test]
fn elastic_job_grows_into_freed_gpus() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    // Three of the a100 GPUs and the v100 node busy: one a100 GPU left.
    let blockers = [p.block("a100-1", "a100", 3), p.block("v100-1", "v100", 4)];
    let id = p.trainer(true, 400, 200_000, 0.05, &[]);
    p.wait_state(id, &["RUNNING"]);
    let before = p.record(id);
    assert_eq!(before.decision.cell.gpus, 1, "the elastic job starts on the one free GPU: {before:?}");
    assert!(before.elastic.is_some());
    assert_eq!(p.job(id).get("Requeue").map(String::as_str), Some("1"), "an elastic job is requeueable");
    std::thread::sleep(Duration::from_secs(4)); // some progress to checkpoint
    p.cancel(&blockers);
    // Grown: requeued once, now on more GPUs.
    p.wait_until(id, "a grow", |p| p.record(id).restarts >= 1 && p.state(id) == "RUNNING");
    let after = p.record(id);
    assert!(after.decision.cell.gpus > 1, "grown to more GPUs: {after:?}");
    assert!(after.reconf_at.is_some() && after.reconf_cost_s > 0.0, "{after:?}");
    p.wait_until(id, "its new GPUs", |p| p.gpus(id) == after.decision.cell.gpus);
    p.wait_state(id, &["COMPLETED"]);
    let out = p.output(id);
    let saved: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("checkpoint: iteration ").and_then(|r| r.split('/').next()).and_then(|n| n.parse().ok()))
        .unwrap_or_else(|| panic!("no checkpoint line:\n{out}"));
    assert!(saved > 0, "{out}");
    assert!(out.contains(&format!("resumed: restart 1 from iteration {saved}/400")), "{out}");
    assert!(out.contains("done: 400 iterations"), "{out}");
    // The accounting keeps both runs under one job id.
    let runs = p.runs(id);
    assert!(runs.first().is_some_and(|s| s == "REQUEUED" || s == "FAILED") && runs.last().is_some_and(|s| s == "COMPLETED"), "{runs:?}");
}

/// A job without `--dl-elastic` in the same situation is never touched:
/// no signal, no requeue, same GPUs until it completes.
#[test]
fn a_job_without_the_opt_in_is_never_touched() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let blockers = [p.block("a100-1", "a100", 3), p.block("v100-1", "v100", 4)];
    let id = p.trainer(false, 300, 200_000, 0.05, &[]);
    p.wait_state(id, &["RUNNING"]);
    let before = p.record(id);
    assert!(before.elastic.is_none());
    p.cancel(&blockers);
    // Several decision passes, well past min_run_s.
    std::thread::sleep(Duration::from_secs(12));
    let now = p.record(id);
    assert_eq!((now.restarts, now.reconf_at), (0, None), "{now:?}");
    assert_eq!(p.job(id).get("Restarts").map(String::as_str), Some("0"));
    assert_eq!(now.decision.cell, before.decision.cell);
    p.wait_state(id, &["COMPLETED"]);
    assert!(!p.ctld_log().contains(&format!("JobId={id}:")) || !p.ctld_log().lines().any(|l| l.contains("elastic") && l.contains(&format!("JobId={id} "))));
    assert_eq!(p.runs(id), vec!["COMPLETED".to_string()]);
}

/// A job that ignores the signal is requeued after the grace period (never
/// cancelled), and runs again.
#[test]
fn a_job_that_ignores_the_signal_is_requeued_after_the_grace() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let id = p.signalled_job_ignoring_it("stubborn", "echo \"run restart=$CELLSCHED_RESTART dir=$CELLSCHED_CKPT_DIR\"");
    let signalled = Instant::now();
    // Still running through the grace: the signal was ignored.
    std::thread::sleep(Duration::from_secs(GRACE_S - 2));
    assert_eq!(p.state(id), "RUNNING");
    assert_eq!(p.record(id).restarts, 0);
    p.wait_until(id, "the requeue and restart", |p| p.record(id).restarts == 1 && p.state(id) == "RUNNING");
    assert!(signalled.elapsed() >= Duration::from_secs(GRACE_S - 2));
    p.wait_until(id, "the second run's output", |p| p.output(id).contains("run restart=1 dir="));
    let out = p.output(id);
    let dir = p.jobs_dir.join(".cellsched-ckpt").join(id.to_string());
    assert!(out.contains(&format!("dir={}", dir.display())), "{out}");
    assert!(dir.is_dir(), "the checkpoint dir exists");
    p.cancel(&[id]);
}

/// A signal that a slurmctld restart interrupts is carried through: the
/// restarted slurmctld adopts the job its record says was signalled in
/// this run and requeues it after the grace (it ignores the signal), on
/// its own record; the job is not left running past its reconfiguration.
/// slurmctld stays down until the grace has passed, so the job is due for
/// its requeue as soon as it is adopted, before its node registered with
/// the new slurmctld: its next run still gets its GPU, and no GPU stays
/// counted as in use after it.
#[test]
fn a_signalled_job_is_requeued_across_a_slurmctld_restart() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let id = p.signalled_job_ignoring_it("restart", "echo \"run restart=$CELLSCHED_RESTART\"");
    let due = p.record(id).reconf_at.unwrap() + GRACE_S as i64;
    common::stop_daemon(&p.cluster, "slurmctld", libc::SIGTERM, WAIT);
    while unix_now() < due {
        std::thread::sleep(Duration::from_millis(200));
    }
    Cluster::up(&p.spec).unwrap_or_else(|e| panic!("slurmctld restart: {e}"));
    p.wait_until(id, "the requeue and restart", |p| p.record(id).restarts == 1 && p.state(id) == "RUNNING");
    assert!(p.ctld_log().contains(&format!("elastic JobId={id} was signalled at")), "the restarted slurmctld did not adopt job {id}");
    p.wait_until(id, "the second run's output", |p| p.output(id).contains("run restart=1"));
    assert_runs_on_its_gpu(p, id);
    let node = p.job(id).get("NodeList").cloned().unwrap_or_default();
    p.cancel(&[id]);
    p.wait_for(&format!("free GPUs on {node} after job {id} ended"), |p| p.node_gpus_in_use(&node) == 0);
}

/// A restarted slurmctld requeues an adopted job only once the job's node
/// has registered with it: the node's slurmd is stopped across the restart
/// (it registers late), the grace passes and the job keeps running; once
/// the slurmd registers, the job is requeued, its next run gets its GPU,
/// and after it no GPU of the node stays counted as in use.
#[test]
fn a_job_is_requeued_after_a_slurmctld_restart_only_once_its_node_registered() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let id = p.signalled_job_ignoring_it("late-node", "echo \"run restart=$CELLSCHED_RESTART\"");
    let node = p.job(id).get("NodeList").cloned().expect("the running job's node");
    {
        let _late = Stopped::new(&p.cluster, &format!("slurmd-{node}"));
        common::stop_daemon(&p.cluster, "slurmctld", libc::SIGTERM, WAIT);
        // Only slurmctld: `Cluster::up` would wait for the stopped node.
        let ds = p.cluster.daemons().unwrap();
        ds.iter().find(|d| d.label == "slurmctld").unwrap().start(WAIT).unwrap_or_else(|e| panic!("slurmctld restart: {e}"));
        p.wait_for("slurmctld answering", |p| p.cmd("scontrol", &["ping"]).status.success() && p.cmd("scontrol", &["show", "job", &id.to_string()]).status.success());
        let waiting = format!("elastic JobId={id} (resume) is requeued once its nodes ({node}) register");
        p.wait_until(id, "the wait for its node", |p| p.ctld_log().contains(&waiting) || p.record(id).restarts > 0);
        assert_eq!((p.record(id).restarts, p.state(id)), (0, "RUNNING".to_string()), "job {id} was requeued before {node} registered");
    }
    p.wait_until(id, "the requeue and restart", |p| p.record(id).restarts == 1 && p.state(id) == "RUNNING");
    p.wait_until(id, "the second run's output", |p| p.output(id).contains("run restart=1"));
    assert_runs_on_its_gpu(p, id);
    let node = p.job(id).get("NodeList").cloned().unwrap_or_default();
    p.cancel(&[id]);
    p.wait_for(&format!("free GPUs on {node} after job {id} ended"), |p| p.node_gpus_in_use(&node) == 0);
}

/// Running job `id` holds one GPU, a device of its node (`scontrol show
/// job -d` names its index), and no GPU of the node is counted twice.
fn assert_runs_on_its_gpu(p: &Private, id: u32) {
    let detail = p.ok("scontrol", &["show", "job", "-d", &id.to_string()]);
    assert_eq!(p.gpus(id), 1, "{detail}");
    assert!(detail.contains("(IDX:"), "job {id} holds no GPU device:\n{detail}");
    let node = p.job(id).get("NodeList").cloned().unwrap_or_default();
    assert_eq!(p.node_gpus_in_use(&node), 1, "GPUs counted in use on {node} running only job {id}");
    assert!(!p.output(id).contains("no GPUs granted"), "{}", p.output(id));
}

/// A daemon of the cluster stopped (`SIGSTOP`) until this is dropped (`SIGCONT`).
struct Stopped(i32);

impl Stopped {
    fn new(cluster: &Cluster, label: &str) -> Stopped {
        let d = cluster.daemons().unwrap().into_iter().find(|d| d.label == label).unwrap_or_else(|| panic!("no daemon {label}"));
        let pid = d.running_pid().unwrap_or_else(|| panic!("{label} is not running"));
        // SAFETY: kill(2) on a pid of our own cluster.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a pid of our own cluster.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// A job that finishes on the signal (any exit code but 75) is left alone.
#[test]
fn a_job_that_finishes_during_the_grace_is_left_alone() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let id = p.elastic_with_gpus_to_grow_into("finisher", "trap 'echo finished; exit 0' USR1; sleep 600 & wait");
    p.wait_state(id, &["COMPLETED"]);
    assert!(p.output(id).contains("finished"));
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(p.state(id), "COMPLETED", "not requeued");
    assert_eq!(p.record(id).restarts, 0);
    assert_eq!(p.runs(id), vec!["COMPLETED".to_string()]);
}

/// A DL job pinned to `cell` that runs `script` (a pending job the elastic
/// thread may make room for), declaring `declared` iterations.
fn pinned(p: &Private, cell: &str, declared: u32, script: &str) -> u32 {
    let name = common::unique_name("waiting");
    let (cell, declared) = (format!("--dl-cell={cell}"), declared.to_string());
    p.submit(&["-J", &name, "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", &declared, &cell, "--wrap", script])
}

/// Shrink: a running elastic job holds the whole a100 node (a100x4); a
/// long job pinned to a100x2 waits. Halving the elastic job costs it less
/// (a100x2 is 1.83x slower per iteration, estimator) than the waiting job
/// gains, and the waiting job is not short enough to preempt for: the
/// elastic job is moved to a100x2, both run, and it completes from its checkpoint.
#[test]
fn elastic_job_shrinks_for_a_waiting_job_that_gains_more() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let id = p.trainer(true, 3000, 200_000, 0.05, &[]);
    p.wait_state(id, &["RUNNING"]);
    assert_eq!(p.record(id).decision.cell.to_string(), "a100x4x1", "the elastic job takes the whole idle a100 node");
    std::thread::sleep(Duration::from_secs(4));
    let w = pinned(p, "a100x2", 200_000, "sleep 20");
    p.wait_until(id, "a shrink", |p| p.record(id).restarts >= 1);
    let after = p.record(id);
    assert_eq!(after.decision.cell.to_string(), "a100x2x1", "{after:?}");
    p.wait_state(w, &["RUNNING", "COMPLETED"]);
    p.wait_until(id, "the restart on 2 GPUs", |p| p.state(id) == "RUNNING" && p.gpus(id) == 2);
    let log = p.ctld_log();
    assert!(log.lines().any(|l| l.contains(&format!("elastic move of JobId={id} to a100x2x1 for JobId={w}"))), "no move line for {id}/{w}");
    p.wait_state(id, &["COMPLETED"]);
    let out = p.output(id);
    assert!(out.contains("resumed: restart 1 from iteration") && out.contains("done: 3000 iterations"), "{out}");
    p.wait_state(w, &["COMPLETED"]);
}

/// Preempt-for-short (A-SRPT): a short job pinned to a100x4 waits for the
/// node a long elastic job holds; the elastic job is preempted (requeued on
/// its own Cell), the short job runs first, then the elastic job resumes
/// from its checkpoint and completes.
#[test]
fn elastic_job_is_preempted_for_a_much_shorter_job() {
    require_e2e!();
    let Some(g) = private() else { return };
    let p = g.as_ref().unwrap();
    let id = p.trainer(true, 3000, 200_000, 0.05, &[]);
    p.wait_state(id, &["RUNNING"]);
    assert_eq!(p.record(id).decision.cell.to_string(), "a100x4x1");
    std::thread::sleep(Duration::from_secs(4));
    let short = pinned(p, "a100x4", 20, "sleep 8");
    p.wait_until(id, "a preemption", |p| p.record(id).restarts >= 1);
    p.wait_state(short, &["RUNNING", "COMPLETED"]);
    let log = p.ctld_log();
    assert!(log.lines().any(|l| l.contains(&format!("elastic preempt of JobId={id} for JobId={short}"))), "no preempt line for {id}/{short}");
    p.wait_state(short, &["COMPLETED"]);
    p.wait_state(id, &["COMPLETED"]);
    let out = p.output(id);
    assert!(out.contains("resumed: restart 1 from iteration") && out.contains("done: 3000 iterations"), "{out}");
    // The short job ended before the elastic job's second run started.
    let end_short = p.sacct_time(short, "End");
    let start_again = p.sacct_time(id, "Start");
    assert!(end_short > 0 && end_short <= start_again, "short job ended {end_short}, elastic job restarted {start_again}");
}
