//! `cordillera store serve`: the store core on a file or block device, behind the store protocol
//! over TCP. One task owns the core; connections feed it requests and receive replies (in any
//! order, by request id); disk operations run on worker threads.

mod client;
mod connection;
mod file;
mod peers;
mod report;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cordillera_vstore::format::LOG_OFFSET;
use cordillera_vstore::store::{
    Config, DiskDone, DiskOp, Reply, Request, Store, StoreError, WriteBytes,
};
use cordillera_wire::store::{
    decode, decode_write_head, encode, encode_read_reply, Frame, Load, WriteHead,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::disk::{run_to_quiet, run_to_quiet_concurrently, Disk, DiskError, DiskFile, IoMode};
use crate::limits::{Admission, Charge, ConnectionBudget, Limits};
use crate::power::{DiskBusy, PowerReport};

pub use client::*;
pub(crate) use connection::*;
pub use file::*;
pub use peers::{check_exposure, peers_file};
use peers::{Admit, Peers};
use report::*;

#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub path: PathBuf,
    /// Log size of a store created by `serve` when the file does not exist.
    pub log_bytes: u64,
    pub listen: SocketAddr,
    /// Interval of unprompted load broadcasts.
    pub broadcast: Duration,
    /// `O_DIRECT` or buffered I/O.
    pub io: IoMode,
    /// Leave a new store's log sparse instead of filling it with zeros ([`create_store`]).
    pub sparse: bool,
    /// When set, the core's counters are published here after every event (for benchmarks).
    pub stats: Option<std::sync::Arc<std::sync::Mutex<cordillera_vstore::store::Stats>>>,
    /// Serve with the timing of this modeled device ([`crate::emulate`]); recovery's scan of
    /// the log runs at the file's own speed.
    pub emulate: Option<crate::emulate::EmulateSpec>,
    /// A device model shared with another user in this process, used instead of `emulate`:
    /// the store's log as a partition of a volume's emulated base disk (`volume serve
    /// --store-here`).
    pub emulator: Option<crate::emulate::Emulator>,
    /// Connections, and memory per connection and in total ([`crate::limits`]).
    pub limits: Limits,
    /// Serve `/metrics` (Prometheus) and `/status` (JSON) here.
    pub http: Option<String>,
    /// A label reported with the figures (a Sierra logger's rack).
    pub rack: Option<String>,
    /// The power model the figures' energy is counted by.
    pub power: cordillera_models::power::PowerParams,
    /// TLS on the port, and each client id bound to its authenticated peer (`--cluster-key`);
    /// `None`: plain TCP, anyone who reaches the port is served.
    pub auth: Option<StoreAuth>,
}

impl ServeOptions {
    /// A store on `path` (created with a sparse log of `log_bytes` when absent) on a free port
    /// of the loopback, buffered, unemulated, without limits beyond the defaults, metrics or
    /// authentication: for tests and benchmarks, which set what they need besides.
    pub fn local(path: PathBuf, log_bytes: u64) -> ServeOptions {
        ServeOptions {
            path,
            log_bytes,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            broadcast: Duration::from_secs(1),
            io: IoMode::Buffered,
            sparse: true,
            stats: None,
            emulate: None,
            emulator: None,
            limits: Default::default(),
            http: None,
            rack: None,
            power: Default::default(),
            auth: None,
        }
    }

    /// Whether the log takes a modeled device's time (its own, or a shared one).
    pub fn emulated(&self) -> bool {
        self.emulate.is_some() || self.emulator.is_some()
    }
}

/// A store's authentication: the TLS every connection must complete, and the file recording
/// which peer owns each client id ([`cordillera_wire::peers`]).
#[derive(Clone, Debug)]
pub struct StoreAuth {
    pub tls: crate::tls::TlsServer,
    pub peers: PathBuf,
}

