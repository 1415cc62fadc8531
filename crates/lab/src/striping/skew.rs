//! §3.4's trace-driven experiment (Figures 8–10): request streams (each the requests of one
//! volume, a UMass ASU) partitioned onto arrays by the greedy partitioner with write-weighted
//! IOPS (narrow), or each striped over all arrays (wide). Per-stream mean and p95 response
//! times, per-array utilization over time; optionally two streams of one array stop early
//! (Figure 10).
//!
//! Streams come from a [`Source`] that can be opened more than once (statistics, then one
//! replay per policy), so a trace of any length streams through in constant memory.
//! [`table2`] is the built-in source: Table 2's five traces, WebSearch from a real fragment
//! when one is given (looped, the second and third traces phase-shifted and thinned to their
//! rates) and otherwise, like both Financial traces, generated from Table 2's rates and sizes.

use std::sync::Arc;

use cordillera_models::histogram::Histogram;
use cordillera_trace::{Record, VolumeId as TraceVolume};
use cordillera_types::rng::SimRng;
use cordillera_types::Op;

use super::sim::{self, RunReport};
use super::streams::{merge, Looped};
use cordillera_striping::policy::{self, Partition, Policy};
use cordillera_striping::pool::{ArraySpec, Pool};

/// Records in time order (`volume`: the stream's index in the source's names), or an error.
pub type Records = Box<dyn Iterator<Item = Result<Record, String>>>;

/// Streams that can be read from the start as often as needed.
pub struct Source {
    pub names: Vec<String>,
    pub open: Arc<dyn Fn() -> Result<Records, String> + Send + Sync>,
    /// What the streams are, for reports ("WebSearch 1–3 from …, Financial generated …").
    pub description: String,
}

/// One row of Table 2.
#[derive(Clone, Copy, Debug)]
pub struct TraceRow {
    pub name: &'static str,
    pub key: &'static str,
    pub read_iops: f64,
    pub write_iops: f64,
    pub mean_request_bytes: f64,
    pub streams: usize,
}

/// Table 2, as the paper states it.
pub const TABLE_2: [TraceRow; 5] = [
    TraceRow {
        name: "Web Search 1",
        key: "web1",
        read_iops: 334.91,
        write_iops: 0.07,
        mean_request_bytes: 15509.33,
        streams: 6,
    },
    TraceRow {
        name: "Web Search 2",
        key: "web2",
        read_iops: 297.48,
        write_iops: 0.06,
        mean_request_bytes: 15432.40,
        streams: 6,
    },
    TraceRow {
        name: "Web Search 3",
        key: "web3",
        read_iops: 188.01,
        write_iops: 0.06,
        mean_request_bytes: 15771.97,
        streams: 6,
    },
    TraceRow {
        name: "Financial 1",
        key: "fin1",
        read_iops: 28.27,
        write_iops: 93.79,
        mean_request_bytes: 3465.99,
        streams: 24,
    },
    TraceRow {
        name: "Financial 2",
        key: "fin2",
        read_iops: 74.31,
        write_iops: 15.93,
        mean_request_bytes: 2448.94,
        streams: 19,
    },
];

/// Epochs of a generated stream: its rate is redrawn (exponential around its mean) every
/// exponentially distributed epoch of this mean length, so load varies over time while the
/// mean matches Table 2.
pub const GENERATED_EPOCH_S: f64 = 30.0;
/// Offsets of generated streams: uniform over this span.
pub const GENERATED_SPAN_BYTES: u64 = 4 << 30;

/// Shares of a trace's rate among its streams: Zipf with exponent 1 (a few streams carry most
/// of the load, as in the UMass traces), or for WebSearch three active streams and three
/// near-idle ones, as in the fragment (8,340 / 8,231 / 8,187 / 8 / 7 / 10 requests); the
/// paper's nine near-idle streams held under 1,000 requests together over hours, so the
/// stand-ins get a hundred-thousandth of their trace's rate each.
fn shares(row: &TraceRow) -> Vec<f64> {
    let raw: Vec<f64> = if row.key.starts_with("web") {
        (0..row.streams)
            .map(|i| if i < 3 { 1.0 } else { 1e-5 })
            .collect()
    } else {
        (0..row.streams).map(|i| 1.0 / (i + 1) as f64).collect()
    };
    let total: f64 = raw.iter().sum();
    raw.iter().map(|x| x / total).collect()
}

