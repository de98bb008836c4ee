//! The option table: one `--dl-*` option per [`DlKey`], its `--help` text
//! prefixed `[cellsched]`, and the callback that validates each value.
//!
//! Values accepted by the callbacks (command line, or Slurm's forwarding of
//! them to the remote side) accumulate in [`given`]; the first rejected value
//! is kept so `init_post_opt` can refuse the job with its message.
use crate::ffi::{self, spank_option, spank_t};
use cellsched_core::options::{DlKey, DlOptions};
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Mutex, MutexGuard};

/// Options given on the command line (or forwarded to the remote side).
static GIVEN: Mutex<DlOptions> = Mutex::new(DlOptions {
    model: None,
    batch: None,
    iters: None,
    cell: cellsched_core::options::CellChoice::Auto,
    freeze: cellsched_core::options::FreezeMode::Off,
    plan: cellsched_core::options::PlanChoice::Auto,
    explain: false,
    deadline: None,
});

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

/// The `--help` line for a key: `[cellsched] <what> (env CELLSCHED_DL_X)`.
pub fn usage(key: DlKey) -> String {
    let what = match key {
        DlKey::Model => "DL model: catalog name or path to a model TOML",
        DlKey::Batch => "DL global batch size",
        DlKey::Iters => "DL training iterations (default: predicted from history)",
        DlKey::Cell => "DL Cell: auto|TYPExN|TYPExNxSTAGES (e.g. a100x4)",
        DlKey::Freeze => "DL layer freezing: off|conservative|auto",
        DlKey::Plan => "DL plan: auto|dp=N,tp=N,pp=N[,mb=N,zero=N,ckpt=on]",
        DlKey::Explain => "DL: show the chosen Cell and the runner-up at submit",
        DlKey::Deadline => "DL deadline: now+N[s|m|h|d|w], YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS]",
    };
    format!("[cellsched] {what} (env {})", key.env_key())
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
    let rc = cellsched_plugin_common::guard("cellsched: option callback", Err("internal error in option callback".into()), || {
        let key = *usize::try_from(val).ok().and_then(|i| DlKey::ALL.get(i)).ok_or("unknown option value")?;
        if optarg.is_null() {
            if !key.takes_value() {
                return accept(key, "yes", remote == 0); // a flag
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
            ffi::log(ffi::Level::Error, &format!("{msg}{side}"));
            -1
        }
    }
}

/// Registers every `--dl-*` option with Slurm (in `slurm_spank_init`; the
/// static `spank_options` table is not loaded in the allocator context).
pub fn register_all(sp: spank_t) -> Result<(), String> {
    for (i, key) in DlKey::ALL.iter().enumerate() {
        // Slurm copies the strings; leaking these few bytes once per process
        // keeps them valid for any Slurm version that does not.
        let name = CString::new(key.option_name()).unwrap().into_raw();
        // A flag has no argument info (`--help` then shows no `=`).
        let arginfo: *const c_char =
            if key.takes_value() { CString::new(key.arg_info()).unwrap().into_raw() } else { std::ptr::null() };
        let usage = CString::new(usage(*key)).unwrap().into_raw();
        let mut opt = spank_option {
            name,
            arginfo,
            usage,
            has_arg: c_int::from(key.takes_value()),
            val: i as c_int,
            cb: Some(option_cb),
        };
        ffi::register_option(sp, &mut opt)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_lines_are_prefixed_and_name_env() {
        for k in DlKey::ALL {
            let u = usage(k);
            assert!(u.starts_with("[cellsched] ") && u.contains(k.env_key()), "{u}");
        }
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
