//! The server's disk writes in issue order where they overlap, and replicated writes from
//! primaries (refused from an older epoch than one seen for the group).

use super::*;

impl ChunkServer {
    /// Issues a disk write once no overlapping write is in flight (writes to the same bytes
    /// reach the disk in the order they were issued).
    pub(super) fn write_disk(&mut self, io: ChunkIo, work: DiskWork) {
        let ChunkIo::Write {
            id,
            group,
            offset_bytes,
            ref data,
        } = io
        else {
            unreachable!("a write");
        };
        let end = offset_bytes + data.len() as u64;
        let overlaps = |w: &(GroupId, u64, u64)| w.0 == group && w.1 < end && offset_bytes < w.2;
        let blocked = self.writing.values().any(overlaps)
            || self.queued_writes.iter().any(|q| match &q.io {
                ChunkIo::Write {
                    group: qg,
                    offset_bytes: qo,
                    data: qd,
                    ..
                } => *qg == group && *qo < end && offset_bytes < qo + qd.len() as u64,
                _ => false,
            });
        if blocked {
            self.queued_writes.push_back(QueuedWrite { io, work });
            return;
        }
        let fresh = self
            .writing
            .insert(id, (group, offset_bytes, end))
            .is_none()
            && self.disk.insert(id, work).is_none();
        debug_assert!(fresh, "disk id {id} issued twice");
        self.io_out.push_back(io);
    }

    pub(super) fn issue_queued_writes(&mut self) {
        let queued = std::mem::take(&mut self.queued_writes);
        let before = queued.len() + self.writing.len();
        for q in queued {
            self.write_disk(q.io, q.work);
        }
        debug_assert_eq!(
            before,
            self.queued_writes.len() + self.writing.len(),
            "a queued write lost or issued twice"
        );
    }

    pub(super) fn replicate_in(
        &mut self,
        from: Endpoint,
        id: u64,
        group: GroupId,
        epoch: Epoch,
        offset_bytes: u64,
        data: Vec<u8>,
    ) {
        let seen = self.epochs.seen(group, epoch);
        if epoch < seen
            || offset_bytes
                .checked_add(data.len() as u64)
                .is_none_or(|end| end > self.config.group_bytes)
        {
            self.stats.replicas_fenced += 1;
            self.out
                .push_back((from, Message::Replicated { id, ok: false }));
            return;
        }
        self.epochs.raise(group, epoch);
        let disk = self.id_next();
        self.write_disk(
            ChunkIo::Write {
                id: disk,
                group,
                offset_bytes,
                data,
            },
            DiskWork::Replica { to: from, id },
        );
    }
}
