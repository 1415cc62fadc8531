//! The pool: arrays, the volumes placed on them, free space, and the mapping of a volume's
//! requests to member disk I/Os.

use std::collections::BTreeMap;

use cordillera_models::device::raid::{Layout, MemberIo, Plan, RaidLevel};
use cordillera_types::Op;

/// One array of the pool: its RAID level, member count and the usable bytes of each member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    pub level: RaidLevel,
    pub disks: usize,
    pub disk_bytes: u64,
}

impl ArraySpec {
    /// The paper's array: RAID-5 4+p, left-symmetric.
    pub fn raid5_4p(disk_bytes: u64) -> ArraySpec {
        ArraySpec {
            level: RaidLevel::Raid5,
            disks: 5,
            disk_bytes,
        }
    }

    /// Disks holding distinct data in a stripe.
    pub fn data_disks(&self) -> usize {
        Layout {
            level: self.level,
            disks: self.disks,
            stripe_unit_bytes: 512,
            disk_bytes: self.disk_bytes,
        }
        .data_disks()
    }
}

/// A volume's part on one array: the same byte range `[disk_offset, disk_offset + disk_bytes)`
/// of every member disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub array: usize,
    pub disk_offset: u64,
    pub disk_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VolumeId(pub u32);

/// A volume placed in the pool. Its stripe units go to its n extents in chunks of
/// `chunk_units`: unit `k` is in chunk `c = k / chunk_units`, on `extents[c mod n]`, as unit
/// `(c / n) · chunk_units + k mod chunk_units` of a volume the array lays out alone. One unit
/// per chunk rotates arrays unit by unit; a chunk of a whole RAID stripe (the array's data
/// disks) is a volume manager striping whole stripes across arrays.
#[derive(Clone, Debug)]
pub struct Volume {
    pub id: VolumeId,
    pub name: String,
    pub size_bytes: u64,
    pub stripe_unit_bytes: u64,
    pub chunk_units: u64,
    pub extents: Vec<Extent>,
    layouts: Vec<Layout>,
}

impl Volume {
    /// Narrow: on one array.
    pub fn is_narrow(&self) -> bool {
        self.extents.len() == 1
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("a pool needs at least one array")]
    NoArrays,
    #[error("array {array}: {why}")]
    BadArray { array: usize, why: String },
    #[error("no array {0} in the pool")]
    NoSuchArray(usize),
    #[error("array {0} is named twice for one volume")]
    ArrayTwice(usize),
    #[error("a volume needs at least one array")]
    NoPlacement,
    #[error("volume {0:?} exists")]
    DuplicateName(String),
    #[error("a volume needs a name")]
    EmptyName,
    #[error("no volume {0:?}")]
    NoSuchVolume(String),
    #[error("a volume's size must be a positive multiple of 512 bytes (not {0})")]
    BadSize(u64),
    #[error("the stripe unit must be a positive multiple of 512 bytes (not {0})")]
    BadStripeUnit(u64),
    #[error("a chunk across arrays must be 1 to 1024 stripe units (not {0})")]
    BadChunk(u64),
    #[error(
        "array {array} has no free range of {needed} bytes on each disk (the largest is {largest})"
    )]
    NoSpace {
        array: usize,
        needed: u64,
        largest: u64,
    },
    #[error("bytes {offset}..{end} are outside the volume's {size} bytes")]
    OutOfRange { offset: u64, end: u64, size: u64 },
    #[error("volume {0:?} is being restriped")]
    Restriping(String),
    #[error("volume {0:?} is not being restriped")]
    NotRestriping(String),
    #[error("extents of volumes {a:?} and {b:?} overlap on array {array}")]
    Overlap { a: String, b: String, array: usize },
}

#[derive(Clone, Debug)]
struct Array {
    spec: ArraySpec,
    /// Index of its first disk among all the pool's disks.
    first_disk: usize,
    /// Free per-disk byte ranges, sorted and merged.
    free: Vec<(u64, u64)>,
}

/// Arrays shared by volumes.
#[derive(Clone, Debug)]
pub struct Pool {
    arrays: Vec<Array>,
    volumes: BTreeMap<VolumeId, Volume>,
    /// Layouts volumes are being restriped to: the same volume (id, name, size, stripe unit)
    /// on other extents, which hold their space until the restripe finishes.
    restripes: BTreeMap<VolumeId, Volume>,
    next_id: u32,
}

