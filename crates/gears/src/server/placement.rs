//! Where a chunk server's groups lie on its disk: the one mapping from the core's chunk I/O
//! ([`ChunkIo`], a group and an offset in it) to disk requests ([`DiskOp`], a byte offset on
//! the server's disk), used by the runtime's chunk server and by the simulator's Sierra node.
//!
//! Each group owns `group_bytes` of the disk, at a slot given by the placement:
//!
//! - [`Slots::ByGroupId`]: slot = the group's id. Needs no table, so a restarted server finds
//!   its groups where it left them; the disk is as large as the cluster's groups (a sparse file,
//!   as the runtime's `chunks.dat`, or the few groups of a seeded schedule).
//! - [`Slots::Packed`]: slots in the order the server first touches its groups. A server holds
//!   a few of the cluster's thousands of groups, so they fit on a modelled disk of fixed capacity
//!   (the lab's testbed); the table lives as long as the node's disk does.

use rustc_hash::FxHashMap;

use cordillera_vstore::store::{DiskDone, DiskOp};

use super::{ChunkIo, ChunkIoDone};
use crate::model::GroupId;

/// How slots are given to groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots {
    ByGroupId,
    Packed,
}

/// A chunk server's groups on its disk.
#[derive(Clone, Debug)]
pub struct GroupPlacement {
    group_bytes: u64,
    slots: Slots,
    packed: FxHashMap<GroupId, u64>,
}

impl GroupPlacement {
    pub fn new(group_bytes: u64, slots: Slots) -> GroupPlacement {
        assert!(group_bytes > 0, "a group holds some bytes");
        GroupPlacement {
            group_bytes,
            slots,
            packed: FxHashMap::default(),
        }
    }

    /// The disk offset of `offset_bytes` into `group` (a packed slot is taken on first use).
    pub fn offset(&mut self, group: GroupId, offset_bytes: u64) -> u64 {
        assert!(
            offset_bytes < self.group_bytes,
            "offset {offset_bytes} inside a group of {} bytes",
            self.group_bytes
        );
        let slot = match self.slots {
            Slots::ByGroupId => group.0 as u64,
            Slots::Packed => {
                let next = self.packed.len() as u64;
                *self.packed.entry(group).or_insert(next)
            }
        };
        slot * self.group_bytes + offset_bytes
    }

    /// Groups given a packed slot so far (0 by group id).
    pub fn slots_used(&self) -> usize {
        self.packed.len()
    }

    /// The disk request for a chunk request (writes are durable: a chunk write is acknowledged
    /// to a primary only once on the disk).
    pub fn disk_op(&mut self, io: ChunkIo) -> DiskOp {
        match io {
            ChunkIo::Read {
                id,
                group,
                offset_bytes,
                length_bytes,
            } => DiskOp::Read {
                id,
                offset_bytes: self.offset(group, offset_bytes),
                length_bytes,
            },
            ChunkIo::Write {
                id,
                group,
                offset_bytes,
                data,
            } => DiskOp::Write {
                id,
                offset_bytes: self.offset(group, offset_bytes),
                data: data.into(),
                durable: true,
            },
        }
    }
}

impl From<DiskDone> for ChunkIoDone {
    /// A disk completion as the chunk server hears it (a flush completes a write).
    fn from(done: DiskDone) -> ChunkIoDone {
        match done {
            DiskDone::Read { id, data } => ChunkIoDone::Read { id, data },
            DiskDone::Written { id } | DiskDone::Flushed { id } => ChunkIoDone::Written { id },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_group_id_is_stateless_and_packed_fills_slots_in_first_use_order() {
        let mut by_id = GroupPlacement::new(1 << 20, Slots::ByGroupId);
        assert_eq!(by_id.offset(GroupId(7), 4096), 7 * (1 << 20) + 4096);
        assert_eq!(by_id.slots_used(), 0);
        let mut packed = GroupPlacement::new(1 << 20, Slots::Packed);
        assert_eq!(packed.offset(GroupId(900), 0), 0);
        assert_eq!(packed.offset(GroupId(3), 512), (1 << 20) + 512);
        assert_eq!(packed.offset(GroupId(900), 8192), 8192);
        assert_eq!(packed.slots_used(), 2);
        let DiskOp::Write {
            offset_bytes,
            durable,
            ..
        } = packed.disk_op(ChunkIo::Write {
            id: 1,
            group: GroupId(3),
            offset_bytes: 4096,
            data: vec![1; 512],
        })
        else {
            panic!("a write")
        };
        assert_eq!((offset_bytes, durable), ((1 << 20) + 4096, true));
    }

    #[test]
    #[should_panic(expected = "inside a group")]
    fn an_offset_past_the_group_is_refused() {
        GroupPlacement::new(4096, Slots::ByGroupId).offset(GroupId(0), 4096);
    }
}
