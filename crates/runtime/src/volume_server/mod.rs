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

mod driver;
mod io_latency;
mod metrics;
mod state;
pub use metrics::status_text;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cordillera_offload::superblock::SUPERBLOCK_BYTES;
use cordillera_offload::{BaseDone, Client, ClientError, Config, Policy, RecoveryWait, StoreInfo};
use cordillera_vstore::store::{DiskDone, DiskOp};
use cordillera_wire::store::{encode, Frame};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use crate::disk::{Disk, DiskError, DiskFile, IoMode};
use crate::emulate::{EmulateSpec, Emulator};
use crate::nbd_server::{self, Backend, Completion, ExportConfig, Op};
use crate::store_link::{store_link, LinkEvent};
use crate::warm_cache::{CacheLog, CacheOptions};
use cordillera_volume::{Request, Volume};

pub use cordillera_volume::label::{Label, LabelError, LABEL_BYTES};
use metrics::*;
use state::{Core, Pending};

/// Bytes at the end of the base volume not exported: the label and the store set.
pub const RESERVED_BYTES: u64 = LABEL_BYTES + SUPERBLOCK_BYTES;
/// Base reads up to this size are tried in place when the page cache holds them
/// ([`DiskFile::read_cached`]); larger ones always go to the disk's workers, so that the core's
/// task never spends long on one copy.
const CACHED_READ_MAX: u64 = 128 << 10;
/// How long to wait at start for the stores to be reached (or refuse) before recovery asks them:
/// recovery starts at once when every store has connected or refused a connection.
const CONNECT_GRACE: Duration = Duration::from_secs(5);

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
    /// Whether NBD clients may or must start TLS, and with what credentials.
    pub tls: crate::nbd_server::NbdTls,
    /// The `--metrics` endpoint's control token (`POST /cache/reset`, reads from elsewhere).
    pub control_token: Option<crate::http::ControlToken>,
    /// Listen beyond loopback without credentials (`--insecure`); refused otherwise.
    pub insecure: bool,
    /// The links to the stores over TLS with this key (`--cluster-key`); plain TCP when `None`.
    pub store_tls: Option<crate::tls::TlsClient>,
    /// A write every store refuses as full is answered ENOSPC after this.
    pub full_timeout: Duration,
    /// A store silent this long with requests outstanding counts as failed (`--store-timeout-ms`):
    /// what it holds becomes vulnerable and is reclaimed at any load once it answers again.
    /// Default 3 s: shorter than the full timeout (5 s), so that a copy waiting at a stalled
    /// store goes to another store first (at 5 s, a store stalled 5 s failed N-way writes with
    /// EIO). A store on a disk shared with a busy volume may wait longer than that for its disk
    /// (the emulated disks' shortest-positioning-first serves a far request after up to 4 s):
    /// set it above the disk's worst wait there, or it is taken as failed while alive.
    pub store_timeout: Duration,
    /// An off-loaded write with fewer than N copies fails (EIO) after this.
    pub copies_timeout: Duration,
    /// At a restart, how long to wait for every store before serving without those that
    /// failed to answer (at most N-1).
    pub recovery_grace: Duration,
    /// The off-load bound, in total and per store (`Config::offload_bytes_max`).
    pub offload_bytes_max: Option<u64>,
    pub offload_bytes_max_per_store: Option<u64>,
    /// Record the requests as a binary trace to this file, at most this many bytes over it and
    /// its predecessor (`crate::record_trace`).
    pub record_trace: Option<(PathBuf, u64)>,
    /// A store served by this process for other volumes, its log a partition at the end of
    /// this volume's emulated disk when `emulate` is set (`--store-here`): the two contend for
    /// one modeled spindle, as a store on a busy server's own disk does (Everest §4.2's worst
    /// case).
    pub store_here: Option<StoreHere>,
}

/// A store beside the volume (`VolumeOptions::store_here`).
#[derive(Clone, Debug)]
pub struct StoreHere {
    pub path: PathBuf,
    pub log_bytes: u64,
    pub listen: SocketAddr,
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
            tls: crate::nbd_server::NbdTls::default(),
            control_token: None,
            insecure: false,
            store_tls: None,
            full_timeout: Duration::from_secs(5),
            store_timeout: Duration::from_secs(3),
            // Past the store request timeout: a copy held by a stalled store is sent to
            // another once the stalled one counts as failed, before the write gives up.
            copies_timeout: Duration::from_secs(10),
            recovery_grace: Duration::from_secs(1),
            offload_bytes_max: None,
            offload_bytes_max_per_store: None,
            record_trace: None,
            store_here: None,
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
    // SplitMix64 of the time and process id: distinct per format in practice.
    let z = cordillera_types::SplitMix64(nanos ^ ((std::process::id() as u64) << 32)).next_u64();
    // Below 2^63: the companion id (bit 63 set) and the probe id stay distinct.
    (z >> 1).max(1)
}

