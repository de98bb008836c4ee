//! Shared fixture of the end-to-end tests: the live local cluster (brought
//! up once per test process, reused when already running), and helpers to
//! run Slurm commands against it.
//!
//! Tests of all modules run in parallel threads against the one cluster:
//! name jobs with [`unique_name`], never assume the cluster is empty, and
//! wait with generous timeouts. Live tests start with
//! `crate::common::require_e2e!();` and run only when `CELLSCHED_E2E=1`.
//! The cluster is left running for the next test process; scripts bring it
//! down with `cellsched cluster down`.
#![allow(dead_code)]

use cellsched_devcluster::{Cluster, LocalClusterSpec};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Job states after which a job never changes again.
pub const TERMINAL_STATES: &[&str] =
    &["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"];

/// True when live-cluster tests should run (`CELLSCHED_E2E=1`).
pub fn e2e_enabled() -> bool {
    std::env::var("CELLSCHED_E2E").map(|v| v == "1").unwrap_or(false)
}

/// Returns from the calling test (with a note) unless `CELLSCHED_E2E=1`.
macro_rules! require_e2e {
    () => {
        if !$crate::common::e2e_enabled() {
            eprintln!("skipped: set CELLSCHED_E2E=1");
            return;
        }
    };
}
pub(crate) use require_e2e;

/// The running cluster the tests share.
pub struct ClusterHandle {
    /// The library handle (spec, layout, ports, what `up` did).
    pub cluster: Cluster,
    /// `<dir>/etc/slurm.conf`, given to every Slurm command as `SLURM_CONF`.
    pub slurm_conf: PathBuf,
    /// Working directory of submitted jobs (their `slurm-N.out` land here).
    pub jobs_dir: PathBuf,
}

impl ClusterHandle {
    /// The spec the cluster was brought up with.
    pub fn spec(&self) -> &LocalClusterSpec {
        &self.cluster.spec
    }
    /// A file under the cluster's log directory (`slurmctld.log`, `slurmd-a100-1.log`).
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.cluster.layout.log().join(name)
    }
}

/// The spec of the test cluster: `LocalClusterSpec::from_env()` (so
/// `CELLSCHED_CLUSTER_DIR`, `CELLSCHED_PORT_BASE`, `CELLSCHED_PLUGIN_BUILD_DIR`
/// apply) with cellsched's plugins on.
pub fn test_spec() -> LocalClusterSpec {
    let mut spec = LocalClusterSpec::from_env().expect("cluster settings from the environment");
    spec.with_plugins = true;
    spec
}

/// Brings the cluster up once per test process (a running healthy cluster
/// with the same configuration is reused as is). Panics with the start-up
/// error, which names the failing step and its log tail.
pub fn cluster() -> &'static ClusterHandle {
    static HANDLE: OnceLock<ClusterHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let spec = test_spec();
        let t = Instant::now();
        let cluster = Cluster::up(&spec).unwrap_or_else(|e| panic!("cannot bring the test cluster up: {e}"));
        eprintln!(
            "test cluster at {} ({:?}, plugins {:?}) in {:.1} s",
            spec.dir.display(),
            cluster.outcome,
            cluster.plugins.names(),
            t.elapsed().as_secs_f64()
        );
        let jobs_dir = spec.dir.join("jobs");
        std::fs::create_dir_all(&jobs_dir).expect("create jobs dir");
        ClusterHandle { slurm_conf: cluster.layout.slurm_conf(), cluster, jobs_dir }
    })
}

/// Environment prefixes not passed from the test process to Slurm commands:
/// jobs must not inherit the harness's own settings (`CELLSCHED_E2E`, ...)
/// or a developer's `SLURM_*`/`SBATCH_*` defaults.
const SCRUBBED_ENV_PREFIXES: &[&str] = &["CELLSCHED_", "SLURM_", "SPANK_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SACCT_"];

