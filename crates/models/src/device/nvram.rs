//! Battery-backed NVRAM in front of a device (Everest Figure 8): part of its capacity buffers
//! writes (acknowledged at NVRAM speed, destaged in the background), the rest caches reads (LRU
//! over 4 KiB blocks).

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};

use cordillera_types::units::BLOCK_BYTES;
use cordillera_types::{ByteRange, Op};

use super::{ms_to_ns, Completion, Device, IoRequest};
use cordillera_types::Nanos;

#[derive(Clone, Debug)]
pub struct NvramParams {
    pub capacity_bytes: u64,
    /// Fraction of the capacity that buffers writes; the rest caches reads.
    pub write_fraction: f64,
    /// Time to serve a hit or accept a write.
    pub latency_ms: f64,
    /// Destage writes outstanding to the backing device at most.
    pub destage_depth_max: usize,
}

/// Destages in flight get ids from the top of the id space, so they never collide with callers'.
const DESTAGE_ID_BASE: u64 = 1 << 63;

pub struct Nvram<D: Device> {
    params: NvramParams,
    backing: D,
    write_capacity: u64,
    read_capacity_blocks: u64,
    write_used: u64,
    destage_queue: VecDeque<IoRequest>,
    destages_in_flight: FxHashMap<u64, u64>,
    next_destage: u64,
    /// Hits and accepted writes, completing at their time in order.
    fast: VecDeque<(Nanos, u64)>,
    /// Reads forwarded to the backing device: id → the blocks to insert on completion.
    misses: FxHashMap<u64, ByteRange>,
    /// LRU: block → stamp, stamp → block.
    lru: FxHashMap<u64, u64>,
    lru_order: BTreeMap<u64, u64>,
    stamp: u64,
    scratch: Vec<Completion>,
}

impl<D: Device> Nvram<D> {
    pub fn new(params: NvramParams, backing: D) -> Nvram<D> {
        assert!((0.0..=1.0).contains(&params.write_fraction));
        let write_capacity = (params.capacity_bytes as f64 * params.write_fraction) as u64;
        let read_capacity_blocks = (params.capacity_bytes - write_capacity) / BLOCK_BYTES;
        Nvram {
            write_capacity,
            read_capacity_blocks,
            params,
            backing,
            write_used: 0,
            destage_queue: VecDeque::new(),
            destages_in_flight: FxHashMap::default(),
            next_destage: DESTAGE_ID_BASE,
            fast: VecDeque::new(),
            misses: FxHashMap::default(),
            lru: FxHashMap::default(),
            lru_order: BTreeMap::new(),
            stamp: 0,
            scratch: Vec::new(),
        }
    }

    fn touch(&mut self, block: u64) {
        if self.read_capacity_blocks == 0 {
            return;
        }
        if let Some(old) = self.lru.insert(block, self.stamp) {
            self.lru_order.remove(&old);
        }
        self.lru_order.insert(self.stamp, block);
        self.stamp += 1;
        while self.lru.len() as u64 > self.read_capacity_blocks {
            let (stamp, victim) = self.lru_order.pop_first().expect("lru entry");
            let _ = stamp;
            self.lru.remove(&victim);
        }
    }

    fn start_destages(&mut self, now: Nanos) {
        while self.destages_in_flight.len() < self.params.destage_depth_max {
            let Some(mut request) = self.destage_queue.pop_front() else {
                break;
            };
            let id = self.next_destage;
            self.next_destage += 1;
            self.destages_in_flight.insert(id, request.length_bytes);
            request.id = id;
            self.backing.submit(now, request);
        }
    }

    fn latency_ns(&self) -> u64 {
        ms_to_ns(self.params.latency_ms).ceil() as u64
    }
}

impl<D: Device> Device for Nvram<D> {
    fn capacity_bytes(&self) -> u64 {
        self.backing.capacity_bytes()
    }

    fn submit(&mut self, now: Nanos, request: IoRequest) {
        assert!(
            request.id < DESTAGE_ID_BASE,
            "ids at or above 2^63 are reserved"
        );
        let extent = ByteRange::new(request.offset_bytes, request.length_bytes);
        match request.op {
            Op::Write if self.write_used + request.length_bytes <= self.write_capacity => {
                self.write_used += request.length_bytes;
                self.fast.push_back((now + self.latency_ns(), request.id));
                self.destage_queue.push_back(request);
                self.start_destages(now);
                for block in extent.blocks(BLOCK_BYTES) {
                    self.touch(block);
                }
            }
            Op::Write => self.backing.submit(now, request),
            Op::Read => {
                let hit = request.length_bytes > 0
                    && extent
                        .blocks(BLOCK_BYTES)
                        .all(|b| self.lru.contains_key(&b));
                if hit {
                    for block in extent.blocks(BLOCK_BYTES) {
                        self.touch(block);
                    }
                    self.fast.push_back((now + self.latency_ns(), request.id));
                } else {
                    self.misses.insert(request.id, extent);
                    self.backing.submit(now, request);
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let fast = self.fast.front().map(|(t, _)| *t);
        match (fast, self.backing.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>) {
        loop {
            let fast = self.fast.front().map(|(t, _)| *t).filter(|t| *t <= now);
            let backing = self.backing.poll_timeout().filter(|t| *t <= now);
            match (fast, backing) {
                (Some(f), b) if b.is_none_or(|b| f <= b) => {
                    let (t, id) = self.fast.pop_front().expect("fast");
                    completions.push(Completion { id, time_ns: t });
                }
                (_, Some(b)) => {
                    let mut done = std::mem::take(&mut self.scratch);
                    self.backing.advance(b, &mut done);
                    for c in done.drain(..) {
                        if let Some(bytes) = self.destages_in_flight.remove(&c.id) {
                            self.write_used -= bytes;
                            self.start_destages(c.time_ns);
                        } else {
                            if let Some(extent) = self.misses.remove(&c.id) {
                                for block in extent.blocks(BLOCK_BYTES) {
                                    self.touch(block);
                                }
                            }
                            completions.push(c);
                        }
                    }
                    self.scratch = done;
                }
                _ => break,
            }
        }
    }

    fn outstanding(&self) -> usize {
        self.fast.len() + self.backing.outstanding() - self.destages_in_flight.len()
    }

    fn busy_ns(&self) -> u64 {
        self.backing.busy_ns()
    }
}