/// A generated stream: Poisson arrivals at a rate redrawn every epoch, exponential sizes
/// (multiples of 512 bytes), uniform offsets.
struct Generated {
    volume: u32,
    rng: SimRng,
    read_per_ns: f64,
    write_per_ns: f64,
    mean_bytes: f64,
    end_ns: f64,
    t: f64,
    epoch_end: f64,
    factor: f64,
}

impl Iterator for Generated {
    type Item = Record;
    fn next(&mut self) -> Option<Record> {
        let rate = self.read_per_ns + self.write_per_ns;
        loop {
            if self.t >= self.end_ns || rate <= 0.0 {
                return None;
            }
            if self.t >= self.epoch_end {
                self.epoch_end = self.t + self.rng.exponential(GENERATED_EPOCH_S * 1e9);
                self.factor = self.rng.exponential(1.0);
            }
            let gap = self.rng.exponential(1.0 / (rate * self.factor.max(1e-9)));
            if self.t + gap > self.epoch_end {
                // Memoryless: restart the draw at the epoch's end with its new rate.
                self.t = self.epoch_end;
                continue;
            }
            self.t += gap;
            if self.t >= self.end_ns {
                return None;
            }
            let op = if self.rng.chance(self.write_per_ns / rate) {
                Op::Write
            } else {
                Op::Read
            };
            let sectors = (self.rng.exponential(self.mean_bytes / 512.0).round() as u64).max(1);
            let length = sectors * 512;
            let offset = self.rng.below(GENERATED_SPAN_BYTES / 512) * 512;
            return Some(Record {
                time_ns: self.t as i64,
                volume: TraceVolume(self.volume),
                op,
                offset_bytes: offset,
                length_bytes: length,
                response_ns: None,
            });
        }
    }
}

/// A recorded WebSearch fragment: opened as often as needed, its length and its rate.
#[derive(Clone)]
pub struct Fragment {
    pub name: String,
    pub open: Arc<dyn Fn() -> Result<Records, String> + Send + Sync>,
    /// From its first request to its last, plus one mean gap.
    pub period_ns: i64,
    /// Requests per second over the period.
    pub rate_per_s: f64,
}

impl Fragment {
    /// Measures a fragment (one pass); its times must start near 0 and be in order.
    pub fn new(
        name: &str,
        open: Arc<dyn Fn() -> Result<Records, String> + Send + Sync>,
    ) -> Result<Fragment, String> {
        let (mut first, mut last, mut n) = (None, 0i64, 0u64);
        for r in open()? {
            let r = r?;
            first.get_or_insert(r.time_ns);
            last = r.time_ns;
            n += 1;
        }
        let Some(first) = first else {
            return Err(format!("{name}: no requests"));
        };
        if n < 100 || last <= first {
            return Err(format!("{name}: {n} requests, too few to loop"));
        }
        let span = last - first;
        let period_ns = last + span / (n as i64 - 1);
        Ok(Fragment {
            name: name.to_string(),
            open,
            period_ns,
            rate_per_s: n as f64 / (period_ns as f64 / 1e9),
        })
    }
}

