//! A local Sierra cluster of real processes (`cordillera cluster up`, the tests and the
//! cluster benchmark): the MDS, chunk servers and loggers, each its own process, started from
//! a directory, killed and restarted one at a time.
//!
//! With `mds > 1` and `etcd > 0` the MDS is highly available: an etcd cluster of that many
//! members (the Debian package's `etcd`, data in `DIR/etcdJ`) keeps its state, and `mds` MDS
//! processes take turns (`cluster mds --etcd`), MDS 0 the first active one.
//!
//! Ports: the MDS on `base`, chunk server s on `base + 1 + s`, logger i after the servers,
//! MDS 1… after the loggers, then each etcd member's client and peer ports; HTTP endpoints
//! (`/metrics`, `/status`): 100 above each daemon's port (etcd serves its own on its client
//! port).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Bounded, Proc, COMMAND_LIMIT};

mod etcd;
mod status;

pub use status::{active_mds_status, status_text};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Daemon {
    /// The first MDS (the only one without etcd).
    Mds,
    Server(u32),
    Logger(usize),
    /// MDS 1, 2… of a highly available MDS.
    MdsPeer(usize),
    /// An etcd member.
    Etcd(usize),
}

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub racks: usize,
    pub per_rack: u32,
    /// Logger i is on rack i mod `racks`.
    pub loggers_per_rack: usize,
    /// `None`: a free range is found.
    pub base_port: Option<u16>,
    pub hour_seconds: u64,
    /// 24 gears, comma-separated (the top gear all day if absent).
    pub plan: Option<String>,
    /// A disk model for the chunk servers' and loggers' files (e.g. `sierra-1tb`).
    pub emulate: Option<String>,
    pub wake_seconds: f64,
    /// Each logger's log (k, m, g).
    pub logger_size: String,
    /// Seconds of silence after which a chunk server is declared failed and rebuilt.
    pub permanent_after_s: u64,
    /// Up-shifts of the plan this early (default: three wake-up delays, at most half an hour).
    pub up_shift_lead_s: Option<f64>,
    /// `cluster spec --reclaim-busy-disk` (a number, or `none`).
    pub reclaim_busy_disk: Option<String>,
    /// `cluster spec --set FIELD=VALUE` for each (any field of the spec).
    pub spec_settings: Vec<String>,
    /// MDS processes (more than one needs etcd).
    pub mds: usize,
    /// etcd members keeping the MDS's state (0: the MDS's own `mds.redb`).
    pub etcd: usize,
    /// `cluster mds --mds-lease-seconds`.
    pub mds_lease_s: u64,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            racks: 3,
            per_rack: 2,
            loggers_per_rack: 1,
            base_port: None,
            hour_seconds: 3600,
            plan: None,
            emulate: None,
            wake_seconds: 1.0,
            logger_size: "256m".into(),
            permanent_after_s: 900,
            up_shift_lead_s: None,
            reclaim_busy_disk: None,
            spec_settings: Vec::new(),
            mds: 1,
            etcd: 0,
            mds_lease_s: 5,
        }
    }
}

pub struct LocalCluster {
    binary: PathBuf,
    pub dir: PathBuf,
    pub options: ClusterOptions,
    pub base_port: u16,
    procs: BTreeMap<Daemon, Proc>,
}

/// A base port whose whole range (daemons and HTTP endpoints) was free a moment ago.
fn free_base(daemons: u16) -> Result<u16, String> {
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    // Below Linux's ephemeral range (32768–60999 by default): a port there can be taken, between
    // the probe below and the daemon's bind, by any outgoing connection or `bind(…:0)` on the
    // machine — which is how a test once found its server's /metrics port in use.
    for attempt in 0..200u64 {
        let base =
            10_000 + ((seed.wrapping_mul(6364136223846793005) >> 33) + attempt * 997) % 22_000;
        let base = base as u16;
        let ports = (0..daemons).chain(100..100 + daemons);
        if ports
            .map(|p| std::net::TcpListener::bind(("127.0.0.1", base + p)))
            .all(|r| r.is_ok())
        {
            return Ok(base);
        }
    }
    Err("no free range of ports on 127.0.0.1".into())
}

