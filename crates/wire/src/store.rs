//! The store protocol, version 2 (2 added the sender's generation to deletes and metadata
//! requests, which fence earlier generations, and the error `fenced`): length-prefixed frames over TCP, each carrying a request id so
//! requests can be pipelined and answered out of order. Every reply carries the store's load
//! figures; the server also sends them unprompted (request id 0) every broadcast interval.
//!
//! ```text
//! frame   = u32:length(of what follows) u8:version u8:type u64:request_id body
//! types   = 1 write, 2 read, 3 read_any, 4 delete, 5 metadata            (client → store)
//!           64 reply, 65 load broadcast                                    (store → client)
//! reply   = load u8:status body-by-status
//! load    = u32:queue_length u32:requests_per_s u32:mean_response_us u64:used_bytes u64:log_bytes
//!           u32:volume_queue_length
//! ```
//!
//! All integers little-endian. A frame longer than [`FRAME_BYTES_MAX`] or of an unknown version
//! or type is an error; the decoder never panics and never allocates more than a frame's length.

use cordillera_vstore::store::{Extent, Reply, Request, StoreError};
use thiserror::Error;

use crate::codec::{Malformed, Reader, Writer};

pub const VERSION: u8 = 3;
/// A write's payload is at most 16 MiB (the store's record limit) plus headers.
pub const FRAME_BYTES_MAX: u32 = 17 * 1024 * 1024;
// A write of the largest payload the store keeps fits in a frame (its head is 50 bytes), and
// so does a reply carrying it back (load figures, status, piece count, extent and length: under
// 100 bytes).
const _: () =
    assert!(FRAME_BYTES_MAX as u64 >= cordillera_vstore::format::PAYLOAD_BYTES_MAX as u64 + 100);

const T_WRITE: u8 = 1;
const T_READ: u8 = 2;
const T_READ_ANY: u8 = 3;
const T_DELETE: u8 = 4;
const T_METADATA: u8 = 5;
const T_REPLY: u8 = 64;
const T_LOAD: u8 = 65;

/// The load figures a store publishes (Everest §3.2: clients pick the least-loaded store).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Load {
    /// Requests in progress.
    pub queue_length: u32,
    pub requests_per_s: u32,
    pub mean_response_us: u32,
    pub used_bytes: u64,
    pub log_bytes: u64,
    /// Operations in flight on the store's disk that are not the store's: the load of the
    /// volume that shares its disk (0 for a store on a disk of its own). Everest §3.2.3: only
    /// a lightly-loaded store gives data back to reclaim.
    pub volume_queue_length: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Request { id: u64, request: Request },
    Reply { id: u64, load: Load, reply: Reply },
    Load(Load),
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("frame of {0} bytes exceeds the limit")]
    TooLong(u32),
    #[error("protocol version {0} is not supported (this build speaks {VERSION})")]
    Version(u8),
    #[error("unknown message type {0}")]
    Type(u8),
    #[error("malformed {0}")]
    Malformed(&'static str),
}

impl From<Malformed> for WireError {
    fn from(m: Malformed) -> WireError {
        WireError::Malformed(m.0)
    }
}

impl Writer<'_> {
    fn extent(&mut self, e: &Extent) {
        self.u64(e.volume);
        self.u64(e.offset_bytes);
        self.u64(e.length_bytes);
        self.u64(e.version);
    }
    fn load(&mut self, l: &Load) {
        self.u32(l.queue_length);
        self.u32(l.requests_per_s);
        self.u32(l.mean_response_us);
        self.u64(l.used_bytes);
        self.u64(l.log_bytes);
        self.u32(l.volume_queue_length);
    }
}

impl Reader<'_> {
    fn extent(&mut self) -> Result<Extent, Malformed> {
        Ok(Extent {
            volume: self.u64("extent")?,
            offset_bytes: self.u64("extent")?,
            length_bytes: self.u64("extent")?,
            version: self.u64("extent")?,
        })
    }
    fn load(&mut self) -> Result<Load, Malformed> {
        Ok(Load {
            queue_length: self.u32("load")?,
            requests_per_s: self.u32("load")?,
            mean_response_us: self.u32("load")?,
            used_bytes: self.u64("load")?,
            log_bytes: self.u64("load")?,
            volume_queue_length: self.u32("load")?,
        })
    }
}

