//! C string helpers: borrowing Slurm's `char *` as `&str`, and building
//! strings Slurm will later `xfree` (they must come from `xmalloc`).
use std::ffi::{CStr, CString};
use std::os::raw::c_char;

/// Errors building C strings.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CStrError {
    /// The text has a NUL byte at `position`, which C would truncate.
    #[error("string {text:?} has an interior NUL byte at position {position}")]
    InteriorNul {
        /// The offending text (lossy).
        text: String,
        /// Byte offset of the first NUL.
        position: usize,
    },
    /// `xstrdup` is not available (libslurm not loaded in this process).
    #[error("Slurm's xstrdup is not available in this process (libslurm not loaded)")]
    NoXmalloc,
}

/// Borrows a possibly-NULL C string as `&str` (`None` for NULL or non-UTF-8).
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string valid for `'a`.
pub unsafe fn borrow_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

/// Borrows a possibly-NULL C string as bytes, without the UTF-8 check
/// (cheap change tests under slurmctld's locks; `None` for NULL).
///
/// # Safety
/// As [`borrow_str`].
pub unsafe fn borrow_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_bytes())
    }
}

/// Like [`borrow_str`] but treats `""` as absent too.
///
/// # Safety
/// As [`borrow_str`].
pub unsafe fn borrow_nonempty<'a>(p: *const c_char) -> Option<&'a str> {
    borrow_str(p).filter(|s| !s.is_empty())
}

/// `&str` → `CString`, naming the position of an interior NUL.
pub fn to_cstring(s: &str) -> Result<CString, CStrError> {
    CString::new(s).map_err(|e| CStrError::InteriorNul { text: s.replace('\0', "\\0"), position: e.nul_position() })
}

/// An `xmalloc`ed copy of `s` that Slurm may `xfree` (for `job_desc` fields, `err_msg`, ...).
pub fn xstrdup(s: &str) -> Result<*mut c_char, CStrError> {
    let c = to_cstring(s)?;
    // SAFETY: valid C string; the shim returns NULL when xstrdup is unavailable.
    let p = unsafe { slurm_sys::shim::cellsched_xstrdup(c.as_ptr()) };
    if p.is_null() {
        Err(CStrError::NoXmalloc)
    } else {
        Ok(p)
    }
}

/// Hands `msg` to Slurm through an `err_msg` out-parameter (Slurm shows
/// it to the user and `xfree`s it); nothing when `out` is NULL or no copy
/// can be made.
///
/// # Safety
/// `out` must be NULL or point to the writable `char *` Slurm passed for it.
pub unsafe fn set_err_msg(out: *mut *mut c_char, msg: &str) {
    if !out.is_null() {
        if let Ok(p) = xstrdup(msg) {
            *out = p;
        }
    }
}

/// Replaces a Slurm-owned string field: `xfree`s the old value, stores an `xstrdup` of `value`.
///
/// # Safety
/// `*field` must be NULL or a string allocated by Slurm's `xmalloc`, and the
/// caller must hold whatever lock protects the field.
pub unsafe fn replace_xstr(field: &mut *mut c_char, value: &str) -> Result<(), CStrError> {
    let new = xstrdup(value)?;
    slurm_sys::shim::cellsched_xfree((*field).cast());
    *field = new;
    Ok(())
}

/// Frees a string Slurm allocated (e.g. from `cellsched_node_gres_used`) after copying it.
///
/// # Safety
/// `p` must be NULL or allocated by Slurm's `xmalloc`; it is invalid afterwards.
pub unsafe fn take_xstr(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let s = CStr::from_ptr(p).to_string_lossy().into_owned();
    slurm_sys::shim::cellsched_xfree(p.cast());
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(b: &[u8]) -> &CStr {
        CStr::from_bytes_with_nul(b).unwrap()
    }

    #[test]
    fn borrows_null_empty_and_text() {
        unsafe {
            assert_eq!(borrow_str(std::ptr::null()), None);
            assert_eq!(borrow_str(cs(b"\0").as_ptr()), Some(""));
            assert_eq!(borrow_nonempty(cs(b"\0").as_ptr()), None);
            assert_eq!(borrow_str(cs(b"a100\0").as_ptr()), Some("a100"));
            let bad = [0xffu8 as c_char, 0];
            assert_eq!(borrow_str(bad.as_ptr()), None);
            assert_eq!(borrow_bytes(bad.as_ptr()), Some(&[0xffu8][..]), "bytes are not checked");
            assert_eq!(borrow_bytes(std::ptr::null()), None);
            assert_eq!(borrow_bytes(cs(b"a100\0").as_ptr()), Some(&b"a100"[..]));
        }
    }

    #[test]
    fn interior_nul_is_named() {
        let e = to_cstring("ab\0c").unwrap_err();
        assert_eq!(e, CStrError::InteriorNul { text: "ab\\0c".into(), position: 2 });
        assert!(e.to_string().contains("position 2"));
        assert_eq!(to_cstring("ok").unwrap().as_bytes(), b"ok");
    }

    #[test]
    fn xstrdup_without_libslurm_is_an_error_not_a_crash() {
        assert_eq!(xstrdup("x"), Err(CStrError::NoXmalloc));
        assert!(matches!(xstrdup("a\0"), Err(CStrError::InteriorNul { .. })));
        assert_eq!(unsafe { take_xstr(std::ptr::null_mut()) }, None);
    }
}
