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
//! every logger is empty, and every block of every object reads back as the model allows
//! (reads still going at the end, slowed by lost messages, may go on for `READ_GRACE_NS`, and a
//! primary whose lease lapsed for lost renewals may take `SETTLE_GRACE_NS` to be renewed).
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

/// The allocator of the seeded schedules (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::hash::Hasher;
use std::rc::Rc;

use cordillera_gears::client::{ClientConfig, ClientError, Done, ObjectClient};
use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::mds::{MdsConfig, ServerState};
use cordillera_gears::model::{GroupId, ObjectId, ServerId, Topology};
use cordillera_gears::protocol::Message;
use cordillera_gears::schedule::rotation;
use cordillera_gears::server::{ChunkServer, LoggerInfo, ServerConfig, Slots};
use cordillera_gears_host::{ClientApp, LinkFaults, Nodes, Part, Shared, SierraNode, Stall};
use cordillera_host::{DiskPort, Durability};
use cordillera_models::presets;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{World, WorldBuilder};
use cordillera_testkit::model::{pattern, Model, BLOCK};
use cordillera_testkit::{all_succeeded, Budget, Schedules};
use cordillera_vstore::store::{Config as StoreConfig, Store};

const RACKS: u32 = 3;
const PER_RACK: u32 = 2;
const SERVERS: usize = (RACKS * PER_RACK) as usize;
const LOGGERS: usize = RACKS as usize;
const CLIENTS: usize = 2;

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
/// How long past a schedule's end its final reads may go on (twelve request timeouts).
const READ_GRACE_NS: Nanos = 10 * S;
/// How long after the final reads the check may wait for a primary whose lease lapsed to be
/// renewed: five leases (0.4 s), twenty heartbeats.
const SETTLE_GRACE_NS: Nanos = 2 * S;

const NODES: Nodes = Nodes {
    servers: SERVERS,
    loggers: LOGGERS,
    clients: CLIENTS,
};

fn object_of(client: usize) -> ObjectId {
    ObjectId(100 + client as u64)
}

/// What the checks keep across the clients' lives: the models and counts.
#[derive(Default)]
struct Checks {
    models: Vec<Model>,
    created: Vec<bool>,
    /// Writes of each client in flight when it crashed end there.
    counts: Counts,
    verified_blocks: u64,
    /// Per client: its writes in flight → their attempts sent and not answered (kept
    /// current).
    unanswered: Vec<FxHashMap<u64, Vec<u64>>>,
    /// Attempts of writes whose client crashed, still at servers: (client, attempt id) →
    /// write; and per (client, write) how many of them are still to be answered.
    orphans: FxHashMap<(usize, u64), u64>,
    orphan_attempts: FxHashMap<(usize, u64), usize>,
    orphans_finished: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    writes_acked: u64,
    writes_failed: u64,
    reads_checked: u64,
    reads_failed: u64,
    client_retries: u64,
}

enum ClientOp {
    Create,
    Write { write: u64 },
    Read { first: u64, issued: Nanos },
    Verify { first: u64, issued: Nanos },
}

/// A client writing patterned blocks of its object and reading them at random, every read
/// checked against the model; from `verify_ns`, reading back every block.
struct ModelClient {
    index: usize,
    ops: BTreeMap<u64, ClientOp>,
    next_op: u64,
    rng: SimRng,
    next_tick: Nanos,
    verify_next: u64,
    shape: Shape,
    checks: Rc<RefCell<Checks>>,
}

type Node = SierraNode<ModelClient>;

/// Chance that a message of Sierra's protocols is dropped, or delayed (exponential, mean
/// `DELAY_MEAN_NS`).
const DROP: f64 = 0.002;
const DELAY: f64 = 0.01;
const DELAY_MEAN_NS: f64 = 3_000_000.0;

impl ModelClient {
    fn next_id(&mut self) -> u64 {
        let id = self.next_op;
        self.next_op += 1;
        id
    }
}

