//! A member array on real files or block devices, driven by the member-array core
//! (`cordillera_striping::members::array`): the core decides which member I/Os each request,
//! rebuild step or scrub needs; here they are carried out (pread, pwrite, fdatasync, paced by
//! the members' disk models), each member's in parallel. Whichever thread asks the core for
//! I/Os carries them out, so label writes and syncs that another request waits for are never
//! left behind.
//!
//! A member that is missing, unreadable, blank, of another array or replaced is failed at
//! start (the array serves degraded, or refuses to start if it has lost more than its level
//! survives); a member returning an error is failed, logged with its path, and never read
//! again. `replace` puts a new disk at a failed position; the pool's rebuild thread then
//! copies it row by row with a durable cursor.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, RwLock};

use cordillera_striping::members::array::{
    ArrayCore, ArrayError, Done, Found, Io, MemberFound, OpId, ScrubReport,
};
use cordillera_striping::members::journal::{Area, Entry};
use cordillera_striping::members::label::{slot_offset, Label, MemberState};
use cordillera_striping::members::Members;
use cordillera_types::Op as IoOp;
use serde::{Deserialize, Serialize};

use super::segments_io::per_device;
use crate::emulate::Emulator;

/// Bytes of each of a member's two label slots.
pub(crate) const LABEL_SLOT: u64 = 4096;
/// Journal slots per member (each one stripe unit and a header).
pub(crate) const JOURNAL_SLOTS: u64 = 16;

/// Where the labels, the journal and the data are on a member of an array with stripe `unit`.
pub fn area(unit: u64) -> Area {
    Area {
        label_slot: LABEL_SLOT,
        journal_slots: JOURNAL_SLOTS,
        unit,
    }
}

/// Bytes a member device must hold.
pub(crate) fn member_bytes(unit: u64, disk_bytes: u64) -> u64 {
    area(unit).data_offset() + disk_bytes
}

/// A random id (arrays and member disks).
pub(crate) fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish() | 1
}

struct Shared {
    core: ArrayCore,
    /// Finished operations not yet collected by the thread that submitted them.
    done: HashMap<OpId, Result<Done, ArrayError>>,
}

/// One member array of the pool.
pub(crate) struct MemberArray {
    /// How logs name it (`array 1`).
    name: String,
    paths: Mutex<Vec<PathBuf>>,
    files: Vec<RwLock<Option<File>>>,
    emulators: Vec<Option<Emulator>>,
    shared: Mutex<Shared>,
    changed: Condvar,
    pub(crate) device_errors: AtomicU64,
    /// Rows rebuilt since start.
    rebuilt_rows: AtomicU64,
}

/// A member array's state for `/status`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MembersStatus {
    pub level: String,
    pub rows: u64,
    pub label_seq: u64,
    pub members: Vec<MemberStatus>,
    pub degraded: bool,
    pub device_errors: u64,
    pub degraded_reads: u64,
    pub degraded_writes: u64,
    pub rows_rebuilt: u64,
    pub rows_resynced: u64,
    pub dirty_regions: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemberStatus {
    pub path: String,
    /// `in-sync`, `failed`, or `rebuilding`.
    pub state: String,
    /// Rows rebuilt so far (durable) while rebuilding.
    pub rebuilt_rows: Option<u64>,
    pub id: String,
}

fn open_member(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Reads what a member device holds: its two label slots and its journal.
fn read_member(file: &File, area: Area) -> io::Result<MemberFound> {
    let mut slots = [None, None];
    for (s, slot) in slots.iter_mut().enumerate() {
        let mut b = vec![0u8; area.label_slot as usize];
        file.read_exact_at(&mut b, slot_offset(area.label_slot, s as u64))?;
        *slot = Label::decode(&b).ok();
    }
    let mut journal = Vec::new();
    let mut b = vec![0u8; area.journal_slot() as usize];
    for i in 0..area.journal_slots {
        file.read_exact_at(&mut b, area.journal_offset(i))?;
        if let Ok(e) = Entry::decode(&b, area.unit) {
            journal.push(e);
        }
    }
    Ok(MemberFound {
        labels: slots,
        journal,
    })
}

/// Creates or checks a member device: at least `bytes` long; a new file is created sparse.
fn prepare_member(path: &Path, bytes: u64) -> Result<File, String> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("member {}: {e}", path.display()))?;
    let len = device_len(&f).map_err(|e| format!("member {}: {e}", path.display()))?;
    if len < bytes {
        if f.metadata().map(|m| m.is_file()).unwrap_or(false) {
            f.set_len(bytes)
                .map_err(|e| format!("sizing member {}: {e}", path.display()))?;
        } else {
            return Err(format!(
                "member {} holds {len} bytes, not the {bytes} a member needs",
                path.display()
            ));
        }
    }
    Ok(f)
}

