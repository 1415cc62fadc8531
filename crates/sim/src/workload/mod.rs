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
    let mut params = Params::parse(params)?;
    let generated = match name {
        "zipf" => gen_zipf(&mut params)?,
        "diurnal" => gen_diurnal(&mut params)?,
        "reaccess" => gen_reaccess(&mut params)?,
        "exchange-like" => gen_exchange_like(&mut params)?,
        "hotmail-like" => gen_hotmail_like(&mut params)?,
        "bursty" => gen_bursty(&mut params)?,
        "onoff" => gen_onoff(&mut params)?,
        other => {
            return Err(format!(
                "unknown generator {other:?}; one of zipf, diurnal, bursty, onoff, exchange-like, hotmail-like, reaccess"
            ))
        }
    };
    if let Some((k, _)) = params.kv.first() {
        return Err(format!("unknown parameter {k:?} for gen:{name}"));
    }
    Ok(generated)
}

/// A generator's `key=value` parameters; each is taken once (what is left is unknown).
struct Params {
    kv: Vec<(String, String)>,
}

impl Params {
    fn parse(params: &str) -> Result<Params, String> {
        let mut kv: Vec<(String, String)> = Vec::new();
        for pair in params.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?}: expected key=value"))?;
            kv.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        Ok(Params { kv })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        self.kv
            .iter()
            .position(|(k, _)| k == key)
            .map(|i| self.kv.remove(i).1)
    }

    /// A number, `default` when absent; every number parsed is finite, so plain comparisons
    /// validate them.
    fn num(&mut self, key: &str, default: f64) -> Result<f64, String> {
        self.take(key)
            .map_or(Ok(default), |s| match s.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(format!("{s:?} is not a finite number")),
            })
    }

    /// A number, `None` when absent.
    fn opt_num(&mut self, key: &str) -> Result<Option<f64>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(s) => match s.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
                _ => Err(format!("{key}: {s:?} is not a finite number of at least 0")),
            },
        }
    }

    /// A size (`64k`, `50g`), `default` when absent.
    fn size(&mut self, key: &str, default: u64) -> Result<u64, String> {
        self.take(key)
            .map_or(Ok(default), |s| cordillera_models::presets::parse_size(&s))
    }
}

/// `gen:zipf`: Zipf-distributed block accesses (Bonfire's default).
fn gen_zipf(p: &mut Params) -> Result<Generated, String> {
    let d = Zipf::bonfire();
    let z = Zipf {
        count: p.num("count", d.count as f64)? as u64,
        alpha: p.num("alpha", d.alpha)?,
        span_bytes: p.size("span", d.span_bytes)?,
        rate_per_s: p.num("rate", d.rate_per_s)?,
        seed: p.num("seed", d.seed as f64)? as u64,
    };
    if z.alpha <= 0.0 || z.alpha > 10.0 || z.rate_per_s <= 0.0 || z.span_bytes < 4096 {
        return Err("zipf needs 0 < alpha ≤ 10, rate > 0 and a span of at least 4k".into());
    }
    Ok(Generated::new(&["zipf".to_owned()], Box::new(z.records())))
}

/// `gen:diurnal`: A day-night cycle of a mean rate, peak to trough.
fn gen_diurnal(p: &mut Params) -> Result<Generated, String> {
    let g = Diurnal {
        days: p.num("days", 2.0)? as u64,
        mean_rate_per_s: p.num("rate", 50.0)?,
        peak_to_trough: p.num("peak_to_trough", 4.0)?,
        peak_hour: p.num("peak_hour", 15.0)?,
        read_fraction: p.num("read_fraction", 0.7)?,
        request_bytes: p.size("bs", 64 * KIB)?,
        span_bytes: p.size("span", 100 * GIB)?,
        seed: p.num("seed", 1.0)? as u64,
    };
    if g.peak_to_trough < 1.0
        || g.mean_rate_per_s <= 0.0
        || g.mean_rate_per_s * g.peak_to_trough > GENERATED_RATE_MAX_PER_S
        || g.request_bytes == 0
        || g.span_bytes < g.request_bytes
        || !(0.0..=1.0).contains(&g.read_fraction)
    {
        return Err(
            "diurnal needs peak_to_trough ≥ 1, rate > 0, 0 < bs ≤ span and read_fraction in [0, 1]"
                .into(),
        );
    }
    Ok(Generated::new(
        &["diurnal".to_owned()],
        Box::new(g.records()),
    ))
}

/// `gen:reaccess`: Volumes re-reading what they read on earlier days (Bonfire's re-access).
fn gen_reaccess(p: &mut Params) -> Result<Generated, String> {
    let d = Reaccess::bonfire();
    let g = Reaccess {
        days: p.num("days", d.days as f64)? as u64,
        rate_per_s: p.num("rate", d.rate_per_s)?,
        seed: p.num("seed", d.seed as f64)? as u64,
        volumes: p.num("volumes", d.volumes as f64)? as u32,
        new_span_bytes: p.size("span", d.new_span_bytes)?,
    };
    g.validate()?;
    Ok(Generated::new(&g.volume_names(), Box::new(g.records())))
}

