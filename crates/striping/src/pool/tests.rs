use rustc_hash::FxHashMap;

use proptest::prelude::*;

use super::*;

/// Where byte `b` of a volume is, computed directly from the definitions (no shared code with
/// `Pool::plan`): (pool-wide disk, byte on that disk).
fn naive(pool: &Pool, v: &Volume, b: u64) -> (usize, u64) {
    let su = v.stripe_unit_bytes;
    let n = v.extents.len() as u64;
    let unit = b / su;
    let c = v.chunk_units;
    let e = v.extents[(unit / c % n) as usize];
    let local_unit = unit / c / n * c + unit % c;
    let within = b % su;
    let spec = pool.arrays()[e.array];
    let (disk, row) = match spec.level {
        RaidLevel::Raid0 => (
            (local_unit % spec.disks as u64) as usize,
            local_unit / spec.disks as u64,
        ),
        RaidLevel::Raid1 => (0, local_unit),
        RaidLevel::Raid10 => {
            let pairs = (spec.disks / 2) as u64;
            (2 * (local_unit % pairs) as usize, local_unit / pairs)
        }
        RaidLevel::Raid5 => {
            let data = (spec.disks - 1) as u64;
            let row = local_unit / data;
            let column = local_unit % data;
            // Left-symmetric: parity moves left one disk per row; data starts right of it.
            let parity = spec.disks as u64 - 1 - row % spec.disks as u64;
            (((parity + 1 + column) % spec.disks as u64) as usize, row)
        }
    };
    (
        pool.disk_index(e.array, disk),
        e.disk_offset + row * su + within,
    )
}

fn level() -> impl Strategy<Value = (RaidLevel, usize)> {
    prop_oneof![
        (3usize..=8).prop_map(|d| (RaidLevel::Raid5, d)),
        (1usize..=4).prop_map(|d| (RaidLevel::Raid0, d)),
        (2usize..=3).prop_map(|d| (RaidLevel::Raid1, d)),
        (2usize..=3).prop_map(|p| (RaidLevel::Raid10, 2 * p)),
    ]
}

