//! `trace reaccess`: Bonfire §3 — when, how far apart and how clustered reaccesses are.
//!
//! At 4 KiB block granularity, per volume:
//! - **temporal classes** of each reaccess by the time since the previous access to the block:
//!   *hourly* (≤ 1 h), *daily* (23–25 h), *other*; counted per reaccess and per block (a block may
//!   show several classes, as in Bonfire Figure 1a), with the wall-clock hour of daily
//!   reaccesses (Figure 2);
//! - **reuse distance**: distinct bytes accessed between the access and the reaccess, exact
//!   (see [`crate::reuse`]), bucketed < 10 MiB, 10 MiB–1 GiB, 1–10 GiB, > 10 GiB (Figure 3);
//! - **spatial clustering**: over the 1 MiB regions holding reaccesses of a class, the mean
//!   percentage of their 256 blocks that are reaccessed in that class (Figure 4).

use cordillera_types::units::{BLOCK_BYTES, GIB, MIB, NS_PER_DAY, NS_PER_HOUR};
use cordillera_types::ByteRange;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::record::{Record, TraceInfo, VolumeId, VolumeTable};
use crate::reuse::ReuseDistance;

const BLOCKS_PER_REGION: u64 = MIB / BLOCK_BYTES;
const CLASSES: [&str; 3] = ["hourly", "daily", "other"];
const HOURLY: usize = 0;
const DAILY: usize = 1;
const OTHER: usize = 2;

/// Reuse-distance bucket bounds in bytes: < 10 MiB, < 1 GiB, < 10 GiB, the rest.
const REUSE_BOUNDS_BYTES: [u64; 3] = [10 * MIB, GIB, 10 * GIB];
const REUSE_BUCKETS: [&str; 4] = ["<10MiB", "10MiB-1GiB", "1GiB-10GiB", ">10GiB"];

