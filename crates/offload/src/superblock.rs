//! The store set, the only state a client keeps on its base volume (Everest §3.2.1), in a
//! reserved area of [`SUPERBLOCK_BYTES`] at the end of the volume.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "CDOFFSB1"
//! 8       8     generation: incremented by every start; the high bits of every version
//! 16      4     store count n (≤ 64)
//! 20      16·n  stores: id (u64), server (u64)
//! 20+16n  4     CRC32C of the bytes before it
//! rest          zero
//! ```

use crate::client::StoreInfo;

pub const SUPERBLOCK_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"CDOFFSB1";
pub const STORES_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub generation: u64,
    pub stores: Vec<StoreInfo>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    #[error("no store set on the base volume (bad magic): the volume was never formatted for off-loading")]
    NoMagic,
    #[error("the store set on the base volume is damaged (checksum mismatch or bad count)")]
    Damaged,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.stores.len() <= STORES_MAX, "at most 64 stores");
        let mut out = Vec::with_capacity(SUPERBLOCK_BYTES as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.generation.to_le_bytes());
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
        if bytes.len() < 24 || &bytes[..8] != MAGIC {
            return Err(SuperblockError::NoMagic);
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let generation = u64_at(8);
        let n = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as usize;
        let end = 20 + 16 * n;
        if n > STORES_MAX || end + 4 > bytes.len() {
            return Err(SuperblockError::Damaged);
        }
        let crc = u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes"));
        if crc != crc32c::crc32c(&bytes[..end]) {
            return Err(SuperblockError::Damaged);
        }
        let stores = (0..n)
            .map(|i| StoreInfo {
                id: u64_at(20 + 16 * i),
                server: u64_at(28 + 16 * i),
            })
            .collect();
        Ok(Superblock { generation, stores })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_damage() {
        let sb = Superblock {
            generation: 7,
            stores: vec![
                StoreInfo { id: 1, server: 10 },
                StoreInfo { id: 2, server: 11 },
            ],
        };
        let bytes = sb.encode();
        assert_eq!(bytes.len(), SUPERBLOCK_BYTES as usize);
        assert_eq!(Superblock::decode(&bytes), Ok(sb));
        let mut bad = bytes.clone();
        bad[21] ^= 1;
        assert_eq!(Superblock::decode(&bad), Err(SuperblockError::Damaged));
        assert_eq!(
            Superblock::decode(&vec![0; 4096]),
            Err(SuperblockError::NoMagic)
        );
        let mut huge = bytes;
        huge[16..20].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(Superblock::decode(&huge), Err(SuperblockError::Damaged));
    }
}
