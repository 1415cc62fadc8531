//! The campaign's processes: volume servers and stores started as `cordillera` children,
//! SIGKILLed by pid, and store logs damaged while they are down.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::workload::Rng;
use super::BLOCK;

// ---------------------------------------------------------------------------------------------
// Processes.

pub(super) struct Proc {
    child: Child,
}

impl Proc {
    /// Starts `cordillera args…`, its standard error appended to `log`; waits for a line
    /// starting with `wanted` and returns the rest of it.
    pub(super) fn start(args: &[String], log: &Path, wanted: &str) -> Result<(Proc, String)> {
        let (proc, rx) = Proc::spawn(args, log, wanted)?;
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(rest) => Ok((proc, rest)),
            Err(_) => bail!(
                "cordillera {} did not start (see {})",
                args.join(" "),
                log.display()
            ),
        }
    }

    /// Starts `cordillera args…` as [`Proc::start`] does, without waiting: the line starting
    /// with `wanted` (its rest) arrives on the channel.
    pub(super) fn spawn(
        args: &[String],
        log: &Path,
        wanted: &str,
    ) -> Result<(Proc, mpsc::Receiver<String>)> {
        let exe = crate::this_program().context("locating this program")?;
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting a server")?;
        let stderr = child.stderr.take().expect("piped");
        let mut file = OpenOptions::new().create(true).append(true).open(log)?;
        let (tx, rx) = mpsc::channel();
        let wanted = wanted.to_string();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(file, "{line}");
                if let Some(rest) = line.strip_prefix(&wanted) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(rest.to_string());
                    }
                }
            }
        });
        Ok((Proc { child }, rx))
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits for the process to exit (SIGKILL after 30 s).
    pub(super) fn stop(&mut self) {
        // SAFETY: plain kill(2) on a child we started and have not reaped.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SIGSTOP by pid from another thread after `after`, then SIGCONT `stalled` later: the
/// process and its connections stall (TCP holds what is sent meanwhile, in order) and go on.
pub(super) fn stall_later(
    pid: u32,
    after: Duration,
    stalled: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        // SAFETY: plain kill(2) on a child we started and have not reaped.
        unsafe {
            libc::kill(pid as i32, libc::SIGSTOP);
        }
        std::thread::sleep(stalled);
        // SAFETY: as above.
        unsafe {
            libc::kill(pid as i32, libc::SIGCONT);
        }
    })
}

/// SIGKILL by pid from another thread, after `after`.
pub(super) fn kill_later(pid: u32, after: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        // SAFETY: plain kill(2) on a child we started and have not reaped.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    })
}

/// The volume server's line once it exports.
const VOLUME_READY: &str = "cordillera volume: NBD export at nbd://";

pub(super) fn free_port() -> Result<SocketAddr> {
    Ok(cordillera_procs::process::free_addr()?)
}

// ---------------------------------------------------------------------------------------------
// Clusters and events.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// N-way 1, one 256 MiB store, off-loading in peaks.
    One,
    /// N-way 1, one 32 MiB store, every write off-loaded: the log fills and is cleaned.
    SmallStore,
    /// N-way 2 over three 128 MiB stores.
    Two,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::One => "n-way 1",
            Kind::SmallStore => "n-way 1, small store",
            Kind::Two => "n-way 2",
        }
    }
}

pub(super) struct Cluster {
    pub(super) kind: Kind,
    pub(super) dir: PathBuf,
    pub(super) store_addrs: Vec<SocketAddr>,
    pub(super) stores: Vec<Option<Proc>>,
    pub(super) volume: Option<(Proc, SocketAddr)>,
    pub(super) base: PathBuf,
    /// The volume reaches each store through a proxy, whose link can stall or drop.
    pub(super) links: Vec<cordillera_faults::LinkProxy>,
}

impl Cluster {
    pub(super) fn start(kind: Kind, dir: PathBuf, blocks: u64) -> Result<Cluster> {
        std::fs::create_dir_all(&dir)?;
        let n = if kind == Kind::Two { 3 } else { 1 };
        let mut c = Cluster {
            kind,
            base: dir.join("base.img"),
            dir,
            store_addrs: Vec::new(),
            stores: Vec::new(),
            volume: None,
            links: Vec::new(),
        };
        for i in 0..n {
            c.store_addrs.push(free_port()?);
            c.stores.push(None);
            c.start_store(i)?;
        }
        let file = std::fs::File::create(&c.base)?;
        file.set_len(blocks * BLOCK + (1 << 20))?;
        let mut flags: Vec<String> = vec!["--format".into()];
        match kind {
            Kind::One => flags.extend(["--t-base".into(), "1".into()]),
            Kind::SmallStore => flags.extend(["--policy".into(), "always".into()]),
            Kind::Two => {
                flags.extend(["--t-base".into(), "1".into(), "--n-way".into(), "2".into()])
            }
        }
        for a in c.store_addrs.clone() {
            let link = cordillera_faults::LinkProxy::start(a).context("a store's link")?;
            flags.extend(["--store".into(), link.addr().to_string()]);
            c.links.push(link);
        }
        c.start_volume(&flags)?;
        Ok(c)
    }

