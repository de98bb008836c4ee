//! Logging through Slurm's own logger with a fixed `"%s"` format.
//!
//! Calls `slurm_info` / `slurm_verbose` / `slurm_debug*` / `slurm_error`
//! (exported by libslurm for SPANK and by libslurmfull in slurmctld, slurmd
//! and slurmstepd), resolved with `dlsym` so the same code also runs in unit
//! tests, where messages go to stderr. Messages never act as format strings.
use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::sync::OnceLock;

/// Slurm log levels reachable from plugins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `error()`
    Error,
    /// `info()`
    Info,
    /// `verbose()`
    Verbose,
    /// `debug()`
    Debug,
    /// `debug2()`
    Debug2,
    /// `debug3()`
    Debug3,
}

impl Level {
    fn symbol(self) -> &'static [u8] {
        match self {
            Level::Error => b"slurm_error\0",
            Level::Info => b"slurm_info\0",
            Level::Verbose => b"slurm_verbose\0",
            Level::Debug => b"slurm_debug\0",
            Level::Debug2 => b"slurm_debug2\0",
            Level::Debug3 => b"slurm_debug3\0",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

type LogFn = unsafe extern "C" fn(*const c_char, ...);

fn resolve(level: Level) -> Option<LogFn> {
    static FNS: [OnceLock<usize>; 6] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let addr = *FNS[level.index()].get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, level.symbol().as_ptr().cast()) as usize }
    });
    // SAFETY: the symbol is a variadic C function `void f(const char *, ...)`.
    (addr != 0).then(|| unsafe { std::mem::transmute::<*mut c_void, LogFn>(addr as *mut c_void) })
}

/// Makes a message safe for C: interior NULs become `\0` (visible, not truncating).
pub fn sanitize(msg: &str) -> CString {
    if msg.contains('\0') {
        CString::new(msg.replace('\0', "\\0")).expect("NULs replaced")
    } else {
        CString::new(msg).expect("no NUL")
    }
}

/// Logs `msg` at `level` through Slurm (or stderr when Slurm's logger is absent).
pub fn log(level: Level, msg: &str) {
    let c = sanitize(msg);
    match resolve(level) {
        // SAFETY: fixed "%s" format with one valid C string argument.
        Some(f) => unsafe { f(c"%s".as_ptr(), c.as_ptr()) },
        None => eprintln!("[{level:?}] {}", c.to_string_lossy()),
    }
}

/// Whether Slurm's logger was found in this process.
pub fn slurm_logger_present() -> bool {
    resolve(Level::Error).is_some()
}

/// `error("%s", msg)`.
pub fn error(msg: &str) {
    log(Level::Error, msg)
}
/// `info("%s", msg)`.
pub fn info(msg: &str) {
    log(Level::Info, msg)
}
/// `verbose("%s", msg)`.
pub fn verbose(msg: &str) {
    log(Level::Verbose, msg)
}
/// `debug("%s", msg)`.
pub fn debug(msg: &str) {
    log(Level::Debug, msg)
}
/// `debug2("%s", msg)`.
pub fn debug2(msg: &str) {
    log(Level::Debug2, msg)
}
/// `debug3("%s", msg)`.
pub fn debug3(msg: &str) {
    log(Level::Debug3, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_nuls_are_escaped_not_truncating() {
        assert_eq!(sanitize("a\0b").to_str().unwrap(), "a\\0b");
        assert_eq!(sanitize("100% %s %n").to_str().unwrap(), "100% %s %n");
    }

    #[test]
    fn without_slurm_logging_falls_back_to_stderr() {
        assert!(!slurm_logger_present());
        info("plain %s %n message with\0nul"); // must neither crash nor format
        error("error");
    }
}
