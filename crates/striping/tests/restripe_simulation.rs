//! The online restripe core (`cordillera_striping::restripe`) under seeded schedules: clients
//! read and write a volume while the copier moves it batch by batch to a new layout, every
//! step interleaved at random, and the process crashes at random moments (in-flight requests
//! and unsynced copies are lost; the durable cursor and every applied write survive). After a
//! crash the restripe resumes from the durable cursor. Checked throughout: every read returns
//! what the last acknowledged write left (or, for a write in flight at a crash, either value),
//! and the old layout is never used after the switch (its blocks are scribbled over then).
//!
//! Environment (`cordillera_testkit::Schedules`): `RESTRIPE_SEED`, `RESTRIPE_SCHEDULES`,
//! `RESTRIPE_SECONDS`, `RESTRIPE_FIXED`, `RESTRIPE_BASE_SEED`.

/// The allocator of the seeded schedules (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use rustc_hash::FxHashMap;

use cordillera_striping::restripe::{Admit, NextBatch, Piece, Pieces, Restripe, Side, Ticket};
use cordillera_testkit::{Budget, Schedules};
use cordillera_types::rng::SimRng;

const B: u64 = 512;
/// Scribbled over the old layout's blocks once the volume has switched.
const FREED: u32 = 0xDEAD_BEEF;
/// The most blocks a request spans.
const MAX_BLOCKS: usize = 6;

/// One value per block of a request (at most [`MAX_BLOCKS`]), kept inline.
#[derive(Clone, Copy, Default)]
struct PerBlock<T> {
    len: usize,
    values: [T; MAX_BLOCKS],
}

impl<T: Copy> PerBlock<T> {
    fn push(&mut self, value: T) {
        self.values[self.len] = value;
        self.len += 1;
    }

    fn as_slice(&self) -> &[T] {
        &self.values[..self.len]
    }
}

struct Request {
    write: Option<u32>,
    lo: u64,
    hi: u64,
    /// `None` for a request admitted before the restripe began (the pool routes it to the
    /// volume's only layout, with no restripe to ask).
    ticket: Option<Ticket>,
    pieces: Pieces,
    /// Pieces applied (a write) or read (a read) — then it waits for its acknowledgement.
    applied: bool,
    /// What a read saw.
    seen: PerBlock<u32>,
    /// Write epochs of its blocks when a read was admitted (it is checked only where no write
    /// touched them meanwhile).
    epochs: PerBlock<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Copier {
    Idle,
    Read { lo: u64, hi: u64 },
    Write { lo: u64, hi: u64 },
    Sync { lo: u64, hi: u64 },
    Persist { cursor: u64 },
}

struct World {
    blocks: usize,
    batch: u64,
    old: Vec<u32>,
    new: Vec<u32>,
    new_volatile: FxHashMap<usize, u32>,
    /// The metadata: the durable cursor, and whether the volume has switched.
    cursor: u64,
    switched: bool,
    /// The restripe, once an added array has started it (the volume served I/O before).
    core: Option<Restripe>,
    copier: Copier,
    copy_buffer: Vec<u32>,
    requests: Vec<Request>,
    /// How many of `requests` are not yet `applied`.
    unapplied: usize,
    waiting: Vec<(u64, u64, u32)>,
    /// Values a block may hold: the last acknowledged, plus those of writes cut by a crash.
    possible: Vec<Vec<u32>>,
    /// Blocks with a write in flight, and an epoch per block bumped by every write.
    writing: Vec<bool>,
    epoch: Vec<u64>,
    next_value: u32,
    crashes: u32,
    reads_checked: u64,
}

impl World {
    fn new(rng: &mut SimRng) -> World {
        let blocks = 8 + rng.below(88) as usize;
        let batch = B * (1 + rng.below(8));
        let old: Vec<u32> = (0..blocks as u32).map(|b| 1_000_000 + b).collect();
        World {
            blocks,
            batch,
            possible: old.iter().map(|v| vec![*v]).collect(),
            new: vec![0; blocks],
            old,
            new_volatile: FxHashMap::default(),
            cursor: 0,
            switched: false,
            core: None,
            copier: Copier::Idle,
            copy_buffer: Vec::new(),
            requests: Vec::new(),
            unapplied: 0,
            waiting: Vec::new(),
            writing: vec![false; blocks],
            epoch: vec![0; blocks],
            next_value: 1,
            crashes: 0,
            reads_checked: 0,
        }
    }

