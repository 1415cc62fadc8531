//! Copying a group to a replica being rebuilt, piece by piece: base writes over the piece being
//! copied wait for it, so the copy never overwrites a newer write on the new replica.

use super::*;

/// Copying a group to a replica being rebuilt, piece by piece; base writes overlapping the
/// piece being copied wait for it.
pub(super) struct Rebuild {
    pub(super) target: ServerId,
    pub(super) end: u64,
    pub(super) next: u64,
    pub(super) piece: Option<(u64, u64, PieceStage)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PieceStage {
    /// Waiting for base writes in flight over the piece.
    Draining,
    /// `token`: the piece's read, which also names its copy (a read or an answer that
    /// arrives for an earlier piece, or an earlier rebuild of the group, is told apart).
    Reading {
        token: u64,
    },
    Sending {
        since: Nanos,
        token: u64,
    },
}

/// What a replication request in flight is for.
#[derive(Clone, Copy)]
pub(super) enum Replication {
    /// The secondary's copy of a base write.
    Base(u64),
    /// A rebuild piece's copy (its token).
    Piece(u64),
}

impl ChunkServer {
    pub(super) fn start_rebuild_if_needed(&mut self, g: GroupId) {
        let chunk_bytes = self.config.chunk_bytes;
        let p = self.primaries.get_mut(&g).expect("primary");
        let ended = match (p.view.rebuilding, &p.rebuild) {
            (Some(t), Some(r)) if r.target == t => None,
            (Some(target), _) => p.rebuild.replace(Rebuild {
                target,
                end: p.view.slots as u64 * chunk_bytes,
                next: 0,
                piece: None,
            }),
            (None, _) => p.rebuild.take(),
        };
        // The ended rebuild's piece: a copy already sent keeps the writes over it waiting
        // for its answer (or its timeout); one not yet sent never will be, so they go on now
        // (a read still in flight finds no piece of its token and is dropped).
        if let Some((lo, hi, stage)) = ended.and_then(|r| r.piece) {
            if let PieceStage::Sending { since, token } = stage {
                p.orphan_piece = Some((lo, hi, token, since));
            }
            self.release_held(g);
        }
    }

    pub(super) fn release_held(&mut self, g: GroupId) {
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        let held = std::mem::take(&mut p.held);
        for op in held {
            self.base_op(g, op);
        }
    }

    /// One step of a rebuild: wait for base writes over the next piece, read it, send it.
    pub(super) fn advance_rebuild(&mut self, g: GroupId) -> bool {
        let piece_bytes = self.config.rebuild_piece_bytes;
        let p = self.primaries.get_mut(&g).expect("primary");
        let epoch = p.view.epoch;
        let Some(r) = &mut p.rebuild else {
            return false;
        };
        match r.piece {
            None if r.next >= r.end => {
                let replica = r.target;
                p.rebuild = None;
                self.out.push_back((
                    Endpoint::Mds,
                    Message::RebuildDone {
                        group: g,
                        epoch,
                        replica,
                    },
                ));
                true
            }
            None => {
                // Copies at once from this server, over all its groups, at most the budget.
                let copying = self
                    .primaries
                    .values()
                    .filter(|q| q.rebuild.as_ref().is_some_and(|r| r.piece.is_some()))
                    .count();
                debug_assert!(
                    copying <= self.config.rebuild_jobs_max.max(1),
                    "{copying} rebuild pieces copied at once, over the budget"
                );
                if copying >= self.config.rebuild_jobs_max.max(1) {
                    return false;
                }
                let p = self.primaries.get_mut(&g).expect("primary");
                let r = p.rebuild.as_mut().expect("a rebuild");
                let lo = r.next;
                let hi = (lo + piece_bytes).min(r.end);
                debug_assert!(lo < hi, "an empty rebuild piece at {lo} of {}", r.end);
                r.piece = Some((lo, hi, PieceStage::Draining));
                true
            }
            Some((lo, hi, PieceStage::Draining)) => {
                let busy = p
                    .base
                    .values()
                    .any(|w| w.offset_bytes < hi && lo < w.offset_bytes + w.data.len() as u64);
                if busy {
                    return false;
                }
                let disk = self.id_next();
                let p = self.primaries.get_mut(&g).expect("primary");
                let r = p.rebuild.as_mut().expect("a rebuild");
                r.piece = Some((lo, hi, PieceStage::Reading { token: disk }));
                self.disk.insert(
                    disk,
                    DiskWork::RebuildRead {
                        group: g,
                        epoch,
                        token: disk,
                    },
                );
                self.io_out.push_back(ChunkIo::Read {
                    id: disk,
                    group: g,
                    offset_bytes: lo,
                    length_bytes: hi - lo,
                });
                true
            }
            Some(_) => false,
        }
    }

    pub(super) fn rebuild_read(&mut self, g: GroupId, epoch: Epoch, token: u64, data: Vec<u8>) {
        let now = self.now;
        let Some(p) = self.primary_at(g, epoch) else {
            return;
        };
        let Some(r) = &mut p.rebuild else {
            return;
        };
        let Some((lo, hi, PieceStage::Reading { token: t })) = r.piece else {
            return;
        };
        if t != token {
            // The read of an ended rebuild's piece.
            return;
        }
        r.piece = Some((lo, hi, PieceStage::Sending { since: now, token }));
        let target = r.target;
        let id = self.id_next();
        self.replications
            .insert(id, (g, epoch, Replication::Piece(token)));
        self.out.push_back((
            Endpoint::Server(target),
            Message::Replicate {
                id,
                group: g,
                epoch,
                offset_bytes: lo,
                data,
            },
        ));
    }
}
