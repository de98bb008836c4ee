//! The running daemon's `slurm_conf`, read through `dlsym` so the `.so`
//! also loads where libslurm's data symbols are absent (tests, scans).
use std::ffi::{c_char, CStr};

fn owned(p: *const c_char) -> Option<String> {
    // SAFETY: Slurm strings are NUL-terminated or NULL.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `(PrioritySiteFactorParameters, path of slurm.conf)`; `(None, None)` without libslurm.
pub fn conf_paths() -> (Option<String>, Option<String>) {
    // SAFETY: dlsym with a NUL-terminated name; NULL if absent.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"slurm_conf".as_ptr()) } as *const slurm_sys::slurm_conf_t;
    if p.is_null() {
        return (None, None);
    }
    // SAFETY: `slurm_conf` is libslurm's global config; layout from the same release's header.
    unsafe { (owned((*p).site_factor_params), owned((*p).slurm_conf)) }
}

/// slurmctld's `StateSaveLocation`; `None` without libslurm or when unset.
pub fn state_save_location() -> Option<String> {
    // SAFETY: as in `conf_paths`.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"slurm_conf".as_ptr()) } as *const slurm_sys::slurm_conf_t;
    if p.is_null() {
        return None;
    }
    // SAFETY: as in `conf_paths`.
    unsafe { owned((*p).state_save_location) }.filter(|s| !s.is_empty())
}
