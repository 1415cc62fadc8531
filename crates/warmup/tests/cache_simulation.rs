//! Bonfire's cache core ([`cordillera_warmup::warm`]) on a simulated node, under seeded faults:
//! a workload of reads, whole and partial writes, zeroes and failed writes through the cache;
//! the warm-up log and the volume on the node's disk (unflushed writes kept, lost or torn at a
//! crash; reads that may return the contents from before a write that completed first); crashes
//! mid-burst, clean stops, restarts, and caches replaced while running.
//!
//! The property, checked throughout every schedule (every 50 µs of virtual time in which an
//! event happened; without one, cache and disk are as the last check found them): every block
//! the cache holds, and no write to which is in flight, holds the volume's current contents —
//! in particular, nothing a start pre-loads (from the volume or from the log's data) is stale.
//!
//! `each_safeguard_is_needed` runs the same schedules with each of the core's three coherence
//! safeguards removed ([`Safeguards`]) and requires the property to fail for each.
//!
//! Environment (`cordillera_testkit::Schedules`): `WARM_SEED`, `WARM_SCHEDULES`, `WARM_SECONDS`,
//! `WARM_FIXED`, `WARM_BASE_SEED`.

/// The allocator of the seeded schedules (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use cordillera_models::presets;
use cordillera_sim::network::{Network, NetworkFaults, NetworkParams};
use cordillera_sim::rng::SimRng;
use cordillera_sim::storage::CrashModel;
use cordillera_sim::world::{Core, IoCommand, IoDone, Outgoing, World, WorldBuilder};
use cordillera_warmup::warm::{CacheIo, MemoryLog, Options, Safeguards, Ticket, WarmCache, BLOCK};

use cordillera_types::Nanos;

/// Schedules that once failed: 7 (a chunk lost between older and newer intact ones: data older
/// than it was trusted), 16 (the data of chunks written before a crash trusted after a later
/// clean close), 4508134463545876925 (sequence numbers reused after a crash, and a scan that
/// jumped over a newer chunk written inside an older one). 0 failed with tickets that counted
/// only a write's arrival. 6043255670398337913 (with device stalls) fails without safeguard 5:
/// a log chunk written over an older one still in flight landed beneath it, the scan of the
/// cleanly closed log stopped there, and the pre-load served a block's data from a chunk
/// before it, older than the block's last write (1 of 3,257 fresh schedules).
const REGRESSIONS: &[u64] = &[0, 7, 16, 4508134463545876925, 6043255670398337913];

/// Regression seeds found before the device stalled: they run without stalls, as they failed.
const BEFORE_STALLS: &[u64] = &[0, 7, 16, 4508134463545876925];

/// The log at the start of the disk, the volume after it.
const LOG_BYTES: u64 = 40 * BLOCK;
const VOLUME_AT: u64 = 1 << 20;
const VOLUME_BLOCKS: u64 = 48;
/// Requests outstanding at most.
const DEPTH: usize = 8;
const RUN_NS: Nanos = 150_000_000;
const CHECK_EVERY_NS: Nanos = 50_000;

/// What a disk request of the node is for.
enum Pending {
    /// The whole log read at start (or for a cache reset).
    LogRead {
        reset: bool,
    },
    /// A log command of the core.
    Log(u64),
    VolumeFlush,
    Preload {
        offset: u64,
        ticket: Ticket,
    },
    Miss {
        offset: u64,
        ticket: Ticket,
    },
    Write {
        offset: u64,
        data: Vec<u8>,
        kind: WriteKind,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    Whole,
    Partial,
    Zeroes,
    /// Written to the volume, but reported to the cache as failed (it may or may not be there).
    Failed,
}

/// Counts over every life of every schedule.
#[derive(Default, Debug, Clone)]
struct Counts {
    starts: u64,
    clean_stops: u64,
    resets: u64,
    hits: u64,
    misses: u64,
    writes: u64,
    snapshot_blocks: u64,
    preloaded_blocks: u64,
    checked_blocks: u64,
    /// Device requests that stalled.
    stalls: u64,
    /// The world's event hash (one schedule's; not added up).
    hash: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.starts += o.starts;
        self.clean_stops += o.clean_stops;
        self.resets += o.resets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.writes += o.writes;
        self.snapshot_blocks += o.snapshot_blocks;
        self.preloaded_blocks += o.preloaded_blocks;
        self.checked_blocks += o.checked_blocks;
        self.stalls += o.stalls;
    }
}