    fn pieces(&mut self, lo: u64, hi: u64, write: bool) -> Option<(Option<Ticket>, Pieces)> {
        if self.switched {
            // After the switch there is no restripe: everything is on the new layout.
            return Some((
                None,
                Piece {
                    lo,
                    hi,
                    side: Side::New,
                }
                .into(),
            ));
        }
        let Some(core) = self.core.as_mut() else {
            // Before the restripe: the old layout is the volume's only one.
            return Some((
                None,
                Piece {
                    lo,
                    hi,
                    side: Side::Old,
                }
                .into(),
            ));
        };
        if write {
            match core.write(lo, hi) {
                Admit::Go(t, p) => Some((Some(t), p)),
                Admit::Wait => None,
            }
        } else {
            let (t, p) = core.read(lo, hi);
            Some((Some(t), p))
        }
    }

    /// An array is added: the restripe begins, with the requests admitted before still in
    /// flight.
    fn begin(&mut self) {
        assert!(self.core.is_none() && !self.switched);
        let mut core = Restripe::new(self.blocks as u64 * B, self.batch, 0);
        let before = |write: bool| {
            self.requests
                .iter()
                .filter(|r| r.write.is_some() == write && r.ticket.is_none())
                .count() as u64
        };
        core.in_flight_before(before(true), before(false));
        self.core = Some(core);
    }

    fn read_block(&self, b: usize, side: Side) -> u32 {
        match side {
            Side::Old => self.old[b],
            Side::New => *self.new_volatile.get(&b).unwrap_or(&self.new[b]),
        }
    }

    fn submit_write(&mut self, lo: u64, hi: u64, value: u32) {
        match self.pieces(lo, hi, true) {
            None => self.waiting.push((lo, hi, value)),
            Some((ticket, pieces)) => {
                for b in lo / B..hi / B {
                    self.writing[b as usize] = true;
                    self.epoch[b as usize] += 1;
                }
                self.push(Request {
                    write: Some(value),
                    lo,
                    hi,
                    ticket,
                    pieces,
                    applied: false,
                    seen: PerBlock::default(),
                    epochs: PerBlock::default(),
                });
            }
        }
    }

    fn step(&mut self, rng: &mut SimRng) -> Result<(), String> {
        match rng.below(10) {
            // A new request: a write to blocks no other write is using, or a read.
            0..=2 => {
                let lo = rng.below(self.blocks as u64);
                let hi = (lo + 1 + rng.below(MAX_BLOCKS as u64)).min(self.blocks as u64);
                if rng.chance(0.5) {
                    let busy = (lo..hi).any(|b| self.writing[b as usize])
                        || self
                            .waiting
                            .iter()
                            .any(|&(a, z, _)| a < hi * B && lo * B < z);
                    if !busy && self.requests.len() < 16 {
                        let v = self.next_value;
                        self.next_value += 1;
                        self.submit_write(lo * B, hi * B, v);
                    }
                } else if self.requests.len() < 16 {
                    let (ticket, pieces) = self.pieces(lo * B, hi * B, false).expect("reads go");
                    let mut epochs = PerBlock::default();
                    let clean = (lo..hi).all(|b| !self.writing[b as usize]);
                    if clean {
                        for b in lo..hi {
                            epochs.push(self.epoch[b as usize]);
                        }
                    }
                    self.push(Request {
                        write: None,
                        lo: lo * B,
                        hi: hi * B,
                        ticket,
                        pieces,
                        applied: false,
                        seen: PerBlock::default(),
                        epochs,
                    });
                }
            }
            // A request's I/O happens.
            3..=4 => {
                if let Some(i) = self.pick(rng, false) {
                    self.apply(i);
                }
            }
            // A request is acknowledged.
            5 => {
                if let Some(i) = self.pick(rng, true) {
                    self.acknowledge(i)?;
                }
            }
            // The copier.
            6..=8 => self.copier_step()?,
            // A crash.
            _ => {
                if rng.chance(0.05) {
                    self.crash();
                }
            }
        }
        Ok(())
    }

    /// One of the requests whose I/O is done (`applied`) or not, drawn uniformly; none if there
    /// is none.
    fn pick(&self, rng: &mut SimRng, applied: bool) -> Option<usize> {
        let n = if applied {
            self.requests.len() - self.unapplied
        } else {
            self.unapplied
        };
        let k = (n > 0).then(|| rng.below(n as u64) as usize)?;
        (0..self.requests.len())
            .filter(|&i| self.requests[i].applied == applied)
            .nth(k)
    }

    fn push(&mut self, request: Request) {
        self.unapplied += 1;
        self.requests.push(request);
    }

    fn retry_waiting(&mut self) {
        for (lo, hi, v) in std::mem::take(&mut self.waiting) {
            self.submit_write(lo, hi, v);
        }
    }

