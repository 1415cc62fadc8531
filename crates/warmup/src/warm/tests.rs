//! The core driven directly, with its log in memory (every log write lands at once; the
//! simulation tests in `tests/cache_simulation.rs` add torn writes, crashes and reordering).

use rustc_hash::FxHashMap;

use super::*;

/// The log in memory, and a volume of version bytes (block → the byte every byte of it holds).
struct Disk {
    log: Vec<u8>,
    volume: FxHashMap<u64, u8>,
}

impl Disk {
    fn new() -> Disk {
        Disk {
            log: vec![0u8; 256 * BLOCK as usize],
            volume: FxHashMap::default(),
        }
    }

    fn open(&mut self, o: &Options) -> WarmCache {
        let mut c = WarmCache::open(0, o.clone(), Some(&mut MemoryLog(&self.log))).unwrap();
        // Until ready only log commands come.
        while !c.is_ready() {
            let io = c.poll_io().expect("a log command");
            assert!(self.run_one(&mut c, io).is_none());
        }
        c
    }

    fn contents(&self, b: u64) -> Vec<u8> {
        vec![*self.volume.get(&b).unwrap_or(&0); BLOCK as usize]
    }

    /// Carries out the log commands and flushes; returns the pre-load reads.
    fn run(&mut self, c: &mut WarmCache) -> Vec<(u64, u64, Ticket)> {
        let mut reads = Vec::new();
        while let Some(io) = c.poll_io() {
            reads.extend(self.run_one(c, io));
        }
        reads
    }

    /// Carries out a log command or a flush; a pre-load read is returned.
    fn run_one(&mut self, c: &mut WarmCache, io: CacheIo) -> Option<(u64, u64, Ticket)> {
        match run_in_memory(c, &mut self.log, 0, io)? {
            CacheIo::VolumeFlush => c.handle_volume_flushed(0, Ok(())),
            CacheIo::VolumeRead {
                offset_bytes,
                length_bytes,
                ticket,
            } => return Some((offset_bytes, length_bytes, ticket)),
            other => panic!("{other:?}"),
        }
        None
    }

    /// Answers pre-load reads from the volume until the pre-load is over.
    fn preload_all(&mut self, c: &mut WarmCache) {
        loop {
            let reads = self.run(c);
            if reads.is_empty() {
                break;
            }
            for (offset, length, t) in reads {
                let data: Vec<u8> = (offset / BLOCK..(offset + length) / BLOCK)
                    .flat_map(|b| self.contents(b))
                    .collect();
                c.preload_done(0, offset, Some(&data), t);
            }
        }
    }

    fn close(&mut self, c: &mut WarmCache) {
        c.handle_close(0);
        self.run(c);
        assert_eq!(c.closed(), Some(&Ok(())));
    }
}

fn options(data: bool) -> Options {
    Options {
        log_data: data,
        warmup_bytes: 64 * BLOCK,
        ..Options::new(256 * BLOCK)
    }
}

fn page(v: u8) -> Vec<u8> {
    vec![v; BLOCK as usize]
}

#[test]
fn a_slow_read_never_fills_over_a_newer_write() {
    let mut d = Disk::new();
    let mut c = d.open(&options(true));
    let t = c.read(0, BLOCK).unwrap_err();
    c.write_arrived(0, BLOCK);
    c.write_done(0, &page(2), true);
    // The read returns the old contents after the write: the cache keeps the write's.
    c.read_done(0, Some(&page(1)), t);
    assert_eq!(c.read(0, BLOCK).unwrap(), page(2));
    // ...and the log does not hold the read's old data as the newer copy.
    d.close(&mut c);
    let mut again = d.open(&options(true));
    assert_eq!(again.source(), &WarmupSource::LogWithData);
    again.load_snapshot(0);
    // Block 0's newest logged copy is the write's (2): the read's entry carries no data.
    assert_eq!(again.preload_loaded_blocks(), 0);
    assert_eq!(d.run(&mut again).len(), 1);
    let mut c = d.open(&options(false));
    // A failed write invalidates; a partial write invalidates its block.
    c.write_arrived(0, BLOCK);
    c.write_done(0, &page(3), false);
    assert!(c.read(0, BLOCK).is_err());
    c.write_done(BLOCK, &page(4), true);
    c.write_done(BLOCK + 10, &[9u8; 100], true);
    assert!(c.read(BLOCK, BLOCK).is_err());
    // Unaligned reads are served from whole cached blocks.
    c.write_done(4 * BLOCK, &[page(5), page(6)].concat(), true);
    assert_eq!(c.read(4 * BLOCK + 4000, 200).unwrap(), {
        let mut v = vec![5u8; 96];
        v.extend(vec![6u8; 104]);
        v
    });
}

