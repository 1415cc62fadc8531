//! Volumes of one server on the simulator, each hosting an off-loading client on its base
//! volume, an Everest store on a partition at its end, or both (Everest §4.1: "each volume also
//! hosted an Everest store on a small partition at the end of the volume").
//!
//! The client and the store are the real cores (`cordillera-offload`, `cordillera-vstore`); this
//! module is only their driver on the simulated world:
//!
//! - **Load.** A volume's load is its block device's queue length (Everest §3.2.2): every disk
//!   I/O in flight on the volume, the client's and the store's. The client sees its own base I/Os
//!   plus the co-hosted store's ([`Client::set_external_base_load`]); a store reports the whole
//!   queue, piggy-backed on every reply and broadcast every 100 ms.
//! - **Disks are write-through.** The Cheetah model has no write cache (enterprise SCSI arrays
//!   run with it disabled), so a completed write is durable and a flush has nothing to wait for:
//!   the driver answers flushes at once instead of queueing them behind other writes.
//! - **Messages.** Clients and stores of one server talk through shared memory (Everest's
//!   single-machine configuration): 5 µs, 100 Gbps.
//! - **Data.** Writes carry zeros; the simulated disks keep nothing for zero sectors, so long
//!   replays cost memory only for the stores' record headers.

mod spec;

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::Instant;

use cordillera_host::{DiskPort, Durability};
use cordillera_models::device::nvram::{Nvram, NvramParams};
use cordillera_models::device::Device;
use cordillera_models::histogram::Histogram;
use cordillera_models::presets::{self, ArraySpec};
use cordillera_offload::client::{BaseDone, Client, Config, Policy, UpReply, Upward};
use cordillera_offload::superblock::SUPERBLOCK_BYTES;
use cordillera_offload::StoreInfo;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, World, WorldBuilder};
use cordillera_types::Op;
use cordillera_vstore::format::RECORD_ALIGN;
use cordillera_vstore::store::{Config as StoreConfig, DiskDone, DiskOp, Reply, Request, Store};

pub use spec::*;

/// Store disk I/O ids carry this bit; the driver's own flushes carry [`HOUSEKEEPING`].
const OWNER_STORE: u64 = 1 << 62;
const HOUSEKEEPING: u64 = 1 << 61;
/// Load broadcasts, flushes that bound the simulated disk's unflushed list, and samples.
const TICK_NS: Nanos = 100_000_000;
/// The cores start (format) this long before the first request.
pub const LEAD_NS: Nanos = 1_000_000_000;
const SECTOR: u64 = 512;

#[derive(Clone, Debug)]
enum Msg {
    Request {
        id: u64,
        request: Request,
    },
    /// `load`: the store's disk's queue; `volume`: the part of it that is the base volume's
    /// (the volume beside the store).
    Reply {
        id: u64,
        reply: Reply,
        load: u64,
        volume: u64,
    },
    Load {
        load: u64,
        volume: u64,
    },
}

/// Only what identifies a message enters the run hash (not the zeros it carries).
impl Hash for Msg {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Msg::Request { id, request } => {
                0u8.hash(state);
                id.hash(state);
                std::mem::discriminant(request).hash(state);
                if let Request::Write {
                    offset_bytes,
                    version,
                    data,
                    ..
                } = request
                {
                    (offset_bytes, version, data.len()).hash(state);
                }
            }
            Msg::Reply {
                id, load, volume, ..
            } => (1u8, id, load, volume).hash(state),
            Msg::Load { load, volume } => (2u8, load, volume).hash(state),
        }
    }
}

struct Upper {
    load: Load,
    next: usize,
    in_flight: HashMap<u64, (Nanos, Op, u64)>,
    next_id: u64,
    rng: SimRng,
    seq_offset: u64,
    usable_bytes: u64,
}

