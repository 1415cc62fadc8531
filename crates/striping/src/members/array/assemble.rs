//! Assembling a member array from what its members' labels say: the newest label is the
//! array's state; a member that is missing, unreadable, blank, of another array or position,
//! or replaced since, is failed; the array is refused when it has lost more than its level
//! survives, or (unless forced) when rows it was writing at an unclean stop also lost a member.

use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

use cordillera_models::device::raid::RaidLevel;

use super::super::journal::{Area, Entry};
use super::super::label::{Label, MemberState, Meta};
use super::super::Members;
use super::{ArrayCore, Assembly, Counters, Found};

/// Whether an array of `level` over `disks` members still serves every byte with members
/// `lost` gone.
pub(super) fn tolerable(level: RaidLevel, disks: usize, lost: &[usize]) -> bool {
    match level {
        RaidLevel::Raid0 => lost.is_empty(),
        RaidLevel::Raid1 => lost.len() < disks,
        RaidLevel::Raid5 => lost.len() <= 1,
        RaidLevel::Raid10 => {
            (0..disks / 2).all(|p| !(lost.contains(&(2 * p)) && lost.contains(&(2 * p + 1))))
        }
    }
}

impl ArrayCore {
    /// Assembles an array from what each position holds. `expect` is the array id the pool
    /// recorded (a member of another array is never taken). Members that are missing,
    /// unreadable, blank, of another array or position, or replaced since, are failed (and
    /// the next label says so); the array is refused if more are lost than its level
    /// survives, or, unless `force`, if it stopped uncleanly with writes in flight in rows
    /// that also lost a member.
    pub fn assemble(
        expect: u128,
        found: Vec<Found>,
        area: Area,
        force: bool,
    ) -> Result<Assembly, String> {
        let best = |f: &Found| -> Option<Label> {
            f.as_ref().ok().and_then(|f| {
                f.labels
                    .iter()
                    .flatten()
                    .filter(|l| l.meta.array == expect)
                    .max_by_key(|l| l.meta.seq)
                    .cloned()
            })
        };
        let labels: Vec<Option<Label>> = found.iter().map(best).collect();
        let Some(newest) = labels.iter().flatten().max_by_key(|l| l.meta.seq) else {
            return Err(format!(
                "no member carries a label of array {expect:032x} ({} devices given)",
                found.len()
            ));
        };
        let mut meta = newest.meta.clone();
        let labelled = newest.meta.clone();
        let want = (area.label_slot, area.journal_slots, area.unit);
        let has = (meta.label_slot as u64, meta.journal_slots as u64, meta.unit);
        if want != has {
            return Err(format!(
                "the labels say label slots of {} bytes, {} journal slots and a {}-byte unit; read as {want:?}",
                has.0, has.1, has.2
            ));
        }
        if meta.members.len() != found.len() {
            return Err(format!(
                "the array has {} members, {} devices given",
                meta.members.len(),
                found.len()
            ));
        }
        let layout = Members::new(meta.level, meta.members.len(), meta.unit, meta.disk_bytes)?;
        let notes = fail_unfit_members(&mut meta, &labelled, &found, &labels);
        let rows = layout.rows();
        for row in [0, rows.saturating_sub(1)] {
            let lost = lost_at(row, &meta);
            if !tolerable(meta.level, meta.members.len(), &lost) {
                return Err(format!(
                    "array {expect:032x} cannot be served: members {lost:?} lost ({})",
                    notes.join("; ")
                ));
            }
        }
        let (dirty_rows, untrusted, journal) = dirty_rows(expect, &meta, &labelled, &found, rows);
        if !untrusted.is_empty() && !force {
            return Err(format!(
                "array {expect:032x} stopped uncleanly while a member was lost: rows {untrusted:?} were being written, and the lost member's bytes there cannot be rebuilt from their parity; start it forced to serve it anyway (those bytes may be wrong)"
            ));
        }
        let regions = meta.dirty.len();
        let cursor = meta
            .members
            .iter()
            .map(|m| match m.state {
                MemberState::Rebuilding { cursor } => cursor,
                _ => 0,
            })
            .collect();
        let needs_resync = meta.dirty.clone();
        meta.clean = false;
        let core = ArrayCore {
            layout,
            area,
            meta,
            cursor,
            durable: labelled.clone(),
            // The failed members and the unclean flag go to disk before anything else.
            label_wanted: true,
            label: None,
            ops: BTreeMap::new(),
            next_op: 1,
            ios: FxHashMap::default(),
            next_io: 1,
            out: Vec::new(),
            done: Vec::new(),
            locks: FxHashMap::default(),
            writers: vec![0; regions],
            last_write: vec![0; regions],
            needs_resync,
            epoch: 0,
            journal_busy: Default::default(),
            journal_n: 0,
            journal,
            barrier_wanted: false,
            barrier_syncs: 0,
            writes_issued: 0,
            lost_from: labelled
                .members
                .iter()
                .map(|m| match m.state {
                    MemberState::InSync => u64::MAX,
                    MemberState::Failed => 0,
                    MemberState::Rebuilding { cursor } => cursor,
                })
                .collect(),
            counters: Counters::default(),
        };
        Ok(Assembly {
            core,
            notes,
            dirty_rows,
            untrusted_rows: untrusted,
        })
    }
}

