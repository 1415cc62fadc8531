//! The storage pool on real I/O: arrays (each a file or block device holding the array's
//! logical device, optionally paced by a model of its disks), volumes placed narrow or wide by
//! the policies of `cordillera_striping`, each exported over NBD under its name, and the
//! online restripe that spreads wide volumes over an added array while they serve I/O.
//!
//! What decides correctness is in `cordillera_striping`: the mapping of volume bytes to
//! arrays (`Pool::segments`), the restripe core (`restripe::Restripe`: which layout a request
//! goes to, when a write waits, which batch is copied next) and the durable layout record
//! (`layout::PoolLayout`). Here are the files, threads, sockets and clocks: a copier thread
//! that moves one batch at a time (read the old layout, write the new, sync it, then write the
//! cursor into the layout record, synced and renamed into place), and the NBD and HTTP
//! endpoints; `http_api` serves the HTTP endpoint, [`control`] is the HTTP control plane as
//! its clients speak it, [`daemon`] runs both for `pool serve`.

mod array;
pub mod control;
mod copier;
pub mod daemon;
mod http_api;
mod members;
mod repair;
mod segments_io;
mod state;

use array::ArrayDev;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cordillera_striping::layout::PoolLayout;
use cordillera_striping::pool::{segments_of, Segment, VolumeId};
use cordillera_striping::restripe::{Admit, Pieces, Restripe, Side, Ticket};

use crate::nbd_server::{Backend, Completion, Exports, Op, Outcome};

pub use http_api::{percent_decode, percent_encode, serve_http};
pub use members::{area as member_area, MemberStatus, MembersStatus};
pub use state::{ArrayStatus, CreateVolume, PoolStatus, RestripeStatus, VolumeStatus};

/// WRITE_ZEROES is carried out in pieces of this many bytes.
const ZERO_CHUNK: usize = 1 << 20;

/// The layout record's file in the pool's folder.
pub const LAYOUT_FILE: &str = "pool.layout";

/// How the pool runs.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    pub dir: PathBuf,
    /// Bytes copied per restripe step (each ends with a sync and a durable cursor).
    pub batch_bytes: u64,
    /// The restripe's copy rate at most, bytes per second (None: as fast as the arrays go).
    pub restripe_rate: Option<u64>,
    /// Serve a member array that stopped uncleanly with a member lost (its rows named at start
    /// may hold wrong bytes of that member).
    pub force: bool,
}

/// How a request in flight is known: by a running restripe's ticket (with the restripe's
/// epoch), or, admitted while no restripe ran, by the volume's count of such requests — which
/// a restripe that begins meanwhile takes over (`Restripe::in_flight_before`).
enum Admitted {
    Ticket(u64, Ticket),
    Before { write: bool },
}

/// A request's place: how it is known, and its segments.
type Routed = (Admitted, Vec<Segment>);

/// A restripe in progress: the core, and the epoch its tickets belong to.
struct Running {
    core: Restripe,
    epoch: u64,
    started: Instant,
    copied_this_run: u64,
}

/// A write waiting for a batch to be copied and its cursor made durable.
struct Parked {
    id: VolumeId,
    offset: u64,
    data: Vec<u8>,
    fua: bool,
    done: Completion,
}

/// What the lock guards.
pub(crate) struct Inner {
    pub(crate) layout: PoolLayout,
    pub(crate) pool: cordillera_striping::Pool,
    restripes: HashMap<VolumeId, Running>,
    /// Per volume, writes and reads in flight admitted while no restripe ran.
    before: HashMap<VolumeId, (u64, u64)>,
    parked: Vec<Parked>,
    next_epoch: u64,
    /// Why a wide volume was not restriped onto an added array.
    pub(crate) not_restriped: Vec<String>,
    /// Volumes (the first so many of the layout) whose record is durable: only they are
    /// exported, so no write is acknowledged to a volume a crash could forget.
    durable_volumes: usize,
}

