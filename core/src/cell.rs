//! The shared vocabulary: a [`Cell`] (GPU type, GPU count, pipeline stages),
//! a parallel [`Plan`] inside it, and the [`Decision`] the plugins record.
//!
//! Text forms are part of the product's interface:
//! - Cell: `TYPExN` or `TYPExNxSTAGES` (also `TYPE:N[:STAGES]`), e.g. `a100x4`, `v100x8x2`.
//! - Plan: `dp=2,tp=2,pp=1[,mb=4][,zero=1][,ckpt=on]`.
//! - Decision (Slurm `AdminComment`): `cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.1234 src=datasheet`.
use crate::error::CoreError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Most GPUs a Cell or a plan may name (any DP/TP/PP degree, and their
/// product): [`crate::limits::CELL_GPUS`]. Larger numbers are refused when
/// parsed, so no product of degrees can overflow downstream.
pub const MAX_CELL_GPUS: u32 = crate::limits::CELL_GPUS.max_u32();
/// Most micro-batches a plan may name: [`crate::limits::MICRO_BATCHES`].
pub const MAX_MICRO_BATCHES: u32 = crate::limits::MICRO_BATCHES.max_u32();
/// Shortest plausible iteration time (1 µs): a measurement or decision below it is refused.
pub const MIN_ITER_TIME_S: f64 = 1e-6;
/// Longest plausible iteration time (1 day): a measurement or decision above it is refused.
pub const MAX_ITER_TIME_S: f64 = 86_400.0;

/// True when `s` seconds per iteration is a physically plausible value
/// (finite, within [`MIN_ITER_TIME_S`]..=[`MAX_ITER_TIME_S`]).
pub fn plausible_iter_time(s: f64) -> bool {
    s.is_finite() && (MIN_ITER_TIME_S..=MAX_ITER_TIME_S).contains(&s)
}

/// A Cell: `gpus` GPUs of one `gpu_type`, split into `stages` pipeline stages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    /// Canonical lower-case GPU type, e.g. `a100`, `v100`.
    pub gpu_type: String,
    /// Total GPUs in the Cell (>= 1).
    pub gpus: u32,
    /// Pipeline stages (>= 1, divides `gpus`).
    pub stages: u32,
}

impl Cell {
    /// A Cell; errors if `gpus` is 0 or above [`MAX_CELL_GPUS`], `stages`
    /// is 0 or does not divide `gpus`, or the type is not a plain name.
    pub fn new(gpu_type: &str, gpus: u32, stages: u32) -> Result<Self, CoreError> {
        let t = gpu_type.trim().to_ascii_lowercase();
        if t.is_empty() || t.len() > 64 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(CoreError::invalid("GPU type", gpu_type, "up to 64 letters, digits, '_' or '-' (e.g. a100)"));
        }
        if gpus == 0 || gpus > MAX_CELL_GPUS {
            return Err(CoreError::invalid("GPU count", gpus.to_string(), format!("an integer in 1..={MAX_CELL_GPUS}")));
        }
        if stages == 0 || gpus % stages != 0 {
            return Err(CoreError::invalid(
                "pipeline stages",
                stages.to_string(),
                format!("a positive divisor of the GPU count {gpus}"),
            ));
        }
        Ok(Cell { gpu_type: t, gpus, stages })
    }

    /// GPUs per pipeline stage (DP x TP degree of each stage).
    pub fn gpus_per_stage(&self) -> u32 {
        self.gpus / self.stages
    }
}

const CELL_FORM: &str = "TYPExN or TYPExNxSTAGES (e.g. a100x4, v100x8x2)";