/// The volume's label: the one on the base volume (a plain volume's written anew with the
/// stores given now: how stores are added to one), or a new one with `--format`; and whether
/// it is to be written (the client formats the volume then). A store set other than the
/// label's, too few stores for N, a missing label without `--format`, or a damaged one are
/// refused.
fn volume_label(existing: &[u8], options: &VolumeOptions) -> Result<(Label, bool)> {
    Ok(match Label::decode(existing) {
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
    })
}

/// The off-loading client's configuration from the label and the options (a `--t-base 0` is
/// warned about: the stores would fill).
fn client_config(label: &Label, options: &VolumeOptions, size: u64) -> Config {
    let mut config = Config::new(label.client, label.volume, size - LABEL_BYTES);
    config.policy = options.policy;
    config.n_way = label.n_way as usize;
    config.t_base = options.t_base;
    config.t_store = options.t_store;
    config.n_reclaim = options.n_reclaim;
    config.request_timeout_ns = Some(options.store_timeout.as_nanos() as u64);
    if options.store_timeout >= options.copies_timeout && label.n_way > 1 {
        tracing::warn!(
            store_timeout_ms = options.store_timeout.as_millis() as u64,
            copies_timeout_ms = options.copies_timeout.as_millis() as u64,
            "--store-timeout-ms is not below --copies-timeout-ms: an N-way write waiting for a copy at a stalled store fails with EIO before the store counts as failed and the copy goes elsewhere"
        );
    }
    config.full_timeout_ns = options.full_timeout.as_nanos() as u64;
    if config.t_base == 0 && !label.stores.is_empty() {
        tracing::warn!(
            "--t-base 0: off-loaded data is never reclaimed by load (only once the stores are full), so the stores fill; use 1 or more unless that is what you want"
        );
    }
    config.copies_timeout_ns = options.copies_timeout.as_nanos() as u64;
    config.recovery_grace_ns = options.recovery_grace.as_nanos() as u64;
    config.offload_bytes_max = options.offload_bytes_max;
    config.offload_bytes_max_per_store = options.offload_bytes_max_per_store;
    if options.offload_bytes_max == Some(0) || options.offload_bytes_max_per_store == Some(0) {
        tracing::warn!(
            "an off-load bound of 0: nothing new is off-loaded (only overwrites of data off-loaded before, which wait for its reclaim)"
        );
    }
    config
}

/// The NBD port and `--metrics` beyond loopback only with credentials, or `--insecure`.
fn check_exposure(options: &VolumeOptions) -> Result<()> {
    use crate::tls::{check_ports, HTTP_CREDENTIALS, NBD_CREDENTIALS};
    let require = options.tls.policy() == cordillera_wire::nbd::haggle::TlsPolicy::Require;
    let mut ports = vec![("NBD", options.nbd, require, NBD_CREDENTIALS)];
    if let Some(m) = options.metrics {
        ports.push((
            "--metrics",
            m,
            options.control_token.is_some(),
            HTTP_CREDENTIALS,
        ));
    }
    check_ports(&ports, options.insecure).map_err(|e| anyhow!(e))
}

/// Serves until the process is stopped. Calls `ready` once the export accepts I/O (after the
/// soft state has been rebuilt from the stores, on a restart).
/// Gives the base volume its emulated device, and starts the store beside the volume on the
/// same device when asked ([`VolumeOptions::store_here`]).
fn emulate_and_serve_store(options: &VolumeOptions, file: &DiskFile) -> Result<()> {
    let emulator = match &options.emulate {
        Some(spec) => Some(Emulator::start(spec).map_err(|e| anyhow!(e))?),
        None => None,
    };
    if let Some(emulator) = &emulator {
        file.emulate(emulator.clone());
    }
    if let Some(here) = &options.store_here {
        if !here.listen.ip().is_loopback() && !options.insecure {
            bail!(
                "the store beside the volume would listen on {} with no key: it takes no \
                 --cluster-key; use a loopback address, or --insecure",
                here.listen
            );
        }
        serve_store_here(here, emulator.as_ref());
    }
    Ok(())
}

