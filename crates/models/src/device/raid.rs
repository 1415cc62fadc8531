//! Arrays of devices: RAID-0, RAID-1, RAID-10 and RAID-5 (left-symmetric), any stripe unit.
//!
//! RAID-5 writes, per stripe touched: with `[lo, hi)` the union of the byte ranges written within
//! the stripe unit, a *read-modify-write* reads the old data being replaced and the old parity
//! over `[lo, hi)`; a *reconstruct-write* reads, from every data unit, the part of `[lo, hi)`
//! not being written. The array picks whichever needs fewer disk reads (read-modify-write on a
//! tie); a full-stripe write needs none. Writes are issued when the stripe's reads complete.

use cordillera_types::Op;

use super::{Completion, Device, IoRequest};
use cordillera_types::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaidLevel {
    Raid0,
    /// Every member mirrors the whole volume.
    Raid1,
    /// Mirrored pairs, striped.
    Raid10,
    Raid5,
}

/// One member I/O: disk, offset on that disk, size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberIo {
    pub disk: usize,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u64,
}

/// The member I/Os of one array request, in two phases: `reads` first, then `writes`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub reads: Vec<MemberIo>,
    pub writes: Vec<MemberIo>,
}

/// The layout arithmetic of an array, separate from timing so it can be tested alone.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub level: RaidLevel,
    pub disks: usize,
    pub stripe_unit_bytes: u64,
    pub disk_bytes: u64,
}

impl Layout {
    pub fn new(
        level: RaidLevel,
        disks: usize,
        stripe_unit_bytes: u64,
        disk_bytes: u64,
    ) -> Result<Layout, String> {
        let min = match level {
            RaidLevel::Raid0 => 1,
            RaidLevel::Raid1 => 2,
            RaidLevel::Raid10 => 4,
            RaidLevel::Raid5 => 3,
        };
        if disks < min {
            return Err(format!("{level:?} needs at least {min} disks"));
        }
        if level == RaidLevel::Raid10 && !disks.is_multiple_of(2) {
            return Err("RAID-10 needs an even number of disks".into());
        }
        if stripe_unit_bytes == 0 || !stripe_unit_bytes.is_multiple_of(512) {
            return Err("the stripe unit must be a positive multiple of 512 bytes".into());
        }
        Ok(Layout {
            level,
            disks,
            stripe_unit_bytes,
            disk_bytes: disk_bytes / stripe_unit_bytes * stripe_unit_bytes,
        })
    }

    /// Disks holding distinct data in a stripe.
    pub fn data_disks(&self) -> usize {
        match self.level {
            RaidLevel::Raid0 => self.disks,
            RaidLevel::Raid1 => 1,
            RaidLevel::Raid10 => self.disks / 2,
            RaidLevel::Raid5 => self.disks - 1,
        }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.disk_bytes * self.data_disks() as u64
    }

    /// RAID-5: the parity disk of stripe (row) `stripe`, left-symmetric.
    pub fn parity_disk(&self, stripe: u64) -> usize {
        self.disks - 1 - (stripe % self.disks as u64) as usize
    }

    /// Splits `[offset, offset + size)` into (data column, stripe, offset in unit, length) pieces.
    fn pieces(&self, offset: u64, size: u64, out: &mut Vec<(usize, u64, u64, u64)>) {
        let su = self.stripe_unit_bytes;
        let width = self.data_disks() as u64;
        out.clear();
        let (mut at, end) = (offset, offset + size);
        while at < end {
            let chunk = at / su;
            let within = at % su;
            let len = (su - within).min(end - at);
            out.push(((chunk % width) as usize, chunk / width, within, len));
            at += len;
        }
    }

    /// The member I/Os of a request. `prefer(first, count)` picks the mirror to read from among
    /// disks `first..first + count` (RAID-1/10).
    pub fn plan(
        &self,
        op: Op,
        offset: u64,
        size: u64,
        prefer: &dyn Fn(usize, usize) -> usize,
    ) -> Plan {
        let mut plan = Plan::default();
        self.plan_into(op, offset, size, prefer, &mut plan, &mut Vec::new());
        plan
    }

