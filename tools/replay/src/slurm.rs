//! Slurm client commands against one local cluster: `sbatch`, `squeue`,
//! `scancel`, `sacct`, each with that cluster's `SLURM_CONF` and a clean
//! environment (no inherited `SBATCH_*`/`SLURM_*`/`CELLSCHED_DL_*` values
//! that would change the submitted jobs).
use crate::error::ReplayError;
use cellsched_devcluster::Cluster;
use cellsched_core::job_env;
use cellsched_report::record::{merge_requeued_runs, parse_display_output, parse_sacct_output, set_display};
use cellsched_report::{JobRecord, Query};
use std::path::PathBuf;
use std::process::Command;

/// A job as `squeue` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// Job id.
    pub id: u64,
    /// State (`PENDING`, `RUNNING`, `COMPLETING`, ...).
    pub state: String,
    /// Reason (`Resources`, `Priority`, `BadConstraints`, ...).
    pub reason: String,
}

/// Slurm's final job states: a job in one of these is done.
pub const TERMINAL_STATES: &[&str] =
    &["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"];

/// Pending reasons that never clear by themselves: such a job is stuck.
pub const NEVER_RUNNABLE_REASONS: &[&str] = &[
    "BadConstraints",
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "InvalidQOS",
    "InvalidAccount",
    "DependencyNeverSatisfied",
    "JobHeldAdmin",
    "JobHeldUser",
];

/// Whether a pending reason means the job can never start.
pub fn never_runnable(reason: &str) -> bool {
    NEVER_RUNNABLE_REASONS.iter().any(|r| reason.starts_with(r))
}

/// Parses `squeue -h -o %i|%T|%r` output; lines that do not parse are skipped.
pub fn parse_squeue(text: &str) -> Vec<QueueEntry> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.trim().splitn(3, '|');
            let id = f.next()?.trim().parse().ok()?;
            let state = f.next()?.trim().to_string();
            let reason = f.next().unwrap_or("").trim().to_string();
            Some(QueueEntry { id, state, reason })
        })
        .collect()
}

/// The job id from `sbatch --parsable` output (`123` or `123;cluster`).
pub fn parse_sbatch_id(stdout: &str) -> Option<u64> {
    let line = stdout.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    line.split(';').next()?.trim().parse().ok()
}

/// Runs the client commands of one cluster.
#[derive(Debug, Clone)]
pub struct Slurm {
    bin: PathBuf,
    conf: PathBuf,
}

impl Slurm {
    /// Clients for `cluster` (its `slurm.conf`, its client directory).
    pub fn for_cluster(cluster: &Cluster) -> Slurm {
        Slurm { bin: cluster.spec.slurm_bin.clone(), conf: cluster.layout.slurm_conf() }
    }

    fn command(&self, tool: &str) -> Command {
        let mut c = Command::new(self.bin.join(tool));
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("SBATCH_") || k.starts_with("SLURM_") || k.starts_with(job_env::DL_KEY_PREFIX) || k.starts_with(job_env::SPANK_PREFIX) {
                c.env_remove(k.as_ref());
            }
        }
        c.env("SLURM_CONF", &self.conf).env("SLURM_TIME_FORMAT", "%s");
        c
    }

    /// Runs `tool args`; a non-zero exit is an error with the last stderr line.
    pub fn run(&self, tool: &str, args: &[String]) -> Result<String, ReplayError> {
        log::debug!("{tool} {}", args.join(" "));
        let out = self
            .command(tool)
            .args(args)
            .output()
            .map_err(|e| ReplayError::Slurm { tool: tool.into(), msg: format!("cannot run {}: {e}", self.bin.join(tool).display()) })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let msg = err.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("").to_string();
            return Err(ReplayError::Slurm {
                tool: tool.into(),
                msg: if msg.is_empty() { format!("exit status {}", out.status) } else { msg },
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Submits a job; returns its id.
    pub fn sbatch(&self, args: &[String]) -> Result<u64, ReplayError> {
        let out = self.run("sbatch", args)?;
        parse_sbatch_id(&out)
            .ok_or_else(|| ReplayError::Slurm { tool: "sbatch".into(), msg: format!("no job id in its output '{}'", out.trim()) })
    }

    /// Every job slurmctld still holds (pending, running, completing).
    pub fn queue(&self) -> Result<Vec<QueueEntry>, ReplayError> {
        Ok(parse_squeue(&self.run("squeue", &["-h".into(), "-a".into(), "-o".into(), "%i|%T|%r".into()])?))
    }

    /// Cancels jobs (no-op for none); jobs that already ended are not an error.
    pub fn cancel(&self, ids: &[u64]) -> Result<(), ReplayError> {
        if ids.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        match self.run("scancel", &list) {
            Ok(_) => Ok(()),
            Err(ReplayError::Slurm { msg, .. }) if msg.contains("Invalid job id") || msg.contains("already completed") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The accounting records of `ids` (allocations only).
    pub fn sacct(&self, ids: &[u64]) -> Result<Vec<JobRecord>, ReplayError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let q = Query { jobs: Some(ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")), ..Query::default() };
        let mut jobs = parse_sacct_output(&self.run("sacct", &q.sacct_args())?)?;
        let order: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
        set_display(&mut jobs, &parse_display_output(&self.run("sacct", &q.display_args())?, &order));
        Ok(merge_requeued_runs(jobs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines() {
        let q = parse_squeue("12|PENDING|Resources\n13|RUNNING|None\nbogus\n14|PENDING|BadConstraints\n");
        assert_eq!(q.len(), 3);
        assert_eq!(q[0], QueueEntry { id: 12, state: "PENDING".into(), reason: "Resources".into() });
        assert!(never_runnable(&q[2].reason));
        assert!(!never_runnable("Resources") && !never_runnable("Priority"));
    }

    #[test]
    fn sbatch_ids() {
        assert_eq!(parse_sbatch_id("42\n"), Some(42));
        assert_eq!(parse_sbatch_id("sbatch: note\n43;cellsched\n"), Some(43));
        assert_eq!(parse_sbatch_id("Submitted batch job x"), None);
        assert_eq!(parse_sbatch_id(""), None);
    }
}
