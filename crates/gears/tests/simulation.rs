//! Sierra on the simulator: the MDS, six chunk servers in three racks (power-aware grouping,
//! rack-aligned), a dedicated logger per rack (the versioned store) and two clients, all the real
//! cores, under seeded schedules. Clients read and write their objects at random while the MDS
//! shifts gears up and down (g_min = 1 or 2); chunk servers, loggers and clients crash and
//! restart; messages are dropped and delayed; in some schedules a chunk server fails for good
//! and is rebuilt onto its gear group, and in some the MDS crashes and restarts from the state
//! its driver stored (each change made durable, through its record encoding, before any
//! message it backs was sent). A reference model checks every read: each block holds
//! the last acknowledged write or one whose outcome is unknown or concurrent. After a quiet
//! period in the top gear: every group has a primary that serves it, nothing is left logged,
//! every logger is empty, and every block of every object reads back as the model allows.
//!
//! Each run: long schedules (ten seconds of faults, a twenty-second quiet period) — the
//! regression seeds, seeds 0–9 and fresh ones from a base seed drawn anew (printed) for 45 s —
//! and short ones (four seconds of faults, a twelve-second quiet period, a quarter of the
//! cost): the regressions, seeds 0–39 and fresh ones for 45 s (`scripts/campaign.sh` runs
//! 10^5 of either). The counts below were measured with 211 long and 2,003 short schedules
//! (seeds 0–99 and 0–1,999 and fresh ones), before the families were sized by time. Chunk
//! servers' outgoing messages (all of them, or those to one peer) stall for 1.5–4 s now and
//! then, past the lease and the heartbeat timeout, so a deposed primary's log and replicated
//! writes arrive after its successor's. `scripts/mutants.sh` plants bugs the short family must
//! catch: a primary acknowledging before its secondaries (28 of 366 fresh schedules fail),
//! loggers without the store's fencing (3 of 1,573) or secondaries without epoch fencing (1 of
//! 524, then 0 of 1,564: rare; its seed is kept as a regression); removing the primary's
//! deduplication of retried requests fails fixed seed 72.
//!
//! `SIERRA_SEED=S` runs one schedule (`SIERRA_TRACE=1` prints its messages);
//! `SIERRA_SCHEDULES=N` runs N fresh schedules, `SIERRA_SECONDS=T` sets the time budget
//! ([`BUDGET`]), `SIERRA_BASE_SEED=B` where the fresh ones start, `SIERRA_FIXED=K` how many
//! fixed seeds.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;

use cordillera_gears::client::{ClientConfig, ClientError, Done, ObjectClient};
use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::mds::persist::{Changes, GroupRecord, ObjectRecord, ServerRecord, Snapshot};
use cordillera_gears::mds::{Mds, MdsConfig, MdsStats, ServerState};
use cordillera_gears::model::{GroupId, ObjectId, ServerId, Topology};
use cordillera_gears::protocol::{Endpoint, Message};
use cordillera_gears::schedule::rotation;
use cordillera_gears::server::{ChunkIo, ChunkIoDone, ChunkServer, LoggerInfo, ServerConfig};
use cordillera_host::{DiskPort, Durability};
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::presets;
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, PowerRequest, World, WorldBuilder};
use cordillera_testkit::model::{pattern, Model, BLOCK};
use cordillera_testkit::{all_succeeded, Budget, Schedules};
use cordillera_vstore::store::{Config as StoreConfig, DiskDone, DiskOp, Reply, Request, Store};

const RACKS: u32 = 3;
const PER_RACK: u32 = 2;
const SERVERS: usize = (RACKS * PER_RACK) as usize;
const LOGGERS: usize = RACKS as usize;
const CLIENTS: usize = 2;
const MDS_NODE: NodeId = 0;
const LOGGER0: NodeId = 1 + SERVERS;
const CLIENT0: NodeId = LOGGER0 + LOGGERS;
const NODES: usize = CLIENT0 + CLIENTS;

const CHUNK: u64 = 64 * 1024;
const BLOCKS: u64 = 64;
const GROUPS_PER_SERVER: usize = 8;
/// Each group's space: up to 64 chunks.
const GROUP_BYTES: u64 = 64 * CHUNK;
const LOG_BYTES: u64 = 8 << 20;
const IN_FLIGHT_MAX: usize = 4;

const MS: Nanos = 1_000_000;
const S: Nanos = 1_000_000_000;
/// A schedule's phases: requests, gear shifts and crashes until `active_ns`; a quiet period in
/// the top gear; final reads of every block from `verify_ns`; the end.
#[derive(Clone, Copy, Debug)]
struct Shape {
    active_ns: Nanos,
    verify_ns: Nanos,
    end_ns: Nanos,
    /// Whether chunk servers' messages stall ([`link_stalls`]): off only to replay schedules
    /// found before stalls existed.
    stalls: bool,
}

/// Ten seconds of faults and a twenty-second quiet period.
const LONG: Shape = Shape {
    active_ns: 10 * S,
    verify_ns: 30 * S,
    end_ns: 40 * S,
    stalls: true,
};

/// Four seconds of faults (still several gear shifts, crashes and, in some, a permanent
/// failure) and a twelve-second quiet period, long enough for the failed server's groups to be
/// rebuilt and every logged byte reclaimed: about a quarter of a long schedule's cost, so a run
/// explores thousands of them.
const SHORT: Shape = Shape {
    active_ns: 4 * S,
    verify_ns: 16 * S,
    end_ns: 20 * S,
    stalls: true,
};
const WAKE_NS: Nanos = 300 * MS;

#[derive(Clone, Debug, Hash)]
enum Msg {
    Sierra(Message),
    /// `life`: the sending server's incarnation; the reply goes to that incarnation only.
    Log {
        id: u64,
        life: u64,
        request: Request,
    },
    LogReply {
        id: u64,
        reply: Reply,
        load: u64,
        life: u64,
        to_life: u64,
    },
    /// A chunk server closes its client connections as it goes into standby.
    Closed,
}

fn node_of(e: Endpoint) -> NodeId {
    match e {
        Endpoint::Mds => MDS_NODE,
        Endpoint::Server(s) => 1 + s as usize,
        Endpoint::Client(c) => CLIENT0 + c as usize,
    }
}

