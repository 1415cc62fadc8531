//! Workload generators calibrated to the papers. Each is a time-ordered stream of the trace
//! crate's [`Record`], so a generated workload and a real trace are interchangeable: every
//! `cordillera trace …` and `sim replay` command accepts `gen:NAME[:key=value,…]` in place of a
//! file (see [`open_spec`]).
//!
//! - [`OnOff`]: Poisson ON-OFF request streams with exponential request sizes, in pairs whose ON
//!   periods overlap by a chosen correlation in [−1, 1] (striping paper §3.1).
//! - [`Zipf`]: 4 KiB reads with Zipf popularity over an address space (Bonfire §6.1).
//! - [`Diurnal`]: Poisson load following an hour-of-day curve with a peak-to-trough ratio (Sierra §2).
//! - [`Bursty`]: volumes with a base load and peaks of a given peak-to-mean ratio, read fraction
//!   and concentration on one volume (Everest §2, Table 1).
//! - [`ExchangeLike`]: Everest's three peak episodes (Table 1) in an Exchange-like mail server
//!   trace: `gen:exchange-like`.
//! - [`HotmailLike`]: eight back-end volumes of a web mail service over whole days, diurnal,
//!   with a 2-hour maintenance peak after midnight (Sierra §2, §4.2): `gen:hotmail-like`.
//! - [`Reaccess`]: a week of Bonfire's hourly and daily reaccess patterns (§3):
//!   `gen:reaccess`.

mod bursty;
mod diurnal;
mod exchange;
mod hotmail;
mod onoff;
mod reaccess;
mod zipf;

use cordillera_trace::format::Format;
use cordillera_trace::{
    ReadSummary, Record, RecordReader, TraceError, TraceInfo, VolumeId, VolumeTable,
};
use cordillera_types::units::{GIB, KIB, NS_PER_HOUR, NS_PER_S};
use cordillera_types::Op;

use crate::rng::SimRng;

pub use bursty::*;
pub use diurnal::*;
pub use exchange::*;
pub use hotmail::*;
pub use onoff::*;
pub use reaccess::*;
pub use zipf::*;

/// A generated trace as a [`RecordReader`].
pub struct Generated {
    info: TraceInfo,
    volumes: VolumeTable,
    records: Box<dyn Iterator<Item = Record>>,
    summary: ReadSummary,
}

impl Generated {
    pub fn new(volume_names: &[String], records: Box<dyn Iterator<Item = Record>>) -> Generated {
        let mut volumes = VolumeTable::new();
        for name in volume_names {
            volumes.intern(name.as_bytes()).expect("few volumes");
        }
        Generated {
            // Generated traces start at the MSR Cambridge traces' start, so hours of day read naturally.
            info: TraceInfo {
                format: Format::Binary,
                origin_unix_ns: Some(cordillera_trace::synth::SYNTH_ORIGIN_UNIX_NS),
                has_time: true,
                last_line_unterminated: false,
            },
            volumes,
            records,
            summary: ReadSummary::default(),
        }
    }
}

impl Generated {
    /// The same trace with its time 0 at `origin_unix_ns` on the wall clock.
    pub fn with_origin(mut self, origin_unix_ns: i64) -> Generated {
        self.info.origin_unix_ns = Some(origin_unix_ns);
        self
    }
}

impl RecordReader for Generated {
    fn info(&self) -> &TraceInfo {
        &self.info
    }
    fn volumes(&self) -> &VolumeTable {
        &self.volumes
    }
    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        let record = self.records.next();
        if record.is_some() {
            self.summary.records += 1;
            self.summary.lines += 1;
        }
        Ok(record)
    }
    fn summary(&self) -> &ReadSummary {
        &self.summary
    }
}

// ---------------------------------------------------------------------------------------------

/// Generated workloads are bounded so a mistyped parameter cannot exhaust the machine.
pub const GENERATED_VOLUMES_MAX: u32 = 4096;
pub const GENERATED_RATE_MAX_PER_S: f64 = 10_000_000.0;

