//! The one table of input caps: the largest number each edge of the product
//! accepts for a count that later multiplies or sizes memory.
//!
//! The SPANK options (`--dl-batch`, `--dl-iters`), the CLI (`estimate
//! --batch`, `cells --nodes`, `whatif --dl-batch`), the simulator's trace and
//! cluster readers and the estimator's entry points all refuse a value above
//! its row here, with the same message. Below these caps every product the
//! plan search and the cost model form fits its integer type: a batch of at
//! most 2^24 samples times 4,096 GPUs times 2^20 micro-batches is 2^56,
//! 256 times below `u64::MAX`, and no input can make a host allocate per node or per
//! GPU beyond [`NODES`] × [`GPUS_PER_NODE`].
use crate::error::CoreError;

/// One cap: what it bounds and the largest accepted value (the smallest is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What the number counts, for messages (e.g. `global batch size`).
    pub what: &'static str,
    /// Largest accepted value.
    pub max: u64,
}

/// Global batch size (`--dl-batch`, `estimate --batch`, a trace's `batch_size`).
pub const BATCH: Limit = Limit { what: "global batch size", max: 1 << 24 };
/// Training iterations (`--dl-iters`, a trace's `num_iteration`).
pub const ITERS: Limit = Limit { what: "training iterations", max: 1_000_000_000_000 };
/// GPUs of one job, Cell or plan degree (`--gpus`, `--max-gpus`, a trace's `num_gpu`).
pub const CELL_GPUS: Limit = Limit { what: "GPU count", max: 4096 };
/// Micro-batches of one plan (`mb=`).
pub const MICRO_BATCHES: Limit = Limit { what: "micro-batch count", max: 1 << 20 };
/// Nodes of one GPU type (`cells --nodes`, a simulated group's `nodes`, `estimate --nodes`).
pub const NODES: Limit = Limit { what: "node count", max: 65_536 };
/// GPUs on one node (`--gpus-per-node`, a simulated group's `gpus_per_node`).
pub const GPUS_PER_NODE: Limit = Limit { what: "GPUs per node", max: 64 };

/// Every cap, for documentation and tests.
pub const ALL: &[Limit] = &[BATCH, ITERS, CELL_GPUS, MICRO_BATCHES, NODES, GPUS_PER_NODE];

impl Limit {
    /// The cap as a `u32` (every cap but [`ITERS`] fits one; saturates otherwise).
    pub const fn max_u32(&self) -> u32 {
        if self.max > u32::MAX as u64 {
            u32::MAX
        } else {
            self.max as u32
        }
    }

    /// `value` when it is in `1..=max`; otherwise an error naming `label`
    /// (the option or field as the user wrote it), the value and the range.
    pub fn check(&self, label: &str, value: u64) -> Result<u64, CoreError> {
        if (1..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(self.refusal(label, &value.to_string()))
        }
    }

    /// [`Limit::check`] for a `u32`.
    pub fn check_u32(&self, label: &str, value: u32) -> Result<u32, CoreError> {
        self.check(label, u64::from(value)).map(|_| value)
    }

    /// Parses decimal text (surrounding spaces allowed, no sign) into
    /// `1..=max` as a `u32`; errors as [`Limit::check`] does, for any text.
    pub fn parse_u32(&self, label: &str, text: &str) -> Result<u32, CoreError> {
        self.parse(label, text).map(|v| u32::try_from(v).unwrap_or(u32::MAX))
    }

    /// Parses decimal text (surrounding spaces allowed, no sign) into `1..=max`.
    pub fn parse(&self, label: &str, text: &str) -> Result<u64, CoreError> {
        let t = text.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.refusal(label, t));
        }
        // Digits only: a parse failure can only be overflow, which is above the cap.
        let v = t.parse::<u64>().map_err(|_| self.refusal(label, t))?;
        self.check(label, v)
    }

    fn refusal(&self, label: &str, value: &str) -> CoreError {
        let shown: String = value.chars().take(32).collect();
        CoreError::invalid(label, shown, format!("a {} in 1..={}", self.what, self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn caps_keep_the_search_products_in_range() {
        // The widest product the plan search forms: batch x GPUs x micro-batches.
        let p = BATCH.max.checked_mul(CELL_GPUS.max).and_then(|x| x.checked_mul(MICRO_BATCHES.max));
        assert!(p.is_some_and(|p| p <= 1 << 56), "{p:?}");
        // Per-node state of a simulated type stays small.
        assert!(NODES.max * GPUS_PER_NODE.max <= 1 << 22);
        for l in ALL.iter().filter(|l| **l != ITERS) {
            assert_eq!(u64::from(l.max_u32()), l.max, "{}", l.what);
        }
        assert_eq!(ITERS.max_u32(), u32::MAX);
    }

    #[test]
    fn refusals_name_the_label_value_and_range() {
        assert_eq!(BATCH.parse_u32("--batch", " 64 ").unwrap(), 64);
        let e = BATCH.parse_u32("--batch", "4294967295").unwrap_err().to_string();
        assert_eq!(e, "invalid --batch '4294967295': expected a global batch size in 1..=16777216");
        let e = NODES.check_u32("--nodes", u32::MAX).unwrap_err().to_string();
        assert!(e.contains("--nodes") && e.contains("1..=65536"), "{e}");
        for bad in ["0", "", "-1", "+4", "1e6", "99999999999999999999999", "12 3"] {
            assert!(BATCH.parse("--batch", bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// Any text and any number: an answer in range or an error, never a panic.
        #[test]
        fn parse_and_check_never_panic(text in any::<String>(), n in any::<u64>(), i in 0usize..6) {
            let l = ALL[i];
            if let Ok(v) = l.parse("x", &text) {
                prop_assert!((1..=l.max).contains(&v));
            }
            match l.check("x", n) {
                Ok(v) => prop_assert!(v == n && (1..=l.max).contains(&n)),
                Err(e) => prop_assert!(n == 0 || n > l.max, "{}", e),
            }
        }
    }
}
