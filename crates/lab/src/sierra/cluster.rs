//! Sierra's testbed on the simulator (§4.3): the real cores — the MDS, chunk servers, loggers
//! (our versioned store) and object clients — as nodes of a [`World`], with the chunk servers'
//! and loggers' disks on a calibrated preset, the testbed's network (1 Gbps to a top-of-rack
//! switch, 10 Gbps uplinks), and standby and wake-up on the power controller.
//!
//! Replay clients issue a trace's requests open loop at their trace times (volume → object, as
//! the paper's virtual disks); closed-loop clients keep a number of requests outstanding
//! (§4.6's microbenchmarks). The MDS shifts gears at the times it is given. Payloads are zeros:
//! the simulated disks keep nothing for zero sectors, so memory does not grow with the data
//! written, and the cores move, replicate, log and reclaim them as any other data.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use serde::Serialize;

use cordillera_gears::client::{ClientConfig, ObjectClient};
use cordillera_gears::layout::Layout;
use cordillera_gears::mds::{Mds, MdsConfig, MdsStats};
use cordillera_gears::model::{GroupId, ObjectId, ServerId};
use cordillera_gears::protocol::{Endpoint, Message};
use cordillera_gears::server::{
    ChunkIo, ChunkIoDone, ChunkServer, LoggerInfo, ServerConfig, ServerStats,
};
use cordillera_host::{DiskPort, Durability};
use cordillera_sim::histogram::Histogram;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::power::PowerParams;
use cordillera_sim::presets;
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, PowerRequest, World, WorldBuilder};
use cordillera_vstore::store::{Config as StoreConfig, DiskDone, DiskOp, Reply, Request, Store};

const S: Nanos = 1_000_000_000;

/// A cluster to build.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub layout: Layout,
    /// Dedicated loggers, one per rack in turn (none: the baseline, which never logs).
    pub loggers: usize,
    pub clients: usize,
    pub chunk_bytes: u64,
    /// Objects to create before anything else, by size (object i is `ObjectId(i)`).
    pub objects: Vec<u64>,
    /// Gear shifts: (time, gear, gear-group rotation).
    pub gears: Vec<(Nanos, usize, Vec<usize>)>,
    /// The disk preset of chunk servers and loggers.
    pub preset: String,
    pub power: PowerParams,
    pub log_bytes: u64,
    /// Reclaim jobs at once per chunk server.
    pub reclaim_jobs: usize,
    /// The clients' rack (none: client i in rack i mod racks).
    pub client_rack: Option<usize>,
    /// A silent server is declared failed (and its data rebuilt) after this long.
    pub permanent_after_ns: Nanos,
    /// Bytes a rebuild copies per step.
    pub rebuild_piece_bytes: u64,
    pub seed: u64,
}

impl ClusterSpec {
    /// Sierra's testbed defaults around a layout: 9 clients, 1 MB chunks, `sierra-1tb`
    /// disks, the MDS's 15-minute wait before a rebuild.
    pub fn new(layout: Layout, loggers: usize, objects: Vec<u64>) -> ClusterSpec {
        ClusterSpec {
            layout,
            loggers,
            clients: 9,
            chunk_bytes: 1 << 20,
            objects,
            gears: Vec::new(),
            preset: super::SERVER_PRESET.into(),
            power: PowerParams::default(),
            log_bytes: 100 << 30,
            reclaim_jobs: 4,
            client_rack: None,
            permanent_after_ns: MdsConfig::new(1 << 20).permanent_after_ns,
            rebuild_piece_bytes: 1 << 20,
            seed: 1,
        }
    }
}

/// One request of a replay: at `at` (simulated time), on object `object`.
#[derive(Clone, Copy, Debug)]
pub struct Replayed {
    pub at: Nanos,
    pub client: usize,
    pub object: u64,
    pub offset_bytes: u64,
    pub length_bytes: u64,
    pub write: bool,
}

