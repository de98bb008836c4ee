//! The user-facing DL job options (`--dl-model`, `--dl-batch`, `--dl-iters`,
//! `--dl-cell`, `--dl-freeze`, `--dl-plan`, `--dl-deadline`, and the `--dl-explain` flag) and their job-environment form
//! (`CELLSCHED_DL_*`).
//!
//! Validation lives here so that the SPANK plugin (at submit, in sbatch/srun)
//! and the job_submit plugin (in slurmctld) accept exactly the same inputs.
//! Every error names the option (or environment key) and the allowed form.
use crate::cell::{Cell, Plan};
use crate::error::CoreError;
use std::fmt;

/// Longest accepted option value (a model TOML path is the longest kind).
pub const MAX_VALUE_LEN: usize = 256;
/// Largest accepted `--dl-batch` (global batch size).
pub const MAX_BATCH: u32 = 1 << 24;
/// Largest accepted `--dl-iters`.
pub const MAX_ITERS: u64 = 1_000_000_000_000;

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

/// One DL option: its command-line name, environment key and allowed form.
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
    /// `--dl-explain` (flag): show the chosen Cell and the runner-up at submit.
    Explain,
    /// `--dl-deadline=TIME`: when the job must be done (`crate::deadline`).
    Deadline,
}

impl DlKey {
    /// Every key, in `--help` order.
    pub const ALL: [DlKey; 8] = [DlKey::Model, DlKey::Batch, DlKey::Iters, DlKey::Cell, DlKey::Freeze, DlKey::Plan, DlKey::Deadline, DlKey::Explain];

    /// Whether the option takes a value (`--dl-explain` is a flag; its
    /// environment form takes yes/no).
    pub fn takes_value(self) -> bool {
        self != DlKey::Explain
    }

    /// The long option name without dashes, e.g. `dl-model`.
    pub fn option_name(self) -> &'static str {
        match self {
            DlKey::Model => "dl-model",
            DlKey::Batch => "dl-batch",
            DlKey::Iters => "dl-iters",
            DlKey::Cell => "dl-cell",
            DlKey::Freeze => "dl-freeze",
            DlKey::Plan => "dl-plan",
            DlKey::Explain => "dl-explain",
            DlKey::Deadline => "dl-deadline",
        }
    }

    /// The job-environment key, e.g. `CELLSCHED_DL_MODEL`.
    pub fn env_key(self) -> &'static str {
        match self {
            DlKey::Model => "CELLSCHED_DL_MODEL",
            DlKey::Batch => "CELLSCHED_DL_BATCH",
            DlKey::Iters => "CELLSCHED_DL_ITERS",
            DlKey::Cell => "CELLSCHED_DL_CELL",
            DlKey::Freeze => "CELLSCHED_DL_FREEZE",
            DlKey::Plan => "CELLSCHED_DL_PLAN",
            DlKey::Explain => "CELLSCHED_DL_EXPLAIN",
            DlKey::Deadline => "CELLSCHED_DL_DEADLINE",
        }
    }

    /// One word describing the argument, for `--help` (`NAME`, `N`, ...).
    pub fn arg_info(self) -> &'static str {
        match self {
            DlKey::Model => "NAME",
            DlKey::Batch | DlKey::Iters => "N",
            DlKey::Cell => "CELL",
            DlKey::Freeze => "MODE",
            DlKey::Plan => "PLAN",
            DlKey::Explain => "",
            DlKey::Deadline => "TIME",
        }
    }

    /// The allowed form, used in `--help` and in error messages.
    pub fn allowed_form(self) -> &'static str {
        match self {
            DlKey::Model => "a catalog model name or a path to a model TOML (letters, digits, '.', '_', '-', '+', '/')",
            DlKey::Batch => "a positive integer (global batch size)",
            DlKey::Iters => "a positive integer (training iterations)",
            DlKey::Cell => "auto, TYPExN or TYPExNxSTAGES (e.g. a100x4, v100x8x2)",
            DlKey::Freeze => "off, conservative or auto",
            DlKey::Plan => "auto or dp=N,tp=N,pp=N[,mb=N][,zero=0..3][,ckpt=on|off]",
            DlKey::Explain => "no value on the command line; yes/no, on/off, 1/0 or true/false in the environment",
            DlKey::Deadline => crate::deadline::DEADLINE_FORM,
        }
    }

    /// Finds a key by option name (`dl-iters`, `--dl-iters`) or environment
    /// key (`CELLSCHED_DL_ITERS`, optionally prefixed `SPANK_` or
    /// `SLURM_SPANK_` as Slurm's job-environment copies are).
    pub fn lookup(name: &str) -> Option<DlKey> {
        let n = name.trim_start_matches('-');
        let n = n.strip_prefix("SLURM_SPANK_").or_else(|| n.strip_prefix("SPANK_")).unwrap_or(n);
        DlKey::ALL.into_iter().find(|k| k.option_name() == n || k.env_key() == n)
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
}

