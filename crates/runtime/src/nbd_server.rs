//! An NBD server (the protocol of the NetworkBlockDevice/nbd repository's `doc/proto.md`;
//! messages in `cordillera_wire::nbd`): fixed newstyle handshake with `NBD_OPT_EXPORT_NAME`,
//! `ABORT`, `LIST`, `INFO` and `GO`; then READ, WRITE, FLUSH, TRIM, WRITE_ZEROES and DISC with
//! the FUA flag, many requests in flight per connection, answered as they complete (out of
//! order). Bad requests get the protocol's error replies and the connection goes on; a stream
//! that can no longer be followed (bad magic, truncated frame, an oversized write) closes that
//! connection only.
//!
//! The export is a [`Backend`]: a file or block device ([`FileBackend`]), or the off-loading
//! volume (`volume_server`).

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use cordillera_wire::nbd::haggle::{BlockSizes, Found, Haggle, Refusal, Step, TlsPolicy};
use cordillera_wire::nbd::{self, Command, Limits, NbdError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_openssl::SslStream;

use crate::limits::{Admission, Charge, ConnectionBudget, Limits as ServerLimits};
use crate::tls::{TlsError, TlsServer};

/// One request to an export, checked against its limits.
#[derive(Debug)]
pub enum Op {
    Read {
        offset: u64,
        length: u32,
    },
    /// `fua`: durable before the reply.
    Write {
        offset: u64,
        data: Vec<u8>,
        fua: bool,
    },
    /// Every write completed before it is durable when it completes.
    Flush,
    /// The range reads as zeroes afterwards.
    WriteZeroes {
        offset: u64,
        length: u32,
        fua: bool,
    },
    /// A hint that the range is unused; doing nothing is allowed.
    Trim {
        offset: u64,
        length: u32,
        fua: bool,
    },
}

/// What an operation yields: the bytes of a read, nothing otherwise.
pub type Outcome = io::Result<Option<Vec<u8>>>;

/// What an export does. Operations may complete in any order.
pub trait Backend: Send + Sync + 'static {
    fn length_bytes(&self) -> u64;
    /// Starts `op`; its outcome goes to `done`, from any thread, when it completes.
    fn submit(&self, op: Op, done: Completion);
}

/// Where one request's outcome goes: straight to its connection's reply writer (no task
/// hand-off in between). Dropped without an outcome, it answers EIO, so a request is never
/// left unanswered.
pub struct Completion {
    handle: u64,
    replies: Option<mpsc::Sender<Reply>>,
    slot: Option<OwnedSemaphorePermit>,
    charge: Option<Charge>,
    /// Told whether the request succeeded as its outcome is sent (a trace recorder).
    observer: Option<Observer>,
}

type Observer = Box<dyn FnOnce(bool) + Send>;

impl Completion {
    pub fn complete(mut self, outcome: Outcome) {
        self.send(outcome);
    }

    /// Calls `observe` with whether the request succeeded when its outcome is sent (after the
    /// backend completes it, before the reply is written).
    pub fn observe(&mut self, observe: impl FnOnce(bool) + Send + 'static) {
        self.observer = Some(Box::new(observe));
    }

    fn send(&mut self, outcome: Outcome) {
        if let Some(observe) = self.observer.take() {
            observe(outcome.is_ok());
        }
        if let Some(replies) = self.replies.take() {
            let mut reply = Reply::new(self.handle, outcome, self.slot.take());
            reply._charge = self.charge.take();
            // Never full: every reply holds one of the connection's `in_flight_max` slots
            // until it is written, and the channel has room for that many.
            if let Err(mpsc::error::TrySendError::Full(_)) = replies.try_send(reply) {
                tracing::error!(
                    handle = self.handle,
                    "NBD reply channel full: the reply is lost"
                );
                debug_assert!(false, "NBD reply channel full");
            }
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.send(Err(io::Error::other("request dropped unanswered")));
    }
}

/// One encoded reply: the header, and a read's bytes (not copied behind the header). It holds
/// its request's in-flight slot until written, so a client that does not read its replies
/// stops being read from once `in_flight_max` replies wait: the server's memory stays bounded.
struct Reply {
    header: [u8; 16],
    data: Option<Vec<u8>>,
    _slot: Option<OwnedSemaphorePermit>,
    /// The request's memory charge ([`crate::limits`]), also released once written.
    _charge: Option<Charge>,
}

impl Reply {
    fn new(handle: u64, outcome: Outcome, slot: Option<OwnedSemaphorePermit>) -> Reply {
        let (error, data) = match outcome {
            Ok(data) => (0, data),
            Err(e) => match e.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => (nbd::ENOSPC, None),
                Some(libc::ENOMEM) => (nbd::ENOMEM, None),
                _ => (nbd::EIO, None),
            },
        };
        Reply::error(handle, error, data, slot)
    }

