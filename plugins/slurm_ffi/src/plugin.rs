//! The three data symbols every Slurm plugin exports, and [`pin_library`]
//! for plugins that run background threads.
//!
//! ```ignore
//! cellsched_slurm_ffi::plugin_identity!(
//!     name: "cellsched A-SRPT site factor",
//!     kind: "site_factor/cellsched",
//! );
//! ```
//! expands to `const char plugin_name[]`, `const char plugin_type[]` (arrays,
//! as Slurm's `dlsym` expects, not pointers) and
//! `const uint32_t plugin_version = SLURM_VERSION_NUMBER`.

/// Copies `s` plus a terminating NUL into a `[u8; N]` at compile time.
/// Fails to compile if `N != s.len() + 1` or `s` contains a NUL.
pub const fn c_array<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    assert!(b.len() + 1 == N, "c_array: N must be s.len() + 1");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        assert!(b[i] != 0, "plugin strings must not contain NUL");
        out[i] = b[i];
        i += 1;
    }
    out
}

/// Exports `plugin_name`, `plugin_type` and `plugin_version` (= the build release).
#[macro_export]
macro_rules! plugin_identity {
    (name: $name:expr, kind: $kind:expr $(,)?) => {
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static plugin_name: [u8; $name.len() + 1] = $crate::plugin::c_array($name);
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static plugin_type: [u8; $kind.len() + 1] = $crate::plugin::c_array($kind);
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static plugin_version: u32 = $crate::slurm_sys::SLURM_VERSION_NUMBER;
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_arrays_are_nul_terminated() {
        const A: [u8; 6] = c_array("spank");
        assert_eq!(&A, b"spank\0");
    }

    #[test]
    #[should_panic(expected = "s.len() + 1")]
    fn wrong_length_is_rejected() {
        let _: [u8; 3] = c_array("spank");
    }

    mod exported {
        crate::plugin_identity!(name: "test plugin", kind: "site_factor/test");
        #[test]
        fn identity_symbols_have_c_layout() {
            assert_eq!(&plugin_type, b"site_factor/test\0");
            assert_eq!(&plugin_name, b"test plugin\0");
            assert_eq!(plugin_version, slurm_sys::SLURM_VERSION_NUMBER);
        }
    }
}

/// Keeps the calling plugin's `.so` mapped after `dlclose` (the function is
/// compiled into each plugin, so its address names that plugin's file), so
/// a background thread still waiting for slurmctld's locks when `fini` gives
/// up on it cannot run unmapped code.
pub fn pin_library() {
    // SAFETY: dladdr/dlopen with a code address of this library and the
    // file name dladdr returned; RTLD_NOLOAD only bumps the existing mapping.
    let mut info = unsafe { std::mem::zeroed::<libc::Dl_info>() };
    if unsafe { libc::dladdr(pin_library as *const std::ffi::c_void, &mut info) } != 0 && !info.dli_fname.is_null() {
        unsafe { libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NODELETE | libc::RTLD_NOLOAD) };
    }
}
