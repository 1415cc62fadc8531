//! Sierra's nodes on the simulator, written once for the lab's testbed and the seeded
//! simulation tests: the MDS, chunk servers, loggers (our versioned store) and object clients
//! as cores of a [`World`](cordillera_sim::world::World), each moving its core's outputs to
//! the world (messages, disk requests, standby and wake-up) and what the world delivers back to
//! its core.
//!
//! What differs between the lab and the tests is not here but given to it: the clients'
//! workload and checks (a [`ClientApp`]: a trace replay or closed loop in the lab, patterned
//! writes checked against a model in the tests), the disks' durability ([`Durability`](cordillera_host::Durability)), where
//! groups lie on a server's disk ([`GroupPlacement`]), the link faults ([`LinkFaults`]: none in
//! the lab), and whether the MDS's durable state is kept so that a crashed MDS can be restored
//! ([`Shared::new`]'s `persist_mds`). What lasts across a node's crash — its lives, the MDS's
//! durable state, the gear plan, the servers' placements — is in [`Shared`].
//!
//! Nodes are numbered as [`Nodes`] says: 0 the MDS, then the chunk servers, the loggers and the
//! clients.
//!
//! Modules: `node`, the node at work (its core's outputs to the world, the world's deliveries
//! to its core, restarts); `links`, the link faults (drops, delays, stalls past a lease).

use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use cordillera_gears::client::{ClientError, Done, ObjectClient};
use cordillera_gears::layout::Layout;
use cordillera_gears::mds::persist::{Changes, GroupRecord, ObjectRecord, ServerRecord, Snapshot};
use cordillera_gears::mds::{Mds, MdsConfig, MdsStats};
use cordillera_gears::model::{GroupId, ServerId};
use cordillera_gears::protocol::{Endpoint, Message};
use cordillera_gears::server::{ChunkServer, GroupPlacement, Slots};
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::NodeId;
use cordillera_sim::world::{IoCommand, Outgoing, PowerRequest};
use cordillera_vstore::store::{Reply, Request, Store};

use cordillera_host::DiskPort;

mod links;
mod node;

pub use links::{LinkFaults, Stall};

/// What the nodes send: Sierra's protocol, the log clients' requests to loggers and their
/// replies. `life` is the sender's incarnation; a reply goes to the incarnation `to_life` that
/// asked, and is dropped by any other (a restarted server does not hear its old life's replies).
#[derive(Clone, Debug)]
pub enum Msg {
    Sierra(Message),
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
    /// A chunk server closes its client connections as it goes into standby (TCP's FIN).
    Closed,
}

impl Hash for Msg {
    /// The run's fingerprint: Sierra's messages whole; log traffic by ids, lives and lengths
    /// (its payloads follow from the requests that caused them).
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Msg::Sierra(m) => (0u8, m).hash(state),
            Msg::Log { id, life, request } => {
                (1u8, id, life, std::mem::discriminant(request)).hash(state);
                if let Request::Write { data, .. } = request {
                    data.len().hash(state);
                }
            }
            Msg::LogReply {
                id,
                reply,
                load,
                life,
                to_life,
            } => (2u8, id, load, life, to_life, std::mem::discriminant(reply)).hash(state),
            Msg::Closed => 3u8.hash(state),
        }
    }
}

/// Bytes a message puts on the wire (headers as 64 bytes).
pub fn msg_bytes(m: &Msg) -> u64 {
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

/// Where the nodes are: 0 the MDS, then the servers, the loggers and the clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nodes {
    pub servers: usize,
    pub loggers: usize,
    pub clients: usize,
}

impl Nodes {
    pub const MDS: NodeId = 0;

    pub fn server(&self, s: ServerId) -> NodeId {
        1 + s as usize
    }

    pub fn logger0(&self) -> NodeId {
        1 + self.servers
    }

    pub fn client0(&self) -> NodeId {
        1 + self.servers + self.loggers
    }

    pub fn total(&self) -> usize {
        self.client0() + self.clients
    }

    pub fn node_of(&self, e: Endpoint) -> NodeId {
        match e {
            Endpoint::Mds => Nodes::MDS,
            Endpoint::Server(s) => self.server(s),
            Endpoint::Client(c) => self.client0() + c as usize,
        }
    }

    /// The endpoint of a node of Sierra's protocol (the MDS, a server or a client).
    pub fn endpoint_of(&self, node: NodeId) -> Endpoint {
        assert!(
            node < self.logger0() || node >= self.client0(),
            "node {node} is a logger, outside Sierra's protocol"
        );
        if node == Nodes::MDS {
            Endpoint::Mds
        } else if node <= self.servers {
            Endpoint::Server((node - 1) as ServerId)
        } else {
            Endpoint::Client((node - self.client0()) as u32)
        }
    }