struct Node {
    id: NodeId,
    /// Volumes on the server (every one gets this store's load broadcasts).
    nodes: usize,
    start_ns: Nanos,
    /// This core is a restart after a crash; it restarted then.
    restart: bool,
    restarted_at: Option<Nanos>,
    client: Option<Client>,
    store_nodes: Vec<NodeId>,
    store: Option<Store>,
    upper: Upper,
    time_client: bool,
    switch_policy: Option<(Nanos, Policy)>,
    sample_ns: Nanos,
    next_tick: Nanos,
    /// Store requests: tag → (sender, id).
    senders: HashMap<u64, (NodeId, u64)>,
    next_tag: u64,
    /// The base volume's and the store's shares of the node's disk (write-through).
    base_disk: DiskPort,
    store_disk: DiskPort,
    store_done: VecDeque<DiskDone>,
    next_housekeeping: u64,
    out: VecDeque<Outgoing<Msg>>,
    io: VecDeque<IoCommand>,
    result: VolumeResult,
    last_answer_ns: Nanos,
    tally: Tally,
}

/// The off-loaded bytes of every client of the run, and the largest sum they reached: updated on
/// every call into a client, so the peak is exact, not sampled.
#[derive(Clone)]
struct Tally(std::sync::Arc<std::sync::Mutex<(Vec<u64>, u64, u64)>>);

impl Tally {
    fn new(nodes: usize) -> Tally {
        Tally(std::sync::Arc::new(std::sync::Mutex::new((
            vec![0; nodes],
            0,
            0,
        ))))
    }

    fn set(&self, node: NodeId, bytes: u64) {
        let mut t = self.0.lock().expect("the tally is not poisoned");
        let (each, sum, peak) = &mut *t;
        if each[node] != bytes {
            *sum = *sum - each[node] + bytes;
            each[node] = bytes;
            *peak = (*peak).max(*sum);
        }
    }

    fn peak(&self) -> u64 {
        self.0.lock().expect("the tally is not poisoned").2
    }
}

impl Node {
    fn load(&self) -> u64 {
        self.base_disk.in_flight() + self.store_disk.in_flight()
    }

    fn timed<R>(&mut self, f: impl FnOnce(&mut Client) -> R) -> Option<R> {
        let client = self.client.as_mut()?;
        let r = if self.time_client {
            let t = Instant::now();
            let r = f(client);
            self.result.client_cpu_ns += t.elapsed().as_nanos() as u64;
            r
        } else {
            f(client)
        };
        // Every change of the off-loaded bytes passes here: the tally's peak is exact.
        self.tally.set(self.id, client.stats().offloaded_bytes);
        Some(r)
    }

