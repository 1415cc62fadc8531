//! Row by row over the whole array or a range: the rebuild of a replacement, scrubs, and the
//! resync of dirty rows after an unclean stop (with the journal where a member is lost).

use cordillera_models::device::raid::RaidLevel;

use super::super::journal::Entry;
use super::super::label::MemberState;
use super::steps::{xor_into, Step};
use super::{ArrayCore, ArrayError, Done, Io, Kind, Op, OpId, RowsKind, RowsOp, SPhase};

impl ArrayCore {
    pub(super) fn advance_rows(&mut self, op: &mut Op, id: OpId) -> Step {
        if op.waiting > 0 {
            return Step::Wait;
        }
        let Kind::Rows(s) = &mut op.kind else {
            unreachable!()
        };
        let mut s = std::mem::take(s);
        let step = self.rows_step(op, id, &mut s);
        if let Step::Finished(Err(_)) = step {
            if !matches!(s.phase, SPhase::Lock) && s.at < s.rows.len() {
                self.unlock(s.rows[s.at]);
            }
        }
        op.kind = Kind::Rows(s);
        step
    }

    pub(super) fn rows_step(&mut self, op: &mut Op, id: OpId, s: &mut RowsOp) -> Step {
        if s.at == s.rows.len() {
            return self.rows_finish(op, id, s);
        }
        let row = s.rows[s.at];
        let results = std::mem::take(&mut op.results);
        match s.phase {
            SPhase::Lock => self.rows_lock(op, id, s, row),
            SPhase::Reads => {
                let mut units = Vec::new();
                let mut failed = false;
                for (m, r) in results {
                    match r {
                        Ok(b) => units.push((m, b)),
                        Err(()) => failed = true,
                    }
                }
                if failed {
                    self.unlock(row);
                    s.phase = SPhase::Lock;
                    return Step::Progress;
                }
                let writes = self.rows_writes(s, row, units);
                if writes.is_empty() {
                    self.unlock(row);
                    s.at += 1;
                    s.phase = SPhase::Lock;
                    return Step::Progress;
                }
                for (m, data) in writes {
                    let io = Io::Write {
                        member: m,
                        offset: self.data_offset(row, 0),
                        data,
                    };
                    self.issue(op, id, m, io);
                }
                s.phase = SPhase::Writes;
                Step::Progress
            }
            SPhase::Writes => {
                if let RowsKind::Rebuild { member } = s.kind {
                    if results.get(&member).is_some_and(|r| r.is_err()) {
                        return Step::Finished(Err(ArrayError::RebuildStopped {
                            member,
                            why: "the replacement returned an error".into(),
                        }));
                    }
                    self.cursor[member] = row + 1;
                    self.counters.rows_rebuilt += 1;
                }
                self.unlock(row);
                s.at += 1;
                s.phase = SPhase::Lock;
                Step::Progress
            }
        }
    }

