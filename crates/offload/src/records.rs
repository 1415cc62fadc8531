//! Deletion records (Everest §3.2.4): deletes owed to a failed store, written as ordinary store
//! records under the client's companion id ([`companion`]) on N other stores, so that a client
//! that crashes still knows, after recovery, which versions on the failed store are stale.
//!
//! A record lives at offset `slot << SLOT_SHIFT` of the companion's address space; its payload:
//!
//! ```text
//! offset  size   field
//! 0       4      magic "CDDR"
//! 4       8      target store id (whose data is to be deleted)
//! 12      4      entry count n (≤ ENTRIES_MAX)
//! 16      24·n   entries: start, end (byte offsets on the volume), version (delete ≤ version)
//! ```
//! The store's record checksum protects it; a record that does not decode is ignored.

pub const SLOT_SHIFT: u32 = 24;
pub const ENTRIES_MAX: usize = 4096;
const MAGIC: &[u8; 4] = b"CDDR";

/// The largest record is one store write, and it fits in its slot of the companion's space.
const RECORD_BYTES_MAX: usize = 16 + 24 * ENTRIES_MAX;
const _: () = assert!(
    RECORD_BYTES_MAX <= cordillera_vstore::format::PAYLOAD_BYTES_MAX as usize
        && RECORD_BYTES_MAX <= 1 << SLOT_SHIFT
);

/// The id under which a client's deletion records are kept.
pub fn companion(client: u64) -> u64 {
    client ^ (1 << 63)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletionRecord {
    pub target: u64,
    pub entries: Vec<(u64, u64, u64)>,
}

impl DeletionRecord {
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.entries.len() <= ENTRIES_MAX);
        let mut out = Vec::with_capacity(16 + 24 * self.entries.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.target.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for &(s, e, v) in &self.entries {
            out.extend_from_slice(&s.to_le_bytes());
            out.extend_from_slice(&e.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<DeletionRecord> {
        if bytes.len() < 16 || &bytes[..4] != MAGIC {
            return None;
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let n = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        if n > ENTRIES_MAX || bytes.len() != 16 + 24 * n {
            return None;
        }
        let entries = (0..n)
            .map(|i| {
                let o = 16 + 24 * i;
                (u64_at(o), u64_at(o + 8), u64_at(o + 16))
            })
            .filter(|&(s, e, _)| s < e)
            .collect();
        Some(DeletionRecord {
            target: u64_at(4),
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let r = DeletionRecord {
            target: 42,
            entries: vec![(0, 4096, 3), (8192, 12288, 9)],
        };
        assert_eq!(DeletionRecord::decode(&r.encode()), Some(r.clone()));
        let bytes = r.encode();
        assert_eq!(DeletionRecord::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(DeletionRecord::decode(b"nonsense-nonsense"), None);
        assert_ne!(companion(5), 5);
        assert_eq!(companion(companion(5)), 5);
    }
}
