//! A file or block device for the store core. Operations run on worker threads so that
//! concurrent writes reach the device concurrently; a flush is `fdatasync`, which makes every
//! write completed before it durable — exactly the core's contract.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use cordillera_vstore::store::{DiskDone, DiskOp, Store};

/// Worker threads: enough to keep a device's queue busy with the store's concurrent records.
pub const DISK_WORKERS: usize = 8;

/// A disk shared by worker threads; completions (or I/O errors) come back on a channel.
pub struct Disk {
    jobs: mpsc::Sender<DiskOp>,
    workers: Vec<thread::JoinHandle<()>>,
}

/// A disk operation that failed: the store cannot continue safely.
#[derive(Debug)]
pub struct DiskError {
    pub op: &'static str,
    pub error: std::io::Error,
}

impl Disk {
    /// Starts the workers; each completion is passed to `done`.
    pub fn start(
        file: DiskFile,
        done: impl Fn(Result<DiskDone, DiskError>) + Send + Sync + 'static,
    ) -> Disk {
        let file = Arc::new(file);
        let (jobs, receiver) = mpsc::channel::<DiskOp>();
        let receiver = Arc::new(Mutex::new(receiver));
        let done = Arc::new(done);
        let workers = (0..DISK_WORKERS)
            .map(|_| {
                let (file, receiver, done) = (file.clone(), receiver.clone(), done.clone());
                thread::spawn(move || loop {
                    let job = receiver.lock().expect("disk queue").recv();
                    let Ok(op) = job else { return };
                    done(file.execute(op));
                })
            })
            .collect();
        Disk { jobs, workers }
    }

    pub fn submit(&self, op: DiskOp) {
        // The workers outlive every submitter (they stop when the sender is dropped).
        let _ = self.jobs.send(op);
    }

    /// Stops the workers after the queued operations.
    pub fn stop(self) {
        drop(self.jobs);
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// A store's file or device, opened for buffered I/O or with `O_DIRECT`.
pub struct DiskFile {
    pub file: File,
    /// With `O_DIRECT`, transfers go through 4 KiB-aligned buffers at 512-byte-aligned offsets.
    pub direct: bool,
}

/// `O_DIRECT` alignment of offsets and lengths (the logical block size of common devices).
const DIRECT_ALIGN: u64 = 512;
/// Memory alignment of `O_DIRECT` buffers.
const DIRECT_MEMORY_ALIGN: usize = 4096;

impl DiskFile {
    pub fn open(path: &std::path::Path, create: bool, direct: bool) -> std::io::Result<DiskFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::OpenOptions::new();
        options
            .read(true)
            .write(true)
            .create(create)
            .truncate(false);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        Ok(DiskFile {
            file: options.open(path)?,
            direct,
        })
    }

    /// Runs one operation.
    pub fn execute(&self, op: DiskOp) -> Result<DiskDone, DiskError> {
        if !self.direct {
            return execute(&self.file, op);
        }
        match op {
            DiskOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => {
                let start = offset_bytes / DIRECT_ALIGN * DIRECT_ALIGN;
                let end = (offset_bytes + length_bytes).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
                let mut buffer = AlignedBuffer::new((end - start) as usize);
                let mut filled = 0;
                while filled < buffer.len() {
                    match self
                        .file
                        .read_at(&mut buffer.as_mut()[filled..], start + filled as u64)
                    {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(error) => {
                            return Err(DiskError {
                                op: "read (O_DIRECT)",
                                error,
                            })
                        }
                    }
                }
                let from = (offset_bytes - start) as usize;
                Ok(DiskDone::Read {
                    id,
                    data: buffer.as_mut()[from..from + length_bytes as usize].to_vec(),
                })
            }
            DiskOp::Write {
                id,
                offset_bytes,
                data,
            } => {
                if !offset_bytes.is_multiple_of(DIRECT_ALIGN)
                    || !(data.len() as u64).is_multiple_of(DIRECT_ALIGN)
                {
                    let error = std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "unaligned write with O_DIRECT",
                    );
                    return Err(DiskError {
                        op: "write (O_DIRECT)",
                        error,
                    });
                }
                let mut buffer = AlignedBuffer::new(data.len());
                buffer.as_mut().copy_from_slice(&data);
                self.file
                    .write_all_at(buffer.as_mut(), offset_bytes)
                    .map_err(|error| DiskError {
                        op: "write (O_DIRECT)",
                        error,
                    })?;
                Ok(DiskDone::Written { id })
            }
            DiskOp::Flush { .. } => execute(&self.file, op),
        }
    }
}

/// A zeroed heap buffer aligned for `O_DIRECT`.
struct AlignedBuffer {
    pointer: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AlignedBuffer {
    fn new(len: usize) -> AlignedBuffer {
        let layout = std::alloc::Layout::from_size_align(len.max(1), DIRECT_MEMORY_ALIGN)
            .expect("buffer layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let pointer =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuffer { pointer, layout }
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `len` initialized (zeroed) bytes owned by this buffer.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.pointer.as_ptr(), self.layout) }
    }
}

// SAFETY: the buffer owns its allocation exclusively.
unsafe impl Send for AlignedBuffer {}

/// Runs one operation (buffered I/O).
pub fn execute(file: &File, op: DiskOp) -> Result<DiskDone, DiskError> {
    match op {
        DiskOp::Read {
            id,
            offset_bytes,
            length_bytes,
        } => {
            let mut data = vec![0u8; length_bytes as usize];
            let mut filled = 0;
            while filled < data.len() {
                match file.read_at(&mut data[filled..], offset_bytes + filled as u64) {
                    // Past the end of a file reads as zeros (never written).
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(error) => return Err(DiskError { op: "read", error }),
                }
            }
            Ok(DiskDone::Read { id, data })
        }
        DiskOp::Write {
            id,
            offset_bytes,
            data,
        } => {
            file.write_all_at(&data, offset_bytes)
                .map_err(|error| DiskError { op: "write", error })?;
            Ok(DiskDone::Written { id })
        }
        DiskOp::Flush { id } => {
            file.sync_data().map_err(|error| DiskError {
                op: "fdatasync",
                error,
            })?;
            Ok(DiskDone::Flushed { id })
        }
    }
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
