//! The store set, the only state a client keeps on its base volume (Everest §3.2.1), in a
//! reserved area of [`SUPERBLOCK_BYTES`] at the end of the volume.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "CDOFFSB2"
//! 8       8     generation: incremented by every start; the high bits of every version
//! 16      4     flags: bit 0 "degraded" (below), other bits zero
//! 20      4     store count n (≤ 64)
//! 24      16·n  stores: id (u64), server (u64)
//! 24+16n  4     CRC32C of the bytes before it
//! rest          zero
//! ```
//!
//! "Degraded": some acknowledged data may have fewer than N copies on stores (a write
//! acknowledged while a store it was sent to failed, or a restart that went on without a store
//! whose copies are now stale). A restart then waits for every store of the set instead of
//! going on without up to N−1 of them. The client sets the flag (durably) before it acknowledges
//! such a write or serves after such a restart, and clears it once every such range is back on
//! the base volume or on N stores.
//!
//! The first format, "CDOFFSB1", had no flags word (count at 16, stores at 20); it is read as
//! not degraded.

/// A store in the store set: its identity and the server it lives on (N copies go to N servers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreInfo {
    pub id: u64,
    pub server: u64,
}

pub const SUPERBLOCK_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"CDOFFSB2";
const MAGIC_V1: &[u8; 8] = b"CDOFFSB1";
const FLAG_DEGRADED: u32 = 1;
pub const STORES_MAX: usize = 64;
// A store set is a bit per store in a u64 (`Loc::stores`), and the largest one fits the
// reserved area with its header and checksum.
const _: () = assert!(
    STORES_MAX <= u64::BITS as usize && 24 + 16 * STORES_MAX + 4 <= SUPERBLOCK_BYTES as usize
);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub generation: u64,
    /// Some acknowledged data may have fewer than N copies: a restart waits for every store.
    pub degraded: bool,
    pub stores: Vec<StoreInfo>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    #[error("no store set on the base volume (bad magic): the volume was never formatted for off-loading")]
    NoMagic,
    #[error("the store set on the base volume is damaged (checksum mismatch or bad count)")]
    Damaged,
    #[error("the store set on the base volume has unknown flags (written by a newer version?)")]
    UnknownFlags,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.stores.len() <= STORES_MAX, "at most 64 stores");
        let mut out = Vec::with_capacity(SUPERBLOCK_BYTES as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.generation.to_le_bytes());
        let flags = if self.degraded { FLAG_DEGRADED } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&(self.stores.len() as u32).to_le_bytes());
        for s in &self.stores {
            out.extend_from_slice(&s.id.to_le_bytes());
            out.extend_from_slice(&s.server.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(SUPERBLOCK_BYTES as usize, 0);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Superblock, SuperblockError> {
        let v1 = bytes.len() >= 8 && &bytes[..8] == MAGIC_V1;
        if bytes.len() < 8 || (&bytes[..8] != MAGIC && !v1) {
            return Err(SuperblockError::NoMagic);
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let first = if v1 { 20 } else { 24 };
        if bytes.len() < first {
            return Err(SuperblockError::Damaged);
        }
        let generation = u64_at(8);
        let flags = if v1 { 0 } else { u32_at(16) };
        let n = u32_at(first - 4) as usize;
        let end = first + 16 * n;
        if n > STORES_MAX || end + 4 > bytes.len() {
            return Err(SuperblockError::Damaged);
        }
        let crc = u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes"));
        if crc != crc32c::crc32c(&bytes[..end]) {
            return Err(SuperblockError::Damaged);
        }
        if flags & !FLAG_DEGRADED != 0 {
            return Err(SuperblockError::UnknownFlags);
        }
        let stores = (0..n)
            .map(|i| StoreInfo {
                id: u64_at(first + 16 * i),
                server: u64_at(first + 8 + 16 * i),
            })
            .collect();
        Ok(Superblock {
            generation,
            degraded: flags & FLAG_DEGRADED != 0,
            stores,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_damage() {
        let sb = Superblock {
            generation: 7,
            degraded: true,
            stores: vec![
                StoreInfo { id: 1, server: 10 },
                StoreInfo { id: 2, server: 11 },
            ],
        };
        let bytes = sb.encode();
        assert_eq!(bytes.len(), SUPERBLOCK_BYTES as usize);
        assert_eq!(Superblock::decode(&bytes), Ok(sb.clone()));
        let clean = Superblock {
            degraded: false,
            ..sb.clone()
        };
        assert_eq!(Superblock::decode(&clean.encode()), Ok(clean));
        let mut bad = bytes.clone();
        bad[25] ^= 1;
        assert_eq!(Superblock::decode(&bad), Err(SuperblockError::Damaged));
        assert_eq!(
            Superblock::decode(&vec![0; 4096]),
            Err(SuperblockError::NoMagic)
        );
        let mut huge = bytes.clone();
        huge[20..24].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(Superblock::decode(&huge), Err(SuperblockError::Damaged));
        let mut flagged = bytes;
        flagged[16] |= 2;
        let crc = crc32c::crc32c(&flagged[..56]);
        flagged[56..60].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Superblock::decode(&flagged),
            Err(SuperblockError::UnknownFlags)
        );
        assert_eq!(Superblock::decode(&[0; 10]), Err(SuperblockError::NoMagic));
        assert_eq!(
            Superblock::decode(&bytes_prefix()),
            Err(SuperblockError::Damaged)
        );
    }

    fn bytes_prefix() -> Vec<u8> {
        b"CDOFFSB2\x07\0\0".to_vec()
    }

    #[test]
    fn reads_the_first_format_as_not_degraded() {
        let mut v1 = Vec::new();
        v1.extend_from_slice(b"CDOFFSB1");
        v1.extend_from_slice(&9u64.to_le_bytes());
        v1.extend_from_slice(&1u32.to_le_bytes());
        v1.extend_from_slice(&5u64.to_le_bytes());
        v1.extend_from_slice(&6u64.to_le_bytes());
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        v1.resize(SUPERBLOCK_BYTES as usize, 0);
        assert_eq!(
            Superblock::decode(&v1),
            Ok(Superblock {
                generation: 9,
                degraded: false,
                stores: vec![StoreInfo { id: 5, server: 6 }],
            })
        );
    }
}
