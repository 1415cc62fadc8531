//! The MDS's state as a journal of batches, for a store that keeps values rather than tables
//! (etcd, `docs/FORMATS.md`, "MDS journal"): each step's [`Changes`] is one batch, and a
//! snapshot is the whole state as batches of changes that build it from nothing.
//!
//! ```text
//! batch   := "CDJ1" entry* crc32c(everything before, u32 LE)
//! entry   := 1 group:u32 record:bytes        a group's record (GroupRecord)
//!          | 2 object:u64 record:bytes       an object's record (ObjectRecord)
//!          | 3 object:u64                    an object deleted
//!          | 4 chunk:u64 place:u64           a chunk's group | slot << 32
//!          | 5 server:u32 record:bytes       a server's record (ServerRecord)
//!          | 6 rng:u64                       the MDS's random state
//! bytes   := length:u32 byte*                (integers little-endian)
//! ```
//!
//! Entries come in the order of their kinds (objects' 2 and 3 as one kind, in the order
//! taken), at most one rng: so a batch decodes to one [`Changes`] and encodes back to the same
//! bytes. Anything else — a bad magic, a kind out of order, a record that does not decode,
//! truncation, a checksum that does not match — is an error naming it.

use cordillera_gears::mds::persist::{
    chunk_from_u64, chunk_to_u64, Changes, GroupRecord, ObjectRecord, ServerRecord, Snapshot,
};
use cordillera_gears::model::ObjectId;

use crate::codec::{Reader, Writer};

const MAGIC: &[u8; 4] = b"CDJ1";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("not an MDS journal batch (magic {0:02x?})")]
    Magic(Vec<u8>),
    #[error("MDS journal batch truncated ({0})")]
    Truncated(&'static str),
    #[error("MDS journal batch checksum {found:08x}, computed {computed:08x}")]
    Checksum { found: u32, computed: u32 },
    #[error("MDS journal batch malformed: {0}")]
    Malformed(String),
}