#[test]
fn a_read_issued_while_a_write_is_in_flight_never_fills_over_it() {
    // The write arrives, then a read of the same block is issued; the volume completes the
    // write first but answers the read with the contents from before it (a drive may reorder
    // them). The write's completion counts as a write after the read's ticket.
    let mut d = Disk::new();
    let mut c = d.open(&options(false));
    c.write_arrived(0, BLOCK);
    let t = c.read(0, BLOCK).unwrap_err();
    c.write_done(0, &page(2), true);
    c.read_done(0, Some(&page(1)), t);
    assert_eq!(c.read(0, BLOCK).unwrap(), page(2));
}

#[test]
fn a_clean_log_preloads_its_data_and_a_crashed_one_reads_the_volume() {
    let mut d = Disk::new();
    let o = options(true);
    let mut c = d.open(&o);
    assert_eq!(c.source(), &WarmupSource::NewLog);
    for b in 0..8u64 {
        c.write_done(b * BLOCK, &page(b as u8), true);
    }
    c.write_done(3 * BLOCK, &page(33), true);
    d.close(&mut c);
    let mut c = d.open(&o);
    assert_eq!(c.source(), &WarmupSource::LogWithData);
    assert_eq!(c.preload_planned_blocks(), 8);
    c.load_snapshot(0);
    assert_eq!(c.preload_loaded_blocks(), 8);
    assert!(d.run(&mut c).is_empty());
    // Block 3 has its newest contents.
    assert_eq!(c.read(3 * BLOCK, BLOCK).unwrap(), page(33));
    // Not closed: a "crash". The next start reads every block from the volume.
    c.write_done(5 * BLOCK, &page(55), true);
    d.run(&mut c);
    let mut c = d.open(&o);
    assert_eq!(c.source(), &WarmupSource::Log);
    c.load_snapshot(0);
    assert_eq!(c.preload_loaded_blocks(), 0);
    let reads = d.run(&mut c);
    assert_eq!(reads.len(), 1);
    assert_eq!((reads[0].0, reads[0].1), (0, 8 * BLOCK));
    // A write to block 2 arrives while the pre-load read is out: block 2 is not loaded.
    c.write_arrived(2 * BLOCK, BLOCK);
    let volume: Vec<u8> = (0..8u8).flat_map(page).collect();
    c.preload_done(0, 0, Some(&volume), reads[0].2);
    assert_eq!(c.preload_loaded_blocks(), 7);
    assert!(c.read(2 * BLOCK, BLOCK).is_err());
    assert!(c.status().warmup.done);
}

#[test]
fn partial_writes_and_zeroes_are_never_preloaded_from_older_logged_data() {
    let mut d = Disk::new();
    let o = options(true);
    let mut c = d.open(&o);
    c.write_done(0, &page(1), true);
    c.write_done(BLOCK, &page(2), true);
    c.write_done(2 * BLOCK, &page(3), true);
    // Block 0 changed partly, block 1 zeroed, block 2 a write that failed.
    c.write_done(100, &[7u8; 10], true);
    c.zeroes_done(BLOCK, BLOCK);
    c.write_done(2 * BLOCK, &page(9), false);
    d.close(&mut c);
    let mut c = d.open(&o);
    assert_eq!(c.source(), &WarmupSource::LogWithData);
    c.load_snapshot(0);
    assert_eq!(
        c.preload_loaded_blocks(),
        0,
        "no logged data is the blocks' contents"
    );
    let reads = d.run(&mut c);
    assert_eq!((reads[0].0, reads[0].1), (0, 3 * BLOCK));
}

