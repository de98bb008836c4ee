//! Running the replay on the live cluster, one mode after the other.
//!
//! Per mode: bring the cluster up with (cellsched) or without (stock) the
//! plugins, wait for an empty queue, submit each job at its compressed
//! submission time, poll `squeue` until every job ended (cancelling jobs
//! stuck with a reason that never clears, and everything left at the mode's
//! timeout), then read the jobs back from `sacct`. The cluster is brought
//! down at the end (also after an error or Ctrl-C) unless asked to stay up.
use crate::error::ReplayError;
use crate::interrupt;
use crate::results::{ModeResult, Problem};
use crate::slurm::{never_runnable, Slurm, TERMINAL_STATES};
use crate::workload::{sbatch_args, Mode, ReplayJob, Settings};
use cellsched_devcluster::{Cluster, LocalClusterSpec};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How the live part runs.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The cluster (directory, ports, node groups); plugins are set per mode.
    pub spec: LocalClusterSpec,
    /// Real seconds a mode may take from its first submission; what is left
    /// then is cancelled and reported.
    pub timeout_s: f64,
    /// Seconds between `squeue` polls.
    pub poll_s: f64,
    /// Seconds to wait for foreign jobs to leave the queue before a mode.
    pub queue_wait_s: f64,
    /// Leave the cluster up at the end.
    pub keep_up: bool,
}

/// Progress lines go here (the CLI prints them to stderr).
pub type Sink<'a> = &'a mut dyn FnMut(&str);

/// Runs every mode in order and returns their results; the cluster is
/// brought down afterwards unless `opts.keep_up`.
pub fn run_modes(jobs: &[ReplayJob], modes: &[Mode], s: &Settings, opts: &LiveOptions, sink: Sink) -> Result<Vec<ModeResult>, ReplayError> {
    s.validate()?;
    std::fs::create_dir_all(&s.out_dir).map_err(|error| ReplayError::Io { path: s.out_dir.display().to_string(), error })?;
    let mut results = Vec::new();
    let mut outcome = Ok(());
    for &mode in modes {
        match run_mode(jobs, mode, s, opts, sink) {
            Ok(r) => results.push(r),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if !opts.keep_up {
        sink("bringing the cluster down");
        match Cluster::open(&opts.spec).and_then(|c| c.down(cellsched_devcluster::JobPolicy::Cancel)) {
            Ok(_) => {}
            Err(e) if outcome.is_ok() => outcome = Err(e.into()),
            Err(e) => sink(&format!("warning: bringing the cluster down failed too: {e}")),
        }
    }
    outcome.map(|_| results)
}

/// The spec of `mode`: plugins on for cellsched and elastic.
pub fn spec_for(base: &LocalClusterSpec, mode: Mode) -> LocalClusterSpec {
    let mut spec = base.clone();
    spec.with_plugins = mode.with_plugins();
    spec
}

fn up(mode: Mode, opts: &LiveOptions, sink: Sink) -> Result<Cluster, ReplayError> {
    let spec = spec_for(&opts.spec, mode);
    let t = Instant::now();
    sink(&format!("[{mode}] cluster up at {} ({})", spec.dir.display(), if spec.with_plugins { "with plugins" } else { "stock" }));
    let c = Cluster::up(&spec)?;
    if mode.with_plugins() && !(c.plugins.job_submit && c.plugins.spank) {
        return Err(ReplayError::invalid(
            "cellsched mode",
            format!("plugins loaded: [{}]", c.plugins.names().join(", ")),
            format!(
                "job_submit/cellsched and spank_cellsched.so built in {}: run `cargo build --release -p site_factor_cellsched -p job_submit_cellsched -p spank_cellsched`",
                spec.plugin_build_dir.display()
            ),
        ));
    }
    sink(&format!("[{mode}] cluster ready in {:.1} s; plugins: [{}]", t.elapsed().as_secs_f64(), c.plugins.names().join(", ")));
    Ok(c)
}

/// Waits until slurmctld holds no unfinished job (ours were cancelled before).
fn wait_empty_queue(slurm: &Slurm, mode: Mode, wait_s: f64, sink: Sink) -> Result<(), ReplayError> {
    let t = Instant::now();
    let mut told = false;
    loop {
        let busy: Vec<String> = slurm
            .queue()?
            .into_iter()
            .filter(|q| !TERMINAL_STATES.contains(&q.state.as_str()))
            .map(|q| format!("{} {}", q.id, q.state))
            .collect();
        if busy.is_empty() {
            return Ok(());
        }
        if t.elapsed().as_secs_f64() > wait_s {
            return Err(ReplayError::QueueBusy(busy.join(", ")));
        }
        if !told {
            sink(&format!("[{mode}] waiting up to {wait_s:.0} s for {} job(s) already in the queue", busy.len()));
            told = true;
        }
        sleep_checked(Duration::from_secs(2))?;
    }
}

fn sleep_checked(d: Duration) -> Result<(), ReplayError> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if interrupt::requested() {
            return Err(ReplayError::Interrupted);
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(200)));
    }
    Ok(())
}

