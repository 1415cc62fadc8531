//! The volume server's cache driver: the files and the thread around Bonfire's cache core
//! ([`cordillera_warmup::warm`], which holds the coherence tickets, the monitoring, the pre-load
//! plan and its pacing, and the hit-rate samples). Here: opening the warm-up log file (or
//! device) and reading it at start, a writer thread that carries out the core's log writes and
//! syncs in order, and the base volume's `fdatasync` the core asks for before it closes the log
//! clean.
//!
//! Fallbacks: no log configured, or a log that cannot be opened, read or marked in use, means
//! on-demand warm-up (the cache fills from misses); a log write that fails stops the logging
//! and is reported in the status.

use std::fs::{File, OpenOptions};
use std::io::Seek;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Instant;

use anyhow::Result;
use cordillera_warmup::algorithms::Algorithm;
use cordillera_warmup::warm::{self, CacheIo, LogReader, WarmCache};

pub use cordillera_warmup::warm::{WarmupSource, SAMPLE_S};

use crate::disk::DiskFile;

const BLOCK: u64 = warm::BLOCK;

#[derive(Clone, Debug)]
pub struct CacheOptions {
    pub cache_bytes: u64,
    /// The warm-up log file (created if absent); `None`: no monitoring, on-demand warm-up.
    pub log: Option<PathBuf>,
    /// Size of a new log file.
    pub log_bytes: u64,
    /// Log the data too (the performance snapshot, metadata+data).
    pub log_data: bool,
    /// How much to pre-load at start.
    pub warmup_bytes: u64,
    /// Which logged blocks the pre-load chooses (Last-K: the newest).
    pub algorithm: Algorithm,
    pub metadata_buffer_bytes: usize,
    pub data_buffer_bytes: usize,
}

impl CacheOptions {
    /// Bytes to warm up, from `--warmup-size`: a percentage of the cache (`25%`) or a size.
    pub fn warmup_bytes_of(spec: &str, cache_bytes: u64) -> Result<u64, String> {
        match spec.strip_suffix('%') {
            Some(p) => {
                let p: f64 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad percentage {spec:?}"))?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("a percentage of the cache, 0–100".into());
                }
                Ok((cache_bytes as f64 * p / 100.0) as u64)
            }
            None => cordillera_models::presets::parse_size(spec),
        }
    }

    pub fn new(cache_bytes: u64) -> CacheOptions {
        let core = warm::Options::new(cache_bytes);
        CacheOptions {
            cache_bytes,
            log: None,
            log_bytes: core.log_bytes,
            log_data: core.log_data,
            warmup_bytes: core.warmup_bytes,
            algorithm: core.algorithm,
            metadata_buffer_bytes: core.metadata_buffer_bytes,
            data_buffer_bytes: core.data_buffer_bytes,
        }
    }

    fn core(&self) -> warm::Options {
        let id = rand_id();
        warm::Options {
            cache_bytes: self.cache_bytes,
            log_bytes: self.log_bytes,
            log_data: self.log_data,
            warmup_bytes: self.warmup_bytes,
            algorithm: self.algorithm,
            seed: id,
            metadata_buffer_bytes: self.metadata_buffer_bytes,
            data_buffer_bytes: self.data_buffer_bytes,
            new_instance: id,
            safeguards: Default::default(),
        }
    }
}

/// A log command for the writer thread.
enum LogJob {
    Resize { id: u64, length_bytes: u64 },
    Write { id: u64, offset: u64, data: Vec<u8> },
    Sync { id: u64 },
}

/// The log file and its writer thread: commands are carried out in order, each answered.
struct LogFile {
    file: Arc<File>,
    device: bool,
    jobs: std_mpsc::Sender<LogJob>,
    done: std_mpsc::Receiver<(u64, Result<(), String>)>,
}

impl LogFile {
    fn open(path: &PathBuf) -> Result<LogFile, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        // A block device's size is where its end is (its metadata says 0).
        let device = file
            .metadata()
            .map_err(|e| e.to_string())?
            .file_type()
            .is_block_device();
        let file = Arc::new(file);
        let (jobs, rx) = std_mpsc::channel::<LogJob>();
        let (answers, done) = std_mpsc::channel();
        let f = file.clone();
        std::thread::Builder::new()
            .name("warmup-log".into())
            .spawn(move || {
                for job in rx {
                    let (id, r) = match job {
                        LogJob::Resize { id, length_bytes } => (id, f.set_len(length_bytes)),
                        LogJob::Write { id, offset, data } => (id, f.write_all_at(&data, offset)),
                        LogJob::Sync { id } => (id, f.sync_data()),
                    };
                    if answers.send((id, r.map_err(|e| e.to_string()))).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("starting the warm-up log's thread: {e}"))?;
        Ok(LogFile {
            file,
            device,
            jobs,
            done,
        })
    }
}

/// The log file as the core reads it.
struct FileReader<'a>(&'a LogFile);

