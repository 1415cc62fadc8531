//! Nodes hosting sans-I/O cores, joined by the [`Network`], each with a disk ([`Device`] for
//! timing, [`SimStorage`] for contents), driven in virtual time with injected crashes.
//!
//! # Driver contract (both drivers follow it)
//!
//! ```text
//! after every handle_*(now, …) on a core:
//!     while let Some(out) = core.poll_message() { network.send(out) → Deliver events }
//!     while let Some(io)  = core.poll_io()      { disk.submit(io)   → IoDone later   }
//!     if let Some(t) = core.poll_timeout()      { Timer event at t                  }
//! ```
//!
//! A crash drops the core (its memory), everything in flight to or from the node, and each
//! unflushed write meets the fate of [`SimStorage::crash`]. A restart builds a new core, which
//! must recover from its disk, and calls `handle_start`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};

use crate::kernel::{EventHash, EventQueue, Nanos};
use crate::network::{Network, NodeId};
use crate::rng::SimRng;
use crate::storage::{CrashModel, SimStorage, WriteFate};
use cordillera_models::device::{Completion, Device};

mod disk;

/// A disk operation a core asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoCommand {
    Read {
        id: u64,
        offset_bytes: u64,
        length_bytes: u64,
    },
    Write {
        id: u64,
        offset_bytes: u64,
        data: Vec<u8>,
    },
    /// Makes every write completed before it durable.
    Flush { id: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoDone {
    Read { id: u64, data: Vec<u8> },
    Written { id: u64 },
    Flushed { id: u64 },
}

/// A message a core sends; `bytes` is its size on the wire.
#[derive(Clone, Debug)]
pub struct Outgoing<M> {
    pub to: NodeId,
    pub message: M,
    pub bytes: u64,
}

/// A sans-I/O state machine hosted on a node.
pub trait Core {
    type Message: Clone + Hash + std::fmt::Debug;
    /// The node starts (or restarts after a crash, with an empty memory and its disk as it was left).
    fn handle_start(&mut self, now: Nanos);
    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Self::Message);
    fn handle_timeout(&mut self, now: Nanos);
    fn handle_io(&mut self, now: Nanos, done: IoDone);
    fn poll_message(&mut self) -> Option<Outgoing<Self::Message>>;
    fn poll_io(&mut self) -> Option<IoCommand>;
    fn poll_timeout(&self) -> Option<Nanos>;
    /// Power requests: this node going into standby, or another node to be woken.
    fn poll_power(&mut self) -> Option<PowerRequest> {
        None
    }
    /// The node is out of standby (its memory kept; time has passed).
    fn handle_wake(&mut self, _now: Nanos) {}
}

/// What a core asks of the power controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerRequest {
    /// This node enters standby now: messages to it are lost and its timers stop until it is
    /// woken. (A node asks only once nothing is in flight on its disk.)
    Sleep,
    /// Wake `node` (if in standby) after `after_ns` (the wake-up delay).
    Wake { node: NodeId, after_ns: Nanos },
}

/// A fault the world injected into a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeFault {
    Crashed {
        node: NodeId,
        at: Nanos,
        unflushed_fates: Vec<WriteFate>,
    },
    Restarted {
        node: NodeId,
        at: Nanos,
    },
}

enum Event<M> {
    Deliver {
        to: NodeId,
        from: NodeId,
        message: M,
        epoch: u64,
    },
    Timer {
        node: NodeId,
        epoch: u64,
    },
    Disk {
        node: NodeId,
        epoch: u64,
    },
    Crash {
        node: NodeId,
    },
    Restart {
        node: NodeId,
    },
    Wake {
        node: NodeId,
    },
}

