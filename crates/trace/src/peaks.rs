//! `trace peaks`: peak episodes (Everest §2, Table 1) and the writes in slow intervals
//! (Everest Figure 2).
//!
//! Request rates are counted in windows of `rate_window` (1 min in Everest) aligned to the trace
//! start. The trace is cut into segments of `segment` (15 min); an episode is the segment holding
//! a rate peak plus the `following_segments` after it. Episodes are chosen from the highest window
//! down, skipping windows whose episode would overlap one already chosen.
//!
//! A peak is the run of windows around its highest window whose rate stays above half-way
//! between the trace's median window rate and that highest rate. On the segment grid a peak near
//! a segment's end is cut by the episode's end (Everest's choice, kept by `trace peaks`: the
//! report says so per episode); `EpisodeAlign::Centred` centres the episode on the peak instead
//! and lengthens it if the peak is longer, so that no episode cuts the peak it is about.
//!
//! Slow intervals: per volume, intervals of `rt_interval` (1 min) whose mean recorded response
//! time exceeds `rt_threshold` (1 s); for each, the percentage of its requests that are writes.

use cordillera_types::units::ns_to_s;
use cordillera_types::Op;
use serde::Serialize;

use crate::record::{Record, VolumeId, VolumeTable};
use crate::window::{window_of, WindowCounts};

#[derive(Clone, Copy, Debug)]
pub struct PeaksOptions {
    pub rate_window_ns: i64,
    pub segment_ns: i64,
    pub following_segments: u32,
    pub top: usize,
    pub rt_interval_ns: i64,
    pub rt_threshold_ns: i64,
    pub align: EpisodeAlign,
}

/// Where an episode lies around its peak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EpisodeAlign {
    /// The peak's segment and the following ones on a grid from the trace start (Everest).
    #[default]
    Grid,
    /// As long as the segments (longer if the peak is), centred on the peak.
    Centred,
}

impl Default for PeaksOptions {
    /// Everest's choices: 1 min rates, 15 min segments, the peak segment plus one, top 3;
    /// 1 min response-time intervals over 1 s.
    fn default() -> PeaksOptions {
        PeaksOptions {
            rate_window_ns: 60_000_000_000,
            segment_ns: 900_000_000_000,
            following_segments: 1,
            top: 3,
            rt_interval_ns: 60_000_000_000,
            rt_threshold_ns: 1_000_000_000,
            align: EpisodeAlign::Grid,
        }
    }
}