impl std::str::FromStr for Cell {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let bad = || CoreError::invalid("cell", s, CELL_FORM);
        let sep = if s.contains(':') { ':' } else { 'x' };
        let parts: Vec<&str> = s.trim().split(sep).collect();
        let num = |p: &str| -> Option<u32> {
            if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) { p.parse().ok() } else { None }
        };
        // Parse from the right: trailing numeric segments are counts.
        let (ty, gpus, stages) = match parts.as_slice() {
            [first, .., a, b]
                if parts.len() >= 3 && !first.is_empty() && num(a).is_some() && num(b).is_some() =>
            {
                (parts[..parts.len() - 2].join(&sep.to_string()), num(a).unwrap(), num(b).unwrap())
            }
            [.., a] if parts.len() >= 2 && num(a).is_some() => {
                (parts[..parts.len() - 1].join(&sep.to_string()), num(a).unwrap(), 1)
            }
            _ => return Err(bad()),
        };
        if ty.is_empty() {
            return Err(bad());
        }
        Cell::new(&ty, gpus, stages).map_err(|e| match e {
            CoreError::Invalid { what, value, expected } => CoreError::invalid(
                format!("cell '{s}': {what}"),
                value,
                expected,
            ),
            other => other,
        })
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.gpu_type, self.gpus, self.stages)
    }
}

/// A parallel execution plan inside a Cell (Rubick's knobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Plan {
    /// Data-parallel degree.
    pub dp: u32,
    /// Tensor-parallel degree (kept inside a node when possible).
    pub tp: u32,
    /// Pipeline-parallel degree (= the Cell's stages).
    pub pp: u32,
    /// Micro-batches per iteration (pipeline depth).
    pub micro_batches: u32,
    /// ZeRO stage 0..=3.
    pub zero_stage: u8,
    /// Activation checkpointing (recomputation).
    pub checkpointing: bool,
}

impl Plan {
    /// GPUs the plan uses: dp * tp * pp (saturating; parsed plans never
    /// exceed [`MAX_CELL_GPUS`]).
    pub fn gpus(&self) -> u32 {
        self.dp.saturating_mul(self.tp).saturating_mul(self.pp)
    }

    /// Checks the bounds every plan must meet: each degree and their product
    /// in 1..=[`MAX_CELL_GPUS`], micro-batches in 1..=[`MAX_MICRO_BATCHES`],
    /// ZeRO stage 0..=3. Errors name the value and the limit.
    pub fn check_bounds(&self) -> Result<(), CoreError> {
        for (k, v) in [("dp", self.dp), ("tp", self.tp), ("pp", self.pp)] {
            if v == 0 || v > MAX_CELL_GPUS {
                return Err(CoreError::invalid(format!("plan key '{k}'"), v.to_string(), format!("an integer in 1..={MAX_CELL_GPUS}")));
            }
        }
        let product = u64::from(self.dp) * u64::from(self.tp) * u64::from(self.pp);
        if product > u64::from(MAX_CELL_GPUS) {
            return Err(CoreError::invalid(
                "plan",
                format!("dp={},tp={},pp={}", self.dp, self.tp, self.pp),
                format!("dp*tp*pp = {product} GPUs is more than any job may use ({MAX_CELL_GPUS})"),
            ));
        }
        if self.micro_batches == 0 || self.micro_batches > MAX_MICRO_BATCHES {
            return Err(CoreError::invalid("plan key 'mb'", self.micro_batches.to_string(), format!("an integer in 1..={MAX_MICRO_BATCHES}")));
        }
        if self.zero_stage > 3 {
            return Err(CoreError::invalid("plan key 'zero'", self.zero_stage.to_string(), "0, 1, 2 or 3"));
        }
        Ok(())
    }
}

impl Default for Plan {
    fn default() -> Self {
        Plan { dp: 1, tp: 1, pp: 1, micro_batches: 1, zero_stage: 0, checkpointing: false }
    }
}

const PLAN_FORM: &str = "dp=N,tp=N,pp=N[,mb=N][,zero=0..3][,ckpt=on|off]";