/// Table 2's 61 streams for `duration_s` seconds. WebSearch 1 is `fragment` looped when given
/// (WebSearch 2 and 3: the same fragment from a third and two thirds of its length, thinned to
/// their rates relative to WebSearch 1's); otherwise generated like Financial 1 and 2.
pub fn table2(fragment: Option<Fragment>, duration_s: f64, seed: u64) -> Source {
    let mut names = Vec::new();
    for row in &TABLE_2 {
        for s in 0..row.streams {
            names.push(format!("{}/{s}", row.key));
        }
    }
    let description = match &fragment {
        Some(f) => format!(
            "WebSearch 1–3 from {} ({:.0} requests/s, looped every {:.1} s; 2 and 3 phase-shifted and thinned to Table 2's rates), Financial 1 and 2 generated from Table 2",
            f.name,
            f.rate_per_s,
            f.period_ns as f64 / 1e9
        ),
        None => "all five traces generated from Table 2 (rates, write fractions, mean sizes; rate redrawn every ~30 s)".to_string(),
    };
    let end_ns = (duration_s * 1e9) as i64;
    let open = Arc::new(move || -> Result<Records, String> {
        let mut parts: Vec<Records> = Vec::new();
        let mut volume = 0u32;
        for (t, row) in TABLE_2.iter().enumerate() {
            let stream_seed = t as u64 * 1000;
            match (&fragment, row.key.starts_with("web")) {
                (Some(f), true) => {
                    let web = t; // 0, 1, 2
                    let map = (0..row.streams as u32).map(|a| Some(volume + a)).collect();
                    let mut looped = Looped::new(
                        f.open.clone(),
                        f.period_ns,
                        map,
                        end_ns,
                        SimRng::new(seed, stream_seed),
                    );
                    looped.phase_ns = f.period_ns * web as i64 / 3;
                    looped.keep = row.read_iops / TABLE_2[0].read_iops;
                    parts.push(Box::new(looped));
                }
                _ => {
                    for (s, share) in shares(row).into_iter().enumerate() {
                        let g = Generated {
                            volume: volume + s as u32,
                            rng: SimRng::new(seed, stream_seed + 1 + s as u64),
                            read_per_ns: row.read_iops * share / 1e9,
                            write_per_ns: row.write_iops * share / 1e9,
                            mean_bytes: row.mean_request_bytes,
                            end_ns: end_ns as f64,
                            t: 0.0,
                            epoch_end: 0.0,
                            factor: 1.0,
                        };
                        parts.push(Box::new(g.map(Ok)));
                    }
                }
            }
            volume += row.streams as u32;
        }
        Ok(merge(parts))
    });
    Source {
        names,
        open,
        description,
    }
}

/// What the first pass learned of a stream.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StreamInfo {
    pub name: String,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
    /// §3.4's load metric over the run: reads + 4 × writes per second.
    pub weighted_iops: f64,
    /// Its set under narrow striping.
    pub array: usize,
}

/// How the experiment runs.
#[derive(Clone, Debug)]
pub struct SkewOptions {
    pub arrays: usize,
    pub array: ArraySpec,
    pub preset: String,
    /// Stripe unit of every store (§3.4 keeps §3.2's setup: 32 KB for small requests).
    pub stripe_unit_bytes: u64,
    pub wide_chunk_units: u64,
    pub duration_s: f64,
    pub interval_s: f64,
    pub seed: u64,
    /// Streams with fewer requests than this fraction of the mean stream's are dropped (§3.4
    /// dropped 9 near-idle WebSearch streams).
    pub idle_fraction: f64,
    /// Figure 10: at this time, the `stop_streams` busiest streams of narrow array
    /// `stop_array` end.
    pub stop: Option<Stop>,
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Stop {
    pub at_s: f64,
    pub array: usize,
    pub streams: usize,
}

impl SkewOptions {
    pub fn paper(duration_s: f64, seed: u64) -> SkewOptions {
        SkewOptions {
            arrays: 4,
            array: ArraySpec::raid5_4p(super::experiment::FUJITSU_DISK_BYTES),
            preset: "fujitsu-maj3182mc".into(),
            stripe_unit_bytes: policy::DEFAULT_SMALL_STRIPE_UNIT,
            wide_chunk_units: 1,
            duration_s,
            interval_s: 10.0,
            seed,
            idle_fraction: 0.01,
            stop: None,
        }
    }

