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
use cordillera_wire::sierra::{encode, Frame, FRAME_BYTES_MAX};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;

use crate::limits::{Admission, Charge, Limits};

mod conn;

pub use conn::read_frame;
use conn::{accepted, connect, dial};

/// The links of a cluster whose daemons share a key (`--cluster-key`): every connection, in
/// either direction, runs inside TLS with pre-shared keys, and its hello (the cluster id) is
/// read only after the handshake.
#[derive(Clone, Debug)]
pub struct ClusterTls {
    pub server: crate::tls::TlsServer,
    pub client: crate::tls::TlsClient,
}

impl ClusterTls {
    /// Both sides from the keys file: every identity in it accepted, `identity` (by default
    /// the file's first) proved.
    pub fn from_keys(keys: &std::path::Path, identity: Option<&str>) -> Result<ClusterTls, String> {
        Ok(ClusterTls {
            server: crate::tls::cluster_server(keys)?,
            client: crate::tls::cluster_client(keys, identity)?,
        })
    }
}

/// Whether a Sierra daemon may listen on `listen` (and serve its read-only figures on `http`):
/// beyond loopback only with the cluster key (`tls`), its figures only on loopback, unless
/// `insecure` (logged as a WARN).
pub fn check_exposure(
    listen: Option<&str>,
    http: Option<&str>,
    tls: bool,
    insecure: bool,
) -> anyhow::Result<()> {
    let port = "the Sierra protocol";
    crate::tls::check_cluster_ports(port, listen, http, tls, insecure).map_err(anyhow::Error::msg)
}

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
    /// TLS on every connection (`--cluster-key`).
    tls: Option<ClusterTls>,
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
            tls: None,
            stats: NetStats::default(),
        }
    }

    /// Every connection from now on inside TLS with the cluster's key.
    pub fn set_tls(&mut self, tls: Option<ClusterTls>) {
        self.tls = tls;
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
        let tls = self.tls.clone();
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
                    stream,
                    conn,
                    cluster,
                    events,
                    standby,
                    budget,
                    answer,
                    tls.clone(),
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
        let task = tokio::spawn(dial(
            to,
            conn,
            address,
            hello,
            self.events.clone(),
            budget,
            self.tls.clone(),
        ));
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

/// One request to the MDS as a client that does not know the cluster's id yet (a hello naming
/// [`ANY_CLUSTER`]): its first answer. What `cluster gear` and a daemon fetching the spec use.
pub async fn ask_mds(
    mds: &str,
    tls: Option<&ClusterTls>,
    request: &Frame,
) -> anyhow::Result<Frame> {
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
        match connect(Endpoint::Mds, address, &hello, tls).await {
            Ok((reader, writer, _)) => {
                found = Some((address, reader, writer));
                break;
            }
            Err(e) => errors.push(format!("{address}: {e}")),
        }
    }
    let Some((address, mut reader, mut writer)) = found else {
        let hint = match tls {
            None => " (a cluster whose daemons run with --cluster-key hears no one without it)",
            Some(_) => " (or its daemons do not hold this --cluster-key)",
        };
        bail!(
            "the MDS at {mds} is unreachable: {}{hint}",
            errors.join("; ")
        );
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

/// `cluster gear`: asks the MDS for gear `gear` (1 … replicas) or to follow its plan
/// (`plan`); what it answers, in words.
pub async fn shift_gear(mds: &str, tls: Option<&ClusterTls>, gear: &str) -> anyhow::Result<String> {
    let g: u8 =
        match gear {
            "plan" => 0,
            n => n.parse().ok().filter(|&g| g >= 1).ok_or_else(|| {
                anyhow::anyhow!("the gear is 1 … replicas, or `plan` (not {n:?})")
            })?,
        };
    match ask_mds(mds, tls, &Frame::Gear(g)).await? {
        Frame::Gear(now) if g == 0 => Ok(format!("following the plan: gear {now}")),
        Frame::Gear(now) => Ok(format!("gear {now}")),
        Frame::Refused(why) => anyhow::bail!("the MDS refused: {why}"),
        other => anyhow::bail!("unexpected answer from the MDS: {other:?}"),
    }
}

#[cfg(test)]
mod tests;
