//! The Sierra protocol, version 2: Sierra's messages (`cordillera_gears::protocol::Message`)
//! between the MDS, chunk servers and clients, and the frames a driver adds around them, as
//! length-prefixed frames over TCP.
//!
//! ```text
//! frame    = u32:length(of what follows) u8:version u8:type body
//! types    = 1 hello, 2 spec request, 3 spec, 4 wake, 5 gear, 6 refused, 7 load (driver frames)
//!            16.. one per message (see `message_type`)                       (Sierra's messages)
//! hello    = u64:cluster endpoint u64:incarnation   (the first frame on every connection)
//! endpoint = u8:kind (0 MDS, 1 chunk server, 2 client) u32:id
//! spec     = bytes (the cluster's description, JSON)
//! wake     = (empty)                (to a chunk server in standby: power on)
//! gear     = u8:gear (0: back to the plan)
//! refused  = bytes (why the peer closes the connection, UTF-8)
//! load     = list of second   (a chunk server's I/O, second by second, for the gear scheduler)
//! second   = u64:unix second u32:random reads u32:random writes u64:sequential read bytes
//!            u64:sequential write bytes u32:requests u64:read bytes u64:write bytes
//! ```
//!
//! Integers are little-endian; `bytes` is a `u32` length then the bytes; a list is a `u32`
//! count then its items; an option is a `u8` flag (0 none, 1 some) then the value; a result is a
//! `u8` (0 ok then the value, 1 error then a `u8` code). A frame longer than
//! [`FRAME_BYTES_MAX`], of another version or an unknown type, or with fields that do not fill
//! it exactly is an error; the decoder never panics and allocates at most a frame's length.

use cordillera_gears::learned::ServerSecond;
use cordillera_gears::model::{GroupId, ObjectId};
use cordillera_gears::protocol::{
    Endpoint, GroupView, MdsError, Message, ObjectLayout, ServeError,
};
use thiserror::Error;

use crate::codec::{Malformed, Reader, Writer};

/// 2: a client's write names the epoch of the view it was sent under; reads and writes name
/// their first attempt.
pub const VERSION: u8 = 2;
/// A client's write or read of up to 32 MiB (the NBD server's request limit) plus headers.
pub const FRAME_BYTES_MAX: u32 = 33 * 1024 * 1024;

const T_HELLO: u8 = 1;
const T_SPEC_REQUEST: u8 = 2;
const T_SPEC: u8 = 3;
const T_WAKE: u8 = 4;
const T_GEAR: u8 = 5;
const T_REFUSED: u8 = 6;
const T_LOAD: u8 = 7;
/// Bytes of one second of a load frame.
const LOAD_SECOND_BYTES: usize = 52;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Who opens the connection, in which cluster and which life of theirs.
    Hello {
        cluster: u64,
        from: Endpoint,
        incarnation: u64,
    },
    /// Asks the MDS for the cluster's description.
    SpecRequest,
    Spec(Vec<u8>),
    /// Power on (the MDS to a chunk server in standby).
    Wake,
    /// Put the cluster in this gear (0: follow the schedule again).
    Gear(u8),
    /// The peer refuses the connection, and says why, before closing it.
    Refused(String),
    /// A chunk server's I/O per second (Unix seconds), for the MDS's gear scheduler.
    Load(Vec<(u64, ServerSecond)>),
    Message(Message),
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("frame of {0} bytes exceeds the limit")]
    TooLong(u32),
    #[error("Sierra protocol version {0} is not supported (this build speaks {VERSION})")]
    Version(u8),
    #[error("unknown Sierra frame type {0}")]
    Type(u8),
    #[error("malformed Sierra frame: {0}")]
    Malformed(&'static str),
}

impl From<Malformed> for WireError {
    fn from(m: Malformed) -> WireError {
        WireError::Malformed(m.0)
    }
}

