//! `cordillera volume serve`: a base volume (a file or block device) exported over NBD, with the
//! off-loading client core (`cordillera_offload::Client`) between the export and the base
//! volume, sending writes to `cordillera store serve` processes over TCP when the base volume
//! is loaded (Everest §3.2).
//!
//! # Layout of the base volume
//!
//! ```text
//! [0, size − 8 KiB)            the export (what NBD clients see)
//! [size − 8 KiB, size − 4 KiB)  the client core's store set (`cordillera_offload::superblock`)
//! [size − 4 KiB, size)          the volume label ([`Label`]): identity and store addresses
//! ```
//!
//! The label is written last when a volume is formatted, so a volume with a label is complete.
//!
//! # Tasks
//!
//! One task owns the client core; NBD connections, the base volume's worker threads and one
//! link per store feed it events and receive what it produces. Writes the core sends to the
//! base volume run on worker threads ([`Disk`]); FLUSH is an `fdatasync` of the base volume:
//! off-loaded writes are acknowledged only once durable on their stores, so after it every
//! acknowledged write is durable somewhere.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cordillera_offload::superblock::SUPERBLOCK_BYTES;
use cordillera_offload::{
    BaseDone, BaseOp, Client, ClientError, Config, Policy, RecoveryWait, StoreInfo, UpReply, Upward,
};
use cordillera_vstore::store::{DiskDone, DiskOp};
use cordillera_wire::store::{encode, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::disk::{Disk, DiskError, DiskFile, IoMode};
use crate::emulate::{EmulateSpec, Emulator};
use crate::nbd_server::{self, Backend, Completion, ExportConfig, Op};
use crate::store_server::{read_frames, write_frames};
use crate::warm_cache::{CacheOptions, Ticket, WarmCache};

/// Bytes at the end of the base volume holding the [`Label`].
pub const LABEL_BYTES: u64 = 4096;
/// Bytes at the end of the base volume not exported: the label and the store set.
pub const RESERVED_BYTES: u64 = LABEL_BYTES + SUPERBLOCK_BYTES;
/// Upward requests are cut into pieces of at most this (a store record holds at most 16 MiB).
const PIECE_BYTES: u64 = 4 << 20;
/// Base reads up to this size are tried in place when the page cache holds them
/// ([`DiskFile::read_cached`]); larger ones always go to the disk's workers, so that the core's
/// task never spends long on one copy.
const CACHED_READ_MAX: u64 = 128 << 10;
/// A store request unanswered this long marks the store failed.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait at start for the stores to be reached (or refuse) before recovery asks them:
/// recovery starts at once when every store has connected or refused a connection.
const CONNECT_GRACE: Duration = Duration::from_secs(5);

/// The volume label: which client this volume is to its stores, and where they are.
///
/// ```text
/// offset  size  field
/// 0       8     magic "CDVOLLB1"
/// 8       8     client id (random at format; the stores key records by it)
/// 16      8     volume id
/// 24      4     n_way
/// 28      4     store count n (≤ 64)
/// 32      …     n × (u16 length, address bytes "host:port")
/// …       4     CRC32C of the bytes before it
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub client: u64,
    pub volume: u64,
    pub n_way: u32,
    /// Store `i` of the store set (id `i + 1`) is at `stores[i]`.
    pub stores: Vec<String>,
}

const LABEL_MAGIC: &[u8; 8] = b"CDVOLLB1";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    #[error("no volume label (not formatted for off-loading)")]
    Missing,
    #[error("the volume label is damaged (checksum mismatch or bad lengths)")]
    Damaged,
    #[error("the store addresses do not fit in the label")]
    TooLarge,
}

