//! Connections between Sierra's daemons: every connection starts with a hello naming the
//! cluster and the endpoint that opened it; frames to an endpoint go on its newest connection,
//! dialled on demand when its address is known (the MDS and chunk servers), and answers to a
//! client go back on the connection it opened. Sierra's messages tolerate loss (the cores
//! retry), so a frame to an endpoint that is unreachable, or whose connection has this many
//! frames unsent, is dropped; nothing here blocks the daemon's event loop.
//!
//! What a peer can take: a connection slot (`runtime::limits`, 512 at once), a hello of at most
//! [`HELLO_BYTES_MAX`] before anything else, and then each frame is charged to its connection's
//! and the daemon's memory budgets before its body is read (frames of 64 KiB or less, the
//! control messages, to the connection's only, so that they never queue behind large ones),
//! the charge travelling with the frame until the daemon has handled it; a body must follow
//! its length within 10 s. A peer that announces long frames, or sends faster than the daemon
//! handles them, waits for its own budget instead of growing the daemon.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cordillera_gears::protocol::Endpoint;
use cordillera_wire::sierra::{decode, encode, frame_length, Frame, FRAME_BYTES_MAX};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;

use crate::limits::{Admission, Charge, ConnectionBudget, Limits};

/// The cluster a client names before it knows the cluster's id (it asks the MDS for the
/// spec): accepted from clients only.
pub const ANY_CLUSTER: u64 = 0;

/// Frames waiting for a connection's writer at most.
const LINK_FRAMES: usize = 8192;
/// Frames held while a connection is being dialled.
const PENDING_FRAMES: usize = 1024;
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Frames up to this long (control messages) are charged to their connection's budget only,
/// so they never wait behind large frames for the daemon's.
const SMALL_FRAME: usize = 64 << 10;
/// A frame's body must follow its length within this (a peer cannot hold a charge forever).
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest frame, its 4-byte length included.
const FRAME_MAX: usize = FRAME_BYTES_MAX as usize + 4;
/// The longest first frame (a hello) or standby frame (a wake) taken from a peer, its length
/// included.
pub const HELLO_BYTES_MAX: usize = 256;
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// What the connections report to the daemon's event loop.
#[derive(Debug)]
pub enum NetEvent {
    Connected {
        endpoint: Endpoint,
        conn: u64,
        incarnation: u64,
        sender: mpsc::Sender<Vec<u8>>,
        /// Notified to close the connection.
        closer: Arc<Notify>,
    },
    Frame {
        endpoint: Endpoint,
        conn: u64,
        frame: Frame,
        /// The frame's share of the memory budgets, released when the event is dropped.
        charge: Option<Charge>,
    },
    Closed {
        endpoint: Endpoint,
        conn: u64,
    },
    /// A dial failed (refused, unreachable, no hello answer).
    Unreachable {
        endpoint: Endpoint,
        conn: u64,
        error: String,
    },
    /// In standby, a wake request arrived.
    Wake,
}

struct Link {
    conn: u64,
    /// `None` while dialling.
    sender: Option<mpsc::Sender<Vec<u8>>>,
    pending: Vec<Vec<u8>>,
    /// The dialling task, until it connects.
    dial: Option<AbortHandle>,
    closer: Option<Arc<Notify>>,
}

impl Link {
    fn close(&self) {
        if let Some(d) = &self.dial {
            d.abort();
        }
        if let Some(c) = &self.closer {
            c.notify_one();
        }
    }
}

/// Counts of what the connections did.
#[derive(Clone, Copy, Debug, Default)]
pub struct NetStats {
    pub frames_sent: u64,
    pub frames_dropped: u64,
    pub dials: u64,
    pub dials_failed: u64,
    /// Connections of an MDS of an older term closed unheard.
    pub mds_fenced: u64,
}

