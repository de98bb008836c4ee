//! User names to uids on this host, for the iteration predictor's history
//! (`cellsched_core::ordering::Predictions::load`).
use std::ffi::CString;

/// The uid of user `name` on this host (NSS lookup: may block, call outside locks).
pub fn uid_of(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    let mut pwd = unsafe { std::mem::zeroed::<libc::passwd>() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; `buf` outlives it.
    let rc = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(pwd.pw_uid)
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_is_uid_0_and_unknown_names_have_none() {
        assert_eq!(super::uid_of("root"), Some(0));
        assert_eq!(super::uid_of("no-such-user-cellsched-xyz"), None);
        assert_eq!(super::uid_of("bad\0name"), None);
    }
}
