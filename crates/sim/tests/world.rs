//! The world end to end with a small durable-append protocol: a client appends records to
//! servers, each server writes and flushes before acknowledging. Under seeded crashes (with lost
//! and torn unflushed writes), dropped, duplicated and delayed messages and partitions:
//! every acknowledged record is on its server's disk (safety), every record is eventually
//! acknowledged (liveness), and a seed replays event for event (determinism).

/// The allocator of the seeded schedules (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cordillera_models::presets;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, World, WorldBuilder};

const RECORDS: u64 = 40;
const RETRY_NS: Nanos = 50_000_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Msg {
    Append { k: u64 },
    Ack { k: u64 },
}

fn record_bytes(server: NodeId, k: u64) -> Vec<u8> {
    let mut v = vec![(k % 251) as u8; 512];
    v[..8].copy_from_slice(&k.to_le_bytes());
    v[8] = server as u8;
    v
}

enum Role {
    Client {
        servers: Vec<NodeId>,
        /// Per server (in `servers`' order), bit k: record k acknowledged.
        acked: Vec<u64>,
        retry_at: Option<Nanos>,
    },
    Server {
        pending: Vec<(u64, NodeId)>,
    },
}

struct Node {
    id: NodeId,
    role: Role,
    out: Vec<Outgoing<Msg>>,
    io: Vec<IoCommand>,
}

impl Node {
    fn send_unacked(&mut self, now: Nanos) {
        let Role::Client {
            servers,
            acked,
            retry_at,
        } = &mut self.role
        else {
            return;
        };
        for (&s, &done) in servers.iter().zip(acked.iter()) {
            // A window of 4 outstanding records per server.
            for k in (0..RECORDS).filter(|k| done & (1 << k) == 0).take(4) {
                self.out.push(Outgoing {
                    to: s,
                    message: Msg::Append { k },
                    bytes: 600,
                });
            }
        }
        let all_done = acked.iter().all(|&done| done == (1 << RECORDS) - 1);
        *retry_at = (!all_done).then_some(now + RETRY_NS);
    }
}

impl Core for Node {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        self.send_unacked(now);
    }

    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Msg) {
        let id = self.id;
        match (&mut self.role, message) {
            (Role::Server { pending }, Msg::Append { k }) => {
                pending.push((k, from));
                self.io.push(IoCommand::Write {
                    id: k,
                    offset_bytes: k * 512,
                    data: record_bytes(id, k),
                });
            }
            (Role::Client { servers, acked, .. }, Msg::Ack { k }) => {
                let s = servers.iter().position(|&s| s == from).expect("a server");
                if acked[s] & (1 << k) == 0 {
                    acked[s] |= 1 << k;
                    self.send_unacked(now);
                }
            }
            _ => panic!("unexpected message"),
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.send_unacked(now);
    }

    fn handle_io(&mut self, _now: Nanos, done: IoDone) {
        let Role::Server { pending } = &mut self.role else {
            panic!("client does no I/O")
        };
        match done {
            IoDone::Written { id } => self.io.push(IoCommand::Flush { id }),
            IoDone::Flushed { id } => {
                // Acknowledge every request for this record: it is durable now.
                pending.retain(|(k, from)| {
                    if *k == id {
                        self.out.push(Outgoing {
                            to: *from,
                            message: Msg::Ack { k: id },
                            bytes: 64,
                        });
                        false
                    } else {
                        true
                    }
                });
            }
            IoDone::Read { .. } => panic!("no reads"),
        }
    }

    fn poll_message(&mut self) -> Option<Outgoing<Msg>> {
        self.out.pop()
    }

    fn poll_io(&mut self) -> Option<IoCommand> {
        self.io.pop()
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match &self.role {
            Role::Client { retry_at, .. } => *retry_at,
            Role::Server { .. } => None,
        }
    }
}

const SERVERS: [NodeId; 3] = [1, 2, 3];

