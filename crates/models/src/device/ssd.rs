//! A flash device: `channels` independent servers; a request goes to the channel that frees
//! first and takes `latency + size / bandwidth` for its direction.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cordillera_types::Op;

use super::{ms_to_ns, Completion, Device, IoRequest};
use cordillera_types::Nanos;

#[derive(Clone, Debug)]
pub struct SsdParams {
    pub capacity_bytes: u64,
    pub channels: u32,
    pub read_latency_ms: f64,
    pub write_latency_ms: f64,
    /// Per-channel bandwidth, MB/s (10^6 bytes).
    pub read_mb_per_s_per_channel: f64,
    pub write_mb_per_s_per_channel: f64,
}

pub struct Ssd {
    params: SsdParams,
    /// When each channel becomes free, and its number: the least is the channel a request
    /// goes to (the lowest-numbered of those free first).
    channel_free: BinaryHeap<Reverse<(Nanos, u32)>>,
    /// (completion time, submission order, id).
    done: BinaryHeap<Reverse<(Nanos, u64, u64)>>,
    next_seq: u64,
    busy_ns: u64,
}

impl Ssd {
    pub fn new(params: SsdParams) -> Ssd {
        assert!(params.channels > 0);
        Ssd {
            channel_free: (0..params.channels).map(|i| Reverse((0, i))).collect(),
            params,
            done: BinaryHeap::new(),
            next_seq: 0,
            busy_ns: 0,
        }
    }
}

impl Device for Ssd {
    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn submit(&mut self, now: Nanos, request: IoRequest) {
        let (latency_ms, mb_per_s) = match request.op {
            Op::Read => (
                self.params.read_latency_ms,
                self.params.read_mb_per_s_per_channel,
            ),
            Op::Write => (
                self.params.write_latency_ms,
                self.params.write_mb_per_s_per_channel,
            ),
        };
        let service =
            (ms_to_ns(latency_ms) + request.length_bytes as f64 * 1e3 / mb_per_s).ceil() as u64;
        let Reverse((free, channel)) = self.channel_free.pop().expect("channels");
        let start = free.max(now);
        self.channel_free.push(Reverse((start + service, channel)));
        self.busy_ns += service;
        self.done
            .push(Reverse((start + service, self.next_seq, request.id)));
        self.next_seq += 1;
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.done.peek().map(|Reverse((t, _, _))| *t)
    }

    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>) {
        while let Some(Reverse((t, _, id))) = self.done.peek().copied() {
            if t > now {
                break;
            }
            self.done.pop();
            completions.push(Completion { id, time_ns: t });
        }
    }

    fn outstanding(&self) -> usize {
        self.done.len()
    }

    /// Channel-busy time divided by the channel count: 1.0 utilization means all channels busy.
    fn busy_ns(&self) -> u64 {
        self.busy_ns / self.params.channels as u64
    }
}
