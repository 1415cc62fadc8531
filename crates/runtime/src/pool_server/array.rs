//! One array of the pool: a single file or block device holding the array's logical device
//! (a hardware array's LUN, an md device), or member files or devices on which the pool runs
//! the RAID itself (`cordillera_striping::members`: layout and parity). Either may be paced by
//! device models: the whole array's model for a logical device, one disk model per member.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cordillera_striping::members::{parity_full, parity_update, Members, Piece};
use cordillera_types::Op as IoOp;

use super::segments_io::per_device;
use crate::emulate::{EmulateSpec, Emulator};

/// Row locks of a member array (a row's parity is read, changed and written under its lock).
const ROW_LOCKS: usize = 256;

enum Backing {
    Lun {
        file: File,
        emulator: Option<Emulator>,
    },
    Members {
        layout: Members,
        files: Vec<File>,
        emulators: Vec<Option<Emulator>>,
        rows: Vec<Mutex<()>>,
    },
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

    /// Member devices of `disk_bytes` each, laid out by `layout`; each paced by a model of one
    /// `emulate` disk.
    pub(crate) fn open_members(
        paths: &[&Path],
        layout: Members,
        disk_bytes: u64,
        emulate: Option<&str>,
    ) -> io::Result<ArrayDev> {
        if paths.len() != layout.disks() {
            return Err(io::Error::other(format!(
                "{} member devices for an array of {} disks",
                paths.len(),
                layout.disks()
            )));
        }
        let mut files = Vec::new();
        let mut emulators = Vec::new();
        for p in paths {
            let f = open_rw(p, "array member")?;
            let len = device_len(&f)?;
            if len < disk_bytes {
                return Err(io::Error::other(format!(
                    "array member {} holds {len} bytes, not the {disk_bytes} each disk needs",
                    p.display()
                )));
            }
            files.push(f);
            emulators.push(emulator(emulate)?);
        }
        Ok(ArrayDev::new(Backing::Members {
            layout,
            files,
            emulators,
            rows: (0..ROW_LOCKS).map(|_| Mutex::new(())).collect(),
        }))
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
            Backing::Members {
                layout,
                files,
                emulators,
                ..
            } => {
                let pieces = layout.read_pieces(at, buf.len() as u64);
                let results = per_device(
                    &pieces,
                    |p| p.member,
                    |p| {
                        let mut data = vec![0u8; p.length as usize];
                        paced(
                            &emulators[p.member],
                            IoOp::Read,
                            p.member_offset,
                            p.length,
                            || files[p.member].read_exact_at(&mut data, p.member_offset),
                        )
                        .map(|()| data)
                    },
                );
                let mut out = Ok(());
                for (p, data) in pieces.iter().zip(results) {
                    match data {
                        Ok(d) => {
                            let o = (p.lun_offset - at) as usize;
                            buf[o..o + d.len()].copy_from_slice(&d);
                        }
                        Err(e) => out = Err(e),
                    }
                }
                out
            }
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
            Backing::Members {
                layout,
                files,
                emulators,
                rows,
            } => (|| {
                let u = layout.unit();
                for row in layout.write_rows(at, data.len() as u64) {
                    let _lock = rows[(row.row % ROW_LOCKS as u64) as usize]
                        .lock()
                        .expect("row lock");
                    let slice =
                        |p: &Piece| &data[(p.lun_offset - at) as usize..][..p.length as usize];
                    let read = |member: usize, offset: u64, length: u64| -> io::Result<Vec<u8>> {
                        let mut b = vec![0u8; length as usize];
                        paced(&emulators[member], IoOp::Read, offset, length, || {
                            files[member].read_exact_at(&mut b, offset)
                        })?;
                        Ok(b)
                    };
                    let mut writes: Vec<(Piece, Vec<u8>)> = Vec::new();
                    if let Some(par) = row.parity {
                        let base = row.row * u;
                        let parity = if par.full {
                            let units: Vec<&[u8]> = row.data.iter().map(slice).collect();
                            parity_full(&units)
                        } else {
                            // The old data and parity, read at once from their members.
                            let mut wanted: Vec<Piece> = row.data.clone();
                            wanted.push(Piece {
                                member: par.member,
                                member_offset: base + par.lo,
                                lun_offset: u64::MAX,
                                length: par.hi - par.lo,
                            });
                            let olds = per_device(
                                &wanted,
                                |p| p.member,
                                |p| read(p.member, p.member_offset, p.length),
                            );
                            let olds: Vec<Vec<u8>> = olds.into_iter().collect::<io::Result<_>>()?;
                            let (old_parity, old_data) = olds.split_last().expect("parity read");
                            let pieces: Vec<(u64, &[u8], &[u8])> = row
                                .data
                                .iter()
                                .zip(old_data)
                                .map(|(p, o)| (p.member_offset - base, o.as_slice(), slice(p)))
                                .collect();
                            parity_update(par.lo, old_parity, &pieces)
                        };
                        writes.push((
                            Piece {
                                member: par.member,
                                member_offset: base + par.lo,
                                lun_offset: u64::MAX,
                                length: par.hi - par.lo,
                            },
                            parity,
                        ));
                    }
                    // Data, copies and parity at once across members: a crash between them
                    // leaves a stale parity, whatever the order (the write hole).
                    let mut all: Vec<(Piece, Vec<u8>)> = row
                        .data
                        .iter()
                        .chain(&row.copies)
                        .map(|p| (*p, slice(p).to_vec()))
                        .collect();
                    all.extend(writes);
                    let pieces: Vec<Piece> = all.iter().map(|(p, _)| *p).collect();
                    let results = per_device(
                        &pieces,
                        |p| p.member,
                        |p| {
                            let bytes = &all.iter().find(|(q, _)| q == p).expect("listed").1;
                            paced(
                                &emulators[p.member],
                                IoOp::Write,
                                p.member_offset,
                                p.length,
                                || files[p.member].write_all_at(bytes, p.member_offset),
                            )
                        },
                    );
                    results.into_iter().collect::<io::Result<()>>()?;
                }
                Ok(())
            })(),
        };
        self.leave();
        r
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        match &self.backing {
            Backing::Lun { file, .. } => file.sync_data(),
            Backing::Members { files, .. } => files.iter().try_for_each(|f| f.sync_data()),
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