fn world(seed: u64, faults: bool) -> World<Node> {
    let builder = WorldBuilder {
        new_core: Box::new(|id| Node {
            id,
            role: if id == 0 {
                Role::Client {
                    servers: SERVERS.to_vec(),
                    acked: vec![0; SERVERS.len()],
                    retry_at: None,
                }
            } else {
                Role::Server {
                    pending: Vec::new(),
                }
            },
            out: Vec::new(),
            io: Vec::new(),
        }),
        new_device: Box::new(|_| presets::device("ssd").unwrap()),
        crash_model: CrashModel::default(),
        flush_ns: 100_000,
        early_reads: 0.0,
        reorder: 0.5,
    };
    let net_faults = if faults {
        NetworkFaults {
            drop: 0.05,
            duplicate: 0.05,
            delay: 0.05,
            delay_mean_ns: 5e6,
            delay_in_order: false,
        }
    } else {
        NetworkFaults::default()
    };
    let network = Network::new(
        NetworkParams::sierra_testbed(2, 2),
        net_faults,
        SimRng::new(seed, 1),
    );
    let mut w = World::new(builder, network, SimRng::new(seed, 2));
    if faults {
        // Devices stall too: a write acknowledged after its flush may have stalled past later
        // writes; the flush waits for it.
        w.stall_ios(0.05, 5e6);
        w.schedule_random_crashes(&SERVERS, 4, 0, 200_000_000, 30e6);
        w.network
            .partition(vec![0], vec![2], 20_000_000, 80_000_000);
    }
    w
}

fn check(seed: u64) -> (u64, usize) {
    let mut w = world(seed, true);
    // Faults end by 0.3 s; the protocol must finish well within 20 s of quiet.
    w.run_until(20_000_000_000);
    let Role::Client { servers, acked, .. } = &w.core(0).expect("client never crashes").role else {
        unreachable!()
    };
    let acked: Vec<(NodeId, u64)> = servers
        .iter()
        .zip(acked)
        .flat_map(|(&s, &done)| {
            (0..RECORDS)
                .filter(move |k| done & (1 << k) != 0)
                .map(move |k| (s, k))
        })
        .collect();
    for &(server, k) in &acked {
        let on_disk = w.storage(server).read(k * 512, 512);
        assert_eq!(
            on_disk,
            record_bytes(server, k),
            "seed {seed}: acknowledged record {k} lost on server {server}; reproduce: SIM_SEED={seed} cargo test -p cordillera-sim --test world"
        );
    }
    assert_eq!(
        acked.len() as u64,
        SERVERS.len() as u64 * RECORDS,
        "seed {seed}: not every record acknowledged"
    );
    (w.hash.0, w.faults.len())
}

/// 50 fixed seeds, then fresh ones for 10 s (about 9,000 on two cores).
const BUDGET: cordillera_testkit::Budget = cordillera_testkit::Budget {
    seconds: 10.0,
    least: 50,
};

#[test]
fn acknowledged_records_survive_seeded_faults() {
    let schedules = cordillera_testkit::Schedules::from_env("SIM", &[], 50, BUDGET);
    let ran = schedules.run(|seed| Ok(check(seed)));
    schedules.write_hashes(&ran, |(hash, _)| *hash);
    let crashes: usize = ran
        .results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(_, crashes)| crashes))
        .sum();
    schedules.summary(&ran, &[("crashes", crashes as u64)]);
    cordillera_testkit::all_succeeded(
        &ran.results,
        "SIM",
        "cargo nextest run -p cordillera-sim --test world acknowledged_records --no-capture",
    );
    if schedules.single {
        return;
    }
    assert!(
        crashes >= ran.len() * 4,
        "crashes and restarts were injected: {crashes}"
    );
}

#[test]
fn a_seed_replays_event_for_event() {
    let (a, _) = check(7);
    let (b, _) = check(7);
    let (c, _) = check(8);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn crashes_lose_or_tear_unflushed_writes() {
    use cordillera_sim::storage::WriteFate;
    use cordillera_sim::world::NodeFault;
    let mut fates = [0usize; 3];
    for seed in 0..300 {
        let mut w = world(seed, true);
        w.run_until(20_000_000_000);
        for fault in &w.faults {
            if let NodeFault::Crashed {
                unflushed_fates, ..
            } = fault
            {
                for f in unflushed_fates {
                    fates[match f {
                        WriteFate::Kept => 0,
                        WriteFate::Lost => 1,
                        WriteFate::Torn(_) => 2,
                    }] += 1;
                }
            }
        }
    }
    assert!(
        fates.iter().all(|n| *n > 0),
        "every fate was injected at least once: {fates:?}"
    );
}
