//! An array made of member devices (software RAID), as a sans-I/O core: where the bytes of the
//! array's logical device are on its members, and the parity of a RAID-5 row write.
//!
//! Layouts are the simulator's (`cordillera_models::device::raid::Layout`): RAID-0 stripes units
//! over the members; RAID-1 copies every unit to every member; RAID-10 stripes over mirrored
//! pairs; RAID-5 is left-symmetric (row `r`'s parity on member `n − 1 − r mod n`, its data
//! units on the members after it). The runtime reads and writes what these functions say, one
//! row at a time under that row's lock, and computes parity with [`parity_update`] and
//! [`parity_full`]. Parity is written after the row's data: a crash between the two leaves a
//! stale parity (RAID-5's write hole), which matters only to reconstruction after a member is
//! lost — reads never use parity here.

use cordillera_models::device::raid::{Layout, RaidLevel};

pub mod array;
pub mod journal;
pub mod label;

/// A piece of a logical range on one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub member: usize,
    pub member_offset: u64,
    /// Byte of the array's logical device.
    pub lun_offset: u64,
    pub length: u64,
}

/// A logical range's piece within one unit: its row, the bytes `[within, within + length)` of
/// the unit, and the members holding them (data first, then copies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitPlace {
    pub row: u64,
    pub within: u64,
    pub length: u64,
    pub lun_offset: u64,
    pub members: Vec<usize>,
}

/// The writes of one row (stripe) of a logical write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowWrite {
    pub row: u64,
    /// The data, and (RAID-1, RAID-10) its other copies, each a piece of the same bytes.
    pub data: Vec<Piece>,
    pub copies: Vec<Piece>,
    /// RAID-5: the parity bytes to rewrite: member, and the range within the unit.
    pub parity: Option<Parity>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parity {
    pub member: usize,
    /// Byte range within the row's units `[lo, hi)`; on the member at `row · unit + lo`.
    pub lo: u64,
    pub hi: u64,
    /// Every data unit of the row is written whole: parity is their XOR, nothing read.
    pub full: bool,
}

#[derive(Clone, Debug)]
pub struct Members {
    layout: Layout,
}

impl Members {
    pub fn new(
        level: RaidLevel,
        disks: usize,
        unit: u64,
        disk_bytes: u64,
    ) -> Result<Members, String> {
        Ok(Members {
            layout: Layout::new(level, disks, unit, disk_bytes)?,
        })
    }

    pub fn level(&self) -> RaidLevel {
        self.layout.level
    }

    pub fn disks(&self) -> usize {
        self.layout.disks
    }

    pub fn unit(&self) -> u64 {
        self.layout.stripe_unit_bytes
    }

    /// Bytes of the logical device (whole rows).
    pub fn lun_bytes(&self) -> u64 {
        self.layout.capacity_bytes()
    }

    /// Logical unit `c`: its row and the members holding it (the first is the one read).
    fn place(&self, c: u64) -> (u64, Vec<usize>) {
        let n = self.layout.disks as u64;
        match self.layout.level {
            RaidLevel::Raid0 => (c / n, vec![(c % n) as usize]),
            RaidLevel::Raid1 => (c, (0..self.layout.disks).collect()),
            RaidLevel::Raid10 => {
                let pairs = n / 2;
                let p = (c % pairs) as usize;
                (c / pairs, vec![2 * p, 2 * p + 1])
            }
            RaidLevel::Raid5 => {
                let row = c / (n - 1);
                let column = c % (n - 1);
                let parity = self.layout.parity_disk(row) as u64;
                (row, vec![((parity + 1 + column) % n) as usize])
            }
        }
    }

    /// Per unit touched: (unit, within, length, logical offset).
    fn units(&self, offset: u64, length: u64) -> Vec<(u64, u64, u64, u64)> {
        assert!(
            offset + length <= self.lun_bytes(),
            "{offset}+{length} past the array's {} bytes",
            self.lun_bytes()
        );
        let u = self.unit();
        let mut out = Vec::new();
        let mut at = offset;
        while at < offset + length {
            let (c, within) = (at / u, at % u);
            let len = (u - within).min(offset + length - at);
            out.push((c, within, len, at));
            at += len;
        }
        out
    }

    /// Rows of each member.
    pub fn rows(&self) -> u64 {
        self.layout.disk_bytes / self.unit()
    }

    /// RAID-5: the member holding row `row`'s parity.
    pub fn parity_member(&self, row: u64) -> usize {
        self.layout.parity_disk(row)
    }

    /// The pieces of a logical range, one per unit touched: its row, the range within the
    /// unit, and the members holding it (the first is the one read; the others are copies).
    pub fn unit_places(&self, offset: u64, length: u64) -> Vec<UnitPlace> {
        self.units(offset, length)
            .into_iter()
            .map(|(c, within, length, lun_offset)| {
                let (row, members) = self.place(c);
                UnitPlace {
                    row,
                    within,
                    length,
                    lun_offset,
                    members,
                }
            })
            .collect()
    }