fn endpoint_of(node: NodeId) -> Endpoint {
    match node {
        MDS_NODE => Endpoint::Mds,
        n if n < LOGGER0 => Endpoint::Server((n - 1) as ServerId),
        n => Endpoint::Client((n - CLIENT0) as u32),
    }
}

fn object_of(client: usize) -> ObjectId {
    ObjectId(100 + client as u64)
}

/// What outlives the nodes' lives: the models, lives, counts.
#[derive(Default)]
struct Shared {
    models: Vec<Model>,
    created: Vec<bool>,
    lives: Vec<u64>,
    /// Writes of each client in flight when it crashed end there.
    counts: Counts,
    verified_blocks: u64,
    trace: bool,
    /// Drops and delays of Sierra's own messages (logger traffic runs on TCP-like links, lost
    /// only with a crash of either end, as the versioned store's protocol assumes).
    faults: Option<SimRng>,
    dropped: u64,
    delayed: u64,
    /// Per node: windows `[from, until)` in which every message it sends (Sierra's and the
    /// loggers') is held until `until` — a link or NIC that stalls, or a process paused, longer
    /// than the lease, so that a deposed primary's writes reach secondaries and loggers after
    /// the next primary took over (fencing must refuse them).
    stalls: Vec<Vec<Stall>>,
    stalled: u64,
    /// Per client: its writes in flight → their pieces sent and not answered, with the
    /// attempts outstanding (kept current).
    unanswered: Vec<HashMap<u64, Vec<(u64, u32)>>>,
    /// Pieces of writes whose client crashed, still at servers: (client, piece id) → (write,
    /// answers still to come).
    orphans: HashMap<(usize, u64), (u64, u32)>,
    orphan_pieces: HashMap<(usize, u64), usize>,
    orphans_finished: u64,
    /// The MDS's durable state, as its driver stored it (changes applied before any message
    /// left), and what a restarted MDS starts from.
    mds_store: Snapshot,
    /// The gear plan, and the last gear set (a restarted MDS is put in it again).
    gears: VecDeque<(Nanos, usize, Vec<usize>)>,
    gear: Option<(usize, Vec<usize>)>,
    /// The MDS's counts from its earlier lives.
    mds_stats_before: MdsStats,
    mds_stats_now: MdsStats,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    writes_acked: u64,
    writes_failed: u64,
    reads_checked: u64,
    reads_failed: u64,
    client_retries: u64,
}

struct MdsPart {
    mds: Mds,
    config: MdsConfig,
    layout: Layout,
}

/// What the MDS's driver does before sending anything: the changes made durable, each record
/// through its encoding (as the runtime stores them).
fn store_changes(store: &mut Snapshot, changes: Changes) {
    let through = Changes {
        groups: changes
            .groups
            .into_iter()
            .map(|(g, r)| (g, GroupRecord::decode(&r.encode()).expect("a group record")))
            .collect(),
        objects: changes
            .objects
            .into_iter()
            .map(|(o, r)| {
                let r = r.map(|r| ObjectRecord::decode(&r.encode()).expect("an object record"));
                (o, r)
            })
            .collect(),
        chunks: changes.chunks,
        servers: changes
            .servers
            .into_iter()
            .map(|(s, r)| {
                (
                    s,
                    ServerRecord::decode(&r.encode()).expect("a server record"),
                )
            })
            .collect(),
        rng: changes.rng,
    };
    store.apply(&through).expect("changes in order");
}

struct ServerPart {
    server: ChunkServer,
    disk: DiskPort,
    logger_lives: HashMap<NodeId, u64>,
    life: u64,
    sleep_asked: bool,
}

struct LoggerPart {
    store: Store,
    disk: DiskPort,
    life: u64,
    open: u64,
    senders: HashMap<u64, (NodeId, u64, u64)>,
    next_tag: u64,
}

enum ClientOp {
    Create,
    Write { write: u64 },
    Read { first: u64, issued: Nanos },
    Verify { first: u64, issued: Nanos },
}

struct ClientPart {
    index: usize,
    client: ObjectClient,
    ops: BTreeMap<u64, ClientOp>,
    next_op: u64,
    rng: SimRng,
    next_tick: Nanos,
    verify_next: u64,
    shape: Shape,
}

enum Part {
    Mds(Box<MdsPart>),
    Server(Box<ServerPart>),
    Logger(Box<LoggerPart>),
    Client(Box<ClientPart>),
}

struct Node {
    id: NodeId,
    part: Part,
    shared: Rc<RefCell<Shared>>,
    out: VecDeque<Outgoing<Msg>>,
    /// Messages held back by an injected delay, with their release times.
    delayed: Vec<(Nanos, Outgoing<Msg>)>,
    io: VecDeque<IoCommand>,
    power: VecDeque<PowerRequest>,
}

/// Chance that a message of Sierra's protocols is dropped, or delayed (exponential, mean
/// `DELAY_MEAN_NS`).
const DROP: f64 = 0.002;
const DELAY: f64 = 0.01;
const DELAY_MEAN_NS: f64 = 3_000_000.0;

fn msg_bytes(m: &Msg) -> u64 {
    match m {
        Msg::Sierra(m) => m.wire_bytes(),
        Msg::Closed => 64,
        Msg::Log { request, .. } => {
            64 + match request {
                Request::Write { data, .. } => data.len() as u64,
                _ => 0,
            }
        }
        Msg::LogReply { reply, .. } => {
            64 + match reply {
                Reply::Read(pieces) => pieces.iter().map(|(_, d)| d.len() as u64).sum(),
                Reply::ReadAny(Some((_, d))) => d.len() as u64,
                _ => 0,
            }
        }
    }
}