/// Where Slurm commands run: any cluster's `slurm.conf` (the shared test
/// cluster's, a module's private one), the client binaries and the working
/// directory of submitted jobs. Commands get a scrubbed environment (see
/// [`SCRUBBED_ENV_PREFIXES`]) plus `SLURM_CONF`.
#[derive(Debug, Clone)]
pub struct SlurmAt {
    /// Directory of `sbatch`, `scontrol`, `sacct`, ...
    pub bin: PathBuf,
    /// The `slurm.conf` every command is given as `SLURM_CONF`.
    pub slurm_conf: PathBuf,
    /// Working directory (jobs' `slurm-N.out` land here).
    pub cwd: PathBuf,
}

impl SlurmAt {
    /// Runs Slurm command `name` (e.g. `sbatch`, `sacct`). Panics only when it cannot run.
    pub fn cmd(&self, name: &str, args: &[&str]) -> Output {
        self.cmd_env(name, args, &[])
    }

    /// Like [`SlurmAt::cmd`] with extra environment variables (e.g. the SPANK
    /// options' `CELLSCHED_DL_*` equivalents).
    pub fn cmd_env(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let prog = self.bin.join(name);
        scrubbed_command(&prog)
            .args(args)
            .env("SLURM_CONF", &self.slurm_conf)
            .envs(env.iter().copied())
            .current_dir(&self.cwd)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()))
    }

    /// stdout of a Slurm command, panicking with its stderr when it fails.
    pub fn ok(&self, name: &str, args: &[&str]) -> String {
        let out = self.cmd(name, args);
        assert!(out.status.success(), "{name} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The job's AdminComment, spaces and all: from slurmctld (its own line
    /// of `scontrol show job`), else from accounting (`sacct -X -n -P`).
    /// `Some("")` when the job has none; `None` when neither knows the job.
    pub fn admin_comment(&self, jobid: u32) -> Option<String> {
        let id = jobid.to_string();
        let out = self.cmd("scontrol", &["show", "job", &id]);
        if out.status.success() {
            if let Some(c) = admin_comment_of_scontrol(&String::from_utf8_lossy(&out.stdout)) {
                return Some(c);
            }
        }
        let out = self.cmd("sacct", &["-X", "-n", "-P", "-j", &id, "-o", "AdminComment"]);
        let text = String::from_utf8_lossy(&out.stdout);
        out.status.success().then(|| text.lines().next().map(|l| l.trim().to_string())).flatten()
    }
}

/// The AdminComment in multi-line `scontrol show job` output (`None` without
/// a job record; `Some("")` for a job without one). scontrol puts it on a
/// line of its own, so it may hold spaces.
pub fn admin_comment_of_scontrol(text: &str) -> Option<String> {
    if !text.contains("JobId=") {
        return None;
    }
    Some(text.lines().find_map(|l| l.trim().strip_prefix("AdminComment=")).unwrap_or("").trim().to_string())
}

/// A `Command` for `prog` without the harness's Slurm/cellsched variables.
pub fn scrubbed_command(prog: &Path) -> Command {
    let mut cmd = Command::new(prog);
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str() {
            if SCRUBBED_ENV_PREFIXES.iter().any(|p| k.starts_with(p)) {
                cmd.env_remove(k);
            }
        }
    }
    cmd
}

impl ClusterHandle {
    /// Slurm commands against this cluster, run in its jobs directory.
    pub fn slurm(&self) -> SlurmAt {
        SlurmAt { bin: self.spec().slurm_bin.clone(), slurm_conf: self.slurm_conf.clone(), cwd: self.jobs_dir.clone() }
    }
}

/// Runs Slurm command `name` (e.g. `sbatch`, `sacct`) against the test
/// cluster, in its jobs directory, with a scrubbed environment (see
/// [`slurm_cmd_env`] to pass variables). Panics only when it cannot run.
pub fn slurm_cmd(name: &str, args: &[&str]) -> Output {
    slurm_cmd_env(name, args, &[])
}

/// Like [`slurm_cmd`] with extra environment variables (e.g. the SPANK
/// options' `CELLSCHED_DL_*` equivalents).
pub fn slurm_cmd_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    cluster().slurm().cmd_env(name, args, env)
}

/// stdout of a Slurm command, panicking with its stderr when it fails.
pub fn slurm_ok(name: &str, args: &[&str]) -> String {
    cluster().slurm().ok(name, args)
}

