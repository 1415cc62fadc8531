//! A node at work: its core's outputs to the world (messages through the link faults, disk
//! requests through its disk port, standby and wake-up), and what the world delivers to its
//! core.

use cordillera_gears::mds::Mds;
use cordillera_gears::protocol::{Endpoint, Message};
use cordillera_gears::server::{ChunkIo, ChunkIoDone};
use cordillera_sim::kernel::Nanos;
use cordillera_sim::network::NodeId;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, PowerRequest};

use crate::links::Fate;
use crate::{msg_bytes, store_changes, ClientApp, Msg, Part, SierraNode, HOUSEKEEPING};
use cordillera_host::Durability;

impl<A: ClientApp> SierraNode<A> {
    fn send(&mut self, now: Nanos, to: NodeId, message: Msg) {
        let mut shared = self.shared.borrow_mut();
        if shared.trace {
            let text = format!("{message:?}");
            eprintln!("  {} → {to}: {}", self.id, &text[..text.len().min(240)]);
        }
        let droppable = matches!(message, Msg::Sierra(_));
        let bytes = msg_bytes(&message);
        let outgoing = Outgoing { to, message, bytes };
        match shared.links.fate(now, self.id, to, droppable) {
            Fate::Drop => return,
            Fate::Hold(until) => {
                self.delayed.push((until, outgoing));
                return;
            }
            Fate::Send => {}
        }
        // Links are FIFO: behind a held message to the same node, a message waits.
        if let Some(behind) = self
            .delayed
            .iter()
            .filter(|(_, o)| o.to == outgoing.to)
            .map(|(t, _)| *t)
            .max()
        {
            self.delayed.push((behind, outgoing));
            return;
        }
        self.out.push_back(outgoing);
    }

