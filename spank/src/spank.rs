//! The SPANK API as the plugin uses it: a safe handle ([`Spank`]) over
//! slurm-sys's bindgen output of `spank.h` and `slurm.h`, so every type,
//! item, context and struct layout comes from the headers of the release
//! built against (nothing of spank.h is redeclared here).
//!
//! Slurm's functions are resolved at run time from the host process with
//! `dlsym(RTLD_DEFAULT)`: the `.so` then has no undefined Slurm symbols,
//! loads in every Slurm process (sbatch, srun, salloc, slurmd, slurmstepd),
//! and its unit tests link without Slurm. Each resolved pointer's type is
//! checked at compile time against the generated declaration of the same
//! function.
// `Spank::from_raw` is the one place a raw `spank_t` becomes a handle; the
// handle only passes it back to Slurm and never dereferences it.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use slurm_sys as sys;
use std::ffi::{c_char, c_int, CStr, CString};
use std::marker::PhantomData;

pub use cellsched_slurm_ffi::log::Level;

/// Resolves a Slurm function by name with `dlsym(RTLD_DEFAULT)`, typed as
/// slurm-sys declares it (a compile-time check: a signature that differs
/// from the release's header does not build).
macro_rules! slurm_fn {
    ($name:ident : $ty:ty) => {
        #[allow(non_upper_case_globals)]
        fn $name() -> Option<$ty> {
            // The declared type is the generated one (never called directly:
            // outside a Slurm process the symbol does not exist).
            const _: $ty = sys::$name;
            static CELL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            let addr = *CELL.get_or_init(|| {
                let sym = concat!(stringify!($name), "\0");
                // SAFETY: dlsym with a NUL-terminated name.
                unsafe { libc::dlsym(libc::RTLD_DEFAULT, sym.as_ptr().cast()) as usize }
            });
            // SAFETY: the symbol, when present, is Slurm's function of this
            // exact C signature (checked against the header above).
            (addr != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(addr) })
        }
    };
}

slurm_fn!(spank_context: unsafe extern "C" fn() -> sys::spank_context_t);
slurm_fn!(spank_option_register: unsafe extern "C" fn(sys::spank_t, *mut sys::spank_option) -> sys::spank_err_t);
slurm_fn!(spank_get_item: unsafe extern "C" fn(sys::spank_t, sys::spank_item_t, ...) -> sys::spank_err_t);
slurm_fn!(spank_getenv: unsafe extern "C" fn(sys::spank_t, *const c_char, *mut c_char, c_int) -> sys::spank_err_t);
slurm_fn!(spank_setenv: unsafe extern "C" fn(sys::spank_t, *const c_char, *const c_char, c_int) -> sys::spank_err_t);
slurm_fn!(spank_unsetenv: unsafe extern "C" fn(sys::spank_t, *const c_char) -> sys::spank_err_t);
slurm_fn!(spank_job_control_setenv: unsafe extern "C" fn(sys::spank_t, *const c_char, *const c_char, c_int) -> sys::spank_err_t);
slurm_fn!(spank_strerror: unsafe extern "C" fn(sys::spank_err_t) -> *const c_char);
slurm_fn!(slurm_load_job: unsafe extern "C" fn(*mut *mut sys::job_info_msg_t, u32, u16) -> c_int);
slurm_fn!(slurm_free_job_info_msg: unsafe extern "C" fn(*mut sys::job_info_msg_t));

/// `ESPANK_SUCCESS`.
const SUCCESS: sys::spank_err_t = sys::ESPANK_SUCCESS as sys::spank_err_t;

/// Returned when Slurm's function is missing from the process (not a
/// Slurm error code: [`check`] names it as a missing symbol).
const MISSING: sys::spank_err_t = sys::spank_err_t::MAX;

/// `enum spank_context`: where the plugin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `S_CTX_ERROR` (or `spank_context` missing).
    Error,
    /// `S_CTX_LOCAL`: srun.
    Local,
    /// `S_CTX_REMOTE`: slurmstepd.
    Remote,
    /// `S_CTX_ALLOCATOR`: sbatch, salloc.
    Allocator,
    /// `S_CTX_SLURMD`: slurmd.
    Slurmd,
    /// `S_CTX_JOB_SCRIPT`: prolog/epilog.
    JobScript,
}

impl Context {
    /// The context of a `spank_context()` value.
    pub fn from_raw(c: sys::spank_context_t) -> Context {
        match c {
            sys::S_CTX_LOCAL => Context::Local,
            sys::S_CTX_REMOTE => Context::Remote,
            sys::S_CTX_ALLOCATOR => Context::Allocator,
            sys::S_CTX_SLURMD => Context::Slurmd,
            sys::S_CTX_JOB_SCRIPT => Context::JobScript,
            _ => Context::Error,
        }
    }