impl Label {
    pub fn encode(&self) -> Result<Vec<u8>, LabelError> {
        let mut out = Vec::with_capacity(LABEL_BYTES as usize);
        out.extend_from_slice(LABEL_MAGIC);
        out.extend_from_slice(&self.client.to_le_bytes());
        out.extend_from_slice(&self.volume.to_le_bytes());
        out.extend_from_slice(&self.n_way.to_le_bytes());
        out.extend_from_slice(&(self.stores.len() as u32).to_le_bytes());
        for a in &self.stores {
            let bytes = a.as_bytes();
            if bytes.len() > u16::MAX as usize {
                return Err(LabelError::TooLarge);
            }
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        if out.len() > LABEL_BYTES as usize || self.stores.len() > 64 {
            return Err(LabelError::TooLarge);
        }
        out.resize(LABEL_BYTES as usize, 0);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<Label, LabelError> {
        if bytes.len() < 32 || &bytes[..8] != LABEL_MAGIC {
            return Err(LabelError::Missing);
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8"));
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4"));
        let n = u32_at(28) as usize;
        if n > 64 {
            return Err(LabelError::Damaged);
        }
        let mut at = 32;
        let mut stores = Vec::with_capacity(n);
        for _ in 0..n {
            if at + 2 > bytes.len() {
                return Err(LabelError::Damaged);
            }
            let len = u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
            at += 2;
            if at + len > bytes.len() {
                return Err(LabelError::Damaged);
            }
            let address =
                String::from_utf8(bytes[at..at + len].to_vec()).map_err(|_| LabelError::Damaged)?;
            stores.push(address);
            at += len;
        }
        // A label is one LABEL_BYTES area: contents running past it (only possible when more
        // bytes than the area are given) are not a label `encode` could have written.
        if at + 4 > bytes.len()
            || at + 4 > LABEL_BYTES as usize
            || u32_at(at) != crc32c::crc32c(&bytes[..at])
        {
            return Err(LabelError::Damaged);
        }
        Ok(Label {
            client: u64_at(8),
            volume: u64_at(16),
            n_way: u32_at(24),
            stores,
        })
    }
}

#[derive(Clone, Debug)]
pub struct VolumeOptions {
    pub base: PathBuf,
    pub nbd: SocketAddr,
    /// Store addresses: required to format; on restart, if given, must be the label's.
    pub stores: Vec<String>,
    /// Make the base volume an off-loading volume if it has no label (its last 8 KiB are
    /// taken). Without it, a volume with no label is refused.
    pub format: bool,
    pub n_way: usize,
    pub t_base: u64,
    pub t_store: u64,
    pub n_reclaim: usize,
    pub policy: Policy,
    pub emulate: Option<EmulateSpec>,
    pub io: IoMode,
    pub metrics: Option<SocketAddr>,
    pub export_name: String,
    /// A DRAM cache above the volume, with Bonfire's warm-up log (`crate::warm_cache`).
    pub cache: Option<CacheOptions>,
    /// What NBD clients can take: connections and memory ([`crate::limits`]).
    pub limits: crate::limits::Limits,
    /// A write every store refuses as full is answered ENOSPC after this.
    pub full_timeout: Duration,
    /// At a restart, how long to wait for every store before serving without those that
    /// failed to answer (at most N-1).
    pub recovery_grace: Duration,
}

impl VolumeOptions {
    pub fn new(base: PathBuf, nbd: SocketAddr) -> VolumeOptions {
        VolumeOptions {
            base,
            nbd,
            stores: Vec::new(),
            format: false,
            n_way: 1,
            t_base: 32,
            t_store: 32,
            n_reclaim: 256,
            policy: Policy::Peak,
            emulate: None,
            io: IoMode::Buffered,
            metrics: None,
            export_name: String::new(),
            cache: None,
            limits: crate::limits::Limits::default(),
            full_timeout: Duration::from_secs(5),
            recovery_grace: Duration::from_secs(1),
        }
    }
}

/// Addresses the server is listening on, once it accepts I/O.
#[derive(Clone, Copy, Debug)]
pub struct Listening {
    pub nbd: SocketAddr,
    pub metrics: Option<SocketAddr>,
}

/// A recovery that may not go on without any store of its set: with N-way > 1 it would
/// normally tolerate N - 1 missing, so needing all of them means the superblock is marked
/// degraded.
fn waits_for_every_store(w: &RecoveryWait, n_way: usize) -> bool {
    n_way > 1 && w.needed == w.stores
}

fn disk_error(e: DiskError) -> anyhow::Error {
    anyhow!("base volume: {} failed: {}", e.op, e.error)
}

fn random_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // splitmix64 of the time and process id: distinct per format in practice.
    let mut z = nanos ^ ((std::process::id() as u64) << 32);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // Below 2^63: the companion id (bit 63 set) and the probe id stay distinct.
    (z >> 1).max(1)
}

/// Serves until the process is stopped. Calls `ready` once the export accepts I/O (after the
/// soft state has been rebuilt from the stores, on a restart).
pub async fn serve(options: VolumeOptions, ready: impl FnOnce(Listening)) -> Result<()> {
    crate::limits::keep_freed_buffers();
    let file = Arc::new(
        DiskFile::open(&options.base, false, options.io)
            .with_context(|| format!("cannot open the base volume {}", options.base.display()))?,
    );
    let size = base_size(&file)
        .with_context(|| format!("cannot size the base volume {}", options.base.display()))?;
    if size < RESERVED_BYTES + (1 << 20) {
        bail!(
            "{}: {size} bytes is too small for a volume (at least 1 MiB plus {RESERVED_BYTES} reserved bytes)",
            options.base.display()
        );
    }
    let label_at = size - LABEL_BYTES;
    let existing = file
        .read(label_at, LABEL_BYTES, Vec::new())
        .map_err(disk_error)?;
    let (label, formatting) = match Label::decode(&existing) {
        // A plain volume (formatted without stores) has never off-loaded a write: its label is
        // written before it serves, and it names stores once any were given. So its superblock
        // is written anew at every start, with the stores given now if any: this is how stores
        // are added to a plain volume.
        Ok(label) if label.stores.is_empty() => {
            if options.n_way > options.stores.len().max(1) {
                bail!(
                    "--n-way {} needs at least that many stores (have {})",
                    options.n_way,
                    options.stores.len()
                );
            }
            if !options.stores.is_empty() {
                tracing::info!(stores = ?options.stores, n_way = options.n_way, "adding stores to a plain volume");
            }
            let label = Label {
                client: label.client,
                volume: label.volume,
                n_way: options.n_way as u32,
                stores: options.stores.clone(),
            };
            label.encode().map_err(|e| anyhow!("{e}"))?;
            (label, true)
        }
        Ok(label) => {
            if !options.stores.is_empty() {
                let mut given = options.stores.clone();
                let mut known = label.stores.clone();
                given.sort();
                known.sort();
                if given != known {
                    bail!(
                        "{}: the volume's stores are {:?}; --store gave {:?} (a volume's store set is fixed when it is formatted)",
                        options.base.display(),
                        label.stores,
                        options.stores
                    );
                }
            }
            (label, false)
        }
        Err(LabelError::Missing) if options.format => {
            if options.n_way == 0 || options.n_way > options.stores.len().max(1) {
                bail!(
                    "--n-way {} needs at least that many stores (have {})",
                    options.n_way,
                    options.stores.len()
                );
            }
            let label = Label {
                client: random_id(),
                volume: 1,
                n_way: options.n_way as u32,
                stores: options.stores.clone(),
            };
            label.encode().map_err(|e| anyhow!("{e}"))?;
            (label, true)
        }
        Err(LabelError::Missing) => bail!(
            "{}: no volume label; pass --format to make it a volume (its last {RESERVED_BYTES} bytes are then reserved)",
            options.base.display()
        ),
        Err(e) => bail!("{}: {e}; refusing to start", options.base.display()),
    };
    let emulator = match &options.emulate {
        None => None,
        Some(spec) => Some(Emulator::start(spec).map_err(|e| anyhow!(e))?),
    };
    if let Some(e) = emulator {
        file.emulate(e);
    }

    let mut config = Config::new(label.client, label.volume, size - LABEL_BYTES);
    config.policy = options.policy;
    config.n_way = label.n_way as usize;
    config.t_base = options.t_base;
    config.t_store = options.t_store;
    config.n_reclaim = options.n_reclaim;
    config.request_timeout_ns = Some(STORE_TIMEOUT.as_nanos() as u64);
    config.full_timeout_ns = options.full_timeout.as_nanos() as u64;
    config.recovery_grace_ns = options.recovery_grace.as_nanos() as u64;
    let export_bytes = config.usable_bytes();

    let (events, inbox) = mpsc::unbounded_channel::<Event>();
    for (i, address) in label.stores.iter().enumerate() {
        tokio::spawn(store_link(i, address.clone(), events.clone()));
    }
    let disk_events = events.clone();
    let disk = Disk::start(file.clone(), move |done| {
        let _ = disk_events.send(Event::Base(done));
    });
    let (ready_tx, ready_rx) = oneshot::channel::<Result<(), String>>();
    let mut core = Core::new(label.clone(), disk);
    if let Some(c) = &options.cache {
        // Before serving: the log is marked not clean durably here.
        let warm = WarmCache::open(c)?;
        tracing::info!(
            cache_bytes = c.cache_bytes,
            log = c.log.as_ref().map(|p| p.display().to_string()),
            source = %warm.source(),
            planned_blocks = warm.preload_planned_blocks,
            "cache ready"
        );
        core.warm = Some(warm);
    }
    if options.emulate.is_none() && !file.direct {
        // A write that need not be durable, to a buffered base volume, is a copy into the
        // page cache: done on the core's task it saves two thread hand-offs (a third more
        // 4 KiB writes per second, measured by `volume bench`). Large writes too: 1 MiB
        // writes handed to the disk's worker threads (which contend for the file's lock)
        // reached 0.6 of the bandwidth of writes done here.
        core.inline = Some(file.clone());
    }
    if options.emulate.is_none() {
        // A read of data in the page cache is a copy: done on the core's task (without
        // waiting for the device, see `DiskFile::read_cached`), it saves a worker thread's
        // wake-up and the hand-off back, which cost more than the copy for small reads.
        core.cached_reads = Some(file.clone());
    }
    // Metrics and status are served from the start: while recovering, the status says what the
    // volume waits for.
    let metrics_listener = match options.metrics {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for metrics"))?,
        ),
        None => None,
    };
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    if let Some(l) = metrics_listener {
        tracing::info!(metrics = %l.local_addr()?, "metrics and status served while the volume starts");
        tokio::spawn(serve_metrics(l, events.clone()));
    }
    let started = Instant::now();
    let mut core_task = tokio::spawn(core.run(config, inbox, started, ready_tx, formatting));
    let became_ready = tokio::select! {
        r = ready_rx => r.unwrap_or_else(|_| Err("the volume stopped while starting".into())),
        r = &mut core_task => return r.context("volume core")?,
    };
    if let Err(e) = became_ready {
        bail!("{}: {e}", options.base.display());
    }
    if formatting {
        // The store set is durable; the label makes the volume complete.
        let bytes = label.encode().map_err(|e| anyhow!("{e}"))?;
        file.write_batch(label_at, &[&bytes]).map_err(disk_error)?;
        file.sync().map_err(disk_error)?;
    }
    tracing::info!(
        base = %options.base.display(),
        client = format_args!("{:016x}", label.client),
        export_bytes,
        stores = ?label.stores,
        n_way = label.n_way,
        emulate = options.emulate.as_ref().map(|e| e.preset.as_str()),
        formatted = formatting,
        "volume ready"
    );
    let listener = TcpListener::bind(options.nbd)
        .await
        .with_context(|| format!("cannot listen on {}", options.nbd))?;
    ready(Listening {
        nbd: listener.local_addr()?,
        metrics: metrics_addr,
    });
    let backend = Arc::new(VolumeBackend {
        events: events.clone(),
        file: file.clone(),
        size_bytes: export_bytes,
    });
    let export = ExportConfig {
        name: options.export_name.clone(),
        limits: options.limits.clone(),
        ..ExportConfig::default()
    };
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    tokio::select! {
        r = nbd_server::serve(listener, backend, export) => r.context("NBD listener")?,
        r = &mut core_task => r.context("volume core")??,
        _ = terminate.recv() => stop(&events).await,
        _ = tokio::signal::ctrl_c() => stop(&events).await,
    }
    Ok(())
}

/// Stops the core after the requests in flight, closing the warm-up log cleanly.
async fn stop(events: &mpsc::UnboundedSender<Event>) {
    let (done, answer) = oneshot::channel();
    if events.send(Event::Shutdown { done }).is_err() {
        return;
    }
    match tokio::time::timeout(Duration::from_secs(30), answer).await {
        Ok(Ok(Ok(()))) => tracing::info!("volume stopped"),
        Ok(Ok(Err(e))) => {
            tracing::warn!(error = %e, "volume stopped; the warm-up log was not closed cleanly")
        }
        _ => tracing::warn!("volume stopped without finishing the requests in flight"),
    }
}

fn base_size(file: &DiskFile) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    // A block device's metadata length is 0: its size is where seeking to the end lands.
    let mut f = &file.file;
    let size = f.seek(SeekFrom::End(0))?;
    Ok(size / 512 * 512)
}