    /// A row's lock, and the units to read for it: a rebuild's sources (or why it stops), a
    /// resync's or scrub's live members; a row that cannot be checked is counted and passed.
    fn rows_lock(&mut self, op: &mut Op, id: OpId, s: &mut RowsOp, row: u64) -> Step {
        let n = self.meta.members.len();
        let unit = self.layout.unit();
        // A replacement is copied to only once the labels know it (on it, too): a
        // label that moves its cursor is then never found beside a blank disk.
        if let RowsKind::Rebuild { member } = s.kind {
            if self.durable.members[member].id != self.meta.members[member].id
                && matches!(
                    self.meta.members[member].state,
                    MemberState::Rebuilding { .. }
                )
            {
                return Step::Wait;
            }
        }
        if !self.lock(row, id) {
            return Step::Wait;
        }
        let live: Vec<usize> = (0..n).filter(|&m| self.usable(m, row)).collect();
        let sources: Vec<usize> = match s.kind {
            RowsKind::Rebuild { member } => {
                if !matches!(
                    self.meta.members[member].state,
                    MemberState::Rebuilding { .. }
                ) {
                    return Step::Finished(Err(ArrayError::RebuildStopped {
                        member,
                        why: "the replacement failed".into(),
                    }));
                }
                match self.meta.level {
                    RaidLevel::Raid5 => {
                        if live.len() < n - 1 {
                            return Step::Finished(Err(ArrayError::RebuildStopped {
                                member,
                                why: format!("row {row}: another member lost"),
                            }));
                        }
                        live.into_iter().filter(|&m| m != member).collect()
                    }
                    RaidLevel::Raid10 => {
                        let partner = member ^ 1;
                        if !self.usable(partner, row) {
                            return Step::Finished(Err(ArrayError::RebuildStopped {
                                member,
                                why: format!("its mirror {partner} lost"),
                            }));
                        }
                        vec![partner]
                    }
                    _ => match live.into_iter().find(|&m| m != member) {
                        Some(m) => vec![m],
                        None => {
                            return Step::Finished(Err(ArrayError::RebuildStopped {
                                member,
                                why: "no live copy".into(),
                            }))
                        }
                    },
                }
            }
            RowsKind::Resync
                if self.meta.level == RaidLevel::Raid5
                    && live.len() == n - 1
                    && self.journal.contains_key(&row) =>
            {
                live
            }
            _ => {
                let complete = match self.meta.level {
                    RaidLevel::Raid0 => false,
                    RaidLevel::Raid5 => live.len() == n,
                    _ => live.len() > 1,
                };
                if !complete {
                    if self.meta.level != RaidLevel::Raid0 {
                        s.report.degraded += 1;
                    }
                    let unknown = (0..n).any(|m| !live.contains(&m) && row < self.lost_from[m]);
                    if s.kind == RowsKind::Resync && self.meta.level == RaidLevel::Raid5 && unknown
                    {
                        s.report.unrepaired.push(row);
                    }
                    s.report.rows += 1;
                    self.unlock(row);
                    s.at += 1;
                    return Step::Progress;
                }
                live
            }
        };
        for m in sources {
            let io = Io::Read {
                member: m,
                offset: self.data_offset(row, 0),
                length: unit,
            };
            self.issue(op, id, m, io);
        }
        s.phase = SPhase::Reads;
        Step::Progress
    }

    /// What a scrub, resync or rebuild writes to a row whose units `units` were read.
    pub(super) fn rows_writes(
        &mut self,
        s: &mut RowsOp,
        row: u64,
        units: Vec<(usize, Vec<u8>)>,
    ) -> Vec<(usize, Vec<u8>)> {
        let unit = self.layout.unit() as usize;
        let repair = match s.kind {
            RowsKind::Rebuild { member } => {
                let mut acc = vec![0u8; unit];
                if self.meta.level == RaidLevel::Raid5 {
                    for (_, b) in &units {
                        xor_into(&mut acc, b);
                    }
                } else {
                    acc.clone_from(&units[0].1);
                }
                return vec![(member, acc)];
            }
            RowsKind::Scrub { repair } => repair,
            RowsKind::Resync => {
                self.counters.rows_resynced += 1;
                if let Some(e) = self.journal.remove(&row) {
                    if units.len() < self.meta.members.len() {
                        return self.journal_parity(s, row, &e, &units);
                    }
                }
                true
            }
        };
        s.report.rows += 1;
        let mut out = Vec::new();
        if self.meta.level == RaidLevel::Raid5 {
            let mut acc = vec![0u8; unit];
            for (_, b) in &units {
                xor_into(&mut acc, b);
            }
            if acc.iter().any(|b| *b != 0) {
                s.report.mismatched.push(row);
                if repair {
                    let p = self.layout.parity_member(row);
                    let old = &units.iter().find(|(m, _)| *m == p).expect("parity read").1;
                    let mut parity = old.clone();
                    xor_into(&mut parity, &acc);
                    out.push((p, parity));
                }
            }
        } else {
            // Each set of copies against its first live one.
            let sets: Vec<Vec<usize>> = match self.meta.level {
                RaidLevel::Raid10 => (0..self.meta.members.len() / 2)
                    .map(|i| vec![2 * i, 2 * i + 1])
                    .collect(),
                _ => vec![(0..self.meta.members.len()).collect()],
            };
            let mut differs = false;
            for set in sets {
                let live: Vec<&(usize, Vec<u8>)> =
                    units.iter().filter(|(m, _)| set.contains(m)).collect();
                let Some(first) = live.first() else { continue };
                for other in &live[1..] {
                    if other.1 != first.1 {
                        differs = true;
                        if repair {
                            out.push((other.0, first.1.clone()));
                        }
                    }
                }
            }
            if differs {
                s.report.mismatched.push(row);
            }
        }
        if !out.is_empty() {
            s.report.repaired += 1;
        }
        out
    }

