//! The client library (§3.8: create, read, write, delete) as a sans-I/O state machine: object
//! layouts and group primaries cached from the MDS; requests cut at chunk boundaries and sent to
//! each group's primary; a refusal (not primary, lease lapsed, migrating, busy) or silence makes
//! it ask the MDS for the group again and retry after a growing delay, a bounded number of
//! times, then answer a typed error (§3.5: "it will retry the operation, converting this
//! temporary unavailability into a higher latency").
//!
//! # Driver contract
//!
//! ```text
//! let mut c = ObjectClient::new(config);
//! loop {
//!     while let Some((to, m)) = c.poll_message() { send }
//!     while let Some((id, result)) = c.poll_done() { answer the application }
//!     wait for: an application request → c.create / c.read / c.write / c.delete (now, id, …)
//!               a message              → c.handle_message(now, from, m)
//!               c.poll_timeout()       → c.handle_timeout(now)
//! }
//! ```
//!
//! A write answered with an error may or may not have taken effect (its pieces may have reached
//! some replicas or loggers); so may a write whose client stopped before the answer. Either
//! way it is settled when answered: a piece once sent may have reached some of the group's
//! replicas and not others (a primary whose lease lapsed mid-write), so it is retried until an
//! attempt succeeds — never given up after `retries_max` — and the new primary's success
//! brings every replica to it (§3.7, "Replica divergence": "the client will retry the request,
//! and the new primary will send the update to the versioned store"). A write one of whose
//! pieces fails for good (the loggers full, a malformed request) is answered with the error
//! once its other pieces sent have settled. Only a client that stops with a write in flight,
//! while that write's primary also fails, leaves replicas that may differ (the paper's stated
//! limit).
//!
//! A write is acknowledged only once no attempt of it may still land: every attempt has its
//! own id and names the epoch of the view it went under, and a primary refuses an attempt of
//! another epoch, or older than a write of the same client it already took; so a piece is done
//! when an attempt succeeded and every attempt still unanswered went under an older epoch, or
//! earlier under the same one. Attempts of reads and writes also name the piece's first: one
//! reaching a primary that still works on an earlier attempt joins it (served once, both
//! answered). A write over bytes an unfinished earlier write of the client
//! covers waits for that one: two writes of the same block land in the order they were issued
//! (a retried write and a newer one could otherwise land in either order, after both answers).

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::model::{GroupId, ObjectId, ServerId};
use crate::protocol::{
    Endpoint, Epoch, GroupView, MdsError, Message, Nanos, ObjectLayout, ServeError,
};

#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub client: u32,
    /// Differs at every start of the client: message ids start from it, so that answers to an
    /// earlier life's requests are never taken for this one's.
    pub incarnation: u32,
    /// Attempts of a piece after the first, before the request fails (a read, or a write's
    /// piece never sent; a write's piece once sent is retried until it succeeds).
    pub retries_max: u32,
    /// A request unanswered this long is retried.
    pub request_timeout_ns: Nanos,
    /// The first retry waits this long; each next one twice as long, up to
    /// [`RETRY_DELAY_MAX_NS`].
    pub retry_delay_ns: Nanos,
}

/// The longest wait between two attempts of a piece (1 s).
pub const RETRY_DELAY_MAX_NS: Nanos = 1_000_000_000;

