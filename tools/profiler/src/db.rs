//! Writes to the profile database (core's `ProfileDb` CSV). Every change is a
//! read-modify-write under an exclusive `flock` on `<db>.lock`, saved by
//! temp file + rename: concurrent profilers do not lose each other's rows and
//! an interrupted write leaves the old file intact.
use crate::error::ProfilerError;
use cellsched_core::profile_db::{ProfileDb, ProfileRecord};
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive advisory lock on `<db>.lock`, released on drop.
struct DbLock(File);

impl DbLock {
    fn acquire(db: &Path) -> Result<DbLock, ProfilerError> {
        let mut name = db.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| ProfilerError::io(format!("opening lock {}", path.display()), e))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(ProfilerError::io(
                format!("locking {}", path.display()),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(DbLock(f))
    }
}

impl Drop for DbLock {
    fn drop(&mut self) {
        // SAFETY: unlocking our own descriptor.
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

fn load_or_new(path: &Path) -> Result<ProfileDb, ProfilerError> {
    if path.exists() {
        Ok(ProfileDb::load_csv(path)?)
    } else {
        Ok(ProfileDb::new())
    }
}

/// Adds (or replaces) `rec` in the database at `path`, creating it if
/// missing. Returns the number of records afterwards.
pub fn insert_record(path: &Path, rec: ProfileRecord) -> Result<usize, ProfilerError> {
    let _lock = DbLock::acquire(path)?;
    let mut db = load_or_new(path)?;
    db.insert(rec);
    db.save_csv(path)?;
    Ok(db.len())
}

/// Adds (or replaces) every record of `recs` in the database at `path` under
/// one lock and one atomic write. Returns the number of records afterwards.
pub fn insert_records(path: &Path, recs: impl IntoIterator<Item = ProfileRecord>) -> Result<usize, ProfilerError> {
    let _lock = DbLock::acquire(path)?;
    let mut db = load_or_new(path)?;
    for rec in recs {
        db.insert(rec);
    }
    db.save_csv(path)?;
    Ok(db.len())
}

/// Rows read from each merged file, and the database size afterwards.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MergeSummary {
    /// (file, rows read) in argument order.
    pub files: Vec<(String, usize)>,
    /// Records in the database after the merge.
    pub total: usize,
}

/// Merges CSV files into the database at `out` (created if missing); later
/// files win on equal keys. All-or-nothing: a bad row in any file leaves
/// `out` unchanged.
pub fn merge_files(out: &Path, inputs: &[PathBuf]) -> Result<MergeSummary, ProfilerError> {
    if inputs.is_empty() {
        return Err(ProfilerError::invalid(
            "input files",
            "",
            "at least one profile CSV to import",
        ));
    }
    let _lock = DbLock::acquire(out)?;
    let mut db = load_or_new(out)?;
    let mut files = Vec::new();
    for f in inputs {
        let n = db.import_csv(f)?;
        files.push((f.display().to_string(), n));
    }
    db.save_csv(out)?;
    Ok(MergeSummary {
        files,
        total: db.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cellsched-prof-db-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn rec(model: &str, gpu: &str, t: f64) -> ProfileRecord {
        ProfileRecord {
            model: model.into(),
            batch: 32,
            gpu_type: gpu.into(),
            nodes: 1,
            gpus_per_node: 4,
            iter_time_s: t,
            plan: None,
            peak_mem_gib: None,
            first_iter_s: None,
        }
    }

    #[test]
    fn insert_creates_then_replaces() {
        let d = tmp("insert");
        let p = d.join("profile.csv");
        assert_eq!(
            insert_record(&p, rec("gpt2", "NVIDIA A100-SXM4-80GB", 0.5)).unwrap(),
            1
        );
        assert_eq!(insert_record(&p, rec("bert", "v100", 0.7)).unwrap(), 2);
        assert_eq!(
            insert_record(&p, rec("gpt2", "a100", 0.4)).unwrap(),
            2,
            "same key replaced"
        );
        let db = ProfileDb::load_csv(&p).unwrap();
        assert_eq!(db.lookup("gpt2", 32, "a100", 1, 4), Some(0.4));
        let leftovers: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        std::fs::remove_dir_all(d).ok();
    }

    #[test]
    fn merge_is_all_or_nothing() {
        let d = tmp("merge");
        let (a, b, bad, out) = (
            d.join("a.csv"),
            d.join("b.csv"),
            d.join("bad.csv"),
            d.join("out.csv"),
        );
        std::fs::write(&a, "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\ngpt2,32,a100,1,4,0.5\nbert,16,a100,1,1,0.2\n").unwrap();
        std::fs::write(&b, "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s,plan\ngpt2,32,a100,1,4,0.45,\"dp=4,tp=1,pp=1\"\ngpt2,32,v100,1,8,0.9,\n").unwrap();
        std::fs::write(
            &bad,
            "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\ngpt2,32,a100,1,4,fast\n",
        )
        .unwrap();
        let s = merge_files(&out, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(s.total, 3);
        assert_eq!(s.files[1].1, 2);
        let db = ProfileDb::load_csv(&out).unwrap();
        assert_eq!(
            db.lookup("gpt2", 32, "a100", 1, 4),
            Some(0.45),
            "later file wins"
        );
        let before = std::fs::read(&out).unwrap();
        let e = merge_files(&out, &[a, bad.clone()]).unwrap_err();
        assert!(e.to_string().contains("bad.csv"), "{e}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            before,
            "failed merge leaves the DB unchanged"
        );
        assert!(merge_files(&out, &[]).is_err());
        std::fs::remove_dir_all(d).ok();
    }
}