    /// The context this process runs the plugin in.
    pub fn current() -> Context {
        // SAFETY: no arguments; valid in every SPANK callback.
        spank_context().map_or(Context::Error, |f| Context::from_raw(unsafe { f() }))
    }
}

/// The `uint32_t` (or `int`) items the plugin reads with `spank_get_item`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// `S_JOB_UID`.
    JobUid,
    /// `S_JOB_GID`.
    JobGid,
    /// `S_JOB_ID`.
    JobId,
    /// `S_JOB_STEPID`.
    StepId,
    /// `S_JOB_NNODES`: nodes of the step.
    Nodes,
    /// `S_JOB_NODEID`: this node's index in the step.
    NodeId,
    /// `S_JOB_LOCAL_TASK_COUNT`.
    LocalTasks,
    /// `S_JOB_TOTAL_TASK_COUNT`.
    TotalTasks,
    /// `S_TASK_ID` (an `int`).
    TaskId,
    /// `S_TASK_GLOBAL_ID`.
    GlobalTaskId,
}

impl Item {
    fn raw(self) -> sys::spank_item_t {
        match self {
            Item::JobUid => sys::S_JOB_UID,
            Item::JobGid => sys::S_JOB_GID,
            Item::JobId => sys::S_JOB_ID,
            Item::StepId => sys::S_JOB_STEPID,
            Item::Nodes => sys::S_JOB_NNODES,
            Item::NodeId => sys::S_JOB_NODEID,
            Item::LocalTasks => sys::S_JOB_LOCAL_TASK_COUNT,
            Item::TotalTasks => sys::S_JOB_TOTAL_TASK_COUNT,
            Item::TaskId => sys::S_TASK_ID,
            Item::GlobalTaskId => sys::S_TASK_GLOBAL_ID,
        }
    }
}

/// The handle Slurm passes to a callback, valid for that callback only
/// (`'a`). Callback code receives `&Spank`, never the raw `spank_t`.
pub struct Spank<'a> {
    raw: sys::spank_t,
    _callback: PhantomData<&'a mut sys::spank_handle>,
}

impl<'a> Spank<'a> {
    /// Wraps the handle of the running callback.
    ///
    /// # Safety
    /// `raw` is the `spank_t` Slurm passed to the callback now running, and
    /// the handle does not outlive that callback.
    pub unsafe fn from_raw(raw: sys::spank_t) -> Spank<'a> {
        Spank { raw, _callback: PhantomData }
    }

    /// Registers an option; Slurm copies the option but not necessarily its
    /// strings, so they must stay valid for the process (leaked `CString`s).
    pub fn register_option(&self, opt: &mut sys::spank_option) -> Result<(), String> {
        // SAFETY: `opt` is a valid spank_option; the handle is the callback's.
        let rc = spank_option_register().map_or(MISSING, |f| unsafe { f(self.raw, opt) });
        check(rc, "spank_option_register")
    }

    /// A `uint32_t` (or `int`) item; `None` when Slurm has no value here.
    pub fn get_u32(&self, it: Item) -> Option<u32> {
        let mut v: u32 = 0;
        // SAFETY: every `Item` takes a single `uint32_t *` (or `int *` for
        // S_TASK_ID, same size) out-parameter.
        let rc = spank_get_item().map_or(MISSING, |f| unsafe { f(self.raw, it.raw(), &mut v as *mut u32) });
        (rc == SUCCESS).then_some(v)
    }

    /// A job environment variable (remote context), `None` if unset or not UTF-8.
    pub fn getenv(&self, name: &str) -> Option<String> {
        let cname = CString::new(name).ok()?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: buf is writable for its length; spank_getenv NUL-terminates.
        let rc = spank_getenv().map_or(MISSING, |f| unsafe { f(self.raw, cname.as_ptr(), buf.as_mut_ptr().cast(), buf.len() as c_int) });
        if rc != SUCCESS {
            return None;
        }
        let s = CStr::from_bytes_until_nul(&buf).ok()?;
        s.to_str().ok().map(str::to_string)
    }

    /// Sets a task/job environment variable (remote context).
    pub fn setenv(&self, name: &str, value: &str, overwrite: bool) -> Result<(), String> {
        let (n, v) = cstrings(name, value)?;
        // SAFETY: valid NUL-terminated strings; the handle is the callback's.
        let rc = spank_setenv().map_or(MISSING, |f| unsafe { f(self.raw, n.as_ptr(), v.as_ptr(), c_int::from(overwrite)) });
        check(rc, "spank_setenv")
    }

    /// Unsets a task/job environment variable (remote context).
    pub fn unsetenv(&self, name: &str) {
        if let (Ok(n), Some(f)) = (CString::new(name), spank_unsetenv()) {
            // SAFETY: valid NUL-terminated string; the handle is the callback's.
            unsafe { f(self.raw, n.as_ptr()) };
        }
    }

    /// Sets a variable in the job control environment (local/allocator
    /// context): it reaches slurmctld in `job_desc->spank_job_env`.
    pub fn job_control_setenv(&self, name: &str, value: &str) -> Result<(), String> {
        let (n, v) = cstrings(name, value)?;
        // SAFETY: valid NUL-terminated strings; the handle is the callback's.
        let rc = spank_job_control_setenv().map_or(MISSING, |f| unsafe { f(self.raw, n.as_ptr(), v.as_ptr(), 1) });
        check(rc, "spank_job_control_setenv")
    }
}