    /// Each node's rack for the network: servers as the layout places them, loggers and
    /// clients as given, the MDS in rack 0.
    pub fn racks(
        &self,
        racks_of_servers: &[u32],
        logger_rack: impl Fn(usize) -> usize,
        client_rack: impl Fn(usize) -> usize,
    ) -> Vec<usize> {
        assert_eq!(racks_of_servers.len(), self.servers, "a rack per server");
        let mut racks = vec![0; self.total()];
        for (s, rack) in racks_of_servers.iter().enumerate() {
            racks[1 + s] = *rack as usize;
        }
        for i in 0..self.loggers {
            racks[self.logger0() + i] = logger_rack(i);
        }
        for c in 0..self.clients {
            racks[self.client0() + c] = client_rack(c);
        }
        racks
    }
}

/// What a client node does with its object client: the workload, and what it makes of the
/// answers. The node moves the client core's messages; the app issues requests and hears how
/// they ended.
pub trait ClientApp {
    /// The node starts (`life` 1) or restarts after a crash (its requests in flight ended with
    /// it).
    fn start(&mut self, now: Nanos, life: u64);
    /// A message of Sierra's protocol about to reach the client core.
    fn observe(&mut self, _now: Nanos, _message: &Message) {}
    /// One of the app's requests ended.
    fn done(&mut self, now: Nanos, id: u64, result: Result<Done, ClientError>);
    /// Issues what is due; true if anything was.
    fn issue(&mut self, client: &mut ObjectClient, now: Nanos) -> bool;
    /// After each round of the node's work (what a crash now would leave, say).
    fn settled(&mut self, _client: &ObjectClient) {}
    /// The app's next timer.
    fn poll_timeout(&self) -> Option<Nanos>;
    fn handle_timeout(&mut self, now: Nanos);
}

/// A time-weighted quantity (a disk queue's length).
#[derive(Clone, Copy, Debug, Default)]
pub struct Integral {
    pub value: u64,
    pub since: Nanos,
    /// Σ value × time, in ns.
    pub area: u128,
}

impl Integral {
    pub fn set(&mut self, now: Nanos, value: u64) {
        self.area += self.value as u128 * (now.saturating_sub(self.since)) as u128;
        self.since = now;
        self.value = value;
    }

    /// The area up to `now`.
    pub fn area_at(&self, now: Nanos) -> u128 {
        self.area + self.value as u128 * (now.saturating_sub(self.since)) as u128
    }
}

/// What lasts across the nodes' crashes, and what they report as they run.
pub struct Shared {
    pub nodes: Nodes,
    /// Each node's starts so far (its current life).
    pub lives: Vec<u64>,
    /// How long a server takes to wake from standby.
    pub wake_ns: Nanos,
    /// Each server's groups on its disk (kept as the disk is).
    placements: Vec<GroupPlacement>,
    /// The gear plan still to come: (time, gear, gear-group rotation); and the last gear set
    /// (a restarted MDS is put in it again).
    pub gears: VecDeque<(Nanos, usize, Vec<usize>)>,
    pub gear: Option<(usize, Vec<usize>)>,
    /// The MDS's durable state as its driver stored it (each step's changes before any of its
    /// messages left), what a restarted MDS starts from; `None` when not kept.
    pub mds_store: Option<Snapshot>,
    /// The MDS's counts from its earlier lives, and of its current one (when kept).
    pub mds_stats_before: MdsStats,
    pub mds_stats_now: MdsStats,
    pub links: LinkFaults,
    /// Messages printed as they go (for diagnosis).
    pub trace: bool,
    /// Groups whose primary released and not yet taken up elsewhere: release time.
    releasing: FxHashMap<GroupId, Nanos>,
    /// Per completed migration: the group's window without a primary (ns), and when it closed.
    pub migrations: Vec<(Nanos, Nanos)>,
}

impl Shared {
    /// Servers' groups of `group_bytes` placed by `slots`; `persist_mds`: keep the MDS's
    /// durable state (needed to restart it; it costs a pass over its state per step).
    pub fn new(
        nodes: Nodes,
        group_bytes: u64,
        slots: Slots,
        wake_ns: Nanos,
        persist_mds: bool,
    ) -> Shared {
        Shared {
            nodes,
            lives: vec![0; nodes.total()],
            wake_ns,
            placements: (0..nodes.servers)
                .map(|_| GroupPlacement::new(group_bytes, slots))
                .collect(),
            gears: VecDeque::new(),
            gear: None,
            mds_store: persist_mds.then(Snapshot::default),
            mds_stats_before: MdsStats::default(),
            mds_stats_now: MdsStats::default(),
            links: LinkFaults::none(),
            trace: false,
            releasing: FxHashMap::default(),
            migrations: Vec::new(),
        }
    }

    /// A node (re)starts: its life, counted from 1.
    pub fn new_life(&mut self, node: NodeId) -> u64 {
        self.lives[node] += 1;
        self.lives[node]
    }