/// What reaches the core task.
enum Event {
    Upward {
        op: Op,
        reply: Completion,
    },
    Base(Result<DiskDone, DiskError>),
    StoreUp {
        store: usize,
        link: u64,
        sender: mpsc::UnboundedSender<Vec<u8>>,
    },
    StoreFrame {
        store: usize,
        link: u64,
        frame: Frame,
    },
    StoreDown {
        store: usize,
        link: u64,
    },
    /// A connection attempt to a store failed (refused, unreachable).
    StoreUnreachable {
        store: usize,
    },
    /// A metrics or status request: `json` for the status document.
    Report {
        json: bool,
        reply: oneshot::Sender<String>,
    },
    /// SIGTERM or SIGINT: close the warm-up log cleanly and stop.
    Shutdown {
        done: oneshot::Sender<Result<(), String>>,
    },
    /// Replace the cache with a new, empty one and warm it up (`POST /cache/reset`).
    CacheReset {
        reply: oneshot::Sender<Option<String>>,
    },
}

/// The export as the NBD server sees it.
struct VolumeBackend {
    events: mpsc::UnboundedSender<Event>,
    file: Arc<DiskFile>,
    size_bytes: u64,
}

impl Backend for VolumeBackend {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn submit(&self, op: Op, done: Completion) {
        match op {
            Op::Flush => {
                let file = self.file.clone();
                tokio::task::spawn_blocking(move || {
                    done.complete(file.sync().map(|_| None).map_err(|e| e.error))
                });
            }
            // A hint; the data stays (reads return what was written).
            Op::Trim { .. } => done.complete(Ok(None)),
            op => {
                if let Err(mpsc::error::SendError(Event::Upward { reply, .. })) =
                    self.events.send(Event::Upward { op, reply: done })
                {
                    reply.complete(Err(std::io::Error::other("the volume has stopped")));
                }
            }
        }
    }
}

