//! The machine-readable plan (JSON) and where it lives.
//!
//! Layout: `<plan_dir>/<jobid>.<step>.<nodeid>/plan.json`, numbers from Slurm
//! only (nothing a user writes enters a path). Who does what:
//! - slurmstepd, as root, before privileges drop (`init_post_opt`):
//!   [`prepare_plan_dir`] checks that `plan_dir` is a root-owned directory no
//!   one else can write to (creating it 0755 if missing), then
//!   [`prepare_step_dir`] (re)creates the step's directory 0700 and gives it
//!   to the job's user. Since only root can create entries in `plan_dir`, no
//!   other user can pre-create, link or fill the path.
//! - the task, as the job's user (`task_init`): [`write_private`] writes the
//!   file through a directory descriptor with `O_NOFOLLOW|O_EXCL` into a
//!   temporary name and `renameat`s it into place (readers never see a
//!   partial file), refusing a directory that is a symlink, not the user's or
//!   open to others.
//! - slurmstepd, as root, when the step ends (`slurm_spank_exit`):
//!   [`remove_step_dir`]; and the job epilog ([`remove_job_dirs`]) removes
//!   whatever a killed step left behind. Removal never follows symlinks and
//!   completes however deep a job nests directories ([`crate::remove_tree`]).
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

/// Default `plan_dir`: root-owned, on a tmpfs that is emptied at boot.
pub const DEFAULT_PLAN_DIR: &str = "/run/cellsched";

/// The step's directory and plan file: `<plan_dir>/<job>.<step>.<node_id>/plan.json`.
pub fn plan_path(plan_dir: &Path, job_id: u32, step_label: &str, node_id: u32) -> (PathBuf, PathBuf) {
    let dir = plan_dir.join(format!("{job_id}.{step_label}.{node_id}"));
    let file = dir.join("plan.json");
    (dir, file)
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> SpankError {
    SpankError::PlanFile { path: path.display().to_string(), msg: format!("{what}: {e}") }
}

/// As root: makes sure `plan_dir` is a real directory owned by root and
/// writable by no one else, creating it (mode 0755) when missing. A
/// world-writable directory such as `/tmp` is refused: another user could
/// pre-create the plan paths there.
pub fn prepare_plan_dir(plan_dir: &Path) -> Result<(), SpankError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o755).create(plan_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(plan_dir, "cannot create plan_dir", e)),
    }
    let m = std::fs::symlink_metadata(plan_dir).map_err(|e| io_err(plan_dir, "cannot stat plan_dir", e))?;
    if !m.file_type().is_dir() || m.uid() != 0 || m.mode() & 0o022 != 0 {
        return Err(SpankError::PlanFile {
            path: plan_dir.display().to_string(),
            msg: format!(
                "plan_dir must be a directory owned by root and writable only by root (found {}, owner uid {}, mode {:o}); \
                 set plan_dir= in plugstack.conf to such a directory (default {DEFAULT_PLAN_DIR})",
                if m.file_type().is_symlink() { "a symlink" } else if m.file_type().is_dir() { "a directory" } else { "a file" },
                m.uid(),
                m.mode() & 0o7777
            ),
        });
    }
    Ok(())
}

/// As root, in a checked `plan_dir`: (re)creates the step's directory 0700
/// owned by `uid:gid`. Anything already there (a requeued job's leftovers)
/// is removed first, without following symlinks.
pub fn prepare_step_dir(dir: &Path, uid: u32, gid: u32) -> Result<(), SpankError> {
    use std::os::unix::fs::DirBuilderExt;
    remove_step_dir(dir)?;
    std::fs::DirBuilder::new().mode(0o700).create(dir).map_err(|e| io_err(dir, "cannot create", e))?;
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).map_err(|e| io_err(dir, "cannot chown", e))?;
    Ok(())
}

