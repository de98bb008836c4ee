//! The cluster's private MariaDB: data dir under the cluster dir, loopback
//! TCP on its own port, run as root, holding slurmdbd's accounting database.
use crate::daemon::{tail, Daemon};
use crate::error::{ClusterError, Result};
use crate::layout::Layout;
use crate::render::{DB_NAME, DB_PASS, DB_USER};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Finds a MariaDB program in the usual places.
pub fn find_program(names: &[&str]) -> Result<PathBuf> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        for n in names {
            let p = Path::new(dir).join(n);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(ClusterError::MissingProgram {
        what: format!("MariaDB ({})", names.join(" or ")),
        path: PathBuf::from("/usr/sbin:/usr/bin"),
    })
}

/// Creates the data dir with `mariadb-install-db` unless it exists already.
pub fn init_datadir(l: &Layout) -> Result<bool> {
    let data = l.mariadb_data();
    if data.join("mysql").is_dir() {
        return Ok(false);
    }
    let install = find_program(&["mariadb-install-db", "mysql_install_db"])?;
    let logp = l.log_file("mariadb-install");
    // One bootstrap at a time on this machine (clusters started in parallel,
    // e.g. by the test suite, made it fail now and then), and one retry.
    let _one_at_a_time = InstallLock::acquire();
    let mut out = None;
    let mut text = String::new();
    for attempt in 1..=2 {
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).map_err(ClusterError::io("cannot create", &data))?;
        let o = Command::new(&install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=root", "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"])
            .output()
            .map_err(ClusterError::io("cannot run", &install))?;
        text.push_str(&format!("--- attempt {attempt}\n"));
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        text.push_str(&String::from_utf8_lossy(&o.stderr));
        let ok = o.status.success();
        out = Some(o);
        if ok {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    let out = out.expect("at least one attempt");
    let _ = std::fs::write(&logp, &text);
    if !out.status.success() {
        // Leave no half-initialised data dir behind: the next `up` retries.
        let _ = std::fs::remove_dir_all(&data);
        return Err(ClusterError::StepFailed {
            step: "initialising MariaDB data dir".into(),
            detail: format!("{} exited with {}", install.display(), out.status),
            log: logp.clone(),
            tail: tail(&logp, 25),
        });
    }
    Ok(true)
}

/// The mariadbd daemon of this cluster.
pub fn daemon(l: &Layout, port: u16) -> Result<Daemon> {
    let program = find_program(&["mariadbd", "mysqld"])?;
    let comm = program.file_name().unwrap_or_default().to_string_lossy().into_owned();
    Ok(Daemon {
        label: "mariadb".into(),
        args: vec![
            "--no-defaults".into(),
            format!("--datadir={}", l.mariadb_data().display()).into(),
            format!("--socket={}", l.mariadb_socket().display()).into(),
            format!("--port={port}").into(),
            "--bind-address=127.0.0.1".into(),
            "--skip-networking=0".into(),
            "--skip-name-resolve".into(),
            format!("--pid-file={}", l.pid_file("mariadb").display()).into(),
            format!("--log-error={}", l.log_file("mariadb").display()).into(),
            "--user=root".into(),
            "--innodb-buffer-pool-size=64M".into(),
            "--max-connections=200".into(),
        ],
        program,
        env: vec![],
        pid_file: l.pid_file("mariadb"),
        log_file: l.log_file("mariadb"),
        out_file: l.out_file("mariadb"),
        comm,
    })
}

/// Runs SQL as root over the unix socket.
pub fn sql(l: &Layout, statements: &str) -> Result<String> {
    let client = find_program(&["mariadb", "mysql"])?;
    let out = Command::new(&client)
        .arg("--no-defaults")
        .arg(format!("--socket={}", l.mariadb_socket().display()))
        .args(["--user=root", "--batch", "--skip-column-names", "-e", statements])
        .output()
        .map_err(ClusterError::io("cannot run", &client))?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            cmd: format!("{} -e {statements:?}", client.display()),
            status: out.status.to_string(),
            output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits until the server answers SQL over its socket and TCP port is open.
pub fn wait_ready(l: &Layout, d: &Daemon, port: u16, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        if d.running_pid().is_none() && start.elapsed() > Duration::from_secs(2) {
            return Err(d.failure("mariadbd exited", start.elapsed()));
        }
        if crate::ports::is_listening(port) && sql(l, "SELECT 1").is_ok() {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(d.failure("MariaDB did not answer", start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Creates slurmdbd's database user (loopback only) with rights on its schema.
pub fn create_db_user(l: &Layout) -> Result<()> {
    let mut s = String::new();
    for host in ["127.0.0.1", "localhost"] {
        s.push_str(&format!(
            "CREATE USER IF NOT EXISTS '{DB_USER}'@'{host}' IDENTIFIED BY '{DB_PASS}'; \
             GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'{host}'; "
        ));
    }
    s.push_str("FLUSH PRIVILEGES;");
    sql(l, &s).map(|_| ())
}

/// Machine-wide lock around `mariadb-install-db` (an `flock` on a file in
/// the temp dir), released on drop; best effort: without the file, no lock.
struct InstallLock(Option<std::fs::File>);

impl InstallLock {
    fn acquire() -> InstallLock {
        use std::os::unix::io::AsRawFd;
        let path = std::env::temp_dir().join("cellsched-mariadb-install.lock");
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).ok();
        if let Some(f) = &f {
            // SAFETY: flock on a descriptor we own; blocks until the lock is free.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        }
        InstallLock(f)
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        use std::os::unix::io::AsRawFd;
        if let Some(f) = &self.0 {
            // SAFETY: unlocks the lock taken in `acquire` on the same descriptor.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}