    /// Where a logical range is to be read from.
    pub fn read_pieces(&self, offset: u64, length: u64) -> Vec<Piece> {
        let u = self.unit();
        let mut out: Vec<Piece> = Vec::new();
        for (c, within, len, at) in self.units(offset, length) {
            let (row, members) = self.place(c);
            let piece = Piece {
                member: members[0],
                member_offset: row * u + within,
                lun_offset: at,
                length: len,
            };
            match out.last_mut() {
                Some(p)
                    if p.member == piece.member
                        && p.member_offset + p.length == piece.member_offset =>
                {
                    p.length += len
                }
                _ => out.push(piece),
            }
        }
        out
    }

    /// The writes of a logical range, row by row.
    pub fn write_rows(&self, offset: u64, length: u64) -> Vec<RowWrite> {
        let u = self.unit();
        let mut rows: Vec<RowWrite> = Vec::new();
        for (c, within, len, at) in self.units(offset, length) {
            let (row, members) = self.place(c);
            if rows.last().is_none_or(|r| r.row != row) {
                rows.push(RowWrite {
                    row,
                    data: Vec::new(),
                    copies: Vec::new(),
                    parity: None,
                });
            }
            let r = rows.last_mut().expect("pushed");
            let piece = |member| Piece {
                member,
                member_offset: row * u + within,
                lun_offset: at,
                length: len,
            };
            r.data.push(piece(members[0]));
            r.copies.extend(members[1..].iter().map(|&m| piece(m)));
        }
        if self.layout.level == RaidLevel::Raid5 {
            let data_units = (self.layout.disks - 1) as u64;
            for r in &mut rows {
                let lo = r
                    .data
                    .iter()
                    .map(|p| p.member_offset - r.row * u)
                    .min()
                    .unwrap_or(0);
                let hi = r
                    .data
                    .iter()
                    .map(|p| p.member_offset - r.row * u + p.length)
                    .max()
                    .unwrap_or(0);
                let full =
                    r.data.len() as u64 == data_units && r.data.iter().all(|p| p.length == u);
                r.parity = Some(Parity {
                    member: self.layout.parity_disk(r.row),
                    lo: if full { 0 } else { lo },
                    hi: if full { u } else { hi },
                    full,
                });
            }
        }
        rows
    }
}

/// The new parity bytes `[lo, hi)` of a row after a partial write: the old parity there, with
/// each written piece's old and new bytes XORed in (`pieces`: offset within the unit, old, new).
pub fn parity_update(lo: u64, old_parity: &[u8], pieces: &[(u64, &[u8], &[u8])]) -> Vec<u8> {
    let mut p = old_parity.to_vec();
    for &(within, old, new) in pieces {
        assert_eq!(old.len(), new.len());
        let at = (within - lo) as usize;
        for (i, (o, n)) in old.iter().zip(new).enumerate() {
            p[at + i] ^= o ^ n;
        }
    }
    p
}