struct Node {
    options: Options,
    rng: SimRng,
    core: Option<WarmCache>,
    snapshot_loaded: bool,
    pending: FxHashMap<u64, Pending>,
    out: VecDeque<IoCommand>,
    next_io: u64,
    next_op_at: Nanos,
    requests: usize,
    /// Writes in flight per block (the checker skips those blocks).
    writing: FxHashMap<u64, u32>,
    stopping: bool,
    closing: bool,
    stopped: bool,
    counts: Rc<RefCell<Counts>>,
}

impl Node {
    fn submit(&mut self, pending: Pending, command: impl FnOnce(u64) -> IoCommand) {
        self.next_io += 1;
        self.pending.insert(self.next_io, pending);
        self.out.push_back(command(self.next_io));
    }

    /// Carries the core's requests to the disk, loads the snapshot once ready, closes once
    /// stopping and idle.
    fn pump(&mut self, now: Nanos) {
        self.carry(now);
        let Some(core) = self.core.as_mut() else {
            return;
        };
        if core.is_ready() && !self.snapshot_loaded {
            self.snapshot_loaded = true;
            core.load_snapshot(now);
            self.counts.borrow_mut().snapshot_blocks += core.preload_loaded_blocks();
            self.next_op_at = now;
            self.carry(now);
        }
        let core = self.core.as_mut().expect("some");
        if self.stopping && !self.closing && self.requests == 0 {
            self.closing = true;
            core.handle_close(now);
            self.carry(now);
        }
        let core = self.core.as_mut().expect("some");
        if let Some(r) = core.closed() {
            if !self.stopped {
                self.stopped = true;
                if r.is_ok() {
                    self.counts.borrow_mut().clean_stops += 1;
                }
            }
        }
    }

    /// Hands the core's requests to the disk.
    fn carry(&mut self, now: Nanos) {
        loop {
            let Some(core) = self.core.as_mut() else {
                return;
            };
            let Some(io) = core.poll_io() else { break };
            match io {
                CacheIo::LogResize { id, .. } => core.handle_log_done(now, id, Ok(())),
                CacheIo::LogWrite {
                    id,
                    offset_bytes,
                    data,
                } => self.submit(Pending::Log(id), |io| IoCommand::Write {
                    id: io,
                    offset_bytes,
                    data,
                }),
                CacheIo::LogSync { id } => {
                    self.submit(Pending::Log(id), |io| IoCommand::Flush { id: io })
                }
                CacheIo::VolumeFlush => {
                    self.submit(Pending::VolumeFlush, |io| IoCommand::Flush { id: io })
                }
                CacheIo::VolumeRead {
                    offset_bytes,
                    length_bytes,
                    ticket,
                } => self.submit(
                    Pending::Preload {
                        offset: offset_bytes,
                        ticket,
                    },
                    |io| IoCommand::Read {
                        id: io,
                        offset_bytes: VOLUME_AT + offset_bytes,
                        length_bytes,
                    },
                ),
            }
        }
    }

    fn block_of(&mut self) -> u64 {
        self.rng.below(VOLUME_BLOCKS)
    }

