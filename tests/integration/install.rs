//! docs/INSTALL.md's steps on a machine that already runs Slurm (the live
//! test cluster stands in for a production controller): the build-deps step
//! and the configuration step start, stop and replace no daemon, the
//! configuration is installed only where none exists, and `cellsched
//! doctor` reports all OK afterwards.
use crate::common::{self, require_e2e};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Daemons an install must leave alone, as (name, pid, start time in clock ticks).
const DAEMONS: &[&str] = &["slurmctld", "slurmd", "slurmdbd", "mariadbd", "mysqld", "munged"];

/// The Slurm and MariaDB daemons that are not another test's private
/// cluster (those run from `/tmp/cs-*` and start and stop while this test
/// runs): the shared test cluster's (under `own_dir`) and any system ones.
fn daemons(own_dir: &Path) -> BTreeSet<(String, u32, u64)> {
    let own = own_dir.to_string_lossy().into_owned();
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // comm is in parentheses; the start time is field 22.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let comm = &stat[open + 1..close];
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).map(|b| String::from_utf8_lossy(&b).replace('\0', " ")).unwrap_or_default();
        // Private clusters of other tests are `cs-e2e-*` (their command lines
        // may also name the shared cluster's files); other `/tmp/cs-*` dirs are
        // other users of this machine.
        if cmdline.contains("/cs-e2e-") || (cmdline.contains("/tmp/cs-") && !cmdline.contains(&own)) {
            continue;
        }
        if DAEMONS.contains(&comm) {
            let start = stat[close + 2..].split_whitespace().nth(19).and_then(|s| s.parse().ok()).unwrap_or(0);
            out.insert((comm.to_string(), pid, start));
        }
    }
    out
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// `make install-config` puts the example in place when no file exists and
/// never overwrites one (no daemon involved; runs without the cluster).
#[test]
fn install_config_installs_when_absent_and_never_overwrites() {
    let dir = std::env::temp_dir().join(format!("cellsched-install-config-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let make = |dir: &Path| run(Command::new("make").current_dir(root()).args(["--no-print-directory", "install-config"]).arg(format!("SYSCONFDIR={}", dir.display())));
    let out = make(&dir);
    let dst = dir.join("cellsched.toml");
    assert_eq!(std::fs::read_to_string(&dst).unwrap(), std::fs::read_to_string(root().join("etc/cellsched.toml")).unwrap(), "{out}");
    std::fs::write(&dst, "[placement]\nmax_gpus = 8\n").unwrap();
    let out = make(&dir);
    assert_eq!(std::fs::read_to_string(&dst).unwrap(), "[placement]\nmax_gpus = 8\n", "an existing cellsched.toml was overwritten: {out}");
    assert!(out.contains("kept"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn install_steps_leave_the_running_daemons_alone_and_doctor_is_all_ok() {
    require_e2e!();
    let c = common::cluster();
    let before = daemons(&c.spec().dir);
    assert!(before.iter().any(|(n, _, _)| n == "slurmctld"), "no slurmctld running: {before:?}");
    // Step 1 (docs/INSTALL.md, build host): build dependencies only.
    if is_root() {
        // The cargo running this test is the toolchain the script should find.
        let mut path: Vec<PathBuf> = std::env::var_os("CARGO").map(PathBuf::from).and_then(|c| c.parent().map(Path::to_path_buf)).into_iter().collect();
        path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        let out = run(Command::new(root().join("scripts/install-deps.sh")).arg("--headers-only").env("PATH", std::env::join_paths(path).unwrap()));
        assert!(!out.contains("installing: slurmctld") && !out.contains("mariadb-server"), "{out}");
    } else {
        eprintln!("not root: scripts/install-deps.sh --headers-only not run");
    }
    // Step 2 (controller): cellsched.toml beside slurm.conf, only when absent.
    let etc = c.slurm_conf.parent().unwrap();
    let existing = std::fs::read(etc.join("cellsched.toml")).ok();
    run(Command::new("make").current_dir(root()).args(["--no-print-directory", "install-config"]).arg(format!("SYSCONFDIR={}", etc.display())));
    if let Some(old) = existing {
        assert_eq!(std::fs::read(etc.join("cellsched.toml")).unwrap(), old, "install-config replaced the cluster's cellsched.toml");
    }
    // Step 3: cellsched doctor, all OK.
    let out = common::scrubbed_command(&common::cellsched_bin())
        .args(["doctor", "--slurm-conf", c.slurm_conf.to_str().unwrap(), "--scontrol", c.spec().slurm_bin.join("scontrol").to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.lines().last().is_some_and(|l| l.ends_with("0 WARN, 0 FAIL")), "doctor after the install steps:\n{text}");
    // No daemon was started, stopped or replaced by the steps.
    let after = daemons(&c.spec().dir);
    assert_eq!(before, after, "daemons changed during the install steps");
}