/// How long a connection may take to complete its TLS handshake before its slot is freed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The store's file opened (recovered) for serving, emulating a device when asked; what the
/// recovery found is logged.
fn open_for_serving(options: &ServeOptions) -> Result<(Arc<DiskFile>, Store)> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let (file, store) = open_store(
        &options.path,
        options.log_bytes,
        seed,
        options.io,
        options.sparse,
    )?;
    if let Some(emulator) = &options.emulator {
        file.emulate(emulator.clone());
        tracing::info!("store emulating a partition of a device shared in this process");
    } else if let Some(spec) = &options.emulate {
        file.emulate(crate::emulate::Emulator::start(spec).map_err(anyhow::Error::msg)?);
        tracing::info!(preset = %spec.preset, "store emulating a device");
    }
    let stats = store.stats();
    tracing::info!(
        path = %options.path.display(),
        records_scanned = stats.records_scanned,
        bytes_scanned = stats.bytes_scanned,
        valid_data_bytes = stats.valid_data_bytes,
        log_bytes_in_use = store.used_bytes(),
        "store ready"
    );
    Ok((file, store))
}

/// Accepts connections (as `admission` allows) and starts each one's task, numbered from 1;
/// with `tls`, a connection is served once its handshake completes (within
/// [`HANDSHAKE_TIMEOUT`]), as the peer it authenticated.
fn spawn_acceptor(
    listener: TcpListener,
    admission: Admission,
    tls: Option<crate::tls::TlsServer>,
    largest_record: Arc<AtomicU64>,
    events: mpsc::Sender<Event>,
) {
    tokio::spawn(async move {
        let mut next = 1u64;
        let mut refused = 0u64;
        loop {
            let (stream, peer, budget) =
                crate::limits::accept_admitted(&listener, &admission, "store", &mut refused).await;
            tracing::info!(connection = next, %peer, "client connected");
            let (id, largest, events, tls) =
                (next, largest_record.clone(), events.clone(), tls.clone());
            tokio::spawn(async move {
                let Some(tls) = tls else {
                    let halves = stream.into_split();
                    return connection(id, halves, None, budget, largest, events).await;
                };
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                    Ok(Ok((stream, authenticated))) => {
                        let halves = tokio::io::split(stream);
                        let identity = authenticated.identity;
                        connection(id, halves, identity, budget, largest, events).await
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(connection = id, %peer, error = %e, "client refused")
                    }
                    Err(_) => {
                        tracing::warn!(connection = id, %peer, "client refused: no TLS handshake within {HANDSHAKE_TIMEOUT:?}")
                    }
                }
            });
            next += 1;
        }
    });
}

/// Reads the peer bindings (with `--cluster-key`) and starts accepting connections, as the
/// options' limits admit them.
fn start_accepting(
    listener: TcpListener,
    options: &ServeOptions,
    largest_record: Arc<AtomicU64>,
    events: mpsc::Sender<Event>,
) -> Result<Peers> {
    let admission =
        Admission::new(options.limits.clone()).evict_idle(crate::limits::IDLE_EVICT_AFTER);
    let peers = match &options.auth {
        Some(auth) => Peers::bound_in(&auth.peers)?,
        None => Peers::default(),
    };
    let tls = options.auth.as_ref().map(|a| a.tls.clone());
    spawn_acceptor(listener, admission, tls, largest_record, events);
    Ok(peers)
}

/// Requests the store has not answered: its id → (connection, the client's request id,
/// arrival, what it holds).
type Requests = HashMap<u64, (u64, u64, Instant, Charge)>;

/// Open connections: id → (where its frames go, how many are sent and not yet written).
type Connections = HashMap<u64, (mpsc::Sender<Outgoing>, Arc<AtomicUsize>)>;

fn io_error(e: DiskError) -> anyhow::Error {
    anyhow::anyhow!("disk {} failed: {}", e.op, e.error)
}

