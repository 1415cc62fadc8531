//! A file or block device for the store core. Operations run on worker threads so that
//! concurrent writes reach the device concurrently; a flush is `fdatasync`, which makes every
//! write completed before it durable — exactly the core's contract.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;

use cordillera_vstore::store::{DiskDone, DiskOp, Store, WriteBytes};

mod buffers;
mod group_commit;

use buffers::BufferPool;

/// Worker threads: enough to keep a device's queue busy with the store's concurrent records.
pub const DISK_WORKERS: usize = 32;

/// A disk shared by worker threads; completions (or I/O errors) come back on a channel.
pub struct Disk {
    jobs: Arc<JobQueue>,
    workers: Vec<thread::JoinHandle<()>>,
}

/// The workers' queue: a job wakes one idle worker (a channel's receiver shared behind a mutex
/// woke two per job, the receiver and the next thread waiting for the mutex).
#[derive(Default)]
struct JobQueue {
    state: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

impl JobQueue {
    fn send(&self, job: Job) {
        self.state.lock().expect("disk queue").0.push_back(job);
        self.ready.notify_one();
    }

    /// The next job, or `None` once closed and drained.
    fn recv(&self) -> Option<Job> {
        let mut state = self.state.lock().expect("disk queue");
        loop {
            if let Some(job) = state.0.pop_front() {
                return Some(job);
            }
            if state.1 {
                return None;
            }
            state = self.ready.wait(state).expect("disk queue");
        }
    }

    fn close(&self) {
        self.state.lock().expect("disk queue").1 = true;
        self.ready.notify_all();
    }
}

/// Work for one worker: one operation, or writes to consecutive offsets done as one transfer.
enum Job {
    One(DiskOp),
    /// A read into a buffer allocated by the submitting thread: large buffers freed there
    /// too are then reused by the allocator instead of being mapped and faulted in afresh.
    Read {
        id: u64,
        offset_bytes: u64,
        length_bytes: u64,
        buffer: Vec<u8>,
    },
    Writes {
        offset_bytes: u64,
        writes: Vec<(u64, WriteBytes)>,
    },
}

/// The largest transfer a batch of consecutive writes is merged into.
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// A disk operation that failed: the store cannot continue safely.
#[derive(Debug)]
pub struct DiskError {
    pub op: &'static str,
    pub error: std::io::Error,
    /// The operations it failed (their ids; empty when not known): a volume fails just
    /// those requests, where a store, which cannot continue safely, stops.
    pub ids: Vec<u64>,
}

impl DiskError {
    fn new(op: &'static str, error: std::io::Error) -> DiskError {
        DiskError {
            op,
            error,
            ids: Vec::new(),
        }
    }

    /// The error, naming the operations it failed.
    pub fn of(mut self, ids: impl IntoIterator<Item = u64>) -> DiskError {
        self.ids.extend(ids);
        self
    }
}

/// The id of a disk operation.
pub fn op_id(op: &DiskOp) -> u64 {
    match op {
        DiskOp::Read { id, .. } | DiskOp::Write { id, .. } | DiskOp::Flush { id } => *id,
    }
}

/// The id of the operation a completion answers.
pub fn done_id(done: &DiskDone) -> u64 {
    match done {
        DiskDone::Read { id, .. } | DiskDone::Written { id } | DiskDone::Flushed { id } => *id,
    }
}

impl Disk {
    /// Starts the workers; each completion is passed to `done`.
    pub fn start(
        file: Arc<DiskFile>,
        done: impl Fn(Result<DiskDone, DiskError>) + Send + Sync + 'static,
    ) -> Disk {
        let jobs = Arc::new(JobQueue::default());
        let done = Arc::new(done);
        let workers = (0..DISK_WORKERS)
            .map(|_| {
                let (file, receiver, done) = (file.clone(), jobs.clone(), done.clone());
                thread::spawn(move || loop {
                    let job = receiver.recv();
                    match job {
                        None => return,
                        Some(Job::One(op)) => {
                            let id = op_id(&op);
                            done(file.execute(op).map_err(|e| e.of([id])))
                        }
                        Some(Job::Read {
                            id,
                            offset_bytes,
                            length_bytes,
                            buffer,
                        }) => done(
                            file.read(offset_bytes, length_bytes, buffer)
                                .map(|data| DiskDone::Read { id, data })
                                .map_err(|e| e.of([id])),
                        ),
                        Some(Job::Writes {
                            offset_bytes,
                            writes,
                        }) => {
                            let slices: Vec<&[u8]> =
                                writes.iter().flat_map(|(_, d)| d.slices()).collect();
                            match file.write_batch(offset_bytes, &slices) {
                                Ok(()) => {
                                    for (id, _) in writes {
                                        done(Ok(DiskDone::Written { id }));
                                    }
                                }
                                Err(e) => done(Err(e.of(writes.iter().map(|(id, _)| *id)))),
                            }
                        }
                    }
                })
            })
            .collect();
        Disk { jobs, workers }
    }

