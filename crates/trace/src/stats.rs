//! `trace stats`: counts, bytes, rates, working set and reaccesses, per volume and in total.
//!
//! Definitions (the JSON field names are part of the interface):
//! - `span_s`: latest minus earliest timestamp (for the ordered traces, last minus first);
//! - `mean_rate_per_s`: records / `span_s` (`null` for a zero span);
//! - `peak_rate_per_s`: the largest record rate in consecutive windows of `window_s` seconds
//!   aligned to the volume's first record, each window's count over the time it covers; a window
//!   the span cuts short is joined to its neighbour ([`crate::window::peak_rate_per_s`]), so the
//!   peak is never below the mean, and a span shorter than `window_s` is one window of the span;
//! - `peak_to_mean`: `peak_rate_per_s / mean_rate_per_s`;
//! - `wss_bytes`: distinct 4 KiB-aligned blocks touched × 4096;
//! - `reaccess_pct`: 100 × block accesses to a block touched earlier / all block accesses;
//! - `mean_request_bytes`: (read + write bytes) / records.
//!
//! Blocks are per volume: the total's working set is the sum of the volumes'.

use cordillera_types::units::{ns_to_s, BLOCK_BYTES};
use cordillera_types::{ByteRange, Op};
use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::record::{Record, VolumeTable};
use crate::window::{peak_rate_per_s, window_of, WindowCounts};

/// The statistics of one volume, or of the whole trace (`volume` = `"total"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VolumeStats {
    pub volume: String,
    pub records: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub span_s: f64,
    pub mean_rate_per_s: Option<f64>,
    pub peak_rate_per_s: f64,
    pub peak_to_mean: Option<f64>,
    pub wss_bytes: u64,
    pub reaccess_pct: Option<f64>,
    pub mean_request_bytes: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceStats {
    pub window_s: f64,
    pub volumes: Vec<VolumeStats>,
    pub total: VolumeStats,
}

/// Accumulates [`TraceStats`] one record at a time.
pub struct StatsBuilder {
    window_ns: i64,
    /// Indexed by `VolumeId`.
    volumes: Vec<Option<Accumulator>>,
    total: Accumulator,
}

#[derive(Default)]
struct Accumulator {
    records: u64,
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
    first_ns: i64,
    min_ns: i64,
    max_ns: i64,
    windows: WindowCounts,
    blocks: FxHashSet<u64>,
    block_accesses: u64,
    block_reaccesses: u64,
}

impl Accumulator {
    fn count(&mut self, record: &Record, window_ns: i64) {
        if self.records == 0 {
            self.first_ns = record.time_ns;
            self.min_ns = record.time_ns;
            self.max_ns = record.time_ns;
        }
        self.records += 1;
        match record.op {
            Op::Read => {
                self.reads += 1;
                self.read_bytes += record.length_bytes;
            }
            Op::Write => {
                self.writes += 1;
                self.write_bytes += record.length_bytes;
            }
        }
        self.min_ns = self.min_ns.min(record.time_ns);
        self.max_ns = self.max_ns.max(record.time_ns);
        self.windows
            .add(window_of(record.time_ns, self.first_ns, window_ns), 1);
    }

    fn stats(
        &self,
        volume: String,
        window_ns: i64,
        wss_blocks: u64,
        accesses: u64,
        reaccesses: u64,
    ) -> VolumeStats {
        let span_s = if self.records == 0 {
            0.0
        } else {
            ns_to_s(self.max_ns - self.min_ns)
        };
        let mean_rate_per_s = (span_s > 0.0).then(|| self.records as f64 / span_s);
        let peak_rate_per_s = peak_rate_per_s(
            &self.windows,
            self.first_ns,
            (self.min_ns, self.max_ns),
            window_ns,
        );
        VolumeStats {
            volume,
            records: self.records,
            reads: self.reads,
            writes: self.writes,
            read_bytes: self.read_bytes,
            write_bytes: self.write_bytes,
            span_s,
            mean_rate_per_s,
            peak_rate_per_s,
            peak_to_mean: mean_rate_per_s
                .filter(|m| *m > 0.0)
                .map(|m| peak_rate_per_s / m),
            wss_bytes: wss_blocks * BLOCK_BYTES,
            reaccess_pct: (accesses > 0).then(|| 100.0 * reaccesses as f64 / accesses as f64),
            mean_request_bytes: (self.records > 0)
                .then(|| (self.read_bytes + self.write_bytes) as f64 / self.records as f64),
        }
    }
}

