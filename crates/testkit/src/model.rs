//! The reference model of a block volume for seeded simulation tests (TigerBeetle's state
//! checker, in small): for every block, the writes a read may return. A read issued at `t`
//! may return a write issued before the read completed, unless a later write, issued after it
//! ended and acknowledged before `t`, hides it. A write that ended without an acknowledgement
//! (an error, a crash of its issuer) may or may not have happened: it stays possible until such
//! a later write hides it. Every write's data names its block, sector and write
//! ([`pattern`]), so a read's bytes say which write each sector came from ([`writers_of`]).
//!
//! Reads also never go back in time: once a read returned an acknowledged write `A` for a
//! block, a read issued after that one completed may return another write `B` only if `B` may
//! come after `A` — it had not ended before the first read was issued. (Both may have been
//! concurrent with each other; what a volume may not do is show one, then the other, once
//! both are done: a reclaim that lets an older write land last shows exactly that.) A crash of
//! the client's node forgets what reads saw (an acknowledged write not yet durable may go).

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;

use cordillera_types::Nanos;

/// The unit a torn write keeps or loses.
pub const SECTOR: u64 = 512;

/// The unit of the model.
pub const BLOCK: u64 = 4096;

/// The bytes write `write` puts in a block: every sector names its block, sector and write, so
/// that a block torn by a crash (sectors of different writes) is still told apart.
pub fn pattern(block: u64, write: u64) -> Vec<u8> {
    let mut data = Vec::with_capacity(BLOCK as usize);
    for sector in 0..BLOCK / SECTOR {
        data.extend_from_slice(&sector_pattern(block, sector, write));
    }
    data
}

pub fn sector_pattern(block: u64, sector: u64, write: u64) -> Vec<u8> {
    let mut data = vec![(block * 31 + sector * 5 + write * 7) as u8; SECTOR as usize];
    data[..8].copy_from_slice(&block.to_le_bytes());
    data[8..16].copy_from_slice(&sector.to_le_bytes());
    data[16..24].copy_from_slice(&write.to_le_bytes());
    data
}

/// Which write produced each sector of a block (0: never written; `None`: foreign bytes).
pub fn writers_of(block: u64, bytes: &[u8]) -> Vec<Option<u64>> {
    bytes
        .chunks(SECTOR as usize)
        .enumerate()
        .map(|(sector, s)| writer_of_sector(block, sector as u64, s))
        .collect()
}

/// Which write produced sector `sector` of `block` (0: never written; `None`: foreign bytes):
/// `s` is [`sector_pattern`]`(block, sector, w)` for the write `w` its header names, compared
/// in place.
pub fn writer_of_sector(block: u64, sector: u64, s: &[u8]) -> Option<u64> {
    let word = |at: usize| {
        s.get(at..at + 8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
    };
    if s.len() != SECTOR as usize {
        return None;
    }
    if s.iter().all(|&b| b == 0) {
        return Some(0);
    }
    let write = word(16)?;
    let fill = (block * 31 + sector * 5 + write * 7) as u8;
    let whole = u64::from_ne_bytes([fill; 8]);
    let ok = word(0) == Some(block)
        && word(8) == Some(sector)
        && s[24..]
            .chunks_exact(8)
            .all(|w| u64::from_ne_bytes(w.try_into().unwrap()) == whole);
    ok.then_some(write)
}

// ---------------------------------------------------------------------------------------------
// The reference model of one client's volume; it outlives crashes of the client's node.

#[derive(Clone, Copy, Debug)]
pub struct WriteRec {
    pub id: u64,
    pub issued: Nanos,
    /// When it was acknowledged.
    pub acked: Option<Nanos>,
    /// Acknowledged, or lost unacknowledged in a crash (it may or may not have happened then).
    pub ended: Option<Nanos>,
    /// The model's event count when it ended: orders it against reads issued in the same
    /// nanosecond.
    pub ended_seq: u64,
}

/// What the latest completed read of a block returned (every sector from one write).
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub writer: u64,
    pub issued: Nanos,
    /// The event count when the first read of that nanosecond was issued.
    pub issued_seq: u64,
    pub completed: Nanos,
}

