//! `cellsched doctor` on the live test cluster: a healthy installation is
//! all OK, a broken cellsched.toml is a FAIL naming file and line.
use crate::common::{self, require_e2e};
use std::process::Output;

/// Runs `cellsched doctor --json` against the test cluster (its slurm.conf
/// and scontrol) with `extra` arguments; returns the output and the JSON.
fn doctor(extra: &[&str]) -> (Output, serde_json::Value) {
    let c = common::cluster();
    let scontrol = c.spec().slurm_bin.join("scontrol");
    let conf = c.slurm_conf.display().to_string();
    let mut args = vec!["doctor", "--json", "--slurm-conf", &conf, "--scontrol", scontrol.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = common::scrubbed_command(&common::cellsched_bin()).args(&args).output().expect("run cellsched doctor");
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    (out, json)
}

fn checks(v: &serde_json::Value) -> Vec<(String, String, String)> {
    v["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .map(|c| (c["check"].as_str().unwrap().to_string(), c["status"].as_str().unwrap().to_string(), c["message"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn doctor_reports_the_test_cluster_healthy() {
    require_e2e!();
    let (out, v) = doctor(&[]);
    let all = checks(&v);
    let not_ok: Vec<_> = all.iter().filter(|(_, s, _)| s != "OK").collect();
    assert!(out.status.success() && v["ok"] == true && not_ok.is_empty(), "doctor on the test cluster: {not_ok:#?}\n{all:#?}");
    // Every area was checked, against the real plugins and the running slurmctld.
    for name in ["slurmctld", "Slurm release", "plugin site_factor/cellsched", "plugin job_submit/cellsched", "plugin spank_cellsched", "plugstack.conf", "plan_dir", "cellsched.toml", "GPU types", "node Features"] {
        assert!(all.iter().any(|(c, _, _)| c == name), "no {name} check: {all:#?}");
    }
    let release = all.iter().find(|(c, _, _)| c == "Slurm release").unwrap();
    let client = common::slurm_ok("scontrol", &["version"]);
    assert!(client.trim().ends_with(release.2.split_whitespace().last().unwrap()), "{release:?} vs {client}");
    let plugins = c_dir_plugins();
    assert!(all.iter().any(|(c, _, m)| c == "plugin job_submit/cellsched" && m.contains(&plugins)), "{all:#?}");
    // The text form: one line per check plus the summary, exit 0.
    let c = common::cluster();
    let text = common::scrubbed_command(&common::cellsched_bin())
        .args(["doctor", "--slurm-conf", c.slurm_conf.to_str().unwrap(), "--scontrol", c.spec().slurm_bin.join("scontrol").to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success(), "{stdout}");
    assert_eq!(stdout.lines().count(), all.len() + 1, "{stdout}");
    assert!(stdout.lines().all(|l| l.starts_with("OK ") || l.ends_with("0 WARN, 0 FAIL")), "{stdout}");
}

/// The cluster's PluginDir, as doctor names it.
fn c_dir_plugins() -> String {
    common::cluster().cluster.layout.plugins().display().to_string()
}

#[test]
fn doctor_names_file_and_line_of_a_broken_config() {
    require_e2e!();
    let c = common::cluster();
    let good = std::fs::read_to_string(c.cluster.layout.cellsched_toml()).expect("cluster cellsched.toml");
    let dir = std::env::temp_dir().join(common::unique_name("doctor"));
    std::fs::create_dir_all(&dir).unwrap();
    let broken = dir.join("cellsched.toml");
    let text = format!("{good}\n[placement]\nmax_gpus = 0\n");
    let bad_line = text.lines().position(|l| l.starts_with("max_gpus")).unwrap() + 1;
    std::fs::write(&broken, &text).unwrap();
    let (out, v) = doctor(&["--config", broken.to_str().unwrap()]);
    assert!(!out.status.success(), "a FAIL gives a non-zero exit status");
    assert_eq!(v["ok"], false);
    let all = checks(&v);
    let toml = all.iter().find(|(c, _, _)| c == "cellsched.toml").expect("cellsched.toml check");
    assert_eq!(toml.1, "FAIL", "{all:#?}");
    let at = format!("{}:{bad_line}", broken.display());
    assert!(toml.2.contains(&at) && toml.2.contains("max_gpus"), "expected {at} in {toml:?}");
    // Only that check failed: the rest of the installation is still fine.
    assert_eq!(all.iter().filter(|(_, s, _)| s == "FAIL").count(), 1, "{all:#?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 check(s) failed"));
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 31 item 10: a copy of the cluster's cellsched.toml that others can
/// write (mode 0666, or in a 0777 directory) fails doctor with the chown /
/// chmod fix; the same copy with safe permissions passes.
#[test]
fn doctor_fails_on_a_cellsched_toml_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    require_e2e!();
    let c = common::cluster();
    let src = c.slurm_conf.parent().unwrap().join("cellsched.toml");
    let dir = std::env::temp_dir().join(format!("cs-doctor-perm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mode = |p: &std::path::Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(&dir, 0o755);
    let copy = dir.join("cellsched.toml");
    std::fs::write(&copy, std::fs::read_to_string(&src).unwrap_or_default()).unwrap();
    mode(&copy, 0o644);
    let toml_check = |v: &serde_json::Value| checks(v).into_iter().find(|(c, _, _)| c == "cellsched.toml").expect("cellsched.toml check");
    let (_, v) = doctor(&["--config", copy.to_str().unwrap()]);
    assert_eq!(toml_check(&v).1, "OK", "{v:#}");
    mode(&copy, 0o666);
    let (out, v) = doctor(&["--config", copy.to_str().unwrap()]);
    let (_, status, message) = toml_check(&v);
    assert!(!out.status.success() && status == "FAIL" && message.contains("writable by others"), "{v:#}");
    assert!(v.to_string().contains("chmod go-w"), "{v:#}");
    mode(&copy, 0o644);
    mode(&dir, 0o777);
    let (_, v) = doctor(&["--config", copy.to_str().unwrap()]);
    let (_, status, message) = toml_check(&v);
    assert!(status == "FAIL" && message.contains("without the sticky bit"), "{v:#}");
    mode(&dir, 0o755);
    std::fs::remove_dir_all(&dir).ok();
}