pub struct Net {
    cluster: u64,
    me: Endpoint,
    incarnation: u64,
    addresses: HashMap<Endpoint, String>,
    links: HashMap<Endpoint, Link>,
    events: mpsc::Sender<NetEvent>,
    next_conn: u64,
    /// While set, incoming connections may only wake this daemon.
    standby: Arc<AtomicBool>,
    /// Connection slots and memory budgets, for accepted and dialled connections alike.
    admission: Admission,
    /// The task accepting connections, if listening.
    listener: Option<AbortHandle>,
    /// The highest MDS term (its incarnation) seen: an MDS of a lower one is a deposed one,
    /// and its connections are closed unheard.
    mds_term: u64,
    /// Connections closed for that; their frames still in flight are dropped.
    fenced: std::collections::HashSet<u64>,
    pub stats: NetStats,
}

impl Drop for Net {
    /// Stops listening and closes every connection (an MDS stepping down, a daemon stopping).
    fn drop(&mut self) {
        if let Some(l) = self.listener.take() {
            l.abort();
        }
        self.close_all();
    }
}

impl Net {
    pub fn new(
        cluster: u64,
        me: Endpoint,
        incarnation: u64,
        addresses: HashMap<Endpoint, String>,
        events: mpsc::Sender<NetEvent>,
    ) -> Net {
        Net {
            cluster,
            me,
            incarnation,
            addresses,
            links: HashMap::new(),
            events,
            next_conn: 1,
            standby: Arc::new(AtomicBool::new(false)),
            admission: Admission::new(Limits::default()),
            listener: None,
            mds_term: 0,
            fenced: std::collections::HashSet::new(),
            stats: NetStats::default(),
        }
    }

    /// Replaces the default limits (512 connections, 64 MiB per connection, 1 GiB in all).
    pub fn set_limits(&mut self, limits: Limits) {
        self.admission = Admission::new(limits);
    }

    /// Bytes of frames read and not yet handled, over every connection.
    pub fn charged_bytes(&self) -> u64 {
        self.admission.total_charged_bytes()
    }

    pub fn set_address(&mut self, endpoint: Endpoint, address: String) {
        self.addresses.insert(endpoint, address);
    }

    /// Accepts connections on `listener` for as long as the daemon runs.
    pub fn listen(&mut self, listener: TcpListener) {
        let (cluster, events, standby) = (self.cluster, self.events.clone(), self.standby.clone());
        // The MDS answers every hello with its own (dialers find the active MDS by it).
        let answer = (self.me == Endpoint::Mds).then(|| {
            let mut bytes = Vec::new();
            let hello = Frame::Hello {
                cluster,
                from: Endpoint::Mds,
                incarnation: self.incarnation,
            };
            encode(&hello, &mut bytes);
            Arc::new(bytes)
        });
        let admission = self.admission.clone();
        // Connection numbers of accepted connections count down from the top, so they never
        // meet dialled ones.
        let task = tokio::spawn(async move {
            let mut conn = u64::MAX;
            let mut refused = 0;
            loop {
                let (stream, _, budget) =
                    crate::limits::accept_admitted(&listener, &admission, "sierra", &mut refused)
                        .await;
                conn -= 1;
                let (events, standby, answer) = (events.clone(), standby.clone(), answer.clone());
                tokio::spawn(accepted(
                    stream, conn, cluster, events, standby, budget, answer,
                ));
            }
        });
        if let Some(old) = self.listener.replace(task.abort_handle()) {
            old.abort();
        }
    }

    /// Sends `frame` to `to`: on its newest connection, or on one dialled now. Dropped (and
    /// counted) if `to` cannot be reached or its connection is backed up.
    pub fn send(&mut self, to: Endpoint, frame: &Frame) {
        let mut bytes = Vec::new();
        encode(frame, &mut bytes);
        if let Some(link) = self.links.get_mut(&to) {
            match &link.sender {
                Some(sender) => match sender.try_send(bytes) {
                    Ok(()) => self.stats.frames_sent += 1,
                    Err(_) => self.stats.frames_dropped += 1,
                },
                None if link.pending.len() < PENDING_FRAMES => link.pending.push(bytes),
                None => self.stats.frames_dropped += 1,
            }
            return;
        }
        let Some(address) = self.addresses.get(&to).cloned() else {
            self.stats.frames_dropped += 1;
            return;
        };
        let conn = self.next_conn;
        self.next_conn += 1;
        self.stats.dials += 1;
        let hello = Frame::Hello {
            cluster: self.cluster,
            from: self.me,
            incarnation: self.incarnation,
        };
        let budget = self.admission.connection();
        // Dialled: past any handshake of ours from the start.
        if let Some(b) = &budget {
            b.established();
        }
        let task = tokio::spawn(dial(to, conn, address, hello, self.events.clone(), budget));
        self.links.insert(
            to,
            Link {
                conn,
                sender: None,
                pending: vec![bytes],
                dial: Some(task.abort_handle()),
                closer: None,
            },
        );
    }