impl LocalCluster {
    /// Where everything is, and how to use it: each daemon's address, status endpoint and
    /// pid; a volume, a gear shift and the status of the cluster in `dir`, as commands.
    pub fn describe(&self, dir: &Path) -> String {
        let mut out = String::new();
        for d in std::iter::once(Daemon::Mds).chain((1..self.options.mds).map(Daemon::MdsPeer)) {
            out.push_str(&format!(
                "MDS        {}  (http://{}/status)  pid {}\n",
                self.addr(d),
                self.http_addr(d).expect("an endpoint"),
                self.pid(d).unwrap_or(0)
            ));
        }
        for j in 0..self.options.etcd {
            let d = Daemon::Etcd(j);
            out.push_str(&format!(
                "etcd {j:<5} {}  (data {})  pid {}\n",
                self.addr(d),
                self.dir.join(format!("etcd{j}")).display(),
                self.pid(d).unwrap_or(0)
            ));
        }
        for s in 0..self.servers() {
            let d = Daemon::Server(s);
            out.push_str(&format!(
                "server {s:<3} {}  (http://{}/status)  pid {}\n",
                self.addr(d),
                self.http_addr(d).expect("an endpoint"),
                self.pid(d).unwrap_or(0)
            ));
        }
        for i in 0..self.loggers() {
            let d = Daemon::Logger(i);
            out.push_str(&format!(
                "logger {i:<3} {}  pid {}\n",
                self.addr(d),
                self.pid(d).unwrap_or(0)
            ));
        }
        out.push_str(&format!(
            "a volume:  cordillera volume serve --cluster {} --object vol --size 1g\n",
            self.mds_addr()
        ));
        out.push_str(&format!(
            "gears:     cordillera cluster gear 1 --mds {}   status: cordillera cluster status --dir {}\n",
            self.mds_addr(),
            dir.display()
        ));
        out
    }