impl StatsBuilder {
    /// `window_ns`: the window of `peak_rate_per_s`.
    pub fn new(window_ns: i64) -> StatsBuilder {
        assert!(window_ns > 0, "window must be positive");
        StatsBuilder {
            window_ns,
            volumes: Vec::new(),
            total: Accumulator::default(),
        }
    }

    pub fn add(&mut self, record: &Record) {
        let index = record.volume.index();
        if self.volumes.len() <= index {
            self.volumes.resize_with(index + 1, || None);
        }
        let volume = self.volumes[index].get_or_insert_with(Accumulator::default);
        volume.count(record, self.window_ns);
        for block in ByteRange::new(record.offset_bytes, record.length_bytes).blocks(BLOCK_BYTES) {
            volume.block_accesses += 1;
            if !volume.blocks.insert(block) {
                volume.block_reaccesses += 1;
            }
        }
        self.total.count(record, self.window_ns);
    }

    pub fn finish(self, names: &VolumeTable) -> TraceStats {
        let window_ns = self.window_ns;
        let mut volumes = Vec::new();
        let (mut wss, mut accesses, mut reaccesses) = (0, 0, 0);
        for (index, acc) in self.volumes.iter().enumerate() {
            let Some(acc) = acc else { continue };
            let name = names.name(crate::record::VolumeId(index as u32)).to_owned();
            let blocks = acc.blocks.len() as u64;
            wss += blocks;
            accesses += acc.block_accesses;
            reaccesses += acc.block_reaccesses;
            volumes.push(acc.stats(
                name,
                window_ns,
                blocks,
                acc.block_accesses,
                acc.block_reaccesses,
            ));
        }
        let total = self
            .total
            .stats("total".to_owned(), window_ns, wss, accesses, reaccesses);
        TraceStats {
            window_s: ns_to_s(window_ns),
            volumes,
            total,
        }
    }
}

#[cfg(test)]
mod peak_tests {
    use super::*;
    use crate::record::VolumeId;
    use proptest::prelude::*;

    proptest! {
        /// The busiest window's rate is never below the mean rate, for any times in any order
        /// and any window, and a trace shorter than a window has its mean as its peak.
        #[test]
        fn the_peak_is_never_below_the_mean(
            times in proptest::collection::vec(-5_000_000_000i64..200_000_000_000, 2..300),
            window_ms in 1i64..120_000,
        ) {
            let window_ns = window_ms * 1_000_000;
            let mut b = StatsBuilder::new(window_ns);
            for (i, t) in times.iter().enumerate() {
                b.add(&Record {
                    time_ns: *t,
                    volume: VolumeId((i % 2) as u32),
                    op: Op::Read,
                    offset_bytes: 0,
                    length_bytes: 4096,
                    response_ns: None,
                });
            }
            let mut names = VolumeTable::new();
            names.intern(b"a");
            names.intern(b"b");
            let stats = b.finish(&names);
            for v in stats.volumes.iter().chain([&stats.total]) {
                if let Some(mean) = v.mean_rate_per_s {
                    prop_assert!(v.peak_rate_per_s >= mean * (1.0 - 1e-9), "{v:?}");
                    if v.span_s * 1e9 <= window_ns as f64 {
                        prop_assert!((v.peak_rate_per_s - mean).abs() <= mean * 1e-9, "{v:?}");
                    }
                }
            }
        }
    }
}
