//! The label at the start of every member of a member array: which array the member belongs
//! to, at which position, and the array's state as of the label's sequence number (every
//! member's identity and state, the rebuild cursor, whether the array was stopped cleanly,
//! and which regions had writes in flight). Pure bytes, so that the decoder is fuzzed
//! (`fuzz/fuzz_targets/member_label.rs`) without the pool around it. Format: docs/FORMATS.md.
//!
//! A member holds two label slots ([`slot_offset`]); label `seq` goes to slot `seq mod 2`,
//! so a torn label write leaves the previous label readable in the other slot.

use cordillera_models::device::raid::RaidLevel;

pub const LABEL_MAGIC: &[u8; 8] = b"CDARRMB1";
pub const LABEL_VERSION: u32 = 1;
/// At most this many members in an array.
pub const MAX_MEMBERS: usize = 64;
/// Bytes of the fixed part before the member table.
const HEAD: usize = 80;
/// Bytes per member in the member table.
const MEMBER: usize = 32;

/// Where the label numbered `seq` goes on a member with label slots of `slot_bytes`: slot
/// `seq mod 2`.
pub fn slot_offset(slot_bytes: u64, seq: u64) -> u64 {
    seq % 2 * slot_bytes
}

/// A member's state in the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Holds current data and parity.
    InSync,
    /// Lost: returned an error, was missing, blank or stale at assembly. Never read.
    Failed,
    /// A replacement being rebuilt: rows below `cursor` are current (and written by every
    /// write), rows from `cursor` on are not yet.
    Rebuilding { cursor: u64 },
}

/// One position of the array: the identity of the disk there and its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberMeta {
    /// Drawn at random when a disk takes the position (at creation or replacement): a disk
    /// whose label names another id at its position is not this position's disk.
    pub id: u64,
    pub state: MemberState,
    /// The sequence number of the label that first said this position was lost, in its
    /// latest spell of being lost (a replacement being rebuilt inherits it): journal entries
    /// older than it are stale.
    pub lost_since: u64,
}

/// The array's state as one label records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub array: u128,
    /// Bumped by every label write; the label with the highest `seq` among an array's members
    /// is the array's state.
    pub seq: u64,
    pub level: RaidLevel,
    /// Stopped cleanly: no write was in flight, every dirty region resynchronised.
    pub clean: bool,
    pub unit: u64,
    /// Data bytes per member (after the label area).
    pub disk_bytes: u64,
    pub rows_per_region: u64,
    /// The label slot's bytes and the journal's slots (`super::journal::Area`).
    pub label_slot: u32,
    pub journal_slots: u32,
    pub members: Vec<MemberMeta>,
    /// Regions with writes in flight (or not yet synced) when the label was written, one bit
    /// each: after an unclean stop, their rows are resynchronised.
    pub dirty: Vec<bool>,
}

/// A member's label: its position, and the array's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub position: u32,
    pub meta: Meta,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    #[error("no member label (a blank disk, or not a member of a member array)")]
    Missing,
    #[error("the member label is damaged: {0}")]
    Damaged(&'static str),
    #[error("member label format version {0}, this build reads {LABEL_VERSION}")]
    Version(u32),
    #[error("the label does not fit in its {0}-byte slot")]
    TooLarge(u64),
}

fn level_code(level: RaidLevel) -> u8 {
    match level {
        RaidLevel::Raid0 => 0,
        RaidLevel::Raid1 => 1,
        RaidLevel::Raid5 => 5,
        RaidLevel::Raid10 => 10,
    }
}