impl LogReader for FileReader<'_> {
    fn length_bytes(&mut self) -> Result<u64, String> {
        (&*self.0.file)
            .seek(std::io::SeekFrom::End(0))
            .map_err(|e| e.to_string())
    }

    fn is_device(&self) -> bool {
        self.0.device
    }

    fn read(&mut self, offset: u64, length: usize) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; length];
        let mut got = 0;
        while got < length {
            match self.0.file.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Holes of a sparse file hold no chunk (`SEEK_DATA`).
    fn next_data(&mut self, offset: u64) -> u64 {
        let fd = self.0.file.as_raw_fd();
        // SAFETY: lseek on an open descriptor; SEEK_DATA past the last data fails (ENXIO),
        // which means no more chunks: the end.
        let r = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_DATA) };
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::ENXIO) => u64::MAX / 2,
                _ => offset,
            }
        } else {
            r as u64
        }
    }
}

/// The files around the cache core: its log file with the writer thread, and the base volume
/// to sync before the log is closed clean. The core itself is the volume's
/// (`cordillera_volume::Volume`); each call here takes it.
pub struct CacheLog {
    log: Option<LogFile>,
    log_path: Option<PathBuf>,
    volume: Arc<DiskFile>,
    started: Instant,
}

/// A log given but not marked "in use" now could be read by a later start whose superblock
/// still says clean: its data, older than what this run writes, would be pre-loaded. So a log
/// that cannot be used (opened, read, or marked) is an error, not a cold cache.
fn unusable(path: &std::path::Path, why: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: the warm-up log cannot be used ({why}); refusing to serve, since a later start could trust what it holds now. Repair or remove it, or start without --warmup-log",
        path.display()
    )
}

impl CacheLog {
    /// Opens the cache and its log, reads the log and plans the pre-load; the log is marked not
    /// clean (durably) and the snapshot loaded before this returns, so it must return before
    /// any request is served. Blocking.
    /// `started`: the driver's clock (times given to the core are nanoseconds since then).
    pub fn open(
        o: &CacheOptions,
        volume: Arc<DiskFile>,
        started: Instant,
    ) -> Result<(WarmCache, CacheLog)> {
        let log = match &o.log {
            Some(path) => Some(LogFile::open(path).map_err(|why| unusable(path, &why))?),
            None => None,
        };
        let now = started.elapsed().as_nanos() as u64;
        let mut reader = log.as_ref().map(FileReader);
        let mut core = WarmCache::open(
            now,
            o.core(),
            reader.as_mut().map(|r| r as &mut dyn LogReader),
        )
        .map_err(|e| anyhow::anyhow!("--cache-size: {e}"))?;
        let mut d = CacheLog {
            log,
            log_path: o.log.clone(),
            volume,
            started,
        };
        while !core.is_ready() {
            while let Some(io) = core.poll_io() {
                d.execute(&mut core, io);
            }
            d.wait(&mut core);
        }
        if let (Some(path), WarmupSource::Fallback(why)) = (&o.log, core.source()) {
            return Err(unusable(path, why));
        }
        if !matches!(
            core.source(),
            WarmupSource::Log | WarmupSource::LogWithData | WarmupSource::NewLog
        ) {
            d.log = None;
        }
        // Before any request: the snapshot's pages are the blocks' latest contents.
        let now = d.now();
        core.load_snapshot(now);
        Ok((core, d))
    }