    /// [`Layout::plan`] into reused buffers.
    pub fn plan_into(
        &self,
        op: Op,
        offset: u64,
        size: u64,
        prefer: &dyn Fn(usize, usize) -> usize,
        plan: &mut Plan,
        pieces: &mut Vec<(usize, u64, u64, u64)>,
    ) {
        let su = self.stripe_unit_bytes;
        plan.reads.clear();
        plan.writes.clear();
        self.pieces(offset, size, pieces);
        match self.level {
            RaidLevel::Raid0 | RaidLevel::Raid1 | RaidLevel::Raid10 => {
                for &(column, stripe, within, len) in pieces.iter() {
                    let disk_offset = stripe * su + within;
                    let (first, count) = match self.level {
                        RaidLevel::Raid0 => (column, 1),
                        RaidLevel::Raid1 => (0, self.disks),
                        _ => (2 * column, 2),
                    };
                    let io = |disk| MemberIo {
                        disk,
                        op,
                        offset_bytes: disk_offset,
                        length_bytes: len,
                    };
                    match op {
                        Op::Read if count == 1 => plan.reads.push(io(first)),
                        Op::Read => plan.reads.push(io(prefer(first, count))),
                        Op::Write => plan.writes.extend((first..first + count).map(io)),
                    }
                }
            }
            RaidLevel::Raid5 => {
                if op == Op::Read {
                    for &(column, stripe, within, len) in pieces.iter() {
                        plan.reads.push(MemberIo {
                            disk: self.raid5_disk(stripe, column),
                            op,
                            offset_bytes: stripe * su + within,
                            length_bytes: len,
                        });
                    }
                } else {
                    let mut at = 0;
                    while at < pieces.len() {
                        let stripe = pieces[at].1;
                        let end = pieces[at..]
                            .iter()
                            .position(|p| p.1 != stripe)
                            .map_or(pieces.len(), |n| at + n);
                        self.plan_stripe_write(stripe, &pieces[at..end], plan);
                        at = end;
                    }
                }
            }
        }
        coalesce(&mut plan.reads);
        coalesce(&mut plan.writes);
    }

    /// RAID-5: the disk of data column `column` in stripe `stripe` (left-symmetric).
    fn raid5_disk(&self, stripe: u64, column: usize) -> usize {
        (self.parity_disk(stripe) + 1 + column) % self.disks
    }

    fn plan_stripe_write(&self, stripe: u64, pieces: &[(usize, u64, u64, u64)], plan: &mut Plan) {
        let su = self.stripe_unit_bytes;
        let base = stripe * su;
        let lo = pieces.iter().map(|p| p.2).min().expect("pieces");
        let hi = pieces.iter().map(|p| p.2 + p.3).max().expect("pieces");
        let written = |column: usize| {
            pieces
                .iter()
                .find(|p| p.0 == column)
                .map(|p| (p.2, p.2 + p.3))
        };
        // Reconstruct-write reads, per data column, the parts of [lo, hi) not written.
        let gaps = |column: usize| -> [(u64, u64); 2] {
            match written(column) {
                None => [(lo, hi), (0, 0)],
                Some((start, end)) => [(lo, start), (end, hi)],
            }
        };
        let reconstruct_reads: usize = (0..self.data_disks())
            .map(|c| gaps(c).iter().filter(|(from, to)| to > from).count())
            .sum();
        let rmw_reads = pieces.len() + 1;
        let parity = self.parity_disk(stripe);
        if reconstruct_reads < rmw_reads {
            for column in 0..self.data_disks() {
                let disk = self.raid5_disk(stripe, column);
                for (from, to) in gaps(column) {
                    if to > from {
                        plan.reads.push(MemberIo {
                            disk,
                            op: Op::Read,
                            offset_bytes: base + from,
                            length_bytes: to - from,
                        });
                    }
                }
            }
        } else {
            for p in pieces {
                plan.reads.push(MemberIo {
                    disk: self.raid5_disk(stripe, p.0),
                    op: Op::Read,
                    offset_bytes: base + p.2,
                    length_bytes: p.3,
                });
            }
            plan.reads.push(MemberIo {
                disk: parity,
                op: Op::Read,
                offset_bytes: base + lo,
                length_bytes: hi - lo,
            });
        }
        for p in pieces {
            plan.writes.push(MemberIo {
                disk: self.raid5_disk(stripe, p.0),
                op: Op::Write,
                offset_bytes: base + p.2,
                length_bytes: p.3,
            });
        }
        plan.writes.push(MemberIo {
            disk: parity,
            op: Op::Write,
            offset_bytes: base + lo,
            length_bytes: hi - lo,
        });
    }
}