impl PeaksOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.rate_window_ns <= 0 || self.segment_ns <= 0 || self.rt_interval_ns <= 0 {
            return Err("windows, segments and intervals must be positive".into());
        }
        if self.segment_ns % self.rate_window_ns != 0 {
            return Err("the segment length must be a multiple of the rate window".into());
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct EpisodeVolume {
    pub volume: String,
    pub requests: u64,
    pub read_pct: Option<f64>,
    pub peak_rate_per_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Episode {
    pub rank: usize,
    /// Seconds from the trace start.
    pub start_s: f64,
    pub end_s: f64,
    /// Wall-clock Unix ns of the start and end, when the trace has a wall clock.
    pub start_unix_ns: Option<i64>,
    pub end_unix_ns: Option<i64>,
    pub requests: u64,
    pub read_pct: Option<f64>,
    /// The episode's highest window rate, all volumes together.
    pub peak_rate_per_s: f64,
    /// The peak (its run of busy windows, see the module's text), seconds from the trace start.
    pub peak_start_s: f64,
    pub peak_end_s: f64,
    /// Whether the episode holds the whole peak (always, when centred).
    pub peak_whole: bool,
    pub busiest_volume: String,
    /// Share of the episode's requests on its busiest volume.
    pub busiest_share_pct: f64,
    /// Volumes with requests in the episode, most requests first. Everest replays the first
    /// (maximum), the middle (median) and the last (minimum).
    pub volumes: Vec<EpisodeVolume>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SlowIntervals {
    pub interval_s: f64,
    pub threshold_s: f64,
    /// Volume-intervals with at least one recorded response time.
    pub intervals_with_response: u64,
    /// Of those, the ones whose mean response time exceeds the threshold.
    pub slow_intervals: u64,
    /// Percentiles p0, p10, …, p100 of the write percentage over the slow intervals.
    pub write_pct_percentiles: Option<[f64; 11]>,
    /// Percentage of slow intervals with fewer than 10 % writes.
    pub below_10pct_writes_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PeaksReport {
    pub rate_window_s: f64,
    pub segment_s: f64,
    pub align: EpisodeAlign,
    pub episodes: Vec<Episode>,
    pub slow: SlowIntervals,
}

/// The median request count over every window from the first to the last (empty ones too).
fn median_rate(windows: &[(i64, u64)]) -> f64 {
    let (Some(first), Some(last)) = (
        windows.iter().map(|w| w.0).min(),
        windows.iter().map(|w| w.0).max(),
    ) else {
        return 0.0;
    };
    // Empty windows count (a trace mostly idle has a median of 0), up to a bound on memory.
    let span = ((last - first + 1) as u64).min(1 << 24) as usize;
    let mut counts: Vec<u64> = windows.iter().map(|w| w.1).collect();
    counts.resize(span.max(counts.len()), 0);
    let mid = counts.len() / 2;
    *counts.select_nth_unstable(mid).1 as f64
}

#[derive(Default)]
struct VolumeWindows {
    requests: WindowCounts,
    reads: WindowCounts,
    rt_requests: WindowCounts,
    rt_writes: WindowCounts,
    rt_sum_ns: WindowCounts,
}

/// Accumulates a [`PeaksReport`].
pub struct PeaksBuilder {
    options: PeaksOptions,
    anchor_ns: Option<i64>,
    first_ns: i64,
    last_ns: i64,
    requests: WindowCounts,
    reads: WindowCounts,
    volumes: Vec<Option<VolumeWindows>>,
}

impl PeaksBuilder {
    pub fn new(options: PeaksOptions) -> Result<PeaksBuilder, String> {
        options.validate()?;
        Ok(PeaksBuilder {
            options,
            anchor_ns: None,
            first_ns: i64::MAX,
            last_ns: i64::MIN,
            requests: WindowCounts::new(),
            reads: WindowCounts::new(),
            volumes: Vec::new(),
        })
    }

    pub fn add(&mut self, record: &Record) {
        let anchor = *self.anchor_ns.get_or_insert(record.time_ns);
        self.first_ns = self.first_ns.min(record.time_ns);
        self.last_ns = self.last_ns.max(record.time_ns);
        let window = window_of(record.time_ns, anchor, self.options.rate_window_ns);
        let is_read = (record.op == Op::Read) as u64;
        self.requests.add(window, 1);
        self.reads.add(window, is_read);
        let index = record.volume.index();
        if self.volumes.len() <= index {
            self.volumes.resize_with(index + 1, || None);
        }
        let volume = self.volumes[index].get_or_insert_with(VolumeWindows::default);
        volume.requests.add(window, 1);
        volume.reads.add(window, is_read);
        if let Some(response_ns) = record.response_ns {
            let interval = window_of(record.time_ns, anchor, self.options.rt_interval_ns);
            volume.rt_requests.add(interval, 1);
            volume.rt_writes.add(interval, 1 - is_read);
            volume.rt_sum_ns.add(interval, response_ns);
        }
    }

    pub fn finish(self, names: &VolumeTable, origin_unix_ns: Option<i64>) -> PeaksReport {
        let o = self.options;
        let windows_per_segment = o.segment_ns / o.rate_window_ns;
        let span = (1 + o.following_segments as i64) * windows_per_segment;
        let mut by_rate: Vec<(i64, u64)> = self.requests.iter().collect();
        let median = median_rate(&by_rate);
        by_rate.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let first_window = self.requests.iter().map(|(w, _)| w).min().unwrap_or(0);
        // (episode windows, peak windows), both half-open.
        let mut chosen: Vec<(std::ops::Range<i64>, std::ops::Range<i64>)> = Vec::new();
        for (window, _) in by_rate {
            if chosen.len() == o.top {
                break;
            }
            if chosen.iter().any(|(e, _)| e.contains(&window)) {
                continue;
            }
            let peak = self.peak_around(window, median);
            let episode = match o.align {
                EpisodeAlign::Grid => {
                    let first = window.div_euclid(windows_per_segment) * windows_per_segment;
                    first..first + span
                }
                EpisodeAlign::Centred => {
                    let length = span.max(peak.end - peak.start + 2);
                    let mid = peak.start + (peak.end - peak.start) / 2;
                    let start = (mid - length / 2).max(first_window).min(peak.start);
                    start..start + length
                }
            };
            if chosen
                .iter()
                .all(|(e, _)| episode.end <= e.start || e.end <= episode.start)
            {
                chosen.push((episode, peak));
            }
        }
        let anchor = self.anchor_ns.unwrap_or(0);
        let episodes = chosen
            .into_iter()
            .enumerate()
            .map(|(rank, (windows, peak))| {
                self.episode(rank + 1, windows, peak, names, anchor, origin_unix_ns)
            })
            .collect();
        PeaksReport {
            rate_window_s: ns_to_s(o.rate_window_ns),
            segment_s: ns_to_s(o.segment_ns),
            align: o.align,
            episodes,
            slow: self.slow_intervals(),
        }
    }

    /// The run of windows around `window` whose rate is above half-way from `median` to
    /// `window`'s rate.
    fn peak_around(&self, window: i64, median: f64) -> std::ops::Range<i64> {
        let top = self.requests.get(window) as f64;
        let threshold = median + (top - median) / 2.0;
        let busy = |w: i64| self.requests.get(w) as f64 >= threshold;
        let (mut start, mut end) = (window, window + 1);
        while busy(start - 1) {
            start -= 1;
        }
        while busy(end) {
            end += 1;
        }
        start..end
    }

    fn episode(
        &self,
        rank: usize,
        windows: std::ops::Range<i64>,
        peak: std::ops::Range<i64>,
        names: &VolumeTable,
        anchor_ns: i64,
        origin_unix_ns: Option<i64>,
    ) -> Episode {
        let peak_window = peak;
        let width = self.options.rate_window_ns;
        let sum = |counts: &WindowCounts| windows.clone().map(|w| counts.get(w)).sum::<u64>();
        // The busiest window's rate, each window over the time the trace covers of it (a trace
        // shorter than a window, or ending inside one, is not diluted by time it never had).
        let covered = (
            (anchor_ns + windows.start * width).max(self.first_ns),
            (anchor_ns + windows.end * width).min(self.last_ns),
        );
        let peak = |counts: &WindowCounts| {
            let mut within = WindowCounts::new();
            for w in windows.clone() {
                let n = counts.get(w);
                if n > 0 {
                    within.add(w, n);
                }
            }
            crate::window::peak_rate_per_s(&within, anchor_ns, covered, width)
        };
        let pct = |part: u64, whole: u64| (whole > 0).then(|| 100.0 * part as f64 / whole as f64);
        let requests = sum(&self.requests);
        let mut volumes: Vec<EpisodeVolume> = self
            .volumes
            .iter()
            .enumerate()
            .filter_map(|(index, v)| {
                let v = v.as_ref()?;
                let requests = sum(&v.requests);
                (requests > 0).then(|| EpisodeVolume {
                    volume: names.name(VolumeId(index as u32)).to_owned(),
                    requests,
                    read_pct: pct(sum(&v.reads), requests),
                    peak_rate_per_s: peak(&v.requests),
                })
            })
            .collect();
        volumes.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.volume.cmp(&b.volume)));
        let start_ns = anchor_ns + windows.start * self.options.rate_window_ns;
        let end_ns =
            (anchor_ns + windows.end * self.options.rate_window_ns).min(self.last_ns.max(start_ns));
        let busiest = volumes.first();
        Episode {
            rank,
            start_s: ns_to_s(start_ns),
            end_s: ns_to_s(end_ns),
            start_unix_ns: origin_unix_ns.map(|o| o + start_ns),
            end_unix_ns: origin_unix_ns.map(|o| o + end_ns),
            requests,
            read_pct: pct(sum(&self.reads), requests),
            peak_rate_per_s: peak(&self.requests),
            peak_start_s: ns_to_s(peak_window.start * self.options.rate_window_ns),
            peak_end_s: ns_to_s(peak_window.end * self.options.rate_window_ns),
            peak_whole: windows.start <= peak_window.start && peak_window.end <= windows.end,
            busiest_volume: busiest.map(|v| v.volume.clone()).unwrap_or_default(),
            busiest_share_pct: busiest
                .and_then(|v| pct(v.requests, requests))
                .unwrap_or(0.0),
            volumes,
        }
    }

    fn slow_intervals(&self) -> SlowIntervals {
        let o = self.options;
        let mut with_response = 0;
        let mut write_pcts = Vec::new();
        for volume in self.volumes.iter().flatten() {
            for (interval, requests) in volume.rt_requests.iter() {
                with_response += 1;
                let mean_ns = volume.rt_sum_ns.get(interval) as f64 / requests as f64;
                if mean_ns > o.rt_threshold_ns as f64 {
                    write_pcts
                        .push(100.0 * volume.rt_writes.get(interval) as f64 / requests as f64);
                }
            }
        }
        write_pcts.sort_by(f64::total_cmp);
        let percentiles = (!write_pcts.is_empty()).then(|| {
            let mut p = [0.0; 11];
            for (i, slot) in p.iter_mut().enumerate() {
                // Nearest rank.
                let rank = ((i as f64 / 10.0) * write_pcts.len() as f64).ceil() as usize;
                *slot = write_pcts[rank.clamp(1, write_pcts.len()) - 1];
            }
            p
        });
        let below = write_pcts.iter().filter(|p| **p < 10.0).count();
        SlowIntervals {
            interval_s: ns_to_s(o.rt_interval_ns),
            threshold_s: ns_to_s(o.rt_threshold_ns),
            intervals_with_response: with_response,
            slow_intervals: write_pcts.len() as u64,
            write_pct_percentiles: percentiles,
            below_10pct_writes_pct: (!write_pcts.is_empty())
                .then(|| 100.0 * below as f64 / write_pcts.len() as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000_000_000;

    fn record(time_ns: i64, volume: u32, op: Op, response_ns: Option<u64>) -> Record {
        Record {
            time_ns,
            volume: VolumeId(volume),
            op,
            offset_bytes: 0,
            length_bytes: 4096,
            response_ns,
        }
    }

    /// A trace shorter than one rate window: its episode's busiest rate is over the 27 s the
    /// trace covers, not the 60 s window (no peak below the mean).
    #[test]
    fn a_trace_shorter_than_a_window_is_not_diluted() {
        let mut names = VolumeTable::new();
        names.intern(b"a").unwrap();
        let mut builder = PeaksBuilder::new(PeaksOptions::default()).unwrap();
        // 270 requests over 27 s, the first at 5 s.
        for i in 0..270 {
            builder.add(&record(5_000_000_000 + i * 100_000_000, 0, Op::Read, None));
        }
        let report = builder.finish(&names, None);
        let e = &report.episodes[0];
        let mean = 270.0 / 26.9;
        assert!(
            (e.peak_rate_per_s - mean).abs() < 1e-9,
            "{}",
            e.peak_rate_per_s
        );
        assert!((e.volumes[0].peak_rate_per_s - mean).abs() < 1e-9);
    }

    #[test]
    fn episodes_are_the_peak_segment_and_the_next() {
        let mut names = VolumeTable::new();
        names.intern(b"a").unwrap();
        names.intern(b"b").unwrap();
        let mut records = Vec::new();
        // Background: one read per minute on each volume for three hours.
        for m in 0..180 {
            records.push(record(m * MIN, 0, Op::Read, None));
            records.push(record(m * MIN + 1, 1, Op::Read, None));
        }
        // A burst of 100 writes on `a` in minute 40, of 50 writes on `b` in minute 125,
        // and of 20 on `b` in minute 50 (inside the first episode: not an episode of its own).
        records.extend((0..100).map(|i| record(40 * MIN + i * 1000, 0, Op::Write, None)));
        records.extend((0..50).map(|i| record(125 * MIN + i * 1000, 1, Op::Write, None)));
        records.extend((0..20).map(|i| record(50 * MIN + i * 1000, 1, Op::Write, None)));
        records.sort_by_key(|r| r.time_ns);
        let mut builder = PeaksBuilder::new(PeaksOptions::default()).unwrap();
        for r in &records {
            builder.add(r);
        }
        let report = builder.finish(&names, Some(1_000 * 1_000_000_000));
        assert_eq!(report.episodes.len(), 3);
        let first = &report.episodes[0];
        // Minute 40 is in segment 2 (30–45 min); the episode covers 30–60 min.
        assert_eq!((first.start_s, first.end_s), (1800.0, 3600.0));
        assert_eq!(
            first.start_unix_ns,
            Some(1_000 * 1_000_000_000 + 1800 * 1_000_000_000)
        );
        assert_eq!(first.requests, 30 * 2 + 100 + 20);
        assert_eq!(first.peak_rate_per_s, 102.0 / 60.0);
        assert_eq!(first.busiest_volume, "a");
        assert!((first.busiest_share_pct - 100.0 * 130.0 / 180.0).abs() < 1e-9);
        assert!((first.read_pct.unwrap() - 100.0 * 60.0 / 180.0).abs() < 1e-9);
        assert_eq!(first.volumes[0].peak_rate_per_s, 101.0 / 60.0);
        let second = &report.episodes[1];
        // Minute 125 is in segment 8 (120–135 min).
        assert_eq!((second.start_s, second.end_s), (7200.0, 9000.0));
        assert_eq!(second.busiest_volume, "b");
        // The third is the next highest window outside both: background, ranked by time.
        let third = &report.episodes[2];
        assert!(
            third.end_s <= 1800.0
                || (3600.0..=7200.0).contains(&third.start_s)
                || third.start_s >= 9000.0
        );
    }

    /// A 4-minute peak over minutes 23–26 straddles the boundary at minute 25 of 5-minute
    /// segments (an episode of one segment): the grid's episode (20–25 min) cuts it, the
    /// centred one holds it.
    #[test]
    fn centred_episodes_hold_the_whole_peak_where_the_grid_cuts_it() {
        let mut names = VolumeTable::new();
        names.intern(b"a").unwrap();
        let mut records = Vec::new();
        for m in 0..60 {
            records.extend((0..5).map(|i| record(m * MIN + i, 0, Op::Read, None)));
        }
        // The peak: minutes 23, 24, 25 and 26 (100, 120, 110, 90 requests).
        for (m, n) in [(23, 100), (24, 120), (25, 110), (26, 90)] {
            records.extend((0..n).map(|i| record(m * MIN + 1000 + i, 0, Op::Write, None)));
        }
        records.sort_by_key(|r| r.time_ns);
        let run = |align| {
            let options = PeaksOptions {
                segment_ns: 5 * MIN,
                following_segments: 0,
                top: 1,
                align,
                ..PeaksOptions::default()
            };
            let mut builder = PeaksBuilder::new(options).unwrap();
            for r in &records {
                builder.add(r);
            }
            builder.finish(&names, None).episodes.remove(0)
        };
        let grid = run(EpisodeAlign::Grid);
        assert_eq!(
            (grid.peak_start_s, grid.peak_end_s),
            (23.0 * 60.0, 27.0 * 60.0)
        );
        assert_eq!((grid.start_s, grid.end_s), (20.0 * 60.0, 25.0 * 60.0));
        assert!(!grid.peak_whole, "the grid's episode ends in the peak");
        let centred = run(EpisodeAlign::Centred);
        assert!(centred.peak_whole);
        assert!(centred.start_s <= 23.0 * 60.0 && centred.end_s >= 27.0 * 60.0);
        // As long as the peak plus a window either side (the segments are shorter).
        assert_eq!(centred.end_s - centred.start_s, 6.0 * 60.0);
        assert_eq!(centred.requests, 6 * 5 + 420);
    }

    #[test]
    fn slow_intervals_report_their_write_share() {
        let mut names = VolumeTable::new();
        names.intern(b"a").unwrap();
        let mut builder = PeaksBuilder::new(PeaksOptions::default()).unwrap();
        // Minute 0: fast. Minute 1: slow (2 s), 3 writes of 10. Minute 2: slow, 1 write of 2.
        for i in 0..10 {
            builder.add(&record(i, 0, Op::Read, Some(1_000)));
        }
        for i in 0..10 {
            let op = if i < 3 { Op::Write } else { Op::Read };
            builder.add(&record(MIN + i, 0, op, Some(2_000_000_000)));
        }
        builder.add(&record(2 * MIN, 0, Op::Write, Some(3_000_000_000)));
        builder.add(&record(2 * MIN + 1, 0, Op::Read, Some(3_000_000_000)));
        builder.add(&record(3 * MIN, 0, Op::Write, None));
        let slow = builder.finish(&names, None).slow;
        assert_eq!((slow.intervals_with_response, slow.slow_intervals), (3, 2));
        let p = slow.write_pct_percentiles.unwrap();
        assert_eq!((p[0], p[5], p[10]), (30.0, 30.0, 50.0));
        assert_eq!(slow.below_10pct_writes_pct, Some(0.0));
    }
}