    pub(super) fn store_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("store{}.log", i + 1))
    }

    pub(super) fn start_store(&mut self, i: usize) -> Result<()> {
        let size = if self.kind == Kind::SmallStore {
            "32m"
        } else if self.kind == Kind::One {
            "256m"
        } else {
            "128m"
        };
        let args: Vec<String> = [
            "store",
            "serve",
            "--path",
            self.store_path(i).to_str().expect("utf-8 path"),
            "--size",
            size,
            "--io",
            "buffered",
            "--listen",
            &self.store_addrs[i].to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let log = self.dir.join(format!("store{}.stderr", i + 1));
        let (p, _) = Proc::start(&args, &log, "cordillera store: listening on ")?;
        self.stores[i] = Some(p);
        Ok(())
    }

    /// Starts the volume server; returns how long it took to export.
    pub(super) fn start_volume(&mut self, extra: &[String]) -> Result<Duration> {
        let args = self.volume_args(extra);
        let started = Instant::now();
        let log = self.dir.join("volume.stderr");
        let (p, rest) = Proc::start(&args, &log, VOLUME_READY)?;
        let addr: SocketAddr = rest
            .trim()
            .parse()
            .map_err(|e| anyhow!("NBD address {rest:?}: {e}"))?;
        self.volume = Some((p, addr));
        Ok(started.elapsed())
    }

    fn volume_args(&self, extra: &[String]) -> Vec<String> {
        let mut args: Vec<String> = [
            "volume",
            "serve",
            "--base",
            self.base.to_str().expect("utf-8 path"),
            "--nbd",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend_from_slice(extra);
        args
    }

    /// Restarts the volume server while store `down` is stopped. It must export within
    /// `within` serving from the other copies, unless its log says the superblock is marked
    /// degraded (a write was acknowledged with fewer than N copies, so the down store may hold
    /// the only one): then the store is started and the volume must export after it. Returns
    /// the time to export and whether the store had to be started first.
    pub(super) fn start_volume_with_store_down(
        &mut self,
        down: usize,
        within: Duration,
    ) -> Result<(Duration, bool)> {
        let args = self.volume_args(&[]);
        let started = Instant::now();
        let log = self.dir.join("volume.stderr");
        let log_before = std::fs::metadata(&log).map_or(0, |m| m.len());
        let (p, rx) = Proc::spawn(&args, &log, VOLUME_READY)?;
        let (rest, needed_store) = match rx.recv_timeout(within) {
            Ok(rest) => (rest, false),
            Err(_) => {
                let text = std::fs::read(&log).unwrap_or_default();
                let since = String::from_utf8_lossy(&text[(log_before as usize).min(text.len())..])
                    .into_owned();
                if !since.contains("the superblock is marked degraded") {
                    bail!(
                        "the volume did not export within {within:?} with store {} down, and its log does not say it must wait for every store (see {})",
                        down + 1,
                        log.display()
                    );
                }
                self.start_store(down)?;
                match rx.recv_timeout(Duration::from_secs(120)) {
                    Ok(rest) => (rest, true),
                    Err(_) => bail!(
                        "the volume did not export after store {} returned (see {})",
                        down + 1,
                        log.display()
                    ),
                }
            }
        };
        let addr: SocketAddr = rest
            .trim()
            .parse()
            .map_err(|e| anyhow!("NBD address {rest:?}: {e}"))?;
        self.volume = Some((p, addr));
        Ok((started.elapsed(), needed_store))
    }

    pub(super) fn nbd(&self) -> SocketAddr {
        self.volume.as_ref().expect("a volume").1
    }
}

/// Damages a stopped store's log past its superblocks; says how.
pub(super) fn damage(path: &Path, rng: &mut Rng) -> Result<String> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    let skip = 64 * 1024; // the superblocks: a store without them is a lost store, not a damaged one
    if len <= skip + (1 << 20) {
        bail!("{} is too small to damage", path.display());
    }
    let at = skip + rng.below(len - skip - (1 << 20));
    Ok(match rng.below(3) {
        0 => {
            for _ in 0..16 {
                let pos = at + rng.below(1 << 20);
                let mut b = [0u8; 1];
                file.read_exact_at(&mut b, pos)?;
                b[0] ^= 1 << rng.below(8);
                file.write_all_at(&b, pos)?;
            }
            format!("16 bits flipped in the MiB at {at}")
        }
        1 => {
            let n = 4096 * (1 + rng.below(64));
            file.write_all_at(&vec![0u8; n as usize], at)?;
            format!("{n} bytes zeroed at {at}")
        }
        _ => {
            file.set_len(at)?;
            file.set_len(len)?;
            format!("cut at {at} (the tail reads as zeros)")
        }
    })
}