/// Opens a generated workload from a specification such as
/// `gen:zipf:alpha=1,count=100000` or `gen:bursty:peak_to_mean=10`. Names: `zipf`, `diurnal`,
/// `bursty`, `onoff`, `exchange-like`, `hotmail-like`, `reaccess`; keys are the fields of each generator (sizes accept `64k`, `50g`).
pub fn open_spec(spec: &str) -> Result<Generated, String> {
    let body = spec
        .strip_prefix("gen:")
        .ok_or("a generator specification starts with gen:")?;
    let (name, params) = body.split_once(':').unwrap_or((body, ""));
    let mut kv: Vec<(String, String)> = Vec::new();
    for pair in params.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?}: expected key=value"))?;
        kv.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut take = |key: &str| {
        kv.iter()
            .position(|(k, _)| k == key)
            .map(|i| kv.remove(i).1)
    };
    // Every number parsed below is finite, so plain comparisons validate them.
    let num = |v: Option<String>, default: f64| -> Result<f64, String> {
        v.map_or(Ok(default), |s| match s.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(format!("{s:?} is not a finite number")),
        })
    };
    let size = |v: Option<String>, default: u64| -> Result<u64, String> {
        v.map_or(Ok(default), |s| cordillera_models::presets::parse_size(&s))
    };
    let generated = match name {
        "zipf" => {
            let d = Zipf::bonfire();
            let z = Zipf {
                count: num(take("count"), d.count as f64)? as u64,
                alpha: num(take("alpha"), d.alpha)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                rate_per_s: num(take("rate"), d.rate_per_s)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
            };
            if z.alpha <= 0.0 || z.alpha > 10.0 || z.rate_per_s <= 0.0 || z.span_bytes < 4096 {
                return Err("zipf needs 0 < alpha ≤ 10, rate > 0 and a span of at least 4k".into());
            }
            Generated::new(&["zipf".to_owned()], Box::new(z.records()))
        }
        "diurnal" => {
            let g = Diurnal {
                days: num(take("days"), 2.0)? as u64,
                mean_rate_per_s: num(take("rate"), 50.0)?,
                peak_to_trough: num(take("peak_to_trough"), 4.0)?,
                peak_hour: num(take("peak_hour"), 15.0)?,
                read_fraction: num(take("read_fraction"), 0.7)?,
                request_bytes: size(take("bs"), 64 * KIB)?,
                span_bytes: size(take("span"), 100 * GIB)?,
                seed: num(take("seed"), 1.0)? as u64,
            };
            if g.peak_to_trough < 1.0
                || g.mean_rate_per_s <= 0.0
                || g.mean_rate_per_s * g.peak_to_trough > GENERATED_RATE_MAX_PER_S
                || g.request_bytes == 0
                || g.span_bytes < g.request_bytes
                || !(0.0..=1.0).contains(&g.read_fraction)
            {
                return Err("diurnal needs peak_to_trough ≥ 1, rate > 0, 0 < bs ≤ span and read_fraction in [0, 1]".into());
            }
            Generated::new(&["diurnal".to_owned()], Box::new(g.records()))
        }
        "reaccess" => {
            let d = Reaccess::bonfire();
            let g = Reaccess {
                days: num(take("days"), d.days as f64)? as u64,
                rate_per_s: num(take("rate"), d.rate_per_s)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
                volumes: num(take("volumes"), d.volumes as f64)? as u32,
                new_span_bytes: size(take("span"), d.new_span_bytes)?,
            };
            g.validate()?;
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        "exchange-like" => {
            let d = ExchangeLike::everest();
            let g = ExchangeLike {
                duration_s: num(take("duration_s"), d.duration_s as f64)? as u64,
                peak_rate_per_s: num(take("peak_rate"), d.peak_rate_per_s)?,
                peak_to_mean: num(take("peak_to_mean"), d.peak_to_mean)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
                ..d
            };
            g.validate()?;
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        "hotmail-like" => {
            let d = HotmailLike::sierra();
            let g = HotmailLike {
                days: num(take("days"), d.days as f64)? as u64,
                peak_rate_per_s: num(take("peak_rate"), d.peak_rate_per_s)?,
                trough: num(take("trough"), d.trough)?,
                sharpness: num(take("sharpness"), d.sharpness)?,
                peak_hour: num(take("peak_hour"), d.peak_hour)?,
                maintenance_hours: num(take("maintenance_hours"), d.maintenance_hours as f64)?
                    as u64,
                maintenance_factor: num(take("maintenance"), d.maintenance_factor)?,
                day_noise: num(take("day_noise"), d.day_noise)?,
                read_fraction: num(take("read_fraction"), d.read_fraction)?,
                mean_request_bytes: size(take("mean_bs"), d.mean_request_bytes)?,
                sequential_fraction: num(take("sequential"), d.sequential_fraction)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
                ..d
            };
            g.validate()?;
            Generated::new(&g.volume_names(), Box::new(g.records()))
                .with_origin(HOTMAIL_ORIGIN_UNIX_NS)
        }
        "bursty" => {
            let d = Bursty::everest();
            let g = Bursty {
                volumes: num(take("volumes"), d.volumes as f64)? as u32,
                duration_s: num(take("duration_s"), d.duration_s as f64)? as u64,
                base_rate_per_s: num(take("rate"), d.base_rate_per_s)?,
                peaks: num(take("peaks"), d.peaks as f64)? as u32,
                peak_s: num(take("peak_s"), d.peak_s as f64)? as u64,
                peak_to_mean: num(take("peak_to_mean"), d.peak_to_mean)?,
                peak_read_fraction: num(take("peak_read_fraction"), d.peak_read_fraction)?,
                base_read_fraction: num(take("read_fraction"), d.base_read_fraction)?,
                concentration: num(take("concentration"), d.concentration)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
            };
            if g.volumes == 0
                || g.peak_s == 0
                || g.duration_s == 0
                || g.span_bytes < 8 * KIB
                || !(0.0..=1.0).contains(&g.concentration)
            {
                return Err("bursty needs volumes > 0, peak_s > 0, duration_s > 0, span ≥ 8k and concentration in [0, 1]".into());
            }
            if g.base_rate_per_s <= 0.0
                || g.peak_to_mean < 1.0
                || !(0.0..=1.0).contains(&g.peak_read_fraction)
                || !(0.0..=1.0).contains(&g.base_read_fraction)
            {
                return Err(
                    "bursty needs rate > 0, peak_to_mean ≥ 1 and read fractions in [0, 1]".into(),
                );
            }
            if g.volumes > GENERATED_VOLUMES_MAX
                || g.base_rate_per_s * g.volumes as f64 * g.peak_to_mean > GENERATED_RATE_MAX_PER_S
            {
                return Err(format!("bursty: at most {GENERATED_VOLUMES_MAX} volumes and {GENERATED_RATE_MAX_PER_S} requests/s at peak"));
            }
            let d = (g.peak_schedule().len() as u64 * g.peak_s) as f64 / g.duration_s as f64;
            if g.peak_to_mean * d >= 1.0 {
                return Err(format!(
                    "peaks covering {:.1} % of the time cannot reach a peak-to-mean of {}: use fewer or shorter peaks",
                    100.0 * d,
                    g.peak_to_mean
                ));
            }
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        "onoff" => {
            let pairs = num(take("pairs"), 2.0)? as usize;
            let correlation = num(take("correlation"), 0.0)?;
            if !(-1.0..=1.0).contains(&correlation)
                || pairs == 0
                || pairs > GENERATED_VOLUMES_MAX as usize / 2
            {
                return Err(format!(
                    "onoff needs 1 to {} pairs and correlation in [-1, 1]",
                    GENERATED_VOLUMES_MAX / 2
                ));
            }
            let large_rate = num(take("large_rate"), 20.0)?;
            let small_rate = num(take("small_rate"), 100.0)?;
            if !(large_rate > 0.0 && small_rate > 0.0)
                || (large_rate + small_rate) * pairs as f64 > GENERATED_RATE_MAX_PER_S
            {
                return Err(format!("onoff needs positive rates, at most {GENERATED_RATE_MAX_PER_S} requests/s in all"));
            }
            let g = OnOff {
                pairs: (0..pairs)
                    .map(|_| {
                        (
                            Stream::large(large_rate),
                            Stream::small(small_rate),
                            correlation,
                        )
                    })
                    .collect(),
                mean_on_s: num(take("mean_on_s"), 10.0)?,
                duration_s: num(take("duration_s"), 600.0)?,
                span_bytes: size(take("span"), 64 * GIB)?,
                seed: num(take("seed"), 1.0)? as u64,
                cross_correlation: num(take("cross_correlation"), 0.0)?,
            };
            if !(0.0..=1.0).contains(&g.cross_correlation) {
                return Err("onoff needs cross_correlation in [0, 1]".into());
            }
            // ON periods are laid out up front: bound their number.
            if !(g.mean_on_s > 0.0 && g.duration_s > 0.0)
                || g.duration_s / g.mean_on_s > 1e6
                || g.span_bytes < 2 * 1024 * 1024
            {
                return Err(
                    "onoff needs mean_on_s > 0, 0 < duration_s ≤ 10^6 × mean_on_s and a span of at least 2m".into(),
                );
            }
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        other => {
            return Err(format!(
                "unknown generator {other:?}; one of zipf, diurnal, bursty, onoff, exchange-like, hotmail-like, reaccess"
            ))
        }
    };
    if let Some((k, _)) = kv.first() {
        return Err(format!("unknown parameter {k:?} for gen:{name}"));
    }
    Ok(generated)
}
