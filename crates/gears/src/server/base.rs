//! A primary's base operations, the log client's view of the group's replicas: reads on the
//! local disk, the superblock kept by the MDS, and writes to the replicas a write names — every
//! one, the primary's own (a local copy of a logged write, §3.6), or the others (a reclaim of
//! bytes the primary's replica holds) — each held while it overlaps one in flight or a rebuild
//! piece, and their completion or failure.

use super::*;

/// Which replicas a base write goes to: a write of the volume or a reclaim (all), a local copy
/// of an off-loaded write (the primary's own, §3.6), a reclaim of bytes the primary's replica
/// holds already (the others).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Replicas {
    All,
    Local,
    Others,
}

impl Replicas {
    fn op(self, id: u64, offset_bytes: u64, data: Vec<u8>) -> BaseOp {
        match self {
            Replicas::All => BaseOp::Write {
                id,
                offset_bytes,
                data,
                durable: true,
            },
            Replicas::Local => BaseOp::WriteLocal {
                id,
                offset_bytes,
                data,
            },
            Replicas::Others => BaseOp::Replicate {
                id,
                offset_bytes,
                data,
            },
        }
    }
}

/// The bytes a base operation writes (`None`: a read).
fn write_extent(op: &BaseOp) -> Option<(u64, u64)> {
    op.written()
        .map(|(offset, data)| (offset, offset + data.len() as u64))
}

