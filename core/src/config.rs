//! The slurmctld plugins' configuration file, `cellsched.toml`.
//!
//! One TOML file read by `site_factor/cellsched` and `job_submit/cellsched`
//! (outside slurmctld's locks). Its location is, in order: the path given
//! as plugin argument (`PrioritySiteFactorParameters=config=PATH`), the
//! `CELLSCHED_CONFIG` environment variable, `cellsched.toml` next to the
//! running `slurm.conf`, and finally [`DEFAULT_CONFIG_PATH`]; see
//! [`resolve_config_path`]. Unknown keys are errors so typos do not pass
//! silently; every error names the file and line.
//!
//! ```toml
//! [ordering]
//! enabled = true
//! aging_bound_s = 86400.0
//! site_factor_max = 100000
//!
//! [placement]
//! enabled = true
//! replan = true
//! replan_interval_s = 30
//! replan_max_slowdown = 6.0
//! replan_wait_test = true
//! replan_min_gain = 0.05
//! replan_cooldown_s = 300
//! max_gpus = 16
//! max_gpu_factor = 4.0
//! min_marginal_efficiency = 0.5
//! load_sizing = true
//! deadline_policy = "warn"
//! allowed_gpu_types = ["a100", "v100", "a10"]
//!
//! [elastic]
//! enabled = true
//! interval_s = 60
//! max_per_hour = 2
//! min_run_s = 600
//! grace_s = 120
//!
//! [estimator]
//! profile_db = "/var/lib/cellsched/profiles.csv"
//! gpu_catalog = "/etc/slurm/cellsched-gpus.toml"
//! history = "/var/lib/cellsched/history.csv"
//! ```
use crate::error::CoreError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the file is looked for when nothing else names it.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/slurm/cellsched.toml";
/// File name looked for next to `slurm.conf`.
pub const CONFIG_FILE_NAME: &str = "cellsched.toml";
/// Environment variable naming the file.
pub const CONFIG_ENV: &str = "CELLSCHED_CONFIG";

/// The whole file. Every section and key is optional; defaults are safe.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// A-SRPT ordering (`site_factor/cellsched`).
    pub ordering: OrderingConfig,
    /// Cell placement and re-planning (`job_submit/cellsched`).
    pub placement: PlacementConfig,
    /// Data the estimator and predictor load at startup.
    pub estimator: EstimatorConfig,
    /// What happens when jobs overrun their declared work.
    pub declared: crate::declared::DeclaredConfig,
    /// How much deadline urgency users get (`--dl-deadline`).
    pub deadline: crate::deadline::DeadlineConfig,
    /// What other users can read of a DL job's record.
    pub privacy: crate::record::PrivacyConfig,
    /// slurmctld housekeeping (site_factor/cellsched).
    pub slurmctld: SlurmctldConfig,
    /// Reconfiguration of running `--dl-elastic` jobs.
    pub elastic: ElasticConfig,
}

/// `[ordering]`: how predicted remaining time becomes a Slurm site factor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OrderingConfig {
    /// Set site factors at all; `false` leaves priorities stock.
    pub enabled: bool,
    /// A-SRPT aging guard: a job pending this long (and at least
    /// `aging_factor` × its predicted remaining time) is ranked ahead of
    /// every non-aged job, in the order jobs aged.
    pub aging_bound_s: f64,
    /// Aging by slowdown: a job ages only after waiting this many times its
    /// own predicted remaining time (0 = `aging_bound_s` alone).
    pub aging_factor: f64,
    /// What the order ranks by: `area` (remaining GPU-seconds) or `time`
    /// (remaining seconds).
    pub rank_by: crate::asrpt::RankBy,
    /// A job with a deadline moves ahead of the SRPT order once its slack
    /// (deadline − now − predicted remaining time) is at most this many
    /// times its remaining time, until it can no longer make it.
    pub deadline_slack_factor: f64,
    /// At most this many aged jobs (the first to age) are ranked ahead of
    /// the order at a time; 0 = all aged jobs.
    pub aged_lane: u32,
    /// Largest site factor given (to the job predicted shortest); weigh it
    /// against the `PriorityWeight*` factors of slurm.conf.
    pub site_factor_max: u32,
    /// Remaining time assumed for a DL job whose iterations are unknown and
    /// cannot be predicted, when it has no time limit either.
    pub default_remaining_s: f64,
    /// Seconds between two rankings of the pending DL jobs by the plugin's
    /// background thread (slurmctld's priority update then only copies them).
    pub rank_interval_s: u64,
    /// The spelling of `[slurmctld] release_gres_select` before it moved
    /// there (it changes no order); read as that key, `None` once loaded.
    #[serde(skip_serializing)]
    pub release_gres_select: Option<bool>,
}

/// `[slurmctld]`: housekeeping of slurmctld's own state that changes no decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmctldConfig {
    /// Whether `site_factor_p_update` (which already looks up every ranked
    /// pending DL job under the job write lock) also frees the per-node GRES
    /// selection arrays a Slurm scheduling test that fitted the job left in
    /// it (cons_tres keeps them, 8 bytes per node of the cluster, until the
    /// job ends, and rebuilds them at its next test): the A-SRPT order
    /// brings more distinct jobs to backfill's tests than FIFO does. Off by
    /// default: it writes Slurm's own job state, and on the 1,000-node bench
    /// (bench/HISTORY.md, runs 13-17) it did not lower the memory in use measurably.
    pub release_gres_select: bool,
}

impl Default for OrderingConfig {
    fn default() -> Self {
        let a = crate::asrpt::AsrptConfig::default();
        OrderingConfig {
            enabled: true,
            aging_bound_s: a.aging_bound_s,
            aging_factor: a.aging_factor,
            rank_by: a.rank_by,
            deadline_slack_factor: a.deadline_slack_factor,
            aged_lane: a.aged_lane,
            site_factor_max: 100_000,
            default_remaining_s: 3_600.0,
            rank_interval_s: 5,
            release_gres_select: None,
        }
    }
}

