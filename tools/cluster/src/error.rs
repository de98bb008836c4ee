//! The one error type of the cluster library.
use std::path::PathBuf;

/// Everything that can go wrong bringing the local cluster up or down.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The daemons run as `SlurmUser=root`, so the caller must be root.
    #[error("the local cluster must be run as root (SlurmUser=root); current uid is {uid}")]
    NotRoot {
        /// The caller's effective uid.
        uid: u32,
    },

    /// A program the cluster needs is not installed.
    #[error("{what} not found (looked for {path}); run scripts/install-deps.sh to install Slurm and MariaDB")]
    MissingProgram {
        /// What is missing, for the message (e.g. "Slurm daemon `slurmd`").
        what: String,
        /// Where it was looked for.
        path: PathBuf,
    },

    /// A port the cluster wants is already bound by someone else.
    #[error("port {port} (for {purpose}) is already in use{holder}; stop that process or choose another --port-base / CELLSCHED_PORT_BASE")]
    PortInUse {
        /// The busy port.
        port: u16,
        /// What the cluster wanted it for (e.g. "slurmctld", "slurmd a100-1").
        purpose: String,
        /// " by COMM (pid PID)" when the listener is known, else empty.
        holder: String,
    },

    /// The spec itself is unusable (bad port base, empty node group, ...).
    #[error("invalid cluster spec: {0}")]
    InvalidSpec(String),

    /// A file or directory operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (e.g. "cannot write").
        action: &'static str,
        /// The file or directory it was done on.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// A start-up step failed; carries the tail of the relevant log.
    #[error("{step} failed: {detail}\n--- last lines of {} ---\n{tail}", log.display())]
    StepFailed {
        /// The step that failed (e.g. "starting slurmctld").
        step: String,
        /// Why it failed.
        detail: String,
        /// The log file whose tail is shown.
        log: PathBuf,
        /// The last lines of `log` (may be empty).
        tail: String,
    },

    /// A helper command (sacctmgr, scontrol, mariadb client, ...) failed.
    #[error("`{cmd}` failed ({status}): {output}")]
    Command {
        /// The command line that was run.
        cmd: String,
        /// Its exit status, as text.
        status: String,
        /// Its trimmed stderr (or stdout when stderr is empty).
        output: String,
    },

    /// Stopping a daemon failed (it survived SIGKILL or could not be signalled).
    #[error("could not stop {name} (pid {pid}): {detail}")]
    Stop {
        /// The daemon's label (e.g. "slurmctld", "slurmd-a100-1").
        name: String,
        /// The PID it was running as.
        pid: i32,
        /// What went wrong.
        detail: String,
    },
}

impl ClusterError {
    /// Wraps an I/O error with what was being done and on which path.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ClusterError {
        let path = path.into();
        move |source| ClusterError::Io { action, path, source }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, ClusterError>;
