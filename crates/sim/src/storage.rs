//! What a simulated disk holds, and what a crash does to it (the fault model of
//! `docs/SIMULATION.md`):
//!
//! - a write is *unflushed* until a flush that was issued after it completes;
//! - reads see every completed write, flushed or not (the drive's cache serves them);
//! - on a crash, each unflushed write is independently kept whole, lost whole, or *torn*: a
//!   random subset of its 512-byte sectors reaches the media and the rest does not;
//! - flushed data is never lost or changed.
//!
//! Contents are stored by sector, only where written and not zero, and each only up to its last
//! byte that is not zero: other sectors and the rest of a sector read as zeros. A log record's
//! header in a sector of zero payload (the lab's replays) costs its header's bytes, not 512.

use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};

use crate::rng::SimRng;

pub const SECTOR_BYTES: u64 = 512;

/// Probabilities of the fates of an unflushed write at a crash (the rest: lost whole).
#[derive(Clone, Copy, Debug)]
pub struct CrashModel {
    pub kept: f64,
    pub torn: f64,
}

impl Default for CrashModel {
    fn default() -> CrashModel {
        CrashModel {
            kept: 0.3,
            torn: 0.3,
        }
    }
}

/// What a crash did to one unflushed write: reported so tests can tell injected damage from bugs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteFate {
    Kept,
    Lost,
    /// The sectors (indices within the write) that reached the media.
    Torn(Vec<u64>),
}

/// The durable sectors by number, each up to its last byte that is not zero (never empty).
/// Hashed by one multiplication (the keys are sector numbers, not chosen by anyone hostile):
/// SipHash was a tenth of a Sierra schedule's time.
type Sectors = std::collections::HashMap<u64, Box<[u8]>, BuildHasherDefault<SectorHasher>>;

/// A sector number's hash: its low bits are the number's own, so that consecutive sectors (a
/// write's, a read's) fall in neighbouring buckets of hashbrown's table (which indexes buckets
/// by the low bits), sharing cache lines; the top seven bits (hashbrown's tag, compared when
/// probing) mix every bit of the number by one multiplication. A Fibonacci hash of the whole
/// number scattered every sector of a write to its own cache line: the flush of a Sierra
/// schedule's writes was mostly misses.
#[derive(Default)]
struct SectorHasher(u64);

const TAG_BITS: u64 = 0xfe00_0000_0000_0000;

impl Hasher for SectorHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        let mixed = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (mixed & TAG_BITS) | (n & !TAG_BITS);
    }
}

#[derive(Clone, Debug)]
struct Unflushed {
    offset_bytes: u64,
    data: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
pub struct SimStorage {
    durable: Sectors,
    unflushed: Vec<Unflushed>,
}

impl SimStorage {
    pub fn new() -> SimStorage {
        SimStorage::default()
    }

    /// A write that completed. `offset` and the length must be sector-aligned.
    pub fn write(&mut self, offset_bytes: u64, data: &[u8]) {
        assert!(
            offset_bytes.is_multiple_of(SECTOR_BYTES)
                && (data.len() as u64).is_multiple_of(SECTOR_BYTES),
            "unaligned write"
        );
        if self.durable.is_empty() && self.unflushed.is_empty() && is_zero(data) {
            // Zeros over nothing: no read and no crash can tell it happened.
            return;
        }
        self.unflushed.push(Unflushed {
            offset_bytes,
            data: data.to_vec(),
        });
    }

    /// A flush completed: every write before it is durable.
    pub fn flush(&mut self) {
        for w in std::mem::take(&mut self.unflushed) {
            Self::apply(&mut self.durable, w.offset_bytes, &w.data, None);
        }
    }

    /// The current contents (durable, overlaid with unflushed writes in order).
    pub fn read(&self, offset_bytes: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let end = offset_bytes + len as u64;
        let first = offset_bytes / SECTOR_BYTES;
        let last = end.div_ceil(SECTOR_BYTES);
        for sector in first..last {
            if let Some(bytes) = self.durable.get(&sector) {
                copy_sector(&mut out, offset_bytes, sector, &bytes[..]);
            }
        }
        for w in &self.unflushed {
            let w_end = w.offset_bytes + w.data.len() as u64;
            if w_end <= offset_bytes || w.offset_bytes >= end {
                continue;
            }
            let from = w.offset_bytes.max(offset_bytes);
            let to = w_end.min(end);
            out[(from - offset_bytes) as usize..(to - offset_bytes) as usize].copy_from_slice(
                &w.data[(from - w.offset_bytes) as usize..(to - w.offset_bytes) as usize],
            );
        }
        out
    }

