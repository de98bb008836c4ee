//! Bringing the whole cluster up and down, in order, idempotently.
//!
//! Start order: MariaDB → DB user → slurmdbd → accounting entries
//! (cluster, account, user) → slurmctld → every slurmd → all nodes usable.
//! A failure part-way stops whatever was started and reports the failing
//! step with the tail of its log.
use crate::daemon::{best_tail, Daemon};
use crate::error::{ClusterError, Result};
use crate::layout::Layout;
use crate::lock::DirLock;
use crate::plugins::{self, PluginSet};
use crate::render::{self, Rendered};
use crate::slurm_client;
use crate::spec::{LocalClusterSpec, Ports};
use crate::{mariadb, ports};
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Grace period between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(15);
/// Starts of slurmdbd while it exits at start (see `up`).
const SLURMDBD_START_ATTEMPTS: u32 = 3;

/// What `up` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpOutcome {
    /// Everything already ran with the same configuration: nothing done.
    AlreadyUp,
    /// Started from nothing.
    Started,
    /// Partly running with the same configuration: the daemons that were
    /// down were started (these labels); nothing else was touched.
    Repaired {
        /// Labels of the daemons that were started.
        started: Vec<String>,
    },
    /// Was (partly) running with a different configuration or plugins;
    /// restarted (jobs kept).
    Restarted {
        /// Why: "configuration changed" or "plugin files changed".
        reason: String,
    },
}

/// A local cluster described by a [`LocalClusterSpec`].
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The spec this cluster was opened or brought up with.
    pub spec: LocalClusterSpec,
    /// Paths under the spec's directory.
    pub layout: Layout,
    /// The ports derived from the spec's port base.
    pub ports: Ports,
    /// What the last `up` did (`None` for a handle from [`Cluster::open`]).
    pub outcome: Option<UpOutcome>,
    /// Our plugins configured by the last `up`.
    pub plugins: PluginSet,
}

/// One daemon's state for `status`.
#[derive(Debug, Clone)]
pub struct DaemonState {
    /// The daemon's label ("mariadb", "slurmdbd", "slurmctld", "slurmd-NODE").
    pub label: String,
    /// Its PID when running, `None` when stopped.
    pub pid: Option<i32>,
}

/// Result of [`Cluster::status`].
#[derive(Debug, Clone)]
pub struct Status {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Every daemon's state, in start order.
    pub daemons: Vec<DaemonState>,
    /// `sinfo` summary when slurmctld answers.
    pub sinfo: Option<String>,
    /// Plugins configured in the current slurm.conf / plugstack.conf.
    pub plugins: Vec<&'static str>,
}

impl Status {
    /// True when every daemon runs.
    pub fn all_running(&self) -> bool {
        self.daemons.iter().all(|d| d.pid.is_some())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "cluster dir: {}", self.dir.display())?;
        for d in &self.daemons {
            match d.pid {
                Some(p) => writeln!(f, "  {:<16} running (pid {p})", d.label)?,
                None => writeln!(f, "  {:<16} stopped", d.label)?,
            }
        }
        let plugins = if self.plugins.is_empty() { "none (stock Slurm)".to_string() } else { self.plugins.join(", ") };
        writeln!(f, "cellsched plugins: {plugins}")?;
        match &self.sinfo {
            Some(s) => write!(f, "{s}"),
            None => writeln!(f, "slurmctld not answering; no sinfo"),
        }
    }
}

/// What stopping the cluster does to its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPolicy {
    /// Keep them: slurmctld saves its queue, running steps keep running.
    Keep,
    /// Cancel every job first (`cluster down --cancel-jobs`).
    Cancel,
}

impl Cluster {
    /// A handle on the cluster of `spec` without starting anything.
    pub fn open(spec: &LocalClusterSpec) -> Result<Cluster> {
        spec.validate()?;
        Ok(Cluster {
            spec: spec.clone(),
            layout: Layout::new(&spec.dir),
            ports: spec.ports()?,
            outcome: None,
            plugins: PluginSet::default(),
        })
    }

