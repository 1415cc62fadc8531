//! A node: moving its core's outputs to the world (messages, disk I/O, power), the clients'
//! requests as they fall due, and what each core hears from the world.

use super::*;

impl Node {
    fn send(&mut self, to: NodeId, message: Msg) {
        let bytes = msg_bytes(&message);
        self.out.push_back(Outgoing { to, message, bytes });
    }

    fn pump(&mut self, now: Nanos) {
        let nodes = self.layout_nodes;
        loop {
            let mut progress = false;
            let mut sends = Vec::new();
            match &mut self.part {
                Part::Mds(mds, _) => {
                    while let Some((to, message)) = mds.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    while let Some(s) = mds.poll_wake() {
                        self.power.push_back(PowerRequest::Wake {
                            node: 1 + s as usize,
                            after_ns: self.wake_ns,
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
                                request: HashedById(request),
                            },
                        ));
                    }
                    while let Some(io) = p.server.poll_io() {
                        let mut slot = |g: GroupId| {
                            let next = p.slots.len() as u64;
                            *p.slots.entry(g).or_insert(next) * self.group_bytes
                        };
                        let op = match io {
                            ChunkIo::Read {
                                id,
                                group,
                                offset_bytes,
                                length_bytes,
                            } => DiskOp::Read {
                                id,
                                offset_bytes: slot(group) + offset_bytes,
                                length_bytes,
                            },
                            ChunkIo::Write {
                                id,
                                group,
                                offset_bytes,
                                data,
                            } => DiskOp::Write {
                                id,
                                offset_bytes: slot(group) + offset_bytes,
                                data: data.into(),
                                durable: true,
                            },
                        };
                        if let Some(command) = p.disk.submit(op) {
                            self.io.push_back(command);
                        }
                    }
                    if p.server.wants_sleep() && !p.sleep_asked {
                        p.sleep_asked = true;
                        for c in 0..self.clients {
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
                        if let Some((to, id)) = l.senders.remove(&tag) {
                            l.open -= 1;
                            sends.push((
                                to,
                                Msg::LogReply {
                                    id,
                                    reply: HashedById(reply),
                                    load: l.open,
                                },
                            ));
                        }
                    }
                }
                Part::Client(c) => {
                    while let Some((to, message)) = c.client.poll_message() {
                        sends.push((nodes.node_of(to), Msg::Sierra(message)));
                    }
                    let mut observed = self.observed.borrow_mut();
                    while let Some((id, result)) = c.client.poll_done() {
                        progress = true;
                        let Some((issued, bytes)) = c.ops.remove(&id) else {
                            continue;
                        };
                        match result {
                            Ok(_) if issued == Nanos::MAX => observed.created += 1,
                            Ok(_) => {
                                observed.record(issued, now - issued);
                                observed.client_bytes[c.index] += bytes;
                            }
                            Err(e) => {
                                observed.failed += 1;
                                if observed.failures.len() < 8 {
                                    observed
                                        .failures
                                        .push(format!("client {} at {now} ns: {e}", c.index));
                                }
                            }
                        }
                    }
                    drop(observed);
                    if issue(c, &self.observed, now) {
                        progress = true;
                    }
                }
            }
            for (to, message) in sends {
                progress = true;
                self.send(to, message);
            }
            if !progress {
                break;
            }
        }
    }
}

/// Starts what is due: object creations (client 0, at start), replayed requests whose time has
/// come, closed-loop requests while there is room.
fn issue(c: &mut ClientPart, observed: &Rc<RefCell<Observed>>, now: Nanos) -> bool {
    let mut any = false;
    while c.index == 0 && c.creating < c.objects.len() {
        let id = c.next_op;
        c.next_op += 1;
        c.ops.insert(id, (Nanos::MAX, 0));
        c.client
            .create(now, id, ObjectId(c.creating as u64), c.objects[c.creating]);
        c.creating += 1;
        any = true;
    }
    let mut ob = observed.borrow_mut();
    while let Some(r) = ob.queues[c.index].front().copied() {
        if r.at > now {
            break;
        }
        ob.queues[c.index].pop_front();
        let id = c.next_op;
        c.next_op += 1;
        c.ops.insert(id, (r.at, r.length_bytes));
        if r.write {
            ob.bytes_written += r.length_bytes;
            let data = vec![0u8; r.length_bytes as usize];
            c.client
                .write(now, id, ObjectId(r.object), r.offset_bytes, data);
        } else {
            ob.bytes_read += r.length_bytes;
            c.client
                .read(now, id, ObjectId(r.object), r.offset_bytes, r.length_bytes);
        }
        any = true;
    }
    if let (Some(cl), true) = (c.closed, ob.created == c.objects.len()) {
        let object = c.index as u64;
        let size = c.objects_size(object);
        let units = (size / cl.request_bytes).max(1);
        while c.ops.len() < cl.outstanding {
            let offset = if cl.sequential {
                let o = c.next_offset;
                c.next_offset = (c.next_offset + 1) % units;
                o
            } else {
                c.rng.below(units)
            } * cl.request_bytes;
            let id = c.next_op;
            c.next_op += 1;
            c.ops.insert(id, (now, cl.request_bytes));
            if cl.write {
                ob.bytes_written += cl.request_bytes;
                let data = vec![0u8; cl.request_bytes as usize];
                c.client.write(now, id, ObjectId(object), offset, data);
            } else {
                ob.bytes_read += cl.request_bytes;
                c.client
                    .read(now, id, ObjectId(object), offset, cl.request_bytes);
            }
            any = true;
        }
    }
    any
}

