//! The simulator's host layer: how the cores' disk requests reach a simulated node's disk
//! ([`cordillera_sim::world`]), written once for the lab and the seeded simulation tests (and
//! the nodes still to come).
//!
//! A node's disk is shared by the cores it hosts (a store and an off-loading client's base
//! volume, say). Each core gets a [`DiskPort`]: its share of the disk (a byte offset where its
//! region starts) and of the request ids (a tag in the high bits, so completions find their
//! core). The port translates the core's requests ([`DiskOp`] of the store; the client's
//! `BaseOp` converts into one) into [`IoCommand`]s and the disk's completions back into
//! [`DiskDone`] (the client's `BaseDone` converts from it), with the durability the experiment
//! models ([`Durability`]):
//!
//! - [`Durability::WriteThenFlush`] (the fault model of `docs/SIMULATION.md`): a *durable*
//!   write is the write and then a flush; the core hears of it only once the flush completes,
//!   so a crash in between loses it unacknowledged. Flushes go to the disk.
//! - [`Durability::WriteThrough`] (the lab's performance model, the drive's write cache not
//!   modelled): every write is durable once written, and a flush completes at once.
//!
//! Sierra's nodes (MDS, chunk servers, loggers, object clients) as the simulator's cores, which
//! put Sierra's chunks on these ports, are in `cordillera-gears-host`.

use rustc_hash::FxHashSet;
use std::collections::VecDeque;

use cordillera_sim::world::{IoCommand, IoDone};
use cordillera_vstore::store::{DiskDone, DiskOp};

/// Id bits the ports' tags may use (a core's own ids stay below).
pub const TAG_BITS: u64 = 0xff << 56;
/// The id bit of the flush that follows a durable write.
const FLUSH_AFTER: u64 = 1 << 55;

/// How durable writes and flushes are modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    WriteThenFlush,
    WriteThrough,
}

/// One core's share of a node's disk.
#[derive(Debug)]
pub struct DiskPort {
    tag: u64,
    offset_bytes: u64,
    durability: Durability,
    /// Durable writes written and waiting for the flush after them, or not yet written.
    durable: FxHashSet<u64>,
    /// Answers due at once (write-through flushes).
    ready: VecDeque<DiskDone>,
    in_flight: u64,
    durable_steps: u64,
}

impl DiskPort {
    /// A share starting at `offset_bytes` of the disk, whose request ids carry `tag` (within
    /// [`TAG_BITS`]; different for each core of the node).
    pub fn new(tag: u64, offset_bytes: u64, durability: Durability) -> DiskPort {
        assert_eq!(tag & !TAG_BITS, 0, "a tag within TAG_BITS");
        DiskPort {
            tag,
            offset_bytes,
            durability,
            durable: FxHashSet::default(),
            ready: VecDeque::new(),
            in_flight: 0,
            durable_steps: 0,
        }
    }

    /// Whether the completion `id` is one of this port's.
    pub fn owns(&self, id: u64) -> bool {
        id & TAG_BITS == self.tag
    }

    /// How this share's durable writes and flushes are modelled.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Requests on the disk not yet answered (a load figure).
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Durable writes completed by their flush (to show the tests exercise them).
    pub fn durable_steps(&self) -> u64 {
        self.durable_steps
    }

    /// The command for a request (`None`: it is answered at once, see [`DiskPort::poll_ready`]).
    pub fn submit(&mut self, op: impl Into<DiskOp>) -> Option<IoCommand> {
        let id_of = |id: u64| {
            debug_assert_eq!(id & (TAG_BITS | FLUSH_AFTER), 0, "a core id below the tags");
            self.tag | id
        };
        let command = match op.into() {
            DiskOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => IoCommand::Read {
                id: id_of(id),
                offset_bytes: self.offset_bytes + offset_bytes,
                length_bytes,
            },
            DiskOp::Write {
                id,
                offset_bytes,
                data,
                durable,
            } => {
                if durable && self.durability == Durability::WriteThenFlush {
                    self.durable.insert(id);
                }
                IoCommand::Write {
                    id: id_of(id),
                    offset_bytes: self.offset_bytes + offset_bytes,
                    data: data.into_vec(),
                }
            }
            DiskOp::Flush { id } => match self.durability {
                Durability::WriteThenFlush => IoCommand::Flush { id: id_of(id) },
                Durability::WriteThrough => {
                    self.ready.push_back(DiskDone::Flushed { id });
                    return None;
                }
            },
        };
        self.in_flight += 1;
        Some(command)
    }

