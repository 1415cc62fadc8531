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
use std::collections::VecDeque;
use std::rc::Rc;

use serde::Serialize;

use cordillera_gears::client::{ClientConfig, ObjectClient};
use cordillera_gears::layout::Layout;
use cordillera_gears::mds::{MdsConfig, MdsStats};
use cordillera_gears::model::RackId;
use cordillera_gears::server::{ChunkServer, LoggerInfo, ServerConfig, ServerStats, Slots};
use cordillera_gears_host::{Nodes, Part, Shared, SierraNode};
use cordillera_host::{DiskPort, Durability};
use cordillera_models::device::hdd::{Hdd, ReadAhead};
use cordillera_models::device::Device;

use cordillera_models::histogram::Histogram;
use cordillera_models::power::PowerParams;
use cordillera_models::presets;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{World, WorldBuilder};
use cordillera_vstore::store::{Config as StoreConfig, Store};

mod client;

use client::ReplayClient;

/// A node of the lab's cluster: the shared Sierra node, its clients replaying or closed-loop.
pub type Node = SierraNode<ReplayClient>;

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
    /// The chunk servers' and loggers' read-ahead in place of the preset's (a disk preset
    /// only; `None`: the preset's).
    pub read_ahead_bytes: Option<u64>,
    /// The chunk servers' and loggers' read-ahead done asynchronously, as a host file cache
    /// does, instead of only on a miss ([`ReadAhead::asynchronous`]).
    pub read_ahead_async: bool,
    /// The network's switches forward packets as they arrive (`NetworkParams::cut_through`).
    pub cut_through: bool,
    pub power: PowerParams,
    pub log_bytes: u64,
    /// Reclaim jobs at once per chunk server.
    pub reclaim_jobs: usize,
    /// Reclaim as background work: no new reclaim job (at-risk data excepted) while more than
    /// this many other operations are in flight on the server's disk (`None`: whatever the
    /// load, as the paper's prototype).
    pub reclaim_busy_disk: Option<usize>,
    /// The clients' rack (none: client i in rack i mod racks).
    pub client_rack: Option<usize>,
    /// A silent server is declared failed (and its data rebuilt) after this long.
    pub permanent_after_ns: Nanos,
    /// Bytes a rebuild copies per step.
    pub rebuild_piece_bytes: u64,
    /// §3.6: logged writes also written to the primary's own replica (the default).
    pub local_copy: bool,
    pub seed: u64,
}