    /// Takes a connection event; returns what the daemon should act on (`None` for the
    /// bookkeeping this module does itself). A closed or unreachable endpoint is returned as
    /// `Closed` only when it was the endpoint's current connection.
    pub fn handle(&mut self, event: NetEvent) -> Option<NetEvent> {
        match event {
            NetEvent::Connected {
                endpoint: Endpoint::Mds,
                conn,
                incarnation,
                ref closer,
                ..
            } if self.me != Endpoint::Mds && incarnation < self.mds_term => {
                tracing::warn!(
                    term = incarnation,
                    newest = self.mds_term,
                    "refusing an MDS of an older term (deposed)"
                );
                closer.notify_one();
                self.fenced.insert(conn);
                self.stats.mds_fenced += 1;
                if let Some(link) = self.links.get(&Endpoint::Mds).filter(|l| l.conn == conn) {
                    link.close();
                    self.links.remove(&Endpoint::Mds);
                }
                None
            }
            NetEvent::Frame { conn, .. } | NetEvent::Closed { conn, .. }
                if !self.fenced.is_empty() && self.fenced.contains(&conn) =>
            {
                if matches!(event, NetEvent::Closed { .. }) {
                    self.fenced.remove(&conn);
                }
                None
            }
            NetEvent::Connected {
                endpoint,
                conn,
                incarnation,
                sender,
                closer,
            } => {
                if endpoint == Endpoint::Mds && self.me != Endpoint::Mds {
                    self.mds_term = self.mds_term.max(incarnation);
                }
                let mut pending = Vec::new();
                match self.links.get_mut(&endpoint) {
                    // Our own dial completed.
                    Some(link) if link.conn == conn => {
                        pending = std::mem::take(&mut link.pending);
                        link.sender = Some(sender.clone());
                        link.closer = Some(closer.clone());
                    }
                    _ => {
                        // A connection the peer opened: it becomes the one we answer on. The
                        // older one stays open for what is still in flight on it.
                        let old = self.links.insert(
                            endpoint,
                            Link {
                                conn,
                                sender: Some(sender.clone()),
                                pending: Vec::new(),
                                dial: None,
                                closer: Some(closer.clone()),
                            },
                        );
                        if let Some(old) = old {
                            pending = old.pending;
                        }
                    }
                }
                for bytes in pending {
                    match sender.try_send(bytes) {
                        Ok(()) => self.stats.frames_sent += 1,
                        Err(_) => self.stats.frames_dropped += 1,
                    }
                }
                Some(NetEvent::Connected {
                    endpoint,
                    conn,
                    incarnation,
                    sender,
                    closer,
                })
            }
            NetEvent::Closed { endpoint, conn } | NetEvent::Unreachable { endpoint, conn, .. }
                if self.links.get(&endpoint).is_some_and(|l| l.conn == conn) =>
            {
                if let Some(link) = self.links.remove(&endpoint) {
                    self.stats.frames_dropped += link.pending.len() as u64;
                    link.close();
                }
                if matches!(event, NetEvent::Unreachable { .. }) {
                    self.stats.dials_failed += 1;
                }
                Some(NetEvent::Closed { endpoint, conn })
            }
            NetEvent::Closed { .. } | NetEvent::Unreachable { .. } => None,
            other => Some(other),
        }
    }

