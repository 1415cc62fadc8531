//! `cordillera chaos`: a kill campaign against real processes. It starts a volume server with
//! its stores (N-way 1 with a roomy or a small store, N-way 2 over three stores), drives
//! patterned writes (4–64 KiB, some with FUA, flushes between) and reads through the NBD export,
//! SIGKILLs a volume server or a store at random moments, restarts it, and after every kill
//! reads the whole region back and checks every block against the ledger of acknowledged
//! writes. With N-way 2 it also restarts the volume while a store is down (the volume must serve
//! within seconds) and damages a stopped store's log (flipped bytes, a zeroed range, a cut tail)
//! before restarting it (reads must stay correct from the other copy).
//!
//! The seed fixes the plan (clusters, events, their timing, the requests); the processes'
//! interleaving is the machine's, so a seed replays the plan, not the exact schedule.

use std::collections::{BTreeSet, HashMap};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cordillera_wire::nbd;

const BLOCK: u64 = 4096;
/// Longest wait for a reply before the server counts as stalled.
const STALL: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
pub struct ChaosArgs {
    /// How long the campaign runs (it finishes the event in progress).
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
    /// Seed of the plan (default: drawn from the clock; printed, with how to run it again).
    #[arg(long)]
    seed: Option<u64>,
    /// Work directory for the stores, base volumes and logs (default: a temporary one,
    /// removed at the end unless something was lost).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Size of the region written and checked, in 4 KiB blocks.
    #[arg(long, default_value_t = 4096)]
    blocks: u64,
    /// Requests in flight.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// xorshift64*: the plan's randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

fn pattern(block: u64, version: u64) -> Vec<u8> {
    let fill = (block.wrapping_mul(0x9e37_79b9) ^ version.wrapping_mul(31)) as u8;
    let mut data = vec![fill; BLOCK as usize];
    data[..8].copy_from_slice(&version.to_le_bytes());
    data[8..16].copy_from_slice(&block.to_le_bytes());
    data
}

// ---------------------------------------------------------------------------------------------
// The ledger: what every block may hold.

#[derive(Default)]
struct Ledger {
    /// Per block: the last acknowledged version (0: never written) and every version sent
    /// since that may have landed.
    acked: Vec<u64>,
    maybe: Vec<BTreeSet<u64>>,
    next_version: u64,
}

impl Ledger {
    fn new(blocks: u64) -> Ledger {
        Ledger {
            acked: vec![0; blocks as usize],
            maybe: vec![BTreeSet::new(); blocks as usize],
            next_version: 1,
        }
    }

    /// Why `data` is not an acceptable content of `block`, if it is not.
    fn check(&self, block: u64, data: &[u8]) -> Option<String> {
        let b = block as usize;
        let version = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
        if version == 0 && data.iter().all(|x| *x == 0) {
            return (self.acked[b] != 0).then(|| {
                format!(
                    "block {block}: reads as zeros; acknowledged version {} lost",
                    self.acked[b]
                )
            });
        }
        if data != pattern(block, version) {
            return Some(format!(
                "block {block}: torn or foreign data (header says version {version})"
            ));
        }
        if version == self.acked[b] || (version > self.acked[b] && self.maybe[b].contains(&version))
        {
            return None;
        }
        Some(format!(
            "block {block}: reads version {version}; acknowledged version {} {}",
            self.acked[b],
            if version < self.acked[b] {
                "lost (an older write came back)"
            } else {
                "superseded by a version never written"
            }
        ))
    }

