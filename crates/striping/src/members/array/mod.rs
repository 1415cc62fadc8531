//! A member array that survives the loss of members, as a sans-I/O core: which member I/Os a
//! read, a write, a rebuild, a scrub or a flush needs, in which order, and what their results
//! mean. The driver (the pool's threads and files, or the simulator) submits operations,
//! carries out the I/Os [`ArrayCore::poll`] hands it in any order and at any concurrency,
//! reports each result with [`ArrayCore::complete`], and collects finished operations with
//! [`ArrayCore::take_done`].
//!
//! Rules (each checked by `tests/member_array_simulation.rs` under seeded member loss, EIO,
//! reordered writes and crashes):
//! - **Labels.** Every member carries the array's state ([`super::label`]); a state change (a
//!   member failed, a rebuild's cursor, a region's dirty bit) is written to every live member
//!   and synced before anything relying on it is issued: a write that skips a failed member
//!   waits until a durable label says it failed, so a crash never brings back a stale member.
//! - **Degraded I/O.** A member that returns an error is failed and never read again. A RAID-5
//!   read of a lost member's unit XORs the rest of its row; a write to a row with a lost data
//!   member reads the row's surviving units over the written range, so the lost member's
//!   bytes stay what the parity says. Mirrors serve from any live copy.
//! - **Rows.** A write takes its row's lock for read-modify-write; so does a read that
//!   reconstructs, a rebuild or a scrub of that row: each sees a row whose parity matches.
//! - **The write hole.** A region's dirty bit is durable before any write in it is issued, and
//!   cleared only after a flush that followed its last write. After an unclean stop, the dirty
//!   regions' rows are resynchronised (parity recomputed from data, copies from the first live
//!   copy) before they are served. With a member lost as well, their parity cannot be trusted
//!   to reconstruct it: assembly refuses such an array unless forced, and names the rows.
//! - **Rebuild.** A replacement is rebuilt row by row under the row's lock; writes to rows below
//!   its cursor go to it too. The cursor in the labels advances only after the rows below it
//!   were synced on the replacement, so a crash resumes without a gap.

use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

use cordillera_models::device::raid::RaidLevel;

use super::journal::{Area, Entry};
use super::label::{Label, MemberMeta, MemberState, Meta};
use super::{Members, RowWrite};

pub type OpId = u64;
pub type IoId = u64;

/// A member I/O for the driver to carry out. Offsets are bytes of the member device (its
/// label area first, then data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Io {
    Read {
        member: usize,
        offset: u64,
        length: u64,
    },
    Write {
        member: usize,
        offset: u64,
        data: Vec<u8>,
    },
    /// Make the member's completed writes durable.
    Sync { member: usize },
}

impl Io {
    pub fn member(&self) -> usize {
        match self {
            Io::Read { member, .. } | Io::Write { member, .. } | Io::Sync { member } => *member,
        }
    }
}

/// What a finished operation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    Read(Vec<u8>),
    Written,
    Flushed,
    /// Rows `[from, to)` of the replacement at `member` were rebuilt and are durable.
    Rebuilt {
        member: usize,
        from: u64,
        to: u64,
        finished: bool,
    },
    Scrubbed(ScrubReport),
}

/// What a scrub (or the resync after an unclean stop) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubReport {
    pub rows: u64,
    /// Rows whose parity was not the XOR of their data, or whose copies differed.
    pub mismatched: Vec<u64>,
    /// Of those, rewritten from the data (parity) or the first live copy (mirrors).
    pub repaired: u64,
    /// Rows with a member lost: nothing to compare against.
    pub degraded: u64,
    /// Resync: RAID-5 rows left dirty by an unclean stop that lost a member the labels did
    /// not yet know lost (a crash and a lost disk together): the lost member's bytes there
    /// are what a torn row gives, not necessarily what was written.
    pub unrepaired: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    #[error("row {row}: {lost} of its members lost, more than {level:?} survives")]
    Lost {
        row: u64,
        lost: usize,
        level: RaidLevel,
    },
    #[error("no member is being rebuilt")]
    NothingToRebuild,
    #[error("a rebuild is already running")]
    RebuildRunning,
    #[error("member {0} is not failed: only a failed member is replaced")]
    NotFailed(usize),
    #[error("member {0} failed but the labels do not say so yet: try again in a moment")]
    FailureNotRecorded(usize),
    #[error("the rebuild of member {member} stopped: {why}")]
    RebuildStopped { member: usize, why: String },
    #[error("{0} past the array's {1} bytes")]
    OutOfRange(u64, u64),
}