/// Writes `label` to both slots of a member and zeroes its journal, synced.
fn write_fresh_member(f: &File, path: &Path, area: Area, label: &[u8]) -> Result<(), String> {
    let w = || -> io::Result<()> {
        f.write_all_at(label, slot_offset(area.label_slot, 0))?;
        f.write_all_at(label, slot_offset(area.label_slot, 1))?;
        let zeros = vec![0u8; area.journal_slot() as usize];
        for i in 0..area.journal_slots {
            f.write_all_at(&zeros, area.journal_offset(i))?;
        }
        f.sync_all()
    };
    w().map_err(|e| format!("labelling member {}: {e}", path.display()))
}

impl MemberArray {
    /// Labels new members (created sparse when missing) as a new array `id`. Their data must
    /// be zero (new files are): zero data has zero parity.
    pub(crate) fn create(paths: &[PathBuf], layout: &Members, id: u128) -> Result<(), String> {
        let area = area(layout.unit());
        let ids: Vec<u64> = paths.iter().map(|_| random_id()).collect();
        let disk_bytes = layout.rows() * layout.unit();
        let (_, labels) = ArrayCore::create(id, layout.level(), &ids, disk_bytes, area, 1)?;
        for (p, label) in paths.iter().zip(&labels) {
            let f = prepare_member(p, member_bytes(layout.unit(), disk_bytes))?;
            write_fresh_member(&f, p, area, label)?;
        }
        Ok(())
    }