/// Appends the encoding of `frame` to `out`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    // The header (length, version, kind, id) is filled in once the body is written after it.
    let start = out.len();
    out.extend_from_slice(&[0; 14]);
    let mut w = Writer(out);
    let (kind, id) = match frame {
        Frame::Request { id, request } => match request {
            Request::Write {
                client,
                volume,
                offset_bytes,
                version,
                data,
            } => {
                w.u64(*client);
                w.u64(*volume);
                w.u64(*offset_bytes);
                w.u64(*version);
                w.bytes(data);
                (T_WRITE, *id)
            }
            Request::Read {
                client,
                offset_bytes,
                length_bytes,
            } => {
                w.u64(*client);
                w.u64(*offset_bytes);
                w.u64(*length_bytes);
                (T_READ, *id)
            }
            Request::ReadAny { client } => {
                w.u64(*client);
                (T_READ_ANY, *id)
            }
            Request::Delete {
                client,
                volume,
                offset_bytes,
                length_bytes,
                version,
                generation,
            } => {
                w.u64(*client);
                w.u64(*volume);
                w.u64(*offset_bytes);
                w.u64(*length_bytes);
                w.u64(*version);
                w.u64(*generation);
                (T_DELETE, *id)
            }
            Request::Metadata { client, generation } => {
                w.u64(*client);
                w.u64(*generation);
                (T_METADATA, *id)
            }
        },
        Frame::Reply { id, load, reply } => {
            w.load(load);
            match reply {
                Reply::Done => w.u8(0),
                Reply::Read(pieces) => {
                    w.u8(1);
                    w.u32(pieces.len() as u32);
                    for (e, data) in pieces {
                        w.extent(e);
                        w.bytes(data);
                    }
                }
                Reply::ReadAny(piece) => {
                    w.u8(2);
                    match piece {
                        None => w.u8(0),
                        Some((e, data)) => {
                            w.u8(1);
                            w.extent(e);
                            w.bytes(data);
                        }
                    }
                }
                Reply::Metadata(extents) => {
                    w.u8(3);
                    w.u32(extents.len() as u32);
                    for e in extents {
                        w.extent(e);
                    }
                }
                Reply::Error(e) => {
                    w.u8(4);
                    w.u8(match e {
                        StoreError::Full => 1,
                        StoreError::Recovering => 2,
                        StoreError::NoStore => 3,
                        StoreError::BadRequest => 4,
                        StoreError::Fenced => 5,
                        StoreError::Denied => 6,
                    });
                }
            }
            (T_REPLY, *id)
        }
        Frame::Load(load) => {
            w.load(load);
            (T_LOAD, 0)
        }
    };
    let length = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    out[start + 4] = VERSION;
    out[start + 5] = kind;
    out[start + 6..start + 14].copy_from_slice(&id.to_le_bytes());
}

/// The encoding of a read reply with its pieces' data left out of `out`: `out` holds the
/// rest, and each piece's data follows `out[..at]` for its `at` returned (in order). Sent as
/// `out[..at₀]`, data₀, `out[at₀..at₁]`, data₁, …, `out[atₙ..]`, the bytes are exactly
/// [`encode`]'s: a store sends what it read without copying it into the frame.
pub fn encode_read_reply(
    id: u64,
    load: &Load,
    pieces: Vec<(Extent, Vec<u8>)>,
    out: &mut Vec<u8>,
) -> Vec<(usize, Vec<u8>)> {
    let start = out.len();
    out.reserve(14 + 32 + 5 + pieces.len() * 36);
    out.extend_from_slice(&[0; 14]);
    let mut w = Writer(out);
    w.load(load);
    w.u8(1);
    w.u32(pieces.len() as u32);
    let mut data_bytes = 0;
    let mut parts = Vec::with_capacity(pieces.len());
    for (e, data) in pieces {
        w.extent(&e);
        w.u32(data.len() as u32);
        data_bytes += data.len();
        parts.push((w.0.len(), data));
    }
    let length = (out.len() - start - 4 + data_bytes) as u32;
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    out[start + 4] = VERSION;
    out[start + 5] = T_REPLY;
    out[start + 6..start + 14].copy_from_slice(&id.to_le_bytes());
    parts
}