fn message_type(m: &Message) -> u8 {
    match m {
        Message::Heartbeat { .. } => 16,
        Message::ReleasedPrimary { .. } => 17,
        Message::Standby { .. } => 18,
        Message::RebuildDone { .. } => 19,
        Message::WriteSuperblock { .. } => 20,
        Message::Lease { .. } => 32,
        Message::BecomePrimary { .. } => 33,
        Message::ReleasePrimary { .. } => 34,
        Message::EnterStandby => 35,
        Message::GroupChanged { .. } => 36,
        Message::Rebuild { .. } => 37,
        Message::SuperblockWritten { .. } => 38,
        Message::Create { .. } => 48,
        Message::Lookup { .. } => 49,
        Message::LookupGroup { .. } => 50,
        Message::Delete { .. } => 51,
        Message::Created { .. } => 64,
        Message::Located { .. } => 65,
        Message::GroupLocated { .. } => 66,
        Message::Deleted { .. } => 67,
        Message::Read { .. } => 80,
        Message::Write { .. } => 81,
        Message::ReadDone { .. } => 96,
        Message::WriteDone { .. } => 97,
        Message::Replicate { .. } => 112,
        Message::Replicated { .. } => 113,
    }
}

fn mds_error_code(e: MdsError) -> u8 {
    match e {
        MdsError::NoSuchObject => 1,
        MdsError::Exists => 2,
        MdsError::TooLarge => 3,
        MdsError::NoSuchGroup => 4,
    }
}

fn mds_error(code: u8) -> Result<MdsError, Malformed> {
    Ok(match code {
        1 => MdsError::NoSuchObject,
        2 => MdsError::Exists,
        3 => MdsError::TooLarge,
        4 => MdsError::NoSuchGroup,
        _ => return Err(Malformed("MDS error code")),
    })
}

fn serve_error_code(e: ServeError) -> u8 {
    match e {
        ServeError::NotPrimary => 1,
        ServeError::LeaseExpired => 2,
        ServeError::Unavailable => 3,
        ServeError::Busy => 4,
        ServeError::BadRequest => 5,
        ServeError::NoSpace => 6,
    }
}

fn serve_error(code: u8) -> Result<ServeError, Malformed> {
    Ok(match code {
        1 => ServeError::NotPrimary,
        2 => ServeError::LeaseExpired,
        3 => ServeError::Unavailable,
        4 => ServeError::Busy,
        5 => ServeError::BadRequest,
        6 => ServeError::NoSpace,
        _ => return Err(Malformed("serve error code")),
    })
}

