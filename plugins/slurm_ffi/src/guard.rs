//! Panic guard for every function Slurm calls: a panic must never unwind
//! into C. The panic is logged through Slurm's error logger and the
//! function returns its fallback (Slurm's own behaviour).
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; on panic logs `"<fn_name>: panic: <message>"` via `error()` and returns `fallback`.
pub fn guard<T>(fn_name: &str, fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            crate::log::error(&format!("{fn_name}: panic: {}", panic_message(&*payload)));
            fallback
        }
    }
}

/// Text of a panic payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_value_without_panic() {
        assert_eq!(guard("f", -1, || 7), 7);
    }

    #[test]
    fn returns_fallback_on_panic() {
        let v: i32 = guard("site_factor_p_set", -1, || panic!("boom {}", 3));
        assert_eq!(v, -1);
        let v: Option<u8> = guard("g", None, || {
            let empty: Vec<u8> = Vec::new();
            Some(empty[1])
        });
        assert_eq!(v, None);
    }

    #[test]
    fn extracts_panic_messages() {
        let p = catch_unwind(|| panic!("static")).unwrap_err();
        assert_eq!(panic_message(&*p), "static");
        let p = catch_unwind(|| panic!("fmt {}", 1)).unwrap_err();
        assert_eq!(panic_message(&*p), "fmt 1");
        let p = catch_unwind(|| std::panic::panic_any(5u8)).unwrap_err();
        assert_eq!(panic_message(&*p), "non-string panic payload");
    }
}
