//! What the MDS keeps across a restart, and its encoding.
//!
//! The durable state is the part of the MDS that cannot be learnt again from the servers: each
//! chunk group's replicas, primary, epoch, log-client superblock, allocated slots and replica
//! being rebuilt; the objects and their chunks; each server's state, incarnation and whether the
//! gear wants it off; the seed of the MDS's random choices. Timers, leases and migrations in
//! progress are not kept: a restarted MDS counts every server as heard from at its start, so a
//! lease granted before the crash has lapsed before any primary is given away (the same
//! margin a running MDS relies on), and a migration in progress ends as a reassignment.
//!
//! # Driver contract
//!
//! After every `handle_*` or `set_gear` and **before** sending what `poll_message` returns, the
//! driver takes [`Mds::take_changes`] and makes it durable (every message the MDS sends is
//! then backed by durable state: a primary's epoch, a superblock it acknowledged, an object it
//! created). At start it loads the [`Snapshot`] it stored (changes applied in order) and calls
//! [`Mds::restore`].
//!
//! # Record encoding
//!
//! Every record starts with a version byte (1); integers are little-endian; an option is a
//! `u8` flag (0 none, 1 some) then the value; a list or byte string is a `u32` count then its
//! items. Decoding rejects truncated input, trailing bytes, unknown versions and flags, and
//! counts past [`RECORD_BYTES_MAX`] with a [`PersistError`]; it never panics.
//!
//! ```text
//! group  = 1 list<u32 replica> opt<u32 primary> u64 epoch opt<bytes superblock> u32 next_slot
//!          opt<u32 rebuilding>
//! object = 1 u64 size_bytes u64 first_chunk u64 chunk_count
//! chunk  = u32 group (u32::MAX: freed) u32 slot            (a u64: group | slot << 32)
//! server = 1 u8 state u8 wanted_off opt<u64 incarnation>
//!          state: 0 up, 1 releasing, 2 standby, 3 waking, 4 suspect, 5 failed
//! ```

use std::collections::BTreeMap;

use thiserror::Error;

use super::{GroupEntry, Mds, MdsConfig, ObjectEntry, ServerEntry, ServerState};
use crate::layout::Layout;
use crate::model::{ObjectId, ServerId};
use crate::protocol::{Epoch, Nanos};

const VERSION: u8 = 1;
/// No record is larger (a superblock is 4 KiB; a group lists r replicas).
pub const RECORD_BYTES_MAX: usize = 64 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    pub replicas: Vec<ServerId>,
    pub primary: Option<ServerId>,
    pub epoch: Epoch,
    pub superblock: Option<Vec<u8>>,
    pub next_slot: u32,
    pub rebuilding: Option<ServerId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectRecord {
    pub size_bytes: u64,
    pub first_chunk: u64,
    pub chunk_count: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerRecord {
    pub state: ServerState,
    pub wanted_off: bool,
    pub incarnation: Option<u64>,
}

/// The whole durable state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub groups: Vec<GroupRecord>,
    pub objects: BTreeMap<ObjectId, ObjectRecord>,
    /// Chunk id → (group, slot); group `u32::MAX` for a freed chunk.
    pub chunks: Vec<(u32, u32)>,
    pub servers: Vec<ServerRecord>,
    pub rng: u64,
}

/// What changed since the last [`Mds::take_changes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub groups: Vec<(u32, GroupRecord)>,
    /// `None`: the object was deleted.
    pub objects: Vec<(ObjectId, Option<ObjectRecord>)>,
    /// Chunks set (appended, or freed) by id.
    pub chunks: Vec<(u64, (u32, u32))>,
    pub servers: Vec<(u32, ServerRecord)>,
    pub rng: Option<u64>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
            && self.objects.is_empty()
            && self.chunks.is_empty()
            && self.servers.is_empty()
            && self.rng.is_none()
    }
}

