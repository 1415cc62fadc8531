//! The network: per-node NICs (bandwidth, latency), nodes in racks, each rack's top-of-rack
//! switch joined to the core by an uplink (Sierra §4.3: 1 Gbps ports, 10 Gbps uplinks). Links
//! are store-and-forward: a message occupies the sender's NIC, then (across racks) the source
//! rack's uplink and the destination rack's downlink, then the receiver's NIC.
//! With [`NetworkParams::cut_through`] a message enters each next link one packet (1,500 bytes)
//! after it entered the one before, as switches forward packets rather than whole messages:
//! every link is still occupied for the whole message, but a 64 KiB answer arrives about one
//! NIC's serialization after it was sent instead of two (the default keeps the lab's figures).
//!
//! Each link keeps two queues. Messages larger than [`INTERLEAVED_BYTES`] (bulk transfers)
//! queue in order; smaller ones (requests, answers, heartbeats) queue in order among
//! themselves but not behind bulk transfers, whose remaining time they lengthen by their own:
//! real links interleave the packets of their connections, so a heartbeat waits for a few
//! packets of a 64 MB copy, not for all of it. (With one queue, a server copying 64 MB pieces
//! held its heartbeats back for seconds and lost its leases.)
//!
//! Faults, all drawn from the network's own random stream and reported as [`Injected`]:
//! drop, duplicate, extra delay (exponential), and partitions between sets of nodes for a time.

use crate::kernel::Nanos;
use crate::rng::SimRng;

pub type NodeId = usize;

#[derive(Clone, Debug)]
pub struct NetworkParams {
    /// Rack of each node.
    pub racks_of_nodes: Vec<usize>,
    pub nic_bits_per_s: f64,
    pub uplink_bits_per_s: f64,
    /// Propagation and switching latency, one way.
    pub latency_ns: u64,
    /// Packets forwarded as they arrive rather than whole messages (see the module's
    /// documentation).
    pub cut_through: bool,
}

impl NetworkParams {
    /// `racks` racks of `per_rack` nodes with Sierra's testbed links: 1 Gbps NICs, 10 Gbps
    /// uplinks, 50 µs one-way latency.
    pub fn sierra_testbed(racks: usize, per_rack: usize) -> NetworkParams {
        NetworkParams {
            racks_of_nodes: (0..racks * per_rack).map(|n| n / per_rack).collect(),
            nic_bits_per_s: 1e9,
            uplink_bits_per_s: 10e9,
            latency_ns: 50_000,
            cut_through: false,
        }
    }
}

/// Fault rates; all zero by default.
#[derive(Clone, Copy, Debug, Default)]
pub struct NetworkFaults {
    pub drop: f64,
    pub duplicate: f64,
    pub delay: f64,
    pub delay_mean_ns: f64,
    /// A delayed message holds back the ones sent after it between the same two nodes (a TCP
    /// connection that stalls: its bytes still arrive in order); otherwise it is overtaken.
    pub delay_in_order: bool,
}

/// A fault the simulator injected, so a checker never mistakes it for a bug.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injected {
    Dropped {
        from: NodeId,
        to: NodeId,
        at: Nanos,
    },
    Duplicated {
        from: NodeId,
        to: NodeId,
        at: Nanos,
    },
    Delayed {
        from: NodeId,
        to: NodeId,
        at: Nanos,
        by_ns: u64,
    },
    Partitioned {
        from: NodeId,
        to: NodeId,
        at: Nanos,
    },
}

#[derive(Clone, Debug)]
struct Partition {
    side_a: Vec<NodeId>,
    side_b: Vec<NodeId>,
    from: Nanos,
    until: Nanos,
}

/// Traffic counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub messages: u64,
    pub bytes: u64,
    pub cross_rack_messages: u64,
    pub cross_rack_bytes: u64,
}

/// Messages up to this size do not queue behind larger ones on a link (see the module doc).
pub const INTERLEAVED_BYTES: u64 = 64 * 1024;

/// When a link is free: for bulk transfers, and for small messages.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    bulk_free: Nanos,
    small_free: Nanos,
}

