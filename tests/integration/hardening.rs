//! Hardening: inputs that once crashed or hung a tool now get a clear
//! refusal (no cluster needed unless a test says so).
use crate::common::cellsched;
use std::path::PathBuf;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh private directory for one test's files, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("cellsched-hardening-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Refused with a usage or input error (exit 1 or 2) naming `want`, not a
/// panic (exit 101) or a signal.
fn assert_refused(args: &[&str], want: &str) {
    let o = cellsched(args);
    let e = stderr(&o);
    assert!(matches!(o.status.code(), Some(1) | Some(2)), "{args:?}: {:?}\n{e}", o.status);
    assert!(!e.contains("panicked"), "{args:?}: {e}");
    assert!(e.contains(want), "{args:?}: expected '{want}' in:\n{e}");
}

/// Issue 31 item 8: each crash the probe found, now a refusal with the
/// shared cap (core::limits) in the message.
#[test]
fn extreme_counts_are_refused_not_crashed() {
    let max = u32::MAX.to_string();
    assert_refused(&["estimate", "--model", "gpt__125M", "--batch", &max, "--gpu", "a100", "--gpus", "4"], "1..=16777216");
    assert_refused(&["estimate", "--model", "gpt__125M", "--batch", "64", "--gpu", "a100", "--gpus", &max], "1..=4096");
    assert_refused(&["estimate", "--model", "gpt__125M", "--batch", "64", "--gpu", "a100", "--gpus", "4", "--gpus-per-node", &max], "1..=64");
    assert_refused(&["cells", "--model", "gpt__125M", "--batch", "16", "--nodes", &max], "1..=65536");
    assert_refused(&["cells", "--model", "gpt__125M", "--batch", "16", "--max-gpus", &max], "1..=4096");
    assert_refused(&["whatif", "--dl-model", "gpt__125M", "--dl-batch", &max], "1..=16777216");
    assert_refused(&["whatif", "--dl-model", "gpt__125M", "--dl-batch", "16", "--dl-iters", "99999999999999999999"], "1..=1000000000000");
    let d = TempDir::new("caps");
    let header = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n";
    let trace = d.file("big-batch.csv", &format!("{header}1,0,10,gpt__125M,0,{max},4,a100\n"));
    assert_refused(&["sim", "--trace", &trace, "--cluster", "etc/sim/cluster.toml", "--policy", "cellsched"], "batch_size");
    let trace = d.file("big-gpus.csv", &format!("{header}1,0,10,gpt__125M,0,64,{max},a100\n"));
    assert_refused(&["sim", "--trace", &trace, "--cluster", "etc/sim/cluster.toml", "--policy", "cellsched"], "num_gpu");
    let cluster = d.file("big.toml", &format!("[[group]]\ngpu_type = \"a100\"\nnodes = {max}\ngpus_per_node = 4\n"));
    assert_refused(&["sim", "--trace", "etc/sim/trace.csv", "--cluster", &cluster, "--policy", "slurm"], "1..=65536");
    // At the caps themselves the tools answer.
    let o = cellsched(&["estimate", "--model", "gpt__125M", "--batch", "16777216", "--gpu", "a100", "--gpus", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cellsched(&["cells", "--model", "gpt__125M", "--batch", "16", "--nodes", "65536", "--max-gpus", "64", "--top", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Runs `cellsched ARGS` against the test cluster; fails the test if it has
/// not finished after `guard` (a hang guard, not a timing assertion).
fn cellsched_on_cluster_guarded(args: &[&str], guard: std::time::Duration) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut child = Command::new(crate::common::cellsched_bin())
        .args(args)
        .env("SLURM_CONF", &crate::common::cluster().slurm_conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cellsched");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > guard {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cellsched {args:?} still running after {guard:?}: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    child.wait_with_output().expect("output")
}

/// Issue 31 item 7: `report --iter-log` on a job whose output path became a
/// FIFO or a symlink to /dev/zero finishes, warns and measures the job
/// another way; the regular file still gives the iter-log measurement.
#[test]
fn report_iter_log_refuses_fifos_and_symlinks() {
    use crate::common::{require_e2e, submit, wait_for_state};
    require_e2e!();
    let d = TempDir::new("iterlog");
    let out = d.0.join("%j.out");
    let id = submit(&["-o", out.to_str().unwrap(), "--wrap", "echo cellsched-iter 0.25; echo cellsched-iter 0.25"]).expect("submit");
    wait_for_state(id, &["COMPLETED"], std::time::Duration::from_secs(180)).expect("job completes");
    let file = d.0.join(format!("{id}.out"));
    let json = |pattern: &str| {
        let o = cellsched_on_cluster_guarded(&["report", "--jobs", &id.to_string(), "--json", "--iter-log", pattern], std::time::Duration::from_secs(120));
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        (v["jobs"][0]["measured_from"].clone(), stderr(&o))
    };
    let pattern = out.to_str().unwrap();
    // sacct may list the job a moment after it completes; the regular file is read.
    let mut from = serde_json::Value::Null;
    for _ in 0..30 {
        from = json(pattern).0;
        if from == "iter-log" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    assert_eq!(from, "iter-log");
    std::fs::remove_file(&file).unwrap();
    let c = std::ffi::CString::new(file.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    let (from, warn) = json(pattern);
    assert_ne!(from, "iter-log");
    assert!(warn.contains("not a regular file"), "{warn}");
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    let (from, warn) = json(pattern);
    assert_ne!(from, "iter-log");
    assert!(warn.contains("symlink"), "{warn}");
}

/// Issue 31 item 9: a 2-layer, hidden-64 model TOML named `gpt__1.3B` is
/// recorded under the user namespace with its fingerprint, so `report
/// history` never exports it as the catalog's gpt__1.3B.
#[test]
fn a_model_toml_cannot_take_a_catalog_name() {
    use crate::common::{self, require_e2e, submit, wait_for_state};
    require_e2e!();
    let c = common::cluster();
    if !(c.cluster.plugins.job_submit && common::plugin_built("libspank_cellsched.so")) {
        eprintln!("skipped: needs job_submit/cellsched and the SPANK plugin");
        return;
    }
    let name = common::unique_name("forged-model");
    let model = c.jobs_dir.join(format!("{name}.toml"));
    std::fs::write(&model, "name = \"gpt__1.3B\"\nfamily = \"gpt\"\nlayers = 2\nhidden = 64\nheads = 2\nseq_len = 16\n").unwrap();
    let id = submit(&["-J", &name, "--dl-model", model.to_str().unwrap(), "--dl-batch=8", "--dl-iters=5000", "-t", "5", "--wrap", "sleep 1"]).expect("submit");
    let comment = common::admin_comment(id).unwrap_or_default();
    assert!(comment.contains(" model=user:gpt__1.3B@") && !comment.contains(" model=gpt__1.3B "), "{comment}");
    wait_for_state(id, &["COMPLETED"], std::time::Duration::from_secs(180)).expect("job completes");
    let job = id.to_string();
    let mut csv = String::new();
    for _ in 0..30 {
        let o = crate::common::scrubbed_command(&crate::common::cellsched_bin())
            .args(["report", "history", "--jobs", &job, "--out", "-"])
            .env("SLURM_CONF", &c.slurm_conf)
            .output()
            .unwrap();
        csv = String::from_utf8_lossy(&o.stdout).into_owned();
        if csv.lines().count() > 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "one history row for job {id}:\n{csv}");
    assert!(rows[0].contains(",user:gpt__1.3B@") && !rows[0].contains(",gpt__1.3B,"), "{csv}");
}