    /// Closes every connection (a chunk server entering standby, or stopping).
    pub fn close_all(&mut self) {
        for (_, link) in self.links.drain() {
            link.close();
        }
    }

    /// In standby, incoming connections may only wake the daemon; others are refused.
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::SeqCst);
    }

    pub fn connected(&self, endpoint: Endpoint) -> bool {
        self.links
            .get(&endpoint)
            .is_some_and(|l| l.sender.is_some())
    }
}

async fn dial(
    endpoint: Endpoint,
    conn: u64,
    address: String,
    hello: Frame,
    events: mpsc::Sender<NetEvent>,
    budget: Option<ConnectionBudget>,
) {
    let unreachable = |error: String| NetEvent::Unreachable {
        endpoint,
        conn,
        error,
    };
    let Some(budget) = budget else {
        let error = format!("{address}: this daemon has too many connections open");
        let _ = events.send(unreachable(error)).await;
        return;
    };
    // The MDS may be several processes, one active: its address is a list, and only the
    // active one answers a hello with its own (a standby does not listen; a paused one does
    // not answer).
    let mut errors = Vec::new();
    for address in address.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        match connect(endpoint, address, &hello).await {
            Ok((reader, writer, incarnation)) => {
                run_connection(endpoint, conn, incarnation, reader, writer, events, budget).await;
                return;
            }
            Err(e) => errors.push(format!("{address}: {e}")),
        }
    }
    let _ = events.send(unreachable(errors.join("; "))).await;
}

/// Connects to `address` and says `hello`; from the MDS, waits for its answering hello (its
/// incarnation; 0 from others).
async fn connect(
    endpoint: Endpoint,
    address: &str,
    hello: &Frame,
) -> Result<(OwnedReadHalf, OwnedWriteHalf, u64), String> {
    let stream = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer in {DIAL_TIMEOUT:?}")),
    };
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let mut bytes = Vec::new();
    encode(hello, &mut bytes);
    if writer.write_all(&bytes).await.is_err() {
        return Err("the connection closed at once".into());
    }
    if endpoint != Endpoint::Mds {
        return Ok((reader, writer, 0));
    }
    match tokio::time::timeout(DIAL_TIMEOUT, read_small(&mut reader)).await {
        Ok(Ok(Some(Frame::Hello {
            from: Endpoint::Mds,
            incarnation,
            ..
        }))) => Ok((reader, writer, incarnation)),
        Ok(Ok(Some(Frame::Refused(why)))) => Err(format!("refused: {why}")),
        Ok(Ok(Some(other))) => Err(format!("answered {other:?} instead of a hello")),
        Ok(Ok(None)) => Err("closed without a hello".into()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!(
            "no hello in {DIAL_TIMEOUT:?} (a paused or stale MDS?)"
        )),
    }
}

/// An accepted connection: its hello first (from our cluster), then frames both ways.
async fn accepted(
    stream: TcpStream,
    conn: u64,
    cluster: u64,
    events: mpsc::Sender<NetEvent>,
    standby: Arc<AtomicBool>,
    mut budget: ConnectionBudget,
    answer: Option<Arc<Vec<u8>>>,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let hello = budget
        .handshake(HELLO_TIMEOUT, read_small(&mut reader))
        .await;
    let (from, incarnation) = match hello {
        Ok(Ok(Some(Frame::Hello {
            cluster: c,
            from,
            incarnation,
        }))) if c == cluster || c == ANY_CLUSTER && matches!(from, Endpoint::Client(_)) => {
            (from, incarnation)
        }
        Ok(Ok(Some(Frame::Hello { cluster: c, .. }))) => {
            let why = format!("this daemon is in cluster {cluster:#x}, not {c:#x}");
            return refuse(writer, why).await;
        }
        Ok(Ok(Some(_))) => return refuse(writer, "the first frame must be a hello".into()).await,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => return refuse(writer, format!("bad frame: {e}")).await,
        Err(e) => return refuse(writer, e.to_string()).await,
    };
    if standby.load(Ordering::SeqCst) {
        // Only a wake is taken in standby.
        match tokio::time::timeout(HELLO_TIMEOUT, read_small(&mut reader)).await {
            Ok(Ok(Some(Frame::Wake))) => {
                let _ = events.send(NetEvent::Wake).await;
            }
            _ => refuse(writer, "in standby".into()).await,
        }
        return;
    }
    if let Some(hello) = answer {
        if writer.write_all(&hello).await.is_err() {
            return;
        }
    }
    run_connection(from, conn, incarnation, reader, writer, events, budget).await;
}

