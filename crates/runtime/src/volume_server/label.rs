//! The volume label at the start of the base volume: which volume this is and what it was
//! formatted with (format: docs/FORMATS.md).

use super::*;

/// The volume label: which client this volume is to its stores, and where they are.
///
/// ```text
/// offset  size  field
/// 0       8     magic "CDVOLLB1"
/// 8       8     client id (random at format; the stores key records by it)
/// 16      8     volume id
/// 24      4     n_way
/// 28      4     store count n (≤ 64)
/// 32      …     n × (u16 length, address bytes "host:port")
/// …       4     CRC32C of the bytes before it
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub client: u64,
    pub volume: u64,
    pub n_way: u32,
    /// Store `i` of the store set (id `i + 1`) is at `stores[i]`.
    pub stores: Vec<String>,
}

pub(super) const LABEL_MAGIC: &[u8; 8] = b"CDVOLLB1";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    #[error("no volume label (not formatted for off-loading)")]
    Missing,
    #[error("the volume label is damaged (checksum mismatch or bad lengths)")]
    Damaged,
    #[error("the store addresses do not fit in the label")]
    TooLarge,
}

impl Label {
    pub fn encode(&self) -> Result<Vec<u8>, LabelError> {
        let mut out = Vec::with_capacity(LABEL_BYTES as usize);
        out.extend_from_slice(LABEL_MAGIC);
        out.extend_from_slice(&self.client.to_le_bytes());
        out.extend_from_slice(&self.volume.to_le_bytes());
        out.extend_from_slice(&self.n_way.to_le_bytes());
        out.extend_from_slice(&(self.stores.len() as u32).to_le_bytes());
        for a in &self.stores {
            let bytes = a.as_bytes();
            if bytes.len() > u16::MAX as usize {
                return Err(LabelError::TooLarge);
            }
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        if out.len() > LABEL_BYTES as usize || self.stores.len() > 64 {
            return Err(LabelError::TooLarge);
        }
        out.resize(LABEL_BYTES as usize, 0);
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<Label, LabelError> {
        if bytes.len() < 32 || &bytes[..8] != LABEL_MAGIC {
            return Err(LabelError::Missing);
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8"));
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4"));
        let n = u32_at(28) as usize;
        if n > 64 {
            return Err(LabelError::Damaged);
        }
        let mut at = 32;
        let mut stores = Vec::with_capacity(n);
        for _ in 0..n {
            if at + 2 > bytes.len() {
                return Err(LabelError::Damaged);
            }
            let len = u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
            at += 2;
            if at + len > bytes.len() {
                return Err(LabelError::Damaged);
            }
            let address =
                String::from_utf8(bytes[at..at + len].to_vec()).map_err(|_| LabelError::Damaged)?;
            stores.push(address);
            at += len;
        }
        // A label is one LABEL_BYTES area: contents running past it (only possible when more
        // bytes than the area are given) are not a label `encode` could have written.
        if at + 4 > bytes.len()
            || at + 4 > LABEL_BYTES as usize
            || u32_at(at) != crc32c::crc32c(&bytes[..at])
        {
            return Err(LabelError::Damaged);
        }
        Ok(Label {
            client: u64_at(8),
            volume: u64_at(16),
            n_way: u32_at(24),
            stores,
        })
    }
}