impl ClusterSpec {
    /// Chunk server `server`'s configuration in this cluster.
    fn server_config(
        &self,
        server: u32,
        group_bytes: u64,
        racks_of_servers: Vec<RackId>,
        loggers: Vec<LoggerInfo>,
    ) -> ServerConfig {
        let mut config = ServerConfig::new(
            server,
            self.chunk_bytes,
            group_bytes,
            racks_of_servers,
            loggers,
        );
        config.reclaim_jobs_max = self.reclaim_jobs;
        config.reclaim_busy_disk = self.reclaim_busy_disk;
        config.rebuild_piece_bytes = self.rebuild_piece_bytes;
        config.local_copy = self.local_copy;
        config
    }

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
            read_ahead_bytes: None,
            read_ahead_async: false,
            cut_through: false,
            power: PowerParams::default(),
            log_bytes: 100 << 30,
            reclaim_jobs: 4,
            reclaim_busy_disk: None,
            client_rack: None,
            permanent_after_ns: MdsConfig::new(1 << 20).permanent_after_ns,
            rebuild_piece_bytes: 1 << 20,
            local_copy: true,
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

/// What the nodes report to the driver as they run.
#[derive(Default)]
pub struct Observed {
    /// Response times of requests by the minute they were issued in.
    pub minutes: Vec<Histogram>,
    pub completed: u64,
    pub failed: u64,
    /// Of `failed`, those answered `NoSpace` (the loggers full).
    pub failed_no_space: u64,
    /// The first few failures, described.
    pub failures: Vec<String>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub created: usize,
    /// Requests waiting to be issued, per client.
    pub(super) queues: Vec<VecDeque<Replayed>>,
    /// Bytes of the requests each client completed.
    pub client_bytes: Vec<u64>,
}

impl Observed {
    pub(super) fn record(&mut self, issued: Nanos, latency: Nanos) {
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

/// A cluster running on the simulator.
pub struct Cluster {
    pub world: World<Node>,
    pub observed: Rc<RefCell<Observed>>,
    /// What the nodes share: migrations seen, among others.
    pub shared: Rc<RefCell<Shared>>,
    nodes: Nodes,
    pub spec: ClusterSpec,
}

/// A snapshot of the cluster's counters at one time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    pub at_ns: Nanos,
    pub completed: u64,
    pub failed: u64,
    pub failed_no_space: u64,
    pub logged_bytes_now: u64,
    pub logged_bytes_total: u64,
    pub reclaimed_bytes: u64,
    /// §3.6: read pieces of logged data served by primaries' own replicas and by loggers;
    /// reclaimed bytes not written to the primary's replica again.
    pub local_reads: u64,
    pub logger_reads: u64,
    pub reclaim_local_bytes: u64,
    pub client_retries: u64,
    pub client_timeouts: u64,
    /// Client requests the chunk servers refused (not primary, lease, unavailable, busy).
    pub refused: u64,
    /// Of which: [not primary, lease lapsed, unavailable, busy].
    pub refused_by: [u64; 4],
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

/// A chunk server at a moment ([`Cluster::server_loads`]).
#[derive(Clone, Debug)]
pub struct ServerLoad {
    pub awake: bool,
    /// Groups it is primary of.
    pub primaries: usize,
    pub logged_bytes: u64,
    pub stats: ServerStats,
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
        let nodes = Nodes {
            servers,
            loggers: spec.loggers,
            clients: spec.clients,
        };
        let racks = spec.layout.topology.rack_count();
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
        // A server holds a few of the cluster's groups: packed on its modelled disk. The MDS
        // never crashes here, so its durable state is not kept.
        let shared = Rc::new(RefCell::new(Shared::new(
            nodes,
            group_bytes,
            Slots::Packed,
            spec.power.wake_from_standby_ns,
            false,
        )));
        shared.borrow_mut().gears = VecDeque::from(spec.gears.clone());
        let new_core = {
            let observed = observed.clone();
            let shared = shared.clone();
            let spec = spec.clone();
            let mut closed = closed;
            closed.resize(spec.clients, None);
            move |id: NodeId| -> Node {
                let life = shared.borrow_mut().new_life(id);
                let part = if id == Nodes::MDS {
                    assert_eq!(life, 1, "the lab's MDS starts once");
                    Part::mds(mds_config.clone(), &spec.layout)
                } else if id < nodes.logger0() {
                    let config = spec.server_config(
                        (id - 1) as u32,
                        group_bytes,
                        racks_of_servers.clone(),
                        loggers.clone(),
                    );
                    Part::server(
                        ChunkServer::new(config, life, 0),
                        DiskPort::new(0, 0, Durability::WriteThrough),
                        life,
                    )
                } else if id < nodes.client0() {
                    let store = Store::format(
                        StoreConfig::new(spec.log_bytes),
                        id as u128,
                        spec.seed ^ id as u64,
                    );
                    Part::logger(store, DiskPort::new(0, 0, Durability::WriteThrough), life)
                } else {
                    let index = id - nodes.client0();
                    Part::client(
                        ObjectClient::new(ClientConfig::new(index as u32)),
                        ReplayClient::new(
                            index,
                            closed[index],
                            SimRng::new(spec.seed, 50 + index as u64),
                            spec.objects.clone(),
                            observed.clone(),
                        ),
                    )
                };
                Node::new(id, part, shared.clone())
            }
        };
        let racks_of_nodes = nodes.racks(
            &spec.layout.topology.racks_of_servers,
            |i| i % racks,
            |c| spec.client_rack.unwrap_or(c % racks),
        );
        let total = nodes.total();
        let params = NetworkParams {
            racks_of_nodes,
            cut_through: spec.cut_through,
            ..NetworkParams::sierra_testbed(1, total)
        };
        let network = Network::new(params, NetworkFaults::default(), SimRng::new(spec.seed, 3));
        let preset = spec.preset.clone();
        let read_ahead = spec.read_ahead_bytes;
        let read_ahead_async = spec.read_ahead_async;
        if (read_ahead.is_some() || read_ahead_async) && presets::hdd_params(&preset).is_none() {
            return Err(format!(
                "a read-ahead for {preset:?}, which is not a disk preset"
            ));
        }
        let builder = WorldBuilder {
            new_core: Box::new(new_core),
            new_device: Box::new(move |node| {
                if node == 0 || node >= nodes.client0() {
                    presets::device("ssd").expect("a preset")
                } else {
                    server_disk(&preset, read_ahead, read_ahead_async)
                }
            }),
            crash_model: CrashModel::default(),
            flush_ns: 50_000,
            early_reads: 0.0,
            reorder: 0.0,
        };
        let world = World::new(builder, network, SimRng::new(spec.seed, 4));
        Ok(Cluster {
            world,
            observed,
            shared,
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
            failed_no_space: ob.failed_no_space,
            ..Counters::default()
        };
        for node in 0..self.world.network.nodes() {
            let Some(n) = self.world.core(node) else {
                continue;
            };
            if let Some(mds) = n.mds() {
                c.mds = mds.stats().into();
            } else if let Some(server) = n.server() {
                let stats = server.stats();
                c.logged_bytes_now += server.logged_bytes();
                c.logged_bytes_total += stats.logged_bytes;
                c.reclaimed_bytes += stats.reclaimed_bytes;
                c.local_reads += stats.local_reads;
                c.logger_reads += stats.logger_reads;
                c.reclaim_local_bytes += stats.reclaim_local_bytes;
                c.refused += stats.refused;
                c.refused_by[0] += stats.refused_not_primary;
                c.refused_by[1] += stats.refused_lease;
                c.refused_by[2] += stats.refused_unavailable;
                c.refused_by[3] += stats.refused_busy;
                c.asleep_ns.push(self.world.asleep_ns(node));
                c.busy_ns.push(self.world.busy_ns(node));
                c.asleep_now += self.world.is_asleep(node) as usize;
            } else if let Some(queue) = n.logger_queue() {
                c.logger_queue_area += queue.area_at(now);
                c.logger_busy_ns.push(self.world.busy_ns(node));
            } else if let Some((client, _)) = n.client() {
                c.client_retries += client.stats().retries;
                c.client_timeouts += client.stats().timeouts;
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
            .filter_map(|node| self.world.core(node)?.server().map(|s| s.stats()))
            .collect()
    }

    /// Per chunk server (for the testbed's progress lines): awake, groups it is primary of,
    /// bytes logged now, and its counters so far.
    pub fn server_loads(&self) -> Vec<ServerLoad> {
        (1..=self.nodes.servers)
            .filter_map(|node| {
                let server = self.world.core(node)?.server()?;
                Some(ServerLoad {
                    awake: !self.world.is_asleep(node),
                    primaries: server.primaries().count(),
                    logged_bytes: server.logged_bytes(),
                    stats: server.stats(),
                })
            })
            .collect()
    }

    /// Every chunk server's account of its primaries (for diagnosis).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for node in 1..=self.nodes.servers {
            if let Some(server) = self.world.core(node).and_then(|n| n.server()) {
                out.push_str(&format!(
                    "server {} ({:?}, {}):\n{}\n",
                    node - 1,
                    server.power(),
                    if self.world.is_asleep(node) {
                        "asleep"
                    } else {
                        "awake"
                    },
                    server.describe()
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

/// A chunk server's or logger's disk: the preset, with its read-ahead's size replaced when one
/// is given (0: none; a preset without read-ahead gets the `sierra-1tb` cache's other figures)
/// and made asynchronous when asked.
fn server_disk(preset: &str, read_ahead: Option<u64>, asynchronous: bool) -> Box<dyn Device> {
    match presets::hdd_params(preset) {
        Some(mut params) if read_ahead.is_some() || asynchronous => {
            let ra = params.read_ahead.unwrap_or(ReadAhead {
                bytes: 256 << 10,
                segments: 16,
                hit_ms: 0.05,
                hit_mb_per_s: 300.0,
                asynchronous: false,
            });
            params.read_ahead = Some(ReadAhead {
                bytes: read_ahead.unwrap_or(ra.bytes),
                asynchronous: asynchronous || ra.asynchronous,
                ..ra
            })
            .filter(|ra| ra.bytes > 0);
            Box::new(Hdd::new(params))
        }
        _ => presets::device(preset).expect("a checked preset"),
    }
}