    pub fn submit(&self, op: DiskOp) {
        // The workers outlive every submitter (they stop when the sender is dropped).
        let job = match op {
            DiskOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => Job::Read {
                id,
                offset_bytes,
                length_bytes,
                buffer: Vec::with_capacity(length_bytes as usize),
            },
            op => Job::One(op),
        };
        self.jobs.send(job);
    }

    /// Submits operations in order, merging writes to consecutive offsets (the log's records
    /// at its head) into single transfers of up to [`MAX_BATCH_BYTES`]: fewer, larger device
    /// writes. Each write still completes individually, so the core's contract is unchanged.
    pub fn submit_all(&self, ops: impl IntoIterator<Item = DiskOp>) {
        let mut batch: Option<WriteBatch> = None;
        for op in ops {
            match op {
                DiskOp::Write {
                    id,
                    offset_bytes,
                    data,
                    durable: false,
                } => {
                    if let Some(b) = &mut batch {
                        if b.end == offset_bytes && b.bytes + data.len() <= MAX_BATCH_BYTES {
                            b.push(id, data);
                            continue;
                        }
                    }
                    if let Some(full) = batch.replace(WriteBatch::new(offset_bytes)) {
                        self.jobs.send(full.into_job());
                    }
                    batch.as_mut().expect("a batch").push(id, data);
                }
                other => {
                    if let Some(b) = batch.take() {
                        self.jobs.send(b.into_job());
                    }
                    self.submit(other);
                }
            }
        }
        if let Some(b) = batch {
            self.jobs.send(b.into_job());
        }
    }

    /// Stops the workers after the queued operations.
    pub fn stop(mut self) {
        self.jobs.close();
        for w in std::mem::take(&mut self.workers) {
            let _ = w.join();
        }
    }
}

impl Drop for Disk {
    /// The workers finish the queued operations and exit (as with a dropped channel).
    fn drop(&mut self) {
        self.jobs.close();
    }
}

/// Writes to consecutive offsets being gathered into one transfer.
struct WriteBatch {
    offset_bytes: u64,
    end: u64,
    bytes: usize,
    writes: Vec<(u64, WriteBytes)>,
}

impl WriteBatch {
    fn new(offset_bytes: u64) -> WriteBatch {
        WriteBatch {
            offset_bytes,
            end: offset_bytes,
            bytes: 0,
            writes: Vec::new(),
        }
    }

    fn push(&mut self, id: u64, data: WriteBytes) {
        self.end += data.len() as u64;
        self.bytes += data.len();
        self.writes.push((id, data));
    }

    fn into_job(mut self) -> Job {
        if self.writes.len() == 1 {
            let (id, data) = self.writes.pop().expect("one write");
            return Job::One(DiskOp::Write {
                id,
                offset_bytes: self.offset_bytes,
                data,
                durable: false,
            });
        }
        Job::Writes {
            offset_bytes: self.offset_bytes,
            writes: self.writes,
        }
    }
}

/// How a store opens its file or device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// `O_DIRECT` where the file system supports it, buffered I/O elsewhere.
    #[default]
    Auto,
    /// `O_DIRECT`: transfers bypass the page cache; an error where unsupported.
    Direct,
    /// Through the page cache; `fdatasync` writes it back.
    Buffered,
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "direct" => Ok(IoMode::Direct),
            "buffered" => Ok(IoMode::Buffered),
            _ => Err(format!("unknown I/O mode {s:?} (auto, direct or buffered)")),
        }
    }
}