impl DlOptions {
    /// Validates `value` for the option `name` (option name or environment
    /// key, see [`DlKey::lookup`]) and stores it. Errors name the option as
    /// given and the allowed form; `self` is unchanged on error.
    pub fn parse_option(&mut self, name: &str, value: &str) -> Result<(), CoreError> {
        let key = DlKey::lookup(name).ok_or_else(|| {
            let known: Vec<String> = DlKey::ALL.iter().map(|k| format!("--{}", k.option_name())).collect();
            CoreError::invalid("DL option name", name, known.join(", "))
        })?;
        let label = if name.starts_with("CELLSCHED_") || name.starts_with("SPANK_") || name.starts_with("SLURM_SPANK_") {
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
        let v = value.trim();
        match key {
            DlKey::Model => {
                if v.is_empty()
                    || v.starts_with('-')
                    || v.split('/').any(|seg| seg == "..")
                    || !v.chars().all(|c| c.is_ascii_alphanumeric() || "._-+/".contains(c))
                {
                    return Err(bad(None));
                }
                self.model = Some(v.to_string());
            }
            DlKey::Batch => {
                self.batch = Some(parse_positive(v, u64::from(MAX_BATCH)).ok_or_else(|| bad(None))? as u32)
            }
            DlKey::Iters => self.iters = Some(parse_positive(v, MAX_ITERS).ok_or_else(|| bad(None))?),
            DlKey::Cell => {
                self.cell = if v.eq_ignore_ascii_case("auto") {
                    CellChoice::Auto
                } else {
                    CellChoice::Pinned(v.parse::<Cell>().map_err(|e| bad(Some(e.to_string())))?)
                }
            }
            DlKey::Freeze => self.freeze = v.parse().map_err(|_| bad(None))?,
            DlKey::Explain => {
                self.explain = match v.to_ascii_lowercase().as_str() {
                    "" | "1" | "yes" | "on" | "true" => true,
                    "0" | "no" | "off" | "false" => false,
                    _ => return Err(bad(None)),
                }
            }
            DlKey::Deadline => self.deadline = Some(crate::deadline::Deadline::parse(v).map_err(|why| bad(Some(why.to_string())))?),
            DlKey::Plan => {
                self.plan = if v.eq_ignore_ascii_case("auto") {
                    PlanChoice::Auto
                } else {
                    PlanChoice::Pinned(v.parse::<Plan>().map_err(|e| bad(Some(e.to_string())))?)
                }
            }
        }
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

    /// The `CELLSCHED_DL_*` pairs for the set options (defaults omitted).
    pub fn to_env_pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(m) = &self.model {
            out.push((DlKey::Model.env_key(), m.clone()));
        }
        if let Some(b) = self.batch {
            out.push((DlKey::Batch.env_key(), b.to_string()));
        }
        if let Some(i) = self.iters {
            out.push((DlKey::Iters.env_key(), i.to_string()));
        }
        if let CellChoice::Pinned(c) = &self.cell {
            out.push((DlKey::Cell.env_key(), c.to_string()));
        }
        if self.freeze != FreezeMode::Off {
            out.push((DlKey::Freeze.env_key(), self.freeze.to_string()));
        }
        if let PlanChoice::Pinned(p) = &self.plan {
            out.push((DlKey::Plan.env_key(), p.to_string()));
        }
        if let Some(d) = &self.deadline {
            out.push((DlKey::Deadline.env_key(), d.to_string()));
        }
        if self.explain {
            out.push((DlKey::Explain.env_key(), "1".to_string()));
        }
        out
    }

    /// Reads the `CELLSCHED_DL_*` keys through `lookup`, each with or without
    /// a `SPANK_` prefix (the unprefixed one wins). Absent keys keep defaults.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<DlOptions, CoreError> {
        let mut o = DlOptions::default();
        for key in DlKey::ALL {
            let plain = key.env_key();
            let prefixed = format!("SPANK_{plain}");
            if let Some(v) = lookup(plain) {
                o.set(key, plain, &v)?;
            } else if let Some(v) = lookup(&prefixed) {
                o.set(key, &prefixed, &v)?;
            }
        }
        Ok(o)
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
        (model, proptest::option::of(1..=MAX_BATCH), proptest::option::of(1..=MAX_ITERS), cell, freeze, plan)
            .prop_map(|(model, batch, iters, cell, freeze, plan)| DlOptions { model, batch, iters, cell, freeze, plan, explain: false, deadline: None })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Arbitrary input never panics; accepted values are clean and short.
        #[test]
        fn parser_never_panics(key in 0usize..7, value in any::<String>()) {
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
        fn parser_never_panics_on_near_misses(key in 0usize..6, value in "[a-z0-9x:=,.+/ -]{0,40}") {
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