/// What a closed-loop client does (§4.6): `outstanding` requests of `request_bytes` on its
/// object, sequential or at random.
#[derive(Clone, Copy, Debug)]
pub struct ClosedLoop {
    pub write: bool,
    pub sequential: bool,
    pub request_bytes: u64,
    pub outstanding: usize,
}

/// What the nodes send: Sierra's protocol, and the log clients' requests to loggers.
#[derive(Clone, Debug, Hash)]
pub enum Msg {
    Sierra(Message),
    Log {
        id: u64,
        request: HashedById<Request>,
    },
    LogReply {
        id: u64,
        reply: HashedById<Reply>,
        load: u64,
    },
    /// A chunk server closes its client connections as it goes into standby (TCP's FIN).
    Closed,
}

/// A payload that enters the run hash by its message id only (the data are zeros).
#[derive(Clone, Debug)]
pub struct HashedById<T>(pub T);

impl<T> Hash for HashedById<T> {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

fn msg_bytes(m: &Msg) -> u64 {
    match m {
        Msg::Sierra(m) => m.wire_bytes(),
        Msg::Closed => 64,
        Msg::Log { request, .. } => {
            64 + match &request.0 {
                Request::Write { data, .. } => data.len() as u64,
                _ => 0,
            }
        }
        Msg::LogReply { reply, .. } => {
            64 + match &reply.0 {
                Reply::Read(pieces) => pieces.iter().map(|(_, d)| d.len() as u64).sum(),
                Reply::ReadAny(Some((_, d))) => d.len() as u64,
                _ => 0,
            }
        }
    }
}

/// Time-weighted count of a quantity (a disk queue's length).
#[derive(Clone, Copy, Debug, Default)]
pub struct Integral {
    pub value: u64,
    pub since: Nanos,
    /// Σ value × time, in ns.
    pub area: u128,
}

impl Integral {
    fn set(&mut self, now: Nanos, value: u64) {
        self.area += self.value as u128 * (now.saturating_sub(self.since)) as u128;
        self.since = now;
        self.value = value;
    }

    /// The area up to `now`.
    pub fn area_at(&self, now: Nanos) -> u128 {
        self.area + self.value as u128 * (now.saturating_sub(self.since)) as u128
    }
}

/// What the nodes report to the driver as they run.
#[derive(Default)]
pub struct Observed {
    /// Response times of requests by the minute they were issued in.
    pub minutes: Vec<Histogram>,
    pub completed: u64,
    pub failed: u64,
    /// The first few failures, described.
    pub failures: Vec<String>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub created: usize,
    /// Groups whose primary released and not yet taken up elsewhere: release time.
    releasing: HashMap<GroupId, Nanos>,
    /// Per completed migration: the group's window without a primary (ns), and when it closed.
    pub migrations: Vec<(Nanos, Nanos)>,
    /// Requests waiting to be issued, per client.
    queues: Vec<VecDeque<Replayed>>,
    /// Bytes of the requests each client completed.
    pub client_bytes: Vec<u64>,
}

impl Observed {
    fn record(&mut self, issued: Nanos, latency: Nanos) {
        let minute = (issued / (60 * S)) as usize;
        if self.minutes.len() <= minute {
            self.minutes.resize_with(minute + 1, Histogram::new);
        }
        self.minutes[minute].record(latency);
        self.completed += 1;
    }