/// `[placement]`: what the job_submit plugin may choose and change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementConfig {
    /// Choose Cells for `--dl-cell=auto` jobs; `false` leaves requests stock.
    pub enabled: bool,
    /// Run the re-planning thread that moves pending jobs to better Cells.
    pub replan: bool,
    /// Seconds between re-planning passes (>= 1).
    pub replan_interval_s: u64,
    /// A pending job whose Cell cannot start now moves to a Cell that can,
    /// if that one is at most this many times slower per iteration (>= 1)
    /// and, with `replan_wait_test`, predicted to finish first. The default,
    /// 6, is the simulator's (bench/HISTORY.md, the wait test); without
    /// the wait test 4 did best of 2, 3, 4, 6 and 8 there.
    pub replan_max_slowdown: f64,
    /// Move a pending job to a slower free Cell only when it is predicted to
    /// finish no later than waiting for its current Cell, whose start is
    /// Slurm's backfill forecast (`squeue --start`) and, for a job backfill
    /// has not reached, no earlier than the time it has already waited
    /// (`core::placement::PlanWait`). Off: any free Cell within
    /// `replan_max_slowdown` is taken at once.
    pub replan_wait_test: bool,
    /// Hysteresis: a move to a slower Cell must be predicted to finish
    /// earlier than waiting by at least this share (0..=1) of the job's
    /// remaining run on its current Cell (0.05: 5 %), so a job whose
    /// choices are nearly equal stays where it is.
    pub replan_min_gain: f64,
    /// Hysteresis: seconds after a move (or a re-plan on a user's edit)
    /// during which the job is not moved again (its record's `moved_at`);
    /// an array's pending tasks share one record, so the cool-down is per
    /// array. 0 turns it off.
    pub replan_cooldown_s: u64,
    /// Most GPUs the plugin may give one job (>= 1).
    pub max_gpus: u32,
    /// Most GPUs a job without a GPU count of its own may get, as a multiple
    /// of the fewest GPUs its model fits on (>= 1; see `placement::sizing`).
    pub max_gpu_factor: f64,
    /// A job grows to more GPUs only while the marginal efficiency of the
    /// extra GPUs is at least this (0..=1): with 0.5, doubling its GPUs must
    /// make it at least 1.5x faster.
    pub min_marginal_efficiency: f64,
    /// Load-adaptive sizing: a job also grows into free GPUs no pending job
    /// waits for, while the growth's marginal efficiency is at least
    /// `min_marginal_efficiency` times the GPU type's load after it
    /// (`placement::LoadView`); at submit against the GPUs the pending DL
    /// jobs waited for at the last re-planning pass, and in re-planning
    /// moves. Off: marginal value alone.
    pub load_sizing: bool,
    /// GPU types the plugin may choose; empty means every type in the cluster.
    pub allowed_gpu_types: Vec<String>,
    /// What happens at submit when no Cell is predicted to meet a job's
    /// `--dl-deadline`: `"warn"` (place it on its fastest Cell, tell the
    /// user) or `"strict"` (refuse it).
    pub deadline_policy: crate::deadline::DeadlinePolicy,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            enabled: true,
            replan: true,
            replan_interval_s: 30,
            replan_max_slowdown: 6.0,
            replan_wait_test: true,
            replan_min_gain: 0.05,
            replan_cooldown_s: 300,
            max_gpus: 16,
            max_gpu_factor: 4.0,
            min_marginal_efficiency: 0.5,
            load_sizing: true,
            allowed_gpu_types: Vec::new(),
            deadline_policy: crate::deadline::DeadlinePolicy::Warn,
        }
    }
}

impl PlacementConfig {
    /// Whether the plugin may choose `gpu_type` (case-insensitive).
    pub fn allows(&self, gpu_type: &str) -> bool {
        self.allowed_gpu_types.is_empty() || self.allowed_gpu_types.iter().any(|t| t.eq_ignore_ascii_case(gpu_type))
    }
}

/// `[elastic]` (`crate::elastic`): bounds and costs of reconfiguring running `--dl-elastic` jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElasticConfig {
    /// Reconfigure opted-in jobs at all (jobs without `--dl-elastic` are
    /// never touched, whatever this says).
    pub enabled: bool,
    /// Seconds between two decision passes.
    pub interval_s: u64,
    /// At most this many reconfigurations per job in any hour (0 = none).
    pub max_per_hour: u32,
    /// A job is reconfigured only after running this long since its last (re)start.
    pub min_run_s: u64,
    /// Seconds between the checkpoint signal and the requeue; a job that
    /// ignores the signal is requeued when they are up.
    pub grace_s: u64,
    /// Seconds from a restart to the job's first iteration, for jobs whose
    /// own was not measured; 0 = derived from the model's checkpoint size
    /// (`crate::elastic::RestartCost`).
    pub restart_cost_s: f64,
    /// Checkpoint write rate (GB/s) of the derived cost.
    pub checkpoint_write_gbs: f64,
    /// Checkpoint read rate (GB/s) of the derived cost.
    pub checkpoint_read_gbs: f64,
    /// Seconds a fresh process takes to its first iteration besides loading
    /// the checkpoint and building the model (process, imports, CUDA and
    /// data-loader start, the first iteration), in the derived cost.
    pub start_s: f64,
    /// Seconds per billion parameters to build and initialise the model on
    /// the host and copy it to the GPU at start, in the derived cost.
    pub start_s_per_bparam: f64,
    /// A reconfiguration must save at least this many times its cost in
    /// predicted completion time (summed over the jobs it affects).
    pub min_gain: f64,
    /// A-SRPT's preemptive rule: a running job is preempted for a pending
    /// job only if that job's predicted run time is at most this share of
    /// the running job's predicted remaining time.
    pub preempt_ratio: f64,
    /// Relative error allowed for the predicted iteration time of the Cell
    /// a running job would grow onto: the grow must still save
    /// `min_gain` x its cost with that time this share longer (0..=1; the
    /// estimator's median error on Cells it has not measured is about 0.2).
    pub grow_margin: f64,
}

impl Default for ElasticConfig {
    fn default() -> Self {
        ElasticConfig {
            enabled: true,
            interval_s: 60,
            max_per_hour: 2,
            min_run_s: 600,
            grace_s: 120,
            restart_cost_s: 0.0,
            // Fitted on two runs of bench/truth/h200-restart.csv (GPT-2 125M
            // and 1.3B, AdamW, one H200); the file's other runs are held out
            // (`cellsched bench estimator` prints the error on them).
            checkpoint_write_gbs: 0.59,
            checkpoint_read_gbs: 1.32,
            start_s: 10.6,
            start_s_per_bparam: 13.3,
            min_gain: 2.0,
            preempt_ratio: 0.5,
            grow_margin: 0.2,
        }
    }
}