#[derive(Clone, Debug, Serialize)]
pub struct ClassReport {
    pub class: &'static str,
    /// Reaccesses in this class.
    pub reaccesses: u64,
    /// Percentage of all reaccesses.
    pub reaccess_pct: Option<f64>,
    /// Distinct blocks with at least one reaccess in this class.
    pub blocks: u64,
    /// Percentage of reaccessed blocks (Bonfire Figure 1a; classes overlap).
    pub block_pct: Option<f64>,
    /// 1 MiB regions holding reaccesses of this class.
    pub regions: u64,
    /// Mean over those regions of the percentage of their 4 KiB blocks reaccessed in this class.
    pub clustering_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReuseBucket {
    pub bucket: &'static str,
    pub reaccesses: u64,
    pub pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct VolumeReaccess {
    pub volume: String,
    pub block_accesses: u64,
    /// Distinct 4 KiB blocks accessed: the working set.
    pub distinct_blocks: u64,
    pub reaccesses: u64,
    pub reaccess_pct: Option<f64>,
    /// Blocks reaccessed at least once.
    pub reaccessed_blocks: u64,
    pub classes: Vec<ClassReport>,
    /// Daily reaccesses by hour of day (UTC plus the offset asked for; trace-relative hours when
    /// the trace has no wall clock).
    pub daily_by_hour: [u64; 24],
    pub reuse_distance: Vec<ReuseBucket>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReaccessReport {
    /// Whether hours are wall-clock (the trace has absolute timestamps).
    pub wall_clock: bool,
    pub utc_offset_h: i64,
    /// False for traces without timestamps: temporal classes are then meaningless.
    pub has_time: bool,
    pub volumes: Vec<VolumeReaccess>,
    /// All volumes together (sums; clustering over all regions).
    pub total: VolumeReaccess,
}

#[derive(Default)]
struct BlockState {
    last_ns: i64,
    classes: u8,
}

#[derive(Default)]
struct VolumeAccumulator {
    /// Each block's reuse slot and its state, in one table.
    reuse: ReuseDistance<BlockState>,
    block_accesses: u64,
    reaccesses: u64,
    class_reaccesses: [u64; 3],
    daily_by_hour: [u64; 24],
    reuse_buckets: [u64; 4],
    /// Per class: 1 MiB region → bitmap of its 256 blocks reaccessed in the class.
    regions: [FxHashMap<u64, [u64; 4]>; 3],
}

/// Accumulates a [`ReaccessReport`].
pub struct ReaccessBuilder {
    utc_offset_ns: i64,
    volumes: Vec<Option<VolumeAccumulator>>,
}

impl ReaccessBuilder {
    pub fn new(utc_offset_h: i64) -> ReaccessBuilder {
        ReaccessBuilder {
            utc_offset_ns: utc_offset_h * NS_PER_HOUR,
            volumes: Vec::new(),
        }
    }

    pub fn add(&mut self, record: &Record, info: &TraceInfo) {
        let index = record.volume.index();
        if self.volumes.len() <= index {
            self.volumes.resize_with(index + 1, || None);
        }
        let volume = self.volumes[index].get_or_insert_with(VolumeAccumulator::default);
        let clock_ns = info.origin_unix_ns.unwrap_or(0) + self.utc_offset_ns + record.time_ns;
        for block in ByteRange::new(record.offset_bytes, record.length_bytes).blocks(BLOCK_BYTES) {
            volume.block_accesses += 1;
            let (distance, state) = volume.reuse.touch(block);
            let Some(distance) = distance else {
                state.last_ns = record.time_ns;
                continue;
            };
            let gap_ns = record.time_ns.saturating_sub(state.last_ns).abs();
            state.last_ns = record.time_ns;
            let class = if gap_ns <= NS_PER_HOUR {
                HOURLY
            } else if (23 * NS_PER_HOUR..=25 * NS_PER_HOUR).contains(&gap_ns) {
                DAILY
            } else {
                OTHER
            };
            state.classes |= 1 << class;
            volume.reaccesses += 1;
            volume.class_reaccesses[class] += 1;
            if class == DAILY {
                let hour = clock_ns.rem_euclid(NS_PER_DAY) / NS_PER_HOUR;
                volume.daily_by_hour[hour as usize] += 1;
            }
            let bytes = distance.saturating_mul(BLOCK_BYTES);
            let bucket = REUSE_BOUNDS_BYTES
                .iter()
                .take_while(|b| bytes >= **b)
                .count();
            volume.reuse_buckets[bucket] += 1;
            let bit = block % BLOCKS_PER_REGION;
            let bitmap = volume.regions[class]
                .entry(block / BLOCKS_PER_REGION)
                .or_default();
            bitmap[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    /// Takes in the volumes another builder (with the same UTC offset) accumulated, so that
    /// volumes can be accumulated on several threads; a volume must be in only one builder.
    pub fn absorb(&mut self, other: ReaccessBuilder) {
        assert_eq!(self.utc_offset_ns, other.utc_offset_ns, "one UTC offset");
        if self.volumes.len() < other.volumes.len() {
            self.volumes.resize_with(other.volumes.len(), || None);
        }
        for (mine, theirs) in self.volumes.iter_mut().zip(other.volumes) {
            if let Some(acc) = theirs {
                assert!(mine.is_none(), "a volume accumulated by two builders");
                *mine = Some(acc);
            }
        }
    }

    pub fn finish(self, names: &VolumeTable, info: &TraceInfo) -> ReaccessReport {
        let mut volumes = Vec::new();
        let mut total = Totals::default();
        for (index, acc) in self.volumes.iter().enumerate() {
            let Some(acc) = acc else { continue };
            let name = names.name(VolumeId(index as u32)).to_owned();
            let mut one = Totals::default();
            one.add(acc);
            total.add(acc);
            volumes.push(one.report(name));
        }
        ReaccessReport {
            wall_clock: info.origin_unix_ns.is_some(),
            utc_offset_h: self.utc_offset_ns / NS_PER_HOUR,
            has_time: info.has_time,
            volumes,
            total: total.report("total".to_owned()),
        }
    }
}

/// Counts of one volume or of several, ready to report.
#[derive(Default)]
struct Totals {
    block_accesses: u64,
    reaccesses: u64,
    reaccessed_blocks: u64,
    distinct_blocks: u64,
    class_reaccesses: [u64; 3],
    class_blocks: [u64; 3],
    regions: [u64; 3],
    region_block_sum: [u64; 3],
    daily_by_hour: [u64; 24],
    reuse_buckets: [u64; 4],
}

impl Totals {
    fn add(&mut self, acc: &VolumeAccumulator) {
        self.block_accesses += acc.block_accesses;
        self.reaccesses += acc.reaccesses;
        self.distinct_blocks += acc.reuse.distinct_blocks();
        for state in acc.reuse.values() {
            if state.classes != 0 {
                self.reaccessed_blocks += 1;
            }
            for class in 0..3 {
                if state.classes & (1 << class) != 0 {
                    self.class_blocks[class] += 1;
                }
            }
        }
        for class in 0..3 {
            self.class_reaccesses[class] += acc.class_reaccesses[class];
            self.regions[class] += acc.regions[class].len() as u64;
            self.region_block_sum[class] += acc.regions[class]
                .values()
                .map(|bits| bits.iter().map(|w| w.count_ones() as u64).sum::<u64>())
                .sum::<u64>();
        }
        for hour in 0..24 {
            self.daily_by_hour[hour] += acc.daily_by_hour[hour];
        }
        for bucket in 0..4 {
            self.reuse_buckets[bucket] += acc.reuse_buckets[bucket];
        }
    }

    fn report(&self, volume: String) -> VolumeReaccess {
        let pct = |part: u64, whole: u64| (whole > 0).then(|| 100.0 * part as f64 / whole as f64);
        VolumeReaccess {
            volume,
            block_accesses: self.block_accesses,
            distinct_blocks: self.distinct_blocks,
            reaccesses: self.reaccesses,
            reaccess_pct: pct(self.reaccesses, self.block_accesses),
            reaccessed_blocks: self.reaccessed_blocks,
            classes: (0..3)
                .map(|c| ClassReport {
                    class: CLASSES[c],
                    reaccesses: self.class_reaccesses[c],
                    reaccess_pct: pct(self.class_reaccesses[c], self.reaccesses),
                    blocks: self.class_blocks[c],
                    block_pct: pct(self.class_blocks[c], self.reaccessed_blocks),
                    regions: self.regions[c],
                    clustering_pct: pct(
                        self.region_block_sum[c],
                        self.regions[c] * BLOCKS_PER_REGION,
                    ),
                })
                .collect(),
            daily_by_hour: self.daily_by_hour,
            reuse_distance: (0..4)
                .map(|b| ReuseBucket {
                    bucket: REUSE_BUCKETS[b],
                    reaccesses: self.reuse_buckets[b],
                    pct: pct(self.reuse_buckets[b], self.reaccesses),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use cordillera_types::Op;

    fn at(time_ns: i64, block: u64, blocks: u64) -> Record {
        Record {
            time_ns,
            volume: VolumeId(0),
            op: Op::Read,
            offset_bytes: block * BLOCK_BYTES,
            length_bytes: blocks * BLOCK_BYTES,
            response_ns: None,
        }
    }

    #[test]
    fn classes_reuse_and_clustering() {
        let mut names = VolumeTable::new();
        names.intern(b"v").unwrap();
        // Origin at 01:00 UTC.
        let info = TraceInfo {
            format: Format::Msr,
            origin_unix_ns: Some(NS_PER_HOUR),
            has_time: true,
            last_line_unterminated: false,
        };
        let mut b = ReaccessBuilder::new(0);
        let h = NS_PER_HOUR;
        b.add(&at(0, 0, 1), &info); // block 0: first access
        b.add(&at(1, 1, 3000), &info); // 3000 other blocks (≈ 11.7 MiB)
        b.add(&at(h / 2, 0, 1), &info); // hourly, distance 3000 blocks
        b.add(&at(h / 2 + 1, 0, 1), &info); // hourly, distance 0
        b.add(&at(h / 2 + 24 * h, 0, 1), &info); // daily, at 01:30 + 24 h → hour 1
        b.add(&at(h / 2 + 80 * h, 0, 1), &info); // other
        let r = b.finish(&names, &info);
        let v = &r.volumes[0];
        assert_eq!(v.block_accesses, 3005);
        assert_eq!(v.reaccesses, 4);
        assert_eq!(v.reaccessed_blocks, 1);
        let counts: Vec<u64> = v.classes.iter().map(|c| c.reaccesses).collect();
        assert_eq!(counts, vec![2, 1, 1]);
        // Block 0 shows all three classes.
        assert!(v
            .classes
            .iter()
            .all(|c| c.blocks == 1 && c.block_pct == Some(100.0)));
        assert_eq!(v.daily_by_hour[1], 1);
        assert_eq!(v.daily_by_hour.iter().sum::<u64>(), 1);
        let reuse: Vec<u64> = v.reuse_distance.iter().map(|b| b.reaccesses).collect();
        assert_eq!(
            reuse,
            vec![3, 1, 0, 0],
            "3000 blocks is 11.7 MiB: the 10 MiB–1 GiB bucket"
        );
        // One region holds the reaccesses of each class, one block of 256 in it.
        for c in &v.classes {
            assert_eq!(c.regions, 1);
            assert!((c.clustering_pct.unwrap() - 100.0 / 256.0).abs() < 1e-9);
        }
    }
}