    /// Bytes of durable contents held in memory (each sector up to its last byte that is not
    /// zero).
    pub fn held_bytes(&self) -> u64 {
        self.durable.values().map(|b| b.len() as u64).sum()
    }

    /// Unflushed writes pending.
    pub fn unflushed(&self) -> usize {
        self.unflushed.len()
    }

    /// A crash: each unflushed write meets its fate, drawn from `rng`; returns the fates in
    /// write order.
    pub fn crash(&mut self, rng: &mut SimRng, model: CrashModel) -> Vec<WriteFate> {
        let mut fates = Vec::new();
        for w in std::mem::take(&mut self.unflushed) {
            let draw = rng.unit();
            let sectors = w.data.len() as u64 / SECTOR_BYTES;
            let fate = if draw < model.kept {
                Self::apply(&mut self.durable, w.offset_bytes, &w.data, None);
                WriteFate::Kept
            } else if draw < model.kept + model.torn && sectors > 0 {
                let kept: Vec<u64> = (0..sectors).filter(|_| rng.chance(0.5)).collect();
                Self::apply(&mut self.durable, w.offset_bytes, &w.data, Some(&kept));
                WriteFate::Torn(kept)
            } else {
                WriteFate::Lost
            };
            fates.push(fate);
        }
        fates
    }