impl Snapshot {
    /// Applies `changes`, in the order they were taken. Chunks must be set in order of id
    /// (appended at the end, or rewritten in place).
    pub fn apply(&mut self, changes: &Changes) -> Result<(), PersistError> {
        for (g, record) in &changes.groups {
            let g = *g as usize;
            if g > self.groups.len() {
                return Err(PersistError::Invalid("a group past the end"));
            }
            if g == self.groups.len() {
                self.groups.push(record.clone());
            } else {
                self.groups[g] = record.clone();
            }
        }
        for (object, record) in &changes.objects {
            match record {
                Some(r) => self.objects.insert(*object, *r),
                None => self.objects.remove(object),
            };
        }
        for &(c, chunk) in &changes.chunks {
            let c = usize::try_from(c).map_err(|_| PersistError::Invalid("chunk id"))?;
            if c > self.chunks.len() {
                return Err(PersistError::Invalid("a chunk past the end"));
            }
            if c == self.chunks.len() {
                self.chunks.push(chunk);
            } else {
                self.chunks[c] = chunk;
            }
        }
        for (s, record) in &changes.servers {
            let s = *s as usize;
            if s > self.servers.len() {
                return Err(PersistError::Invalid("a server past the end"));
            }
            if s == self.servers.len() {
                self.servers.push(*record);
            } else {
                self.servers[s] = *record;
            }
        }
        if let Some(rng) = changes.rng {
            self.rng = rng;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PersistError {
    #[error("record truncated ({0})")]
    Truncated(&'static str),
    #[error("record version {0} is not supported (this build reads {VERSION})")]
    Version(u8),
    #[error("malformed record: {0}")]
    Malformed(&'static str),
    #[error("the stored state does not fit the cluster: {0}")]
    Invalid(&'static str),
}

// ---- the MDS's side

impl GroupEntry {
    fn record(&self) -> GroupRecord {
        GroupRecord {
            replicas: self.replicas.clone(),
            primary: self.primary,
            epoch: self.epoch,
            superblock: self.superblock.clone(),
            next_slot: self.next_slot,
            rebuilding: self.rebuilding,
        }
    }

    fn same(&self, r: &GroupRecord) -> bool {
        self.replicas == r.replicas
            && self.primary == r.primary
            && self.epoch == r.epoch
            && self.superblock == r.superblock
            && self.next_slot == r.next_slot
            && self.rebuilding == r.rebuilding
    }
}

impl ServerEntry {
    fn record(&self) -> ServerRecord {
        ServerRecord {
            state: self.state,
            wanted_off: self.wanted_off,
            incarnation: self.incarnation,
        }
    }
}

/// What the MDS last reported durable, to find what changed since.
#[derive(Default)]
pub(super) struct Persisted {
    groups: Vec<GroupRecord>,
    servers: Vec<ServerRecord>,
    rng: u64,
    chunks: usize,
    objects: Vec<ObjectId>,
    freed: Vec<u64>,
}

impl Persisted {
    pub(super) fn object_changed(&mut self, object: ObjectId) {
        self.objects.push(object);
    }

    pub(super) fn chunk_freed(&mut self, chunk: u64) {
        self.freed.push(chunk);
    }
}

impl Mds {
    /// The durable state as it is now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            groups: self.groups.iter().map(GroupEntry::record).collect(),
            objects: self
                .objects
                .iter()
                .map(|(&o, e)| {
                    let r = ObjectRecord {
                        size_bytes: e.size_bytes,
                        first_chunk: e.first_chunk,
                        chunk_count: e.chunk_count,
                    };
                    (o, r)
                })
                .collect(),
            chunks: self.chunks.clone(),
            servers: self.servers.iter().map(ServerEntry::record).collect(),
            rng: self.rng.0,
        }
    }

    /// What changed in the durable state since the last call (everything, at the first call
    /// after `new`; nothing at the first after `restore`). See the module's driver contract.
    pub fn take_changes(&mut self) -> Changes {
        let mut changes = Changes::default();
        let p = &mut self.persisted;
        for (g, entry) in self.groups.iter().enumerate() {
            match p.groups.get(g) {
                Some(r) if entry.same(r) => {}
                _ => {
                    let r = entry.record();
                    if g < p.groups.len() {
                        p.groups[g] = r.clone();
                    } else {
                        p.groups.push(r.clone());
                    }
                    changes.groups.push((g as u32, r));
                }
            }
        }
        for (s, entry) in self.servers.iter().enumerate() {
            let r = entry.record();
            if p.servers.get(s) != Some(&r) {
                if s < p.servers.len() {
                    p.servers[s] = r;
                } else {
                    p.servers.push(r);
                }
                changes.servers.push((s as u32, r));
            }
        }
        p.freed.sort_unstable();
        p.freed.dedup();
        for c in std::mem::take(&mut p.freed) {
            if (c as usize) < p.chunks {
                changes.chunks.push((c, self.chunks[c as usize]));
            }
        }
        for c in p.chunks..self.chunks.len() {
            changes.chunks.push((c as u64, self.chunks[c]));
        }
        p.chunks = self.chunks.len();
        p.objects.sort_unstable();
        p.objects.dedup();
        for o in std::mem::take(&mut p.objects) {
            let record = self.objects.get(&o).map(|e| ObjectRecord {
                size_bytes: e.size_bytes,
                first_chunk: e.first_chunk,
                chunk_count: e.chunk_count,
            });
            changes.objects.push((o, record));
        }
        if p.rng != self.rng.0 {
            p.rng = self.rng.0;
            changes.rng = Some(p.rng);
        }
        changes
    }

    /// An MDS started again from its durable state. Every server not in standby, waking or
    /// failed is taken as heard from now (suspected if it does not heartbeat within the
    /// timeout); a server that was being woken is woken again. Each group keeps its primary
    /// and epoch: the primary's heartbeats renew its lease, or the heartbeat check reassigns it.
    pub fn restore(
        config: MdsConfig,
        layout: &Layout,
        snapshot: Snapshot,
        now: Nanos,
    ) -> Result<Mds, PersistError> {
        let mut mds = Mds::new(config, layout, now);
        validate(&mds, &snapshot)?;
        for (entry, r) in mds.groups.iter_mut().zip(&snapshot.groups) {
            entry.replicas = r.replicas.clone();
            entry.primary = r.primary;
            entry.epoch = r.epoch;
            entry.superblock = r.superblock.clone();
            entry.next_slot = r.next_slot;
            entry.rebuilding = r.rebuilding;
            entry.assigned_at = now;
            entry.release_to = None;
        }
        for (s, (entry, r)) in mds.servers.iter_mut().zip(&snapshot.servers).enumerate() {
            entry.state = r.state;
            entry.wanted_off = r.wanted_off;
            entry.incarnation = r.incarnation;
            entry.since = now;
            entry.last_heartbeat = now;
            if r.state == ServerState::Waking {
                mds.wakes.push_back(s as ServerId);
            }
        }
        // A primary on a server that cannot serve (in standby, waking, suspected or failed: a
        // state no step leaves behind, but the record says so) is dropped: the group's next
        // replica to heartbeat is given it under a new epoch, as after any lost primary.
        for entry in mds.groups.iter_mut() {
            if let Some(p) = entry.primary {
                let state = mds.servers[p as usize].state;
                if !matches!(state, ServerState::Up | ServerState::Releasing) {
                    entry.primary = None;
                }
            }
        }
        // Which groups each server holds: a failed server holds none (its groups were given
        // new replicas, or have none to give).
        for set in mds.groups_of.iter_mut() {
            set.clear();
        }
        for (g, entry) in mds.groups.iter().enumerate() {
            for &s in &entry.replicas {
                if mds.servers[s as usize].state != ServerState::Failed {
                    mds.groups_of[s as usize].insert(g as u32);
                }
            }
        }
        mds.objects = snapshot
            .objects
            .iter()
            .map(|(&o, r)| {
                let e = ObjectEntry {
                    size_bytes: r.size_bytes,
                    first_chunk: r.first_chunk,
                    chunk_count: r.chunk_count,
                };
                (o, e)
            })
            .collect();
        mds.chunks = snapshot.chunks.clone();
        mds.rng.0 = snapshot.rng;
        mds.persisted = Persisted {
            groups: snapshot.groups,
            servers: snapshot.servers,
            rng: snapshot.rng,
            chunks: mds.chunks.len(),
            objects: Vec::new(),
            freed: Vec::new(),
        };
        Ok(mds)
    }
}

/// Checks that `s` is a state this cluster's MDS could have written: every reference in range.
fn validate(mds: &Mds, s: &Snapshot) -> Result<(), PersistError> {
    let n = mds.servers.len();
    if s.groups.len() != mds.groups.len() {
        return Err(PersistError::Invalid(
            "not as many chunk groups as the layout",
        ));
    }
    if s.servers.len() != n {
        return Err(PersistError::Invalid("not as many servers as the layout"));
    }
    let server = |x: ServerId| (x as usize) < n;
    for (g, (r, fresh)) in s.groups.iter().zip(&mds.groups).enumerate() {
        let _ = g;
        if r.replicas.len() != fresh.replicas.len() || !r.replicas.iter().all(|&x| server(x)) {
            return Err(PersistError::Invalid("a group's replicas"));
        }
        let mut sorted = r.replicas.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != r.replicas.len() {
            return Err(PersistError::Invalid("a group names a replica twice"));
        }
        if r.primary.is_some_and(|p| !r.replicas.contains(&p))
            || r.rebuilding.is_some_and(|p| !r.replicas.contains(&p))
        {
            return Err(PersistError::Invalid(
                "a group's primary or rebuilt replica",
            ));
        }
        if r.epoch == 0 {
            return Err(PersistError::Invalid("a group's epoch"));
        }
    }
    for &(g, slot) in &s.chunks {
        if g == u32::MAX {
            continue;
        }
        match s.groups.get(g as usize) {
            Some(r) if slot < r.next_slot => {}
            _ => return Err(PersistError::Invalid("a chunk's group or slot")),
        }
    }
    for r in s.objects.values() {
        let end = r.first_chunk.checked_add(r.chunk_count);
        if end.is_none_or(|e| e > s.chunks.len() as u64)
            || r.chunk_count > mds.config.chunks_per_object_max
            || r.size_bytes.div_ceil(mds.config.chunk_bytes) != r.chunk_count
        {
            return Err(PersistError::Invalid("an object's chunks"));
        }
    }
    Ok(())
}

// ---- encoding

struct Writer(Vec<u8>);

impl Writer {
    fn new() -> Writer {
        Writer(vec![VERSION])
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.u32(v);
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn start(bytes: &'a [u8]) -> Result<Reader<'a>, PersistError> {
        if bytes.len() > RECORD_BYTES_MAX {
            return Err(PersistError::Malformed("record too long"));
        }
        let mut r = Reader(bytes);
        match r.u8("version")? {
            VERSION => Ok(r),
            v => Err(PersistError::Version(v)),
        }
    }
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], PersistError> {
        if self.0.len() < n {
            return Err(PersistError::Truncated(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, PersistError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, PersistError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, PersistError> {
        let b = self.take(8, what)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn flag(&mut self, what: &'static str) -> Result<bool, PersistError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(PersistError::Malformed(what)),
        }
    }
    fn opt_u32(&mut self, what: &'static str) -> Result<Option<u32>, PersistError> {
        Ok(if self.flag(what)? {
            Some(self.u32(what)?)
        } else {
            None
        })
    }
    fn end(self) -> Result<(), PersistError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(PersistError::Malformed("trailing bytes"))
        }
    }
}

impl GroupRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(self.replicas.len() as u32);
        for &s in &self.replicas {
            w.u32(s);
        }
        w.opt_u32(self.primary);
        w.u64(self.epoch);
        match &self.superblock {
            None => w.u8(0),
            Some(b) => {
                w.u8(1);
                w.u32(b.len() as u32);
                w.0.extend_from_slice(b);
            }
        }
        w.u32(self.next_slot);
        w.opt_u32(self.rebuilding);
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<GroupRecord, PersistError> {
        let mut r = Reader::start(bytes)?;
        let count = r.u32("replica count")? as usize;
        if count > 64 {
            return Err(PersistError::Malformed("replica count"));
        }
        let replicas = (0..count)
            .map(|_| r.u32("replica"))
            .collect::<Result<_, _>>()?;
        let primary = r.opt_u32("primary")?;
        let epoch = r.u64("epoch")?;
        let superblock = if r.flag("superblock flag")? {
            let len = r.u32("superblock length")? as usize;
            Some(r.take(len, "superblock")?.to_vec())
        } else {
            None
        };
        let next_slot = r.u32("next slot")?;
        let rebuilding = r.opt_u32("rebuilding")?;
        r.end()?;
        Ok(GroupRecord {
            replicas,
            primary,
            epoch,
            superblock,
            next_slot,
            rebuilding,
        })
    }
}

impl ObjectRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(self.size_bytes);
        w.u64(self.first_chunk);
        w.u64(self.chunk_count);
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<ObjectRecord, PersistError> {
        let mut r = Reader::start(bytes)?;
        let record = ObjectRecord {
            size_bytes: r.u64("size")?,
            first_chunk: r.u64("first chunk")?,
            chunk_count: r.u64("chunk count")?,
        };
        r.end()?;
        Ok(record)
    }
}

impl ServerRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(match self.state {
            ServerState::Up => 0,
            ServerState::Releasing => 1,
            ServerState::Standby => 2,
            ServerState::Waking => 3,
            ServerState::Suspect => 4,
            ServerState::Failed => 5,
        });
        w.u8(self.wanted_off as u8);
        match self.incarnation {
            None => w.u8(0),
            Some(i) => {
                w.u8(1);
                w.u64(i);
            }
        }
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<ServerRecord, PersistError> {
        let mut r = Reader::start(bytes)?;
        let state = match r.u8("state")? {
            0 => ServerState::Up,
            1 => ServerState::Releasing,
            2 => ServerState::Standby,
            3 => ServerState::Waking,
            4 => ServerState::Suspect,
            5 => ServerState::Failed,
            _ => return Err(PersistError::Malformed("server state")),
        };
        let wanted_off = r.flag("wanted off")?;
        let incarnation = if r.flag("incarnation flag")? {
            Some(r.u64("incarnation")?)
        } else {
            None
        };
        r.end()?;
        Ok(ServerRecord {
            state,
            wanted_off,
            incarnation,
        })
    }
}

/// A chunk's (group, slot) as one integer.
pub fn chunk_to_u64((group, slot): (u32, u32)) -> u64 {
    group as u64 | (slot as u64) << 32
}

pub fn chunk_from_u64(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

#[cfg(test)]
mod tests;