    fn copier_step(&mut self) -> Result<(), String> {
        if self.switched {
            return Ok(());
        }
        let Some(core) = self.core.as_mut() else {
            return Ok(());
        };
        match self.copier {
            Copier::Idle => match core.next_batch() {
                NextBatch::Copy { lo, hi } => self.copier = Copier::Read { lo, hi },
                NextBatch::Drain | NextBatch::Busy => {}
                NextBatch::Complete => {
                    if core.old_idle() {
                        // The metadata switches the volume; the old extents are freed (and
                        // may be reused by anything).
                        self.switched = true;
                        for v in &mut self.old {
                            *v = FREED;
                        }
                    }
                }
            },
            Copier::Read { lo, hi } => {
                self.copy_buffer = (lo / B..hi / B).map(|b| self.old[b as usize]).collect();
                self.copier = Copier::Write { lo, hi };
            }
            Copier::Write { lo, hi } => {
                for (k, b) in (lo / B..hi / B).enumerate() {
                    self.new_volatile.insert(b as usize, self.copy_buffer[k]);
                }
                self.copier = Copier::Sync { lo, hi };
            }
            Copier::Sync { lo, hi } => {
                for (b, v) in self.new_volatile.drain() {
                    self.new[b] = v;
                }
                let cursor = core.copied(lo, hi);
                self.copier = Copier::Persist { cursor };
            }
            Copier::Persist { cursor } => {
                self.cursor = cursor;
                core.persisted(cursor);
                self.copier = Copier::Idle;
                self.retry_waiting();
            }
        }
        Ok(())
    }

    fn crash(&mut self) {
        self.crashes += 1;
        // Writes in flight may or may not have landed: either value is acceptable after.
        self.unapplied = 0;
        for r in self.requests.drain(..) {
            if let Some(v) = r.write {
                for b in r.lo / B..r.hi / B {
                    let b = b as usize;
                    if !self.possible[b].contains(&v) {
                        self.possible[b].push(v);
                    }
                    self.writing[b] = false;
                    self.epoch[b] += 1;
                }
            }
        }
        self.waiting.clear();
        self.new_volatile.clear();
        self.copier = Copier::Idle;
        // A restripe the metadata records resumes at its durable cursor.
        if !self.switched && self.core.is_some() {
            self.core = Some(Restripe::new(
                self.blocks as u64 * B,
                self.batch,
                self.cursor,
            ));
        }
    }

    /// Every block, read where the layout says it is, holds an acceptable value.
    fn verify_all(&self) -> Result<(), String> {
        for b in 0..self.blocks {
            let side = if self.switched || (b as u64) * B < self.cursor {
                Side::New
            } else {
                Side::Old
            };
            let got = self.read_block(b, side);
            if !self.possible[b].contains(&got) {
                return Err(format!(
                    "after the run: block {b} holds {got:#x}, expected one of {:x?}",
                    self.possible[b]
                ));
            }
        }
        Ok(())
    }
}

/// One schedule's crashes, reads checked and, with `RESTRIPE_HASHES` set, its
/// [`fingerprint`] (0 otherwise: it hashes every block).
fn schedule(seed: u64) -> Result<(u32, u64, u64), String> {
    let w = run(seed)?;
    let print = std::env::var_os("RESTRIPE_HASHES").is_some();
    Ok((
        w.crashes,
        w.reads_checked,
        if print { fingerprint(&w) } else { 0 },
    ))
}

/// One schedule, to its end: the world as it was left.
fn run(seed: u64) -> Result<World, String> {
    let mut rng = SimRng::new(seed, 0);
    let mut w = World::new(&mut rng);
    let steps = 300 + rng.below(1500);
    // The array is added at once in some schedules, in others while the volume serves I/O.
    let begin = if rng.chance(0.3) {
        0
    } else {
        rng.below(steps / 2)
    };
    for step in 0..steps {
        if step == begin {
            w.begin();
        }
        w.step(&mut rng)?;
    }
    // Quiesce: no more crashes or new requests; finish the requests and the restripe.
    for _ in 0..100_000 {
        w.drain()?;
        if w.switched && w.waiting.is_empty() {
            break;
        }
        w.copier_step()?;
    }
    if !w.switched {
        return Err(format!(
            "the restripe never finished: cursor {} of {}",
            w.cursor,
            w.blocks as u64 * B
        ));
    }
    w.verify_all()?;
    Ok(w)
}

/// What a run left: every block of both layouts, the cursor, the counts.
fn fingerprint(w: &World) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        &w.old,
        &w.new,
        w.cursor,
        w.switched,
        w.crashes,
        w.reads_checked,
    )
        .hash(&mut h);
    h.finish()
}