    fn apply(durable: &mut Sectors, offset: u64, data: &[u8], only: Option<&[u64]>) {
        let first = offset / SECTOR_BYTES;
        if durable.is_empty() && only.is_none() && is_zero(data) {
            // Nothing kept, nothing to forget (the lab's zero-filled replays, mostly).
            return;
        }
        for (i, chunk) in data.chunks_exact(SECTOR_BYTES as usize).enumerate() {
            if only.is_some_and(|keep| !keep.contains(&(i as u64))) {
                continue;
            }
            // A sector of zeros reads the same as one never written: keep nothing for it, so
            // long replays of zero-filled data (the lab) cost memory only for what is not zero.
            let Some(last) = last_not_zero(chunk) else {
                durable.remove(&(first + i as u64));
                continue;
            };
            let kept = &chunk[..=last];
            match durable.entry(first + i as u64) {
                // An overwrite of the same length reuses the sector's buffer.
                Entry::Occupied(mut e) if e.get().len() == kept.len() => {
                    e.get_mut().copy_from_slice(kept)
                }
                Entry::Occupied(mut e) => *e.get_mut() = kept.into(),
                Entry::Vacant(e) => {
                    e.insert(kept.into());
                }
            }
        }
    }
}

/// Copies the held bytes of `sector` (its prefix up to the last byte not zero) that fall in
/// `out`, which starts at `offset` and is zero where nothing is copied.
fn copy_sector(out: &mut [u8], offset: u64, sector: u64, bytes: &[u8]) {
    let s_start = sector * SECTOR_BYTES;
    let from = s_start.max(offset);
    let to = (s_start + bytes.len() as u64).min(offset + out.len() as u64);
    if from >= to {
        return;
    }
    out[(from - offset) as usize..(to - offset) as usize]
        .copy_from_slice(&bytes[(from - s_start) as usize..(to - s_start) as usize]);
}

/// The index of the last byte of `data` that is not zero, a word at a time (most sectors of a
/// log end in zeros).
fn last_not_zero(data: &[u8]) -> Option<usize> {
    let (words, rest) = data.split_at(data.len() / 8 * 8);
    if let Some(i) = rest.iter().rposition(|&b| b != 0) {
        return Some(words.len() + i);
    }
    let word = words
        .chunks_exact(8)
        .rposition(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")) != 0)?;
    let at = word * 8;
    words[at..at + 8]
        .iter()
        .rposition(|&b| b != 0)
        .map(|i| at + i)
}

fn is_zero(data: &[u8]) -> bool {
    let (words, rest) = data.split_at(data.len() / 8 * 8);
    words
        .chunks_exact(8)
        .all(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")) == 0)
        && rest.iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_byte_not_zero_is_found_a_word_at_a_time() {
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 512] {
            assert_eq!(last_not_zero(&vec![0; len]), None, "{len} zeros");
            for at in 0..len {
                let mut data = vec![0; len];
                data[at] = 5;
                if at > 0 {
                    data[0] = 1;
                }
                assert_eq!(last_not_zero(&data), Some(at), "{len} bytes, {at}");
            }
        }
    }

    fn filled(byte: u8, sectors: usize) -> Vec<u8> {
        vec![byte; sectors * 512]
    }

    #[test]
    fn flushed_data_survives_every_crash() {
        for seed in 0..200 {
            let mut s = SimStorage::new();
            s.write(0, &filled(1, 8));
            s.flush();
            s.write(4096, &filled(2, 8));
            s.write(0, &filled(3, 2));
            let mut rng = SimRng::new(seed, 9);
            let fates = s.crash(&mut rng, CrashModel::default());
            assert_eq!(fates.len(), 2);
            assert_eq!(s.unflushed(), 0);
            let after = s.read(0, 8192);
            // Sectors 2..8 were only ever written by the flushed write.
            assert!(after[1024..4096].iter().all(|b| *b == 1), "seed {seed}");
            // Sectors 0..2: flushed 1s, or the unflushed 3s where that write reached the media.
            for sector in 0..2 {
                let bytes = &after[sector * 512..(sector + 1) * 512];
                let expected = match &fates[1] {
                    WriteFate::Kept => 3,
                    WriteFate::Lost => 1,
                    WriteFate::Torn(kept) => {
                        if kept.contains(&(sector as u64)) {
                            3
                        } else {
                            1
                        }
                    }
                };
                assert!(
                    bytes.iter().all(|b| *b == expected),
                    "seed {seed} sector {sector}"
                );
            }
            // Sectors of the second write: whole sectors of 2s or zeros, never a mixed sector.
            for sector in 8..16 {
                let bytes = &after[sector * 512..(sector + 1) * 512];
                assert!(
                    bytes.iter().all(|b| *b == 2) || bytes.iter().all(|b| *b == 0),
                    "torn within a sector"
                );
            }
        }
    }

    #[test]
    fn every_fate_occurs_and_reads_see_unflushed_writes() {
        let mut seen = [false; 3];
        for seed in 0..100 {
            let mut s = SimStorage::new();
            s.write(0, &filled(7, 4));
            assert_eq!(s.read(512, 1024), vec![7; 1024]);
            let mut rng = SimRng::new(seed, 1);
            match &s.crash(&mut rng, CrashModel::default())[0] {
                WriteFate::Kept => seen[0] = true,
                WriteFate::Lost => seen[1] = true,
                WriteFate::Torn(_) => seen[2] = true,
            }
        }
        assert_eq!(seen, [true; 3]);
        assert_eq!(SimStorage::new().read(100, 10), vec![0; 10]);
    }

    /// A sector is held up to its last byte that is not zero, reads back whole, and an
    /// overwrite of another length (or of zeros) replaces what was held.
    #[test]
    fn sectors_are_held_up_to_their_last_byte_that_is_not_zero() {
        let mut s = SimStorage::new();
        // A 128-byte header and zeros, then a sector all ones.
        let mut record = vec![0u8; 1024];
        record[..128].fill(9);
        record[512..].fill(1);
        s.write(4096, &record);
        s.flush();
        assert_eq!(s.held_bytes(), 128 + 512);
        assert_eq!(s.read(4096, 1024), record);
        // Reads that start or end inside the held prefix, or past it.
        assert_eq!(
            s.read(4096 + 100, 100),
            [&[9u8; 28][..], &[0u8; 72][..]].concat()
        );
        assert_eq!(s.read(4096 + 200, 300), vec![0; 300]);
        // Longer, shorter, then zero contents in the first sector.
        let mut longer = vec![0u8; 512];
        longer[..300].fill(5);
        s.write(4096, &longer);
        s.flush();
        assert_eq!(s.held_bytes(), 300 + 512);
        assert_eq!(s.read(4096, 512), longer);
        s.write(4096, &record[..512]);
        s.flush();
        assert_eq!(s.held_bytes(), 128 + 512);
        assert_eq!(s.read(4096, 512), record[..512].to_vec());
        s.write(4096, &[0u8; 512]);
        s.flush();
        assert_eq!(s.held_bytes(), 512);
        assert_eq!(
            s.read(4096, 1024),
            [&[0u8; 512][..], &[1u8; 512][..]].concat()
        );
        // A torn write keeps trimmed sectors as well.
        for seed in 0..20 {
            let mut t = SimStorage::new();
            t.write(0, &record);
            let fates = t.crash(&mut SimRng::new(seed, 3), CrashModel::default());
            let expected: Vec<u8> = match &fates[0] {
                WriteFate::Kept => record.clone(),
                WriteFate::Lost => vec![0; 1024],
                WriteFate::Torn(kept) => (0..2u64)
                    .flat_map(|i| {
                        let sector = &record[i as usize * 512..(i as usize + 1) * 512];
                        if kept.contains(&i) {
                            sector.to_vec()
                        } else {
                            vec![0; 512]
                        }
                    })
                    .collect(),
            };
            assert_eq!(t.read(0, 1024), expected, "seed {seed}");
        }
    }
}