/// The AdminComment of a job of the test cluster (see [`SlurmAt::admin_comment`]).
pub fn admin_comment(jobid: u32) -> Option<String> {
    cluster().slurm().admin_comment(jobid)
}

/// A job name unique across threads and test processes: `cs-<tag>-<pid>-<n>`.
pub fn unique_name(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("cs-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// `sbatch --parsable ARGS`: the job id, or sbatch's stderr when refused.
pub fn submit(args: &[&str]) -> Result<u32, String> {
    let mut full = vec!["--parsable"];
    full.extend_from_slice(args);
    let out = slurm_cmd("sbatch", &full);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(stderr);
    }
    // --parsable prints "ID" or "ID;CLUSTER".
    stdout
        .trim()
        .split(';')
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("unexpected sbatch output {stdout:?}; stderr: {stderr}"))
}

/// `scontrol show job -o ID` as key → value (`None` once slurmctld forgot the job).
pub fn scontrol_job(jobid: u32) -> Option<HashMap<String, String>> {
    let out = slurm_cmd("scontrol", &["show", "job", "-o", &jobid.to_string()]);
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let map = parse_key_values(&text);
    (!map.is_empty()).then_some(map)
}

/// Parses Slurm's `Key=Value Key2=Value2` one-line records (values without spaces).
pub fn parse_key_values(text: &str) -> HashMap<String, String> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The job's current state (`PENDING`, `RUNNING`, `COMPLETED`, ...), from
/// slurmctld, or from sacct once slurmctld has purged it.
pub fn job_state(jobid: u32) -> Option<String> {
    if let Some(m) = scontrol_job(jobid) {
        return m.get("JobState").cloned();
    }
    let out = slurm_cmd("sacct", &["-X", "-n", "-P", "-j", &jobid.to_string(), "-o", "State"]);
    let text = String::from_utf8_lossy(&out.stdout);
    // "CANCELLED by 0" → "CANCELLED".
    text.lines().next().and_then(|l| l.split_whitespace().next()).map(str::to_string)
}