    /// Brings the cluster up (see the module doc). A running cluster with
    /// the same configuration and plugin files is left alone
    /// ([`UpOutcome::AlreadyUp`]); a partly running one has its missing
    /// daemons started ([`UpOutcome::Repaired`]); one with another
    /// configuration is restarted. No job is ever cancelled.
    pub fn up(spec: &LocalClusterSpec) -> Result<Cluster> {
        let mut c = Cluster::open(spec)?;
        c.check_prerequisites()?;
        let _lock = DirLock::acquire(&spec.dir)?;
        let l = c.layout.clone();
        l.create_dirs(&spec.slurmd_names())?;
        c.make_gpu_files()?;
        plugins::link_stock_plugins(&spec.stock_plugin_dir, &l.plugins())?;
        let install = plugins::install_our_plugins(spec.with_plugins, &spec.plugin_build_dir, &l.plugins())?;
        c.plugins = install.set;
        let stock = spec.stock_plugin_dir.clone();
        let has_stock = move |name: &str| stock.join(format!("{name}.so")).is_file();
        let rendered = render::render(spec, &l, &c.ports, &install.set, &has_stock);

        let states = c.daemon_states();
        let running = states.iter().filter(|d| d.pid.is_some()).count();
        let same_files = c.files_match(&rendered);
        if running == states.len() && same_files && !install.changed && c.ctld_answers() && c.nodes_usable().is_ok() {
            c.outcome = Some(UpOutcome::AlreadyUp);
            return Ok(c);
        }
        // Never cancels a job: slurmctld keeps its queue in StateSaveLocation,
        // slurmdbd its records in MariaDB, and job steps outlive a slurmd restart.
        c.outcome = Some(if running == 0 {
            UpOutcome::Started
        } else if same_files && !install.changed {
            // Same configuration: start only what is down; running daemons stay.
            UpOutcome::Repaired { started: states.iter().filter(|d| d.pid.is_none()).map(|d| d.label.clone()).collect() }
        } else {
            let reason = if !same_files { "configuration changed" } else { "plugin files changed" };
            c.stop_all(JobPolicy::Keep)?;
            UpOutcome::Restarted { reason: reason.into() }
        });
        c.write_files(&rendered)?;
        if let Err(e) = c.start_all() {
            log::warn!("start-up failed; stopping what was started");
            if let Err(stop_err) = c.stop_all(JobPolicy::Keep) {
                log::warn!("cleanup after failed start: {stop_err}");
            }
            return Err(e);
        }
        Ok(c)
    }

    /// Stops every daemon of the cluster. Jobs are kept in slurmctld's saved
    /// state (running steps keep running and are found again when the cluster
    /// is back); [`JobPolicy::Cancel`] cancels them first. Returns the labels
    /// of the daemons that were running. Idempotent.
    pub fn down(&self, jobs: JobPolicy) -> Result<Vec<String>> {
        if !self.spec.dir.is_dir() {
            return Ok(Vec::new());
        }
        let _lock = DirLock::acquire(&self.spec.dir)?;
        self.stop_all(jobs)
    }

    /// Each daemon's state, the plugins configured, and `sinfo` when slurmctld answers.
    pub fn status(&self) -> Status {
        let conf = std::fs::read_to_string(self.layout.slurm_conf()).unwrap_or_default();
        let stack = std::fs::read_to_string(self.layout.etc().join("plugstack.conf")).unwrap_or_default();
        let mut plugins = Vec::new();
        if conf.contains("PrioritySiteFactorPlugin=site_factor/cellsched") {
            plugins.push("site_factor/cellsched");
        }
        if conf.contains("JobSubmitPlugins=cellsched") {
            plugins.push("job_submit/cellsched");
        }
        if stack.contains("spank_cellsched.so") {
            plugins.push("spank_cellsched.so");
        }
        let daemons = self.daemon_states();
        let ctld_up = daemons.iter().any(|d| d.label == "slurmctld" && d.pid.is_some());
        let sinfo = if ctld_up { self.client_ok("sinfo", &["-o", "%P %a %D %T %N %G"]).ok() } else { None };
        Status { dir: self.spec.dir.clone(), daemons, sinfo, plugins }
    }

    /// Shell lines for `eval "$(cellsched cluster env)"`.
    pub fn env_lines(&self) -> Vec<String> {
        let mut v = vec![
            format!("export SLURM_CONF={}", shell_quote(&self.layout.slurm_conf().display().to_string())),
            format!("export CELLSCHED_CLUSTER_DIR={}", shell_quote(&self.spec.dir.display().to_string())),
            format!("export CELLSCHED_PORT_BASE={}", self.spec.port_base),
        ];
        if self.spec.slurm_bin != std::path::Path::new("/usr/bin") {
            v.push(format!(
                "export PATH={}:{}:\"$PATH\"",
                shell_quote(&self.spec.slurm_bin.display().to_string()),
                shell_quote(&self.spec.slurm_sbin.display().to_string())
            ));
        }
        v
    }

    /// Runs a Slurm client command against this cluster; fails on non-zero exit.
    pub fn client_ok(&self, name: &str, args: &[&str]) -> Result<String> {
        slurm_client::run_ok(&self.spec.slurm_bin, &self.layout.slurm_conf(), name, args)
    }

