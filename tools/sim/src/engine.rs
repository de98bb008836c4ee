//! The discrete-event engine: arrivals, completions and wake-ups in an
//! O(log n) binary-heap event queue; after each batch of same-time events the
//! policy runs one scheduling pass against the live cluster state.
//!
//! Determinism: there are no random choices inside the engine; events at
//! the same time are ordered by insertion sequence, jobs by trace order
//! (submission time, then file order), nodes by index. Same inputs and seed
//! give identical results.
use crate::cluster::{Allocation, ClusterState, Shape};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::progress_model::SpeedProfile;
use crate::times::TimeCache;
use crate::trace::TraceJob;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

/// Engine settings shared by all policies.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed recorded with the results (the engine itself draws nothing).
    pub seed: u64,
    /// Seconds a preempted job loses on restart (checkpoint reload), GPUs held.
    pub preempt_overhead_s: f64,
    /// Extra scheduling passes every this many seconds while jobs wait.
    pub replan_interval_s: Option<f64>,
    /// Stop the clock here; jobs not done count as unfinished.
    pub max_time_s: Option<f64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { seed: 0, preempt_overhead_s: 30.0, replan_interval_s: None, max_time_s: None }
    }
}

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
    gen: u32,
}

impl Job {
    /// Iterations of the trace.
    pub fn iters(&self) -> f64 {
        self.spec.num_iteration as f64
    }
    /// GPUs held now (0 unless running).
    pub fn gpus(&self) -> u32 {
        self.alloc.as_ref().map_or(0, |a| a.shape.gpus())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EvKind {
    Arrival(usize),
    Finish(usize, u32),
    Wake,
}

#[derive(Debug, Clone, Copy)]
struct Ev {
    t: f64,
    seq: u64,
    kind: EvKind,
}
impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        self.t.total_cmp(&o.t).then(self.seq.cmp(&o.seq))
    }
}

/// The simulation state a policy schedules against.
pub struct Sim<'t> {
    cfg: SimConfig,
    cluster: ClusterState,
    jobs: Vec<Job>,
    pending: BTreeSet<usize>,
    running: BTreeSet<usize>,
    events: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    now: f64,
    times: &'t mut TimeCache,
    busy_gpu_s: Vec<f64>,
    replans: u64,
    preemptions: u64,
    events_done: u64,
    next_wake: Option<f64>,
    arrivals_left: usize,
    /// Per GPU type: running jobs by expected end (f64 bits of a non-negative time order like the time).
    ends: Vec<BTreeSet<(u64, usize)>>,
}

impl<'t> Sim<'t> {
    /// A simulation of `jobs` (sorted by submission time) on `cluster`.
    pub fn new(cfg: SimConfig, cluster: ClusterState, jobs: &[TraceJob], times: &'t mut TimeCache) -> Self {
        let ntypes = cluster.types.len();
        let jobs: Vec<Job> = jobs
            .iter()
            .map(|s| Job {
                req_type: cluster.type_index(&s.gpu_type),
                spec: s.clone(),
                status: Status::Future,
                progress: 0.0,
                speed: SpeedProfile::none(),
                alloc: None,
                iter_s: 0.0,
                alloc_time: 0.0,
                run_start: 0.0,
                first_start: None,
                finish: None,
                attained_gpu_s: 0.0,
                preemptions: 0,
                expected_end: 0.0,
                planned: None,
                gen: 0,
            })
            .collect();
        let mut sim = Sim {
            cfg,
            cluster,
            pending: BTreeSet::new(),
            running: BTreeSet::new(),
            events: BinaryHeap::with_capacity(jobs.len() * 2),
            seq: 0,
            now: 0.0,
            times,
            busy_gpu_s: vec![0.0; ntypes],
            replans: 0,
            preemptions: 0,
            events_done: 0,
            next_wake: None,
            arrivals_left: jobs.len(),
            ends: vec![BTreeSet::new(); ntypes],
            jobs,
        };
        for i in 0..sim.jobs.len() {
            let t = sim.jobs[i].spec.submission_time;
            sim.push(t, EvKind::Arrival(i));
        }
        sim
    }