impl Link {
    /// Carries a message arriving at `t` that takes `d` on this link; when it has crossed.
    fn carry(&mut self, t: Nanos, d: Nanos, small: bool) -> Nanos {
        if small {
            let end = t.max(self.small_free) + d;
            self.small_free = end;
            if self.bulk_free > t {
                self.bulk_free += d;
            }
            end
        } else {
            let end = t.max(self.bulk_free).max(self.small_free) + d;
            self.bulk_free = end;
            end
        }
    }
}

pub struct Network {
    params: NetworkParams,
    faults: NetworkFaults,
    rng: SimRng,
    nic_tx: Vec<Link>,
    nic_rx: Vec<Link>,
    uplink: Vec<Link>,
    downlink: Vec<Link>,
    partitions: Vec<Partition>,
    /// The latest delivery between each pair of nodes (with `delay_in_order`).
    last_delivery: rustc_hash::FxHashMap<(NodeId, NodeId), Nanos>,
    pub traffic: Traffic,
    pub injected: Vec<Injected>,
}

impl Network {
    pub fn new(params: NetworkParams, faults: NetworkFaults, rng: SimRng) -> Network {
        let nodes = params.racks_of_nodes.len();
        let racks = params.racks_of_nodes.iter().max().map_or(0, |r| r + 1);
        Network {
            params,
            faults,
            rng,
            last_delivery: Default::default(),
            nic_tx: vec![Link::default(); nodes],
            nic_rx: vec![Link::default(); nodes],
            uplink: vec![Link::default(); racks],
            downlink: vec![Link::default(); racks],
            partitions: Vec::new(),
            traffic: Traffic::default(),
            injected: Vec::new(),
        }
    }

    pub fn nodes(&self) -> usize {
        self.nic_tx.len()
    }

    /// Cuts every path between `side_a` and `side_b` from `from` until `until`.
    pub fn partition(
        &mut self,
        side_a: Vec<NodeId>,
        side_b: Vec<NodeId>,
        from: Nanos,
        until: Nanos,
    ) {
        self.partitions.push(Partition {
            side_a,
            side_b,
            from,
            until,
        });
    }

    fn partitioned(&self, a: NodeId, b: NodeId, at: Nanos) -> bool {
        self.partitions.iter().any(|p| {
            (p.from..p.until).contains(&at)
                && ((p.side_a.contains(&a) && p.side_b.contains(&b))
                    || (p.side_a.contains(&b) && p.side_b.contains(&a)))
        })
    }

    /// Sends `bytes` from `from` to `to` at `now`; returns the delivery times (none if dropped or
    /// partitioned, two if duplicated).
    pub fn send(&mut self, now: Nanos, from: NodeId, to: NodeId, bytes: u64) -> Vec<Nanos> {
        if self.partitioned(from, to, now) {
            self.injected
                .push(Injected::Partitioned { from, to, at: now });
            return Vec::new();
        }
        if self.faults.drop > 0.0 && self.rng.chance(self.faults.drop) {
            self.injected.push(Injected::Dropped { from, to, at: now });
            return Vec::new();
        }
        let mut deliveries = vec![self.transmit(now, from, to, bytes)];
        if self.faults.delay > 0.0 && self.rng.chance(self.faults.delay) {
            let by_ns = self.rng.exponential(self.faults.delay_mean_ns) as u64;
            deliveries[0] += by_ns;
            self.injected.push(Injected::Delayed {
                from,
                to,
                at: now,
                by_ns,
            });
        }
        if self.faults.delay_in_order {
            let last = self.last_delivery.entry((from, to)).or_insert(0);
            deliveries[0] = deliveries[0].max(*last);
            *last = deliveries[0];
        }
        if self.faults.duplicate > 0.0 && self.rng.chance(self.faults.duplicate) {
            let again = self.transmit(now, from, to, bytes);
            deliveries.push(again);
            self.injected
                .push(Injected::Duplicated { from, to, at: now });
        }
        deliveries
    }

