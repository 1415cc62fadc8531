//! Replay of a block trace against a live NBD export (`cordillera replay`), reporting response
//! times the way `cordillera sim replay` does, so one trace can be compared in simulation and on
//! real I/O.
//!
//! - **Open loop** ([`Mode::Open`]): each record is sent at its trace time (divided by the
//!   speed-up) after the first record's, whatever the export's state. When the client itself
//!   falls behind, the request goes out late; the lag is measured and reported, not hidden.
//!   At most `max_outstanding` requests are in flight; an arrival that finds that many waits, and
//!   is counted as throttled.
//! - **Closed loop** ([`Mode::Closed`]): a fixed number of requests is kept in flight, timestamps
//!   ignored; the next record goes out as soon as one completes.
//!
//! The mapping of records onto the export is the simulator's (`sim::replay`): zero-length records
//! and records larger than the export (or than its largest payload) are skipped; an offset
//! beyond the end wraps to `offset mod (size − length + 1)`, aligned down to 512 bytes; a record
//! earlier than the previous one goes out at the previous one's time and is counted as late.
//! Offsets and lengths are then aligned to the export's minimum block. Writes carry a fixed
//! pseudo-random pattern; reads' data is received and dropped.
//!
//! A response time runs from the moment the request is handed to the socket to the arrival of
//! its reply header.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordillera_models::histogram::{Histogram, LatencySummary};
use cordillera_trace::Record;
use cordillera_types::Op;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::nbd_client::{self, Kind, NbdClientError, NbdUrl, Receiver};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Send at trace times divided by `speed`.
    Open { speed: f64 },
    /// Keep `depth` requests in flight.
    Closed { depth: usize },
}

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub mode: Mode,
    /// Length of the intervals of the series, in seconds.
    pub interval_s: f64,
    /// Open loop: the most requests in flight before arrivals wait.
    pub max_outstanding: usize,
    /// Stop after this many records.
    pub max_records: Option<u64>,
    /// Print a line on stderr every this often.
    pub progress_every: Option<Duration>,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            mode: Mode::Open { speed: 1.0 },
            interval_s: 1.0,
            max_outstanding: 4096,
            max_records: None,
            progress_every: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Nbd(#[from] NbdClientError),
    #[error("the export is read-only: a trace with writes cannot be replayed on it")]
    ReadOnly,
    #[error("the export is empty")]
    Empty,
    #[error("the connection ended with {in_flight} requests unanswered: {reason}")]
    Lost { in_flight: usize, reason: String },
    #[error("--speed must be positive and finite, --depth and --max-outstanding at least 1")]
    BadOptions,
}

#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    pub start_s: f64,
    pub completions: u64,
    pub reads_mean_ms: Option<f64>,
    pub writes_mean_ms: Option<f64>,
    /// Reads and writes together.
    pub mean_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LiveReplayReport {
    pub target: String,
    pub export_bytes: u64,
    /// "open" or "closed".
    pub mode: &'static str,
    pub speed: Option<f64>,
    pub depth: Option<usize>,
    pub records: u64,
    pub skipped_empty: u64,
    pub wrapped: u64,
    pub late: u64,
    /// Requests the export answered with an error.
    pub errors: u64,
    /// The first error value (an errno), if any.
    pub first_error: Option<u32>,
    /// Wall-clock time from the first request to the last reply.
    pub duration_s: f64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub reads: LatencySummary,
    pub writes: LatencySummary,
    /// Open loop: how late each request went out against its trace time.
    pub send_lag: Option<LatencySummary>,
    /// Open loop: arrivals that waited for a free slot (`max_outstanding` in flight).
    pub throttled: u64,
    pub max_outstanding_seen: u64,
    pub interval_s: f64,
    pub intervals: Vec<Interval>,
    pub recorded_reads: Option<LatencySummary>,
    pub recorded_writes: Option<LatencySummary>,
}

/// How early an open-loop arrival wakes before its time, to make up for the timer's
/// millisecond granularity.
const SPIN: Duration = Duration::from_micros(1500);

/// What the receiving task gathers.
#[derive(Default)]
struct Gathered {
    reads: Histogram,
    writes: Histogram,
    completions: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<u32>,
    last_reply: Option<Instant>,
    intervals: Vec<(u64, Histogram, Histogram)>,
    /// Why the connection ended early, if it did.
    lost: Option<String>,
}