/// Events the server's task takes at most at once waiting (requests, disk completions,
/// connections opened and closed).
const INBOX_EVENTS: usize = 4096;

/// Queues a frame for a connection's writer. Never full: a reply holds one of the
/// connection's requests, and a load broadcast goes only to a connection with nothing
/// waiting (the channel has room for every request and one broadcast). A connection whose
/// writer has stopped is closing: its frames are dropped.
fn send_frame(sender: &mpsc::Sender<Outgoing>, frame: Outgoing) {
    if let Err(mpsc::error::TrySendError::Full(_)) = sender.try_send(frame) {
        tracing::error!("a connection's reply queue is full: a reply is lost");
        debug_assert!(false, "a connection's reply queue is full");
    }
}

enum Event {
    Request {
        connection: u64,
        id: u64,
        request: Request,
        charge: Charge,
    },
    Disk(Result<DiskDone, DiskError>),
    Connected {
        connection: u64,
        sender: mpsc::Sender<Outgoing>,
        /// Frames sent and not yet written.
        unwritten: Arc<AtomicUsize>,
        /// The peer its TLS authenticated.
        identity: Option<String>,
    },
    Closed {
        connection: u64,
    },
}

/// Where group-commit flushes run: on the server's task while the device answers them within
/// [`FlushPlace::FAST`], else on the disk's workers for the next [`FlushPlace::AWAY`] flushes
/// (then one is tried in place again: devices change, e.g. when their cache fills). It takes
/// two slow flushes in a row to send them away: one alone is as likely the thread being
/// preempted (a burst of network interrupts on its CPU) as the device being slow.
#[derive(Default)]
struct FlushPlace {
    /// Flushes still to send to the workers before one is tried in place.
    away: usize,
    /// Whether the last flush tried in place was slow.
    slow: bool,
}

impl FlushPlace {
    const FAST: Duration = Duration::from_micros(100);
    const AWAY: usize = 256;

    fn inline(&self) -> bool {
        self.away == 0
    }

    fn took(&mut self, elapsed: Duration) {
        let slow = elapsed > Self::FAST;
        if slow && self.slow {
            self.away = Self::AWAY;
            self.slow = false;
        } else {
            self.slow = slow;
        }
    }

    fn passed(&mut self, flushes: usize) {
        self.away = self.away.saturating_sub(flushes);
    }
}

/// Log reads up to this size are tried in place when the page cache holds them.
const CACHED_READ_MAX: u64 = 128 << 10;

/// Serves `options` on a thread of its own (a current-thread runtime), for tests and tools;
/// the bound address once listening. The store stops with the process.
pub fn serve_in_thread(options: ServeOptions) -> Result<SocketAddr> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        if let Err(e) = runtime.block_on(serve(options, |addr| {
            let _ = tx.send(addr);
        })) {
            tracing::error!(error = %e, "the store stopped");
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .context("the store did not start listening within 30 s")
}

/// Serves until the process is stopped. Calls `ready` with the bound address once listening.
pub async fn serve(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    // A device error stops the store: its message names the device.
    let path = options.path.clone();
    serve_store(options, ready).await.map_err(|e| {
        tracing::error!(device = %path.display(), error = %e, "the store stopped");
        e.context(format!("store {}", path.display()))
    })
}