impl Label {
    /// The label as the `slot_bytes` written to its slot.
    pub fn encode(&self, slot_bytes: u64) -> Result<Vec<u8>, LabelError> {
        let m = &self.meta;
        if m.members.len() > MAX_MEMBERS || self.position as usize >= m.members.len() {
            return Err(LabelError::Damaged("position or member count out of range"));
        }
        let mut out = Vec::with_capacity(slot_bytes as usize);
        out.extend_from_slice(LABEL_MAGIC);
        out.extend_from_slice(&LABEL_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // length, below
        out.extend_from_slice(&m.array.to_le_bytes());
        out.extend_from_slice(&m.seq.to_le_bytes());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.push(level_code(m.level));
        out.push(u8::from(m.clean));
        out.extend_from_slice(&(m.members.len() as u16).to_le_bytes());
        out.extend_from_slice(&m.unit.to_le_bytes());
        out.extend_from_slice(&m.disk_bytes.to_le_bytes());
        out.extend_from_slice(&m.rows_per_region.to_le_bytes());
        out.extend_from_slice(&m.label_slot.to_le_bytes());
        out.extend_from_slice(&m.journal_slots.to_le_bytes());
        debug_assert_eq!(out.len(), HEAD);
        for member in &m.members {
            out.extend_from_slice(&member.id.to_le_bytes());
            let (state, cursor) = match member.state {
                MemberState::InSync => (0u8, 0u64),
                MemberState::Failed => (1, 0),
                MemberState::Rebuilding { cursor } => (2, cursor),
            };
            out.push(state);
            out.extend_from_slice(&[0u8; 7]);
            out.extend_from_slice(&cursor.to_le_bytes());
            out.extend_from_slice(&member.lost_since.to_le_bytes());
        }
        out.extend_from_slice(&(m.dirty.len() as u32).to_le_bytes());
        for word in m.dirty.chunks(8) {
            let mut b = 0u8;
            for (i, d) in word.iter().enumerate() {
                b |= u8::from(*d) << i;
            }
            out.push(b);
        }
        let len = (out.len() - 16) as u32;
        out[12..16].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        if out.len() as u64 > slot_bytes {
            return Err(LabelError::TooLarge(slot_bytes));
        }
        out.resize(slot_bytes as usize, 0);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<Label, LabelError> {
        if bytes.len() < 16 || &bytes[..8] != LABEL_MAGIC {
            return Err(LabelError::Missing);
        }
        let u16_at = |o: usize| u16::from_le_bytes(bytes[o..o + 2].try_into().expect("2"));
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8"));
        let version = u32_at(8);
        if version != LABEL_VERSION {
            return Err(LabelError::Version(version));
        }
        let end = 16 + u32_at(12) as usize;
        if end < HEAD + 4 || end + 4 > bytes.len() {
            return Err(LabelError::Damaged("bad length"));
        }
        if u32_at(end) != crc32c::crc32c(&bytes[..end]) {
            return Err(LabelError::Damaged("checksum mismatch"));
        }
        let body = &bytes[..end];
        let level = match body[44] {
            0 => RaidLevel::Raid0,
            1 => RaidLevel::Raid1,
            5 => RaidLevel::Raid5,
            10 => RaidLevel::Raid10,
            _ => return Err(LabelError::Damaged("unknown RAID level")),
        };
        let clean = match body[45] {
            0 => false,
            1 => true,
            _ => return Err(LabelError::Damaged("bad clean flag")),
        };
        let n = u16_at(46) as usize;
        let position = u32_at(40);
        if n == 0 || n > MAX_MEMBERS || position as usize >= n {
            return Err(LabelError::Damaged("position or member count out of range"));
        }
        let mut at = HEAD;
        if at + n * MEMBER + 4 > end {
            return Err(LabelError::Damaged("member table runs past the label"));
        }
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            let id = u64_at(at);
            let cursor = u64_at(at + 16);
            let state = match body[at + 8] {
                0 => MemberState::InSync,
                1 => MemberState::Failed,
                2 => MemberState::Rebuilding { cursor },
                _ => return Err(LabelError::Damaged("unknown member state")),
            };
            if body[at + 9..at + 16].iter().any(|b| *b != 0) || (body[at + 8] != 2 && cursor != 0) {
                return Err(LabelError::Damaged("member entry padding"));
            }
            members.push(MemberMeta {
                id,
                state,
                lost_since: u64_at(at + 24),
            });
            at += MEMBER;
        }
        let regions = u32_at(at) as usize;
        at += 4;
        if at + regions.div_ceil(8) != end {
            return Err(LabelError::Damaged("dirty map length"));
        }
        let dirty: Vec<bool> = (0..regions)
            .map(|r| body[at + r / 8] >> (r % 8) & 1 == 1)
            .collect();
        if !regions.is_multiple_of(8) && body[end - 1] >> (regions % 8) != 0 {
            return Err(LabelError::Damaged("dirty map padding"));
        }
        Ok(Label {
            position,
            meta: Meta {
                array: u128::from_le_bytes(body[16..32].try_into().expect("16")),
                seq: u64_at(32),
                level,
                clean,
                unit: u64_at(48),
                disk_bytes: u64_at(56),
                rows_per_region: u64_at(64),
                label_slot: u32_at(72),
                journal_slots: u32_at(76),
                members,
                dirty,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Label {
        Label {
            position: 2,
            meta: Meta {
                array: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
                seq: 41,
                level: RaidLevel::Raid5,
                clean: false,
                unit: 65536,
                disk_bytes: 64 << 20,
                rows_per_region: 16,
                label_slot: 4096,
                journal_slots: 8,
                members: vec![
                    MemberMeta {
                        id: 11,
                        state: MemberState::InSync,
                        lost_since: 0,
                    },
                    MemberMeta {
                        id: 12,
                        state: MemberState::Failed,
                        lost_since: 39,
                    },
                    MemberMeta {
                        id: 13,
                        state: MemberState::Rebuilding { cursor: 77 },
                        lost_since: 12,
                    },
                ],
                dirty: (0..13).map(|r| r % 3 == 0).collect(),
            },
        }
    }

    #[test]
    fn labels_round_trip_and_damage_is_detected() {
        let label = sample();
        let bytes = label.encode(4096).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(Label::decode(&bytes).unwrap(), label);
        assert_eq!(
            Label::decode(&[0u8; 4096]).unwrap_err(),
            LabelError::Missing
        );
        // Every byte of the label proper is covered: a flipped bit is never read as a label.
        let used = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize + 4;
        for at in 8..used {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(Label::decode(&bad).is_err(), "flipped byte {at} decoded");
        }
        // Truncated anywhere: an error, never a panic.
        for cut in 0..used {
            assert!(Label::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(label.encode(64).unwrap_err(), LabelError::TooLarge(64));
    }
}
