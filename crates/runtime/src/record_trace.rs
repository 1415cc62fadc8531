//! `volume serve --record-trace FILE`: the volume's requests as a binary trace (docs/FORMATS.md),
//! each with its arrival time and response time, so that `cordillera advise FILE` judges what
//! the workload really did on this device.
//!
//! Recording never slows the volume: a completed request is handed to a writer thread over a
//! bounded queue, and dropped (counted, logged once) when the queue is full. The size is
//! bounded: when the next block of 65,536 requests (compressed; as large as the largest so far)
//! would take `FILE` past half of `--record-trace-size`, it is finished, renamed `FILE.1`
//! (replacing the one before) and a new `FILE` started, so the two hold about the size at most
//! (a block larger than every one before may pass it by its difference) and the latest requests. Each file is a whole trace (header, blocks, trailer) with its own
//! wall-clock origin; a server killed without warning leaves the current `FILE` without its end
//! (reads stop there with an error), `FILE.1` whole.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use cordillera_trace::binary::BinaryWriter;
use cordillera_trace::{Format, Record, TraceInfo, VolumeId, VolumeTable};
use cordillera_types::Op as Dir;

use crate::nbd_server::{Backend, Completion, Op};

/// Requests waiting for the writer at most; more are dropped.
const QUEUE: usize = 1 << 16;

/// Records a volume's requests to a rotating pair of binary traces.
pub struct Recorder {
    queue: Mutex<Option<mpsc::SyncSender<Record>>>,
    writer: Mutex<Option<std::thread::JoinHandle<Result<u64>>>>,
    started: Instant,
    dropped: AtomicU64,
}

/// Counts the bytes written through it.
struct Counting<W> {
    inner: W,
    written: Arc<AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

type Writer = BinaryWriter<Counting<BufWriter<File>>>;

struct Rotating {
    path: PathBuf,
    max_file_bytes: u64,
    volumes: VolumeTable,
    writer: Option<(Writer, TraceInfo, Instant, Arc<AtomicU64>)>,
    written: u64,
    /// The file's bytes at the last look, and the largest block written so far: a file
    /// rotates when the next block, as large as the largest, would pass its half of the size.
    seen_bytes: u64,
    largest_block: u64,
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Rotating {
    fn open(&mut self, now: Instant) -> Result<()> {
        let file = File::create(&self.path)
            .with_context(|| format!("--record-trace {}: creating it", self.path.display()))?;
        let count = Arc::new(AtomicU64::new(0));
        let out = Counting {
            inner: BufWriter::new(file),
            written: count.clone(),
        };
        let info = TraceInfo {
            format: Format::Binary,
            origin_unix_ns: Some(unix_ns()),
            has_time: true,
            last_line_unterminated: false,
        };
        self.writer = Some((BinaryWriter::new(out, &self.path)?, info, now, count));
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        if let Some((writer, info, _, _)) = self.writer.take() {
            let mut out = writer.finish(&info)?;
            out.flush()?;
            out.inner.get_ref().sync_data()?;
        }
        Ok(())
    }

    /// Writes one request that arrived at `at` (the recorder's clock).
    fn write(&mut self, mut record: Record, at: Instant) -> Result<()> {
        let bytes = self
            .writer
            .as_ref()
            .map_or(0, |(_, _, _, n)| n.load(Ordering::Relaxed));
        if bytes > self.seen_bytes {
            self.largest_block = self.largest_block.max(bytes - self.seen_bytes);
            self.seen_bytes = bytes;
        }
        let full = self.writer.is_some()
            && self.largest_block > 0
            && bytes + self.largest_block > self.max_file_bytes;
        if full {
            self.seen_bytes = 0;
            self.close()?;
            let mut older = self.path.clone().into_os_string();
            older.push(".1");
            std::fs::rename(&self.path, &older)
                .with_context(|| format!("--record-trace: renaming {}", self.path.display()))?;
        }
        if self.writer.is_none() {
            self.open(at)?;
        }
        let (writer, info, opened, _) = self.writer.as_mut().expect("open");
        record.time_ns = at.saturating_duration_since(*opened).as_nanos() as i64;
        writer.write(&record, &self.volumes, info)?;
        self.written += 1;
        Ok(())
    }
}

impl Recorder {
    /// Starts recording to `path` (created now, so a bad path fails before serving), at most
    /// `max_bytes` over the file and its predecessor; `volume` names the requests' volume.
    pub fn start(path: &Path, max_bytes: u64, volume: &str) -> Result<Arc<Recorder>> {
        anyhow::ensure!(
            max_bytes >= 1 << 20,
            "--record-trace-size must be at least 1 MiB"
        );
        let mut volumes = VolumeTable::new();
        volumes.intern(if volume.is_empty() {
            b"0"
        } else {
            volume.as_bytes()
        });
        let started = Instant::now();
        let mut rotating = Rotating {
            path: path.to_owned(),
            max_file_bytes: max_bytes / 2,
            volumes,
            writer: None,
            written: 0,
            seen_bytes: 0,
            largest_block: 0,
        };
        rotating.open(started)?;
        let (tx, rx) = mpsc::sync_channel::<Record>(QUEUE);
        let writer = std::thread::Builder::new()
            .name("record-trace".into())
            .spawn(move || -> Result<u64> {
                for record in rx {
                    // The record's time field carries its arrival in ns since `started`.
                    let at = started + std::time::Duration::from_nanos(record.time_ns as u64);
                    rotating.write(record, at)?;
                }
                rotating.close()?;
                Ok(rotating.written)
            })?;
        Ok(Arc::new(Recorder {
            queue: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            started,
            dropped: AtomicU64::new(0),
        }))
    }

