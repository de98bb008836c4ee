//! The user-facing DL job options (`--dl-model`, `--dl-batch`, `--dl-iters`,
//! `--dl-cell`, `--dl-freeze`, `--dl-plan`, `--dl-runtime`, `--dl-precision`, `--dl-deadline`, and the `--dl-explain` flag) and their job-environment form
//! (`CELLSCHED_DL_*`).
//!
//! [`DL_OPTIONS`] is the one table of options: name, environment key, value
//! form, help text, parser and environment form of each. The SPANK plugin
//! registers its options and `--help` lines from it, `cellsched generate man`
//! writes `spank_cellsched(8)` from it, and every reader of the job
//! environment (SPANK, job_submit, site_factor) parses through
//! [`DlOptions::from_env`] / [`DlOptions::from_entries`], which read it with
//! the one precedence rule of [`crate::job_env`].
//!
//! Adding an option: a [`DlKey`] variant, the [`DlOptions`] field it fills
//! and one row in [`DL_OPTIONS`] (in the variant's position). Registration,
//! `--help`, the man page, environment round trips and error messages follow.
//!
//! Validation lives here so that the SPANK plugin (at submit, in sbatch/srun)
//! and the job_submit plugin (in slurmctld) accept exactly the same inputs.
//! Every error names the option (or environment key) and the allowed form.
use crate::cell::{Cell, Plan};
use crate::error::CoreError;
use crate::job_env;
use crate::model::{ModelSpec, Precision, Runtime};
use std::fmt;

/// Longest accepted option value (a model TOML path is the longest kind).
pub const MAX_VALUE_LEN: usize = 256;
/// Largest accepted `--dl-batch` (global batch size): [`crate::limits::BATCH`].
pub const MAX_BATCH: u32 = crate::limits::BATCH.max_u32();
/// Largest accepted `--dl-iters`: [`crate::limits::ITERS`].
pub const MAX_ITERS: u64 = crate::limits::ITERS.max;
/// Prefix of every `--help` line of the SPANK plugin (pyxis style).
pub const HELP_PREFIX: &str = "[cellsched]";

pub use crate::freezing::FreezeMode;

/// `--dl-cell`: let the scheduler choose, or pin a Cell.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CellChoice {
    /// The scheduler picks the Cell (default).
    #[default]
    Auto,
    /// The user pinned this Cell.
    Pinned(Cell),
}

impl fmt::Display for CellChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CellChoice::Auto => f.write_str("auto"),
            CellChoice::Pinned(c) => c.fmt(f),
        }
    }
}

/// `--dl-plan`: let the performance model choose, or pin a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlanChoice {
    /// The performance model picks the plan (default).
    #[default]
    Auto,
    /// The user pinned this plan.
    Pinned(Plan),
}

impl fmt::Display for PlanChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanChoice::Auto => f.write_str("auto"),
            PlanChoice::Pinned(p) => p.fmt(f),
        }
    }
}

/// Names one DL option; its row in [`DL_OPTIONS`] says everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DlKey {
    /// `--dl-model=NAME|PATH.toml`
    Model,
    /// `--dl-batch=N`
    Batch,
    /// `--dl-iters=N`
    Iters,
    /// `--dl-cell=auto|TYPExN|TYPExNxSTAGES`
    Cell,
    /// `--dl-freeze=off|conservative|auto`
    Freeze,
    /// `--dl-plan=auto|dp=..,tp=..,pp=..`
    Plan,
    /// `--dl-runtime=any|ddp|fsdp|megatron|deepspeed|alpa`: how the job trains.
    Runtime,
    /// `--dl-precision=fp16|bf16|tf32|fp32`: the job's training precision.
    Precision,
    /// `--dl-deadline=TIME`: when the job must be done (`crate::deadline`).
    Deadline,
    /// `--dl-explain` (flag): show the chosen Cell and the runner-up at submit.
    Explain,
}

/// Parses a trimmed, length- and control-checked value into the options;
/// `Err(Some(detail))` adds a detail to the allowed form in the error.
type ParseFn = fn(&mut DlOptions, &str) -> Result<(), Option<String>>;

/// One row of the option table.
#[derive(Debug, Clone, Copy)]
pub struct DlOption {
    /// The key this row describes (rows are in [`DlKey`] order).
    pub key: DlKey,
    /// Long option name without dashes, e.g. `dl-model`.
    pub name: &'static str,
    /// Job-environment key, e.g. `CELLSCHED_DL_MODEL`.
    pub env_key: &'static str,
    /// One word for the argument in `--help` (`NAME`, `N`); `None` for a flag.
    pub arg_info: Option<&'static str>,
    /// The allowed form, for error messages and the man page.
    pub form: &'static str,
    /// What the option does, for `--help` and the man page.
    pub help: &'static str,
    parse: ParseFn,
    /// The environment form of the value; `None` while it is the default.
    value: fn(&DlOptions) -> Option<String>,
}

