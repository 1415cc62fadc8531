//! The store on the simulator (the simulated driver): a client issues concurrent writes and
//! deletes of 4 KiB blocks to one store whose log wraps many times, while the store node crashes
//! at random instants (unflushed and in-flight writes kept, lost or torn) and recovers. Every
//! read, including a full sweep after each recovery, must return the latest acknowledged version
//! of a block or one issued since, never a version an acknowledged write or delete replaced, and
//! never bytes that do not belong to the version returned.

/// The allocator of the seeded schedules (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use cordillera_host::{DiskPort, Durability};
use cordillera_models::presets;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, World, WorldBuilder};
use cordillera_vstore::store::{Config, Reply, Request, Store, StoreError};

const BLOCK: u64 = 4096;
const BLOCKS: u64 = 48;
const LOG_BYTES: u64 = 160 * 1024;
const CLIENT: u64 = 7;
const STORE: NodeId = 1;
const OUTSTANDING_MAX: usize = 8;
const REQUEST_TIMEOUT_NS: Nanos = 300_000_000;

#[derive(Clone, Debug, Hash)]
enum Msg {
    Request { id: u64, request: Request },
    Reply { id: u64, reply: Reply },
}

fn pattern(block: u64, version: u64) -> Vec<u8> {
    let mut data = vec![(block * 31 + version) as u8; BLOCK as usize];
    data[..8].copy_from_slice(&block.to_le_bytes());
    data[8..16].copy_from_slice(&version.to_le_bytes());
    data
}

// ---------------------------------------------------------------------------------------------
// The store node: the sans-I/O store core, unchanged, on the simulated disk.

struct StoreNode {
    store: Store,
    out: Vec<Outgoing<Msg>>,
    io: Vec<IoCommand>,
    /// The store's disk: a durable write step is the write and then a flush; the store hears
    /// of it only when both are done (a crash in between loses it, unacknowledged).
    disk: DiskPort,
}

/// Durable write steps completed, over every schedule (to show that they are exercised).
static DURABLE_STEPS: AtomicU64 = AtomicU64::new(0);
/// Live tail records copied forward by cleaning, over every schedule and store life.
static CLEANED: AtomicU64 = AtomicU64::new(0);

