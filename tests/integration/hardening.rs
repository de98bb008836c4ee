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
