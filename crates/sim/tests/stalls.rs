//! Device stalls ([`World::stall_ios`]): a request the device is done with may complete long
//! after later ones, so a write that stalls lands after a later write to the same blocks, and a
//! flush waits for it.

use cordillera_models::presets;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams, NodeId};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, World, WorldBuilder};

/// Writes 1 then, once 1 is submitted, 2 to the same block, then a flush; records the order
/// of completions.
#[derive(Default)]
struct Writer {
    io: Vec<IoCommand>,
    done: Vec<(Nanos, u64)>,
}

impl Core for Writer {
    type Message = ();

    fn handle_start(&mut self, _now: Nanos) {
        for id in [3, 2, 1] {
            self.io.push(match id {
                3 => IoCommand::Flush { id },
                _ => IoCommand::Write {
                    id,
                    offset_bytes: 0,
                    data: vec![id as u8; 4096],
                },
            });
        }
    }

    fn handle_message(&mut self, _now: Nanos, _from: NodeId, _message: ()) {}

    fn handle_timeout(&mut self, _now: Nanos) {}

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        let id = match done {
            IoDone::Written { id } | IoDone::Flushed { id } => id,
            IoDone::Read { id, .. } => id,
        };
        self.done.push((now, id));
    }

    fn poll_message(&mut self) -> Option<Outgoing<()>> {
        None
    }

    fn poll_io(&mut self) -> Option<IoCommand> {
        self.io.pop()
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

fn run(seed: u64, stall: f64) -> (Vec<u64>, u8, u64) {
    let builder = WorldBuilder {
        new_core: Box::new(|_| Writer::default()),
        new_device: Box::new(|_| presets::device("ssd").unwrap()),
        crash_model: CrashModel::default(),
        flush_ns: 10_000,
        early_reads: 0.0,
        reorder: 0.0,
    };
    let network = Network::new(
        NetworkParams::sierra_testbed(1, 1),
        NetworkFaults::default(),
        SimRng::new(seed, 1),
    );
    let mut world = World::new(builder, network, SimRng::new(seed, 2));
    world.stall_ios(stall, 5_000_000.0);
    world.run_until(1_000_000_000);
    let node = world.core(0).expect("up");
    let order: Vec<u64> = node.done.iter().map(|&(_, id)| id).collect();
    let block = world.storage(0).read(0, 4096)[0];
    (order, block, world.stalls)
}

#[test]
fn a_stalled_write_lands_after_a_later_one_and_a_flush_waits_for_it() {
    let mut later_won = 0;
    let mut stalls = 0;
    for seed in 0..200 {
        let (order, block, n) = run(seed, 0.5);
        stalls += n;
        assert_eq!(order.len(), 3, "seed {seed}: {order:?}");
        assert_eq!(*order.last().unwrap(), 3, "the flush comes last: {order:?}");
        // The block holds the write that completed last.
        let last_write = order.iter().rev().find(|&&id| id != 3).copied().unwrap();
        assert_eq!(block as u64, last_write, "seed {seed}: {order:?}");
        if order[..2] == [2, 1] {
            later_won += 1;
        }
    }
    // Without stalls the device completes them in order, every time.
    for seed in 0..50 {
        assert_eq!(run(seed, 0.0), (vec![1, 2, 3], 2, 0));
    }
    assert!(stalls > 100, "{stalls}");
    assert!(
        later_won > 20,
        "the older write landed last in {later_won} of 200"
    );
}