/// One NBD request, cut into pieces for the core.
struct Parent {
    reply: Completion,
    /// For a read: the pieces' bytes, in order.
    pieces: Vec<Vec<u8>>,
    remaining: usize,
    error: Option<std::io::Error>,
    arrived: Instant,
    read: bool,
    /// What the cache does when the request is answered.
    cache: Option<CacheParent>,
}

enum CacheParent {
    /// A read that missed: fill the cache.
    Read { offset: u64, ticket: Ticket },
    /// A write: the cache takes its data once the volume has it.
    Write { offset: u64, data: Vec<u8> },
    /// Zeroes written: the cache forgets the blocks.
    Zeroes { offset: u64, length: u64 },
}

/// Latency buckets of the histograms, in seconds (Prometheus `le`).
const BUCKETS_S: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
struct LatencyHistogram {
    counts: [u64; BUCKETS_S.len() + 1],
    sum_s: f64,
    count: u64,
}

impl LatencyHistogram {
    fn record(&mut self, seconds: f64) {
        let i = BUCKETS_S
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS_S.len());
        self.counts[i] += 1;
        self.sum_s += seconds;
        self.count += 1;
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, b) in BUCKETS_S.iter().enumerate() {
            cumulative += self.counts[i];
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum_s);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

struct Core {
    label: Label,
    disk: Disk,
    links: Vec<Option<(u64, mpsc::UnboundedSender<Vec<u8>>)>>,
    parents: HashMap<u64, Parent>,
    /// Core upward id → (parent, piece index).
    pieces: HashMap<u64, (u64, usize)>,
    next_parent: u64,
    next_upward: u64,
    reads: LatencyHistogram,
    writes: LatencyHistogram,
    /// (time, reclaimed bytes so far), one sample a second for the last minute.
    reclaim_samples: VecDeque<(Instant, u64)>,
    /// Whether the stores were full at the last pump (for one WARN per episode).
    stores_full: bool,
    /// Where non-durable base writes are done in place (see `serve`).
    inline: Option<Arc<DiskFile>>,
    /// Where base reads the page cache holds are done in place (see `serve`).
    cached_reads: Option<Arc<DiskFile>>,
    /// A base write done in place failed: the core stops.
    failed: Option<DiskError>,
    warm: Option<WarmCache>,
    /// Pre-load reads in flight: upward id → (offset, ticket).
    preloads: HashMap<u64, (u64, Ticket)>,
    /// Stopping: answered once the requests in flight are.
    stopping: Option<oneshot::Sender<Result<(), String>>>,
}

impl Core {
    fn new(label: Label, disk: Disk) -> Core {
        let n = label.stores.len();
        Core {
            label,
            disk,
            links: vec![None; n],
            parents: HashMap::new(),
            pieces: HashMap::new(),
            next_parent: 0,
            next_upward: 0,
            reads: LatencyHistogram::default(),
            writes: LatencyHistogram::default(),
            reclaim_samples: VecDeque::new(),
            stores_full: false,
            inline: None,
            cached_reads: None,
            failed: None,
            warm: None,
            preloads: HashMap::new(),
            stopping: None,
        }
    }