async fn serve_store(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    crate::limits::keep_freed_buffers();
    let (file, mut store) = open_for_serving(&options)?;
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    ready(listener.local_addr()?);
    // Bounded: connections wait to hand over requests while it is full (and are not read from
    // meanwhile); the disk's worker threads wait to hand over completions.
    let (events, mut inbox) = mpsc::channel::<Event>(INBOX_EVENTS);
    let disk_events = events.clone();
    let disk = Disk::start(file.clone(), move |done| {
        let _ = disk_events.blocking_send(Event::Disk(done));
    });
    // The largest record the store keeps: what a `read_any` reply may hold.
    let largest_record = Arc::new(AtomicU64::new(store.largest_record_bytes()));
    let mut peers = start_accepting(listener, &options, largest_record.clone(), events.clone())?;

    // Whether log writes (not flushes) are done on this task; see where ops are submitted.
    let inline_writes = !options.emulated() && !file.direct;
    let mut flushes = FlushPlace::default();
    // Reads the page cache answers in place are not disk time.
    let mut busy = DiskBusy::new(options.power);
    let started = Instant::now();
    let now = || started.elapsed().as_nanos() as u64;
    let mut connections: Connections = HashMap::new();
    // Store request id → (connection, the client's request id, arrival, what it holds).
    let mut requests: Requests = HashMap::new();
    let mut next_request = 1u64;
    // Requests answered without the store (a client id bound to another peer).
    let mut answered: VecDeque<(u64, Reply)> = VecDeque::new();
    let mut load = LoadMeter::on_device(file.emulator());
    let mut broadcast = tokio::time::interval(options.broadcast);
    // The sender is kept so that the branch below never sees the channel closed.
    let (_report_tx, mut report_rx) = serve_http(options.http.as_deref()).await?;
    loop {
        let timeout = store
            .poll_timeout()
            .map(|t| started + Duration::from_nanos(t));
        tokio::select! {
            event = inbox.recv() => {
                let Some(event) = event else { break };
                let taken = take_events(
                    event,
                    &mut inbox,
                    &mut store,
                    (&mut requests, &mut next_request, &mut answered),
                    (&mut connections, &mut peers),
                    &mut busy,
                    &now,
                );
                if let Err(e) = taken {
                    // The device failed: stop before acknowledging anything more.
                    disk.stop();
                    return Err(io_error(e));
                }
            }
            _ = async { tokio::time::sleep_until(timeout.expect("guarded").into()).await }, if timeout.is_some() => {
                store.handle_timeout(now());
            }
            request = report_rx.recv() => {
                let Some(request) = request else { continue };
                let power = busy.meter.report();
                let text = report_text(&store, &mut load, (requests.len(), connections.len()), (options.rack.as_deref(), power), request.json);
                let _ = request.reply.send(text);
            }
            _ = broadcast.tick() => {
                broadcast_load(&connections, load.figures(requests.len(), &store));
            }
        }
        loop {
            let mut ops: Vec<DiskOp> = std::iter::from_fn(|| store.poll_disk()).collect();
            if !options.emulated() {
                read_cached(&file, &mut store, &mut ops, &now);
            }
            if !options.emulated() && flushes.inline() {
                // Disk time only when there is a flush to do.
                let flushing = ops.iter().any(|op| matches!(op, DiskOp::Flush { .. })) as usize;
                busy.started(flushing);
                let flushed = flush_inline(&file, &mut store, &mut ops, &mut flushes, &now);
                busy.finished(flushing);
                if let Err(e) = flushed {
                    disk.stop();
                    return Err(io_error(e));
                }
            } else {
                flushes.passed(
                    ops.iter()
                        .filter(|op| matches!(op, DiskOp::Flush { .. }))
                        .count(),
                );
            }
            // A durable write step is asked for only when the store is otherwise idle: do it
            // here, without the two thread hand-offs to and from a worker (they cost more than
            // the write itself on small machines). Requests arriving meanwhile wait at most
            // one write and flush, and are then taken together.
            if let [DiskOp::Write { durable: true, .. }] = ops.as_slice() {
                let op = ops.into_iter().next().expect("one operation");
                busy.started(1);
                let executed = file.execute(op);
                busy.finished(1);
                match executed {
                    Ok(done) => store.handle_disk(now(), done),
                    Err(e) => {
                        disk.stop();
                        return Err(io_error(e));
                    }
                }
                continue;
            }
            if inline_writes
                && ops
                    .iter()
                    .any(|op| matches!(op, DiskOp::Write { durable: false, .. }))
            {
                busy.started(1);
                let written = write_inline(&file, &mut store, ops, &now);
                busy.finished(1);
                match written {
                    Ok(rest) => {
                        busy.started(rest.len());
                        disk.submit_all(rest);
                    }
                    Err(e) => {
                        // The device failed: stop before acknowledging anything more.
                        disk.stop();
                        return Err(e);
                    }
                }
                continue;
            }
            busy.started(ops.len());
            disk.submit_all(ops);
            break;
        }
        if let Some(shared) = &options.stats {
            *shared.lock().expect("stats") = store.stats();
        }
        largest_record.store(store.largest_record_bytes(), Ordering::Relaxed);
        send_replies(
            &mut store,
            (&mut requests, &mut answered),
            &connections,
            &mut load,
        );
    }
    disk.stop();
    Ok(())
}

