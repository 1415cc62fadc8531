//! What a simulated disk holds, and what a crash does to it (the fault model of
//! `docs/SIMULATION.md`):
//!
//! - a write is *unflushed* until a flush that was issued after it completes;
//! - reads see every completed write, flushed or not (the drive's cache serves them);
//! - on a crash, each unflushed write is independently kept whole, lost whole, or *torn*: a
//!   random subset of its 512-byte sectors reaches the media and the rest does not;
//! - flushed data is never lost or changed.
//!
//! Durable contents are held as *pieces*: runs of sectors that never overlap, each holding its
//! bytes only up to its last byte that is not zero (the rest, and every sector in no piece,
//! reads as zeros). A write becomes one piece, its buffer moved, not copied, when that costs at
//! most twice the bytes that are not zero; a sparse one (a log record's header in sectors of
//! zero payload, the lab's replays) becomes a piece per sector that is not zero, each up to its
//! last byte that is not zero, so it costs its headers' bytes, not its length.

use std::collections::BTreeMap;

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

/// A run of durable sectors: `sectors` long from the sector it is keyed by, holding `bytes`, its
/// contents up to its last byte that is not zero (never empty; the rest reads as zeros).
#[derive(Clone, Debug)]
struct Piece {
    sectors: u64,
    bytes: Vec<u8>,
}

/// The durable pieces by first sector; no two overlap.
type Pieces = BTreeMap<u64, Piece>;

#[derive(Clone, Debug)]
struct Unflushed {
    offset_bytes: u64,
    data: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
pub struct SimStorage {
    durable: Pieces,
    unflushed: Vec<Unflushed>,
}

impl SimStorage {
    pub fn new() -> SimStorage {
        SimStorage::default()
    }

    /// A write that completed. `offset` and the length must be sector-aligned.
    pub fn write(&mut self, offset_bytes: u64, data: &[u8]) {
        if self.ignorable(offset_bytes, data) {
            return;
        }
        self.unflushed.push(Unflushed {
            offset_bytes,
            data: data.to_vec(),
        });
    }

    /// [`SimStorage::write`] of a buffer the caller gives up (not copied).
    pub fn write_vec(&mut self, offset_bytes: u64, data: Vec<u8>) {
        if self.ignorable(offset_bytes, &data) {
            return;
        }
        self.unflushed.push(Unflushed { offset_bytes, data });
    }

    /// Checks alignment; true for zeros over nothing, which no read and no crash can tell
    /// happened.
    fn ignorable(&self, offset_bytes: u64, data: &[u8]) -> bool {
        assert!(
            offset_bytes.is_multiple_of(SECTOR_BYTES)
                && (data.len() as u64).is_multiple_of(SECTOR_BYTES),
            "unaligned write"
        );
        self.durable.is_empty() && self.unflushed.is_empty() && is_zero(data)
    }

    /// A flush completed: every write before it is durable.
    pub fn flush(&mut self) {
        for w in std::mem::take(&mut self.unflushed) {
            apply(&mut self.durable, w.offset_bytes / SECTOR_BYTES, w.data);
        }
    }

