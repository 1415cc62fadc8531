//! How each operation of the member array advances: the I/Os it issues at each step and what
//! it makes of their results (the rules are in the module above). Reads are in `read.rs`,
//! writes in `write.rs`, rebuilds, scrubs and resyncs in `rows.rs`; here are what they share,
//! flushes and the label.

use super::super::label::{slot_offset, Label, MemberState};
use super::{ArrayCore, ArrayError, Done, FlushOp, Io, Kind, LabelWrite, Op, OpId, Owner};

/// A member write: member, offset, bytes.
pub(super) type MemberWrite = (usize, u64, Vec<u8>);

/// What advancing an operation did.
pub(super) enum Step {
    /// Nothing: it waits (for I/Os, a lock, a label).
    Wait,
    Progress,
    Finished(Result<Done, ArrayError>),
}

pub(super) fn xor_into(acc: &mut [u8], other: &[u8]) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a ^= b;
    }
}

impl ArrayCore {
    pub(super) fn issue(&mut self, op: &mut Op, id: OpId, tag: usize, io: Io) {
        let io_id = self.next_io;
        self.next_io += 1;
        op.waiting += 1;
        let m = io.member();
        debug_assert!(
            m < self.meta.members.len(),
            "an I/O to member {m} of {}",
            self.meta.members.len()
        );
        let fresh = self
            .ios
            .insert(io_id, (Owner::Op(id, tag), m, self.meta.members[m].id))
            .is_none();
        debug_assert!(fresh, "I/O id {io_id} given out twice");
        self.out.push((io_id, io));
    }

    pub(super) fn lock(&mut self, row: u64, id: OpId) -> bool {
        *self.locks.entry(row).or_insert(id) == id
    }

    pub(super) fn unlock(&mut self, row: u64) {
        let held = self.locks.remove(&row);
        debug_assert!(held.is_some(), "row {row} unlocked while not locked");
    }

    pub(super) fn lost_error(&self, row: u64, lost: usize) -> ArrayError {
        ArrayError::Lost {
            row,
            lost,
            level: self.meta.level,
        }
    }

    /// Advances operation `id`; whether anything changed.
    pub(super) fn advance(&mut self, id: OpId) -> bool {
        let Some(mut op) = self.ops.get_mut(&id).and_then(Option::take) else {
            return false;
        };
        let step = match &mut op.kind {
            Kind::Read(_) => self.advance_read(&mut op, id),
            Kind::Write(_) => self.advance_write(&mut op, id),
            Kind::Rows(_) => self.advance_rows(&mut op, id),
            Kind::Flush(_) => self.advance_flush(&mut op, id),
        };
        match step {
            Step::Wait | Step::Progress => {
                let progress = matches!(step, Step::Progress);
                *self
                    .ops
                    .get_mut(&id)
                    .expect("an op's entry stays while it runs") = Some(op);
                progress
            }
            Step::Finished(result) => {
                self.ops.remove(&id);
                debug_assert_eq!(op.waiting, 0, "an op finished with I/Os in flight");
                self.done.push((id, result));
                true
            }
        }
    }

    pub(super) fn advance_flush(&mut self, op: &mut Op, id: OpId) -> Step {
        if op.waiting > 0 {
            return Step::Wait;
        }
        let Kind::Flush(f) = &mut op.kind else {
            unreachable!()
        };
        let (epoch, phase) = (f.epoch, f.phase);
        match phase {
            0 => {
                // Failed members are not synced: their writes count only once the labels say
                // they failed (then the row's parity or copies hold what they had).
                for m in 0..self.meta.members.len() {
                    if self.meta.members[m].state == MemberState::Failed {
                        op.failed.push(m);
                    } else {
                        self.issue(op, id, m, Io::Sync { member: m });
                    }
                }
                op.kind = Kind::Flush(FlushOp { epoch, phase: 1 });
                Step::Progress
            }
            _ => {
                for (m, r) in std::mem::take(&mut op.results) {
                    if r.is_err() {
                        op.failed.push(m);
                    }
                }
                if op.failed.iter().any(|&m| !self.failure_durable(m)) {
                    return Step::Wait;
                }
                for r in 0..self.meta.dirty.len() {
                    if self.meta.dirty[r]
                        && self.writers[r] == 0
                        && self.last_write[r] <= epoch
                        && !self.needs_resync[r]
                    {
                        self.meta.dirty[r] = false;
                        self.label_wanted = true;
                    }
                }
                Step::Finished(Ok(Done::Flushed))
            }
        }
    }

    /// Advances the label write: a new one when wanted and none is in flight (to every member
    /// not failed, in the slot its sequence number picks), then their syncs; when they are
    /// done, the label is durable.
    pub(super) fn advance_label(&mut self) -> bool {
        let live: Vec<usize> = (0..self.meta.members.len())
            .filter(|&m| self.meta.members[m].state != MemberState::Failed)
            .collect();
        match &mut self.label {
            None if self.barrier_syncs > 0 => false,
            None if self.barrier_wanted => {
                // Row writes in flight finish, then every live member is synced.
                if self.writes_issued > 0 {
                    return false;
                }
                self.barrier_wanted = false;
                for &m in &live {
                    self.barrier_syncs += 1;
                    let io_id = self.next_io;
                    self.next_io += 1;
                    self.ios
                        .insert(io_id, (Owner::Barrier, m, self.meta.members[m].id));
                    self.out.push((io_id, Io::Sync { member: m }));
                }
                true
            }
            None => {
                if !self.label_wanted {
                    return false;
                }
                self.label_wanted = false;
                self.meta.seq += 1;
                let meta = self.meta.clone();
                let slot = slot_offset(self.area.label_slot, meta.seq);
                for &m in &live {
                    let bytes = Label {
                        position: m as u32,
                        meta: meta.clone(),
                    }
                    .encode(self.area.label_slot)
                    .expect("the label fits its slot (checked at creation)");
                    self.issue_label(
                        m,
                        Io::Write {
                            member: m,
                            offset: slot,
                            data: bytes,
                        },
                    );
                }
                self.counters.labels_written += 1;
                self.label = Some(LabelWrite {
                    meta,
                    pending: live.len(),
                    syncing: false,
                });
                true
            }
            Some(l) if l.pending == 0 => {
                if !l.syncing {
                    l.syncing = true;
                    l.pending = live.len();
                    for &m in &live {
                        self.issue_label(m, Io::Sync { member: m });
                    }
                } else {
                    let l = self.label.take().expect("a label in flight");
                    self.durable = l.meta;
                }
                true
            }
            Some(_) => false,
        }
    }

    pub(super) fn issue_label(&mut self, member: usize, io: Io) {
        let io_id = self.next_io;
        self.next_io += 1;
        self.ios
            .insert(io_id, (Owner::Label, member, self.meta.members[member].id));
        self.out.push((io_id, io));
    }
}