impl Pool {
    pub fn new(arrays: &[ArraySpec]) -> Result<Pool, PoolError> {
        if arrays.is_empty() {
            return Err(PoolError::NoArrays);
        }
        let mut pool = Pool {
            arrays: Vec::new(),
            volumes: BTreeMap::new(),
            restripes: BTreeMap::new(),
            next_id: 0,
        };
        for &spec in arrays {
            pool.add_array(spec)?;
        }
        Ok(pool)
    }

    /// Adds an empty array (numbered after the others); its disks follow theirs.
    pub fn add_array(&mut self, spec: ArraySpec) -> Result<usize, PoolError> {
        let array = self.arrays.len();
        Layout::new(spec.level, spec.disks, 512, spec.disk_bytes)
            .map_err(|why| PoolError::BadArray { array, why })?;
        if spec.disk_bytes < 512 || !spec.disk_bytes.is_multiple_of(512) {
            return Err(PoolError::BadArray {
                array,
                why: format!(
                    "each disk's size must be a positive multiple of 512 bytes (not {})",
                    spec.disk_bytes
                ),
            });
        }
        self.arrays.push(Array {
            spec,
            first_disk: self.disks(),
            free: vec![(0, spec.disk_bytes)],
        });
        Ok(array)
    }

    pub fn arrays(&self) -> Vec<ArraySpec> {
        self.arrays.iter().map(|a| a.spec).collect()
    }

    /// Disks of all arrays.
    pub fn disks(&self) -> usize {
        self.arrays.iter().map(|a| a.spec.disks).sum()
    }

    /// The pool-wide index of `disk` of `array`.
    pub fn disk_index(&self, array: usize, disk: usize) -> usize {
        self.arrays[array].first_disk + disk
    }

    /// The array a pool-wide disk index belongs to.
    pub fn array_of_disk(&self, disk: usize) -> usize {
        self.arrays
            .iter()
            .rposition(|a| a.first_disk <= disk)
            .expect("a disk of the pool")
    }

    /// Free bytes on each disk of `array` (summed over its free ranges).
    pub fn free_disk_bytes(&self, array: usize) -> u64 {
        self.arrays[array].free.iter().map(|(a, b)| b - a).sum()
    }

    /// Free per-disk byte ranges of an array, sorted.
    pub fn free_ranges(&self, array: usize) -> &[(u64, u64)] {
        &self.arrays[array].free
    }

    pub fn volumes(&self) -> impl Iterator<Item = &Volume> {
        self.volumes.values()
    }

    pub fn volume(&self, id: VolumeId) -> Option<&Volume> {
        self.volumes.get(&id)
    }