#[test]
fn a_cache_replaced_while_running_is_warmed_from_the_log_or_the_staging_buffer() {
    let mut d = Disk::new();
    // A metadata buffer of 16 entries: the first 16 writes reach the log, the rest stay staged.
    let o = Options {
        metadata_buffer_bytes: 16 * 16,
        ..options(false)
    };
    let mut c = d.open(&o);
    for b in 0..20u64 {
        c.write_done(b * BLOCK, &page(b as u8), true);
    }
    d.run(&mut c);
    c.handle_reset(0, 64 * BLOCK, Some(&mut MemoryLog(&d.log)));
    assert_eq!(c.source(), &WarmupSource::Log);
    assert_eq!(c.preload_planned_blocks(), 20, "16 from the log, 4 staged");
    assert!(c.read(0, BLOCK).is_err(), "the new cache starts empty");
    let reads = d.run(&mut c);
    assert_eq!((reads[0].0, reads[0].1), (0, 20 * BLOCK));
    c.preload_done(0, 0, None, reads[0].2);
    // The log fails: only the staged entries are left.
    for b in 20..36u64 {
        c.write_done(b * BLOCK, &page(b as u8), true);
    }
    let Some(CacheIo::LogWrite { id, .. }) = c.poll_io() else {
        panic!("a chunk to write")
    };
    c.handle_log_done(0, id, Err("no space left on device".into()));
    assert!(c.status().log_failed);
    c.handle_reset(0, 64 * BLOCK, Some(&mut MemoryLog(&d.log)));
    assert!(
        matches!(c.source(), WarmupSource::StagingOnly(_)),
        "{:?}",
        c.source()
    );
    assert_eq!(c.preload_planned_blocks(), 4);
    // A failed log is never closed clean.
    d.run(&mut c);
    c.handle_close(0);
    assert!(matches!(c.closed(), Some(Err(_))));
    // Without a log at all: on demand.
    let mut bare = WarmCache::open(0, Options::new(64 * BLOCK), None).unwrap();
    bare.handle_reset(0, 64 * BLOCK, None);
    assert!(matches!(bare.source(), WarmupSource::Fallback(_)));
    assert!(bare.status().warmup.done);
}

#[test]
fn a_log_write_that_fails_while_closing_leaves_the_log_not_clean() {
    let mut d = Disk::new();
    let o = options(true);
    let mut c = d.open(&o);
    c.write_done(0, &page(1), true);
    c.handle_close(0);
    let mut failed = false;
    while let Some(io) = c.poll_io() {
        match io {
            // The staged chunk's write fails; the sync after it succeeds.
            CacheIo::LogWrite {
                id, offset_bytes, ..
            } if offset_bytes > 0 && !failed => {
                failed = true;
                c.handle_log_done(0, id, Err("I/O error".into()));
            }
            CacheIo::LogWrite {
                offset_bytes: 0, ..
            } => panic!("the clean superblock is written"),
            io => assert_eq!(d.run_one(&mut c, io), None),
        }
    }
    assert!(failed);
    assert!(matches!(c.closed(), Some(Err(_))), "{:?}", c.closed());
    let again = d.open(&o);
    assert_eq!(
        again.source(),
        &WarmupSource::Log,
        "the next start trusts no logged data"
    );
}

#[test]
fn the_preload_follows_the_chosen_algorithm() {
    // Blocks 0..8 written once each, then block 5 three times and block 2 twice; a warm-up of 3.
    let mut d = Disk::new();
    let o = Options {
        warmup_bytes: 3 * BLOCK,
        ..options(false)
    };
    let mut c = d.open(&o);
    for b in [0u64, 1, 2, 3, 4, 5, 6, 7, 5, 5, 2, 5] {
        c.write_done(b * BLOCK, &page(b as u8), true);
    }
    d.close(&mut c);
    let planned = |algorithm, seed| {
        let o = Options {
            algorithm,
            seed,
            ..o.clone()
        };
        let mut log = d.log.clone();
        let mut c = WarmCache::open(0, o, Some(&mut MemoryLog(&log))).unwrap();
        let mut blocks = Vec::new();
        while let Some(io) = c.poll_io() {
            match run_in_memory(&mut c, &mut log, 0, io) {
                None => {}
                Some(CacheIo::VolumeRead {
                    offset_bytes,
                    length_bytes,
                    ..
                }) => blocks.extend(offset_bytes / BLOCK..(offset_bytes + length_bytes) / BLOCK),
                Some(other) => panic!("{other:?}"),
            }
        }
        blocks
    };
    assert_eq!(planned(Algorithm::LastK, 0), vec![2, 5, 7]);
    assert_eq!(planned(Algorithm::FirstK, 0), vec![0, 1, 2]);
    assert_eq!(planned(Algorithm::TopK, 0), vec![2, 5, 7]);
    let random: Vec<Vec<u64>> = (0..8).map(|s| planned(Algorithm::RandomK, s)).collect();
    assert!(random
        .iter()
        .all(|r| r.len() == 3 && r.iter().all(|b| *b < 8)));
    assert!(
        random.windows(2).any(|w| w[0] != w[1]),
        "the seed changes the draw"
    );
    assert_eq!(
        planned(Algorithm::RandomK, 3),
        random[3],
        "and only the seed"
    );
}