impl std::str::FromStr for Plan {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        let mut p = Plan::default();
        let mut seen = [false; 3];
        for kv in s.trim().split(',').filter(|x| !x.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| CoreError::invalid("plan", s, PLAN_FORM))?;
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim();
            let n = || -> Result<u32, CoreError> {
                match v.parse::<u32>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(CoreError::invalid(format!("plan key '{k}'"), v, "a positive integer")),
                }
            };
            match k.as_str() {
                "dp" => { p.dp = n()?; seen[0] = true }
                "tp" => { p.tp = n()?; seen[1] = true }
                "pp" => { p.pp = n()?; seen[2] = true }
                "mb" | "micro_batches" => p.micro_batches = n()?,
                "zero" => {
                    p.zero_stage = match v.parse::<u8>() {
                        Ok(z) if z <= 3 => z,
                        _ => return Err(CoreError::invalid("plan key 'zero'", v, "0, 1, 2 or 3")),
                    }
                }
                "ckpt" | "checkpointing" => {
                    p.checkpointing = parse_bool(v).ok_or_else(|| CoreError::invalid("plan key 'ckpt'", v, "on or off"))?
                }
                _ => return Err(CoreError::invalid("plan key", k, PLAN_FORM)),
            }
        }
        if !seen.iter().any(|x| *x) {
            return Err(CoreError::invalid("plan", s, PLAN_FORM));
        }
        p.check_bounds()?;
        Ok(p)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dp={},tp={},pp={},mb={},zero={},ckpt={}",
            self.dp,
            self.tp,
            self.pp,
            self.micro_batches,
            self.zero_stage,
            if self.checkpointing { "on" } else { "off" }
        )
    }
}

/// Parses on/off style booleans: on/off, yes/no, true/false, 1/0.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "1" => Some(true),
        "off" | "no" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// Where an iteration time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EstimateSource {
    /// Looked up in the profile database.
    Measured,
    /// Analytical model scaled by calibrated per-GPU efficiency.
    Calibrated,
    /// Analytical model from datasheet numbers only.
    Datasheet,
}

impl fmt::Display for EstimateSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EstimateSource::Measured => "measured",
            EstimateSource::Calibrated => "calibrated",
            EstimateSource::Datasheet => "datasheet",
        })
    }
}

impl std::str::FromStr for EstimateSource {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        match s {
            "measured" => Ok(EstimateSource::Measured),
            "calibrated" => Ok(EstimateSource::Calibrated),
            "datasheet" => Ok(EstimateSource::Datasheet),
            _ => Err(CoreError::invalid("estimate source", s, "measured, calibrated or datasheet")),
        }
    }
}

/// A placement decision: the first words of the job record
/// ([`crate::record::DlRecord`]) job_submit/cellsched writes into AdminComment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The chosen Cell.
    pub cell: Cell,
    /// Nodes the Cell spans.
    pub nodes: u32,
    /// The plan chosen for the Cell.
    pub plan: Plan,
    /// Predicted seconds per iteration.
    pub iter_s: f64,
    /// Where `iter_s` came from.
    pub source: EstimateSource,
}