/// Tells the peer why, then closes.
async fn refuse(mut writer: OwnedWriteHalf, why: String) {
    let mut bytes = Vec::new();
    encode(&Frame::Refused(why), &mut bytes);
    let _ = writer.write_all(&bytes).await;
    let _ = writer.shutdown().await;
}

/// Reports the connection, then forwards its frames until it closes.
async fn run_connection(
    endpoint: Endpoint,
    conn: u64,
    incarnation: u64,
    mut reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    events: mpsc::Sender<NetEvent>,
    budget: ConnectionBudget,
) {
    let (sender, outbox) = mpsc::channel::<Vec<u8>>(LINK_FRAMES);
    let writing = tokio::spawn(write_frames(writer, outbox));
    let closer = Arc::new(Notify::new());
    let connected = NetEvent::Connected {
        endpoint,
        conn,
        incarnation,
        sender,
        closer: closer.clone(),
    };
    if events.send(connected).await.is_err() {
        writing.abort();
        return;
    }
    loop {
        let read = tokio::select! {
            read = read_charged(&mut reader, FRAME_MAX, Some(&budget)) => read,
            _ = closer.notified() => {
                // Closed by this side (a server entering standby): what was queued before is
                // written first (its last messages say it is going), then the socket closes.
                let _ = tokio::time::timeout(Duration::from_secs(2), writing).await;
                let _ = events.send(NetEvent::Closed { endpoint, conn }).await;
                return;
            }
        };
        match read {
            Ok(Some((frame, charge))) => {
                let event = NetEvent::Frame {
                    endpoint,
                    conn,
                    frame,
                    charge,
                };
                if events.send(event).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(?endpoint, error = %e, "closing a connection: bad frame");
                break;
            }
        }
    }
    writing.abort();
    let _ = events.send(NetEvent::Closed { endpoint, conn }).await;
}