/// Decodes one frame from the front of `buf`: `Ok(None)` if more bytes are needed, or the frame
/// and the bytes it used.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let length = u32::from_le_bytes(buf[..4].try_into().unwrap());
    if length > FRAME_BYTES_MAX {
        return Err(WireError::TooLong(length));
    }
    if length < 10 {
        return Err(WireError::Malformed("frame header"));
    }
    let total = 4 + length as usize;
    if buf.len() < total {
        return Ok(None);
    }
    let frame = &buf[4..total];
    if frame[0] != VERSION {
        return Err(WireError::Version(frame[0]));
    }
    let kind = frame[1];
    let id = u64::from_le_bytes(frame[2..10].try_into().unwrap());
    let mut r = Reader(&frame[10..]);
    let decoded = match kind {
        T_WRITE => Frame::Request {
            id,
            request: Request::Write {
                client: r.u64("write")?,
                volume: r.u64("write")?,
                offset_bytes: r.u64("write")?,
                version: r.u64("write")?,
                data: r.bytes("write data")?,
            },
        },
        T_READ => Frame::Request {
            id,
            request: Request::Read {
                client: r.u64("read")?,
                offset_bytes: r.u64("read")?,
                length_bytes: r.u64("read")?,
            },
        },
        T_READ_ANY => Frame::Request {
            id,
            request: Request::ReadAny {
                client: r.u64("read_any")?,
            },
        },
        T_DELETE => Frame::Request {
            id,
            request: Request::Delete {
                client: r.u64("delete")?,
                volume: r.u64("delete")?,
                offset_bytes: r.u64("delete")?,
                length_bytes: r.u64("delete")?,
                version: r.u64("delete")?,
                generation: r.u64("delete")?,
            },
        },
        T_METADATA => Frame::Request {
            id,
            request: Request::Metadata {
                client: r.u64("metadata")?,
                generation: r.u64("metadata")?,
            },
        },
        T_REPLY => {
            let load = r.load()?;
            let reply = match r.u8("reply status")? {
                0 => Reply::Done,
                1 => {
                    let n = r.u32("read pieces")?;
                    let mut pieces = Vec::new();
                    for _ in 0..n {
                        pieces.push((r.extent()?, r.bytes("piece data")?));
                    }
                    Reply::Read(pieces)
                }
                2 => match r.u8("read_any")? {
                    0 => Reply::ReadAny(None),
                    1 => Reply::ReadAny(Some((r.extent()?, r.bytes("read_any data")?))),
                    _ => return Err(WireError::Malformed("read_any flag")),
                },
                3 => {
                    let n = r.u32("metadata")?;
                    let mut extents = Vec::new();
                    for _ in 0..n {
                        extents.push(r.extent()?);
                    }
                    Reply::Metadata(extents)
                }
                4 => Reply::Error(match r.u8("error")? {
                    1 => StoreError::Full,
                    2 => StoreError::Recovering,
                    3 => StoreError::NoStore,
                    4 => StoreError::BadRequest,
                    5 => StoreError::Fenced,
                    6 => StoreError::Denied,
                    _ => return Err(WireError::Malformed("error code")),
                }),
                _ => return Err(WireError::Malformed("reply status")),
            };
            Frame::Reply { id, load, reply }
        }
        T_LOAD if id == 0 => Frame::Load(r.load()?),
        T_LOAD => return Err(WireError::Malformed("load broadcast with a request id")),
        other => return Err(WireError::Type(other)),
    };
    r.end()?;
    Ok(Some((decoded, total)))
}

/// The part of a write request frame before its data: what a reader needs to receive the data
/// straight into a buffer of its own instead of copying it out of the frame buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteHead {
    pub id: u64,
    pub client: u64,
    pub volume: u64,
    pub offset_bytes: u64,
    pub version: u64,
    /// Bytes of data that follow the head.
    pub data_bytes: usize,
}

impl WriteHead {
    /// Bytes of a write frame before its data.
    pub const BYTES: usize = 14 + 32 + 4;

    /// The request, given the data that followed the head.
    pub fn request(&self, data: Vec<u8>) -> Request {
        debug_assert_eq!(data.len(), self.data_bytes);
        Request::Write {
            client: self.client,
            volume: self.volume,
            offset_bytes: self.offset_bytes,
            version: self.version,
            data,
        }
    }
}