#[derive(Default)]
pub struct Model {
    pub blocks: Vec<Vec<WriteRec>>,
    /// Per block, the latest completed read that returned one write whole.
    pub seen: Vec<Option<Seen>>,
    /// Whether reads going back in time are violations (on unless a harness turns it off for
    /// a known defect, which it then names).
    pub reads_forward: bool,
    /// Writes whose reads may go back in time: a harness names them when a system's stated
    /// limit lets replicas differ on them (Sierra's client crashing with them in flight, its
    /// primary failing too). Such a read is counted in `went_back_excused`, not a violation.
    pub may_go_back: FxHashSet<u64>,
    pub went_back_excused: u64,
    pub in_flight: FxHashSet<u64>,
    /// Issue times of reads in flight (history a read may still return is kept), with the
    /// event count when the first of them was issued.
    pub reads_open: BTreeMap<Nanos, (u32, u64)>,
    /// Events so far (writes issued and ended, reads issued): the order within a nanosecond.
    pub seq: u64,
    pub writes_of: FxHashMap<u64, (u64, u64)>,
    pub next_write: u64,
    pub starts: u64,
    /// When each life of the client became ready.
    pub ready_at: Vec<Nanos>,
    pub reads_checked: u64,
    pub blocks_checked: u64,
    pub writes_acked: u64,
    pub violations: Vec<String>,
    /// Per block, when its history last changed ([`BlockStamp`]).
    stamps: Vec<BlockStamp>,
}

/// How many times a block's history changed (a write issued, ended or pruned) and the latest
/// time recorded in it (an issue or an end). With the stamp unchanged and that time before
/// `t0`, [`Model::acceptable`]`(block, t, t, w)` answers the same for every `t >= t0`: every
/// comparison it makes with `t` (issued, acknowledged before `t`) already held at `t0`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStamp {
    pub changes: u64,
    pub latest: Nanos,
}

/// The pages a check every few milliseconds found acceptable (a cache's blocks, checked against
/// the model again and again while few change), each under a number its holder gives to one
/// content of one block (a cache numbers every change of a page): a page under the same number
/// as when it was last found acceptable, its block's history unchanged since and older than
/// that check, is acceptable now too, without taking it apart again ([`BlockStamp`]).
#[derive(Default)]
pub struct CheckedPages {
    pages: FxHashMap<u64, (u64, BlockStamp, Nanos)>,
}

impl CheckedPages {
    /// Whether block `block`, holding the content numbered `content`, is acceptable to a read
    /// issued now for having been found so at an earlier check with nothing since that could
    /// change the answer.
    pub fn still_acceptable(&self, model: &Model, block: u64, content: u64) -> bool {
        let Some(&(seen, stamp, at)) = self.pages.get(&block) else {
            return false;
        };
        let now = model.stamp(block);
        seen == content && now == stamp && now.latest < at
    }

    /// Block `block`, holding the content numbered `content`, was found acceptable at `t`.
    pub fn record(&mut self, model: &Model, block: u64, content: u64, t: Nanos) {
        self.pages.insert(block, (content, model.stamp(block), t));
    }
}

impl Model {
    pub fn new(blocks: u64) -> Model {
        Model {
            blocks: vec![Vec::new(); blocks as usize],
            seen: vec![None; blocks as usize],
            stamps: vec![BlockStamp::default(); blocks as usize],
            reads_forward: true,
            next_write: 1,
            ..Model::default()
        }
    }

    pub fn write_issued(&mut self, now: Nanos, first: u64, count: u64) -> u64 {
        self.seq += 1;
        let id = self.next_write;
        self.next_write += 1;
        for b in first..first + count {
            self.touch(b, now);
            self.blocks[b as usize].push(WriteRec {
                id,
                issued: now,
                acked: None,
                ended: None,
                ended_seq: 0,
            });
        }
        self.in_flight.insert(id);
        self.writes_of.insert(id, (first, count));
        id
    }