    /// One request of the workload.
    fn request(&mut self, now: Nanos) {
        self.core.as_mut().expect("serving").handle_tick(now);
        let draw = self.rng.unit();
        if draw < 0.004 {
            self.stopping = true;
            return;
        }
        if draw < 0.02 {
            self.counts.borrow_mut().resets += 1;
            self.submit(Pending::LogRead { reset: true }, |io| IoCommand::Read {
                id: io,
                offset_bytes: 0,
                length_bytes: LOG_BYTES,
            });
            return;
        }
        if draw < 0.45 {
            let block = self.block_of();
            let blocks = 1 + self.rng.below(2).min(VOLUME_BLOCKS - 1 - block);
            let (offset, length) = (block * BLOCK, blocks * BLOCK);
            match self.core.as_mut().expect("serving").read(offset, length) {
                Ok(_) => self.counts.borrow_mut().hits += 1,
                Err(ticket) => {
                    self.counts.borrow_mut().misses += 1;
                    self.requests += 1;
                    self.submit(Pending::Miss { offset, ticket }, |io| IoCommand::Read {
                        id: io,
                        offset_bytes: VOLUME_AT + offset,
                        length_bytes: length,
                    });
                }
            }
            return;
        }
        let kind = match self.rng.unit() {
            x if x < 0.7 => WriteKind::Whole,
            x if x < 0.82 => WriteKind::Partial,
            x if x < 0.91 => WriteKind::Zeroes,
            _ => WriteKind::Failed,
        };
        let block = self.block_of();
        let (offset, data) = match kind {
            WriteKind::Partial => {
                let sector = self.rng.below(BLOCK / 512);
                (block * BLOCK + sector * 512, self.pattern(512))
            }
            WriteKind::Zeroes => (block * BLOCK, vec![0u8; BLOCK as usize]),
            _ => {
                let blocks = 1 + self.rng.below(3).min(VOLUME_BLOCKS - 1 - block);
                (block * BLOCK, self.pattern((blocks * BLOCK) as usize))
            }
        };
        let core = self.core.as_mut().expect("serving");
        core.write_arrived(offset, data.len() as u64);
        for b in offset / BLOCK..(offset + data.len() as u64).div_ceil(BLOCK) {
            *self.writing.entry(b).or_default() += 1;
        }
        self.requests += 1;
        self.counts.borrow_mut().writes += 1;
        let command_data = data.clone();
        self.submit(Pending::Write { offset, data, kind }, |io| {
            IoCommand::Write {
                id: io,
                offset_bytes: VOLUME_AT + offset,
                data: command_data,
            }
        });
    }

    /// Data no other write has: each 8 bytes a fresh number, odd (never all zeros); `length`
    /// is a multiple of 512.
    fn pattern(&mut self, length: usize) -> Vec<u8> {
        let mut v = vec![0u8; length];
        self.rng.fill_bytes(&mut v);
        for word in v.chunks_exact_mut(8) {
            word[0] |= 1;
        }
        v
    }
}

impl Core for Node {
    type Message = ();

    fn handle_start(&mut self, _now: Nanos) {
        self.counts.borrow_mut().starts += 1;
        self.submit(Pending::LogRead { reset: false }, |io| IoCommand::Read {
            id: io,
            offset_bytes: 0,
            length_bytes: LOG_BYTES,
        });
    }

    fn handle_message(&mut self, _now: Nanos, _from: usize, _message: ()) {}

    fn handle_timeout(&mut self, now: Nanos) {
        if self.requests < DEPTH {
            self.request(now);
        }
        let mean = 60_000.0;
        self.next_op_at = now + 1 + self.rng.exponential(mean) as Nanos;
        self.pump(now);
    }

