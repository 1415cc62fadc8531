//! The journal of degraded RAID-5 writes, and where the label slots, the journal and the data
//! are on a member. Format: docs/FORMATS.md.
//!
//! With a data member lost, its bytes exist only as the XOR of the rest of the row; a crash
//! between a row's data and parity writes would change them. So before such a write, the lost
//! member's bytes over the written range, as they are to be after it, go to the row's journal
//! slot (`row mod journal_slots` on the row's parity member), written and synced; after the
//! row's writes are synced the slot may be reused. A row has one slot, so the entry found
//! there is its newest. After an unclean stop, a dirty row's entry restores its parity.

/// Bytes of an entry's header (one sector); the entry's bytes follow.
pub const ENTRY_HEAD: u64 = 512;
pub const ENTRY_MAGIC: &[u8; 8] = b"CDARRJE1";
const FIXED: usize = 80;

/// Where things are on a member: two label slots, `journal_slots` journal slots, then data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// Bytes of one label slot.
    pub label_slot: u64,
    pub journal_slots: u64,
    /// The array's stripe unit (a journal slot holds up to one unit).
    pub unit: u64,
}

impl Area {
    /// Bytes of one journal slot.
    pub fn journal_slot(&self) -> u64 {
        ENTRY_HEAD + self.unit
    }

    /// Where journal slot `i` is.
    pub fn journal_offset(&self, i: u64) -> u64 {
        2 * self.label_slot + i * self.journal_slot()
    }

    /// Where the data starts.
    pub fn data_offset(&self) -> u64 {
        self.journal_offset(self.journal_slots)
    }
}

/// One journal entry: the lost member's bytes `[lo, hi)` of row `row` after a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub array: u128,
    /// Orders entries and tells stale ones: the sequence number of the newest durable label
    /// when the entry was written, then a count within the run.
    pub label_seq: u64,
    pub n: u64,
    pub row: u64,
    /// The lost member, and the id of the disk that was there.
    pub member: u32,
    pub member_id: u64,
    pub lo: u64,
    pub bytes: Vec<u8>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EntryError {
    #[error("no journal entry")]
    Missing,
    #[error("the journal entry is damaged: {0}")]
    Damaged(&'static str),
}

impl Entry {
    /// The entry as written to a slot of `slot_bytes` (header, then the bytes).
    pub fn encode(&self, slot_bytes: u64) -> Vec<u8> {
        assert!(
            ENTRY_HEAD + self.bytes.len() as u64 <= slot_bytes,
            "entry past its slot"
        );
        let mut out = Vec::with_capacity(ENTRY_HEAD as usize + self.bytes.len());
        out.extend_from_slice(ENTRY_MAGIC);
        out.extend_from_slice(&self.array.to_le_bytes());
        out.extend_from_slice(&self.label_seq.to_le_bytes());
        out.extend_from_slice(&self.n.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.extend_from_slice(&self.member.to_le_bytes());
        out.extend_from_slice(&(self.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.member_id.to_le_bytes());
        out.extend_from_slice(&self.lo.to_le_bytes());
        debug_assert_eq!(out.len(), FIXED - 8);
        let mut crc = crc32c::crc32c(&out);
        crc = crc32c::crc32c_append(crc, &self.bytes);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&[0u8; 4]);
        out.resize(ENTRY_HEAD as usize, 0);
        out.extend_from_slice(&self.bytes);
        out
    }

    /// An entry from a slot's bytes; `unit` bounds its length.
    pub fn decode(bytes: &[u8], unit: u64) -> Result<Entry, EntryError> {
        if bytes.len() < FIXED || &bytes[..8] != ENTRY_MAGIC {
            return Err(EntryError::Missing);
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8"));
        let len = u32_at(52) as u64;
        let lo = u64_at(64);
        if len == 0 || len > unit || lo.checked_add(len).is_none_or(|hi| hi > unit) {
            return Err(EntryError::Damaged("bad range"));
        }
        let end = ENTRY_HEAD as usize + len as usize;
        if bytes.len() < end {
            return Err(EntryError::Damaged("truncated"));
        }
        let data = &bytes[ENTRY_HEAD as usize..end];
        let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..FIXED - 8]), data);
        if u32_at(FIXED - 8) != crc || u32_at(FIXED - 4) != 0 {
            return Err(EntryError::Damaged("checksum mismatch"));
        }
        Ok(Entry {
            array: u128::from_le_bytes(bytes[8..24].try_into().expect("16")),
            label_seq: u64_at(24),
            n: u64_at(32),
            row: u64_at(40),
            member: u32_at(48),
            member_id: u64_at(56),
            lo,
            bytes: data.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let e = Entry {
            array: 7,
            label_seq: 3,
            n: 9,
            row: 12,
            member: 2,
            member_id: 0xfeed,
            lo: 512,
            bytes: (0..1024u32).map(|i| i as u8).collect(),
        };
        let bytes = e.encode(512 + 2048);
        assert_eq!(Entry::decode(&bytes, 2048).unwrap(), e);
        assert_eq!(
            Entry::decode(&[0u8; 600], 2048).unwrap_err(),
            EntryError::Missing
        );
        for at in (8..FIXED).chain([512, 700, 1535]) {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(
                Entry::decode(&bad, 2048).is_err(),
                "flipped byte {at} decoded"
            );
        }
        for cut in 0..bytes.len() {
            assert!(Entry::decode(&bytes[..cut], 2048).is_err(), "cut at {cut}");
        }
        // Longer than the unit it claims to be part of.
        assert!(Entry::decode(&bytes, 1024).is_err());
    }
}