/// Starts the store beside the volume ([`VolumeOptions::store_here`]) on this runtime, its log
/// at the end of the volume's emulated device; a failure is logged and ends the process (the
/// caller asked for a store it does not have).
fn serve_store_here(here: &StoreHere, emulator: Option<&Emulator>) {
    let options = crate::store_server::ServeOptions {
        path: here.path.clone(),
        log_bytes: here.log_bytes,
        listen: here.listen,
        broadcast: Duration::from_secs(1),
        io: IoMode::Buffered,
        sparse: true,
        stats: None,
        emulate: None,
        emulator: emulator.map(|e| e.region(e.capacity_bytes().saturating_sub(here.log_bytes))),
        limits: crate::limits::Limits::default(),
        http: None,
        rack: None,
        power: Default::default(),
        auth: None,
    };
    tokio::spawn(async move {
        let served = crate::store_server::serve(options, |addr| {
            eprintln!("cordillera store: listening on {addr}")
        })
        .await;
        if let Err(e) = served {
            tracing::error!(error = %format!("{e:#}"), "the store beside the volume failed");
            std::process::exit(1);
        }
    });
}

pub async fn serve(options: VolumeOptions, ready: impl FnOnce(Listening)) -> Result<()> {
    check_exposure(&options)?;
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
    let (label, formatting) = volume_label(&existing, &options)?;
    emulate_and_serve_store(&options, &file)?;

    let config = client_config(&label, &options, size);
    let export_bytes = config.usable_bytes();

    let export = ExportConfig {
        name: options.export_name.clone(),
        limits: options.limits.clone(),
        tls: options.tls.clone(),
        ..ExportConfig::default()
    };
    // NBD requests on a channel of their own, sized for every request the NBD server admits
    // (each holds one of its connection's `in_flight_max` slots, and connections are admitted
    // up to a limit): the NBD server hands them over without waiting, so they must never find
    // it full. Everything else on a smaller one whose producers wait while it is full: a store
    // link stops reading its socket, a disk worker thread blocks, a metrics request waits.
    let request_slots = options.limits.connections.max(1) * export.in_flight_max.max(1);
    let (requests, request_inbox) = mpsc::channel::<Upward>(request_slots);
    let (events, inbox) = mpsc::channel::<Event>(INBOX_EVENTS);
    for (i, address) in label.stores.iter().enumerate() {
        let tls = options.store_tls.clone();
        tokio::spawn(store_link(i, address.clone(), tls, events.clone()));
    }
    let disk_events = events.clone();
    // Called on the disk's worker threads (not the runtime's), which may block.
    let disk = Disk::start(file.clone(), move |done| {
        let _ = disk_events.blocking_send(Event::Base(done));
    });
    let (ready_tx, ready_rx) = oneshot::channel::<Result<(), String>>();
    let mut core = Core::new(label.clone(), disk);
    core.base_device = options.base.display().to_string();
    // The core's clock: the cache's pre-load is timed from opening its log.
    let started = Instant::now();
    if let Some(c) = &options.cache {
        // Before serving: the log is marked not clean durably here.
        let (warm, log) = CacheLog::open(c, file.clone(), started)?;
        tracing::info!(
            cache_bytes = c.cache_bytes,
            log = c.log.as_ref().map(|p| p.display().to_string()),
            source = %warm.source(),
            planned_blocks = warm.preload_planned_blocks(),
            "cache ready"
        );
        core.volume = Volume::new(Some(warm));
        core.cache_log = Some(log);
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
        tokio::spawn(serve_metrics(
            l,
            events.clone(),
            options.control_token.clone(),
        ));
    }
    let mut core_task = tokio::spawn(core.run(
        config,
        Inboxes {
            events: inbox,
            requests: request_inbox,
        },
        started,
        ready_tx,
        formatting,
    ));
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
    // Recording starts before anyone is told the volume serves: a bad path fails first.
    let (backend, recorder) =
        VolumeBackend::recorded(requests, file.clone(), export_bytes, &options)?;
    let listener = TcpListener::bind(options.nbd)
        .await
        .with_context(|| format!("cannot listen on {}", options.nbd))?;
    ready(Listening {
        nbd: listener.local_addr()?,
        metrics: metrics_addr,
    });
    serve_until_stopped(listener, backend, export, &mut core_task, &events).await?;
    if let Some(recorder) = recorder {
        recorder.finish_logged()?;
    }
    Ok(())
}

/// Serves NBD until the listener or the core fails, or SIGTERM or Ctrl-C stops the core cleanly.
async fn serve_until_stopped(
    listener: TcpListener,
    backend: Arc<dyn Backend>,
    export: ExportConfig,
    core_task: &mut tokio::task::JoinHandle<Result<()>>,
    events: &mpsc::Sender<Event>,
) -> Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    tokio::select! {
        r = nbd_server::serve(listener, backend, export) => r.context("NBD listener")?,
        r = core_task => r.context("volume core")??,
        _ = terminate.recv() => stop(events).await,
        _ = tokio::signal::ctrl_c() => stop(events).await,
    }
    Ok(())
}