    /// Every daemon in start order.
    pub fn daemons(&self) -> Result<Vec<Daemon>> {
        let mut v = vec![mariadb::daemon(&self.layout, self.ports.mariadb)?, self.slurm_daemon("slurmdbd", "slurmdbd", vec!["-D".into()])];
        let conf = self.layout.slurm_conf().display().to_string();
        v.push(self.slurm_daemon("slurmctld", "slurmctld", vec!["-D".into(), "-f".into(), conf.clone()]));
        for n in self.spec.slurmd_names() {
            v.push(self.slurm_daemon(&format!("slurmd-{n}"), "slurmd", vec!["-D".into(), "-N".into(), n.clone(), "-f".into(), conf.clone()]));
        }
        Ok(v)
    }

    fn slurm_daemon(&self, label: &str, program: &str, args: Vec<String>) -> Daemon {
        let l = &self.layout;
        Daemon {
            label: label.to_string(),
            program: self.spec.slurm_sbin.join(program),
            args: args.into_iter().map(Into::into).collect(),
            env: vec![
                ("SLURM_CONF".into(), l.slurm_conf().display().to_string()),
                ("CELLSCHED_CONFIG".into(), l.cellsched_toml().display().to_string()),
            ],
            pid_file: l.pid_file(label),
            log_file: l.log_file(label),
            out_file: l.out_file(label),
            comm: program.to_string(),
        }
    }