impl ReplayOptions {
    /// How many requests may be in flight: the open loop's bound, or the closed loop's
    /// depth; options that make no sense (a speed that is not positive, no slot, an interval
    /// that is not positive) are refused.
    fn slots(&self) -> Result<usize, ReplayError> {
        let permits = match self.mode {
            Mode::Open { speed } if speed > 0.0 && speed.is_finite() => self.max_outstanding,
            Mode::Closed { depth } => depth,
            Mode::Open { .. } => return Err(ReplayError::BadOptions),
        };
        if permits == 0 || permits > Semaphore::MAX_PERMITS || self.interval_s <= 0.0 {
            return Err(ReplayError::BadOptions);
        }
        Ok(permits)
    }
}

/// Replays `records` (in trace order) against the export at `url`.
pub async fn replay(
    url: &NbdUrl,
    records: impl Iterator<Item = Record>,
    options: &ReplayOptions,
) -> Result<LiveReplayReport, ReplayError> {
    let permits = options.slots()?;
    let (info, mut sender, receiver) = nbd_client::connect(url).await?;
    if info.length_bytes == 0 {
        return Err(ReplayError::Empty);
    }
    let read_only = info.transmission_flags & cordillera_wire::nbd::FLAG_READ_ONLY != 0;
    let capacity = info.length_bytes;
    let block = u64::from(info.minimum_block.max(1));
    let largest = capacity.min(u64::from(info.maximum_payload));

    let slots = Arc::new(Semaphore::new(permits));
    let gathered = Arc::new(Mutex::new(Gathered::default()));
    let start = Instant::now();
    let interval = Duration::from_secs_f64(options.interval_s);
    let receiving = tokio::spawn(receive(
        receiver,
        Arc::clone(&slots),
        Arc::clone(&gathered),
        start,
        interval,
    ));
    let mut payload: Vec<u8> = Vec::new();
    let mut pattern = 0x9e37_79b9_7f4a_7c15u64;
    let mut origin: Option<i64> = None;
    let mut last_at = Duration::ZERO;
    let (mut records_sent, mut skipped, mut wrapped, mut late, mut throttled) = (0, 0, 0, 0, 0);
    let mut max_seen = 0u64;
    let mut lag = Histogram::new();
    let mut recorded_reads = Histogram::new();
    let mut recorded_writes = Histogram::new();
    let mut next_progress = options.progress_every.map(|every| start + every);
    let mut failure: Option<std::io::Error> = None;

    for record in records {
        if options.max_records.is_some_and(|max| records_sent >= max) {
            break;
        }
        if record.length_bytes == 0 || record.length_bytes > largest {
            skipped += 1;
            continue;
        }
        if record.op == Op::Write && read_only {
            return Err(ReplayError::ReadOnly);
        }
        let (offset, length, wraps) = place(&record, capacity, block);
        wrapped += u64::from(wraps);
        if let Mode::Open { speed } = options.mode {
            let origin = *origin.get_or_insert(record.time_ns);
            let since = (record.time_ns - origin).max(0) as f64 / speed;
            let mut at = Duration::from_nanos(since as u64);
            if at < last_at {
                at = last_at;
                late += 1;
            }
            last_at = at;
            let due = start + at;
            if due > Instant::now() {
                if let Err(e) = sender.flush().await {
                    failure = Some(e);
                    break;
                }
                wait_until(due).await;
            }
            lag.record(Instant::now().saturating_duration_since(due).as_nanos() as u64);
        }
        match slots.try_acquire() {
            Ok(permit) => permit.forget(),
            Err(_) => {
                // In a closed loop, waiting for a slot is the loop itself.
                if let Mode::Open { .. } = options.mode {
                    throttled += 1;
                }
                if let Err(e) = sender.flush().await {
                    failure = Some(e);
                    break;
                }
                match slots.acquire().await {
                    Ok(permit) => permit.forget(),
                    Err(_) => break, // the receiving task ended: its reason is reported below
                }
            }
        }
        let in_flight = (permits - slots.available_permits()) as u64;
        max_seen = max_seen.max(in_flight);
        let sent = match record.op {
            Op::Read => sender.read(offset, length as u32).await,
            Op::Write => {
                grow_payload(&mut payload, &mut pattern, length as usize);
                sender.write(offset, &payload[..length as usize]).await
            }
        };
        if let Err(e) = sent {
            failure = Some(e);
            break;
        }
        // Open loop: every request goes out at once. Closed loop: requests taking free slots
        // together go out together, when the last free slot is taken.
        let send_now = match options.mode {
            Mode::Open { .. } => true,
            Mode::Closed { .. } => slots.available_permits() == 0,
        };
        if send_now {
            if let Err(e) = sender.flush().await {
                failure = Some(e);
                break;
            }
        }
        if let Some(response_ns) = record.response_ns {
            let recorded = match record.op {
                Op::Read => &mut recorded_reads,
                Op::Write => &mut recorded_writes,
            };
            recorded.record(response_ns);
        }
        records_sent += 1;
        if let (Some(at), Some(every)) = (next_progress, options.progress_every) {
            if Instant::now() >= at {
                let done = gathered.lock().expect("stats lock").completions;
                progress(records_sent, done, start);
                next_progress = Some(at + every);
            }
        }
    }
    let g = wind_down(
        sender,
        receiving,
        (&slots, permits),
        failure,
        &gathered,
        records_sent,
    )
    .await?;
    let sent = Sent {
        records: records_sent,
        skipped,
        wrapped,
        late,
        throttled,
        max_seen,
        lag,
        recorded_reads,
        recorded_writes,
    };
    Ok(report(url, capacity, options, (start, g), sent))
}

