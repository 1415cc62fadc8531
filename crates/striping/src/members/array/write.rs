//! Writes, row by row under the row's lock: the region's dirty bit durable first; the old
//! bytes read (all live units over the range when a data member is lost); the journal entry
//! when degraded; the member writes; and the acknowledgement once any member that failed
//! under them is durably failed.

use cordillera_models::device::raid::RaidLevel;

use super::super::journal::Entry;
use super::super::{parity_full, parity_update, Piece, RowWrite};
use super::steps::{xor_into, MemberWrite, Step};
use super::{ArrayCore, Done, Io, Kind, Op, OpId, WPhase, WriteOp};

impl ArrayCore {
    /// Whether the labels already say member `m` is not current at `row`, as of its latest
    /// failure: only then may a write leave it out.
    pub(super) fn skip_recorded(&self, m: usize, row: u64) -> bool {
        self.durably_unusable(m, row) && self.durable.seq >= self.meta.members[m].lost_since
    }

    pub(super) fn advance_write(&mut self, op: &mut Op, id: OpId) -> Step {
        if op.waiting > 0 {
            return Step::Wait;
        }
        let Kind::Write(w) = &mut op.kind else {
            unreachable!()
        };
        let mut w = std::mem::take(w);
        let step = self.write_step(op, id, &mut w);
        if let Step::Finished(Err(_)) = step {
            // The row in progress lets go of its lock and its region.
            if !matches!(w.phase, WPhase::Lock) {
                let row = w.rows[w.at].row;
                let region = self.region(row);
                self.writers[region] -= 1;
                self.unlock(row);
            }
        }
        op.kind = Kind::Write(w);
        step
    }

    /// The members of a mirror or stripe row that a write touches.
    pub(super) fn row_members(&self, row: &RowWrite) -> Vec<usize> {
        if self.meta.level == RaidLevel::Raid5 {
            return (0..self.meta.members.len()).collect();
        }
        let mut m: Vec<usize> = row
            .data
            .iter()
            .chain(&row.copies)
            .map(|p| p.member)
            .collect();
        m.sort_unstable();
        m.dedup();
        m
    }

    pub(super) fn write_step(&mut self, op: &mut Op, id: OpId, w: &mut WriteOp) -> Step {
        if w.at == w.rows.len() {
            return Step::Finished(Ok(Done::Written));
        }
        let row = w.rows[w.at].clone();
        let region = self.region(row.row);
        match w.phase {
            WPhase::Lock => {
                if !self.lock(row.row, id) {
                    return Step::Wait;
                }
                self.writers[region] += 1;
                if !self.meta.dirty[region] {
                    self.meta.dirty[region] = true;
                    self.label_wanted = true;
                }
                w.phase = WPhase::Intent;
                Step::Progress
            }
            WPhase::Intent => {
                let pending_clears = self.label.as_ref().is_some_and(|l| !l.meta.dirty[region]);
                if !self.durable.dirty[region] || pending_clears {
                    self.label_wanted |= pending_clears;
                    return Step::Wait;
                }
                w.phase = WPhase::Plan;
                Step::Progress
            }
            WPhase::Plan => self.write_plan(op, id, w, &row),
            WPhase::Read => {
                let failed: Vec<usize> = op
                    .results
                    .iter()
                    .filter(|(_, r)| r.is_err())
                    .map(|(&tag, _)| match tag {
                        usize::MAX => row.parity.expect("parity").member,
                        t if !w.skip.is_empty() => t,
                        t => row.data[t].member,
                    })
                    .collect();
                if !failed.is_empty() {
                    op.results.clear();
                    w.phase = WPhase::Plan;
                    return Step::Progress;
                }
                w.phase = WPhase::Write;
                Step::Progress
            }
            WPhase::Write => self.write_prepare(op, w, &row),
            WPhase::Journal => self.write_journal(op, id, w, &row),
            WPhase::JournalWritten | WPhase::JournalSynced => {
                let failed = std::mem::take(&mut op.results).values().any(|r| r.is_err());
                let (p, slot) = w.slot.expect("a journal slot");
                if failed {
                    // The parity member failed: planned again, the row has lost two.
                    w.slot = None;
                    self.journal_busy.remove(&(p, slot));
                    w.phase = WPhase::Plan;
                } else if matches!(w.phase, WPhase::JournalWritten) {
                    self.issue(op, id, p, Io::Sync { member: p });
                    w.phase = WPhase::JournalSynced;
                } else {
                    w.phase = WPhase::Issue;
                }
                Step::Progress
            }
            WPhase::Issue => self.write_issue(op, id, w, &row),
            WPhase::Issued => self.write_issued(op, id, w),
            WPhase::PostSync => {
                for (&m, r) in &op.results {
                    if r.is_err() && !op.failed.contains(&m) {
                        op.failed.push(m);
                    }
                }
                op.results.clear();
                let slot = w.slot.take().expect("a journal slot");
                self.journal_busy.remove(&slot);
                w.entry = None;
                w.phase = WPhase::Settle;
                Step::Progress
            }
            WPhase::Settle => self.write_settle(op, w, &row, region),
        }
    }

