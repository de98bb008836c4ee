//! Starting daemons detached from the caller and stopping them by PID file.
//!
//! Daemons run in the foreground mode of their program (`-D`) in their own
//! session, so they outlive the caller (init adopts them) and an early exit
//! is seen at once; their stdout/stderr go to a file (errors before their
//! log opens). Every PID read back is checked against `/proc/PID/comm` so a stale
//! PID file never makes us signal an unrelated process.
use crate::error::{ClusterError, Result};
use std::ffi::OsString;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to start one daemon.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// Label for messages and file names (`slurmctld`, `slurmd-a100-1`).
    pub label: String,
    /// Program to run.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// PID file the daemon writes.
    pub pid_file: PathBuf,
    /// The daemon's own log (shown on failure).
    pub log_file: PathBuf,
    /// Where stdout/stderr go.
    pub out_file: PathBuf,
    /// Expected `/proc/PID/comm` (`slurmctld`, `mariadbd`).
    pub comm: String,
}

impl Daemon {
    /// The PID of this daemon if it is running.
    pub fn running_pid(&self) -> Option<i32> {
        running_pid(&self.pid_file, &self.comm)
    }

    /// Starts the daemon detached and waits until its PID file names a live
    /// process; fails with the tail of its output/log otherwise.
    pub fn start(&self, timeout: Duration) -> Result<i32> {
        let _ = fs::remove_file(&self.pid_file);
        let out = File::create(&self.out_file).map_err(ClusterError::io("cannot create", &self.out_file))?;
        let err = out.try_clone().map_err(ClusterError::io("cannot duplicate handle of", &self.out_file))?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).envs(self.env.iter().cloned()).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: setsid is async-signal-safe; it detaches the daemon from
        // our session and terminal so it outlives the caller.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| ClusterError::StepFailed {
            step: format!("starting {}", self.label),
            detail: format!("cannot execute {}: {e}", self.program.display()),
            log: self.out_file.clone(),
            tail: String::new(),
        })?;
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(self.failure(&format!("it exited at start ({status})"), start.elapsed()));
            }
            if let Some(pid) = self.running_pid() {
                // The daemon runs in the foreground: its PID file names our child.
                // If the caller exits, init adopts it; a long-lived caller sees it as a
                // zombie (treated as stopped) should it die later.
                return Ok(pid);
            }
            if start.elapsed() > timeout {
                return Err(self.failure("no running process behind its PID file", start.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A [`ClusterError::StepFailed`] for this daemon with the tail of its
    /// log (or of its captured output when the log is empty).
    pub fn failure(&self, detail: &str, waited: Duration) -> ClusterError {
        let (log, tail) = best_tail(&[&self.log_file, &self.out_file], 25);
        ClusterError::StepFailed {
            step: format!("starting {}", self.label),
            detail: format!("{detail} (waited {} s)", waited.as_secs()),
            log,
            tail,
        }
    }

    /// Stops the daemon if running (TERM, wait, KILL). Returns whether it was running.
    pub fn stop(&self, grace: Duration) -> Result<bool> {
        stop_pid_file(&self.label, &self.pid_file, &self.comm, grace)
    }
}

/// PID in `pid_file` if that process is alive, not a zombie, and its
/// command name is `comm`.
pub fn running_pid(pid_file: &Path, comm: &str) -> Option<i32> {
    let pid: i32 = fs::read_to_string(pid_file).ok()?.trim().parse().ok()?;
    (pid > 1 && is_alive_as(pid, comm)).then_some(pid)
}

fn is_alive_as(pid: i32, comm: &str) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // "pid (comm) S ...": the state letter follows the last ')'.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    if matches!(state, Some("Z") | Some("X") | None) {
        return false;
    }
    let actual = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    // comm is truncated to 15 bytes by the kernel.
    let want: String = comm.chars().take(15).collect();
    actual.trim() == want
}

/// Stops the process named by `pid_file` (if it is a live `comm`): SIGTERM,
/// wait up to `grace`, then SIGKILL. Removes the PID file. Idempotent.
pub fn stop_pid_file(label: &str, pid_file: &Path, comm: &str, grace: Duration) -> Result<bool> {
    let Some(pid) = running_pid(pid_file, comm) else {
        let _ = fs::remove_file(pid_file);
        return Ok(false);
    };
    // SAFETY: plain kill(2) on a PID we verified belongs to `comm`.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(ClusterError::Stop { name: label.into(), pid, detail: format!("SIGTERM: {e}") });
        }
    }
    if !wait_gone(pid, comm, grace) {
        log::warn!("{label} (pid {pid}) ignored SIGTERM for {} s; sending SIGKILL", grace.as_secs());
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        if !wait_gone(pid, comm, Duration::from_secs(5)) {
            return Err(ClusterError::Stop { name: label.into(), pid, detail: "still alive after SIGKILL".into() });
        }
    }
    let _ = fs::remove_file(pid_file);
    Ok(true)
}

fn wait_gone(pid: i32, comm: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !is_alive_as(pid, comm) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !is_alive_as(pid, comm)
}

/// Last `n` lines of a file ("" when missing).
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Tail of the first non-empty file among `paths`, with its path.
pub fn best_tail(paths: &[&Path], n: usize) -> (PathBuf, String) {
    for p in paths {
        let t = tail(p, n);
        if !t.trim().is_empty() {
            return (p.to_path_buf(), t);
        }
    }
    (paths.first().map(|p| p.to_path_buf()).unwrap_or_default(), "(empty)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cs-daemon-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn sleeper(d: &Path, script: &str) -> Daemon {
        Daemon {
            label: "sleeper".into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![],
            pid_file: d.join("s.pid"),
            log_file: d.join("s.log"),
            out_file: d.join("s.out"),
            comm: "sleep".into(),
        }
    }

    #[test]
    fn starts_detached_and_stops_by_pid_file() {
        let d = tmpdir("ok");
        let pf = d.join("s.pid");
        let dm = sleeper(&d, &format!("echo $$ > {}; exec sleep 30", pf.display()));
        let pid = dm.start(Duration::from_secs(5)).unwrap();
        assert_eq!(dm.running_pid(), Some(pid));
        // Detached: it leads its own session.
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let sid: i32 = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert_eq!(sid, pid);
        assert!(dm.stop(Duration::from_secs(5)).unwrap());
        assert_eq!(dm.running_pid(), None);
        assert!(!pf.exists());
        // Idempotent.
        assert!(!dm.stop(Duration::from_secs(1)).unwrap());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn failing_daemon_reports_its_output() {
        let d = tmpdir("fail");
        let dm = sleeper(&d, "echo 'fatal: bad config line 3' >&2; exit 1");
        let t = Instant::now();
        let e = dm.start(Duration::from_secs(20)).unwrap_err().to_string();
        assert!(e.contains("starting sleeper") && e.contains("fatal: bad config line 3"), "{e}");
        assert!(e.contains("exited at start"), "{e}");
        // Noticed at once, not after the timeout.
        assert!(t.elapsed() < Duration::from_secs(10));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn stale_pid_file_of_other_program_is_ignored() {
        let d = tmpdir("stale");
        let pf = d.join("x.pid");
        // Our own PID, but we are not "slurmctld".
        fs::write(&pf, std::process::id().to_string()).unwrap();
        assert_eq!(running_pid(&pf, "slurmctld"), None);
        assert!(!stop_pid_file("x", &pf, "slurmctld", Duration::from_secs(1)).unwrap());
        assert!(!pf.exists());
        let _ = fs::remove_dir_all(&d);
    }
}
