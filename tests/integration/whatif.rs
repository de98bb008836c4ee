//! End-to-end test of `cellsched whatif` on a private live cluster (own
//! dir, port base = test cluster's + 100, so other modules' jobs cannot
//! change what it predicts): with both a100 nodes busy, whatif predicts a
//! later start on a100 than on v100, and the same job submitted right after
//! is placed on the Cell whatif said cellsched would choose, and starts
//! when it said (now); submitted with `--dl-explain`, sbatch prints that
//! choice and the runner-up once. The same cluster then checks
//! `cellsched report --openmetrics` (queue per type, jobs left stock).
use crate::common::{self, require_e2e};
use cellsched_devcluster::{Cluster, LocalClusterSpec, JobPolicy};
use cellsched_core::{Cell, Decision};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const PORT_OFFSET: u16 = 100;
const WAIT: Duration = Duration::from_secs(90);

/// The private cluster; brought down (jobs cancelled) and removed when dropped.
struct Private {
    spec: LocalClusterSpec,
    cluster: Cluster,
    jobs_dir: PathBuf,
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = self.cluster.down(JobPolicy::Cancel);
        let _ = std::fs::remove_dir_all(&self.spec.dir);
    }
}

impl Private {
    fn up() -> Private {
        let mut spec = common::test_spec();
        spec.port_base += PORT_OFFSET;
        spec.dir = std::env::temp_dir().join(format!("cs-e2e-whatif-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&spec.dir);
        std::fs::create_dir_all(&spec.dir).expect("create whatif cluster dir");
        let cluster = Cluster::up(&spec).unwrap_or_else(|e| panic!("cannot bring the whatif cluster up: {e}"));
        let jobs_dir = spec.dir.join("jobs");
        std::fs::create_dir_all(&jobs_dir).expect("create jobs dir");
        Private { spec, cluster, jobs_dir }
    }

    fn slurm(&self) -> common::SlurmAt {
        common::SlurmAt { bin: self.spec.slurm_bin.clone(), slurm_conf: self.cluster.layout.slurm_conf(), cwd: self.jobs_dir.clone() }
    }

    fn submit(&self, args: &[&str]) -> u32 {
        self.submit_msg(args).0
    }

    /// `sbatch --parsable ARGS`: the job id and what sbatch wrote to stderr.
    fn submit_msg(&self, args: &[&str]) -> (u32, String) {
        let mut full = vec!["--parsable"];
        full.extend_from_slice(args);
        let out = self.slurm().cmd("sbatch", &full);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "sbatch {args:?}: {stderr}");
        let s = String::from_utf8_lossy(&out.stdout);
        (s.trim().split(';').next().and_then(|x| x.parse().ok()).unwrap_or_else(|| panic!("sbatch said {s:?}")), stderr)
    }

    fn job(&self, id: u32) -> std::collections::HashMap<String, String> {
        common::parse_key_values(&self.slurm().ok("scontrol", &["show", "job", "-o", &id.to_string()]))
    }

    /// Waits until the job leaves PENDING; returns its state.
    fn wait_started(&self, id: u32) -> String {
        let t = Instant::now();
        loop {
            let s = self.job(id).get("JobState").cloned().unwrap_or_default();
            if s != "PENDING" && !s.is_empty() {
                return s;
            }
            assert!(t.elapsed() < WAIT, "job {id} still pending after {WAIT:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// stdout of `cellsched ARGS` against this cluster (Slurm commands on PATH).
    fn cellsched(&self, args: &[&str]) -> String {
        let path = format!("{}:{}", self.spec.slurm_bin.display(), std::env::var("PATH").unwrap_or_default());
        let out = common::scrubbed_command(&common::cellsched_bin())
            .args(args)
            .env("SLURM_CONF", self.cluster.layout.slurm_conf())
            .env("PATH", path)
            .output()
            .expect("run cellsched");
        assert!(out.status.success(), "cellsched {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `cellsched whatif ARGS --json` against this cluster, parsed.
    fn whatif(&self, args: &[&str]) -> serde_json::Value {
        let mut full = vec!["whatif"];
        full.extend_from_slice(args);
        full.push("--json");
        let out = self.cellsched(&full);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("whatif JSON: {e}: {out}"))
    }
}

fn cell_of(row: &serde_json::Value) -> Cell {
    serde_json::from_value(row["estimate"]["cell"].clone()).unwrap_or_else(|e| panic!("cell in {row}: {e}"))
}

#[test]
fn whatif_predicts_busy_a100_later_and_the_submitted_job_lands_where_it_said() {
    require_e2e!();
    for lib in ["libsite_factor_cellsched.so", "libjob_submit_cellsched.so", "libspank_cellsched.so"] {
        if !common::plugin_built(lib) {
            eprintln!("skipped: {lib} not built");
            return;
        }
    }
    let p = Private::up();
    // Both a100 nodes busy for 10 minutes (their time limit).
    let blockers: Vec<u32> = ["a100-1", "a100-2"]
        .iter()
        .map(|n| p.submit(&["-J", &common::unique_name("blocker"), "-N1", "-w", n, "--gres=gpu:a100:4", "-t", "10", "--wrap", "sleep 600"]))
        .collect();
    for &b in &blockers {
        assert_eq!(p.wait_started(b), "RUNNING");
    }
    let dl = ["--dl-model=gpt2", "--dl-batch=32", "--dl-iters=300"];
    let v = p.whatif(&dl);
    let rows = v["answer"]["rows"].as_array().expect("rows");
    let earliest = |ty: &str| {
        rows.iter()
            .filter(|r| cell_of(r).gpu_type == ty)
            .filter_map(|r| r["start_s"].as_f64())
            .fold(f64::INFINITY, f64::min)
    };
    let (a100, v100) = (earliest("a100"), earliest("v100"));
    assert!(a100.is_finite() && v100.is_finite(), "a100 and v100 Cells expected: {v}");
    assert!(a100 > v100, "busy a100 should start later than free v100: a100 {a100} s, v100 {v100} s; {v}");
    // The blockers hold a100 until their limit: no a100 Cell before ~10 min (minus the seconds they already ran).
    assert!(a100 > 500.0, "{v}");
    let chosen = rows.iter().find(|r| r["chosen"] == true).unwrap_or_else(|| panic!("no chosen Cell: {v}"));
    let chosen_cell = cell_of(chosen);
    let predicted_start = chosen["start_s"].as_f64().expect("a predicted start");
    assert_ne!(chosen_cell.gpu_type, "a100", "{v}");

    // The wait test: the free v100 Cell is slower than the busy a100 one, so
    // job_submit places the job on a100 at submit (no forecast of its start
    // exists yet), and whatif says its first re-planning pass moves it to the
    // free Cell, where waiting ~10 minutes loses against 300 slower iterations.
    let why = v["answer"]["why"].as_str().unwrap_or_default().to_string();
    assert!(why.contains("re-planning pass moves it"), "{why}");

    // The same job, submitted right after: placed on a100, moved to that Cell
    // by re-planning, and started soon after (within a re-planning interval).
    // With --dl-explain, sbatch prints the plugin's choice and runner-up once.
    let mut args = vec!["-J", "whatif-check", "--dl-explain"];
    args.extend(dl);
    args.extend(["--wrap", "sleep 5"]);
    let (id, said) = p.submit_msg(&args);
    let comment = p.slurm().admin_comment(id).unwrap_or_default();
    let d = Decision::parse_admin_comment(&comment).unwrap_or_else(|| panic!("no decision in {comment:?}"));
    assert_eq!(d.cell.gpu_type, "a100", "placed on its Cell of the whole cluster at submit ({comment})");
    let line = said.lines().find(|l| l.starts_with("sbatch: cellsched: chose ")).unwrap_or_else(|| panic!("no explanation from sbatch: {said:?}"));
    assert!(line.contains(&format!("chose {} on", d.cell)) && line.contains(&format!("{:.4} s/iteration", d.iter_s)), "{line} vs {comment}");
    assert!(line.contains("runner-up ") && line.contains("for 300 iterations") && line.contains("predictions"), "{line}");
    assert_eq!(said.matches("cellsched: chose").count(), 1, "shown once: {said:?}");
    // Without the flag sbatch says nothing of it.
    let (quiet, said) = p.submit_msg(&["-J", "whatif-quiet", "--dl-model=gpt2", "--dl-batch=32", "--wrap", "true"]);
    assert!(!said.contains("cellsched: chose"), "{said:?}");
    p.slurm().ok("scancel", &[&quiet.to_string()]);
    assert_eq!(predicted_start, 0.0, "a free Cell is predicted to start now: {v}");
    let t = Instant::now();
    let state = p.wait_started(id);
    assert!(["RUNNING", "COMPLETING", "COMPLETED"].contains(&state.as_str()), "job {id}: {state}");
    // One re-planning interval (30 s by default) after backfill's forecast.
    assert!(t.elapsed() < Duration::from_secs(45), "predicted to start after one re-planning pass, started after {:?}", t.elapsed());
    let comment = p.slurm().admin_comment(id).unwrap_or_default();
    let moved = Decision::parse_admin_comment(&comment).unwrap_or_else(|| panic!("no decision in {comment:?}"));
    assert_eq!(moved.cell, chosen_cell, "whatif said {chosen_cell}, the plugin moved it to {} ({comment})", moved.cell);
    assert!(comment.contains("replanned_from="), "{comment}");
    let nodes = p.job(id).get("NodeList").cloned().unwrap_or_default();
    assert!(nodes.starts_with(&format!("{}-", chosen_cell.gpu_type)), "ran on {nodes}, whatif said {chosen_cell}");

    // Monitoring on the same cluster: a DL job whose untyped GPU count no
    // Cell can use is left stock (and logged); the blockers run on a100.
    let (stock, _) = p.submit_msg(&["-J", "whatif-stock", "--dl-model=gpt2", "--dl-batch=32", "--gres=gpu:3", "--wrap", "true"]);
    let log = p.cluster.layout.log().join("slurmctld.log");
    let text = p.cellsched(&["report", "--openmetrics", "--ctld-log", &log.display().to_string()]);
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("cellsched_running_jobs{gpu_type=\"a100\"} 2\n"), "{text}");
    assert!(text.contains("cellsched_queue_pending_jobs{gpu_type=\"v100\"}"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("cellsched_jobs_left_stock{reason=\"no Cell of exactly N GPUs")), "job {stock} left stock: {text}");
}
