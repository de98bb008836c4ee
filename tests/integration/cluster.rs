//! End-to-end tests of the live local cluster: idempotent `up`, typed GPU
//! jobs landing on the right nodes and in `sacct`, our plugins loaded (or
//! stock Slurm when they are not built), and clear start-up errors.
use crate::common::{self, cluster, require_e2e, sacct_fields_when, slurm_ok, submit, unique_name, wait_for_state};
use cellsched_devcluster::{Cluster, ClusterError, LocalClusterSpec, JobPolicy, UpOutcome};
use std::path::PathBuf;
use std::time::Duration;

const JOB_TIMEOUT: Duration = Duration::from_secs(180);

/// A scratch spec in its own dir and port range: `offset` (a multiple of
/// 10; each cluster needs 8 ports) above the test cluster's base, which
/// itself uses base..base+7, so all stay within 50 ports of the base.
fn scratch_spec(tag: &str, offset: u16) -> LocalClusterSpec {
    let mut spec = common::test_spec();
    spec.dir = std::env::temp_dir().join(format!("cs-e2e-{tag}-{}", std::process::id()));
    spec.port_base += offset;
    let _ = std::fs::remove_dir_all(&spec.dir);
    spec
}

#[test]
fn up_is_idempotent_and_cli_reports_it() {
    require_e2e!();
    let c = cluster();
    let again = Cluster::up(&common::test_spec()).expect("second up");
    assert_eq!(again.outcome, Some(UpOutcome::AlreadyUp));
    let dir = c.spec().dir.display().to_string();
    let pb = c.spec().port_base.to_string();
    let out = common::cellsched(&["cluster", "up", "--dir", &dir, "--port-base", &pb]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("already up"), "{err}");
    let out = common::cellsched(&["cluster", "status", "--dir", &dir, "--port-base", &pb]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("stopped"), "{text}");
    for n in c.spec().node_names() {
        assert!(text.contains(&format!("slurmd-{n}")), "{text}");
    }
    assert!(text.contains("gpu:a100:4") && text.contains("gpu:v100:8"), "{text}");
}

#[test]
fn typed_gpu_jobs_run_on_their_type_and_show_in_sacct() {
    require_e2e!();
    cluster();
    let cases = [("a100", 2, "gpu:a100:2"), ("v100", 8, "gpu:v100:8"), ("a10", 1, "gpu:a10:1")];
    let mut jobs = Vec::new();
    for (ty, n, gres) in cases {
        let name = unique_name(&format!("typed-{ty}"));
        let gres_arg = format!("--gres={gres}");
        let id = submit(&["-J", &name, &gres_arg, "--wrap", "sleep 1"]).unwrap_or_else(|e| panic!("sbatch {gres}: {e}"));
        jobs.push((id, ty, n));
    }
    for (id, ty, n) in jobs {
        wait_for_state(id, &["COMPLETED"], JOB_TIMEOUT).unwrap();
        let f = sacct_fields_when(id, &["JobID", "State", "AllocTRES", "NodeList"], Duration::from_secs(30), |m| {
            m["State"] == "COMPLETED"
        })
        .unwrap();
        assert!(f["NodeList"].starts_with(&format!("{ty}-")), "job {id} ran on {} instead of a {ty} node", f["NodeList"]);
        let want = format!("gres/gpu:{ty}={n}");
        assert!(f["AllocTRES"].split(',').any(|t| t == want), "job {id}: AllocTRES {} lacks {want}", f["AllocTRES"]);
    }
}