/// Waits until the job is in one of `states`; returns that state. Fails
/// early when the job reaches another terminal state, and on timeout.
pub fn wait_for_state(jobid: u32, states: &[&str], timeout: Duration) -> Result<String, String> {
    let start = Instant::now();
    let mut last = None;
    loop {
        let st = job_state(jobid);
        if let Some(s) = &st {
            if states.contains(&s.as_str()) {
                return Ok(s.clone());
            }
            if TERMINAL_STATES.contains(&s.as_str()) {
                return Err(format!("job {jobid} ended {s}, wanted one of {states:?}"));
            }
        }
        last = st.or(last);
        if start.elapsed() > timeout {
            return Err(format!("job {jobid} still {last:?} after {} s, wanted one of {states:?}", timeout.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `sacct -X -j ID -o FIELDS` of the job allocation as field → value,
/// waiting (up to 30 s) for slurmdbd to have the job. Keys are the field
/// names as given.
pub fn sacct_fields(jobid: u32, fields: &[&str]) -> HashMap<String, String> {
    sacct_fields_when(jobid, fields, Duration::from_secs(30), |_| true)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`sacct_fields`] but polls until `ready` accepts the row (accounting
/// records lag slurmctld by a moment), up to `timeout`.
pub fn sacct_fields_when(
    jobid: u32,
    fields: &[&str],
    timeout: Duration,
    ready: impl Fn(&HashMap<String, String>) -> bool,
) -> Result<HashMap<String, String>, String> {
    let start = Instant::now();
    let format = fields.join(",");
    let mut last = None;
    loop {
        let out = slurm_cmd("sacct", &["-X", "-n", "-P", "-j", &jobid.to_string(), "-o", &format]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(line) = text.lines().next() {
            let values: Vec<&str> = line.split('|').collect();
            if values.len() == fields.len() {
                let map: HashMap<String, String> =
                    fields.iter().zip(values).map(|(f, v)| (f.to_string(), v.to_string())).collect();
                if ready(&map) {
                    return Ok(map);
                }
                last = Some(map);
            }
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "sacct has no matching record of job {jobid} after {} s; last {last:?}; stderr: {}",
                timeout.as_secs(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Path of the built `cellsched` CLI.
pub fn cellsched_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cellsched"))
}

/// Runs the CLI with `args` (no cluster needed).
pub fn cellsched(args: &[&str]) -> Output {
    Command::new(cellsched_bin()).args(args).output().expect("run cellsched")
}

/// True when the plugin `.so` built by cargo (`libNAME.so`) exists in the
/// plugin build dir the cluster installs from.
pub fn plugin_built(lib_file: &str) -> bool {
    test_spec().plugin_build_dir.join(lib_file).is_file()
}

/// Contents of a text file ("" when missing).
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn key_values_parse() {
    let m = parse_key_values("JobId=7 JobName=x JobState=PENDING Reason=Resources TRES=cpu=1,gres/gpu=2");
    assert_eq!(m["JobState"], "PENDING");
    assert_eq!(m["TRES"], "cpu=1,gres/gpu=2");
    assert_eq!(m.len(), 5);
}

#[test]
fn admin_comment_keeps_spaces() {
    let text = "JobId=7 JobName=x\n   UserId=root(0) GroupId=root(0)\n   AdminComment=cellsched: cell=a100x4x1 nodes=1 model=gpt2 \n   JobState=PENDING\n";
    assert_eq!(admin_comment_of_scontrol(text).as_deref(), Some("cellsched: cell=a100x4x1 nodes=1 model=gpt2"));
    assert_eq!(admin_comment_of_scontrol("JobId=8 JobName=y\n   JobState=RUNNING\n").as_deref(), Some(""));
    assert_eq!(admin_comment_of_scontrol("slurm_load_jobs error: Invalid job id specified"), None);
}

#[test]
fn unique_names_differ() {
    let a = unique_name("t");
    let b = unique_name("t");
    assert_ne!(a, b);
    assert!(a.starts_with(&format!("cs-t-{}-", std::process::id())));
}

/// Creates (once) a local user for the multi-user tests; returns its uid.
pub fn test_user(name: &str) -> u32 {
    let id = |n: &str| Command::new("id").args(["-u", n]).output().ok().filter(|o| o.status.success());
    if id(name).is_none() {
        let st = Command::new("useradd").args(["--no-create-home", "--shell", "/bin/sh", name]).status().expect("useradd");
        assert!(st.success() || id(name).is_some(), "useradd {name} failed");
    }
    String::from_utf8_lossy(&id(name).expect("user exists").stdout).trim().parse().expect("uid")
}

/// Runs `prog args` as `user` (Slurm commands from `slurm_bin`, else from
/// PATH) with `SLURM_CONF=slurm_conf`, in `/`.
pub fn run_as(user: &str, slurm_bin: &Path, slurm_conf: &Path, prog: &str, args: &[&str]) -> Output {
    let bin = slurm_bin.join(prog);
    let path = if bin.is_file() { bin.display().to_string() } else { prog.to_string() };
    Command::new("runuser")
        .args(["-u", user, "--", "env", &format!("SLURM_CONF={}", slurm_conf.display()), &path])
        .args(args)
        .current_dir("/")
        .output()
        .expect("runuser")
}

/// Sends `sig` to the daemon `label` of `cluster` and waits until it is
/// gone (a zombie of this process counts as gone: the cluster starts its
/// daemons in the foreground); fails after `wait`.
pub fn stop_daemon(cluster: &Cluster, label: &str, sig: i32, wait: Duration) {
    let d = cluster.daemons().unwrap().into_iter().find(|d| d.label == label).unwrap_or_else(|| panic!("no daemon {label}"));
    let pid = d.running_pid().unwrap_or_else(|| panic!("{label} is not running"));
    // SAFETY: kill(2) on a pid of our own cluster.
    unsafe { libc::kill(pid, sig) };
    let t = Instant::now();
    while d.running_pid().is_some() && t.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(d.running_pid().is_none(), "{label} did not stop");
}