impl ElasticConfig {
    /// Range checks; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        if self.interval_s == 0 || self.interval_s > 86_400 {
            return Err(format!("elastic.interval_s = {} must be in 1..=86400 seconds", self.interval_s));
        }
        if self.max_per_hour > 60 {
            return Err(format!("elastic.max_per_hour = {} must be in 0..=60", self.max_per_hour));
        }
        if self.min_run_s > 7 * 86_400 {
            return Err(format!("elastic.min_run_s = {} must be in 0..=604800 seconds", self.min_run_s));
        }
        if self.grace_s > 86_400 {
            return Err(format!("elastic.grace_s = {} must be in 0..=86400 seconds", self.grace_s));
        }
        if !(self.restart_cost_s.is_finite() && (0.0..=86_400.0).contains(&self.restart_cost_s)) {
            return Err(format!("elastic.restart_cost_s = {} must be seconds in 0..=86400 (0 = derived from the model)", self.restart_cost_s));
        }
        for (key, v) in [("checkpoint_write_gbs", self.checkpoint_write_gbs), ("checkpoint_read_gbs", self.checkpoint_read_gbs)] {
            if !(v.is_finite() && v > 0.0 && v <= 1e4) {
                return Err(format!("elastic.{key} = {v} must be a rate in GB/s, > 0 and <= 10000"));
            }
        }
        if !(self.start_s.is_finite() && (0.0..=86_400.0).contains(&self.start_s)) {
            return Err(format!("elastic.start_s = {} must be seconds in 0..=86400", self.start_s));
        }
        if !(self.start_s_per_bparam.is_finite() && (0.0..=86_400.0).contains(&self.start_s_per_bparam)) {
            return Err(format!("elastic.start_s_per_bparam = {} must be seconds in 0..=86400", self.start_s_per_bparam));
        }
        if !(self.min_gain.is_finite() && (0.0..=1000.0).contains(&self.min_gain)) {
            return Err(format!("elastic.min_gain = {} must be a number in 0..=1000", self.min_gain));
        }
        if !(self.preempt_ratio.is_finite() && (0.0..=1.0).contains(&self.preempt_ratio)) {
            return Err(format!("elastic.preempt_ratio = {} must be a number in 0..=1 (0 = never preempt)", self.preempt_ratio));
        }
        if !(self.grow_margin.is_finite() && (0.0..=1.0).contains(&self.grow_margin)) {
            return Err(format!("elastic.grow_margin = {} must be a number in 0..=1", self.grow_margin));
        }
        Ok(())
    }
}

/// `[estimator]`: optional data files. A missing file is reported and the
/// estimator falls back to its built-in (datasheet) numbers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EstimatorConfig {
    /// Profile database CSV (`cellsched profile` output).
    pub profile_db: Option<PathBuf>,
    /// GPU catalog overrides (TOML, see `GpuCatalog::with_overrides_toml`).
    pub gpu_catalog: Option<PathBuf>,
    /// Job history CSV; the iteration predictor fitted on it (in the
    /// background) stands in for `--dl-iters` when a job does not give them.
    pub history: Option<PathBuf>,
}

/// When a changed key takes effect in a running cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Read by job_submit/cellsched, which re-reads the file when it
    /// changes, at the next submission or re-planning pass.
    OnChange,
    /// Read by site_factor/cellsched, which re-reads the file at slurmctld's
    /// start and at `scontrol reconfigure`; job_submit/cellsched, which reads
    /// it too, picks a change up at once.
    Reconfigure,
    /// Read by job_submit/cellsched (on change) and by the SPANK plugin,
    /// which reads the file at the start of every DL job step.
    OnChangeAndSteps,
}

impl Reload {
    /// One sentence for users (man page, docs).
    pub fn describe(self) -> &'static str {
        match self {
            Reload::OnChange => "job_submit/cellsched re-reads the file when it changes (next submission or re-planning pass); no reconfigure needed",
            Reload::Reconfigure => "site_factor/cellsched re-reads the file at scontrol reconfigure (and slurmctld start); job_submit/cellsched picks the change up at its next submission or re-planning pass",
            Reload::OnChangeAndSteps => "job_submit/cellsched re-reads the file when it changes; the SPANK plugin reads it at the start of every DL job step",
        }
    }
}

/// One key of `cellsched.toml`: the single table the man page
/// `cellsched.toml(5)`, the shipped example's test and the docs follow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigKey {
    /// Table name (`ordering`, `placement`, `estimator`, `declared`).
    pub section: &'static str,
    /// Key name inside the table.
    pub key: &'static str,
    /// The default as TOML text; `None`: unset by default.
    pub default: Option<&'static str>,
    /// Accepted values, as checked when the file is read.
    pub range: &'static str,
    /// When a change takes effect.
    pub reload: Reload,
    /// What the key does.
    pub doc: &'static str,
}

/// The tables of `cellsched.toml`, in file order, with one sentence each.
pub const SECTIONS: &[(&str, &str)] = &[
    ("ordering", "A-SRPT order of pending DL jobs, given to Slurm as the site factor of priority/multifactor (site_factor/cellsched)."),
    ("placement", "Which Cell (GPU type, count, pipeline stages) a DL job gets at submit, and re-planning of pending jobs (job_submit/cellsched)."),
    ("estimator", "Optional data files; a missing or broken file is logged and the built-in datasheet numbers are used."),
    ("declared", "What a declared --dl-iters promises, and what happens to users whose jobs overrun it."),
    ("deadline", "How much deadline urgency (--dl-deadline) a user gets, and what infeasible or missed deadlines cost."),
    ("privacy", "What other users can read of a DL job's record (AdminComment is readable by every user)."),
    ("slurmctld", "Housekeeping of slurmctld's own state that changes no decision (site_factor/cellsched)."),
    ("elastic", "Reconfiguration of running jobs that opted in with --dl-elastic (grow, shrink or move, preempt for a much shorter job): bounds and restart cost. Jobs without the opt-in are never signalled, preempted or requeued."),
];