/// `Ok` for `ESPANK_SUCCESS`, else Slurm's message for the code.
fn check(rc: sys::spank_err_t, call: &str) -> Result<(), String> {
    if rc == SUCCESS {
        return Ok(());
    }
    let msg = match spank_strerror() {
        Some(_) if rc == MISSING => format!("{call} not found in this process"),
        // SAFETY: spank_strerror returns a static string for any code.
        Some(f) => unsafe { CStr::from_ptr(f(rc)) }.to_string_lossy().into_owned(),
        None => format!("error {rc} (Slurm symbol not found)"),
    };
    Err(format!("{call}: {msg}"))
}

fn cstrings(name: &str, value: &str) -> Result<(CString, CString), String> {
    Ok((
        CString::new(name).map_err(|_| format!("NUL in variable name {name:?}"))?,
        CString::new(value).map_err(|_| format!("NUL in value of {name}"))?,
    ))
}

/// Job `job_id`'s AdminComment as slurmctld holds it, by one
/// `slurm_load_job` RPC (slurmstepd, as root, in `init_post_opt`):
/// `None` when libslurm is absent or the RPC fails, `Some(None)` when the
/// job has no AdminComment. The field is read from `slurm_job_info_t` as
/// the release's header lays it out.
pub fn job_admin_comment(job_id: u32) -> Option<Option<String>> {
    let (load, free) = (slurm_load_job()?, slurm_free_job_info_msg()?);
    let mut msg: *mut sys::job_info_msg_t = std::ptr::null_mut();
    // SAFETY: Slurm's API; `msg` is an out-parameter freed below with its own free function.
    if unsafe { load(&mut msg, job_id, 0) } != 0 || msg.is_null() {
        return None;
    }
    // SAFETY: `msg` is a valid job_info_msg_t until freed; record 0 exists
    // when record_count > 0, and its strings are NUL-terminated or NULL.
    unsafe {
        let m = &*msg;
        let out = if m.record_count > 0 && !m.job_array.is_null() {
            let job = &*m.job_array;
            Some((!job.admin_comment.is_null()).then(|| CStr::from_ptr(job.admin_comment).to_string_lossy().into_owned()))
        } else {
            None
        };
        free(msg);
        out
    }
}

/// Logs through Slurm's logger with a fixed `%s` format (the shared plugin
/// logger), prefixed `cellsched: `. In sbatch/srun, errors go to the user's terminal.
pub fn log(level: Level, msg: &str) {
    cellsched_slurm_ffi::log::log(level, &format!("cellsched: {msg}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_map_from_the_header_values() {
        assert_eq!(Context::from_raw(sys::S_CTX_LOCAL), Context::Local);
        assert_eq!(Context::from_raw(sys::S_CTX_REMOTE), Context::Remote);
        assert_eq!(Context::from_raw(sys::S_CTX_ALLOCATOR), Context::Allocator);
        assert_eq!(Context::from_raw(sys::S_CTX_SLURMD), Context::Slurmd);
        assert_eq!(Context::from_raw(sys::S_CTX_JOB_SCRIPT), Context::JobScript);
        assert_eq!(Context::from_raw(sys::S_CTX_ERROR), Context::Error);
        assert_eq!(Context::from_raw(77), Context::Error);
    }

    #[test]
    fn without_slurm_the_calls_fail_cleanly() {
        // The unit-test process has no Slurm: every call reports, none crashes.
        assert_eq!(Context::current(), Context::Error);
        // SAFETY: the handle is never dereferenced (the functions are missing).
        let sp = unsafe { Spank::from_raw(std::ptr::null_mut()) };
        assert_eq!(sp.get_u32(Item::JobId), None);
        assert_eq!(sp.getenv("PATH"), None);
        let e = sp.setenv("A", "b", true).unwrap_err();
        assert!(e.starts_with("spank_setenv"), "{e}");
        assert!(sp.setenv("A\0", "b", true).unwrap_err().contains("NUL in variable name"));
        assert_eq!(job_admin_comment(1), None);
    }
}
