//! The lab's clients: client 0 creates the objects; each then replays its queue of a trace's
//! requests at their times (open loop), or keeps a number of requests outstanding (closed
//! loop, §4.6). Response times, bytes and failures go to the cluster's [`Observed`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use cordillera_gears::client::{ClientError, Done, ObjectClient};
use cordillera_gears::model::ObjectId;
use cordillera_gears_host::ClientApp;
use cordillera_sim::kernel::Nanos;
use cordillera_sim::rng::SimRng;

use super::{ClosedLoop, Observed, S};

pub struct ReplayClient {
    index: usize,
    /// Requests in flight: when issued (`Nanos::MAX`: a creation) and their bytes.
    ops: HashMap<u64, (Nanos, u64)>,
    next_op: u64,
    next_tick: Nanos,
    closed: Option<ClosedLoop>,
    next_offset: u64,
    rng: SimRng,
    objects: Vec<u64>,
    /// Objects created so far (client 0 creates them all).
    creating: usize,
    observed: Rc<RefCell<Observed>>,
}

impl ReplayClient {
    pub(super) fn new(
        index: usize,
        closed: Option<ClosedLoop>,
        rng: SimRng,
        objects: Vec<u64>,
        observed: Rc<RefCell<Observed>>,
    ) -> ReplayClient {
        ReplayClient {
            index,
            ops: HashMap::new(),
            next_op: 1,
            next_tick: 0,
            closed,
            next_offset: 0,
            rng,
            objects,
            creating: 0,
            observed,
        }
    }

    fn objects_size(&self, object: u64) -> u64 {
        self.objects.get(object as usize).copied().unwrap_or(0)
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_op;
        self.next_op += 1;
        id
    }
}

impl ClientApp for ReplayClient {
    fn start(&mut self, now: Nanos, _life: u64) {
        self.next_tick = now;
    }

    fn done(&mut self, now: Nanos, id: u64, result: Result<Done, ClientError>) {
        let Some((issued, bytes)) = self.ops.remove(&id) else {
            return;
        };
        let mut observed = self.observed.borrow_mut();
        match result {
            Ok(_) if issued == Nanos::MAX => observed.created += 1,
            Ok(_) => {
                observed.record(issued, now - issued);
                observed.client_bytes[self.index] += bytes;
            }
            Err(e) => {
                observed.failed += 1;
                observed.failed_no_space += u64::from(e == ClientError::NoSpace);
                if observed.failures.len() < 8 {
                    observed
                        .failures
                        .push(format!("client {} at {now} ns: {e}", self.index));
                }
            }
        }
    }

    /// Starts what is due: object creations (client 0, at start), replayed requests whose time
    /// has come, closed-loop requests while there is room.
    fn issue(&mut self, client: &mut ObjectClient, now: Nanos) -> bool {
        let mut any = false;
        while self.index == 0 && self.creating < self.objects.len() {
            let id = self.next_id();
            self.ops.insert(id, (Nanos::MAX, 0));
            client.create(
                now,
                id,
                ObjectId(self.creating as u64),
                self.objects[self.creating],
            );
            self.creating += 1;
            any = true;
        }
        let observed = self.observed.clone();
        let mut ob = observed.borrow_mut();
        while let Some(r) = ob.queues[self.index].front().copied() {
            if r.at > now {
                break;
            }
            ob.queues[self.index].pop_front();
            let id = self.next_id();
            self.ops.insert(id, (r.at, r.length_bytes));
            if r.write {
                ob.bytes_written += r.length_bytes;
                let data = vec![0u8; r.length_bytes as usize];
                client.write(now, id, ObjectId(r.object), r.offset_bytes, data);
            } else {
                ob.bytes_read += r.length_bytes;
                client.read(now, id, ObjectId(r.object), r.offset_bytes, r.length_bytes);
            }
            any = true;
        }
        if let (Some(cl), true) = (self.closed, ob.created == self.objects.len()) {
            let object = self.index as u64;
            let size = self.objects_size(object);
            let units = (size / cl.request_bytes).max(1);
            while self.ops.len() < cl.outstanding {
                let offset = if cl.sequential {
                    let o = self.next_offset;
                    self.next_offset = (self.next_offset + 1) % units;
                    o
                } else {
                    self.rng.below(units)
                } * cl.request_bytes;
                let id = self.next_id();
                self.ops.insert(id, (now, cl.request_bytes));
                if cl.write {
                    ob.bytes_written += cl.request_bytes;
                    let data = vec![0u8; cl.request_bytes as usize];
                    client.write(now, id, ObjectId(object), offset, data);
                } else {
                    ob.bytes_read += cl.request_bytes;
                    client.read(now, id, ObjectId(object), offset, cl.request_bytes);
                }
                any = true;
            }
        }
        any
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let next = self.observed.borrow().queues[self.index]
            .front()
            .map(|r| r.at);
        [Some(self.next_tick), next].into_iter().flatten().min()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        if self.next_tick <= now {
            // The driver fills the queues a second ahead; the client looks every second.
            self.next_tick = (now / S + 1) * S;
        }
    }
}