/// How an array maps its requests to member I/Os: a [`Layout`], or any other mapping over the
/// same members (e.g. a pool of arrays shared by volumes with their own stripe units).
pub trait Planner {
    /// Usable bytes of the address space requests use.
    fn capacity_bytes(&self) -> u64;
    /// The member I/Os of a request into `plan` (cleared first); `pieces` is scratch space.
    /// `prefer(first, count)` picks the mirror to read from among disks `first..first + count`.
    fn plan_into(
        &self,
        op: Op,
        offset: u64,
        size: u64,
        prefer: &dyn Fn(usize, usize) -> usize,
        plan: &mut Plan,
        pieces: &mut Vec<(usize, u64, u64, u64)>,
    );
}

impl Planner for Layout {
    fn capacity_bytes(&self) -> u64 {
        Layout::capacity_bytes(self)
    }
    fn plan_into(
        &self,
        op: Op,
        offset: u64,
        size: u64,
        prefer: &dyn Fn(usize, usize) -> usize,
        plan: &mut Plan,
        pieces: &mut Vec<(usize, u64, u64, u64)>,
    ) {
        Layout::plan_into(self, op, offset, size, prefer, plan, pieces)
    }
}

/// Merges I/Os to the same disk that are adjacent on it (a large request crossing whole stripes
/// becomes one I/O per disk).
fn coalesce(ios: &mut Vec<MemberIo>) {
    if ios.len() < 2 {
        return;
    }
    ios.sort_unstable_by_key(|io| (io.disk, io.offset_bytes));
    ios.dedup_by(|next, last| {
        let adjacent = last.disk == next.disk
            && last.op == next.op
            && last.offset_bytes + last.length_bytes == next.offset_bytes;
        if adjacent {
            last.length_bytes += next.length_bytes;
        }
        adjacent
    });
}

struct Parent {
    id: u64,
    pending: usize,
    writes: Vec<MemberIo>,
}

/// Member I/Os of one parent at most (their ids are `slot << MEMBER_BITS | index`).
const MEMBER_BITS: u32 = 20;

/// An array of member devices with its [`Layout`] (or another [`Planner`]). A request's member
/// I/Os are issued in two phases: its reads, then (when they are all done) its writes.
pub struct Raid<D: Device, L: Planner = Layout> {
    layout: L,
    members: Vec<D>,
    /// Each member's `poll_timeout()` (`Nanos::MAX` for none), refreshed whenever the array
    /// submits to or advances it: members change only through the array.
    member_next: Vec<Nanos>,
    /// Requests in progress, by slot; freed slots are reused.
    parents: Vec<Option<Parent>>,
    free_slots: Vec<usize>,
    in_progress: usize,
    /// Completions of zero-length requests, reported at the next advance.
    immediate: Vec<Completion>,
    plan: Plan,
    pieces: Vec<(usize, u64, u64, u64)>,
    scratch: Vec<Completion>,
}

impl<D: Device> Raid<D> {
    pub fn new(
        level: RaidLevel,
        stripe_unit_bytes: u64,
        members: Vec<D>,
    ) -> Result<Raid<D>, String> {
        let disk_bytes = members
            .iter()
            .map(|m| m.capacity_bytes())
            .min()
            .unwrap_or(0);
        let layout = Layout::new(level, members.len(), stripe_unit_bytes, disk_bytes)?;
        Ok(Raid::with_planner(layout, members))
    }
}