    /// One completed request.
    fn record(&self, arrived: Instant, op: Dir, offset: u64, length: u64) {
        let record = Record {
            time_ns: arrived.saturating_duration_since(self.started).as_nanos() as i64,
            volume: VolumeId(0),
            op,
            offset_bytes: offset,
            length_bytes: length,
            response_ns: Some(arrived.elapsed().as_nanos() as u64),
        };
        let queue = self.queue.lock().expect("recorder queue");
        let Some(tx) = queue.as_ref() else { return };
        if tx.try_send(record).is_err() && self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!("--record-trace: the writer falls behind; requests are left out of the trace (counted)");
        }
    }

    /// Requests left out because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes what is queued, finishes the file and returns the requests written to it and
    /// its predecessors.
    pub fn finish(&self) -> Result<u64> {
        drop(self.queue.lock().expect("recorder queue").take());
        match self.writer.lock().expect("recorder writer").take() {
            Some(handle) => handle
                .join()
                .map_err(|_| anyhow::anyhow!("--record-trace: the writer thread panicked"))?,
            None => Ok(0),
        }
    }
}

/// With `record` (`--record-trace FILE` and its size), starts a recorder and wraps `backend`
/// in a [`RecordingBackend`]; returns the recorder to finish at the end.
pub fn wrap(
    record: Option<&(PathBuf, u64)>,
    volume: &str,
    backend: &mut Arc<dyn Backend>,
) -> Result<Option<Arc<Recorder>>> {
    let Some((path, max_bytes)) = record else {
        return Ok(None);
    };
    let recorder = Recorder::start(path, *max_bytes, volume)?;
    tracing::info!(path = %path.display(), max_bytes, "recording the volume's requests");
    *backend = Arc::new(RecordingBackend {
        inner: backend.clone(),
        recorder: recorder.clone(),
    });
    Ok(Some(recorder))
}

impl Recorder {
    /// [`Recorder::finish`], logging what was written and left out.
    pub fn finish_logged(&self) -> Result<()> {
        let written = self.finish()?;
        tracing::info!(written, dropped = self.dropped(), "recorded trace finished");
        Ok(())
    }
}

/// A backend whose reads and writes are recorded as they complete.
pub struct RecordingBackend {
    pub inner: Arc<dyn Backend>,
    pub recorder: Arc<Recorder>,
}

impl Backend for RecordingBackend {
    fn length_bytes(&self) -> u64 {
        self.inner.length_bytes()
    }

    fn submit(&self, op: Op, mut done: Completion) {
        let what = match &op {
            Op::Read { offset, length } => Some((Dir::Read, *offset, *length as u64)),
            Op::Write { offset, data, .. } => Some((Dir::Write, *offset, data.len() as u64)),
            Op::WriteZeroes { offset, length, .. } => Some((Dir::Write, *offset, *length as u64)),
            Op::Flush | Op::Trim { .. } => None,
        };
        if let Some((dir, offset, length)) = what {
            let arrived = Instant::now();
            let recorder = self.recorder.clone();
            done.observe(move |ok| {
                if ok {
                    recorder.record(arrived, dir, offset, length);
                }
            });
        }
        self.inner.submit(op, done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_rotate_within_the_size_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vol.cdt");
        let recorder = Recorder::start(&path, 1 << 20, "vol").unwrap();
        let t0 = Instant::now();
        for i in 0..200_000u64 {
            recorder.record(
                t0,
                if i % 2 == 0 { Dir::Read } else { Dir::Write },
                (i * 7919 % 1_000_000) * 4096,
                4096,
            );
            if i % 10_000 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let written = recorder.finish().unwrap();
        assert_eq!(written + recorder.dropped(), 200_000);
        let older = dir.path().join("vol.cdt.1");
        let total = std::fs::metadata(&path).unwrap().len()
            + std::fs::metadata(&older).map_or(0, |m| m.len());
        eprintln!("recorded pair: {total} bytes");
        assert!(total <= 1 << 20, "{total} bytes");
        for file in [&path, &older] {
            if !file.exists() {
                continue;
            }
            let mut reader = cordillera_trace::open(file, &Default::default()).unwrap();
            let records = cordillera_trace::read::read_all(reader.as_mut()).unwrap();
            assert!(!records.is_empty());
            assert!(records
                .iter()
                .all(|r| r.response_ns.is_some() && r.length_bytes == 4096));
            assert_eq!(reader.volumes().name(VolumeId(0)), "vol");
        }
        assert!(older.exists(), "200,000 requests rotate a 1 MiB pair");
    }
}