/// Where a record goes on an export of `capacity` bytes in blocks of `block`: an offset past
/// the end wraps into the export (said by the flag), then both are aligned to the block and
/// the length cut at the end.
fn place(record: &Record, capacity: u64, block: u64) -> (u64, u64, bool) {
    let mut offset = record.offset_bytes;
    let wraps = offset + record.length_bytes > capacity;
    if wraps {
        offset = offset % (capacity - record.length_bytes + 1) / 512 * 512;
    }
    offset = offset / block * block;
    let length = record.length_bytes.div_ceil(block) * block;
    let length = if offset + length > capacity {
        capacity - offset
    } else {
        length
    };
    (offset, length, wraps)
}

/// Grows the write payload to `length` bytes of a xorshift pattern (`pattern` its state): the
/// writes carry bytes no device can compress or skip.
fn grow_payload(payload: &mut Vec<u8>, pattern: &mut u64, length: usize) {
    if payload.len() < length {
        let old = payload.len();
        payload.resize(length, 0);
        for byte in &mut payload[old..] {
            *pattern ^= *pattern << 13;
            *pattern ^= *pattern >> 7;
            *pattern ^= *pattern << 17;
            *byte = *pattern as u8;
        }
    }
}

/// Waits until `due`. The timer's granularity is a millisecond: sleep to within one, then
/// yield until the moment itself.
async fn wait_until(due: Instant) {
    if let Some(early) = due.checked_sub(SPIN) {
        if early > Instant::now() {
            tokio::time::sleep_until(early.into()).await;
        }
    }
    while Instant::now() < due {
        tokio::task::yield_now().await;
    }
}

/// A progress line: the records sent, those answered, the time so far.
fn progress(records_sent: u64, answered: u64, start: Instant) {
    tracing::info!(
        records_sent,
        answered,
        elapsed_s = format_args!("{:.0}", start.elapsed().as_secs_f64()),
        "replay progress"
    );
}

/// What the sending side counted.
struct Sent {
    records: u64,
    skipped: u64,
    wrapped: u64,
    late: u64,
    throttled: u64,
    max_seen: u64,
    /// Open loop: how late each request went out.
    lag: Histogram,
    /// The trace's own response times, where it records them.
    recorded_reads: Histogram,
    recorded_writes: Histogram,
}

/// Ends the replay: the last requests flushed, every reply awaited (all slots back) and the
/// connection closed; what the receiving side gathered, or the connection's loss with the
/// requests it left unanswered.
async fn wind_down(
    mut sender: nbd_client::Sender,
    mut receiving: tokio::task::JoinHandle<()>,
    (slots, permits): (&Semaphore, usize),
    mut failure: Option<std::io::Error>,
    gathered: &Mutex<Gathered>,
    records_sent: u64,
) -> Result<Gathered, ReplayError> {
    if failure.is_none() {
        if let Err(e) = sender.flush().await {
            failure = Some(e);
        }
    }
    // Every reply in: all slots back.
    let all_in = failure.is_none() && slots.acquire_many(permits as u32).await.is_ok();
    if all_in {
        let _ = sender.disconnect().await;
        // The server closes after DISC; a server that does not is not waited for long.
        let _ = tokio::time::timeout(Duration::from_secs(5), receiving).await;
    } else {
        drop(sender);
        // A send that failed (a broken pipe) means the connection is gone: the receiving
        // side sees why soon after. Give it a moment to record that before stopping it.
        if failure.is_some() {
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut receiving).await;
        }
        receiving.abort();
    }
    let g = std::mem::take(&mut *gathered.lock().expect("stats lock"));
    if !all_in {
        let in_flight = records_sent.saturating_sub(g.completions) as usize;
        // The receiving side knows best why the connection ended (a send then fails with
        // a broken pipe).
        let reason = match (g.lost, failure) {
            (Some(reason), _) => reason,
            (None, Some(e)) => e.to_string(),
            (None, None) => "unknown".to_owned(),
        };
        return Err(ReplayError::Lost { in_flight, reason });
    }
    Ok(g)
}

