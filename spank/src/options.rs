//! Registration of core's option table (`cellsched_core::options::DL_OPTIONS`):
//! one `--dl-*` option per row, its `--help` line ([`DlKey::usage`], prefixed
//! `[cellsched]`), and the callback that validates each value.
//!
//! Values accepted by the callbacks (command line, or Slurm's forwarding of
//! them to the remote side) accumulate in [`given`]; the first rejected value
//! is kept so `init_post_opt` can refuse the job with its message.
use crate::error::SpankError;
use crate::spank::{self, Spank};
use slurm_sys::spank_option;
use cellsched_core::options::{DlKey, DlOptions};
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Mutex, MutexGuard};

/// Options given on the command line (or forwarded to the remote side).
static GIVEN: Mutex<DlOptions> = Mutex::new(DlOptions::NONE);

/// Which keys were explicitly given (so env-var equivalents do not override).
static GIVEN_KEYS: Mutex<Vec<DlKey>> = Mutex::new(Vec::new());

/// The options accepted so far in this process.
pub fn given() -> MutexGuard<'static, DlOptions> {
    GIVEN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The keys given explicitly so far in this process.
pub fn given_keys() -> Vec<DlKey> {
    GIVEN_KEYS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The options of this job: those given (command line, or forwarded to the
/// remote side by Slurm) completed, for the options not in `given`, from
/// their environment equivalents by `cellsched_core::job_env`'s rule
/// (`CELLSCHED_DL_X`, then `SPANK_`, then `SLURM_SPANK_`: the copies an
/// enclosing sbatch/salloc job or `--export=NONE` leaves).
pub fn with_env(given_opts: &DlOptions, given: &[DlKey], env: &dyn Fn(&str) -> Option<String>) -> Result<DlOptions, SpankError> {
    let mut o = given_opts.clone();
    o.complete_from_env(given, env)?;
    Ok(o)
}

/// Validates and records one option value; `Err` carries the message.
/// `check_catalog` resolves `--dl-model` against the catalog (local side
/// only: remote callbacks run as root, where a user path must not be read).
pub fn accept(key: DlKey, value: &str, check_catalog: bool) -> Result<(), String> {
    let mut g = given();
    let mut next = g.clone();
    next.parse_option(key.option_name(), value).map_err(|e| e.to_string())?;
    if key == DlKey::Model && check_catalog {
        // Refuse unknown models right here: an option callback error stops
        // sbatch/srun even when the plugin is loaded `optional`.
        let catalog = cellsched_core::model::ModelCatalog::builtin();
        next.check_model(|m| catalog.resolve(m)).map_err(|e| e.to_string())?;
    }
    *g = next;
    let mut keys = GIVEN_KEYS.lock().unwrap_or_else(|p| p.into_inner());
    if !keys.contains(&key) {
        keys.push(key);
    }
    Ok(())
}

/// The SPANK option callback shared by all `--dl-*` options (`val` is the
/// index in [`DlKey::ALL`]).
unsafe extern "C" fn option_cb(val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    let rc = cellsched_slurm_ffi::guard("cellsched: option callback", Err("internal error in option callback".into()), || {
        let key = *usize::try_from(val).ok().and_then(|i| DlKey::ALL.get(i)).ok_or("unknown option value")?;
        if optarg.is_null() {
            if !key.takes_value() {
                return accept(key, "yes", remote == 0); // a flag
            }
            if key.value_optional() {
                return accept(key, "", remote == 0); // `--dl-elastic` alone: its default
            }
            return Err(format!("--{} needs a value: {}", key.option_name(), key.allowed_form()));
        }
        // SAFETY: Slurm passes a NUL-terminated argument string.
        let arg = unsafe { CStr::from_ptr(optarg) }.to_string_lossy();
        accept(key, &arg, remote == 0)
    });
    match rc {
        Ok(()) => 0,
        Err(msg) => {
            let side = if remote != 0 { " (remote)" } else { "" };
            spank::log(spank::Level::Error, &format!("{msg}{side}"));
            -1
        }
    }
}

/// SPANK's `has_arg`: 0 for a flag, 1 for a value, 2 for a value that may
/// be left out (`--dl-elastic` alone; given, it must be `--dl-elastic=SIG`,
/// so the next word on the command line is never taken for it).
fn has_arg(key: DlKey) -> c_int {
    match (key.takes_value(), key.value_optional()) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    }
}

/// Registers every `--dl-*` option with Slurm (in `slurm_spank_init`; the
/// static `spank_options` table is not loaded in the allocator context).
pub fn register_all(sp: &Spank) -> Result<(), String> {
    for (i, key) in DlKey::ALL.iter().enumerate() {
        // Slurm copies the strings; leaking these few bytes once per process
        // keeps them valid for any Slurm version that does not.
        let name = CString::new(key.option_name()).unwrap().into_raw();
        // A flag has no argument info (`--help` then shows no `=`).
        let arginfo: *mut c_char =
            if key.takes_value() { CString::new(key.arg_info()).unwrap().into_raw() } else { std::ptr::null_mut() };
        let usage = CString::new(key.usage()).unwrap().into_raw();
        let mut opt = spank_option {
            name,
            arginfo,
            usage,
            has_arg: has_arg(*key),
            val: i as c_int,
            cb: Some(option_cb),
        };
        sp.register_option(&mut opt)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_elastic_value_may_be_left_out() {
        assert_eq!(has_arg(DlKey::Elastic), 2);
        assert_eq!(has_arg(DlKey::Model), 1);
        assert!(DlKey::ALL.iter().filter(|k| has_arg(**k) == 2).count() == 1);
        accept(DlKey::Elastic, "", true).unwrap();
        assert_eq!(given().elastic.map(|s| s.to_string()).as_deref(), Some("USR1"));
    }

    #[test]
    fn callback_accepts_and_rejects() {
        // The callback logs through Slurm on error, so exercise `accept`.
        accept(DlKey::Iters, "12", true).unwrap();
        let e = accept(DlKey::Iters, "abc", true).unwrap_err();
        assert!(e.contains("--dl-iters") && e.contains("positive integer"), "{e}");
        assert_eq!(given().iters, Some(12));
        assert!(given_keys().contains(&DlKey::Iters));
        let e = accept(DlKey::Model, "no-such-model", true).unwrap_err();
        assert!(e.contains("--dl-model value 'no-such-model'"), "{e}");
        assert_eq!(given().model, None);
    }
}