/// The option table, in [`DlKey`] (and `--help`) order.
pub const DL_OPTIONS: &[DlOption] = &[
    DlOption {
        key: DlKey::Model,
        name: "dl-model",
        env_key: "CELLSCHED_DL_MODEL",
        arg_info: Some("NAME"),
        form: "a catalog model name or a path to a model TOML (letters, digits, '.', '_', '-', '+', '/')",
        help: "DL model: catalog name or path to a model TOML",
        parse: |o, v| {
            if v.is_empty()
                || v.starts_with('-')
                || v.split('/').any(|seg| seg == "..")
                || !v.chars().all(|c| c.is_ascii_alphanumeric() || "._-+/".contains(c))
            {
                return Err(None);
            }
            o.model = Some(v.to_string());
            Ok(())
        },
        value: |o| o.model.clone(),
    },
    DlOption {
        key: DlKey::Batch,
        name: "dl-batch",
        env_key: "CELLSCHED_DL_BATCH",
        arg_info: Some("N"),
        form: "a positive integer (global batch size)",
        help: "DL global batch size",
        parse: |o, v| {
            o.batch = Some(parse_positive(v, u64::from(MAX_BATCH)).ok_or(None)? as u32);
            Ok(())
        },
        value: |o| o.batch.map(|b| b.to_string()),
    },
    DlOption {
        key: DlKey::Iters,
        name: "dl-iters",
        env_key: "CELLSCHED_DL_ITERS",
        arg_info: Some("N"),
        form: "a positive integer (training iterations)",
        help: "DL training iterations (default: predicted from history)",
        parse: |o, v| {
            o.iters = Some(parse_positive(v, MAX_ITERS).ok_or(None)?);
            Ok(())
        },
        value: |o| o.iters.map(|i| i.to_string()),
    },
    DlOption {
        key: DlKey::Cell,
        name: "dl-cell",
        env_key: "CELLSCHED_DL_CELL",
        arg_info: Some("CELL"),
        form: "auto, TYPExN or TYPExNxSTAGES (e.g. a100x4, v100x8x2)",
        help: "DL Cell: auto|TYPExN|TYPExNxSTAGES (e.g. a100x4)",
        parse: |o, v| {
            o.cell = auto_or::<Cell>(v)?.map_or(CellChoice::Auto, CellChoice::Pinned);
            Ok(())
        },
        value: |o| (o.cell != CellChoice::Auto).then(|| o.cell.to_string()),
    },
    DlOption {
        key: DlKey::Freeze,
        name: "dl-freeze",
        env_key: "CELLSCHED_DL_FREEZE",
        arg_info: Some("MODE"),
        form: "off, conservative or auto",
        help: "DL layer freezing: off|conservative|auto",
        parse: |o, v| {
            o.freeze = v.parse().map_err(|_| None)?;
            Ok(())
        },
        value: |o| (o.freeze != FreezeMode::Off).then(|| o.freeze.to_string()),
    },
    DlOption {
        key: DlKey::Plan,
        name: "dl-plan",
        env_key: "CELLSCHED_DL_PLAN",
        arg_info: Some("PLAN"),
        form: "auto or dp=N,tp=N,pp=N[,mb=N][,zero=0..3][,ckpt=on|off]",
        help: "DL plan: auto|dp=N,tp=N,pp=N[,mb=N,zero=N,ckpt=on]",
        parse: |o, v| {
            o.plan = auto_or::<Plan>(v)?.map_or(PlanChoice::Auto, PlanChoice::Pinned);
            Ok(())
        },
        value: |o| (o.plan != PlanChoice::Auto).then(|| o.plan.to_string()),
    },
    DlOption {
        key: DlKey::Runtime,
        name: "dl-runtime",
        env_key: "CELLSCHED_DL_RUNTIME",
        arg_info: Some("RUNTIME"),
        form: "any, ddp, fsdp, megatron, deepspeed or alpa",
        help: "DL training runtime (the plans it can run): any|ddp|fsdp|megatron|deepspeed|alpa (default: the model's)",
        parse: |o, v| {
            o.runtime = Some(parse_name(v).ok_or(None)?);
            Ok(())
        },
        value: |o| o.runtime.map(name_of),
    },
    DlOption {
        key: DlKey::Precision,
        name: "dl-precision",
        env_key: "CELLSCHED_DL_PRECISION",
        arg_info: Some("PRECISION"),
        form: "fp16, bf16, tf32 or fp32",
        help: "DL training precision: fp16|bf16|tf32|fp32 (default: the model's)",
        parse: |o, v| {
            o.precision = Some(parse_name(v).ok_or(None)?);
            Ok(())
        },
        value: |o| o.precision.map(name_of),
    },
    DlOption {
        key: DlKey::Deadline,
        name: "dl-deadline",
        env_key: "CELLSCHED_DL_DEADLINE",
        arg_info: Some("TIME"),
        form: crate::deadline::DEADLINE_FORM,
        help: "DL deadline: finish by TIME (now+N[s|m|h|d|w], YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS])",
        parse: |o, v| {
            o.deadline = Some(crate::deadline::Deadline::parse(v).map_err(|why| Some(why.to_string()))?);
            Ok(())
        },
        value: |o| o.deadline.map(|d| d.to_string()),
    },
    DlOption {
        key: DlKey::Explain,
        name: "dl-explain",
        env_key: "CELLSCHED_DL_EXPLAIN",
        arg_info: None,
        form: "no value on the command line; yes/no, on/off, 1/0 or true/false in the environment",
        help: "DL: show the chosen Cell and the runner-up at submit",
        parse: |o, v| {
            o.explain = match v.to_ascii_lowercase().as_str() {
                "" | "1" | "yes" | "on" | "true" => true,
                "0" | "no" | "off" | "false" => false,
                _ => return Err(None),
            };
            Ok(())
        },
        value: |o| o.explain.then(|| "1".to_string()),
    },
];

