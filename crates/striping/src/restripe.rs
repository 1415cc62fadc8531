//! Moving a volume to a new layout while it serves I/O (a wide volume spread over an added
//! array), as a sans-I/O core: which layout each piece of a request goes to, which batch the
//! copier moves next, and when a request must wait.
//!
//! The volume's bytes `[0, persisted)` live on the new layout, durably: they were copied, the
//! copy was synced, and then the cursor was written to the pool's metadata. Bytes from
//! `persisted` on live on the old layout. The copier takes one batch at a time:
//!
//! 1. [`next_batch`](Restripe::next_batch) reserves `[persisted, persisted + batch)`. From
//!    then on writes there wait; once the old layout's writes already in flight there have
//!    completed it answers [`NextBatch::Copy`].
//! 2. The runtime copies the batch from the old layout to the new one, syncs the new one, and
//!    calls [`copied`](Restripe::copied), which returns the cursor to make durable.
//! 3. The runtime writes the cursor to the metadata (durably) and calls
//!    [`persisted`](Restripe::persisted); waiting writes may go on, to the new layout.
//!
//! A restripe begins while the volume serves I/O: requests admitted before it, still in flight
//! on the old layout, were never shown to it. The runtime says how many
//! ([`in_flight_before`](Restripe::in_flight_before)) and when each completes
//! ([`done_before`](Restripe::done_before)). No batch is copied until every such write has
//! completed, since any of them may land in it (copied before it lands, it would be lost on
//! the new layout); and the old layout is not freed until every such read has.
//!
//! Reads never wait: the old layout holds the reserved batch unchanged until its cursor is
//! durable, since writes there wait. Writes below the durable cursor go to the new layout
//! only, so a crash, which restarts the copy at the durable cursor, never copies old bytes over
//! them. When the cursor reaches the end and the old layout has no I/O in flight, the pool
//! switches the volume to the new layout ([`crate::Pool::finish_restripe`]) and frees the old.

/// Which layout a piece goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Old,
    New,
}

/// A piece of a request: volume bytes `[lo, hi)` on one layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub lo: u64,
    pub hi: u64,
    pub side: Side,
}

/// A request's pieces, in volume order: the part below the durable cursor (on the new layout),
/// then the rest (on the old one). At most two, kept inline: every request is split, and none
/// allocates for it.
#[derive(Clone, Copy)]
pub struct Pieces {
    len: usize,
    pieces: [Piece; 2],
}

impl Pieces {
    fn new() -> Pieces {
        let none = Piece {
            lo: 0,
            hi: 0,
            side: Side::New,
        };
        Pieces {
            len: 0,
            pieces: [none; 2],
        }
    }

    fn push(&mut self, piece: Piece) {
        assert!(self.len < 2, "a third piece {piece:?} after {:?}", self);
        assert!(
            piece.lo < piece.hi && self.last().is_none_or(|p| p.hi == piece.lo),
            "piece {piece:?} is empty or does not follow {:?}",
            self
        );
        self.pieces[self.len] = piece;
        self.len += 1;
    }
}

/// A request wholly on one layout (no restripe running, or the volume switched).
impl From<Piece> for Pieces {
    fn from(piece: Piece) -> Pieces {
        let mut pieces = Pieces::new();
        pieces.push(piece);
        pieces
    }
}

impl std::ops::Deref for Pieces {
    type Target = [Piece];

    fn deref(&self) -> &[Piece] {
        &self.pieces[..self.len]
    }
}

impl PartialEq for Pieces {
    fn eq(&self, other: &Pieces) -> bool {
        **self == **other
    }
}

impl Eq for Pieces {}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl IntoIterator for Pieces {
    type Item = Piece;
    type IntoIter = std::iter::Take<std::array::IntoIter<Piece, 2>>;

    fn into_iter(self) -> Self::IntoIter {
        self.pieces.into_iter().take(self.len)
    }
}

