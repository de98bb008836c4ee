//! `cellsched doctor`: checks an installation and prints what to fix.
use anyhow::bail;
use cellsched_doctor::controller::Scontrol;
use cellsched_doctor::{checks, Options};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The installation's slurm.conf.
    #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
    pub slurm_conf: PathBuf,
    /// Check this cellsched.toml instead of the one the plugins would find.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The scontrol program used to ask slurmctld.
    #[arg(long, default_value = "scontrol")]
    pub scontrol: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand: exit status 1 when a check fails.
pub fn run(a: Args) -> anyhow::Result<()> {
    // The plugins' view of CELLSCHED_CONFIG is slurmctld's environment; ours when that is unreadable.
    let ctld_config_env = checks::ctld_env(&a.slurm_conf).unwrap_or_else(|| std::env::var(cellsched_core::config::CONFIG_ENV).ok());
    let opts = Options { slurm_conf: a.slurm_conf.clone(), config: a.config, ctld_config_env };
    let ctl = Scontrol { program: a.scontrol, slurm_conf: a.slurm_conf };
    let report = cellsched_doctor::run(&opts, &ctl);
    if a.json {
        let v = serde_json::json!({
            "ok": report.ok(),
            "ok_count": report.count(cellsched_doctor::Status::Ok),
            "warn_count": report.count(cellsched_doctor::Status::Warn),
            "fail_count": report.count(cellsched_doctor::Status::Fail),
            "checks": report.checks,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", report.text());
    }
    if !report.ok() {
        bail!("{} check(s) failed", report.count(cellsched_doctor::Status::Fail));
    }
    Ok(())
}
