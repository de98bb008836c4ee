//! What one reconfiguration costs a job: writing its checkpoint after the
//! signal, and restarting from it (start to first iteration).
//!
//! Physical model, for jobs whose restart was not measured: the checkpoint
//! holds the fp32 weights (the master copy under mixed precision) and the
//! optimizer state ([`crate::model::Optimizer::state_bytes`]: 8 bytes per
//! parameter for Adam/AdamW), 12 bytes per parameter in all. It is written
//! at `checkpoint_write_gbs`, and a restart takes `start_s` (process, CUDA,
//! data loader, model build, first iteration) plus reading it back at
//! `checkpoint_read_gbs`. Where the profiler measured the model's cold
//! start (`restart_s=` in the record: start to the end of the first
//! iteration, from the profile DB's `first_iter_s`), that measurement
//! replaces `start_s`.
//!
//! Anchor (issue 33): a 1.3B-parameter GPT (bf16 autocast, AdamW) on one
//! H200 saved 15.8 GB of model and optimizer state to local disk in 29.5 s
//! (0.54 GB/s), and a fresh process took 51.4 s from its start to the end
//! of its first iteration, 13.6 s of it loading (1.16 GB/s); the remaining
//! 37.8 s are `start_s`. `[elastic]`'s defaults are those numbers.
use super::ElasticConfig;
use crate::estimator::JobSpec;
use crate::record::DlRecord;

/// Bytes per parameter held by weights besides the optimizer state: the fp32 weights or masters.
const WEIGHT_BYTES: f64 = 4.0;

/// A job's cost of one reconfiguration, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RestartCost {
    /// Writing the checkpoint after the signal (bounded by `grace_s`:
    /// the job is requeued then whatever it does).
    pub save_s: f64,
    /// From the restart to the end of the first iteration.
    pub restart_s: f64,
}

impl RestartCost {
    /// Seconds of progress one reconfiguration loses: save plus restart.
    pub fn total_s(&self) -> f64 {
        self.save_s + self.restart_s
    }

    /// Checkpoint bytes of `job` (fp32 weights plus optimizer state).
    pub fn checkpoint_bytes(job: &JobSpec) -> f64 {
        job.model.params() * (WEIGHT_BYTES + job.model.optimizer.state_bytes())
    }

    /// The physical model alone (see the module doc).
    pub fn derived(job: &JobSpec, cfg: &ElasticConfig) -> RestartCost {
        let gb = Self::checkpoint_bytes(job) / 1e9;
        RestartCost {
            save_s: (gb / cfg.checkpoint_write_gbs).min(cfg.grace_s as f64),
            restart_s: cfg.start_s + gb / cfg.checkpoint_read_gbs,
        }
    }

    /// The cost the decision uses for a job: its measured cold start to
    /// the first iteration (`restart_s=` in its record) plus reading its
    /// checkpoint back when measured, else `restart_cost_s` when set, else
    /// the derived one; the save time is always derived.
    pub fn of(record: &DlRecord, job: &JobSpec, cfg: &ElasticConfig) -> RestartCost {
        let d = Self::derived(job, cfg);
        let read_s = Self::checkpoint_bytes(job) / 1e9 / cfg.checkpoint_read_gbs;
        let restart_s = record
            .restart_s
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| s + read_s)
            .or((cfg.restart_cost_s > 0.0).then_some(cfg.restart_cost_s))
            .unwrap_or(d.restart_s);
        RestartCost { restart_s, ..d }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelCatalog;

    fn job(name: &str) -> JobSpec {
        JobSpec { model: ModelCatalog::builtin().resolve(name).unwrap(), global_batch: 8 }
    }

    /// The defaults reproduce the H200 measurement of a 1.3B GPT:
    /// 15.8 GB, 29.5 s to save, 51.4 s to the first iteration.
    #[test]
    fn defaults_reproduce_the_anchor() {
        let j = job("gpt__1.3B");
        let gb = RestartCost::checkpoint_bytes(&j) / 1e9;
        assert!((gb - 15.8).abs() / 15.8 < 0.03, "checkpoint {gb} GB");
        let c = RestartCost::derived(&j, &ElasticConfig::default());
        assert!((c.save_s - 29.5).abs() / 29.5 < 0.05, "save {}", c.save_s);
        assert!((c.restart_s - 51.4).abs() / 51.4 < 0.05, "restart {}", c.restart_s);
    }

    #[test]
    fn bigger_models_cost_more_and_measurements_win() {
        let cfg = ElasticConfig::default();
        let small = RestartCost::derived(&job("gpt__125M"), &cfg);
        let big = RestartCost::derived(&job("gpt__2.6B"), &cfg);
        assert!(small.total_s() < big.total_s() && small.restart_s >= cfg.start_s);
        // The save is cut off by the grace period.
        let short = ElasticConfig { grace_s: 10, ..cfg.clone() };
        assert_eq!(RestartCost::derived(&job("gpt__2.6B"), &short).save_s, 10.0);
        let d = crate::Decision {
            cell: crate::Cell::new("a100", 1, 1).unwrap(),
            nodes: 1,
            plan: crate::Plan::default(),
            iter_s: 0.1,
            source: crate::cell::EstimateSource::Datasheet,
        };
        let mut r = DlRecord::new(d);
        assert_eq!(RestartCost::of(&r, &job("gpt__125M"), &cfg), small);
        let fixed = ElasticConfig { restart_cost_s: 99.0, ..cfg.clone() };
        assert_eq!(RestartCost::of(&r, &job("gpt__125M"), &fixed).restart_s, 99.0);
        // A measured cold start replaces `start_s`; reading the checkpoint back is added.
        r.restart_s = Some(12.5);
        let c = RestartCost::of(&r, &job("gpt__125M"), &fixed);
        assert!((c.restart_s - (12.5 + small.restart_s - cfg.start_s)).abs() < 1e-9, "{c:?}");
        assert_eq!(c.save_s, small.save_s);
    }
}
