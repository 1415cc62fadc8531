//! A week of Bonfire's hourly and daily reaccess patterns (§3).

use super::*;

/// Two volumes with Bonfire's reaccess patterns (§3), for the warm-up lab (`gen:reaccess`):
/// - `hourly`: most requests reaccess what the volume touched recently (a recency-driven
///   working set, like MSR proj1 or usr: mostly within minutes, some hours back), the rest go
///   to long-lived popular data (Zipf over 1 GiB) or to new data at a moving frontier;
/// - `daily`: a nightly job reads the same 2 GiB region sequentially from 02:00 to 03:00 every
///   day (like src11 and web2), over a light background of popular and new data.
///
/// Both follow a diurnal curve (peak at 14:00, three times the trough). The trace starts at
/// 17:00 UTC like the MSR traces.
#[derive(Clone, Debug)]
pub struct Reaccess {
    pub days: u64,
    /// Mean requests per second of the hourly volume (the daily one's background is a third).
    pub rate_per_s: f64,
    pub seed: u64,
    /// Volumes: even ones follow the hourly pattern, odd ones the daily one (default 2).
    pub volumes: u32,
    /// Span of each volume's new data, which wraps around it (default 56 GiB): with the
    /// popular GiB and the nightly 2 GiB, it bounds the working set.
    pub new_span_bytes: u64,
}

impl Reaccess {
    pub fn bonfire() -> Reaccess {
        Reaccess {
            days: 7,
            rate_per_s: 2.0,
            seed: 1,
            volumes: 2,
            new_span_bytes: 56 * GIB,
        }
    }

    pub fn volume_names(&self) -> Vec<String> {
        (0..self.volumes)
            .map(|v| match (v, v % 2) {
                (0, _) => "hourly".to_owned(),
                (1, _) => "daily".to_owned(),
                (_, 0) => format!("hourly_{v}"),
                _ => format!("daily_{v}"),
            })
            .collect()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.days == 0 || self.days > 366 || !(self.rate_per_s > 0.0 && self.rate_per_s <= 1e5) {
            return Err("reaccess needs 1–366 days and 0 < rate ≤ 100000".into());
        }
        if self.volumes == 0 || self.volumes > 4096 {
            return Err("reaccess needs 1 to 4096 volumes".into());
        }
        if self.new_span_bytes < 64 * cordillera_types::units::MIB || self.new_span_bytes > 1 << 50
        {
            return Err("reaccess needs a span of new data from 64 MiB to 1 PiB".into());
        }
        Ok(())
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        const BLOCK: u64 = 4 * KIB;
        const RECENT: usize = 1 << 18;
        // Reaccess distances in requests: most about 15 minutes back at the mean rate, some
        // about six hours back.
        const MEAN_BACK_NEAR: f64 = 2000.0;
        const MEAN_BACK_FAR: f64 = 45_000.0;
        const FAR_SHARE: f64 = 0.4;
        const POPULAR_BLOCKS: u64 = GIB / BLOCK;
        const NEW_BASE: u64 = 8 * GIB;
        let new_span: u64 = self.new_span_bytes;
        let volumes = self.volumes as usize;
        const NIGHTLY_BASE: u64 = 4 * GIB;
        const NIGHTLY_BYTES: u64 = 2 * GIB;
        const NIGHTLY_READ: u64 = 64 * KIB;
        let spec = self.clone();
        let diurnal = Diurnal {
            days: spec.days,
            mean_rate_per_s: spec.rate_per_s,
            peak_to_trough: 3.0,
            peak_hour: 14.0,
            read_fraction: 0.0,
            request_bytes: BLOCK,
            span_bytes: BLOCK,
            seed: spec.seed,
        };
        let mut rng = SimRng::new(spec.seed, 7);
        let mut popular = ZipfSampler::new(POPULAR_BLOCKS, 1.0);
        // Per volume: the recent requests (offset, size) and the new-data frontier.
        let mut recent: Vec<Vec<(u64, u64)>> = vec![Vec::new(); volumes];
        let mut at: Vec<usize> = vec![0; volumes];
        let mut frontier: Vec<u64> = (0..volumes as u64)
            .map(|v| v * (new_span / volumes as u64) / BLOCK * BLOCK)
            .collect();
        let mut second = 0u64;
        let end_s = spec.days * 24 * 3600;
        let mut batch: Vec<Record> = Vec::new();
        let mut next = 0usize;
        std::iter::from_fn(move || loop {
            if next < batch.len() {
                next += 1;
                return Some(batch[next - 1]);
            }
            if second >= end_s {
                return None;
            }
            batch.clear();
            next = 0;
            let hour = (17 + second / 3600) % 24;
            let factor = diurnal.factor(hour as f64 + (second % 3600) as f64 / 3600.0);
            for v in 0..volumes {
                let hourly = v % 2 == 0;
                let rate = spec.rate_per_s * factor * if hourly { 1.0 } else { 1.0 / 3.0 };
                for _ in 0..rng.poisson(rate) {
                    let u = rng.unit();
                    let filled = recent[v].len();
                    let mean = if rng.chance(FAR_SHARE) {
                        MEAN_BACK_FAR
                    } else {
                        MEAN_BACK_NEAR
                    };
                    let back = (1 + rng.exponential(mean) as usize).min(RECENT);
                    let (reaccess, popular_share) = if hourly { (0.55, 0.25) } else { (0.0, 0.5) };
                    let (offset, size, read) = if u < reaccess && back <= filled {
                        let (o, s) = recent[v][(at[v] + RECENT - back) % RECENT];
                        (o, s, rng.chance(0.75))
                    } else if u < reaccess + popular_share {
                        let block = scatter(popular.sample(&mut rng) - 1, POPULAR_BLOCKS);
                        (block * BLOCK, BLOCK * (1 + rng.below(2)), rng.chance(0.8))
                    } else {
                        let size = BLOCK * (1 + rng.below(8));
                        let o = NEW_BASE + frontier[v];
                        frontier[v] = (frontier[v] + size) % (new_span - 32 * KIB);
                        (o, size, rng.chance(0.3))
                    };
                    if filled < RECENT {
                        recent[v].push((offset, size));
                    } else {
                        recent[v][at[v]] = (offset, size);
                    }
                    at[v] = (at[v] + 1) % RECENT;
                    batch.push(Record {
                        time_ns: second as i64 * NS_PER_S + rng.below(NS_PER_S as u64) as i64,
                        volume: VolumeId(v as u32),
                        op: if read { Op::Read } else { Op::Write },
                        offset_bytes: offset,
                        length_bytes: size,
                        response_ns: None,
                    });
                }
            }
            if hour == 2 {
                // The nightly job: the region read once, in order, over the hour.
                let reads = NIGHTLY_BYTES / NIGHTLY_READ;
                let (from, to) = (
                    (second % 3600) * reads / 3600,
                    (second % 3600 + 1) * reads / 3600,
                );
                for (v, k) in (1..volumes)
                    .step_by(2)
                    .flat_map(|v| (from..to).map(move |k| (v, k)))
                {
                    batch.push(Record {
                        time_ns: second as i64 * NS_PER_S + rng.below(NS_PER_S as u64) as i64,
                        volume: VolumeId(v as u32),
                        op: Op::Read,
                        offset_bytes: NIGHTLY_BASE + k * NIGHTLY_READ,
                        length_bytes: NIGHTLY_READ,
                        response_ns: None,
                    });
                }
            }
            batch.sort_by_key(|r| r.time_ns);
            second += 1;
        })
    }
}