/// `gen:exchange-like`: Exchange-like peaks over a quiet base (Everest's Figure 2 shape).
fn gen_exchange_like(p: &mut Params) -> Result<Generated, String> {
    let d = ExchangeLike::everest();
    let g = ExchangeLike {
        duration_s: p.num("duration_s", d.duration_s as f64)? as u64,
        peak_rate_per_s: p.num("peak_rate", d.peak_rate_per_s)?,
        peak_to_mean: p.num("peak_to_mean", d.peak_to_mean)?,
        span_bytes: p.size("span", d.span_bytes)?,
        seed: p.num("seed", d.seed as f64)? as u64,
        ..d
    };
    g.validate()?;
    Ok(Generated::new(&g.volume_names(), Box::new(g.records())))
}

/// `gen:hotmail-like`: A Hotmail-like week of diurnal load with maintenance hours (Sierra).
fn gen_hotmail_like(p: &mut Params) -> Result<Generated, String> {
    let d = HotmailLike::sierra();
    let g = HotmailLike {
        days: p.num("days", d.days as f64)? as u64,
        hours: p.opt_num("hours")?.map(|h| h as u64),
        peak_rate_per_s: p.num("peak_rate", d.peak_rate_per_s)?,
        trough: p.num("trough", d.trough)?,
        sharpness: p.num("sharpness", d.sharpness)?,
        peak_hour: p.num("peak_hour", d.peak_hour)?,
        maintenance_hours: p.num("maintenance_hours", d.maintenance_hours as f64)? as u64,
        maintenance_factor: p.num("maintenance", d.maintenance_factor)?,
        day_noise: p.num("day_noise", d.day_noise)?,
        read_fraction: p.num("read_fraction", d.read_fraction)?,
        mean_request_bytes: p.size("mean_bs", d.mean_request_bytes)?,
        sequential_fraction: p.num("sequential", d.sequential_fraction)?,
        span_bytes: p.size("span", d.span_bytes)?,
        seed: p.num("seed", d.seed as f64)? as u64,
        ..d
    };
    g.validate()?;
    Ok(
        Generated::new(&g.volume_names(), Box::new(g.records()))
            .with_origin(HOTMAIL_ORIGIN_UNIX_NS),
    )
}

/// `gen:bursty`: Volumes with peaks of concentrated writes over a base rate (Everest).
fn gen_bursty(p: &mut Params) -> Result<Generated, String> {
    let d = Bursty::everest();
    let g = Bursty {
        volumes: p.num("volumes", d.volumes as f64)? as u32,
        duration_s: p.num("duration_s", d.duration_s as f64)? as u64,
        base_rate_per_s: p.num("rate", d.base_rate_per_s)?,
        peaks: p.num("peaks", d.peaks as f64)? as u32,
        peak_s: p.num("peak_s", d.peak_s as f64)? as u64,
        peak_to_mean: p.num("peak_to_mean", d.peak_to_mean)?,
        peak_read_fraction: p.num("peak_read_fraction", d.peak_read_fraction)?,
        base_read_fraction: p.num("read_fraction", d.base_read_fraction)?,
        concentration: p.num("concentration", d.concentration)?,
        span_bytes: p.size("span", d.span_bytes)?,
        seed: p.num("seed", d.seed as f64)? as u64,
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
        return Err("bursty needs rate > 0, peak_to_mean ≥ 1 and read fractions in [0, 1]".into());
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
    Ok(Generated::new(&g.volume_names(), Box::new(g.records())))
}

/// `gen:onoff`: Pairs of ON/OFF streams of large and small requests (striping).
fn gen_onoff(p: &mut Params) -> Result<Generated, String> {
    let pairs = p.num("pairs", 2.0)? as usize;
    let correlation = p.num("correlation", 0.0)?;
    if !(-1.0..=1.0).contains(&correlation)
        || pairs == 0
        || pairs > GENERATED_VOLUMES_MAX as usize / 2
    {
        return Err(format!(
            "onoff needs 1 to {} pairs and correlation in [-1, 1]",
            GENERATED_VOLUMES_MAX / 2
        ));
    }
    let large_rate = p.num("large_rate", 20.0)?;
    let small_rate = p.num("small_rate", 100.0)?;
    if !(large_rate > 0.0 && small_rate > 0.0)
        || (large_rate + small_rate) * pairs as f64 > GENERATED_RATE_MAX_PER_S
    {
        return Err(format!(
            "onoff needs positive rates, at most {GENERATED_RATE_MAX_PER_S} requests/s in all"
        ));
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
        mean_on_s: p.num("mean_on_s", 10.0)?,
        duration_s: p.num("duration_s", 600.0)?,
        span_bytes: p.size("span", 64 * GIB)?,
        seed: p.num("seed", 1.0)? as u64,
        cross_correlation: p.num("cross_correlation", 0.0)?,
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
    Ok(Generated::new(&g.volume_names(), Box::new(g.records())))
}