    /// The same experiment on arrays of the user's device: each of the `arrays` arrays is
    /// `device`'s array (its level and disk count; the stripe unit stays §3.4's), or one device
    /// alone when it names no array; each disk holds the device's whole capacity.
    pub fn on_device(mut self, device: &crate::devices::DeviceSpec) -> Result<SkewOptions, String> {
        use cordillera_models::device::raid::RaidLevel;
        let disk_bytes = cordillera_models::presets::device(device.kind.preset)?.capacity_bytes();
        self.preset = device.kind.preset.to_owned();
        self.array = match &device.array {
            None => ArraySpec {
                level: RaidLevel::Raid0,
                disks: 1,
                disk_bytes,
            },
            Some(a) => ArraySpec {
                level: a.level,
                disks: a.disks,
                disk_bytes,
            },
        };
        Ok(self)
    }
}

/// Both runs of the experiment.
#[derive(Clone, Debug)]
pub struct SkewRun {
    /// The streams kept, in pool volume order.
    pub streams: Vec<StreamInfo>,
    pub dropped: Vec<StreamInfo>,
    pub partition: Partition,
    /// Indices into `streams` of the streams stopped early.
    pub stopped: Vec<usize>,
    pub narrow: RunReport,
    pub wide: RunReport,
}

impl SkewRun {
    /// Wide over narrow mean response time of the streams of each narrow array (those not
    /// stopped early), and of each stream.
    pub fn array_ratios(&self) -> Vec<Option<f64>> {
        (0..self.partition.loads.len())
            .map(|a| {
                let mean = |r: &RunReport| {
                    let mut h = Histogram::new();
                    for (i, s) in self.streams.iter().enumerate() {
                        if s.array == a && !self.stopped.contains(&i) {
                            h.merge(&r.volumes[i].histogram);
                        }
                    }
                    h.mean_ns()
                };
                Some(mean(&self.wide)? / mean(&self.narrow)?)
            })
            .collect()
    }
}

/// The first pass: per-stream counts over `[0, duration)`.
pub fn measure(source: &Source, duration_s: f64) -> Result<Vec<StreamInfo>, String> {
    let mut infos: Vec<StreamInfo> = source
        .names
        .iter()
        .map(|n| StreamInfo {
            name: n.clone(),
            ..Default::default()
        })
        .collect();
    let mut origin = None;
    let end = (duration_s * 1e9) as i64;
    for r in (source.open)()? {
        let r = r?;
        let origin = *origin.get_or_insert(r.time_ns);
        if r.time_ns - origin >= end {
            break;
        }
        let Some(s) = infos.get_mut(r.volume.0 as usize) else {
            return Err(format!(
                "a record of stream {} of {}",
                r.volume.0,
                source.names.len()
            ));
        };
        s.requests += 1;
        s.bytes += r.length_bytes;
        if r.op.is_write() {
            s.writes += 1;
        } else {
            s.reads += 1;
        }
    }
    for s in &mut infos {
        s.weighted_iops = policy::weighted_iops(s.reads as f64, s.writes as f64) / duration_s;
    }
    Ok(infos)
}

/// Runs the experiment: measure, drop idle streams, partition, replay narrow and wide.
pub fn run(source: &Source, o: &SkewOptions) -> Result<SkewRun, String> {
    if o.arrays == 0 {
        return Err("at least one array".into());
    }
    let infos = measure(source, o.duration_s)?;
    let mean = infos.iter().map(|s| s.requests).sum::<u64>() as f64 / infos.len().max(1) as f64;
    let (mut streams, mut dropped) = (Vec::new(), Vec::new());
    // Pool volume index of each source stream.
    let mut index: Vec<Option<u32>> = vec![None; infos.len()];
    for (i, s) in infos.into_iter().enumerate() {
        if (s.requests as f64) < o.idle_fraction * mean || s.requests == 0 {
            dropped.push(s);
        } else {
            index[i] = Some(streams.len() as u32);
            streams.push(s);
        }
    }
    if streams.len() < o.arrays {
        return Err(format!(
            "{} active stream(s) ({} near-idle dropped) for {} arrays: narrow striping would leave arrays empty",
            streams.len(),
            dropped.len(),
            o.arrays
        ));
    }
    let loads: Vec<f64> = streams.iter().map(|s| s.weighted_iops).collect();
    let partition = policy::greedy_partition(&loads, o.arrays, 0.01, 10_000, o.seed);
    for (s, a) in streams.iter_mut().zip(&partition.assignment) {
        s.array = *a;
    }
    let mut stopped = Vec::new();
    if let Some(stop) = o.stop {
        if stop.array >= o.arrays {
            return Err(format!("stop array {} of {}", stop.array, o.arrays));
        }
        let mut on: Vec<usize> = (0..streams.len())
            .filter(|&i| streams[i].array == stop.array)
            .collect();
        on.sort_by(|&a, &b| {
            streams[b]
                .weighted_iops
                .total_cmp(&streams[a].weighted_iops)
        });
        stopped = on.into_iter().take(stop.streams).collect();
    }
    // Equal stores, as many as the most crowded narrow array holds.
    let per_array = (0..o.arrays)
        .map(|a| streams.iter().filter(|s| s.array == a).count())
        .max()
        .unwrap_or(1)
        .max(1) as u64;
    let data = o.array.disk_bytes * o.array.data_disks() as u64;
    let step =
        (4u64 << 20) * o.arrays as u64 * o.array.data_disks() as u64 * o.wide_chunk_units.max(1);
    let size = (data / per_array).saturating_sub(step) / step * step;
    if size == 0 {
        return Err(format!(
            "{per_array} streams do not fit an array: each store would be smaller than one wide stripe step ({} MiB) of the array's {:.1} GB",
            step >> 20,
            data as f64 / 1e9
        ));
    }
    let replay = |policy: Policy| -> Result<RunReport, String> {
        let mut pool = Pool::new(&vec![o.array; o.arrays]).map_err(|e| e.to_string())?;
        let all: Vec<usize> = (0..o.arrays).collect();
        for s in &streams {
            let (arrays, chunk) = match policy {
                Policy::Narrow => (vec![s.array], 1),
                Policy::Wide => (all.clone(), o.wide_chunk_units),
            };
            pool.create_chunked(&s.name, size, o.stripe_unit_bytes, chunk, &arrays)
                .map_err(|e| format!("{}: {e}", s.name))?;
        }
        let mut device = sim::device(pool, &o.preset)?;
        let stop_ns = o.stop.map(|s| (s.at_s * 1e9) as i64);
        let end = (o.duration_s * 1e9) as i64;
        let mut error = None;
        let mut origin = None;
        let records = (source.open)()?.map_while(|r| match r {
            Ok(r) => Some(r),
            Err(e) => {
                error = Some(e);
                None
            }
        });
        let records = records
            .take_while(|r| r.time_ns - *origin.get_or_insert(r.time_ns) < end)
            .filter_map(|mut r| {
                let v = index.get(r.volume.0 as usize).copied().flatten()?;
                if stop_ns.is_some_and(|t| r.time_ns >= t) && stopped.contains(&(v as usize)) {
                    return None;
                }
                r.volume = TraceVolume(v);
                Some(r)
            });
        let report = sim::run(&mut device, records, (o.interval_s * 1e9) as u64);
        match error {
            Some(e) => Err(e),
            None => Ok(report),
        }
    };
    let narrow = replay(Policy::Narrow)?;
    let wide = replay(Policy::Wide)?;
    Ok(SkewRun {
        streams,
        dropped,
        partition,
        stopped,
        narrow,
        wide,
    })
}

/// Quantiles `qs` of a series (nearest rank).
pub fn quantiles(series: &[f64], qs: &[f64]) -> Vec<f64> {
    let mut sorted = series.to_vec();
    sorted.sort_by(f64::total_cmp);
    qs.iter()
        .map(|q| {
            if sorted.is_empty() {
                return f64::NAN;
            }
            let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[i]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_table2_streams_match_their_rates_and_are_time_ordered() {
        let s = table2(None, 600.0, 3);
        assert_eq!(s.names.len(), 61);
        let infos = measure(&s, 600.0).unwrap();
        let sum = |key: &str, f: &dyn Fn(&StreamInfo) -> u64| -> f64 {
            infos
                .iter()
                .filter(|i| i.name.starts_with(key))
                .map(f)
                .sum::<u64>() as f64
                / 600.0
        };
        for row in &TABLE_2 {
            let reads = sum(row.key, &|i| i.reads);
            let writes = sum(row.key, &|i| i.writes);
            // Rates redrawn every ~30 s around their mean: within 25 % over 600 s.
            assert!(
                (reads - row.read_iops).abs() < 0.25 * row.read_iops + 1.0,
                "{}: {reads} reads/s",
                row.name
            );
            assert!(
                (writes - row.write_iops).abs() < 0.25 * row.write_iops + 1.0,
                "{}: {writes} writes/s",
                row.name
            );
        }
        let mut last = i64::MIN;
        for r in (s.open)().unwrap() {
            let r = r.unwrap();
            assert!(r.time_ns >= last);
            last = r.time_ns;
            assert!(r.length_bytes >= 512 && r.length_bytes % 512 == 0);
        }
        // The same seed gives the same streams, another seed others.
        let again = measure(&table2(None, 600.0, 3), 600.0).unwrap();
        let other = measure(&table2(None, 600.0, 4), 600.0).unwrap();
        assert_eq!(infos[30].requests, again[30].requests);
        assert_ne!(
            infos.iter().map(|i| i.requests).collect::<Vec<_>>(),
            other.iter().map(|i| i.requests).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_looped_fragment_repeats_with_its_phase_and_thinning() {
        let records: Arc<Vec<Record>> = Arc::new(
            (0..1000)
                .map(|i| Record {
                    time_ns: i * 10_000_000,
                    volume: TraceVolume((i % 3) as u32),
                    op: Op::Read,
                    offset_bytes: 0,
                    length_bytes: 4096,
                    response_ns: None,
                })
                .collect(),
        );
        let f = Fragment::new(
            "ten seconds",
            Arc::new(move || {
                let r = records.clone();
                Ok(Box::new((0..r.len()).map(move |i| Ok(r[i]))) as Records)
            }),
        )
        .unwrap();
        assert_eq!(f.period_ns, 10_000_000_000);
        let s = table2(Some(f), 35.0, 1);
        let infos = measure(&s, 35.0).unwrap();
        let web1: u64 = infos[0..6].iter().map(|i| i.requests).sum();
        // 3.5 loops of 1,000 requests, all kept.
        assert_eq!(web1, 3500);
        let web3: u64 = infos[12..18].iter().map(|i| i.requests).sum();
        let expected = 3500.0 * 188.01 / 334.91;
        assert!((web3 as f64 - expected).abs() < 0.1 * expected, "{web3}");
        assert_eq!(infos[3].requests, 0, "the fragment has three volumes");
    }

    /// A small version of Figures 8–9 and 10: four arrays, generated Table 2 streams; the
    /// partition is balanced by mean load, wide striping spreads every array's load alike, and
    /// stopping array 2's two busiest streams leaves it the quietest array under narrow.
    #[test]
    fn narrow_arrays_balanced_by_mean_load_differ_over_time_and_wide_ones_do_not() {
        let source = table2(None, 300.0, 5);
        let mut o = SkewOptions::paper(300.0, 5);
        o.stop = Some(Stop {
            at_s: 30.0,
            array: 1,
            streams: 2,
        });
        let r = run(&source, &o).unwrap();
        assert!(r.partition.imbalance < 0.05, "{:?}", r.partition);
        // Near-idle WebSearch stand-ins (3 of 6 per trace) dropped.
        assert_eq!(r.dropped.len(), 9, "{:?}", r.dropped);
        assert_eq!(r.streams.len(), 52);
        assert_eq!(r.stopped.len(), 2);
        let spread = |u: &[f64]| {
            u.iter().copied().fold(f64::MIN, f64::max) - u.iter().copied().fold(f64::MAX, f64::min)
        };
        let wide = spread(&r.wide.array_mean_utilization);
        let narrow = spread(&r.narrow.array_mean_utilization);
        assert!(
            wide < 0.02,
            "wide arrays alike: {:?}",
            r.wide.array_mean_utilization
        );
        assert!(
            narrow > 2.0 * wide,
            "narrow arrays apart once array 1 goes quiet: {:?}",
            r.narrow.array_mean_utilization
        );
        let quiet = r.narrow.array_mean_utilization[1];
        assert!(
            r.narrow
                .array_mean_utilization
                .iter()
                .enumerate()
                .all(|(a, u)| a == 1 || *u > quiet),
            "{:?}",
            r.narrow.array_mean_utilization
        );
        let ratios = r.array_ratios();
        assert!(ratios.iter().all(Option::is_some));
        assert_eq!(r.narrow.volumes.len(), 52);
        let requests: u64 = r.narrow.volumes.iter().map(|v| v.requests).sum();
        let wide_requests: u64 = r.wide.volumes.iter().map(|v| v.requests).sum();
        assert_eq!(
            requests, wide_requests,
            "both policies see the same requests"
        );
    }
}