/// [`DlKey::ALL`], taken from the table.
const ALL_KEYS: [DlKey; DL_OPTIONS.len()] = {
    let mut keys = [DlKey::Model; DL_OPTIONS.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = DL_OPTIONS[i].key;
        i += 1;
    }
    keys
};

impl DlKey {
    /// Every key, in table (and `--help`) order.
    pub const ALL: &'static [DlKey] = &ALL_KEYS;

    /// This key's row in [`DL_OPTIONS`].
    pub const fn spec(self) -> &'static DlOption {
        &DL_OPTIONS[self as usize]
    }

    /// Whether the option takes a value (`--dl-explain` is a flag; its
    /// environment form takes yes/no).
    pub fn takes_value(self) -> bool {
        self.spec().arg_info.is_some()
    }

    /// The long option name without dashes, e.g. `dl-model`.
    pub fn option_name(self) -> &'static str {
        self.spec().name
    }

    /// The job-environment key, e.g. `CELLSCHED_DL_MODEL`.
    pub fn env_key(self) -> &'static str {
        self.spec().env_key
    }

    /// One word describing the argument, for `--help` (`NAME`, `N`, ...; empty for a flag).
    pub fn arg_info(self) -> &'static str {
        self.spec().arg_info.unwrap_or("")
    }

    /// The allowed form, used in `--help` and in error messages.
    pub fn allowed_form(self) -> &'static str {
        self.spec().form
    }

    /// What the option does (the man page and `--help`).
    pub fn help(self) -> &'static str {
        self.spec().help
    }

    /// The SPANK `--help` line: `[cellsched] <help> (env CELLSCHED_DL_X)`.
    pub fn usage(self) -> String {
        format!("{HELP_PREFIX} {} (env {})", self.help(), self.env_key())
    }

    /// Finds a key by option name (`dl-iters`, `--dl-iters`) or environment
    /// key (`CELLSCHED_DL_ITERS`, optionally prefixed `SPANK_` or
    /// `SLURM_SPANK_` as Slurm's job-environment copies are).
    pub fn lookup(name: &str) -> Option<DlKey> {
        let n = job_env::unprefixed(name.trim_start_matches('-'));
        DL_OPTIONS.iter().find(|o| o.name == n || o.env_key == n).map(|o| o.key)
    }
}

/// A job's DL options, validated. `Default` is "no DL options".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DlOptions {
    /// Catalog model name or path to a model TOML (syntax-checked only; use
    /// [`DlOptions::check_model`] against a catalog at submit).
    pub model: Option<String>,
    /// Global batch size.
    pub batch: Option<u32>,
    /// Declared training iterations; `None` means predicted from history.
    pub iters: Option<u64>,
    /// Pinned or automatic Cell.
    pub cell: CellChoice,
    /// Layer-freezing mode.
    pub freeze: FreezeMode,
    /// Pinned or automatic plan.
    pub plan: PlanChoice,
    /// `--dl-explain`: tell the user at submit which Cell was chosen and the
    /// runner-up. Display only: it does not make a job a DL job.
    pub explain: bool,
    /// `--dl-deadline`: when the job must be done, as given (resolved at submit).
    pub deadline: Option<crate::deadline::Deadline>,
    /// `--dl-runtime`: the runtime the job trains with (None: the model's).
    pub runtime: Option<Runtime>,
    /// `--dl-precision`: the job's training precision (None: the model's).
    pub precision: Option<Precision>,
}

impl DlOptions {
    /// No DL options (the same as `Default`, usable in a `static`).
    pub const NONE: DlOptions = DlOptions {
        model: None,
        batch: None,
        iters: None,
        cell: CellChoice::Auto,
        freeze: FreezeMode::Off,
        plan: PlanChoice::Auto,
        explain: false,
        deadline: None,
        runtime: None,
        precision: None,
    };

    /// Validates `value` for the option `name` (option name or environment
    /// key, see [`DlKey::lookup`]) and stores it. Errors name the option as
    /// given and the allowed form; `self` is unchanged on error.
    pub fn parse_option(&mut self, name: &str, value: &str) -> Result<(), CoreError> {
        let key = DlKey::lookup(name).ok_or_else(|| {
            let known: Vec<String> = DL_OPTIONS.iter().map(|o| format!("--{}", o.name)).collect();
            CoreError::invalid("DL option name", name, known.join(", "))
        })?;
        let label = if job_env::unprefixed(name).starts_with(job_env::DL_KEY_PREFIX) {
            name.to_string()
        } else {
            format!("--{}", key.option_name())
        };
        self.set(key, &label, value)
    }

    fn set(&mut self, key: DlKey, label: &str, value: &str) -> Result<(), CoreError> {
        let bad = |detail: Option<String>| {
            let expected = match detail {
                Some(d) => format!("{} ({d})", key.allowed_form()),
                None => key.allowed_form().to_string(),
            };
            CoreError::invalid(format!("{label} value"), shorten(value), expected)
        };
        if value.len() > MAX_VALUE_LEN {
            return Err(bad(Some(format!("at most {MAX_VALUE_LEN} characters"))));
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(bad(Some("control characters are not allowed".into())));
        }
        let mut next = self.clone();
        (key.spec().parse)(&mut next, value.trim()).map_err(bad)?;
        *self = next;
        Ok(())
    }