    fn error(
        handle: u64,
        error: u32,
        data: Option<Vec<u8>>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Reply {
        Reply {
            header: nbd::simple_reply(handle, error),
            data,
            _slot: slot,
            _charge: None,
        }
    }
}

/// A file or block device, with positional I/O on blocking worker threads; one file handle
/// shared by every connection, so a flush on one covers writes completed on all
/// (`NBD_FLAG_CAN_MULTI_CONN`).
pub struct FileBackend {
    file: Arc<std::fs::File>,
    length_bytes: u64,
}

impl FileBackend {
    pub fn open(path: &std::path::Path) -> io::Result<FileBackend> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        let length_bytes = file.metadata()?.len();
        Ok(FileBackend {
            file: Arc::new(file),
            length_bytes,
        })
    }
}

impl Backend for FileBackend {
    fn length_bytes(&self) -> u64 {
        self.length_bytes
    }

    fn submit(&self, op: Op, done: Completion) {
        let file = self.file.clone();
        tokio::task::spawn_blocking(move || done.complete(execute_on_file(&file, op)));
    }
}

/// Carries out `op` on a file (positional I/O, `fdatasync` for FLUSH and FUA).
pub fn execute_on_file(file: &std::fs::File, op: Op) -> Outcome {
    match op {
        Op::Read { offset, length } => {
            let mut buf = vec![0u8; length as usize];
            file.read_exact_at(&mut buf, offset)?;
            return Ok(Some(buf));
        }
        Op::Write { offset, data, fua } => {
            file.write_all_at(&data, offset)?;
            if fua {
                file.sync_data()?;
            }
        }
        Op::Flush => file.sync_data()?,
        Op::WriteZeroes {
            offset,
            length,
            fua,
        } => {
            let zeroes = vec![0u8; length.min(1 << 20) as usize];
            let mut at = 0u64;
            while at < length as u64 {
                let n = (length as u64 - at).min(zeroes.len() as u64) as usize;
                file.write_all_at(&zeroes[..n], offset + at)?;
                at += n as u64;
            }
            if fua {
                file.sync_data()?;
            }
        }
        Op::Trim { .. } => {}
    }
    Ok(None)
}

/// How the export is offered.
#[derive(Clone, Debug)]
pub struct ExportConfig {
    pub name: String,
    pub read_only: bool,
    /// Offsets and lengths are multiples of this (advertised as the minimum block size).
    pub minimum_block: u32,
    pub preferred_block: u32,
    pub maximum_payload: u32,
    /// Requests in flight per connection at most (more wait to be read).
    pub in_flight_max: usize,
    /// Connections, and memory (write payloads read, read replies not yet written) per
    /// connection and in total.
    pub limits: ServerLimits,
    /// A client that has not chosen an export this long after connecting is disconnected, so
    /// that connections which never finish the handshake cannot hold every connection slot.
    /// (Once in transmission, an idle client is not: a mounted, quiet filesystem is one.)
    pub handshake_timeout: std::time::Duration,
    /// Whether clients may or must start TLS before choosing an export (the TLS handshake
    /// counts in `handshake_timeout`).
    pub tls: NbdTls,
}

impl Default for ExportConfig {
    fn default() -> ExportConfig {
        ExportConfig {
            name: String::new(),
            read_only: false,
            minimum_block: 512,
            preferred_block: 4096,
            maximum_payload: 32 << 20,
            in_flight_max: 128,
            limits: ServerLimits::default(),
            handshake_timeout: std::time::Duration::from_secs(10),
            tls: NbdTls::default(),
        }
    }
}

/// The exports a server offers, by name: one backend ([`serve`]) or many that may come and
/// go while it runs (the storage pool's volumes).
pub trait Exports: Send + Sync + 'static {
    /// The export a client names; the empty name is the default export, if there is one.
    fn lookup(&self, name: &str) -> Option<Arc<dyn Backend>>;
    /// Names for `NBD_OPT_LIST`.
    fn names(&self) -> Vec<String>;
}

