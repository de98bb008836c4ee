//! Where each file of the cluster lives under its one directory.
use crate::error::{ClusterError, Result};
use std::path::{Path, PathBuf};

/// Paths under the cluster directory.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The cluster directory everything lives under.
    pub root: PathBuf,
}

impl Layout {
    /// The layout rooted at `dir`.
    pub fn new(dir: &Path) -> Self {
        Layout { root: dir.to_path_buf() }
    }
    /// Config files: slurm.conf, gres.conf, plugstack.conf, slurmdbd.conf, cellsched.toml.
    pub fn etc(&self) -> PathBuf {
        self.root.join("etc")
    }
    /// `etc/slurm.conf`, the file `SLURM_CONF` points at.
    pub fn slurm_conf(&self) -> PathBuf {
        self.etc().join("slurm.conf")
    }
    /// `etc/cellsched.toml`, the plugins' configuration.
    pub fn cellsched_toml(&self) -> PathBuf {
        self.etc().join("cellsched.toml")
    }
    /// Daemon logs.
    pub fn log(&self) -> PathBuf {
        self.root.join("log")
    }
    /// PID files and sockets.
    pub fn run(&self) -> PathBuf {
        self.root.join("run")
    }
    /// slurmctld's StateSaveLocation.
    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }
    /// Parent of each slurmd's spool dir (`spool/<node>`).
    pub fn spool(&self) -> PathBuf {
        self.root.join("spool")
    }
    /// The private PluginDir (stock plugins linked, ours copied).
    pub fn plugins(&self) -> PathBuf {
        self.root.join("plugins")
    }
    /// Fake GPU device files, `dev/<node>/nvidiaN`.
    pub fn dev(&self) -> PathBuf {
        self.root.join("dev")
    }
    /// MariaDB data directory.
    pub fn mariadb_data(&self) -> PathBuf {
        self.root.join("mariadb")
    }
    /// MariaDB's unix socket.
    pub fn mariadb_socket(&self) -> PathBuf {
        self.run().join("mariadb.sock")
    }
    /// Log file of a daemon by label (`slurmctld`, `slurmd-a100-1`, ...).
    pub fn log_file(&self, label: &str) -> PathBuf {
        self.log().join(format!("{label}.log"))
    }
    /// Captured stdout/stderr of a daemon (errors before its log is open).
    pub fn out_file(&self, label: &str) -> PathBuf {
        self.log().join(format!("{label}.out"))
    }
    /// PID file of a daemon by label.
    pub fn pid_file(&self, label: &str) -> PathBuf {
        self.run().join(format!("{label}.pid"))
    }

    /// Creates every directory of the layout (and the per-node spool dirs).
    pub fn create_dirs(&self, nodes: &[String]) -> Result<()> {
        let mut dirs = vec![self.etc(), self.log(), self.run(), self.state(), self.plugins(), self.dev()];
        dirs.extend(nodes.iter().map(|n| self.spool().join(n)));
        for d in dirs {
            std::fs::create_dir_all(&d).map_err(ClusterError::io("cannot create directory", &d))?;
        }
        Ok(())
    }
}