impl Writer<'_> {
    fn flag(&mut self, v: bool) {
        self.u8(v as u8);
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        self.flag(v.is_some());
        if let Some(v) = v {
            self.u32(v);
        }
    }
    fn endpoint(&mut self, e: Endpoint) {
        match e {
            Endpoint::Mds => {
                self.u8(0);
                self.u32(0);
            }
            Endpoint::Server(s) => {
                self.u8(1);
                self.u32(s);
            }
            Endpoint::Client(c) => {
                self.u8(2);
                self.u32(c);
            }
        }
    }
    fn view(&mut self, v: &GroupView) {
        self.u32(v.group.0);
        self.u64(v.epoch);
        self.u32(v.replicas.len() as u32);
        for &s in &v.replicas {
            self.u32(s);
        }
        self.opt_u32(v.primary);
        self.u64(v.available);
        self.opt_u32(v.rebuilding);
        self.u32(v.slots);
    }
    fn layout(&mut self, l: &ObjectLayout) {
        self.u64(l.object.0);
        self.u64(l.size_bytes);
        self.u64(l.chunk_bytes);
        self.u32(l.chunks.len() as u32);
        for &(g, slot) in &l.chunks {
            self.u32(g.0);
            self.u32(slot);
        }
        self.u32(l.groups.len() as u32);
        for v in &l.groups {
            self.view(v);
        }
    }
    fn mds_result<T>(&mut self, r: &Result<T, MdsError>, ok: impl FnOnce(&mut Self, &T)) {
        match r {
            Ok(v) => {
                self.u8(0);
                ok(self, v);
            }
            Err(e) => {
                self.u8(1);
                self.u8(mds_error_code(*e));
            }
        }
    }
    fn serve_result<T>(&mut self, r: &Result<T, ServeError>, ok: impl FnOnce(&mut Self, &T)) {
        match r {
            Ok(v) => {
                self.u8(0);
                ok(self, v);
            }
            Err(e) => {
                self.u8(1);
                self.u8(serve_error_code(*e));
            }
        }
    }

    fn message(&mut self, m: &Message) {
        match m {
            Message::Heartbeat {
                server,
                incarnation,
                sent_at,
                primaries,
                log_full,
            } => {
                self.u32(*server);
                self.u64(*incarnation);
                self.u64(*sent_at);
                self.u32(primaries.len() as u32);
                for (g, e) in primaries {
                    self.u32(g.0);
                    self.u64(*e);
                }
                self.u32(log_full.len() as u32);
                for g in log_full {
                    self.u32(g.0);
                }
            }
            Message::ReleasedPrimary { group, epoch }
            | Message::ReleasePrimary { group, epoch } => {
                self.u32(group.0);
                self.u64(*epoch);
            }
            Message::Standby { server } => self.u32(*server),
            Message::RebuildDone {
                group,
                epoch,
                replica,
            } => {
                self.u32(group.0);
                self.u64(*epoch);
                self.u32(*replica);
            }
            Message::WriteSuperblock {
                id,
                group,
                epoch,
                data,
            } => {
                self.u64(*id);
                self.u32(group.0);
                self.u64(*epoch);
                self.bytes(data);
            }
            Message::Lease { until, primaries } => {
                self.u64(*until);
                self.u32(primaries.len() as u32);
                for v in primaries {
                    self.view(v);
                }
            }
            Message::BecomePrimary { view, superblock } => {
                self.view(view);
                self.flag(superblock.is_some());
                if let Some(s) = superblock {
                    self.bytes(s);
                }
            }
            Message::EnterStandby => {}
            Message::GroupChanged { view } | Message::Rebuild { view } => self.view(view),
            Message::SuperblockWritten { id, ok } | Message::Replicated { id, ok } => {
                self.u64(*id);
                self.flag(*ok);
            }
            Message::Create {
                id,
                object,
                size_bytes,
            } => {
                self.u64(*id);
                self.u64(object.0);
                self.u64(*size_bytes);
            }
            Message::Lookup { id, object } | Message::Delete { id, object } => {
                self.u64(*id);
                self.u64(object.0);
            }
            Message::LookupGroup { id, group } => {
                self.u64(*id);
                self.u32(group.0);
            }
            Message::Created { id, result } | Message::Located { id, result } => {
                self.u64(*id);
                self.mds_result(result, |w, l| w.layout(l));
            }
            Message::GroupLocated { id, result } => {
                self.u64(*id);
                self.mds_result(result, |w, v| w.view(v));
            }
            Message::Deleted { id, result } => {
                self.u64(*id);
                self.mds_result(result, |_, _| {});
            }
            Message::Read {
                id,
                piece,
                group,
                offset_bytes,
                length_bytes,
            } => {
                self.u64(*id);
                self.u64(*piece);
                self.u32(group.0);
                self.u64(*offset_bytes);
                self.u64(*length_bytes);
            }
            Message::Write {
                id,
                piece,
                group,
                epoch,
                offset_bytes,
                data,
            } => {
                self.u64(*id);
                self.u64(*piece);
                self.u32(group.0);
                self.u64(*epoch);
                self.u64(*offset_bytes);
                self.bytes(data);
            }
            Message::ReadDone { id, result } => {
                self.u64(*id);
                self.serve_result(result, |w, d| w.bytes(d));
            }
            Message::WriteDone { id, result } => {
                self.u64(*id);
                self.serve_result(result, |_, _| {});
            }
            Message::Replicate {
                id,
                group,
                epoch,
                offset_bytes,
                data,
            } => {
                self.u64(*id);
                self.u32(group.0);
                self.u64(*epoch);
                self.u64(*offset_bytes);
                self.bytes(data);
            }
        }
    }
}

