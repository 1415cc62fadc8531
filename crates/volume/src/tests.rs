//! The request path over a client with no stores (a plain volume) and a disk in memory.

use rustc_hash::FxHashMap;

use cordillera_offload::{BaseDone, BaseOp, Config};
use cordillera_warmup::warm::{run_in_memory, MemoryLog, Options, WarmCache, BLOCK};

use super::*;

const VOLUME_BYTES: u64 = 16 << 20;

struct Harness {
    client: Client,
    volume: Volume,
    disk: Vec<u8>,
    log: Vec<u8>,
    answers: FxHashMap<u64, Answer>,
    base_reads: usize,
}

impl Harness {
    fn new(cache: bool) -> Harness {
        let log = vec![0u8; 64 * BLOCK as usize];
        let cache = cache.then(|| {
            let o = Options {
                warmup_bytes: 16 * BLOCK,
                ..Options::new(64 * BLOCK)
            };
            WarmCache::open(0, o, Some(&mut MemoryLog(&log))).unwrap()
        });
        let config = Config::new(1, 1, VOLUME_BYTES + SUPERBLOCK_ROOM);
        let mut h = Harness {
            client: Client::format(config, Vec::new(), 0),
            volume: Volume::new(cache),
            disk: vec![0u8; (VOLUME_BYTES + SUPERBLOCK_ROOM) as usize],
            log,
            answers: FxHashMap::default(),
            base_reads: 0,
        };
        h.settle();
        assert!(h.client.is_ready());
        h
    }

    /// Runs everything to quiescence.
    fn settle(&mut self) {
        loop {
            let mut progress = false;
            while let Some(op) = self.client.poll_base() {
                progress = true;
                let done = match op {
                    BaseOp::Read {
                        id,
                        offset_bytes,
                        length_bytes,
                    } => {
                        self.base_reads += 1;
                        let at = offset_bytes as usize;
                        BaseDone::Read {
                            id,
                            data: self.disk[at..at + length_bytes as usize].to_vec(),
                        }
                    }
                    write => {
                        let (id, offset_bytes, data) = write.into_write().expect("a write");
                        let at = offset_bytes as usize;
                        self.disk[at..at + data.len()].copy_from_slice(&data);
                        BaseDone::Written { id }
                    }
                };
                self.client.handle_base(0, done);
            }
            while let Some((id, reply)) = self.client.poll_upward() {
                progress = true;
                assert!(self.volume.owns(id));
                self.volume.handle_reply(0, id, reply);
            }
            progress |= self.volume.pump(0, &mut self.client);
            while let Some((tag, answer)) = self.volume.poll_answer() {
                progress = true;
                self.answers.insert(tag, answer);
            }
            while let Some(io) = self.volume.poll_cache_io() {
                progress = true;
                let cache = self.volume.cache_mut().expect("a cache");
                match run_in_memory(cache, &mut self.log, 0, io) {
                    None => {}
                    Some(CacheIo::VolumeFlush) => cache.handle_volume_flushed(0, Ok(())),
                    Some(other) => unreachable!("pre-loads go to the client: {other:?}"),
                }
            }
            if !progress {
                return;
            }
        }
    }

    fn request(&mut self, tag: u64, r: Request) -> Answer {
        self.volume.handle_request(0, &mut self.client, tag, r);
        self.settle();
        self.answers.remove(&tag).expect("answered")
    }
}

/// Room after the volume for the client's store set.
const SUPERBLOCK_ROOM: u64 = 1 << 20;