/// Runs one mode end to end (see the module doc).
pub fn run_mode(jobs: &[ReplayJob], mode: Mode, s: &Settings, opts: &LiveOptions, sink: Sink) -> Result<ModeResult, ReplayError> {
    let cluster = up(mode, opts, sink)?;
    let slurm = Slurm::for_cluster(&cluster);
    wait_empty_queue(&slurm, mode, opts.queue_wait_s, sink)?;
    let mut active: BTreeMap<u64, String> = BTreeMap::new();
    let mut submitted: Vec<u64> = Vec::new();
    let mut problems: Vec<Problem> = Vec::new();
    let t0_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let res = submit_and_wait(jobs, mode, s, opts, &slurm, &mut active, &mut submitted, &mut problems, sink);
    if res.is_err() && !active.is_empty() {
        // Leave no job of ours behind on an error or Ctrl-C.
        let ids: Vec<u64> = active.keys().copied().collect();
        if let Err(e) = slurm.cancel(&ids) {
            sink(&format!("[{mode}] warning: cancelling jobs {ids:?} failed: {e}"));
        }
    }
    let wall_s = res?;
    let mut records = collect(&slurm, &submitted, mode, sink)?;
    let launch = measure(&mut records, mode, s);
    let mut r = ModeResult::of(mode, jobs.len(), &records, problems, wall_s);
    r.launch_s = (!launch.is_empty()).then(|| launch.iter().sum::<f64>() / launch.len() as f64);
    r.jobs = records.iter().map(|rec| crate::jobs::JobTimes::of_record(rec, t0_epoch, s.speedup)).collect();
    sink(&format!(
        "[{mode}] done in {wall_s:.0} s: {} of {} jobs completed, avg JCT {}",
        r.completed,
        r.trace_jobs,
        r.avg_jct_s.map_or("-".into(), |v| format!("{v:.1} s"))
    ));
    Ok(r)
}