    /// Response times of requests issued in `[from, to)` (whole minutes).
    pub fn window(&self, from: Nanos, to: Nanos) -> Histogram {
        let mut h = Histogram::new();
        let (a, b) = ((from / (60 * S)) as usize, to.div_ceil(60 * S) as usize);
        for m in self.minutes.iter().take(b).skip(a) {
            h.merge(m);
        }
        h
    }
}

struct ServerPart {
    server: ChunkServer,
    disk: DiskPort,
    /// Each group's place on this disk, in the order the groups were first used.
    slots: HashMap<GroupId, u64>,
    sleep_asked: bool,
}

struct LoggerPart {
    store: Store,
    disk: DiskPort,
    open: u64,
    senders: HashMap<u64, (NodeId, u64)>,
    next_tag: u64,
    /// The disk's queue (submitted and not completed).
    queue: Integral,
}

struct ClientPart {
    index: usize,
    client: ObjectClient,
    /// Requests in flight: when issued (`Nanos::MAX`: a creation) and their bytes.
    ops: HashMap<u64, (Nanos, u64)>,
    next_op: u64,
    next_tick: Nanos,
    closed: Option<ClosedLoop>,
    next_offset: u64,
    rng: SimRng,
    objects: Vec<u64>,
    /// Objects created so far (client 0 creates them all).
    creating: usize,
}

enum Part {
    Mds(Box<Mds>, VecDeque<(Nanos, usize, Vec<usize>)>),
    Server(Box<ServerPart>),
    Logger(Box<LoggerPart>),
    Client(Box<ClientPart>),
}

pub struct Node {
    part: Part,
    observed: Rc<RefCell<Observed>>,
    layout_nodes: Layout0,
    out: VecDeque<Outgoing<Msg>>,
    io: VecDeque<IoCommand>,
    power: VecDeque<PowerRequest>,
    wake_ns: Nanos,
    group_bytes: u64,
    writes_since_flush: u32,
    clients: usize,
}

/// The driver's own flushes carry this id bit (the disk ports' ids never do).
const HOUSEKEEPING: u64 = 1 << 61;

/// Where the nodes are: 0 the MDS, then the servers, the loggers and the clients.
#[derive(Clone, Copy, Debug)]
struct Layout0 {
    servers: usize,
    loggers: usize,
}

impl Layout0 {
    fn node_of(&self, e: Endpoint) -> NodeId {
        match e {
            Endpoint::Mds => 0,
            Endpoint::Server(s) => 1 + s as usize,
            Endpoint::Client(c) => 1 + self.servers + self.loggers + c as usize,
        }
    }

    fn endpoint_of(&self, node: NodeId) -> Endpoint {
        if node == 0 {
            Endpoint::Mds
        } else if node <= self.servers {
            Endpoint::Server((node - 1) as ServerId)
        } else {
            Endpoint::Client((node - 1 - self.servers - self.loggers) as u32)
        }
    }

    fn logger0(&self) -> NodeId {
        1 + self.servers
    }

    fn client0(&self) -> NodeId {
        1 + self.servers + self.loggers
    }
}

impl Node {
    fn send(&mut self, to: NodeId, message: Msg) {
        let bytes = msg_bytes(&message);
        self.out.push_back(Outgoing { to, message, bytes });
    }