impl ClientPart {
    fn objects_size(&self, object: u64) -> u64 {
        self.objects.get(object as usize).copied().unwrap_or(0)
    }
}

impl Core for Node {
    type Message = Msg;

    fn handle_start(&mut self, now: Nanos) {
        if let Part::Client(c) = &mut self.part {
            c.next_tick = now;
        }
        self.pump(now);
    }

    fn handle_message(&mut self, now: Nanos, from: NodeId, message: Msg) {
        let nodes = self.layout_nodes;
        match (&mut self.part, message) {
            (Part::Mds(mds, _), Msg::Sierra(message)) => {
                if let Message::ReleasedPrimary { group, .. } = &message {
                    self.observed.borrow_mut().releasing.insert(*group, now);
                }
                mds.handle_message(now, nodes.endpoint_of(from), message)
            }
            (Part::Server(p), Msg::Sierra(message)) => {
                if let Message::BecomePrimary { view, .. } = &message {
                    let mut ob = self.observed.borrow_mut();
                    if let Some(t) = ob.releasing.remove(&view.group) {
                        ob.migrations.push((now - t, now));
                    }
                }
                p.server
                    .handle_message(now, nodes.endpoint_of(from), message)
            }
            (Part::Server(p), Msg::LogReply { id, reply, load }) => {
                p.server.handle_store(now, id, reply.0, Some(load))
            }
            (Part::Logger(l), Msg::Log { id, request }) => {
                l.open += 1;
                l.next_tag += 1;
                l.senders.insert(l.next_tag, (from, id));
                l.store.handle_request(now, l.next_tag, request.0);
            }
            (Part::Client(c), Msg::Sierra(message)) => {
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
        match &mut self.part {
            Part::Mds(mds, gears) => {
                while gears.front().is_some_and(|(t, _, _)| *t <= now) {
                    let (_, gear, rotation) = gears.pop_front().expect("a gear");
                    mds.set_gear(now, gear, &rotation);
                }
                if mds.poll_timeout().is_some_and(|t| t <= now) {
                    mds.handle_timeout(now);
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
                if c.next_tick <= now {
                    // The driver fills the queues a second ahead; the client looks every second.
                    c.next_tick = (now / S + 1) * S;
                }
            }
        }
        self.pump(now);
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
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
        let mut then = Vec::new();
        match &mut self.part {
            Part::Server(p) => {
                if let Some(done) = p.disk.complete(done, &mut then) {
                    let done = match done {
                        DiskDone::Read { id, data } => ChunkIoDone::Read { id, data },
                        DiskDone::Written { id } | DiskDone::Flushed { id } => {
                            ChunkIoDone::Written { id }
                        }
                    };
                    p.server.handle_io(now, done);
                }
            }
            Part::Logger(l) => {
                let q = l.queue.value.saturating_sub(1);
                l.queue.set(now, q);
                if let Some(done) = l.disk.complete(done, &mut then) {
                    l.store.handle_disk(now, done);
                }
            }
            _ => {}
        }
        if let Part::Logger(l) = &mut self.part {
            let q = l.queue.value + then.len() as u64;
            l.queue.set(now, q);
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
        match &self.part {
            Part::Mds(mds, gears) => {
                let gear = gears.front().map(|(t, _, _)| *t);
                [mds.poll_timeout(), gear].into_iter().flatten().min()
            }
            Part::Server(p) => p.server.poll_timeout(),
            Part::Logger(l) => l.store.poll_timeout(),
            Part::Client(c) => {
                let next = self.observed.borrow().queues[c.index].front().map(|r| r.at);
                [c.client.poll_timeout(), Some(c.next_tick), next]
                    .into_iter()
                    .flatten()
                    .min()
            }
        }
    }
}