/// Fails (in `meta`) each member whose disk is unreadable, blank, of another array or
/// position, or replaced since; returns a note for each.
fn fail_unfit_members(
    meta: &mut Meta,
    labelled: &Meta,
    found: &[Found],
    labels: &[Option<Label>],
) -> Vec<String> {
    let mut notes = Vec::new();
    for (p, f) in found.iter().enumerate() {
        let why = match (&meta.members[p].state, f, &labels[p]) {
            (MemberState::Failed, _, _) => None,
            (_, Err(e), _) => Some(format!("unreadable: {e}")),
            (_, Ok(f), None) => Some(match f.labels.iter().flatten().next() {
                None => "blank: no member label".to_string(),
                Some(l) => format!("a member of another array ({:032x})", l.meta.array),
            }),
            (_, Ok(_), Some(l)) if l.position as usize != p => {
                Some(format!("the disk of position {}, not {p}", l.position))
            }
            (_, Ok(_), Some(l)) if l.meta.members[p].id != meta.members[p].id => Some(format!(
                "a disk replaced since (its id {:x}, the array's {:x})",
                l.meta.members[p].id, meta.members[p].id
            )),
            _ => None,
        };
        if let Some(why) = why {
            notes.push(format!("member {p}: {why}; failed"));
            meta.members[p].state = MemberState::Failed;
            meta.members[p].lost_since = labelled.seq + 1;
        }
    }
    notes
}

/// The members `meta` counts as lost at `row`.
fn lost_at(row: u64, meta: &Meta) -> Vec<usize> {
    (0..meta.members.len())
        .filter(|&m| match meta.members[m].state {
            MemberState::InSync => false,
            MemberState::Failed => true,
            MemberState::Rebuilding { cursor } => row >= cursor,
        })
        .collect()
}

/// The dirty rows (counted), the untrusted ones among them, and the newest journal entry of
/// each dirty RAID-5 row with a member lost. Such a row was written with the journal (or
/// synced by the failure's barrier) if the labels already said the member was lost; if the
/// member was lost without the labels knowing (a crash and a lost disk together), its bytes
/// there cannot be trusted.
fn dirty_rows(
    expect: u128,
    meta: &Meta,
    labelled: &Meta,
    found: &[Found],
    rows: u64,
) -> (u64, Vec<u64>, FxHashMap<u64, Entry>) {
    let mut dirty_rows = 0;
    let mut untrusted = Vec::new();
    let mut journal: FxHashMap<u64, Entry> = FxHashMap::default();
    for (r, d) in meta.dirty.iter().enumerate() {
        if !d {
            continue;
        }
        let from = r as u64 * meta.rows_per_region;
        for row in from..(from + meta.rows_per_region).min(rows) {
            dirty_rows += 1;
            if meta.level != RaidLevel::Raid5 {
                continue;
            }
            let lost = lost_at(row, meta);
            let known = lost_at(row, labelled);
            if lost.iter().any(|m| !known.contains(m)) {
                untrusted.push(row);
                continue;
            }
            let Some(&x) = lost.first() else { continue };
            let newest = found
                .iter()
                .filter_map(|f| f.as_ref().ok())
                .flat_map(|f| &f.journal)
                .filter(|e| {
                    e.array == expect
                        && e.row == row
                        && e.member as usize == x
                        && e.label_seq >= labelled.members[x].lost_since
                })
                .max_by_key(|e| (e.label_seq, e.n));
            if let Some(e) = newest {
                journal.insert(row, e.clone());
            }
        }
    }
    (dirty_rows, untrusted, journal)
}