    /// Writes the spec (unless `dir` holds one: a cluster started again), then starts every
    /// daemon and waits until each listens.
    pub fn start(
        binary: &Path,
        dir: &Path,
        options: ClusterOptions,
    ) -> Result<LocalCluster, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let spec_path = dir.join("spec.json");
        let servers = options.racks as u16 * options.per_rack as u16;
        let base_port = if spec_path.exists() {
            let text = std::fs::read_to_string(&spec_path).map_err(|e| e.to_string())?;
            let spec: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            let mds = spec["mds"].as_str().ok_or("spec.json has no mds")?;
            let first = mds.split(',').next().unwrap_or(mds);
            first
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or("spec.json's mds has no port")?
        } else {
            if options.mds > 1 && options.etcd == 0 {
                return Err("more than one MDS needs etcd (etcd members > 0)".into());
            }
            let loggers = (options.racks * options.loggers_per_rack) as u16;
            let extra = options.mds.max(1) as u16 - 1 + 2 * options.etcd as u16;
            let base = match options.base_port {
                Some(b) => b,
                None => free_base(1 + servers + loggers + extra)?,
            };
            let mut args = vec![
                "cluster".to_string(),
                "spec".into(),
                "--racks".into(),
                options.racks.to_string(),
                "--per-rack".into(),
                options.per_rack.to_string(),
                "--loggers-per-rack".into(),
                options.loggers_per_rack.to_string(),
                "--base-port".into(),
                base.to_string(),
                "--hour-seconds".into(),
                options.hour_seconds.to_string(),
                "--permanent-after-s".into(),
                options.permanent_after_s.to_string(),
                // Up-shifts three wake-up delays early, at most half an hour of the plan.
                "--up-shift-lead-s".into(),
                options
                    .up_shift_lead_s
                    .unwrap_or((3.0 * options.wake_seconds).min(options.hour_seconds as f64 / 2.0))
                    .to_string(),
            ];
            if let Some(plan) = &options.plan {
                args.extend(["--plan".into(), plan.clone()]);
            }
            if let Some(b) = &options.reclaim_busy_disk {
                args.extend(["--reclaim-busy-disk".into(), b.clone()]);
            }
            for setting in &options.spec_settings {
                args.extend(["--set".into(), setting.clone()]);
            }
            if options.mds > 1 {
                // Every MDS's address: daemons and clients find the active one among them.
                let first_peer = base + 1 + servers + loggers;
                let list: Vec<String> = std::iter::once(base)
                    .chain((0..options.mds as u16 - 1).map(|i| first_peer + i))
                    .map(|p| format!("127.0.0.1:{p}"))
                    .collect();
                args.extend(["--set".into(), format!("mds={}", list.join(","))]);
            }
            let out = Command::new(binary)
                .args(&args)
                .output_within(COMMAND_LIMIT)
                .map_err(|e| format!("{}: {e}", binary.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "cluster spec: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            std::fs::write(&spec_path, &out.stdout).map_err(|e| e.to_string())?;
            base
        };
        let mut c = LocalCluster {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            options,
            base_port,
            procs: BTreeMap::new(),
        };
        c.start_etcd()?;
        c.spawn(Daemon::Mds)?;
        for i in 1..c.options.mds {
            c.spawn(Daemon::MdsPeer(i))?;
        }
        for i in 0..c.loggers() {
            c.spawn(Daemon::Logger(i))?;
        }
        for s in 0..servers as u32 {
            c.spawn(Daemon::Server(s))?;
        }
        Ok(c)
    }

    pub fn servers(&self) -> u32 {
        self.options.racks as u32 * self.options.per_rack
    }

    pub fn loggers(&self) -> usize {
        self.options.racks * self.options.loggers_per_rack
    }

    /// The MDS's address as daemons and clients are given it: every MDS's, comma-separated.
    pub fn mds_addr(&self) -> String {
        std::iter::once(Daemon::Mds)
            .chain((1..self.options.mds).map(Daemon::MdsPeer))
            .map(|d| self.addr(d))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn port(&self, d: Daemon) -> u16 {
        let after_loggers = self.base_port + 1 + self.servers() as u16 + self.loggers() as u16;
        match d {
            Daemon::Mds => self.base_port,
            Daemon::Server(s) => self.base_port + 1 + s as u16,
            Daemon::Logger(i) => self.base_port + 1 + self.servers() as u16 + i as u16,
            Daemon::MdsPeer(i) => after_loggers + i as u16 - 1,
            Daemon::Etcd(j) => after_loggers + self.options.mds.max(1) as u16 - 1 + 2 * j as u16,
        }
    }

    pub fn http_addr(&self, d: Daemon) -> Option<String> {
        match d {
            Daemon::Etcd(_) => None,
            d => Some(format!("127.0.0.1:{}", self.port(d) + 100)),
        }
    }

    /// A daemon's address (an etcd member's: its client address).
    pub fn addr(&self, d: Daemon) -> String {
        format!("127.0.0.1:{}", self.port(d))
    }

    fn args(&self, d: Daemon) -> (Vec<String>, Vec<&'static str>) {
        let dir = |name: String| self.dir.join(name).display().to_string();
        let mut args: Vec<String> = match d {
            Daemon::Mds | Daemon::MdsPeer(_) if self.options.etcd > 0 => vec![
                "cluster".into(),
                "mds".into(),
                "--spec".into(),
                dir("spec.json".into()),
                "--etcd".into(),
                self.etcd_endpoints(),
                "--listen".into(),
                self.addr(d),
                "--mds-lease-seconds".into(),
                self.options.mds_lease_s.to_string(),
            ],
            Daemon::Mds | Daemon::MdsPeer(_) => vec![
                "cluster".into(),
                "mds".into(),
                "--dir".into(),
                dir("mds".into()),
                "--spec".into(),
                dir("spec.json".into()),
            ],
            Daemon::Etcd(j) => self.etcd_args(j),
            Daemon::Server(s) => vec![
                "cluster".into(),
                "server".into(),
                "--dir".into(),
                dir(format!("server{s}")),
                "--mds".into(),
                self.mds_addr(),
                "--id".into(),
                s.to_string(),
                "--wake-seconds".into(),
                self.options.wake_seconds.to_string(),
            ],
            Daemon::Logger(i) => vec![
                "store".into(),
                "serve".into(),
                "--path".into(),
                dir(format!("logger{i}.img")),
                "--size".into(),
                self.options.logger_size.clone(),
                "--sparse".into(),
                "--listen".into(),
                self.addr(d),
                // `cluster spec` puts logger i on rack i mod racks.
                "--rack".into(),
                format!("r{}", i % self.options.racks),
            ],
        };
        if let Some(h) = self.http_addr(d) {
            args.extend(["--http".into(), h]);
        }
        if let (Some(e), Daemon::Server(_) | Daemon::Logger(_)) = (&self.options.emulate, d) {
            args.extend(["--emulate".into(), e.clone()]);
        }
        // With etcd, an MDS stands by first; the first one started leads at once (the
        // others, and any started again, may stand by for long).
        let first_mds = !self
            .procs
            .keys()
            .any(|k| matches!(k, Daemon::Mds | Daemon::MdsPeer(_)));
        let ready = match d {
            Daemon::Mds | Daemon::MdsPeer(_) if self.options.etcd > 0 && first_mds => vec![
                "cordillera cluster mds: standing by",
                "cordillera cluster mds: listening on ",
            ],
            Daemon::Mds | Daemon::MdsPeer(_) if self.options.etcd > 0 => {
                vec!["cordillera cluster mds: standing by"]
            }
            Daemon::Mds | Daemon::MdsPeer(_) => vec!["cordillera cluster mds: listening on "],
            Daemon::Etcd(_) => Vec::new(),
            Daemon::Server(_) => vec!["cordillera cluster server: listening on "],
            Daemon::Logger(_) => vec!["cordillera store: listening on "],
        };
        (args, ready)
    }

    /// Starts (or starts again) one daemon and waits until it listens (an MDS of several: until
    /// it stands by; an etcd member: until it is healthy).
    pub fn spawn(&mut self, d: Daemon) -> Result<(), String> {
        if let Daemon::Etcd(j) = d {
            self.start_etcd_member(j)?;
            return self.wait_etcd_healthy(j, Duration::from_secs(60));
        }
        let (args, ready) = self.args(d);
        let (proc, _) = Proc::spawn_until(&self.binary, &args, &ready)?;
        self.procs.insert(d, proc);
        Ok(())
    }

    /// SIGKILL, waited for.
    pub fn kill(&mut self, d: Daemon) {
        if let Some(mut p) = self.procs.remove(&d) {
            p.kill();
        }
    }

    pub fn pid(&self, d: Daemon) -> Option<u32> {
        self.procs.get(&d).map(Proc::id)
    }

    /// What a daemon printed on standard error.
    pub fn log(&self, d: Daemon) -> String {
        self.procs.get(&d).map_or(String::new(), Proc::log)
    }

    /// Which daemons have exited (with their logs).
    pub fn exited(&mut self) -> Vec<(Daemon, String)> {
        let mut out = Vec::new();
        for (d, p) in self.procs.iter_mut() {
            if let Ok(Some(status)) = p.child.try_wait() {
                out.push((*d, format!("{status}: {}", p.log())));
            }
        }
        out
    }

    /// Watches the daemons until `stop` is set: an MDS of a highly available one that exits is
    /// started again (it stands by); any other daemon exiting is an error naming it.
    pub fn supervise(&mut self, stop: &std::sync::atomic::AtomicBool) -> Result<(), String> {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(200));
            let exited = self.exited();
            let Some((d, why)) = exited.first() else {
                continue;
            };
            if self.options.etcd > 0 && matches!(d, Daemon::Mds | Daemon::MdsPeer(_)) {
                eprintln!("cordillera cluster: {d:?} exited ({why}); starting it again");
                self.spawn(*d)?;
                continue;
            }
            return Err(format!("{d:?} exited ({why}); stopping the cluster"));
        }
        Ok(())
    }