/// A store's file or device, opened for buffered I/O or with `O_DIRECT`.
pub struct DiskFile {
    pub file: File,
    /// With `O_DIRECT`, a second, buffered descriptor for reads.
    reader: Option<File>,
    /// With `O_DIRECT`, writes go through 4 KiB-aligned buffers at 512-byte-aligned offsets.
    pub direct: bool,
    /// Aligned buffers kept for reuse: a fresh multi-megabyte allocation per write would cost
    /// a page fault and a page clearing for every 4 KiB it covers.
    buffers: BufferPool,
    /// When set, operations also take the modeled device's time ([`DiskFile::emulate`]).
    emulator: std::sync::OnceLock<crate::emulate::Emulator>,
    /// One `fdatasync` for the callers of [`DiskFile::sync`] meanwhile.
    commits: group_commit::GroupCommit,
}

/// `O_DIRECT` alignment of offsets and lengths (the logical block size of common devices).
const DIRECT_ALIGN: u64 = 512;
/// Memory alignment of `O_DIRECT` buffers.
const DIRECT_MEMORY_ALIGN: usize = 4096;

impl DiskFile {
    pub fn open(path: &std::path::Path, create: bool, mode: IoMode) -> std::io::Result<DiskFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |direct: bool| {
            let mut options = std::fs::OpenOptions::new();
            options
                .read(true)
                .write(true)
                .create(create)
                .truncate(false);
            if direct {
                options.custom_flags(libc::O_DIRECT);
            }
            let file = options.open(path)?;
            let reader = if direct {
                Some(std::fs::File::open(path)?)
            } else {
                None
            };
            Ok(DiskFile {
                file,
                reader,
                direct,
                buffers: BufferPool::default(),
                emulator: std::sync::OnceLock::new(),
                commits: group_commit::GroupCommit::default(),
            })
        };
        match mode {
            IoMode::Direct => open(true),
            IoMode::Buffered => open(false),
            // File systems without O_DIRECT (tmpfs, some FUSE) refuse the flag with EINVAL.
            IoMode::Auto => match open(true) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open(false),
                other => other,
            },
        }
    }

    /// From now on, every read and write also takes the time `emulator`'s device model
    /// gives it (see [`crate::emulate`]); a second call changes nothing.
    pub fn emulate(&self, emulator: crate::emulate::Emulator) {
        let _ = self.emulator.set(emulator);
    }

    /// The device model this file's operations take their time from, if any.
    pub fn emulator(&self) -> Option<crate::emulate::Emulator> {
        self.emulator.get().cloned()
    }

    fn emulated(
        &self,
        op: cordillera_types::Op,
        offset_bytes: u64,
        bytes: u64,
    ) -> Option<crate::emulate::Ticket> {
        self.emulator
            .get()
            .map(|e| e.begin(op, offset_bytes, bytes))
    }

    /// Writes `slices` back to back from `offset_bytes` in one transfer.
    pub fn write_batch(&self, offset_bytes: u64, slices: &[&[u8]]) -> Result<(), DiskError> {
        let total: usize = slices.iter().map(|d| d.len()).sum();
        let ticket = self.emulated(cordillera_types::Op::Write, offset_bytes, total as u64);
        let result = self.write_batch_now(offset_bytes, slices, total);
        if let Some(t) = ticket {
            t.wait();
        }
        result
    }

    fn write_batch_now(
        &self,
        offset_bytes: u64,
        slices: &[&[u8]],
        total: usize,
    ) -> Result<(), DiskError> {
        if self.direct {
            if !offset_bytes.is_multiple_of(DIRECT_ALIGN)
                || !(total as u64).is_multiple_of(DIRECT_ALIGN)
            {
                let error = std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "unaligned write with O_DIRECT",
                );
                return Err(DiskError::new("write (O_DIRECT)", error));
            }
            let mut buffer = self.buffers.take(total);
            let mut at = 0;
            for data in slices {
                buffer.as_mut()[at..at + data.len()].copy_from_slice(data);
                at += data.len();
            }
            let result = self
                .file
                .write_all_at(&buffer.as_mut()[..total], offset_bytes)
                .map_err(|error| DiskError::new("write (O_DIRECT)", error));
            self.buffers.give_back(buffer);
            return result;
        }
        write_all_vectored_at(&self.file, slices, offset_bytes)
            .map_err(|error| DiskError::new("write", error))
    }

    /// Runs one operation.
    pub fn execute(&self, op: DiskOp) -> Result<DiskDone, DiskError> {
        match op {
            DiskOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => Ok(DiskDone::Read {
                id,
                data: self.read(offset_bytes, length_bytes, Vec::new())?,
            }),
            DiskOp::Write {
                id,
                offset_bytes,
                data,
                durable,
            } => {
                self.write_batch(offset_bytes, &data.slices())?;
                if durable {
                    self.sync()?;
                }
                Ok(DiskDone::Written { id })
            }
            DiskOp::Flush { id } => {
                self.sync()?;
                Ok(DiskDone::Flushed { id })
            }
        }
    }

    /// Tells the kernel that reads will be sequential (a larger read-ahead window, as for
    /// recovery's scan of the log), or back to the default for the random reads of serving.
    pub fn advise_sequential(&self, sequential: bool) {
        use std::os::unix::io::AsRawFd;
        let advice = if sequential {
            libc::POSIX_FADV_SEQUENTIAL
        } else {
            libc::POSIX_FADV_NORMAL
        };
        let fd = self.reader.as_ref().unwrap_or(&self.file).as_raw_fd();
        // SAFETY: a valid descriptor; the call only changes read-ahead policy. Advice is a
        // hint: a failure changes nothing that matters for correctness.
        unsafe { libc::posix_fadvise(fd, 0, 0, advice) };
    }

    /// `fdatasync`: every write completed before the call is durable when it returns. Callers
    /// that arrive while one runs share the next (group commit, `group_commit.rs`); after a
    /// failed one every later call fails.
    pub fn sync(&self) -> Result<(), DiskError> {
        self.commits
            .sync(|| self.file.sync_data())
            .map_err(|error| DiskError::new("fdatasync", error))
    }

    /// How many `fdatasync`s [`DiskFile::sync`] has run (callers meanwhile share one).
    pub fn syncs(&self) -> u64 {
        self.commits.started()
    }

    /// Reads `length_bytes` at `offset_bytes` into `buffer` (its capacity reused, its
    /// contents replaced); past the end of the file reads as zeros. Reads always go through
    /// the page cache (the buffered descriptor): the kernel keeps it coherent with `O_DIRECT`
    /// writes, and recovery and reclaim read sequentially, where read-ahead helps.
    pub fn read(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
        buffer: Vec<u8>,
    ) -> Result<Vec<u8>, DiskError> {
        let ticket = self.emulated(cordillera_types::Op::Read, offset_bytes, length_bytes);
        let result = self.read_now(offset_bytes, length_bytes, buffer);
        if let Some(t) = ticket {
            t.wait();
        }
        result
    }

    /// Reads `[offset_bytes, offset_bytes + length_bytes)` at once if the page cache holds
    /// all of it: `preadv2` with `RWF_NOWAIT` never waits for the device, so the calling
    /// thread (a server's event loop) can do it in place of a hand-off to a worker and back.
    /// `None` when the cache does not hold it all, when the file is emulated (the model must
    /// take its time), past the end of the file, or on any error: the caller then reads
    /// through the workers, which report errors.
    pub fn read_cached(&self, offset_bytes: u64, length_bytes: u64) -> Option<Vec<u8>> {
        use std::os::unix::io::AsRawFd;
        if self.emulator.get().is_some() || length_bytes == 0 {
            return None;
        }
        let length = usize::try_from(length_bytes).ok()?;
        let offset = libc::off_t::try_from(offset_bytes).ok()?;
        let mut buffer: Vec<u8> = Vec::with_capacity(length);
        let iov = libc::iovec {
            iov_base: buffer.as_mut_ptr() as *mut libc::c_void,
            iov_len: length,
        };
        let fd = self.reader.as_ref().unwrap_or(&self.file).as_raw_fd();
        // SAFETY: one iovec over the buffer's spare capacity of `length` bytes.
        let n = unsafe { libc::preadv2(fd, &iov, 1, offset, libc::RWF_NOWAIT) };
        if n < 0 || n as usize != length {
            return None;
        }
        // SAFETY: the read above wrote all `length` bytes.
        unsafe { buffer.set_len(length) };
        Some(buffer)
    }

    fn read_now(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
        mut buffer: Vec<u8>,
    ) -> Result<Vec<u8>, DiskError> {
        use std::os::unix::io::AsRawFd;
        let length = length_bytes as usize;
        buffer.clear();
        buffer.reserve_exact(length);
        let fd = self.reader.as_ref().unwrap_or(&self.file).as_raw_fd();
        let mut filled = 0;
        while filled < length {
            // SAFETY: reads into the buffer's spare capacity, which holds `length` bytes.
            let n = unsafe {
                libc::pread(
                    fd,
                    buffer.as_mut_ptr().add(filled) as *mut libc::c_void,
                    length - filled,
                    (offset_bytes + filled as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(DiskError::new("read", error));
            }
            if n == 0 {
                break;
            }
            filled += n as usize;
        }
        // SAFETY: the first `filled` bytes were written by the reads above.
        unsafe { buffer.set_len(filled) };
        buffer.resize(length, 0);
        Ok(buffer)
    }
}

/// `pwritev` of every slice, back to back from `offset`, retried until all is written.
fn write_all_vectored_at(file: &File, slices: &[&[u8]], mut offset: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let mut first = 0;
    let mut skip = 0;
    loop {
        // Past what is written and any empty slices (a record without payload or padding).
        while first < slices.len() && slices[first].len() == skip {
            first += 1;
            skip = 0;
        }
        if first == slices.len() {
            break;
        }
        let iovecs: Vec<libc::iovec> = slices[first..]
            .iter()
            .take(libc::UIO_MAXIOV as usize)
            .enumerate()
            .map(|(i, s)| {
                let s = if i == 0 { &s[skip..] } else { s };
                libc::iovec {
                    iov_base: s.as_ptr() as *mut libc::c_void,
                    iov_len: s.len(),
                }
            })
            .collect();
        // SAFETY: every iovec points into a live slice for the duration of the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iovecs.as_ptr(),
                iovecs.len() as libc::c_int,
                offset as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        offset += n as u64;
        (first, skip) = advance_slices(slices, (first, skip), n as usize);
    }
    Ok(())
}

/// Drives `store` until it asks for nothing more and every operation has completed, with
/// operations running concurrently on worker threads: recovery reads ahead while it verifies.
pub fn run_to_quiet_concurrently(
    store: &mut Store,
    file: Arc<DiskFile>,
    now: impl Fn() -> u64,
) -> Result<(), DiskError> {
    let (sender, completions) = mpsc::channel();
    let disk = Disk::start(file, move |done| {
        let _ = sender.send(done);
    });
    let mut outstanding = 0usize;
    let result = loop {
        let ops: Vec<DiskOp> = std::iter::from_fn(|| store.poll_disk()).collect();
        outstanding += ops.len();
        disk.submit_all(ops);
        if outstanding == 0 {
            break Ok(());
        }
        match completions.recv().expect("workers are running") {
            Ok(done) => {
                outstanding -= 1;
                store.handle_disk(now(), done);
            }
            Err(e) => break Err(e),
        }
    };
    disk.stop();
    result
}

/// Drives `store` synchronously until it asks for nothing more: for formatting and offline
/// inspection.
pub fn run_to_quiet(store: &mut Store, file: &DiskFile, now: u64) -> Result<(), DiskError> {
    while let Some(op) = store.poll_disk() {
        let done = file.execute(op)?;
        store.handle_disk(now, done);
    }
    Ok(())
}

/// Asks the kernel to drop `file`'s cached pages (after writing them back), so the next reads
/// come from the device: `fdatasync` then `posix_fadvise(DONTNEED)`.
pub fn drop_cached_pages(file: &File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    file.sync_data()?;
    // SAFETY: a valid descriptor and a whole-file range; the call only changes cache state.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

#[cfg(test)]
mod tests;

/// Where a vectored transfer of `slices` continues after `n` more bytes went from `(first,
/// skip)`: the slice and the bytes of it already done.
pub(crate) fn advance_slices(
    slices: &[&[u8]],
    (mut first, mut skip): (usize, usize),
    mut n: usize,
) -> (usize, usize) {
    while n > 0 {
        let left = slices[first].len() - skip;
        if n >= left {
            n -= left;
            first += 1;
            skip = 0;
        } else {
            skip += n;
            n = 0;
        }
    }
    (first, skip)
}
