//! The machine-readable plan (JSON) and its job-private, race-free writer.
//!
//! Layout: `<plan_dir>/cellsched-<uid>-<jobid>/plan.<step>.json`. Only
//! numbers (uid, job id, step) come from Slurm; nothing from user input
//! enters the path. The writer runs as the job's user (in `task_init`, after
//! Slurm dropped privileges): it creates the directory 0700, refuses a
//! directory that is a symlink, not owned by the user or open to others, and
//! writes through a directory descriptor with `O_NOFOLLOW|O_EXCL` into a
//! temporary name, then `renameat`s it into place (readers never see a
//! partial file; concurrent tasks writing the same plan are harmless).
use crate::error::SpankError;
use cellsched_core::Plan;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Plan-file schema version (bump on incompatible changes).
pub const PLAN_FILE_VERSION: u32 = 1;

/// What a job is told: the plan for the GPUs it was granted. Serialized as
/// the plan file; the same values go to the task environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectedPlan {
    /// [`PLAN_FILE_VERSION`].
    pub version: u32,
    /// Slurm job id.
    pub job_id: u32,
    /// `batch` or the step id.
    pub step: String,
    /// Model name or TOML path as given in `--dl-model`.
    pub model: String,
    /// Global batch size.
    pub global_batch: u32,
    /// Declared iterations (`--dl-iters`), if any.
    pub iters: Option<u64>,
    /// Canonical GPU type, e.g. `a100`.
    pub gpu_type: String,
    /// Cell text `TYPExGPUSxSTAGES`.
    pub cell: String,
    /// Nodes the plan spans.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// GPUs in total (= dp * tp * pp).
    pub gpus: u32,
    /// The parallel plan.
    pub plan: Plan,
    /// Plan text `dp=..,tp=..,pp=..,mb=..,zero=..,ckpt=..`.
    pub plan_text: String,
    /// `off`, `conservative` or `auto`.
    pub freeze_mode: String,
    /// `PROGRESS:FRACTION,...` (`none` when freezing is off).
    pub freeze_schedule: String,
    /// Predicted seconds per iteration, when estimated.
    pub iter_time_s: Option<f64>,
    /// Where the plan came from: `decision` (slurmctld's job_submit plugin),
    /// `pinned` (`--dl-plan`) or `estimated` (computed on the node).
    pub source: String,
    /// Rendezvous host (first node of the step).
    pub master_addr: Option<String>,
    /// Rendezvous port.
    pub master_port: u16,
}

impl InjectedPlan {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("plan serializes");
        s.push('\n');
        s
    }
}

/// The job-private directory and the plan file path for a step.
pub fn plan_path(plan_dir: &Path, uid: u32, job_id: u32, step_label: &str) -> (PathBuf, PathBuf) {
    let dir = plan_dir.join(format!("cellsched-{uid}-{job_id}"));
    let file = dir.join(format!("plan.{step_label}.json"));
    (dir, file)
}

/// Writes `contents` to `file` (inside `dir`) as described in the module doc.
/// `uid` is the expected owner of `dir` (the caller's effective uid).
pub fn write_private(dir: &Path, file: &Path, contents: &str, uid: u32) -> Result<(), SpankError> {
    let err = |msg: String| SpankError::PlanFile { path: file.display().to_string(), msg };
    let name = file.file_name().ok_or_else(|| err("no file name".into()))?;
    let cdir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| err("NUL in path".into()))?;
    let cname = CString::new(name.as_bytes()).map_err(|_| err("NUL in path".into()))?;
    let tmp = CString::new(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id())).unwrap();
    // SAFETY: plain libc calls on NUL-terminated strings we own; every fd
    // opened here is closed on every path.
    unsafe {
        if libc::mkdir(cdir.as_ptr(), 0o700) != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(err(format!("mkdir {}: {e}", dir.display())));
            }
        }
        let dfd = libc::open(cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
        if dfd < 0 {
            return Err(err(format!("open {}: {}", dir.display(), std::io::Error::last_os_error())));
        }
        let close_dfd = Fd(dfd);
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(dfd, &mut st) != 0 {
            return Err(err(format!("stat {}: {}", dir.display(), std::io::Error::last_os_error())));
        }
        if st.st_uid != uid || st.st_mode & 0o077 != 0 {
            return Err(err(format!(
                "refusing directory {}: owner uid {} mode {:o} (want uid {uid}, mode 0700)",
                dir.display(),
                st.st_uid,
                st.st_mode & 0o7777
            )));
        }
        libc::unlinkat(dfd, tmp.as_ptr(), 0);
        let fd = libc::openat(
            dfd,
            tmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        );
        if fd < 0 {
            return Err(err(format!("create: {}", std::io::Error::last_os_error())));
        }
        let f = Fd(fd);
        let bytes = contents.as_bytes();
        let mut off = 0;
        while off < bytes.len() {
            let n = libc::write(fd, bytes[off..].as_ptr().cast(), bytes.len() - off);
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                libc::unlinkat(dfd, tmp.as_ptr(), 0);
                return Err(err(format!("write: {e}")));
            }
            off += n as usize;
        }
        drop(f);
        if libc::renameat(dfd, tmp.as_ptr(), dfd, cname.as_ptr()) != 0 {
            let e = std::io::Error::last_os_error();
            libc::unlinkat(dfd, tmp.as_ptr(), 0);
            return Err(err(format!("rename: {e}")));
        }
        drop(close_dfd);
    }
    Ok(())
}

