//! A volume's request path, sans I/O: what the volume server does with a block request between
//! its export (NBD) and the off-loading client ([`cordillera_offload::Client`]), with Bonfire's
//! cache ([`cordillera_warmup::warm::WarmCache`]) above the client when there is one.
//!
//! - A read the cache holds whole is answered at once; any other read goes to the client, and
//!   its data fills the cache when it comes back (with the ticket the cache gave it).
//! - A write tells the cache it arrived before the client sees it, and the cache takes its data
//!   (or forgets the blocks, for zeroes and failed writes) when the client answers.
//! - Requests are cut into pieces of at most [`PIECE_BYTES`] (a store record holds at most
//!   16 MiB); a request is answered when its last piece is, with the first error if any.
//! - The cache's pre-load reads go to the client like reads, but answer nobody.
//!
//! # Driver contract
//!
//! ```text
//! handle_request(now, client, tag, request)       a request arrives
//! handle_reply(now, id, reply)                    for each client.poll_upward()
//! pump(now, client)                               after either, and after any client call
//! while let Some((tag, outcome)) = poll_answer()  answer the requests
//! while let Some(io) = poll_cache_io()            the cache's log commands and volume flush
//! ```
//!
//! The client's own duties (its base and store I/O, its timers) stay with the driver, which
//! owns the client; this core only adds requests to it and takes its answers.
//!
//! [`label`]: the volume label in the last 4 KiB of the base (docs/FORMATS.md).

pub mod label;

use rustc_hash::FxHashMap;
use std::collections::VecDeque;

use cordillera_offload::{Client, ClientError, UpReply, Upward};
use cordillera_warmup::warm::{CacheIo, Ticket, WarmCache};

/// Requests are cut into pieces of at most this.
pub const PIECE_BYTES: u64 = 4 << 20;

/// Upward request ids this core gives the client start here (the driver may use those below).
const FIRST_ID: u64 = 1;

/// A block request at the volume's export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Read {
        offset: u64,
        length: u64,
    },
    /// `fua`: durable before the answer.
    Write {
        offset: u64,
        data: Vec<u8>,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        length: u64,
        fua: bool,
    },
}

/// A request's answer: a read's bytes, nothing for a write, or the client's error.
pub type Answer = Result<Option<Vec<u8>>, ClientError>;

/// What the cache does when a request is answered.
enum CacheStep {
    /// A read that missed: fill the cache.
    Read { offset: u64, ticket: Ticket },
    /// A write: the cache takes its data once the volume has it.
    Write { offset: u64, data: Vec<u8> },
    /// Zeroes written: the cache forgets the blocks.
    Zeroes { offset: u64, length: u64 },
}

/// One request, cut into pieces.
struct Parent {
    tag: u64,
    /// For a read: the pieces' bytes, in order.
    pieces: Vec<Vec<u8>>,
    remaining: usize,
    error: Option<ClientError>,
    read: bool,
    cache: Option<CacheStep>,
}

pub struct Volume {
    cache: Option<WarmCache>,
    parents: FxHashMap<u64, Parent>,
    /// Client request id → (parent, piece index).
    pieces: FxHashMap<u64, (u64, usize)>,
    /// Pre-load reads in flight: client request id → (offset, ticket).
    preloads: FxHashMap<u64, (u64, Ticket)>,
    next_parent: u64,
    next_id: u64,
    answers: VecDeque<(u64, Answer)>,
    cache_io: VecDeque<CacheIo>,
    /// Whether the cache's pre-load may go to the client (it is ready).
    preloading: bool,
}

impl Volume {
    /// The request path over a client, with `cache` above it if any (ready: its log marked in
    /// use, its snapshot loaded).
    pub fn new(cache: Option<WarmCache>) -> Volume {
        Volume {
            cache,
            parents: FxHashMap::default(),
            pieces: FxHashMap::default(),
            preloads: FxHashMap::default(),
            next_parent: 0,
            next_id: FIRST_ID,
            answers: VecDeque::new(),
            cache_io: VecDeque::new(),
            preloading: false,
        }
    }

    pub fn cache(&self) -> Option<&WarmCache> {
        self.cache.as_ref()
    }

    pub fn cache_mut(&mut self) -> Option<&mut WarmCache> {
        self.cache.as_mut()
    }

    /// Requests not yet answered.
    pub fn in_flight(&self) -> usize {
        self.parents.len()
    }

    /// Whether `id` (from `client.poll_upward`) is one of this core's.
    pub fn owns(&self, id: u64) -> bool {
        self.pieces.contains_key(&id) || self.preloads.contains_key(&id)
    }