impl Node {
    fn send(&mut self, now: Nanos, to: NodeId, message: Msg) {
        let mut shared = self.shared.borrow_mut();
        if shared.trace {
            let text = format!("{message:?}");
            eprintln!("  {} → {to}: {}", self.id, &text[..text.len().min(240)]);
        }
        let bytes = msg_bytes(&message);
        let outgoing = Outgoing { to, message, bytes };
        if let Some(stall) = shared.stalls[self.id]
            .iter()
            .find(|s| (s.from..s.until).contains(&now) && s.to.is_none_or(|t| t == to))
        {
            let until = stall.until;
            shared.stalled += 1;
            self.delayed.push((until, outgoing));
            return;
        }
        if matches!(outgoing.message, Msg::Sierra(_)) {
            if let Some(rng) = shared.faults.as_mut() {
                if rng.chance(DROP) {
                    shared.dropped += 1;
                    return;
                }
                if rng.chance(DELAY) {
                    let at = now + 1 + rng.exponential(DELAY_MEAN_NS) as Nanos;
                    shared.delayed += 1;
                    self.delayed.push((at, outgoing));
                    return;
                }
            }
        }
        // Links are FIFO (TCP): behind a delayed message to the same node, a message waits.
        if let Some(behind) = self
            .delayed
            .iter()
            .filter(|(_, o)| o.to == outgoing.to)
            .map(|(t, _)| *t)
            .max()
        {
            self.delayed.push((behind, outgoing));
            return;
        }
        self.out.push_back(outgoing);
    }