impl Reader<'_> {
    fn flag(&mut self, what: &'static str) -> Result<bool, Malformed> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed(what)),
        }
    }
    fn opt_u32(&mut self, what: &'static str) -> Result<Option<u32>, Malformed> {
        Ok(if self.flag(what)? {
            Some(self.u32(what)?)
        } else {
            None
        })
    }
    /// A list's count, refused when its items (each at least `item_bytes`) cannot fit in what
    /// is left of the frame.
    fn count(&mut self, item_bytes: usize, what: &'static str) -> Result<usize, Malformed> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(item_bytes) > self.0.len() {
            return Err(Malformed(what));
        }
        Ok(n)
    }
    fn endpoint(&mut self) -> Result<Endpoint, Malformed> {
        let kind = self.u8("endpoint")?;
        let id = self.u32("endpoint")?;
        Ok(match kind {
            0 if id == 0 => Endpoint::Mds,
            1 => Endpoint::Server(id),
            2 => Endpoint::Client(id),
            _ => return Err(Malformed("endpoint")),
        })
    }
    fn view(&mut self) -> Result<GroupView, Malformed> {
        let group = GroupId(self.u32("view")?);
        let epoch = self.u64("view")?;
        let n = self.count(4, "view replicas")?;
        let replicas = (0..n)
            .map(|_| self.u32("view replica"))
            .collect::<Result<_, _>>()?;
        Ok(GroupView {
            group,
            epoch,
            replicas,
            primary: self.opt_u32("view primary")?,
            available: self.u64("view available")?,
            rebuilding: self.opt_u32("view rebuilding")?,
            slots: self.u32("view slots")?,
        })
    }
    fn layout(&mut self) -> Result<ObjectLayout, Malformed> {
        let object = ObjectId(self.u64("layout")?);
        let size_bytes = self.u64("layout")?;
        let chunk_bytes = self.u64("layout")?;
        let n = self.count(8, "layout chunks")?;
        let chunks = (0..n)
            .map(|_| Ok((GroupId(self.u32("chunk")?), self.u32("chunk")?)))
            .collect::<Result<_, Malformed>>()?;
        let n = self.count(30, "layout groups")?;
        let groups = (0..n).map(|_| self.view()).collect::<Result<_, _>>()?;
        Ok(ObjectLayout {
            object,
            size_bytes,
            chunk_bytes,
            chunks,
            groups,
        })
    }
    fn mds_result<T>(
        &mut self,
        ok: impl FnOnce(&mut Self) -> Result<T, Malformed>,
    ) -> Result<Result<T, MdsError>, Malformed> {
        Ok(match self.u8("result")? {
            0 => Ok(ok(self)?),
            1 => Err(mds_error(self.u8("MDS error")?)?),
            _ => return Err(Malformed("result")),
        })
    }
    fn serve_result<T>(
        &mut self,
        ok: impl FnOnce(&mut Self) -> Result<T, Malformed>,
    ) -> Result<Result<T, ServeError>, Malformed> {
        Ok(match self.u8("result")? {
            0 => Ok(ok(self)?),
            1 => Err(serve_error(self.u8("serve error")?)?),
            _ => return Err(Malformed("result")),
        })
    }

    fn message(&mut self, kind: u8) -> Result<Option<Message>, Malformed> {
        Ok(Some(match kind {
            16 => {
                let server = self.u32("heartbeat")?;
                let incarnation = self.u64("heartbeat")?;
                let sent_at = self.u64("heartbeat")?;
                let n = self.count(12, "heartbeat primaries")?;
                let primaries = (0..n)
                    .map(|_| Ok((GroupId(self.u32("primary")?), self.u64("primary")?)))
                    .collect::<Result<_, Malformed>>()?;
                let n = self.count(4, "heartbeat log full")?;
                let log_full = (0..n)
                    .map(|_| Ok(GroupId(self.u32("log full")?)))
                    .collect::<Result<_, Malformed>>()?;
                Message::Heartbeat {
                    server,
                    incarnation,
                    sent_at,
                    primaries,
                    log_full,
                }
            }
            17 => Message::ReleasedPrimary {
                group: GroupId(self.u32("released")?),
                epoch: self.u64("released")?,
            },
            18 => Message::Standby {
                server: self.u32("standby")?,
            },
            19 => Message::RebuildDone {
                group: GroupId(self.u32("rebuild done")?),
                epoch: self.u64("rebuild done")?,
                replica: self.u32("rebuild done")?,
            },
            20 => Message::WriteSuperblock {
                id: self.u64("superblock")?,
                group: GroupId(self.u32("superblock")?),
                epoch: self.u64("superblock")?,
                data: self.bytes("superblock data")?,
            },
            32 => {
                let until = self.u64("lease")?;
                let n = self.count(30, "lease primaries")?;
                let primaries = (0..n).map(|_| self.view()).collect::<Result<_, _>>()?;
                Message::Lease { until, primaries }
            }
            33 => {
                let view = self.view()?;
                let superblock = if self.flag("superblock flag")? {
                    Some(self.bytes("superblock")?)
                } else {
                    None
                };
                Message::BecomePrimary { view, superblock }
            }
            34 => Message::ReleasePrimary {
                group: GroupId(self.u32("release")?),
                epoch: self.u64("release")?,
            },
            35 => Message::EnterStandby,
            36 => Message::GroupChanged { view: self.view()? },
            37 => Message::Rebuild { view: self.view()? },
            38 => Message::SuperblockWritten {
                id: self.u64("superblock written")?,
                ok: self.flag("superblock written")?,
            },
            48 => Message::Create {
                id: self.u64("create")?,
                object: ObjectId(self.u64("create")?),
                size_bytes: self.u64("create")?,
            },
            49 => Message::Lookup {
                id: self.u64("lookup")?,
                object: ObjectId(self.u64("lookup")?),
            },
            50 => Message::LookupGroup {
                id: self.u64("lookup group")?,
                group: GroupId(self.u32("lookup group")?),
            },
            51 => Message::Delete {
                id: self.u64("delete")?,
                object: ObjectId(self.u64("delete")?),
            },
            64 => Message::Created {
                id: self.u64("created")?,
                result: self.mds_result(|r| r.layout())?,
            },
            65 => Message::Located {
                id: self.u64("located")?,
                result: self.mds_result(|r| r.layout())?,
            },
            66 => Message::GroupLocated {
                id: self.u64("group located")?,
                result: self.mds_result(|r| r.view())?,
            },
            67 => Message::Deleted {
                id: self.u64("deleted")?,
                result: self.mds_result(|_| Ok(()))?,
            },
            80 => Message::Read {
                id: self.u64("read")?,
                piece: self.u64("read")?,
                group: GroupId(self.u32("read")?),
                offset_bytes: self.u64("read")?,
                length_bytes: self.u64("read")?,
            },
            81 => Message::Write {
                id: self.u64("write")?,
                piece: self.u64("write")?,
                group: GroupId(self.u32("write")?),
                epoch: self.u64("write")?,
                offset_bytes: self.u64("write")?,
                data: self.bytes("write data")?,
            },
            96 => Message::ReadDone {
                id: self.u64("read done")?,
                result: self.serve_result(|r| r.bytes("read data"))?,
            },
            97 => Message::WriteDone {
                id: self.u64("write done")?,
                result: self.serve_result(|_| Ok(()))?,
            },
            112 => Message::Replicate {
                id: self.u64("replicate")?,
                group: GroupId(self.u32("replicate")?),
                epoch: self.u64("replicate")?,
                offset_bytes: self.u64("replicate")?,
                data: self.bytes("replicate data")?,
            },
            113 => Message::Replicated {
                id: self.u64("replicated")?,
                ok: self.flag("replicated")?,
            },
            _ => return Ok(None),
        }))
    }
}