/// With the `.so` files built, each plugin is configured, mapped into
/// slurmctld and named in its log; without them the cluster is stock Slurm.
#[test]
fn plugins_loaded_when_built_else_stock() {
    require_e2e!();
    let c = cluster();
    // Slurm 22.05's `scontrol show config` prints PrioritySiteFactorPlugin as
    // (null) even when loaded, so the proof is slurm.conf + the mapped file + the log.
    let conf = common::read(&c.slurm_conf);
    let pid = common::read(&c.cluster.layout.pid_file("slurmctld")).trim().to_string();
    let maps = common::read(&PathBuf::from(format!("/proc/{pid}/maps")));
    // Only the log of the running slurmctld (the file appends across restarts).
    let full_log = common::read(&c.log_path("slurmctld.log"));
    let log = full_log.rfind("started on cluster").map_or(full_log.as_str(), |i| &full_log[i..]);
    for (lib, line, so, ty) in [
        ("libsite_factor_cellsched.so", "PrioritySiteFactorPlugin=site_factor/cellsched", "site_factor_cellsched.so", "site_factor/cellsched"),
        ("libjob_submit_cellsched.so", "JobSubmitPlugins=cellsched", "job_submit_cellsched.so", "job_submit/cellsched"),
    ] {
        let configured = conf.lines().any(|l| l == line);
        if common::plugin_built(lib) {
            assert!(configured, "slurm.conf lacks {line}");
            assert!(maps.contains(so), "{so} is not mapped into slurmctld (pid {pid})");
            assert!(log.lines().any(|l| l.contains(ty) && l.contains("loaded")), "slurmctld.log has no '{ty} ... loaded' line");
        } else {
            eprintln!("note: {lib} not built; checking stock behaviour");
            assert!(!configured, "{line} configured although {lib} is not built");
            assert!(!maps.contains(so));
        }
    }
    let job_submit = slurm_ok("scontrol", &["show", "config"])
        .lines()
        .find(|l| l.starts_with("JobSubmitPlugins "))
        .map(|l| l.to_string())
        .unwrap_or_default();
    assert_eq!(
        job_submit.ends_with("= cellsched"),
        common::plugin_built("libjob_submit_cellsched.so"),
        "scontrol show config: {job_submit}"
    );
    let stack = common::read(&c.cluster.layout.etc().join("plugstack.conf"));
    if common::plugin_built("libspank_cellsched.so") {
        assert!(stack.lines().any(|l| l.starts_with("optional ") && l.contains("spank_cellsched.so")), "{stack}");
        let help = common::slurm_cmd("sbatch", &["--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(text.contains("cellsched"), "sbatch --help does not list the SPANK options:\n{text}");
    } else {
        assert!(!stack.contains("spank_cellsched"), "{stack}");
    }
}

#[test]
fn busy_port_is_named_in_the_error() {
    require_e2e!();
    let spec = scratch_spec("port", 40);
    let port = spec.port_base + 2; // MariaDB's port
    let _holder = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind a test port");
    match Cluster::up(&spec) {
        Err(ClusterError::PortInUse { port: p, purpose, holder }) => {
            assert_eq!(p, port);
            assert_eq!(purpose, "MariaDB");
            assert!(holder.contains(&std::process::id().to_string()), "holder {holder:?}");
        }
        other => panic!("expected PortInUse, got {other:?}"),
    }
    // The CLI says the same in words and exits non-zero.
    let out = common::cellsched(&[
        "cluster",
        "up",
        "--dir",
        &spec.dir.display().to_string(),
        "--port-base",
        &spec.port_base.to_string(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("port {port}")) && err.contains("already in use"), "{err}");
    let _ = std::fs::remove_dir_all(&spec.dir);
}

/// A cluster that fails part-way (slurmctld dies at start) stops MariaDB
/// and slurmdbd again and reports the failing step with its output.
#[test]
fn half_started_cluster_is_cleaned_up() {
    require_e2e!();
    let mut spec = scratch_spec("half", 20);
    let sbin = spec.dir.join("fake-sbin");
    std::fs::create_dir_all(&sbin).unwrap();
    for d in ["slurmd", "slurmdbd"] {
        std::os::unix::fs::symlink(spec.slurm_sbin.join(d), sbin.join(d)).unwrap();
    }
    let fake = sbin.join("slurmctld");
    std::fs::write(&fake, "#!/bin/sh\necho 'fatal: simulated slurmctld start failure' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    spec.slurm_sbin = sbin;
    let err = Cluster::up(&spec).expect_err("fake slurmctld must fail");
    let text = err.to_string();
    assert!(text.contains("starting slurmctld") && text.contains("simulated slurmctld start failure"), "{text}");
    let status = Cluster::open(&spec).unwrap().status();
    assert!(status.daemons.iter().all(|d| d.pid.is_none()), "left running:\n{status}");
    // MariaDB and slurmdbd had been up (their logs exist).
    assert!(spec.dir.join("log/slurmdbd.log").is_file());
    let _ = std::fs::remove_dir_all(&spec.dir);
}

/// MariaDB that cannot start (its system tables are missing) gives an
/// error naming MariaDB with its log tail, and nothing is left running.
#[test]
fn mariadb_failure_is_reported_with_its_log() {
    require_e2e!();
    let spec = scratch_spec("mariadb", 30);
    // An existing but empty data dir: init is skipped, mariadbd cannot open its tables.
    std::fs::create_dir_all(spec.dir.join("mariadb/mysql")).unwrap();
    let err = Cluster::up(&spec).expect_err("broken data dir must fail");
    let text = err.to_string();
    assert!(text.contains("mariadb"), "{text}");
    assert!(matches!(err, ClusterError::StepFailed { .. }), "{err:?}");
    let status = Cluster::open(&spec).unwrap().status();
    assert!(status.daemons.iter().all(|d| d.pid.is_none()), "left running:\n{status}");
    let _ = std::fs::remove_dir_all(&spec.dir);
}

/// On a scratch cluster: a changed configuration restarts it, an unchanged
/// one is left alone, and `down` is idempotent and stops everything.
#[test]
fn config_change_restarts_and_down_is_idempotent() {
    require_e2e!();
    let mut spec = scratch_spec("restart", 10);
    spec.with_plugins = false;
    let c = Cluster::up(&spec).unwrap_or_else(|e| panic!("scratch up: {e}"));
    assert_eq!(c.outcome, Some(UpOutcome::Started));
    spec.cellsched_toml = Some("# changed by the restart test\n".into());
    let c = Cluster::up(&spec).unwrap_or_else(|e| panic!("scratch restart: {e}"));
    assert_eq!(c.outcome, Some(UpOutcome::Restarted { reason: "configuration changed".into() }));
    assert_eq!(common::read(&c.layout.cellsched_toml()), "# changed by the restart test\n");
    assert!(c.status().plugins.is_empty(), "--no-plugins must give stock Slurm");
    if common::plugin_built("libsite_factor_cellsched.so") {
        // Switching plugins on restarts the running cluster with them loaded.
        spec.with_plugins = true;
        let c = Cluster::up(&spec).unwrap_or_else(|e| panic!("scratch restart with plugins: {e}"));
        assert!(matches!(c.outcome, Some(UpOutcome::Restarted { .. })), "{:?}", c.outcome);
        assert!(c.status().plugins.contains(&"site_factor/cellsched"));
    }
    let c = Cluster::up(&spec).unwrap();
    assert_eq!(c.outcome, Some(UpOutcome::AlreadyUp));
    assert!(c.status().all_running());
    let stopped = c.down(JobPolicy::Cancel).unwrap();
    assert_eq!(stopped.len(), 3 + spec.node_names().len(), "{stopped:?}");
    assert!(c.down(JobPolicy::Cancel).unwrap().is_empty());
    assert!(c.status().daemons.iter().all(|d| d.pid.is_none()));
    let _ = std::fs::remove_dir_all(&spec.dir);
}

/// `cluster up` on a partly-up cluster starts what is down and never
/// cancels a job: each daemon in turn is killed, `up` repairs the cluster,
/// and a running and a pending job are still there. A plain `down` keeps
/// them too; only `down --cancel-jobs` cancels.
#[test]
fn jobs_survive_up_after_each_daemon_is_killed_and_plain_down() {
    require_e2e!();
    let mut spec = scratch_spec("repair", 80);
    spec.with_plugins = false;
    let c = Cluster::up(&spec).unwrap_or_else(|e| panic!("scratch up: {e}"));
    let sl = common::SlurmAt { bin: spec.slurm_bin.clone(), slurm_conf: c.layout.slurm_conf(), cwd: spec.dir.clone() };
    let sub = |args: &[&str]| -> u32 {
        let out = sl.ok("sbatch", &[&["--parsable"], args].concat());
        out.trim().split(';').next().unwrap().parse().unwrap_or_else(|_| panic!("sbatch said {out}"))
    };
    let running = sub(&["--gres=gpu:a10:1", "-o", "/dev/null", "--wrap", "sleep 600"]);
    let pending = sub(&["--hold", "--gres=gpu:a100:1", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let state = |id: u32| -> String {
        let out = sl.cmd("squeue", &["-h", "-j", &id.to_string(), "-o", "%T"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let t = std::time::Instant::now();
    while state(running) != "RUNNING" && t.elapsed() < JOB_TIMEOUT {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(state(running), "RUNNING");
    for label in ["slurmd-a10-1", "slurmctld", "slurmdbd", "mariadb"] {
        let d = c.daemons().unwrap().into_iter().find(|d| d.label == label).unwrap_or_else(|| panic!("no daemon {label}"));
        let pid = d.running_pid().unwrap_or_else(|| panic!("{label} not running"));
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t = std::time::Instant::now();
        while d.running_pid().is_some() && t.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(d.running_pid().is_none(), "{label} did not stop");
        let again = Cluster::up(&spec).unwrap_or_else(|e| panic!("up after killing {label}: {e}"));
        match &again.outcome {
            Some(UpOutcome::Repaired { started }) => assert_eq!(started, &vec![label.to_string()], "{label}"),
            other => panic!("after killing {label}: {other:?}"),
        }
        assert_eq!(state(running), "RUNNING", "running job after repairing {label}");
        assert_eq!(state(pending), "PENDING", "pending job after repairing {label}");
    }
    // A plain down keeps the queue; the next up finds it again.
    c.down(JobPolicy::Keep).unwrap();
    let again = Cluster::up(&spec).unwrap_or_else(|e| panic!("up after down: {e}"));
    assert_eq!(again.outcome, Some(UpOutcome::Started));
    assert_eq!(state(pending), "PENDING", "pending job after down + up");
    assert_eq!(state(running), "RUNNING", "running job after down + up");
    // Only an explicit --cancel-jobs cancels.
    let dir = spec.dir.display().to_string();
    let pb = spec.port_base.to_string();
    let out = common::cellsched(&["cluster", "down", "--cancel-jobs", "--no-plugins", "--dir", &dir, "--port-base", &pb]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancelled"));
    let _ = std::fs::remove_dir_all(&spec.dir);
}
