//! Running the profiled command for a bounded time and collecting its
//! iteration timings.
//!
//! The command runs without a shell, in its own process group, with the plan
//! environment added, stdin closed, stdout read line by line (and echoed to
//! our stderr when asked) and stderr inherited. It stops at the first of: the
//! command exits, `max_iters` measured iterations, the `duration` limit, or
//! the interrupt flag (SIGINT/SIGTERM); then the whole group gets SIGTERM and,
//! after a grace period, SIGKILL.
//!
//! Iteration lines are time-stamped when read, so the GPU readings can be
//! summarised over the measured iterations only. The command gets
//! `PYTHONUNBUFFERED=1` so a Python training script's lines are not held back
//! in its stdout buffer; other programs should flush after each line.
use crate::error::ProfilerError;
use crate::iterline::IterParser;
use crate::sampler::{GpuSample, Sampler, SamplerThread};
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run and how long.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Program and arguments (no shell).
    pub command: Vec<String>,
    /// Extra environment (the plan).
    pub env: Vec<(String, String)>,
    /// Upper bound on the run's wall time.
    pub duration: Duration,
    /// Leading iterations to discard.
    pub warmup: usize,
    /// Stop after this many iterations past the warm-up.
    pub max_iters: Option<usize>,
    /// How iteration lines look.
    pub parser: IterParser,
    /// Echo the command's stdout to our stderr.
    pub echo: bool,
    /// NVML sampling interval.
    pub sample_interval: Duration,
}

/// Why the run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The command exited by itself.
    Exited,
    /// Enough iterations were measured.
    Iterations,
    /// The duration limit was reached.
    Duration,
    /// SIGINT/SIGTERM.
    Interrupted,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Seconds per iteration, in output order (warm-up included).
    pub times: Vec<f64>,
    /// When each of `times` was read, in seconds since the run started.
    pub iter_at_s: Vec<f64>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The command's exit status (after our kill, if we killed it).
    pub status: Option<ExitStatus>,
    /// Wall time of the run.
    pub wall: Duration,
    /// GPU readings taken meanwhile (empty without a sampler).
    pub samples: Vec<GpuSample>,
}

/// Progress callback data: elapsed time, iterations seen, last iteration time.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Since start.
    pub elapsed: Duration,
    /// Iterations seen (warm-up included).
    pub iters: usize,
    /// Latest iteration time.
    pub last_s: Option<f64>,
}

/// A flag set by SIGINT and SIGTERM (the handlers only set it).
pub fn interrupt_flag() -> Result<Arc<AtomicBool>, ProfilerError> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())
            .map_err(|e| ProfilerError::io("installing signal handler", e))?;
    }
    Ok(flag)
}

fn kill_group(pgid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on our child's process group; errors (already gone) ignored.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), sig);
    }
}