#[allow(clippy::too_many_arguments)]
fn submit_and_wait(
    jobs: &[ReplayJob],
    mode: Mode,
    s: &Settings,
    opts: &LiveOptions,
    slurm: &Slurm,
    active: &mut BTreeMap<u64, String>,
    submitted: &mut Vec<u64>,
    problems: &mut Vec<Problem>,
    sink: Sink,
) -> Result<f64, ReplayError> {
    let t0 = Instant::now();
    let poll = Duration::from_secs_f64(opts.poll_s.max(0.2));
    let mut next = 0usize;
    let mut last_poll: Option<Instant> = None;
    let mut last_line = String::new();
    let mut poll_errors = 0u32;
    sink(&format!("[{mode}] replaying {} jobs (speedup {}x)", jobs.len(), s.speedup));
    loop {
        if interrupt::requested() {
            return Err(ReplayError::Interrupted);
        }
        let now = t0.elapsed().as_secs_f64();
        while next < jobs.len() && jobs[next].submit_at_s <= now {
            let j = &jobs[next];
            match slurm.sbatch(&sbatch_args(j, mode, s)) {
                Ok(id) => {
                    active.insert(id, j.trace.job_id.clone());
                    submitted.push(id);
                }
                Err(e) => {
                    sink(&format!("[{mode}] trace job {}: submission failed: {e}", j.trace.job_id));
                    problems.push(Problem { trace_job: j.trace.job_id.clone(), slurm_id: None, reason: format!("submission failed: {e}") });
                }
            }
            next += 1;
        }
        if last_poll.map_or(true, |p| p.elapsed() >= poll) {
            last_poll = Some(Instant::now());
            match slurm.queue() {
                Ok(q) => {
                    poll_errors = 0;
                    let by_id: BTreeMap<u64, _> = q.into_iter().map(|e| (e.id, e)).collect();
                    let (mut running, mut pending) = (0, 0);
                    let mut stuck = Vec::new();
                    active.retain(|id, trace| match by_id.get(id) {
                        None => false,
                        Some(e) if TERMINAL_STATES.contains(&e.state.as_str()) => false,
                        Some(e) if e.state == "PENDING" && never_runnable(&e.reason) => {
                            stuck.push(*id);
                            problems.push(Problem { trace_job: trace.clone(), slurm_id: Some(*id), reason: format!("stuck pending ({}); cancelled", e.reason) });
                            false
                        }
                        Some(e) => {
                            if e.state == "PENDING" { pending += 1 } else { running += 1 }
                            true
                        }
                    });
                    if !stuck.is_empty() {
                        sink(&format!("[{mode}] cancelling stuck jobs {stuck:?}"));
                        slurm.cancel(&stuck)?;
                    }
                    let line = format!(
                        "[{mode}] {:>5.0} s: submitted {}/{}, running {running}, pending {pending}, done {}",
                        now,
                        next,
                        jobs.len(),
                        submitted.len() - active.len()
                    );
                    // One line per change (and at least every 30 s).
                    let key = line.split_once(": ").map(|x| x.1).unwrap_or("").to_string();
                    if key != last_line || (now as u64) % 30 < opts.poll_s.ceil() as u64 {
                        sink(&line);
                        last_line = key;
                    }
                }
                Err(e) => {
                    poll_errors += 1;
                    sink(&format!("[{mode}] squeue failed ({poll_errors} in a row): {e}"));
                    if poll_errors >= 10 {
                        return Err(e);
                    }
                }
            }
        }
        if next == jobs.len() && active.is_empty() {
            return Ok(t0.elapsed().as_secs_f64());
        }
        if now > opts.timeout_s {
            let ids: Vec<u64> = active.keys().copied().collect();
            sink(&format!("[{mode}] timeout after {:.0} s: cancelling {} unfinished job(s)", opts.timeout_s, ids.len()));
            slurm.cancel(&ids)?;
            for (id, trace) in std::mem::take(active) {
                problems.push(Problem { trace_job: trace, slurm_id: Some(id), reason: format!("unfinished at the {:.0} s timeout; cancelled", opts.timeout_s) });
            }
            for j in &jobs[next..] {
                problems.push(Problem { trace_job: j.trace.job_id.clone(), slurm_id: None, reason: "not submitted before the timeout".into() });
            }
            return Ok(t0.elapsed().as_secs_f64());
        }
        let until_submit = jobs.get(next).map(|j| (j.submit_at_s - t0.elapsed().as_secs_f64()).max(0.0));
        let until_poll = last_poll.map_or(0.0, |p| (poll.as_secs_f64() - p.elapsed().as_secs_f64()).max(0.0));
        let wait = until_submit.map_or(until_poll, |u| u.min(until_poll));
        sleep_checked(Duration::from_secs_f64(wait.max(0.05)))?;
    }
}

/// Compares each job's prediction (AdminComment) with what the job itself
/// shows: its `cellsched-iter` lines (its output file), at the replay's
/// time scale.
/// Returns, per job that printed its summary, the real seconds it held its
/// GPUs beyond the trainer's own run (sacct's End − Start minus the
/// trainer's elapsed time: launch, plugins, completion).
fn measure(records: &mut [cellsched_report::JobRecord], mode: Mode, s: &Settings) -> Vec<f64> {
    let mut launch = Vec::new();
    for r in records.iter_mut() {
        r.apply_time_scale(s.scale());
        let trace = crate::results::trace_job_of(r).unwrap_or_default();
        let out = s.out_dir.join(format!("{}-{}.out", crate::workload::job_name(mode, &trace), r.job_id));
        if let Ok(b) = std::fs::read(&out) {
            let text = String::from_utf8_lossy(&b);
            r.measure(Some(&text));
            if let (Some(e), Some(_), Some(_)) = (crate::jobs::trainer_elapsed_s(&text), r.start, r.end) {
                launch.push(r.run_s() - e);
            }
        }
    }
    launch
}

/// Reads the submitted jobs back from sacct, waiting (≤ 30 s) until every
/// one shows an End time (slurmctld reports to slurmdbd asynchronously).
fn collect(slurm: &Slurm, ids: &[u64], mode: Mode, sink: Sink) -> Result<Vec<cellsched_report::JobRecord>, ReplayError> {
    let t = Instant::now();
    loop {
        let records = slurm.sacct(ids)?;
        let ended = records.iter().filter(|r| r.end.is_some()).count();
        if (records.len() == ids.len() && ended == ids.len()) || t.elapsed() > Duration::from_secs(30) {
            if ended < ids.len() {
                sink(&format!("[{mode}] sacct shows {ended} of {} jobs ended after 30 s; reporting what it has", ids.len()));
            }
            return Ok(records);
        }
        sleep_checked(Duration::from_secs(2))?;
    }
}
