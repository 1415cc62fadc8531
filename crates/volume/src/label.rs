//! The volume label in the last 4 KiB of an off-loading volume's base: which volume this is
//! and what it was formatted with (format: docs/FORMATS.md). Pure bytes, so that its decoder is
//! fuzzed (`fuzz/fuzz_targets/volume_label.rs`) without the daemons around it.

/// Bytes at the end of the base volume holding the [`Label`].
pub const LABEL_BYTES: u64 = 4096;

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

pub const LABEL_MAGIC: &[u8; 8] = b"CDVOLLB1";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_damage_is_detected() {
        let label = Label {
            client: 0x1234_5678_9abc,
            volume: 1,
            n_way: 2,
            stores: vec!["127.0.0.1:7001".into(), "store-b:7002".into()],
        };
        let bytes = label.encode().unwrap();
        assert_eq!(bytes.len() as u64, LABEL_BYTES);
        assert_eq!(Label::decode(&bytes).unwrap(), label);
        assert_eq!(
            Label::decode(&vec![0u8; 4096]).unwrap_err(),
            LabelError::Missing
        );
        for at in [8, 24, 30, 40, 50] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert_eq!(
                Label::decode(&bad).unwrap_err(),
                LabelError::Damaged,
                "{at}"
            );
        }
        let huge = Label {
            stores: vec!["x".repeat(5000)],
            ..label
        };
        assert_eq!(huge.encode().unwrap_err(), LabelError::TooLarge);
    }

    /// Found by the fuzz target: given more bytes than the label area, a checksummed label
    /// whose addresses run past the area decoded, and could not be encoded again.
    #[test]
    fn a_label_running_past_its_area_is_damaged() {
        let mut out = Vec::new();
        out.extend_from_slice(LABEL_MAGIC);
        out.extend_from_slice(&7u64.to_le_bytes());
        out.extend_from_slice(&1u64.to_le_bytes());
        out.extend_from_slice(&2u32.to_le_bytes());
        out.extend_from_slice(&2u32.to_le_bytes());
        for _ in 0..2 {
            out.extend_from_slice(&5000u16.to_le_bytes());
            out.extend_from_slice(&[b'a'; 5000]);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        assert!(out.len() > LABEL_BYTES as usize);
        assert_eq!(Label::decode(&out).unwrap_err(), LabelError::Damaged);
    }
}