    fn handle_io(&mut self, now: Nanos, done: IoDone) {
        let (id, data) = match done {
            IoDone::Read { id, data } => (id, Some(data)),
            IoDone::Written { id } | IoDone::Flushed { id } => (id, None),
        };
        let pending = self.pending.remove(&id).expect("a request of ours");
        if let Ok(b) = std::env::var("WARM_TRACE") {
            let b: u64 = b.parse().unwrap_or(u64::MAX);
            let hit = |o: u64, l: u64| (o / BLOCK..(o + l).div_ceil(BLOCK)).contains(&b);
            let what = match &pending {
                Pending::LogRead { reset } => Some(format!("log read (reset {reset})")),
                Pending::Log(i) => Some(format!("log command {i} done")),
                Pending::VolumeFlush => Some("volume flush done".into()),
                Pending::Preload { offset, .. }
                    if hit(*offset, data.as_ref().map_or(0, |d| d.len() as u64)) =>
                {
                    Some(format!("preload read done at {offset}"))
                }
                Pending::Miss { offset, .. }
                    if hit(*offset, data.as_ref().map_or(0, |d| d.len() as u64)) =>
                {
                    Some(format!(
                        "miss read done at {offset}: {:?}",
                        &data.as_ref().unwrap()[((b * BLOCK).saturating_sub(*offset)) as usize..]
                            [..8]
                    ))
                }
                Pending::Write { offset, data, .. } if hit(*offset, data.len() as u64) => Some(
                    format!("write done at {offset}+{}: {:?}", data.len(), &data[..8]),
                ),
                _ => None,
            };
            if let Some(w) = what {
                eprintln!("{now} start {}: {w}", self.counts.borrow().starts);
            }
        }
        match pending {
            Pending::LogRead { reset } => {
                let log = data.expect("read");
                if std::env::var("WARM_TRACE").is_ok() {
                    use cordillera_warmup::wlog;
                    if let Ok(sb) = wlog::Superblock::decode(&log) {
                        let chunks =
                            wlog::scan(sb.capacity, sb.instance, wlog::read_from(&log), |o| o)
                                .unwrap();
                        eprintln!(
                            "{now}: log {sb:?} chunks {:?}",
                            chunks
                                .iter()
                                .map(|c| (c.seq, c.offset, c.length))
                                .collect::<Vec<_>>()
                        );
                    }
                }
                let mut reader = MemoryLog(&log);
                if reset {
                    let bytes = self.options.warmup_bytes;
                    if let Some(core) = self.core.as_mut() {
                        core.handle_reset(now, bytes, Some(&mut reader));
                    }
                } else {
                    let core = WarmCache::open(now, self.options.clone(), Some(&mut reader))
                        .expect("valid options");
                    self.core = Some(core);
                }
            }
            Pending::Log(log_id) => {
                let core = self.core.as_mut().expect("up");
                core.handle_log_done(now, log_id, Ok(()));
            }
            Pending::VolumeFlush => {
                let core = self.core.as_mut().expect("up");
                core.handle_volume_flushed(now, Ok(()));
            }
            Pending::Preload { offset, ticket } => {
                let core = self.core.as_mut().expect("up");
                core.preload_done(now, offset, data.as_deref(), ticket);
            }
            Pending::Miss { offset, ticket } => {
                self.requests -= 1;
                let core = self.core.as_mut().expect("up");
                core.read_done(offset, data.as_deref(), ticket);
            }
            Pending::Write { offset, data, kind } => {
                self.requests -= 1;
                for b in offset / BLOCK..(offset + data.len() as u64).div_ceil(BLOCK) {
                    let n = self.writing.get_mut(&b).expect("counted");
                    *n -= 1;
                    if *n == 0 {
                        self.writing.remove(&b);
                    }
                }
                let core = self.core.as_mut().expect("up");
                match kind {
                    WriteKind::Whole | WriteKind::Partial => core.write_done(offset, &data, true),
                    WriteKind::Failed => core.write_done(offset, &data, false),
                    WriteKind::Zeroes => core.zeroes_done(offset, data.len() as u64),
                }
            }
        }
        self.pump(now);
    }

    fn poll_message(&mut self) -> Option<Outgoing<()>> {
        None
    }

    fn poll_io(&mut self) -> Option<IoCommand> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let serving = self.snapshot_loaded && !self.stopping;
        serving.then_some(self.next_op_at)
    }
}

