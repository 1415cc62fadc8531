//! A node's disk in the world: commands submitted to its device, completions turned into
//! storage changes and the core's `IoDone`s, flushes, and the reordering of overlapping writes
//! in flight ([`WorldBuilder::reorder`]).

use cordillera_types::Op;

use super::{Core, IoCommand, IoDone, Node, World};
use crate::kernel::Nanos;
use crate::network::NodeId;
use cordillera_models::device::IoRequest;

impl<C> Node<C> {
    /// The device finished request `id`: a write's data reaches the storage (unflushed), a
    /// read takes the contents now (or those at its submission).
    fn complete(&mut self, id: u64) -> Option<IoDone> {
        let command = self.in_flight.remove(&id)?;
        self.writes_in_flight.remove(&id);
        Some(match command {
            IoCommand::Read {
                id: core_id,
                offset_bytes,
                length_bytes,
            } => IoDone::Read {
                id: core_id,
                data: self
                    .early
                    .remove(&id)
                    .unwrap_or_else(|| self.storage.read(offset_bytes, length_bytes as usize)),
            },
            IoCommand::Write {
                id: core_id,
                offset_bytes,
                data,
            } => {
                if !self.landed.remove(&id) {
                    self.storage.write_vec(offset_bytes, data);
                }
                IoDone::Written { id: core_id }
            }
            IoCommand::Flush { .. } => unreachable!("flushes never reach the device"),
        })
    }
}

impl<C: Core> World<C> {
    pub(super) fn submit_io(&mut self, node: NodeId, io: IoCommand) {
        let now = self.now;
        let n = &mut self.nodes[node];
        if let IoCommand::Flush { id } = io {
            n.flushes.push_back((id, n.next_device_id));
            self.finish_flushes(node);
            self.reschedule(node);
            return;
        }
        let device_id = n.next_device_id;
        n.next_device_id += 1;
        let request = match &io {
            IoCommand::Read {
                offset_bytes,
                length_bytes,
                ..
            } => IoRequest {
                id: device_id,
                op: Op::Read,
                offset_bytes: *offset_bytes,
                length_bytes: *length_bytes,
            },
            IoCommand::Write {
                offset_bytes, data, ..
            } => IoRequest {
                id: device_id,
                op: Op::Write,
                offset_bytes: *offset_bytes,
                length_bytes: data.len() as u64,
            },
            IoCommand::Flush { .. } => unreachable!(),
        };
        if matches!(io, IoCommand::Write { .. }) {
            n.writes_in_flight.insert(device_id);
        }
        if let IoCommand::Read {
            offset_bytes,
            length_bytes,
            ..
        } = io
        {
            if self.builder.early_reads > 0.0 && self.rng.chance(self.builder.early_reads) {
                n.early.insert(
                    device_id,
                    n.storage.read(offset_bytes, length_bytes as usize),
                );
            }
        }
        n.in_flight.insert(device_id, io);
        n.device.submit(now, request);
    }

    /// Flushes whose writes are all done complete `flush_ns` later.
    fn finish_flushes(&mut self, node: NodeId) {
        let flush_ns = self.builder.flush_ns;
        let now = self.now;
        let n = &mut self.nodes[node];
        let oldest_write = n.writes_in_flight.first().copied().unwrap_or(u64::MAX);
        while let Some(&(id, bound)) = n.flushes.front() {
            if oldest_write < bound {
                break;
            }
            n.flushes.pop_front();
            n.flush_done.push_back((now + flush_ns, id));
        }
    }

    /// Processes the node's disk completions (device and flushes) due now.
    pub(super) fn disk_progress(&mut self, node: NodeId) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.scratch);
        self.nodes[node].device.advance(now, &mut done);
        // Completions that stall are set aside; those whose stall is over join the device's.
        let mut ids: Vec<u64> = Vec::with_capacity(done.len());
        {
            let n = &mut self.nodes[node];
            for c in done.drain(..) {
                match self.stall {
                    Some((chance, mean)) if self.stall_rng.chance(chance) => {
                        let until = now + self.stall_rng.exponential(mean) as Nanos;
                        n.stalled.insert((until, c.id));
                        self.stalls += 1;
                        self.hash.add(10);
                    }
                    _ => ids.push(c.id),
                }
            }
            while let Some(&(until, id)) = n.stalled.first() {
                if until > now {
                    break;
                }
                n.stalled.pop_first();
                ids.push(id);
            }
        }
        let mut results = Vec::new();
        {
            let reorder = self.builder.reorder;
            let n = &mut self.nodes[node];
            for id in ids {
                let Some(command) = n.in_flight.get(&id) else {
                    continue;
                };
                if let (
                    IoCommand::Write {
                        offset_bytes, data, ..
                    },
                    true,
                ) = (command, reorder > 0.0)
                {
                    let (lo, hi) = (*offset_bytes, offset_bytes + data.len() as u64);
                    // In id order (so sorted): later overlapping writes not landed yet.
                    let later: Vec<u64> = n
                        .in_flight
                        .range(id + 1..)
                        .filter(|(_, later)| match later {
                            IoCommand::Write {
                                offset_bytes, data, ..
                            } => *offset_bytes < hi && offset_bytes + data.len() as u64 > lo,
                            _ => false,
                        })
                        .filter(|(id, _)| !n.landed.contains(id))
                        .map(|(&id, _)| id)
                        .collect();
                    if !later.is_empty() && self.reorder_rng.chance(reorder) {
                        self.reordered += 1;
                        if self.reorder_rng.chance(0.5) {
                            // It lands after them: held until they are done.
                            n.held.insert(id, later);
                            self.hash.add(8);
                            continue;
                        }
                        // They land beneath it, now.
                        self.hash.add(9);
                        for id in later {
                            if let Some(IoCommand::Write {
                                offset_bytes, data, ..
                            }) = n.in_flight.get(&id)
                            {
                                n.storage.write(*offset_bytes, data);
                                n.landed.insert(id);
                            }
                        }
                    }
                }
                results.extend(n.complete(id));
                // Writes held for this one land now (and those held for them, in turn).
                let mut landed = vec![id];
                while let Some(id) = landed.pop() {
                    let free: Vec<u64> = n
                        .held
                        .iter_mut()
                        .filter_map(|(&held, waits)| {
                            let at = waits.binary_search(&id).ok()?;
                            waits.remove(at);
                            waits.is_empty().then_some(held)
                        })
                        .collect();
                    for held in free {
                        n.held.remove(&held);
                        results.extend(n.complete(held));
                        landed.push(held);
                    }
                }
            }
            while n.flush_done.front().is_some_and(|(t, _)| *t <= now) {
                let (_, id) = n.flush_done.pop_front().expect("due flush");
                n.storage.flush();
                results.push(IoDone::Flushed { id });
            }
        }
        self.scratch = done;
        self.finish_flushes(node);
        for result in results {
            self.hash.add(match &result {
                IoDone::Read { id, .. } => *id << 2,
                IoDone::Written { id } => *id << 2 | 1,
                IoDone::Flushed { id } => *id << 2 | 2,
            });
            self.with_core(node, |core, now| core.handle_io(now, result));
        }
        self.reschedule(node);
    }
}