/// A seed replays exactly (the same blocks, cursor and counts at the end); another seed is
/// another run.
#[test]
fn a_schedule_replays_exactly() {
    let a = run(3).expect("schedule 3");
    assert!(
        a.crashes > 0 && a.reads_checked > 0,
        "{} crashes",
        a.crashes
    );
    assert_eq!(fingerprint(&a), fingerprint(&run(3).expect("schedule 3")));
    assert_ne!(fingerprint(&a), fingerprint(&run(4).expect("schedule 4")));
}

impl World {
    /// Carries out request `i`'s I/O: a write lands, a read sees what is there.
    fn apply(&mut self, i: usize) {
        let pieces = self.requests[i].pieces;
        let write = self.requests[i].write;
        let mut seen = PerBlock::default();
        for &p in &pieces {
            for b in p.lo / B..p.hi / B {
                let b = b as usize;
                match (write, p.side) {
                    (Some(v), Side::Old) => self.old[b] = v,
                    // Client writes are durable once done (FUA).
                    (Some(v), Side::New) => {
                        self.new[b] = v;
                        self.new_volatile.remove(&b);
                    }
                    (None, side) => seen.push(self.read_block(b, side)),
                }
            }
        }
        self.requests[i].applied = true;
        self.unapplied -= 1;
        self.requests[i].seen = seen;
    }

    /// Acknowledges applied request `i`: a write's value is now the one expected, a read's
    /// values are checked.
    fn acknowledge(&mut self, i: usize) -> Result<(), String> {
        let r = self.requests.swap_remove(i);
        self.unapplied -= !r.applied as usize;
        let first = (r.lo / B) as usize;
        match r.write {
            Some(v) => {
                for b in first..(r.hi / B) as usize {
                    let possible = &mut self.possible[b];
                    possible.clear();
                    possible.push(v);
                    self.writing[b] = false;
                    self.epoch[b] += 1;
                }
            }
            None => {
                for (k, got) in r.seen.as_slice().iter().enumerate() {
                    let b = first + k;
                    if r.epochs.as_slice().get(k) == Some(&self.epoch[b]) {
                        self.reads_checked += 1;
                        if !self.possible[b].contains(got) {
                            return Err(format!(
                                "block {b} read {got:#x}, expected one of {:x?} (cursor {}, switched {})",
                                self.possible[b], self.cursor, self.switched
                            ));
                        }
                    }
                }
            }
        }
        if let Some(core) = self.core.as_mut().filter(|_| !self.switched) {
            match r.ticket {
                Some(ticket) => core.done(ticket),
                // A request from before the restripe began.
                None => core.done_before(r.write.is_some()),
            }
        }
        self.retry_waiting();
        Ok(())
    }

    /// Carries out and acknowledges every request.
    fn drain(&mut self) -> Result<(), String> {
        while let Some(i) = (0..self.requests.len()).find(|&i| !self.requests[i].applied) {
            self.apply(i);
        }
        while !self.requests.is_empty() {
            self.acknowledge(0)?;
            while let Some(i) = (0..self.requests.len()).find(|&i| !self.requests[i].applied) {
                self.apply(i);
            }
        }
        Ok(())
    }
}

/// Seeds that once failed: a write admitted before the restripe began, still in flight when
/// it began, was not waited for: its batch was copied before it landed on the old layout, and
/// the new layout kept the old bytes (the core now drains such writes before any copy).
/// And one where a read admitted before the restripe began was still in flight when the
/// volume switched and its old layout was freed (such reads now hold the old layout too).
const REGRESSIONS: &[u64] = &[
    897662335680071359,
    8421215114767140159,
    8421215114767140209,
    8421215114767140264,
    8421215114767140290,
];

/// 50 fixed seeds, then fresh ones for 15 s (about 150,000 on two cores).
const BUDGET: Budget = Budget {
    seconds: 15.0,
    least: 100,
};

#[test]
fn no_acknowledged_write_is_lost_and_every_restripe_finishes_across_crashes() {
    let schedules = Schedules::from_env("RESTRIPE", REGRESSIONS, 50, BUDGET);
    let ran = schedules.run(schedule);
    let results = &ran.results;
    let mut failures = Vec::new();
    let (mut crashes, mut reads) = (0u64, 0u64);
    for (seed, r) in results {
        match r {
            Ok((c, n, _)) => {
                crashes += *c as u64;
                reads += n;
            }
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    schedules.summary(&ran, &[("crashes", crashes), ("reads_checked", reads)]);
    schedules.write_hashes(&ran, |o| o.2);
    println!(
        "{} schedules, {crashes} crashes, {reads} block reads checked, {} failed",
        results.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        crashes > results.len() as u64 / 4,
        "crashes happen: {crashes}"
    );
    assert!(reads > 1000 * results.len() as u64 / 100);
}