/// One backend under one name (and the empty, default name).
struct Single {
    name: String,
    backend: Arc<dyn Backend>,
}

impl Exports for Single {
    fn lookup(&self, name: &str) -> Option<Arc<dyn Backend>> {
        (name.is_empty() || name == self.name).then(|| self.backend.clone())
    }
    fn names(&self) -> Vec<String> {
        vec![self.name.clone()]
    }
}

/// Serves `backend` on a loopback port from a runtime of two worker threads on a thread of
/// its own, for tools and tests; returns the address once it listens. The server runs until
/// the process exits.
pub fn serve_in_background(
    backend: Arc<dyn Backend>,
    config: ExportConfig,
) -> io::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener).expect("a listening socket");
            if let Err(e) = serve(listener, backend, config).await {
                tracing::error!(error = %e, "nbd server stopped");
            }
        })
    });
    Ok(addr)
}

/// Accepts connections until the listener fails; each connection runs on its own task.
pub async fn serve(
    listener: TcpListener,
    backend: Arc<dyn Backend>,
    config: ExportConfig,
) -> io::Result<()> {
    let exports = Arc::new(Single {
        name: config.name.clone(),
        backend,
    });
    serve_exports(listener, exports, config).await
}

/// [`serve`] for several exports, looked up by name as clients connect; `config` applies to
/// each (its `name` is not used).
pub async fn serve_exports(
    listener: TcpListener,
    exports: Arc<dyn Exports>,
    config: ExportConfig,
) -> io::Result<()> {
    if let Some(server) = &config.tls.server {
        tracing::info!(tls = %config.tls.policy, credentials = ?server, "NBD port with TLS");
    }
    let config = Arc::new(config);
    let admission = Admission::new(config.limits.clone());
    let mut refused = 0u64;
    loop {
        let (stream, peer, budget) =
            crate::limits::accept_admitted(&listener, &admission, "nbd", &mut refused).await;
        let (exports, config) = (exports.clone(), config.clone());
        tracing::debug!(%peer, "nbd connection accepted");
        tokio::spawn(async move {
            if let Err(e) = connection(stream, exports, config, budget).await {
                tracing::info!(%peer, error = %e, "nbd connection closed");
            }
        });
    }
}