/// Decodes the head of a write request from the front of `buf`: `Ok(None)` when `buf` does not
/// yet hold a whole head or starts with a frame of another type. A head that decodes here
/// belongs to a frame [`decode`] accepts once its data has arrived; an error here is an error
/// there too.
pub fn decode_write_head(buf: &[u8]) -> Result<Option<WriteHead>, WireError> {
    if buf.len() < WriteHead::BYTES {
        return Ok(None);
    }
    let length = u32::from_le_bytes(buf[..4].try_into().unwrap());
    if length > FRAME_BYTES_MAX {
        return Err(WireError::TooLong(length));
    }
    if buf[5] != T_WRITE {
        return Ok(None);
    }
    if buf[4] != VERSION {
        return Err(WireError::Version(buf[4]));
    }
    let mut r = Reader(&buf[6..WriteHead::BYTES]);
    let id = r.u64("write")?;
    let (client, volume) = (r.u64("write")?, r.u64("write")?);
    let (offset_bytes, version) = (r.u64("write")?, r.u64("write")?);
    let data_bytes = r.u32("write data")? as usize;
    // The frame holds exactly the head and the data: what `decode` checks once it is whole.
    if 4 + length as usize != WriteHead::BYTES + data_bytes {
        return Err(WireError::Malformed(
            if (length as usize) < WriteHead::BYTES - 4 {
                "write"
            } else if 4 + (length as usize) < WriteHead::BYTES + data_bytes {
                "write data"
            } else {
                "trailing bytes"
            },
        ));
    }
    Ok(Some(WriteHead {
        id,
        client,
        volume,
        offset_bytes,
        version,
        data_bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A read reply encoded with its data apart is, put together, exactly `encode`'s bytes.
    #[test]
    fn a_read_reply_split_from_its_data_is_the_same_bytes() {
        let load = Load {
            queue_length: 1,
            requests_per_s: 2,
            mean_response_us: 3,
            used_bytes: 4,
            log_bytes: 5,
            volume_queue_length: 6,
        };
        let pieces: Vec<(Extent, Vec<u8>)> = (0..3u64)
            .map(|i| {
                let e = Extent {
                    volume: 7,
                    offset_bytes: i * 4096,
                    length_bytes: 4096 + i,
                    version: i,
                };
                (e, vec![i as u8 + 1; (4096 + i) as usize])
            })
            .chain([(
                Extent {
                    volume: 7,
                    offset_bytes: 1 << 20,
                    length_bytes: 0,
                    version: 9,
                },
                Vec::new(),
            )])
            .collect();
        let mut whole = vec![0xAB];
        encode(
            &Frame::Reply {
                id: 42,
                load,
                reply: Reply::Read(pieces.clone()),
            },
            &mut whole,
        );
        let mut head = vec![0xAB];
        let parts = encode_read_reply(42, &load, pieces, &mut head);
        let mut joined = Vec::new();
        let mut at = 0;
        for (cut, data) in &parts {
            joined.extend_from_slice(&head[at..*cut]);
            joined.extend_from_slice(data);
            at = *cut;
        }
        joined.extend_from_slice(&head[at..]);
        assert_eq!(joined, whole);
    }

    fn frames() -> Vec<Frame> {
        let e = Extent {
            volume: 1,
            offset_bytes: 4096,
            length_bytes: 3,
            version: 9,
        };
        let load = Load {
            queue_length: 3,
            requests_per_s: 1000,
            mean_response_us: 250,
            used_bytes: 1 << 20,
            log_bytes: 1 << 30,
            volume_queue_length: 40,
        };
        vec![
            Frame::Request {
                id: 1,
                request: Request::Write {
                    client: 2,
                    volume: 3,
                    offset_bytes: 4,
                    version: 5,
                    data: vec![1, 2, 3],
                },
            },
            Frame::Request {
                id: 2,
                request: Request::Read {
                    client: 2,
                    offset_bytes: 0,
                    length_bytes: 8192,
                },
            },
            Frame::Request {
                id: 3,
                request: Request::ReadAny { client: 2 },
            },
            Frame::Request {
                id: 4,
                request: Request::Delete {
                    client: 2,
                    volume: 3,
                    offset_bytes: 0,
                    length_bytes: 10,
                    version: 7,
                    generation: 1,
                },
            },
            Frame::Request {
                id: 5,
                request: Request::Metadata {
                    client: 2,
                    generation: 3,
                },
            },
            Frame::Reply {
                id: 1,
                load,
                reply: Reply::Done,
            },
            Frame::Reply {
                id: 2,
                load,
                reply: Reply::Read(vec![(e.clone(), vec![7, 8, 9])]),
            },
            Frame::Reply {
                id: 3,
                load,
                reply: Reply::ReadAny(Some((e.clone(), vec![1, 1, 1]))),
            },
            Frame::Reply {
                id: 3,
                load,
                reply: Reply::ReadAny(None),
            },
            Frame::Reply {
                id: 5,
                load,
                reply: Reply::Metadata(vec![e.clone(), e]),
            },
            Frame::Reply {
                id: 6,
                load,
                reply: Reply::Error(StoreError::Full),
            },
            Frame::Reply {
                id: 7,
                load,
                reply: Reply::Error(StoreError::Fenced),
            },
            Frame::Reply {
                id: 8,
                load,
                reply: Reply::Error(StoreError::Denied),
            },
            Frame::Load(load),
        ]
    }

    #[test]
    fn every_frame_round_trips_and_streams() {
        let mut stream = Vec::new();
        for f in frames() {
            encode(&f, &mut stream);
        }
        let mut at = 0;
        let mut decoded = Vec::new();
        // Fed a byte at a time, the decoder waits, then yields each frame whole.
        let mut window = 0;
        while at < stream.len() {
            window = (window + 1).min(stream.len() - at);
            match decode(&stream[at..at + window]).unwrap() {
                None => continue,
                Some((f, used)) => {
                    decoded.push(f);
                    at += used;
                    window = 0;
                }
            }
        }
        assert_eq!(decoded, frames());
    }

    #[test]
    fn bad_frames_are_typed_errors() {
        let mut ok = Vec::new();
        encode(&frames()[0], &mut ok);
        let mut v = ok.clone();
        v[4] = 9;
        assert_eq!(decode(&v), Err(WireError::Version(9)));
        let mut t = ok.clone();
        t[5] = 99;
        assert_eq!(decode(&t), Err(WireError::Type(99)));
        assert_eq!(
            decode(&u32::MAX.to_le_bytes()),
            Err(WireError::TooLong(u32::MAX))
        );
        let mut short = ok.clone();
        short[0] -= 1; // the declared length now ends inside the data
        assert!(matches!(decode(&short), Err(WireError::Malformed(_))));
        let mut long = ok.clone();
        long[0] += 1;
        long.push(0);
        assert_eq!(decode(&long), Err(WireError::Malformed("trailing bytes")));
    }

    #[test]
    fn a_write_head_decodes_before_its_data_arrives() {
        let frame = Frame::Request {
            id: 7,
            request: Request::Write {
                client: 1,
                volume: 2,
                offset_bytes: 4096,
                version: 9,
                data: vec![0xab; 1000],
            },
        };
        let mut bytes = Vec::new();
        encode(&frame, &mut bytes);
        assert_eq!(decode_write_head(&bytes[..WriteHead::BYTES - 1]), Ok(None));
        let head = decode_write_head(&bytes[..WriteHead::BYTES])
            .unwrap()
            .expect("a write head");
        assert_eq!((head.id, head.data_bytes), (7, 1000));
        let Frame::Request { request, .. } = frame else {
            unreachable!()
        };
        assert_eq!(head.request(bytes[WriteHead::BYTES..].to_vec()), request);
        // Not a write: no head, and no error.
        let mut read = Vec::new();
        encode(&frames()[1], &mut read);
        read.resize(WriteHead::BYTES, 0);
        assert_eq!(decode_write_head(&read), Ok(None));
    }

    proptest! {
        /// The head decoder agrees with the frame decoder on every write frame with a changed
        /// head byte: the same fields when both accept it, an error from both when it refuses.
        #[test]
        fn write_heads_agree_with_whole_frames(
            data in prop::collection::vec(any::<u8>(), 0..64),
            at in 0usize..WriteHead::BYTES,
            value in any::<u8>(),
        ) {
            let mut bytes = Vec::new();
            encode(&Frame::Request { id: 3, request: Request::Write {
                client: 4, volume: 5, offset_bytes: 6, version: 7, data }}, &mut bytes);
            if at != 1 && at != 2 && at != 3 {
                bytes[at] = value;
            }
            // Whole as declared (the declared length may have changed).
            let declared = 4 + u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
            let head = decode_write_head(&bytes);
            bytes.resize(declared.max(WriteHead::BYTES), 0);
            let whole = decode(&bytes[..declared.max(4)]);
            match head {
                Ok(Some(h)) => {
                    let Ok(Some((Frame::Request { id, request }, _))) = whole else {
                        return Err(TestCaseError::fail(format!("head {h:?} but frame {whole:?}")));
                    };
                    prop_assert_eq!(id, h.id);
                    prop_assert_eq!(request, h.request(bytes[WriteHead::BYTES..declared].to_vec()));
                }
                Ok(None) => {
                    let write = matches!(
                        whole,
                        Ok(Some((Frame::Request { request: Request::Write { .. }, .. }, _)))
                    );
                    prop_assert!(!write, "no head, but a write frame");
                }
                Err(_) => prop_assert!(whole.is_err(), "head refused, frame {:?}", whole),
            }
        }
    }

    proptest! {
        #[test]
        fn decoder_never_panics_and_is_canonical(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(Some((frame, used))) = decode(&bytes) {
                let mut again = Vec::new();
                encode(&frame, &mut again);
                prop_assert_eq!(&again[..], &bytes[..used]);
            }
        }
    }
}
