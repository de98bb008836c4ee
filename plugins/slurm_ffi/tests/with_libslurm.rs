//! The helpers against the real libslurm, loaded the way srun/sbatch have it
//! (global scope), in a process of its own. Skips with a note when libslurm
//! is not installed (`CELLSCHED_LIBSLURM` overrides the path).
use cellsched_slurm_ffi::{ctld, cstr, log, version};
use std::ffi::{CStr, CString};

fn load_libslurm() -> bool {
    let candidates = match std::env::var("CELLSCHED_LIBSLURM") {
        Ok(p) => vec![p],
        Err(_) => vec![
            "/usr/lib/x86_64-linux-gnu/libslurm.so".to_string(),
            "libslurm.so".to_string(),
        ],
    };
    for c in candidates {
        let name = CString::new(c.clone()).unwrap();
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if !h.is_null() {
            return true;
        }
    }
    eprintln!("note: libslurm not found; skipping the libslurm tests");
    false
}

#[test]
fn helpers_work_with_the_real_libslurm() {
    if !load_libslurm() {
        return;
    }
    // xstrdup'd strings round-trip and are xfree'd.
    let p = cstr::xstrdup("cellsched: cell=a100x4x1").expect("xstrdup with libslurm loaded");
    assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "cellsched: cell=a100x4x1");
    assert_eq!(unsafe { cstr::take_xstr(p) }.as_deref(), Some("cellsched: cell=a100x4x1"));

    // A Slurm-owned field is replaced twice without leaking the first value.
    let mut field: *mut std::os::raw::c_char = std::ptr::null_mut();
    unsafe {
        cstr::replace_xstr(&mut field, "one").unwrap();
        cstr::replace_xstr(&mut field, "two").unwrap();
        assert_eq!(cstr::take_xstr(field).as_deref(), Some("two"));
    }

    // Job-descriptor environment through Slurm's env_array_overwrite.
    let mut desc: cellsched_slurm_ffi::slurm_sys::job_desc_msg_t = Default::default();
    ctld::desc_env_set(&mut desc, "CELLSCHED_DL_MODEL", "gpt2").unwrap();
    ctld::desc_env_set(&mut desc, "CELLSCHED_DECISION", "cell=v100x8x1").unwrap();
    ctld::desc_env_set(&mut desc, "CELLSCHED_DL_MODEL", "bert").unwrap();
    assert_eq!(desc.spank_job_env_size, 2);
    let env = ctld::desc_env(&desc);
    assert_eq!(cellsched_core::job_env::lookup_entries(env.iter().copied(), "CELLSCHED_DL_MODEL"), Some("bert"));
    assert_eq!(cellsched_core::job_env::lookup_entries(env.iter().copied(), "CELLSCHED_DECISION"), Some("cell=v100x8x1"));

    // Logging goes through Slurm's logger; libslurm alone is not slurmctld.
    assert!(log::slurm_logger_present());
    log::info("cellsched-slurm-ffi test: %s %n must print literally");
    assert!(!ctld::in_slurmctld());

    // The running API version is libslurm's; it matches the build only for the same major release.
    let running = version::running_api_version().expect("slurm_api_version");
    assert_eq!(
        version::check_running_slurm().is_ok(),
        running == cellsched_slurm_ffi::slurm_sys::SLURM_API_VERSION
    );
    eprintln!(
        "libslurm API {running:#x}, built for {} (API {:#x}): {:?}",
        cellsched_slurm_ffi::slurm_sys::RELEASE,
        cellsched_slurm_ffi::slurm_sys::SLURM_API_VERSION,
        version::check_running_slurm()
    );
}