/// Counts since the core started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub degraded_reads: u64,
    pub degraded_writes: u64,
    pub member_errors: u64,
    pub labels_written: u64,
    pub rows_rebuilt: u64,
    pub rows_resynced: u64,
}

/// A row write's progress.
#[derive(Default)]
enum WPhase {
    #[default]
    Lock,
    /// Waiting for the row's region to be durably dirty.
    Intent,
    Plan,
    /// Reads of the row's old bytes in flight (with a member lost: every live unit over the
    /// range).
    Read,
    /// The row's member writes computed (and, degraded, its journal entry).
    Write,
    /// The journal entry to write, then its write and its sync in flight.
    Journal,
    JournalWritten,
    JournalSynced,
    /// The row's writes about to be issued, then in flight.
    Issue,
    Issued,
    /// Degraded: the syncs that free the journal slot.
    PostSync,
    /// Waiting for the failure of members whose writes failed to be durable.
    Settle,
}

#[derive(Default)]
struct WriteOp {
    offset: u64,
    data: Vec<u8>,
    rows: Vec<RowWrite>,
    at: usize,
    phase: WPhase,
    /// Members of the row in progress left out (durably failed, or not yet rebuilt there).
    skip: Vec<usize>,
    /// A rebuilding member written as if lost (see `WPhase::Plan`).
    shadow: Option<usize>,
    /// The row's member writes, its journal entry, and the slot (member, index) holding it.
    writes: Vec<(usize, u64, Vec<u8>)>,
    entry: Option<Entry>,
    slot: Option<(usize, u64)>,
}

#[derive(Default)]
enum RPhase {
    #[default]
    /// Direct reads of `todo` pieces in flight; pieces left for reconstruction.
    Direct,
    /// Reconstructing piece `at` of `rebuild`: Lock, then reads of its row's other units.
    Lock,
    Reads,
}

#[derive(Default)]
struct ReadOp {
    offset: u64,
    buf: Vec<u8>,
    /// Pieces still to read.
    todo: Vec<super::UnitPlace>,
    /// Direct reads in flight (by tag): the piece and the member read.
    issued: Vec<(super::UnitPlace, usize)>,
    /// Pieces whose member failed: to reconstruct from their rows (RAID-5).
    reconstruct: Vec<super::UnitPlace>,
    phase: RPhase,
}

#[derive(Default)]
enum SPhase {
    #[default]
    Lock,
    Reads,
    Writes,
}