/// The report of a finished replay.
fn report(
    url: &NbdUrl,
    capacity: u64,
    options: &ReplayOptions,
    (start, g): (Instant, Gathered),
    sent: Sent,
) -> LiveReplayReport {
    let duration_s = g
        .last_reply
        .map_or(0.0, |t| t.duration_since(start).as_secs_f64());
    let per_s = |n: f64| {
        if duration_s > 0.0 {
            n / duration_s
        } else {
            0.0
        }
    };
    let summary = |h: &Histogram| (h.count() > 0).then(|| h.summary());
    LiveReplayReport {
        target: url.to_string(),
        export_bytes: capacity,
        mode: match options.mode {
            Mode::Open { .. } => "open",
            Mode::Closed { .. } => "closed",
        },
        speed: match options.mode {
            Mode::Open { speed } => Some(speed),
            Mode::Closed { .. } => None,
        },
        depth: match options.mode {
            Mode::Open { .. } => None,
            Mode::Closed { depth } => Some(depth),
        },
        records: sent.records,
        skipped_empty: sent.skipped,
        wrapped: sent.wrapped,
        late: sent.late,
        errors: g.errors,
        first_error: g.first_error,
        duration_s,
        iops: per_s(g.completions as f64),
        mb_per_s: per_s(g.bytes as f64 / 1e6),
        reads: g.reads.summary(),
        writes: g.writes.summary(),
        send_lag: matches!(options.mode, Mode::Open { .. }).then(|| sent.lag.summary()),
        throttled: sent.throttled,
        max_outstanding_seen: sent.max_seen,
        interval_s: options.interval_s,
        intervals: g
            .intervals
            .iter()
            .enumerate()
            .map(|(i, (completions, reads, writes))| {
                let mut both = reads.clone();
                both.merge(writes);
                Interval {
                    start_s: i as f64 * options.interval_s,
                    completions: *completions,
                    reads_mean_ms: reads.mean_ns().map(|ns| ns / 1e6),
                    writes_mean_ms: writes.mean_ns().map(|ns| ns / 1e6),
                    mean_ms: both.mean_ns().map(|ns| ns / 1e6),
                    p99_ms: both.quantile_ns(0.99).map(|ns| ns as f64 / 1e6),
                }
            })
            .collect(),
        recorded_reads: summary(&sent.recorded_reads),
        recorded_writes: summary(&sent.recorded_writes),
    }
}

/// Takes replies until the connection ends, recording each and freeing its slot.
async fn receive(
    mut receiver: Receiver,
    slots: Arc<Semaphore>,
    gathered: Arc<Mutex<Gathered>>,
    start: Instant,
    interval: Duration,
) {
    loop {
        let reply = match receiver.next().await {
            Ok(Some(reply)) => reply,
            Ok(None) => {
                // Before the replay's DISC (after it, this is not looked at): even with
                // nothing in flight at this moment, records were still to be sent.
                gathered.lock().expect("stats lock").lost = Some(format!(
                    "the server closed the connection ({} requests in flight)",
                    receiver.in_flight()
                ));
                break;
            }
            Err(e) => {
                gathered.lock().expect("stats lock").lost = Some(e.to_string());
                break;
            }
        };
        let latency = reply.received.duration_since(reply.sent).as_nanos() as u64;
        {
            let mut g = gathered.lock().expect("stats lock");
            let index =
                (reply.received.duration_since(start).as_nanos() / interval.as_nanos()) as usize;
            if g.intervals.len() <= index {
                g.intervals
                    .resize_with(index + 1, || (0, Histogram::new(), Histogram::new()));
            }
            g.intervals[index].0 += 1;
            match reply.kind {
                Kind::Read => {
                    g.reads.record(latency);
                    g.intervals[index].1.record(latency);
                }
                Kind::Write => {
                    g.writes.record(latency);
                    g.intervals[index].2.record(latency);
                }
            }
            g.completions += 1;
            g.bytes += u64::from(reply.length);
            if reply.error != 0 {
                g.errors += 1;
                g.first_error.get_or_insert(reply.error);
            }
            g.last_reply = Some(reply.received);
        }
        slots.add_permits(1);
    }
    // Wakes a sender waiting for a slot or for the last replies.
    slots.close();
}