/// Every key of `cellsched.toml`. A test checks that this table and
/// [`Config`] agree key for key and default for default.
pub const KEYS: &[ConfigKey] = &[
    ConfigKey { section: "ordering", key: "enabled", default: Some("true"), range: "true or false", reload: Reload::Reconfigure,
        doc: "Set site factors at all; false gives pending DL jobs the stock site factor." },
    ConfigKey { section: "ordering", key: "rank_by", default: Some("\"area\""), range: "\"area\" or \"time\"", reload: Reload::Reconfigure,
        doc: "What the order ranks by, least first: \"area\" = predicted remaining GPU-seconds on the job's Cell, \"time\" = predicted remaining seconds." },
    ConfigKey { section: "ordering", key: "aging_bound_s", default: Some("86400.0"), range: "seconds > 0", reload: Reload::Reconfigure,
        doc: "A job ages (moves into the urgent band, in the order jobs aged) only after waiting at least this long." },
    ConfigKey { section: "ordering", key: "aging_factor", default: Some("60.0"), range: ">= 0", reload: Reload::Reconfigure,
        doc: "... and at least this many times its own predicted remaining time (aging by slowdown). 0 = aging_bound_s alone, which turns the order into FIFO on a cluster where every job waits that long." },
    ConfigKey { section: "ordering", key: "aged_lane", default: Some("1"), range: "integer >= 0", reload: Reload::Reconfigure,
        doc: "At most this many aged jobs (the first to age) are urgent at a time; 0 = all aged jobs." },
    ConfigKey { section: "ordering", key: "deadline_slack_factor", default: Some("1.0"), range: ">= 0", reload: Reload::Reconfigure,
        doc: "A --dl-deadline job becomes urgent once its slack (deadline - now - predicted remaining time) is at most this many times its remaining time, while the deadline can still be met." },
    ConfigKey { section: "ordering", key: "site_factor_max", default: Some("100000"), range: "1..=2147483647", reload: Reload::Reconfigure,
        doc: "Site factor of the job predicted shortest (the others get less); weigh it against the PriorityWeight* factors of slurm.conf." },
    ConfigKey { section: "ordering", key: "default_remaining_s", default: Some("3600.0"), range: "seconds > 0", reload: Reload::Reconfigure,
        doc: "Remaining time assumed for a DL job whose iterations are neither declared nor predictable and that has no time limit." },
    ConfigKey { section: "ordering", key: "rank_interval_s", default: Some("5"), range: "1..=3600", reload: Reload::Reconfigure,
        doc: "Seconds between two rankings of the pending DL jobs by the plugin's background thread (slurmctld's priority update only copies the result)." },
    ConfigKey { section: "slurmctld", key: "release_gres_select", default: Some("false"), range: "true or false (also read from [ordering], its earlier home)", reload: Reload::Reconfigure,
        doc: "Also free, in each ranked pending DL job, the per-node GRES selection arrays a Slurm scheduling test that fitted it left behind (cons_tres keeps 8 bytes per node per job until the next test). Off: it writes Slurm's own job state and showed no measured gain." },
    ConfigKey { section: "placement", key: "enabled", default: Some("true"), range: "true or false", reload: Reload::OnChange,
        doc: "Choose Cells for DL jobs; false leaves their GPU requests stock (a pinned --dl-cell is written as a plain request for those GPUs)." },
    ConfigKey { section: "placement", key: "replan", default: Some("true"), range: "true or false", reload: Reload::OnChange,
        doc: "Run the re-planning thread that moves still-pending DL jobs to a better Cell when GPUs free up (running jobs are resized only with --dl-elastic, see [elastic])." },
    ConfigKey { section: "placement", key: "replan_interval_s", default: Some("30"), range: "seconds >= 1", reload: Reload::OnChange,
        doc: "Seconds between two re-planning passes." },
    ConfigKey { section: "placement", key: "replan_max_slowdown", default: Some("6.0"), range: ">= 1", reload: Reload::OnChange,
        doc: "A pending job whose Cell cannot start moves only to a free Cell at most this many times slower per iteration than its first plan." },
    ConfigKey { section: "placement", key: "replan_wait_test", default: Some("true"), range: "true or false", reload: Reload::OnChange,
        doc: "Move to a slower free Cell only when predicted to finish no later than waiting for the job's own Cell (Slurm's backfill forecast); false: move at once (then 4 is the better replan_max_slowdown)." },
    ConfigKey { section: "placement", key: "replan_min_gain", default: Some("0.05"), range: "0..=1", reload: Reload::OnChange,
        doc: "A move to a slower Cell must be predicted to finish earlier than waiting by at least this share of the job's remaining run (hysteresis)." },
    ConfigKey { section: "placement", key: "replan_cooldown_s", default: Some("300"), range: "seconds >= 0", reload: Reload::OnChange,
        doc: "A job moved less than this long ago (moved_at in its record) is not moved again; an array's pending tasks share one record, so the cool-down is per array. 0 = off." },
    ConfigKey { section: "placement", key: "max_gpus", default: Some("16"), range: "1..=4096", reload: Reload::OnChange,
        doc: "Most GPUs cellsched gives one job (a user's own larger untyped GPU count is kept)." },
    ConfigKey { section: "placement", key: "max_gpu_factor", default: Some("4.0"), range: ">= 1", reload: Reload::OnChange,
        doc: "Most GPUs a job without a GPU count of its own may get, as a multiple of the fewest GPUs its model fits on." },
    ConfigKey { section: "placement", key: "min_marginal_efficiency", default: Some("0.5"), range: "0..=1", reload: Reload::OnChange,
        doc: "A job grows to more GPUs only while (t0/t - 1) / (g/g0 - 1) is at least this: with 0.5, doubling the GPUs must make it at least 1.5x faster. 0 = the fastest Cell within the caps." },
    ConfigKey { section: "placement", key: "load_sizing", default: Some("true"), range: "true or false", reload: Reload::OnChange,
        doc: "A job also grows into free GPUs no pending job waits for, while the growth's marginal efficiency is at least min_marginal_efficiency times the GPU type's load after it (at submit against the GPUs the pending DL jobs waited for at the last re-planning pass; in re-planning moves); false = marginal value alone." },
    ConfigKey { section: "placement", key: "allowed_gpu_types", default: Some("[]"), range: "list of GPU type names", reload: Reload::OnChange,
        doc: "GPU types cellsched may choose (case-insensitive); empty = every type in the cluster." },
    ConfigKey { section: "placement", key: "deadline_policy", default: Some("\"warn\""), range: "\"warn\" or \"strict\"", reload: Reload::OnChange,
        doc: "When no Cell is predicted to meet a job's --dl-deadline: \"warn\" places it on its fastest Cell and tells the user, \"strict\" refuses it (and requires --dl-iters with --dl-deadline)." },
    ConfigKey { section: "estimator", key: "profile_db", default: None, range: "absolute path of a CSV file", reload: Reload::OnChangeAndSteps,
        doc: "Profile database written by `cellsched profile` (measured iteration times); it calibrates the estimator. job_submit/cellsched also re-reads it when the DB file changes." },
    ConfigKey { section: "estimator", key: "gpu_catalog", default: None, range: "absolute path of a TOML file", reload: Reload::OnChangeAndSteps,
        doc: "GPU catalog overrides and additions ([gpu.KEY] tables with datasheet fields and aliases), e.g. the site's network rate (inter_node_gbs)." },
    ConfigKey { section: "estimator", key: "history", default: None, range: "absolute path of a CSV file", reload: Reload::Reconfigure,
        doc: "Job history CSV (columns user, model, batch, gpus, requested_time_s, iterations, elapsed_s and optionally gpu_type); site_factor/cellsched fits the iteration predictor on it in the background and ranks jobs without --dl-iters by the iterations it predicts." },
    ConfigKey { section: "declared", key: "policy", default: Some("\"limit\""), range: "\"limit\", \"demote\" or \"off\"", reload: Reload::Reconfigure,
        doc: "\"limit\": a job declaring --dl-iters gets a time limit of iterations x predicted seconds per iteration x slack + grace_s (or keeps its own shorter one), and users whose jobs run past their declared work x slack are distrusted; \"demote\": no limit, distrusted users' pending DL jobs get the stock site factor; \"off\": declarations are trusted as given." },
    ConfigKey { section: "declared", key: "slack", default: Some("3.0"), range: "1..=1000", reload: Reload::Reconfigure,
        doc: "How many times its predicted run time a job may take before it counts as overrunning (covers the estimator's error)." },
    ConfigKey { section: "declared", key: "grace_s", default: Some("1800.0"), range: "0..=2592000 seconds", reload: Reload::Reconfigure,
        doc: "Seconds added to a time limit set from a declaration (start-up, checkpoints)." },
    ConfigKey { section: "declared", key: "distrust_s", default: Some("604800.0"), range: "0..=31536000 seconds", reload: Reload::Reconfigure,
        doc: "Seconds a user stays distrusted after an overrun. Overruns are kept in StateSaveLocation (file cellsched-overruns), so a slurmctld restart forgives no one." },    ConfigKey { section: "deadline", key: "budget_gpu_hours", default: Some("200.0"), range: ">= 0 (0 = no limit)", reload: Reload::Reconfigure,
        doc: "GPU-hours of deadline jobs (declared iterations x predicted seconds per iteration x GPUs) a user may have ranked by deadline urgency per window_s; jobs beyond it are ranked as if they had no deadline." },
    ConfigKey { section: "deadline", key: "window_s", default: Some("604800.0"), range: "3600..=31536000 seconds", reload: Reload::Reconfigure,
        doc: "The window of budget_gpu_hours." },
    ConfigKey { section: "deadline", key: "miss_factor", default: Some("0.5"), range: ">= 0", reload: Reload::Reconfigure,
        doc: "A job finishing later than its deadline by more than this many times its predicted run time missed it by far." },
    ConfigKey { section: "deadline", key: "distrust_s", default: Some("604800.0"), range: "0..=31536000 seconds", reload: Reload::Reconfigure,
        doc: "Seconds a user loses deadline urgency after a deadline refused as infeasible at submit or missed by far. Grants and demotions are kept in StateSaveLocation (file cellsched-deadlines), so a slurmctld restart resets no budget." },
    ConfigKey { section: "privacy", key: "admin_comment", default: Some("\"full\""), range: "\"full\" or \"minimal\"", reload: Reload::OnChange,
        doc: "What a DL job's AdminComment holds for jobs submitted from then on. \"full\": the decision and the facts (model, batch, iterations, deadline). \"minimal\": the decision, the public facts and a private reference; model, batch, iterations and deadline go to the job's spank_job_env, which slurmctld shows to no client, and the plugins still rank, re-plan and check overruns by them. cellsched report then shows them to no one." },
    ConfigKey { section: "elastic", key: "enabled", default: Some("true"), range: "true or false", reload: Reload::OnChange,
        doc: "Reconfigure running --dl-elastic jobs at all; false leaves every running job alone (jobs without --dl-elastic are never touched either way)." },
    ConfigKey { section: "elastic", key: "interval_s", default: Some("60"), range: "1..=86400 seconds", reload: Reload::OnChange,
        doc: "Seconds between two reconfiguration decision passes." },
    ConfigKey { section: "elastic", key: "max_per_hour", default: Some("2"), range: "0..=60", reload: Reload::OnChange,
        doc: "At most this many reconfigurations of one job in any hour (reconfs_h in its record); 0 = never." },
    ConfigKey { section: "elastic", key: "min_run_s", default: Some("600"), range: "0..=604800 seconds", reload: Reload::OnChange,
        doc: "A job is reconfigured only after running this long since its last start or restart." },
    ConfigKey { section: "elastic", key: "grace_s", default: Some("120"), range: "0..=86400 seconds", reload: Reload::OnChange,
        doc: "Seconds between the checkpoint signal and the requeue; a job that ignores the signal is requeued when they are up (it is never cancelled)." },
    ConfigKey { section: "elastic", key: "restart_cost_s", default: Some("0.0"), range: "0..=86400 seconds", reload: Reload::OnChange,
        doc: "Seconds from a restart to the first iteration for jobs whose model's start was not measured (restart_s in the record: the profile DB's first_iter_s, plus reading the checkpoint); 0 = derived from the model: start_s, start_s_per_bparam per billion parameters, and its checkpoint (fp32 weights and optimizer state, 12 bytes per parameter with Adam) read at checkpoint_read_gbs." },
    ConfigKey { section: "elastic", key: "checkpoint_write_gbs", default: Some("0.59"), range: "> 0 GB/s", reload: Reload::OnChange,
        doc: "Checkpoint write rate of the cost model (the save after the signal, at most grace_s). Default: GPT-2 125M and 1.3B with AdamW on one H200 saved 16.8 GB in 28.5 s (bench/truth/h200-restart.csv)." },
    ConfigKey { section: "elastic", key: "checkpoint_read_gbs", default: Some("1.32"), range: "> 0 GB/s", reload: Reload::OnChange,
        doc: "Checkpoint read rate of the cost model (loading at restart). Default: the same runs loaded 16.8 GB in 12.8 s." },
    ConfigKey { section: "elastic", key: "start_s", default: Some("10.6"), range: "0..=86400 seconds", reload: Reload::OnChange,
        doc: "Start-to-first-iteration seconds of a restart besides loading the checkpoint and building the model (process, imports, CUDA, first iteration), for models the profiler did not measure (profile DB column first_iter_s). Default: the same runs' restart less loading, 12.2 s at 0.13B and 27.5 s at 1.28B parameters, at zero parameters." },
    ConfigKey { section: "elastic", key: "start_s_per_bparam", default: Some("13.3"), range: "0..=86400 seconds", reload: Reload::OnChange,
        doc: "Seconds per billion parameters a restart spends building and initialising the model on the host and copying it to the GPU, in the cost model. Default: the slope of the same two runs." },
    ConfigKey { section: "elastic", key: "min_gain", default: Some("2.0"), range: "0..=1000", reload: Reload::OnChange,
        doc: "A reconfiguration must save at least this many times its cost (save plus restart) in predicted completion time, summed over the jobs it affects." },
    ConfigKey { section: "elastic", key: "preempt_ratio", default: Some("0.5"), range: "0..=1 (0 = never preempt)", reload: Reload::OnChange,
        doc: "A-SRPT's preemptive rule: a running elastic job is preempted for a pending job only if that job's predicted run time is at most this share of the running job's predicted remaining time." },
    ConfigKey { section: "elastic", key: "grow_margin", default: Some("0.2"), range: "0..=1", reload: Reload::OnChange,
        doc: "A running elastic job grows only when the grow still saves min_gain times its cost with the new Cell's predicted iteration time this share longer (the estimator's error on Cells it has not measured; 0.2 is its median there). A grown job is not shrunk back for running slower than predicted, so the grow must not rest on a gain within that error." },
];