    /// A dirty row whose lost member's bytes the journal holds: its parity over the entry's
    /// range is made the XOR of those bytes and the live data (`units`: every live unit).
    pub(super) fn journal_parity(
        &mut self,
        s: &mut RowsOp,
        row: u64,
        e: &Entry,
        units: &[(usize, Vec<u8>)],
    ) -> Vec<(usize, Vec<u8>)> {
        s.report.rows += 1;
        let p = self.layout.parity_member(row);
        let (lo, hi) = (e.lo as usize, e.lo as usize + e.bytes.len());
        let old = &units.iter().find(|(m, _)| *m == p).expect("parity read").1;
        let mut range = e.bytes.clone();
        for (_, b) in units.iter().filter(|(m, _)| *m != p) {
            xor_into(&mut range, &b[lo..hi]);
        }
        if range == old[lo..hi] {
            return Vec::new();
        }
        s.report.mismatched.push(row);
        s.report.repaired += 1;
        let mut parity = old.clone();
        parity[lo..hi].copy_from_slice(&range);
        vec![(p, parity)]
    }

    pub(super) fn rows_finish(&mut self, op: &mut Op, id: OpId, s: &mut RowsOp) -> Step {
        let results = std::mem::take(&mut op.results);
        match s.kind {
            RowsKind::Scrub { .. } => Step::Finished(Ok(Done::Scrubbed(s.report.clone()))),
            RowsKind::Resync => {
                // What the resync wrote is synced before the rows are served: a row read
                // after a crash reads the same after the next.
                if s.finishing == 0 {
                    s.finishing = 1;
                    for m in 0..self.meta.members.len() {
                        if self.meta.members[m].state != MemberState::Failed {
                            self.issue(op, id, m, Io::Sync { member: m });
                        }
                    }
                    return Step::Progress;
                }
                let _ = results;
                let regions: Vec<usize> = s.rows.iter().map(|&r| self.region(r)).collect();
                for r in regions {
                    self.needs_resync[r] = false;
                }
                Step::Finished(Ok(Done::Scrubbed(s.report.clone())))
            }
            RowsKind::Rebuild { member } => {
                let from = s.rows.first().copied().unwrap_or(self.cursor[member]);
                let to = from + s.rows.len() as u64;
                match s.finishing {
                    0 => {
                        self.issue(op, id, member, Io::Sync { member });
                        s.finishing = 1;
                        Step::Progress
                    }
                    1 => {
                        if results.get(&member).is_some_and(|r| r.is_err()) {
                            return Step::Finished(Err(ArrayError::RebuildStopped {
                                member,
                                why: "the replacement's sync returned an error".into(),
                            }));
                        }
                        if !matches!(
                            self.meta.members[member].state,
                            MemberState::Rebuilding { .. }
                        ) {
                            return Step::Finished(Err(ArrayError::RebuildStopped {
                                member,
                                why: "the replacement failed".into(),
                            }));
                        }
                        self.meta.members[member].state = if to >= self.layout.rows() {
                            MemberState::InSync
                        } else {
                            MemberState::Rebuilding { cursor: to }
                        };
                        self.label_wanted = true;
                        s.finishing = 2;
                        Step::Progress
                    }
                    _ => {
                        if self.durable.members[member].state != self.meta.members[member].state
                            || self.durable.members[member].id != self.meta.members[member].id
                        {
                            if self.meta.members[member].state == MemberState::Failed {
                                return Step::Finished(Err(ArrayError::RebuildStopped {
                                    member,
                                    why: "the replacement failed".into(),
                                }));
                            }
                            return Step::Wait;
                        }
                        let finished = to >= self.layout.rows();
                        Step::Finished(Ok(Done::Rebuilt {
                            member,
                            from,
                            to,
                            finished,
                        }))
                    }
                }
            }
        }
    }
}
