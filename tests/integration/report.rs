//! End-to-end tests of `cellsched report` against the live cluster: the
//! submitted jobs appear with JCTs equal to sacct's own End − Submit, their
//! typed GPUs, the Cell/plan the plugins recorded (when loaded), valid PNG
//! and SVG plots, a history export, and clear exit codes for bad input.
use crate::common::{
    self, cluster, require_e2e, sacct_fields_when, submit, unique_name, wait_for_state,
};
use cellsched_core::Decision;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

const JOB_TIMEOUT: Duration = Duration::from_secs(180);

/// `cellsched ARGS` against the test cluster (`SLURM_CONF` set).
fn cellsched_on_cluster(args: &[&str]) -> Output {
    Command::new(common::cellsched_bin())
        .args(args)
        .env("SLURM_CONF", &cluster().slurm_conf)
        .output()
        .expect("run cellsched")
}

/// Seconds since the epoch of a sacct time in its default local form, by
/// `date` (independent of the report's own parser).
fn epoch(ts: &str) -> i64 {
    let out = Command::new("date")
        .args(["+%s", "-d", ts])
        .output()
        .expect("run date");
    assert!(
        out.status.success(),
        "date -d {ts}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("date prints seconds")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cs-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn report_shows_jobs_with_sacct_jcts_cells_and_valid_plots() {
    require_e2e!();
    let c = cluster();
    let dl = c.cluster.plugins.spank && c.cluster.plugins.job_submit;
    // Typed jobs everywhere; with the plugins, DL jobs the job_submit plugin places.
    let mut specs: Vec<Vec<String>> = ["gpu:a100:2", "gpu:v100:8", "gpu:a10:1", "gpu:a100:4"]
        .iter()
        .map(|g| vec![format!("--gres={g}"), "--wrap".into(), "sleep 2".into()])
        .collect();
    // (job index in `specs`, model, batch) of the DL jobs.
    let mut dl_jobs: Vec<(usize, &str, u32)> = Vec::new();
    if dl {
        for (model, batch) in [("gpt__1.3B", 32), ("bert", 64)] {
            dl_jobs.push((specs.len(), model, batch));
            specs.push(vec![
                "--gres=gpu:4".into(),
                format!("--dl-model={model}"),
                format!("--dl-batch={batch}"),
                "--dl-iters=20".into(),
                "--wrap".into(),
                "sleep 2".into(),
            ]);
        }
    }
    let mut ids = Vec::new();
    for s in &specs {
        let name = unique_name("report");
        let mut args = vec!["-J", &name, "-t", "5"];
        args.extend(s.iter().map(String::as_str));
        ids.push(submit(&args).unwrap_or_else(|e| panic!("sbatch {s:?}: {e}")));
    }
    for id in &ids {
        wait_for_state(*id, &["COMPLETED"], JOB_TIMEOUT).unwrap();
    }
    // sacct's own view, once slurmdbd has each job's end.
    let fields = ["Submit", "Start", "End", "AllocTRES", "AdminComment"];
    let truth: Vec<_> = ids
        .iter()
        .map(|id| {
            sacct_fields_when(*id, &fields, Duration::from_secs(60), |m| {
                m["End"] != "Unknown" && !m["End"].is_empty()
            })
            .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();

    let dir = scratch("e2e");
    let (png, svg) = (dir.join("report.png"), dir.join("report.svg"));
    let list = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let out = cellsched_on_cluster(&[
        "report",
        "--jobs",
        &list,
        "--json",
        "--plot",
        png.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cellsched report failed: {stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("report --json is JSON");
    let jobs = report["jobs"].as_array().expect("jobs array");
    assert_eq!(jobs.len(), ids.len(), "{report}");
    for (id, sacct) in ids.iter().zip(&truth) {
        let j = jobs
            .iter()
            .find(|j| j["job_id"] == *id)
            .unwrap_or_else(|| panic!("job {id} missing from {report}"));
        let (submit, start, end) = (
            epoch(&sacct["Submit"]),
            epoch(&sacct["Start"]),
            epoch(&sacct["End"]),
        );
        assert_eq!(
            j["jct_s"].as_f64(),
            Some((end - submit) as f64),
            "job {id}: JCT vs sacct {sacct:?}"
        );
        assert_eq!(
            j["queue_delay_s"].as_f64(),
            Some((start - submit) as f64),
            "job {id}: queueing delay"
        );
        assert_eq!(j["state"], "COMPLETED");
        // Typed GPUs as sacct's AllocTRES has them.
        let gpus = j["gpus"].as_object().unwrap();
        for (ty, n) in gpus {
            assert!(
                sacct["AllocTRES"].contains(&format!("gres/gpu:{ty}={n}")),
                "job {id}: {gpus:?} vs {}",
                sacct["AllocTRES"]
            );
        }
        // The Cell/plan recorded in AdminComment, parsed alike.
        match Decision::parse_admin_comment(&sacct["AdminComment"]) {
            Some(d) => {
                let got: Decision =
                    serde_json::from_value(j["decision"].clone()).expect("decision in report");
                assert_eq!(got, d, "job {id}");
                assert!(
                    gpus.contains_key(&d.cell.gpu_type),
                    "job {id}: Cell {} vs GPUs {gpus:?}",
                    d.cell
                );
            }
            None => assert!(j["decision"].is_null(), "job {id}: {}", j["decision"]),
        }
    }
    if dl {
        let decided = jobs.iter().filter(|j| !j["decision"].is_null()).count();
        assert!(
            decided >= 2,
            "the plugins are loaded but recorded no Decision: {report}"
        );
        // job_submit tags its AdminComment with model (catalog name), batch and
        // the declared iterations; the report reads them back.
        for (idx, model, batch) in &dl_jobs {
            let id = ids[*idx];
            let j = jobs.iter().find(|j| j["job_id"] == id).unwrap();
            let canonical = cellsched_core::model::ModelCatalog::builtin()
                .resolve(model)
                .unwrap_or_else(|e| panic!("{model}: {e}"))
                .name;
            assert_eq!(
                (j["tags"]["model"].as_str(), j["tags"]["batch"].as_u64(), j["tags"]["iters"].as_u64()),
                (Some(canonical.as_str()), Some(u64::from(*batch)), Some(20)),
                "job {id}: tags from AdminComment {:?}",
                truth[*idx]["AdminComment"]
            );
        }
    }
    let summary = &report["summary"];
    assert_eq!(summary["jobs"], ids.len());
    assert_eq!(summary["finished"], ids.len());
    assert!(
        summary["per_type"]["a100"]["capacity"] == 8,
        "capacity from scontrol: {summary}"
    );
    assert!(summary["per_type"]["a100"]["gpu_hours"].as_f64().unwrap() > 0.0);
    for p in [&png, &svg] {
        let info = cellsched_report::plot::check_image(p).unwrap_or_else(|e| panic!("{e}"));
        assert!(info.width > 100 && info.height > 100, "{info:?}");
    }
    // The saved JSON compares against itself with ratio 1.
    let saved = dir.join("a.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let out = cellsched_on_cluster(&[
        "report",
        "compare",
        "--a",
        saved.to_str().unwrap(),
        "--b",
        saved.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let jct = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "JCT mean")
        .unwrap();
    assert_eq!(jct["ratio"].as_f64(), Some(1.0));
    // Terminal table names every job.
    let out = cellsched_on_cluster(&["report", "--jobs", &list]);
    let text = String::from_utf8_lossy(&out.stdout);
    for id in &ids {
        assert!(
            text.contains(&format!("\n| {id} ")),
            "job {id} not in table:\n{text}"
        );
    }
    std::fs::remove_dir_all(dir).ok();
}

/// `report --profile-rows`: a finished DL job's measured time (run time
/// over its declared iterations) becomes a profile-DB row on the Cell it ran
/// on (its model, batch, GPU type and spread, plan `unknown`), and
/// `cellsched profile import` merges the file into a profile database.
#[test]
fn report_writes_profile_rows_that_profile_import_merges() {
    require_e2e!();
    let c = cluster();
    if !(c.cluster.plugins.spank && c.cluster.plugins.job_submit) {
        eprintln!("skipped: the DL plugins are not loaded");
        return;
    }
    let name = unique_name("rows");
    let id = submit(&["-J", &name, "-t", "5", "--gres=gpu:4", "--dl-model=gpt__1.3B", "--dl-batch=32", "--dl-iters=20", "--wrap", "sleep 2"])
        .unwrap_or_else(|e| panic!("sbatch: {e}"));
    wait_for_state(id, &["COMPLETED"], JOB_TIMEOUT).unwrap();
    let sacct = sacct_fields_when(id, &["Start", "End", "AllocTRES", "NNodes"], Duration::from_secs(60), |m| m["End"] != "Unknown" && !m["End"].is_empty())
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch("rows");
    let rows = dir.join("rows.csv");
    let out = cellsched_on_cluster(&["report", "--jobs", &id.to_string(), "--summary", "--profile-rows", rows.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 profile rows from 1 measured jobs (1 from run/iters)"), "{stderr}");
    let text = std::fs::read_to_string(&rows).unwrap();
    let recs = cellsched_core::profile_db::parse_csv(&text, "rows.csv").unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(recs.len(), 1, "{text}");
    let r = &recs[0];
    let (ty, n) = sacct["AllocTRES"]
        .split(',')
        .find_map(|t| t.strip_prefix("gres/gpu:")?.split_once('='))
        .unwrap_or_else(|| panic!("typed GPUs in {}", sacct["AllocTRES"]));
    let nodes: u32 = sacct["NNodes"].parse().unwrap();
    let run_s = (epoch(&sacct["End"]) - epoch(&sacct["Start"])) as f64;
    assert_eq!((r.model.as_str(), r.batch, r.gpu_type.as_str()), ("gpt__1.3B", 32, ty), "{text}");
    assert_eq!((r.nodes, r.gpus_per_node), (nodes, n.parse::<u32>().unwrap() / nodes), "{text}");
    assert!((r.iter_time_s - run_s / 20.0).abs() < 1e-9, "{} vs {run_s} s / 20: {text}", r.iter_time_s);
    assert!(r.plan.is_none(), "the plan that ran is not known: {text}");
    let db = dir.join("profile.csv");
    let out = common::cellsched(&["profile", "import", "--db", db.to_str().unwrap(), rows.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = cellsched_core::profile_db::ProfileDb::load_csv(&db).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(merged.lookup("gpt__1.3B", 32, ty, r.nodes, r.gpus_per_node), Some(r.iter_time_s));
    std::fs::remove_dir_all(dir).ok();
}

/// Issue 18 (items 2 and 3): what users write into Comment (newlines, the
/// delimiter, `|`, DL tags, a time scale) neither breaks `cellsched report`
/// nor changes what it computes, and never enters the predictor's history.
#[test]
fn forged_comment_changes_nothing_in_report_or_history() {
    require_e2e!();
    let c = cluster();
    let dl = c.cluster.plugins.spank && c.cluster.plugins.job_submit;
    let mut ids = Vec::new();
    // A stock job whose Comment claims DL tags.
    let name = unique_name("forge");
    let stock = submit(&["-J", &name, "-t", "5", "--gres=gpu:a100:1", "--comment=model=gpt__1.3B batch=64 iters=100", "--wrap", "true"])
        .unwrap_or_else(|e| panic!("{e}"));
    ids.push(stock);
    // Comments with a newline, '|', and the report's own delimiter (0x1f).
    let weird = "a\nb|c\u{1f}d model=gpt__1.3B\n99999\u{1f}99999\u{1f}x";
    let name = unique_name("forge");
    let odd = submit(&["-J", &name, "-t", "5", "--gres=gpu:a10:1", &format!("--comment={weird}"), "--wrap", "true"])
        .unwrap_or_else(|e| panic!("{e}"));
    ids.push(odd);
    // A DL job whose Comment tries to shrink its prediction.
    let mut dl_id = None;
    if dl {
        let name = unique_name("forge");
        let id = submit(&[
            "-J", &name, "-t", "5", "--dl-model=gpt__350M", "--dl-batch=8", "--dl-iters=20",
            "--comment=iters=1 time_scale=0.000001", "--wrap", "sleep 1",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        ids.push(id);
        dl_id = Some(id);
    }
    for id in &ids {
        wait_for_state(*id, &["COMPLETED"], JOB_TIMEOUT).unwrap();
    }
    // slurmdbd records End and the time limit asynchronously; wait for both.
    for id in &ids {
        sacct_fields_when(*id, &["End", "TimelimitRaw"], Duration::from_secs(60), |m| {
            m["End"] != "Unknown" && !m["End"].is_empty() && m["TimelimitRaw"].parse::<u64>().is_ok()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let list = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let out = cellsched_on_cluster(&["report", "--jobs", &list, "--json"]);
    assert!(out.status.success(), "report failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let job = |id: u32| report["jobs"].as_array().unwrap().iter().find(|j| j["job_id"] == id).cloned().unwrap_or_else(|| panic!("job {id} missing: {report}"));
    assert_eq!(report["jobs"].as_array().unwrap().len(), ids.len(), "the forged record 99999 must not appear: {report}");
    // The stock job carries no tags and no prediction.
    let j = job(stock);
    assert!(j["tags"]["model"].is_null() && j["tags"]["batch"].is_null() && j["tags"]["iters"].is_null(), "{j}");
    assert!(j["predicted_run_s"].is_null(), "{j}");
    assert_eq!(j["comment"], "model=gpt__1.3B batch=64 iters=100", "Comment is kept for display");
    // The odd comment survives as display text.
    assert_eq!(job(odd)["comment"], weird);
    if let Some(id) = dl_id {
        let j = job(id);
        assert_eq!(j["tags"]["iters"].as_u64(), Some(20), "iters from AdminComment: {j}");
        let iter_s = j["decision"]["iter_s"].as_f64().expect("decision");
        let pred = j["predicted_run_s"].as_f64().unwrap();
        assert!((pred - iter_s * 20.0).abs() < 1e-9, "prediction unscaled by the forged time_scale: {pred} vs {iter_s} x 20");
    }
    // The terminal table works too (it exited 5 on a newline before).
    let out = cellsched_on_cluster(&["report", "--jobs", &list]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // History: the stock job's forged tags never enter the training data.
    let out = Command::new(common::cellsched_bin())
        .args(["report", "history", "--jobs", &list, "--out", "-"])
        .env("SLURM_CONF", &cluster().slurm_conf)
        .env("RUST_LOG", "info")
        .output()
        .expect("run cellsched");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = cellsched_core::history::parse_csv(&String::from_utf8_lossy(&out.stdout), "history").unwrap();
    assert!(recs.iter().all(|r| r.model != "gpt__1.3B" && r.iterations != 100 && r.iterations != 1), "{recs:?}");
    if dl {
        assert!(recs.iter().any(|r| r.model == "gpt__350M" && r.iterations == 20), "{recs:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn report_errors_have_clear_messages_and_exit_codes() {
    require_e2e!();
    cluster();
    let out = cellsched_on_cluster(&[
        "report",
        "--start",
        "2001-01-01T00:00:00",
        "--end",
        "2001-01-02T00:00:00",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("no jobs in window 2001-01-01T00:00:00..2001-01-02T00:00:00"),
        "{err}"
    );
    let out = cellsched_on_cluster(&["report", "--user", "cs-no-such-user"]);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown user 'cs-no-such-user'"));
}

/// No cluster needed: sacct with an unusable configuration.
#[test]
fn report_without_accounting_exits_3() {
    let dir = scratch("noconf");
    let conf = dir.join("slurm.conf");
    std::fs::write(&conf, "ClusterName=nowhere\nSlurmctldHost=localhost\nAccountingStorageType=accounting_storage/none\n").unwrap();
    let out = Command::new(common::cellsched_bin())
        .args(["report"])
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("sacct failed") && err.lines().count() == 1,
        "{err}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// No GPU needed: the profiler without the NVIDIA driver, and a run with a
/// fake training script and `--no-nvml` recorded in a profile database.
#[test]
fn profile_cli_without_gpu() {
    let out = common::cellsched(&["profile", "gpus"]);
    if out.status.success() {
        eprintln!(
            "note: NVML present; inventory:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.contains("NVML unavailable") && err.lines().count() == 1,
            "{err}"
        );
    }
    let dir = scratch("profile");
    let script = dir.join("train.sh");
    std::fs::write(&script, "#!/bin/sh\nfor t in 9 0.4 0.5 0.6; do echo \"cellsched-iter $t\"; done\necho \"world $WORLD_SIZE\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let db = dir.join("profile.csv");
    let out = common::cellsched(&[
        "profile",
        "run",
        "--model",
        "gpt__1.3B",
        "--batch",
        "32",
        "--gpus",
        "4",
        "--gpu-type",
        "a100",
        "--no-nvml",
        "--warmup",
        "1",
        "--db",
        db.to_str().unwrap(),
        "--json",
        "--",
        script.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["stats"]["median_s"].as_f64(), Some(0.5));
    let db_text = std::fs::read_to_string(&db).unwrap();
    assert!(
        db_text
            .lines()
            .any(|l| l.starts_with("gpt__1.3B,32,a100,1,4,0.5")),
        "{db_text}"
    );
    // Merging it into another database.
    let merged = dir.join("merged.csv");
    let out = common::cellsched(&[
        "profile",
        "merge",
        db.to_str().unwrap(),
        "--db",
        merged.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&merged).unwrap(), db_text);
    std::fs::remove_dir_all(dir).ok();
}
