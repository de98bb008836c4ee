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
use std::time::{Duration, Instant, SystemTime};

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
        self.try_start(timeout).map_err(|(_, e)| e)
    }

    /// [`Self::start`], started again (after `pause`, at most `attempts`
    /// times in all) while the daemon exits at start; any other failure, or
    /// the last early exit, is returned as is. For a daemon whose first
    /// start can lose a race with a service that just came up (slurmdbd
    /// against a new MariaDB database); a configuration error fails every
    /// attempt and is reported with the daemon's output as before.
    pub fn start_retrying(&self, timeout: Duration, attempts: u32, pause: Duration) -> Result<i32> {
        let mut attempt = 1;
        loop {
            match self.try_start(timeout) {
                Ok(pid) => return Ok(pid),
                Err((true, _)) if attempt < attempts => {
                    attempt += 1;
                    std::thread::sleep(pause);
                }
                Err((_, e)) => return Err(e),
            }
        }
    }

    /// [`Self::start`]'s attempt; an error says whether the daemon exited at start.
    fn try_start(&self, timeout: Duration) -> std::result::Result<i32, (bool, ClusterError)> {
        let _ = fs::remove_file(&self.pid_file);
        let out = File::create(&self.out_file).map_err(|e| (false, ClusterError::io("cannot create", &self.out_file)(e)))?;
        let err = out.try_clone().map_err(|e| (false, ClusterError::io("cannot duplicate handle of", &self.out_file)(e)))?;
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
        let mut child = cmd.spawn().map_err(|e| {
            let e = ClusterError::StepFailed {
                step: format!("starting {}", self.label),
                detail: format!("cannot execute {}: {e}", self.program.display()),
                log: self.out_file.clone(),
                tail: String::new(),
            };
            (false, e)
        })?;
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err((true, self.failure(&format!("it exited at start ({status})"), start.elapsed())));
            }
            if let Some(pid) = self.running_pid() {
                // The daemon runs in the foreground: its PID file names our child.
                // If the caller exits, init adopts it; a long-lived caller sees it as a
                // zombie (treated as stopped) should it die later.
                return Ok(pid);
            }
            if start.elapsed() > timeout {
                return Err((false, self.failure("no running process behind its PID file", start.elapsed())));
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

/// PID in `pid_file` if that process is alive, not a zombie, its command
/// name is `comm`, and it started before the file was last written (see
/// [`started_by`]).
pub fn running_pid(pid_file: &Path, comm: &str) -> Option<i32> {
    running_entry(pid_file, comm).map(|(pid, _)| pid)
}

/// [`running_pid`] with the PID file's last write time.
fn running_entry(pid_file: &Path, comm: &str) -> Option<(i32, Option<SystemTime>)> {
    let pid: i32 = fs::read_to_string(pid_file).ok()?.trim().parse().ok()?;
    let written = fs::metadata(pid_file).and_then(|m| m.modified()).ok();
    (pid > 1 && is_ours(pid, comm, written)).then_some((pid, written))
}

/// Whether `pid` is a live `comm` that started before `written` (the PID
/// file's last write; `None`: not checked).
fn is_ours(pid: i32, comm: &str, written: Option<SystemTime>) -> bool {
    is_alive_as(pid, comm) && written.is_none_or(|w| started_by(pid, w))
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

/// Slack on [`started_by`]'s comparison: the boot time the kernel reports
/// is whole seconds and drifts a little with clock adjustments.
const START_SLACK: Duration = Duration::from_secs(2);

/// Whether process `pid` started no later than `written` (plus
/// [`START_SLACK`]). A daemon writes its PID file after it starts, so a
/// process that started after the file's last write is another one that
/// reuses the PID: PIDs wrap at `/proc/sys/kernel/pid_max` (32768 on some
/// machines, reached within one test run), and the new process may be
/// another cluster's daemon of the same name. True when the start time
/// cannot be read (the name check alone, as before).
fn started_by(pid: i32, written: SystemTime) -> bool {
    match process_start(pid) {
        Some(start) => start <= written + START_SLACK,
        None => true,
    }
}

/// When process `pid` started (`/proc/PID/stat` field 22, clock ticks
/// after boot, plus the boot time of `/proc/stat`).
fn process_start(pid: i32) -> Option<SystemTime> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after "pid (comm)": state is field 3, starttime field 22.
    let ticks: u64 = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()?;
    let btime: u64 = fs::read_to_string("/proc/stat").ok()?.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(btime) + Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// Stops the process named by `pid_file` (if it is a live `comm` that
/// wrote it): SIGTERM, wait up to `grace`, then SIGKILL. Removes the PID
/// file. Idempotent.
pub fn stop_pid_file(label: &str, pid_file: &Path, comm: &str, grace: Duration) -> Result<bool> {
    let Some((pid, written)) = running_entry(pid_file, comm) else {
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
    if !wait_gone(pid, comm, written, grace) {
        log::warn!("{label} (pid {pid}) ignored SIGTERM for {} s; sending SIGKILL", grace.as_secs());
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        if !wait_gone(pid, comm, written, Duration::from_secs(5)) {
            return Err(ClusterError::Stop { name: label.into(), pid, detail: "still alive after SIGKILL".into() });
        }
    }
    let _ = fs::remove_file(pid_file);
    Ok(true)
}

fn wait_gone(pid: i32, comm: &str, written: Option<SystemTime>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !is_ours(pid, comm, written) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !is_ours(pid, comm, written)
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

    /// A daemon that exits at its first start and runs at its second is
    /// started again; one that always exits fails after every attempt, with
    /// its output; a timeout is not retried.
    #[test]
    fn a_daemon_that_exits_at_start_is_started_again() {
        let d = tmpdir("retry");
        let (pf, mark) = (d.join("s.pid"), d.join("tried"));
        let script = format!("if [ -e {m} ]; then echo $$ > {p}; exec sleep 30; fi; touch {m}; echo 'first start lost a race' >&2; exit 1", m = mark.display(), p = pf.display());
        let dm = sleeper(&d, &script);
        assert!(dm.start(Duration::from_secs(5)).unwrap_err().to_string().contains("first start lost a race"));
        let _ = fs::remove_file(&mark);
        let pid = dm.start_retrying(Duration::from_secs(5), 3, Duration::from_millis(10)).unwrap();
        assert_eq!(dm.running_pid(), Some(pid));
        assert!(dm.stop(Duration::from_secs(5)).unwrap());

        let always = sleeper(&d, &format!("echo x >> {}; echo 'fatal: bad config line 3' >&2; exit 1", d.join("count").display()));
        let e = always.start_retrying(Duration::from_secs(5), 3, Duration::from_millis(10)).unwrap_err().to_string();
        assert!(e.contains("exited at start") && e.contains("fatal: bad config line 3"), "{e}");
        assert_eq!(fs::read_to_string(d.join("count")).unwrap().lines().count(), 3, "three attempts");

        // No PID file within the timeout: not an early exit, not retried.
        let silent = sleeper(&d, &format!("echo x >> {}; exec sleep 2", d.join("silent").display()));
        let e = silent.start_retrying(Duration::from_millis(300), 3, Duration::from_millis(10)).unwrap_err().to_string();
        assert!(e.contains("no running process behind its PID file"), "{e}");
        assert_eq!(fs::read_to_string(d.join("silent")).unwrap().lines().count(), 1, "one attempt");
        let _ = fs::remove_dir_all(&d);
    }

    /// A PID file written before its process started names another
    /// process that reuses the PID: not ours, never signalled.
    #[test]
    fn a_pid_reused_after_the_file_was_written_is_not_ours() {
        let d = tmpdir("reuse");
        let pf = d.join("s.pid");
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        fs::write(&pf, pid.to_string()).unwrap();
        assert_eq!(running_pid(&pf, "sleep"), Some(pid), "written after the process started");
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        File::options().write(true).open(&pf).unwrap().set_modified(hour_ago).unwrap();
        assert_eq!(running_pid(&pf, "sleep"), None, "the file predates the process");
        assert!(!stop_pid_file("s", &pf, "sleep", Duration::from_secs(1)).unwrap());
        assert!(child.try_wait().unwrap().is_none(), "the process was not signalled");
        child.kill().unwrap();
        let _ = child.wait();
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
