//! Integration tests: `cellsched sim` and `cellsched bench` on the
//! `etc/sim` examples (no Slurm cluster needed; always run).
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cellsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cellsched")).args(args).current_dir(root()).output().expect("run cellsched")
}

fn sim_json(policy: &str, seed: &str) -> serde_json::Value {
    let out = cellsched(&["sim", "--trace", "etc/sim/trace.csv", "--cluster", "etc/sim/cluster.toml", "--policy", policy, "--seed", seed, "--json"]);
    assert!(out.status.success(), "{policy}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{policy}: bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn sim_json_has_the_documented_fields_for_every_policy() {
    let trace_jobs = std::fs::read_to_string(root().join("etc/sim/trace.csv")).unwrap().lines().count() as u64 - 1;
    for policy in ["fifo", "slurm", "srtf", "tiresias", "gavel", "cellsched"] {
        let m = sim_json(policy, "3");
        for key in ["jobs", "finished", "unfinished", "avg_jct_s", "median_jct_s", "p99_jct_s", "avg_queue_s", "makespan_s", "gpu_util", "replans"] {
            assert!(m.get(key).is_some(), "{policy}: missing {key} in {m}");
        }
        assert_eq!(m["jobs"].as_u64(), Some(trace_jobs), "{policy}");
        assert_eq!(m["finished"].as_u64().unwrap() + m["unfinished"].as_u64().unwrap(), trace_jobs, "{policy}");
        assert!(m["avg_jct_s"].as_f64().unwrap() > 0.0, "{policy}");
        assert!(m["p99_jct_s"].as_f64().unwrap() >= m["median_jct_s"].as_f64().unwrap(), "{policy}");
        let util = m["gpu_util"].as_object().unwrap();
        assert_eq!(util.len(), 3, "{policy}: {util:?}");
        assert!(util.values().all(|v| (0.0..=1.0).contains(&v.as_f64().unwrap())), "{policy}: {util:?}");
        assert_eq!(m["policy"].as_str(), Some(policy));
    }
}

#[test]
fn same_seed_gives_identical_json() {
    assert_eq!(sim_json("cellsched", "11"), sim_json("cellsched", "11"));
    assert_eq!(sim_json("slurm", "11"), sim_json("slurm", "11"));
}

#[test]
fn ablation_flags_change_the_policy_name() {
    let out = cellsched(&[
        "sim", "--trace", "etc/sim/trace.csv", "--cluster", "etc/sim/cluster.toml", "--policy", "cellsched", "--no-srpt", "--ablation", "freeze", "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["policy"].as_str(), Some("cellsched-no-srpt-no-freeze"));
}

#[test]
fn bad_inputs_are_named() {
    let dir = std::env::temp_dir().join(format!("cellsched-sim-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n1,0,ten,resnet50,0,64,1,a100\n").unwrap();
    let out = cellsched(&["sim", "--trace", bad.to_str().unwrap(), "--cluster", "etc/sim/cluster.toml", "--policy", "slurm"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.csv:2") && err.contains("num_iteration"), "{err}");
    // A model the catalog lacks never aborts a run: the job runs stock and is counted.
    let unknown = dir.join("unknown.csv");
    std::fs::write(&unknown, "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n1,0,10,moe__1T,600,64,1,a100\n2,0,10,resnet50,0,64,1,a100\n").unwrap();
    for policy in ["slurm", "cellsched", "gavel", "srtf"] {
        let out = cellsched(&["sim", "--trace", unknown.to_str().unwrap(), "--cluster", "etc/sim/cluster.toml", "--policy", policy, "--json"]);
        assert!(out.status.success(), "{policy}: {}", String::from_utf8_lossy(&out.stderr));
        let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((m["finished"].as_u64(), m["truth_stats"]["stock_jobs"].as_u64()), (Some(2), Some(1)), "{policy}: {m}");
    }
    let out = cellsched(&["sim", "--trace", "etc/sim/trace.csv", "--cluster", "etc/sim/cluster.toml", "--policy", "lottery"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("lottery") && err.contains("slurm"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_policies_prints_ratios_against_slurm() {
    let out = cellsched(&["bench", "policies", "--trace", "etc/sim/trace.csv", "--cluster", "etc/sim/cluster.toml", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let slurm = rows.iter().find(|r| r["metrics"]["policy"] == "slurm").unwrap();
    assert!((slurm["avg_jct_ratio"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    let out = cellsched(&["bench", "ablation", "--trace", "etc/sim/trace.csv", "--cluster", "etc/sim/cluster.toml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["cellsched-no-cell-search", "cellsched-no-srpt", "cellsched-no-replan", "cellsched-no-freeze", "cellsched-no-aging"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
}

/// `bench table --replicas`: the trace as is plus jittered replicas; the
/// cell's row is the geometric mean of the runs' average JCT, and the first
/// run is the single-run table's.
#[test]
fn bench_table_replicas_average_over_jittered_runs() {
    let args = ["bench", "table", "--trace", "etc/sim/trace.csv", "--cluster", "etc/sim/cluster.toml", "--shrink", "1", "--baselines", "gavel", "--ablations", "srpt", "--json"];
    let run = |extra: &[&str]| {
        let out = cellsched(&[&args[..], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
    };
    let one = run(&[]);
    let three = run(&["--replicas", "3", "--jitter-s", "600"]);
    assert!(one["replicas"].is_null());
    let reps = three["replicas"].as_array().unwrap();
    assert_eq!(reps.len(), 3);
    for (p, row) in three["runs"].as_array().unwrap().iter().enumerate() {
        let each: Vec<f64> = reps.iter().map(|r| r[p]["avg_jct_s"].as_f64().unwrap()).collect();
        let geo = (each.iter().map(|x| x.ln()).sum::<f64>() / 3.0).exp();
        assert!((row["avg_jct_s"].as_f64().unwrap() - geo).abs() < 1e-6 * geo, "{row}");
        assert_eq!(reps[0][p]["avg_jct_s"], one["runs"][p]["avg_jct_s"], "the first run is the trace as is");
    }
    let out = cellsched(&[&args[..], &["--replicas", "0"]].concat());
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("replicas"));
    let out = cellsched(&[&args[..], &["--replicas", "2", "--jitter-s=-5"]].concat());
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--jitter-s"));
}

#[test]
fn convert_gavel_on_shared_trace() {
    let shared = root().join("../shared/data/gavel/philly-2869ce.trace");
    if !Path::new(&shared).exists() {
        eprintln!("note: {} absent; skipping the Gavel conversion test", shared.display());
        return;
    }
    let out_csv = std::env::temp_dir().join(format!("cellsched-philly-{}.csv", std::process::id()));
    let out = cellsched(&[
        "sim", "convert-gavel", "--input", shared.to_str().unwrap(), "--output", out_csv.to_str().unwrap(), "--cluster", "bench/gavel-cluster.toml", "--seed", "1",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&out_csv).unwrap();
    let lines = std::fs::read_to_string(&shared).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(text.lines().count(), lines + 1, "one row per trace line plus the header");
    assert!(text.starts_with("job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type"));
    std::fs::remove_file(&out_csv).ok();
}

/// The per-test temp dir of [`temp_file`] for `tag`.
fn temp_dir_of(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("cellsched-honest-{tag}-{}", std::process::id()))
}

/// Removes a test's temp dir when dropped (also when the test fails).
struct CleanTemp(&'static str);

impl Drop for CleanTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(temp_dir_of(self.0));
    }
}

/// Writes `text` to a file in a per-test temp dir and returns its path.
fn temp_file(tag: &str, name: &str, text: &str) -> String {
    let dir = temp_dir_of(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const TIMES: &str = "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\n";

/// Issue 12: a knowledge source that claims v100 is 10x faster than truth
/// changes where cellsched puts the job, but the job runs at v100's true speed.
#[test]
fn wrong_knowledge_changes_decisions_not_the_clock() {
    let _clean = CleanTemp("wk");
    let cluster = temp_file("wk", "c.toml", "[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 1\n");
    let trace = temp_file("wk", "t.csv", "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n1,0,1000,resnet50,0,64,1,a100\n");
    let truth = temp_file("wk", "truth.csv", &format!("# measured\n{TIMES}resnet50,64,a100,1,1,0.1\nresnet50,64,v100,1,1,0.2\n"));
    let right = temp_file("wk", "right.csv", &format!("{TIMES}resnet50,64,a100,1,1,0.1\nresnet50,64,v100,1,1,0.2\n"));
    let wrong = temp_file("wk", "wrong.csv", &format!("{TIMES}resnet50,64,a100,1,1,0.1\nresnet50,64,v100,1,1,0.02\n"));
    let run = |db: &str, with_truth: bool| -> serde_json::Value {
        let mut args = vec!["sim", "--trace", &trace, "--cluster", &cluster, "--policy", "cellsched", "--db", db, "--json"];
        if with_truth {
            args.extend(["--truth", truth.as_str()]);
        }
        let out = cellsched(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let good = run(&right, true);
    assert!((good["avg_jct_s"].as_f64().unwrap() - 100.0).abs() < 1e-6, "{good}");
    assert_eq!(good["gpu_util"]["v100"].as_f64(), Some(0.0), "{good}");
    let bad = run(&wrong, true);
    // Decision changed (the job went to v100) but the clock is truth's: 1000 x 0.2 s.
    assert!((bad["avg_jct_s"].as_f64().unwrap() - 200.0).abs() < 1e-6, "{bad}");
    assert_eq!(bad["gpu_util"]["a100"].as_f64(), Some(0.0), "{bad}");
    assert!(bad["truth"].as_str().unwrap().contains("truth.csv") && bad["knowledge"].as_str().unwrap().contains("wrong.csv"), "{bad}");
    assert!((bad["truth_stats"]["bias_pct"].as_f64().unwrap() + 90.0).abs() < 1e-6, "{bad}");
    // The oracle mode (no --truth) believes the knowledge: labelled as such.
    let oracle = run(&wrong, false);
    assert!((oracle["avg_jct_s"].as_f64().unwrap() - 20.0).abs() < 1e-6, "{oracle}");
    assert!(oracle["truth"].as_str().unwrap().starts_with("oracle"), "{oracle}");
}

/// `--learn-after`: with the same wrong knowledge, the first job runs on
/// v100 and, once measured, the second (arriving later) goes to a100; it
/// needs `--truth` and seconds >= 0, and says so.
#[test]
fn learning_corrects_wrong_knowledge_for_later_jobs() {
    let _clean = CleanTemp("learn");
    let cluster = temp_file("learn", "c.toml", "[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 1\n");
    let trace = temp_file(
        "learn",
        "t.csv",
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n1,0,1000,resnet50,0,64,1,a100\n2,150,1000,resnet50,0,64,1,a100\n",
    );
    let truth = temp_file("learn", "truth.csv", &format!("{TIMES}resnet50,64,a100,1,1,0.1\nresnet50,64,v100,1,1,0.2\n"));
    let wrong = temp_file("learn", "wrong.csv", &format!("{TIMES}resnet50,64,a100,1,1,0.1\nresnet50,64,v100,1,1,0.02\n"));
    // No time limits from declared work: slurmctld then expects the running
    // first job to end when predicted (20 s), so the second waits for it.
    let cfg = temp_file("learn", "cellsched.toml", "[declared]\npolicy = \"off\"\n");
    let base = ["sim", "--trace", trace.as_str(), "--cluster", cluster.as_str(), "--policy", "cellsched", "--db", wrong.as_str(), "--json", "--config", cfg.as_str()];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        cellsched(&args)
    };
    let json = |out: std::process::Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Without learning both jobs take v100 (200 s each, the second waits 50 s).
    let fixed = json(run(&["--truth", &truth]));
    assert!((fixed["avg_jct_s"].as_f64().unwrap() - 225.0).abs() < 1e-6, "{fixed}");
    // Learning 10 s into the first run: the second runs on a100 at once (100 s).
    let learnt = json(run(&["--truth", &truth, "--learn-after", "10"]));
    assert!((learnt["avg_jct_s"].as_f64().unwrap() - 150.0).abs() < 1e-6, "{learnt}");
    // With the plugins' default limits the first job may hold the v100 for
    // 20 s x 3 + 1,800 s (31 minutes): the second takes the a100 at once.
    let limited = json(cellsched(&base[..base.len() - 2].iter().copied().chain(["--truth", truth.as_str()]).collect::<Vec<_>>()));
    assert!((limited["avg_jct_s"].as_f64().unwrap() - 150.0).abs() < 1e-6, "{limited}");
    for (extra, want) in [(vec!["--learn-after", "10"], "--learn-after needs --truth"), (vec!["--truth", truth.as_str(), "--learn-after=-1"], "--learn-after -1")] {
        let out = run(&extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{extra:?}: {err}");
    }
}

/// Bad truth and knowledge files name file, line and field.
#[test]
fn bad_truth_and_knowledge_files_are_named() {
    let _clean = CleanTemp("bad");
    let trace = "etc/sim/trace.csv";
    let cluster = "etc/sim/cluster.toml";
    let cases = [
        ("missing.csv", "model,batch,gpu,nodes,gpus_per_node,iter_time_s\n".to_string(), ":1", "gpu_type"),
        ("negative.csv", format!("{TIMES}resnet50,64,a100,1,1,0.1\nresnet50,-64,a100,1,1,0.1\n"), ":3", "batch"),
        ("nan.csv", format!("# note\n{TIMES}resnet50,64,a100,1,1,NaN\n"), ":3", "iter_time_s"),
    ];
    for (name, text, line, field) in cases {
        let f = temp_file("bad", name, &text);
        for flag in ["--truth", "--db"] {
            let out = cellsched(&["sim", "--trace", trace, "--cluster", cluster, "--policy", "slurm", flag, &f]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{flag} {name} accepted");
            assert!(err.contains(&format!("{name}{line}")) && err.contains(field), "{flag} {name}: {err}");
        }
    }
    let out = cellsched(&["sim", "--trace", trace, "--cluster", cluster, "--policy", "slurm", "--truth", &temp_file("bad", "ok.csv", TIMES), "--truth-missing", "guess"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("guess"));
}

/// Knowledge of iterations from history: the random forest's predictions
/// replace the declared counts in decisions (named in the result), while
/// the clock keeps the true counts.
#[test]
fn iterations_predicted_from_history_are_knowledge_only() {
    let _clean = CleanTemp("rf");
    let recs = cellsched_core::history::synthetic(&cellsched_core::history::SyntheticSpec { users: 3, records: 300, noise: 0.05, early_stop_share: 0.0, seed: 5 });
    let hist = temp_file("rf", "history.csv", &cellsched_core::history::to_csv_string(&recs));
    // Jobs repeating history's (user, model, batch, GPUs) with other true counts.
    // Only jobs that fit one a100 by the estimator (the knowledge), so every job can run.
    use cellsched_core::estimator::{Estimator, JobSpec};
    let est = Estimator::new(cellsched_core::gpu::GpuCatalog::builtin(), cellsched_core::model::ModelCatalog::builtin());
    let fits = |r: &&cellsched_core::history::HistoryRecord| {
        est.model_catalog().resolve(&r.model).ok().is_some_and(|m| {
            est.estimate(&JobSpec { model: m, global_batch: r.batch }, &cellsched_core::Cell::new("a100", 1, 1).unwrap(), 1).is_ok()
        })
    };
    let usable: Vec<_> = recs.iter().filter(fits).take(20).cloned().collect();
    assert_eq!(usable.len(), 20, "the synthetic history has enough small jobs");
    let mut trace = String::from("job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type,user\n");
    for (i, r) in usable.iter().enumerate() {
        trace.push_str(&format!("{i},{},{},{},{},{},1,a100,{}\n", i * 10, 50 + i * 7, r.model, r.requested_time_s, r.batch, r.user));
    }
    let trace = temp_file("rf", "t.csv", &trace);
    let cluster = temp_file("rf", "c.toml", "[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n");
    let truth_rows: String = usable.iter().map(|r| format!("{},{},a100,1,1,0.5\n", r.model.to_ascii_lowercase(), r.batch)).collect();
    let truth = temp_file("rf", "truth.csv", &format!("{TIMES}{truth_rows}"));
    let out = cellsched(&["sim", "--trace", &trace, "--cluster", &cluster, "--policy", "cellsched", "--truth", &truth, "--iters-from-history", &hist, "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("predicts ") && !err.contains("predicts 0 of"), "the forest must predict: {err}");
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(m["knowledge"].as_str().unwrap().contains("random forest") && m["knowledge"].as_str().unwrap().contains("history.csv"), "{m}");
    assert_eq!(m["finished"].as_u64(), Some(20), "{m}");
    // One GPU, 0.5 s per true iteration: the busy time is the true work whatever was predicted.
    let work: f64 = (0..20).map(|i| (50 + i * 7) as f64 * 0.5).sum();
    let busy = m["gpu_util"]["a100"].as_f64().unwrap() * m["makespan_s"].as_f64().unwrap();
    assert!((busy - work).abs() < 1e-3 * work, "{busy} vs {work}");
    let out = cellsched(&["sim", "--trace", &trace, "--cluster", &cluster, "--policy", "cellsched", "--iters-from-history", "/nonexistent/h.csv"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("/nonexistent/h.csv"));
}