    fn daemon_states(&self) -> Vec<DaemonState> {
        match self.daemons() {
            Ok(ds) => ds.iter().map(|d| DaemonState { label: d.label.clone(), pid: d.running_pid() }).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn check_prerequisites(&self) -> Result<()> {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        if uid != 0 {
            return Err(ClusterError::NotRoot { uid });
        }
        for p in ["slurmctld", "slurmd", "slurmdbd"] {
            let path = self.spec.slurm_sbin.join(p);
            if !path.is_file() {
                return Err(ClusterError::MissingProgram { what: format!("Slurm daemon `{p}`"), path });
            }
        }
        for p in ["sinfo", "scontrol", "sacctmgr"] {
            let path = self.spec.slurm_bin.join(p);
            if !path.is_file() {
                return Err(ClusterError::MissingProgram { what: format!("Slurm client `{p}`"), path });
            }
        }
        mariadb::find_program(&["mariadbd", "mysqld"])?;
        Ok(())
    }

    fn make_gpu_files(&self) -> Result<()> {
        if self.spec.front_end {
            return Ok(()); // no per-node slurmd reads gres.conf (see render::gres_conf)
        }
        for g in &self.spec.groups {
            for n in g.node_names() {
                let d = self.layout.dev().join(&n);
                std::fs::create_dir_all(&d).map_err(ClusterError::io("cannot create", &d))?;
                for i in 0..g.gpus_per_node {
                    let f = d.join(format!("nvidia{i}"));
                    if !f.exists() {
                        std::fs::write(&f, b"").map_err(ClusterError::io("cannot create GPU file", &f))?;
                    }
                }
            }
        }
        Ok(())
    }

    fn files(&self, r: &Rendered) -> Vec<(PathBuf, String)> {
        let e = self.layout.etc();
        vec![
            (e.join("slurm.conf"), r.slurm_conf.clone()),
            (e.join("gres.conf"), r.gres_conf.clone()),
            (e.join("plugstack.conf"), r.plugstack_conf.clone()),
            (e.join("slurmdbd.conf"), r.slurmdbd_conf.clone()),
            (e.join("cellsched.toml"), r.cellsched_toml.clone()),
            (self.spec.saved_groups_file(), self.spec.saved_groups_text()),
        ]
    }

    fn files_match(&self, r: &Rendered) -> bool {
        self.files(r).iter().all(|(p, text)| std::fs::read_to_string(p).map(|t| &t == text).unwrap_or(false))
    }

    fn write_files(&self, r: &Rendered) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        for (p, text) in self.files(r) {
            let tmp = p.with_extension("tmp");
            std::fs::write(&tmp, text).map_err(ClusterError::io("cannot write", &tmp))?;
            // slurmdbd refuses a slurmdbd.conf readable by others (it holds the DB password).
            let mode = if p.ends_with("slurmdbd.conf") { 0o600 } else { 0o644 };
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(ClusterError::io("cannot chmod", &tmp))?;
            std::fs::rename(&tmp, &p).map_err(ClusterError::io("cannot rename into place", &p))?;
        }
        Ok(())
    }

    fn ctld_answers(&self) -> bool {
        self.client_ok("scontrol", &["ping"]).map(|s| s.contains("is UP")).unwrap_or(false)
    }

    /// Ok when every node is in a usable state, else the `sinfo` lines.
    fn nodes_usable(&self) -> std::result::Result<(), String> {
        let out = self.client_ok("sinfo", &["-h", "-N", "-o", "%N %T"]).map_err(|e| e.to_string())?;
        let states = slurm_client::parse_node_states(&out);
        let names = self.spec.node_names();
        let usable: std::collections::HashSet<&str> =
            states.iter().filter(|(_, s)| slurm_client::is_usable_state(s)).map(|(m, _)| m.as_str()).collect();
        let ok = names.iter().all(|n| usable.contains(n.as_str()));
        if ok {
            Ok(())
        } else {
            Err(out)
        }
    }

    /// Starts every daemon that is not running, in dependency order (MariaDB,
    /// slurmdbd, slurmctld, slurmd), and waits until every node is usable.
    /// Running daemons are left alone, so this also repairs a partly-up cluster.
    fn start_all(&self) -> Result<()> {
        let l = &self.layout;
        let ds = self.daemons()?;
        let (db, dbd, ctld, slurmds) = (&ds[0], &ds[1], &ds[2], &ds[3..]);
        let down = |d: &Daemon| d.running_pid().is_none();
        let ports = &self.ports;
        let mut need_free = Vec::new();
        if down(db) {
            need_free.push(ports.mariadb);
        }
        if down(dbd) {
            need_free.push(ports.slurmdbd);
        }
        if down(ctld) {
            need_free.push(ports.slurmctld);
        }
        for (d, (_, p)) in slurmds.iter().zip(&ports.slurmd) {
            if down(d) {
                need_free.push(*p);
            }
        }
        let all = ports.all();
        ports::ensure_free(&all.into_iter().filter(|(p, _)| need_free.contains(p)).collect::<Vec<_>>())?;

        if down(db) {
            mariadb::init_datadir(l)?;
            db.start(Duration::from_secs(30))?;
        }
        mariadb::wait_ready(l, db, ports.mariadb, Duration::from_secs(60))?;
        mariadb::create_db_user(l).map_err(|e| step_err("creating the slurmdbd database user", e, &l.log_file("mariadb")))?;

        if down(dbd) {
            // Its first start against a new database can fail in its schema
            // checks while MariaDB is busy (parallel test clusters: "We
            // should have gotten a result"); a configuration error fails
            // every attempt and is reported with its log.
            dbd.start_retrying(Duration::from_secs(30), SLURMDBD_START_ATTEMPTS, Duration::from_secs(2))?;
        }
        wait_until(dbd, Duration::from_secs(90), "slurmdbd did not open its port", || ports::is_listening(ports.slurmdbd))?;
        self.ensure_accounting().map_err(|e| step_err("registering cluster, account and user in slurmdbd", e, &l.log_file("slurmdbd")))?;

        if down(ctld) {
            ctld.start(Duration::from_secs(30))?;
        }
        wait_until(ctld, Duration::from_secs(60), "slurmctld did not answer `scontrol ping`", || self.ctld_answers())?;

        for d in slurmds.iter().filter(|d| down(d)) {
            d.start(Duration::from_secs(30))?;
        }
        let start = Instant::now();
        loop {
            match self.nodes_usable() {
                Ok(()) => return Ok(()),
                Err(sinfo) if start.elapsed() > Duration::from_secs(90) => {
                    let down: Vec<&Daemon> = slurmds.iter().filter(|d| d.running_pid().is_none()).collect();
                    return Err(match down.first() {
                        Some(d) => d.failure("slurmd exited", start.elapsed()),
                        None => ctld.failure(&format!("nodes did not become idle; sinfo:\n{}", sinfo.trim()), start.elapsed()),
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(300)),
            }
        }
    }

    /// Adds the cluster, account `cellsched` and user `root` to slurmdbd when missing.
    fn ensure_accounting(&self) -> Result<()> {
        let name = self.spec.cluster_name.as_str();
        let clusters = self.client_ok("sacctmgr", &["-n", "-P", "list", "cluster", "format=cluster"])?;
        if !clusters.lines().any(|c| c.trim() == name) {
            self.client_ok("sacctmgr", &["-i", "add", "cluster", name])?;
        }
        let accounts = self.client_ok("sacctmgr", &["-n", "-P", "list", "account", "format=account"])?;
        if !accounts.lines().any(|a| a.trim() == "cellsched") {
            self.client_ok("sacctmgr", &["-i", "add", "account", "cellsched", "Description=cellsched test jobs", "Organization=cellsched"])?;
        }
        let cl = format!("cluster={name}");
        let assoc = self.client_ok("sacctmgr", &["-n", "-P", "list", "assoc", &cl, "user=root", "account=cellsched", "format=user"])?;
        if assoc.trim().is_empty() {
            let cl2 = format!("Cluster={name}");
            self.client_ok("sacctmgr", &["-i", "add", "user", "root", "Account=cellsched", &cl2])?;
        }
        Ok(())
    }

    /// Stops daemons in reverse start order, cancelling the cluster's jobs
    /// first (best effort) only with [`JobPolicy::Cancel`]. Returns the
    /// labels of those that were running.
    fn stop_all(&self, jobs: JobPolicy) -> Result<Vec<String>> {
        let ds = self.daemons()?;
        if jobs == JobPolicy::Cancel && ds[2].running_pid().is_some() {
            self.cancel_all_jobs();
        }
        let mut stopped = Vec::new();
        let mut first_err = None;
        for d in ds.iter().rev() {
            match d.stop(STOP_GRACE) {
                Ok(true) => stopped.push(d.label.clone()),
                Ok(false) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(stopped),
        }
    }

    /// Cancels every job so no slurmstepd outlives its slurmd, then waits
    /// briefly for the steps to go.
    fn cancel_all_jobs(&self) {
        let Ok(ids) = self.client_ok("squeue", &["-h", "-o", "%A"]) else { return };
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if ids.is_empty() {
            return;
        }
        let mut args = vec!["--full"];
        args.extend(ids.iter().copied());
        let _ = self.client_ok("scancel", &args);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            match self.client_ok("squeue", &["-h", "-o", "%A"]) {
                Ok(s) if !s.trim().is_empty() => std::thread::sleep(Duration::from_millis(300)),
                _ => break,
            }
        }
    }
}

fn wait_until(d: &Daemon, timeout: Duration, what: &str, mut ready: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    loop {
        if ready() {
            return Ok(());
        }
        if d.running_pid().is_none() {
            return Err(d.failure(&format!("{} exited", d.label), start.elapsed()));
        }
        if start.elapsed() > timeout {
            return Err(d.failure(what, start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn step_err(step: &str, e: ClusterError, log: &std::path::Path) -> ClusterError {
    let (log, tail) = best_tail(&[log], 20);
    ClusterError::StepFailed { step: step.into(), detail: e.to_string(), log, tail }
}

/// Single-quotes `s` for POSIX shells when it needs quoting.
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:=,@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_lines_export_slurm_conf() {
        let spec = LocalClusterSpec { dir: "/tmp/cs one".into(), port_base: 18000, ..LocalClusterSpec::default() };
        let c = Cluster::open(&spec).unwrap();
        let lines = c.env_lines();
        assert_eq!(lines[0], "export SLURM_CONF='/tmp/cs one/etc/slurm.conf'");
        assert!(lines.contains(&"export CELLSCHED_PORT_BASE=18000".to_string()));
        assert!(!lines.iter().any(|l| l.contains("PATH=")));
        let spec = LocalClusterSpec { dir: "/tmp/cs".into(), slurm_bin: "/opt/s/bin".into(), slurm_sbin: "/opt/s/sbin".into(), ..LocalClusterSpec::default() };
        let lines = Cluster::open(&spec).unwrap().env_lines();
        assert!(lines.contains(&"export PATH=/opt/s/bin:/opt/s/sbin:\"$PATH\"".to_string()), "{lines:?}");
    }

    #[test]
    fn shell_quote_escapes_quotes() {
        assert_eq!(shell_quote("/a/b"), "/a/b");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn status_of_a_never_started_cluster_is_all_stopped() {
        let d = std::env::temp_dir().join(format!("cs-status-{}", std::process::id()));
        let spec = LocalClusterSpec { dir: d.clone(), port_base: 18950, ..LocalClusterSpec::default() };
        let c = Cluster::open(&spec).unwrap();
        let s = c.status();
        assert_eq!(s.daemons.len(), 3 + 5);
        assert!(s.daemons.iter().all(|d| d.pid.is_none()));
        assert!(s.sinfo.is_none() && s.plugins.is_empty());
        let text = s.to_string();
        assert!(text.contains("slurmd-a10-1") && text.contains("stopped") && text.contains("stock Slurm"), "{text}");
        // down on a never-started cluster is a no-op.
        assert!(c.down(JobPolicy::Cancel).unwrap().is_empty());
    }
}
