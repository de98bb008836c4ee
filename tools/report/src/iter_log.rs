//! Reading a job's output file for `cellsched report --iter-log` safely.
//!
//! The file is named by a pattern over job ids, so its path and contents
//! are under the job owner's control while the report may run as root. A
//! file is read only when it is a regular file reached without a symlink in
//! its last component, opened without blocking and read up to
//! [`MAX_ITER_LOG_BYTES`]:
//! - `O_NOFOLLOW`: a symlink (to `/dev/zero`, to another user's file) is refused;
//! - `O_NONBLOCK`: opening a FIFO returns at once instead of waiting for a writer;
//! - `fstat` on the opened descriptor: anything but a regular file (FIFO,
//!   device, socket, directory) is refused, with no race between check and read;
//! - the size cap bounds memory whatever the file's length.
use crate::error::ReportError;
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Most bytes read from one job output file (the `cellsched-iter` lines
/// are searched in this prefix).
pub const MAX_ITER_LOG_BYTES: u64 = 16 << 20;

/// The text of the job output file at `path` (lossy UTF-8, at most
/// [`MAX_ITER_LOG_BYTES`] bytes), or an error naming why it was not read.
pub fn read_iter_log(path: &Path) -> Result<String, ReportError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => ReportError::file(path, "is a symlink: not read"),
            _ => ReportError::file(path, e),
        })?;
    let meta = f.metadata().map_err(|e| ReportError::file(path, e))?;
    if !meta.file_type().is_file() {
        return Err(ReportError::file(path, "is not a regular file: not read"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_ITER_LOG_BYTES).read_to_end(&mut bytes).map_err(|e| ReportError::file(path, e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cellsched-iterlog-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_are_read_and_capped() {
        let d = temp_dir("regular");
        let p = d.join("1.out");
        std::fs::write(&p, "cellsched-iter 0.5\n").unwrap();
        assert_eq!(read_iter_log(&p).unwrap(), "cellsched-iter 0.5\n");
        let big = d.join("2.out");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_ITER_LOG_BYTES + 4096).unwrap(); // sparse: no disk used
        assert_eq!(read_iter_log(&big).unwrap().len() as u64, MAX_ITER_LOG_BYTES);
        let e = read_iter_log(&d.join("missing.out")).unwrap_err().to_string();
        assert!(e.contains("missing.out"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn fifos_symlinks_devices_and_directories_are_refused_without_blocking() {
        let d = temp_dir("special");
        let fifo = d.join("fifo.out");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open would wait for a writer forever.
        let e = read_iter_log(&fifo).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let link = d.join("zero.out");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_iter_log(&link).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        let e = read_iter_log(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_iter_log(&d).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