    fn pump(&mut self, now: Nanos) {
        let nodes = self.layout_nodes;
        loop {
            let mut progress = false;
            let mut sends = Vec::new();
            match &mut self.part {
                Part::Mds(mds, _) => {
                    while let Some((to, message)) = mds.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    while let Some(s) = mds.poll_wake() {
                        self.power.push_back(PowerRequest::Wake {
                            node: 1 + s as usize,
                            after_ns: self.wake_ns,
                        });
                    }
                }
                Part::Server(p) => {
                    while let Some((to, message)) = p.server.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    while let Some((logger, id, request)) = p.server.poll_store() {
                        sends.push((
                            logger as NodeId,
                            Msg::Log {
                                id,
                                request: HashedById(request),
                            },
                        ));
                    }
                    while let Some(io) = p.server.poll_io() {
                        let mut slot = |g: GroupId| {
                            let next = p.slots.len() as u64;
                            *p.slots.entry(g).or_insert(next) * self.group_bytes
                        };
                        let op = match io {
                            ChunkIo::Read {
                                id,
                                group,
                                offset_bytes,
                                length_bytes,
                            } => DiskOp::Read {
                                id,
                                offset_bytes: slot(group) + offset_bytes,
                                length_bytes,
                            },
                            ChunkIo::Write {
                                id,
                                group,
                                offset_bytes,
                                data,
                            } => DiskOp::Write {
                                id,
                                offset_bytes: slot(group) + offset_bytes,
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
                        for c in 0..self.clients {
                            sends.push((nodes.client0() + c, Msg::Closed));
                        }
                        self.power.push_back(PowerRequest::Sleep);
                    }
                }
                Part::Logger(l) => {
                    while let Some(op) = l.store.poll_disk() {
                        if let Some(command) = l.disk.submit(op) {
                            self.io.push_back(command);
                            let q = l.queue.value + 1;
                            l.queue.set(now, q);
                        }
                    }
                    while let Some(done) = l.disk.poll_ready() {
                        l.store.handle_disk(now, done);
                        progress = true;
                    }
                    while let Some((tag, reply)) = l.store.poll_reply() {
                        if let Some((to, id)) = l.senders.remove(&tag) {
                            l.open -= 1;
                            sends.push((
                                to,
                                Msg::LogReply {
                                    id,
                                    reply: HashedById(reply),
                                    load: l.open,
                                },
                            ));
                        }
                    }
                }
                Part::Client(c) => {
                    while let Some((to, message)) = c.client.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    let mut observed = self.observed.borrow_mut();
                    while let Some((id, result)) = c.client.poll_done() {
                        progress = true;
                        let Some((issued, bytes)) = c.ops.remove(&id) else {
                            continue;
                        };
                        match result {
                            Ok(_) if issued == Nanos::MAX => observed.created += 1,
                            Ok(_) => {
                                observed.record(issued, now - issued);
                                observed.client_bytes[c.index] += bytes;
                            }
                            Err(e) => {
                                observed.failed += 1;
                                if observed.failures.len() < 8 {
                                    observed
                                        .failures
                                        .push(format!("client {} at {now} ns: {e}", c.index));
                                }
                            }
                        }
                    }
                    drop(observed);
                    if issue(c, &self.observed, now) {
                        progress = true;
                    }
                }
            }
            for (to, message) in sends {
                progress = true;
                self.send(to, message);
            }
            if !progress {
                break;
            }
        }
    }
}

/// Starts what is due: object creations (client 0, at start), replayed requests whose time has
/// come, closed-loop requests while there is room.
fn issue(c: &mut ClientPart, observed: &Rc<RefCell<Observed>>, now: Nanos) -> bool {
    let mut any = false;
    while c.index == 0 && c.creating < c.objects.len() {
        let id = c.next_op;
        c.next_op += 1;
        c.ops.insert(id, (Nanos::MAX, 0));
        c.client
            .create(now, id, ObjectId(c.creating as u64), c.objects[c.creating]);
        c.creating += 1;
        any = true;
    }
    let mut ob = observed.borrow_mut();
    while let Some(r) = ob.queues[c.index].front().copied() {
        if r.at > now {
            break;
        }
        ob.queues[c.index].pop_front();
        let id = c.next_op;
        c.next_op += 1;
        c.ops.insert(id, (r.at, r.length_bytes));
        if r.write {
            ob.bytes_written += r.length_bytes;
            let data = vec![0u8; r.length_bytes as usize];
            c.client
                .write(now, id, ObjectId(r.object), r.offset_bytes, data);
        } else {
            ob.bytes_read += r.length_bytes;
            c.client
                .read(now, id, ObjectId(r.object), r.offset_bytes, r.length_bytes);
        }
        any = true;
    }
    if let (Some(cl), true) = (c.closed, ob.created == c.objects.len()) {
        let object = c.index as u64;
        let size = c.objects_size(object);
        let units = (size / cl.request_bytes).max(1);
        while c.ops.len() < cl.outstanding {
            let offset = if cl.sequential {
                let o = c.next_offset;
                c.next_offset = (c.next_offset + 1) % units;
                o
            } else {
                c.rng.below(units)
            } * cl.request_bytes;
            let id = c.next_op;
            c.next_op += 1;
            c.ops.insert(id, (now, cl.request_bytes));
            if cl.write {
                ob.bytes_written += cl.request_bytes;
                let data = vec![0u8; cl.request_bytes as usize];
                c.client.write(now, id, ObjectId(object), offset, data);
            } else {
                ob.bytes_read += cl.request_bytes;
                c.client
                    .read(now, id, ObjectId(object), offset, cl.request_bytes);
            }
            any = true;
        }
    }
    any
}

impl ClientPart {
    fn objects_size(&self, object: u64) -> u64 {
        self.objects.get(object as usize).copied().unwrap_or(0)
    }
}

impl Core for Node {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        if let Part::Client(c) = &mut self.part {
            c.next_tick = now;
        }
        self.pump(now);
    }

    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Msg) {
        let nodes = self.layout_nodes;
        match (&mut self.part, message) {
            (Part::Mds(mds, _), Msg::Sierra(message)) => {
                if let Message::ReleasedPrimary { group, .. } = &message {
                    self.observed.borrow_mut().releasing.insert(*group, now);
                }
                mds.handle_message(now, nodes.endpoint_of(from), message)
            }
            (Part::Server(p), Msg::Sierra(message)) => {
                if let Message::BecomePrimary { view, .. } = &message {
                    let mut ob = self.observed.borrow_mut();
                    if let Some(t) = ob.releasing.remove(&view.group) {
                        ob.migrations.push((now - t, now));
                    }
                }
                p.server
                    .handle_message(now, nodes.endpoint_of(from), message)
            }
            (Part::Server(p), Msg::LogReply { id, reply, load }) => {
                p.server.handle_store(now, id, reply.0, Some(load))
            }
            (Part::Logger(l), Msg::Log { id, request }) => {
                l.open += 1;
                l.next_tag += 1;
                l.senders.insert(l.next_tag, (from, id));
                l.store.handle_request(now, l.next_tag, request.0);
            }
            (Part::Client(c), Msg::Sierra(message)) => {
                c.client
                    .handle_message(now, nodes.endpoint_of(from), message)
            }
            (Part::Client(c), Msg::Closed) => {
                if let Endpoint::Server(s) = nodes.endpoint_of(from) {
                    c.client.server_gone(now, s);
                }
            }
            _ => {}
        }
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Nanos) {
        match &mut self.part {
            Part::Mds(mds, gears) => {
                while gears.front().is_some_and(|(t, _, _)| *t <= now) {
                    let (_, gear, rotation) = gears.pop_front().expect("a gear");
                    mds.set_gear(now, gear, &rotation);
                }
                if mds.poll_timeout().is_some_and(|t| t <= now) {
                    mds.handle_timeout(now);
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
                    // The driver fills the queues a second ahead; the client looks every second.
                    c.next_tick = (now / S + 1) * S;
                }
            }
        }
        self.pump(now);
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        match &done {
            IoDone::Flushed { id } if id & HOUSEKEEPING != 0 => return,
            IoDone::Written { .. } => {
                // Bounds the simulated disk's list of unflushed writes (durability is
                // write-through: the ports answer flushes at once).
                self.writes_since_flush += 1;
                if self.writes_since_flush >= 64 {
                    self.writes_since_flush = 0;
                    self.io.push_back(IoCommand::Flush { id: HOUSEKEEPING });
                }
            }
            _ => {}
        }
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
                let q = l.queue.value.saturating_sub(1);
                l.queue.set(now, q);
                if let Some(done) = l.disk.complete(done, &mut then) {
                    l.store.handle_disk(now, done);
                }
            }
            _ => {}
        }
        if let Part::Logger(l) = &mut self.part {
            let q = l.queue.value + then.len() as u64;
            l.queue.set(now, q);
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
        match &self.part {
            Part::Mds(mds, gears) => {
                let gear = gears.front().map(|(t, _, _)| *t);
                [mds.poll_timeout(), gear].into_iter().flatten().min()
            }
            Part::Server(p) => p.server.poll_timeout(),
            Part::Logger(l) => l.store.poll_timeout(),
            Part::Client(c) => {
                let next = self.observed.borrow().queues[c.index].front().map(|r| r.at);
                [c.client.poll_timeout(), Some(c.next_tick), next]
                    .into_iter()
                    .flatten()
                    .min()
            }
        }
    }
}