    /// SIGTERM to every daemon, servers first.
    pub fn stop(&mut self) {
        let order: Vec<Daemon> = self.procs.keys().rev().copied().collect();
        for d in order {
            if let Some(mut p) = self.procs.remove(&d) {
                let _ = p.terminate(Duration::from_secs(5));
            }
        }
    }

    /// A daemon's `/status` document.
    pub fn status(&self, d: Daemon) -> Result<serde_json::Value, String> {
        let addr = self.http_addr(d).ok_or("no HTTP endpoint")?;
        let body = http_get(&addr, "/status")?;
        serde_json::from_str(&body).map_err(|e| format!("{addr}/status: {e}"))
    }

    /// `volume serve --cluster` for `object` (created with `size` if missing) on a free port,
    /// with `extra` flags; the process and its NBD URL.
    pub fn start_volume(
        &self,
        object: &str,
        size: &str,
        extra: &[&str],
    ) -> Result<(Proc, String), String> {
        let nbd = crate::process::free_addr().map_err(|e| e.to_string())?;
        let mut args: Vec<String> = [
            "volume",
            "serve",
            "--cluster",
            &self.mds_addr(),
            "--object",
            object,
            "--size",
            size,
            "--nbd",
            &nbd.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let (volume, _) =
            Proc::spawn_until(&self.binary, &args, &["cordillera volume: NBD export at "])?;
        Ok((volume, format!("nbd://{nbd}")))
    }

    /// Sets the gear by hand (`cluster gear`).
    pub fn gear(&self, gear: &str) -> Result<String, String> {
        let out = Command::new(&self.binary)
            .args(["cluster", "gear", gear, "--mds", &self.mds_addr()])
            .output_within(COMMAND_LIMIT)
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// A plain HTTP/1 GET.
pub fn http_get(addr: &str, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("{addr}: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP header")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("{addr}{path}: {head}"));
    }
    Ok(body.to_string())
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        // Procs are killed when dropped.
        self.procs.clear();
    }
}