    /// The MDS's counts over all its lives (its current one as last stored).
    pub fn mds_stats_all(&self, now: MdsStats) -> MdsStats {
        let mut s = self.mds_stats_before;
        add_stats(&mut s, now);
        s
    }
}

/// Adds one life's MDS counts to another's.
pub fn add_stats(to: &mut MdsStats, s: MdsStats) {
    to.migrations += s.migrations;
    to.reassignments += s.reassignments;
    to.suspicions += s.suspicions;
    to.permanent_failures += s.permanent_failures;
    to.rebuilds_started += s.rebuilds_started;
    to.rebuilds_done += s.rebuilds_done;
    to.wakes += s.wakes;
    to.standbys += s.standbys;
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

pub struct MdsPart {
    mds: Mds,
    /// What a restart restores with.
    config: MdsConfig,
    layout: Layout,
}

pub struct ServerPart {
    server: ChunkServer,
    disk: DiskPort,
    life: u64,
    /// The loggers' lives as last heard from: a logger that restarted lost what it held.
    logger_lives: FxHashMap<NodeId, u64>,
    sleep_asked: bool,
}

pub struct LoggerPart {
    store: Store,
    disk: DiskPort,
    life: u64,
    /// Requests taken and not answered (the load in each reply).
    open: u64,
    senders: FxHashMap<u64, (NodeId, u64, u64)>,
    next_tag: u64,
    /// The disk's queue (submitted and not completed).
    queue: Integral,
}

pub struct ClientPart<A> {
    client: ObjectClient,
    app: A,
}

/// The core a node runs.
pub enum Part<A> {
    Mds(Box<MdsPart>),
    Server(Box<ServerPart>),
    Logger(Box<LoggerPart>),
    Client(Box<ClientPart<A>>),
}

impl<A> Part<A> {
    /// The MDS (`config` and `layout` restore it after a crash when its state is kept).
    pub fn mds(config: MdsConfig, layout: &Layout) -> Part<A> {
        Part::Mds(Box::new(MdsPart {
            mds: Mds::new(config.clone(), layout, 0),
            config,
            layout: layout.clone(),
        }))
    }

    pub fn server(server: ChunkServer, disk: DiskPort, life: u64) -> Part<A> {
        Part::Server(Box::new(ServerPart {
            server,
            disk,
            life,
            logger_lives: FxHashMap::default(),
            sleep_asked: false,
        }))
    }

    pub fn logger(store: Store, disk: DiskPort, life: u64) -> Part<A> {
        Part::Logger(Box::new(LoggerPart {
            store,
            disk,
            life,
            open: 0,
            senders: FxHashMap::default(),
            next_tag: 0,
            queue: Integral::default(),
        }))
    }

    pub fn client(client: ObjectClient, app: A) -> Part<A> {
        Part::Client(Box::new(ClientPart { client, app }))
    }
}

/// The driver's own flushes carry this id bit (bounding a write-through disk's list of
/// unflushed writes; the disk ports' ids never carry it).
const HOUSEKEEPING: u64 = 1 << 61;

/// A node of the cluster: one core, and what it has for the world.
pub struct SierraNode<A> {
    id: NodeId,
    part: Part<A>,
    shared: std::rc::Rc<std::cell::RefCell<Shared>>,
    out: VecDeque<Outgoing<Msg>>,
    /// Messages held back by a link fault, with their release times.
    delayed: Vec<(Nanos, Outgoing<Msg>)>,
    io: VecDeque<IoCommand>,
    power: VecDeque<PowerRequest>,
    writes_since_flush: u32,
}

impl<A: ClientApp> SierraNode<A> {
    pub fn new(
        id: NodeId,
        part: Part<A>,
        shared: std::rc::Rc<std::cell::RefCell<Shared>>,
    ) -> SierraNode<A> {
        SierraNode {
            id,
            part,
            shared,
            out: VecDeque::new(),
            delayed: Vec::new(),
            io: VecDeque::new(),
            power: VecDeque::new(),
            writes_since_flush: 0,
        }
    }

    pub fn mds(&self) -> Option<&Mds> {
        match &self.part {
            Part::Mds(m) => Some(&m.mds),
            _ => None,
        }
    }

    pub fn server(&self) -> Option<&ChunkServer> {
        match &self.part {
            Part::Server(p) => Some(&p.server),
            _ => None,
        }
    }

    pub fn logger(&self) -> Option<&Store> {
        match &self.part {
            Part::Logger(l) => Some(&l.store),
            _ => None,
        }
    }

    /// A logger's disk queue, time-weighted.
    pub fn logger_queue(&self) -> Option<&Integral> {
        match &self.part {
            Part::Logger(l) => Some(&l.queue),
            _ => None,
        }
    }

    pub fn client(&self) -> Option<(&ObjectClient, &A)> {
        match &self.part {
            Part::Client(c) => Some((&c.client, &c.app)),
            _ => None,
        }
    }
}