#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("protocol violation: {0}")]
    Protocol(#[from] NbdError),
    #[error("handshake ended: {0}")]
    Refused(Refusal),
    #[error("{0}")]
    Tls(#[from] TlsError),
    #[error("write of {0} bytes is over the {1}-byte limit")]
    OversizedWrite(u32, u32),
    #[error("no export chosen: {0}")]
    Handshake(#[from] crate::limits::HandshakeEnd),
}

fn transmission_flags(config: &ExportConfig) -> u16 {
    let mut flags = nbd::FLAG_HAS_FLAGS
        | nbd::FLAG_SEND_FLUSH
        | nbd::FLAG_SEND_FUA
        | nbd::FLAG_SEND_TRIM
        | nbd::FLAG_SEND_WRITE_ZEROES
        | nbd::FLAG_CAN_MULTI_CONN;
    if config.read_only {
        flags |= nbd::FLAG_READ_ONLY;
    }
    flags
}

/// How a port offers TLS: its policy and, unless it is off, the server side of the handshake.
#[derive(Clone, Debug, Default)]
pub struct NbdTls {
    policy: TlsPolicy,
    server: Option<TlsServer>,
}

impl NbdTls {
    /// `--tls allow|require` need credentials; `--tls off` takes none.
    pub fn new(policy: TlsPolicy, server: Option<TlsServer>) -> Result<NbdTls, String> {
        match (policy, &server) {
            (TlsPolicy::Off, Some(_)) => Err("--tls off with TLS credentials: say --tls allow or --tls require, or give no credentials".into()),
            (TlsPolicy::Allow | TlsPolicy::Require, None) => Err(format!(
                "--tls {policy} needs credentials (--tls-psk FILE or --tls-certs DIR)"
            )),
            _ => Ok(NbdTls { policy, server }),
        }
    }

    pub fn policy(&self) -> TlsPolicy {
        self.policy
    }
}

/// A connection's stream once the handshake is over: as accepted, or inside TLS.
enum Link {
    Plain(TcpStream),
    Tls(Box<SslStream<TcpStream>>),
}

async fn connection(
    stream: TcpStream,
    exports: Arc<dyn Exports>,
    config: Arc<ExportConfig>,
    mut budget: ConnectionBudget,
) -> Result<(), ConnectionError> {
    let limit = config.handshake_timeout;
    let chosen = budget
        .handshake(limit, handshake(stream, &exports, &config))
        .await??;
    match chosen {
        Some((Link::Plain(stream), backend)) => {
            let (reader, writer) = stream.into_split();
            transmission(reader, writer, backend, config, budget).await
        }
        Some((Link::Tls(stream), backend)) => {
            let (reader, writer) = tokio::io::split(*stream);
            transmission(reader, writer, backend, config, budget).await
        }
        None => Ok(()),
    }
}

/// How one round of option haggling ended.
enum Haggled {
    Chosen(Arc<dyn Backend>),
    Aborted,
    StartTls,
}

/// The newstyle handshake up to the export's choice (`None`: the client aborted), TLS
/// started on the way if the client asks and the port offers it.
async fn handshake(
    mut stream: TcpStream,
    exports: &Arc<dyn Exports>,
    config: &ExportConfig,
) -> Result<Option<(Link, Arc<dyn Backend>)>, ConnectionError> {
    stream.write_all(&nbd::greeting()).await?;
    let mut flags = [0u8; 4];
    stream.read_exact(&mut flags).await?;
    let client = nbd::parse_client_flags(flags)?;
    let block = BlockSizes {
        minimum: config.minimum_block,
        preferred: config.preferred_block,
        maximum: config.maximum_payload,
    };
    let mut haggle = Haggle::new(config.tls.policy, client, transmission_flags(config), block);
    match haggle_options(&mut stream, &mut haggle, exports).await? {
        Haggled::Chosen(backend) => return Ok(Some((Link::Plain(stream), backend))),
        Haggled::Aborted => return Ok(None),
        Haggled::StartTls => {}
    }
    let Some(server) = &config.tls.server else {
        unreachable!("STARTTLS is only acknowledged on a port with TLS credentials");
    };
    let (mut tls, peer) = server.accept(stream).await?;
    tracing::debug!(identity = ?peer.identity, "nbd connection inside TLS");
    haggle.tls_started();
    match haggle_options(&mut tls, &mut haggle, exports).await? {
        Haggled::Chosen(backend) => Ok(Some((Link::Tls(Box::new(tls)), backend))),
        Haggled::Aborted => {
            let _ = tls.shutdown().await;
            Ok(None)
        }
        Haggled::StartTls => unreachable!("STARTTLS inside TLS is refused by the haggle"),
    }
}

/// Reads options and answers them as [`Haggle`] decides, until an export is chosen, the
/// client aborts or TLS is to start.
async fn haggle_options<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    haggle: &mut Haggle,
    exports: &Arc<dyn Exports>,
) -> Result<Haggled, ConnectionError> {
    loop {
        let mut header = [0u8; nbd::OPTION_HEADER_BYTES];
        stream.read_exact(&mut header).await?;
        let h = nbd::parse_option_header(header)?;
        let mut payload = vec![0u8; h.length as usize];
        stream.read_exact(&mut payload).await?;
        let lookup = |name: &str| {
            exports.lookup(name).map(|backend| Found {
                length_bytes: backend.length_bytes(),
                export: backend,
            })
        };
        let (bytes, end) = match haggle.option(h, &payload, lookup, || exports.names()) {
            Step::Reply(bytes) => (bytes, None),
            Step::StartTls(bytes) => (bytes, Some(Haggled::StartTls)),
            Step::Chosen { reply, export } => (reply, Some(Haggled::Chosen(export))),
            Step::Abort(bytes) => (bytes, Some(Haggled::Aborted)),
            Step::Close(refusal) => return Err(ConnectionError::Refused(refusal)),
        };
        stream.write_all(&bytes).await?;
        if let Some(end) = end {
            stream.flush().await?;
            return Ok(end);
        }
    }
}

async fn transmission<R, W>(
    mut reader: R,
    writer: W,
    backend: Arc<dyn Backend>,
    config: Arc<ExportConfig>,
    budget: ConnectionBudget,
) -> Result<(), ConnectionError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let limits = Limits {
        length_bytes: backend.length_bytes(),
        minimum_block: config.minimum_block,
        maximum_payload: config.maximum_payload,
        read_only: config.read_only,
    };
    // Replies, in the order requests complete; every request, bad ones too, holds a slot until
    // its reply is written, so at most `in_flight_max` are in flight or waiting.
    let (tx, rx) = mpsc::channel::<Reply>(config.in_flight_max.max(1));
    let writer_task = tokio::spawn(write_replies(writer, rx));
    let slots = Arc::new(Semaphore::new(config.in_flight_max));
    let result = loop {
        let mut header = [0u8; nbd::REQUEST_HEADER_BYTES];
        if let Err(e) = reader.read_exact(&mut header).await {
            break Err(e.into());
        }
        let request = match nbd::parse_request(header) {
            Ok(r) => r,
            Err(e) => break Err(e.into()),
        };
        if nbd::must_disconnect(&request, &limits) {
            break Err(ConnectionError::OversizedWrite(
                request.length,
                limits.maximum_payload,
            ));
        }
        // Charged before a write's payload is read: what it brings, or what a read's reply
        // will hold; released once the reply is written.
        let bytes = match request.command {
            Command::Write | Command::Read => request.length as u64,
            _ => 0,
        };
        let charge = budget.charge(bytes).await;
        let mut data = Vec::new();
        if request.command == Command::Write {
            // Into the buffer's spare capacity: a large payload is neither zeroed first nor
            // copied again.
            let length = request.length as usize;
            data = Vec::with_capacity(length);
            let mut payload = (&mut reader).take(length as u64);
            let read: io::Result<()> = loop {
                if data.len() == length {
                    break Ok(());
                }
                match payload.read_buf(&mut data).await {
                    Ok(0) => break Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(_) => {}
                    Err(e) => break Err(e),
                }
            };
            if let Err(e) = read {
                break Err(e.into());
            }
        }
        if request.command == Command::Disc {
            break Ok(());
        }
        let permit = slots.clone().acquire_owned().await.expect("never closed");
        if let Err(error) = nbd::check_request(&request, &limits) {
            let mut reply = Reply::error(request.handle, error, None, Some(permit));
            reply._charge = Some(charge);
            if tx.send(reply).await.is_err() {
                break Ok(());
            }
            continue;
        }
        let fua = request.flags & nbd::CMD_FLAG_FUA != 0;
        let (offset, length) = (request.offset, request.length);
        let op = match request.command {
            Command::Read => Op::Read { offset, length },
            Command::Write => Op::Write { offset, data, fua },
            Command::Flush => Op::Flush,
            Command::Trim => Op::Trim {
                offset,
                length,
                fua,
            },
            Command::WriteZeroes => Op::WriteZeroes {
                offset,
                length,
                fua,
            },
            Command::Disc | Command::Other(_) => unreachable!("refused by check_request"),
        };
        let done = Completion {
            handle: request.handle,
            replies: Some(tx.clone()),
            slot: Some(permit),
            charge: Some(charge),
            observer: None,
        };
        backend.submit(op, done);
    };
    // Requests in flight are answered before the connection closes (NBD_CMD_DISC).
    let _ = slots.acquire_many(config.in_flight_max as u32).await;
    drop(tx);
    let _ = writer_task.await;
    result
}