    pub fn write_ended(&mut self, now: Nanos, id: u64, acked: bool) {
        self.seq += 1;
        let seq = self.seq;
        self.in_flight.remove(&id);
        let (first, count) = self.writes_of.remove(&id).expect("a write in flight");
        for b in first..first + count {
            self.touch(b, now);
            let history = &mut self.blocks[b as usize];
            let w = history.iter_mut().find(|w| w.id == id).expect("recorded");
            w.ended = Some(now);
            w.ended_seq = seq;
            if acked {
                w.acked = Some(now);
            }
            if history.len() > 32 {
                let oldest_read = self.reads_open.keys().next().copied().unwrap_or(now);
                Model::prune(history, now.min(oldest_read));
            }
        }
        if acked {
            self.writes_acked += 1;
        }
    }

    /// The block's history changed at `now`.
    fn touch(&mut self, block: u64, now: Nanos) {
        let s = &mut self.stamps[block as usize];
        s.changes += 1;
        s.latest = s.latest.max(now);
    }

    /// When the block's history last changed ([`BlockStamp`]).
    pub fn stamp(&self, block: u64) -> BlockStamp {
        self.stamps[block as usize]
    }

    /// Drops writes no read issued from `now` on may return.
    fn prune(history: &mut Vec<WriteRec>, now: Nanos) {
        let snapshot = history.clone();
        history.retain(|w| !Model::stale(&snapshot, w, now));
    }

    /// Whether a later write, issued after `w` ended and acknowledged before `at`, hides `w`.
    fn stale(history: &[WriteRec], w: &WriteRec, at: Nanos) -> bool {
        let Some(ended) = w.ended else {
            return false;
        };
        history
            .iter()
            .any(|o| o.issued > ended && o.acked.is_some_and(|a| a < at))
    }

    pub fn acceptable(&self, block: u64, issued: Nanos, completed: Nanos, writer: u64) -> bool {
        let history = &self.blocks[block as usize];
        if writer == 0 {
            // Never written, or only by writes not yet acknowledged when the read was issued.
            return !history.iter().any(|o| o.acked.is_some_and(|a| a < issued));
        }
        history
            .iter()
            .find(|w| w.id == writer)
            .is_some_and(|w| w.issued < completed && !Model::stale(history, w, issued))
    }

    /// A read of `block` issued at `issued` returned write `w` whole: the earlier completed
    /// read it contradicts, if any (see the module's documentation).
    fn went_back(&self, block: u64, issued: Nanos, w: u64) -> Option<Seen> {
        let s = self.seen[block as usize]?;
        if w == s.writer || issued <= s.completed {
            return None;
        }
        let history = &self.blocks[block as usize];
        let a_acked = history
            .iter()
            .find(|x| x.id == s.writer)
            .and_then(|x| x.acked)
            .is_some_and(|a| a < issued);
        if !a_acked {
            return None;
        }
        let b_may_follow = w != 0
            && history.iter().find(|x| x.id == w).is_some_and(|x| {
                x.ended
                    .is_none_or(|e| (e, x.ended_seq) > (s.issued, s.issued_seq))
            });
        (!b_may_follow).then_some(s)
    }

    pub fn read_issued(&mut self, at: Nanos) {
        self.seq += 1;
        let seq = self.seq;
        self.reads_open.entry(at).or_insert((0, seq)).0 += 1;
    }

    pub fn read_ended(&mut self, at: Nanos) {
        let (n, _) = self.reads_open.get_mut(&at).expect("a read in flight");
        *n -= 1;
        if *n == 0 {
            self.reads_open.remove(&at);
        }
    }

