//! The job-environment contract: the names under which cellsched's data
//! travels between the SPANK plugin, slurmctld's plugins and the job, and the
//! one rule for reading them. Every reader (SPANK local and remote contexts,
//! job_submit, site_factor, the slurmctld FFI wrapper) goes through here.
//!
//! | name | written by | read by |
//! |---|---|---|
//! | `CELLSCHED_DL_*` ([`crate::options::DL_OPTIONS`]) | SPANK at submit (job control env) | job_submit, site_factor, SPANK remote |
//! | [`MODEL_SPEC_ENV_KEY`] | SPANK at submit, for a `--dl-model=PATH.toml` | job_submit, SPANK remote |
//! | [`DECISION_KEY`] (and [`DECISION_ENV_KEYS`]) | job_submit | SPANK remote (a hint, checked against AdminComment) |
//! | [`RESTART_KEY`], [`CKPT_DIR_KEY`], [`RECONF_EXIT_KEY`] | SPANK remote, for `--dl-elastic` jobs | the job's training script |
//!
//! # Where a key arrives, and which copy wins
//! A key `K` may reach a reader under three names ([`PREFIXES`]):
//! - `K`: the submitting user's own environment, or an entry slurmctld's
//!   plugins wrote themselves;
//! - `SPANK_K`: slurmctld's `spank_job_env` copy as slurmstepd exports it;
//! - `SLURM_SPANK_K`: sbatch's copy of a job-control variable, the only one
//!   that survives `--export=NONE` into the batch script and its steps.
//!
//! **One rule everywhere:** the first of `K`, `SPANK_K`, `SLURM_SPANK_K`
//! that is present wins. In a list of `NAME=value` entries (`spank_job_env`,
//! `env_sup`) the *last* entry of a name wins, as later writes replace
//! earlier ones.
pub use crate::model::MODEL_SPEC_ENV_KEY;

/// Prefix of every DL option key (`CELLSCHED_DL_MODEL`, ...).
pub const DL_KEY_PREFIX: &str = "CELLSCHED_DL_";
/// The placement decision's text ([`crate::Decision`]) in the job environment.
pub const DECISION_KEY: &str = "CELLSCHED_DECISION";
/// Prefix of slurmctld's `spank_job_env` copies as seen by slurmstepd.
pub const SPANK_PREFIX: &str = "SPANK_";
/// Prefix of sbatch's copies of job-control variables (kept by `--export=NONE`).
pub const SLURM_SPANK_PREFIX: &str = "SLURM_SPANK_";
/// The names a key may arrive under, in precedence order (first present wins).
pub const PREFIXES: [&str; 3] = ["", SPANK_PREFIX, SLURM_SPANK_PREFIX];
/// Names under which job_submit puts the decision into the batch environment
/// and `env_sup`: the plain name and sbatch's `SLURM_SPANK_` form, which
/// `--export=NONE` keeps and every `srun` step inherits.
pub const DECISION_ENV_KEYS: [&str; 2] = [DECISION_KEY, "SLURM_SPANK_CELLSCHED_DECISION"];

/// Elastic jobs (`--dl-elastic`): how often the job was restarted so far
/// (0 on its first run). A script resumes from its checkpoint when it is above 0.
pub const RESTART_KEY: &str = "CELLSCHED_RESTART";
/// Elastic jobs: the job's checkpoint directory, the same path on every
/// run of the job (job id kept across requeues). The first task creates it
/// as the job's user, mode 0700.
pub const CKPT_DIR_KEY: &str = "CELLSCHED_CKPT_DIR";
/// Elastic jobs: the exit code that tells cellsched "checkpoint written on
/// the reconfiguration signal, requeue me now" ([`RECONF_EXIT`]).
pub const RECONF_EXIT_KEY: &str = "CELLSCHED_RECONF_EXIT";
/// The exit code of [`RECONF_EXIT_KEY`]: 75, `EX_TEMPFAIL` of sysexits.h
/// ("temporary failure, the user is invited to retry"). A signalled job
/// that exits with it is requeued at once; one that exits otherwise within
/// the grace period has finished and is left alone.
pub const RECONF_EXIT: u8 = 75;

/// `name` without a `SLURM_SPANK_` or `SPANK_` prefix.
pub fn unprefixed(name: &str) -> &str {
    name.strip_prefix(SLURM_SPANK_PREFIX).or_else(|| name.strip_prefix(SPANK_PREFIX)).unwrap_or(name)
}

/// Looks `key` up through `get` under each name of [`PREFIXES`] in order;
/// returns the name found and its value.
pub fn lookup<V>(get: impl Fn(&str) -> Option<V>, key: &str) -> Option<(String, V)> {
    PREFIXES.iter().find_map(|p| {
        let name = format!("{p}{key}");
        get(&name).map(|v| (name, v))
    })
}

