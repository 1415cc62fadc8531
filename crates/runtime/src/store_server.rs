//! `cordillera store serve`: the store core on a file or block device, behind the store protocol
//! over TCP. One task owns the core; connections feed it requests and receive replies (in any
//! order, by request id); disk operations run on worker threads.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cordillera_vstore::format::LOG_OFFSET;
use cordillera_vstore::store::{Config, DiskDone, DiskOp, Reply, Request, Store, WriteBytes};
use cordillera_wire::store::{decode, decode_write_head, encode, Frame, Load, WriteHead};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::disk::{run_to_quiet, run_to_quiet_concurrently, Disk, DiskError, DiskFile, IoMode};
use crate::limits::{Admission, Charge, ConnectionBudget, Limits};

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
    /// Connections, and memory per connection and in total ([`crate::limits`]).
    pub limits: Limits,
}

/// Opens the store at `path`, creating and formatting it with a log of `log_bytes` if the file
/// does not exist (see [`create_store`]; `sparse` as there). Returns the file and the ready
/// store core.
pub fn open_store(
    path: &std::path::Path,
    log_bytes: u64,
    seed: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(Arc<DiskFile>, Store)> {
    if !path.exists() {
        return create_store(path, log_bytes, seed, io, sparse);
    }
    let disk_file = Arc::new(
        DiskFile::open(path, false, io)
            .with_context(|| format!("cannot open {}", path.display()))?,
    );
    let size = disk_file.file.metadata()?.len();
    if size <= LOG_OFFSET {
        bail!(
            "{}: {size} bytes is too small to hold a store",
            path.display()
        );
    }
    let mut store = Store::recover(
        Config::new(((size - LOG_OFFSET) / 512 * 512).max(2048)),
        seed,
        0,
    );
    // Concurrently: the scan verifies one chunk while the next ones are read.
    let started = Instant::now();
    disk_file.advise_sequential(true);
    run_to_quiet_concurrently(&mut store, disk_file.clone(), || {
        started.elapsed().as_nanos() as u64
    })
    .map_err(io_error)?;
    disk_file.advise_sequential(false);
    if store.failed() {
        bail!(
            "{}: no valid store superblock (not a store, or damaged); refusing to reformat",
            path.display()
        );
    }
    run_to_quiet(&mut store, &disk_file, 0).map_err(io_error)?;
    assert!(store.is_ready(), "recovered");
    Ok((disk_file, store))
}

/// Creates a store file at `path` (which must not exist) with a log of `log_bytes`, formatted
/// and durable. Unless `sparse`, the log is first filled with zeros, as databases fill their
/// write-ahead logs: every block is then allocated, so that a full file system can never refuse
/// a write to the log, and writes in the first lap are overwrites that `fdatasync` makes
/// durable without a file-system journal commit. The file is built under a temporary name and
/// renamed into place once formatted, so a crash while creating it leaves no half-made store.
pub fn create_store(
    path: &std::path::Path,
    log_bytes: u64,
    seed: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(Arc<DiskFile>, Store)> {
    if log_bytes < 64 * 1024 || !log_bytes.is_multiple_of(512) {
        bail!("the log size must be a multiple of 512 bytes and at least 64 KiB");
    }
    let mut building = path.as_os_str().to_owned();
    building.push(".creating");
    let building = PathBuf::from(building);
    // A leftover from a crash while creating: never a store, safe to replace.
    std::fs::remove_file(&building).ok();
    let disk_file = Arc::new(
        DiskFile::open(&building, true, io)
            .with_context(|| format!("cannot create {}", building.display()))?,
    );
    disk_file.file.set_len(LOG_OFFSET + log_bytes)?;
    if !sparse {
        zero_fill(&disk_file, LOG_OFFSET, log_bytes)
            .with_context(|| format!("filling the log of {} with zeros", path.display()))?;
    }
    let store_id = ((seed as u128) << 64) | std::process::id() as u128;
    let mut store = Store::format(Config::new(log_bytes), store_id, seed);
    run_to_quiet(&mut store, &disk_file, 0).map_err(io_error)?;
    disk_file.file.sync_all()?;
    std::fs::rename(&building, path)
        .with_context(|| format!("cannot rename {} to {}", building.display(), path.display()))?;
    let directory = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    std::fs::File::open(directory)?.sync_all()?;
    assert!(store.is_ready(), "formatted");
    Ok((disk_file, store))
}

/// Writes zeros over `bytes` bytes from `offset`, then makes them durable (a new store's log;
/// `store bench` lays out fio's files with it too); reports progress on
/// standard error when it takes more than a few seconds.
pub fn zero_fill(file: &DiskFile, offset: u64, bytes: u64) -> Result<()> {
    const CHUNK: u64 = 4 << 20;
    let zeros = vec![0u8; CHUNK as usize];
    let started = Instant::now();
    let mut reported = started;
    let mut done = 0;
    while done < bytes {
        let n = CHUNK.min(bytes - done);
        file.write_batch(offset + done, &[&zeros[..n as usize]])
            .map_err(io_error)?;
        done += n;
        if reported.elapsed() >= Duration::from_secs(5) {
            reported = Instant::now();
            tracing::info!(
                done_mib = done >> 20,
                total_mib = bytes >> 20,
                mb_per_s =
                    format_args!("{:.0}", done as f64 / 1e6 / started.elapsed().as_secs_f64()),
                "filling the log with zeros"
            );
        }
    }
    file.sync().map_err(io_error)?;
    Ok(())
}

fn io_error(e: DiskError) -> anyhow::Error {
    anyhow::anyhow!("disk {} failed: {}", e.op, e.error)
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
        sender: mpsc::UnboundedSender<Outgoing>,
        /// Frames sent and not yet written.
        unwritten: Arc<AtomicUsize>,
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

/// Serves until the process is stopped. Calls `ready` with the bound address once listening.
pub async fn serve(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    crate::limits::keep_freed_buffers();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let (file, mut store) = open_store(
        &options.path,
        options.log_bytes,
        seed,
        options.io,
        options.sparse,
    )?;
    if let Some(spec) = &options.emulate {
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
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    ready(listener.local_addr()?);
    let (events, mut inbox) = mpsc::unbounded_channel::<Event>();
    let disk_events = events.clone();
    let disk = Disk::start(file.clone(), move |done| {
        let _ = disk_events.send(Event::Disk(done));
    });
    let accept_events = events.clone();
    let admission = Admission::new(options.limits.clone());
    // The largest record the store keeps: what a `read_any` reply may hold.
    let largest_record = Arc::new(AtomicU64::new(store.largest_record_bytes()));
    let accept_largest = largest_record.clone();
    tokio::spawn(async move {
        let mut next = 1u64;
        let mut refused = 0u64;
        loop {
            let (stream, peer, budget) =
                crate::limits::accept_admitted(&listener, &admission, "store", &mut refused).await;
            tracing::info!(connection = next, %peer, "client connected");
            tokio::spawn(connection(
                next,
                stream,
                budget,
                accept_largest.clone(),
                accept_events.clone(),
            ));
            next += 1;
        }
    });

    // Whether log writes (not flushes) are done on this task; see where ops are submitted.
    let inline_writes = options.emulate.is_none() && !file.direct;
    let mut flushes = FlushPlace::default();
    let started = Instant::now();
    let now = || started.elapsed().as_nanos() as u64;
    let mut connections: HashMap<u64, (mpsc::UnboundedSender<Outgoing>, Arc<AtomicUsize>)> =
        HashMap::new();
    // Store request id → (connection, the client's request id, arrival, what it holds).
    let mut requests: HashMap<u64, (u64, u64, Instant, Charge)> = HashMap::new();
    let mut next_request = 1u64;
    let mut load = LoadMeter::default();
    let mut broadcast = tokio::time::interval(options.broadcast);
    loop {
        let timeout = store
            .poll_timeout()
            .map(|t| started + Duration::from_nanos(t));
        tokio::select! {
            event = inbox.recv() => {
                let Some(mut event) = event else { break };
                // Take every event already waiting before polling the core, so that requests
                // arriving together become consecutive records submitted as one transfer.
                for _ in 0..1024 {
                    match event {
                        Event::Request { connection, id, request, charge } => {
                            let internal = next_request;
                            next_request += 1;
                            requests.insert(internal, (connection, id, Instant::now(), charge));
                            store.handle_request(now(), internal, request);
                        }
                        Event::Disk(Ok(done)) => store.handle_disk(now(), done),
                        Event::Disk(Err(e)) => {
                            // The device failed: stop before acknowledging anything more.
                            disk.stop();
                            return Err(io_error(e));
                        }
                        Event::Connected { connection, sender, unwritten } => {
                            connections.insert(connection, (sender, unwritten));
                        }
                        Event::Closed { connection } => {
                            connections.remove(&connection);
                        }
                    }
                    match inbox.try_recv() {
                        Ok(next) => event = next,
                        Err(_) => break,
                    }
                }
            }
            _ = async { tokio::time::sleep_until(timeout.expect("guarded").into()).await }, if timeout.is_some() => {
                store.handle_timeout(now());
            }
            _ = broadcast.tick() => {
                let figures = load.figures(requests.len(), &store);
                let mut frame = Vec::new();
                encode(&Frame::Load(figures), &mut frame);
                // Not to a client that leaves its replies unread: they carry the figures too.
                for (sender, unwritten) in connections.values() {
                    if unwritten.load(Ordering::Relaxed) == 0 {
                        unwritten.fetch_add(1, Ordering::Relaxed);
                        let _ = sender.send(Outgoing { frame: frame.clone(), _charge: None, unwritten: unwritten.clone() });
                    }
                }
            }
        }
        loop {
            let mut ops: Vec<DiskOp> = std::iter::from_fn(|| store.poll_disk()).collect();
            if options.emulate.is_none() {
                // A read of log pages the page cache holds is a copy: done here (without waiting
                // for the device, see `DiskFile::read_cached`), it saves a worker's wake-up and
                // the hand-off back, which cost more than the copy for the small pieces a
                // volume reads of its off-loaded data.
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
            if options.emulate.is_none() && flushes.inline() {
                // A flush the device answers at once (a memory file system, a device whose
                // cache is safe) costs less than the hand-off to a worker and back: done here
                // while recent flushes here were fast. A slow one sends the next ones to the
                // workers, so that requests keep being read during them.
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
                if let Some(e) = failed {
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
                match file.execute(op) {
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
                // Writes to a buffered, unemulated log are copies into the page cache: done here,
                // each run of consecutive records in one system call, they save two thread
                // hand-offs per batch (a third of the CPU time of 4 KiB writes went to waking
                // the workers and back). Flushes, which wait for the device, still go to them.
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
                    // The device failed: stop before acknowledging anything more.
                    disk.stop();
                    return Err(e);
                }
                for id in done {
                    store.handle_disk(now(), DiskDone::Written { id });
                }
                disk.submit_all(rest);
                continue;
            }
            disk.submit_all(ops);
            break;
        }
        if let Some(shared) = &options.stats {
            *shared.lock().expect("stats") = store.stats();
        }
        largest_record.store(store.largest_record_bytes(), Ordering::Relaxed);
        while let Some((internal, reply)) = store.poll_reply() {
            let Some((connection, id, arrived, mut charge)) = requests.remove(&internal) else {
                continue;
            };
            load.completed(arrived.elapsed());
            let figures = load.figures(requests.len(), &store);
            let mut frame = Vec::new();
            encode(
                &Frame::Reply {
                    id,
                    load: figures,
                    reply,
                },
                &mut frame,
            );
            // The reply holds its request's charge until it is written.
            charge.shrink_to(frame.len() as u64);
            if let Some((sender, unwritten)) = connections.get(&connection) {
                unwritten.fetch_add(1, Ordering::Relaxed);
                let _ = sender.send(Outgoing {
                    frame,
                    _charge: Some(charge),
                    unwritten: unwritten.clone(),
                });
            }
        }
    }
    disk.stop();
    Ok(())
}

/// A frame on its way to a client, with what its request holds until it is written.
pub(crate) struct Outgoing {
    frame: Vec<u8>,
    /// Released when the frame is dropped, after it is written.
    _charge: Option<Charge>,
    unwritten: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Outgoing {
    fn as_ref(&self) -> &[u8] {
        &self.frame
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        self.unwritten.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Bytes a connection reads at once when frames are small or unknown.
const READ_CHUNK: usize = 1 << 20;
/// Writes with at least this much data have it read straight into a buffer of their own.
const DIRECT_DATA_MIN: usize = 16 << 10;
/// The read after such a write: the next frame's head and a little of its data.
const HEAD_READ: usize = 4 << 10;
/// What every request is charged besides its data.
const REQUEST_OVERHEAD: u64 = 4096;

/// Hands a request to the server's task; false once the server has stopped.
fn dispatch(
    events: &mpsc::UnboundedSender<Event>,
    connection: u64,
    id: u64,
    request: Request,
    charge: Charge,
) -> bool {
    events
        .send(Event::Request {
            connection,
            id,
            request,
            charge,
        })
        .is_ok()
}

/// What a write with `data_bytes` of data is charged when read.
fn write_charge(data_bytes: usize) -> u64 {
    REQUEST_OVERHEAD + data_bytes as u64
}

/// What a request is charged when read: its own bytes and the most its reply may hold.
fn request_charge(request: &Request, largest_record: u64) -> u64 {
    let reply = match request {
        Request::Write { data, .. } => return write_charge(data.len()),
        Request::Read { length_bytes, .. } => {
            (*length_bytes).min(cordillera_vstore::format::PAYLOAD_BYTES_MAX as u64 + 4096)
        }
        Request::ReadAny { .. } => largest_record,
        Request::Delete { .. } => 0,
        Request::Metadata { .. } => 64 << 10,
    };
    REQUEST_OVERHEAD + reply
}

/// One connection: frames in, frames out. Each request is charged to the connection's budget
/// before it goes to the core, and the charge is released once its reply is written: a client
/// that never reads its replies is no longer read from once its budget is used.
async fn connection(
    id: u64,
    stream: TcpStream,
    budget: ConnectionBudget,
    largest_record: Arc<AtomicU64>,
    events: mpsc::UnboundedSender<Event>,
) {
    let (mut reader, writer) = stream.into_split();
    let (sender, outbox) = mpsc::unbounded_channel::<Outgoing>();
    let _ = events.send(Event::Connected {
        connection: id,
        sender,
        unwritten: Arc::new(AtomicUsize::new(0)),
    });
    let writing = tokio::spawn(write_frames(writer, outbox));
    // A client that sends replies or garbage is not speaking the protocol: its connection is
    // dropped (the store and other clients are unaffected).
    let mut buffer: Vec<u8> = Vec::with_capacity(1 << 16);
    // What the next read may bring: a large chunk, or (after a write whose data was read into
    // its own buffer, when more such writes are likely) little more than the next frame's head,
    // so that its data, too, goes straight where it is kept.
    let mut next_read = READ_CHUNK;
    let read: Result<(), cordillera_wire::store::WireError> = 'read: loop {
        buffer.reserve(next_read);
        match (&mut reader)
            .take(next_read as u64)
            .read_buf(&mut buffer)
            .await
        {
            Ok(0) | Err(_) => break Ok(()),
            Ok(_) => {}
        }
        next_read = READ_CHUNK;
        let mut at = 0;
        loop {
            // A large write whose data has not all arrived: its data is read into a buffer of
            // its own, which the store keeps (a copy out of the frame buffer costs as much as
            // the read itself). It is charged first: a client over its budget is not read from.
            match decode_write_head(&buffer[at..]) {
                Err(e) => break 'read Err(e),
                Ok(Some(head))
                    if head.data_bytes >= DIRECT_DATA_MIN
                        && buffer.len() - at < WriteHead::BYTES + head.data_bytes =>
                {
                    let charge = budget.charge(write_charge(head.data_bytes)).await;
                    let mut data = Vec::with_capacity(head.data_bytes);
                    data.extend_from_slice(&buffer[at + WriteHead::BYTES..]);
                    buffer.clear();
                    at = 0;
                    while data.len() < head.data_bytes {
                        let want = (head.data_bytes - data.len()) as u64;
                        match (&mut reader).take(want).read_buf(&mut data).await {
                            Ok(0) | Err(_) => break 'read Ok(()),
                            Ok(_) => {}
                        }
                    }
                    let request = head.request(data);
                    if !dispatch(&events, id, head.id, request, charge) {
                        break 'read Ok(());
                    }
                    next_read = HEAD_READ;
                    break;
                }
                _ => {}
            }
            let (frame, used) = match decode(&buffer[at..]) {
                Ok(Some(decoded)) => decoded,
                Ok(None) => break,
                Err(e) => break 'read Err(e),
            };
            at += used;
            let Frame::Request {
                id: request_id,
                request,
            } = frame
            else {
                break 'read Ok(());
            };
            let charge = budget
                .charge(request_charge(
                    &request,
                    largest_record.load(Ordering::Relaxed),
                ))
                .await;
            if !dispatch(&events, id, request_id, request, charge) {
                break 'read Ok(());
            }
        }
        buffer.drain(..at);
    };
    match read {
        Ok(()) => tracing::info!(connection = id, "client disconnected"),
        Err(e) => tracing::info!(connection = id, error = %e, "client connection closed"),
    }
    let _ = events.send(Event::Closed { connection: id });
    writing.abort();
}

/// Writes the frames sent on `outbox` to `writer` until either closes. Every frame already
/// waiting goes out in one write: replies completed together (a group commit acknowledges
/// many) cost one system call, not one each. A lone frame is written without a copy. Frames
/// are dropped (releasing what they hold) only once written.
pub(crate) async fn write_frames<T: AsRef<[u8]>>(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    mut outbox: mpsc::UnboundedReceiver<T>,
) {
    let mut gathered: Vec<u8> = Vec::new();
    let mut held: Vec<T> = Vec::new();
    while let Some(first) = outbox.recv().await {
        let mut bytes = first.as_ref().len();
        held.push(first);
        while bytes < (1 << 20) {
            match outbox.try_recv() {
                Ok(more) => {
                    bytes += more.as_ref().len();
                    held.push(more);
                }
                Err(_) => break,
            }
        }
        let written = if held.len() == 1 {
            writer.write_all(held[0].as_ref()).await
        } else {
            gathered.clear();
            for frame in &held {
                gathered.extend_from_slice(frame.as_ref());
            }
            writer.write_all(&gathered).await
        };
        held.clear();
        if written.is_err() {
            break;
        }
    }
}

/// Reads frames from `reader` and gives each to `each` until the stream ends or fails (`Ok`),
/// `each` returns false (`Ok`), or a frame does not decode (`Err`).
pub(crate) async fn read_frames(
    reader: &mut tokio::net::tcp::OwnedReadHalf,
    mut each: impl FnMut(Frame) -> bool,
) -> Result<(), cordillera_wire::store::WireError> {
    let mut buffer: Vec<u8> = Vec::with_capacity(1 << 16);
    loop {
        // Straight into the frame buffer's spare capacity: no intermediate copy.
        buffer.reserve(1 << 16);
        match reader.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => return Ok(()),
            Ok(_) => {}
        }
        let mut at = 0;
        while let Some((frame, used)) = decode(&buffer[at..])? {
            at += used;
            if !each(frame) {
                return Ok(());
            }
        }
        buffer.drain(..at);
    }
}

/// Request rate and response time, for the load figures.
#[derive(Default)]
struct LoadMeter {
    recent: VecDeque<Instant>,
    mean_response_us: f64,
}

impl LoadMeter {
    fn completed(&mut self, response: Duration) {
        let now = Instant::now();
        self.recent.push_back(now);
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            self.recent.pop_front();
        }
        let us = response.as_secs_f64() * 1e6;
        self.mean_response_us = if self.mean_response_us == 0.0 {
            us
        } else {
            0.9 * self.mean_response_us + 0.1 * us
        };
    }

    fn figures(&mut self, queue_length: usize, store: &Store) -> Load {
        let now = Instant::now();
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            self.recent.pop_front();
        }
        Load {
            queue_length: queue_length as u32,
            requests_per_s: self.recent.len() as u32,
            mean_response_us: self.mean_response_us as u32,
            used_bytes: store.used_bytes(),
            log_bytes: store.log_bytes(),
        }
    }
}

/// A blocking client of the store protocol, for tools and tests: pipelined sends, replies
/// matched by request id, load broadcasts kept.
pub struct StoreClient {
    stream: std::net::TcpStream,
    buffer: Vec<u8>,
    /// Requests sent but not yet written to the socket (written before waiting for a reply).
    outgoing: Vec<u8>,
    next_id: u64,
    pub last_load: Option<Load>,
    /// Replies that arrived while waiting for another.
    early: HashMap<u64, Reply>,
}

impl StoreClient {
    pub fn connect(addr: SocketAddr) -> std::io::Result<StoreClient> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(StoreClient {
            stream,
            buffer: Vec::new(),
            outgoing: Vec::new(),
            next_id: 1,
            last_load: None,
            early: HashMap::new(),
        })
    }

    /// Sends a request without waiting for its reply; returns its id. Requests are gathered
    /// and written together when the client next waits for a reply (or [`StoreClient::flush`]).
    pub fn send(&mut self, request: Request) -> std::io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        encode(&Frame::Request { id, request }, &mut self.outgoing);
        if self.outgoing.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(id)
    }

    /// Writes every request sent so far to the socket.
    pub fn flush(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        if !self.outgoing.is_empty() {
            self.stream.write_all(&self.outgoing)?;
            self.outgoing.clear();
        }
        Ok(())
    }

    /// The next reply, whichever request it answers.
    pub fn receive(&mut self) -> std::io::Result<(u64, Reply)> {
        if let Some(id) = self.early.keys().next().copied() {
            return Ok((id, self.early.remove(&id).expect("early reply")));
        }
        self.read_reply()
    }

    fn read_reply(&mut self) -> std::io::Result<(u64, Reply)> {
        use std::io::Read;
        self.flush()?;
        loop {
            match decode(&self.buffer) {
                Ok(Some((frame, used))) => {
                    self.buffer.drain(..used);
                    match frame {
                        Frame::Reply { id, load, reply } => {
                            self.last_load = Some(load);
                            return Ok((id, reply));
                        }
                        Frame::Load(load) => self.last_load = Some(load),
                        Frame::Request { .. } => {
                            return Err(std::io::Error::other("the store sent a request"))
                        }
                    }
                }
                Ok(None) => {
                    let mut chunk = [0u8; 65536];
                    let n = self.stream.read(&mut chunk)?;
                    if n == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    self.buffer.extend_from_slice(&chunk[..n]);
                }
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
        }
    }

    /// Sends a request and waits for its reply.
    pub fn call(&mut self, request: Request) -> std::io::Result<Reply> {
        let id = self.send(request)?;
        loop {
            let (got, reply) = self.read_reply()?;
            if got == id {
                return Ok(reply);
            }
            self.early.insert(got, reply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn flushes_leave_the_task_after_two_slow_ones_and_come_back_later() {
        let mut place = FlushPlace::default();
        assert!(place.inline());
        place.took(Duration::from_micros(20));
        assert!(place.inline(), "a fast flush keeps them here");
        place.took(Duration::from_millis(3));
        assert!(place.inline(), "one slow flush alone may be a preemption");
        place.took(Duration::from_micros(20));
        place.took(Duration::from_millis(3));
        assert!(
            place.inline(),
            "a fast one between slow ones keeps them here"
        );
        place.took(Duration::from_millis(3));
        assert!(
            !place.inline(),
            "a second slow one in a row sends the next ones to the workers"
        );
        place.passed(FlushPlace::AWAY - 1);
        assert!(!place.inline());
        place.passed(1);
        assert!(place.inline(), "then one is tried here again");
        place.took(Duration::from_millis(3));
        assert!(place.inline(), "and it takes two slow ones again to leave");
        place.took(Duration::from_millis(3));
        assert!(!place.inline());
    }

    #[test]
    fn a_new_store_has_its_log_filled_unless_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let log = 8 << 20;
        for (name, sparse) in [("filled", false), ("sparse", true)] {
            let path = dir.path().join(name);
            let (_, store) = open_store(&path, log, 7, IoMode::Auto, sparse).unwrap();
            assert!(store.is_ready());
            let allocated = std::fs::metadata(&path).unwrap().blocks() * 512;
            if sparse {
                assert!(allocated < log / 2, "{name}: {allocated} bytes allocated");
            } else {
                assert!(
                    allocated >= LOG_OFFSET + log,
                    "{name}: {allocated} bytes allocated"
                );
            }
            let mut creating = path.clone().into_os_string();
            creating.push(".creating");
            assert!(
                !PathBuf::from(creating).exists(),
                "{name}: temporary file left"
            );
            // It opens again as the same store.
            let (_, again) = open_store(&path, 0, 8, IoMode::Auto, false).unwrap();
            assert_eq!(again.store_id(), store.store_id());
        }
    }

    #[test]
    fn a_half_created_store_is_never_opened_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        // What a crash while creating leaves: a temporary file, nothing at the store's path.
        std::fs::write(dir.path().join("s.creating"), vec![0u8; 70_000]).unwrap();
        let (_, store) = open_store(&path, 1 << 20, 3, IoMode::Auto, false).unwrap();
        assert!(store.is_ready());
        assert!(!dir.path().join("s.creating").exists());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            LOG_OFFSET + (1 << 20)
        );
    }

    #[test]
    fn bad_log_sizes_are_refused_without_leaving_files() {
        let dir = tempfile::tempdir().unwrap();
        for size in [1000, 4096, (1 << 20) + 1] {
            let path = dir.path().join(format!("s{size}"));
            let Err(e) = open_store(&path, size, 1, IoMode::Auto, false) else {
                panic!("log size {size} accepted");
            };
            assert!(e.to_string().contains("log size"), "{e}");
            assert!(!path.exists());
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