/// A cluster running on the simulator.
pub struct Cluster {
    pub world: World<Node>,
    pub observed: Rc<RefCell<Observed>>,
    nodes: Layout0,
    pub spec: ClusterSpec,
}

/// A snapshot of the cluster's counters at one time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    pub at_ns: Nanos,
    pub completed: u64,
    pub failed: u64,
    pub logged_bytes_now: u64,
    pub logged_bytes_total: u64,
    pub reclaimed_bytes: u64,
    pub client_retries: u64,
    pub client_timeouts: u64,
    /// Client requests the chunk servers refused (not primary, lease, unavailable, busy).
    pub refused: u64,
    pub mds: MdsStatsCopy,
    /// Σ over loggers of the disk queue's area (ns × requests).
    #[serde(skip)]
    pub logger_queue_area: u128,
    /// Per server node: time in standby and disk busy time so far (ns).
    pub asleep_ns: Vec<Nanos>,
    pub busy_ns: Vec<Nanos>,
    pub logger_busy_ns: Vec<Nanos>,
    pub asleep_now: usize,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MdsStatsCopy {
    pub migrations: u64,
    pub standbys: u64,
    pub wakes: u64,
    pub reassignments: u64,
    pub rebuilds_started: u64,
    pub rebuilds_done: u64,
}