    /// Releases delayed messages whose time has come, in the order they were sent.
    fn release(&mut self, now: Nanos) {
        let (due, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.delayed = held;
        self.out.extend(due.into_iter().map(|(_, o)| o));
    }

    fn pump(&mut self, now: Nanos) {
        loop {
            let mut progress = false;
            let mut sends = Vec::new();
            match &mut self.part {
                Part::Mds(m) => {
                    let changes = m.mds.take_changes();
                    {
                        let mut sh = self.shared.borrow_mut();
                        store_changes(&mut sh.mds_store, changes);
                        sh.mds_stats_now = m.mds.stats();
                    }
                    while let Some((to, message)) = m.mds.poll_message() {
                        sends.push((node_of(to), Msg::Sierra(message)));
                    }
                    while let Some(s) = m.mds.poll_wake() {
                        self.power.push_back(PowerRequest::Wake {
                            node: 1 + s as usize,
                            after_ns: WAKE_NS,
                        });
                    }
                }
                Part::Server(p) => {
                    while let Some((to, message)) = p.server.poll_message() {
                        sends.push((node_of(to), Msg::Sierra(message)));
                    }
                    while let Some((logger, id, request)) = p.server.poll_store() {
                        sends.push((
                            logger as NodeId,
                            Msg::Log {
                                id,
                                life: p.life,
                                request,
                            },
                        ));
                    }
                    while let Some(io) = p.server.poll_io() {
                        let op = match io {
                            ChunkIo::Read {
                                id,
                                group,
                                offset_bytes,
                                length_bytes,
                            } => DiskOp::Read {
                                id,
                                offset_bytes: disk_offset(group, offset_bytes),
                                length_bytes,
                            },
                            ChunkIo::Write {
                                id,
                                group,
                                offset_bytes,
                                data,
                            } => DiskOp::Write {
                                id,
                                offset_bytes: disk_offset(group, offset_bytes),
                                data: data.into(),
                                durable: true,
                            },
                        };
                        if let Some(command) = p.disk.submit(op) {
                            self.io.push_back(command);
                        }
                    }
                    if p.server.wants_sleep() && !p.sleep_asked {
                        p.sleep_asked = true;
                        for c in 0..CLIENTS {
                            sends.push((CLIENT0 + c, Msg::Closed));
                        }
                        self.power.push_back(PowerRequest::Sleep);
                    }
                }
                Part::Logger(l) => {
                    while let Some(op) = l.store.poll_disk() {
                        if let Some(command) = l.disk.submit(op) {
                            self.io.push_back(command);
                        }
                    }
                    while let Some(done) = l.disk.poll_ready() {
                        l.store.handle_disk(now, done);
                        progress = true;
                    }
                    while let Some((tag, reply)) = l.store.poll_reply() {
                        if let Some((to, id, to_life)) = l.senders.remove(&tag) {
                            l.open -= 1;
                            sends.push((
                                to,
                                Msg::LogReply {
                                    id,
                                    reply,
                                    load: l.open,
                                    life: l.life,
                                    to_life,
                                },
                            ));
                        }
                    }
                }
                Part::Client(c) => {
                    while let Some((to, message)) = c.client.poll_message() {
                        sends.push((node_of(to), Msg::Sierra(message)));
                    }
                    let mut done = Vec::new();
                    while let Some(d) = c.client.poll_done() {
                        done.push(d);
                    }
                    for (id, result) in done {
                        progress = true;
                        client_done(c, &self.shared, now, id, result);
                    }
                    if issue(c, &self.shared, now) {
                        progress = true;
                    }
                    // What a crash now would leave at the servers.
                    let unanswered: HashMap<u64, Vec<(u64, u32)>> = c
                        .ops
                        .iter()
                        .filter_map(|(&op, o)| match o {
                            ClientOp::Write { write } => {
                                let pieces = c.client.unanswered_pieces(op);
                                (!pieces.is_empty()).then_some((*write, pieces))
                            }
                            _ => None,
                        })
                        .collect();
                    self.shared.borrow_mut().unanswered[c.index] = unanswered;
                }
            }
            for (to, message) in sends {
                progress = true;
                self.send(now, to, message);
            }
            if !progress {
                break;
            }
        }
    }
}

fn disk_offset(group: GroupId, offset_bytes: u64) -> u64 {
    group.0 as u64 * GROUP_BYTES + offset_bytes
}

/// Starts new requests while the client has room (and, later, the final reads).
fn issue(c: &mut ClientPart, shared: &Rc<RefCell<Shared>>, now: Nanos) -> bool {
    let mut any = false;
    let object = object_of(c.index);
    if !shared.borrow().created[c.index] {
        if c.ops.is_empty() {
            let id = c.next_op;
            c.next_op += 1;
            c.ops.insert(id, ClientOp::Create);
            c.client.create(now, id, object, BLOCKS * BLOCK);
            return true;
        }
        return false;
    }
    if now >= c.shape.verify_ns {
        while c.ops.is_empty() && c.verify_next < BLOCKS {
            let first = c.verify_next;
            let count = 4.min(BLOCKS - first);
            c.verify_next += count;
            let id = c.next_op;
            c.next_op += 1;
            shared.borrow_mut().models[c.index].read_issued(now);
            c.ops.insert(id, ClientOp::Verify { first, issued: now });
            c.client.read(now, id, object, first * BLOCK, count * BLOCK);
            any = true;
        }
        return any;
    }
    while now < c.shape.active_ns && c.ops.len() < IN_FLIGHT_MAX {
        let first = c.rng.below(BLOCKS);
        let count = (1 + c.rng.below(4)).min(BLOCKS - first);
        let id = c.next_op;
        c.next_op += 1;
        if c.rng.chance(0.5) {
            let write = shared.borrow_mut().models[c.index].write_issued(now, first, count);
            let mut data = Vec::with_capacity((count * BLOCK) as usize);
            for b in first..first + count {
                data.extend_from_slice(&pattern(b, write));
            }
            c.ops.insert(id, ClientOp::Write { write });
            c.client.write(now, id, object, first * BLOCK, data);
        } else {
            shared.borrow_mut().models[c.index].read_issued(now);
            c.ops.insert(id, ClientOp::Read { first, issued: now });
            c.client.read(now, id, object, first * BLOCK, count * BLOCK);
        }
        any = true;
    }
    any
}

fn client_done(
    c: &mut ClientPart,
    shared: &Rc<RefCell<Shared>>,
    now: Nanos,
    id: u64,
    result: Result<Done, ClientError>,
) {
    let Some(op) = c.ops.remove(&id) else {
        return;
    };
    let mut sh = shared.borrow_mut();
    let index = c.index;
    match (op, result) {
        (ClientOp::Create, Ok(_)) | (ClientOp::Create, Err(ClientError::Exists)) => {
            sh.created[index] = true
        }
        (ClientOp::Create, Err(_)) => {}
        (ClientOp::Write { write }, Ok(_)) => {
            sh.counts.writes_acked += 1;
            sh.models[index].write_ended(now, write, true);
        }
        (ClientOp::Write { write }, Err(_)) => {
            // Its outcome is unknown: the model keeps it possible.
            sh.counts.writes_failed += 1;
            sh.models[index].write_ended(now, write, false);
        }
        (ClientOp::Read { first, issued }, Ok(Done::Read(data))) => {
            sh.counts.reads_checked += 1;
            sh.models[index].check_read(index, first, issued, now, &data);
        }
        (ClientOp::Verify { first, issued }, Ok(Done::Read(data))) => {
            sh.verified_blocks += data.len() as u64 / BLOCK;
            sh.models[index].check_read(index, first, issued, now, &data);
        }
        (ClientOp::Verify { first, issued }, _) => {
            sh.models[index].read_ended(issued);
            sh.models[index].violations.push(format!(
                "client {index}: the final read of blocks {first}.. failed after the quiet period"
            ));
        }
        (ClientOp::Read { issued, .. }, _) => {
            sh.counts.reads_failed += 1;
            sh.models[index].read_ended(issued);
        }
    }
}

impl Core for Node {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        let shared = self.shared.clone();
        if let Part::Mds(m) = &mut self.part {
            let mut sh = shared.borrow_mut();
            if sh.lives[self.id] > 1 {
                // A restart: the MDS from what its driver stored, in the gear last set.
                let before = std::mem::take(&mut sh.mds_stats_now);
                add_stats(&mut sh.mds_stats_before, before);
                let stored = sh.mds_store.clone();
                m.mds = Mds::restore(m.config.clone(), &m.layout, stored, now)
                    .unwrap_or_else(|e| panic!("the MDS's stored state: {e}"));
                if let Some((gear, rotation)) = sh.gear.clone() {
                    m.mds.set_gear(now, gear, &rotation);
                }
            }
        }
        if let Part::Client(c) = &mut self.part {
            c.next_tick = now;
            let mut sh = shared.borrow_mut();
            if sh.lives[self.id] > 1 {
                // A restart: its requests in flight ended with the crash, except writes whose
                // pieces are still at servers, which end when the servers answer them.
                let unanswered = std::mem::take(&mut sh.unanswered[c.index]);
                // Writes orphaned by an earlier crash stay open too.
                let open: HashSet<u64> = unanswered
                    .keys()
                    .copied()
                    .chain(
                        sh.orphan_pieces
                            .keys()
                            .filter(|(client, _)| *client == c.index)
                            .map(|&(_, write)| write),
                    )
                    .collect();
                for (write, pieces) in unanswered {
                    sh.orphan_pieces.insert((c.index, write), pieces.len());
                    for (piece, attempts) in pieces {
                        sh.orphans.insert((c.index, piece), (write, attempts));
                    }
                }
                sh.models[c.index].crashed_keeping(now, &open);
            }
        }
        self.pump(now);
    }

    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Msg) {
        if self.shared.borrow().trace {
            let text = format!("{message:?}");
            eprintln!(
                "{now} {} ← {from}: {}",
                self.id,
                &text[..text.len().min(240)]
            );
        }
        match (&mut self.part, message) {
            (Part::Mds(m), Msg::Sierra(message)) => {
                m.mds.handle_message(now, endpoint_of(from), message)
            }
            (Part::Server(p), Msg::Sierra(message)) => {
                p.server.handle_message(now, endpoint_of(from), message)
            }
            (
                Part::Server(p),
                Msg::LogReply {
                    id,
                    reply,
                    load,
                    life,
                    to_life,
                },
            ) if to_life == p.life => {
                let known = p.logger_lives.insert(from, life);
                if known.is_some_and(|l| l != life) {
                    p.server.logger_lost(now, from as u64);
                }
                p.server.handle_store(now, id, reply, Some(load));
            }
            (Part::Logger(l), Msg::Log { id, life, request }) => {
                l.open += 1;
                l.next_tag += 1;
                l.senders.insert(l.next_tag, (from, id, life));
                l.store.handle_request(now, l.next_tag, request);
            }
            (Part::Client(c), Msg::Sierra(message)) => {
                if let Message::WriteDone { id, .. } | Message::ReadDone { id, .. } = &message {
                    let mut sh = self.shared.borrow_mut();
                    let client = c.index;
                    let piece_done = match sh.orphans.get_mut(&(client, *id)) {
                        Some((write, answers)) => {
                            *answers -= 1;
                            (*answers == 0).then_some(*write)
                        }
                        None => None,
                    };
                    if let Some(write) = piece_done {
                        sh.orphans.remove(&(client, *id));
                        let left = sh.orphan_pieces.get_mut(&(client, write)).expect("counted");
                        *left -= 1;
                        if *left == 0 {
                            sh.orphan_pieces.remove(&(client, write));
                            sh.orphans_finished += 1;
                            sh.models[client].write_ended(now, write, false);
                        }
                    }
                }
                c.client.handle_message(now, endpoint_of(from), message)
            }
            (Part::Client(c), Msg::Closed) => {
                if let Endpoint::Server(s) = endpoint_of(from) {
                    c.client.server_gone(now, s);
                }
            }
            _ => {}
        }
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.release(now);
        match &mut self.part {
            Part::Mds(m) => {
                let mut sh = self.shared.borrow_mut();
                while sh.gears.front().is_some_and(|(t, _, _)| *t <= now) {
                    let (_, gear, rotation) = sh.gears.pop_front().expect("a gear");
                    m.mds.set_gear(now, gear, &rotation);
                    sh.gear = Some((gear, rotation));
                }
                drop(sh);
                if m.mds.poll_timeout().is_some_and(|t| t <= now) {
                    m.mds.handle_timeout(now);
                }
            }
            Part::Server(p) => {
                if p.server.poll_timeout().is_some_and(|t| t <= now) {
                    p.server.handle_timeout(now);
                }
            }
            Part::Logger(l) => {
                if l.store.poll_timeout().is_some_and(|t| t <= now) {
                    l.store.handle_timeout(now);
                }
            }
            Part::Client(c) => {
                if c.client.poll_timeout().is_some_and(|t| t <= now) {
                    c.client.handle_timeout(now);
                }
                if c.next_tick <= now {
                    c.next_tick = if now + 5 * MS < c.shape.active_ns || now >= c.shape.verify_ns {
                        now + 5 * MS
                    } else {
                        c.shape.verify_ns
                    };
                }
            }
        }
        self.pump(now);
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        let mut then = Vec::new();
        match &mut self.part {
            Part::Server(p) => {
                if let Some(done) = p.disk.complete(done, &mut then) {
                    let done = match done {
                        DiskDone::Read { id, data } => ChunkIoDone::Read { id, data },
                        DiskDone::Written { id } | DiskDone::Flushed { id } => {
                            ChunkIoDone::Written { id }
                        }
                    };
                    p.server.handle_io(now, done);
                }
            }
            Part::Logger(l) => {
                if let Some(done) = l.disk.complete(done, &mut then) {
                    l.store.handle_disk(now, done);
                }
            }
            _ => {}
        }
        self.io.extend(then);
        self.pump(now);
    }

    fn handle_wake(&mut self, now: Nanos) {
        if let Part::Server(p) = &mut self.part {
            p.sleep_asked = false;
            p.server.handle_wake(now);
        }
        self.pump(now);
    }

    fn poll_message(&mut self) -> Option<Outgoing<Msg>> {
        self.out.pop_front()
    }

    fn poll_io(&mut self) -> Option<IoCommand> {
        self.io.pop_front()
    }

    fn poll_power(&mut self) -> Option<PowerRequest> {
        self.power.pop_front()
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let delayed = self.delayed.iter().map(|(t, _)| *t).min();
        let own = match &self.part {
            Part::Mds(m) => {
                let gear = self.shared.borrow().gears.front().map(|(t, _, _)| *t);
                [m.mds.poll_timeout(), gear].into_iter().flatten().min()
            }
            Part::Server(p) => p.server.poll_timeout(),
            Part::Logger(l) => l.store.poll_timeout(),
            Part::Client(c) => {
                let tick = (c.verify_next < BLOCKS).then_some(c.next_tick);
                [c.client.poll_timeout(), tick].into_iter().flatten().min()
            }
        };
        [own, delayed].into_iter().flatten().min()
    }
}

