//! Questions to the running slurmctld, through `scontrol`: whether it
//! answers and which release it runs. A trait so checks can be tested
//! without a cluster.
use std::path::PathBuf;
use std::process::Command;

/// What doctor asks the controller.
pub trait Controller {
    /// `scontrol ping`: `Ok(output)` when slurmctld answers, else why not.
    fn ping(&self) -> Result<String, String>;
    /// `scontrol show config` of the running slurmctld.
    fn show_config(&self) -> Result<String, String>;
    /// `scontrol version`: the client's own release (no slurmctld needed).
    fn client_version(&self) -> Result<String, String>;
}

/// [`Controller`] through the `scontrol` program with `SLURM_CONF` set.
#[derive(Debug, Clone)]
pub struct Scontrol {
    /// The program (`scontrol` on PATH by default).
    pub program: PathBuf,
    /// The slurm.conf it is given as `SLURM_CONF`.
    pub slurm_conf: PathBuf,
}

impl Scontrol {
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.program)
            .args(args)
            .env("SLURM_CONF", &self.slurm_conf)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(format!("`scontrol {}` failed: {}", args.join(" "), format!("{} {}", stdout.trim(), stderr.trim()).trim()))
        }
    }
}

impl Controller for Scontrol {
    fn ping(&self) -> Result<String, String> {
        let out = self.run(&["ping"])?;
        if out.contains("is UP") {
            Ok(out.trim().to_string())
        } else {
            Err(out.trim().to_string())
        }
    }
    fn show_config(&self) -> Result<String, String> {
        self.run(&["show", "config"])
    }
    fn client_version(&self) -> Result<String, String> {
        self.run(&["version"])
    }
}

/// The value of `key` in `scontrol show config` output (`KEY = value`).
pub use cellsched_core::slurm_text::show_config_value;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_values() {
        let t = "Configuration data as of 2026-11-23T12:00:00\nAccountingStorageBackupHost = (null)\nSLURM_VERSION           = 22.05.8\nPluginDir               = /x/plugins\n";
        assert_eq!(show_config_value(t, "SLURM_VERSION").as_deref(), Some("22.05.8"));
        assert_eq!(show_config_value(t, "plugindir").as_deref(), Some("/x/plugins"));
        assert_eq!(show_config_value(t, "Missing"), None);
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let s = Scontrol { program: "/nonexistent/scontrol".into(), slurm_conf: "/x/slurm.conf".into() };
        assert!(s.ping().unwrap_err().contains("/nonexistent/scontrol"));
    }
}