impl StoreNode {
    fn pump(&mut self) {
        while let Some(op) = self.store.poll_disk() {
            self.io.extend(self.disk.submit(op));
        }
        while let Some((id, reply)) = self.store.poll_reply() {
            self.out.push(Outgoing {
                to: 0,
                message: Msg::Reply { id, reply },
                bytes: 4200,
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The client: random writes and deletes, reads, and the checks.

#[derive(Default)]
struct BlockModel {
    /// Versions written (issued) and the highest acknowledged.
    issued_writes: BTreeSet<u64>,
    acked_write: u64,
    /// Highest delete version issued and acknowledged.
    issued_delete: u64,
    acked_delete: u64,
}

enum Pending {
    Write {
        block: u64,
        version: u64,
    },
    Delete {
        block: u64,
        version: u64,
    },
    /// A read and what was acknowledged when it was issued.
    Read {
        block: u64,
        acked_write: u64,
        acked_delete: u64,
    },
    /// Acknowledged delete versions per block when it was issued.
    ReadAny {
        acked_deletes: Vec<u64>,
    },
}

struct ClientNode {
    rng: SimRng,
    next_id: u64,
    next_version: u64,
    blocks: BTreeMap<u64, BlockModel>,
    pending: FxHashMap<u64, (Nanos, Pending)>,
    wake_at: Option<Nanos>,
    /// Blocks still to read in the current verification sweep.
    sweep: Vec<u64>,
    stop_at: Nanos,
    out: Vec<Outgoing<Msg>>,
    pub checked_reads: u64,
    pub acked: u64,
    pub sweeps: u64,
}

impl ClientNode {
    fn send(&mut self, now: Nanos, request: Request, pending: Pending) {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, (now, pending));
        self.out.push(Outgoing {
            to: STORE,
            message: Msg::Request { id, request },
            bytes: 4200,
        });
    }

    fn issue(&mut self, now: Nanos) {
        while self.pending.len() < OUTSTANDING_MAX {
            if let Some(block) = self.sweep.pop() {
                self.read(now, block);
                continue;
            }
            if now >= self.stop_at {
                break;
            }
            let roll = self.rng.unit();
            if roll < 0.4 {
                // Reclaim the way the off-loading client does: the range nearest the log tail,
                // then delete it.
                let acked_deletes = (0..BLOCKS)
                    .map(|b| self.blocks.get(&b).map_or(0, |m| m.acked_delete))
                    .collect();
                self.send(
                    now,
                    Request::ReadAny { client: CLIENT },
                    Pending::ReadAny { acked_deletes },
                );
                continue;
            }
            let block = self.rng.below(BLOCKS);
            let m = self.blocks.entry(block).or_default();
            if roll < 0.85 {
                self.next_version += 1;
                let version = self.next_version;
                m.issued_writes.insert(version);
                self.send(
                    now,
                    Request::Write {
                        client: CLIENT,
                        volume: 1,
                        offset_bytes: block * BLOCK,
                        version,
                        data: pattern(block, version),
                    },
                    Pending::Write { block, version },
                );
            } else {
                self.read(now, block);
            }
        }
        self.wake_at = Some(now + 2_000_000);
    }

    fn read(&mut self, now: Nanos, block: u64) {
        let m = self.blocks.entry(block).or_default();
        let (acked_write, acked_delete) = (m.acked_write, m.acked_delete);
        self.send(
            now,
            Request::Read {
                client: CLIENT,
                offset_bytes: block * BLOCK,
                length_bytes: BLOCK,
            },
            Pending::Read {
                block,
                acked_write,
                acked_delete,
            },
        );
    }

    fn check_read(
        &mut self,
        block: u64,
        acked_write: u64,
        acked_delete: u64,
        pieces: Vec<(cordillera_vstore::store::Extent, Vec<u8>)>,
    ) {
        let m = &self.blocks[&block];
        self.checked_reads += 1;
        if pieces.is_empty() {
            // Nothing stored: only if every acknowledged write was deleted (acknowledged or
            // concurrently issued delete).
            assert!(
                acked_write <= acked_delete.max(m.issued_delete),
                "block {block}: acknowledged version {acked_write} lost"
            );
            return;
        }
        assert_eq!(pieces.len(), 1, "one write covers a whole block");
        let (extent, data) = &pieces[0];
        let v = extent.version;
        assert_eq!(
            (extent.offset_bytes, extent.length_bytes),
            (block * BLOCK, BLOCK)
        );
        assert!(
            m.issued_writes.contains(&v),
            "block {block}: version {v} was never written"
        );
        assert!(
            v >= acked_write,
            "block {block}: stale version {v} after acknowledged {acked_write}"
        );
        assert!(
            v > acked_delete,
            "block {block}: version {v} returned after an acknowledged delete of {acked_delete}"
        );
        assert!(
            data == &pattern(block, v),
            "block {block}: bytes of version {v} are wrong"
        );
    }
}

enum Node {
    Client(Box<ClientNode>),
    Store(Box<StoreNode>),
}

impl Core for Node {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        match self {
            Node::Client(c) => c.issue(now),
            Node::Store(s) => s.pump(),
        }
    }

    fn handle_message(&mut self, now: Nanos, _from: NodeId, message: Msg) {
        match (self, message) {
            (Node::Store(s), Msg::Request { id, request }) => {
                s.store.handle_request(now, id, request);
                s.pump();
            }
            (Node::Client(c), Msg::Reply { id, reply }) => {
                let Some((_, pending)) = c.pending.remove(&id) else {
                    return;
                };
                match (pending, reply) {
                    (Pending::Write { block, version }, Reply::Done) => {
                        let m = c.blocks.get_mut(&block).unwrap();
                        m.acked_write = m.acked_write.max(version);
                        c.acked += 1;
                    }
                    (Pending::Delete { block, version }, Reply::Done) => {
                        let m = c.blocks.get_mut(&block).unwrap();
                        m.acked_delete = m.acked_delete.max(version);
                        c.acked += 1;
                    }
                    (
                        Pending::Read {
                            block,
                            acked_write,
                            acked_delete,
                        },
                        Reply::Read(pieces),
                    ) => c.check_read(block, acked_write, acked_delete, pieces),
                    (Pending::Read { block, .. }, Reply::Error(StoreError::Recovering)) => {
                        c.sweep.push(block)
                    }
                    (Pending::ReadAny { acked_deletes }, Reply::ReadAny(Some((extent, data)))) => {
                        let block = extent.offset_bytes / BLOCK;
                        let v = extent.version;
                        let m = &c.blocks[&block];
                        assert!(
                            m.issued_writes.contains(&v) && v > acked_deletes[block as usize],
                            "read_any returned version {v} of block {block}, deleted"
                        );
                        assert!(
                            data == pattern(block, v),
                            "read_any: bytes of version {v} of block {block} are wrong"
                        );
                        c.blocks.get_mut(&block).unwrap().issued_delete = m.issued_delete.max(v);
                        c.send(
                            now,
                            Request::Delete {
                                client: CLIENT,
                                volume: 1,
                                offset_bytes: block * BLOCK,
                                length_bytes: BLOCK,
                                version: v,
                                generation: 0,
                            },
                            Pending::Delete { block, version: v },
                        );
                    }
                    (Pending::ReadAny { .. }, Reply::ReadAny(None)) => {}
                    (_, Reply::Error(StoreError::Recovering | StoreError::Full)) => {}
                    (_, other) => panic!("unexpected reply {other:?}"),
                }
                c.issue(now);
            }
            _ => panic!("misrouted message"),
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        match self {
            Node::Client(c) => {
                // Requests unanswered for long went to a store that crashed: forget them, and
                // sweep every block once the store is back.
                let before = c.pending.len();
                c.pending
                    .retain(|_, (at, _)| now - *at < REQUEST_TIMEOUT_NS);
                if c.pending.len() < before && c.sweep.is_empty() {
                    c.sweep = (0..BLOCKS).collect();
                    c.sweeps += 1;
                }
                c.issue(now);
            }
            Node::Store(s) => {
                s.store.handle_timeout(now);
                s.pump();
            }
        }
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        let Node::Store(s) = self else {
            panic!("the client does no I/O")
        };
        let cleaned = s.store.stats().cleaned_records;
        let steps = s.disk.durable_steps();
        let Some(done) = s.disk.complete(done, &mut s.io) else {
            return;
        };
        DURABLE_STEPS.fetch_add(s.disk.durable_steps() - steps, Ordering::Relaxed);
        s.store.handle_disk(now, done);
        CLEANED.fetch_add(s.store.stats().cleaned_records - cleaned, Ordering::Relaxed);
        s.pump();
    }

    fn poll_message(&mut self) -> Option<Outgoing<Msg>> {
        match self {
            Node::Client(c) => c.out.pop(),
            Node::Store(s) => s.out.pop(),
        }
    }

    fn poll_io(&mut self) -> Option<IoCommand> {
        match self {
            Node::Client(_) => None,
            Node::Store(s) => {
                if s.io.is_empty() {
                    None
                } else {
                    Some(s.io.remove(0))
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match self {
            Node::Client(c) => c.wake_at,
            Node::Store(s) => s.store.poll_timeout(),
        }
    }
}

struct Outcome {
    acked: u64,
    checked_reads: u64,
    crashes: usize,
    /// Writes the world reordered (and crashes that shuffled writes in flight).
    reordered: u64,
    hash: u64,
}

fn run(seed: u64) -> Outcome {
    run_with(seed, 3)
}

fn run_with(seed: u64, crash_count: usize) -> Outcome {
    let config = Config {
        tail_idle_ns: 5_000_000,
        scan_chunk_bytes: 16 * 1024,
        // From one recovery read at a time to several completing out of order.
        scan_reads_ahead: 1 + (seed % 4) as usize,
        ..Config::new(LOG_BYTES)
    };
    let mut formatted = false;
    let mut lives = 0u64;
    let builder = WorldBuilder {
        new_core: Box::new(move |id| {
            if id == 0 {
                return Node::Client(Box::new(ClientNode {
                    rng: SimRng::new(seed, 10),
                    next_id: 0,
                    next_version: 0,
                    blocks: BTreeMap::new(),
                    pending: FxHashMap::default(),
                    wake_at: None,
                    sweep: Vec::new(),
                    stop_at: 1_500_000_000,
                    out: Vec::new(),
                    checked_reads: 0,
                    acked: 0,
                    sweeps: 0,
                }));
            }
            // A seed per life: each life draws its own epochs, as a real store seeded at start
            // does (with one seed for every recovery, two lives' records could chain).
            lives += 1;
            let store = if formatted {
                Store::recover(config, seed ^ id as u64 ^ lives << 32, 0)
            } else {
                Store::format(config, 42, seed)
            };
            formatted = true;
            Node::Store(Box::new(StoreNode {
                store,
                out: Vec::new(),
                io: Vec::new(),
                disk: DiskPort::new(0, 0, Durability::WriteThenFlush),
            }))
        }),
        new_device: Box::new(|_| presets::device("ssd").unwrap()),
        crash_model: CrashModel::default(),
        flush_ns: 50_000,
        early_reads: 0.0,
        reorder: 0.5,
    };
    let network = Network::new(
        NetworkParams::sierra_testbed(1, 2),
        NetworkFaults::default(),
        SimRng::new(seed, 1),
    );
    let mut world = World::new(builder, network, SimRng::new(seed, 2));
    world.schedule_random_crashes(&[STORE], crash_count, 50_000_000, 1_400_000_000, 20e6);
    world.run_until(3_000_000_000);
    // Liveness: the quiet store (no crash after 1.4 s, no request after 1.5 s) has answered
    // every request it accepted; the client has nothing outstanding.
    if let Some(Node::Store(s)) = world.core(STORE) {
        assert!(
            s.store.is_ready() && s.store.unanswered() == 0,
            "schedule {seed}: the quiet store still has {} requests unanswered: {}",
            s.store.unanswered(),
            s.store.describe()
        );
    }
    let Node::Client(client) = world.core(0).unwrap() else {
        unreachable!()
    };
    assert!(
        client.pending.is_empty(),
        "schedule {seed}: {} requests still outstanding at the end",
        client.pending.len()
    );
    let crashes = world
        .faults
        .iter()
        .filter(|f| matches!(f, cordillera_sim::world::NodeFault::Crashed { .. }))
        .count();
    Outcome {
        acked: client.acked,
        checked_reads: client.checked_reads,
        crashes,
        reordered: world.reordered,
        hash: world.hash.0,
    }
}

/// 100 fixed seeds, then fresh ones for 20 s (about 600 on two cores).
const BUDGET: cordillera_testkit::Budget = cordillera_testkit::Budget {
    seconds: 20.0,
    least: 100,
};

#[test]
fn acknowledged_writes_survive_crashes_and_wraps() {
    let schedules = cordillera_testkit::Schedules::from_env("VSTORE", &[], 100, BUDGET);
    let ran = schedules.run(|seed| Ok(run(seed)));
    schedules.write_hashes(&ran, |o| o.hash);
    let ok: Vec<&Outcome> = ran
        .results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .collect();
    let (acked, reads, crashes) = (
        ok.iter().map(|o| o.acked).sum::<u64>(),
        ok.iter().map(|o| o.checked_reads).sum::<u64>(),
        ok.iter().map(|o| o.crashes).sum::<usize>(),
    );
    schedules.summary(
        &ran,
        &[
            ("crashes", crashes as u64),
            ("reordered", ok.iter().map(|o| o.reordered).sum::<u64>()),
            ("writes_acked", acked),
            ("reads_checked", reads),
        ],
    );
    cordillera_testkit::all_succeeded(
        &ran.results,
        "VSTORE",
        "cargo nextest run -p cordillera-vstore --test durability acknowledged_writes --no-capture",
    );
    if schedules.single {
        return;
    }
    let n = ran.len() as u64;
    let durable_steps = DURABLE_STEPS.load(Ordering::Relaxed);
    let cleaned = CLEANED.load(Ordering::Relaxed);
    println!("vstore durability: {n} schedules, {crashes} crashes, {acked} acknowledged writes and deletes ({durable_steps} by durable write steps), {reads} reads checked, {cleaned} live tail records cleaned");
    // The schedules exercise what they claim to: many crashes, wraps (log ≪ data written), reads.
    assert!(crashes as u64 >= 2 * n, "{crashes} crashes");
    assert!(
        acked > n * 100 && reads > n * 50,
        "{acked} acks, {reads} reads"
    );
    assert!(durable_steps > n, "{durable_steps} durable write steps");
    assert!(cleaned > n, "{cleaned} records cleaned");
}

#[test]
fn a_schedule_replays_event_for_event() {
    assert_eq!(run(5).hash, run(5).hash);
    assert_ne!(run(5).hash, run(6).hash);
}