fn layout() -> Layout {
    let topology = Topology::racks(RACKS, PER_RACK);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    Layout::generate(
        spec,
        &topology,
        SERVERS * GROUPS_PER_SERVER,
        &mut cordillera_types::SplitMix64(5),
    )
    .expect("a layout")
}

#[derive(Debug, Default)]
struct Outcome {
    g_min: usize,
    counts: Counts,
    crashes: usize,
    /// Writes the world reordered (and crashes that shuffled writes in flight).
    reordered: u64,
    mds_crash: bool,
    permanent_failure: bool,
    migrations: u64,
    reassignments: u64,
    rebuilds_done: u64,
    logged_writes: u64,
    reclaimed_bytes: u64,
    standbys: u64,
    lost_to_standby: u64,
    verified_blocks: u64,
    orphans_finished: u64,
    dropped: u64,
    delayed: u64,
    stalled: u64,
}

fn add_stats(to: &mut MdsStats, s: MdsStats) {
    to.migrations += s.migrations;
    to.reassignments += s.reassignments;
    to.suspicions += s.suspicions;
    to.permanent_failures += s.permanent_failures;
    to.rebuilds_started += s.rebuilds_started;
    to.rebuilds_done += s.rebuilds_done;
    to.wakes += s.wakes;
    to.standbys += s.standbys;
}

fn run(seed: u64) -> Result<Outcome, String> {
    run_shaped(seed, LONG)
}

fn run_short(seed: u64) -> Result<Outcome, String> {
    run_shaped(seed, SHORT)
}

/// A chunk server's outgoing messages held from `from` until `until`: all of them (`to`
/// `None`: a paused process or a stalled NIC), or those to one peer (a stalled link).
#[derive(Clone, Copy, Debug)]
struct Stall {
    from: Nanos,
    until: Nanos,
    to: Option<NodeId>,
}

