//! Reads: direct from the member holding each piece (any live copy), or, with it lost, the
//! XOR of the rest of its row under the row's lock.

use cordillera_models::device::raid::RaidLevel;

use super::steps::{xor_into, Step};
use super::{ArrayCore, Done, Io, Kind, Op, OpId, RPhase, ReadOp};

impl ArrayCore {
    pub(super) fn advance_read(&mut self, op: &mut Op, id: OpId) -> Step {
        if op.waiting > 0 {
            return Step::Wait;
        }
        let Kind::Read(r) = &mut op.kind else {
            unreachable!()
        };
        let mut r = std::mem::take(r);
        let step = self.read_step(op, id, &mut r);
        op.kind = Kind::Read(r);
        step
    }

    pub(super) fn read_step(&mut self, op: &mut Op, id: OpId, r: &mut ReadOp) -> Step {
        let results = std::mem::take(&mut op.results);
        match r.phase {
            RPhase::Direct => {
                for (tag, result) in results {
                    let (place, _) = r.issued[tag].clone();
                    match result {
                        Ok(bytes) => {
                            let at = (place.lun_offset - r.offset) as usize;
                            r.buf[at..at + bytes.len()].copy_from_slice(&bytes);
                        }
                        // The member is failed (by `complete`): read elsewhere.
                        Err(()) => r.todo.push(place),
                    }
                }
                r.issued.clear();
                if !r.todo.is_empty() {
                    let mut plan = Vec::new();
                    for place in std::mem::take(&mut r.todo) {
                        let from = place
                            .members
                            .iter()
                            .copied()
                            .find(|&m| self.usable(m, place.row));
                        match from {
                            Some(m) => plan.push((place, m)),
                            None if self.meta.level == RaidLevel::Raid5 => {
                                self.counters.degraded_reads += 1;
                                r.reconstruct.push(place)
                            }
                            None => {
                                let lost = place.members.len();
                                return Step::Finished(Err(self.lost_error(place.row, lost)));
                            }
                        }
                    }
                    if !plan.is_empty() {
                        for (tag, (place, m)) in plan.into_iter().enumerate() {
                            let io = Io::Read {
                                member: m,
                                offset: self.data_offset(place.row, place.within),
                                length: place.length,
                            };
                            r.issued.push((place, m));
                            self.issue(op, id, tag, io);
                        }
                        return Step::Progress;
                    }
                }
                if r.reconstruct.is_empty() {
                    return Step::Finished(Ok(Done::Read(std::mem::take(&mut r.buf))));
                }
                r.phase = RPhase::Lock;
                Step::Progress
            }
            RPhase::Lock => {
                let place = r
                    .reconstruct
                    .last()
                    .expect("a piece to reconstruct")
                    .clone();
                if self.usable(place.members[0], place.row) {
                    // Its member was rebuilt meanwhile: read directly.
                    r.todo.extend(r.reconstruct.pop());
                    r.phase = RPhase::Direct;
                    return Step::Progress;
                }
                if !self.lock(place.row, id) {
                    return Step::Wait;
                }
                let n = self.meta.members.len();
                let others: Vec<usize> = (0..n).filter(|&m| m != place.members[0]).collect();
                if others.iter().any(|&m| !self.usable(m, place.row)) {
                    self.unlock(place.row);
                    return Step::Finished(Err(self.lost_error(place.row, 2)));
                }
                for m in others {
                    let io = Io::Read {
                        member: m,
                        offset: self.data_offset(place.row, place.within),
                        length: place.length,
                    };
                    self.issue(op, id, m, io);
                }
                r.phase = RPhase::Reads;
                Step::Progress
            }
            RPhase::Reads => {
                let place = r.reconstruct.pop().expect("a piece being reconstructed");
                let mut failed = false;
                let mut acc = vec![0u8; place.length as usize];
                for (_, result) in results {
                    match result {
                        Ok(bytes) => xor_into(&mut acc, &bytes),
                        Err(()) => failed = true,
                    }
                }
                self.unlock(place.row);
                if failed {
                    // Planned again from the start: its own member may be back (rebuilt), or
                    // a second member lost ends it with an error.
                    r.todo.push(place);
                    r.phase = RPhase::Direct;
                    return Step::Progress;
                }
                let at = (place.lun_offset - r.offset) as usize;
                r.buf[at..at + acc.len()].copy_from_slice(&acc);
                if r.reconstruct.is_empty() {
                    return Step::Finished(Ok(Done::Read(std::mem::take(&mut r.buf))));
                }
                r.phase = RPhase::Lock;
                Step::Progress
            }
        }
    }
}
