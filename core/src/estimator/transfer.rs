//! Compute levels for GPU types without measured points, and where each
//! part of a compute level came from.
//!
//! The calibration's log compute level of a model on a type is `type +
//! family + model` ([`super::Calibration::factor_for`]). The family
//! residual is pooled over every measured type (how a family's kernels use
//! a GPU relative to the cost model is a property of the network, not of
//! the GPU), and applies on every type; a `generic` model has no family to
//! share (`Calibration::factor_for`). The type level of a type the site
//! did not measure comes, in this order:
//! 1. from the measured types of its architecture generation (same
//!    compute-capability major version: [`transfer_prior`]);
//! 2. by **roofline** from the measured types of the model's precision
//!    ([`roofline_prior`]): a training step mixes compute-bound kernels
//!    (time ∝ 1 / peak FLOP/s) and memory- or latency-bound ones (time ∝
//!    1 / bandwidth), so against the datasheet peak the achieved level
//!    falls as the type's FLOP/byte ratio rises: `1 / level = a + b ·
//!    FLOP/byte`, fitted over the measured types' levels net of families;
//! 3. else the datasheet (log level 0).
//!
//! A model's own residual over its family carries to the other types of
//! the generation it was measured on (`Calibration::factor_for`), not
//! further.
//!
//! Not kept (measured with protocol (e) of `cellsched bench estimator`, see
//! bench/HISTORY.md): carrying each model's residual over its family to
//! every type it was not measured on, and a cross-generation mean of the
//! measured type levels.
use crate::gpu::GpuSpec;
use crate::model::Precision;
use serde::Serialize;
use std::fmt;

/// The log efficiency level of an unmeasured type from the measured types'
/// levels `(type, log level net of families, compute capability)`: the mean
/// of the measured types of its architecture generation (same
/// compute-capability major version), with the types it came from; None
/// when none was measured (or its capability is unknown). A
/// generation-weighted mean over all measured types predicted an unseen
/// type worse than the datasheet on the reference data (leave-one-type-out
/// median 19.5% -> 24.9%).
pub fn transfer_prior(measured: &[(String, f64, Option<f64>)], cc: Option<f64>) -> Option<(f64, Vec<String>)> {
    let c = cc?;
    let same: Vec<&(String, f64, Option<f64>)> = measured.iter().filter(|m| m.2.is_some_and(|x| x.floor() == c.floor())).collect();
    (!same.is_empty()).then(|| (same.iter().map(|m| m.1).sum::<f64>() / same.len() as f64, same.iter().map(|m| m.0.clone()).collect()))
}

/// Peak FLOP/s of `precision`'s matmuls per byte/s of memory bandwidth: the
/// roofline ridge point of the type.
pub fn flop_per_byte(g: &GpuSpec, precision: Precision) -> f64 {
    g.peak_for(precision) / (g.mem_bw_gbs * 1e9).max(1.0)
}

/// The roofline prior of an unmeasured type's log level at FLOP/byte ratio
/// `ratio`, from measured types' `(FLOP/byte ratio, log level net of
/// families)` of one precision: the line `1 / level = a + b · ratio`
/// (least squares, `a, b >= 0`: neither share can be negative). None with
/// fewer than two distinct ratios (one type says nothing about the slope).
pub fn roofline_prior(measured: &[(f64, f64)], ratio: f64) -> Option<f64> {
    let mut rs: Vec<f64> = measured.iter().map(|p| p.0).collect();
    rs.sort_by(f64::total_cmp);
    rs.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs());
    if rs.len() < 2 || !ratio.is_finite() {
        return None;
    }
    let pts: Vec<(f64, f64)> = measured.iter().map(|&(r, l)| (r, (-l).exp())).collect();
    let n = pts.len() as f64;
    let (sr, sy) = (pts.iter().map(|p| p.0).sum::<f64>(), pts.iter().map(|p| p.1).sum::<f64>());
    let (srr, sry) = (pts.iter().map(|p| p.0 * p.0).sum::<f64>(), pts.iter().map(|p| p.0 * p.1).sum::<f64>());
    let mut b = (n * sry - sr * sy) / (n * srr - sr * sr);
    let mut a = (sy - b * sr) / n;
    if b < 0.0 {
        (a, b) = (sy / n, 0.0);
    }
    if a < 0.0 {
        (a, b) = (0.0, sry / srr);
    }
    let inv = a + b * ratio;
    (inv > 0.0 && inv.is_finite()).then(|| -inv.ln())
}