/// The value of exactly `name` in `NAME=value` entries (no prefix
/// handling); the last entry wins.
pub fn entry<'a, S: AsRef<str> + ?Sized + 'a>(entries: impl IntoIterator<Item = &'a S>, name: &str) -> Option<&'a str> {
    entries
        .into_iter()
        .filter_map(|e| e.as_ref().split_once('='))
        .filter(|(k, _)| *k == name)
        .last()
        .map(|(_, v)| v)
}

/// The value of `key` in `NAME=value` entries by the rule of this module:
/// `K` before `SPANK_K` before `SLURM_SPANK_K`, the last entry of a name.
pub fn lookup_entries<'a, S: AsRef<str> + ?Sized + 'a>(entries: impl IntoIterator<Item = &'a S>, key: &str) -> Option<&'a str> {
    let mut best: Option<(usize, &'a str)> = None;
    for e in entries {
        let Some((k, v)) = e.as_ref().split_once('=') else { continue };
        let Some(rank) = PREFIXES.iter().position(|p| k.strip_prefix(p) == Some(key)) else { continue };
        if best.map_or(true, |(r, _)| rank <= r) {
            best = Some((rank, v));
        }
    }
    best.map(|(_, v)| v)
}

/// Whether a `NAME=value` entry is a `CELLSCHED_DL_*` key (under any prefix).
pub fn is_dl_entry(entry: &str) -> bool {
    entry.split_once('=').is_some_and(|(k, _)| unprefixed(k).starts_with(DL_KEY_PREFIX))
}

/// Whether the entries carry any `CELLSCHED_DL_*` key (under any prefix).
/// Whether the options make a DL job is
/// [`crate::options::DlOptions::is_empty`]'s question.
pub fn has_dl_options<S: AsRef<str>>(entries: &[S]) -> bool {
    entries.iter().any(|e| is_dl_entry(e.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plain_before_spank_before_slurm_spank_whatever_the_order() {
        let e = env(&["SLURM_SPANK_K=3", "SPANK_K=2", "K=1", "SPANK_K=2b"]);
        assert_eq!(lookup_entries(&e, "K"), Some("1"));
        let e = env(&["SPANK_K=2", "SLURM_SPANK_K=3"]);
        assert_eq!(lookup_entries(&e, "K"), Some("2"));
        let e = env(&["SLURM_SPANK_K=3", "OTHER=1", "junk"]);
        assert_eq!(lookup_entries(&e, "K"), Some("3"));
        assert_eq!(lookup_entries(&e, "OTHER_K"), None);
        // The same rule through a lookup function.
        let m: HashMap<&str, &str> = [("SPANK_K", "2"), ("SLURM_SPANK_K", "3")].into();
        assert_eq!(lookup(|n| m.get(n).copied(), "K"), Some(("SPANK_K".to_string(), "2")));
        assert_eq!(lookup(|n| m.get(n).copied(), "X"), None);
    }

    #[test]
    fn last_entry_of_a_name_wins() {
        let e = env(&["K=a", "SPANK_K=s", "K=b"]);
        assert_eq!(lookup_entries(&e, "K"), Some("b"));
        assert_eq!(entry(&e, "K"), Some("b"));
        assert_eq!(entry(&e, "SPANK_K"), Some("s"));
        assert_eq!(entry(&e, "k"), None);
        let strs = ["A=1", "A=2"];
        assert_eq!(entry(&strs, "A"), Some("2"));
    }

    #[test]
    fn dl_option_detection() {
        assert!(has_dl_options(&env(&["SPANK_CELLSCHED_DL_MODEL=gpt2", "OTHER=1"])));
        assert!(has_dl_options(&env(&["SLURM_SPANK_CELLSCHED_DL_ITERS=1"])));
        assert!(!has_dl_options(&env(&["OTHER=1", "SPANK_FOO=CELLSCHED_DL_X", "CELLSCHED_DECISION=x", "CELLSCHED_DL_X"])));
        assert!(is_dl_entry("SLURM_SPANK_CELLSCHED_DL_BATCH=8") && !is_dl_entry("X=CELLSCHED_DL_BATCH"));
        assert_eq!(unprefixed("SLURM_SPANK_CELLSCHED_DL_CELL"), "CELLSCHED_DL_CELL");
        assert_eq!(unprefixed("SPANK_X"), "X");
        assert_eq!(unprefixed("SLURM_X"), "SLURM_X");
    }

    #[test]
    fn decision_names_follow_the_prefix_rule() {
        assert_eq!(DECISION_ENV_KEYS[0], DECISION_KEY);
        assert_eq!(DECISION_ENV_KEYS[1], format!("{SLURM_SPANK_PREFIX}{DECISION_KEY}"));
        assert!(MODEL_SPEC_ENV_KEY.starts_with(DL_KEY_PREFIX));
    }
}