/// Up to three stalls of a chunk server's outgoing messages and up to three of one link
/// between two chunk servers per schedule, each starting in the active period and lasting
/// 1.5–4 s: longer than the lease (0.4 s) and the MDS's heartbeat timeout (1.2 s). Their own
/// random stream: the other faults of a seed stay as they were.
fn link_stalls(seed: u64, shape: Shape) -> Vec<Vec<Stall>> {
    let mut rng = SimRng::new(seed, 23);
    let mut stalls = vec![Vec::new(); NODES];
    if !shape.stalls {
        return stalls;
    }
    for link in [false, true] {
        for _ in 0..rng.below(4) {
            let node = 1 + rng.below(SERVERS as u64) as usize;
            let to = link.then(|| 1 + (node + rng.below(SERVERS as u64 - 1) as usize) % SERVERS);
            let from = S / 2 + rng.below(shape.active_ns - S / 2);
            let until = from + 1500 * MS + rng.below(2500 * MS);
            stalls[node].push(Stall { from, until, to });
        }
    }
    stalls
}

fn run_shaped(seed: u64, shape: Shape) -> Result<Outcome, String> {
    let mut rng = SimRng::new(seed, 7);
    let g_min = 1 + rng.below(2) as usize;
    let trace = std::env::var_os("SIERRA_TRACE").is_some();
    let shared = Rc::new(RefCell::new(Shared {
        models: (0..CLIENTS).map(|_| Model::new(BLOCKS)).collect(),
        created: vec![false; CLIENTS],
        lives: vec![0; NODES],
        trace,
        faults: Some(SimRng::new(seed, 9)),
        stalls: link_stalls(seed, shape),
        unanswered: vec![HashMap::new(); CLIENTS],
        ..Shared::default()
    }));
    let layout = layout();
    let racks_of_servers: Vec<u32> = layout.topology.racks_of_servers.clone();
    let loggers: Vec<LoggerInfo> = (0..LOGGERS)
        .map(|i| LoggerInfo {
            id: (LOGGER0 + i) as u64,
            rack: i as u32,
            server: None,
        })
        .collect();
    // Gear shifts through the active period; the top gear for the quiet period after it.
    let mut gears = VecDeque::new();
    let mut t = S;
    let mut day = 0;
    while t < shape.active_ns {
        let gear = g_min + rng.below((4 - g_min) as u64) as usize;
        gears.push_back((t, gear, rotation(day, 3)));
        day += 1;
        t += S + rng.below(2 * S);
    }
    gears.push_back((shape.active_ns, 3, rotation(0, 3)));
    shared.borrow_mut().gears = gears;
    // Reclaim as background work (yielding to a busy disk) in half the schedules.
    let reclaim_busy_disk = {
        let mut r = SimRng::new(seed, 17);
        (r.below(2) == 0).then(|| r.below(3) as usize)
    };
    let mds_config = MdsConfig {
        lease_ns: 400 * MS,
        heartbeat_timeout_ns: 1200 * MS,
        permanent_after_ns: 4 * S,
        wake_timeout_ns: 2 * S,
        seed,
        ..MdsConfig::new(CHUNK)
    };
    let new_core = {
        let shared = shared.clone();
        let layout = layout.clone();
        move |id: NodeId| -> Node {
            let life = {
                let mut sh = shared.borrow_mut();
                sh.lives[id] += 1;
                sh.lives[id]
            };
            let part = match id {
                // A restarted MDS is restored in `handle_start`, when the time is known.
                MDS_NODE => Part::Mds(Box::new(MdsPart {
                    mds: Mds::new(mds_config.clone(), &layout, 0),
                    config: mds_config.clone(),
                    layout: layout.clone(),
                })),
                n if n < LOGGER0 => {
                    let server = (n - 1) as ServerId;
                    let mut config = ServerConfig::new(
                        server,
                        CHUNK,
                        GROUP_BYTES,
                        racks_of_servers.clone(),
                        loggers.clone(),
                    );
                    config.heartbeat_interval_ns = 100 * MS;
                    config.replicate_timeout_ns = 400 * MS;
                    config.suspect_ns = 1200 * MS;
                    config.log_request_timeout_ns = 600 * MS;
                    config.log_recovery_grace_ns = 500 * MS;
                    config.rebuild_piece_bytes = CHUNK;
                    config.reclaim_busy_disk = reclaim_busy_disk;
                    Part::Server(Box::new(ServerPart {
                        server: ChunkServer::new(config, life, 0),
                        disk: DiskPort::new(0, 0, Durability::WriteThenFlush),
                        logger_lives: HashMap::new(),
                        life,
                        sleep_asked: false,
                    }))
                }
                n if n < CLIENT0 => {
                    let config = StoreConfig::new(LOG_BYTES);
                    let store = if life == 1 {
                        Store::format(config, n as u128, seed ^ n as u64)
                    } else {
                        Store::recover(config, seed ^ (n as u64) << 8 ^ life, 0)
                    };
                    Part::Logger(Box::new(LoggerPart {
                        store,
                        disk: DiskPort::new(0, 0, Durability::WriteThenFlush),
                        life,
                        open: 0,
                        senders: HashMap::new(),
                        next_tag: 0,
                    }))
                }
                n => {
                    let index = n - CLIENT0;
                    let mut config = ClientConfig::new(index as u32);
                    config.incarnation = life as u32;
                    config.request_timeout_ns = 800 * MS;
                    config.retries_max = 16;
                    Part::Client(Box::new(ClientPart {
                        index,
                        client: ObjectClient::new(config),
                        ops: BTreeMap::new(),
                        next_op: 1,
                        rng: SimRng::new(seed, 100 + n as u64 * 7 + life),
                        next_tick: 0,
                        verify_next: 0,
                        shape,
                    }))
                }
            };
            Node {
                id,
                part,
                shared: shared.clone(),
                out: VecDeque::new(),
                delayed: Vec::new(),
                io: VecDeque::new(),
                power: VecDeque::new(),
            }
        }
    };
    let mut racks_of_nodes = vec![0; NODES];
    for s in 0..SERVERS {
        racks_of_nodes[1 + s] = layout.topology.racks_of_servers[s] as usize;
    }
    for i in 0..LOGGERS {
        racks_of_nodes[LOGGER0 + i] = i;
    }
    let params = NetworkParams {
        racks_of_nodes,
        ..NetworkParams::sierra_testbed(1, NODES)
    };
    let network = Network::new(params, NetworkFaults::default(), SimRng::new(seed, 3));
    let builder = WorldBuilder {
        new_core: Box::new(new_core),
        new_device: Box::new(|_| presets::device("ssd").expect("the ssd preset")),
        crash_model: CrashModel::default(),
        flush_ns: 50_000,
        early_reads: 0.0,
        reorder: 0.5,
    };
    let mut world = World::new(builder, network, SimRng::new(seed, 4));
    // Crashes of chunk servers, loggers and clients while the gears shift.
    let candidates: Vec<NodeId> = (1..NODES).collect();
    let crashes = rng.below(6) as usize;
    world.schedule_random_crashes(&candidates, crashes, S, shape.active_ns, 400.0 * MS as f64);
    let permanent = rng.chance(0.3);
    if permanent {
        let s = 1 + rng.below(SERVERS as u64) as usize;
        world.schedule_crash(s, S + rng.below(shape.active_ns - 2 * S), None);
    }
    // In some schedules the MDS crashes too (drawn from its own stream, so that the other
    // faults of a seed are those it always had).
    let mut mds_faults = SimRng::new(seed, 13);
    let mds_crash = mds_faults.chance(0.3);
    if mds_crash {
        let at = S + mds_faults.below(shape.active_ns - S);
        let down = 1 + mds_faults.exponential(400.0 * MS as f64) as Nanos;
        world.schedule_crash(MDS_NODE, at, Some(down));
    }
    world.run_until(shape.end_ns);

    // ---- checks
    let sh = shared.borrow();
    let mut problems: Vec<String> = Vec::new();
    for (i, m) in sh.models.iter().enumerate() {
        problems.extend(m.violations.iter().cloned());
        if !sh.created[i] {
            problems.push(format!("client {i} never created its object"));
        }
    }
    let Some(Node {
        part: Part::Mds(mds),
        ..
    }) = world.core(MDS_NODE)
    else {
        return Err("the MDS is gone".into());
    };
    let mds = &mds.mds;
    let mut logged_writes = 0;
    let mut reclaimed = 0;
    for g in 0..mds.group_count() {
        let view = mds.view(GroupId(g as u32));
        let Some(p) = view.primary else {
            problems.push(format!("group {g} has no primary at the end: {view:?}"));
            continue;
        };
        if mds.server_state(p) != ServerState::Up {
            problems.push(format!(
                "group {g}'s primary {p} is {:?}",
                mds.server_state(p)
            ));
            continue;
        }
        match world.core(1 + p as usize) {
            Some(Node {
                part: Part::Server(s),
                ..
            }) => {
                if !s
                    .server
                    .primaries()
                    .any(|(h, e)| h == view.group && e == view.epoch)
                {
                    problems.push(format!(
                        "group {g}: the MDS names {p} primary at epoch {}, which does not serve it",
                        view.epoch
                    ));
                }
            }
            _ => problems.push(format!("group {g}'s primary {p} is down")),
        }
    }
    for s in 0..SERVERS {
        if let Some(Node {
            part: Part::Server(p),
            ..
        }) = world.core(1 + s)
        {
            let stats = p.server.stats();
            logged_writes += stats.logged_writes;
            reclaimed += stats.reclaimed_bytes;
            if p.server.logged_bytes() > 0 {
                problems.push(format!(
                    "server {s}: {} bytes still logged after the quiet period:\n{}",
                    p.server.logged_bytes(),
                    p.server.describe()
                ));
            }
        }
    }
    for i in 0..LOGGERS {
        if let Some(Node {
            part: Part::Logger(l),
            ..
        }) = world.core(LOGGER0 + i)
        {
            for (client, extents) in l.store.clients() {
                if !extents.is_empty() {
                    problems.push(format!(
                        "logger {i} still holds {} extents of group {client}",
                        extents.len()
                    ));
                }
            }
        }
    }
    if sh.verified_blocks < BLOCKS * CLIENTS as u64 {
        problems.push(format!(
            "only {} of {} blocks read back at the end",
            sh.verified_blocks,
            BLOCKS * CLIENTS as u64
        ));
    }
    let mut retries = 0;
    for c in 0..CLIENTS {
        if let Some(Node {
            part: Part::Client(p),
            ..
        }) = world.core(CLIENT0 + c)
        {
            retries += p.client.stats().retries;
        }
    }
    if !problems.is_empty() {
        problems.truncate(12);
        problems.push(format!(
            "MDS: servers {:?}; {:?}",
            (0..SERVERS as ServerId)
                .map(|s| mds.server_state(s))
                .collect::<Vec<_>>(),
            mds.stats()
        ));
        return Err(format!(
            "g_min {g_min}, {crashes} crashes, MDS crash: {mds_crash}, permanent failure: {permanent}\n{}",
            problems.join("\n")
        ));
    }
    let mut stats = sh.mds_stats_before;
    add_stats(&mut stats, mds.stats());
    let mut counts = sh.counts;
    counts.client_retries = retries;
    Ok(Outcome {
        g_min,
        counts,
        crashes,
        reordered: world.reordered,
        mds_crash,
        permanent_failure: permanent,
        migrations: stats.migrations,
        reassignments: stats.reassignments,
        rebuilds_done: stats.rebuilds_done,
        logged_writes,
        reclaimed_bytes: reclaimed,
        standbys: stats.standbys,
        lost_to_standby: world.lost_to_standby(),
        verified_blocks: sh.verified_blocks,
        orphans_finished: sh.orphans_finished,
        dropped: sh.dropped,
        delayed: sh.delayed,
        stalled: sh.stalled,
    })
}