    /// After a full read-back: what was read is what the block holds from now on.
    fn settle(&mut self, block: u64, data: &[u8]) {
        let b = block as usize;
        let version = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
        self.acked[b] = self.acked[b].max(version);
        let acked = self.acked[b];
        self.maybe[b].retain(|v| *v > acked);
    }
}

// ---------------------------------------------------------------------------------------------
// A blocking NBD client (fixed newstyle, NBD_OPT_GO, simple replies).

struct Nbd {
    s: TcpStream,
}

impl Nbd {
    fn connect(addr: SocketAddr) -> Result<Nbd> {
        let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(STALL))?;
        let mut greeting = [0u8; 18];
        s.read_exact(&mut greeting)?;
        s.write_all(&(nbd::FLAG_C_FIXED_NEWSTYLE | nbd::FLAG_C_NO_ZEROES).to_be_bytes())?;
        let mut h = nbd::IHAVEOPT.to_be_bytes().to_vec();
        h.extend_from_slice(&nbd::OPT_GO.to_be_bytes());
        h.extend_from_slice(&6u32.to_be_bytes());
        h.extend_from_slice(&[0; 6]);
        s.write_all(&h)?;
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h)?;
            let kind = u32::from_be_bytes(h[12..16].try_into().expect("4 bytes"));
            let mut data = vec![0u8; u32::from_be_bytes(h[16..20].try_into().expect("4")) as usize];
            s.read_exact(&mut data)?;
            match kind {
                nbd::REP_ACK => return Ok(Nbd { s }),
                nbd::REP_INFO => {}
                other => bail!("NBD option refused ({other:#x})"),
            }
        }
    }

    fn send(
        &mut self,
        command: nbd::Command,
        flags: u16,
        handle: u64,
        offset: u64,
        data: &[u8],
        length: u32,
    ) -> std::io::Result<()> {
        let r = nbd::Request {
            flags,
            command,
            handle,
            offset,
            length,
        };
        let mut frame = nbd::encode_request(&r).to_vec();
        frame.extend_from_slice(data);
        self.s.write_all(&frame)
    }

    /// The next reply header: (handle, error).
    fn receive(&mut self) -> std::io::Result<(u64, u32)> {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h)?;
        if u32::from_be_bytes(h[..4].try_into().expect("4 bytes")) != nbd::SIMPLE_REPLY_MAGIC {
            return Err(std::io::Error::other("bad NBD reply magic"));
        }
        Ok((
            u64::from_be_bytes(h[8..16].try_into().expect("8 bytes")),
            u32::from_be_bytes(h[4..8].try_into().expect("4 bytes")),
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The workload.

enum Op {
    Write { first: u64, versions: Vec<u64> },
    Read { first: u64, count: u64 },
    Flush,
}

#[derive(Default)]
struct Figures {
    writes_acked: u64,
    fua_writes: u64,
    flushes: u64,
    reads_checked: u64,
    refused_writes: u64,
    blocks_verified: u64,
}

/// Random requests until `until`, then waits for those in flight. Returns `Ok(false)` when the
/// connection broke (the server died), `Err` on a wrong read or a stall.
fn drive(
    addr: SocketAddr,
    ledger: &mut Ledger,
    rng: &mut Rng,
    depth: usize,
    until: Instant,
    figures: &mut Figures,
) -> Result<bool> {
    let Ok(mut nbd) = Nbd::connect(addr) else {
        return Ok(false);
    };
    let blocks = ledger.acked.len() as u64;
    let mut in_flight: HashMap<u64, Op> = HashMap::new();
    let mut busy = vec![false; blocks as usize];
    let mut handle = 0u64;
    let mut since_flush = 0;
    loop {
        while in_flight.len() < depth && Instant::now() < until {
            handle += 1;
            let count = 1 + rng.below(16);
            let first = rng.below(blocks - count + 1);
            let range = first as usize..(first + count) as usize;
            if since_flush >= 64 {
                since_flush = 0;
                if nbd.send(nbd::Command::Flush, 0, handle, 0, &[], 0).is_err() {
                    return Ok(false);
                }
                in_flight.insert(handle, Op::Flush);
                continue;
            }
            if busy[range.clone()].iter().any(|b| *b) {
                break;
            }
            if rng.chance(0.3) {
                if nbd
                    .send(
                        nbd::Command::Read,
                        0,
                        handle,
                        first * BLOCK,
                        &[],
                        (count * BLOCK) as u32,
                    )
                    .is_err()
                {
                    return Ok(false);
                }
                // Reads too hold their blocks: what they may return is then fixed.
                busy[range].iter_mut().for_each(|b| *b = true);
                in_flight.insert(handle, Op::Read { first, count });
                continue;
            }
            let mut data = Vec::with_capacity((count * BLOCK) as usize);
            let mut versions = Vec::with_capacity(count as usize);
            for b in first..first + count {
                let v = ledger.next_version;
                ledger.next_version += 1;
                ledger.maybe[b as usize].insert(v);
                versions.push(v);
                data.extend_from_slice(&pattern(b, v));
            }
            let fua = rng.chance(0.1);
            let flags = if fua { nbd::CMD_FLAG_FUA } else { 0 };
            figures.fua_writes += fua as u64;
            since_flush += 1;
            if nbd
                .send(
                    nbd::Command::Write,
                    flags,
                    handle,
                    first * BLOCK,
                    &data,
                    data.len() as u32,
                )
                .is_err()
            {
                return Ok(false);
            }
            busy[range].iter_mut().for_each(|b| *b = true);
            in_flight.insert(handle, Op::Write { first, versions });
        }
        if in_flight.is_empty() {
            return Ok(true);
        }
        let (h, error) = match nbd.receive() {
            Ok(r) => r,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                bail!(
                    "stall: {} requests unanswered for {STALL:?}",
                    in_flight.len()
                )
            }
            Err(_) => return Ok(false),
        };
        let Some(op) = in_flight.remove(&h) else {
            bail!("a reply to handle {h}, which is not in flight");
        };
        match op {
            Op::Flush => {
                if error != 0 {
                    bail!("flush failed with error {error}");
                }
                figures.flushes += 1;
            }
            Op::Write { first, versions } => {
                for (i, v) in versions.iter().enumerate() {
                    let b = first as usize + i;
                    busy[b] = false;
                    if error == 0 {
                        ledger.acked[b] = ledger.acked[b].max(*v);
                        let acked = ledger.acked[b];
                        ledger.maybe[b].retain(|x| *x > acked);
                    }
                }
                if error == 0 {
                    figures.writes_acked += 1;
                } else {
                    // ENOSPC from full stores: not acknowledged, may or may not have landed.
                    figures.refused_writes += 1;
                }
            }
            Op::Read { first, count } => {
                let mut data = vec![0u8; (count * BLOCK) as usize];
                if error == 0 && nbd.s.read_exact(&mut data).is_err() {
                    return Ok(false);
                }
                for i in 0..count {
                    busy[(first + i) as usize] = false;
                }
                if error != 0 {
                    bail!("read of {count} blocks at block {first} failed with error {error}");
                }
                for i in 0..count {
                    let at = (i * BLOCK) as usize;
                    if let Some(why) = ledger.check(first + i, &data[at..at + BLOCK as usize]) {
                        bail!("read during the load: {why}");
                    }
                }
                figures.reads_checked += 1;
            }
        }
    }
}

/// Reads the whole region back and checks every block; then what was read is the new baseline.
fn verify(addr: SocketAddr, ledger: &mut Ledger, figures: &mut Figures) -> Result<()> {
    let mut nbd = Nbd::connect(addr)?;
    let blocks = ledger.acked.len() as u64;
    let chunk = 16u64;
    let mut next = 0u64;
    let mut in_flight = 0;
    let mut bad = Vec::new();
    let mut replies = 0;
    while replies < blocks.div_ceil(chunk) {
        while next < blocks && in_flight < 8 {
            let count = chunk.min(blocks - next);
            nbd.send(
                nbd::Command::Read,
                0,
                next,
                next * BLOCK,
                &[],
                (count * BLOCK) as u32,
            )
            .context("verify: sending a read")?;
            next += count;
            in_flight += 1;
        }
        let (first, error) = nbd.receive().context("verify: waiting for a read")?;
        in_flight -= 1;
        replies += 1;
        if error != 0 {
            bail!("verify: read at block {first} failed with error {error}");
        }
        let count = chunk.min(blocks - first);
        let mut data = vec![0u8; (count * BLOCK) as usize];
        nbd.s
            .read_exact(&mut data)
            .context("verify: reading data")?;
        for i in 0..count {
            let at = (i * BLOCK) as usize;
            let block = &data[at..at + BLOCK as usize];
            match ledger.check(first + i, block) {
                Some(why) => bad.push(why),
                None => ledger.settle(first + i, block),
            }
        }
    }
    figures.blocks_verified += blocks;
    if !bad.is_empty() {
        bail!(
            "{} blocks wrong after the restart; first: {}",
            bad.len(),
            bad[..bad.len().min(5)].join("; ")
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Processes.

struct Proc {
    child: Child,
}

impl Proc {
    /// Starts `cordillera args…`, its standard error appended to `log`; waits for a line
    /// starting with `wanted` and returns the rest of it.
    fn start(args: &[String], log: &Path, wanted: &str) -> Result<(Proc, String)> {
        let exe = std::env::current_exe().context("locating this program")?;
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
        let proc = Proc { child };
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(rest) => Ok((proc, rest)),
            Err(_) => bail!(
                "cordillera {} did not start (see {})",
                args.join(" "),
                log.display()
            ),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SIGKILL by pid from another thread, after `after`.
fn kill_later(pid: u32, after: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        // SAFETY: plain kill(2) on a child we started and have not reaped.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    })
}

fn free_port() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

// ---------------------------------------------------------------------------------------------
// Clusters and events.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// N-way 1, one 256 MiB store, off-loading in peaks.
    One,
    /// N-way 1, one 32 MiB store, every write off-loaded: the log fills and is cleaned.
    SmallStore,
    /// N-way 2 over three 128 MiB stores.
    Two,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::One => "n-way 1",
            Kind::SmallStore => "n-way 1, small store",
            Kind::Two => "n-way 2",
        }
    }
}

struct Cluster {
    kind: Kind,
    dir: PathBuf,
    store_addrs: Vec<SocketAddr>,
    stores: Vec<Option<Proc>>,
    volume: Option<(Proc, SocketAddr)>,
    base: PathBuf,
}

impl Cluster {
    fn start(kind: Kind, dir: PathBuf, blocks: u64) -> Result<Cluster> {
        std::fs::create_dir_all(&dir)?;
        let n = if kind == Kind::Two { 3 } else { 1 };
        let mut c = Cluster {
            kind,
            base: dir.join("base.img"),
            dir,
            store_addrs: Vec::new(),
            stores: Vec::new(),
            volume: None,
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
        for a in &c.store_addrs {
            flags.extend(["--store".into(), a.to_string()]);
        }
        c.start_volume(&flags)?;
        Ok(c)
    }

    fn store_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("store{}.log", i + 1))
    }

    fn start_store(&mut self, i: usize) -> Result<()> {
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
    fn start_volume(&mut self, extra: &[String]) -> Result<Duration> {
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
        let started = Instant::now();
        let log = self.dir.join("volume.stderr");
        let (p, rest) = Proc::start(&args, &log, "cordillera volume: NBD export at nbd://")?;
        let addr: SocketAddr = rest
            .trim()
            .parse()
            .map_err(|e| anyhow!("NBD address {rest:?}: {e}"))?;
        self.volume = Some((p, addr));
        Ok(started.elapsed())
    }

    fn nbd(&self) -> SocketAddr {
        self.volume.as_ref().expect("a volume").1
    }
}

/// Damages a stopped store's log past its superblocks; says how.
fn damage(path: &Path, rng: &mut Rng) -> Result<String> {
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

#[derive(Default)]
struct Campaign {
    clusters: u64,
    kills_volume: u64,
    kills_store: u64,
    kills_both: u64,
    damaged: u64,
    figures: Figures,
    /// Seconds from restarting the volume to its export, with a store down (N-way 2).
    restart_with_store_down: Vec<f64>,
    restart: Vec<f64>,
}

pub fn run(args: ChaosArgs) -> Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let minutes = args.minutes;
    if !(minutes > 0.0) {
        bail!("--minutes must be positive");
    }
    if args.blocks < 64 || args.depth == 0 {
        bail!("--blocks must be at least 64 and --depth at least 1");
    }
    let temp;
    let root = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    eprintln!(
        "cordillera chaos: seed {seed}, {minutes} min, {} blocks at depth {}; plan again with: cordillera chaos --seed {seed} --minutes {minutes}",
        args.blocks, args.depth
    );
    let deadline = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let mut rng = Rng(seed | 1);
    let mut c = Campaign::default();
    let kinds = [Kind::Two, Kind::One, Kind::Two, Kind::SmallStore];
    let mut outcome = Ok(());
    while Instant::now() < deadline && outcome.is_ok() {
        let kind = kinds[(c.clusters % kinds.len() as u64) as usize];
        let dir = root.join(format!("cluster{}", c.clusters));
        c.clusters += 1;
        outcome =
            campaign_cluster(kind, &dir, &args, &mut rng, deadline, &mut c).with_context(|| {
                format!(
                    "cluster {} ({}), in {}",
                    c.clusters,
                    kind.name(),
                    dir.display()
                )
            });
        if outcome.is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let f = &c.figures;
    let stat = |v: &Vec<f64>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            let max = v.iter().copied().fold(0.0, f64::max);
            format!(
                "{} (mean {:.2} s, max {:.2} s)",
                v.len(),
                v.iter().sum::<f64>() / v.len() as f64,
                max
            )
        }
    };
    if args.json {
        let mean_max = |v: &Vec<f64>| {
            serde_json::json!({
                "count": v.len(),
                "mean_seconds": if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 },
                "max_seconds": v.iter().copied().fold(0.0, f64::max),
            })
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "seed": seed,
                "minutes": minutes,
                "clusters": c.clusters,
                "kills": {
                    "volume": c.kills_volume,
                    "store": c.kills_store,
                    "volume_and_store": c.kills_both,
                    "total": c.kills_volume + c.kills_store + 2 * c.kills_both,
                },
                "damaged_store_logs": c.damaged,
                "writes_acknowledged": f.writes_acked,
                "fua_writes": f.fua_writes,
                "flushes": f.flushes,
                "reads_checked": f.reads_checked,
                "refused_writes": f.refused_writes,
                "blocks_verified": f.blocks_verified,
                "restarts": mean_max(&c.restart),
                "restarts_with_a_store_down": mean_max(&c.restart_with_store_down),
                "loss": outcome.as_ref().err().map(|e| format!("{e:#}")),
            }))?
        );
    } else {
        println!("chaos campaign, seed {seed}: {} clusters", c.clusters);
        println!(
            "  kills: {} volume servers, {} stores, {} volume server and store together ({} processes)",
            c.kills_volume,
            c.kills_store,
            c.kills_both,
            c.kills_volume + c.kills_store + 2 * c.kills_both
        );
        println!("  damaged store logs (N-way 2): {}", c.damaged);
        println!(
            "  writes acknowledged: {} ({} with FUA), flushes {}, reads checked during the load {}, writes refused (ENOSPC) {}",
            f.writes_acked, f.fua_writes, f.flushes, f.reads_checked, f.refused_writes
        );
        println!(
            "  blocks read back and checked after kills: {}",
            f.blocks_verified
        );
        println!("  volume restarts: {}", stat(&c.restart));
        println!(
            "  volume restarts with a store down (N-way 2): {}",
            stat(&c.restart_with_store_down)
        );
    }
    match outcome {
        Ok(()) => {
            println!("no acknowledged write lost");
            Ok(())
        }
        Err(e) => {
            if args.dir.is_none() {
                // Keep the evidence.
                let kept = std::env::temp_dir().join(format!("cordillera-chaos-{seed}"));
                let _ = std::fs::rename(&root, &kept);
                eprintln!("cordillera chaos: logs and data kept in {}", kept.display());
            }
            Err(e.context(format!(
                "reproduce the plan: cordillera chaos --seed {seed} --minutes {minutes}"
            )))
        }
    }
}