    /// True when no DL option is set (the job is not a DL job);
    /// `--dl-explain` alone does not count.
    pub fn is_empty(&self) -> bool {
        DlOptions { explain: false, ..self.clone() } == DlOptions::default()
    }

    /// Cross-option checks done at submit: options other than `--dl-model`
    /// need a model; a pinned plan must fit a pinned Cell.
    pub fn check_consistency(&self) -> Result<(), CoreError> {
        if self.is_empty() {
            return Ok(());
        }
        if self.model.is_none() {
            return Err(CoreError::invalid(
                "DL options",
                self.to_string(),
                "--dl-model=NAME together with the other --dl-* options",
            ));
        }
        if self.batch.is_none() {
            return Err(CoreError::invalid(
                "DL options",
                self.to_string(),
                "--dl-batch=N (the global batch size) together with --dl-model",
            ));
        }
        if let (CellChoice::Pinned(c), PlanChoice::Pinned(p)) = (&self.cell, &self.plan) {
            if p.gpus() != c.gpus || p.pp != c.stages {
                return Err(CoreError::invalid(
                    "--dl-plan value",
                    p.to_string(),
                    format!(
                        "a plan with dp*tp*pp = {} and pp = {} to match --dl-cell={c}",
                        c.gpus, c.stages
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks the model against a catalog: `resolve` is
    /// `ModelCatalog::resolve` (unknown names fail with close suggestions).
    pub fn check_model<T>(&self, resolve: impl FnOnce(&str) -> Result<T, CoreError>) -> Result<Option<T>, CoreError> {
        match &self.model {
            None => Ok(None),
            Some(m) => resolve(m).map(Some).map_err(|e| match e {
                CoreError::Unknown { name, suggestions, .. } => CoreError::invalid(
                    "--dl-model value",
                    name,
                    if suggestions.is_empty() {
                        "a known model name or a path to a model TOML".to_string()
                    } else {
                        format!("a known model name or a path to a model TOML (did you mean: {}?)", suggestions.join(", "))
                    },
                ),
                other => other,
            }),
        }
    }

    /// The model as this job trains it: `spec` with the runtime and
    /// precision the options give. A description the options change is no
    /// longer the catalog's or the file's: it is renamed as a user model
    /// (`user:<name>@<fingerprint>`, [`crate::model::user_model_name`]), so
    /// profiles measured under the other setup never stand for it.
    pub fn trained_as(&self, spec: ModelSpec) -> ModelSpec {
        let mut m = spec.clone();
        if let Some(r) = self.runtime {
            m.runtime = r;
        }
        if let Some(p) = self.precision {
            m.precision = p;
        }
        if m != spec {
            m.name = crate::model::user_model_name(&m);
        }
        m
    }

    /// The `CELLSCHED_DL_*` pairs for the set options (defaults omitted).
    pub fn to_env_pairs(&self) -> Vec<(&'static str, String)> {
        DL_OPTIONS.iter().filter_map(|o| (o.value)(self).map(|v| (o.env_key, v))).collect()
    }

    /// Reads the `CELLSCHED_DL_*` keys through `lookup`, each under the names
    /// and with the precedence of [`crate::job_env`] (`K`, then `SPANK_K`,
    /// then `SLURM_SPANK_K`). Absent keys keep their defaults; errors name
    /// the variable read.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<DlOptions, CoreError> {
        let mut o = DlOptions::default();
        o.complete_from_env(&[], lookup)?;
        Ok(o)
    }

    /// [`DlOptions::from_env`] over `NAME=value` entries (`spank_job_env`),
    /// by [`crate::job_env::lookup_entries`]'s rule.
    pub fn from_entries<S: AsRef<str>>(entries: &[S]) -> Result<DlOptions, CoreError> {
        DlOptions::from_env(|name| job_env::entry(entries, name).map(str::to_string))
    }

    /// Like [`DlOptions::from_entries`], but each option on its own: a bad
    /// value leaves that option at its default instead of failing the rest.
    /// For readers that only rank jobs already validated at submit.
    pub fn from_entries_lenient<S: AsRef<str>>(entries: &[S]) -> DlOptions {
        let mut o = DlOptions::default();
        for key in DlKey::ALL.iter().copied() {
            if let Some(v) = job_env::lookup_entries(entries, key.env_key()) {
                let _ = o.set(key, key.env_key(), v);
            }
        }
        o
    }

    /// Fills the options not in `given` (options given on the command line
    /// win over their environment equivalents) from `lookup`, as
    /// [`DlOptions::from_env`] does. `self` is unchanged on error.
    pub fn complete_from_env(&mut self, given: &[DlKey], lookup: impl Fn(&str) -> Option<String>) -> Result<(), CoreError> {
        let mut next = self.clone();
        for key in DlKey::ALL.iter().copied().filter(|k| !given.contains(k)) {
            if let Some((name, v)) = job_env::lookup(&lookup, key.env_key()) {
                next.set(key, &name, &v)?;
            }
        }
        *self = next;
        Ok(())
    }
}

impl fmt::Display for DlOptions {
    /// The set options as command-line flags, e.g. `--dl-model=gpt2 --dl-batch=32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .to_env_pairs()
            .into_iter()
            .map(|(k, v)| format!("--{}={v}", DlKey::lookup(k).map(|k| k.option_name()).unwrap_or(k)))
            .collect();
        f.write_str(&parts.join(" "))
    }
}

/// `auto` (any case) is `None`; anything else must parse as a `T`.
fn auto_or<T: std::str::FromStr>(v: &str) -> Result<Option<T>, Option<String>>
where
    T::Err: fmt::Display,
{
    if v.eq_ignore_ascii_case("auto") {
        Ok(None)
    } else {
        v.parse::<T>().map(Some).map_err(|e| Some(e.to_string()))
    }
}

/// A value named as in model TOML files (`ddp`, `bf16`; any case).
fn parse_name<T: serde::de::DeserializeOwned>(v: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(v.to_ascii_lowercase())).ok()
}

/// The name [`parse_name`] reads back.
fn name_of<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v).ok().and_then(|j| j.as_str().map(str::to_string)).unwrap_or_default()
}

/// A decimal integer in `1..=max`, digits only (no sign, no spaces inside).
fn parse_positive(v: &str, max: u64) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>().ok().filter(|n| (1..=max).contains(n))
}

