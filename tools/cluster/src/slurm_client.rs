//! Running Slurm client commands (`scontrol`, `sinfo`, `sacctmgr`, ...)
//! against the cluster's own `slurm.conf`.
use crate::error::{ClusterError, Result};
use std::path::Path;
use std::process::{Command, Output};

/// Runs `bin_dir/name args...` with `SLURM_CONF=conf`.
pub fn run(bin_dir: &Path, conf: &Path, name: &str, args: &[&str]) -> Result<Output> {
    let prog = bin_dir.join(name);
    Command::new(&prog)
        .args(args)
        .env("SLURM_CONF", conf)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ClusterError::MissingProgram { what: format!("Slurm client `{name}`"), path: prog.clone() },
            _ => ClusterError::io("cannot run", &prog)(e),
        })
}

/// Like [`run`] but fails on a non-zero exit; returns stdout.
pub fn run_ok(bin_dir: &Path, conf: &Path, name: &str, args: &[&str]) -> Result<String> {
    let out = run(bin_dir, conf, name, args)?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if text.is_empty() {
            text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        return Err(ClusterError::Command { cmd: format!("{name} {}", args.join(" ")), status: out.status.to_string(), output: text });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Node states from `sinfo -h -N -o "%N %T"` output: (node, state).
pub fn parse_node_states(sinfo: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = sinfo
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.to_string()))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A node state in which the node takes jobs (responding, not down/drained).
pub fn is_usable_state(state: &str) -> bool {
    !state.ends_with('*') && matches!(state, "idle" | "mixed" | "allocated" | "completing")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_states_parse_and_classify() {
        let s = parse_node_states("a100-1 idle\na100-2 down*\nv100-1 mixed\na100-1 idle\n");
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], ("a100-1".into(), "idle".into()));
        assert!(is_usable_state("idle") && is_usable_state("mixed"));
        assert!(!is_usable_state("down*") && !is_usable_state("idle*") && !is_usable_state("drained") && !is_usable_state("unknown"));
    }

    #[test]
    fn missing_client_is_named() {
        let e = run(Path::new("/nonexistent-bin"), Path::new("/x"), "sinfo", &[]).unwrap_err().to_string();
        assert!(e.contains("sinfo") && e.contains("install-deps"), "{e}");
    }
}
