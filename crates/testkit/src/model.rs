//! The reference model of a block volume for seeded simulation tests (TigerBeetle's state
//! checker, in small): for every block, the writes a read may return. A read issued at `t`
//! may return a write issued before the read completed, unless a later write, issued after it
//! ended and acknowledged before `t`, hides it. A write that ended without an acknowledgement
//! (an error, a crash of its issuer) may or may not have happened: it stays possible until such
//! a later write hides it. Every write's data names its block, sector and write
//! ([`pattern`]), so a read's bytes say which write each sector came from ([`writers_of`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use cordillera_types::Nanos;

/// The unit a torn write keeps or loses.
pub const SECTOR: u64 = 512;

/// The unit of the model.
pub const BLOCK: u64 = 4096;

/// The bytes write `write` puts in a block: every sector names its block, sector and write, so
/// that a block torn by a crash (sectors of different writes) is still told apart.
pub fn pattern(block: u64, write: u64) -> Vec<u8> {
    let mut data = Vec::with_capacity(BLOCK as usize);
    for sector in 0..BLOCK / SECTOR {
        data.extend_from_slice(&sector_pattern(block, sector, write));
    }
    data
}

pub fn sector_pattern(block: u64, sector: u64, write: u64) -> Vec<u8> {
    let mut data = vec![(block * 31 + sector * 5 + write * 7) as u8; SECTOR as usize];
    data[..8].copy_from_slice(&block.to_le_bytes());
    data[8..16].copy_from_slice(&sector.to_le_bytes());
    data[16..24].copy_from_slice(&write.to_le_bytes());
    data
}

/// Which write produced each sector of a block (0: never written; `None`: foreign bytes).
pub fn writers_of(block: u64, bytes: &[u8]) -> Vec<Option<u64>> {
    bytes
        .chunks(SECTOR as usize)
        .enumerate()
        .map(|(sector, s)| {
            if s.iter().all(|&b| b == 0) {
                return Some(0);
            }
            let write = u64::from_le_bytes(s[16..24].try_into().unwrap());
            (s == sector_pattern(block, sector as u64, write).as_slice()).then_some(write)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The reference model of one client's volume; it outlives crashes of the client's node.

#[derive(Clone, Copy, Debug)]
pub struct WriteRec {
    pub id: u64,
    pub issued: Nanos,
    /// When it was acknowledged.
    pub acked: Option<Nanos>,
    /// Acknowledged, or lost unacknowledged in a crash (it may or may not have happened then).
    pub ended: Option<Nanos>,
}

#[derive(Default)]
pub struct Model {
    pub blocks: Vec<Vec<WriteRec>>,
    pub in_flight: HashSet<u64>,
    /// Issue times of reads in flight (history a read may still return is kept).
    pub reads_open: BTreeMap<Nanos, u32>,
    pub writes_of: HashMap<u64, (u64, u64)>,
    pub next_write: u64,
    pub starts: u64,
    /// When each life of the client became ready.
    pub ready_at: Vec<Nanos>,
    pub reads_checked: u64,
    pub blocks_checked: u64,
    pub writes_acked: u64,
    pub violations: Vec<String>,
}

impl Model {
    pub fn new(blocks: u64) -> Model {
        Model {
            blocks: vec![Vec::new(); blocks as usize],
            next_write: 1,
            ..Model::default()
        }
    }

    pub fn write_issued(&mut self, now: Nanos, first: u64, count: u64) -> u64 {
        let id = self.next_write;
        self.next_write += 1;
        for b in first..first + count {
            self.blocks[b as usize].push(WriteRec {
                id,
                issued: now,
                acked: None,
                ended: None,
            });
        }
        self.in_flight.insert(id);
        self.writes_of.insert(id, (first, count));
        id
    }

    pub fn write_ended(&mut self, now: Nanos, id: u64, acked: bool) {
        self.in_flight.remove(&id);
        let (first, count) = self.writes_of.remove(&id).expect("a write in flight");
        for b in first..first + count {
            let history = &mut self.blocks[b as usize];
            let w = history.iter_mut().find(|w| w.id == id).expect("recorded");
            w.ended = Some(now);
            if acked {
                w.acked = Some(now);
            }
            if history.len() > 32 {
                let oldest_read = self.reads_open.keys().next().copied().unwrap_or(now);
                Model::prune(history, now.min(oldest_read));
            }
        }
        if acked {
            self.writes_acked += 1;
        }
    }

    /// Drops writes no read issued from `now` on may return.
    fn prune(history: &mut Vec<WriteRec>, now: Nanos) {
        let snapshot = history.clone();
        history.retain(|w| !Model::stale(&snapshot, w, now));
    }

    /// Whether a later write, issued after `w` ended and acknowledged before `at`, hides `w`.
    fn stale(history: &[WriteRec], w: &WriteRec, at: Nanos) -> bool {
        let Some(ended) = w.ended else {
            return false;
        };
        history
            .iter()
            .any(|o| o.issued > ended && o.acked.is_some_and(|a| a < at))
    }

    pub fn acceptable(&self, block: u64, issued: Nanos, completed: Nanos, writer: u64) -> bool {
        let history = &self.blocks[block as usize];
        if writer == 0 {
            // Never written, or only by writes not yet acknowledged when the read was issued.
            return !history.iter().any(|o| o.acked.is_some_and(|a| a < issued));
        }
        history
            .iter()
            .find(|w| w.id == writer)
            .is_some_and(|w| w.issued < completed && !Model::stale(history, w, issued))
    }

    pub fn read_issued(&mut self, at: Nanos) {
        *self.reads_open.entry(at).or_default() += 1;
    }

    pub fn read_ended(&mut self, at: Nanos) {
        let n = self.reads_open.get_mut(&at).expect("a read in flight");
        *n -= 1;
        if *n == 0 {
            self.reads_open.remove(&at);
        }
    }

    pub fn check_read(
        &mut self,
        client: usize,
        first: u64,
        issued: Nanos,
        now: Nanos,
        data: &[u8],
    ) {
        self.read_ended(issued);
        self.reads_checked += 1;
        for (i, bytes) in data.chunks(BLOCK as usize).enumerate() {
            let block = first + i as u64;
            self.blocks_checked += 1;
            let writers = writers_of(block, bytes);
            let ok = writers
                .iter()
                .all(|w| w.is_some_and(|w| self.acceptable(block, issued, now, w)));
            if !ok && self.violations.len() < 8 {
                self.violations.push(format!(
                    "client {client}: read of block {block} issued at {issued} ns, completed at {now} ns, returned writes {writers:?}; history {:?}",
                    self.blocks[block as usize]
                ));
            }
        }
    }

    /// The client's node crashed (noticed at its restart): writes in flight end unacknowledged.
    pub fn crashed(&mut self, now: Nanos) {
        self.crashed_keeping(now, &HashSet::new());
    }

    /// The client crashed, but the writes in `still_open` live on in servers that hold them
    /// (a distributed store finishes a dead client's requests): they stay in flight until the
    /// caller ends them ([`Model::write_ended`]) when the servers are done with them.
    pub fn crashed_keeping(&mut self, now: Nanos, still_open: &HashSet<u64>) {
        self.reads_open.clear();
        let lost: Vec<u64> = self
            .in_flight
            .iter()
            .copied()
            .filter(|id| !still_open.contains(id))
            .collect();
        for id in lost {
            self.write_ended(now, id, false);
        }
    }
}