/// How a type level was carried to a type without points of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Mechanism {
    /// The mean of the measured types of its architecture generation.
    Generation,
    /// The roofline line over the measured types of one precision class
    /// (`half`: fp16/bf16 tensor cores, `tf32`, `fp32`).
    Roofline {
        /// The precision class.
        precision: String,
    },
}

impl Mechanism {
    /// "from X, Y (how)".
    pub fn describe(&self, from: &[String]) -> String {
        match self {
            Mechanism::Generation => format!("from {}, same architecture generation", from.join(", ")),
            Mechanism::Roofline { precision } => {
                format!("roofline over {} ({precision} levels against the types' FLOP/byte ratios)", from.join(", "))
            }
        }
    }
}

/// A type level carried to a catalog type without measured points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferredLevel {
    /// The unmeasured type.
    pub gpu_type: String,
    /// Its compute efficiency multiplier.
    pub factor: f64,
    /// The measured types it came from.
    pub from: Vec<String>,
    /// How.
    pub mechanism: Mechanism,
}

/// Where the type part of a compute level comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TypeLevel {
    /// Points measured on this type.
    Measured,
    /// No point on this type: carried from measured types.
    Transferred {
        /// The measured types it came from.
        from: Vec<String>,
        /// How.
        mechanism: Mechanism,
    },
    /// Nothing to carry: the datasheet (level 1).
    Datasheet,
}

/// Where each part of the compute efficiency of a model on a type comes
/// from ([`super::Calibration::factor_source`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FactorSource {
    /// The type level.
    pub gpu_type: TypeLevel,
    /// The types the model's family residual was measured on (empty: no
    /// model of the family was measured).
    pub family_from: Vec<String>,
    /// Whether the family was measured on this type (a (family, type) level).
    pub family_on_type: bool,
    /// Whether the model's family pools levels at all (false for a
    /// `generic` model: nothing describes kernels it would share).
    pub family_pooled: bool,
    /// Whether this model was measured on this type (its own level).
    pub model_measured: bool,
    /// Not measured on this type: the types of the same architecture
    /// generation its own residual over its family was carried from (empty:
    /// none, its family's level).
    pub model_from: Vec<String>,
}

impl FactorSource {
    /// The explanation's rows: (factor, where it came from).
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let gpu = match &self.gpu_type {
            TypeLevel::Measured => "measured on this type".to_string(),
            TypeLevel::Transferred { from, mechanism } => format!("transferred (no profile on this type): {}", mechanism.describe(from)),
            TypeLevel::Datasheet => {
                "datasheet (no profile on this type, its architecture generation, or two types of this precision: peak x GEMM/roofline model)".to_string()
            }
        };
        let family = match (self.family_from.is_empty(), self.family_on_type) {
            _ if !self.family_pooled => "none (a generic model: no architecture whose level other models could share)".to_string(),
            (true, _) => "none (no model of this family profiled)".to_string(),
            (false, true) => format!("measured on this type (its residual over the type level pooled over {})", self.family_from.join(", ")),
            (false, false) => format!("transferred: its residual over the type level measured on {} (not on this type)", self.family_from.join(", ")),
        };
        let model = if self.model_measured {
            "measured on this type (this model's profiles: model > family > type)".to_string()
        } else if !self.model_from.is_empty() {
            format!("transferred: its residual over its family measured on {} (same architecture generation)", self.model_from.join(", "))
        } else {
            "not profiled on this type or its architecture generation (its family's level)".to_string()
        };
        vec![("compute efficiency: type level", gpu), ("compute efficiency: family", family), ("compute efficiency: model", model)]
    }

    /// Nothing measured applies: the datasheet alone.
    pub fn is_datasheet(&self) -> bool {
        self.gpu_type == TypeLevel::Datasheet && self.family_from.is_empty() && !self.model_measured && self.model_from.is_empty()
    }
}