/// Echoes at most 64 characters of a bad value back in messages.
fn shorten(v: &str) -> String {
    if v.chars().count() <= 64 {
        v.to_string()
    } else {
        format!("{}...", v.chars().take(64).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn parsed(pairs: &[(&str, &str)]) -> Result<DlOptions, CoreError> {
        let mut o = DlOptions::default();
        for (k, v) in pairs {
            o.parse_option(k, v)?;
        }
        Ok(o)
    }

    #[test]
    fn parses_every_option() {
        let o = parsed(&[
            ("dl-model", "gpt2-xl"),
            ("--dl-batch", "64"),
            ("dl-iters", "1000"),
            ("dl-cell", "a100x4x2"),
            ("dl-freeze", "Conservative"),
            ("dl-plan", "dp=1,tp=2,pp=2,mb=4"),
        ])
        .unwrap();
        assert_eq!(o.model.as_deref(), Some("gpt2-xl"));
        assert_eq!((o.batch, o.iters), (Some(64), Some(1000)));
        assert_eq!(o.cell, CellChoice::Pinned(Cell::new("a100", 4, 2).unwrap()));
        assert_eq!(o.freeze, FreezeMode::Conservative);
        let PlanChoice::Pinned(p) = o.plan else { panic!("plan not pinned") };
        assert_eq!((p.dp, p.tp, p.pp, p.micro_batches), (1, 2, 2, 4));
        o.check_consistency().unwrap();
        assert_eq!(
            o.to_string(),
            "--dl-model=gpt2-xl --dl-batch=64 --dl-iters=1000 --dl-cell=a100x4x2 --dl-freeze=conservative --dl-plan=dp=1,tp=2,pp=2,mb=4,zero=0,ckpt=off"
        );
    }

    #[test]
    fn explain_is_a_display_flag_that_makes_no_job_a_dl_job() {
        let mut o = DlOptions::default();
        o.parse_option("dl-explain", "").unwrap();
        assert!(o.explain && o.is_empty(), "explain alone is not a DL job");
        assert_eq!(o.to_env_pairs(), vec![("CELLSCHED_DL_EXPLAIN", "1".to_string())]);
        o.parse_option("CELLSCHED_DL_EXPLAIN", "no").unwrap();
        assert!(!o.explain);
        let e = o.parse_option("CELLSCHED_DL_EXPLAIN", "maybe").unwrap_err().to_string();
        assert!(e.contains("CELLSCHED_DL_EXPLAIN") && e.contains("maybe"), "{e}");
        let back = DlOptions::from_env(|k| (k == "SPANK_CELLSCHED_DL_EXPLAIN").then(|| "yes".to_string())).unwrap();
        assert!(back.explain);
        assert!(DlKey::ALL.iter().filter(|k| !k.takes_value()).eq([DlKey::Explain].iter()));
    }

    #[test]
    fn errors_name_option_and_form() {
        let e = parsed(&[("dl-iters", "abc")]).unwrap_err().to_string();
        assert_eq!(e, "invalid --dl-iters value 'abc': expected a positive integer (training iterations)");
        let e = parsed(&[("dl-cell", "x100x0")]).unwrap_err().to_string();
        assert!(e.starts_with("invalid --dl-cell value 'x100x0': expected auto, TYPExN"), "{e}");
        assert!(e.contains("GPU count"), "{e}");
        let e = parsed(&[("CELLSCHED_DL_BATCH", "0")]).unwrap_err().to_string();
        assert!(e.starts_with("invalid CELLSCHED_DL_BATCH value '0'"), "{e}");
        let e = parsed(&[("dl-freeze", "maybe")]).unwrap_err().to_string();
        assert!(e.contains("--dl-freeze") && e.contains("off, conservative or auto"), "{e}");
        let e = parsed(&[("dl-plan", "dp=2,tp=x")]).unwrap_err().to_string();
        assert!(e.contains("--dl-plan") && e.contains("plan key 'tp'"), "{e}");
        let e = parsed(&[("dl-nope", "1")]).unwrap_err().to_string();
        assert!(e.contains("dl-nope") && e.contains("--dl-model"), "{e}");
    }

    #[test]
    fn rejects_unsafe_and_out_of_range_values() {
        for (k, v) in [
            ("dl-model", ""),
            ("dl-model", "../../etc/passwd"),
            ("dl-model", "a b"),
            ("dl-model", "-rf"),
            ("dl-model", "m;rm"),
            ("dl-model", "m\nX=1"),
            ("dl-batch", "-1"),
            ("dl-batch", "+4"),
            ("dl-batch", "99999999999"),
            ("dl-iters", "0"),
            ("dl-iters", "1e6"),
            ("dl-iters", "18446744073709551616"),
            ("dl-cell", "a100"),
            ("dl-cell", "a100x4x3"),
            ("dl-plan", "dp=0"),
            ("dl-plan", ""),
        ] {
            assert!(parsed(&[(k, v)]).is_err(), "{k}={v:?} should be rejected");
        }
        let long = "m".repeat(MAX_VALUE_LEN + 1);
        let e = parsed(&[("dl-model", &long)]).unwrap_err().to_string();
        assert!(e.contains("at most 256") && e.contains("..."), "{e}");
        // A path to a model TOML is fine.
        assert!(parsed(&[("dl-model", "/home/u/models/my-net_v2.toml")]).is_ok());
    }

    #[test]
    fn failed_parse_leaves_options_unchanged() {
        let mut o = parsed(&[("dl-iters", "5")]).unwrap();
        assert!(o.parse_option("dl-iters", "x").is_err());
        assert_eq!(o.iters, Some(5));
    }

    #[test]
    fn auto_values_are_defaults() {
        let o = parsed(&[("dl-cell", "AUTO"), ("dl-plan", "auto"), ("dl-freeze", "off")]).unwrap();
        assert!(o.is_empty());
        assert!(o.to_env_pairs().is_empty());
        o.check_consistency().unwrap();
    }

    #[test]
    fn consistency_checks() {
        let e = parsed(&[("dl-batch", "8")]).unwrap().check_consistency().unwrap_err().to_string();
        assert!(e.contains("--dl-batch=8") && e.contains("--dl-model"), "{e}");
        let e = parsed(&[("dl-model", "gpt2")]).unwrap().check_consistency().unwrap_err().to_string();
        assert!(e.contains("--dl-batch=N"), "{e}");
        let o = parsed(&[("dl-model", "gpt2"), ("dl-batch", "8"), ("dl-cell", "a100x4"), ("dl-plan", "dp=2,tp=1,pp=1")]).unwrap();
        let e = o.check_consistency().unwrap_err().to_string();
        assert!(e.contains("dp*tp*pp = 4") && e.contains("a100x4x1"), "{e}");
        let o = parsed(&[("dl-model", "gpt2"), ("dl-batch", "8"), ("dl-cell", "a100x4"), ("dl-plan", "dp=2,tp=2,pp=1")]).unwrap();
        o.check_consistency().unwrap();
    }

    #[test]
    fn check_model_reports_unknown_with_option_name() {
        let o = parsed(&[("dl-model", "gtp2")]).unwrap();
        let e = o
            .check_model(|n| -> Result<(), CoreError> {
                Err(CoreError::Unknown { kind: "model", name: n.to_string(), suggestions: vec!["gpt2".into()] })
            })
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid --dl-model value 'gtp2': expected a known model name or a path to a model TOML (did you mean: gpt2?)"
        );
        assert_eq!(DlOptions::default().check_model(|_| Ok(1)).unwrap(), None);
        assert_eq!(o.check_model(|_| Ok(7)).unwrap(), Some(7));
    }

    #[test]
    fn env_keys_with_and_without_spank_prefix() {
        let env: HashMap<&str, &str> = [
            ("SPANK_CELLSCHED_DL_MODEL", "bert-large"),
            ("CELLSCHED_DL_BATCH", "32"),
            ("SPANK_CELLSCHED_DL_BATCH", "999"),
        ]
        .into();
        let o = DlOptions::from_env(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(o.model.as_deref(), Some("bert-large"));
        assert_eq!(o.batch, Some(32), "unprefixed key wins");
        let bad: HashMap<&str, &str> = [("SPANK_CELLSCHED_DL_ITERS", "many")].into();
        let e = DlOptions::from_env(|k| bad.get(k).map(|v| v.to_string())).unwrap_err().to_string();
        assert!(e.contains("SPANK_CELLSCHED_DL_ITERS") && e.contains("'many'"), "{e}");
        assert_eq!(DlKey::lookup("SPANK_CELLSCHED_DL_PLAN"), Some(DlKey::Plan));
        assert_eq!(DlKey::lookup("--dl-freeze"), Some(DlKey::Freeze));
        assert_eq!(DlKey::lookup("SLURM_SPANK_CELLSCHED_DL_CELL"), Some(DlKey::Cell));
        assert_eq!(DlKey::lookup("SLURM_CELLSCHED_DL_CELL"), None);
        assert_eq!(DlKey::lookup("dl_freeze"), None);
    }

    #[test]
    fn the_table_is_in_key_order_and_names_agree() {
        assert_eq!(DlKey::ALL.len(), DL_OPTIONS.len());
        for (i, o) in DL_OPTIONS.iter().enumerate() {
            assert_eq!(o.key as usize, i, "row {i} ({}) out of DlKey order", o.name);
            assert_eq!(DlKey::ALL[i], o.key);
            assert_eq!(o.key.spec().name, o.name, "spec() of {:?}", o.key);
            // --dl-x-y <-> CELLSCHED_DL_X_Y, so one never drifts from the other.
            let suffix = o.name.strip_prefix("dl-").expect("options are named dl-*");
            assert_eq!(o.env_key, format!("{}{}", job_env::DL_KEY_PREFIX, suffix.to_uppercase().replace('-', "_")));
            assert_eq!(DlKey::lookup(o.name), Some(o.key));
            for p in job_env::PREFIXES {
                assert_eq!(DlKey::lookup(&format!("{p}{}", o.env_key)), Some(o.key));
            }
            assert!(!o.help.is_empty() && !o.form.is_empty());
            let u = o.key.usage();
            assert!(u.starts_with("[cellsched] ") && u.contains(o.env_key) && u.contains(o.help), "{u}");
            assert_eq!(o.key.takes_value(), !o.key.arg_info().is_empty());
        }
        assert_eq!(DlOptions::NONE, DlOptions::default());
    }

    /// Every reader goes through the table and `job_env`'s one rule: the
    /// lookup-function form (SPANK), the entry-list form (job_submit,
    /// site_factor) and `job_env::lookup_entries` (slurmctld wrapper) agree on
    /// every key, whatever mix of prefixes and duplicates the environment has.
    #[test]
    fn every_reader_applies_the_same_precedence() {
        let o = parsed(&[("dl-model", "gpt2"), ("dl-batch", "32"), ("dl-iters", "100"), ("dl-freeze", "auto")]).unwrap();
        let other = parsed(&[("dl-model", "bert-large"), ("dl-batch", "64"), ("dl-iters", "7"), ("dl-freeze", "off"), ("dl-explain", "")]).unwrap();
        let pairs = o.to_env_pairs();
        for (winner, loser) in [("", "SPANK_"), ("", "SLURM_SPANK_"), ("SPANK_", "SLURM_SPANK_")] {
            let mut entries: Vec<String> = other.to_env_pairs().iter().map(|(k, v)| format!("{loser}{k}={v}")).collect();
            // A stale value under the winning name first, then the real one: last entry wins.
            entries.extend(other.to_env_pairs().iter().map(|(k, v)| format!("{winner}{k}={v}")));
            entries.extend(pairs.iter().map(|(k, v)| format!("{winner}{k}={v}")));
            entries.extend(other.to_env_pairs().iter().map(|(k, v)| format!("{loser}{k}={v}")));
            // Keys only `other` sets (explain) appear under the winner too:
            // they are not overridden by `o`, which leaves them at defaults.
            let from_entries = DlOptions::from_entries(&entries).unwrap();
            let map: HashMap<String, String> = entries.iter().filter_map(|e| e.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let from_fn = DlOptions::from_env(|k| map.get(k).cloned()).unwrap();
            assert_eq!(from_entries, from_fn, "{winner:?} over {loser:?}");
            assert_eq!((from_entries.model.as_deref(), from_entries.batch, from_entries.iters), (Some("gpt2"), Some(32), Some(100)));
            assert_eq!(from_entries.freeze, FreezeMode::Auto);
            for key in DlKey::ALL {
                let by_entries = job_env::lookup_entries(&entries, key.env_key());
                let by_fn = job_env::lookup(|k| map.get(k).cloned(), key.env_key()).map(|(_, v)| v);
                assert_eq!(by_entries.map(str::to_string), by_fn, "{key:?}");
            }
        }
    }

    #[test]
    fn lenient_reading_keeps_the_good_options() {
        let e = ["SPANK_CELLSCHED_DL_ITERS=100", "CELLSCHED_DL_FREEZE=sometimes", "SPANK_CELLSCHED_DL_MODEL=gpt2"];
        assert!(DlOptions::from_entries(&e).is_err());
        let o = DlOptions::from_entries_lenient(&e);
        assert_eq!((o.iters, o.model.as_deref(), o.freeze), (Some(100), Some("gpt2"), FreezeMode::Off));
        let good = ["CELLSCHED_DL_ITERS=5", "SLURM_SPANK_CELLSCHED_DL_BATCH=8", "CELLSCHED_DL_BATCH=16"];
        assert_eq!(DlOptions::from_entries_lenient(&good), DlOptions::from_entries(&good).unwrap());
    }

    #[test]
    fn command_line_options_are_completed_from_the_environment() {
        let mut o = parsed(&[("dl-batch", "16")]).unwrap();
        let env: HashMap<&str, &str> = [
            ("CELLSCHED_DL_BATCH", "32"),
            ("CELLSCHED_DL_MODEL", "bert-large"),
            ("SLURM_SPANK_CELLSCHED_DL_MODEL", "gpt2"),
            ("SLURM_SPANK_CELLSCHED_DL_ITERS", "500"),
        ]
        .into();
        o.complete_from_env(&[DlKey::Batch], |k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!((o.batch, o.model.as_deref(), o.iters), (Some(16), Some("bert-large"), Some(500)));
        let bad: HashMap<&str, &str> = [("SLURM_SPANK_CELLSCHED_DL_CELL", "x100x0")].into();
        let e = o.complete_from_env(&[], |k| bad.get(k).map(|v| v.to_string())).unwrap_err().to_string();
        assert!(e.contains("SLURM_SPANK_CELLSCHED_DL_CELL") && e.contains("x100x0"), "{e}");
        assert_eq!(o.iters, Some(500), "unchanged on error");
    }

    /// `--dl-runtime` and `--dl-precision` take the names of model TOML
    /// files (any case), refuse others naming the allowed form, and give the
    /// model as the job trains it: changed, it is a user model, so profiles
    /// of the catalog entry under another setup do not stand for it.
    #[test]
    fn runtime_and_precision_describe_how_the_job_trains() {
        let o = parsed(&[("dl-model", "gpt__1.3B"), ("dl-batch", "8"), ("dl-runtime", "DDP"), ("CELLSCHED_DL_PRECISION", "bf16")]).unwrap();
        assert_eq!((o.runtime, o.precision), (Some(Runtime::Ddp), Some(Precision::Bf16)));
        assert_eq!(o.to_env_pairs()[2..], [("CELLSCHED_DL_RUNTIME", "ddp".to_string()), ("CELLSCHED_DL_PRECISION", "bf16".to_string())]);
        assert!(o.to_string().contains("--dl-runtime=ddp --dl-precision=bf16"), "{o}");
        let catalog = crate::model::ModelCatalog::builtin().resolve("gpt__1.3B").unwrap();
        let m = o.trained_as(catalog.clone());
        assert_eq!((m.runtime, m.precision), (Runtime::Ddp, Precision::Bf16));
        assert!(m.name.starts_with("user:gpt__1.3B@"), "{}", m.name);
        assert_eq!(DlOptions::NONE.trained_as(catalog.clone()), catalog, "no option: the model as described");
        let same = DlOptions { runtime: Some(catalog.runtime), precision: Some(catalog.precision), ..DlOptions::NONE };
        assert_eq!(same.trained_as(catalog.clone()).name, catalog.name, "options that change nothing keep the name");
        for (k, v, form) in [("dl-runtime", "pytorch", "ddp, fsdp"), ("dl-precision", "int8", "bf16, tf32")] {
            let e = parsed(&[(k, v)]).unwrap_err().to_string();
            assert!(e.contains(&format!("--{k}")) && e.contains(v) && e.contains(form), "{e}");
        }
        assert!(!parsed(&[("dl-precision", "fp16")]).unwrap().is_empty(), "a training option makes a DL job");
    }

    fn arb_options() -> impl Strategy<Value = DlOptions> {
        let model = proptest::option::of("[a-z][a-z0-9_.-]{0,20}(/[a-z0-9_-]{1,8}\\.toml)?");
        let cell = proptest::option::of(("[a-wyz][a-wyz0-9]{0,5}", 1u32..64, 1u32..8)).prop_map(|c| match c {
            Some((t, g, s)) => CellChoice::Pinned(Cell::new(&t, g * s, s).unwrap()),
            None => CellChoice::Auto,
        });
        let plan = proptest::option::of((1u32..16, 1u32..16, 1u32..16, 1u32..64, 0u8..4, any::<bool>())).prop_map(|p| {
            match p {
                Some((dp, tp, pp, micro_batches, zero_stage, checkpointing)) => {
                    PlanChoice::Pinned(Plan { dp, tp, pp, micro_batches, zero_stage, checkpointing })
                }
                None => PlanChoice::Auto,
            }
        });
        let freeze = prop_oneof![Just(FreezeMode::Off), Just(FreezeMode::Conservative), Just(FreezeMode::Auto)];
        let runtime = proptest::option::of(prop_oneof![
            Just(Runtime::Any),
            Just(Runtime::Ddp),
            Just(Runtime::Fsdp),
            Just(Runtime::Megatron),
            Just(Runtime::Deepspeed),
            Just(Runtime::Alpa)
        ]);
        let precision = proptest::option::of(prop_oneof![Just(Precision::Fp16), Just(Precision::Bf16), Just(Precision::Tf32), Just(Precision::Fp32)]);
        (model, proptest::option::of(1..=MAX_BATCH), proptest::option::of(1..=MAX_ITERS), cell, freeze, plan, runtime, precision).prop_map(
            |(model, batch, iters, cell, freeze, plan, runtime, precision)| DlOptions { model, batch, iters, cell, freeze, plan, explain: false, deadline: None, runtime, precision },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Arbitrary input never panics; accepted values are clean and short.
        #[test]
        fn parser_never_panics(key in 0usize..DL_OPTIONS.len(), value in any::<String>()) {
            let mut o = DlOptions::default();
            let name = DlKey::ALL[key].option_name();
            if o.parse_option(name, &value).is_ok() {
                for (_, v) in o.to_env_pairs() {
                    prop_assert!(v.len() <= MAX_VALUE_LEN && !v.chars().any(|c| c.is_control()));
                }
            }
        }

        /// Near-miss inputs built from the option alphabet never panic either.
        #[test]
        fn parser_never_panics_on_near_misses(key in 0usize..DL_OPTIONS.len(), value in "[a-z0-9x:=,.+/ -]{0,40}") {
            let mut o = DlOptions::default();
            let _ = o.parse_option(DlKey::ALL[key].env_key(), &value);
        }

        /// Valid options survive env pairs -> from_env (with and without the
        /// SPANK_ prefix) and the command-line text form.
        #[test]
        fn env_pairs_round_trip(o in arb_options()) {
            let pairs = o.to_env_pairs();
            let plain: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            prop_assert_eq!(&DlOptions::from_env(|k| plain.get(k).cloned()).unwrap(), &o);
            let spank: HashMap<String, String> = pairs.iter().map(|(k, v)| (format!("SPANK_{k}"), v.clone())).collect();
            prop_assert_eq!(&DlOptions::from_env(|k| spank.get(k).cloned()).unwrap(), &o);
            let mut again = DlOptions::default();
            for (k, v) in &pairs {
                let key = DlKey::lookup(k).unwrap();
                again.parse_option(key.option_name(), v).unwrap();
            }
            prop_assert_eq!(again, o);
        }
    }
}