/// Appends the encoding of `frame` to `out`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 6]);
    let mut w = Writer(out);
    let kind = match frame {
        Frame::Hello {
            cluster,
            from,
            incarnation,
        } => {
            w.u64(*cluster);
            w.endpoint(*from);
            w.u64(*incarnation);
            T_HELLO
        }
        Frame::SpecRequest => T_SPEC_REQUEST,
        Frame::Spec(bytes) => {
            w.bytes(bytes);
            T_SPEC
        }
        Frame::Wake => T_WAKE,
        Frame::Gear(g) => {
            w.u8(*g);
            T_GEAR
        }
        Frame::Refused(why) => {
            w.bytes(why.as_bytes());
            T_REFUSED
        }
        Frame::Load(seconds) => {
            w.u32(seconds.len() as u32);
            for (second, c) in seconds {
                w.u64(*second);
                w.u32(c.random_reads);
                w.u32(c.random_writes);
                w.u64(c.sequential_read_bytes);
                w.u64(c.sequential_write_bytes);
                w.u32(c.requests);
                w.u64(c.read_bytes);
                w.u64(c.write_bytes);
            }
            T_LOAD
        }
        Frame::Message(m) => {
            w.message(m);
            message_type(m)
        }
    };
    let length = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    out[start + 4] = VERSION;
    out[start + 5] = kind;
}

