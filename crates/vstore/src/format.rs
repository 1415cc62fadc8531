//! The on-disk format of a store, version 1 (specified in `docs/FORMATS.md`).
//!
//! ```text
//! file      = superblock slot A (4 KiB) | superblock slot B (4 KiB) | log (log_bytes)
//! log       = circular sequence of records, each a multiple of 512 bytes
//! record    = header (128 bytes) | payload (data records) | zero padding to 512 bytes
//! ```
//!
//! Superblocks alternate between the two slots with a rising generation, so a torn superblock
//! write leaves the other slot valid. Every integer is little-endian.

use thiserror::Error;

/// Records start and end on 512-byte boundaries (the sector size every device honours).
pub const RECORD_ALIGN: u64 = 512;
pub const HEADER_BYTES: usize = 128;
pub const SUPERBLOCK_SLOT_BYTES: u64 = 4096;
/// The log starts after the two superblock slots.
pub const LOG_OFFSET: u64 = 2 * SUPERBLOCK_SLOT_BYTES;
pub const FORMAT_VERSION: u8 = 1;

const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"CREC");
const SUPERBLOCK_MAGIC: &[u8; 8] = b"CDLSTORE";
const SUPERBLOCK_BYTES: usize = 100;

/// The largest payload of one record: bounds what a corrupt header can make a reader allocate.
pub const PAYLOAD_BYTES_MAX: u32 = 16 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Data = 1,
    Delete = 2,
    /// Fills the end of the log before the head wraps to its start.
    Wrap = 3,
}

/// A record header as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub kind: RecordKind,
    /// Position in the sequence of all records the store ever wrote.
    pub seq: u64,
    pub client: u64,
    pub volume: u64,
    pub offset_bytes: u64,
    pub length_bytes: u64,
    pub version: u64,
    pub payload_bytes: u32,
    /// Bytes the record occupies in the log, padding included.
    pub total_bytes: u32,
    pub epoch: u128,
    pub prev_epoch: u128,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("bad magic")]
    Magic,
    #[error("unsupported format version {0}")]
    Version(u8),
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("checksum mismatch")]
    Checksum,
    #[error("inconsistent sizes")]
    Sizes,
    #[error("too short")]
    Short,
}