    /// Releases held messages whose time has come, in the order they were sent.
    fn release(&mut self, now: Nanos) {
        if self.delayed.is_empty() {
            return;
        }
        let (due, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.delayed = held;
        self.out.extend(due.into_iter().map(|(_, o)| o));
    }

    /// Moves the core's outputs to the world until it has nothing more to say.
    fn pump(&mut self, now: Nanos) {
        let nodes = self.shared.borrow().nodes;
        loop {
            let mut progress = false;
            let mut sends = Vec::new();
            match &mut self.part {
                Part::Mds(m) => {
                    let mut sh = self.shared.borrow_mut();
                    if sh.mds_store.is_some() {
                        let changes = m.mds.take_changes();
                        store_changes(sh.mds_store.as_mut().expect("kept"), changes);
                        sh.mds_stats_now = m.mds.stats();
                    }
                    while let Some((to, message)) = m.mds.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    while let Some(s) = m.mds.poll_wake() {
                        self.power.push_back(PowerRequest::Wake {
                            node: nodes.server(s),
                            after_ns: sh.wake_ns,
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
                                life: p.life,
                                request,
                            },
                        ));
                    }
                    let mut sh = self.shared.borrow_mut();
                    let trace = sh.trace;
                    let placement = &mut sh.placements[self.id - 1];
                    while let Some(io) = p.server.poll_io() {
                        if trace {
                            if let ChunkIo::Write {
                                id,
                                group,
                                offset_bytes,
                                data,
                            } = &io
                            {
                                eprintln!(
                                    "{now} {} disk write {id}: {group:?} [{offset_bytes}, +{}) {:?}",
                                    self.id,
                                    data.len(),
                                    &data[..data.len().min(24)]
                                );
                            }
                        }
                        if let Some(command) = p.disk.submit(placement.disk_op(io)) {
                            self.io.push_back(command);
                        }
                    }
                    drop(sh);
                    if p.server.wants_sleep() && !p.sleep_asked {
                        p.sleep_asked = true;
                        for c in 0..nodes.clients {
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
                        if let Some((to, id, to_life)) = l.senders.remove(&tag) {
                            l.open -= 1;
                            sends.push((
                                to,
                                Msg::LogReply {
                                    id,
                                    reply,
                                    load: l.open,
                                    life: l.life,
                                    to_life,
                                },
                            ));
                        }
                    }
                }
                Part::Client(c) => {
                    while let Some((to, message)) = c.client.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    while let Some((id, result)) = c.client.poll_done() {
                        progress = true;
                        c.app.done(now, id, result);
                    }
                    if c.app.issue(&mut c.client, now) {
                        progress = true;
                    }
                    c.app.settled(&c.client);
                }
            }
            for (to, message) in sends {
                progress = true;
                self.send(now, to, message);
            }
            if !progress {
                break;
            }
        }
    }
}

impl<A: ClientApp> Core for SierraNode<A> {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        let life = self.shared.borrow().lives[self.id];
        match &mut self.part {
            Part::Mds(m) if life > 1 => {
                // A restart: the MDS from what its driver stored, in the gear last set.
                let mut sh = self.shared.borrow_mut();
                let stored = sh
                    .mds_store
                    .clone()
                    .expect("an MDS restarts only when its durable state is kept");
                let before = std::mem::take(&mut sh.mds_stats_now);
                crate::add_stats(&mut sh.mds_stats_before, before);
                m.mds = Mds::restore(m.config.clone(), &m.layout, stored, now)
                    .unwrap_or_else(|e| panic!("the MDS's stored state: {e}"));
                if let Some((gear, rotation)) = sh.gear.clone() {
                    m.mds.set_gear(now, gear, &rotation);
                }
            }
            Part::Client(c) => c.app.start(now, life),
            _ => {}
        }
        self.pump(now);
    }

    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Msg) {
        let nodes = {
            let sh = self.shared.borrow();
            if sh.trace {
                let text = format!("{message:?}");
                eprintln!(
                    "{now} {} ← {from}: {}",
                    self.id,
                    &text[..text.len().min(240)]
                );
            }
            sh.nodes
        };
        match (&mut self.part, message) {
            (Part::Mds(m), Msg::Sierra(message)) => {
                if let Message::ReleasedPrimary { group, .. } = &message {
                    self.shared.borrow_mut().releasing.insert(*group, now);
                }
                m.mds.handle_message(now, nodes.endpoint_of(from), message)
            }
            (Part::Server(p), Msg::Sierra(message)) => {
                if let Message::BecomePrimary { view, .. } = &message {
                    let mut sh = self.shared.borrow_mut();
                    if let Some(t) = sh.releasing.remove(&view.group) {
                        sh.migrations.push((now - t, now));
                    }
                }
                p.server
                    .handle_message(now, nodes.endpoint_of(from), message)
            }
            (
                Part::Server(p),
                Msg::LogReply {
                    id,
                    reply,
                    load,
                    life,
                    to_life,
                },
            ) if to_life == p.life => {
                let known = p.logger_lives.insert(from, life);
                if known.is_some_and(|l| l != life) {
                    p.server.logger_lost(now, from as u64);
                }
                p.server.handle_store(now, id, reply, Some(load));
            }
            (Part::Logger(l), Msg::Log { id, life, request }) => {
                l.open += 1;
                l.next_tag += 1;
                l.senders.insert(l.next_tag, (from, id, life));
                l.store.handle_request(now, l.next_tag, request);
            }
            (Part::Client(c), Msg::Sierra(message)) => {
                c.app.observe(now, &message);
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
        self.release(now);
        match &mut self.part {
            Part::Mds(m) => {
                let mut sh = self.shared.borrow_mut();
                while sh.gears.front().is_some_and(|(t, _, _)| *t <= now) {
                    let (_, gear, rotation) = sh.gears.pop_front().expect("a gear");
                    m.mds.set_gear(now, gear, &rotation);
                    sh.gear = Some((gear, rotation));
                }
                drop(sh);
                if m.mds.poll_timeout().is_some_and(|t| t <= now) {
                    m.mds.handle_timeout(now);
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
                c.app.handle_timeout(now);
            }
        }
        self.pump(now);
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        let write_through = match &self.part {
            Part::Server(p) => p.disk.durability() == Durability::WriteThrough,
            Part::Logger(l) => l.disk.durability() == Durability::WriteThrough,
            _ => false,
        };
        if write_through {
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
        }
        let mut then = Vec::new();
        match &mut self.part {
            Part::Server(p) => {
                if let Some(done) = p.disk.complete(done, &mut then) {
                    let done = ChunkIoDone::from(done);
                    if self.shared.borrow().trace {
                        if let ChunkIoDone::Written { id } = &done {
                            eprintln!("{now} {} disk written {id}", self.id);
                        }
                    }
                    p.server.handle_io(now, done);
                }
            }
            Part::Logger(l) => {
                let q = l.queue.value.saturating_sub(1);
                l.queue.set(now, q);
                if let Some(done) = l.disk.complete(done, &mut then) {
                    l.store.handle_disk(now, done);
                }
                let q = l.queue.value + then.len() as u64;
                l.queue.set(now, q);
            }
            _ => {}
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
        let delayed = self.delayed.iter().map(|(t, _)| *t).min();
        let own = match &self.part {
            Part::Mds(m) => {
                let gear = self.shared.borrow().gears.front().map(|(t, _, _)| *t);
                [m.mds.poll_timeout(), gear].into_iter().flatten().min()
            }
            Part::Server(p) => p.server.poll_timeout(),
            Part::Logger(l) => l.store.poll_timeout(),
            Part::Client(c) => [c.client.poll_timeout(), c.app.poll_timeout()]
                .into_iter()
                .flatten()
                .min(),
        };
        [own, delayed].into_iter().flatten().min()
    }
}
