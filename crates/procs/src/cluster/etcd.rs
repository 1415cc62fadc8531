//! The etcd members of a cluster whose MDS is highly available: started together (each waits
//! for a quorum), each one's data in `DIR/etcdJ` and output in `DIR/etcdJ.log`, ready when its
//! `/health` says so.

use std::process::Command;
use std::time::Duration;

use super::{http_get, Daemon, LocalCluster};
use crate::process::Proc;

impl LocalCluster {
    /// The etcd members' client addresses, comma-separated.
    pub fn etcd_endpoints(&self) -> String {
        (0..self.options.etcd)
            .map(|j| self.addr(Daemon::Etcd(j)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts every etcd member (all at once: each waits for a quorum), then waits until each
    /// reports itself healthy.
    pub(super) fn start_etcd(&mut self) -> Result<(), String> {
        for j in 0..self.options.etcd {
            self.start_etcd_member(j)?;
        }
        for j in 0..self.options.etcd {
            self.wait_etcd_healthy(j, Duration::from_secs(60))?;
        }
        Ok(())
    }

    pub(super) fn etcd_args(&self, j: usize) -> Vec<String> {
        let peer = |j: usize| format!("http://127.0.0.1:{}", self.port(Daemon::Etcd(j)) + 1);
        let cluster: Vec<String> = (0..self.options.etcd)
            .map(|k| format!("m{k}={}", peer(k)))
            .collect();
        let client = format!("http://{}", self.addr(Daemon::Etcd(j)));
        [
            "--name",
            &format!("m{j}"),
            "--data-dir",
            &self.dir.join(format!("etcd{j}")).display().to_string(),
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
            "--listen-peer-urls",
            &peer(j),
            "--initial-advertise-peer-urls",
            &peer(j),
            "--initial-cluster",
            &cluster.join(","),
            "--initial-cluster-token",
            &format!("cordillera-{}", self.base_port),
            "--initial-cluster-state",
            "new",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Starts etcd member `j` (again: its data directory is kept), its output in
    /// `DIR/etcdJ.log`.
    pub fn start_etcd_member(&mut self, j: usize) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("etcd{j}.log")))
            .map_err(|e| e.to_string())?;
        let child = Command::new("etcd")
            .args(self.etcd_args(j))
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run etcd (the Debian package etcd-server): {e}"))?;
        self.procs.insert(Daemon::Etcd(j), Proc::adopt(child));
        Ok(())
    }

    /// Waits until etcd member `j` answers `/health` with true (it is in a cluster with a
    /// leader).
    pub fn wait_etcd_healthy(&self, j: usize, limit: Duration) -> Result<(), String> {
        let addr = self.addr(Daemon::Etcd(j));
        let deadline = std::time::Instant::now() + limit;
        loop {
            match http_get(&addr, "/health") {
                Ok(body) if body.contains("\"health\":\"true\"") => return Ok(()),
                other if std::time::Instant::now() > deadline => {
                    return Err(format!(
                        "etcd member {j} at {addr} is not healthy: {other:?}"
                    ))
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}