impl From<MdsStats> for MdsStatsCopy {
    fn from(s: MdsStats) -> MdsStatsCopy {
        MdsStatsCopy {
            migrations: s.migrations,
            standbys: s.standbys,
            wakes: s.wakes,
            reassignments: s.reassignments,
            rebuilds_started: s.rebuilds_started,
            rebuilds_done: s.rebuilds_done,
        }
    }
}

impl Cluster {
    pub fn new(spec: ClusterSpec, closed: Vec<Option<ClosedLoop>>) -> Result<Cluster, String> {
        let servers = spec.layout.topology.racks_of_servers.len();
        let nodes = Layout0 {
            servers,
            loggers: spec.loggers,
        };
        let racks = spec.layout.topology.rack_count();
        let total = 1 + servers + spec.loggers + spec.clients;
        let chunks: u64 = spec
            .objects
            .iter()
            .map(|s| s.div_ceil(spec.chunk_bytes))
            .sum();
        let groups = spec.layout.unit_count() as u64;
        // Chunks are placed in groups at random: room for the mean and six standard deviations.
        let mean = chunks.div_ceil(groups.max(1));
        let group_bytes = (mean + 6 * (mean as f64).sqrt().ceil() as u64 + 64) * spec.chunk_bytes;
        let groups_per_server = groups * spec.layout.replicas() as u64 / servers.max(1) as u64;
        let capacity = presets::device(&spec.preset)?.capacity_bytes();
        // Rebuilds add groups to a server: room for a third more.
        if (groups_per_server + groups_per_server / 3 + 1) * group_bytes > capacity {
            return Err(format!(
                "{} objects of {:.1} GB in all do not fit on {servers} chunk servers of {:.0} GB ({})",
                spec.objects.len(),
                spec.objects.iter().sum::<u64>() as f64 / 1e9,
                capacity as f64 / 1e9,
                spec.preset
            ));
        }
        let observed = Rc::new(RefCell::new(Observed {
            queues: vec![VecDeque::new(); spec.clients],
            client_bytes: vec![0; spec.clients],
            ..Observed::default()
        }));
        let loggers: Vec<LoggerInfo> = (0..spec.loggers)
            .map(|i| LoggerInfo {
                id: (nodes.logger0() + i) as u64,
                rack: (i % racks) as u32,
                server: None,
            })
            .collect();
        let mds_config = MdsConfig {
            seed: spec.seed,
            permanent_after_ns: spec.permanent_after_ns,
            ..MdsConfig::new(spec.chunk_bytes)
        };
        let racks_of_servers = spec.layout.topology.racks_of_servers.clone();
        let wake_ns = spec.power.wake_from_standby_ns;
        let new_core = {
            let observed = observed.clone();
            let spec = spec.clone();
            let mut gears = Some(VecDeque::from(spec.gears.clone()));
            let mut closed = closed;
            closed.resize(spec.clients, None);
            move |id: NodeId| -> Node {
                let part = if id == 0 {
                    Part::Mds(
                        Box::new(Mds::new(mds_config.clone(), &spec.layout, 0)),
                        gears.take().expect("the MDS starts once"),
                    )
                } else if id < nodes.logger0() {
                    let mut config = ServerConfig::new(
                        (id - 1) as ServerId,
                        spec.chunk_bytes,
                        group_bytes,
                        racks_of_servers.clone(),
                        loggers.clone(),
                    );
                    config.reclaim_jobs_max = spec.reclaim_jobs;
                    config.rebuild_piece_bytes = spec.rebuild_piece_bytes;
                    Part::Server(Box::new(ServerPart {
                        server: ChunkServer::new(config, 1, 0),
                        disk: DiskPort::new(0, 0, Durability::WriteThrough),
                        slots: HashMap::new(),
                        sleep_asked: false,
                    }))
                } else if id < nodes.client0() {
                    let store = Store::format(
                        StoreConfig::new(spec.log_bytes),
                        id as u128,
                        spec.seed ^ id as u64,
                    );
                    Part::Logger(Box::new(LoggerPart {
                        store,
                        disk: DiskPort::new(0, 0, Durability::WriteThrough),
                        open: 0,
                        senders: HashMap::new(),
                        next_tag: 0,
                        queue: Integral::default(),
                    }))
                } else {
                    let index = id - nodes.client0();
                    Part::Client(Box::new(ClientPart {
                        index,
                        client: ObjectClient::new(ClientConfig::new(index as u32)),
                        ops: HashMap::new(),
                        next_op: 1,
                        next_tick: 0,
                        closed: closed[index],
                        next_offset: 0,
                        rng: SimRng::new(spec.seed, 50 + index as u64),
                        objects: spec.objects.clone(),
                        creating: 0,
                    }))
                };
                Node {
                    part,
                    observed: observed.clone(),
                    layout_nodes: nodes,
                    out: VecDeque::new(),
                    io: VecDeque::new(),
                    power: VecDeque::new(),
                    wake_ns,
                    group_bytes,
                    writes_since_flush: 0,
                    clients: spec.clients,
                }
            }
        };
        let mut racks_of_nodes = vec![0; total];
        for s in 0..servers {
            racks_of_nodes[1 + s] = spec.layout.topology.racks_of_servers[s] as usize;
        }
        for i in 0..spec.loggers {
            racks_of_nodes[nodes.logger0() + i] = i % racks;
        }
        for c in 0..spec.clients {
            racks_of_nodes[nodes.client0() + c] = spec.client_rack.unwrap_or(c % racks);
        }
        let params = NetworkParams {
            racks_of_nodes,
            ..NetworkParams::sierra_testbed(1, total)
        };
        let network = Network::new(params, NetworkFaults::default(), SimRng::new(spec.seed, 3));
        let preset = spec.preset.clone();
        let builder = WorldBuilder {
            new_core: Box::new(new_core),
            new_device: Box::new(move |node| {
                let name = if node == 0 || node >= nodes.client0() {
                    "ssd"
                } else {
                    preset.as_str()
                };
                presets::device(name).expect("a checked preset")
            }),
            crash_model: CrashModel::default(),
            flush_ns: 50_000,
            early_reads: 0.0,
        };
        let world = World::new(builder, network, SimRng::new(spec.seed, 4));
        Ok(Cluster {
            world,
            observed,
            nodes,
            spec,
        })
    }