    pub fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Carries out one of the core's commands (a pre-load read is not one: those go to the
    /// volume through the client).
    pub fn execute(&mut self, core: &mut WarmCache, io: CacheIo) {
        let now = self.now();
        let job = match io {
            CacheIo::VolumeRead {
                offset_bytes,
                ticket,
                ..
            } => {
                // Not ours to read: answered as failed (its blocks stay out of the cache)
                // rather than left outstanding.
                debug_assert!(false, "pre-load reads go to the volume through the client");
                core.preload_done(now, offset_bytes, None, ticket);
                return;
            }
            CacheIo::VolumeFlush => {
                let r = self
                    .volume
                    .sync()
                    .map_err(|e| format!("{}: {}", e.op, e.error));
                core.handle_volume_flushed(now, r);
                return;
            }
            CacheIo::LogResize { id, length_bytes } => LogJob::Resize { id, length_bytes },
            CacheIo::LogWrite {
                id,
                offset_bytes,
                data,
            } => LogJob::Write {
                id,
                offset: offset_bytes,
                data,
            },
            CacheIo::LogSync { id } => LogJob::Sync { id },
        };
        let id = match &job {
            LogJob::Resize { id, .. } | LogJob::Write { id, .. } | LogJob::Sync { id } => *id,
        };
        let sent = self.log.as_ref().is_some_and(|l| l.jobs.send(job).is_ok());
        if !sent {
            core.handle_log_done(now, id, Err("the warm-up log writer stopped".into()));
        }
    }

    /// Takes the writer's answers that have come.
    pub fn collect(&mut self, core: &mut WarmCache) {
        let now = self.now();
        if let Some(l) = self.log.as_ref() {
            while let Ok((id, r)) = l.done.try_recv() {
                core.handle_log_done(now, id, r);
            }
        }
    }

    /// Blocks for the writer's next answer.
    fn wait(&mut self, core: &mut WarmCache) {
        let answer = self.log.as_ref().map(|l| l.done.recv());
        let now = self.now();
        match answer {
            Some(Ok((id, r))) => core.handle_log_done(now, id, r),
            // No log, or its thread is gone: every command outstanding fails.
            _ => core.fail_log(now, "the warm-up log writer stopped".into()),
        }
    }

    /// Replaces the cache with an empty one and pre-loads it while running (`POST
    /// /cache/reset`). Blocking (it reads the log's headers and entries).
    pub fn reset(&mut self, core: &mut WarmCache) {
        let now = self.now();
        let bytes = core.options().warmup_bytes;
        match &self.log {
            Some(f) => core.handle_reset(now, bytes, Some(&mut FileReader(f))),
            None => core.handle_reset(now, bytes, None),
        }
    }

    /// Makes the base volume durable, writes what is staged and closes the log cleanly
    /// (blocking until it is synced). Call once every request is answered.
    pub fn close(&mut self, core: &mut WarmCache) -> Result<()> {
        core.hold_preload(true);
        core.handle_close(self.now());
        loop {
            self.collect(core);
            while let Some(io) = core.poll_io() {
                if !matches!(io, CacheIo::VolumeRead { .. }) {
                    self.execute(core, io);
                }
            }
            if let Some(r) = core.closed() {
                return r.clone().map_err(|e| anyhow::anyhow!(e));
            }
            self.wait(core);
        }
    }

    pub fn status_json(&self, core: &WarmCache) -> serde_json::Value {
        let mut v = serde_json::to_value(core.status()).unwrap_or_default();
        v["log"] = serde_json::json!(self.log_path.as_ref().map(|p| p.display().to_string()));
        v
    }
}

/// The cache's Prometheus metrics.
pub fn metrics(core: &WarmCache, out: &mut String) {
    use std::fmt::Write;
    let s = core.status();
    let mut metric = |name: &str, help: &str, kind: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    metric(
        "cordillera_cache_read_blocks_total",
        "4 KiB blocks read through the cache.",
        "counter",
        s.read_blocks as f64,
    );
    metric(
        "cordillera_cache_hit_blocks_total",
        "4 KiB blocks the cache held when read.",
        "counter",
        s.hit_blocks as f64,
    );
    metric(
        "cordillera_cache_read_hits_total",
        "Read requests answered from the cache.",
        "counter",
        s.read_hits as f64,
    );
    metric(
        "cordillera_cache_blocks",
        "Valid blocks in the cache.",
        "gauge",
        s.cached_blocks as f64,
    );
    metric(
        "cordillera_cache_preload_loaded_bytes",
        "Bytes pre-loaded into the cache at start.",
        "gauge",
        (s.warmup.loaded_blocks * BLOCK) as f64,
    );
    metric(
        "cordillera_cache_preload_seconds",
        "Time the pre-load took (-1 while it runs).",
        "gauge",
        s.warmup.seconds.unwrap_or(-1.0),
    );
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() | 1
}

#[cfg(test)]
mod tests;