impl ClientApp for ModelClient {
    fn start(&mut self, now: Nanos, life: u64) {
        self.next_tick = now;
        if life == 1 {
            return;
        }
        // A restart: its requests in flight ended with the crash, except writes whose pieces
        // are still at servers, which end when the servers answer them.
        let mut sh = self.checks.borrow_mut();
        let index = self.index;
        let unanswered = std::mem::take(&mut sh.unanswered[index]);
        // Writes orphaned by an earlier crash stay open too.
        let open: FxHashSet<u64> = unanswered
            .keys()
            .copied()
            .chain(
                sh.orphan_attempts
                    .keys()
                    .filter(|(client, _)| *client == index)
                    .map(|&(_, write)| write),
            )
            .collect();
        // Writes in flight when their client crashes are abandoned: nobody is left to retry
        // one, and if its primary also failed mid-write the replicas may differ on its bytes
        // (the paper's stated limit, §3.7 "Replica divergence"). A read going back to one
        // after an older, acknowledged write is counted (`diverged_reads`), not a violation;
        // everything else the model finds on that read stands.
        let model = &mut sh.models[index];
        let abandoned: Vec<u64> = model.in_flight.iter().copied().collect();
        model.may_go_back.extend(abandoned);
        for (write, attempts) in unanswered {
            sh.orphan_attempts.insert((index, write), attempts.len());
            for attempt in attempts {
                sh.orphans.insert((index, attempt), write);
            }
        }
        sh.models[index].crashed_keeping(now, &open);
    }

    /// An attempt of a write orphaned by an earlier life answered: the write ends when all have.
    fn observe(&mut self, now: Nanos, message: &Message) {
        let (Message::WriteDone { id, .. } | Message::ReadDone { id, .. }) = message else {
            return;
        };
        let mut sh = self.checks.borrow_mut();
        let client = self.index;
        if let Some(write) = sh.orphans.remove(&(client, *id)) {
            let left = sh
                .orphan_attempts
                .get_mut(&(client, write))
                .expect("counted");
            *left -= 1;
            if *left == 0 {
                sh.orphan_attempts.remove(&(client, write));
                sh.orphans_finished += 1;
                sh.models[client].write_ended(now, write, false);
            }
        }
    }