/// Counters for `/metrics` and `/status`.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) read_bytes: AtomicU64,
    pub(crate) written_bytes: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) parked_writes: AtomicU64,
    pub(crate) restripe_bytes: AtomicU64,
    pub(crate) restripe_batches: AtomicU64,
    pub(crate) restripes_finished: AtomicU64,
    pub(crate) scrubbed_rows: AtomicU64,
}

pub struct PoolServer {
    pub(crate) options: PoolOptions,
    pub(crate) inner: Mutex<Inner>,
    changed: Condvar,
    pub(crate) arrays: Mutex<Vec<Arc<ArrayDev>>>,
    /// Serializes layout saves.
    save_lock: Mutex<()>,
    pub(crate) counters: Counters,
    pub(crate) started: Instant,
    stopping: AtomicBool,
}

/// A new array: its device and shape.
#[derive(Clone, Debug)]
pub struct NewArray {
    /// One device holding the array's logical device, or (more than one) its members, on
    /// which the pool runs the RAID itself.
    pub paths: Vec<PathBuf>,
    pub level: String,
    pub disks: usize,
    pub disk_bytes: u64,
    /// Stripe unit of a member array.
    pub unit_bytes: u64,
    /// A preset whose disks pace the array (`fujitsu-maj3182mc`): a model of the array's
    /// level over `disks` of them for a logical device, one disk model per member.
    pub emulate: Option<String>,
}

impl NewArray {
    fn members(&self) -> bool {
        self.paths.len() > 1
    }

    fn emulate_spec(&self) -> Option<String> {
        self.emulate.as_ref().map(|p| {
            if self.members() {
                p.clone()
            } else {
                format!("{p}@{}:{}", self.level, self.disks)
            }
        })
    }