/// Stops the core after the requests in flight, closing the warm-up log cleanly.
async fn stop(events: &mpsc::Sender<Event>) {
    let (done, answer) = oneshot::channel();
    if events.send(Event::Shutdown { done }).await.is_err() {
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

/// An NBD request for the core task.
struct Upward {
    op: Op,
    reply: Completion,
}

/// What the core task reads.
struct Inboxes {
    events: mpsc::Receiver<Event>,
    requests: mpsc::Receiver<Upward>,
}

/// Events (all but NBD requests) waiting for the core at most.
const INBOX_EVENTS: usize = 4096;

/// What else reaches the core task.
enum Event {
    Base(Result<DiskDone, DiskError>),
    StoreUp {
        store: usize,
        link: u64,
        sender: mpsc::Sender<Vec<u8>>,
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
    requests: mpsc::Sender<Upward>,
    file: Arc<DiskFile>,
    length_bytes: u64,
}

impl VolumeBackend {
    /// The export's backend, recording its requests with `--record-trace` (the recorder is
    /// returned to be finished at the end).
    #[allow(clippy::type_complexity)]
    fn recorded(
        requests: mpsc::Sender<Upward>,
        file: Arc<DiskFile>,
        length_bytes: u64,
        options: &VolumeOptions,
    ) -> Result<(Arc<dyn Backend>, Option<Arc<crate::record_trace::Recorder>>)> {
        let mut backend: Arc<dyn Backend> = Arc::new(VolumeBackend {
            requests,
            file,
            length_bytes,
        });
        let recorder = crate::record_trace::wrap(
            options.record_trace.as_ref(),
            &options.export_name,
            &mut backend,
        )?;
        Ok((backend, recorder))
    }
}

impl Backend for VolumeBackend {
    fn length_bytes(&self) -> u64 {
        self.length_bytes
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
                match self.requests.try_send(Upward { op, reply: done }) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Closed(Upward { reply, .. })) => {
                        reply.complete(Err(std::io::Error::other("the volume has stopped")))
                    }
                    // Not while the NBD server keeps to the limits the channel is sized for.
                    Err(mpsc::error::TrySendError::Full(Upward { reply, .. })) => reply.complete(
                        Err(std::io::Error::other("the volume's request queue is full")),
                    ),
                }
            }
        }
    }
}

impl From<LinkEvent> for Event {
    fn from(e: LinkEvent) -> Event {
        match e {
            LinkEvent::Up {
                store,
                link,
                sender,
            } => Event::StoreUp {
                store,
                link,
                sender,
            },
            LinkEvent::Frame { store, link, frame } => Event::StoreFrame { store, link, frame },
            LinkEvent::Down { store, link } => Event::StoreDown { store, link },
            LinkEvent::Unreachable { store } => Event::StoreUnreachable { store },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A store that sends frames faster than the core takes them is no longer read from once
    /// the core's inbox is full: the inbox holds `INBOX_EVENTS` at most, the rest waits in the
    /// socket (and then in the store), whatever the store sends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_flooding_frames_is_not_read_from_once_the_inbox_is_full() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (events, mut inbox) = mpsc::channel::<Event>(INBOX_EVENTS);
        let link = tokio::spawn(store_link(0, address, None, events));
        let (mut store, _) = listener.accept().await.unwrap();
        let mut frame = Vec::new();
        encode(&Frame::Load(Default::default()), &mut frame);
        let burst = frame.repeat(4096);
        // Frames the store got out: a write that does not finish within a second is blocked.
        let mut sent = 0u64;
        while let Ok(Ok(())) =
            tokio::time::timeout(Duration::from_secs(1), store.write_all(&burst)).await
        {
            sent += 4096;
            assert!(sent < 100_000_000, "the link never stopped reading");
        }
        // The one StoreUp, then frames up to the inbox's size; nothing more is taken while it
        // stays full.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(inbox.len(), INBOX_EVENTS);
        assert!(sent > 4 * INBOX_EVENTS as u64, "{sent} frames sent");
        assert!(matches!(inbox.recv().await, Some(Event::StoreUp { .. })));
        // Read from again once the core takes its events.
        let mut more = 0;
        while more < 10 * INBOX_EVENTS {
            match tokio::time::timeout(Duration::from_secs(5), inbox.recv()).await {
                Ok(Some(Event::StoreFrame { .. })) => more += 1,
                other => panic!("{:?}", other.is_ok()),
            }
        }
        link.abort();
    }
}