impl fmt::Display for FactorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self.rows();
        for (i, (k, v)) in rows.iter().enumerate() {
            write!(f, "{}{}: {v}", if i > 0 { "; " } else { "" }, k.trim_start_matches("compute efficiency: "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generation_prior_takes_the_same_generation_only() {
        let m = vec![("a".to_string(), -0.4, Some(8.0)), ("b".to_string(), -0.2, Some(8.6)), ("c".to_string(), 0.3, Some(7.0))];
        let (l, from) = transfer_prior(&m, Some(8.9)).unwrap();
        assert!((l + 0.3).abs() < 1e-12 && from == vec!["a".to_string(), "b".to_string()]);
        assert_eq!(transfer_prior(&m, Some(9.0)), None);
        assert_eq!(transfer_prior(&m, None), None);
    }

    /// Levels on the line 1/level = 0.2 + 0.05 · ratio are continued;
    /// one ratio says nothing; a falling line is clamped flat (the mean),
    /// a negative intercept to a line through the origin.
    #[test]
    fn the_roofline_prior_continues_the_line() {
        let on_line = |r: f64| -(0.2f64 + 0.05 * r).ln();
        let l = roofline_prior(&[(10.0, on_line(10.0)), (20.0, on_line(20.0))], 15.0).unwrap();
        assert!((l - on_line(15.0)).abs() < 1e-12, "{l}");
        let l = roofline_prior(&[(10.0, on_line(10.0)), (20.0, on_line(20.0))], 40.0).unwrap();
        assert!((l - on_line(40.0)).abs() < 1e-12, "{l}");
        assert_eq!(roofline_prior(&[(10.0, -0.5), (10.0, -0.3)], 20.0), None);
        assert_eq!(roofline_prior(&[], 20.0), None);
        // Falling: flat at the mean of 1/level.
        let l = roofline_prior(&[(10.0, -(2.0f64).ln()), (20.0, 0.0)], 40.0).unwrap();
        assert!((l + 1.5f64.ln()).abs() < 1e-12, "{l}");
        // Steep: intercept clamped to 0, through the origin.
        let l = roofline_prior(&[(10.0, -(1.0f64).ln()), (20.0, -(3.0f64).ln())], 30.0).unwrap();
        let b = (10.0 * 1.0 + 20.0 * 3.0) / (100.0 + 400.0);
        assert!((l + (b * 30.0f64).ln()).abs() < 1e-12, "{l}");
    }

    #[test]
    fn the_source_names_each_part() {
        let s = FactorSource {
            gpu_type: TypeLevel::Transferred { from: vec!["p100".into(), "v100".into()], mechanism: Mechanism::Roofline { precision: "fp32".into() } },
            family_from: vec!["p100".into(), "v100".into()],
            family_on_type: false,
            family_pooled: true,
            model_measured: false,
            model_from: vec![],
        };
        let rows = s.rows();
        assert!(rows[0].1.contains("transferred") && rows[0].1.contains("roofline over p100, v100"), "{rows:?}");
        assert!(rows[1].1.contains("measured on p100, v100 (not on this type)"), "{rows:?}");
        assert!(rows[2].1.contains("not profiled"));
        assert!(!s.is_datasheet());
        let d = FactorSource { gpu_type: TypeLevel::Datasheet, family_from: vec![], family_on_type: false, family_pooled: true, model_measured: false, model_from: vec![] };
        assert!(d.is_datasheet() && d.to_string().starts_with("type level: datasheet"), "{d}");
        let generic = FactorSource { family_pooled: false, ..d };
        assert!(generic.rows()[1].1.contains("a generic model"), "{:?}", generic.rows());
    }
}