    pub fn check_read(
        &mut self,
        client: usize,
        first: u64,
        issued: Nanos,
        now: Nanos,
        data: &[u8],
    ) {
        // Reads issued in the same nanosecond are not told apart: this one is taken as the
        // first of them (the fewest writes ended before it).
        let issued_seq = self.reads_open.get(&issued).map_or(0, |r| r.1);
        self.read_ended(issued);
        self.reads_checked += 1;
        for (i, bytes) in data.chunks(BLOCK as usize).enumerate() {
            let block = first + i as u64;
            self.blocks_checked += 1;
            let writers = writers_of(block, bytes);
            let ok = writers
                .iter()
                .all(|w| w.is_some_and(|w| self.acceptable(block, issued, now, w)));
            if !ok && self.violations.len() < 8 {
                self.violations.push(format!(
                    "client {client}: read of block {block} issued at {issued} ns, completed at {now} ns, returned writes {writers:?}; history {:?}",
                    self.blocks[block as usize]
                ));
            }
            let whole = match writers.first() {
                Some(&Some(w)) if writers.iter().all(|&x| x == Some(w)) => Some(w),
                _ => None,
            };
            if let (true, Some(w)) = (ok, whole) {
                if let Some(earlier) = self.went_back(block, issued, w) {
                    if self.may_go_back.contains(&w) {
                        self.went_back_excused += 1;
                    } else if self.reads_forward && self.violations.len() < 8 {
                        self.violations.push(format!(
                            "client {client}: read of block {block} issued at {issued} ns, completed at {now} ns, returned write {w}, but a read issued at {} ns and completed at {} ns (before this one was issued) returned write {}, acknowledged, and write {w} had ended before that read was issued; history {:?}",
                            earlier.issued, earlier.completed, earlier.writer, self.blocks[block as usize]
                        ));
                    }
                }
                let seen = &mut self.seen[block as usize];
                if seen.is_none_or(|s| now > s.completed) {
                    *seen = Some(Seen {
                        writer: w,
                        issued,
                        issued_seq,
                        completed: now,
                    });
                }
            }
        }
    }

    /// The client's node crashed (noticed at its restart): writes in flight end unacknowledged.
    pub fn crashed(&mut self, now: Nanos) {
        self.crashed_keeping(now, &FxHashSet::default());
    }

