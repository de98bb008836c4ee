//! End-to-end test on an emulated 1,000-node cluster (`cluster up --nodes
//! 1000`: one front-end slurmd stands for every node). Needs the front-end
//! Slurm build (`scripts/slurm.sh build 22.05.8 front-end`, about 10 min on
//! 2 cores), so it runs only with `CELLSCHED_E2E_BIG=1` (and
//! `CELLSCHED_E2E=1`); with the variable set, a missing build fails the test.
use crate::common::{self, require_e2e, TERMINAL_STATES};
use cellsched_devcluster::{Cluster, JobPolicy};
use std::time::{Duration, Instant};

/// Brings the cluster down (cancelling its jobs) when the test ends, pass or fail.
struct Down(Cluster);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = self.0.down(JobPolicy::Cancel);
    }
}

fn wait_terminal(sl: &common::SlurmAt, id: u32) -> String {
    let t = Instant::now();
    loop {
        let out = sl.cmd("scontrol", &["show", "job", "-o", &id.to_string()]);
        let kv = common::parse_key_values(&String::from_utf8_lossy(&out.stdout));
        let state = kv.get("JobState").cloned().unwrap_or_default();
        if TERMINAL_STATES.contains(&state.as_str()) || t.elapsed() > Duration::from_secs(120) {
            return state;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn emulated_1000_node_cluster_places_dl_jobs_and_leaves_plain_ones() {
    require_e2e!();
    if std::env::var("CELLSCHED_E2E_BIG").map_or(true, |v| v != "1") {
        eprintln!("skipped: set CELLSCHED_E2E_BIG=1 (needs scripts/slurm.sh build 22.05.8 front-end)");
        return;
    }
    let mut spec = common::test_spec();
    spec.dir = std::env::temp_dir().join(format!("cs-e2e-big-{}", std::process::id()));
    spec.port_base += 180;
    let _ = std::fs::remove_dir_all(&spec.dir);
    let own_sbin = std::env::var_os("CELLSCHED_SLURM_SBIN").is_some_and(|v| !v.is_empty());
    spec.emulate(1000, own_sbin).expect("emulated spec");
    let c = Cluster::up(&spec).unwrap_or_else(|e| panic!("cannot bring the emulated cluster up: {e}"));
    let c = Down(c);
    std::fs::create_dir_all(spec.dir.join("jobs")).unwrap();
    let sl = common::SlurmAt { bin: spec.slurm_bin.clone(), slurm_conf: c.0.layout.slurm_conf(), cwd: spec.dir.join("jobs") };

    // 1,000 idle nodes of three GPU types.
    let sinfo = sl.ok("sinfo", &["-h", "-N", "-o", "%N %T %G"]);
    let idle: Vec<&str> = sinfo.lines().filter(|l| l.contains(" idle ")).collect();
    assert_eq!(idle.len(), 1000, "{sinfo}");
    for g in ["gpu:a100:8", "gpu:v100:8", "gpu:a10:4"] {
        assert!(idle.iter().any(|l| l.ends_with(g)), "no idle node with {g}: {sinfo}");
    }

    // A DL job with an untyped GPU count: cellsched picks the type (a node
    // feature) and keeps the count; it runs on nodes of that type.
    let env = [("CELLSCHED_DL_MODEL", "gpt2"), ("CELLSCHED_DL_BATCH", "32"), ("CELLSCHED_DL_ITERS", "10")];
    let out = sl.cmd_env("sbatch", &["--parsable", "--gres=gpu:4", "--wrap", "true"], &env);
    assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
    let dl: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("job id");
    let ac = sl.admin_comment(dl).unwrap_or_default();
    assert!(ac.starts_with("cellsched: cell="), "DL job {dl} AdminComment: {ac:?}");
    let cell_type = ac.trim_start_matches("cellsched: cell=").split(|c: char| c == 'x').next().unwrap().to_string();
    assert!(["a100", "v100", "a10"].contains(&cell_type.as_str()), "{ac}");
    assert!(ac.contains("gpus=4"), "the user's GPU count is kept: {ac}");
    assert_eq!(wait_terminal(&sl, dl), "COMPLETED");
    let kv = common::parse_key_values(&sl.ok("scontrol", &["show", "job", "-o", &dl.to_string()]));
    assert!(kv["NodeList"].starts_with(&format!("{cell_type}-")), "ran on {} for a {cell_type} Cell", kv["NodeList"]);

    // A plain job is untouched and runs where it asked.
    let out = sl.cmd("sbatch", &["--parsable", "--gres=gpu:1", "-C", "a10", "--wrap", "true"]);
    assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
    let plain: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("job id");
    assert_eq!(sl.admin_comment(plain).as_deref(), Some(""));
    assert_eq!(wait_terminal(&sl, plain), "COMPLETED");
    let kv = common::parse_key_values(&sl.ok("scontrol", &["show", "job", "-o", &plain.to_string()]));
    assert!(kv["NodeList"].starts_with("a10-"), "{:?}", kv["NodeList"]);

    // No node went DOWN at the front end's registrations (see patch_front_end in scripts/slurm.sh).
    let log = std::fs::read_to_string(c.0.layout.log().join("slurmctld.log")).unwrap_or_default();
    assert!(!log.contains("state to DOWN"), "nodes were set DOWN: {}", log.lines().find(|l| l.contains("DOWN")).unwrap_or(""));
}