/// Bytes a record with `payload_bytes` of payload occupies.
pub fn record_total_bytes(payload_bytes: u64) -> u64 {
    (HEADER_BYTES as u64 + payload_bytes).div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

impl RecordHeader {
    /// The whole record: header, payload and padding, with its checksum.
    /// A wrap record's `total_bytes` covers the rest of the log, but only its first 512 bytes
    /// are written.
    pub fn encode(&self, payload: &[u8]) -> Vec<u8> {
        let (mut out, zeros) = self.encode_header(payload);
        out.reserve(payload.len() + zeros);
        out.extend_from_slice(payload);
        out.resize(out.len() + zeros, 0);
        out
    }

    /// The record's header (with its checksum, which covers `payload`) and the number of
    /// zero bytes that pad header and payload to the record's written size: the record is
    /// the three back to back, so that a payload can be written where it lies, not copied.
    pub fn encode_header(&self, payload: &[u8]) -> (Vec<u8>, usize) {
        assert_eq!(payload.len(), self.payload_bytes as usize);
        let written = record_total_bytes(payload.len() as u64);
        if self.kind == RecordKind::Wrap {
            assert!(
                self.total_bytes as u64 >= written
                    && (self.total_bytes as u64).is_multiple_of(RECORD_ALIGN)
            );
        } else {
            assert_eq!(self.total_bytes as u64, written);
        }
        let mut h = vec![0u8; HEADER_BYTES];
        h[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        h[4] = FORMAT_VERSION;
        h[5] = self.kind as u8;
        h[8..16].copy_from_slice(&self.seq.to_le_bytes());
        h[16..24].copy_from_slice(&self.client.to_le_bytes());
        h[24..32].copy_from_slice(&self.volume.to_le_bytes());
        h[32..40].copy_from_slice(&self.offset_bytes.to_le_bytes());
        h[40..48].copy_from_slice(&self.length_bytes.to_le_bytes());
        h[48..56].copy_from_slice(&self.version.to_le_bytes());
        h[56..60].copy_from_slice(&self.payload_bytes.to_le_bytes());
        h[60..64].copy_from_slice(&self.total_bytes.to_le_bytes());
        h[64..80].copy_from_slice(&self.epoch.to_le_bytes());
        h[80..96].copy_from_slice(&self.prev_epoch.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..124]), payload);
        h[124..128].copy_from_slice(&crc.to_le_bytes());
        let zeros = written as usize - HEADER_BYTES - payload.len();
        (h, zeros)
    }

    /// Parses a header; the checksum covers the payload too, so it is checked by
    /// [`RecordHeader::verify`] once the payload is at hand.
    pub fn decode(bytes: &[u8]) -> Result<RecordHeader, FormatError> {
        let h = bytes.get(..HEADER_BYTES).ok_or(FormatError::Short)?;
        let u32_at = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap());
        let u128_at = |at: usize| u128::from_le_bytes(h[at..at + 16].try_into().unwrap());
        if u32_at(0) != RECORD_MAGIC {
            return Err(FormatError::Magic);
        }
        if h[4] != FORMAT_VERSION {
            return Err(FormatError::Version(h[4]));
        }
        let kind = match h[5] {
            1 => RecordKind::Data,
            2 => RecordKind::Delete,
            3 => RecordKind::Wrap,
            other => return Err(FormatError::Kind(other)),
        };
        let header = RecordHeader {
            kind,
            seq: u64_at(8),
            client: u64_at(16),
            volume: u64_at(24),
            offset_bytes: u64_at(32),
            length_bytes: u64_at(40),
            version: u64_at(48),
            payload_bytes: u32_at(56),
            total_bytes: u32_at(60),
            epoch: u128_at(64),
            prev_epoch: u128_at(80),
        };
        let sizes_ok = header.payload_bytes <= PAYLOAD_BYTES_MAX
            && header.total_bytes as u64 >= record_total_bytes(header.payload_bytes as u64)
            && (header.total_bytes as u64).is_multiple_of(RECORD_ALIGN)
            && match kind {
                RecordKind::Data => header.payload_bytes as u64 == header.length_bytes,
                RecordKind::Delete => header.payload_bytes == 0,
                RecordKind::Wrap => header.payload_bytes == 0,
            }
            && (kind == RecordKind::Wrap
                || header.total_bytes as u64 == record_total_bytes(header.payload_bytes as u64))
            && header
                .offset_bytes
                .checked_add(header.length_bytes)
                .is_some();
        if !sizes_ok {
            return Err(FormatError::Sizes);
        }
        Ok(header)
    }

    /// Checks the checksum of the header in `header_bytes` against `payload`.
    pub fn verify(header_bytes: &[u8], payload: &[u8]) -> Result<(), FormatError> {
        let h = header_bytes.get(..HEADER_BYTES).ok_or(FormatError::Short)?;
        let stored = u32::from_le_bytes(h[124..128].try_into().unwrap());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..124]), payload);
        if crc == stored {
            Ok(())
        } else {
            Err(FormatError::Checksum)
        }
    }
}

/// Superblocks of format 2 carry a fence table after the fixed part; format 1 (no table) is
/// still read.
pub const SUPERBLOCK_VERSION: u8 = 2;
/// Where the fence table starts: `u32 crc32c(count and entries) | u32 count | count × (u64
/// client, u64 generation)`, entries in ascending client order.
const FENCES_AT: usize = SUPERBLOCK_BYTES + 4;
/// The most clients one superblock slot can fence.
pub const FENCES_MAX: usize = (SUPERBLOCK_SLOT_BYTES as usize - FENCES_AT - 4) / 16;

/// What the superblock records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub store_id: u128,
    /// Rises with every superblock write; the valid slot with the highest wins.
    pub generation: u64,
    pub log_bytes: u64,
    /// Log position of the tail record (or of the next record, when the log is empty).
    pub tail: u64,
    /// Sequence number, epoch and previous epoch expected of the record at the tail.
    pub tail_seq: u64,
    pub tail_epoch: u128,
    pub tail_prev_epoch: u128,
    /// Each fenced client's lowest generation still accepted (see `Request::Metadata`), in
    /// ascending client order, at most [`FENCES_MAX`].
    pub fences: Vec<(u64, u64)>,
}