#[test]
fn an_unusable_log_falls_back_to_on_demand() {
    // Too small to hold a log.
    let log = vec![0u8; 4 * BLOCK as usize];
    let c = WarmCache::open(0, options(false), Some(&mut MemoryLog(&log))).unwrap();
    assert!(matches!(c.source(), WarmupSource::Fallback(_)));
    assert!(c.is_ready());
    assert!(c.status().warmup.done);
    // The not-clean mark cannot be written: the log is not used.
    let log = vec![0u8; 64 * BLOCK as usize];
    let mut c = WarmCache::open(0, options(false), Some(&mut MemoryLog(&log))).unwrap();
    let Some(CacheIo::LogWrite { id, .. }) = c.poll_io() else {
        panic!("the superblock first")
    };
    c.handle_log_done(0, id, Err("I/O error".into()));
    assert!(c.is_ready());
    assert!(matches!(c.source(), WarmupSource::Fallback(_)));
    assert!(WarmCache::open(0, Options::new(100), None).is_err());
}

#[derive(Clone, Debug)]
enum Step {
    /// A whole-block write of `blocks` blocks at `block`.
    Write {
        block: u64,
        blocks: u64,
    },
    /// A write of part of a block.
    Partial {
        block: u64,
    },
    Zeroes {
        block: u64,
    },
    /// A read that misses, answered after the next `delay` steps.
    Read {
        block: u64,
        delay: usize,
    },
    FailedWrite {
        block: u64,
    },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u64..12, 1u64..4).prop_map(|(block, blocks)| Step::Write { block, blocks }),
        1 => (0u64..12).prop_map(|block| Step::Partial { block }),
        1 => (0u64..12).prop_map(|block| Step::Zeroes { block }),
        3 => (0u64..12, 0usize..6).prop_map(|(block, delay)| Step::Read { block, delay }),
        1 => (0u64..12).prop_map(|block| Step::FailedWrite { block }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Whatever the I/O and however the server stops (cleanly or by a crash), what the next
    /// start puts in the cache (from the snapshot, or read from the volume) is each block's
    /// current contents.
    #[test]
    fn a_restart_never_preloads_stale_contents(
        steps in proptest::collection::vec(step(), 1..120),
        clean: bool,
        data: bool,
        small_buffers: bool,
    ) {
        let o = Options {
            metadata_buffer_bytes: if small_buffers { 8 * 16 } else { 256 << 10 },
            data_buffer_bytes: if small_buffers { 4 * BLOCK as usize } else { 128 << 20 },
            ..options(data)
        };
        let mut d = Disk { log: vec![0u8; 64 * BLOCK as usize], volume: FxHashMap::default() };
        let mut version = 0u8;
        let mut c = d.open(&o);
        // Reads in flight: (answer at step, block, ticket, contents when read).
        let mut reads: Vec<(usize, u64, Ticket, Vec<u8>)> = Vec::new();
        for (at, s) in steps.iter().enumerate() {
            let due: Vec<_> = reads.iter().filter(|r| r.0 <= at).cloned().collect();
            reads.retain(|r| r.0 > at);
            for (_, b, t, old) in due {
                c.read_done(b * BLOCK, Some(&old), t);
            }
            version = version.wrapping_add(1).max(1);
            match *s {
                Step::Write { block, blocks } => {
                    c.write_arrived(block * BLOCK, blocks * BLOCK);
                    for b in block..block + blocks {
                        d.volume.insert(b, version);
                    }
                    c.write_done(block * BLOCK, &vec![version; (blocks * BLOCK) as usize], true);
                }
                Step::Partial { block } => {
                    c.write_arrived(block * BLOCK + 100, 10);
                    // The model keeps whole-block contents: the partial write makes the
                    // block's contents a new version (as if those bytes changed).
                    d.volume.insert(block, version);
                    c.write_done(block * BLOCK + 100, &[version; 10], true);
                }
                Step::Zeroes { block } => {
                    c.write_arrived(block * BLOCK, BLOCK);
                    d.volume.insert(block, 0);
                    c.zeroes_done(block * BLOCK, BLOCK);
                }
                Step::FailedWrite { block } => {
                    // The volume may or may not have it: say it does (the worse case).
                    c.write_arrived(block * BLOCK, BLOCK);
                    d.volume.insert(block, version);
                    c.write_done(block * BLOCK, &vec![version; BLOCK as usize], false);
                }
                Step::Read { block, delay } => {
                    if let Err(t) = c.read(block * BLOCK, BLOCK) {
                        reads.push((at + delay, block, t, d.contents(block)));
                    }
                }
            }
            d.run(&mut c);
        }
        for (_, b, t, old) in reads.drain(..) {
            c.read_done(b * BLOCK, Some(&old), t);
        }
        d.run(&mut c);
        if clean {
            d.close(&mut c);
        }
        let mut c = d.open(&o);
        c.load_snapshot(0);
        d.preload_all(&mut c);
        for (b, got) in c.cached_blocks() {
            proptest::prop_assert_eq!(got[0], d.contents(b)[0], "block {}", b);
        }
    }
}