    async fn run(
        mut self,
        config: Config,
        mut inbox: mpsc::UnboundedReceiver<Event>,
        started: Instant,
        ready: oneshot::Sender<Result<(), String>>,
        formatting: bool,
    ) -> Result<()> {
        let now = || started.elapsed().as_nanos() as u64;
        if let Some(w) = self.warm.as_mut() {
            // Before any request: the snapshot's pages are the blocks' latest contents.
            w.load_snapshot();
        }
        // Give the stores a moment to be reached, so that recovery asks them all at once.
        let grace = tokio::time::sleep(CONNECT_GRACE);
        tokio::pin!(grace);
        let mut early = Vec::new();
        let mut refused = vec![false; self.links.len()];
        while (0..self.links.len()).any(|s| self.links[s].is_none() && !refused[s]) {
            tokio::select! {
                event = inbox.recv() => match event {
                    Some(e @ Event::StoreUp { .. }) | Some(e @ Event::StoreDown { .. }) => self.link_event(e),
                    Some(Event::StoreUnreachable { store }) => refused[store] = true,
                    Some(other) => early.push(other),
                    None => return Ok(()),
                },
                _ = &mut grace => break,
            }
        }
        let mut client = if formatting {
            let stores = (0..self.label.stores.len())
                .map(|i| StoreInfo {
                    id: i as u64 + 1,
                    server: i as u64 + 1,
                })
                .collect();
            Client::format(config, stores, now())
        } else {
            Client::recover(config, now())
        };
        let mut ready = Some(ready);
        for e in early {
            self.handle(&mut client, e, now())?;
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        // Logged on change, checked once a second: whether data is off-loaded.
        let mut offloading = false;
        // While recovering: what the client waits for, logged on change and every 10 s.
        let mut waiting: Option<(RecoveryWait, Instant)> = None;
        loop {
            if client.is_ready() && self.stopping.is_none() {
                self.preload(&mut client, now());
            }
            self.drive(&mut client, now());
            if let Some(e) = self.failed.take() {
                return Err(disk_error(e));
            }
            if self.stopping.is_some() && self.parents.is_empty() {
                let closed = match self.warm.as_mut() {
                    Some(w) => w.close().map_err(|e| format!("{e:#}")),
                    None => Ok(()),
                };
                let _ = self.stopping.take().expect("some").send(closed);
                return Ok(());
            }
            if ready.is_some() {
                if client.is_ready() {
                    self.check_store_ids(&client)?;
                    let stats = client.stats();
                    let missing: Vec<u64> = client
                        .stores()
                        .into_iter()
                        .filter(|(_, _, up)| !up)
                        .map(|(_, info, _)| info.id)
                        .collect();
                    tracing::info!(
                        offloaded_bytes = stats.offloaded_bytes,
                        stores_up = self.links.iter().filter(|l| l.is_some()).count(),
                        ?missing,
                        "soft state rebuilt from the stores"
                    );
                    if !missing.is_empty() {
                        tracing::warn!(
                            ?missing,
                            "serving without stores that did not answer: they count as failed, and what they hold is deleted when they return"
                        );
                    }
                    let _ = ready.take().expect("some").send(Ok(()));
                } else if let Some(e) = client.failure() {
                    let message = match e {
                        ClientError::NoStoreSet(e) => format!("{e}"),
                        other => format!("{other}"),
                    };
                    let _ = ready.take().expect("some").send(Err(message));
                    return Ok(());
                }
            }
            let timeout = client
                .poll_timeout()
                .map(|t| started + Duration::from_nanos(t));
            tokio::select! {
                event = inbox.recv() => {
                    let Some(mut event) = event else { return Ok(()) };
                    for _ in 0..1024 {
                        self.handle(&mut client, event, now())?;
                        match inbox.try_recv() {
                            Ok(next) => event = next,
                            Err(_) => break,
                        }
                    }
                }
                _ = async { tokio::time::sleep_until(timeout.expect("guarded").into()).await }, if timeout.is_some() => {
                    client.handle_timeout(now());
                }
                _ = tick.tick() => {
                    if let Some(w) = client.recovery_wait() {
                        let due = waiting.as_ref().is_none_or(|(last, at)| {
                            *last != w || at.elapsed() >= Duration::from_secs(10)
                        });
                        if due && started.elapsed() >= Duration::from_secs(1) {
                            if waits_for_every_store(&w, client.config().n_way) {
                                tracing::warn!(
                                    answered = w.answered,
                                    stores = w.stores,
                                    needed = w.needed,
                                    failed = ?w.failed,
                                    silent = ?w.silent,
                                    "recovering: waiting for every store: the superblock is marked degraded (a write was acknowledged with fewer than N copies before the restart), so no store may be missing"
                                );
                            } else {
                                tracing::warn!(
                                    answered = w.answered,
                                    stores = w.stores,
                                    needed = w.needed,
                                    failed = ?w.failed,
                                    silent = ?w.silent,
                                    "recovering: waiting for stores (serving needs every store, or all but N-1 once the others have failed)"
                                );
                            }
                            waiting = Some((w, Instant::now()));
                        }
                    }
                    if let Some(w) = self.warm.as_mut() {
                        w.tick(started.elapsed().as_secs());
                    }
                    let at = Instant::now();
                    let stats = client.stats();
                    self.reclaim_samples.push_back((at, stats.reclaimed_bytes));
                    if offloading != (stats.offloaded_bytes > 0) {
                        offloading = !offloading;
                        if offloading {
                            tracing::info!(
                                offloaded_bytes = stats.offloaded_bytes,
                                offloaded_writes = stats.offloaded_writes,
                                "off-loading: data is on stores"
                            );
                        } else {
                            tracing::info!(
                                reclaimed_bytes = stats.reclaimed_bytes,
                                offloaded_writes = stats.offloaded_writes,
                                "reclaim finished: no data off-loaded"
                            );
                        }
                    }
                    while self.reclaim_samples.len() > 61 {
                        self.reclaim_samples.pop_front();
                    }
                }
            }
        }
    }

    /// The store set's ids are their positions in the label (id `i + 1` at `stores[i]`).
    fn check_store_ids(&self, client: &Client) -> Result<()> {
        for (i, info, _) in client.stores() {
            if info.id != i as u64 + 1 || i >= self.label.stores.len() {
                bail!("the store set on the base volume does not match its label (store {i} has id {})", info.id);
            }
        }
        Ok(())
    }

    fn link_event(&mut self, event: Event) {
        match event {
            Event::StoreUp {
                store,
                link,
                sender,
            } => self.links[store] = Some((link, sender)),
            Event::StoreDown { store, link }
                if self.links[store].as_ref().is_some_and(|(l, _)| *l == link) =>
            {
                self.links[store] = None;
            }
            _ => {}
        }
    }

    fn handle(&mut self, client: &mut Client, event: Event, now: u64) -> Result<()> {
        match event {
            Event::Upward { op, reply } => self.upward(client, op, reply, now),
            // The core learns it when a request to the store cannot be sent.
            Event::StoreUnreachable { .. } => {}
            Event::Base(Ok(done)) => {
                let done = match done {
                    DiskDone::Read { id, data } => BaseDone::Read { id, data },
                    DiskDone::Written { id } | DiskDone::Flushed { id } => BaseDone::Written { id },
                };
                client.handle_base(now, done);
            }
            // The base volume failed: stop before acknowledging anything more.
            Event::Base(Err(e)) => return Err(disk_error(e)),
            Event::StoreUp { store, .. } => {
                let was_down = self.links[store].is_none();
                self.link_event(event);
                if was_down {
                    tracing::info!(
                        store = store + 1,
                        address = %self.label.stores[store],
                        "store connected"
                    );
                }
            }
            Event::StoreDown { store, link } => {
                let current = self.links[store].as_ref().is_some_and(|(l, _)| *l == link);
                self.link_event(Event::StoreDown { store, link });
                if current {
                    tracing::warn!(
                        store = store + 1,
                        address = %self.label.stores[store],
                        offloaded_bytes = client.stats().offloaded_bytes,
                        "store disconnected"
                    );
                    client.connection_lost(now, store);
                }
            }
            Event::StoreFrame { store, link, frame } => {
                if self.links[store].as_ref().is_none_or(|(l, _)| *l != link) {
                    return Ok(());
                }
                match frame {
                    Frame::Reply { id, load, reply } => {
                        client.handle_store(now, store, id, reply, Some(load.queue_length as u64))
                    }
                    Frame::Load(load) => client.handle_load(store, load.queue_length as u64),
                    Frame::Request { .. } => {}
                }
            }
            Event::Report { json, reply } => {
                let text = if json {
                    self.status(client)
                } else {
                    self.metrics(client)
                };
                let _ = reply.send(text);
            }
            // New requests are refused from here; the log is closed once every request in
            // flight is answered (`run`), so no acknowledged write is missing from it.
            Event::Shutdown { done } => self.stopping = Some(done),
            Event::CacheReset { reply } => {
                let answer = self.warm.as_mut().map(|w| {
                    w.reset(w.warmup_bytes);
                    w.status_json().to_string()
                });
                let _ = reply.send(answer);
            }
        }
        Ok(())
    }

    /// Issues the pre-load's next reads from the volume.
    fn preload(&mut self, client: &mut Client, now: u64) {
        let Some(w) = self.warm.as_mut() else { return };
        for (offset, length, ticket) in w.next_preload_reads() {
            self.next_upward += 1;
            self.preloads.insert(self.next_upward, (offset, ticket));
            client.handle_upward(
                now,
                self.next_upward,
                Upward::Read {
                    offset_bytes: offset,
                    length_bytes: length,
                },
            );
        }
    }

    fn upward(&mut self, client: &mut Client, op: Op, reply: Completion, now: u64) {
        if self.stopping.is_some() {
            reply.complete(Err(std::io::Error::other("the volume is stopping")));
            return;
        }
        let parent = self.next_parent;
        self.next_parent += 1;
        let arrived = Instant::now();
        let mut requests: Vec<Upward> = Vec::new();
        let mut read = false;
        let mut cache = None;
        if let Some(w) = self.warm.as_mut() {
            match &op {
                Op::Read { offset, length } => match w.read(*offset, *length as u64) {
                    Ok(data) => {
                        self.reads.record(arrived.elapsed().as_secs_f64());
                        reply.complete(Ok(Some(data)));
                        return;
                    }
                    Err(ticket) => {
                        cache = Some(CacheParent::Read {
                            offset: *offset,
                            ticket,
                        })
                    }
                },
                Op::Write { offset, data, .. } => {
                    w.write_arrived(*offset, data.len() as u64);
                    cache = Some(CacheParent::Write {
                        offset: *offset,
                        data: data.clone(),
                    });
                }
                Op::WriteZeroes { offset, length, .. } => {
                    w.write_arrived(*offset, *length as u64);
                    cache = Some(CacheParent::Zeroes {
                        offset: *offset,
                        length: *length as u64,
                    });
                }
                Op::Flush | Op::Trim { .. } => {}
            }
        }
        match op {
            Op::Read { offset, length } => {
                read = true;
                let mut at = 0u64;
                while at < length as u64 {
                    let n = (length as u64 - at).min(PIECE_BYTES);
                    requests.push(Upward::Read {
                        offset_bytes: offset + at,
                        length_bytes: n,
                    });
                    at += n;
                }
            }
            Op::Write { offset, data, fua } => {
                if data.len() as u64 <= PIECE_BYTES {
                    requests.push(Upward::Write {
                        offset_bytes: offset,
                        data,
                        durable: fua,
                    });
                } else {
                    for (i, chunk) in data.chunks(PIECE_BYTES as usize).enumerate() {
                        requests.push(Upward::Write {
                            offset_bytes: offset + i as u64 * PIECE_BYTES,
                            data: chunk.to_vec(),
                            durable: fua,
                        });
                    }
                }
            }
            Op::WriteZeroes {
                offset,
                length,
                fua,
            } => {
                let mut at = 0u64;
                while at < length as u64 {
                    let n = (length as u64 - at).min(PIECE_BYTES);
                    requests.push(Upward::Write {
                        offset_bytes: offset + at,
                        data: vec![0u8; n as usize],
                        durable: fua,
                    });
                    at += n;
                }
            }
            Op::Flush | Op::Trim { .. } => {
                reply.complete(Ok(None));
                return;
            }
        }
        self.parents.insert(
            parent,
            Parent {
                reply,
                pieces: vec![Vec::new(); if read { requests.len() } else { 0 }],
                remaining: requests.len(),
                error: None,
                arrived,
                read,
                cache,
            },
        );
        for (i, request) in requests.into_iter().enumerate() {
            self.next_upward += 1;
            self.pieces.insert(self.next_upward, (parent, i));
            client.handle_upward(now, self.next_upward, request);
        }
    }

    /// Hands out everything the core produced, until it produces nothing more.
    fn drive(&mut self, client: &mut Client, now: u64) {
        loop {
            let mut progress = false;
            let ops: Vec<DiskOp> = std::iter::from_fn(|| client.poll_base())
                .map(|op| match op {
                    BaseOp::Read {
                        id,
                        offset_bytes,
                        length_bytes,
                    } => DiskOp::Read {
                        id,
                        offset_bytes,
                        length_bytes,
                    },
                    BaseOp::Write {
                        id,
                        offset_bytes,
                        data,
                        durable,
                    } => DiskOp::Write {
                        id,
                        offset_bytes,
                        data: data.into(),
                        durable,
                    },
                })
                .collect();
            if !ops.is_empty() {
                progress = true;
                let mut rest = Vec::new();
                for op in ops {
                    match (&self.inline, op) {
                        (
                            _,
                            DiskOp::Read {
                                id,
                                offset_bytes,
                                length_bytes,
                            },
                        ) if length_bytes <= CACHED_READ_MAX => {
                            match self
                                .cached_reads
                                .as_ref()
                                .and_then(|f| f.read_cached(offset_bytes, length_bytes))
                            {
                                Some(data) => client.handle_base(now, BaseDone::Read { id, data }),
                                None => rest.push(DiskOp::Read {
                                    id,
                                    offset_bytes,
                                    length_bytes,
                                }),
                            }
                        }
                        (Some(file), op @ DiskOp::Write { durable: false, .. }) => {
                            match file.execute(op) {
                                Ok(DiskDone::Written { id }) => {
                                    client.handle_base(now, BaseDone::Written { id })
                                }
                                Ok(_) => unreachable!("a write"),
                                Err(e) => self.failed = Some(e),
                            }
                        }
                        (_, op) => rest.push(op),
                    }
                }
                self.disk.submit_all(rest);
            }
            let mut lost = Vec::new();
            while let Some((store, id, request)) = client.poll_store() {
                progress = true;
                let mut frame = Vec::new();
                encode(&Frame::Request { id, request }, &mut frame);
                let sent = self
                    .links
                    .get(store)
                    .and_then(|l| l.as_ref())
                    .is_some_and(|(_, sender)| sender.send(frame).is_ok());
                if !sent && !lost.contains(&store) {
                    lost.push(store);
                }
            }
            for store in lost {
                client.connection_lost(now, store);
            }
            while let Some((id, reply)) = client.poll_upward() {
                progress = true;
                self.answered(id, reply);
            }
            let full = client.stores_full_since().is_some();
            if full != self.stores_full {
                self.stores_full = full;
                if full {
                    tracing::warn!(
                        timeout_ms = client.config().full_timeout_ns / 1_000_000,
                        "stores are full: reclaiming under load; writes that must be off-loaded wait, then fail with ENOSPC"
                    );
                } else {
                    tracing::info!("stores take writes again");
                }
            }
            if !progress {
                return;
            }
        }
    }

    fn answered(&mut self, id: u64, reply: UpReply) {
        if let Some((offset, ticket)) = self.preloads.remove(&id) {
            if let Some(w) = self.warm.as_mut() {
                let data = match &reply {
                    UpReply::Read(d) => Some(d.as_slice()),
                    _ => None,
                };
                w.preload_done(offset, data, ticket);
            }
            return;
        }
        let Some((parent_id, piece)) = self.pieces.remove(&id) else {
            return;
        };
        let Some(parent) = self.parents.get_mut(&parent_id) else {
            return;
        };
        match reply {
            UpReply::Read(data) => parent.pieces[piece] = data,
            UpReply::Written => {}
            UpReply::Error(e) => {
                parent.error = Some(match e {
                    ClientError::BadRequest => {
                        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
                    }
                    // Answered ENOSPC on the wire.
                    ClientError::NoSpace => std::io::Error::from_raw_os_error(libc::ENOSPC),
                    _ => std::io::Error::other(e.to_string()),
                });
            }
        }
        parent.remaining -= 1;
        if parent.remaining > 0 {
            return;
        }
        let mut parent = self.parents.remove(&parent_id).expect("present");
        let seconds = parent.arrived.elapsed().as_secs_f64();
        if parent.read {
            self.reads.record(seconds);
        } else {
            self.writes.record(seconds);
        }
        let outcome = match parent.error {
            Some(e) => Err(e),
            None if parent.read => Ok(Some(if parent.pieces.len() == 1 {
                parent.pieces.pop().expect("one piece")
            } else {
                parent.pieces.concat()
            })),
            None => Ok(None),
        };
        if let (Some(w), Some(c)) = (self.warm.as_mut(), parent.cache) {
            match c {
                CacheParent::Read { offset, ticket } => {
                    let data = outcome.as_ref().ok().and_then(|d| d.as_deref());
                    w.read_done(offset, data, ticket);
                }
                CacheParent::Write { offset, data } => {
                    w.write_done(offset, &data, outcome.is_ok());
                }
                CacheParent::Zeroes { offset, length } => w.zeroes_done(offset, length),
            }
        }
        parent.reply.complete(outcome);
    }

    /// Reclaimed bytes per second over the last minute's samples.
    fn reclaim_rate(&self) -> f64 {
        match (self.reclaim_samples.front(), self.reclaim_samples.back()) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
                (b1 - b0) as f64 / t1.duration_since(*t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    fn metrics(&self, client: &Client) -> String {
        use std::fmt::Write;
        let stats = client.stats();
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, kind: &str, value: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        gauge(
            "cordillera_volume_ready",
            "1 once the export accepts I/O.",
            "gauge",
            client.is_ready() as u8 as f64,
        );
        gauge(
            "cordillera_volume_base_queue_length",
            "Requests in flight on the base volume.",
            "gauge",
            client.base_load() as f64,
        );
        gauge(
            "cordillera_volume_offloaded_bytes",
            "Bytes whose latest version is on stores, not yet reclaimed.",
            "gauge",
            stats.offloaded_bytes as f64,
        );
        gauge(
            "cordillera_volume_offloaded_writes_total",
            "Writes sent to stores.",
            "counter",
            stats.offloaded_writes as f64,
        );
        gauge(
            "cordillera_volume_offloaded_write_bytes_total",
            "Bytes written to stores.",
            "counter",
            stats.offloaded_write_bytes as f64,
        );
        gauge(
            "cordillera_volume_base_writes_total",
            "Writes sent to the base volume.",
            "counter",
            stats.base_writes as f64,
        );
        gauge(
            "cordillera_volume_reclaimed_bytes_total",
            "Bytes reclaimed from stores to the base volume.",
            "counter",
            stats.reclaimed_bytes as f64,
        );
        gauge(
            "cordillera_volume_reclaim_bytes_per_second",
            "Reclaim rate over the last minute.",
            "gauge",
            self.reclaim_rate(),
        );
        gauge(
            "cordillera_volume_stores_full",
            "1 while every store refuses the writes that must be off-loaded as full.",
            "gauge",
            client.stores_full_since().is_some() as u8 as f64,
        );
        gauge(
            "cordillera_volume_refused_writes_total",
            "Writes answered ENOSPC because the stores were full.",
            "counter",
            stats.refused_writes as f64,
        );
        gauge(
            "cordillera_volume_store_failures_total",
            "Stores marked failed.",
            "counter",
            stats.store_failures as f64,
        );
        let figures = client.store_figures();
        let _ = writeln!(out, "# HELP cordillera_volume_store_up 1 when the store answers.\n# TYPE cordillera_volume_store_up gauge");
        for (i, f) in figures.iter().enumerate() {
            let _ = writeln!(
                out,
                "cordillera_volume_store_up{{store=\"{}\"}} {}",
                self.label.stores.get(i).map_or("?", |s| s.as_str()),
                f.up as u8
            );
        }
        let _ = writeln!(out, "# HELP cordillera_volume_store_queue_length Requests in flight to the store.\n# TYPE cordillera_volume_store_queue_length gauge");
        for (i, f) in figures.iter().enumerate() {
            let _ = writeln!(
                out,
                "cordillera_volume_store_queue_length{{store=\"{}\"}} {}",
                self.label.stores.get(i).map_or("?", |s| s.as_str()),
                f.in_flight
            );
        }
        let _ = writeln!(out, "# HELP cordillera_volume_store_offloaded_bytes Bytes whose latest version the store holds.\n# TYPE cordillera_volume_store_offloaded_bytes gauge");
        for (i, f) in figures.iter().enumerate() {
            let _ = writeln!(
                out,
                "cordillera_volume_store_offloaded_bytes{{store=\"{}\"}} {}",
                self.label.stores.get(i).map_or("?", |s| s.as_str()),
                f.offloaded_bytes
            );
        }
        self.reads.render(
            "cordillera_volume_read_seconds",
            "Read response time at the export.",
            &mut out,
        );
        self.writes.render(
            "cordillera_volume_write_seconds",
            "Write response time at the export.",
            &mut out,
        );
        if let Some(w) = &self.warm {
            w.metrics(&mut out);
        }
        out
    }

    fn status(&self, client: &Client) -> String {
        let stats = client.stats();
        let rate = self.reclaim_rate();
        let stores: Vec<serde_json::Value> = client
            .store_figures()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                serde_json::json!({
                    "address": self.label.stores.get(i),
                    "up": f.up,
                    "removed": f.removed,
                    "offloaded_bytes": f.offloaded_bytes,
                    "in_flight": f.in_flight,
                    "reported_load": f.reported_load,
                })
            })
            .collect();
        let eta = if stats.offloaded_bytes == 0 {
            Some(0.0)
        } else if rate > 0.0 {
            Some(stats.offloaded_bytes as f64 / rate)
        } else {
            None
        };
        let recovery = client.recovery_wait().map(|w| {
            serde_json::json!({
                "answered": w.answered,
                "stores": w.stores,
                "needed": w.needed,
                "degraded": waits_for_every_store(&w, client.config().n_way),
                "failed": w.failed,
                "silent": w.silent,
            })
        });
        serde_json::json!({
            "ready": client.is_ready(),
            "recovery": recovery,
            "client": format!("{:016x}", self.label.client),
            "policy": format!("{:?}", client.config().policy),
            "n_way": client.config().n_way,
            "base_queue_length": client.base_load(),
            "stores_full": client.stores_full_since().is_some(),
            "refused_writes": stats.refused_writes,
            "lost_copies": stats.lost_copies,
            "lost_bytes": stats.lost_bytes,
            "offloaded_bytes": stats.offloaded_bytes,
            "offloaded_writes": stats.offloaded_writes,
            "base_writes": stats.base_writes,
            "reclaimed_bytes": stats.reclaimed_bytes,
            "reclaim_bytes_per_second": rate,
            "reclaim_eta_seconds": eta,
            "quiescent": client.is_quiescent(),
            "stores": stores,
            "state": client.describe(),
            "cache": self.warm.as_ref().map(|w| w.status_json()),
        })
        .to_string()
    }
}

/// One store: connects (again and again), forwards frames both ways.
async fn store_link(store: usize, address: String, events: mpsc::UnboundedSender<Event>) {
    let mut link = 0u64;
    let mut reported_failure = false;
    loop {
        match TcpStream::connect(&address).await {
            Ok(stream) => {
                reported_failure = false;
                link += 1;
                let _ = stream.set_nodelay(true);
                let (mut reader, writer) = stream.into_split();
                let (sender, outbox) = mpsc::unbounded_channel::<Vec<u8>>();
                if events
                    .send(Event::StoreUp {
                        store,
                        link,
                        sender,
                    })
                    .is_err()
                {
                    return;
                }
                let writing = tokio::spawn(write_frames(writer, outbox));
                let mut stopped = false;
                let read = read_frames(&mut reader, |frame| {
                    stopped = events
                        .send(Event::StoreFrame { store, link, frame })
                        .is_err();
                    !stopped
                })
                .await;
                if stopped {
                    writing.abort();
                    return;
                }
                if let Err(e) = read {
                    tracing::warn!(%address, error = %e, "store connection failed; reconnecting");
                }
                writing.abort();
                if events.send(Event::StoreDown { store, link }).is_err() {
                    return;
                }
            }
            Err(e) => {
                if !reported_failure {
                    tracing::warn!(%address, error = %e, "store unreachable; retrying");
                    reported_failure = true;
                    if events.send(Event::StoreUnreachable { store }).is_err() {
                        return;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `GET /metrics` (Prometheus text) and `GET /status` (JSON) over plain HTTP/1.
async fn serve_metrics(listener: TcpListener, events: mpsc::UnboundedSender<Event>) {
    loop {
        let (mut stream, _) = crate::limits::accept(&listener, "metrics").await;
        let events = events.clone();
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut chunk = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&chunk[..n]),
                }
            }
            let line = String::from_utf8_lossy(&request);
            let method = line.split_whitespace().next().unwrap_or("");
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let (status, kind, body) = match path {
                "/cache/reset" if method == "POST" => {
                    let (reply, answer) = oneshot::channel();
                    let _ = events.send(Event::CacheReset { reply });
                    match answer.await {
                        Ok(Some(body)) => ("200 OK", "application/json", body),
                        Ok(None) => (
                            "409 Conflict",
                            "text/plain",
                            "this volume has no cache (--cache-size)\n".into(),
                        ),
                        Err(_) => ("503 Service Unavailable", "text/plain", "stopping\n".into()),
                    }
                }
                "/metrics" | "/status" => {
                    let (reply, answer) = oneshot::channel();
                    let json = path == "/status";
                    let _ = events.send(Event::Report { json, reply });
                    match answer.await {
                        Ok(body) => (
                            "200 OK",
                            if json {
                                "application/json"
                            } else {
                                "text/plain; version=0.0.4"
                            },
                            body,
                        ),
                        Err(_) => ("503 Service Unavailable", "text/plain", "stopping\n".into()),
                    }
                }
                _ => (
                    "404 Not Found",
                    "text/plain",
                    "try /metrics, /status or POST /cache/reset\n".into(),
                ),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_damage_is_detected() {
        let label = Label {
            client: 0x1234_5678_9abc,
            volume: 1,
            n_way: 2,
            stores: vec!["127.0.0.1:7001".into(), "store-b:7002".into()],
        };
        let bytes = label.encode().unwrap();
        assert_eq!(bytes.len() as u64, LABEL_BYTES);
        assert_eq!(Label::decode(&bytes).unwrap(), label);
        assert_eq!(
            Label::decode(&vec![0u8; 4096]).unwrap_err(),
            LabelError::Missing
        );
        for at in [8, 24, 30, 40, 50] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert_eq!(
                Label::decode(&bad).unwrap_err(),
                LabelError::Damaged,
                "{at}"
            );
        }
        let huge = Label {
            stores: vec!["x".repeat(5000)],
            ..label
        };
        assert_eq!(huge.encode().unwrap_err(), LabelError::TooLarge);
    }

    /// Found by the fuzz target: given more bytes than the label area, a checksummed label
    /// whose addresses run past the area decoded, and could not be encoded again.
    #[test]
    fn a_label_running_past_its_area_is_damaged() {
        let mut out = Vec::new();
        out.extend_from_slice(LABEL_MAGIC);
        out.extend_from_slice(&7u64.to_le_bytes());
        out.extend_from_slice(&1u64.to_le_bytes());
        out.extend_from_slice(&2u32.to_le_bytes());
        out.extend_from_slice(&2u32.to_le_bytes());
        for _ in 0..2 {
            out.extend_from_slice(&5000u16.to_le_bytes());
            out.extend_from_slice(&[b'a'; 5000]);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        assert!(out.len() > LABEL_BYTES as usize);
        assert_eq!(Label::decode(&out).unwrap_err(), LabelError::Damaged);
    }
}