/// A pool of 1–5 arrays and up to 6 volumes, each narrow (on a random array) or wide (over
/// all), with sizes and stripe units in 512-byte steps. Volumes that do not fit are skipped.
fn pool() -> impl Strategy<Value = Pool> {
    (
        prop::collection::vec(level(), 1..=5),
        prop::collection::vec(
            (1u64..=300, 1u64..=16, any::<bool>(), any::<u8>(), 1u64..=5),
            1..=6,
        ),
    )
        .prop_map(|(arrays, volumes)| {
            let specs: Vec<ArraySpec> = arrays
                .iter()
                .map(|&(level, disks)| ArraySpec {
                    level,
                    disks,
                    disk_bytes: 2 << 20,
                })
                .collect();
            let mut pool = Pool::new(&specs).unwrap();
            for (i, (sectors, su, wide, pick, chunk)) in volumes.into_iter().enumerate() {
                let arrays: Vec<usize> = if wide {
                    (0..specs.len()).collect()
                } else {
                    vec![pick as usize % specs.len()]
                };
                let name = format!("v{i}");
                let _ = pool.create_chunked(&name, sectors * 512 * 8, su * 512, chunk, &arrays);
            }
            pool
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// On the arrays' logical devices: every sector of every volume lies inside its extent's
    /// logical range, at the place the definitions give, no two sectors share a place, and a
    /// long range's segments cover exactly its sectors in order.
    #[test]
    fn every_sector_has_a_logical_place_of_its_own_and_ranges_split_exactly(
        pool in pool(), start in any::<u64>(), len in 1u64..=64
    ) {
        let mut owner: FxHashMap<(usize, u64), (VolumeId, u64)> = FxHashMap::default();
        let mut segs = Vec::new();
        for v in pool.volumes() {
            for b in (0..v.size_bytes).step_by(512) {
                pool.segments(v.id, b, 512, &mut segs).unwrap();
                prop_assert_eq!(segs.len(), 1);
                let s = segs[0];
                let e = v.extents.iter().find(|e| e.array == s.array).unwrap();
                let dd = pool.arrays()[s.array].data_disks() as u64;
                prop_assert!(e.disk_offset * dd <= s.lun_offset
                    && s.lun_offset + 512 <= (e.disk_offset + e.disk_bytes) * dd);
                prop_assert!(s.lun_offset + 512 <= pool.lun_bytes(s.array));
                // The definitions: unit k in chunk k / c, on extent (k / c) mod n, as local
                // unit (k / c / n) · c + k mod c.
                let (su, c, n) = (v.stripe_unit_bytes, v.chunk_units, v.extents.len() as u64);
                let k = b / su;
                let x = v.extents[(k / c % n) as usize];
                prop_assert_eq!(s.array, x.array);
                prop_assert_eq!(s.lun_offset, x.disk_offset * dd + (k / c / n * c + k % c) * su + b % su);
                if let Some(other) = owner.insert((s.array, s.lun_offset), (v.id, b)) {
                    prop_assert!(false, "{:?} and {:?} share a place", other, (v.id, b));
                }
            }
            let sectors = v.size_bytes / 512;
            let first = start % sectors;
            let count = len.min(sectors - first);
            pool.segments(v.id, first * 512, count * 512, &mut segs).unwrap();
            let mut at = first * 512;
            for s in &segs {
                prop_assert_eq!(s.volume_offset, at);
                let mut one = Vec::new();
                for b in (0..s.length).step_by(512) {
                    pool.segments(v.id, at + b, 512, &mut one).unwrap();
                    prop_assert_eq!(one[0].array, s.array);
                    prop_assert_eq!(one[0].lun_offset, s.lun_offset + b);
                }
                at += s.length;
            }
            prop_assert_eq!(at, (first + count) * 512);
            prop_assert!(pool.segments(v.id, v.size_bytes - 512, 1024, &mut segs).is_err());
        }
    }

    /// Every sector of every volume reads from where the definitions say, inside the volume's
    /// own extent, and no two sectors of the pool share a place.
    #[test]
    fn every_sector_maps_as_defined_and_to_a_place_of_its_own(pool in pool()) {
        let mut owner: FxHashMap<(usize, u64), (VolumeId, u64)> = FxHashMap::default();
        let mut plan = Plan::default();
        for v in pool.volumes() {
            for b in (0..v.size_bytes).step_by(512) {
                pool.plan(v.id, Op::Read, b, 512, &mut plan).unwrap();
                prop_assert_eq!(plan.reads.len(), 1, "{:?}", plan);
                prop_assert!(plan.writes.is_empty());
                let io = plan.reads[0];
                prop_assert_eq!((io.disk, io.offset_bytes), naive(&pool, v, b));
                let array = pool.array_of_disk(io.disk);
                let e = v.extents.iter().find(|e| e.array == array).unwrap();
                prop_assert!(e.disk_offset <= io.offset_bytes
                    && io.offset_bytes + 512 <= e.disk_offset + e.disk_bytes);
                if let Some(other) = owner.insert((io.disk, io.offset_bytes), (v.id, b)) {
                    prop_assert!(false, "{:?} and {:?} share a place", other, (v.id, b));
                }
            }
        }
    }

    /// A request of any length reads exactly the places of its sectors.
    #[test]
    fn a_long_read_touches_exactly_its_sectors(pool in pool(), start in any::<u64>(), len in 1u64..=64) {
        for v in pool.volumes() {
            let sectors = v.size_bytes / 512;
            let first = start % sectors;
            let count = len.min(sectors - first);
            let mut plan = Plan::default();
            pool.plan(v.id, Op::Read, first * 512, count * 512, &mut plan).unwrap();
            let mut got: Vec<(usize, u64)> = plan
                .reads
                .iter()
                .flat_map(|io| (0..io.length_bytes / 512).map(move |k| (io.disk, io.offset_bytes + k * 512)))
                .collect();
            let mut want: Vec<(usize, u64)> =
                (first..first + count).map(|s| naive(&pool, v, s * 512)).collect();
            got.sort_unstable();
            want.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }

    /// A RAID-5 write of one sector writes that sector and its row's parity, and nothing else.
    #[test]
    fn a_raid5_sector_write_writes_the_data_and_its_parity(pool in pool(), pick in any::<u64>()) {
        for v in pool.volumes() {
            let b = pick % (v.size_bytes / 512) * 512;
            let (disk, at) = naive(&pool, v, b);
            let array = pool.array_of_disk(disk);
            let spec = pool.arrays()[array];
            if spec.level != RaidLevel::Raid5 {
                continue;
            }
            let mut plan = Plan::default();
            pool.plan(v.id, Op::Write, b, 512, &mut plan).unwrap();
            prop_assert_eq!(plan.writes.len(), 2, "{:?}", plan);
            prop_assert!(plan.writes.iter().any(|io| io.disk == disk && io.offset_bytes == at));
            let parity = plan.writes.iter().find(|io| io.disk != disk).unwrap();
            // The parity is in the same row of the same array, at the same byte of the unit.
            prop_assert_eq!(pool.array_of_disk(parity.disk), array);
            prop_assert_eq!(parity.offset_bytes, at);
            prop_assert!(plan.reads.len() <= 2);
        }
    }
}

#[test]
fn a_full_array_refuses_with_the_largest_free_range_and_takes_nothing() {
    let mut pool =
        Pool::new(&[ArraySpec::raid5_4p(1 << 20), ArraySpec::raid5_4p(1 << 20)]).unwrap();
    // 4 MiB over one 4+p array: 1 MiB on each disk.
    pool.create("a", 4 << 20, 64 << 10, &[0]).unwrap();
    assert_eq!(pool.free_disk_bytes(0), 0);
    let err = pool.create("b", 1 << 20, 64 << 10, &[0, 1]).unwrap_err();
    assert_eq!(
        err,
        PoolError::NoSpace {
            array: 0,
            needed: 128 << 10,
            largest: 0
        }
    );
    assert_eq!(pool.free_disk_bytes(1), 1 << 20, "array 1 kept its space");
    assert!(pool.find("b").is_none());
}

#[test]
fn bad_requests_are_refused_by_name() {
    let mut pool = Pool::new(&[ArraySpec::raid5_4p(8 << 20)]).unwrap();
    assert_eq!(Pool::new(&[]).unwrap_err(), PoolError::NoArrays);
    assert!(matches!(
        Pool::new(&[ArraySpec {
            level: RaidLevel::Raid5,
            disks: 2,
            disk_bytes: 1 << 20
        }]),
        Err(PoolError::BadArray { array: 0, .. })
    ));
    assert_eq!(
        pool.create("", 4096, 4096, &[0]).unwrap_err(),
        PoolError::EmptyName
    );
    assert_eq!(
        pool.create("a", 1000, 4096, &[0]).unwrap_err(),
        PoolError::BadSize(1000)
    );
    assert_eq!(
        pool.create("a", 4096, 1000, &[0]).unwrap_err(),
        PoolError::BadStripeUnit(1000)
    );
    assert_eq!(
        pool.create("a", 4096, 4096, &[]).unwrap_err(),
        PoolError::NoPlacement
    );
    assert_eq!(
        pool.create_chunked("a", 4096, 4096, 0, &[0]).unwrap_err(),
        PoolError::BadChunk(0)
    );
    assert_eq!(
        pool.create("a", 4096, 4096, &[1]).unwrap_err(),
        PoolError::NoSuchArray(1)
    );
    pool.add_array(ArraySpec::raid5_4p(8 << 20)).unwrap();
    assert_eq!(
        pool.create("a", 4096, 4096, &[1, 1]).unwrap_err(),
        PoolError::ArrayTwice(1)
    );
    let id = pool.create("a", 1 << 20, 4096, &[0, 1]).unwrap();
    assert_eq!(
        pool.create("a", 4096, 4096, &[0]).unwrap_err(),
        PoolError::DuplicateName("a".into())
    );
    let mut plan = Plan::default();
    assert_eq!(
        pool.plan(id, Op::Read, (1 << 20) - 512, 1024, &mut plan)
            .unwrap_err(),
        PoolError::OutOfRange {
            offset: (1 << 20) - 512,
            end: (1 << 20) + 512,
            size: 1 << 20
        }
    );
    assert!(pool.plan(id, Op::Read, u64::MAX, 2, &mut plan).is_err());
}

#[test]
fn removed_space_is_merged_and_reused_and_restore_refuses_overlaps() {
    let mut pool = Pool::new(&[ArraySpec::raid5_4p(4 << 20)]).unwrap();
    let a = pool.create("a", 4 << 20, 64 << 10, &[0]).unwrap();
    let b = pool.create("b", 4 << 20, 64 << 10, &[0]).unwrap();
    let c = pool.create("c", 4 << 20, 64 << 10, &[0]).unwrap();
    assert_eq!(pool.volume(b).unwrap().extents[0].disk_offset, 1 << 20);
    pool.remove(a).unwrap();
    pool.remove(b).unwrap();
    // a and b's ranges merged: 2 MiB per disk at 0 holds an 8 MiB volume.
    let d = pool.create("d", 8 << 20, 64 << 10, &[0]).unwrap();
    assert_eq!(pool.volume(d).unwrap().extents[0].disk_offset, 0);
    let taken = pool.volume(c).unwrap().extents.clone();
    let err = pool.restore("e", 4 << 20, 64 << 10, 1, taken).unwrap_err();
    assert_eq!(
        err,
        PoolError::Overlap {
            a: "e".into(),
            b: "c".into(),
            array: 0
        }
    );
    let free = vec![Extent {
        array: 0,
        disk_offset: 3 << 20,
        disk_bytes: 1 << 20,
    }];
    pool.restore("e", 4 << 20, 64 << 10, 1, free).unwrap();
    assert_eq!(pool.free_disk_bytes(0), 0);
}

/// §3.2.2: with a 1 MB stripe unit a 2 MB aligned request touches two disks, narrow or wide;
/// wide, they are on two arrays.
#[test]
fn a_two_unit_request_touches_two_disks_under_either_policy() {
    let mut pool = Pool::new(&[ArraySpec::raid5_4p(64 << 20); 4]).unwrap();
    let narrow = pool.create("narrow", 64 << 20, 1 << 20, &[2]).unwrap();
    let wide = pool
        .create("wide", 64 << 20, 1 << 20, &[0, 1, 2, 3])
        .unwrap();
    let mut plan = Plan::default();
    pool.plan(narrow, Op::Read, 8 << 20, 2 << 20, &mut plan)
        .unwrap();
    assert_eq!(plan.reads.len(), 2);
    assert!(plan.reads.iter().all(|io| pool.array_of_disk(io.disk) == 2));
    pool.plan(wide, Op::Read, 8 << 20, 2 << 20, &mut plan)
        .unwrap();
    assert_eq!(plan.reads.len(), 2);
    assert_ne!(
        pool.array_of_disk(plan.reads[0].disk),
        pool.array_of_disk(plan.reads[1].disk)
    );
}

/// A volume manager striping whole RAID stripes across arrays: a 64 KB write with a 32 KB unit
/// stays on one array (one parity update), where unit-by-unit rotation splits it over two.
#[test]
fn whole_stripe_chunks_keep_a_small_write_on_one_array() {
    let mut pool = Pool::new(&[ArraySpec::raid5_4p(64 << 20); 4]).unwrap();
    let units = pool
        .create("units", 64 << 20, 32 << 10, &[0, 1, 2, 3])
        .unwrap();
    let stripes = pool
        .create_chunked("stripes", 64 << 20, 32 << 10, 4, &[0, 1, 2, 3])
        .unwrap();
    let mut plan = Plan::default();
    let arrays = |plan: &Plan, pool: &Pool| {
        let mut a: Vec<usize> = plan
            .writes
            .iter()
            .map(|io| pool.array_of_disk(io.disk))
            .collect();
        a.sort_unstable();
        a.dedup();
        a
    };
    pool.plan(units, Op::Write, 0, 64 << 10, &mut plan).unwrap();
    assert_eq!(arrays(&plan, &pool), vec![0, 1]);
    assert_eq!(
        plan.writes.len(),
        4,
        "two data units, two parities: {plan:?}"
    );
    pool.plan(stripes, Op::Write, 0, 64 << 10, &mut plan)
        .unwrap();
    assert_eq!(arrays(&plan, &pool), vec![0]);
    assert_eq!(plan.writes.len(), 3, "two data units, one parity: {plan:?}");
    // The next whole stripe (128 KB on) is on the next array.
    pool.plan(stripes, Op::Read, 128 << 10, 4096, &mut plan)
        .unwrap();
    assert_eq!(pool.array_of_disk(plan.reads[0].disk), 1);
}