    /// Plans a row: which members are lost (or a RAID-5 replacement not yet durably rebuilt
    /// there), and the old bytes to read for its parity; a row that has lost too much fails.
    fn write_plan(&mut self, op: &mut Op, id: OpId, w: &mut WriteOp, row: &RowWrite) -> Step {
        let members = self.row_members(row);
        let mut lost: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| !self.usable(m, row.row))
            .collect();
        // RAID-5: a replacement's data unit rebuilt but not yet durably (the labels'
        // cursor is below the row) is written as if lost, with the journal, and also
        // written itself: after a crash it is lost again, and its bytes are what the
        // row's parity must give.
        w.shadow = None;
        if self.meta.level == RaidLevel::Raid5 {
            let p = self.layout.parity_member(row.row);
            w.shadow = members
                .iter()
                .copied()
                .find(|&m| m != p && self.usable(m, row.row) && self.durably_unusable(m, row.row));
            lost.extend(w.shadow);
        }
        // Skipping a member waits until the labels say it is not current here, and
        // since when (the journal entry below is dated by the durable label).
        if lost.iter().any(|&m| !self.skip_recorded(m, row.row)) {
            return Step::Wait;
        }
        let pieces: Vec<&Piece> = row.data.iter().chain(&row.copies).collect();
        match self.meta.level {
            RaidLevel::Raid5 => {
                if lost.len() > 1 {
                    return Step::Finished(Err(self.lost_error(row.row, lost.len())));
                }
                let par = row.parity.expect("a RAID-5 row has parity");
                w.skip = lost.clone();
                let reads: Vec<(usize, u64, u64)> = match lost.first().copied() {
                    _ if par.full => Vec::new(),
                    None => {
                        let mut v: Vec<(usize, u64, u64)> = row
                            .data
                            .iter()
                            .enumerate()
                            .map(|(i, p)| (i, p.member_offset, p.length))
                            .collect();
                        let base = row.row * self.layout.unit();
                        v.push((usize::MAX, base + par.lo, par.hi - par.lo));
                        v
                    }
                    Some(x) if x == par.member => Vec::new(),
                    Some(x) => {
                        self.counters.degraded_writes += 1;
                        let base = row.row * self.layout.unit();
                        (0..self.meta.members.len())
                            .filter(|&m| m != x)
                            .map(|m| (m, base + par.lo, par.hi - par.lo))
                            .collect()
                    }
                };
                if reads.is_empty() {
                    w.phase = WPhase::Write;
                    return Step::Progress;
                }
                for (tag, member_offset, length) in reads {
                    let member = if tag == usize::MAX {
                        par.member
                    } else if !w.skip.is_empty() {
                        tag
                    } else {
                        row.data[tag].member
                    };
                    let io = Io::Read {
                        member,
                        offset: self.area.data_offset() + member_offset,
                        length,
                    };
                    self.issue(op, id, tag, io);
                }
                w.phase = WPhase::Read;
                Step::Progress
            }
            _ => {
                // Every unit keeps at least one live copy.
                for p in &row.data {
                    let copies = pieces.iter().filter(|q| q.lun_offset == p.lun_offset);
                    if copies.clone().all(|q| lost.contains(&q.member)) {
                        return Step::Finished(Err(self.lost_error(row.row, copies.count())));
                    }
                }
                if !lost.is_empty() {
                    self.counters.degraded_writes += 1;
                }
                w.skip = lost;
                w.phase = WPhase::Write;
                Step::Progress
            }
        }
    }

    /// The row's member writes, and its journal entry when a RAID-5 data member is lost.
    fn write_prepare(&mut self, op: &mut Op, w: &mut WriteOp, row: &RowWrite) -> Step {
        let (writes, lost_new) = self.row_writes(w, row, &op.results);
        op.results.clear();
        w.writes = writes;
        w.entry = lost_new.map(|(lo, bytes)| {
            self.journal_n += 1;
            let x = w.skip[0];
            Entry {
                array: self.meta.array,
                label_seq: self.durable.seq,
                n: self.journal_n,
                row: row.row,
                member: x as u32,
                member_id: self.meta.members[x].id,
                lo,
                bytes,
            }
        });
        w.phase = if w.entry.is_some() {
            WPhase::Journal
        } else {
            WPhase::Issue
        };
        Step::Progress
    }

    /// The journal entry to its slot on the row's parity member (one row's writes at a time
    /// there).
    fn write_journal(&mut self, op: &mut Op, id: OpId, w: &mut WriteOp, row: &RowWrite) -> Step {
        // Row r's entries always go to slot r mod slots of its parity member, so the
        // newest entry of a row is the only one of it there is.
        let p = self.layout.parity_member(row.row);
        let slot = row.row % self.area.journal_slots;
        if !self.journal_busy.insert((p, slot)) {
            return Step::Wait;
        }
        w.slot = Some((p, slot));
        let entry = w.entry.as_ref().expect("an entry to journal");
        let io = Io::Write {
            member: p,
            offset: self.area.journal_offset(slot),
            data: entry.encode(self.area.journal_slot()),
        };
        self.issue(op, id, p, io);
        w.phase = WPhase::JournalWritten;
        Step::Progress
    }

    /// The member writes go out, unless a member failed since planning (planned again).
    fn write_issue(&mut self, op: &mut Op, id: OpId, w: &mut WriteOp, row: &RowWrite) -> Step {
        if self.barrier_wanted || self.barrier_syncs > 0 {
            return Step::Wait;
        }
        // A member of the row failed since planning: planned again (with the journal
        // if it is a RAID-5 data member), never written as if it were live.
        // So did the member left out, again, making the entry stale.
        let now_lost = self
            .row_members(row)
            .into_iter()
            .any(|m| !w.skip.contains(&m) && !self.usable(m, row.row))
            || w.entry
                .as_ref()
                .is_some_and(|e| e.label_seq < self.meta.members[e.member as usize].lost_since);
        if now_lost {
            if let Some(slot) = w.slot.take() {
                self.journal_busy.remove(&slot);
            }
            w.writes.clear();
            w.entry = None;
            w.phase = WPhase::Plan;
            return Step::Progress;
        }
        self.writes_issued += 1;
        for (member, offset, data) in std::mem::take(&mut w.writes) {
            self.issue(
                op,
                id,
                member,
                Io::Write {
                    member,
                    offset,
                    data,
                },
            );
        }
        w.phase = WPhase::Issued;
        Step::Progress
    }

    /// The member writes answered: failures noted; a degraded row's writes synced before its
    /// journal slot is free.
    fn write_issued(&mut self, op: &mut Op, id: OpId, w: &mut WriteOp) -> Step {
        self.writes_issued -= 1;
        let failed: Vec<usize> = op
            .results
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(&m, _)| m)
            .collect();
        for &m in &failed {
            if !op.failed.contains(&m) {
                op.failed.push(m);
            }
        }
        let written: Vec<usize> = op.results.keys().copied().collect();
        op.results.clear();
        if w.slot.is_some() {
            // Degraded: the row's writes are synced before its journal slot is free.
            for m in written.into_iter().filter(|m| !failed.contains(m)) {
                self.issue(op, id, m, Io::Sync { member: m });
            }
            w.phase = WPhase::PostSync;
        } else {
            w.phase = WPhase::Settle;
        }
        Step::Progress
    }

    /// The row is done once it survives and every member that failed under it is durably
    /// failed: its lock and region let go, the next row begins.
    fn write_settle(
        &mut self,
        op: &mut Op,
        w: &mut WriteOp,
        row: &RowWrite,
        region: usize,
    ) -> Step {
        let members = self.row_members(row);
        let lost: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| !self.usable(m, row.row))
            .collect();
        let survives = match self.meta.level {
            RaidLevel::Raid5 => lost.len() <= 1,
            _ => row.data.iter().all(|p| {
                row.data
                    .iter()
                    .chain(&row.copies)
                    .filter(|q| q.lun_offset == p.lun_offset)
                    .any(|q| !lost.contains(&q.member))
            }),
        };
        if !survives {
            return Step::Finished(Err(self.lost_error(row.row, lost.len())));
        }
        // Acknowledged only once a member whose write failed is durably failed.
        if op.failed.iter().any(|&m| !self.failure_durable(m)) {
            return Step::Wait;
        }
        op.failed.clear();
        self.writers[region] -= 1;
        self.epoch += 1;
        self.last_write[region] = self.epoch;
        self.unlock(row.row);
        w.at += 1;
        w.phase = WPhase::Lock;
        w.skip.clear();
        Step::Progress
    }

    /// The member writes of a row: its data and copies on live members, and (RAID-5) its
    /// parity, computed from the old bytes read (`olds`, by tag) or from the new data alone.
    pub(super) fn row_writes(
        &self,
        w: &WriteOp,
        row: &RowWrite,
        olds: &std::collections::BTreeMap<usize, Result<Vec<u8>, ()>>,
    ) -> (Vec<MemberWrite>, Option<(u64, Vec<u8>)>) {
        let slice = |p: &Piece| -> &[u8] {
            &w.data[(p.lun_offset - w.offset) as usize..][..p.length as usize]
        };
        let old = |tag: usize| -> &[u8] {
            olds.get(&tag)
                .and_then(|r| r.as_ref().ok())
                .expect("the read before the write")
        };
        // Every member not left out at planning; a write to one failed since then fails or
        // lands harmlessly (RAID-5's parity below already counts its new data).
        let mut out: Vec<(usize, u64, Vec<u8>)> = row
            .data
            .iter()
            .chain(&row.copies)
            .filter(|p| !w.skip.contains(&p.member))
            .map(|p| {
                (
                    p.member,
                    self.area.data_offset() + p.member_offset,
                    slice(p).to_vec(),
                )
            })
            .collect();
        if self.meta.level != RaidLevel::Raid5 {
            return (out, None);
        }
        let par = row.parity.expect("a RAID-5 row has parity");
        let lost = w.skip.first().copied();
        if lost == Some(par.member) {
            return (out, None);
        }
        let unit = self.layout.unit();
        let base = row.row * unit;
        // A lost data member's bytes after the write, over the parity's range: the journal's.
        let mut lost_new = None;
        let parity = if par.full {
            let units: Vec<&[u8]> = row.data.iter().map(slice).collect();
            if let Some(x) = lost {
                let p = row
                    .data
                    .iter()
                    .find(|p| p.member == x)
                    .expect("a full row has x");
                lost_new = Some((0, slice(p).to_vec()));
            }
            parity_full(&units)
        } else if let Some(x) = lost {
            // The lost member's bytes are what the rest of the row XORs to; the new parity is
            // the XOR of every data unit's new bytes over the range.
            let len = (par.hi - par.lo) as usize;
            let mut lost_bytes = vec![0u8; len];
            for m in (0..self.meta.members.len()).filter(|&m| m != x) {
                xor_into(&mut lost_bytes, old(m));
            }
            let mut parity = vec![0u8; len];
            for m in (0..self.meta.members.len()).filter(|&m| m != par.member) {
                let mut unit_bytes = if m == x {
                    lost_bytes.clone()
                } else {
                    old(m).to_vec()
                };
                for p in row.data.iter().filter(|p| p.member == m) {
                    let at = (p.member_offset - base - par.lo) as usize;
                    unit_bytes[at..at + p.length as usize].copy_from_slice(slice(p));
                }
                xor_into(&mut parity, &unit_bytes);
                if m == x {
                    lost_new = Some((par.lo, unit_bytes));
                }
            }
            parity
        } else {
            let pieces: Vec<(u64, &[u8], &[u8])> = row
                .data
                .iter()
                .enumerate()
                .map(|(i, p)| (p.member_offset - base, old(i), slice(p)))
                .collect();
            parity_update(par.lo, old(usize::MAX), &pieces)
        };
        out.push((par.member, self.area.data_offset() + base + par.lo, parity));
        if let (Some(x), Some((lo, bytes))) = (w.shadow, &lost_new) {
            out.push((x, self.area.data_offset() + base + lo, bytes.clone()));
        }
        (out, lost_new)
    }
}