    fn push(&mut self, t: f64, kind: EvKind) {
        self.seq += 1;
        self.events.push(Reverse(Ev { t, seq: self.seq, kind }));
    }

    /// Current simulated time, seconds.
    pub fn now(&self) -> f64 {
        self.now
    }
    /// The live cluster.
    pub fn cluster(&self) -> &ClusterState {
        &self.cluster
    }
    /// All jobs, in trace order.
    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }
    /// One job.
    pub fn job(&self, i: usize) -> &Job {
        &self.jobs[i]
    }
    /// Mutable access for policy scratch fields (e.g. [`Job::planned`]).
    pub fn job_mut(&mut self, i: usize) -> &mut Job {
        &mut self.jobs[i]
    }
    /// Waiting jobs in trace order.
    pub fn pending(&self) -> impl Iterator<Item = usize> + '_ {
        self.pending.iter().copied()
    }
    /// Number of waiting jobs.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
    /// Running jobs in trace order.
    pub fn running(&self) -> impl Iterator<Item = usize> + '_ {
        self.running.iter().copied()
    }
    /// The (cached) iteration-time source.
    pub fn times(&mut self) -> &mut TimeCache {
        self.times
    }
    /// Counts one re-plan (a pending job's Cell changed).
    pub fn count_replan(&mut self) {
        self.replans += 1;
    }
    /// Asks for a scheduling pass at time `t` (> now).
    pub fn wake_at(&mut self, t: f64) {
        if t > self.now && self.next_wake.map_or(true, |w| t < w || w <= self.now) {
            self.next_wake = Some(t);
            self.push(t, EvKind::Wake);
        }
    }

    /// Progress of job `i` now, in [0, 1].
    pub fn progress_now(&self, i: usize) -> f64 {
        let j = &self.jobs[i];
        if j.status != Status::Running || self.now <= j.run_start {
            return j.progress;
        }
        j.speed.progress_after(j.progress, self.now - j.run_start, j.iters(), j.iter_s)
    }

    /// GPU-seconds job `i` has received up to now (Tiresias' attained service).
    pub fn attained_gpu_s(&self, i: usize) -> f64 {
        let j = &self.jobs[i];
        j.attained_gpu_s + if j.status == Status::Running { j.gpus() as f64 * (self.now - j.alloc_time) } else { 0.0 }
    }

    /// Seconds job `i` still needs at `iter_s` per iteration from its current progress.
    pub fn remaining_s(&self, i: usize, iter_s: f64) -> f64 {
        let j = &self.jobs[i];
        j.speed.time_to_finish(self.progress_now(i), j.iters(), iter_s)
    }

    /// Starts pending job `i` on `shape` at `iter_s` seconds per iteration.
    /// Returns false (changing nothing) if the shape does not fit now.
    pub fn start(&mut self, i: usize, shape: Shape, iter_s: f64) -> bool {
        debug_assert_eq!(self.jobs[i].status, Status::Pending);
        let Some(alloc) = self.cluster.allocate(shape) else { return false };
        let now = self.now;
        let overhead = if self.jobs[i].preemptions > 0 { self.cfg.preempt_overhead_s } else { 0.0 };
        let j = &mut self.jobs[i];
        j.status = Status::Running;
        j.alloc = Some(alloc);
        j.iter_s = iter_s;
        j.alloc_time = now;
        j.run_start = now + overhead;
        j.first_start.get_or_insert(now);
        j.gen += 1;
        let dur = overhead + j.speed.time_to_finish(j.progress, j.iters(), iter_s);
        let gen = j.gen;
        j.expected_end = now + dur;
        let t = self.cluster.groups[shape.group].type_idx;
        self.ends[t].insert(((now + dur).max(0.0).to_bits(), i));
        self.pending.remove(&i);
        self.running.insert(i);
        self.push(now + dur, EvKind::Finish(i, gen));
        true
    }

    /// Preempts running job `i`: it keeps its progress and waits again.
    pub fn preempt(&mut self, i: usize) {
        debug_assert_eq!(self.jobs[i].status, Status::Running);
        let p = self.progress_now(i);
        self.stop(i);
        let j = &mut self.jobs[i];
        j.progress = p;
        j.status = Status::Pending;
        j.preemptions += 1;
        j.gen += 1;
        self.preemptions += 1;
        self.pending.insert(i);
    }

    fn stop(&mut self, i: usize) {
        let now = self.now;
        let j = &mut self.jobs[i];
        let a = j.alloc.take().expect("running job has an allocation");
        let gpu_s = a.shape.gpus() as f64 * (now - j.alloc_time);
        j.attained_gpu_s += gpu_s;
        let t = self.cluster.groups[a.shape.group].type_idx;
        self.busy_gpu_s[t] += gpu_s;
        self.ends[t].remove(&(j.expected_end.max(0.0).to_bits(), i));
        self.cluster.release(&a);
        self.running.remove(&i);
    }

    /// Runs to completion (or `max_time_s`) under `policy`; `progress` is
    /// called now and then with (jobs arrived, jobs total).
    pub fn run(&mut self, policy: &mut dyn Policy, mut progress: Option<&mut dyn FnMut(u64, u64)>) -> Metrics {
        let total = self.jobs.len() as u64;
        while let Some(Reverse(ev)) = self.events.pop() {
            if self.cfg.max_time_s.is_some_and(|m| ev.t > m) {
                break;
            }
            self.now = ev.t;
            let mut batch = vec![ev];
            while let Some(Reverse(next)) = self.events.peek() {
                if next.t != self.now {
                    break;
                }
                batch.push(self.events.pop().unwrap().0);
            }
            let mut changed = false;
            for ev in batch {
                self.events_done += 1;
                match ev.kind {
                    EvKind::Arrival(i) => {
                        self.arrivals_left -= 1;
                        self.jobs[i].status = Status::Pending;
                        if policy.admissible(self, i) {
                            self.pending.insert(i);
                            policy.on_arrival(self, i);
                            changed = true;
                        } else {
                            self.jobs[i].status = Status::Never;
                        }
                        if let Some(cb) = progress.as_deref_mut() {
                            if self.arrivals_left % 1024 == 0 {
                                cb(total - self.arrivals_left as u64, total);
                            }
                        }
                    }
                    EvKind::Finish(i, gen) => {
                        if self.jobs[i].gen == gen && self.jobs[i].status == Status::Running {
                            self.stop(i);
                            let j = &mut self.jobs[i];
                            j.status = Status::Finished;
                            j.progress = 1.0;
                            j.finish = Some(self.now);
                            changed = true;
                        }
                    }
                    EvKind::Wake => {
                        if self.next_wake == Some(self.now) {
                            self.next_wake = None;
                        }
                        changed = true;
                    }
                }
            }
            if changed && !self.pending.is_empty() {
                policy.schedule(self);
            }
            if let Some(dt) = self.cfg.replan_interval_s {
                let can_change = !self.running.is_empty() || self.arrivals_left > 0;
                if !self.pending.is_empty() && can_change && self.next_wake.is_none() {
                    self.wake_at(self.now + dt);
                }
            }
        }
        if let Some(cb) = progress.as_deref_mut() {
            cb(total, total);
        }
        Metrics::collect(self, policy.name())
    }

    /// Running jobs on GPU type `t` as (expected end, GPUs), earliest first.
    pub fn running_ends(&self, t: usize) -> impl Iterator<Item = (f64, u32)> + '_ {
        self.ends[t].iter().map(|&(b, i)| (f64::from_bits(b), self.jobs[i].gpus()))
    }

    /// Busy GPU-seconds per type so far.
    pub fn busy_gpu_s(&self) -> &[f64] {
        &self.busy_gpu_s
    }
    /// Re-plans counted so far.
    pub fn replans(&self) -> u64 {
        self.replans
    }
    /// Preemptions so far.
    pub fn preemptions(&self) -> u64 {
        self.preemptions
    }
    /// Events processed so far.
    pub fn events_done(&self) -> u64 {
        self.events_done
    }
    /// The engine settings.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }
}
