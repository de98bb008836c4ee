//! What one reconfiguration costs a job: writing its checkpoint after the
//! signal, and restarting from it (start to first iteration).
//!
//! Physical model, for jobs whose restart was not measured: the checkpoint
//! holds the fp32 weights (the master copy under mixed precision) and the
//! optimizer state ([`crate::model::Optimizer::state_bytes`]: 8 bytes per
//! parameter for Adam/AdamW), 12 bytes per parameter in all. It is written
//! at `checkpoint_write_gbs`, and a restart takes `start_s` (process,
//! imports, CUDA, data loader, first iteration), plus `start_s_per_bparam`
//! per billion parameters (building and initialising the model on the host,
//! copying it to the GPU), plus reading the checkpoint back at
//! `checkpoint_read_gbs`. Where the profiler measured the model's cold
//! start (`restart_s=` in the record: start to the end of the first
//! iteration, from the profile DB's `first_iter_s`), that measurement
//! replaces the start and build terms.
//!
//! Defaults: fitted on two runs of `bench/truth/h200-restart.csv` (GPT-2
//! 125M and 1.3B, bf16 autocast, AdamW, one H200: restart less loading
//! 12.2 s and 27.5 s, 16.8 GB written in 28.5 s and read in 12.8 s). The
//! file's other runs (GPT-2 350M and 760M, BERT 350M) and issue 33's
//! measurement on another H200 (15.8 GB, 29.5 s to save, 51.4 s to the
//! first iteration) are held out.
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
        Self::of_size(job.model.params(), Self::checkpoint_bytes(job), cfg)
    }

    /// The physical model for `params` parameters and a checkpoint of
    /// `checkpoint_bytes`.
    pub fn of_size(params: f64, checkpoint_bytes: f64, cfg: &ElasticConfig) -> RestartCost {
        let gb = checkpoint_bytes / 1e9;
        RestartCost {
            save_s: (gb / cfg.checkpoint_write_gbs).min(cfg.grace_s as f64),
            restart_s: cfg.start_s + cfg.start_s_per_bparam * params / 1e9 + gb / cfg.checkpoint_read_gbs,
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

    /// The defaults reproduce the two runs they were fitted on
    /// (bench/truth/h200-restart.csv: GPT-2 125M and 1.3B with AdamW on one
    /// H200, 12 bytes of checkpoint per parameter).
    #[test]
    fn defaults_reproduce_their_calibration_runs() {
        let cfg = ElasticConfig::default();
        for (bytes, save_s, restart_s) in [(1_502_148_319.0, 2.858, 12.899), (15_318_341_403.0, 25.599, 39.645)] {
            let c = RestartCost::of_size(bytes / 12.0, bytes, &cfg);
            assert!((c.restart_s - restart_s).abs() / restart_s < 0.05, "restart {} vs {restart_s}", c.restart_s);
            assert!((c.save_s - save_s).abs() / save_s < 0.5, "save {} vs {save_s}", c.save_s);
        }
        // The catalog's 1.3B GPT (a wider FFN than the run's) costs about a minute in all.
        let c = RestartCost::derived(&job("gpt__1.3B"), &cfg);
        assert!((40.0..120.0).contains(&c.total_s()), "{c:?}");
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
        // A measured cold start replaces the start and build terms; reading the checkpoint back is added.
        r.restart_s = Some(12.5);
        let c = RestartCost::of(&r, &job("gpt__125M"), &fixed);
        let read_s = RestartCost::checkpoint_bytes(&job("gpt__125M")) / 1e9 / cfg.checkpoint_read_gbs;
        assert!((c.restart_s - (12.5 + read_s)).abs() < 1e-9, "{c:?}");
        assert_eq!(c.save_s, small.save_s);
    }
}