impl ChunkServer {
    pub(super) fn base_op(&mut self, g: GroupId, op: BaseOp) {
        let group_bytes = self.config.group_bytes;
        let p = self.primaries.get_mut(&g).expect("primary");
        let epoch = p.view.epoch;
        match op {
            BaseOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } if offset_bytes >= group_bytes => {
                // The log client's superblock, as the MDS holds it.
                let mut data = p.superblock.clone();
                data.resize(length_bytes as usize, 0);
                p.log.handle_base(self.now, BaseDone::Read { id, data });
            }
            BaseOp::Write {
                id,
                offset_bytes,
                data,
                ..
            } if offset_bytes >= group_bytes => {
                let request = self.next_id;
                self.next_id += 1;
                p.superblock_writes
                    .insert(request, (id, data.clone(), self.now));
                self.out.push_back((
                    Endpoint::Mds,
                    Message::WriteSuperblock {
                        id: request,
                        group: g,
                        epoch,
                        data,
                    },
                ));
            }
            BaseOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => {
                let disk = self.id_next();
                self.disk.insert(
                    disk,
                    DiskWork::BaseRead {
                        group: g,
                        epoch,
                        base: id,
                    },
                );
                self.io_out.push_back(ChunkIo::Read {
                    id: disk,
                    group: g,
                    offset_bytes,
                    length_bytes,
                });
            }
            write => {
                let (id, offset_bytes, data, to) = match write {
                    BaseOp::Write {
                        id,
                        offset_bytes,
                        data,
                        ..
                    } => (id, offset_bytes, data, Replicas::All),
                    BaseOp::WriteLocal {
                        id,
                        offset_bytes,
                        data,
                    } => (id, offset_bytes, data, Replicas::Local),
                    BaseOp::Replicate {
                        id,
                        offset_bytes,
                        data,
                    } => (id, offset_bytes, data, Replicas::Others),
                    BaseOp::Read { .. } => unreachable!("a read among the writes"),
                };
                let end = offset_bytes + data.len() as u64;
                let over = |lo: u64, hi: u64| lo < end && offset_bytes < hi;
                // A write over one in flight (or held) waits for it: the secondaries apply
                // replicated writes as they arrive, and a message can overtake another, so two
                // overlapping writes sent at once could land in one order on one replica and in
                // the other on another (the replicas would differ, and a later primary would
                // serve the older write). Local copies and reclaim writes to the other
                // replicas wait the same way.
                let held = p
                    .rebuild
                    .as_ref()
                    .is_some_and(|r| matches!(r.piece, Some((lo, hi, _)) if over(lo, hi)))
                    || p.orphan_piece.is_some_and(|(lo, hi, _, _)| over(lo, hi))
                    || p.base
                        .values()
                        .any(|w| over(w.offset_bytes, w.offset_bytes + w.data.len() as u64))
                    || p.held
                        .iter()
                        .filter_map(write_extent)
                        .any(|(lo, hi)| over(lo, hi));
                if held {
                    p.held.push_back(to.op(id, offset_bytes, data));
                    return;
                }
                self.start_base_write(g, id, offset_bytes, data, to);
            }
        }
    }

    /// Starts base write `base` on the replicas `to` names: the local disk, and a replicated
    /// write to each other replica.
    pub(super) fn start_base_write(
        &mut self,
        g: GroupId,
        base: u64,
        offset_bytes: u64,
        data: Vec<u8>,
        to: Replicas,
    ) {
        let now = self.now;
        let me = self.config.server;
        debug_assert!(
            offset_bytes + data.len() as u64 <= self.config.group_bytes,
            "server {me}: a base write past the end of {g:?}"
        );
        let p = self.primaries.get_mut(&g).expect("primary");
        let epoch = p.view.epoch;
        debug_assert!(
            !p.base.contains_key(&base),
            "server {me}: base write {base} of {g:?} started twice"
        );
        if to != Replicas::Local && !p.log.base_available() {
            // A secondary went away since the log client chose the base: log it instead (a
            // local copy is for logging mode: it needs no secondary).
            self.stats.base_writes_failed += 1;
            p.log.handle_base(now, BaseDone::Failed { id: base, data });
            return;
        }
        let targets: Vec<(usize, ServerId)> = p
            .view
            .replicas
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, s)| s != me && to != Replicas::Local)
            .collect();
        let waiting = targets.iter().fold(0u64, |m, &(i, _)| m | 1 << i);
        debug_assert!(
            p.view.replicas.contains(&me),
            "server {me}: primary of {g:?} is not one of its replicas"
        );
        let local = to != Replicas::Others;
        p.base.insert(
            base,
            BaseWrite {
                offset_bytes,
                data: data.clone(),
                local_done: !local,
                waiting,
                failed: false,
                started: now,
            },
        );
        for (_, s) in targets {
            let id = self.id_next();
            self.replications
                .insert(id, (g, epoch, Replication::Base(base)));
            self.out.push_back((
                Endpoint::Server(s),
                Message::Replicate {
                    id,
                    group: g,
                    epoch,
                    offset_bytes,
                    data: data.clone(),
                },
            ));
        }
        if !local {
            // Nothing to wait for on the local disk (and nothing at all with no other replica).
            self.finish_base_writes(g);
            return;
        }
        let disk = self.id_next();
        self.write_disk(
            ChunkIo::Write {
                id: disk,
                group: g,
                offset_bytes,
                data,
            },
            DiskWork::BaseWrite {
                group: g,
                epoch,
                base,
            },
        );
    }

    /// Completes base writes whose replicas all answered (or one failed, once the local
    /// write is done).
    pub(super) fn finish_base_writes(&mut self, g: GroupId) {
        let now = self.now;
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        let done: Vec<u64> = p
            .base
            .iter()
            .filter(|(_, w)| w.local_done && (w.waiting == 0 || w.failed))
            .map(|(&id, _)| id)
            .collect();
        let finished = !done.is_empty();
        for id in done {
            let w = p.base.remove(&id).expect("base write");
            debug_assert!(
                w.local_done && (w.waiting == 0 || w.failed),
                "a base write finished before its replicas"
            );
            if w.failed {
                self.stats.base_writes_failed += 1;
                p.log
                    .handle_base(now, BaseDone::Failed { id, data: w.data });
            } else {
                p.log.handle_base(now, BaseDone::Written { id });
            }
        }
        // Writes that waited for these go on, in their order.
        if finished && !p.held.is_empty() {
            self.release_held(g);
        }
    }
}