    /// Lets the cache's pre-load reach the client (once the client is ready; never while the
    /// volume stops).
    pub fn set_preloading(&mut self, on: bool) {
        self.preloading = on;
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A request arrives.
    pub fn handle_request(&mut self, now: u64, client: &mut Client, tag: u64, request: Request) {
        let mut cache_step = None;
        if let Some(c) = self.cache.as_mut() {
            match &request {
                Request::Read { offset, length } => match c.read(*offset, *length) {
                    Ok(data) => {
                        self.answers.push_back((tag, Ok(Some(data))));
                        return;
                    }
                    Err(ticket) => {
                        cache_step = Some(CacheStep::Read {
                            offset: *offset,
                            ticket,
                        })
                    }
                },
                Request::Write { offset, data, .. } => {
                    c.write_arrived(*offset, data.len() as u64);
                    cache_step = Some(CacheStep::Write {
                        offset: *offset,
                        data: data.clone(),
                    });
                }
                Request::WriteZeroes { offset, length, .. } => {
                    c.write_arrived(*offset, *length);
                    cache_step = Some(CacheStep::Zeroes {
                        offset: *offset,
                        length: *length,
                    });
                }
            }
        }
        let read = matches!(request, Request::Read { .. });
        let upward = pieces(request);
        debug_assert!(!upward.is_empty(), "a request cut into no piece");
        let parent = self.next_parent;
        self.next_parent += 1;
        self.parents.insert(
            parent,
            Parent {
                tag,
                pieces: vec![Vec::new(); if read { upward.len() } else { 0 }],
                remaining: upward.len(),
                error: None,
                read,
                cache: cache_step,
            },
        );
        for (i, u) in upward.into_iter().enumerate() {
            let id = self.id();
            let fresh = self.pieces.insert(id, (parent, i)).is_none();
            debug_assert!(fresh, "client request id {id} given out twice");
            client.handle_upward(now, id, u);
        }
    }

    /// The client answered one of this core's requests (others are ignored).
    pub fn handle_reply(&mut self, now: u64, id: u64, reply: UpReply) {
        if let Some((offset, ticket)) = self.preloads.remove(&id) {
            if let Some(c) = self.cache.as_mut() {
                let data = match &reply {
                    UpReply::Read(d) => Some(d.as_slice()),
                    _ => None,
                };
                c.preload_done(now, offset, data, ticket);
            }
            return;
        }
        let Some((parent_id, piece)) = self.pieces.remove(&id) else {
            return;
        };
        let Some(parent) = self.parents.get_mut(&parent_id) else {
            return;
        };
        debug_assert!(
            parent.remaining > 0,
            "a piece answered after its request was whole"
        );
        match reply {
            UpReply::Read(data) => {
                debug_assert!(parent.read, "a write's piece answered with data");
                parent.pieces[piece] = data
            }
            UpReply::Written => debug_assert!(!parent.read, "a read's piece answered as written"),
            UpReply::Error(e) => {
                parent.error.get_or_insert(e);
            }
        }
        parent.remaining -= 1;
        if parent.remaining > 0 {
            return;
        }
        let mut parent = self.parents.remove(&parent_id).expect("present");
        let answer = match parent.error {
            Some(e) => Err(e),
            None if parent.read => Ok(Some(if parent.pieces.len() == 1 {
                parent.pieces.pop().expect("one piece")
            } else {
                parent.pieces.concat()
            })),
            None => Ok(None),
        };
        if let (Some(c), Some(step)) = (self.cache.as_mut(), parent.cache) {
            match step {
                CacheStep::Read { offset, ticket } => {
                    let data = answer.as_ref().ok().and_then(|d| d.as_deref());
                    c.read_done(offset, data, ticket);
                }
                CacheStep::Write { offset, data } => c.write_done(offset, &data, answer.is_ok()),
                CacheStep::Zeroes { offset, length } => c.zeroes_done(offset, length),
            }
        }
        self.answers.push_back((parent.tag, answer));
    }

    /// Carries the cache's pre-load reads to the client and keeps its other commands for the
    /// driver; says whether it passed anything on.
    pub fn pump(&mut self, now: u64, client: &mut Client) -> bool {
        let mut passed = false;
        loop {
            let Some(c) = self.cache.as_mut() else {
                return passed;
            };
            c.hold_preload(!self.preloading);
            let Some(io) = c.poll_io() else {
                return passed;
            };
            passed = true;
            match io {
                CacheIo::VolumeRead {
                    offset_bytes,
                    length_bytes,
                    ticket,
                } => {
                    let id = self.id();
                    self.preloads.insert(id, (offset_bytes, ticket));
                    client.handle_upward(
                        now,
                        id,
                        Upward::Read {
                            offset_bytes,
                            length_bytes,
                        },
                    );
                }
                other => self.cache_io.push_back(other),
            }
        }
    }

    pub fn poll_answer(&mut self) -> Option<(u64, Answer)> {
        self.answers.pop_front()
    }

    /// The cache's log commands and volume flush, for the driver.
    pub fn poll_cache_io(&mut self) -> Option<CacheIo> {
        self.cache_io.pop_front()
    }
}

/// A request as the client's pieces.
fn pieces(request: Request) -> Vec<Upward> {
    // At least one piece: the client answers a request of no bytes (a bad request).
    let cut = |offset: u64, length: u64| {
        (0..length.div_ceil(PIECE_BYTES).max(1)).map(move |k| {
            let at = k * PIECE_BYTES;
            (offset + at, length.saturating_sub(at).min(PIECE_BYTES))
        })
    };
    match request {
        Request::Read { offset, length } => cut(offset, length)
            .map(|(offset_bytes, length_bytes)| Upward::Read {
                offset_bytes,
                length_bytes,
            })
            .collect(),
        Request::Write { offset, data, fua } => {
            if data.len() as u64 <= PIECE_BYTES {
                return vec![Upward::Write {
                    offset_bytes: offset,
                    data,
                    durable: fua,
                }];
            }
            data.chunks(PIECE_BYTES as usize)
                .enumerate()
                .map(|(i, chunk)| Upward::Write {
                    offset_bytes: offset + i as u64 * PIECE_BYTES,
                    data: chunk.to_vec(),
                    durable: fua,
                })
                .collect()
        }
        Request::WriteZeroes {
            offset,
            length,
            fua,
        } => cut(offset, length)
            .map(|(offset_bytes, n)| Upward::Write {
                offset_bytes,
                data: vec![0u8; n as usize],
                durable: fua,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