async fn write_frames(mut writer: OwnedWriteHalf, mut outbox: mpsc::Receiver<Vec<u8>>) {
    let mut buffer = Vec::new();
    while let Some(first) = outbox.recv().await {
        buffer.clear();
        buffer.extend_from_slice(&first);
        // Whatever else is queued goes in the same write.
        while buffer.len() < 1 << 20 {
            match outbox.try_recv() {
                Ok(more) => buffer.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if writer.write_all(&buffer).await.is_err() {
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// One frame: `Ok(None)` at a clean end of the stream between frames.
pub async fn read_frame(reader: &mut OwnedReadHalf) -> Result<Option<Frame>, String> {
    Ok(read_charged(reader, FRAME_MAX, None)
        .await?
        .map(|(frame, _)| frame))
}

/// A hello or a wake: at most [`HELLO_BYTES_MAX`] bytes.
async fn read_small(reader: &mut OwnedReadHalf) -> Result<Option<Frame>, String> {
    Ok(read_charged(reader, HELLO_BYTES_MAX, None)
        .await?
        .map(|(frame, _)| frame))
}

/// One frame of at most `max` bytes (its length included), charged to `budget` (if any)
/// before its body is read.
async fn read_charged(
    reader: &mut OwnedReadHalf,
    max: usize,
    budget: Option<&ConnectionBudget>,
) -> Result<Option<(Frame, Option<Charge>)>, String> {
    let mut head = [0u8; 4];
    match reader.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let total = frame_length(&head)
        .map_err(|e| e.to_string())?
        .expect("four bytes");
    if total > max {
        return Err(format!(
            "a frame of {total} bytes where at most {max} are taken"
        ));
    }
    let charge = match budget {
        Some(b) if total <= SMALL_FRAME => Some(b.charge_connection_only(total as u64).await),
        Some(b) => Some(b.charge(total as u64).await),
        None => None,
    };
    let mut buf = vec![0u8; total];
    buf[..4].copy_from_slice(&head);
    match tokio::time::timeout(BODY_TIMEOUT, reader.read_exact(&mut buf[4..])).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(format!("truncated frame: {e}")),
        Err(_) => {
            return Err(format!(
                "a frame of {total} bytes not sent within {BODY_TIMEOUT:?} of its length"
            ))
        }
    }
    match decode(&buf) {
        Ok(Some((frame, _))) => Ok(Some((frame, charge))),
        Ok(None) => Err("incomplete frame".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// One request to the MDS as a client that does not know the cluster's id yet (a hello naming
/// [`ANY_CLUSTER`]): its first answer. What `cluster gear` and a daemon fetching the spec use.
pub async fn ask_mds(mds: &str, request: &Frame) -> anyhow::Result<Frame> {
    use anyhow::bail;
    let hello = Frame::Hello {
        cluster: ANY_CLUSTER,
        from: Endpoint::Client(u32::MAX - std::process::id()),
        incarnation: 1,
    };
    // The active MDS among the addresses given (the others do not answer a hello).
    let mut errors = Vec::new();
    let mut found = None;
    for address in mds.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        match connect(Endpoint::Mds, address, &hello).await {
            Ok((reader, writer, _)) => {
                found = Some((address, reader, writer));
                break;
            }
            Err(e) => errors.push(format!("{address}: {e}")),
        }
    }
    let Some((address, mut reader, mut writer)) = found else {
        bail!("no MDS answers at {mds} ({})", errors.join("; "));
    };
    let mut bytes = Vec::new();
    encode(request, &mut bytes);
    writer.write_all(&bytes).await?;
    match tokio::time::timeout(Duration::from_secs(10), read_frame(&mut reader)).await {
        Err(_) => bail!("no answer from the MDS at {address} in 10 s"),
        Ok(Err(e)) => bail!("the MDS's answer: {e}"),
        Ok(Ok(None)) => bail!("the MDS at {address} closed the connection without answering"),
        Ok(Ok(Some(frame))) => Ok(frame),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Silent connections holding every slot (a flood, or sockets left half-open) do not keep
    /// a peer out: its hello takes the slot of the oldest one at once.
    #[tokio::test]
    async fn a_peer_gets_in_past_silent_connections_holding_every_slot() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mds_events, mut inbox) = mpsc::channel(64);
        let mut mds = Net::new(7, Endpoint::Mds, 1, HashMap::new(), mds_events);
        mds.set_limits(Limits {
            connections: 3,
            ..Limits::default()
        });
        mds.listen(listener);
        let mut silent = Vec::new();
        for _ in 0..3 {
            silent.push(TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (events, mut server_inbox) = mpsc::channel(64);
        let addresses = HashMap::from([(Endpoint::Mds, addr.to_string())]);
        let mut server = Net::new(7, Endpoint::Server(1), 1, addresses, events);
        let started = std::time::Instant::now();
        server.send(Endpoint::Mds, &Frame::SpecRequest);
        // The dialled connection comes up on the server's side (its queued frame goes then).
        let up = tokio::time::timeout(Duration::from_secs(3), server_inbox.recv())
            .await
            .expect("the dial ended")
            .expect("open");
        assert!(matches!(up, NetEvent::Connected { .. }), "{up:?}");
        assert!(server.handle(up).is_some());
        loop {
            let event = tokio::time::timeout(Duration::from_secs(3), inbox.recv())
                .await
                .expect("the peer got in before any hello timeout")
                .expect("open");
            if let NetEvent::Frame { frame, .. } = event {
                assert_eq!(frame, Frame::SpecRequest);
                break;
            }
        }
        assert!(started.elapsed() < HELLO_TIMEOUT, "{:?}", started.elapsed());
        let mut byte = [0u8; 1];
        let first = tokio::time::timeout(Duration::from_secs(2), silent[0].read(&mut byte))
            .await
            .expect("the oldest silent connection is closed, not left open");
        assert!(
            matches!(first, Ok(0) | Err(_)) || byte[0] != 0,
            "closed (after a refusal frame, if any): {first:?}"
        );
    }

    /// The next event of `inbox` that `net` passes on (its own bookkeeping handled).
    async fn next_event(net: &mut Net, inbox: &mut mpsc::Receiver<NetEvent>) -> Option<NetEvent> {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(3), inbox.recv())
                .await
                .ok()??;
            if let Some(e) = net.handle(event) {
                return Some(e);
            }
        }
    }

    /// A chunk server that has heard from the MDS of term 5 refuses one of term 3 (a deposed
    /// MDS still running): its connection is closed and nothing it sends is taken; a dialler
    /// given both addresses skips an address that does not answer a hello (a standby does not
    /// listen) and learns the active MDS's term from its hello.
    #[tokio::test]
    async fn an_mds_of_an_older_term_is_refused_and_the_active_one_found_in_a_list() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server_addr = listener.local_addr().unwrap();
        let (events, mut inbox) = mpsc::channel(64);
        let mut server = Net::new(7, Endpoint::Server(0), 1, HashMap::new(), events);
        server.listen(listener);
        let to_server = HashMap::from([(Endpoint::Server(0), server_addr.to_string())]);
        let mds_net = |term: u64| {
            let (tx, rx) = mpsc::channel(64);
            (Net::new(7, Endpoint::Mds, term, to_server.clone(), tx), rx)
        };
        let (mut newer, mut newer_inbox) = mds_net(5);
        newer.send(Endpoint::Server(0), &Frame::SpecRequest);
        // Its dial completes on its side (the frame waiting for it goes then).
        next_event(&mut newer, &mut newer_inbox)
            .await
            .expect("dialled");
        let up = next_event(&mut server, &mut inbox)
            .await
            .expect("connected");
        assert!(
            matches!(
                up,
                NetEvent::Connected {
                    endpoint: Endpoint::Mds,
                    incarnation: 5,
                    ..
                }
            ),
            "{up:?}"
        );
        let first = next_event(&mut server, &mut inbox).await.expect("a frame");
        assert!(matches!(first, NetEvent::Frame { .. }), "{first:?}");
        let (mut older, mut older_inbox) = mds_net(3);
        older.send(Endpoint::Server(0), &Frame::SpecRequest);
        next_event(&mut older, &mut older_inbox)
            .await
            .expect("dialled");
        older.send(Endpoint::Server(0), &Frame::SpecRequest);
        // Nothing of the older MDS reaches the server.
        assert!(next_event(&mut server, &mut inbox).await.is_none());
        assert_eq!(server.stats.mds_fenced, 1);

        // The active MDS (term 9) listens after an address where nothing does.
        let nothing = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = nothing.local_addr().unwrap();
        drop(nothing);
        let active_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let active_addr = active_listener.local_addr().unwrap();
        let (tx, mut active_inbox) = mpsc::channel(64);
        let mut active = Net::new(7, Endpoint::Mds, 9, HashMap::new(), tx);
        active.listen(active_listener);
        let (tx, mut client_inbox) = mpsc::channel(64);
        let list = format!("{dead},{active_addr}");
        let mut client = Net::new(
            7,
            Endpoint::Server(2),
            1,
            HashMap::from([(Endpoint::Mds, list)]),
            tx,
        );
        client.send(Endpoint::Mds, &Frame::SpecRequest);
        let up = next_event(&mut client, &mut client_inbox)
            .await
            .expect("connected");
        assert!(
            matches!(
                up,
                NetEvent::Connected {
                    endpoint: Endpoint::Mds,
                    incarnation: 9,
                    ..
                }
            ),
            "{up:?}"
        );
        loop {
            match next_event(&mut active, &mut active_inbox)
                .await
                .expect("the request")
            {
                NetEvent::Frame { frame, .. } => {
                    assert_eq!(frame, Frame::SpecRequest);
                    break;
                }
                _ => continue,
            }
        }
    }
}
