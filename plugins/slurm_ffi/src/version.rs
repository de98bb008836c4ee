//! Checks at plugin `init` that the running Slurm is the release the plugin
//! was built for. Slurm itself refuses non-SPANK plugins whose
//! `plugin_version` differs; SPANK plugins get no such check, so they call
//! [`check_running_slurm`].
use std::os::raw::c_long;

/// A release mismatch between build and run time.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VersionError {
    /// libslurm's API version (`slurm_api_version()`) is not the build tree's `SLURM_API_VERSION`.
    #[error(
        "running libslurm API version {running:#x} differs from {built:#x} of Slurm {release} \
         this plugin was built for; rebuild cellsched against the running Slurm"
    )]
    ApiMismatch {
        /// `slurm_api_version()` of the running library.
        running: u32,
        /// `SLURM_API_VERSION` at build time.
        built: u32,
        /// Build release, e.g. "22.05.8".
        release: &'static str,
    },
    /// libslurm is not loaded in this process.
    #[error("slurm_api_version() not found: libslurm is not loaded in this process")]
    NoLibslurm,
}

/// `slurm_api_version()` of the libslurm loaded in this process, if any.
pub fn running_api_version() -> Option<u32> {
    // SAFETY: dlsym by NUL-terminated name; the symbol is `long slurm_api_version(void)`.
    unsafe {
        let p = libc::dlsym(libc::RTLD_DEFAULT, c"slurm_api_version".as_ptr());
        if p.is_null() {
            return None;
        }
        let f: extern "C" fn() -> c_long = std::mem::transmute(p);
        Some(f() as u32)
    }
}

/// Compares a running API version with the build's.
pub fn check_api_version(running: u32) -> Result<(), VersionError> {
    if running == slurm_sys::SLURM_API_VERSION {
        Ok(())
    } else {
        Err(VersionError::ApiMismatch { running, built: slurm_sys::SLURM_API_VERSION, release: slurm_sys::RELEASE })
    }
}

/// Checks the libslurm loaded in this process against the build (API version:
/// releases of one major share it, different majors never do).
pub fn check_running_slurm() -> Result<(), VersionError> {
    check_api_version(running_api_version().ok_or(VersionError::NoLibslurm)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_release_passes() {
        assert_eq!(check_api_version(slurm_sys::SLURM_API_VERSION), Ok(()));
    }

    #[test]
    fn another_api_version_is_named() {
        let e = check_api_version(0x1).unwrap_err();
        assert!(matches!(e, VersionError::ApiMismatch { running: 1, .. }));
        assert!(e.to_string().contains(slurm_sys::RELEASE), "{e}");
    }

    #[test]
    fn no_libslurm_in_unit_tests() {
        assert_eq!(running_api_version(), None);
        assert_eq!(check_running_slurm(), Err(VersionError::NoLibslurm));
    }
}