/// Removes a step's directory and its contents (never following symlinks,
/// with a bounded number of descriptors however deep the job nested
/// directories: [`crate::remove_tree`]); absent is fine.
pub fn remove_step_dir(dir: &Path) -> Result<(), SpankError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(dir, "cannot stat", e)),
        Ok(m) if m.file_type().is_dir() => match crate::remove_tree::remove_tree(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(dir, "cannot remove", e)),
            _ => Ok(()),
        },
        Ok(_) => std::fs::remove_file(dir).map_err(|e| io_err(dir, "cannot remove", e)),
    }
}

/// Removes every step directory of job `job_id` under `plan_dir` (job
/// epilog); returns how many were removed.
pub fn remove_job_dirs(plan_dir: &Path, job_id: u32) -> Result<usize, SpankError> {
    let prefix = format!("{job_id}.");
    let entries = match std::fs::read_dir(plan_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        r => r.map_err(|e| io_err(plan_dir, "cannot read", e))?,
    };
    let mut n = 0;
    for e in entries.flatten() {
        if e.file_name().to_str().is_some_and(|name| name.starts_with(&prefix)) {
            remove_step_dir(&e.path())?;
            n += 1;
        }
    }
    Ok(n)
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
        let (dir, file) = plan_path(&base, 42, "batch", 0);
        assert!(file.ends_with("42.batch.0/plan.json"), "{}", file.display());
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
        let (dir, file) = plan_path(&base, 7, "0", 1);
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

    #[test]
    fn plan_dir_must_be_root_only_and_step_dirs_are_recreated_and_removed() {
        use std::os::unix::fs::MetadataExt;
        let base = scratch("root");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let pd = base.join("plans");
        if my_uid() == 0 {
            prepare_plan_dir(&pd).unwrap();
            let m = std::fs::metadata(&pd).unwrap();
            assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o755));
            // A leftover (a requeued job's, or anything planted) is replaced by a fresh 0700 dir.
            let (dir, file) = plan_path(&pd, 9, "batch", 0);
            std::fs::create_dir(&dir).unwrap();
            let outside = base.join("outside");
            std::fs::create_dir(&outside).unwrap();
            std::fs::write(outside.join("keep"), "x").unwrap();
            std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
            prepare_step_dir(&dir, 4321, 4321).unwrap();
            let m = std::fs::metadata(&dir).unwrap();
            assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (4321, 4321, 0o700));
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
            assert!(outside.join("keep").exists(), "removal never follows links");
            prepare_step_dir(&plan_path(&pd, 9, "0", 1).0, 4321, 4321).unwrap();
            prepare_step_dir(&plan_path(&pd, 19, "0", 0).0, 4321, 4321).unwrap();
            assert_eq!(remove_job_dirs(&pd, 9).unwrap(), 2);
            assert!(!dir.exists() && plan_path(&pd, 19, "0", 0).0.exists(), "only job 9's dirs go");
            remove_step_dir(&plan_path(&pd, 19, "0", 0).0).unwrap();
            remove_step_dir(&file).unwrap();
            // World-writable (like /tmp) or a symlink: refused with what to do.
            std::fs::set_permissions(&pd, std::fs::Permissions::from_mode(0o1777)).unwrap();
            let e = prepare_plan_dir(&pd).unwrap_err().to_string();
            assert!(e.contains("writable only by root") && e.contains("1777"), "{e}");
            let ln = base.join("ln");
            std::os::unix::fs::symlink(&outside, &ln).unwrap();
            assert!(prepare_plan_dir(&ln).unwrap_err().to_string().contains("symlink"));
        } else {
            // Not root: a directory we own is not root's.
            assert!(prepare_plan_dir(&pd).unwrap_err().to_string().contains("owned by root"));
        }
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
            let (dir, file) = plan_path(&base, job, "3", 0);
            write_private(&dir, &file, &p.to_json(), my_uid()).unwrap();
            let back: InjectedPlan = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            prop_assert_eq!(back, p);
            std::fs::remove_dir_all(&base).unwrap();
        }
    }
}