/// Replies waiting together go out in one write: headers and small reads are gathered
/// (up to `GATHER_BYTES`); a large read's bytes are written from their own buffer.
async fn write_replies(
    mut writer: impl AsyncWrite + Unpin,
    mut replies: mpsc::Receiver<Reply>,
) -> io::Result<()> {
    const GATHER_BYTES: usize = 64 << 10;
    let mut out: Vec<u8> = Vec::with_capacity(GATHER_BYTES);
    // The gathered replies' slots, freed once their bytes are written.
    let mut written: Vec<Reply> = Vec::new();
    while let Some(first) = replies.recv().await {
        let mut next = Some(first);
        while let Some(mut reply) = next.take() {
            out.extend_from_slice(&reply.header);
            match reply.data.take() {
                Some(data) if data.len() > GATHER_BYTES / 4 => {
                    writer.write_all(&out).await?;
                    out.clear();
                    writer.write_all(&data).await?;
                    written.clear();
                }
                Some(data) => out.extend_from_slice(&data),
                None => {}
            }
            written.push(reply);
            if out.len() >= GATHER_BYTES {
                break;
            }
            next = replies.try_recv().ok();
        }
        if !out.is_empty() {
            writer.write_all(&out).await?;
            out.clear();
        }
        written.clear();
    }
    writer.shutdown().await
}