impl ClientConfig {
    pub fn new(client: u32) -> ClientConfig {
        ClientConfig {
            client,
            incarnation: 0,
            retries_max: 12,
            request_timeout_ns: 2_000_000_000,
            retry_delay_ns: 20_000_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    Created,
    Read(Vec<u8>),
    Written,
    Deleted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("no such object")]
    NoSuchObject,
    #[error("the object exists")]
    Exists,
    #[error("the object is too large")]
    TooLarge,
    #[error("the range is outside the object, or empty")]
    OutOfRange,
    #[error("chunk group {group} did not serve the request after {attempts} attempts")]
    Unavailable { group: u32, attempts: u32 },
    #[error("the loggers are full")]
    NoSpace,
    #[error("refused as malformed")]
    BadRequest,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClientStats {
    pub requests: u64,
    pub pieces: u64,
    /// Pieces sent again after a refusal or a timeout.
    pub retries: u64,
    pub timeouts: u64,
    pub failures: u64,
    pub lookups: u64,
}

enum Kind {
    Create {
        size_bytes: u64,
    },
    Read {
        offset_bytes: u64,
        length_bytes: u64,
    },
    Write {
        offset_bytes: u64,
        data: Vec<u8>,
    },
    Delete,
}

struct Op {
    object: ObjectId,
    kind: Kind,
    /// Arrival order: a write waits for the unfinished earlier writes over its bytes.
    seq: u64,
    pieces: Vec<Piece>,
    remaining: usize,
    buf: Vec<u8>,
    started: bool,
    /// A write's error, answered once its pieces that may have landed have settled.
    error: Option<ClientError>,
}

impl Op {
    /// The bytes a write covers.
    fn write_range(&self) -> Option<(u64, u64)> {
        match &self.kind {
            Kind::Write { offset_bytes, data } => Some((
                *offset_bytes,
                offset_bytes.saturating_add(data.len() as u64),
            )),
            _ => None,
        }
    }
}

struct Piece {
    group: GroupId,
    offset_bytes: u64,
    length_bytes: u64,
    /// Where the piece sits in the request's bytes.
    at: usize,
    attempts: u32,
    state: PieceState,
    /// The first attempt's id, which every attempt names: one arriving while an earlier one
    /// is in flight at the primary joins it (a read too: a primary too slow to answer in time
    /// does not serve it twice).
    first: Option<u64>,
    /// Attempts sent and not answered (each may still be at a server): id → the epoch of the
    /// view it went under.
    unanswered: BTreeMap<u64, Epoch>,
    /// The newest attempt of a write that succeeded, as (epoch, id).
    succeeded: Option<(Epoch, u64)>,
}

impl Piece {
    /// Whether a write's piece is done: an attempt succeeded, and none still unanswered may
    /// land after it (a primary refuses an attempt of an older epoch, or one older than a
    /// write it took from the same client).
    fn settled(&self) -> bool {
        self.succeeded.is_some_and(|newest| {
            self.unanswered
                .iter()
                .all(|(&id, &epoch)| (epoch, id) < newest)
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PieceState {
    /// Waiting for the group's primary (a lookup) or for a retry's delay.
    Waiting {
        until: Nanos,
    },
    Sent {
        /// The latest attempt.
        id: u64,
        deadline: Nanos,
        /// The primary it went to.
        to: ServerId,
    },
    Done,
}

enum MdsWait {
    Object { object: ObjectId },
    Group { group: GroupId },
    Create { op: u64, retried: bool },
    Delete { op: u64, retried: bool },
}

pub struct ObjectClient {
    config: ClientConfig,
    now: Nanos,
    next_id: u64,
    next_seq: u64,
    layouts: BTreeMap<ObjectId, ObjectLayout>,
    views: BTreeMap<GroupId, GroupView>,
    ops: BTreeMap<u64, Op>,
    /// Message id → (op, piece).
    sent: BTreeMap<u64, (u64, usize)>,
    /// MDS requests in flight: id → (what, deadline, the message to send again).
    mds: BTreeMap<u64, (MdsWait, Nanos, Message)>,
    lookups_pending: BTreeMap<ObjectId, u64>,
    group_lookups: BTreeMap<GroupId, u64>,
    out: VecDeque<(Endpoint, Message)>,
    done: VecDeque<(u64, Result<Done, ClientError>)>,
    stats: ClientStats,
}

impl ObjectClient {
    pub fn new(config: ClientConfig) -> ObjectClient {
        ObjectClient {
            next_id: (config.incarnation as u64) << 40 | 1,
            config,
            now: 0,
            next_seq: 0,
            layouts: BTreeMap::new(),
            views: BTreeMap::new(),
            ops: BTreeMap::new(),
            sent: BTreeMap::new(),
            mds: BTreeMap::new(),
            lookups_pending: BTreeMap::new(),
            group_lookups: BTreeMap::new(),
            out: VecDeque::new(),
            done: VecDeque::new(),
            stats: ClientStats::default(),
        }
    }

    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    pub fn poll_message(&mut self) -> Option<(Endpoint, Message)> {
        self.out.pop_front()
    }

    pub fn poll_done(&mut self) -> Option<(u64, Result<Done, ClientError>)> {
        self.done.pop_front()
    }

    /// The object's size, once its layout is known (after any request on it succeeded).
    pub fn size_of(&self, object: ObjectId) -> Option<u64> {
        self.layouts.get(&object).map(|l| l.size_bytes)
    }

    pub fn in_flight(&self) -> usize {
        self.ops.len()
    }

    /// Request `op`'s attempts sent and not answered, by message id: each may still be at a
    /// server, which answers it (even to a later life of this client).
    pub fn unanswered_attempts(&self, op: u64) -> Vec<u64> {
        self.ops.get(&op).map_or(Vec::new(), |o| {
            o.pieces
                .iter()
                .flat_map(|p| p.unanswered.keys().copied())
                .collect()
        })
    }

    pub fn create(&mut self, now: Nanos, id: u64, object: ObjectId, size_bytes: u64) {
        self.start(now, id, object, Kind::Create { size_bytes });
    }

    pub fn read(
        &mut self,
        now: Nanos,
        id: u64,
        object: ObjectId,
        offset_bytes: u64,
        length_bytes: u64,
    ) {
        self.start(
            now,
            id,
            object,
            Kind::Read {
                offset_bytes,
                length_bytes,
            },
        );
    }

    pub fn write(
        &mut self,
        now: Nanos,
        id: u64,
        object: ObjectId,
        offset_bytes: u64,
        data: Vec<u8>,
    ) {
        self.start(now, id, object, Kind::Write { offset_bytes, data });
    }

    pub fn delete(&mut self, now: Nanos, id: u64, object: ObjectId) {
        self.start(now, id, object, Kind::Delete);
    }

    pub fn poll_timeout(&self) -> Option<Nanos> {
        let pieces = self
            .ops
            .values()
            .flat_map(|op| op.pieces.iter())
            .filter_map(|p| match p.state {
                PieceState::Waiting { until } => Some(until),
                PieceState::Sent { deadline, .. } => Some(deadline),
                PieceState::Done => None,
            });
        let mds = self.mds.values().map(|(_, deadline, _)| *deadline);
        pieces.chain(mds).min()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.now = now;
        let expired: Vec<u64> = self
            .mds
            .iter()
            .filter(|(_, (_, deadline, _))| *deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            // Asked again under the same id (the answer is the same whichever arrives).
            let entry = self.mds.get_mut(&id).expect("an MDS request");
            entry.1 = now + self.config.request_timeout_ns;
            match &mut entry.0 {
                MdsWait::Create { retried, .. } | MdsWait::Delete { retried, .. } => {
                    *retried = true
                }
                _ => {}
            }
            let message = entry.2.clone();
            self.out.push_back((Endpoint::Mds, message));
        }
        let mut due = Vec::new();
        for (&op, o) in &self.ops {
            for (i, p) in o.pieces.iter().enumerate() {
                match p.state {
                    PieceState::Waiting { until } if until <= now => due.push((op, i, false)),
                    PieceState::Sent { deadline, .. } if deadline <= now => due.push((op, i, true)),
                    _ => {}
                }
            }
        }
        for (op, i, timed_out) in due {
            // An earlier piece's last retry may have failed the whole request.
            let Some(o) = self.ops.get(&op) else {
                continue;
            };
            if timed_out {
                self.stats.timeouts += 1;
                let group = o.pieces[i].group;
                self.retry(op, i, group);
            } else {
                self.send_piece(op, i);
            }
        }
    }

    /// The connection to `server` closed (it went into standby, or its process ended): the
    /// views naming it primary are dropped, and the pieces waiting for its answer are tried
    /// again at once (after the retry delay, from the MDS's view) instead of at their timeout.
    pub fn server_gone(&mut self, now: Nanos, server: ServerId) {
        self.now = now;
        self.views.retain(|_, v| v.primary != Some(server));
        let waiting: Vec<(u64, usize, GroupId)> = self
            .ops
            .iter()
            .flat_map(|(&op, o)| {
                o.pieces
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, p)| match p.state {
                        PieceState::Sent { to, .. } if to == server => Some((op, i, p.group)),
                        _ => None,
                    })
            })
            .collect();
        for (op, i, group) in waiting {
            self.retry(op, i, group);
        }
    }

    pub fn handle_message(&mut self, now: Nanos, from: Endpoint, message: Message) {
        self.now = now;
        match message {
            Message::Created { id, result } | Message::Located { id, result } => {
                self.mds_answer(id, result.map(Some).map_err(Some))
            }
            Message::Deleted { id, result } => {
                self.mds_answer(id, result.map(|()| None).map_err(Some))
            }
            Message::GroupLocated { id, result } => {
                let Some((MdsWait::Group { group }, _, _)) = self.mds.remove(&id) else {
                    return;
                };
                self.group_lookups.remove(&group);
                if let Ok(view) = result {
                    self.views.insert(group, view);
                }
                self.wake_group(group);
            }
            Message::ReadDone { id, result } => {
                self.piece_answer(from, id, result.map(Some));
            }
            Message::WriteDone { id, result } => {
                self.piece_answer(from, id, result.map(|()| None));
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------------------------------

    fn id_next(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn ask_mds(&mut self, wait: MdsWait, message: Message, id: u64) {
        self.mds.insert(
            id,
            (
                wait,
                self.now + self.config.request_timeout_ns,
                message.clone(),
            ),
        );
        self.out.push_back((Endpoint::Mds, message));
    }

    fn start(&mut self, now: Nanos, id: u64, object: ObjectId, kind: Kind) {
        self.now = now;
        self.stats.requests += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        let op = Op {
            object,
            kind,
            seq,
            pieces: Vec::new(),
            remaining: 0,
            buf: Vec::new(),
            started: false,
            error: None,
        };
        assert!(
            !self.ops.contains_key(&id),
            "request ids are unique among those in flight"
        );
        self.ops.insert(id, op);
        match self.ops[&id].kind {
            Kind::Create { size_bytes } => {
                let m = self.id_next();
                self.ask_mds(
                    MdsWait::Create {
                        op: id,
                        retried: false,
                    },
                    Message::Create {
                        id: m,
                        object,
                        size_bytes,
                    },
                    m,
                );
            }
            Kind::Delete => {
                let m = self.id_next();
                self.ask_mds(
                    MdsWait::Delete {
                        op: id,
                        retried: false,
                    },
                    Message::Delete { id: m, object },
                    m,
                );
            }
            _ => self.begin(id),
        }
    }

    /// Sends a read's or write's pieces, or asks the MDS for the object's layout first.
    fn begin(&mut self, op: u64) {
        let object = self.ops[&op].object;
        if self.layouts.contains_key(&object) {
            self.split(op);
        } else if !self.lookups_pending.contains_key(&object) {
            let m = self.id_next();
            self.stats.lookups += 1;
            self.lookups_pending.insert(object, m);
            self.ask_mds(
                MdsWait::Object { object },
                Message::Lookup { id: m, object },
                m,
            );
        }
    }

    fn finish(&mut self, op: u64, result: Result<Done, ClientError>) {
        let finished = self.ops.remove(&op);
        if let Some(o) = &finished {
            for p in &o.pieces {
                for id in p.unanswered.keys() {
                    self.sent.remove(id);
                }
            }
        }
        if result.is_err() {
            self.stats.failures += 1;
        }
        self.done.push_back((op, result));
        // Writes that waited for this one over the same bytes may go now.
        if let Some(o) = finished.filter(|o| o.write_range().is_some()) {
            let waiting: Vec<u64> = self
                .ops
                .iter()
                .filter(|(_, w)| w.object == o.object && !w.started && w.write_range().is_some())
                .map(|(&id, _)| id)
                .collect();
            for id in waiting {
                if self.ops.get(&id).is_some_and(|w| !w.started) {
                    self.begin(id);
                }
            }
        }
    }

    /// Whether write `op` must wait: an earlier write of the client over some of its bytes is
    /// not finished.
    fn held_back(&self, op: u64) -> bool {
        let o = &self.ops[&op];
        let Some((lo, hi)) = o.write_range() else {
            return false;
        };
        self.ops.values().any(|e| {
            e.seq < o.seq
                && e.object == o.object
                && e.write_range().is_some_and(|(a, b)| a < hi && lo < b)
        })
    }

    fn mds_answer(&mut self, id: u64, result: Result<Option<ObjectLayout>, Option<MdsError>>) {
        let Some((wait, _, _)) = self.mds.remove(&id) else {
            return;
        };
        let error = |e: MdsError| match e {
            MdsError::NoSuchObject | MdsError::NoSuchGroup => ClientError::NoSuchObject,
            MdsError::Exists => ClientError::Exists,
            MdsError::TooLarge => ClientError::TooLarge,
        };
        match wait {
            MdsWait::Object { object } => {
                self.lookups_pending.remove(&object);
                let waiting: Vec<u64> = self
                    .ops
                    .iter()
                    .filter(|(_, o)| o.object == object && !o.started)
                    .map(|(&op, _)| op)
                    .collect();
                match result {
                    Ok(Some(layout)) => {
                        self.learn(layout);
                        for op in waiting {
                            self.split(op);
                        }
                    }
                    Err(e) => {
                        let e = e.map_or(ClientError::NoSuchObject, error);
                        for op in waiting {
                            self.finish(op, Err(e));
                        }
                    }
                    Ok(None) => {}
                }
            }
            MdsWait::Create { op, retried } => match result {
                Ok(Some(layout)) => {
                    self.learn(layout);
                    self.finish(op, Ok(Done::Created));
                }
                // A create asked twice: the first one made it.
                Err(Some(MdsError::Exists)) if retried => self.finish(op, Ok(Done::Created)),
                Err(e) => self.finish(op, Err(e.map_or(ClientError::BadRequest, error))),
                Ok(None) => {}
            },
            MdsWait::Delete { op, retried } => {
                let object = self.ops.get(&op).map(|o| o.object);
                if let Some(object) = object {
                    self.layouts.remove(&object);
                }
                match result {
                    Err(Some(MdsError::NoSuchObject)) if retried => {
                        self.finish(op, Ok(Done::Deleted))
                    }
                    Err(e) => self.finish(op, Err(e.map_or(ClientError::BadRequest, error))),
                    Ok(_) => self.finish(op, Ok(Done::Deleted)),
                }
            }
            MdsWait::Group { .. } => {}
        }
    }

    fn learn(&mut self, layout: ObjectLayout) {
        for view in &layout.groups {
            self.views.insert(view.group, view.clone());
        }
        self.layouts.insert(layout.object, layout);
    }
}

mod pieces;

#[cfg(test)]
mod tests;