    /// The arrival time of a message through the links, occupying them.
    fn transmit(&mut self, now: Nanos, from: NodeId, to: NodeId, bytes: u64) -> Nanos {
        let bits = bytes as f64 * 8.0;
        let on = |rate: f64| (bits / rate * 1e9).ceil() as u64;
        let nic = on(self.params.nic_bits_per_s);
        let small = bytes <= INTERLEAVED_BYTES;
        let (rack_from, rack_to) = (
            self.params.racks_of_nodes[from],
            self.params.racks_of_nodes[to],
        );
        self.traffic.messages += 1;
        self.traffic.bytes += bytes;
        let mut hops = [(Hop::NicTx(from), nic); 4];
        let mut n = 1;
        if rack_from != rack_to {
            let uplink = on(self.params.uplink_bits_per_s);
            hops[1] = (Hop::Uplink(rack_from), uplink);
            hops[2] = (Hop::Downlink(rack_to), uplink);
            n = 3;
            self.traffic.cross_rack_messages += 1;
            self.traffic.cross_rack_bytes += bytes;
        }
        hops[n] = (Hop::NicRx(to), nic);
        // The message's head enters each link when the link before has carried all of it
        // (store-and-forward), or its first packet (cut-through); it has arrived when every
        // link has carried all of it.
        let packet = bytes.min(PACKET_BYTES) as f64 / bytes.max(1) as f64;
        let (mut head, mut arrived) = (now, now);
        for &(hop, d) in &hops[..=n] {
            let link = match hop {
                Hop::NicTx(n) => &mut self.nic_tx[n],
                Hop::Uplink(r) => &mut self.uplink[r],
                Hop::Downlink(r) => &mut self.downlink[r],
                Hop::NicRx(n) => &mut self.nic_rx[n],
            };
            let end = link.carry(head, d, small);
            arrived = arrived.max(end);
            head = if self.params.cut_through {
                end - d + (d as f64 * packet).ceil() as u64
            } else {
                end
            };
        }
        arrived + self.params.latency_ns
    }
}

/// A link a message crosses.
#[derive(Clone, Copy)]
enum Hop {
    NicTx(NodeId),
    Uplink(usize),
    Downlink(usize),
    NicRx(NodeId),
}

/// The packet a cut-through switch forwards as soon as it has it.
const PACKET_BYTES: u64 = 1500;

#[cfg(test)]
mod tests {
    use super::*;

    fn net(faults: NetworkFaults) -> Network {
        Network::new(
            NetworkParams::sierra_testbed(2, 3),
            faults,
            SimRng::new(1, 7),
        )
    }

    #[test]
    fn small_messages_do_not_queue_behind_a_bulk_transfer_but_delay_the_next_one() {
        let mut n = net(NetworkFaults::default());
        // 64 MiB on a 1 Gbps NIC: about 0.54 s to send and as long to receive.
        let bulk = n.send(0, 0, 1, 64 << 20)[0];
        assert!(bulk > 1_000_000_000, "{bulk}");
        // A heartbeat from the same node right after: its own 2 × 0.8 µs and the latency.
        let heartbeat = n.send(1_000, 0, 2, 100)[0];
        assert!(heartbeat < 1_000 + 100_000, "{heartbeat}");
        // A second bulk transfer waits for the first.
        let second = n.send(2_000, 0, 1, 125_000)[0];
        assert!(second >= bulk + 1_000_000, "{second} after {bulk}");
        // A small message to the receiver of both: not behind them, but it lengthens them.
        let small = n.send(3_000, 5, 1, 100)[0];
        assert!(small < 3_000 + 100_000, "{small}");
        let third = n.send(4_000, 0, 1, 125_000)[0];
        assert!(third >= second + 1_000_000 + 800, "{third} after {second}");
        // Small messages keep their order among themselves.
        let a = n.send(3_000, 3, 4, 60_000)[0];
        let b = n.send(3_000, 3, 4, 100)[0];
        assert!(b > a, "{a} {b}");
    }

    #[test]
    fn bandwidth_latency_and_cross_rack_accounting() {
        let mut n = net(NetworkFaults::default());
        // 125,000 bytes = 1 ms on a 1 Gbps NIC, twice (send and receive), plus latency.
        assert_eq!(n.send(0, 0, 1, 125_000), vec![2_000_000 + 50_000]);
        // Back to back on the same NIC: the second waits for the first.
        assert_eq!(n.send(0, 0, 2, 125_000), vec![3_000_000 + 50_000]);
        // Across racks: plus the 10 Gbps uplink and downlink (0.1 ms each).
        assert_eq!(
            n.send(10_000_000, 1, 4, 125_000),
            vec![10_000_000 + 2_200_000 + 50_000]
        );
        assert_eq!(n.traffic.messages, 3);
        assert_eq!(
            (n.traffic.cross_rack_messages, n.traffic.cross_rack_bytes),
            (1, 125_000)
        );
        // Many senders into one receiver queue on its NIC.
        let mut n = net(NetworkFaults::default());
        let arrivals: Vec<Nanos> = (1..6).map(|from| n.send(0, from, 0, 125_000)[0]).collect();
        assert!(
            arrivals.windows(2).all(|w| w[1] >= w[0] + 1_000_000),
            "{arrivals:?}"
        );
    }

