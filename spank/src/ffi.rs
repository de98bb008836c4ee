//! The few spank.h declarations the plugin uses, plus safe wrappers.
//! Symbols resolve at run time from the host process (sbatch, srun, salloc,
//! slurmd, slurmstepd all link libslurmfull).
#![allow(non_camel_case_types)]
// `spank_t` is the opaque handle Slurm passes to each callback; the wrappers
// only hand it back to Slurm and never dereference it themselves.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// Opaque SPANK handle.
pub type spank_t = *mut c_void;
/// Option callback: `(val, optarg, remote) -> 0 | error`.
pub type spank_opt_cb_f = Option<unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int>;

/// `struct spank_option` from spank.h.
#[repr(C)]
pub struct spank_option {
    pub name: *const c_char,
    pub arginfo: *const c_char,
    pub usage: *const c_char,
    pub has_arg: c_int,
    pub val: c_int,
    pub cb: spank_opt_cb_f,
}

/// `ESPANK_SUCCESS`.
pub const ESPANK_SUCCESS: c_int = 0;

/// `enum spank_context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Error,
    Local,
    Remote,
    Allocator,
    Slurmd,
    JobScript,
}

/// `enum spank_item` values used here.
pub mod item {
    use std::ffi::c_int;
    pub const S_JOB_UID: c_int = 0;
    pub const S_JOB_GID: c_int = 1;
    pub const S_JOB_ID: c_int = 2;
    pub const S_JOB_STEPID: c_int = 3;
    pub const S_JOB_NNODES: c_int = 4;
    pub const S_JOB_NODEID: c_int = 5;
    pub const S_JOB_LOCAL_TASK_COUNT: c_int = 6;
    pub const S_JOB_TOTAL_TASK_COUNT: c_int = 7;
    pub const S_TASK_ID: c_int = 11;
    pub const S_TASK_GLOBAL_ID: c_int = 12;
}

/// Resolves Slurm's functions at run time from the host process with
/// `dlsym(RTLD_DEFAULT)`: the `.so` then has no undefined Slurm symbols, loads
/// in every Slurm process, and its unit tests link without Slurm.
macro_rules! slurm_fn {
    ($name:ident : $ty:ty) => {
        #[allow(non_upper_case_globals)]
        fn $name() -> Option<$ty> {
            static CELL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            let addr = *CELL.get_or_init(|| {
                let sym = concat!(stringify!($name), "\0");
                // SAFETY: dlsym with a NUL-terminated name.
                unsafe { libc::dlsym(libc::RTLD_DEFAULT, sym.as_ptr().cast()) as usize }
            });
            // SAFETY: the symbol, when present, is Slurm's function of this
            // exact C signature (spank.h / log.h).
            (addr != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(addr) })
        }
    };
}

slurm_fn!(spank_context: unsafe extern "C" fn() -> c_int);
slurm_fn!(spank_option_register: unsafe extern "C" fn(spank_t, *mut spank_option) -> c_int);
slurm_fn!(spank_get_item: unsafe extern "C" fn(spank_t, c_int, ...) -> c_int);
slurm_fn!(spank_getenv: unsafe extern "C" fn(spank_t, *const c_char, *mut c_char, c_int) -> c_int);
slurm_fn!(spank_setenv: unsafe extern "C" fn(spank_t, *const c_char, *const c_char, c_int) -> c_int);
slurm_fn!(spank_unsetenv: unsafe extern "C" fn(spank_t, *const c_char) -> c_int);
slurm_fn!(spank_job_control_setenv: unsafe extern "C" fn(spank_t, *const c_char, *const c_char, c_int) -> c_int);
slurm_fn!(spank_strerror: unsafe extern "C" fn(c_int) -> *const c_char);

/// `job_info_msg_t` of `slurm.h` (same layout in 22.05 and 24.11); only the
/// first record of `job_array` is used, so `slurm_job_info_t`'s layout is never needed.
#[repr(C)]
struct JobInfoMsg {
    last_backfill: libc::time_t,
    last_update: libc::time_t,
    record_count: u32,
    job_array: *mut std::ffi::c_void,
}

slurm_fn!(slurm_load_job: unsafe extern "C" fn(*mut *mut JobInfoMsg, u32, u16) -> c_int);
slurm_fn!(slurm_free_job_info_msg: unsafe extern "C" fn(*mut JobInfoMsg));
slurm_fn!(slurm_sprint_job_info: unsafe extern "C" fn(*mut std::ffi::c_void, c_int) -> *mut c_char);
slurm_fn!(slurm_xfree: unsafe extern "C" fn(*mut *mut std::ffi::c_void));