    /// Runs until every object is created (and the servers hold their primaries).
    pub fn start(&mut self, until: Nanos) -> Result<(), String> {
        let mut t = S;
        while t <= until {
            self.world.run_until(t);
            if self.observed.borrow().created == self.spec.objects.len() {
                return Ok(());
            }
            t += S;
        }
        Err(format!(
            "{} of {} objects created after {} s",
            self.observed.borrow().created,
            self.spec.objects.len(),
            until / S
        ))
    }

    /// Queues requests for their clients (in time order per client).
    pub fn push(&mut self, r: Replayed) {
        self.observed.borrow_mut().queues[r.client].push_back(r);
    }

    pub fn queued(&self) -> usize {
        self.observed.borrow().queues.iter().map(|q| q.len()).sum()
    }

    pub fn run_until(&mut self, t: Nanos) {
        self.world.run_until(t);
    }

    pub fn now(&self) -> Nanos {
        self.world.now()
    }

    pub fn counters(&self) -> Counters {
        let now = self.world.now();
        let ob = self.observed.borrow();
        let mut c = Counters {
            at_ns: now,
            completed: ob.completed,
            failed: ob.failed,
            ..Counters::default()
        };
        for node in 0..self.world.network.nodes() {
            match self.world.core(node).map(|n| &n.part) {
                Some(Part::Mds(mds, _)) => c.mds = mds.stats().into(),
                Some(Part::Server(p)) => {
                    let stats = p.server.stats();
                    c.logged_bytes_now += p.server.logged_bytes();
                    c.logged_bytes_total += stats.logged_bytes;
                    c.reclaimed_bytes += stats.reclaimed_bytes;
                    c.refused += stats.refused;
                    c.asleep_ns.push(self.world.asleep_ns(node));
                    c.busy_ns.push(self.world.busy_ns(node));
                    c.asleep_now += self.world.is_asleep(node) as usize;
                }
                Some(Part::Logger(l)) => {
                    c.logger_queue_area += l.queue.area_at(now);
                    c.logger_busy_ns.push(self.world.busy_ns(node));
                }
                Some(Part::Client(cl)) => {
                    c.client_retries += cl.client.stats().retries;
                    c.client_timeouts += cl.client.stats().timeouts;
                }
                None => {}
            }
        }
        c
    }