/// Seeds that once failed: a client's write orphaned by its crash and finished by the primary
/// after the restarted client's newer write (the model now keeps such writes open until the
/// servers answer them). And seed 72, the one that fails when the primary's deduplication of
/// retried requests is removed (kept since the fixed seeds stopped reaching it).
const REGRESSIONS: [u64; 12] = [
    72,
    6100000000000000304,
    6100000000000000406,
    6100000000000000708,
    6100000000000000751,
    6100000000000000770,
    6100000000000001050,
    6100000000000001395,
    6100000000000001620,
    6100000000000001955,
    6100000000000001961,
    6100000000000001987,
];

/// The long schedules' share of the test command: 10 fixed seeds, then fresh ones for 45 s
/// (about 25 on two cores; `scripts/campaign.sh` runs 10^5).
const BUDGET: Budget = Budget {
    seconds: 45.0,
    least: 10,
};

#[test]
fn sierra_keeps_every_acknowledged_write_through_gear_shifts_and_failures() {
    let schedules = Schedules::from_env("SIERRA", &REGRESSIONS, 10, BUDGET);
    check(&schedules, "sierra simulation", run);
}

/// Short schedules (four seconds of faults, a twelve-second quiet period): 40 fixed seeds,
/// then fresh ones for 45 s (about 150 on two cores). `SIERRA_SHORT_SEED`,
/// `SIERRA_SHORT_SCHEDULES`, `SIERRA_SHORT_SECONDS`, `SIERRA_SHORT_BASE_SEED` and
/// `SIERRA_SHORT_FIXED` as for the long schedules.
/// Short seeds that once failed (campaign on 7200000000000000000 + 2000·k): a rebuild the MDS
/// ended or replaced while one of its pieces was draining or being read left the base writes
/// held over that piece waiting for ever (a reclaim never finished: 4 KiB still logged after
/// the quiet period). 6079397473711832957, …449 and …691 fail without the store's fencing (3 of 1,573 fresh
/// schedules), 7995176825174970720 without the secondaries' (1 of 524; 0 of 1,564 in the next
/// run): a stalled or deposed primary's log writes or replicated writes land after the next
/// primary's newer ones.
const SHORT_REGRESSIONS: [u64; 7] = [
    7200000000000015982,
    7200000000000019506,
    7200000000000019942,
    6079397473711832957,
    6079397473711833449,
    6079397473711833691,
    7995176825174970720,
];

