//! Closed-loop microbenchmarks of a device (`cordillera sim disk`): keep `queue_depth` requests
//! outstanding until `count` complete. These are the measurements the calibration targets are
//! checked with.

use cordillera_types::Op;
use serde::Serialize;

use crate::device::{Completion, Device, IoRequest};
use crate::histogram::Histogram;
use cordillera_types::rng::SimRng;
use cordillera_types::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Sequential,
    Random,
}

#[derive(Clone, Debug)]
pub struct DiskBench {
    pub pattern: Pattern,
    pub op: Op,
    pub block_bytes: u64,
    pub queue_depth: usize,
    pub count: u64,
    /// Random offsets fall in the first `span_bytes` (the whole device when `None`).
    pub span_bytes: Option<u64>,
    pub seed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct DiskBenchResult {
    pub count: u64,
    pub elapsed_s: f64,
    /// MB = 10^6 bytes.
    pub throughput_mb_per_s: f64,
    pub iops: f64,
    pub mean_latency_ms: f64,
    pub p50_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub max_latency_ms: f64,
}

/// Runs the benchmark on `device` from time 0.
pub fn run(device: &mut dyn Device, bench: &DiskBench) -> Result<DiskBenchResult, String> {
    let capacity = device.capacity_bytes();
    let span = bench.span_bytes.unwrap_or(capacity).min(capacity);
    if bench.block_bytes == 0
        || bench.block_bytes > span
        || bench.queue_depth == 0
        || bench.count == 0
    {
        return Err(
            "block size, queue depth and count must be positive, the block within the device"
                .into(),
        );
    }
    let slots = span / bench.block_bytes;
    let mut rng = SimRng::new(bench.seed, 0);
    let mut next_sequential = 0u64;
    let mut submitted_at: Vec<Nanos> = Vec::with_capacity(bench.count as usize);
    let mut latencies = Histogram::new();
    let mut completions: Vec<Completion> = Vec::new();
    let mut done = 0u64;
    let mut last: Nanos = 0;
    // Issues request number `submitted_at.len()` at `now`.
    let mut submit = |device: &mut dyn Device, submitted_at: &mut Vec<Nanos>, now: Nanos| {
        let slot = match bench.pattern {
            Pattern::Sequential => {
                let slot = next_sequential;
                next_sequential = (next_sequential + 1) % slots;
                slot
            }
            Pattern::Random => rng.below(slots),
        };
        let id = submitted_at.len() as u64;
        submitted_at.push(now);
        device.submit(
            now,
            IoRequest {
                id,
                op: bench.op,
                offset_bytes: slot * bench.block_bytes,
                length_bytes: bench.block_bytes,
            },
        );
    };
    while (submitted_at.len() as u64) < bench.count.min(bench.queue_depth as u64) {
        submit(device, &mut submitted_at, 0);
    }
    while done < bench.count {
        let t = device
            .poll_timeout()
            .ok_or("the device stalled with requests outstanding")?;
        device.advance(t, &mut completions);
        for c in completions.drain(..) {
            latencies.record(c.time_ns - submitted_at[c.id as usize]);
            done += 1;
            last = last.max(c.time_ns);
            if (submitted_at.len() as u64) < bench.count {
                submit(device, &mut submitted_at, c.time_ns);
            }
        }
    }
    let elapsed_s = last as f64 / 1e9;
    let summary = latencies.summary();
    Ok(DiskBenchResult {
        count: done,
        elapsed_s,
        throughput_mb_per_s: (done * bench.block_bytes) as f64 / 1e6 / elapsed_s,
        iops: done as f64 / elapsed_s,
        mean_latency_ms: summary.mean_ms.unwrap_or(0.0),
        p50_latency_ms: summary.p50_ms.unwrap_or(0.0),
        p99_latency_ms: summary.p99_ms.unwrap_or(0.0),
        max_latency_ms: summary.max_ms.unwrap_or(0.0),
    })
}