    /// The client crashed, but the writes in `still_open` live on in servers that hold them
    /// (a distributed store finishes a dead client's requests): they stay in flight until the
    /// caller ends them ([`Model::write_ended`]) when the servers are done with them.
    pub fn crashed_keeping(&mut self, now: Nanos, still_open: &FxHashSet<u64>) {
        self.reads_open.clear();
        self.seen.iter_mut().for_each(|s| *s = None);
        let lost: Vec<u64> = self
            .in_flight
            .iter()
            .copied()
            .filter(|id| !still_open.contains(id))
            .collect();
        for id in lost {
            self.write_ended(now, id, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(model: &mut Model, block: u64, issued: Nanos, completed: Nanos, writer: u64) {
        model.read_issued(issued);
        model.check_read(0, block, issued, completed, &pattern(block, writer));
    }

    /// Two concurrent writes, `a` (issued first) and `b`: both acknowledged by `acked`.
    fn two_writes(a_acked: Nanos, b_acked: Nanos) -> (Model, u64, u64) {
        let mut m = Model::new(4);
        let a = m.write_issued(0, 1, 1);
        let b = m.write_issued(1, 1, 1);
        m.write_ended(b_acked, b, true);
        m.write_ended(a_acked, a, true);
        (m, a, b)
    }

    #[test]
    fn a_concurrent_write_may_win_after_a_read_issued_while_it_was_in_flight() {
        // b is read at 3 while a is still in flight; a ends at 5 and is read at 6: a is
        // ordered after that first read.
        let (mut m, a, b) = two_writes(5, 2);
        read(&mut m, 1, 3, 4, b);
        read(&mut m, 1, 6, 7, a);
        assert!(m.violations.is_empty(), "{:?}", m.violations);
    }

    #[test]
    fn a_read_may_not_go_back_to_a_write_that_had_ended() {
        // Both done by 3; a read at 4 returns b, a read at 6 returns a: a volume that shows
        // one write, then the other, with both done.
        let (mut m, a, b) = two_writes(3, 2);
        read(&mut m, 1, 4, 5, b);
        read(&mut m, 1, 6, 7, a);
        assert_eq!(m.violations.len(), 1, "{:?}", m.violations);
        assert!(m.violations[0].contains("before this one was issued"));
    }

    #[test]
    fn a_read_going_back_to_a_write_named_may_go_back_is_counted_not_a_violation() {
        let (mut m, a, b) = two_writes(20, 30);
        m.may_go_back.insert(a);
        read(&mut m, 1, 40, 50, b);
        read(&mut m, 1, 60, 70, a);
        assert!(m.violations.is_empty(), "{:?}", m.violations);
        assert_eq!(m.went_back_excused, 1);
        // Only the named write: going back to `b` after `a` stands as a violation.
        read(&mut m, 1, 80, 90, b);
        assert_eq!(m.violations.len(), 1, "{:?}", m.violations);
    }

    #[test]
    fn reads_that_overlap_in_time_are_not_ordered() {
        let (mut m, a, b) = two_writes(3, 2);
        read(&mut m, 1, 4, 8, b);
        read(&mut m, 1, 6, 9, a);
        assert!(m.violations.is_empty(), "{:?}", m.violations);
    }

    #[test]
    fn a_sector_names_its_writer_or_none() {
        for (block, write) in [(0, 1), (7, 3), (1 << 20, 99_999)] {
            let page = pattern(block, write);
            assert_eq!(writers_of(block, &page), vec![Some(write); 8]);
            assert_eq!(
                writers_of(block + 1, &page),
                vec![None; 8],
                "another block's data"
            );
            for at in [0, 9, 17, 24, 300, 511] {
                let mut torn = page.clone();
                torn[512 + at] ^= 1;
                let w = writers_of(block, &torn);
                assert_ne!(w[1], Some(write), "a byte changed at {at}");
                assert_eq!(w[0], Some(write));
            }
        }
        assert_eq!(writers_of(3, &[0; 4096]), vec![Some(0); 8]);
        assert_eq!(writer_of_sector(3, 0, &[0; 100]), None, "a short sector");
    }

    #[test]
    fn a_checked_page_is_taken_again_only_while_nothing_could_change_the_answer() {
        let mut m = Model::new(4);
        let a = m.write_issued(0, 1, 1);
        m.write_ended(5, a, true);
        // The page holding write a's data is content number 40.
        let mut pages = CheckedPages::default();
        assert!(!pages.still_acceptable(&m, 1, 40), "never checked");
        // Found acceptable at 5, the time of the block's last change: not yet settled.
        pages.record(&m, 1, 40, 5);
        assert!(!pages.still_acceptable(&m, 1, 40));
        pages.record(&m, 1, 40, 6);
        assert!(pages.still_acceptable(&m, 1, 40));
        assert!(!pages.still_acceptable(&m, 1, 41), "other contents");
        assert!(!pages.still_acceptable(&m, 2, 40), "another block");
        // A later write to the block, or just its issue, changes the history.
        let b = m.write_issued(7, 1, 1);
        assert!(!pages.still_acceptable(&m, 1, 40));
        pages.record(&m, 1, 40, 8);
        assert!(pages.still_acceptable(&m, 1, 40));
        m.write_ended(9, b, true);
        assert!(!pages.still_acceptable(&m, 1, 40));
        assert!(!m.acceptable(1, 10, 10, a), "b hides a from 10 on");
    }

    #[test]
    fn a_crash_forgets_what_reads_saw() {
        let (mut m, a, b) = two_writes(3, 2);
        read(&mut m, 1, 4, 5, b);
        m.crashed(6);
        read(&mut m, 1, 7, 8, a);
        assert!(m.violations.is_empty(), "{:?}", m.violations);
    }
}