/// Job `job_id` as slurmctld describes it (`scontrol show job` text, one
/// field group per line), by one `slurm_load_job` RPC (slurmstepd, as root,
/// in `init_post_opt`). `None` when libslurm is absent or the RPC fails.
pub fn job_info_text(job_id: u32) -> Option<String> {
    let (load, free, sprint, xfree) = (slurm_load_job()?, slurm_free_job_info_msg()?, slurm_sprint_job_info()?, slurm_xfree()?);
    let mut msg: *mut JobInfoMsg = std::ptr::null_mut();
    // SAFETY: Slurm's API; `msg` is an out-parameter freed below with its own free function.
    if unsafe { load(&mut msg, job_id, 0) } != 0 || msg.is_null() {
        return None;
    }
    // SAFETY: `msg` is a valid job_info_msg_t until freed; record 0 exists when record_count > 0.
    let text = unsafe {
        let m = &*msg;
        let out = if m.record_count > 0 && !m.job_array.is_null() {
            let mut p = sprint(m.job_array, 0);
            let t = (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned());
            if !p.is_null() {
                xfree((&mut p as *mut *mut c_char).cast());
            }
            t
        } else {
            None
        };
        free(msg);
        out
    };
    text
}

/// `ESPANK_NOT_AVAIL`-like code used when Slurm's function is missing.
const MISSING: c_int = 999;

/// The context this process runs the plugin in.
pub fn context() -> Context {
    // SAFETY: no arguments; valid in every SPANK callback.
    match spank_context().map(|f| unsafe { f() }).unwrap_or(0) {
        1 => Context::Local,
        2 => Context::Remote,
        3 => Context::Allocator,
        4 => Context::Slurmd,
        5 => Context::JobScript,
        _ => Context::Error,
    }
}

/// Registers a leaked, NUL-terminated option (Slurm copies it).
pub fn register_option(sp: spank_t, opt: &mut spank_option) -> Result<(), String> {
    // SAFETY: `opt` points to a valid spank_option with 'static strings.
    let rc = spank_option_register().map_or(MISSING, |f| unsafe { f(sp, opt) });
    check(rc, "spank_option_register")
}

fn check(rc: c_int, call: &str) -> Result<(), String> {
    if rc == ESPANK_SUCCESS {
        Ok(())
    } else {
        // SAFETY: spank_strerror returns a static string for any code.
        let msg = match spank_strerror() {
            Some(f) => unsafe { CStr::from_ptr(f(rc)) }.to_string_lossy().into_owned(),
            None => format!("error {rc} (Slurm symbol not found)"),
        };
        Err(format!("{call}: {msg}"))
    }
}

/// A `uint32_t` item (job id, step id, counts, ids).
pub fn get_u32(sp: spank_t, it: c_int) -> Option<u32> {
    let mut v: u32 = 0;
    // SAFETY: every item passed here takes a single `uint32_t *` (or `int *`
    // for S_TASK_ID, same size) out-parameter.
    let rc = spank_get_item().map_or(MISSING, |f| unsafe { f(sp, it, &mut v as *mut u32) });
    (rc == ESPANK_SUCCESS).then_some(v)
}

/// A job environment variable (remote context), `None` if unset or invalid.
pub fn getenv(sp: spank_t, name: &str) -> Option<String> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: buf is writable for its length; spank_getenv NUL-terminates.
    let rc = spank_getenv().map_or(MISSING, |f| unsafe { f(sp, cname.as_ptr(), buf.as_mut_ptr().cast(), buf.len() as c_int) });
    if rc != ESPANK_SUCCESS {
        return None;
    }
    let s = CStr::from_bytes_until_nul(&buf).ok()?;
    s.to_str().ok().map(str::to_string)
}

/// Sets a task/job environment variable (remote context).
pub fn setenv(sp: spank_t, name: &str, value: &str, overwrite: bool) -> Result<(), String> {
    let (n, v) = cstrings(name, value)?;
    // SAFETY: valid NUL-terminated strings.
    check(spank_setenv().map_or(MISSING, |f| unsafe { f(sp, n.as_ptr(), v.as_ptr(), c_int::from(overwrite)) }), "spank_setenv")
}

/// Unsets a task/job environment variable (remote context).
pub fn unsetenv(sp: spank_t, name: &str) {
    if let Ok(n) = CString::new(name) {
        // SAFETY: valid NUL-terminated string.
        if let Some(f) = spank_unsetenv() {
            unsafe { f(sp, n.as_ptr()) };
        }
    }
}

/// Sets a variable in the job control environment (local/allocator
/// context): it reaches slurmctld in `job_desc->spank_job_env`.
pub fn job_control_setenv(sp: spank_t, name: &str, value: &str) -> Result<(), String> {
    let (n, v) = cstrings(name, value)?;
    // SAFETY: valid NUL-terminated strings.
    check(
        spank_job_control_setenv().map_or(MISSING, |f| unsafe { f(sp, n.as_ptr(), v.as_ptr(), 1) }),
        "spank_job_control_setenv",
    )
}

fn cstrings(name: &str, value: &str) -> Result<(CString, CString), String> {
    Ok((
        CString::new(name).map_err(|_| format!("NUL in variable name {name:?}"))?,
        CString::new(value).map_err(|_| format!("NUL in value of {name}"))?,
    ))
}

pub use cellsched_slurm_ffi::log::Level;

/// Logs through Slurm's logger with a fixed `%s` format (the shared plugin
/// logger), prefixed `cellsched: `. In sbatch/srun, errors go to the user's terminal.
pub fn log(level: Level, msg: &str) {
    cellsched_slurm_ffi::log::log(level, &format!("cellsched: {msg}"));
}
