//! The job's `spank_job_env`: DL options set by the SPANK plugin, and the
//! `CELLSCHED_DECISION` entry this plugin adds for it.
//!
//! Entries are `KEY=VALUE`; keys may carry a `SPANK_` prefix, which is
//! stripped when looking options up (see docs/CONTRACTS.md).

/// Key under which the placement decision is passed to the SPANK plugin.
pub const DECISION_KEY: &str = "CELLSCHED_DECISION";
/// The decision's name in the job's environment as `sbatch` writes SPANK
/// job-control variables (`SLURM_SPANK_<name>`): kept by `--export=NONE`,
/// copied into every `srun` step's SPANK environment, and read by the SPANK
/// plugin's remote side like the plain name.
pub const DECISION_SPANK_ENV_KEY: &str = "SLURM_SPANK_CELLSCHED_DECISION";
/// Names under which the decision is put into the job's environment.
pub const DECISION_ENV_KEYS: [&str; 2] = [DECISION_KEY, DECISION_SPANK_ENV_KEY];
/// Prefix shared by every DL option key.
pub const DL_KEY_PREFIX: &str = "CELLSCHED_DL_";

fn split(entry: &str) -> Option<(&str, &str)> {
    let (k, v) = entry.split_once('=')?;
    Some((k.strip_prefix("SPANK_").unwrap_or(k), v))
}

/// The value of `key` (without `SPANK_` prefix); the last entry wins.
pub fn lookup<'a>(entries: &'a [String], key: &str) -> Option<&'a str> {
    entries.iter().rev().filter_map(|e| split(e)).find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// Whether the job carries any DL option (`CELLSCHED_DL_*`).
pub fn has_dl_options(entries: &[String]) -> bool {
    entries.iter().filter_map(|e| split(e)).any(|(k, _)| k.starts_with(DL_KEY_PREFIX))
}

/// The value of exactly `key` (no prefix stripping); the last entry wins.
pub fn lookup_exact<'a>(entries: &'a [String], key: &str) -> Option<&'a str> {
    entries.iter().rev().filter_map(|e| e.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn looks_up_with_and_without_prefix() {
        let e = env(&["SPANK_CELLSCHED_DL_MODEL=gpt-1.3b", "CELLSCHED_DL_BATCH=32", "OTHER=1", "junk"]);
        assert_eq!(lookup(&e, "CELLSCHED_DL_MODEL"), Some("gpt-1.3b"));
        assert_eq!(lookup(&e, "CELLSCHED_DL_BATCH"), Some("32"));
        assert_eq!(lookup(&e, "CELLSCHED_DL_CELL"), None);
        assert!(has_dl_options(&e));
        assert!(!has_dl_options(&env(&["OTHER=1", "SPANK_FOO=CELLSCHED_DL_X"])));
    }

    #[test]
    fn exact_lookup_does_not_strip() {
        let e = env(&["SPANK_CELLSCHED_DL_MODEL=a", "CELLSCHED_DL_MODEL=b", "CELLSCHED_DL_MODEL=c"]);
        assert_eq!(lookup_exact(&e, "CELLSCHED_DL_MODEL"), Some("c"));
        assert_eq!(lookup_exact(&e, "SPANK_CELLSCHED_DL_MODEL"), Some("a"));
        assert_eq!(lookup_exact(&e, "DL_MODEL"), None);
    }
}
