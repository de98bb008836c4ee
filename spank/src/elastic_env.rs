//! What the tasks of an elastic job (`--dl-elastic`) see besides their plan:
//! the restart marker and the checkpoint directory contract
//! ([`cellsched_core::job_env`]: `CELLSCHED_RESTART`, `CELLSCHED_CKPT_DIR`,
//! `CELLSCHED_RECONF_EXIT`).
//!
//! Trust: the restart count comes from what Slurm and the job's record say
//! (the AdminComment's `restarts=`, read by slurmstepd as root, and Slurm's
//! own `SLURM_RESTART_COUNT`), never from a `CELLSCHED_RESTART` the user
//! exported. The checkpoint directory is created by the task itself, which
//! runs as the job's user (`task_init`): slurmstepd never creates or
//! chowns a path the user controls.
use cellsched_core::job_env::{CKPT_DIR_KEY, RECONF_EXIT, RECONF_EXIT_KEY, RESTART_KEY};
use std::path::{Path, PathBuf};

/// Directory under the job's working directory that holds the checkpoint
/// directories of its elastic jobs, one per job id.
pub const CKPT_PARENT: &str = ".cellsched-ckpt";

/// The job's restart count: the larger of its record's `restarts=` (the
/// reconfigurations cellsched made) and Slurm's `SLURM_RESTART_COUNT`
/// (every requeue, also an admin's or a node failure's).
pub fn restart_count(record_restarts: Option<u32>, slurm_restart_count: Option<&str>) -> u32 {
    let slurm = slurm_restart_count.and_then(|v| v.trim().parse::<u32>().ok()).unwrap_or(0);
    record_restarts.unwrap_or(0).max(slurm)
}

/// The job's checkpoint directory: `<work_dir>/.cellsched-ckpt/<job_id>`,
/// the same on every run of the job (Slurm keeps the job id and working
/// directory across requeues).
pub fn ckpt_dir(work_dir: &Path, job_id: u32) -> PathBuf {
    work_dir.join(CKPT_PARENT).join(job_id.to_string())
}

/// Creates `dir` (and its parent) with mode 0700 unless it exists; run as
/// the job's user. An existing path that is not a directory is an error.
pub fn ensure_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => return Err(format!("checkpoint directory {} exists and is not a directory", dir.display())),
        Err(_) => {}
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create checkpoint directory {}: {e}", dir.display()))
}

/// The variables of an elastic job's task.
pub fn elastic_env(restarts: u32, dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        (RESTART_KEY, restarts.to_string()),
        (CKPT_DIR_KEY, dir.to_string_lossy().into_owned()),
        (RECONF_EXIT_KEY, RECONF_EXIT.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_come_from_the_record_and_slurm_only() {
        assert_eq!(restart_count(None, None), 0);
        assert_eq!(restart_count(Some(2), Some("1")), 2);
        assert_eq!(restart_count(Some(1), Some("3")), 3);
        assert_eq!(restart_count(None, Some(" 4\n")), 4);
        // Garbage in Slurm's variable does not count.
        assert_eq!(restart_count(Some(1), Some("many")), 1);
    }

    #[test]
    fn the_checkpoint_dir_is_per_job_and_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let work = std::env::temp_dir().join(format!("cs-ckpt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        let d = ckpt_dir(&work, 42);
        assert_eq!(d, work.join(".cellsched-ckpt/42"));
        ensure_dir(&d).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
        ensure_dir(&d).unwrap(); // exists: fine
        let f = ckpt_dir(&work, 43);
        std::fs::write(&f, "x").unwrap();
        assert!(ensure_dir(&f).unwrap_err().contains("not a directory"));
        let env = elastic_env(2, &d);
        assert_eq!(env[0], ("CELLSCHED_RESTART", "2".to_string()));
        assert_eq!(env[1].1, d.to_string_lossy());
        assert_eq!(env[2], ("CELLSCHED_RECONF_EXIT", "75".to_string()));
        let _ = std::fs::remove_dir_all(&work);
    }
}