const SHORT_BUDGET: Budget = Budget {
    seconds: 45.0,
    least: 40,
};

/// A read went back in time (1 of 1,693 short schedules, first seed 5824628507400813628, before
/// stalls existed): a write retried for 0.9 s failed its base write and was off-loaded while a
/// newer one, already off-loaded over it, kept the block in the map; the loggers that took the
/// failed one held a copy newer by version and answered reads with it, the third (which missed
/// it) with the newer write. A failed base write now wins whole. With the old rule put back,
/// these three of 1,604 short schedules without stalls fail on today's code (each change to the
/// cores moves the schedules, so the seeds were found again); they run without stalls.
#[test]
fn a_failed_base_write_does_not_make_reads_go_back() {
    let shape = Shape {
        stalls: false,
        ..SHORT
    };
    for seed in [
        1110906683088457086,
        1110906683088457191,
        1110906683088458215,
    ] {
        if let Err(e) = run_shaped(seed, shape) {
            panic!("seed {seed}: {e}");
        }
    }
}

#[test]
fn sierra_keeps_every_acknowledged_write_in_short_schedules() {
    let schedules = Schedules::from_env("SIERRA_SHORT", &SHORT_REGRESSIONS, 40, SHORT_BUDGET);
    check(&schedules, "sierra simulation, short schedules", run_short);
}

/// Runs the schedules, fails naming every failed seed and how to replay the first, and prints
/// the counts.
fn check(schedules: &Schedules, name: &str, run: fn(u64) -> Result<Outcome, String>) {
    let prefix = schedules.prefix.as_str();
    let ran = schedules.run(run);
    let ok: Vec<&Outcome> = ran
        .results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .collect();
    let total = |f: fn(&Outcome) -> u64| ok.iter().map(|o| f(o)).sum::<u64>();
    schedules.summary(
        &ran,
        &[
            ("crashes", total(|o| o.crashes as u64)),
            ("reordered", total(|o| o.reordered)),
            ("stalled", total(|o| o.stalled)),
            ("writes_acked", total(|o| o.counts.writes_acked)),
            ("reads_checked", total(|o| o.counts.reads_checked)),
            ("blocks_verified", total(|o| o.verified_blocks)),
        ],
    );
    let outcomes = all_succeeded(
        &ran.results,
        prefix,
        &format!(
            "cargo nextest run -p cordillera-gears --test simulation {} --no-capture",
            if prefix == "SIERRA" {
                "sierra_keeps_every_acknowledged_write_through"
            } else {
                "short_schedules"
            }
        ),
    );
    let sum = |f: fn(&Outcome) -> u64| outcomes.iter().map(|o| f(o)).sum::<u64>();
    println!(
        "{name}: {} schedules (g_min 1: {}, 2: {}), {} crashes, {} MDS restarts, {} permanent failures ({} groups rebuilt), {} writes acknowledged ({} failed with an error), {} reads checked ({} failed), {} client retries, {} primary migrations, {} reassignments after failures, {} standbys ({} messages lost to standby), {} logged writes, {} bytes reclaimed, {} blocks read back at the end, {} messages dropped and {} delayed, {} writes of crashed clients finished by servers after the crash",
        outcomes.len(),
        outcomes.iter().filter(|o| o.g_min == 1).count(),
        outcomes.iter().filter(|o| o.g_min == 2).count(),
        sum(|o| o.crashes as u64),
        sum(|o| o.mds_crash as u64),
        sum(|o| o.permanent_failure as u64),
        sum(|o| o.rebuilds_done),
        sum(|o| o.counts.writes_acked),
        sum(|o| o.counts.writes_failed),
        sum(|o| o.counts.reads_checked),
        sum(|o| o.counts.reads_failed),
        sum(|o| o.counts.client_retries),
        sum(|o| o.migrations),
        sum(|o| o.reassignments),
        sum(|o| o.standbys),
        sum(|o| o.lost_to_standby),
        sum(|o| o.logged_writes),
        sum(|o| o.reclaimed_bytes),
        sum(|o| o.verified_blocks),
        sum(|o| o.dropped),
        sum(|o| o.delayed),
        sum(|o| o.orphans_finished),
    );
    assert!(sum(|o| o.counts.writes_acked) > 0);
}

#[test]
fn one_schedule_logs_and_reclaims() {
    let outcome = run(0).unwrap_or_else(|e| panic!("schedule 0: {e}"));
    println!("{outcome:?}");
    assert!(outcome.counts.writes_acked > 0);
}