    fn describe(&self) -> String {
        self.paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Opens array `i` as its record describes it (`force`: a member array that stopped
/// uncleanly with a member lost is served anyway).
fn open_array(
    i: usize,
    a: &cordillera_striping::layout::ArrayRecord,
    lun_bytes: u64,
    force: bool,
) -> Result<ArrayDev, String> {
    match a.geometry()? {
        None => ArrayDev::open_lun(Path::new(&a.path), lun_bytes, a.emulate.as_deref()),
        Some(layout) => {
            let paths: Vec<&Path> = a.members.iter().map(Path::new).collect();
            let id = a.member_array_id().map_err(|e| format!("array {i}: {e}"))?;
            let name = format!("array {i}");
            ArrayDev::open_members(name, &paths, layout, id, a.emulate.as_deref(), force)
        }
    }
    .map_err(|e| e.to_string())
}

impl PoolServer {
    /// Opens the pool in `options.dir`: its layout record if there is one (then `create` must
    /// be empty or the same arrays), or a new pool over `create`.
    pub fn open(options: PoolOptions, create: &[NewArray]) -> Result<Arc<PoolServer>, String> {
        if options.batch_bytes == 0 || !options.batch_bytes.is_multiple_of(512) {
            return Err(format!(
                "the restripe batch must be a positive multiple of 512 bytes (not {})",
                options.batch_bytes
            ));
        }
        std::fs::create_dir_all(&options.dir)
            .map_err(|e| format!("{}: {e}", options.dir.display()))?;
        let path = options.dir.join(LAYOUT_FILE);
        let (layout, pool) = match std::fs::read(&path) {
            Ok(bytes) => {
                let (layout, pool) =
                    PoolLayout::decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
                if !create.is_empty() {
                    let same = create.len() == layout.arrays.len()
                        && create.iter().zip(&layout.arrays).all(|(c, a)| {
                            let recorded: Vec<&Path> = if a.members.is_empty() {
                                vec![Path::new(&a.path)]
                            } else {
                                a.members.iter().map(Path::new).collect()
                            };
                            recorded == c.paths.iter().map(PathBuf::as_path).collect::<Vec<_>>()
                        });
                    if !same {
                        return Err(format!(
                            "{} already describes a pool over {} array(s); start it without --array, or use another --dir",
                            path.display(),
                            layout.arrays.len()
                        ));
                    }
                }
                (layout, pool)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if create.is_empty() {
                    return Err(format!(
                        "{} holds no pool: give its arrays (--array PATH) to create one",
                        options.dir.display()
                    ));
                }
                let mut layout = PoolLayout {
                    generation: 0,
                    arrays: Vec::new(),
                    volumes: Vec::new(),
                };
                for a in create {
                    layout.arrays.push(state::array_record(a)?);
                }
                let pool = layout.pool().map_err(|e| e.to_string())?;
                for (i, a) in create.iter().enumerate() {
                    if a.members() {
                        let record = &layout.arrays[i];
                        let geometry = record.geometry()?.expect("a member array");
                        let id = record.member_array_id()?;
                        members::MemberArray::create(&a.paths, &geometry, id)?;
                    } else {
                        state::prepare_device(&a.paths[0], pool.lun_bytes(i))?;
                    }
                }
                (layout, pool)
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut devices = Vec::new();
        for (i, a) in layout.arrays.iter().enumerate() {
            let dev = open_array(i, a, pool.lun_bytes(i), options.force)?;
            devices.push(Arc::new(dev));
        }
        let mut restripes = HashMap::new();
        let mut next_epoch = 0;
        for (i, v) in layout.volumes.iter().enumerate() {
            if let Some(r) = &v.restripe {
                restripes.insert(
                    VolumeId(i as u32),
                    Running {
                        core: Restripe::new(v.size_bytes, options.batch_bytes, r.cursor),
                        epoch: next_epoch,
                        started: Instant::now(),
                        copied_this_run: 0,
                    },
                );
                next_epoch += 1;
            }
        }
        let server = Arc::new(PoolServer {
            options,
            inner: Mutex::new(Inner {
                layout,
                pool,
                restripes,
                before: HashMap::new(),
                parked: Vec::new(),
                next_epoch,
                not_restriped: Vec::new(),
                durable_volumes: 0,
            }),
            changed: Condvar::new(),
            arrays: Mutex::new(devices),
            save_lock: Mutex::new(()),
            counters: Counters::default(),
            started: Instant::now(),
            stopping: AtomicBool::new(false),
        });
        // A new pool's record exists before anything is exported.
        server.save()?;
        let copier = server.clone();
        std::thread::Builder::new()
            .name("pool-restripe".into())
            .spawn(move || copier.copier())
            .map_err(|e| format!("cannot start the restripe thread: {e}"))?;
        let rebuilder = server.clone();
        std::thread::Builder::new()
            .name("pool-rebuild".into())
            .spawn(move || rebuilder.rebuilder())
            .map_err(|e| format!("cannot start the rebuild thread: {e}"))?;
        Ok(server)
    }

    /// Writes the layout record durably: a new file, synced, renamed over the old, the folder
    /// synced. Saves are serialized; each writes the layout as it is when it starts.
    fn save(&self) -> Result<(), String> {
        let _one = self.save_lock.lock().expect("save lock");
        let (bytes, volumes) = {
            let mut inner = self.inner.lock().expect("pool lock");
            inner.layout.generation += 1;
            (inner.layout.encode(), inner.layout.volumes.len())
        };
        let dir = &self.options.dir;
        let tmp = dir.join(format!("{LAYOUT_FILE}.tmp"));
        let write = || -> io::Result<()> {
            let f = File::create(&tmp)?;
            f.write_all_at(&bytes, 0)?;
            f.sync_all()?;
            std::fs::rename(&tmp, dir.join(LAYOUT_FILE))?;
            File::open(dir)?.sync_all()
        };
        write().map_err(|e| format!("saving the pool layout in {}: {e}", dir.display()))?;
        let mut inner = self.inner.lock().expect("pool lock");
        inner.durable_volumes = inner.durable_volumes.max(volumes);
        Ok(())
    }

    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.changed.notify_all();
        for a in self.arrays.lock().expect("arrays").iter() {
            if let Err(e) = a.stop() {
                tracing::error!(error = %e, "stopping an array");
            }
        }
    }

    /// Where a request's bytes are; `None` for a write that must wait. The ticket (with its
    /// restripe's epoch) goes back to [`done`](Self::done).
    fn route(
        &self,
        inner: &mut Inner,
        id: VolumeId,
        offset: u64,
        length: u64,
        write: bool,
    ) -> Result<Option<Routed>, String> {
        let Some(running) = inner.restripes.get_mut(&id) else {
            let mut segs = Vec::new();
            inner
                .pool
                .segments(id, offset, length, &mut segs)
                .map_err(|e| e.to_string())?;
            let count = inner.before.entry(id).or_default();
            if write {
                count.0 += 1;
            } else {
                count.1 += 1;
            }
            return Ok(Some((Admitted::Before { write }, segs)));
        };
        let (ticket, pieces): (Ticket, Pieces) = if write {
            match running.core.write(offset, offset + length) {
                Admit::Go(t, p) => (t, p),
                Admit::Wait => return Ok(None),
            }
        } else {
            running.core.read(offset, offset + length)
        };
        let epoch = running.epoch;
        let mut out = Vec::new();
        let mut segs = Vec::new();
        for p in pieces {
            let v = match p.side {
                Side::Old => inner.pool.volume(id),
                Side::New => inner.pool.restripe_target(id),
            }
            .expect("a restripe has both layouts");
            segments_of(
                v,
                &|a| inner.pool.data_disks(a),
                p.lo,
                p.hi - p.lo,
                &mut segs,
            )
            .map_err(|e| e.to_string())?;
            out.extend_from_slice(&segs);
        }
        Ok(Some((Admitted::Ticket(epoch, ticket), out)))
    }

    fn done(&self, id: VolumeId, admitted: Admitted) {
        let mut inner = self.inner.lock().expect("pool lock");
        match admitted {
            Admitted::Ticket(epoch, ticket) => {
                if let Some(r) = inner.restripes.get_mut(&id) {
                    if r.epoch == epoch {
                        r.core.done(ticket);
                    }
                }
            }
            Admitted::Before { write } => {
                let count = inner.before.get_mut(&id).expect("counted when admitted");
                let n = if write { &mut count.0 } else { &mut count.1 };
                *n -= 1;
                // A restripe running now began after this request was admitted, so it counted
                // it among those in flight from before.
                if let Some(r) = inner.restripes.get_mut(&id) {
                    r.core.done_before(write);
                }
            }
        }
        drop(inner);
        self.changed.notify_all();
    }

    fn devices(&self) -> Vec<Arc<ArrayDev>> {
        self.arrays.lock().expect("arrays").clone()
    }

    /// One request to volume `id`, carried out on this (blocking) thread.
    fn execute(self: &Arc<Self>, id: VolumeId, op: Op, done: Completion) {
        match op {
            Op::Read { offset, length } => {
                let routed = {
                    let mut inner = self.inner.lock().expect("pool lock");
                    self.route(&mut inner, id, offset, length as u64, false)
                };
                let outcome: Outcome = match routed {
                    Err(e) => Err(io::Error::other(e)),
                    Ok(None) => unreachable!("reads never wait"),
                    Ok(Some((ticket, segs))) => {
                        let mut buf = vec![0u8; length as usize];
                        let r = self.read_segments(&segs, &mut buf, offset);
                        self.done(id, ticket);
                        r.map(|()| Some(buf))
                    }
                };
                self.counters.reads.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .read_bytes
                    .fetch_add(length as u64, Ordering::Relaxed);
                if outcome.is_err() {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                }
                done.complete(outcome);
            }
            Op::Write { offset, data, fua } => self.write(id, offset, data, fua, done),
            Op::WriteZeroes {
                offset,
                length,
                fua,
            } => {
                // Up to 4 GiB in one request: written 1 MiB at a time, never held whole.
                let zeroes = vec![0u8; (length as usize).min(ZERO_CHUNK)];
                let mut at = 0u64;
                let mut outcome = Ok(None);
                while at < length as u64 {
                    let n = (length as u64 - at).min(ZERO_CHUNK as u64) as usize;
                    if let Err(e) = self.write_waiting(id, offset + at, &zeroes[..n], fua) {
                        outcome = Err(e);
                        break;
                    }
                    at += n as u64;
                }
                done.complete(outcome);
            }
            Op::Trim { .. } => done.complete(Ok(None)),
            Op::Flush => {
                let r = self.devices().iter().try_for_each(|d| d.sync());
                done.complete(r.map(|()| None));
            }
        }
    }

    fn write(
        self: &Arc<Self>,
        id: VolumeId,
        offset: u64,
        data: Vec<u8>,
        fua: bool,
        done: Completion,
    ) {
        let routed = {
            let mut inner = self.inner.lock().expect("pool lock");
            match self.route(&mut inner, id, offset, data.len() as u64, true) {
                Ok(None) => {
                    self.counters.parked_writes.fetch_add(1, Ordering::Relaxed);
                    inner.parked.push(Parked {
                        id,
                        offset,
                        data,
                        fua,
                        done,
                    });
                    return;
                }
                other => other,
            }
        };
        let outcome: Outcome = match routed {
            Err(e) => Err(io::Error::other(e)),
            Ok(None) => unreachable!("parked above"),
            Ok(Some((ticket, segs))) => {
                let r = self.write_segments(&segs, &data, offset, fua);
                self.done(id, ticket);
                r.map(|()| None)
            }
        };
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .written_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        if outcome.is_err() {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
        }
        done.complete(outcome);
    }

    /// A write on this thread, waiting (rather than parking) while its bytes are being
    /// restriped.
    fn write_waiting(&self, id: VolumeId, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let (ticket, segs) = {
            let mut inner = self.inner.lock().expect("pool lock");
            loop {
                match self.route(&mut inner, id, offset, data.len() as u64, true) {
                    Err(e) => return Err(io::Error::other(e)),
                    Ok(Some(routed)) => break routed,
                    Ok(None) => {
                        inner = self
                            .changed
                            .wait_timeout(inner, Duration::from_millis(50))
                            .expect("pool lock")
                            .0;
                    }
                }
            }
        };
        let r = self.write_segments(&segs, data, offset, fua);
        self.done(id, ticket);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .written_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        if r.is_err() {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// Sends parked writes through again (after a cursor became durable or a restripe ended).
    fn release_parked(self: &Arc<Self>) {
        let parked = std::mem::take(&mut self.inner.lock().expect("pool lock").parked);
        for p in parked {
            let me = self.clone();
            std::thread::spawn(move || me.write(p.id, p.offset, p.data, p.fua, p.done));
        }
    }
}

/// The pool's volumes as NBD exports, by name.
pub struct PoolExports(pub Arc<PoolServer>);

struct VolumeExport {
    server: Arc<PoolServer>,
    id: VolumeId,
    size: u64,
}

impl Backend for VolumeExport {
    fn length_bytes(&self) -> u64 {
        self.size
    }

    fn submit(&self, op: Op, done: Completion) {
        let (server, id) = (self.server.clone(), self.id);
        tokio::task::spawn_blocking(move || server.execute(id, op, done));
    }
}

impl Exports for PoolExports {
    fn lookup(&self, name: &str) -> Option<Arc<dyn Backend>> {
        let inner = self.0.inner.lock().expect("pool lock");
        let v = inner.pool.find(name)?;
        if v.id.0 as usize >= inner.durable_volumes {
            return None;
        }
        Some(Arc::new(VolumeExport {
            server: self.0.clone(),
            id: v.id,
            size: v.size_bytes,
        }))
    }

    fn names(&self) -> Vec<String> {
        let inner = self.0.inner.lock().expect("pool lock");
        inner
            .pool
            .volumes()
            .filter(|v| (v.id.0 as usize) < inner.durable_volumes)
            .map(|v| v.name.clone())
            .collect()
    }
}
