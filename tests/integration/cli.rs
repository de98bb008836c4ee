//! CLI basics that need no cluster: help, version, `cluster env`, and
//! clear errors for bad arguments.
use crate::common::cellsched;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_lists_subcommands() {
    let o = cellsched(&["--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for sub in ["cluster", "estimate", "cells", "profile", "report", "sim", "bench"] {
        assert!(text.contains(sub), "--help lacks {sub}:\n{text}");
    }
}

#[test]
fn cluster_help_lists_actions_and_options() {
    let o = cellsched(&["cluster", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for w in ["up", "down", "status", "env", "--dir", "--port-base", "--no-plugins"] {
        assert!(text.contains(w), "cluster --help lacks {w}:\n{text}");
    }
}

#[test]
fn version_names_the_slurm_release() {
    let o = cellsched(&["--version"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("Slurm"), "{}", stdout(&o));
}

#[test]
fn cluster_env_prints_exports_for_the_given_dir() {
    let o = cellsched(&["cluster", "env", "--dir", "/tmp/cs-envtest", "--port-base", "19990"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "export SLURM_CONF=/tmp/cs-envtest/etc/slurm.conf");
    assert!(lines.contains(&"export CELLSCHED_CLUSTER_DIR=/tmp/cs-envtest"), "{text}");
    assert!(lines.contains(&"export CELLSCHED_PORT_BASE=19990"), "{text}");
    // Nothing was created: env only prints.
    assert!(!std::path::Path::new("/tmp/cs-envtest").exists());
}

#[test]
fn cluster_env_is_valid_shell() {
    let o = cellsched(&["cluster", "env", "--dir", "/tmp/cs env's dir"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = format!("{}\nprintf %s \"$SLURM_CONF\"", stdout(&o));
    let sh = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&sh.stdout), "/tmp/cs env's dir/etc/slurm.conf");
}

#[test]
fn cluster_env_uses_environment_defaults() {
    let o = std::process::Command::new(crate::common::cellsched_bin())
        .args(["cluster", "env"])
        .env("CELLSCHED_CLUSTER_DIR", "/tmp/cs-from-env")
        .env("CELLSCHED_PORT_BASE", "19400")
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(text.contains("SLURM_CONF=/tmp/cs-from-env/etc/slurm.conf") && text.contains("CELLSCHED_PORT_BASE=19400"), "{text}");
}

#[test]
fn bad_port_base_is_rejected_with_the_value() {
    let o = cellsched(&["cluster", "env", "--port-base", "70000"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("70000"), "{}", stderr(&o));
    let o = cellsched(&["cluster", "env", "--port-base", "65534"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("65534"), "{}", stderr(&o));
}