    /// An answer due at once.
    pub fn poll_ready(&mut self) -> Option<DiskDone> {
        self.ready.pop_front()
    }

    /// A completion of this port's ([`DiskPort::owns`]): the core's answer, or `None` when a
    /// durable write needs its flush first (`then` gets the flush's command).
    pub fn complete(
        &mut self,
        done: IoDone,
        then: &mut impl Extend<IoCommand>,
    ) -> Option<DiskDone> {
        let raw = |id: u64| id & !TAG_BITS;
        match done {
            IoDone::Read { id, data } => {
                self.in_flight -= 1;
                Some(DiskDone::Read { id: raw(id), data })
            }
            IoDone::Written { id } if self.durable.contains(&raw(id)) => {
                then.extend([IoCommand::Flush {
                    id: id | FLUSH_AFTER,
                }]);
                None
            }
            IoDone::Written { id } => {
                self.in_flight -= 1;
                Some(DiskDone::Written { id: raw(id) })
            }
            IoDone::Flushed { id } if id & FLUSH_AFTER != 0 => {
                let id = raw(id) & !FLUSH_AFTER;
                self.durable.remove(&id);
                self.in_flight -= 1;
                self.durable_steps += 1;
                Some(DiskDone::Written { id })
            }
            IoDone::Flushed { id } => {
                self.in_flight -= 1;
                Some(DiskDone::Flushed { id: raw(id) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_writes_are_answered_after_their_flush_and_shares_do_not_mix() {
        let mut store = DiskPort::new(1 << 62, 1 << 20, Durability::WriteThenFlush);
        let base = DiskPort::new(0, 0, Durability::WriteThenFlush);
        let w = store
            .submit(DiskOp::Write {
                id: 7,
                offset_bytes: 4096,
                data: vec![1; 512].into(),
                durable: true,
            })
            .unwrap();
        let IoCommand::Write {
            id, offset_bytes, ..
        } = w
        else {
            panic!("{w:?}")
        };
        assert_eq!(offset_bytes, (1 << 20) + 4096);
        assert!(store.owns(id) && !base.owns(id));
        let mut then = Vec::new();
        assert_eq!(store.complete(IoDone::Written { id }, &mut then), None);
        let [IoCommand::Flush { id: flush }] = then[..] else {
            panic!("{then:?}")
        };
        assert!(store.owns(flush));
        assert_eq!(store.in_flight(), 1);
        assert_eq!(
            store.complete(IoDone::Flushed { id: flush }, &mut then),
            Some(DiskDone::Written { id: 7 })
        );
        assert_eq!((store.in_flight(), store.durable_steps()), (0, 1));
    }

    #[test]
    fn write_through_answers_flushes_at_once_and_durable_writes_when_written() {
        let mut p = DiskPort::new(0, 0, Durability::WriteThrough);
        assert_eq!(p.submit(DiskOp::Flush { id: 3 }), None);
        assert_eq!(p.poll_ready(), Some(DiskDone::Flushed { id: 3 }));
        let Some(IoCommand::Write { id, .. }) = p.submit(DiskOp::Write {
            id: 4,
            offset_bytes: 0,
            data: vec![0; 512].into(),
            durable: true,
        }) else {
            panic!()
        };
        let mut then = Vec::new();
        assert_eq!(
            p.complete(IoDone::Written { id }, &mut then),
            Some(DiskDone::Written { id: 4 })
        );
        assert!(then.is_empty());
    }
}