/// One event, and every event already waiting after it (up to 1,024), carried to the store.
/// Take every event already waiting before polling the core, so that requests
/// arriving together become consecutive records submitted as one transfer.
fn take_events(
    mut event: Event,
    inbox: &mut mpsc::Receiver<Event>,
    store: &mut Store,
    (requests, next_request, answered): (&mut Requests, &mut u64, &mut VecDeque<(u64, Reply)>),
    (connections, peers): (&mut Connections, &mut Peers),
    busy: &mut DiskBusy,
    now: &dyn Fn() -> u64,
) -> Result<(), DiskError> {
    // One clock reading for the events taken together: they are handled within microseconds.
    let (arrived, at) = (Instant::now(), now());
    for _ in 0..1024 {
        match event {
            Event::Request {
                connection,
                id,
                request,
                charge,
            } => {
                let internal = *next_request;
                *next_request += 1;
                requests.insert(internal, (connection, id, arrived, charge));
                match peers.admit(connection, &request) {
                    Admit::Serve => store.handle_request(at, internal, request),
                    Admit::Deny => answered.push_back((internal, Reply::Error(StoreError::Denied))),
                }
            }
            Event::Disk(Ok(done)) => {
                busy.finished(1);
                store.handle_disk(at, done);
            }
            Event::Disk(Err(e)) => return Err(e),
            Event::Connected {
                connection,
                sender,
                unwritten,
                identity,
            } => {
                connections.insert(connection, (sender, unwritten));
                peers.connected(connection, identity);
            }
            Event::Closed { connection } => {
                connections.remove(&connection);
                peers.closed(connection);
            }
        }
        match inbox.try_recv() {
            Ok(next) => event = next,
            Err(_) => break,
        }
    }
    Ok(())
}

/// A read of log pages the page cache holds is a copy: done here (without waiting
/// for the device, see `DiskFile::read_cached`), it saves a worker's wake-up and
/// the hand-off back, which cost more than the copy for the small pieces a
/// volume reads of its off-loaded data.
fn read_cached(file: &DiskFile, store: &mut Store, ops: &mut Vec<DiskOp>, now: &dyn Fn() -> u64) {
    ops.retain(|op| match op {
        DiskOp::Read {
            id,
            offset_bytes,
            length_bytes,
        } if *length_bytes <= CACHED_READ_MAX => {
            match file.read_cached(*offset_bytes, *length_bytes) {
                Some(data) => {
                    store.handle_disk(now(), DiskDone::Read { id: *id, data });
                    false
                }
                None => true,
            }
        }
        _ => true,
    });
}