/// The length a frame announces in its first four bytes, checked against the limit: what a
/// reader allocates before reading the rest (`Ok(None)`: fewer than four bytes).
pub fn frame_length(buf: &[u8]) -> Result<Option<usize>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let length = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if length > FRAME_BYTES_MAX {
        return Err(WireError::TooLong(length));
    }
    if length < 2 {
        return Err(WireError::Malformed("frame header"));
    }
    Ok(Some(4 + length as usize))
}

/// Decodes one frame from the front of `buf`: `Ok(None)` if more bytes are needed, or the frame
/// and the bytes it used.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, WireError> {
    let Some(total) = frame_length(buf)? else {
        return Ok(None);
    };
    if buf.len() < total {
        return Ok(None);
    }
    let frame = &buf[4..total];
    if frame[0] != VERSION {
        return Err(WireError::Version(frame[0]));
    }
    let kind = frame[1];
    let mut r = Reader(&frame[2..]);
    let decoded = match kind {
        T_HELLO => Frame::Hello {
            cluster: r.u64("hello")?,
            from: r.endpoint()?,
            incarnation: r.u64("hello")?,
        },
        T_SPEC_REQUEST => Frame::SpecRequest,
        T_SPEC => Frame::Spec(r.bytes("spec")?),
        T_WAKE => Frame::Wake,
        T_GEAR => Frame::Gear(r.u8("gear")?),
        T_REFUSED => Frame::Refused(
            String::from_utf8(r.bytes("refusal")?).map_err(|_| Malformed("refusal text"))?,
        ),
        T_LOAD => {
            let n = r.count(LOAD_SECOND_BYTES, "load seconds")?;
            let mut seconds = Vec::with_capacity(n);
            for _ in 0..n {
                let second = r.u64("load second")?;
                seconds.push((
                    second,
                    ServerSecond {
                        random_reads: r.u32("load")?,
                        random_writes: r.u32("load")?,
                        sequential_read_bytes: r.u64("load")?,
                        sequential_write_bytes: r.u64("load")?,
                        requests: r.u32("load")?,
                        read_bytes: r.u64("load")?,
                        write_bytes: r.u64("load")?,
                    },
                ));
            }
            Frame::Load(seconds)
        }
        kind => match r.message(kind)? {
            Some(m) => Frame::Message(m),
            None => return Err(WireError::Type(kind)),
        },
    };
    r.end()?;
    Ok(Some((decoded, total)))
}

#[cfg(test)]
mod tests;