    /// The current contents (durable, overlaid with unflushed writes in order).
    pub fn read(&self, offset_bytes: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let end = offset_bytes + len as u64;
        let first = offset_bytes / SECTOR_BYTES;
        let last = end.div_ceil(SECTOR_BYTES);
        let before = self.durable.range(..first).next_back();
        for (&start, piece) in before.into_iter().chain(self.durable.range(first..last)) {
            copy_piece(&mut out, offset_bytes, start, &piece.bytes);
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

    /// Whether `expected.len()` bytes at `offset_bytes` read as `expected` (what
    /// [`SimStorage::read`] would return), compared where they lie: no buffer, no copy.
    pub fn holds(&self, offset_bytes: u64, expected: &[u8]) -> bool {
        let end = offset_bytes + expected.len() as u64;
        let at = |byte: u64| (byte - offset_bytes) as usize;
        // The parts no newer unflushed write covers, newest writes first.
        let mut open = vec![(offset_bytes, end)];
        let mut rest = Vec::new();
        for w in self.unflushed.iter().rev() {
            let (w_start, w_end) = (w.offset_bytes, w.offset_bytes + w.data.len() as u64);
            if w_end <= offset_bytes || w_start >= end {
                continue;
            }
            rest.clear();
            for &(a, b) in &open {
                let (from, to) = (a.max(w_start), b.min(w_end));
                if from >= to {
                    rest.push((a, b));
                    continue;
                }
                let theirs = &w.data[(from - w_start) as usize..(to - w_start) as usize];
                if expected[at(from)..at(to)] != *theirs {
                    return false;
                }
                if a < from {
                    rest.push((a, from));
                }
                if to < b {
                    rest.push((to, b));
                }
            }
            std::mem::swap(&mut open, &mut rest);
            if open.is_empty() {
                return true;
            }
        }
        open.into_iter()
            .all(|(a, b)| self.durable_holds(a, &expected[at(a)..at(b)]))
    }

    /// [`SimStorage::holds`] of the durable contents alone.
    fn durable_holds(&self, offset_bytes: u64, expected: &[u8]) -> bool {
        let end = offset_bytes + expected.len() as u64;
        let at = |byte: u64| (byte - offset_bytes) as usize;
        let first = offset_bytes / SECTOR_BYTES;
        let last = end.div_ceil(SECTOR_BYTES);
        let before = self.durable.range(..first).next_back();
        // Bytes before `matched` read as expected.
        let mut matched = offset_bytes;
        for (&start, piece) in before.into_iter().chain(self.durable.range(first..last)) {
            let p_start = start * SECTOR_BYTES;
            let from = p_start.max(offset_bytes);
            let to = (p_start + piece.sectors * SECTOR_BYTES).min(end);
            if from >= to {
                continue;
            }
            let held = (p_start + piece.bytes.len() as u64).clamp(from, to);
            if !is_zero(&expected[at(matched)..at(from)])
                || (from < held
                    && expected[at(from)..at(held)]
                        != piece.bytes[(from - p_start) as usize..(held - p_start) as usize])
                || !is_zero(&expected[at(held)..at(to)])
            {
                return false;
            }
            matched = to;
        }
        is_zero(&expected[at(matched)..])
    }

    /// Bytes of durable contents held in memory (each piece up to its last byte that is not
    /// zero).
    pub fn held_bytes(&self) -> u64 {
        self.durable.values().map(|p| p.bytes.len() as u64).sum()
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
            let first = w.offset_bytes / SECTOR_BYTES;
            let fate = if draw < model.kept {
                apply(&mut self.durable, first, w.data);
                WriteFate::Kept
            } else if draw < model.kept + model.torn && sectors > 0 {
                let kept: Vec<u64> = (0..sectors).filter(|_| rng.chance(0.5)).collect();
                // Runs of consecutive kept sectors, each applied as a write of its own.
                let mut i = 0;
                while i < kept.len() {
                    let mut j = i + 1;
                    while j < kept.len() && kept[j] == kept[j - 1] + 1 {
                        j += 1;
                    }
                    let (lo, hi) = (kept[i], kept[j - 1] + 1);
                    let run = &w.data[(lo * SECTOR_BYTES) as usize..(hi * SECTOR_BYTES) as usize];
                    apply(&mut self.durable, first + lo, run.to_vec());
                    i = j;
                }
                WriteFate::Torn(kept)
            } else {
                WriteFate::Lost
            };
            fates.push(fate);
        }
        fates
    }
}

/// Makes `data` the durable contents of the sectors from `first`: the pieces it overlaps are
/// cut back, then it becomes one piece or, if sparse, a piece per sector that is not zero.
fn apply(durable: &mut Pieces, first: u64, mut data: Vec<u8>) {
    let sectors = data.len() as u64 / SECTOR_BYTES;
    if sectors == 0 {
        return;
    }
    if durable.is_empty() && is_zero(&data) {
        // Nothing kept, nothing to forget (the lab's zero-filled replays, mostly).
        return;
    }
    cut(durable, first, first + sectors);
    let sector = SECTOR_BYTES as usize;
    // Bytes held if each sector were a piece of its own, and up to the last byte not zero.
    let mut per_sector = 0;
    let mut whole = 0;
    for (i, chunk) in data.chunks_exact(sector).enumerate() {
        if let Some(last) = last_not_zero(chunk) {
            per_sector += last + 1;
            whole = i * sector + last + 1;
        }
    }
    if whole == 0 {
        return;
    }
    if whole <= 2 * per_sector {
        data.truncate(whole);
        if data.capacity() > 2 * whole {
            data.shrink_to_fit();
        }
        durable.insert(
            first,
            Piece {
                sectors,
                bytes: data,
            },
        );
        return;
    }
    for (i, chunk) in data.chunks_exact(sector).enumerate() {
        if let Some(last) = last_not_zero(chunk) {
            durable.insert(
                first + i as u64,
                Piece {
                    sectors: 1,
                    bytes: chunk[..=last].to_vec(),
                },
            );
        }
    }
}

/// Removes the sectors `lo..hi` from the pieces: those inside go, one that starts before keeps
/// its head, one that ends after keeps its tail (a piece of its own from `hi`).
fn cut(durable: &mut Pieces, lo: u64, hi: u64) {
    let sector = SECTOR_BYTES as usize;
    let mut tail = None;
    if let Some((&start, piece)) = durable.range_mut(..lo).next_back() {
        let end = start + piece.sectors;
        if end > lo {
            if end > hi {
                tail = split_off(piece, start, hi);
            }
            piece.sectors = lo - start;
            piece.bytes.truncate((lo - start) as usize * sector);
            match last_not_zero(&piece.bytes) {
                Some(last) => piece.bytes.truncate(last + 1),
                None => {
                    durable.remove(&start);
                }
            }
        }
    }
    let inside: Vec<u64> = durable.range(lo..hi).map(|(&start, _)| start).collect();
    for start in inside {
        let mut piece = durable.remove(&start).expect("a piece inside");
        if start + piece.sectors > hi {
            tail = split_off(&mut piece, start, hi);
        }
    }
    if let Some((at, piece)) = tail {
        durable.insert(at, piece);
    }
}

/// The part of `piece` (starting at sector `start`) from sector `at` on, as a piece of its own
/// (none if it holds nothing there).
fn split_off(piece: &mut Piece, start: u64, at: u64) -> Option<(u64, Piece)> {
    let from = (at - start) as usize * SECTOR_BYTES as usize;
    let sectors = start + piece.sectors - at;
    (piece.bytes.len() > from).then(|| {
        (
            at,
            Piece {
                sectors,
                bytes: piece.bytes[from..].to_vec(),
            },
        )
    })
}

/// Copies the held bytes of the piece starting at sector `start` that fall in `out`, which
/// starts at `offset` and is zero where nothing is copied.
fn copy_piece(out: &mut [u8], offset: u64, start: u64, bytes: &[u8]) {
    let s_start = start * SECTOR_BYTES;
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

    /// `holds` answers as comparing `read`'s bytes would: over ranges that start and end
    /// inside pieces, between them, on sector edges and not, with unflushed writes over some,
    /// and writes and flushes between the questions.
    #[test]
    fn holds_agrees_with_read() {
        for seed in 0..300 {
            let mut rng = SimRng::new(seed, 5);
            let mut s = SimStorage::new();
            for _ in 0..1 + rng.below(6) {
                let sectors = 1 + rng.below(6) as usize;
                let mut data = vec![0u8; sectors * 512];
                // Dense, sparse (a header in zeros) or all zeros.
                match rng.below(3) {
                    0 => data.fill(1 + rng.below(200) as u8),
                    1 => data[..1 + rng.below(sectors as u64 * 512 - 1) as usize].fill(7),
                    _ => {}
                }
                s.write(rng.below(24) * 512, &data);
                if rng.chance(0.6) {
                    s.flush();
                }
            }
            for _ in 0..40 {
                // Now and then a write or a flush between two questions.
                if rng.chance(0.1) {
                    let data = vec![1 + rng.below(200) as u8; 512 * (1 + rng.below(4) as usize)];
                    s.write(rng.below(24) * 512, &data);
                } else if rng.chance(0.03) {
                    s.flush();
                }
                let offset = rng.below(16_000);
                let len = rng.below(5_000) as usize;
                let actual = s.read(offset, len);
                assert!(s.holds(offset, &actual), "seed {seed}: {offset}+{len}");
                if len > 0 {
                    let mut other = actual.clone();
                    let i = rng.below(len as u64) as usize;
                    other[i] ^= 1 << rng.below(8);
                    assert!(
                        !s.holds(offset, &other),
                        "seed {seed}: {offset}+{len}, byte {i}"
                    );
                }
            }
        }
    }

    /// A piece is held up to its last byte that is not zero, reads back whole, and an
    /// overwrite of another length (or of zeros) replaces what was held; a sparse write is held
    /// sector by sector.
    #[test]
    fn sectors_are_held_up_to_their_last_byte_that_is_not_zero() {
        let mut s = SimStorage::new();
        // A 128-byte header and zeros, then a sector all ones: dense enough for one piece.
        let mut record = vec![0u8; 1024];
        record[..128].fill(9);
        record[512..].fill(1);
        s.write(4096, &record);
        s.flush();
        assert_eq!(s.held_bytes(), 1024);
        assert_eq!(s.read(4096, 1024), record);
        // Sparse: a 64-byte header at the start of each of 16 sectors (a batch of records of
        // zero payload) is held as 16 pieces of 64 bytes, not 7.5 KiB.
        let mut sparse = SimStorage::new();
        let mut batch = vec![0u8; 16 * 512];
        for i in 0..16 {
            batch[i * 512..i * 512 + 64].fill(i as u8 + 1);
        }
        sparse.write(0, &batch);
        sparse.flush();
        assert_eq!(sparse.held_bytes(), 16 * 64);
        assert_eq!(sparse.read(0, batch.len()), batch);
        // One header and zeros after it: one piece of the header's bytes.
        let mut one = SimStorage::new();
        one.write(
            0,
            &batch[..8 * 512]
                .iter()
                .enumerate()
                .map(|(i, &b)| if i < 512 { b } else { 0 })
                .collect::<Vec<u8>>(),
        );
        one.flush();
        assert_eq!(one.held_bytes(), 64);
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

    /// The contents by sector, as simply as possible: what the pieces must always read as.
    #[derive(Default)]
    struct Model {
        durable: std::collections::BTreeMap<u64, Vec<u8>>,
        unflushed: Vec<(u64, Vec<u8>)>,
    }

    impl Model {
        fn put(&mut self, offset: u64, data: &[u8], only: Option<&[u64]>) {
            for (i, chunk) in data.chunks_exact(512).enumerate() {
                if only.is_none_or(|keep| keep.contains(&(i as u64))) {
                    self.durable.insert(offset / 512 + i as u64, chunk.to_vec());
                }
            }
        }

        fn read(&self, offset: u64, len: usize) -> Vec<u8> {
            let mut image: Vec<u8> = (offset / 512..(offset + len as u64).div_ceil(512))
                .flat_map(|s| self.durable.get(&s).cloned().unwrap_or(vec![0; 512]))
                .collect();
            let base = offset / 512 * 512;
            for (at, data) in &self.unflushed {
                for (i, &b) in data.iter().enumerate() {
                    let p = at + i as u64;
                    if p >= base && p < base + image.len() as u64 {
                        image[(p - base) as usize] = b;
                    }
                }
            }
            image[(offset - base) as usize..][..len].to_vec()
        }
    }

    /// Random writes (dense, sparse, zeros; overlapping, inside and across pieces), flushes,
    /// crashes with every fate, and reads: the pieces read as the model does, byte for byte, and
    /// both draw the same fates.
    #[test]
    fn pieces_read_as_sectors_would_through_writes_flushes_and_crashes() {
        for seed in 0..300 {
            let mut rng = SimRng::new(seed, 11);
            let mut s = SimStorage::new();
            let mut m = Model::default();
            for step in 0..60 {
                match rng.below(10) {
                    0..=5 => {
                        let sector = rng.below(48);
                        let sectors = 1 + rng.below(16);
                        let mut data = vec![0u8; sectors as usize * 512];
                        match rng.below(4) {
                            0 => {}
                            1 => data.iter_mut().for_each(|b| *b = rng.below(256) as u8),
                            2 => {
                                for c in data.chunks_mut(512) {
                                    let n = rng.below(80) as usize;
                                    c[..n].fill(1 + rng.below(255) as u8);
                                }
                            }
                            _ => {
                                let at = rng.below(data.len() as u64) as usize;
                                data[at] = 1 + rng.below(255) as u8;
                            }
                        }
                        if rng.chance(0.5) {
                            s.write(sector * 512, &data);
                        } else {
                            s.write_vec(sector * 512, data.clone());
                        }
                        // Zeros over nothing are not kept (SimStorage::write).
                        let nothing =
                            m.unflushed.is_empty() && m.durable.values().all(|d| is_zero(d));
                        if !(nothing && is_zero(&data)) {
                            m.unflushed.push((sector * 512, data));
                        }
                    }
                    6 | 7 => {
                        s.flush();
                        for (at, data) in std::mem::take(&mut m.unflushed) {
                            m.put(at, &data, None);
                        }
                    }
                    8 => {
                        let crash_seed = rng.next_u64();
                        let fates = s.crash(&mut SimRng::new(crash_seed, 1), CrashModel::default());
                        let writes = std::mem::take(&mut m.unflushed);
                        assert_eq!(fates.len(), writes.len(), "seed {seed} step {step}");
                        for ((at, data), fate) in writes.iter().zip(&fates) {
                            match fate {
                                WriteFate::Kept => m.put(*at, data, None),
                                WriteFate::Torn(kept) => m.put(*at, data, Some(kept)),
                                WriteFate::Lost => {}
                            }
                        }
                    }
                    _ => {}
                }
                let offset = rng.below(64 * 512);
                let len = 1 + rng.below(12 * 512) as usize;
                assert_eq!(
                    s.read(offset, len),
                    m.read(offset, len),
                    "seed {seed} step {step}"
                );
                assert_eq!(
                    s.read(0, 70 * 512),
                    m.read(0, 70 * 512),
                    "seed {seed} step {step}"
                );
            }
        }
    }
}