/// A flush the device answers at once (a memory file system, a device whose
/// cache is safe) costs less than the hand-off to a worker and back: done here
/// while recent flushes here were fast. A slow one sends the next ones to the
/// workers, so that requests keep being read during them.
fn flush_inline(
    file: &DiskFile,
    store: &mut Store,
    ops: &mut Vec<DiskOp>,
    flushes: &mut FlushPlace,
    now: &dyn Fn() -> u64,
) -> Result<(), DiskError> {
    let mut failed = None;
    ops.retain(|op| match op {
        DiskOp::Flush { id } if failed.is_none() => {
            let began = Instant::now();
            match file.execute(DiskOp::Flush { id: *id }) {
                Ok(done) => store.handle_disk(now(), done),
                Err(e) => failed = Some(e),
            }
            flushes.took(began.elapsed());
            false
        }
        _ => true,
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Writes to a buffered, unemulated log are copies into the page cache: done here, each run of
/// consecutive records in one system call, they save two thread hand-offs per batch (a third
/// of the CPU time of 4 KiB writes went to waking the workers and back). Flushes, which wait for
/// the device, still go to them: returned with the other operations.
fn write_inline(
    file: &DiskFile,
    store: &mut Store,
    ops: Vec<DiskOp>,
    now: &dyn Fn() -> u64,
) -> Result<Vec<DiskOp>> {
    let mut rest = Vec::new();
    let mut run: Vec<(u64, WriteBytes)> = Vec::new();
    let mut run_at = 0u64;
    let mut run_end = 0u64;
    let mut done = Vec::new();
    let mut write_run = |run: &mut Vec<(u64, WriteBytes)>, at: u64| -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        let slices: Vec<&[u8]> = run.iter().flat_map(|(_, d)| d.slices()).collect();
        file.write_batch(at, &slices).map_err(io_error)?;
        done.extend(run.drain(..).map(|(id, _)| id));
        Ok(())
    };
    let mut failed = None;
    for op in ops {
        match op {
            DiskOp::Write {
                id,
                offset_bytes,
                data,
                durable: false,
            } => {
                if run.is_empty() || offset_bytes != run_end {
                    if let Err(e) = write_run(&mut run, run_at) {
                        failed = Some(e);
                        break;
                    }
                    run_at = offset_bytes;
                    run_end = offset_bytes;
                }
                run_end += data.len() as u64;
                run.push((id, data));
            }
            other => rest.push(other),
        }
    }
    if failed.is_none() {
        if let Err(e) = write_run(&mut run, run_at) {
            failed = Some(e);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    for id in done {
        store.handle_disk(now(), DiskDone::Written { id });
    }
    Ok(rest)
}

/// Each reply the store has, framed with the load figures and sent to its connection (if it
/// is still there); a reply holds its request's charge until it is written.
fn send_replies(
    store: &mut Store,
    (requests, answered): (&mut Requests, &mut VecDeque<(u64, Reply)>),
    connections: &Connections,
    load: &mut LoadMeter,
) {
    // One clock reading for the replies sent together: they were made ready together.
    let mut now = None;
    while let Some((internal, reply)) = answered.pop_front().or_else(|| store.poll_reply()) {
        let Some((connection, id, arrived, mut charge)) = requests.remove(&internal) else {
            continue;
        };
        let now = *now.get_or_insert_with(Instant::now);
        load.completed(now, now.saturating_duration_since(arrived));
        let figures = load.figures_at(now, requests.len(), store);
        let mut frame = Vec::new();
        let data = match reply {
            // Read data goes out from the buffers it was read into (no copy into the frame).
            Reply::Read(pieces) => encode_read_reply(id, &figures, pieces, &mut frame),
            reply => {
                encode(
                    &Frame::Reply {
                        id,
                        load: figures,
                        reply,
                    },
                    &mut frame,
                );
                Vec::new()
            }
        };
        let bytes = frame.len() + data.iter().map(|(_, d)| d.len()).sum::<usize>();
        // The reply holds its request's charge until it is written.
        charge.shrink_to(bytes as u64);
        if let Some((sender, unwritten)) = connections.get(&connection) {
            unwritten.fetch_add(1, Ordering::Relaxed);
            send_frame(
                sender,
                Outgoing {
                    frame,
                    data,
                    _charge: Some(charge),
                    unwritten: unwritten.clone(),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests;