    fn done(&mut self, now: Nanos, id: u64, result: Result<Done, ClientError>) {
        let Some(op) = self.ops.remove(&id) else {
            return;
        };
        let mut sh = self.checks.borrow_mut();
        let index = self.index;
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

    /// Starts new requests while the client has room (and, later, the final reads).
    fn issue(&mut self, client: &mut ObjectClient, now: Nanos) -> bool {
        let mut any = false;
        let object = object_of(self.index);
        if !self.checks.borrow().created[self.index] {
            if self.ops.is_empty() {
                let id = self.next_id();
                self.ops.insert(id, ClientOp::Create);
                client.create(now, id, object, BLOCKS * BLOCK);
                return true;
            }
            return false;
        }
        if now >= self.shape.verify_ns {
            while self.ops.is_empty() && self.verify_next < BLOCKS {
                let first = self.verify_next;
                let count = 4.min(BLOCKS - first);
                self.verify_next += count;
                let id = self.next_id();
                self.checks.borrow_mut().models[self.index].read_issued(now);
                self.ops.insert(id, ClientOp::Verify { first, issued: now });
                client.read(now, id, object, first * BLOCK, count * BLOCK);
                any = true;
            }
            return any;
        }
        while now < self.shape.active_ns && self.ops.len() < IN_FLIGHT_MAX {
            let first = self.rng.below(BLOCKS);
            let count = (1 + self.rng.below(4)).min(BLOCKS - first);
            let id = self.next_id();
            if self.rng.chance(0.5) {
                let write =
                    self.checks.borrow_mut().models[self.index].write_issued(now, first, count);
                let mut data = Vec::with_capacity((count * BLOCK) as usize);
                for b in first..first + count {
                    data.extend_from_slice(&pattern(b, write));
                }
                self.ops.insert(id, ClientOp::Write { write });
                client.write(now, id, object, first * BLOCK, data);
            } else {
                self.checks.borrow_mut().models[self.index].read_issued(now);
                self.ops.insert(id, ClientOp::Read { first, issued: now });
                client.read(now, id, object, first * BLOCK, count * BLOCK);
            }
            any = true;
        }
        any
    }

    /// What a crash now would leave at the servers.
    fn settled(&mut self, client: &ObjectClient) {
        let unanswered: FxHashMap<u64, Vec<u64>> = self
            .ops
            .iter()
            .filter_map(|(&op, o)| match o {
                ClientOp::Write { write } => {
                    let attempts = client.unanswered_attempts(op);
                    (!attempts.is_empty()).then_some((*write, attempts))
                }
                _ => None,
            })
            .collect();
        self.checks.borrow_mut().unanswered[self.index] = unanswered;
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        (self.verify_next < BLOCKS).then_some(self.next_tick)
    }

    fn handle_timeout(&mut self, now: Nanos) {
        if self.next_tick <= now {
            self.next_tick = if now + 5 * MS < self.shape.active_ns || now >= self.shape.verify_ns {
                now + 5 * MS
            } else {
                self.shape.verify_ns
            };
        }
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
    /// The run's fingerprint: every event (its time, node, message) hashed in order.
    hash: u64,
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
    /// §3.6: read pieces of logged data served by the primary's own replica, and by loggers;
    /// reclaimed bytes not written to the primary's replica again.
    local_reads: u64,
    logger_reads: u64,
    reclaim_local_bytes: u64,
    standbys: u64,
    lost_to_standby: u64,
    verified_blocks: u64,
    /// How long past the schedule's end its final reads went on (0: done by the end).
    read_late_ns: Nanos,
    /// How long past the final reads the check waited for every group's named primary to
    /// serve it (0: at once).
    settle_late_ns: Nanos,
    orphans_finished: u64,
    /// Reads excused as the paper's limit ([`Checks::diverged_reads`]).
    diverged_reads: u64,
    dropped: u64,
    delayed: u64,
    stalled: u64,
}

fn run(seed: u64) -> Result<Outcome, String> {
    run_shaped(seed, LONG)
}

fn run_short(seed: u64) -> Result<Outcome, String> {
    run_shaped(seed, SHORT)
}

/// Up to three stalls of a chunk server's outgoing messages and up to three of one link
/// between two chunk servers per schedule, each starting in the active period and lasting
/// 1.5–4 s: longer than the lease (0.4 s) and the MDS's heartbeat timeout (1.2 s). Their own
/// random stream: the other faults of a seed stay as they were.
fn link_stalls(seed: u64, shape: Shape) -> Vec<Vec<Stall>> {
    let mut rng = SimRng::new(seed, 23);
    let mut stalls = vec![Vec::new(); NODES.total()];
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
    let checks = Rc::new(RefCell::new(Checks {
        models: (0..CLIENTS).map(|_| Model::new(BLOCKS)).collect(),
        created: vec![false; CLIENTS],
        unanswered: vec![FxHashMap::default(); CLIENTS],
        ..Checks::default()
    }));
    // Groups by id on the servers' disks (48 groups); the MDS's durable state kept, so that it
    // restarts from it.
    let shared = Rc::new(RefCell::new(Shared::new(
        NODES,
        GROUP_BYTES,
        Slots::ByGroupId,
        WAKE_NS,
        true,
    )));
    {
        let mut sh = shared.borrow_mut();
        sh.trace = std::env::var_os("SIERRA_TRACE").is_some();
        sh.links = LinkFaults::new(
            SimRng::new(seed, 9),
            DROP,
            DELAY,
            DELAY_MEAN_NS,
            link_stalls(seed, shape),
        );
    }
    let layout = layout();
    shared.borrow_mut().gears = gear_plan(&mut rng, g_min, shape);
    let params = NetworkParams {
        racks_of_nodes: NODES.racks(&layout.topology.racks_of_servers, |i| i, |_| 0),
        ..NetworkParams::sierra_testbed(1, NODES.total())
    };
    let network = Network::new(params, NetworkFaults::default(), SimRng::new(seed, 3));
    let builder = WorldBuilder {
        new_core: Box::new(node_factory(seed, shape, &shared, &checks, &layout)),
        new_device: Box::new(|_| presets::device("ssd").expect("the ssd preset")),
        crash_model: CrashModel::default(),
        flush_ns: 50_000,
        early_reads: 0.0,
        reorder: 0.5,
    };
    let mut world = World::new(builder, network, SimRng::new(seed, 4));
    let faults = schedule_faults(&mut world, &mut rng, seed, shape);
    world.run_until(shape.end_ns);
    // The final reads go one at a time, and each one whose request or answer is lost (a drop,
    // a cached view naming a failed server) waits out the request timeout: a few in a row
    // outlast the window. A schedule still reading runs on, up to `READ_GRACE_NS`, so that
    // only a group that stays unreadable fails it.
    let reading = |c: &Checks| {
        c.verified_blocks < BLOCKS * CLIENTS as u64
            && c.models.iter().all(|m| m.violations.is_empty())
    };
    let mut until = shape.end_ns;
    while reading(&checks.borrow()) && until < shape.end_ns + READ_GRACE_NS {
        until += 10 * MS;
        world.run_until(until);
    }
    let read_late_ns = until - shape.end_ns;
    // Messages are dropped to the end: renewals lost in a row may let a primary's lease lapse
    // just before the check, while its heartbeats still reach the MDS (the next renewal makes
    // it primary again). The check waits out such a lapse, up to `SETTLE_GRACE_NS`, so that
    // only a group whose named primary stays away from it fails.
    let settle_from = until;
    while !unserved(&world).is_empty() && until < settle_from + SETTLE_GRACE_NS {
        until += 10 * MS;
        world.run_until(until);
    }
    let settle_late_ns = until - settle_from;
    conclude(
        &world,
        &checks,
        &shared,
        g_min,
        faults,
        read_late_ns,
        settle_late_ns,
    )
}

/// Groups whose primary, as the MDS names it, is not up or does not serve them at its epoch.
fn unserved(world: &World<Node>) -> Vec<String> {
    let Some(mds) = world.core(Nodes::MDS).and_then(|n| n.mds()) else {
        return vec!["the MDS is gone".into()];
    };
    let mut problems = Vec::new();
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
        match world.core(NODES.server(p)).and_then(|n| n.server()) {
            Some(s) => {
                if !s
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
    problems
}

/// Gear shifts through the active period (one every 1–3 s, a gear from `g_min` to 3, the
/// groups' order rotated each time); the top gear for the quiet period after it.
fn gear_plan(rng: &mut SimRng, g_min: usize, shape: Shape) -> VecDeque<(Nanos, usize, Vec<usize>)> {
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
    gears
}

/// The nodes of a schedule's world: the MDS, the chunk servers, the loggers and the clients
/// (a logger's restart recovers its store; the others start empty).
fn node_factory(
    seed: u64,
    shape: Shape,
    shared: &Rc<RefCell<Shared>>,
    checks: &Rc<RefCell<Checks>>,
    layout: &Layout,
) -> impl FnMut(NodeId) -> Node + 'static {
    let racks_of_servers: Vec<u32> = layout.topology.racks_of_servers.clone();
    let loggers: Vec<LoggerInfo> = (0..LOGGERS)
        .map(|i| LoggerInfo {
            id: (NODES.logger0() + i) as u64,
            rack: i as u32,
            server: None,
        })
        .collect();
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
    let shared = shared.clone();
    let checks = checks.clone();
    let layout = layout.clone();
    move |id: NodeId| -> Node {
        let life = shared.borrow_mut().new_life(id);
        let part = match id {
            // A restarted MDS is restored when it starts, when the time is known.
            Nodes::MDS => Part::mds(mds_config.clone(), &layout),
            n if n < NODES.logger0() => {
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
                // Below the clients' request timeout (800 ms).
                config.log_wait_ns = 500 * MS;
                config.log_recovery_grace_ns = 500 * MS;
                config.rebuild_piece_bytes = CHUNK;
                config.reclaim_busy_disk = reclaim_busy_disk;
                Part::server(
                    ChunkServer::new(config, life, 0),
                    DiskPort::new(0, 0, Durability::WriteThenFlush),
                    life,
                )
            }
            n if n < NODES.client0() => {
                let config = StoreConfig::new(LOG_BYTES);
                let store = if life == 1 {
                    Store::format(config, n as u128, seed ^ n as u64)
                } else {
                    Store::recover(config, seed ^ (n as u64) << 8 ^ life, 0)
                };
                Part::logger(store, DiskPort::new(0, 0, Durability::WriteThenFlush), life)
            }
            n => {
                let index = n - NODES.client0();
                let mut config = ClientConfig::new(index as u32);
                config.incarnation = life as u32;
                config.request_timeout_ns = 800 * MS;
                config.retries_max = 16;
                Part::client(
                    ObjectClient::new(config),
                    ModelClient {
                        index,
                        ops: BTreeMap::new(),
                        next_op: 1,
                        rng: SimRng::new(seed, 100 + n as u64 * 7 + life),
                        next_tick: 0,
                        verify_next: 0,
                        shape,
                        checks: checks.clone(),
                    },
                )
            }
        };
        Node::new(id, part, shared.clone())
    }
}

/// The faults of a schedule's world: crashes of chunk servers, loggers and clients while the
/// gears shift, a permanent failure of a server in some, and in some the MDS's crash (drawn
/// from its own stream, so that the other faults of a seed are those it always had).
struct Faults {
    crashes: usize,
    permanent: bool,
    mds_crash: bool,
}

fn schedule_faults(world: &mut World<Node>, rng: &mut SimRng, seed: u64, shape: Shape) -> Faults {
    let candidates: Vec<NodeId> = (1..NODES.total()).collect();
    let crashes = rng.below(6) as usize;
    world.schedule_random_crashes(&candidates, crashes, S, shape.active_ns, 400.0 * MS as f64);
    let permanent = rng.chance(0.3);
    if permanent {
        let s = 1 + rng.below(SERVERS as u64) as usize;
        world.schedule_crash(s, S + rng.below(shape.active_ns - 2 * S), None);
    }
    let mut mds_faults = SimRng::new(seed, 13);
    let mds_crash = mds_faults.chance(0.3);
    if mds_crash {
        let at = S + mds_faults.below(shape.active_ns - S);
        let down = 1 + mds_faults.exponential(400.0 * MS as f64) as Nanos;
        world.schedule_crash(Nodes::MDS, at, Some(down));
    }
    Faults {
        crashes,
        permanent,
        mds_crash,
    }
}

/// The schedule's outcome, or what went wrong: every model's violations, and at the end every
/// group served by the primary the MDS names, nothing left logged, every block read back.
fn conclude(
    world: &World<Node>,
    checks: &Rc<RefCell<Checks>>,
    shared: &Rc<RefCell<Shared>>,
    g_min: usize,
    faults: Faults,
    read_late_ns: Nanos,
    settle_late_ns: Nanos,
) -> Result<Outcome, String> {
    let Faults {
        crashes,
        permanent,
        mds_crash,
    } = faults;
    let sh = checks.borrow();
    let mut problems: Vec<String> = Vec::new();
    for (i, m) in sh.models.iter().enumerate() {
        problems.extend(m.violations.iter().cloned());
        if !sh.created[i] {
            problems.push(format!("client {i} never created its object"));
        }
    }
    let Some(mds) = world.core(Nodes::MDS).and_then(|n| n.mds()) else {
        return Err("the MDS is gone".into());
    };
    problems.extend(unserved(world));
    let mut logged_writes = 0;
    let mut reclaimed = 0;
    let (mut local_reads, mut logger_reads, mut reclaim_local_bytes) = (0, 0, 0);
    for s in 0..SERVERS {
        if let Some(p) = world.core(1 + s).and_then(|n| n.server()) {
            let stats = p.stats();
            logged_writes += stats.logged_writes;
            reclaimed += stats.reclaimed_bytes;
            local_reads += stats.local_reads;
            logger_reads += stats.logger_reads;
            reclaim_local_bytes += stats.reclaim_local_bytes;
            if p.logged_bytes() > 0 {
                problems.push(format!(
                    "server {s}: {} bytes still logged after the quiet period:\n{}",
                    p.logged_bytes(),
                    p.describe()
                ));
            }
        }
    }
    for i in 0..LOGGERS {
        if let Some(store) = world.core(NODES.logger0() + i).and_then(|n| n.logger()) {
            for (client, extents) in store.clients() {
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
            "only {} of {} blocks read back by {} s past the end",
            sh.verified_blocks,
            BLOCKS * CLIENTS as u64,
            read_late_ns / S
        ));
    }
    let mut retries = 0;
    for c in 0..CLIENTS {
        if let Some((client, _)) = world.core(NODES.client0() + c).and_then(|n| n.client()) {
            retries += client.stats().retries;
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
    let hs = shared.borrow();
    let stats = hs.mds_stats_all(mds.stats());
    let mut counts = sh.counts;
    counts.client_retries = retries;
    Ok(Outcome {
        hash: world.hash.finish(),
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
        local_reads,
        logger_reads,
        reclaim_local_bytes,
        standbys: stats.standbys,
        lost_to_standby: world.lost_to_standby(),
        verified_blocks: sh.verified_blocks,
        read_late_ns,
        settle_late_ns,
        orphans_finished: sh.orphans_finished,
        diverged_reads: sh.models.iter().map(|m| m.went_back_excused).sum(),
        dropped: hs.links.dropped,
        delayed: hs.links.delayed,
        stalled: hs.links.stalled,
    })
}

/// Seeds that once failed: a client's write orphaned by its crash and finished by the primary
/// after the restarted client's newer write (the model now keeps such writes open until the
/// servers answer them). And seed 72, the one that fails when the primary's deduplication of
/// retried requests is removed (kept since the fixed seeds stopped reaching it). And seed
/// 5929858340065061311: a write answered with an error for want of copies entered the range map
/// once the "degraded" mark was durable, after a newer write of the same block had been
/// reclaimed, and its local copy put the older bytes on the primary's replica.
const REGRESSIONS: [u64; 13] = [
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
    5929858340065061311,
];

/// The long schedules' share of the test command: 10 fixed seeds, then fresh ones for 30 s
/// (about 25 on two cores; `scripts/campaign.sh` runs 10^5).
const BUDGET: Budget = Budget {
    seconds: 30.0,
    least: 10,
};

#[test]
fn sierra_keeps_every_acknowledged_write_through_gear_shifts_and_failures() {
    let schedules = Schedules::from_env("SIERRA", &REGRESSIONS, 10, BUDGET);
    check(&schedules, "sierra simulation", run);
}

/// Short schedules (four seconds of faults, a twelve-second quiet period): 40 fixed seeds,
/// then fresh ones for 30 s (about 100 on two cores). `SIERRA_SHORT_SEED`,
/// `SIERRA_SHORT_SCHEDULES`, `SIERRA_SHORT_SECONDS`, `SIERRA_SHORT_BASE_SEED` and
/// `SIERRA_SHORT_FIXED` as for the long schedules.
/// Short seeds that once failed (campaign on 7200000000000000000 + 2000·k): a rebuild the MDS
/// ended or replaced while one of its pieces was draining or being read left the base writes
/// held over that piece waiting for ever (a reclaim never finished: 4 KiB still logged after
/// the quiet period). 6079397473711832957, …449 and …691 fail without the store's fencing (3 of 1,573 fresh
/// schedules), 7995176825174970720 without the secondaries' (1 of 524; 0 of 1,564 in the next
/// run): a stalled or deposed primary's log writes or replicated writes land after the next
/// primary's newer ones. 7316622331457701252 (1 of 15,000 fresh in a campaign of 2026-11-29):
/// two overlapping writes replicated at once, one replica received them in the other order (a
/// delayed message), and a later primary served the older write after a read had returned the
/// newer (a primary now holds a base write over one in flight until that one is done).
/// 7215719370509121817 (1 of 858 fresh in CI, 2026-11-29): both servers of one gear group
/// failed for good; the second's groups found no replacement in its gear group and kept
/// naming it, so their primaries logged for ever (512 KiB still logged after the quiet
/// period). A lost gear group's groups are now rebuilt in the others.
/// 8026683207044464757 and …5118 (2026-12-03): the store's fencing again (11 of 3,659 fresh
/// with it removed; the code since had moved the first seeds' schedules, and 0 of 307 at the
/// test's size failed). 7158457761728923922 (1 of 75,202 fresh in a campaign of 2026-12-03): a
/// primary deposed by a link stalled past its lease had a logged write's local copy (§3.6) in
/// flight beside its log writes; the loggers fenced the log writes, the write failed, the
/// local copy landed, and back as primary the server served the failed write after a read had
/// returned the older one (a local copy is now written once the write has entered the range
/// map; unit test `a_logged_write_no_store_takes_never_reaches_the_local_replica`).
/// 7158457761728960393 (1 of 75,202, same campaign): a recovering primary's metadata request
/// never reached one logger (it was down); that logger's fence stayed at the older generation,
/// took the newer primary's delete of every older version, then a deposed primary's late log
/// write: an extent nobody deleted (still logged after the quiet period). A store now raises a
/// client's fence on any newer write or delete, durably before answering it (vstore test
/// `a_newer_generations_write_or_delete_fences_the_older_ones`).
/// 2795779565020151682 (1 of 9,325 fresh in a campaign of 2026-12-04): a write's first attempt
/// was applied by a primary whose answer a stalled link held back for two seconds; the client
/// sent it again to the next primary, and a newer write of the same block went there and was
/// acknowledged meanwhile; the held-back answer acknowledged the first write while its second
/// attempt was still at the new primary, which applied it after the newer one (a read had
/// returned the newer write). Attempts now name their view's epoch and have their own ids, a
/// primary refuses stale ones, a write is acknowledged only once no attempt of it may still
/// land, and a client's writes over the same bytes go in order (unit tests
/// `a_late_answer_does_not_acknowledge_a_write_whose_retry_may_still_land`,
/// `a_stale_write_attempt_is_refused_not_applied`).
/// 1572420036324627697 (1 of 27,936 fresh in a campaign of 2026-12-04; no write lost): a
/// client's final reads, one at a time, waited out five request timeouts (0.8 s each): three
/// messages dropped and two cached views naming the server that had failed for good — 4.1 s,
/// longer than the four-second window; 96 of 128 blocks read by the end. The final reads now
/// go on past the end, up to `READ_GRACE_NS`, and the summary counts the schedules that needed
/// it (this one: 160 ms).
/// 5293546357561820347 (1 of 118,468 fresh in a campaign of 2026-12-04): a write reached its
/// primary and one of the two secondaries; the third's copy was lost on the way. The MDS
/// crashed, the primary's lease lapsed (it answered `LeaseExpired`) and then the primary
/// crashed; the client crashed too before it sent the write again. The secondary without it
/// became primary and reads returned the older write; the two replicas with it served again
/// later and a read returned it: the replicas differ on the bytes of a write whose primary and
/// client both failed mid-write, which the paper states (§3.7, "Replica divergence") and
/// leaves to chain replication. The run excuses such reads and counts them
/// (`diverged_reads`: this seed 1). The same window with a client that lives but gives up
/// (its retries outlasted by the MDS's absence) is closed: a write's piece once sent is
/// retried until it succeeds (unit tests
/// `a_write_that_may_have_landed_is_retried_until_it_succeeds`,
/// `a_failed_write_is_answered_once_its_other_pieces_settle`).
/// 70966280237788284 (1 of 71,787 fresh in a campaign of 2026-12-06; no write lost): the MDS's
/// lease renewals to server 3 sent at 19.7 and 19.8 s were dropped and the one at 19.9 s did
/// not arrive in time, so the lease granted at 19.6 s lapsed at 20.0 s, the schedule's end,
/// while the server's heartbeats still reached the MDS: the check found the MDS naming it
/// primary of eight groups it had just stopped serving. The check now waits, up to
/// `SETTLE_GRACE_NS`, for the next renewal (this one: 110 ms), and the summary counts the
/// schedules that needed it.
const SHORT_REGRESSIONS: [u64; 17] = [
    7200000000000015982,
    7200000000000019506,
    7200000000000019942,
    6079397473711832957,
    6079397473711833449,
    6079397473711833691,
    7995176825174970720,
    7316622331457701252,
    7215719370509121817,
    8026683207044464757,
    8026683207044465118,
    7158457761728923922,
    7158457761728960393,
    2795779565020151682,
    1572420036324627697,
    5293546357561820347,
    70966280237788284,
];

const SHORT_BUDGET: Budget = Budget {
    seconds: 30.0,
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
    schedules.write_hashes(&ran, |o| o.hash);
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
            ("read_late", total(|o| (o.read_late_ns > 0) as u64)),
            ("settle_late", total(|o| (o.settle_late_ns > 0) as u64)),
            ("diverged_reads", total(|o| o.diverged_reads)),
            ("local_reads", total(|o| o.local_reads)),
            ("logger_reads", total(|o| o.logger_reads)),
            ("reclaim_local_bytes", total(|o| o.reclaim_local_bytes)),
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
        "{name}: {} schedules (g_min 1: {}, 2: {}), {} crashes, {} MDS restarts, {} permanent failures ({} groups rebuilt), {} writes acknowledged ({} failed with an error), {} reads checked ({} failed), {} client retries, {} primary migrations, {} reassignments after failures, {} standbys ({} messages lost to standby), {} logged writes, {} bytes reclaimed, {} blocks read back at the end ({} schedules' final reads went on past the end, by up to {} ms; {} waited for a lapsed lease's renewal, by up to {} ms), {} messages dropped and {} delayed, {} writes of crashed clients finished by servers after the crash, {} reads of a write its crashed client abandoned after an older one (the paper's limit, in {} schedules)",
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
        sum(|o| (o.read_late_ns > 0) as u64),
        outcomes.iter().map(|o| o.read_late_ns).max().unwrap_or(0) / MS,
        sum(|o| (o.settle_late_ns > 0) as u64),
        outcomes.iter().map(|o| o.settle_late_ns).max().unwrap_or(0) / MS,
        sum(|o| o.dropped),
        sum(|o| o.delayed),
        sum(|o| o.orphans_finished),
        sum(|o| o.diverged_reads),
        sum(|o| (o.diverged_reads > 0) as u64),
    );
    assert!(sum(|o| o.counts.writes_acked) > 0);
    // §3.6 is exercised, not merely compiled: over a family's run (one replayed seed may
    // never read logged data), primaries' own replicas serve reads of logged writes and
    // reclaim skips rewriting them.
    if outcomes.len() >= 20 {
        assert!(
            sum(|o| o.local_reads) > 0 && sum(|o| o.reclaim_local_bytes) > 0,
            "no logged write was read from, or reclaimed past, a primary's own replica"
        );
    }
}

/// A seed replays event for event (same fingerprint, same outcome), long and short; another
/// seed is another run.
#[test]
fn a_schedule_replays_event_for_event() {
    let a = run_short(3).expect("short schedule 3");
    let b = run_short(3).expect("short schedule 3");
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert!(
        a.counts.writes_acked > 0 && (a.crashes > 0 || a.mds_crash),
        "{a:?}"
    );
    assert_ne!(a.hash, run_short(4).expect("short schedule 4").hash);
    let long = run(5).expect("schedule 5");
    assert_eq!(long.hash, run(5).expect("schedule 5").hash);
}

#[test]
fn one_schedule_logs_and_reclaims() {
    let outcome = run(0).unwrap_or_else(|e| panic!("schedule 0: {e}"));
    println!("{outcome:?}");
    assert!(outcome.counts.writes_acked > 0);
}