impl Superblock {
    /// The slot (0 or 1) this generation is written to.
    pub fn slot(&self) -> u64 {
        self.generation % 2
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; SUPERBLOCK_SLOT_BYTES as usize];
        assert!(self.fences.len() <= FENCES_MAX, "fence table overflow");
        out[0..8].copy_from_slice(SUPERBLOCK_MAGIC);
        out[8] = SUPERBLOCK_VERSION;
        out[16..32].copy_from_slice(&self.store_id.to_le_bytes());
        out[32..40].copy_from_slice(&self.generation.to_le_bytes());
        out[40..48].copy_from_slice(&self.log_bytes.to_le_bytes());
        out[48..56].copy_from_slice(&self.tail.to_le_bytes());
        out[56..64].copy_from_slice(&self.tail_seq.to_le_bytes());
        out[64..80].copy_from_slice(&self.tail_epoch.to_le_bytes());
        out[80..96].copy_from_slice(&self.tail_prev_epoch.to_le_bytes());
        let crc = crc32c::crc32c(&out[..96]);
        out[96..SUPERBLOCK_BYTES].copy_from_slice(&crc.to_le_bytes());
        let table = FENCES_AT + 4 + 16 * self.fences.len();
        out[FENCES_AT..FENCES_AT + 4].copy_from_slice(&(self.fences.len() as u32).to_le_bytes());
        for (i, (client, generation)) in self.fences.iter().enumerate() {
            let at = FENCES_AT + 4 + 16 * i;
            out[at..at + 8].copy_from_slice(&client.to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&generation.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out[FENCES_AT..table]);
        out[SUPERBLOCK_BYTES..FENCES_AT].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Superblock, FormatError> {
        let b = bytes.get(..SUPERBLOCK_BYTES).ok_or(FormatError::Short)?;
        if &b[0..8] != SUPERBLOCK_MAGIC {
            return Err(FormatError::Magic);
        }
        let stored = u32::from_le_bytes(b[96..100].try_into().unwrap());
        if crc32c::crc32c(&b[..96]) != stored {
            return Err(FormatError::Checksum);
        }
        if b[8] != FORMAT_VERSION && b[8] != SUPERBLOCK_VERSION {
            return Err(FormatError::Version(b[8]));
        }
        let fences = if b[8] == SUPERBLOCK_VERSION {
            Self::decode_fences(bytes)?
        } else {
            Vec::new()
        };
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let u128_at = |at: usize| u128::from_le_bytes(b[at..at + 16].try_into().unwrap());
        let sb = Superblock {
            store_id: u128_at(16),
            generation: u64_at(32),
            log_bytes: u64_at(40),
            tail: u64_at(48),
            tail_seq: u64_at(56),
            tail_epoch: u128_at(64),
            tail_prev_epoch: u128_at(80),
            fences,
        };
        if sb.log_bytes == 0
            || !sb.log_bytes.is_multiple_of(RECORD_ALIGN)
            || sb.tail >= sb.log_bytes
            || !sb.tail.is_multiple_of(RECORD_ALIGN)
        {
            return Err(FormatError::Sizes);
        }
        Ok(sb)
    }

    fn decode_fences(bytes: &[u8]) -> Result<Vec<(u64, u64)>, FormatError> {
        let head = bytes
            .get(SUPERBLOCK_BYTES..FENCES_AT + 4)
            .ok_or(FormatError::Short)?;
        let count = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
        if count > FENCES_MAX {
            return Err(FormatError::Sizes);
        }
        let table = bytes
            .get(FENCES_AT..FENCES_AT + 4 + 16 * count)
            .ok_or(FormatError::Short)?;
        let stored = u32::from_le_bytes(head[..4].try_into().unwrap());
        if crc32c::crc32c(table) != stored {
            return Err(FormatError::Checksum);
        }
        let u64_at = |at: usize| u64::from_le_bytes(table[at..at + 8].try_into().unwrap());
        let fences: Vec<(u64, u64)> = (0..count)
            .map(|i| (u64_at(4 + 16 * i), u64_at(12 + 16 * i)))
            .collect();
        if fences.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(FormatError::Sizes);
        }
        Ok(fences)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: RecordKind, payload: u32) -> RecordHeader {
        RecordHeader {
            kind,
            seq: 42,
            client: 7,
            volume: 3,
            offset_bytes: 4096,
            length_bytes: if kind == RecordKind::Data {
                payload as u64
            } else {
                8192
            },
            version: 9,
            payload_bytes: payload,
            total_bytes: record_total_bytes(payload as u64) as u32,
            epoch: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            prev_epoch: 0x99,
        }
    }