    pub fn find(&self, name: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name)
    }

    /// Bytes each disk of each array needs for a volume of `size_bytes` with this stripe unit
    /// over `arrays` (in that order).
    pub fn extent_bytes(
        &self,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        arrays: &[usize],
    ) -> Vec<u64> {
        let n = arrays.len() as u64;
        let chunks = size_bytes.div_ceil(stripe_unit_bytes).div_ceil(chunk_units);
        let per_array = chunks.div_ceil(n) * chunk_units;
        arrays
            .iter()
            .map(|&a| {
                let dd = self.arrays[a].spec.data_disks() as u64;
                per_array.div_ceil(dd) * stripe_unit_bytes
            })
            .collect()
    }

    /// Places a volume over `arrays` (one: narrow; all: wide) with its stripe unit; each array
    /// gives it the first free range large enough on its disks. Nothing is taken unless every
    /// array has room.
    pub fn create(
        &mut self,
        name: &str,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        arrays: &[usize],
    ) -> Result<VolumeId, PoolError> {
        self.create_chunked(name, size_bytes, stripe_unit_bytes, 1, arrays)
    }

    /// [`create`](Self::create) with `chunk_units` stripe units on one array before the next.
    pub fn create_chunked(
        &mut self,
        name: &str,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        arrays: &[usize],
    ) -> Result<VolumeId, PoolError> {
        self.check_new(name, size_bytes, stripe_unit_bytes, chunk_units, arrays)?;
        let extents = self.allocate(size_bytes, stripe_unit_bytes, chunk_units, arrays)?;
        self.insert(name, size_bytes, stripe_unit_bytes, chunk_units, extents)
    }

    /// Adds a volume whose extents are given (a layout read back from disk): refused if they
    /// overlap another volume's or free space does not hold them.
    pub fn restore(
        &mut self,
        name: &str,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        extents: Vec<Extent>,
    ) -> Result<VolumeId, PoolError> {
        let arrays: Vec<usize> = extents.iter().map(|e| e.array).collect();
        self.check_new(name, size_bytes, stripe_unit_bytes, chunk_units, &arrays)?;
        self.check_fits(name, size_bytes, stripe_unit_bytes, chunk_units, &extents)?;
        for e in &extents {
            take(&mut self.arrays[e.array].free, e.disk_offset, e.disk_bytes);
        }
        self.insert(name, size_bytes, stripe_unit_bytes, chunk_units, extents)
    }

    /// Takes, on each of `arrays`, the first free range that holds its share of a layout;
    /// nothing is taken unless every array has room.
    fn allocate(
        &mut self,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        arrays: &[usize],
    ) -> Result<Vec<Extent>, PoolError> {
        let needed = self.extent_bytes(size_bytes, stripe_unit_bytes, chunk_units, arrays);
        let mut starts = Vec::with_capacity(arrays.len());
        for (&a, &bytes) in arrays.iter().zip(&needed) {
            let free = &self.arrays[a].free;
            match free.iter().find(|(lo, hi)| hi - lo >= bytes) {
                Some(&(lo, _)) => starts.push(lo),
                None => {
                    return Err(PoolError::NoSpace {
                        array: a,
                        needed: bytes,
                        largest: free.iter().map(|(lo, hi)| hi - lo).max().unwrap_or(0),
                    })
                }
            }
        }
        let extents: Vec<Extent> = arrays
            .iter()
            .zip(&needed)
            .zip(&starts)
            .map(|((&array, &disk_bytes), &disk_offset)| Extent {
                array,
                disk_offset,
                disk_bytes,
            })
            .collect();
        for e in &extents {
            take(&mut self.arrays[e.array].free, e.disk_offset, e.disk_bytes);
        }
        debug_assert_eq!(extents.len(), arrays.len(), "an extent per array");
        Ok(extents)
    }

    /// Starts moving a volume to a new layout over `arrays` (a wide volume onto a grown set of
    /// arrays): the new extents are taken from free space now, and both layouts exist until
    /// [`finish_restripe`](Self::finish_restripe). One restripe per volume at a time.
    pub fn begin_restripe(
        &mut self,
        id: VolumeId,
        arrays: &[usize],
        chunk_units: u64,
    ) -> Result<&Volume, PoolError> {
        let v = self.volume_or_err(id)?.clone();
        if self.restripes.contains_key(&id) {
            return Err(PoolError::Restriping(v.name));
        }
        self.check_placement(v.size_bytes, v.stripe_unit_bytes, chunk_units, arrays)?;
        let extents = self.allocate(v.size_bytes, v.stripe_unit_bytes, chunk_units, arrays)?;
        let target = self.layout_of(&v, chunk_units, extents)?;
        Ok(self.restripes.entry(id).or_insert(target))
    }

    /// Adds a restripe in progress read back from disk: its extents must be free.
    pub fn restore_restripe(
        &mut self,
        id: VolumeId,
        chunk_units: u64,
        extents: Vec<Extent>,
    ) -> Result<(), PoolError> {
        let v = self.volume_or_err(id)?.clone();
        if self.restripes.contains_key(&id) {
            return Err(PoolError::Restriping(v.name));
        }
        let arrays: Vec<usize> = extents.iter().map(|e| e.array).collect();
        self.check_placement(v.size_bytes, v.stripe_unit_bytes, chunk_units, &arrays)?;
        self.check_fits(
            &v.name,
            v.size_bytes,
            v.stripe_unit_bytes,
            chunk_units,
            &extents,
        )?;
        for e in &extents {
            take(&mut self.arrays[e.array].free, e.disk_offset, e.disk_bytes);
        }
        let target = self.layout_of(&v, chunk_units, extents)?;
        self.restripes.insert(id, target);
        Ok(())
    }

    /// The layout a volume is being restriped to.
    pub fn restripe_target(&self, id: VolumeId) -> Option<&Volume> {
        self.restripes.get(&id)
    }

    pub fn restripes(&self) -> impl Iterator<Item = &Volume> {
        self.restripes.values()
    }

    /// The volume now lives on its new layout; the old extents become free.
    pub fn finish_restripe(&mut self, id: VolumeId) -> Result<(), PoolError> {
        let name = self.volume_or_err(id)?.name.clone();
        let target = self
            .restripes
            .remove(&id)
            .ok_or(PoolError::NotRestriping(name))?;
        let old = self.volumes.insert(id, target).expect("the volume exists");
        for e in &old.extents {
            give(&mut self.arrays[e.array].free, e.disk_offset, e.disk_bytes);
        }
        Ok(())
    }

    fn volume_or_err(&self, id: VolumeId) -> Result<&Volume, PoolError> {
        self.volumes
            .get(&id)
            .ok_or_else(|| PoolError::NoSuchVolume(format!("#{}", id.0)))
    }

    /// `v` (its id, name, size and stripe unit) on other extents.
    fn layout_of(
        &self,
        v: &Volume,
        chunk_units: u64,
        extents: Vec<Extent>,
    ) -> Result<Volume, PoolError> {
        Ok(Volume {
            id: v.id,
            name: v.name.clone(),
            size_bytes: v.size_bytes,
            stripe_unit_bytes: v.stripe_unit_bytes,
            chunk_units,
            layouts: self.layouts(&extents, v.stripe_unit_bytes)?,
            extents,
        })
    }

    fn layouts(
        &self,
        extents: &[Extent],
        stripe_unit_bytes: u64,
    ) -> Result<Vec<Layout>, PoolError> {
        extents
            .iter()
            .map(|e| {
                let spec = self.arrays[e.array].spec;
                Layout::new(spec.level, spec.disks, stripe_unit_bytes, e.disk_bytes).map_err(
                    |why| PoolError::BadArray {
                        array: e.array,
                        why,
                    },
                )
            })
            .collect()
    }

    /// Extents read back from disk hold their layout and lie in free space.
    fn check_fits(
        &self,
        name: &str,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        extents: &[Extent],
    ) -> Result<(), PoolError> {
        let arrays: Vec<usize> = extents.iter().map(|e| e.array).collect();
        let needed = self.extent_bytes(size_bytes, stripe_unit_bytes, chunk_units, &arrays);
        for (e, &bytes) in extents.iter().zip(&needed) {
            let free = &self.arrays[e.array].free;
            let fits = e.disk_bytes >= bytes
                && free
                    .iter()
                    .any(|&(lo, hi)| lo <= e.disk_offset && e.disk_offset + e.disk_bytes <= hi);
            if !fits {
                let holds = |x: &Extent| {
                    x.array == e.array
                        && x.disk_offset < e.disk_offset + e.disk_bytes
                        && e.disk_offset < x.disk_offset + x.disk_bytes
                };
                let other = self
                    .volumes
                    .values()
                    .chain(self.restripes.values())
                    .find(|v| v.extents.iter().any(holds))
                    .map_or_else(|| "(outside the disks)".to_string(), |v| v.name.clone());
                return Err(PoolError::Overlap {
                    a: name.into(),
                    b: other,
                    array: e.array,
                });
            }
        }
        Ok(())
    }

    /// What every new volume must satisfy, whatever places it.
    fn check_new(
        &self,
        name: &str,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        arrays: &[usize],
    ) -> Result<(), PoolError> {
        if name.is_empty() {
            return Err(PoolError::EmptyName);
        }
        if self.find(name).is_some() {
            return Err(PoolError::DuplicateName(name.into()));
        }
        self.check_placement(size_bytes, stripe_unit_bytes, chunk_units, arrays)
    }

    /// A layout's size, stripe unit, chunk and arrays are valid.
    fn check_placement(
        &self,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        arrays: &[usize],
    ) -> Result<(), PoolError> {
        if !(1..=1024).contains(&chunk_units) {
            return Err(PoolError::BadChunk(chunk_units));
        }
        if size_bytes == 0 || !size_bytes.is_multiple_of(512) {
            return Err(PoolError::BadSize(size_bytes));
        }
        if stripe_unit_bytes == 0 || !stripe_unit_bytes.is_multiple_of(512) {
            return Err(PoolError::BadStripeUnit(stripe_unit_bytes));
        }
        if arrays.is_empty() {
            return Err(PoolError::NoPlacement);
        }
        for (i, &a) in arrays.iter().enumerate() {
            if a >= self.arrays.len() {
                return Err(PoolError::NoSuchArray(a));
            }
            if arrays[..i].contains(&a) {
                return Err(PoolError::ArrayTwice(a));
            }
        }
        Ok(())
    }

    fn insert(
        &mut self,
        name: &str,
        size_bytes: u64,
        stripe_unit_bytes: u64,
        chunk_units: u64,
        extents: Vec<Extent>,
    ) -> Result<VolumeId, PoolError> {
        let layouts = self.layouts(&extents, stripe_unit_bytes)?;
        let id = VolumeId(self.next_id);
        self.next_id += 1;
        self.volumes.insert(
            id,
            Volume {
                id,
                name: name.into(),
                size_bytes,
                stripe_unit_bytes,
                chunk_units,
                extents,
                layouts,
            },
        );
        Ok(id)
    }

    /// Removes a volume; its extents become free.
    pub fn remove(&mut self, id: VolumeId) -> Option<Volume> {
        let v = self.volumes.remove(&id)?;
        let target = self.restripes.remove(&id);
        for e in v
            .extents
            .iter()
            .chain(target.iter().flat_map(|t| &t.extents))
        {
            give(&mut self.arrays[e.array].free, e.disk_offset, e.disk_bytes);
        }
        Some(v)
    }

    /// The member I/Os of a request to a volume, disks numbered pool-wide (reads, then
    /// writes: a RAID-5 write's reads come first).
    pub fn plan(
        &self,
        id: VolumeId,
        op: Op,
        offset: u64,
        length: u64,
        plan: &mut Plan,
    ) -> Result<(), PoolError> {
        let v = self
            .volumes
            .get(&id)
            .ok_or_else(|| PoolError::NoSuchVolume(format!("#{}", id.0)))?;
        let end = offset.saturating_add(length);
        if end > v.size_bytes {
            return Err(PoolError::OutOfRange {
                offset,
                end,
                size: v.size_bytes,
            });
        }
        plan.reads.clear();
        plan.writes.clear();
        let n = v.extents.len() as u64;
        let su = v.stripe_unit_bytes;
        // The local range of each extent: contiguous, as consecutive units of the volume on
        // one array are consecutive units of its part there.
        let mut local: Vec<Option<(u64, u64)>> = vec![None; v.extents.len()];
        let mut at = offset;
        while at < end {
            let unit = at / su;
            let within = at % su;
            let len = (su - within).min(end - at);
            let (chunk, in_chunk) = (unit / v.chunk_units, unit % v.chunk_units);
            let i = (chunk % n) as usize;
            let lo = ((chunk / n) * v.chunk_units + in_chunk) * su + within;
            match &mut local[i] {
                Some((_, hi)) => {
                    debug_assert_eq!(*hi, lo);
                    *hi = lo + len;
                }
                none => *none = Some((lo, lo + len)),
            }
            at += len;
        }
        let mut sub = Plan::default();
        let mut pieces = Vec::new();
        for (i, range) in local.iter().enumerate() {
            let Some((lo, hi)) = *range else {
                continue;
            };
            let e = v.extents[i];
            let first = self.arrays[e.array].first_disk;
            v.layouts[i].plan_into(op, lo, hi - lo, &|f, _| f, &mut sub, &mut pieces);
            let shift = |io: &MemberIo| MemberIo {
                disk: first + io.disk,
                offset_bytes: e.disk_offset + io.offset_bytes,
                ..*io
            };
            plan.reads.extend(sub.reads.iter().map(shift));
            plan.writes.extend(sub.writes.iter().map(shift));
        }
        Ok(())
    }

    /// Disks holding distinct data in a stripe of `array`.
    pub fn data_disks(&self, array: usize) -> u64 {
        self.arrays[array].spec.data_disks() as u64
    }

    /// Bytes of an array seen as one logical device (a LUN): its data disks' share of each
    /// member. The real pool keeps each array as such a device (a file or a hardware array's
    /// LUN); the simulator plans member I/Os instead ([`plan`](Self::plan)).
    pub fn lun_bytes(&self, array: usize) -> u64 {
        let spec = self.arrays[array].spec;
        spec.disk_bytes * spec.data_disks() as u64
    }

    /// The pieces of a volume's byte range on the arrays' logical devices, in volume order:
    /// the volume's part on an array (extent `e`) is the logical range
    /// `[e.disk_offset · data disks, (e.disk_offset + e.disk_bytes) · data disks)`, its
    /// stripe units in their order there. Volumes' pieces never overlap (their extents do not).
    pub fn segments(
        &self,
        id: VolumeId,
        offset: u64,
        length: u64,
        out: &mut Vec<Segment>,
    ) -> Result<(), PoolError> {
        let v = self
            .volumes
            .get(&id)
            .ok_or_else(|| PoolError::NoSuchVolume(format!("#{}", id.0)))?;
        segments_of(
            v,
            &|a| self.arrays[a].spec.data_disks() as u64,
            offset,
            length,
            out,
        )
    }

    /// Where byte `offset` of a volume is: (array, disk of that array, byte on the disk); for
    /// mirrored levels, the first copy.
    pub fn locate(&self, id: VolumeId, offset: u64) -> Result<(usize, usize, u64), PoolError> {
        let mut plan = Plan::default();
        self.plan(id, Op::Read, offset, 1, &mut plan)?;
        let io = plan.reads[0];
        let array = self.array_of_disk(io.disk);
        Ok((
            array,
            io.disk - self.arrays[array].first_disk,
            io.offset_bytes,
        ))
    }
}

