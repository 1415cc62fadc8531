//! One array of the pool: a single file or block device holding the array's logical device
//! (a hardware array's LUN, an md device), or member files or devices on which the pool runs
//! the RAID itself (`members.rs`, over the member-array core of `cordillera_striping`). Either
//! may be paced by device models: the whole array's model for a logical device, one disk model
//! per member.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cordillera_striping::members::Members;
use cordillera_types::Op as IoOp;

use super::members::MemberArray;
use crate::emulate::{EmulateSpec, Emulator};

enum Backing {
    Lun {
        file: File,
        emulator: Option<Emulator>,
    },
    Members(Box<MemberArray>),
}

pub(crate) struct ArrayDev {
    backing: Backing,
    /// Requests in flight and the time they started being so, for utilization.
    busy: Mutex<(u32, Instant)>,
    busy_ns: AtomicU64,
}

fn open_rw(path: &Path, what: &str) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display())))
}

fn emulator(spec: Option<&str>) -> io::Result<Option<Emulator>> {
    match spec {
        None => Ok(None),
        Some(spec) => {
            let spec: EmulateSpec = spec.parse().map_err(io::Error::other)?;
            Ok(Some(Emulator::start(&spec).map_err(io::Error::other)?))
        }
    }
}

impl ArrayDev {
    fn new(backing: Backing) -> ArrayDev {
        ArrayDev {
            backing,
            busy: Mutex::new((0, Instant::now())),
            busy_ns: AtomicU64::new(0),
        }
    }

    /// A logical device of at least `lun_bytes`, paced by `emulate` (a preset, or an array of
    /// them: `fujitsu-maj3182mc@raid5:5`).
    pub(crate) fn open_lun(
        path: &Path,
        lun_bytes: u64,
        emulate: Option<&str>,
    ) -> io::Result<ArrayDev> {
        let file = open_rw(path, "array device")?;
        let len = device_len(&file)?;
        if len < lun_bytes {
            return Err(io::Error::other(format!(
                "array device {} holds {len} bytes, not the {lun_bytes} its layout needs",
                path.display()
            )));
        }
        Ok(ArrayDev::new(Backing::Lun {
            file,
            emulator: emulator(emulate)?,
        }))
    }

    /// A member array (`id`) over `paths`, laid out by `layout`; each member paced by a model
    /// of one `emulate` disk. Assembled from the members' labels (see `members.rs`).
    pub(crate) fn open_members(
        name: String,
        paths: &[&Path],
        layout: Members,
        id: u128,
        emulate: Option<&str>,
        force: bool,
    ) -> io::Result<ArrayDev> {
        if paths.len() != layout.disks() {
            return Err(io::Error::other(format!(
                "{} member devices for an array of {} disks",
                paths.len(),
                layout.disks()
            )));
        }
        let emulators = paths
            .iter()
            .map(|_| emulator(emulate))
            .collect::<io::Result<_>>()?;
        let paths: Vec<std::path::PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
        let array = MemberArray::open(name, &paths, &layout, id, emulators, force)
            .map_err(io::Error::other)?;
        Ok(ArrayDev::new(Backing::Members(Box::new(array))))
    }

    fn enter(&self) {
        let mut b = self.busy.lock().expect("busy lock");
        if b.0 == 0 {
            b.1 = Instant::now();
        }
        b.0 += 1;
    }

    fn leave(&self) {
        let mut b = self.busy.lock().expect("busy lock");
        b.0 -= 1;
        if b.0 == 0 {
            self.busy_ns
                .fetch_add(b.1.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Busy time so far, including the current busy period.
    pub(crate) fn busy_ns(&self) -> u64 {
        let b = self.busy.lock().expect("busy lock");
        let open = if b.0 > 0 {
            b.1.elapsed().as_nanos() as u64
        } else {
            0
        };
        self.busy_ns.load(Ordering::Relaxed) + open
    }

    pub(crate) fn read(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.enter();
        let r = match &self.backing {
            Backing::Lun { file, emulator } => {
                paced(emulator, IoOp::Read, at, buf.len() as u64, || {
                    file.read_exact_at(buf, at)
                })
            }
            Backing::Members(array) => array.read(at, buf),
        };
        self.leave();
        r
    }

    pub(crate) fn write(&self, at: u64, data: &[u8]) -> io::Result<()> {
        self.enter();
        let r = match &self.backing {
            Backing::Lun { file, emulator } => {
                paced(emulator, IoOp::Write, at, data.len() as u64, || {
                    file.write_all_at(data, at)
                })
            }
            Backing::Members(array) => array.write(at, data),
        };
        self.leave();
        r
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        match &self.backing {
            Backing::Lun { file, .. } => file.sync_data(),
            Backing::Members(array) => array.sync(),
        }
    }

    /// A clean stop: synced (a member array's labels marked clean).
    pub(crate) fn stop(&self) -> io::Result<()> {
        match &self.backing {
            Backing::Lun { file, .. } => file.sync_data(),
            Backing::Members(array) => array.stop(),
        }
    }

    /// The member array, if this is one.
    pub(crate) fn members(&self) -> Option<&MemberArray> {
        match &self.backing {
            Backing::Members(array) => Some(array),
            Backing::Lun { .. } => None,
        }
    }
}

/// Carries out `io` on the real device and, if paced, waits for the model's service too.
fn paced<T>(
    emulator: &Option<Emulator>,
    op: IoOp,
    offset: u64,
    length: u64,
    io: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    let ticket = emulator.as_ref().map(|e| e.begin(op, offset, length));
    let r = io();
    if let Some(t) = ticket {
        t.wait();
    }
    r
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