impl<D: Device, L: Planner> Raid<D, L> {
    /// Members driven by any mapping of requests to member I/Os.
    pub fn with_planner(layout: L, members: Vec<D>) -> Raid<D, L> {
        let member_next = members
            .iter()
            .map(|m| m.poll_timeout().unwrap_or(Nanos::MAX))
            .collect();
        Raid {
            layout,
            member_next,
            members,
            parents: Vec::new(),
            free_slots: Vec::new(),
            in_progress: 0,
            immediate: Vec::new(),
            plan: Plan::default(),
            pieces: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn layout(&self) -> &L {
        &self.layout
    }

    pub fn members(&self) -> &[D] {
        &self.members
    }

    /// The earliest pending member event, from the cached per-member times.
    fn next_member_event(&self) -> Option<Nanos> {
        self.member_next
            .iter()
            .copied()
            .min()
            .filter(|t| *t != Nanos::MAX)
    }

    fn issue(members: &mut [D], next: &mut [Nanos], now: Nanos, slot: usize, ios: &[MemberIo]) {
        assert!(
            ios.len() < 1 << MEMBER_BITS,
            "one request spans too many member I/Os"
        );
        for (index, io) in ios.iter().enumerate() {
            let id = (slot as u64) << MEMBER_BITS | index as u64;
            members[io.disk].submit(
                now,
                IoRequest {
                    id,
                    op: io.op,
                    offset_bytes: io.offset_bytes,
                    length_bytes: io.length_bytes,
                },
            );
            next[io.disk] = members[io.disk].poll_timeout().unwrap_or(Nanos::MAX);
        }
    }

    fn member_done(&mut self, completion: Completion, out: &mut Vec<Completion>) {
        let slot = (completion.id >> MEMBER_BITS) as usize;
        let parent = self.parents[slot]
            .as_mut()
            .expect("member I/O of a request in progress");
        parent.pending -= 1;
        if parent.pending > 0 {
            return;
        }
        if parent.writes.is_empty() {
            let parent = self.parents[slot].take().expect("parent");
            self.free_slots.push(slot);
            self.in_progress -= 1;
            out.push(Completion {
                id: parent.id,
                time_ns: completion.time_ns,
            });
            return;
        }
        let writes = std::mem::take(&mut parent.writes);
        parent.pending = writes.len();
        Self::issue(
            &mut self.members,
            &mut self.member_next,
            completion.time_ns,
            slot,
            &writes,
        );
    }
}

impl<D: Device, L: Planner> Device for Raid<D, L> {
    fn capacity_bytes(&self) -> u64 {
        self.layout.capacity_bytes()
    }

    fn submit(&mut self, now: Nanos, request: IoRequest) {
        if request.length_bytes == 0 {
            self.immediate.push(Completion {
                id: request.id,
                time_ns: now,
            });
            return;
        }
        let members = &self.members;
        let prefer = |first: usize, count: usize| {
            (first..first + count)
                .min_by_key(|d| (members[*d].outstanding(), *d))
                .expect("a mirror")
        };
        self.layout.plan_into(
            request.op,
            request.offset_bytes,
            request.length_bytes,
            &prefer,
            &mut self.plan,
            &mut self.pieces,
        );
        let (first, later) = if self.plan.reads.is_empty() {
            (&self.plan.writes, Vec::new())
        } else {
            (&self.plan.reads, self.plan.writes.clone())
        };
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.parents.push(None);
            self.parents.len() - 1
        });
        self.parents[slot] = Some(Parent {
            id: request.id,
            pending: first.len(),
            writes: later,
        });
        self.in_progress += 1;
        Self::issue(&mut self.members, &mut self.member_next, now, slot, first);
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let members = self.next_member_event();
        match (members, self.immediate.first()) {
            (Some(a), Some(b)) => Some(a.min(b.time_ns)),
            (a, b) => a.or(b.map(|c| c.time_ns)),
        }
    }

    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>) {
        completions.append(&mut self.immediate);
        let mut done = std::mem::take(&mut self.scratch);
        // Instant by instant, so the writes that follow a stripe's reads start at their time.
        while let Some(t) = self.next_member_event() {
            if t > now {
                break;
            }
            for (member, next) in self.members.iter_mut().zip(self.member_next.iter_mut()) {
                if *next == t {
                    member.advance(t, &mut done);
                    *next = member.poll_timeout().unwrap_or(Nanos::MAX);
                }
            }
            for completion in done.drain(..) {
                self.member_done(completion, completions);
            }
        }
        self.scratch = done;
    }

    fn outstanding(&self) -> usize {
        self.in_progress + self.immediate.len()
    }

    fn busy_ns(&self) -> u64 {
        let total: u64 = self.members.iter().map(|m| m.busy_ns()).sum();
        total / self.members.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SU: u64 = 64 * 1024;

    fn first(first: usize, _count: usize) -> usize {
        first
    }

    fn raid5(disks: usize) -> Layout {
        Layout::new(RaidLevel::Raid5, disks, SU, 1 << 30).unwrap()
    }

    fn disks(ios: &[MemberIo]) -> Vec<usize> {
        let mut d: Vec<usize> = ios.iter().map(|io| io.disk).collect();
        d.sort();
        d
    }

    #[test]
    fn left_symmetric_parity_rotates_from_the_last_disk() {
        let l = raid5(5);
        let parity: Vec<usize> = (0..6).map(|s| l.parity_disk(s)).collect();
        assert_eq!(parity, vec![4, 3, 2, 1, 0, 4]);
        // Stripe 1: parity on disk 3, data columns 0..4 on disks 4, 0, 1, 2.
        let plan = l.plan(Op::Read, 4 * SU, 4 * SU, &first);
        assert_eq!(
            plan.reads.iter().map(|io| io.disk).collect::<Vec<_>>(),
            vec![0, 1, 2, 4]
        );
        assert!(plan
            .reads
            .iter()
            .all(|io| io.offset_bytes == SU && io.length_bytes == SU));
    }

    #[test]
    fn small_write_uses_read_modify_write() {
        let l = raid5(5);
        let plan = l.plan(Op::Write, 0, 4096, &first);
        // Stripe 0: parity disk 4, column 0 on disk 0. Reads: old data + old parity.
        assert_eq!(disks(&plan.reads), vec![0, 4]);
        assert_eq!(disks(&plan.writes), vec![0, 4]);
        assert!(plan
            .reads
            .iter()
            .chain(&plan.writes)
            .all(|io| io.offset_bytes == 0 && io.length_bytes == 4096));
    }

    #[test]
    fn large_partial_write_uses_reconstruct_write() {
        let l = raid5(5);
        // Columns 0, 1, 2 of stripe 0 written in full: RMW needs 4 reads, reconstruct 1.
        let plan = l.plan(Op::Write, 0, 3 * SU, &first);
        assert_eq!(
            plan.reads,
            vec![MemberIo {
                disk: 3,
                op: Op::Read,
                offset_bytes: 0,
                length_bytes: SU
            }]
        );
        assert_eq!(disks(&plan.writes), vec![0, 1, 2, 4]);
    }

    #[test]
    fn full_stripe_write_reads_nothing() {
        let l = raid5(5);
        let plan = l.plan(Op::Write, 0, 4 * SU, &first);
        assert!(plan.reads.is_empty());
        assert_eq!(disks(&plan.writes), vec![0, 1, 2, 3, 4]);
        // Two full stripes: no reads; each disk's two units are adjacent and coalesce.
        let plan = l.plan(Op::Write, 0, 8 * SU, &first);
        assert!(plan.reads.is_empty());
        assert_eq!(disks(&plan.writes), vec![0, 1, 2, 3, 4]);
        assert!(plan
            .writes
            .iter()
            .all(|io| io.offset_bytes == 0 && io.length_bytes == 2 * SU));
    }

    #[test]
    fn the_scheme_with_fewer_reads_wins_and_ties_go_to_read_modify_write() {
        let l = raid5(3);
        // 3 disks, half of column 0 written: RMW reads data + parity (2), reconstruct reads
        // column 1 over the same rows (1): reconstruct.
        let plan = l.plan(Op::Write, 0, SU / 2, &first);
        assert_eq!(plan.reads.len(), 1);
        assert_eq!(plan.reads[0].disk, (l.parity_disk(0) + 2) % 3);
        // 5 disks, two columns written: RMW 3 reads, reconstruct 2 reads.
        let plan = raid5(5).plan(Op::Write, 0, 2 * SU, &first);
        assert_eq!(plan.reads.len(), 2);
        // 4 disks, one column written: RMW 2, reconstruct 2 → RMW (reads the written disk).
        let plan = raid5(4).plan(Op::Write, 0, SU, &first);
        assert_eq!(disks(&plan.reads), vec![0, 3]);
    }

    #[test]
    fn raid0_and_mirrors() {
        let l = Layout::new(RaidLevel::Raid0, 4, SU, 1 << 30).unwrap();
        // Half a unit on disk 0, three full units, half a unit back on disk 0 (adjacent there).
        let plan = l.plan(Op::Write, SU / 2, 4 * SU, &first);
        assert_eq!(disks(&plan.writes), vec![0, 1, 2, 3]);
        assert_eq!(
            plan.writes[0],
            MemberIo {
                disk: 0,
                op: Op::Write,
                offset_bytes: SU / 2,
                length_bytes: SU
            }
        );
        let l = Layout::new(RaidLevel::Raid10, 4, SU, 1 << 30).unwrap();
        let w = l.plan(Op::Write, SU, 4096, &first);
        assert_eq!(disks(&w.writes), vec![2, 3]);
        let r = l.plan(Op::Read, SU, 4096, &|first: usize, _| first + 1);
        assert_eq!(disks(&r.reads), vec![3]);
        let l = Layout::new(RaidLevel::Raid1, 2, SU, 1 << 30).unwrap();
        assert_eq!(disks(&l.plan(Op::Write, 0, 10, &first).writes), vec![0, 1]);
        assert_eq!(l.capacity_bytes(), 1 << 30);
        assert!(Layout::new(RaidLevel::Raid5, 2, SU, 1 << 30).is_err());
        assert!(Layout::new(RaidLevel::Raid10, 5, SU, 1 << 30).is_err());
    }
}
