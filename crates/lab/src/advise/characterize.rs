//! The one streaming pass that characterizes a trace: `trace stats`, `peaks`, `reaccess` and
//! `profile` at once, and what the verdicts derive from them.

use cordillera_trace::peaks::{EpisodeAlign, PeaksBuilder, PeaksOptions, PeaksReport};
use cordillera_trace::profile::{ProfileBuilder, ProfileReport};
use cordillera_trace::reaccess::{ReaccessBuilder, ReaccessReport};
use cordillera_trace::stats::{StatsBuilder, TraceStats};
use cordillera_trace::RecordReader;
use cordillera_types::units::{NS_PER_HOUR, NS_PER_S};
use serde::Serialize;

/// What the characterization pass measured.
#[derive(Clone, Debug, Serialize)]
pub struct Characterization {
    pub source: String,
    pub records: u64,
    pub volumes: usize,
    /// From the first request to the last, s.
    pub duration_s: f64,
    pub has_time: bool,
    pub wall_clock: bool,
    pub read_pct: Option<f64>,
    pub mean_request_bytes: Option<f64>,
    /// Working set, 4 KiB blocks over every volume.
    pub working_set_bytes: u64,
    /// The rate windows and segments the peaks were found with (derived from the duration).
    pub peaks_options: PeaksSettings,
    pub stats: TraceStats,
    pub peaks: PeaksReport,
    pub reaccess: ReaccessReport,
    /// Hourly buckets; `None` for a trace without timestamps.
    pub profile: Option<ProfileReport>,
    /// Malformed lines skipped (only with skipping asked for).
    pub skipped_lines: u64,
    /// Each volume's name by its id in the trace's records.
    #[serde(skip)]
    pub volume_names: Vec<String>,
    /// The trace's first requests ([`crate::devices::SAMPLE_REQUESTS`]), for fitting the device.
    #[serde(skip)]
    pub sample: Vec<cordillera_trace::Record>,
    /// What reading did besides reading: the time unit chosen, a header skipped, records put
    /// in time order.
    pub reading_notes: Vec<String>,
}

/// Peak detection settings, scaled to the trace.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PeaksSettings {
    pub rate_window_s: f64,
    pub segment_s: f64,
    pub episodes: usize,
}

impl PeaksSettings {
    pub fn options(&self) -> PeaksOptions {
        PeaksOptions {
            rate_window_ns: (self.rate_window_s * 1e9).round() as i64,
            segment_ns: (self.segment_s * 1e9).round() as i64,
            top: self.episodes,
            align: EpisodeAlign::Centred,
            ..PeaksOptions::default()
        }
    }
}

/// Everest's settings (1-minute rate windows, 15-minute segments) for a trace of three hours
/// or more; a shorter trace keeps the same proportions over its length: segments of a
/// twelfth of it, rate windows of a fifteenth of a segment (at least 1 s).
pub fn peaks_settings(duration_s: f64) -> PeaksSettings {
    if duration_s >= 3.0 * 3600.0 {
        return PeaksSettings {
            rate_window_s: 60.0,
            segment_s: 900.0,
            episodes: 3,
        };
    }
    let window = ((duration_s / 12.0 / 15.0).floor()).max(1.0);
    PeaksSettings {
        rate_window_s: window,
        segment_s: window * 15.0,
        episodes: 3,
    }
}