    #[test]
    fn records_round_trip_and_detect_damage() {
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let h = header(RecordKind::Data, 1000);
        let bytes = h.encode(&payload);
        assert_eq!(bytes.len(), 1536);
        assert_eq!(RecordHeader::decode(&bytes), Ok(h));
        assert_eq!(
            RecordHeader::verify(&bytes, &bytes[HEADER_BYTES..HEADER_BYTES + 1000]),
            Ok(())
        );
        for at in [0, 5, 9, 70, 130, 900] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            let ok = RecordHeader::decode(&bad).is_ok()
                && RecordHeader::verify(&bad, &bad[HEADER_BYTES..HEADER_BYTES + 1000]).is_ok();
            assert!(!ok, "flip at {at} undetected");
        }
        let d = header(RecordKind::Delete, 0);
        assert_eq!(RecordHeader::decode(&d.encode(&[])), Ok(d));
        assert_eq!(record_total_bytes(0), 512);
        assert_eq!(record_total_bytes(384), 512);
        assert_eq!(record_total_bytes(385), 1024);
    }

    #[test]
    fn a_record_in_parts_is_the_record_in_one_piece() {
        for payload_len in [0u32, 1, 383, 384, 385, 1000, 4096, 65536] {
            let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7) as u8).collect();
            let h = header(RecordKind::Data, payload_len);
            let whole = h.encode(&payload);
            let (head, zeros) = h.encode_header(&payload);
            assert_eq!(head.len(), HEADER_BYTES);
            assert_eq!(
                head.len() + payload.len() + zeros,
                record_total_bytes(payload_len as u64) as usize
            );
            assert!(zeros < RECORD_ALIGN as usize);
            // The header alone decodes, and its checksum covers the payload beside it.
            assert_eq!(RecordHeader::decode(&head), Ok(h));
            assert_eq!(RecordHeader::verify(&head, &payload), Ok(()));
            if !payload.is_empty() {
                let mut other = payload.clone();
                other[0] ^= 1;
                assert!(RecordHeader::verify(&head, &other).is_err());
            }
            // The one-piece record is the parts back to back, padded with zeros.
            assert_eq!(&whole[..HEADER_BYTES], &head[..]);
            assert_eq!(
                &whole[HEADER_BYTES..HEADER_BYTES + payload.len()],
                &payload[..]
            );
            assert!(whole[HEADER_BYTES + payload.len()..]
                .iter()
                .all(|&b| b == 0));
        }
    }

    #[test]
    fn write_bytes_are_their_parts_in_order() {
        use crate::store::WriteBytes;
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let h = header(RecordKind::Data, 1000);
        let (head, zeros) = h.encode_header(&payload);
        let parts = WriteBytes::record(head, payload.clone(), zeros);
        assert_eq!(parts.len(), 1536);
        assert_eq!(parts.slices().iter().map(|s| s.len()).sum::<usize>(), 1536);
        assert_eq!(parts.clone().into_vec(), h.encode(&payload));
        // Equal by bytes, whatever the parts.
        assert_eq!(parts, WriteBytes::from(h.encode(&payload)));
        assert_ne!(parts, WriteBytes::from(vec![0u8; 1536]));
        assert_ne!(parts, WriteBytes::from(h.encode(&payload)[..1535].to_vec()));
    }

    #[test]
    fn superblocks_round_trip_and_detect_damage() {
        let sb = Superblock {
            store_id: 5,
            generation: 3,
            log_bytes: 1 << 20,
            tail: 4096,
            tail_seq: 10,
            tail_epoch: 77,
            tail_prev_epoch: 76,
            fences: vec![(3, 9), (40, 2)],
        };
        let bytes = sb.encode();
        assert_eq!(Superblock::decode(&bytes), Ok(sb.clone()));
        assert_eq!(sb.slot(), 1);
        let mut bad = bytes.clone();
        bad[50] ^= 4;
        assert_eq!(Superblock::decode(&bad), Err(FormatError::Checksum));
        assert_eq!(Superblock::decode(&[0u8; 4096]), Err(FormatError::Magic));
        // A damaged fence table is caught by its own checksum; so is a table cut short.
        for at in [FENCES_AT + 4, FENCES_AT + 4 + 16 + 9] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert_eq!(
                Superblock::decode(&bad),
                Err(FormatError::Checksum),
                "byte {at}"
            );
        }
        assert_eq!(
            Superblock::decode(&bytes[..FENCES_AT + 4 + 16]),
            Err(FormatError::Short)
        );
        // A full table round-trips.
        let full = Superblock {
            fences: (0..FENCES_MAX as u64).map(|c| (c, c + 1)).collect(),
            ..sb.clone()
        };
        assert_eq!(Superblock::decode(&full.encode()), Ok(full));
        // Format 1 (no table) is still read, with no fences.
        let mut v1 = Superblock {
            fences: Vec::new(),
            ..sb
        }
        .encode();
        v1[8] = FORMAT_VERSION;
        let crc = crc32c::crc32c(&v1[..96]);
        v1[96..100].copy_from_slice(&crc.to_le_bytes());
        v1[100..].fill(0);
        assert_eq!(Superblock::decode(&v1).map(|s| s.fences), Ok(Vec::new()));
    }

    proptest::proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = RecordHeader::decode(&bytes);
            let _ = RecordHeader::verify(&bytes, &bytes);
            let _ = Superblock::decode(&bytes);
        }
    }
}