fn campaign_cluster(
    kind: Kind,
    dir: &Path,
    args: &ChaosArgs,
    rng: &mut Rng,
    deadline: Instant,
    c: &mut Campaign,
) -> Result<()> {
    let mut cluster = Cluster::start(kind, dir.to_path_buf(), args.blocks)?;
    let mut ledger = Ledger::new(args.blocks);
    let events = 4 + rng.below(5);
    for _ in 0..events {
        if Instant::now() >= deadline {
            break;
        }
        let load = rng.millis(300, 2500);
        let roll = rng.below(100);
        let n = cluster.stores.len();
        match (kind, roll) {
            (_, 0..=44) => {
                // The volume server, mid-load.
                let pid = cluster.volume.as_ref().expect("volume").0.pid();
                let killer = kill_later(pid, rng.millis(100, load.as_millis() as u64));
                drive(
                    cluster.nbd(),
                    &mut ledger,
                    rng,
                    args.depth,
                    Instant::now() + load,
                    &mut c.figures,
                )?;
                killer.join().expect("killer");
                cluster.volume.take().expect("volume").0.kill();
                c.kills_volume += 1;
                let took = cluster.start_volume(&[])?;
                c.restart.push(took.as_secs_f64());
                verify(cluster.nbd(), &mut ledger, &mut c.figures)
                    .context("after a volume server SIGKILL")?;
            }
            (Kind::Two, 45..=64) => {
                // The volume server and a store together; the volume restarts at once and must
                // serve from the other copies; the store comes back later.
                let s = rng.below(n as u64) as usize;
                let pid = cluster.volume.as_ref().expect("volume").0.pid();
                let at = rng.millis(100, load.as_millis() as u64);
                let killer = kill_later(pid, at);
                let store_pid = cluster.stores[s].as_ref().expect("store").pid();
                let store_killer = kill_later(store_pid, at);
                drive(
                    cluster.nbd(),
                    &mut ledger,
                    rng,
                    args.depth,
                    Instant::now() + load,
                    &mut c.figures,
                )?;
                killer.join().expect("killer");
                store_killer.join().expect("killer");
                cluster.volume.take().expect("volume").0.kill();
                cluster.stores[s].take().expect("store").kill();
                c.kills_both += 1;
                let took = cluster.start_volume(&[])?;
                c.restart_with_store_down.push(took.as_secs_f64());
                verify(cluster.nbd(), &mut ledger, &mut c.figures)
                    .context("after a restart with a store down")?;
                let more = rng.millis(300, 1500);
                if !drive(
                    cluster.nbd(),
                    &mut ledger,
                    rng,
                    args.depth,
                    Instant::now() + more,
                    &mut c.figures,
                )? {
                    bail!(
                        "the volume server died while a store was down (see {})",
                        dir.join("volume.stderr").display()
                    );
                }
                cluster.start_store(s)?;
                verify(cluster.nbd(), &mut ledger, &mut c.figures)
                    .context("after the store returned")?;
            }
            (Kind::Two, 65..=79) => {
                // A store, mid-load; its log damaged while it is down.
                let s = rng.below(n as u64) as usize;
                let pid = cluster.stores[s].as_ref().expect("store").pid();
                let killer = kill_later(pid, rng.millis(100, load.as_millis() as u64));
                if !drive(
                    cluster.nbd(),
                    &mut ledger,
                    rng,
                    args.depth,
                    Instant::now() + load,
                    &mut c.figures,
                )? {
                    bail!(
                        "the volume server died when a store did (see {})",
                        dir.join("volume.stderr").display()
                    );
                }
                killer.join().expect("killer");
                cluster.stores[s].take().expect("store").kill();
                c.kills_store += 1;
                let how = damage(&cluster.store_path(s), rng)?;
                c.damaged += 1;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("events.log"))?
                    .write_all(format!("store {} damaged: {how}\n", s + 1).as_bytes())?;
                cluster.start_store(s)?;
                let more = Instant::now() + rng.millis(300, 1500);
                drive(
                    cluster.nbd(),
                    &mut ledger,
                    rng,
                    args.depth,
                    more,
                    &mut c.figures,
                )?;
                verify(cluster.nbd(), &mut ledger, &mut c.figures)
                    .with_context(|| format!("after store {} was damaged ({how})", s + 1))?;
            }
            _ => {
                // A store, mid-load; back after a while. The volume keeps serving.
                let s = rng.below(n as u64) as usize;
                let pid = cluster.stores[s].as_ref().expect("store").pid();
                let at = rng.millis(100, load.as_millis() as u64);
                let killer = kill_later(pid, at);
                let down = rng.millis(200, 2000);
                let store_path_log = dir.join("volume.stderr");
                let until = Instant::now() + load.max(at + down);
                // The store is restarted while the load runs: N-way 1 reads of data only there
                // wait for it.
                let restart_at = Instant::now() + at + down;
                let addr = cluster.nbd();
                let handle = std::thread::scope(|scope| -> Result<bool> {
                    let load = scope
                        .spawn(|| drive(addr, &mut ledger, rng, args.depth, until, &mut c.figures));
                    killer.join().expect("killer");
                    let wait = restart_at.saturating_duration_since(Instant::now());
                    std::thread::sleep(wait);
                    cluster.stores[s].take().expect("store").kill();
                    cluster.start_store(s)?;
                    load.join().expect("load")
                })?;
                c.kills_store += 1;
                if !handle {
                    bail!(
                        "the volume server died when a store did (see {})",
                        store_path_log.display()
                    );
                }
                verify(cluster.nbd(), &mut ledger, &mut c.figures)
                    .context("after a store SIGKILL")?;
            }
        }
    }
    for s in cluster.stores.iter_mut().flatten() {
        s.kill();
    }
    if let Some((v, _)) = cluster.volume.as_mut() {
        v.kill();
    }
    Ok(())
}