    /// Issues what the upper layer has due at `now`.
    fn issue(&mut self, now: Nanos) {
        if self.client.is_none() {
            return;
        }
        let mut due: Vec<(u64, Upward)> = Vec::new();
        let u = &mut self.upper;
        match &u.load {
            Load::Open(reqs) => {
                while let Some(r) = reqs.get(u.next) {
                    if self.start_ns + r.at_ns > now {
                        break;
                    }
                    u.next += 1;
                    u.next_id += 1;
                    let (offset, len) = fit(r.offset_bytes, r.length_bytes, u.usable_bytes);
                    u.in_flight
                        .insert(u.next_id, (self.start_ns + r.at_ns, r.op, len));
                    due.push((u.next_id, upward(r.op, offset, len)));
                }
            }
            Load::Closed {
                depth,
                read_fraction,
                sequential,
                request_bytes,
                span_bytes,
                from_ns,
                until_ns,
                hot,
            } => {
                let active = now >= self.start_ns + from_ns && now < self.start_ns + until_ns;
                while active && u.in_flight.len() < *depth {
                    let op = if u.rng.chance(*read_fraction) {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    let span = (*span_bytes).min(u.usable_bytes) / request_bytes * request_bytes;
                    let offset = if *sequential {
                        let o = u.seq_offset % span;
                        u.seq_offset = o + request_bytes;
                        o
                    } else {
                        let units = match hot {
                            Some(h) if u.rng.chance(h.share) => {
                                ((span as f64 * h.span_fraction) as u64 / request_bytes).max(1)
                            }
                            _ => span / request_bytes,
                        };
                        u.rng.below(units) * request_bytes
                    };
                    u.next_id += 1;
                    u.in_flight.insert(u.next_id, (now, op, *request_bytes));
                    due.push((u.next_id, upward(op, offset, *request_bytes)));
                }
            }
            Load::Idle => {}
        }
        for (id, request) in due {
            self.result.issued += 1;
            self.timed(|c| c.handle_upward(now, id, request));
        }
    }

    fn next_arrival(&self) -> Option<Nanos> {
        self.client.as_ref()?;
        match &self.upper.load {
            Load::Open(reqs) => reqs.get(self.upper.next).map(|r| self.start_ns + r.at_ns),
            Load::Closed {
                from_ns, until_ns, ..
            } => (self.upper.next_id == 0 && from_ns < until_ns).then_some(self.start_ns + from_ns),
            Load::Idle => None,
        }
    }

    fn answered(&mut self, now: Nanos, id: u64, reply: UpReply) {
        let Some((issued, op, len)) = self.upper.in_flight.remove(&id) else {
            return;
        };
        self.result.answered += 1;
        self.last_answer_ns = now;
        if matches!(reply, UpReply::Error(_)) {
            self.result.errors += 1;
            return;
        }
        self.result.bytes_done += len;
        match op {
            Op::Read => self.result.reads.record(now - issued),
            Op::Write => self.result.writes.record(now - issued),
        }
    }

    fn pump(&mut self, now: Nanos) {
        loop {
            let mut progress = false;
            if let Some(store) = &mut self.store {
                while let Some(done) = self.store_done.pop_front() {
                    progress = true;
                    store.handle_disk(now, done);
                }
                while let Some(op) = store.poll_disk() {
                    progress = true;
                    match &op {
                        DiskOp::Read { .. } => self.result.store_read_ios += 1,
                        DiskOp::Write { data, .. } => {
                            self.result.store_write_ios += 1;
                            self.result.store_write_bytes += data.len() as u64;
                        }
                        DiskOp::Flush { .. } => {}
                    }
                    // Write-through: durable once written, a flush answered at once.
                    match self.store_disk.submit(op) {
                        Some(command) => self.io.push_back(command),
                        None => self
                            .store_done
                            .extend(std::iter::from_fn(|| self.store_disk.poll_ready())),
                    }
                }
                let mut local = Vec::new();
                while let Some((tag, reply)) = store.poll_reply() {
                    progress = true;
                    let (to, id) = self.senders.remove(&tag).expect("a request's sender");
                    let volume = self.base_disk.in_flight();
                    let load = volume + self.store_disk.in_flight();
                    if to == self.id {
                        // The co-hosted client: no message needed (same process).
                        local.push((id, reply, load, volume));
                    } else {
                        self.out.push_back(Outgoing {
                            to,
                            message: Msg::Reply {
                                id,
                                reply,
                                load,
                                volume,
                            },
                            bytes: 64,
                        });
                    }
                }
                for (id, reply, load, volume) in local {
                    self.deliver_reply(now, self.id, id, reply, (load, volume));
                }
            }
            let store_io = self.store_disk.in_flight();
            if let Some(c) = &mut self.client {
                c.set_external_base_load(store_io);
                while let Some(op) = c.poll_base() {
                    progress = true;
                    self.result.base_ios += 1;
                    self.io.extend(self.base_disk.submit(op));
                }
                while let Some((store, id, request)) = c.poll_store() {
                    progress = true;
                    let bytes = 64
                        + match &request {
                            Request::Write { data, .. } => data.len() as u64,
                            _ => 0,
                        };
                    self.out.push_back(Outgoing {
                        to: self.store_nodes[store],
                        message: Msg::Request { id, request },
                        bytes,
                    });
                }
                let mut replies = Vec::new();
                while let Some(r) = c.poll_upward() {
                    replies.push(r);
                }
                if !replies.is_empty() {
                    progress = true;
                    for (id, reply) in replies {
                        self.answered(now, id, reply);
                    }
                    self.issue(now);
                }
            }
            // Requests to our own store stay in the process.
            while let Some(i) = self.out.iter().position(|o| o.to == self.id) {
                progress = true;
                let o = self.out.remove(i).expect("found");
                if let Msg::Request { id, request } = o.message {
                    self.store_request(now, self.id, id, request);
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn store_request(&mut self, now: Nanos, from: NodeId, id: u64, request: Request) {
        let Some(store) = &mut self.store else {
            return;
        };
        self.next_tag += 1;
        self.senders.insert(self.next_tag, (from, id));
        store.handle_request(now, self.next_tag, request);
    }

    /// A store's reply, with its disk's queue and the part of it that is its volume's.
    fn deliver_reply(
        &mut self,
        now: Nanos,
        from: NodeId,
        id: u64,
        reply: Reply,
        (load, volume): (u64, u64),
    ) {
        let Some(store) = self.store_nodes.iter().position(|&n| n == from) else {
            return;
        };
        self.timed(|c| {
            c.handle_volume_load(store, volume);
            c.handle_store(now, store, id, reply, Some(load))
        });
    }

    fn tick(&mut self, now: Nanos) {
        while self.next_tick <= now {
            let t = self.next_tick;
            self.next_tick += TICK_NS;
            // Bounds the simulated disk's list of unflushed writes (durability is write-through).
            self.next_housekeeping += 1;
            self.io.push_back(IoCommand::Flush {
                id: HOUSEKEEPING | self.next_housekeeping,
            });
            if self.store.is_some() {
                let (load, volume) = (self.load(), self.base_disk.in_flight());
                for to in 0..self.nodes {
                    if to != self.id {
                        self.out.push_back(Outgoing {
                            to,
                            message: Msg::Load { load, volume },
                            bytes: 64,
                        });
                    }
                }
            }
            if let Some((at, policy)) = self.switch_policy {
                if t >= self.start_ns + at {
                    self.switch_policy = None;
                    if let Some(c) = &mut self.client {
                        c.set_policy(policy);
                        // Starts what the new policy does (e.g. reclaim) at once.
                        c.handle_timeout(t);
                    }
                }
            }
            if t >= self.start_ns && (t - self.start_ns).is_multiple_of(self.sample_ns) {
                self.sample();
            }
        }
    }

    fn sample(&mut self) {
        if let Some(c) = &self.client {
            let stats = c.stats();
            self.result.offloaded.push(stats.offloaded_bytes);
            self.result
                .read_samples
                .push((stats.store_reads, stats.base_reads));
        }
        self.result.answered_samples.push(self.result.answered);
    }

    fn note_recovery(&mut self, now: Nanos) {
        let Some(at) = self.restarted_at else {
            return;
        };
        if let Some(s) = &self.store {
            if s.is_ready() && self.result.store_recovery_ns.is_none() {
                self.result.store_recovery_ns = Some(now - at);
                self.result.store_stats = Some(s.stats());
                self.result.metadata_bytes =
                    32 * s.clients().iter().map(|(_, e)| e.len() as u64).sum::<u64>();
            }
        }
        if let Some(c) = &self.client {
            if c.is_ready() && self.result.client_recovery_ns.is_none() {
                self.result.client_recovery_ns = Some(now - at);
            }
        }
    }
}

fn upward(op: Op, offset_bytes: u64, length_bytes: u64) -> Upward {
    match op {
        Op::Read => Upward::Read {
            offset_bytes,
            length_bytes,
        },
        Op::Write => Upward::Write {
            offset_bytes,
            data: vec![0; length_bytes as usize],
            durable: false,
        },
    }
}

/// A trace request made to fit the volume: sector-aligned, at most 16 MiB, and wrapped into
/// the addressable bytes (a trace volume larger than the simulated one folds onto it).
fn fit(offset: u64, len: u64, usable: u64) -> (u64, u64) {
    let len = len.clamp(SECTOR, 16 << 20).div_ceil(SECTOR) * SECTOR;
    let room = usable.saturating_sub(len) / SECTOR;
    let offset = (offset / SECTOR) % room.max(1) * SECTOR;
    (offset, len)
}

impl Core for Node {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        if self.restart {
            self.restarted_at = Some(now);
            self.next_tick = now.div_ceil(TICK_NS) * TICK_NS;
        }
        self.tick(now);
        self.issue(now);
        self.pump(now);
        self.note_recovery(now);
    }

    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Msg) {
        match message {
            Msg::Request { id, request } => self.store_request(now, from, id, request),
            Msg::Reply {
                id,
                reply,
                load,
                volume,
            } => self.deliver_reply(now, from, id, reply, (load, volume)),
            Msg::Load { load, volume } => {
                if let Some(store) = self.store_nodes.iter().position(|&n| n == from) {
                    self.timed(|c| {
                        c.handle_volume_load(store, volume);
                        c.handle_load(store, load)
                    });
                }
            }
        }
        self.pump(now);
        self.note_recovery(now);
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.tick(now);
        if self
            .client
            .as_ref()
            .and_then(|c| c.poll_timeout())
            .is_some_and(|t| t <= now)
        {
            self.timed(|c| c.handle_timeout(now));
        }
        if let Some(s) = &mut self.store {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
        self.issue(now);
        self.pump(now);
        self.note_recovery(now);
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        let id = match &done {
            IoDone::Read { id, .. } | IoDone::Written { id } | IoDone::Flushed { id } => *id,
        };
        if id & HOUSEKEEPING != 0 {
            return;
        }
        if self.store_disk.owns(id) {
            let done = self.store_disk.complete(done, &mut self.io);
            self.store_done.extend(done);
        } else if let Some(done) = self.base_disk.complete(done, &mut self.io) {
            let done = BaseDone::from(done);
            self.timed(|c| c.handle_base(now, done));
        }
        self.pump(now);
        self.note_recovery(now);
    }

    fn poll_message(&mut self) -> Option<Outgoing<Msg>> {
        self.out.pop_front()
    }

    fn poll_io(&mut self) -> Option<IoCommand> {
        self.io.pop_front()
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let mut at = self.next_tick;
        for t in [
            self.client.as_ref().and_then(|c| c.poll_timeout()),
            self.store.as_ref().and_then(|s| s.poll_timeout()),
            self.next_arrival(),
        ]
        .into_iter()
        .flatten()
        {
            at = at.min(t);
        }
        Some(at)
    }
}

/// The nodes of a run: each volume's upper layer with its load, its client (formatted, or
/// recovered on a restart) and its store; a restarted volume's load is idle.
fn node_factory(setup: &Setup, tally: &Tally) -> impl FnMut(NodeId) -> Node + 'static {
    let start_ns = LEAD_NS;
    let n = setup.volumes.len();
    let layout = setup.layout();
    let store_config = StoreConfig::new(layout.log_bytes);
    let mut started = vec![false; n];
    let mut lives = 0u64;
    let specs = setup.volumes.clone();
    let s = setup.clone();
    let node_tally = tally.clone();
    move |id: NodeId| {
        let restart = started[id];
        started[id] = true;
        let spec = &specs[id];
        lives += 1;
        // A seed per life: each life of a store draws its own epochs, as a real one does.
        let store = spec.store.then(|| {
            if restart {
                Store::recover(store_config, s.seed ^ id as u64 ^ lives << 32, 0)
            } else {
                Store::format(store_config, 1000 + id as u128, s.seed ^ id as u64)
            }
        });
        let store_nodes = spec.store_set.clone();
        let client = spec.client.then(|| {
            let config = Config {
                policy: s.policy,
                n_way: s.n_way,
                t_base: s.t_base,
                t_store: s.t_store,
                n_reclaim: s.n_reclaim,
                request_timeout_ns: None,
                offload_bytes_max: s.offload_bytes_max,
                ..Config::new(id as u64 + 1, id as u64 + 1, layout.volume_bytes)
            };
            if restart {
                Client::recover(config, 0)
            } else {
                let stores = store_nodes
                    .iter()
                    .map(|&n| StoreInfo {
                        id: 1000 + n as u64,
                        server: n as u64,
                    })
                    .collect();
                Client::format(config, stores, 0)
            }
        });
        Node {
            id,
            nodes: n,
            start_ns,
            restart,
            restarted_at: None,
            client,
            store_nodes,
            store,
            upper: Upper {
                load: if restart {
                    Load::Idle
                } else {
                    spec.load.clone()
                },
                next: 0,
                in_flight: HashMap::new(),
                next_id: 0,
                rng: SimRng::new(s.seed, 10 + id as u64),
                seq_offset: 0,
                usable_bytes: layout.usable_bytes,
            },
            time_client: s.time_client,
            switch_policy: s.switch_policy,
            sample_ns: s.sample_ns,
            next_tick: 0,
            senders: HashMap::new(),
            next_tag: 0,
            base_disk: DiskPort::new(0, 0, Durability::WriteThrough),
            store_disk: DiskPort::new(OWNER_STORE, layout.store_offset, Durability::WriteThrough),
            store_done: VecDeque::new(),
            next_housekeeping: 0,
            out: VecDeque::new(),
            io: VecDeque::new(),
            result: VolumeResult::default(),
            last_answer_ns: 0,
            tally: node_tally.clone(),
        }
    }
}

/// Runs `setup` to its end and reports what every volume saw.
pub fn run(setup: &Setup) -> Outcome {
    let layout = setup.layout();
    let n = setup.volumes.len();
    let start_ns = LEAD_NS;
    let tally = Tally::new(n);
    let builder = WorldBuilder {
        new_core: Box::new(node_factory(setup, &tally)),
        new_device: Box::new({
            let s = setup.clone();
            move |_| s.new_device()
        }),
        crash_model: CrashModel {
            kept: 1.0,
            torn: 0.0,
        },
        flush_ns: 0,
        early_reads: 0.0,
        reorder: 0.0,
    };
    let network = Network::new(
        NetworkParams {
            racks_of_nodes: vec![0; n],
            nic_bits_per_s: 100e9,
            uplink_bits_per_s: 100e9,
            latency_ns: 5_000,
            cut_through: false,
        },
        NetworkFaults::default(),
        SimRng::new(setup.seed, 1),
    );
    let mut world = World::new(builder, network, SimRng::new(setup.seed, 2));
    let mut crashed = false;
    let step: Nanos = 1_000_000_000;
    let mut t = start_ns;
    loop {
        t += step;
        if let Some(at) = setup.crash_at {
            if !crashed && start_ns + at <= t {
                crashed = true;
                world.run_until(start_ns + at - 1);
                for node in 0..n {
                    world.schedule_crash(node, start_ns + at, Some(1_000_000));
                }
            }
        }
        world.run_until(t);
        let everything_answered = (0..n).all(|i| {
            world
                .core(i)
                .is_none_or(|node| node.upper.in_flight.is_empty() && node.next_arrival().is_none())
        });
        let recovered = !crashed
            || (0..n).all(|i| {
                // A crashed node is down until its restart: not recovered yet.
                world.core(i).is_some_and(|node| {
                    node.store.as_ref().is_none_or(|s| s.is_ready())
                        && node.client.as_ref().is_none_or(|c| c.is_ready())
                })
            });
        let reclaimed = !setup.until_reclaimed
            || (0..n).all(|i| {
                world.core(i).is_none_or(|node| {
                    node.client
                        .as_ref()
                        .is_none_or(|c| c.stats().offloaded_bytes == 0)
                })
            });
        let done = t >= start_ns + setup.end_ns && everything_answered && recovered && reclaimed;
        if done || t >= start_ns.saturating_add(setup.stop_ns) {
            break;
        }
    }
    let mut volumes = Vec::new();
    let mut last_answer_ns = 0;
    for i in 0..n {
        let Some(node) = world.core(i) else {
            volumes.push(VolumeResult::default());
            continue;
        };
        let mut r = node.result.clone();
        r.client = node.client.as_ref().map(|c| c.stats());
        last_answer_ns = last_answer_ns.max(node.last_answer_ns.saturating_sub(start_ns));
        volumes.push(r);
    }
    Outcome {
        volumes,
        offloaded_peak_bytes: tally.peak(),
        sample_ns: setup.sample_ns,
        last_answer_ns,
        stopped_ns: t - start_ns,
        layout,
    }
}
