//! Storage device models behind one sans-I/O [`Device`] trait.
//!
//! # Driver contract
//!
//! A device never reads a clock. The driver owns virtual time and follows this loop:
//!
//! ```text
//! loop {
//!     let next_arrival = workload.peek_time();
//!     match (device.poll_timeout(), next_arrival) {
//!         (Some(t), a) if a.is_none_or(|a| t <= a) => {
//!             device.advance(t, &mut completions);      // internal events due at t
//!             for c in completions.drain(..) { record(c) }
//!         }
//!         (_, Some(a)) => device.submit(a, workload.pop()),
//!         (None, None) => break,
//!     }
//! }
//! ```
//!
//! Times passed in never decrease. `advance(now)` processes every internal event at or before
//! `now` in time order and reports each completion with its own time (which may be earlier than
//! `now`). Completions of requests submitted at the same instant come out in a deterministic order.

pub mod hdd;
pub mod nvram;
pub mod raid;
pub mod ssd;

use cordillera_types::Op;

use cordillera_types::Nanos;

/// One I/O given to a device. `id` is the caller's; the device returns it on completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    pub id: u64,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub id: u64,
    pub time_ns: Nanos,
}

/// A simulated storage device: a disk, an SSD, a cache in front of one, or an array of them.
pub trait Device {
    /// Usable bytes; requests must lie within.
    fn capacity_bytes(&self) -> u64;
    /// A request arrives at `now`.
    fn submit(&mut self, now: Nanos, request: IoRequest);
    /// The next instant at which something happens inside the device, if anything is pending.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// Processes every internal event up to `now`, pushing completions (with their own times).
    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>);
    /// Requests submitted and not yet completed.
    fn outstanding(&self) -> usize;
    /// Time the mechanism was busy serving requests, summed; for arrays, the mean over members.
    fn busy_ns(&self) -> u64;
}

impl Device for Box<dyn Device> {
    fn capacity_bytes(&self) -> u64 {
        (**self).capacity_bytes()
    }
    fn submit(&mut self, now: Nanos, request: IoRequest) {
        (**self).submit(now, request)
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        (**self).poll_timeout()
    }
    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>) {
        (**self).advance(now, completions)
    }
    fn outstanding(&self) -> usize {
        (**self).outstanding()
    }
    fn busy_ns(&self) -> u64 {
        (**self).busy_ns()
    }
}

/// Runs `device` until nothing is pending, returning completions in time order.
pub fn drain(device: &mut dyn Device) -> Vec<Completion> {
    let mut out = Vec::new();
    while let Some(t) = device.poll_timeout() {
        device.advance(t, &mut out);
    }
    out
}

pub(crate) fn ms_to_ns(ms: f64) -> f64 {
    ms * 1e6
}