/// One batch's bytes.
pub fn encode_batch(changes: &Changes) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let mut w = Writer(&mut out);
    for (g, r) in &changes.groups {
        w.u8(1);
        w.u32(*g);
        w.bytes(&r.encode());
    }
    for (o, r) in &changes.objects {
        match r {
            Some(r) => {
                w.u8(2);
                w.u64(o.0);
                w.bytes(&r.encode());
            }
            None => {
                w.u8(3);
                w.u64(o.0);
            }
        }
    }
    for &(c, place) in &changes.chunks {
        w.u8(4);
        w.u64(c);
        w.u64(chunk_to_u64(place));
    }
    for (s, r) in &changes.servers {
        w.u8(5);
        w.u32(*s);
        w.bytes(&r.encode());
    }
    if let Some(rng) = changes.rng {
        w.u8(6);
        w.u64(rng);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The changes of one batch.
pub fn decode_batch(bytes: &[u8]) -> Result<Changes, JournalError> {
    if bytes.len() < MAGIC.len() + 4 {
        return Err(JournalError::Truncated(
            "shorter than its magic and checksum",
        ));
    }
    if &bytes[..4] != MAGIC {
        return Err(JournalError::Magic(bytes[..4].to_vec()));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let found = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(body);
    if found != computed {
        return Err(JournalError::Checksum { found, computed });
    }
    let mut r = Reader(&body[4..]);
    let mut changes = Changes::default();
    let mut last_rank = 0;
    let truncated = |m: crate::codec::Malformed| JournalError::Truncated(m.0);
    let bad =
        |what: &str, e: &dyn std::fmt::Display| JournalError::Malformed(format!("{what}: {e}"));
    while !r.0.is_empty() {
        let kind = r.u8("kind").map_err(truncated)?;
        // Objects set and deleted share a rank: they keep the order they were taken in.
        let rank = match kind {
            1 => 1,
            2 | 3 => 2,
            4 => 3,
            5 => 4,
            6 => 5,
            k => return Err(JournalError::Malformed(format!("entry kind {k}"))),
        };
        if rank < last_rank || (rank == 5 && last_rank == 5) {
            return Err(JournalError::Malformed(format!(
                "entry kind {kind} out of order"
            )));
        }
        last_rank = rank;
        match kind {
            1 => {
                let g = r.u32("group").map_err(truncated)?;
                let b = r.bytes("group record").map_err(truncated)?;
                let rec = GroupRecord::decode(&b).map_err(|e| bad("group record", &e))?;
                changes.groups.push((g, rec));
            }
            2 => {
                let o = r.u64("object").map_err(truncated)?;
                let b = r.bytes("object record").map_err(truncated)?;
                let rec = ObjectRecord::decode(&b).map_err(|e| bad("object record", &e))?;
                changes.objects.push((ObjectId(o), Some(rec)));
            }
            3 => {
                let o = r.u64("object").map_err(truncated)?;
                changes.objects.push((ObjectId(o), None));
            }
            4 => {
                let c = r.u64("chunk").map_err(truncated)?;
                let place = r.u64("chunk place").map_err(truncated)?;
                changes.chunks.push((c, chunk_from_u64(place)));
            }
            5 => {
                let s = r.u32("server").map_err(truncated)?;
                let b = r.bytes("server record").map_err(truncated)?;
                let rec = ServerRecord::decode(&b).map_err(|e| bad("server record", &e))?;
                changes.servers.push((s, rec));
            }
            _ => changes.rng = Some(r.u64("rng").map_err(truncated)?),
        }
    }
    Ok(changes)
}

/// The whole state as batches of about `part_bytes` each (at least one entry each) that,
/// applied in order to an empty snapshot, rebuild it.
pub fn snapshot_batches(s: &Snapshot, part_bytes: usize) -> Vec<Vec<u8>> {
    let mut parts = Vec::new();
    let mut part = Changes::default();
    let mut size = 0usize;
    let mut push = |part: &mut Changes, size: &mut usize, add: usize| {
        *size += add;
        if *size >= part_bytes {
            parts.push(encode_batch(part));
            *part = Changes::default();
            *size = 0;
        }
    };
    for (g, r) in s.groups.iter().enumerate() {
        let n = r.encode().len() + 9;
        part.groups.push((g as u32, r.clone()));
        push(&mut part, &mut size, n);
    }
    for (o, r) in &s.objects {
        let n = r.encode().len() + 13;
        part.objects.push((*o, Some(*r)));
        push(&mut part, &mut size, n);
    }
    for (c, place) in s.chunks.iter().enumerate() {
        part.chunks.push((c as u64, *place));
        push(&mut part, &mut size, 17);
    }
    for (i, r) in s.servers.iter().enumerate() {
        let n = r.encode().len() + 9;
        part.servers.push((i as u32, *r));
        push(&mut part, &mut size, n);
    }
    part.rng = Some(s.rng);
    parts.push(encode_batch(&part));
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_gears::mds::ServerState;

    fn sample() -> Snapshot {
        let group = GroupRecord {
            replicas: vec![0, 1, 2],
            primary: Some(1),
            epoch: 7,
            superblock: Some(vec![1, 2, 3]),
            next_slot: 4,
            rebuilding: None,
        };
        let mut s = Snapshot {
            groups: vec![group.clone(), GroupRecord { epoch: 9, ..group }],
            chunks: (0..1000).map(|c| (c % 2, c / 2)).collect(),
            servers: vec![
                ServerRecord {
                    state: ServerState::Up,
                    wanted_off: false,
                    incarnation: Some(3),
                };
                3
            ],
            rng: 42,
            ..Snapshot::default()
        };
        s.objects.insert(
            ObjectId(5),
            ObjectRecord {
                first_chunk: 0,
                chunk_count: 1000,
                size_bytes: 1 << 30,
            },
        );
        s
    }

    #[test]
    fn batches_round_trip_and_snapshots_rebuild() {
        let s = sample();
        for part_bytes in [1, 100, 1 << 20] {
            let parts = snapshot_batches(&s, part_bytes);
            assert!(parts.len() > 1 || part_bytes == 1 << 20);
            let mut rebuilt = Snapshot::default();
            for p in &parts {
                let changes = decode_batch(p).unwrap();
                assert_eq!(&encode_batch(&changes), p);
                rebuilt.apply(&changes).unwrap();
            }
            assert_eq!(rebuilt, s, "parts of {part_bytes} bytes");
        }
        let step = Changes {
            objects: vec![
                (ObjectId(1), None),
                (ObjectId(2), Some(s.objects[&ObjectId(5)])),
                (ObjectId(1), None),
            ],
            chunks: vec![(3, (1, 9))],
            ..Changes::default()
        };
        assert_eq!(decode_batch(&encode_batch(&step)).unwrap(), step);
        assert_eq!(
            decode_batch(&encode_batch(&Changes::default())).unwrap(),
            Changes::default()
        );
    }

    #[test]
    fn damaged_batches_are_refused() {
        let good = encode_batch(&Changes {
            chunks: vec![(3, (1, 9))],
            rng: Some(1),
            ..Changes::default()
        });
        for cut in 0..good.len() {
            assert!(decode_batch(&good[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            assert!(decode_batch(&bad).is_err(), "bit flipped at {at}");
        }
        // Well-formed entries out of order, with a good checksum, are refused too.
        let mut swapped = MAGIC.to_vec();
        let mut w = Writer(&mut swapped);
        w.u8(6);
        w.u64(1);
        w.u8(4);
        w.u64(3);
        w.u64(1);
        let crc = crc32c::crc32c(&swapped);
        swapped.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            decode_batch(&swapped),
            Err(JournalError::Malformed(m)) if m.contains("out of order")
        ));
    }
}