impl Config {
    /// Parses TOML text; `path` is used only in error messages.
    pub fn from_toml_str(text: &str, path: &str) -> Result<Config, CoreError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            CoreError::File { path: path.to_string(), line, msg: e.message().trim().to_string() }
        })?;
        // The key's earlier home; the new one wins when both are set.
        if let Some(v) = cfg.ordering.release_gres_select.take() {
            if key_line(text, "slurmctld", "release_gres_select").is_none() {
                cfg.slurmctld.release_gres_select = v;
            }
        }
        cfg.validate(path).map_err(|e| match e {
            // Range errors name `section.key`: point at the line that sets it.
            CoreError::File { path, line: None, msg } => {
                let line = msg.split_once(' ').and_then(|(k, _)| k.split_once('.')).and_then(|(sec, key)| key_line(text, sec, key));
                CoreError::File { path, line, msg }
            }
            e => e,
        })?;
        Ok(cfg)
    }

    /// Reads and parses the file at `path`, which must pass
    /// [`check_trusted_file`] (the plugins act on it as root).
    pub fn load(path: &Path) -> Result<Config, CoreError> {
        let shown = path.display().to_string();
        check_trusted_file(path)?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| CoreError::File { path: shown.clone(), line: None, msg: format!("cannot read: {e}") })?;
        Config::from_toml_str(&text, &shown)
    }

    /// Checks value ranges the type system does not.
    fn validate(&self, path: &str) -> Result<(), CoreError> {
        let bad = |msg: String| Err(CoreError::File { path: path.to_string(), line: None, msg });
        let o = &self.ordering;
        if !(o.aging_bound_s.is_finite() && o.aging_bound_s > 0.0) {
            return bad(format!("ordering.aging_bound_s = {} must be a positive number of seconds", o.aging_bound_s));
        }
        if !(o.aging_factor.is_finite() && o.aging_factor >= 0.0) {
            return bad(format!("ordering.aging_factor = {} must be a number >= 0 (0 = aging_bound_s alone)", o.aging_factor));
        }
        if !(o.deadline_slack_factor.is_finite() && o.deadline_slack_factor >= 0.0) {
            return bad(format!("ordering.deadline_slack_factor = {} must be a number >= 0", o.deadline_slack_factor));
        }
        if o.site_factor_max == 0 || o.site_factor_max > i32::MAX as u32 {
            return bad(format!("ordering.site_factor_max = {} must be in 1..={}", o.site_factor_max, i32::MAX));
        }
        if !(o.default_remaining_s.is_finite() && o.default_remaining_s > 0.0) {
            return bad(format!(
                "ordering.default_remaining_s = {} must be a positive number of seconds",
                o.default_remaining_s
            ));
        }
        if let Err(m) = self.declared.check() {
            return bad(m);
        }
        if let Err(m) = self.deadline.check() {
            return bad(m);
        }
        if let Err(m) = self.elastic.check() {
            return bad(m);
        }
        if o.rank_interval_s == 0 || o.rank_interval_s > 3600 {
            return bad(format!("ordering.rank_interval_s = {} must be in 1..=3600 seconds", o.rank_interval_s));
        }
        let p = &self.placement;
        if p.replan_interval_s == 0 {
            return bad("placement.replan_interval_s = 0 must be at least 1 second".into());
        }
        if !(p.replan_min_gain.is_finite() && (0.0..=1.0).contains(&p.replan_min_gain)) {
            return bad(format!("placement.replan_min_gain = {} must be a number in 0..=1", p.replan_min_gain));
        }
        if !(p.replan_max_slowdown.is_finite() && p.replan_max_slowdown >= 1.0) {
            return bad(format!("placement.replan_max_slowdown = {} must be a number >= 1", p.replan_max_slowdown));
        }
        if p.max_gpus == 0 || p.max_gpus > crate::cell::MAX_CELL_GPUS {
            return bad(format!("placement.max_gpus = {} must be in 1..={}", p.max_gpus, crate::cell::MAX_CELL_GPUS));
        }
        if !(p.max_gpu_factor.is_finite() && p.max_gpu_factor >= 1.0) {
            return bad(format!("placement.max_gpu_factor = {} must be a number >= 1", p.max_gpu_factor));
        }
        if !(0.0..=1.0).contains(&p.min_marginal_efficiency) {
            return bad(format!("placement.min_marginal_efficiency = {} must be in 0..=1", p.min_marginal_efficiency));
        }
        if let Some(t) = p.allowed_gpu_types.iter().find(|t| crate::Cell::new(t, 1, 1).is_err()) {
            return bad(format!("placement.allowed_gpu_types entry '{t}' is not a GPU type name (e.g. a100)"));
        }
        Ok(())
    }
}