    /// Assembles array `id` from its members and resynchronises what an unclean stop left
    /// dirty, before anything is served. `force` serves an array that stopped uncleanly with a
    /// member lost (rows it names may hold wrong bytes on that member).
    pub(crate) fn open(
        name: String,
        paths: &[PathBuf],
        layout: &Members,
        id: u128,
        emulators: Vec<Option<Emulator>>,
        force: bool,
    ) -> Result<MemberArray, String> {
        let area = area(layout.unit());
        let mut files = Vec::new();
        let mut found: Vec<Found> = Vec::new();
        for p in paths {
            match open_member(p).and_then(|f| read_member(&f, area).map(|m| (f, m))) {
                Ok((f, m)) => {
                    files.push(RwLock::new(Some(f)));
                    found.push(Ok(m));
                }
                Err(e) => {
                    tracing::error!(array = %name, member = %p.display(), error = %e, "member unreadable at start");
                    files.push(RwLock::new(None));
                    found.push(Err(format!("{}: {e}", p.display())));
                }
            }
        }
        let assembly = ArrayCore::assemble(id, found, area, force)
            .map_err(|e| format!("{name} ({}): {e}", describe(paths)))?;
        for note in &assembly.notes {
            tracing::warn!(array = %name, "{note}");
            eprintln!("cordillera pool {name}: {note}");
        }
        if !assembly.untrusted_rows.is_empty() {
            eprintln!(
                "cordillera pool {name}: started forced; rows {:?} may hold wrong bytes of the lost member",
                assembly.untrusted_rows
            );
        }
        let dirty = assembly.dirty_rows;
        let array = MemberArray {
            name,
            paths: Mutex::new(paths.to_vec()),
            files,
            emulators,
            shared: Mutex::new(Shared {
                core: assembly.core,
                done: HashMap::new(),
            }),
            changed: Condvar::new(),
            device_errors: AtomicU64::new(0),
            rebuilt_rows: AtomicU64::new(0),
        };
        if dirty > 0 {
            let report = array.resync()?;
            eprintln!(
                "cordillera pool {}: unclean stop: {dirty} dirty rows resynchronised, {} repaired{}",
                array.name,
                report.repaired,
                if report.unrepaired.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", rows {:?} could not be (a member was lost with them in flight)",
                        report.unrepaired
                    )
                }
            );
        } else {
            // The labels' new state (unclean, members failed at assembly) before anything.
            array
                .run(|c| c.flush())
                .map_err(|e| format!("{}: {e}", array.name))?;
        }
        Ok(array)
    }

    /// Runs an operation to its end: whoever waits carries out the I/Os the core hands out.
    fn run(&self, submit: impl FnOnce(&mut ArrayCore) -> OpId) -> Result<Done, ArrayError> {
        let mut s = self.shared.lock().expect("member array lock");
        let op = submit(&mut s.core);
        loop {
            for (id, r) in s.core.take_done() {
                s.done.insert(id, r);
            }
            if let Some(r) = s.done.remove(&op) {
                self.changed.notify_all();
                return r;
            }
            let ios = s.core.poll();
            for (id, r) in s.core.take_done() {
                s.done.insert(id, r);
            }
            if ios.is_empty() {
                if s.done.contains_key(&op) {
                    continue;
                }
                s = self.changed.wait(s).expect("member array lock");
                continue;
            }
            drop(s);
            let results = per_device(&ios, |(_, io)| io.member(), |(_, io)| self.carry_out(io));
            s = self.shared.lock().expect("member array lock");
            for ((id, _), r) in ios.iter().zip(results) {
                s.core.complete(*id, r);
            }
            self.changed.notify_all();
        }
    }

    /// One member I/O on the device (paced by its model); an error is logged with the path.
    fn carry_out(&self, io: &Io) -> Result<Vec<u8>, ()> {
        let m = io.member();
        let file = self.files[m].read().expect("member file lock");
        let Some(f) = file.as_ref() else {
            return Err(());
        };
        let pace = |op, offset, length| {
            self.emulators[m]
                .as_ref()
                .map(|e| e.begin(op, offset, length))
        };
        let r = match io {
            Io::Read { offset, length, .. } => {
                let t = pace(IoOp::Read, *offset, *length);
                let mut b = vec![0u8; *length as usize];
                let r = f.read_exact_at(&mut b, *offset).map(|()| b);
                if let Some(t) = t {
                    t.wait();
                }
                r
            }
            Io::Write { offset, data, .. } => {
                let t = pace(IoOp::Write, *offset, data.len() as u64);
                let r = f.write_all_at(data, *offset).map(|()| Vec::new());
                if let Some(t) = t {
                    t.wait();
                }
                r
            }
            Io::Sync { .. } => f.sync_data().map(|()| Vec::new()),
        };
        r.map_err(|e| {
            self.device_errors.fetch_add(1, Ordering::Relaxed);
            let path = self.paths.lock().expect("paths")[m].clone();
            tracing::error!(array = %self.name, member = m, device = %path.display(), error = %e, "member I/O failed; the member is failed");
            eprintln!(
                "cordillera pool {}: member {m} ({}) failed: {:?}: {e}",
                self.name,
                path.display(),
                io_kind(io)
            );
        })
    }

    pub(crate) fn read(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        match self.run(|c| c.read(at, buf.len() as u64)).map_err(to_io)? {
            Done::Read(b) => {
                buf.copy_from_slice(&b);
                Ok(())
            }
            other => Err(io::Error::other(format!("unexpected {other:?}"))),
        }
    }

    pub(crate) fn write(&self, at: u64, data: &[u8]) -> io::Result<()> {
        self.run(|c| c.write(at, data.to_vec()))
            .map(|_| ())
            .map_err(to_io)
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        self.run(|c| c.flush()).map(|_| ()).map_err(to_io)
    }

    /// Resynchronises the rows an unclean stop left dirty.
    fn resync(&self) -> Result<ScrubReport, String> {
        match self
            .run(|c| c.resync())
            .map_err(|e| format!("{}: resync: {e}", self.name))?
        {
            Done::Scrubbed(r) => Ok(r),
            other => Err(format!("resync: unexpected {other:?}")),
        }
    }

    /// Checks every row (`repair`: rewrites parity from data and copies from the first live
    /// one where they differ).
    pub(crate) fn scrub(&self, repair: bool) -> Result<ScrubReport, String> {
        match self
            .run(|c| c.scrub(0, u64::MAX, repair))
            .map_err(|e| format!("{}: scrub: {e}", self.name))?
        {
            Done::Scrubbed(r) => Ok(r),
            other => Err(format!("scrub: unexpected {other:?}")),
        }
    }

    /// Puts the device at `path` (created sparse if missing) in failed position `member`, as
    /// a new disk to rebuild.
    pub(crate) fn replace(&self, member: usize, path: &Path) -> Result<(), String> {
        let (unit, rows) = {
            let s = self.shared.lock().expect("member array lock");
            (s.core.layout().unit(), s.core.layout().rows())
        };
        let bytes = member_bytes(unit, rows * unit);
        let f = prepare_member(path, bytes)?;
        // Its old labels and journal, if any, go: it is a new disk here.
        let area = area(unit);
        let zeros = vec![0u8; area.data_offset() as usize];
        f.write_all_at(&zeros, 0)
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("member {}: {e}", path.display()))?;
        let mut s = self.shared.lock().expect("member array lock");
        if s.core.meta().members.get(member).map(|m| m.state) != Some(MemberState::Failed) {
            return Err(format!("{}: member {member} is not failed", self.name));
        }
        *self.files[member].write().expect("member file lock") = Some(f);
        self.paths.lock().expect("paths")[member] = path.to_path_buf();
        s.core
            .replace(member, random_id())
            .map_err(|e| format!("{}: {e}", self.name))?;
        drop(s);
        // The replacement's labels durable now.
        self.run(|c| c.flush())
            .map_err(|e| format!("{}: {e}", self.name))?;
        Ok(())
    }

    /// Whether member `m` is failed (and may be replaced).
    pub(crate) fn is_failed(&self, m: usize) -> bool {
        let s = self.shared.lock().expect("member array lock");
        s.core.meta().members.get(m).map(|x| x.state) == Some(MemberState::Failed)
    }

    pub(crate) fn unit(&self) -> u64 {
        self.shared
            .lock()
            .expect("member array lock")
            .core
            .layout()
            .unit()
    }

    /// Members read per row when rebuilding (all of them).
    pub(crate) fn width(&self) -> usize {
        self.files.len()
    }

    /// The member being rebuilt, if any.
    pub(crate) fn rebuilding(&self) -> Option<usize> {
        let s = self.shared.lock().expect("member array lock");
        (0..s.core.meta().members.len()).find(|&m| s.core.rebuild_cursor(m).is_some())
    }

    /// Rebuilds the next `rows` rows of the replacement (synced, its cursor durable); whether
    /// the rebuild is finished.
    pub(crate) fn rebuild_step(&self, rows: u64) -> Result<bool, String> {
        match self.run(|c| match c.rebuild(rows) {
            Ok(op) => op,
            Err(_) => c.flush(),
        }) {
            Ok(Done::Rebuilt {
                from,
                to,
                finished,
                member,
            }) => {
                self.rebuilt_rows.fetch_add(to - from, Ordering::Relaxed);
                if finished {
                    let path = self.paths.lock().expect("paths")[member].clone();
                    tracing::info!(array = %self.name, member, device = %path.display(), "rebuild finished");
                    eprintln!(
                        "cordillera pool {}: member {member} ({}) rebuilt",
                        self.name,
                        path.display()
                    );
                }
                Ok(finished)
            }
            Ok(_) => Ok(true),
            Err(e) => Err(format!("{}: {e}", self.name)),
        }
    }

    /// A clean stop: everything flushed, the labels marked clean.
    pub(crate) fn stop(&self) -> io::Result<()> {
        self.sync()?;
        self.run(|c| {
            c.stop_clean();
            c.flush()
        })
        .map(|_| ())
        .map_err(to_io)
    }

    pub(crate) fn status(&self) -> MembersStatus {
        let s = self.shared.lock().expect("member array lock");
        let paths = self.paths.lock().expect("paths").clone();
        let meta = s.core.meta();
        let c = s.core.counters();
        let members: Vec<MemberStatus> = meta
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberStatus {
                path: paths[i].display().to_string(),
                state: match m.state {
                    MemberState::InSync => "in-sync",
                    MemberState::Failed => "failed",
                    MemberState::Rebuilding { .. } => "rebuilding",
                }
                .into(),
                rebuilt_rows: match m.state {
                    MemberState::Rebuilding { cursor } => Some(cursor),
                    _ => None,
                },
                id: format!("{:016x}", m.id),
            })
            .collect();
        MembersStatus {
            level: cordillera_striping::layout::level_name(meta.level).into(),
            rows: s.core.layout().rows(),
            label_seq: meta.seq,
            degraded: members.iter().any(|m| m.state != "in-sync"),
            members,
            device_errors: self.device_errors.load(Ordering::Relaxed),
            degraded_reads: c.degraded_reads,
            degraded_writes: c.degraded_writes,
            rows_rebuilt: self.rebuilt_rows.load(Ordering::Relaxed),
            rows_resynced: c.rows_resynced,
            dirty_regions: meta.dirty.iter().filter(|d| **d).count(),
        }
    }
}

fn io_kind(io: &Io) -> &'static str {
    match io {
        Io::Read { .. } => "read",
        Io::Write { .. } => "write",
        Io::Sync { .. } => "sync",
    }
}

fn to_io(e: ArrayError) -> io::Error {
    io::Error::other(e.to_string())
}

fn describe(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The length of a file or block device.
fn device_len(file: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::End(0))
}
