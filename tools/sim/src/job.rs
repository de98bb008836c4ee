//! A job's simulation state: the trace row, where it is in its life, its
//! current run (allocation, timing) and what the scheduler knows of it.
use crate::cluster::{Allocation, Shape};
use crate::progress_model::SpeedProfile;
use crate::trace::TraceJob;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not yet submitted.
    Future,
    /// Waiting in the queue.
    Pending,
    /// Holding GPUs.
    Running,
    /// Done.
    Finished,
    /// Can never run under the policy on this cluster (reported as unfinished).
    Never,
}

/// How the current run of a job is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTiming {
    /// The policy's prediction (oracle mode) or a measured truth point.
    Measured,
    /// Truth lacks the Cell: the fallback estimate.
    Fallback,
    /// Truth says the Cell does not fit: the run fails after its start-up cost.
    NoFit,
}

/// A job's simulation state.
#[derive(Debug, Clone)]
pub struct Job {
    /// The trace row.
    pub spec: TraceJob,
    /// Index of the requested GPU type in the cluster, if the cluster has it.
    pub req_type: Option<usize>,
    /// Lifecycle state.
    pub status: Status,
    /// Progress in [0, 1] at the last stop or start.
    pub progress: f64,
    /// Speedup profile (layer freezing) applied to this job.
    pub speed: SpeedProfile,
    /// Current allocation while running.
    pub alloc: Option<Allocation>,
    /// Shape of the last run that ended (for per-job reports).
    pub last_shape: Option<Shape>,
    /// Seconds per (unfrozen) iteration of the current run.
    pub iter_s: f64,
    /// When the current run got its GPUs.
    pub alloc_time: f64,
    /// When the current run starts computing (after any restart overhead).
    pub run_start: f64,
    /// First time the job got GPUs.
    pub first_start: Option<f64>,
    /// Completion time.
    pub finish: Option<f64>,
    /// GPU-seconds received before the current run.
    pub attained_gpu_s: f64,
    /// Times the job was preempted.
    pub preemptions: u32,
    /// When the current run will complete (valid while running).
    pub expected_end: f64,
    /// Policy scratch: a planned (type, gpus, nodes) made at submission.
    pub planned: Option<(String, u32, u32)>,
    /// Iterations the scheduler knows (declared, maybe noisy).
    pub known_iters: f64,
    /// The policy's predicted seconds per iteration for the current run.
    pub pred_iter_s: f64,
    /// When the scheduler's host expects the current run to end: its
    /// prediction, or what the policy sets (`SimView::set_forecast_end`,
    /// e.g. the end of the run's time limit, as Slurm's backfill sees it).
    pub pred_end: f64,
    /// The knowledge lacks the job's model: run as stock Slurm would.
    pub stock: bool,
    /// How the current run is timed.
    pub timing: RunTiming,
    /// The job must run on its requested type and count (a Cell the user
    /// pinned): Cell-searching policies do not choose for it.
    pub pinned: bool,
    /// Reconfigurations of the job (checkpoint signal, requeue, restart).
    pub reconfs: u32,
    /// Seconds lost to reconfigurations: checkpoint saves and restarts
    /// (GPUs held, no progress).
    pub reconf_lost_s: f64,
    /// Restart cost of the job's next start (set by a reconfiguration;
    /// replaces the preemption overhead once).
    pub restart_overhead_s: Option<f64>,
    /// Run generation: events of an earlier run of the job are stale.
    pub(crate) gen: u32,
}

impl Job {
    /// Iterations as the scheduler knows them (what policies plan with).
    pub fn iters(&self) -> f64 {
        self.known_iters
    }
    /// True iterations (the trace's count; only the clock uses it).
    pub fn true_iters(&self) -> f64 {
        self.spec.num_iteration as f64
    }
    /// GPUs held now (0 unless running).
    pub fn gpus(&self) -> u32 {
        self.alloc.as_ref().map_or(0, |a| a.shape.gpus())
    }
}