    pub fn servers(&self) -> usize {
        self.nodes.servers
    }

    /// Bytes of the requests each client completed so far.
    pub fn client_bytes_done(&self) -> Vec<u64> {
        self.observed.borrow().client_bytes.clone()
    }

    /// The counters of the chunk servers up now.
    pub fn server_stats(&self) -> Vec<ServerStats> {
        (1..=self.nodes.servers)
            .filter_map(|node| match self.world.core(node).map(|n| &n.part) {
                Some(Part::Server(p)) => Some(p.server.stats()),
                _ => None,
            })
            .collect()
    }

    /// Every chunk server's account of its primaries (for diagnosis).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for node in 1..=self.nodes.servers {
            if let Some(Node {
                part: Part::Server(p),
                ..
            }) = self.world.core(node)
            {
                out.push_str(&format!(
                    "server {} ({:?}, {}):\n{}\n",
                    node - 1,
                    p.server.power(),
                    if self.world.is_asleep(node) {
                        "asleep"
                    } else {
                        "awake"
                    },
                    p.server.describe()
                ));
            }
        }
        out
    }
}

/// Energy of the chunk servers and loggers between two snapshots (J): standby power while in
/// standby, idle power while up, active power while the disk is busy.
pub fn energy_j(power: &PowerParams, from: &Counters, to: &Counters) -> f64 {
    let span = (to.at_ns - from.at_ns) as f64 / 1e9;
    let mut joules = 0.0;
    for i in 0..to.asleep_ns.len() {
        let asleep = (to.asleep_ns[i] - from.asleep_ns[i]) as f64 / 1e9;
        let busy = to.busy_ns[i].saturating_sub(from.busy_ns[i]) as f64 / 1e9;
        joules += asleep * power.standby_w
            + (span - asleep) * power.idle_w
            + busy.min(span - asleep) * (power.active_w - power.idle_w);
    }
    for i in 0..to.logger_busy_ns.len() {
        let busy = to.logger_busy_ns[i].saturating_sub(from.logger_busy_ns[i]) as f64 / 1e9;
        joules += span * power.idle_w + busy.min(span) * (power.active_w - power.idle_w);
    }
    joules
}