/// Runs `spec`, sampling with `sampler` when given.
pub fn run(
    spec: &RunSpec,
    sampler: Option<Box<dyn Sampler>>,
    interrupt: &AtomicBool,
    mut progress: impl FnMut(Progress),
) -> Result<RunOutcome, ProfilerError> {
    let (prog, args) = spec.command.split_first().ok_or_else(|| {
        ProfilerError::invalid("command", "(none)", "a program to run after --, or --probe")
    })?;
    let shown = spec.command.join(" ");
    let mut child = Command::new(prog)
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .map_err(|e| ProfilerError::Spawn {
            command: shown.clone(),
            msg: e.to_string(),
        })?;
    let start = Instant::now();
    let sampling = sampler.map(|s| SamplerThread::start(s, spec.sample_interval, start));
    let stdout = child.stdout.take().expect("stdout is piped");
    // (seconds per iteration, seconds since start when the line was read)
    let (tx, rx) = mpsc::channel::<(f64, f64)>();
    let parser = spec.parser.clone();
    let echo = spec.echo;
    // The reader ends at EOF, i.e. when the whole process group is gone.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if echo {
                eprintln!("{line}");
            }
            if let Some(t) = parser.parse_line(&line) {
                if tx.send((t, start.elapsed().as_secs_f64())).is_err() {
                    break;
                }
            }
        }
    });
    let mut times = Vec::new();
    let mut iter_at_s = Vec::new();
    let wanted = spec.max_iters.map(|m| m + spec.warmup);
    let stop = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((t, at)) => {
                times.push(t);
                iter_at_s.push(at);
                progress(Progress {
                    elapsed: start.elapsed(),
                    iters: times.len(),
                    last_s: Some(t),
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => progress(Progress {
                elapsed: start.elapsed(),
                iters: times.len(),
                last_s: times.last().copied(),
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        if interrupt.load(Ordering::Relaxed) {
            break StopReason::Interrupted;
        }
        if wanted.is_some_and(|w| times.len() >= w) {
            break StopReason::Iterations;
        }
        if start.elapsed() >= spec.duration {
            break StopReason::Duration;
        }
        if let Ok(Some(_)) = child.try_wait() {
            // Drain lines still in flight (bounded: a daemonised grandchild
            // could keep the pipe open), then stop.
            while start.elapsed() < spec.duration {
                let Ok((t, at)) = rx.recv_timeout(Duration::from_millis(200)) else {
                    break;
                };
                times.push(t);
                iter_at_s.push(at);
                progress(Progress {
                    elapsed: start.elapsed(),
                    iters: times.len(),
                    last_s: Some(t),
                });
            }
            break StopReason::Exited;
        }
    };
    let status = match child.try_wait() {
        Ok(Some(s)) => Some(s),
        _ => {
            kill_group(child.id(), libc::SIGTERM);
            let grace = Instant::now();
            loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if grace.elapsed() < Duration::from_secs(3) => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    _ => {
                        kill_group(child.id(), libc::SIGKILL);
                        break child.wait().ok();
                    }
                }
            }
        }
    };
    // Make sure no straggler of the group outlives the run.
    kill_group(child.id(), libc::SIGKILL);
    let samples = sampling.map(SamplerThread::stop).unwrap_or_default();
    Ok(RunOutcome {
        times,
        iter_at_s,
        stop,
        status,
        wall: start.elapsed(),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::tests::FakeGpu;

    fn spec(script: &str) -> RunSpec {
        RunSpec {
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            env: vec![("CELLSCHED_DP".into(), "4".into())],
            duration: Duration::from_secs(60),
            warmup: 1,
            max_iters: None,
            parser: IterParser::new(),
            echo: false,
            sample_interval: Duration::from_millis(5),
        }
    }

    #[test]
    fn reads_iterations_until_exit_with_env() {
        let s = spec("for t in 0.9 0.2 0.3; do echo \"noise\"; echo \"cellsched-iter $t\"; done; echo \"cellsched-iter $CELLSCHED_DP\"");
        let flag = AtomicBool::new(false);
        let mut calls = 0;
        let out = run(&s, Some(Box::new(FakeGpu(0))), &flag, |_| calls += 1).unwrap();
        assert_eq!(out.times, vec![0.9, 0.2, 0.3, 4.0]);
        assert_eq!(out.iter_at_s.len(), 4);
        assert!(out.iter_at_s.windows(2).all(|w| w[0] <= w[1]) && out.iter_at_s[0] >= 0.0, "{:?}", out.iter_at_s);
        assert_eq!(out.stop, StopReason::Exited);
        assert!(out.status.unwrap().success());
        assert!(!out.samples.is_empty(), "sampler ran");
        assert!(calls >= 4);
    }

    #[test]
    fn python_output_is_unbuffered() {
        let s = spec("echo \"cellsched-iter $PYTHONUNBUFFERED\"");
        let out = run(&s, None, &AtomicBool::new(false), |_| {}).unwrap();
        assert_eq!(out.times, vec![1.0]);
    }

    #[test]
    fn stops_after_enough_iterations_and_kills_the_child() {
        let mut s = spec("while true; do echo 'cellsched-iter 0.01'; sleep 0.01; done");
        s.max_iters = Some(5);
        let flag = AtomicBool::new(false);
        let out = run(&s, None, &flag, |_| {}).unwrap();
        assert_eq!(out.stop, StopReason::Iterations);
        assert!(out.times.len() >= 6);
        assert!(!out.status.unwrap().success(), "killed by signal");
    }

    #[test]
    fn interrupt_flag_kills_the_child() {
        let s = spec("echo 'cellsched-iter 1'; exec sleep 600");
        let flag = AtomicBool::new(false);
        let out = run(&s, None, &flag, |p| {
            if p.iters >= 1 {
                flag.store(true, Ordering::Relaxed);
            }
        })
        .unwrap();
        assert_eq!(out.stop, StopReason::Interrupted);
        assert_eq!(out.times, vec![1.0]);
    }

    #[test]
    fn zero_duration_stops_at_once() {
        let mut s = spec("exec sleep 600");
        s.duration = Duration::ZERO;
        let out = run(&s, None, &AtomicBool::new(false), |_| {}).unwrap();
        assert_eq!(out.stop, StopReason::Duration);
        assert!(out.times.is_empty());
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let mut s = spec("");
        s.command = vec!["/nonexistent/train.py".into()];
        let e = run(&s, None, &AtomicBool::new(false), |_| {}).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/train.py"), "{e}");
        s.command.clear();
        assert_eq!(
            run(&s, None, &AtomicBool::new(false), |_| {})
                .unwrap_err()
                .exit_code(),
            2
        );
    }
}