/// A piece of a volume's range on one array's logical device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub array: usize,
    /// Byte on the array's logical device.
    pub lun_offset: u64,
    /// Byte of the volume.
    pub volume_offset: u64,
    pub length: u64,
}

/// [`Pool::segments`] for a volume's extents (also the target layout of a restripe).
pub fn segments_of(
    v: &Volume,
    data_disks: &dyn Fn(usize) -> u64,
    offset: u64,
    length: u64,
    out: &mut Vec<Segment>,
) -> Result<(), PoolError> {
    let end = offset.saturating_add(length);
    if end > v.size_bytes {
        return Err(PoolError::OutOfRange {
            offset,
            end,
            size: v.size_bytes,
        });
    }
    out.clear();
    let n = v.extents.len() as u64;
    let su = v.stripe_unit_bytes;
    let mut at = offset;
    while at < end {
        let unit = at / su;
        let within = at % su;
        let (chunk, in_chunk) = (unit / v.chunk_units, unit % v.chunk_units);
        // To the end of the chunk: consecutive units of a chunk are consecutive there.
        let len = ((v.chunk_units - in_chunk) * su - within).min(end - at);
        let e = v.extents[(chunk % n) as usize];
        let local = ((chunk / n) * v.chunk_units + in_chunk) * su + within;
        let lun_offset = e.disk_offset * data_disks(e.array) + local;
        match out.last_mut() {
            Some(last) if last.array == e.array && last.lun_offset + last.length == lun_offset => {
                last.length += len;
            }
            _ => out.push(Segment {
                array: e.array,
                lun_offset,
                volume_offset: at,
                length: len,
            }),
        }
        debug_assert!(len > 0, "a segment of no bytes at {at}");
        at += len;
    }
    debug_assert_eq!(
        out.iter().map(|s| s.length).sum::<u64>(),
        length.min(end - offset),
        "the segments do not cover the request"
    );
    Ok(())
}