struct Node<C> {
    core: Option<C>,
    device: Box<dyn Device>,
    storage: SimStorage,
    /// Incremented by each crash: events of an earlier life are ignored.
    epoch: u64,
    /// Device request id → the command (ordered, so crashes treat them in a fixed order).
    in_flight: BTreeMap<u64, IoCommand>,
    next_device_id: u64,
    /// Flushes waiting for the writes issued before them, in issue order: (core id, the device
    /// id of the next request when the flush was issued). Device ids only grow, so a flush is
    /// ready once no write below its bound is in flight.
    flushes: VecDeque<(u64, u64)>,
    /// Device ids of the writes in flight.
    writes_in_flight: BTreeSet<u64>,
    /// Reads answered with the contents at their submission: device id → those contents.
    early: BTreeMap<u64, Vec<u8>>,
    /// Writes the device completed that persist after later overlapping writes still in
    /// flight (see [`WorldBuilder::reorder`]): device id → the later writes' ids. They stay in
    /// `in_flight` and `writes_in_flight` (a crash treats them as in flight, a flush waits).
    /// The later writes' ids are sorted.
    held: BTreeMap<u64, Vec<u64>>,
    /// Writes in flight whose data already landed beneath an earlier overlapping write that
    /// completed (see [`WorldBuilder::reorder`]); their own completion comes at its time.
    landed: BTreeSet<u64>,
    /// Flushes whose writes are done, completing at their time.
    flush_done: VecDeque<(Nanos, u64)>,
    /// Requests the device completed that stall (see [`World::stall_ios`]): (release time,
    /// device id). They stay in `in_flight` until released.
    stalled: BTreeSet<(Nanos, u64)>,
    timer_at: Option<Nanos>,
    disk_at: Option<Nanos>,
    /// In standby since then.
    asleep_since: Option<Nanos>,
    /// Time spent in standby before the current stay.
    asleep_ns: Nanos,
}

/// How a world is built: one core and one device per node.
pub struct WorldBuilder<C> {
    pub new_core: Box<dyn FnMut(NodeId) -> C>,
    pub new_device: Box<dyn FnMut(NodeId) -> Box<dyn Device>>,
    pub crash_model: CrashModel,
    /// Time a flush takes once the writes before it are done.
    pub flush_ns: Nanos,
    /// Probability that a read returns the contents as they were when it was submitted rather
    /// than when it completes: a drive may serve a read before an overlapping write that
    /// completes first. 0 draws nothing (the worlds that do not use it are unchanged).
    pub early_reads: f64,
    /// Probability that a write the device completes while later writes overlapping it are in
    /// flight is reordered with them, half the time each way: it lands after them (held until
    /// they complete, and only then reported done), or they land beneath it now (it is reported
    /// done at once; their completions come at their own times). Likewise the writes in flight
    /// at a crash reach the media in a shuffled order. A drive with command queuing, like a
    /// volume's parallel `pwrite`s, promises no order between overlapping writes in flight at
    /// once, nor that completions come in the order the data landed. Drawn from a stream of its
    /// own, so 0 leaves a world's other draws unchanged.
    pub reorder: f64,
}

pub struct World<C: Core> {
    nodes: Vec<Node<C>>,
    builder: WorldBuilder<C>,
    pub network: Network,
    queue: EventQueue<Event<C::Message>>,
    rng: SimRng,
    now: Nanos,
    pub hash: EventHash,
    pub faults: Vec<NodeFault>,
    scratch: Vec<Completion>,
    lost_to_standby: u64,
    /// Draws for [`WorldBuilder::reorder`] (a stream of its own).
    reorder_rng: SimRng,
    /// Writes that persisted after a later overlapping one, and crashes that shuffled the
    /// writes in flight.
    pub reordered: u64,
    /// Device requests that stall, and for how long on average (see [`World::stall_ios`]).
    stall: Option<(f64, f64)>,
    /// Draws for stalls (a stream of its own).
    stall_rng: SimRng,
    /// Requests that stalled.
    pub stalls: u64,
}

impl Hasher for EventHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Four independent lanes over 32-byte blocks (a message's data is most of what is
        // hashed; one chain of multiplies would take four times as long), folded in at the end.
        let rest = if bytes.len() >= 64 {
            let s = self.0;
            let mut lanes = [s, !s, s ^ 1, s ^ 2].map(EventHash);
            let blocks = bytes.chunks_exact(32);
            let rest = blocks.remainder();
            for block in blocks {
                for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                    lane.add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
                }
            }
            for lane in lanes {
                self.add(lane.0);
            }
            rest
        } else {
            bytes
        };
        for chunk in rest.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
}