impl Decision {
    /// True when the decision could have been written by the plugins: the
    /// plan within bounds and using exactly the Cell's GPUs and stages, at
    /// least one GPU per node, and a plausible iteration time.
    pub fn is_consistent(&self) -> bool {
        self.plan.check_bounds().is_ok()
            && self.plan.gpus() == self.cell.gpus
            && self.plan.pp == self.cell.stages
            && (1..=self.cell.gpus).contains(&self.nodes)
            && plausible_iter_time(self.iter_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_forms() {
        assert_eq!("a100x4".parse::<Cell>().unwrap(), Cell::new("a100", 4, 1).unwrap());
        assert_eq!("V100x8x2".parse::<Cell>().unwrap(), Cell::new("v100", 8, 2).unwrap());
        assert_eq!("a100_40g:4:2".parse::<Cell>().unwrap(), Cell::new("a100_40g", 4, 2).unwrap());
        assert_eq!(Cell::new("a10", 16, 4).unwrap().to_string(), "a10x16x4");
        for bad in ["x100x0", "a100", "a100x", "x4", "a100x4x3", "a100x0", "a1 00x4", ""] {
            assert!(bad.parse::<Cell>().is_err(), "{bad} should be rejected");
        }
        let e = "x100x0".parse::<Cell>().unwrap_err().to_string();
        assert!(e.contains("x100x0") && e.contains("GPU count"), "{e}");
    }

    #[test]
    fn plan_forms() {
        let p: Plan = "dp=2,tp=2,pp=1".parse().unwrap();
        assert_eq!((p.dp, p.tp, p.pp, p.gpus()), (2, 2, 1, 4));
        let q: Plan = p.to_string().parse().unwrap();
        assert_eq!(p, q);
        let r: Plan = "dp=1,tp=8,pp=2,mb=8,zero=3,ckpt=on".parse().unwrap();
        assert!(r.checkpointing && r.zero_stage == 3 && r.micro_batches == 8);
        for bad in ["", "dp=0", "dp=x", "zero=4,dp=1", "foo=1", "dp2", "dp=5000", "mb=2000000,dp=1"] {
            assert!(bad.parse::<Plan>().is_err(), "{bad} should be rejected");
        }
        // Products that would overflow u32 are refused with the GPU count named.
        for huge in ["dp=1000000,tp=1000000,pp=1000000", "dp=2147483650,tp=2,pp=1", "dp=4096,tp=4096,pp=4096", "dp=64,tp=64,pp=2"] {
            let e = huge.parse::<Plan>().unwrap_err().to_string();
            assert!(e.contains("plan"), "{huge}: {e}");
        }
        assert!("dp=64,tp=64,pp=1".parse::<Plan>().is_ok());
        let unchecked = Plan { dp: u32::MAX, tp: u32::MAX, pp: 2, ..Plan::default() };
        assert_eq!(unchecked.gpus(), u32::MAX, "gpus() saturates instead of wrapping");
        assert!(Cell::new("a100", MAX_CELL_GPUS + 1, 1).is_err());
        assert!("a100x65536".parse::<Cell>().is_err());
    }

    #[test]
    fn forged_or_inconsistent_decisions_are_refused() {
        let good = "cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.100000 src=datasheet";
        assert!(Decision::parse_admin_comment(good).is_some());
        for bad in [
            good.replace("iter_s=0.100000", "iter_s=NaN"),
            good.replace("iter_s=0.100000", "iter_s=inf"),
            good.replace("iter_s=0.100000", "iter_s=0.000000"),
            good.replace("iter_s=0.100000", "iter_s=1e9"),
            good.replace("dp=4", "dp=2147483650"),
            good.replace("dp=4", "dp=2"),
            good.replace("pp=1", "pp=2"),
            good.replace("nodes=1", "nodes=0"),
            good.replace("nodes=1", "nodes=5"),
            good.replace("mb=1", "mb=0"),
        ] {
            assert_eq!(Decision::parse_admin_comment(&bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// Cells, plans and decisions: any input parses or is refused, never panics;
        /// whatever parses is within bounds.
        #[test]
        fn parsers_never_panic(s in proptest::prelude::any::<String>(), near in "[a-z0-9x:=, ._]{0,60}") {
            for t in [s.as_str(), near.as_str()] {
                if let Ok(c) = t.parse::<Cell>() {
                    proptest::prop_assert!(c.gpus >= 1 && c.gpus <= MAX_CELL_GPUS && c.gpus % c.stages == 0);
                }
                if let Ok(p) = t.parse::<Plan>() {
                    proptest::prop_assert!(p.check_bounds().is_ok());
                }
                if let Some(d) = Decision::parse_admin_comment(&format!("cellsched: {t}")) {
                    proptest::prop_assert!(d.is_consistent());
                }
            }
        }
    }

    #[test]
    fn decision_roundtrip() {
        let d = Decision {
            cell: Cell::new("v100", 8, 2).unwrap(),
            nodes: 1,
            plan: "dp=2,tp=2,pp=2,mb=4,zero=1,ckpt=on".parse().unwrap(),
            iter_s: 0.25,
            source: EstimateSource::Calibrated,
        };
        let text = format!("user note; {}", d.to_admin_comment());
        assert_eq!(Decision::parse_admin_comment(&text), Some(d));
        assert_eq!(Decision::parse_admin_comment("no decision here"), None);
    }
}