/// 1-based line of `key = ...` inside table `[section]` of TOML `text`.
fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if let Some(h) = t.strip_prefix('[').and_then(|h| h.split(']').next()) {
            current = h.trim().to_string();
        } else if current == section {
            if let Some(rest) = t.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

/// Where to read the config from: `plugin_arg` (a path, or `config=PATH`
/// among comma-separated plugin parameters), else `env_value` (the
/// `CELLSCHED_CONFIG` variable), else `cellsched.toml` beside `slurm_conf`
/// (the running slurm.conf's path), else [`DEFAULT_CONFIG_PATH`].
pub fn resolve_config_path(plugin_arg: Option<&str>, env_value: Option<&str>, slurm_conf: Option<&str>) -> PathBuf {
    let nonempty = |s: Option<&str>| s.map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    if let Some(arg) = nonempty(plugin_arg) {
        let from_params = arg.split(',').find_map(|kv| kv.trim().strip_prefix("config=").map(str::to_string));
        match from_params {
            Some(p) if !p.is_empty() => return PathBuf::from(p),
            Some(_) => {}
            None if !arg.contains('=') => return PathBuf::from(arg),
            None => {}
        }
    }
    if let Some(p) = nonempty(env_value) {
        return PathBuf::from(p);
    }
    if let Some(conf) = nonempty(slurm_conf) {
        if let Some(dir) = Path::new(&conf).parent().filter(|d| !d.as_os_str().is_empty()) {
            return dir.join(CONFIG_FILE_NAME);
        }
    }
    PathBuf::from(DEFAULT_CONFIG_PATH)
}

/// The owners a file the plugins trust may have: root and the user this
/// process runs as (slurmctld's `SlurmUser`, or the admin running a tool).
/// The effective uid is the owner of `/proc/self`; without procfs only root.
pub fn trusted_owners() -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let mut uids = vec![0];
    if let Ok(m) = std::fs::metadata("/proc/self") {
        if m.uid() != 0 {
            uids.push(m.uid());
        }
    }
    uids
}