/// Reads the trace once: first its duration is unknown, so peaks are found with windows fit
/// for the trace's length by a second, cheap pass when the trace is shorter than three hours.
/// `each` sees every record of the first pass (the miss-ratio curve is fed from it).
pub fn characterize(
    source: &str,
    open: &(dyn Fn() -> Result<Box<dyn RecordReader>, String> + Send + Sync),
    progress: &(dyn Fn(&str) + Sync),
    each: &mut dyn FnMut(&cordillera_trace::Record),
) -> Result<Characterization, String> {
    let long = peaks_settings(f64::INFINITY);
    let mut reader = open()?;
    let mut stats = StatsBuilder::new(60 * NS_PER_S);
    let mut peaks = PeaksBuilder::new(long.options())?;
    let mut reaccess = ReaccessBuilder::new(0);
    let mut profile = ProfileBuilder::new(NS_PER_HOUR, 0)?;
    let (mut first, mut last, mut records) = (i64::MAX, i64::MIN, 0u64);
    let mut sample = Vec::new();
    let info = reader.info().clone();
    let started = std::time::Instant::now();
    let mut next_report = std::time::Duration::from_secs(2);
    while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
        records += 1;
        each(&r);
        if sample.len() < crate::devices::SAMPLE_REQUESTS {
            sample.push(r);
        }
        first = first.min(r.time_ns);
        last = last.max(r.time_ns);
        stats.add(&r);
        peaks.add(&r);
        reaccess.add(&r, &info);
        if info.has_time {
            profile.add(&r, &info);
        }
        if records.is_multiple_of(1 << 14) && started.elapsed() >= next_report {
            progress(&format!(
                "characterizing: {:.1} M requests read",
                records as f64 / 1e6
            ));
            next_report = started.elapsed() + std::time::Duration::from_secs(2);
        }
    }
    if records == 0 {
        return Err("the trace has no requests".into());
    }
    let names = reader.volumes().clone();
    let info = reader.info().clone();
    let skipped_lines = reader.summary().invalid_skipped;
    let mut reading_notes: Vec<String> = crate::input::time_unit_note(reader.summary())
        .into_iter()
        .collect();
    reading_notes.extend(crate::input::reading_notes(reader.summary()));
    drop(reader);
    let duration_s = (last - first) as f64 / 1e9;
    let settings = peaks_settings(duration_s);
    let peaks = if settings.rate_window_s == long.rate_window_s {
        peaks.finish(&names, info.origin_unix_ns)
    } else {
        progress("finding the peaks again with windows fit for a short trace");
        let mut reader = open()?;
        let mut short = PeaksBuilder::new(settings.options())?;
        // The busiest rate over the same windows as the peaks': a minute says nothing of a
        // trace of two minutes.
        stats = StatsBuilder::new((settings.rate_window_s * 1e9).round() as i64);
        while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
            short.add(&r);
            stats.add(&r);
        }
        short.finish(&names, info.origin_unix_ns)
    };
    let stats = stats.finish(&names);
    let reaccess = reaccess.finish(&names, &info);
    let profile = if info.has_time {
        Some(profile.finish(&info)?)
    } else {
        None
    };
    let total = &stats.total;
    Ok(Characterization {
        source: source.to_owned(),
        records,
        volumes: stats.volumes.len(),
        duration_s,
        has_time: info.has_time,
        wall_clock: info.origin_unix_ns.is_some(),
        read_pct: (total.records > 0).then(|| total.reads as f64 * 100.0 / total.records as f64),
        mean_request_bytes: total.mean_request_bytes,
        working_set_bytes: reaccess.total.distinct_blocks * 4096,
        peaks_options: settings,
        stats,
        peaks,
        reaccess,
        profile,
        skipped_lines,
        volume_names: names.names().map(|(_, n)| n.to_string()).collect(),
        sample,
        reading_notes,
    })
}

impl Characterization {
    /// The busiest rate window's rate over the trace's mean rate; `None` for a trace shorter
    /// than one window (its mean rate is over less time than a window's).
    pub fn peak_to_mean(&self) -> Option<f64> {
        (self.duration_s >= self.peaks_options.rate_window_s)
            .then_some(self.stats.total.peak_to_mean)
            .flatten()
    }

    /// The rate window in words: "minute", "40 s".
    pub fn rate_window(&self) -> String {
        let w = self.peaks_options.rate_window_s;
        if w == 60.0 {
            "minute".into()
        } else if w == 1.0 {
            "second".into()
        } else {
            format!("{w:.0} s")
        }
    }

    /// Whole days the trace covers.
    pub fn days(&self) -> f64 {
        self.duration_s / 86_400.0
    }

    /// Busiest hour's mean rate over the quietest hour's, by hour of day (a diurnal swing);
    /// `None` without a day of hourly buckets.
    pub fn diurnal_swing(&self) -> Option<(f64, f64)> {
        let p = self.profile.as_ref()?;
        if self.duration_s < super::ONE_DAY_S || p.hours_of_day.len() < 24 {
            return None;
        }
        let rates: Vec<f64> = p.hours_of_day.iter().map(|h| h.mean_bytes_per_s).collect();
        let max = rates.iter().copied().fold(0.0, f64::max);
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        Some((min, max))
    }
}