/// One schedule: the run's fingerprint (every event hashed in order), or how the property
/// failed.
fn run(seed: u64, safeguards: Safeguards, counts: &Rc<RefCell<Counts>>) -> Result<u64, String> {
    let mut setup = SimRng::new(seed, 3);
    let options = Options {
        safeguards,
        ..Options::drawn(&mut setup, seed, LOG_BYTES, 24)
    };
    let lives = Rc::new(RefCell::new(0u64));
    let (c, l) = (counts.clone(), lives.clone());
    let builder = WorldBuilder {
        new_core: Box::new(move |_| {
            *l.borrow_mut() += 1;
            Node {
                options: options.clone(),
                rng: SimRng::new(seed, 100 + *l.borrow()),
                core: None,
                snapshot_loaded: false,
                pending: FxHashMap::default(),
                out: VecDeque::new(),
                next_io: 0,
                next_op_at: 0,
                requests: 0,
                writing: FxHashMap::default(),
                stopping: false,
                closing: false,
                stopped: false,
                counts: c.clone(),
            }
        }),
        new_device: Box::new(|_| presets::device("ssd").unwrap()),
        crash_model: CrashModel::default(),
        flush_ns: 30_000,
        early_reads: 0.3,
        reorder: 0.5,
    };
    let network = Network::new(
        NetworkParams::sierra_testbed(1, 1),
        NetworkFaults::default(),
        SimRng::new(seed, 1),
    );
    let mut world = World::new(builder, network, SimRng::new(seed, 2));
    // Half the schedules have a device that stalls (a tenth of requests complete 5 ms late on
    // average, as under garbage collection): a log chunk written while an older one at the
    // same place is in flight may then land beneath it.
    if !BEFORE_STALLS.contains(&seed) && SimRng::new(seed, 4).chance(0.5) {
        world.stall_ios(0.1, 5e6);
    }
    let crashes = 1 + setup.below(4) as usize;
    world.schedule_random_crashes(&[0], crashes, 5_000_000, RUN_NS - 20_000_000, 2e6);
    let mut t = 0;
    while t < RUN_NS {
        t += CHECK_EVERY_NS;
        // With no event since the last check, the cache and the disk are as they were then
        // (and were checked).
        let changed = world.run_until(t) > 0;
        let storage = world.storage(0);
        if let Some(node) = world.core(0) {
            if let Some(core) = node.core.as_ref().filter(|_| changed) {
                let mut checked = 0;
                for (b, page) in core.cached_blocks() {
                    if node.writing.contains_key(&b) {
                        continue;
                    }
                    checked += 1;
                    if !storage.holds(VOLUME_AT + b * BLOCK, page) {
                        if std::env::var("WARM_TRACE").is_ok() {
                            explain(storage, b, page, &world.faults);
                        }
                        return Err(format!(
                            "at {t} ns (start {}), block {b}: the cache holds contents the volume does not ({:?})",
                            node.counts.borrow().starts,
                            core.source()
                        ));
                    }
                }
                counts.borrow_mut().checked_blocks += checked;
            }
            if node.stopped {
                // A clean stop is over: the node restarts (a crash now loses nothing).
                world.schedule_crash(0, t, Some(1_000_000));
            }
        }
    }
    if let Some(core) = world.core(0).and_then(|n| n.core.as_ref()) {
        counts.borrow_mut().preloaded_blocks += core.preload_loaded_blocks();
    }
    counts.borrow_mut().stalls += world.stalls;
    Ok(world.hash.0)
}

/// What the log on the disk says of `block` (for `WARM_TRACE=1`).
fn explain(
    storage: &cordillera_sim::storage::SimStorage,
    block: u64,
    cached: &[u8],
    faults: &[cordillera_sim::world::NodeFault],
) {
    use cordillera_warmup::wlog;
    let log = storage.read(0, LOG_BYTES as usize);
    let sb = wlog::Superblock::decode(&log);
    eprintln!("superblock: {sb:?}; faults: {}", faults.len());
    let Ok(sb) = sb else { return };
    let chunks = wlog::scan(sb.capacity, sb.instance, wlog::read_from(&log), |o| o).unwrap();
    eprintln!(
        "chunks: {:?}",
        chunks
            .iter()
            .map(|c| (c.seq, c.offset, c.length))
            .collect::<Vec<_>>()
    );
    for c in &chunks {
        for (e, d) in &c.entries {
            if (e.block..e.block + e.blocks as u64).contains(&block) {
                let at = d.map(|d| d + (block - e.block) * BLOCK);
                let same = at.map(|a| &log[a as usize..(a + BLOCK) as usize] == cached);
                eprintln!(
                    "  chunk {} entry {:?} data at {:?} (the cached contents: {:?})",
                    c.seq, e, at, same
                );
            }
        }
    }
}