#[test]
fn requests_are_cut_into_pieces_and_answered_whole() {
    let mut h = Harness::new(false);
    let data: Vec<u8> = (0..(PIECE_BYTES + 3 * BLOCK) as usize)
        .map(|i| (i / 4096) as u8)
        .collect();
    let offset = BLOCK;
    assert_eq!(
        h.request(
            1,
            Request::Write {
                offset,
                data: data.clone(),
                fua: false
            }
        ),
        Ok(None)
    );
    let got = h.request(
        2,
        Request::Read {
            offset,
            length: data.len() as u64,
        },
    );
    assert_eq!(got, Ok(Some(data)));
    assert_eq!(
        h.request(
            3,
            Request::WriteZeroes {
                offset,
                length: 2 * BLOCK,
                fua: true
            }
        ),
        Ok(None)
    );
    assert_eq!(
        h.request(
            4,
            Request::Read {
                offset,
                length: BLOCK
            }
        ),
        Ok(Some(vec![0u8; BLOCK as usize]))
    );
    // A request of no bytes, or past the end, is the client's bad request.
    assert_eq!(
        h.request(5, Request::Read { offset, length: 0 }),
        Err(ClientError::BadRequest)
    );
    assert_eq!(
        h.request(
            6,
            Request::Read {
                offset: VOLUME_BYTES + SUPERBLOCK_ROOM,
                length: BLOCK
            }
        ),
        Err(ClientError::BadRequest)
    );
    assert_eq!(h.volume.in_flight(), 0);
}

#[test]
fn the_cache_answers_what_it_holds_and_fills_from_the_client() {
    let mut h = Harness::new(true);
    h.request(
        1,
        Request::Write {
            offset: 0,
            data: vec![7u8; 2 * BLOCK as usize],
            fua: false,
        },
    )
    .unwrap();
    // The write filled the cache: the read is answered without the base volume.
    let reads = h.base_reads;
    assert_eq!(
        h.request(
            2,
            Request::Read {
                offset: 0,
                length: 2 * BLOCK
            }
        ),
        Ok(Some(vec![7u8; 2 * BLOCK as usize]))
    );
    assert_eq!(h.base_reads, reads);
    // A miss is read from the volume and fills the cache.
    h.disk[10 * BLOCK as usize..11 * BLOCK as usize].fill(3);
    assert_eq!(
        h.request(
            3,
            Request::Read {
                offset: 10 * BLOCK,
                length: BLOCK
            }
        ),
        Ok(Some(vec![3u8; BLOCK as usize]))
    );
    assert_eq!(h.base_reads, reads + 1);
    h.request(
        4,
        Request::Read {
            offset: 10 * BLOCK,
            length: BLOCK,
        },
    )
    .unwrap();
    assert_eq!(h.base_reads, reads + 1, "a hit");
    assert_eq!(h.volume.cache().unwrap().status().hit_blocks, 3);
}

#[test]
fn the_preload_reaches_the_client_only_when_let_through() {
    // A clean log naming blocks 0..4, then a new cache over it.
    let mut first = Harness::new(true);
    for b in 0..4u64 {
        first
            .request(
                b,
                Request::Write {
                    offset: b * BLOCK,
                    data: vec![b as u8 + 1; BLOCK as usize],
                    fua: false,
                },
            )
            .unwrap();
    }
    first.volume.cache_mut().unwrap().handle_close(0);
    first.settle();
    assert_eq!(first.volume.cache().unwrap().closed(), Some(&Ok(())));
    let o = Options {
        warmup_bytes: 16 * BLOCK,
        ..Options::new(64 * BLOCK)
    };
    let mut cache = WarmCache::open(0, o, Some(&mut MemoryLog(&first.log))).unwrap();
    // Marking the log in use.
    let mut log = first.log;
    while !cache.is_ready() {
        let io = cache.poll_io().unwrap();
        assert_eq!(run_in_memory(&mut cache, &mut log, 0, io), None);
    }
    cache.load_snapshot(0);
    let mut h = Harness {
        client: first.client,
        volume: Volume::new(Some(cache)),
        disk: first.disk,
        log,
        answers: FxHashMap::default(),
        base_reads: 0,
    };
    h.settle();
    assert_eq!(h.base_reads, 0, "held back until let through");
    h.volume.set_preloading(true);
    h.settle();
    assert_eq!(h.base_reads, 1, "one run of four blocks");
    let c = h.volume.cache().unwrap();
    assert_eq!(c.preload_loaded_blocks(), 4);
    assert!(c.status().warmup.done);
    assert_eq!(
        h.request(
            9,
            Request::Read {
                offset: 2 * BLOCK,
                length: BLOCK
            }
        ),
        Ok(Some(vec![3u8; BLOCK as usize]))
    );
    assert_eq!(h.base_reads, 1, "pre-loaded");
}