/// Removes `[at, at + len)` from a sorted free list that holds it.
fn take(free: &mut Vec<(u64, u64)>, at: u64, len: u64) {
    let i = free
        .iter()
        .position(|&(lo, hi)| lo <= at && at + len <= hi)
        .expect("a free range holding the extent");
    let (lo, hi) = free[i];
    let mut parts = Vec::with_capacity(2);
    if lo < at {
        parts.push((lo, at));
    }
    if at + len < hi {
        parts.push((at + len, hi));
    }
    free.splice(i..=i, parts);
    debug_assert!(
        sorted_apart(free),
        "a free list out of order after a take: {free:?}"
    );
}

/// Whether a free list is sorted, its ranges non-empty and apart (merged where they touch).
fn sorted_apart(free: &[(u64, u64)]) -> bool {
    free.iter().all(|&(lo, hi)| lo < hi) && free.windows(2).all(|w| w[0].1 < w[1].0)
}

/// Returns `[at, at + len)` to a sorted free list, merging neighbours.
fn give(free: &mut Vec<(u64, u64)>, at: u64, len: u64) {
    debug_assert!(
        free.iter().all(|&(lo, hi)| at + len <= lo || hi <= at),
        "[{at}, +{len}) given back while part of it is free"
    );
    let i = free.partition_point(|&(lo, _)| lo < at);
    free.insert(i, (at, at + len));
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(free.len());
    for &(lo, hi) in free.iter() {
        match merged.last_mut() {
            Some(last) if last.1 == lo => last.1 = hi,
            _ => merged.push((lo, hi)),
        }
    }
    *free = merged;
    debug_assert!(
        sorted_apart(free),
        "a free list out of order after a give: {free:?}"
    );
}

#[cfg(test)]
mod tests;