/// One schedule with every safeguard; its counts.
fn run_default(seed: u64) -> Result<Counts, String> {
    let counts = Rc::new(RefCell::new(Counts::default()));
    let hash = run(seed, Safeguards::default(), &counts)?;
    let c = counts.borrow().clone();
    Ok(Counts { hash, ..c })
}

/// 20 fixed seeds, then fresh ones for 15 s (about 650 on two cores).
const BUDGET: cordillera_testkit::Budget = cordillera_testkit::Budget {
    seconds: 15.0,
    least: 40,
};

/// A seed replays event for event (same fingerprint, same counts); another seed is another
/// run.
#[test]
fn a_schedule_replays_event_for_event() {
    let once = |seed: u64| {
        let counts = Rc::new(RefCell::new(Counts::default()));
        let hash = run(seed, Safeguards::default(), &counts)
            .unwrap_or_else(|e| panic!("schedule {seed}: {e}"));
        let c = counts.borrow().clone();
        (hash, format!("{c:?}"), c.starts)
    };
    let a = once(3);
    assert_eq!(a, once(3));
    assert!(a.2 > 1, "schedule 3 restarts the cache: {}", a.1);
    assert_ne!(a.0, once(4).0);
}

#[test]
fn the_cache_never_holds_or_preloads_stale_contents() {
    let schedules = cordillera_testkit::Schedules::from_env("WARM", REGRESSIONS, 20, BUDGET);
    let ran = schedules.run(run_default);
    schedules.write_hashes(&ran, |o| o.hash);
    let mut c = Counts::default();
    for o in ran.results.iter().filter_map(|(_, r)| r.as_ref().ok()) {
        c.add(o);
    }
    schedules.summary(
        &ran,
        &[
            ("starts", c.starts),
            ("writes", c.writes),
            ("hits", c.hits),
            ("stalls", c.stalls),
            ("blocks_checked", c.checked_blocks),
        ],
    );
    cordillera_testkit::all_succeeded(
        &ran.results,
        "WARM",
        "cargo nextest run -p cordillera-warmup --test cache_simulation the_cache_never --no-capture",
    );
    println!(
        "warm-up cache simulation: {} schedules, {} starts ({} after a clean stop), {} cache resets, {} hits, {} misses, {} writes, {} blocks loaded from log data, {} cached blocks checked",
        ran.len(),
        c.starts,
        c.clean_stops,
        c.resets,
        c.hits,
        c.misses,
        c.writes,
        c.snapshot_blocks,
        c.checked_blocks
    );
    // The schedules exercise what they claim: restarts after crashes and clean stops, snapshot
    // pre-loads, resets, hits.
    if !schedules.single {
        let n = ran.len() as u64;
        assert!(c.starts >= 2 * n, "{c:?}");
        assert!(c.clean_stops >= n / 4, "{c:?}");
        assert!(c.snapshot_blocks > 0 && c.resets >= n / 2, "{c:?}");
        assert!(c.hits > 10 * n && c.checked_blocks > 1000 * n, "{c:?}");
    }
}

#[test]
fn each_safeguard_is_needed() {
    let removed = [
        (
            "tickets",
            Safeguards {
                tickets: false,
                ..Safeguards::default()
            },
        ),
        (
            "clean close only",
            Safeguards {
                clean_close_only: false,
                ..Safeguards::default()
            },
        ),
        (
            "changes without data",
            Safeguards {
                changes_without_data: false,
                ..Safeguards::default()
            },
        ),
        (
            "concurrent writes",
            Safeguards {
                concurrent_writes: false,
                ..Safeguards::default()
            },
        ),
    ];
    let counts = Rc::new(RefCell::new(Counts::default()));
    for (name, safeguards) in removed {
        let found =
            (0..400u64).find_map(|seed| run(seed, safeguards, &counts).err().map(|e| (seed, e)));
        let Some((seed, e)) = found else {
            panic!("without {name}, 400 schedules found nothing: the simulation cannot see what {name} prevents");
        };
        println!("without {name}: schedule {seed} fails: {e}");
    }
}