impl<C: Core> World<C> {
    /// A world of `network.nodes()` nodes, all started at time 0. `rng` drives node faults.
    pub fn new(mut builder: WorldBuilder<C>, network: Network, rng: SimRng) -> World<C> {
        let nodes = (0..network.nodes())
            .map(|id| Node {
                core: Some((builder.new_core)(id)),
                device: (builder.new_device)(id),
                storage: SimStorage::new(),
                epoch: 0,
                in_flight: BTreeMap::new(),
                next_device_id: 0,
                flushes: VecDeque::new(),
                writes_in_flight: BTreeSet::new(),
                early: BTreeMap::new(),
                held: BTreeMap::new(),
                landed: BTreeSet::new(),
                flush_done: VecDeque::new(),
                stalled: BTreeSet::new(),
                timer_at: None,
                disk_at: None,
                asleep_since: None,
                asleep_ns: 0,
            })
            .collect();
        let mut world = World {
            nodes,
            builder,
            network,
            queue: EventQueue::new(),
            // From a copy of `rng`: the world's own draws stay as they were.
            reorder_rng: SimRng::new(rng.clone().next_u64(), 0x5e0_4de5),
            reordered: 0,
            stall: None,
            stall_rng: SimRng::new(rng.clone().next_u64(), 0x57a11),
            stalls: 0,
            rng,
            now: 0,
            hash: EventHash::default(),
            faults: Vec::new(),
            scratch: Vec::new(),
            lost_to_standby: 0,
        };
        for id in 0..world.nodes.len() {
            world.with_core(id, |core, now| core.handle_start(now));
        }
        world
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    pub fn core(&self, node: NodeId) -> Option<&C> {
        self.nodes[node].core.as_ref()
    }

    pub fn storage(&self, node: NodeId) -> &SimStorage {
        &self.nodes[node].storage
    }

    pub fn is_up(&self, node: NodeId) -> bool {
        self.nodes[node].core.is_some()
    }

    /// Whether the node is in standby.
    pub fn is_asleep(&self, node: NodeId) -> bool {
        self.nodes[node].asleep_since.is_some()
    }

    /// Time the node has spent in standby so far.
    pub fn asleep_ns(&self, node: NodeId) -> Nanos {
        let n = &self.nodes[node];
        n.asleep_ns + n.asleep_since.map_or(0, |since| self.now - since)
    }

    /// Time the node's disk has spent serving requests (since its last crash, which replaces
    /// the device).
    pub fn busy_ns(&self, node: NodeId) -> Nanos {
        self.nodes[node].device.busy_ns()
    }

    /// Messages lost because their destination was in standby.
    pub fn lost_to_standby(&self) -> u64 {
        self.lost_to_standby
    }

    /// Makes a share `chance` of device requests stall once the device is done with them: their
    /// completion (a write's data reaching the media, a read's contents) comes an exponential
    /// delay of mean `mean_ns` later, while later requests complete at their own times — as a
    /// drive's internal retries, garbage collection or a controller's queue may. A write that
    /// stalls lands after later writes to the same blocks; a crash meanwhile finds it in
    /// flight. Drawn from a stream of its own: worlds that never call this draw nothing.
    pub fn stall_ios(&mut self, chance: f64, mean_ns: f64) {
        self.stall = (chance > 0.0).then_some((chance, mean_ns));
    }

    /// Schedules a crash of `node` at `at` and, if `restart_after` is given, its restart.
    pub fn schedule_crash(&mut self, node: NodeId, at: Nanos, restart_after: Option<Nanos>) {
        self.queue.push(at, Event::Crash { node });
        if let Some(after) = restart_after {
            self.queue.push(at + after, Event::Restart { node });
        }
    }

    /// Draws `count` crashes of nodes in `candidates` uniformly in `[from, until)`, each followed
    /// by a restart after an exponential downtime, from the world's fault stream.
    pub fn schedule_random_crashes(
        &mut self,
        candidates: &[NodeId],
        count: usize,
        from: Nanos,
        until: Nanos,
        mean_downtime_ns: f64,
    ) {
        for _ in 0..count {
            let node = candidates[self.rng.below(candidates.len() as u64) as usize];
            let at = from + self.rng.below((until - from).max(1));
            let down = 1 + self.rng.exponential(mean_downtime_ns) as Nanos;
            self.schedule_crash(node, at, Some(down));
        }
    }

    /// Runs until no event is left or the next is after `until`; returns the events processed.
    pub fn run_until(&mut self, until: Nanos) -> u64 {
        let mut processed = 0;
        while let Some(t) = self.queue.peek_time() {
            if t > until {
                break;
            }
            let (t, event) = self.queue.pop().expect("peeked");
            self.now = t;
            self.hash.add(t);
            self.process(event);
            processed += 1;
        }
        processed
    }

    fn process(&mut self, event: Event<C::Message>) {
        match event {
            Event::Deliver {
                to,
                from,
                message,
                epoch,
            } => {
                self.hash.add(1);
                self.hash.add(to as u64);
                self.hash.add(from as u64);
                message.hash(&mut self.hash);
                if self.nodes[to].epoch == epoch {
                    if self.nodes[to].asleep_since.is_some() {
                        self.lost_to_standby += 1;
                        return;
                    }
                    self.with_core(to, |core, now| core.handle_message(now, from, message));
                }
            }
            Event::Timer { node, epoch } => {
                self.hash.add(2);
                self.hash.add(node as u64);
                // Only the timer event the node is waiting for counts; earlier plans are stale.
                if self.nodes[node].epoch != epoch || self.nodes[node].timer_at != Some(self.now) {
                    return;
                }
                self.nodes[node].timer_at = None;
                if self.nodes[node].asleep_since.is_some() {
                    // Timers stop in standby; the wake reschedules them.
                    return;
                }
                let now = self.now;
                let due = self.nodes[node]
                    .core
                    .as_ref()
                    .and_then(|c| c.poll_timeout())
                    .is_some_and(|t| t <= now);
                if due {
                    self.with_core(node, |core, now| core.handle_timeout(now));
                } else {
                    self.reschedule(node);
                }
            }
            Event::Disk { node, epoch } => {
                self.hash.add(3);
                self.hash.add(node as u64);
                if self.nodes[node].epoch == epoch && self.nodes[node].disk_at == Some(self.now) {
                    self.nodes[node].disk_at = None;
                    self.disk_progress(node);
                }
            }
            Event::Crash { node } => {
                self.hash.add(4);
                self.hash.add(node as u64);
                self.crash(node);
            }
            Event::Wake { node } => {
                self.hash.add(6);
                self.hash.add(node as u64);
                let n = &mut self.nodes[node];
                if let (Some(since), true) = (n.asleep_since, n.core.is_some()) {
                    n.asleep_ns += self.now - since;
                    n.asleep_since = None;
                    self.with_core(node, |core, now| core.handle_wake(now));
                }
            }
            Event::Restart { node } => {
                self.hash.add(5);
                self.hash.add(node as u64);
                if self.nodes[node].core.is_none() {
                    self.faults
                        .push(NodeFault::Restarted { node, at: self.now });
                    let core = (self.builder.new_core)(node);
                    self.nodes[node].core = Some(core);
                    self.with_core(node, |core, now| core.handle_start(now));
                }
            }
        }
    }

    fn crash(&mut self, node: NodeId) {
        if self.nodes[node].core.is_none() {
            return;
        }
        let new_device = (self.builder.new_device)(node);
        let now = self.now;
        let n = &mut self.nodes[node];
        n.core = None;
        n.epoch += 1;
        // A crash ends standby (the node restarts powered).
        if let Some(since) = n.asleep_since.take() {
            n.asleep_ns += now - since;
        }
        // Writes in flight may have reached the media in part: they meet the fates of
        // unflushed writes (kept, lost, or torn at sector granularity), in issue order or, if
        // the world reorders, in a shuffled one.
        let mut writes: Vec<(u64, Vec<u8>)> = std::mem::take(&mut n.in_flight)
            .into_iter()
            .filter(|(id, _)| !n.landed.contains(id))
            .filter_map(|(_, command)| match command {
                IoCommand::Write {
                    offset_bytes, data, ..
                } => Some((offset_bytes, data)),
                _ => None,
            })
            .collect();
        if self.builder.reorder > 0.0
            && writes.len() > 1
            && self.reorder_rng.chance(self.builder.reorder)
        {
            for i in (1..writes.len()).rev() {
                writes.swap(i, self.reorder_rng.below(i as u64 + 1) as usize);
            }
            self.reordered += 1;
            self.hash.add(7);
        }
        for (offset_bytes, data) in writes {
            n.storage.write_vec(offset_bytes, data);
        }
        n.flushes.clear();
        n.held.clear();
        n.landed.clear();
        n.writes_in_flight.clear();
        n.early.clear();
        n.flush_done.clear();
        n.stalled.clear();
        n.timer_at = None;
        n.disk_at = None;
        n.device = new_device;
        let fates = n.storage.crash(&mut self.rng, self.builder.crash_model);
        for fate in &fates {
            self.hash.add(match fate {
                WriteFate::Kept => 1,
                WriteFate::Lost => 2,
                WriteFate::Torn(kept) => 3 + kept.len() as u64,
            });
        }
        self.faults.push(NodeFault::Crashed {
            node,
            at: self.now,
            unflushed_fates: fates,
        });
    }

    /// Calls `f` on the node's core (if up), then drains its outputs.
    fn with_core(&mut self, node: NodeId, f: impl FnOnce(&mut C, Nanos)) {
        let now = self.now;
        let Some(core) = self.nodes[node].core.as_mut() else {
            return;
        };
        f(core, now);
        self.drain(node);
    }

    fn drain(&mut self, node: NodeId) {
        let now = self.now;
        loop {
            let Some(core) = self.nodes[node].core.as_mut() else {
                return;
            };
            if let Some(out) = core.poll_message() {
                let epoch = self.nodes[out.to].epoch;
                let ats = self.network.send(now, node, out.to, out.bytes);
                // The message moves into its last delivery; only duplicates are copies (a
                // message can carry megabytes).
                let mut message = Some(out.message);
                let last = ats.len().saturating_sub(1);
                for (i, at) in ats.into_iter().enumerate() {
                    let message = if i == last {
                        message.take().expect("moved once")
                    } else {
                        message.as_ref().expect("not yet moved").clone()
                    };
                    self.queue.push(
                        at,
                        Event::Deliver {
                            to: out.to,
                            from: node,
                            message,
                            epoch,
                        },
                    );
                }
                continue;
            }
            if let Some(io) = core.poll_io() {
                self.submit_io(node, io);
                continue;
            }
            if let Some(request) = core.poll_power() {
                match request {
                    PowerRequest::Sleep => {
                        if self.nodes[node].asleep_since.is_none() {
                            self.nodes[node].asleep_since = Some(now);
                        }
                    }
                    PowerRequest::Wake {
                        node: target,
                        after_ns,
                    } => {
                        self.queue
                            .push(now + after_ns, Event::Wake { node: target });
                    }
                }
                continue;
            }
            break;
        }
        self.reschedule(node);
    }

    fn reschedule(&mut self, node: NodeId) {
        let n = &mut self.nodes[node];
        let epoch = n.epoch;
        if let Some(t) = n.core.as_ref().and_then(|c| c.poll_timeout()) {
            let t = t.max(self.now);
            if n.timer_at.is_none_or(|at| t < at) {
                n.timer_at = Some(t);
                self.queue.push(t, Event::Timer { node, epoch });
            }
        }
        let next = [
            n.device.poll_timeout(),
            n.flush_done.front().map(|(t, _)| *t),
            n.stalled.first().map(|(t, _)| *t),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(t) = next {
            let t = t.max(self.now);
            if n.disk_at.is_none_or(|at| t < at) {
                n.disk_at = Some(t);
                self.queue.push(t, Event::Disk { node, epoch });
            }
        }
    }
}