/// Closes the descriptor on drop.
struct Fd(libc::c_int);
impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this guard.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    pub(crate) fn sample_plan() -> InjectedPlan {
        let plan: Plan = "dp=2,tp=2,pp=2,mb=4,zero=1,ckpt=on".parse().unwrap();
        InjectedPlan {
            version: PLAN_FILE_VERSION,
            job_id: 42,
            step: "0".into(),
            model: "gpt2-xl".into(),
            global_batch: 64,
            iters: Some(1000),
            gpu_type: "a100".into(),
            cell: "a100x8x2".into(),
            nodes: 2,
            gpus_per_node: 4,
            gpus: 8,
            plan,
            plan_text: plan.to_string(),
            freeze_mode: "off".into(),
            freeze_schedule: String::new(),
            iter_time_s: Some(0.25),
            source: "decision".into(),
            master_addr: Some("a100-1".into()),
            master_port: 29542,
        }
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cellsched-spank-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn my_uid() -> u32 {
        unsafe { libc::geteuid() }
    }

    #[test]
    fn writes_private_file_and_overwrites_atomically() {
        let base = scratch("ok");
        let (dir, file) = plan_path(&base, my_uid(), 42, "batch");
        assert!(file.ends_with(format!("cellsched-{}-42/plan.batch.json", my_uid())));
        let p = sample_plan();
        write_private(&dir, &file, &p.to_json(), my_uid()).unwrap();
        write_private(&dir, &file, &p.to_json(), my_uid()).unwrap();
        let back: InjectedPlan = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(back, p);
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&file).unwrap().uid(), my_uid());
        let leftovers = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary files left behind");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn refuses_symlinked_or_open_directory() {
        let base = scratch("attack");
        let target = base.join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (dir, file) = plan_path(&base, my_uid(), 7, "0");
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        let e = write_private(&dir, &file, "{}", my_uid()).unwrap_err().to_string();
        assert!(e.contains("open"), "{e}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "nothing written through the symlink");
        std::fs::remove_file(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = write_private(&dir, &file, "{}", my_uid()).unwrap_err().to_string();
        assert!(e.contains("refusing directory") && e.contains("755"), "{e}");
        let e = write_private(&dir, &file, "{}", my_uid() + 1).unwrap_err().to_string();
        assert!(e.contains("refusing directory"), "{e}");
        // A symlink planted at the file name is replaced, not followed.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let victim = base.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, &file).unwrap();
        write_private(&dir, &file, "{\"x\":1}", my_uid()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&file).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&base).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Any plan round-trips through the written file.
        #[test]
        fn plan_file_round_trips(dp in 1u32..64, tp in 1u32..16, pp in 1u32..16, mb in 1u32..64,
                                 zero in 0u8..4, ckpt in any::<bool>(), iter in proptest::option::of(0.0f64..1e4),
                                 model in "[a-z0-9_./+-]{1,40}", job in any::<u32>()) {
            let base = scratch("prop");
            let mut p = sample_plan();
            p.plan = Plan { dp, tp, pp, micro_batches: mb, zero_stage: zero, checkpointing: ckpt };
            p.plan_text = p.plan.to_string();
            p.gpus = p.plan.gpus();
            p.iter_time_s = iter;
            p.model = model;
            p.job_id = job;
            let (dir, file) = plan_path(&base, my_uid(), job, "3");
            write_private(&dir, &file, &p.to_json(), my_uid()).unwrap();
            let back: InjectedPlan = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            prop_assert_eq!(back, p);
            std::fs::remove_dir_all(&base).unwrap();
        }
    }
}