/// The parity of a row whose data units are all written whole: their XOR.
pub fn parity_full(units: &[&[u8]]) -> Vec<u8> {
    let mut p = vec![0u8; units.first().map_or(0, |u| u.len())];
    for u in units {
        for (x, y) in p.iter_mut().zip(u.iter()) {
            *x ^= y;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rustc_hash::FxHashMap;

    fn level() -> impl Strategy<Value = (RaidLevel, usize)> {
        prop_oneof![
            (3usize..=6).prop_map(|d| (RaidLevel::Raid5, d)),
            (1usize..=4).prop_map(|d| (RaidLevel::Raid0, d)),
            (2usize..=3).prop_map(|d| (RaidLevel::Raid1, d)),
            (2usize..=3).prop_map(|p| (RaidLevel::Raid10, 2 * p)),
        ]
    }

    /// The members as byte arrays, written as the runtime does (row by row, parity by
    /// read-modify-write or whole).
    struct Disks {
        m: Members,
        bytes: Vec<Vec<u8>>,
    }

    impl Disks {
        fn read(&self, offset: u64, length: u64) -> Vec<u8> {
            let mut out = vec![0u8; length as usize];
            for p in self.m.read_pieces(offset, length) {
                let at = (p.lun_offset - offset) as usize;
                let from = p.member_offset as usize;
                out[at..at + p.length as usize]
                    .copy_from_slice(&self.bytes[p.member][from..from + p.length as usize]);
            }
            out
        }

        fn write(&mut self, offset: u64, data: &[u8]) {
            let u = self.m.unit();
            for r in self.m.write_rows(offset, data.len() as u64) {
                let slice =
                    |p: &Piece| &data[(p.lun_offset - offset) as usize..][..p.length as usize];
                if let Some(par) = r.parity {
                    let at = (r.row * u) as usize;
                    let new = if par.full {
                        let units: Vec<&[u8]> = r.data.iter().map(&slice).collect();
                        parity_full(&units)
                    } else {
                        let olds: Vec<Vec<u8>> = r
                            .data
                            .iter()
                            .map(|p| {
                                self.bytes[p.member][p.member_offset as usize..]
                                    [..p.length as usize]
                                    .to_vec()
                            })
                            .collect();
                        let pieces: Vec<(u64, &[u8], &[u8])> = r
                            .data
                            .iter()
                            .zip(&olds)
                            .map(|(p, o)| (p.member_offset - r.row * u, o.as_slice(), slice(p)))
                            .collect();
                        let old =
                            &self.bytes[par.member][at + par.lo as usize..at + par.hi as usize];
                        parity_update(par.lo, old, &pieces)
                    };
                    self.bytes[par.member][at + par.lo as usize..at + par.hi as usize]
                        .copy_from_slice(&new);
                }
                for p in r.data.iter().chain(&r.copies) {
                    let from = p.member_offset as usize;
                    self.bytes[p.member][from..from + p.length as usize].copy_from_slice(slice(p));
                }
            }
        }

        /// Every RAID-5 row's parity is the XOR of its data; every copy equals its first.
        fn consistent(&self) -> Result<(), String> {
            let u = self.m.unit() as usize;
            let n = self.m.disks();
            let rows = self.bytes[0].len() / u;
            match self.m.level() {
                RaidLevel::Raid5 => {
                    for r in 0..rows {
                        let mut x = vec![0u8; u];
                        for d in &self.bytes {
                            for (a, b) in x.iter_mut().zip(&d[r * u..(r + 1) * u]) {
                                *a ^= b;
                            }
                        }
                        if x.iter().any(|b| *b != 0) {
                            return Err(format!("row {r}: parity is not the XOR of its data"));
                        }
                    }
                }
                RaidLevel::Raid1 => {
                    for d in 1..n {
                        if self.bytes[d] != self.bytes[0] {
                            return Err(format!("member {d} differs from member 0"));
                        }
                    }
                }
                RaidLevel::Raid10 => {
                    for p in 0..n / 2 {
                        if self.bytes[2 * p] != self.bytes[2 * p + 1] {
                            return Err(format!("pair {p} differs"));
                        }
                    }
                }
                RaidLevel::Raid0 => {}
            }
            Ok(())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random writes through the row plans: reads return the last data written at every
        /// byte, and RAID-5 parity and mirror copies stay consistent.
        #[test]
        fn writes_read_back_and_parity_and_copies_stay_consistent(
            (level, disks) in level(),
            unit_sectors in 1u64..=4,
            writes in prop::collection::vec((any::<u64>(), 1u64..=40, any::<u8>()), 1..30),
        ) {
            let unit = unit_sectors * 512;
            let m = Members::new(level, disks, unit, unit * 8).unwrap();
            let size = m.lun_bytes();
            let mut d = Disks { bytes: vec![vec![0u8; (unit * 8) as usize]; disks], m };
            let mut model: FxHashMap<u64, u8> = FxHashMap::default();
            for (i, (at, sectors, seed)) in writes.into_iter().enumerate() {
                let len = (sectors * 512).min(size);
                let offset = at % (size - len + 1) / 512 * 512;
                let data: Vec<u8> = (0..len).map(|b| seed.wrapping_add((b * 7 + i as u64) as u8)).collect();
                d.write(offset, &data);
                for (k, b) in data.iter().enumerate() {
                    model.insert(offset + k as u64, *b);
                }
                prop_assert_eq!(d.consistent(), Ok(()));
            }
            let all = d.read(0, size);
            for (k, b) in all.iter().enumerate() {
                prop_assert_eq!(*b, *model.get(&(k as u64)).unwrap_or(&0), "byte {}", k);
            }
        }

        /// Every logical sector has one place to be read from, no two share it, and RAID-5
        /// data never lands on its row's parity member.
        #[test]
        fn every_sector_has_a_place_of_its_own((level, disks) in level(), unit_sectors in 1u64..=4) {
            let unit = unit_sectors * 512;
            let m = Members::new(level, disks, unit, unit * 6).unwrap();
            let mut seen = FxHashMap::default();
            for s in (0..m.lun_bytes()).step_by(512) {
                let p = m.read_pieces(s, 512);
                prop_assert_eq!(p.len(), 1);
                let p = p[0];
                prop_assert!(p.member < disks && p.member_offset + 512 <= unit * 6);
                if level == RaidLevel::Raid5 {
                    let row = p.member_offset / unit;
                    prop_assert_ne!(p.member, m.layout.parity_disk(row));
                }
                prop_assert!(seen.insert((p.member, p.member_offset), s).is_none());
            }
        }
    }
}