impl<'a> IntoIterator for &'a Pieces {
    type Item = &'a Piece;
    type IntoIter = std::slice::Iter<'a, Piece>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// An admitted request; give it back with [`Restripe::done`] when it has completed.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub struct Ticket(u64);

/// A write's admission.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    Go(Ticket, Pieces),
    /// It touches the batch being copied or a copied range whose cursor is not yet durable:
    /// retry after the next [`Restripe::persisted`].
    Wait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextBatch {
    /// Copy volume bytes `[lo, hi)` from the old layout to the new.
    Copy { lo: u64, hi: u64 },
    /// Writes on the old layout in the reserved batch are still in flight: ask again when one
    /// completes.
    Drain,
    /// A batch is being copied or its cursor persisted.
    Busy,
    /// Every byte is on the new layout.
    Complete,
}

#[derive(Clone, Debug)]
pub struct Restripe {
    size: u64,
    batch_bytes: u64,
    persisted: u64,
    /// The batch reserved or being copied, and whether its copy has started.
    batch: Option<(u64, u64, Stage)>,
    /// Requests with pieces on the old layout: (ticket, lo, hi, is a write). Only ever asked
    /// whether any of them overlaps a range, so in no order; walked whole by every such
    /// question (a list, not a map: the walk is the common operation).
    old_io: Vec<(u64, u64, u64, bool)>,
    /// Writes and reads admitted before the restripe began and still in flight (their ranges
    /// unknown here): every batch drains until the writes are none; the old layout is in use
    /// until both are.
    before_writes: u64,
    before_reads: u64,
    next_ticket: u64,
    /// `persisted` at the last invariant check (debug builds).
    checked_persisted: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Reserved,
    Copying,
    /// Copied and synced; the cursor is being written.
    Persisting,
}

impl Restripe {
    /// A restripe of a `size`-byte volume whose bytes below `persisted` are on the new layout
    /// (0 for a new restripe, the metadata's cursor after a restart). Batches are
    /// `batch_bytes` (a multiple of 512).
    pub fn new(size: u64, batch_bytes: u64, persisted: u64) -> Restripe {
        assert!(batch_bytes > 0 && batch_bytes.is_multiple_of(512));
        assert!(persisted <= size);
        Restripe {
            size,
            batch_bytes,
            persisted,
            batch: None,
            old_io: Vec::new(),
            before_writes: 0,
            before_reads: 0,
            next_ticket: 0,
            checked_persisted: persisted,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes durably on the new layout.
    pub fn persisted_bytes(&self) -> u64 {
        self.persisted
    }

    /// Every byte is durably on the new layout.
    pub fn is_complete(&self) -> bool {
        self.persisted == self.size
    }

    /// No request is using the old layout (it may be freed once complete).
    pub fn old_idle(&self) -> bool {
        self.old_io.is_empty() && self.before_writes == 0 && self.before_reads == 0
    }

    /// `writes` writes and `reads` reads were admitted to the volume before this restripe
    /// began and are still in flight on the old layout; each is reported with
    /// [`done_before`](Self::done_before) when it completes.
    pub fn in_flight_before(&mut self, writes: u64, reads: u64) {
        self.before_writes += writes;
        self.before_reads += reads;
        self.check_invariants();
    }

    /// A request admitted before the restripe began (a write or a read) has completed.
    pub fn done_before(&mut self, write: bool) {
        let count = if write {
            &mut self.before_writes
        } else {
            &mut self.before_reads
        };
        assert!(
            *count > 0,
            "done_before({write}) with none in flight from before"
        );
        *count -= 1;
        self.check_invariants();
    }

    fn split(&self, lo: u64, hi: u64) -> Pieces {
        let mut out = Pieces::new();
        let cut = self.persisted.clamp(lo, hi);
        if lo < cut {
            out.push(Piece {
                lo,
                hi: cut,
                side: Side::New,
            });
        }
        if cut < hi {
            out.push(Piece {
                lo: cut,
                hi,
                side: Side::Old,
            });
        }
        out
    }

    fn admit(&mut self, lo: u64, hi: u64, write: bool) -> (Ticket, Pieces) {
        let pieces = self.split(lo, hi);
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if let Some(old) = pieces.iter().find(|p| p.side == Side::Old) {
            self.old_io.push((ticket, old.lo, old.hi, write));
        }
        (Ticket(ticket), pieces)
    }

    /// A read of volume bytes `[lo, hi)`: never waits.
    pub fn read(&mut self, lo: u64, hi: u64) -> (Ticket, Pieces) {
        assert!(lo < hi && hi <= self.size, "{lo}..{hi} of {}", self.size);
        let admitted = self.admit(lo, hi, false);
        self.check_invariants();
        admitted
    }

    /// A write of volume bytes `[lo, hi)`.
    pub fn write(&mut self, lo: u64, hi: u64) -> Admit {
        assert!(lo < hi && hi <= self.size, "{lo}..{hi} of {}", self.size);
        if let Some((b_lo, b_hi, _)) = self.batch {
            if lo < b_hi && b_lo < hi {
                return Admit::Wait;
            }
        }
        let (ticket, pieces) = self.admit(lo, hi, true);
        self.check_invariants();
        Admit::Go(ticket, pieces)
    }

    /// A request has completed (its pieces are done, successfully or not).
    pub fn done(&mut self, ticket: Ticket) {
        if let Some(at) = self.old_io.iter().position(|&(t, ..)| t == ticket.0) {
            self.old_io.swap_remove(at);
        }
        self.check_invariants();
    }

    /// What the copier does next.
    pub fn next_batch(&mut self) -> NextBatch {
        let next = self.choose_batch();
        self.check_invariants();
        next
    }

    fn choose_batch(&mut self) -> NextBatch {
        match self.batch {
            Some((_, _, Stage::Copying | Stage::Persisting)) => NextBatch::Busy,
            Some((lo, hi, Stage::Reserved)) => {
                let busy = self.before_writes > 0
                    || self
                        .old_io
                        .iter()
                        .any(|&(_, a, b, write)| write && a < hi && lo < b);
                if busy {
                    NextBatch::Drain
                } else {
                    self.batch = Some((lo, hi, Stage::Copying));
                    NextBatch::Copy { lo, hi }
                }
            }
            None if self.is_complete() => NextBatch::Complete,
            None => {
                let lo = self.persisted;
                let hi = (lo + self.batch_bytes).min(self.size);
                self.batch = Some((lo, hi, Stage::Reserved));
                self.choose_batch()
            }
        }
    }

    /// The batch `[lo, hi)` is on the new layout and synced: returns the cursor to write to
    /// the metadata durably.
    pub fn copied(&mut self, lo: u64, hi: u64) -> u64 {
        assert_eq!(
            self.batch,
            Some((lo, hi, Stage::Copying)),
            "copied a batch not being copied"
        );
        self.batch = Some((lo, hi, Stage::Persisting));
        self.check_invariants();
        hi
    }

    /// The cursor `cursor` is durable: writes below it go to the new layout.
    pub fn persisted(&mut self, cursor: u64) {
        let Some((lo, hi, Stage::Persisting)) = self.batch else {
            panic!("persisted {cursor} with no batch copied");
        };
        assert_eq!(
            cursor, hi,
            "persisted a cursor other than the copied batch's end"
        );
        debug_assert_eq!(lo, self.persisted);
        self.persisted = hi;
        self.batch = None;
        self.check_invariants();
    }

    /// The copy failed (an I/O error): the batch is released and will be tried again.
    pub fn abandon_batch(&mut self) {
        self.batch = None;
        self.check_invariants();
    }

    /// What must hold after every call, checked in debug builds (the seeded schedules run
    /// with them): the durable cursor never goes back and stays within the volume; a batch
    /// starts at the cursor and is at most one batch long; a batch being copied or persisted
    /// has no write from before the restripe in flight and no write on the old layout over it
    /// (it would be lost on the new layout); and no write on the old layout reaches below the
    /// cursor (writes there go to the new layout, and a batch drains before it is copied).
    fn check_invariants(&mut self) {
        if !cfg!(debug_assertions) {
            return;
        }
        assert!(
            self.checked_persisted <= self.persisted && self.persisted <= self.size,
            "cursor {} after {} of {}",
            self.persisted,
            self.checked_persisted,
            self.size
        );
        self.checked_persisted = self.persisted;
        // The batch being copied or persisted, which no write on the old layout may overlap.
        let mut copying = None;
        if let Some((lo, hi, stage)) = self.batch {
            assert!(
                lo == self.persisted && lo < hi && hi <= (lo + self.batch_bytes).min(self.size),
                "batch {lo}..{hi} at cursor {} (batches of {})",
                self.persisted,
                self.batch_bytes
            );
            if stage != Stage::Reserved {
                assert_eq!(
                    self.before_writes, 0,
                    "batch {lo}..{hi} {stage:?} with writes from before in flight"
                );
                copying = Some((lo, hi, stage));
            }
        }
        for &(_, a, b, write) in &self.old_io {
            assert!(a < b && b <= self.size, "old-layout piece {a}..{b}");
            assert!(
                !write || a >= self.persisted,
                "a write on the old layout at {a}..{b}, below the cursor {}",
                self.persisted
            );
            if let Some((lo, hi, stage)) = copying {
                assert!(
                    !(write && a < hi && lo < b),
                    "batch {lo}..{hi} {stage:?} under a write on the old layout {a}..{b}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_at_the_durable_cursor_and_writes_wait_on_the_batch() {
        let mut r = Restripe::new(64 << 10, 8 << 10, 0);
        assert_eq!(r.next_batch(), NextBatch::Copy { lo: 0, hi: 8 << 10 });
        assert_eq!(r.next_batch(), NextBatch::Busy);
        assert_eq!(r.write(4 << 10, 12 << 10), Admit::Wait);
        // Reads go to the old layout, unchanged while writes wait.
        let (t, p) = r.read(0, 4096);
        assert_eq!(
            p[..],
            [Piece {
                lo: 0,
                hi: 4096,
                side: Side::Old
            }]
        );
        r.done(t);
        let Admit::Go(t, p) = r.write(8 << 10, 12 << 10) else {
            panic!("past the batch: no wait");
        };
        assert_eq!(p[0].side, Side::Old);
        assert_eq!(r.copied(0, 8 << 10), 8 << 10);
        assert_eq!(
            r.write(0, 512),
            Admit::Wait,
            "copied, cursor not yet durable"
        );
        r.persisted(8 << 10);
        let Admit::Go(t2, p) = r.write(4 << 10, 12 << 10) else {
            panic!("after the cursor is durable");
        };
        assert_eq!(
            p[..],
            [
                Piece {
                    lo: 4 << 10,
                    hi: 8 << 10,
                    side: Side::New
                },
                Piece {
                    lo: 8 << 10,
                    hi: 12 << 10,
                    side: Side::Old
                },
            ]
        );
        // The next batch holds a write in flight on the old layout: it drains first.
        assert_eq!(r.next_batch(), NextBatch::Drain);
        r.done(t);
        assert_eq!(r.next_batch(), NextBatch::Drain);
        r.done(t2);
        assert_eq!(
            r.next_batch(),
            NextBatch::Copy {
                lo: 8 << 10,
                hi: 16 << 10
            }
        );
        assert!(r.old_idle());
    }

    /// Writes admitted before the restripe began, wherever they are, hold back every batch
    /// until they complete; reads from then hold the old layout until they complete.
    #[test]
    fn writes_from_before_the_restripe_drain_before_any_copy() {
        let mut r = Restripe::new(64 << 10, 8 << 10, 0);
        r.in_flight_before(2, 1);
        assert_eq!(r.next_batch(), NextBatch::Drain);
        r.done_before(true);
        assert_eq!(r.next_batch(), NextBatch::Drain);
        assert!(!r.old_idle());
        r.done_before(true);
        assert_eq!(r.next_batch(), NextBatch::Copy { lo: 0, hi: 8 << 10 });
        // A read from before holds the old layout, not the copy.
        assert!(!r.old_idle());
        r.done_before(false);
        assert!(r.old_idle());
    }

    /// A restart resumes at the durable cursor; the last batch is short.
    #[test]
    fn a_restart_resumes_at_the_cursor_and_the_last_batch_ends_at_the_volume_end() {
        let mut r = Restripe::new(20 << 10, 8 << 10, 16 << 10);
        assert_eq!(
            r.next_batch(),
            NextBatch::Copy {
                lo: 16 << 10,
                hi: 20 << 10
            }
        );
        let c = r.copied(16 << 10, 20 << 10);
        r.persisted(c);
        assert!(r.is_complete());
        assert_eq!(r.next_batch(), NextBatch::Complete);
        let (t, p) = r.read(0, 20 << 10);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].side, Side::New);
        assert!(r.old_idle());
        r.done(t);
    }
}