/// A scrub, a resync of dirty rows, or a rebuild of rows: one row at a time.
#[derive(Default)]
struct RowsOp {
    kind: RowsKind,
    rows: Vec<u64>,
    at: usize,
    phase: SPhase,
    report: ScrubReport,
    /// Rebuild: the replacement's sync, then its durable cursor.
    finishing: u8,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum RowsKind {
    Scrub {
        repair: bool,
    },
    #[default]
    Resync,
    Rebuild {
        member: usize,
    },
}

struct FlushOp {
    /// Row writes finished before the flush began.
    epoch: u64,
    /// 0: syncs in flight; 1: waiting for failed members' durability.
    phase: u8,
}

enum Kind {
    Read(ReadOp),
    Write(WriteOp),
    Rows(RowsOp),
    Flush(FlushOp),
}

struct Op {
    kind: Kind,
    /// I/Os in flight for the op's current phase, and their results by tag.
    waiting: usize,
    results: BTreeMap<usize, Result<Vec<u8>, ()>>,
    /// Members that failed under this op's current phase.
    failed: Vec<usize>,
}

enum Owner {
    Op(OpId, usize),
    /// A label write or its sync.
    Label,
    /// A sync of the barrier before a failure is written.
    Barrier,
}

/// The label being written: its state, and the members still to write and sync it.
struct LabelWrite {
    meta: Meta,
    pending: usize,
    syncing: bool,
}

/// A member array's core. See the module's documentation.
pub struct ArrayCore {
    layout: Members,
    area: Area,
    meta: Meta,
    /// Rows below which each rebuilding member is current (writes there go to it too).
    cursor: Vec<u64>,
    /// What the last durable label said.
    durable: Meta,
    label_wanted: bool,
    label: Option<LabelWrite>,
    /// The operations in progress, by id; `None` only while `advance` has the op out (it takes
    /// the op and puts it back in place, where removing and inserting it would shift the map's
    /// nodes each time; boxed, so that taking it moves a pointer).
    ops: BTreeMap<OpId, Option<Box<Op>>>,
    next_op: OpId,
    /// I/Os in flight: whose, and the member and the id of the disk they went to.
    ios: FxHashMap<IoId, (Owner, usize, u64)>,
    next_io: IoId,
    out: Vec<(IoId, Io)>,
    done: Vec<(OpId, Result<Done, ArrayError>)>,
    locks: FxHashMap<u64, OpId>,
    /// Per region: row writes in flight, the epoch of the last one finished, and whether it
    /// waits for a resync.
    writers: Vec<u32>,
    last_write: Vec<u64>,
    needs_resync: Vec<bool>,
    epoch: u64,
    /// Journal slots (member, index) held by a row write in flight; the order of this run's
    /// entries.
    journal_busy: rustc_hash::FxHashSet<(usize, u64)>,
    journal_n: u64,
    /// Entries found at assembly: the newest of each dirty row whose member is lost.
    journal: FxHashMap<u64, Entry>,
    /// A member failed: before the label says so, every row write issued finishes and every
    /// live member is synced, so that rows written without the journal are consistent on disk.
    barrier_wanted: bool,
    barrier_syncs: usize,
    /// Row writes whose member writes are in flight.
    writes_issued: usize,
    /// Per member, the first row from which the labels at assembly said it was lost.
    lost_from: Vec<u64>,
    counters: Counters,
}

/// What assembling an array from its members' labels found.
#[derive(Debug)]
pub struct Assembly {
    pub core: ArrayCore,
    /// One line per member that is not in the array as its label says: why.
    pub notes: Vec<String>,
    /// Rows of dirty regions to resynchronise before they are trusted (run
    /// [`ArrayCore::resync`] first).
    pub dirty_rows: u64,
    /// Rows that were being written when the array stopped uncleanly with a member already
    /// lost: that member's bytes there cannot be trusted (assembled only when forced).
    pub untrusted_rows: Vec<u64>,
}

impl std::fmt::Debug for ArrayCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayCore")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// What one position of the array holds, as read by the driver: the labels of its two slots
/// and the journal entries of its journal slots, or why they could not be read (a missing
/// device, an I/O error).
pub type Found = Result<MemberFound, String>;

#[derive(Clone, Debug, Default)]
pub struct MemberFound {
    pub labels: [Option<Label>; 2],
    pub journal: Vec<Entry>,
}

impl ArrayCore {
    /// A new array's state and the label of each member (write each to both label slots,
    /// synced, over zeroed data and journal: zero data has zero parity). Members hold the
    /// labels and the journal (`area`), then `disk_bytes` of data; a dirty bit covers
    /// `rows_per_region` rows (at least as many as make the dirty map fit a label slot).
    pub fn create(
        array: u128,
        level: RaidLevel,
        ids: &[u64],
        disk_bytes: u64,
        area: Area,
        rows_per_region: u64,
    ) -> Result<(Meta, Vec<Vec<u8>>), String> {
        let layout = Members::new(level, ids.len(), area.unit, disk_bytes)?;
        let rows = layout.rows();
        // Regions as small as fit the slot's dirty map (one bit each).
        let fits = (area.label_slot.saturating_sub(128 + 24 * ids.len() as u64)) * 8;
        if fits == 0 {
            return Err(format!(
                "a {}-byte label slot cannot hold the label",
                area.label_slot
            ));
        }
        let rows_per_region = rows.div_ceil(fits).max(rows_per_region).max(1);
        let meta = Meta {
            array,
            seq: 1,
            level,
            clean: true,
            unit: area.unit,
            disk_bytes: rows * area.unit,
            rows_per_region,
            label_slot: area.label_slot as u32,
            journal_slots: area.journal_slots as u32,
            members: ids
                .iter()
                .map(|&id| MemberMeta {
                    id,
                    state: MemberState::InSync,
                    lost_since: 0,
                })
                .collect(),
            dirty: vec![false; rows.div_ceil(rows_per_region) as usize],
        };
        let labels = (0..ids.len())
            .map(|p| {
                Label {
                    position: p as u32,
                    meta: meta.clone(),
                }
                .encode(area.label_slot)
                .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        Ok((meta, labels))
    }

    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The array's state as the last durable label says.
    pub fn durable_meta(&self) -> &Meta {
        &self.durable
    }

    pub fn layout(&self) -> &Members {
        &self.layout
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Bytes of the array's logical device.
    pub fn lun_bytes(&self) -> u64 {
        self.layout.lun_bytes()
    }

    /// Whether the last durable label is the current state (nothing left to write).
    pub fn settled(&self) -> bool {
        !self.label_wanted && self.label.is_none()
    }

    /// Whether no operation is in progress.
    pub fn idle(&self) -> bool {
        self.ops.is_empty()
    }

    /// The rebuild cursor of a rebuilding member (rows below it are current).
    pub fn rebuild_cursor(&self, member: usize) -> Option<u64> {
        match self.meta.members[member].state {
            MemberState::Rebuilding { .. } => Some(self.cursor[member]),
            _ => None,
        }
    }

    fn usable(&self, m: usize, row: u64) -> bool {
        match self.meta.members[m].state {
            MemberState::InSync => true,
            MemberState::Failed => false,
            MemberState::Rebuilding { .. } => row < self.cursor[m],
        }
    }

    /// Whether the durable label already says member `m` is not current at `row`.
    fn durably_unusable(&self, m: usize, row: u64) -> bool {
        if self.durable.members[m].id != self.meta.members[m].id {
            // The labels do not know this disk at all.
            return true;
        }
        match self.durable.members[m].state {
            MemberState::InSync => false,
            MemberState::Failed => true,
            MemberState::Rebuilding { cursor } => row >= cursor,
        }
    }

    /// Whether the labels no longer count member `m`'s disk as current everywhere: it is
    /// durably failed or rebuilding, or another disk has taken its place.
    fn failure_durable(&self, m: usize) -> bool {
        let d = &self.durable.members[m];
        d.state != MemberState::InSync || d.id != self.meta.members[m].id
    }

    fn region(&self, row: u64) -> usize {
        (row / self.meta.rows_per_region) as usize
    }

    fn data_offset(&self, row: u64, within: u64) -> u64 {
        self.area.data_offset() + row * self.layout.unit() + within
    }

    /// Where the member's journal and labels are.
    pub fn area(&self) -> Area {
        self.area
    }

    /// Marks member `m` failed (a member I/O returned an error); the next label says so.
    fn fail_member(&mut self, m: usize) {
        self.counters.member_errors += 1;
        if self.meta.members[m].state != MemberState::Failed {
            // The next label is the first to say so: journal entries written before it are
            // stale for this position.
            self.meta.members[m].lost_since = self.meta.seq + 1;
            debug_assert!(
                self.durable.seq <= self.meta.seq,
                "the durable label is newer than the one in memory"
            );
            self.meta.members[m].state = MemberState::Failed;
            self.cursor[m] = 0;
            self.label_wanted = true;
            self.barrier_wanted = true;
        }
    }

    fn submit(&mut self, kind: Kind) -> OpId {
        let id = self.next_op;
        self.next_op += 1;
        self.ops.insert(
            id,
            Some(Box::new(Op {
                kind,
                waiting: 0,
                results: BTreeMap::new(),
                failed: Vec::new(),
            })),
        );
        id
    }

    /// Reads `length` bytes at `offset` of the logical device.
    pub fn read(&mut self, offset: u64, length: u64) -> OpId {
        if offset
            .checked_add(length)
            .is_none_or(|e| e > self.lun_bytes())
        {
            return self.refuse(offset + length);
        }
        let todo = self.layout.unit_places(offset, length);
        self.submit(Kind::Read(ReadOp {
            offset,
            buf: vec![0; length as usize],
            todo,
            issued: Vec::new(),
            reconstruct: Vec::new(),
            phase: RPhase::Direct,
        }))
    }

    /// Writes `data` at `offset` of the logical device.
    pub fn write(&mut self, offset: u64, data: Vec<u8>) -> OpId {
        let len = data.len() as u64;
        if offset.checked_add(len).is_none_or(|e| e > self.lun_bytes()) {
            return self.refuse(offset + len);
        }
        let rows = self.layout.write_rows(offset, len);
        debug_assert!(
            len == 0 || !rows.is_empty(),
            "a write of {len} bytes at {offset} touches no row"
        );
        self.submit(Kind::Write(WriteOp {
            offset,
            data,
            rows,
            at: 0,
            phase: WPhase::Lock,
            skip: Vec::new(),
            shadow: None,
            writes: Vec::new(),
            entry: None,
            slot: None,
        }))
    }

    fn refuse(&mut self, end: u64) -> OpId {
        let id = self.submit(Kind::Flush(FlushOp { epoch: 0, phase: 2 }));
        self.ops.remove(&id);
        self.done
            .push((id, Err(ArrayError::OutOfRange(end, self.lun_bytes()))));
        id
    }

    /// Makes every write finished before it durable on every live member, and lets regions
    /// with nothing in flight be clean again.
    pub fn flush(&mut self) -> OpId {
        let epoch = self.epoch;
        self.submit(Kind::Flush(FlushOp { epoch, phase: 0 }))
    }

    /// Checks (and with `repair`, fixes) rows `[from, to)`.
    pub fn scrub(&mut self, from: u64, to: u64, repair: bool) -> OpId {
        let rows = (from..to.min(self.layout.rows())).collect();
        self.rows_op(RowsKind::Scrub { repair }, rows)
    }

    /// Resynchronises the rows of regions left dirty by an unclean stop.
    pub fn resync(&mut self) -> OpId {
        let rpr = self.meta.rows_per_region;
        let total = self.layout.rows();
        let rows = (0..self.needs_resync.len())
            .filter(|&r| self.needs_resync[r])
            .flat_map(|r| (r as u64 * rpr)..((r as u64 + 1) * rpr).min(total))
            .collect();
        self.rows_op(RowsKind::Resync, rows)
    }

    /// Puts a new disk (`id`) at failed position `member`; it is rebuilt by
    /// [`ArrayCore::rebuild`]. Its labels are written with the next label.
    pub fn replace(&mut self, member: usize, id: u64) -> Result<(), ArrayError> {
        if self.meta.members[member].state != MemberState::Failed {
            return Err(ArrayError::NotFailed(member));
        }
        if self.durable.members[member].state != MemberState::Failed {
            return Err(ArrayError::FailureNotRecorded(member));
        }
        let lost_since = self.meta.members[member].lost_since;
        self.meta.members[member] = MemberMeta {
            id,
            state: MemberState::Rebuilding { cursor: 0 },
            lost_since,
        };
        self.cursor[member] = 0;
        self.label_wanted = true;
        Ok(())
    }

    /// Rebuilds the next `rows` rows of the member being rebuilt.
    pub fn rebuild(&mut self, rows: u64) -> Result<OpId, ArrayError> {
        let member = (0..self.meta.members.len())
            .find(|&m| matches!(self.meta.members[m].state, MemberState::Rebuilding { .. }))
            .ok_or(ArrayError::NothingToRebuild)?;
        let running = self.ops.values().flatten().any(
            |o| matches!(&o.kind, Kind::Rows(r) if matches!(r.kind, RowsKind::Rebuild { .. })),
        );
        if running {
            return Err(ArrayError::RebuildRunning);
        }
        let from = self.cursor[member];
        let to = (from + rows.max(1)).min(self.layout.rows());
        Ok(self.rows_op(RowsKind::Rebuild { member }, (from..to).collect()))
    }

    fn rows_op(&mut self, kind: RowsKind, rows: Vec<u64>) -> OpId {
        self.submit(Kind::Rows(RowsOp {
            kind,
            rows,
            at: 0,
            phase: SPhase::Lock,
            report: ScrubReport::default(),
            finishing: 0,
        }))
    }

    /// Marks the array stopped cleanly in the next label (call when idle, after a flush).
    pub fn stop_clean(&mut self) {
        if self.meta.dirty.iter().all(|d| !d) {
            self.meta.clean = true;
            self.label_wanted = true;
        }
    }

    /// Finished operations since the last call.
    pub fn take_done(&mut self) -> Vec<(OpId, Result<Done, ArrayError>)> {
        std::mem::take(&mut self.done)
    }

    /// Advances every operation as far as it can go and returns the member I/Os to issue now.
    pub fn poll(&mut self) -> Vec<(IoId, Io)> {
        loop {
            let mut progress = false;
            let ids: Vec<OpId> = self.ops.keys().copied().collect();
            for id in ids {
                progress |= self.advance(id);
            }
            progress |= self.advance_label();
            if !progress {
                break;
            }
        }
        std::mem::take(&mut self.out)
    }

    /// The result of I/O `io`: the bytes of a read, or an error (of any I/O). An error fails
    /// the member, unless the disk it went to has been replaced since.
    pub fn complete(&mut self, io: IoId, result: Result<Vec<u8>, ()>) {
        let Some((owner, member, id)) = self.ios.remove(&io) else {
            return;
        };
        if result.is_err() && self.meta.members[member].id == id {
            self.fail_member(member);
            debug_assert_eq!(self.meta.members[member].state, MemberState::Failed);
        }
        match owner {
            Owner::Op(op, tag) => {
                if let Some(o) = self.ops.get_mut(&op).and_then(|o| o.as_mut()) {
                    debug_assert!(o.waiting > 0, "op {op}: an answer it was not waiting for");
                    o.waiting -= 1;
                    let first = o.results.insert(tag, result).is_none();
                    debug_assert!(first, "op {op}: two answers under tag {tag}");
                }
            }
            Owner::Barrier => {
                debug_assert!(self.barrier_syncs > 0, "a barrier sync answered twice");
                self.barrier_syncs -= 1
            }
            Owner::Label => {
                if let Some(l) = &mut self.label {
                    debug_assert!(l.pending > 0, "a label write answered twice");
                    l.pending -= 1;
                }
            }
        }
    }
}

mod assemble;
mod read;
mod rows;
mod steps;
mod write;
