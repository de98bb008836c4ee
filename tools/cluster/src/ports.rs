//! Port checks: is a port free, and if not, which process holds it.
use crate::error::{ClusterError, Result};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// True when nothing listens on TCP `port` (any address).
pub fn is_free(port: u16) -> bool {
    TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// True when something accepts TCP connections on 127.0.0.1:`port`.
pub fn is_listening(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

/// Fails with [`ClusterError::PortInUse`] for the first busy port of `ports`.
pub fn ensure_free(ports: &[(u16, String)]) -> Result<()> {
    for (port, purpose) in ports {
        if !is_free(*port) {
            let holder = match holder_of(*port) {
                Some((pid, comm)) => format!(" by {comm} (pid {pid})"),
                None => String::new(),
            };
            return Err(ClusterError::PortInUse { port: *port, purpose: purpose.clone(), holder });
        }
    }
    Ok(())
}

/// The (pid, command name) of the process listening on `port`, when
/// `/proc` tells (needs permission to read other processes' fds).
pub fn holder_of(port: u16) -> Option<(i32, String)> {
    let inodes: Vec<u64> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| listening_inodes(&text, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for p in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                    let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
                    return Some((pid, comm.trim().to_string()));
                }
            }
        }
    }
    None
}

/// Socket inodes in LISTEN state on `port` from a `/proc/net/tcp` table.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    let want = format!("{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next()?;
            (local_port == want && *f.get(3)? == "0A").then(|| f.get(9)?.parse().ok()).flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listening_sockets_from_proc_table() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:4588 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0 100 0 0 10 0\n\
   1: 0100007F:4588 0100007F:9999 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0 100 0 0 10 0\n";
        assert_eq!(listening_inodes(t, 0x4588), vec![12345]);
        assert!(listening_inodes(t, 80).is_empty());
    }

    #[test]
    fn busy_port_is_reported_with_holder() {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!is_free(port));
        assert!(is_listening(port));
        let e = ensure_free(&[(port, "slurmctld".into())]).unwrap_err().to_string();
        assert!(e.contains(&format!("port {port}")) && e.contains("slurmctld"), "{e}");
        // This test process holds it, and /proc tells us so.
        let me = std::process::id() as i32;
        assert_eq!(holder_of(port).map(|h| h.0), Some(me), "{e}");
        drop(l);
        assert!(is_free(port));
    }
}