/// Checks that nobody but a trusted owner ([`trusted_owners`]) can change
/// the file at `path` (cellsched.toml, the GPU catalog, the profile DB, the
/// job history): the plugins run as root and act on what it says.
///
/// The file, after following symlinks, must be a regular file owned by a
/// trusted owner and writable by no one else (no write bit for others; a
/// group write bit only for group 0). Every directory above it must be
/// owned by a trusted owner and writable by no one else, except a
/// directory with the sticky bit (like `/tmp`): there others cannot
/// replace or rename a file they do not own, so the file's own owner check
/// suffices. The error names the path, the offending owner or mode and the fix.
pub fn check_trusted_file(path: &Path) -> Result<(), CoreError> {
    check_trusted_file_for(path, &trusted_owners())
}

/// [`check_trusted_file`] with an explicit list of trusted owner uids.
pub fn check_trusted_file_for(path: &Path, owners: &[u32]) -> Result<(), CoreError> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display().to_string();
    let err = |msg: String| CoreError::File { path: shown.clone(), line: None, msg };
    let real = std::fs::canonicalize(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let m = std::fs::metadata(&real).map_err(|e| err(format!("cannot read: {e}")))?;
    if !m.is_file() {
        return Err(err(format!("{} is not a regular file", real.display())));
    }
    let fix = "make it owned by root (or the SlurmUser) and writable only by its owner, in directories only they can write";
    let untrusted = |what: &str, p: &Path, why: String| err(format!("not trusted: {what} {} {why}; {fix}", p.display()));
    if !owners.contains(&m.uid()) {
        return Err(untrusted("the file", &real, format!("is owned by uid {}", m.uid())));
    }
    if m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && m.gid() != 0) {
        return Err(untrusted("the file", &real, format!("is writable by others (mode {:04o}, group {})", m.mode() & 0o7777, m.gid())));
    }
    for dir in real.ancestors().skip(1) {
        let d = std::fs::metadata(dir).map_err(|e| err(format!("cannot inspect {}: {e}", dir.display())))?;
        if !owners.contains(&d.uid()) {
            return Err(untrusted("its directory", dir, format!("is owned by uid {}", d.uid())));
        }
        let others_write = d.mode() & 0o002 != 0 || (d.mode() & 0o020 != 0 && d.gid() != 0);
        if others_write && d.mode() & 0o1000 == 0 {
            return Err(untrusted(
                "its directory",
                dir,
                format!("is writable by others without the sticky bit (mode {:04o}, group {})", d.mode() & 0o7777, d.gid()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::from_toml_str("", "x.toml").unwrap();
        assert_eq!(c, Config::default());
        assert!(c.placement.enabled && c.placement.replan && c.ordering.enabled);
        assert!(c.placement.allows("anything"));
    }

    #[test]
    fn full_file_parses() {
        let text = r#"
[ordering]
aging_bound_s = 600
aging_factor = 0
rank_by = "time"
site_factor_max = 5000
release_gres_select = true
[placement]
replan = false
replan_interval_s = 5
max_gpus = 8
allowed_gpu_types = ["A100", "v100"]
[estimator]
profile_db = "/var/lib/cellsched/p.csv"
"#;
        let c = Config::from_toml_str(text, "x.toml").unwrap();
        assert_eq!(c.ordering.aging_bound_s, 600.0);
        assert_eq!((c.ordering.aging_factor, c.ordering.rank_by), (0.0, crate::asrpt::RankBy::Time));
        assert_eq!(c.ordering.site_factor_max, 5000);
        // Read from its earlier home, [ordering]; [slurmctld] wins when both set it.
        assert!(c.slurmctld.release_gres_select && !SlurmctldConfig::default().release_gres_select);
        assert_eq!(c.ordering.release_gres_select, None);
        let both = Config::from_toml_str("[ordering]\nrelease_gres_select = true\n[slurmctld]\nrelease_gres_select = false\n", "y.toml").unwrap();
        assert!(!both.slurmctld.release_gres_select);
        assert!(Config::from_toml_str("[slurmctld]\nrelease_gres_select = true\n", "z.toml").unwrap().slurmctld.release_gres_select);
        assert!(!c.placement.replan);
        assert_eq!(c.placement.replan_interval_s, 5);
        assert_eq!(c.placement.max_gpus, 8);
        assert!(c.placement.allows("a100") && c.placement.allows("V100") && !c.placement.allows("a10"));
        assert_eq!(c.estimator.profile_db.as_deref(), Some(Path::new("/var/lib/cellsched/p.csv")));
        assert_eq!(c.estimator.history, None);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = Config::from_toml_str("[placement]\nmax_gpu = 4\n", "/etc/slurm/cellsched.toml").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("/etc/slurm/cellsched.toml:2") && s.contains("max_gpu"), "{s}");

        let e = Config::from_toml_str("[ordering]\naging_bound_s = \"long\"\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("c.toml:2"), "{e}");

        let e = Config::from_toml_str("[placement\n", "c.toml").unwrap_err();
        assert!(matches!(e, CoreError::File { line: Some(1), .. }), "{e:?}");

        let e = Config::from_toml_str("[placement]\nreplan = true\nreplan_interval_s = 0\n", "c.toml").unwrap_err();
        assert!(matches!(e, CoreError::File { line: Some(3), .. }), "{e:?}");
        let e = Config::from_toml_str("[ordering]\n[placement]\n# x\nmax_gpus   = 0\n", "c.toml").unwrap_err();
        assert!(e.to_string().starts_with("c.toml:4: placement.max_gpus = 0"), "range errors name the line: {e}");
        for (text, key) in [
            ("[placement]\nmax_gpus = 0", "max_gpus"),
            ("[placement]\nreplan_interval_s = 0", "replan_interval_s"),
            ("[placement]\nreplan_max_slowdown = 0.5", "replan_max_slowdown"),
            ("[placement]\nreplan_min_gain = 1.5", "replan_min_gain"),
            ("[placement]\nmax_gpu_factor = 0.5", "max_gpu_factor"),
            ("[placement]\nmin_marginal_efficiency = 1.5", "min_marginal_efficiency"),
            ("[placement]\nallowed_gpu_types = [\"a 100\"]", "a 100"),
            ("[ordering]\naging_bound_s = -1", "aging_bound_s"),
            ("[ordering]\nsite_factor_max = 0", "site_factor_max"),
            ("[ordering]\naging_factor = -2", "aging_factor"),
            ("[ordering]\ndeadline_slack_factor = -1", "deadline_slack_factor"),
            ("[ordering]\nrank_by = \"size\"", "size"),
            ("[elastic]\ninterval_s = 0", "interval_s"),
            ("[elastic]\nmax_per_hour = 61", "max_per_hour"),
            ("[elastic]\nmin_gain = -1", "min_gain"),
            ("[elastic]\npreempt_ratio = 1.5", "preempt_ratio"),
            ("[elastic]\ngrow_margin = 1.5", "grow_margin"),
            ("[elastic]\ncheckpoint_write_gbs = 0", "checkpoint_write_gbs"),
            ("[elastic]\nrestart_cost_s = -5", "restart_cost_s"),
            ("[elastic]\nsignal = 1", "signal"),
        ] {
            let e = Config::from_toml_str(text, "c.toml").unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("c.toml"), "{text}: {e}");
        }
    }

    #[test]
    fn shipped_example_parses() {
        let c = Config::from_toml_str(include_str!("../../etc/cellsched.toml"), "etc/cellsched.toml").unwrap();
        assert_eq!(c, Config::default(), "etc/cellsched.toml should document the defaults");
    }

    /// `KEYS` and `Config` agree: every key of the table is accepted, its
    /// default is `Config::default()`'s, and every field `Config` serialises
    /// is in the table.
    #[test]
    fn key_table_matches_the_config() {
        let mut text = String::new();
        for (section, _) in SECTIONS {
            text.push_str(&format!("[{section}]\n"));
            for k in KEYS.iter().filter(|k| k.section == *section) {
                match k.default {
                    Some(d) => text.push_str(&format!("{} = {d}\n", k.key)),
                    None => {
                        let one = format!("[{section}]\n{} = \"/nonexistent/x\"\n", k.key);
                        Config::from_toml_str(&one, "t.toml").unwrap_or_else(|e| panic!("{section}.{}: {e}", k.key));
                    }
                }
            }
        }
        assert_eq!(Config::from_toml_str(&text, "keys.toml").unwrap(), Config::default(), "the table's defaults:\n{text}");
        assert!(KEYS.iter().all(|k| SECTIONS.iter().any(|(s, _)| *s == k.section)), "a key of an unlisted section");
        let ser: toml::Value = toml::Value::try_from(Config::default()).unwrap();
        let mut seen = 0;
        for (section, table) in ser.as_table().unwrap() {
            for key in table.as_table().unwrap().keys() {
                assert!(KEYS.iter().any(|k| k.section == section && k.key == key), "{section}.{key} is missing from config::KEYS");
                seen += 1;
            }
        }
        assert_eq!(seen, KEYS.iter().filter(|k| k.default.is_some()).count(), "keys with defaults");
        let mut names: Vec<_> = KEYS.iter().map(|k| (k.section, k.key)).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KEYS.len(), "a key is listed twice");
    }

    /// The shipped example names every key (set, or commented out for the
    /// optional paths), in its own table.
    #[test]
    fn shipped_example_has_every_key() {
        let text = include_str!("../../etc/cellsched.toml");
        for k in KEYS {
            let want = if k.default.is_some() { k.key.to_string() } else { format!("# {}", k.key) };
            assert!(
                key_line(text, k.section, &want).is_some(),
                "etc/cellsched.toml lacks `{}{} = ...` in [{}]",
                if k.default.is_some() { "" } else { "# " },
                k.key,
                k.section
            );
        }
    }

    #[test]
    fn load_reports_missing_file() {
        let e = Config::load(Path::new("/nonexistent/cellsched.toml")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/cellsched.toml") && e.contains("cannot read"), "{e}");
    }

    #[test]
    fn load_reads_a_file() {
        let dir = std::env::temp_dir().join(format!("cellsched-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.toml");
        std::fs::write(&p, "[placement]\nmax_gpus = 4\n").unwrap();
        assert_eq!(Config::load(&p).unwrap().placement.max_gpus, 4);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Issue 31 item 10: a world-writable file, a file owned by an
    /// untrusted user, and a file in a world-writable directory without the
    /// sticky bit are refused by name, by the check and by `Config::load`.
    #[test]
    fn untrusted_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cellsched-trust-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = dir.join("c.toml");
        std::fs::write(&p, "[placement]\nmax_gpus = 4\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let me = trusted_owners();
        check_trusted_file_for(&p, &me).unwrap();
        assert_eq!(Config::load(&p).unwrap().placement.max_gpus, 4);
        // Owned by someone not trusted (the check's owner list leaves this process's uid out).
        let e = check_trusted_file_for(&p, &[u32::MAX]).unwrap_err().to_string();
        assert!(e.contains("not trusted") && e.contains("is owned by uid"), "{e}");
        // World-writable file.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Config::load(&p).unwrap_err().to_string();
        assert!(e.contains("c.toml") && e.contains("writable by others (mode 0666"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        // World-writable directory: refused without the sticky bit, accepted with it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Config::load(&p).unwrap_err().to_string();
        assert!(e.contains("its directory") && e.contains("without the sticky bit"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_trusted_file_for(&p, &me).unwrap();
        // A symlink is judged by its target.
        let link = dir.join("link.toml");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        check_trusted_file_for(&link, &me).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o646)).unwrap();
        assert!(check_trusted_file_for(&link, &me).is_err());
        // Not a regular file.
        let e = check_trusted_file_for(&dir, &me).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn path_resolution_order() {
        let r = resolve_config_path;
        assert_eq!(r(Some("/a.toml"), Some("/b.toml"), Some("/etc/x/slurm.conf")), PathBuf::from("/a.toml"));
        assert_eq!(r(Some("foo=1,config=/c.toml"), None, None), PathBuf::from("/c.toml"));
        assert_eq!(r(Some("foo=1"), Some("/b.toml"), None), PathBuf::from("/b.toml"));
        assert_eq!(r(Some(" "), Some("/b.toml"), None), PathBuf::from("/b.toml"));
        assert_eq!(r(None, None, Some("/tmp/cs/etc/slurm.conf")), PathBuf::from("/tmp/cs/etc/cellsched.toml"));
        assert_eq!(r(None, Some(""), Some("slurm.conf")), PathBuf::from(DEFAULT_CONFIG_PATH));
        assert_eq!(r(None, None, None), PathBuf::from(DEFAULT_CONFIG_PATH));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// Any cellsched.toml text is loaded or refused with an error naming
        /// the file: never a panic.
        #[test]
        fn config_parser_never_panics(
            near in "(\\[(ordering|placement|estimator)\\]\n|[a-z_]{1,20} = (-?[0-9.e]{1,8}|true|\"[a-z0-9/.]{0,10}\"|\\[\"[a-z0-9]{0,5}\"\\])\n){0,8}",
            raw in proptest::prelude::any::<String>(),
        ) {
            for t in [near.as_str(), raw.as_str()] {
                if let Err(e) = Config::from_toml_str(t, "fuzz.toml") {
                    proptest::prop_assert!(e.to_string().contains("fuzz.toml"));
                }
            }
        }
    }
}