    #[test]
    fn cut_through_forwards_packets_and_still_occupies_every_link() {
        let mut n = Network::new(
            NetworkParams {
                cut_through: true,
                ..NetworkParams::sierra_testbed(2, 3)
            },
            NetworkFaults::default(),
            SimRng::new(1, 7),
        );
        // 125,000 bytes: 1 ms on the sending NIC; the receiving NIC starts one packet (12 µs)
        // later and ends 12 µs after the sender's, against 2 ms store-and-forward.
        assert_eq!(n.send(0, 0, 1, 125_000), vec![1_000_000 + 12_000 + 50_000]);
        // Across racks: the uplinks add a packet each, not 0.1 ms each.
        assert_eq!(
            n.send(10_000_000, 1, 4, 125_000),
            vec![10_000_000 + 1_000_000 + 12_000 + 2 * 1_200 + 50_000]
        );
        // The links are still busy for the whole message: the next one from node 0 waits for
        // the first to leave its NIC.
        assert_eq!(n.send(0, 0, 2, 125_000), vec![2_000_000 + 12_000 + 50_000]);
        // A message smaller than a packet is as store-and-forward.
        let mut s = net(NetworkFaults::default());
        assert_eq!(
            n.send(20_000_000, 3, 5, 1_000),
            s.send(20_000_000, 3, 5, 1_000)
        );
    }

    /// A delay overtaken by later messages unless the link keeps order (a stalled TCP
    /// connection), when the later ones wait behind it.
    #[test]
    fn delays_keep_a_link_in_order_when_asked() {
        for in_order in [false, true] {
            let mut n = net(NetworkFaults {
                delay: 0.2,
                delay_mean_ns: 5e6,
                delay_in_order: in_order,
                ..NetworkFaults::default()
            });
            let arrivals: Vec<Nanos> = (0..500u64)
                .flat_map(|i| n.send(i * 1_000, 0, 1, 100))
                .collect();
            let ordered = arrivals.windows(2).all(|w| w[0] <= w[1]);
            assert_eq!(ordered, in_order, "in order: {in_order}");
        }
    }

    #[test]
    fn faults_are_drawn_from_the_seed_and_tagged() {
        let faults = NetworkFaults {
            drop: 0.1,
            duplicate: 0.1,
            delay: 0.1,
            delay_mean_ns: 1e6,
            delay_in_order: false,
        };
        let run = || {
            let mut n = net(faults);
            let delivered: Vec<usize> = (0..2_000)
                .map(|i| {
                    n.send(i * 1_000_000, i as usize % 6, (i as usize + 1) % 6, 100)
                        .len()
                })
                .collect();
            (delivered, n.injected)
        };
        let (a, injected) = run();
        assert_eq!(
            (a.clone(), injected.clone()),
            run(),
            "same seed, same faults"
        );
        let dropped = a.iter().filter(|d| **d == 0).count();
        let duplicated = a.iter().filter(|d| **d == 2).count();
        assert!((120..280).contains(&dropped), "{dropped}");
        assert!((120..280).contains(&duplicated), "{duplicated}");
        assert_eq!(
            injected
                .iter()
                .filter(|i| matches!(i, Injected::Dropped { .. }))
                .count(),
            dropped
        );
        assert!(injected
            .iter()
            .any(|i| matches!(i, Injected::Delayed { .. })));
    }

    #[test]
    fn partitions_cut_both_ways_for_their_time() {
        let mut n = net(NetworkFaults::default());
        n.partition(vec![0, 1], vec![2], 1_000, 2_000);
        assert!(n.send(1_500, 0, 2, 10).is_empty());
        assert!(n.send(1_500, 2, 1, 10).is_empty());
        assert_eq!(n.send(1_500, 0, 1, 10).len(), 1, "within a side");
        assert_eq!(n.send(2_000, 0, 2, 10).len(), 1, "healed");
        assert_eq!(n.injected.len(), 2);
    }
}
